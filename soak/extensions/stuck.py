#!/usr/bin/env python3
"""Stuck stdin: stops reading its stdin for a while, then reads again.

Tool `stuck_echo` echoes its arguments at once, whenever it reads the call.
But every `--every MIN,MAX` seconds it stops reading stdin for `--stuck
MIN,MAX` seconds (a line `FAULT stuck <seconds>`): zotd's writes to it back
up, its stdin queue fills, calls to it time out (or zotd treats it as stuck
and stops it), events to it are dropped. Then it resumes and answers
everything it reads; zotd drops the answers to calls it gave up.

It shrinks its stdin pipe to one page (``F_SETPIPE_SZ``) so that little is
buffered in the kernel, and checks what it reads after a resume: a
`stuck_echo` call carries `sent` (the client's wall clock) and `timeout`;
one read past `sent + timeout` is noted `LATE-CALL <nonce> <arrival>
<exempt>`. ``exempt`` is 1 if the call started within the first
``--exempt`` bytes read since the last resume (what zotd's writer may have
had in hand, plus the pipe: frames written before the stall), 0 otherwise.
The soak compares a late call with exempt 0 against the moment its client
got the ``timeout`` reply: a call written after zotd had given it up is an
abandoned call that zotd did not withdraw from the queue.

A heartbeat thread counts a pause of the whole process (SIGSTOP from the
soak, or a starved machine) as a stall too, so the bytes after it are
exempt in the same way.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import threading
import time

from extlib import fault, note, rng, send, start, tool_result

parser = argparse.ArgumentParser()
parser.add_argument("--every", default="3,8", help="seconds of reading between stalls: MIN,MAX")
parser.add_argument("--stuck", default="1,4", help="length of a stall, seconds: MIN,MAX")
parser.add_argument("--exempt", type=int, default=128 * 1024, help="bytes exempt after a stall")
opts = parser.parse_args()

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
HEARTBEAT = 0.05  # seconds between the heartbeat's ticks
FROZEN = 0.5  # a gap between ticks this long counts as a stall

stalls = 0  # bumped at the end of every stall, own or imposed
last_tick = time.monotonic()
lock = threading.Lock()


def heartbeat() -> None:
    global stalls, last_tick
    while True:
        time.sleep(HEARTBEAT)
        now = time.monotonic()
        with lock:
            if now - last_tick > FROZEN:
                stalls += 1
            last_tick = now


def pipe_size() -> int:
    try:
        fcntl.fcntl(0, F_SETPIPE_SZ, 4096)
    except OSError:
        pass
    try:
        return int(fcntl.fcntl(0, F_GETPIPE_SZ))
    except OSError:
        return 65536


def handle(line: bytes, exempt: bool) -> bool:
    """Handles one line (``exempt``: it began soon after a stall); ``False`` at ``shutdown``."""
    try:
        msg = json.loads(line)
    except ValueError:
        return True
    if not isinstance(msg, dict):
        return True
    kind = msg.get("type")
    if kind == "tool_call":
        args = msg.get("args") or {}
        sent, limit = args.get("sent"), args.get("timeout")
        now = time.time()
        if isinstance(sent, float | int) and isinstance(limit, float | int) and now > sent + limit:
            note(f"LATE-CALL {args.get('nonce')} {now:.3f} {int(exempt)}")
        send(tool_result(msg["id"], args))
    elif kind == "cancel":
        note(f"CANCEL {msg.get('id')}")
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        return False
    return True


def main() -> None:
    global stalls
    exempt_bytes = opts.exempt + pipe_size()
    start("stuck", tools=("stuck_echo",), events=("turn_end",))
    threading.Thread(target=heartbeat, daemon=True).start()
    every = [float(x) for x in opts.every.split(",")]
    stuck = [float(x) for x in opts.stuck.split(",")]
    next_stall = time.monotonic() + rng.uniform(*every)
    buffered = b""
    position = 0  # bytes read so far: where the next chunk begins in the stream
    stall_at = 0  # the position where reading resumed after the last stall
    seen = 0
    while True:
        if time.monotonic() >= next_stall:
            pause = rng.uniform(*stuck)
            fault("stuck", f"{pause:.1f}")
            time.sleep(pause)
            with lock:
                stalls += 1
            next_stall = time.monotonic() + rng.uniform(*every)
        try:
            chunk = os.read(0, 65536)
        except OSError:
            return
        if not chunk:
            return
        with lock:
            # A stall that ended before this read, or a freeze the heartbeat
            # has not noticed yet (both threads just woke up).
            if seen != stalls or time.monotonic() - last_tick > FROZEN:
                seen = stalls
                stall_at = position
        line_start = position - len(buffered)
        position += len(chunk)
        *lines, buffered = (buffered + chunk).split(b"\n")
        for line in lines:
            if not handle(line, line_start - stall_at < exempt_bytes):
                return
            line_start += len(line) + 1


main()
