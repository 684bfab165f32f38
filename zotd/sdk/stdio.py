"""The extension's end of the pipe: lines in from the real stdin, out to the real stdout.

:meth:`Stdio.take_over` keeps the process's real stdin and stdout for frames
and points file descriptors 0 and 1 elsewhere, so that a stray ``print()``
or a child process can neither corrupt the stream nor steal a frame.
:meth:`Stdio.readline` reads one line with asyncio (a line over
:data:`MAX_LINE` is dropped and logged); :meth:`Stdio.write` writes one line
whole, from the event loop's thread only.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

#: The longest line read from the host.
MAX_LINE = 16 * 1024 * 1024


class Stdio:
    """Reads and writes the frames' lines.

    Args:
        log: writes a line to the extension's log (its stderr).
    """

    def __init__(self, log: Callable[..., None]) -> None:
        self._log = log
        self._out_fd = 1
        self._in: Any = sys.stdin
        self._reader: asyncio.StreamReader | None = None

    def take_over(self) -> None:
        """Keeps the real stdin and stdout for frames, and moves everything else off them."""
        # Frames go to the real stdout; from now on anything else printed to
        # stdout (a stray print(), a child process) lands in stderr, the log.
        sys.stdout.flush()
        self._out_fd = os.dup(1)
        os.dup2(2, 1)
        # Frames come from the real stdin; child processes a handler starts
        # get /dev/null there, so that none can read (steal) a frame.
        self._in = os.fdopen(os.dup(0), "rb", buffering=0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = sys.stderr

    async def open(self) -> None:
        """Starts reading stdin on the running loop."""
        loop = asyncio.get_running_loop()
        reader = self._reader = asyncio.StreamReader(limit=MAX_LINE)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._in)
        except ValueError:  # a regular file: someone trying the extension by hand
            reader.feed_data(self._in.read())
            reader.feed_eof()

    async def readline(self) -> bytes:
        """The next line from the host, with its newline; ``b""`` once stdin is closed."""
        assert self._reader is not None, "open() first"
        while True:
            try:
                return await self._reader.readline()
            except ValueError:  # a line over MAX_LINE
                self._log("dropped a line longer than", MAX_LINE, "bytes")

    def write(self, line: bytes) -> None:
        """Writes ``line`` whole (blocking until the host has taken it)."""
        data = memoryview(line)
        while data:
            data = data[os.write(self._out_fd, data) :]
