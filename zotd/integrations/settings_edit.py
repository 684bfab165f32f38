"""zot's hooks and ``zot mcp`` server in an agent's JSON settings, added or removed.

Sans-IO: each function takes the file's text and returns the new text and
the list of what changed (:class:`Edit`). Only zot's own entries are
touched, through :mod:`.settings_json`, so every other byte of the file
stays as it was.

zot's entries are recognised by their command, not by a mark of ours: a
hook whose command runs ``zot hook ...`` (any path to ``zot``, any options:
also the first ``zot hook pre-tool-use`` style), and an MCP server whose
command is ``zot`` with the arguments ``mcp ...``.

Hooks are laid out as Claude Code, Codex CLI and Gemini CLI all read them:
``{"hooks": {EVENT: [{"matcher": ..., "hooks": [{"type": "command",
"command": ...}]}]}}``; MCP servers as ``{"mcpServers": {NAME: {"command":
..., "args": [...]}}}``.
"""

from __future__ import annotations

import copy
import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from . import settings_json as sj

#: The name zot's MCP server gets when none of zot's is there.
SERVER = "zot"


class SettingsError(ValueError):
    """The file cannot be edited safely; the message says why (nothing was changed)."""


@dataclass(frozen=True)
class Change:
    """One entry of zot's, and what became of it."""

    #: ``added``, ``replaced``, ``kept`` (already there) or ``removed``.
    action: str
    #: ``hook`` or ``mcp``.
    kind: str
    #: The hook event, or the MCP server's name.
    name: str
    #: The command line it runs now (or ran, when removed).
    command: str
    #: What it replaced, when it did.
    was: str = ""


@dataclass(frozen=True)
class Edit:
    """The new text of a file, and what changed in it."""

    text: str
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c.action != "kept" for c in self.changes)


def is_zot(command: Any, sub: str) -> bool:
    """Whether a command line runs ``zot SUB ...``."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 2 and os.path.basename(words[0]) == "zot" and words[1] == sub


def is_zot_server(entry: Any) -> bool:
    """Whether an MCP server entry runs ``zot mcp``."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args")
    return (
        isinstance(command, str)
        and os.path.basename(command) == "zot"
        and isinstance(args, list)
        and args[:1] == ["mcp"]
    )


def server_line(entry: Any) -> str:
    """An MCP server entry's command line, to show."""
    if not isinstance(entry, dict):
        return str(entry)
    args = entry.get("args")
    args = args if isinstance(args, list) else []
    return shlex.join([str(entry.get("command", "")), *(str(a) for a in args)])


def _root(text: str, comments: bool) -> sj.Node:
    try:
        root = sj.parse(text, comments=comments)
    except sj.BadJson as exc:
        raise SettingsError(f"not valid JSON: {exc}") from None
    if not isinstance(root.value, dict):
        raise SettingsError("not a JSON object at the top")
    return root


def _object(parent: sj.Node, key: str, path: str) -> sj.Node | None:
    node = parent.get(key)
    if node is not None and not isinstance(node.value, dict):
        raise SettingsError(f"{path} is not an object; zot integrate leaves it to you")
    return node


# --- hooks ---------------------------------------------------------------------------------


def _zot_hooks(event: sj.Node) -> list[tuple[int, int, str]]:
    """(group, hook, command) of each of zot's hooks in an event's list."""
    found = []
    for g, group in enumerate(event.items):
        hooks = group.get("hooks") if isinstance(group.value, dict) else None
        if hooks is None or not isinstance(hooks.value, list):
            continue
        for h, hook in enumerate(hooks.items):
            command = hook.value.get("command") if isinstance(hook.value, dict) else None
            if is_zot(command, "hook"):
                found.append((g, h, str(command)))
    return found


