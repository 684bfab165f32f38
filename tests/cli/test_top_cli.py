"""The ``zot top`` command in a terminal (a pseudo-terminal), and the one
line it says instead of a screen when it cannot show one: no terminal, no
Textual, no daemon, ``--json``. (The screen itself: tests/cli/test_top.py.)"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

from tests.cli import test_cli
from tests.cli.test_cli import RUN_TIMEOUT, WAIT, ZOT, Cli
from tests.cli.test_top import fx

cli = test_cli.cli  # the fixture, as this module's own


def in_terminal(cli: Cli, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """``zot ARGS`` with a 120x30 pseudo-terminal as stdin, stdout and stderr."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    env = {**cli.env, "TERM": "xterm-256color"}
    try:
        proc = subprocess.Popen(
            [str(ZOT), *args], cwd=cli.project, env=env, stdin=slave, stdout=slave, stderr=slave
        )
    finally:
        os.close(slave)
    cli.procs.append(proc)
    cli.pids.add(proc.pid)
    return proc, master


def read_until(master: int, proc: subprocess.Popen[bytes], want: bytes) -> bytes:
    """The terminal's output until it holds ``want`` (or the program ends)."""
    buf = b""
    deadline = time.monotonic() + WAIT
    while want not in buf:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {want!r} within {WAIT} s; got {buf[-2000:]!r}")
        if select.select([master], [], [], 0.1)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side closed
                break
            if not data:
                break
            buf += data
        elif proc.poll() is not None:
            break
    return buf


def drain(master: int, proc: subprocess.Popen[bytes]) -> int:
    """Reads the terminal until the program exits; returns its exit code."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("it did not exit")
        if select.select([master], [], [], 0.1)[0]:
            try:
                os.read(master, 65536)
            except OSError:
                break
    return proc.wait(timeout=RUN_TIMEOUT)


def test_the_command_in_a_terminal(cli: Cli) -> None:
    cli.start("-e", str(fx(cli)))
    proc, master = in_terminal(cli, "top")
    try:
        out = read_until(master, proc, f"zot top: {cli.project}".encode())
        assert b"Traceback" not in out
        os.write(master, b"q")
        assert drain(master, proc) == 0
        proc2, master2 = in_terminal(cli, "top")
        try:
            read_until(master2, proc2, f"zot top: {cli.project}".encode())
            os.write(master2, b"\x03")  # Ctrl+C
            assert drain(master2, proc2) == 130
        finally:
            os.close(master2)
    finally:
        os.close(master)


def test_the_command_without_a_daemon(cli: Cli) -> None:
    proc, master = in_terminal(cli, "top", "--no-start")
    try:
        out = read_until(master, proc, b"zotd start`")
        assert proc.wait(timeout=RUN_TIMEOUT) == 1
    finally:
        os.close(master)
    text = out.decode(errors="replace").strip()
    assert text == (
        f"zot: zotd is not running (nothing answers on {cli.socket}); start it with `zotd start`"
    )


def test_the_command_needs_a_terminal(cli: Cli) -> None:
    res = cli.zot("top")
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == "zot top: needs a terminal; `zot ext list` shows the extensions once\n"
    res = cli.zot("top", "--json")
    assert res.returncode == 2
    assert res.stderr.startswith("zot top: --json is not for a live view")


def test_the_command_without_textual(cli: Cli) -> None:
    # As if the top extra were not installed: importing textual fails.
    code = (
        "import sys; sys.modules['textual'] = None; sys.argv = ['zot', 'top'];"
        " from zotd.cli.zot_cli import main; main()"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cli.project,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (
        "zot top: needs Textual, which is not installed; install it with pip install 'zotd[top]'\n"
    )
