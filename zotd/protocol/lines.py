"""Splitting a byte stream into newline-delimited frames, with a bounded buffer.

Both protocols are newline-delimited JSON. Streams hand us arbitrary chunks,
so :class:`LineSplitter` keeps the unfinished tail of the last chunk and
gives complete lines. The tail is bounded: once a line grows past
``max_line`` bytes it is discarded up to the next newline without being
stored, and an :class:`Oversized` marker is yielded in its place so the
caller can report it (``frame_too_large`` on the agent socket, a log line for
an extension).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import msgspec

#: Default largest frame, in bytes, without its newline (issue: 16 MiB).
DEFAULT_MAX_LINE = 16 * 1024 * 1024


class Oversized(msgspec.Struct, frozen=True):
    """Stands for a line that was longer than the limit and was dropped.

    Attributes:
        size: how many bytes of the line were seen (and dropped), newline excluded.
    """

    size: int


class LineSplitter:
    """Turns chunks of bytes into complete lines (without their ``\\n``).

    Example::

        splitter = LineSplitter(max_line=1024)
        for item in splitter.feed(chunk):
            if isinstance(item, Oversized): ...
            else: handle(item)
        for item in splitter.close(): ...  # at end of stream
    """

    __slots__ = ("_buf", "_dropping", "max_line")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError("max_line must be at least 1")
        self.max_line = max_line
        self._buf = bytearray()
        # While dropping an oversized line: how many bytes were dropped so far;
        # -1 when not dropping.
        self._dropping = -1

    @property
    def buffered(self) -> int:
        """Bytes currently held for an unfinished line."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> list[bytes | Oversized]:
        """Add ``data`` and return every line it completes, in order."""
        if not isinstance(data, bytes):
            data = bytes(data)
        if not self._buf and self._dropping < 0:
            # The usual case, in C: nothing held from before, no line too long.
            lines = data.split(b"\n")
            tail = lines.pop()
            limit = self.max_line
            if len(tail) <= limit and (not lines or max(map(len, lines)) <= limit):
                self._buf += tail
                return cast("list[bytes | Oversized]", lines)
        return list(self._split(data))

    def _split(self, data: bytes) -> Iterator[bytes | Oversized]:
        # A line at a time: one held from before, or one too long.
        start = 0
        end = len(data)
        while start < end:
            nl = data.find(b"\n", start)
            if nl < 0:
                self._keep(data, start, end)
                return
            if self._dropping >= 0:
                size = self._dropping + (nl - start)
                self._dropping = -1
                yield Oversized(size)
            elif self._buf:
                total = len(self._buf) + (nl - start)
                if total > self.max_line:
                    self._buf.clear()
                    yield Oversized(total)
                else:
                    self._buf += data[start:nl]
                    line = bytes(self._buf)
                    self._buf.clear()
                    yield line
            elif nl - start > self.max_line:
                yield Oversized(nl - start)
            else:
                yield data[start:nl]
            start = nl + 1

    def close(self) -> list[bytes | Oversized]:
        """End of stream: the unterminated last line, if any."""
        if self._dropping >= 0:
            size, self._dropping = self._dropping, -1
            return [Oversized(size)]
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            return [line]
        return []

    def _keep(self, data: bytes | bytearray, start: int, end: int) -> None:
        if self._dropping >= 0:
            self._dropping += end - start
            return
        if len(self._buf) + (end - start) > self.max_line:
            # Too long already: stop storing it and count what we drop.
            self._dropping = len(self._buf) + (end - start)
            self._buf.clear()
            return
        self._buf += data[start:end]
