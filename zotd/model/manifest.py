"""``extension.json`` manifests and where extensions are found.

Discovery (reference, "Layout & discovery") looks in two places, and
``zotd --ext PATH`` adds a third that wins over both:

1. explicit: directories named with ``--ext`` (scope ``explicit``),
2. project-local: ``<workspace>/.zot/extensions/<name>/`` (scope ``project``),
3. global: ``$ZOT_HOME/extensions/<name>/`` (scope ``global``).

A broken manifest never raises out of :func:`discover`: it becomes a
:class:`Found` whose ``error`` says what is wrong, so it can be listed as
``failed`` beside the extensions that work.

A project's files come with whatever repository was cloned, so discovery
reads them warily (:func:`read_regular`): a manifest is opened only if it is
a regular file (a FIFO, a device or a link to one is refused without
blocking), and read up to :data:`MAX_MANIFEST_BYTES`; a scope's directory is
listed up to :data:`MAX_DIRS` extensions. And a project-local copy that
cannot run (broken, disabled, or not trusted) does not hide the user's own
copy of the same name (see :func:`discover`).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import msgspec

log = logging.getLogger(__name__)

MANIFEST = "extension.json"

#: Names end up in file names (``ext-<name>.log``) and directory names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: The largest ``extension.json`` read (a manifest is a few hundred bytes).
MAX_MANIFEST_BYTES = 64 * 1024

#: The most extension directories read from one scope's directory (by
#: name); more are left out, with a warning in the daemon's log.
MAX_DIRS = 256

#: The most entries of one scope's directory looked at while listing it.
MAX_LISTED = 4 * MAX_DIRS


class Scope(StrEnum):
    """Where an extension was found (values as on the wire: ``ExtensionInfo.scope``)."""

    EXPLICIT = "explicit"
    PROJECT = "project"
    GLOBAL = "global"


class Manifest(msgspec.Struct, kw_only=True):
    """The fields of ``extension.json`` (reference, "Layout & discovery")."""

    name: str
    exec: str
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


#: Keys a manifest may have beyond :class:`Manifest`'s fields without a warning:
#: current zot's (``skills``: its skill directories, which zotd does not load).
OTHER_KEYS = ("skills",)

#: Every key a manifest may have without a warning.
KNOWN_KEYS = (*(f.encode_name for f in msgspec.structs.fields(Manifest)), *OTHER_KEYS)


class ManifestError(Exception):
    """A manifest that cannot be used; the message says why."""


@dataclass(slots=True)
class Found:
    """One discovered extension.

    Attributes:
        name: the manifest's name (the directory's name if it has none).
        dir: the directory holding ``extension.json``.
        scope: a :class:`Scope` value.
        manifest: the parsed manifest, or ``None`` if it did not parse.
        argv: the resolved executable and its args; empty when ``error`` is set.
        error: why it cannot be started ("" when it can).
        untrusted: why it may not be started ("" when it may).
    """

    name: str
    dir: Path
    scope: str
    manifest: Manifest | None = None
    argv: list[str] = field(default_factory=list)
    error: str = ""
    #: Why it may not run (a project extension the user has not trusted), or "".
    untrusted: str = ""
    #: Whether its executable is a program found on ``PATH`` (``exec`` named
    #: bare, or the very file its name finds there: an interpreter), rather
    #: than one of its own files (see :func:`on_path`).
    exec_on_path: bool = False
    #: Problems that do not stop it (an unknown manifest key, ...), each a sentence.
    warnings: list[str] = field(default_factory=list)
    #: The other copies of this name that discovery found and does not use,
    #: and why (see :func:`discover`). Not part of the comparison: a copy
    #: not used changing does not change this one.
    passed_over: list[Aside] = field(default_factory=list, compare=False)


#: Why a copy of an extension is not the one used (``Aside.why``): a
#: project-local copy that cannot run gives way to the user's own copy...
FAILED, DISABLED, UNTRUSTED = "failed", "disabled", "untrusted"
#: ... and any copy gives way to one of higher precedence that can.
HIDDEN = "hidden"


@dataclass(slots=True)
class Aside:
    """A copy of an extension that discovery found and does not use.

    Attributes:
        found: the copy.
        why: :data:`FAILED`, :data:`DISABLED` or :data:`UNTRUSTED` (a
            project-local copy that cannot run, which gives way to a lower
            one), or :data:`HIDDEN` (a copy of higher precedence is used).
        reason: why, in words.
    """

    found: Found
    why: str
    reason: str


_decoder = msgspec.json.Decoder(Manifest)


class FileRefused(Exception):
    """A file that is not read: not a regular file, or over its size cap."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def open_regular(path: str | Path, limit: int, *, follow_symlinks: bool = True) -> int:
    """Opens ``path`` for reading if it is a regular file of at most ``limit``
    bytes; returns the descriptor (the caller closes it).

    Never blocks and never opens what is not a regular file: ``path`` is
    stat'ed first (a FIFO or a device is refused unopened), then opened with
    ``O_NONBLOCK`` (and ``O_NOFOLLOW`` unless ``follow_symlinks``) and
    checked again with ``fstat`` (it may have been swapped in between).

    Raises:
        FileRefused: not a regular file (or, with ``follow_symlinks`` false,
            a symbolic link), or larger than ``limit``.
        OSError: it cannot be stat'ed or opened.
    """
    st = os.stat(path, follow_symlinks=follow_symlinks)
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"it is {_kind(st.st_mode)}, not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise FileRefused(f"it is larger than {_size(limit)}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_chunks(fd: int, limit: int) -> Iterator[bytes]:
    """The content of ``fd`` (from :func:`open_regular`), in chunks.

    Raises:
        FileRefused: it grew past ``limit`` while being read.
    """
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return
        total += len(chunk)
        if total > limit:
            raise FileRefused(f"it is larger than {_size(limit)}")
        yield chunk


