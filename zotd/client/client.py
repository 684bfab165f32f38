"""The client library's API: :class:`Client` (one method per request) and :func:`connect`.

Example::

    async with zotd.client.connect(cwd="/path/to/project", client="my-agent/1.0") as zot:
        tools = await zot.list_tools()
        result = await zot.call_tool("weather", {"city": "Berlin"})

Every method sends one request, built from the protocol's Struct for it
(:mod:`zotd.protocol.agent`), and returns the typed ``data`` of its reply; a
failed reply raises :class:`ZotdError` with the protocol's error ``code``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec

from .. import AGENT_PROTOCOL_VERSION
from ..model.paths import Paths, check_socket_path
from ..protocol import agent as ap
from ..protocol import extension as ep
from . import autostart
from .connection import decode_data, tag_of
from .errors import NotRunning, ZotdError
from .transport import Transport

T = TypeVar("T")

#: The ``id`` a request is built with; the connection gives it its own.
_NEW = 0

_encode = msgspec.json.Encoder().encode
_EMIT_EVENT = tag_of(ap.EmitEvent)
_INTERCEPT = tag_of(ap.Intercept)


class Client(Transport):
    """One connection to zotd. Use :func:`connect` to make one.

    A client made by hand must have :meth:`run` running in a task beside the
    requests.

    Requests may be sent from many tasks at once; each waits for its own
    reply. A request sent while the connection is idle is written at once;
    requests sent while a write is under way go out together in the next.
    """

    #: The reply to ``hello``, once sent.
    hello_data: ap.HelloData | None = None

    async def request(self, type: str, **fields: Any) -> Any:
        """Sends any request and returns its reply's ``data`` (decoded JSON).

        Raises:
            ZotdError: the daemon answered with an error, or the connection was lost.
        """
        return msgspec.json.decode((await self._call_fields(type, fields)).data)

    async def _typed(self, cls: type[T], request: ap.Request) -> T:
        return decode_data(cls, (await self._call(request)).data, type(request))

    # --- one method per request ---------------------------------------------------

    async def hello(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        provider: str = "",
        model: str = "",
        client: str = "",
        token: str | None = None,
        attach: bool = True,
        capabilities: Sequence[str] = (),
    ) -> ap.HelloData:
        """Joins the workspace of ``cwd`` (the daemon's own if ``None``).

        ``capabilities``: ``interactive`` (this agent can show UI),
        ``host_tools`` (it answers ``host_tool_call`` pushes).
        Returns once its extensions are ready (or their ready grace passed).
        """
        request = ap.Hello(
            id=_NEW,
            protocol_version=AGENT_PROTOCOL_VERSION,
            cwd=None if cwd is None else _absolute(cwd),
            provider=provider,
            model=model,
            client=client,
            token=token,
            attach=attach,
            capabilities=list(capabilities),
        )
        self.hello_data = await self._typed(ap.HelloData, request)
        return self.hello_data

    async def ping(self) -> bool:
        """Whether the daemon answers."""
        return (await self._typed(ap.PingData, ap.Ping(id=_NEW))).pong

    async def status(self) -> ap.StatusData:
        """The daemon's pid, version, socket and workspaces."""
        return await self._typed(ap.StatusData, ap.Status(id=_NEW))

    async def list_extensions(self) -> list[ap.ExtensionInfo]:
        """The workspace's extensions with their live state."""
        return (await self._typed(ap.ExtensionsData, ap.ListExtensions(id=_NEW))).extensions

    async def list_commands(self) -> list[ap.CommandInfo]:
        """The workspace's slash commands."""
        return (await self.list_commands_data()).commands

    async def list_tools(self) -> list[ap.ToolInfo]:
        """The workspace's tools."""
        return (await self.list_tools_data()).tools

    async def list_commands_data(self) -> ap.CommandsData:
        """The workspace's slash commands, and the registrations hidden
        because another holds the name (``shadowed``)."""
        return await self._typed(ap.CommandsData, ap.ListCommands(id=_NEW))

    async def list_tools_data(self) -> ap.ToolsData:
        """The workspace's tools, and the registrations hidden because
        another holds the name (``shadowed``)."""
        return await self._typed(ap.ToolsData, ap.ListTools(id=_NEW))

    async def invoke_command(self, name: str, args: str = "") -> ap.InvokeData:
        """Runs a slash command (``name`` with or without the ``/``)."""
        request = ap.InvokeCommand(id=_NEW, name=name.removeprefix("/"), args=args)
        return await self._typed(ap.InvokeData, request)

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: Callable[[ap.ToolProgressPush], object] | None = None,
    ) -> ap.CallData:
        """Calls a tool with a JSON object of arguments.

        ``on_progress`` is called (in the task reading the connection: keep it
        quick) with each ``tool_progress`` frame the tool sends; without it,
        they go to :meth:`notifications`. Cancelling the call (a cancel
        scope or timeout around it) tells zotd, which tells the extension
        (so does cancelling :meth:`invoke_command` or :meth:`intercept`).
        """
        # The hot path: no **kwargs, one encode of the arguments, one decode.
        raw = msgspec.Raw(_encode(args if type(args) is dict else dict(args or {})))
        request = ap.CallTool(id=_NEW, name=name, args=raw, timeout_s=timeout_s)
        reply = await self._call(request, on_progress)
        return decode_data(ap.CallData, reply.data, ap.CallTool)

    async def emit_event(self, event: str, **payload: Any) -> list[str]:
        """Sends a lifecycle event; returns the extensions it was queued for."""
        # Its fields go to the extensions as given (see zotd.client.connection).
        reply = await self._call_fields(_EMIT_EVENT, {"event": event, **payload})
        return decode_data(ap.EmitData, reply.data, _EMIT_EVENT).delivered

    async def intercept(
        self, tool_name: str, tool_args: Mapping[str, Any] | None = None, *, tool_id: str = ""
    ) -> ap.InterceptData:
        """Asks the guards whether a tool call may run; ``args`` of the reply
        holds the arguments to run it with if a guard rewrote them."""
        return await self.intercept_event(
            "tool_call", tool_id=tool_id, tool_name=tool_name, tool_args=dict(tool_args or {})
        )

    async def intercept_event(self, event: str, **payload: Any) -> ap.InterceptData:
        """Asks the guards whether an event may go ahead: ``tool_call``,
        ``turn_start`` (``step=``) or ``assistant_message`` (``text=``; the
        reply's ``text`` is what to show the user if a guard replaced it)."""
        # Its fields go to the guards as given (see zotd.client.connection).
        reply = await self._call_fields(_INTERCEPT, {"event": event, **payload})
        return decode_data(ap.InterceptData, reply.data, _INTERCEPT)

    async def panel_key(
        self, panel_id: str, key: str, *, text: str = "", extension: str = ""
    ) -> None:
        """Sends a key pressed in a panel this connection opened."""
        await self._call(
            ap.PanelKey(id=_NEW, panel_id=panel_id, key=key, text=text, extension=extension)
        )

    async def panel_resize(
        self, panel_id: str, width: int, height: int, *, extension: str = ""
    ) -> None:
        """Tells a panel's extension the panel's size, in cells."""
        await self._call(
            ap.PanelResize(
                id=_NEW, panel_id=panel_id, width=width, height=height, extension=extension
            )
        )

    async def panel_close(self, panel_id: str, *, extension: str = "") -> None:
        """Closes a panel this connection opened."""
        await self._call(ap.PanelClose(id=_NEW, panel_id=panel_id, extension=extension))

    async def subscribe(self, notifications: bool = True) -> None:
        """Turns push frames on (see :meth:`notifications`)."""
        await self._call(ap.Subscribe(id=_NEW, notifications=notifications))

    async def ext_install(self, source: str, *, scope: str = "global") -> ap.ExtChangeData:
        """Installs an extension from a directory or git URL, and starts it."""
        return await self._typed(
            ap.ExtChangeData, ap.ExtInstall(id=_NEW, source=source, scope=scope)
        )

    async def ext_remove(self, name: str) -> ap.ExtChangeData:
        """Stops an installed extension and deletes its directory."""
        return await self._typed(ap.ExtChangeData, ap.ExtRemove(id=_NEW, name=name))

    async def ext_enable(self, name: str) -> ap.ExtChangeData:
        """Enables an extension in its manifest and starts it."""
        return await self._typed(ap.ExtChangeData, ap.ExtEnable(id=_NEW, name=name))

    async def ext_disable(self, name: str) -> ap.ExtChangeData:
        """Disables an extension in its manifest and stops it."""
        return await self._typed(ap.ExtChangeData, ap.ExtDisable(id=_NEW, name=name))

    async def ext_reload(self, name: str | None = None) -> list[ap.ExtensionInfo]:
        """Restarts one extension, or all, from disk; returns them once ready."""
        return (await self._typed(ap.ExtReloadData, ap.ExtReload(id=_NEW, name=name))).extensions

    async def ext_trust(self) -> list[ap.ExtensionInfo]:
        """Trusts this workspace's project-local extensions as they are now, and starts them."""
        return (await self._typed(ap.ExtReloadData, ap.ExtTrust(id=_NEW))).extensions

    async def ext_logs(self, name: str, lines: int = 100) -> ap.LogsData:
        """The end of an extension's log."""
        return await self._typed(ap.LogsData, ap.ExtLogs(id=_NEW, name=name, lines=lines))

    async def ext_env(
        self, name: str, *, allow: Sequence[str] = (), deny: Sequence[str] = ()
    ) -> ap.EnvData:
        """The variables extension ``name`` is let see beyond the allowlist
        (names only); ``allow`` and ``deny`` change them."""
        return await self._typed(
            ap.EnvData, ap.ExtEnv(id=_NEW, name=name, allow=list(allow), deny=list(deny))
        )

    async def ext_dev(self, directory: str | os.PathLike[str]) -> ap.ExtChangeData:
        """Runs the extension in ``directory`` for this workspace alone,
        restarted whenever its files change, until this connection closes;
        returns once it is ready. What happens then comes as
        :class:`~zotd.protocol.agent.ExtDevPush` frames in :meth:`notifications`."""
        return await self._typed(ap.ExtChangeData, ap.ExtDev(id=_NEW, dir=_absolute(directory)))

    async def list_skills(self) -> list[ap.SkillInfo]:
        """Every skill this workspace's extensions ship."""
        return (await self._typed(ap.SkillsData, ap.ListSkills(id=_NEW))).skills

    async def host_tool_result(
        self, call_id: str, content: Sequence[ep.Block], *, is_error: bool = False
    ) -> None:
        """Answers a ``host_tool_call`` push with the result of this agent's tool."""
        await self._call(
            ap.HostToolResult(id=_NEW, call_id=call_id, content=list(content), is_error=is_error)
        )

    async def shutdown(self) -> None:
        """Asks the daemon to stop gracefully."""
        await self._call(ap.Shutdown(id=_NEW))


