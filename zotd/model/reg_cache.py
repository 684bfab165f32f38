"""A lazy extension's registrations, cached from its last run.

An extension with ``lazy = true`` is not started with its workspace: what
it registered last time (commands, tools, subscriptions) is listed from
this cache, and its first use starts it (see :mod:`zotd.runtime.waking`).
The cache is only as good as its key, :func:`key`: a digest of

- its manifest as parsed (everything but ``enabled``: disabling and
  enabling it again changes nothing it registers), and the resolved argv
  (the executable found on ``PATH`` and the arguments);
- the content of its directory, as :func:`~.trust.fingerprint` pins it
  (every file by path, content and executable bit; bounded);
- every other regular file its argv names (``python3 /abs/server.py``,
  ``--script=../x.js``), by content (by size and time past
  :data:`~.trust.MAX_FILE_BYTES`), and the executable itself when it is a
  program found on ``PATH`` (``python3``, ``npx``) by its real path, size
  and modification time: upgrading the interpreter invalidates it too.

So a changed manifest, script or interpreter invalidates the cache by
itself: the key no longer matches, and the extension is started at once to
fill it again. What the key cannot see: what the program fetches or reads
elsewhere once it runs (``npx`` downloading a newer package, an
environment variable that changes its tools). An extension whose directory
is past the fingerprint's bounds is not cached (:class:`Uncacheable`): it
starts at once, as an eager one.

The file is ``$ZOT_HOME/cache/registrations/<name>.json`` (0600, written
atomically, at most :data:`MAX_CACHE_BYTES`)::

    {"version": 1, "name": "...", "key": "sha256:...",
     "registrations": [{"type": "register_tool", ...}, ...],
     "events": [...], "intercepts": [...]}

Plain blocking code: the runtime calls it in a worker thread.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

import msgspec

from ..protocol import extension as ep
from ..protocol.frames import FrameError
from . import trust
from .manifest import Found
from .safe_files import FileRefused, read_regular

__all__ = ["MAX_CACHE_BYTES", "CacheError", "Cached", "Uncacheable", "key", "load", "path", "save"]

#: The largest cache file written or read (a server's 1024 tools with their
#: schemas fit several times over).
MAX_CACHE_BYTES = 8 * 1024 * 1024

#: Starts every key: a key of another layout never matches.
_FORMAT = b"zotd-registrations-1\0"

VERSION = 1


class Uncacheable(Exception):
    """What an extension runs cannot be pinned (past the bounds); the message says why."""


class CacheError(Exception):
    """A cache file that cannot be used (unreadable, corrupt, too large); the message says why."""


class Cached(msgspec.Struct):
    """What one run of an extension registered and subscribed to."""

    registrations: list[ep.RegisterCommand | ep.RegisterTool] = msgspec.field(default_factory=list)
    events: list[str] = msgspec.field(default_factory=list)
    intercepts: list[str] = msgspec.field(default_factory=list)


class _File(msgspec.Struct):
    version: int
    name: str
    key: str
    registrations: list[msgspec.Raw] = []
    events: list[str] = []
    intercepts: list[str] = []


_decode_file = msgspec.json.Decoder(_File).decode
_encode = msgspec.json.Encoder().encode


def path(cache_dir: Path, name: str) -> Path:
    """Where extension ``name``'s registrations are cached."""
    return cache_dir / f"{name}.json"


def key(found: Found, seen: list[str] | None = None) -> str:
    """The digest the cache of ``found`` is valid for (see the module's docstring).

    Blocking and bounded as :func:`~.trust.fingerprint` (and one
    :data:`~.trust.MAX_FILE_BYTES` read per file its argv names). ``seen``,
    if given, gets every path the digest depends on (see :mod:`.stamps`).

    Raises:
        Uncacheable: its directory is past the fingerprint's bounds, or
            holds a link leading out of it.
    """
    digest = hashlib.sha256(_FORMAT)
    manifest = found.manifest
    if manifest is not None:
        fields = msgspec.structs.asdict(manifest)
        fields.pop("enabled", None)
        digest.update(_encode(fields) + b"\0")
    digest.update(_encode(found.argv) + b"\0")
    if manifest is not None and manifest.exec:
        try:  # (its directory alone: the files its argv names are pinned below)
            directory = msgspec.structs.replace(found, argv=[])
            digest.update(trust.fingerprint(directory, seen).encode() + b"\0")
        except trust.Untrustable as exc:
            raise Uncacheable(str(exc)) from None
    root = os.path.realpath(found.dir)
    if seen is not None:
        seen.append(str(found.dir))
    for i, arg in enumerate(found.argv):
        for value in _paths_in(arg):
            named = os.path.join(found.dir, value)
            if seen is not None:
                seen.append(named)
            where = os.path.realpath(named)
            if i > 0 and _inside(where, root):
                continue  # pinned with the directory
            whole = i > 0 or not found.exec_on_path
            digest.update(_encode([i, value, _identity(where, whole=whole)]))
    return "sha256:" + digest.hexdigest()


