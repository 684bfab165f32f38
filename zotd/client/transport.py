"""The client's I/O (anyio): the socket, its reader and writer, waking callers.

:class:`Transport` moves bytes between a stream and a sans-IO
:class:`~zotd.client.connection.Connection` and parks each caller until its
reply comes; :class:`~zotd.client.Client` adds one method per request. On a
socket, reads and writes are non-blocking calls on the socket itself (no
task switch when the data is there or the kernel takes it); other streams
(the soak's taps, say) get the stream's own methods. Under trio a waiting
caller is parked and rescheduled directly, without an ``anyio.Event``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.abc import SocketAttribute

from ..model.peercred import peer_uid
from ..protocol import agent as ap
from ..protocol.lines import DEFAULT_MAX_LINE
from .connection import Connection, Pending, ProgressCallback
from .errors import WrongUser, ZotdError

if TYPE_CHECKING:
    import trio

#: Push frames buffered for :meth:`Transport.notifications` before new ones are dropped.
PUSH_BUFFER = 1024

_READ_SIZE = 64 * 1024


class _Slot:
    """Where a caller waits for its reply; any event loop (anyio)."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = anyio.Event()

    def wake(self) -> None:
        self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


class _TrioSlot:
    """A :class:`_Slot` for trio: the waiting task is parked and rescheduled
    directly, without an Event (this is on the path of every call).

    trio is imported only by programs that run on it: the imports below find
    it loaded already.
    """

    __slots__ = ("done", "task")

    def __init__(self) -> None:
        self.task: trio.lowlevel.Task | None = None
        self.done = False

    def wake(self) -> None:
        self.done = True
        if self.task is not None:
            _trio_lowlevel.reschedule(self.task)
            self.task = None

    async def wait(self) -> None:
        lowlevel = _trio_lowlevel
        if self.done:
            await lowlevel.checkpoint()
            return
        self.task = lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self.task = None
            succeeded: trio.lowlevel.Abort = lowlevel.Abort.SUCCEEDED
            return succeeded

        await lowlevel.wait_task_rescheduled(abort)


#: ``trio.lowlevel``, once a client was made in a trio task.
_trio_lowlevel: Any = None


def _on_trio() -> bool:
    """Whether this runs in a trio task (without importing trio otherwise)."""
    global _trio_lowlevel
    trio_module = sys.modules.get("trio")
    if trio_module is None:
        return False
    try:
        trio_module.lowlevel.current_task()
    except RuntimeError:
        return False
    _trio_lowlevel = trio_module.lowlevel
    return True


def check_peer(sock: socket.socket, expected_uid: int | None = None) -> None:
    """Makes sure the daemon at the other end of a Unix socket runs as
    ``expected_uid`` (default: this process's effective uid), before a byte
    is sent to it: a ``hello`` may carry the token.

    Another user who could bind the socket path first (a shared or
    writable directory, a socket left by their daemon) would otherwise
    take the client's requests, and its token. The peer's uid is what the
    kernel recorded when it listened (``SO_PEERCRED`` on Linux,
    ``LOCAL_PEERCRED`` on macOS and the BSDs); on a platform with neither,
    nothing is checked. Other socket families are not checked.

    Raises:
        WrongUser: the peer runs as another user.
    """
    if sock.family != socket.AF_UNIX:
        return
    uid = peer_uid(sock)
    expected = os.geteuid() if expected_uid is None else expected_uid
    if uid is not None and uid != expected:
        try:
            name = sock.getpeername()
        except OSError:
            name = ""
        if isinstance(name, bytes):
            name = os.fsdecode(name)
        raise WrongUser(str(name) or "the socket", uid, expected)


