"""What handlers return, and how it becomes a frame.

Slash commands return one of :func:`prompt`, :func:`insert`, :func:`display`,
:func:`noop` or :func:`error` (a plain string means :func:`display`). Tools
return a string, an :class:`Image`, a list of those, or a :class:`Result`
for full control (``is_error``); anything else is sent as JSON text. Guards
return :func:`block` to refuse a tool call; anything else allows it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..protocol import extension as ep

# --- slash commands -------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """A slash command's answer: ``action`` is prompt, insert, display or noop."""

    action: str = "noop"
    text: str = ""
    error: str = ""


def prompt(text: str) -> Response:
    """Send ``text`` to the model as the user's next message."""
    return Response("prompt", text)


def insert(text: str) -> Response:
    """Put ``text`` into the user's input box, for them to edit and send."""
    return Response("insert", text)


def display(text: str) -> Response:
    """Show ``text`` to the user; nothing goes to the model."""
    return Response("display", text)


def noop() -> Response:
    """Do nothing visible."""
    return Response()


def error(message: str) -> Response:
    """Report a failure to the user."""
    return Response("noop", error=message)


def command_frame(rid: str, value: Any) -> ep.CommandResponse:
    """The ``command_response`` for a handler's return value."""
    if value is None:
        value = noop()
    elif isinstance(value, str):
        value = display(value)
    if not isinstance(value, Response):
        return ep.CommandResponse(
            id=rid,
            action="noop",
            error=f"the command returned {type(value).__name__}, not a response "
            "(use prompt(), insert(), display(), noop() or error())",
        )
    fields = {value.action: value.text} if value.action in ("prompt", "insert", "display") else {}
    return ep.CommandResponse(id=rid, action=value.action, error=value.error, **fields)


# --- tools ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    """An image for the model: raw bytes and their MIME type (base64 is done for you)."""

    data: bytes
    mime_type: str = "image/png"


@dataclass(frozen=True)
class Result:
    """A tool's result in full: its blocks, and whether it reports an error."""

    content: list[str | Image] | str | Image = field(default_factory=list)
    is_error: bool = False


def tool_error(message: str) -> Result:
    """A result that tells the model the call failed, and why."""
    return Result([message], is_error=True)


def _block(item: Any) -> ep.Block:
    if isinstance(item, str):
        return ep.TextBlock(item)
    if isinstance(item, Image):
        return ep.ImageBlock(mime_type=item.mime_type, data=base64.b64encode(item.data).decode())
    return ep.TextBlock(msgspec.json.encode(item).decode())


def tool_frame(rid: str, value: Any) -> ep.ToolResult:
    """The ``tool_result`` for a handler's return value."""
    if isinstance(value, Result):
        items = [value.content] if isinstance(value.content, str | Image) else value.content
        return ep.ToolResult(id=rid, content=[_block(i) for i in items], is_error=value.is_error)
    if value is None:
        return ep.ToolResult(id=rid, content=[])
    if isinstance(value, list | tuple):
        return ep.ToolResult(id=rid, content=[_block(i) for i in value])
    return ep.ToolResult(id=rid, content=[_block(value)])


# --- guards --------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """A guard's refusal (see :func:`block`)."""

    reason: str = ""


def block(reason: str = "") -> Block:
    """Refuse the tool call; ``reason`` is shown to the user."""
    return Block(reason)


def intercept_frame(rid: str, value: Any) -> ep.EventInterceptResponse:
    """The ``event_intercept_response`` for a guard's return value."""
    if isinstance(value, Block):
        return ep.EventInterceptResponse(id=rid, block=True, reason=value.reason)
    return ep.EventInterceptResponse(id=rid, block=False)
