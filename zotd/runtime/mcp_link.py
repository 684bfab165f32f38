"""An MCP server as an extension: zotd is its MCP client.

An extension whose manifest says ``"kind": "mcp"`` is supervised like any
other (its process, log, restart policy; ``zot ext`` works on it), but
spoken to in MCP, with the ``mcp`` package's ``ClientSession`` (it runs on
anyio, so on trio), over the process's stdio (:class:`~.mcp_pipe.Pipe`) or,
for a manifest with ``url``, over streamable HTTP. :class:`McpLink` runs
that session in place of a zot extension's inbox::

    McpLink.run (in the extension's nursery; run_remote for a url)
    ├─ Pipe.read: stdout line -> JSON-RPC message -> the session
    ├─ Pipe.write: the session's messages -> stdin
    ├─ ClientSession (its dispatcher's tasks)
    ├─ McpLink._relist: tools/list and prompts/list again on list_changed
    └─ McpCalls._run: one task per request (mcp_calls.py)

Its handshake is MCP's: ``initialize`` within ``mcp_initialize_timeout``, then
``tools/list`` and ``prompts/list`` become its registrations
(:mod:`zotd.protocol.mcp_map`), and it is ready. A server that does not
answer ``initialize`` in time, or whose session breaks, is failed and
killed, and its restart policy applies. Its log notifications go to its
log; ``notifications/tools/list_changed`` (and prompts) replace its
registrations live, and agents get ``extension_state``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import mcp_types as mt
import trio
from mcp import ClientSession

from .. import __version__
from ..model.config import Config
from ..model.noise import Noise
from ..protocol import extension as ep
from ..protocol import mcp_map
from ..protocol.agent import HandshakeInfo
from .mcp_calls import McpCalls
from .mcp_pipe import Pipe
from .status import Host

if TYPE_CHECKING:
    from .extension import Extension

__all__ = ["MAX_LISTED", "McpLink"]

log = logging.getLogger(__name__)

#: The most tools (and, apart, prompts) registered from one server; pages
#: of ``tools/list`` past it are not asked for.
MAX_LISTED = 1024

#: How often a ``url`` server is pinged, and how long it may take to answer.
PING_INTERVAL = 15.0
PING_TIMEOUT = 10.0

#: The most characters of one log notification written to the extension's log.
MAX_LOG_CHARS = 2000


class McpLink:
    """The MCP client session of one MCP server extension.

    Args:
        ext: the extension (whose state and registrations it reports).
        host: where its registrations and changes go.
        config: ``hello_timeout`` (for ``initialize``), ``max_frame_bytes``.
    """

    def __init__(self, ext: Extension, *, host: Host, config: Config) -> None:
        self._ext = ext
        self._host = host
        self._config = config
        manifest = ext.found.manifest
        #: Whether it is reached at a ``url`` (no process).
        self.remote = manifest is not None and bool(manifest.url)
        #: Its requests (the extension's :class:`~.link.Link`).
        self.calls = McpCalls(ext)
        self._noise = Noise()
        self._relist_wanted = trio.Event()
        self._closed = trio.Event()

    # --- running ----------------------------------------------------------------

    async def run(
        self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream, done: trio.Event
    ) -> None:
        """Speaks MCP over the process's pipes until cancelled (the process's
        end is its supervisor's to see); sets ``done`` at the end of stdout."""
        pipe = Pipe(self._config.max_frame_bytes, self._noted)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pipe.read, stdout, done)
            nursery.start_soon(pipe.write, stdin)
            self.calls.open(nursery, pipe.close_input)
            try:
                await self._serve(nursery, pipe.read_stream, pipe.write_stream, done)
            finally:
                self.calls.closed()
                pipe.close_input()

    async def run_remote(self) -> None:
        """Speaks MCP to the manifest's ``url`` (streamable HTTP) until
        :meth:`close`, or until the connection fails (a crash: its restart
        policy applies)."""
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        manifest = self._ext.found.manifest
        assert manifest is not None
        self._ext.note(f"connecting to {manifest.url}")
        try:
            async with (
                trio.open_nursery() as nursery,
                create_mcp_http_client(headers=manifest.headers or None) as http,
            ):
                nursery.start_soon(self._close_on_request, nursery)
                async with streamable_http_client(manifest.url, http_client=http) as streams:
                    self.calls.open(nursery, self.close)
                    await self._serve(nursery, streams[0], streams[1], None)
                nursery.cancel_scope.cancel()  # (it returns only when it has failed it)
        except Exception as exc:
            if not self._closed.is_set():
                self._ext.stuck(f"lost its connection to {manifest.url} ({_why(exc)})")
        finally:
            self.calls.closed()

    async def _close_on_request(self, nursery: trio.Nursery) -> None:
        await self._closed.wait()
        nursery.cancel_scope.cancel()

    def close(self) -> None:
        """Ends :meth:`run_remote` (a stop)."""
        self._closed.set()

    async def _serve(
        self, nursery: trio.Nursery, read: Any, write: Any, ended: trio.Event | None
    ) -> None:
        """Initializes the session, registers what it lists, and serves until
        cancelled. A session that breaks fails the extension (restarted per
        its policy), unless it broke because the server's stdout ended
        (``ended``): its supervisor judges that end, by the process's exit."""
        ext = self._ext
        # Its handshake as `zot ext doctor` shows it: `initialize` answered
        # is its hello, its tools and prompts listed its ready (never a frame).
        spawned = ext.started_at if ext.started_at is not None else trio.current_time()
        record = ext.handshake = HandshakeInfo(auto_ready=True)
        session = ClientSession(
            read,
            write,
            logging_callback=self._on_log,
            message_handler=self._on_message,
            client_info=mt.Implementation(name="zotd", version=__version__),
        )
        try:
            async with session:
                timeout = self._config.mcp_initialize_timeout
                nursery.start_soon(self._settle_after_grace)
                with trio.move_on_after(timeout) as scope:
                    init = await session.initialize()
                if scope.cancelled_caught:
                    ext.stuck(f"did not answer MCP `initialize` within {timeout:g} s")
                    return
                record.hello_s = round(trio.current_time() - spawned, 3)
                server = init.server_info
                ext.capabilities = sorted(_capabilities(init.capabilities))
                named = " ".join(filter(None, [server.name, server.version]))
                ext.note(f"MCP server {named or '(unnamed)'}, protocol {init.protocol_version}")
                await self._list(session, init.capabilities)
                self.calls.ready(session)
                record.ready_s = round(trio.current_time() - spawned, 3)
                ext._mark_ready()
                nursery.start_soon(self._relist, session, init.capabilities)
                if self.remote:
                    await self._keep_alive(session)  # (raises when the connection is lost)
                await trio.sleep_forever()
        except Exception as exc:  # the session broke (a bad server, a lost connection)
            if self.remote:
                raise
            if ended is not None and ended.is_set():
                return  # its stdout ended: the process's exit says why
            if ext.running and not ext.stop_requested.is_set():
                ext.stuck(f"broke its MCP session ({_why(exc)})")

    async def _settle_after_grace(self) -> None:
        """Agents stop waiting for it after ``ready_grace``, as for a zot
        extension: a server still starting (``npx`` downloading it, say)
        does not hold up their ``hello``; its tools appear when it is ready."""
        await trio.sleep(self._config.ready_grace)
        self._ext.settled.set()

    async def _keep_alive(self, session: ClientSession) -> None:
        """Pings a ``url`` server every :data:`PING_INTERVAL` seconds; raises
        once one goes unanswered for :data:`PING_TIMEOUT` (or fails), so that
        a server that went away is seen, and reconnected per its restart
        policy, before the next call finds out."""
        while True:
            await trio.sleep(PING_INTERVAL)
            with trio.fail_after(PING_TIMEOUT):
                await session.send_ping()

    # --- registrations ------------------------------------------------------------

    async def _list(self, session: ClientSession, caps: mt.ServerCapabilities) -> None:
        """Registers the server's tools and prompts (replacing what it had)."""
        tools: list[mt.Tool] = []
        prompts: list[mt.Prompt] = []
        if caps.tools is not None:
            tools = await _pages(session.list_tools, "tools", self._ext)
        if caps.prompts is not None:
            prompts = await _pages(session.list_prompts, "prompts", self._ext)
        self.calls.prompts = {p.name: p for p in prompts}
        frames: list[ep.RegisterCommand | ep.RegisterTool] = [
            *(mcp_map.register_tool(t) for t in tools),
            *(mcp_map.register_command(p) for p in prompts),
        ]
        ext = self._ext
        if ext.registrations:
            self._host.on_reregister(ext)
        ext.registrations = frames
        for frame in frames:
            if isinstance(frame, ep.RegisterTool):
                reason = self._host.on_register_tool(ext, frame)
            else:
                reason = self._host.on_register_command(ext, frame)
            if reason is not None:
                ext.note(reason)

    async def _relist(self, session: ClientSession, caps: mt.ServerCapabilities) -> None:
        """Lists again, once per burst of ``list_changed``, until cancelled."""
        while True:
            await self._relist_wanted.wait()
            self._relist_wanted = trio.Event()
            try:
                await self._list(session, caps)
            except Exception as exc:
                self._ext.note(f"could not list its tools again: {_why(exc)}")
                continue
            self._ext.note(
                f"tools and prompts changed: {len(self._ext.registrations)} registered now"
            )
            self._host.on_changed(self._ext)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification | mt.PromptListChangedNotification):
            self._relist_wanted.set()
        elif isinstance(message, Exception):
            self._noted(f"a bad message from the server: {_why(message)}")

    async def _on_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else repr(params.data)
        source = f" {params.logger}" if params.logger else ""
        self._noted(f"[{params.level}{source}] {data[:MAX_LOG_CHARS]}")

    def _noted(self, line: str) -> bool:
        """Writes ``line`` to its log within its noise budget; ``False`` if dropped."""
        admitted, ended = self._noise.admit(trio.current_time())
        if ended:
            self._ext.note(f"dropped {ended} log lines in one second")
        if admitted:
            self._ext.note(line)
        return admitted


async def _pages(list_page: Any, what: str, ext: Extension) -> list[Any]:
    """Every page of a ``tools/list`` or ``prompts/list``, up to :data:`MAX_LISTED` items."""
    items: list[Any] = []
    cursor: str | None = None
    while True:
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await list_page(params=params)
        items.extend(getattr(page, what))
        cursor = page.next_cursor
        if not cursor:
            return items
        if len(items) >= MAX_LISTED:
            ext.note(f"lists more than {MAX_LISTED} {what}: only the first {MAX_LISTED} are used")
            return items[:MAX_LISTED]


def _capabilities(caps: mt.ServerCapabilities) -> set[str]:
    """The server's capabilities as words, for ``list_extensions``."""
    names = {"tools", "prompts", "resources", "logging", "completions"}
    return {f"mcp:{n}" for n in names if getattr(caps, n, None) is not None}


def _why(exc: BaseException) -> str:
    """One line for an exception (the first of an exception group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
