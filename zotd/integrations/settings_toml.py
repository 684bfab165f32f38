"""zot's MCP server in Codex CLI's ``config.toml``, added or removed as text.

Sans-IO. The file is read with :mod:`tomllib` to see what is there, but
written by editing its text: zot's own table, ``[mcp_servers.zot]``, is
appended, updated or cut out, and every other line (comments, other
tables, their order) stays as it was. Each edit is checked by reading the
result back: nothing but zot's table may differ.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from typing import Any

from .settings_edit import SERVER, Change, Edit, SettingsError, is_zot_server, server_line

#: A table header line (``[a.b]`` or ``[[a.b]]``).
_HEADER = re.compile(r"^[ \t]*\[")
_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""


def _load(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"not valid TOML: {exc}") from None


def _servers(data: dict[str, Any]) -> dict[str, Any]:
    servers = data.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise SettingsError("mcp_servers is not a table; zot integrate leaves it to you")
    return servers


def _bare(key: str) -> str:
    return key[1:-1] if key[:1] in "\"'" else key


def _block(text: str, name: str) -> tuple[int, int, int] | None:
    """Where table ``[mcp_servers.NAME]`` is: the start of its header line, the
    end of its own last key line, and the end of its last sub-table's
    (``[mcp_servers.NAME.env]``); blank and comment lines at its end are not
    its. None if the table has no header of its own."""
    lines = text.splitlines(keepends=True)
    head = r"^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*(" + _KEY + r")[ \t]*"
    header = re.compile(head + r"\][ \t]*(#.*)?$")
    sub = re.compile(head + r"\.")
    offset, start, own, end = 0, -1, -1, -1
    for line in lines:
        row = line.rstrip("\r\n")
        if start < 0:
            match = header.match(row)
            if match and _bare(match.group(1)) == name:
                start, end = offset, offset + len(line)
        elif _HEADER.match(line):
            match = sub.match(row)
            if match is None or _bare(match.group(1)) != name:
                break
            own = end if own < 0 else own
            end = offset + len(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            end = offset + len(line)
        offset += len(line)
    if start < 0:
        return None
    return start, end if own < 0 else own, end


def _table(name: str, command: str, args: list[str]) -> str:
    key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)
    return (
        f"[mcp_servers.{key}]\n"
        f"command = {json.dumps(command)}\n"
        f"args = [{', '.join(json.dumps(a) for a in args)}]\n"
    )


def _cut(text: str, span: tuple[int, int, int]) -> str:
    start, _, end = span
    if text[:start].endswith("\n\n"):
        start -= 1
    return text[:start] + text[end:]


def _check(old: str, new: str) -> None:
    before, after = _load(old), _load(new)
    for data in (before, after):
        servers = data.get("mcp_servers")
        if isinstance(servers, dict):
            for key in [k for k, v in servers.items() if is_zot_server(v)]:
                del servers[key]
            if not servers:
                del data["mcp_servers"]
    if before != after:
        raise SettingsError("the edit would change more than zot's table; nothing written")


def _unheaded(name: str) -> SettingsError:
    return SettingsError(
        f"mcp_servers.{name} is not written as a [mcp_servers.{name}] table "
        "(a dotted key or an inline table); edit it by hand"
    )


def add_server(text: str, command: str, args: list[str]) -> Edit:
    """``[mcp_servers.zot]`` running ``command args``: appended, or zot's
    table already there rewritten (its other keys kept)."""
    servers = _servers(_load(text))
    line = shlex.join([command, *args])
    theirs = servers.get(SERVER)
    if theirs is not None and not is_zot_server(theirs):
        raise SettingsError(
            f"mcp_servers.{SERVER} is there and is not `zot mcp` ({server_line(theirs)}); "
            "rename it or remove it first"
        )
    zots = [k for k, v in servers.items() if is_zot_server(v)]
    if not zots:
        sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        new = text + sep + _table(SERVER, command, args)
        _check(text, new)
        return Edit(new, [Change("added", "mcp", SERVER, line)])
    name = SERVER if SERVER in zots else zots[0]
    entry = servers[name]
    if entry.get("command") == command and entry.get("args") == args:
        return Edit(text, [Change("kept", "mcp", name, line)])
    span = _block(text, name)
    if span is None:
        raise _unheaded(name)
    start, end, _ = span
    body = text[start:end].splitlines(keepends=True)
    ours = re.compile(r"^[ \t]*(command|args)[ \t]*=(.*)$")
    kept = []
    for row in body[1:]:
        match = ours.match(row.rstrip("\r\n"))
        if match is None:
            kept.append(row)
        elif (
            '"""' in match.group(2)
            or "'''" in match.group(2)
            or ("[" in match.group(2) and "]" not in match.group(2))
        ):
            raise SettingsError(
                f"mcp_servers.{name} spreads {match.group(1)} over lines; edit it by hand"
            )
    fresh = _table(name, command, args).splitlines(keepends=True)
    if not body[0].endswith("\n"):
        body[0] += "\n"
    new = text[:start] + body[0] + "".join(fresh[1:]) + "".join(kept) + text[end:]
    _check(text, new)
    return Edit(new, [Change("replaced", "mcp", name, line, server_line(entry))])


def remove_server(text: str) -> Edit:
    """``text`` without zot's ``[mcp_servers.NAME]`` tables."""
    changes = []
    new = text
    for name, entry in _servers(_load(text)).items():
        if not is_zot_server(entry):
            continue
        span = _block(new, name)
        if span is None:
            raise _unheaded(name)
        new = _cut(new, span)
        changes.append(Change("removed", "mcp", name, server_line(entry)))
    _check(text, new)
    return Edit(new, changes)
