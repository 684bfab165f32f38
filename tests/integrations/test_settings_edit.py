"""zot's entries added to and taken out of agents' settings files, as text.

The files of tests/integrate/ are realistic copies of each agent's settings:
other tools' hooks in the same events, other MCP servers, comments (in
Gemini's JSON and Codex's TOML), keys in no particular order, one-line and
spread-out arrays, and zot entries of the first ``zot hook pre-tool-use``
style.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from zotd.integrations import hook_agents, settings_edit, settings_json, settings_toml
from zotd.integrations.integrate_targets import TOOL_EVENTS, targets
from zotd.integrations.settings_edit import SettingsError

FILES = Path(__file__).parents[1] / "integrate"
ZOT = "/opt/zot env/bin/zot"  # a path that needs quoting in a command line
CLAUDE = "'/opt/zot env/bin/zot' hook --agent claude"
GEMINI = "'/opt/zot env/bin/zot' hook --agent gemini"


def text(name: str) -> str:
    return (FILES / name).read_text()


def add_claude(old: str) -> settings_edit.Edit:
    events = hook_agents.adapter("claude").events
    return settings_edit.add_hooks(old, events, CLAUDE, tool_events=TOOL_EVENTS["claude"])


def zot_commands(value: dict[str, Any]) -> dict[str, list[str]]:
    """Each event's zot hook commands."""
    return {
        event: [
            h["command"]
            for g in groups
            for h in g.get("hooks", [])
            if settings_edit.is_zot(h.get("command"), "hook")
        ]
        for event, groups in value.get("hooks", {}).items()
    }


def test_claudes_hooks_are_added_beside_the_others_and_old_zot_ones_replaced() -> None:
    old = text("claude-settings.json")
    edit = add_claude(old)
    value = json.loads(edit.text)
    events = hook_agents.adapter("claude").events
    # One zot hook per event, the new command; other tools' hooks where they were.
    found = zot_commands(value)
    assert {e: found[e] for e in events} == {e: [CLAUDE] for e in events}
    assert found["Notification"] == []
    pre = value["hooks"]["PreToolUse"]
    assert pre[0]["hooks"][0]["command"] == "$CLAUDE_PROJECT_DIR/.claude/hooks/check-secrets.sh"
    assert pre[1] == {"matcher": "*", "hooks": [{"type": "command", "command": CLAUDE}]}
    assert value["hooks"]["SessionStart"] == [{"hooks": [{"type": "command", "command": CLAUDE}]}]
    assert value["hooks"]["PostToolUse"][1]["matcher"] == "*"
    # Everything else as it was, keys in their order.
    assert settings_edit.without_zot(value) == settings_edit.without_zot(json.loads(old))
    assert list(value) == list(json.loads(old))
    assert list(value["hooks"])[:4] == ["PreToolUse", "PostToolUse", "Stop", "Notification"]
    # What was replaced is said.
    replaced = {c.name: c.was for c in edit.changes if c.action == "replaced"}
    assert replaced == {"PreToolUse": "zot hook pre-tool-use", "Stop": "zot hook stop"}
    assert {c.action for c in edit.changes} == {"added", "replaced"}


def test_lines_outside_zots_entries_are_untouched() -> None:
    old = text("claude-settings.json")
    new = add_claude(old).text
    kept = [line for line in old.splitlines() if "zot hook" not in line]
    lines = new.splitlines()
    # Every line of the old file is still there, in order.
    it = iter(lines)
    assert all(any(line == other for other in it) for line in kept)


def test_a_second_run_changes_nothing() -> None:
    first = add_claude(text("claude-settings.json"))
    second = add_claude(first.text)
    assert second.text == first.text
    assert not second.changed
    assert {c.action for c in second.changes} == {"kept"}


@pytest.mark.parametrize("name", ["claude-project-settings.json", "codex-hooks.json"])
def test_taking_zots_hooks_out_gives_back_the_file_byte_for_byte(name: str) -> None:
    old = text(name)
    added = add_claude(old)
    assert added.text != old
    removed = settings_edit.remove_hooks(added.text)
    assert removed.text == old
    assert len(removed.changes) == len(hook_agents.adapter("claude").events)


def test_taking_them_out_also_takes_the_first_style_out() -> None:
    old = text("claude-settings.json")
    removed = settings_edit.remove_hooks(old)
    assert {c.command for c in removed.changes} == {"zot hook pre-tool-use", "zot hook stop"}
    value = json.loads(removed.text)
    assert "Stop" not in value["hooks"]
    assert len(value["hooks"]["PreToolUse"]) == 1
    assert settings_edit.without_zot(value) == settings_edit.without_zot(json.loads(old))


