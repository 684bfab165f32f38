"""``zotd``: run the daemon (foreground, or ``start`` in the background), stop it, show it.

A plain ``zotd`` (the daemon, with its own options) is read without cyclopts
(:func:`~.argv.plain_daemon`) and imports only what serving needs: cyclopts,
the client library and anyio load for the other commands, ``--help`` and
anything unusual, when the app is built (:func:`build_app`, or ``app``).
"""

from __future__ import annotations

import functools
import gc
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

from .. import __version__
from .argv import Place, Plain, die, plain_daemon, settings, zotd_argv

if TYPE_CHECKING:
    import subprocess

    from cyclopts import App, Parameter

    from ..model.config import Config
    from ..model.paths import Paths
    from ..runtime.daemon import Daemon
    from .common import Where

    Ext = Annotated[list[Path] | None, Parameter(name=["--ext", "-e"], negative=())]

    #: The CLI (built on first use: :func:`build_app`).
    app: App

#: How long ``zotd start`` waits for the socket to answer.
START_TIMEOUT = 15.0


def _check_ext(ext: list[Path] | None) -> list[Path]:
    dirs = [p.absolute() for p in ext or []]
    for d in dirs:
        if not d.is_dir():
            die(f"zotd: --ext {d}: not a directory", code=2)
    return dirs


def _check_watch(watch: bool, dirs: list[Path]) -> None:
    if watch and not dirs:
        die("zotd: --watch watches the --ext directories: name one with --ext DIR", code=2)


def _say(text: str) -> None:
    """A line of ``--watch`` for the terminal the daemon runs on (escaped:
    names and errors come from the extension)."""
    from .output import printable

    print(printable(text), file=sys.stderr, flush=True)


def serve(
    *,
    ext: Ext = None,
    watch: bool = False,
    log_level: str | None = None,
    where: Where | None = None,
) -> int:
    """Run the daemon in the foreground until SIGTERM or Ctrl+C.

    Args:
        ext: An extension directory to load for this run only; repeat the
            option for several (-e a -e b). It wins over an installed
            extension of the same name.
        watch: Restart an --ext extension when a file in its directory
            changes (the others keep running), and say so here.
        log_level: debug, info, warning or error [default: from the config, else info].
    """
    return _foreground(ext, watch, log_level, where)


def _foreground(
    ext: list[Path] | None, watch: bool, log_level: str | None, where: Place | None
) -> int:
    gc.disable()  # until the daemon is built (see _tune_gc)
    try:
        paths, config = settings(where, "zotd")
        dirs = _check_ext(ext)
        _check_watch(watch, dirs)
        level = (log_level or config.log_level).upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            die(f"zotd: --log-level must be debug, info, warning or error, not {log_level!r}", 2)
        import logging

        from ..model import service
        from ..runtime import watchdog

        logging.basicConfig(
            level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
        )
        passed = service.listen_fds()  # socket activation: before anything is spawned
        try:  # then the watchdog: its start overlaps the imports below
            launched = watchdog.launch()
        except OSError:
            launched = None  # (the daemon tries again, and says why)
        import trio  # (what serving needs, and no more: see the module's docstring)

        from ..runtime.listener import AlreadyRunning, SocketError

        daemon = _daemon(paths, config, dirs, passed, watch, launched)
    except BaseException:
        gc.enable()
        raise
    _tune_gc()
    try:
        trio.run(functools.partial(daemon.run, handle_signals=True))
    except AlreadyRunning as exc:
        die(f"zotd: {exc}")
    except SocketError as exc:
        die(f"zotd: {exc}")
    return 0


