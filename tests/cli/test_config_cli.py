"""``zotd.toml`` as the CLIs read it: real processes in different directories."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import pid_alive

RUN_TIMEOUT = 30.0


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zotd", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def test_a_relative_socket_is_the_same_from_every_directory(short_tmp: Path) -> None:
    """``socket = "run/zotd.sock"``: a daemon started in one directory is found
    from another, and stopped from a third (the path is the config file's
    directory's, not each process's own)."""
    conf = short_tmp / "conf"
    conf.mkdir()
    (conf / "zotd.toml").write_text('socket = "run/zotd.sock"\n')
    socket = conf / "run" / "zotd.sock"
    dirs = [short_tmp / name for name in ("a", "b", "c")]
    for d in dirs:
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZOTD_")}
    env.update(ZOT_HOME=str(short_tmp / "home"), ZOTD_CONFIG=str(conf / "zotd.toml"))
    pid = None
    try:
        started = run(["start"], dirs[0], env)
        assert started.returncode == 0, started
        found = re.search(r"pid (\d+)", started.stdout)
        assert found is not None, started
        pid = int(found[1])
        assert str(socket) in started.stdout
        assert socket.exists()

        status = run(["status", "--json"], dirs[1], env)
        assert status.returncode == 0, status
        answer = json.loads(status.stdout)
        assert (answer["pid"], answer["socket"]) == (pid, str(socket))

        stopped = run(["stop"], dirs[2], env)
        assert stopped.returncode == 0, stopped
        deadline = time.monotonic() + RUN_TIMEOUT
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(pid)
        for d in dirs:
            assert not (d / "run").exists()
    finally:
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
