"""Lazy extensions end to end: a real daemon (``zotd start``), real extension
processes, the ``zot`` CLI. A lazy extension's tools are listed with no
process running, its first call starts it, and a changed script starts it
at once on the next daemon start (its cache no longer matches)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, Cli, wait_until
from tests.conftest import EXTENSIONS

cli = test_cli.cli  # the fixture, as this module's own

COUNTED = EXTENSIONS / "counted.py"
GREETER = Path(__file__).parent.parent / "cli" / "mcp_greeter.py"


def ok(res: Any) -> Any:
    assert res.returncode == 0, res
    assert "Traceback" not in res.stderr, res.stderr
    return res


def install_counted(cli: Cli, name: str, **manifest: Any) -> tuple[Path, Path]:
    """A global lazy extension running its own copy of counted.py; returns
    its directory and the file its starts append their pids to."""
    directory = cli.home / "extensions" / name
    directory.mkdir(parents=True)
    shutil.copy(COUNTED, directory / "counted.py")
    pids = cli.tmp / f"{name}.pids"
    pids.write_text("")
    fields = {
        "name": name,
        "exec": sys.executable,
        "args": ["counted.py", name],
        "env": {"ZOT_TEST_PIDS": str(pids)},
        "lazy": True,
        **manifest,
    }
    (directory / "extension.json").write_text(json.dumps(fields))
    return directory, pids


def starts(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()]


def cache(cli: Cli, name: str) -> Path:
    return cli.home / "cache" / "registrations" / f"{name}.json"


def ext_info(cli: Cli, name: str) -> dict[str, Any]:
    listed = json.loads(ok(cli.zot("ext", "list", "--json")).stdout)
    entries = listed if isinstance(listed, list) else listed["extensions"]
    return next(e for e in entries if e["name"] == name)


def restart_daemon(cli: Cli) -> int:
    """Stops the daemon and starts another; returns its pid."""
    ok(cli.zotd("stop", timeout=30))
    return cli.start()


def speaks_mcp(pid: int) -> bool:
    """Whether the daemon has loaded the `mcp` package (its pydantic core, a
    shared library, shows in its memory maps; Linux)."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


def test_a_lazy_extension_is_listed_asleep_and_started_by_its_first_call(cli: Cli) -> None:
    directory, pids = install_counted(cli, "lazy1")
    cli.start()
    # No cache yet: it starts at once to fill it.
    assert "whoami" in ok(cli.zot("tools")).stdout
    wait_until(lambda: cache(cli, "lazy1").is_file(), WAIT, "its registrations cached")
    assert len(starts(pids)) == 1
    assert cache(cli, "lazy1").stat().st_mode & 0o777 == 0o600

    restart_daemon(cli)
    pids.write_text("")
    # Listed from the cache, with nothing running.
    assert "whoami" in ok(cli.zot("tools")).stdout
    tools = json.loads(ok(cli.zot("tools", "--json")).stdout)
    assert any(t["name"] == "whoami" and t["extension"] == "lazy1" for t in tools)
    info = ext_info(cli, "lazy1")
    assert (info["state"], info["pid"], info["tools"]) == ("sleeping", None, ["whoami"])
    assert starts(pids) == []

    # The first call starts it, and is answered by it.
    out = ok(cli.zot("call", "whoami", "{}")).stdout
    assert len(starts(pids)) == 1
    assert out.strip() == f"pid {starts(pids)[0]}"
    info = ext_info(cli, "lazy1")
    assert (info["state"], info["pid"], info["restarts"]) == ("ready", starts(pids)[0], 0)
    assert "woke for tool whoami" in (cli.home / "logs" / "ext-lazy1.log").read_text()

    # A changed script: the next daemon starts it at once (the cache no longer matches).
    with (directory / "counted.py").open("a") as script:
        script.write("# changed\n")
    restart_daemon(cli)
    pids.write_text("")
    assert "whoami" in ok(cli.zot("tools")).stdout
    assert len(starts(pids)) == 1  # started with the workspace, before any call
    assert ext_info(cli, "lazy1")["state"] == "ready"


def test_idle_stop_puts_it_to_sleep_and_a_call_wakes_it(cli: Cli) -> None:
    _, pids = install_counted(cli, "idler", lazy=False, idle_stop=0.5)
    cli.start()
    assert "whoami" in ok(cli.zot("tools")).stdout
    wait_until(lambda: ext_info(cli, "idler")["state"] == "sleeping", WAIT, "it to sleep")
    info = ext_info(cli, "idler")
    assert (info["pid"], info["tools"], info["restarts"]) == (None, ["whoami"], 0)
    log = (cli.home / "logs" / "ext-idler.log").read_text()
    assert "sleeping after 0.5 s idle" in log
    first = starts(pids)
    assert len(first) == 1
    out = ok(cli.zot("call", "whoami", "{}")).stdout
    assert len(starts(pids)) == 2
    assert out.strip() == f"pid {starts(pids)[1]}"


def test_a_lazy_mcp_server_is_listed_asleep_woken_by_a_call_and_sleeps_when_idle(
    cli: Cli,
) -> None:
    directory = cli.home / "extensions" / "greeter"
    directory.mkdir(parents=True)
    shutil.copy(GREETER, directory / "greeter.py")
    manifest = {
        "name": "greeter",
        "kind": "mcp",
        "exec": sys.executable,
        "args": ["greeter.py"],
        "lazy": True,
        "idle_stop": 1,
    }
    (directory / "extension.json").write_text(json.dumps(manifest))
    cli.start()
    assert "greet" in ok(cli.zot("tools")).stdout
    wait_until(lambda: cache(cli, "greeter").is_file(), WAIT, "its registrations cached")
    daemon = restart_daemon(cli)
    assert "greet" in ok(cli.zot("tools")).stdout
    info = ext_info(cli, "greeter")
    assert (info["state"], info["pid"]) == ("sleeping", None)
    linux = sys.platform.startswith("linux")
    # Asleep, it costs the daemon no MCP client (nor the package's import).
    assert not (linux and speaks_mcp(daemon))
    assert ok(cli.zot("call", "greet", '{"who": "ann"}')).stdout == "hello, ann\n"
    assert speaks_mcp(daemon) or not linux
    log = cli.home / "logs" / "ext-greeter.log"
    assert "woke for tool greet" in log.read_text()
    # Idle for a second: stopped (its stdin closed, as MCP's stdio shutdown
    # is), listed asleep with its tool; the next call wakes it again.
    wait_until(lambda: ext_info(cli, "greeter")["state"] == "sleeping", WAIT, "it to sleep")
    info = ext_info(cli, "greeter")
    assert (info["pid"], info["tools"], info["restarts"]) == (None, ["greet"], 0)
    assert "sleeping after 1 s idle" in log.read_text()
    assert ok(cli.zot("call", "greet", '{"who": "bo"}')).stdout == "hello, bo\n"
