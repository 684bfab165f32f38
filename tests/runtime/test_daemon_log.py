"""The daemon's own log (``zotd.log`` after ``zotd start``) is rotated past
``max_log_bytes``, as an extension's is (zotd.runtime.daemon_log): a real
file, written through a real descriptor opened for appending, as the
daemon's stderr is; the checks' clock is virtual."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from zotd.model import logfiles
from zotd.runtime import daemon_log
from zotd.runtime.daemon_log import CHECK_INTERVAL, keep_rotated, writes_to

MAX = 4096


@pytest.fixture
def clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """``zotd.log`` and a descriptor appending to it, as ``zotd start`` gives the daemon."""
    path = tmp_path / "logs" / "zotd.log"
    fd = logfiles.open_append(path)
    try:
        yield path, fd
    finally:
        os.close(fd)


async def test_past_its_size_it_is_copied_aside_and_written_from_the_start(
    clock: trio.testing.MockClock, log_file: tuple[Path, int], caplog: pytest.LogCaptureFixture
) -> None:
    """Checked as the daemon starts, then every CHECK_INTERVAL."""
    path, fd = log_file
    os.write(fd, b"old line\n" * 1000)  # 9,000 bytes
    with caplog.at_level(logging.INFO, logger=daemon_log.__name__):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_rotated, path, MAX, fd)
            await trio.sleep(1)
            assert path.with_name("zotd.log.1").read_bytes() == b"old line\n" * 1000
            os.write(fd, b"new line\n")
            assert path.read_bytes() == b"new line\n"  # at the start: no hole before it
            os.write(fd, b"later\n" * 1000)
            await trio.sleep(CHECK_INTERVAL - 2)
            assert path.stat().st_size == 9 + 6000  # (not checked again yet)
            await trio.sleep(2)
            nursery.cancel_scope.cancel()
    assert path.with_name("zotd.log.2").read_bytes() == b"old line\n" * 1000
    assert path.with_name("zotd.log.1").read_bytes() == b"new line\n" + b"later\n" * 1000
    assert path.stat().st_size == 0
    assert [r.getMessage() for r in caplog.records] == [
        "this log was past max_log_bytes (9000 bytes): copied to zotd.log.1 and truncated",
        "this log was past max_log_bytes (6009 bytes): copied to zotd.log.1 and truncated",
    ]


async def test_under_its_size_it_is_left_alone(
    clock: trio.testing.MockClock, log_file: tuple[Path, int]
) -> None:
    path, fd = log_file
    os.write(fd, b"x" * MAX)
    with trio.move_on_after(CHECK_INTERVAL * 5):
        await keep_rotated(path, MAX, fd)
    assert path.stat().st_size == MAX
    assert not path.with_name("zotd.log.1").exists()


async def test_moved_away_it_is_no_longer_touched(
    clock: trio.testing.MockClock, log_file: tuple[Path, int]
) -> None:
    path, fd = log_file
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_rotated, path, MAX, fd)
        await trio.sleep(1)
        path.rename(path.with_name("kept.log"))  # by hand, or another tool's rotation
        path.write_bytes(b"y" * (2 * MAX))  # a new file at its name, not the daemon's
        await trio.sleep(CHECK_INTERVAL + 1)
        assert nursery.child_tasks == frozenset()  # it returned by itself
    assert path.stat().st_size == 2 * MAX


def test_only_a_regular_file_at_that_path_opened_for_appending_counts(
    tmp_path: Path, log_file: tuple[Path, int]
) -> None:
    path, fd = log_file
    assert writes_to(path, fd)
    assert not writes_to(tmp_path / "other.log", fd)
    plain = os.open(path, os.O_WRONLY)  # (no O_APPEND: truncating would leave a hole)
    try:
        assert not writes_to(path, plain)
    finally:
        os.close(plain)
    read, write = os.pipe()  # a service manager's pipe, a terminal: nothing to rotate
    try:
        assert not writes_to(path, write)
    finally:
        os.close(read)
        os.close(write)
