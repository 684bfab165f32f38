"""The systems the benchmarks start: a zotd daemon, the bare relay, bare spawns.

Each runs as a process of its own, started the way a user starts it, in a
throwaway ``ZOT_HOME`` so that nothing of the user's is read or touched.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio

from zotd.client import Client, NotRunning, connect

HERE = Path(__file__).resolve().parent
ECHO = HERE / "echo_ext.py"
RELAY = HERE / "relay.py"
BARE_SPAWN = HERE / "bare_spawn.py"
SDK_EXT = HERE / "sdk_ext.py"

#: How the daemon is started (after the interpreter).
DAEMON_ARGV = ["-m", "zotd"]

#: How long a system may take to come up before the benchmark gives up.
START_TIMEOUT = 60.0


def ext_argv(name: str, mode: str) -> list[str]:
    """The command line of one trivial extension (see ``echo_ext.py``)."""
    return [sys.executable, str(ECHO), name, mode]


class Sandbox:
    """A throwaway ``ZOT_HOME`` with installed extensions, a socket and a project."""

    def __init__(self) -> None:
        # Short, so that the socket path fits in sun_path.
        self.root = Path(tempfile.mkdtemp(prefix="zb-", dir="/tmp"))
        self.home = self.root / "home"
        self.project = self.root / "p"
        self.socket = self.root / "s"
        self.config = self.root / "zotd.toml"
        self.project.mkdir()
        (self.home / "extensions").mkdir(parents=True)
        self.config.write_text('log_level = "warning"\n')

    def add(self, name: str, mode: str) -> None:
        """Installs one trivial extension (``tool``, ``guard`` or ``stubborn``)."""
        directory = self.home / "extensions" / name
        directory.mkdir()
        argv = ext_argv(name, mode)
        manifest = {"name": name, "version": "1.0.0", "exec": argv[0], "args": argv[1:]}
        (directory / "extension.json").write_text(json.dumps(manifest))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOT", "ZOTD"))}
        env |= {
            "ZOT_HOME": str(self.home),
            "ZOTD_CONFIG": str(self.config),
            "ZOTD_SOCKET": str(self.socket),
        }
        return env

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def rss_mib(pid: int) -> float:
    """A process's resident set size in MiB (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[-1][:1] != "Z"
    except FileNotFoundError:
        return False


@asynccontextmanager
async def client_of(
    socket: Path, process: subprocess.Popen[bytes], cwd: Path | None
) -> AsyncIterator[Client]:
    """Connects (and says ``hello``) as soon as the socket answers."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            async with connect(socket, cwd=cwd, client="bench", start=False) as zot:
                yield zot
                return
        except NotRunning:
            if time.monotonic() > deadline:
                raise
            await anyio.sleep(0.002)


class Daemon:
    """A ``zotd`` process serving a sandbox; started by :func:`start_daemon`."""

    def __init__(self, sandbox: Sandbox, process: subprocess.Popen[bytes], started: float) -> None:
        self.sandbox = sandbox
        self.process = process
        #: When the process was spawned (``time.perf_counter``).
        self.started = started

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self) -> AbstractAsyncContextManager[Client]:
        """A connection to the daemon's project workspace, once it answers."""
        return client_of(self.sandbox.socket, self.process, self.sandbox.project)

    def stop(self) -> float:
        """SIGTERMs the daemon and waits for it; returns the seconds it took."""
        if self.process.poll() is not None:
            return 0.0
        begin = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        return time.perf_counter() - begin


def start_daemon(sandbox: Sandbox) -> Daemon:
    """Spawns ``python -m zotd`` for the sandbox; does not wait for it."""
    log = open(sandbox.root / "zotd.out", "ab")  # noqa: SIM115 (closed with the process)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, *DAEMON_ARGV, "--log-level", "warning"],
        env=sandbox.env(),
        cwd=sandbox.project,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    log.close()
    return Daemon(sandbox, process, started)


def start_relay(sandbox: Sandbox) -> subprocess.Popen[bytes]:
    """Spawns the bare relay with one echo extension; returns once it listens."""
    process = subprocess.Popen(
        [sys.executable, str(RELAY), str(sandbox.socket), *ext_argv("echo", "tool")],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    if process.stdout.readline() != b"ready\n":
        process.kill()
        raise RuntimeError("the relay did not start")
    return process


def bare_fanout(guards: int, rounds: int, warmup: int = 0) -> list[float]:
    """The intercept floor: seconds per question asked of ``guards`` guard
    processes at once and all their answers read, by a bare epoll loop
    (``rounds`` timed questions, after ``warmup`` untimed ones).

    As little as a fan-out can do: each question is encoded before the clock
    starts, written to each guard in one write, and the answers are read as
    they come, whichever guard answers first, each pipe registered once
    (level-triggered: no system call but the read per answer and a share
    of the ``epoll_wait``).
    """
    processes = [
        subprocess.Popen(
            ext_argv(f"g{i}", "guard"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        for i in range(guards)
    ]
    try:
        pipes = [(p.stdin.fileno(), p.stdout.fileno()) for p in processes if p.stdin and p.stdout]
        stdins = [stdin for stdin, _ in pipes]
        poll = select.epoll()
        for _, out in pipes:
            seen = b""
            while b'"ready"' not in seen:
                seen += os.read(out, 1 << 16)
            poll.register(out, select.EPOLLIN)
        write, read, wait, clock = os.write, os.read, poll.poll, time.perf_counter
        times = []
        for n in range(warmup + rounds):
            question = (
                b'{"type":"event_intercept","id":"%d","event":"tool_call",'
                b'"tool_name":"bash","tool_args":{"command":"ls"}}\n' % n
            )
            begin = clock()
            for stdin in stdins:
                write(stdin, question)
            left = guards
            while left:
                for fd, _ in wait():
                    left -= read(fd, 1 << 16).count(b"\n")
            if n >= warmup:
                times.append(clock() - begin)
        poll.close()
        return times
    finally:
        for p in processes:
            p.kill()
            p.wait()


def time_to_ready(argv: list[str]) -> float:
    """Seconds from spawning one extension to its ``ready`` line."""
    begin = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        seen = b""
        while b'"ready"' not in seen:
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:
                raise RuntimeError(f"{argv!r} exited before `ready`")
            seen += chunk
        return time.perf_counter() - begin
    finally:
        process.kill()
        process.wait()


def import_time(python: str, module: str) -> float:
    """Seconds a fresh interpreter takes to import ``module``, timed inside it."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


def bare_spawn(argvs: list[list[str]]) -> float:
    """Seconds from launching ``bare_spawn.py`` to all its children being ready."""
    spec = json.dumps(argvs).encode()
    begin = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(BARE_SPAWN)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(spec)
    process.stdin.close()
    line = process.stdout.readline()
    elapsed = time.perf_counter() - begin
    process.wait(timeout=30)
    if line != b"ready\n":
        raise RuntimeError("bare_spawn.py failed")
    return elapsed
