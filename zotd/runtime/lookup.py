"""What a workspace answers for a command or tool that no running extension
holds: the extension that offered it and why it is not serving (the
``unavailable`` error), or the closest names (``not_found``). The words are
:mod:`zotd.model.hints`'s; this module reads the live state they describe.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import trio

from ..model import hints
from ..model.errors import RequestError
from ..model.registry import ZOT_COMMANDS, Registry, command_key
from ..protocol.agent import ErrorCode
from .extension import Extension


def why_not(ext: Extension, workspace: Path) -> hints.Why | None:
    """Why ``ext`` serves nothing now and what to do, or ``None`` if it is ready."""
    restart_in = None if ext.restart_at is None else ext.restart_at - trio.current_time()
    return hints.why_not(
        ext.name,
        ext.state,
        reason=ext.last_error,  # for restarting: "exited with code 3; restarting in 1 s"
        broken=bool(ext.found.error),
        workspace=str(workspace),
        restart_in=restart_in,
    )


def missing(
    registry: Registry,
    extensions: Mapping[str, Extension],
    workspace: Path,
    kind: str,
    name: str,
) -> RequestError:
    """The error for a command or tool (``kind``) that no running extension holds.

    ``unavailable``, naming its extension and the fix, if an extension of
    the workspace that is not serving held it last; else ``not_found``, with
    the closest names held or remembered, and the extensions not running
    whose names are not known (they never registered anything). Command
    names are compared whatever their case (see :mod:`zotd.model.registry`).
    """
    if registry.is_builtin(kind, name):
        default = kind == "tool" or command_key(name) in ZOT_COMMANDS
        return RequestError(ErrorCode.NOT_FOUND, hints.builtin(kind, name, default=default))
    for holder in registry.last_held_by(kind, name):
        ext = extensions.get(holder)
        why = why_not(ext, workspace) if ext is not None else None
        if why is not None:
            return RequestError(ErrorCode.UNAVAILABLE, hints.unavailable(kind, name, why))
    close = hints.close_matches(name, registry.names(kind), fold=kind == "command")
    unknown = []
    for ext_name in sorted(extensions):
        why = why_not(extensions[ext_name], workspace)
        if why is not None and ext_name not in registry.held:
            unknown.append((ext_name, why))
    return RequestError(ErrorCode.NOT_FOUND, hints.unknown(kind, name, close, unknown))
