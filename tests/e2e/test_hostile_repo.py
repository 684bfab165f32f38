"""A cloned repository cannot freeze the daemon before anyone trusts it (issue 15).

A real daemon (``python -m zotd`` in a subprocess), two workspaces: one is
a project whose ``.zot/extensions/`` holds a manifest that is a link to
``/dev/zero``, one that is a FIFO, an extension that links to ``/dev/zero``
from its directory and one with a FIFO among its files. The hostile
workspace is listed, with an error for each of those that cannot be read
or trusted; the other workspace keeps answering meanwhile; ``zot ext
trust`` pins the one with the FIFO without opening it; and the daemon then
shuts down cleanly.

Nothing here asserts a time: the guards (30 s) are for hangs, and the
daemon's address space is capped, so a regression (reading ``/dev/zero``
to the end) fails the test instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.conftest import FAKE, add_extension
from zotd.client import connect
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionInfo
from zotd.protocol.extension import TextBlock

ZOT = Path(sys.executable).parent / "zot"

#: The hang guard of each step.
GUARD = 30.0

#: The daemon's address space, capped (see the module's docstring).
ADDRESS_SPACE = 4 << 30


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.fixture
def env(paths: Paths, short_tmp: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("ZOTD_")}
    out.update(
        ZOT_HOME=str(paths.home),
        ZOTD_SOCKET=str(paths.socket),
        ZOTD_CONFIG=str(short_tmp / "none.toml"),
        ZOTD_NO_AUTOSTART="1",
    )
    return out


@pytest.fixture
def daemon(paths: Paths, short_tmp: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "zotd"],
        env=env,
        cwd=short_tmp,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_capped,
    )
    try:
        deadline = time.monotonic() + GUARD
        while not _answers(paths.socket):
            assert proc.poll() is None, "the daemon exited"
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.02)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=GUARD)


def hostile_project(root: Path) -> Path:
    """A project as a hostile repository might ship it."""
    exts = root / ".zot" / "extensions"
    (exts / "zero").mkdir(parents=True)
    (exts / "zero" / "extension.json").symlink_to("/dev/zero")
    (exts / "fifo").mkdir()
    os.mkfifo(exts / "fifo" / "extension.json")
    (exts / "linked").mkdir()
    shutil.copy(FAKE, exts / "linked" / "fake.py")
    (exts / "linked" / "data").symlink_to("/dev/zero")
    for name in ("linked", "piped"):
        if name == "piped":
            (exts / name).mkdir()
            shutil.copy(FAKE, exts / name / "fake.py")
            os.mkfifo(exts / name / "pipe")
        (exts / name / "extension.json").write_text(
            json.dumps(
                {
                    "name": name,
                    "exec": "python3",
                    "args": ["fake.py", "--name", name, "--tools", f"{name}-tool"],
                }
            )
        )
    return root


def zot(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ZOT), *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


def test_a_hostile_project_is_listed_and_others_are_served(
    daemon: subprocess.Popen[bytes],
    paths: Paths,
    project: Path,
    short_tmp: Path,
    env: dict[str, str],
) -> None:
    add_extension(paths.extensions_dir, "calm", "--tools", "echo")
    hostile = hostile_project(short_tmp / "cloned")
    exts = hostile / ".zot" / "extensions"

    async def clients() -> dict[str, ExtensionInfo]:
        listed: dict[str, ExtensionInfo] = {}
        async with (
            connect(paths.socket, cwd=hostile, client="hostile") as bad,
            connect(paths.socket, cwd=project, client="good") as good,
        ):
            with trio.fail_after(GUARD):  # a hang guard: each of these answers at all
                # The hostile workspace exists (its discovery ran); the other answers.
                assert [t.name for t in await good.list_tools()] == ["echo"]
                echo = await good.call_tool("echo", {"city": "Berlin"})
                assert echo.content == [TextBlock('{"city": "Berlin"}')]
                listed.update({i.name: i for i in await bad.list_extensions()})
                assert [t.name for t in await bad.list_tools()] == ["echo"]  # the user's own
                assert [t.name for t in await good.list_tools()] == ["echo"]
        return listed

    listed = trio.run(clients)
    assert {n: (i.scope, i.state) for n, i in listed.items()} == {
        "calm": ("global", "ready"),
        "fifo": ("project", "failed"),
        "linked": ("project", "failed"),
        "piped": ("project", "untrusted"),
        "zero": ("project", "failed"),
    }

    res = zot(env, hostile, "ext", "list")
    assert res.returncode == 0, res
    rows = {line.split()[0]: line.split()[4] for line in res.stdout.splitlines()[1:]}
    assert rows == {
        "calm": "ready",
        "fifo": "failed",
        "linked": "failed",
        "piped": "untrusted",
        "zero": "failed",
    }
    reload_hint = "fix it, then run `zot ext reload {}`"
    for name, why in [
        ("zero", "it is a character device, not a regular file"),
        ("fifo", "it is a FIFO, not a regular file"),
    ]:
        manifest = exts / name / "extension.json"
        note = f"{name} cannot start (cannot read {manifest}: {why}); {reload_hint.format(name)}"
        assert note in res.stderr.splitlines(), res.stderr
    linked = (
        "linked cannot start (cannot be trusted: data links outside its directory (to "
        f"/dev/zero); zotd pins only what is inside it); {reload_hint.format('linked')}"
    )
    assert linked in res.stderr.splitlines(), res.stderr
    assert f"piped is not trusted yet; run `zot ext trust` in {hostile}" in res.stderr

    # Trusting pins the one with a FIFO among its files (by kind, unopened).
    res = zot(env, hostile, "ext", "trust")
    assert "trusted piped in " in res.stdout, res
    assert "piped: ready; provides piped-tool" in res.stdout, res

    # And the daemon shuts down cleanly: no worker thread is stuck on a read.
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=GUARD) == 0


def test_a_cloned_guard_never_turns_the_users_own_off(
    daemon: subprocess.Popen[bytes],
    paths: Paths,
    short_tmp: Path,
    env: dict[str, str],
) -> None:
    add_extension(paths.extensions_dir, "guard", "--intercept", "tool_call")
    add_extension(paths.extensions_dir, "audit", "--events", "turn_start")
    cloned = short_tmp / "cloned"
    exts = cloned / ".zot" / "extensions"
    # The repository ships a guard of the same name that is off, and an
    # audit of its own (never trusted).
    add_extension(exts, "guard", manifest={"enabled": False})
    add_extension(exts, "audit")
    res = zot(env, cloned, "ext", "list")
    assert res.returncode == 0, res
    rows = [line.split()[:5] for line in res.stdout.splitlines()[1:]]
    assert rows == [
        ["audit", "0.0.1", "global", "yes", "ready"],
        ["guard", "0.0.1", "global", "yes", "ready"],
    ]
    notes = res.stderr.splitlines()
    assert (
        f"audit: the global copy runs, not the project copy in {exts / 'audit'}: project-local "
        f"extensions run only once trusted: run `zot ext trust` in {cloned} to allow it"
    ) in notes
    assert (
        f"guard: the global copy runs, not the project copy in {exts / 'guard'}: its manifest "
        'says "enabled": false'
    ) in notes
    listed = {i["name"]: i for i in json.loads(zot(env, cloned, "ext", "list", "--json").stdout)}
    assert listed["guard"]["intercepts"] == ["tool_call"]
    assert listed["guard"]["passed_over"] == [
        {
            "scope": "project",
            "dir": str(exts / "guard"),
            "why": "disabled",
            "reason": 'its manifest says "enabled": false',
        }
    ]
    # Trusting the project's extensions: its audit takes over; its guard,
    # disabled, still leaves the user's running.
    res = zot(env, cloned, "ext", "trust")
    assert "trusted audit, guard in " in res.stdout, res
    listed = {i["name"]: i for i in json.loads(zot(env, cloned, "ext", "list", "--json").stdout)}
    assert {n: (i["scope"], i["state"]) for n, i in listed.items()} == {
        "audit": ("project", "ready"),
        "guard": ("global", "ready"),
    }
