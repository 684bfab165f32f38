"""Development mode: an extension restarted whenever its files change.

Two ways in, both watching a directory with :func:`~zotd.runtime.watch.keep_watching`
(one watcher task per directory, debounced, a change during a restart
coalesced into one more) and restarting that extension alone with
:meth:`Workspace.refresh` (``reload=True``), its neighbours untouched:

- ``zotd --ext DIR --watch``: :func:`watch_explicit`, a service of the hub
  (it runs in the hub's nursery, beside the workspaces, for as long as the
  daemon does). An ``--ext`` extension runs in every workspace, and there
  may be none yet when a file changes, so its watcher belongs to no
  workspace: it restarts the extension in every running workspace that
  runs it from that directory (a shared one once), and says so with the
  hub's ``say`` (the daemon's terminal).
- ``zot ext dev DIR`` (the ``ext_dev`` request): :func:`start_dev` adds DIR
  to one workspace's own explicit directories (:attr:`Workspace.dev_dirs`:
  ahead of the daemon's ``--ext`` ones, so it wins over an installed copy
  of its name as ``--ext`` does) and starts a :class:`DevSession` in that
  workspace's nursery. The session lives as long as the connection that
  asked: when the client hangs up, DIR leaves the workspace again and the
  name is refreshed (the dev copy stops; an installed copy it hid comes
  back). What it says goes to that connection alone, as ``ext_dev`` pushes.

A project-local trust question does not arise: the user named the
directory (scope ``explicit``, as ``--ext``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import trio

from ..model.errors import RequestError
from ..model.manifest import Found, Scope, load
from ..protocol import agent as ap
from . import threads
from .extension import State
from .hub import Hub
from .watch import Feed, keep_watching, watch_files
from .watch import files_text as _files
from .workspace import Workspace

log = logging.getLogger(__name__)

Code = ap.ErrorCode
Say = Callable[[str], None]

#: States in which a restarted extension counts as running, and what is added to say so.
_RUNNING: dict[str, str] = {
    State.READY: "",
    State.SLEEPING: " (asleep until first used)",
    State.STARTING: "",
}
#: States whose hint says best why it does not run (what the user must do).
_HINTED = frozenset({State.DISABLED, State.UNTRUSTED})


def outcome(ws: Workspace, name: str) -> str:
    """What runs in ``ws`` under ``name`` after a restart, in words:
    ``restarted: tools get_weather, commands /weather``, or why it did not
    start (``failed to start: ...``)."""
    ext = ws.extensions.get(name)
    if ext is None:
        return f"nothing runs under {name!r} now"
    info = ws.info_of(ext)
    if info.state in _RUNNING:
        parts = []
        if info.tools:
            parts.append("tools " + ", ".join(info.tools))
        if info.commands:
            parts.append("commands " + ", ".join(f"/{c}" for c in info.commands))
        what = ", ".join(parts) or "nothing registered"
        waiting = " (not ready yet)" if info.state == State.STARTING else ""
        return f"restarted{_RUNNING[info.state]}{waiting}: {what}"
    if info.state in _HINTED:
        return f"not started: {info.hint or info.last_error or info.state}"
    why = info.last_error or info.hint or info.state
    words = _last_words(info.log_tail)
    if words and words not in why:
        why = f"{why}; its log ends: {words}"
    return f"failed to start: {why}"


def _last_words(tail: Sequence[str]) -> str:
    """The extension's own last line in its log (not one of zotd's notes)."""
    for line in reversed(tail):
        text = line.strip()
        if text and not text.startswith("[zotd "):
            return text
    return ""


async def _name_now(directory: Path, path_env: str) -> str:
    """The name the extension in ``directory`` has now (its manifest's, or
    the directory's if the manifest does not parse)."""
    found = await threads.run_sync(load, directory, Scope.EXPLICIT, path_env)
    return found.name


def _names(old: str, new: str) -> list[str]:
    # A renamed extension: the old name goes (or what it hid comes back), then the new starts.
    return [old] if old == new else [old, new]


# --- zotd --watch ---------------------------------------------------------------------


async def watch_explicit(
    hub: Hub, *, dirs: Sequence[Path], say: Say, feed: Feed = watch_files
) -> None:
    """``zotd --watch``: watches each of ``dirs`` (the daemon's ``--ext``
    directories), one task each, until cancelled; a change restarts that
    extension wherever it runs (see the module)."""
    async with trio.open_nursery() as nursery:
        for directory in dirs:
            nursery.start_soon(_watch_one, hub, directory, say, feed)


async def _watch_one(hub: Hub, directory: Path, say: Say, feed: Feed) -> None:
    try:
        await _watch_explicit_dir(hub, directory, say, feed)
    except Exception as exc:  # a bug of ours: the daemon goes on without this watcher
        log.exception("watching %s failed", directory)
        say(f"stopped watching {directory}: {exc!r}")


async def _watch_explicit_dir(hub: Hub, directory: Path, say: Say, feed: Feed) -> None:
    path_env = hub.ctx.env.get("PATH", "")
    name = await _name_now(directory, path_env)

    async def restart(files: list[str]) -> None:
        nonlocal name
        if hub.shutting_down:
            return
        old, name = name, await _name_now(directory, path_env)
        changed = f"{name}: files changed ({_files(files)})"
        workspaces = [ws for ws in hub.live_workspaces() if _runs_from(ws, old, directory)]
        if not workspaces:
            say(f"{changed}; no workspace runs it yet (it starts with the first agent)")
            return
        op = object()  # a shared extension: one restart for all of them
        async with trio.open_nursery() as nursery:
            for ws in workspaces:
                nursery.start_soon(_reload, ws, _names(old, name), op)
        by_outcome: dict[str, list[str]] = {}
        for ws in workspaces:
            by_outcome.setdefault(outcome(ws, name), []).append(str(ws.root))
        for text, roots in by_outcome.items():
            where = ""
            if len(by_outcome) > 1:
                where = f" (in {', '.join(roots)})"
            elif len(roots) > 1:
                where = f" (in {len(roots)} workspaces)"
            say(f"{changed}; {text}{where}")

    def ready() -> None:
        say(f"{name}: watching {directory} for changes")

    await keep_watching(directory, restart, say, ready=ready, feed=feed)


def _runs_from(ws: Workspace, name: str, directory: Path) -> bool:
    """Whether ``ws`` runs ``name`` from ``directory`` (or runs nothing
    under it: it would find it there), and no ``zot ext dev`` of its own
    watches that directory already."""
    if directory in ws.dev_dirs:
        return False
    ext = ws.extensions.get(name)
    return ext is None or ext.found.dir == directory


async def _reload(ws: Workspace, names: list[str], op: object) -> None:
    for name in names:
        await ws.refresh(name, reload=True, op=op)


# --- zot ext dev ------------------------------------------------------------------------


class DevClient(Protocol):
    """The connection a ``zot ext dev`` session lives as long as."""

    #: Set when the connection has ended.
    done: trio.Event

    def deliver(self, frame: bytes) -> None:
        """Queues an encoded push frame for this connection; never blocks."""
        ...


def _read(directory: Path, path_env: str) -> Found | str:
    """The extension in ``directory``, or why there is none (blocks: a worker thread's)."""
    if not directory.exists():
        return f"{directory}: no such directory"
    if not directory.is_dir():
        return f"{directory}: not a directory"
    found = load(directory, Scope.EXPLICIT, path_env)
    if found.manifest is None:
        return found.error
    return found


async def start_dev(
    hub: Hub, ws: Workspace, client: DevClient, directory: str, *, feed: Feed = watch_files
) -> ap.ExtChangeData:
    """Runs the extension in ``directory`` for ``ws`` alone, restarted when
    its files change, for as long as ``client``'s connection lasts; returns
    once it is ready (or settled), as ``ext_install`` does.

    Its manifest must parse; a program that is missing (not built yet) is
    started as failed, and watched all the same.

    Cancellation (the client hangs up at once): the start is carried
    through (shielded), and the session, already begun, removes it again.

    Raises:
        RequestError: ``bad_request``: not an absolute path, not a directory,
            no manifest or a broken one, or a directory or name another
            ``zot ext dev`` runs in this workspace already.
    """
    path = Path(directory)
    if not path.is_absolute():
        raise RequestError(Code.BAD_REQUEST, f"`dir` must be an absolute path, not {directory!r}")
    read = await threads.run_sync(_read, path, hub.ctx.env.get("PATH", ""))
    if isinstance(read, str):
        raise RequestError(Code.BAD_REQUEST, read)
    found, path = read, read.dir
    if path in ws.dev_dirs:
        raise RequestError(Code.BAD_REQUEST, f"another `zot ext dev` runs {path} here already")
    held = ws.extensions.get(found.name)
    if held is not None and held.found.dir in ws.dev_dirs:
        raise RequestError(
            Code.BAD_REQUEST,
            f"another `zot ext dev` runs {found.name!r} here already, from {held.found.dir}",
        )
    ws.dev_dirs = (path, *ws.dev_dirs)  # replaced, never changed: discovery reads it in a thread
    session = DevSession(hub, ws, client, path, found.name, feed)
    ws.start_soon(session.run)
    ext = await ws.refresh(found.name)
    log.info("dev: %s runs %s from %s", ws.root, found.name, path)
    return ap.ExtChangeData(
        name=found.name,
        dir=str(path),
        scope=Scope.EXPLICIT,
        extension=ws.info_of(ext) if ext is not None else None,
    )


class DevSession:
    """One ``zot ext dev``: a directory of one workspace, watched, for as
    long as one connection lasts."""

    def __init__(
        self, hub: Hub, ws: Workspace, client: DevClient, directory: Path, name: str, feed: Feed
    ) -> None:
        self.hub = hub
        self.ws = ws
        self.client = client
        self.dir = directory
        #: The extension's name now (a manifest edit may change it).
        self.name = name
        self._feed = feed
        self._path_env = hub.ctx.env.get("PATH", "")

    async def run(self) -> None:
        """Watches until the connection ends, then takes the directory out of
        the workspace again and refreshes the name (shielded: the dev copy
        stops, what it hid comes back). Cancelled (the workspace itself is
        going away), it only forgets the directory. Never raises ``Exception``."""
        try:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch)
                    await self.client.done.wait()
                    nursery.cancel_scope.cancel()
            except Exception:
                log.exception("dev: watching %s failed", self.dir)
        finally:
            self.ws.dev_dirs = tuple(d for d in self.ws.dev_dirs if d != self.dir)
        with trio.CancelScope(shield=True):
            await self._restore()

    async def _watch(self) -> None:
        def ready() -> None:
            self._say(f"{self.name}: watching {self.dir} for changes (Ctrl+C to stop)")

        await keep_watching(self.dir, self._restart, self._say, ready=ready, feed=self._feed)

    async def _restart(self, files: list[str]) -> None:
        old, self.name = self.name, await _name_now(self.dir, self._path_env)
        for name in _names(old, self.name):
            await self.ws.refresh(name, reload=True)
        self._say(f"{self.name}: files changed ({_files(files)}); {outcome(self.ws, self.name)}")

    def _say(self, text: str) -> None:
        log.info("dev %s: %s", self.dir, text)
        self.client.deliver(ap.encode(ap.ExtDevPush(extension=self.name, message=text)))

    async def _restore(self) -> None:
        try:
            if self.hub.shutting_down or self.ws.stopping:
                return  # everything stops anyway
            await self.ws.refresh(self.name)  # it stops; what it hid comes back
            log.info("dev: %s no longer runs %s from %s", self.ws.root, self.name, self.dir)
        except Exception:
            log.exception("dev: removing %s from %s failed", self.dir, self.ws.root)
