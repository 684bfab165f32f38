"""Starting the daemon on demand, for a client that finds none answering.

:func:`start_daemon` spawns ``python -m zotd`` in the background (its own
session, its output appended to ``$ZOT_HOME/logs/zotd.log``) and waits until
its socket answers. It is race-free: clients that start one at the same time
take turns on a lock file beside the socket, and each looks for a daemon
again once it holds the lock, so they all end up talking to one daemon. (The
daemon's own lock file stops any other way of starting a second one.)
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.abc

from ..model.logfiles import open_append, size_of, tail
from ..model.paths import Paths

#: How long a started daemon may take to answer.
START_TIMEOUT = 15.0

_log = logging.getLogger(__name__)

#: Set to 1 to never start a daemon from a client.
NO_AUTOSTART_ENV = "ZOTD_NO_AUTOSTART"


#: What a service manager tells its own unit; a daemon we start must not see it.
_SERVICE_MANAGER_ENV = frozenset({"NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"})

#: Daemons this process started, kept so that no ``Popen`` is collected (and
#: warns) while its daemon still runs.
_started: list[subprocess.Popen[bytes]] = []


class StartError(Exception):
    """The daemon could not be started, or did not answer in time."""


def enabled(explicit: bool | None) -> bool:
    """Whether to start a daemon: ``explicit`` if given, else not when
    ``$ZOTD_NO_AUTOSTART`` is ``1`` (or ``true``, ``yes``)."""
    if explicit is not None:
        return explicit
    return os.environ.get(NO_AUTOSTART_ENV, "").strip().lower() not in ("1", "true", "yes")


async def start_daemon(socket: Path) -> anyio.abc.UNIXSocketStream:
    """Starts a daemon on ``socket`` (unless one starts meanwhile) and connects.

    It first takes its turn on the lock file beside the socket, then looks
    for a daemon again (the starter before it may have started one), and
    only then spawns ``python -m zotd`` and polls the socket until it
    answers. :data:`START_TIMEOUT` bounds all of that, on the real clock
    (``time.monotonic``): the daemon's start is real time, whatever clock
    the caller's event loop uses.

    If this is cancelled, the cancellation is re-raised once the lock file
    is closed (which releases the lock, for the next starter); nothing it
    connected is left open. A daemon it already spawned is not stopped: it
    runs in its own session, detached from this process, and keeps
    starting, so the next client (or the next starter, once it holds the
    lock) finds it.

    Returns:
        A connected stream, to the daemon this started or to one that
        another starter started meanwhile.

    Raises:
        StartError: it exited, or did not answer within :data:`START_TIMEOUT`.
    """
    deadline = time.monotonic() + START_TIMEOUT
    try:
        socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Never through a link planted there (the daemon checks the directory).
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        lock = os.open(socket.with_name(socket.name + ".start"), flags, 0o600)
    except OSError as exc:
        raise StartError(f"cannot use {socket.parent}: {exc.strerror or exc}") from None
    try:
        while True:  # take turns with other starters
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StartError("another client is starting zotd, too slowly") from None
                await anyio.sleep(0.02)
        stream = await _try_connect(socket)
        if stream is not None:
            return stream  # the one who held the lock before us started it
        return await _spawn_and_connect(socket, deadline)
    finally:
        os.close(lock)  # releases the lock


async def _try_connect(socket: Path) -> anyio.abc.UNIXSocketStream | None:
    try:
        return await anyio.connect_unix(socket)
    except (FileNotFoundError, ConnectionRefusedError):
        return None


async def _spawn_and_connect(socket: Path, deadline: float) -> anyio.abc.UNIXSocketStream:
    log = Paths.from_env(socket=socket).daemon_log
    begins = size_of(log)  # the log is shared: report only what this daemon writes
    try:
        process = spawn(socket, log)
    except OSError as exc:
        raise StartError(f"cannot run {sys.executable} -m zotd: {exc.strerror or exc}") from None
    # Said at INFO: a program decides whether its user sees it (zot does, on stderr).
    _log.info("started zotd, pid %d (its log: %s)", process.pid, log)
    while True:
        stream = await _try_connect(socket)
        if stream is not None:
            return stream
        if process.poll() is not None:
            lines = "\n".join("  " + line for line in tail(log, 5, since=begins))
            raise StartError(f"zotd exited with code {process.returncode} at start:\n{lines}")
        if time.monotonic() > deadline:
            raise StartError(f"zotd (pid {process.pid}) did not answer in time; see {log}")
        await anyio.sleep(0.02)


def spawn(socket: Path, log: Path, extra: list[str] | None = None) -> subprocess.Popen[bytes]:
    """Starts ``python -m zotd`` on ``socket`` in the background, in its own
    session, with its output appended to ``log`` (made 0600, in a 0700
    directory, even if they existed wider); does not wait."""
    argv = [sys.executable, "-m", "zotd", "--socket", str(socket), *(extra or [])]
    # Not the starter's service manager's: a daemon started here is nobody's unit.
    env = {k: v for k, v in os.environ.items() if k not in _SERVICE_MANAGER_ENV}
    out = open_append(log)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=env,
        )
    finally:
        os.close(out)
    _started.append(process)
    return process
