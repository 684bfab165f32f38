"""`zot ... top`: A live view of every extension. (being written; see issue 18)."""

from __future__ import annotations


def top() -> int:
    """A live view of every extension."""
    raise SystemExit("zot: top is not built yet")
