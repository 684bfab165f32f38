"""A tiny MCP server over stdio for the add-mcp and .mcp.json tests: one tool,
``greet(who) -> "hello, WHO"``, and the value of ``$GREETING`` when set (to
show the manifest's ``env`` reached it)."""

import os

from mcp.server import MCPServer

server = MCPServer("greeter")


@server.tool()
def greet(who: str) -> str:
    """Say hello to someone."""
    return f"{os.environ.get('GREETING', 'hello')}, {who}"


if __name__ == "__main__":
    server.run("stdio")
