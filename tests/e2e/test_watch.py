"""``zotd --ext DIR --watch`` end to end: a real daemon in the foreground,
real extension processes, real file changes. Editing the watched
extension's script restarts it alone, with the new registrations, and the
daemon's terminal says so; the other extension keeps its process."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, Cli, wait_until
from tests.conftest import EXTENSIONS, add_extension, pid_alive

cli = test_cli.cli  # the fixture, as this module's own

#: The extension the watch tests edit (its TOOL line).
WEATHER = EXTENSIONS / "watch_weather"


def weather_copy(root: Path) -> Path:
    """A copy of the watched extension to edit: ``root/weather``."""
    directory = root / "weather"
    shutil.copytree(WEATHER, directory)
    return directory


def script(tool: str) -> str:
    """The extension's script, registering ``tool``."""
    lines = (WEATHER / "main.py").read_text().splitlines(keepends=True)
    return "".join(f'TOOL = "{tool}"\n' if ln.startswith("TOOL = ") else ln for ln in lines)


def set_tool(directory: Path, tool: str) -> None:
    """Edits the extension so that it registers ``tool`` (as an editor saves: in place)."""
    (directory / "main.py").write_text(script(tool))


def loads_watchfiles(pid: int) -> bool:
    """Whether process ``pid`` has watchfiles' native module mapped (Linux)."""
    return "_rust_notify" in Path(f"/proc/{pid}/maps").read_text()


def tool_names(cli: Cli) -> set[str]:
    return {t.split()[0] for t in cli.zot("tools").stdout.splitlines() if t.strip()}


def wait_for_text(path: Path, text: str, what: str) -> str:
    wait_until(lambda: text in path.read_text(), WAIT, what)
    return path.read_text()


def test_an_edit_restarts_the_watched_extension_alone_and_says_so(cli: Cli) -> None:
    weather = weather_copy(cli.tmp)
    other = add_extension(cli.tmp / "exts", "fx", "--tools", "echo")
    out = cli.tmp / "zotd.out"
    with out.open("wb") as terminal:
        daemon = cli.popen(
            [sys.executable, "-m", "zotd", "--ext", str(weather), "--ext", str(other), "--watch"],
            stdout=terminal,
            stderr=terminal,
        )
    wait_for_text(out, f"weather: watching {weather} for changes", "weather watched")
    wait_for_text(out, f"fx: watching {other} for changes", "fx watched")
    before = cli.extensions()  # (the project's workspace starts)
    assert before["weather"].tools == ["get_weather"] and before["weather"].commands == ["weather"]
    assert tool_names(cli) == {"get_weather", "echo"}
    weather_pid, fx_pid = before["weather"].pid, before["fx"].pid

    set_tool(weather, "get_forecast")
    wait_until(lambda: tool_names(cli) == {"get_forecast", "echo"}, WAIT, "the new tool alone")
    after = cli.extensions()
    assert after["fx"].pid == fx_pid and after["fx"].restarts == 0  # left running
    assert after["weather"].pid != weather_pid and after["weather"].restarts == 1
    assert weather_pid is not None and not pid_alive(weather_pid)
    text = wait_for_text(out, "weather: files changed", "the terminal line")
    assert (
        "weather: files changed (main.py); restarted: tools get_forecast, commands /weather\n"
        in text
    )

    # A broken edit: it says why it failed; fixed, it is back.
    (weather / "main.py").write_text("this is not python(\n")
    text = wait_for_text(out, "weather: files changed (main.py); failed to start: ", "the failure")
    assert "SyntaxError" in text
    set_tool(weather, "get_snow")
    wait_until(lambda: tool_names(cli) == {"get_snow", "echo"}, WAIT, "the fixed extension")
    assert cli.extensions()["fx"].pid == fx_pid
    if sys.platform == "linux":
        assert loads_watchfiles(daemon.pid)

    daemon.send_signal(signal.SIGINT)
    assert daemon.wait(timeout=WAIT) == 0, out.read_text()
    assert "Traceback" not in out.read_text()
    assert not pid_alive(fx_pid)


def test_watch_needs_an_ext_directory(cli: Cli) -> None:
    res = cli.zotd("--watch")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "zotd: --watch watches the --ext directories: name one with --ext DIR\n"
    assert not cli.socket.exists()


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/maps")
def test_a_daemon_without_watch_never_loads_the_watcher(cli: Cli) -> None:
    weather = weather_copy(cli.tmp)
    pid = cli.start("--ext", str(weather))
    assert tool_names(cli) == {"get_weather"}
    assert not loads_watchfiles(pid)
