"""Where to begin reading a log back (its last N lines, or those since a
time), and where its next stamp is.

The walk goes back from the end of the log's history (its rotated copies,
then itself: :func:`.log_read.history`) in chunks of :data:`CHUNK` bytes,
looking only at the first :data:`HEAD` bytes of each line: one by one while
lines are counted, else only at those that may begin with a stamp, found by
a regular expression (so that a walk through megabytes of an extension's
own lines stays quick). :func:`next_stamp` looks ahead the same way.

A line without a stamp has the time of a stamped line near it: in an
extension's log, the next one (:func:`locate_written`); in the daemon's,
the one before (:func:`locate_records`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .log_time import STAMP_START, stamp_of

#: Bytes read at a time, backwards or forwards.
CHUNK = 65536
#: Bytes of the start of a line looked at for its stamp (and of the end of
#: what was read, to know a log was truncated under a follower).
HEAD = 64


def heads_backward(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, first :data:`HEAD` bytes) of each line of the file's first
    ``size`` bytes, the last line first; a last line without its newline
    counts. Reads :data:`CHUNK` bytes at a time; stops early if the file
    shrinks meanwhile (a rotation)."""
    if size <= 0:
        return
    end = size - 1 if os.pread(fd, 1, size - 1) == b"\n" else size
    # buf holds the file from base on: CHUNK bytes, and HEAD more (enough
    # for the head of a line that begins in it).
    base, buf, limit = size, b"", end
    while True:
        found = buf.rfind(b"\n", 0, limit - base)
        if found >= 0:
            yield base + found + 1, buf[found + 1 : min(found + 1 + HEAD, end - base)]
            end = limit = base + found
            continue
        if base == 0:
            yield 0, buf[: min(HEAD, end)]
            return
        low = max(0, base - CHUNK)
        chunk = os.pread(fd, base - low, low)
        if len(chunk) < base - low:
            return
        buf = chunk + buf[:HEAD]
        limit = min(base, end)
        base = low


def stamps_backward(fd: int, before: int) -> Iterator[tuple[int, bytes]]:
    """(offset, first :data:`HEAD` bytes) of the lines that begin before
    offset ``before`` and may begin with a stamp (:data:`.log_time.STAMP_START`:
    :func:`.log_time.stamp_of` decides), the last first. Unlike
    :func:`heads_backward`, it skips the other lines in C: a walk back to
    the last stamp through megabytes of an extension's own lines is quick."""
    high = before - 1  # a line begins after a newline at an offset below high
    while high > 0:
        low = max(0, high - CHUNK)
        data = os.pread(fd, high - low + HEAD, low)
        hits = [hit.start() for hit in STAMP_START.finditer(data) if hit.start() < high - low]
        for found in reversed(hits):
            yield low + found + 1, data[found + 1 : found + 1 + HEAD].split(b"\n", 1)[0]
        high = low
    if before > 0:
        yield 0, os.pread(fd, HEAD, 0).split(b"\n", 1)[0]


@dataclass(slots=True)
class OpenFile:
    """One file of a log's history, open (``fd`` None: it does not exist),
    and its size when it was opened."""

    path: Path
    fd: int | None
    size: int


@dataclass(frozen=True, slots=True)
class Start:
    """Where the lines to show begin."""

    #: The file (its index in the history) and the offset of a line in it.
    index: int
    offset: int
    #: Whether that line itself is not one of them (it is the stamped line
    #: the walk stopped at).
    skip: bool = False
    #: The time of the last stamp before it, for the lines up to the next
    #: stamp (in a log whose lines continue the record above them), if known.
    carried: float | None = None


def _stamp(head: bytes) -> float | None:
    return stamp_of(head.decode("utf-8", "replace"))


