"""What every workspace's start reads again, kept while unchanged.

Each workspace that opens reads the manifests of the extensions it sees
(the global ones are the same for every workspace), and a lazy
extension's registrations cache, keyed by a digest of what it runs. These
are :func:`~.manifest.load`, :func:`~.reg_cache.key` and
:func:`~.reg_cache.load` memoized by :mod:`.stamps`: each result is given
back while every file and directory it depended on is unchanged, for a few
``stat`` calls.

What a result depends on:

* a manifest's :class:`~.manifest.Found`: its directory (an entry added or
  removed: another ``exec`` may resolve), ``extension.json``, the
  executable it resolved, and for every directory ``exec`` is looked up in
  (``PATH``, and the Python zotd runs on) that directory and the candidate
  file in it. One with skills is not kept (it reads their files too).
* a cache key: every directory and file the fingerprint of its directory
  walked, and every path its arguments name.
* a cache's content: the directory of the caches. Every write is a rename
  into it (:func:`~.reg_cache.save`), which changes the directory, so one
  ``stat`` stands for all of them: a workspace with ten lazy extensions
  checks one path instead of ten. (Any cache written makes every one be
  read again, once.)

Plain blocking code, as the functions it wraps; thread-safe.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import msgspec

from . import manifest as mf
from . import reg_cache
from .manifest import Found
from .reg_cache import Cached
from .stamps import Dep, Group, Look, Memo, mark

__all__ = ["cache_key", "copy_found", "load_cache", "load_found"]

_founds: Memo[tuple[str, str, str | None], Found] = Memo()
_keys: Memo[tuple[object, ...], str] = Memo()
_caches: Memo[tuple[str, str, str], tuple[Cached | None, str]] = Memo()

_encode = msgspec.json.Encoder().encode


def load_found(
    directory: Path, scope: str, path_env: str | None = None, look: Look | None = None
) -> Found:
    """:func:`~.manifest.load`, kept while what it read is unchanged (a copy
    of its own: the caller may change it)."""
    directory = directory.absolute()

    def work() -> tuple[Found, list[Dep] | None]:
        found = mf.load(directory, scope, path_env)
        return found, _found_depends(found, path_env)

    return copy_found(_founds.get((str(directory), scope, path_env), work, look or mark))


def copy_found(found: Found) -> Found:
    """A copy of ``found`` with lists of its own (and none passed over yet).

    Every field by position (a quarter of ``dataclasses.replace``'s cost: a
    workspace copies each of the extensions it sees as it opens);
    ``tests/model/test_outer_scopes.py`` checks that none is left out."""
    return Found(
        found.name,
        found.dir,
        found.scope,
        found.manifest,
        list(found.argv),
        found.error,
        found.untrusted,
        found.exec_on_path,
        list(found.warnings),
        list(found.skills),
        found.sharing,
        found.origin,
        [],
    )


def cache_key(found: Found, look: Look | None = None) -> str:
    """:func:`~.reg_cache.key`, kept while what it read is unchanged.

    Raises:
        Uncacheable: as :func:`~.reg_cache.key` (never kept).
    """
    manifest = msgspec.structs.asdict(found.manifest) if found.manifest is not None else None
    key = (str(found.dir), found.name, tuple(found.argv), found.exec_on_path, _encode(manifest))

    def work() -> tuple[str, list[str]]:
        seen: list[str] = []
        return reg_cache.key(found, seen), seen

    return _keys.get(key, work, look or mark)


def load_cache(
    file: Path, name: str, want: str, look: Look | None = None
) -> tuple[Cached | None, str]:
    """:func:`~.reg_cache.load`, kept while the caches' directory is
    unchanged (a copy).

    Raises:
        CacheError: as :func:`~.reg_cache.load` (never kept).
    """

    def work() -> tuple[tuple[Cached | None, str], list[str]]:
        return reg_cache.load(file, name, want), [str(file.parent)]

    cached, why = _caches.get((str(file), name, want), work, look or mark)
    if cached is None:
        return None, why
    return Cached(list(cached.registrations), list(cached.events), list(cached.intercepts)), why


def _found_depends(found: Found, path_env: str | None) -> list[Dep] | None:
    """What :func:`~.manifest.load` read to make ``found`` (``None``: more
    than can be named; not kept)."""
    manifest = found.manifest
    directory = str(found.dir)
    paths: list[Dep] = [directory, os.path.join(directory, mf.MANIFEST)]
    if manifest is None:
        return paths
    if manifest.skills or found.skills:
        return None
    if not manifest.exec:
        return paths
    exe = manifest.exec
    paths.append(os.path.join(directory, exe))
    if found.argv:
        paths.append(found.argv[0])
    dirs = [
        d
        for d in (path_env if path_env is not None else os.environ.get("PATH", "")).split(
            os.pathsep
        )
        if d
    ]
    own = os.path.dirname(sys.executable) if sys.executable else ""
    names = sorted({os.path.basename(exe), *(os.path.basename(a) for a in found.argv[:1])})
    # A lookup along a path depends on the directories up to the first that
    # has the name, not on those after it: `exec_on_path` looks along ours
    # first, then PATH; a bare `exec` is looked up along PATH.
    searched = [own, *dirs] if own else dirs
    upto = max((_first_hit(n, searched) for n in names), default=len(searched))
    seen = searched[: upto + 1]
    if "/" not in exe:
        seen += [d for d in dirs[: _first_hit(exe, dirs) + 1] if d not in seen]
    lookup: list[str] = []
    for d in seen:
        lookup.append(d)
        lookup.extend(os.path.join(d, n) for n in names)
    return [*paths, Group(lookup)]  # (the same for every extension run by this name)


def _first_hit(name: str, dirs: list[str]) -> int:
    """The index of the first of ``dirs`` where ``shutil.which`` finds
    ``name``, or the last index if none has it (every one was looked in)."""
    for i, d in enumerate(dirs):
        if shutil.which(name, path=d) is not None:
            return i
    return len(dirs) - 1
