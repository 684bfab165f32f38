"""Claude Code's hook payloads and answers, as plain functions (no daemon)."""

from __future__ import annotations

import pytest

from zotd.integrations import claude_hooks as hooks
from zotd.protocol import agent as ap

PRE = b'{"hook_event_name": "PreToolUse", "cwd": "/p", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"}'


def test_a_payload_reads_into_its_struct() -> None:
    p = hooks.parse(PRE, hooks.ToolUse, ("PreToolUse",))
    assert (p.cwd, p.tool_name, p.tool_input, p.tool_use_id) == (
        "/p",
        "Bash",
        {"command": "ls"},
        "t1",
    )
    assert hooks.zot_tool_name(p.tool_name) == "bash"
    assert hooks.zot_tool_name("Read") == "Read"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"  \n", "stdin is empty: expected the hook's JSON payload"),
        (b"{nope", "the payload on stdin is not JSON: "),
        (b"[1]", "the payload on stdin is not a JSON object"),
        (b"{}", "the payload has no hook_event_name (expected 'PreToolUse')"),
        (
            b'{"hook_event_name": "Stop"}',
            "the payload is for hook_event_name 'Stop', not 'PreToolUse' "
            "(is the hook registered under the right event?)",
        ),
        (b'{"hook_event_name": "PreToolUse"}', "the payload on stdin does not fit: "),
    ],
)
def test_a_bad_payload_says_why(data: bytes, why: str) -> None:
    with pytest.raises(hooks.BadPayload) as err:
        hooks.parse(data, hooks.ToolUse, ("PreToolUse",))
    assert str(err.value).startswith(why)


def test_pre_tool_use_answers() -> None:
    deny = hooks.pre_tool_use_answer(ap.InterceptData(block=True, reason="no"), approve=True)
    assert deny == hooks.decision("deny", "no")
    assert hooks.pre_tool_use_answer(ap.InterceptData(block=False), approve=False) == {}
    assert hooks.pre_tool_use_answer(ap.InterceptData(block=False), approve=True) == hooks.decision(
        "allow", "no guard of zot objects"
    )
    rewritten = ap.InterceptData(block=False, args={"command": "ls -l"}, rewritten_by=["a", "b"])
    ask = hooks.pre_tool_use_answer(rewritten, approve=False)["hookSpecificOutput"]
    assert ask == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "ask",
        "permissionDecisionReason": "input rewritten by zot's guards: a, b",
        "updatedInput": {"command": "ls -l"},
    }
    allow = hooks.pre_tool_use_answer(rewritten, approve=True)["hookSpecificOutput"]
    assert allow["permissionDecision"] == "allow"


def test_events_carry_what_happened() -> None:
    start = hooks.parse(
        b'{"hook_event_name": "SessionStart", "session_id": "s", "source": "resume"}',
        hooks.SessionStart,
        ("SessionStart",),
    )
    assert hooks.session_start_event(start) == {"session_id": "s", "source": "resume"}
    ran = hooks.parse(PRE.replace(b"PreToolUse", b"PostToolUse"), hooks.ToolUse, ("PostToolUse",))
    assert hooks.tool_call_event(ran) == {
        "tool_id": "t1",
        "tool_name": "bash",
        "tool_args": {"command": "ls"},
        "session_id": "",
    }
    stop = hooks.parse(b'{"hook_event_name": "Stop", "session_id": "s"}', hooks.Payload, ("Stop",))
    assert hooks.turn_end_event(stop) == {"stop": "end_turn", "session_id": "s"}


def test_an_error_instead_of_a_verdict_says_so() -> None:
    # zot hook prints this and denies (--fail-closed) or exits 1: never "allow".
    assert hooks.refusal("frame_too_large", "intercept refused: too big") == (
        "zotd could not ask the guards: intercept refused: too big (frame_too_large)"
    )
