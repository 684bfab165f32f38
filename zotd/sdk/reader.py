"""The host's lines, read on the event loop.

:class:`Reader` reads the real stdin :class:`~zotd.sdk.stdio.Stdio` kept,
one line at a time, with asyncio; a line over :data:`MAX_LINE` is dropped
and logged. Imported once the handshake is out (see :mod:`zotd.sdk.runtime`).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from typing import BinaryIO

#: The longest line read from the host.
MAX_LINE = 16 * 1024 * 1024


class Reader:
    """Reads the frames' lines from the host.

    Args:
        stdin: the real stdin (a pipe, or a file or ``/dev/null`` when
            someone tries the extension by hand).
        log: writes a line to the extension's log (its stderr).
    """

    def __init__(self, stdin: BinaryIO, log: Callable[..., None]) -> None:
        self._in = stdin
        self._log = log
        self._reader: asyncio.StreamReader | None = None

    async def open(self) -> None:
        """Starts reading stdin on the running loop."""
        loop = asyncio.get_running_loop()
        reader = self._reader = asyncio.StreamReader(limit=MAX_LINE)
        if _pollable(self._in.fileno()):
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._in)
        else:  # a file, or /dev/null: someone trying the extension by hand
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


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd``: a pipe, a socket or a
    terminal. Not a regular file, nor a device such as ``/dev/null``, which
    epoll refuses (asyncio would accept it, then never read a byte)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))
