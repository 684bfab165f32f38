"""The extension protocol, host -> extension: what zotd writes to an
extension's stdin, one Struct per frame type, and their union. Re-exported
by :mod:`.extension`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .ext_base import EMPTY_OBJECT, Block, Frame, Id
from .ext_frames import PanelClose  # either side may send it

# --- host -> extension --------------------------------------------------------


class HelloAck(Frame, tag="hello_ack", omit_defaults=True):
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


class CommandInvoked(Frame, tag="command_invoked"):
    """The user ran one of the extension's commands."""

    id: str
    name: str
    args: str = ""


class ToolCall(Frame, tag="tool_call"):
    """The model called one of the extension's tools."""

    id: str
    name: str
    args: msgspec.Raw = EMPTY_OBJECT


class LifecycleEvent(Frame, tag="event"):
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


class EventIntercept(Frame, tag="event_intercept"):
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


class PanelKey(Frame, tag="panel_key", omit_defaults=True):
    """A key the user pressed in a panel (beyond the reference)."""

    panel_id: str
    key: str
    text: str = ""


class PanelResize(Frame, tag="panel_resize"):
    """The panel's new size in cells (beyond the reference)."""

    panel_id: str
    width: int
    height: int


class Cancel(Frame, tag="cancel"):
    """The host no longer waits for the reply to request ``id`` (beyond the reference)."""

    id: str


class ToolCancel(Frame, tag="tool_cancel"):
    """Current zot: the host no longer waits for tool call ``id``; sent
    instead of :class:`Cancel` for tool calls to an extension whose
    ``hello`` lists ``tool_cancel``."""

    id: str


class HostToolResult(Frame, tag="tool_result", omit_defaults=True):
    """Current zot: the reply to an extension's :class:`CallToolRequest`
    (the same ``type`` as an extension's :class:`ToolResult`; the direction
    tells them apart). ``truncated``: the content was cut to 256 KiB."""

    id: Id
    name: str
    content: list[Block] = []
    is_error: bool = False
    truncated: bool = False
    structured_content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class Shutdown(Frame, tag="shutdown"):
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
