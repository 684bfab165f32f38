"""Shared extensions: one process for every workspace of the daemon.

An extension whose scope is ``shared`` (its manifest's ``scope``, or
``[extensions.NAME] scope`` in ``zotd.toml``; by default an MCP server that
is not project-local) runs once per daemon, not once per workspace. The
:class:`SharedPool` (the hub's) holds them, keyed by name *and* directory:
two workspaces share a process only if they found the very same copy (a
project-local shared extension is shared by the workspaces of that project
alone; a workspace whose copy of the name lives elsewhere gets its own).
Each process runs in the hub's nursery, not a workspace's (workspaces come
and go), under one restart loop (:func:`.keeper.keep`): its restart policy
counts once.

Every workspace that uses it holds the same :class:`Extension` object in
its ``extensions``: its calls, commands, events, intercepts and panel input
go to the one process (request ids come from its one pending table), each
event stamped with its own workspace's ``cwd``. What the process reports
goes to every workspace using it (:class:`Shared` is its fan-out host):
registrations (each workspace's registry holds them, with its own
shadowing), state changes, exits, ``notify``. What belongs to one agent
goes to that agent's workspace: a panel's frames to the workspace where it
is open; an ext -> host ``call_tool`` and a spontaneous ``open_panel``,
``submit``, ``submit_slash`` or ``clear_notes`` to the workspace of the
agent whose tool call it is serving (:attr:`Extension.serving`), else to
the first workspace that uses it (``call_tool``) or to every one (the
rest). A cancel of a ``call_tool`` goes to every workspace (each ignores
an id it does not know).

Attaching a workspace replays what the process registered this run
(:attr:`Extension.registrations`) into that workspace's registry; its
subscriptions need no replay (they are the extension's own). Detaching (the
workspace stopping, or finding something else under that name) drops its
names there; the last workspace to detach stops the process gracefully.
There is no grace period: a workspace already waits ``idle_timeout``
without clients before it stops, and a workspace that starts later starts
the process again.

The same copy with another manifest or program than the one running (it
changed on disk since) is not silently served by the old process: the
workspace that finds the change restarts the process with it, once, for
every workspace using it (as a refresh restarts a workspace's own).

``hello_ack`` to a shared process names no single project: ``cwd`` is the
extension's own directory, and ``provider`` and ``model`` are those of the
workspace that first used it; each event and intercept carries its
workspace's ``cwd``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .. import EXTENSION_PROTOCOL_VERSION, __version__
from ..model.manifest import Found, Sharing, runs_nothing
from ..protocol import agent as ap
from ..protocol import extension as ep
from . import keeper
from .extension import Extension
from .one_way import opener

if TYPE_CHECKING:
    from .workspace import Context, Workspace

log = logging.getLogger(__name__)

#: What a shared process is known by: its name and the directory of its copy.
Key = tuple[str, Path]

#: The admin operations each shared extension remembers having reloaded it
#: for (so that one ``zot ext reload``, refreshing every workspace, restarts
#: it once); a few suffice, as they are checked within one operation.
MAX_OPS = 16


def shares(found: Found) -> bool:
    """Whether ``found`` runs as a shared process: its sharing (the
    manifest's, with ``zotd.toml``'s override applied by discovery) is
    ``shared``, and it has a process to share (sound, enabled, trusted, and
    names a program). Any other copy, even of a shared extension, is the
    workspace's own: listed there as failed, disabled or untrusted."""
    m = found.manifest
    return (
        found.sharing == Sharing.SHARED
        and m is not None
        and m.enabled
        and not found.error
        and not found.untrusted
        and not runs_nothing(found)
    )


