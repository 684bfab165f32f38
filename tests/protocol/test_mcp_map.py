"""MCP's tools, prompts and results as zot's frames (zotd.protocol.mcp_map)."""

from __future__ import annotations

import mcp_types as mt
import msgspec
import pytest

from zotd.protocol import extension as ep
from zotd.protocol import mcp_map


def _prompt(*args: tuple[str, bool]) -> mt.Prompt:
    return mt.Prompt(
        name="review",
        description="Review a file",
        arguments=[mt.PromptArgument(name=n, required=r) for n, r in args],
    )


def test_a_tool_keeps_its_schemas_title_and_annotations() -> None:
    tool = mt.Tool(
        name="forecast",
        title="Forecast",
        description="The weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"temp": {"type": "number"}}},
        annotations=mt.ToolAnnotations(read_only_hint=True),
    )
    frame = mcp_map.register_tool(tool)
    assert frame.name == "forecast"
    assert frame.description == "The weather"
    assert frame.title == "Forecast"
    assert msgspec.json.decode(frame.schema) == tool.input_schema
    assert not isinstance(frame.output_schema, msgspec.UnsetType)
    assert msgspec.json.decode(frame.output_schema) == tool.output_schema
    assert not isinstance(frame.annotations, msgspec.UnsetType)
    assert msgspec.json.decode(frame.annotations) == {"readOnlyHint": True}


def test_a_tool_without_output_schema_or_description() -> None:
    frame = mcp_map.register_tool(mt.Tool(name="t", input_schema={"type": "object"}))
    assert frame.description == ""
    assert frame.output_schema is msgspec.UNSET
    assert frame.annotations is msgspec.UNSET


def test_text_and_images_are_blocks_the_rest_placeholders() -> None:
    result = mt.CallToolResult(
        content=[
            mt.TextContent(text="hello"),
            mt.ImageContent(data="aGk=", mime_type="image/png"),
            mt.AudioContent(data="AAAA", mime_type="audio/wav"),
            mt.ResourceLink(name="notes", uri="file:///notes.txt"),
            mt.EmbeddedResource(
                resource=mt.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            mt.EmbeddedResource(
                resource=mt.BlobResourceContents(
                    uri="file:///b.bin", blob="AAAA", mime_type="application/zip"
                )
            ),
        ],
        is_error=True,
    )
    frame = mcp_map.tool_result("7", result)
    assert frame.id == "7"
    assert frame.is_error
    assert frame.content == [
        ep.TextBlock("hello"),
        ep.ImageBlock(mime_type="image/png", data="aGk="),
        ep.TextBlock("[audio content: audio/wav, about 3 bytes]"),
        ep.TextBlock("[resource link: notes <file:///notes.txt>]"),
        ep.TextBlock("[resource <file:///a.txt>]\ninside"),
        ep.TextBlock("[resource <file:///b.bin>: application/zip, binary]"),
    ]
    assert frame.structured_content is msgspec.UNSET


def test_structured_content_carries_over_and_fills_empty_content() -> None:
    frame = mcp_map.tool_result("1", mt.CallToolResult(content=[], structured_content={"temp": 21}))
    assert not isinstance(frame.structured_content, msgspec.UnsetType)
    assert msgspec.json.decode(frame.structured_content) == {"temp": 21}
    assert frame.content == [ep.TextBlock('{"temp":21}')]
    assert not frame.is_error


def test_a_prompt_is_a_command_that_says_how_to_give_its_arguments() -> None:
    frame = mcp_map.register_command(_prompt(("file", True), ("focus", False)))
    assert frame.name == "review"
    assert frame.description == "Review a file (/review file=... [focus=...])"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("file=a.py", {"file": "a.py"}),
        ("file=a.py focus=speed", {"file": "a.py", "focus": "speed"}),
        ('focus="two words" file=a.py', {"file": "a.py", "focus": "two words"}),
        ("a.py", {"file": "a.py"}),
        ("a.py all of it", {"file": "a.py", "focus": "all of it"}),
    ],
)
def test_prompt_arguments_by_name_or_in_order(text: str, expected: dict[str, str]) -> None:
    assert mcp_map.prompt_arguments(_prompt(("file", True), ("focus", False)), text) == expected


def test_a_single_argument_takes_the_whole_text() -> None:
    prompt = _prompt(("question", True))
    assert mcp_map.prompt_arguments(prompt, ' why is "x" = y? ') == {"question": 'why is "x" = y?'}
    assert mcp_map.prompt_arguments(prompt, "question=why") == {"question": "why"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "/review needs file: /review file=... [focus=...]"),
        ("colour=red", "/review has no argument 'colour': /review file=... [focus=...]"),
        ("file=a file=b", "/review: file is given twice"),
        ('file="unclosed', "/review: No closing quotation: /review file=... [focus=...]"),
    ],
)
def test_bad_prompt_arguments_say_what_it_takes(text: str, message: str) -> None:
    with pytest.raises(mcp_map.PromptArgumentsError) as err:
        mcp_map.prompt_arguments(_prompt(("file", True), ("focus", False)), text)
    assert str(err.value) == message


def test_too_many_words_for_a_prompt_without_arguments() -> None:
    with pytest.raises(mcp_map.PromptArgumentsError, match="takes no arguments"):
        mcp_map.prompt_arguments(_prompt(), "anything")


def test_a_prompt_result_is_a_prompt_action() -> None:
    result = mt.GetPromptResult(
        messages=[
            mt.PromptMessage(role="user", content=mt.TextContent(text="Review a.py.")),
            mt.PromptMessage(
                role="user", content=mt.ImageContent(data="aGk=", mime_type="image/png")
            ),
        ]
    )
    frame = mcp_map.command_response("3", result)
    assert (frame.id, frame.action) == ("3", "prompt")
    assert frame.prompt == "Review a.py.\n\n[image content]"


def test_progress() -> None:
    frame = mcp_map.tool_progress("5", 2, 3, None)
    assert (frame.id, frame.progress, frame.total, frame.message) == ("5", 2, 3, "")
