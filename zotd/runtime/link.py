"""What an :class:`~.extension.Extension` sends its requests through.

Two kinds of extension, one face: a zot extension's requests are frames
down its stdin (:class:`~.calls.Calls`); an MCP server's are an MCP
client's requests (:class:`~.mcp_calls.McpCalls`). Both take the frame a
request would be in zot's protocol (``make(id)``), so the workspace, the
intercept chain and the sessions need not know which kind they talk to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from ..model.errors import RequestError
from ..protocol import extension as ep
from .pending import PendingTable

R = TypeVar("R", ep.ToolResult, ep.CommandResponse, ep.EventInterceptResponse)


class Link(Protocol):
    """The requests sent to one extension (see :class:`~.calls.Calls` for
    what each method promises)."""

    #: The requests sent and not yet answered, failed or withdrawn.
    pending: PendingTable[ep.ToolProgress]

    async def request(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        *,
        on_reply: Callable[[R], None] | None = None,
    ) -> R: ...

    def ask(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        callback: Callable[[R | RequestError], None],
        *,
        timeout: float | None = None,
        alone: bool = True,
        progress: Callable[[ep.ToolProgress], None] | None = None,
    ) -> str: ...

    def withdraw(self, rid: str) -> None: ...

    def send_nowait(self, frame: bytes, *, force: bool = False) -> bool: ...

    def shutdown(self) -> None: ...