def _daemon(
    paths: Paths,
    config: Config,
    dirs: list[Path],
    passed: list[int],
    watch: bool,
    launched: tuple[str, subprocess.Popen[bytes]] | None,
) -> Daemon:
    """The daemon, on the first socket ``passed`` if any, with its watchdog if
    it was ``launched``."""
    import logging

    from ..runtime.daemon import Daemon
    from ..runtime.process import Watchdog

    if len(passed) > 1:
        logging.getLogger("zotd").warning(
            "%d sockets passed; serving the first (fd %d)", len(passed), passed[0]
        )
    daemon = Daemon(
        config,
        paths,
        explicit=dirs,
        listen_fd=passed[0] if passed else None,
        watchdog=Watchdog(launched) if launched is not None else None,
    )
    if watch:
        from ..runtime import dev

        daemon.hub.services.append(
            functools.partial(dev.watch_explicit, dirs=daemon.hub.ctx.explicit, say=_say)
        )
    return daemon


#: Allocations between two young-generation collections in the daemon
#: (Python's default is 700).
GC_THRESHOLD = 10_000


def _tune_gc() -> None:
    """Tunes the garbage collector for a long-running daemon, and turns it on.

    What startup allocates (modules, the config) lives until exit: the
    collector is off until here (collecting found next to nothing, for a
    sixth of the imports' time), and ``freeze`` keeps it from walking that
    again. At Python's default threshold the young generation was collected
    every twenty-odd tool calls, a third of the daemon's time per call under
    load (see docs/performance.md)."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 10, 10)
    gc.enable()


def _run_plain(plain: Plain) -> NoReturn:
    """The daemon of a plain ``zotd``, exiting as the app and ``entry`` would:
    with its code, 130 on Ctrl+C, quietly on a closed pipe."""
    try:
        code = _foreground(plain.ext, plain.watch, plain.log_level, plain)
    except KeyboardInterrupt:
        sys.exit(130)
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        from .output import quiet_on_broken_pipe  # (its tables cost a start a few ms: only now)

        quiet_on_broken_pipe(functools.partial(_reraise, exc))()
        raise
    sys.exit(code)


def _reraise(exc: BaseException) -> None:
    raise exc


def start(
    *,
    ext: Ext = None,
    watch: bool = False,
    log_level: str | None = None,
    where: Where | None = None,
) -> int:
    """Start the daemon in the background; return once it answers.

    Its output goes to $ZOT_HOME/logs/zotd.log.

    Args:
        ext: An extension directory to load for this run only; repeat the
            option for several (-e a -e b).
        watch: Restart an --ext extension when a file in its directory
            changes (said in the log).
        log_level: debug, info, warning or error.
    """
    from ..client import autostart
    from ..model.logfiles import size_of, tail
    from .common import status_or_die

    paths, config = settings(where, "zotd")
    dirs = _check_ext(ext)
    _check_watch(watch, dirs)
    running = status_or_die(paths, config)
    if running is not None:
        print(f"zotd is already running: pid {running.pid}, socket {paths.socket}")
        if dirs:
            print("zotd: --ext applies to a new daemon only; `zotd stop` first", file=sys.stderr)
        return 0
    extra = ["--config", str(where.config)] if where and where.config else []
    for d in dirs:
        extra += ["--ext", str(d)]
    if watch:
        extra.append("--watch")
    if log_level:
        extra += ["--log-level", log_level]
    begins = size_of(paths.daemon_log)  # the log is shared: show only this daemon's lines
    proc = autostart.spawn(paths.socket, paths.daemon_log, extra)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            lines = "\n".join("  " + line for line in tail(paths.daemon_log, 5, since=begins))
            die(f"zotd: the daemon exited with code {proc.returncode}:\n{lines}")
        found = status_or_die(paths, config)
        if found is not None:
            print(f"zotd started: pid {found.pid}, socket {paths.socket}, log {paths.daemon_log}")
            return 0
        time.sleep(0.05)
    die(
        f"zotd: started pid {proc.pid} but it did not answer within {START_TIMEOUT:g} s; "
        f"see {paths.daemon_log}"
    )
    return 1


def stop(*, where: Where | None = None) -> int:
    """Stop the daemon gracefully (its extensions get their shutdown)."""
    import anyio

    from ..client import NotRunning, ZotdError
    from .common import gone, operator, run_async, still_answers

    paths, config = settings(where, "zotd")

    async def go() -> int:
        try:
            async with operator(paths, config) as zot:
                pid = (await zot.status()).pid
                await zot.shutdown()
        except NotRunning:
            print("zotd is not running")
            return 0
        except ZotdError as exc:
            return die(f"zotd: {exc.message}")
        with anyio.move_on_after(10):
            # Polling is the point: nothing else tells us the socket is gone.
            while await still_answers(paths, config, pid):  # noqa: ASYNC110
                await anyio.sleep(0.05)
            # Then its extensions' shutdown: "stopped" means its process is gone.
            with anyio.move_on_after(config.stop_bound + 1.0):
                while not gone(pid):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            print(f"zotd stopped (pid {pid})")
            return 0
        return die(f"zotd: pid {pid} is still answering after 10 s")

    return run_async(go)


def status(*, json: bool = False, where: Where | None = None) -> int:
    """Show whether the daemon runs, its workspaces and their extension processes.

    Exits 1 if it does not run.

    Args:
        json: Print the status as JSON: {"running": true, "pid", ...} or
            {"running": false, "socket"}.
    """
    import msgspec

    from .common import print_json, status_or_die
    from .output import duration, printable

    paths, config = settings(where, "zotd")
    st = status_or_die(paths, config)
    if st is None:
        if json:
            print_json({"running": False, "socket": str(paths.socket)})
        else:
            print(f"zotd is not running (socket {paths.socket})")
        return 1
    if json:
        print_json({"running": True, **msgspec.structs.asdict(st)})
        return 0
    print(
        f"zotd {st.zotd_version} running: pid {st.pid}, socket {st.socket}, "
        f"up {duration(st.uptime_s)}; {st.processes} extension process(es)"
    )
    if not st.workspaces:
        print("no workspaces (none until an agent says hello)")
    for ws in st.workspaces:
        print(
            f"  {printable(ws.path)}: {ws.ready}/{ws.extensions} extensions ready, "
            f"{ws.processes} process(es), {ws.clients} client(s)"
        )
    for shared in st.shared:
        pid = f"pid {shared.pid}" if shared.pid is not None else "no process"
        print(
            f"  shared: {printable(shared.name)}, {shared.state}, {pid}, "
            f"{len(shared.workspaces)} workspace(s)"
        )
    if len(st.workspaces) > 1:
        but = ", but shared ones" if st.shared else ""
        print(f"(each workspace runs its own copy of every extension it sees{but})")
    return 0


_app: App | None = None


def build_app() -> App:
    """The ``zotd`` CLI as cyclopts reads it (built once)."""
    global _app
    if _app is not None:
        return _app
    from cyclopts import App, Parameter

    from .common import Where

    # The commands' annotations are strings (PEP 563), read as they are
    # registered: the names they use must be this module's by then.
    globals().update(
        Parameter=Parameter,
        Where=Where,
        Ext=Annotated[list[Path] | None, Parameter(name=["--ext", "-e"], negative=())],
    )
    app = App(
        name="zotd",
        # Flags are switched on, never off: no --no-json, no --no-no-start.
        default_parameter=Parameter(negative=()),
        help="The zot extension host: runs extensions and serves agents on a Unix socket.",
        version=__version__,
    )
    app.register_install_completion_command(
        help="Install shell completion for zotd (bash, zsh or fish; --shell to choose)."
    )
    app.default(serve)
    app.command(start)
    app.command(stop)
    app.command(status)
    from .service_cli import install_service

    app.command(install_service, name="install-service")
    _app = app
    return app


def __getattr__(name: str) -> Any:
    if name == "app":  # (tests call the app in process)
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``zotd`` command."""
    plain = plain_daemon(sys.argv[1:])
    if plain is not None:
        _run_plain(plain)
    gc.enable()  # (python -m zotd turns it off: see _tune_gc)
    from .common import entry

    entry(build_app(), "zotd", zotd_argv)
