"""zotd's benchmarks: one run, one machine, every figure beside its baseline.

Usage: ``python benchmarks/bench.py [--quick] [--rounds N] [--json FILE]``
(or ``nox -s bench [-- --quick]``); ``--curves`` measures how the costs grow
with load instead (``curves.py``) and draws them into ``docs/img/``.

What runs, each in its own process, several rounds over:

* **zotd**: ``python -m zotd`` with trivial extensions (``echo_ext.py``),
  driven by ``zotd.client`` over the Unix socket.
* **floor**: ``relay.py``, a bare trio relay between the same client and the
  same extension; what zotd adds is what it costs beyond this.
* **raw client** (``raw_client.py``): both of those driven as agents in other
  languages drive them, one write per request, at 64 calls in flight; with
  the server's CPU time per call.
* **peer**: the MCP Python SDK's ``MCPServer`` over stdio, called through
  ``mcp.ClientSession``; what an agent would otherwise use.
* **bare spawn**: ``bare_spawn.py``, the same extensions started by bare trio.
* **MCP fleet** (``--only mcp``): ``mcp_fleet.py``, ten MCP servers shared by
  five workspaces beside five sessions running their own, and lazy extensions.

Ratios are taken within a round (so both sides saw the same machine), and
the table shows the median over rounds. Nothing here is a test: it reports,
and says which targets were met.
"""

from __future__ import annotations

import argparse
import compileall
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mcp_fleet
from raw_client import cpu_seconds, raw_rate
from systems import (
    SDK_EXT,
    Daemon,
    Sandbox,
    alive,
    bare_fanout,
    bare_spawn,
    client_of,
    ext_argv,
    import_time,
    rss_mib,
    start_daemon,
    start_relay,
    time_to_ready,
)

import zotd
from zotd.client import Client

Call = Callable[[], Awaitable[object]]


@dataclass
class Settings:
    rounds: int
    #: Sequential calls timed per round (after ``warmup``).
    calls: int
    warmup: int
    #: Seconds each calls/s figure runs.
    seconds: float
    decisions: int


FULL = Settings(rounds=5, calls=3000, warmup=300, seconds=2.0, decisions=2000)
QUICK = Settings(rounds=2, calls=600, warmup=100, seconds=0.5, decisions=1000)

IN_FLIGHT = (1, 8, 64)
MANY = 50

#: The event loop the clients run on.
BACKEND = "trio"
STUBBORN = 10
GUARDS = 10


# --- measuring --------------------------------------------------------------------


async def latencies(call: Call, n: int, warmup: int) -> list[float]:
    """Seconds per call, ``n`` sequential calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        await call()
    out = []
    clock = time.perf_counter
    for _ in range(n):
        begin = clock()
        await call()
        out.append(clock() - begin)
    return out


async def rate(call: Call, in_flight: int, seconds: float) -> float:
    """Calls per second with ``in_flight`` callers looping for ``seconds``."""
    count = 0
    deadline = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await call()
            count += 1

    begin = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(caller)
    return count / (time.perf_counter() - begin)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Figures:
    """One round's figures, by name."""

    values: dict[str, float] = field(default_factory=dict)

    def __setitem__(self, key: str, value: float) -> None:
        self.values[key] = value


async def call_figures(
    call: Call, settings: Settings, prefix: str, into: Figures, pid: int | None = None
) -> None:
    """Latencies and rates; with the server's ``pid``, its CPU time per call
    at 64 in flight too (``PREFIX.cpu64``)."""
    lat = await latencies(call, settings.calls, settings.warmup)
    into[f"{prefix}.p50"] = percentile(lat, 0.50)
    into[f"{prefix}.p99"] = percentile(lat, 0.99)
    for n in IN_FLIGHT:
        if n == 64 and pid is not None:
            cpu = cpu_seconds(pid)
            begin = time.perf_counter()
            calls_per_second = await rate(call, n, settings.seconds)
            calls = calls_per_second * (time.perf_counter() - begin)
            into[f"{prefix}.cpu64"] = (cpu_seconds(pid) - cpu) / calls
        else:
            calls_per_second = await rate(call, n, settings.seconds)
        into[f"{prefix}.rate{n}"] = calls_per_second


