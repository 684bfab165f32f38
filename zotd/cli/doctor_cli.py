"""`zot ... doctor`: Check each extension and say what to do about each problem. (being written; see issue 18)."""

from __future__ import annotations


def doctor() -> int:
    """Check each extension and say what to do about each problem."""
    raise SystemExit("zot: doctor is not built yet")
