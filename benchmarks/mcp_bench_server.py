"""A small MCP server for the fleet benchmark, one script started under many names.

``python mcp_bench_server.py NAME`` serves two tools over stdio with the official
MCP Python SDK's high-level ``MCPServer``: ``NAME_echo(text)``, which returns its
text, and ``NAME_add(a, b)``, which returns the sum. The tool names carry the
server's name so that ten copies side by side offer twenty distinct tools, as ten
different servers would.

It is a separate script from ``mcp_server.py`` (the latency peer, one fixed
``echo`` tool) because the fleet needs one name per copy; what it costs in memory
is what any small server written with the SDK costs: the interpreter, the SDK's
imports (pydantic, anyio, starlette's types) and two tools.
"""

from __future__ import annotations

import sys

from mcp.server import MCPServer


def build(name: str) -> MCPServer:
    """The server named ``name``, with its two tools."""
    server = MCPServer(name, log_level="WARNING")

    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    def add(a: int, b: int) -> int:
        """Return the sum of two integers."""
        return a + b

    server.add_tool(echo, name=f"{name}_echo")
    server.add_tool(add, name=f"{name}_add")
    return server


if __name__ == "__main__":
    build(sys.argv[1]).run("stdio")