def raw_figures(
    socket: Path, cwd: Path | None, pid: int, settings: Settings, prefix: str, into: Figures
) -> None:
    """The raw client (one write per request, see raw_client.py) at 64 in
    flight: calls/s and the server's CPU time per call."""
    figures = raw_rate(socket, cwd, pid, 64, max(1.0, settings.seconds))
    into[f"{prefix}.raw64"] = figures.per_second
    into[f"{prefix}.rawcpu"] = figures.cpu_per_call


def echo_call(zot: Client, tool: str = "echo") -> Call:
    async def call() -> object:
        result = await zot.call_tool(tool, {"text": "hi"})
        if result.is_error or result.content[0].text != "hi":  # type: ignore[union-attr]
            raise RuntimeError(f"unexpected result {result!r}")
        return result

    return call


# --- the systems ----------------------------------------------------------------------


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox()
    try:
        yield box
    finally:
        box.remove()


@contextmanager
def daemon_of(box: Sandbox) -> Iterator[Daemon]:
    daemon = start_daemon(box)
    try:
        yield daemon
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()


async def ready_all(daemon: Daemon, zot: Client, expected: int) -> float:
    """Waits until ``expected`` extensions are ready; returns seconds since spawn."""
    while True:
        exts = await zot.list_extensions()
        if sum(e.state == "ready" for e in exts) >= expected:
            return time.perf_counter() - daemon.started
        await anyio.sleep(0.002)


def round_floor(settings: Settings, into: Figures) -> None:
    with sandbox() as box:
        relay = start_relay(box)
        try:

            async def run() -> None:
                async with client_of(box.socket, relay, None) as zot:
                    await call_figures(echo_call(zot), settings, "floor", into, relay.pid)

            anyio.run(run, backend=BACKEND)
            raw_figures(box.socket, None, relay.pid, settings, "floor", into)
        finally:
            relay.kill()
            relay.wait()


#: Starts of one extension timed per round, each beside a bare spawn of it.
STARTS = 5


def round_zotd(settings: Settings, into: Figures) -> None:
    startups(into)
    with sandbox() as box:
        box.add("echo", "tool")
        with daemon_of(box) as daemon:

            async def run() -> None:
                async with daemon.client() as zot:
                    await ready_all(daemon, zot, 1)
                    await call_figures(echo_call(zot), settings, "zotd", into, daemon.pid)

            anyio.run(run, backend=BACKEND)
            raw_figures(box.socket, box.project, daemon.pid, settings, "zotd", into)
            daemon.stop()


def startups(into: Figures) -> None:
    """A daemon with one extension started :data:`STARTS` times, each right
    after a bare spawn of the extension, so that the two see the same moment
    of a noisy machine; the round keeps the medians."""
    daemon_times: list[float] = []
    bare_times: list[float] = []
    for _ in range(STARTS):
        bare_times.append(bare_spawn([ext_argv("echo", "tool")]))
        with sandbox() as box:
            box.add("echo", "tool")
            with daemon_of(box) as daemon:

                async def run(started: Daemon = daemon) -> float:
                    async with started.client() as zot:
                        return await ready_all(started, zot, 1)

                daemon_times.append(anyio.run(run, backend=BACKEND))
                daemon.stop()
    into["startup1"] = statistics.median(daemon_times)
    into["bare1"] = statistics.median(bare_times)


def round_peer(settings: Settings, into: Figures) -> None:
    from mcp_peer import mcp_caller

    async def run() -> None:
        async with mcp_caller() as call:
            await call_figures(call, settings, "peer", into)

    anyio.run(run, backend=BACKEND)


def round_intercept(settings: Settings, into: Figures) -> None:
    for guards in (1, GUARDS):
        with sandbox() as box:
            for i in range(guards):
                box.add(f"guard{i}", "guard")
            with daemon_of(box) as daemon:

                async def run(zot_daemon: Daemon = daemon, n: int = guards) -> None:
                    async with zot_daemon.client() as zot:
                        await ready_all(zot_daemon, zot, n)

                        async def decide() -> object:
                            verdict = await zot.intercept("bash", {"command": "ls"})
                            if verdict.block:
                                raise RuntimeError("a guard blocked")
                            return verdict

                        for _ in range(settings.warmup):
                            await decide()
                        # The daemon's CPU (its threads' too: the audit
                        # trail's writer) over the timed decisions.
                        cpu = cpu_seconds(zot_daemon.pid)
                        lat = await latencies(decide, settings.decisions, 0)
                        spent = cpu_seconds(zot_daemon.pid) - cpu
                        into[f"intercept{n}.p50"] = percentile(lat, 0.5)
                        into[f"intercept{n}.cpu"] = spent / settings.decisions

                anyio.run(run, backend=BACKEND)
                daemon.stop()
        lat = bare_fanout(guards, settings.decisions, settings.warmup)
        into[f"fanout{guards}.p50"] = percentile(lat, 0.5)
    # What a decision costs more with ten guards than with one, beside what
    # asking the same guard processes costs a bare loop, in the same minute.
    into["intercept.ratio"] = into.values[f"intercept{GUARDS}.p50"] / into.values["intercept1.p50"]
    into["fanout.ratio"] = into.values[f"fanout{GUARDS}.p50"] / into.values["fanout1.p50"]


