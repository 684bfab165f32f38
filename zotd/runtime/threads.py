"""Blocking work (file reads, hashing) in a worker thread, off the event loop.

:func:`run_sync` is ``trio.to_thread.run_sync`` with one difference: under a
virtual clock (``trio.testing.MockClock``, in the deadline tests) it holds
the clock still while the thread works. An autojumping clock sees a task
waiting on a thread as idle and would leap to the next deadline while the
thread runs on the real clock, so a test's exact times would depend on how
fast the machine reads files. Held, the work takes no virtual time, as if it
had run inline; on the real clock nothing changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

import trio
import trio.testing

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

#: How many :func:`run_sync` calls hold the virtual clock, and its threshold before.
_held: trio.lowlevel.RunVar[tuple[int, float]] = trio.lowlevel.RunVar("zotd_clock_held")


async def run_sync(fn: Callable[[*Ts], T], *args: *Ts, abandon_on_cancel: bool = False) -> T:
    """Returns ``fn(*args)``, run in a worker thread.

    Cancellation waits for ``fn`` to return (a thread cannot be stopped; what
    runs here is bounded file work), then raises :exc:`trio.Cancelled`; with
    ``abandon_on_cancel``, it raises at once and the thread finishes on its
    own, its result dropped. An exception ``fn`` raises is raised here.
    """
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, trio.testing.MockClock):
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=abandon_on_cancel)
    count, threshold = _held.get((0, clock.autojump_threshold))
    if count == 0:
        threshold = clock.autojump_threshold
        clock.autojump_threshold = math.inf
    _held.set((count + 1, threshold))
    try:
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=abandon_on_cancel)
    finally:
        count, threshold = _held.get()
        _held.set((count - 1, threshold))
        if count == 1:
            clock.autojump_threshold = threshold
