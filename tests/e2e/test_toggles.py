"""Many ``zot ext enable`` / ``zot ext disable`` of one extension at once,
with a daemon and without one: none fails, and whoever reads the manifest
meanwhile (a thread here, ``zot ext list``) always decodes a whole one.

Real processes: 20 toggles started together (the model-level test in
tests/model/test_manage.py runs 100 in threads).
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, ZOT, Cli, wait_until
from tests.conftest import add_extension

cli = test_cli.cli  # the fixture, as this module's own

TOGGLES = 20


class Reader:
    """A thread decoding ``path`` over and over until stopped; keeps what failed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failures: list[str] = []
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = json.loads(self.path.read_text())
                assert data["name"] == "flip"
            except Exception as exc:  # every failure is the finding
                self.failures.append(repr(exc))
            self.reads += 1

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT)


@pytest.fixture
def flip(cli: Cli) -> Path:
    """A global extension ``flip`` with a command, and a large manifest (a
    half-written one would show)."""
    return add_extension(
        cli.home / "extensions",
        "flip",
        "--commands",
        "hi",
        manifest={"description": "d" * 30_000},
    )


def toggle_all(cli: Cli) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
    """Starts TOGGLES ``zot ext enable|disable flip`` together, and ``zot ext
    list --json`` alongside; returns each one's verb and outcome."""
    procs = []
    for i in range(TOGGLES):
        verb = "enable" if i % 2 else "disable"
        argv = [str(ZOT), "ext", verb, "flip"]
        procs.append((verb, argv, cli.popen(argv, subprocess.PIPE, subprocess.PIPE)))
    for _ in range(3):
        argv = [str(ZOT), "ext", "list", "--json"]
        procs.append(("list", argv, cli.popen(argv, subprocess.PIPE, subprocess.PIPE)))
    done = []
    for verb, argv, proc in procs:
        out, err = proc.communicate(timeout=120)
        res = subprocess.CompletedProcess(argv, proc.returncode, out.decode(), err.decode())
        done.append((verb, res))
    return done


def check(done: list[tuple[str, subprocess.CompletedProcess[str]]], reader: Reader) -> None:
    for verb, res in done:
        assert (res.returncode, res.stderr) == (0, ""), res
        if verb == "list":
            [info] = json.loads(res.stdout)
            assert info["name"] == "flip" and info["state"] != "failed", info
        else:
            assert res.stdout.startswith(f"{verb}d flip"), res
    assert reader.failures == []
    assert reader.reads > 0


def test_toggles_at_once_through_the_daemon(cli: Cli, flip: Path) -> None:
    cli.start()
    wait_until(lambda: cli.extensions()["flip"].state == "ready", WAIT, "flip ready")
    with Reader(flip / "extension.json") as reader:
        done = toggle_all(cli)
    check(done, reader)
    for verb, res in done:  # each reply shows its own change
        if verb == "enable":
            assert res.stdout.startswith("enabled flip: ready"), res
        elif verb == "disable":
            assert res.stdout == "disabled flip: stopped\n", res
    res = cli.zot("ext", "enable", "flip")
    assert res.returncode == 0, res
    assert cli.extensions()["flip"].state == "ready"
    assert [p.name for p in flip.iterdir()] == ["extension.json"]  # no temporary left


def test_toggles_at_once_without_a_daemon(cli: Cli, flip: Path) -> None:
    with Reader(flip / "extension.json") as reader:
        done = toggle_all(cli)
    check(done, reader)
    assert [p.name for p in flip.iterdir()] == ["extension.json"]
    assert isinstance(json.loads((flip / "extension.json").read_text())["enabled"], bool)
