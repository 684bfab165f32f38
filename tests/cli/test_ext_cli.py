"""``zot ext ...`` as a user runs it: real processes, with and without a daemon.

Every command runs with ``ZOT_HOME``, ``ZOTD_SOCKET`` and ``ZOTD_CONFIG``
under a temporary directory (the :class:`~tests.cli.test_cli.Cli` helper). A
daemon is started with ``zotd start`` where a test needs one, and stopped (or
killed by pid) by the ``cli`` fixture, with every extension it ran.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.cli.test_cli import RUN_TIMEOUT, WAIT, ZOT, Cli, read_line, wait_until
from tests.conftest import add_extension, pid_alive
from zotd.client import connect
from zotd.protocol.extension import TextBlock

#: What every change made without a daemon says.
OFFLINE = "zotd is not running; this applies when it next starts"
#: What ``zot ext list`` adds (on stderr) without a daemon.
LIST_OFFLINE = "(zotd is not running; these start when it next starts)\n"
EMPTY = "no extensions installed; install one with `zot ext install <path|git-url>`\n"
HEADER = [
    "NAME", "VERSION", "SCOPE", "ENABLED", "STATE", "PID", "UPTIME", "RESTARTS", "PROVIDES", "DIR",
]  # fmt: skip
#: What the extensions made by :func:`source` provide, as the CLI writes it.
PROVIDES = "/hi, forecast"

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    # As a user runs them: Python's output to a pipe is buffered.
    c.env.pop("PYTHONUNBUFFERED", None)
    try:
        yield c
    finally:
        c.cleanup()


# --- helpers ---------------------------------------------------------------------------


def ext(cli: Cli, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``zot ext ARGS``, in the project (or ``cwd``), without a terminal."""
    return subprocess.run(
        [str(ZOT), "ext", *args],
        cwd=cwd or cli.project,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, res
    assert "Traceback" not in res.stderr, res.stderr
    return res


def outcome(res: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return res.returncode, res.stdout, res.stderr


def source(
    root: Path,
    name: str = "wx",
    commands: str = "hi",
    tools: str = "forecast",
    manifest: dict[str, Any] | None = None,
) -> Path:
    """An extension directory ``root/name``: fake.py, with /hi and the tool forecast
    unless told otherwise (its own copy of fake.py: installed with ``--project``,
    it may run only what is in its directory)."""
    return add_extension(
        root,
        name,
        "--commands",
        commands,
        "--tools",
        tools,
        manifest={"version": "1.2.3", **(manifest or {})},
        self_contained=True,
    )


def infos(cli: Cli) -> dict[str, dict[str, Any]]:
    """``zot ext list --json`` by name; remembers the pids for the cleanup."""
    res = ok(ext(cli, "list", "--json"))
    found = {i["name"]: i for i in json.loads(res.stdout)}
    cli.pids.update(i["pid"] for i in found.values() if i["pid"] is not None)
    return found


def rows(text: str) -> list[dict[str, str]]:
    """The rows of an aligned table, cut where the header's columns begin.

    Checks the alignment on the way: every cell starts in its column, after
    at least two spaces (a value that overflowed its column would fail this).
    """
    lines = text.splitlines()
    assert lines[0].split() == HEADER, lines[0]
    starts = [lines[0].index(h) for h in HEADER]
    out = []
    for line in lines[1:]:
        cells = {}
        for i, (h, start) in enumerate(zip(HEADER, starts, strict=True)):
            end = starts[i + 1] if i + 1 < len(starts) else len(line)
            assert start == 0 or line[start - 2 : start] == "  ", (h, line)
            cell = line[start:end]
            assert cell.strip() and not cell[0].isspace(), (h, line)
            cells[h] = cell.strip()
        out.append(cells)
    return out


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=zot tests", "-c", "user.email=zt@example.com", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        check=True,
        timeout=RUN_TIMEOUT,
    )


def bare_repo(tmp: Path, name: str = "gx") -> Path:
    """A bare git repository holding one commit of an extension ``name``."""
    work = source(tmp / "work", name)
    git("-c", "init.defaultBranch=main", "init", "-q", ".", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "an extension", cwd=work)
    bare = tmp / "repos" / f"{name}.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp)
    return bare


def entries(directory: Path) -> list[str]:
    """What a directory holds, hidden names included ([] if it does not exist)."""
    return sorted(os.listdir(directory)) if directory.exists() else []


def read_until(fd: int, text: str, timeout: float = WAIT) -> str:
    """Reads a terminal (or pipe) until ``text`` has appeared; returns all read."""
    buf = ""
    deadline = time.monotonic() + timeout
    while text not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no {text!r} within {timeout} s (got {buf!r})")
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's other side is closed
            data = b""
        if not data:
            raise AssertionError(f"end of output before {text!r} (got {buf!r})")
        buf += data.decode(errors="replace").replace("\r\n", "\n")
    return buf


def read_rest(fd: int, timeout: float = WAIT) -> str:
    """Reads a terminal until its other side is closed."""
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"terminal still open after {timeout} s (got {buf!r})")
        try:
            data = os.read(fd, 4096)
        except OSError:
            return buf.decode(errors="replace").replace("\r\n", "\n")
        if not data:
            return buf.decode(errors="replace").replace("\r\n", "\n")
        buf += data


