"""Command lines as people type them: global options before the command, and
options in places where they can only be a mistake (zotd/cli/argv.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import test_cli
from tests.cli.test_cli import Cli
from zotd.cli.argv import Misplaced, zot_argv, zotd_argv

cli = test_cli.cli  # the fixtures, as this module's own
ext_dir = test_cli.ext_dir


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        (["--json", "commands"], ["commands", "--json"]),
        (["--json", "--cwd", "p", "tools"], ["tools", "--json", "--cwd", "p"]),
        (["--cwd=p", "ext", "list"], ["ext", "list", "--cwd=p"]),
        (["--no-start", "ext", "logs", "x"], ["ext", "logs", "--no-start", "x"]),
        (["--token", "t", "run", "/go", "a"], ["run", "--token", "t", "/go", "a"]),
        (["--json", "hook", "pre-tool-use"], ["hook", "pre-tool-use", "--json"]),
        # Nothing to move, or nowhere to move it: cyclopts says what is wrong.
        (["commands", "--json"], ["commands", "--json"]),
        (["--json"], ["--json"]),
        (["--json", "--help"], ["--json", "--help"]),
        (["--help"], ["--help"]),
        (["run", "/go", "--ext", "x"], ["run", "/go", "--ext", "x"]),
    ],
)
def test_zot_reads_global_options_before_the_command(typed: list[str], read: list[str]) -> None:
    assert zot_argv(typed) == read


@pytest.mark.parametrize("typed", [["--ext", "d", "commands"], ["-e", "d"], ["--ext=d", "tools"]])
def test_zot_refuses_the_daemons_ext_option(typed: list[str]) -> None:
    with pytest.raises(Misplaced, match=r"^zot: --ext is an option of the daemon: `zotd --ext"):
        zot_argv(typed)


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        (["--socket", "s", "status"], ["status", "--socket", "s"]),
        (["--config=c", "stop"], ["stop", "--config=c"]),
        (["-e", "d"], ["-e", "d"]),  # the daemon itself
        (["--socket", "s", "-e", "d"], ["--socket", "s", "-e", "d"]),
        (["start", "-e", "d"], ["start", "-e", "d"]),
    ],
)
def test_zotd_reads_socket_and_config_before_the_command(typed: list[str], read: list[str]) -> None:
    assert zotd_argv(typed) == read


def test_zotd_says_what_is_wrong_with_the_order() -> None:
    with pytest.raises(Misplaced) as err:
        zotd_argv(["-e", "d", "status"])
    assert str(err.value) == (
        "zotd: -e before `status`: it applies to the daemon itself (`zotd -e ...`) "
        "or `zotd start -e ...`"
    )
    with pytest.raises(Misplaced) as err:
        zotd_argv(["--ext", "d", "start"])
    assert (
        str(err.value)
        == "zotd: --ext before `start`: put it after the command: `zotd start --ext ...`"
    )


@pytest.mark.parametrize(
    "typed", [["start", "-e", "a", "b"], ["-e", "a", "b"], ["--ext", "a", "b", "-e", "c"]]
)
def test_zotd_takes_one_directory_per_ext(typed: list[str]) -> None:
    option = typed[1] if typed[0] == "start" else typed[0]
    with pytest.raises(Misplaced) as err:
        zotd_argv(typed)
    assert (
        str(err.value)
        == f"zotd: {option} takes one directory: write `{option} a {option} b` for two"
    )


# --- as the programs run -----------------------------------------------------------------


def test_global_options_work_before_the_command(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    before = cli.zot("--json", "--cwd", str(cli.project), "tools")
    after = cli.zot("tools", "--json")
    assert before.returncode == 0, before
    assert before.stdout == after.stdout
    assert [t["name"] for t in json.loads(before.stdout)][:2] == ["a_rather_long_tool_name", "echo"]
    status = cli.zotd("--socket", str(cli.socket), "status", "--json")
    assert status.returncode == 0, status
    assert json.loads(status.stdout)["running"] is True


def test_misplaced_options_say_what_to_type(cli: Cli, ext_dir: Path) -> None:
    res = cli.zot("--ext", str(ext_dir), "commands")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == (
        "zot: --ext is an option of the daemon: `zotd --ext DIR` (or `zotd start --ext DIR`) "
        "loads an extension for one run; `zot ext install DIR` installs it\n"
    )
    res = cli.zotd("-e", str(ext_dir), "status")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == (
        "zotd: -e before `status`: it applies to the daemon itself (`zotd -e ...`) "
        "or `zotd start -e ...`\n"
    )
