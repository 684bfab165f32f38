"""Reading lines from, and writing frames to, the daemon's pipes and sockets.

Every frame an agent asks for crosses four of these (client socket in,
extension pipe out, extension pipe in, client socket out), so this module is
the daemon's hot path. Two rules keep it short:

* **No task switch on the way out when the stream is idle.** A lone frame
  put into an idle :class:`Outbox` is written by the task that put it, at
  once, with a non-blocking write. Frames of a busy stream (its owner has
  other requests in flight, or a write is under way) are queued, and the
  outbox's writer task sends all of them in one write: a burst of 64 replies
  costs one system call, and wakes the reader once.
* **No needless yield or system call on the way in.** :class:`LineReader`
  reads with a non-blocking ``read``; it waits for readability first only
  when the last read was short (the stream was drained), and yields to other
  tasks after a full read that did not wait, so that a flooding peer cannot
  starve the rest of the daemon.

Streams without a file descriptor (the in-memory streams tests use) go
through the ordinary Trio stream methods instead.

Both are bounded by bytes, not only by frames: an :class:`Outbox` by the
bytes not yet written (``max_bytes``), the readers of a daemon's connections
together by the bytes of their unfinished lines (a :class:`LineBudget`).
"""

from __future__ import annotations

import errno
import math
import os
from collections import deque
from collections.abc import Callable

import trio

from ..protocol.lines import LineSplitter, Oversized

#: Bytes asked of the kernel per read.
READ_SIZE = 64 * 1024

#: Bytes an :class:`Outbox` takes for one write while it holds frames that
#: may be withdrawn (else it takes all it holds).
WRITE_BATCH = 64 * 1024

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


