"""`zot ... dev`: Run an extension from a directory for this workspace, restarted when its files change. (being written; see issue 18)."""

from __future__ import annotations


def dev() -> int:
    """Run an extension from a directory for this workspace, restarted when its files change."""
    raise SystemExit("zot: dev is not built yet")
