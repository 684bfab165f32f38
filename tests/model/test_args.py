"""Argument checking (zotd/model/args.py): the jsonschema library, made permissive.

Most tests are tables of (schema, instance, expected): ``None`` where the
instance fits, else the exact one-line message.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zotd.model.args import (
    MAX_ARGS_IN_THREAD,
    MAX_MESSAGE,
    ArgsSchema,
    check,
    may_backtrack,
    may_stall,
)

Case = tuple[Any, Any, str | None]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"


def params(cases: list[Case]) -> list[Any]:
    return [pytest.param(*case, id=f"{i}") for i, case in enumerate(cases)]


def assert_case(schema: Any, instance: Any, expected: str | None) -> None:
    assert check(schema, instance) == expected


# ---------------------------------------------------------------- what fails, and where

TYPE_CASES: list[Case] = [
    ({"type": "string"}, "x", None),
    ({"type": "string"}, 3, "$: expected a string, got an integer"),
    ({"type": "integer"}, 3, None),
    ({"type": "integer"}, 3.0, None),
    ({"type": "integer"}, 3.5, "$: expected an integer, got a number"),
    ({"type": "integer"}, True, "$: expected an integer, got a boolean"),
    ({"type": "number"}, False, "$: expected a number, got a boolean"),
    ({"type": "boolean"}, 0, "$: expected a boolean, got an integer"),
    ({"type": "null"}, "", "$: expected null, got a string"),
    ({"type": "array"}, {}, "$: expected an array, got an object"),
    ({"type": "object"}, [], "$: expected an object, got an array"),
    ({"type": ["string", "null"]}, None, None),
    ({"type": ["null", "string"]}, 1, "$: expected a string or null, got an integer"),
    (
        {"type": ["string", "integer", "null"]},
        [],
        "$: expected a string, an integer or null, got an array",
    ),
    # OpenAPI's nullable adds null to the type.
    ({"type": "string", "nullable": True}, None, None),
    ({"type": "string", "nullable": True}, 1, "$: expected a string or null, got an integer"),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(TYPE_CASES))
def test_type(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


LIBRARY_CASES: list[Case] = [
    # Beyond `type`, the message is the library's best match.
    ({"enum": ["a", "b"]}, "c", "$: 'c' is not one of ['a', 'b']"),
    ({"const": 1}, 2, "$: 1 was expected"),
    ({"required": ["name"]}, {}, "$: 'name' is a required property"),
    ({"minimum": 3}, 1, "$: 1 is less than the minimum of 3"),
    ({"maxLength": 1}, "ab", "$: 'ab' is too long"),
    ({"pattern": "^a"}, "b", "$: 'b' does not match '^a'"),
    (
        {"additionalProperties": False},
        {"x": 1},
        "$: Additional properties are not allowed ('x' was unexpected)",
    ),
    # The path names the failing field, JSONPath style.
    ({"properties": {"city": {"type": "string"}}}, {"city": 5}, "$.city: expected a string, got an integer"),
    ({"items": {"type": "string"}}, ["a", 2], "$[1]: expected a string, got an integer"),
    (
        {"properties": {"two words": {"type": "string"}}},
        {"two words": 1},
        "$['two words']: expected a string, got an integer",
    ),
    (
        {"properties": {"a": {"properties": {"b": {"items": {"type": "null"}}}}}},
        {"a": {"b": [None, 0]}},
        "$.a.b[1]: expected null, got an integer",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "instance", "expected"), params(LIBRARY_CASES))
def test_the_librarys_message_where_it_fails(
    schema: Any, instance: Any, expected: str | None
) -> None:
    assert_case(schema, instance, expected)


class Circle(msgspec.Struct, tag=True):
    radius: float


class Square(msgspec.Struct, tag=True):
    side: float


def test_the_best_match_of_alternatives() -> None:
    # msgspec's tagged union: an anyOf of $refs. The library's best match is
    # the deepest error: in the right alternative when only a field is wrong.
    shapes = msgspec.json.schema(Circle | Square)
    assert check(shapes, {"type": "Square", "side": 2}) is None
    assert (
        check(shapes, {"type": "Square", "side": "x"}) == "$.side: expected a number, got a string"
    )
    assert (
        check(shapes, {"type": "Square", "radius": 2})
        == "$.type: 'Square' is not one of ['Circle']"
    )


def test_boolean_schemas() -> None:
    assert check(True, {"any": "thing"}) is None
    assert check({}, 1) is None
    assert check(False, 1) == "$: False schema does not allow 1"
    # (the library does not say where a False subschema failed)
    assert check({"properties": {"a": False}}, {"a": 1}) == "$: False schema does not allow 1"


# ---------------------------------------------------------------- drafts and $ref

REF_CASES: list[Case] = [
    ({"$defs": {"N": {"type": "string"}}, "$ref": "#/$defs/N"}, "x", None),
    (
        {"$defs": {"N": {"type": "string"}}, "$ref": "#/$defs/N"},
        1,
        "$: expected a string, got an integer",
    ),
    (
        {"definitions": {"a/b": {"type": "integer"}}, "$ref": "#/definitions/a~1b"},
        "x",
        "$: expected an integer, got a string",
    ),
    (
        {"type": "object", "properties": {"again": {"$ref": "#"}}},
        {"again": {"again": 1}},
        "$.again.again: expected an object, got an integer",
    ),
    # Draft 2020-12 (the default): keywords beside $ref apply too.
    (
        {"$defs": {"N": {"type": "string"}}, "$ref": "#/$defs/N", "minLength": 2},
        "x",
        "$: 'x' is too short",
    ),
    (
        {"$schema": DRAFT_2020, "$defs": {"N": {}}, "$ref": "#/$defs/N", "minLength": 2},
        "x",
        "$: 'x' is too short",
    ),
    # Draft-07: keywords beside $ref are ignored, so this fits.
    (
        {"$schema": DRAFT_07, "definitions": {"N": {}}, "$ref": "#/definitions/N", "minLength": 2},
        "x",
        None,
    ),
    # Draft-07's array form of items.
    (
        {"$schema": DRAFT_07, "items": [{"type": "integer"}], "additionalItems": False},
        [1, 2],
        "$: Additional items are not allowed (2 was unexpected)",
    ),
    # What cannot be resolved accepts anything.
    ({"$ref": "#/$defs/Missing"}, 1, None),
    ({"$ref": "other.json#/$defs/Name"}, 1, None),
    ({"$ref": "https://example.com/schema.json"}, 1, None),
    ({"not": {"$ref": "#/$defs/Missing"}}, 1, None),
    # A $ref cycle that never gets deeper into the instance: accepted.
    ({"$ref": "#"}, 1, None),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, 1, None),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "instance", "expected"), params(REF_CASES))
def test_refs_and_drafts(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


def test_nesting_too_deep_to_recurse_into_is_accepted() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}

    def nested(depth: int) -> Any:
        value: Any = "x"
        for _ in range(depth):
            value = [value]
        return value

    assert check(schema, nested(3)) is not None
    assert check(schema, nested(5000)) is None


# ---------------------------------------------------------------- msgspec


class Address(msgspec.Struct):
    city: str
    zip: str | None = None


class Person(msgspec.Struct):
    name: str
    age: int
    address: Address
    previous: Address | None = None
    tags: list[str] = []
    kind: Literal["a", "b"] = "a"


PERSON_SCHEMA = msgspec.json.schema(Person)
GOOD_PERSON = {"name": "Ada", "age": 36, "address": {"city": "London"}}

MSGSPEC_CASES: list[Case] = [
    (PERSON_SCHEMA, GOOD_PERSON, None),
    (PERSON_SCHEMA, {**GOOD_PERSON, "previous": {"city": "Paris", "zip": "75001"}}, None),
    (PERSON_SCHEMA, {"name": "Ada", "age": 36}, "$: 'address' is a required property"),
    (PERSON_SCHEMA, {**GOOD_PERSON, "age": "36"}, "$.age: expected an integer, got a string"),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "address": {"city": 1}},
        "$.address.city: expected a string, got an integer",
    ),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "tags": ["x", 2]},
        "$.tags[1]: expected a string, got an integer",
    ),
    (PERSON_SCHEMA, {**GOOD_PERSON, "kind": "c"}, "$.kind: 'c' is not one of ['a', 'b']"),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(MSGSPEC_CASES))
def test_msgspec_schemas(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


@given(st.builds(Person, address=st.builds(Address), previous=st.none() | st.builds(Address)))
def test_what_msgspec_encodes_fits_its_schema(person: Person) -> None:
    instance = msgspec.json.decode(msgspec.json.encode(person))
    assert check(PERSON_SCHEMA, instance) is None


# ---------------------------------------------------------------- permissiveness

LAX_CASES: list[Case] = [
    # Unknown keywords and formats are ignored.
    ({"type": "string", "format": "email", "x-extra": 1}, "not an email", None),
    # (so a subschema of only a format fits anything: `not` of it fits nothing)
    ({"not": {"format": "email"}}, "x", "$: 'x' should not be valid under {'format': 'email'}"),
    # An invalid schema accepts everything.
    ({"type": 5, "minimum": 3}, 1, None),
    ({"type": ["string", "bogus"]}, 1, None),
    ({"required": "a"}, {}, None),
    ({"minLength": -1}, "", None),
    ({"properties": {"a": 5}}, {"a": 1}, None),
    # So does a pattern Python cannot compile.
    ({"pattern": "(unclosed"}, "x", None),
    ({"pattern": "\\p{L}"}, "x", None),
    ({"patternProperties": {"(": {}}, "additionalProperties": False}, {"(x": 1}, None),
    # And an unknown $schema is read as draft 2020-12.
    ({"$schema": "https://example.com/mine", "type": "string"}, 1, "$: expected a string, got an integer"),
    ({"$schema": 5, "type": "string"}, 1, None),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "instance", "expected"), params(LAX_CASES))
def test_what_cannot_be_checked_accepts(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


ODD_SCHEMAS: list[Any] = [
    None,
    0,
    "string",
    [],
    {"type": None},
    {"$ref": 5},
    {"$ref": "%%%"},
    {"$ref": "#/a/0", "a": [{"type": "string"}]},
    {"pattern": "a{99999999999}"},
    {"pattern": "(" * 1000},
    {"multipleOf": 1e-300},
    {"allOf": [{"allOf": [{"allOf": [True]}]}]},
]


@pytest.mark.parametrize("schema", ODD_SCHEMAS)
def test_odd_schemas_never_raise(schema: Any) -> None:
    args = ArgsSchema(schema)
    instances: list[Any] = [None, True, 0, -1.5, 1e308, 10**40, "", "é" * 100, [1, [2]], {"a": {}}]
    for instance in instances:
        result = args.check(instance)
        assert result is None or isinstance(result, str)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)

KEYWORDS = [
    "type", "enum", "const", "properties", "patternProperties", "additionalProperties", "required",
    "propertyNames", "items", "prefixItems", "additionalItems", "minItems", "uniqueItems",
    "contains", "minLength", "pattern", "minimum", "multipleOf", "allOf", "anyOf", "oneOf", "not",
    "if", "then", "else", "$ref", "$defs", "definitions", "nullable", "format", "$schema",
]  # fmt: skip

keyword_values = st.one_of(
    json_values,
    st.sampled_from(["string", "integer", "null", ["string", "null"], "^a", "(", DRAFT_07]),
    st.sampled_from(["#", "#/$defs/a", "#/definitions/b", "#/properties/a", "#/nope"]),
    st.integers(min_value=-1, max_value=3),
)

schemas = st.recursive(
    st.booleans() | st.dictionaries(st.sampled_from(KEYWORDS), keyword_values, max_size=3),
    lambda children: st.dictionaries(
        st.sampled_from(KEYWORDS),
        children
        | st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "^a", "("]), children, max_size=3)
        | keyword_values,
        max_size=4,
    ),
    max_leaves=20,
)


@given(schemas, json_values)
def test_any_schema_and_instance_never_raise(schema: Any, instance: Any) -> None:
    result = ArgsSchema(schema).check(instance)
    assert result is None or (
        isinstance(result, str) and result.startswith("$") and "\n" not in result
    )


# ---------------------------------------------------------------- messages, reuse, patterns


def test_long_values_are_cut_short() -> None:
    message = check({"enum": ["a"]}, "x" * 1000)
    assert message is not None
    assert len(message) == MAX_MESSAGE
    assert message.startswith("$: 'xxx")
    assert message.endswith("...")
    assert check({"type": "string"}, {"k" * 500: 1}) == "$: expected a string, got an object"
    long_key = check({"additionalProperties": False}, {"k" * 500: 1})
    assert long_key is not None
    assert len(long_key) == MAX_MESSAGE


def test_messages_are_one_line() -> None:
    message = check({"pattern": "^a\nb$"}, "line\nbreak")
    assert message == "$: 'line\\nbreak' does not match '^a\\nb$'"


def test_a_schema_is_compiled_once_and_reused() -> None:
    args = ArgsSchema(PERSON_SCHEMA)
    for _ in range(3):
        assert args.check(GOOD_PERSON) is None
        assert args.check({}) == "$: 'name' is a required property"
    assert check(PERSON_SCHEMA, {}) == args.check({})


def test_schemas_that_may_backtrack_are_told_apart() -> None:
    assert may_backtrack(b'{"properties": {"x": {"pattern": "^(a+)+$"}}}')
    assert may_backtrack(b'{"patternProperties": {"^a": {}}}')
    assert not may_backtrack(msgspec.json.encode(PERSON_SCHEMA))


def test_a_pattern_behind_a_unicode_escape_still_counts() -> None:
    # "pat\u0074ern" is "pattern" once decoded: the text test must not miss it.
    schema = b'{"properties": {"x": {"pat\\u0074ern": "^(a+)+$"}}}'
    assert msgspec.json.decode(schema) == {"properties": {"x": {"pattern": "^(a+)+$"}}}
    assert may_backtrack(schema)


def test_long_arguments_may_stall_whatever_the_schema() -> None:
    # uniqueItems sorts the array in C, holding the GIL: time grows with the instance.
    schema = b'{"type": "object", "properties": {"tags": {"uniqueItems": true}}}'
    assert not may_stall(schema, b'{"tags": ["a", "b"]}')
    long_args = b'{"tags": [' + b'"a",' * (MAX_ARGS_IN_THREAD // 4) + b'"b"]}'
    assert may_stall(schema, long_args)
    assert may_stall(b'{"pattern": "x"}', b"{}")