def test_zots_hook_keeps_the_options_and_matcher_the_user_gave_it() -> None:
    old = json.dumps(
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "Bash",
                        "hooks": [
                            {"type": "command", "command": f"{CLAUDE} --fail-closed", "timeout": 9}
                        ],
                    }
                ]
            }
        }
    )
    edit = settings_edit.add_hooks(old, ("PreToolUse",), CLAUDE)
    assert edit.text == old and edit.changes[0].action == "kept"


def test_a_hook_shared_with_another_in_one_group_is_taken_out_alone() -> None:
    group = {
        "hooks": [
            {"type": "command", "command": "zot hook stop"},
            {"type": "command", "command": "say done"},
        ]
    }
    old = json.dumps({"hooks": {"Stop": [group]}}, indent=2)
    removed = settings_edit.remove_hooks(old)
    assert json.loads(removed.text) == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}
    }


def test_claudes_mcp_server_goes_beside_the_others() -> None:
    old = text("claude.json")
    edit = settings_edit.add_server(old, ZOT, ["mcp"])
    value = json.loads(edit.text)
    assert list(value["mcpServers"]) == ["playwright", "linear", "zot"]
    assert value["mcpServers"]["zot"] == {"command": ZOT, "args": ["mcp"]}
    assert list(value) == list(json.loads(old))
    assert settings_edit.add_server(edit.text, ZOT, ["mcp"]).text == edit.text
    assert settings_edit.remove_server(edit.text).text == old


def test_zots_server_already_there_is_updated_with_its_other_fields_kept() -> None:
    old = json.dumps(
        {
            "mcpServers": {
                "z": {"command": "zot", "args": ["mcp", "--cwd", "/p"], "env": {"ZOTD_TOKEN": "t"}}
            }
        },
        indent=2,
    )
    edit = settings_edit.add_server(old, ZOT, ["mcp"])
    assert json.loads(edit.text) == {
        "mcpServers": {"z": {"command": ZOT, "args": ["mcp"], "env": {"ZOTD_TOKEN": "t"}}}
    }
    assert [(c.action, c.name, c.was) for c in edit.changes] == [
        ("replaced", "z", "zot mcp --cwd /p")
    ]


def test_a_server_called_zot_that_is_not_zots_is_left_alone() -> None:
    old = json.dumps({"mcpServers": {"zot": {"command": "npx", "args": ["zot-server"]}}})
    with pytest.raises(SettingsError, match="is not `zot mcp`"):
        settings_edit.add_server(old, ZOT, ["mcp"])
    assert settings_edit.remove_server(old).text == old


def test_gemini_settings_keep_their_comments() -> None:
    old = text("gemini-settings.json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        settings_edit.add_server(old, ZOT, ["mcp"])  # comments only where the agent takes them
    events = hook_agents.adapter("gemini").events
    hooked = settings_edit.add_hooks(old, events, GEMINI, comments=True)
    edit = settings_edit.add_server(hooked.text, ZOT, ["mcp"], comments=True)
    assert "// Gemini CLI user settings" in edit.text
    assert "/* Servers: the team's, and mine */" in edit.text
    value = settings_json.parse(edit.text, comments=True).value
    assert value["hooks"]["BeforeTool"][0]["hooks"][0]["name"] == "secret-scanner"
    assert value["hooks"]["BeforeTool"][1] == {"hooks": [{"type": "command", "command": GEMINI}]}
    assert value["hooksConfig"] == {"enabled": True}
    settings_edit.check(old, edit.text, comments=True)
    back = settings_edit.remove_hooks(edit.text, comments=True).text
    assert settings_edit.remove_server(back, comments=True).text == old


def test_new_entries_follow_the_files_layout() -> None:
    assert settings_edit.add_server('{"a": 1}', "zot", ["mcp"]).text == (
        '{"a": 1, "mcpServers": {"zot": {"command": "zot", "args": ["mcp"]}}}'
    )
    tabs = '{\n\t"a": 1\n}\n'
    assert settings_edit.add_server(tabs, "zot", ["mcp"]).text.startswith(
        '{\n\t"a": 1,\n\t"mcpServers": {\n\t\t"zot"'
    )
    four = text("claude-project-settings.json")
    assert '\n                        "command": "zot hook' in add_claude(four).text.replace(
        CLAUDE, "zot hook"
    )


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ('{"hooks": {"Stop": [}', "line 1 column 21"),
        ('{"a": 1,}', "expected a key"),
        ("[1, 2]", "not a JSON object"),
        ('{"hooks": []}', "hooks is not an object"),
        ('{"hooks": {"PreToolUse": {}}}', "hooks.PreToolUse is not a list"),
        ('{"mcpServers": 3}', "mcpServers is not an object"),
    ],
)
def test_a_file_that_cannot_be_edited_safely_is_refused_with_why(bad: str, why: str) -> None:
    if "mcpServers" not in bad:
        with pytest.raises(SettingsError, match=why):
            add_claude(bad)
    if "hooks" not in bad:
        with pytest.raises(SettingsError, match=why):
            settings_edit.add_server(bad, ZOT, ["mcp"])


