"""What guards return, and how it becomes an ``event_intercept_response``.

A guard returns :func:`block` to refuse what it was asked about,
:func:`rewrite` (a tool call's arguments) or :func:`replace_text` (an
assistant message's text) to change it, and anything else allows it. The
``before_agent_start`` guard (current zot) returns the new system prompt
instead: a ``str`` replaces it whole (``""`` deletes it), ``None`` keeps it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..protocol.ext_frames import EventInterceptResponse

#: The event whose guard returns a system prompt rather than a verdict.
BEFORE_AGENT_START = "before_agent_start"


class Block(msgspec.Struct, frozen=True):
    """A guard's refusal (see :func:`block`)."""

    reason: str = ""


class Rewrite(msgspec.Struct, frozen=True):
    """A guard's change to what it was asked about (see :func:`rewrite` and
    :func:`replace_text`)."""

    args: dict[str, Any] | None = None
    text: str | None = None


def block(reason: str = "") -> Block:
    """Refuse the tool call (or the turn); ``reason`` is shown to the user."""
    return Block(reason)


def rewrite(args: dict[str, Any]) -> Rewrite:
    """Let the tool call go ahead, with ``args`` as its arguments instead
    (all of them: what ``args`` leaves out, the tool does not get)."""
    if not isinstance(args, dict):
        raise TypeError(f"rewrite() takes the new arguments as a dict, not {type(args).__name__}")
    return Rewrite(args=args)


def replace_text(text: str) -> Rewrite:
    """Let the assistant's message through, shown to the user as ``text``
    instead (``""`` leaves it unchanged)."""
    if not isinstance(text, str):
        raise TypeError(f"replace_text() takes a str, not {type(text).__name__}")
    return Rewrite(text=text)


def intercept_frame(rid: str, value: Any, event: str = "tool_call") -> EventInterceptResponse:
    """The ``event_intercept_response`` for a guard's return value.

    Raises:
        ValueError: a :class:`Rewrite` that does not fit ``event``
            (``rewrite(args)`` is for ``tool_call``, ``replace_text`` for
            ``assistant_message``), or a verdict for ``before_agent_start``.
        TypeError: the new arguments are not JSON; a ``before_agent_start``
            guard returned neither a ``str`` nor ``None``.
    """
    if event == BEFORE_AGENT_START:
        return _system_prompt_frame(rid, value)
    if isinstance(value, Block):
        return EventInterceptResponse(id=rid, block=True, reason=value.reason)
    frame = EventInterceptResponse(id=rid)
    if isinstance(value, Rewrite):
        if value.args is not None:
            if event != "tool_call":
                raise ValueError(f"rewrite(args) changes a tool call, not {event!r}")
            frame.modified_args = msgspec.Raw(msgspec.json.encode(value.args))
        if value.text is not None:
            if event != "assistant_message":
                raise ValueError(f"replace_text() changes an assistant message, not {event!r}")
            frame.replace_text = value.text
    return frame


def _system_prompt_frame(rid: str, value: Any) -> EventInterceptResponse:
    frame = EventInterceptResponse(id=rid)
    if value is None:
        return frame  # no `system_prompt`: the prompt stays as it is
    if isinstance(value, Block | Rewrite):
        raise ValueError(
            "a before_agent_start guard returns the new system prompt (a str) or None, "
            f"not {type(value).__name__}: it cannot block or rewrite"
        )
    if not isinstance(value, str):
        raise TypeError(
            f"a before_agent_start guard returns a str or None, not {type(value).__name__}"
        )
    frame.system_prompt = msgspec.Raw(msgspec.json.encode(value))
    return frame
