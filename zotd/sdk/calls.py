"""The extension's own tool calls, through the host: ``ext.call_tool()``.

Current zot lets an extension call a tool (another extension's, or one of
the agent's) with a ``call_tool`` frame, when the host's ``hello_ack``
lists the ``call_tool`` capability; the host answers with a ``tool_result``
of the same id. :class:`HostCalls` keeps the calls in flight (on the event
loop): it makes their ids, matches the replies, sends ``call_tool_cancel``
for a call whose awaiting task is cancelled, and fails every call still
waiting once the host is gone. Used on the event loop only, so imported
once the handshake is out (see :mod:`zotd.sdk.runtime`); the error it
raises, :class:`CallToolError`, lives in :mod:`zotd.sdk.results`, for
handlers to catch without loading asyncio.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import msgspec

from ..protocol import extension as ep
from .results import CallToolError

__all__ = ["CallToolError", "HostCalls"]


class HostCalls:
    """The ``call_tool`` requests in flight, by id; used on the loop only.

    Args:
        send: writes a frame (the runtime's ``send``).
    """

    def __init__(self, send: Callable[[msgspec.Struct], None]) -> None:
        self._send = send
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[ep.HostToolResult]] = {}
        #: Why no call can be made any more ("" while they can).
        self.gone = ""

    async def call(self, name: str, args: bytes, parent_id: str | None) -> ep.HostToolResult:
        """Sends ``call_tool`` and waits for its result.

        Raises:
            CallToolError: the host is gone.
            asyncio.CancelledError: the awaiting task was cancelled (the
                host is sent ``call_tool_cancel`` first).
        """
        if self.gone:
            raise CallToolError(self.gone)
        cid = f"call-{next(self._ids)}"
        reply: asyncio.Future[ep.HostToolResult] = asyncio.get_running_loop().create_future()
        self._waiting[cid] = reply
        self._send(
            ep.CallToolRequest(id=cid, name=name, args=msgspec.Raw(args), parent_id=parent_id)
        )
        try:
            return await reply
        except asyncio.CancelledError:
            if self._waiting.pop(cid, None) is not None and not self.gone:
                self._send(ep.CallToolCancel(id=cid))
            raise
        finally:
            self._waiting.pop(cid, None)

    def answered(self, frame: ep.HostToolResult) -> bool:
        """The host's result for one of the calls; ``False`` if none waits for it."""
        reply = self._waiting.pop(str(frame.id), None)
        if reply is None or reply.done():
            return False
        reply.set_result(frame)
        return True

    def unreadable(self, line: bytes, why: str) -> None:
        """A host's frame that cannot be read: if it is the ``tool_result``
        of a call, that call fails (rather than wait for a reply that came)."""
        try:
            loose = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return
        if not (isinstance(loose, dict) and loose.get("type") == "tool_result"):
            return
        reply = self._waiting.pop(str(loose.get("id")), None)
        if reply is not None and not reply.done():
            reply.set_exception(CallToolError(f"the host's tool_result cannot be read ({why})"))

    def end(self, why: str) -> None:
        """The host is gone: every call waiting fails, and so will later ones."""
        self.gone = why
        waiting, self._waiting = self._waiting, {}
        for reply in waiting.values():
            if not reply.done():
                reply.set_exception(CallToolError(why))
