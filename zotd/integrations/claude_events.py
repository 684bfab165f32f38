"""Claude Code's hook payloads, read into zot's terms (a :class:`Hook`).

Sans-IO. Every payload has ``session_id``, ``transcript_path``, ``cwd`` and
``hook_event_name``, plus fields of its event; the fields zot has no use for
are ignored. :func:`read` maps each event onto what zot does at the same
point of its own agent loop: a tool call put to the guards, and the
lifecycle events zot's extensions observe (``session_start``,
``user_prompt_submit``, ``tool_call``, ``tool_result``, ...), with the
fields zot gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from .hook_model import BadPayload, Guard, Hook, Observe

#: Claude Code's tools that are zot's built-in ones under another name, with
#: the same arguments. Other tools are passed on under their own names.
TOOL_NAMES = {"Bash": "bash"}

#: The most characters of a tool's output or error passed on in a
#: ``tool_result`` event (``truncated`` says when it was cut), well within a
#: frame.
MAX_RESULT_TEXT = 16_000

#: Claude Code's SessionEnd reasons that are zot's ``session_switch`` (a new
#: session follows); every other reason is a ``shutdown``.
SWITCHES = {"clear"}


def zot_tool_name(name: str) -> str:
    """The name a zot guard sees for the agent's tool ``name``."""
    return TOOL_NAMES.get(name, name)


class Payload(msgspec.Struct, kw_only=True):
    """The fields every hook payload has (others are ignored)."""

    hook_event_name: str
    cwd: str = ""
    session_id: str = ""


class SessionStart(Payload, kw_only=True):
    """A SessionStart payload: ``source`` is startup, resume, clear or compact."""

    source: str = ""


class SessionEnd(Payload, kw_only=True):
    """A SessionEnd payload: ``reason`` is clear, logout, prompt_input_exit, other..."""

    reason: str = ""


class UserPromptSubmit(Payload, kw_only=True):
    """A UserPromptSubmit payload."""

    prompt: str


class ToolUse(Payload, kw_only=True):
    """A PreToolUse, PermissionRequest, PostToolUse or PostToolUseFailure payload."""

    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str = ""
    #: PostToolUse: what the tool gave back (its shape is the tool's).
    tool_response: Any = None
    #: PostToolUseFailure: why the call failed, and whether the user interrupted it.
    error: str = ""
    is_interrupt: bool = False


class Compact(Payload, kw_only=True):
    """A PreCompact or PostCompact payload: ``trigger`` is manual or auto."""

    trigger: str = ""
    custom_instructions: str | None = None
    compact_summary: str | None = None


class Subagent(Payload, kw_only=True):
    """A SubagentStart or SubagentStop payload."""

    agent_id: str
    agent_type: str = ""


class Stop(Payload, kw_only=True):
    """A Stop payload."""

    last_assistant_message: str | None = None


P = TypeVar("P", bound=Payload)


def parse(data: bytes, kind: type[P], events: tuple[str, ...]) -> P:
    """The payload in ``data``, of one of ``events``.

    Raises:
        BadPayload: empty, not JSON, not an object, another event, or fields that do not fit.
    """
    fields = _object(data)
    # The event first: a payload of another event is a hook registered
    # under the wrong one, whatever fields it lacks.
    event = fields.get("hook_event_name")
    expected = " or ".join(repr(e) for e in events)
    if event is None:
        raise BadPayload(f"the payload has no hook_event_name (expected {expected})")
    if event not in events:
        raise BadPayload(
            f"the payload is for hook_event_name {event!r}, not {expected} "
            "(is the hook registered under the right event?)"
        )
    return _convert(fields, kind)