def _paths_in(arg: str) -> list[str]:
    """What an argument may name as a file: itself, and a ``--flag=value``'s value."""
    values = [arg]
    if arg.startswith("-") and "=" in arg:
        values.append(arg.split("=", 1)[1])
    return [v for v in values if v]


def _inside(where: str, root: str) -> bool:
    try:
        return os.path.commonpath([where, root]) == root
    except ValueError:
        return False


def _identity(where: str, *, whole: bool) -> str:
    """A regular file by its content (``whole``, up to the trust bound), else
    by its path, size and modification time; "" for anything else."""
    try:
        st = os.stat(where)
    except OSError:
        return ""
    if not stat.S_ISREG(st.st_mode):
        return ""
    by_stat = f"{where}:{st.st_size}:{st.st_mtime_ns}"
    if not whole or st.st_size > trust.MAX_FILE_BYTES:
        return by_stat
    try:
        content = read_regular(Path(where), trust.MAX_FILE_BYTES)
    except (OSError, FileRefused):
        return by_stat
    return hashlib.sha256(content).hexdigest()


def load(file: Path, name: str, want: str) -> tuple[Cached | None, str]:
    """The cache in ``file`` if it is ``name``'s and its key is ``want``; else
    ``None`` and why (for the extension's log): no cache yet, or it was made
    for another content.

    Raises:
        CacheError: the file is there but cannot be used (unreadable, not
            a cache, too large, a registration that does not decode).
    """
    try:
        data = read_regular(file, MAX_CACHE_BYTES)
    except FileNotFoundError:
        return None, "no cache of its registrations yet"
    except FileRefused as exc:
        raise CacheError(f"{file}: {exc}") from None
    except OSError as exc:
        raise CacheError(f"{file}: {exc.strerror}") from None
    try:
        parsed = _decode_file(data)
        if parsed.version != VERSION:
            return None, f"its cache is of another version ({parsed.version})"
        if parsed.name != name:
            raise CacheError(f"{file}: it is {parsed.name!r}'s, not {name!r}'s")
        if parsed.key != want:
            return None, "its manifest or what it runs changed since its registrations were cached"
        frames: list[ep.RegisterCommand | ep.RegisterTool] = []
        for raw in parsed.registrations:
            frame = ep.decode_extension_frame(bytes(raw))
            if not isinstance(frame, ep.RegisterCommand | ep.RegisterTool):
                raise CacheError(f"{file}: a registration that is not one")
            frames.append(frame)
    except (msgspec.DecodeError, FrameError, ValueError) as exc:
        raise CacheError(f"{file}: not a registrations cache ({exc})") from None
    return Cached(frames, list(parsed.events), list(parsed.intercepts)), ""


def save(file: Path, name: str, key: str, cached: Cached) -> bool:
    """Writes ``cached`` for ``name`` under ``key`` into ``file``, atomically,
    0600 (its directory 0700); ``False`` (and any old file removed) if it
    would be larger than :data:`MAX_CACHE_BYTES`. Every change is a rename
    into (or an unlink from) the directory: :mod:`.rereads` checks the
    directory alone for all of them.

    Raises:
        OSError: it could not be written (the old file, if any, stays).
    """
    body = _encode(
        {
            "version": VERSION,
            "name": name,
            "key": key,
            "registrations": [
                msgspec.Raw(ep.encode(f).rstrip(b"\n")) for f in cached.registrations
            ],
            "events": sorted(cached.events),
            "intercepts": sorted(cached.intercepts),
        }
    )
    if len(body) > MAX_CACHE_BYTES:
        file.unlink(missing_ok=True)
        return False
    file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)  # 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body + b"\n")
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
