"""Where to begin reading a log back: its last N lines, or those since a time.

The walk goes back from the end of the log's history (its rotated copies,
then itself: :func:`.log_read.history`) in chunks of :data:`CHUNK` bytes,
looking only at the first :data:`HEAD` bytes of each line: one by one while
lines are counted, then only at those that may begin with a stamp, found by
a regular expression (so that a walk back to the last stamp through
megabytes of an extension's own lines stays quick).
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


def locate(
    files: list[OpenFile], lines: int | None, since: float | None
) -> tuple[int, int, float | None]:
    """Where the lines to show begin: the index of the file, the offset in
    it, and the time of the line before (for the lines without a stamp).

    The last ``lines`` lines (all if None), of those whose time is ``since``
    or later (all if None); a line without a stamp has the time of the
    stamped line before it, so the walk goes back to that line. Lines are
    walked one by one only while they are counted (``lines``); then only
    the stamped ones are looked for."""
    end = (len(files) - 1, files[-1].size)
    if lines == 0:
        return (*end, None)
    if lines is None and since is None:
        return (0, 0, None)
    start, nth, walked = end, None, 0
    for index in range(len(files) - 1, -1, -1):
        file = files[index]
        if file.fd is None:
            continue
        before = file.size
        if nth is None and lines is not None:
            for offset, head in heads_backward(file.fd, file.size):
                walked += 1
                if walked == lines:
                    nth = (index, offset)
                moment = stamp_of(head.decode("utf-8", "replace"))
                if moment is not None:
                    if since is not None and moment < since:
                        return (*start, None)  # start is a stamped line, or the end
                    if nth is not None:
                        return (*nth, moment)
                    start = (index, offset)
                if nth is not None:
                    before = offset  # the rest: only the stamped lines matter
                    break
            else:
                continue  # every line of this file walked
        for offset, head in stamps_backward(file.fd, before):
            moment = stamp_of(head.decode("utf-8", "replace"))
            if moment is None:
                continue
            if since is not None and moment < since:
                return (*start, None)
            if nth is not None:
                return (*nth, moment)
            start = (index, offset)
    if since is not None:
        return (*start, None)  # lines before any stamp have no time: not since anything
    return (*(nth or (0, 0)), None)
