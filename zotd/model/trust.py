"""Which project-local extensions the user has trusted to run.

Project-local extensions (``<project>/.zot/extensions/``) arrive with
whatever repository the user cloned, so zotd runs them only once the user
has trusted them (``zot ext trust``), or has set ``trust_project_extensions
= true``. Trust is pinned to content: a fingerprint of the manifest and of
the files it runs (the executable and any argument naming a file in the
extension's directory). When any of them changes, the extension is
untrusted again until trusted again.

The store is ``$ZOT_HOME/trust.json`` (0600)::

    {"version": 1, "workspaces": {"/abs/project": {"name": "sha256:..."}}}
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from .manifest import MANIFEST, Found

TRUST_FILE = "trust.json"


def fingerprint(found: Found) -> str:
    """A digest of the manifest and of every file it runs from its directory."""
    digest = hashlib.sha256()
    digest.update(_read(found.dir / MANIFEST))
    root = found.dir.resolve()
    for arg in found.argv:
        path = (found.dir / arg).resolve()
        if path.is_file() and path.is_relative_to(root):
            digest.update(b"\0" + os.fsencode(path.relative_to(root)) + b"\0")
            digest.update(_read(path))
    return "sha256:" + digest.hexdigest()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def load(home: Path) -> dict[str, dict[str, str]]:
    """Trusted fingerprints by workspace, then by extension name (empty if none)."""
    try:
        data = json.loads((home / TRUST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    workspaces = data.get("workspaces") if isinstance(data, dict) else None
    if not isinstance(workspaces, dict):
        return {}
    return {
        str(root): {str(k): str(v) for k, v in names.items()}
        for root, names in workspaces.items()
        if isinstance(names, dict)
    }


def distrust_reason(found: Found, workspace: Path, store: dict[str, dict[str, str]]) -> str:
    """Why a project extension may not run ("" if it may)."""
    pinned = store.get(str(workspace), {}).get(found.name)
    if pinned is None:
        why = "project-local extensions run only once trusted"
    elif pinned != fingerprint(found):
        why = "it changed since it was trusted"
    else:
        return ""
    return f"{why}: run `zot ext trust` in {workspace} to allow it"


def trust(home: Path, workspace: Path, found: list[Found]) -> list[str]:
    """Pins the current content of ``found`` as trusted in ``workspace``.

    Returns the names trusted. Written atomically, 0600.
    """
    with _writing:  # the daemon may trust from several threads at once
        store = load(home)
        pinned = store.setdefault(str(workspace), {})
        for ext in found:
            pinned[ext.name] = fingerprint(ext)
        home.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{TRUST_FILE}.", dir=home)  # 0600
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"version": 1, "workspaces": store}, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(tmp, home / TRUST_FILE)
    return [ext.name for ext in found]


def keep_trust(home: Path, workspace: Path, found: Found, change: Callable[[], None]) -> None:
    """Runs ``change()``, the user's own edit of ``found``'s manifest (``zot ext
    enable``/``disable``), and keeps ``found`` trusted in ``workspace`` if it was:
    what the user writes, the user trusts."""
    store = load(home)
    was = store.get(str(workspace), {}).get(found.name) == fingerprint(found)
    change()
    if was:
        trust(home, workspace, [found])


_writing = threading.Lock()