class Outbox:
    """Frames for one stream, written in order, with as few writes as possible.

    One task runs :meth:`run`, the writer; any task may put frames. At most
    ``limit`` frames wait, and at most ``max_bytes`` bytes are not yet
    written (the frames queued and the rest of the write under way; a
    single bigger frame goes when nothing else waits): :meth:`put` then
    waits for room (a reply must not be lost), :meth:`put_nowait` says no (a
    notification may be dropped). A frame put with a ``key`` may be taken
    back with :meth:`withdraw` until the writer takes it. After
    :meth:`close`, what is queued is written and the stream closed.

    Raises (from the put methods):
        trio.BrokenResourceError: the writer has ended (the peer went away, or
            the outbox was closed).
    """

    __slots__ = (
        "_blocked",
        "_broken",
        "_bytes",
        "_closing",
        "_fileno",
        "_flushing",
        "_keyed",
        "_kick",
        "_limit",
        "_max_bytes",
        "_parked",
        "_queue",
        "_room",
        "_stream",
        "_writer_done",
    )

    def __init__(
        self, stream: trio.abc.SendStream, limit: int, max_bytes: float = math.inf
    ) -> None:
        self._stream = stream
        self._fileno = fileno_of(stream)
        self._limit = limit
        self._max_bytes = max_bytes
        self._queue: deque[bytes] = deque()
        #: Bytes not yet written: the queue's, and the rest of the write under way.
        self._bytes = 0
        #: The frames put with a key and still queued, by key.
        self._keyed: dict[str, bytes] = {}
        self._closing = False
        self._writer_done = False
        self._broken: str | None = None
        #: The writer is sending what it took from the queue: nothing may be
        #: written inline until it is done.
        self._flushing = False
        #: The writer waits for the peer to read (a write took less than all).
        self._blocked = False
        self._kick = trio.lowlevel.ParkingLot()
        #: The writer is parked in ``_kick`` (a flag: cheaper to ask than the lot).
        self._parked = False
        self._room = trio.lowlevel.ParkingLot()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def unwritten(self) -> int:
        """Bytes put and not yet written (queued, or in the write under way)."""
        return self._bytes

    @property
    def blocked(self) -> bool:
        """Whether the writer is waiting for the peer to read what it wrote."""
        return self._blocked

    @property
    def full(self) -> bool:
        """Whether ``limit`` frames or ``max_bytes`` bytes wait."""
        return len(self._queue) >= self._limit or self._bytes >= self._max_bytes

    def put_nowait(
        self, frame: bytes, *, alone: bool = True, force: bool = False, key: str | None = None
    ) -> bool:
        """Queues (or writes) a frame; ``False`` if there is no room for it.

        ``alone=False`` says more frames are likely to follow soon (the
        stream is busy): the frame is queued, never written inline, so that
        the writer sends it with the others. ``force=True`` queues it even
        past the bounds, for a frame that must not be lost and is bounded
        elsewhere (a reply: requests in flight are limited). With ``key``,
        :meth:`withdraw` may take it back while it is queued.
        """
        if self._writer_done or self._closing or self._broken is not None:
            raise trio.BrokenResourceError(self._broken or "the outbox is closed")
        if self._queue or self._flushing or not alone or self._fileno is None:
            if not force and (
                len(self._queue) >= self._limit
                or (self._bytes and self._bytes + len(frame) > self._max_bytes)
            ):
                return False
            self._queue.append(frame)
            self._bytes += len(frame)
            if key is not None:
                self._keyed[key] = frame
            if self._parked:  # wake the writer
                self._parked = False
                self._kick.unpark()
            return True
        try:
            written = os.write(self._fileno(), frame)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._broken = f"cannot write: {exc.strerror or exc}"
            self._kick.unpark()  # the writer reports it
            raise trio.BrokenResourceError(self._broken) from None
        if written < len(frame):  # the rest waits for the writer
            rest = frame[written:]
            self._queue.append(rest)
            self._bytes += len(rest)
            if key is not None and not written:
                self._keyed[key] = rest
            self._kick.unpark()
        return True

    async def put(self, frame: bytes, *, alone: bool = True, key: str | None = None) -> None:
        """Queues (or writes) a frame, waiting while there is no room for it.

        Does not yield when there is room: the caller is about to wait anyway.
        """
        while not self.put_nowait(frame, alone=alone, key=key):
            await self._room.park()

    async def room(self) -> None:
        """Waits until it is not :attr:`full`, or the writer has ended.

        Does not yield when there is room."""
        while self.full and not self._writer_done:
            await self._room.park()

    def withdraw(self, key: str) -> bool:
        """Takes back the frame put with ``key`` if the writer has not taken
        it yet; ``False`` if it is written (or being written), or unknown."""
        frame = self._keyed.pop(key, None)
        if frame is None:
            return False
        for i, queued in enumerate(self._queue):
            if queued is frame:
                del self._queue[i]
                break
        self._bytes -= len(frame)
        if self._room:
            self._room.unpark_all()
        return True

    def close(self) -> None:
        """Writes what is queued, then closes the stream; later puts raise."""
        self._closing = True
        self._kick.unpark()

    async def run(self) -> None:
        """The writer: runs until :meth:`close` (and a flush) or the peer is gone.

        The stream is closed when this returns, on error and on cancellation.

        Raises:
            trio.BrokenResourceError: the peer went away.
        """
        try:
            while True:
                if self._broken is not None:
                    raise trio.BrokenResourceError(self._broken)
                if self._queue:
                    self._flushing = True  # no inline write until all of this is out
                    await self._flush()
                    if self._room:
                        self._room.unpark_all()
                    continue
                self._flushing = False
                if self._closing:
                    return
                self._parked = True
                try:
                    await self._kick.park()
                finally:
                    self._parked = False
        finally:
            self._writer_done = True
            self._queue.clear()
            self._keyed.clear()
            self._bytes = 0
            self._room.unpark_all()
            with trio.CancelScope(shield=True):
                await self._stream.aclose()

    def _take(self) -> bytes:
        """What the next write sends, taken from the queue: all of it, or,
        while frames that may be withdrawn wait, about :data:`WRITE_BATCH`
        bytes (so that those behind a write the peer does not read stay
        withdrawable)."""
        queue = self._queue
        keyed = self._keyed
        if not keyed or self._bytes <= WRITE_BATCH:  # (all of it: nothing stays keyed)
            data = b"".join(queue) if len(queue) > 1 else queue[0]
            queue.clear()
            keyed.clear()
            return data
        taken: list[bytes] = []
        size = 0
        while queue and (not taken or size + len(queue[0]) <= WRITE_BATCH):
            frame = queue.popleft()
            taken.append(frame)
            size += len(frame)
        ids = {id(frame) for frame in taken}  # (taken, so alive: the ids are theirs)
        for key in [key for key, frame in keyed.items() if id(frame) in ids]:
            del keyed[key]
        return b"".join(taken) if len(taken) > 1 else taken[0]

    async def _flush(self) -> None:
        data = self._take()
        if self._fileno is None:
            await self._stream.send_all(data)
            self._bytes -= len(data)
            return
        view = memoryview(data)
        while view:
            fd = self._fileno()
            try:
                written = os.write(fd, view)
                self._bytes -= written
                view = view[written:]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # EBADF for a closed stream (fd -1) included
                self._broken = f"cannot write: {exc.strerror or exc}"
                raise trio.BrokenResourceError(self._broken) from None
            self._blocked = True
            try:
                await trio.lowlevel.wait_writable(fd)
            except trio.ClosedResourceError:
                self._broken = "the stream was closed"
                raise trio.BrokenResourceError(self._broken) from None
            finally:
                self._blocked = False
