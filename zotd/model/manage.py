"""Installing, removing, enabling and disabling extensions: the file operations.

Plain synchronous code with no daemon in it, so that ``zot ext ...`` works
whether or not zotd runs; when it runs, the daemon calls the same functions
(in a worker thread) and then applies the change live.

Every change is all or nothing: an install is staged in a hidden directory
beside its destination, ``.install-<pid>-<random>`` (discovery skips names
starting with ``.``), and renamed into place only once its manifest checks
out; a manifest is rewritten through a temporary file of its writer's own
(``mkstemp``), synced, then ``os.replace``-d over it, so that concurrent
writers never share one and a reader sees the old manifest or the new one,
whole.

A staging directory outlives its install only if the installing process was
killed. :func:`remove_stale_staging` removes such leftovers (the daemon at
start, every install first): those whose owner pid is not alive, and any
older than :data:`STALE_STAGING_AGE` (a pid reused since, a name without one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from .discovery import discover, project_dir
from .manifest import MANIFEST, Found, ManifestError, load, read_manifest
from .project_mcp import is_project_server

#: How long a ``git clone`` may take.
CLONE_TIMEOUT = 300.0

#: How a staging directory's name starts (hidden: discovery skips it).
STAGING_PREFIX = ".install-"
#: Past this age (seconds since its last change) a staging directory is a
#: leftover whoever owns its pid now: no install takes a day.
STALE_STAGING_AGE = 24 * 3600.0

_STAGING_PID = re.compile(rf"^{re.escape(STAGING_PREFIX)}(\d+)-")

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP = re.compile(r"^[\w.-]+@[\w.-]+:")  # git@host:owner/repo.git


class ManageError(Exception):
    """An operation was refused or failed; the message says why and what to do."""


def installed(*, workspace: Path | None, global_dir: Path) -> list[Found]:
    """What a workspace would run (no ``--ext`` ones), one per name."""
    return discover(workspace=workspace, global_dir=global_dir)


def find(name: str, found: list[Found]) -> Found:
    """The extension called ``name``.

    Raises:
        ManageError: no such name; the message lists the names there are.
    """
    for f in found:
        if f.name == name:
            return f
    names = ", ".join(sorted(f.name for f in found)) or "none"
    raise ManageError(f"no extension named {name!r} (installed: {names})")


def is_url(source: str) -> bool:
    """Whether ``source`` is a URL or ``user@host:path`` (not a local path)."""
    return bool(_URL.match(source) or _SCP.match(source))


def is_git_source(source: str) -> bool:
    """Whether ``source`` is cloned (a URL, ``user@host:path``, a bare repository)
    rather than copied (a directory)."""
    if is_url(source):
        return True
    path = Path(source)
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def install(source: str, dest_root: Path, scope: str) -> Found:
    """Copies a directory, or shallow-clones a git repository, into ``dest_root/<name>/``.

    ``<name>`` is the ``name`` of the source's ``extension.json``.

    Raises:
        ManageError: the source is missing or cannot be cloned, has no valid
            manifest, its name is unsafe, or an extension of that name is
            already installed. Nothing is left behind.
    """
    dest_root.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(dest_root)
    staging = make_staging(dest_root)
    try:
        tree = staging / "tree"
        if is_git_source(source):
            _clone(source, tree)
        else:
            _copy(source, tree)
        if not (tree / MANIFEST).is_file():
            raise ManageError(f"{source} is not a zot extension: it has no {MANIFEST}")
        try:
            manifest = read_manifest(tree)
        except ManifestError as exc:
            # Name the source, not the staging copy that is about to go.
            why = str(exc).replace(str(tree), source)
            raise ManageError(f"{source} is not a zot extension: {why}") from None
        target = dest_root / manifest.name
        if target.resolve().parent != dest_root.resolve():
            raise ManageError(f"refusing name {manifest.name!r}: it leads out of {dest_root}")
        if target.exists():
            raise ManageError(
                f"an extension named {manifest.name!r} is already installed in {target}; "
                f"remove it first with `zot ext remove {manifest.name}`"
            )
        tree.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return load(target, scope)


def make_staging(dest_root: Path) -> Path:
    """A new, empty staging directory in ``dest_root``, named for this process:
    ``.install-<pid>-<random>``."""
    return Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=dest_root))


def is_stale_staging(path: Path, *, now: float | None = None) -> bool:
    """Whether ``path`` is a staging directory no install is using: its owner
    pid is not alive, or it is older than :data:`STALE_STAGING_AGE`.

    A symbolic link, a file, or a name not starting with
    :data:`STAGING_PREFIX` is never one.
    """
    if not path.name.startswith(STAGING_PREFIX):
        return False
    try:
        st = path.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if (now if now is not None else time.time()) - st.st_mtime > STALE_STAGING_AGE:
        return True
    match = _STAGING_PID.match(path.name)
    return match is not None and not _alive(int(match[1]))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a pid this code wrote: leave it to the age rule
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process (EPERM): alive
    try:  # a zombie (killed, not reaped yet) installs nothing more
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b") ", 1)[-1][:1] != b"Z"
    except OSError:
        return True  # no /proc (macOS): os.kill said it exists


def remove_stale_staging(root: Path) -> list[Path]:
    """Deletes the stale staging directories in ``root`` (see
    :func:`is_stale_staging`); returns them. Nothing else is touched; what
    cannot be deleted stays (the next attempt tries again)."""
    try:
        entries = list(root.iterdir())
    except OSError:  # no such directory yet, say
        return []
    now = time.time()
    removed = []
    for path in entries:
        if is_stale_staging(path, now=now):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed


def _copy(source: str, tree: Path) -> None:
    src = Path(source)
    if not src.is_dir():
        raise ManageError(f"{source}: no such directory (nor a git URL)")
    if tree.resolve().is_relative_to(src.resolve()):
        raise ManageError(f"cannot install {source} into a directory inside itself")
    try:
        shutil.copytree(src, tree, symlinks=True)
    except shutil.Error as exc:
        failures = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        first = f": {failures[0][2]}" if failures else ""
        raise ManageError(f"cannot copy {source}: {len(failures)} file(s) failed{first}") from None
    except OSError as exc:
        raise ManageError(f"cannot copy {source}: {exc.strerror or exc}") from None


def _clone(source: str, tree: Path) -> None:
    url = source
    if not is_url(source):
        url = Path(source).resolve().as_uri()  # a bare repository path; --depth needs a URL
    try:
        proc = subprocess.run(
            ["git", "clone", "--depth", "1", "--quiet", "--", url, str(tree)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLONE_TIMEOUT,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except FileNotFoundError:
        raise ManageError("git is not installed; install it to install from a URL") from None
    except subprocess.TimeoutExpired:
        raise ManageError(f"git clone {source} took longer than {CLONE_TIMEOUT:g} s") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        why = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-1:]
        detail = " ".join(why)[:500] or f"exit code {proc.returncode}"
        raise ManageError(f"git clone {source} failed: {detail}")


def remove(found: Found, *, global_dir: Path) -> None:
    """Deletes an installed extension's directory.

    Raises:
        ManageError: the directory is not in an extensions directory (an
            ``--ext`` one, say), or cannot be deleted.
    """
    _refuse_project_server(found, "remove it from that file")
    parent = found.dir.parent
    in_project = parent.name == "extensions" and parent.parent.name == ".zot"
    if parent != global_dir.absolute() and not in_project:
        raise ManageError(f"{found.dir} is not an installed extension; not deleting it")
    try:
        shutil.rmtree(found.dir)
    except OSError as exc:
        raise ManageError(f"cannot delete {found.dir}: {exc.strerror or exc}") from None


def set_enabled(found: Found, enabled: bool) -> None:
    """Rewrites ``enabled`` in the manifest, keeping every other field in its order.

    Raises:
        ManageError: the manifest cannot be read, parsed or written.
    """
    _refuse_project_server(
        found,
        'set "disabled": true in its entry there, or remove it'
        if not enabled
        else 'remove "disabled": true from its entry there',
    )
    path = found.dir / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManageError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ManageError(f"{path} is not a JSON object")
    data["enabled"] = enabled
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        replace_file(path, text.encode("utf-8"))
    except OSError as exc:
        raise ManageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _refuse_project_server(found: Found, fix: str) -> None:
    """Refuses to change an entry of a project's ``.mcp.json``: that file is
    the project's, and zotd does not rewrite it."""
    if is_project_server(found):
        raise ManageError(
            f"{found.name} is a server of {found.origin}, which zotd does not rewrite: {fix}"
        )


