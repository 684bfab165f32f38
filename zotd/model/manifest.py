"""``extension.json`` manifests: the schema, parsing and checks, the
executable a manifest names (:func:`resolve_exec`), and one extension
directory read into a :class:`Found` (:func:`load`). Where extensions are
looked for, and which copy of a name is used, is :mod:`.discovery`.

A broken manifest never raises out of :func:`load`: it becomes a
:class:`Found` whose ``error`` says what is wrong, so it can be listed as
``failed`` beside the extensions that work.

A manifest need not name a program: one with ``skills`` (current zot's
skill directories, :mod:`.skills`) or a theme (``theme.json`` or
``themes/theme.json`` beside it) may omit ``exec``; it runs nothing, and is
ready as soon as it is found. Its skills are checked and read here, at
discovery (in discovery's worker thread).

A project's files come with whatever repository was cloned, so a manifest
is read warily (:func:`~.safe_files.read_regular`): opened only if it is a
regular file (a FIFO, a device or a link to one is refused without
blocking), and read up to :data:`MAX_MANIFEST_BYTES`.
"""

from __future__ import annotations

import operator
import os
import re
import shutil
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from . import skills as sk
from .safe_files import FileRefused, read_regular

if TYPE_CHECKING:
    from .discovery import Aside

MANIFEST = "extension.json"

#: Names end up in file names (``ext-<name>.log``) and directory names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: The largest ``extension.json`` read (a manifest is a few hundred bytes).
MAX_MANIFEST_BYTES = 64 * 1024


class Scope(StrEnum):
    """Where an extension was found (values as on the wire: ``ExtensionInfo.scope``)."""

    EXPLICIT = "explicit"
    PROJECT = "project"
    GLOBAL = "global"


class Kind(StrEnum):
    """What an extension speaks (manifest ``kind``)."""

    #: zot's extension protocol (NDJSON frames on stdin/stdout).
    ZOT = "zot"
    #: An MCP server: zotd is its MCP client (over its stdio, or ``url``).
    MCP = "mcp"


class Sharing(StrEnum):
    """How many processes of an extension run (manifest ``scope``)."""

    #: One per project directory (the workspace is its cwd).
    WORKSPACE = "workspace"
    #: One for every workspace and agent of the daemon.
    SHARED = "shared"


class Manifest(msgspec.Struct, kw_only=True):
    """The fields of ``extension.json`` (reference, "Layout & discovery")."""

    name: str
    #: What it speaks: ``zot`` (the default) or ``mcp`` (an MCP server).
    kind: str = Kind.ZOT
    #: The program to run; "" for an extension that only ships skills or a
    #: theme, or an MCP server reached at ``url``.
    exec: str = ""
    #: An MCP server's streamable-HTTP endpoint (``kind: mcp`` without ``exec``).
    url: str = ""
    #: HTTP headers sent to ``url`` (an ``Authorization`` header, say).
    headers: dict[str, str] = {}
    #: ``workspace`` or ``shared`` (see :class:`Sharing`); "" for the default:
    #: ``shared`` for an MCP server that is not project-local, else ``workspace``.
    scope: str = ""
    #: Started on its first use, with its registrations listed from its last
    #: run until then (zotd's; ``[extensions.<name>] lazy`` overrides it).
    lazy: bool = False
    #: Seconds without work after which it is stopped, and listed as
    #: ``sleeping`` until its next use; 0 never (zotd's).
    idle_stop: float = 0.0
    version: str = ""
    args: list[str] = []
    language: str = ""
    description: str = ""
    enabled: bool = True
    #: Where its verdicts count among the guards of an event: lower first,
    #: then by name (zotd's; ``[extensions.<name>] priority`` overrides it).
    priority: int = 0
    #: Variables set for the extension (on top of the allowlisted ones).
    env: dict[str, str] = {}
    #: Names of the daemon's variables to pass through beyond the allowlist.
    env_passthrough: list[str] = []
    #: Current zot's: directories of skills (or ``SKILL.md`` files), relative
    #: to the manifest (see :mod:`.skills`).
    skills: list[str] = []


#: Keys a manifest may have beyond :class:`Manifest`'s fields without a warning.
OTHER_KEYS: tuple[str, ...] = ()

#: Where a theme-only extension (current zot's) keeps its theme.
THEME_FILES = ("theme.json", "themes/theme.json")

#: Every key a manifest may have without a warning.
KNOWN_KEYS = (*(f.encode_name for f in msgspec.structs.fields(Manifest)), *OTHER_KEYS)


class ManifestError(Exception):
    """A manifest that cannot be used; the message says why."""


