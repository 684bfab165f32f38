"""How a run of an extension ends: a stop it is asked for, or a failure of
its own the supervisor acts on.

:class:`Ending` is a base of :class:`~.extension.Extension` (which owns the
state it reads, declared below). A stop (:meth:`Ending.stop`) is graceful
and bounded: ``shutdown`` and stdin closed, then SIGTERM and SIGKILL past
their deadlines (:mod:`.stopping`). The failures are a process that closes
its stdout and stays alive (no reply can come from it), a stdin it stopped
reading or a session it broke (:meth:`Ending.stuck`), and a handshake it
broke (refused): each is killed, and its restart policy judges the end
(:meth:`Ending.ended_on_its_own`, :meth:`Ending.judged_exit_code`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import trio

from ..model.config import Config
from ..model.errors import extension_failed
from ..protocol.agent import ErrorCode
from . import stopping
from .outcome import Outcome
from .process import Process
from .status import Host, State
from .waking import Waking

if TYPE_CHECKING:
    from .extension import Extension
    from .mcp_link import McpLink

__all__ = ["EOF_GRACE", "Ending"]

#: After its stdout ends, how long the process may take to exit; still alive
#: then, it has closed its stdout and kept running, and is failed and stopped.
EOF_GRACE = 0.5


class Ending:
    """Stops an extension, and fails it on its own failures (see the module)."""

    name: str
    state: State
    last_error: str
    exit_code: int | None
    stop_requested: trio.Event
    finished: trio.Event
    _host: Host
    _config: Config
    _calls: Waking
    _mcp: McpLink | None
    _process: Process | None
    _process_exited: trio.Event
    _outcome: Outcome
    _winding_down: bool
    _dozing: bool
    _start_later: Callable[[Extension], None] | None

    async def stop(self, code: str = ErrorCode.EXTENSION_FAILED) -> None:
        """Stops the extension gracefully; bounded, never raises.

        Sends ``shutdown`` and closes stdin, waits ``shutdown_timeout`` for
        the process to exit, then SIGTERMs its group, waits ``kill_timeout``,
        then SIGKILLs it (reference, "Lifecycle", step 6). Requests still
        pending fail with ``code``. Returns once :meth:`Extension.run
        <.extension.Extension.run>` has finished.

        Cancellation raises :exc:`trio.Cancelled` at once and leaves the
        stop where it was: ``shutdown`` is sent and stdin closed, no further
        signal is sent, and the process is left to exit, or to be killed
        when its run is cancelled (which owns it).
        """
        if self._outcome.stop_code is None:
            self._outcome.stop_code = code
        self.stop_requested.set()
        if self._ext.dormant:  # asleep with no supervisor (see doze): it ends here
            self._start_later = None
            self.state = State.EXITED
            self._ext._finish()
            return
        self._calls.wanted.set()  # (a sleeping one's run ends)
        if self._mcp is not None and self._mcp.remote:  # no process: its connection
            self._mcp.close()
            await self.finished.wait()
            return
        process = self._process
        if process is None or self._process_exited.is_set():
            if self._process is not None or self.state == State.SLEEPING:
                await self.finished.wait()
            elif self.state == State.READY:  # one that runs nothing (skills only)
                self.state = State.EXITED
                self._host.on_changed(self._ext)
            return
        if not self._winding_down:  # (else already on its way: see _watch_stdout)
            await self._wind_down(process)
        await self.finished.wait()

    async def _wind_down(self, process: Process) -> None:
        """``shutdown`` and stdin closed, then :func:`.stopping.wind_down`
        (SIGTERM, then SIGKILL, each after its deadline); returns once the
        process has exited (or been SIGKILLed and waited for ``kill_timeout``).

        Cancellation raises :exc:`trio.Cancelled` at once; no further signal
        is sent."""
        self._winding_down = True
        self.state = State.STOPPING
        self._host.on_changed(self._ext)
        self._ext._run_link.shutdown()
        await stopping.wind_down(process, self._process_exited, self._config, self._ext.note)

    def ended_on_its_own(self) -> str | None:
        """Why the run ended, if it ended without being asked to and counts
        as a crash: the process exited, closed its stdout and kept running,
        or could not be spawned for a transient reason (EMFILE, ENOMEM, ...).
        ``None`` if it was asked to stop, refused for a protocol error, not
        started, or still running."""
        if self._ext._refused or self.stop_requested.is_set() or not self.finished.is_set():
            return None
        return self._outcome.crash(self.exit_code, spawned=self._process is not None)

    @property
    def judged_exit_code(self) -> int | None:
        """The exit code the restart policy judges: the process's, or ``None``
        when zotd failed the run itself (so ``on-failure`` restarts it even
        if the process, told to shut down, then exited 0)."""
        return self._outcome.judged_exit_code(self.exit_code)

    async def _watch_stdout(self, process: Process, reader_done: trio.Event) -> None:
        """Fails and stops the process if its stdout ends and it stays alive
        (``EOF_GRACE`` later): no reply can come from it any more.

        Cancellation (the process's tasks ending) raises :exc:`trio.Cancelled`
        and leaves a stop it began where it was (see :meth:`_wind_down`)."""
        await reader_done.wait()
        with trio.move_on_after(EOF_GRACE):
            await self._process_exited.wait()
        if self._process_exited.is_set() or self.stop_requested.is_set() or self._ext._refused:
            return
        if self._dozing:
            return  # told to shut down for idleness: the stop escalation goes on
        self._outcome.failure = "closed its stdout but kept running"
        self.last_error = self._outcome.failure
        self._ext.note(f"{self._outcome.failure}; stopping it")
        self._ext._run_link.pending.fail_all(
            extension_failed(
                f"extension {self.name!r} closed its stdout before replying (its process "
                "is still running, so no reply can come); it is being stopped"
            )
        )
        await self._wind_down(process)

    def _refuse(self, reason: str) -> None:
        self._ext._fail(f"refused: {reason}")
        if self._process is not None:
            stopping.kill(self._process)

    def stuck(self, reason: str) -> None:
        """Its stdin is stuck (see :mod:`.calls`): failed now, and killed, so
        that its restart policy applies (an end it did not ask for), with
        ``reason`` as the restart's reason. Ignored while it is being put to
        sleep (its session ending then is what was asked)."""
        if self._dozing:
            self._ext.note(f"while going to sleep: {reason}")
            return
        self._ext._fail(reason)
        self._outcome.failure = reason
        if self._process is not None:
            stopping.kill(self._process)

    @property
    def _ext(self) -> Extension:
        return cast("Extension", self)  # (the one class this is a base of)