def many_argvs() -> list[tuple[str, str]]:
    tools = [(f"t{i:02d}", "tool") for i in range(MANY - STUBBORN)]
    return tools + [(f"s{i:02d}", "stubborn") for i in range(STUBBORN)]


def round_many(settings: Settings, into: Figures) -> None:
    """50 extensions (10 stubborn): startup, memory idle and under load, shutdown."""
    exts = many_argvs()
    into["bare50"] = bare_spawn([ext_argv(name, mode) for name, mode in exts])
    with sandbox() as box:
        for name, mode in exts:
            box.add(name, mode)
        with daemon_of(box) as daemon:
            pids: list[int] = []

            async def run() -> None:
                async with daemon.client() as zot:
                    into["startup50"] = await ready_all(daemon, zot, MANY)
                    pids.extend(e.pid for e in await zot.list_extensions() if e.pid)
                    await anyio.sleep(0.2)
                    into["rss.idle"] = rss_mib(daemon.pid)
                    tools = [name for name, mode in exts if mode == "tool"]
                    calls = [echo_call(zot, tool) for tool in tools]
                    turn = iter(range(1 << 62))

                    async def spread() -> object:
                        return await calls[next(turn) % len(calls)]()

                    peak = 0.0
                    async with anyio.create_task_group() as tg:

                        async def sample() -> None:
                            nonlocal peak
                            while True:
                                peak = max(peak, rss_mib(daemon.pid))
                                await anyio.sleep(0.05)

                        tg.start_soon(sample)
                        into["many.rate64"] = await rate(spread, 64, max(1.0, settings.seconds))
                        tg.cancel_scope.cancel()
                    into["rss.load"] = peak

            anyio.run(run, backend=BACKEND)
            into["shutdown50"] = daemon.stop()
            time.sleep(0.05)
            into["orphans"] = sum(alive(pid) for pid in pids)


def round_sdk(settings: Settings, into: Figures) -> None:
    """The SDK's import time, and an SDK extension's start beside a raw one's."""
    python = sys.executable
    tries = 3 if settings is QUICK else 7
    into["sdk.import"] = statistics.median(import_time(python, "zotd.sdk") for _ in range(tries))
    into["sdk.ready"] = statistics.median(
        time_to_ready([python, str(SDK_EXT), "echo"]) for _ in range(tries)
    )
    into["raw.ready"] = statistics.median(
        time_to_ready(ext_argv("echo", "tool")) for _ in range(tries)
    )


def round_fleet(settings: Settings, into: Figures) -> None:
    """Ten MCP servers for five workspaces: zotd's shared ones beside one set per
    session. Taken in the first round only: sizes, not times (see mcp_fleet.py)."""
    mcp_fleet.round_fleet(settings is QUICK, into.values)


def round_lazy(settings: Settings, into: Figures) -> None:
    """First list_tools and first call of ten lazy extensions, beside eager ones and none."""
    mcp_fleet.round_lazy(settings is QUICK, into.values)


# --- the report -----------------------------------------------------------------------


@dataclass
class Row:
    label: str
    unit: str
    key: str
    #: ``(label, key, ratio kind)``: kind "over" is ours/theirs, "under" theirs/ours.
    baseline: tuple[str, str, str] | None = None
    #: ``(op, bound)``: the ratio (or, without a baseline, the value) must be <= or >= bound.
    target: tuple[str, float] | None = None


