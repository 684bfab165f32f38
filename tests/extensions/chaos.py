#!/usr/bin/env python3
"""A chaotic extension for the fuzz tests, seeded by its argv.

    chaos.py --name NAME --seed N [--lines K] [--max-frame BYTES]
             [--burst B] [--pause SECONDS]

It says hello, registers the tool ``chaos`` and is ready, like any
extension. From the first ``tool_call`` on, a thread writes K random lines to
stdout, B at a time with a pause between bursts: garbage bytes, truncated
JSON, frames with wrong field types, replies with ids no call has, notify
frames with wrong types, lines over the frame limit, blank lines, and lines
written in several pieces. Meanwhile it answers each ``chaos`` call as its
``mode`` argument says:

    ok         a tool_result echoing the args
    twice      two tool_results (the second has no call left to answer)
    malformed  a tool_result with the right id and a `content` that is no list
    wrongkind  a command_response with the right id
    silent     no reply at all
    oversized  a correct tool_result longer than the frame limit
    late       a correct tool_result after `delay` seconds

No random id is a decimal number the daemon could have used for a call. When
the K lines are written it says so on stderr (that is, in its log), then
registers the command ``NAME-done`` (so a test can tell when the daemon has
read them all).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time

out_lock = threading.Lock()
out = sys.stdout.buffer

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lines", type=int, default=3000)
p.add_argument("--max-frame", type=int, default=4096)
p.add_argument("--burst", type=int, default=40)
p.add_argument("--pause", type=float, default=0.005)
args = p.parse_args()
rng = random.Random(args.seed)


def write(data: bytes) -> None:
    with out_lock:
        out.write(data)
        out.flush()


def emit(obj: dict) -> None:
    write(json.dumps(obj).encode() + b"\n")


# --- random lines --------------------------------------------------------------

EXT_TAGS = [
    "hello",
    "register_command",
    "register_tool",
    "ready",
    "tool_result",
    "subscribe",
    "event_intercept_response",
    "command_response",
    "notify",
    "shutdown_ack",
]
ODD_STRINGS = ["", "\x00", "\u2028", "\U0001f600", "\ufeff", "\ud800", "a\\b", '"', "x" * 100]
counter = 0


def odd_id() -> object:
    """An id no pending call has: the daemon's ids are small decimal strings."""
    global counter
    counter += 1
    return rng.choice(
        [
            f"chaos-{counter}",
            f"{counter}x",
            f" {counter}",
            10**15 + counter,
            -counter,
            counter + 0.5,
            [counter],
            {"n": counter},
            None,
            True,
            "",
        ]
    )


def scalar() -> object:
    return rng.choice(
        [None, True, False, 0, -1, 2**64, 10**30, 1.5, -1e300, rng.choice(ODD_STRINGS)]
    )


