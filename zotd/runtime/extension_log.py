"""An extension's log file: the daemon's notes in it, its rotation, its tail.

The child's stderr is the log file itself (opened ``O_APPEND``, see
:meth:`ExtensionLog.open_for_child`), not a pipe the daemon copies from: no
task, no copy, and the log keeps everything the extension wrote even if the
daemon dies. The daemon's own notes about the extension (refusals, shadowed
names, malformed lines) are appended to the same file, each line stamped
``[zotd <time>]``.

Blocking work: a note and a tail are provably tiny and run inline, on the
event loop (see :meth:`ExtensionLog.note`); a rotation copies the file, so
it runs in a worker thread, and only once a ``stat`` says it is due.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import NoReturn

import trio

from ..model import logfiles
from . import threads

#: The supervisor's logger: what zotd logs about an extension has one name.
log = logging.getLogger("zotd.runtime.extension")

#: How often a running extension's log size is checked for rotation.
LOG_CHECK_INTERVAL = 10.0

#: Lines of the log shown in ``list_extensions``.
LOG_TAIL_LINES = 10

#: Characters of one note kept; the rest is cut (and counted). With the stamp,
#: a note's line is at most ``MAX_NOTE + 64`` characters: at most
#: ``4 * (MAX_NOTE + 64)`` bytes (8,256) once encoded.
MAX_NOTE = 2000


def bounded(message: str) -> str:
    """``message``, cut to :data:`MAX_NOTE` characters (saying how many went)."""
    if len(message) <= MAX_NOTE:
        return message
    return f"{message[:MAX_NOTE]}... [{len(message) - MAX_NOTE} more characters]"


class ExtensionLog:
    """``$ZOT_HOME/logs/ext-<name>.log``, kept under ``max_bytes``."""

    __slots__ = ("max_bytes", "name", "path")

    def __init__(self, name: str, path: Path, max_bytes: int) -> None:
        self.name = name
        self.path = path
        self.max_bytes = max_bytes

    def note(self, message: str) -> None:
        """Appends a line from the daemon (and logs it at debug level)."""
        message = bounded(message)
        log.debug("extension %s: %s", self.name, message)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        # Provably tiny, so inline on the event loop: one open (O_APPEND) +
        # write + close of at most 8,256 bytes (MAX_NOTE) to a local file, no
        # read, no fsync, no lock; the write lands in the page cache. Notes
        # come at most a couple per frame read or sent (the ones about noise
        # within the noise budget), so they cost what the frame's decoding
        # costs, and are on disk when the event they report is seen (tests
        # and `zot ext logs` read them right after).
        try:
            logfiles.append(self.path, f"[zotd {stamp}] {message}\n")
        except OSError as exc:
            log.warning("cannot write %s: %s", self.path, exc)

    def tail(self) -> list[str]:
        """Its last :data:`LOG_TAIL_LINES` lines (empty if it cannot be read).

        Inline: one read of at most 8 KiB from the end of the file.
        """
        return logfiles.tail(self.path, LOG_TAIL_LINES)

    def open_for_child(self) -> int:
        """An ``O_APPEND`` descriptor for the child's stderr (the caller closes it).

        Inline: an open and an ``fchmod``.
        """
        return logfiles.open_append(self.path)

    async def rotate(self) -> bool:
        """Rotates it if it is past ``max_bytes``; returns whether it did.

        The usual case is one ``stat``, inline; the copy runs in a worker
        thread (:func:`.threads.run_sync`: no virtual time passes meanwhile).
        Cancellation waits for a copy under way to finish (a thread cannot
        be stopped), then raises :exc:`trio.Cancelled`.

        Raises:
            OSError: the rotation failed (the log stays as it was, or
                rotated but not truncated).
        """
        if logfiles.size(self.path) <= self.max_bytes:
            return False
        return await threads.run_sync(logfiles.rotate_if_big, self.path, self.max_bytes)

    async def watch(self) -> NoReturn:
        """Rotates it whenever a check (every :data:`LOG_CHECK_INTERVAL`) finds
        it too big: the child writes to it directly. Runs until cancelled.

        Cancellation ends it at once, or after a copy under way (see
        :meth:`rotate`).
        """
        while True:
            await trio.sleep(LOG_CHECK_INTERVAL)
            try:
                rotated = await self.rotate()
            except OSError as exc:
                log.warning("cannot rotate %s: %s", self.path, exc)
                continue
            if rotated:
                self.note(
                    f"rotated this log (it passed {self.max_bytes} bytes) to {self.path.name}.1"
                )
