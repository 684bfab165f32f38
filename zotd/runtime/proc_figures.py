"""A process's memory and CPU, read when an extension is listed.

:func:`look` gives the resident memory, the CPU seconds and the CPU
percent since the last look at the same process, for one pid, inline on
the event loop, as ``list_extensions`` and ``status`` build their entries.
On Linux that is two reads of ``/proc`` (a few microseconds: the files
psutil reads, whose import would cost every daemon's start some
milliseconds); elsewhere psutil, imported at the first look. It never
raises: a process that has just exited, or that cannot be read, gives
:data:`NOTHING`.

The last look at each process is remembered (its CPU seconds and when, and
psutil's handle of it where psutil reads it), by pid and start (so a pid
drawn again by a later process starts afresh), so the next gives the CPU
use in between; at most :data:`REMEMBERED` are kept (the oldest go first).
Looks closer together than :data:`MIN_SPAN` give the last percent again
instead of one over a span too short to mean anything (two agents listing
at once).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

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


class Reading(NamedTuple):
    """What one read of a process gives: its CPU seconds (user and system),
    resident bytes, and seconds since it started; ``handle`` is kept for the
    next read of the same process (psutil's ``Process``; ``None`` on Linux)."""

    cpu_s: float
    rss_bytes: int
    age_s: float
    handle: object


class _Last:
    """The last look at one process."""

    __slots__ = ("at", "cpu_s", "handle", "percent")

    def __init__(self, handle: object, at: float, cpu_s: float, percent: float) -> None:
        self.handle = handle
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
    except (OSError, ValueError, IndexError):  # gone, or not ours to read
        _last.pop(key, None)
        return NOTHING


def _look(key: tuple[int, float | None]) -> Figures:
    last = _last.pop(key, None)  # (put back below: the most recent looks are kept)
    now = time.monotonic()
    reading = _read(key[0], None if last is None else last.handle)
    cpu_s = reading.cpu_s
    if last is None:
        last = _Last(reading.handle, now, cpu_s, cpu_s / max(reading.age_s, 1e-3) * 100)
    elif now - last.at >= MIN_SPAN:
        percent = (cpu_s - last.cpu_s) / (now - last.at) * 100
        last = _Last(reading.handle, now, cpu_s, percent)
    while len(_last) >= REMEMBERED:
        del _last[next(iter(_last))]
    _last[key] = last
    return Figures(reading.rss_bytes, round(max(last.percent, 0.0), 1), round(cpu_s, 3))


def read_proc(pid: int, handle: object = None) -> Reading:
    """``pid``'s figures from ``/proc`` (Linux): ``utime``, ``stime`` and
    ``starttime`` (in clock ticks since boot) of ``/proc/PID/stat`` (fields
    14, 15 and 22, as ``proc(5)`` numbers them), and the resident pages of
    ``/proc/PID/statm`` (the second field: what psutil, ``VmRSS`` and ``ps``
    show; ``stat``'s own ``rss`` may lag a little).

    Raises:
        OSError: no such process, or not ours to read.
    """
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    # (the name, field 2, is in parentheses and may hold anything: split after it)
    fields = stat[stat.rindex(b")") + 2 :].split()
    with open(f"/proc/{pid}/statm", "rb") as f:
        resident = int(f.read().split()[1])
    tick = _CLK_TCK
    started = int(fields[19]) / tick
    return Reading(
        cpu_s=(int(fields[11]) + int(fields[12])) / tick,
        rss_bytes=resident * _PAGE_SIZE,
        age_s=time.clock_gettime(time.CLOCK_BOOTTIME) - started,
        handle=None,
    )


def read_psutil(pid: int, handle: object = None) -> Reading:
    """``pid``'s figures through psutil (``handle``: its ``Process`` from the
    last read, if any).

    Raises:
        OSError: no such process, or not ours to read (psutil's errors).
    """
    import psutil

    try:
        process = handle if isinstance(handle, psutil.Process) else psutil.Process(pid)
        with process.oneshot():
            times = process.cpu_times()
            rss = int(process.memory_info().rss)
            age = time.time() - process.create_time()
    except psutil.Error as exc:
        raise OSError(str(exc)) from exc
    return Reading(float(times.user + times.system), rss, age, process)


_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_read: Callable[[int, object], Reading] = read_proc if sys.platform == "linux" else read_psutil
