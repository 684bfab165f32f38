"""The permissive JSON Schema validator (zotd/protocol/jsonschema.py).

Most tests are tables of (schema, instance, expected): ``None`` where the
instance fits, else the exact one-line message.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zotd.protocol.jsonschema import MAX_DEPTH, MAX_HOPS, Validator, check

Case = tuple[Any, Any, str | None]


def params(cases: list[Case]) -> list[Any]:
    return [pytest.param(*case, id=f"{i}") for i, case in enumerate(cases)]


def assert_case(schema: Any, instance: Any, expected: str | None) -> None:
    assert check(schema, instance) == expected


# ---------------------------------------------------------------- keywords

TYPE_CASES: list[Case] = [
    ({"type": "string"}, "x", None),
    ({"type": "string"}, 3, "$: expected a string, got an integer"),
    ({"type": "integer"}, 3, None),
    ({"type": "integer"}, 3.0, None),
    ({"type": "integer"}, 3.5, "$: expected an integer, got a number"),
    ({"type": "integer"}, True, "$: expected an integer, got a boolean"),
    ({"type": "number"}, 3, None),
    ({"type": "number"}, 2.5, None),
    ({"type": "number"}, False, "$: expected a number, got a boolean"),
    ({"type": "boolean"}, 0, "$: expected a boolean, got an integer"),
    ({"type": "null"}, None, None),
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


ENUM_CASES: list[Case] = [
    ({"enum": ["a", "b"]}, "a", None),
    ({"enum": ["a", "b"]}, "x", "$: 'x' is not one of ['a', 'b']"),
    ({"enum": [1, None]}, 1.0, None),
    ({"enum": [1, None]}, True, "$: True is not one of [1, None]"),
    ({"enum": [[1, {"a": 2}]]}, [1.0, {"a": 2.0}], None),
    ({"enum": [[1, 2]]}, [2, 1], "$: [2, 1] is not one of [[1, 2]]"),
    ({"const": 1}, 1.0, None),
    ({"const": 1}, True, "$: expected 1, got True"),
    ({"const": False}, 0, "$: expected False, got 0"),
    ({"const": None}, None, None),
    ({"const": {"a": [1, "x"]}}, {"a": [1, "x"]}, None),
    (
        {"const": {"a": [1, "x"]}},
        {"a": [1, "y"]},
        "$: expected {'a': [1, 'x']}, got {'a': [1, 'y']}",
    ),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(ENUM_CASES))
def test_enum_and_const(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


PERSON = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}

OBJECT_CASES: list[Case] = [
    (PERSON, {"city": "Oslo", "age": 3}, None),
    (PERSON, {"city": 3}, "$.city: expected a string, got an integer"),
    (PERSON, {"age": 3}, "$: missing required property 'city'"),
    (PERSON, {"city": "Oslo", "colour": "red"}, "$: unexpected property 'colour'"),
    (PERSON, [], "$: expected an object, got an array"),
    # Keywords for objects ignore other types.
    ({"required": ["a"], "properties": {"a": False}}, "not an object", None),
    ({"properties": {"a": False}}, {"a": 1}, "$.a: no value is allowed here"),
    (
        {"additionalProperties": {"type": "integer"}},
        {"a": 1, "b": "x"},
        "$.b: expected an integer, got a string",
    ),
    ({"patternProperties": {"^x-": {"type": "string"}}}, {"x-a": "s", "y": 1}, None),
    (
        {"patternProperties": {"^x-": {"type": "string"}}},
        {"x-a": 1},
        "$['x-a']: expected a string, got an integer",
    ),
    (
        {"properties": {"a": {}}, "patternProperties": {"^x": {}}, "additionalProperties": False},
        {"a": 1, "xy": 2, "b": 3},
        "$: unexpected property 'b'",
    ),
    ({"minProperties": 2}, {"a": 1, "b": 2}, None),
    ({"minProperties": 2}, {"a": 1}, "$: expected at least 2 properties, got 1"),
    ({"maxProperties": 1}, {"a": 1, "b": 2}, "$: expected at most 1 property, got 2"),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ok": 1}, None),
    (
        {"propertyNames": {"pattern": "^[a-z]+$"}},
        {"Bad": 1},
        "$: invalid property name 'Bad': 'Bad' does not match the pattern '^[a-z]+$'",
    ),
    (
        {"properties": {"two words": {"type": "string"}}},
        {"two words": 1},
        "$['two words']: expected a string, got an integer",
    ),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(OBJECT_CASES))
def test_objects(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


TAGS = {"type": "array", "items": {"enum": ["a", "b"]}}

ARRAY_CASES: list[Case] = [
    (TAGS, ["a", "b", "a"], None),
    (TAGS, ["a", "b", "x"], "$[2]: 'x' is not one of ['a', 'b']"),
    (
        {"properties": {"tags": TAGS}},
        {"tags": ["a", "b", "x"]},
        "$.tags[2]: 'x' is not one of ['a', 'b']",
    ),
    ({"items": {"type": "integer"}}, "not an array", None),
    # 2020-12 tuples: prefixItems, then items for the rest.
    ({"prefixItems": [{"type": "integer"}, {"type": "string"}]}, [1, "x", None], None),
    (
        {"prefixItems": [{"type": "integer"}, {"type": "string"}]},
        [1, 2],
        "$[1]: expected a string, got an integer",
    ),
    (
        {"prefixItems": [{"type": "integer"}], "items": False},
        [1, 2],
        "$: expected at most 1 item, got 2",
    ),
    (
        {"prefixItems": [{}], "items": {"type": "string"}},
        [1, "x", 3],
        "$[2]: expected a string, got an integer",
    ),
    # draft-07 tuples: an items list, then additionalItems.
    ({"items": [{"type": "integer"}, {"type": "string"}]}, [1, "x", None], None),
    ({"items": [{"type": "integer"}]}, ["x"], "$[0]: expected an integer, got a string"),
    (
        {"items": [{}, {}], "additionalItems": False},
        [1, 2, 3],
        "$: expected at most 2 items, got 3",
    ),
    (
        {"items": [{}], "additionalItems": {"type": "null"}},
        [1, None, 2],
        "$[2]: expected null, got an integer",
    ),
    ({"minItems": 1}, [], "$: expected at least 1 item, got 0"),
    ({"maxItems": 2}, [1, 2, 3], "$: expected at most 2 items, got 3"),
    ({"uniqueItems": True}, [1, "1", True, [1], {"a": 1}], None),
    ({"uniqueItems": True}, ["a", "b", "a"], "$: items 0 and 2 are both 'a'"),
    ({"uniqueItems": True}, [1, 1.0], "$: items 0 and 1 are both 1.0"),
    ({"uniqueItems": True}, [{"a": [1]}, {"a": [1.0]}], "$: items 0 and 1 are both {'a': [1.0]}"),
    ({"uniqueItems": False}, [1, 1], None),
    ({"contains": {"type": "string"}}, [1, "x"], None),
    ({"contains": {"type": "string"}}, [1, 2], "$: no item matches the 'contains' schema"),
    (
        {"contains": {"type": "string"}, "minContains": 2},
        ["x", 1],
        "$: expected at least 2 items matching 'contains', got 1",
    ),
    (
        {"contains": {"type": "string"}, "maxContains": 1},
        ["x", "y"],
        "$: expected at most 1 item matching 'contains', got 2",
    ),
    ({"contains": {"type": "string"}, "minContains": 0}, [1], None),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(ARRAY_CASES))
def test_arrays(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


STRING_CASES: list[Case] = [
    ({"minLength": 2, "maxLength": 3}, "ab", None),
    ({"minLength": 2}, "a", "$: 'a' is shorter than the minimum length 2"),
    ({"maxLength": 3}, "abcd", "$: 'abcd' is longer than the maximum length 3"),
    # Lengths count code points, not bytes or UTF-16 units.
    ({"maxLength": 1}, "é", None),
    ({"maxLength": 1}, "\U0001f600", None),
    ({"pattern": "^[a-z]+$"}, "abc", None),
    ({"pattern": "^[a-z]+$"}, "abC", "$: 'abC' does not match the pattern '^[a-z]+$'"),
    # re.search: a pattern is not anchored unless it says so.
    ({"pattern": "b"}, "abc", None),
    ({"minLength": 5, "pattern": "x"}, 3, None),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(STRING_CASES))
def test_strings(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


NUMBER_CASES: list[Case] = [
    ({"minimum": 1, "maximum": 10}, 10, None),
    ({"maximum": 10}, 12, "$: 12 is more than the maximum 10"),
    ({"minimum": 1}, 0.5, "$: 0.5 is less than the minimum 1"),
    ({"exclusiveMinimum": 1}, 1.5, None),
    ({"exclusiveMinimum": 1}, 1, "$: 1 is not more than the exclusive minimum 1"),
    ({"exclusiveMaximum": 10}, 10.0, "$: 10.0 is not less than the exclusive maximum 10"),
    ({"multipleOf": 3}, 9, None),
    ({"multipleOf": 3}, 7, "$: 7 is not a multiple of 3"),
    ({"multipleOf": 0.1}, 0.3, None),
    ({"multipleOf": 0.01}, 19.99, None),
    ({"multipleOf": 0.1}, 0.35, "$: 0.35 is not a multiple of 0.1"),
    ({"multipleOf": 2}, 10**30, None),
    # Booleans are not numbers; other types are not checked here.
    ({"maximum": 0}, True, None),
    ({"maximum": 0}, "5", None),
    # draft-04's boolean exclusiveMaximum is ignored; maximum still holds.
    ({"maximum": 5, "exclusiveMaximum": True}, 5, None),
    ({"maximum": 5, "exclusiveMaximum": True}, 6, "$: 6 is more than the maximum 5"),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(NUMBER_CASES))
def test_numbers(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


OPTIONAL_INT = {"anyOf": [{"type": "integer"}, {"type": "null"}]}

COMBINATOR_CASES: list[Case] = [
    ({"allOf": [{"type": "integer"}, {"minimum": 3}]}, 4, None),
    ({"allOf": [{"type": "integer"}, {"minimum": 3}]}, 2, "$: 2 is less than the minimum 3"),
    (OPTIONAL_INT, None, None),
    (OPTIONAL_INT, 3, None),
    # Alternatives that each want another type are named together...
    (OPTIONAL_INT, "x", "$: expected an integer or null, got a string"),
    # ...else the alternative that got furthest speaks.
    (
        {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
        3,
        "$: 3 is less than the minimum 5",
    ),
    (
        {"anyOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}}}]},
        {"b": 1},
        "$.b: expected a string, got an integer",
    ),
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "x", None),
    (
        {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        None,
        "$: expected an integer or a string, got null",
    ),
    (
        {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
        3,
        "$: matches both 'oneOf' alternatives 0 and 1",
    ),
    ({"not": {"type": "null"}}, 0, None),
    ({"not": {"type": "null"}}, None, "$: None is not allowed (it matches the 'not' schema)"),
    ({"not": {}}, 1, "$: 1 is not allowed (it matches the 'not' schema)"),
    # if/then/else
    (
        {
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["x"]},
            "else": {"required": ["y"]},
        },
        {"kind": "a"},
        "$: missing required property 'x'",
    ),
    (
        {
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["x"]},
            "else": {"required": ["y"]},
        },
        {"kind": "b"},
        "$: missing required property 'y'",
    ),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, "ab", None),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, 5, None),
    ({"then": False}, 1, None),  # then without if means nothing
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(COMBINATOR_CASES))
def test_combinators(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


def test_a_wrong_tag_gives_way_to_the_right_alternatives_error() -> None:
    # A tagged union: the alternative whose tag matches says what is wrong.
    schema = {
        "anyOf": [
            {
                "properties": {"type": {"enum": ["A"]}, "x": {"type": "integer"}},
                "required": ["type", "x"],
            },
            {
                "properties": {"type": {"enum": ["B"]}, "y": {"type": "string"}},
                "required": ["type", "y"],
            },
        ]
    }
    assert check(schema, {"type": "B", "x": 1}) == "$: missing required property 'y'"
    assert check(schema, {"type": "A", "x": "1"}) == "$.x: expected an integer, got a string"


# ---------------------------------------------------------------- boolean schemas


@pytest.mark.parametrize("instance", [None, 0, "x", [], {}, [{"a": None}]])
def test_boolean_schemas(instance: Any) -> None:
    assert check(True, instance) is None
    assert check({}, instance) is None
    assert check(False, instance) == "$: no value is allowed here"
    assert check({"properties": {"a": False}}, {"a": instance}) == "$.a: no value is allowed here"
    assert check({"items": False}, [instance]) == "$: expected at most 0 items, got 1"


# ---------------------------------------------------------------- $ref

DEFS = {
    "$defs": {"Name": {"type": "string"}, "a/b": {"type": "integer"}, "c~d": {"type": "null"}},
    "definitions": {"Old": {"type": "boolean"}},
    "properties": {"name": {"$ref": "#/$defs/Name"}},
}

REF_CASES: list[Case] = [
    ({**DEFS, "$ref": "#/$defs/Name"}, "x", None),
    ({**DEFS, "$ref": "#/$defs/Name"}, 1, "$: expected a string, got an integer"),
    ({**DEFS, "$ref": "#/definitions/Old"}, 1, "$: expected a boolean, got an integer"),
    ({**DEFS, "$ref": "#/$defs/a~1b"}, "x", "$: expected an integer, got a string"),
    ({**DEFS, "$ref": "#/$defs/c~0d"}, "x", "$: expected null, got a string"),
    ({**DEFS, "$ref": "#/$defs/c%7Ed"}, "x", "$: expected null, got a string"),
    ({**DEFS, "$ref": "#/properties/name"}, 1, "$: expected a string, got an integer"),
    (
        {**DEFS, "$ref": "#/$defs/Name", "minLength": 2},
        "x",
        "$: 'x' is shorter than the minimum length 2",
    ),
    (
        {"allOf": [{"type": "string"}], "$ref": "#/allOf/0"},
        1,
        "$: expected a string, got an integer",
    ),
    (
        {"type": "object", "properties": {"again": {"$ref": "#"}}},
        {"again": {"again": 1}},
        "$.again.again: expected an object, got an integer",
    ),
    # What cannot be resolved accepts anything.
    ({**DEFS, "$ref": "#/$defs/Missing"}, 1, None),
    ({"$ref": "other.json#/$defs/Name"}, 1, None),
    ({"$ref": "#anchor"}, 1, None),
    ({"$ref": "#/$defs"}, 1, None),
    # A $ref that never gets deeper into the instance is a cycle: accepted.
    ({"$ref": "#"}, 1, None),
    (
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        1,
        None,
    ),
    ({"type": "string", "anyOf": [{"$ref": "#"}]}, 1, "$: expected a string, got an integer"),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(REF_CASES))
def test_refs(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


TREE = {
    "$ref": "#/$defs/Tree",
    "$defs": {
        "Tree": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
            },
            "required": ["value"],
        }
    },
}


def tree(depth: int, leaf: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"value": leaf}
    for _ in range(depth):
        node = {"value": 0, "children": [{"value": 1}, node]}
    return node


def test_recursive_ref() -> None:
    validator = Validator(TREE)
    assert validator.check(tree(10, 5)) is None
    assert (
        validator.check(tree(2, "x"))
        == "$.children[1].children[1].value: expected an integer, got a string"
    )
    # Deep paths keep their ends.
    assert (
        validator.check(tree(10, "x"))
        == "$.children[1].children..children[1].value: expected an integer, got a string"
    )
    assert (
        validator.check({"value": 0, "children": [{}]})
        == "$.children[0]: missing required property 'value'"
    )


def test_nesting_past_max_depth_is_accepted() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}

    def nested(depth: int) -> Any:
        value: Any = "x"
        for _ in range(depth):
            value = [value]
        return value

    validator = Validator(schema)
    assert validator.check(nested(MAX_DEPTH)) is not None
    assert validator.check(nested(MAX_DEPTH + 1)) is None
    assert validator.check(nested(5000)) is None


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


class Circle(msgspec.Struct, tag=True):
    radius: float


class Square(msgspec.Struct, tag=True):
    side: float


PERSON_SCHEMA = msgspec.json.schema(Person)
GOOD_PERSON = {"name": "Ada", "age": 36, "address": {"city": "London"}}

MSGSPEC_CASES: list[Case] = [
    (PERSON_SCHEMA, GOOD_PERSON, None),
    (PERSON_SCHEMA, {**GOOD_PERSON, "previous": None, "tags": ["x"], "kind": "b"}, None),
    (PERSON_SCHEMA, {**GOOD_PERSON, "previous": {"city": "Paris", "zip": "75001"}}, None),
    (PERSON_SCHEMA, {**GOOD_PERSON, "age": 36.0}, None),
    (PERSON_SCHEMA, {"name": "Ada", "age": 36}, "$: missing required property 'address'"),
    (PERSON_SCHEMA, {**GOOD_PERSON, "age": "36"}, "$.age: expected an integer, got a string"),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "address": {"city": 1}},
        "$.address.city: expected a string, got an integer",
    ),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "address": {"city": "x", "zip": 1}},
        "$.address.zip: expected a string or null, got an integer",
    ),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "previous": 1},
        "$.previous: expected an object or null, got an integer",
    ),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "previous": {}},
        "$.previous: missing required property 'city'",
    ),
    (
        PERSON_SCHEMA,
        {**GOOD_PERSON, "tags": ["x", 2]},
        "$.tags[1]: expected a string, got an integer",
    ),
    (PERSON_SCHEMA, {**GOOD_PERSON, "kind": "c"}, "$.kind: 'c' is not one of ['a', 'b']"),
    (msgspec.json.schema(Circle | Square), {"type": "Square", "side": 2}, None),
    (
        msgspec.json.schema(Circle | Square),
        {"type": "Square", "radius": 2},
        "$: missing required property 'side'",
    ),
    (msgspec.json.schema(tuple[int, str]), [1, "x"], None),
    (msgspec.json.schema(tuple[int, str]), [1, "x", 2], "$: expected at most 2 items, got 3"),
    (
        msgspec.json.schema(dict[str, int]),
        {"a": 1, "b": None},
        "$.b: expected an integer, got null",
    ),
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
    ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, None),
    # Malformed keywords are ignored; the rest still applies.
    ({"type": 5, "minimum": 3}, 1, "$: 1 is less than the minimum 3"),
    ({"type": ["string", "bogus"]}, 1, None),
    ({"type": []}, 1, None),
    ({"required": "a"}, {}, None),
    ({"required": ["a", 5]}, {}, None),
    ({"minLength": -1, "maxLength": "3"}, "abcd", None),
    ({"minItems": 1.5}, [], None),
    ({"maxItems": 1.0}, [1, 2], "$: expected at most 1 item, got 2"),
    ({"multipleOf": 0}, 3, None),
    ({"pattern": "(unclosed"}, "x", None),
    ({"pattern": "\\p{L}"}, "x", None),
    ({"enum": []}, 1, None),
    ({"enum": "ab"}, "c", None),
    ({"properties": {"a": 5}}, {"a": 1}, None),
    ({"allOf": [{"type": "string"}, 5]}, 1, None),
    ({"anyOf": []}, 1, None),
    ({"not": 5}, 1, None),
    ({"items": 5, "prefixItems": "x"}, [1], None),
    # What is not understood never makes a property unexpected...
    ({"patternProperties": {"(": {}}, "additionalProperties": False}, {"(x": 1}, None),
    ({"properties": [], "additionalProperties": False}, {"a": 1}, None),
    # ...nor an item.
    ({"prefixItems": [5], "items": False}, [1, 2], None),
    # A lax schema's passing is not trusted by not, oneOf or if.
    ({"not": {"format": "email"}}, "x", None),
    ({"not": {"$ref": "#/$defs/Missing"}}, "x", None),
    (
        {
            "oneOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time"},
            ]
        },
        "x",
        None,
    ),
    ({"oneOf": [{"format": "date"}, {"type": "integer"}]}, 1, None),
    # (but what fails, fails)
    (
        {"oneOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        1,
        "$: expected a string or null, got an integer",
    ),
    ({"if": {"format": "date"}, "then": {"maxLength": 1}, "else": {"minLength": 1}}, "ab", None),
    (
        {"if": {"format": "date"}, "then": {"maxLength": 1}, "else": {"minLength": 5}},
        "ab",
        "$: 'ab' is longer than the maximum length 1",
    ),
    ({"contains": {"format": "date"}, "maxContains": 1}, ["a", "b"], None),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), params(LAX_CASES))
def test_what_is_not_understood_accepts(schema: Any, instance: Any, expected: str | None) -> None:
    assert_case(schema, instance, expected)


ODD_SCHEMAS: list[Any] = [
    None,
    0,
    1,
    "string",
    [],
    [{"type": "string"}],
    {"type": None},
    {"properties": None, "items": None, "allOf": None, "$ref": None},
    {"$ref": 5},
    {"$ref": "#/$defs/0/1/~2"},
    {"$ref": "#/a/b", "a": [1, 2]},
    {"$ref": "#/a/0", "a": [{"type": "string"}]},
    {"$ref": "%%%"},
    {"if": 1, "then": 2, "else": 3},
    {"pattern": "a{99999999999}"},
    {"pattern": "(" * 1000},
    {"patternProperties": {"[": 5}},
    {"minimum": "0", "maximum": [], "exclusiveMinimum": {}, "multipleOf": -1},
    {"multipleOf": 1e-300},
    {"multipleOf": 1e300},
    {"enum": [{"a": [1, [2, {"b": None}]]}]},
    {"uniqueItems": "yes", "contains": 5, "minContains": "x"},
    {"propertyNames": 5, "minProperties": None},
    {"const": [[[[[]]]]]},
    {"allOf": [{"allOf": [{"allOf": [True]}]}]},
    {"not": {"not": {"not": {}}}},
]

ODD_INSTANCES: list[Any] = [
    None,
    True,
    0,
    -1.5,
    1e308,
    10**40,
    "",
    "é" * 100,
    [],
    [1, [2]],
    {},
    {"a": {"b": []}},
]


@pytest.mark.parametrize("schema", ODD_SCHEMAS)
def test_odd_schemas_never_raise(schema: Any) -> None:
    validator = Validator(schema)
    for instance in ODD_INSTANCES:
        result = validator.check(instance)
        assert result is None or isinstance(result, str)


def test_in_place_nesting_past_max_hops_is_accepted() -> None:
    def wrapped(depth: int) -> Any:
        schema: Any = {"type": "integer"}
        for _ in range(depth):
            schema = {"allOf": [schema]}
        return schema

    assert check(wrapped(MAX_HOPS), "x") == "$: expected an integer, got a string"
    assert check(wrapped(MAX_HOPS + 1), "x") is None
    assert check(wrapped(5000), "x") is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)

KEYWORDS = [
    "type", "enum", "const", "properties", "patternProperties", "additionalProperties", "required",
    "minProperties", "maxProperties", "propertyNames", "items", "prefixItems", "additionalItems",
    "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "minLength",
    "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs",
    "definitions", "nullable", "format", "title",
]  # fmt: skip

keyword_values = st.one_of(
    json_values,
    st.sampled_from(
        ["string", "integer", "null", "object", "array", ["string", "null"], "^a", "("]
    ),
    st.sampled_from(["#", "#/$defs/a", "#/definitions/b", "#/properties/a", "#/items", "#/nope"]),
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
    result = Validator(schema).check(instance)
    assert result is None or (
        isinstance(result, str) and result.startswith("$") and "\n" not in result
    )


# ---------------------------------------------------------------- messages and reuse


def test_long_values_are_cut_short() -> None:
    message = check({"enum": ["a"]}, "x" * 1000)
    assert message is not None
    assert len(message) < 120
    assert message.startswith("$: 'xxx")
    assert "..." in message
    huge = check({"type": "string"}, {"k" * 500: 1})
    assert huge == "$: expected a string, got an object"
    long_key = check({"additionalProperties": False}, {"k" * 500: 1})
    assert long_key is not None
    assert len(long_key) < 120


def test_messages_are_one_line() -> None:
    message = check({"pattern": "^a\nb$"}, "line\nbreak")
    assert message == "$: 'line\\nbreak' does not match the pattern '^a\\nb$'"


def test_a_validator_is_reused() -> None:
    validator = Validator(PERSON_SCHEMA)
    for _ in range(3):
        assert validator.check(GOOD_PERSON) is None
        assert validator.check({}) == "$: missing required property 'name'"
    assert check(PERSON_SCHEMA, {}) == validator.check({})
