"""The MCP fleet benchmarks (issue 17): shared servers, and lazy extensions.

Two groups of figures, run by ``bench.py --only mcp`` (and by a full run):

* **fleet**: five agent sessions in five workspaces using the same ten global
  MCP servers (``mcp_bench_server.py``, one script started under ten names).
  With zotd the servers are extensions with ``"kind": "mcp"`` and ``"scope":
  "shared"``: five clients, each in its own project directory, list the tools
  and call one tool of every server, and while they stay connected the
  daemon's process tree is counted. Beside it, each session runs its own
  servers as an MCP host does: five host processes (``python mcp_fleet.py
  host NAME...``), each starting the ten servers with the SDK's
  ``stdio_client``, initializing them, listing their tools and calling one;
  what is counted there is the fifty server processes, not the hosts (the
  agents exist in both set-ups, and zotd's clients are not counted either).
* **lazy**: a workspace of ten lazy extensions (``echo_ext.py``, ``"lazy":
  true``) whose registrations were cached by a previous daemon run, beside
  ten eager ones, ten disabled ones (what discovering ten costs) and a
  workspace with no extensions: the time from the agent's connect (and
  ``hello``) to its first ``list_tools`` showing every tool, and to the
  answer of its first call.

Memory and processes are read from ``/proc`` (Linux only, like the rest of the
benchmarks): a process's children by the parent pid in ``/proc/PID/stat``, its
resident set from ``VmRSS`` in ``/proc/PID/status`` and its proportional set
(shared pages divided among the processes sharing them) from ``Pss`` in
``/proc/PID/smaps_rollup``.

A figure that cannot be taken (the daemon does not run the MCP servers, or
does not share or defer them) is left out of the round and its reason kept in
:data:`NOT_MEASURED`, which the report prints as ``not measured: <why>``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from systems import ECHO, START_TIMEOUT, Daemon, Sandbox, ext_argv, start_daemon

from zotd.client import Client, NotRunning, ZotdError, connect
from zotd.model import stamps

HERE = Path(__file__).resolve().parent
SERVER = HERE / "mcp_bench_server.py"

SESSIONS = 5
SERVERS = 10
LAZY = 10

#: How long the servers of one side get to be listed and called before the
#: figure is given up (fifty SDK servers start in about 15 s on two cores).
FLEET_TIMEOUT = 120.0

#: How long the sessions sit idle before their memory is read, so that what
#: the calls allocated has settled.
SETTLE = 0.5

#: How long the run that fills the lazy extensions' cache waits for their
#: tools to be listed before it calls them by name (which starts them).
WARM_WAIT = 10.0

#: Why a figure (by key) was not taken; printed instead of a number.
NOT_MEASURED: dict[str, str] = {}

BACKEND = "trio"


# --- processes and memory, from /proc -----------------------------------------------


@dataclass(frozen=True)
class Stat:
    """What ``/proc/PID/stat`` says of one process."""

    state: str
    ppid: int
    #: Clock ticks after boot at which it started: tells a pid reused from it.
    start: int


def stat(pid: int) -> Stat | None:
    """The process's stat line, or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data.rsplit(b") ", 1)[1].split()
    return Stat(fields[0].decode(), int(fields[1]), int(fields[19]))


def descendants(root: int) -> dict[int, Stat]:
    """Every live process under ``root`` (children, their children, ...)."""
    stats: dict[int, Stat] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (s := stat(int(entry.name))) and s.state != "Z":
            stats[int(entry.name)] = s
    children: dict[int, list[int]] = {}
    for pid, s in stats.items():
        children.setdefault(s.ppid, []).append(pid)
    found: dict[int, Stat] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = stats[child]
            todo.append(child)
    return found


