"""The guards of an event in order (priority, then name), sorted once and
sorted again whenever what orders them changes: which guards run, a
guard's manifest, the settings."""

from __future__ import annotations

from typing import Any, cast

from zotd.runtime.extension import Extension
from zotd.runtime.guard_order import Orders


class Guard:
    """What :class:`Orders` reads of an extension: its name and its manifest as found."""

    def __init__(self, name: str, found: object) -> None:
        self.name = name
        self.found = found


def guards(*items: Guard) -> list[Extension]:
    return cast("list[Extension]", list(items))


def names(ordered: list[Extension]) -> list[str]:
    return [g.name for g in ordered]


def test_the_order_is_kept_until_the_guards_their_manifests_or_the_settings_change() -> None:
    priorities = {"a": 0, "b": 0, "c": -1}
    asked: list[str] = []

    def priority(name: str) -> int:
        asked.append(name)
        return priorities[name]

    orders = Orders(priority)
    a, b, c = Guard("a", object()), Guard("b", object()), Guard("c", object())
    settings: Any = object()
    assert names(orders.of("tool_call", guards(a, b, c), settings)) == ["c", "a", "b"]
    assert sorted(asked) == ["a", "b", "c"]

    asked.clear()
    first = orders.of("tool_call", guards(a, b, c), settings)
    assert names(first) == ["c", "a", "b"] and asked == []  # kept: not sorted again
    assert names(orders.of("assistant_message", guards(b, a), settings)) == ["a", "b"]
    assert orders.of("tool_call", guards(a, b, c), settings) is first  # each event its own

    # A guard that stops running, or comes back.
    assert names(orders.of("tool_call", guards(a, c), settings)) == ["c", "a"]
    assert names(orders.of("tool_call", guards(a, b, c), settings)) == ["c", "a", "b"]

    # A guard found again with another manifest: its priority is read again.
    priorities["b"] = -5
    assert names(orders.of("tool_call", guards(a, b, c), settings)) == ["c", "a", "b"]  # (as found)
    b.found = object()
    assert names(orders.of("tool_call", guards(a, b, c), settings)) == ["b", "c", "a"]

    # Other settings (a priority in zotd.toml): sorted again.
    priorities["a"] = -9
    assert names(orders.of("tool_call", guards(a, b, c), object())) == ["a", "b", "c"]
