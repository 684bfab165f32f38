"""One extension: its process, its pipes, its handshake and its pending calls.

:meth:`Extension.run` is the extension's supervisor, one nursery per
extension::

    Extension.run
    ├─ the process (own process group; stderr appended straight to its log)
    ├─ reader: stdout line -> msgspec decode -> route (replies, registrations)
    ├─ writer: bounded channel -> stdin, queued frames sent in one write
    └─ handshake: hello deadline, then ready (or quiet, or grace)

The child's stderr is the log file itself (opened ``O_APPEND``), not a pipe
we copy from: no task, no copy, and the log keeps everything the extension
wrote even if the daemon dies. The daemon's own notes about the extension
(refusals, shadowed names, malformed lines) are appended to the same file.

Requests are matched to replies by ids from a per-extension counter. When the
process ends, every request still pending fails at once with
:class:`~zotd.model.errors.RequestError`; nothing waits for its deadline.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

import trio

from ..model import logfiles
from ..model.config import Config
from ..model.errors import RequestError, extension_failed
from ..model.manifest import Found
from ..protocol import extension as ep
from ..protocol.agent import ErrorCode, ExtensionInfo, Shadowed
from ..protocol.frames import FrameError, UnknownFrame, is_json_object
from ..protocol.lines import Oversized
from .process import Process, Spawner
from .streams import LineReader, Outbox

log = logging.getLogger(__name__)

#: After the process exits, how long its stdout may take to reach EOF (frames
#: it wrote just before exiting are still read and routed).
DRAIN_TIMEOUT = 0.5

#: How often a running extension's log size is checked for rotation.
LOG_CHECK_INTERVAL = 10.0

#: Lines of the log shown in ``list_extensions``.
LOG_TAIL_LINES = 10

#: "Noise" an extension may send per second: ``notify`` frames and bad lines
#: (malformed, oversized, of unknown type, replies to no pending call). Past
#: it, noise is dropped (and counted in its log once a second), and its stdout
#: is read more slowly: a flood slows the flooder, not the daemon or the
#: other extensions.
NOISE_PER_SECOND = 500

#: While over that budget, the reader pauses this long after every
#: ``NOISE_PAUSE_EVERY`` dropped lines.
NOISE_PAUSE = 0.01
NOISE_PAUSE_EVERY = 100


class _Noise:
    """Counts an extension's noise per one-second window."""

    __slots__ = ("count", "dropped", "unpaused", "window")

    def __init__(self) -> None:
        self.window = float("-inf")
        self.count = 0
        self.dropped = 0
        self.unpaused = 0

    def admit(self, now: float) -> tuple[bool, int]:
        """Whether one more piece of noise is within budget, and how many were
        dropped in the window that just ended (to report), if one ended."""
        ended = 0
        if now - self.window >= 1.0:
            ended, self.window, self.count, self.dropped = self.dropped, now, 0, 0
        self.count += 1
        if self.count <= NOISE_PER_SECOND:
            return True, ended
        self.dropped += 1
        self.unpaused += 1
        return False, ended


#: Frames of the registration window: each one keeps an extension that sends
#: no ``ready`` from counting as ready for another ``ready_idle``.
_REGISTRATIONS = (ep.Hello, ep.RegisterCommand, ep.RegisterTool, ep.Subscribe)

Reply = ep.ToolResult | ep.CommandResponse | ep.EventInterceptResponse
R = TypeVar("R", ep.ToolResult, ep.CommandResponse, ep.EventInterceptResponse)


class State:
    """Live states of an extension."""

    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    #: A project-local extension the user has not trusted (see ``zot ext trust``).
    UNTRUSTED = "untrusted"
    #: Ended on its own; waiting out its backoff before a restart.
    RESTARTING = "restarting"
    EXITED = "exited"
    FAILED = "failed"
    DISABLED = "disabled"


#: States in which the process is alive and takes frames.
RUNNING = frozenset({State.STARTING, State.READY})


class Host(Protocol):
    """What an extension reports to, and asks of, its workspace."""

    def hello_ack(self, ext: Extension) -> ep.HelloAck: ...

    def on_register_command(self, ext: Extension, frame: ep.RegisterCommand) -> str | None: ...

    def on_register_tool(self, ext: Extension, frame: ep.RegisterTool) -> str | None: ...

    def on_notify(self, ext: Extension, frame: ep.Notify) -> None: ...

    def on_panel(self, ext: Extension, frame: ep.PanelRender | ep.PanelClose) -> None: ...

    def on_changed(self, ext: Extension) -> None: ...

    def on_exit(self, ext: Extension) -> None: ...


