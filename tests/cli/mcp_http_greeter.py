"""A tiny MCP server over streamable HTTP for ``zot ext add-mcp --url``: one tool,
``greet(who)``; it listens on a free port of 127.0.0.1 and says which on stderr
(uvicorn's "Uvicorn running on http://127.0.0.1:PORT"); its endpoint is ``/mcp``."""

from mcp.server import MCPServer

server = MCPServer("http-greeter")


@server.tool()
def greet(who: str) -> str:
    """Say hello over HTTP."""
    return f"hello over http, {who}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=0)
