"""``zot mcp``: one workspace of zotd served to an MCP host over stdio.

The Model Context Protocol server (the official ``mcp`` package's low-level
``Server``) and one :mod:`zotd.client` connection share one event loop:

- ``tools/list`` and ``tools/call`` are the workspace's zot tools, through
  ``list_tools`` and ``call_tool``: every tool with its ``outputSchema``,
  ``title`` and ``annotations`` (those of a hosted MCP server's tools as the
  server gave them), results with text and image content,
  ``structuredContent`` and ``isError``. An MCP host runs no zot guards of
  its own, so each call is put to the workspace's guards first
  (``intercept``): a blocked call is an error result naming the guard, a
  rewritten one runs with the guard's arguments;
- ``prompts/list`` and ``prompts/get`` are its slash commands, through
  ``list_commands`` and ``invoke_command``: a ``prompt`` (or ``insert``)
  action becomes a user message, a ``display`` an assistant text. A hosted
  MCP server's prompt keeps its own arguments (read from the usage zotd puts
  in the command's description, ``(/recipe dish=... [diet=...])``), given
  back to zotd as ``name=value`` pairs; any other command takes one
  optional argument, ``args``, the text after ``/NAME``;
- an ``extension_state`` push that changes the tools (or the commands) is
  announced with ``notifications/tools/list_changed``
  (``notifications/prompts/list_changed``): to a host of a handshake revision
  (``initialize``, up to 2025-11-25) on the session, to one of the
  per-request revision (``server/discover``, 2026-07-28) on each of its
  ``subscriptions/listen`` streams.

stdout is the MCP stream: nothing else is written to it. At the end of stdin,
every request already read is answered before ``zot mcp`` exits (a host may
pipe its requests and close stdin at once); :class:`Drain` holds the end of
input back from the server until then. This module imports ``mcp``; ``zot``
imports it only when ``zot mcp`` runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp.types as mt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from .. import __version__
from ..client import Client, ZotdError, connect
from ..protocol import agent as ap
from .mcp_listen import EndingListen
from .mcp_mapping import (
    command_text,
    content_of,
    prompt_of,
    prompt_result,
    structured_of,
    tool_of,
)

#: Progress updates that may wait to be reported to the MCP client.
PROGRESS_BUFFER = 64

#: After the end of stdin, the longest ``zot mcp`` waits for the answers to the
#: requests it has read: a little more than zotd's default tool and command
#: deadlines (60 s), after which zotd answers anyway.
DRAIN_TIMEOUT = 65.0


def _log(message: str) -> None:
    print(f"zot mcp: {message}", file=sys.stderr, flush=True)


class Bridge:
    """The MCP handlers over one zotd client, and the watcher of its push frames."""

    def __init__(self, zot: Client) -> None:
        self.zot = zot
        #: The MCP session, once the host said ``notifications/initialized``.
        self.session: ServerSession | None = None
        self._tools: list[mt.Tool] | None = None
        self._prompts: list[mt.Prompt] | None = None
        #: The changes, for the ``subscriptions/listen`` streams of 2026-07-28 hosts.
        self.bus = InMemorySubscriptionBus()
        self.listen = EndingListen(self.bus)

    def server(self) -> Server[Any]:
        server: Server[Any] = Server(
            "zot",
            version=__version__,
            instructions="Tools and slash commands (as prompts) of zot extensions, served by zotd.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_subscriptions_listen=self.listen,
        )
        server.middleware.append(self._capture)
        return server

    def options(self, server: Server[Any]) -> Any:
        return server.create_initialization_options(
            NotificationOptions(tools_changed=True, prompts_changed=True)
        )

    async def _capture(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized" and self.session is None:
            self.session = ctx.session
        return result

    # --- handlers -----------------------------------------------------------------

    async def _fetch_tools(self) -> list[mt.Tool]:
        return [tool_of(t) for t in await self._zot(self.zot.list_tools())]

    async def _fetch_prompts(self) -> list[mt.Prompt]:
        return [prompt_of(c) for c in await self._zot(self.zot.list_commands())]

    async def _zot(self, request: Any) -> Any:
        try:
            return await request
        except ZotdError as exc:
            raise MCPError(code=mt.INTERNAL_ERROR, message=f"zotd: {exc.message}") from None

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        self._tools = await self._fetch_tools()
        return mt.ListToolsResult(tools=self._tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        args: dict[str, Any] = dict(params.arguments or {})
        try:
            verdict = await self.zot.intercept(params.name, args)
            if verdict.block:
                why = f"blocked by {verdict.extension}: {verdict.reason}".rstrip(": ")
                return mt.CallToolResult(
                    content=[mt.TextContent(type="text", text=why)], is_error=True
                )
            if isinstance(verdict.args, dict):
                args = verdict.args
            if ctx.meta is not None and "progress_token" in ctx.meta:
                res = await self._call_reporting(ctx, params.name, args)
            else:
                res = await self.zot.call_tool(params.name, args)
        except ZotdError as exc:
            # Unknown tools, timeouts, crashed extensions: the model sees why.
            return mt.CallToolResult(
                content=[mt.TextContent(type="text", text=exc.message)], is_error=True
            )
        return mt.CallToolResult(
            content=[content_of(b) for b in res.content],
            structured_content=structured_of(res),
            is_error=res.is_error,
        )

    async def _call_reporting(
        self, ctx: ServerRequestContext[Any, Any], name: str, args: dict[str, Any]
    ) -> ap.CallData:
        """A tool call whose ``tool_progress`` frames become MCP progress
        notifications (for a caller that sent a progress token). A
        cancellation from the MCP client cancels this task, and so the call:
        zotd tells the extension."""
        send, receive = anyio.create_memory_object_stream[ap.ToolProgressPush](PROGRESS_BUFFER)

        def queue(frame: ap.ToolProgressPush) -> None:
            with contextlib.suppress(anyio.WouldBlock):  # too fast to report: skip one
                send.send_nowait(frame)

        async def report() -> None:
            count = 0
            async for frame in receive:
                count += 1
                done = frame.progress if frame.progress is not None else float(count)
                await ctx.session.report_progress(done, frame.total, frame.message or None)

        async with anyio.create_task_group() as tg:
            tg.start_soon(report)
            with send:
                result = await self.zot.call_tool(name, args, on_progress=queue)
        return result

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListPromptsResult:
        self._prompts = await self._fetch_prompts()
        return mt.ListPromptsResult(prompts=self._prompts)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: mt.GetPromptRequestParams
    ) -> mt.GetPromptResult:
        try:
            res = await self.zot.invoke_command(params.name, command_text(params.arguments))
        except ZotdError as exc:
            code = (
                mt.INVALID_PARAMS if exc.code == ap.ErrorCode.UNKNOWN_COMMAND else mt.INTERNAL_ERROR
            )
            raise MCPError(code=code, message=f"/{params.name}: {exc.message}") from None
        return prompt_result(params.name, res)

    # --- changes ------------------------------------------------------------------

    async def watch(self) -> None:
        """Announces changed tools and prompts until zotd closes the connection."""
        await self.zot.subscribe()
        self._tools = await self._fetch_tools()
        self._prompts = await self._fetch_prompts()
        async for frame in self.zot.notifications():
            if not isinstance(frame, ap.ExtensionStatePush):
                continue
            try:
                tools, prompts = await self._fetch_tools(), await self._fetch_prompts()
            except MCPError as exc:
                _log(exc.error.message)
                continue
            tools_changed, self._tools = tools != self._tools, tools
            prompts_changed, self._prompts = prompts != self._prompts, prompts
            if tools_changed:
                await self.bus.publish(ToolsListChanged())
            if prompts_changed:
                await self.bus.publish(PromptsListChanged())
            if self.session is None:
                continue  # the host lists them after its handshake anyway
            if tools_changed:
                await self.session.send_tool_list_changed()
            if prompts_changed:
                await self.session.send_prompt_list_changed()


def _request_key(value: object) -> object:
    """A request id as the dispatcher correlates it ("7" and 7 are one)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


