"""An install killed half-way leaves its staging directory
(``.install-<pid>-<random>``, hidden in the extensions directory); the next
install, or the daemon's next start, removes it, and nothing else.

The installs are real ``zot ext install`` of a git URL whose server (this
test) accepts the connection and never answers: once it has the connection,
the staging directory exists and the clone is under way, every time; then the
installer (the CLI without a daemon, or the daemon) is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, ZOT, Cli, wait_until
from tests.conftest import add_extension, pid_alive
from zotd.model import manage

cli = test_cli.cli  # the fixture, as this module's own

PROXIES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


@pytest.fixture
def silent_git_server() -> Iterator[socket.socket]:
    """A TCP server on localhost that accepts and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(WAIT)
    try:
        yield server
    finally:
        server.close()


def url_of(server: socket.socket) -> str:
    return f"http://127.0.0.1:{server.getsockname()[1]}/ext.git"


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def staging_dirs(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.name.startswith(manage.STAGING_PREFIX)]


def test_the_next_install_removes_what_a_killed_install_left(
    cli: Cli, silent_git_server: socket.socket, short_tmp: Path
) -> None:
    root = cli.home / "extensions"
    mine = add_extension(root, "mine")
    before = snapshot(mine)
    # Hold the connection open until the kill: accept, then kill, then close.
    for name in PROXIES:
        cli.env.pop(name, None)
    proc = cli.popen(
        [str(ZOT), "ext", "install", url_of(silent_git_server)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    conn, _ = silent_git_server.accept()
    try:
        [staging] = staging_dirs(root)
        assert staging.name.startswith(f"{manage.STAGING_PREFIX}{proc.pid}-")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT)
    finally:
        conn.close()
    assert staging.is_dir()  # what a killed install leaves

    res = cli.zot("ext", "install", str(add_extension(short_tmp / "src", "next")))
    assert res.returncode == 0, res
    assert sorted(p.name for p in root.iterdir()) == ["mine", "next"]
    assert snapshot(mine) == before


def test_the_daemon_removes_them_as_it_starts(cli: Cli, silent_git_server: socket.socket) -> None:
    root = cli.home / "extensions"
    mine = add_extension(root, "mine", "--commands", "hi")
    before = snapshot(mine)
    pid = cli.start()
    for name in PROXIES:
        cli.env.pop(name, None)
    proc = cli.popen(
        [str(ZOT), "ext", "install", url_of(silent_git_server)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    conn, _ = silent_git_server.accept()  # the daemon's git is cloning
    try:
        [staging] = staging_dirs(root)
        assert staging.name.startswith(f"{manage.STAGING_PREFIX}{pid}-")
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), WAIT, "the daemon to die")
        proc.wait(timeout=WAIT)  # its connection is gone
    finally:
        conn.close()
    assert staging.is_dir()

    cli.start()
    assert staging_dirs(root) == []
    assert [p.name for p in root.iterdir()] == ["mine"]
    assert snapshot(mine) == before
    wait_until(lambda: cli.extensions()["mine"].state == "ready", WAIT, "mine to be ready")
