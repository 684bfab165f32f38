"""An extension's log as the daemon writes it (zotd/runtime/extension_log.py):
notes are bounded appends, made inline; rotation copies in a worker thread."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    assert log.path.read_text() == ""


@pytest.mark.parametrize("lines", [0, 3, 20])
def test_the_tail_is_the_last_ten_lines(tmp_path: Path, lines: int) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    log.path.write_text("".join(f"{i}\n" for i in range(lines)))
    assert log.tail() == [str(i) for i in range(max(0, lines - 10), lines)]
