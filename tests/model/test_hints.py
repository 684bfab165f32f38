"""Errors that say what to do: a command or tool whose extension is not
running names the fix; an unknown name suggests the closest ones
(zotd/hints.py, through a real daemon and real extension processes)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, FAKE, FAST, StartDaemon, add_extension
from zotd.client import Client, ZotdError, connect
from zotd.model import hints, trust
from zotd.model.config import Config, RestartPolicy
from zotd.model.manifest import Scope, load
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionInfo

GATE = EXTENSIONS / "gate.py"

#: Trust as the daemon's defaults have it (unlike tests.conftest.FAST).
STRICT = Config(ready_idle=0.1, restart=RestartPolicy(policy="never"))


async def info(zot: Client, name: str) -> ExtensionInfo:
    return next(i for i in await zot.list_extensions() if i.name == name)


async def wait_state(zot: Client, name: str, state: str) -> ExtensionInfo:
    """Waits until extension ``name`` is in ``state`` (it gets there on its own)."""
    with trio.fail_after(10):
        while (i := await info(zot, name)).state != state:
            await trio.sleep(0.01)
    return i


async def error_of(call: object) -> tuple[str, str]:
    with pytest.raises(ZotdError) as err:
        await call  # type: ignore[misc]
    return err.value.code, err.value.message


# --- unit: the messages ---------------------------------------------------------


def test_why_not_each_state() -> None:
    def why(state: str, **kw: object) -> str:
        w = hints.why_not("wx", state, **kw)  # type: ignore[arg-type]
        return "" if w is None else w.clause()

    assert why("ready") == ""
    assert why("disabled") == "wx is disabled; run `zot ext enable wx`"
    assert why("failed", reason="exited with code 7") == (
        "wx failed (exited with code 7); see `zot ext logs wx`, then run `zot ext reload wx`"
    )
    assert why("failed", reason="exited with code 3; restarted 5 times in 60 s, so ...") == (
        "wx failed (exited with code 3); see `zot ext logs wx`, then run `zot ext reload wx`"
    )
    assert why("failed", reason="exec 'x' not found: no file /e/x", broken=True) == (
        "wx cannot start (exec 'x' not found: no file /e/x); fix it, then run `zot ext reload wx`"
    )
    assert why("restarting", reason="exited with code 3; restarting in 1 s", restart_in=0.46) == (
        "wx is restarting (in 0.5 s; it exited with code 3); try again then, or see `zot ext logs wx`"
    )
    assert why("restarting", restart_in=-1.0).startswith("wx is restarting (in 0.1 s)")
    assert why("untrusted", reason="project-local ...", workspace="/p") == (
        "wx is not trusted yet; run `zot ext trust` in /p"
    )
    assert why("untrusted", reason="it changed since it was trusted: ...", workspace="/p") == (
        "wx changed since it was trusted; run `zot ext trust` in /p"
    )
    assert why("starting") == "wx is still starting; try again in a moment"
    assert why("stopping") == "wx is stopping; `zot ext list` shows what it does next"
    assert why("exited", reason="") == "wx is not running; run `zot ext reload wx` to start it"


def test_unknown_names_suggest_the_closest() -> None:
    assert hints.unknown("command", "helo", ["hello"], []) == (
        "no command /helo in this workspace; did you mean /hello? (`zot commands` lists them)"
    )
    assert hints.unknown("tool", "x", ["x1", "x2", "x3"], []) == (
        "no tool 'x' in this workspace; did you mean 'x1', 'x2' or 'x3'? (`zot tools` lists them)"
    )
    off = hints.why_not("wx", "disabled")
    assert off is not None
    assert hints.unknown("tool", "wx", [], [("wx", off)]) == (
        "no tool 'wx' in this workspace (`zot tools` lists them); "
        "not running: wx (disabled; run `zot ext enable wx`)"
    )
    assert hints.close_matches("wether", ["weather", "clock", "wether"]) == ["weather"]
    assert hints.close_matches("w" * 1000, ["w" * 999]) == []
    assert hints.unknown_extension("alpah", ["alpha", "beta"]) == (
        "no extension named 'alpah'; did you mean 'alpha'? (`zot ext list` lists them)"
    )
    assert hints.unknown_extension("zzz", ["beta", "alpha"]) == (
        "no extension named 'zzz' (installed: alpha, beta)"
    )
    assert hints.unknown_extension("zzz", []) == "no extension named 'zzz' (installed: none)"


def test_command_suggestions_ignore_case() -> None:
    # Commands are matched whatever their case (current zot): compared in
    # lower case, suggested in their own spelling, never the name itself.
    assert hints.close_matches("TODOS", ["todo", "clock"], fold=True) == ["todo"]
    assert hints.close_matches("TODOS", ["todo", "clock"]) == []
    assert hints.close_matches("Todo", ["todo", "todos"], fold=True) == ["todos"]
    assert hints.close_matches("todo", ["todo", "todos"]) == ["todos"]
    assert hints.close_matches("tod", ["Todo", "todo"], fold=True) == ["Todo"]
    assert hints.close_matches("Weather", ["weather"]) == ["weather"]  # tools: exact


def test_long_names_are_cut_in_messages() -> None:
    message = hints.unknown("tool", "n" * 10_000, [], [])
    assert message == f"no tool '{'n' * 77}...' in this workspace (`zot tools` lists them)"


def test_names_that_do_not_print_are_quoted() -> None:
    assert hints.unknown("command", "a\nb", [], []) == (
        "no command /'a\\nb' in this workspace (`zot commands` lists them)"
    )
    assert "\n" not in hints.unknown("tool", "a\nb", [], [])


# --- through the daemon: not running, and what fixes it ------------------------------


async def test_a_disabled_extension_names_enable(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "weather", "--tools", "forecast", "--commands", "wx")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.call_tool("forecast", {})
        await zot.ext_disable("weather")
        fix = "weather is disabled; run `zot ext enable weather`"
        assert await error_of(zot.call_tool("forecast", {})) == (
            "unavailable",
            f"tool 'forecast' is unavailable: {fix}",
        )
        assert await error_of(zot.invoke_command("/wx")) == (
            "unavailable",
            f"command /wx is unavailable: {fix}",
        )
        assert (await info(zot, "weather")).hint == fix
        await zot.ext_enable("weather")
        assert (await zot.call_tool("forecast", {})).extension == "weather"
        assert (await info(zot, "weather")).hint == ""


async def test_a_failed_extension_names_logs_and_reload(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "weather", "--commands", "boom,hello")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        code, _ = await error_of(zot.invoke_command("/boom"))  # it exits with code 7
        assert code == "extension_failed"
        await wait_state(zot, "weather", "failed")
        assert await error_of(zot.invoke_command("/hello")) == (
            "unavailable",
            "command /hello is unavailable: weather failed (exited with code 7); "
            "see `zot ext logs weather`, then run `zot ext reload weather`",
        )
        await zot.ext_reload("weather")
        assert (await zot.invoke_command("/hello")).action == "prompt"


async def test_a_restarting_extension_says_when(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "weather", "--commands", "boom,hello")
    # A backoff far longer than the test: it is restarting throughout.
    policy = RestartPolicy(backoff_initial=30, backoff_max=30)
    await start_daemon(msgspec.structs.replace(FAST, restart=policy))
    async with connect(paths.socket, cwd=project) as zot:
        await error_of(zot.invoke_command("/boom"))
        await wait_state(zot, "weather", "restarting")
        code, message = await error_of(zot.invoke_command("/hello"))
    assert code == "unavailable"
    assert re.fullmatch(
        r"command /hello is unavailable: weather is restarting \(in \d+\.\d s; it exited "
        r"with code 7\); try again then, or see `zot ext logs weather`",
        message,
    ), message


async def test_a_starting_extension_says_so(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    hold = short_tmp / "hold"
    add_extension(paths.extensions_dir, "gated", "--tools", "g", "--hold", str(hold), script=GATE)
    # However slow the machine, it is not refused for a late `hello` while held.
    await start_daemon(msgspec.structs.replace(FAST, hello_timeout=120.0))
    async with connect(paths.socket, cwd=project) as zot:
        await zot.call_tool("g", {})
        hold.touch()  # its next start waits before `hello`
        async with trio.open_nursery() as nursery:
            nursery.start_soon(zot.ext_reload, "gated")
            with trio.fail_after(10):
                while (i := await info(zot, "gated")).state != "starting" or i.pid is None:
                    await trio.sleep(0.01)
            assert await error_of(zot.call_tool("g", {})) == (
                "unavailable",
                "tool 'g' is unavailable: gated is still starting; try again in a moment",
            )
            hold.unlink()
        assert (await zot.call_tool("g", {})).extension == "gated"


async def test_never_started_extensions_are_listed_as_not_running(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # Disabled from the start: what it would offer is not known.
    add_extension(
        paths.extensions_dir, "weather", "--tools", "forecast", manifest={"enabled": False}
    )
    add_extension(paths.extensions_dir, "clock", "--tools", "now")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert await error_of(zot.call_tool("forecast", {})) == (
            "not_found",
            "no tool 'forecast' in this workspace (`zot tools` lists them); "
            "not running: weather (disabled; run `zot ext enable weather`)",
        )


async def test_untrusted_extensions_say_how_to_trust(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    directory = add_extension(project / ".zot" / "extensions", "repo-tool", "--tools", "rt")
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        fix = f"run `zot ext trust` in {project}"
        assert await error_of(zot.call_tool("rt", {})) == (
            "not_found",
            "no tool 'rt' in this workspace (`zot tools` lists them); "
            f"not running: repo-tool (not trusted yet; {fix})",
        )
        assert await error_of(zot.ext_reload("repo-tool")) == (
            "unavailable",
            f"repo-tool is not trusted yet; {fix}",
        )
        await zot.ext_trust()
        await zot.call_tool("rt", {})
        # A change (a git pull, say) takes the trust away; its tools are known now.
        manifest = json.loads((directory / "extension.json").read_text())
        manifest["args"].append("--garbage")
        (directory / "extension.json").write_text(json.dumps(manifest))
        with pytest.raises(ZotdError):
            await zot.ext_reload("repo-tool")
        assert await error_of(zot.call_tool("rt", {})) == (
            "unavailable",
            f"tool 'rt' is unavailable: repo-tool changed since it was trusted; {fix}",
        )


# --- through the daemon: unknown names ----------------------------------------------


async def test_unknown_names_suggest_the_closest_ones(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "weather", "--commands", "hello", "--tools", "forecast")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert await error_of(zot.invoke_command("/helo")) == (
            "not_found",
            "no command /helo in this workspace; did you mean /hello? (`zot commands` lists them)",
        )
        assert await error_of(zot.call_tool("forcast", {})) == (
            "not_found",
            "no tool 'forcast' in this workspace; did you mean 'forecast'? "
            "(`zot tools` lists them)",
        )
        assert await error_of(zot.call_tool("zzz", {})) == (
            "not_found",
            "no tool 'zzz' in this workspace (`zot tools` lists them)",
        )
        assert await error_of(zot.invoke_command("/help")) == (
            "not_found",
            "/help is one of zot's built-in commands, not an extension's",
        )
        for request in (zot.ext_disable("wether"), zot.ext_logs("wether")):
            assert await error_of(request) == (
                "not_found",
                "no extension named 'wether'; did you mean 'weather'? (`zot ext list` lists them)",
            )


async def test_bad_names_get_clear_errors(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "weather", "--tools", "forecast")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        for name in ("", " ", "\x00\n", "é" * 50_000, "forecast" * 1000, '"}{'):
            code, message = await error_of(zot.call_tool(name, {}))
            assert code == "not_found" and len(message) < 200 and "\n" not in message, message
            code, message = await error_of(zot.invoke_command(name))
            assert code == "not_found" and len(message) < 200 and "\n" not in message, message
            code, message = await error_of(zot.ext_enable(name))
            assert code in ("not_found", "bad_request") and len(message) < 300, message
        assert await zot.ping()
        assert (await zot.call_tool("forecast", {})).extension == "weather"


# --- trust and reload ---------------------------------------------------------------


async def test_trust_starts_one_that_failed_before(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # A project extension, trusted, fails; the user fixes its script and trusts it.
    directory = project / ".zot" / "extensions" / "repo-tool"
    directory.mkdir(parents=True)
    (directory / "extension.json").write_text(
        json.dumps({"name": "repo-tool", "exec": sys.executable, "args": ["run.py"]})
    )
    script = directory / "run.py"
    script.write_text("import sys\nsys.exit(3)\n")
    trust.trust(paths.home, project, [load(directory, Scope.PROJECT)])
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        await wait_state(zot, "repo-tool", "failed")
        script.write_text(
            "import runpy, sys\n"
            f"sys.argv = [{str(FAKE)!r}, '--name', 'repo-tool', '--tools', 'rt']\n"
            f"runpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
        )
        trusted = await zot.ext_trust()
        assert [(i.name, i.state) for i in trusted] == [("repo-tool", "ready")]
        assert (await zot.call_tool("rt", {})).extension == "repo-tool"
