#!/usr/bin/env python3
"""Writes garbage: malformed lines, unknown ids, wrong frame types, torn and huge lines.

Tool `garbage_echo` echoes its arguments, but around (or instead of) the
correct reply it writes something wrong, chosen at random:

- junk before the reply (not JSON, not an object, no `type`, bad UTF-8,
  unknown types, known types with missing or mistyped fields, and the
  newer frames out of place: `tool_progress` for no pending call or with
  no id, `panel_render` and `panel_close` for panels it never opened or
  mistyped, a `modified_args` answer to no intercept);
- a reply with an id zotd never issued (`"g-17"`, `-1`, `1.5`);
- the correct reply twice;
- the reply split into two writes 50 ms apart;
- a line longer than the frame limit (`--huge BYTES`) before the reply;
- instead of the reply: a `command_response` (wrong kind), or a
  `tool_result` with malformed content. zotd must fail that call with
  `extension_failed`.

A thread also writes a junk line every so often, between calls. It never
answers one call with another's content: that would be its bug, not zotd's.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from extlib import fault, rng, send, serve, start, tool_result, write, write_split

parser = argparse.ArgumentParser()
parser.add_argument("--huge", type=int, default=100_000, help="bytes in an oversized line")
opts = parser.parse_args()

JUNK: list[bytes] = [
    b"this is not json",
    b"[1, 2, 3]",
    b'"just a string"',
    b'{"no_type": 1}',
    b'{"type": 42}',
    b'{"type": "from_the_future", "x": 1}',
    b'{"type": "notify", "level": 3}',
    b'{"type": "hello", "name": "garbage"}',
    b'{"type": "register_tool"}',
    b'{"type": "register_tool", "name": "garbage_extra", "schema": "not an object"}',
    b'{"type": "register_command", "name": "help"}',
    b'{"type": "tool_result", "id": "g-0", "content": "nope"}',
    b'{"type": "command_response", "id": -7, "action": "explode"}',
    b'{"type": "event_intercept_response", "id": "g-x", "block": "maybe"}',
    b'{"type": "ready"}',
    b'{"type": "shutdown_ack"}',
    b"\xff\xfe\x00garbage\x80",
    b"   ",
    b'{"type": "tool_result", "id": "1", "content": [{"type": "text"',
    b'{"type": "tool_progress", "id": "g-1", "message": "progress of no call", "progress": 1}',
    b'{"type": "tool_progress", "message": "progress without an id"}',
    b'{"type": "panel_render", "panel_id": "never-opened", "lines": ["garbage"]}',
    b'{"type": "panel_render", "panel_id": "p-1-1-00000000", "lines": "not a list"}',
    b'{"type": "panel_close", "panel_id": 7}',
    b'{"type": "event_intercept_response", "id": "g-y", "modified_args": {"x": 1}}',
]
_ids = iter(range(1, 1 << 62))


def junk_line() -> bytes:
    return rng.choice(JUNK) + b"\n"


def answer(msg: dict[str, Any]) -> None:
    rid, args = msg["id"], msg.get("args") or {}
    good = (json.dumps(tool_result(rid, args), separators=(",", ":")) + "\n").encode()
    mode = rng.choices(
        ["ok", "junk", "unknown-id", "duplicate", "split", "huge", "wrong-kind", "malformed"],
        weights=[40, 10, 10, 8, 8, 6, 9, 9],
    )[0]
    if mode != "ok":
        fault("garbage", f"{mode} id={rid} nonce={args.get('nonce')} bytes={len(good)}")
    if mode == "junk":
        write(junk_line())
    elif mode == "unknown-id":
        bogus = rng.choice([f"g-{next(_ids)}", -1, 1.5, None])
        send(tool_result(bogus, args))
    elif mode == "huge":
        write(b'{"type":"notify","message":"' + b"x" * opts.huge + b'"}\n')
    elif mode == "wrong-kind":
        send({"type": "command_response", "id": rid, "action": "noop"})
        return
    elif mode == "malformed":
        send({"type": "tool_result", "id": rid, "content": "not a list of blocks"})
        return
    if mode == "split":
        write_split(good, rng.randrange(1, len(good) - 1), 0.05)
        return
    write(good)
    if mode == "duplicate":
        write(good)


def spontaneous() -> None:
    while True:
        time.sleep(rng.uniform(0.2, 1.0))
        fault("garbage", "spontaneous")
        write(junk_line())


start("garbage", tools=("garbage_echo",))
threading.Thread(target=spontaneous, daemon=True).start()
serve("tool_call", answer)
