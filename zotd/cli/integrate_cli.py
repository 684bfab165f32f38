"""``zot integrate AGENT``: wire zot's hooks and ``zot mcp`` into another agent's settings."""

from __future__ import annotations

from .common import die


def integrate(agent: str, /) -> int:
    """Add zot's hooks and the zot mcp server to an agent's settings (claude, codex or gemini)."""
    die(f"zot integrate {agent}: not built yet", 2)
    return 2
