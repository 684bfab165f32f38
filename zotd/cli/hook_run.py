"""One run of ``zot hook``, the same for every agent: read, ask zotd, answer.

The agent's adapter (:mod:`zotd.integrations.hook_model`) reads the payload
into a :class:`Hook`; this module joins the workspace of its ``cwd``, asks
the guards (``intercept``) when the hook guards a tool call, or what the
extensions add to a system prompt (``before_agent_start``) when it asks for
context, emits the hook's zot events (``emit_event``), and prints the
adapter's answer, or its answer for when zotd could not be asked.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
from cyclopts import Parameter

from .. import __version__
from ..client import Client, ZotdError, connect
from ..integrations.hook_model import Adapter, Answer, BadPayload, Hook, blocked_events
from ..model.config import ConfigError
from ..protocol import agent as ap
from .common import Where, die, print_json, resolve, run_async, token_for
from .output import printable

#: Seconds ``zot hook`` waits beyond the daemon's own deadlines (joining the
#: workspace: ``ready_grace``; the guards' verdict: ``intercept_timeout``).
SLACK = 2.0


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


def check(opts: HookOptions | None) -> HookOptions:
    """The options, once checked (a usage error exits 2)."""
    o = opts or HookOptions()
    if o.timeout is not None and o.timeout <= 0:
        die("zot hook: --timeout must be a positive number of seconds", code=2)
    return o


class NoAnswer(Exception):
    """zotd could not be asked, or answered with an error; the message says why."""


def _ask(opts: HookOptions, where: Where | None, hook: Hook, cwd: str) -> ap.InterceptData | None:
    """Asks zotd what ``hook`` needs asked and emits its events, all in the time allowed.

    Returns the guards' verdict (or the ``before_agent_start`` reply, with
    ``hook.context``), else None.

    Raises:
        NoAnswer: zotd could not be asked (nor started), did not answer in
            time, or answered the question with an error (never a verdict).
    """
    try:
        paths, config = resolve(where)
    except ConfigError as exc:
        raise NoAnswer(f"bad config file {exc}") from None
    limit = opts.timeout or config.ready_grace + config.intercept_timeout + SLACK

    async def question(zot: Client) -> ap.InterceptData | None:
        guard = hook.guard
        try:
            if guard is not None:
                return await zot.intercept(guard.tool_name, guard.tool_args, tool_id=guard.tool_id)
            if hook.context:
                return await zot.intercept_event(
                    "before_agent_start", system_prompt="", session_id=hook.session_id
                )
        except ZotdError as exc:
            raise NoAnswer(f"zotd could not ask the guards: {exc.message} ({exc.code})") from None
        return None

    async def go() -> ap.InterceptData | None:
        with anyio.fail_after(limit):
            async with connect(
                paths.socket,
                cwd=cwd,
                client=f"zot-hook/{__version__}",
                token=token_for(opts.token, config),
                start=False if opts.no_start else None,
            ) as zot:
                verdict = await question(zot)
                events = hook.observe
                if hook.report_block and hook.guard is not None and verdict is not None:
                    events += blocked_events(hook, verdict)
                for event in events:
                    await zot.emit_event(event.event, **event.fields)
                return verdict

    try:
        return run_async(go)
    except TimeoutError:
        raise NoAnswer(f"zotd did not answer within {limit:g} s") from None
    except ZotdError as exc:
        raise NoAnswer(exc.message) from None


def _print(answer: Answer) -> int:
    if answer.stderr:
        print(printable(answer.stderr, multiline=True), file=sys.stderr)
    if answer.stdout is not None:
        print_json(answer.stdout)
    return answer.exit_code


def _unreadable(adapter: Adapter, exc: BadPayload, note: str, *, fail_closed: bool) -> Answer:
    """The answer to a payload the adapter cannot read."""
    hook = exc.hook
    if hook is not None and hook.guard is not None:
        return adapter.unguarded(hook, note, fail_closed=fail_closed)
    if hook is None and fail_closed:
        # Not even the event is known: a blocking error (exit 2) is the one
        # answer every agent takes as "do not go on".
        return Answer(exit_code=2, stderr=f"{note}; blocked (--fail-closed)")
    return Answer(exit_code=1, stderr=note)


def run(
    adapter: Adapter,
    data: bytes,
    *,
    prefix: str,
    fail_closed: bool,
    approve: bool,
    opts: HookOptions,
    where: Where | None,
) -> int:
    """Answers the hook in ``data`` with ``adapter``; returns the exit code.

    ``prefix`` starts every message (``zot hook``). A payload that cannot be
    read is an error (exit 1; a guarded call's is answered as when zotd
    cannot be asked); zotd that cannot be asked is the adapter's
    :meth:`~Adapter.unguarded` answer.
    """
    try:
        hook = adapter.read(data)
    except BadPayload as exc:
        note = f"{prefix}: {exc}"
        return _print(_unreadable(adapter, exc, note, fail_closed=fail_closed))
    cwd = str(opts.cwd) if opts.cwd is not None else hook.cwd
    if not cwd:
        bad = BadPayload("the payload has no cwd: pass --cwd", hook)
        note = f"{prefix}: {bad}"
        return _print(_unreadable(adapter, bad, note, fail_closed=fail_closed))
    try:
        verdict = _ask(opts, where, hook, cwd)
    except NoAnswer as exc:
        why = str(exc)
    except Exception as exc:
        # A bug must not open a guard that was asked to stay closed.
        if hook.guard is None or not fail_closed:
            raise
        why = f"internal error: {exc!r}"
    else:
        return _print(adapter.answer(hook, verdict, approve=approve))
    note = f"{prefix}: {why}"
    return _print(adapter.unguarded(hook, note, fail_closed=fail_closed))