def _absolute(path: str | os.PathLike[str]) -> str:
    # Pure string work (joins with the cwd); no file system access.
    return os.path.abspath(path)


@asynccontextmanager
async def connect(
    socket: str | os.PathLike[str] | None = None,
    *,
    hello: bool = True,
    cwd: str | os.PathLike[str] | None = None,
    provider: str = "",
    model: str = "",
    client: str = "zotd.client",
    token: str | None = None,
    attach: bool = True,
    start: bool | None = None,
    capabilities: Sequence[str] = (),
) -> AsyncIterator[Client]:
    """Connects to zotd (and says ``hello`` unless ``hello=False``).

    If no daemon answers, one is started in the background (see
    :mod:`zotd.client.autostart`) and waited for, unless ``start=False`` or
    ``$ZOTD_NO_AUTOSTART=1``.

    The client's reader and writer run in a task group of their own while
    the ``async with`` body runs. Leaving the body, by any way (its end, an
    exception, cancellation), cancels them and closes the socket at once;
    zotd then gives up whatever this connection still had in flight. A
    request given up inside the body (cancelled, timed out) sends zotd a
    ``cancel`` for it first (see :meth:`Client.call_tool`).

    Cancellation while connecting, starting a daemon or saying ``hello``
    closes whatever socket was opened and is re-raised; a daemon already
    spawned keeps starting, in its own session, for the next client (see
    :func:`~zotd.client.autostart.start_daemon`).

    Args:
        socket: the socket path (default: ``$ZOTD_SOCKET``, else the user runtime dir).
        hello: send ``hello`` right away with the fields below.
        cwd: the project directory (default: this process's cwd).
        token: needed only if the daemon was configured with one
            (default: ``$ZOTD_TOKEN``).
        capabilities: what this agent can do (see :meth:`Client.hello`).

    Raises:
        NotRunning: nothing answers on the socket (and none was to be started).
        ZotdError: ``hello`` failed; ``cannot_start`` if a daemon could not be started.
    """
    path = Path(socket) if socket is not None else Paths.from_env().socket
    try:
        check_socket_path(path)
    except ValueError as exc:
        raise ZotdError("cannot_connect", str(exc)) from None
    try:
        stream = await anyio.connect_unix(path)
    except (FileNotFoundError, ConnectionRefusedError):
        if not autostart.enabled(start):
            raise NotRunning(path) from None
        try:
            stream = await autostart.start_daemon(path)
        except autostart.StartError as exc:
            raise ZotdError("cannot_start", f"cannot start zotd: {exc}") from None
    except OSError as exc:
        raise ZotdError(
            "cannot_connect", f"cannot connect to {path}: {exc.strerror or exc}"
        ) from None
    try:
        async with stream, anyio.create_task_group() as tg:
            zot = Client(stream)
            tg.start_soon(zot.run)
            try:
                if hello:
                    await zot.hello(
                        cwd=cwd if cwd is not None else os.getcwd(),
                        provider=provider,
                        model=model,
                        client=client,
                        token=token if token is not None else os.environ.get("ZOTD_TOKEN"),
                        attach=attach,
                        capabilities=capabilities,
                    )
                yield zot
            finally:
                tg.cancel_scope.cancel()
                zot._close_pushes()
    except BaseExceptionGroup as group:
        # The reader task never raises, so a group holds the caller's own
        # exception: hand it back as itself.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
