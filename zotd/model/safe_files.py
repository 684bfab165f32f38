"""Reading files a cloned repository may have planted, without blocking:
regular files only, stat'ed before they are opened, opened ``O_NONBLOCK``,
read up to a size cap (:func:`read_regular`). Manifests (:mod:`.manifest`)
and trust fingerprints (:mod:`.trust`) are read so."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path


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
