"""What ``zot top`` shows, without a screen: cells, calls/s, pushes between
polls, following a file, and the audit trail's lines (zotd.cli.top_rows)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from zotd.cli.top_rows import (
    COLUMNS,
    DASH,
    Board,
    Tail,
    describe_decision,
    fmt_bytes,
    fmt_ms,
    fmt_percent,
    fmt_rate,
    fmt_uptime,
    local_time,
    one_line,
    parse_decision,
)
from zotd.model.audit import AuditRecord, GuardVerdict
from zotd.protocol import agent as ap


def info(name: str, **fields: Any) -> ap.ExtensionInfo:
    """An ``ExtensionInfo`` as ``list_extensions`` sends it; ``calls=N`` and the
    other :class:`Metrics` fields go into its metrics."""
    metric_names = set(ap.Metrics.__struct_fields__)
    metrics = ap.Metrics(**{k: fields.pop(k) for k in list(fields) if k in metric_names})
    base: dict[str, Any] = {
        "name": name, "version": "1.0.0", "description": "", "language": "", "scope": "global",
        "dir": f"/ext/{name}", "enabled": True, "state": "ready", "pid": 100, "restarts": 0,
        "restart_reason": "", "exit_code": None, "commands": [], "tools": [], "events": [],
        "intercepts": [], "log": f"/logs/ext-{name}.log", "last_error": "", "log_tail": [],
        "uptime_s": 5.0,
    }  # fmt: skip
    base.update(fields)
    return ap.ExtensionInfo(metrics=metrics, **base)


def cells(board: Board) -> dict[str, dict[str, str]]:
    return {r.name: dict(zip(COLUMNS, r.cells, strict=True)) for r in board.rows()}


# --- cells ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "-"),
        (0.4, "0s"),
        (59.9, "59s"),
        (60, "1m00s"),
        (725, "12m05s"),
        (3600 * 3 + 7 * 60 + 59, "3h07m"),
        (86400 * 2 + 3600 * 5 + 1, "2d05h"),
        (-3, "0s"),
    ],
)
def test_uptime(seconds: float | None, shown: str) -> None:
    assert fmt_uptime(seconds) == shown


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (12_900_000, "12.3 MiB"),
        (3 * 1024**3 // 2, "1.5 GiB"),
        (5 * 1024**5, "5120.0 TiB"),
    ],
)
def test_rss(n: int | None, shown: str) -> None:
    assert fmt_bytes(n) == shown


def test_percent_latency_and_rate() -> None:
    assert [fmt_percent(None), fmt_percent(0.0), fmt_percent(12.345)] == ["-", "0.0%", "12.3%"]
    assert [fmt_ms(None), fmt_ms(0.42), fmt_ms(99.94), fmt_ms(120.4), fmt_ms(2500)] == [
        "-",
        "0.4 ms",
        "99.9 ms",
        "120 ms",
        "2.50 s",
    ]
    assert [fmt_rate(None), fmt_rate(0.0), fmt_rate(2.25)] == ["-", "0.0", "2.2"]


def test_one_line_escapes_and_cuts() -> None:
    assert one_line("boom\x1b[2J\nnext") == "boom\\x1b[2J\\nnext"
    long = one_line("x" * 100, width=10)
    assert long == "x" * 9 + "…"


# --- rows -----------------------------------------------------------------------------


def test_a_fresh_extension_shows_dashes_for_what_is_not_known() -> None:
    board = Board()
    board.poll([info("wx")], now=10.0)
    assert cells(board)["wx"] == {
        "NAME": "wx",
        "STATE": "ready",
        "PID": "100",
        "UPTIME": "5s",
        "RESTARTS": "0",
        "RSS": DASH,
        "CPU": DASH,
        "CALLS/S": DASH,  # one poll: no rate yet
        "P95": DASH,
        "LAST ERROR": DASH,
    }


def test_a_stopped_one_has_no_pid_nor_uptime() -> None:
    board = Board()
    board.poll([info("wx", state="disabled", pid=None, uptime_s=None)], now=1.0)
    row = cells(board)["wx"]
    assert (row["STATE"], row["PID"], row["UPTIME"]) == ("disabled", "-", "-")


def test_figures_are_formatted() -> None:
    board = Board()
    board.poll([info("wx", rss_bytes=20 * 1024**2, cpu_percent=3.0, p95_ms=12.5)], now=1.0)
    row = cells(board)["wx"]
    assert (row["RSS"], row["CPU"], row["P95"]) == ("20.0 MiB", "3.0%", "12.5 ms")


def test_calls_per_second_come_from_two_polls() -> None:
    board = Board()
    board.poll([info("a", calls=10), info("b", calls=0)], now=100.0)
    board.poll([info("a", calls=30), info("b", calls=0)], now=102.0)
    shown = cells(board)
    assert shown["a"]["CALLS/S"] == "10.0"
    assert shown["b"]["CALLS/S"] == "0.0"
    # An extension first seen now has no rate yet; one whose count started
    # over (its workspace was made anew) neither.
    board.poll([info("a", calls=3), info("b", calls=4), info("c", calls=7)], now=103.0)
    shown = cells(board)
    assert shown["a"]["CALLS/S"] == DASH
    assert shown["b"]["CALLS/S"] == "4.0"
    assert shown["c"]["CALLS/S"] == DASH
    board.poll([info("a", calls=5)], now=103.5)
    assert cells(board)["a"]["CALLS/S"] == "4.0"
    assert set(cells(board)) == {"a"}


def test_two_polls_at_the_same_instant_give_no_rate() -> None:
    board = Board()
    board.poll([info("a", calls=1)], now=5.0)
    board.poll([info("a", calls=2)], now=5.0)
    assert cells(board)["a"]["CALLS/S"] == DASH


def test_rows_are_by_name_and_escaped() -> None:
    board = Board()
    board.poll(
        [info("zeta"), info("alpha", state="failed", last_error="exited\x1b]52;c;eA==\x07 3")],
        now=1.0,
    )
    rows = board.rows()
    assert [r.name for r in rows] == ["alpha", "zeta"]
    assert rows[0].cells[COLUMNS.index("LAST ERROR")] == "exited\\x1b]52;c;eA==\\x07 3"
    assert all("\x1b" not in c for r in rows for c in r.cells)


def test_a_push_shows_its_state_before_the_next_poll() -> None:
    board = Board()
    board.poll([info("wx", rss_bytes=2048, cpu_percent=1.0), info("gone")], now=1.0)
    board.push(ap.ExtensionStatePush("wx", "stopping", [], []))
    assert (cells(board)["wx"]["PID"], cells(board)["wx"]["RSS"]) == ("100", "2.0 KiB")
    board.push(ap.ExtensionStatePush("wx", "failed", [], [], error="exited with code 3"))
    board.push(ap.ExtensionStatePush("gone", "removed", [], []))
    board.push(ap.ExtensionStatePush("new", "starting", [], []))  # the next poll brings it
    shown = cells(board)
    assert set(shown) == {"wx"}
    wx = shown["wx"]
    assert (wx["STATE"], wx["PID"], wx["UPTIME"], wx["RSS"], wx["CPU"]) == ("failed", *"----")
    assert shown["wx"]["LAST ERROR"] == "exited with code 3"
    board.push(ap.ExtensionStatePush("wx", "starting", [], []))
    assert cells(board)["wx"]["LAST ERROR"] == "exited with code 3"  # kept until a poll says


# --- following a file -----------------------------------------------------------------


def test_tail_follows_appends_truncation_and_rotation(tmp_path: Path) -> None:
    path = tmp_path / "ext-x.log"
    tail = Tail(path)
    assert tail.start(10) == []  # no file yet
    assert tail.read() == []
    path.write_text("one\ntwo\nthree\n")
    assert tail.read() == ["one", "two", "three"]
    with path.open("a") as f:
        f.write("four\nfi")
    assert tail.read() == ["four"]  # a line shows once it ends
    with path.open("a") as f:
        f.write("ve\n")
    assert tail.read() == ["five"]
    path.write_text("new\n")  # truncated, then written
    assert tail.read() == ["new"]
    os.rename(path, tmp_path / "ext-x.log.1")
    path.write_text("after rotation\n")
    assert tail.read() == ["after rotation"]
    path.unlink()
    assert tail.read() == []


def test_tail_starts_with_the_last_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(5000)) + b"bad \xff utf-8\n")
    tail = Tail(path)
    assert tail.start(3) == ["line 4998", "line 4999", "bad \ufffd utf-8"]
    assert tail.read() == []
    assert Tail(path).start(0) == []


def test_tail_skips_a_flood_to_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    tail = Tail(path)
    tail.MAX_READ = 64
    path.write_text("a" * 100 + "\n" + "b" * 10 + "\nlast\n")
    # The cut falls inside the a's: that line is dropped, not shown in part.
    assert tail.read() == ["b" * 10, "last"]
    with path.open("a") as f:
        f.write("c" * 200)  # a line longer than a read, without its end
    assert tail.read() == []
    with path.open("a") as f:
        f.write("c\nnext\n")
    assert tail.read() == ["next"]


# --- the audit trail ------------------------------------------------------------------


def test_corrupt_lines_are_not_decisions() -> None:
    for line in ("", "   ", "{", "[1, 2]", '{"time": "x"}', "not json", '{"decision": 3}'):
        assert parse_decision(line) is None, line


def test_a_block_reads_as_one_line() -> None:
    record = AuditRecord(
        time="2026-11-30T11:00:22.123Z",
        workspace="/home/pat/project",
        event="tool_call",
        decision="block",
        reason="no rm -rf\x1b[2J",
        blocked_by="guard",
        tool="bash",
        guards=[
            GuardVerdict("guard", "block", 2.0, "no rm -rf"),
            GuardVerdict("slow", "silent"),
            GuardVerdict("other", "cancelled"),
        ],
        took_ms=3.14,
    )
    line = msgspec.json.encode(record).decode()
    parsed = parse_decision(line)
    assert parsed == record
    when, decision, what = describe_decision(parsed, "/home/pat/project")
    assert when == local_time("2026-11-30T11:00:22.123Z")
    assert len(when) == 8 and when.count(":") == 2
    assert decision == "block"
    assert what == "tool_call bash by guard: no rm -rf\\x1b[2J [slow silent] (3.1 ms)"


def test_a_rewrite_in_another_workspace_says_where() -> None:
    record = AuditRecord(
        time="2026-11-30T11:00:22.123Z",
        workspace="/srv/other",
        event="assistant_message",
        decision="rewrite",
        rewrites=["redact", "tidy"],
        took_ms=1200,
    )
    _, decision, what = describe_decision(record, "/home/pat/project")
    assert decision == "rewrite"
    assert what == "assistant_message rewritten by redact, tidy (1.20 s) in /srv/other"


def test_a_time_that_is_not_one_is_shown_escaped() -> None:
    assert local_time("yesterday\x07") == "yesterday\\x07"
    assert local_time("2026-11-30T11:00:22") == "11:00:22"  # no zone: as written
