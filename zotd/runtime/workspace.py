"""A workspace: the extensions, registry and clients of one project directory.

The first agent ``hello`` naming a directory starts its workspace; its
extensions start concurrently, one supervisor each, in the workspace's
nursery. When the last client has gone, the workspace stops after
``idle_timeout``. Each workspace has its own registry of commands and tools
and its own subscriptions.

This module holds the lifetime: discovery, each extension's restart loop
(:mod:`zotd.runtime.keeper`), reloads, stops, the idle watch, and what the
extensions report. A shared extension (one process for every workspace:
:mod:`zotd.runtime.shared`) is held here like the others, but runs in the
hub's pool, which reports what it says to every workspace using it. The answers to requests are
:mod:`zotd.runtime.requests`; open panels are :mod:`zotd.runtime.panels`;
the coalescing of ``extension_state`` pushes is
:mod:`zotd.runtime.state_pushes`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .. import EXTENSION_PROTOCOL_VERSION, __version__
from ..model.config import BUILTIN_TOOLS
from ..model.manifest import Found
from ..model.registry import Registry
from ..protocol import agent as ap
from ..protocol import extension as ep
from . import dozing, finding, keeper, one_way, threads
from .extension import Extension, State
from .finding import Context
from .host_calls import HostCalls
from .panels import Panels, Subscriber
from .requests import Requests
from .shared import shares
from .state_pushes import StatePushes

if TYPE_CHECKING:
    from .shared import SharedPool

__all__ = ["Context", "Workspace"]  # (Context: what every workspace shares, in .finding)

log = logging.getLogger(__name__)


class Workspace(Requests):
    """The extensions of one project directory and the agents using them.

    Args:
        root: the project directory (a realpath).
        ctx: the daemon's shared settings.
        provider: the model provider the first agent named (for ``hello_ack``).
        model: the model the first agent named (for ``hello_ack``).
        shared: the daemon's shared extensions (the hub's); without it, a
            shared extension runs as the workspace's own.
    """

    def __init__(
        self,
        root: Path,
        ctx: Context,
        *,
        provider: str = "",
        model: str = "",
        shared: SharedPool | None = None,
    ) -> None:
        self.root = root
        self.provider = provider
        self.model = model
        self.extensions: dict[str, Extension] = {}
        self.subscribers: set[Subscriber] = set()
        self.clients = 0
        self.stopping = False
        self._ctx = ctx
        self._shared = shared
        self._config = ctx.config
        #: The daemon's settings.
        self.config = ctx.config
        self.registry = Registry(
            reserved_commands=ctx.config.reserved_commands, builtin_tools=BUILTIN_TOOLS
        )
        self._nursery: trio.Nursery | None = None
        self._locks: dict[str, trio.Lock] = {}
        #: Set once every extension's supervisor is spawned (or the workspace died).
        self.started = trio.Event()
        #: Why :meth:`run` died, if a bug of ours made it.
        self.crashed: str | None = None
        self._stop = trio.Event()
        self._stop_code: str = ap.ErrorCode.EXTENSION_FAILED
        self._clients_changed = trio.Event()
        #: Open panels and who opened each.
        self.panels = Panels(self.extensions)
        #: Guards that have rewritten an event (see zotd.runtime.intercept).
        self._rewriters: set[str] = set()
        #: ``extension_state`` pushes, coalesced.
        self._states = StatePushes(self.extensions, self.registry, self.subscribers, self._push)
        #: The extensions' own ``call_tool`` requests (current zot).
        self.host_calls = HostCalls(self)
        #: The last ``sequence`` given to an event of this workspace.
        self.sequence = 0
        #: Explicit extension directories of this workspace alone, ahead of the
        #: daemon's ``--ext`` ones (``zot ext dev``: :mod:`zotd.runtime.dev`).
        #: Replaced, never changed in place: :meth:`discover` reads it in a thread.
        self.dev_dirs: tuple[Path, ...] = ()
        #: Lazy extensions' caches read by the last :meth:`discover`, by name.
        self._prefetched: dict[str, tuple[Found, dozing.Prefetched]] = {}

    # --- lifetime -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the workspace until :meth:`stop_soon` or its idle timeout.

        Reads the extensions from disk (:meth:`scan`, in a worker thread),
        starts each one's supervisor, and reports started once every one is
        spawned (not yet ready: see :meth:`wait_settled`). Stopping stops
        every extension in parallel, shielded, within the shutdown deadlines
        (pending calls fail with the code given to :meth:`stop_soon`), then
        returns.

        Cancellation (the daemon's nursery, after its shutdown order) cancels
        the supervisors: each SIGKILLs its extension's process group and
        reaps it, shielded, within ``kill_timeout``; their pending calls
        fail; then :exc:`trio.Cancelled` propagates. Cancelled while reading
        the disk, it waits for the read to finish first. :attr:`started` is
        then never set (the daemon sets it, so nobody waits for it forever).
        """
        found = await self.scan()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for f in found:
                self._start(f)
            nursery.start_soon(self._idle_watch)
            nursery.start_soon(self._states.run)
            log.info("workspace %s: %d extension(s)", self.root, len(found))
            self.started.set()
            task_status.started()
            await self._stop.wait()
            self.stopping = True
            with trio.CancelScope(shield=True), trio.move_on_after(self._config.stop_bound):
                await self.stop_extensions(self._stop_code)
            nursery.cancel_scope.cancel()
        log.info("workspace %s stopped", self.root)

    async def scan(self) -> list[Found]:
        """:meth:`discover`, in a worker thread; cancellation waits for it to finish."""
        return await threads.run_sync(self.discover)

    def discover(self) -> list[Found]:
        """What the workspace's extensions are on disk now, one per name
        (:func:`.finding.find`; the lazy ones' caches are kept for their
        start). Blocks, bounded; async code calls :meth:`scan`."""
        found, self._prefetched = finding.find(
            self._ctx, self.root, self.dev_dirs, skip=self._pooled
        )
        return found

    def _pooled(self, found: Found) -> bool:
        return self._shared is not None and shares(found)

    def _new(self, found: Found) -> Extension:
        ahead = self._prefetched.pop(found.name, None)
        prefetched = ahead[1] if ahead is not None and ahead[0] is found else None
        ext = keeper.build(found, self, self._ctx, prefetched)
        self.adopt(ext)
        return ext

    def adopt(self, ext: Extension) -> None:
        """``ext`` runs under its name here from now on (a new process of
        it: its first registration replaces the names remembered)."""
        self.extensions[ext.name] = ext
        self.registry.begin(ext.name)

    def _start(self, found: Found) -> Extension:
        assert self._nursery is not None
        if self._shared is not None and shares(found):
            return self._shared.attach(self, found)
        ext = self._new(found)
        if ext.doze(self._launch):  # (its supervisor starts when wanted)
            return ext
        if not ext.run_inert():  # (one that runs nothing needs no restart loop)
            self._launch(ext)
        return ext

    def _launch(self, ext: Extension) -> None:
        """Starts ``ext``'s restart loop in the workspace's nursery."""
        assert self._nursery is not None
        keep = partial(
            keeper.keep,
            ext,
            self._config,
            current=self._current,
            renew=lambda old: self._new(old.found),
            changed=self._states.changed,
        )
        self._nursery.start_soon(keep, name=f"extension {ext.name}")

    def _current(self, ext: Extension) -> bool:
        return not self.stopping and self.extensions.get(ext.name) is ext

    async def refresh(
        self, name: str, *, reload: bool = False, op: object | None = None
    ) -> Extension | None:
        """Brings extension ``name`` in line with the disk, live.

        Re-reads the manifests. If what the workspace runs under ``name`` is
        no longer what discovery finds (installed, removed, enabled,
        disabled, or revealed by the removal of one that hid it), or if
        ``reload``, the old one is stopped gracefully (its pending calls fail
        with ``extension_failed``) and the new one started; returns once it
        is ready (or settled). Agents see the change as ``extension_state``
        pushes. Returns what now runs under ``name``, if anything.

        A shared extension (see :mod:`zotd.runtime.shared`) is restarted
        for every workspace using it, once per ``op`` (an admin operation,
        which refreshes every workspace that sees it); a workspace that no
        longer finds it there detaches, and the last to detach stops it.

        Shielded: once begun, a change is carried through even if the
        client that asked for it hangs up (it is bounded by the disk read,
        the stop deadlines and ``ready_grace``); cancellation takes effect
        when it is done, raising :exc:`trio.Cancelled` then. Refreshes of one
        name take turns; a workspace that is stopping refreshes nothing.
        """
        with trio.CancelScope(shield=True):
            ext = await self._refresh(name, reload=reload, op=op)
        return ext

    async def _refresh(self, name: str, *, reload: bool, op: object | None) -> Extension | None:
        async with self._locks.setdefault(name, trio.Lock()):
            if self.stopping:
                return None
            found = next((f for f in await self.scan() if f.name == name), None)
            if self.stopping:
                return None
            old = self.extensions.get(name)
            if old is not None and found is not None and not reload and old.found == found:
                old.found.passed_over = found.passed_over  # what it stands in for now
                return old  # unchanged
            pool = self._shared
            held = pool.holding(self, name) if pool is not None else None
            if pool is not None and found is not None and shares(found):
                if held is not None and held.key == (found.name, found.dir):
                    return await pool.ensure(self, found, reload=reload, op=op)
                await self._let_go(name)
                return await pool.ensure(self, found, reload=reload, op=op)
            await self._let_go(name)
            if found is None:
                if old is not None:
                    del self.extensions[name]
                    self.registry.forget(name)
                    self._states.removed(name)
                return None
            ext = self._start(found)  # in the old one's place in the listing
            if reload and old is not None:
                # A reload that starts nothing (disabled, untrusted, broken) is no restart.
                runs = not (found.error or found.untrusted) and (
                    found.manifest is None or found.manifest.enabled
                )
                ext.restarts = old.restarts + (1 if runs else 0)
            await ext.settled.wait()
            return ext

    async def _let_go(self, name: str) -> None:
        """Stops what runs here under ``name``: its own process gracefully, or
        detaches from a shared one (stopping it if this was its last workspace)."""
        held = self._shared.holding(self, name) if self._shared is not None else None
        if held is not None and self._shared is not None:
            last = self._shared.detach(self, name)
            if last is not None:
                await last.stop(ap.ErrorCode.EXTENSION_FAILED)
            return
        old = self.extensions.get(name)
        if old is not None:
            await old.stop(ap.ErrorCode.EXTENSION_FAILED)

    async def stop_extension(self, name: str) -> None:
        """Stops extension ``name`` gracefully and keeps it listed (as exited).

        Its pending calls fail with ``extension_failed``; it is sent
        ``shutdown``, then SIGTERM after ``shutdown_timeout`` and SIGKILL
        after ``kill_timeout`` (see :meth:`Extension.stop`). It is not
        restarted, during a backoff either.

        Shielded, like :meth:`refresh`: a stop once begun is carried through
        (within about ``shutdown_timeout`` + 2 x ``kill_timeout``); then a
        pending cancellation raises :exc:`trio.Cancelled`.
        """
        with trio.CancelScope(shield=True):
            await self._stop_extension(name)

    async def _stop_extension(self, name: str) -> None:
        async with self._locks.setdefault(name, trio.Lock()):
            ext = self.extensions.get(name)
            if ext is not None:
                await ext.stop(ap.ErrorCode.EXTENSION_FAILED)

    def stop_soon(self, code: str = ap.ErrorCode.EXTENSION_FAILED) -> None:
        """Asks :meth:`run` to stop; pending calls fail with ``code``."""
        self.stopping = True
        self._stop_code = code
        self._stop.set()

    async def stop_extensions(self, code: str) -> None:
        """Stops every extension in parallel (each bounded by the shutdown
        deadlines); detaches from the shared ones, stopping those this was
        the last workspace of."""
        async with trio.open_nursery() as nursery:
            for ext in list(self.extensions.values()):
                if self._shared is not None and shares(ext.found):  # (never stopped from here)
                    last = self._shared.detach(self, ext.name)
                    if last is not None:
                        nursery.start_soon(last.stop, code)
                else:
                    nursery.start_soon(ext.stop, code)

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Runs ``fn(*args)`` in the workspace's nursery (it ends with the
        workspace; it must not raise)."""
        if self._nursery is None:
            raise RuntimeError("the workspace is not running")
        self._nursery.start_soon(fn, *args)

    async def wait_settled(self) -> None:
        """Waits until every extension is ready or has failed, or its ready grace
        (counted from its spawn) has passed: at most about ``ready_grace``."""
        await self.started.wait()
        for ext in list(self.extensions.values()):
            if not ext.settled.is_set():  # (no checkpoint for each one settled already)
                await ext.settled.wait()

    def acquire(self) -> None:
        """A client joined."""
        self.clients += 1
        self._wake_idle_watch()

    def release(self, subscriber: Subscriber | None = None) -> None:
        """A client left; the panels it had open are closed."""
        self.clients -= 1
        if subscriber is not None:
            self.subscribers.discard(subscriber)
            self.panels.client_left(subscriber)
            self.host_calls.client_left(subscriber)
        self._wake_idle_watch()

    def _wake_idle_watch(self) -> None:
        self._clients_changed.set()
        self._clients_changed = trio.Event()

    async def _idle_watch(self) -> None:
        while True:
            changed = self._clients_changed
            if self.clients > 0:
                await changed.wait()
                continue
            with trio.move_on_after(self._config.idle_timeout) as idle:
                await changed.wait()
            if idle.cancelled_caught and self.clients == 0:
                log.info(
                    "workspace %s: no clients for %g s; stopping",
                    self.root,
                    self._config.idle_timeout,
                )
                self.stop_soon()
                return

    # --- Host: what extensions report ---------------------------------------------

    def hello_ack(self, ext: Extension) -> ep.HelloAck:
        return ep.HelloAck(
            protocol_version=EXTENSION_PROTOCOL_VERSION,
            zot_version=__version__,
            provider=self.provider,
            model=self.model,
            cwd=str(self.root),
            extension_dir=str(ext.found.dir),
            data_dir=self.data_dir(ext.name),
            capabilities=[ep.CALL_TOOL],
        )

    def data_dir(self, name: str) -> str:
        """``$ZOT_HOME/data/<name>``, made (mode 0700) if need be; "" if it cannot be."""
        # Beside the installed extensions, not inside one: it survives a
        # reinstall or an upgrade. "" if it cannot be made (the extension
        # then has none, and says so if it needs one). Inline, on the loop:
        # one mkdir in $ZOT_HOME per extension start.
        path = self._ctx.paths.home / "data" / name
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("cannot make the data directory %s: %s", path, exc)
            return ""
        return str(path)

    def on_register_command(self, ext: Extension, frame: ep.RegisterCommand) -> str | None:
        return self.registry.add_command(ext.name, frame.name, frame.description)

    def on_register_tool(self, ext: Extension, frame: ep.RegisterTool) -> str | None:
        return self.registry.add_tool(ext.name, frame.name, frame.description, frame.schema, frame)

    def on_notify(self, ext: Extension, frame: ep.Notify) -> None:
        self._push(
            ap.encode(ap.NotifyPush(extension=ext.name, level=frame.level, message=frame.message))
        )

    def on_changed(self, ext: Extension) -> None:
        if ext.state == State.STOPPING:
            self.registry.remove(ext.name)  # no new calls to what is going away
        self._states.changed(ext)

    def on_reregister(self, ext: Extension) -> None:
        self.registry.remove(ext.name)
        self.registry.begin(ext.name)

    def on_exit(self, ext: Extension) -> None:
        self.registry.remove(ext.name)
        self.panels.extension_stopped(ext.name)
        self.host_calls.extension_stopped(ext.name)
        self._states.changed(ext)

    def on_panel(self, ext: Extension, frame: ep.PanelRender | ep.PanelClose) -> None:
        self.panels.on_frame(ext, frame)

    def on_host_call(self, ext: Extension, frame: ep.CallToolRequest | ep.CallToolCancel) -> None:
        self.host_calls.on_frame(ext, frame)

    def on_one_way(self, ext: Extension, frame: ep.OneWay) -> None:
        one_way.route(self, ext, frame)

    def _push(self, frame: bytes) -> None:
        for sub in list(self.subscribers):
            sub.push(frame)
