"""``zot audit``: the audit trail's files read (and followed) by the real
CLI, without a daemon: text, ``--json``, ``--blocked``, ``--since`` over
the rotated files, ``-f`` through a rotation, and lines that are not
records."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import msgspec

from tests.cli import test_cli
from tests.cli.test_cli import ZOT, Cli, read_line
from zotd.model.audit import AuditRecord, GuardVerdict, timestamp

cli = test_cli.cli  # the fixture, as this module's own


def record(ago: float, decision: str = "allow", **fields: object) -> AuditRecord:
    """A decision made ``ago`` seconds ago."""
    return msgspec.convert(
        {
            "time": timestamp(time.time() - ago),
            "workspace": "/home/pat/project",
            "event": "tool_call",
            "tool": "bash",
            "decision": decision,
            "took_ms": 1.25,
            **fields,
        },
        AuditRecord,
    )


ALLOWED = record(7200, guards=[GuardVerdict("guard", "allow", 0.75)])
BLOCKED = record(
    60,
    "block",
    blocked_by="guard",
    reason="refused: \x1b[2Jrm -rf /",
    guards=[GuardVerdict("guard", "block", 2.5, "refused"), GuardVerdict("slow", "cancelled")],
)
REWRITTEN = record(
    1,
    "rewrite",
    event="assistant_message",
    tool="",
    rewrites=["redactor"],
    guards=[GuardVerdict("redactor", "rewrite", 150.0), GuardVerdict("guard", "silent", round=2)],
    took_ms=5001.0,
)


def line(rec: AuditRecord) -> bytes:
    return msgspec.json.encode(rec) + b"\n"


def trail(cli: Cli) -> Path:
    path = cli.home / "logs" / "audit.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def shown(rec: AuditRecord, text: str) -> str:
    return f"{rec.time}  {text}"


def test_each_decision_is_one_escaped_line_and_a_corrupt_line_is_reported_once(cli: Cli) -> None:
    path = trail(cli)
    path.write_bytes(
        line(ALLOWED)
        + b"{not json\n"
        + line(BLOCKED)
        + b'{"time": 3}\n'
        + line(REWRITTEN)
        + b'{"time":"half'
    )
    res = cli.zot("audit")
    assert res.returncode == 0, res
    assert res.stdout.splitlines() == [
        shown(ALLOWED, "allow    tool_call bash  [guard allow 0.8 ms]  (1.2 ms)"),
        shown(
            BLOCKED,
            "block    tool_call bash  by guard: refused: \\x1b[2Jrm -rf /  "
            "[guard block 2.5 ms, slow cancelled]  (1.2 ms)",
        ),
        shown(
            REWRITTEN,
            "rewrite  assistant_message  rewritten by redactor  "
            "[redactor rewrite 150 ms, guard silent (round 2)]  (5.00 s)",
        ),
    ]
    # The line still being written (no newline yet) is no record yet, nor an error.
    assert res.stderr.splitlines() == [
        f"zot: {path} line 2 is not an audit record; skipped",
        f"zot: {path} line 4 is not an audit record; skipped",
    ]
    last = cli.zot("audit", "-n", "1")
    assert last.stdout.splitlines() == res.stdout.splitlines()[-1:]


def test_json_prints_the_records_and_blocked_only_the_blocks(cli: Cli) -> None:
    trail(cli).write_bytes(line(ALLOWED) + line(BLOCKED) + line(REWRITTEN))
    res = cli.zot("audit", "--json")
    assert res.returncode == 0, res
    records = [msgspec.json.decode(text, type=AuditRecord) for text in res.stdout.splitlines()]
    assert records == [ALLOWED, BLOCKED, REWRITTEN]
    assert "\x1b" not in res.stdout  # JSON escapes it
    blocked = cli.zot("audit", "--blocked", "--json")
    assert [json.loads(text)["decision"] for text in blocked.stdout.splitlines()] == ["block"]
    text = cli.zot("audit", "--blocked")
    assert len(text.stdout.splitlines()) == 1 and "by guard: refused" in text.stdout


def test_since_reads_the_rotated_files_too(cli: Cli) -> None:
    path = trail(cli)
    older = record(3 * 86400, tool_id="oldest")
    path.with_name("audit.jsonl.2").write_bytes(line(older))
    path.with_name("audit.jsonl.1").write_bytes(line(ALLOWED) + line(BLOCKED))
    path.write_bytes(line(REWRITTEN))

    def tools(*args: str) -> list[str]:
        res = cli.zot("audit", "--json", *args)
        assert res.returncode == 0, res
        return [json.loads(text)["decision"] for text in res.stdout.splitlines()]

    assert tools() == ["rewrite"]  # without --since: the current file only
    assert tools("--since", "10m") == ["block", "rewrite"]
    assert tools("--since", "3h") == ["allow", "block", "rewrite"]
    assert tools("--since", "4d") == ["allow", "allow", "block", "rewrite"]
    assert tools("--since", "2d", "--blocked") == ["block"]
    assert tools("--since", BLOCKED.time) == ["block", "rewrite"]
    assert tools("--since", "2999-01-01") == []
    for bad in ("yesterday", "10 parsecs", "-5m"):
        res = cli.zot("audit", f"--since={bad}")
        assert res.returncode == 2, res
        assert res.stderr == (
            f"zot: --since '{bad}': give a time, like 2026-12-02T14:00 (local time, or ending "
            "in Z or +01:00), or how long ago, like 30s, 10m, 2h or 1d\n"
        )


def test_without_a_trail_it_says_so(cli: Cli) -> None:
    res = cli.zot("audit")
    assert (res.returncode, res.stdout) == (0, "")
    assert res.stderr == f"no intercept decisions yet ({cli.home / 'logs' / 'audit.jsonl'})\n"


def test_follow_prints_decisions_as_they_come_through_a_rotation(cli: Cli) -> None:
    path = trail(cli)
    path.write_bytes(line(ALLOWED) + line(BLOCKED))
    proc = cli.popen(
        [str(ZOT), "audit", "-f", "-n", "1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(read_line(proc.stdout))["decision"] == "block"
    with path.open("ab") as f:
        f.write(line(REWRITTEN)[:20])  # still being written: not printed yet
        f.flush()
        f.write(line(REWRITTEN)[20:] + b"garbage\n")
    assert json.loads(read_line(proc.stdout))["decision"] == "rewrite"
    assert read_line(proc.stderr) == f"zot: {path} line 4 is not an audit record; skipped"
    # Rotated as zotd does it (copied to .1, truncated) right after a write:
    # what was written before the rotation is read from the copy.
    with path.open("ab") as f:
        f.write(line(record(0, tool_id="before")))
    path.with_name("audit.jsonl.1").write_bytes(path.read_bytes())
    path.write_bytes(line(record(0, "block", tool_id="after", blocked_by="g", reason="no")))
    assert json.loads(read_line(proc.stdout))["tool_id"] == "before"
    assert json.loads(read_line(proc.stdout))["tool_id"] == "after"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
