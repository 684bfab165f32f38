"""The daemon under test, as a process: its zotd.toml (written with
``tomli_w``), one directory per extension with its ``extension.json``, its
start (``python -m zotd``, in its own session), its stop (SIGTERM, then
SIGKILL), and the processes it or its extensions left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import tomli_w

import zotd
from soak.plan import EXIT_WAIT, EXT_SCRIPTS, EXTENSIONS, RESTART, SETTINGS, STUCK_FRAME, Plan
from soak.procfs import ProcInfo, all_pids, carries_marker, other_run, proc_info
from zotd.model.config import Config


def write_config(path: Path, plan: Plan) -> list[str]:
    """Writes zotd.toml with the keys this zotd knows; returns the ones it does not."""
    known = set(Config.__struct_fields__)
    document: dict[str, Any] = {}
    skipped = []
    # Below the most requests the clients can have in flight, so that `busy` is
    # answered whenever many of them wait on a frozen or hanging extension.
    busy_at = max(8, plan.clients * plan.workers * 4 // 5)
    for key, value in {**SETTINGS, "max_requests": busy_at}.items():
        if key in known:
            document[key] = value
        else:
            skipped.append(key)
    policy = getattr(Config(), "restart", None)
    if isinstance(policy, msgspec.Struct):
        fields = set(policy.__struct_fields__)
        document["restart"] = {k: v for k, v in RESTART.items() if k in fields}
        skipped += [f"restart.{k}" for k in RESTART if k not in fields]
    else:
        skipped.append("[restart] (no restart policy in this zotd)")
    path.write_text(tomli_w.dumps(document))
    return skipped


def write_extensions(root: Path, config: Config, env: dict[str, str]) -> list[Path]:
    """One directory with an extension.json per extension, running soak/extensions/*.py.

    ``env`` goes into each manifest's ``env``: zotd gives extensions an
    allowlisted environment, and this run's marker and seed must reach them.
    """
    # What zotd's writer may have in hand when the stuck extension stalls:
    # a queue's worth of its frames (and a few small ones: `cancel`s).
    exempt = min(config.extension_queue * STUCK_FRAME, config.extension_queue_bytes) + 8192
    extra = {
        "hanger": ["--late", str(config.tool_timeout + 1.0)],
        "stuck": ["--exempt", str(exempt)],
    }
    # The rewriter's verdicts count before the guard's: the guard is asked
    # about the arguments as rewritten.
    priority = {"rewriter": -1}
    dirs = []
    for name in EXTENSIONS:
        directory = root / "ext" / name
        directory.mkdir(parents=True)
        manifest = {
            "name": name,
            "version": "1.0.0",
            "description": f"soak: {name}",
            "language": "python",
            "exec": sys.executable,
            "args": [str(EXT_SCRIPTS / f"{name}.py"), *extra.get(name, [])],
            "env": env,
            "priority": priority.get(name, 0),
        }
        (directory / "extension.json").write_text(json.dumps(manifest, indent=2))
        dirs.append(directory)
    return dirs


def start_daemon(root: Path, dirs: list[Path], marks: dict[str, str]) -> subprocess.Popen[bytes]:
    """``python -m zotd --ext DIR...`` in its own session, everything under ``root``."""
    env = {k: v for k, v in os.environ.items() if k != "ZOTD_TOKEN"}
    package_root = str(Path(zotd.__file__).resolve().parent.parent)
    env.update(
        marks,
        ZOT_HOME=str(root / "home"),
        ZOTD_SOCKET=str(root / "run" / "zotd.sock"),
        ZOTD_CONFIG=str(root / "zotd.toml"),
        PYTHONPATH=os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p),
        PYTHONUNBUFFERED="1",
    )
    argv = [sys.executable, "-m", "zotd"]
    for d in dirs:
        argv += ["--ext", str(d)]
    with open(root / "daemon.log", "wb") as log:
        return subprocess.Popen(
            argv,
            cwd=root / "proj",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@dataclass
class Ending:
    exit_code: int | None = None
    exit_seconds: float = 0.0
    orphans: list[ProcInfo] = field(default_factory=list)


def stop_daemon(daemon: subprocess.Popen[bytes]) -> tuple[int | None, float]:
    """SIGTERM, then wait; SIGKILL if it does not exit. Returns (exit code or None, seconds)."""
    started = time.monotonic()
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
    try:
        code: int | None = daemon.wait(EXIT_WAIT)
    except subprocess.TimeoutExpired:
        code = None
        daemon.kill()
        daemon.wait()
    return code, time.monotonic() - started


def find_orphans(marker: bytes, daemon_pid: int, pgids: set[int], since: int) -> list[ProcInfo]:
    """Processes still alive that the daemon or its extensions started.

    Anything whose environment carries this run's marker (every extension
    and grandchild inherits it), and anything started during the run whose
    parent was the daemon or whose process group was an extension's (and
    whose parent is gone or ours), unless it carries another run's marker (a soak running beside this one
    may reuse the pid of one of this run's extensions as a group id).
    """
    found = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        info = proc_info(pid)
        if info is None or info.state in ("Z", "X"):
            continue
        recent = info.start >= since
        # In an extension's group only if its parent is gone (reparented to
        # init) or is ours: a group id is the pid of an extension that may
        # have exited long ago, and pids are reused (an hour's run starts
        # thousands of processes).
        adopted = info.ppid in (1, daemon_pid) or carries_marker(info.ppid, marker)
        if carries_marker(pid, marker) or (
            recent
            and (info.ppid == daemon_pid or (info.pgid in pgids and adopted))
            and not other_run(pid, marker)
        ):
            found.append(info)
    return found


def settle_orphans(marker: bytes, daemon_pid: int, pgids: set[int], since: int) -> list[ProcInfo]:
    """Orphans that are still there half a second after the daemon exited
    (a SIGKILLed process may take a moment to go); they are then killed."""
    deadline = time.monotonic() + 0.5
    while True:
        orphans = find_orphans(marker, daemon_pid, pgids, since)
        if not orphans or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for o in orphans:  # leave nothing behind: ours, by pid
        try:
            os.kill(o.pid, signal.SIGKILL)
        except OSError:
            pass
    return orphans
