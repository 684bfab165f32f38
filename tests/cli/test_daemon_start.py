"""What a daemon's start costs, structurally: what ``zotd`` imports before it
serves, how its plain command line is read, and how its watchdog starts.

None of this asserts a time. The modules are checked by name: a daemon run
under ``python -X importtime`` says every module it loaded, and none of
:data:`HEAVY` may be among them (each is a few to tens of milliseconds of
every start, and the daemon needs none of them to serve zot extensions).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, Cli, wait_until
from zotd.cli import zotd_cli
from zotd.cli.argv import Plain, plain_daemon
from zotd.client import connect
from zotd.runtime import proc_figures, process, watchdog

cli = test_cli.cli  # the fixtures, as this module's own
ext_dir = test_cli.ext_dir

#: What the daemon must not import to serve zot extensions: the CLI's
#: framework and its help's renderer, the client library and anyio (the
#: daemon is the server), the argument checker (only for a guard's rewrite),
#: the MCP stack (only for an MCP server), watching files (only with
#: ``--watch`` or ``zot ext dev``), the files it was told where to find
#: (platformdirs), the launchd writer (plistlib), the CLIs' printing (its
#: escape tables: ``zotd --watch`` only), test machinery, and dataclasses.
HEAVY = frozenset(
    {
        "cyclopts",
        "rich",
        "docstring_parser",
        "zotd.cli.common",
        "zotd.cli.output",
        "zotd.client",
        "anyio",
        "jsonschema",
        "referencing",
        "mcp",
        "pydantic",
        # zotd --watch and zot ext dev only
        "watchfiles",
        "zotd.runtime.dev",
        "zotd.runtime.watch",
        "textual",
        "platformdirs",
        "plistlib",
        "pytest",
        "trio.testing",
        # making one dataclass costs an import 0.2 to 2 ms: the daemon's
        # records are msgspec Structs (the module itself is a few ms more)
        "dataclasses",
        # psutil, where the figures are read from /proc instead
        *(["psutil"] if sys.platform == "linux" else []),
    }
)


def heavy_in(modules: set[str]) -> list[str]:
    """The modules of :data:`HEAVY` (or under one) among ``modules``."""
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def imported(importtime: str) -> set[str]:
    """The modules ``-X importtime`` reported in its output (stderr)."""
    out = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                out.add(name)
    return out


# --- what the daemon imports --------------------------------------------------------------


def loaded_by(imports: str) -> set[str]:
    """The modules a fresh interpreter has loaded after ``imports`` (a line of Python)."""
    probe = f"import sys, json\n{imports}\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout))


def test_the_daemons_modules_import_nothing_heavy() -> None:
    # What zotd's plain path imports (zotd_cli._foreground): quick, no daemon run.
    loaded = loaded_by(
        "import zotd.cli.zotd_cli, zotd.runtime.daemon, zotd.runtime.listener, zotd.model.service"
    )
    assert "zotd.runtime.workspace" in loaded  # (it did import the daemon)
    assert heavy_in(loaded) == []


def test_the_daemon_builds_no_decoder_for_what_only_others_read() -> None:
    # A client's decoders of the daemon's frames and an extension's decoder
    # of the host's are built on first use, and the daemon uses neither.
    probe = (
        "import json\n"
        "import zotd.cli.zotd_cli, zotd.runtime.daemon\n"
        "from zotd.protocol import agent, extension\n"
        "built = [agent._server_frame_decoder, agent._reply_decoder, extension._host_decoder]\n"
        "print(json.dumps([b.cache_info().currsize for b in built]))\n"
        'extension.decode_host_frame(b\'{"type":"x"}\')\n'
        "print(json.dumps([b.cache_info().currsize for b in built]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert [json.loads(line) for line in out.stdout.splitlines()] == [[0, 0, 0], [0, 0, 1]]


def test_a_daemon_serving_an_extension_imported_nothing_heavy(cli: Cli, ext_dir: Path) -> None:
    """The whole way, under ``-X importtime``: the start, a client's hello,
    the extension spawned and ready, listed (with its process's figures),
    a tool call, the shutdown."""
    err = cli.tmp / "zotd.err"
    with err.open("wb") as out:
        daemon = cli.popen(
            [sys.executable, "-X", "importtime", "-m", "zotd", "--ext", str(ext_dir)],
            stdout=out,
            stderr=out,
        )
    wait_until(cli.socket.exists, WAIT, "the daemon to listen")

    async def use() -> None:
        with trio.fail_after(WAIT):
            async with connect(cli.socket, cwd=cli.project, client="test", start=False) as zot:
                listed = {e.name: e for e in await zot.list_extensions()}
                assert listed["fx"].state == "ready"
                assert listed["fx"].metrics.rss_bytes  # (its process's figures were read)
                result = await zot.call_tool("echo", {"text": "hi"})
                assert not result.is_error

    trio.run(use)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=WAIT) == 0, err.read_text()
    loaded = imported(err.read_text())
    assert "zotd.runtime.session" in loaded  # (the report is the daemon's)
    assert heavy_in(loaded) == []


def test_a_daemon_that_does_not_start_leaves_the_collector_on(cli: Cli) -> None:
    # The collector is off while the daemon is built (zotd_cli._tune_gc); a
    # bad option found then exits as it always did, and turns it on again.
    os.environ["ZOTD_SOCKET"], saved = str(cli.socket), os.environ.get("ZOTD_SOCKET")
    try:
        assert gc.isenabled()
        with pytest.raises(SystemExit) as exited:
            zotd_cli._foreground([cli.tmp / "no-such-dir"], False, None, Plain())
        assert exited.value.code == 2
        assert gc.isenabled()
    finally:
        if saved is None:
            del os.environ["ZOTD_SOCKET"]
        else:
            os.environ["ZOTD_SOCKET"] = saved


# --- the plain command line, read as cyclopts reads it ------------------------------------

PLAIN = [
    [],
    ["--ext", "a"],
    ["-e", "a", "--ext=b", "-e", "c"],
    ["--watch", "-e", "a"],
    ["--log-level", "debug"],
    ["--log-level=warning", "--socket", "s", "--config=c.toml"],
    ["--socket=/x/y.sock", "--watch", "--ext", "d", "--log-level", "bogus"],
    ["--config", "z", "-e", "a=b"],
]

NOT_PLAIN = [
    ["--help"],
    ["-h"],
    ["--version"],
    ["status"],
    ["start", "-e", "a"],
    ["--socket", "s", "stop"],
    ["-e", "a", "b"],
    ["--ext"],
    ["--ext="],
    ["--ext", "start"],
    ["--log-level", "--help"],
    ["-e=a"],
    ["--watch", "--watch"],
    ["--watch=yes"],
    ["--log-level", "a", "--log-level", "b"],
    ["--socket", "a", "--socket", "b"],
    ["--bogus"],
    ["x"],
    ["--", "-e", "a"],
    ["--install-completion"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=[" ".join(a) or "(none)" for a in PLAIN])
def test_a_plain_command_line_is_read_as_cyclopts_reads_it(argv: list[str]) -> None:
    plain = plain_daemon(argv)
    assert plain is not None
    command, bound, _ = zotd_cli.build_app().parse_args(argv)
    assert command is zotd_cli.serve
    given = bound.arguments
    where = given.get("where")
    assert plain == Plain(
        ext=given.get("ext"),
        watch=given.get("watch", False),
        log_level=given.get("log_level"),
        socket=where.socket if where else None,
        config=where.config if where else None,
    )


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=[" ".join(a) for a in NOT_PLAIN])
def test_anything_else_is_left_to_cyclopts(argv: list[str]) -> None:
    assert plain_daemon(argv) is None


def test_the_app_is_still_there_for_whoever_asks() -> None:
    from zotd.cli.zotd_cli import app

    assert app is zotd_cli.build_app()
    with pytest.raises(AttributeError):
        _ = zotd_cli.no_such_thing


# --- the watchdog -------------------------------------------------------------------------


def test_the_watchdog_starts_on_what_a_bare_interpreter_has_loaded(short_tmp: Path) -> None:
    # As the daemon starts it (-I -S), told nothing, it exits at once.
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-I", "-S", watchdog.__file__, "ZOTD_INSTANCE=x"],
        input=b"",
        capture_output=True,
        check=True,
        timeout=60,
        cwd=short_tmp,
    )
    loaded = imported(out.stderr.decode())
    assert loaded & {"typing", "enum", "contextlib", "collections", "signal", "site"} == set()


def test_the_daemon_starts_its_watchdog_so() -> None:
    started = process.Watchdog(watchdog.launch())  # (as zotd does, before its imports)
    try:
        assert started._process is not None
        args = started._process.args
        assert isinstance(args, list)
        assert args[1:] == [
            "-I",
            "-S",
            os.path.abspath(watchdog.__file__),
            f"ZOTD_INSTANCE={started.instance}",
        ]
        assert started.instance.startswith(f"{os.getpid()}-")
    finally:
        started.close()
    assert started._process is None


def test_the_watchdog_can_be_started_before_the_daemon_is_imported() -> None:
    loaded = loaded_by("from zotd.runtime import watchdog")
    assert not loaded & {"trio", "zotd.runtime.process", "zotd.runtime.daemon", "msgspec"}


# --- an extension's figures without psutil ------------------------------------------------


@pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux's")
def test_the_proc_reader_gives_what_psutil_gives() -> None:
    # (psutil is how the figures are read elsewhere, and what they were read with)
    code = (
        "import time\nx = bytearray(8 << 20)\nwhile time.process_time() < 0.1: pass\n"
        "print('done', flush=True)\ntime.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"done\n"  # (its figures stay put from now on)
        ours, theirs = proc_figures.read_proc(child.pid), proc_figures.read_psutil(child.pid)
        assert ours.rss_bytes == theirs.rss_bytes > 8 << 20
        assert ours.cpu_s == pytest.approx(theirs.cpu_s, abs=0.02)
        # (psutil counts from the boot time in whole seconds)
        assert ours.age_s == pytest.approx(theirs.age_s, abs=1.5)
        assert ours.handle is None and theirs.handle is not None
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    with pytest.raises(FileNotFoundError):
        proc_figures.read_proc(child.pid)
    with pytest.raises(OSError, match=f"pid={child.pid}"):  # (psutil's error, as an OSError)
        proc_figures.read_psutil(child.pid)
