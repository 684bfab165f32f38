"""Current zot's ext -> host ``call_tool``: an extension calls a tool.

(Being built: for now every call is answered with an error result.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep
from .panels import Subscriber

if TYPE_CHECKING:
    from .dispatch import Connection
    from .extension import Extension
    from .workspace import Workspace

log = logging.getLogger(__name__)


class HostCalls:
    """The ``call_tool`` requests of one workspace's extensions.

    Args:
        workspace: whose tools and agents serve them.
    """

    def __init__(self, workspace: Workspace) -> None:
        self._ws = workspace

    def on_frame(self, ext: Extension, frame: ep.CallToolRequest | ep.CallToolCancel) -> None:
        """An extension's ``call_tool`` or ``call_tool_cancel``."""
        if isinstance(frame, ep.CallToolRequest):
            ext.send_nowait(
                ep.encode(
                    ep.HostToolResult(
                        id=frame.id,
                        name=frame.name,
                        content=[ep.TextBlock("call_tool is not supported by this zotd yet")],
                        is_error=True,
                    )
                )
            )

    def on_result(self, client: Subscriber, req: ap.HostToolResult) -> ap.Empty:
        """An agent's ``host_tool_result``."""
        raise RequestError(ap.ErrorCode.NOT_FOUND, f"no host tool call {req.call_id!r} is pending")

    def agent_joined(self, agent: Connection) -> None:
        """An agent joined the workspace (its ``hello`` lists its capabilities)."""

    def client_left(self, client: Subscriber) -> None:
        """The agent left: the calls forwarded to it fail."""

    def extension_stopped(self, name: str) -> None:
        """The extension stopped: its calls still running are given up."""
