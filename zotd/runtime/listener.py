"""Binding the agent socket: permissions, stale sockets, one daemon per socket.

trio has no ``open_unix_listener``; we bind a ``trio.socket`` Unix socket
ourselves and wrap it in :class:`trio.SocketListener`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import struct
import sys
from pathlib import Path

import trio

from ..model.paths import check_socket_path


class AlreadyRunning(Exception):
    """Another daemon answers on the socket."""


class SocketError(Exception):
    """The socket cannot be bound; the message says why."""


def _make_private_dirs(directory: Path) -> None:
    # Create missing ancestors one by one, each 0700 (Path.mkdir(parents=True)
    # would give the ancestors the default mode).
    missing = []
    for p in (directory, *directory.parents):
        if p.exists():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:
            pass


def _answers(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _clear_stale(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketError(f"{path} exists and is not a socket; move it away or pick another path")
    if _answers(path):
        raise AlreadyRunning(f"another zotd is already running on {path}")
    path.unlink(missing_ok=True)  # stale: its daemon is gone


async def open_unix_listener(path: Path, backlog: int = 128) -> trio.SocketListener:
    """Binds ``path`` (0600, in a directory created 0700) and listens.

    A socket file nobody answers on is stale and replaced.

    Raises:
        AlreadyRunning: a daemon answers on ``path``.
        SocketError: too long a path, a non-socket file in the way, or bind failed.
    """
    try:
        check_socket_path(path)
    except ValueError as exc:
        raise SocketError(str(exc)) from None
    try:
        _make_private_dirs(path.parent)
        _clear_stale(path)
    except OSError as exc:
        raise SocketError(f"cannot use {path}: {exc.strerror or exc}") from None
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket file is created 0600
    try:
        await sock.bind(os.fspath(path))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AlreadyRunning(f"another zotd is already running on {path}") from None
        raise SocketError(f"cannot bind {path}: {exc.strerror}") from None
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    return trio.SocketListener(sock)


def adopt_unix_listener(fd: int) -> trio.SocketListener:
    """Wraps a socket passed by the service manager (socket activation).

    The socket is the manager's: it was bound, and its file is removed, by
    the manager, not by zotd.

    Raises:
        SocketError: ``fd`` is not a listening Unix stream socket.
    """
    try:
        sock = socket.socket(fileno=fd)  # family and type are read from the fd
    except OSError as exc:
        raise SocketError(f"passed file descriptor {fd}: {exc.strerror or exc}") from None
    listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM or not listening:
        sock.detach()  # not ours to close
        raise SocketError(
            f"passed file descriptor {fd} is not a listening Unix stream socket "
            "(check ListenStream= in zotd.socket)"
        )
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


def bound_path(listener: trio.SocketListener) -> Path | None:
    """The file a Unix listener is bound to, if it has one (not abstract, not unnamed)."""
    name = listener.socket.getsockname()
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    return Path(name) if isinstance(name, str) and name.startswith("/") else None


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the socket file, to remove only our own at exit."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def lock_path(socket_path: Path) -> Path:
    """The single-instance lock beside a socket: ``zotd.sock`` -> ``zotd.lock``."""
    return socket_path.with_suffix(".lock")


def acquire_lock(path: Path) -> int:
    """Takes the daemon's lock file (``flock``), held until the fd is closed.

    The file is never deleted (deleting a lock file lets two holders in), and
    holds the pid of the daemon that last held it.

    Raises:
        AlreadyRunning: another daemon holds it.
        SocketError: it cannot be created.
    """
    try:
        _make_private_dirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise SocketError(f"cannot create the lock file {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise AlreadyRunning(
            f"another zotd (pid {holder}) is already running: it holds {path}"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def peer_uid(sock: trio.socket.SocketType) -> int | None:
    """The user id of the process at the other end of a Unix socket, if the
    platform can tell (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS and BSD)."""
    try:
        if sys.platform == "linux":
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return int(struct.unpack("3i", raw)[1])
        if sys.platform == "darwin" or "bsd" in sys.platform:
            # struct xucred { u_int cr_version; uid_t cr_uid; ... } at level 0 (SOL_LOCAL).
            raw = sock.getsockopt(0, _LOCAL_PEERCRED, struct.calcsize("Ii") + 4 + 16 * 4)
            return int(struct.unpack_from("Ii", raw)[1])
    except OSError:
        return None
    return None


#: From <sys/un.h> on macOS and the BSDs.
_LOCAL_PEERCRED = 0x001
