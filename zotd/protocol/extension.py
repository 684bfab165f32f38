"""The extension protocol: frames exchanged with an extension over its stdio.

One msgspec Struct per frame, named after its ``type`` tag, in one tagged
union per direction (see the reference, "Wire format"). Payloads the daemon
only passes along (a tool's JSON Schema, a tool call's arguments) are kept as
:class:`msgspec.Raw` so they are never decoded and re-encoded. Frames are
``gc=False``: plain data that never forms a reference cycle, so the garbage
collector need not track the dozens made per call.

The frames live by direction, re-exported here (callers write
``ep.ToolCall``): the closed sets, content blocks and the frames' base in
:mod:`.ext_base`, what an extension sends in :mod:`.ext_frames`, what the
host sends in :mod:`.host_frames`. This module holds the codec.

Events are the one open-ended frame: agents may send payload fields the
reference does not list, and extensions should see them, so the host encodes
``event`` and ``event_intercept`` frames from the raw payload with
:func:`encode_event`; :class:`LifecycleEvent` and :class:`EventIntercept` are
what an extension (or a test's fake extension) decodes them into.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import msgspec

from .ext_base import (
    ACTIONS,
    CALL_TOOL,
    EMPTY_OBJECT,
    EVENTS,
    EXPOSURES,
    INTERCEPTABLE,
    LEVELS,
    REPLAYS,
    TOOL_CANCEL,
    Block,
    Frame,
    Id,
    ImageBlock,
    PanelSpec,
    TextBlock,
)
from .ext_frames import (
    CallToolCancel,
    CallToolRequest,
    ClearNotes,
    CommandResponse,
    EventInterceptResponse,
    ExtensionFrame,
    Hello,
    Notify,
    OneWay,
    OpenPanel,
    PanelClose,
    PanelRender,
    Ready,
    RegisterCommand,
    RegisterTool,
    ShutdownAck,
    Submit,
    SubmitSlash,
    Subscribe,
    ToolProgress,
    ToolResult,
)
from .frames import FrameDecoder, UnknownFrame, tags_of
from .host_frames import (
    Cancel,
    CommandInvoked,
    EventIntercept,
    HelloAck,
    HostFrame,
    HostToolResult,
    LifecycleEvent,
    PanelKey,
    PanelResize,
    Shutdown,
    ToolCall,
    ToolCancel,
)

__all__ = [
    "ACTIONS",
    "CALL_TOOL",
    "EMPTY_OBJECT",
    "EVENTS",
    "EXPOSURES",
    "INTERCEPTABLE",
    "LEVELS",
    "REPLAYS",
    "TOOL_CANCEL",
    "Block",
    "CallToolCancel",
    "CallToolRequest",
    "Cancel",
    "ClearNotes",
    "CommandInvoked",
    "CommandResponse",
    "EventIntercept",
    "EventInterceptResponse",
    "ExtensionFrame",
    "Frame",
    "Hello",
    "HelloAck",
    "HostFrame",
    "HostToolResult",
    "Id",
    "ImageBlock",
    "LifecycleEvent",
    "Notify",
    "OneWay",
    "OpenPanel",
    "PanelClose",
    "PanelKey",
    "PanelRender",
    "PanelResize",
    "PanelSpec",
    "Ready",
    "RegisterCommand",
    "RegisterTool",
    "Shutdown",
    "ShutdownAck",
    "Submit",
    "SubmitSlash",
    "Subscribe",
    "TextBlock",
    "ToolCall",
    "ToolCancel",
    "ToolProgress",
    "ToolResult",
    "decode_extension_frame",
    "decode_extension_frames",
    "decode_host_frame",
    "encode",
    "encode_event",
    "event_intercept_maker",
]

# --- encode / decode ----------------------------------------------------------

_encoder = msgspec.json.Encoder()

_extension_decoder: FrameDecoder[ExtensionFrame] = FrameDecoder(
    ExtensionFrame, tags_of(ExtensionFrame)
)


@functools.cache
def _host_decoder() -> FrameDecoder[HostFrame]:
    # Built on first use: the daemon never reads the host's frames (the SDK
    # does, once its extension is ready).
    return FrameDecoder(HostFrame, tags_of(HostFrame))


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


#: Decodes a read's worth of an extension's lines at once, or gives ``None``
#: (then decode them one by one); see :meth:`~.frames.FrameDecoder.decode_all`.
decode_extension_frames = _extension_decoder.decode_all


def decode_host_frame(line: bytes) -> HostFrame | UnknownFrame:
    """Decodes a line the host wrote (for extensions and tests)."""
    return _host_decoder().decode(line)