def _drop_one(
    text: str, comments: bool, event: str, keep: tuple[int, int] | None = None
) -> tuple[str, str] | None:
    """``text`` without the first of zot's hooks under ``event`` but ``keep``
    (group, hook), and the group it leaves empty, and the event's list, and
    ``hooks``; with its command. None if there is none."""
    root = _root(text, comments)
    hooks = _object(root, "hooks", "hooks")
    node = hooks.get(event) if hooks is not None else None
    if hooks is None or node is None or not isinstance(node.value, list):
        return None
    found = [f for f in _zot_hooks(node) if f[:2] != keep]
    if not found:
        return None
    g, h, command = found[0]
    group = node.items[g]
    inner = group.get("hooks")
    assert inner is not None
    if len(inner.items) > 1:
        return sj.remove_item(text, inner, h), command
    if len(node.items) > 1:
        return sj.remove_item(text, node, g), command
    if len(hooks.members) > 1:
        return sj.remove_member(text, hooks, event), command
    return sj.remove_member(text, root, "hooks"), command


def _group(event: str, command: str, tool_events: frozenset[str]) -> dict[str, Any]:
    hook = {"type": "command", "command": command}
    return {"matcher": "*", "hooks": [hook]} if event in tool_events else {"hooks": [hook]}


def _ours(found: str, command: str) -> bool:
    """Whether a zot hook's command is the one to write (options after it allowed)."""
    return found == command or found.startswith(command + " ")


def add_hooks(
    text: str,
    events: tuple[str, ...],
    command: str,
    *,
    tool_events: frozenset[str] = frozenset(),
    comments: bool = False,
) -> Edit:
    """``command`` as the one zot hook of each of ``events`` (those in
    ``tool_events`` with the matcher ``*``); other hooks are kept, zot's
    other commands under those events are replaced."""
    changes = []
    for event in events:
        root = _root(text, comments)
        hooks = _object(root, "hooks", "hooks")
        node = hooks.get(event) if hooks is not None else None
        if node is not None and not isinstance(node.value, list):
            raise SettingsError(f"hooks.{event} is not a list; zot integrate leaves it to you")
        found = _zot_hooks(node) if node is not None else []
        if len(found) == 1 and _ours(found[0][2], command):
            changes.append(Change("kept", "hook", event, found[0][2]))
            continue
        if node is not None and hooks is not None and found:
            # zot's first hook there becomes this one, where it is (its group's
            # matcher and its own options kept); zot's others go.
            g, h, first = found[0]
            was = [] if _ours(first, command) else [first]
            inner = node.items[g].get("hooks")
            assert inner is not None
            if not _ours(first, command):
                at = inner.items[h].get("command")
                assert at is not None
                text = sj.replace_value(text, at, command)
            while (dropped := _drop_one(text, comments, event, keep=(g, h))) is not None:
                text, old = dropped
                was.append(old)
            changes.append(Change("replaced", "hook", event, command, "; ".join(was)))
            continue
        group = _group(event, command, tool_events)
        if hooks is None:
            text = sj.add_member(text, root, "hooks", {event: [group]})
        elif node is None:
            text = sj.add_member(text, hooks, event, [group])
        else:
            text = sj.append_item(text, node, group)
        changes.append(Change("added", "hook", event, command))
    return Edit(text, changes)


def remove_hooks(text: str, *, comments: bool = False) -> Edit:
    """``text`` without zot's hooks, under whatever event they are."""
    root = _root(text, comments)
    hooks = _object(root, "hooks", "hooks")
    changes = []
    for event in list(hooks.value) if hooks is not None and hooks.value else []:
        while (dropped := _drop_one(text, comments, event)) is not None:
            text, old = dropped
            changes.append(Change("removed", "hook", event, old))
    return Edit(text, changes)


# --- MCP servers -----------------------------------------------------------------------


