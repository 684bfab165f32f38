"""The hub: what every connection of one daemon shares.

It holds the running workspaces (joined by path, started on first use), the
daemon-wide count of requests in flight and its limit, the shutdown state,
and what ``status`` reports. Sessions and the ``ext_*`` operations get the
hub, never the :class:`~zotd.runtime.daemon.Daemon`; the daemon owns the
socket, the signals and the shutdown order, and gives the hub its nursery
(:meth:`Hub.run`).

Imports: the model, the protocol and :mod:`zotd.runtime.workspace`; nothing
that imports it back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from .. import __version__
from ..model.audit import trail_path
from ..model.config import Config
from ..model.paths import Paths
from ..protocol import agent as ap
from . import prefill
from .audit_trail import AuditTrail
from .shared import SharedPool
from .status import metrics as metrics_of
from .streams import LineBudget
from .workspace import Context, Workspace

log = logging.getLogger(__name__)

#: Seconds after its start the daemon waits before it reads the global
#: extensions ahead (:mod:`~zotd.runtime.prefill`), unless a workspace has
#: opened by then: that one reads them itself, and a prefill beside it would
#: only compete with it (for the GIL, and for the cores its extensions start
#: on). A daemon started for a client (autostart, socket activation) is
#: joined at once; one started ahead (``zotd start``, a service) reads ahead.
PREFILL_AFTER = 0.05


class Hub:
    """The workspaces, admission counters, status and shutdown state of a daemon.

    Args:
        ctx: what every workspace gets (config, paths, ``--ext`` directories,
            the spawner, the environment); :attr:`ctx` may be replaced before
            :meth:`run` (the daemon puts its watchdog in).
        cwd: the workspace of a ``hello`` without ``cwd`` (a realpath).
    """

    def __init__(self, ctx: Context, *, cwd: Path) -> None:
        self.ctx = ctx
        self.cwd = cwd
        #: The running workspaces, by root; a workspace leaves when its run ends.
        self.workspaces: dict[Path, Workspace] = {}
        #: The shared extensions: one process each for every workspace using it.
        self.shared = SharedPool()
        #: Requests being run now, on all connections.
        self.in_flight = 0
        #: The bytes all connections hold in unfinished lines (``max_buffered_bytes``).
        self.line_budget = LineBudget(ctx.config.max_buffered_bytes)
        #: Every intercept decision, written to ``$ZOT_HOME/logs/audit.jsonl``.
        self.audit = AuditTrail(
            trail_path(ctx.paths.logs_dir),
            max_bytes=ctx.config.audit_max_bytes,
            with_args=ctx.config.audit_args,
        )
        self.shutting_down = False
        self._shutdown = trio.Event()
        self._joined = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._started_at = 0.0
        #: Tasks run beside the workspaces for as long as :meth:`run` runs, each
        #: given the hub (``zotd --watch``'s watchers); they must not raise.
        self.services: list[Callable[[Hub], Awaitable[None]]] = []

    @property
    def config(self) -> Config:
        """The daemon's settings (deadlines, limits, token)."""
        return self.ctx.config

    @property
    def paths(self) -> Paths:
        """``$ZOT_HOME``, the socket, the global extensions and their logs."""
        return self.ctx.paths

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the workspaces joined from now on; returns only when cancelled.

        Reports started at once: :meth:`join_workspace` works from then on.
        Uptime counts from here.

        Cancellation cancels every workspace's run and every shared
        extension's (each kills its extensions' process groups, as
        :meth:`Workspace.run` says) and re-raises once they are gone; for a graceful stop call
        :meth:`stop_workspaces` first.
        """
        self._started_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.shared.open(nursery, self.ctx)
            nursery.start_soon(self._prefill)
            for service in self.services:
                nursery.start_soon(service, self)
            nursery.start_soon(self.audit.run)
            task_status.started()
            await trio.sleep_forever()

    async def _prefill(self) -> None:
        """Reads the global extensions ahead (the first workspace opens
        faster), unless one opens within :data:`PREFILL_AFTER`."""
        with trio.move_on_after(PREFILL_AFTER):
            await self._joined.wait()
        if not self._joined.is_set():
            await prefill.warm(self.ctx)

    # --- workspaces -----------------------------------------------------------------

    def join_workspace(self, root: Path, *, provider: str, model: str) -> Workspace:
        """Joins the workspace for ``root``, starting one if none is running.

        The caller counts as one of its clients at once (and must
        :meth:`Workspace.release` it), so it cannot go idle under them; wait
        for ``started`` and then :meth:`Workspace.wait_settled` before using it.
        """
        ws = self.workspaces.get(root)
        if ws is None or ws.stopping:
            assert self._nursery is not None, "Hub.run is not running"
            ws = Workspace(root, self.ctx, provider=provider, model=model, shared=self.shared)
            self._joined.set()
            ws.audit = self.audit
            self.workspaces[root] = ws
            self._nursery.start_soon(self._run_workspace, ws)
        ws.acquire()
        return ws

    def live_workspaces(self) -> list[Workspace]:
        """The workspaces running now, not those on their way out."""
        return [ws for ws in self.workspaces.values() if not ws.stopping]

    async def _run_workspace(self, ws: Workspace) -> None:
        try:
            await ws.run()
        except Exception as exc:
            log.exception("workspace %s crashed", ws.root)
            ws.crashed = repr(exc)
        finally:
            ws.stopping = True
            ws.started.set()  # nobody waits forever for a workspace that died
            self.shared.forget(ws)  # (it detached already, unless it died)
            if self.workspaces.get(ws.root) is ws:
                del self.workspaces[ws.root]

    async def stop_workspaces(self, code: str) -> None:
        """Stops every extension of every workspace in parallel; pending
        requests fail with ``code``. Bounded by ``stop_bound`` (a safety net:
        each extension's stop is bounded by the shutdown deadlines).

        Cancellation abandons the stops where they are (the extensions'
        own cancellation then kills their groups); the daemon calls this
        shielded.
        """
        log.info("shutting down: stopping %d workspace(s)", len(self.workspaces))
        with trio.move_on_after(self.config.stop_bound):
            async with trio.open_nursery() as nursery:
                for ws in list(self.workspaces.values()):
                    nursery.start_soon(ws.stop_extensions, code)
                nursery.start_soon(self.shared.stop_all, code)

    # --- admission ------------------------------------------------------------------

    def busy(self) -> str | None:
        """Why a new request must be answered ``busy`` (the daemon-wide limit
        is reached), or ``None`` if it may run."""
        if self.in_flight >= self.config.max_requests:
            return f"zotd has {self.in_flight} requests in flight, the most allowed; retry soon"
        return None

    def request_started(self) -> None:
        """A request was admitted: it counts until :meth:`request_done`."""
        self.in_flight += 1

    def request_done(self) -> None:
        """A request admitted with :meth:`request_started` has been answered
        (or abandoned)."""
        self.in_flight -= 1

    # --- shutdown -------------------------------------------------------------------

    def request_shutdown(self) -> None:
        """Starts the graceful shutdown (idempotent): new requests get
        ``shutting_down``, and :meth:`wait_shutdown` returns."""
        self.shutting_down = True
        self._shutdown.set()

    async def wait_shutdown(self) -> None:
        """Waits for :meth:`request_shutdown`."""
        await self._shutdown.wait()

    # --- status ---------------------------------------------------------------------

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
                    processes=sum(
                        1
                        for e in ws.extensions.values()
                        if e.alive and self.shared.holding(ws, e.name) is None
                    ),
                    metrics={
                        name: metrics_of(e)
                        for name, e in sorted(ws.extensions.items())
                        if self.shared.holding(ws, name) is None
                    },
                )
                for _, ws in sorted(self.workspaces.items())
            ],
            shared=[
                ap.SharedStatus(
                    name=entry.name,
                    dir=str(entry.key[1]),
                    state=entry.ext.state,
                    pid=entry.ext.pid if entry.ext.alive else None,
                    workspaces=sorted(str(ws.root) for ws in entry.attached),
                    metrics=metrics_of(entry.ext),
                )
                for entry in sorted(self.shared.entries.values(), key=lambda e: e.key)
            ],
        )