class Sink(Protocol):
    """Where the MCP server's messages go (the stdio transport's write stream)."""

    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class Drain:
    """Between the stdio transport and the MCP server: the end of stdin reaches
    the server only once every request read so far has been answered, or
    ``bound`` seconds after it, whichever comes first.

    The ``mcp`` package's server cancels the requests in flight when its input
    ends (they get a "Connection closed" error), so a host that writes its
    requests and closes stdin at once would lose them. ``at_end`` runs when
    stdin ends, before the wait: it ends the requests that would be answered
    only then (``subscriptions/listen`` streams).
    """

    def __init__(
        self,
        read: AsyncIterable[SessionMessage | Exception],
        write: Sink,
        bound: float = DRAIN_TIMEOUT,
        at_end: Callable[[], None] | None = None,
    ) -> None:
        self._read = read
        self._write = write
        self.bound = bound
        self._at_end = at_end
        #: Ids of the requests read and not answered yet (with their count: a
        #: reused id is answered once per request).
        self.pending: Counter[object] = Counter()
        self._answered = anyio.Event()
        self._to_server, self.server_read = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.server_write, self._from_server = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in(self) -> None:
        """stdin to the server; at its end, waits for the answers, then ends the server's input."""
        async with self._to_server:
            async for item in self._read:
                if isinstance(item, SessionMessage):
                    message = item.message
                    if isinstance(message, mt.JSONRPCRequest):
                        self.pending[_request_key(message.id)] += 1
                    elif (
                        isinstance(message, mt.JSONRPCNotification)
                        and message.method == "notifications/cancelled"
                    ):
                        # A cancelled request is never answered.
                        self._settle((message.params or {}).get("requestId"))
                await self._to_server.send(item)
            if self._at_end is not None:
                self._at_end()
            with anyio.move_on_after(self.bound):
                while self.pending.total() > 0:
                    await self._answered.wait()
            if self.pending.total() > 0:
                _log(
                    f"end of input: {self.pending.total()} request(s) still unanswered "
                    f"after {self.bound:g} s; giving up on them"
                )

    async def pump_out(self) -> None:
        """The server's messages to stdout, counting the answers."""
        try:
            async with self._from_server:
                async for item in self._from_server:
                    await self._write.send(item)
                    message = item.message
                    if isinstance(message, mt.JSONRPCResponse | mt.JSONRPCError):
                        self._settle(message.id)
        finally:
            await self._write.aclose()

    def _settle(self, request_id: object) -> None:
        key = _request_key(request_id)
        if self.pending[key] <= 0:
            return
        self.pending[key] -= 1
        if self.pending[key] == 0:
            del self.pending[key]
        self._answered.set()
        self._answered = anyio.Event()


