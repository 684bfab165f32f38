"""What the CLIs share: finding the socket and config, calling the daemon (and
zotd's operator connection), printing."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from cyclopts import App, Parameter

from .. import __version__
from ..client import Client, NotRunning, ZotdError, connect
from ..model.config import Config
from ..model.paths import Paths
from ..protocol import agent as ap

# (where they live, without cyclopts: the daemon reads its command line with them)
from .argv import Misplaced
from .argv import die as die
from .argv import resolve as resolve
from .argv import settings as settings
from .output import json_printable, quiet_on_broken_pipe

T = TypeVar("T")


@Parameter(name="*")
@dataclass
class Where:
    """Options that say which daemon to talk to."""

    socket: Path | None = None
    """The daemon's socket [default: $ZOTD_SOCKET, else socket in zotd.toml (relative to its directory), else zotd.sock in the user runtime dir]."""

    config: Path | None = None
    """The config file [default: $ZOTD_CONFIG, else zotd.toml in the user config dir]."""


def token_for(explicit: str | None, config: Config) -> str | None:
    """The token to send: ``--token``, else ``$ZOTD_TOKEN``, else ``token`` in zotd.toml."""
    return explicit or os.environ.get("ZOTD_TOKEN") or config.token


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """Runs a coroutine function under trio (through anyio); Ctrl+C exits 130
    (also when it lands in a nursery, which wraps it in an exception group)."""
    try:
        return anyio.run(fn, backend="trio")
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BaseExceptionGroup as group:
        interrupted, rest = group.split(KeyboardInterrupt)
        if interrupted is not None and rest is None:
            raise SystemExit(130) from None
        raise


def print_json(value: Any) -> None:
    """Prints a value (Structs included) as one line of JSON (C1 and bidi
    controls in strings as ``\\u`` escapes: :func:`.output.json_printable`)."""
    print(json_printable(msgspec.json.encode(value).decode()))


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    """Left-aligned columns separated by two spaces (the last one not padded)."""
    all_rows = [list(header)] + [list(r) for r in rows] if header else [list(r) for r in rows]
    if not all_rows:
        return ""
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]) - 1)]
    lines = []
    for r in all_rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


@Parameter(name="*")
@dataclass
class Options:
    """Options every zot command takes."""

    json: bool = False
    """Print JSON instead of text."""

    cwd: Path | None = None
    """The project directory (workspace) [default: the current directory]."""

    token: str | None = None
    """The daemon's token, if it has one [default: $ZOTD_TOKEN, else token in zotd.toml]."""

    no_start: bool = False
    """Do not start the daemon if none is running [default: start it, unless $ZOTD_NO_AUTOSTART=1]."""


def with_client(
    opts: Options,
    where: Where | None,
    body: Callable[[Client], Awaitable[int]],
    offline: Callable[[], int] | None = None,
) -> int:
    """Connects to the workspace of ``--cwd`` and runs ``body``; its result is the exit code.

    With ``offline``, a daemon that is not running is not an error: ``offline()``
    runs instead. Any other failure prints ``zot: <message>`` and exits 1.
    """
    paths, config = settings(where)

    async def go() -> int | None:
        try:
            async with connect(
                paths.socket,
                cwd=opts.cwd or Path(os.getcwd()),
                client=f"zot/{__version__}",
                token=token_for(opts.token, config),
                start=False if opts.no_start else None,
            ) as zot:
                return await body(zot)
        except NotRunning:
            if offline is None:
                raise
            return None
        except ZotdError as exc:
            hint = " (pass --token or set ZOTD_TOKEN)" if exc.code == "unauthorized" else ""
            die(f"zot: {exc.message}{hint}")

    try:
        code = run_async(go)
    except NotRunning as exc:
        die(f"zot: {exc.message}")
    return offline() if code is None and offline is not None else (code or 0)


def entry(app: App, prog: str, rewrite: Callable[[Sequence[str]], list[str]]) -> None:
    """Runs a CLI: its command line as :mod:`.argv` reads it, a quiet exit on
    a closed stdout, and a word on stderr when a daemon is started for it."""

    def go() -> None:
        try:
            argv = rewrite(sys.argv[1:])
        except Misplaced as exc:
            die(str(exc), code=2)
        announce = logging.StreamHandler(sys.stderr)
        announce.setFormatter(logging.Formatter(f"{prog}: %(message)s"))
        started = logging.getLogger("zotd.client.autostart")
        started.addHandler(announce)
        started.setLevel(logging.INFO)
        started.propagate = False
        app(argv)

    quiet_on_broken_pipe(go)()


# --- zotd's operator connection -------------------------------------------------------


@asynccontextmanager
async def operator(paths: Paths, config: Config) -> AsyncIterator[Client]:
    """An operator connection: authenticated, joined to no workspace."""
    async with connect(
        paths.socket, attach=False, client="zotd-cli", token=token_for(None, config), start=False
    ) as zot:
        yield zot


async def daemon_status(paths: Paths, config: Config) -> ap.StatusData | None:
    """The running daemon's status, or ``None`` if none answers.

    Raises:
        ZotdError: one answers, but not with a status (unauthorized, stopping, ...).
    """
    try:
        async with operator(paths, config) as zot:
            return await zot.status()
    except NotRunning:
        return None


def status_or_die(paths: Paths, config: Config) -> ap.StatusData | None:
    """:func:`daemon_status`, exiting with its message if one answers otherwise."""
    try:
        return run_async(functools.partial(daemon_status, paths, config))
    except ZotdError as exc:
        hint = " (set ZOTD_TOKEN, or token in zotd.toml)" if exc.code == "unauthorized" else ""
        return die(f"zotd: {exc.message}{hint}")


async def still_answers(paths: Paths, config: Config, pid: int) -> bool:
    """Whether daemon ``pid`` still answers (under socket activation, our
    connection may start a new one: that one does not count)."""
    try:
        st = await daemon_status(paths, config)
    except ZotdError:
        return True  # it answers, if only to say it is shutting down
    return st is not None and st.pid == pid


def gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie counts as exited)."""
    if os.path.isdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rpartition(b")")[2].split()[0] == b"Z"
        except OSError:
            return True
    try:  # no /proc (macOS): ask the kernel
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
