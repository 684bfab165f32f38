"""A small process that outlives the daemon just long enough to end its extensions.

Run as ``python -m zotd.runtime.watchdog``, started by the daemon with a pipe on its
stdin. The daemon writes ``+PGID`` when it starts an extension and ``-PGID``
when that extension's process group is gone. When the pipe reaches end of
file, the daemon has exited, however it died (SIGKILL and crashes
included): the watchdog SIGKILLs every process group still listed, then
exits. On Linux each extension also gets a parent-death signal, which ends
the group's leader at once; the watchdog is what ends the rest of the group,
and the only mechanism on platforms without parent-death signals (macOS).

Deliberately tiny, with no imports from the rest of zotd, so it starts fast.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    """Tracks process groups from stdin until EOF, then kills what is left."""
    # Signals aimed at the daemon's terminal or group are not for us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        text = line.strip()
        try:
            pgid = int(text[1:])
        except ValueError:
            continue
        if text.startswith(b"+"):
            groups.add(pgid)
        elif text.startswith(b"-"):
            groups.discard(pgid)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    main()
