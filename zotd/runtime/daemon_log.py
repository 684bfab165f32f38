"""The daemon's own log, rotated as an extension's is.

After ``zotd start`` (or a client's autostart, or under launchd) the
daemon's stderr is ``$ZOT_HOME/logs/zotd.log``, opened for appending by
whoever started it. :func:`keep_rotated` checks its size as the daemon
starts and every :data:`CHECK_INTERVAL` after, and past ``max_log_bytes``
copies it to
``zotd.log.1`` (three older copies kept) and truncates it in place
(:func:`~zotd.model.logfiles.rotate_if_big`): the daemon's next line lands
at the start of the file, and nothing reopens anything. A daemon in the
foreground, or under systemd (the journal), writes elsewhere: nothing is
checked then.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
from pathlib import Path

import trio

from ..model import logfiles
from . import threads

__all__ = ["CHECK_INTERVAL", "keep_rotated", "writes_to"]

log = logging.getLogger(__name__)

#: Seconds between two checks of the log's size.
CHECK_INTERVAL = 10.0


def writes_to(path: Path, fd: int = 2) -> bool:
    """Whether ``fd`` is the regular file at ``path``, open for appending
    (truncated under a writer that does not append, the file would keep a
    hole the size of what it had)."""
    try:
        mine = os.fstat(fd)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        there = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (
        stat.S_ISREG(mine.st_mode)
        and (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)
        and bool(flags & os.O_APPEND)
    )


async def keep_rotated(path: Path, max_bytes: int, fd: int = 2) -> None:
    """Rotates ``path`` whenever a check (now, then every
    :data:`CHECK_INTERVAL`) finds it past ``max_bytes``, for as
    long as ``fd`` (the daemon's stderr) writes to it; returns at once if it
    does not, and as soon as it no longer does (the file was moved away or
    replaced). Runs until cancelled otherwise; cancellation waits for a copy
    under way."""
    while writes_to(path, fd):
        try:
            done = await threads.run_sync(logfiles.rotate_if_big, path, max_bytes)
        except OSError as exc:  # not even truncated: it cannot grow either
            log.warning("could not rotate %s: %s", path, exc.strerror or exc)
        else:
            if done is not None:
                _say(path, done)
        await trio.sleep(CHECK_INTERVAL)


def _say(path: Path, done: logfiles.Rotation) -> None:
    """The first line of the log after its rotation (the daemon's stderr is it)."""
    if done.copy_error is None:
        log.info(
            "this log was past max_log_bytes (%d bytes): copied to %s.1 and truncated",
            done.size,
            path.name,
        )
    else:
        log.warning(
            "this log was past max_log_bytes and is truncated without a copy: %s; %d bytes lost",
            done.copy_error.strerror or done.copy_error,
            done.size,
        )
