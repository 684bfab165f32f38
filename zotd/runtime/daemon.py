"""The daemon: the socket, the workspaces, signals and the shutdown order.

Task tree (``docs/architecture.md`` draws it whole)::

    Daemon.run
    ├─ accept loop (its own cancel scope: stopping it stops accepting)
    ├─ one ClientSession.run per connection
    ├─ signal watcher (SIGTERM/SIGINT -> graceful shutdown)
    └─ one Workspace.run per project directory
       └─ one Extension.run per extension
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from itertools import count
from pathlib import Path

import trio

from .. import __version__
from ..model import service
from ..model.config import Config
from ..model.environment import with_own_python
from ..model.paths import Paths
from ..protocol import agent as ap
from .listener import (
    acquire_lock,
    adopt_unix_listener,
    bound_path,
    lock_path,
    open_unix_listener,
    peer_uid,
    socket_identity,
)
from .process import Spawner, Watchdog, spawn
from .session import ClientSession
from .workspace import Context, Workspace

log = logging.getLogger(__name__)

#: After the extensions are stopped, how long clients get to receive what
#: they are owed before their connections are closed.
FLUSH_TIMEOUT = 0.5

#: accept() errors that mean "out of resources for now": wait and retry
#: (as trio.serve_listeners does) instead of dying.
_ACCEPT_RETRY = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


class Daemon:
    """Hosts extensions for agents connecting on a Unix socket.

    Args:
        config: settings (deadlines, limits, token).
        paths: ``$ZOT_HOME``, the socket, the config file.
        explicit: extension directories given with ``--ext``; they join every
            workspace and win over installed extensions of the same name.
        spawner: starts extension processes (tests may substitute fakes); by
            default real processes, watched by a :class:`~zotd.runtime.process.Watchdog`
            so that none outlives the daemon.
        env: the environment extensions get (default: the daemon's), with
            the daemon's own interpreter first on ``PATH`` (see
            :func:`~zotd.model.environment.with_own_python`).
        cwd: the workspace of a ``hello`` without ``cwd`` (default: the daemon's).
        listen_fd: a listening Unix socket passed by the service manager
            (socket activation, :func:`~zotd.model.service.listen_fds`), served
            instead of binding ``paths.socket``; zotd never removes its file.
    """

    def __init__(
        self,
        config: Config,
        paths: Paths,
        *,
        explicit: Sequence[Path] = (),
        spawner: Spawner | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        listen_fd: int | None = None,
    ) -> None:
        self.config = config
        self.paths = paths
        self.cwd = Path(os.path.realpath(cwd or Path.cwd()))
        self.workspaces: dict[Path, Workspace] = {}
        self.sessions: set[ClientSession] = set()
        self.shutting_down = False
        #: Requests being run now, on all connections.
        self.in_flight = 0
        self._ctx = Context(
            config=config,
            paths=paths,
            explicit=[p.absolute() for p in explicit],
            spawner=spawner or spawn,
            env=with_own_python(os.environ if env is None else env),
        )
        self._shutdown = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._started_at = 0.0
        self._listen_fd = listen_fd

    async def run(
        self,
        *,
        handle_signals: bool = False,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serves until :meth:`request_shutdown`, a ``shutdown`` request or a signal.

        Reports started once the socket accepts connections, and tells a
        service manager waiting for it (``READY=1``; ``STOPPING=1`` when the
        shutdown begins; see :func:`~zotd.model.service.notify`). Shutdown stops
        accepting, stops every extension in parallel (shielded, bounded by
        the shutdown deadlines), gives clients :data:`FLUSH_TIMEOUT` to take
        their last replies, closes them, and removes the socket file (the
        one it bound; a passed socket stays).

        Raises:
            AlreadyRunning: another daemon answers on the socket.
            SocketError: the socket cannot be bound.
        """
        lock = acquire_lock(lock_path(self.paths.socket))
        try:
            if self._listen_fd is None:
                listener = await open_unix_listener(self.paths.socket)
            else:
                listener = adopt_unix_listener(self._listen_fd)
        except BaseException:
            os.close(lock)
            raise
        if self._listen_fd is None:
            identity = socket_identity(self.paths.socket)
            how = ""
        else:
            identity = None  # not ours to remove
            how = " (passed by the service manager)"
            passed = bound_path(listener)
            if passed is not None and passed != self.paths.socket:
                log.warning(
                    "the passed socket is %s, not %s: set ZOTD_SOCKET to it, or clients "
                    "will not find this daemon",
                    passed,
                    self.paths.socket,
                )
        watchdog = None
        if self._ctx.spawner is spawn:
            try:
                watchdog = Watchdog()
            except OSError as exc:
                log.warning("no watchdog process (%s): a killed daemon may leave extensions", exc)
            else:
                self._ctx = dataclasses.replace(self._ctx, spawner=watchdog)
        self._started_at = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if handle_signals:
                    nursery.start_soon(self._watch_signals)
                accepting = trio.CancelScope()
                nursery.start_soon(self._accept, listener, accepting)
                log.info(
                    "zotd %s listening on %s%s (pid %d)",
                    __version__,
                    self.paths.socket,
                    how,
                    os.getpid(),
                )
                task_status.started()
                service.notify(f"READY=1\nSTATUS=listening on {self.paths.socket}")
                await self._shutdown.wait()
                service.notify("STOPPING=1\nSTATUS=stopping the extensions")
                accepting.cancel()
                with trio.CancelScope(shield=True):
                    await self._stop_everything()
                nursery.cancel_scope.cancel()
        finally:
            if watchdog is not None:
                watchdog.close()
            with trio.CancelScope(shield=True):
                await listener.aclose()
            if identity is not None and socket_identity(self.paths.socket) == identity:
                self.paths.socket.unlink(missing_ok=True)
            os.close(lock)  # last: the socket is gone before another daemon may start
            log.info("zotd stopped")

    def request_shutdown(self) -> None:
        """Starts the graceful shutdown (idempotent)."""
        self.shutting_down = True
        self._shutdown.set()

    async def _stop_everything(self) -> None:
        log.info("shutting down: stopping %d workspace(s)", len(self.workspaces))
        with trio.move_on_after(self.config.stop_bound):  # a safety net; see stop_bound
            async with trio.open_nursery() as nursery:
                for ws in list(self.workspaces.values()):
                    nursery.start_soon(ws.stop_extensions, ap.ErrorCode.SHUTTING_DOWN)
        for session in list(self.sessions):
            session.close_soon()
        with trio.move_on_after(FLUSH_TIMEOUT):
            for session in list(self.sessions):
                await session.done.wait()

    async def _accept(self, listener: trio.SocketListener, scope: trio.CancelScope) -> None:
        serial = count(1)
        with scope:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno in _ACCEPT_RETRY:
                        log.error("accept failed (%s); retrying shortly", exc.strerror)
                        await trio.sleep(0.1)
                        continue
                    raise
                assert self._nursery is not None
                self._nursery.start_soon(self._serve, stream, next(serial))

    async def _allowed(self, stream: trio.SocketStream, number: int) -> bool:
        """Whether the peer is our own user; refuses (and closes) anyone else."""
        uid = peer_uid(stream.socket)
        if uid is None or uid == os.getuid():
            return True
        log.warning("client %d: refused a connection from uid %d", number, uid)
        message = f"zotd serves only uid {os.getuid()}; this connection is from uid {uid}"
        with trio.move_on_after(1):  # a peer that does not cooperate costs us a second
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(ap.fail(None, None, ap.ErrorCode.UNAUTHORIZED, message))
                await stream.send_eof()
                # Closing with its request unread would reset the connection
                # and lose the reply: read (and drop) until it hangs up.
                while await stream.receive_some(4096):
                    pass
        await stream.aclose()
        return False

    async def _serve(self, stream: trio.SocketStream, number: int) -> None:
        if not await self._allowed(stream, number):
            return
        session = ClientSession(self, stream, number)
        self.sessions.add(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                if self.shutting_down:
                    log.info("%s: already shutting down", signal.Signals(signum).name)
                else:
                    log.info("%s: shutting down", signal.Signals(signum).name)
                    self.request_shutdown()

    def join_workspace(self, root: Path, *, provider: str, model: str) -> Workspace:
        """Joins the workspace for ``root``, starting one if none is running.

        The caller counts as one of its clients at once (and must
        :meth:`Workspace.release` it), so it cannot go idle under them; wait
        for ``started`` and then :meth:`Workspace.wait_settled` before using it.
        """
        ws = self.workspaces.get(root)
        if ws is None or ws.stopping:
            ws = Workspace(root, self._ctx, provider=provider, model=model)
            self.workspaces[root] = ws
            assert self._nursery is not None
            self._nursery.start_soon(self._run_workspace, ws)
        ws.acquire()
        return ws

    async def _run_workspace(self, ws: Workspace) -> None:
        try:
            await ws.run()
        except Exception as exc:
            log.exception("workspace %s crashed", ws.root)
            ws.crashed = repr(exc)
        finally:
            ws.stopping = True
            ws.started.set()  # nobody waits forever for a workspace that died
            if self.workspaces.get(ws.root) is ws:
                del self.workspaces[ws.root]

    def status(self) -> ap.StatusData:
        """What ``zotd status`` shows."""
        return ap.StatusData(
            pid=os.getpid(),
            zotd_version=__version__,
            socket=str(self.paths.socket),
            uptime_s=round(trio.current_time() - self._started_at, 3),
            workspaces=[
                ap.WorkspaceStatus(
                    path=str(ws.root),
                    clients=ws.clients,
                    extensions=len(ws.extensions),
                    ready=sum(1 for e in ws.extensions.values() if e.state == "ready"),
                    processes=sum(1 for e in ws.extensions.values() if e.alive),
                )
                for _, ws in sorted(self.workspaces.items())
            ],
        )
