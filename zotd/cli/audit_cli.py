"""`zot ... audit`: Read the intercept audit trail. (being written; see issue 18)."""

from __future__ import annotations


def audit() -> int:
    """Read the intercept audit trail."""
    raise SystemExit("zot: audit is not built yet")
