"""The agents ``zot hook --agent NAME`` answers, each by its adapter module.

Each module is imported only when its agent is asked for; each exposes
``ADAPTER``, a :class:`~zotd.integrations.hook_model.Adapter`.
"""

from __future__ import annotations

import importlib

from .hook_model import Adapter

#: ``--agent`` value -> the module holding its ``ADAPTER``.
MODULES = {
    "claude": "zotd.integrations.claude_hooks",
    "codex": "zotd.integrations.codex_hooks",
    "gemini": "zotd.integrations.gemini_hooks",
}

#: The names ``--agent`` takes, in the order help and errors list them.
NAMES = tuple(MODULES)


def adapter(name: str) -> Adapter:
    """The adapter for ``name``.

    Raises:
        KeyError: no such agent (the message lists the known ones).
    """
    try:
        module = MODULES[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}: expected one of {', '.join(NAMES)}") from None
    found: Adapter = importlib.import_module(module).ADAPTER
    return found
