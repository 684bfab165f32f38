"""``zot ext dev DIR``: run an extension from its source directory for this
workspace, restarted whenever its files change, until Ctrl+C.

It asks the daemon (``ext_dev``) to run DIR as an explicit extension of
this workspace alone, for as long as this command's connection lasts; then
prints what the daemon says about it (``ext_dev`` pushes: restarts, with
what it registered, or why it failed) and its log, read from the file as
``zot ext logs -f`` does. Ctrl+C closes the connection, which takes DIR out
of the workspace again; it waits until the daemon has done so, and says
what runs under the name now (an installed copy it hid comes back).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from .. import __version__
from ..client import Client, NotRunning, ZotdError, connect
from ..model.manifest import Scope, load
from ..model.paths import Paths
from ..protocol import agent as ap
from .common import Options, Where, die, print_json, settings, token_for, with_client
from .ext_view import describe
from .local import workspace_of
from .output import printable

#: How often the log is looked at for more.
FOLLOW_INTERVAL = 0.2
#: The most bytes of a line without its end kept before it is printed as it is.
MAX_PARTIAL = 64 * 1024
#: How long, after Ctrl+C, to wait for the daemon to take DIR out again.
STOP_WAIT = 30.0


def dev(directory: Path, /, *, opts: Options | None = None, where: Where | None = None) -> int:
    """Run the extension in DIR for this workspace, restarted when its files change.

    DIR is run as an explicit extension of this directory's workspace only
    (other workspaces do not see it), ahead of an installed one of the same
    name, which comes back when this ends. A change to a file under DIR
    (editor swap files, __pycache__, .git and node_modules aside) restarts
    it; each restart is printed with what it registered, or why it failed,
    and so are its log lines. Ctrl+C stops it and takes DIR out again.

    Args:
        directory: The extension's directory (holding extension.json).
    """
    o = opts or Options()
    path = directory.absolute()
    if not path.exists():
        die(f"zot: {directory}: no such directory", code=2)
    if not path.is_dir():
        die(f"zot: {directory}: not a directory", code=2)
    paths, config = settings(where)
    name = load(path, Scope.EXPLICIT).name  # (the daemon reads it again, and judges it)
    before = _log_size(paths, name)
    #: The extension's name as the daemon last said it (an edit may rename it).
    current: list[str] = []

    async def body(zot: Client) -> int:
        change = await zot.ext_dev(path)
        current[:] = [change.name]
        info = change.extension
        _started(change, o.json)
        log_path = Path(info.log) if info is not None and info.log else None
        offset = before if log_path is not None and log_path == _log_path(paths, name) else None
        code = 0
        async with anyio.create_task_group() as tg:
            if log_path is not None:
                tg.start_soon(_follow, log_path, offset, _log_printer(change.name, log_path, o))

            async def pushes() -> None:
                nonlocal code
                async for frame in zot.notifications():
                    if isinstance(frame, ap.ExtDevPush):
                        current[:] = [frame.extension]
                        if o.json:
                            print_json(frame)
                        else:
                            print(printable(frame.message))
                        sys.stdout.flush()
                print("zotd closed the connection", file=sys.stderr)
                code = 1
                tg.cancel_scope.cancel()

            tg.start_soon(pushes)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break
            tg.cancel_scope.cancel()
        return code

    code = with_client(o, where, body)
    if code == 0 and current:
        code = _confirm(paths, token_for(o.token, config), o, current[0], path)
    return code


def _log_path(paths: Paths, name: str) -> Path | None:
    try:
        return paths.extension_log(name)
    except ValueError:  # not a name an extension can have: the daemon will say so
        return None


def _log_size(paths: Paths, name: str) -> int | None:
    """The size of ``name``'s log now: its lines from here on are this run's."""
    log_path = _log_path(paths, name)
    return _size_of(log_path) if log_path is not None else None


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _started(change: ap.ExtChangeData, json: bool) -> None:
    if json:
        print_json(change)
        sys.stdout.flush()
        return
    info = change.extension
    state = describe(info) if info is not None else "not started here"
    print(printable(f"{change.name}: running from {change.dir} for this workspace: {state}"))
    for p in info.passed_over if info is not None else []:
        if p.why == "hidden":
            print(
                printable(
                    f"{change.name}: in place of the {p.scope} copy in {p.dir} until you stop; "
                    "that one comes back then"
                )
            )
    sys.stdout.flush()


def _log_printer(name: str, log_path: Path, o: Options) -> Callable[[str], None]:
    def emit(line: str) -> None:
        if o.json:
            print_json({"extension": name, "path": str(log_path), "line": line})
        else:
            print(printable(f"{name} | {line}"))

    return emit


def _read_more(path: Path, offset: int) -> tuple[bytes, int]:
    """What was appended to ``path`` past ``offset`` (at most 1 MiB), and
    where that ends; from the start if the file was truncated or replaced."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            if size < offset:
                offset = 0
            f.seek(offset)
            data = f.read(min(size - offset, 1 << 20))
    except FileNotFoundError:
        return b"", 0
    return data, offset + len(data)


async def _follow(path: Path, offset: int | None, emit: Callable[[str], None]) -> None:
    """Emits each line appended to ``path`` past ``offset`` (its size now if
    ``None``) until cancelled."""
    at = offset if offset is not None else await anyio.to_thread.run_sync(_size_of, path)
    partial = b""
    while True:
        data, at = await anyio.to_thread.run_sync(_read_more, path, at)
        if data:
            *whole, partial = (partial + data).split(b"\n")
            if len(partial) > MAX_PARTIAL:
                whole.append(partial)
                partial = b""
            for line in whole:
                emit(line.decode("utf-8", "replace"))
            sys.stdout.flush()
        await anyio.sleep(FOLLOW_INTERVAL)


def _confirm(paths: Paths, token: str | None, o: Options, name: str, directory: Path) -> int:
    """Waits until the daemon has taken ``directory`` out of the workspace,
    and says what runs under ``name`` now; 1 if it does not within
    :data:`STOP_WAIT`."""

    async def go() -> str | None:
        with anyio.move_on_after(STOP_WAIT):
            async with connect(
                paths.socket,
                cwd=workspace_of(o),
                client=f"zot/{__version__}",
                token=token,
                start=False,
            ) as zot:
                while True:
                    infos = {i.name: i for i in await zot.list_extensions()}
                    info = infos.get(name)
                    if info is None:
                        return f"{name}: stopped; nothing else runs under that name here"
                    if info.dir != str(directory):
                        return f"{name}: stopped; the {info.scope} copy in {info.dir} is back"
                    await anyio.sleep(0.05)
        return None

    try:
        line = anyio.run(go, backend="trio")
    except NotRunning:
        line = f"{name}: stopped (zotd is no longer running)"
    except ZotdError as exc:
        line = f"{name}: stopped; zotd: {exc.message}"
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if line is None:
        late = f"zot: zotd still runs {name} from {directory} after {STOP_WAIT:g} s"
        print(printable(late), file=sys.stderr)
        return 1
    if not o.json:
        print(printable(line))
    return 0