def read_regular(path: str | Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The content of a regular file of at most ``limit`` bytes (see
    :func:`open_regular`: nothing else is opened, nothing blocks).

    Raises:
        FileRefused: not a regular file, or larger than ``limit``.
        OSError: it cannot be read.
    """
    fd = open_regular(path, limit, follow_symlinks=follow_symlinks)
    try:
        return b"".join(read_chunks(fd, limit))
    finally:
        os.close(fd)


def _size(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} bytes"


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
    if not manifest.exec:
        raise ManifestError(f"{path}: `exec` is empty")
    return manifest, unknown_key_warnings(data)


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

    ``path_env`` is the ``PATH`` a bare ``exec`` is looked up on (default: ours).
    """
    directory = directory.absolute()
    try:
        manifest, warnings = read_manifest_with_warnings(directory)
    except ManifestError as exc:
        return Found(name=directory.name, dir=directory, scope=scope, error=str(exc))
    found = Found(
        name=manifest.name, dir=directory, scope=scope, manifest=manifest, warnings=warnings
    )
    try:
        found.argv = [resolve_exec(manifest, directory, path_env), *manifest.args]
    except ManifestError as exc:
        found.error = str(exc)
    else:
        found.exec_on_path = on_path(manifest, directory, found.argv[0], path_env)
    return found


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


def _subdirs(root: Path) -> list[Path]:
    """The extension directories of a scope, by name: at most :data:`MAX_DIRS`
    (of the first :data:`MAX_LISTED` entries), with a warning if there are more."""
    dirs: list[Path] = []
    listed = 0
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                listed += 1
                if listed > MAX_LISTED:
                    log.warning(
                        "%s has more than %d entries: only the first %d are looked at",
                        root,
                        MAX_LISTED,
                        MAX_LISTED,
                    )
                    break
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir():  # a link to a directory counts; stat never blocks
                        dirs.append(Path(entry.path))
                except OSError:
                    continue
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("cannot list %s: %s", root, exc.strerror)
        return []
    dirs.sort()
    if len(dirs) > MAX_DIRS:
        log.warning(
            "%s has %d extension directories: only the first %d (by name) are read",
            root,
            len(dirs),
            MAX_DIRS,
        )
        del dirs[MAX_DIRS:]
    return dirs


def project_dir(workspace: Path) -> Path:
    """Project-local extensions of a workspace: ``<workspace>/.zot/extensions``."""
    return workspace / ".zot" / "extensions"


def stands_aside(found: Found) -> str:
    """Why a project-local copy gives way to a lower-precedence copy of its
    name: :data:`FAILED`, :data:`DISABLED`, :data:`UNTRUSTED`, or "" (it does not)."""
    if found.scope != Scope.PROJECT:
        return ""
    if found.error:
        return FAILED
    if found.manifest is not None and not found.manifest.enabled:
        return DISABLED
    if found.untrusted:
        return UNTRUSTED
    return ""


def _aside_reason(found: Found, why: str) -> str:
    if why == FAILED:
        return found.error
    if why == DISABLED:
        return 'its manifest says "enabled": false'
    return found.untrusted


def discover(
    *,
    workspace: Path | None,
    global_dir: Path,
    explicit: Sequence[Path] = (),
    path_env: str | None = None,
    vet: Callable[[Found], None] | None = None,
) -> list[Found]:
    """Every extension a workspace sees, one per name, highest precedence first.

    Order: explicit, then project-local, then global, by directory name
    within each (extensions then start concurrently, and a contested command
    or tool name goes to whichever registers it first). A name already taken by a
    higher-precedence scope hides the lower one, with one exception: a
    project-local copy that cannot run (a broken manifest, ``"enabled":
    false``, or not trusted) does not hide a global copy of its name, which
    is used instead. A file in a cloned repository can neither replace the
    user's own extension until the user trusts it nor turn it off (a guard
    in particular). The copies not used are listed in the used one's
    :attr:`Found.passed_over`, with why; the project copy takes over once
    it can run (trusted, enabled, or its manifest fixed).

    ``path_env`` is the ``PATH`` the extensions will run with, for a bare
    ``exec``. ``vet`` is called with every project-local copy whose manifest
    is sound, before the choice: it may set ``untrusted`` (or ``error``), as
    the workspace's trust store says (see :func:`zotd.model.trust.vet`).
    """
    sources: list[tuple[str, Iterable[Path]]] = [(Scope.EXPLICIT, explicit)]
    if workspace is not None:
        sources.append((Scope.PROJECT, _subdirs(project_dir(workspace))))
    sources.append((Scope.GLOBAL, _subdirs(global_dir)))
    copies: dict[str, list[Found]] = {}
    for scope, dirs in sources:
        for directory in dirs:
            found = load(Path(directory), scope, path_env)
            same = copies.setdefault(found.name, [])
            kept = next((c for c in same if c.scope == scope), None)
            if kept is not None:
                log.warning(
                    "two %s extensions are named %r: using %s, ignoring %s",
                    scope,
                    found.name,
                    kept.dir,
                    found.dir,
                )
                continue
            if scope == Scope.PROJECT and vet is not None and not found.error:
                vet(found)
            same.append(found)
    return [_choose(same) for same in copies.values()]


def _choose(copies: list[Found]) -> Found:
    """The copy used among ``copies`` (one per scope, by precedence), with
    the others in its ``passed_over``."""
    chosen = next((c for c in copies if not stands_aside(c)), copies[0])
    before = True
    chosen.passed_over = []
    for c in copies:
        if c is chosen:
            before = False
            continue
        why = stands_aside(c) if before else HIDDEN
        reason = (
            _aside_reason(c, why)
            if before
            else f"the {chosen.scope} copy in {chosen.dir} comes first"
        )
        chosen.passed_over.append(Aside(c, why, reason))
    return chosen


def to_enable(found: Found) -> Found:
    """The copy ``zot ext enable NAME`` acts on, given what runs under NAME:
    a project-local copy that gave way to it because it is disabled (it then
    takes the name back, if trusted), else ``found`` itself."""
    for aside in found.passed_over:
        if aside.why == DISABLED:
            return aside.found
    return found


def every_copy(found: Iterable[Found]) -> Iterator[Found]:
    """Each of ``found`` (from :func:`discover`), and then the copies it passed over."""
    for f in found:
        yield f
        for aside in f.passed_over:
            yield aside.found
