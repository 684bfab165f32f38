"""The extension protocol: frames exchanged with an extension over its stdio.

One msgspec Struct per frame, named after its ``type`` tag, in one tagged
union per direction (see the reference, "Wire format"). Payloads the daemon
only passes along (a tool's JSON Schema, a tool call's arguments) are kept as
:class:`msgspec.Raw` so they are never decoded and re-encoded. Frames are
``gc=False``: plain data that never forms a reference cycle, so the garbage
collector need not track the dozens made per call.

Events are the one open-ended frame: agents may send payload fields the
reference does not list, and extensions should see them, so the host encodes
``event`` and ``event_intercept`` frames from the raw payload with
:func:`encode_event`; :class:`LifecycleEvent` and :class:`EventIntercept` are
what an extension (or a test's fake extension) decodes them into.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .frames import FrameDecoder, UnknownFrame, tags_of

#: Lifecycle events: the reference's five and the nine current zot added.
EVENTS = frozenset(
    {
        "session_start",
        "session_end",
        "user_prompt_submit",
        "turn_start",
        "turn_end",
        "tool_call",
        "tool_result",
        "tool_confirmation_requested",
        "permission_decision",
        "assistant_message",
        "pre_compact",
        "post_compact",
        "subagent_start",
        "subagent_stop",
    }
)

#: Events that may be intercepted. The reference intercepts only ``tool_call``;
#: current zot also ``turn_start``, ``assistant_message`` and
#: ``before_agent_start`` (asked one guard after another, see
#: :class:`EventInterceptResponse`).
INTERCEPTABLE = frozenset({"tool_call", "turn_start", "assistant_message", "before_agent_start"})

#: Values of ``command_response.action``: the reference's four, and current
#: zot's ``open_panel`` and ``tool_prompt``.
ACTIONS = frozenset({"prompt", "insert", "display", "noop", "open_panel", "tool_prompt"})

#: Values of ``register_tool.exposure`` (current zot); a tool with another is skipped.
EXPOSURES = frozenset({"direct", "codemode", "deferred", "model-only"})

#: Values of ``register_tool.replay`` (current zot); another counts as ``never``.
REPLAYS = frozenset({"never", "safe", "idempotent", "reconcile"})

#: Capabilities in an extension's ``hello`` that change what the host sends it.
TOOL_CANCEL = "tool_cancel"
CALL_TOOL = "call_tool"

#: Values of ``notify.level``.
LEVELS = frozenset({"info", "success", "warn", "error"})

Id = str | int

_EMPTY_OBJECT = msgspec.Raw(b"{}")


class _Frame(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    pass


# --- content blocks (tool results) --------------------------------------------


class TextBlock(msgspec.Struct, tag_field="type", tag="text", omit_defaults=True, gc=False):
    """``{"type":"text","text":"..."}``; ``format`` (current zot) is a display
    hint: ``"markdown"`` renders it as Markdown, anything else as plain text."""

    text: str
    format: str = ""


class ImageBlock(msgspec.Struct, tag_field="type", tag="image", gc=False):
    """``{"type":"image","mime_type":"image/png","data":"<base64>"}``"""

    mime_type: str
    data: str


Block = TextBlock | ImageBlock


# --- extension -> host --------------------------------------------------------


class Hello(_Frame, tag="hello"):
    """Required first frame: who the extension is."""

    name: str
    version: str = ""
    capabilities: list[str] = []


class RegisterCommand(_Frame, tag="register_command"):
    """Registers a slash command."""

    name: str
    description: str = ""


class RegisterTool(_Frame, tag="register_tool"):
    """Registers a tool the model can call; ``schema`` is a JSON Schema object.

    The rest is current zot's tool metadata, kept and shown in ``list_tools``:
    ``output_schema`` (a JSON Schema of ``structured_content``), the
    ``namespace`` it is grouped in (default: the extension's name) with its
    description and instructions, ``exposure`` (one of :data:`EXPOSURES`),
    ``deferred`` (hidden from the model until a result activates it),
    ``interactive`` (waits for the user: no reply deadline) and ``replay``
    (one of :data:`REPLAYS`, for durable hosts).
    """

    name: str
    description: str = ""
    schema: msgspec.Raw = _EMPTY_OBJECT
    output_schema: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    namespace: str = ""
    namespace_description: str = ""
    namespace_instructions: str = ""
    exposure: str = ""
    deferred: bool = False
    interactive: bool = False
    replay: str = ""


class Ready(_Frame, tag="ready"):
    """All initial registrations are sent."""


class ToolResult(_Frame, tag="tool_result"):
    """Reply to :class:`ToolCall`.

    Current zot adds ``structured_content`` (any JSON value, for a tool with an
    ``output_schema``) and ``activate_tools`` (deferred tools this result
    makes available).
    """

    id: Id
    content: list[Block] = []
    is_error: bool = False
    structured_content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    activate_tools: list[str] = []


class Subscribe(_Frame, tag="subscribe"):
    """Events to observe, and events to intercept."""

    events: list[str] = []
    intercept: list[str] = []


class EventInterceptResponse(_Frame, tag="event_intercept_response", omit_defaults=True):
    """Reply to :class:`EventIntercept`; ``block`` refuses the action.

    Beyond the reference: ``modified_args`` rewrites a ``tool_call``'s
    arguments (absent or ``null``: unchanged), ``replace_text`` an
    ``assistant_message``'s text as the user sees it (``""``: unchanged).
    Fields left at their defaults are not encoded (an empty ``Raw`` is not
    JSON).
    """

    id: Id
    block: bool = False
    reason: str = ""
    modified_args: msgspec.Raw = msgspec.Raw()
    replace_text: str = ""
    #: ``before_agent_start`` only (current zot): a JSON string replacing the
    #: whole system prompt (``""`` deletes it); absent keeps it.
    system_prompt: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET

    def rewrites_args(self) -> bool:
        """Whether ``modified_args`` holds a value (not absent, not ``null``)."""
        return bool(self.modified_args) and bytes(self.modified_args).strip() != b"null"


class PanelSpec(msgspec.Struct, gc=False):
    """A panel an extension opens from a :class:`CommandResponse` (beyond the reference)."""

    id: str
    title: str = ""
    lines: list[str] = []
    footer: str = ""


class CommandResponse(_Frame, tag="command_response"):
    """Reply to :class:`CommandInvoked`. ``action`` is one of :data:`ACTIONS`;
    ``open_panel`` (beyond the reference) opens a panel for the user;
    ``tool_name`` and ``tool_args`` (current zot, with ``tool_prompt``) name
    a tool the agent runs before the model's turn on ``prompt``."""

    id: Id
    action: str = "noop"
    prompt: str = ""
    insert: str = ""
    display: str = ""
    error: str = ""
    open_panel: PanelSpec | None = None
    tool_name: str = ""
    tool_args: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class PanelRender(_Frame, tag="panel_render"):
    """Redraws an open panel (beyond the reference)."""

    panel_id: str
    title: str = ""
    lines: list[str] = []
    footer: str = ""


class PanelClose(_Frame, tag="panel_close"):
    """Closes a panel; either side may send it (beyond the reference)."""

    panel_id: str


class ToolProgress(_Frame, tag="tool_progress"):
    """How far a pending :class:`ToolCall` has got (beyond the reference)."""

    id: Id
    message: str = ""
    progress: float | None = None
    total: float | None = None


class Notify(_Frame, tag="notify"):
    """A one-way note for the user, any time."""

    message: str = ""
    level: str = "info"


class ShutdownAck(_Frame, tag="shutdown_ack"):
    """Reply to :class:`Shutdown`; the extension exits right after."""


class CallToolRequest(_Frame, tag="call_tool"):
    """Current zot: the extension calls a tool through the host (it needs
    ``call_tool`` in ``hello_ack.capabilities``); answered with
    :class:`HostToolResult` of the same ``id``. ``parent_id`` is the id of
    the host's :class:`ToolCall` it is serving, if any."""

    id: Id
    name: str
    args: msgspec.Raw = _EMPTY_OBJECT
    parent_id: Id | None = None


class CallToolCancel(_Frame, tag="call_tool_cancel"):
    """Current zot: gives up the extension's own :class:`CallToolRequest` ``id``."""

    id: Id


class Submit(_Frame, tag="submit"):
    """Current zot, one-way: ``text`` as the user's next prompt."""

    text: str = ""


class SubmitSlash(_Frame, tag="submit_slash"):
    """Current zot, one-way: runs the slash command ``text`` (starts with ``/``)."""

    text: str = ""


class ClearNotes(_Frame, tag="clear_notes"):
    """Current zot, one-way: withdraws the notes this extension put up."""


class OpenPanel(_Frame, tag="open_panel"):
    """Current zot: opens a panel at any time (not in reply to a command)."""

    panel: PanelSpec


ExtensionFrame = (
    Hello
    | RegisterCommand
    | RegisterTool
    | Ready
    | ToolResult
    | Subscribe
    | EventInterceptResponse
    | CommandResponse
    | Notify
    | ShutdownAck
    | PanelRender
    | PanelClose
    | ToolProgress
    | CallToolRequest
    | CallToolCancel
    | Submit
    | SubmitSlash
    | ClearNotes
    | OpenPanel
)

#: One-way frames of current zot passed on to agents.
OneWay = Submit | SubmitSlash | ClearNotes | OpenPanel

# --- host -> extension --------------------------------------------------------


class HelloAck(_Frame, tag="hello_ack", omit_defaults=True):
    """Sent right after :class:`Hello`.

    ``extension_dir`` (where its manifest lives) and ``data_dir`` (its state
    directory, ``$ZOT_HOME/data/<name>``, kept across reinstalls) go beyond
    the reference, as newer zot sends them; older hosts leave them out.
    ``capabilities`` (current zot) lists what the host accepts:
    ``call_tool``.
    """

    protocol_version: int
    zot_version: str
    provider: str
    model: str
    cwd: str
    extension_dir: str = ""
    data_dir: str = ""
    capabilities: list[str] = []


class CommandInvoked(_Frame, tag="command_invoked"):
    """The user ran one of the extension's commands."""

    id: str
    name: str
    args: str = ""


class ToolCall(_Frame, tag="tool_call"):
    """The model called one of the extension's tools."""

    id: str
    name: str
    args: msgspec.Raw = _EMPTY_OBJECT


class LifecycleEvent(_Frame, tag="event"):
    """A lifecycle event; fields past ``event`` depend on the event (the
    agent's, passed on). zotd adds ``cwd`` and ``sequence`` (strictly
    increasing per workspace); more fields than these may come."""

    event: str
    step: int | None = None
    stop: str | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    text: str | None = None
    session_id: str | None = None
    agent_run_id: str | None = None
    cwd: str | None = None
    sequence: int | None = None
    origin_extension: str | None = None


class EventIntercept(_Frame, tag="event_intercept"):
    """Asks whether an action may go ahead; same payload as :class:`LifecycleEvent`
    (``system_prompt`` for ``before_agent_start``)."""

    id: str
    event: str
    tool_id: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    step: int | None = None
    text: str | None = None
    system_prompt: str | None = None
    session_id: str | None = None
    agent_run_id: str | None = None
    cwd: str | None = None
    sequence: int | None = None
    origin_extension: str | None = None


class PanelKey(_Frame, tag="panel_key", omit_defaults=True):
    """A key the user pressed in a panel (beyond the reference)."""

    panel_id: str
    key: str
    text: str = ""


class PanelResize(_Frame, tag="panel_resize"):
    """The panel's new size in cells (beyond the reference)."""

    panel_id: str
    width: int
    height: int


class Cancel(_Frame, tag="cancel"):
    """The host no longer waits for the reply to request ``id`` (beyond the reference)."""

    id: str


class ToolCancel(_Frame, tag="tool_cancel"):
    """Current zot: the host no longer waits for tool call ``id``; sent
    instead of :class:`Cancel` for tool calls to an extension whose
    ``hello`` lists ``tool_cancel``."""

    id: str


class HostToolResult(_Frame, tag="tool_result", omit_defaults=True):
    """Current zot: the reply to an extension's :class:`CallToolRequest`
    (the same ``type`` as an extension's :class:`ToolResult`; the direction
    tells them apart). ``truncated``: the content was cut to 256 KiB."""

    id: Id
    name: str
    content: list[Block] = []
    is_error: bool = False
    truncated: bool = False
    structured_content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class Shutdown(_Frame, tag="shutdown"):
    """Asks the extension to reply with :class:`ShutdownAck` and exit."""


HostFrame = (
    HelloAck
    | CommandInvoked
    | ToolCall
    | LifecycleEvent
    | EventIntercept
    | PanelKey
    | PanelResize
    | PanelClose
    | Cancel
    | ToolCancel
    | HostToolResult
    | Shutdown
)

# --- encode / decode ----------------------------------------------------------

_encoder = msgspec.json.Encoder()

_extension_decoder: FrameDecoder[ExtensionFrame] = FrameDecoder(
    ExtensionFrame, tags_of(ExtensionFrame)
)
_host_decoder: FrameDecoder[HostFrame] = FrameDecoder(HostFrame, tags_of(HostFrame))


def encode(frame: msgspec.Struct) -> bytes:
    """One frame as a line, newline included."""
    return _encoder.encode(frame) + b"\n"


def encode_event(payload: dict[str, msgspec.Raw], *, id: str | None = None) -> bytes:
    """An ``event`` frame (or, with ``id``, an ``event_intercept`` frame) as a line.

    Args:
        payload: the event's fields as the agent sent them, ``event`` included;
            values are passed through verbatim.
        id: the correlation id; makes the frame an ``event_intercept``.
    """
    if id is not None:
        return event_intercept_maker(payload)(id)
    return _encoder.encode({"type": "event", **payload}) + b"\n"


def event_intercept_maker(payload: dict[str, msgspec.Raw]) -> Callable[[str], bytes]:
    """Encodes an ``event_intercept`` payload once; returns ``id -> frame line``.

    For asking many guards the same question: only the id differs.
    """
    body = _encoder.encode(payload)  # b'{...}'
    rest = (b"," + body[1:]) if len(body) > 2 else body[1:]

    def make(id: str) -> bytes:
        return b'{"type":"event_intercept","id":' + _encoder.encode(id) + rest + b"\n"

    return make


def decode_extension_frame(line: bytes) -> ExtensionFrame | UnknownFrame:
    """Decodes a line an extension wrote. Raises :class:`~.frames.FrameError`."""
    return _extension_decoder.decode(line)


def decode_host_frame(line: bytes) -> HostFrame | UnknownFrame:
    """Decodes a line the host wrote (for extensions and tests)."""
    return _host_decoder.decode(line)
