"""The trivial extension every benchmark runs: as cheap as an extension can be.

``python echo_ext.py NAME MODE``, where MODE is

* ``tool``: registers a tool named NAME, which returns its ``text`` argument;
* ``guard``: intercepts ``tool_call`` and allows every call;
* ``stubborn``: registers nothing, ignores ``shutdown`` and SIGTERM.

It reads whatever stdin has, answers every whole line, and writes all the
answers in one write, so that it costs the daemon and the bare relay the same
and as little as possible.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import msgspec


class Frame(msgspec.Struct):
    type: str
    id: str | int | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class EchoArgs(msgspec.Struct):
    text: str = ""


decode = msgspec.json.Decoder(Frame).decode
decode_args = msgspec.json.Decoder(EchoArgs).decode
encode = msgspec.json.Encoder().encode

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def opening(name: str, mode: str) -> list[dict[str, object]]:
    frames: list[dict[str, object]] = [{"type": "hello", "name": name, "version": "1.0.0"}]
    if mode == "tool":
        frames.append(
            {"type": "register_tool", "name": name, "description": "echo", "schema": SCHEMA}
        )
    elif mode == "guard":
        frames.append({"type": "subscribe", "intercept": ["tool_call"]})
    frames.append({"type": "ready"})
    return frames


def answer(frame: Frame) -> bytes | None:
    if frame.type == "tool_call":
        text = decode_args(frame.args).text
        return encode(
            {"type": "tool_result", "id": frame.id, "content": [{"type": "text", "text": text}]}
        )
    if frame.type == "event_intercept":
        return encode({"type": "event_intercept_response", "id": frame.id, "block": False})
    return None


def main() -> None:
    name, mode = sys.argv[1], sys.argv[2]
    stubborn = mode == "stubborn"
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.write(1, b"".join(encode(f) + b"\n" for f in opening(name, mode)))
    tail = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        *lines, tail = (tail + chunk).split(b"\n")
        out: list[bytes] = []
        for line in lines:
            frame = decode(line)
            if frame.type == "shutdown" and not stubborn:
                os.write(1, b"".join(out) + b'{"type":"shutdown_ack"}\n')
                return
            reply = answer(frame)
            if reply is not None:
                out.append(reply + b"\n")
        if out:
            os.write(1, b"".join(out))
    while stubborn:  # stdin closed: still do not leave
        time.sleep(60)


if __name__ == "__main__":
    main()
