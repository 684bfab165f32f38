"""Reading logs back (zotd/model/log_read.py, log_seek.py, log_time.py): real
files, rotated by zotd's own rotation, read across the rotation; lines
stamped or not; following through rotations."""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from zotd.model import logfiles
from zotd.model.log_read import MAX_LINE, LogLine, LogReader, history
from zotd.model.log_time import (
    iso_text,
    local_text,
    parse_since,
    stamp_of,
    without_stamp,
)
from zotd.runtime.extension_log import ExtensionLog


def local(text: str) -> float:
    """A local time, as zotd's notes and log write it, in seconds since the epoch."""
    return datetime.fromisoformat(text).timestamp()


def note(moment: str, text: str) -> str:
    return f"[zotd {moment}] {text}\n"


def texts(found: Iterable[LogLine]) -> list[str]:
    return [line.text for line in found]


def rotated_log(tmp_path: Path) -> Path:
    """ext-x.log with two rotated copies, made by zotd's rotation: lines
    0..299, 100 a file, oldest in .2; each file begins with a note."""
    log = tmp_path / "ext-x.log"
    for generation in range(3):
        with log.open("a") as f:
            f.write(note(f"2026-11-30 10:0{generation}:00.000", f"generation {generation}"))
            f.write("".join(f"line {i}\n" for i in range(generation * 100, generation * 100 + 99)))
        if generation < 2:
            assert logfiles.rotate_if_big(log, 100)
    return log


# --- stamps ----------------------------------------------------------------------------


def test_the_stamps_zotd_and_loggers_write_are_read() -> None:
    assert stamp_of("[zotd 2026-11-30 11:00:22.123] started pid 4") == local(
        "2026-11-30 11:00:22.123"
    )
    assert stamp_of("[zotd 2026-11-30 11:00:22] older note") == local("2026-11-30 11:00:22")
    assert stamp_of("2026-11-30 11:00:22,500 INFO zotd.runtime: up") == local(
        "2026-11-30 11:00:22.500"
    )
    utc = datetime(2026, 11, 30, 11, 0, 22, tzinfo=UTC).timestamp()
    assert stamp_of("[2026-11-30T11:00:22Z] x") == utc
    assert stamp_of("2026-11-30T12:00:22+01:00 x") == utc
    assert stamp_of("2026-11-30T06:30:22-0430") == utc


def test_what_is_not_a_stamp_gives_no_time() -> None:
    for line in [
        "fake wx starting, pid 4",
        "",
        " 2026-11-30 11:00:22 indented",
        "2026-13-30 11:00:22 no 13th month",
        "2026-11-30 11:00:22x glued",
        "[zotd 2026-11-30 11:00:22 unclosed",
        "2026-11-30 only a date",
    ]:
        assert stamp_of(line) is None, line


def test_a_stamp_comes_off_for_the_time_column() -> None:
    assert without_stamp("[zotd 2026-11-30 11:00:22.123] started pid 4") == "[zotd] started pid 4"
    assert without_stamp("2026-11-30 11:00:22,500 INFO zotd: up") == "INFO zotd: up"
    assert without_stamp("[2026-11-30T11:00:22Z] x") == "x"
    assert without_stamp("no stamp [zotd 2026-11-30 11:00:22]") == (
        "no stamp [zotd 2026-11-30 11:00:22]"
    )


def test_times_are_shown_in_local_time_and_iso_with_the_offset() -> None:
    moment = local("2026-11-30 11:00:22.123")
    assert local_text(moment) == "2026-11-30 11:00:22.123"
    iso = iso_text(moment)
    assert iso.startswith("2026-11-30T11:00:22.123")
    assert datetime.fromisoformat(iso).timestamp() == pytest.approx(moment)


def test_a_note_of_zotd_carries_a_time_the_reader_reads(tmp_path: Path) -> None:
    log = ExtensionLog("x", tmp_path / "ext-x.log", 4096)
    before = time.time()
    log.note("started pid 1: ./x")
    after = time.time()
    (line,) = log.path.read_text().splitlines()
    moment = stamp_of(line)
    assert moment is not None
    assert before - 0.001 <= moment <= after  # stamped to the millisecond
    assert without_stamp(line) == "[zotd] started pid 1: ./x"


