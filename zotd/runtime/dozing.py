"""A sleeping extension's registrations: read from its cache, listed, and
brought in line with what its woken process registers.

The cache's format and key are :mod:`zotd.model.reg_cache`'s; its file
work (hashing what the extension runs, reading and writing the file) runs
in a worker thread (:func:`.threads.run_sync`). A cache that cannot be
read or written costs a start, never the extension: the reason goes to the
extension's log, and it is started at once to fill the cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..model import reg_cache, rereads
from ..model.config import Config
from ..model.manifest import Found
from ..model.outer_scopes import Prefetched, may_run, prefetch
from ..model.reg_cache import Cached, CacheError, Uncacheable
from ..model.stamps import Look
from ..protocol import extension as ep
from . import threads
from .status import Host

if TYPE_CHECKING:
    from .extension import Extension

log = logging.getLogger("zotd.runtime.extension")

__all__ = ["Prefetched", "load", "prefetch", "prefetch_lazy", "reconcile", "register", "save"]

Registration = ep.RegisterCommand | ep.RegisterTool


def snapshot(ext: Extension) -> Cached:
    """What ``ext`` registered and subscribed to, as the cache keeps it."""
    return Cached(list(ext.registrations), sorted(ext.events), sorted(ext.intercepts))


def prefetch_lazy(
    found: list[Found],
    config: Config,
    cache_dir: Path,
    skip: Callable[[Found], bool],
    look: Look | None = None,
) -> dict[str, tuple[Found, Prefetched]]:
    """Blocking: :func:`prefetch` for each of ``found`` that is lazy and may
    run (but not those ``skip`` says another owner starts), by name, each
    with the very ``Found`` it was read for. ``look``: the discovery's."""
    look = look or Look()
    done: dict[str, tuple[Found, Prefetched]] = {}
    for f in found:
        if not may_run(f) or f.manifest is None:
            continue
        if config.lazy_for(f.name, f.manifest.lazy) and not skip(f):
            done[f.name] = (f, prefetch(f, cache_dir, look))
    return done


async def load(
    ext: Extension, cache_dir: Path, prefetched: Prefetched | None = None
) -> Cached | None:
    """``ext``'s cached registrations if they are valid for what it runs
    now; ``None`` (and why, in its log) if not. Never raises ``Exception``.

    ``prefetched``, if given, is the read already done (:func:`prefetch`).
    Otherwise the reads of the extensions that start together are done in
    one worker thread, one after another: each is a fraction of a
    millisecond, and ten thread hops at once would cost more than the
    reads. Cancellation of the first of them waits for the thread to
    finish; of the others, returns at once."""

    def read() -> tuple[Cached | None, str]:
        file = reg_cache.path(cache_dir, ext.name)
        return rereads.load_cache(file, ext.name, rereads.cache_key(ext.found))

    try:
        if isinstance(prefetched, Exception):
            raise prefetched
        cached, why = prefetched if prefetched is not None else await _read_together(read)
    except Uncacheable as exc:
        ext.note(f"lazy, but its registrations cannot be cached ({exc}); starting it now")
        return None
    except CacheError as exc:
        ext.note(f"its registrations cache is unusable ({exc}); starting it now to fill it")
        log.warning("extension %s: registrations cache unusable: %s", ext.name, exc)
        return None
    if cached is None:
        ext.note(f"lazy: {why}; starting it now to fill it")
    return cached


class _Reads:
    """The cache reads asked for in one scheduling round."""

    def __init__(self) -> None:
        self.jobs: list[Callable[[], tuple[Cached | None, str]]] = []
        #: Each job's result, or what it raised.
        self.outcomes: list[tuple[Cached | None, str] | Exception] = []
        self.closed = False
        self.done = trio.Event()

    def run_all(self) -> None:
        """In the worker thread: every job, its outcome kept (an exception too)."""
        for job in self.jobs:
            try:
                self.outcomes.append(job())
            except Exception as exc:  # (raised again in the task that asked)
                self.outcomes.append(exc)


_reads: trio.lowlevel.RunVar[_Reads | None] = trio.lowlevel.RunVar("zotd_cache_reads", None)


async def _read_together(job: Callable[[], tuple[Cached | None, str]]) -> tuple[Cached | None, str]:
    """``job()`` in a worker thread, with the others asked for in the same round."""
    batch = _reads.get()
    lead = batch is None or batch.closed
    if batch is None or batch.closed:
        batch = _Reads()
        _reads.set(batch)
    index = len(batch.jobs)
    batch.jobs.append(job)
    if lead:
        try:
            await trio.lowlevel.checkpoint()  # (the others of this round join)
            batch.closed = True
            await threads.run_sync(batch.run_all)
        finally:
            batch.closed = True
            batch.done.set()
    else:
        await batch.done.wait()
    if index >= len(batch.outcomes):  # the first was cancelled before its thread
        return await threads.run_sync(job)
    result = batch.outcomes[index]
    if isinstance(result, Exception):
        raise result
    return result


async def save(ext: Extension, cache_dir: Path, cached: Cached) -> bool:
    """Writes ``cached`` as ``ext``'s cache, keyed by what it runs now.
    Returns whether it was written (why not goes to its log). Never raises
    ``Exception``; cancellation waits for the file work to finish."""
    file = reg_cache.path(cache_dir, ext.name)

    def write() -> bool:
        return reg_cache.save(file, ext.name, rereads.cache_key(ext.found), cached)

    try:
        written = await threads.run_sync(write)
    except Uncacheable as exc:
        ext.note(f"its registrations cannot be cached: {exc}")
        return False
    except OSError as exc:
        ext.note(f"could not write its registrations cache {file}: {exc.strerror or exc}")
        return False
    if not written:
        ext.note(
            f"its registrations are larger than {reg_cache.MAX_CACHE_BYTES >> 20} MiB: not cached"
        )
    return written


def register(ext: Extension, host: Host, cached: Cached) -> None:
    """Lists ``cached`` as ``ext``'s registrations and subscriptions (it sleeps)."""
    ext.registrations = list(cached.registrations)
    ext.events = set(cached.events)
    ext.intercepts = set(cached.intercepts) & ep.INTERCEPTABLE
    _add(ext, host, ext.registrations)


def reconcile(ext: Extension, host: Host, listed: list[Registration]) -> None:
    """The woken process of ``ext`` is ready: if it no longer registers
    everything that was ``listed`` while it slept, its registrations are
    listed anew from what it registered (what it did register replaced the
    entries of the same names already)."""
    now = {_key(f) for f in ext.registrations}
    gone = [f for f in listed if _key(f) not in now]
    if not gone:
        return
    ext.note(
        f"no longer registers {', '.join(sorted(_label(f) for f in gone))}: its listing is updated"
    )
    host.on_reregister(ext)
    _add(ext, host, ext.registrations, notes=False)


def _add(ext: Extension, host: Host, frames: list[Registration], *, notes: bool = True) -> None:
    for frame in frames:
        if isinstance(frame, ep.RegisterTool):
            reason = host.on_register_tool(ext, frame)
        else:
            reason = host.on_register_command(ext, frame)
        if reason is not None and notes:
            ext.note(reason)


def _key(frame: Registration) -> tuple[str, str]:
    return ("tool" if isinstance(frame, ep.RegisterTool) else "command", frame.name)


def _label(frame: Registration) -> str:
    return frame.name if isinstance(frame, ep.RegisterTool) else f"/{frame.name}"
