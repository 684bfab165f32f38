"""The extension's end of the pipe: frames out to the real stdout, stdin kept for them.

:meth:`Stdio.take_over` keeps the process's real stdin and stdout for frames
and points file descriptors 0 and 1 elsewhere, so that a stray ``print()``
or a child process can neither corrupt the stream nor steal a frame.
:meth:`Stdio.write` writes one line whole and :meth:`Stdio.send` encodes
frames and writes them in one go, blocking: the handshake goes out through
it before asyncio is even imported, and the event loop's thread writes the
rest. Reading is the loop's (:mod:`zotd.sdk.reader`).

Plain blocking code, imported before the handshake: no asyncio.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import BinaryIO

import msgspec

_encoder = msgspec.json.Encoder()


class Stdio:
    """Writes the frames' lines, and holds the host's stdin for the reader.

    Args:
        log: writes a line to the extension's log (its stderr).
    """

    def __init__(self, log: Callable[..., None]) -> None:
        self._log = log
        self._out_fd = 1
        #: The real stdin, once :meth:`take_over` has kept it (unbuffered).
        self.stdin: BinaryIO | None = None

    def take_over(self) -> None:
        """Keeps the real stdin and stdout for frames, and moves everything else off them."""
        # Frames go to the real stdout; from now on anything else printed to
        # stdout (a stray print(), a child process) lands in stderr, the log.
        sys.stdout.flush()
        self._out_fd = os.dup(1)
        os.dup2(2, 1)
        # Frames come from the real stdin; child processes a handler starts
        # get /dev/null there, so that none can read (steal) a frame.
        self.stdin = os.fdopen(os.dup(0), "rb", buffering=0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = sys.stderr

    def send(self, frames: Iterable[msgspec.Struct]) -> None:
        """Writes ``frames``, in one write; one that cannot be encoded (a
        ``notify()`` with text that is not valid Unicode, say) is logged
        and left out."""
        lines: list[bytes] = []
        for frame in frames:
            try:
                lines.append(_encoder.encode(frame) + b"\n")
            except Exception:
                self._log("encoding a frame failed:")
                _print_exc()
        if lines:
            self.write(b"".join(lines))

    def write(self, line: bytes) -> None:
        """Writes ``line`` whole (blocking until the host has taken it)."""
        data = memoryview(line)
        while data:
            data = data[os.write(self._out_fd, data) :]


def _print_exc() -> None:
    # traceback is only loaded when something fails: not at every start.
    import traceback

    traceback.print_exc(file=sys.stderr)
