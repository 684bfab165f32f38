"""``zot ext logs`` as a user runs it, on real files (no daemon needed):
``-n`` and ``--since`` across rotated copies, ``--all`` interleaving every
log in time order, its ``--json``, and following every log at once.

tests/cli/test_ext_logs_daemon.py runs it against a real daemon and
real extensions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.cli.test_cli import RUN_TIMEOUT, WAIT, ZOT, Cli, read_line
from tests.conftest import add_extension
from zotd.model import logfiles
from zotd.model.log_time import iso_text, local_text


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    c.env.pop("PYTHONUNBUFFERED", None)  # as a user runs it: a pipe is buffered
    try:
        yield c
    finally:
        c.cleanup()


def logs(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    """``zot ext logs ARGS`` in the project, without a terminal."""
    return subprocess.run(
        [str(ZOT), "ext", "logs", *args],
        cwd=cli.project,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def outcome(res: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return res.returncode, res.stdout, res.stderr


def lines_of(res: subprocess.CompletedProcess[str]) -> list[str]:
    assert (res.returncode, res.stderr) == (0, ""), res
    return res.stdout.splitlines()


def local(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def log_dir(cli: Cli) -> Path:
    path = cli.home / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_all(cli: Cli) -> Path:
    """zotd.log and three extensions' logs (one of them rotated), with
    stamps that interleave and unstamped lines of the extensions' own."""
    logs = log_dir(cli)
    (logs / "zotd.log").write_text(
        "2026-11-30 10:00:00,000 INFO zotd.runtime.daemon: listening\n"
        "2026-11-30 10:00:03,500 WARNING zotd.runtime.extension: extension beta: slow\n"
        "Traceback (most recent call last):\n"
    )
    (logs / "ext-alpha.log.1").write_text(
        "[zotd 2026-11-30 09:59:59.000] started pid 1: ./alpha\nalpha: booting\n"
    )
    (logs / "ext-alpha.log").write_text(
        "[zotd 2026-11-30 10:00:01.000] rotated this log\nalpha: ready \x1b[31mred\n"
    )
    (logs / "ext-beta.log").write_text(
        "beta: from a run before any stamp\n[zotd 2026-11-30 10:00:02.250] started pid 2: ./beta\n"
    )
    (logs / "ext-gamma-longer.log").write_text("[zotd 2026-11-30 10:00:04] an old-style note\n")
    # alpha's last line, after its last note: when the log was last written to.
    written = local("2026-11-30 10:00:05")
    os.utime(logs / "ext-alpha.log", (written, written))
    return logs


# --- NAME or --all; -n and --since -----------------------------------------------------


def test_name_and_all_together_or_neither_is_a_usage_error(cli: Cli) -> None:
    assert outcome(logs(cli, "wx", "--all")) == (
        2,
        "",
        "zot: give an extension's NAME or --all, not both\n",
    )
    assert outcome(logs(cli)) == (2, "", "zot: give an extension's NAME, or --all for every log\n")


def test_n_reaches_back_into_the_rotated_copies(cli: Cli) -> None:
    log = log_dir(cli) / "ext-wx.log"
    log.write_text("".join(f"line {i}\n" for i in range(150)))
    assert logfiles.rotate_if_big(log, 100)  # as zotd rotates it: copied to .1, truncated
    log.write_text("".join(f"line {i}\n" for i in range(150, 250)))
    # 100 in the log itself: the other 20 from ext-wx.log.1.
    assert lines_of(logs(cli, "wx", "-n", "120")) == [f"line {i}" for i in range(130, 250)]
    # More than there are: all of both.
    assert lines_of(logs(cli, "wx", "-n", "500")) == [f"line {i}" for i in range(250)]
    res = logs(cli, "wx", "-n", "2", "--json")
    assert [json.loads(line) for line in lines_of(res)] == [
        {"extension": "wx", "path": str(log), "line": f"line {i}"} for i in (248, 249)
    ]
    res = logs(cli, "wx", "-n", "101", "--json")
    assert json.loads(lines_of(res)[0])["path"] == str(log.with_name("ext-wx.log.1"))


