"""What handlers return, and how it becomes a frame.

Slash commands return one of :func:`prompt`, :func:`insert`, :func:`display`,
:func:`noop` or :func:`error` (a plain string means :func:`display`), or a
:class:`Panel` to open. Tools return a string, an :class:`Image`, a list of
those, or a :class:`Result` for full control (``is_error``); anything else is
sent as JSON text. Guards return :func:`block` to refuse, :func:`rewrite` or
:func:`replace_text` to change what they were asked about; anything else
allows it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..protocol import extension as ep

# --- slash commands -------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """A panel: a box of text lines the user sees beside the conversation,
    and sends keys to, until it is closed.

    A command returns one to open it (or passes it as ``panel=`` to
    :func:`prompt`, :func:`insert`, :func:`display` or :func:`noop`); a
    ``panel_key`` or ``panel_resize`` handler returns one to redraw it.
    ``id`` is yours to choose: the panel's events carry it. ``lines`` may
    also be one ``str``, split at its newlines.
    """

    id: str
    title: str = ""
    lines: Sequence[str] | str = ()
    footer: str = ""


@dataclass(frozen=True)
class Response:
    """A slash command's answer: ``action`` is prompt, insert, display or noop;
    ``panel``, if set, is opened as well."""

    action: str = "noop"
    text: str = ""
    error: str = ""
    panel: Panel | None = None


def prompt(text: str, *, panel: Panel | None = None) -> Response:
    """Send ``text`` to the model as the user's next message."""
    return Response("prompt", text, panel=panel)


def insert(text: str, *, panel: Panel | None = None) -> Response:
    """Put ``text`` into the user's input box, for them to edit and send."""
    return Response("insert", text, panel=panel)


def display(text: str, *, panel: Panel | None = None) -> Response:
    """Show ``text`` to the user; nothing goes to the model."""
    return Response("display", text, panel=panel)


def noop(*, panel: Panel | None = None) -> Response:
    """Do nothing visible (but open ``panel``, if given)."""
    return Response(panel=panel)


def error(message: str) -> Response:
    """Report a failure to the user."""
    return Response("noop", error=message)


def _lines(lines: Sequence[str] | str) -> list[str]:
    if isinstance(lines, str):
        return lines.splitlines()
    return [line if isinstance(line, str) else str(line) for line in lines]


def panel_spec(panel: Panel) -> ep.PanelSpec:
    """The ``open_panel`` object of a :class:`Panel`."""
    return ep.PanelSpec(
        id=panel.id, title=panel.title, lines=_lines(panel.lines), footer=panel.footer
    )


def command_frame(rid: str, value: Any) -> ep.CommandResponse:
    """The ``command_response`` for a handler's return value."""
    if value is None:
        value = noop()
    elif isinstance(value, str):
        value = display(value)
    elif isinstance(value, Panel):
        value = noop(panel=value)
    if not isinstance(value, Response):
        return ep.CommandResponse(
            id=rid,
            action="noop",
            error=f"the command returned {type(value).__name__}, not a response "
            "(use prompt(), insert(), display(), noop(), error() or a Panel)",
        )
    frame = ep.CommandResponse(id=rid, action=value.action, error=value.error)
    if value.action in ("prompt", "insert", "display"):
        setattr(frame, value.action, value.text)
    if value.panel is not None:
        frame.open_panel = panel_spec(value.panel)
    return frame


def render_frame(panel: Panel) -> ep.PanelRender:
    """The ``panel_render`` that redraws ``panel``."""
    return ep.PanelRender(
        panel_id=panel.id, title=panel.title, lines=_lines(panel.lines), footer=panel.footer
    )


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


@dataclass(frozen=True)
class Rewrite:
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


def intercept_frame(rid: str, value: Any, event: str = "tool_call") -> ep.EventInterceptResponse:
    """The ``event_intercept_response`` for a guard's return value.

    Raises:
        ValueError: a :class:`Rewrite` that does not fit ``event``
            (``rewrite(args)`` is for ``tool_call``, ``replace_text`` for
            ``assistant_message``).
        TypeError: the new arguments are not JSON.
    """
    if isinstance(value, Block):
        return ep.EventInterceptResponse(id=rid, block=True, reason=value.reason)
    frame = ep.EventInterceptResponse(id=rid)
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
