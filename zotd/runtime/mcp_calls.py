"""What the daemon asks an MCP server: zot's requests as MCP client requests.

:class:`McpCalls` is an MCP server extension's :class:`~.link.Link` (a zot
extension's is :class:`~.calls.Calls`). A request comes as the frame zot's
protocol would send (``make(id)``); it is read back and run as an MCP
request, one task each in the link's nursery, with the same bookkeeping as
a zot extension's (a :class:`~.pending.PendingTable`, so deadlines, late
answers and a crash's "fail everything pending at once" are the same):

* ``tool_call`` is ``tools/call`` (with a progress token: progress
  notifications are its ``tool_progress``); a JSON-RPC error, or a result
  that breaks the tool's ``outputSchema``, is a tool error the model reads.
* ``command_invoked`` is ``prompts/get``, its arguments parsed from the
  command's text (:func:`~zotd.protocol.mcp_map.prompt_arguments`).
* Withdrawing a request (the agent's ``cancel``, its deadline) cancels its
  task; the ``mcp`` package then sends ``notifications/cancelled``.

MCP servers subscribe to no zot events and intercept nothing, so one-way
frames are dropped, and no guard question is ever asked of one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as mt
import msgspec
import trio
from mcp.shared.exceptions import MCPError

from ..model.errors import RequestError, extension_failed
from ..model.metrics import Ending, counted
from ..protocol import extension as ep
from ..protocol import mcp_map
from .link import R
from .pending import PendingTable, Slot, given_up

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp_types import Prompt

    from .extension import Extension

log = logging.getLogger(__name__)

_decode_args = msgspec.json.Decoder(dict[str, Any]).decode


class _Closed(Exception):
    """The connection to the server is gone (not the tool's failure)."""


def _failure(exc: Exception) -> str:
    """What a failed MCP request says, for the model or the user; raises
    :class:`_Closed` instead if it failed because the connection is gone."""
    if isinstance(exc, MCPError):
        if exc.code == mt.CONNECTION_CLOSED:
            raise _Closed from exc
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream):
        raise _Closed from exc
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpCalls:
    """The requests sent to one MCP server.

    Args:
        ext: the extension (requests go only while it is running).
    """

    def __init__(self, ext: Extension) -> None:
        self._ext = ext
        #: The requests sent and not yet answered, failed or withdrawn.
        self.pending: PendingTable[ep.ToolProgress] = PendingTable(on_expire=self._expired)
        #: Set by the link once its session is initialized (and cleared for a new one).
        self.session: ClientSession | None = None
        #: The server's prompts by name (slash commands), from ``prompts/list``.
        self.prompts: dict[str, Prompt] = {}
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self._scopes: dict[str, trio.CancelScope] = {}
        self._on_shutdown: Callable[[], None] | None = None

    def open(self, nursery: trio.Nursery, on_shutdown: Callable[[], None]) -> None:
        """Requests run in ``nursery`` from now on (they wait for :meth:`ready`);
        :meth:`shutdown` calls ``on_shutdown``."""
        self._nursery = nursery
        self._on_shutdown = on_shutdown

    def ready(self, session: ClientSession) -> None:
        """The session is initialized: requests go to it."""
        self.session = session
        self._ready.set()

    def closed(self) -> None:
        """The session is gone: no more requests."""
        self._nursery = None
        self.session = None

    # --- the Link ------------------------------------------------------------------

    def _start(self, slot: Slot[Any, ep.ToolProgress], frame: bytes, rid: str) -> None:
        nursery = self._nursery
        if not self._ext.running or nursery is None:
            raise extension_failed(f"extension {self._ext.name!r} is {self._ext.state}")
        decoded = ep.decode_host_frame(frame)
        run: Callable[[], Awaitable[object]]
        if isinstance(decoded, ep.ToolCall):
            run = lambda: self._call_tool(rid, decoded, slot)  # noqa: E731
        elif isinstance(decoded, ep.CommandInvoked):
            run = lambda: self._get_prompt(rid, decoded)  # noqa: E731
        else:
            tag = getattr(decoded, "type", type(decoded).__name__)
            raise extension_failed(f"extension {self._ext.name!r} is an MCP server: no `{tag}`")
        scope = trio.CancelScope()
        self._scopes[rid] = scope
        nursery.start_soon(self._run, rid, scope, run)

    async def _run(
        self, rid: str, scope: trio.CancelScope, run: Callable[[], Awaitable[object]]
    ) -> None:
        reply: object = None
        with scope:
            try:
                await self._ready.wait()
                reply = await run()
            except RequestError as exc:
                reply = exc
            except _Closed:
                pass  # the connection is gone: its end fails it (with its exit and stderr)
        self._scopes.pop(rid, None)
        if scope.cancelled_caught or reply is None:
            return  # withdrawn, past its deadline, or left for the extension's end
        slot = self.pending.pop(rid)
        if slot is None:
            self._ext.late_replies += 1
        elif isinstance(reply, RequestError):
            slot.fail(reply)
        elif not slot.resolve(reply):
            slot.fail(extension_failed(f"extension {self._ext.name!r}: mismatched reply"))

    async def _call_tool(
        self, rid: str, frame: ep.ToolCall, slot: Slot[Any, ep.ToolProgress]
    ) -> ep.ToolResult:
        session = self.session
        assert session is not None

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if slot.progress is not None:
                try:
                    slot.progress(mcp_map.tool_progress(rid, progress, total, message))
                except Exception:
                    log.exception("a progress callback failed")

        try:
            result = await session.call_tool(
                frame.name,
                _decode_args(frame.args),
                progress_callback=report if slot.progress is not None else None,
            )
        except Exception as exc:  # an MCP error, output that breaks its schema, ...
            return mcp_map.error_result(rid, f"{frame.name}: {_failure(exc)}")
        if not isinstance(result, mt.CallToolResult):
            return mcp_map.error_result(rid, f"{frame.name}: an answer zot does not know")
        return mcp_map.tool_result(rid, result)

    async def _get_prompt(self, rid: str, frame: ep.CommandInvoked) -> ep.CommandResponse:
        session = self.session
        assert session is not None
        prompt = self.prompts.get(frame.name)
        if prompt is None:
            return ep.CommandResponse(id=rid, action="error", error=f"no prompt /{frame.name}")
        try:
            args = mcp_map.prompt_arguments(prompt, frame.args)
        except mcp_map.PromptArgumentsError as exc:
            return ep.CommandResponse(id=rid, action="error", error=str(exc))
        try:
            result = await session.get_prompt(frame.name, args or None)
        except Exception as exc:
            error = f"/{frame.name}: {_failure(exc)}"
            return ep.CommandResponse(id=rid, action="error", error=error)
        if not isinstance(result, mt.GetPromptResult):
            error = f"/{frame.name}: an answer zot does not know"
            return ep.CommandResponse(id=rid, action="error", error=error)
        return mcp_map.command_response(rid, result)

    async def request(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        *,
        on_reply: Callable[[R], None] | None = None,
    ) -> R:
        """Runs the request ``make(id)`` and waits for its reply (see
        :meth:`Calls.request <.calls.Calls.request>`); cancellation withdraws it."""
        rid = self.pending.new_id()
        counters = self._ext.metrics if counted(expect) else None
        slot: Slot[R, ep.ToolProgress] = Slot(expect, on_reply=on_reply, counters=counters)
        self._start(slot, make(rid), rid)
        self.pending.add(rid, slot)
        deadline = trio.current_effective_deadline()  # (the caller's: given up past it, timed out)
        try:
            return await slot.wait()
        finally:
            self._withdraw(rid, given_up(deadline))

    def ask(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        callback: Callable[[R | RequestError], None],
        *,
        timeout: float | None = None,
        alone: bool = True,
        progress: Callable[[ep.ToolProgress], None] | None = None,
    ) -> str:
        """Starts the request ``make(id)``; ``callback`` gets its reply or error
        (see :meth:`Calls.ask <.calls.Calls.ask>`). Returns its id."""
        rid = self.pending.new_id()
        counters = self._ext.metrics if counted(expect) else None
        slot: Slot[R, ep.ToolProgress] = Slot(
            expect, callback, progress=progress, counters=counters
        )
        self._start(slot, make(rid), rid)
        self.pending.add(rid, slot, timeout)
        return rid

    def withdraw(self, rid: str) -> None:
        """Forgets a request and cancels its MCP request if it still runs."""
        self._withdraw(rid, Ending.CANCEL)

    def _withdraw(self, rid: str, ending: Ending) -> None:
        slot = self.pending.pop(rid)
        if slot is not None:
            slot.withdrawn(ending)
        self._cancel(rid)

    def _expired(self, rid: str, slot: Slot[Any, ep.ToolProgress]) -> None:
        self._cancel(rid)

    def _cancel(self, rid: str) -> None:
        scope = self._scopes.pop(rid, None)
        if scope is not None:
            scope.cancel()  # the mcp package tells the server: notifications/cancelled

    def send_nowait(self, frame: bytes, *, force: bool = False) -> bool:
        """One-way frames mean nothing to an MCP server: dropped."""
        return False

    def shutdown(self) -> None:
        """Closes the server's stdin (MCP's stdio shutdown), or the connection."""
        if self._on_shutdown is not None:
            self._on_shutdown()