def test_since_takes_an_age_or_an_iso_time(cli: Cli) -> None:
    log = log_dir(cli) / "ext-wx.log"
    now = time.time()
    log.write_text(
        f"[zotd {local_text(now - 7200)}] started pid 1\n"
        f"[zotd {local_text(now - 5400)}] ready\n"
        "wx: written before the next note\n"
        f"[zotd {local_text(now - 600)}] a note of ten minutes ago\n"
        "wx: the last line\n"
    )
    # An extension's own line was written before the note after it: it may
    # be of the last hour, and is shown; the last, when the log was written.
    assert lines_of(logs(cli, "wx", "--since", "1h")) == [
        "wx: written before the next note",
        f"[zotd {local_text(now - 600)}] a note of ten minutes ago",
        "wx: the last line",
    ]
    assert len(lines_of(logs(cli, "wx", "--since", "3h"))) == 5
    assert lines_of(logs(cli, "wx", "--since", "5m")) == ["wx: the last line"]
    assert lines_of(logs(cli, "wx", "--since", "1d", "-n", "1")) == ["wx: the last line"]
    # An absolute time, local as the stamps are.
    moment = datetime.fromtimestamp(now - 3600).strftime("%Y-%m-%dT%H:%M:%S")
    assert len(lines_of(logs(cli, "wx", "--since", moment))) == 3
    # The log was last written to before the time: nothing.
    os.utime(log, (now - 7200, now - 7200))
    assert lines_of(logs(cli, "wx", "--since", "1h")) == []


def test_since_reaches_back_into_the_rotated_copies(cli: Cli) -> None:
    log = log_dir(cli) / "ext-wx.log"
    log.write_text("[zotd 2026-11-30 10:00:00.000] started\nwx: early\n")
    assert logfiles.rotate_if_big(log, 10)
    log.write_text("wx: after the rotation\n[zotd 2026-11-30 11:00:00.000] late\n")
    assert lines_of(logs(cli, "wx", "--since", "2026-11-30T09:00")) == [
        "[zotd 2026-11-30 10:00:00.000] started",
        "wx: early",
        "wx: after the rotation",
        "[zotd 2026-11-30 11:00:00.000] late",
    ]
    # wx's own lines are of 11:00 at the latest: shown.
    assert lines_of(logs(cli, "wx", "--since", "2026-11-30T10:30")) == [
        "wx: early",
        "wx: after the rotation",
        "[zotd 2026-11-30 11:00:00.000] late",
    ]
    assert lines_of(logs(cli, "wx", "--since", "2026-11-30T11:00:00.001")) == []


@pytest.mark.parametrize("bad", ["yesterday", "10", "-5m", "2026-11-31"])
def test_a_bad_since_says_what_it_takes(cli: Cli, bad: str) -> None:
    log_dir(cli).joinpath("ext-wx.log").write_text("x\n")
    for args in (["wx"], ["--all"]):
        assert outcome(logs(cli, *args, f"--since={bad}")) == (
            2,
            "",
            "zot: --since takes an ISO 8601 time (2026-11-30, 2026-11-30T11:00, "
            "2026-11-30T11:00:22+01:00) or an age (30s, 10m, 2h, 1d), "
            f"not '{bad}'\n",
        )


def test_a_log_that_cannot_be_read_says_so(cli: Cli) -> None:
    add_extension(cli.home / "extensions", "wx")
    log = log_dir(cli) / "ext-wx.log"
    log.mkdir()
    assert outcome(logs(cli, "wx")) == (1, "", f"zot: cannot read {log}: not a regular file\n")


# --- --all -----------------------------------------------------------------------------


def test_all_interleaves_every_log_in_time_order_tagged(cli: Cli) -> None:
    write_all(cli)
    assert lines_of(logs(cli, "--all")) == [
        "2026-11-30 09:59:59.000 alpha         [zotd] started pid 1: ./alpha",
        "2026-11-30 10:00:00.000 zotd          INFO zotd.runtime.daemon: listening",
        # alpha's own line, in ext-alpha.log.1: the time of the next note.
        "2026-11-30 10:00:01.000 alpha         alpha: booting",
        "2026-11-30 10:00:01.000 alpha         [zotd] rotated this log",
        "2026-11-30 10:00:02.250 beta          beta: from a run before any stamp",
        "2026-11-30 10:00:02.250 beta          [zotd] started pid 2: ./beta",
        "2026-11-30 10:00:03.500 zotd          WARNING zotd.runtime.extension: extension beta: slow",
        # A line of the daemon's log without a stamp goes with the record above.
        "2026-11-30 10:00:03.500 zotd          Traceback (most recent call last):",
        "2026-11-30 10:00:04.000 gamma-longer  [zotd] an old-style note",
        # After the last note: when the log was last written to; escaped.
        "2026-11-30 10:00:05.000 alpha         alpha: ready \\x1b[31mred",
    ]
    # -n: the last N of them all; --since: from that time on, in every log.
    assert [line[24:36] for line in lines_of(logs(cli, "--all", "-n", "3"))] == [
        "zotd        ",
        "gamma-longer",
        "alpha       ",
    ]
    since = lines_of(logs(cli, "--all", "--since", "2026-11-30T10:00:02"))
    assert [line[:23] for line in since] == [
        "2026-11-30 10:00:02.250",
        "2026-11-30 10:00:02.250",
        "2026-11-30 10:00:03.500",
        "2026-11-30 10:00:03.500",
        "2026-11-30 10:00:04.000",
        "2026-11-30 10:00:05.000",
    ]


