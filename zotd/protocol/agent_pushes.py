"""Agent protocol v1: push frames, which the daemon sends without a request.

:class:`NotifyPush` and :class:`ExtensionStatePush` reach the connections
that sent ``subscribe``; :class:`PanelRenderPush`, :class:`PanelClosePush`
and :class:`ToolProgressPush` reach the one connection they concern.
:data:`Push` is their union. Re-exported by :mod:`zotd.protocol.agent`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .agent_data import CommandInfo, ToolInfo
from .agent_requests import Id
from .extension import PanelSpec


class NotifyPush(msgspec.Struct, tag_field="type", tag="notify", gc=False):
    """An extension's ``notify``, pushed to subscribed connections."""

    extension: str
    level: str
    message: str


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


class OpenPanelPush(msgspec.Struct, tag_field="type", tag="open_panel", gc=False):
    """An extension opened a panel on its own (current zot's ``open_panel``
    frame): sent to the agent whose tool call it was serving, else to the
    workspace's subscribers; ``panel_render``/``panel_close`` follow as for
    a command's panel."""

    extension: str
    panel: PanelSpec


class HostToolCallPush(msgspec.Struct, tag_field="type", tag="host_tool_call", gc=False):
    """An extension calls ``name``, a tool of the agent's own (not an
    extension's): answer with a ``host_tool_result`` request of the same
    ``call_id``. ``parent_id`` is the agent's ``call_tool`` request id it
    serves, if any."""

    call_id: str
    extension: str
    name: str
    args: Any
    parent_id: Id | None = None


class ClearNotesPush(msgspec.Struct, tag_field="type", tag="clear_notes", gc=False):
    """The extension withdrew the notes it put up (``notify``)."""

    extension: str


class SubmitPush(msgspec.Struct, tag_field="type", tag="submit", gc=False):
    """The extension hands ``text`` to the agent as the user's next prompt."""

    extension: str
    text: str


class SubmitSlashPush(msgspec.Struct, tag_field="type", tag="submit_slash", gc=False):
    """The extension runs the slash command ``text`` as though typed."""

    extension: str
    text: str


class ExtDevPush(msgspec.Struct, tag_field="type", tag="ext_dev", gc=False):
    """What an ``ext_dev`` of the connection did since (sent to it alone):
    ``message`` is a line for the user, such as ``weather: files changed
    (main.py); restarted: tools get_weather``."""

    extension: str
    message: str


Push = (
    NotifyPush
    | ExtensionStatePush
    | PanelRenderPush
    | PanelClosePush
    | ToolProgressPush
    | OpenPanelPush
    | HostToolCallPush
    | ClearNotesPush
    | SubmitPush
    | SubmitSlashPush
    | ExtDevPush
)