async def serve(
    *,
    socket: Path,
    cwd: Path | None = None,
    token: str | None = None,
    start: bool | None = None,
    drain_timeout: float = DRAIN_TIMEOUT,
) -> int:
    """Serves the workspace of ``cwd`` over stdio until the host closes stdin (0) or
    zotd goes away (1). Starts the daemon if none runs, unless ``start=False``.

    At the end of stdin, the requests already read are answered first, for at
    most ``drain_timeout`` seconds (pass a little more than zotd's
    ``tool_timeout`` and ``command_timeout``)."""
    try:
        async with connect(
            socket,
            cwd=cwd or Path(os.getcwd()),
            client=f"zot-mcp/{__version__}",
            token=token,
            start=start,
        ) as zot:
            bridge = Bridge(zot)
            server = bridge.server()
            lost = False
            async with stdio_server() as (read, write), anyio.create_task_group() as tg:

                async def watch() -> None:
                    nonlocal lost
                    try:
                        await bridge.watch()
                    except ZotdError as exc:
                        _log(exc.message)
                    except MCPError as exc:
                        _log(exc.error.message)
                    lost = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                drain = Drain(read, write, drain_timeout, at_end=bridge.listen.end)
                async with anyio.create_task_group() as serving:
                    serving.start_soon(drain.pump_in)
                    serving.start_soon(drain.pump_out)
                    await server.run(drain.server_read, drain.server_write, bridge.options(server))
                tg.cancel_scope.cancel()
            if lost:
                _log("zotd closed the connection")
                return 1
            return 0
    except ZotdError as exc:
        hint = " (pass --token or set ZOTD_TOKEN)" if exc.code == "unauthorized" else ""
        _log(f"{exc.message}{hint}")
        return 1
