"""A small JSON Schema validator, permissive by design.

Guard extensions may rewrite a tool call's arguments; before the tool is
called, the daemon checks that the new arguments still fit the tool's
registered JSON Schema. The point is to catch clearly wrong arguments with a
one-line message (``$.city: expected a string, got an integer``), never to
block a call because of this module's own limits. So what it does not
understand, it accepts:

* unknown keywords, and every ``format``, are ignored;
* a keyword whose value is malformed (``"type": 5``, ``"required": "a"``, an
  invalid ``pattern``) is ignored, and a ``$ref`` that cannot be resolved
  accepts anything;
* a part of a schema that ignores something is *lax*: its passing is not
  trusted, so ``not`` of it, ``oneOf`` matching it as well as another
  alternative, and an ``if`` on it never fail a value on their own;
* an instance nested more than :data:`MAX_DEPTH` levels deep, or a schema
  applying more than :data:`MAX_HOPS` subschemas in place one inside another
  (``$ref``, ``allOf``... without going deeper into the instance, as a
  ``$ref`` cycle does), is accepted whole; so is a schema nested more than
  :data:`MAX_DEPTH` levels deep, below that level; and so is anything too
  deep for Python to recurse into.

Supported, in draft 2020-12 and draft-07 spellings: boolean schemas, ``type``
(and OpenAPI's ``nullable: true``, adding null), ``enum``, ``const``;
``properties``, ``patternProperties``, ``additionalProperties``, ``required``,
``minProperties``, ``maxProperties``, ``propertyNames``; ``prefixItems``,
``items`` (and draft-07's array form, with ``additionalItems``),
``minItems``, ``maxItems``, ``uniqueItems``, ``contains`` (with
``minContains`` and ``maxContains``); ``minLength`` and ``maxLength`` (in
code points), ``pattern`` (a Python :func:`re.search`); ``minimum``,
``maximum``, ``exclusiveMinimum`` and ``exclusiveMaximum`` (as numbers),
``multipleOf``; ``allOf``, ``anyOf``, ``oneOf``, ``not``,
``if``/``then``/``else``; and ``$ref`` to a JSON pointer into the same
document (``#``, ``#/$defs/Name``, ``#/definitions/Name``), as
:func:`msgspec.json.schema` writes them. As in draft 2020-12, the keywords
next to a ``$ref`` apply too.

Not supported, so not enforced: ``format``, ``dependentRequired``,
``dependentSchemas`` and ``dependencies``, ``unevaluatedProperties`` and
``unevaluatedItems``, ``$anchor`` and ``$dynamicRef``, references relative to
an ``$id`` or to other documents, and draft-04's boolean
``exclusiveMinimum``/``exclusiveMaximum``.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

#: Instance nesting (and schema nesting) past which nothing more is checked.
MAX_DEPTH = 100

#: Subschemas applied in place, one inside another, past which nothing more is checked.
MAX_HOPS = 32


class Validator:
    """A JSON Schema compiled once; `check(instance)` returns the first error or None.

    Neither building a validator nor checking with it raises, whatever the
    schema and instance (decoded JSON): what cannot be understood accepts.

    Args:
        schema: the decoded JSON Schema, usually a ``dict``; ``True`` accepts
            everything and ``False`` nothing.
    """

    __slots__ = ("_compiler", "_root")

    def __init__(self, schema: Any) -> None:
        self._compiler = _Compiler(schema)
        try:
            self._root = self._compiler.node(schema, 0) or _LAX
        except RecursionError:
            self._root = _LAX

    def check(self, instance: Any) -> str | None:
        """The first thing wrong with ``instance``, or ``None`` if it fits.

        The message is one line: where (``$``, ``$.city``, ``$.tags[2]``),
        then what is wrong there.
        """
        try:
            error = self._root.check(instance, 0, 0)
        except (_TooDeep, RecursionError):
            return None
        return None if error is None else error.render()


def check(schema: Any, instance: Any) -> str | None:
    """Validator(schema).check(instance)"""
    return Validator(schema).check(instance)


# ---------------------------------------------------------------- errors


@dataclass(frozen=True, slots=True)
class _Error:
    """What is wrong, and where, relative to the node that found it.

    Attributes:
        message: what is wrong, for humans.
        path: the object keys and array indexes leading to where.
        expected: the allowed types, when the error is a type mismatch (so
            that ``anyOf`` can name all its alternatives' types at once).
        mismatch: whether an ``enum`` or ``const`` found it (a wrong tag
            means the wrong alternative of ``anyOf``, not the wrong value).
    """

    message: str
    path: tuple[str | int, ...] = ()
    expected: tuple[str, ...] = ()
    mismatch: bool = False

    def under(self, segment: str | int) -> _Error:
        """The same error, seen from the object or array containing it."""
        return _Error(self.message, (segment, *self.path), self.expected, self.mismatch)

    def render(self) -> str:
        """``$.tags[2]: message``; a deep path keeps its ends (``$.a.b.c..x.y.z``)."""
        path = self.path
        if len(path) <= 8:
            return f"${_steps(path)}: {self.message}"
        return f"${_steps(path[:3])}..{_steps(path[-3:]).removeprefix('.')}: {self.message}"


def _steps(path: tuple[str | int, ...]) -> str:
    """``.city``, ``[2]``, ``['two words']``: the path's steps, JSONPath style."""
    out = []
    for segment in path:
        if isinstance(segment, int):
            out.append(f"[{segment}]")
        elif isinstance(segment, str) and segment.isidentifier() and len(segment) <= _SHORT:
            out.append(f".{segment}")
        else:
            out.append(f"[{_short(segment)}]")
    return "".join(out)


class _TooDeep(Exception):
    """Past :data:`MAX_DEPTH` or :data:`MAX_HOPS`: the instance is accepted."""


_SHORT = 60

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = _repr.maxlong = _SHORT
_repr.maxlist = _repr.maxdict = 8
_repr.maxlevel = 3


def _short(value: Any) -> str:
    """A repr of ``value`` for messages, cut past about 60 characters."""
    try:
        text = _repr.repr(value)
    except ValueError:  # an int with too many digits to write out
        return f"<{_kind(value)}>"
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def _kind(value: Any) -> str:
    """What a JSON value is, for messages: ``a string``, ``null``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    for name, kind in (("a string", str), ("an array", list), ("an object", dict)):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _count(n: int, noun: str) -> str:
    """``1 item``, ``2 items``; ``property`` becomes ``properties``."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") else f"{n} {noun}s"


