"""``zot integrate AGENT``, run as a user runs it, on copies of real settings files.

Each test runs ``zot`` as a separate process with ``HOME`` (and the agents'
own overrides, ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``)
pointed at a temporary home holding copies of tests/integrate/, and checks
the files it leaves: zot's entries there, everything else byte for byte, a
backup of what was there, nothing written by ``--print``, the original
bytes back after ``--uninstall``. The last test runs the hook command it
wrote, as Claude Code would, against a real daemon with the example guard.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import StartDaemon
from tests.e2e.test_examples import ZOT, install, user_env
from zotd.client import connect
from zotd.integrations import hook_agents
from zotd.model.paths import Paths

FILES = Path(__file__).parents[1] / "integrate"
HOOKS = Path(__file__).parents[1] / "hooks"
TIMEOUT = 30.0
OVERRIDES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME")


@dataclass
class Ran:
    code: int
    out: str
    err: str


@dataclass
class Home:
    """A user's home and project, with copies of the settings files."""

    home: Path
    project: Path
    env: dict[str, str]

    def zot(self, *args: str, cwd: Path | None = None) -> Ran:
        res = subprocess.run(
            [str(ZOT), *args],
            cwd=cwd or self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        ran = Ran(res.returncode, res.stdout, res.stderr)
        assert "Traceback" not in ran.err, ran
        return ran

    def put(self, fixture: str, where: str) -> Path:
        path = self.home / where
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FILES / fixture, path)
        return path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def user(tmp_path: Path) -> Home:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    env["HOME"] = str(home)
    return Home(home, project, env)


def hook_command(agent: str) -> str:
    return shlex.join([str(ZOT), "hook", "--agent", agent])


def zot_hooks(value: dict[str, Any]) -> dict[str, list[str]]:
    """Each event's commands that run zot."""
    return {
        event: [h["command"] for g in groups for h in g["hooks"] if "zot" in h["command"]]
        for event, groups in value["hooks"].items()
    }


# --- each agent ---------------------------------------------------------------------------


def test_claude_user_settings_add_twice_print_and_uninstall(user: Home) -> None:
    settings = user.put("claude-project-settings.json", ".claude/settings.json")
    state = user.put("claude.json", ".claude.json")
    original = {p: p.read_bytes() for p in (settings, state)}

    dry = user.zot("integrate", "claude", "--print")
    assert dry.code == 0, dry
    assert {p: p.read_bytes() for p in original} == original
    assert not list(user.home.rglob("*.bak-zot*"))
    assert f'+                        "command": {json.dumps(hook_command("claude"))}\n' in dry.out
    assert f"--- {settings}\n+++ {settings}\n" in dry.out

    ran = user.zot("integrate", "claude")
    assert ran.code == 0, ran
    assert f"{settings}: changed (backup: settings.json.bak-zot)" in ran.out
    assert f"{state}: changed (backup: .claude.json.bak-zot)" in ran.out
    assert f"  added mcp zot: {ZOT} mcp" in ran.out
    value = json.loads(settings.read_text())
    events = hook_agents.adapter("claude").events
    assert {e: zot_hooks(value)[e] for e in events} == {e: [hook_command("claude")] for e in events}
    assert json.loads(state.read_text())["mcpServers"]["zot"] == {
        "command": str(ZOT),
        "args": ["mcp"],
    }
    assert (user.home / ".claude/settings.json.bak-zot").read_bytes() == original[settings]
    assert (user.home / ".claude.json.bak-zot").read_bytes() == original[state]
    after = snapshot(user.home)

    again = user.zot("integrate", "claude")
    assert again.code == 0, again
    assert again.out.endswith("nothing to change\n")
    assert ": unchanged" in again.out and "already there: hook SessionStart" in again.out
    assert snapshot(user.home) == after  # not even a backup

    gone = user.zot("integrate", "claude", "--uninstall")
    assert gone.code == 0, gone
    assert "removed hook" in gone.out and "removed mcp zot" in gone.out
    assert {p: p.read_bytes() for p in original} == original
    assert (user.home / ".claude/settings.json.bak-zot-2").exists()


