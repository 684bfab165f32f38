"""Reading lines from the daemon's pipes and sockets (writing frames to
them is :mod:`.outbox`'s).

Every frame an agent asks for crosses four of these (client socket in,
extension pipe out, extension pipe in, client socket out), so the two
modules are the daemon's hot path. On the way in, no needless yield or
system call: :class:`LineReader` reads with a non-blocking ``read``; it
waits for readability first only when the last read was short (the stream
was drained), and yields to other tasks after a full read that did not
wait, so that a flooding peer cannot starve the rest of the daemon.

Streams without a file descriptor (the in-memory streams tests use) go
through the ordinary Trio stream methods instead.

The readers of a daemon's connections are bounded together by the bytes of
their unfinished lines (a :class:`LineBudget`), not only by lines.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

import trio

from ..protocol.lines import LineSplitter, Oversized

#: Bytes asked of the kernel per read.
READ_SIZE = 64 * 1024

#: Errors of a read or write that mean the peer is gone.
_GONE = frozenset({errno.EPIPE, errno.ECONNRESET, errno.EBADF, errno.ENOTCONN, errno.ESHUTDOWN})


def fileno_of(
    stream: trio.abc.Stream | trio.abc.SendStream | trio.abc.ReceiveStream,
) -> Callable[[], int] | None:
    """How to get the file descriptor under a Trio pipe or socket stream
    (``-1`` once the stream is closed), or ``None`` for other streams.

    Asked before every read and write, never cached: once a stream is closed
    its number may be given to another file.
    """
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno
    if isinstance(stream, trio.SocketStream):
        return stream.socket.fileno
    return None


class OverBudget(Exception):
    """A :class:`LineReader`'s unfinished line would take its
    :class:`LineBudget` past its limit; the reader has dropped that line."""


class LineBudget:
    """The bytes that the unfinished lines of many :class:`LineReader` may
    hold together (``max_buffered_bytes``: a daemon's connections).

    Each reader charges it with what its splitter holds after a read; the
    reader whose charge takes it past ``limit`` drops its line and raises
    :class:`OverBudget`. The others keep what they hold.
    """

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: Bytes held now, by every reader charging it.
        self.used = 0


class LineReader:
    """Iterates a stream's lines, a read's worth at a time, until end of stream
    (then its unterminated tail). Each step gives at least one line.

    A closed or broken stream ends the iteration like end of stream does. A
    plain async iterator rather than an async generator, so that a loop
    cancelled half-way leaves nothing for the garbage collector to finalize.

    With a ``budget``, what its unfinished line holds is charged to it: a
    read that takes the budget past its limit drops that line, the lines the
    read completed are still given, and the next step raises
    :class:`OverBudget`. Call :meth:`close` when done with it, to give back
    its charge.
    """

    __slots__ = (
        "_budget",
        "_charged",
        "_done",
        "_drained",
        "_fileno",
        "_max_line",
        "_over",
        "_splitter",
        "_stream",
        "_waited",
    )

    def __init__(
        self, stream: trio.abc.ReceiveStream, max_line: int, budget: LineBudget | None = None
    ) -> None:
        self._stream = stream
        self._fileno = fileno_of(stream)
        self._max_line = max_line
        self._splitter = LineSplitter(max_line)
        self._budget = budget
        self._charged = 0
        self._over = False
        self._done = False
        self._waited = True
        self._drained = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> list[bytes | Oversized]:
        while not self._done:
            if self._over:
                self._done = True
                raise OverBudget(
                    f"the daemon holds {self._budget.limit if self._budget else 0} bytes "
                    "of unfinished lines, its limit"
                )
            chunk = await self._receive()
            if chunk:
                lines = self._splitter.feed(chunk)
            else:
                self._done = True
                lines = self._splitter.close()
            if self._budget is not None:
                self._charge(self._budget)
            if lines:
                return lines
        raise StopAsyncIteration

    def _charge(self, budget: LineBudget) -> None:
        held = self._splitter.buffered
        grew = held > self._charged
        budget.used += held - self._charged
        self._charged = held
        if grew and budget.used > budget.limit:
            self._over = True
            self._splitter = LineSplitter(self._max_line)  # drops the line
            budget.used -= held
            self._charged = 0

    def close(self) -> None:
        """Gives back its budget's charge and drops its unfinished line;
        reading further ends the iteration."""
        if self._budget is not None:
            self._budget.used -= self._charged
            self._charged = 0
        self._splitter = LineSplitter(self._max_line)
        self._done = True

    async def _receive(self) -> bytes | bytearray:
        if self._fileno is None:
            try:
                return await self._stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return b""
        # After a short read the stream is most likely drained: wait for more
        # rather than try a read that would fail. After a full read that did
        # not wait, yield once first, so that a flood cannot starve the others.
        must_wait = self._drained
        if not must_wait and not self._waited:
            await trio.lowlevel.checkpoint()
        self._waited = False
        while True:
            fd = self._fileno()
            if fd < 0:
                return b""  # closed (by another task)
            if must_wait:
                try:
                    await trio.lowlevel.wait_readable(fd)
                except trio.ClosedResourceError:
                    return b""
                self._waited = True
                fd = self._fileno()
                if fd < 0:
                    return b""
            try:
                chunk = os.read(fd, READ_SIZE)
            except BlockingIOError:
                must_wait = True
                continue
            except OSError as exc:
                if exc.errno in _GONE:
                    return b""
                raise
            self._drained = len(chunk) < READ_SIZE
            return chunk
