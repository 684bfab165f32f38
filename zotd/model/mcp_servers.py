"""The ``mcpServers`` JSON of MCP hosts, read into ``kind: mcp`` manifests.

Claude Desktop (``claude_desktop_config.json``), Claude Code (a project's
``.mcp.json``; ``~/.claude.json``, with ``mcpServers`` at its top level and
per project under ``projects``), Cursor (``~/.cursor/mcp.json``,
``.cursor/mcp.json``) and current zot's mcp-bridge (``$ZOT_HOME/mcp.json``,
``.zot/mcp.json``) all keep their servers so::

    {"mcpServers": {"NAME": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "V"}},
                    "OTHER": {"type": "http", "url": "https://...", "headers": {"K": "V"}}}}

An entry is a stdio server (``command``, ``args``, ``env``; ``"type":
"stdio"`` or no type) or a streamable-HTTP one (``url``, ``headers``;
``"type": "http"`` or ``"streamable-http"``; the mcp-bridge spells the key
``transport``). ``"type": "sse"`` (the older HTTP+SSE transport) is not
spoken by zotd's client: such an entry is refused with that reason.
Comments and trailing commas (the mcp-bridge's JSONC) are allowed.

Used by ``zot ext import-mcp`` (the CLI writes each manifest) and by
discovery (a project's own ``.mcp.json``: :mod:`.project_mcp`). Plain
code: no trio, no daemon. Every entry becomes a manifest or an error of its
own (:class:`Entry`); what cannot be read at all is a :class:`ConfigError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from .manifest import (
    Kind,
    Manifest,
    ManifestError,
    check_kind,
    check_name,
)
from .safe_files import FileRefused, read_regular

#: A project's own server list, at its root (Claude Code's project scope).
MCP_JSON = ".mcp.json"

#: The largest host config read by ``import-mcp``: ``~/.claude.json`` also
#: keeps Claude Code's per-project history, which grows to megabytes.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: The largest project ``.mcp.json`` read (at every discovery of its workspace).
MAX_PROJECT_BYTES = 1024 * 1024
#: The most servers taken from one file (as discovery's ``MAX_DIRS``); more are left out.
MAX_SERVERS = 256

#: Values of ``type`` (or ``transport``) that mean each transport.
STDIO_TYPES = frozenset({"stdio"})
HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamablehttp"})

#: Keys an entry may have that zotd reads (others are listed as ignored).
_USED = frozenset(
    {"type", "transport", "command", "args", "env", "url", "headers", "disabled", "enabled"}
    | {"description", "idleTimeout"}
)

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{[^}]*\}")
_WHOLE_VAR = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ConfigError(Exception):
    """A file of servers that cannot be read at all; the message names the file (and where)."""


class Entry(msgspec.Struct):
    """One server of an ``mcpServers`` object.

    Attributes:
        name: its key.
        manifest: the manifest it becomes, or ``None`` if it cannot be one.
        error: why it cannot ("" when it can).
        bad_name: whether that is because its name is not an extension name.
        warnings: what of it zotd ignores or passes on as written, each a sentence.
    """

    name: str
    manifest: Manifest | None = None
    error: str = ""
    bad_name: bool = False
    warnings: list[str] = msgspec.field(default_factory=list)


def read_config(path: Path, limit: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """The JSON object in ``path`` (JSONC: comments and trailing commas allowed).

    Read warily (:func:`~.safe_files.read_regular`: a regular file of at most
    ``limit`` bytes, never blocking).

    Raises:
        FileNotFoundError: there is no such file.
        ConfigError: it cannot be read, is too large, is not JSON (the
            message says the line and column), or is not a JSON object.
    """
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        raise
    except FileRefused as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_config(data, str(path))


def parse_config(data: bytes, source: str) -> dict[str, Any]:
    """:func:`read_config` of bytes read from ``source`` (a name for messages).

    Raises:
        ConfigError: not UTF-8, not JSON (with the line and column), or not an object.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    try:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:  # JSONC, or an error: its position is the file's either way
            doc = json.loads(strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{source}: invalid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: not a JSON object (an object with `mcpServers` is expected)")
    return doc


def strip_jsonc(text: str) -> str:
    """``text`` with its ``//`` and ``/* */`` comments and trailing commas
    blanked out (spaces, newlines kept), so that JSON's positions stay those
    of the file. Strings are left alone."""
    out = list(text)
    i, n = 0, len(text)
    last_comma = -1  # a comma not yet followed by anything but blanks
    while i < n:
        c = text[i]
        if c == '"':
            last_comma = -1
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [ch if ch == "\n" else " " for ch in text[i:end]]
            i = end
            continue
        if c in "}]" and last_comma >= 0:
            out[last_comma] = " "
        if c == ",":
            last_comma = i
        elif not c.isspace():
            last_comma = -1
        i += 1
    return "".join(out)


def servers_in(
    doc: Mapping[str, Any], source: str, workspace: Path | None = None, *, top: bool = True
) -> dict[str, Any]:
    """The server entries of a host's config: its ``mcpServers`` (VS Code's
    ``servers`` too), then, in ``~/.claude.json``, those of ``workspace``
    under ``projects`` (Claude Code's local scope; a name there wins).

    Raises:
        ConfigError: ``mcpServers`` is there but not an object.
    """
    found: dict[str, Any] = {}
    for key in ("mcpServers", "servers") if top else ():
        if key in doc:
            found.update(_object(doc[key], f"{source}: `{key}`"))
            break
    projects = doc.get("projects")
    if workspace is not None and isinstance(projects, dict):
        mine = projects.get(str(workspace))
        if isinstance(mine, dict) and "mcpServers" in mine:
            found.update(
                _object(mine["mcpServers"], f"{source}: `projects.{workspace}.mcpServers`")
            )
    return found


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} is not a JSON object of servers by name")
    return value


