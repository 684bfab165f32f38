"""The environment an extension runs with: an allowlist, not the daemon's own.

The daemon may hold secrets in its environment (API keys, tokens); an
extension gets only what a program needs to run (where to find programs,
who and where the user is, locale, temporary and XDG directories), plus
``ZOT_HOME``, plus what its manifest asks for: ``env`` (values it sets) and
``env_passthrough`` (names of the daemon's variables to copy).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from .manifest import Manifest

#: Variables passed through by name.
ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TMPDIR",
        "TZ",
        "DISPLAY",
        "SSH_AUTH_SOCK",
    }
)

#: Variables passed through by prefix.
ALLOWED_PREFIXES = ("LC_", "XDG_")

#: Set by the daemon for every extension process it starts (``<daemon>.<n>``,
#: unique to that process): what it starts inherits it, whatever session it
#: moves to, so the watchdog can find and kill it (zotd/runtime/watchdog.py).
INSTANCE = "ZOTD_INSTANCE"


def extension_env(
    daemon_env: Mapping[str, str], manifest: Manifest | None, zot_home: str
) -> dict[str, str]:
    """What an extension's process gets as its environment."""
    env = {
        key: value
        for key, value in daemon_env.items()
        if key in ALLOWED or key.startswith(ALLOWED_PREFIXES)
    }
    if manifest is not None:
        for key in manifest.env_passthrough:
            if key in daemon_env:
                env[key] = daemon_env[key]
        env.update(manifest.env)
    env["ZOT_HOME"] = zot_home
    return env


def with_own_python(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the directory of the interpreter zotd runs on first on ``PATH``.

    So an extension whose ``exec`` is ``python3`` runs on the Python that has
    zotd installed, and can ``import zotd.sdk``, even when zotd was started
    as ``.venv/bin/zotd`` without activating the venv.
    """
    out = dict(env)
    own = os.path.dirname(sys.executable) if sys.executable else ""
    path = out.get("PATH", os.defpath)
    if own and path.split(os.pathsep)[0] != own:
        out["PATH"] = own + os.pathsep + path
    return out
