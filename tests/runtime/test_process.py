"""The process layer's own promises, with real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Runs in a child so that exhausting its descriptors disturbs nothing here.
_EXHAUSTED = textwrap.dedent(
    """
    import errno, os, resource
    from pathlib import Path
    from zotd.runtime.process import spawn

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    held = []
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    os.close(held.pop())
    os.close(held.pop())  # room for one pipe, not for two
    for _ in range(3):
        try:
            spawn(["true"], cwd=Path("/"), env={}, stderr=2)
        except OSError as exc:
            assert exc.errno == errno.EMFILE, exc
        else:
            raise AssertionError("spawn should have failed")
    r, w = os.pipe()  # the failed spawns gave their first pipe back
    print("ok")
    """
)


def test_a_spawn_out_of_descriptors_leaks_none() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXHAUSTED], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
