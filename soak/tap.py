"""The tapped connection: a byte stream under :class:`zotd.client.Client`
that counts every response id passing by, and notes the ``cancel`` requests
and their replies, which the client itself ignores.
"""

from __future__ import annotations

from collections import Counter

import anyio.abc
import msgspec
import trio


class _Error(msgspec.Struct):
    code: str = ""


class _Response(msgspec.Struct):
    id: int | str | None = None
    error: _Error | None = None
    data: msgspec.Raw = msgspec.Raw()


class _Cancel(msgspec.Struct):
    type: str
    id: int | str | None = None
    request_id: int | str | None = None


class _CancelData(msgspec.Struct):
    cancelled: bool


_CANCEL = b'"type":"cancel"'


class TapStream(anyio.abc.ByteStream):
    """A connection that counts every response id passing by, so that a second
    reply to one request (which :class:`Client` would silently ignore) is seen.

    It also notes the ``cancel`` requests the client sends when a call is
    given up, and the replies to them and to the calls they name, which the
    client ignores: each must come, once (see :meth:`soak.state.Soak.audit_cancels`).
    """

    def __init__(self, inner: anyio.abc.ByteStream) -> None:
        self.inner = inner
        self.ids: Counter[int | str | None] = Counter()
        #: ``cancel`` requests sent: their id -> the id of the call they give up.
        self.cancels: dict[int | str | None, int | str | None] = {}
        #: Replies to those: ``cancelled`` true (the call was in flight) or false.
        self.cancel_results: dict[int | str | None, bool] = {}
        #: Requests answered with a ``cancelled`` error.
        self.cancelled: set[int | str | None] = set()
        #: ``cancel`` replies saying true that came before the call's own reply.
        self.misordered: list[int | str | None] = []
        self._buf = b""
        self._arrived = trio.Event()
        #: Set while the client reads; cleared by :meth:`hold`.
        self._reading = trio.Event()
        self._reading.set()
        #: Bytes the client has written (all of them taken by the daemon's socket).
        self.sent_bytes = 0

    def hold(self) -> None:
        """Stops reading: the client's reader waits until :meth:`release` (a
        read already under way still returns what it gets)."""
        self._reading = trio.Event()

    def release(self) -> None:
        """Reads again."""
        self._reading.set()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await self._reading.wait()
        data = await self.inner.receive(max_bytes)
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            if line.startswith(b'{"type":"response"'):
                try:
                    reply = msgspec.json.decode(line, type=_Response)
                except msgspec.DecodeError:
                    self.ids["<unreadable>"] += 1
                    continue
                rid = reply.id
                self.ids[rid] += 1
                if reply.error is not None and reply.error.code == "cancelled":
                    self.cancelled.add(rid)
                if rid in self.cancels:
                    try:
                        result = msgspec.json.decode(reply.data, type=_CancelData).cancelled
                    except msgspec.DecodeError:
                        continue  # a failed cancel: the audit says so
                    self.cancel_results[rid] = result
                    if result and not self.ids[self.cancels[rid]]:
                        self.misordered.append(rid)
        if lines:
            self._arrived.set()
            self._arrived = trio.Event()
        return data

    async def send(self, item: bytes) -> None:
        if _CANCEL in item:
            for line in item.split(b"\n"):
                if _CANCEL in line:
                    try:
                        frame = msgspec.json.decode(line, type=_Cancel)
                    except msgspec.DecodeError:
                        continue
                    if frame.type == "cancel":
                        self.cancels[frame.id] = frame.request_id
        await self.inner.send(item)
        self.sent_bytes += len(item)

    async def settled(self) -> None:
        """Returns once every ``cancel`` sent has its reply, and so has its call."""
        while any(not self.ids[cid] or not self.ids[call] for cid, call in self.cancels.items()):
            await self._arrived.wait()

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()
