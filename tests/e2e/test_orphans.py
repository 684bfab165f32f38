"""No orphans: a daemon killed with SIGKILL takes every extension process along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from tests.conftest import add_extension, pid_alive
from zotd.client import connect
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


async def test_sigkill_of_the_daemon_leaves_no_process(
    paths: Paths, project: Path, short_tmp: Path
) -> None:
    pidfile = short_tmp / "grandchild.pid"
    exts = [forker(short_tmp / "exts", pidfile), stubborn_python(short_tmp / "exts")]
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
    pids: list[int] = []
    try:
        with trio.fail_after(30):  # a hang guard
            while not paths.socket.exists():
                assert daemon.poll() is None, "the daemon exited"
                await trio.sleep(0.02)
            async with connect(paths.socket, cwd=project) as zot:
                infos = await zot.list_extensions()
            assert {i.name: i.state for i in infos} == {"forker": "ready", "stubborn": "ready"}
            pids = [i.pid for i in infos if i.pid is not None]
            while not pidfile.exists() or not pidfile.read_text().strip():
                await trio.sleep(0.02)
        pids.append(int(pidfile.read_text()))
        assert all(pid_alive(pid) for pid in pids)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        # Gone at once, or (on a busy machine) soon: a long way from their own end.
        deadline = time.monotonic() + 30
        while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
            await trio.sleep(0.02)
        assert [pid for pid in pids if pid_alive(pid)] == []
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


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
