"""Claude Code's hook payloads and answers, as plain functions (no daemon)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zotd.integrations import claude_hooks as hooks
from zotd.integrations.claude_hooks import ADAPTER
from zotd.integrations.hook_model import Answer, Guard, Hook, blocked_events
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


# --- zot hook --agent claude: every event -----------------------------------------------

CLAUDE = Path(__file__).parents[1] / "hooks" / "claude"
SESSION = "5f1c2a9e-8d3b-4c47-9a61-0e2f7b6d4c18"


def recorded(name: str) -> bytes:
    return (CLAUDE / f"{name}.json").read_bytes()


def observed(hook: Hook) -> list[tuple[str, dict[str, Any]]]:
    return [(o.event, o.fields) for o in hook.observe]


def test_every_event_the_adapter_registers_has_a_recorded_payload() -> None:
    assert ADAPTER.name == "claude"
    recorded_events = {json.loads(p.read_text())["hook_event_name"] for p in CLAUDE.glob("*.json")}
    assert set(ADAPTER.events) == recorded_events
    assert set(ADAPTER.events) >= {
        "PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure",
        "UserPromptSubmit", "SessionStart", "SessionEnd", "PreCompact", "PostCompact",
        "SubagentStart", "SubagentStop", "Stop",
    }  # fmt: skip
    for path in CLAUDE.glob("*.json"):
        hook = ADAPTER.read(path.read_bytes())
        assert (hook.agent, hook.cwd, hook.session_id) == ("claude", "/home/pat/project", SESSION)
        assert all(o.fields["session_id"] == SESSION for o in hook.observe)


def test_tool_calls_are_put_to_the_guards() -> None:
    pre = ADAPTER.read(recorded("PreToolUse-dangerous"))
    command = "cd / && rm -rf / --no-preserve-root"
    assert pre.guard == Guard(
        tool_name="bash",
        tool_args={"command": command, "description": "Remove everything"},
        tool_id="toolu_01HZX8Q6V2KJ3N4R5T7W9YB2CD",
    )
    # The model's proposal, as zot's observers see it, and what zot says of a refusal.
    assert observed(pre) == [
        ("tool_call", {"tool_id": pre.guard.tool_id, "tool_name": "bash",
                       "tool_args": pre.guard.tool_args, "session_id": SESSION}),
    ]  # fmt: skip
    assert pre.report_block
    blocked = blocked_events(pre, ap.InterceptData(block=True, reason="no"))
    assert [(o.event, o.fields["tool_name"]) for o in blocked] == [
        ("permission_decision", "bash"),
        ("tool_result", "bash"),
    ]
    assert blocked[0].fields["decision"] == "denied" and blocked[0].fields["source"] == "policy"
    assert blocked[1].fields["status"] == "blocked" and blocked[1].fields["executed"] is False
    assert blocked_events(pre, ap.InterceptData(block=False)) == ()

    asked = ADAPTER.read(recorded("PermissionRequest"))
    assert asked.guard is not None and asked.guard.tool_name == "bash"
    assert observed(asked) == [
        ("tool_confirmation_requested", {"tool_id": "", "tool_name": "bash",
                                         "tool_preview": command, "session_id": SESSION}),
    ]  # fmt: skip


def test_what_happened_becomes_zots_lifecycle_events() -> None:
    ran = observed(ADAPTER.read(recorded("PostToolUse")))
    assert ran == [
        ("tool_result", {
            "tool_id": "toolu_01JA2B3C4D5E6F7G8H9J0K1L2M", "tool_name": "bash",
            "tool_args": json.loads(recorded("PostToolUse"))["tool_input"],
            "status": "completed", "executed": True,
            "result": {"content": [{"type": "text", "text": "....................                                   [100%]\n20 passed in 0.84s"}], "is_error": False},
            "session_id": SESSION,
        }),
    ]  # fmt: skip
    failed = observed(ADAPTER.read(recorded("PostToolUseFailure")))[0][1]
    assert (failed["tool_name"], failed["status"], failed["result"]["is_error"]) == (
        "Write",
        "failed",
        True,
    )
    assert failed["result"]["content"][0]["text"].startswith("EACCES")
    interrupted = json.loads(recorded("PostToolUseFailure")) | {"is_interrupt": True}
    again = ADAPTER.read(json.dumps(interrupted).encode())
    assert observed(again)[0][1]["status"] == "cancelled"

    def one(name: str) -> tuple[str, dict[str, Any]]:
        (event, fields), *rest = observed(ADAPTER.read(recorded(name)))
        assert rest == []
        fields.pop("session_id")
        return event, fields

    assert one("SessionStart") == ("session_start", {"source": "startup"})
    assert ADAPTER.read(recorded("SessionStart")).context
    assert one("UserPromptSubmit") == (
        "user_prompt_submit",
        {"text": "Run the tests and fix what fails"},
    )
    assert one("SessionEnd") == (
        "session_end",
        {"reason": "shutdown", "claude_reason": "prompt_input_exit"},
    )
    assert one("PreCompact") == (
        "pre_compact",
        {"trigger": "manual", "custom_instructions": "Keep the failing test names"},
    )
    assert one("PostCompact") == (
        "post_compact",
        {
            "status": "completed",
            "trigger": "manual",
            "summary": "The user asked to run the tests; 20 pass.",
        },
    )
    agent = {"agent_id": "a3f9c2e1b7d4", "agent_run_id": "a3f9c2e1b7d4", "name": "Explore"}
    assert one("SubagentStart") == ("subagent_start", agent)
    assert one("SubagentStop") == ("subagent_stop", agent | {"status": "completed"})
    stop = observed(ADAPTER.read(recorded("Stop")))
    assert [e for e, _ in stop] == ["assistant_message", "turn_end"]
    assert stop[0][1]["text"] == "All 20 tests pass."
    assert stop[1][1] == {"stop": "end_turn", "session_id": SESSION}
    cleared = json.loads(recorded("SessionEnd")) | {"reason": "clear"}
    assert observed(ADAPTER.read(json.dumps(cleared).encode()))[0][1]["reason"] == "session_switch"


def test_a_bad_payload_keeps_what_could_be_read_of_it() -> None:
    with pytest.raises(hooks.BadPayload) as err:
        ADAPTER.read(b'{"hook_event_name": "Notification", "message": "hi"}')
    assert str(err.value).startswith("zot does not answer Claude Code's 'Notification' hooks")
    assert err.value.hook is None
    with pytest.raises(hooks.BadPayload) as err:
        ADAPTER.read(b'{"hook_event_name": "PermissionRequest", "cwd": "/p"}')
    # A guarded event: the CLI can still deny it (--fail-closed).
    assert err.value.hook is not None and err.value.hook.guard is not None
    assert err.value.hook.event == "PermissionRequest"
    with pytest.raises(hooks.BadPayload) as err:
        ADAPTER.read(b"{nope")
    assert err.value.hook is None


def test_answers_in_claude_codes_terms() -> None:
    pre = ADAPTER.read(recorded("PreToolUse"))
    perm = ADAPTER.read(recorded("PermissionRequest"))
    no = ap.InterceptData(block=True, reason="refused")
    fine = ap.InterceptData(block=False)
    assert ADAPTER.answer(pre, no, approve=False) == Answer(
        stdout=hooks.decision("deny", "refused")
    )
    assert ADAPTER.answer(pre, fine, approve=False) == Answer(stdout={})

    def decided(verdict: ap.InterceptData, approve: bool = False) -> Any:
        out = ADAPTER.answer(perm, verdict, approve=approve).stdout
        return out["hookSpecificOutput"]["decision"] if out else out

    assert decided(no) == {"behavior": "deny", "message": "refused"}
    assert decided(fine) == {} and decided(fine, True) == {"behavior": "allow"}
    args = perm.guard.tool_args if perm.guard else {}
    rewrite = ap.InterceptData(block=False, args=args | {"timeout": 1}, rewritten_by=["cap"])
    assert decided(rewrite, True) == {"behavior": "allow", "updatedInput": args | {"timeout": 1}}
    assert decided(rewrite)["behavior"] == "deny" and "(cap)" in decided(rewrite)["message"]
    # Input the guards gave back unchanged is no rewrite.
    same = ap.InterceptData(block=False, args=args, rewritten_by=["cap"])
    assert decided(same) == {}

    start = ADAPTER.read(recorded("SessionStart"))
    added = ap.InterceptData(block=False, system_prompt="\n\nAnswer in British English.")
    assert ADAPTER.answer(start, added, approve=False).stdout == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "Answer in British English.",
        }
    }
    empty = ap.InterceptData(block=False, system_prompt="")
    assert ADAPTER.answer(start, empty, approve=False) == Answer()
    for name in ("Stop", "UserPromptSubmit", "PostToolUse", "PreCompact", "SessionEnd"):
        assert ADAPTER.answer(ADAPTER.read(recorded(name)), None, approve=True) == Answer()


def test_without_zotd_a_call_is_left_to_claude_code_or_denied() -> None:
    pre = ADAPTER.read(recorded("PreToolUse"))
    perm = ADAPTER.read(recorded("PermissionRequest"))
    assert ADAPTER.unguarded(pre, "down", fail_closed=False) == Answer(
        exit_code=1, stderr="down; the call is not guarded"
    )
    assert ADAPTER.unguarded(pre, "down", fail_closed=True) == Answer(
        stdout=hooks.decision("deny", "down; denied (--fail-closed)"), stderr="down"
    )
    closed = ADAPTER.unguarded(perm, "down", fail_closed=True).stdout
    assert closed == hooks.permission_answer("deny", message="down; denied (--fail-closed)")
    stop = ADAPTER.unguarded(ADAPTER.read(recorded("Stop")), "down", fail_closed=True)
    assert stop == Answer(stderr="down; assistant_message, turn_end not sent")
    # The user hears once a session that zot is not in it.
    start = ADAPTER.unguarded(ADAPTER.read(recorded("SessionStart")), "down", fail_closed=False)
    assert start == Answer(
        stdout={"systemMessage": "down; session_start not sent"},
        stderr="down; session_start not sent",
    )
