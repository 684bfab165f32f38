"""Text from manifests and extensions cannot drive the user's terminal: what
`zot` prints shows every control character as an escape (``\\x1b``, ``\\r``,
``\\x9b``, ``\\u202e``), while ``--json`` stays exact JSON.

A real daemon runs tests/extensions/hostile_text.py, whose manifest, command
descriptions, command output, panel, notes, tool output and stderr all carry
ESC sequences (clear screen, an OSC 52 clipboard write), BEL, backspace, a CR
that overwrites, C1 controls and bidi overrides; the real ``zot`` prints them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import test_cli
from tests.cli.test_cli import RUN_TIMEOUT, ZOT, Cli, wait_until
from tests.conftest import add_extension
from tests.extensions.hostile_text import EVIL

cli = test_cli.cli  # the fixture, as this module's own

HOSTILE = Path(__file__).parent.parent / "extensions" / "hostile_text.py"
ZOTD = (sys.executable, "-m", "zotd")

#: Bytes no printed text may contain: C0 controls but newline and tab, DEL,
#: C1 controls (UTF-8 encoded), and the bidi controls (UTF-8 encoded).
FORBIDDEN = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
)
#: How the payload's pieces read once escaped.
SHOWN = [
    b"\\x1b[2J",
    b"\\x1b]52;c;SGVsbG8=\\x07",
    b"back\\x08",
    b"cr\\rOVER",
    b"c1\\x9b31m\\x85",
    b"bidi\\u202egnp.exe\\u2066x\\u2069\\u202a end",
]


def run_raw(cli: Cli, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``zot ARGS``, its output as the raw bytes a terminal would get."""
    return subprocess.run(
        [str(ZOT), *args],
        cwd=cli.project,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def assert_escaped(data: bytes, times: int = 1) -> None:
    bad = FORBIDDEN.search(data)
    assert bad is None, f"raw {bad[0]!r} reached the terminal in {data!r}"
    for piece in SHOWN:
        assert data.count(piece) >= times, (piece, data)


@pytest.fixture
def hostile(cli: Cli) -> Cli:
    """A daemon running ``hostile`` (global), whose manifest carries the payload
    in its description and in a misspelt key (a warning in the list)."""
    add_extension(
        cli.home / "extensions",
        "hostile",
        manifest={
            "version": f"1.0 {EVIL}",
            "description": f"about {EVIL}",
            f"descripton {EVIL}": 1,
        },
        script=HOSTILE,
    )
    return cli


def test_ext_list_shows_manifest_text_escaped(hostile: Cli) -> None:
    offline = run_raw(hostile, "ext", "list")
    assert offline.returncode == 0, offline
    assert_escaped(offline.stderr)  # the warning about the misspelt key
    hostile.start()
    wait_until(
        lambda: hostile.extensions()["hostile"].state == "ready", test_cli.WAIT, "hostile ready"
    )
    res = run_raw(hostile, "ext", "list")
    assert res.returncode == 0, res
    assert b"hostile" in res.stdout
    assert_escaped(res.stderr)
    assert FORBIDDEN.search(res.stdout) is None


def test_json_stays_exact(hostile: Cli) -> None:
    hostile.start()
    wait_until(
        lambda: hostile.extensions()["hostile"].state == "ready", test_cli.WAIT, "hostile ready"
    )
    res = run_raw(hostile, "ext", "list", "--json")
    assert res.returncode == 0, res
    assert FORBIDDEN.search(res.stdout) is None  # all \u escapes, C1 and bidi too
    [info] = json.loads(res.stdout)
    assert info["description"] == f"about {EVIL}"
    assert info["version"] == f"1.0 {EVIL}"
    commands = json.loads(run_raw(hostile, "commands", "--json").stdout)
    assert {c["description"] for c in commands} >= {f"boom {EVIL}"}
    shown = json.loads(run_raw(hostile, "run", "/boom", "--json").stdout)
    assert shown["display"] == f"first line {EVIL}\nsecond\tline {EVIL}"


def test_commands_tools_run_call_and_logs_show_escapes(hostile: Cli) -> None:
    hostile.start()
    wait_until(
        lambda: hostile.extensions()["hostile"].state == "ready", test_cli.WAIT, "hostile ready"
    )
    listed = run_raw(hostile, "commands")
    assert listed.returncode == 0, listed
    assert_escaped(listed.stdout, times=4)  # boom, board, say, oops
    tools = run_raw(hostile, "tools")
    assert tools.returncode == 0, tools
    assert_escaped(tools.stdout)

    boom = run_raw(hostile, "run", "/boom")
    assert boom.returncode == 0, boom
    assert_escaped(boom.stdout, times=2)  # both lines of the display...
    assert b"first line " in boom.stdout and b"\nsecond\tline " in boom.stdout  # ...kept apart
    assert_escaped(boom.stderr)  # the note
    board = run_raw(hostile, "run", "/board")
    assert board.returncode == 0, board
    assert_escaped(board.stdout, times=3)  # title, row, footer
    say = run_raw(hostile, "run", "/say")
    assert_escaped(say.stdout)
    oops = run_raw(hostile, "run", "/oops")
    assert oops.returncode == 1, oops
    assert_escaped(oops.stderr)

    zap = run_raw(hostile, "call", "zap")
    assert zap.returncode == 0, zap
    assert_escaped(zap.stdout)

    logs = run_raw(hostile, "ext", "logs", "hostile")
    assert logs.returncode == 0, logs
    assert b"stderr says " in logs.stdout
    assert_escaped(logs.stdout)


def test_zotd_status_shows_a_workspace_path_escaped(cli: Cli) -> None:
    # A workspace is a directory an agent names; a cloned repository's may be
    # named to drive a terminal.
    evil = cli.tmp / "proj\x1b[2J\x1b]52;c;SGVsbG8=\x07\u202e"
    evil.mkdir()
    cli.start()
    cli.project = evil
    joined = run_raw(cli, "tools")
    assert joined.returncode == 0, joined
    status = subprocess.run(
        [*ZOTD, "status"], env=cli.env, capture_output=True, timeout=RUN_TIMEOUT, check=False
    )
    assert status.returncode == 0, status
    bad = FORBIDDEN.search(status.stdout)
    assert bad is None, f"raw {bad[0]!r} reached the terminal in {status.stdout!r}"
    assert b"proj\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07\\u202e: " in status.stdout, status.stdout
