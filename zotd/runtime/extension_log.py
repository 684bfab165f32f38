"""An extension's log file: the daemon's notes in it, its rotation, its tail.

The child's stderr is the log file itself (opened ``O_APPEND``, see
:meth:`ExtensionLog.open_for_child`), not a pipe the daemon copies from: no
task, no copy, and the log keeps everything the extension wrote even if the
daemon dies. The daemon's own notes about the extension (refusals, shadowed
names, malformed lines) are appended to the same file, each line stamped
``[zotd 2026-11-30 11:00:22.123]`` (local time, to the millisecond, as the
daemon's own log: ``zot ext logs --all`` interleaves them by it).

Blocking work: a note and a tail are provably tiny and run inline, on the
event loop (see :meth:`ExtensionLog.note`); a rotation copies the file, so
it runs in a worker thread, and only once a ``stat`` says it is due.

A full disk or a broken log never stops an extension: a rotation whose copy
fails truncates the log anyway (:func:`.logfiles.rotate_if_big`), and a log
that cannot be opened gets the child a pipe instead, which the daemon drains
and counts (:meth:`ExtensionLog.open_for_child`). Each trouble is one
warning in the daemon's log, not one per note.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import NoReturn

import trio

from ..model import logfiles
from ..model.log_time import local_text
from . import threads

#: The supervisor's logger: what zotd logs about an extension has one name.
log = logging.getLogger("zotd.runtime.extension")

#: How often a running extension's log size is checked for rotation...
LOG_CHECK_INTERVAL = 10.0

#: ... and how often at most, while it grows fast: the interval is quartered
#: after a check that found it grown by half of ``max_bytes`` or more, and
#: doubled (back up to LOG_CHECK_INTERVAL) after one that did not.
MIN_CHECK_INTERVAL = 0.5

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


#: The logs whose trouble the daemon's log already tells (see ExtensionLog._trouble).
_troubled: set[Path] = set()


class ExtensionLog:
    """``$ZOT_HOME/logs/ext-<name>.log``, kept under ``max_bytes``."""

    __slots__ = ("_dropped", "_sink", "max_bytes", "name", "path")

    def __init__(self, name: str, path: Path, max_bytes: int) -> None:
        self.name = name
        self.path = path
        self.max_bytes = max_bytes
        #: The read end of the pipe the child writes to when the log could not
        #: be opened (drained by :meth:`watch`), else None.
        self._sink: int | None = None
        #: Bytes of the child's stderr dropped that way.
        self._dropped = 0

    @property
    def dropped(self) -> int:
        """Bytes of the child's stderr dropped because the log could not be opened."""
        return self._dropped

    def note(self, message: str) -> None:
        """Appends a line from the daemon (and logs it at debug level)."""
        message = bounded(message)
        log.debug("extension %s: %s", self.name, message)
        stamp = local_text(time.time())
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
            self._trouble(f"cannot write {self.path}: {exc.strerror or exc}")
        else:
            _troubled.discard(self.path)

    def _trouble(self, message: str) -> None:
        """Logs ``message`` as a warning, unless a trouble with this log was
        logged and no write to it has succeeded since (also by an earlier run
        of the extension: a restart does not repeat the warning)."""
        if self.path not in _troubled:
            _troubled.add(self.path)
            log.warning("extension %s: %s", self.name, message)

    def tail(self) -> list[str]:
        """Its last :data:`LOG_TAIL_LINES` lines (empty if it cannot be read).

        Inline: one read of at most 8 KiB from the end of the file.
        """
        return logfiles.tail(self.path, LOG_TAIL_LINES)

    def stderr_tail(self, lines: int = 3) -> list[str]:
        """The last ``lines`` lines its process wrote to stderr in its last
        run: the log's tail after zotd's last ``started pid`` line, without
        zotd's own lines. Inline, as :meth:`tail`."""
        tail = logfiles.tail(self.path, 40)
        for i in range(len(tail) - 1, -1, -1):
            if tail[i].startswith("[zotd ") and "] started pid " in tail[i]:
                tail = tail[i + 1 :]
                break
        own = [line for line in tail if line.strip() and not line.startswith("[zotd ")]
        return [line[:300] for line in own[-lines:]]

    def open_for_child(self) -> int:
        """An ``O_APPEND`` descriptor for the child's stderr (the caller closes it).

        If the log cannot be opened (a full or read-only disk, a directory or
        symlink at its name...), the write end of a pipe instead: what the
        child writes there is read and dropped by :meth:`watch`, and counted
        (:attr:`dropped`), with one warning in the daemon's log.

        Inline: an open and an ``fchmod`` (or a pipe).

        Raises:
            OSError: not even a pipe could be made (no descriptors left).
        """
        self._close_sink()
        try:
            fd = logfiles.open_append(self.path)
        except OSError as exc:
            read, write = os.pipe()
            self._sink = read
            self._trouble(f"cannot open {self.path} ({exc.strerror or exc}): its stderr is dropped")
            return write
        return fd

    def _close_sink(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            os.close(sink)

    async def rotate(self) -> bool:
        """Rotates it if it is past ``max_bytes``; returns whether it did.

        The usual case is one ``stat``, inline; the copy runs in a worker
        thread (:func:`.threads.run_sync`: no virtual time passes meanwhile).
        Cancellation waits for a copy under way to finish (a thread cannot
        be stopped), then raises :exc:`trio.Cancelled`.

        A copy that fails (a full disk) still truncates the log, and says so
        in it and in the daemon's log; a log that cannot even be truncated
        is left as it is (one warning). Never raises :exc:`OSError`.
        """
        if logfiles.size(self.path) <= self.max_bytes:
            return False
        try:
            rotation = await threads.run_sync(logfiles.rotate_if_big, self.path, self.max_bytes)
        except OSError as exc:
            self._trouble(f"cannot rotate {self.path}: {exc.strerror or exc}")
            return False
        if rotation is None:
            return False
        copy = f"{self.path.name}.1"
        if rotation.copy_error is None:
            self.note(f"rotated this log (it passed {self.max_bytes} bytes) to {copy}")
        else:
            why = rotation.copy_error.strerror or str(rotation.copy_error)
            log.warning(
                "extension %s: cannot copy %s to %s (%s): truncated it, %d bytes lost",
                self.name,
                self.path,
                copy,
                why,
                rotation.size,
            )
            self.note(
                f"truncated this log (it passed {self.max_bytes} bytes) without a copy: "
                f"cannot write {copy} ({why}); {rotation.size} bytes lost"
            )
        return True

    async def watch(self) -> NoReturn:
        """Rotates it whenever a check finds it too big: the child writes to
        it directly. Checks every :data:`LOG_CHECK_INTERVAL`, more often
        (down to :data:`MIN_CHECK_INTERVAL`) while it grows fast. Drains the
        pipe :meth:`open_for_child` gave instead, if it did. Runs until
        cancelled.

        Cancellation ends it at once, or after a copy under way (see
        :meth:`rotate`).
        """
        sink, self._sink = self._sink, None
        if sink is not None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._drain, trio.lowlevel.FdStream(sink))
                await self._check()
        await self._check()

    async def _check(self) -> NoReturn:
        """:meth:`watch`'s checks, until cancelled."""
        interval = LOG_CHECK_INTERVAL
        checked = logfiles.size(self.path)
        while True:
            await trio.sleep(interval)
            grown = logfiles.size(self.path) - checked
            if grown >= self.max_bytes // 2:
                interval = max(MIN_CHECK_INTERVAL, interval / 4)
            else:
                interval = min(LOG_CHECK_INTERVAL, interval * 2)
            await self.rotate()
            checked = logfiles.size(self.path)

    async def _drain(self, sink: trio.lowlevel.FdStream) -> NoReturn:
        """Reads and drops what the child writes to ``sink``, counting it;
        at its end (or cancellation) logs how much went."""
        try:
            async with sink:
                while data := await sink.receive_some(65536):
                    self._dropped += len(data)
            await trio.sleep_forever()
        finally:
            if self._dropped:  # the warning was open_for_child's: this is the count
                log.info(
                    "extension %s: %d bytes of its stderr dropped so far (%s could not be opened)",
                    self.name,
                    self._dropped,
                    self.path,
                )
