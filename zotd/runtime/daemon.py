"""The daemon: the socket, signals and the shutdown order.

What the connections share (the workspaces, the limits, the shutdown
state) is the :class:`~zotd.runtime.hub.Hub`'s; the daemon owns the hub's
task and everything around the socket. Nothing imports this module but
the ``zotd`` CLI (and tests).

Task tree (``docs/architecture.md`` draws it whole)::

    Daemon.run
    ├─ Hub.run
    │  └─ one Workspace.run per project directory
    │     └─ one Extension.run per extension
    ├─ daemon_log.keep_rotated (while its stderr appends to zotd.log)
    ├─ accept loop: accept.accept_loop (in its own cancel scope: stopping
    │  it stops accepting and closes the listener; it backs off on EMFILE)
    ├─ one ClientSession.run per connection
    └─ signal watcher (SIGTERM/SIGINT -> graceful shutdown)
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping, Sequence
from itertools import count
from pathlib import Path

import msgspec
import trio

from .. import __version__
from ..model import service
from ..model.config import Config
from ..model.environment import with_own_python
from ..model.paths import Paths
from ..model.peercred import peer_uid
from ..protocol import agent as ap
from . import admin, daemon_log
from .accept import FD_RESERVE, accept_loop, raise_fd_limit, refuse
from .hub import Hub
from .listener import (
    acquire_lock,
    adopt_unix_listener,
    bound_path,
    lock_path,
    open_unix_listener,
    socket_identity,
)
from .process import Spawner, Watchdog, spawn
from .session import ClientSession
from .workspace import Context, Workspace

log = logging.getLogger(__name__)

#: After the extensions are stopped, how long clients get to receive what
#: they are owed before their connections are closed.
FLUSH_TIMEOUT = 0.5


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
        watchdog: the watchdog, if it was started already (the ``zotd``
            command starts it before it imports the daemon, so that its start
            overlaps those imports); the daemon closes it at exit. Without
            it, one is started as the daemon starts (with the default spawner).
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
        watchdog: Watchdog | None = None,
    ) -> None:
        self.config = config
        self.paths = paths
        ctx = Context(
            config=config,
            paths=paths,
            explicit=[p.absolute() for p in explicit],
            spawner=spawner or spawn,
            env=with_own_python(os.environ if env is None else env),
        )
        #: The workspaces, limits and shutdown state the sessions share.
        self.hub = Hub(ctx, cwd=Path(os.path.realpath(cwd or Path.cwd())))
        #: The connections being served.
        self.sessions: set[ClientSession] = set()
        self._nursery: trio.Nursery | None = None
        self._listen_fd = listen_fd
        self._watchdog = watchdog
        #: Connections refused since the cap was last reached (0: not at it).
        self._over_cap = 0

    @property
    def cwd(self) -> Path:
        """The workspace of a ``hello`` without ``cwd``."""
        return self.hub.cwd

    @property
    def workspaces(self) -> dict[Path, Workspace]:
        """The running workspaces, by root (the hub's)."""
        return self.hub.workspaces

    @property
    def in_flight(self) -> int:
        """Requests being run now, on all connections (the hub's count)."""
        return self.hub.in_flight

    @property
    def shutting_down(self) -> bool:
        """Whether the graceful shutdown has begun."""
        return self.hub.shutting_down

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
        accepting (the listener is closed), stops every extension in parallel
        (shielded, bounded by the shutdown deadlines), gives clients
        :data:`FLUSH_TIMEOUT` to take their last replies, closes them, and
        removes the socket file (the one it bound; a passed socket stays).

        Cancellation is no graceful shutdown: every task is cancelled at
        once. Sessions close their connections unanswered, each extension's
        run kills its process group and reaps it (shielded, within
        ``kill_timeout``), the watchdog is closed (it kills any group left),
        then the listener is closed, the socket file removed and the lock
        released, and ``Cancelled`` is re-raised. The same cleanup runs when
        an error escapes.

        Raises:
            AlreadyRunning: another daemon answers on the socket.
            SocketError: the socket cannot be bound.
        """
        watchdog, self._watchdog = self._watchdog, None
        try:
            lock = acquire_lock(lock_path(self.paths.socket))
        except BaseException:
            if watchdog is not None:
                watchdog.close()
            raise
        self._lift_fd_limit()
        try:
            await admin.clean_staging(self.paths.extensions_dir)
            if self._listen_fd is None:
                listener = await open_unix_listener(self.paths.socket)
            else:
                listener = adopt_unix_listener(self._listen_fd)
        except BaseException:
            os.close(lock)
            if watchdog is not None:
                watchdog.close()
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
        if watchdog is None and self.hub.ctx.spawner is spawn:
            try:
                watchdog = Watchdog()
            except OSError as exc:
                log.warning("no watchdog process (%s): a killed daemon may leave extensions", exc)
        if watchdog is not None:
            self.hub.ctx = msgspec.structs.replace(self.hub.ctx, spawner=watchdog)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.hub.run)
                nursery.start_soon(
                    daemon_log.keep_rotated, self.paths.daemon_log, self.config.max_log_bytes
                )
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
                await self.hub.wait_shutdown()
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
        self.hub.request_shutdown()

    async def _stop_everything(self) -> None:
        await self.hub.stop_workspaces(ap.ErrorCode.SHUTTING_DOWN)
        for session in list(self.sessions):
            session.close_soon()
        with trio.move_on_after(FLUSH_TIMEOUT):
            for session in list(self.sessions):
                await session.done.wait()

    def _lift_fd_limit(self) -> None:
        # Each connection costs an fd: raise the soft limit (often 1024, 256 on
        # macOS) so that max_connections fit, as far as the hard limit allows.
        limit = self.config.max_connections
        soft, hard = raise_fd_limit(limit + FD_RESERVE)
        if soft < limit + FD_RESERVE:
            log.warning(
                "the open-file limit is %d (hard limit %d): fewer than max_connections = %d "
                "connections fit; past it, accepting waits until connections close",
                soft,
                hard,
                limit,
            )

    async def _accept(self, listener: trio.SocketListener, scope: trio.CancelScope) -> None:
        # The loop closes the listener when ``scope`` is cancelled.
        # Connections are served in the daemon's nursery, so they outlive the
        # accepting.
        serial = count(1)
        assert self._nursery is not None

        async def serve(stream: trio.SocketStream) -> None:
            await self._serve(stream, next(serial))

        with scope:
            await accept_loop(listener, serve, self._nursery)

    async def _allowed(self, stream: trio.SocketStream, number: int) -> bool:
        """Whether the peer is our own user; refuses (and closes) anyone else."""
        uid = peer_uid(stream.socket)
        if uid is None or uid == os.getuid():
            return True
        log.warning("client %d: refused a connection from uid %d", number, uid)
        message = f"zotd serves only uid {os.getuid()}; this connection is from uid {uid}"
        await refuse(stream, ap.ErrorCode.UNAUTHORIZED, message)
        return False

    def _room(self) -> bool:
        """Whether one more connection fits under ``max_connections``; logs
        once when the cap is reached, and once when there is room again."""
        served, limit = len(self.sessions), self.config.max_connections
        if served < limit:
            if self._over_cap:
                log.warning(
                    "accepting connections again: %d were refused at max_connections = %d",
                    self._over_cap,
                    limit,
                )
                self._over_cap = 0
            return True
        if not self._over_cap:
            log.warning("refusing new connections: %d served, max_connections = %d", served, limit)
        self._over_cap += 1
        return False

    async def _serve(self, stream: trio.SocketStream, number: int) -> None:
        if not await self._allowed(stream, number):
            return
        if not self._room():
            served, limit = len(self.sessions), self.config.max_connections
            message = (
                f"zotd serves {served} connections, its limit (max_connections = {limit} "
                "in zotd.toml); close some, or raise max_connections"
            )
            await refuse(stream, ap.ErrorCode.BUSY, message)
            return
        session = ClientSession(self.hub, stream, number)
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