def _kib(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass  # gone meanwhile: it holds no memory
    return 0


def runs(pid: int, script: Path) -> bool:
    """Whether the process's command line names ``script``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(script).encode() in f.read().split(b"\0")
    except OSError:
        return False


@dataclass
class Tally:
    """Processes and memory of a set of processes."""

    processes: int
    #: How many of them run the server script (``mcp_bench_server.py``).
    servers: int
    #: Summed resident sets (shared pages counted once per process).
    rss_mib: float
    #: Summed proportional sets (shared pages divided among their sharers).
    pss_mib: float


def tally(pids: Sequence[int], server: Path = SERVER) -> Tally:
    """Counts ``pids`` (and those running ``server``) and sums their ``VmRSS`` and ``Pss``."""
    rss = sum(_kib(f"/proc/{pid}/status", "VmRSS:") for pid in pids)
    pss = sum(_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in pids)
    servers = sum(runs(pid, server) for pid in pids)
    return Tally(len(pids), servers, rss / 1024, pss / 1024)


class Reaper:
    """The processes a benchmark started, killed by pid when it ends.

    Each is remembered with its start time, so that a pid the system reused
    meanwhile for another process is never signalled.
    """

    def __init__(self) -> None:
        self.known: dict[int, int] = {}

    def note(self, pid: int, s: Stat | None = None) -> None:
        s = s or stat(pid)
        if s is not None:
            self.known[pid] = s.start

    def note_tree(self, root: int) -> dict[int, Stat]:
        """Remembers every process under ``root``; returns them."""
        tree = descendants(root)
        for pid, s in tree.items():
            self.note(pid, s)
        return tree

    def kill_all(self) -> None:
        """SIGKILLs every remembered process still alive (and not a reused pid)."""
        for pid, start in self.known.items():
            s = stat(pid)
            if s is not None and s.start == start and s.state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox()
    try:
        yield box
    finally:
        box.remove()


def write_manifest(box: Sandbox, name: str, fields: Mapping[str, object]) -> None:
    directory = box.home / "extensions" / name
    directory.mkdir()
    manifest = {"name": name, "version": "1.0.0", **fields}
    (directory / "extension.json").write_text(json.dumps(manifest))


def server_names(n: int) -> list[str]:
    return [f"srv{i:02d}" for i in range(n)]


# --- the fleet, through zotd ----------------------------------------------------------


async def wait_up(daemon: Daemon) -> None:
    """Waits until the daemon answers a ``hello`` that joins no workspace."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if daemon.process.poll() is not None:
            raise RuntimeError(f"zotd exited with {daemon.process.returncode}")
        try:
            async with connect(daemon.sandbox.socket, attach=False, client="probe", start=False):
                return
        except NotRunning:
            if time.monotonic() > deadline:
                raise
            await anyio.sleep(0.005)


class NotServed(Exception):
    """The daemon does not serve what the figure needs; the message says why."""


async def list_every(zot: Client, names: Sequence[str], deadline: float) -> dict[str, str]:
    """Waits until the workspace lists a tool of every extension in ``names``;
    returns one tool of each (its ``*_echo`` tool if it has one)."""
    while True:
        tools = await zot.list_tools()
        by_ext: dict[str, str] = {}
        for tool in sorted(tools, key=lambda t: not t.name.endswith("_echo")):
            by_ext.setdefault(tool.extension, tool.name)
        if all(name in by_ext for name in names):
            return {name: by_ext[name] for name in names}
        exts = await zot.list_extensions()
        broken = [e for e in exts if e.name in names and e.state in ("failed", "exited")]
        if broken or time.monotonic() > deadline:
            why = "; ".join(f"{e.name} {e.state}: {e.last_error}" for e in broken[:1])
            missing = [n for n in names if n not in by_ext]
            raise NotServed(why or f"no tools listed of {', '.join(missing[:3])}...")
        await anyio.sleep(0.05)


def failure(exc: BaseException) -> str | None:
    """Why zotd could not give a figure, if ``exc`` (or an exception in its
    group) says so: :exc:`NotServed`, or an error reply from zotd."""
    if isinstance(exc, NotServed | ZotdError):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (why := failure(inner)) is not None:
                return why
    return None


async def call_echo(zot: Client, tool: str) -> None:
    result = await zot.call_tool(tool, {"text": "hi"})
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content!r}")