def value(depth: int = 0) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.6:
        return scalar()
    if roll < 0.8:
        return [value(depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice([*ODD_STRINGS, "k", "id"]): value(depth + 1) for _ in range(3)}


def dumps(obj: object) -> bytes:
    try:
        return json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode()
    except UnicodeEncodeError:  # a lone surrogate, written raw
        return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


def wrong_frame() -> dict:
    tag = rng.choice(EXT_TAGS)
    frame: dict = {"type": tag}
    for key in rng.sample(
        [
            "name",
            "version",
            "capabilities",
            "description",
            "schema",
            "id",
            "content",
            "is_error",
            "events",
            "intercept",
            "block",
            "reason",
            "action",
            "message",
            "level",
        ],
        rng.randint(0, 4),
    ):
        frame[key] = value()
    if "id" in frame or tag in ("tool_result", "command_response", "event_intercept_response"):
        frame["id"] = odd_id()
    if tag in ("register_command", "register_tool") and isinstance(frame.get("name"), str):
        frame["name"] = f"junk-{counter}"  # valid ones add harmless names only
    return frame


def reply_with_unknown_id() -> dict:
    tag = rng.choice(["tool_result", "command_response", "event_intercept_response"])
    frame: dict = {"type": tag, "id": odd_id()}
    if tag == "tool_result" and rng.random() < 0.5:
        frame["content"] = [{"type": "text", "text": "for nobody"}]
    return frame


def bad_notify() -> dict:
    frame: dict = {"type": "notify"}
    frame[rng.choice(["level", "message"])] = rng.choice([3, None, [], {"a": 1}, True, 1.5])
    if rng.random() < 0.5:
        frame["message"] = rng.choice(ODD_STRINGS)
    return frame


def random_line() -> bytes:
    kind = rng.randrange(12)
    if kind == 0:  # garbage bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(200))).replace(b"\n", b"")
    if kind == 1:  # truncated JSON
        data = dumps(wrong_frame())
        return data[: rng.randrange(len(data))]
    if kind == 2:
        return dumps(reply_with_unknown_id())
    if kind == 3:
        return dumps(bad_notify())
    if kind == 4:  # over the frame limit
        pad = "z" * (args.max_frame + rng.randrange(1, 3 * args.max_frame))
        return dumps({"type": "notify", "message": pad})
    if kind == 5:  # an unknown type, or a host frame's type
        frame = wrong_frame()
        frame["type"] = rng.choice(["tool_call", "hello_ack", "Ready", " notify", "x" * 50, ""])
        return dumps(frame)
    if kind == 6:  # not an object, or no string type
        return rng.choice([b"[1,2,3]", b"42", b"null", b'"ready"', b'{"id":"chaos"}'])
    if kind == 7:
        return rng.choice([b"", b" ", b"\r", b"\t \r"])
    if kind == 8:  # trailing garbage, NaN, a NUL after the object
        return dumps(reply_with_unknown_id()) + rng.choice([b"x", b"\x00", b" }", b",NaN"])
    if kind == 9:  # harmless valid frames
        return dumps(
            rng.choice(
                [
                    {"type": "ready"},
                    {"type": "shutdown_ack"},
                    {"type": "notify", "level": "info", "message": rng.choice(ODD_STRINGS)},
                    {"type": "subscribe", "events": ["no_such_event"], "intercept": []},
                    {"type": "hello", "name": args.name},
                ]
            )
        )
    return dumps(wrong_frame())


def chaos() -> None:
    for n in range(args.lines):
        line = random_line() + rng.choice([b"\n"] * 5 + [b"\r\n"])
        if rng.random() < 0.1:  # in pieces, other writes kept out of its middle
            cuts = sorted(rng.randrange(len(line)) for _ in range(rng.randint(1, 3)))
            with out_lock:
                start = 0
                for cut in [*cuts, len(line)]:
                    out.write(line[start:cut])
                    out.flush()
                    start = cut
                    time.sleep(0.0005)
        else:
            write(line)
        if n % args.burst == args.burst - 1:
            time.sleep(args.pause)
    print(f"chaos: wrote {args.lines} lines", file=sys.stderr, flush=True)
    # After the last line on the same pipe: once zotd lists it, it has read them all.
    emit({"type": "register_command", "name": f"{args.name}-done"})


# --- the tool ----------------------------------------------------------------------


def call(msg: dict) -> None:
    rid, a = msg["id"], msg.get("args") or {}
    mode = a.get("mode", "ok")
    result = {
        "type": "tool_result",
        "id": rid,
        "content": [{"type": "text", "text": json.dumps(a)}],
    }
    if mode == "ok":
        emit(result)
    elif mode == "twice":
        emit(result)
        emit(result)
    elif mode == "malformed":
        emit({"type": "tool_result", "id": rid, "content": "not a list"})
    elif mode == "wrongkind":
        emit({"type": "command_response", "id": rid, "action": "noop"})
    elif mode == "oversized":
        emit({**result, "content": [{"type": "text", "text": "o" * (2 * args.max_frame)}]})
    elif mode == "late":
        time.sleep(float(a.get("delay", 1.0)))
        emit(result)
    # silent: nothing


print(f"chaos {args.name} starting, seed {args.seed}", file=sys.stderr, flush=True)
emit({"type": "hello", "name": args.name, "version": "0.0.1", "capabilities": ["tools"]})
emit(
    {
        "type": "register_tool",
        "name": "chaos",
        "description": "answers as its `mode` says",
        "schema": {"type": "object"},
    }
)
emit({"type": "ready"})

started = False
for raw_line in sys.stdin.buffer:
    msg = json.loads(raw_line)
    kind = msg.get("type")
    if kind == "tool_call":
        if not started:
            started = True
            threading.Thread(target=chaos, daemon=True).start()
        threading.Thread(target=call, args=(msg,), daemon=True).start()
    elif kind == "shutdown":
        emit({"type": "shutdown_ack"})
        break
