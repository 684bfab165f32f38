"""The sleep cycle of an extension that is lazy or stops when idle.

:class:`SleepCycle` is a base of :class:`~.extension.Extension` (which owns
the state it reads, declared below): the loop of its runs, while the
supervisor (:mod:`.extension`) owns each run's process::

    lazy, with a valid cache ─► sleeping ◄──────────────────────────┐
                                   │ a call, command, event, intercept  │
                                   ▼                                    │ idle_stop s
    eager, or no valid cache ─► starting ─► ready ── no work for ───────┘

Asleep, it has no process: its registrations stay listed (its cache's, for
a lazy one that has not run yet; else its last run's), its state is
``sleeping``, and :class:`~.waking.Waking` holds what is asked of it and
wakes it. Woken, it is a new run of the same :class:`Extension` (a new
link, the same request ids, no restart counted); once it is ready its
listing is brought in line with what it registered (:mod:`.dozing`) and
what was held is sent. Idle for ``idle_stop`` seconds, it is stopped as a
stop asks (``shutdown``, then SIGTERM and SIGKILL past their deadlines),
but stays listed, asleep; a stop of its own (:meth:`Extension.stop`)
ends the cycle. A lazy one's registrations are written to its cache once
it is ready, and again when it goes to sleep if they changed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import trio

from ..model.config import Config
from ..model.manifest import Found
from ..model.reg_cache import Cached
from ..protocol import extension as ep
from . import dozing, stopping
from .dozing import Prefetched
from .link import Link
from .outcome import Outcome
from .process import Process
from .status import Host, State
from .waking import Waking

if TYPE_CHECKING:
    from .extension import Extension
    from .inbox import Inbox
    from .mcp_link import McpLink


class SleepCycle:
    """Sleeps, wakes and puts to sleep an extension (see the module)."""

    name: str
    found: Found
    state: State
    pid: int | None
    exit_code: int | None
    started_at: float | None
    capabilities: list[str]
    hello_warning: str
    registrations: list[ep.RegisterCommand | ep.RegisterTool]
    settled: trio.Event
    stop_requested: trio.Event
    _host: Host
    _config: Config
    _calls: Waking
    _link: Link | None
    _mcp: McpLink | None
    _inbox: Inbox | None
    _process: Process | None
    _process_exited: trio.Event
    _outcome: Outcome
    _winding_down: bool
    _start_later: Callable[[Extension], None] | None
    _late: bool
    _slept: list[ep.RegisterCommand | ep.RegisterTool] | None
    _dozing: bool
    _became_ready: trio.Event

    def _init_sleep(
        self, config: Config, cache_dir: Path | None, prefetched: Prefetched | None
    ) -> None:
        manifest = self.found.manifest
        #: Started on its first use (registrations listed from its cache till then).
        self.lazy = manifest is not None and config.lazy_for(self.name, manifest.lazy)
        #: Seconds without work before it is put to sleep (0 never).
        self.idle_stop = config.idle_stop_for(self.name, manifest.idle_stop) if manifest else 0.0
        self._cache_dir = cache_dir if self.lazy else None
        #: Its cache, read with its workspace's discovery (once: for its first run).
        self._prefetched = prefetched
        #: What its cache holds now (an unchanged listing is not written again).
        self._cached: Cached | None = None

    @property
    def _ext(self) -> Extension:
        return cast("Extension", self)  # (the one class this is a base of)

    def note(self, message: str) -> None:
        raise NotImplementedError

    def _new_link(self) -> Link:
        raise NotImplementedError

    async def _run_once(self) -> None:
        raise NotImplementedError

    def doze(self, start: Callable[[Extension], None]) -> bool:
        """Falls asleep on the cache read with its workspace's discovery, with
        no supervisor task yet: its registrations are listed now, and
        ``start(ext)`` (which runs :meth:`Extension.run <.extension.Extension.run>`
        in its owner's nursery) is called when something first wants it. A
        workspace opens with a listing and no task per sleeping extension.

        Returns ``False``, and does nothing, unless it is lazy and that cache
        was read ahead and is valid (then it must be run at once, to read or
        fill its cache)."""
        prefetched = self._prefetched
        if self._cache_dir is None or not isinstance(prefetched, tuple) or prefetched[0] is None:
            return False
        self._prefetched = None
        self._cached = prefetched[0]
        dozing.register(self._ext, self._host, self._cached)
        self._start_later = start
        if self._late:  # (its requests' holder, made when first asked, holds them)
            self.state = State.SLEEPING
            self.settled.set()
            self._host.on_changed(self._ext)
        else:
            self._asleep()
            self._calls.on_want = self._begin
        return True

    @property
    def dormant(self) -> bool:
        """Whether it dozes with no supervisor task (see :meth:`doze`)."""
        return self._start_later is not None

    def _begin(self) -> None:
        """Something wants a dozing one: its supervisor starts (once)."""
        start, self._start_later = self._start_later, None
        if start is not None:
            start(self._ext)

    async def _lifetime(self) -> None:
        """Its runs: one, or for a lazy or idle-stopping one, sleep, wake,
        run, sleep again, ... until a run ends for another reason than
        idleness, or it is stopped asleep. Cancellation ends it where it is
        (the supervisor kills a process it was running)."""
        if self._cache_dir is not None and self.state != State.SLEEPING:  # (else it dozed)
            prefetched, self._prefetched = self._prefetched, None
            cached = await dozing.load(self._ext, self._cache_dir, prefetched)
            if cached is not None and not self.stop_requested.is_set():
                self._cached = cached
                dozing.register(self._ext, self._host, cached)
                self._asleep()
        while True:
            if self.state == State.SLEEPING:
                await self._calls.wanted.wait()  # (a stop sets it too)
                if self.stop_requested.is_set():
                    self.state = State.EXITED
                    return
                self._wake()
            await self._run_once()
            if not self._dozing or self.stop_requested.is_set():
                return
            self._asleep()
            if self._cache_dir is not None and dozing.snapshot(self._ext) != self._cached:
                await self._save_cache()

    def _asleep(self) -> None:
        """It sleeps: no process; its registrations stay listed."""
        self._calls.hold()
        self.state = State.SLEEPING
        self._process = None
        self.pid = self.started_at = self.exit_code = None
        self.settled.set()
        self._host.on_changed(self._ext)

    def _wake(self) -> None:
        """A held request wants it: a new run, whose requests are held until it is ready."""
        self.note(f"woke for {self._calls.reason}")
        self._outcome = Outcome()
        self._process_exited = trio.Event()
        self._became_ready = trio.Event()
        self._winding_down = self._dozing = False
        self._inbox = None
        self.capabilities = []
        self.hello_warning = ""
        self._slept, self.registrations = self.registrations, []
        self._link = self._new_link()
        self.state = State.STARTING

    def _woken_ready(self) -> None:
        """It is ready: after a wake, its listing is brought in line and what
        was held for it is sent."""
        if self._slept is not None:
            dozing.reconcile(self._ext, self._host, self._slept)
            self._slept = None
        if self._calls.holding:
            self._calls.open()
        self._became_ready.set()

    async def _keep_idle(self, process: Process | None) -> None:
        """Once ready: caches a lazy one's registrations, and puts it to sleep
        after ``idle_stop`` seconds without work (``shutdown``, then the stop
        escalation; at a url, its connection closed). Cancellation leaves a
        stop it began where it was."""
        await self._became_ready.wait()
        if self._cache_dir is not None and dozing.snapshot(self._ext) != self._cached:
            await self._save_cache()  # (not rewritten unchanged: a young file is re-read)
        await self._calls.idle()  # (forever, for idle_stop 0)
        self._dozing = True
        self._calls.hold()
        self.state = State.SLEEPING
        self._host.on_changed(self._ext)
        self.note(f"sleeping after {self.idle_stop:g} s idle")
        if process is None:
            if self._mcp is not None:
                self._mcp.close()
            return
        self._winding_down = True
        if self._link is not None:
            self._link.shutdown()
        await stopping.wind_down(process, self._process_exited, self._config, self.note)

    async def _save_cache(self) -> None:
        assert self._cache_dir is not None
        cached = dozing.snapshot(self._ext)
        if await dozing.save(self._ext, self._cache_dir, cached):
            self._cached = cached
