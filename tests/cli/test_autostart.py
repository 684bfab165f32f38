"""Clients start the daemon when none answers: once, in the background, race-free."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.conftest import add_extension, pid_alive
from zotd.client import NotRunning, ZotdError, connect
from zotd.model.paths import Paths

ZOT = Path(sys.executable).parent / "zot"


def daemons_on(socket: Path) -> list[int]:
    """Pids of the zotd processes serving ``socket``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"zotd" in argv and str(socket).encode() in argv and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def env(paths: Paths, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A user's environment, autostart on; every daemon started is stopped after."""
    monkeypatch.delenv("ZOTD_NO_AUTOSTART")
    monkeypatch.setenv("ZOT_HOME", str(paths.home))
    monkeypatch.setenv("ZOTD_SOCKET", str(paths.socket))
    monkeypatch.setenv("ZOTD_CONFIG", str(paths.config_file))
    yield dict(os.environ)
    for pid in daemons_on(paths.socket):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while daemons_on(paths.socket) and time.monotonic() < deadline:
        time.sleep(0.05)


def zot(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ZOT), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=30
    )


def test_zot_starts_the_daemon_when_none_runs(
    env: dict[str, str], paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo")
    assert daemons_on(paths.socket) == []
    done = zot(env, project, "tools")
    assert done.returncode == 0, done.stderr
    assert "echo" in done.stdout
    (pid,) = daemons_on(paths.socket)
    # It runs on after the client is gone, and the next client uses it.
    again = zot(env, project, "call", "echo", '{"n": 1}')
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == '{"n": 1}'
    assert daemons_on(paths.socket) == [pid]
    assert "zotd" in paths.daemon_log.read_text()


def test_clients_starting_at_once_end_with_one_daemon(
    env: dict[str, str], paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo")
    clients = [
        subprocess.Popen(
            [str(ZOT), "tools"],
            env=env,
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for client in clients:
        out, err = client.communicate(timeout=30)
        assert client.returncode == 0, err
        assert "echo" in out
    assert len(daemons_on(paths.socket)) == 1
    # Only one was ever started: no second daemon found the first one running.
    assert "already running" not in paths.daemon_log.read_text()


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_no_start(env: dict[str, str], paths: Paths, project: Path, how: str) -> None:
    if how == "flag":
        done = zot(env, project, "tools", "--no-start")
    else:
        done = zot(dict(env, ZOTD_NO_AUTOSTART="1"), project, "tools")
    assert done.returncode == 1
    assert "zotd is not running" in done.stderr
    assert daemons_on(paths.socket) == []


def test_a_daemon_that_cannot_start_is_reported_at_once(
    env: dict[str, str], paths: Paths, project: Path
) -> None:
    # A file that is not a socket where the socket goes: the daemon refuses it.
    paths.socket.parent.mkdir(parents=True)
    paths.socket.write_text("not a socket")
    done = zot(env, project, "tools")
    assert done.returncode == 1
    assert "cannot start zotd" in done.stderr
    # The daemon's own words, from its log: said when the client sees it exit,
    # not after waiting out START_TIMEOUT (whatever the machine's speed).
    assert "not a socket" in done.stderr
    assert daemons_on(paths.socket) == []


async def test_the_client_library_starts_it_too(
    env: dict[str, str], paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo")
    with pytest.raises(NotRunning):
        async with connect(paths.socket, cwd=project, start=False):
            pass
    with trio.fail_after(30):
        async with connect(paths.socket, cwd=project) as zot_client:
            assert [t.name for t in await zot_client.list_tools()] == ["echo"]
    assert len(daemons_on(paths.socket)) == 1


async def test_connects_racing_in_one_program_start_one_daemon(
    env: dict[str, str], paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo")
    names: list[list[str]] = []

    async def client() -> None:
        async with connect(paths.socket, cwd=project) as zot_client:
            names.append([t.name for t in await zot_client.list_tools()])

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(client)
    assert names == [["echo"]] * 6
    assert len(daemons_on(paths.socket)) == 1
    assert "already running" not in paths.daemon_log.read_text()


async def test_a_started_daemon_is_not_the_starters_service(
    env: dict[str, str], paths: Paths, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent running as a systemd service starts zotd: zotd must not report
    # its readiness to the agent's service manager as if it were the unit.
    notify_path = paths.socket.parent.parent / "notify"
    notify_path.parent.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as manager:
        manager.bind(str(notify_path))
        manager.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", str(notify_path))
        with trio.fail_after(30):
            async with connect(paths.socket, cwd=project) as zot_client:
                assert await zot_client.ping()
        # No need to wait: the daemon would say READY=1 before it accepts a
        # connection, and a datagram is queued here the moment it is sent.
        with pytest.raises(BlockingIOError):
            manager.recv(1024)


async def test_cannot_start_is_an_error_code(
    env: dict[str, str], paths: Paths, project: Path
) -> None:
    paths.config_file.write_text("not toml [\n")
    with trio.fail_after(30), pytest.raises(ZotdError) as err:
        async with connect(paths.socket, cwd=project):
            pass
    assert err.value.code == "cannot_start"


async def test_a_planted_link_for_the_starters_lock_is_not_followed(
    env: dict[str, str], paths: Paths, project: Path, short_tmp: Path
) -> None:
    paths.socket.parent.mkdir(mode=0o700)
    target = short_tmp / "precious"
    target.write_text("keep\n")
    paths.socket.with_name(paths.socket.name + ".start").symlink_to(target)
    with trio.fail_after(30), pytest.raises(ZotdError) as err:
        async with connect(paths.socket, cwd=project):
            pass
    assert err.value.code == "cannot_start"
    assert f"cannot use {paths.socket.parent}" in err.value.message
    assert target.read_text() == "keep\n"
