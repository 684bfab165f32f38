"""Log files: private (0600), size-rotated, appended to with O_APPEND.

An extension's stderr is its log file itself (the child holds an
``O_APPEND`` descriptor), so rotation copies the file aside and then
truncates it in place (``copytruncate``): the child's next write lands at
the new end, and nothing has to reopen anything. A line written in the
instant between the copy and the truncation can be lost; that is the price
of not piping every byte through the daemon.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: Rotated copies kept: ``ext-x.log.1`` (newest) to ``ext-x.log.3``.
KEEP = 3


def open_append(path: Path) -> int:
    """An ``O_APPEND`` descriptor on ``path``, created 0600 (and made 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def append(path: Path, text: str) -> None:
    """Appends ``text`` to ``path`` (created 0600)."""
    fd = open_append(path)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def size(path: Path) -> int:
    """The file's size in bytes (0 if it does not exist)."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def rotate_if_big(path: Path, max_bytes: int, keep: int = KEEP) -> bool:
    """If ``path`` is over ``max_bytes``: shift ``.1``..``.N``, copy it to ``.1``,
    truncate it. Returns whether it rotated."""
    if size(path) <= max_bytes:
        return False
    for n in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{n + 1}"))
    first = path.with_name(f"{path.name}.1")
    shutil.copyfile(path, first)
    os.chmod(first, 0o600)
    with path.open("r+b") as f:
        f.truncate(0)
    return True


def tail(path: Path, lines: int, since: int = 0) -> list[str]:
    """The last ``lines`` lines of a text file (empty if it cannot be read),
    of what lies past offset ``since`` (what one writer appended, say).

    Reads only the end of the file (about 256 bytes a line, 8 KiB at least).
    """
    budget = max(8192, lines * 256)
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, since if since <= size else 0, size - budget))
            data = f.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def size_of(path: Path) -> int:
    """The size of a file, 0 if there is none: where the next writer's lines begin."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
