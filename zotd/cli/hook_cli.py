"""``zot hook ...``: zot's guards and lifecycle events for other agents, through their hooks.

Claude Code runs a command at points of its agent loop, with a JSON payload
on stdin (``session_id``, ``cwd``, ``hook_event_name`` and the event's own
fields), and reads its answer from the exit code and stdout.

- ``zot hook pre-tool-use`` asks the guards of the workspace of the payload's
  ``cwd`` (``intercept``) about the tool call and answers with a permission
  decision: ``deny`` with the guard's reason, or no decision at all (Claude
  Code's own permission rules then apply), or ``allow`` with ``--approve``.
- ``zot hook session-start``, ``post-tool-use`` and ``stop`` forward what
  happened as the lifecycle events ``session_start``, ``tool_call`` and
  ``turn_end``, print nothing and never hold the agent up.

Claude Code's ``Bash`` is zot's ``bash`` (same argument, ``command``); other
tools keep their names. Like every ``zot`` command, a hook starts zotd if none
answers (not with ``--no-start``). Without a verdict, ``pre-tool-use`` fails
open (exit 1, a non-blocking error for Claude Code; never ``allow``), or
denies with ``--fail-closed``. The design, the formats and the failure modes are in
docs/integrations.md.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
from cyclopts import App, Parameter

from .. import __version__
from ..client import Client, ZotdError, connect
from ..integrations import claude_hooks as hooks
from ..integrations.claude_hooks import P
from ..model.config import ConfigError
from ..protocol import agent as ap
from .common import Where, die, print_json, resolve, run_async, token_for
from .output import printable

app = App(name="hook", help="Answer other agents' hooks with zot's guards and events.")

T = TypeVar("T")

#: Seconds ``zot hook`` waits beyond the daemon's own deadlines (joining the
#: workspace: ``ready_grace``; the guards' verdict: ``intercept_timeout``).
SLACK = 2.0


class _NoAnswer(Exception):
    """The hook could not be answered from zot; the message says why."""


class _BadPayload(_NoAnswer):
    """stdin does not hold a payload of the expected event (or no cwd to join)."""


class _Unreachable(_NoAnswer):
    """zotd could not be asked: not running, silent, refusing, or a bad config."""


class _Refused(_NoAnswer):
    """zotd was asked but answered with an error, not a verdict (the event
    would not fit in a guard's frame, say): never taken as an allow."""


def _read(kind: type[P], events: tuple[str, ...]) -> P:
    """The payload on stdin, of one of ``events``."""
    try:
        return hooks.parse(sys.stdin.buffer.read(), kind, events)
    except hooks.BadPayload as exc:
        raise _BadPayload(str(exc)) from None


# --- talking to zotd --------------------------------------------------------------------


@Parameter(name="*")
@dataclass
class HookOptions:
    """Options every ``zot hook`` command takes."""

    cwd: Path | None = None
    """The project directory (workspace) [default: the payload's cwd]."""

    token: str | None = None
    """The daemon's token, if it has one [default: $ZOTD_TOKEN, else token in zotd.toml]."""

    timeout: float | None = None
    """Seconds to wait for zotd in all [default: ready_grace + intercept_timeout + 2, so 10]."""

    no_start: bool = False
    """Do not start the daemon if none is running [default: start it, unless $ZOTD_NO_AUTOSTART=1]."""


def _talk(
    opts: HookOptions,
    where: Where | None,
    payload: hooks.Payload,
    body: Callable[[Client], Awaitable[T]],
) -> T:
    """Joins the workspace and runs ``body``, all within the time allowed.

    Raises:
        _BadPayload: no workspace to join.
        _Unreachable: zotd could not be asked (nor started), or did not answer in time.
    """
    cwd = str(opts.cwd) if opts.cwd is not None else payload.cwd
    if not cwd:
        raise _BadPayload("the payload has no cwd: pass --cwd")
    try:
        paths, config = resolve(where)
    except ConfigError as exc:
        raise _Unreachable(f"bad config file {exc}") from None
    path = paths.socket
    limit = opts.timeout or config.ready_grace + config.intercept_timeout + SLACK

    async def go() -> T:
        with anyio.fail_after(limit):
            async with connect(
                path,
                cwd=cwd,
                client=f"zot-hook/{__version__}",
                token=token_for(opts.token, config),
                start=False if opts.no_start else None,
            ) as zot:
                return await body(zot)

    try:
        return run_async(go)
    except TimeoutError:
        raise _Unreachable(f"zotd did not answer within {limit:g} s") from None
    except ZotdError as exc:
        raise _Unreachable(exc.message) from None


def _check(opts: HookOptions | None) -> HookOptions:
    o = opts or HookOptions()
    if o.timeout is not None and o.timeout <= 0:
        die("zot hook: --timeout must be a positive number of seconds", code=2)
    return o


# --- the commands -----------------------------------------------------------------------


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
    instead (exit 0).

    Args:
        fail_closed: Deny the call when zot's guards cannot be asked.
        approve: When no guard blocks, answer "allow", which also skips the
            agent's permission prompt, instead of no decision (or "ask").
    """
    o = _check(opts)
    try:
        payload = _read(hooks.ToolUse, ("PreToolUse",))

        async def ask(zot: Client) -> ap.InterceptData:
            try:
                return await zot.intercept(
                    hooks.zot_tool_name(payload.tool_name),
                    payload.tool_input,
                    tool_id=payload.tool_use_id,
                )
            except ZotdError as exc:
                raise _Refused(hooks.refusal(exc.code, exc.message)) from None

        verdict = _talk(o, where, payload, ask)
    except _NoAnswer as exc:
        why = str(exc)
    except Exception as exc:
        # A bug must not open a guard that was asked to stay closed.
        if not fail_closed:
            raise
        why = f"internal error: {exc!r}"
    else:
        print_json(hooks.pre_tool_use_answer(verdict, approve=approve))
        return 0
    note = printable(f"zot hook pre-tool-use: {why}", multiline=True)
    if fail_closed:
        print(note, file=sys.stderr)
        print_json(hooks.decision("deny", f"{note}; denied (--fail-closed)"))
        return 0
    print(f"{note}; the call is not guarded", file=sys.stderr)
    return 1


def _forward(
    kind: type[P],
    events: tuple[str, ...],
    command: str,
    event: str,
    fields: Callable[[P], dict[str, Any]],
    opts: HookOptions | None,
    where: Where | None,
) -> int:
    """Reads a payload and emits ``event`` with ``fields(payload)``; prints nothing.

    An unreadable payload exits 1; a daemon that cannot be reached exits 0.
    """
    o = _check(opts)
    try:
        payload = _read(kind, events)
    except _BadPayload as exc:
        print(f"zot hook {command}: {exc}", file=sys.stderr)
        return 1

    async def emit(zot: Client) -> list[str]:
        return await zot.emit_event(event, **fields(payload))

    try:
        _talk(o, where, payload, emit)
    except _NoAnswer as exc:
        print(
            printable(f"zot hook {command}: {exc}; {event} not sent", multiline=True),
            file=sys.stderr,
        )
        return 1 if isinstance(exc, _BadPayload) else 0
    return 0


@app.command(name="session-start")
def session_start(*, opts: HookOptions | None = None, where: Where | None = None) -> int:
    """Forward a SessionStart hook as zot's session_start event.

    The event carries the payload's session_id and source (startup, resume,
    clear, compact). Prints nothing; exits 0, also when zotd is not running
    (with a note on stderr); 1 if the payload cannot be read.
    """
    return _forward(
        hooks.SessionStart,
        ("SessionStart",),
        "session-start",
        "session_start",
        hooks.session_start_event,
        opts,
        where,
    )


@app.command(name="post-tool-use")
def post_tool_use(*, opts: HookOptions | None = None, where: Where | None = None) -> int:
    """Forward a PostToolUse hook as zot's tool_call event: a tool call that ran.

    The event carries tool_id (the payload's tool_use_id), tool_name (Bash
    as bash) and tool_args (tool_input), and session_id; not the tool's
    response. Also takes PostToolUseFailure payloads. Prints nothing; exits
    0, also when zotd is not running; 1 if the payload cannot be read.
    """
    return _forward(
        hooks.ToolUse,
        ("PostToolUse", "PostToolUseFailure"),
        "post-tool-use",
        "tool_call",
        hooks.tool_call_event,
        opts,
        where,
    )


@app.command
def stop(*, opts: HookOptions | None = None, where: Where | None = None) -> int:
    """Forward a Stop hook (the agent has answered) as zot's turn_end event.

    The event is {"stop": "end_turn", "session_id": ...}. Prints nothing,
    so the agent stops as it meant to; exits 0, also when zotd is not
    running; 1 if the payload cannot be read.
    """
    return _forward(
        hooks.Payload,
        ("Stop",),
        "stop",
        "turn_end",
        hooks.turn_end_event,
        opts,
        where,
    )
