"""Reading a log back, across its rotated copies, and following it.

A log's *history* is its rotated copies, oldest first (``ext-x.log.3`` to
``ext-x.log.1``), then the log itself: rotation copies the log to ``.1`` and
truncates it (:mod:`.logfiles`), so the history read in that order is the
log as it was written. :meth:`LogReader.read` finds where its last N lines
(or those since a time) begin by walking the history back from its end
(:mod:`.log_seek`), then reads forward from there in chunks; no file is
read whole into memory, and no line is kept past :data:`MAX_LINE` bytes.
:meth:`LogReader.poll` then gives what was appended since, through
rotations: what was written between two polls and went to ``.1`` with the
rotation is read from ``.1``, and nothing is read twice.

Each line has a time (:class:`LogLine`): the stamp it begins with
(:mod:`.log_time`), else the time of the line before it in the history (an
extension's own stderr is not stamped: the child writes to its log itself).
A line that comes while following, without a stamp, has the time it was
read. Lines before the first stamp of a history have none (None).

Plain, blocking code (no trio): ``zot ext logs`` runs it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import logfiles
from .log_seek import CHUNK, HEAD, OpenFile, locate
from .log_time import stamp_of

#: Bytes of a line kept; the rest is cut, and the line says how much went.
MAX_LINE = 1 << 20


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a log."""

    #: When it was written (seconds since the epoch), as far as is known.
    time: float | None
    #: The file it was read from (the log, or one of its rotated copies).
    path: Path
    #: The line, without its newline, decoded as UTF-8 (bad bytes replaced).
    text: str


def history(path: Path, keep: int = logfiles.KEEP) -> list[Path]:
    """The files of the log at ``path``, oldest first: those of its rotated
    copies (``.keep`` to ``.1``) that are regular files, then ``path``
    itself (listed even if it does not exist)."""
    older = [path.with_name(f"{path.name}.{n}") for n in range(keep, 0, -1)]
    return [p for p in older if _regular(p)] + [path]


def reason(exc: OSError) -> str:
    """What an OSError says, without its errno's number."""
    return exc.strerror or str(exc)


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _time(text: str, otherwise: float | None) -> float | None:
    """The time ``text`` begins with, else ``otherwise``."""
    moment = stamp_of(text)
    return otherwise if moment is None else moment


