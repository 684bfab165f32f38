"""Agent protocol v1: frames on the daemon's Unix socket.

Requests are ``{"id": <string|int>, "type": "<command>", ...}``; every request
gets exactly one :class:`Response` with the same ``id``. Push frames carry no
``id``: :class:`NotifyPush` and :class:`ExtensionStatePush` reach the
connections that sent ``subscribe``; :class:`PanelRenderPush`,
:class:`PanelClosePush` and :class:`ToolProgressPush` reach the one
connection they concern. See ``docs/agent-protocol.md``.

The ``data`` of a successful response is one of the ``*Data`` Structs below;
a client decodes the raw ``data`` of a :class:`RawResponse` straight into the
right one. The frames of the hot path are ``gc=False``: plain data that never
forms a reference cycle, so the garbage collector need not track them.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec

from .extension import Block, PanelSpec
from .frames import FrameDecoder, UnknownFrame, tags_of

T = TypeVar("T")

Id = str | int


class ErrorCode:
    """The ``error.code`` values of a failed response."""

    BAD_REQUEST: Final = "bad_request"
    HELLO_REQUIRED: Final = "hello_required"
    UNAUTHORIZED: Final = "unauthorized"
    UNKNOWN_COMMAND: Final = "unknown_command"
    NOT_FOUND: Final = "not_found"
    #: A known command or tool whose extension is not running now (disabled,
    #: failed, restarting, untrusted, starting, stopping); nothing was sent to
    #: it, and the message says what to do.
    UNAVAILABLE: Final = "unavailable"
    TIMEOUT: Final = "timeout"
    EXTENSION_FAILED: Final = "extension_failed"
    FRAME_TOO_LARGE: Final = "frame_too_large"
    SHUTTING_DOWN: Final = "shutting_down"
    #: Too many requests in flight, on this connection or in all.
    BUSY: Final = "busy"
    #: The client gave the request up (``cancel``).
    CANCELLED: Final = "cancelled"
    #: A bug in zotd; the message says what, and the daemon log has the traceback.
    INTERNAL: Final = "internal"


# --- requests -----------------------------------------------------------------


class _Request(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    id: Id


class Hello(_Request, tag="hello"):
    """First request on a connection: which workspace, and who is asking."""

    protocol_version: int = 1
    cwd: str | None = None
    provider: str = ""
    model: str = ""
    client: str = ""
    token: str | None = None
    #: ``False``: join no workspace (for operator tools: ``status``, ``shutdown``).
    attach: bool = True


class Ping(_Request, tag="ping"):
    """Liveness check."""


class ListExtensions(_Request, tag="list_extensions"):
    """Every extension of the workspace, with its live state."""


class ListCommands(_Request, tag="list_commands"):
    """Every slash command of the workspace."""


class ListTools(_Request, tag="list_tools"):
    """Every tool of the workspace."""


class InvokeCommand(_Request, tag="invoke_command"):
    """Runs a slash command; ``args`` is what the user typed after its name."""

    name: str
    args: str = ""


class CallTool(_Request, tag="call_tool"):
    """Calls a tool; ``args`` must be a JSON object."""

    name: str
    args: msgspec.Raw = msgspec.Raw(b"{}")
    timeout_s: float | None = None


class EmitEvent(_Request, tag="emit_event"):
    """A lifecycle event; every field but ``id`` and ``type`` goes to the subscribers."""

    event: str


class Intercept(_Request, tag="intercept"):
    """Asks the guards whether an action may go ahead: a tool call (``tool_*``
    fields), a turn (``step``) or an assistant message (``text``)."""

    event: str = "tool_call"
    tool_id: str = ""
    tool_name: str = ""
    tool_args: msgspec.Raw = msgspec.Raw(b"{}")
    step: int | None = None
    text: str | None = None


class PanelKey(_Request, tag="panel_key"):
    """A key the user pressed in a panel this connection opened.

    ``extension`` may be left out while no two of the connection's open
    panels share ``panel_id``.
    """

    panel_id: str
    key: str
    text: str = ""
    extension: str = ""


class PanelResize(_Request, tag="panel_resize"):
    """The size (in cells) of a panel this connection opened."""

    panel_id: str
    width: int
    height: int
    extension: str = ""


class PanelClose(_Request, tag="panel_close"):
    """Closes a panel this connection opened."""

    panel_id: str
    extension: str = ""


class CancelCall(_Request, tag="cancel"):
    """Gives up this connection's ``call_tool``, ``invoke_command`` or
    ``intercept`` whose ``id`` is ``request_id``: the extensions working on it
    are told, and its reply is a ``cancelled`` error."""

    request_id: Id


class Subscribe(_Request, tag="subscribe"):
    """Turns push frames on (or off) for this connection."""

    notifications: bool = True


class ExtInstall(_Request, tag="ext_install"):
    """Installs from a directory or git URL into ``scope`` (``global`` or ``project``)."""

    source: str
    scope: str = "global"


class ExtRemove(_Request, tag="ext_remove"):
    """Stops an installed extension everywhere and deletes its directory."""

    name: str


class ExtEnable(_Request, tag="ext_enable"):
    """Sets ``enabled: true`` in the manifest and starts the extension."""

    name: str


class ExtDisable(_Request, tag="ext_disable"):
    """Sets ``enabled: false`` in the manifest and stops the extension."""

    name: str


class ExtReload(_Request, tag="ext_reload"):
    """Restarts one extension (or all) from its manifest on disk."""

    name: str | None = None


class ExtTrust(_Request, tag="ext_trust"):
    """Trusts the workspace's project-local extensions as they are now, and starts them."""