def entries(servers: Mapping[str, Any], source: str) -> list[Entry]:
    """Each of ``servers`` (name -> entry) as a manifest or an error, in order
    (at most :data:`MAX_SERVERS`; a last entry says how many were left out)."""
    out: list[Entry] = []
    for i, (name, spec) in enumerate(servers.items()):
        if i == MAX_SERVERS:
            left = len(servers) - MAX_SERVERS
            out.append(
                Entry(
                    name="", error=f"{source}: {left} more servers left out (at most {MAX_SERVERS})"
                )
            )
            break
        out.append(entry(name, spec, source))
    return out


def entry(name: str, spec: Any, source: str) -> Entry:
    """One server entry as a manifest (never raises: an error says why not)."""
    try:
        check_name(name)
    except ManifestError:
        better = _UNSAFE.sub("-", name).strip("-._")[:128] or "server"
        return Entry(
            name=name,
            bad_name=True,
            error=(
                f"{name!r} is not a valid extension name (letters, digits, '.', '_' and '-', "
                f"starting with a letter or digit); rename it in {source}, or add it as "
                f"`zot ext add-mcp {better} ...`"
            ),
        )
    if not isinstance(spec, dict):
        return Entry(name=name, error="its entry is not a JSON object")
    warnings: list[str] = []
    try:
        manifest = _manifest(name, spec, warnings)
        check_kind(manifest, f"{source}: {name}")
    except ManifestError as exc:
        return Entry(name=name, error=str(exc), warnings=warnings)
    ignored = [k for k in spec if k not in _USED]
    if ignored:
        warnings.append(f"ignored: {', '.join(f'`{k}`' for k in ignored)}")
    return Entry(name=name, manifest=manifest, warnings=warnings)