def fleet_zotd(sessions: int, servers: int, kind: str = "mcp") -> tuple[Tally, float]:
    """The fleet through one zotd: returns the tally of the daemon and every
    process under it, and the daemon's own RSS (MiB).

    ``kind`` is ``mcp`` (the measured figure) or ``zot``: the same names as
    ``echo_ext.py`` extensions, for the daemon's own memory without the mcp
    package (and to try the harness on a daemon without MCP).

    Raises:
        NotServed: the daemon did not serve every server to every session.
    """
    names = server_names(servers)
    reaper = Reaper()
    with sandbox() as box:
        for name in names:
            argv = [sys.executable, str(SERVER), name] if kind == "mcp" else ext_argv(name, "tool")
            fields = {"kind": kind, "exec": argv[0], "args": argv[1:], "scope": "shared"}
            write_manifest(box, name, fields)
        projects = [box.root / f"w{i}" for i in range(sessions)]
        for project in projects:
            project.mkdir()
        daemon = start_daemon(box)
        reaper.note(daemon.pid)
        result: list[tuple[Tally, float]] = []
        try:

            async def session(project: Path, done: anyio.Event, leave: anyio.Event) -> None:
                deadline = time.monotonic() + FLEET_TIMEOUT
                async with connect(box.socket, cwd=project, client="bench", start=False) as zot:
                    tools = await list_every(zot, names, deadline)
                    for tool in tools.values():
                        await call_echo(zot, tool)
                    done.set()
                    await leave.wait()

            async def run() -> None:
                await wait_up(daemon)
                leave = anyio.Event()
                dones = [anyio.Event() for _ in projects]
                async with anyio.create_task_group() as tg:
                    for project, done in zip(projects, dones, strict=True):
                        tg.start_soon(session, project, done, leave)
                    for done in dones:
                        await done.wait()
                    await anyio.sleep(SETTLE)
                    tree = reaper.note_tree(daemon.pid)
                    whole = tally([daemon.pid, *tree], SERVER if kind == "mcp" else ECHO)
                    own = tally([daemon.pid]).rss_mib
                    leave.set()
                result.append((whole, own))

            anyio.run(run, backend=BACKEND)
            daemon.stop()
        finally:
            if daemon.process.poll() is None:
                reaper.note_tree(daemon.pid)
                daemon.process.kill()
                daemon.process.wait()
            reaper.kill_all()
    return result[0]


# --- the fleet, one set per session ---------------------------------------------------


async def host(names: Sequence[str], errlog: TextIO) -> None:
    """One agent session as an MCP host runs its servers (``mcp_fleet.py host``).

    Starts every server with the SDK's ``stdio_client`` (each in a task of its
    own, at once, as hosts start theirs), initializes it, lists its tools and
    calls its ``*_echo`` tool; prints ``ready`` once all have answered, and
    keeps them until its stdin closes. Then every session is closed, which
    stops its server (the SDK closes its stdin, then terminates it). A
    failure of any server ends the host with its error. The servers' stderr
    goes to ``errlog``.
    """
    from mcp import ClientSession, StdioServerParameters, stdio_client

    ready = 0
    stop = anyio.Event()

    async def serve(name: str) -> None:
        nonlocal ready
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER), name])
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            if f"{name}_echo" not in {t.name for t in listed.tools}:
                raise RuntimeError(f"{name} lists no {name}_echo tool")
            result = await session.call_tool(f"{name}_echo", {"text": "hi"})
            if result.is_error:
                raise RuntimeError(f"{name}_echo failed: {result.content!r}")
            ready += 1
            if ready == len(names):
                os.write(1, b"ready\n")
            await stop.wait()

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(serve, name)
        while True:
            await anyio.wait_readable(0)
            if not os.read(0, 4096):
                break
        stop.set()


