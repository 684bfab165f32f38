"""The environment an extension runs with: an allowlist, not the daemon's own.

The daemon may hold secrets in its environment (API keys, tokens); an
extension gets only what a program needs to run (where to find programs,
who and where the user is, locale, temporary and XDG directories), plus
``ZOT_HOME``, plus what its manifest asks for: ``env`` (values it sets) and
``env_passthrough`` (names of the daemon's variables to copy). The user
may pass more of the daemon's variables through without editing the
manifest (``env_passthrough`` in ``[extensions.NAME]`` of ``zotd.toml``, and
``zot ext env NAME --allow VAR``), or hide one that its manifest or
``zotd.toml`` passes (``--deny VAR``): see :class:`Passthrough`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from .config import Config
from .env_grants import Grants, GrantsError, grants_for
from .manifest import Manifest

log = logging.getLogger(__name__)

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


#: Set by zotd itself, whatever the daemon's environment says.
SET_BY_ZOTD = frozenset({"ZOT_HOME", INSTANCE})


def allowlisted(name: str) -> bool:
    """Whether every extension gets variable ``name`` anyway (the allowlist,
    or zotd sets it): no grant or denial is about it."""
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES) or name in SET_BY_ZOTD


class Passthrough(msgspec.Struct, frozen=True):
    """The variables of the daemon's environment one extension is let see
    beyond the allowlist, by where each comes from (names, sorted).

    Attributes:
        manifest: its manifest's ``env_passthrough``.
        config: ``env_passthrough`` of its ``[extensions.NAME]`` in ``zotd.toml``.
        allowed: granted by ``zot ext env NAME --allow``.
        denied: denied by ``zot ext env NAME --deny``: hidden, whoever passes them.
    """

    manifest: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, manifest: Manifest | None, config: Iterable[str] = (), grants: Grants | None = None
    ) -> Passthrough:
        """From a manifest, ``zotd.toml``'s list and the user's grants. What
        the allowlist passes anyway is left out of every list."""

        def names(values: Iterable[str]) -> tuple[str, ...]:
            return tuple(sorted({v for v in values if not allowlisted(v)}))

        grants = grants or Grants()
        return cls(
            manifest=names(manifest.env_passthrough if manifest is not None else ()),
            config=names(config),
            allowed=names(grants.allow),
            denied=names(grants.deny),
        )

    @property
    def names(self) -> list[str]:
        """What it is let see (if the daemon has it): every list less ``denied``."""
        return sorted({*self.manifest, *self.config, *self.allowed} - set(self.denied))

    def present(self, daemon_env: Mapping[str, str]) -> list[str]:
        """What it gets from ``daemon_env``: :attr:`names` that are set there."""
        return [n for n in self.names if n in daemon_env]

    def missing(self, daemon_env: Mapping[str, str]) -> list[str]:
        """:attr:`names` that ``daemon_env`` does not have."""
        return [n for n in self.names if n not in daemon_env]

    def sources(self, name: str) -> list[str]:
        """Where ``name`` comes from: ``manifest``, ``zotd.toml``, ``allowed
        by command``, ``denied by command`` (in that order)."""
        pairs = (
            ("manifest", self.manifest),
            ("zotd.toml", self.config),
            ("allowed by command", self.allowed),
            ("denied by command", self.denied),
        )
        return [label for label, names in pairs if name in names]

    @property
    def every(self) -> list[str]:
        """Every name any list holds, denied ones too."""
        return sorted({*self.manifest, *self.config, *self.allowed, *self.denied})


def passthrough_for(
    home: Path, config: Config, name: str, manifest: Manifest | None
) -> Passthrough:
    """What extension ``name`` is let see now: its manifest's list, its
    ``[extensions.NAME]`` of ``config`` and the grants file in ``home``.

    A grants file that cannot be read (:class:`GrantsError`) passes nothing
    beyond the allowlist, since it may hold denials; the daemon's log says
    why, and ``zot ext env`` too. Reads one small file: inline is fine.
    """
    try:
        grants = grants_for(home, name)
    except GrantsError as exc:
        log.warning("%s gets no variables beyond the allowlist: %s", name, exc)
        return Passthrough()
    settings = config.extensions.get(name)
    return Passthrough.of(manifest, settings.env_passthrough if settings else (), grants)


def extension_env(
    daemon_env: Mapping[str, str],
    manifest: Manifest | None,
    zot_home: str,
    passthrough: Passthrough | None = None,
) -> dict[str, str]:
    """What an extension's process gets as its environment: the allowlist,
    the variables ``passthrough`` lets it see (by default, its manifest's
    ``env_passthrough``), its manifest's ``env``, and ``ZOT_HOME``."""
    env = {
        key: value
        for key, value in daemon_env.items()
        if key in ALLOWED or key.startswith(ALLOWED_PREFIXES)
    }
    if passthrough is None:
        passthrough = Passthrough.of(manifest)
    for key in passthrough.present(daemon_env):
        env[key] = daemon_env[key]
    if manifest is not None:
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
