"""``zot hook``: Claude Code's hooks answered by a real daemon and the example guard.

The payloads in ``tests/hooks/`` are in Claude Code's hook format, as its
hooks receive them on stdin. Each test runs ``zot hook ...`` as a separate
process, as Claude Code would, with a payload on stdin (its ``cwd`` made the
test's project), and checks what Claude Code reads back (exit code, stdout)
and what reaches the extensions: the example guard's audit log,
``$ZOT_HOME/data/guard/audit.jsonl``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.cli.test_autostart import daemons_on
from tests.conftest import StartDaemon, add_extension, add_newer_zot
from tests.e2e.test_examples import EXAMPLES, Ran, install, run_zot, user_env, wait_for_lines
from tests.e2e.test_guard_limits import CONFIG as GUARD_LIMITS
from tests.e2e.test_guard_limits import add_guard
from zotd.client import connect
from zotd.model.paths import Paths

HOOKS = Path(__file__).parents[1] / "hooks"
#: Upper bound for one run of ``zot hook`` (a fraction of a second, or its own deadline).
TIMEOUT = 15.0
SESSION = "5f1c2a9e-8d3b-4c47-9a61-0e2f7b6d4c18"
DANGEROUS_REASON = "refused: deletes the whole file system or home directory ('rm -rf /')"


def recorded(name: str) -> dict[str, Any]:
    """A payload of ``tests/hooks/``."""
    payload: dict[str, Any] = json.loads((HOOKS / f"{name}.json").read_text())
    return payload


def deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def answer(ran: Ran) -> Any:
    """The one line of JSON a ``pre-tool-use`` printed."""
    assert ran.out.endswith("\n") and ran.out.count("\n") == 1, ran
    return json.loads(ran.out)


@dataclass
class Agent:
    """Claude Code, as far as its hooks go, working in ``project``."""

    paths: Paths
    project: Path
    env: dict[str, str]

    def payload(self, name: str, **changes: Any) -> bytes:
        """A recorded payload, in this project, with ``changes``."""
        payload = recorded(name) | {"cwd": str(self.project)} | changes
        return json.dumps(payload).encode()

    async def hook(self, command: str, stdin: bytes, *args: str) -> Ran:
        """``zot hook COMMAND ARGS`` with ``stdin``, as Claude Code runs a hook."""
        return await run_zot(["hook", command, *args], cwd=self.project, env=self.env, stdin=stdin)

    @property
    def audit_log(self) -> Path:
        return self.paths.home / "data" / "guard" / "audit.jsonl"

    async def audited(self, count: int) -> list[dict[str, Any]]:
        """The guard's first ``count`` audit entries, without their times and
        what zotd adds to every event (the workspace, a rising sequence)."""
        lines = await wait_for_lines(self.audit_log, count)
        # (the guard's own verdicts have neither)
        sequences = [e.pop("sequence") for e in lines if "sequence" in e]
        assert sequences == sorted(set(sequences)), "strictly increasing"
        assert all(e.pop("cwd", str(self.project)) == str(self.project) for e in lines)
        return [{k: v for k, v in e.items() if k != "ts"} for e in lines]


@pytest.fixture
def agent(paths: Paths, project: Path) -> Agent:
    env = user_env(paths)
    env["ZOTD_NO_AUTOSTART"] = "1"  # no hook starts a daemon of its own here
    return Agent(paths, project, env)


@pytest.fixture
async def guarded(agent: Agent, start_daemon: StartDaemon) -> Agent:
    """A daemon with examples/extensions/guard installed."""
    await start_daemon(env=agent.env)
    async with connect(agent.paths.socket, cwd=agent.project) as zot:
        await install(zot, "guard")
    return agent


# --- pre-tool-use ----------------------------------------------------------------------


async def test_a_dangerous_bash_call_is_denied_by_the_example_guard(guarded: Agent) -> None:
    ran = await guarded.hook("pre-tool-use", guarded.payload("pre-tool-use-dangerous"))
    assert (ran.code, ran.err) == (0, ""), ran
    assert answer(ran) == deny(DANGEROUS_REASON)
    # The guard saw Claude Code's Bash as zot's bash, with its command.
    assert await guarded.audited(1) == [
        {
            "event": "verdict",
            "tool_name": "bash",
            "command": "cd / && rm -rf / --no-preserve-root",
            "blocked": True,
        }
    ]


async def test_the_workspace_can_be_given_instead_of_the_payloads_cwd(guarded: Agent) -> None:
    # As recorded, cwd is /home/pat/project, which does not exist here.
    stdin = json.dumps(recorded("pre-tool-use-dangerous")).encode()
    ran = await guarded.hook("pre-tool-use", stdin, "--cwd", str(guarded.project))
    assert (ran.code, answer(ran)) == (0, deny(DANGEROUS_REASON)), ran
    lost = await guarded.hook("pre-tool-use", stdin)
    assert (lost.code, lost.out) == (1, ""), lost
    assert "/home/pat/project" in lost.err and lost.err.endswith("; the call is not guarded\n")


async def test_calls_no_guard_objects_to_are_left_to_claude_code(guarded: Agent) -> None:
    harmless = await guarded.hook("pre-tool-use", guarded.payload("pre-tool-use-harmless"))
    write = await guarded.hook("pre-tool-use", guarded.payload("pre-tool-use-write"))
    approved = await guarded.hook(
        "pre-tool-use", guarded.payload("pre-tool-use-harmless"), "--approve"
    )
    # No decision: Claude Code's own permission rules decide (and may ask).
    assert (harmless.code, answer(harmless), harmless.err) == (0, {}, "")
    # Write keeps its name: the guard checks only bash, so "rm -rf /" in a file is no command.
    assert (write.code, answer(write), write.err) == (0, {}, "")
    assert (approved.code, approved.err) == (0, "")
    assert answer(approved) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "no guard of zot objects",
        }
    }
    command = "rm -rf build/ && python -m pytest -q"
    verdict = {"event": "verdict", "tool_name": "bash", "command": command, "blocked": False}
    assert await guarded.audited(2) == [verdict, verdict]


async def test_a_silent_guard_counts_as_allow_within_the_intercept_bound(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    # tests/extensions/fake.py never answers about a command with "hang" in it.
    add_extension(agent.paths.extensions_dir, "sentry", "--intercept", "tool_call")
    daemon = await start_daemon(env=agent.env)
    stdin = agent.payload("pre-tool-use-harmless", tool_input={"command": "ls # hang"})
    start = time.monotonic()
    ran = await agent.hook("pre-tool-use", stdin, "--fail-closed")
    took = time.monotonic() - start
    # The daemon gave up on the guard after its intercept_timeout, not zot hook
    # (at its own deadline it would have denied, with --fail-closed, and said so).
    assert (ran.code, answer(ran), ran.err) == (0, {}, ""), ran
    assert took >= daemon.config.intercept_timeout


async def test_rewritten_input_is_shown_to_the_user_as_it_will_run(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    # A guard written for newer zot, which rewrites tool arguments.
    frames = agent.paths.home / "capper.frames"
    add_newer_zot(
        agent.paths.extensions_dir,
        "capper",
        frames,
        "--intercept",
        "tool_call",
        "--set",
        "timeout=60000",
    )
    await start_daemon(env=agent.env)
    stdin = agent.payload("pre-tool-use-harmless")
    asked = await agent.hook("pre-tool-use", stdin)
    approved = await agent.hook("pre-tool-use", stdin, "--approve")
    rewritten = recorded("pre-tool-use-harmless")["tool_input"] | {"timeout": 60000}
    for ran, decision in [(asked, "ask"), (approved, "allow")]:
        assert (ran.code, ran.err) == (0, "")
        assert answer(ran) == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": "input rewritten by zot's guards: capper",
                "updatedInput": rewritten,
            }
        }


async def test_a_call_too_big_for_the_guards_is_never_allowed(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    # "grow" rewrites every call into some 4,000 bytes (its answer fits in the
    # daemon's 4096-byte limit); "wall" would block those, but the frame
    # asking it, with the payload's tool_id, would not fit (wall would drop
    # it unread, and count as silent: allow). zotd refuses the intercept
    # with an error instead, and zot hook never allows on one.
    add_guard(agent.paths, "grow", "--pad", "4000", priority=-1)
    add_guard(agent.paths, "wall", "--block-if", "xxxx")
    await start_daemon(GUARD_LIMITS, env=agent.env)
    stdin = agent.payload("pre-tool-use-harmless")
    opened = await agent.hook("pre-tool-use", stdin)
    approving = await agent.hook("pre-tool-use", stdin, "--approve")
    closed = await agent.hook("pre-tool-use", stdin, "--fail-closed")
    prefix = (
        "zot hook pre-tool-use: zotd could not ask the guards: intercept refused: as rewritten "
        "by 'grow', the event_intercept frame for the guards after them would take "
    )
    for ran in (opened, approving):
        # No decision: a non-blocking error for Claude Code, never "allow".
        assert (ran.code, ran.out) == (1, ""), ran
        assert ran.err.startswith(prefix), ran
        assert ran.err.endswith(" (frame_too_large); the call is not guarded\n"), ran
    note = opened.err.removesuffix("; the call is not guarded\n")
    assert (closed.code, closed.err) == (0, note + "\n"), closed
    assert answer(closed) == deny(f"{note}; denied (--fail-closed)")


# --- lifecycle events ------------------------------------------------------------------


async def test_lifecycle_hooks_reach_the_guard_as_zot_events(guarded: Agent) -> None:
    write = recorded("pre-tool-use-write")
    ran = [
        await guarded.hook("session-start", guarded.payload("session-start")),
        await guarded.hook("post-tool-use", guarded.payload("post-tool-use")),
        await guarded.hook(
            "post-tool-use",
            guarded.payload(
                "pre-tool-use-write", hook_event_name="PostToolUseFailure", error="disk full"
            ),
        ),
        await guarded.hook("stop", guarded.payload("stop")),
    ]
    # Nothing on stdout: no context added at session start, no block of the stop.
    assert ran == [Ran(0, "", "")] * 4
    post = recorded("post-tool-use")
    assert await guarded.audited(4) == [
        {"event": "session_start", "session_id": SESSION, "source": "startup"},
        {
            "event": "tool_call",
            "tool_id": post["tool_use_id"],
            "tool_name": "bash",
            "tool_args": post["tool_input"],
            "session_id": SESSION,
        },
        {
            "event": "tool_call",
            "tool_id": write["tool_use_id"],
            "tool_name": "Write",
            "tool_args": write["tool_input"],
            "session_id": SESSION,
        },
        {"event": "turn_end", "stop": "end_turn", "session_id": SESSION},
    ]


# --- unreadable payloads ---------------------------------------------------------------


async def test_an_unreadable_payload_is_reported_and_never_guessed(guarded: Agent) -> None:
    malformed = (HOOKS / "malformed.json").read_bytes()
    harmless = recorded("pre-tool-use-harmless") | {"cwd": str(guarded.project)}
    del harmless["tool_input"]

    broken = await guarded.hook("pre-tool-use", malformed)
    closed = await guarded.hook("pre-tool-use", malformed, "--fail-closed")
    missing = await guarded.hook("pre-tool-use", json.dumps(harmless).encode())
    empty = await guarded.hook("pre-tool-use", b"")
    misplaced = await guarded.hook("pre-tool-use", guarded.payload("stop"))

    # Exit 1: Claude Code shows the message and goes on (exit 2 would block).
    prefix = "zot hook pre-tool-use: "
    assert (broken.code, broken.out) == (1, ""), broken
    assert broken.err.startswith(f"{prefix}the payload on stdin is not JSON: ")
    assert broken.err.endswith("; the call is not guarded\n")
    assert (closed.code, closed.err) == (0, broken.err.replace("; the call is not guarded", ""))
    assert answer(closed) == deny(f"{closed.err.rstrip()}; denied (--fail-closed)")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err == (
        f"{prefix}the payload on stdin does not fit: Object missing required field "
        "`tool_input`; the call is not guarded\n"
    )
    assert empty == Ran(
        1,
        "",
        f"{prefix}stdin is empty: expected the hook's JSON payload; the call is not guarded\n",
    )
    assert (misplaced.code, misplaced.out) == (1, "")
    assert misplaced.err.startswith(f"{prefix}the payload is for hook_event_name 'Stop', not ")

    stop = await guarded.hook("stop", malformed)
    start = await guarded.hook("session-start", guarded.payload("stop"))
    assert (stop.code, stop.out) == (1, "")
    assert stop.err.startswith("zot hook stop: the payload on stdin is not JSON: ")
    assert (start.code, start.out) == (1, "")
    assert start.err == (
        "zot hook session-start: the payload is for hook_event_name 'Stop', not "
        "'SessionStart' (is the hook registered under the right event?)\n"
    )
    # Nothing reached the guard.
    assert not guarded.audit_log.exists() or guarded.audit_log.read_text() == ""


# --- no daemon -------------------------------------------------------------------------


async def test_without_a_daemon_the_guard_fails_open_unless_told_to_fail_closed(
    agent: Agent,
) -> None:
    stdin = agent.payload("pre-tool-use-dangerous")
    opened = await agent.hook("pre-tool-use", stdin)
    closed = await agent.hook("pre-tool-use", stdin, "--fail-closed")

    assert (opened.code, opened.out) == (1, ""), opened
    assert opened.err.startswith("zot hook pre-tool-use: zotd is not running")
    assert opened.err.endswith("; the call is not guarded\n")
    note = opened.err.removesuffix("; the call is not guarded\n")
    assert (closed.code, closed.err) == (0, note + "\n"), closed
    assert answer(closed) == deny(f"{note}; denied (--fail-closed)")


async def test_without_a_daemon_lifecycle_hooks_never_hold_the_agent_up(agent: Agent) -> None:
    for command, payload, event in [
        ("session-start", "session-start", "session_start"),
        ("post-tool-use", "post-tool-use", "tool_call"),
        ("stop", "stop", "turn_end"),
    ]:
        ran = await agent.hook(command, agent.payload(payload))
        assert (ran.code, ran.out) == (0, ""), ran
        assert ran.err.startswith(f"zot hook {command}: zotd is not running"), ran
        assert ran.err.endswith(f"; {event} not sent\n"), ran


async def test_a_daemon_that_does_not_answer_is_given_up_on_in_time(agent: Agent) -> None:
    # Something accepts on the socket and never answers, not even hello.
    agent.paths.socket.parent.mkdir(parents=True)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(agent.paths.socket))
    sock.listen()
    # zot hook waits ready_grace + intercept_timeout + 2 s by default.
    agent.paths.config_file.write_text("ready_grace = 0.5\nintercept_timeout = 0.5\n")

    async def hold(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, hold, [trio.SocketListener(sock)])
        stdin = agent.payload("pre-tool-use-dangerous")
        start = time.monotonic()
        default = await agent.hook("pre-tool-use", stdin)
        took = time.monotonic() - start
        short = await agent.hook("pre-tool-use", stdin, "--timeout", "0.5", "--fail-closed")
        stop = await agent.hook("stop", agent.payload("stop"), "--timeout", "0.5")
        nursery.cancel_scope.cancel()

    assert default == Ran(
        1,
        "",
        "zot hook pre-tool-use: zotd did not answer within 3 s; the call is not guarded\n",
    )
    # Its own deadline, waited out (the message names it; run_zot bounds a hang).
    assert took >= 3.0
    assert short.code == 0
    assert answer(short) == deny(
        "zot hook pre-tool-use: zotd did not answer within 0.5 s; denied (--fail-closed)"
    )
    assert stop == Ran(
        0, "", "zot hook stop: zotd did not answer within 0.5 s; turn_end not sent\n"
    )


async def test_a_hook_starts_the_daemon_that_guards_the_call(agent: Agent) -> None:
    shutil.copytree(EXAMPLES / "guard", agent.paths.extensions_dir / "guard")
    del agent.env["ZOTD_NO_AUTOSTART"]
    stdin = agent.payload("pre-tool-use-dangerous")
    try:
        unstarted = await agent.hook("pre-tool-use", stdin, "--no-start")
        assert daemons_on(agent.paths.socket) == []
        ran = await agent.hook("pre-tool-use", stdin)
        started = daemons_on(agent.paths.socket)
    finally:
        for pid in daemons_on(agent.paths.socket):
            os.kill(pid, signal.SIGTERM)
        with trio.fail_after(TIMEOUT):
            while daemons_on(agent.paths.socket):
                await trio.sleep(0.05)
    assert (unstarted.code, unstarted.out) == (1, ""), unstarted
    assert unstarted.err.startswith("zot hook pre-tool-use: zotd is not running")
    assert len(started) == 1
    # It says on stderr that it started one (Claude Code shows that in its transcript).
    log = agent.paths.daemon_log
    note = f"zot: started zotd, pid {started[0]} (its log: {log})\n"
    assert (ran.code, answer(ran), ran.err) == (0, deny(DANGEROUS_REASON), note), ran


# --- zot hook --agent claude: every event -----------------------------------------------

CLAUDE = HOOKS / "claude"
PROMPT_GUARD = Path(__file__).parents[1] / "extensions" / "prompt_guard.py"
#: Current zot's lifecycle events (what an observer can subscribe to).
ZOT_EVENTS = (
    "session_start,session_end,user_prompt_submit,turn_start,turn_end,tool_call,tool_result,"
    "tool_confirmation_requested,permission_decision,assistant_message,pre_compact,"
    "post_compact,subagent_start,subagent_stop"
)


async def claude(agent: Agent, name: str, *args: str, **changes: Any) -> Ran:
    """``zot hook --agent claude ARGS`` with the recorded payload ``name`` of
    tests/hooks/claude/, in the agent's project."""
    payload = json.loads((CLAUDE / f"{name}.json").read_text())
    stdin = json.dumps(payload | {"cwd": str(agent.project)} | changes).encode()
    return await run_zot(
        ["hook", "--agent", "claude", *args], cwd=agent.project, env=agent.env, stdin=stdin
    )


