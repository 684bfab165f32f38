"""What a bad ``zotd.toml`` is told: msgspec's validation errors, said the
way the file is written (``restart.policy``, ``extensions."my.ext".priority``),
with the choices a field has and the known names near a misspelt one.

Imported only when a file is bad (:func:`~.config.load_config`).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, Literal

import msgspec

from .config import Config, ExtensionSettings

__all__ = ["choices", "field_message"]


#: msgspec's "... - at `$.a.b[1]`" suffix.
_AT = re.compile(r"^(?P<what>.*) - at `\$(?P<where>[^`]*)`$", re.DOTALL)
_PART = re.compile(r"\.(?P<key>[^.\[]+)|\[(?P<index>\d+|\.\.\.)\]")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>.*)`$", re.DOTALL)
_ENUM = re.compile(r"^Invalid enum value (?P<value>.*)$", re.DOTALL)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

Part = str | int


def field_message(exc: msgspec.ValidationError, data: bytes) -> str:
    """msgspec's message, said the way the file is written.

    "Object contains unknown field `x` - at `$.restart`" becomes "unknown field
    `restart.x`; did you mean `restart.window`?"; "Invalid enum value 'x' - at
    `$.restart.policy`" lists the valid values; any other message gets
    "field `a.b`: " in front instead of msgspec's ``$`` path. The key of a
    ``[extensions.NAME]`` table, which msgspec leaves out, is found again.
    """
    what, parts = _split(str(exc))
    if None in parts:
        located = _locate(parts, data)
        if located is not None:
            what, parts = located
    known = [p for p in parts if p is not None]
    unknown = _UNKNOWN.match(what)
    if unknown is not None:
        return _unknown_message(known, unknown["key"])
    enum = _ENUM.match(what)
    if enum is not None:
        values = _literal_values(_type_at(known))
        if values:
            return f"field `{_dotted(known)}`: {choices(values, enum['value'], quoted=True)}"
    if not known:
        return what  # a top-level message of __post_init__ names its field itself
    return f"field `{_dotted(known)}`: {what}"


def _split(text: str) -> tuple[str, list[Part | None]]:
    """A msgspec message and its path (``None`` for a dict key it does not show)."""
    match = _AT.match(text)
    if match is None:
        return text, []
    parts: list[Part | None] = []
    for m in _PART.finditer(match["where"]):
        if m["key"] is not None:
            parts.append(m["key"])
        else:
            parts.append(None if m["index"] == "..." else int(m["index"]))
    return match["what"], parts


def _locate(parts: list[Part | None], data: bytes) -> tuple[str, list[Part | None]] | None:
    """Fills in the dict key msgspec shows as ``[...]`` (only ``extensions`` has
    one): the first entry that fails on its own, and its own message."""
    if parts[:2] != ["extensions", None]:
        return None
    import tomllib  # (msgspec loads it to decode a config file; without one, never)

    try:
        tables = tomllib.loads(data.decode()).get("extensions")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(tables, dict):
        return None
    for name, table in tables.items():
        try:
            msgspec.convert(table, ExtensionSettings)
        except msgspec.ValidationError as exc:
            what, inner = _split(str(exc))
            return what, ["extensions", name, *inner]
    return None


def _unknown_message(parts: list[Part], key: str) -> str:
    import difflib  # (only for a mistake: the daemon's start does without it)

    names = _field_names(_type_at(parts))
    where = [*parts, key]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        return f"unknown field `{_dotted(where)}`; did you mean `{_dotted([*parts, close[0]])}`?"
    if names:
        return f"unknown field `{_dotted(where)}`; the known ones are {', '.join(names)}"
    return f"unknown field `{_dotted(where)}`"


def choices(values: typing.Iterable[str], got: str, *, quoted: bool = False) -> str:
    """ "must be one of a, b, c, not 'x'" (``got`` already in quotes if ``quoted``)."""
    return f"must be one of {', '.join(values)}, not {got if quoted else repr(got)}"


def _dotted(parts: typing.Sequence[Part]) -> str:
    """``restart.policy``, ``extensions."my.ext".priority``, ``reserved_commands[1]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if _BARE_KEY.match(part) else '"' + part.replace('"', '\\"') + '"'
            out += f".{key}" if out else key
    return out


def _unwrap(tp: Any) -> list[Any]:
    """The types a value of annotation ``tp`` may have (``Annotated`` and
    ``| None`` taken apart)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg) if t is not type(None)]
    return [tp]


def _type_at(parts: typing.Sequence[Part]) -> list[Any]:
    """The possible types at a path into :class:`Config` (empty if it leads nowhere)."""
    current: list[Any] = [Config]
    for part in parts:
        following: list[Any] = []
        for tp in current:
            origin = typing.get_origin(tp)
            if isinstance(tp, type) and issubclass(tp, msgspec.Struct) and isinstance(part, str):
                for field in msgspec.structs.fields(tp):
                    if field.encode_name == part:
                        following.extend(_unwrap(field.type))
            elif origin is dict and isinstance(part, str):
                following.extend(_unwrap(typing.get_args(tp)[1]))
            elif origin is list and isinstance(part, int):
                following.extend(_unwrap(typing.get_args(tp)[0]))
        current = following
    return current


def _literal_values(candidates: list[Any]) -> list[str]:
    return [
        str(v) for tp in candidates if typing.get_origin(tp) is Literal for v in typing.get_args(tp)
    ]


def _field_names(candidates: list[Any]) -> list[str]:
    return [
        field.encode_name
        for tp in candidates
        if isinstance(tp, type) and issubclass(tp, msgspec.Struct)
        for field in msgspec.structs.fields(tp)
    ]
