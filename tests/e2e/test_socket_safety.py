"""The socket's directory is the user's own (issue 15, point 7): zotd refuses
a directory others can write or that another user owns, never follows a
planted lock file, and clients talk only to a daemon of their own user."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import trio

from tests.conftest import FAST, StartDaemon
from zotd.client import Client, ZotdError, connect
from zotd.client.errors import WrongUser
from zotd.client.transport import check_peer
from zotd.model.paths import Paths
from zotd.runtime.daemon import Daemon
from zotd.runtime.listener import SocketError

#: ``nobody``: "another user" for the tests that run as root (as CI does).
OTHER_UID = 65534
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to act as another user (uid 65534)"
)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
async def test_a_socket_dir_others_can_write_is_refused(paths: Paths, mode: int) -> None:
    directory = paths.socket.parent
    directory.mkdir()
    directory.chmod(mode)
    with pytest.raises(SocketError) as err:
        await Daemon(FAST, paths).run()
    assert str(err.value) == (
        f"the socket's directory {directory} is writable by its group or others "
        f"(mode {mode:04o}): zotd keeps its socket only in a directory nobody else can "
        f"write; run `chmod 700 {directory}`, or set ZOTD_SOCKET (or --socket) to another path"
    )
    assert list(directory.iterdir()) == []  # no lock file, no socket: nothing was written


async def test_a_socket_dir_only_readable_by_others_is_fine(
    start_daemon: StartDaemon, paths: Paths
) -> None:
    paths.socket.parent.mkdir(mode=0o700)
    paths.socket.parent.chmod(0o755)  # readable by others is fine: only writing matters
    await start_daemon()
    async with connect(paths.socket, hello=False) as zot:
        assert await zot.ping()


@as_root
async def test_a_socket_dir_of_another_user_is_refused(paths: Paths) -> None:
    directory = paths.socket.parent
    directory.mkdir(mode=0o700)
    os.chown(directory, OTHER_UID, OTHER_UID)
    with pytest.raises(SocketError) as err:
        await Daemon(FAST, paths).run()
    assert str(err.value) == (
        f"the socket's directory {directory} belongs to uid {OTHER_UID}, not to you (uid 0): "
        "zotd keeps its socket only in a directory of your own; "
        "set ZOTD_SOCKET (or --socket) to a path in one"
    )


async def test_a_planted_symlink_lock_file_is_refused(paths: Paths, short_tmp: Path) -> None:
    paths.socket.parent.mkdir(mode=0o700)
    target = short_tmp / "precious"
    target.write_text("do not truncate me\n")
    target.chmod(0o644)
    lock = paths.socket.with_suffix(".lock")
    lock.symlink_to(target)
    with pytest.raises(SocketError) as err:
        await Daemon(FAST, paths).run()
    assert str(err.value) == (
        f"the lock file {lock} is a symbolic link; zotd does not follow it: "
        "remove it (zotd creates its lock file itself)"
    )
    assert target.read_text() == "do not truncate me\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not paths.socket.exists()


async def test_a_dangling_symlink_lock_file_creates_nothing(paths: Paths, short_tmp: Path) -> None:
    paths.socket.parent.mkdir(mode=0o700)
    lock = paths.socket.with_suffix(".lock")
    lock.symlink_to(short_tmp / "created-through-the-link")
    with pytest.raises(SocketError, match="is a symbolic link"):
        await Daemon(FAST, paths).run()
    assert not (short_tmp / "created-through-the-link").exists()


async def test_a_fifo_lock_file_is_refused_without_hanging(paths: Paths) -> None:
    paths.socket.parent.mkdir(mode=0o700)
    lock = paths.socket.with_suffix(".lock")
    os.mkfifo(lock, 0o600)
    with trio.fail_after(30), pytest.raises(SocketError) as err:
        await Daemon(FAST, paths).run()
    assert str(err.value) == (
        f"the lock file {lock} is not a regular file: remove it (zotd creates its lock file itself)"
    )


@as_root
async def test_a_lock_file_of_another_user_is_refused(paths: Paths) -> None:
    paths.socket.parent.mkdir(mode=0o700)
    lock = paths.socket.with_suffix(".lock")
    lock.write_text("1\n")
    os.chown(lock, OTHER_UID, OTHER_UID)
    with pytest.raises(SocketError) as err:
        await Daemon(FAST, paths).run()
    assert str(err.value) == (
        f"the lock file {lock} belongs to uid {OTHER_UID}, not to you (uid 0): "
        "remove it (zotd creates its lock file itself)"
    )
    assert lock.read_text() == "1\n"


# --- the client checks the daemon's uid --------------------------------------------


def wrong_user_message(sock: Path | str, uid: int, expected: int) -> str:
    return (
        f"refusing to talk to {sock}: it is served by uid {uid}, not by you (uid {expected}), "
        "and was sent nothing; another user holds this socket path: stop their process, "
        "or set ZOTD_SOCKET to a path in a directory only you can write"
    )


def test_check_peer_with_an_injected_uid() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        check_peer(a)  # our own uid: fine
        check_peer(a, os.geteuid())
        with pytest.raises(WrongUser) as err:
            check_peer(a, os.geteuid() + 1)
    assert err.value.code == "wrong_user"
    assert err.value.uid == os.geteuid()
    assert err.value.message == wrong_user_message("the socket", os.geteuid(), os.geteuid() + 1)


async def test_a_client_expecting_another_uid_refuses_a_real_daemon(
    start_daemon: StartDaemon, paths: Paths
) -> None:
    await start_daemon()
    stream = await anyio.connect_unix(paths.socket)
    async with stream:
        with pytest.raises(WrongUser) as err:
            Client(stream, expected_uid=os.geteuid() + 1)
    assert err.value.message == wrong_user_message(paths.socket, os.geteuid(), os.geteuid() + 1)
    async with connect(paths.socket, hello=False) as zot:  # as ourselves: served
        assert await zot.ping()


#: A socket server run as another user (started as root, it drops to
#: OTHER_UID first: the interpreter may not be theirs to run): it says
#: ``ready``, then prints what each connection sent it (repr) until it hangs
#: up, ``connections`` times.
IMPOSTOR = f"""
import os, socket, sys
os.setgroups([]); os.setgid({OTHER_UID}); os.setuid({OTHER_UID})
path, connections = sys.argv[1], int(sys.argv[2])
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(8)
print("ready", flush=True)
for _ in range(connections):
    conn, _ = server.accept()
    conn.settimeout(30)
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    print(repr(data), flush=True)
    conn.close()