class Transport:
    """One connection's I/O: :meth:`run` reads and writes; callers wait in
    :meth:`_call` for their replies.

    Requests may be sent from many tasks at once; each waits for its own
    reply. A request sent while the connection is idle is written at once;
    requests sent while a write is under way go out together in the next.

    On a Unix socket, the process at the other end must run as
    ``expected_uid`` (default: this process's effective uid), checked
    before anything is sent (see :func:`check_peer`).

    Raises:
        WrongUser: the socket is served by another user's process.
    """

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        *,
        max_frame_bytes: int = DEFAULT_MAX_LINE,
        expected_uid: int | None = None,
    ) -> None:
        self._stream = stream
        # The socket under the stream, for non-blocking reads and writes
        # without a task switch; None for other streams (they get the
        # stream's own methods).
        self._sock: socket.socket | None = stream.extra(SocketAttribute.raw_socket, None)
        if self._sock is not None:
            check_peer(self._sock, expected_uid)
        self._conn: Connection[_Slot | _TrioSlot] = Connection(max_frame_bytes)
        self._slot: type[_Slot | _TrioSlot] = _TrioSlot if _on_trio() else _Slot
        self._queue: list[bytes] = []
        self._writing = False
        self._kick = anyio.Event()
        self._push_send, self._push_recv = anyio.create_memory_object_stream[ap.Push](PUSH_BUFFER)
        #: Push frames dropped because nobody read :meth:`notifications`.
        self.dropped = 0

    async def run(self) -> None:
        """Reads replies and writes requests until the connection ends or this is cancelled.

        Either way every request still waiting then fails with
        ``connection_lost``, and :meth:`notifications` ends. It never raises
        for the connection's own failures; cancellation is re-raised.
        """
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write_loop)
                await self._read_loop()
                tg.cancel_scope.cancel()
        finally:
            self._lose("the connection to zotd was closed")
            self._push_send.close()

    def notifications(self) -> AsyncIterator[ap.Push]:
        """Push frames until the connection closes: ``notify`` and
        ``extension_state`` (after :meth:`~zotd.client.Client.subscribe`),
        and those meant for this connection alone, subscribed or not:
        ``panel_render`` and ``panel_close`` of the panels its commands
        opened, and ``tool_progress`` of its calls made without
        ``on_progress``.

        Iterate it with ``async for``.
        """
        return self._push_recv

    def _close_pushes(self) -> None:
        self._push_send.close()
        self._push_recv.close()

    def _lose(self, why: str) -> None:
        # Every request still waiting fails now: nothing waits for a reply
        # that cannot come.
        for slot in self._conn.lose(why):
            slot.wake()

    # --- in -------------------------------------------------------------------------

    async def _receive(self, waited: bool) -> bytes:
        sock = self._sock
        if sock is None:
            return await self._stream.receive()
        if not waited:
            await anyio.lowlevel.checkpoint()  # the last read did not wait: be fair
        while True:
            try:
                chunk = sock.recv(_READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(sock)
                continue
            if not chunk:
                raise anyio.EndOfStream
            return chunk

    async def _read_loop(self) -> None:
        receive_data = self._conn.receive_data
        push = self._push_send.send_nowait
        waited = True
        while True:
            try:
                chunk = await self._receive(waited)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except OSError as exc:
                self._lose(f"the connection to zotd failed: {exc.strerror or exc}")
                return
            waited = False
            for event in receive_data(chunk):
                if isinstance(event, Pending):
                    event.waiter.wake()
                    continue
                try:
                    push(event)
                except anyio.WouldBlock:
                    self.dropped += 1

    # --- out ------------------------------------------------------------------------

    def _send(self, line: bytes) -> None:
        # A lone request on an idle connection is written now, by its own
        # task; with others in flight, requests are gathered for the writer
        # so that a burst costs one write (and one wakeup of zotd).
        sock = self._sock
        if sock is not None and not self._queue and not self._writing and self._conn.in_flight <= 1:
            try:
                sent = sock.send(line)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise ZotdError("connection_lost", f"cannot send to zotd: {exc}") from None
            if sent == len(line):
                return
            line = line[sent:]
        self._queue.append(line)
        self._kick.set()

    async def _write_loop(self) -> None:
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            self._writing = True  # until all of it is out, nothing is written inline
            while self._queue:
                data = b"".join(self._queue)
                self._queue.clear()
                try:
                    await self._write(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._lose(f"cannot send to zotd: {exc}")
                    return
            self._writing = False

    async def _write(self, data: bytes) -> None:
        sock = self._sock
        if sock is None:
            await self._stream.send(data)
            return
        view = memoryview(data)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(sock)

    # --- one request ----------------------------------------------------------------

    async def _call(
        self, request: ap.Request, on_progress: ProgressCallback | None = None
    ) -> ap.RawResponse:
        """Sends ``request`` and waits for its successful reply.

        If the wait is cancelled (a cancel scope or timeout around the
        caller) before the reply came, zotd is sent a ``cancel`` for a
        request it can give up, and the cancellation is re-raised.

        Raises:
            ZotdError: the reply's error, or the connection's.
        """
        # The hot path: one coroutine from the request to its reply.
        conn = self._conn
        slot = self._slot()
        rid, line = conn.send(request, slot, on_progress)
        try:
            self._send(line)
            await slot.wait()
        except BaseException:
            self._abandon(rid)
            raise
        return conn.finish(rid)

    async def _call_fields(self, type: str, fields: dict[str, Any]) -> ap.RawResponse:
        """As :meth:`_call`, for a request given as its ``type`` and fields."""
        slot = self._slot()
        rid, line = self._conn.send_fields(type, fields, slot)
        try:
            self._send(line)
            await slot.wait()
        except BaseException:
            self._abandon(rid)
            raise
        return self._conn.finish(rid)

    def _abandon(self, rid: int) -> None:
        # Given up here (cancelled, a timeout around it): tell zotd, which
        # tells the extensions.
        cancel = self._conn.abandon(rid)
        if cancel is not None:
            with contextlib.suppress(ZotdError):  # the connection is gone: nothing to tell
                self._send(cancel)
