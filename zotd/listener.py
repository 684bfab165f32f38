"""Binding the agent socket: permissions, stale sockets, one daemon per socket.

trio has no ``open_unix_listener``; we bind a ``trio.socket`` Unix socket
ourselves and wrap it in :class:`trio.SocketListener`.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path

import trio

from .paths import check_socket_path


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


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the socket file, to remove only our own at exit."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
