"""``zot ext doctor``'s question to an extension's interpreter: its version
(``node --version``, ``python3 --version``), asked with a short timeout,
its output bounded. Which interpreter, and whether it may be asked, is
:mod:`zotd.model.interpreters`'.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio

from ..model import interpreters
from ..model.doctor import Runtime
from ..model.environment import with_own_python
from ..model.manifest import Found
from .process import spawn

#: How long an interpreter's ``--version`` may take, and how much of its
#: output (stdout and stderr) is read.
VERSION_TIMEOUT = 5.0
VERSION_BYTES = 4096

#: How long a killed ``--version`` may take to be reaped.
REAP_TIMEOUT = 1.0


async def runtime_of(found: Found, *, trusted: bool) -> Runtime | None:
    """What ``found``'s program runs on, with its ``--version`` (see
    :func:`~zotd.model.interpreters.runtime_for` for which are asked)."""
    if not found.argv:
        return None
    path_env = with_own_python(os.environ).get("PATH")
    runtime, askable = await trio.to_thread.run_sync(
        interpreters.runtime_for, found.argv, found.dir, path_env, trusted
    )
    if askable:
        runtime.version, runtime.version_error = await version(runtime.path)
    return runtime


async def version(path: str) -> tuple[str, str]:
    """``path --version``'s first line, and "" (or why there is none), run
    in ``/`` with a bare environment, within :data:`VERSION_TIMEOUT`; the
    process group is gone when it returns."""
    read_err, write_err = os.pipe()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    try:
        child = spawn([path, "--version"], cwd=Path("/"), env=env, stderr=write_err)
    except OSError as exc:
        os.close(read_err)
        return "", f"could not run: {exc.strerror or exc}"
    finally:
        os.close(write_err)
    stderr = trio.lowlevel.FdStream(read_err)
    output = bytearray()
    code: int | None = None

    async def read(stream: trio.abc.ReceiveStream) -> None:
        while len(output) < VERSION_BYTES:
            chunk = await stream.receive_some(VERSION_BYTES)
            if not chunk:
                return
            output.extend(chunk)

    try:
        with trio.move_on_after(VERSION_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read, stderr)
                nursery.start_soon(read, child.stdout)
                code = await child.wait()
    finally:
        with trio.CancelScope(shield=True):
            if code is None:
                child.signal_group(signal.SIGKILL)
                with trio.move_on_after(REAP_TIMEOUT):
                    await child.wait()
            await child.stdin.aclose()
            await child.stdout.aclose()
            await stderr.aclose()
    line = interpreters.version_line(bytes(output[:VERSION_BYTES]))
    if code is None:
        return line, f"did not finish within {VERSION_TIMEOUT:g} s"
    if code != 0 and not line:
        return "", f"exited with code {code}"
    return line, ""
