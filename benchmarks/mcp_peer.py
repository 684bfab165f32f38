"""The MCP peer for the latency/throughput benchmark.

``mcp_caller()`` starts ``benchmarks/mcp_server.py`` (an ``MCPServer`` from the official MCP
Python SDK) as a stdio subprocess, connects a ``mcp.ClientSession`` to it and yields an async
``call()`` that makes one ``tools/call`` of the ``echo`` tool. The session correlates responses
by request id, so ``call()`` may run from many tasks at once over the one connection.

Works under both anyio backends, ``asyncio`` and ``trio``: the SDK's client is written against
anyio, and its stdio transport spawns the server with ``anyio.open_process``.
"""

import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

SERVER_SCRIPT = Path(__file__).with_name("mcp_server.py")

_TOOL = "echo"
_TEXT = "hi"


@contextlib.asynccontextmanager
async def mcp_caller() -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Starts benchmarks/mcp_server.py (with sys.executable) as a stdio MCP server, initializes a ClientSession, and yields an async `call()` that calls the `echo` tool once with {"text": "hi"} and checks the result (raise if it is an error or the text is not "hi")."""
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER_SCRIPT)])
    async with (
        stdio_client(params) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as session,
    ):
        await session.initialize()
        # The session validates each result against the tool's output schema, and fetches
        # the schema with tools/list on the first call of a tool it has not seen listed.
        # List once here so every measured call is a single round trip.
        listed = await session.list_tools()
        if _TOOL not in {tool.name for tool in listed.tools}:
            raise RuntimeError(f"MCP server does not offer the {_TOOL!r} tool")

        async def call() -> None:
            result = await session.call_tool(_TOOL, {"text": _TEXT})
            if result.is_error:
                raise RuntimeError(f"echo tool failed: {result.content!r}")
            match result.content:
                case [TextContent(text=text)] if text == _TEXT:
                    return
            raise RuntimeError(f"echo tool returned {result.content!r}, expected {_TEXT!r}")

        yield call
