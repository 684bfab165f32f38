"""One extension: its process's lifetime.

:meth:`Extension.run` is the extension's supervisor, one nursery per
extension::

    Extension.run
    ├─ Waking's held requests' deadlines                       (waking.py)
    └─ each run (sleep_cycle.py: one, or sleep, wake, run, sleep, ...)
       ├─ the process (own process group; stderr appended straight to its log)
       ├─ Inbox.run: stdout line -> decode -> handshake -> route (inbox.py)
       ├─ Inbox.keep_time: the handshake's deadlines (hello, quiet, grace)
       ├─ Calls.write: queued frames -> stdin, sent in one write (calls.py)
       ├─ PendingTable.expire: one cancel scope for the deadlines of every `ask`
       ├─ ExtensionLog.watch: rotates its log past max_log_bytes (extension_log.py)
       └─ (lazy or idle_stop) its cache written; the idle clock (sleep_cycle.py)

The requests it is sent (:mod:`.ext_requests`) are its run's
:class:`~.calls.Calls`' (or an MCP server's calls), matched to their replies
by ids from a :class:`~.pending.PendingTable`. When the process ends, every
request still pending fails at once with
:class:`~zotd.model.errors.RequestError`; nothing waits for its deadline. So
does a process that closes its stdout and stays alive: no reply can come, so
its requests fail and it is stopped (and restarted, as a crash is).

A lazy one's state for running (its log, counters, events, the holder of
its requests) is made when first used (:mod:`.ext_late`): asleep, it is
listed for little more than its name and registrations.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import trio

from ..model import noise
from ..model.config import Config
from ..model.errors import RequestError
from ..model.manifest import Found, runs_nothing
from ..model.restart import spawn_error
from ..protocol import extension as ep
from ..protocol.agent import ExtensionInfo, Shadowed
from . import status, stopping
from .calls import Calls
from .dozing import Prefetched
from .ext_ending import Ending
from .ext_late import Late
from .ext_requests import Requestable
from .inbox import Inbox
from .link import Link
from .process import Process, Spawner
from .sleep_cycle import SleepCycle
from .status import RUNNING, Host, State

__all__ = ["DRAIN_TIMEOUT", "NOISE_PER_SECOND", "RUNNING", "Extension", "Host", "State"]

log = logging.getLogger(__name__)

#: After the process exits, how long its stdout may take to reach EOF (frames
#: it wrote just before exiting are still read and routed).
DRAIN_TIMEOUT = 0.5

#: The noise an extension may send per second (see :mod:`zotd.model.noise`).
NOISE_PER_SECOND = noise.PER_SECOND


class Extension(Requestable, SleepCycle, Ending, Late):
    """Supervises one extension process for one workspace.

    Args:
        found: the discovered manifest (possibly broken).
        host: the workspace it reports to.
        config: deadlines and limits.
        log_path: its log file (``$ZOT_HOME/logs/ext-<name>.log``).
        spawner: starts the process (tests pass in-memory fakes).
        env: the process's environment, or what makes it when the process
            is spawned (read then: a lazy one's when it first wakes).
        cache_dir: where a lazy one's registrations are cached (by default
            ``$ZOT_HOME/cache/registrations``, its ``env``'s ``ZOT_HOME``;
            none if that is not set).
        prefetched: its registrations cache, read with its workspace's
            discovery (see :func:`.dozing.prefetch`): read again if ``None``.
    """

    def __init__(
        self,
        found: Found,
        *,
        host: Host,
        config: Config,
        log_path: Path,
        spawner: Spawner,
        env: Mapping[str, str] | Callable[[], Mapping[str, str]],
        cache_dir: Path | None = None,
        prefetched: Prefetched | None = None,
    ) -> None:
        self.found = found
        self.name = found.name
        self.log_path = log_path
        self._host = host
        self._config = config
        self._spawner = spawner
        self._env = env
        enabled = found.manifest.enabled if found.manifest else True
        self.state = State.STARTING if enabled else State.DISABLED
        self.last_error = found.error
        self.restarts = 0
        #: What it subscribed to, and intercepts (set by its :class:`Inbox`).
        self.events: set[str] = set()
        self.intercepts: set[str] = set()
        #: What this run registered, in order (for a shared extension's new
        #: workspaces, and a lazy one's cache).
        self.registrations: list[ep.RegisterCommand | ep.RegisterTool] = []
        #: Set once the extension is ready, has failed, exited or is disabled, or
        #: its ready grace has passed (an agent's ``hello`` waits for this).
        self.settled = trio.Event()
        if cache_dir is None and not callable(env) and env.get("ZOT_HOME"):
            cache_dir = Path(env["ZOT_HOME"]) / "cache" / "registrations"
        self._init_sleep(config, cache_dir, prefetched)
        self._start_later = None
        self._late = True
        if not self.lazy:  # (a lazy one's is made when first used: see ext_late)
            self._complete()

    # --- lifetime ---------------------------------------------------------------

    async def run(self) -> None:
        """Runs the extension until its process ends; never raises ``Exception``.

        Broken, disabled and untrusted extensions return at once; so does one
        that names no program (skills or a theme only), ready. A lazy or
        idle-stopping one runs until a run ends for another reason than
        idleness, or it is stopped while asleep (see :mod:`.sleep_cycle`).
        When it returns, the process is gone and every request sent to it
        (or held for it) has its answer or has failed.

        Cancellation kills the process group (SIGKILL) and reaps it,
        shielded, within ``kill_timeout``, before :exc:`trio.Cancelled`
        propagates; requests still pending fail (with :meth:`stop`'s code if
        it was stopping, else ``extension_failed``). A graceful stop is
        :meth:`stop`'s job.
        """
        if self.run_inert():
            return
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._calls.held.expire)  # held requests' deadlines
                await self._lifetime()
                nursery.cancel_scope.cancel()
        except Exception as exc:  # a bug of ours must not take the workspace down
            log.exception("extension %s: internal error", self.name)
            self.last_error = f"internal error: {exc!r}"
            self.state = State.FAILED
        finally:
            self._finish()

    def run_inert(self) -> bool:
        """What :meth:`run` does for one that runs nothing, done now (no task
        needed): broken, disabled or untrusted, it is settled and finished
        in its state; one that names no program (skills or a theme only) is
        ready. Returns ``False``, and does nothing, if it has a process to run."""
        found = self.found
        stopped = self._outcome.stop_code is not None
        disabled = self.state == State.DISABLED
        if not (stopped or found.error or disabled or found.untrusted or runs_nothing(found)):
            return False
        try:
            if self._stopped_before_start():
                pass
            elif found.error:
                self.state = State.FAILED
                self.note(f"not started: {found.error}")
            elif disabled:
                pass
            elif found.untrusted:
                self.state = State.UNTRUSTED
                self.last_error = found.untrusted
                self.note(f"not started: {found.untrusted}")
            else:  # skills (or a theme) only: ready, never spawned
                self.note("ready: no process to start (it ships skills or a theme only)")
                self._mark_ready()
        except Exception as exc:  # a bug of ours must not take the workspace down
            log.exception("extension %s: internal error", self.name)
            self.last_error = f"internal error: {exc!r}"
            self.state = State.FAILED
        finally:
            self._finish()
        return True

    async def _run_once(self) -> None:
        """One run: its process from spawn to exit (or its connection, at a url)."""
        if self._link is None:  # (a lazy one's first run)
            self._link = self._new_link()
        if self.found.error:  # it cannot speak its protocol (_new_link says why)
            self._fail(f"not started: {self.found.error}")
            return
        if self._mcp is not None and self._mcp.remote:  # an MCP server at a url
            await self.log.rotate()
            self.started_at = trio.current_time()
            self._host.on_changed(self)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keep_idle, None)
                await self._mcp.run_remote()
                nursery.cancel_scope.cancel()
            return
        try:
            await self.log.rotate()  # before the child appends to it
            if self._stopped_before_start():  # (while a big log was copied)
                return
            process = self._spawn()
        except OSError as exc:
            reason, transient = spawn_error(self.found.argv[0], exc)
            self._fail(reason)
            if transient:  # EMFILE, ENOMEM, ...: restarted after the backoff
                self._outcome.failure = reason
            return
        self._process = process
        self.pid = process.pid
        self.started_at = trio.current_time()
        self.note(f"started pid {self.pid}: {' '.join(self.found.argv)}")
        self._host.on_changed(self)
        await self._supervise(process)

    def _stopped_before_start(self) -> bool:
        if self._outcome.stop_code is None:
            return False
        if self.state == State.STARTING:
            self.state = State.EXITED
        return True

    def _spawn(self) -> Process:
        fd = self.log.open_for_child()
        try:
            env = self._env() if callable(self._env) else self._env
            return self._spawner(self.found.argv, cwd=self.found.dir, env=env, stderr=fd)
        finally:
            os.close(fd)

    async def _supervise(self, process: Process) -> None:
        """Runs the process's tasks until it has exited and its stdout is
        drained (up to ``DRAIN_TIMEOUT``), then cancels them.

        Cancellation kills the process group (SIGKILL) and reaps it,
        shielded, within ``kill_timeout``; then :exc:`trio.Cancelled`
        propagates. Its stdout is closed either way.
        """
        config = self._config
        reader_done = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                if self._mcp is not None:  # its MCP client session reads and writes
                    nursery.start_soon(self._mcp.run, process.stdin, process.stdout, reader_done)
                else:
                    self._open_pipes(nursery, process, reader_done)
                nursery.start_soon(self.log.watch)
                nursery.start_soon(self._run_link.pending.expire)
                nursery.start_soon(self._watch_stdout, process, reader_done)
                if self.lazy or self.idle_stop:
                    nursery.start_soon(self._keep_idle, process)
                self.exit_code = await process.wait()
                self._process_exited.set()
                with trio.move_on_after(DRAIN_TIMEOUT):
                    await reader_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            if self.exit_code is None:  # cancelled: kill the group and reap it
                self.exit_code = await stopping.kill_and_reap(process, config)
            self._process_exited.set()
            with trio.CancelScope(shield=True):
                await process.stdout.aclose()  # now, not whenever the GC gets to it

    @property
    def _run_link(self) -> Link:
        """The link of the run under way (made before its process is spawned)."""
        assert self._link is not None, "no run under way"
        return self._link

    def _open_pipes(self, nursery: trio.Nursery, process: Process, reader_done: trio.Event) -> None:
        """Starts zot's protocol on the process's pipes: the stdin writer, the
        inbox (its stdout's reader and the handshake) and its deadlines."""
        link = self._run_link
        assert isinstance(link, Calls)
        outbox = link.open(process.stdin)
        inbox = self._inbox = Inbox(
            self,
            host=self._host,
            pending=link.pending,
            config=self._config,
            spawned=trio.current_time(),
            on_ready=self._mark_ready,
            on_refuse=self._refuse,
        )
        nursery.start_soon(link.write, outbox)
        nursery.start_soon(inbox.run, process.stdout, reader_done)
        nursery.start_soon(inbox.keep_time)

    def _finish(self) -> None:
        code = self.exit_code
        spawned = self._process is not None
        self.state, self.last_error, line = self._outcome.judge(
            self.state, self.last_error, code, spawned=spawned, refused=self._refused
        )
        if line is not None:
            self.note(line)
        held = self._calls.holding
        pending = self._link.pending if self._link is not None else None
        stderr = self.log.stderr_tail() if (pending or held) and spawned else []
        error = self._outcome.unanswered(self.name, code, stderr)
        if self._inbox is not None and self._inbox.noise.dropped:
            self.note(
                f"dropped {self._inbox.noise.dropped} notify frames and bad lines "
                "in its last second"
            )
        if pending is not None:
            pending.fail_all(error)
        if held:  # woken, and gone before it was ready
            why = f": {self.last_error}" if self.last_error else ""
            self._calls.fail(
                RequestError(error.code, f"extension {self.name!r} did not start{why}")
            )
        self._calls.fail(error)
        self._host.on_exit(self)
        self.settled.set()
        self.finished.set()

    # --- what the handshake decides (see Inbox) -----------------------------------

    @property
    def _refused(self) -> bool:
        return self._inbox is not None and self._inbox.refused

    def _mark_ready(self) -> None:
        if self.state != State.STARTING:
            return
        self.state = State.READY
        self.settled.set()
        self._woken_ready()
        self._host.on_changed(self)

    def _fail(self, reason: str) -> None:
        self.state = State.FAILED
        self.last_error = reason
        self.note(reason)
        self.settled.set()

    # --- reporting ----------------------------------------------------------------

    def note(self, message: str) -> None:
        """Appends a line from the daemon to the extension's log (and debug log);
        inline, and provably tiny (see :meth:`ExtensionLog.note`)."""
        self.log.note(message)

    def info(
        self,
        commands: list[str],
        tools: list[str],
        shadowed: list[Shadowed] | None = None,
        hint: str = "",
    ) -> ExtensionInfo:
        """This extension as ``list_extensions`` shows it (see :func:`.status.info`)."""
        return status.info(self, commands, tools, shadowed, hint)