class Shared:
    """One shared extension: its current process, the workspaces using it,
    and the host that reports to all of them.

    Args:
        pool: the daemon's pool (its nursery runs the restart loop).
        key: the extension's name and directory.
        found: what to run.
    """

    def __init__(self, pool: SharedPool, key: Key, found: Found) -> None:
        self.key = key
        self.name = key[0]
        self.found = found
        #: The workspaces using it, in the order they attached.
        self.attached: dict[Workspace, None] = {}
        #: The last admin operations that reloaded it (see :data:`MAX_OPS`).
        self.ops: deque[object] = deque(maxlen=MAX_OPS)
        #: Set once the last workspace detached: it is not restarted any more.
        self.closed = False
        self._pool = pool
        self._lock = trio.Lock()
        self.ext = self._make()

    # --- lifetime -----------------------------------------------------------------

    def _make(self) -> Extension:
        ext = keeper.build(self.found, self, self._pool.ctx)
        ext.workspaces = max(1, len(self.attached))
        return ext

    def start(self) -> None:
        """Starts its restart loop, with :attr:`ext`, in the pool's nursery."""
        self._pool.start_soon(
            partial(
                keeper.keep,
                self.ext,
                self._pool.ctx.config,
                current=self._current,
                renew=self._renew,
                changed=self.on_changed,
            )
        )

    def _current(self, ext: Extension) -> bool:
        return ext is self.ext and not self.closed

    def _renew(self, old: Extension) -> Extension:
        self.ext = self._make()
        for ws in self.attached:
            ws.adopt(self.ext)
        return self.ext

    def join(self, ws: Workspace) -> None:
        """``ws`` uses it from now on: what it registered is replayed into
        ``ws``'s registry, and every workspace using it sees the new count."""
        self.attached[ws] = None
        ext = self.ext
        ext.workspaces = len(self.attached)
        ws.adopt(ext)
        for frame in ext.registrations:
            if isinstance(frame, ep.RegisterTool):
                reason = ws.on_register_tool(ext, frame)
            else:
                reason = ws.on_register_command(ext, frame)
            if reason is not None:
                ext.note(f"in workspace {ws.root}: {reason}")
        self.on_changed(ext)

    def leave(self, ws: Workspace) -> None:
        """``ws`` no longer uses it: its names are dropped from ``ws``'s
        registry and its panels there closed; the others see the new count."""
        self.attached.pop(ws, None)
        ext = self.ext
        if ws.extensions.get(self.name) is ext:
            ws.registry.remove(self.name)
            ws.panels.extension_stopped(self.name)
        ws.host_calls.extension_left(ext)
        ext.workspaces = max(1, len(self.attached))
        self.on_changed(ext)

    async def restart(self, found: Found, *, reload: bool, op: object | None) -> None:
        """Stops the process gracefully and starts ``found`` in its place, for
        every workspace using it; returns once the new one has settled.

        Nothing happens if ``found`` is what runs already and this is no
        reload, or a reload already done for ``op``. Restarts take turns.

        Cancellation (the caller's) leaves a stop begun where it was; the
        callers shield it (see :meth:`Workspace.refresh`).
        """
        async with self._lock:
            if self.closed:
                return
            done = op is not None and op in self.ops
            if found == self.found and (not reload or done):
                self.found.passed_over = found.passed_over
            else:
                if reload and op is not None:
                    self.ops.append(op)
                old = self.ext
                old.note(f"restarting: {'reloaded' if reload else 'its manifest changed on disk'}")
                await old.stop(ap.ErrorCode.EXTENSION_FAILED)
                if self.closed:
                    return
                self.found = found
                self.ext = self._make()
                self.ext.restarts = old.restarts + (1 if reload else 0)
                for ws in self.attached:
                    ws.adopt(self.ext)
                self.start()
            ext = self.ext
        await ext.settled.wait()

    # --- Host: what the process reports, to every workspace using it ----------------

    def _using(self, ext: Extension) -> list[Workspace]:
        """The attached workspaces that hold ``ext`` now (an old run's late
        report reaches nobody who holds its successor)."""
        return [ws for ws in self.attached if ws.extensions.get(self.name) is ext]

    def _serving(self, ext: Extension) -> Workspace | None:
        """The workspace of the agent whose call ``ext`` serves (the latest
        with UI, as panels choose), if it uses ``ext``."""
        client = opener(ext)
        if client is None:
            return None
        return next((ws for ws in self._using(ext) if client in ws.subscribers), None)

    def hello_ack(self, ext: Extension) -> ep.HelloAck:
        first = next(iter(self.attached), None)
        return ep.HelloAck(
            protocol_version=EXTENSION_PROTOCOL_VERSION,
            zot_version=__version__,
            provider=first.provider if first is not None else "",
            model=first.model if first is not None else "",
            cwd=str(ext.found.dir),
            extension_dir=str(ext.found.dir),
            data_dir=first.data_dir(ext.name) if first is not None else "",
            capabilities=[ep.CALL_TOOL],
        )

    def on_register_command(self, ext: Extension, frame: ep.RegisterCommand) -> str | None:
        return _reasons((ws, ws.on_register_command(ext, frame)) for ws in self._using(ext))

    def on_register_tool(self, ext: Extension, frame: ep.RegisterTool) -> str | None:
        return _reasons((ws, ws.on_register_tool(ext, frame)) for ws in self._using(ext))

    def on_notify(self, ext: Extension, frame: ep.Notify) -> None:
        for ws in self._using(ext):
            ws.on_notify(ext, frame)

    def on_panel(self, ext: Extension, frame: ep.PanelRender | ep.PanelClose) -> None:
        using = self._using(ext)
        open_in = [ws for ws in using if ws.panels.owners(ext.name, frame.panel_id)]
        for ws in open_in or using[:1]:  # (nowhere open: the first notes the drop)
            ws.on_panel(ext, frame)

    def on_host_call(self, ext: Extension, frame: ep.CallToolRequest | ep.CallToolCancel) -> None:
        using = self._using(ext)
        if isinstance(frame, ep.CallToolCancel):
            for ws in using:  # (each ignores an id it does not know)
                ws.on_host_call(ext, frame)
            return
        served = ext.serving.get(frame.parent_id) if isinstance(frame.parent_id, str) else None
        client = served.caller.client if served is not None else None
        theirs = [w for w in using if client is not None and client in w.subscribers]
        chosen = (theirs or using)[:1]
        if not chosen:
            ext.note(f"dropped `call_tool` {frame.name!r}: no workspace uses it now")
            return
        chosen[0].on_host_call(ext, frame)

    def on_one_way(self, ext: Extension, frame: ep.OneWay) -> None:
        serving = self._serving(ext)
        for ws in [serving] if serving is not None else self._using(ext):
            ws.on_one_way(ext, frame)

    def on_reregister(self, ext: Extension) -> None:
        for ws in self._using(ext):
            ws.on_reregister(ext)

    def on_changed(self, ext: Extension) -> None:
        for ws in self._using(ext):
            ws.on_changed(ext)

    def on_exit(self, ext: Extension) -> None:
        for ws in self._using(ext):
            ws.on_exit(ext)