"""


class Lines:
    """The lines a process prints, as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some()
            if not chunk:
                return self._buffer
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


@as_root
async def test_clients_refuse_a_socket_served_by_another_user(short_tmp: Path) -> None:
    # The impostor's own directory, reachable by it.
    short_tmp.chmod(0o711)
    theirs = short_tmp / "theirs"
    theirs.mkdir()
    os.chown(theirs, OTHER_UID, OTHER_UID)
    sock = theirs / "zotd.sock"
    cli_env = dict(os.environ, ZOTD_SOCKET=str(sock), ZOTD_TOKEN="s3cret", ZOTD_NO_AUTOSTART="1")
    impostor = await trio.lowlevel.open_process(
        [sys.executable, "-c", IMPOSTOR, str(sock), "2"], stdout=subprocess.PIPE
    )
    try:
        assert impostor.stdout is not None
        out = Lines(impostor.stdout)
        with trio.fail_after(30):
            assert await out.next() == b"ready"
            with pytest.raises(ZotdError) as err:
                async with connect(sock, token="s3cret"):
                    pass
            assert err.value.code == "wrong_user"
            assert err.value.message == wrong_user_message(sock, OTHER_UID, 0)
            assert await out.next() == b"b''"  # not even hello, let alone the token
            # The CLI goes through the same client.
            result = await trio.run_process(
                [sys.executable, "-m", "zotd", "status"],
                env=cli_env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert result.returncode == 1
            assert result.stderr.decode() == f"zotd: {wrong_user_message(sock, OTHER_UID, 0)}\n"
            assert await out.next() == b"b''"
            assert await impostor.wait() == 0
    finally:
        if impostor.returncode is None:
            impostor.kill()
            await impostor.wait()
        if impostor.stdout is not None:
            await impostor.stdout.aclose()
