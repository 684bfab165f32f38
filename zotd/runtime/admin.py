"""The ``ext_*`` requests: change what is installed, then apply it live.

Each operation does its file work through :mod:`zotd.model.manage` in a worker
thread (a copy or a clone may take a while; the daemon keeps serving), then
refreshes the extension in every running workspace that sees it, in
parallel, and answers once the caller's workspace has it ready. A shared
extension (one process for every workspace using it) is restarted once,
however many workspaces refresh it: each operation's refreshes carry one
token (see :meth:`Workspace.refresh`).

Names are resolved from the caller's workspace: its project-local
extensions, the global ones and the daemon's ``--ext`` ones. Each operation
gets the :class:`~zotd.runtime.hub.Hub` (the running workspaces, the paths)
and the caller's workspace.

Cancellation (``cancel`` never stops these; a client that hangs up or the
daemon's shutdown may): a step in a worker thread is finished all the same
(trio does not abandon it), and a refresh or stop already begun is carried
through (shielded, see :meth:`Workspace.refresh`); the steps not yet begun
are skipped, and ``Cancelled`` is re-raised. Nothing done is undone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..model import env_grants, hints, manage, trust
from ..model.discovery import every_copy, project_dir, to_enable
from ..model.environment import Passthrough, allowlisted
from ..model.errors import RequestError
from ..model.logfiles import tail
from ..model.manifest import Found, Scope
from ..protocol import agent as ap
from . import threads
from .extension import State
from .hub import Hub
from .workspace import Workspace

if TYPE_CHECKING:
    from . import dev as dev_mode

Code = ap.ErrorCode

#: States ``ext_trust`` starts an extension afresh from (its process is gone).
_START_AGAIN = frozenset({State.UNTRUSTED, State.FAILED, State.EXITED, State.RESTARTING})

#: Most log lines ``ext_logs`` returns.
MAX_LOG_LINES = 10_000

log = logging.getLogger(__name__)


async def clean_staging(extensions_dir: Path) -> None:
    """Removes the staging directories killed installs left in the global
    extensions directory (:func:`manage.remove_stale_staging`); the daemon
    runs it as it starts. Project directories are cleaned before each install
    into them."""
    removed = await threads.run_sync(manage.remove_stale_staging, extensions_dir)
    for path in removed:
        log.info("removed %s, left by an install that was killed", path)


def _refused(exc: manage.ManageError) -> RequestError:
    return RequestError(Code.BAD_REQUEST, str(exc))


async def _lookup(ws: Workspace, name: str) -> Found:
    """The extension ``name`` as the workspace sees it (running or not).

    Raises:
        RequestError: ``not_found``, with the closest names (or all of them).
    """
    ext = ws.extensions.get(name)
    if ext is not None:
        return ext.found
    found = await ws.scan()  # on disk but not picked up yet (copied in by hand, say)
    for f in found:
        if f.name == name:
            return f
    known = {f.name for f in found} | set(ws.extensions)
    raise RequestError(Code.NOT_FOUND, hints.unknown_extension(name, known))


def _refuse_explicit(found: Found) -> None:
    if found.scope == Scope.EXPLICIT:
        raise RequestError(
            Code.BAD_REQUEST,
            f"{found.name!r} was loaded with --ext from {found.dir}; zotd leaves that "
            "directory alone (it is not installed). Restart zotd without that --ext to drop it",
        )


def _affected(hub: Hub, found: Found) -> list[Workspace]:
    """The running workspaces that can see ``found``."""
    workspaces = hub.live_workspaces()
    if found.scope == Scope.PROJECT:
        return [ws for ws in workspaces if project_dir(ws.root) == found.dir.parent]
    return workspaces


async def _refresh(
    workspaces: Iterable[Workspace],
    names: Iterable[str],
    *,
    reload: bool = False,
    op: object | None = None,
) -> None:
    """Refreshes ``names`` in each of ``workspaces``, in parallel; a shared
    extension among them is reloaded once for all of them (``op``, one per
    operation, says which refreshes belong together)."""
    op = op if op is not None else object()
    async with trio.open_nursery() as nursery:
        for ws in workspaces:
            for name in names:
                nursery.start_soon(partial(ws.refresh, name, reload=reload, op=op))


def _change(ws: Workspace, found: Found) -> ap.ExtChangeData:
    ext = ws.extensions.get(found.name)
    info = ws.info_of(ext) if ext is not None else None
    return ap.ExtChangeData(name=found.name, dir=str(found.dir), scope=found.scope, extension=info)


async def install(hub: Hub, ws: Workspace, source: str, scope: str) -> ap.ExtChangeData:
    """Installs ``source`` into ``scope`` and starts it wherever it is seen.

    Cancellation: the copy (or clone) is finished; if it was cancelled
    then, a project install is left untrusted and not started (a later
    ``ext_trust`` or ``ext_reload`` starts it). Otherwise as the module says.
    """
    if not (manage.is_git_source(source) or os.path.isabs(source)):
        raise RequestError(
            Code.BAD_REQUEST, f"`source` must be an absolute path or a git URL, not {source!r}"
        )
    try:
        root = manage.scope_root(scope, workspace=ws.root, global_dir=hub.paths.extensions_dir)
        found = await trio.to_thread.run_sync(manage.install, source, root, scope)
    except manage.ManageError as exc:
        raise _refused(exc) from None
    if found.scope == Scope.PROJECT:  # what the user installs, the user trusts
        await trio.to_thread.run_sync(trust.trust, hub.paths.home, ws.root, [found])
    await _refresh(_affected(hub, found), [found.name])
    return _change(ws, found)


async def remove(hub: Hub, ws: Workspace, name: str) -> ap.ExtChangeData:
    """Stops ``name`` everywhere it runs, deletes its directory, and starts
    whatever it was hiding (a global one under a project one, say).

    Cancellation: the stops run shielded and the deletion is finished; what
    it was hiding is then not started until a reload.
    """
    found = await _lookup(ws, name)
    _refuse_explicit(found)
    affected = _affected(hub, found)
    async with trio.open_nursery() as nursery:
        for w in affected:
            nursery.start_soon(w.stop_extension, name)
    try:
        await trio.to_thread.run_sync(
            partial(manage.remove, found, global_dir=hub.paths.extensions_dir)
        )
    except manage.ManageError as exc:
        raise _refused(exc) from None
    await _refresh(affected, [name])
    return _change(ws, found)


async def set_enabled(hub: Hub, ws: Workspace, name: str, enabled: bool) -> ap.ExtChangeData:
    """Rewrites ``enabled`` in the manifest and starts or stops the extension.

    Enabling and disabling one extension take turns (the rewrite and the
    refresh); the manifest is replaced whole (:func:`manage.replace_file`).

    Cancellation: the manifest is rewritten all the same; the workspaces
    not yet refreshed pick the change up at their next reload.
    """
    found = await _lookup(ws, name)
    if enabled:  # a disabled project copy that gave way to a global one, if any
        found = to_enable(found)
    _refuse_explicit(found)
    change = partial(manage.set_enabled, found, enabled)
    # One toggle of a manifest at a time, write and refresh: each caller's
    # reply shows its own change, not half of another's.
    async with _toggle_lock(found.dir):
        try:
            if found.scope == Scope.PROJECT:
                await trio.to_thread.run_sync(
                    trust.keep_trust, hub.paths.home, ws.root, found, change
                )
            else:
                await trio.to_thread.run_sync(change)
        except manage.ManageError as exc:
            raise _refused(exc) from None
        await _refresh(_affected(hub, found), [name])
        return _change(ws, found)


#: The lock of each extension directory that ``set_enabled`` rewrites (per trio run).
_toggles: trio.lowlevel.RunVar[dict[Path, trio.Lock]] = trio.lowlevel.RunVar("zotd_toggles")


def _toggle_lock(directory: Path) -> trio.Lock:
    try:
        locks = _toggles.get()
    except LookupError:
        locks = {}
        _toggles.set(locks)
    return locks.setdefault(directory, trio.Lock())


async def reload(hub: Hub, ws: Workspace, name: str | None) -> ap.ExtReloadData:
    """Restarts ``name`` (or every extension) from disk in every workspace.

    Cancellation: restarts already begun are carried through (shielded);
    the others are skipped, and their extensions keep running as they were.
    """
    workspaces = hub.live_workspaces()
    if name is not None:
        await _lookup(ws, name)
        await _refresh(workspaces, [name], reload=True)
        names = [name]
        ext = ws.extensions.get(name)
        why = ws.why_not(ext) if ext is not None and ext.state == State.UNTRUSTED else None
        if why is not None:  # reloading cannot start it: say what can
            raise RequestError(Code.UNAVAILABLE, why.clause())
    else:
        op = object()  # (a shared extension seen by several workspaces: once)
        async with trio.open_nursery() as nursery:
            for w in workspaces:
                names_there = set(w.extensions) | {f.name for f in await w.scan()}
                nursery.start_soon(partial(_refresh, [w], names_there, reload=True, op=op))
        names = sorted(ws.extensions)
    infos = [ws.info_of(ws.extensions[n]) for n in names if n in ws.extensions]
    return ap.ExtReloadData(extensions=infos)


async def trust_project(hub: Hub, ws: Workspace) -> ap.ExtReloadData:
    """Trusts the workspace's project-local extensions as they are, and starts
    them: those that run already keep running (unless they changed), the
    others (untrusted, failed, exited, waiting to restart) start afresh.

    Cancellation: the trust file is written all the same; starts already
    begun are carried through (shielded), the others wait for a reload.
    """
    # Also the copies that give way to a global one until trusted (passed over).
    found = [f for f in every_copy(await ws.scan()) if f.scope == Scope.PROJECT and not f.error]
    await trio.to_thread.run_sync(trust.trust, hub.paths.home, ws.root, found)
    names = sorted(f.name for f in found)
    async with trio.open_nursery() as nursery:
        for n in names:
            ext = ws.extensions.get(n)
            again = ext is not None and ext.state in _START_AGAIN
            nursery.start_soon(partial(ws.refresh, n, reload=again))
    infos = [ws.info_of(ws.extensions[n]) for n in names if n in ws.extensions]
    return ap.ExtReloadData(extensions=infos)


async def logs(hub: Hub, ws: Workspace, name: str, lines: int) -> ap.LogsData:
    """The end of an extension's log.

    Cancellation: the file is read to the end in its thread all the same,
    and the lines dropped; nothing changes.
    """
    await _lookup(ws, name)  # not_found, with the names there are, for a name not here
    path: Path = hub.paths.extension_log(name)
    if lines < 1:
        raise RequestError(Code.BAD_REQUEST, "`lines` must be at least 1")
    count = min(lines, MAX_LOG_LINES)
    found = await trio.to_thread.run_sync(tail, path, count)
    return ap.LogsData(path=str(path), lines=found)


async def env(hub: Hub, ws: Workspace, name: str, allow: list[str], deny: list[str]) -> ap.EnvData:
    """The variables of the daemon's environment extension ``name`` gets
    beyond the allowlist (names only: a value is never read into a reply or
    a log line); ``allow`` grants more, ``deny`` hides some (see
    :mod:`zotd.model.env_grants`).

    A change is written to the grants file (in a worker thread), then the
    extension is restarted in every running workspace that has one of that
    name (grants go by name), in parallel, so its new process gets the new
    environment; the reply comes once the caller's copy is ready.

    Cancellation: as the module says (the file is written all the same).
    """
    found = await _lookup(ws, name)
    for var in (*allow, *deny):
        if not env_grants.is_variable_name(var):
            raise RequestError(Code.BAD_REQUEST, f"{var!r} is not an environment variable name")
        if allowlisted(var):
            raise RequestError(
                Code.BAD_REQUEST,
                f"every extension gets {var} already (zotd's allowlist); --allow and --deny "
                "are for the variables beyond it",
            )
    home = hub.paths.home
    if allow or deny:
        try:
            _, changed = await threads.run_sync(env_grants.change, home, name, allow, deny)
        except env_grants.GrantsError as exc:
            raise RequestError(Code.BAD_REQUEST, str(exc)) from None
        if changed:
            log.info(  # names only: a value is never logged
                "ext env %s: allowed %s; denied %s",
                name,
                ", ".join(allow) or "nothing",
                ", ".join(deny) or "nothing",
            )
            seeing = [w for w in hub.live_workspaces() if name in w.extensions or w is ws]
            await _refresh(seeing, [name], reload=True)
    try:
        grants = await threads.run_sync(env_grants.grants_for, home, name)
    except env_grants.GrantsError as exc:
        raise RequestError(
            Code.UNAVAILABLE,
            f"{exc}; until it is fixed or deleted, {name} gets no variables beyond the allowlist",
        ) from None
    settings = hub.config.extensions.get(name)
    passing = Passthrough.of(found.manifest, settings.env_passthrough if settings else (), grants)
    return ap.EnvData(
        name=name,
        variables=passing.present(hub.ctx.env),
        manifest=list(passing.manifest),
        config=list(passing.config),
        allowed=list(passing.allowed),
        denied=list(passing.denied),
    )


async def dev(
    hub: Hub, ws: Workspace, client: dev_mode.DevClient, directory: str
) -> ap.ExtChangeData:
    """``ext_dev``: runs the extension in ``directory`` for ``ws`` alone,
    restarted when its files change, until ``client``'s connection ends
    (see :func:`zotd.runtime.dev.start_dev`).

    Cancellation: the start is carried through (shielded); the session,
    already begun, takes the directory out again once the connection ends.
    """
    from . import dev as dev_mode  # (and its watchfiles feed: not at every daemon's start)

    return await dev_mode.start_dev(hub, ws, client, directory)
