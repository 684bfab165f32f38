"""The extension protocol, extension -> host: what an extension writes to
its stdout, one Struct per frame type, and their union. Re-exported by
:mod:`.extension`.
"""

from __future__ import annotations

import msgspec

from .ext_base import EMPTY_OBJECT, Block, Frame, Id, PanelSpec

# --- extension -> host --------------------------------------------------------


class Hello(Frame, tag="hello"):
    """Required first frame: who the extension is."""

    name: str
    version: str = ""
    capabilities: list[str] = []


class RegisterCommand(Frame, tag="register_command"):
    """Registers a slash command."""

    name: str
    description: str = ""


class RegisterTool(Frame, tag="register_tool"):
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
    schema: msgspec.Raw = EMPTY_OBJECT
    output_schema: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    namespace: str = ""
    namespace_description: str = ""
    namespace_instructions: str = ""
    exposure: str = ""
    deferred: bool = False
    interactive: bool = False
    replay: str = ""
    #: zotd's, for MCP servers' tools: a display title, and MCP's tool
    #: annotations (a JSON object), kept and shown in ``list_tools``.
    title: str = ""
    annotations: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class Ready(Frame, tag="ready"):
    """All initial registrations are sent."""


class ToolResult(Frame, tag="tool_result"):
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


class Subscribe(Frame, tag="subscribe"):
    """Events to observe, and events to intercept."""

    events: list[str] = []
    intercept: list[str] = []


class EventInterceptResponse(Frame, tag="event_intercept_response", omit_defaults=True):
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


class CommandResponse(Frame, tag="command_response"):
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


class PanelRender(Frame, tag="panel_render"):
    """Redraws an open panel (beyond the reference)."""

    panel_id: str
    title: str = ""
    lines: list[str] = []
    footer: str = ""


class PanelClose(Frame, tag="panel_close"):
    """Closes a panel; either side may send it (beyond the reference)."""

    panel_id: str


class ToolProgress(Frame, tag="tool_progress"):
    """How far a pending :class:`ToolCall` has got (beyond the reference)."""

    id: Id
    message: str = ""
    progress: float | None = None
    total: float | None = None


class Notify(Frame, tag="notify"):
    """A one-way note for the user, any time."""

    message: str = ""
    level: str = "info"


class ShutdownAck(Frame, tag="shutdown_ack"):
    """Reply to :class:`Shutdown`; the extension exits right after."""


class CallToolRequest(Frame, tag="call_tool"):
    """Current zot: the extension calls a tool through the host (it needs
    ``call_tool`` in ``hello_ack.capabilities``); answered with
    :class:`HostToolResult` of the same ``id``. ``parent_id`` is the id of
    the host's :class:`ToolCall` it is serving, if any."""

    id: Id
    name: str
    args: msgspec.Raw = EMPTY_OBJECT
    parent_id: Id | None = None


class CallToolCancel(Frame, tag="call_tool_cancel"):
    """Current zot: gives up the extension's own :class:`CallToolRequest` ``id``."""

    id: Id


class Submit(Frame, tag="submit"):
    """Current zot, one-way: ``text`` as the user's next prompt."""

    text: str = ""


class SubmitSlash(Frame, tag="submit_slash"):
    """Current zot, one-way: runs the slash command ``text`` (starts with ``/``)."""

    text: str = ""


class ClearNotes(Frame, tag="clear_notes"):
    """Current zot, one-way: withdraws the notes this extension put up."""


class OpenPanel(Frame, tag="open_panel"):
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
