"""``zot mcp``'s mapping of zot tools and commands to MCP: plain functions."""

from __future__ import annotations

import msgspec
from mcp import types as mt

from zotd.integrations.mcp_mapping import (
    ARGS,
    command_text,
    prompt_of,
    structured_of,
    tool_of,
)
from zotd.protocol import agent as ap
from zotd.protocol.extension import TextBlock


def test_a_tool_keeps_its_output_schema_title_and_annotations() -> None:
    output = {"type": "object", "properties": {"n": {"type": "number"}}}
    tool = tool_of(
        ap.ToolInfo(
            name="count",
            description="Counts",
            schema={"properties": {}},
            extension="x",
            output_schema=output,
            title="Counter",
            annotations={"readOnlyHint": True, "idempotentHint": True},
        )
    )
    assert tool.input_schema == {"type": "object", "properties": {}}
    assert tool.output_schema == output
    assert tool.title == "Counter"
    assert tool.annotations == mt.ToolAnnotations(read_only_hint=True, idempotent_hint=True)


def test_a_plain_zot_tool_has_no_metadata_and_bad_annotations_are_left_out() -> None:
    plain = tool_of(ap.ToolInfo(name="t", description="d", schema=[], extension="x"))
    assert (plain.input_schema, plain.output_schema, plain.title, plain.annotations) == (
        {"type": "object"},
        None,
        None,
        None,
    )
    odd = tool_of(
        ap.ToolInfo(
            name="t", description="d", schema={}, extension="x", annotations={"readOnlyHint": []}
        )
    )
    assert odd.annotations is None


def test_a_hosted_mcp_prompt_keeps_its_arguments() -> None:
    prompt = prompt_of(
        ap.CommandInfo(
            name="review", description="Review a file (/review file=... [focus=...])", extension="x"
        )
    )
    assert prompt.description == "Review a file"
    assert [(a.name, a.required) for a in prompt.arguments or []] == [
        ("file", True),
        ("focus", False),
    ]


def test_other_commands_take_the_command_line() -> None:
    for description in ("Say hi", "Say hi (/other a=...)", "(see /docs)"):
        prompt = prompt_of(ap.CommandInfo(name="hi", description=description, extension="x"))
        assert prompt.description == description
        assert [a.name for a in prompt.arguments or []] == [ARGS]


def test_command_text_quotes_named_arguments() -> None:
    assert command_text(None) == ""
    assert command_text({ARGS: "a b"}) == "a b"
    assert command_text({"file": "my notes.md", "focus": "speed"}) == (
        "file='my notes.md' focus=speed"
    )
    assert command_text({"file": "a.py", ARGS: "rest"}) == "file=a.py rest"


def test_structured_content_only_as_an_object() -> None:
    def data(raw: bytes | None) -> ap.CallData:
        structured = msgspec.Raw(raw) if raw is not None else msgspec.UNSET
        return ap.CallData(extension="x", content=[TextBlock("t")], structured_content=structured)

    assert structured_of(data(b'{"n": 1}')) == {"n": 1}
    assert structured_of(data(b"[1, 2]")) is None
    assert structured_of(data(None)) is None