def locate_written(
    files: list[OpenFile], lines: int | None, since: float | None, mtime: float | None
) -> Start:
    """Where the last ``lines`` lines (all if None) of those whose time is
    ``since`` or later (all if None) begin, in a log whose lines without a
    stamp have the time of the next stamped line (an extension's log: its
    own stderr is not stamped, and was written before the note that comes
    next), or ``mtime`` (when the log was last written to) after the last.

    Walks line by line while lines are counted; for ``since`` alone, only
    the stamped lines are looked at."""
    end = Start(len(files) - 1, files[-1].size)
    if lines == 0 or (since is not None and (mtime is None or mtime < since)):
        return end  # the last lines are older than since: all are
    if lines is None:
        if since is None:
            return Start(0, 0)
        for index in range(len(files) - 1, -1, -1):
            fd = files[index].fd
            for offset, head in stamps_backward(fd, files[index].size) if fd is not None else ():
                moment = _stamp(head)
                if moment is not None and moment < since:
                    return Start(index, offset, skip=True)  # it and the lines before are older
        return Start(0, 0)
    upper, walked, start = mtime, 0, end
    for index in range(len(files) - 1, -1, -1):
        fd = files[index].fd
        for offset, head in heads_backward(fd, files[index].size) if fd is not None else ():
            stamp = _stamp(head)
            moment = upper if stamp is None else stamp
            if since is not None and moment is not None and moment < since:
                return start
            walked += 1
            start = Start(index, offset)
            if walked == lines:
                return start
            if stamp is not None:
                upper = stamp
    return start


def locate_records(
    files: list[OpenFile], lines: int | None, since: float | None, mtime: float | None
) -> Start:
    """As :func:`locate_written`, in a log whose lines without a stamp
    continue the record above them and have its time (the daemon's log: a
    traceback, a message of several lines); those before its first stamp
    have that stamp's time (or ``mtime``, if it has none).

    Walks line by line while lines are counted; then only the stamped ones
    are looked for, back to the one before the first line to show."""
    end = Start(len(files) - 1, files[-1].size)
    if lines == 0:
        return end
    if lines is None and since is None:
        return Start(0, 0)
    start: Start = end
    nth: Start | None = None
    walked = 0
    for index in range(len(files) - 1, -1, -1):
        file = files[index]
        if file.fd is None:
            continue
        before = file.size
        if nth is None and lines is not None:
            for offset, head in heads_backward(file.fd, file.size):
                walked += 1
                if walked == lines:
                    nth = Start(index, offset)
                moment = _stamp(head)
                if moment is not None:
                    if since is not None and moment < since:
                        return start  # a stamped line, or the end
                    if nth is not None:
                        return Start(nth.index, nth.offset, carried=moment)
                    start = Start(index, offset)
                if nth is not None:
                    before = offset  # the rest: only the stamped lines matter
                    break
            else:
                continue  # every line of this file walked
        for offset, head in stamps_backward(file.fd, before):
            moment = _stamp(head)
            if moment is None:
                continue
            if since is not None and moment < since:
                return start
            if nth is not None:
                return Start(nth.index, nth.offset, carried=moment)
            start = Start(index, offset)
    # No stamp before: the first lines have the time of the first stamp
    # (start, if since was given), or mtime if there is none.
    if since is not None and start == end and (mtime is None or mtime < since):
        return end
    return nth or Start(0, 0)


def next_stamp(
    files: list[OpenFile], index: int, offset: int, otherwise: float | None
) -> tuple[int, int, float | None]:
    """The first stamped line after the line at ``offset`` of file ``index``:
    its file's index, its offset and its time; ``(len(files), 0, otherwise)``
    if there is none. Reads ahead :data:`CHUNK` bytes at a time, finding
    the candidates in C (:data:`.log_time.STAMP_START`)."""
    for i in range(index, len(files)):
        fd = files[i].fd
        if fd is None:
            continue
        at = offset if i == index else 0
        if i > index and (moment := _stamp(os.pread(fd, HEAD, 0).split(b"\n", 1)[0])) is not None:
            return (i, 0, moment)
        while data := os.pread(fd, CHUNK + HEAD, at):
            for hit in STAMP_START.finditer(data):
                found = hit.start()
                if found >= CHUNK:
                    break  # the next read looks at it
                moment = _stamp(data[found + 1 : found + 1 + HEAD].split(b"\n", 1)[0])
                if moment is not None:
                    return (i, at + found + 1, moment)
            if len(data) <= CHUNK:
                break
            at += CHUNK
    return (len(files), 0, otherwise)
