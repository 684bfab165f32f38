"""The floor: the least a daemon between an agent and one extension must do.

``python relay.py SOCKET ARGV...`` spawns ``ARGV`` (one echo extension), then
serves one client at a time on the Unix socket ``SOCKET``: it answers
``hello`` and turns each ``call_tool`` into a ``tool_call`` for the child and
each ``tool_result`` into a ``response``, decoding and encoding every frame
with msgspec. No routing, no supervision, no deadlines, no limits: every
frame is forwarded by the task that read it, with one write per frame.

It speaks just enough of the agent protocol for ``zotd.client`` to drive it,
so the benchmark measures both with the same client and the same extension.
"""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import trio


class Request(msgspec.Struct):
    type: str
    id: int | str
    name: str = ""
    args: msgspec.Raw = msgspec.Raw(b"{}")


class Result(msgspec.Struct):
    type: str
    id: str | int | None = None
    content: msgspec.Raw = msgspec.Raw(b"[]")
    is_error: bool = False


class ToolCall(msgspec.Struct, tag_field="type", tag="tool_call"):
    id: str
    name: str
    args: msgspec.Raw


class CallData(msgspec.Struct):
    extension: str
    content: msgspec.Raw
    is_error: bool


class Response(msgspec.Struct, tag_field="type", tag="response"):
    id: int | str
    command: str
    success: bool
    data: object


decode_request = msgspec.json.Decoder(Request).decode
decode_result = msgspec.json.Decoder(Result).decode
encode = msgspec.json.Encoder().encode


def lines(buffer: bytearray, chunk: bytes | bytearray) -> list[bytes]:
    """Appends ``chunk`` and takes every whole line out of ``buffer``."""
    buffer += chunk
    end = buffer.rfind(b"\n")
    if end < 0:
        return []
    out = bytes(buffer[:end]).split(b"\n")
    del buffer[: end + 1]
    return out


class Relay:
    def __init__(self, child: trio.Process) -> None:
        assert child.stdin is not None
        assert child.stdout is not None
        self.stdin = child.stdin
        self.stdout = child.stdout
        self.client: trio.SocketStream | None = None
        self.waiting: dict[str, int | str] = {}
        self.next_id = 0
        self.one_client = trio.Lock()

    async def from_child(self) -> None:
        buffer = bytearray()
        while chunk := await self.stdout.receive_some(1 << 16):
            for line in lines(buffer, chunk):
                result = decode_result(line)
                if result.type != "tool_result":
                    continue  # hello, register_tool, ready
                client_id = self.waiting.pop(str(result.id))
                data = CallData("echo", result.content, result.is_error)
                if self.client is not None:
                    await self.client.send_all(
                        encode(Response(client_id, "call_tool", True, data)) + b"\n"
                    )

    async def serve(self, stream: trio.SocketStream) -> None:
        async with self.one_client, stream:
            self.client = stream
            buffer = bytearray()
            while chunk := await stream.receive_some(1 << 16):
                for line in lines(buffer, chunk):
                    request = decode_request(line)
                    if request.type == "call_tool":
                        self.next_id += 1
                        child_id = str(self.next_id)
                        self.waiting[child_id] = request.id
                        frame = ToolCall(child_id, request.name, request.args)
                        await self.stdin.send_all(encode(frame) + b"\n")
                    elif request.type == "hello":
                        data = {"protocol_version": 1, "zotd_version": "relay"}
                        data |= {"workspace": None, "pid": os.getpid()}
                        await stream.send_all(
                            encode(Response(request.id, "hello", True, data)) + b"\n"
                        )
            self.client = None


async def main(socket: str, argv: list[str]) -> None:
    sock = trio.socket.socket(trio.socket.AF_UNIX)
    await sock.bind(socket)
    sock.listen(16)
    listener = trio.SocketListener(sock)
    child = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    async with trio.open_nursery() as nursery:
        relay = Relay(child)
        nursery.start_soon(relay.from_child)
        print("ready", flush=True)
        await trio.serve_listeners(relay.serve, [listener])


if __name__ == "__main__":
    try:
        trio.run(main, sys.argv[1], sys.argv[2:])
    except KeyboardInterrupt:
        pass
