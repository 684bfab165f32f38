"""Blocking work in worker threads: off the event loop, and no virtual time taken."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import trio
import trio.testing

from zotd.runtime import threads


def slow(seconds: float) -> str:
    time.sleep(seconds)  # real time: the clock under test must not leap meanwhile
    return threading.current_thread().name


async def test_work_runs_in_a_thread_and_takes_no_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep, 100)  # a deadline the clock could leap to
        start = trio.current_time()
        results = []

        async def work() -> None:
            results.append(await threads.run_sync(slow, 0.05))

        async with trio.open_nursery() as inner:
            inner.start_soon(work)
            inner.start_soon(work)  # two at once: the clock stays held until both end
        assert trio.current_time() == start
        assert len(results) == 2
        assert threading.current_thread().name not in results
        assert autojump_clock.autojump_threshold == 0  # let go again
        await trio.sleep(1)
        assert trio.current_time() == start + 1


async def test_errors_come_back() -> None:
    def fail() -> None:
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        await threads.run_sync(fail)
    assert await threads.run_sync(slow, 0) != threading.current_thread().name


def test_the_daemon_does_not_import_pytest() -> None:
    # trio.testing imports pytest: a tenth of a second of every daemon start.
    probe = "import sys, zotd.runtime.daemon; print(sorted({'pytest', 'trio.testing'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
