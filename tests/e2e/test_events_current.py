"""Current zot's events and ``before_agent_start``, through a real daemon.

The fixture, ``tests/extensions/prompt_guard.py``, is a raw extension that
starts as current zot's SDK does (it waits for ``hello_ack``), subscribes
(in one frame or two) and answers ``before_agent_start`` as told. Each test
drives the daemon through ``zotd.client`` and looks at the ``intercept``
reply, at the frames the extensions read (their ``--log``) and at their
logs. Deadlines in virtual time are in tests/runtime/test_system_prompt.py.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from tests.e2e.frame_log import frames, wait_for
from zotd.client import ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import extension as ep

PROMPT_GUARD = EXTENSIONS / "prompt_guard.py"


#: Every event current zot sends, with the payload fields it documents for it.
PAYLOADS: dict[str, dict[str, Any]] = {
    "session_start": {},
    "session_end": {"reason": "session_switch"},
    "user_prompt_submit": {"text": "hi", "queued": True, "image_count": 2},
    "turn_start": {"step": 1},
    "turn_end": {"stop": "tool_use", "error": "overloaded"},
    "tool_call": {"tool_id": "t1", "tool_name": "bash", "tool_args": {"command": "ls"}},
    "tool_result": {
        "tool_id": "t1",
        "tool_name": "bash",
        "tool_args_raw": "{not json",
        "status": "blocked",
        "executed": True,
        "origin_extension": "other",
        "result": {
            "content": [{"type": "text", "text": "no"}],
            "is_error": True,
            "truncated": True,
        },
    },
    "tool_confirmation_requested": {"tool_id": "t1", "tool_name": "bash", "tool_preview": "ls"},
    "permission_decision": {
        "tool_id": "t1",
        "tool_name": "bash",
        "decision": "denied",
        "source": "policy",
        "stage": "tool_execution",
        "reason": "jail",
    },
    "assistant_message": {"text": "done"},
    "pre_compact": {"compaction_id": "c1", "message_count": 12, "token_estimate": 3400},
    "post_compact": {
        "compaction_id": "c1",
        "message_count": 2,
        "token_estimate": 300,
        "status": "failed",
        "error": "timeout",
    },
    "subagent_start": {"agent_id": "a1", "agent_run_id": "r7", "name": "a1"},
    "subagent_stop": {
        "agent_id": "a1",
        "agent_run_id": "r7",
        "name": "a1",
        "status": "cancelled",
        "error": "stopped",
    },
}


def install(paths: Paths, name: str, *options: str, priority: int = 0) -> Path:
    """Installs the fixture as extension ``name``; returns the log of frames it reads."""
    log = paths.home / f"{name}.frames"
    add_extension(
        paths.extensions_dir,
        name,
        "--log",
        str(log),
        *options,
        manifest={"priority": priority} if priority else None,
        script=PROMPT_GUARD,
    )
    return log


def ext_log(paths: Paths, name: str) -> str:
    return paths.extension_log(name).read_text()


BASE = "You are zot.\n  Be brief.  \n"

#: What an agent sends with ``before_agent_start`` (current zot's fields).
START = {"session_id": "s1", "agent_run_id": "run1", "provider": "p", "model": "m"}


# --- before_agent_start ------------------------------------------------------------


async def test_guards_are_asked_in_order_each_seeing_the_last_prompt(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # "c" comes first by priority, then "a" and "b" by name.
    log_a = install(paths, "a", "--append", " [a]")
    log_b = install(paths, "b", "--replace", "  b's prompt, exactly  ")
    log_c = install(paths, "c", "--append", " [c]", priority=-5)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("before_agent_start", system_prompt=BASE, **START)
    assert not reply.block
    assert reply.system_prompt == "  b's prompt, exactly  "  # no trimming
    assert reply.rewritten_by == ["c", "a", "b"]
    (asked_c,) = frames(log_c, "event_intercept")
    (asked_a,) = frames(log_a, "event_intercept")
    (asked_b,) = frames(log_b, "event_intercept")
    assert asked_c["system_prompt"] == BASE
    assert asked_a["system_prompt"] == BASE + " [c]"
    assert asked_b["system_prompt"] == BASE + " [c] [a]"
    for asked in (asked_a, asked_b, asked_c):
        assert asked["event"] == "before_agent_start"
        assert {k: asked[k] for k in START} == START
        assert asked["cwd"] == str(project)
    # One pass, one stamp: every guard got the same sequence.
    assert asked_a["sequence"] == asked_b["sequence"] == asked_c["sequence"]


async def test_empty_string_deletes_the_prompt(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "a", "--delete")
    log_b = install(paths, "b", "--keep")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("before_agent_start", system_prompt=BASE, **START)
    assert (reply.system_prompt, reply.rewritten_by) == ("", ["a"])
    (asked_b,) = frames(log_b, "event_intercept")
    assert asked_b["system_prompt"] == ""


async def test_absent_keeps_the_prompt_and_block_means_nothing(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "a", "--keep", "--block")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("before_agent_start", system_prompt=BASE, **START)
        empty = await zot.intercept_event("before_agent_start", system_prompt="", **START)
    assert (reply.block, reply.system_prompt, reply.rewritten_by) == (False, BASE, [])
    assert (empty.block, empty.system_prompt) == (False, "")
    assert "ignored `block`" in ext_log(paths, "a")


async def test_a_non_string_keeps_the_prompt_with_a_diagnostic(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "a", "--non-string", '{"text": "x"}')
    log_b = install(paths, "b", "--non-string", "42")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("before_agent_start", system_prompt=BASE, **START)
    assert (reply.system_prompt, reply.rewritten_by) == (BASE, [])
    assert frames(log_b, "event_intercept")[0]["system_prompt"] == BASE
    assert "the system prompt is kept as it was: its `system_prompt` is an object" in ext_log(
        paths, "a"
    )
    assert "its `system_prompt` is a number, not a string" in ext_log(paths, "b")


async def test_a_silent_guard_is_withdrawn_and_the_chain_goes_on(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # FAST: 1 s per guard. The exact deadlines are tested in virtual time.
    log_a = install(paths, "a", "--silent")
    log_b = install(paths, "b", "--append", " [b]")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        start = trio.current_time()
        reply = await zot.intercept_event("before_agent_start", system_prompt=BASE, **START)
        took = trio.current_time() - start
    assert (reply.system_prompt, reply.rewritten_by) == (BASE + " [b]", ["b"])
    assert took >= FAST.intercept_timeout  # b was asked after a's deadline only
    (asked,) = frames(log_a, "event_intercept")
    (cancel,) = await wait_for(log_a, "cancel")
    assert cancel["id"] == asked["id"]
    assert "did not answer within 1 s" in ext_log(paths, "a")
    assert frames(log_b, "event_intercept")[0]["system_prompt"] == BASE


async def test_the_agents_cancel_withdraws_the_question(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # A deadline far past the hang guard: the only `cancel` can be the agent's.
    log_a = install(paths, "a", "--silent")
    log_b = install(paths, "b", "--replace", "x")
    await start_daemon(msgspec.structs.replace(FAST, intercept_timeout=600.0))
    async with connect(paths.socket, cwd=project) as zot:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(
                    zot.intercept_event, "before_agent_start", system_prompt=BASE, **START
                )
            )
            (asked,) = await wait_for(log_a, "event_intercept")
            nursery.cancel_scope.cancel()
        (cancel,) = await wait_for(log_a, "cancel")
        assert await zot.ping()  # the connection goes on
    assert cancel["id"] == asked["id"]
    assert frames(log_b, "event_intercept") == []  # never asked


async def test_the_agent_must_send_a_string_prompt(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "a", "--replace", "x")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as missing:
            await zot.intercept_event("before_agent_start", **START)
        with pytest.raises(ZotdError) as number:
            await zot.intercept_event("before_agent_start", system_prompt=7, **START)
        alone = await zot.intercept_event("before_agent_start", system_prompt=BASE)
    assert missing.value.code == number.value.code == "bad_request"
    assert "needs `system_prompt`" in missing.value.message
    assert "must be a string, not a number" in number.value.message
    assert alone.system_prompt == "x"
    assert len(frames(log, "event_intercept")) == 1  # the bad ones asked nobody


# --- events ------------------------------------------------------------------------


async def test_subscriptions_in_two_frames_add_up(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # First frame: session_start; second: tool_result and the intercept.
    log = install(paths, "a", "--split", "--events", "session_start,tool_result", "--replace", "x")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        first = await zot.emit_event("session_start", session_id="s1")
        second = await zot.emit_event("tool_result", tool_id="t1", status="completed")
        other = await zot.emit_event("turn_start", step=1)
        reply = await zot.intercept_event("before_agent_start", system_prompt=BASE)
    assert (first, second, other) == (["a"], ["a"], [])
    assert reply.system_prompt == "x"
    got = await wait_for(log, "event", 2)
    assert [e["event"] for e in got] == ["session_start", "tool_result"]


async def test_the_14_events_reach_subscribers_with_their_fields(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    assert set(PAYLOADS) == ep.EVENTS
    log = install(paths, "a", "--split", "--events", ",".join(PAYLOADS))
    await start_daemon()
    common = {"session_id": "s1", "agent_run_id": "r1"}
    async with connect(paths.socket, cwd=project) as zot:
        for event, payload in PAYLOADS.items():
            sent = {**common, **payload}
            assert await zot.emit_event(event, **sent) == ["a"], event
    got = await wait_for(log, "event", len(PAYLOADS))
    for (event, payload), frame in zip(PAYLOADS.items(), got, strict=True):
        stamp = {"cwd": str(project), "sequence": frame["sequence"]}
        assert frame == {"type": "event", "event": event, **common, **payload, **stamp}


async def test_cwd_and_sequence_per_workspace_shared_with_intercepts(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    log = install(paths, "a", "--events", "turn_start", "--keep")
    other = short_tmp / "other"
    other.mkdir()
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.emit_event("turn_start", step=1)
        await zot.intercept_event("before_agent_start", system_prompt=BASE)
        await zot.emit_event("turn_start", step=2)
        await zot.emit_event("turn_start", step=3, cwd="/given/by/the/agent")
        async with connect(paths.socket, cwd=other) as there:
            await there.emit_event("turn_start", step=1)
        await zot.emit_event("turn_start", step=4)
    seen = await wait_for(log, "event", 5)
    asked = frames(log, "event_intercept")
    here = [f for f in [*seen, *asked] if f["cwd"] != str(other)]
    here.sort(key=lambda f: f["sequence"])
    # Strictly increasing in the order sent, events and the intercept alike.
    assert [(f["type"], f.get("step")) for f in here] == [
        ("event", 1),
        ("event_intercept", None),
        ("event", 2),
        ("event", 3),
        ("event", 4),
    ]
    assert len({f["sequence"] for f in here}) == 5
    assert [f["cwd"] for f in here] == [str(project)] * 3 + ["/given/by/the/agent", str(project)]
    (there_frame,) = [f for f in seen if f["cwd"] == str(other)]
    # Its own count: it did not go on from this workspace's.
    assert there_frame["sequence"] <= here[0]["sequence"]


async def test_an_unknown_event_still_reaches_its_subscribers(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "a", "--events", "custom_thing,turn_start")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        delivered = await zot.emit_event("custom_thing", detail={"k": [1, 2]})
        nobody = await zot.emit_event("nobody_wants_this", x=1)
    assert (delivered, nobody) == (["a"], [])
    (got,) = await wait_for(log, "event")
    assert got["event"] == "custom_thing"
    assert got["detail"] == {"k": [1, 2]}
    assert got["cwd"] == str(project)
    assert isinstance(got["sequence"], int)
    assert "subscribed to events zot does not send (yet): ['custom_thing']" in ext_log(paths, "a")
