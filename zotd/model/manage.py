"""Installing, removing, enabling and disabling extensions: the file operations.

Plain synchronous code with no daemon in it, so that ``zot ext ...`` works
whether or not zotd runs; when it runs, the daemon calls the same functions
(in a worker thread) and then applies the change live.

Every change is all or nothing: an install is staged in a hidden directory
beside its destination (discovery skips names starting with ``.``) and
renamed into place only once its manifest checks out; a manifest is
rewritten through a temporary file and ``os.replace``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .manifest import MANIFEST, Found, ManifestError, discover, load, project_dir, read_manifest

#: How long a ``git clone`` may take.
CLONE_TIMEOUT = 300.0

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
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=dest_root))
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
    path = found.dir / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManageError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ManageError(f"{path} is not a JSON object")
    data["enabled"] = enabled
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{MANIFEST}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ManageError(f"cannot write {path}: {exc.strerror or exc}") from None


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
