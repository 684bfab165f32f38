"""Agent protocol v1: frames on the daemon's Unix socket.

Requests are ``{"id": <string|int>, "type": "<command>", ...}``; every request
gets exactly one :class:`Response` with the same ``id``. Push frames carry no
``id``: :class:`NotifyPush` and :class:`ExtensionStatePush` reach the
connections that sent ``subscribe``; :class:`PanelRenderPush`,
:class:`PanelClosePush` and :class:`ToolProgressPush` reach the one
connection they concern. See ``docs/agent-protocol.md``.

This module holds the error codes, the response frames and the codec; the
frames themselves live by concern, and are all re-exported here (callers
write ``ap.Hello``, ``ap.CallData``): requests in :mod:`.agent_requests`,
the ``data`` of replies in :mod:`.agent_data`, push frames in
:mod:`.agent_pushes`.

The ``data`` of a successful response is one of the ``*Data`` Structs;
a client decodes the raw ``data`` of a :class:`RawResponse` straight into the
right one. The frames of the hot path are ``gc=False``: plain data that never
forms a reference cycle, so the garbage collector need not track them.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Any, TypeVar

import msgspec

from .agent_data import (
    CallData,
    CancelData,
    CommandInfo,
    CommandsData,
    EmitData,
    Empty,
    EnvData,
    ExtChangeData,
    ExtensionInfo,
    ExtensionsData,
    ExtReloadData,
    HandshakeInfo,
    HelloData,
    InterceptData,
    InvokeData,
    LogsData,
    Metrics,
    PassedOver,
    PingData,
    Shadowed,
    ShadowedInfo,
    SharedStatus,
    SkillInfo,
    SkillsData,
    StatusData,
    ToolInfo,
    ToolsData,
    WorkspaceStatus,
)
from .agent_pushes import (
    ClearNotesPush,
    ExtDevPush,
    ExtensionStatePush,
    HostToolCallPush,
    NotifyPush,
    OpenPanelPush,
    PanelClosePush,
    PanelRenderPush,
    Push,
    SubmitPush,
    SubmitSlashPush,
    ToolProgressPush,
)
from .agent_requests import (
    CallTool,
    CancelCall,
    EmitEvent,
    ExtDev,
    ExtDisable,
    ExtEnable,
    ExtEnv,
    ExtInstall,
    ExtLogs,
    ExtReload,
    ExtRemove,
    ExtTrust,
    Hello,
    HostToolResult,
    Id,
    Intercept,
    InvokeCommand,
    ListCommands,
    ListExtensions,
    ListSkills,
    ListTools,
    PanelClose,
    PanelKey,
    PanelResize,
    Ping,
    Request,
    Shutdown,
    Status,
    Subscribe,
)
from .frames import FrameDecoder, tags_of

__all__ = [
    "CallData",
    "CallTool",
    "CancelCall",
    "CancelData",
    "ClearNotesPush",
    "CommandInfo",
    "CommandsData",
    "EmitData",
    "EmitEvent",
    "Empty",
    "EnvData",
    "ErrorBody",
    "ErrorCode",
    "ExtChangeData",
    "ExtDev",
    "ExtDevPush",
    "ExtDisable",
    "ExtEnable",
    "ExtEnv",
    "ExtInstall",
    "ExtLogs",
    "ExtReload",
    "ExtReloadData",
    "ExtRemove",
    "ExtTrust",
    "ExtensionInfo",
    "ExtensionStatePush",
    "ExtensionsData",
    "HandshakeInfo",
    "Hello",
    "HelloData",
    "HostToolCallPush",
    "HostToolResult",
    "Id",
    "Intercept",
    "InterceptData",
    "InvokeCommand",
    "InvokeData",
    "ListCommands",
    "ListExtensions",
    "ListSkills",
    "ListTools",
    "LogsData",
    "Metrics",
    "NotifyPush",
    "OpenPanelPush",
    "PanelClose",
    "PanelClosePush",
    "PanelKey",
    "PanelRenderPush",
    "PanelResize",
    "PassedOver",
    "Ping",
    "PingData",
    "Push",
    "RawResponse",
    "Request",
    "Response",
    "Shadowed",
    "ShadowedInfo",
    "SharedStatus",
    "Shutdown",
    "SkillInfo",
    "SkillsData",
    "Status",
    "StatusData",
    "SubmitPush",
    "SubmitSlashPush",
    "Subscribe",
    "ToolInfo",
    "ToolProgressPush",
    "ToolsData",
    "WorkspaceStatus",
    "decode_reply",
    "decode_request",
    "decode_requests",
    "decode_server_frame",
    "encode",
    "event_payload",
    "fail",
    "ok",
]

T = TypeVar("T")


class ErrorCode(StrEnum):
    """The ``error.code`` values of a failed response.

    On the wire ``ErrorBody.code`` stays a plain string: a client decodes a
    newer daemon's codes too.
    """

    BAD_REQUEST = "bad_request"
    HELLO_REQUIRED = "hello_required"
    UNAUTHORIZED = "unauthorized"
    UNKNOWN_COMMAND = "unknown_command"
    NOT_FOUND = "not_found"
    #: A known command or tool whose extension is not running now (disabled,
    #: failed, restarting, untrusted, starting, stopping); nothing was sent to
    #: it, and the message says what to do.
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    EXTENSION_FAILED = "extension_failed"
    FRAME_TOO_LARGE = "frame_too_large"
    SHUTTING_DOWN = "shutting_down"
    #: A bound was reached: too many requests in flight (on this connection
    #: or in all), too many connections (``max_connections``), or too many
    #: bytes of unfinished lines (``max_buffered_bytes``; the connection is
    #: then closed). The message says which.
    BUSY = "busy"
    #: The client gave the request up (``cancel``).
    CANCELLED = "cancelled"
    #: A bug in zotd; the message says what, and the daemon log has the traceback.
    INTERNAL = "internal"


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


# --- encode / decode ----------------------------------------------------------

_encoder = msgspec.json.Encoder()
_encode = _encoder.encode
_request_decoder: FrameDecoder[Request] = FrameDecoder(Request, tags_of(Request))
_payload_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_OMIT = frozenset({"id", "type"})


# The client's decoders are built on first use: the daemon, which never reads
# its own frames, does not pay for them at its start.


@functools.cache
def _server_frame_decoder() -> msgspec.json.Decoder[Response | Push]:
    return msgspec.json.Decoder(Response | Push)


@functools.cache
def _reply_decoder() -> msgspec.json.Decoder[RawResponse | Push]:
    return msgspec.json.Decoder(RawResponse | Push)


def encode(frame: msgspec.Struct) -> bytes:
    """One frame as a line, newline included."""
    return _encoder.encode(frame) + b"\n"


def ok(id: Id | None, command: str, data: msgspec.Struct) -> bytes:
    """A successful response, encoded (the path of every reply: positional, inline)."""
    return _encode(Response(id, command, True, data)) + b"\n"


def fail(id: Id | None, command: str | None, code: str, message: str) -> bytes:
    """A failed response, encoded."""
    return encode(Response(id=id, command=command, success=False, error=ErrorBody(code, message)))


#: Decodes a request line; raises :class:`~.frames.FrameError`. (The
#: decoder's own method: no call in between, on the path of every request.)
decode_request = _request_decoder.decode

#: Decodes a read's worth of request lines at once, or gives ``None``
#: (then decode them one by one); see :meth:`~.frames.FrameDecoder.decode_all`.
decode_requests = _request_decoder.decode_all


def event_payload(line: bytes) -> dict[str, msgspec.Raw]:
    """The fields of an ``emit_event`` or ``intercept`` line but ``id`` and ``type``."""
    fields = _payload_decoder.decode(line)
    return {k: v for k, v in fields.items() if k not in _OMIT}


def decode_reply(line: bytes) -> RawResponse | Push:
    """Decodes a line the daemon wrote, leaving a response's ``data`` raw.

    Raises:
        msgspec.DecodeError: not a frame (too deeply nested JSON included).
    """
    return _server_decode(_reply_decoder(), line)


def decode_server_frame(line: bytes) -> Response | Push:
    """Decodes a line the daemon wrote (for clients).

    Raises:
        msgspec.DecodeError: not a frame (too deeply nested JSON included).
    """
    return _server_decode(_server_frame_decoder(), line)


def _server_decode(decoder: msgspec.json.Decoder[T], line: bytes) -> T:
    try:
        return decoder.decode(line)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None
