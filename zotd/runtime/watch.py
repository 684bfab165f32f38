"""Watching an extension's directory: its files' changes, debounced, as restarts.

Two parts, so that the timing can be tested in virtual time without a file
system watcher:

- :class:`Changes` and :func:`restart_on_changes`: the changed files not
  yet acted on, and the loop that turns them into restarts. A restart
  waits for :data:`QUIET` seconds without a change (an editor's save, a
  ``git checkout`` or a build is one burst, so one restart); a change that
  comes while a restart is under way is kept, and makes exactly one more
  restart once that one is done and things are quiet again, however many
  files changed meanwhile: never a pile of restarts.
- :func:`watch_files`: the feed, :mod:`watchfiles` (Rust's ``notify``; on
  trio through anyio) reporting what changed under a directory, with
  editors' and tools' noise left out (:func:`ignored`). It is imported
  when a directory is first watched: a daemon that watches nothing never
  loads it.

:func:`keep_watching` puts the two together for one directory. What a
restart does (and says) is the caller's: :mod:`zotd.runtime.dev`.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from contextlib import aclosing
from pathlib import Path, PurePath

import trio

log = logging.getLogger(__name__)

#: Seconds without a change before a restart.
QUIET = 0.3

#: Directories whose contents never count as a change (version control,
#: caches, installed dependencies).
IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".venv",
        ".idea",
    }
)

#: File names that never count as a change: editors' swap, backup and lock
#: files (vim's ``.swp`` and its ``4913`` probe, ``~`` backups, emacs's
#: ``.#`` locks and ``#...#`` autosaves), bytecode, macOS's ``.DS_Store``.
IGNORED_NAMES = (
    "*.swp",
    "*.swo",
    "*.swx",
    "*.swpx",
    "*~",
    "4913",
    ".#*",
    "#*#",
    "*.pyc",
    "*.pyo",
    ".DS_Store",
)

#: How the feed groups what the file system reports, in milliseconds:
#: ``watchfiles`` returns a batch once nothing changed for a step, or after
#: the debounce at most; :class:`Changes` then waits for :data:`QUIET`.
STEP_MS = 50
DEBOUNCE_MS = 300
#: How long the watcher's thread waits for a change before looking again
#: (it also stops at once when told to).
RUST_TIMEOUT_MS = 1000


def ignored(path: PurePath) -> bool:
    """Whether a change to ``path`` (relative to the watched directory) is noise."""
    if any(part in IGNORED_DIRS for part in path.parts[:-1]):
        return True
    name = path.name
    return name in IGNORED_DIRS or any(fnmatch.fnmatchcase(name, p) for p in IGNORED_NAMES)


#: What ``watchfiles`` calls a file created, and one deleted (its ``Change``).
_ADDED, _DELETED = 1, 3


def changed(batch: Iterable[tuple[int, str]], root: Path) -> list[str]:
    """The files of one batch of ``watchfiles`` changes, relative to
    ``root``, by name; a file that was both created and deleted in it and
    is not there now (an editor's or ``sed -i``'s temporary file) is no
    change. Blocks (a ``stat`` of such a file): it is what the feed does."""
    kinds: dict[str, set[int]] = {}
    for kind, path in batch:
        kinds.setdefault(path, set()).add(int(kind))
    names = []
    for path, seen in kinds.items():
        if {_ADDED, _DELETED} <= seen and not os.path.lexists(path):
            continue
        try:
            names.append(str(PurePath(path).relative_to(root)))
        except ValueError:
            continue
    return sorted(names)


class Changes:
    """The changed files not acted on yet, in the order they first changed.

    :meth:`add` never blocks (the feed calls it); :meth:`settled` waits for
    them to stop changing and takes them.
    """

    def __init__(self) -> None:
        self._names: dict[str, None] = {}
        self._last = 0.0
        self._woken = trio.Event()

    def add(self, names: Iterable[str]) -> None:
        """Files changed just now (relative names); nothing if ``names`` is empty."""
        added = False
        for name in names:
            self._names[name] = None
            added = True
        if added:
            self._last = trio.current_time()
            self._woken.set()

    async def settled(self, quiet: float = QUIET) -> list[str]:
        """Waits for a change, then until ``quiet`` seconds have passed
        without one; returns the files changed (and forgets them)."""
        while not self._names:
            await self._woken.wait()
            self._woken = trio.Event()
        while True:  # each change pushes the end of the quiet out
            with trio.move_on_at(self._last + quiet) as still:
                await self._woken.wait()
            self._woken = trio.Event()
            if still.cancelled_caught:
                break
        names = list(self._names)
        self._names.clear()
        return names


Restart = Callable[[list[str]], Awaitable[None]]


async def restart_on_changes(changes: Changes, restart: Restart, quiet: float = QUIET) -> None:
    """Calls ``restart(files)`` for each settled burst of ``changes``, one
    at a time, until cancelled. What changes while a restart runs waits in
    ``changes``: one more restart, once it is done. A restart that raises
    is logged, and the loop goes on."""
    while True:
        names = await changes.settled(quiet)
        try:
            await restart(names)
        except Exception:
            log.exception("restarting after a change to %s failed", ", ".join(names))


def _nothing() -> None:
    pass


async def watch_files(
    directory: Path, changes: Changes, ready: Callable[[], None] = _nothing
) -> None:
    """Adds to ``changes`` every file that changes under ``directory`` (an
    absolute path; relative names, noise left out: :func:`ignored`), until
    cancelled. Calls ``ready()`` once it is watching (within about
    :data:`RUST_TIMEOUT_MS` of the start: from then on no change is missed).

    The watcher waits in a worker thread for as long as it watches; it
    brings its own token to trio's default thread limiter meanwhile, so
    the daemon's other work in threads keeps the room it had. Cancellation
    tells the thread to stop and returns within about :data:`STEP_MS`.

    Raises:
        OSError: the directory cannot be watched (gone, not readable, no
            more inotify watches).
    """
    import watchfiles  # here: only a daemon that watches loads it

    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # (we say what changed)

    root = directory

    def wanted(change: watchfiles.Change, path: str) -> bool:
        try:
            relative = PurePath(path).relative_to(root)
        except ValueError:
            return False
        return not ignored(relative)

    stop = trio.Event()

    async def feed() -> None:
        batches = watchfiles.awatch(
            root,
            watch_filter=wanted,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=RUST_TIMEOUT_MS,
            yield_on_timeout=True,  # an empty batch: the first says it is watching
        )
        told = False
        async with aclosing(batches):
            async for batch in batches:
                changes.add(changed(batch, root))
                if not told:
                    told = True
                    ready()

    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens += 1
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed)
            try:
                await trio.sleep_forever()
            finally:
                stop.set()  # the thread looks at it every step, and returns
    except ExceptionGroup as group:  # the feed's own failure, as itself
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        limiter.total_tokens -= 1


#: What feeds :class:`Changes`: ``feed(directory, changes, ready)``.
Feed = Callable[[Path, Changes, Callable[[], None]], Awaitable[None]]


async def keep_watching(
    directory: Path,
    restart: Restart,
    say: Callable[[str], None],
    *,
    ready: Callable[[], None] = _nothing,
    feed: Feed = watch_files,
    quiet: float = QUIET,
) -> None:
    """Watches ``directory`` and calls ``restart`` after each burst of
    changes (see :func:`restart_on_changes`), until cancelled; ``ready()``
    once the feed is watching. A feed that fails (the directory went away,
    say) is told with ``say`` and the watching ends; nothing else does."""
    changes = Changes()

    async def fed() -> None:
        try:
            await feed(directory, changes, ready)
        except Exception as exc:
            log.warning("stopped watching %s: %r", directory, exc)
            say(f"stopped watching {directory}: {_why(exc)}")
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fed)
        nursery.start_soon(restart_on_changes, changes, restart, quiet)


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def files_text(names: list[str], most: int = 3) -> str:
    """``main.py``, ``a.py, b.py``, or ``a.py, b.py, c.py and 4 more``."""
    shown = ", ".join(names[:most])
    more = len(names) - most
    return f"{shown} and {more} more" if more > 0 else shown