# ---------------------------------------------------------------- values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda value: value is None,
    "boolean": lambda value: isinstance(value, bool),
    "integer": _is_integer,
    "number": _is_number,
    "string": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}

_TYPE_NAMES = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def _type_error(types: tuple[str, ...], instance: Any) -> _Error:
    """``expected a string or null, got an integer``."""
    names = [_TYPE_NAMES[t] for t in dict.fromkeys(types) if t != "null"]
    if "null" in types:
        names.append("null")
    expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return _Error(f"expected {expected}, got {_kind(instance)}", expected=types)


_TRUE, _FALSE = object(), object()


def _canon(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal where JSON values are equal.

    ``1`` and ``1.0`` are equal; ``true`` and ``1`` are not.
    """
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, list):
        return tuple(_canon(item) for item in value)
    if isinstance(value, dict):
        return frozenset((key, _canon(item)) for key, item in value.items())
    return value


def _is_multiple(value: int | float, step: int | float) -> bool:
    """Whether ``value`` is a multiple of ``step``, allowing floats' rounding errors."""
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    try:
        quotient = value / step
        return abs(quotient - round(quotient)) <= 1e-12 * max(1.0, abs(quotient))
    except (OverflowError, ValueError):  # inf, nan, or an int too big for a float
        return True


def _pointer(root: Any, ref: str) -> Any:
    """What a local ``$ref`` (``#/$defs/Name``) points to in ``root``, or ``None``."""
    if not ref.startswith("#"):
        return None
    fragment = unquote(ref[1:])
    if not fragment:
        return root
    if not fragment.startswith("/"):
        return None  # an $anchor
    node = root
    for token in fragment[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


# ---------------------------------------------------------------- nodes

#: Checks an instance found ``depth`` levels deep, ``hops`` subschemas in place deep.
_Check = Callable[[Any, int, int], _Error | None]


class _Node:
    """A compiled schema: its keywords' checks, in order.

    ``lax`` says it ignored something (a keyword, a malformed value, a
    ``$ref``), so it may accept what the schema rejects; it never rejects
    what the schema accepts.
    """

    __slots__ = ("_checks", "lax")

    def __init__(self, checks: tuple[_Check, ...], lax: bool) -> None:
        self._checks = checks
        self.lax = lax

    def check(self, instance: Any, depth: int, hops: int) -> _Error | None:
        for check in self._checks:
            error = check(instance, depth, hops)
            if error is not None:
                return error
        return None

    def descend(self, child: Any, depth: int) -> _Error | None:
        """Checks a member or an item of the instance."""
        if depth >= MAX_DEPTH:
            raise _TooDeep
        return self.check(child, depth + 1, 0)

    def apply(self, instance: Any, depth: int, hops: int) -> _Error | None:
        """Checks the instance itself against a subschema (``$ref``, ``allOf``...)."""
        if hops >= MAX_HOPS:
            raise _TooDeep
        return self.check(instance, depth, hops + 1)


def _reject(instance: Any, depth: int, hops: int) -> _Error:
    return _Error("no value is allowed here")


_ACCEPT = _Node((), lax=False)
_REJECT = _Node((_reject,), lax=False)
_LAX = _Node((), lax=True)


class _Compiler:
    """Turns schemas into nodes, noting what it ignores; resolves ``$ref``.

    ``lax`` is set while compiling a schema as soon as something in it (or
    in its subschemas) is ignored; each builder reads its keywords through
    the methods here, which set it for malformed values.
    """

    __slots__ = ("_refs", "_root", "lax")

    def __init__(self, root: Any) -> None:
        self._root = root
        self._refs: dict[str, _Node | None] = {}
        self.lax = False

    def node(self, schema: Any, level: int) -> _Node | None:
        """The node for ``schema``; ``None`` (lax) if not a schema, or nested too deep."""
        if schema is True:
            return _ACCEPT
        if schema is False:
            return _REJECT
        if not isinstance(schema, dict) or level > MAX_DEPTH:
            self.lax = True
            return None
        outer, self.lax = self.lax, not _KNOWN.issuperset(schema)
        checks: list[_Check] = []
        for build in _BUILD_ORDER:
            check = build(self, schema, level + 1)
            if check is not None:
                checks.append(check)
        node = _Node(tuple(checks), self.lax)
        self.lax = outer or node.lax
        return node

    def sub(self, schema: dict[str, Any], key: str, level: int) -> _Node | None:
        """The node for the subschema at ``key``, or ``None`` if absent or malformed."""
        return self.node(schema[key], level) if key in schema else None

    def subs(self, schema: dict[str, Any], key: str, level: int) -> list[_Node] | None:
        """The nodes for the list of subschemas at ``key``, or ``None``."""
        if key not in schema:
            return None
        value = schema[key]
        nodes = [self.node(sub, level) for sub in value] if isinstance(value, list) else [None]
        if not nodes or None in nodes:
            self.lax = True
            return None
        return [node for node in nodes if node is not None]

    def count(self, schema: dict[str, Any], key: str) -> int | None:
        """A non-negative integer keyword (``3`` or ``3.0``), or ``None``."""
        value = schema.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        self.lax = self.lax or key in schema
        return None

    def number(self, schema: dict[str, Any], key: str) -> int | float | None:
        """A number keyword, or ``None``."""
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        self.lax = self.lax or key in schema
        return None

    def regex(self, pattern: Any) -> re.Pattern[str] | None:
        """``pattern`` compiled, or ``None`` if it is not a valid (Python) regex."""
        if not isinstance(pattern, str):
            self.lax = True
            return None
        try:
            return re.compile(pattern)
        except Exception:  # re.error, but also OverflowError, RecursionError...
            self.lax = True
            return None

    def resolve(self, ref: str) -> _Node | None:
        """The node a ``$ref`` points to, compiled once; ``None`` if unresolvable."""
        if ref not in self._refs:
            target = _pointer(self._root, ref)
            self._refs[ref] = None if target is None else self.node(target, 0)
        return self._refs[ref]


# ---------------------------------------------------------------- keywords
#
# A builder reads its keywords from a schema and returns a check, or None if
# there is nothing to check. Each check ignores instances of other types.

_Builder = Callable[[_Compiler, dict[str, Any], int], _Check | None]


def _build_type(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    value = schema.get("type")
    types = [value] if isinstance(value, str) else value
    if not (isinstance(types, list) and types and all(isinstance(t, str) for t in types)):
        types = None
    if types is None or not all(t in _TYPES for t in types):
        c.lax = c.lax or "type" in schema
        return None
    allowed = (*types, "null") if schema.get("nullable") is True else tuple(types)
    tests = tuple(_TYPES[t] for t in allowed)

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if any(test(instance) for test in tests):
            return None
        return _type_error(allowed, instance)

    return check


def _build_enum(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    values = schema.get("enum")
    if not isinstance(values, list) or not values:
        c.lax = c.lax or "enum" in schema
        return None
    allowed = {_canon(value) for value in values}

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if _canon(instance) in allowed:
            return None
        return _Error(f"{_short(instance)} is not one of {_short(values)}", mismatch=True)

    return check


def _build_const(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    if "const" not in schema:
        return None
    value = schema["const"]
    expected = _canon(value)

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if _canon(instance) == expected:
            return None
        return _Error(f"expected {_short(value)}, got {_short(instance)}", mismatch=True)

    return check


def _build_object(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        c.lax, required = True, []
    least = c.count(schema, "minProperties")
    most = c.count(schema, "maxProperties")
    names = c.sub(schema, "propertyNames", level)

    properties: dict[str, _Node] = {}
    patterns: list[tuple[re.Pattern[str], _Node]] = []
    # Only call a property unexpected if all that is expected was understood.
    understood = True
    raw = schema.get("properties", {})
    if isinstance(raw, dict):
        for name, sub in raw.items():
            properties[name] = c.node(sub, level) or _LAX
    else:
        c.lax, understood = True, False
    raw = schema.get("patternProperties", {})
    if isinstance(raw, dict):
        for pattern, sub in raw.items():
            regex = c.regex(pattern)
            if regex is None:
                understood = False
            else:
                patterns.append((regex, c.node(sub, level) or _LAX))
    else:
        c.lax, understood = True, False
    additional = c.sub(schema, "additionalProperties", level)
    if additional is _ACCEPT or not understood:
        additional = None

    limits = (additional, names, least, most)
    if not (required or properties or patterns) and all(x is None for x in limits):
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if not isinstance(instance, dict):
            return None
        for name in required:
            if name not in instance:
                return _Error(f"missing required property {_short(name)}")
        if least is not None and len(instance) < least:
            return _Error(f"expected at least {_count(least, 'property')}, got {len(instance)}")
        if most is not None and len(instance) > most:
            return _Error(f"expected at most {_count(most, 'property')}, got {len(instance)}")
        for key, value in instance.items():
            if names is not None and (error := names.apply(key, depth, hops)) is not None:
                return _Error(f"invalid property name {_short(key)}: {error.message}")
            node = properties.get(key)
            matched = node is not None
            if node is not None and (error := node.descend(value, depth)) is not None:
                return error.under(key)
            for regex, node in patterns:
                if isinstance(key, str) and regex.search(key):
                    matched = True
                    if (error := node.descend(value, depth)) is not None:
                        return error.under(key)
            if matched or additional is None:
                continue
            if additional is _REJECT:
                return _Error(f"unexpected property {_short(key)}")
            if (error := additional.descend(value, depth)) is not None:
                return error.under(key)
        return None

    return check


def _build_array(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    # prefixItems, then items for the rest; or draft-07's items list, then additionalItems.
    if "prefixItems" in schema:
        prefix, rest_key = c.subs(schema, "prefixItems", level), "items"
    elif isinstance(schema.get("items"), list):
        prefix, rest_key = c.subs(schema, "items", level), "additionalItems"
    else:
        prefix, rest_key = [], "items"
    # If the prefix is malformed, we cannot tell where the rest begins.
    rest = c.sub(schema, rest_key, level) if prefix is not None else None
    if rest is _ACCEPT:
        rest = None
    head = prefix or []
    least = c.count(schema, "minItems")
    most = c.count(schema, "maxItems")
    unique = schema.get("uniqueItems") is True
    contains = c.sub(schema, "contains", level)
    least_contains = c.count(schema, "minContains")
    most_contains = c.count(schema, "maxContains")
    if contains is not None and contains.lax:
        most_contains = None  # a lax `contains` may count too many matches

    if not (head or unique) and all(x is None for x in (rest, contains, least, most)):
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if not isinstance(instance, list):
            return None
        if least is not None and len(instance) < least:
            return _Error(f"expected at least {_count(least, 'item')}, got {len(instance)}")
        if most is not None and len(instance) > most:
            return _Error(f"expected at most {_count(most, 'item')}, got {len(instance)}")
        for index, item in enumerate(instance):
            if index < len(head):
                node = head[index]
            elif rest is None:
                break
            elif rest is _REJECT:
                return _Error(f"expected at most {_count(len(head), 'item')}, got {len(instance)}")
            else:
                node = rest
            if (error := node.descend(item, depth)) is not None:
                return error.under(index)
        if unique:
            seen: dict[Any, int] = {}
            for index, item in enumerate(instance):
                first = seen.setdefault(_canon(item), index)
                if first != index:
                    return _Error(f"items {first} and {index} are both {_short(item)}")
        if contains is not None:
            at_least = 1 if least_contains is None else least_contains
            return _check_contains(instance, depth, contains, at_least, most_contains)
        return None

    return check


def _check_contains(
    instance: list[Any], depth: int, contains: _Node, least: int, most: int | None
) -> _Error | None:
    if least == 0 and most is None:
        return None
    matches = 0
    for item in instance:
        if contains.descend(item, depth) is None:
            matches += 1
            if matches >= least and most is None:
                return None
    if matches < least:
        if least == 1:
            return _Error("no item matches the 'contains' schema")
        return _Error(f"expected at least {least} items matching 'contains', got {matches}")
    if most is not None and matches > most:
        return _Error(f"expected at most {_count(most, 'item')} matching 'contains', got {matches}")
    return None


def _build_string(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    least = c.count(schema, "minLength")
    most = c.count(schema, "maxLength")
    regex = c.regex(schema["pattern"]) if "pattern" in schema else None
    if least is None and most is None and regex is None:
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if not isinstance(instance, str):
            return None
        if least is not None and len(instance) < least:
            return _Error(f"{_short(instance)} is shorter than the minimum length {least}")
        if most is not None and len(instance) > most:
            return _Error(f"{_short(instance)} is longer than the maximum length {most}")
        if regex is not None and not regex.search(instance):
            return _Error(f"{_short(instance)} does not match the pattern {_short(regex.pattern)}")
        return None

    return check


def _build_number(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    low = c.number(schema, "minimum")
    high = c.number(schema, "maximum")
    above = c.number(schema, "exclusiveMinimum")
    below = c.number(schema, "exclusiveMaximum")
    step = c.number(schema, "multipleOf")
    if step is not None and not step > 0:
        c.lax, step = True, None
    if low is None and high is None and above is None and below is None and step is None:
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if not _is_number(instance):
            return None
        if low is not None and instance < low:
            return _Error(f"{_short(instance)} is less than the minimum {low}")
        if high is not None and instance > high:
            return _Error(f"{_short(instance)} is more than the maximum {high}")
        if above is not None and instance <= above:
            return _Error(f"{_short(instance)} is not more than the exclusive minimum {above}")
        if below is not None and instance >= below:
            return _Error(f"{_short(instance)} is not less than the exclusive maximum {below}")
        if step is not None and not _is_multiple(instance, step):
            return _Error(f"{_short(instance)} is not a multiple of {step}")
        return None

    return check


def _build_ref(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    if "$ref" not in schema:
        return None
    # What the target accepts is only known once resolved: count it as lax.
    c.lax = True
    ref = schema["$ref"]
    if not isinstance(ref, str):
        return None
    resolved, target = False, None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        nonlocal resolved, target
        if not resolved:  # on first use: the target may be this very schema
            target, resolved = c.resolve(ref), True
        return None if target is None else target.apply(instance, depth, hops)

    return check


def _build_all_of(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    nodes = c.subs(schema, "allOf", level)
    if not nodes:
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        for node in nodes:
            if (error := node.apply(instance, depth, hops)) is not None:
                return error
        return None

    return check


def _build_any_of(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    nodes = c.subs(schema, "anyOf", level)
    if not nodes:
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        errors = []
        for node in nodes:
            error = node.apply(instance, depth, hops)
            if error is None:
                return None
            errors.append(error)
        return _best(errors, instance)

    return check


def _build_one_of(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    nodes = c.subs(schema, "oneOf", level)
    if not nodes:
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        errors, matched, exact = [], 0, []
        for index, node in enumerate(nodes):
            error = node.apply(instance, depth, hops)
            if error is not None:
                errors.append(error)
                continue
            matched += 1
            # A lax alternative might not really match: only trust exact ones.
            if not node.lax:
                exact.append(index)
            if len(exact) == 2:
                return _Error(f"matches both 'oneOf' alternatives {exact[0]} and {exact[1]}")
        return None if matched else _best(errors, instance)

    return check


def _best(errors: list[_Error], instance: Any) -> _Error:
    """The one error to report when no alternative of ``anyOf`` or ``oneOf`` fits.

    When each alternative wants another type, one message names them all
    (``expected an integer or null``); otherwise the error of the alternative
    that got furthest: not rejected by a tag, deepest, and not about type.
    """
    if all(error.expected and not error.path for error in errors):
        return _type_error(tuple(t for error in errors for t in error.expected), instance)

    def rank(error: _Error) -> tuple[bool, int, bool]:
        wrong_tag = error.mismatch and len(error.path) == 1
        return not wrong_tag, len(error.path), not error.expected

    return max(errors, key=rank)


def _build_not(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    if "not" not in schema:
        return None
    node = c.sub(schema, "not", level)
    if node is None or node.lax:
        # A lax schema's passing is not trusted: `not` it cannot fail anything.
        c.lax = True
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if node.apply(instance, depth, hops) is not None:
            return None
        return _Error(f"{_short(instance)} is not allowed (it matches the 'not' schema)")

    return check


def _build_if(c: _Compiler, schema: dict[str, Any], level: int) -> _Check | None:
    condition = c.sub(schema, "if", level)
    then = c.sub(schema, "then", level)
    otherwise = c.sub(schema, "else", level)
    if condition is None or (then is None and otherwise is None):
        return None

    def check(instance: Any, depth: int, hops: int) -> _Error | None:
        if condition.apply(instance, depth, hops) is not None:
            return None if otherwise is None else otherwise.apply(instance, depth, hops)
        error = None if then is None else then.apply(instance, depth, hops)
        if error is None or not condition.lax:
            return error
        # The lax condition may not really hold: then fitting `else` is enough.
        if otherwise is None or otherwise.apply(instance, depth, hops) is None:
            return None
        return error

    return check


#: Each keyword and the builder that reads it (with its sibling keywords).
_BUILDERS: dict[str, _Builder] = {
    "type": _build_type,
    "enum": _build_enum,
    "const": _build_const,
    **dict.fromkeys(
        [
            "properties",
            "patternProperties",
            "additionalProperties",
            "required",
            "minProperties",
            "maxProperties",
            "propertyNames",
        ],
        _build_object,
    ),
    **dict.fromkeys(
        ["items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"], _build_array
    ),
    **dict.fromkeys(["minLength", "maxLength", "pattern"], _build_string),
    **dict.fromkeys(
        ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"], _build_number
    ),
    "$ref": _build_ref,
    "allOf": _build_all_of,
    "anyOf": _build_any_of,
    "oneOf": _build_one_of,
    "not": _build_not,
    "if": _build_if,
}

#: The builders, once each, in this order: type first, so that a value of the
#: wrong type is told just that.
_BUILD_ORDER = tuple(dict.fromkeys(_BUILDERS.values()))

#: What the builders read along with the keywords above.
_COMPANIONS = ("then", "else", "additionalItems", "minContains", "maxContains", "nullable")

#: What only annotates or names a schema: ignoring it loses nothing.
_ANNOTATIONS = (
    *("$schema", "$id", "$comment", "$defs", "definitions", "title", "description"),
    *("default", "examples", "example", "deprecated", "readOnly", "writeOnly"),
    *("contentEncoding", "contentMediaType", "discriminator"),
)

#: The keywords that do not make a schema lax.
_KNOWN = frozenset((*_BUILDERS, *_COMPANIONS, *_ANNOTATIONS))