def test_claude_project_settings_are_created_and_old_zot_hooks_replaced(user: Home) -> None:
    settings = user.project / ".claude" / "settings.json"
    settings.parent.mkdir()
    shutil.copy(FILES / "claude-settings.json", settings)
    ran = user.zot("integrate", "claude", "--project")
    assert ran.code == 0, ran
    assert ran.out.startswith("zot integrate claude: the project's Claude Code settings\n")
    assert f"replaced hook PreToolUse: zot hook pre-tool-use -> {hook_command('claude')}" in ran.out
    assert f"{user.project / '.mcp.json'}: created" in ran.out
    assert json.loads((user.project / ".mcp.json").read_text()) == {
        "mcpServers": {"zot": {"command": str(ZOT), "args": ["mcp"]}}
    }
    hooks = zot_hooks(json.loads(settings.read_text()))
    assert hooks["PreToolUse"] == hooks["Stop"] == [hook_command("claude")]
    assert not (user.home / ".claude").exists()  # the user's settings are not touched
    # Uninstalled, the file zot created goes, and the settings lose zot's hooks, old ones too.
    assert user.zot("integrate", "claude", "--project", "--uninstall").code == 0
    assert not (user.project / ".mcp.json").exists()
    assert "zot hook" not in settings.read_text()


def test_claude_config_dir_is_honoured(user: Home, tmp_path: Path) -> None:
    user.env["CLAUDE_CONFIG_DIR"] = str(tmp_path / "alt")
    assert user.zot("integrate", "claude").code == 0
    assert (tmp_path / "alt" / "settings.json").exists()
    assert (tmp_path / "alt" / ".claude.json").exists()
    assert not (user.home / ".claude").exists() and not (user.home / ".claude.json").exists()


