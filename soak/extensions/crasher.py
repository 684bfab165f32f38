#!/usr/bin/env python3
"""Crashes: at a random moment of its life, in the middle of a call, or on `/crash`.

Tool `crash_echo` echoes its arguments, except that now and then the process
dies instead of answering. A timer kills it after a random lifetime
(`--life MIN,MAX` seconds) in one of several ways: an exit code, a signal, or
half a frame written and then an exit. At start it leaves a grandchild
(`sleep`) in its process group that holds its stdout open, as a shell
wrapper's child would: zotd must sweep the group when the leader dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import threading
import time

from extlib import fault, frames, rng, send, start, tool_result, write

parser = argparse.ArgumentParser()
parser.add_argument("--life", default="1,6", help="lifetime range in seconds: MIN,MAX")
parser.add_argument("--mid-call", type=float, default=0.03, help="chance to die during a call")
opts = parser.parse_args()


def die(how: str) -> None:
    fault("crash", how)
    if how == "signal":
        os.kill(os.getpid(), rng.choice([signal.SIGSEGV, signal.SIGABRT, signal.SIGKILL]))
    elif how == "torn-write":
        write(b'{"type":"tool_result","id":"')  # and never the rest
    os._exit(rng.choice([1, 2, 70, 137]))


def lifetime() -> None:
    low, high = (float(x) for x in opts.life.split(","))
    time.sleep(rng.uniform(low, high))
    die(rng.choice(["exit", "signal", "torn-write"]))


child = subprocess.Popen(["sleep", "3600"])  # inherits stdin, stdout, stderr and the group
fault("grandchild", f"pid {child.pid}")
start("crasher", tools=("crash_echo",), commands=("crash",))
threading.Thread(target=lifetime, daemon=True).start()
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        if rng.random() < opts.mid_call:
            die("mid-call")
        send(tool_result(msg["id"], msg.get("args") or {}))
    elif kind == "command_invoked":
        die("commanded")
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        break
os._exit(0)  # the grandchild stays behind for zotd to sweep
