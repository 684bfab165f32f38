"""The accept loop's backoff on EMFILE and the like (issue 15, point 9), in
virtual time: a listener stub whose accept() fails as a kernel out of file
descriptors does."""

from __future__ import annotations

import errno
import logging
from collections import deque
from typing import Any

import pytest
import trio
import trio.testing

from zotd.runtime.accept import accept_loop


class FlakyListener:
    """Hands out ``script``'s connections in order, raising its OSErrors
    where it says so; then blocks until closed."""

    def __init__(self, script: list[int | str]) -> None:
        self.script: deque[int | str] = deque(script)
        self.closed = False

    async def accept(self) -> Any:
        await trio.lowlevel.checkpoint()
        if not self.script:
            await trio.sleep_forever()
        step = self.script.popleft()
        if isinstance(step, int):
            raise OSError(step, "injected")
        return step

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> FlakyListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def serve_all(
    script: list[int | str], expected: int
) -> tuple[list[tuple[str, float]], FlakyListener]:
    """Runs the loop until ``expected`` connections were handled; returns
    them with the virtual time each was handled at."""
    listener = FlakyListener(script)
    served: list[tuple[str, float]] = []
    done = trio.Event()

    async def handler(stream: str) -> None:
        served.append((stream, trio.current_time()))
        if len(served) == expected:
            done.set()

    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await accept_loop(listener, handler, nursery)  # type: ignore[arg-type]

        nursery.start_soon(run)
        await done.wait()
        scope.cancel()
    return served, listener


EMFILE, ENFILE = errno.EMFILE, errno.ENFILE


@pytest.fixture
def clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def test_backs_off_and_logs_once_per_episode(
    clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    script: list[int | str] = [EMFILE] * 5 + ["a", "b"] + [ENFILE] * 3 + ["c"]
    with caplog.at_level(logging.INFO, logger="zotd.runtime.accept"):
        served, listener = await serve_all(script, 3)
    # Waits of 0.01, 0.02, 0.04, 0.08, 0.16 s; reset by "a"; 0.01, 0.02, 0.04.
    assert [name for name, _ in served] == ["a", "b", "c"]
    assert [at for _, at in served] == pytest.approx([0.31, 0.31, 0.38])
    assert [r.getMessage() for r in caplog.records] == [
        "cannot accept connections: Too many open files; retrying every 1 s at most "
        "(connections wait in the socket's backlog meanwhile)",
        "accepting connections again, after 5 failed attempts in 0.3 s",
        "cannot accept connections: Too many open files in system; retrying every 1 s at "
        "most (connections wait in the socket's backlog meanwhile)",
        "accepting connections again, after 3 failed attempts in 0.1 s",
    ]
    assert listener.closed  # cancelling the loop closes its listener


async def test_the_wait_stops_growing_at_one_second(
    clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="zotd.runtime.accept"):
        served, _ = await serve_all([errno.ENOBUFS] * 10 + ["a"], 1)
    # 0.01 .. 0.64 (7 waits, 1.27 s), then 1 s three times.
    assert [name for name, _ in served] == ["a"]
    assert [at for _, at in served] == pytest.approx([4.27])
    assert len(caplog.records) == 2
    assert caplog.records[1].getMessage() == (
        "accepting connections again, after 10 failed attempts in 4.3 s"
    )


async def test_other_accept_errors_are_raised(clock: trio.testing.MockClock) -> None:
    with pytest.raises(ExceptionGroup) as group:
        await serve_all([errno.EBADF], 1)
    assert group.group_contains(OSError, match="injected")