class _Pending:
    """A one-shot slot for the reply to one request.

    The waiting task is parked and rescheduled directly (no Event): this is
    on the path of every call.
    """

    __slots__ = ("callback", "deadline", "expect", "on_reply", "outcome", "progress", "task")

    def __init__(
        self, expect: type[Reply], callback: Callable[[Reply | RequestError], None] | None = None
    ) -> None:
        self.expect = expect
        self.outcome: Reply | RequestError | None = None
        self.task: trio.lowlevel.Task | None = None
        #: Called with the outcome instead of waking a task (see ``Extension.ask``).
        self.callback = callback
        #: When the expiry task fails it with ``timeout`` (``Extension.ask``).
        self.deadline = math.inf
        #: Called with each ``tool_progress`` frame for this request, if set.
        self.progress: Callable[[ep.ToolProgress], None] | None = None
        #: Called with the reply (not an error) by the reader, before the
        #: waiting task runs: for what must happen before the next frame is read.
        self.on_reply: Callable[[Reply], None] | None = None

    def resolve(self, reply: Reply | None, error: RequestError | None = None) -> None:
        """Delivers the reply (or the error); later calls do nothing."""
        if self.outcome is not None:
            return
        outcome = self.outcome = error if error is not None else reply
        assert outcome is not None
        if self.on_reply is not None and error is None:
            try:
                self.on_reply(outcome)  # type: ignore[arg-type]
            except Exception:
                log.exception("a reply's hook failed")
        if self.callback is not None:
            try:
                self.callback(outcome)
            except Exception:  # a bug there must not take the reader down with it
                log.exception("a reply's callback failed")
        elif self.task is not None:
            trio.lowlevel.reschedule(self.task)
            self.task = None

    async def wait(self) -> Reply | RequestError:
        """Waits for :meth:`resolve`; cancellation withdraws the wait."""
        if self.outcome is None:
            self.task = trio.lowlevel.current_task()

            def abort(_: object) -> trio.lowlevel.Abort:
                self.task = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        else:
            await trio.lowlevel.checkpoint()
        assert self.outcome is not None
        return self.outcome