# --- --since ---------------------------------------------------------------------------


def test_since_takes_ages_back_from_now() -> None:
    now = 1_800_000_000.0
    assert parse_since("30s", now) == now - 30
    assert parse_since("10m", now) == now - 600
    assert parse_since("2h", now) == now - 7200
    assert parse_since("1d", now) == now - 86400
    assert parse_since(" 0s ", now) == now


def test_since_takes_iso_times_local_unless_they_say() -> None:
    assert parse_since("2026-11-30T11:00", 0) == local("2026-11-30 11:00")
    assert parse_since("2026-11-30", 0) == local("2026-11-30 00:00")
    assert parse_since("2026-11-30 11:00:22.5", 0) == local("2026-11-30 11:00:22.5")
    plus_one = timezone(timedelta(hours=1))
    assert parse_since("2026-11-30T11:00:00+01:00", 0) == (
        datetime(2026, 11, 30, 11, tzinfo=plus_one).timestamp()
    )
    assert parse_since("2026-11-30T10:00:00Z", 0) == (
        datetime(2026, 11, 30, 10, tzinfo=UTC).timestamp()
    )


@pytest.mark.parametrize("bad", ["", "yesterday", "10", "5 m", "-5m", "1.5h", "10y", "11:00"])
def test_since_refuses_anything_else_and_says_what_it_takes(bad: str) -> None:
    with pytest.raises(ValueError, match="--since takes an ISO 8601 time") as caught:
        parse_since(bad, 0)
    assert "or an age (30s, 10m, 2h, 1d)" in str(caught.value)
    assert repr(bad.strip()) in str(caught.value)


# --- reading back ----------------------------------------------------------------------


def test_the_history_is_the_rotated_copies_oldest_first(tmp_path: Path) -> None:
    log = rotated_log(tmp_path)
    assert history(log) == [tmp_path / "ext-x.log.2", tmp_path / "ext-x.log.1", log]
    assert history(tmp_path / "ext-none.log") == [tmp_path / "ext-none.log"]


def test_lines_reach_back_into_the_rotated_copies(tmp_path: Path) -> None:
    log = rotated_log(tmp_path)
    found = list(LogReader(log).read(150, None))
    assert len(found) == 150
    # 99 lines and a note in ext-x.log; the other 50 from ext-x.log.1.
    assert texts(found)[:2] == ["line 149", "line 150"]
    assert texts(found)[49:52] == [
        "line 198",
        "[zotd 2026-11-30 10:02:00.000] generation 2",
        "line 200",
    ]
    assert [line.path.name for line in found[49:51]] == ["ext-x.log.1", "ext-x.log"]
    # More than there are: all 300 of the three files, oldest first.
    everything = list(LogReader(log).read(500, None))
    assert len(everything) == 300
    assert texts(everything)[:2] == ["[zotd 2026-11-30 10:00:00.000] generation 0", "line 0"]
    assert texts(everything)[-1] == "line 298"
    assert list(LogReader(log).read(0, None)) == []


def test_an_extensions_own_line_has_the_time_of_the_next_stamp(tmp_path: Path) -> None:
    # Its stderr was written before the note that follows it; the last
    # lines, when the log was last written to.
    log = rotated_log(tmp_path)
    written = os.stat(log).st_mtime
    found = list(LogReader(log).read(150, None))
    # line 149 is in ext-x.log.1: the next stamp is ext-x.log's first line.
    assert found[0].time == local("2026-11-30 10:02:00")
    assert found[50].time == local("2026-11-30 10:02:00")
    assert found[51].time == found[-1].time == written


def test_in_the_daemons_log_a_line_has_the_time_of_the_record_above(tmp_path: Path) -> None:
    # A traceback, a message of several lines: they go with their record.
    log = rotated_log(tmp_path)
    found = list(LogReader(log, records=True).read(150, None))
    # line 149 is in ext-x.log.1, after its note of 10:01: the walk went back to it.
    assert found[0].time == local("2026-11-30 10:01:00")
    assert found[50].time == found[51].time == found[-1].time == local("2026-11-30 10:02:00")


