"""The mcpServers JSON of MCP hosts read into manifests (zotd.model.mcp_servers), and a
project's .mcp.json found by discovery and vetted by trust: plain functions on files."""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from zotd.model import mcp_servers as ms
from zotd.model import trust
from zotd.model.discovery import HIDDEN, discover
from zotd.model.manage import ManageError, remove, set_enabled
from zotd.model.manifest import Kind, Scope

# --- the formats -------------------------------------------------------------------------

#: Claude Desktop's claude_desktop_config.json, as its docs show it.
CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "github": {
            "command": "docker",
            "args": ["run", "-i", "--rm", "-e", "GITHUB_TOKEN", "ghcr.io/github/github-mcp-server"],
            "env": {"GITHUB_TOKEN": "ghp_x"},
        },
    },
    "globalShortcut": "Ctrl+Space",
}


def one(spec: dict[str, Any], name: str = "s") -> ms.Entry:
    [e] = ms.entries({name: spec}, "f.json")
    return e


def test_claude_desktop() -> None:
    doc = ms.parse_config(json.dumps(CLAUDE_DESKTOP).encode(), "c.json")
    fs, gh = ms.entries(ms.servers_in(doc, "c.json"), "c.json")
    assert fs.manifest is not None and gh.manifest is not None
    assert (fs.name, fs.manifest.kind, fs.manifest.exec, fs.manifest.args) == (
        "filesystem",
        Kind.MCP,
        "npx",
        ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
    )
    assert gh.manifest.env == {"GITHUB_TOKEN": "ghp_x"}
    assert fs.warnings == gh.warnings == []


def test_claude_code_types() -> None:
    stdio = one({"type": "stdio", "command": "node", "args": ["srv.js"], "env": {}})
    assert stdio.manifest is not None and stdio.manifest.exec == "node"
    for kind in ("http", "streamable-http"):
        e = one({"type": kind, "url": "https://x.example/mcp", "headers": {"X-Key": "k"}})
        assert e.manifest is not None, e
        assert (e.manifest.url, e.manifest.headers, e.manifest.exec) == (
            "https://x.example/mcp",
            {"X-Key": "k"},
            "",
        )
        assert e.warnings == []


def test_claude_json_top_level_and_this_projects() -> None:
    doc = {
        "numStartups": 3,
        "mcpServers": {"a": {"command": "x"}},
        "projects": {
            "/w": {"mcpServers": {"b": {"command": "y"}}, "history": []},
            "/other": {"mcpServers": {"c": {"command": "z"}}},
        },
    }
    assert list(ms.servers_in(doc, "f", Path("/w"))) == ["a", "b"]
    assert list(ms.servers_in(doc, "f")) == ["a"]
    assert list(ms.servers_in(doc, "f", Path("/w"), top=False)) == ["b"]


def test_cursor_url_without_type_is_streamable_http() -> None:
    e = one({"url": "http://localhost:3000/mcp"})
    assert e.manifest is not None and e.manifest.url == "http://localhost:3000/mcp"
    assert e.warnings == ["no `type`: taken to be a streamable-HTTP server"]


def test_zot_mcp_bridge_jsonc_transport_and_idle_timeout() -> None:
    text = """{
      // zot's mcp-bridge: JSONC
      "mcpServers": {
        "grep": {"transport": "streamable-http", "url": "https://mcp.grep.app/"}, /* remote */
        "fs": {"command": "npx", "args": ["-y", "pkg", "//not a comment"], "idleTimeout": 300,
               "connectTimeout": 30,},
      },
    }"""
    doc = ms.parse_config(text.encode(), "mcp.json")
    grep, fs = ms.entries(ms.servers_in(doc, "mcp.json"), "mcp.json")
    assert grep.manifest is not None and grep.manifest.url == "https://mcp.grep.app/"
    assert fs.manifest is not None
    assert fs.manifest.args == ["-y", "pkg", "//not a comment"]
    assert fs.manifest.idle_stop == 300.0
    assert fs.warnings == ["ignored: `connectTimeout`"]


