"""Starting an extension's process and waiting for it to end.

We fork with :class:`subprocess.Popen` from the Trio thread itself, not from
a worker thread as ``trio.run_process`` does: Linux ties a parent-death
signal to the thread that forked the child, and Trio's idle worker threads
exit after 10 s (see the design brief, "Pitfalls"). No parent-death signal
is set yet; forking here keeps that possible. The pipes are
wrapped in :class:`trio.lowlevel.FdStream`, and the exit is awaited through a
pidfd on Linux.

Every extension runs in its own session and process group (pgid == pid), so
a terminal's Ctrl+C reaches only the daemon, and signals go to the whole
group: wrappers such as ``sh -c`` or ``npx`` take their children with them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import trio


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
    """A real child process with its stdin and stdout as Trio streams."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin_fd: int, stdout_fd: int) -> None:
        self._popen = popen
        self.stdin: trio.abc.SendStream = trio.lowlevel.FdStream(stdin_fd)
        self.stdout: trio.abc.ReceiveStream = trio.lowlevel.FdStream(stdout_fd)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

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
                return self._popen.wait()
        # Elsewhere: a worker thread blocks in waitpid; abandoned on cancel.
        code = await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
        self.signal_group(signal.SIGKILL)
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


def spawn(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: int) -> ChildProcess:
    """Starts ``argv`` with piped stdin/stdout and ``stderr`` as its stderr.

    Raises:
        OSError: the executable could not be started (not found, not
            executable, bad interpreter line, ...).
    """
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
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
        )
    except BaseException:
        os.close(stdin_w)
        os.close(stdout_r)
        raise
    finally:
        os.close(stdin_r)
        os.close(stdout_w)
    return ChildProcess(popen, stdin_w, stdout_r)
