"""Claude Code's hooks in zot's terms: payloads in, zot events out, answers back.

Sans-IO: plain functions over bytes and Structs. ``zot hook`` (the CLI) reads
stdin, talks to zotd and prints; this module says what a payload means and
what to answer.

Claude Code runs a command at points of its agent loop with a JSON payload
on stdin (``session_id``, ``cwd``, ``hook_event_name`` and the event's own
fields), and reads its answer from the exit code and stdout. Its ``Bash`` is
zot's ``bash`` (same argument, ``command``); other tools keep their names.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from ..protocol import agent as ap

#: Claude Code's tools that are zot's built-in ones under another name, with
#: the same arguments. Other tools are passed on under their own names.
TOOL_NAMES = {"Bash": "bash"}


def zot_tool_name(name: str) -> str:
    """The name a zot guard sees for the agent's tool ``name``."""
    return TOOL_NAMES.get(name, name)


class Payload(msgspec.Struct, kw_only=True):
    """The fields every hook payload has (others are ignored)."""

    hook_event_name: str
    cwd: str = ""
    session_id: str = ""


class SessionStart(Payload, kw_only=True):
    """A SessionStart payload."""

    source: str = ""


class ToolUse(Payload, kw_only=True):
    """A PreToolUse, PostToolUse or PostToolUseFailure payload."""

    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str = ""


P = TypeVar("P", bound=Payload)


class BadPayload(Exception):
    """The bytes are not a payload of the expected event; the message says why."""


def parse(data: bytes, kind: type[P], events: tuple[str, ...]) -> P:
    """The payload in ``data``, of one of ``events``.

    Raises:
        BadPayload: empty, not JSON, not an object, another event, or fields that do not fit.
    """
    if not data.strip():
        raise BadPayload("stdin is empty: expected the hook's JSON payload")
    try:
        fields = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise BadPayload(f"the payload on stdin is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise BadPayload("the payload on stdin is not a JSON object")
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
    try:
        return msgspec.convert(fields, kind)
    except msgspec.ValidationError as exc:
        raise BadPayload(f"the payload on stdin does not fit: {exc}") from None


def decision(decision: str, reason: str) -> dict[str, Any]:
    """A PreToolUse answer carrying a permission decision."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def refusal(code: str, message: str) -> str:
    """Why there is no verdict, when zotd answered ``intercept`` with an error.

    Such an answer is never a verdict: the caller denies the call or leaves
    it unguarded (a non-blocking error), never allows it.
    """
    return f"zotd could not ask the guards: {message} ({code})"


def pre_tool_use_answer(verdict: ap.InterceptData, *, approve: bool) -> dict[str, Any]:
    """What PreToolUse answers for the guards' verdict.

    A block is ``deny`` with the guard's reason; arguments a guard rewrote
    are ``ask`` (``allow`` with ``approve``) with the new input as
    ``updatedInput``, so the user sees the call as it will run; otherwise
    no decision (``{}``: the agent's own permission rules apply), or
    ``allow`` with ``approve``.
    """
    if verdict.block:
        return decision("deny", verdict.reason)
    if verdict.args is not None:
        answer = decision(
            "allow" if approve else "ask",
            f"input rewritten by zot's guards: {', '.join(verdict.rewritten_by)}",
        )
        answer["hookSpecificOutput"]["updatedInput"] = verdict.args
        return answer
    if approve:
        return decision("allow", "no guard of zot objects")
    return {}


def session_start_event(p: SessionStart) -> dict[str, Any]:
    """The fields of zot's ``session_start`` event for a SessionStart payload."""
    return {"session_id": p.session_id, "source": p.source}


def tool_call_event(p: ToolUse) -> dict[str, Any]:
    """The fields of zot's ``tool_call`` event for a tool call that ran (PostToolUse)."""
    return {
        "tool_id": p.tool_use_id,
        "tool_name": zot_tool_name(p.tool_name),
        "tool_args": p.tool_input,
        "session_id": p.session_id,
    }


def turn_end_event(p: Payload) -> dict[str, Any]:
    """The fields of zot's ``turn_end`` event for a Stop payload (the agent has answered)."""
    return {"stop": "end_turn", "session_id": p.session_id}
