"""Curves, not points: how zotd's costs grow with load (``bench.py --curves``).

What is measured, each system a process of its own as in ``bench.py``:

* **calls in flight** (1, 2, 4, ..., 256 over one connection): p50 latency
  and calls/s of zotd, the floor (``relay.py``) and the MCP SDK peer
  (``mcp_peer.py``). Each sweep starts its system afresh; the systems take
  turns, and each point is the median over the sweeps.
* **daemon RSS against extensions** (1 to 200 ``echo_ext.py`` tools in one
  workspace): a fresh daemon per point, read once every extension is ready.
* **daemon RSS against workspaces** (1 to 50 project directories, each with
  its own ten extensions and one idle agent connected), one daemon, read as
  the workspaces are added; and the same with no extensions installed.
* **connections** (1 to 1,000 idle clients that said ``hello`` in the
  workspace and then do nothing): the daemon's RSS, and the p50 latency of
  one more client calling the echo tool, both as the idle clients are added
  (and, in a full run, the latency again as they leave, so that a drift of
  the machine over the sweep cancels out).

Memory is ``VmRSS`` of ``/proc/PID/status`` (Linux), read once the daemon
has settled: after each step nothing is asked of it until its RSS has stayed
the same over :data:`SETTLE_READS` reads :data:`SETTLE_STEP` apart, so no
request's garbage (and no collection it would set off) is in the figure.
What a connection or a workspace costs is the slope of a least-squares line
through the readings, not one difference.

Every curve is fitted twice, by a constant and by a line, and the table says
which fits and the slope per unit (``fits.py``). The PNGs are drawn by
``plots.py`` into ``docs/img/``; matplotlib is imported there only.

The workspace target is taken on workspaces without extensions (less their
agent's connection): the slope of workspaces of ten extensions less ten
times the extension curve's slope is no measure of it, since an extension
of a name the daemon has not seen costs more (its manifest's memo, its
files' stamps) than the same extension in one more workspace. What each
costs, object by object, is ``heap.py``'s.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import daemon_of, echo_call, ready_all, render, sandbox
from fits import Fit, Series, fit
from systems import START_TIMEOUT, Daemon, Sandbox, client_of, start_relay

from zotd.client import Client

Call = Callable[[], Awaitable[object]]

BACKEND = "trio"
HERE = Path(__file__).resolve().parent
IMAGES = HERE.parent / "docs" / "img"

#: Extensions in each workspace of the workspace curve.
WS_EXTENSIONS = 10

#: The targets (KiB of daemon RSS).
CONNECTION_KIB = 20.0
WORKSPACE_KIB = 100.0

#: The settling before a memory reading: RSS unchanged over this many reads,
#: this far apart, and at most :data:`SETTLE_MAX` seconds.
SETTLE_READS = 3
SETTLE_STEP = 0.1
SETTLE_MAX = 3.0

#: From this many calls in flight on, the time per call (1 / calls/s) is
#: fitted: below it the pipe is not full, and the time per call falls as
#: calls overlap, which says nothing about how the cost grows.
FULL_PIPE = 16

#: File descriptors the client process keeps besides the idle connections.
FD_MARGIN = 256


@dataclass(frozen=True)
class Settings:
    #: Sweeps of each system over the calls in flight (medians taken over them).
    sweeps: int
    #: Seconds each in-flight point runs (after ``warmup`` seconds untimed).
    seconds: float
    warmup: float
    in_flight: tuple[int, ...]
    #: Sequential calls per latency block of the idle-client curve, blocks per point.
    calls: int
    blocks: int
    extensions: tuple[int, ...]
    workspaces: tuple[int, ...]
    clients: tuple[int, ...]
    #: Also take the idle-client latencies as the clients leave.
    both_ways: bool


IN_FLIGHT = tuple(2**i for i in range(9))  # 1 .. 256

FULL = Settings(
    sweeps=3,
    seconds=1.0,
    warmup=0.2,
    in_flight=IN_FLIGHT,
    calls=400,
    blocks=5,
    extensions=(1, 25, 50, 75, 100, 125, 150, 175, 200),
    workspaces=(1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50),
    clients=(1, 10, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000),
    both_ways=True,
)
QUICK = Settings(
    sweeps=1,
    seconds=0.3,
    warmup=0.1,
    in_flight=IN_FLIGHT,
    calls=200,
    blocks=3,
    extensions=(1, 50, 100, 200),
    workspaces=(1, 5, 10, 15, 20),
    clients=(1, 100, 250, 500, 750, 1000),
    both_ways=False,
)


# --- memory -----------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """One reading of the daemon: its resident set and its threads."""

    rss_kib: int
    threads: int


def memory(pid: int) -> Memory:
    """``VmRSS`` and ``Threads`` of ``/proc/PID/status``."""
    rss = threads = -1
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    if rss < 0:
        raise RuntimeError(f"no VmRSS for pid {pid}")
    return Memory(rss, threads)


async def settled(pid: int) -> Memory:
    """The daemon's memory once it has stopped moving (see the module's docstring)."""
    await anyio.sleep(SETTLE_STEP)
    seen: list[Memory] = []
    give_up = time.monotonic() + SETTLE_MAX
    while True:
        seen.append(memory(pid))
        last = seen[-SETTLE_READS:]
        if len(last) == SETTLE_READS and len({m.rss_kib for m in last}) == 1:
            return last[-1]
        if time.monotonic() > give_up:
            return sorted(last, key=lambda m: m.rss_kib)[len(last) // 2]
        await anyio.sleep(SETTLE_STEP)


def raise_open_files(needed: int) -> None:
    """Lifts this process's soft ``RLIMIT_NOFILE`` to ``needed`` (1,000 idle
    clients are 1,000 sockets; the default soft limit is often 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(f"{needed} open files needed; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def allow_connections(box: Sandbox, connections: int) -> None:
    """Lets the sandbox's daemon serve ``connections`` (``max_connections``,
    2,048 by default; the daemon raises its own open-file limit to fit)."""
    with box.config.open("a") as f:
        f.write(f"max_connections = {max(2048, connections + 64)}\n")


class IdleClients:
    """Connections that said ``hello`` in a workspace and then do nothing.

    Plain blocking sockets (used from a worker thread), so that they cost
    this process's event loop nothing while the measured client runs.
    """

    def __init__(self, path: Path, cwd: Path) -> None:
        self.path = path
        self.hello = json.dumps({"type": "hello", "id": 1, "cwd": str(cwd), "client": "idle"})
        self.open: list[socket.socket] = []

    def grow_to(self, n: int) -> None:
        while len(self.open) < n:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(START_TIMEOUT)
                sock.connect(str(self.path))
                sock.sendall(self.hello.encode() + b"\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = sock.recv(1 << 16)
                    if not chunk:
                        raise RuntimeError("the daemon closed an idle client's connection")
                    reply += chunk
                if not json.loads(reply).get("success"):
                    raise RuntimeError(f"an idle client's hello failed: {reply[:300]!r}")
            except BaseException:
                sock.close()
                raise
            self.open.append(sock)

    def shrink_to(self, n: int) -> None:
        while len(self.open) > n:
            self.open.pop().close()


# --- calls in flight ----------------------------------------------------------------


@dataclass
class Point:
    """One in-flight point of one sweep."""

    p50: float
    rate: float


async def load(call: Call, in_flight: int, seconds: float) -> Point:
    """``in_flight`` callers call in a loop for ``seconds`` (and until
    3 x ``in_flight`` calls are done, so that a slow system gets enough)."""
    done: list[float] = []
    clock = time.perf_counter
    deadline = clock() + seconds

    async def caller() -> None:
        while (begin := clock()) < deadline or len(done) < 3 * in_flight:
            await call()
            done.append(clock() - begin)

    begin = clock()
    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(caller)
    return Point(statistics.median(done), len(done) / (clock() - begin))


async def sweep(call: Call, settings: Settings) -> dict[int, Point]:
    out: dict[int, Point] = {}
    for n in settings.in_flight:
        await load(call, n, settings.warmup)
        out[n] = await load(call, n, settings.seconds)
    return out


def sweep_zotd(settings: Settings) -> dict[int, Point]:
    with sandbox() as box:
        box.add("echo", "tool")
        with daemon_of(box) as daemon:

            async def run() -> dict[int, Point]:
                async with daemon.client() as zot:
                    await ready_all(daemon, zot, 1)
                    return await sweep(echo_call(zot), settings)

            out = anyio.run(run, backend=BACKEND)
            daemon.stop()
    return out


def sweep_floor(settings: Settings) -> dict[int, Point]:
    with sandbox() as box:
        relay = start_relay(box)
        try:

            async def run() -> dict[int, Point]:
                async with client_of(box.socket, relay, None) as zot:
                    return await sweep(echo_call(zot), settings)

            return anyio.run(run, backend=BACKEND)
        finally:
            relay.kill()
            relay.wait()


def sweep_peer(settings: Settings) -> dict[int, Point]:
    from mcp_peer import mcp_caller

    async def run() -> dict[int, Point]:
        async with mcp_caller() as call:
            return await sweep(call, settings)

    return anyio.run(run, backend=BACKEND)


SYSTEMS: dict[str, Callable[[Settings], dict[int, Point]]] = {
    "zotd": sweep_zotd,
    "floor": sweep_floor,
    "MCP SDK": sweep_peer,
}


# --- memory curves ----------------------------------------------------------------


def extension_curve(settings: Settings) -> list[tuple[int, Memory]]:
    """A fresh daemon per point, with that many tool extensions in its
    workspace, read once all are ready."""
    out: list[tuple[int, Memory]] = []
    with sandbox() as box:
        installed = 0
        for n in settings.extensions:
            while installed < n:
                box.add(f"e{installed:03d}", "tool")
                installed += 1
            with daemon_of(box) as daemon:
                out.append((n, anyio.run(ready_memory, daemon, n, backend=BACKEND)))
                daemon.stop()
    return out


async def ready_memory(daemon: Daemon, count: int) -> Memory:
    """The daemon's settled memory once ``count`` extensions are ready."""
    async with daemon.client() as zot:
        await every_ready(zot, count)
        return await settled(daemon.pid)


async def every_ready(zot: Client, count: int) -> None:
    """Waits until ``count`` extensions of the client's workspace are ready."""
    deadline = time.monotonic() + START_TIMEOUT + count * 0.5
    while True:
        exts = await zot.list_extensions()
        if sum(e.state == "ready" for e in exts) >= count:
            return
        if time.monotonic() > deadline:
            states = sorted({e.state for e in exts})
            raise RuntimeError(f"{count} extensions not ready in time (states: {states})")
        await anyio.sleep(0.02)


def workspace_curve(settings: Settings, extensions: int) -> list[tuple[int, Memory]]:
    """One daemon; workspaces added one by one (a project directory each,
    with one agent connected and idle), read at each point."""
    out: list[tuple[int, Memory]] = []
    with sandbox() as box:
        for i in range(extensions):
            box.add(f"x{i}", "tool")
        with daemon_of(box) as daemon:

            async def run() -> None:
                async with AsyncExitStack() as agents:
                    opened = 0
                    for n in settings.workspaces:
                        while opened < n:
                            project = box.root / f"w{opened:03d}"
                            project.mkdir()
                            zot = await agents.enter_async_context(
                                client_of(box.socket, daemon.process, project)
                            )
                            await every_ready(zot, extensions)
                            opened += 1
                        out.append((n, await settled(daemon.pid)))

            anyio.run(run, backend=BACKEND)
            daemon.stop()
    return out


@dataclass
class Connections:
    """The connection curve: memory and one client's latency against idle clients."""

    memory: list[tuple[int, Memory]] = field(default_factory=list)
    #: Idle clients -> p50 latency (seconds), as they were added ...
    up: dict[int, float] = field(default_factory=dict)
    #: ... and as they left (full runs only).
    down: dict[int, float] = field(default_factory=dict)


async def p50_blocks(call: Call, settings: Settings) -> float:
    """The median of ``blocks`` blocks' p50s of ``calls`` sequential calls."""
    p50s = []
    clock = time.perf_counter
    for _ in range(settings.blocks):
        times = []
        for _ in range(settings.calls):
            begin = clock()
            await call()
            times.append(clock() - begin)
        p50s.append(statistics.median(times))
    return statistics.median(p50s)


def connection_curve(settings: Settings) -> Connections:
    most = max(settings.clients)
    raise_open_files(most + FD_MARGIN)
    out = Connections()
    with sandbox() as box:
        box.add("echo", "tool")
        allow_connections(box, most + 1)
        with daemon_of(box) as daemon:
            idle = IdleClients(box.socket, box.project)
            try:

                async def run() -> None:
                    async with daemon.client() as zot:
                        await ready_all(daemon, zot, 1)
                        call = echo_call(zot)
                        for _ in range(settings.calls):  # warm-up
                            await call()
                        for n in settings.clients:
                            await anyio.to_thread.run_sync(idle.grow_to, n)
                            out.memory.append((n, await settled(daemon.pid)))
                            out.up[n] = await p50_blocks(call, settings)
                        if settings.both_ways:
                            for n in reversed(settings.clients):
                                await anyio.to_thread.run_sync(idle.shrink_to, n)
                                out.down[n] = await p50_blocks(call, settings)

                anyio.run(run, backend=BACKEND)
            finally:
                idle.shrink_to(0)
            daemon.stop()
    return out


# --- the whole run --------------------------------------------------------------------


@dataclass
class Curves:
    """Every curve of a run, as :class:`~fits.Series` by key."""

    series: dict[str, Series] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, key: str, name: str, xs: list[float], ys: list[float], unit: str) -> None:
        self.series[key] = Series(name, xs, ys, unit)

    def fit(self, key: str) -> Fit:
        s = self.series[key]
        return fit(s.xs, s.ys)


def measure(settings: Settings) -> Curves:
    curves = Curves()
    begin = time.perf_counter()

    def say(what: str) -> None:
        print(f"curves: {what} ({time.perf_counter() - begin:.0f} s)", file=sys.stderr)

    sweeps: dict[str, list[dict[int, Point]]] = {name: [] for name in SYSTEMS}
    for n in range(settings.sweeps):
        for name, run in SYSTEMS.items():
            say(f"calls in flight, {name}, sweep {n + 1}/{settings.sweeps}")
            sweeps[name].append(run(settings))
    for name, taken in sweeps.items():
        xs = [float(n) for n in settings.in_flight]
        p50 = [statistics.median(s[n].p50 for s in taken) * 1e6 for n in settings.in_flight]
        rate = [statistics.median(s[n].rate for s in taken) for n in settings.in_flight]
        curves.add(f"p50.{name}", name, xs, p50, "us")
        curves.add(f"rate.{name}", name, xs, rate, "/s")
        full = [i for i, n in enumerate(settings.in_flight) if n >= FULL_PIPE]
        cost = [1e6 / rate[i] for i in full]
        curves.add(f"cost.{name}", name, [xs[i] for i in full], cost, "us")

    say("daemon RSS against extensions")
    ext = extension_curve(settings)
    curves.add(
        "rss.extensions",
        "extensions",
        [float(n) for n, _ in ext],
        [float(m.rss_kib) for _, m in ext],
        "KiB",
    )
    for extensions, key in ((WS_EXTENSIONS, "rss.workspaces"), (0, "rss.empty_workspaces")):
        say(f"daemon RSS against workspaces of {extensions} extensions")
        ws = workspace_curve(settings, extensions)
        curves.add(
            key,
            f"{extensions} extensions each",
            [float(n) for n, _ in ws],
            [float(m.rss_kib) for _, m in ws],
            "KiB",
        )
    say("idle clients: daemon RSS and one client's p50")
    conn = connection_curve(settings)
    curves.add(
        "rss.connections",
        "idle clients",
        [float(n) for n, _ in conn.memory],
        [float(m.rss_kib) for _, m in conn.memory],
        "KiB",
    )
    idle_xs = sorted(conn.up)
    idle_xs_f = [float(n) for n in idle_xs]
    idle_p50 = [
        statistics.median([conn.up[n], *([conn.down[n]] if n in conn.down else [])]) * 1e6
        for n in idle_xs
    ]
    curves.add("p50.idle", "zotd", [float(n) for n in idle_xs], idle_p50, "us")
    for key, label, points in (
        ("up", "as clients came", conn.up),
        ("down", "as clients left", conn.down),
    ):
        if points:
            ys = [points[n] * 1e6 for n in idle_xs]
            curves.add(f"p50.idle.{key}", label, idle_xs_f, ys, "us")
    curves.seconds = time.perf_counter() - begin
    return curves


# --- the report ---------------------------------------------------------------------

#: Per curve: its label in the fits table, and the unit its x counts.
FIT_ROWS: list[tuple[str, str, str]] = [
    *(
        (f"p50.{name}", f"p50 latency, {name}", "call in flight")
        for name in ("zotd", "floor", "MCP SDK")
    ),
    *(
        (f"cost.{name}", f"time per call (1 / calls/s) from {FULL_PIPE}, {name}", "call in flight")
        for name in ("zotd", "floor", "MCP SDK")
    ),
    ("rss.extensions", "daemon RSS, extensions in a workspace", "extension"),
    ("rss.workspaces", f"daemon RSS, workspaces ({WS_EXTENSIONS} extensions each)", "workspace"),
    ("rss.empty_workspaces", "daemon RSS, workspaces without extensions", "workspace"),
    ("rss.connections", "daemon RSS, idle clients", "connection"),
    ("p50.idle", "p50 latency, one client among idle ones", "idle client"),
]


def amount(value: float, unit: str) -> str:
    if unit == "KiB":
        return f"{value / 1024:,.1f} MiB" if abs(value) >= 10 * 1024 else f"{value:,.1f} KiB"
    if unit == "us":
        return f"{value / 1000:,.2f} ms" if abs(value) >= 1000 else f"{value:,.1f} us"
    return f"{value:,.0f} {unit}"


def slope_text(value: float, unit: str, per: str) -> str:
    digits = 3 if abs(value) < 1 else 2 if abs(value) < 100 else 0
    return f"{value:,.{digits}f} {unit} / {per}"


def fit_table(curves: Curves) -> list[list[str]]:
    table = [
        ["curve", "first", "last", "constant (mean)", "line: slope", "R²", "line: rise", "shape"]
    ]
    for key, label, per in FIT_ROWS:
        if key not in curves.series:
            continue
        s = curves.series[key]
        f = curves.fit(key)
        table.append(
            [
                label,
                f"{amount(s.ys[0], s.unit)} at {s.xs[0]:g}",
                f"{amount(s.ys[-1], s.unit)} at {s.xs[-1]:g}",
                amount(f.mean, s.unit),
                slope_text(f.slope, s.unit, per),
                f"{f.r2:.2f}",
                f"{'+' if f.rise >= 0 else '-'}{amount(abs(f.rise), s.unit)} "
                f"({f.rise / f.at(f.x_min):+.0%})",
                f.shape,
            ]
        )
    return table


@dataclass(frozen=True)
class Costs:
    """What one more of each thing costs the daemon, from the slopes (KiB)."""

    #: One more extension, of a name not seen before, in one workspace.
    extension: float
    #: One more idle client in a workspace.
    connection: float
    #: One more workspace of ten extensions with its agent connected.
    workspace_whole: float
    #: One more workspace without extensions, its agent's connection taken
    #: off: the workspace, its extensions aside.
    workspace: float
    #: What each of the ten extensions adds to a further workspace (the two
    #: workspace slopes' difference over ten): their names are known already.
    extension_again: float
    #: The workspace slope less ten extensions (new names) and the connection:
    #: a cross-check of :attr:`workspace`, taken in another regime.
    workspace_by_difference: float


def costs(curves: Curves) -> Costs:
    extension = curves.fit("rss.extensions").slope
    connection = curves.fit("rss.connections").slope
    whole = curves.fit("rss.workspaces").slope
    empty = curves.fit("rss.empty_workspaces").slope
    return Costs(
        extension=extension,
        connection=connection,
        workspace_whole=whole,
        workspace=empty - connection,
        extension_again=(whole - empty) / WS_EXTENSIONS,
        workspace_by_difference=whole - WS_EXTENSIONS * extension - connection,
    )


def target_table(curves: Curves) -> tuple[list[list[str]], bool]:
    """The slopes as ``bench.py`` shows figures: beside a baseline (ratio
    over it) or a target (ratio over its bound)."""
    c = costs(curves)
    table = [["figure", "zotd", "baseline", "ratio", "target", "met"]]
    all_met = True

    def kib_row(label: str, value: float, bound: float | None) -> None:
        nonlocal all_met
        if bound is None:
            table.append([label, f"{value:,.1f} KiB", "", "", "", ""])
            return
        ok = value <= bound
        all_met &= ok
        table.append(
            [
                label,
                f"{value:,.1f} KiB",
                "",
                f"{value / bound:.2f}x",
                f"<= {bound:g} KiB",
                "yes" if ok else "NO",
            ]
        )

    kib_row("RSS per connection (idle client)", c.connection, CONNECTION_KIB)
    kib_row("RSS per workspace, extensions aside", c.workspace, WORKSPACE_KIB)
    kib_row(f"RSS per workspace, {WS_EXTENSIONS} extensions + agent", c.workspace_whole, None)
    kib_row("RSS per extension, a new name", c.extension, None)
    kib_row("RSS per extension, each further workspace", c.extension_again, None)
    kib_row(
        f"RSS per workspace less {WS_EXTENSIONS} new names, agent",
        c.workspace_by_difference,
        None,
    )

    def us_row(label: str, key: str, base: str | None, unit: str) -> None:
        value = curves.fit(key).slope
        row = [label, f"{value:,.2f} {unit}", "", "", "", ""]
        if base is not None:
            theirs = curves.fit(f"{key.split('.')[0]}.{base}").slope
            row[2] = f"{theirs:,.2f} {unit} ({base})"
            row[3] = f"{value / theirs:.2f}x"
        table.append(row)

    for base in ("floor", "MCP SDK"):
        us_row(f"p50 per call in flight vs {base}", "p50.zotd", base, "us")
    us_row("p50 per idle client", "p50.idle", None, "us")

    for n in (1, 256):
        if n in curves.series["rate.zotd"].xs:
            i = curves.series["rate.zotd"].xs.index(n)
            ours = curves.series["rate.zotd"].ys[i]
            for base in ("floor", "MCP SDK"):
                theirs = curves.series[f"rate.{base}"].ys[i]
                table.append(
                    [
                        f"calls/s, {n} in flight vs {base}",
                        f"{ours:,.0f} /s",
                        f"{theirs:,.0f} /s ({base})",
                        f"{ours / theirs:.2f}x",
                        "",
                        "",
                    ]
                )
    return table, all_met


def plot(curves: Curves, directory: Path) -> list[Path]:
    """Draws the PNGs (matplotlib is imported by ``plots.py`` only)."""
    import plots

    c = costs(curves)
    return plots.draw(
        curves.series,
        {key: curves.fit(key) for key in curves.series},
        directory,
        connection_target=CONNECTION_KIB,
        workspace_target=c.extension_again * WS_EXTENSIONS + c.connection + WORKSPACE_KIB,
        empty_workspace_target=c.connection + WORKSPACE_KIB,
    )


def describe_load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def run(quick: bool, json_path: Path | None = None, sweeps: int | None = None) -> int:
    """``bench.py --curves [--quick] [--rounds N] [--json FILE]``."""
    settings = QUICK if quick else FULL
    if sweeps:
        settings = Settings(**{**asdict(settings), "sweeps": sweeps})
    before = describe_load()
    curves = measure(settings)
    after = describe_load()
    print(render(fit_table(curves)))
    print()
    table, all_met = target_table(curves)
    print(render(table))
    print()
    print(
        "ratio: over the baseline where there is one, else over the target's bound; "
        "slopes by least squares over the points of each curve."
    )
    print(
        f"{settings.sweeps} sweep(s) of calls in flight, medians over sweeps; "
        f"{curves.seconds:.0f} s in all; machine {before} before, {after} after."
    )
    for path in plot(curves, IMAGES):
        print(f"wrote {os.path.relpath(path)} ({path.stat().st_size / 1024:.0f} KiB)")
    print("every target met" if all_met else "some targets NOT met")
    if json_path is not None:
        json_path.write_text(json.dumps({k: asdict(s) for k, s in curves.series.items()}, indent=1))
    return 0
