"""Gemini CLI's hook payloads and answers, as plain functions (no daemon).

The payloads in ``tests/hooks/gemini/`` are in Gemini CLI's hook format, one
per event zot answers, as its hooks receive them on stdin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zotd.integrations.gemini_hooks import ADAPTER
from zotd.integrations.hook_agents import adapter
from zotd.integrations.hook_model import Answer, BadPayload, Guard, Hook
from zotd.protocol import agent as ap

HOOKS = Path(__file__).parents[1] / "hooks" / "gemini"
SESSION = "8c3e1f52-6a9d-4b7e-a1c4-3f0d9e2b5a67"
COMMAND = "rm -rf build/ && python -m pytest -q"
ARGS = {"command": COMMAND, "description": "Clean the build directory and run the tests."}


def recorded(name: str) -> bytes:
    return (HOOKS / f"{name}.json").read_bytes()


def events(hook: Hook) -> list[tuple[str, dict[str, Any]]]:
    return [(o.event, o.fields) for o in hook.observe]


def test_the_agent_registry_finds_the_adapter() -> None:
    assert adapter("gemini") is ADAPTER
    assert ADAPTER.name == "gemini"


def test_there_is_a_recorded_payload_of_every_event_read() -> None:
    names = {p.stem.split("-")[0] for p in HOOKS.glob("*.json")}
    assert names == set(ADAPTER.events)
    for path in HOOKS.glob("*.json"):
        hook = ADAPTER.read(path.read_bytes())
        assert (hook.agent, hook.event, hook.cwd, hook.session_id) == (
            "gemini",
            json.loads(path.read_text())["hook_event_name"],
            "/home/pat/project",
            SESSION,
        )


def test_before_tool_puts_run_shell_command_to_the_guards_as_zots_bash() -> None:
    hook = ADAPTER.read(recorded("BeforeTool"))
    # Gemini CLI gives no id of the call.
    assert hook.guard == Guard(tool_name="bash", tool_args=ARGS, tool_id="")
    assert hook.report_block
    call = {"tool_id": "", "tool_name": "bash", "tool_args": ARGS, "session_id": SESSION}
    assert events(hook) == [("tool_call", call)]


def test_other_tools_keep_their_names() -> None:
    data = json.loads(recorded("BeforeTool"))
    data |= {"tool_name": "write_file", "tool_input": {"file_path": "a", "content": "b"}}
    hook = ADAPTER.read(json.dumps(data).encode())
    assert hook.guard is not None and hook.guard.tool_name == "write_file"


def test_after_tool_is_a_tool_result() -> None:
    ((event, fields),) = events(ADAPTER.read(recorded("AfterTool")))
    llm = json.loads(recorded("AfterTool"))["tool_response"]["llmContent"]
    assert (event, fields) == (
        "tool_result",
        {
            "tool_id": "",
            "tool_name": "bash",
            "tool_args": ARGS,
            "status": "completed",
            "executed": True,
            "result": {"content": [{"type": "text", "text": llm}], "is_error": False},
            "session_id": SESSION,
        },
    )
    data = json.loads(recorded("AfterTool"))
    data["tool_response"]["error"] = {"message": "Command exited 1", "type": "shell"}
    ((_, failed),) = events(ADAPTER.read(json.dumps(data).encode()))
    assert failed["status"] == "failed"
    assert failed["result"] == {
        "content": [{"type": "text", "text": "Command exited 1"}],
        "is_error": True,
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("SessionStart", [("session_start", {"source": "startup"})]),
        (
            "BeforeAgent",
            [("user_prompt_submit", {"text": "Clean the build directory and run the tests"})],
        ),
        ("PreCompress", [("pre_compact", {"trigger": "auto"})]),
        (
            "AfterAgent",
            [
                (
                    "assistant_message",
                    {"text": "The build directory is clean and all 20 tests pass."},
                ),
                ("turn_end", {"stop": "end_turn"}),
            ],
        ),
        ("SessionEnd", [("session_end", {"reason": "shutdown", "gemini_reason": "exit"})]),
    ],
)
def test_lifecycle_events_are_zots(name: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    hook = ADAPTER.read(recorded(name))
    assert hook.guard is None
    assert events(hook) == [(e, f | {"session_id": SESSION}) for e, f in expected]
    assert hook.context == (name == "SessionStart")


def test_a_cleared_session_ends_with_a_switch() -> None:
    data = json.loads(recorded("SessionEnd")) | {"reason": "clear"}
    ((_, fields),) = events(ADAPTER.read(json.dumps(data).encode()))
    assert fields["reason"] == "session_switch"


# --- answers ------------------------------------------------------------------------------


def before(approve: bool = False, **verdict: Any) -> Answer:
    hook = ADAPTER.read(recorded("BeforeTool"))
    return ADAPTER.answer(hook, ap.InterceptData(**verdict), approve=approve)


def test_a_block_is_a_deny_with_the_guards_reason() -> None:
    for approve in (False, True):
        assert before(approve, block=True, reason="no") == Answer(
            stdout={"decision": "deny", "reason": "no"}
        )


def test_no_objection_is_no_decision_or_allow_with_approve() -> None:
    assert before(False, block=False) == Answer(stdout={})
    assert before(True, block=False) == Answer(stdout={"decision": "allow"})


def test_a_rewrite_is_the_new_tool_input_asked_or_allowed() -> None:
    for approve, decision in [(False, "ask"), (True, "allow")]:
        rewritten = before(approve, block=False, args={"command": "ls"}, rewritten_by=["a", "b"])
        assert rewritten == Answer(
            stdout={
                "decision": decision,
                "reason": "input rewritten by zot's guards: a, b",
                "hookSpecificOutput": {
                    "hookEventName": "BeforeTool",
                    "tool_input": {"command": "ls"},
                },
            }
        )


def test_session_start_adds_the_extensions_context() -> None:
    hook = ADAPTER.read(recorded("SessionStart"))
    added = ap.InterceptData(block=False, system_prompt="Use the guard.\n")
    assert ADAPTER.answer(hook, added, approve=False).stdout == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "Use the guard.",
        }
    }
    nothing = ap.InterceptData(block=False, system_prompt=" ")
    assert ADAPTER.answer(hook, nothing, approve=False) == Answer(stdout={})


def test_observed_events_answer_an_empty_object() -> None:
    # With stdout empty, Gemini CLI would read stderr as the answer.
    for name in ("BeforeAgent", "AfterTool", "AfterAgent", "PreCompress", "SessionEnd"):
        assert ADAPTER.answer(ADAPTER.read(recorded(name)), None, approve=True) == Answer(stdout={})


def test_unguarded_calls_fail_open_or_closed() -> None:
    hook = ADAPTER.read(recorded("BeforeTool"))
    open_ = ADAPTER.unguarded(hook, "zot hook: down", fail_closed=False)
    # Exit 1 is a warning for Gemini CLI: the call goes on, never allowed by zot.
    assert open_ == Answer(exit_code=1, stderr="zot hook: down; the call is not guarded")
    closed = ADAPTER.unguarded(hook, "zot hook: down", fail_closed=True)
    assert closed == Answer(
        stdout={"decision": "deny", "reason": "zot hook: down; denied (--fail-closed)"},
        stderr="zot hook: down",
    )


def test_an_observed_event_that_could_not_be_sent_is_a_message() -> None:
    end = ADAPTER.unguarded(ADAPTER.read(recorded("AfterAgent")), "down", fail_closed=True)
    note = "down; assistant_message, turn_end not sent"
    assert end == Answer(stdout={"systemMessage": note}, stderr=note)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b" ", "stdin is empty: expected the hook's JSON payload"),
        (b"nope", "the payload on stdin is not JSON: "),
        (b'"BeforeTool"', "the payload on stdin is not a JSON object"),
        (b'{"hook_event_name": 1}', "the payload has no hook_event_name (a string)"),
        (
            b'{"hook_event_name": "BeforeModel"}',
            "zot does not answer Gemini CLI's 'BeforeModel' hooks (it answers SessionStart, ",
        ),
        (
            b'{"hook_event_name": "BeforeTool", "tool_name": "x", "tool_input": []}',
            "the payload on stdin does not fit: Expected `object`, got `array` - at `$.tool_input`",
        ),
        (b'{"hook_event_name": "BeforeAgent"}', "the payload on stdin does not fit: "),
    ],
)
def test_a_bad_payload_says_why(data: bytes, why: str) -> None:
    with pytest.raises(BadPayload) as err:
        ADAPTER.read(data)
    assert str(err.value).startswith(why)


def test_a_bad_guarded_payload_still_knows_its_event() -> None:
    with pytest.raises(BadPayload) as err:
        ADAPTER.read(b'{"hook_event_name": "BeforeTool", "cwd": "/p"}')
    hook = err.value.hook
    assert hook is not None and hook.guard is not None and hook.cwd == "/p"
    denied = ADAPTER.unguarded(hook, "bad", fail_closed=True)
    assert denied.stdout == {"decision": "deny", "reason": "bad; denied (--fail-closed)"}
