"""The audit trail of intercept decisions, in virtual time: what each guard
asked answered (silent, crashed, cancelled, asked again after a rewrite),
its latency, the decision, and the guards' metrics; written by the real
writer to a real file.

The workspace runs in process against in-memory fake extensions under
``MockClock(autojump_threshold=0)``; the trail's writer runs beside it
(its file work holds the virtual clock, so times stay exact).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.fakes import Behaviour, FakeIO
from tests.runtime.test_deadlines import answering, mute, open_workspace
from tests.runtime.test_system_prompt import Seen
from tests.runtime.test_system_prompt import guard as prompt_guard
from tests.runtime.test_system_prompt import payload as prompt_payload
from zotd.model import audit
from zotd.model.config import Config
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import extension as ep
from zotd.runtime.audit_trail import AuditTrail
from zotd.runtime.workspace import Workspace

GUARD: dict[str, Any] = {"intercept": ["tool_call"]}
BASH = {
    "tool_name": Raw(b'"bash"'),
    "tool_id": Raw(b'"t1"'),
    "tool_args": Raw(b'{"command": "ls", "a": [1, 2]}'),
}


def sha(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


async def audited(
    nursery: trio.Nursery,
    paths: Paths,
    project: Path,
    behaviours: dict[str, Behaviour],
    *,
    with_args: bool = False,
    config: Config | None = None,
) -> tuple[Workspace, AuditTrail]:
    """A settled workspace whose decisions go to a trail in ``$ZOT_HOME/logs``."""
    ws, _ = await open_workspace(nursery, paths, project, behaviours, config)
    trail = AuditTrail(audit.trail_path(paths.logs_dir), max_bytes=1024 * 1024, with_args=with_args)
    nursery.start_soon(trail.run)
    ws.audit = trail
    await ws.wait_settled()
    return ws, trail


async def records(trail: AuditTrail, count: int) -> list[dict[str, Any]]:
    """The trail's lines as JSON, once ``count`` decisions have been written."""
    with trio.fail_after(60):  # (virtual time: it stands still while the writer writes)
        while trail.written + trail.lost < count:
            await trio.sleep(0.001)
    assert trail.lost == 0
    lines = trail.path.read_text().splitlines()
    assert len(lines) == count
    return [json.loads(line) for line in lines]


def answers(record: dict[str, Any]) -> list[tuple[str, str, float | None, int]]:
    """(guard, answer, latency in ms, round) of each question in a record."""
    return [
        (g["guard"], g["answer"], g.get("latency_ms"), g.get("round", 1)) for g in record["guards"]
    ]


def crashing(name: str) -> Behaviour:
    """A guard whose process dies when it is asked."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, **GUARD)
        async for frame in io.frames():
            if isinstance(frame, ep.EventIntercept):
                io.crash(3)

    return behaviour


def rewriting(name: str, delay: float, **changes: Any) -> Behaviour:
    """Answers after ``delay`` s with the arguments it was sent plus
    ``changes`` (none: allows)."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, **GUARD)
        async with trio.open_nursery() as nursery:
            async for frame in io.frames():
                if isinstance(frame, ep.EventIntercept):
                    nursery.start_soon(reply, io, frame)

    async def reply(io: FakeIO, frame: ep.EventIntercept) -> None:
        await trio.sleep(delay)
        args = {**frame.tool_args, **changes} if changes else None
        await io.send(type="event_intercept_response", id=frame.id, modified_args=args)

    return behaviour


async def test_a_silent_guard_is_recorded_silent_at_the_5s_deadline(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {"fine": answering("fine", 1, **GUARD), "mute": mute("mute", **GUARD)},
    )
    verdict = await ws.intercept("tool_call", BASH)
    assert not verdict.block
    [record] = await records(trail, 1)
    assert answers(record) == [("fine", "allow", 1000.0, 1), ("mute", "silent", None, 1)]
    assert (record["decision"], record["took_ms"]) == ("allow", 5000.0)
    assert (record["event"], record["tool"], record["tool_id"]) == ("tool_call", "bash", "t1")
    assert record["workspace"] == str(project)
    assert record["args_digest"] == sha({"command": "ls", "a": [1, 2]})
    assert "args" not in record and "reason" not in record
    assert ws.extensions["mute"].metrics.intercepts == {"silent": 1}
    assert ws.extensions["fine"].metrics.intercepts == {"allow": 1}


async def test_a_guard_that_crashes_is_recorded_crashed_and_counts_as_allow(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {"boom": crashing("boom"), "fine": answering("fine", 1, **GUARD)},
    )
    crashed = ws.extensions["boom"]  # (a restart may bring another supervisor)
    assert not (await ws.intercept("tool_call", BASH)).block
    [record] = await records(trail, 1)
    [boom, fine] = record["guards"]
    assert (boom["guard"], boom["answer"], boom["latency_ms"]) == ("boom", "crashed", 0.0)
    assert "boom" in boom["reason"]  # why its request failed, in zotd's words
    assert (fine["answer"], record["decision"], record["took_ms"]) == ("allow", "allow", 1000.0)
    assert crashed.metrics.intercepts == {"crashed": 1}


