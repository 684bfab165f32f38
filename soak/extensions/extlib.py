"""Plumbing shared by the soak's extensions: framing, stderr notes, fault marks.

Every extension here is a plain Python script speaking newline-delimited JSON
on stdin/stdout, as an extension in the wild would. Whatever they write to
stderr lands in ``$ZOT_HOME/logs/ext-<name>.log``; a line ``FAULT <kind>
[detail]`` marks a fault the extension committed on purpose, and the soak
counts those lines at the end. So does it count the lines ``CANCEL <id>``:
every ``cancel`` frame zotd sends (beyond the reference: it stopped waiting
for request ``id``) is noted so by :func:`frames`, whatever the extension
does with it.

Randomness is seeded from ``$ZOTD_SOAK_SEED`` and the pid, so a restarted
process does not replay its predecessor's choices.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

rng = random.Random(f"{os.environ.get('ZOTD_SOAK_SEED', '0')}-{os.getpid()}")

_out = threading.Lock()
_err = threading.Lock()


def write(data: bytes) -> None:
    """Writes raw bytes to stdout at once; exits quietly if the daemon is gone."""
    with _out:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (BrokenPipeError, ValueError, OSError):
            os._exit(0)


def write_split(data: bytes, cut: int, pause: float) -> None:
    """Writes ``data`` in two pieces, ``pause`` seconds apart, with nothing between.

    The lock is held throughout: another thread's line landing between the
    halves would splice two replies into one valid frame with the wrong
    content, a fault of this extension that zotd could not detect.
    """
    with _out:
        try:
            sys.stdout.buffer.write(data[:cut])
            sys.stdout.buffer.flush()
            time.sleep(pause)
            sys.stdout.buffer.write(data[cut:])
            sys.stdout.buffer.flush()
        except (BrokenPipeError, ValueError, OSError):
            os._exit(0)


def send(frame: dict[str, Any]) -> None:
    """Writes one frame as one line."""
    write(json.dumps(frame, separators=(",", ":")).encode() + b"\n")


def note(message: str) -> None:
    """Appends a line to the extension's log (its stderr)."""
    with _err:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def fault(kind: str, detail: str = "") -> None:
    """Marks a fault this process commits on purpose (counted by the soak)."""
    note(f"FAULT {kind} {detail}".rstrip())


def echo_text(args: Any) -> str:
    """The text an echoing tool answers with: the arguments as canonical JSON."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


def tool_result(rid: Any, args: Any) -> dict[str, Any]:
    """A correct reply to a tool call: its own arguments echoed back."""
    return {
        "type": "tool_result",
        "id": rid,
        "content": [{"type": "text", "text": echo_text(args)}],
    }


def start(
    name: str,
    *,
    tools: tuple[str, ...] = (),
    commands: tuple[str, ...] = (),
    events: tuple[str, ...] = (),
    intercept: tuple[str, ...] = (),
    capabilities: tuple[str, ...] = ("tools",),
    ready: bool = True,
) -> None:
    """Says hello, registers, subscribes and says ready (unless ``ready=False``,
    as extensions written with newer zot's SDK do: zotd then waits for quiet).

    All of it is written at once, without waiting for ``hello_ack``."""
    note(f"{name} starting, pid {os.getpid()}")
    send({"type": "hello", "name": name, "version": "1.0.0", "capabilities": list(capabilities)})
    for tool in tools:
        send(
            {
                "type": "register_tool",
                "name": tool,
                "description": f"{tool}: echoes its arguments",
                "schema": {"type": "object", "properties": {"nonce": {"type": "string"}}},
            }
        )
    for command in commands:
        send({"type": "register_command", "name": command, "description": f"the {command} command"})
    if events or intercept:
        send({"type": "subscribe", "events": list(events), "intercept": list(intercept)})
    if ready:
        send({"type": "ready"})


def frames() -> Iterator[dict[str, Any]]:
    """The daemon's frames until end of file on stdin (unreadable lines skipped).

    A ``cancel`` frame is noted in the log (``CANCEL <id>``) before it is yielded.
    """
    for line in sys.stdin.buffer:
        try:
            frame = json.loads(line)
        except ValueError:
            note(f"unreadable line from zotd: {line[:80]!r}")
            continue
        if isinstance(frame, dict):
            if frame.get("type") == "cancel":
                note(f"CANCEL {frame.get('id')}")
            yield frame


def serve(kind: str, handle: Callable[[dict[str, Any]], None]) -> None:
    """Handles every frame of type ``kind`` in a thread of its own (so a slow
    one holds up nothing) until ``shutdown``, which it acknowledges."""
    for msg in frames():
        if msg.get("type") == kind:
            threading.Thread(target=handle, args=(msg,), daemon=True).start()
        elif msg.get("type") == "shutdown":
            send({"type": "shutdown_ack"})
            break
