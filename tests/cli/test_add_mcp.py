"""``zot ext add-mcp`` and ``zot ext import-mcp`` as a user runs them: the real CLI,
a private ``ZOT_HOME`` and ``HOME``, with and without a daemon, and a real MCP server
(``mcp_greeter.py``, written with the ``mcp`` package) whose tool is called once added."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import Cli
from tests.cli.test_ext_cli import entries, ext, infos, ok, outcome, read_until

GREETER = Path(__file__).with_name("mcp_greeter.py")
HTTP_GREETER = Path(__file__).with_name("mcp_http_greeter.py")
#: What add-mcp's and import-mcp's changes without a daemon say.
OFFLINE = "zotd is not running; it starts when zotd next starts"


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    c.env["HOME"] = str(short_tmp / "user")  # where the MCP hosts keep their files
    c.env.pop("XDG_CONFIG_HOME", None)
    (short_tmp / "user").mkdir()
    # An answer waits for a new server to be ready up to ready_grace: long enough
    # for Python and the mcp package to start on a busy machine.
    c.config.write_text("ready_grace = 60\n")
    try:
        yield c
    finally:
        c.cleanup()


def manifest(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((directory / "extension.json").read_text())
    return data


def greeter_argv() -> list[str]:
    return [sys.executable, str(GREETER)]


# --- add-mcp -----------------------------------------------------------------------------


def test_add_a_stdio_server_starts_it_and_its_tool_answers(cli: Cli) -> None:
    cli.start()
    dest = cli.home / "extensions" / "greeter"
    res = ext(cli, "add-mcp", "greeter", "--env", "GREETING=hi", "--", *greeter_argv())
    assert outcome(res) == (
        0,
        f"installed greeter (global, mcp) in {dest}: ready; provides greet\n"
        f"  stdio: {sys.executable} {GREETER}\n",
        "",
    )
    assert manifest(dest) == {
        "name": "greeter",
        "kind": "mcp",
        "exec": sys.executable,
        "args": [str(GREETER)],
        "env": {"GREETING": "hi"},
    }
    assert entries(cli.home / "extensions") == ["greeter"]  # no staging left behind
    assert ok(cli.zot("call", "greet", '{"who": "ann"}')).stdout == "hi, ann\n"
    info = infos(cli)["greeter"]
    assert (info["kind"], info["sharing"], info["state"]) == ("mcp", "shared", "ready")


def test_add_without_a_daemon_runs_once_it_starts(cli: Cli) -> None:
    dest = cli.home / "extensions" / "greeter"
    res = ext(
        cli, "add-mcp", "greeter", "--lazy", "--description", "says hi", "--", *greeter_argv()
    )
    assert outcome(res) == (
        0,
        f"installed greeter (global, mcp) in {dest}; {OFFLINE}\n  stdio: {sys.executable} {GREETER}\n",
        "",
    )
    assert manifest(dest)["lazy"] is True and manifest(dest)["description"] == "says hi"
    cli.start()
    assert ok(cli.zot("call", "greet", '{"who": "bo"}')).stdout == "hello, bo\n"


def test_add_to_the_project(cli: Cli) -> None:
    cli.start()
    dest = cli.project / ".zot" / "extensions" / "greeter"
    # A project's extension may run only what its directory holds or PATH finds:
    # the server's code inline.
    code = GREETER.read_text()
    res = ext(
        cli,
        "add-mcp",
        "greeter",
        "--project",
        "--scope",
        "workspace",
        "--",
        sys.executable,
        "-c",
        code,
    )
    assert res.returncode == 0, res
    assert res.stdout.startswith(
        f"installed greeter (project, mcp) in {dest}: ready; provides greet\n"
    )
    assert manifest(dest)["scope"] == "workspace"
    assert entries(cli.home / "extensions") == []
    assert ok(cli.zot("call", "greet", '{"who": "cy"}')).stdout == "hello, cy\n"
    info = infos(cli)["greeter"]
    assert (info["scope"], info["sharing"]) == ("project", "workspace")


def test_add_an_http_server(cli: Cli) -> None:
    dest = cli.home / "extensions" / "remote"
    res = ext(
        cli,
        "add-mcp",
        "remote",
        "--url",
        "https://mcp.example/mcp",
        "--header",
        "Authorization=Bearer t",
    )
    assert outcome(res) == (
        0,
        f"installed remote (global, mcp) in {dest}; {OFFLINE}\n  http: https://mcp.example/mcp\n",
        "",
    )
    assert manifest(dest) == {
        "name": "remote",
        "kind": "mcp",
        "url": "https://mcp.example/mcp",
        "headers": {"Authorization": "Bearer t"},
    }


def test_add_an_http_server_that_runs(cli: Cli) -> None:
    server = cli.popen(
        [sys.executable, str(HTTP_GREETER)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert server.stderr is not None
    said = read_until(server.stderr.fileno(), "(Press CTRL+C to quit)")
    match = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", said)
    assert match is not None, said
    url = f"{match[1]}/mcp"
    cli.start()
    dest = cli.home / "extensions" / "remote"
    res = ext(cli, "add-mcp", "remote", "--url", url, "--header", "X-Test=1")
    assert outcome(res) == (
        0,
        f"installed remote (global, mcp) in {dest}: ready; provides greet\n  http: {url}\n",
        "",
    )
    assert ok(cli.zot("call", "greet", '{"who": "ann"}')).stdout == "hello over http, ann\n"
    assert infos(cli)["remote"]["pid"] is None  # nothing of it runs here


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["bad name", "--", "x"], "zot: invalid name 'bad name': use letters, digits, '.', '_' and '-', starting with a letter or digit"),
        (["../up", "--", "x"], "zot: invalid name '../up': use letters, digits, '.', '_' and '-', starting with a letter or digit"),
        (["s", "--env", "NOEQUALS", "--", "x"], "zot: --env 'NOEQUALS': expected KEY=VALUE"),
        (["s", "--env", "1X=a", "--", "x"], "zot: --env '1X': not an environment variable name"),
        (["s"], "zot: say how to reach the server: `zot ext add-mcp NAME -- COMMAND [ARGS...]` for a stdio server, or `--url URL` for a streamable-HTTP one"),
        (["s", "--url", "http://h/mcp", "--", "x"], "zot: give a COMMAND (after `--`) or --url, not both"),
        (["s", "--url", "ftp://h/mcp"], "zot: --url 'ftp://h/mcp': it must start with http:// or https://"),
        (["s", "--url", "http://h", "--header", "Bad"], "zot: --header 'Bad': expected KEY=VALUE"),
        (["s", "--header", "A=b", "--", "x"], "zot: --header is for a server reached with --url"),
    ],
)  # fmt: skip
def test_bad_input_says_what_is_wrong(cli: Cli, args: list[str], error: str) -> None:
    res = ext(cli, "add-mcp", *args)
    assert outcome(res) == (2, "", error + "\n")
    assert not (cli.home / "extensions").exists()


def test_an_existing_name_is_refused_unless_force(cli: Cli) -> None:
    cli.start()
    dest = cli.home / "extensions" / "greeter"
    ok(ext(cli, "add-mcp", "greeter", "--", *greeter_argv()))
    res = ext(cli, "add-mcp", "greeter", "--env", "GREETING=hey", "--", *greeter_argv())
    assert outcome(res) == (
        1,
        "",
        f"zot: an extension named 'greeter' is already installed in {dest}; pass --force to replace it\n",
    )
    assert ok(cli.zot("call", "greet", '{"who": "di"}')).stdout == "hello, di\n"
    res = ok(
        ext(cli, "add-mcp", "greeter", "--force", "--env", "GREETING=hey", "--", *greeter_argv())
    )
    assert res.stdout.startswith(
        f"replaced greeter (global, mcp) in {dest}: ready; provides greet\n"
    )
    assert ok(cli.zot("call", "greet", '{"who": "di"}')).stdout == "hey, di\n"
    assert entries(cli.home / "extensions") == ["greeter"]


# --- import-mcp ----------------------------------------------------------------------------


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


def desktop_config(cli: Cli) -> Path:
    """A Claude Desktop config as the app writes it (with its other settings)."""
    return write(
        Path(cli.env["HOME"]) / ".config" / "Claude" / "claude_desktop_config.json",
        {
            "mcpServers": {
                "greeter": {
                    "command": sys.executable,
                    "args": [str(GREETER)],
                    "env": {"GREETING": "hi"},
                },
                "old-remote": {"type": "sse", "url": "https://mcp.example/sse"},
            },
            "globalShortcut": "",
        },
    )


def test_import_from_the_known_places(cli: Cli) -> None:
    user = Path(cli.env["HOME"])
    desktop = desktop_config(cli)
    cursor = write(
        user / ".cursor" / "mcp.json",
        '{\n  // Cursor\n  "mcpServers": {"remote": {"url": "https://mcp.example/mcp"},\n'
        '  "my server": {"command": "x"},}\n}\n',
    )
    bridge = write(
        cli.home / "mcp.json",
        {"mcpServers": {"grep": {"transport": "streamable-http", "url": "https://mcp.grep.app/"}}},
    )
    write(cli.project / ".mcp.json", {"mcpServers": {"local": {"command": "x"}}})
    ext_dir = cli.home / "extensions"
    res = ext(cli, "import-mcp", "--dry-run")
    assert outcome(res) == (
        0,
        "looked in:\n"
        f"  Claude Desktop: {desktop}: 2 servers\n"
        f"  Claude Code (user): {user}/.claude.json: not found\n"
        f"  Claude Code (this project): {user}/.claude.json: not found\n"
        f"  Cursor: {cursor}: 2 servers\n"
        f"  Cursor (this project): {cli.project}/.cursor/mcp.json: not found\n"
        f"  zot mcp-bridge: {bridge}: 1 server\n"
        f"  zot mcp-bridge (this project): {cli.project}/.zot/mcp.json: not found\n"
        f"would install greeter (global) in {ext_dir}/greeter: stdio: {sys.executable} {GREETER}\n"
        "skipped old-remote: type 'sse' (the older HTTP+SSE transport) is not supported: zotd "
        "speaks streamable HTTP; if the server has a streamable-HTTP endpoint (often .../mcp), "
        'use that with "type": "http"\n'
        f"would install remote (global) in {ext_dir}/remote: http: https://mcp.example/mcp\n"
        "  note: no `type`: taken to be a streamable-HTTP server\n"
        "skipped my server: 'my server' is not a valid extension name (letters, digits, '.', "
        f"'_' and '-', starting with a letter or digit); rename it in {cursor}, or add it as "
        "`zot ext add-mcp my-server ...`\n"
        f"would install grep (global) in {ext_dir}/grep: http: https://mcp.grep.app/\n"
        f"not imported: {cli.project}/.mcp.json: zotd runs a project's own servers as they are, "
        "once trusted (`zot ext trust`)\n",
        "",
    )
    assert not ext_dir.exists()  # a dry run writes nothing

    cli.start()
    res = ext(cli, "import-mcp")
    lines = res.stdout.splitlines()
    assert f"installed greeter (global, mcp) in {ext_dir}/greeter: ready; provides greet" in lines
    assert any(
        line.startswith(f"installed remote (global, mcp) in {ext_dir}/remote: ") for line in lines
    )
    assert entries(ext_dir) == ["greeter", "grep", "remote"]
    assert ok(cli.zot("call", "greet", '{"who": "ed"}')).stdout == "hi, ed\n"
    # The remote servers cannot be reached here: said, and the exit code is 1.
    assert res.returncode == 1

    # Again: every name exists now.
    res = ext(cli, "import-mcp", str(desktop))
    assert outcome(res)[:2] == (
        0,
        f"skipped greeter: {ext_dir}/greeter exists (use --force to replace it)\n"
        "skipped old-remote: type 'sse' (the older HTTP+SSE transport) is not supported: zotd "
        "speaks streamable HTTP; if the server has a streamable-HTTP endpoint (often .../mcp), "
        'use that with "type": "http"\n',
    )


def test_import_a_file_with_force_and_into_the_project(cli: Cli) -> None:
    cli.start()
    ok(ext(cli, "add-mcp", "greeter", "--", *greeter_argv()))
    dot_mcp = write(
        cli.tmp / "other" / ".mcp.json",
        {"mcpServers": {"greeter": {"type": "stdio", "command": sys.executable, "args": [str(GREETER)], "env": {"GREETING": "yo"}}}},
    )  # fmt: skip
    res = ok(ext(cli, "import-mcp", str(dot_mcp), "--force"))
    dest = cli.home / "extensions" / "greeter"
    assert res.stdout == f"replaced greeter (global, mcp) in {dest}: ready; provides greet\n"
    assert ok(cli.zot("call", "greet", '{"who": "fi"}')).stdout == "yo, fi\n"

    # --project: into ./.zot/extensions/, trusted (the user asked), where it cannot
    # run a file outside its directory: said so.
    res = ext(cli, "import-mcp", str(dot_mcp), "--project")
    proj = cli.project / ".zot" / "extensions" / "greeter"
    assert res.returncode == 1
    assert res.stdout.startswith(
        f"installed greeter (project, mcp) in {proj}: failed: cannot be trusted: its argument "
    )
    assert res.stdout.endswith(f"; the global one in {dest} runs instead\n")


def test_import_from_claude_json_takes_this_projects_servers_too(cli: Cli) -> None:
    claude = write(
        Path(cli.env["HOME"]) / ".claude.json",
        {
            "numStartups": 12,
            "mcpServers": {"u": {"command": "npx", "args": ["-y", "pkg"]}},
            "projects": {
                str(cli.project): {"mcpServers": {"p": {"type": "http", "url": "http://localhost:9/mcp"}}},
                "/elsewhere": {"mcpServers": {"e": {"command": "x"}}},
            },
        },
    )  # fmt: skip
    res = ok(ext(cli, "import-mcp", "--dry-run"))
    assert f"  Claude Code (user): {claude}: 1 server\n" in res.stdout
    assert f"  Claude Code (this project): {claude}: 1 server\n" in res.stdout
    assert f"would install u (global) in {cli.home}/extensions/u: stdio: npx -y pkg\n" in res.stdout
    proj = cli.project / ".zot" / "extensions"
    assert f"would install p (project) in {proj}/p: http: http://localhost:9/mcp\n" in res.stdout
    assert " e " not in res.stdout and "/e:" not in res.stdout


def test_import_of_bad_json_names_the_file_and_the_position(cli: Cli) -> None:
    bad = write(cli.tmp / "bad.json", '{"mcpServers": {\n  "a": {"command": "x"}\n  "b": {}}}')
    res = ext(cli, "import-mcp", str(bad))
    assert outcome(res) == (1, "", f"zot: {bad}:3:3: invalid JSON: Expecting ',' delimiter\n")
    res = ext(cli, "import-mcp", str(cli.tmp / "none.json"))
    assert outcome(res) == (1, "", f"zot: {cli.tmp / 'none.json'}: no such file\n")


def test_import_with_nothing_found(cli: Cli) -> None:
    res = ok(ext(cli, "import-mcp"))
    assert res.stdout.endswith("no MCP servers found; name a file: zot ext import-mcp FILE\n")
