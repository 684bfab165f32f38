"""Every log at once: the daemon's and each extension's, interleaved by time.

:func:`log_sources` finds the logs in ``$ZOT_HOME/logs/`` (``zotd.log``
first, then ``ext-NAME.log`` by name); :func:`interleave` merges their lines,
each log's already in its own order, into one stream in time order: a heap
merge, which keeps each log's order (a line whose time went back stays
after the lines before it) and, between lines of the same time, the order
of the logs given. A line without a time (before any stamp) comes first.
"""

from __future__ import annotations

import heapq
import math
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .log_read import LogLine
from .paths import Paths

#: How an extension's log is named: ``ext-NAME.log``.
_PREFIX, _SUFFIX = "ext-", ".log"


@dataclass(frozen=True, slots=True)
class Tagged:
    """A line, and whose log it is in."""

    #: The extension's name; None for the daemon's own log.
    extension: str | None
    line: LogLine


def log_sources(paths: Paths) -> list[tuple[str | None, Path]]:
    """The logs there are, as (extension name or None, path): the daemon's
    (``zotd.log``, if there is one) first, then every extension's by name.
    Rotated copies are not listed here: each log's reader finds its own.

    Raises:
        OSError: the logs directory exists and cannot be listed.
    """
    found: list[tuple[str | None, Path]] = []
    try:
        entries = sorted(os.scandir(paths.logs_dir), key=lambda entry: entry.name)
    except FileNotFoundError:
        return found
    names = {entry.name for entry in entries if _is_file(entry)}
    if paths.daemon_log.name in names:
        found.append((None, paths.daemon_log))
    for entry in entries:
        name = entry.name
        if name in names and name.startswith(_PREFIX) and name.endswith(_SUFFIX):
            extension = name[len(_PREFIX) : -len(_SUFFIX)]
            if extension:
                found.append((extension, Path(entry.path)))
    return found


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return stat.S_ISREG(entry.stat().st_mode)
    except OSError:
        return False


def time_key(tagged: Tagged) -> float:
    """What :func:`interleave` orders by: the line's time (lines without one first)."""
    moment = tagged.line.time
    return -math.inf if moment is None else moment


def interleave(streams: Iterable[Iterable[Tagged]]) -> Iterator[Tagged]:
    """The lines of ``streams`` (each in its own order) in time order,
    taken from each as they are needed."""
    return heapq.merge(*streams, key=time_key)


def tagged(extension: str | None, lines: Iterable[LogLine]) -> Iterator[Tagged]:
    """``lines``, each tagged with ``extension``."""
    return (Tagged(extension, line) for line in lines)