def test_codex_config_toml_keeps_its_comments_and_tables(user: Home, tmp_path: Path) -> None:
    codex = tmp_path / "codex-home"
    user.env["CODEX_HOME"] = str(codex)
    codex.mkdir()
    shutil.copy(FILES / "codex-config.toml", codex / "config.toml")
    shutil.copy(FILES / "codex-hooks.json", codex / "hooks.json")
    original = snapshot(codex)
    ran = user.zot("integrate", "codex")
    assert ran.code == 0, ran
    config = (codex / "config.toml").read_text()
    assert config.startswith(original["config.toml"].decode())  # appended: all else as it was
    assert tomllib.loads(config)["mcp_servers"]["zot"] == {"command": str(ZOT), "args": ["mcp"]}
    value = json.loads((codex / "hooks.json").read_text())
    events = hook_agents.adapter("codex").events
    assert {e: zot_hooks(value)[e] for e in events} == {e: [hook_command("codex")] for e in events}
    assert (
        value["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "~/.codex/hooks/no-force-push.sh"
    )
    assert not (user.home / ".codex").exists()
    assert user.zot("integrate", "codex").out.endswith("nothing to change\n")
    assert user.zot("integrate", "codex", "--uninstall").code == 0
    now = snapshot(codex)
    assert {k: now[k] for k in original} == original
    assert now["config.toml.bak-zot"] == original["config.toml"]


def test_codex_project_settings(user: Home) -> None:
    ran = user.zot("integrate", "codex", "--project", "--json")
    assert ran.code == 0, ran
    report = json.loads(ran.out)
    assert (report["agent"], report["scope"], report["print"]) == ("codex", "project", False)
    assert [(f["path"], f["state"]) for f in report["files"]] == [
        (str(user.project / ".codex" / "hooks.json"), "created"),
        (str(user.project / ".codex" / "config.toml"), "created"),
    ]
    assert report["files"][1]["changes"] == [
        {"action": "added", "kind": "mcp", "name": "zot", "command": f"{ZOT} mcp"}
    ]
    assert (user.project / ".codex" / "config.toml").read_text() == (
        f'[mcp_servers.zot]\ncommand = "{ZOT}"\nargs = ["mcp"]\n'
    )


def test_gemini_settings_with_comments(user: Home, tmp_path: Path) -> None:
    user.env["GEMINI_CLI_HOME"] = str(tmp_path / "g")
    path = tmp_path / "g" / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    shutil.copy(FILES / "gemini-settings.json", path)
    original = path.read_bytes()
    ran = user.zot("integrate", "gemini")
    assert ran.code == 0, ran
    assert "added hook SessionStart, BeforeAgent, BeforeTool" in ran.out
    text = path.read_text()
    assert text.startswith("// Gemini CLI user settings\n{")
    assert "/* Servers: the team's, and mine */" in text
    assert f'"command": {json.dumps(hook_command("gemini"))}' in text
    assert user.zot("integrate", "gemini").out.endswith("nothing to change\n")
    assert user.zot("integrate", "gemini", "--uninstall").code == 0
    assert path.read_bytes() == original


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "where", "content", "why"),
    [
        (
            "claude",
            ".claude/settings.json",
            '{"hooks": {,}}\n',
            "not valid JSON: expected a key in double quotes at line 1 column 12",
        ),
        (
            "claude",
            ".claude.json",
            '{"mcpServers": {"zot": {"command": "npx"}}}',
            "is not `zot mcp`",
        ),
        ("codex", ".codex/config.toml", "model = 'x\n", "not valid TOML"),
        ("gemini", ".gemini/settings.json", '{"hooks": []}', "hooks is not an object"),
    ],
)
def test_a_file_it_cannot_edit_is_left_untouched_and_nothing_written(
    user: Home, agent: str, where: str, content: str, why: str
) -> None:
    path = user.home / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    before = snapshot(user.home)
    ran = user.zot("integrate", agent)
    assert ran.code == 1, ran
    assert ran.out == ""
    assert ran.err.startswith(f"zot integrate: {path}: ") and why in ran.err, ran
    assert ran.err.rstrip().endswith("nothing changed"), ran
    assert snapshot(user.home) == before


def test_an_unknown_agent_is_a_usage_error(user: Home) -> None:
    ran = user.zot("integrate", "cursor")
    assert ran.code == 2, ran
    assert "claude" in ran.err and "codex" in ran.err


def test_a_symlinked_settings_file_is_edited_where_it_points(user: Home, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    shutil.copy(FILES / "claude-project-settings.json", real)
    link = user.home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    assert user.zot("integrate", "claude").code == 0
    assert link.is_symlink()
    assert "hook --agent claude" in real.read_text()


# --- the command it wrote works -------------------------------------------------------------


async def test_the_hook_command_written_answers_claude_code_from_a_real_daemon(
    paths: Paths, project: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    env = user_env(paths) | {"HOME": str(tmp_path)}
    for name in OVERRIDES:
        env.pop(name, None)
    res = await trio.run_process(
        [str(ZOT), "integrate", "claude", "--project"], cwd=project, env=env, capture_stdout=True
    )
    assert res.returncode == 0
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    command = group["hooks"][0]["command"]
    await start_daemon(env=env)
    async with connect(paths.socket, cwd=project) as zot:
        await install(zot, "guard")
    payload = json.loads((HOOKS / "claude" / "PreToolUse-dangerous.json").read_text())
    stdin = json.dumps(payload | {"cwd": str(project)}).encode()
    with trio.fail_after(TIMEOUT):
        # As Claude Code runs a hook: the command line through a shell.
        ran = await trio.run_process(
            ["sh", "-c", command],
            cwd=project,
            env=env,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert ran.returncode == 0, ran
    answer = json.loads(ran.stdout)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", answer
    assert "rm -rf /" in answer["hookSpecificOutput"]["permissionDecisionReason"]
