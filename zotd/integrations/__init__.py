"""Integrations: zot's extensions for other agents.

The MCP bridge (``zot mcp``: the workspace's tools and commands as an MCP
server over stdio). Built on :mod:`zotd.client`; may import it,
:mod:`zotd.protocol` and :mod:`zotd.model`, never the runtime or the CLIs.
"""
