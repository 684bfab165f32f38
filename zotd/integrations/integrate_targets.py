"""Where each agent keeps its hooks and its MCP servers, and in what format.

Sans-IO: paths are worked out from the environment, the home directory and
the project directory given, honouring each agent's own override of where
its settings live:

| agent | user scope | project scope |
|---|---|---|
| ``claude`` | hooks in ``~/.claude/settings.json``, ``mcpServers`` in ``~/.claude.json`` (both in ``$CLAUDE_CONFIG_DIR`` when set) | ``.claude/settings.json``, ``.mcp.json`` |
| ``codex`` | hooks in ``~/.codex/hooks.json``, ``[mcp_servers.zot]`` in ``~/.codex/config.toml`` (``$CODEX_HOME`` instead of ``~/.codex``) | ``.codex/hooks.json``, ``.codex/config.toml`` |
| ``gemini`` | ``hooks`` and ``mcpServers`` in ``~/.gemini/settings.json`` (under ``$GEMINI_CLI_HOME`` instead of ``~``) | ``.gemini/settings.json`` |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: The hook events whose hooks get the matcher ``*`` (every tool), by agent;
#: the others match everything without one.
TOOL_EVENTS = {
    "claude": frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"}),
}


@dataclass(frozen=True)
class Target:
    """One settings file and what goes into it."""

    path: Path
    #: ``json`` or ``toml``.
    format: str
    hooks: bool
    mcp: bool
    #: Whether the JSON may have comments (Gemini CLI's settings may).
    comments: bool = False


def targets(
    agent: str, *, project: Path | None, home: Path, env: Mapping[str, str]
) -> list[Target]:
    """The files ``zot integrate AGENT`` edits: the user's (``project`` None)
    or the project's.

    Raises:
        KeyError: an unknown agent.
    """
    if agent == "claude":
        if project is not None:
            return [
                Target(project / ".claude" / "settings.json", "json", hooks=True, mcp=False),
                Target(project / ".mcp.json", "json", hooks=False, mcp=True),
            ]
        own = env.get("CLAUDE_CONFIG_DIR")
        config = Path(own) if own else home / ".claude"
        state = config / ".claude.json" if own else home / ".claude.json"
        return [
            Target(config / "settings.json", "json", hooks=True, mcp=False),
            Target(state, "json", hooks=False, mcp=True),
        ]
    if agent == "codex":
        base = project / ".codex" if project is not None else _codex_home(home, env)
        return [
            Target(base / "hooks.json", "json", hooks=True, mcp=False),
            Target(base / "config.toml", "toml", hooks=False, mcp=True),
        ]
    if agent == "gemini":
        own = env.get("GEMINI_CLI_HOME")
        root = project if project is not None else (Path(own) if own else home)
        return [Target(root / ".gemini" / "settings.json", "json", True, True, comments=True)]
    raise KeyError(agent)


def _codex_home(home: Path, env: Mapping[str, str]) -> Path:
    own = env.get("CODEX_HOME")
    return Path(own) if own else home / ".codex"
