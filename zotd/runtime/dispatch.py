"""What each agent request does: a table from request type to handler.

The session (:mod:`zotd.runtime.session`) reads a request, asks
:func:`refusal` whether the connection may send it now, and runs it with
:func:`dispatch`, which looks its handler up in :data:`HANDLERS`. Two
requests are the session's own and have no handler here: ``call_tool``
(the hot path, without a task) and ``cancel`` (answered at once).

A handler gets the connection (:class:`Connection`: its hub, its state),
the decoded request and the raw line (for payloads passed on untouched),
and returns the reply's ``data``, or raises :class:`RequestError`.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec
import trio

from .. import AGENT_PROTOCOL_VERSION, __version__
from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep
from . import admin, skills
from .hub import Hub
from .workspace import Workspace

log = logging.getLogger(__name__)

Code = ap.ErrorCode


class Connection(Protocol):
    """What a handler may see and change of one agent connection.

    It is also what a workspace takes push frames through (its
    ``Subscriber``): :meth:`push` and :meth:`deliver`.
    """

    hub: Hub
    #: A serial number, for logs.
    number: int
    #: The workspace joined by ``hello`` (``None`` before, or with ``attach=false``).
    workspace: Workspace | None
    authenticated: bool
    subscribed: bool
    #: What its ``hello`` said it can do (``interactive``, ``host_tools``).
    capabilities: frozenset[str]
    #: Set once the connection has ended.
    done: trio.Event

    def push(self, frame: bytes) -> None:
        """Queues an encoded push frame if the client subscribed; never blocks."""
        ...

    def deliver(self, frame: bytes) -> None:
        """Queues an encoded push frame meant for this client alone; never blocks."""
        ...


Handler = Callable[[Connection, Any, bytes], Awaitable[msgspec.Struct]]

#: Requests (besides ``call_tool``) that ``cancel`` may stop; the others
#: (``ext_*`` changes, once begun, are carried through) run to the end.
CANCELLABLE: frozenset[type[ap.Request]] = frozenset({ap.InvokeCommand, ap.Intercept})

#: Requests that need no workspace.
NO_WORKSPACE: frozenset[type[ap.Request]] = frozenset(
    {ap.Hello, ap.Ping, ap.Status, ap.Shutdown, ap.Subscribe, ap.CancelCall}
)


def refusal(conn: Connection, req: ap.Request) -> tuple[str, str] | None:
    """Why the connection may not send ``req`` now (an error code and
    message), or ``None``. ``hello`` is not asked about: it is its own gate."""
    if isinstance(req, ap.Ping):
        return None
    if not conn.authenticated:
        return (Code.HELLO_REQUIRED, "send `hello` first")
    if conn.hub.shutting_down:
        return (Code.SHUTTING_DOWN, "zotd is shutting down")
    if conn.workspace is None and type(req) not in NO_WORKSPACE:
        return (
            Code.BAD_REQUEST,
            "this connection joined no workspace (hello with attach=false)",
        )
    return None


async def dispatch(conn: Connection, req: ap.Request, line: bytes) -> msgspec.Struct:
    """Runs ``req`` (already let through by :func:`refusal`) and returns its reply data.

    Cancellation is the handler's: a cancelled request stops where it
    waits (an ``invoke_command`` withdraws its question from the
    extension, see :meth:`Workspace.invoke_command`) and re-raises.

    Raises:
        RequestError: the request failed; its code and message are the reply.
    """
    handler = HANDLERS.get(type(req))
    if handler is None:
        raise RequestError(Code.UNKNOWN_COMMAND, f"unhandled request {type(req).__name__}")
    return await handler(conn, req, line)


def _joined(conn: Connection) -> Workspace:
    assert conn.workspace is not None, "refusal() lets no workspace request through without one"
    return conn.workspace


# --- the connection's own -------------------------------------------------------------


async def _hello(conn: Connection, req: ap.Hello, line: bytes) -> ap.HelloData:
    hub = conn.hub
    if conn.authenticated:
        raise RequestError(Code.BAD_REQUEST, "`hello` was already sent on this connection")
    token = hub.config.token
    if token is not None and not hmac.compare_digest((req.token or "").encode(), token.encode()):
        raise RequestError(Code.UNAUTHORIZED, "a valid `token` is required")
    if req.protocol_version != AGENT_PROTOCOL_VERSION:
        raise RequestError(
            Code.BAD_REQUEST,
            f"protocol_version {req.protocol_version} is not supported; "
            f"this zotd speaks {AGENT_PROTOCOL_VERSION}",
        )
    if hub.shutting_down:
        raise RequestError(Code.SHUTTING_DOWN, "zotd is shutting down")
    conn.capabilities = frozenset(req.capabilities)
    if not req.attach:
        conn.authenticated = True
        return ap.HelloData(AGENT_PROTOCOL_VERSION, __version__, None, os.getpid())
    root = _workspace_root(req.cwd, hub.cwd)
    conn.authenticated = True
    ws = hub.join_workspace(root, provider=req.provider, model=req.model)
    conn.workspace = ws
    await ws.started.wait()
    if ws.crashed is not None:
        conn.workspace, conn.authenticated = None, False
        ws.release(conn)
        raise RequestError(Code.INTERNAL, f"the workspace {root} failed: {ws.crashed}")
    if conn.subscribed:
        ws.subscribers.add(conn)
    ws.host_calls.agent_joined(conn)
    log.info("client %d (%s) joined %s", conn.number, req.client or "?", root)
    await ws.wait_settled()
    return ap.HelloData(AGENT_PROTOCOL_VERSION, __version__, str(root), os.getpid())


def _workspace_root(cwd: str | None, default: Path) -> Path:
    if cwd is None:
        return default
    path = Path(cwd)
    if not path.is_absolute():
        raise RequestError(Code.BAD_REQUEST, f"`cwd` must be an absolute path, not {cwd!r}")
    if not path.is_dir():
        raise RequestError(Code.BAD_REQUEST, f"`cwd` {cwd!r} is not a directory")
    return Path(os.path.realpath(path))


async def _ping(conn: Connection, req: ap.Ping, line: bytes) -> ap.PingData:
    return ap.PingData()


async def _status(conn: Connection, req: ap.Status, line: bytes) -> ap.StatusData:
    return conn.hub.status()


async def _subscribe(conn: Connection, req: ap.Subscribe, line: bytes) -> ap.Empty:
    on = req.notifications
    conn.subscribed = on
    ws = conn.workspace
    if ws is not None:
        (ws.subscribers.add if on else ws.subscribers.discard)(conn)
    return ap.Empty()


async def _shutdown(conn: Connection, req: ap.Shutdown, line: bytes) -> ap.Empty:
    log.info("client %d asked for shutdown", conn.number)
    conn.hub.request_shutdown()
    return ap.Empty()


# --- the workspace's --------------------------------------------------------------------


async def _list_extensions(conn: Connection, req: ap.ListExtensions, line: bytes) -> msgspec.Struct:
    return _joined(conn).list_extensions()


async def _list_commands(conn: Connection, req: ap.ListCommands, line: bytes) -> msgspec.Struct:
    return _joined(conn).list_commands()


async def _list_tools(conn: Connection, req: ap.ListTools, line: bytes) -> msgspec.Struct:
    return _joined(conn).list_tools()


async def _invoke_command(conn: Connection, req: ap.InvokeCommand, line: bytes) -> msgspec.Struct:
    return await _joined(conn).invoke_command(req.name, req.args, conn)


async def _emit_event(conn: Connection, req: ap.EmitEvent, line: bytes) -> msgspec.Struct:
    return _joined(conn).emit_event(req.event, ap.event_payload(line))


async def _intercept(conn: Connection, req: ap.Intercept, line: bytes) -> msgspec.Struct:
    if req.event not in ep.INTERCEPTABLE:
        raise RequestError(
            Code.BAD_REQUEST,
            f"cannot intercept {req.event!r}: only {', '.join(sorted(ep.INTERCEPTABLE))}",
        )
    return await _joined(conn).intercept(req.event, ap.event_payload(line))


async def _host_tool_result(
    conn: Connection, req: ap.HostToolResult, line: bytes
) -> msgspec.Struct:
    return _joined(conn).host_calls.on_result(conn, req)


async def _list_skills(conn: Connection, req: ap.ListSkills, line: bytes) -> msgspec.Struct:
    return skills.list_skills(_joined(conn))


async def _panel_input(
    conn: Connection, req: ap.PanelKey | ap.PanelResize | ap.PanelClose, line: bytes
) -> ap.Empty:
    _joined(conn).panel_input(conn, req)
    return ap.Empty()


# --- ext_*: see zotd.runtime.admin --------------------------------------------------


async def _ext_install(conn: Connection, req: ap.ExtInstall, line: bytes) -> msgspec.Struct:
    return await admin.install(conn.hub, _joined(conn), req.source, req.scope)


async def _ext_remove(conn: Connection, req: ap.ExtRemove, line: bytes) -> msgspec.Struct:
    return await admin.remove(conn.hub, _joined(conn), req.name)


async def _ext_enable(conn: Connection, req: ap.ExtEnable, line: bytes) -> msgspec.Struct:
    return await admin.set_enabled(conn.hub, _joined(conn), req.name, True)


async def _ext_disable(conn: Connection, req: ap.ExtDisable, line: bytes) -> msgspec.Struct:
    return await admin.set_enabled(conn.hub, _joined(conn), req.name, False)


async def _ext_reload(conn: Connection, req: ap.ExtReload, line: bytes) -> msgspec.Struct:
    return await admin.reload(conn.hub, _joined(conn), req.name)


async def _ext_trust(conn: Connection, req: ap.ExtTrust, line: bytes) -> msgspec.Struct:
    return await admin.trust_project(conn.hub, _joined(conn))


async def _ext_logs(conn: Connection, req: ap.ExtLogs, line: bytes) -> msgspec.Struct:
    return await admin.logs(conn.hub, _joined(conn), req.name, req.lines)


async def _ext_env(conn: Connection, req: ap.ExtEnv, line: bytes) -> msgspec.Struct:
    return await admin.env(conn.hub, _joined(conn), req.name, req.allow, req.deny)


async def _ext_dev(conn: Connection, req: ap.ExtDev, line: bytes) -> msgspec.Struct:
    return await admin.dev(conn.hub, _joined(conn), conn, req.dir)


#: Request type -> handler. ``call_tool`` and ``cancel`` are the session's.
HANDLERS: Mapping[type[ap.Request], Handler] = {
    ap.Hello: _hello,
    ap.Ping: _ping,
    ap.Status: _status,
    ap.Subscribe: _subscribe,
    ap.Shutdown: _shutdown,
    ap.ListExtensions: _list_extensions,
    ap.ListCommands: _list_commands,
    ap.ListTools: _list_tools,
    ap.InvokeCommand: _invoke_command,
    ap.EmitEvent: _emit_event,
    ap.Intercept: _intercept,
    ap.HostToolResult: _host_tool_result,
    ap.ListSkills: _list_skills,
    ap.PanelKey: _panel_input,
    ap.PanelResize: _panel_input,
    ap.PanelClose: _panel_input,
    ap.ExtInstall: _ext_install,
    ap.ExtRemove: _ext_remove,
    ap.ExtEnable: _ext_enable,
    ap.ExtDisable: _ext_disable,
    ap.ExtReload: _ext_reload,
    ap.ExtTrust: _ext_trust,
    ap.ExtLogs: _ext_logs,
    ap.ExtEnv: _ext_env,
    ap.ExtDev: _ext_dev,
}
