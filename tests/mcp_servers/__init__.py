"""Small MCP servers written with the ``mcp`` package, and the manifests that
make them zotd extensions (``"kind": "mcp"``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .kitchen import CRASH_LINE, LOG_LINE

__all__ = ["CRASH_LINE", "KITCHEN", "LOG_LINE", "add_mcp_server", "add_mcp_url"]

HERE = Path(__file__).parent
#: One of everything zotd maps: see its docstring.
KITCHEN = HERE / "kitchen.py"


def add_mcp_server(
    extensions: Path,
    name: str,
    *,
    script: Path = KITCHEN,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    manifest: dict[str, Any] | None = None,
) -> Path:
    """Writes ``extensions/name/extension.json``: a ``kind: mcp`` extension that
    runs ``python script ARGS`` over stdio with ``env``; ``manifest`` entries
    override or add fields (``{"url": ...}`` with ``exec`` set to ``None``
    drops the command: see :func:`add_mcp_url`)."""
    fields: dict[str, Any] = {
        "name": name,
        "version": "0.0.1",
        "kind": "mcp",
        "exec": sys.executable,
        "args": [str(script), *(args or [])],
    }
    if env:
        fields["env"] = env
    fields.update(manifest or {})
    fields = {k: v for k, v in fields.items() if v is not None}
    directory = extensions / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "extension.json").write_text(json.dumps(fields))
    return directory


def add_mcp_url(extensions: Path, name: str, url: str, **manifest: Any) -> Path:
    """Writes ``extensions/name/extension.json``: a ``kind: mcp`` extension at ``url``."""
    return add_mcp_server(
        extensions, name, manifest={"exec": None, "args": None, "url": url, **manifest}
    )
