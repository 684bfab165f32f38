#!/usr/bin/env python3
"""A raw extension for current zot's events and ``before_agent_start``, for tests.

Plain Python and JSON lines, no SDK. It starts as current zot's SDK does:
``hello``, then it reads the first line, and exits unless it is
``hello_ack``; then its ``subscribe`` frame(s) and ``ready``.

    prompt_guard.py --name NAME --log FILE [--events e1,e2] [--split]
                    [--replace TEXT | --append TEXT | --delete | --keep
                     | --non-string JSON | --silent] [--block]

Every frame it reads is appended to ``--log`` as one JSON line, so a test
can see what it was sent (and in which order).

It intercepts ``before_agent_start`` and subscribes to ``--events``. With
``--split`` it subscribes in two frames: the first half of the events in the
first, the rest and the intercept in the second (zot adds them up).

Its answer to ``before_agent_start``: ``--replace`` gives TEXT as the
prompt, ``--append`` the prompt it was sent followed by TEXT, ``--delete``
``""``, ``--keep`` (the default) no ``system_prompt`` at all,
``--non-string`` the given JSON value (a number, an object...) as
``system_prompt``, ``--silent`` no answer. ``--block`` adds ``block: true``
(which means nothing for this event).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--events", default="")
p.add_argument("--split", action="store_true")
answer = p.add_mutually_exclusive_group()
answer.add_argument("--replace")
answer.add_argument("--append")
answer.add_argument("--delete", action="store_true")
answer.add_argument("--keep", action="store_true")
answer.add_argument("--non-string")
answer.add_argument("--silent", action="store_true")
p.add_argument("--block", action="store_true")
opts = p.parse_args()


def record(frame: dict[str, Any]) -> None:
    with open(opts.log, "a") as f:
        f.write(json.dumps(frame) + "\n")


def reply(frame: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to an ``event_intercept``, or ``None`` for silence."""
    if opts.silent:
        return None
    out: dict[str, Any] = {"type": "event_intercept_response", "id": frame["id"]}
    if opts.block:
        out["block"] = True
        out["reason"] = "no"
    if opts.replace is not None:
        out["system_prompt"] = opts.replace
    elif opts.append is not None:
        out["system_prompt"] = frame.get("system_prompt", "") + opts.append
    elif opts.delete:
        out["system_prompt"] = ""
    elif opts.non_string is not None:
        out["system_prompt"] = json.loads(opts.non_string)
    return out


def main() -> None:
    emit({"type": "hello", "name": opts.name, "version": "1.0.0", "capabilities": ["events"]})
    first = sys.stdin.readline()
    try:
        ack = json.loads(first)
    except ValueError:
        sys.exit(f"{opts.name}: the first line is not JSON")
    record(ack)
    if ack.get("type") != "hello_ack":
        sys.exit(f"{opts.name}: the first line is not hello_ack")
    events = [e for e in opts.events.split(",") if e]
    intercept = ["before_agent_start"]
    if opts.split:
        half = len(events) // 2
        emit({"type": "subscribe", "events": events[:half]})
        emit({"type": "subscribe", "events": events[half:], "intercept": intercept})
    else:
        emit({"type": "subscribe", "events": events, "intercept": intercept})
    emit({"type": "ready"})
    for line in sys.stdin:
        if not line.strip():
            continue
        frame = json.loads(line)
        record(frame)
        if frame.get("type") == "event_intercept":
            out = reply(frame)
            if out is not None:
                emit(out)
        elif frame.get("type") == "shutdown":
            return


if __name__ == "__main__":
    main()
