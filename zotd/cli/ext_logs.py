"""``zot ext logs NAME|--all [-f] [-n N] [--since T] [--json]``: read or
follow an extension's log, or every log at once.

It reads the files itself (:mod:`zotd.model.log_read`), so it works whether
or not zotd runs; ``-n`` and ``--since`` reach back into the rotated copies.
With ``--all``, the daemon's log and every extension's are interleaved in
time order (:mod:`zotd.model.log_merge`), each line with its time and whose
log it is in. With ``--json`` each line is one JSON object; the lines are the
file's, decoded as UTF-8 (bytes that are not are replaced). As text, control
characters in them show as escapes (:func:`.output.printable`: an
extension's stderr cannot drive the terminal).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from ..model.log_merge import Tagged, interleave, log_sources, tagged
from ..model.log_read import LogLine, LogReader, history, reason
from ..model.log_time import iso_text, local_text, parse_since, without_stamp
from ..model.paths import Paths
from .common import Options, Where, die, print_json, settings
from .local import find_local
from .output import printable

#: How often ``-f`` looks for more.
FOLLOW_INTERVAL = 0.2

#: Lines printed first when neither ``-n`` nor ``--since`` says.
DEFAULT_LINES = 100

#: The tag of the daemon's own log's lines in ``--all``'s text.
DAEMON_TAG = "zotd"

#: How wide the time column of ``--all`` is (``2026-11-30 11:00:22.123``).
TIME_WIDTH = 23


def logs(
    name: str | None = None,
    /,
    *,
    every: Annotated[bool, Parameter(name=["--all"], negative=())] = False,
    follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative=())] = False,
    lines: Annotated[int | None, Parameter(name=["--lines", "-n"])] = None,
    since: str | None = None,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Print an extension's log (its stderr, and zotd's notes about it), or
    with --all every extension's and the daemon's, interleaved in time order.

    Reads the files directly, so it works whether or not zotd runs. With
    --json, one JSON object per line: {"extension", "path", "line"}, and
    with --all {"extension", "path", "time", "line"}.

    Args:
        name: The extension's name.
        every: Every log at once: the daemon's and each extension's, each
            line with its time and its extension's name (or zotd).
        follow: Keep printing what is appended, until Ctrl+C.
        lines: How many lines from the end to print first [default: 100, or
            all of those --since gives].
        since: Only the lines from this time on: an ISO 8601 time
            (2026-11-30T11:00, local unless it says its offset) or an age
            (30s, 10m, 2h, 1d).
    """
    o = opts or Options()
    if name is not None and every:
        die("zot: give an extension's NAME or --all, not both", code=2)
    if name is None and not every:
        die("zot: give an extension's NAME, or --all for every log", code=2)
    if lines is not None and lines < 0:
        die("zot: --lines must be 0 or more", code=2)
    start: float | None = None
    if since is not None:
        try:
            start = parse_since(since, time.time())
        except ValueError as exc:
            die(f"zot: {exc}", code=2)
    elif lines is None:
        lines = DEFAULT_LINES
    paths, _ = settings(where)
    try:
        if name is None:
            return _every_log(o, paths, lines, start, follow)
        return _one_log(o, where, paths, name, lines, start, follow)
    except KeyboardInterrupt:
        return 0


def _one_log(
    o: Options,
    where: Where | None,
    paths: Paths,
    name: str,
    lines: int | None,
    since: float | None,
    follow: bool,
) -> int:
    """``zot ext logs NAME``."""
    try:
        path = paths.extension_log(name)
    except ValueError:
        find_local(o, where, name)  # not a name an extension can have: says which there are
        raise
    if not path.exists() and len(history(path)) == 1:
        find_local(o, where, name)  # an unknown name: says which there are
        if not follow:
            print(printable(f"no log yet for {name} ({path})"), file=sys.stderr)
            return 0

    def emit(line: LogLine) -> None:
        if o.json:
            print_json({"extension": name, "path": str(line.path), "line": line.text})
        else:
            print(printable(line.text, multiline=True))

    reader = LogReader(path)
    try:
        found = reader.read(lines, since, follow=follow)
    except OSError as exc:
        die(f"zot: cannot read {path}: {reason(exc)}")
    for line in found:
        emit(line)
    _tell(reader)
    sys.stdout.flush()
    while follow:
        time.sleep(FOLLOW_INTERVAL)
        new = reader.poll(time.time())
        for line in new:
            emit(line)
        _tell(reader)
        if new:
            sys.stdout.flush()
    return 0


