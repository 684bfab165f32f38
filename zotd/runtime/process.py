"""Starting an extension's process and waiting for it to end.

We fork with :class:`subprocess.Popen` from the Trio thread itself, not from
a worker thread as ``trio.run_process`` does: Linux ties a parent-death
signal to the thread that forked the child, and Trio's idle worker threads
exit after 10 s (see the design brief, "Pitfalls"). The pipes are wrapped in
:class:`trio.lowlevel.FdStream`, and the exit is awaited through a pidfd on
Linux.

No orphans: on Linux every child gets a parent-death signal (SIGKILL), and
:class:`Watchdog` keeps a small process beside the daemon that kills every
extension's process group once the daemon is gone, however it died. It also
marks each extension's environment (``ZOTD_INSTANCE``), which whatever the
extension starts inherits: on Linux the watchdog kills the marked processes
that left the group (``setsid``, a double fork) when their extension has
exited, at shutdown, and when the daemon is killed.

Every extension runs in its own session and process group (pgid == pid), so
a terminal's Ctrl+C reaches only the daemon, and signals go to the whole
group: wrappers such as ``sh -c`` or ``npx`` take their children with them.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import trio

from ..model.environment import INSTANCE
from . import watchdog

log = logging.getLogger(__name__)

#: How long the daemon waits for the watchdog's last sweep at exit.
WATCHDOG_EXIT_TIMEOUT = 10.0


class Process(Protocol):
    """What the supervisor needs of a running extension process.

    The real one is :class:`ChildProcess`; tests substitute in-memory fakes.
    """

    @property
    def pid(self) -> int | None: ...

    @property
    def stdin(self) -> trio.abc.SendStream: ...

    @property
    def stdout(self) -> trio.abc.ReceiveStream: ...

    async def wait(self) -> int:
        """Waits for the process to exit, SIGKILLs whatever is left in its
        process group, and returns its exit code (-N for signal N)."""
        ...

    def signal_group(self, sig: int) -> None:
        """Sends ``sig`` to the process group; does nothing once it is all gone."""
        ...


class Spawner(Protocol):
    """Starts a process: ``argv`` in ``cwd`` with ``env``, stderr to the ``stderr`` fd."""

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: int
    ) -> Process: ...


class ChildProcess:
    """A real child process with its stdin and stdout as Trio streams.

    ``on_reaped(pid)`` is called once the process (and its group) is gone.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin_fd: int,
        stdout_fd: int,
        on_reaped: Callable[[int], None] | None = None,
    ) -> None:
        self._popen = popen
        self._on_reaped = on_reaped
        self.stdin: trio.abc.SendStream = trio.lowlevel.FdStream(stdin_fd)
        self.stdout: trio.abc.ReceiveStream = trio.lowlevel.FdStream(stdout_fd)

    @property
    def pid(self) -> int:
        return self._popen.pid

    async def wait(self) -> int:
        """Waits for exit, kills the rest of the process group, reaps the process.

        On Linux the group is swept while the leader is still a zombie, so
        its pid (the group's id) cannot have been reused by then.
        Cancellation leaves the process running (and unreaped); the caller
        then signals it and waits again.
        """
        if self._popen.returncode is not None:
            return self._popen.returncode
        if sys.platform == "linux":
            try:
                pidfd = os.pidfd_open(self._popen.pid)
            except ProcessLookupError:
                pass  # already gone; wait() below reaps it at once
            else:
                try:
                    await trio.lowlevel.wait_readable(pidfd)
                finally:
                    os.close(pidfd)
                self.signal_group(signal.SIGKILL)
                return self._reaped(self._popen.wait())
        # Elsewhere: a worker thread blocks in waitpid; abandoned on cancel.
        code = await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
        self.signal_group(signal.SIGKILL)
        return self._reaped(code)

    def _reaped(self, code: int) -> int:
        if self._on_reaped is not None:
            self._on_reaped(self._popen.pid)
            self._on_reaped = None
        return code

    def signal_group(self, sig: int) -> None:
        """Signals the whole process group, even after the leader has exited.

        A pgid cannot be reused while any process is still in that group (nor
        while the leader is an unreaped zombie), so this never hits a stranger.
        """
        try:
            os.killpg(self._popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


#: From <linux/prctl.h>.
_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when the daemon dies (Linux)."""
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        # Runs in the child between fork and exec: a system call and nothing more.
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the daemon died before the call above
            os._exit(1)

    parent = os.getpid()
    return preexec


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stderr: int,
    on_reaped: Callable[[int], None] | None = None,
) -> ChildProcess:
    """Starts ``argv`` with piped stdin/stdout and ``stderr`` as its stderr.

    On Linux the child gets a parent-death signal (SIGKILL): it ends with
    the daemon, however the daemon ends.

    Raises:
        OSError: the executable could not be started (not found, not
            executable, bad interpreter line, ...).
    """
    stdin_r, stdin_w = os.pipe()
    try:
        stdout_r, stdout_w = os.pipe()
    except BaseException:  # EMFILE, say: the first pipe must not leak
        os.close(stdin_r)
        os.close(stdin_w)
        raise
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=stdin_r,
            stdout=stdout_w,
            stderr=stderr,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=_parent_death_signal(),
        )
    except BaseException:
        os.close(stdin_w)
        os.close(stdout_r)
        raise
    finally:
        os.close(stdin_r)
        os.close(stdout_w)
    return ChildProcess(popen, stdin_w, stdout_r, on_reaped)


class Watchdog:
    """The daemon's side of :mod:`zotd.runtime.watchdog`, as a :class:`Spawner`.

    It starts the watchdog process and registers each extension's process
    group with it, so that the groups end even if the daemon is killed with
    SIGKILL; and it sets ``ZOTD_INSTANCE=<id>.<n>`` in the n-th extension's
    environment (over anything the manifest says), so that the watchdog can
    find what the extension started outside its group. :meth:`close` at
    exit, once every extension is stopped: the watchdog then sees end of
    file, kills whatever still carries this daemon's mark, and exits.

    Args:
        launched: what :func:`.watchdog.launch` returned, if the process was
            started already (the ``zotd`` command starts it before it imports
            the daemon); else it is started here.

    Raises:
        OSError: the process could not be started.
    """

    def __init__(self, launched: tuple[str, subprocess.Popen[bytes]] | None = None) -> None:
        instance, process = launched or watchdog.launch()
        #: This daemon's mark: unique to it, on this machine and over time.
        self.instance = instance
        self._numbers = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = process

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: int
    ) -> ChildProcess:
        number = next(self._numbers)
        marked = {**env, INSTANCE: f"{self.instance}.{number}"}
        child = spawn(argv, cwd=cwd, env=marked, stderr=stderr, on_reaped=self._forget)
        self._tell(f"+{child.pid} {number}\n")
        return child

    def _forget(self, pgid: int) -> None:
        self._tell(f"-{pgid}\n")

    def _tell(self, line: str) -> None:
        process = self._process
        if process is None or process.stdin is None:
            return
        try:
            process.stdin.write(line.encode())
            process.stdin.flush()
        except OSError:
            log.warning("the watchdog process is gone; extensions may outlive a killed daemon")
            self._process = None

    def close(self) -> None:
        """Lets the watchdog sweep and exit, and reaps it (killed if its
        sweep takes more than :data:`WATCHDOG_EXIT_TIMEOUT`)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=WATCHDOG_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("the watchdog's last sweep took too long; some processes may be left")
            process.kill()
            process.wait()
