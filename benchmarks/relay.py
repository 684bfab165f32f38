"""The floor: the least a daemon between an agent and one extension must do.

``python relay.py SOCKET ARGV...`` spawns ``ARGV`` (one echo extension), then
serves one client at a time on the Unix socket ``SOCKET``: it answers
``hello`` and turns each ``call_tool`` into a ``tool_call`` for the child and
each ``tool_result`` into a ``response``, decoding and encoding every frame
with msgspec. No routing, no supervision, no deadlines, no limits.

It is written to be as cheap as a trio relay can be, so that what zotd costs
beyond it means something. In each direction one task reads whatever the
stream has with a non-blocking ``read`` (waiting for the stream to become
readable only once a read came back short, as zotd's own reader does), turns
every whole line of that read into a frame, and writes all of those frames
in one non-blocking ``write``, at once, from the task that read them: no
other task, no queue, one system call per read in each direction. It waits
for the stream to take more only when a write is refused.

It speaks just enough of the agent protocol for ``zotd.client`` and the raw
client (``raw_client.py``) to drive it, so the benchmark measures both
servers with the same clients and the same extension.
"""

from __future__ import annotations

import os
import socket as stdlib_socket
import subprocess
import sys

import msgspec
import trio

#: Bytes asked of the kernel per read (as zotd's ``READ_SIZE``).
READ_SIZE = 64 * 1024


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


class Lines:
    """A read's whole lines, the unfinished tail kept for the next read."""

    __slots__ = ("tail",)

    def __init__(self) -> None:
        self.tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        if self.tail:
            chunk = self.tail + chunk
        *lines, self.tail = chunk.split(b"\n")
        return lines


class Reader:
    """Non-blocking reads of one file descriptor: read first, wait only
    after a short read (the stream was drained, so the next would fail)."""

    __slots__ = ("drained", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.drained = False

    async def read(self) -> bytes:
        """The next chunk; ``b""`` at end of stream."""
        if self.drained:
            await trio.lowlevel.wait_readable(self.fd)
        while True:
            try:
                chunk = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.fd)
                continue
            except (ConnectionResetError, BrokenPipeError):
                return b""
            self.drained = len(chunk) < READ_SIZE
            return chunk


async def write(fd: int, data: bytes) -> None:
    """Writes all of ``data`` at once, waiting only when the stream is full."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)


class Relay:
    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdin is not None
        assert child.stdout is not None
        self.stdin = child.stdin.fileno()
        self.stdout = child.stdout.fileno()
        os.set_blocking(self.stdin, False)
        os.set_blocking(self.stdout, False)
        #: The client's socket, while one is connected.
        self.client = -1
        self.waiting: dict[str, int | str] = {}
        self.next_id = 0

    async def from_child(self) -> None:
        reader, lines = Reader(self.stdout), Lines()
        while chunk := await reader.read():
            out = []
            for line in lines.feed(chunk):
                result = decode_result(line)
                if result.type != "tool_result":
                    continue  # hello, register_tool, ready
                client_id = self.waiting.pop(str(result.id))
                data = CallData("echo", result.content, result.is_error)
                out.append(encode(Response(client_id, "call_tool", True, data)))
            if out and self.client >= 0:
                out.append(b"")
                await write(self.client, b"\n".join(out))

    async def serve(self, sock: stdlib_socket.socket) -> None:
        with sock:
            sock.setblocking(False)
            self.client = fd = sock.fileno()
            reader, lines = Reader(fd), Lines()
            while chunk := await reader.read():
                calls, replies = [], []
                for line in lines.feed(chunk):
                    request = decode_request(line)
                    if request.type == "call_tool":
                        self.next_id += 1
                        child_id = str(self.next_id)
                        self.waiting[child_id] = request.id
                        calls.append(encode(ToolCall(child_id, request.name, request.args)))
                    elif request.type == "hello":
                        data = {"protocol_version": 1, "zotd_version": "relay"}
                        data |= {"workspace": None, "pid": os.getpid()}
                        replies.append(encode(Response(request.id, "hello", True, data)))
                if calls:
                    calls.append(b"")
                    await write(self.stdin, b"\n".join(calls))
                if replies:
                    replies.append(b"")
                    await write(fd, b"\n".join(replies))
            self.client = -1


async def main(socket: str, child: subprocess.Popen[bytes]) -> None:
    listener = stdlib_socket.socket(stdlib_socket.AF_UNIX)
    listener.bind(socket)
    listener.listen(16)
    listener.setblocking(False)
    relay = Relay(child)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.from_child)
        print("ready", flush=True)
        while True:  # one client at a time
            await trio.lowlevel.wait_readable(listener)
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                continue
            await relay.serve(sock)


if __name__ == "__main__":
    child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        trio.run(main, sys.argv[1], child)
    except KeyboardInterrupt:
        pass
