"""The guards of an event in the order their verdicts count: priority
(lower first), then name.

The order is sorted once and kept (:class:`Orders`) while the same guards
are asked with the same manifests and settings: reading every guard's
priority and sorting on each decision is work done again for each guard.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Final

from .extension import Extension


def order(guards: Sequence[Extension], priority: Callable[[str], int]) -> list[Extension]:
    """``guards`` in the order their verdicts count: priority (lower first), then name."""
    return sorted(guards, key=lambda ext: (priority(ext.name), ext.name))


class Orders:
    """The guards of each event in :func:`order`, sorted once and kept while
    the same guards are asked with the same manifests and settings.

    Args:
        priority: an extension's priority, by name (read from its manifest
            and ``settings``).
    """

    __slots__ = ("_kept", "_priority")

    def __init__(self, priority: Callable[[str], int]) -> None:
        self._priority = priority
        #: By event: what the order was made of, and the order.
        self._kept: dict[str, tuple[tuple[object, ...], list[Extension]]] = {}

    def of(self, event: str, guards: list[Extension], settings: object) -> list[Extension]:
        """``guards`` (the running guards of ``event``) in order; ``settings``
        is what the priorities are read from besides the manifests (a new
        object when they change)."""
        # (Compared item by item, which is by identity first: the same guards,
        # their manifests as they were found, the same settings.)
        key = (settings, *guards, *map(_found_of, guards))
        kept = self._kept.get(event)
        if kept is not None and kept[0] == key:
            return kept[1]
        ordered = order(guards, self._priority)
        self._kept[event] = (key, ordered)
        return ordered


_found_of: Final = operator.attrgetter("found")
