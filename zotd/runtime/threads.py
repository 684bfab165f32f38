"""Blocking work (file reads, hashing) in a worker thread, off the event loop.

:func:`run_sync` is ``trio.to_thread.run_sync`` with one difference: under a
virtual clock (``trio.testing.MockClock``, in the deadline tests) it holds
the clock still while the thread works. An autojumping clock sees a task
waiting on a thread as idle and would leap to the next deadline while the
thread runs on the real clock, so a test's exact times would depend on how
fast the machine reads files. Held, the work takes no virtual time, as if it
had run inline; on the real clock nothing changes.

``trio.testing`` is not imported here: it imports pytest, a tenth of a second
of the daemon's start. A clock can only be a ``MockClock`` once something
else (a test) has imported it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, TypeVarTuple

import trio

if TYPE_CHECKING:
    from trio.testing import MockClock

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
    clock = _mock_clock()
    if clock is None:
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


def _mock_clock() -> MockClock | None:
    """The run's clock if it is trio's virtual one, else None."""
    testing = sys.modules.get("trio.testing")
    clock = trio.lowlevel.current_clock()
    if testing is not None and isinstance(clock, testing.MockClock):
        mock: MockClock = clock
        return mock
    return None