class ExtLogs(_Request, tag="ext_logs"):
    """The last ``lines`` lines of an extension's log."""

    name: str
    lines: int = 100


class Status(_Request, tag="status"):
    """The daemon's pid, version, socket and workspaces."""


class Shutdown(_Request, tag="shutdown"):
    """Stops the daemon gracefully, after replying."""


Request = (
    Hello
    | Ping
    | ListExtensions
    | ListCommands
    | ListTools
    | InvokeCommand
    | CallTool
    | EmitEvent
    | Intercept
    | PanelKey
    | PanelResize
    | PanelClose
    | CancelCall
    | Subscribe
    | ExtInstall
    | ExtRemove
    | ExtEnable
    | ExtDisable
    | ExtReload
    | ExtTrust
    | ExtLogs
    | Status
    | Shutdown
)

# --- replies and push frames --------------------------------------------------


class ErrorBody(msgspec.Struct, gc=False):
    """``error`` of a failed response."""

    code: str
    message: str


class Response(msgspec.Struct, tag_field="type", tag="response", omit_defaults=True, gc=False):
    """The one reply to a request. ``data`` on success, ``error`` on failure."""

    id: Id | None
    command: str | None
    success: bool
    data: Any = None
    error: ErrorBody | None = None


class RawResponse(msgspec.Struct, tag_field="type", tag="response", gc=False):
    """A :class:`Response` as a client reads it: ``data`` is kept as raw JSON,
    to be decoded once, straight into the type the request expects."""

    id: Id | None
    command: str | None
    success: bool
    data: msgspec.Raw = msgspec.Raw(b"null")
    error: ErrorBody | None = None


class NotifyPush(msgspec.Struct, tag_field="type", tag="notify", gc=False):
    """An extension's ``notify``, pushed to subscribed connections."""

    extension: str
    level: str
    message: str


class Shadowed(msgspec.Struct):
    """A command (``/name``) or tool (``name``) an extension registered but
    does not hold: ``held_by`` is the extension (or ``zot`` for a built-in)
    that holds it, ``reason`` says why, in words."""

    name: str
    held_by: str
    reason: str


class ShadowedInfo(msgspec.Struct):
    """A registration that lost its name (``list_commands``, ``list_tools``):
    ``extension`` registered ``name`` (a command's without the ``/``), but
    ``held_by`` holds it (an extension, or ``zot`` for a built-in or
    reserved name); ``reason`` says why, in words."""

    name: str
    description: str
    extension: str
    held_by: str
    reason: str


class CommandInfo(msgspec.Struct):
    """One slash command."""

    name: str
    description: str
    extension: str


class ToolInfo(msgspec.Struct):
    """One tool; ``schema`` is its JSON Schema object."""

    name: str
    description: str
    schema: Any
    extension: str


class ExtensionStatePush(msgspec.Struct, tag_field="type", tag="extension_state"):
    """An extension's registry entry changed (started, ready, exited, ...)."""

    extension: str
    state: str
    commands: list[CommandInfo]
    tools: list[ToolInfo]
    error: str = ""


