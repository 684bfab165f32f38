"""Codex CLI's hooks in zot's terms: payloads in, zot events out, answers back.

Sans-IO. ``zot hook --agent codex`` (the CLI) reads stdin, talks to zotd and
prints; :data:`ADAPTER` says what a payload means and what to answer.

What Codex sends and reads, from its documentation (the "Hooks" page of the
Codex docs) and the JSON schemas of its hooks crate (``codex-rs/hooks``,
``schema/generated/*.command.{input,output}.schema.json``):

- Hooks are registered in ``hooks.json`` or in ``[hooks]`` tables of
  ``config.toml`` (``[[hooks.PreToolUse]]`` groups with a ``matcher`` regex
  and ``[[hooks.PreToolUse.hooks]]`` entries ``type = "command"``,
  ``command``, ``timeout`` in seconds). A command gets one JSON object on
  stdin.
- Every payload has ``session_id``, ``transcript_path`` (may be null),
  ``cwd``, ``hook_event_name`` and ``model``; the turn-scoped ones also
  ``turn_id`` and ``permission_mode``. Events: ``SessionStart``
  (``source``: startup, resume, clear, compact), ``UserPromptSubmit``
  (``prompt``), ``PreToolUse`` and ``PermissionRequest`` (``tool_name``,
  ``tool_input``, ``tool_use_id``), ``PostToolUse`` (the same and
  ``tool_response``), ``PreCompact`` and ``PostCompact`` (``trigger``),
  ``SubagentStart`` and ``SubagentStop`` (``agent_id``, ``agent_type``),
  ``Stop`` (``stop_hook_active``, ``last_assistant_message``). There is no
  session-end hook.
- Tool names: every shell tool Codex has (``shell``, ``local_shell``,
  ``exec_command`` / unified exec, ``shell_command``) reaches hooks as
  ``Bash`` with ``tool_input`` ``{"command": "..."}``, the command as one
  string; ``apply_patch`` as ``apply_patch`` (the patch in ``command``);
  MCP tools as ``mcp__<server>__<tool>`` with their arguments. ``Bash`` is
  zot's ``bash`` (the same argument); the others keep their names.
- Exit 0 with a JSON object on stdout (or nothing) is an answer; exit 2 with
  a reason on stderr blocks (PreToolUse); any other exit is a failed hook,
  reported, and the call goes on.
- PreToolUse answers ``hookSpecificOutput`` ``{"hookEventName":
  "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason":
  R}`` to block (R is shown to the model), or ``"allow"`` *with*
  ``updatedInput`` to run the call with other input. ``allow`` without
  ``updatedInput`` and ``ask`` are refused as unsupported (the hook counts
  as failed), so a PreToolUse hook cannot approve a call: approvals are
  PermissionRequest's, whose ``hookSpecificOutput.decision`` is
  ``{"behavior": "allow"}`` or ``{"behavior": "deny", "message": M}``
  (``updatedInput`` there is refused, and fails closed).
- SessionStart may add ``hookSpecificOutput.additionalContext``; every event
  takes ``systemMessage`` (shown to the user as a warning).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ..protocol import agent as ap
from .hook_model import Answer, BadPayload, Guard, Hook, Observe

#: Codex's tool names that are zot's built-in tools with the same arguments.
TOOL_NAMES = {"Bash": "bash"}

#: The most characters of a tool's output passed on in a ``tool_result`` event.
MAX_RESULT_TEXT = 16_000


def zot_tool_name(name: str) -> str:
    """The name a zot guard sees for Codex's tool ``name``."""
    return TOOL_NAMES.get(name, name)


class Payload(msgspec.Struct, kw_only=True):
    """The fields every Codex hook payload has that zot reads."""

    hook_event_name: str
    cwd: str = ""
    session_id: str = ""
    turn_id: str = ""


class SessionStart(Payload, kw_only=True):
    source: str = ""


class UserPromptSubmit(Payload, kw_only=True):
    prompt: str


class ToolUse(Payload, kw_only=True):
    """PreToolUse, PermissionRequest, PostToolUse."""

    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str = ""
    tool_response: Any = None


class Compact(Payload, kw_only=True):
    trigger: str = ""


class Subagent(Payload, kw_only=True):
    agent_id: str
    agent_type: str = ""


class Stop(Payload, kw_only=True):
    last_assistant_message: str | None = None


#: A payload Struct (of any agent whose payloads are read with :func:`convert`).
S = TypeVar("S", bound=msgspec.Struct)


