"""What command and tool handlers return, and how it becomes a frame.

Slash commands return one of :func:`prompt`, :func:`insert`, :func:`display`,
:func:`tool_prompt`, :func:`noop` or :func:`error` (a plain string means
:func:`display`), or a :class:`Panel` to open. Tools return a string, an
:class:`Image`, a :class:`Markdown` text, a list of those, or a
:class:`Result` for full control (``is_error``, structured content, tools
to activate); anything else is sent as JSON text (and, for a tool with an
output schema, as its structured content too). What guards return is in
:mod:`zotd.sdk.guards`; :class:`CallResult` is what ``ext.call_tool()``
gives back, and :class:`CallToolError` what it raises when no call can be
made.

Imported before the handshake (see :mod:`zotd.sdk.extension`): no asyncio,
and ``base64`` only once an image is sent or received.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.ext_base import Block, ImageBlock, PanelSpec, TextBlock
from ..protocol.ext_frames import CommandResponse, PanelRender, ToolResult

if TYPE_CHECKING:
    from ..protocol.host_frames import HostToolResult

# --- slash commands -------------------------------------------------------------------


class Panel(msgspec.Struct, frozen=True):
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


class Response(msgspec.Struct, frozen=True):
    """A slash command's answer: ``action`` is prompt, insert, display,
    tool_prompt or noop; ``panel``, if set, is opened as well.
    ``tool_name`` and ``tool_args`` go with ``tool_prompt``."""

    action: str = "noop"
    text: str = ""
    error: str = ""
    panel: Panel | None = None
    tool_name: str = ""
    tool_args: Mapping[str, Any] | None = None


def prompt(text: str, *, panel: Panel | None = None) -> Response:
    """Send ``text`` to the model as the user's next message."""
    return Response("prompt", text, panel=panel)


def insert(text: str, *, panel: Panel | None = None) -> Response:
    """Put ``text`` into the user's input box, for them to edit and send."""
    return Response("insert", text, panel=panel)


def display(text: str, *, panel: Panel | None = None) -> Response:
    """Show ``text`` to the user; nothing goes to the model."""
    return Response("display", text, panel=panel)


def tool_prompt(
    text: str, tool: str, args: Mapping[str, Any] | None = None, *, panel: Panel | None = None
) -> Response:
    """Send ``text`` as the user's next message, after running the tool
    ``tool`` with ``args``: the agent runs it (through its usual checks)
    and puts the call and its result in the conversation before the
    model's turn. The extension does not see the result.

    Raises:
        ValueError: ``text`` or ``tool`` is empty.
        TypeError: ``args`` is not a mapping that is a JSON object.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("tool_prompt() needs the text of the prompt")
    if not isinstance(tool, str) or not tool.strip():
        raise ValueError("tool_prompt() needs the name of the tool to run")
    if args is not None and not isinstance(args, Mapping):
        raise TypeError(f"tool_prompt() takes the tool's arguments as a dict, not {type(args)}")
    copy = dict(args or {})
    msgspec.json.encode(copy)  # raises TypeError if it is not JSON
    return Response("tool_prompt", text, panel=panel, tool_name=tool.strip(), tool_args=copy)


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


def panel_spec(panel: Panel) -> PanelSpec:
    """The ``open_panel`` object of a :class:`Panel`."""
    return PanelSpec(id=panel.id, title=panel.title, lines=_lines(panel.lines), footer=panel.footer)


def command_frame(rid: str, value: Any) -> CommandResponse:
    """The ``command_response`` for a handler's return value."""
    if value is None:
        value = noop()
    elif isinstance(value, str):
        value = display(value)
    elif isinstance(value, Panel):
        value = noop(panel=value)
    if not isinstance(value, Response):
        return CommandResponse(
            id=rid,
            action="noop",
            error=f"the command returned {type(value).__name__}, not a response "
            "(use prompt(), insert(), display(), tool_prompt(), noop(), error() or a Panel)",
        )
    frame = CommandResponse(id=rid, action=value.action, error=value.error)
    if value.action in ("prompt", "insert", "display"):
        setattr(frame, value.action, value.text)
    elif value.action == "tool_prompt":
        frame.prompt = value.text
        frame.tool_name = value.tool_name
        frame.tool_args = msgspec.Raw(msgspec.json.encode(value.tool_args or {}))
    if value.panel is not None:
        frame.open_panel = panel_spec(value.panel)
    return frame