def stage_manifest(dest_root: Path, name: str, data: bytes) -> Path:
    """A new extension directory holding only ``extension.json`` (``data``),
    in a staging directory of ``dest_root`` (hidden from discovery); returns
    it, to be installed with :func:`install`. The caller removes its parent
    (:func:`unstage`) when done; a killed caller's is a stale staging
    directory (:func:`remove_stale_staging`).

    Raises:
        ManageError: it cannot be written.
    """
    try:
        dest_root.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(dest_root)
        tree = make_staging(dest_root) / name
        tree.mkdir()
        (tree / MANIFEST).write_bytes(data)
    except OSError as exc:
        raise ManageError(f"cannot write in {dest_root}: {exc.strerror or exc}") from None
    return tree


def unstage(tree: Path) -> None:
    """Removes what :func:`stage_manifest` or :func:`set_aside` made."""
    shutil.rmtree(tree.parent, ignore_errors=True)


def set_aside(target: Path) -> Path:
    """Moves an installed extension's directory into a staging directory
    beside it (so its name is free), to be put back with :func:`put_back` or
    dropped with :func:`unstage`; returns where it went.

    Raises:
        ManageError: it cannot be moved.
    """
    aside = make_staging(target.parent) / target.name
    try:
        target.rename(aside)
    except OSError as exc:
        unstage(aside)
        raise ManageError(f"cannot move {target} aside: {exc.strerror or exc}") from None
    return aside