def read_line(process: subprocess.Popen[bytes], deadline: float) -> bytes:
    """One line of ``process``'s stdout, or b"" at its end or at ``deadline``."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    seen = b""
    while not seen.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b""
        chunk = os.read(fd, 1)
        if not chunk:
            return seen
        seen += chunk
    return seen


def fleet_per_session(sessions: int, servers: int) -> Tally:
    """Each session's own servers: returns the tally of the server processes
    (every process under the hosts, not the hosts themselves).

    Every host and every process under it is killed on the way out, by pid,
    whatever happened (an error, Ctrl-C).
    """
    names = server_names(servers)
    reaper = Reaper()
    hosts: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="zb-hosts-") as root:
        errors = Path(root) / "hosts.err"
        try:
            with open(errors, "ab") as err:
                for i in range(sessions):
                    project = Path(root) / f"w{i}"
                    project.mkdir()
                    process = subprocess.Popen(
                        [sys.executable, __file__, "host", *names],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=err,
                        cwd=project,
                        # Its own session, as the servers are (stdio_client's):
                        # only this function stops them.
                        start_new_session=True,
                    )
                    hosts.append(process)
                    reaper.note(process.pid)
            deadline = time.monotonic() + FLEET_TIMEOUT
            for process in hosts:
                if read_line(process, deadline) != b"ready\n":
                    raise RuntimeError(
                        f"an MCP host did not get ready: {errors.read_text()[-800:]}"
                    )
            time.sleep(SETTLE)
            pids: list[int] = []
            for process in hosts:
                pids.extend(reaper.note_tree(process.pid))
            counted = tally(pids)
            for process in hosts:
                assert process.stdin is not None
                process.stdin.close()
            for process in hosts:
                process.wait(timeout=30)
            return counted
        finally:
            for process in hosts:
                if process.poll() is None:
                    reaper.note_tree(process.pid)
            reaper.kill_all()
            for process in hosts:
                process.wait()


#: Whether :func:`round_fleet` has run in this process.
_fleet_taken = False


def round_fleet(quick: bool, into: dict[str, float]) -> None:
    """The fleet's figures, keys ``fleet.*``; only in the first round of a run.

    They are counts and sizes: the same servers take the same memory whatever
    else the machine does (two runs differ by well under 1 %), while each
    taking costs some 40 s of starting sixty SDK servers on two cores.
    """
    global _fleet_taken
    if _fleet_taken:
        return
    _fleet_taken = True
    base = fleet_per_session(SESSIONS, SERVERS)
    into["fleet.host.servers"] = base.servers
    into["fleet.host.rss"] = base.rss_mib
    into["fleet.host.pss"] = base.pss_mib
    try:
        whole, own = fleet_zotd(SESSIONS, SERVERS)
        if whole.servers > SERVERS:
            raise NotServed(
                f"scope shared not in effect ({whole.servers} processes, {SERVERS} servers)"
            )
        # The daemon's own memory without the mcp package: the same names as
        # zot extensions (echo_ext.py), which zotd speaks to without importing it.
        into["fleet.zot.daemon"] = fleet_zotd(SESSIONS, SERVERS, kind="zot")[1]
    except Exception as exc:
        if (why := failure(exc)) is None:
            raise
        for key in ("servers", "procs", "rss", "pss", "daemon"):
            NOT_MEASURED[f"fleet.zotd.{key}"] = why
        return
    into["fleet.zotd.servers"] = whole.servers
    into["fleet.zotd.procs"] = whole.processes
    into["fleet.zotd.rss"] = whole.rss_mib
    into["fleet.zotd.pss"] = whole.pss_mib
    into["fleet.zotd.daemon"] = own


# --- lazy extensions ------------------------------------------------------------------


@dataclass
class FirstUse:
    """One agent's first use of a fresh daemon's workspace."""

    #: Seconds from connect to a ``list_tools`` showing every tool.
    listed: float
    #: Seconds from connect to the answer of the first call (after the listing).
    called: float
    #: Extension processes running once that call was answered.
    running: int


def lazy_sandbox(box: Sandbox, count: int, lazy: bool, enabled: bool = True) -> None:
    for i in range(count):
        argv = ext_argv(f"t{i:02d}", "tool")
        fields = {"exec": argv[0], "args": argv[1:], "lazy": lazy, "enabled": enabled}
        write_manifest(box, f"t{i:02d}", fields)


async def first_use(daemon: Daemon, count: int) -> FirstUse:
    """Connects to the daemon's project workspace, lists until every one of
    ``count`` tools is there, and calls one; times both from the connect."""
    deadline = time.monotonic() + START_TIMEOUT
    clock = time.perf_counter
    begin = clock()
    box = daemon.sandbox
    async with connect(box.socket, cwd=box.project, client="bench", start=False) as zot:
        while len(tools := await zot.list_tools()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(tools)} of {count} tools listed")
            await anyio.sleep(0.001)
        listed = clock() - begin
        if not count:
            return FirstUse(listed, 0.0, 0)
        await call_echo(zot, tools[0].name)
        called = clock() - begin
        running = sum(e.pid is not None for e in await zot.list_extensions())
        return FirstUse(listed, called, running)


def timed_start(box: Sandbox, count: int) -> FirstUse:
    """A fresh daemon over ``box``, up and idle, then :func:`first_use`."""
    reaper = Reaper()
    daemon = start_daemon(box)
    reaper.note(daemon.pid)
    try:
        out: list[FirstUse] = []

        async def run() -> None:
            await wait_up(daemon)
            await anyio.sleep(0.1)  # past its own start-up work
            out.append(await first_use(daemon, count))

        anyio.run(run, backend=BACKEND)
        daemon.stop()
        return out[0]
    finally:
        if daemon.process.poll() is None:
            reaper.note_tree(daemon.pid)
            daemon.process.kill()
            daemon.process.wait()
        reaper.kill_all()


def warm(box: Sandbox, count: int) -> None:
    """Runs a daemon over ``box`` once with every tool called, so that lazy
    extensions' registrations are cached for the next run."""
    reaper = Reaper()
    daemon = start_daemon(box)
    reaper.note(daemon.pid)
    try:

        async def run() -> None:
            await wait_up(daemon)
            deadline = time.monotonic() + WARM_WAIT
            async with daemon.client() as zot:
                names = [f"t{i:02d}" for i in range(count)]
                # Listed from the cache, or once each has run: either way, call
                # them all (echo_ext.py's tool is named after its extension).
                while time.monotonic() < deadline:
                    if len(await zot.list_tools()) >= count:
                        break
                    await anyio.sleep(0.05)
                for name in names:
                    await call_echo(zot, name)

        anyio.run(run, backend=BACKEND)
        daemon.stop()
    finally:
        if daemon.process.poll() is None:
            reaper.note_tree(daemon.pid)
            daemon.process.kill()
            daemon.process.wait()
        reaper.kill_all()


