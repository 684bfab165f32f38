"""``before_agent_start``: the system prompt, asked of one guard after another.

(Being built.)
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..protocol import agent as ap
from .extension import Extension


async def decide(
    guards: Sequence[Extension], payload: dict[str, msgspec.Raw], budget: float, max_bytes: int
) -> ap.InterceptData:
    """Asks ``guards`` in order; each gets the prompt the one before left."""
    prompt = payload.get("system_prompt")
    text = msgspec.json.decode(prompt) if prompt is not None else ""
    return ap.InterceptData(block=False, system_prompt=text if isinstance(text, str) else "")