def decode(data: bytes) -> dict[str, Any]:
    """The JSON object on stdin.

    Raises:
        BadPayload: empty, not JSON or not an object.
    """
    if not data.strip():
        raise BadPayload("stdin is empty: expected the hook's JSON payload")
    try:
        fields = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise BadPayload(f"the payload on stdin is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise BadPayload("the payload on stdin is not a JSON object")
    return fields


def convert(fields: dict[str, Any], kind: type[S], hook: Hook) -> S:
    """``fields`` as a ``kind``.

    Raises:
        BadPayload: fields that do not fit (with ``hook``, what is known of the event).
    """
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as exc:
        raise BadPayload(f"the payload on stdin does not fit: {exc}", hook) from None


def result_text(value: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A ``tool_result`` event's ``result``: the tool's output as one text block."""
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    else:
        text = msgspec.json.encode(value).decode()
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": text[:MAX_RESULT_TEXT]}],
        "is_error": is_error,
    }
    if len(text) > MAX_RESULT_TEXT:
        result["truncated"] = True
    return result


# --- each event in zot's terms ----------------------------------------------------------


def _hook(p: Payload, *observe: Observe, **more: Any) -> Hook:
    return Hook(
        agent="codex",
        event=p.hook_event_name,
        cwd=p.cwd,
        session_id=p.session_id,
        observe=observe,
        **more,
    )


def _event(event: str, p: Payload, **fields: Any) -> Observe:
    return Observe(event=event, fields=fields | {"session_id": p.session_id})


def _call(p: ToolUse) -> dict[str, Any]:
    return {
        "tool_id": p.tool_use_id,
        "tool_name": zot_tool_name(p.tool_name),
        "tool_args": p.tool_input,
    }


def _guard(p: ToolUse) -> Guard:
    return Guard(
        tool_name=zot_tool_name(p.tool_name), tool_args=p.tool_input, tool_id=p.tool_use_id
    )


def preview(p: ToolUse) -> str:
    """The short preview of a call, as an approval prompt shows it."""
    command = p.tool_input.get("command")
    if p.tool_name == "Bash" and isinstance(command, str):
        return command[:200]
    return f"{p.tool_name} {msgspec.json.encode(p.tool_input).decode()}"[:200]


def _pre_tool_use(p: ToolUse) -> Hook:
    return _hook(p, _event("tool_call", p, **_call(p)), guard=_guard(p), report_block=True)


def _permission_request(p: ToolUse) -> Hook:
    asked = _event(
        "tool_confirmation_requested",
        p,
        tool_id=p.tool_use_id,
        tool_name=zot_tool_name(p.tool_name),
        tool_preview=preview(p),
    )
    return _hook(p, asked, guard=_guard(p), report_block=True)


def _post_tool_use(p: ToolUse) -> Hook:
    done = _event(
        "tool_result",
        p,
        **_call(p),
        status="completed",
        executed=True,
        result=result_text(p.tool_response),
    )
    return _hook(p, done)


def _session_start(p: SessionStart) -> Hook:
    return _hook(p, _event("session_start", p, source=p.source), context=True)


def _user_prompt_submit(p: UserPromptSubmit) -> Hook:
    return _hook(p, _event("user_prompt_submit", p, text=p.prompt))


def _pre_compact(p: Compact) -> Hook:
    return _hook(p, _event("pre_compact", p, trigger=p.trigger))


def _post_compact(p: Compact) -> Hook:
    return _hook(p, _event("post_compact", p, status="completed", trigger=p.trigger))


def _subagent(event: str, **more: Any) -> Callable[[Subagent], Hook]:
    def read(p: Subagent) -> Hook:
        # Codex's agent_id names one run of a subagent: it pairs start and stop.
        fields = {"agent_id": p.agent_id, "agent_run_id": p.agent_id, "name": p.agent_type}
        return _hook(p, _event(event, p, **fields, **more))

    return read


def _stop(p: Stop) -> Hook:
    said: tuple[Observe, ...] = ()
    if p.last_assistant_message:
        said = (_event("assistant_message", p, text=p.last_assistant_message),)
    return _hook(p, *said, _event("turn_end", p, stop="end_turn"))


#: Each Codex hook event zot answers: its payload, and what it is in zot's terms.
READERS: dict[str, tuple[type[Any], Callable[[Any], Hook]]] = {
    "SessionStart": (SessionStart, _session_start),
    "UserPromptSubmit": (UserPromptSubmit, _user_prompt_submit),
    "PreToolUse": (ToolUse, _pre_tool_use),
    "PermissionRequest": (ToolUse, _permission_request),
    "PostToolUse": (ToolUse, _post_tool_use),
    "PreCompact": (Compact, _pre_compact),
    "PostCompact": (Compact, _post_compact),
    "SubagentStart": (Subagent, _subagent("subagent_start")),
    "SubagentStop": (Subagent, _subagent("subagent_stop", status="completed")),
    "Stop": (Stop, _stop),
}

EVENTS = tuple(READERS)

#: The events that put a tool call to the guards.
GUARDED = ("PreToolUse", "PermissionRequest")


def read(data: bytes) -> Hook:
    """The hook in ``data``, of any event in :data:`EVENTS`.

    Raises:
        BadPayload: empty, not JSON, an event zot does not answer, or fields
            that do not fit (then with the event's hook, so that a guarded
            call can be denied).
    """
    fields = decode(data)
    event = fields.get("hook_event_name")
    if not isinstance(event, str):
        raise BadPayload("the payload has no hook_event_name (a string)")
    if event not in READERS:
        raise BadPayload(
            f"zot does not answer Codex's {event!r} hooks "
            f"(it answers {', '.join(EVENTS)}): remove the hook from the settings"
        )
    kind, reader = READERS[event]
    known = Hook(
        agent="codex",
        event=event,
        cwd=cwd if isinstance(cwd := fields.get("cwd"), str) else "",
        guard=Guard(tool_name="", tool_args={}) if event in GUARDED else None,
    )
    hook: Hook = reader(convert(fields, kind, known))
    return hook


# --- answers ------------------------------------------------------------------------------


def deny(reason: str) -> dict[str, Any]:
    """A PreToolUse answer that blocks the call; Codex shows ``reason`` to the model."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def permission(behavior: str, message: str = "") -> dict[str, Any]:
    """A PermissionRequest answer: ``allow``, or ``deny`` with ``message``."""
    decision: dict[str, Any] = {"behavior": behavior}
    if message:
        decision["message"] = message
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


def pre_tool_use_answer(verdict: ap.InterceptData) -> dict[str, Any]:
    """What PreToolUse answers for the guards' verdict.

    A block is ``deny``; a rewrite is ``allow`` with the new input as
    ``updatedInput`` (the one form Codex takes for it: it is no approval,
    Codex's own approval policy still applies to the call as rewritten);
    otherwise no decision (``{}``). Codex has no explicit allow here, so
    ``--approve`` changes nothing.
    """
    if verdict.block:
        return deny(verdict.reason)
    if verdict.args is not None:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "updatedInput": verdict.args,
            }
        }
    return {}