def _object(data: bytes) -> dict[str, Any]:
    if not data.strip():
        raise BadPayload("stdin is empty: expected the hook's JSON payload")
    try:
        fields = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise BadPayload(f"the payload on stdin is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise BadPayload("the payload on stdin is not a JSON object")
    return fields


def _convert(fields: dict[str, Any], kind: type[P], hook: Hook | None = None) -> P:
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as exc:
        raise BadPayload(f"the payload on stdin does not fit: {exc}", hook) from None


# --- each event in zot's terms ------------------------------------------------------------


def _hook(p: Payload, *observe: Observe, **more: Any) -> Hook:
    return Hook(
        agent="claude",
        event=p.hook_event_name,
        cwd=p.cwd,
        session_id=p.session_id,
        observe=observe,
        **more,
    )


def _event(event: str, p: Payload, **fields: Any) -> Observe:
    return Observe(event=event, fields=fields | {"session_id": p.session_id})


def _guard(p: ToolUse) -> Guard:
    return Guard(
        tool_name=zot_tool_name(p.tool_name), tool_args=p.tool_input, tool_id=p.tool_use_id
    )


def _call(p: ToolUse) -> dict[str, Any]:
    return {
        "tool_id": p.tool_use_id,
        "tool_name": zot_tool_name(p.tool_name),
        "tool_args": p.tool_input,
    }


def _text_result(value: Any, *, is_error: bool) -> dict[str, Any]:
    """A ``tool_result`` event's ``result``: the output as one text block."""
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    elif isinstance(value, dict) and isinstance(value.get("stdout"), str):
        # Bash: its output, then its error output.
        text = "\n".join(s for s in (value["stdout"], value.get("stderr")) if s)
    else:
        text = msgspec.json.encode(value).decode()
    result: dict[str, Any] = {"content": [{"type": "text", "text": text[:MAX_RESULT_TEXT]}]}
    result["is_error"] = is_error
    if len(text) > MAX_RESULT_TEXT:
        result["truncated"] = True
    return result


def preview(p: ToolUse) -> str:
    """The short preview of a call, as a permission dialog would show it."""
    command = p.tool_input.get("command")
    if p.tool_name == "Bash" and isinstance(command, str):
        return command[:200]
    return f"{p.tool_name} {msgspec.json.encode(p.tool_input).decode()}"[:200]


def _pre_tool_use(p: ToolUse) -> Hook:
    # zot emits tool_call for the model's proposal (before any rewrite).
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
    result = _text_result(p.tool_response, is_error=False)
    done = _event("tool_result", p, **_call(p), status="completed", executed=True, result=result)
    return _hook(p, done)


def _post_tool_use_failure(p: ToolUse) -> Hook:
    status = "cancelled" if p.is_interrupt else "failed"
    result = _text_result(p.error, is_error=True)
    failed = _event("tool_result", p, **_call(p), status=status, executed=True, result=result)
    return _hook(p, failed)


def _user_prompt_submit(p: UserPromptSubmit) -> Hook:
    return _hook(p, _event("user_prompt_submit", p, text=p.prompt))


def _session_start(p: SessionStart) -> Hook:
    return _hook(p, _event("session_start", p, source=p.source), context=True)


def _session_end(p: SessionEnd) -> Hook:
    reason = "session_switch" if p.reason in SWITCHES else "shutdown"
    return _hook(p, _event("session_end", p, reason=reason, claude_reason=p.reason))


def _pre_compact(p: Compact) -> Hook:
    fields: dict[str, Any] = {"trigger": p.trigger}
    if p.custom_instructions:
        fields["custom_instructions"] = p.custom_instructions
    return _hook(p, _event("pre_compact", p, **fields))


def _post_compact(p: Compact) -> Hook:
    fields: dict[str, Any] = {"status": "completed", "trigger": p.trigger}
    if p.compact_summary is not None:
        fields["summary"] = p.compact_summary
    return _hook(p, _event("post_compact", p, **fields))


def _subagent(event: str, **more: Any) -> Callable[[Subagent], Hook]:
    def read(p: Subagent) -> Hook:
        # Claude Code's agent_id names one run of a subagent: it pairs
        # start and stop, as zot's agent_run_id does.
        fields = {"agent_id": p.agent_id, "agent_run_id": p.agent_id, "name": p.agent_type}
        return _hook(p, _event(event, p, **fields, **more))

    return read


def _stop(p: Stop) -> Hook:
    said: tuple[Observe, ...] = ()
    if p.last_assistant_message:
        said = (_event("assistant_message", p, text=p.last_assistant_message),)
    return _hook(p, *said, _event("turn_end", p, stop="end_turn"))


#: Each event Claude Code has a hook for that zot answers: its payload, and
#: what it is in zot's terms.
READERS: dict[str, tuple[type[Any], Callable[[Any], Hook]]] = {
    "SessionStart": (SessionStart, _session_start),
    "UserPromptSubmit": (UserPromptSubmit, _user_prompt_submit),
    "PreToolUse": (ToolUse, _pre_tool_use),
    "PermissionRequest": (ToolUse, _permission_request),
    "PostToolUse": (ToolUse, _post_tool_use),
    "PostToolUseFailure": (ToolUse, _post_tool_use_failure),
    "PreCompact": (Compact, _pre_compact),
    "PostCompact": (Compact, _post_compact),
    "SubagentStart": (Subagent, _subagent("subagent_start")),
    "SubagentStop": (Subagent, _subagent("subagent_stop", status="completed")),
    "Stop": (Stop, _stop),
    "SessionEnd": (SessionEnd, _session_end),
}

#: The events, in the order of a session.
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
    fields = _object(data)
    event = fields.get("hook_event_name")
    if not isinstance(event, str):
        raise BadPayload("the payload has no hook_event_name (a string)")
    if event not in READERS:
        raise BadPayload(
            f"zot does not answer Claude Code's {event!r} hooks "
            f"(it answers {', '.join(EVENTS)}): remove the hook from the settings"
        )
    kind, reader = READERS[event]
    known = Hook(
        agent="claude",
        event=event,
        cwd=cwd if isinstance(cwd := fields.get("cwd"), str) else "",
        guard=Guard(tool_name="", tool_args={}) if event in GUARDED else None,
    )
    return reader(_convert(fields, kind, known))
