"""A project's own ``.mcp.json``: its servers as project-local extensions.

A workspace's discovery reads ``<workspace>/.mcp.json`` (the file Claude
Code keeps in a project) with :func:`project_servers`: each server becomes
a :class:`~.manifest.Found` of scope ``project``, run in the workspace
root, behind the same trust as the project's other extensions. The file's
format is :mod:`.mcp_servers`'.
"""

from __future__ import annotations

from pathlib import Path

from .manifest import Found, ManifestError, Scope, on_path, resolve_exec, sharing_of
from .mcp_servers import (
    MAX_PROJECT_BYTES,
    MCP_JSON,
    ConfigError,
    Entry,
    entries,
    read_config,
    servers_in,
)

__all__ = ["is_project_server", "project_servers"]


def project_servers(workspace: Path, path_env: str | None = None) -> tuple[list[Found], list[str]]:
    """The servers of ``<workspace>/.mcp.json`` as project-local extensions
    (scope ``project``, run in the workspace root, one process per workspace
    unless an entry says otherwise), and what was wrong with the file or its
    names (each a sentence for the daemon's log). An entry that cannot be a
    manifest is a :class:`Found` with its ``error``; no file, no servers.

    Blocks, bounded: one regular file of at most :data:`MAX_PROJECT_BYTES`.
    """
    path = workspace / MCP_JSON
    try:
        doc = read_config(path, MAX_PROJECT_BYTES)
        servers = servers_in(doc, str(path))
    except FileNotFoundError:
        return [], []
    except ConfigError as exc:
        return [], [str(exc)]
    found: list[Found] = []
    problems: list[str] = []
    for e in entries(servers, str(path)):
        if e.bad_name or not e.name:
            problems.append(f"{path}: {e.error}")
            continue
        found.append(_found(e, workspace, path, path_env))
    return found, problems


def _found(e: Entry, workspace: Path, origin: Path, path_env: str | None) -> Found:
    f = Found(name=e.name, dir=workspace, scope=Scope.PROJECT, origin=origin)
    if e.manifest is None:
        f.error = f"{origin}: {e.name}: {e.error}"
        return f
    manifest = e.manifest
    f.manifest = manifest
    f.sharing = sharing_of(manifest, Scope.PROJECT)
    f.warnings = [f"{MCP_JSON}: {w}" for w in e.warnings]
    if manifest.exec:
        try:
            f.argv = [resolve_exec(manifest, workspace, path_env), *manifest.args]
        except ManifestError as exc:
            f.error = f"{origin}: {e.name}: {exc}"
            return f
        f.exec_on_path = on_path(manifest, workspace, f.argv[0], path_env)
    return f


def is_project_server(found: Found) -> bool:
    """Whether ``found`` is an entry of a project's ``.mcp.json`` (not a directory)."""
    return found.origin is not None and found.origin.name == MCP_JSON
