"""Shared fixtures: short temporary paths, extension directories, an in-process daemon."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_timeout
import trio
from hypothesis import HealthCheck, settings

from zotd.model.config import Config, RestartPolicy
from zotd.model.paths import Paths
from zotd.runtime.daemon import Daemon

# The tests send SIGINT to the CLIs they start (Ctrl+C). A suite started in
# the background by a non-interactive shell (`nohup ... &`) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec, so those CLIs
# would never see it. Handled here, it is reset to the default in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A shared 2-core machine makes timing-based checks flaky; what the property
# tests check is correctness, not speed.
settings.register_profile("zotd", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("zotd")

# --- a per-test cap (pytest-timeout, `timeout` in pyproject.toml) ----------------
#
# pytest-timeout's "signal" method raises from a SIGALRM handler wherever the
# main thread is. In a trio test that is mostly trio's own loop, which then
# never resets: every later trio test fails ("run() from inside a run()").
# Its "thread" method ends the whole run. So a trio test at its cap is
# cancelled inside its own run instead (a timer thread hands the run a
# cancel through its token), which unwinds the test and its fixtures as any
# cancellation does; the signal stays armed TRIO_CAP_GRACE s later, for a
# loop too stuck to take the cancel (the signal then lands in the code that
# holds the loop, and is unwound from there). Other tests get the signal.

TRIO_CAP_GRACE = 10.0
_TRIO_CAP = pytest.StashKey[tuple[float, float]]()  # (deadline, timeout)


@pytest.hookimpl(trylast=True)  # after pytest-trio has marked the async tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        runs = [mark.kwargs.get("run") for mark in item.iter_markers("trio")]
        if runs and all(run in (None, trio.run) for run in runs):
            # First, so that pytest-trio takes it over its trio.run.
            capped = functools.partial(_run_capped, item)
            item.add_marker(pytest.mark.trio(run=capped), append=False)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if item.get_closest_marker("trio") is None or settings.method != "signal":
        return None  # pytest-timeout's own way
    item.stash[_TRIO_CAP] = (time.monotonic() + settings.timeout, settings.timeout)
    later = settings._replace(timeout=settings.timeout + TRIO_CAP_GRACE)
    result: bool = pytest_timeout.pytest_timeout_set_timer(item, later)
    return result


def _run_capped(item: pytest.Item, afn: Callable[[], Awaitable[Any]], **kwargs: Any) -> Any:
    """``trio.run`` for pytest-trio, that cancels the test at its deadline."""
    cap = item.stash.get(_TRIO_CAP, None)
    if cap is None:  # no timeout for this test
        return trio.run(afn, **kwargs)
    deadline, timeout = cap
    expired = False
    unwound: BaseException | None = None  # what the cancel raised, where the test was

    async def capped() -> Any:
        nonlocal unwound
        token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:

            def expire() -> None:
                nonlocal expired
                expired = True
                scope.cancel()

            def soon() -> None:
                try:
                    token.run_sync_soon(expire)
                except trio.RunFinishedError:
                    pass

            timer = threading.Timer(max(0.0, deadline - time.monotonic()), soon)
            timer.daemon = True
            timer.start()
            try:
                return await afn()
            except BaseException as exc:
                if expired:
                    unwound = exc
                raise
            finally:
                timer.cancel()
        return None

    try:
        return trio.run(capped, **kwargs)
    finally:
        if expired:
            message = f"Timeout (>{timeout:g}s) from pytest-timeout: the test was cancelled"
            raise pytest.fail.Exception(message) from unwound


EXTENSIONS = Path(__file__).parent / "extensions"
FAKE = EXTENSIONS / "fake.py"
QUICKSTART = EXTENSIONS / "quickstart.py"
#: An extension written the way newer zot's SDK behaves (see its docstring).
NEWER_ZOT = EXTENSIONS / "newer_zot.py"

#: Real-clock tests use short deadlines so that waiting for one costs little.
FAST = Config(
    ready_idle=0.1,
    ready_grace=3.0,
    hello_timeout=5.0,
    shutdown_timeout=1.0,
    kill_timeout=0.5,
    intercept_timeout=1.0,
    tool_timeout=10.0,
    command_timeout=10.0,
    # Crash tests look at the crash itself; restarts have tests of their own.
    restart=RestartPolicy(policy="never"),
    # Tests of discovery and precedence use hand-made project extensions;
    # trust has tests of its own (tests/test_trust.py).
    trust_project_extensions=True,
)


@pytest.fixture(autouse=True)
def no_autostart(monkeypatch: pytest.MonkeyPatch) -> None:
    """No client in a test starts a daemon on its own (tests of that turn it on)."""
    monkeypatch.setenv("ZOTD_NO_AUTOSTART", "1")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path (Unix socket paths are limited)."""
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="zt", dir="/tmp")))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def paths(short_tmp: Path) -> Paths:
    """The daemon's paths, all under ``short_tmp``."""
    return Paths(
        home=short_tmp / "home",
        socket=short_tmp / "run" / "zotd.sock",
        config_file=short_tmp / "zotd.toml",
    )