def test_lines_before_any_stamp_have_the_time_of_the_first(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("no stamp 1\nno stamp 2\n" + note("2026-11-30 10:00:00", "now") + "after\n")
    os.utime(log, (local("2026-11-30 10:00:07"), local("2026-11-30 10:00:07")))
    at = local("2026-11-30 10:00:00")
    found = list(LogReader(log).read(10, None))
    assert [line.time for line in found] == [at, at, at, local("2026-11-30 10:00:07")]
    found = list(LogReader(log, records=True).read(10, None))
    assert [line.time for line in found] == [at] * 4
    # With no stamp at all: when it was last written to.
    log.write_text("a\nb\n")
    os.utime(log, (at, at))
    for records in (False, True):
        assert [line.time for line in LogReader(log, records=records).read(10, None)] == [at] * 2


def test_since_keeps_the_lines_of_that_time_and_later(tmp_path: Path) -> None:
    log = rotated_log(tmp_path)
    since = local("2026-11-30 10:01:00")
    # An extension's own lines before the note of 10:01 may be of 10:01: kept.
    found = list(LogReader(log).read(None, since))
    assert len(found) == 299
    assert texts(found)[0] == "line 0"
    found = list(LogReader(log).read(None, since + 0.001))
    assert texts(found)[0] == "line 100"
    assert len(found) == 199  # 99 lines of ext-x.log.1, all of ext-x.log
    found = list(LogReader(log).read(None, local("2026-11-30 10:02:00.001")))
    assert texts(found)[0] == "line 200"  # written after the last note, before now
    # With -n too: the last N of those.
    assert texts(LogReader(log).read(3, since)) == ["line 296", "line 297", "line 298"]
    assert len(list(LogReader(log).read(250, since + 0.001))) == 199
    assert list(LogReader(log).read(None, os.stat(log).st_mtime + 1)) == []
    assert list(LogReader(log).read(5, os.stat(log).st_mtime + 1)) == []


def test_since_in_the_daemons_log_starts_at_a_record(tmp_path: Path) -> None:
    log = rotated_log(tmp_path)
    since = local("2026-11-30 10:01:00")
    found = list(LogReader(log, records=True).read(None, since))
    assert len(found) == 200  # the notes of 10:01 and 10:02, and the lines after them
    assert texts(found)[0] == "[zotd 2026-11-30 10:01:00.000] generation 1"
    found = list(LogReader(log, records=True).read(None, since + 0.001))
    assert texts(found)[0] == "[zotd 2026-11-30 10:02:00.000] generation 2"
    assert len(found) == 100
    assert texts(LogReader(log, records=True).read(2, since)) == ["line 297", "line 298"]
    assert list(LogReader(log, records=True).read(None, local("2026-11-30 11:00"))) == []


def test_a_last_line_not_ended_is_shown_but_kept_when_following(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("whole\nhalf")
    assert texts(list(LogReader(log).read(5, None))) == ["whole", "half"]
    reader = LogReader(log)
    assert texts(list(reader.read(5, None, follow=True))) == ["whole"]
    with log.open("a") as f:
        f.write(" done\n")
    assert texts(reader.poll(0.0)) == ["half done"]


def peak_memory(reading: Iterable[LogLine]) -> tuple[list[LogLine], int]:
    """The first two lines and the last of what ``reading`` reads (all of
    it is read), and the most memory held meanwhile."""
    tracemalloc.start()
    try:
        kept: list[LogLine] = []
        for line in reading:
            kept = [*kept[:2], line] if len(kept) >= 2 else [*kept, line]
        return kept, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_back_a_big_log_holds_a_few_chunks_at_most(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    line = "x" * 99 + "\n"
    with log.open("w") as f:
        f.write(note("2026-11-30 10:00:00", "started"))
        f.write(line * 80_000)  # 8 MB of the extension's own lines, unstamped
        f.write(note("2026-11-30 10:05:00", "exited with code 1"))
    # Its last lines, by time: the walk goes back 8 MB to the first note.
    found, peak = peak_memory(LogReader(log).read(None, local("2026-11-30 10:01")))
    assert found[0].text == line[:-1] and found[0].time == local("2026-11-30 10:05:00")
    assert peak < 1_000_000, peak
    # All of it: each of its own lines looks ahead 8 MB, once, for its time.
    found, peak = peak_memory(LogReader(log).read(None, local("2026-11-30 09:00")))
    assert texts(found[:2]) == ["[zotd 2026-11-30 10:00:00] started", line[:-1]]
    assert found[1].time == found[2].time == local("2026-11-30 10:05:00")
    assert peak < 1_000_000, peak
    # As the daemon's log: the last 10, whose time is 8 MB back.
    os.truncate(log, log.stat().st_size - len(note("2026-11-30 10:05:00", "exited with code 1")))
    found, peak = peak_memory(LogReader(log, records=True).read(10, None))
    assert found[0].time == local("2026-11-30 10:00:00")
    assert peak < 1_000_000, peak


def test_a_huge_line_is_cut_and_says_how_much_went(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_bytes(b"before\n" + b"y" * (MAX_LINE + 5) + b"\nafter\n")
    found = texts(list(LogReader(log).read(3, None)))
    assert found[0] == "before"
    assert found[1] == "y" * MAX_LINE + "... [5 more bytes]"
    assert found[2] == "after"


def test_bad_utf8_and_carriage_returns_stay_in_their_line(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_bytes(b"caf\xc3\xa9 \xff\r\nnext\n")
    assert texts(list(LogReader(log).read(5, None))) == ["caf\u00e9 \ufffd\r", "next"]


def test_a_log_that_is_not_a_file_cannot_be_read(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.mkdir()
    with pytest.raises(OSError, match="not a regular file"):
        LogReader(log).read(10, None)
    missing = LogReader(tmp_path / "ext-none.log")
    assert list(missing.read(10, None)) == []


# --- following -------------------------------------------------------------------------


def append(log: Path, text: str) -> None:
    with log.open("a") as f:
        f.write(text)


def test_following_gives_what_comes_once(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("old\n")
    reader = LogReader(log)
    assert texts(list(reader.read(10, None, follow=True))) == ["old"]
    assert reader.poll(0.0) == []
    append(log, "new 1\nnew 2\n")
    found = reader.poll(123.0)
    assert texts(found) == ["new 1", "new 2"]
    assert [line.time for line in found] == [123.0, 123.0]  # unstamped: the time it was read
    append(log, note("2026-11-30 10:00:00.250", "stamped"))
    assert [line.time for line in reader.poll(456.0)] == [local("2026-11-30 10:00:00.250")]
    assert reader.poll(0.0) == []


def test_a_rotation_between_polls_loses_and_repeats_nothing(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("old\n")
    reader = LogReader(log)
    list(reader.read(10, None, follow=True))
    append(log, "unread 1\nunread 2\nhal")  # not polled before the rotation...
    assert logfiles.rotate_if_big(log, 4)  # ... which copies them to .1
    append(log, "f\nafter\n")
    found = reader.poll(0.0)
    assert texts(found) == ["unread 1", "unread 2", "half", "after"]
    assert [line.path.name for line in found] == ["ext-x.log.1"] * 2 + ["ext-x.log"] * 2
    append(log, "more\n")
    assert texts(reader.poll(0.0)) == ["more"]


def test_a_rotation_is_seen_even_when_the_log_grew_back_past_where_it_was(
    tmp_path: Path,
) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("a\n" * 5)
    reader = LogReader(log)
    list(reader.read(0, None, follow=True))
    append(log, "unread\n")
    assert logfiles.rotate_if_big(log, 4)
    append(log, "".join(f"new {i}\n" for i in range(10)))  # bigger than before
    found = texts(reader.poll(0.0))
    assert found == ["unread", *[f"new {i}" for i in range(10)]]


def test_a_log_truncated_without_a_copy_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("old 1\nold 2\n")
    reader = LogReader(log)
    list(reader.read(10, None, follow=True))
    os.truncate(log, 0)
    assert reader.poll(0.0) == []
    append(log, "fresh\n")
    assert texts(reader.poll(0.0)) == ["fresh"]


def test_a_log_that_appears_while_following_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "ext-new.log"
    reader = LogReader(log)
    assert reader.poll(0.0) == []
    log.write_text("first\nsecond\n")
    assert texts(reader.poll(0.0)) == ["first", "second"]
