"""Argument checking: whether a tool's arguments fit its JSON Schema.

Guard extensions may rewrite a tool call's arguments; before the tool is
called, the daemon checks that the new arguments still fit the tool's
registered JSON Schema. The checking is the ``jsonschema`` library's (the
draft named by ``$schema``, else draft 2020-12); this module only makes it
permissive and gives one line saying what is wrong and where
(``$.city: expected a string, got an integer``). The point is to catch
clearly wrong arguments, never to block a call because of the checker's
limits, so:

* a schema the library finds invalid (a malformed keyword, a ``pattern``
  Python cannot compile), a ``$ref`` it cannot resolve, and anything too deep
  to recurse into accept;
* unknown keywords and every ``format`` are ignored (the library's default);
* OpenAPI's ``nullable: true`` adds null to the ``type``.

Checking is plain, synchronous and may be slow: a ``pattern`` is a Python
regular expression, which can backtrack for ages (``^(a+)+$``) without
releasing the GIL, and ``uniqueItems`` sorts a long array in C.
:func:`may_stall` says whether a check may hold the GIL for long, so that
the runtime can run it in a child process it can kill (:func:`main`: the
schema and the instance as a JSON array on stdin, the message or ``null``
on stdout); see :mod:`zotd.runtime.argcheck`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    # jsonschema itself is imported on the first schema compiled: it costs a
    # daemon's start tens of milliseconds, and only rewritten arguments are
    # ever checked.
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator as _Validator

#: A message past this many characters is cut (the rest of it is a long value).
MAX_MESSAGE: Final = 160

_TYPE_NAMES: Final = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


class ArgsSchema:
    """A tool's JSON Schema, compiled once; :meth:`check` says what does not fit.

    Neither building one nor checking with it raises, whatever the schema and
    the instance (decoded JSON): what the library cannot handle accepts.

    Args:
        schema: the decoded JSON Schema, usually a ``dict``; ``True`` accepts
            everything and ``False`` nothing.
    """

    __slots__ = ("_validator",)

    def __init__(self, schema: Any) -> None:
        from jsonschema import Draft202012Validator, validators

        self._validator: _Validator | None = None
        try:
            cls = _permissive(validators.validator_for(schema, default=Draft202012Validator))
            cls.check_schema(schema)
            self._validator = cls(schema)
        except Exception:  # invalid, or beyond the library: accepts everything
            self._validator = None

    def check(self, instance: Any) -> str | None:
        """What is wrong with ``instance``, in one line, or ``None`` if it fits.

        The line says where (``$``, ``$.city``, ``$.tags[2]``), then the
        library's best error there (:func:`jsonschema.exceptions.best_match`).
        """
        if self._validator is None:
            return None
        from jsonschema.exceptions import best_match  # (loaded with the validator)

        try:
            error = best_match(self._validator.iter_errors(instance))
        except Exception:  # an unresolvable $ref, a bad pattern, too deep: accepts
            return None
        return None if error is None else _render(error)


def check(schema: Any, instance: Any) -> str | None:
    """``ArgsSchema(schema).check(instance)``."""
    return ArgsSchema(schema).check(instance)


def may_backtrack(schema: bytes) -> bool:
    """Whether the JSON Schema ``schema`` (encoded) may apply a regular expression.

    Conservative: any ``"pattern`` in the text counts (``pattern``,
    ``patternProperties``, or a property of that name), and so does any
    ``\\u`` escape (``"pat\\u0074ern"`` decodes to ``pattern`` too).
    """
    return b'"pattern' in schema or b"\\u" in schema


#: Arguments longer than this (encoded) are checked in a child process
#: whatever the schema: some checks hold the GIL for a time that grows with
#: the instance (``uniqueItems`` sorts the array in C).
MAX_ARGS_IN_THREAD: Final = 64 * 1024


def may_stall(schema: bytes, args: bytes) -> bool:
    """Whether checking ``args`` against ``schema`` (both encoded) may hold
    the GIL for long: a regular expression (:func:`may_backtrack`), or
    arguments past :data:`MAX_ARGS_IN_THREAD` bytes."""
    return len(args) > MAX_ARGS_IN_THREAD or may_backtrack(schema)


@functools.cache
def _permissive(cls: type[_Validator]) -> type[_Validator]:
    """``cls`` with ``type`` taking OpenAPI's ``nullable`` and saying what was expected."""
    from jsonschema import validators
    from jsonschema.exceptions import ValidationError

    original = cls.VALIDATORS["type"]

    def type_(
        validator: _Validator, types: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if instance is None and schema.get("nullable") is True:
            return
        for error in original(validator, types, instance, schema):
            nullable = schema.get("nullable") is True
            yield ValidationError(_expected(types, nullable, instance, validator) or error.message)

    # `extend` has no annotations in types-jsonschema.
    extended: type[_Validator] = validators.extend(cls, {"type": type_})  # type: ignore[no-untyped-call]
    return extended


def _expected(types: Any, nullable: bool, instance: Any, validator: _Validator) -> str | None:
    """``expected a string or null, got an integer``, or None for an odd ``type``."""
    listed = [types] if isinstance(types, str) else types
    if not isinstance(listed, list) or not all(t in _TYPE_NAMES for t in listed):
        return None
    names = [_TYPE_NAMES[t] for t in dict.fromkeys(listed) if t != "null"]
    if "null" in listed or nullable:
        names.append("null")
    if not names:
        return None
    expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    got = next((_TYPE_NAMES[t] for t in _KINDS if validator.is_type(instance, t)), "something else")
    return f"expected {expected}, got {got}"


#: The JSON types, most specific first (an integer is also a number).
_KINDS: Final = ("null", "boolean", "integer", "number", "string", "array", "object")


def _render(error: ValidationError) -> str:
    """``$.tags[2]: message``, one line, cut at :data:`MAX_MESSAGE`."""
    where = "$" + "".join(_step(s) for s in error.absolute_path)
    line = f"{_cut(where, MAX_MESSAGE // 2)}: {' '.join(str(error.message).splitlines())}"
    return _cut(line, MAX_MESSAGE)


def _step(segment: str | int) -> str:
    """``.city``, ``[2]``, ``['two words']``: one step of a path, JSONPath style."""
    if isinstance(segment, int):
        return f"[{segment}]"
    if segment.isidentifier():
        return f".{segment}"
    return f"[{segment!r}]"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main() -> None:
    """The child process's side: ``[schema, instance]`` on stdin, the message on stdout."""
    try:
        schema, instance = msgspec.json.decode(sys.stdin.buffer.read())
    except (msgspec.DecodeError, ValueError, TypeError):
        message = None
    else:
        message = check(schema, instance)
    sys.stdout.buffer.write(msgspec.json.encode(message))


if __name__ == "__main__":
    main()
