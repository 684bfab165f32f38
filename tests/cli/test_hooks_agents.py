"""``zot hook --agent codex`` and ``--agent gemini`` against a real daemon.

Each test runs ``zot hook --agent NAME`` as a separate process, as Codex CLI
or Gemini CLI would, with a recorded payload of ``tests/hooks/codex/`` or
``tests/hooks/gemini/`` on stdin (its ``cwd`` made the test's project), and
checks what the agent reads back and what reaches the extensions: the
example guard (examples/extensions/guard) and a recorder of zot's events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_hooks import (
    DANGEROUS_REASON,
    PROMPT_GUARD,
    ZOT_EVENTS,
    Agent,
    agent,
    guarded,
    observed,
)
from tests.conftest import StartDaemon, add_extension, add_newer_zot
from tests.e2e.test_examples import Ran, run_zot
from zotd.integrations.hook_agents import adapter

__all__ = ["agent", "guarded"]  # the fixtures, shared with test_hooks.py

HOOKS = Path(__file__).parents[1] / "hooks"
DANGEROUS = "cd / && rm -rf / --no-preserve-root"
HARMLESS = "rm -rf build/ && python -m pytest -q"
CODEX_SESSION = "019a8f2e-4c1d-7b3a-9e5f-2d6c8a1b4e70"
GEMINI_SESSION = "8c3e1f52-6a9d-4b7e-a1c4-3f0d9e2b5a67"


def recorded(name: str) -> dict[str, Any]:
    """A payload of ``tests/hooks/``, as ``codex/NAME`` or ``gemini/NAME``."""
    payload: dict[str, Any] = json.loads((HOOKS / f"{name}.json").read_text())
    return payload


async def hook(agent: Agent, name: str, *args: str, **changes: Any) -> Ran:
    """``zot hook --agent AGENT ARGS`` with the recorded payload ``AGENT/EVENT``."""
    kind = name.split("/")[0]
    payload = recorded(name) | {"cwd": str(agent.project)} | changes
    return await run_zot(
        ["hook", "--agent", kind, *args],
        cwd=agent.project,
        env=agent.env,
        stdin=json.dumps(payload).encode(),
    )


def answer(ran: Ran) -> Any:
    """The one line of JSON the hook printed."""
    assert ran.out.endswith("\n") and ran.out.count("\n") == 1, ran
    return json.loads(ran.out)


def codex_deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


# --- Codex CLI ----------------------------------------------------------------------------


async def test_codex_a_dangerous_shell_call_is_denied_a_harmless_one_let_through(
    guarded: Agent,
) -> None:
    bad = await hook(guarded, "codex/PreToolUse-dangerous")
    good = await hook(guarded, "codex/PreToolUse")
    approved = await hook(guarded, "codex/PreToolUse", "--approve")
    asked = await hook(guarded, "codex/PermissionRequest", tool_input={"command": DANGEROUS})
    assert (bad.code, bad.err, answer(bad)) == (0, "", codex_deny(DANGEROUS_REASON)), bad
    # No decision: Codex's own approval policy decides (it has no explicit allow here).
    assert (good.code, good.err, answer(good)) == (0, "", {}), good
    assert (approved.code, approved.err, answer(approved)) == (0, "", {}), approved
    assert (asked.code, asked.err) == (0, ""), asked
    assert answer(asked) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": DANGEROUS_REASON},
        }
    }
    # The guard saw Codex's Bash as zot's bash, with its command.
    entries = await guarded.audited(7)
    verdicts = [(e["tool_name"], e["command"], e["blocked"]) for e in entries if "blocked" in e]
    assert verdicts == [
        ("bash", DANGEROUS, True),
        ("bash", HARMLESS, False),
        ("bash", HARMLESS, False),
        ("bash", DANGEROUS, True),
    ]
    proposals = [e["tool_id"] for e in entries if e["event"] == "tool_call"]
    assert proposals == [
        "call_2Kd8fP5nQ1rW7xZ3yB6cV9mL",
        "call_7Hq2mZ4kL9pX1vR3sT6wY8bN",
        "call_7Hq2mZ4kL9pX1vR3sT6wY8bN",
    ]


async def test_codex_a_rewrite_is_updated_input(agent: Agent, start_daemon: StartDaemon) -> None:
    add_newer_zot(
        agent.paths.extensions_dir,
        "capper",
        agent.paths.home / "capper.frames",
        "--intercept",
        "tool_call",
        "--set",
        "timeout=60000",
    )
    await start_daemon(env=agent.env)
    ran = await hook(agent, "codex/PreToolUse")
    assert (ran.code, ran.err) == (0, ""), ran
    assert answer(ran) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"command": HARMLESS, "timeout": 60000},
        }
    }


async def test_codex_every_event_reaches_an_observer(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    log = agent.paths.home / "recorder.jsonl"
    add_extension(
        agent.paths.extensions_dir,
        "recorder",
        "--log",
        str(log),
        "--events",
        ZOT_EVENTS,
        "--append",
        "\n\nAnswer in British English.",
        script=PROMPT_GUARD,
    )
    await start_daemon(env=agent.env)
    names = [
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
        "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop",
    ]  # fmt: skip
    ran = {name: await hook(agent, f"codex/{name}") for name in names}
    assert (ran["SessionStart"].code, ran["SessionStart"].err) == (0, "")
    assert answer(ran["SessionStart"]) == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "Answer in British English.",
        }
    }
    assert answer(ran["PreToolUse"]) == {} and answer(ran["PermissionRequest"]) == {}
    for name in names[4:]:
        assert ran[name] == Ran(0, "", ""), (name, ran[name])
    events = await observed(log, 11)
    assert all(e["session_id"] == CODEX_SESSION for e in events)
    assert all(e["cwd"] == str(agent.project) for e in events)
    assert [e["event"] for e in events] == [
        "session_start", "user_prompt_submit", "tool_call", "tool_confirmation_requested",
        "tool_result", "pre_compact", "post_compact", "subagent_start", "subagent_stop",
        "assistant_message", "turn_end",
    ]  # fmt: skip
    assert events[2]["tool_args"] == {"command": HARMLESS}
    assert events[4]["status"] == "completed" and events[4]["tool_name"] == "bash"


async def test_codex_without_a_daemon(agent: Agent) -> None:
    left = await hook(agent, "codex/PreToolUse-dangerous", "--no-start")
    closed = await hook(agent, "codex/PreToolUse-dangerous", "--no-start", "--fail-closed")
    stop = await hook(agent, "codex/Stop", "--no-start")
    assert (left.code, left.out) == (1, ""), left
    assert left.err.startswith("zot hook: zotd is not running")
    assert left.err.endswith("; the call is not guarded\n")
    reason = answer(closed)["hookSpecificOutput"]["permissionDecisionReason"]
    assert closed.code == 0 and reason.endswith("; denied (--fail-closed)"), closed
    assert (stop.code, stop.out) == (0, "") and "turn_end not sent" in stop.err


async def test_codex_bad_payloads(agent: Agent) -> None:
    other = await hook(agent, "codex/Stop", hook_event_name="SessionEnd")
    assert (other.code, other.out) == (1, ""), other
    assert other.err.startswith("zot hook: zot does not answer Codex's 'SessionEnd' hooks")
    lacking = await hook(agent, "codex/PreToolUse", "--fail-closed", tool_input="ls")
    assert lacking.code == 0 and lacking.err.startswith(
        "zot hook: the payload on stdin does not fit"
    )
    assert answer(lacking)["hookSpecificOutput"]["permissionDecision"] == "deny"


# --- Gemini CLI ---------------------------------------------------------------------------


async def test_gemini_a_dangerous_shell_call_is_denied_a_harmless_one_let_through(
    guarded: Agent,
) -> None:
    bad = await hook(guarded, "gemini/BeforeTool-dangerous")
    good = await hook(guarded, "gemini/BeforeTool")
    approved = await hook(guarded, "gemini/BeforeTool", "--approve")
    assert (bad.code, bad.err) == (0, ""), bad
    assert answer(bad) == {"decision": "deny", "reason": DANGEROUS_REASON}
    assert (good.code, good.err, answer(good)) == (0, "", {}), good
    assert (approved.code, approved.err, answer(approved)) == (0, "", {"decision": "allow"})
    entries = await guarded.audited(6)
    verdicts = [(e["tool_name"], e["command"], e["blocked"]) for e in entries if "blocked" in e]
    # Gemini CLI's run_shell_command is zot's bash for the guard.
    assert verdicts == [
        ("bash", DANGEROUS, True),
        ("bash", HARMLESS, False),
        ("bash", HARMLESS, False),
    ]


async def test_gemini_a_rewrite_is_the_new_tool_input(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    add_newer_zot(
        agent.paths.extensions_dir,
        "capper",
        agent.paths.home / "capper.frames",
        "--intercept",
        "tool_call",
        "--set",
        "timeout=60000",
    )
    await start_daemon(env=agent.env)
    asked = await hook(agent, "gemini/BeforeTool")
    approved = await hook(agent, "gemini/BeforeTool", "--approve")
    rewritten = recorded("gemini/BeforeTool")["tool_input"] | {"timeout": 60000}
    for ran, decision in [(asked, "ask"), (approved, "allow")]:
        assert (ran.code, ran.err) == (0, ""), ran
        assert answer(ran) == {
            "decision": decision,
            "reason": "input rewritten by zot's guards: capper",
            "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": rewritten},
        }


async def test_gemini_every_event_reaches_an_observer(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    log = agent.paths.home / "recorder.jsonl"
    add_extension(
        agent.paths.extensions_dir,
        "recorder",
        "--log",
        str(log),
        "--events",
        ZOT_EVENTS,
        "--append",
        "\n\nAnswer in British English.",
        script=PROMPT_GUARD,
    )
    await start_daemon(env=agent.env)
    names = [
        "SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "PreCompress", "AfterAgent",
        "SessionEnd",
    ]  # fmt: skip
    ran = {name: await hook(agent, f"gemini/{name}") for name in names}
    assert answer(ran["SessionStart"]) == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "Answer in British English.",
        }
    }
    for name in names[1:]:
        assert ran[name] == Ran(0, "{}\n", ""), (name, ran[name])
    events = await observed(log, 8)
    assert all(e["session_id"] == GEMINI_SESSION for e in events)
    assert [e["event"] for e in events] == [
        "session_start", "user_prompt_submit", "tool_call", "tool_result", "pre_compact",
        "assistant_message", "turn_end", "session_end",
    ]  # fmt: skip
    assert events[3]["tool_name"] == "bash" and events[3]["status"] == "completed"
    assert events[7]["reason"] == "shutdown"


async def test_gemini_without_a_daemon(agent: Agent) -> None:
    left = await hook(agent, "gemini/BeforeTool-dangerous", "--no-start")
    closed = await hook(agent, "gemini/BeforeTool-dangerous", "--no-start", "--fail-closed")
    end = await hook(agent, "gemini/AfterAgent", "--no-start")
    # Exit 1 is a warning for Gemini CLI: the call goes on, under its own rules.
    assert (left.code, left.out) == (1, ""), left
    assert left.err.endswith("; the call is not guarded\n")
    assert closed.code == 0 and answer(closed)["decision"] == "deny", closed
    assert answer(closed)["reason"].endswith("; denied (--fail-closed)")
    assert end.code == 0 and answer(end)["systemMessage"].endswith(
        "; assistant_message, turn_end not sent"
    )


@pytest.mark.parametrize("fail_closed", [False, True])
async def test_gemini_bad_payloads(agent: Agent, fail_closed: bool) -> None:
    flags = ["--fail-closed"] if fail_closed else []
    other = await hook(agent, "gemini/AfterAgent", *flags, hook_event_name="BeforeModel")
    assert other.out == "" and other.code == (2 if fail_closed else 1), other
    assert other.err.startswith("zot hook: zot does not answer Gemini CLI's 'BeforeModel' hooks")
    lacking = await hook(agent, "gemini/BeforeTool", *flags, tool_input=["ls"])
    assert lacking.err.startswith("zot hook: the payload on stdin does not fit"), lacking
    if fail_closed:
        assert (lacking.code, answer(lacking)["decision"]) == (0, "deny")
    else:
        assert (lacking.code, lacking.out) == (1, "")


DOCS = Path(__file__).parents[2] / "docs" / "integrations.md"


def doc_examples(section: str) -> list[tuple[str, str, str]]:
    """The ``$ zot hook --agent A --cwd . < FILE`` lines of a section of
    docs/integrations.md, each with the line it shows printed."""
    text = DOCS.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = text.splitlines()
    found = []
    for n, line in enumerate(lines):
        if line.startswith("$ zot hook --agent "):
            command, file = line[2:].split(" < ")
            found.append((command, file, lines[n + 1]))
    return found


@pytest.mark.parametrize("section", ["Codex CLI", "Gemini CLI"])
async def test_the_docs_examples_print_what_they_show(guarded: Agent, section: str) -> None:
    examples = doc_examples(section)
    assert len(examples) == 2
    root = DOCS.parents[1]
    for command, file, shown in examples:
        args = command.split()[1:]
        assert args[-2:] == ["--cwd", "."]
        ran = await run_zot(
            [*args[:-1], str(guarded.project)],
            cwd=guarded.project,
            env=guarded.env,
            stdin=(root / file).read_bytes(),
        )
        assert (ran.code, ran.err, ran.out) == (0, "", shown + "\n"), (command, file, ran)


async def test_the_workspace_can_be_given_with_cwd(guarded: Agent) -> None:
    # As recorded, cwd is /home/pat/project, which does not exist here.
    stdin = json.dumps(recorded("gemini/BeforeTool-dangerous")).encode()
    ran = await run_zot(
        ["hook", "--agent", "gemini", "--cwd", str(guarded.project)],
        cwd=guarded.project,
        env=guarded.env,
        stdin=stdin,
    )
    assert (ran.code, answer(ran)) == (0, {"decision": "deny", "reason": DANGEROUS_REASON})
    lost = await run_zot(
        ["hook", "--agent", "gemini"], cwd=guarded.project, env=guarded.env, stdin=stdin
    )
    assert (lost.code, lost.out) == (1, ""), lost
    assert "/home/pat/project" in lost.err and lost.err.endswith("; the call is not guarded\n")


@pytest.mark.parametrize(("section", "name"), [("Codex CLI", "codex"), ("Gemini CLI", "gemini")])
def test_the_docs_settings_register_every_event_the_adapter_reads(section: str, name: str) -> None:
    text = DOCS.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    settings = json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])
    hooks = settings["hooks"]
    assert tuple(hooks) == adapter(name).events
    commands = {h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]}
    assert commands == {f"zot hook --agent {name}"}
