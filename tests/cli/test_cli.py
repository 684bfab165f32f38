"""The ``zotd`` and ``zot`` commands as a user runs them: real processes, real output.

Every command runs with ``ZOT_HOME``, ``ZOTD_SOCKET`` and ``ZOTD_CONFIG``
pointing into a temporary directory, so nothing touches the user's own
daemon, extensions or config. Every daemon a test starts is stopped by the
``cli`` fixture, killed by pid if it will not stop.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
import trio

from tests.conftest import add_extension, add_newer_zot, pid_alive, quickstart_dir
from zotd import __version__
from zotd.client import connect

ZOT = Path(sys.executable).parent / "zot"

#: Upper bound for one CLI invocation (they take a fraction of a second): a
#: hang guard, generous for a slow or busy machine. So are the other waits here.
RUN_TIMEOUT = 30.0
#: How long a test waits for something that happens in well under a second.
WAIT = 30.0

STARTED = re.compile(r"^zotd started: pid (\d+), socket (\S+), log (\S+)$")


class Cli:
    """Runs the CLIs against a private daemon; remembers every pid to clean up."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.socket = tmp / "run" / "zotd.sock"
        self.config = tmp / "zotd.toml"  # does not exist unless a test writes it
        self.project = tmp / "proj"
        self.project.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ZOTD_")}
        self.env.update(
            ZOT_HOME=str(self.home), ZOTD_SOCKET=str(self.socket), ZOTD_CONFIG=str(self.config)
        )
        # These tests are about a daemon started on purpose (test_autostart.py
        # covers the other kind).
        self.env["ZOTD_NO_AUTOSTART"] = "1"
        #: The daemon's token, if a test configures one (cleanup needs it).
        self.token: str | None = None
        self.pids: set[int] = set()
        self.procs: list[subprocess.Popen[bytes]] = []

    def zotd(self, *args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return self._run([sys.executable, "-m", "zotd", *args], timeout)

    def zot(self, *args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return self._run([str(ZOT), *args], timeout)

    def _run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str) -> int:
        """``zotd start ARGS``; returns the daemon's pid."""
        res = self.zotd("start", *args)
        assert res.returncode == 0, res
        match = STARTED.match(res.stdout.strip())
        assert match is not None, res.stdout
        pid = int(match[1])
        self.pids.add(pid)
        assert match[2] == str(self.socket)
        assert match[3] == str(self.home / "logs" / "zotd.log")
        return pid

    def popen(self, argv: list[str], stdout: Any, stderr: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv,
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
        self.procs.append(proc)
        self.pids.add(proc.pid)
        return proc

    def extensions(self) -> dict[str, Any]:
        """name -> ExtensionInfo of the project's workspace, through the client library."""

        async def go() -> dict[str, Any]:
            with trio.fail_after(RUN_TIMEOUT):
                async with connect(self.socket, cwd=self.project, client="test") as zot:
                    return {e.name: e for e in await zot.list_extensions()}

        infos = trio.run(go)
        self.pids.update(e.pid for e in infos.values() if e.pid is not None)
        return infos

    def cleanup(self) -> None:
        if self.token is not None:
            self.env["ZOTD_TOKEN"] = self.token
        if self.socket.exists():
            self.zotd("stop", timeout=30)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        for pid in self.pids:
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    try:
        yield c
    finally:
        c.cleanup()


@pytest.fixture
def ext_dir(short_tmp: Path) -> Path:
    """An extension ``fx`` (fake.py) with commands and tools, for ``--ext``."""
    return add_extension(
        short_tmp / "exts",
        "fx",
        "--commands",
        "go,show,put,nothing,oops,tell",
        "--tools",
        "echo,image,fail,a_rather_long_tool_name",
    )


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def read_line(pipe: IO[bytes], timeout: float = WAIT) -> str:
    """One line from a child's pipe, without blocking past ``timeout``."""
    fd = pipe.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no line within {timeout} s (got {buf!r})")
        byte = os.read(fd, 1)  # one byte at a time: nothing read past the line
        if not byte:
            raise AssertionError(f"end of output (got {buf!r})")
        buf += byte
    return buf.decode().rstrip("\n")


# --- help ----------------------------------------------------------------------------


def test_help_lists_the_commands(cli: Cli) -> None:
    zotd = cli.zotd("--help")
    assert zotd.returncode == 0, zotd
    for command in ("start", "stop", "status"):
        assert re.search(rf"^\W*{command}\b", zotd.stdout, re.M), zotd.stdout
    assert "--ext" in zotd.stdout
    zot = cli.zot("--help")
    assert zot.returncode == 0, zot
    for command in ("commands", "tools", "run", "call", "events"):
        assert re.search(rf"^\W*{command}\b", zot.stdout, re.M), zot.stdout
    assert cli.zotd("--version").stdout.strip() == __version__
    assert cli.zot("--version").stdout.strip() == __version__


# --- start, status, stop ---------------------------------------------------------------


def test_start_status_stop(cli: Cli, ext_dir: Path) -> None:
    # (It answered before START_TIMEOUT, or `start` would have failed.)
    pid = cli.start("-e", os.path.relpath(ext_dir, cli.project))  # relative to the cwd
    assert pid_alive(pid)

    status = cli.zotd("status")
    assert status.returncode == 0, status
    lines = status.stdout.splitlines()
    assert re.fullmatch(
        rf"zotd {re.escape(__version__)} running: pid {pid}, socket {re.escape(str(cli.socket))}, "
        r"up \d+ s; 0 extension process\(es\)",
        lines[0],
    ), lines
    assert lines[1:] == ["no workspaces (none until an agent says hello)"]

    # An agent's hello starts the project's workspace and its extension.
    infos = cli.extensions()
    ext_pid = infos["fx"].pid
    assert ext_pid is not None and pid_alive(ext_pid)
    assert (infos["fx"].state, infos["fx"].scope) == ("ready", "explicit")

    status = cli.zotd("status")
    assert status.stdout.splitlines()[1:] == [
        f"  {cli.project}: 1/1 extensions ready, 1 process(es), 0 client(s)"
    ]
    as_json = cli.zotd("status", "--json")
    assert as_json.returncode == 0, as_json
    data = json.loads(as_json.stdout)
    metrics = data["workspaces"][0].pop("metrics")
    assert data == {
        "running": True,
        "pid": pid,
        "zotd_version": __version__,
        "socket": str(cli.socket),
        "uptime_s": data["uptime_s"],
        "workspaces": [
            {"path": str(cli.project), "clients": 0, "extensions": 1, "ready": 1, "processes": 1}
        ],
        "shared": [],
    }
    assert list(metrics) == ["fx"]
    assert (metrics["fx"]["calls"], metrics["fx"]["p50_ms"]) == (0, None)
    assert metrics["fx"]["rss_bytes"] > 0  # (its process runs)

    stop = cli.zotd("stop")
    assert (stop.returncode, stop.stdout, stop.stderr) == (0, f"zotd stopped (pid {pid})\n", "")
    assert not pid_alive(pid)  # "stopped" means its process is gone
    assert not pid_alive(ext_pid)
    assert not cli.socket.exists()
    log = (cli.home / "logs" / "ext-fx.log").read_text()
    assert "exited with code 0" in log
    assert "SIGTERM" not in log and "SIGKILL" not in log


def test_stop_and_status_when_nothing_runs(cli: Cli) -> None:
    stop = cli.zotd("stop")
    assert (stop.returncode, stop.stdout, stop.stderr) == (0, "zotd is not running\n", "")
    status = cli.zotd("status")
    assert (status.returncode, status.stdout, status.stderr) == (
        1,
        f"zotd is not running (socket {cli.socket})\n",
        "",
    )
    status = cli.zotd("status", "--json")
    assert status.returncode == 1
    tools = cli.zot("tools")
    assert tools.returncode == 1
    assert tools.stdout == ""
    assert tools.stderr == (
        f"zot: zotd is not running (nothing answers on {cli.socket}); start it with `zotd start`\n"
    )


def test_start_twice(cli: Cli) -> None:
    pid = cli.start()
    again = cli.zotd("start")
    assert (again.returncode, again.stdout, again.stderr) == (
        0,
        f"zotd is already running: pid {pid}, socket {cli.socket}\n",
        "",
    )
    assert cli.zotd("stop").returncode == 0


def test_second_foreground_daemon_refuses(cli: Cli) -> None:
    cli.start()
    second = cli.zotd()
    assert second.returncode == 1
    assert "already running" in second.stderr
    assert second.stderr.strip().endswith(str(cli.socket.with_suffix(".lock")))
    # The first one is unharmed.
    assert cli.zotd("status").returncode == 0


def test_bad_config_names_the_field(cli: Cli) -> None:
    cli.config.write_text('tool_timeout = "x"\n')
    for argv in ([], ["start"], ["status"]):
        res = cli.zotd(*argv)
        assert res.returncode == 2, (argv, res)
        assert res.stdout == ""
        assert res.stderr.startswith(f"zotd: bad config file {cli.config}: field `tool_timeout`"), (
            res.stderr
        )
    assert not cli.socket.exists()
    cli.config.write_text("tool_timeout = 5\nno_such_setting = 1\n")
    res = cli.zotd()
    assert res.returncode == 2
    assert "no_such_setting" in res.stderr
    cli.config.write_text("tool_timeout = [\n")
    res = cli.zotd()
    assert res.returncode == 2
    assert "not valid TOML" in res.stderr


def test_ext_that_is_not_a_directory(cli: Cli) -> None:
    missing = cli.tmp / "no-such-ext"
    for argv in (["--ext", str(missing)], ["start", "-e", str(missing)]):
        res = cli.zotd(*argv)
        assert (res.returncode, res.stdout, res.stderr) == (
            2,
            "",
            f"zotd: --ext {missing}: not a directory\n",
        ), argv
    assert not cli.socket.exists()


def test_foreground_daemon_with_too_long_a_socket_path(cli: Cli) -> None:
    cli.env["ZOTD_SOCKET"] = str(cli.tmp / ("x" * 120) / "zotd.sock")
    res = cli.zotd()
    assert res.returncode == 1
    assert res.stderr.startswith("zotd: socket path is "), res.stderr
    assert "set ZOTD_SOCKET (or --socket) to a shorter path" in res.stderr


@pytest.mark.parametrize("where", ["too-long", "under-a-file"])
def test_clients_explain_a_socket_path_they_cannot_use(cli: Cli, where: str) -> None:
    if where == "too-long":
        cli.env["ZOTD_SOCKET"] = str(cli.tmp / ("x" * 120) / "zotd.sock")
    else:
        (cli.tmp / "a-file").write_text("")
        cli.env["ZOTD_SOCKET"] = str(cli.tmp / "a-file" / "zotd.sock")
    for res in (cli.zotd("status"), cli.zotd("stop"), cli.zotd("start"), cli.zot("tools")):
        assert "Traceback" not in res.stderr, res.stderr
        assert res.returncode == 1
        assert cli.env["ZOTD_SOCKET"] in res.stderr + res.stdout


def test_foreground_daemon_explains_a_socket_dir_it_cannot_use(cli: Cli) -> None:
    (cli.tmp / "a-file").write_text("")
    cli.env["ZOTD_SOCKET"] = str(cli.tmp / "a-file" / "zotd.sock")
    res = cli.zotd()
    assert res.returncode == 1
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("zotd: "), res.stderr


def test_zot_with_a_token(cli: Cli) -> None:
    cli.config.write_text('token = "s3cret"\n')
    cli.token = "s3cret"
    cli.env["ZOTD_TOKEN"] = "s3cret"
    cli.start()
    del cli.env["ZOTD_TOKEN"]
    # zot falls back to the token in zotd.toml; without one it is refused.
    res = cli.zot("tools")
    assert (res.returncode, res.stdout) == (0, "no tools (no extension registered one)\n")
    cli.env["ZOTD_CONFIG"] = str(cli.tmp / "no-token.toml")
    res = cli.zot("tools")
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == "zot: a valid `token` is required (pass --token or set ZOTD_TOKEN)\n"
    res = cli.zot("tools", "--token", "wrong")
    assert res.returncode == 1
    res = cli.zot("tools", "--token", "s3cret")
    assert (res.returncode, res.stdout) == (0, "no tools (no extension registered one)\n")
    cli.env["ZOTD_TOKEN"] = "s3cret"
    res = cli.zot("tools")
    assert (res.returncode, res.stdout) == (0, "no tools (no extension registered one)\n")


def test_zotd_uses_the_token_of_its_config(cli: Cli) -> None:
    cli.config.write_text('token = "s3cret"\n')
    cli.token = "s3cret"  # only for the cleanup
    start = cli.zotd("start")
    assert "Traceback" not in start.stderr, start.stderr
    assert start.returncode == 0
    assert STARTED.match(start.stdout.strip()), start.stdout
    assert cli.zotd("status").returncode == 0
    stop = cli.zotd("stop")
    assert stop.returncode == 0 and stop.stdout.startswith("zotd stopped"), stop


# --- zot --------------------------------------------------------------------------------


def test_zot_commands_and_tools(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    commands = cli.zot("commands")
    assert commands.returncode == 0, commands
    names = sorted(["go", "show", "put", "nothing", "oops", "tell"])  # by name
    assert commands.stdout.splitlines() == [
        f"/{n:<8} the {n} command{' ' * (len('nothing') - len(n))}  (fx)" for n in names
    ]
    tools = cli.zot("tools")
    assert tools.returncode == 0, tools
    width = len("a_rather_long_tool_name")
    assert tools.stdout.splitlines() == [
        f"{n:<{width}}  the {n} tool{' ' * (width - len(n))}  (fx)"
        for n in sorted(["echo", "image", "fail", "a_rather_long_tool_name"])
    ]
    as_json = cli.zot("tools", "--json")
    assert as_json.returncode == 0
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    assert json.loads(as_json.stdout) == [
        {"name": n, "description": f"the {n} tool", "schema": schema, "extension": "fx"}
        for n in sorted(["echo", "image", "fail", "a_rather_long_tool_name"])
    ]
    as_json = cli.zot("commands", "--json")
    assert json.loads(as_json.stdout) == [
        {"name": n, "description": f"the {n} command", "extension": "fx"} for n in names
    ]


def test_zot_lists_nothing_without_extensions(cli: Cli) -> None:
    cli.start()
    commands = cli.zot("commands")
    assert (commands.returncode, commands.stdout) == (
        0,
        "no commands (no extension registered one)\n",
    )
    tools = cli.zot("tools")
    assert (tools.returncode, tools.stdout) == (0, "no tools (no extension registered one)\n")
    assert json.loads(cli.zot("tools", "--json").stdout) == []


def test_zot_run(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    res = cli.zot("run", "/go", "a", "b")
    assert (res.returncode, res.stdout, res.stderr) == (0, "[fx] prompt: ran /go with 'a b'\n", "")
    res = cli.zot("run", "show", "some text")
    assert (res.returncode, res.stdout, res.stderr) == (0, "shown: some text\n", "")
    res = cli.zot("run", "/put", "y")
    assert (res.returncode, res.stdout, res.stderr) == (0, "[fx] insert: inserted: y\n", "")
    res = cli.zot("run", "/nothing")
    assert (res.returncode, res.stdout, res.stderr) == (0, "[fx] done (nothing to show)\n", "")
    res = cli.zot("run", "/oops")
    assert (res.returncode, res.stdout, res.stderr) == (1, "", "[fx] error: it broke\n")
    res = cli.zot("run", "/nope")
    assert (res.returncode, res.stdout, res.stderr) == (
        1,
        "",
        "zot: no command /nope in this workspace (`zot commands` lists them)\n",
    )
    res = cli.zot("run", "/go", "x", "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout) == {
        "extension": "fx",
        "action": "prompt",
        "prompt": "ran /go with 'x'",
        "insert": "",
        "display": "",
        "error": "",
        "open_panel": None,
    }


def test_zot_call(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    res = cli.zot("call", "echo", '{"text": "hi", "n": 2}')
    assert (res.returncode, res.stdout, res.stderr) == (0, '{"n": 2, "text": "hi"}\n', "")
    res = cli.zot("call", "echo")  # the arguments default to {}
    assert (res.returncode, res.stdout) == (0, "{}\n")
    res = cli.zot("call", "image")
    assert (res.returncode, res.stdout, res.stderr) == (
        0,
        "a picture\n[image image/png, 9 bytes]\n",
        "",
    )
    res = cli.zot("call", "fail")
    assert (res.returncode, res.stdout, res.stderr) == (1, "", "no luck\n")
    res = cli.zot("call", "fail", "--json")
    assert res.returncode == 1
    assert json.loads(res.stdout) == {
        "extension": "fx",
        "content": [{"type": "text", "text": "no luck"}],
        "is_error": True,
    }
    res = cli.zot("call", "nope")
    assert (res.returncode, res.stdout, res.stderr) == (
        1,
        "",
        "zot: no tool 'nope' in this workspace (`zot tools` lists them)\n",
    )


def test_zot_call_with_bad_arguments(cli: Cli) -> None:
    # These are refused before any daemon is asked: none runs here.
    res = cli.zot("call", "echo", '{"text": ')
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.startswith("zot: ARGS is not valid JSON: "), res.stderr
    for not_an_object in ("[1, 2]", '"text"', "3", "null"):
        res = cli.zot("call", "echo", not_an_object)
        assert (res.returncode, res.stdout, res.stderr) == (
            2,
            "",
            'zot: ARGS must be a JSON object, like \'{"city": "Berlin"}\'\n',
        ), not_an_object


def test_zot_events(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    events = cli.popen([str(ZOT), "events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert events.stdout is not None and events.stderr is not None
    # Printed once it has subscribed: from here on nothing is missed.
    assert read_line(events.stderr) == "following notifications (Ctrl+C to stop)"
    tell = cli.zot("run", "/tell", "hi")
    # What the command sends while it runs reaches its caller too, on stderr.
    assert (tell.returncode, tell.stdout, tell.stderr) == (
        0,
        "[fx] done (nothing to show)\n",
        "[fx] warn: told: hi\n",
    )
    assert read_line(events.stdout) == "[fx] warn: told: hi"
    events.send_signal(signal.SIGINT)
    assert events.wait(timeout=WAIT) == 130


def test_zot_events_ends_when_the_daemon_stops(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    events = cli.popen([str(ZOT), "events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert events.stdout is not None and events.stderr is not None
    assert read_line(events.stderr) == "following notifications (Ctrl+C to stop)"
    assert cli.zotd("stop").returncode == 0
    # It sees its extension stop, then the connection close.
    lines = []
    while True:
        line = read_line(events.stdout)
        lines.append(line)
        if line.startswith("[fx] exited"):
            break
    assert "[fx] stopping" in lines[0]
    assert read_line(events.stderr) == "zotd closed the connection"
    assert events.wait(timeout=WAIT) == 1


# --- the foreground daemon and signals ----------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_foreground_daemon_stops_gracefully_on(
    cli: Cli, ext_dir: Path, sig: signal.Signals
) -> None:
    log = cli.tmp / "zotd.out"
    with log.open("wb") as out:
        daemon = cli.popen(
            [sys.executable, "-m", "zotd", "--ext", str(ext_dir)], stdout=out, stderr=out
        )
    wait_until(lambda: cli.zotd("status").returncode == 0, WAIT, "the daemon to answer")
    ext_pid = cli.extensions()["fx"].pid
    assert ext_pid is not None and pid_alive(ext_pid)
    daemon.send_signal(sig)
    assert daemon.wait(timeout=WAIT) == 0, log.read_text()
    # Gracefully: the extension exited on `shutdown`, never signalled (its log below).
    assert not pid_alive(ext_pid)
    assert not cli.socket.exists()
    ext_log = (cli.home / "logs" / "ext-fx.log").read_text()
    assert "exited with code 0" in ext_log
    assert "SIGTERM" not in ext_log and "SIGKILL" not in ext_log
    assert f"{sig.name}: shutting down" in log.read_text()


# --- the reference quick start ------------------------------------------------------------


def test_quickstart_hellopy(cli: Cli) -> None:
    quickstart_dir(cli.home / "extensions")
    cli.start()
    res = cli.zot("run", "/hellopy")
    assert (res.returncode, res.stdout, res.stderr) == (
        0,
        "[hello-py] prompt: Greet me very briefly. Add one emoji.\n",
        "",
    )
    commands = cli.zot("commands")
    assert commands.stdout == "/hellopy  say hi (python)  (hello-py)\n"


def test_zot_run_shows_the_panel_a_command_opens(cli: Cli, short_tmp: Path) -> None:
    log = short_tmp / "nz.frames"
    cli.start("-e", str(add_newer_zot(short_tmp / "exts", "nz", log)))
    res = cli.zot("run", "/nz-board")
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.splitlines() == [
        "[nz] Board",
        "  > alpha             ",
        "    beta              ",
        "    gamma             ",
        "  up/down, q",
    ]
    # The panel closed with the command's connection.
    wait_until(lambda: '"type":"panel_close"' in log.read_text(), WAIT, "panel_close")


def test_zot_run_passes_dashed_args_through(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    res = cli.zot("run", "/go", "--force", "-n", "3")
    assert (res.returncode, res.stdout) == (0, "[fx] prompt: ran /go with '--force -n 3'\n")


def test_zot_call_timeout_must_be_positive(cli: Cli) -> None:
    res = cli.zot("call", "echo", "{}", "--timeout", "0")
    assert (res.returncode, res.stdout, res.stderr) == (
        2,
        "",
        "zot: --timeout must be a positive number of seconds\n",
    )