def test_sse_is_refused_with_the_reason() -> None:
    e = one({"type": "sse", "url": "https://x.example/sse"})
    assert e.manifest is None
    assert e.error.startswith("type 'sse' (the older HTTP+SSE transport) is not supported")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({}, "it has neither `command` (a stdio server) nor `url` (an HTTP one)"),
        (
            {"command": "x", "url": "http://h"},
            "it has both `command` and `url`; an MCP server has one",
        ),
        ({"type": "ws", "url": "ws://h"}, "unknown type 'ws' (use 'stdio' or 'http')"),
        ({"type": "stdio"}, "a stdio server needs `command`, a non-empty string"),
        ({"command": "x", "args": "a b"}, "`args` is not a list of strings"),
        ({"command": "x", "env": {"A": None}}, "`env.A` is not a string"),
        ({"type": "http"}, "an HTTP server needs `url`, a string"),
        ({"url": "ftp://h"}, "f.json: s: `url` must start with http:// or https://"),
        ("npx x", "its entry is not a JSON object"),
    ],
)
def test_bad_entries_say_why(spec: Any, error: str) -> None:
    e = one(spec)
    assert (e.manifest, e.error) == (None, error)


def test_a_name_that_is_no_extension_name() -> None:
    e = one({"command": "x"}, name="my server/1")
    assert e.bad_name and e.manifest is None
    assert e.error == (
        "'my server/1' is not a valid extension name (letters, digits, '.', '_' and '-', "
        "starting with a letter or digit); rename it in f.json, or add it as "
        "`zot ext add-mcp my-server-1 ...`"
    )


def test_variables_pass_through_or_are_noted() -> None:
    e = one({"command": "x", "env": {"TOKEN": "${TOKEN}", "URL": "${BASE}/v1"}})
    assert e.manifest is not None
    assert (e.manifest.env, e.manifest.env_passthrough) == ({"URL": "${BASE}/v1"}, ["TOKEN"])
    assert e.warnings == [
        "${BASE} is passed as written: zotd does not expand variables "
        '(an env entry "KEY": "${KEY}" passes the daemon\'s own KEY on)'
    ]


def test_disabled_entry() -> None:
    e = one({"command": "x", "disabled": True})
    assert e.manifest is not None and not e.manifest.enabled


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            b'{"mcpServers": {"a": {"command": "x",}\n  "b": 1}}',
            "f.json:2:3: invalid JSON: Expecting ',' delimiter",
        ),
        (b"[1, 2]", "f.json: not a JSON object (an object with `mcpServers` is expected)"),
        (b"\xff\xfe", "f.json: not UTF-8 text (byte 0)"),
        (b'{"a": ' + b"[" * 100_000, "f.json: invalid JSON: nested too deeply"),
    ],
)
def test_bad_files(data: bytes, error: str) -> None:
    with pytest.raises(ms.ConfigError) as info:
        ms.parse_config(data, "f.json")
    assert str(info.value) == error


def test_mcp_servers_not_an_object() -> None:
    with pytest.raises(ms.ConfigError, match=r"`mcpServers` is not a JSON object"):
        ms.servers_in({"mcpServers": []}, "f.json")


def test_read_config_is_bounded_and_reads_regular_files_only(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048 + b"{}")
    with pytest.raises(ms.ConfigError, match=r"big.json: it is larger than 1 KiB"):
        ms.read_config(big, 1024)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ms.ConfigError, match=r"it is a FIFO, not a regular file"):
        ms.read_config(fifo)
    with pytest.raises(FileNotFoundError):
        ms.read_config(tmp_path / "none.json")


def test_at_most_max_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ms, "MAX_SERVERS", 2)
    out = ms.entries({f"s{i}": {"command": "x"} for i in range(5)}, "f.json")
    assert [e.name for e in out] == ["s0", "s1", ""]
    assert out[-1].error == "f.json: 3 more servers left out (at most 2)"


def test_manifest_json_writes_only_what_is_set() -> None:
    e = one({"type": "http", "url": "https://h/mcp", "headers": {"A": "b"}, "disabled": True})
    assert e.manifest is not None
    assert json.loads(ms.manifest_json(e.manifest)) == {
        "name": "s",
        "kind": "mcp",
        "url": "https://h/mcp",
        "headers": {"A": "b"},
        "enabled": False,
    }


# --- a project's .mcp.json: discovery, trust ---------------------------------------------


def server_script(root: Path) -> Path:
    script = root / "srv.py"
    script.write_text("print('v1')\n")
    return script