def render_frame(panel: Panel) -> PanelRender:
    """The ``panel_render`` that redraws ``panel``."""
    return PanelRender(
        panel_id=panel.id, title=panel.title, lines=_lines(panel.lines), footer=panel.footer
    )


# --- tools ---------------------------------------------------------------------------


class Image(msgspec.Struct, frozen=True):
    """An image for the model: raw bytes and their MIME type (base64 is done for you)."""

    data: bytes
    mime_type: str = "image/png"


class Markdown(msgspec.Struct, frozen=True):
    """A text block shown to the user as Markdown (the model reads it as it is)."""

    text: str


Content = str | Image | Markdown


class Result(msgspec.Struct, frozen=True):
    """A tool's result in full.

    Attributes:
        content: its blocks (what the model reads).
        is_error: it reports a failure.
        structured: the data the tool's ``output_schema`` describes, for
            programs that call it (``None``: none); sent as JSON.
        activate_tools: deferred tools this result makes available.
    """

    content: Sequence[Content] | Content = msgspec.field(default_factory=list)
    is_error: bool = False
    structured: Any = None
    activate_tools: Sequence[str] = ()


class CallResult(Result, frozen=True):
    """What a tool called with ``ext.call_tool()`` gave back: its blocks
    (``str``, :class:`Markdown` and :class:`Image`), ``is_error``,
    ``truncated`` (the host cut it to its size limit) and ``structured``.
    A tool handler may return it as its own result."""

    truncated: bool = False

    @property
    def text(self) -> str:
        """Its text blocks, joined by newlines."""
        items = [self.content] if isinstance(self.content, str | Image | Markdown) else self.content
        return "\n".join(
            i.text if isinstance(i, Markdown) else i for i in items if not isinstance(i, Image)
        )


class CallToolError(RuntimeError):
    """A tool call through the host could not be made (the host does not
    offer ``call_tool``, or it went away); a tool that ran and failed is
    not this, but a result with ``is_error``."""


def tool_error(message: str) -> Result:
    """A result that tells the model the call failed, and why."""
    return Result([message], is_error=True)


def _block(item: Any) -> Block:
    if isinstance(item, str):
        return TextBlock(item)
    if isinstance(item, Markdown):
        return TextBlock(item.text, format="markdown")
    if isinstance(item, Image):
        import base64  # loaded with asyncio by now: not before the handshake

        return ImageBlock(mime_type=item.mime_type, data=base64.b64encode(item.data).decode())
    return TextBlock(msgspec.json.encode(item).decode())


def tool_frame(rid: str, value: Any, *, structured: bool = False) -> ToolResult:
    """The ``tool_result`` for a handler's return value; ``structured``: the
    tool declared an output schema, so a value that is not content (see
    the module) is its structured content as well as its text."""
    if isinstance(value, Result):
        items = (
            [value.content] if isinstance(value.content, str | Image | Markdown) else value.content
        )
        frame = ToolResult(id=rid, content=[_block(i) for i in items], is_error=value.is_error)
        if value.structured is not None:
            frame.structured_content = msgspec.Raw(msgspec.json.encode(value.structured))
        frame.activate_tools = list(value.activate_tools)
        return frame
    if value is None:
        return ToolResult(id=rid, content=[])
    if isinstance(value, str | Image | Markdown):
        return ToolResult(id=rid, content=[_block(value)])
    if structured:
        data = msgspec.json.encode(value)
        return ToolResult(
            id=rid, content=[TextBlock(data.decode())], structured_content=msgspec.Raw(data)
        )
    if isinstance(value, list | tuple):
        return ToolResult(id=rid, content=[_block(i) for i in value])
    return ToolResult(id=rid, content=[_block(value)])


def call_result(frame: HostToolResult) -> CallResult:
    """The :class:`CallResult` of the host's reply to a ``call_tool``."""
    import base64  # loaded with asyncio by now: not before the handshake
    import binascii

    content: list[Content] = []
    for block in frame.content:
        if isinstance(block, TextBlock):
            content.append(Markdown(block.text) if block.format == "markdown" else block.text)
            continue
        try:
            content.append(Image(base64.b64decode(block.data, validate=True), block.mime_type))
        except (binascii.Error, ValueError):
            content.append(f"[an image ({block.mime_type}) that is not valid base64]")
    structured = None
    if not isinstance(frame.structured_content, msgspec.UnsetType):
        structured = msgspec.json.decode(frame.structured_content)
    return CallResult(
        content, is_error=frame.is_error, structured=structured, truncated=frame.truncated
    )