def _manifest(name: str, spec: dict[str, Any], warnings: list[str]) -> Manifest:
    kind = spec.get("type", spec.get("transport"))
    if kind is not None and not isinstance(kind, str):
        raise ManifestError("`type` is not a string")
    transport = (kind or "").lower()
    command, url = spec.get("command"), spec.get("url")
    if transport == "sse":
        raise ManifestError(
            "type 'sse' (the older HTTP+SSE transport) is not supported: zotd speaks "
            "streamable HTTP; if the server has a streamable-HTTP endpoint (often .../mcp), "
            'use that with "type": "http"'
        )
    if transport and transport not in STDIO_TYPES | HTTP_TYPES:
        raise ManifestError(f"unknown type {kind!r} (use 'stdio' or 'http')")
    if not transport:
        if command is not None and url is not None:
            raise ManifestError("it has both `command` and `url`; an MCP server has one")
        if command is None and url is None:
            raise ManifestError("it has neither `command` (a stdio server) nor `url` (an HTTP one)")
        transport = "stdio" if command is not None else "http"
    manifest = Manifest(name=name, kind=Kind.MCP)
    if transport in STDIO_TYPES:
        if not isinstance(command, str) or not command.strip():
            raise ManifestError("a stdio server needs `command`, a non-empty string")
        manifest.exec = command
        manifest.args = _strings(spec.get("args", []), "args")
        manifest.env, manifest.env_passthrough = _env(
            _string_map(spec.get("env", {}), "env"), warnings
        )
        if url is not None or "headers" in spec:
            warnings.append("`url` and `headers` are ignored for a stdio server")
        for value in (command, *manifest.args):
            _note_vars(value, warnings)
    else:
        if not isinstance(url, str) or not url:
            raise ManifestError("an HTTP server needs `url`, a string")
        manifest.url = url
        manifest.headers = _string_map(spec.get("headers", {}), "headers")
        for value in (url, *manifest.headers.values()):
            _note_vars(value, warnings)
        if command is not None:
            warnings.append("`command` is ignored for an HTTP server")
        if not kind:
            warnings.append("no `type`: taken to be a streamable-HTTP server")
    if spec.get("disabled") is True or spec.get("enabled") is False:
        manifest.enabled = False
    description = spec.get("description")
    if isinstance(description, str):
        manifest.description = description
    idle = spec.get("idleTimeout")
    if isinstance(idle, int | float) and not isinstance(idle, bool) and idle >= 0:
        manifest.idle_stop = float(idle)
    return manifest


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"`{what}` is not a list of strings")
    return list(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ManifestError(f"`{what}` is not an object of strings")
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ManifestError(f"`{what}.{k}` is not a string")
        out[k] = v if isinstance(v, str) else json.dumps(v)
    return out


def _env(env: dict[str, str], warnings: list[str]) -> tuple[dict[str, str], list[str]]:
    """``env`` less the values that only pass the daemon's own variable on
    (``"KEY": "${KEY}"``, as hosts expand it), which become ``env_passthrough``."""
    kept: dict[str, str] = {}
    passed: list[str] = []
    for key, value in env.items():
        whole = _WHOLE_VAR.match(value)
        if whole is not None and whole[1] == key:
            passed.append(key)
            continue
        kept[key] = value
        _note_vars(value, warnings)
    return kept, passed


def _note_vars(value: str, warnings: list[str]) -> None:
    for match in _VAR.finditer(value):
        note = (
            f"{match[0]} is passed as written: zotd does not expand variables "
            '(an env entry "KEY": "${KEY}" passes the daemon\'s own KEY on)'
        )
        if note not in warnings:
            warnings.append(note)


def manifest_json(manifest: Manifest) -> bytes:
    """The ``extension.json`` text of an MCP server's manifest: only the keys it sets."""
    data: dict[str, Any] = {"name": manifest.name, "kind": manifest.kind}
    if manifest.description:
        data["description"] = manifest.description
    if manifest.exec:
        data["exec"] = manifest.exec
        if manifest.args:
            data["args"] = manifest.args
    if manifest.url:
        data["url"] = manifest.url
        if manifest.headers:
            data["headers"] = manifest.headers
    if manifest.env:
        data["env"] = manifest.env
    if manifest.env_passthrough:
        data["env_passthrough"] = manifest.env_passthrough
    if manifest.scope:
        data["scope"] = manifest.scope
    if manifest.lazy:
        data["lazy"] = True
    if manifest.idle_stop:
        data["idle_stop"] = manifest.idle_stop
    if not manifest.enabled:
        data["enabled"] = False
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def summary(manifest: Manifest) -> str:
    """What a server runs, in a few words: ``stdio: npx -y pkg`` or ``http: URL``."""
    if manifest.url:
        return f"http: {manifest.url}"
    return "stdio: " + " ".join([manifest.exec, *manifest.args])
