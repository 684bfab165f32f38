"""A small process that outlives the daemon just long enough to end its extensions.

Run as ``python -I -S .../watchdog.py MARK`` (:func:`launch`), started by the
daemon with a pipe on its stdin. ``MARK`` is ``ZOTD_INSTANCE=<id>``: the daemon sets
``ZOTD_INSTANCE=<id>.<n>`` in the environment of its n-th extension process,
and every process that extension starts inherits it, whatever process group
or session it moves to (``setsid``, a double fork).

The daemon writes ``+PGID N`` when it starts extension number N (its process
group is PGID) and ``-PGID`` when that extension is gone; the watchdog then
kills every process still marked ``<id>.N`` (the ones that left the group).
When the pipe reaches end of file, the daemon has exited, however it died
(SIGKILL and crashes included): the watchdog SIGKILLs every process group
still listed and every process marked ``<id>.*``, then exits. On Linux each
extension also gets a parent-death signal, which ends the group's leader at
once.

Marked processes are found in ``/proc/<pid>/environ`` (Linux). Elsewhere
(macOS) there is no such file: only the process groups are killed, and a
grandchild that left its group (``setsid``) outlives the daemon. A process
that clears its environment, or runs a set-uid program, is not found either.

Deliberately tiny, so it starts fast: no imports from the rest of zotd,
and of the standard library only what an interpreter started with ``-I -S``
(as the daemon starts it: :class:`~zotd.runtime.process.Watchdog`) has
loaded already, but for ``_signal`` (``signal`` without its enums).
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # (typing itself would double the start)
if TYPE_CHECKING:
    import signal
    import subprocess
    from collections.abc import Callable
else:
    try:
        import _signal as signal  # the C module under `signal`: the same functions and numbers
    except ImportError:  # pragma: no cover (an interpreter without it)
        import signal

#: Rounds of the sweep at most: it repeats until a round finds nobody (a
#: marked process may fork while it is being killed).
SWEEP_ROUNDS = 200


def launch() -> tuple[str, subprocess.Popen[bytes]]:
    """The daemon's side: starts the watchdog of this process, and returns
    its mark (``<pid>-<random>``, unique to this daemon, on this machine and
    over time) and the process (its stdin the pipe to write to).

    It runs this file by an isolated interpreter without ``site`` (``-I
    -S``: nothing but the standard library, and half the start), or the
    module if there is no file to run (a zip, say). The ``zotd`` command
    calls this before it imports the daemon, so that the watchdog's start
    overlaps those imports (see :class:`~zotd.runtime.process.Watchdog`).

    Raises:
        OSError: the process could not be started.
    """
    import secrets
    import subprocess

    from ..model.environment import INSTANCE

    instance = f"{os.getpid()}-{secrets.token_hex(8)}"
    here = os.path.abspath(__file__)
    program = ["-I", "-S", here] if os.path.isfile(here) else ["-m", "zotd.runtime.watchdog"]
    process = subprocess.Popen(
        [sys.executable, *program, f"{INSTANCE}={instance}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the daemon's group: it must outlive it
        close_fds=True,
    )
    return instance, process


def main() -> None:
    """Tracks process groups from stdin until EOF, then kills what is left."""
    # Signals aimed at the daemon's terminal or group are not for us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    mark = sys.argv[1].encode() if len(sys.argv) > 1 else b""
    groups: dict[int, bytes] = {}
    for line in sys.stdin.buffer:
        op, _, rest = line.strip().partition(b" ")
        try:
            pgid = int(op[1:])
        except ValueError:
            continue
        if op.startswith(b"+"):
            groups[pgid] = rest
        elif op.startswith(b"-"):
            number = groups.pop(pgid, b"")
            if mark and number:
                sweep((mark + b"." + number).__eq__)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if mark:
        sweep(lambda value: value.startswith(mark + b"."))


def sweep(marked: Callable[[bytes], bool]) -> None:
    """SIGKILLs every process with an environment entry ``marked`` accepts,
    round after round until a round finds none (Linux; elsewhere nothing)."""
    if not os.path.isdir("/proc/self"):
        return
    for _ in range(SWEEP_ROUNDS):
        if not _kill_marked(marked):
            return
        time.sleep(0.01)


def _kill_marked(marked: Callable[[bytes], bool]) -> int:
    """One round of :func:`sweep`; returns how many processes it signalled."""
    killed = 0
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        # The pidfd first: the pid checked is the pid signalled, never a
        # stranger that took the number in between.
        try:
            pidfd = os.pidfd_open(int(name))
        except OSError:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
            if any(marked(entry) for entry in environ.split(b"\0")):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                killed += 1
        except OSError:
            pass  # gone, or not ours to read
        finally:
            os.close(pidfd)
    return killed


if __name__ == "__main__":
    main()
