"""Two loops every pipe and socket of the daemon needs: read lines, write batches.

Each stream has exactly one writer task (trio raises ``BusyResourceError`` on
concurrent ``send_all``), fed by a bounded memory channel. The writer sends
everything that is queued in one ``send_all``, so a burst of small frames
costs one system call, not one each.
"""

from __future__ import annotations

from collections import deque

import trio

from .protocol.lines import LineSplitter, Oversized

#: Bytes asked of the kernel per read.
READ_SIZE = 64 * 1024

#: Queued for a writer: a frame, or this to send what is queued and close.
CLOSE = b""


class LineReader:
    """Iterates a stream's lines until end of stream, then its unterminated tail.

    A closed or broken stream ends the iteration like end of stream does. A
    plain async iterator rather than an async generator, so that a loop
    cancelled half-way leaves nothing for the garbage collector to finalize.
    """

    __slots__ = ("_done", "_ready", "_splitter", "_stream")

    def __init__(self, stream: trio.abc.ReceiveStream, max_line: int) -> None:
        self._stream = stream
        self._splitter = LineSplitter(max_line)
        self._ready: deque[bytes | Oversized] = deque()
        self._done = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> bytes | Oversized:
        while not self._ready:
            if self._done:
                raise StopAsyncIteration
            try:
                chunk = await self._stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if chunk:
                self._ready.extend(self._splitter.feed(chunk))
            else:
                self._done = True
                self._ready.extend(self._splitter.close())
        return self._ready.popleft()


async def write_batches(
    frames: trio.MemoryReceiveChannel[bytes], stream: trio.abc.SendStream
) -> None:
    """Sends queued frames until :data:`CLOSE` is queued or every sender is gone.

    The stream is closed when this returns, on error and on cancellation.

    Raises:
        trio.BrokenResourceError: the peer went away (a dead extension, a
            client that hung up).
    """
    try:
        async with frames:
            while True:
                try:
                    frame = await frames.receive()
                except trio.EndOfChannel:
                    return
                batch = [frame]
                closing = frame == CLOSE
                while not closing:
                    try:
                        frame = frames.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    closing = frame == CLOSE
                    batch.append(frame)
                await stream.send_all(b"".join(batch) if len(batch) > 1 else batch[0])
                if closing:
                    return
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