def put_back(aside: Path, target: Path) -> None:
    """Undoes :func:`set_aside` (if nothing took ``target`` meanwhile)."""
    try:
        aside.rename(target)
    except OSError:
        return
    unstage(aside)


def replace_file(path: Path, data: bytes) -> None:
    """Replaces ``path`` with ``data`` atomically: written to a temporary file
    of this call's own in the same directory (same mode as ``path``), synced,
    then renamed over it. Concurrent callers never share a temporary file,
    and a reader sees the old content or the new, whole.

    Raises:
        OSError: it cannot be written; ``path`` is as it was, no temporary left.
    """
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            try:
                os.fchmod(f.fileno(), stat.S_IMODE(path.stat().st_mode))
            except FileNotFoundError:
                pass  # a new file: mkstemp's 0600 then
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(name, path)
    except BaseException:
        try:
            os.unlink(name)
        except OSError:
            pass
        raise
    _sync_dir(path.parent)


def _sync_dir(directory: Path) -> None:
    # The rename is durable once the directory is synced (best effort: not
    # every system lets a directory be opened so).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def scope_root(scope: str, *, workspace: Path | None, global_dir: Path) -> Path:
    """The extensions directory of a scope (``global`` or ``project``).

    Raises:
        ManageError: an unknown scope, or ``project`` without a workspace.
    """
    if scope == "global":
        return global_dir
    if scope == "project":
        if workspace is None:
            raise ManageError("a project install needs a project directory")
        return project_dir(workspace)
    raise ManageError(f"scope must be 'global' or 'project', not {scope!r}")