class PanelRenderPush(msgspec.Struct, tag_field="type", tag="panel_render", gc=False):
    """An extension redrew a panel the connection opened (sent to it alone)."""

    extension: str
    panel_id: str
    title: str = ""
    lines: list[str] = []
    footer: str = ""


class PanelClosePush(msgspec.Struct, tag_field="type", tag="panel_close", gc=False):
    """A panel the connection opened was closed by its extension (``reason``
    ``"extension"``) or because the extension stopped (``"stopped"``)."""

    extension: str
    panel_id: str
    reason: str = "extension"


class ToolProgressPush(msgspec.Struct, tag_field="type", tag="tool_progress", gc=False):
    """Progress of a ``call_tool`` of the connection; ``request_id`` is that
    request's ``id`` (sent to that connection alone)."""

    request_id: Id
    extension: str
    tool: str
    message: str = ""
    progress: float | None = None
    total: float | None = None


Push = NotifyPush | ExtensionStatePush | PanelRenderPush | PanelClosePush | ToolProgressPush

# --- reply data ---------------------------------------------------------------


class HelloData(msgspec.Struct, gc=False):
    """``data`` of ``hello``."""

    protocol_version: int
    zotd_version: str
    workspace: str | None
    pid: int


class PingData(msgspec.Struct, gc=False):
    """``data`` of ``ping``."""

    pong: bool = True


class ExtensionInfo(msgspec.Struct):
    """One extension in ``list_extensions``."""

    name: str
    version: str
    description: str
    language: str
    scope: str
    dir: str
    enabled: bool
    state: str
    pid: int | None
    restarts: int
    #: Why it was last restarted ("" if never).
    restart_reason: str
    exit_code: int | None
    commands: list[str]
    tools: list[str]
    events: list[str]
    intercepts: list[str]
    log: str
    last_error: str
    log_tail: list[str]
    #: What its ``hello`` listed under ``capabilities``.
    capabilities: list[str] = []
    #: Replies it sent for requests no longer pending (dropped).
    late_replies: int = 0
    #: Problems with its manifest that do not stop it (an unknown key, ...).
    warnings: list[str] = []
    #: Seconds since its process started, while it runs; else ``None``.
    uptime_s: float | None = None
    #: Names it registered that another holds: ``/cmd`` or ``tool``, with why.
    shadowed: list[Shadowed] = []
    #: While it serves nothing (not ``ready``): why, and what to do about it,
    #: in the words of the errors (``weather is disabled; run `zot ext enable
    #: weather```); else "".
    hint: str = ""


class ExtensionsData(msgspec.Struct):
    """``data`` of ``list_extensions``."""

    extensions: list[ExtensionInfo]


class CommandsData(msgspec.Struct, omit_defaults=True):
    """``data`` of ``list_commands``: the commands by name, and the
    registrations hidden because another holds the name (left out when
    there are none)."""

    commands: list[CommandInfo]
    shadowed: list[ShadowedInfo] = []


class ToolsData(msgspec.Struct, omit_defaults=True):
    """``data`` of ``list_tools``: the tools by name, and the registrations
    hidden because another holds the name (left out when there are none)."""

    tools: list[ToolInfo]
    shadowed: list[ShadowedInfo] = []


class InvokeData(msgspec.Struct, gc=False):
    """``data`` of ``invoke_command``: the extension's ``command_response``."""

    extension: str
    action: str
    prompt: str = ""
    insert: str = ""
    display: str = ""
    error: str = ""
    #: A panel the command opened (``panel_render`` and ``panel_close``
    #: pushes follow on this connection), else ``None``.
    open_panel: PanelSpec | None = None


class CallData(msgspec.Struct, gc=False):
    """``data`` of ``call_tool``: the extension's ``tool_result``."""

    extension: str
    content: list[Block]
    is_error: bool = False


class CancelData(msgspec.Struct, gc=False):
    """``data`` of ``cancel``: whether the call was still in flight (else it
    had been answered already, and nothing changed)."""

    cancelled: bool


class EmitData(msgspec.Struct, gc=False):
    """``data`` of ``emit_event``: the extensions the event was queued for."""

    delivered: list[str]