class Found(msgspec.Struct, eq=False):
    """One discovered extension.

    Attributes:
        name: the manifest's name (the directory's name if it has none).
        dir: the directory holding ``extension.json``.
        scope: a :class:`Scope` value.
        manifest: the parsed manifest, or ``None`` if it did not parse.
        argv: the resolved executable and its args; empty when ``error`` is
            set, or when it names none (skills or a theme only).
        error: why it cannot be started ("" when it can).
        untrusted: why it may not be started ("" when it may).
    """

    name: str
    dir: Path
    scope: str
    manifest: Manifest | None = None
    argv: list[str] = msgspec.field(default_factory=list)
    error: str = ""
    #: Why it may not run (a project extension the user has not trusted), or "".
    untrusted: str = ""
    #: Whether its executable is a program found on ``PATH`` (``exec`` named
    #: bare, or the very file its name finds there: an interpreter), rather
    #: than one of its own files (see :func:`on_path`).
    exec_on_path: bool = False
    #: Problems that do not stop it (an unknown manifest key, ...), each a sentence.
    warnings: list[str] = msgspec.field(default_factory=list)
    #: The skills it serves (manifest ``skills``, read at discovery).
    skills: list[sk.Skill] = msgspec.field(default_factory=list)
    #: How many processes of it run (a :class:`Sharing` value, see :func:`sharing_of`).
    sharing: str = Sharing.WORKSPACE
    #: The file its manifest was read from when that is not ``dir/extension.json``:
    #: a project's ``.mcp.json`` (see :mod:`.mcp_servers`); else ``None``.
    origin: Path | None = None
    #: The other copies of this name that discovery found and does not use,
    #: and why (see :func:`~.discovery.discover`). Not part of the
    #: comparison: a copy not used changing does not change this one.
    passed_over: list[Aside] = msgspec.field(default_factory=list)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Found):
            return NotImplemented
        return _compared(self) == _compared(other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # (mutable)


#: What two ``Found`` are compared by: every field but ``passed_over``.
_compared = operator.attrgetter(*(f for f in Found.__struct_fields__ if f != "passed_over"))


_decoder = msgspec.json.Decoder(Manifest)


def check_name(name: str) -> None:
    """Raises :class:`ManifestError` unless ``name`` is a safe extension name."""
    if not _NAME.fullmatch(name):
        raise ManifestError(
            f"invalid name {name!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )


def read_manifest(directory: Path) -> Manifest:
    """Parses and checks ``directory/extension.json`` (unknown keys are ignored).

    Raises:
        ManifestError: missing, unreadable, not JSON, a missing or mistyped field,
            or an unsafe name.
    """
    return read_manifest_with_warnings(directory)[0]


def read_manifest_with_warnings(directory: Path) -> tuple[Manifest, list[str]]:
    """:func:`read_manifest`, and what is odd but harmless about the manifest:
    a sentence for each unknown key, with the closest known one.

    Raises:
        ManifestError: as :func:`read_manifest`.
    """
    path = directory / MANIFEST
    try:
        data = read_regular(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise ManifestError(f"no {MANIFEST} in {directory}") from None
    except FileRefused as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror}") from None
    try:
        manifest = _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise ManifestError(f"{path}: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{path}: invalid JSON: {exc}") from None
    check_name(manifest.name)
    check_kind(manifest, path)
    if manifest.kind == Kind.MCP:
        pass  # an MCP server needs `exec` or `url` (check_kind), nothing else
    elif not manifest.exec and not manifest.skills and not has_theme(directory):
        raise ManifestError(
            f"{path}: `exec` or `skills` is required (or a theme: {' or '.join(THEME_FILES)})"
        )
    return manifest, unknown_key_warnings(data)


def check_kind(manifest: Manifest, path: Path | str) -> None:
    """Checks ``kind``, ``url``, ``scope`` and ``idle_stop`` of a manifest read from ``path``.

    Raises:
        ManifestError: an unknown ``kind`` or ``scope``; an MCP server with
            neither or both of ``exec`` and ``url``; ``url`` on a zot
            extension, or not ``http(s)://``; a negative ``idle_stop``.
    """
    if manifest.kind not in tuple(Kind):
        raise ManifestError(f"{path}: unknown kind {manifest.kind!r} (use 'zot' or 'mcp')")
    if manifest.scope and manifest.scope not in tuple(Sharing):
        raise ManifestError(
            f"{path}: unknown scope {manifest.scope!r} (use 'workspace' or 'shared')"
        )
    if manifest.idle_stop < 0:
        raise ManifestError(f"{path}: `idle_stop` must be 0 (never) or a number of seconds")
    if manifest.url and manifest.kind != Kind.MCP:
        raise ManifestError(f'{path}: `url` is for MCP servers only (add "kind": "mcp")')
    if manifest.kind == Kind.MCP:
        if not manifest.exec and not manifest.url:
            raise ManifestError(
                f"{path}: an MCP server needs `exec` (a program zotd runs) or `url` "
                "(its streamable-HTTP endpoint)"
            )
        if manifest.exec and manifest.url:
            raise ManifestError(f"{path}: an MCP server has `exec` or `url`, not both")
        if manifest.url and not manifest.url.startswith(("http://", "https://")):
            raise ManifestError(f"{path}: `url` must start with http:// or https://")


def sharing_of(manifest: Manifest | None, scope: str) -> Sharing:
    """How many processes of an extension found in ``scope`` (a :class:`Scope`)
    run: its manifest's ``scope``, else ``shared`` for an MCP server that is
    not project-local, else ``workspace``."""
    if manifest is None:
        return Sharing.WORKSPACE
    if manifest.scope:
        return Sharing(manifest.scope)
    if manifest.kind == Kind.MCP and scope != Scope.PROJECT:
        return Sharing.SHARED
    return Sharing.WORKSPACE


def has_theme(directory: Path) -> bool:
    """Whether ``directory`` holds a theme as current zot looks for one
    (:data:`THEME_FILES`, regular files; only stat'ed, never opened)."""
    for name in THEME_FILES:
        try:
            if (directory / name).is_file():
                return True
        except OSError:
            continue
    return False


def unknown_key_warnings(data: bytes) -> list[str]:
    """A warning for each top-level key of a manifest (JSON text) that is not in
    :data:`KNOWN_KEYS`, in the file's order; none if ``data`` is not a JSON object."""
    try:
        keys = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except (msgspec.ValidationError, msgspec.DecodeError):
        return []
    warnings = []
    for key in keys:
        if key in KNOWN_KEYS:
            continue
        warning = f"{MANIFEST}: unknown key `{key}` (ignored)"
        import difflib  # (only for an unknown key: the daemon's start does without it)

        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.6)
        if close:
            warning += f"; did you mean `{close[0]}`?"
        warnings.append(warning)
    return warnings


def resolve_exec(manifest: Manifest, directory: Path, path_env: str | None = None) -> str:
    """The executable to run, as an absolute path.

    ``exec`` may be absolute, relative to the manifest's directory (any path
    with a ``/``, or a bare name of a file in that directory), or a bare name
    looked up on ``PATH`` (``"exec": "node"``).

    Raises:
        ManifestError: not found, or not executable.
    """
    exe = manifest.exec
    if os.path.isabs(exe) or "/" in exe:
        candidate = Path(directory, exe)
    elif (directory / exe).is_file():
        candidate = directory / exe
    else:
        found = shutil.which(exe, path=path_env if path_env is not None else os.environ.get("PATH"))
        if found is None:
            raise ManifestError(f"exec {exe!r} is not in {directory} and not on PATH")
        return found
    if not candidate.is_file():
        raise ManifestError(f"exec {exe!r} not found: no file {candidate}")
    if not os.access(candidate, os.X_OK):
        raise ManifestError(f"exec {exe!r} is not executable: chmod +x {candidate}")
    return str(candidate.absolute())


def load(directory: Path, scope: str, path_env: str | None = None) -> Found:
    """Reads one extension directory into a :class:`Found` (never raises).

    ``path_env`` is the ``PATH`` a bare ``exec`` is looked up on (default:
    ours). An extension without ``exec`` has an empty :attr:`Found.argv`
    (nothing to run, see :func:`runs_nothing`); its skills are read (bounded,
    never blocking: see :mod:`.skills`).
    """
    directory = directory.absolute()
    try:
        manifest, warnings = read_manifest_with_warnings(directory)
    except ManifestError as exc:
        return Found(name=directory.name, dir=directory, scope=scope, error=str(exc))
    found = Found(
        name=manifest.name,
        dir=directory,
        scope=scope,
        manifest=manifest,
        warnings=warnings,
        sharing=sharing_of(manifest, scope),
    )
    try:
        sources = sk.plan(directory, manifest.skills)
    except sk.SkillsError as exc:
        found.error = f"{directory / MANIFEST}: {exc}"
        return found
    if manifest.exec:
        try:
            found.argv = [resolve_exec(manifest, directory, path_env), *manifest.args]
        except ManifestError as exc:
            found.error = str(exc)
            return found
        found.exec_on_path = on_path(manifest, directory, found.argv[0], path_env)
    found.skills, skipped = sk.scan(directory, manifest.name, sources)
    found.warnings.extend(skipped)
    return found


def runs_nothing(found: Found) -> bool:
    """Whether ``found`` is sound and names no program: it only ships skills
    (or a theme), and is ready without a process."""
    manifest = found.manifest
    return not found.error and manifest is not None and not manifest.exec and not manifest.url


def kind_of(found: Found) -> str:
    """What ``found`` speaks (a :class:`Kind` value; ``zot`` if its manifest is broken)."""
    return found.manifest.kind if found.manifest is not None else Kind.ZOT


def on_path(manifest: Manifest, directory: Path, exe: str, path_env: str | None = None) -> bool:
    """Whether ``exe`` (``manifest``'s resolved ``exec``) is a program found on
    ``PATH``: ``exec`` was a bare name looked up there, or ``exe`` is the very
    file (links resolved) that its name finds there, or in the directory of
    the Python zotd runs on (which the daemon puts first on the extensions'
    ``PATH``)."""
    if "/" not in manifest.exec and not (directory / manifest.exec).is_file():
        return True
    dirs = (path_env if path_env is not None else os.environ.get("PATH", "")).split(os.pathsep)
    own = os.path.dirname(sys.executable) if sys.executable else ""
    hit = shutil.which(os.path.basename(exe), path=os.pathsep.join([own, *dirs] if own else dirs))
    return hit is not None and os.path.realpath(hit) == os.path.realpath(exe)
