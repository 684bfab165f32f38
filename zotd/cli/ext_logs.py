"""``zot ext logs NAME [-f] [-n N] [--json]``: read or follow an extension's log.

It reads the file itself, so it works whether or not zotd runs. With
``--json`` each line is one JSON object, ``{"extension", "path", "line"}``,
also while following; the lines are the file's, decoded as UTF-8 (bytes that
are not are replaced). As text, control characters in them show as escapes
(:func:`.output.printable`: an extension's stderr cannot drive the terminal).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from .common import Options, Where, die, print_json, settings
from .local import find_local
from .output import printable

#: How often ``-f`` looks for more.
FOLLOW_INTERVAL = 0.2


def logs(
    name: str,
    /,
    *,
    follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative=())] = False,
    lines: Annotated[int, Parameter(name=["--lines", "-n"])] = 100,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Print an extension's log (its stderr, and zotd's notes about it).

    Reads the file directly, so it works whether or not zotd runs. With
    --json, one JSON object per line: {"extension", "path", "line"}.

    Args:
        name: The extension's name.
        follow: Keep printing what is appended, until Ctrl+C.
        lines: How many lines from the end to print first.
    """
    o = opts or Options()
    if lines < 0:
        die("zot: --lines must be 0 or more", code=2)
    paths, _ = settings(where)
    try:
        path = paths.extension_log(name)
    except ValueError:
        find_local(o, where, name)  # not a name an extension can have: says which there are
        raise
    if not path.exists():
        find_local(o, where, name)  # an unknown name: says which there are
        if not follow:
            print(printable(f"no log yet for {name} ({path})"), file=sys.stderr)
            return 0

    def emit(line: str) -> None:
        if o.json:
            print_json({"extension": name, "path": str(path), "line": line})
        else:
            print(printable(line, multiline=True))

    found, offset = tail_lines(path, lines)
    for line in found:
        emit(line)
    sys.stdout.flush()
    if follow:
        try:
            _follow(path, offset, emit)
        except KeyboardInterrupt:
            pass
    return 0


def tail_lines(path: Path, lines: int) -> tuple[list[str], int]:
    """The last ``lines`` lines, and the offset they end at."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max(8192, lines * 256)))
            data = f.read(size - f.tell())
    except FileNotFoundError:
        return [], 0
    # Lines end at newlines only, as when following: a CR or U+0085 is part of
    # a line (and shows as an escape), not the end of one.
    text = data.decode("utf-8", "replace").split("\n")
    if text[-1] == "":
        text.pop()
    return (text[-lines:] if lines else []), size


def _follow(path: Path, offset: int, emit: Callable[[str], None]) -> None:
    """Emits each whole line appended to ``path`` past ``offset`` until
    interrupted (survives truncation and rotation)."""
    partial = b""
    while True:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:
            offset, partial = 0, b""  # truncated or replaced: start over
        if size > offset:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(size - offset)
            offset += len(data)
            *whole, partial = (partial + data).split(b"\n")
            for line in whole:
                emit(line.decode("utf-8", "replace"))
            sys.stdout.flush()
        time.sleep(FOLLOW_INTERVAL)