# --- Codex's config.toml -----------------------------------------------------------------


def test_codexs_server_table_is_appended_and_cut_out_again() -> None:
    old = text("codex-config.toml")
    edit = settings_toml.add_server(old, ZOT, ["mcp"])
    assert edit.text.startswith(old)
    assert edit.text[len(old) :] == f'\n[mcp_servers.zot]\ncommand = "{ZOT}"\nargs = ["mcp"]\n'
    assert tomllib.loads(edit.text)["mcp_servers"]["github"]["env"] == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"
    }
    again = settings_toml.add_server(edit.text, ZOT, ["mcp"])
    assert (again.text, again.changed) == (edit.text, False)
    assert settings_toml.remove_server(edit.text).text == old


def test_codexs_zot_table_in_the_middle_is_rewritten_in_place() -> None:
    old = (
        "# mine\n[mcp_servers.zot]  # zot's\n"
        'command = "/old/bin/zot"\nargs = ["mcp", "--cwd", "/p"]\nstartup_timeout_sec = 30\n\n'
        '[mcp_servers.zot.env]\nZOTD_TOKEN = "t"\n\n# next\n[profiles.x]\nmodel = "m"\n'
    )
    edit = settings_toml.add_server(old, ZOT, ["mcp"])
    assert edit.text == old.replace('"/old/bin/zot"', f'"{ZOT}"').replace(', "--cwd", "/p"', "")
    assert [(c.action, c.was) for c in edit.changes] == [("replaced", "/old/bin/zot mcp --cwd /p")]
    # Out with its sub-tables; the comment of the next table stays.
    removed = settings_toml.remove_server(edit.text).text
    assert removed == '# mine\n\n# next\n[profiles.x]\nmodel = "m"\n'


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("model = \n", "not valid TOML"),
        ('mcp_servers.zot.command = "zot"\nmcp_servers.zot.args = ["mcp"]\n', "edit it by hand"),
        ('[mcp_servers]\nzot = {command = "zot", args = ["mcp", "x"]}\n', "edit it by hand"),
        ('[mcp_servers.zot]\ncommand = "npx"\nargs = ["zot"]\n', "is not `zot mcp`"),
        ('[mcp_servers.zot]\ncommand = "zot"\nargs = [\n  "mcp",\n]\n', "over lines"),
        ("mcp_servers = 1\n", "not a table"),
    ],
)
def test_a_toml_file_that_cannot_be_edited_safely_is_refused(bad: str, why: str) -> None:
    with pytest.raises(SettingsError, match=why):
        settings_toml.add_server(bad, ZOT, ["mcp"])


# --- where ------------------------------------------------------------------------------------


def test_each_agents_files_honour_its_own_overrides() -> None:
    home, proj = Path("/h"), Path("/p")

    def paths(agent: str, env: dict[str, str], project: Path | None = None) -> list[Path]:
        return [t.path for t in targets(agent, project=project, home=home, env=env)]

    assert paths("claude", {}) == [home / ".claude/settings.json", home / ".claude.json"]
    assert paths("claude", {"CLAUDE_CONFIG_DIR": "/c"}) == [
        Path("/c/settings.json"),
        Path("/c/.claude.json"),
    ]
    assert paths("claude", {}, proj) == [proj / ".claude/settings.json", proj / ".mcp.json"]
    assert paths("codex", {}) == [home / ".codex/hooks.json", home / ".codex/config.toml"]
    assert paths("codex", {"CODEX_HOME": "/x"}) == [Path("/x/hooks.json"), Path("/x/config.toml")]
    assert paths("codex", {"CODEX_HOME": "/x"}, proj) == [
        proj / ".codex/hooks.json",
        proj / ".codex/config.toml",
    ]
    assert paths("gemini", {}) == [home / ".gemini/settings.json"]
    assert paths("gemini", {"GEMINI_CLI_HOME": "/g"}) == [Path("/g/.gemini/settings.json")]
    assert paths("gemini", {}, proj) == [proj / ".gemini/settings.json"]
