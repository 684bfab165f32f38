"""Results of blocking file work, kept while the files they came from are unchanged.

Opening a workspace reads every extension's manifest and, for a lazy one,
hashes what it runs to find its registrations cache (see
:mod:`.discovery`, :mod:`.reg_cache`). Most of that is the same for every
workspace (the global extensions) and from one open to the next. A
:class:`Memo` keeps each result with the *stamp* of every file and
directory it depended on (device, inode, size, modification and change
times, by ``stat``), and gives it back only while each stamp is still what
it was: a handful of ``stat`` calls instead of reading, parsing, resolving
and hashing again.

A stamp cannot see a change made within the same tick of the file system's
clock as the stamp itself (same inode, same size, same times). So a result
is kept only if everything it depended on last changed at least
:data:`SETTLE_NS` before its work began (coarser than any file system's
timestamps): a later change moves the change time on, where ``touch``
cannot set it back, and shows. A file changed while the work ran is too
young to keep, so a result is never kept under a stamp newer than what it
read.

Plain blocking code, safe to call from several worker threads at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

__all__ = [
    "SETTLE_NS",
    "Dep",
    "Group",
    "Look",
    "Mark",
    "Memo",
    "Stamp",
    "mark",
    "now_ns",
    "settled",
    "stamp",
]

#: How long ago the files a result depends on must have last changed for the
#: result to be kept (FAT's timestamps are 2 s coarse; ext4's a tick).
SETTLE_NS = 2_000_000_000

#: ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``, or ``None`` for a
#: path that does not exist (or cannot be stat'ed).
Stamp = tuple[int, int, int, int, int] | None

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def now_ns() -> int:
    """Wall-clock nanoseconds: the clock file times are kept in."""
    return time.time_ns()


def stamp(path: str) -> Stamp:
    """``path``'s stamp, following links (a link moved to another file shows)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Group(tuple[str, ...]):
    """Paths depended on together, stamped as one: what many results share
    (the directories on ``PATH`` and the candidates in them), checked once a
    pass by a :class:`Look` rather than path by path for each result."""

    __slots__ = ()


#: What a result depends on: a path, or a group of them.
Dep = str | Group

#: A dependency's stamp: a path's, or a group's (one per path).
Mark = Stamp | tuple[Stamp, ...]


def mark(dep: Dep) -> Mark:
    """The stamp of a path, or of each path of a group."""
    if isinstance(dep, Group):
        return tuple(stamp(p) for p in dep)
    return stamp(dep)


def settled(m: Mark, began: int) -> bool:
    """Whether what ``m`` stamps last changed :data:`SETTLE_NS` or more before
    ``began`` (:func:`now_ns`): a result read from it since may be kept."""
    return _settled(m, began - SETTLE_NS)


def _settled(m: Mark, before: int) -> bool:
    """Whether nothing ``m`` stamps changed at ``before`` or later."""
    if m is None:
        return True
    if not m or not isinstance(m[0], int):  # a group's: a stamp per path
        return all(_settled(s, before) for s in m if not isinstance(s, int))
    return max(m[3], m[4]) < before


class _Entry(Generic[V]):
    __slots__ = ("stamps", "value")

    def __init__(self, value: V, stamps: list[tuple[Dep, Mark]]) -> None:
        self.value = value
        self.stamps = stamps


class Memo(Generic[K, V]):
    """Up to ``size`` results by key, each valid while its files' stamps hold."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        key: K,
        work: Callable[[], tuple[V, Iterable[Dep] | None]],
        look: Callable[[Dep], Mark] = mark,
    ) -> V:
        """The result kept for ``key`` if its files are unchanged; else
        ``work()``'s, which returns the result and every path (or group) it depended on
        (kept if they have all settled; never if ``None``: it depended on
        more than it can name). What ``work`` raises is raised.

        ``look`` stamps a path (a :class:`Look`, to stamp each path once in
        a pass over many results)."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and all(look(p) == s for p, s in entry.stamps):
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
            return entry.value
        if isinstance(look, Look):
            look.missed = True
        began = now_ns()
        value, paths = work()
        if paths is None:
            with self._lock:
                self._entries.pop(key, None)
            return value
        stamps = [(p, mark(p)) for p in dict.fromkeys(paths)]
        if all(_settled(m, began - SETTLE_NS) for _, m in stamps):
            with self._lock:
                self._entries[key] = _Entry(value, stamps)
                self._entries.move_to_end(key)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        else:
            with self._lock:
                self._entries.pop(key, None)
        return value

    def clear(self) -> None:
        """Forgets every result."""
        with self._lock:
            self._entries.clear()


class Look:
    """:func:`mark`, each dependency stamped once: for one pass over many
    results that share paths. Not thread-safe: one per pass.

    It remembers what it stamped (:attr:`seen`), and whether a :class:`Memo`
    given it had to do the work of a result (:attr:`missed`): a pass with
    no miss depended on exactly what it saw."""

    def __init__(self) -> None:
        self._seen: dict[Dep, Mark] = {}
        #: Whether a memo looked up with it ran its work (nothing kept, or changed).
        self.missed = False

    @property
    def seen(self) -> dict[Dep, Mark]:
        """Every dependency stamped so far, with its stamp."""
        return self._seen

    def __call__(self, dep: Dep) -> Mark:
        try:
            return self._seen[dep]
        except KeyError:
            found = self._seen[dep] = mark(dep)
            return found
