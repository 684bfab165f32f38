"""Agent protocol v1: push frames, which the daemon sends without a request.

:class:`NotifyPush` and :class:`ExtensionStatePush` reach the connections
that sent ``subscribe``; :class:`PanelRenderPush`, :class:`PanelClosePush`
and :class:`ToolProgressPush` reach the one connection they concern.
:data:`Push` is their union. Re-exported by :mod:`zotd.protocol.agent`.
"""

from __future__ import annotations

import msgspec

from .agent_data import CommandInfo, ToolInfo
from .agent_requests import Id


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


Push = NotifyPush | ExtensionStatePush | PanelRenderPush | PanelClosePush | ToolProgressPush
