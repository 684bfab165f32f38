"""An extension's log as the daemon writes it (zotd/runtime/extension_log.py):
notes are bounded appends, made inline; rotation copies in a worker thread."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from zotd.runtime.extension_log import MAX_NOTE, ExtensionLog, bounded


def test_a_short_note_is_kept_whole() -> None:
    assert bounded("refused: first frame must be `hello`") == (
        "refused: first frame must be `hello`"
    )
    assert bounded("x" * MAX_NOTE) == "x" * MAX_NOTE


def test_a_long_note_is_cut_and_says_how_much_went() -> None:
    assert bounded("y" * (MAX_NOTE + 5)) == "y" * MAX_NOTE + "... [5 more characters]"


def test_a_note_is_on_disk_at_once_and_stamped(tmp_path: Path) -> None:
    log = ExtensionLog("x", tmp_path / "logs" / "ext-x.log", 4096)
    log.note("started pid 1: ./x")
    (line,) = log.path.read_text().splitlines()
    assert line.startswith("[zotd ") and line.endswith("] started pid 1: ./x")


def test_a_note_is_one_bounded_append_whatever_the_extension_sent(tmp_path: Path) -> None:
    # A tool name is bounded only by the frame size (16 MiB): what the note
    # writes is bounded by MAX_NOTE, in the widest characters there are.
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    log.note("tool '" + "\U0001f600" * (16 * 1024 * 1024 // 4) + "' refused")
    data = log.path.read_bytes()
    assert data.count(b"\n") == 1
    assert len(data) <= 4 * (MAX_NOTE + 64) == 8256


async def test_a_small_log_is_not_rotated(tmp_path: Path) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    log.path.write_text("short\n")
    assert not await log.rotate()
    assert not (tmp_path / "ext-x.log.1").exists()


async def test_a_big_log_is_rotated(tmp_path: Path) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    log.path.write_text("line\n" * 1000)
    assert await log.rotate()
    assert (tmp_path / "ext-x.log.1").read_text() == "line\n" * 1000
    (line,) = log.path.read_text().splitlines()
    assert line.endswith("] rotated this log (it passed 4096 bytes) to ext-x.log.1")


@pytest.mark.parametrize("lines", [0, 3, 20])
def test_the_tail_is_the_last_ten_lines(tmp_path: Path, lines: int) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    log.path.write_text("".join(f"{i}\n" for i in range(lines)))
    assert log.tail() == [str(i) for i in range(max(0, lines - 10), lines)]


def occupy_rotated_names(log: Path) -> None:
    """Non-empty directories at every rotated name: the OS refuses the copy."""
    for n in range(1, 4):
        (log.parent / f"{log.name}.{n}" / "taken").mkdir(parents=True)


async def test_a_log_that_cannot_be_copied_is_truncated_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    occupy_rotated_names(log.path)
    log.path.write_text("line\n" * 1000)
    assert await log.rotate()
    (line,) = log.path.read_text().splitlines()
    assert "] truncated this log (it passed 4096 bytes) without a copy: " in line
    assert line.endswith("5000 bytes lost")
    assert "cannot copy" in caplog.text and "5000 bytes lost" in caplog.text


async def test_a_log_that_cannot_be_opened_gives_the_child_a_counted_pipe(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    caplog.set_level(logging.INFO, "zotd")
    log.path.mkdir()  # the OS refuses to open it for writing: EISDIR
    fd = log.open_for_child()
    assert "cannot open" in caplog.text and "its stderr is dropped" in caplog.text
    log.note("started pid 1")  # cannot be written either: no second warning
    assert caplog.text.count(str(log.path)) == 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(log.watch)

        def child() -> None:  # past a pipe's buffer: it is drained meanwhile
            with os.fdopen(fd, "wb") as child_stderr:
                child_stderr.write(b"x" * 100_000)

        await trio.to_thread.run_sync(child)
        while log.dropped < 100_000:
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert log.dropped == 100_000
    assert "100000 bytes of its stderr dropped" in caplog.text
