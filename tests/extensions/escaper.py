#!/usr/bin/env python3
"""An extension that leaves a grandchild outside its process group and session.

    escaper.py PIDFILE

Before its hello it double-forks: the child calls ``setsid`` (a new session
and process group) and forks the grandchild, then exits, so the grandchild
is re-parented away from the extension. The grandchild writes its pid to
PIDFILE (atomically) and becomes ``sleep 300``, its stdio on /dev/null like
any daemonized helper. Then the extension says hello and ready, and reads
its stdin until it closes.
"""

from __future__ import annotations

import json
import os
import sys

pidfile = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        os.execvp("sleep", ["sleep", "300"])
    os._exit(0)
os.wait()

for frame in ({"type": "hello", "name": "escaper"}, {"type": "ready"}):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()
for _ in sys.stdin:
    pass
