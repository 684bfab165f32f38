"""A project's own ``.mcp.json``: its servers are project-local MCP extensions behind the
workspace's trust, run in the workspace root. A real daemon, the real CLI, and a real MCP
server (``tests/cli/mcp_greeter.py``, copied into the project as a repository would have it)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import Cli
from tests.cli.test_ext_cli import ext, infos, ok

GREETER = Path(__file__).parent.parent / "cli" / "mcp_greeter.py"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    c.config.write_text("ready_grace = 60\n")  # Python and mcp start slowly on a busy machine
    try:
        yield c
    finally:
        c.cleanup()


def clone(cli: Cli, greeting: str = "hello") -> None:
    """The project as cloned: a server script and the .mcp.json that runs it, relative
    to the workspace root (it runs only with the workspace root as its cwd)."""
    shutil.copy(GREETER, cli.project / "srv.py")
    entry = {"command": sys.executable, "args": ["srv.py"], "env": {"GREETING": greeting}}
    (cli.project / ".mcp.json").write_text(json.dumps({"mcpServers": {"greeter": entry}}))


def test_untrusted_then_trusted_then_changed(cli: Cli) -> None:
    clone(cli)
    cli.start()
    info = infos(cli)["greeter"]
    assert (info["scope"], info["state"], info["kind"], info["dir"]) == (
        "project",
        "untrusted",
        "mcp",
        str(cli.project),
    )
    assert "the servers of a project's .mcp.json run only once trusted" in info["last_error"]
    assert info["pid"] is None
    assert ok(cli.zot("tools")).stdout == "no tools (no extension registered one)\n"
    res = cli.zot("call", "greet", '{"who": "al"}')
    assert res.returncode != 0 and "greeter" in res.stderr

    res = ok(ext(cli, "trust"))
    assert res.stdout.startswith("greeter: ready; provides greet\n")
    assert ok(cli.zot("call", "greet", '{"who": "al"}')).stdout == "hello, al\n"
    info = infos(cli)["greeter"]
    assert (info["state"], info["sharing"]) == ("ready", "workspace")

    # The script it runs changes (a pull, say): untrusted again, at the next reload.
    (cli.project / "srv.py").write_text(
        GREETER.read_text().replace('return f"', 'return "(v2) " + f"')
    )
    res = ext(cli, "reload", "greeter")
    assert (res.returncode, res.stderr) == (
        1,
        f"zot: greeter is not trusted yet; run `zot ext trust` in {cli.project}\n",
    )
    info = infos(cli)["greeter"]
    assert info["state"] == "untrusted"
    assert info["last_error"].startswith("its .mcp.json entry changed since it was trusted")
    ok(ext(cli, "trust"))
    assert ok(cli.zot("call", "greet", '{"who": "al"}')).stdout == "(v2) hello, al\n"

    # Its entry changes (and the script is as first trusted): the same.
    clone(cli, greeting="hi")
    assert ext(cli, "reload", "greeter").returncode == 1
    assert infos(cli)["greeter"]["state"] == "untrusted"
    ok(ext(cli, "trust"))
    assert ok(cli.zot("call", "greet", '{"who": "al"}')).stdout == "hi, al\n"


def test_an_extension_directory_of_the_same_name_wins(cli: Cli) -> None:
    clone(cli)
    d = cli.project / ".zot" / "extensions" / "greeter"
    d.mkdir(parents=True)
    shutil.copy(GREETER, d / "srv.py")
    manifest: dict[str, Any] = {"name": "greeter", "kind": "mcp", "exec": sys.executable}
    manifest.update(args=["srv.py"], env={"GREETING": "from .zot"})
    (d / "extension.json").write_text(json.dumps(manifest))
    cli.start()
    ok(ext(cli, "trust"))
    info = infos(cli)["greeter"]
    assert (info["dir"], info["state"]) == (str(d), "ready")
    [aside] = info["passed_over"]
    assert (aside["dir"], aside["why"]) == (str(cli.project), "hidden")
    assert aside["reason"] == f"the project copy in {d} comes first"
    assert ok(cli.zot("call", "greet", '{"who": "bo"}')).stdout == "from .zot, bo\n"