def permission_deny(message: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": message},
        }
    }


async def test_the_guard_denies_a_dangerous_call_before_it_runs_and_at_the_dialog(
    guarded: Agent,
) -> None:
    pre = await claude(guarded, "PreToolUse-dangerous")
    asked = await claude(guarded, "PermissionRequest")
    harmless = await claude(guarded, "PreToolUse")
    assert (pre.code, pre.err, answer(pre)) == (0, "", deny(DANGEROUS_REASON)), pre
    assert (asked.code, asked.err, answer(asked)) == (0, "", permission_deny(DANGEROUS_REASON))
    assert (harmless.code, harmless.err, answer(harmless)) == (0, "", {}), harmless
    # The guard saw both dangerous calls as bash, and the proposals as tool_call events.
    entries = await guarded.audited(5)
    verdicts = [e for e in entries if e["event"] == "verdict"]
    assert [v["blocked"] for v in verdicts] == [True, True, False]
    assert {v["command"] for v in verdicts[:2]} == {"cd / && rm -rf / --no-preserve-root"}
    proposals = [e for e in entries if e["event"] == "tool_call"]
    assert [p["tool_id"] for p in proposals] == [
        "toolu_01HZX8Q6V2KJ3N4R5T7W9YB2CD",
        "toolu_01JA2B3C4D5E6F7G8H9J0K1L2M",
    ]


