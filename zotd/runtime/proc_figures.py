"""A process's memory and CPU, read with psutil when an extension is listed.

:func:`look` gives the resident memory, the CPU seconds and the CPU
percent since the last look at the same process, for one pid: two reads
of ``/proc`` on Linux (a few tens of microseconds), inline on the event
loop, as ``list_extensions`` and ``status`` build their entries. It never
raises: a process that has just exited, or that cannot be read, gives
:data:`NOTHING`.

The last look at each process is remembered (its ``psutil.Process``, CPU
seconds and when), by pid and start (so a pid drawn again by a later
process starts afresh), so the next gives the CPU use in between; at most
:data:`REMEMBERED` are kept (the oldest go first). Looks closer together than :data:`MIN_SPAN` give the last percent
again instead of one over a span too short to mean anything (two agents
listing at once).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import psutil

__all__ = ["MIN_SPAN", "NOTHING", "REMEMBERED", "Figures", "look"]

#: How many processes' last looks are kept.
REMEMBERED = 1024
#: Seconds between two looks under which the last CPU percent is given again.
MIN_SPAN = 0.5


class Figures(NamedTuple):
    """One look at a process (``None``: no process, or unreadable)."""

    rss_bytes: int | None
    cpu_percent: float | None
    cpu_s: float | None


NOTHING = Figures(None, None, None)


class _Last:
    """The last look at one process."""

    __slots__ = ("at", "cpu_s", "percent", "process")

    def __init__(self, process: psutil.Process, at: float, cpu_s: float, percent: float) -> None:
        self.process = process
        self.at = at
        self.cpu_s = cpu_s
        self.percent = percent


#: The last looks, by pid and start, oldest first.
_last: dict[tuple[int, float | None], _Last] = {}


def look(pid: int | None, started: float | None = None) -> Figures:
    """``pid``'s resident memory (bytes), CPU percent of one core since the
    last look (the first: since it started) and CPU seconds (user and
    system, its own, not its children's); :data:`NOTHING` if it cannot be read.

    ``started`` tells one process of ``pid`` from a later one (any value
    that differs: the extension's ``started_at``).
    """
    if pid is None or pid <= 0:
        return NOTHING
    key = (pid, started)
    try:
        return _look(key)
    except (psutil.Error, OSError, ValueError):  # gone, or not ours to read
        _last.pop(key, None)
        return NOTHING


def _look(key: tuple[int, float | None]) -> Figures:
    last = _last.pop(key, None)  # (put back below: the most recent looks are kept)
    process = psutil.Process(key[0]) if last is None else last.process
    with process.oneshot():
        times = process.cpu_times()
        rss = int(process.memory_info().rss)
    now = time.monotonic()
    cpu_s = float(times.user + times.system)
    if last is None:
        alive = max(time.time() - process.create_time(), 1e-3)
        last = _Last(process, now, cpu_s, cpu_s / alive * 100)
    elif now - last.at >= MIN_SPAN:
        percent = (cpu_s - last.cpu_s) / (now - last.at) * 100
        last = _Last(process, now, cpu_s, percent)
    while len(_last) >= REMEMBERED:
        del _last[next(iter(_last))]
    _last[key] = last
    return Figures(rss, round(max(last.percent, 0.0), 1), round(cpu_s, 3))
