"""Integrations: zot's extensions for other agents.

The MCP bridge (``zot mcp``: the workspace's tools and commands as an MCP
server over stdio) and the hook adapters (``zot hook``: an agent's hook
payloads as zot's events and intercepts, and the answers back; sans-IO,
the CLI does the reading and printing). Built on :mod:`zotd.client`; may
import it, :mod:`zotd.protocol` and :mod:`zotd.model`, never the runtime or
the CLIs.
"""