def _inode(path: Path) -> tuple[int, int] | None:
    """The identity of the file at ``path`` (None if there is none): a
    rotation makes a new ``.1``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _size(path: Path) -> int:
    """The size of the file at ``path``, 0 if there is none.

    Raises:
        OSError: it cannot be looked at.
    """
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _open(path: Path) -> int | None:
    """A descriptor to read ``path`` with, None if there is no such file.

    Raises:
        OSError: it cannot be read, or is not a regular file (a FIFO at a
            log's name is not waited on).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return fd


class _Lines:
    """Cuts bytes into lines at newlines (a CR is part of a line), keeping
    at most :data:`MAX_LINE` bytes of each."""

    __slots__ = ("_cut", "_partial")

    def __init__(self) -> None:
        self._partial = b""
        self._cut = 0

    def feed(self, data: bytes) -> list[str]:
        """The lines ``data`` completes; the rest waits for more."""
        *whole, rest = data.split(b"\n")
        lines = [self._line(piece) for piece in whole]
        self._add(rest)
        return lines

    def flush(self) -> str | None:
        """The line begun and not ended, if any; it is then done."""
        return self._line(b"") if self._partial or self._cut else None

    def reset(self) -> None:
        """Forgets the line begun."""
        self._partial, self._cut = b"", 0

    def _add(self, piece: bytes) -> None:
        room = max(0, MAX_LINE - len(self._partial))
        if len(piece) > room:
            self._cut += len(piece) - room
            piece = piece[:room]
        if piece:
            self._partial += piece

    def _line(self, piece: bytes) -> str:
        self._add(piece)
        text = self._partial.decode("utf-8", "replace")
        if self._cut:
            text += f"... [{self._cut} more bytes]"
        self.reset()
        return text


class LogReader:
    """Reads one log: first what :meth:`read` selects, then, with
    :meth:`poll`, what was appended since (or everything, if :meth:`read`
    was not called: a log that appeared while following)."""

    __slots__ = ("_lines", "_offset", "_pred", "_tail", "path", "trouble")

    def __init__(self, path: Path) -> None:
        self.path = path
        #: What went wrong reading it last (a rotated copy that cannot be
        #: read, say), for the caller to tell and clear; else None.
        self.trouble: str | None = None
        #: Where in the log the next poll reads from, and the bytes before it.
        self._offset = 0
        self._tail = b""
        #: The line begun and not ended yet.
        self._lines = _Lines()
        #: The identity of the ``.1`` the last rotation seen made.
        self._pred = _inode(self._rotated)

    @property
    def _rotated(self) -> Path:
        return self.path.with_name(f"{self.path.name}.1")

    def read(
        self, lines: int | None, since: float | None, *, follow: bool = False
    ) -> Iterator[LogLine]:
        """The last ``lines`` lines (all if None) of those since ``since``
        (all if None), oldest first, from the rotated copies on; the log is
        opened at once, the lines are read as they are taken. With
        ``follow``, a last line not ended yet is kept for :meth:`poll`.

        Raises:
            OSError: the log cannot be read (a rotated copy that cannot be
                read is skipped, and told in :attr:`trouble`).
        """
        self._pred = _inode(self._rotated)
        files: list[OpenFile] = []
        try:
            for path in history(self.path):
                try:
                    fd = _open(path)
                except OSError as exc:
                    if path == self.path:
                        raise
                    self.trouble = f"cannot read {path}: {reason(exc)}"
                    continue
                files.append(OpenFile(path, fd, os.fstat(fd).st_size if fd is not None else 0))
            index, offset, carried = locate(files, lines, since)
        except OSError:
            for file in files:
                if file.fd is not None:
                    os.close(file.fd)
            with contextlib.suppress(OSError):
                self._offset = _size(self.path)  # from now on, only what comes
            raise
        return self._forward(files, index, offset, carried, follow)

    def _forward(
        self, files: list[OpenFile], index: int, offset: int, carried: float | None, follow: bool
    ) -> Iterator[LogLine]:
        self._lines.reset()
        try:
            for i in range(index, len(files)):
                file, current = files[i], i == len(files) - 1
                at = offset if i == index else 0
                if file.fd is None:
                    continue
                tail = os.pread(file.fd, min(HEAD, at), at - min(HEAD, at)) if current else b""
                while data := os.pread(file.fd, CHUNK, at):
                    at += len(data)
                    if current:
                        tail = (tail + data)[-HEAD:]
                    for text in self._lines.feed(data):
                        carried = _time(text, carried)
                        yield LogLine(carried, file.path, text)
                if current:
                    self._offset, self._tail = at, tail
            rest = None if follow else self._lines.flush()
            if rest is not None:
                yield LogLine(_time(rest, carried), files[-1].path, rest)
        except OSError as exc:
            self.trouble = f"cannot read {self.path}: {reason(exc)}"
        finally:
            for file in files:
                if file.fd is not None:
                    os.close(file.fd)

    def poll(self, now: float) -> list[LogLine]:
        """The whole lines appended since the last read or poll; a line
        without a stamp has the time ``now``. A rotation in between loses
        nothing that its copy kept (the rest of the old log is read from
        ``.1``) and repeats nothing; a log truncated or replaced otherwise
        is read again from its start. Never raises :exc:`OSError` (it is
        told in :attr:`trouble`)."""
        found: list[LogLine] = []
        try:
            size = _size(self.path)
            pred = _inode(self._rotated)
            if size < self._offset or (pred != self._pred and not self._continues(self.path)):
                if pred is not None and pred != self._pred and self._continues(self._rotated):
                    self._take(self._rotated, None, now, found)
                else:
                    self._lines.reset()  # a line the old log ended in the middle of is lost
                self._pred, self._offset, self._tail = pred, 0, b""
            if size > self._offset:
                self._take(self.path, size, now, found)
        except OSError as exc:
            self.trouble = f"cannot read {self.path}: {reason(exc)}"
        return found

    def _continues(self, path: Path) -> bool:
        """Whether the file at ``path`` holds what was read before the
        offset (the log itself, not truncated; or its copy ``.1``)."""
        if not self._offset:
            return True
        try:
            fd = _open(path)
        except OSError:
            return False
        if fd is None:
            return False
        try:
            start = self._offset - len(self._tail)
            return os.pread(fd, len(self._tail), start) == self._tail
        finally:
            os.close(fd)

    def _take(self, path: Path, end: int | None, now: float, found: list[LogLine]) -> None:
        """Appends to ``found`` the lines of ``path`` from the offset to
        ``end`` (its end if None), and moves the offset there."""
        fd = _open(path)
        if fd is None:
            return
        try:
            while end is None or self._offset < end:
                want = CHUNK if end is None else min(CHUNK, end - self._offset)
                data = os.pread(fd, want, self._offset)
                if not data:
                    break
                self._offset += len(data)
                self._tail = (self._tail + data)[-HEAD:]
                for text in self._lines.feed(data):
                    found.append(LogLine(_time(text, now), path, text))
        finally:
            os.close(fd)
