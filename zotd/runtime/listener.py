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
from pathlib import Path

import trio

from ..model.paths import check_private_dir, check_socket_path


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


def private_dir(directory: Path) -> None:
    """Creates ``directory`` (0700, with its missing ancestors) if missing,
    and makes sure it is the user's own (see
    :func:`~zotd.model.paths.check_private_dir`).

    Raises:
        SocketError: it cannot be created, or it is someone else's or writable by others.
    """
    try:
        _make_private_dirs(directory)
        check_private_dir(directory)
    except OSError as exc:
        raise SocketError(f"cannot use {directory}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SocketError(str(exc)) from None


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

    The directory must be the user's own and writable by nobody else.

    A socket file nobody answers on is stale and replaced.

    Raises:
        AlreadyRunning: a daemon answers on ``path``.
        SocketError: too long a path, a directory not the user's own, a
            non-socket file in the way, or bind failed.
    """
    try:
        check_socket_path(path)
    except ValueError as exc:
        raise SocketError(str(exc)) from None
    private_dir(path.parent)
    try:
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
    holds the pid of the daemon that last held it. Its directory must be the
    user's own (see :func:`private_dir`). The file is created with
    ``O_EXCL``, or else opened with ``O_NOFOLLOW`` (a symbolic link planted
    there is refused, its target untouched) and must be a regular file of
    this user's with one link; it is written only after those checks.

    Raises:
        AlreadyRunning: another daemon holds it.
        SocketError: it cannot be created, or what is there is not a lock file of ours.
    """
    private_dir(path.parent)
    fd = _open_lock(path)
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


#: Never follow a link, never block on a FIFO, never hand the fd to a child.
_LOCK_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


def _open_lock(path: Path) -> int:
    advice = "remove it (zotd creates its lock file itself)"
    try:
        try:
            return os.open(path, _LOCK_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            fd = os.open(path, _LOCK_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SocketError(
                f"the lock file {path} is a symbolic link; zotd does not follow it: {advice}"
            ) from None
        raise SocketError(f"cannot open the lock file {path}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "is not a regular file"
    elif st.st_uid != os.geteuid():
        why = f"belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    elif st.st_nlink != 1:
        why = f"has {st.st_nlink} hard links"
    if why is not None:
        os.close(fd)
        raise SocketError(f"the lock file {path} {why}: {advice}")
    if stat.S_IMODE(st.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return fd
