#!/usr/bin/env python3
"""An extension that never says hello: it prints a banner to stdout, then
waits for its stdin to end (for zot ext doctor's tests).

    doctor_silent.py --name NAME [--stubborn] [--orphan]

With ``--stubborn`` it ignores SIGTERM too, and keeps running after its
stdin ends: only SIGKILL ends it. With ``--orphan`` it first starts a
``sleep`` in a session of its own (out of its process group, as a daemon
would), and says its pid on stderr too.
"""

import os
import signal
import subprocess
import sys
import time

print(f"doctor_silent: pid {os.getpid()}", file=sys.stderr, flush=True)
if "--orphan" in sys.argv:
    child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    print(f"doctor_silent: orphan pid {child.pid}", file=sys.stderr, flush=True)
if "--stubborn" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("Starting the weather service on port 8080...", flush=True)
for _line in sys.stdin:
    pass
if "--stubborn" in sys.argv:
    while True:
        time.sleep(3600)
