"""An MCP server's stdio as the streams of the ``mcp`` package's client session.

MCP over stdio is newline-delimited JSON-RPC, so the server's pipes are
read and written the way zotd reads and writes any extension's: stdout
through a bounded :class:`~.streams.LineReader` (a line past
``max_frame_bytes`` is dropped, never held), stdin written by one task.
zotd spawns the server itself (its own process group, its stderr appended
to its log, supervised and restarted like any extension), so this replaces
the package's ``stdio_client``, which would spawn it.

A line that is not JSON-RPC (a server printing its banner to stdout, say)
is noted in the extension's log, within its noise budget, and skipped.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import mcp_types as mt
import msgspec
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..protocol.lines import Oversized
from .streams import LineReader

__all__ = ["Pipe"]


class Pipe:
    """The two memory streams a ``ClientSession`` reads and writes, and the
    tasks that carry them to and from the server's pipes.

    Args:
        max_line: the longest line read (``max_frame_bytes``).
        note: writes a line to the extension's log; returns ``False`` when
            over its noise budget (then the line is dropped quietly).
    """

    def __init__(self, max_line: int, note: Callable[[str], bool]) -> None:
        self._max = max_line
        self._note = note
        self._to_session, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read(self, stdout: trio.abc.ReceiveStream, done: trio.Event) -> None:
        """Parses the server's stdout into messages for the session until its
        end (then ends the session's read stream, and sets ``done``)."""
        send: MemoryObjectSendStream[SessionMessage | Exception] = self._to_session
        try:
            async with send:
                async for lines in LineReader(stdout, self._max):
                    for line in lines:
                        if isinstance(line, Oversized):
                            self._note(
                                f"dropped a {line.size}-byte line: longer than the "
                                f"{self._max}-byte frame limit"
                            )
                        elif line.strip():
                            message = self._parse(line)
                            if message is not None:
                                await send.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session is gone
        finally:
            done.set()

    def _parse(self, line: bytes) -> mt.JSONRPCMessage | None:
        try:
            return mt.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            pass
        try:
            msgspec.json.decode(line)
            why = "JSON, but not a JSON-RPC message"
        except msgspec.DecodeError:
            why = "not JSON"
        preview = line[:200].decode("utf-8", "replace")
        self._note(f"skipped a line on its stdout ({why}; MCP servers log to stderr): {preview}")
        return None

    async def write(self, stdin: trio.abc.SendStream) -> None:
        """Writes the session's messages to the server's stdin, one line
        each, until the session closes its write stream (then closes stdin)
        or the server stops reading."""
        receive: MemoryObjectReceiveStream[SessionMessage] = self._from_session
        try:
            async with receive:
                async for item in receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send_all(data.encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the server closed stdin or died: its supervisor sees the exit
        finally:
            with trio.CancelScope(shield=True):
                await stdin.aclose()

    def close_input(self) -> None:
        """Stops the session's writes: the writer closes the server's stdin
        (MCP's stdio shutdown: close stdin, then wait, SIGTERM, SIGKILL)."""
        self.write_stream.close()