def add_server(text: str, command: str, args: list[str], *, comments: bool = False) -> Edit:
    """zot's MCP server (``mcpServers``) running ``command args``: added as
    ``zot``, or one of zot's already there updated (its other fields kept),
    further ones removed."""
    root = _root(text, comments)
    servers = _object(root, "mcpServers", "mcpServers")
    line = shlex.join([command, *args])
    if servers is None:
        fresh = {"command": command, "args": args}
        text = sj.add_member(text, root, "mcpServers", {SERVER: fresh})
        return Edit(text, [Change("added", "mcp", SERVER, line)])
    theirs = servers.get(SERVER)
    if theirs is not None and not is_zot_server(theirs.value):
        raise SettingsError(
            f"mcpServers.{SERVER} is there and is not `zot mcp` ({server_line(theirs.value)}); "
            "rename it or remove it first"
        )
    zots = [k for k, v in servers.value.items() if is_zot_server(v)]
    if not zots:
        text = sj.add_member(text, servers, SERVER, {"command": command, "args": args})
        return Edit(text, [Change("added", "mcp", SERVER, line)])
    name = SERVER if SERVER in zots else zots[0]
    changes = []
    for extra in [k for k in zots if k != name]:
        root = _root(text, comments)
        servers = root.get("mcpServers")
        assert servers is not None
        changes.append(Change("removed", "mcp", extra, server_line(servers.value[extra])))
        text = sj.remove_member(text, servers, extra)
    entry = _server(text, comments, name)
    if entry.value.get("command") == command and entry.value.get("args") == args:
        return Edit(text, [Change("kept", "mcp", name, line), *changes])
    was = server_line(entry.value)
    for key, value in (("args", args), ("command", command)):
        entry = _server(text, comments, name)
        node = entry.get(key)
        if node is None:
            text = sj.add_member(text, entry, key, value)
        else:
            text = sj.replace_value(text, node, value)
    return Edit(text, [Change("replaced", "mcp", name, line, was), *changes])


def _server(text: str, comments: bool, name: str) -> sj.Node:
    servers = _root(text, comments).get("mcpServers")
    entry = servers.get(name) if servers is not None else None
    assert entry is not None
    return entry


def remove_server(text: str, *, comments: bool = False) -> Edit:
    """``text`` without zot's MCP servers (and ``mcpServers`` if that empties it)."""
    changes: list[Change] = []
    while True:
        root = _root(text, comments)
        servers = _object(root, "mcpServers", "mcpServers")
        zots = [k for k, v in servers.value.items() if is_zot_server(v)] if servers else []
        if servers is None or not zots:
            return Edit(text, changes)
        changes.append(Change("removed", "mcp", zots[0], server_line(servers.value[zots[0]])))
        if len(servers.members) > 1:
            text = sj.remove_member(text, servers, zots[0])
        else:
            text = sj.remove_member(text, root, "mcpServers")


# --- checking an edit ------------------------------------------------------------------------


def without_zot(value: Any) -> Any:
    """A settings value with zot's hooks and servers taken out (and what they
    leave empty): what an edit must not change."""
    value = copy.deepcopy(value)
    if not isinstance(value, dict):
        return value
    hooks = value.get("hooks")
    if isinstance(hooks, dict):
        for event, groups in list(hooks.items()):
            if not isinstance(groups, list):
                continue
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    group["hooks"] = [
                        h
                        for h in group["hooks"]
                        if not (isinstance(h, dict) and is_zot(h.get("command"), "hook"))
                    ]
            groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
            if not groups:
                del hooks[event]
        if not hooks:
            del value["hooks"]
    servers = value.get("mcpServers")
    if isinstance(servers, dict):
        for name in [k for k, v in servers.items() if is_zot_server(v)]:
            del servers[name]
        if not servers:
            del value["mcpServers"]
    return value


def check(old: str, new: str, *, comments: bool = False) -> None:
    """That ``new`` is ``old`` but for zot's entries.

    Raises:
        SettingsError: it is not (a bug: the file must then be left alone).
    """
    before = _root(old, comments).value
    after = _root(new, comments).value
    if without_zot(before) != without_zot(after):
        raise SettingsError("the edit would change more than zot's entries; nothing written")