def test_all_json_is_one_object_per_line_with_its_time(cli: Cli) -> None:
    logs_dir = write_all(cli)
    res = logs(cli, "--all", "--json", "-n", "4")
    assert [json.loads(line) for line in lines_of(res)] == [
        {
            "extension": None,
            "path": str(logs_dir / "zotd.log"),
            "time": iso_text(local("2026-11-30 10:00:03.500")),
            "line": "2026-11-30 10:00:03,500 WARNING zotd.runtime.extension: extension beta: slow",
        },
        {
            "extension": None,
            "path": str(logs_dir / "zotd.log"),
            "time": iso_text(local("2026-11-30 10:00:03.500")),
            "line": "Traceback (most recent call last):",
        },
        {
            "extension": "gamma-longer",
            "path": str(logs_dir / "ext-gamma-longer.log"),
            "time": iso_text(local("2026-11-30 10:00:04")),
            "line": "[zotd 2026-11-30 10:00:04] an old-style note",
        },
        {
            "extension": "alpha",
            "path": str(logs_dir / "ext-alpha.log"),
            "time": iso_text(local("2026-11-30 10:00:05")),
            "line": "alpha: ready \x1b[31mred",
        },
    ]
    first = json.loads(lines_of(logs(cli, "--all", "--json"))[0])
    assert first == {
        "extension": "alpha",
        "path": str(logs_dir / "ext-alpha.log.1"),
        "time": iso_text(local("2026-11-30 09:59:59")),
        "line": "[zotd 2026-11-30 09:59:59.000] started pid 1: ./alpha",
    }


def test_all_without_logs_says_so(cli: Cli) -> None:
    assert outcome(logs(cli, "--all")) == (0, "", f"no logs yet in {cli.home / 'logs'}\n")


def test_follow_all_picks_up_new_lines_and_new_logs(cli: Cli) -> None:
    logs_dir = write_all(cli)
    proc = cli.popen(
        [str(ZOT), "ext", "logs", "--all", "-f", "-n", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert read_line(proc.stdout).endswith("alpha         alpha: ready \\x1b[31mred")
    with (logs_dir / "ext-beta.log").open("a") as f:
        f.write("beta: a line written while followed\n")
    assert read_line(proc.stdout).endswith("beta          beta: a line written while followed")
    # A log that appears meanwhile is followed from its first line on.
    (logs_dir / "ext-delta.log").write_text(
        "[zotd 2026-11-30 12:00:00.000] started pid 4: ./delta\ndelta: here\n"
    )
    assert (
        read_line(proc.stdout)
        == "2026-11-30 12:00:00.000 delta         [zotd] started pid 4: ./delta"
    )
    assert read_line(proc.stdout).endswith(" delta         delta: here")
    # A rotation while followed loses nothing that was written before it.
    alpha = logs_dir / "ext-alpha.log"
    with alpha.open("a") as f:
        f.write("alpha: just before the rotation\n")
    logfiles.rotate_if_big(alpha, 10)
    with alpha.open("a") as f:
        f.write("alpha: just after it\n")
    got = [read_line(proc.stdout), read_line(proc.stdout)]
    assert [line.split("  ", 1)[1].strip() for line in got] == [
        "alpha: just before the rotation",
        "alpha: just after it",
    ]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=WAIT) == 0
    assert proc.stdout.read() == b""  # nothing repeated
    assert proc.stderr is not None and proc.stderr.read() == b""