@pytest.fixture
def project(short_tmp: Path) -> Path:
    """A project directory (a workspace root)."""
    path = short_tmp / "proj"
    path.mkdir()
    return path


def add_extension(
    root: Path,
    name: str,
    *fake_args: str,
    manifest: dict[str, Any] | None = None,
    script: Path = FAKE,
    self_contained: bool = False,
) -> Path:
    """Writes ``root/name/extension.json`` running ``tests/extensions/fake.py --name name ...``.

    ``manifest`` entries override or add manifest fields. In a project's
    ``.zot/extensions``, or if ``self_contained`` (a source to install with
    ``--project``), the script is copied into the extension's directory and
    run from there: a project-local extension may run only what is in its
    directory (see zotd.model.trust).
    """
    directory = root / name
    directory.mkdir(parents=True)
    run = str(script)
    if self_contained or (root.name == "extensions" and root.parent.name == ".zot"):
        shutil.copy(script, directory / script.name)
        run = script.name
    fields: dict[str, Any] = {
        "name": name,
        "version": "0.0.1",
        "exec": sys.executable,
        "args": [run, "--name", name, *fake_args],
    }
    fields.update(manifest or {})
    (directory / "extension.json").write_text(json.dumps(fields))
    return directory


def add_newer_zot(root: Path, name: str, frames: Path, *options: str, priority: int = 0) -> Path:
    """Writes ``root/name/extension.json`` running ``tests/extensions/newer_zot.py``,
    which appends every frame it reads to ``frames``; ``options`` are its own."""
    return add_extension(
        root,
        name,
        "--log",
        str(frames),
        *options,
        manifest={"priority": priority} if priority else None,
        script=NEWER_ZOT,
    )


def quickstart_dir(root: Path) -> Path:
    """The reference's quick start, installed as $ZOT_HOME/extensions/hello-py/."""
    directory = root / "hello-py"
    directory.mkdir(parents=True)
    shutil.copy(QUICKSTART, directory / "hello.py")
    (directory / "extension.json").write_text(
        json.dumps(
            {
                "name": "hello-py",
                "version": "1.0.0",
                "exec": "./hello.py",
                "language": "python",
                "enabled": True,
            }
        )
    )
    return directory


StartDaemon = Callable[..., Awaitable[Daemon]]


@pytest.fixture
async def start_daemon(paths: Paths, project: Path) -> AsyncIterator[StartDaemon]:
    """Starts in-process daemons (real clock, real socket); stops them gracefully after."""
    daemons: list[tuple[Daemon, trio.Event]] = []

    async with trio.open_nursery() as nursery:

        async def start(config: Config = FAST, **kwargs: Any) -> Daemon:
            daemon = Daemon(config, paths, cwd=project, **kwargs)
            done = trio.Event()

            async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                try:
                    await daemon.run(task_status=task_status)
                finally:
                    done.set()

            await nursery.start(run)
            daemons.append((daemon, done))
            return daemon

        yield start
        for daemon, done in daemons:
            daemon.request_shutdown()
            with trio.fail_after(10):
                await done.wait()


def pid_alive(pid: int) -> bool:
    """Whether a process exists (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False
