"""The environment variables the user let an extension see (``zot ext env``).

``zot ext env NAME --allow VAR`` and ``--deny VAR`` change them; the daemon
keeps them in a private file of its own, ``$ZOT_HOME/env-grants.json``
(0600, replaced whole through a temporary file and a rename)::

    {"version": 1, "extensions": {"kagi-search": {"allow": ["KAGI_API_KEY"], "deny": []}}}

Grants go by extension name, as ``[extensions.NAME]`` of ``zotd.toml`` does:
whichever copy (project, global, ``--ext``) runs under that name gets them.
The file holds names only, never values: the values stay in the daemon's
environment. A grant (``allow``) passes a variable through; a denial
(``deny``) hides it, also when its manifest or ``zotd.toml`` passes it
through. The last word on a name wins: allowing it takes back a denial,
denying it takes back a grant; either stays until the other is given.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

import msgspec

from .safe_files import FileRefused, open_regular

GRANTS_FILE = "env-grants.json"

#: The largest grants file read (names only: far more than anyone needs).
MAX_GRANTS_BYTES = 1024 * 1024

#: A variable name a user may grant: what a POSIX shell can export.
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class GrantsError(Exception):
    """The grants file cannot be read or written, or a change is refused;
    the message says which and why."""


class Grants(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """What one extension was let see (``allow``) or not (``deny``), by name."""

    allow: list[str] = []
    deny: list[str] = []


class _Store(msgspec.Struct, kw_only=True, frozen=True):
    version: int = 1
    extensions: dict[str, Grants] = {}


def is_variable_name(name: str) -> bool:
    """Whether ``name`` can be the name of an environment variable one grants
    (letters, digits and ``_``, not starting with a digit)."""
    return _VARIABLE.fullmatch(name) is not None


def grants_path(home: Path) -> Path:
    """``$ZOT_HOME/env-grants.json``."""
    return home / GRANTS_FILE


def load(home: Path) -> dict[str, Grants]:
    """Every extension's grants; a missing file means none.

    Raises:
        GrantsError: the file is not a regular file, too large, unreadable,
            or not what zotd writes.
    """
    path = grants_path(home)
    try:
        fd = open_regular(path, MAX_GRANTS_BYTES)
    except FileNotFoundError:
        return {}
    except (FileRefused, OSError) as exc:
        raise GrantsError(f"cannot read {path}: {_why(exc)}") from None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_GRANTS_BYTES + 1)
    except OSError as exc:
        raise GrantsError(f"cannot read {path}: {_why(exc)}") from None
    try:
        store = msgspec.json.decode(data, type=_Store)
    except msgspec.DecodeError as exc:
        raise GrantsError(f"{path} is not a grants file zotd wrote: {exc}") from None
    for grants in store.extensions.values():
        for name in (*grants.allow, *grants.deny):
            if not is_variable_name(name):
                raise GrantsError(f"{path} is not a grants file zotd wrote: {name!r}")
    return dict(store.extensions)


def grants_for(home: Path, name: str) -> Grants:
    """Extension ``name``'s grants (:func:`load`; same errors)."""
    return load(home).get(name, Grants())


def change(home: Path, name: str, allow: Iterable[str], deny: Iterable[str]) -> tuple[Grants, bool]:
    """Grants extension ``name`` the variables ``allow`` and denies it ``deny``,
    and writes the file if that changed anything (atomically, 0600).

    Returns its grants now, and whether they changed.

    Raises:
        GrantsError: a name is not a variable name, or is both allowed and
            denied; the file cannot be read (it is then left as it is) or written.
    """
    allowed, denied = list(dict.fromkeys(allow)), list(dict.fromkeys(deny))
    for var in (*allowed, *denied):
        if not is_variable_name(var):
            raise GrantsError(f"{var!r} is not an environment variable name")
    both = sorted(set(allowed) & set(denied))
    if both:
        raise GrantsError(f"{', '.join(both)}: both allowed and denied; say one")
    with _writing:  # the daemon changes grants from worker threads
        store = load(home)
        old = store.get(name, Grants())
        new = Grants(
            allow=sorted((set(old.allow) - set(denied)) | set(allowed)),
            deny=sorted((set(old.deny) - set(allowed)) | set(denied)),
        )
        if new == Grants(allow=sorted(old.allow), deny=sorted(old.deny)):
            return old, False
        if new.allow or new.deny:
            store[name] = new
        else:
            store.pop(name, None)
        _write(home, store)
    return new, True


def _write(home: Path, store: dict[str, Grants]) -> None:
    path = grants_path(home)
    data = msgspec.json.format(
        msgspec.json.encode(_Store(extensions=dict(sorted(store.items())))), indent=2
    )
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{GRANTS_FILE}.", dir=home)  # 0600
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data + b"\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise GrantsError(f"cannot write {path}: {_why(exc)}") from None


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


_writing = threading.Lock()