class InterceptData(msgspec.Struct, gc=False):
    """``data`` of ``intercept``. ``extension`` names the guard that blocked.

    ``args`` (a ``tool_call``'s rewritten arguments) and ``text`` (an
    ``assistant_message``'s replaced text) are ``None`` unless a guard
    changed them; ``rewritten_by`` names those guards in order.
    """

    block: bool
    reason: str = ""
    extension: str = ""
    args: Any = None
    text: str | None = None
    rewritten_by: list[str] = []


class ExtChangeData(msgspec.Struct):
    """``data`` of ``ext_install``, ``ext_remove``, ``ext_enable``, ``ext_disable``.

    ``extension`` is what the caller's workspace now runs under that name
    (``None`` after a removal that revealed nothing, or if it is not in the
    caller's workspace).
    """

    name: str
    dir: str
    scope: str
    extension: ExtensionInfo | None


class ExtReloadData(msgspec.Struct):
    """``data`` of ``ext_reload`` (the reloaded extensions of the caller's
    workspace) and of ``ext_trust`` (its project-local extensions)."""

    extensions: list[ExtensionInfo]


class LogsData(msgspec.Struct):
    """``data`` of ``ext_logs``."""

    path: str
    lines: list[str]


class WorkspaceStatus(msgspec.Struct):
    """One workspace in ``status``."""

    path: str
    clients: int
    extensions: int
    ready: int
    #: Extension processes this workspace runs now (each workspace runs its own).
    processes: int = 0


class StatusData(msgspec.Struct):
    """``data`` of ``status``."""

    pid: int
    zotd_version: str
    socket: str
    uptime_s: float
    workspaces: list[WorkspaceStatus]


class Empty(msgspec.Struct, gc=False):
    """``data`` of requests with nothing to say (``subscribe``, ``shutdown``)."""


# --- encode / decode ----------------------------------------------------------

_encoder = msgspec.json.Encoder()
_request_decoder: FrameDecoder[Request] = FrameDecoder(
    Request,
    tags_of(
        Hello,
        Ping,
        ListExtensions,
        ListCommands,
        ListTools,
        InvokeCommand,
        CallTool,
        EmitEvent,
        Intercept,
        PanelKey,
        PanelResize,
        PanelClose,
        CancelCall,
        Subscribe,
        ExtInstall,
        ExtRemove,
        ExtEnable,
        ExtDisable,
        ExtReload,
        ExtTrust,
        ExtLogs,
        Status,
        Shutdown,
    ),
)
_server_frame_decoder: msgspec.json.Decoder[Response | Push] = msgspec.json.Decoder(Response | Push)
_reply_decoder: msgspec.json.Decoder[RawResponse | Push] = msgspec.json.Decoder(RawResponse | Push)
_payload_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_OMIT = frozenset({"id", "type"})


def encode(frame: msgspec.Struct) -> bytes:
    """One frame as a line, newline included."""
    return _encoder.encode(frame) + b"\n"


def ok(id: Id | None, command: str, data: msgspec.Struct) -> bytes:
    """A successful response, encoded."""
    return encode(Response(id=id, command=command, success=True, data=data))


def fail(id: Id | None, command: str | None, code: str, message: str) -> bytes:
    """A failed response, encoded."""
    return encode(Response(id=id, command=command, success=False, error=ErrorBody(code, message)))


def decode_request(line: bytes) -> Request | UnknownFrame:
    """Decodes a request line. Raises :class:`~.frames.FrameError`."""
    return _request_decoder.decode(line)


def event_payload(line: bytes) -> dict[str, msgspec.Raw]:
    """The fields of an ``emit_event`` or ``intercept`` line but ``id`` and ``type``."""
    fields = _payload_decoder.decode(line)
    return {k: v for k, v in fields.items() if k not in _OMIT}


def decode_reply(line: bytes) -> RawResponse | Push:
    """Decodes a line the daemon wrote, leaving a response's ``data`` raw.

    Raises:
        msgspec.DecodeError: not a frame (too deeply nested JSON included).
    """
    return _server_decode(_reply_decoder, line)


def decode_server_frame(line: bytes) -> Response | Push:
    """Decodes a line the daemon wrote (for clients).

    Raises:
        msgspec.DecodeError: not a frame (too deeply nested JSON included).
    """
    return _server_decode(_server_frame_decoder, line)


def _server_decode(decoder: msgspec.json.Decoder[T], line: bytes) -> T:
    try:
        return decoder.decode(line)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None
