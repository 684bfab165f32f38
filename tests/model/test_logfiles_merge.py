"""Every log at once (zotd/model/log_merge.py): the logs there are, and their
lines interleaved in time order, from real files."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from zotd.model.log_merge import Tagged, interleave, log_sources, tagged
from zotd.model.log_read import LogReader
from zotd.model.paths import Paths


def local(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def write_logs(paths: Paths) -> None:
    """zotd.log and three extensions' logs, their stamps interleaved; the
    extensions' own lines unstamped."""
    logs = paths.logs_dir
    logs.mkdir(parents=True)
    (logs / "zotd.log").write_text(
        "2026-11-30 10:00:00,000 INFO zotd.runtime.daemon: listening\n"
        "2026-11-30 10:00:03,000 INFO zotd.runtime.daemon: a client\n"
        "  a continuation line\n"
        "2026-11-30 10:00:06,000 INFO zotd.runtime.daemon: stopping\n"
    )
    (logs / "ext-alpha.log").write_text(
        "[zotd 2026-11-30 10:00:01.000] started pid 1\n"
        "alpha says hi\n"
        "[zotd 2026-11-30 10:00:05.000] stopped\n"
    )
    (logs / "ext-beta.log").write_text(
        "[zotd 2026-11-30 10:00:02.000] started pid 2\n"
        "beta says hi\n"
        "beta again\n"
        "[zotd 2026-11-30 10:00:03.000] same second as zotd's\n"
    )
    (logs / "ext-gamma.log").write_text(
        "from an older run, before any stamp\n[zotd 2026-11-30 10:00:04.000] started pid 3\n"
    )
    # Not logs to interleave: a rotated copy (read by its log's reader), a
    # directory, another file.
    (logs / "ext-alpha.log.1").write_text("[zotd 2026-11-30 09:00:00.000] long ago\n")
    (logs / "ext-dir.log").mkdir()
    (logs / "notes.txt").write_text("not a log\n")


def read_all(paths: Paths, since: float | None = None) -> list[Tagged]:
    """Every log's lines (the last 100, or those since ``since``), interleaved."""
    streams = [
        tagged(ext, LogReader(path, records=ext is None).read(None if since else 100, since))
        for ext, path in log_sources(paths)
    ]
    return list(interleave(streams))


def shown(items: list[Tagged]) -> list[tuple[str | None, str]]:
    return [(item.extension, item.line.text) for item in items]


def test_the_logs_are_the_daemons_first_then_each_extensions(paths: Paths) -> None:
    assert log_sources(paths) == []  # no logs directory yet
    write_logs(paths)
    logs = paths.logs_dir
    assert log_sources(paths) == [
        (None, logs / "zotd.log"),
        ("alpha", logs / "ext-alpha.log"),
        ("beta", logs / "ext-beta.log"),
        ("gamma", logs / "ext-gamma.log"),
    ]


def test_lines_are_interleaved_in_time_order(paths: Paths) -> None:
    write_logs(paths)
    merged = read_all(paths)
    assert shown(merged) == [
        ("alpha", "[zotd 2026-11-30 09:00:00.000] long ago"),  # from ext-alpha.log.1
        (None, "2026-11-30 10:00:00,000 INFO zotd.runtime.daemon: listening"),
        ("alpha", "[zotd 2026-11-30 10:00:01.000] started pid 1"),
        ("beta", "[zotd 2026-11-30 10:00:02.000] started pid 2"),
        # The same time: the logs' order (the daemon's first), each log's own kept.
        (None, "2026-11-30 10:00:03,000 INFO zotd.runtime.daemon: a client"),
        (None, "  a continuation line"),
        ("beta", "beta says hi"),
        ("beta", "beta again"),
        ("beta", "[zotd 2026-11-30 10:00:03.000] same second as zotd's"),
        ("gamma", "from an older run, before any stamp"),
        ("gamma", "[zotd 2026-11-30 10:00:04.000] started pid 3"),
        ("alpha", "alpha says hi"),
        ("alpha", "[zotd 2026-11-30 10:00:05.000] stopped"),
        (None, "2026-11-30 10:00:06,000 INFO zotd.runtime.daemon: stopping"),
    ]
    # An extension's own line has the time of the next note in its log (it
    # was written before it); a line of the daemon's, that of its record.
    assert merged[6].line.time == local("2026-11-30 10:00:03")
    assert merged[11].line.time == local("2026-11-30 10:00:05")
    assert merged[5].line.time == local("2026-11-30 10:00:03")


def test_since_applies_to_every_log(paths: Paths) -> None:
    write_logs(paths)
    assert shown(read_all(paths, since=local("2026-11-30 10:00:03"))) == [
        (None, "2026-11-30 10:00:03,000 INFO zotd.runtime.daemon: a client"),
        (None, "  a continuation line"),
        ("beta", "beta says hi"),
        ("beta", "beta again"),
        ("beta", "[zotd 2026-11-30 10:00:03.000] same second as zotd's"),
        ("gamma", "from an older run, before any stamp"),
        ("gamma", "[zotd 2026-11-30 10:00:04.000] started pid 3"),
        ("alpha", "alpha says hi"),
        ("alpha", "[zotd 2026-11-30 10:00:05.000] stopped"),
        (None, "2026-11-30 10:00:06,000 INFO zotd.runtime.daemon: stopping"),
    ]


def test_a_log_whose_time_goes_back_keeps_its_own_order(tmp_path: Path) -> None:
    first, second = tmp_path / "ext-a.log", tmp_path / "ext-b.log"
    first.write_text(
        "[zotd 2026-11-30 10:00:05.000] later\n[zotd 2026-11-30 10:00:01.000] clock set back\n"
    )
    second.write_text("[zotd 2026-11-30 10:00:03.000] between\n")
    merged = interleave(
        [
            tagged("a", LogReader(first).read(10, None)),
            tagged("b", LogReader(second).read(10, None)),
        ]
    )
    assert [item.line.text.split("] ")[1] for item in merged] == [
        "between",
        "later",
        "clock set back",
    ]
