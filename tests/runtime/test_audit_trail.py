"""The audit trail's writer on its own: a bounded queue that drops (and
counts, and says so once) rather than grows, a file that cannot be written
(decisions lost, said once, nothing else harmed), rotation, privacy."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from zotd.model import audit
from zotd.runtime.audit_trail import JOB, AuditTrail
from zotd.runtime.intercept import Outcome

PAYLOAD = {"tool_name": msgspec.Raw(b'"bash"'), "tool_args": msgspec.Raw(b'{"command":"ls"}')}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "zotd.runtime.audit_trail" and r.levelno >= logging.WARNING
    ]


async def settled(trail: AuditTrail, count: int) -> None:
    """Waits (generously) until ``count`` decisions are written or lost."""
    with trio.fail_after(30):
        while trail.written + trail.lost < count:
            await trio.sleep(0.01)


async def test_a_full_queue_drops_decisions_counts_them_and_says_so_once(
    nursery: trio.Nursery, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = short_tmp / "logs" / "audit.jsonl"
    trail = AuditTrail(path, max_bytes=1 << 20, with_args=False, queue_bytes=4096)
    for _ in range(100):  # all at once, before the writer can take any
        trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
    assert 0 < trail.dropped < 100
    kept = 100 - trail.dropped
    [full] = warnings(caplog)
    assert "decisions are dropped from it until the writer catches up" in full
    nursery.start_soon(trail.run)
    await settled(trail, kept)
    assert (trail.written, trail.lost) == (kept, 0)
    lines = trail.path.read_text().splitlines()
    assert len(lines) == kept
    assert all(json.loads(line)["tool"] == "bash" for line in lines)
    assert warnings(caplog)[1:] == [
        f"audit trail: {trail.dropped} decisions were dropped (the queue was full)"
    ]
    # Once it has caught up, decisions are taken again.
    trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
    await settled(trail, kept + 1)
    assert len(trail.path.read_text().splitlines()) == kept + 1


async def test_a_trail_that_cannot_be_written_loses_decisions_and_says_so_once(
    nursery: trio.Nursery, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = short_tmp / "logs" / "audit.jsonl"
    path.mkdir(parents=True)  # EISDIR for every open
    trail = AuditTrail(path, max_bytes=1 << 20, with_args=False)
    nursery.start_soon(trail.run)
    for n in range(1, 4):
        trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
        await settled(trail, n)
    assert (trail.written, trail.lost) == (0, 3)
    assert warnings(caplog) == [
        f"audit trail: cannot write {path} (Is a directory): decisions are not recorded until it can"
    ]
    path.rmdir()
    trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
    await settled(trail, 4)
    assert (trail.written, trail.lost) == (1, 3)
    assert warnings(caplog)[1:] == [f"audit trail: writing {path} again (3 decisions lost)"]
    assert len(path.read_text().splitlines()) == 1


async def test_the_trail_is_private_and_rotated_before_it_grows_past_its_size(
    nursery: trio.Nursery, short_tmp: Path
) -> None:
    logs = short_tmp / "logs"
    logs.mkdir(mode=0o755)
    path = audit.trail_path(logs)
    trail = AuditTrail(path, max_bytes=4096, with_args=False, pace=0)
    nursery.start_soon(trail.run)
    for n in range(1, 61):  # one at a time: each its own write
        trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
        await settled(trail, n)
    older = path.with_name("audit.jsonl.1")
    assert older.exists()
    for file in (path, older):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert file.stat().st_size <= 4096
        assert all(
            json.loads(line)["decision"] == "allow" for line in file.read_text().splitlines()
        )
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700


async def test_a_line_cut_short_does_not_swallow_the_next(
    nursery: trio.Nursery, short_tmp: Path
) -> None:
    path = short_tmp / "logs" / "audit.jsonl"
    path.parent.mkdir()
    path.write_bytes(
        b'{"time":"2026-12-02T14:43:49.123Z","workspace":"/p","ev'
    )  # a write cut short
    trail = AuditTrail(path, max_bytes=1 << 20, with_args=False)
    nursery.start_soon(trail.run)
    trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
    await settled(trail, 1)
    found = list(audit.read(path.read_bytes()))
    assert [(n, r is None) for n, r in found] == [(1, True), (2, False)]


async def test_decisions_made_while_the_writer_paces_go_in_a_few_writes(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    short_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = short_tmp / "logs" / "audit.jsonl"
    trail = AuditTrail(path, max_bytes=1 << 20, with_args=False, pace=1.0)
    writes: list[int] = []
    write = trail._write

    def counted(batch: list[object]) -> None:
        writes.append(len(batch))
        write(batch)  # type: ignore[arg-type]

    monkeypatch.setattr(trail, "_write", counted)
    nursery.start_soon(trail.run)
    trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())  # alone: written at once
    await settled(trail, 1)
    assert writes == [1]
    count = 2 * JOB + 3  # made one by one while the writer waits out its pace
    for _ in range(count):
        trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
        await trio.sleep(0.01)
    await settled(trail, 1 + count)
    assert writes == [1, JOB, JOB, 3]
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + count
    assert [json.loads(line)["decision"] for line in lines] == ["allow"] * (1 + count)


async def test_the_writer_stops_pacing_when_half_the_queue_is_taken(
    nursery: trio.Nursery, short_tmp: Path
) -> None:
    path = short_tmp / "logs" / "audit.jsonl"
    trail = AuditTrail(path, max_bytes=1 << 20, with_args=False, queue_bytes=4096, pace=3600)
    nursery.start_soon(trail.run)
    trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
    await settled(trail, 1)
    for _ in range(8):  # (each takes some 300 bytes of the 4096)
        trail.decided(short_tmp, "tool_call", PAYLOAD, Outcome())
    await settled(trail, 9)  # not an hour later
    assert (trail.dropped, len(path.read_text().splitlines())) == (0, 9)
