"""Writing frames to the daemon's pipes and sockets, with as few writes as
possible (reading lines from them is :mod:`.streams`').

No task switch on the way out when the stream is idle: a lone frame put
into an idle :class:`Outbox` is written by the task that put it, at once,
with a non-blocking write. Frames of a busy stream (its owner has other
requests in flight, or a write is under way) are queued, and the outbox's
writer task sends all of them in one write: a burst of 64 replies costs one
system call, and wakes the reader once.

An outbox is bounded by the bytes not yet written (``max_bytes``), not only
by frames. Streams without a file descriptor (the in-memory streams tests
use) go through the ordinary Trio stream methods instead.
"""

from __future__ import annotations

import math
import os
from collections import deque

import trio

from .streams import fileno_of

__all__ = ["WRITE_BATCH", "Outbox"]

#: Bytes an :class:`Outbox` takes for one write while it holds frames that
#: may be withdrawn (else it takes all it holds).
WRITE_BATCH = 64 * 1024


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