ROWS = [
    Row("tool call p50", "us", "zotd.p50", ("floor", "floor.p50", "over"), ("<=", 1.25)),
    Row("tool call p99", "us", "zotd.p99", ("floor", "floor.p99", "over"), ("<=", 1.5)),
    *(
        Row(
            f"calls/s, {n} in flight",
            "/s",
            f"zotd.rate{n}",
            ("floor", f"floor.rate{n}", "over"),
            (">=", 0.7) if n == 64 else None,
        )
        for n in IN_FLIGHT
    ),
    Row("daemon CPU per call, 64 in flight", "us", "zotd.cpu64", ("floor", "floor.cpu64", "over")),
    Row(
        "calls/s, 64 in flight, raw client",
        "/s",
        "zotd.raw64",
        ("floor", "floor.raw64", "over"),
        (">=", 0.9),
    ),
    Row(
        "daemon CPU per call, raw client",
        "us",
        "zotd.rawcpu",
        ("floor", "floor.rawcpu", "over"),
        ("<=", 1.25),
    ),
    Row("tool call p50 vs MCP", "us", "zotd.p50", ("MCP SDK", "peer.p50", "under"), (">=", 5.5)),
    Row("tool call p99 vs MCP", "us", "zotd.p99", ("MCP SDK", "peer.p99", "under")),
    *(
        Row(
            f"calls/s, {n} in flight vs MCP",
            "/s",
            f"zotd.rate{n}",
            ("MCP SDK", f"peer.rate{n}", "over"),
            (">=", 40.0) if n == 64 else None,
        )
        for n in IN_FLIGHT
    ),
    Row("startup, 1 extension", "ms", "startup1", ("bare spawn", "bare1", "over"), ("<=", 1.25)),
    Row(
        "startup, 50 extensions", "ms", "startup50", ("bare spawn", "bare50", "over"), ("<=", 1.25)
    ),
    Row("intercept p50, 1 guard", "us", "intercept1.p50"),
    Row("intercept p50, 10 guards", "us", "intercept10.p50", ("1 guard", "intercept1.p50", "over")),
    Row("daemon CPU per decision, 1 guard", "us", "intercept1.cpu"),
    Row(
        "daemon CPU per decision, 10 guards",
        "us",
        "intercept10.cpu",
        ("1 guard", "intercept1.cpu", "over"),
        ("<=", 1.6),
    ),
    Row("fan-out floor p50, 1 guard", "us", "fanout1.p50"),
    Row(
        "fan-out floor p50, 10 guards",
        "us",
        "fanout10.p50",
        ("1 guard", "fanout1.p50", "over"),
    ),
    Row(
        "intercept p50, 10 guards / 1 guard",
        "x",
        "intercept.ratio",
        ("fan-out floor", "fanout.ratio", "over"),
        ("<=", 1.1),
    ),
    Row("SDK import time", "ms", "sdk.import"),
    Row(
        "SDK extension, start to ready",
        "ms",
        "sdk.ready",
        ("raw extension", "raw.ready", "over"),
        ("<=", 1.4),
    ),
    Row("RSS, 50 extensions, idle", "MiB", "rss.idle", None, ("<", 60.0)),
    Row("RSS, 50 extensions, load", "MiB", "rss.load", None, ("<", 60.0)),
    Row("calls/s, 64 in flight, 50 tools", "/s", "many.rate64"),
    Row("shutdown, 50 (10 stubborn)", "s", "shutdown50", None, ("<=", 3.5)),
    Row("orphans after shutdown", "", "orphans", None, ("<=", 0.0)),
    *(Row(*spec) for spec in mcp_fleet.ROWS),
]

SCALE = {"us": 1e6, "ms": 1e3, "s": 1.0, "MiB": 1.0, "/s": 1.0, "": 1.0, "x": 1.0}


def fmt(value: float, unit: str) -> str:
    v = value * SCALE[unit]
    text = f"{v:,.0f}" if abs(v) >= 100 or unit in ("/s", "") else f"{v:.2f}"
    return f"{text} {unit}".strip()


def check(op: str, value: float, bound: float) -> bool:
    return {"<=": value <= bound, "<": value < bound, ">=": value >= bound}[op]