def _every_log(
    o: Options, paths: Paths, lines: int | None, since: float | None, follow: bool
) -> int:
    """``zot ext logs --all``."""
    readers: dict[Path, tuple[str | None, LogReader]] = {}
    sources = _sources(paths)
    if not sources and not follow:
        print(printable(f"no logs yet in {paths.logs_dir}"), file=sys.stderr)
        return 0
    shown = _Shown(o.json)
    streams: list[Iterator[Tagged]] = []
    for extension, path in sources:
        reader = LogReader(path, records=extension is None)
        readers[path] = (extension, reader)
        try:
            streams.append(tagged(extension, reader.read(lines, since, follow=follow)))
        except OSError as exc:
            print(printable(f"zot: cannot read {path}: {reason(exc)}"), file=sys.stderr)
    shown.widen(readers.values())
    merged: Iterable[Tagged] = interleave(streams)
    if lines is not None:
        merged = deque(merged, maxlen=lines)  # the last N of all: at most N from each
    for line in merged:
        shown.emit(line)
    for _, reader in readers.values():
        _tell(reader)
    sys.stdout.flush()
    while follow:
        time.sleep(FOLLOW_INTERVAL)
        for extension, path in _sources(paths):
            if path not in readers:  # a log that appeared meanwhile: all of it is new
                readers[path] = (extension, LogReader(path, records=extension is None))
        shown.widen(readers.values())
        now = time.time()
        batches = [tagged(ext, reader.poll(now)) for ext, reader in readers.values()]
        printed = False
        for line in interleave(batches):
            shown.emit(line)
            printed = True
        for _, reader in readers.values():
            _tell(reader)
        if printed:
            sys.stdout.flush()
    return 0


def _sources(paths: Paths) -> list[tuple[str | None, Path]]:
    """:func:`log_sources`, exiting with a message if the directory cannot be listed."""
    try:
        return log_sources(paths)
    except OSError as exc:
        die(f"zot: cannot list {paths.logs_dir}: {reason(exc)}")


def _tell(reader: LogReader) -> None:
    """Says on stderr what went wrong reading ``reader``'s log, once."""
    if reader.trouble is not None:
        print(printable(f"zot: {reader.trouble}"), file=sys.stderr)
        reader.trouble = None


class _Shown:
    """How ``--all`` prints a line: as text, its time, the extension's name
    (or ``zotd``) padded to the longest, and the line without the stamp it
    began with; or as one JSON object."""

    __slots__ = ("json", "width")

    def __init__(self, json: bool) -> None:
        self.json = json
        self.width = len(DAEMON_TAG)

    def widen(self, readers: Iterable[tuple[str | None, LogReader]]) -> None:
        for extension, _ in readers:
            self.width = max(self.width, len(_tag(extension)))

    def emit(self, item: Tagged) -> None:
        line = item.line
        if self.json:
            moment = None if line.time is None else iso_text(line.time)
            print_json(
                {
                    "extension": item.extension,
                    "path": str(line.path),
                    "time": moment,
                    "line": line.text,
                }
            )
            return
        moment = "-" if line.time is None else local_text(line.time)
        tag = printable(_tag(item.extension)).ljust(self.width)
        text = printable(without_stamp(line.text), multiline=True)
        print(f"{moment.ljust(TIME_WIDTH)} {tag}  {text}")


def _tag(extension: str | None) -> str:
    return DAEMON_TAG if extension is None else extension