def round_lazy(quick: bool, into: dict[str, float]) -> None:
    """First ``list_tools`` and first call: none, ten disabled, ten eager, ten
    lazy (keys ``lazy.*``).

    Each repetition starts a fresh daemon for each of the four, one after
    another, so the four saw the same minute; the round keeps the medians.
    """
    reps = 5 if quick else 9
    samples: dict[str, list[float]] = {}
    lazy_running: list[int] = []
    with sandbox() as none, sandbox() as off, sandbox() as eager, sandbox() as lazy:
        # Ten disabled: what finding and reading ten manifests costs the
        # workspace's start, with nothing run or listed.
        lazy_sandbox(off, LAZY, lazy=False, enabled=False)
        lazy_sandbox(eager, LAZY, lazy=False)
        lazy_sandbox(lazy, LAZY, lazy=True)
        try:
            warm(lazy, LAZY)
        except Exception as exc:
            if (why := failure(exc)) is None:
                raise
            NOT_MEASURED["lazy.lazy.list"] = NOT_MEASURED["lazy.lazy.call"] = why
        # What a workspace reads is memoized only once its files have settled
        # (zotd.model.stamps): a sandbox's are seconds old, a user's are not.
        time.sleep(stamps.SETTLE_NS / 1e9)
        for _ in range(reps):
            for label, box, count in (
                ("none", none, 0),
                ("off", off, 0),
                ("eager", eager, LAZY),
                ("lazy", lazy, LAZY),
            ):
                if label == "lazy" and "lazy.lazy.list" in NOT_MEASURED:
                    continue
                try:
                    use = timed_start(box, count)
                except Exception as exc:
                    if label != "lazy" or (why := failure(exc)) is None:
                        raise
                    NOT_MEASURED["lazy.lazy.list"] = NOT_MEASURED["lazy.lazy.call"] = why
                    continue
                samples.setdefault(f"lazy.{label}.list", []).append(use.listed)
                if count:
                    samples.setdefault(f"lazy.{label}.call", []).append(use.called)
                if label == "lazy":
                    lazy_running.append(use.running)
    for key in ("lazy.none.list", "lazy.off.list", "lazy.eager.list", "lazy.eager.call"):
        into[key] = statistics.median(samples[key])
    if "lazy.lazy.list" in NOT_MEASURED:
        return
    if max(lazy_running) > 1:
        why = f"lazy not in effect ({max(lazy_running)} of {LAZY} running after one call)"
        NOT_MEASURED["lazy.lazy.list"] = NOT_MEASURED["lazy.lazy.call"] = why
        return
    into["lazy.lazy.list"] = statistics.median(samples["lazy.lazy.list"])
    into["lazy.lazy.call"] = statistics.median(samples["lazy.lazy.call"])


