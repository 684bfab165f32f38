"""The curves as PNGs (``bench.py --curves``): the only module importing matplotlib.

matplotlib is in the ``bench`` extra, never a runtime dependency, and runs
on its Agg backend (no display). Each figure is small (about 100 dpi) so
that the PNGs stay well under 100 KB in ``docs/img/``.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from fits import Fit, Series
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from PIL import Image

DPI = 100
#: Colours of the palette the PNGs are written with.
COLOURS_KEPT = 64
COLOURS = {"zotd": "tab:blue", "floor": "tab:gray", "MCP SDK": "tab:orange"}
SYSTEMS = ("zotd", "floor", "MCP SDK")


def _save(fig: Figure, path: Path) -> Path:
    """Writes the figure as a PNG of :data:`COLOURS_KEPT` colours (a third of
    the full-colour file's size, and no visible difference for line plots)."""
    fig.tight_layout()
    drawn = io.BytesIO()
    fig.savefig(drawn, dpi=DPI, format="png")
    plt.close(fig)
    drawn.seek(0)
    with Image.open(drawn) as image:
        image.convert("RGB").quantize(colors=COLOURS_KEPT).save(path, "PNG", optimize=True)
    return path


def _line(ax: Axes, f: Fit, colour: str, label: str, style: str = ":") -> None:
    xs = [f.x_min, f.x_max]
    ax.plot(xs, [f.at(x) / 1024 for x in xs], style, color=colour, linewidth=1, label=label)


def _target(ax: Axes, f: Fit, slope: float, label: str) -> None:
    """The target as a line from the fit's intercept with the target's slope (KiB/unit)."""
    xs = [f.x_min, f.x_max]
    ax.plot(xs, [(f.intercept + slope * x) / 1024 for x in xs], "--", color="tab:red", label=label)


def in_flight(series: dict[str, Series], fits: dict[str, Fit], path: Path) -> Path:
    fig, (lat, rate) = plt.subplots(1, 2, figsize=(10, 4))
    for name in SYSTEMS:
        p50, calls = series[f"p50.{name}"], series[f"rate.{name}"]
        slope = fits[f"p50.{name}"].slope
        colour = COLOURS[name]
        lat.plot(p50.xs, p50.ys, "o-", color=colour, label=f"{name} ({slope:,.0f} us / call)")
        rate.plot(calls.xs, calls.ys, "o-", color=colour, label=name)
    ticks = series["p50.zotd"].xs
    for ax in (lat, rate):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
        ax.set_yscale("log")
        ax.set_xlabel("calls in flight (one connection)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    lat.set_ylabel("p50 latency (us)")
    lat.set_title("p50 latency; slope per call in flight", fontsize=10)
    rate.set_ylabel("calls/s")
    rate.set_title("throughput", fontsize=10)
    return _save(fig, path)


def memory(
    series: dict[str, Series],
    fits: dict[str, Fit],
    path: Path,
    *,
    connection_target: float,
    workspace_target: float,
    empty_workspace_target: float,
) -> Path:
    fig, (ext, ws, conn) = plt.subplots(1, 3, figsize=(13, 4))

    s, f = series["rss.extensions"], fits["rss.extensions"]
    ext.plot(s.xs, [y / 1024 for y in s.ys], "o", color="tab:blue", label="measured")
    _line(ext, f, "tab:blue", f"fit: {f.slope:,.0f} KiB / extension")
    ext.set_xlabel("extensions in one workspace")
    ext.set_title("daemon RSS against extensions", fontsize=10)

    for key, colour, target, label in (
        ("rss.workspaces", "tab:blue", workspace_target, "100 KiB + its extensions, agent"),
        ("rss.empty_workspaces", "tab:green", empty_workspace_target, "100 KiB + its agent"),
    ):
        s, f = series[key], fits[key]
        ws.plot(s.xs, [y / 1024 for y in s.ys], "o", color=colour, label=s.name)
        _line(ws, f, colour, f"fit: {f.slope:,.0f} KiB / workspace")
        _target(ws, f, target, f"target: {label}")
    ws.set_xlabel("workspaces (one idle agent each)")
    ws.set_title("daemon RSS against workspaces", fontsize=10)

    s, f = series["rss.connections"], fits["rss.connections"]
    conn.plot(s.xs, [y / 1024 for y in s.ys], "o", color="tab:blue", label="measured")
    _line(conn, f, "tab:blue", f"fit: {f.slope:,.1f} KiB / connection")
    _target(conn, f, connection_target, f"target: {connection_target:g} KiB / connection")
    conn.set_xlabel("idle clients connected")
    conn.set_title("daemon RSS against connections", fontsize=10)

    for ax in (ext, ws, conn):
        ax.set_ylabel("daemon RSS (MiB)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def idle_clients(series: dict[str, Series], fits: dict[str, Fit], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    s, f = series["p50.idle"], fits["p50.idle"]
    sweeps = [series[k] for k in ("p50.idle.up", "p50.idle.down") if k in series]
    both = len(sweeps) > 1
    label = "p50 latency, sequential calls" + (" (mean of the two sweeps)" if both else "")
    ax.plot(s.xs, s.ys, "o-", color="tab:blue", label=label)
    if both:
        for sweep, marker in zip(sweeps, "^v", strict=True):
            ax.plot(sweep.xs, sweep.ys, marker, color="tab:gray", alpha=0.6, label=sweep.name)
    xs = [f.x_min, f.x_max]
    ax.plot(
        xs, [f.at(x) for x in xs], ":", color="tab:blue", label=f"fit: {f.slope:.3f} us / client"
    )
    ax.set_ylim(0, max(s.ys) * 1.3)
    ax.set_xlabel("idle clients connected")
    ax.set_ylabel("p50 latency (us)")
    ax.set_title("one client's latency among idle ones", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def draw(
    series: dict[str, Series],
    fits: dict[str, Fit],
    directory: Path,
    *,
    connection_target: float,
    workspace_target: float,
    empty_workspace_target: float,
) -> list[Path]:
    """Writes ``curve-*.png`` into ``directory``; returns their paths.

    The targets are KiB per unit: ``workspace_target`` for one workspace of
    ten extensions with its agent (its extensions' and connection's share
    plus the workspace's own bound), drawn from each fit's intercept.
    """
    directory.mkdir(parents=True, exist_ok=True)
    return [
        in_flight(series, fits, directory / "curve-in-flight.png"),
        memory(
            series,
            fits,
            directory / "curve-memory.png",
            connection_target=connection_target,
            workspace_target=workspace_target,
            empty_workspace_target=empty_workspace_target,
        ),
        idle_clients(series, fits, directory / "curve-idle-clients.png"),
    ]
