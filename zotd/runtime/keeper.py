"""Making an extension's supervisor, and its restart loop: run it, and
start it again per its policy.

One loop per extension lineage, whoever owns it: a workspace for each of
its own extensions (:class:`~zotd.runtime.workspace.Workspace`), the
daemon's pool for a shared one (:mod:`zotd.runtime.shared`), so the policy
is counted once per process, never once per workspace that uses it. The
policy itself is :class:`~zotd.model.restart.RestartTracker`; this waits
out its backoffs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..model.config import Config
from ..model.environment import extension_env, passthrough_for
from ..model.manifest import Found, Scope
from ..model.paths import Paths
from ..model.restart import GiveUp, RestartTracker
from .dozing import Prefetched
from .extension import Extension, Host, State

if TYPE_CHECKING:
    from .workspace import Context


def build(
    found: Found, host: Host, ctx: Context, prefetched: Prefetched | None = None
) -> Extension:
    """The supervisor of ``found`` reporting to ``host``: its environment
    (the allowlist, passthrough and grants, its manifest's ``env``; made
    when its process is spawned) and its log (``$ZOT_HOME/logs/ext-<name>.log``,
    one per name). ``prefetched``: its registrations cache, if already read."""
    home = ctx.paths.home

    def env() -> dict[str, str]:
        passthrough = passthrough_for(home, ctx.config, found.name, found.manifest)
        made = extension_env(ctx.env, found.manifest, str(home), passthrough)
        if found.scope == Scope.PROJECT:
            # Python's bytecode cache, written into the directory trust pins,
            # would read as a change (unless its manifest sets this itself).
            made.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        return made

    return Extension(
        found,
        host=host,
        config=ctx.config,
        log_path=log_path(ctx.paths, found.name),
        spawner=ctx.spawner,
        env=env,
        cache_dir=cache_dir(home),
        prefetched=prefetched,
    )


# Made once each (paths are built on the way to a workspace's first listing).
@functools.lru_cache(maxsize=16)
def cache_dir(home: Path) -> Path:
    """Where lazy extensions' registrations are cached: ``$ZOT_HOME/cache/registrations``."""
    return home / "cache" / "registrations"


@functools.lru_cache(maxsize=1024)
def log_path(paths: Paths, name: str) -> Path:
    """``$ZOT_HOME/logs/ext-<name>.log``, made once per name (thread-safe).

    Raises:
        ValueError: ``name`` would put it outside the logs directory.
    """
    return paths.extension_log(name)


async def keep(
    ext: Extension,
    config: Config,
    *,
    current: Callable[[Extension], bool],
    renew: Callable[[Extension], Extension],
    changed: Callable[[Extension], None],
) -> None:
    """Runs ``ext``, and restarts it per its restart policy when it ends on its own.

    Backoff doubles from ``backoff_initial`` up to ``backoff_max``; more
    than ``intensity`` restarts within ``window`` seconds marks it failed
    until it is reloaded. A stop (shutdown, reload, removal) ends this at
    once, during a backoff too.

    Args:
        ext: the first run's extension.
        config: the daemon's settings (``restart_for`` its name).
        current: whether an extension is still the one its owner runs
            under its name (``False``: replaced, removed, or its owner is
            stopping; it is not restarted).
        renew: makes the next run's extension (in the old one's place with
            its owner) after a backoff.
        changed: tells the owner's agents that its state changed.

    Cancellation (the owner's nursery) cancels the run, which kills the
    process group (see :meth:`Extension.run`), or the backoff; then
    :exc:`trio.Cancelled` propagates.
    """
    tracker = RestartTracker(config.restart_for(ext.name))
    while True:
        await ext.run()
        reason = ext.ended_on_its_own()
        if reason is None or not current(ext):
            return
        decision = tracker.on_exit(trio.current_time(), ext.judged_exit_code)
        if decision is None:
            return
        ext.last_error = decision.message(reason)
        ext.note(ext.last_error)
        if isinstance(decision, GiveUp):
            ext.state = State.FAILED
            changed(ext)
            return
        ext.state = State.RESTARTING
        ext.restart_at = trio.current_time() + decision.delay
        changed(ext)
        with trio.move_on_after(decision.delay):
            await ext.stop_requested.wait()
        if ext.stop_requested.is_set() or not current(ext):
            ext.state = State.EXITED
            return
        tracker.restarted(trio.current_time())
        new = renew(ext)
        new.restarts = ext.restarts + 1
        new.restart_reason = reason
        new.metrics = ext.metrics  # (its counts go on across restarts)
        ext = new