def _reasons(results: Iterable[tuple[Workspace, str | None]]) -> str | None:
    """One line for the log from each workspace's verdict on a registration."""
    said = [(ws, r) for ws, r in results if r is not None]
    if not said:
        return None
    if len(said) == 1:
        return f"in workspace {said[0][0].root}: {said[0][1]}"
    return "; ".join(f"in workspace {ws.root}: {r}" for ws, r in said)


class SharedPool:
    """The daemon's shared extensions, by name and directory (the hub's)."""

    def __init__(self) -> None:
        self.entries: dict[Key, Shared] = {}
        self._nursery: trio.Nursery | None = None
        self._ctx: Context | None = None

    def open(self, nursery: trio.Nursery, ctx: Context) -> None:
        """Runs the shared processes in ``nursery`` (the hub's), made with ``ctx``."""
        self._nursery = nursery
        self._ctx = ctx

    @property
    def ctx(self) -> Context:
        """What every extension is made with (the hub's)."""
        if self._ctx is None:
            raise RuntimeError("the shared pool is not open (Hub.run is not running)")
        return self._ctx

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Runs ``fn(*args)`` in the pool's nursery (it must not raise)."""
        if self._nursery is None:
            raise RuntimeError("the shared pool is not open (Hub.run is not running)")
        self._nursery.start_soon(fn, *args)

    def holding(self, ws: Workspace, name: str) -> Shared | None:
        """The shared extension ``ws`` uses under ``name``, if any."""
        return next((s for s in self.entries.values() if s.name == name and ws in s.attached), None)

    def attach(self, ws: Workspace, found: Found) -> Extension:
        """Makes ``ws`` use the shared process of ``found`` (which
        :func:`shares`), starting it if none runs; returns its extension.
        A running one of another manifest (changed on disk) is restarted with
        ``found``, in the background."""
        key = (found.name, found.dir)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = Shared(self, key, found)
            entry.start()
        elif entry.found != found:
            self.start_soon(_restart, entry, found)
        entry.join(ws)
        return entry.ext

    async def ensure(
        self, ws: Workspace, found: Found, *, reload: bool, op: object | None
    ) -> Extension:
        """:meth:`attach`, then :meth:`Shared.restart` if ``found`` is not
        what runs or this is a reload (once per ``op``); returns the
        extension ``ws`` now holds, settled."""
        entry = self.entries.get((found.name, found.dir))
        if entry is None:
            ext = self.attach(ws, found)  # started just now: that is the reload
            if op is not None:
                self.entries[(found.name, found.dir)].ops.append(op)
            await ext.settled.wait()
        else:
            if ws not in entry.attached:
                entry.join(ws)
            await entry.restart(found, reload=reload, op=op)
        return ws.extensions[found.name]

    def detach(self, ws: Workspace, name: str) -> Extension | None:
        """``ws`` stops using its shared ``name``. Returns the extension to
        stop if ``ws`` was the last to use it (the caller stops it: the pool
        forgets it at once, so a workspace that comes meanwhile starts a new
        process); else ``None``."""
        entry = self.holding(ws, name)
        if entry is None:
            return None
        entry.leave(ws)
        if entry.attached:
            return None
        entry.closed = True
        del self.entries[entry.key]
        entry.ext.note("stopping: no workspace uses it any more")
        return entry.ext

    def forget(self, ws: Workspace, code: str = ap.ErrorCode.EXTENSION_FAILED) -> None:
        """``ws`` is gone: it detaches from everything, and what nobody uses
        any more is stopped in the pool's nursery."""
        for entry in [s for s in self.entries.values() if ws in s.attached]:
            ext = self.detach(ws, entry.name)
            if ext is not None and self._nursery is not None:
                self._nursery.start_soon(ext.stop, code)

    async def stop_all(self, code: str) -> None:
        """Stops every shared process in parallel (the daemon's shutdown);
        each is bounded by the shutdown deadlines."""
        async with trio.open_nursery() as nursery:
            for entry in list(self.entries.values()):
                entry.closed = True
                nursery.start_soon(entry.ext.stop, code)


async def _restart(entry: Shared, found: Found) -> None:
    with trio.CancelScope(shield=True):
        await entry.restart(found, reload=False, op=None)