#: The report's rows: ``(label, unit, key, baseline, target)`` as ``bench.Row`` takes them.
ROWS: list[tuple[str, str, str, tuple[str, str, str] | None, tuple[str, float] | None]] = [
    (
        "MCP server processes, 5 x 10",
        "",
        "fleet.zotd.servers",
        ("per session", "fleet.host.servers", "over"),
        ("<=", 0.2),
    ),
    (
        "processes, zotd and children",
        "",
        "fleet.zotd.procs",
        ("per session", "fleet.host.servers", "over"),
        None,
    ),
    (
        "RSS total, 5 x 10 MCP servers",
        "MiB",
        "fleet.zotd.rss",
        ("per session", "fleet.host.rss", "over"),
        ("<=", 0.25),
    ),
    (
        "PSS total, 5 x 10 MCP servers",
        "MiB",
        "fleet.zotd.pss",
        ("per session", "fleet.host.pss", "over"),
        None,
    ),
    ("RSS, zotd alone, 10 MCP servers", "MiB", "fleet.zotd.daemon", None, None),
    ("RSS, zotd alone, 10 zot extensions", "MiB", "fleet.zot.daemon", None, None),
    ("first list_tools, no extensions", "ms", "lazy.none.list", None, None),
    (
        "first list_tools, 10 disabled",
        "ms",
        "lazy.off.list",
        ("none", "lazy.none.list", "over"),
        None,
    ),
    (
        "first list_tools, 10 eager",
        "ms",
        "lazy.eager.list",
        ("none", "lazy.none.list", "over"),
        None,
    ),
    (
        "first list_tools, 10 lazy",
        "ms",
        "lazy.lazy.list",
        ("none", "lazy.none.list", "over"),
        ("<=", 1.2),
    ),
    (
        "first list_tools, 10 lazy vs disabled",
        "ms",
        "lazy.lazy.list",
        ("disabled", "lazy.off.list", "over"),
        None,
    ),
    ("first call, 10 eager", "ms", "lazy.eager.call", None, None),
    (
        "first call, 10 lazy",
        "ms",
        "lazy.lazy.call",
        ("eager", "lazy.eager.call", "over"),
        None,
    ),
]


if __name__ == "__main__":
    if sys.argv[1:2] == ["host"]:
        with open(os.devnull, "w") as devnull:
            anyio.run(host, sys.argv[2:], devnull, backend=BACKEND)
    else:
        sys.exit(f"usage: {sys.argv[0]} host NAME... (run the benchmarks with bench.py)")
