"""``zot ext dev DIR`` as a user runs it: a real daemon (``zotd start``), the
command as a real process in the foreground, real edits, Ctrl+C (SIGINT to
its pid). DIR runs for the calling workspace alone, ahead of an installed
copy of its name; an edit restarts it; Ctrl+C takes it out again and the
installed copy comes back, with no process of the dev copy left."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, ZOT, Cli, read_line, wait_until
from tests.conftest import EXTENSIONS, pid_alive

cli = test_cli.cli  # the fixture, as this module's own

#: The extension the watch tests edit (its TOOL line).
WEATHER = EXTENSIONS / "watch_weather"
#: The installed ``weather`` (tools weather and forecast, command /deploy).
INSTALLED = EXTENSIONS / "docs-weather"


def weather_copy(root: Path) -> Path:
    directory = root / "weather"
    shutil.copytree(WEATHER, directory)
    return directory


def set_tool(directory: Path, tool: str) -> None:
    """Edits the extension so that it registers ``tool`` (in place, as an editor saves)."""
    lines = (WEATHER / "main.py").read_text().splitlines(keepends=True)
    text = "".join(f'TOOL = "{tool}"\n' if ln.startswith("TOOL = ") else ln for ln in lines)
    (directory / "main.py").write_text(text)


def tools(cli: Cli, cwd: Path | None = None) -> set[str]:
    res = subprocess.run(
        [str(ZOT), "tools"],
        cwd=cwd or cli.project,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert res.returncode == 0, res
    return {line.split()[0] for line in res.stdout.splitlines() if line.strip()}


def read_until(pipe: IO[bytes], last: str, seen: list[str]) -> list[str]:
    """Lines from ``pipe`` (appended to ``seen``) up to the one starting with ``last``."""
    deadline = time.monotonic() + WAIT
    while True:
        line = read_line(pipe, max(0.1, deadline - time.monotonic()))
        seen.append(line)
        if line.startswith(last):
            return seen


def start_dev(cli: Cli, directory: Path) -> subprocess.Popen[bytes]:
    return cli.popen(
        [str(ZOT), "ext", "dev", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def dev_pids(cli: Cli, directory: Path) -> set[int]:
    """The pids the dev copy's processes had (from its log notes: every start)."""
    log = (cli.home / "logs" / "ext-weather.log").read_text().splitlines()
    return {
        int(line.split("started pid ")[1].split(":")[0])
        for line in log
        if "started pid " in line and line.endswith("main.py")
    }


def test_dev_runs_for_this_workspace_restarts_on_an_edit_and_ctrl_c_brings_back_the_installed(
    cli: Cli,
) -> None:
    cli.start()
    installed = cli.home / "extensions" / "weather"
    res = cli.zot("ext", "install", str(INSTALLED))
    assert res.returncode == 0, res
    elsewhere = cli.tmp / "elsewhere"
    elsewhere.mkdir()
    assert tools(cli) == tools(cli, elsewhere) == {"weather", "forecast"}

    weather = weather_copy(cli.tmp / "src")
    dev = start_dev(cli, weather)
    assert dev.stdout is not None
    lines = read_until(dev.stdout, "weather: watching", [])
    assert lines[:2] == [
        f"weather: running from {weather} for this workspace: ready; provides /weather, get_weather",
        f"weather: in place of the global copy in {installed} until you stop; "
        "that one comes back then",
    ]
    assert lines[-1] == f"weather: watching {weather} for changes (Ctrl+C to stop)"
    assert tools(cli) == {"get_weather"}  # the dev copy, in this workspace only
    assert tools(cli, elsewhere) == {"weather", "forecast"}
    first = cli.extensions()["weather"]
    assert (first.dir, first.scope) == (str(weather), "explicit")

    set_tool(weather, "get_forecast")
    restarted = "weather: files changed (main.py); restarted: tools get_forecast, commands /weather"
    lines = read_until(dev.stdout, restarted, lines)
    wait_until(lambda: tools(cli) == {"get_forecast"}, WAIT, "the edited tool")
    assert tools(cli, elsewhere) == {"weather", "forecast"}
    # Its log comes too, as it is written: followed from the file, so its
    # line may come before the daemon's push above or after it.
    registering = "weather | weather: registering get_forecast"
    if not any(line.startswith(registering) for line in lines):
        read_until(dev.stdout, registering, lines)
    assert "weather | weather: registering get_weather" in lines
    second = cli.extensions()["weather"]
    assert second.pid != first.pid and first.pid is not None and not pid_alive(first.pid)

    dev.send_signal(signal.SIGINT)
    assert dev.wait(timeout=WAIT) == 0
    assert read_line(dev.stdout) == f"weather: stopped; the global copy in {installed} is back"
    assert tools(cli) == {"weather", "forecast"}
    assert cli.extensions()["weather"].dir == str(installed)
    started = dev_pids(cli, weather)
    assert {first.pid, second.pid} <= started
    assert not any(pid_alive(pid) for pid in started)  # nothing of the dev copy left


def test_hanging_up_removes_a_dev_extension_nothing_else_has(cli: Cli) -> None:
    cli.start()
    weather = weather_copy(cli.tmp / "src")
    dev = start_dev(cli, weather)
    assert dev.stdout is not None
    read_until(dev.stdout, "weather: watching", [])
    pid = cli.extensions()["weather"].pid
    assert pid is not None and pid_alive(pid)
    dev.kill()  # no Ctrl+C: the connection just ends
    dev.wait(timeout=WAIT)
    wait_until(lambda: "weather" not in cli.extensions(), WAIT, "the dev copy removed")
    wait_until(lambda: not pid_alive(pid), WAIT, "its process gone")
    assert "get_weather" not in cli.zot("tools").stdout

    # And Ctrl+C says so when nothing else has the name.
    dev = start_dev(cli, weather)
    assert dev.stdout is not None
    read_until(dev.stdout, "weather: watching", [])
    pid = cli.extensions()["weather"].pid
    dev.send_signal(signal.SIGINT)
    assert dev.wait(timeout=WAIT) == 0
    assert read_line(dev.stdout) == "weather: stopped; nothing else runs under that name here"
    assert "weather" not in cli.extensions()
    assert pid is not None and not pid_alive(pid)


def test_what_is_not_an_extension_directory_is_refused(cli: Cli) -> None:
    (cli.tmp / "file").write_text("")
    (cli.tmp / "empty").mkdir()
    (cli.tmp / "broken").mkdir()
    (cli.tmp / "broken" / "extension.json").write_text("{nope")
    res = cli.zot("ext", "dev", str(cli.tmp / "missing"))
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == f"zot: {cli.tmp / 'missing'}: no such directory\n"
    res = cli.zot("ext", "dev", str(cli.tmp / "file"))
    assert (res.returncode, res.stderr) == (2, f"zot: {cli.tmp / 'file'}: not a directory\n")
    cli.start()
    res = cli.zot("ext", "dev", str(cli.tmp / "empty"))
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == f"zot: no extension.json in {cli.tmp / 'empty'}\n"
    res = cli.zot("ext", "dev", str(cli.tmp / "broken"))
    assert res.returncode == 1
    assert res.stderr.startswith(f"zot: {cli.tmp / 'broken' / 'extension.json'}: invalid JSON")
    assert cli.extensions() == {}
