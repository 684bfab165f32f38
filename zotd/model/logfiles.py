"""Log files: private (0600 in a 0700 directory), size-rotated, appended to
with O_APPEND.

An extension's stderr is its log file itself (the child holds an
``O_APPEND`` descriptor), so rotation copies the file aside and then
truncates it in place (``copytruncate``): the child's next write lands at
the new end, and nothing has to reopen anything. A line written in the
instant between the copy and the truncation can be lost; that is the price
of not piping every byte through the daemon.

A full disk does not stop the truncation: when the copy cannot be made
(ENOSPC, EDQUOT, EIO, EROFS, a name taken by a directory...), the log is
truncated all the same and its content is lost, so that it never grows
without bound (:func:`rotate_if_big` says so in its :class:`Rotation`).

Every file opened here is opened with ``O_NOFOLLOW`` (a symlink planted at a
log's name is refused, not written through) and made 0600; its directory is
made 0700 (group and other access taken away) even if it existed wider.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path

import msgspec

#: Rotated copies kept: ``ext-x.log.1`` (newest) to ``ext-x.log.3``.
KEEP = 3

#: Flags of every open for writing: no symlink followed, no FIFO waited on.
_WRITE = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


class Rotation(msgspec.Struct, frozen=True):
    """What :func:`rotate_if_big` did to a log that was past its size."""

    #: Its size before it was truncated.
    size: int
    #: Why it could not be copied to ``.1`` (its content is then lost), or None.
    copy_error: OSError | None = None


def private_dir(path: Path) -> None:
    """Makes ``path`` (and its parents) a directory, 0700 if new; takes group
    and other access away from it if it existed with them."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.stat(path)
    if st.st_mode & 0o077:
        with contextlib.suppress(PermissionError):  # not ours: nothing to be done
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)


def _open_regular(path: Path, flags: int) -> int:
    """``os.open`` with :data:`_WRITE` and ``flags``, refusing what is not a
    regular file (a FIFO, a device); the descriptor is left blocking and 0600."""
    fd = os.open(path, _WRITE | flags, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file: {path}")
        os.set_blocking(fd, True)
        if stat.S_IMODE(st.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_append(path: Path) -> int:
    """An ``O_APPEND`` descriptor on ``path``, created 0600 (and made 0600),
    in a private directory (:func:`private_dir`).

    Raises:
        OSError: it cannot be opened (also when ``path`` is a symlink, a
            directory, a FIFO or a device).
    """
    private_dir(path.parent)
    return _open_regular(path, os.O_APPEND | os.O_CREAT)


def append(path: Path, text: str) -> None:
    """Appends ``text`` to ``path`` (created 0600)."""
    fd = open_append(path)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def size(path: Path) -> int:
    """The file's size in bytes (0 if it does not exist or is not a regular
    file: a directory at a log's name is not a log to rotate)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def rotate_if_big(path: Path, max_bytes: int, keep: int = KEEP) -> Rotation | None:
    """If ``path`` is over ``max_bytes``: shift ``.1``..``.N``, copy it to ``.1``
    (0600), truncate it. Returns None if it was not due.

    When the shift or the copy fails, the log is truncated anyway (a partial
    copy is removed) and the :class:`Rotation` carries the error.

    Raises:
        OSError: it could not even be truncated (a read-only file system,
            say: then it cannot grow either).
    """
    current = size(path)
    if current <= max_bytes:
        return None
    error: OSError | None = None
    try:
        _shift(path, keep)
        _copy(path, path.with_name(f"{path.name}.1"))
    except OSError as exc:
        error = exc
    fd = _open_regular(path, 0)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return Rotation(current, error)


def _shift(path: Path, keep: int) -> None:
    """``.N-1`` to ``.N``, ..., ``.1`` to ``.2`` (made 0600 if they were not)."""
    for n in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        newer = path.with_name(f"{path.name}.{n + 1}")
        try:
            st = os.lstat(older)
        except FileNotFoundError:
            continue
        os.replace(older, newer)
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != 0o600:
            os.chmod(newer, 0o600)


def _copy(source: Path, target: Path) -> None:
    """Copies ``source`` to a new ``target``, created 0600 (never through a
    symlink); a partial copy is removed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)  # what the shift left (with keep=1); a directory stays: EISDIR
    fd = _open_regular(target, os.O_CREAT | os.O_EXCL)
    try:
        with open(source, "rb") as src, open(fd, "wb", closefd=False) as dst:
            shutil.copyfileobj(src, dst)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise
    os.close(fd)


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
