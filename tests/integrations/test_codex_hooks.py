"""Codex CLI's hook payloads and answers, as plain functions (no daemon).

The payloads in ``tests/hooks/codex/`` are in Codex's hook format, one per
event zot answers, as its hooks receive them on stdin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zotd.integrations import codex_hooks as codex
from zotd.integrations.codex_hooks import ADAPTER
from zotd.integrations.hook_agents import adapter
from zotd.integrations.hook_model import Answer, BadPayload, Guard, Hook
from zotd.protocol import agent as ap

HOOKS = Path(__file__).parents[1] / "hooks" / "codex"
SESSION = "019a8f2e-4c1d-7b3a-9e5f-2d6c8a1b4e70"
CALL = "call_7Hq2mZ4kL9pX1vR3sT6wY8bN"
COMMAND = "rm -rf build/ && python -m pytest -q"


def recorded(name: str) -> bytes:
    return (HOOKS / f"{name}.json").read_bytes()


def events(hook: Hook) -> list[tuple[str, dict[str, Any]]]:
    return [(o.event, o.fields) for o in hook.observe]


def test_the_agent_registry_finds_the_adapter() -> None:
    assert adapter("codex") is ADAPTER
    assert ADAPTER.name == "codex"


def test_there_is_a_recorded_payload_of_every_event_read() -> None:
    names = {p.stem.split("-")[0] for p in HOOKS.glob("*.json")}
    assert names == set(ADAPTER.events)
    for path in HOOKS.glob("*.json"):
        hook = ADAPTER.read(path.read_bytes())
        assert (hook.agent, hook.event, hook.cwd, hook.session_id) == (
            "codex",
            json.loads(path.read_text())["hook_event_name"],
            "/home/pat/project",
            SESSION,
        )


def test_pre_tool_use_puts_the_call_to_the_guards_as_zots_bash() -> None:
    hook = ADAPTER.read(recorded("PreToolUse"))
    assert hook.guard == Guard(tool_name="bash", tool_args={"command": COMMAND}, tool_id=CALL)
    assert hook.report_block
    call = {"tool_id": CALL, "tool_name": "bash", "tool_args": {"command": COMMAND}}
    assert events(hook) == [("tool_call", call | {"session_id": SESSION})]


def test_other_tools_keep_their_names() -> None:
    data = json.loads(recorded("PreToolUse"))
    data |= {"tool_name": "apply_patch", "tool_input": {"command": "*** Begin Patch"}}
    hook = ADAPTER.read(json.dumps(data).encode())
    assert hook.guard is not None and hook.guard.tool_name == "apply_patch"


def test_permission_request_is_guarded_and_observed() -> None:
    hook = ADAPTER.read(recorded("PermissionRequest"))
    assert hook.guard is not None and hook.guard.tool_name == "bash"
    asked = {"tool_id": CALL, "tool_name": "bash", "tool_preview": COMMAND, "session_id": SESSION}
    assert events(hook) == [("tool_confirmation_requested", asked)]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("SessionStart", [("session_start", {"source": "startup"})]),
        (
            "UserPromptSubmit",
            [("user_prompt_submit", {"text": "Clean the build directory and run the tests"})],
        ),
        ("PreCompact", [("pre_compact", {"trigger": "auto"})]),
        ("PostCompact", [("post_compact", {"status": "completed", "trigger": "auto"})]),
        (
            "SubagentStart",
            [
                (
                    "subagent_start",
                    {
                        "agent_id": "019a8f31-0b2e-7c44-8d19-5e7a3f6b2c81",
                        "agent_run_id": "019a8f31-0b2e-7c44-8d19-5e7a3f6b2c81",
                        "name": "explorer",
                    },
                )
            ],
        ),
        (
            "Stop",
            [
                (
                    "assistant_message",
                    {"text": "The build directory is clean and all 20 tests pass."},
                ),
                ("turn_end", {"stop": "end_turn"}),
            ],
        ),
    ],
)
def test_lifecycle_events_are_zots(name: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    hook = ADAPTER.read(recorded(name))
    assert hook.guard is None
    assert events(hook) == [(e, f | {"session_id": SESSION}) for e, f in expected]
    assert hook.context == (name == "SessionStart")


def test_subagent_stop_and_post_tool_use() -> None:
    stop = events(ADAPTER.read(recorded("SubagentStop")))
    assert stop[0][0] == "subagent_stop" and stop[0][1]["status"] == "completed"
    ((event, fields),) = events(ADAPTER.read(recorded("PostToolUse")))
    assert event == "tool_result"
    assert fields["tool_name"] == "bash" and fields["status"] == "completed" and fields["executed"]
    assert fields["result"] == {
        "content": [{"type": "text", "text": json.loads(recorded("PostToolUse"))["tool_response"]}],
        "is_error": False,
    }


# --- answers ------------------------------------------------------------------------------


def pre(approve: bool = False, **verdict: Any) -> Answer:
    hook = ADAPTER.read(recorded("PreToolUse"))
    return ADAPTER.answer(hook, ap.InterceptData(**verdict), approve=approve)


def test_a_block_is_a_deny_with_the_guards_reason() -> None:
    for approve in (False, True):
        assert pre(approve, block=True, reason="no") == Answer(
            stdout={
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "no",
                }
            }
        )


def test_no_objection_is_no_decision_even_with_approve() -> None:
    # Codex refuses permissionDecision "allow" without updatedInput.
    assert pre(False, block=False) == Answer(stdout={})
    assert pre(True, block=False) == Answer(stdout={})


def test_a_rewrite_is_allow_with_updated_input() -> None:
    rewritten = pre(block=False, args={"command": "ls"}, rewritten_by=["a"])
    assert rewritten.stdout == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"command": "ls"},
        }
    }


def test_permission_request_answers() -> None:
    hook = ADAPTER.read(recorded("PermissionRequest"))

    def ask(approve: bool, **verdict: Any) -> Any:
        return ADAPTER.answer(hook, ap.InterceptData(**verdict), approve=approve).stdout

    def decision(**d: Any) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": d}}

    assert ask(False, block=True, reason="no") == decision(behavior="deny", message="no")
    assert ask(False, block=False) == {}
    assert ask(True, block=False) == decision(behavior="allow")
    rewritten = ask(True, block=False, args={"command": "ls"}, rewritten_by=["g"])
    assert rewritten["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    assert "rewrote this call (g)" in rewritten["hookSpecificOutput"]["decision"]["message"]
    # The same input back is no rewrite.
    same = ask(True, block=False, args=hook.guard.tool_args if hook.guard else {})
    assert same == decision(behavior="allow")


def test_session_start_adds_the_extensions_context() -> None:
    hook = ADAPTER.read(recorded("SessionStart"))
    added = ap.InterceptData(block=False, system_prompt="  Use the guard.\n")
    assert ADAPTER.answer(hook, added, approve=False).stdout == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "Use the guard.",
        }
    }
    nothing = ap.InterceptData(block=False, system_prompt="")
    assert ADAPTER.answer(hook, nothing, approve=False) == Answer()


def test_observed_events_answer_nothing() -> None:
    for name in ("UserPromptSubmit", "PostToolUse", "Stop", "PreCompact"):
        assert ADAPTER.answer(ADAPTER.read(recorded(name)), None, approve=True) == Answer()


def test_unguarded_calls_fail_open_or_closed() -> None:
    hook = ADAPTER.read(recorded("PreToolUse"))
    open_ = ADAPTER.unguarded(hook, "zot hook: down", fail_closed=False)
    assert open_ == Answer(exit_code=1, stderr="zot hook: down; the call is not guarded")
    closed = ADAPTER.unguarded(hook, "zot hook: down", fail_closed=True)
    assert (closed.exit_code, closed.stderr) == (0, "zot hook: down")
    assert closed.stdout == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "zot hook: down; denied (--fail-closed)",
        }
    }
    asked = ADAPTER.read(recorded("PermissionRequest"))
    denied = ADAPTER.unguarded(asked, "zot hook: down", fail_closed=True).stdout
    assert denied == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "zot hook: down; denied (--fail-closed)"},
        }
    }


def test_an_observed_event_that_could_not_be_sent_is_noted() -> None:
    stop = ADAPTER.unguarded(ADAPTER.read(recorded("Stop")), "down", fail_closed=True)
    assert stop == Answer(stderr="down; assistant_message, turn_end not sent")
    start = ADAPTER.unguarded(ADAPTER.read(recorded("SessionStart")), "down", fail_closed=False)
    assert start.exit_code == 0 and start.stdout == {
        "systemMessage": "down; session_start not sent"
    }


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "stdin is empty: expected the hook's JSON payload"),
        (b"{nope", "the payload on stdin is not JSON: "),
        (b"[]", "the payload on stdin is not a JSON object"),
        (b"{}", "the payload has no hook_event_name (a string)"),
        (
            b'{"hook_event_name": "SessionEnd"}',
            "zot does not answer Codex's 'SessionEnd' hooks (it answers SessionStart, ",
        ),
        (b'{"hook_event_name": "PreToolUse", "cwd": "/p"}', "the payload on stdin does not fit: "),
        (
            b'{"hook_event_name": "UserPromptSubmit", "prompt": 3}',
            "the payload on stdin does not fit: Expected `str`, got `int` - at `$.prompt`",
        ),
    ],
)
def test_a_bad_payload_says_why(data: bytes, why: str) -> None:
    with pytest.raises(BadPayload) as err:
        ADAPTER.read(data)
    assert str(err.value).startswith(why)


def test_a_bad_guarded_payload_still_knows_its_event() -> None:
    with pytest.raises(BadPayload) as err:
        ADAPTER.read(b'{"hook_event_name": "PreToolUse", "cwd": "/p", "tool_name": "Bash"}')
    hook = err.value.hook
    assert hook is not None and hook.guard is not None and hook.cwd == "/p"
    # So --fail-closed denies it.
    denied = ADAPTER.unguarded(hook, "bad", fail_closed=True).stdout
    assert denied is not None and denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    with pytest.raises(BadPayload) as other:
        ADAPTER.read(b'{"hook_event_name": "Stop", "last_assistant_message": 1}')
    assert other.value.hook is not None and other.value.hook.guard is None


def test_a_long_tool_output_is_cut() -> None:
    result = codex.result_text("x" * (codex.MAX_RESULT_TEXT + 1))
    assert result["truncated"] is True
    assert len(result["content"][0]["text"]) == codex.MAX_RESULT_TEXT