def permission_request_answer(
    verdict: ap.InterceptData, tool_input: dict[str, Any], *, approve: bool
) -> dict[str, Any]:
    """What PermissionRequest answers: a block is ``deny``; a rewrite cannot
    be made there (Codex refuses ``updatedInput``), so it is a ``deny`` that
    says so (PreToolUse rewrites: register it too); otherwise no decision
    (Codex asks the user), or ``allow`` with ``approve``."""
    if verdict.block:
        return permission("deny", verdict.reason)
    if verdict.args is not None and verdict.args != tool_input:
        names = ", ".join(verdict.rewritten_by)
        return permission(
            "deny",
            f"zot's guards rewrote this call ({names}), and an approval cannot rewrite it; "
            "run zot hook on PreToolUse too",
        )
    if approve:
        return permission("allow")
    return {}


def session_context(verdict: ap.InterceptData | None) -> dict[str, Any] | None:
    """SessionStart's answer: what the extensions add to a system prompt, as
    context for the model; None when they add nothing."""
    added = verdict.system_prompt if verdict is not None else ""
    if not isinstance(added, str) or not added.strip():
        return None
    return {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": added.strip()}
    }


class CodexAdapter:
    """Codex CLI's hooks (``zot hook --agent codex``)."""

    name = "codex"
    events = EVENTS

    def read(self, data: bytes) -> Hook:
        return read(data)

    def answer(self, hook: Hook, verdict: ap.InterceptData | None, *, approve: bool) -> Answer:
        if hook.event == "PreToolUse" and verdict is not None:
            return Answer(stdout=pre_tool_use_answer(verdict))
        if hook.event == "PermissionRequest" and verdict is not None and hook.guard is not None:
            return Answer(
                stdout=permission_request_answer(verdict, hook.guard.tool_args, approve=approve)
            )
        if hook.event == "SessionStart":
            return Answer(stdout=session_context(verdict))
        # Nothing for the rest: no context, no block of a prompt or a stop.
        return Answer()

    def unguarded(self, hook: Hook, why: str, *, fail_closed: bool) -> Answer:
        if hook.guard is not None:
            if not fail_closed:
                # A failed hook for Codex: reported, and the call goes on
                # under Codex's own approval policy (never allowed by zot).
                return Answer(exit_code=1, stderr=f"{why}; the call is not guarded")
            reason = f"{why}; denied (--fail-closed)"
            if hook.event == "PermissionRequest":
                return Answer(stdout=permission("deny", reason), stderr=why)
            return Answer(stdout=deny(reason), stderr=why)
        lost = ", ".join(o.event for o in hook.observe) or "nothing"
        note = f"{why}; {lost} not sent"
        if hook.event == "SessionStart":
            return Answer(stdout={"systemMessage": note}, stderr=note)
        return Answer(stderr=note)


ADAPTER = CodexAdapter()
