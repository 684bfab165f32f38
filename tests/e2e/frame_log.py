"""What a fixture extension read, from the log of frames it keeps.

The fixtures of these tests (``newer_zot.py``, ``zot_sdk.py``,
``interactive.py``, ``caller.py``, ``prompt_guard.py``) append every frame
they read from zotd to a file given with ``--log``, one JSON object a line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

#: The bound of every wait here: a hang guard, generous for a slow or busy machine.
WAIT = 30.0


def frames(log: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """The frames an extension read, oldest first (of one ``type`` if given)."""
    if not log.exists():
        return []
    read = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [f for f in read if kind is None or f["type"] == kind]


async def wait_for(log: Path, kind: str, count: int = 1) -> list[dict[str, Any]]:
    """The frames of ``kind`` the extension read, once there are ``count``."""
    with trio.fail_after(WAIT):
        while len(found := frames(log, kind)) < count:
            await trio.sleep(0.01)
    return found
