"""``zot ext logs --all`` against a real daemon (``zotd start``) running two
real extensions (tests/extensions/fake.py, which writes to its stderr): the
daemon's log and both extensions' interleaved and tagged, and ``-f --all``
showing what they write after it started."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import RUN_TIMEOUT, WAIT, ZOT, Cli, read_line, wait_until
from tests.conftest import add_extension

#: A line of ``--all``'s text: its time, its tag, the line.
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) (\S+) +(.*)$")


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    try:
        yield c
    finally:
        c.cleanup()


def zot(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    res = cli.zot(*args)
    assert res.returncode == 0, res
    return res


def running(cli: Cli) -> dict[str, int]:
    """name -> pid of the project's extensions, once both are up."""
    found = {i["name"]: i["pid"] for i in json.loads(zot(cli, "ext", "list", "--json").stdout)}
    cli.pids.update(pid for pid in found.values() if pid is not None)
    return found


def parsed(text: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in text.splitlines():
        match = LINE.match(line)
        assert match is not None, line
        rows.append((match[1], match[2], match[3]))
    return rows


def test_all_shows_the_daemon_and_both_extensions_tagged(cli: Cli) -> None:
    add_extension(cli.home / "extensions", "wx")
    add_extension(cli.home / "extensions", "wy")
    cli.start()
    pids = running(cli)
    logs = cli.home / "logs"
    for name in ("wx", "wy"):
        said = f"fake {name} starting, pid {pids[name]}"
        log = logs / f"ext-{name}.log"
        wait_until(lambda: said in log.read_text(), WAIT, f"{name}'s stderr in its log")  # noqa: B023
    res = cli.zot("ext", "logs", "--all", "-n", "1000", timeout=RUN_TIMEOUT)
    assert (res.returncode, res.stderr) == (0, ""), res
    rows = parsed(res.stdout)
    assert [time for time, _, _ in rows] == sorted(time for time, _, _ in rows)
    shown = [(tag, text) for _, tag, text in rows]
    for name in ("wx", "wy"):
        assert (name, f"fake {name} starting, pid {pids[name]}") in shown
        assert any(
            tag == name and text.startswith(f"[zotd] started pid {pids[name]}: ")
            for tag, text in shown
        ), shown
    daemon = [text for tag, text in shown if tag == "zotd"]
    assert daemon, shown  # zotd.log, from `zotd start`
    assert not any(text[:4].isdigit() for text in daemon), daemon  # its stamp is the column


def test_follow_all_shows_what_comes_after_it_started(cli: Cli) -> None:
    add_extension(cli.home / "extensions", "wx")
    add_extension(cli.home / "extensions", "wy")
    cli.start()
    before = running(cli)
    proc = cli.popen(
        [str(ZOT), "ext", "logs", "--all", "-f", "-n", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    # A restart makes wy write to its stderr again, and zotd note it.
    zot(cli, "ext", "reload", "wy")
    after = running(cli)
    assert after["wy"] != before["wy"]
    wanted = {
        ("wy", f"fake wy starting, pid {after['wy']}"),
        ("wy", f"[zotd] started pid {after['wy']}"),
    }
    seen: list[tuple[str, str]] = []
    while wanted:
        _, tag, text = parsed(read_line(proc.stdout, timeout=WAIT))[0]
        seen.append((tag, text))
        wanted -= {(tag, text), (tag, text.split(":", 1)[0])}
    # Only what came after it started: not wx's start, long before.
    assert ("wx", f"fake wx starting, pid {before['wx']}") not in seen, seen
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=WAIT) == 0
    assert proc.stderr is not None and proc.stderr.read() == b""
