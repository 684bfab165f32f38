"""No orphans: a daemon killed with SIGKILL, or stopped, takes every extension
process along, also the ones that left the extension's process group and
session (``setsid``, a double fork: tests/extensions/escaper.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.conftest import EXTENSIONS, StartDaemon, add_extension, pid_alive
from zotd.client import NotRunning, connect
from zotd.model.paths import Paths


def forker(root: Path, pidfile: Path) -> Path:
    """An extension that leaves a long-lived child in its process group."""
    directory = root / "forker"
    directory.mkdir(parents=True)
    script = directory / "run.sh"
    script.write_text(
        "#!/bin/sh\n"
        'echo \'{"type":"hello","name":"forker"}\'\n'
        'echo \'{"type":"ready"}\'\n'
        f"sleep 300 & echo $! > {pidfile}\n"
        "cat > /dev/null\n"  # then wait for stdin to close, like any extension
        "wait\n"
    )
    script.chmod(0o755)
    (directory / "extension.json").write_text('{"name": "forker", "exec": "./run.sh"}')
    return directory


def stubborn_python(root: Path) -> Path:
    """An extension that ignores SIGTERM and its stdin closing."""
    return add_extension(root, "stubborn", "--ignore-shutdown", "--tools", "t")


ESCAPER = EXTENSIONS / "escaper.py"

escapes = pytest.mark.skipif(
    sys.platform != "linux",
    reason="escaped grandchildren are found through /proc (macOS: the documented limit)",
)


def escaper(root: Path, pidfile: Path) -> Path:
    """An extension whose grandchild is in a session of its own (pid in ``pidfile``)."""
    directory = root / "escaper"
    directory.mkdir(parents=True)
    manifest = {"name": "escaper", "exec": sys.executable, "args": [str(ESCAPER), str(pidfile)]}
    (directory / "extension.json").write_text(json.dumps(manifest))
    return directory


async def read_pid(pidfile: Path) -> int:
    with trio.fail_after(30):  # a hang guard
        while not pidfile.exists():
            await trio.sleep(0.02)
    return int(pidfile.read_text())


async def gone(pids: list[int]) -> list[int]:
    """The ``pids`` still alive after they had 30 s to go (at once, or on a busy
    machine soon: a long way from their own end)."""
    deadline = time.monotonic() + 30
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        await trio.sleep(0.02)
    return [pid for pid in pids if pid_alive(pid)]


@asynccontextmanager
async def daemon_process(
    paths: Paths, short_tmp: Path, exts: list[Path]
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """``python -m zotd --ext ...`` in a process of its own, once it listens."""
    env = dict(
        os.environ,
        ZOT_HOME=str(paths.home),
        ZOTD_SOCKET=str(paths.socket),
        ZOTD_CONFIG=str(short_tmp / "none.toml"),
    )
    argv = [sys.executable, "-m", "zotd"]
    for ext in exts:
        argv += ["--ext", str(ext)]
    daemon = subprocess.Popen(argv, env=env, cwd=short_tmp, stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(30):  # a hang guard
            while True:
                assert daemon.poll() is None, "the daemon exited"
                try:
                    async with connect(paths.socket, hello=False):  # opens no workspace
                        break
                except NotRunning:  # not yet bound, or bound and not yet listening
                    await trio.sleep(0.02)
        yield daemon
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def kill_left(pids: list[int]) -> None:
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_sigkill_of_the_daemon_leaves_no_process(
    paths: Paths, project: Path, short_tmp: Path
) -> None:
    pidfile = short_tmp / "grandchild.pid"
    escaped = short_tmp / "escaped.pid"
    root = short_tmp / "exts"
    exts = [forker(root, pidfile), stubborn_python(root)]
    if sys.platform == "linux":
        exts.append(escaper(root, escaped))
    pids: list[int] = []
    try:
        async with daemon_process(paths, short_tmp, exts) as daemon:
            async with connect(paths.socket, cwd=project) as zot:
                infos = await zot.list_extensions()
            assert {i.name: i.state for i in infos} == {ext.name: "ready" for ext in exts}
            pids = [i.pid for i in infos if i.pid is not None]
            while not pidfile.exists() or not pidfile.read_text().strip():
                await trio.sleep(0.02)
            pids.append(int(pidfile.read_text()))
            if sys.platform == "linux":
                pids.append(await read_pid(escaped))
                assert os.getsid(pids[-1]) not in {os.getsid(pid) for pid in pids[:-1]}
            assert all(pid_alive(pid) for pid in pids)
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
            assert await gone(pids) == []
    finally:
        kill_left(pids)


@escapes
async def test_a_stopped_daemon_leaves_no_escaped_grandchild(
    paths: Paths, project: Path, short_tmp: Path
) -> None:
    escaped = short_tmp / "escaped.pid"
    pids: list[int] = []
    try:
        async with daemon_process(paths, short_tmp, [escaper(short_tmp, escaped)]) as daemon:
            async with connect(paths.socket, cwd=project) as zot:  # starts the workspace
                [info] = await zot.list_extensions()
            pids.append(await read_pid(escaped))
            assert info.state == "ready" and info.pid is not None
            assert os.getsid(pids[0]) != os.getsid(info.pid)  # it did leave the session
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=30) == 0
            assert await gone(pids) == []
    finally:
        kill_left(pids)


@escapes
async def test_an_escaped_grandchild_ends_with_its_extension(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    escaped = short_tmp / "escaped.pid"
    escaper(paths.extensions_dir, escaped)
    pids: list[int] = []
    try:
        await start_daemon()
        async with connect(paths.socket, cwd=project) as zot:  # starts the workspace
            [info] = await zot.list_extensions()
            assert info.state == "ready"
            pids.append(await read_pid(escaped))
            await zot.ext_disable("escaper")
            assert await gone(pids) == []  # while the daemon runs on
            assert await zot.ping()
    finally:
        kill_left(pids)


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signals are Linux's")
async def test_spawned_children_get_a_parent_death_signal(short_tmp: Path) -> None:
    # A parent that spawns a child the way the daemon does, then is killed.
    parent_code = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from zotd.runtime.process import spawn\n"
        "child = spawn(['sleep', '300'], cwd=Path('.'), env=os.environ, stderr=2)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code], stdout=subprocess.PIPE, cwd=short_tmp
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert pid_alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30  # at once, or soon: not after its 300 s sleep
        while pid_alive(child) and time.monotonic() < deadline:
            await trio.sleep(0.02)
        assert not pid_alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child and pid_alive(child):
            os.kill(child, signal.SIGKILL)
        if parent.stdout is not None:
            parent.stdout.close()
