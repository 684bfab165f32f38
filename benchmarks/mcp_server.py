"""A minimal MCP server over stdio, the peer for the MCP latency/throughput benchmark.

It serves one tool, ``echo(text: str) -> str``, that returns its argument unchanged, through
the official MCP Python SDK's high-level ``MCPServer`` (formerly FastMCP). The benchmark
spawns it with ``python benchmarks/mcp_server.py`` and talks to it with ``mcp.ClientSession``
(see ``benchmarks/mcp_peer.py``), so what is measured is the SDK's own stdio transport and
request handling around a tool that does nothing.
"""

from mcp.server import MCPServer

server = MCPServer("zotd-bench-echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio")