def report(rounds: list[Figures]) -> tuple[list[list[str]], bool]:
    # Over the rounds that took the figure (the MCP fleet is taken in one).
    def median(key: str) -> float:
        return statistics.median(r.values[key] for r in rounds if key in r.values)

    def ratio(row: Row) -> float:
        assert row.baseline is not None
        _, key, kind = row.baseline
        values = [
            r.values[row.key] / r.values[key]
            if kind == "over"
            else r.values[key] / r.values[row.key]
            for r in rounds
            if row.key in r.values and key in r.values
        ]
        return statistics.median(values)

    table = [["figure", "zotd", "baseline", "ratio", "target", "met"]]
    all_met = True
    for row in ROWS:
        keys = [row.key, *([row.baseline[1]] if row.baseline else [])]
        why = next((mcp_fleet.NOT_MEASURED[k] for k in keys if k in mcp_fleet.NOT_MEASURED), "")
        if why:
            target = f"{row.target[0]} {row.target[1]:g}x" if row.target else ""
            all_met &= row.target is None
            base = ""
            if row.baseline and any(row.baseline[1] in r.values for r in rounds):
                base = f"{fmt(median(row.baseline[1]), row.unit)} ({row.baseline[0]})"
            table.append(
                [row.label, f"not measured: {why}", base, "", target, "NO" if target else ""]
            )
            continue
        value = median(row.key)
        base = ratio_text = target = met = ""
        measured = value
        if row.baseline is not None:
            name, key, _kind = row.baseline
            base = f"{fmt(median(key), row.unit)} ({name})"
            measured = ratio(row)
            ratio_text = f"{measured:.2f}x"
        if row.target is not None:
            op, bound = row.target
            shown = (
                f"{bound:g}x"
                if row.baseline
                else fmt(bound, row.unit)
                if row.unit != "MiB"
                else f"{bound:g} MiB"
            )
            target = f"{op} {shown}"
            ok = check(op, measured, bound)
            all_met &= ok
            met = "yes" if ok else "NO"
        table.append([row.label, fmt(value, row.unit), base, ratio_text, target, met])
    return table, all_met


def render(table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = []
    for n, r in enumerate(table):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=False))
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds (< 1 min)")
    parser.add_argument("--rounds", type=int, help="rounds to take the median over")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    parser.add_argument(
        "--only",
        choices=["calls", "intercept", "many", "sdk", "mcp", "lazy"],
        help="run just one group of figures",
    )
    parser.add_argument(
        "--curves",
        action="store_true",
        help="curves instead: latency, calls/s and memory against load (curves.py), as PNGs",
    )
    args = parser.parse_args(argv)
    # Compiled first: with PYTHONDONTWRITEBYTECODE=1 (or just edited) every
    # daemon would compile what changed at each start, and the startup rows count it.
    compileall.compile_dir(Path(zotd.__file__).parent, quiet=1)
    if args.curves:
        import curves

        return curves.run(args.quick, args.json, args.rounds)
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings.rounds = args.rounds
    groups: list[Callable[[Settings, Figures], None]] = []
    if args.only in (None, "calls"):
        groups += [round_floor, round_zotd, round_peer]
    if args.only in (None, "intercept"):
        groups.append(round_intercept)
    if args.only in (None, "many"):
        groups.append(round_many)
    if args.only in (None, "sdk"):
        groups.append(round_sdk)
    if args.only in (None, "mcp"):
        groups.append(round_fleet)
    if args.only in (None, "mcp", "lazy"):
        groups.append(round_lazy)
    rounds: list[Figures] = []
    begin = time.perf_counter()
    for n in range(settings.rounds):
        figures = Figures()
        for group in groups:
            gc.collect()
            print(f"round {n + 1}/{settings.rounds}: {group.__name__[6:]}", file=sys.stderr)
            group(settings, figures)
        rounds.append(figures)
    elapsed = time.perf_counter() - begin
    global ROWS

    def taken(key: str) -> bool:
        if key.startswith("fleet."):  # taken in the first round only
            return key in rounds[0].values or key in mcp_fleet.NOT_MEASURED
        return all(key in f.values for f in rounds) or key in mcp_fleet.NOT_MEASURED

    ROWS = [r for r in ROWS if taken(r.key)]
    ROWS = [r for r in ROWS if r.baseline is None or taken(r.baseline[1])]
    table, all_met = report(rounds)
    print(render(table))
    print()
    print(
        f"{settings.rounds} rounds in {elapsed:.0f} s on {describe_machine()}; "
        f"medians over rounds, ratios taken within each round."
    )
    print("every target met" if all_met else "some targets NOT met")
    if args.json:
        args.json.write_text(json.dumps([r.values for r in rounds], indent=1))
    return 0


def describe_machine() -> str:
    import os
    import platform

    return f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


if __name__ == "__main__":
    raise SystemExit(main())
