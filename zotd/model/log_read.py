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
(:mod:`.log_time`), else that of a stamped line near it (see
:class:`LogReader`): an extension's own stderr is not stamped (the child
writes to its log itself), nor are the lines that continue a record of the
daemon's log.

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
from .log_seek import CHUNK, HEAD, OpenFile, Start, locate_records, locate_written, next_stamp
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

    @property
    def pending(self) -> int:
        """Bytes of the line begun and not ended (cut ones included)."""
        return len(self._partial) + self._cut

    def feed(self, data: bytes) -> list[tuple[str, int]]:
        """The lines ``data`` completes, each with its size in bytes (its
        newline included); the rest waits for more."""
        *whole, rest = data.split(b"\n")
        lines = []
        for piece in whole:
            size = self.pending + len(piece) + 1
            lines.append((self._line(piece), size))
        self._add(rest)
        return lines

    def flush(self) -> str | None:
        """The line begun and not ended, if any; it is then done."""
        return self._line(b"") if self.pending else None

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
    was not called: a log that appeared while following).

    With ``records`` (the daemon's log), a line without a stamp continues
    the record above it, and has its time; else (an extension's log, whose
    own stderr is not stamped) it has the time of the next stamped line, or
    the time the log was last written to after the last one, or while
    following, the time it was read: the earliest time known not to be
    before it.
    """

    __slots__ = ("_carried", "_lines", "_offset", "_pred", "_tail", "path", "records", "trouble")

    def __init__(self, path: Path, *, records: bool = False) -> None:
        self.path = path
        self.records = records
        #: The time of the last stamp read (for ``records``).
        self._carried: float | None = None
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
            opened = [file.fd for file in files if file.fd is not None]
            mtime = os.fstat(opened[-1]).st_mtime if opened else None
            locate = locate_records if self.records else locate_written
            start = locate(files, lines, since, mtime)
        except OSError:
            for file in files:
                if file.fd is not None:
                    os.close(file.fd)
            with contextlib.suppress(OSError):
                self._offset = _size(self.path)  # from now on, only what comes
            raise
        return self._forward(files, start, mtime, follow)

    def _forward(
        self, files: list[OpenFile], start: Start, mtime: float | None, follow: bool
    ) -> Iterator[LogLine]:
        self._lines.reset()
        carried = start.carried if self.records else None
        skip = start.skip
        ahead: tuple[int, int, float | None] | None = None  # the next stamped line
        try:
            for i in range(start.index, len(files)):
                file, current = files[i], i == len(files) - 1
                at = start.offset if i == start.index else 0
                if file.fd is None:
                    continue
                tail = os.pread(file.fd, min(HEAD, at), at - min(HEAD, at)) if current else b""
                begins = at - self._lines.pending  # where the next line begins
                while data := os.pread(file.fd, CHUNK, at):
                    at += len(data)
                    if current:
                        tail = (tail + data)[-HEAD:]
                    for text, size in self._lines.feed(data):
                        here, begins = (i, begins), begins + size
                        if skip:
                            skip = False
                            continue
                        moment = stamp_of(text)
                        if moment is not None:
                            carried = moment if self.records else None
                        elif carried is not None:
                            moment = carried
                        else:
                            if ahead is None or ahead[:2] <= here:
                                ahead = next_stamp(files, i, max(0, here[1]), mtime)
                            moment = ahead[2]
                        yield LogLine(moment, file.path, text)
                if current:
                    self._offset, self._tail = at, tail
            self._carried = carried
            rest = None if follow else self._lines.flush()
            if rest is not None:
                yield LogLine(
                    _time(rest, carried if carried is not None else mtime), files[-1].path, rest
                )
        except OSError as exc:
            self.trouble = f"cannot read {self.path}: {reason(exc)}"
        finally:
            for file in files:
                if file.fd is not None:
                    os.close(file.fd)

    def poll(self, now: float) -> list[LogLine]:
        """The whole lines appended since the last read or poll; a line
        without a stamp has the time ``now`` (with ``records``: the time of
        the stamp before it, if there was one). A rotation in between loses
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
                for text, _ in self._lines.feed(data):
                    moment = stamp_of(text)
                    if moment is None:
                        moment = now if self._carried is None else self._carried
                    elif self.records:
                        self._carried = moment
                    found.append(LogLine(moment, path, text))
        finally:
            os.close(fd)
