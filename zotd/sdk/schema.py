"""A tool's JSON Schema and argument checking, from its handler's signature.

``def weather(city: str, days: int = 1)`` becomes an object schema with
``city`` required and ``days`` optional; the model's arguments are decoded
into those types before the handler runs, and arguments that do not fit are
reported as the tool's error, naming the field. A handler whose one
parameter is a :class:`msgspec.Struct` gets that struct instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec


class ArgumentError(Exception):
    """The model's arguments do not fit the tool's parameters."""


class Signature:
    """How to check a tool's arguments and call its handler.

    Args:
        handler: the tool's function.
        schema: an explicit JSON Schema; the handler then gets the arguments
            as one ``dict``.
    """

    def __init__(self, handler: Callable[..., Any], schema: dict[str, Any] | None = None) -> None:
        self._struct: type[msgspec.Struct] | None = None
        self._spread = True
        if schema is not None:
            self.schema = schema
            self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(dict[str, Any])
            self._spread = False
            return
        hints = get_type_hints(handler, include_extras=True)
        params = list(inspect.signature(handler).parameters.values())
        if len(params) == 1 and _is_struct(hints.get(params[0].name)):
            self._struct = hints[params[0].name]
            self._spread = False
        else:
            fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
            for p in params:
                if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                    raise TypeError(f"tool parameter {p.name!r}: only named parameters are allowed")
                kind = hints.get(p.name, Any)
                fields.append((p.name, kind) if p.default is p.empty else (p.name, kind, p.default))
            name = "".join(w.capitalize() for w in handler.__name__.split("_")) + "Args"
            self._struct = msgspec.defstruct(name, fields, kw_only=True)
        assert self._struct is not None
        self._decoder = msgspec.json.Decoder(self._struct)
        self.schema = _object_schema(self._struct)

    def arguments(self, raw: bytes) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The handler's arguments from the tool call's raw JSON ``args``.

        Raises:
            ArgumentError: they do not fit (the message names the field).
        """
        try:
            value = self._decoder.decode(raw)
        except msgspec.ValidationError as exc:
            raise ArgumentError(f"invalid arguments: {exc}") from None
        except msgspec.DecodeError as exc:
            raise ArgumentError(f"arguments are not JSON: {exc}") from None
        if self._spread:
            assert self._struct is not None
            return (), {f: getattr(value, f) for f in self._struct.__struct_fields__}
        return (value,), {}


def _is_struct(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


def _object_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    return schema_of(struct)


def schema_of(kind: Any) -> dict[str, Any]:
    """The JSON Schema of a type msgspec knows (a ``msgspec.Struct``, a
    dataclass, a ``TypedDict``, ``list[...]``, ...), standing on its own.

    Raises:
        TypeError: msgspec has no schema for it.
    """
    # msgspec gives {"$ref": "#/$defs/Name", "$defs": {...}} for a named
    # type; a tool's schema must be the object itself, keeping any nested
    # definitions beside it.
    full = msgspec.json.schema(kind)
    ref = full.get("$ref")
    if not isinstance(ref, str):
        return full
    defs = dict(full.get("$defs", {}))
    name = ref.rsplit("/", 1)[-1]
    schema = dict(defs.pop(name))
    schema.pop("title", None)
    if defs:
        schema["$defs"] = defs
    return schema