def in_terminal(cli: Cli, argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """Starts ``argv`` with a pseudo-terminal as stdin, stdout and stderr."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            argv, cwd=cli.project, env=cli.env, stdin=slave, stdout=slave, stderr=slave
        )
    finally:
        os.close(slave)
    cli.pids.add(proc.pid)
    return proc, master


def table_line(*cells: str, widths: list[int]) -> str:
    """A row as ``zot ext list`` aligns it: every column but the last padded."""
    assert len(cells) == len(widths) + 1
    return "  ".join([c.ljust(w) for c, w in zip(cells, widths, strict=False)] + [cells[-1]])


# --- list ------------------------------------------------------------------------------


def test_list_with_nothing_installed(cli: Cli) -> None:
    assert outcome(ext(cli, "list")) == (0, EMPTY, "")
    assert outcome(ext(cli, "list", "--json")) == (0, "[]\n", "")
    cli.start()
    assert outcome(ext(cli, "list")) == (0, EMPTY, "")
    assert outcome(ext(cli, "list", "--json")) == (0, "[]\n", "")


def test_list_without_a_daemon(cli: Cli) -> None:
    wx = source(cli.home / "extensions")
    pj = source(cli.project / ".zot" / "extensions", "pj", manifest={"enabled": False})
    bad = cli.home / "extensions" / "bad"
    bad.mkdir()
    (bad / "extension.json").write_text('{"name": "bad", "exec": "./nope"}')

    res = ext(cli, "list")
    assert res.returncode == 0, res
    widths = [4, 7, 7, 7, 8, 3, 6, 8, 8]
    header = table_line(*HEADER, widths=widths)
    row = partial(table_line, widths=widths)
    # By name, as with a daemon.
    assert res.stdout.splitlines() == [
        header,
        row("bad", "-", "global", "yes", "failed", "-", "-", "0", "-", str(bad)),
        row("pj", "1.2.3", "project", "no", "disabled", "-", "-", "0", "-", str(pj)),
        row("wx", "1.2.3", "global", "yes", "stopped", "-", "-", "0", "-", str(wx)),
    ]
    # What keeps each one from running, and what to type, on stderr; then
    # that nothing runs.
    assert res.stderr == (
        f"bad cannot start (exec './nope' not found: no file {bad}/nope); "
        "fix it, then run `zot ext reload bad`\n"
        "pj is disabled; run `zot ext enable pj`\n" + LIST_OFFLINE
    )

    data = json.loads(ok(ext(cli, "list", "--json")).stdout)
    assert [(i["name"], i["scope"], i["enabled"], i["state"], i["pid"]) for i in data] == [
        ("bad", "global", True, "failed", None),
        ("pj", "project", False, "disabled", None),
        ("wx", "global", True, "stopped", None),
    ]
    assert data[2]["dir"] == str(wx) and data[2]["version"] == "1.2.3"
    assert data[0]["last_error"] == f"exec './nope' not found: no file {bad}/nope"


def test_list_with_a_daemon(cli: Cli) -> None:
    explicit = source(cli.tmp / "exts", "ex", commands="go", tools="")
    wx = source(cli.home / "extensions")
    bad = cli.home / "extensions" / "bad"
    bad.mkdir()
    (bad / "extension.json").write_text('{"name": "bad", "exec": "./nope"}')
    cli.start("-e", str(explicit))

    res = ext(cli, "list")
    assert res.returncode == 0, res
    found = infos(cli)
    table = rows(res.stdout)
    assert [r["NAME"] for r in table] == ["bad", "ex", "wx"]
    by_name = {r["NAME"]: r for r in table}
    for name, scope, directory, provides in (
        ("ex", "explicit", explicit, "/go"),
        ("wx", "global", wx, PROVIDES),
    ):
        pid = found[name]["pid"]
        assert isinstance(pid, int) and pid_alive(pid)
        # Seconds since it started, as people read them (how many: the machine's pace).
        assert re.fullmatch(r"\d+ s|\d+ min", by_name[name].pop("UPTIME"))
        assert by_name[name] == {
            "NAME": name,
            "VERSION": "1.2.3",
            "SCOPE": scope,
            "ENABLED": "yes",
            "STATE": "ready",
            "PID": str(pid),
            "RESTARTS": "0",
            "PROVIDES": provides,
            "DIR": str(directory),
        }
    assert by_name["bad"]["STATE"] == "failed"
    assert by_name["bad"]["PID"] == "-"
    # The error is on stderr, and nothing says the daemon is not running.
    assert res.stderr == (
        f"bad cannot start (exec './nope' not found: no file {bad}/nope); "
        "fix it, then run `zot ext reload bad`\n"
        f"(this is {cli.project}'s workspace; each workspace runs its own copy of every "
        "extension it sees: 1 workspace(s), 2 extension process(es) in all)\n"
    )

    assert found["ex"]["scope"] == "explicit"
    assert (found["ex"]["commands"], found["ex"]["tools"]) == (["go"], [])
    assert found["ex"]["state"] == "ready" and found["ex"]["enabled"] is True
    assert found["bad"]["last_error"] == f"exec './nope' not found: no file {bad}/nope"


# --- install -----------------------------------------------------------------------------


def test_install_without_a_daemon(cli: Cli) -> None:
    src = source(cli.tmp / "src")
    dest = cli.home / "extensions" / "wx"
    res = ext(cli, "install", str(src))
    assert outcome(res) == (0, f"installed wx (global) in {dest}; {OFFLINE}\n", "")
    assert json.loads((dest / "extension.json").read_text()) == json.loads(
        (src / "extension.json").read_text()
    )
    assert src.is_dir()  # copied, not moved
    assert entries(cli.home / "extensions") == ["wx"]  # no staging left behind

    # It runs once the daemon starts.
    cli.start()
    assert ok(cli.zot("commands")).stdout == "/hi  the hi command  (wx)\n"
    assert infos(cli)["wx"]["state"] == "ready"


def test_install_with_a_daemon_starts_it_at_once(cli: Cli) -> None:
    cli.start()
    source(cli.tmp / "src")
    dest = cli.home / "extensions" / "wx"
    # A relative path is relative to where zot runs, not to the daemon.
    res = ext(cli, "install", "src/wx", cwd=cli.tmp)
    assert outcome(res) == (0, f"installed wx (global) in {dest}: ready; provides {PROVIDES}\n", "")
    assert ok(cli.zot("commands")).stdout == "/hi  the hi command  (wx)\n"
    assert ok(cli.zot("call", "forecast", '{"city": "Oslo"}')).stdout == '{"city": "Oslo"}\n'
    info = infos(cli)["wx"]
    assert (info["state"], info["scope"], info["dir"]) == ("ready", "global", str(dest))

    other = source(cli.tmp / "src2", "wy", commands="yo", tools="")
    res = ext(cli, "install", str(other), "--json")
    assert res.returncode == 0, res
    data = json.loads(res.stdout)
    assert (data["name"], data["scope"], data["dir"]) == ("wy", "global", str(dest.parent / "wy"))
    assert data["extension"]["state"] == "ready"


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_install_into_the_project(cli: Cli, running: bool) -> None:
    if running:
        cli.start()
    src = source(cli.tmp / "src")
    dest = cli.project / ".zot" / "extensions" / "wx"
    res = ext(cli, "install", str(src), "--project")
    state = f": ready; provides {PROVIDES}" if running else f"; {OFFLINE}"
    assert outcome(res) == (0, f"installed wx (project) in {dest}{state}\n", "")
    assert (dest / "extension.json").is_file()
    assert entries(cli.home / "extensions") == []
    if not running:
        cli.start()
    info = infos(cli)["wx"]
    assert (info["scope"], info["state"], info["dir"]) == ("project", "ready", str(dest))


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
@pytest.mark.parametrize("how", ["bare-path", "file-url"])
def test_install_from_git(cli: Cli, running: bool, how: str) -> None:
    repo = bare_repo(cli.tmp)
    if running:
        cli.start()
    src = str(repo) if how == "bare-path" else repo.as_uri()
    dest = cli.home / "extensions" / "gx"
    res = ext(cli, "install", src)
    state = f": ready; provides {PROVIDES}" if running else f"; {OFFLINE}"
    assert outcome(res) == (0, f"installed gx (global) in {dest}{state}\n", "")
    assert (dest / "extension.json").is_file()
    assert entries(cli.home / "extensions") == ["gx"]
    # A shallow clone: one commit.
    shallow = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"],
        cwd=dest,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
        timeout=RUN_TIMEOUT,
    )
    assert shallow.stdout.strip() == "1"
    if running:
        assert ok(cli.zot("commands")).stdout == "/hi  the hi command  (gx)\n"


def test_install_from_a_relative_bare_repository_without_a_daemon(cli: Cli) -> None:
    bare_repo(cli.tmp)
    res = ext(cli, "install", "repos/gx.git", cwd=cli.tmp)
    dest = cli.home / "extensions" / "gx"
    assert outcome(res) == (0, f"installed gx (global) in {dest}; {OFFLINE}\n", "")


def test_install_from_a_relative_bare_repository_with_a_daemon(cli: Cli) -> None:
    bare_repo(cli.tmp)
    cli.start()
    res = ext(cli, "install", "repos/gx.git", cwd=cli.tmp)  # the daemon runs in cli.project
    assert res.returncode == 0, res
    assert (cli.home / "extensions" / "gx" / "extension.json").is_file()


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_install_rolls_back_a_directory_without_a_manifest(cli: Cli, running: bool) -> None:
    if running:
        cli.start()
    src = cli.tmp / "src" / "empty"
    src.mkdir(parents=True)
    (src / "main.py").write_text("print('hi')\n")
    res = ext(cli, "install", str(src))
    assert res.returncode == 1, res
    assert res.stdout == ""
    assert res.stderr.startswith(f"zot: {src} is not a zot extension: it has no extension.json")
    assert entries(cli.home / "extensions") == []

    res = ext(cli, "install", str(cli.tmp / "no-such-dir"))
    assert outcome(res) == (
        1,
        "",
        f"zot: {cli.tmp}/no-such-dir: no such directory (nor a git URL)\n",
    )
    assert entries(cli.home / "extensions") == []
    # Nothing was installed, so nothing runs.
    assert outcome(ext(cli, "list")) == (0, EMPTY, "")


def test_install_without_a_manifest_names_the_source(cli: Cli) -> None:
    src = cli.tmp / "src"
    src.mkdir()
    res = ext(cli, "install", str(src))
    assert res.returncode == 1
    assert ".install-" not in res.stderr, res.stderr


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_failing_clone_rolls_back(cli: Cli, running: bool) -> None:
    if running:
        cli.start()
    url = (cli.tmp / "no-such-repo.git").as_uri()
    res = ext(cli, "install", url)
    assert res.returncode == 1, res
    assert res.stdout == ""
    assert res.stderr.startswith(f"zot: git clone {url} failed: "), res.stderr
    assert entries(cli.home / "extensions") == []
    res = ext(cli, "install", url, "--project")
    assert res.returncode == 1, res
    assert entries(cli.project / ".zot" / "extensions") == []


def test_failing_clone_says_why(cli: Cli) -> None:
    url = (cli.tmp / "no-such-repo.git").as_uri()
    res = ext(cli, "install", url)
    assert res.returncode == 1
    assert "does not appear to be a git repository" in res.stderr, res.stderr


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_install_refuses_to_overwrite(cli: Cli, running: bool) -> None:
    src = source(cli.tmp / "src")
    ok(ext(cli, "install", str(src)))
    dest = cli.home / "extensions" / "wx"
    (dest / "mine.txt").write_text("local change\n")
    if running:
        cli.start()
        pid = infos(cli)["wx"]["pid"]
    res = ext(cli, "install", str(src))
    assert outcome(res) == (
        1,
        "",
        f"zot: an extension named 'wx' is already installed in {dest}; "
        "remove it first with `zot ext remove wx`\n",
    )
    assert (dest / "mine.txt").read_text() == "local change\n"
    assert entries(cli.home / "extensions") == ["wx"]
    if running:
        assert infos(cli)["wx"]["pid"] == pid  # not restarted either


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_install_refuses_a_name_leading_out(cli: Cli, running: bool) -> None:
    if running:
        cli.start()
    src = cli.tmp / "src" / "evil"
    src.mkdir(parents=True)
    (src / "extension.json").write_text(json.dumps({"name": "../x", "exec": sys.executable}))
    res = ext(cli, "install", str(src))
    assert res.returncode == 1, res
    assert res.stdout == ""
    assert res.stderr.startswith(f"zot: {src} is not a zot extension: invalid name '../x'")
    assert entries(cli.home / "extensions") == []
    assert not (cli.home / "x").exists()
    assert sorted(p.name for p in cli.home.iterdir()) == (
        ["extensions", "logs"] if running else ["extensions"]
    )


def test_install_usage_errors(cli: Cli) -> None:
    res = ext(cli, "install")
    assert res.returncode == 2, res
    res = ext(cli, "install", "a", "b")
    assert res.returncode == 2, res
    res = ext(cli, "no-such-command")
    assert res.returncode == 2, res


async def test_a_connected_agent_sees_an_installed_tool_without_reconnecting(cli: Cli) -> None:
    src = source(cli.tmp / "src")
    await trio.to_thread.run_sync(cli.start)
    with trio.fail_after(RUN_TIMEOUT):
        async with connect(cli.socket, cwd=cli.project, client="agent") as agent:
            assert await agent.list_tools() == []
            res = await trio.to_thread.run_sync(ext, cli, "install", str(src))
            assert res.returncode == 0, res
            assert [t.name for t in await agent.list_tools()] == ["forecast"]
            assert [c.name for c in await agent.list_commands()] == ["hi"]
            result = await agent.call_tool("forecast", {"city": "Oslo"})
            assert result.content == [TextBlock('{"city": "Oslo"}')]
            cli.pids.update(e.pid for e in await agent.list_extensions() if e.pid is not None)

            res = await trio.to_thread.run_sync(ext, cli, "remove", "wx", "--yes")
            assert res.returncode == 0, res
            assert await agent.list_tools() == []


# --- remove ------------------------------------------------------------------------------


def test_remove_without_a_daemon(cli: Cli) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    dest = cli.home / "extensions" / "wx"
    res = ext(cli, "remove", "wx", "--yes")
    assert outcome(res) == (0, f"removed wx ({dest}); {OFFLINE}\n", "")
    assert entries(cli.home / "extensions") == []
    assert outcome(ext(cli, "list")) == (0, EMPTY, "")

    # A project one too.
    ok(ext(cli, "install", str(cli.tmp / "src" / "wx"), "--project"))
    dest = cli.project / ".zot" / "extensions" / "wx"
    res = ext(cli, "remove", "wx", "--yes")
    assert outcome(res) == (0, f"removed wx ({dest}); {OFFLINE}\n", "")
    assert entries(dest.parent) == []


def test_remove_with_a_daemon_stops_it_first(cli: Cli) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    cli.start()
    pid = infos(cli)["wx"]["pid"]
    assert pid_alive(pid)
    dest = cli.home / "extensions" / "wx"
    res = ext(cli, "remove", "wx", "--yes")
    assert outcome(res) == (0, f"removed wx ({dest})\n", "")
    assert not pid_alive(pid)
    assert not dest.exists()
    assert ok(cli.zot("commands")).stdout == "no commands (no extension registered one)\n"
    assert outcome(ext(cli, "list")) == (0, EMPTY, "")
    log = (cli.home / "logs" / "ext-wx.log").read_text()
    assert "exited with code 0" in log  # a graceful stop, not a kill


def test_removing_a_project_one_reveals_the_global_one(cli: Cli) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    ok(ext(cli, "install", str(source(cli.tmp / "src2")), "--project"))
    cli.start()
    assert infos(cli)["wx"]["scope"] == "project"
    project_dir = cli.project / ".zot" / "extensions" / "wx"
    res = ext(cli, "remove", "wx", "--yes")
    assert outcome(res) == (
        0,
        f"removed wx ({project_dir})\nwx is now the global one: ready; provides {PROVIDES}\n",
        "",
    )
    info = infos(cli)["wx"]
    assert (info["scope"], info["state"]) == ("global", "ready")


def test_an_explicit_extension_is_not_removed(cli: Cli) -> None:
    explicit = source(cli.tmp / "exts", "ex")
    cli.start("-e", str(explicit))
    res = ext(cli, "remove", "ex", "--yes")
    assert outcome(res) == (
        1,
        "",
        f"zot: 'ex' was loaded with --ext from {explicit}; zotd leaves that directory "
        "alone (it is not installed). Restart zotd without that --ext to drop it\n",
    )
    assert (explicit / "extension.json").is_file()


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_remove_without_yes_and_without_a_terminal(cli: Cli, running: bool) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    if running:
        cli.start()
    res = ext(cli, "remove", "wx")
    assert outcome(res) == (
        2,
        "",
        "zot: not removing wx without confirmation, and there is no terminal to ask; pass --yes\n",
    )
    assert (cli.home / "extensions" / "wx" / "extension.json").is_file()
    if running:
        assert infos(cli)["wx"]["state"] == "ready"


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
@pytest.mark.parametrize("answer", ["y", "n"])
def test_remove_asks_in_a_terminal(cli: Cli, running: bool, answer: str) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    dest = cli.home / "extensions" / "wx"
    if running:
        cli.start()
        pid = infos(cli)["wx"]["pid"]
    proc, master = in_terminal(cli, [str(ZOT), "ext", "remove", "wx"])
    try:
        shown = read_until(master, "[y/N] ")
        assert shown == f"Remove extension wx ({dest})? [y/N] "
        os.write(master, f"{answer}\n".encode())
        rest = read_rest(master)
        code = proc.wait(timeout=RUN_TIMEOUT)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=RUN_TIMEOUT)
    lines = rest.splitlines()
    assert lines[0] == answer  # the terminal's echo of what was typed
    if answer == "y":
        note = "" if running else f"; {OFFLINE}"
        assert (code, lines[1:]) == (0, [f"removed wx ({dest}){note}"])
        assert not dest.exists()
        if running:
            assert not pid_alive(pid)
    else:
        assert (code, lines[1:]) == (1, ["zot: not removed"])
        assert (dest / "extension.json").is_file()
        if running:
            assert infos(cli)["wx"]["pid"] == pid


#: The number of read(2) by machine, for :func:`reading_stdin`.
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}


def reading_stdin(pid: int) -> bool:
    """Whether process ``pid`` waits in read(2) on its stdin (True where that
    cannot be told: then there is nothing to wait for)."""
    number = READ_SYSCALL.get(os.uname().machine)
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return True
    if number is None or not fields or fields[0] == "running":
        return number is None
    return fields[0] == str(number) and int(fields[1], 16) == 0


def answer_in_terminal(cli: Cli, keys: bytes | None) -> tuple[int, str]:
    """``zot ext remove wx`` in a terminal; types ``keys`` at the prompt (else Ctrl+C)."""
    proc, master = in_terminal(cli, [str(ZOT), "ext", "remove", "wx"])
    try:
        shown = read_until(master, "[y/N] ")
        if keys is None:
            # A signal between the prompt and the read would only set Python's
            # flag, and the read would then wait for a key: send it once the
            # process waits in its read.
            wait_until(lambda: reading_stdin(proc.pid), WAIT, "zot to read its stdin")
            proc.send_signal(signal.SIGINT)
        else:
            os.write(master, keys)
        rest = read_rest(master)
        return proc.wait(timeout=RUN_TIMEOUT), shown + rest
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=RUN_TIMEOUT)


def test_remove_interrupted_at_the_prompt(cli: Cli) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    code, shown = answer_in_terminal(cli, None)
    assert code == 130
    assert "Traceback" not in shown, shown
    assert (cli.home / "extensions" / "wx" / "extension.json").is_file()


def test_remove_with_end_of_input_at_the_prompt_keeps_it(cli: Cli) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src"))))
    code, shown = answer_in_terminal(cli, b"\x04")  # Ctrl+D
    assert (cli.home / "extensions" / "wx" / "extension.json").is_file()
    assert "Traceback" not in shown, shown
    assert code == 1
    assert shown.endswith("zot: not removed\n"), shown


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_unknown_names_list_the_installed_ones(cli: Cli, running: bool) -> None:
    ok(ext(cli, "install", str(source(cli.tmp / "src", "wy", commands="yo", tools=""))))
    ok(ext(cli, "install", str(source(cli.tmp / "src", "wx"))))
    if running:
        cli.start()
    error = "zot: no extension named 'nope' (installed: wx, wy)\n"
    for argv in (
        ["remove", "nope", "--yes"],
        ["remove", "nope"],
        ["enable", "nope"],
        ["disable", "nope"],
        ["logs", "nope"],
    ):
        assert outcome(ext(cli, *argv)) == (1, "", error), argv
    if running:
        assert outcome(ext(cli, "reload", "nope")) == (1, "", error)
    assert entries(cli.home / "extensions") == ["wx", "wy"]


def test_unknown_name_when_nothing_is_installed(cli: Cli) -> None:
    res = ext(cli, "remove", "nope", "--yes")
    assert outcome(res) == (1, "", "zot: no extension named 'nope' (installed: none)\n")


# --- enable, disable --------------------------------------------------------------------------


EXTRA: dict[str, Any] = {
    "description": "the weather",
    "language": "python",
    "enabled": True,
    "x-extra": [1, {"a": 2}],
}


def manifest_of(directory: Path) -> list[tuple[str, Any]]:
    return list(json.loads((directory / "extension.json").read_text()).items())


def test_enable_and_disable_without_a_daemon(cli: Cli) -> None:
    directory = source(cli.home / "extensions", "wx", manifest=EXTRA)
    before = manifest_of(directory)
    res = ext(cli, "disable", "wx")
    assert outcome(res) == (0, f"disabled wx; {OFFLINE}\n", "")
    after = manifest_of(directory)
    assert [k for k, _ in after] == [k for k, _ in before]
    assert dict(after) == {**dict(before), "enabled": False}
    assert rows(ext(cli, "list").stdout)[0]["STATE"] == "disabled"
    assert rows(ext(cli, "list").stdout)[0]["ENABLED"] == "no"

    # A disabled one does not start with the daemon.
    cli.start()
    assert ok(cli.zot("commands")).stdout == "no commands (no extension registered one)\n"
    assert ok(cli.zotd("stop")).returncode == 0

    res = ext(cli, "enable", "wx")
    assert outcome(res) == (0, f"enabled wx; {OFFLINE}\n", "")
    assert manifest_of(directory) == before
    assert rows(ext(cli, "list").stdout)[0]["STATE"] == "stopped"


def test_enable_and_disable_with_a_daemon(cli: Cli) -> None:
    directory = source(cli.home / "extensions", "wx", manifest=EXTRA)
    # No "enabled" at all: disabling adds it, at the end.
    other = source(cli.home / "extensions", "wy", commands="yo", tools="")
    cli.start()
    before = manifest_of(directory)
    pid = infos(cli)["wx"]["pid"]
    commands = ok(cli.zot("commands")).stdout
    assert commands == "/hi  the hi command  (wx)\n/yo  the yo command  (wy)\n" or commands == (
        "/yo  the yo command  (wy)\n/hi  the hi command  (wx)\n"
    )

    res = ext(cli, "disable", "wx")
    assert outcome(res) == (0, "disabled wx: stopped\n", "")
    after = manifest_of(directory)
    assert [k for k, _ in after] == [k for k, _ in before]
    assert dict(after) == {**dict(before), "enabled": False}
    assert not pid_alive(pid)
    assert ok(cli.zot("commands")).stdout == "/yo  the yo command  (wy)\n"
    assert ok(cli.zot("tools")).stdout == "no tools (no extension registered one)\n"
    info = infos(cli)["wx"]
    assert (info["enabled"], info["state"], info["pid"]) == (False, "disabled", None)
    assert info["commands"] == [] and info["tools"] == []
    row = next(r for r in rows(ext(cli, "list").stdout) if r["NAME"] == "wx")
    assert (row["ENABLED"], row["STATE"], row["PID"], row["PROVIDES"]) == (
        "no",
        "disabled",
        "-",
        "-",
    )

    res = ext(cli, "disable", "wy")
    assert outcome(res) == (0, "disabled wy: stopped\n", "")
    assert [k for k, _ in manifest_of(other)] == ["name", "version", "exec", "args", "enabled"]
    assert ok(cli.zot("commands")).stdout == "no commands (no extension registered one)\n"

    res = ext(cli, "enable", "wx")
    assert outcome(res) == (0, f"enabled wx: ready; provides {PROVIDES}\n", "")
    assert manifest_of(directory) == before
    assert ok(cli.zot("commands")).stdout == "/hi  the hi command  (wx)\n"
    info = infos(cli)["wx"]
    assert info["pid"] != pid and pid_alive(info["pid"])
    assert (info["enabled"], info["state"]) == (True, "ready")

    # Enabling what is enabled changes nothing (and restarts nothing).
    res = ext(cli, "enable", "wx")
    assert outcome(res) == (0, f"enabled wx: ready; provides {PROVIDES}\n", "")
    assert infos(cli)["wx"]["pid"] == info["pid"]


def test_disable_a_broken_manifest(cli: Cli) -> None:
    broken = cli.home / "extensions" / "broken"
    broken.mkdir(parents=True)
    (broken / "extension.json").write_text('{"name": ')
    res = ext(cli, "disable", "broken")
    assert res.returncode == 1, res
    assert res.stderr.startswith(f"zot: cannot read {broken}/extension.json: "), res.stderr
    assert (broken / "extension.json").read_text() == '{"name": '


# --- logs ------------------------------------------------------------------------------


def test_logs_without_a_daemon(cli: Cli) -> None:
    source(cli.home / "extensions")
    log = cli.home / "logs" / "ext-wx.log"
    res = ext(cli, "logs", "wx")
    assert outcome(res) == (0, "", f"no log yet for wx ({log})\n")

    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(1, 151)))
    res = ext(cli, "logs", "wx", "-n", "2")
    assert outcome(res) == (0, "line 149\nline 150\n", "")
    res = ext(cli, "logs", "wx", "--lines", "3")
    assert outcome(res) == (0, "line 148\nline 149\nline 150\n", "")
    res = ext(cli, "logs", "wx")  # the last 100 by default
    assert outcome(res) == (0, "".join(f"line {i}\n" for i in range(51, 151)), "")
    res = ext(cli, "logs", "wx", "-n", "0")
    assert outcome(res) == (0, "", "")
    res = ext(cli, "logs", "wx", "-n", "-1")
    assert outcome(res) == (2, "", "zot: --lines must be 0 or more\n")


def test_logs_with_a_daemon(cli: Cli) -> None:
    source(cli.home / "extensions")
    cli.start()
    pid = infos(cli)["wx"]["pid"]
    res = ok(ext(cli, "logs", "wx", "-n", "2"))
    lines = res.stdout.splitlines()
    assert len(lines) == 2, lines
    assert f"fake wx starting, pid {pid}" in lines
    assert any(f"started pid {pid}: " in line for line in lines), lines


def test_logs_follow(cli: Cli) -> None:
    source(cli.home / "extensions")
    log = cli.home / "logs" / "ext-wx.log"
    log.parent.mkdir(parents=True)
    log.write_text("old 1\nold 2\n")
    # stdout is a terminal, as for a user watching it.
    master, slave = os.openpty()
    try:
        proc = cli.popen(
            [str(ZOT), "ext", "logs", "wx", "-f", "-n", "1"], stdout=slave, stderr=slave
        )
    finally:
        os.close(slave)
    try:
        assert read_until(master, "\n") == "old 2\n"
        # No wait needed: it follows from where the tail it printed ended.
        with log.open("a") as f:
            f.write("new 3\n")
        assert read_until(master, "\n") == "new 3\n"
        with log.open("a") as f:
            f.write("new 4\nnew 5\n")
        assert read_until(master, "new 5\n") == "new 4\nnew 5\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=WAIT) == 0
        assert read_rest(master) == ""  # no traceback
    finally:
        os.close(master)


def test_logs_follow_through_a_pipe_shows_the_tail_at_once(cli: Cli) -> None:
    source(cli.home / "extensions")
    log = cli.home / "logs" / "ext-wx.log"
    log.parent.mkdir(parents=True)
    log.write_text("old 1\nold 2\n")
    proc = cli.popen(
        [str(ZOT), "ext", "logs", "wx", "-f", "-n", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        # While it runs: held in a buffer, the tail would come only at its exit.
        assert read_line(proc.stdout) == "old 2"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=WAIT)


def test_logs_follow_of_an_unknown_name(cli: Cli) -> None:
    source(cli.home / "extensions")
    res = ext(cli, "logs", "nope", "-f")
    assert outcome(res) == (1, "", "zot: no extension named 'nope' (installed: wx)\n")


# --- reload ----------------------------------------------------------------------------


def test_reload_one_and_all(cli: Cli) -> None:
    source(cli.home / "extensions")
    source(cli.home / "extensions", "wy", commands="yo", tools="rain")
    cli.start()
    before = infos(cli)

    res = ext(cli, "reload", "wx")
    assert outcome(res) == (0, f"reloaded wx: ready; provides {PROVIDES}\n", "")
    after = infos(cli)
    assert after["wx"]["pid"] != before["wx"]["pid"] and pid_alive(after["wx"]["pid"])
    assert (after["wx"]["state"], after["wx"]["restarts"]) == ("ready", 1)
    assert not pid_alive(before["wx"]["pid"])
    assert after["wy"]["pid"] == before["wy"]["pid"]
    assert after["wy"]["restarts"] == 0

    # The manifest is re-read: a new version shows.
    manifest = cli.home / "extensions" / "wy" / "extension.json"
    manifest.write_text(manifest.read_text().replace('"1.2.3"', '"2.0.0"'))
    res = ext(cli, "reload")
    assert res.returncode == 0, res
    assert res.stderr == ""
    assert sorted(res.stdout.splitlines()) == [
        f"reloaded wx: ready; provides {PROVIDES}",
        "reloaded wy: ready; provides /yo, rain",
    ]
    last = infos(cli)
    assert (last["wx"]["restarts"], last["wy"]["restarts"]) == (2, 1)
    assert last["wy"]["version"] == "2.0.0"
    for name in ("wx", "wy"):
        assert last[name]["pid"] != after[name]["pid"]
        assert not pid_alive(after[name]["pid"])
    table = {r["NAME"]: r for r in rows(ok(ext(cli, "list")).stdout)}
    assert (table["wx"]["RESTARTS"], table["wy"]["VERSION"]) == ("2", "2.0.0")


def test_reload_picks_up_a_directory_copied_in_by_hand(cli: Cli) -> None:
    cli.start()
    assert outcome(ext(cli, "reload")) == (0, "nothing to reload: no extensions here\n", "")
    source(cli.home / "extensions")
    res = ext(cli, "reload")
    assert outcome(res) == (0, f"reloaded wx: ready; provides {PROVIDES}\n", "")
    infos(cli)


def test_reload_of_a_failed_one_exits_1(cli: Cli) -> None:
    bad = cli.home / "extensions" / "bad"
    bad.mkdir(parents=True)
    (bad / "extension.json").write_text('{"name": "bad", "exec": "./nope"}')
    cli.start()
    res = ext(cli, "reload", "bad")
    assert outcome(res) == (
        1,
        f"reloaded bad: failed: bad cannot start (exec './nope' not found: no file {bad}/nope); "
        "fix it, then run `zot ext reload bad`\n",
        "",
    )


def test_reload_without_a_daemon(cli: Cli) -> None:
    source(cli.home / "extensions")
    message = "zot: zotd is not running; nothing to reload (extensions load when it starts)\n"
    assert outcome(ext(cli, "reload")) == (1, "", message)
    assert outcome(ext(cli, "reload", "wx")) == (1, "", message)


# --- the daemon going away ------------------------------------------------------------


def test_after_the_daemon_stops_changes_apply_at_the_next_start(cli: Cli) -> None:
    cli.start()
    assert outcome(ext(cli, "list")) == (0, EMPTY, "")
    ok(cli.zotd("stop"))
    wait_until(lambda: not cli.socket.exists(), WAIT, "the socket to go")
    src = source(cli.tmp / "src")
    dest = cli.home / "extensions" / "wx"
    assert outcome(ext(cli, "install", str(src))) == (
        0,
        f"installed wx (global) in {dest}; {OFFLINE}\n",
        "",
    )
    assert outcome(ext(cli, "disable", "wx")) == (0, f"disabled wx; {OFFLINE}\n", "")
    assert outcome(ext(cli, "enable", "wx")) == (0, f"enabled wx; {OFFLINE}\n", "")
    res = ext(cli, "list")
    assert (res.returncode, res.stderr) == (0, LIST_OFFLINE)
    assert rows(res.stdout)[0]["STATE"] == "stopped"
    cli.start()
    assert infos(cli)["wx"]["state"] == "ready"
    shutil.rmtree(src)


# --- trust --------------------------------------------------------------------------------


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_trust_a_cloned_projects_extensions(cli: Cli, running: bool) -> None:
    # As if the repository came with an extension: created by hand, not installed.
    source(cli.project / ".zot" / "extensions", "repo")
    if running:
        cli.start()
    listed = ext(cli, "list")
    assert listed.returncode == 0
    assert rows(listed.stdout)[0]["STATE"] == "untrusted"
    assert f"repo is not trusted yet; run `zot ext trust` in {cli.project}\n" in listed.stderr
    res = ext(cli, "trust")
    if running:
        assert outcome(res) == (
            0,
            f"repo: ready; provides {PROVIDES}\ntrusted repo in {cli.project}\n",
            "",
        )
    else:
        assert outcome(res) == (0, f"trusted repo in {cli.project}; {OFFLINE}\n", "")
        cli.start()
    assert infos(cli)["repo"]["state"] == "ready"


def test_trust_with_nothing_to_trust(cli: Cli) -> None:
    assert outcome(ext(cli, "trust")) == (0, f"no project-local extensions in {cli.project}\n", "")
