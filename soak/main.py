"""The command line: parses the options, sets up the run's directory, starts
the daemon, runs the load (:func:`soak.load.run`), stops the daemon, looks
for orphans, reads the logs and prints the table. Its exit code is 0 if the
run passed, 1 if it failed, 2 if this zotd refuses the soak's config, 130 if
interrupted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import trio

import soak
from soak.daemon import (
    Ending,
    settle_orphans,
    start_daemon,
    stop_daemon,
    write_config,
    write_extensions,
)
from soak.load import run
from soak.logs import read_logs
from soak.plan import Plan
from soak.procfs import proc_info
from soak.state import Soak
from soak.table import render
from zotd.model.config import ConfigError, load_config


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> tuple[Plan, bool]:
    """The run's plan, and whether to keep its temporary directory (``--keep``)."""
    headline = (soak.__doc__ or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog=prog, description=headline)
    parser.add_argument("--quick", action="store_true", help="a short run (under a minute)")
    parser.add_argument("--clients", type=int, help="client connections (default 40, quick 20)")
    parser.add_argument("--duration", type=float, help="seconds of load (default 180, quick 30)")
    parser.add_argument("--minutes", type=float, help="minutes of load: --duration N*60")
    parser.add_argument("--seed", type=int, default=1, help="seed of the soak's choices")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.minutes is not None:
        if args.duration is not None:
            parser.error("--minutes and --duration both say how long: give one of them")
        args.duration = args.minutes * 60
    clients = args.clients or (20 if args.quick else 40)
    duration = (30.0 if args.quick else 180.0) if args.duration is None else args.duration
    if clients < 1 or duration <= 0:
        parser.error("--clients and --duration (or --minutes) must be positive")
    return Plan(clients=clients, duration=duration, seed=args.seed, quick=args.quick), args.keep


def print_tail(path: Path, lines: int = 30) -> None:
    try:
        text = path.read_text("utf-8", "replace").splitlines()[-lines:]
    except OSError:
        return
    print(f"--- last lines of {path}:", *text, sep="\n", file=sys.stderr)


def self_start_ticks() -> int:
    info = proc_info(os.getpid())
    assert info is not None
    return info.start


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Runs the soak once; returns the exit code."""
    plan, keep = parse_args(argv, prog)
    began = time.monotonic()
    since = self_start_ticks()
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="zsoak", dir="/tmp")))
    run_id = uuid.uuid4().hex
    marker = f"ZOTD_SOAK_RUN={run_id}".encode()
    daemon: subprocess.Popen[bytes] | None = None
    try:
        (root / "proj").mkdir()
        (root / "run").mkdir(mode=0o700)
        skipped = write_config(root / "zotd.toml", plan)
        try:
            config = load_config(root / "zotd.toml")
        except ConfigError as exc:
            print(f"soak: this zotd refuses the soak's config: {exc}", file=sys.stderr)
            return 2
        marks = {"ZOTD_SOAK_RUN": run_id, "ZOTD_SOAK_SEED": str(plan.seed)}
        dirs = write_extensions(root, config, marks)
        daemon = start_daemon(root, dirs, marks)
        state = Soak(plan, root, config, daemon.pid)
        state.marker = marker
        print(
            f"soak: daemon pid {daemon.pid}, {plan.clients} clients, "
            f"{plan.duration:g} s of load, in {root}",
            file=sys.stderr,
        )
        try:
            trio.run(run, state)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) or (
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt)
            ):
                print("soak: interrupted", file=sys.stderr)
                return 130
            print_tail(root / "daemon.log")
            raise
        ending = Ending()
        ending.exit_code, ending.exit_seconds = stop_daemon(daemon)
        pgids = state.stats.ext_pids | read_logs(root).pids
        ending.orphans = settle_orphans(marker, daemon.pid, pgids, since)
        logs = read_logs(root)
        table, failures = render(plan, state.stats, logs, ending, time.monotonic() - began, skipped)
        print(table)
        if keep:
            print(f"kept {root}", file=sys.stderr)
        return 1 if failures else 0
    finally:
        if daemon is not None and daemon.poll() is None:
            stop_daemon(daemon)
            settle_orphans(marker, daemon.pid, set(), since)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