async def test_the_first_block_decides_and_the_guards_still_thinking_are_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {
            "a-mute": mute("a-mute", **GUARD),
            "b-early": answering("b-early", 1, block=True, **GUARD),
            "c-late": answering("c-late", 3, block=True, **GUARD),
        },
    )
    verdict = await ws.intercept("tool_call", BASH)
    assert (verdict.block, verdict.extension) == (True, "b-early")
    [record] = await records(trail, 1)
    assert answers(record) == [
        ("a-mute", "cancelled", None, 1),
        ("b-early", "block", 1000.0, 1),
        ("c-late", "cancelled", None, 1),
    ]
    assert record["guards"][1]["reason"] == "b-early"
    assert (record["decision"], record["blocked_by"], record["reason"]) == (
        "block",
        "b-early",
        "b-early",
    )
    assert record["took_ms"] == 1000.0
    # A cancelled question is not counted: the guard was not given its chance.
    assert ws.extensions["a-mute"].metrics.intercepts == {}
    assert ws.extensions["b-early"].metrics.intercepts == {"block": 1}
    assert ws.extensions["c-late"].metrics.intercepts == {}


async def test_a_rewrite_chain_is_recorded_in_order_with_the_guards_asked_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {"a": rewriting("a", 3, command="ls -l"), "b": rewriting("b", 1), "c": mute("c", **GUARD)},
        with_args=True,
    )
    # First: all asked at once; "b" allows at 1 s; at 3 s "a" rewrites for
    # the first time, so "b" and "c" are asked again about the new
    # arguments ("c"'s first question withdrawn); "b" allows again at 4 s,
    # "c" is silent at the deadline.
    verdict = await ws.intercept("tool_call", BASH)
    assert verdict.rewritten_by == ["a"]
    # Then "a" is known to rewrite: the others are asked only after it.
    await ws.intercept("tool_call", BASH)
    first, second = await records(trail, 2)
    assert answers(first) == [
        ("a", "rewrite", 3000.0, 1),
        ("b", "allow", 1000.0, 1),
        ("c", "cancelled", None, 1),
        ("b", "allow", 1000.0, 2),
        ("c", "silent", None, 2),
    ]
    assert answers(second) == [
        ("a", "rewrite", 3000.0, 1),
        ("b", "allow", 1000.0, 2),
        ("c", "silent", None, 2),
    ]
    for record in first, second:
        assert (record["decision"], record["rewrites"], record["took_ms"]) == (
            "rewrite",
            ["a"],
            5000.0,
        )
        assert record["args"] == {"a": [1, 2], "command": "ls"}
        assert record["rewritten_args"] == {"a": [1, 2], "command": "ls -l"}
        assert record["args_digest"] == sha({"command": "ls", "a": [1, 2]})
        assert record["rewritten_args_digest"] == sha({"command": "ls -l", "a": [1, 2]})
    metrics = {name: ws.extensions[name].metrics.intercepts for name in "abc"}
    assert metrics == {"a": {"rewrite": 2}, "b": {"allow": 3}, "c": {"silent": 2}}


async def test_a_block_after_a_rewrite_keeps_the_chain(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {"a": rewriting("a", 1, x=1), "b": answering("b", 2, block=True, **GUARD)},
    )
    await ws.intercept("tool_call", BASH)  # "a" becomes known to rewrite
    verdict = await ws.intercept("tool_call", BASH)
    assert (verdict.block, verdict.extension) == (True, "b")
    _, record = await records(trail, 2)
    assert answers(record) == [("a", "rewrite", 1000.0, 1), ("b", "block", 2000.0, 2)]
    assert (record["decision"], record["blocked_by"], record["rewrites"]) == ("block", "b", ["a"])
    assert record["took_ms"] == 3000.0
    assert record["rewritten_args_digest"] == sha({"command": "ls", "a": [1, 2], "x": 1})


async def test_a_decision_without_guards_and_a_failed_one_are_recorded(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {"g": answering("g", 1, intercept=["assistant_message"])},
        config=Config(max_frame_bytes=1024),
    )
    await ws.intercept("tool_call", BASH)  # nobody guards tool calls
    big = {"text": Raw(msgspec.json.encode("x" * 2000))}
    with pytest.raises(RequestError) as err:
        await ws.intercept("assistant_message", big)
    assert err.value.code == "frame_too_large"
    unguarded, failed = await records(trail, 2)
    assert unguarded["decision"] == "allow"
    assert "guards" not in unguarded  # (an empty list is left out, as every default)
    assert unguarded["sequence"] == 1
    assert (failed["event"], failed["decision"], failed["reason"]) == (
        "assistant_message",
        "error",
        err.value.message,
    )
    assert "guards" not in failed and "args_digest" not in failed
    assert failed["sequence"] == 2


async def test_the_system_prompt_chain_is_recorded_guard_by_guard(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    seen: Seen = {}
    ws, trail = await audited(
        nursery,
        paths,
        project,
        {
            "a": prompt_guard("a", seen, 1, append=" [a]"),
            "b": prompt_guard("b", seen, silent=True),
            "c": prompt_guard("c", seen, 2),  # answers, keeps the prompt
        },
    )
    verdict = await ws.intercept("before_agent_start", prompt_payload())
    assert verdict.system_prompt == "You are zot. [a]"
    [record] = await records(trail, 1)
    assert answers(record) == [
        ("a", "rewrite", 1000.0, 1),
        ("b", "silent", None, 2),
        ("c", "allow", 2000.0, 3),
    ]
    assert (record["event"], record["decision"], record["rewrites"]) == (
        "before_agent_start",
        "rewrite",
        ["a"],
    )
    assert record["took_ms"] == 8000.0  # 1 s, then 5 s of silence, then 2 s
    assert "args_digest" not in record and "tool" not in record
    assert ws.extensions["b"].metrics.intercepts == {"silent": 1}