def write_mcp_json(ws: Path, servers: dict[str, Any]) -> None:
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_project_servers_are_project_extensions_run_in_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    server_script(ws)
    write_mcp_json(ws, {"py": {"command": sys.executable, "args": ["srv.py"]}})
    [f] = discover(workspace=ws, global_dir=tmp_path / "g")
    assert (f.name, f.scope, f.dir, f.origin, f.sharing) == (
        "py",
        Scope.PROJECT,
        ws,
        ws / ".mcp.json",
        "workspace",
    )
    assert f.argv == [sys.executable, "srv.py"] and not f.error


def test_a_bad_entry_is_listed_failed_and_a_bad_name_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write_mcp_json(ws, {"old": {"type": "sse", "url": "http://h/sse"}, "a b": {"command": "x"}})
    [f] = discover(workspace=ws, global_dir=tmp_path / "g")
    assert f.name == "old" and f.error.startswith(f"{ws}/.mcp.json: old: type 'sse'")
    assert "'a b' is not a valid extension name" in caplog.text


def test_bad_json_is_logged_with_its_position(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mcp.json").write_text('{"mcpServers": {\n  "a": }')
    assert discover(workspace=ws, global_dir=tmp_path / "g") == []
    assert f"{ws}/.mcp.json:2:8: invalid JSON: Expecting value" in caplog.text


def test_the_extension_directory_wins_and_the_entry_is_passed_over(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    d = ws / ".zot" / "extensions" / "py"
    d.mkdir(parents=True)
    (d / "extension.json").write_text(json.dumps({"name": "py", "kind": "mcp", "exec": "python3"}))
    write_mcp_json(ws, {"py": {"command": "python3"}})
    [f] = discover(workspace=ws, global_dir=tmp_path / "g")
    assert (f.dir, f.origin) == (d, None)
    [aside] = f.passed_over
    assert (aside.found.origin, aside.why) == (ws / ".mcp.json", HIDDEN)
    assert aside.reason == f"the project copy in {d} comes first"


def vetted(ws: Path, home: Path) -> list[Any]:
    vet = partial(trust.vet, workspace=ws, store=trust.load(home))
    return discover(workspace=ws, global_dir=home / "extensions", vet=vet)


def test_trust_of_an_entry_pins_it_and_the_script_it_runs(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    script = server_script(ws)
    write_mcp_json(ws, {"py": {"command": "python3", "args": ["srv.py"]}})
    [f] = vetted(ws, home)
    assert f.untrusted == (
        f"the servers of a project's .mcp.json run only once trusted: run `zot ext trust` in {ws} "
        "to allow it"
    )
    assert trust.trust(home, ws, [f]) == ["py"]
    assert json.loads((home / "trust.json").read_text())["workspaces"][str(ws)].keys() == {
        ".mcp.json:py"
    }
    assert vetted(ws, home)[0].untrusted == ""
    script.write_text("print('v2')\n")  # what it runs changed
    changed = vetted(ws, home)[0].untrusted
    assert changed.startswith("its .mcp.json entry changed since it was trusted")
    script.write_text("print('v1')\n")
    assert vetted(ws, home)[0].untrusted == ""
    write_mcp_json(ws, {"py": {"command": "python3", "args": ["srv.py"], "env": {"A": "1"}}})
    assert vetted(ws, home)[0].untrusted.startswith("its .mcp.json entry changed")


def test_an_entry_running_a_file_outside_the_workspace_cannot_be_trusted(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    outside = server_script(tmp_path)
    write_mcp_json(ws, {"py": {"command": "python3", "args": [str(outside)]}})
    [f] = vetted(ws, home)
    assert f.error.startswith(f"cannot be trusted: its argument {str(outside)!r} names a path")


def test_entries_are_neither_removed_nor_rewritten(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write_mcp_json(ws, {"py": {"command": "python3"}})
    [f] = discover(workspace=ws, global_dir=tmp_path / "g")
    with pytest.raises(ManageError, match=r"py is a server of .*\.mcp\.json, which zotd does not"):
        remove(f, global_dir=tmp_path / "g")
    with pytest.raises(ManageError, match=r'set "disabled": true in its entry there'):
        set_enabled(f, False)
    assert ws.is_dir() and sorted(os.listdir(ws)) == [".mcp.json"]
