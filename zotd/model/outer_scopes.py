"""The extensions every workspace of a daemon sees alike, read once and checked as a whole.

Every workspace sees the explicit extensions (``zotd --ext``) and the
global ones (``$ZOT_HOME/extensions``), the *outer* scopes, and reads the
registrations caches of the lazy ones among them. Each read is memoized by
:mod:`.rereads`, but checking those memos one by one, for every workspace
that opens, costs more than opening a workspace with no extensions at all.

:class:`OuterScopes` keeps the outcome of one whole pass (the outer
scopes' extensions and their caches) with the stamp of every file and
directory the pass looked at (:mod:`.stamps`): the scope's directory (an
entry added or removed), every manifest, what each ``exec`` resolved
through, every path a cache key depends on, every cache file. While all of
those stamps hold, the pass is given back as it was (copies), for one
``stat`` per path; a pass that had to do any work (a memo missed: something
changed, or had not settled) is not kept, so the next one, all hits,
becomes the kept one.

Plain blocking code; thread-safe (workspaces open in worker threads).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from . import reg_cache, rereads, stamps
from .manifest import Found, runs_nothing
from .reg_cache import Cached, CacheError, Uncacheable
from .stamps import Dep, Group, Look, Mark, Stamp, settled

__all__ = ["Outer", "OuterScopes", "Prefetched", "prefetch"]

#: A cache read done ahead: what :func:`~.reg_cache.load` returned (the
#: cache, or ``None`` and why), or what it raised.
Prefetched = tuple[Cached | None, str] | Uncacheable | CacheError


def prefetch(found: Found, cache_dir: Path, look: Look | None = None) -> Prefetched:
    """Blocking: ``found``'s registrations cache, read as a lazy extension's
    first run reads it (memoized by :mod:`.rereads`); what that raises is
    returned."""
    try:
        want = rereads.cache_key(found, look)
        return rereads.load_cache(reg_cache.path(cache_dir, found.name), found.name, want, look)
    except (Uncacheable, CacheError) as exc:
        return exc


def may_run(found: Found) -> bool:
    """Whether ``found`` is sound, enabled, trusted and names a program."""
    manifest = found.manifest
    return not (
        manifest is None
        or found.error
        or found.untrusted
        or not manifest.enabled
        or runs_nothing(found)
    )


class Outer(msgspec.Struct):
    """One pass over the outer scopes (copies: the caller may change them).

    Attributes:
        explicit: the explicit extensions, in the order given.
        global_: the global ones, by directory name.
        caches: the cache read ahead for each lazy one that may run, by
            ``(name, directory)``.
    """

    explicit: list[Found]
    global_: list[Found]
    caches: dict[tuple[str, Path], Prefetched]

    def copy(self) -> Outer:
        """The extensions copied (a workspace changes what it is given); the
        caches shared (nothing changes a :class:`~.reg_cache.Cached` once made)."""
        return Outer(
            [rereads.copy_found(f) for f in self.explicit],
            [rereads.copy_found(f) for f in self.global_],
            dict(self.caches),
        )


#: Reads the extension directories of a scope: the directories, and the
#: paths of the other entries looked at (see ``discovery._listing``).
Listing = Callable[[Path], tuple[list[Path], list[str]]]

#: Reads the outer scopes: ``(explicit, global_dir, path_env, look)`` to
#: ``(explicit, global_)``, looking at every path it depends on through ``look``.
Reader = Callable[[Sequence[Path], Path, str | None, Look], tuple[list[Found], list[Found]]]


class OuterScopes:
    """The last pass over the outer scopes, kept while its stamps hold (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: tuple[object, Outer, list[tuple[str, Stamp]]] | None = None

    def read(
        self,
        reader: Reader,
        *,
        explicit: Sequence[Path],
        global_dir: Path,
        path_env: str | None,
        cache_dir: Path,
        lazy: Callable[[Found], bool],
    ) -> Outer:
        """The outer scopes' extensions and the lazy ones' caches (copies of
        their own): the kept pass if every path it looked at is unchanged,
        else a new pass with ``reader`` (kept if it did no work).

        ``lazy`` says which extensions start on first use; it must give the
        same answers for as long as this object lives (a daemon's config)."""
        key = (tuple(explicit), global_dir, path_env, cache_dir)
        with self._lock:
            kept = self._kept
        if kept is not None and kept[0] == key and _hold(kept[2]):
            return kept[1].copy()
        look = Look()
        began = stamps.now_ns()
        found_explicit, found_global = reader(explicit, global_dir, path_env, look)
        caches = {
            (f.name, f.dir): prefetch(f, cache_dir, look)
            for f in [*found_explicit, *found_global]
            if may_run(f) and f.manifest is not None and lazy(f)
        }
        outer = Outer(found_explicit, found_global, caches)
        marks = look.seen
        if not look.missed and all(settled(m, began) for m in marks.values()):
            with self._lock:
                self._kept = (key, outer, _essential(marks))
            return outer.copy()
        with self._lock:
            self._kept = None
        return outer


def _hold(stamps: list[tuple[str, Stamp]]) -> bool:
    """Whether every path still has its stamp (:func:`~.stamps.stamp`,
    inline: this is every workspace's start, one ``stat`` per path)."""
    stat = os.stat
    for path, was in stamps:
        try:
            st = stat(path)
        except (OSError, ValueError):
            if was is not None:
                return False
            continue
        if was is None or was != (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns):
            return False
    return True


def _essential(seen: dict[Dep, Mark]) -> list[tuple[str, Stamp]]:
    """Each path of ``seen`` (groups taken apart) with its stamp, but those
    that do not exist in a directory stamped too: creating one changes the
    directory's times, so its own stamp adds nothing (the arguments a cache
    key tried as files, the names looked for along ``PATH``). A dangling
    link is kept: making its target does not touch its directory."""
    flat: dict[str, Stamp] = {}
    for dep, m in seen.items():
        if isinstance(dep, Group):
            assert isinstance(m, tuple)
            for path, s in zip(dep, m, strict=True):
                assert s is None or isinstance(s, tuple)
                flat.setdefault(path, s)
        else:
            assert m is None or isinstance(m[0], int)
            flat.setdefault(dep, m)
    return [
        (path, s)
        for path, s in flat.items()
        if s is not None or flat.get(os.path.dirname(path)) is None or os.path.lexists(path)
    ]
