"""``zot hook ...``: zot's guards and lifecycle events for other agents, through their hooks.

An agent (Claude Code, Codex CLI, Gemini CLI) runs a command at points of
its agent loop, with a JSON payload on stdin, and reads its answer from the
exit code and stdout.

- ``zot hook [--agent NAME]`` answers every hook event of that agent that
  maps onto zot: a tool call is put to the guards of the workspace of the
  payload's ``cwd`` (``intercept``), and what happened is emitted as zot's
  lifecycle events (``emit_event``); the answer is in the agent's format.
  The agent's adapter (:mod:`zotd.integrations.hook_agents`) says what each
  payload means and what to answer; :mod:`.hook_run` does the rest.
- ``zot hook pre-tool-use``, ``session-start``, ``post-tool-use`` and
  ``stop`` are the first, Claude Code only, commands (one per hook), kept
  as they were: routes through the same run, with adapters of their own
  (:mod:`zotd.integrations.claude_legacy`).

Like every ``zot`` command, a hook starts zotd if none answers (not with
``--no-start``). Without a verdict, a guarded call fails open (a
non-blocking error for the agent; never an allow), or is denied with
``--fail-closed``. The design, the formats and the failure modes are in
docs/integrations.md.
"""

from __future__ import annotations

import sys

from cyclopts import App

from ..integrations import hook_agents
from ..integrations.claude_legacy import ROUTES
from .common import Where, die
from .hook_run import HookOptions, check, run

app = App(name="hook", help="Answer other agents' hooks with zot's guards and events.")


def _route(
    command: str,
    opts: HookOptions | None,
    where: Where | None,
    *,
    fail_closed: bool = False,
    approve: bool = False,
) -> int:
    o = check(opts)
    return run(
        ROUTES[command],
        sys.stdin.buffer.read(),
        prefix=f"zot hook {command}",
        fail_closed=fail_closed,
        approve=approve,
        opts=o,
        where=where,
    )


@app.default
def hook(
    *,
    agent: str = "claude",
    fail_closed: bool = False,
    approve: bool = False,
    opts: HookOptions | None = None,
    where: Where | None = None,
) -> int:
    """Answer one hook of an agent (any event zot maps) with zot's guards and events.

    Reads the hook's JSON payload on stdin and answers as the agent reads
    it. A tool call about to run (Claude Code's PreToolUse and
    PermissionRequest) is put to the workspace's guards: a block is a deny
    with the guard's reason, a rewrite is the new input; other events are
    emitted as zot's lifecycle events (session_start, user_prompt_submit,
    tool_result, turn_end, ...) for the extensions that observe them. The
    events and answers of each agent are in docs/integrations.md.

    Without a verdict (an unreadable payload, zotd not running or silent,
    or answering with an error), prints why on stderr and exits 1, which
    the agent takes as a non-blocking error: the call is not guarded, but
    never approved (not even with --approve). With --fail-closed, denies
    it instead. A lost lifecycle event is noted and never holds the agent up.

    Args:
        agent: Whose hook it is: claude, codex or gemini.
        fail_closed: Deny a tool call when zot's guards cannot be asked.
        approve: When no guard objects, answer "allow", which also skips the
            agent's permission prompt, instead of no decision.
    """
    o = check(opts)
    try:
        adapter = hook_agents.adapter(agent)
    except KeyError as exc:
        die(f"zot hook: {exc.args[0]}", code=2)
    except ImportError as exc:
        die(f"zot hook: the {agent} adapter is not available ({exc})", code=2)
    return run(
        adapter,
        sys.stdin.buffer.read(),
        prefix="zot hook",
        fail_closed=fail_closed,
        approve=approve,
        opts=o,
        where=where,
    )


@app.command(name="pre-tool-use")
def pre_tool_use(
    *,
    fail_closed: bool = False,
    approve: bool = False,
    opts: HookOptions | None = None,
    where: Where | None = None,
) -> int:
    """Ask zot's guards about a tool call (a PreToolUse hook): deny it, or let it be.

    Reads the hook's payload on stdin and prints the answer as JSON on stdout:
    a guard's block is a "deny" decision with the guard's reason; arguments
    a guard rewrote are an "ask" decision (the user sees the call as it will
    run) with the new input as "updatedInput"; otherwise "{}" (no decision:
    the agent's own permission rules apply). Exits 0.

    Without a verdict (an unreadable payload, zotd not running or silent,
    or zotd answering with an error, such as a call too big for the
    guards' frames), prints why on stderr and exits 1, which the agent
    takes as a non-blocking error: the call is not guarded, but never
    approved (not even with --approve). With --fail-closed, denies it
    instead (exit 0). `zot hook --agent claude` does the same, and answers
    every other hook too.

    Args:
        fail_closed: Deny the call when zot's guards cannot be asked.
        approve: When no guard blocks, answer "allow", which also skips the
            agent's permission prompt, instead of no decision (or "ask").
    """
    return _route("pre-tool-use", opts, where, fail_closed=fail_closed, approve=approve)


@app.command(name="session-start")
def session_start(*, opts: HookOptions | None = None, where: Where | None = None) -> int:
    """Forward a SessionStart hook as zot's session_start event.

    The event carries the payload's session_id and source (startup, resume,
    clear, compact). Prints nothing; exits 0, also when zotd is not running
    (with a note on stderr); 1 if the payload cannot be read.
    """
    return _route("session-start", opts, where)


@app.command(name="post-tool-use")
def post_tool_use(*, opts: HookOptions | None = None, where: Where | None = None) -> int:
    """Forward a PostToolUse hook as zot's tool_call event: a tool call that ran.

    The event carries tool_id (the payload's tool_use_id), tool_name (Bash
    as bash) and tool_args (tool_input), and session_id; not the tool's
    response (`zot hook --agent claude` sends it, as tool_result). Also
    takes PostToolUseFailure payloads. Prints nothing; exits 0, also when
    zotd is not running; 1 if the payload cannot be read.
    """
    return _route("post-tool-use", opts, where)


@app.command
def stop(*, opts: HookOptions | None = None, where: Where | None = None) -> int:
    """Forward a Stop hook (the agent has answered) as zot's turn_end event.

    The event is {"stop": "end_turn", "session_id": ...}. Prints nothing,
    so the agent stops as it meant to; exits 0, also when zotd is not
    running; 1 if the payload cannot be read.
    """
    return _route("stop", opts, where)