async def test_a_rewrite_is_claude_codes_updated_input(
    agent: Agent, start_daemon: StartDaemon
) -> None:
    frames = agent.paths.home / "capper.frames"
    add_newer_zot(
        agent.paths.extensions_dir,
        "capper",
        frames,
        "--intercept",
        "tool_call",
        "--set",
        "timeout=60000",
    )
    await start_daemon(env=agent.env)
    asked = await claude(agent, "PreToolUse")
    approved = await claude(agent, "PreToolUse", "--approve")
    dialog = await claude(agent, "PermissionRequest", "--approve")
    rewritten = json.loads((CLAUDE / "PreToolUse.json").read_text())["tool_input"] | {
        "timeout": 60000
    }
    for ran, decision in [(asked, "ask"), (approved, "allow")]:
        assert (ran.code, ran.err) == (0, ""), ran
        assert answer(ran) == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": "input rewritten by zot's guards: capper",
                "updatedInput": rewritten,
            }
        }
    danger = json.loads((CLAUDE / "PermissionRequest.json").read_text())["tool_input"]
    assert (dialog.code, dialog.err) == (0, ""), dialog
    assert answer(dialog) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": danger | {"timeout": 60000}},
        }
    }


async def observed(log: Path, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events the recorder got, without what zotd adds."""
    with trio.fail_after(TIMEOUT):
        while True:
            lines = log.read_text().splitlines() if log.exists() else []
            events = [json.loads(line) for line in lines]
            events = [e for e in events if e.get("type") == "event"]
            if len(events) >= count:
                break
            await trio.sleep(0.02)
    for e in events:
        del e["type"], e["sequence"]
    return events


async def test_every_event_reaches_an_observer_with_zots_fields(
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
        "PostToolUseFailure", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop",
        "Stop", "SessionEnd",
    ]  # fmt: skip
    ran = {name: await claude(agent, name) for name in names}
    # The recorder adds to the system prompt: Claude Code gets it as context.
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

    def payload(name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads((CLAUDE / f"{name}.json").read_text())
        return found

    common = {"session_id": SESSION, "cwd": str(agent.project)}
    bash = payload("PreToolUse")["tool_input"]
    write = payload("PostToolUseFailure")["tool_input"]
    run_id = "toolu_01JA2B3C4D5E6F7G8H9J0K1L2M"
    explore = {"agent_id": "a3f9c2e1b7d4", "agent_run_id": "a3f9c2e1b7d4", "name": "Explore"}
    expected = [
        {"event": "session_start", "source": "startup"},
        {"event": "user_prompt_submit", "text": "Run the tests and fix what fails"},
        {"event": "tool_call", "tool_id": run_id, "tool_name": "bash", "tool_args": bash},
        {
            "event": "tool_confirmation_requested",
            "tool_id": "",
            "tool_name": "bash",
            "tool_preview": "cd / && rm -rf / --no-preserve-root",
        },
        {
            "event": "tool_result",
            "tool_id": run_id,
            "tool_name": "bash",
            "tool_args": bash,
            "status": "completed",
            "executed": True,
            "result": {
                "content": [
                    {"type": "text", "text": payload("PostToolUse")["tool_response"]["stdout"]}
                ],
                "is_error": False,
            },
        },
        {
            "event": "tool_result",
            "tool_id": "toolu_01NP3Q4R5S6T7U8V9W0X1Y2Z3A",
            "tool_name": "Write",
            "tool_args": write,
            "status": "failed",
            "executed": True,
            "result": {
                "content": [{"type": "text", "text": payload("PostToolUseFailure")["error"]}],
                "is_error": True,
            },
        },
        {
            "event": "pre_compact",
            "trigger": "manual",
            "custom_instructions": "Keep the failing test names",
        },
        {
            "event": "post_compact",
            "status": "completed",
            "trigger": "manual",
            "summary": "The user asked to run the tests; 20 pass.",
        },
        {"event": "subagent_start", **explore},
        {"event": "subagent_stop", **explore, "status": "completed"},
        {"event": "assistant_message", "text": "All 20 tests pass."},
        {"event": "turn_end", "stop": "end_turn"},
        {"event": "session_end", "reason": "shutdown", "claude_reason": "prompt_input_exit"},
    ]
    assert await observed(log, len(expected)) == [e | common for e in expected]


async def test_a_blocked_call_is_reported_as_zot_reports_one(guarded: Agent) -> None:
    log = guarded.paths.home / "recorder.jsonl"
    add_extension(
        guarded.paths.extensions_dir,
        "recorder",
        "--log",
        str(log),
        "--events",
        "tool_call,permission_decision,tool_result",
        script=PROMPT_GUARD,
    )
    async with connect(guarded.paths.socket, cwd=guarded.project) as zot:
        await zot.ext_reload()
    ran = await claude(guarded, "PreToolUse-dangerous")
    assert answer(ran) == deny(DANGEROUS_REASON)
    call = {
        "tool_id": "toolu_01HZX8Q6V2KJ3N4R5T7W9YB2CD",
        "tool_name": "bash",
        "session_id": SESSION,
        "cwd": str(guarded.project),
    }
    args = recorded("pre-tool-use-dangerous")["tool_input"]
    assert await observed(log, 3) == [
        {"event": "tool_call", **call, "tool_args": args},
        {
            "event": "permission_decision",
            **call,
            "decision": "denied",
            "source": "policy",
            "stage": "pre_execution",
            "reason": DANGEROUS_REASON,
        },
        {
            "event": "tool_result",
            **call,
            "tool_args": args,
            "status": "blocked",
            "executed": False,
            "result": {"content": [{"type": "text", "text": DANGEROUS_REASON}], "is_error": True},
        },
    ]


async def test_without_a_daemon_zot_hook_answers_each_event_as_it_may(agent: Agent) -> None:
    pre = await claude(agent, "PreToolUse")
    closed = await claude(agent, "PermissionRequest", "--fail-closed")
    start = await claude(agent, "SessionStart")
    stop = await claude(agent, "Stop", "--fail-closed")
    prefix = "zot hook: zotd is not running"
    assert (pre.code, pre.out) == (1, "") and pre.err.startswith(prefix), pre
    assert pre.err.endswith("; the call is not guarded\n")
    note = closed.err.rstrip("\n")
    assert closed.code == 0 and note.startswith(prefix), closed
    assert answer(closed) == permission_deny(f"{note}; denied (--fail-closed)")
    # The user is told once, at the session's start; nothing holds the agent up.
    assert start.code == 0 and start.err.endswith("; session_start not sent\n"), start
    assert answer(start) == {"systemMessage": start.err.rstrip("\n")}
    assert (stop.code, stop.out) == (0, ""), stop
    assert stop.err.endswith("; assistant_message, turn_end not sent\n")


async def test_zot_hook_refuses_what_it_cannot_answer(agent: Agent) -> None:
    unknown = await run_zot(
        ["hook", "--agent", "cursor"], cwd=agent.project, env=agent.env, stdin=b"{}"
    )
    assert unknown == Ran(
        2, "", "zot hook: unknown agent 'cursor': expected one of claude, codex, gemini\n"
    )
    other = await claude(agent, "Stop", hook_event_name="Notification")
    assert (other.code, other.out) == (1, ""), other
    assert other.err.startswith("zot hook: zot does not answer Claude Code's 'Notification' hooks")
    broken = await run_zot(
        ["hook", "--agent", "claude", "--fail-closed"],
        cwd=agent.project,
        env=agent.env,
        stdin=(HOOKS / "malformed.json").read_bytes(),
    )
    # Not even the event is known: a blocking error is the one safe answer.
    assert (broken.code, broken.out) == (2, ""), broken
    assert broken.err.startswith("zot hook: the payload on stdin is not JSON: ")
    assert broken.err.endswith("; blocked (--fail-closed)\n")
    lacking = await claude(agent, "PermissionRequest", "--fail-closed", tool_input="ls")
    assert lacking.code == 0 and lacking.err.startswith(
        "zot hook: the payload on stdin does not fit"
    )
    assert answer(lacking)["hookSpecificOutput"]["decision"]["behavior"] == "deny"
