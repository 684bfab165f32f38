"""A client as an agent in another language writes one: one request per write.

``zotd.client`` gathers the requests its callers make in one breath into one
write; most agents do not. :class:`RawClient` is plain Python on a blocking
Unix socket, with no event loop and no batching: every request line goes in
its own ``send``, and one reader matches the replies to the requests by id.
It drives ``call_tool`` on the echo extension (``echo_ext.py``, mode
``tool``) the same way against zotd and against the floor relay.

:meth:`RawClient.rate` keeps ``in_flight`` calls going: it writes that many
requests, one write each, then for every reply it reads writes the next
request, again one write each, until the time is up. Over the measured
interval it also reads the server's CPU time (user + system, from
``/proc/PID/stat``), so that what one call costs the server comes out
beside the calls per second.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

#: Ticks of the CPU time counters in ``/proc/PID/stat`` per second.
TICKS = os.sysconf("SC_CLK_TCK")


class Reply(msgspec.Struct):
    """What the client reads of a reply: enough to match it and check it."""

    type: str
    id: int | str | None = None
    success: bool = False
    data: msgspec.Raw = msgspec.Raw(b"null")
    error: msgspec.Raw = msgspec.Raw(b"null")


class CallData(msgspec.Struct):
    is_error: bool
    content: list[dict[str, object]]


_decode_reply = msgspec.json.Decoder(Reply).decode
_decode_call = msgspec.json.Decoder(CallData).decode
_encode = msgspec.json.Encoder().encode


def cpu_seconds(pid: int) -> float:
    """The user + system CPU time a process has spent so far (Linux)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b") ", 1)[1].split()
    # utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Rate:
    """One :meth:`RawClient.rate`'s figures."""

    calls: int
    seconds: float
    #: The server's CPU seconds over the same interval.
    cpu: float

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds

    @property
    def cpu_per_call(self) -> float:
        return self.cpu / self.calls


class RawClient:
    """One connection, blocking, one write per request line."""

    def __init__(self, path: Path | str, timeout: float = 30.0) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(str(path))
        self._tail = b""
        self._next_id = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, request: dict[str, object]) -> int:
        """Writes one request in one ``send``; returns its id."""
        self._next_id += 1
        request["id"] = self._next_id
        self._write(_encode(request) + b"\n")
        return self._next_id

    def _write(self, line: bytes) -> None:
        self._sock.sendall(line)  # (one send for a line this short)

    def _replies(self) -> list[Reply]:
        """Whatever replies one read brings (waits for at least one line)."""
        while True:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            *lines, self._tail = (self._tail + chunk).split(b"\n")
            replies = [_decode_reply(line) for line in lines if line]
            replies = [r for r in replies if r.type == "response"]
            if replies:
                return replies

    def request(self, request: dict[str, object]) -> Reply:
        """Sends one request and waits for its reply (pushes are skipped)."""
        rid = self._send(request)
        while True:
            for reply in self._replies():
                if reply.id == rid:
                    if not reply.success:
                        raise RuntimeError(f"{request['type']} failed: {bytes(reply.error)!r}")
                    return reply

    def hello(self, cwd: Path | None) -> None:
        self.request(
            {
                "type": "hello",
                "protocol_version": 1,
                "cwd": None if cwd is None else str(cwd),
                "client": "bench-raw",
            }
        )

    def rate(
        self, tool: str, in_flight: int, seconds: float, *, pid: int, warmup: float = 0.2
    ) -> Rate:
        """Keeps ``in_flight`` calls of ``tool`` going for ``warmup``, then
        ``seconds`` more, timed; replies are checked (the echoed text).
        ``pid`` is the server's, whose CPU time is read."""
        # The line made once, the id put in for each call.
        head = b'{"type":"call_tool","name":%s,"args":{"text":"hi"},"id":' % _encode(tool)
        waiting: set[int] = set()

        def send() -> None:
            self._next_id += 1
            waiting.add(self._next_id)
            self._write(b"%s%d}\n" % (head, self._next_id))

        for _ in range(in_flight):
            send()
        clock = time.perf_counter
        begin = clock() + warmup
        end = begin + seconds
        measuring = False
        calls = 0
        cpu_begin = 0.0
        while True:
            for reply in self._replies():
                if reply.id not in waiting:
                    raise RuntimeError(f"a reply to no request in flight: {reply.id!r}")
                waiting.discard(reply.id)
                if not reply.success:
                    raise RuntimeError(f"call_tool failed: {bytes(reply.error)!r}")
                data = _decode_call(reply.data)
                if data.is_error or data.content[0].get("text") != "hi":
                    raise RuntimeError(f"unexpected result {bytes(reply.data)!r}")
                calls += 1
                send()
            now = clock()
            if not measuring and now >= begin:
                measuring, calls, begin = True, 0, now
                cpu_begin = cpu_seconds(pid)
            elif measuring and now >= end:
                cpu = cpu_seconds(pid) - cpu_begin
                break
        while waiting:  # what is still in flight, untimed
            for reply in self._replies():
                waiting.discard(reply.id)
        return Rate(calls, now - begin, cpu)


def raw_rate(path: Path, cwd: Path | None, pid: int, in_flight: int, seconds: float) -> Rate:
    """Connects, says ``hello`` and measures :meth:`RawClient.rate` of ``echo``."""
    with RawClient(path) as client:
        client.hello(cwd)
        return client.rate("echo", in_flight, seconds, pid=pid)
