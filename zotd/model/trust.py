"""Which project-local extensions the user has trusted to run.

Project-local extensions (``<project>/.zot/extensions/``) arrive with
whatever repository the user cloned, so zotd runs them only once the user
has trusted them (``zot ext trust``), or has set ``trust_project_extensions
= true``. Trust is pinned to content: a fingerprint of everything in the
extension's directory (:func:`fingerprint`). When anything there changes,
the extension is untrusted again until trusted again. The servers of a
project's own ``.mcp.json`` are trusted the same way, each pinned to its
entry and the workspace files its command names (:func:`_entry_digest`),
under the key ``.mcp.json:NAME`` (:func:`key_of`).

What the fingerprint covers, and what it refuses:

- Every regular file under the extension's directory, by path, content and
  executable bit; every directory by path; every symbolic link by its
  target (as written: a link is never followed, so its target is pinned
  where it lies, inside the directory); a FIFO, socket or device by its
  kind (never opened). The one thing left out is a directory named
  ``.git``: git rewrites it on its own (index refreshes, gc), nothing an
  extension runs lives there, and a cloned repository cannot contain one.
- Bounded: at most :data:`MAX_ENTRIES` entries, :data:`MAX_FILE_BYTES` per
  file and :data:`MAX_TOTAL_BYTES` in all. Past a bound the extension
  cannot be trusted (:class:`Untrustable`, shown as its error), rather
  than trusted on part of its content.
- Only what it can pin may run. An extension cannot be trusted if its
  ``exec`` lies outside its directory (an absolute path, or one with
  ``..``) and is not a program found on ``PATH`` (an interpreter:
  ``"exec": "python3"``, or the very file ``python3`` finds there); if one
  of its arguments names a path outside it (absolute, with ``..``, or
  through a link leading out); or if it holds a link leading out of it: a
  change there would not change the fingerprint.

What the fingerprint cannot see: the interpreter found on ``PATH`` and its
libraries, and whatever the extension's own code chooses to read from
elsewhere once it runs (that code is pinned, so it was there when the user
trusted it).

The store is ``$ZOT_HOME/trust.json`` (0600)::

    {"version": 1, "workspaces": {"/abs/project": {"name": "sha256:..."}}}
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import msgspec

from .manifest import Found
from .mcp_servers import MCP_JSON
from .project_mcp import is_project_server
from .safe_files import FileRefused, open_regular, read_chunks

TRUST_FILE = "trust.json"

#: The most entries (files, directories, links) an extension's directory
#: may hold and still be trusted.
MAX_ENTRIES = 10_000
#: The largest file an extension's directory may hold and still be trusted.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: The most bytes of files an extension's directory may hold and still be trusted.
MAX_TOTAL_BYTES = 128 * 1024 * 1024

#: Directories left out of the fingerprint (see the module's docstring).
SKIPPED_DIRS = frozenset({".git"})

#: Starts every digest: a fingerprint of another layout never matches.
_FORMAT = b"zotd-trust-2\0"


class Untrustable(Exception):
    """An extension whose content cannot be pinned; the message says why."""


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def fingerprint(found: Found, seen: list[str] | None = None) -> str:
    """A digest of everything in ``found``'s directory (see the module's
    docstring), or of an entry of a project's ``.mcp.json`` (see
    :func:`_entry_digest`).

    Blocking and bounded: reads at most :data:`MAX_TOTAL_BYTES`, opening
    regular files only.

    ``seen``, if given, gets the path of every directory listed and entry
    pinned (what the digest depends on: see :mod:`.stamps`).

    Raises:
        Untrustable: past a bound, or it would run what the digest cannot pin.
    """
    if is_project_server(found):
        return _entry_digest(found, pin=True)
    root = _root(found)
    digest = hashlib.sha256(_FORMAT)
    _walk(root, digest, seen)
    return "sha256:" + digest.hexdigest()


def check(found: Found) -> None:
    """The refusals of :func:`fingerprint`, without reading a file's content
    (one ``lstat`` per entry): whether ``found`` could be trusted at all.

    Raises:
        Untrustable: as :func:`fingerprint`.
    """
    if is_project_server(found):
        _entry_digest(found, pin=False)
        return
    _walk(_root(found), None)


def key_of(found: Found) -> str:
    """Its name in the trust store: its name, or, for an entry of a project's
    ``.mcp.json``, ``.mcp.json:NAME`` (a name has no ``:``), so that it and a
    ``.zot/extensions/NAME`` copy are trusted apart."""
    return f"{MCP_JSON}:{found.name}" if is_project_server(found) else found.name


def _entry_digest(found: Found, *, pin: bool) -> str:
    """The fingerprint of an entry of a project's ``.mcp.json``: the manifest
    it makes (its command, arguments, environment, url and headers), and the
    content of each file of the workspace that its command or an argument
    names (a script, say). A directory an argument names is pinned by its
    path, not its content, and what the programs read once they run is not
    pinned at all (as with any extension's own reads). As for a directory's
    extension, a command outside the workspace must be a program found on
    PATH, and no argument may name a path outside the workspace.

    Raises:
        Untrustable: a command or argument outside the workspace, or a file
            past :data:`MAX_FILE_BYTES`.
    """
    manifest = found.manifest
    root = os.path.realpath(found.dir)
    digest = hashlib.sha256(_FORMAT + b"mcp.json\0")
    if manifest is None:
        raise Untrustable(f"{found.name} has no manifest to pin")
    digest.update(msgspec.json.encode(manifest))
    if found.argv:
        _confine(found, root)
    names = [found.argv[0]] if found.argv and not found.exec_on_path else []
    names += [os.path.join(found.dir, a) for a in manifest.args if a and not a.startswith("-")]
    for name in names:
        path = os.path.realpath(name)
        if not _inside(path, root) or not os.path.isfile(path):
            continue
        rel = os.path.relpath(path, root)
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise Untrustable(f"{rel} is larger than {MAX_FILE_BYTES >> 20} MiB")
        if pin:
            _record(digest, b"F", rel, _content_digest(path, rel))
    return "sha256:" + digest.hexdigest()


def _root(found: Found) -> str:
    root = os.path.realpath(found.dir)
    if not os.path.isdir(root):
        raise Untrustable(f"{found.dir} is not a directory")
    _confine(found, root)
    return root


def _inside(path: str, root: str) -> bool:
    try:
        if os.path.commonpath([path, root]) != root:
            return False
    except ValueError:
        return False
    rel = os.path.relpath(path, root)
    return not any(part in SKIPPED_DIRS for part in rel.split(os.sep))


def _confine(found: Found, root: str) -> None:
    """Refuses an ``exec`` or argument outside the directory (see the module)."""
    manifest = found.manifest
    if manifest is None or not found.argv:
        return
    exe = manifest.exec
    if not found.exec_on_path and not _inside(os.path.realpath(found.argv[0]), root):
        raise Untrustable(
            f"its `exec` {exe!r} is outside its directory ({os.path.realpath(found.argv[0])}) "
            "and not a program found on PATH; zotd pins only what is inside it (name an "
            'interpreter bare, to be found on PATH: "exec": "python3")'
        )
    for arg in manifest.args:
        values = [arg]
        if arg.startswith("-") and "=" in arg:
            values.append(arg.split("=", 1)[1])  # --require=../x.js
        for value in values:
            if not value:
                continue
            path = os.path.join(found.dir, value)  # an absolute value stays itself
            leaves = os.path.isabs(value) or ".." in value.split("/")
            if (leaves or os.path.lexists(path)) and not _inside(os.path.realpath(path), root):
                raise Untrustable(
                    f"its argument {arg!r} names a path outside its directory "
                    f"({os.path.realpath(path)}); zotd pins only what is inside it"
                )


def _record(digest: _Digest | None, kind: bytes, rel: str, payload: bytes) -> None:
    if digest is None:
        return
    name = os.fsencode(rel)
    digest.update(kind + struct.pack(">I", len(name)) + name)
    digest.update(struct.pack(">Q", len(payload)) + payload)


def _walk(root: str, digest: _Digest | None, seen: list[str] | None = None) -> None:
    """Pins every entry under ``root`` into ``digest`` (or only checks the
    bounds and links, if ``None``), in name order; ``seen`` gets each path."""
    entries = 0
    total = 0
    todo = [""]  # directories still to list, relative to root; depth first, by name
    while todo:
        rel_dir = todo.pop()
        if seen is not None:
            seen.append(os.path.join(root, rel_dir) if rel_dir else root)
        listed: list[os.DirEntry[str]] = []
        try:
            with os.scandir(os.path.join(root, rel_dir)) as it:
                for entry in it:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        raise Untrustable(
                            f"it holds more than {MAX_ENTRIES} files and directories, "
                            f"more than zotd pins"
                        )
                    listed.append(entry)
        except OSError as exc:
            raise Untrustable(f"cannot list {rel_dir or '.'}: {exc.strerror}") from None
        listed.sort(key=lambda e: e.name)
        subdirs: list[str] = []
        for entry in listed:
            rel = os.path.join(rel_dir, entry.name)
            if seen is not None:
                seen.append(entry.path)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                raise Untrustable(f"cannot read {rel}: {exc.strerror}") from None
            mode = st.st_mode
            if stat.S_ISLNK(mode):
                target = os.readlink(entry.path)
                if not _inside(os.path.realpath(entry.path), root):
                    raise Untrustable(
                        f"{rel} links outside its directory (to {target}); "
                        "zotd pins only what is inside it"
                    )
                _record(digest, b"L", rel, os.fsencode(target))
            elif stat.S_ISDIR(mode):
                if entry.name in SKIPPED_DIRS:
                    continue
                _record(digest, b"D", rel, b"")
                subdirs.append(rel)
            elif stat.S_ISREG(mode):
                if st.st_size > MAX_FILE_BYTES:
                    raise Untrustable(f"{rel} is larger than {MAX_FILE_BYTES >> 20} MiB")
                total += st.st_size
                if total > MAX_TOTAL_BYTES:
                    raise Untrustable(
                        f"its files add up to more than {MAX_TOTAL_BYTES >> 20} MiB, "
                        "more than zotd pins"
                    )
                if digest is not None:
                    kind = b"X" if mode & 0o111 else b"F"
                    _record(digest, kind, rel, _content_digest(entry.path, rel))
            else:  # a FIFO, socket or device: pinned by kind, never opened
                _record(digest, b"S", rel, str(stat.S_IFMT(mode)).encode())
        todo.extend(reversed(subdirs))


def _content_digest(path: str, rel: str) -> bytes:
    try:
        fd = open_regular(path, MAX_FILE_BYTES, follow_symlinks=False)
    except FileRefused as exc:
        raise Untrustable(f"cannot read {rel}: {exc}") from None
    except OSError as exc:
        raise Untrustable(f"cannot read {rel}: {exc.strerror}") from None
    try:
        content = hashlib.sha256()
        for chunk in read_chunks(fd, MAX_FILE_BYTES):
            content.update(chunk)
        return content.digest()
    except FileRefused as exc:
        raise Untrustable(f"cannot read {rel}: {exc}") from None
    except OSError as exc:
        raise Untrustable(f"cannot read {rel}: {exc.strerror}") from None
    finally:
        os.close(fd)


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
    """Why a project extension may not run ("" if it may).

    Hashes its directory only if it was trusted before (to compare); one
    never trusted is only checked (:func:`check`).

    Raises:
        Untrustable: it could not be trusted at all.
    """
    pinned = store.get(str(workspace), {}).get(key_of(found))
    entry = is_project_server(found)
    if pinned is None:
        check(found)
        why = (
            f"the servers of a project's {MCP_JSON} run only once trusted"
            if entry
            else "project-local extensions run only once trusted"
        )
    elif pinned != fingerprint(found):
        why = (
            f"its {MCP_JSON} entry changed since it was trusted"
            if entry
            else ("it changed since it was trusted")
        )
    else:
        return ""
    return f"{why}: run `zot ext trust` in {workspace} to allow it"


def vet(found: Found, workspace: Path, store: dict[str, dict[str, str]]) -> None:
    """Marks a project extension as the trust store has it: ``untrusted``
    says why it may not run; ``error``, why it could never be trusted
    (:class:`Untrustable`). The ``vet`` of :func:`~zotd.model.discovery.discover`."""
    try:
        found.untrusted = distrust_reason(found, workspace, store)
    except Untrustable as exc:
        found.error = f"cannot be trusted: {exc}"


def trust(home: Path, workspace: Path, found: list[Found]) -> list[str]:
    """Pins the current content of ``found`` as trusted in ``workspace``.

    Returns the names trusted: those that cannot be (:class:`Untrustable`)
    are left out, and not pinned. Written atomically, 0600.
    """
    prints: dict[str, str] = {}
    for ext in found:  # outside the lock: hashing may take a while
        try:
            prints[key_of(ext)] = fingerprint(ext)
        except Untrustable:
            continue
    with _writing:  # the daemon may trust from several threads at once
        store = load(home)
        pinned = store.setdefault(str(workspace), {})
        pinned.update(prints)
        home.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{TRUST_FILE}.", dir=home)  # 0600
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"version": 1, "workspaces": store}, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(tmp, home / TRUST_FILE)
    return list(dict.fromkeys(ext.name for ext in found if key_of(ext) in prints))


def keep_trust(home: Path, workspace: Path, found: Found, change: Callable[[], None]) -> None:
    """Runs ``change()``, the user's own edit of ``found``'s manifest (``zot ext
    enable``/``disable``), and keeps ``found`` trusted in ``workspace`` if it was:
    what the user writes, the user trusts."""
    store = load(home)
    try:
        was = store.get(str(workspace), {}).get(key_of(found)) == fingerprint(found)
    except Untrustable:
        was = False
    change()
    if was:
        trust(home, workspace, [found])


_writing = threading.Lock()