class Extension:
    """Supervises one extension process for one workspace.

    Args:
        found: the discovered manifest (possibly broken).
        host: the workspace it reports to.
        config: deadlines and limits.
        log_path: its log file (``$ZOT_HOME/logs/ext-<name>.log``).
        spawner: starts the process (tests pass in-memory fakes).
        env: the process's environment.
    """

    def __init__(
        self,
        found: Found,
        *,
        host: Host,
        config: Config,
        log_path: Path,
        spawner: Spawner,
        env: Mapping[str, str],
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
        self.pid: int | None = None
        self.exit_code: int | None = None
        self.last_error = found.error
        self.restarts = 0
        #: Why it was last restarted ("" if never).
        self.restart_reason = ""
        #: When (trio time) it is to be started again, while ``restarting``.
        self.restart_at: float | None = None
        #: When (trio time) its process was spawned.
        self.started_at: float | None = None
        self.events: set[str] = set()
        self.intercepts: set[str] = set()
        #: What its ``hello`` says it can do (informational).
        self.capabilities: list[str] = []
        #: Replies that came for no pending request (after a ``cancel``, or
        #: after the host stopped waiting): dropped, and counted here.
        self.late_replies = 0
        #: Set once the extension is ready, has failed, exited or is disabled, or
        #: its ready grace has passed (an agent's ``hello`` waits for this).
        self.settled = trio.Event()
        #: Set once :meth:`run` has finished.
        self.finished = trio.Event()
        #: Set once :meth:`stop` was called: its end is asked for, not a crash.
        self.stop_requested = trio.Event()
        self._process: Process | None = None
        self._process_exited = trio.Event()
        self._hello = trio.Event()
        self._ready = trio.Event()
        self._quiet_scope: trio.CancelScope | None = None
        self._refused = False
        self._stop_code: str | None = None
        self._next_id = 0
        self._pending: dict[str, _Pending] = {}
        self._noise = _Noise()
        #: The expiry task's cancel scope, whose deadline is the earliest
        #: deadline of a pending ``ask`` (see :meth:`_expire`).
        self._expiry: trio.CancelScope | None = None
        self._next_expiry = math.inf
        #: Frames for its stdin; made when the process starts.
        self._outbox: Outbox | None = None

    # --- lifetime ---------------------------------------------------------------

    async def run(self) -> None:
        """Runs the extension until its process ends; never raises ``Exception``.

        Broken and disabled extensions return at once. On cancellation the
        process group is killed (SIGKILL) and reaped, shielded, before this
        returns; a graceful stop is :meth:`stop`'s job.
        """
        try:
            if self._stop_code is not None:  # stopped before it ever started
                if self.state == State.STARTING:
                    self.state = State.EXITED
                return
            if self.found.error or self.state == State.DISABLED:
                if self.found.error:
                    self.state = State.FAILED
                    self.note(f"not started: {self.found.error}")
                return
            if self.found.untrusted:
                self.state = State.UNTRUSTED
                self.last_error = self.found.untrusted
                self.note(f"not started: {self.found.untrusted}")
                return
            try:
                process = self._start()
            except OSError as exc:
                self._fail(f"cannot start {self.found.argv[0]}: {exc.strerror or exc}")
                return
            self._process = process
            self.pid = process.pid
            self.started_at = trio.current_time()
            self.note(f"started pid {self.pid}: {' '.join(self.found.argv)}")
            self._host.on_changed(self)
            await self._supervise(process)
        except Exception as exc:  # a bug of ours must not take the workspace down
            log.exception("extension %s: internal error", self.name)
            self.last_error = f"internal error: {exc!r}"
            self.state = State.FAILED
        finally:
            self._finish()

    def _start(self) -> Process:
        logfiles.rotate_if_big(self.log_path, self._config.max_log_bytes)
        fd = logfiles.open_append(self.log_path)
        try:
            return self._spawner(self.found.argv, cwd=self.found.dir, env=self._env, stderr=fd)
        finally:
            os.close(fd)

    async def _supervise(self, process: Process) -> None:
        self._outbox = Outbox(process.stdin, self._config.extension_queue)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, self._outbox)
                reader_done = trio.Event()
                nursery.start_soon(self._read, process, reader_done)
                nursery.start_soon(self._handshake)
                nursery.start_soon(self._watch_log)
                nursery.start_soon(self._expire)
                self.exit_code = await process.wait()
                self._process_exited.set()
                with trio.move_on_after(DRAIN_TIMEOUT):
                    await reader_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            if self.exit_code is None:  # cancelled: kill the group and reap it
                process.signal_group(signal.SIGKILL)
                with trio.CancelScope(shield=True), trio.move_on_after(self._config.kill_timeout):
                    self.exit_code = await process.wait()
            self._process_exited.set()
            with trio.CancelScope(shield=True):
                await process.stdout.aclose()  # now, not whenever the GC gets to it

    def _finish(self) -> None:
        code = self.exit_code
        if self._process is not None:
            if self._refused or self.state == State.FAILED:
                self.state = State.FAILED
            elif self._stop_code is not None or code == 0:
                self.state = State.EXITED
                self.note(_describe_exit(code))
            else:
                self.state = State.FAILED
                self.last_error = self.last_error or _describe_exit(code)
                self.note(_describe_exit(code))
        error = RequestError(
            self._stop_code or ErrorCode.EXTENSION_FAILED,
            f"extension {self.name!r} {_describe_exit(code)} before replying",
        )
        if self._noise.dropped:
            self.note(
                f"dropped {self._noise.dropped} notify frames and bad lines in its last second"
            )
        for slot in self._pending.values():
            slot.resolve(None, error)
        self._pending.clear()
        self._host.on_exit(self)
        self.settled.set()
        self.finished.set()

    async def stop(self, code: str = ErrorCode.EXTENSION_FAILED) -> None:
        """Stops the extension gracefully; bounded, never raises.

        Sends ``shutdown`` and closes stdin, waits ``shutdown_timeout`` for
        the process to exit, then SIGTERMs its group, waits ``kill_timeout``,
        then SIGKILLs it (reference, "Lifecycle", step 6). Requests still
        pending fail with ``code``. Returns once :meth:`run` has finished,
        or, if cancelled, as soon as it is cancelled.
        """
        if self._stop_code is None:
            self._stop_code = code
        self.stop_requested.set()
        process = self._process
        if process is None or self._process_exited.is_set():
            if self._process is not None:
                await self.finished.wait()
            return
        self.state = State.STOPPING
        self._host.on_changed(self)
        if self._outbox is not None:
            try:
                self._outbox.put_nowait(ep.encode(ep.Shutdown()))
                self._outbox.close()
            except trio.BrokenResourceError:
                pass
        with trio.move_on_after(self._config.shutdown_timeout):
            await self._process_exited.wait()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self._process_exited.is_set():
                break
            self.note(f"did not exit after shutdown; sending {signal.Signals(sig).name}")
            process.signal_group(sig)
            with trio.move_on_after(self._config.kill_timeout):
                await self._process_exited.wait()
        await self.finished.wait()

    def ended_on_its_own(self) -> str | None:
        """Why the process ended, if it ran and ended without being asked to
        (and was not refused for a protocol error); else ``None``."""
        if self._process is None or self._refused or self.stop_requested.is_set():
            return None
        if not self.finished.is_set():
            return None
        return _describe_exit(self.exit_code)

    # --- requests -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the process is up and takes frames."""
        return self.state in RUNNING

    @property
    def alive(self) -> bool:
        """Whether its process has been spawned and has not exited yet."""
        return self._process is not None and not self._process_exited.is_set()

    @property
    def pending(self) -> int:
        """Requests sent to it and not yet answered, failed or withdrawn."""
        return len(self._pending)

    def _next_request(self) -> tuple[Outbox, str]:
        """Its stdin's outbox and a new request id; ``RequestError`` if not running."""
        outbox = self._outbox
        if not self.running or outbox is None:
            raise extension_failed(f"extension {self.name!r} is {self.state}")
        self._next_id += 1
        return outbox, str(self._next_id)

    async def request(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        *,
        on_reply: Callable[[R], None] | None = None,
    ) -> R:
        """Sends the frame ``make(id)`` and waits for the reply with that id.

        ``on_reply`` is called with the reply by the task that reads it,
        before the extension's next frame is read.

        Cancellation (the caller's deadline) withdraws the request; a reply
        that comes later is logged and dropped.

        Raises:
            RequestError: the extension is not running, ends before replying,
                or replies with a malformed or mismatched frame.
        """
        outbox, rid = self._next_request()
        slot = _Pending(expect)
        slot.on_reply = on_reply  # type: ignore[assignment]
        self._pending[rid] = slot
        try:
            try:
                await outbox.put(make(rid), alone=len(self._pending) == 1)
            except trio.BrokenResourceError:
                raise extension_failed(
                    f"extension {self.name!r} stopped reading its stdin"
                ) from None
            outcome = await slot.wait()
        finally:
            self.withdraw(rid)
        if isinstance(outcome, RequestError):
            raise outcome
        assert isinstance(outcome, expect)
        return outcome

    def ask(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        callback: Callable[[R | RequestError], None],
        *,
        timeout: float | None = None,
        alone: bool = True,
        progress: Callable[[ep.ToolProgress], None] | None = None,
    ) -> str:
        """Sends the frame ``make(id)`` without waiting; ``callback`` gets the
        reply (or the error) from the task that reads it.

        This is the hot path of tool calls and of intercepts: no task per
        request, no cancel scope per request. ``timeout`` is enforced by the
        extension's expiry task, which fails the request with a ``timeout``
        :class:`RequestError` at its deadline. The frame is queued even past
        ``extension_queue`` (requests are bounded by the daemon's ``busy``
        limits), so that a request waits for a slow reader inside its
        deadline, as an awaited :meth:`request` does.

        ``alone=False`` says more requests follow at once: the frame is queued
        for the writer to send with them, not written on its own.
        ``progress`` gets the ``tool_progress`` frames sent for the request.

        Returns the request's id: pass it to :meth:`withdraw` when the answer
        is no longer wanted. Raises :class:`RequestError` if the extension is
        not running.
        """
        outbox, rid = self._next_request()
        try:
            outbox.put_nowait(make(rid), alone=alone and not self._pending, force=True)
        except trio.BrokenResourceError:
            raise extension_failed(f"extension {self.name!r} stopped reading its stdin") from None
        slot = _Pending(expect, callback)  # type: ignore[arg-type]
        slot.progress = progress
        if timeout is not None:
            slot.deadline = deadline = trio.current_time() + timeout
            if deadline < self._next_expiry:
                self._next_expiry = deadline
                if self._expiry is not None:
                    self._expiry.deadline = deadline
        self._pending[rid] = slot
        return rid

    async def _expire(self) -> None:
        # One cancel scope for the deadlines of every pending `ask`: it sleeps
        # until the earliest, fails what is due, and looks for the next. (A
        # cancel scope per call would cost a fifth of a call's time.)
        while True:
            with trio.CancelScope(deadline=self._next_expiry) as self._expiry:
                await trio.sleep_forever()
            self._expiry = None
            now = trio.current_time()
            soonest = math.inf
            for rid, slot in list(self._pending.items()):
                if slot.deadline <= now:
                    del self._pending[rid]
                    self._cancel(rid)
                    slot.resolve(None, RequestError(ErrorCode.TIMEOUT, "no reply in time"))
                else:
                    soonest = min(soonest, slot.deadline)
            self._next_expiry = soonest

    def withdraw(self, rid: str) -> None:
        """Forgets a request; if it was still unanswered, tells the extension
        with a ``cancel`` frame. A reply that comes later is dropped and counted."""
        if self._pending.pop(rid, None) is not None:
            self._cancel(rid)

    def _cancel(self, rid: str) -> None:
        # Extensions that do not know `cancel` ignore it, as the reference's
        # examples ignore every frame they do not know.
        if self.running:
            self.send_nowait(ep.encode(ep.Cancel(id=rid)))

    def send_nowait(self, frame: bytes) -> bool:
        """Queues a one-way frame; ``False`` if it was dropped (queue full or not running)."""
        if not self.running or self._outbox is None:
            return False
        try:
            queued = self._outbox.put_nowait(frame)
        except trio.BrokenResourceError:
            return False
        if not queued:
            self.note("stdin queue full: dropped a frame (is the extension reading stdin?)")
        return queued

    # --- the three tasks ------------------------------------------------------------

    async def _write(self, outbox: Outbox) -> None:
        try:
            await outbox.run()
        except trio.BrokenResourceError:
            pass  # the process closed stdin or died; the exit is handled by run()

    async def _read(self, process: Process, done: trio.Event) -> None:
        try:
            async for lines in LineReader(process.stdout, self._config.max_frame_bytes):
                for line in lines:
                    if isinstance(line, Oversized):
                        if self._noisy():
                            self.note(
                                f"dropped a {line.size}-byte line: longer than the "
                                f"{self._config.max_frame_bytes}-byte frame limit"
                            )
                    elif line and not line.isspace():
                        self._on_line(line)
                if self._noise.unpaused >= NOISE_PAUSE_EVERY:
                    self._noise.unpaused = 0
                    await trio.sleep(NOISE_PAUSE)
        finally:
            done.set()

    async def _watch_log(self) -> None:
        # The child writes its log directly; keep it under max_log_bytes.
        while True:
            await trio.sleep(LOG_CHECK_INTERVAL)
            path, limit = self.log_path, self._config.max_log_bytes
            if logfiles.size(path) <= limit:
                continue  # the usual case: a stat, no thread
            try:
                rotated = await trio.to_thread.run_sync(logfiles.rotate_if_big, path, limit)
            except OSError as exc:
                log.warning("cannot rotate %s: %s", path, exc)
                continue
            if rotated:
                self.note(f"rotated this log (it passed {limit} bytes) to {path.name}.1")

    async def _handshake(self) -> None:
        # Both windows count from the spawn, so that every extension is
        # settled (ready, failed, or at least waited for) by spawn +
        # ready_grace: that bounds how long an agent's `hello` waits.
        config = self._config
        spawned = trio.current_time()
        with trio.move_on_at(spawned + config.hello_timeout):
            with trio.move_on_at(spawned + config.ready_grace):
                await self._hello.wait()
            if not self._hello.is_set():
                self.settled.set()  # agents stop waiting; it may still say hello
                await self._hello.wait()
        if not self._hello.is_set():
            self._refuse(f"sent no `hello` frame within {config.hello_timeout:g} s")
            return
        # A late hello still gets one quiet window to register in.
        deadline = max(spawned + config.ready_grace, trio.current_time() + config.ready_idle)
        with trio.move_on_at(deadline) as grace:
            with trio.move_on_after(config.ready_idle) as quiet:
                self._quiet_scope = quiet
                await self._ready.wait()
        self._quiet_scope = None
        if self._ready.is_set() or not self.running:
            return
        if grace.cancelled_caught:
            self.note(f"no `ready` within {config.ready_grace:g} s; proceeding without it")
        else:
            self.note(f"no `ready` frame; ready after {config.ready_idle:g} s of quiet")
        self._mark_ready()

    # --- routing ----------------------------------------------------------------

    def _on_line(self, line: bytes) -> None:
        if self._refused:
            return  # it is being killed; nothing it says counts
        try:
            frame = ep.decode_extension_frame(line)
        except FrameError as exc:
            self._on_bad_frame(exc, line)
            return
        if isinstance(frame, UnknownFrame):
            if self._noisy():
                log.debug("extension %s: ignored unknown frame type %r", self.name, frame.type)
            return
        if self._quiet_scope is not None and isinstance(frame, _REGISTRATIONS):
            # Still registering: not quiet yet. (Replies, progress and notes
            # say nothing of that: an extension already serving calls
            # without ever sending `ready` must not wait out the grace.)
            self._quiet_scope.deadline = trio.current_time() + self._config.ready_idle
        if not self._hello.is_set():
            self._on_first(frame)
            return
        if isinstance(frame, ep.ToolResult | ep.CommandResponse | ep.EventInterceptResponse):
            self._on_reply(frame)
        elif isinstance(frame, ep.Notify):
            if self._noisy():
                self._host.on_notify(self, frame)
        elif isinstance(frame, ep.ToolProgress):
            self._on_progress(frame)
        elif isinstance(frame, ep.PanelRender | ep.PanelClose):
            if self._noisy():  # a flood of redraws slows the flooder alone
                self._host.on_panel(self, frame)
        elif isinstance(frame, ep.RegisterCommand):
            self._report_shadow(self._host.on_register_command(self, frame))
        elif isinstance(frame, ep.RegisterTool):
            if not is_json_object(frame.schema):
                self.note(f"tool {frame.name!r} refused: `schema` must be a JSON object")
                return
            self._report_shadow(self._host.on_register_tool(self, frame))
        elif isinstance(frame, ep.Subscribe):
            self._subscribe(frame)
        elif isinstance(frame, ep.Ready):
            self._mark_ready()
        elif isinstance(frame, ep.ShutdownAck):
            log.debug("extension %s: shutdown_ack", self.name)
        elif isinstance(frame, ep.Hello):
            self.note("ignored a second `hello`")

    def _on_first(self, frame: ep.ExtensionFrame) -> None:
        if not isinstance(frame, ep.Hello):
            tag = type(frame).__struct_config__.tag
            self._refuse(f"first frame must be `hello`, got `{tag}`")
        elif frame.name != self.name:
            self._refuse(
                f"`hello` names {frame.name!r} but extension.json names {self.name!r}; "
                "they must match"
            )
        else:
            self._hello.set()
            self.capabilities = list(frame.capabilities)
            self.send_nowait(ep.encode(self._host.hello_ack(self)))

    def _on_reply(self, frame: Reply) -> None:
        # Answered: the slot goes (an awaited request's `finally` pops it too).
        slot = self._pending.pop(str(frame.id), None)
        if slot is not None and isinstance(frame, slot.expect):
            slot.resolve(frame)
            return
        tag = type(frame).__struct_config__.tag
        if slot is None:
            self.late_replies += 1
            if self._noisy():
                self.note(
                    f"dropped `{tag}` for id {frame.id!r}: no such request pending (answered "
                    "already, cancelled, or past its deadline)"
                )
        else:
            want = slot.expect.__struct_config__.tag
            slot.resolve(
                None,
                extension_failed(f"extension {self.name!r} answered with `{tag}`, not `{want}`"),
            )

    def _on_progress(self, frame: ep.ToolProgress) -> None:
        slot = self._pending.get(str(frame.id))
        if slot is None or slot.expect is not ep.ToolResult:
            if self._noisy():
                self.note(f"dropped `tool_progress` for id {frame.id!r}: no tool call pending")
        elif slot.progress is not None and self._noisy():
            try:
                slot.progress(frame)
            except Exception:  # a bug there must not take the reader down with it
                log.exception("a progress callback failed")

    def _on_bad_frame(self, exc: FrameError, line: bytes) -> None:
        if self._noisy():
            preview = line[:200].decode("utf-8", "replace")
            self.note(f"skipped a malformed line ({exc.message}): {preview}")
        slot = self._pending.pop(str(exc.id), None) if exc.id is not None else None
        if slot is not None:
            slot.resolve(
                None,
                extension_failed(f"extension {self.name!r} sent a malformed reply: {exc.message}"),
            )

    def _noisy(self) -> bool:
        """Counts one piece of noise; ``False`` if it is over budget (drop it quietly)."""
        admitted, ended = self._noise.admit(trio.current_time())
        if ended:
            self.note(
                f"dropped {ended} notify frames and bad lines in one second "
                f"(more than {NOISE_PER_SECOND} a second); reading its output more slowly"
            )
        return admitted

    def _subscribe(self, frame: ep.Subscribe) -> None:
        self.events = set(frame.events)
        unknown = self.events - ep.EVENTS
        if unknown:
            self.note(f"subscribed to events zot does not send (yet): {sorted(unknown)}")
        self.intercepts = set(frame.intercept) & ep.INTERCEPTABLE
        ignored = set(frame.intercept) - ep.INTERCEPTABLE
        if ignored:
            self.note(f"cannot intercept {sorted(ignored)}: only {sorted(ep.INTERCEPTABLE)}")
        if self.state == State.READY:
            self._host.on_changed(self)

    def _mark_ready(self) -> None:
        if self.state != State.STARTING:
            return
        self.state = State.READY
        self._ready.set()
        self.settled.set()
        self._host.on_changed(self)

    def _report_shadow(self, reason: str | None) -> None:
        if reason is not None:
            self.note(reason)
        elif self.state == State.READY:
            self._host.on_changed(self)  # a late registration

    def _refuse(self, reason: str) -> None:
        self._refused = True
        self._fail(f"refused: {reason}")
        if self._process is not None:
            self._process.signal_group(signal.SIGKILL)

    def _fail(self, reason: str) -> None:
        self.state = State.FAILED
        self.last_error = reason
        self.note(reason)
        self.settled.set()

    # --- reporting ----------------------------------------------------------------

    def note(self, message: str) -> None:
        """Appends a line from the daemon to the extension's log (and debug log)."""
        log.debug("extension %s: %s", self.name, message)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            logfiles.append(self.log_path, f"[zotd {stamp}] {message}\n")
        except OSError as exc:
            log.warning("cannot write %s: %s", self.log_path, exc)

    def info(
        self,
        commands: list[str],
        tools: list[str],
        shadowed: list[Shadowed] | None = None,
        hint: str = "",
    ) -> ExtensionInfo:
        """This extension as ``list_extensions`` shows it."""
        m = self.found.manifest
        shows_pid = self.running or self.state == State.STOPPING
        uptime = None
        if shows_pid and self.started_at is not None:
            uptime = round(trio.current_time() - self.started_at, 3)
        return ExtensionInfo(
            name=self.name,
            version=m.version if m else "",
            description=m.description if m else "",
            language=m.language if m else "",
            scope=self.found.scope,
            dir=str(self.found.dir),
            enabled=m.enabled if m else True,
            state=self.state,
            pid=self.pid if shows_pid else None,
            restarts=self.restarts,
            restart_reason=self.restart_reason,
            exit_code=self.exit_code,
            commands=commands,
            tools=tools,
            events=sorted(self.events),
            intercepts=sorted(self.intercepts),
            log=str(self.log_path),
            last_error=self.last_error,
            log_tail=logfiles.tail(self.log_path, LOG_TAIL_LINES)
            if self.exit_code is not None
            else [],
            capabilities=self.capabilities,
            late_replies=self.late_replies,
            warnings=list(self.found.warnings),
            uptime_s=uptime,
            shadowed=shadowed or [],
            hint=hint,
        )


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
