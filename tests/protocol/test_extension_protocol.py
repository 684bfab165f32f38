"""The extension protocol (zotd/protocol/extension.py) and frame classification (frames.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zotd.protocol import extension as ep
from zotd.protocol.frames import FrameError, UnknownFrame, is_json_object, tags_of


def line(text: str) -> bytes:
    """A reference example as one wire line (examples wrap over several lines)."""
    return text.replace("\n", " ").encode()


def decode(text: str) -> Any:
    return ep.decode_extension_frame(line(text))


def decode_error(raw: bytes) -> FrameError:
    with pytest.raises(FrameError) as info:
        ep.decode_extension_frame(raw)
    return info.value


# --- extension -> host: the reference's examples, verbatim -------------------


def test_reference_hello() -> None:
    frame = decode("""{"type":"hello","name":"weather","version":"1.0.0",
 "capabilities":["commands","tools"]}""")
    assert frame == ep.Hello(name="weather", version="1.0.0", capabilities=["commands", "tools"])


def test_reference_quick_start_hello() -> None:
    frame = decode(
        '{"type":"hello","name":"hello-py","version":"1.0.0","capabilities":["commands"]}'
    )
    assert frame == ep.Hello(name="hello-py", version="1.0.0", capabilities=["commands"])


def test_reference_register_command() -> None:
    frame = decode("""{"type":"register_command","name":"weather",
 "description":"current weather for a city"}""")
    assert frame == ep.RegisterCommand(name="weather", description="current weather for a city")


def test_reference_quick_start_register_command() -> None:
    frame = decode('{"type":"register_command","name":"hellopy","description":"say hi (python)"}')
    assert frame == ep.RegisterCommand(name="hellopy", description="say hi (python)")


REGISTER_TOOL = """{"type":"register_tool","name":"weather",
 "description":"Get the current weather for a city.",
 "schema":{
   "type":"object",
   "properties":{"city":{"type":"string"}},
   "required":["city"]
 }}"""


def test_reference_register_tool() -> None:
    frame = decode(REGISTER_TOOL)
    assert isinstance(frame, ep.RegisterTool)
    assert frame.name == "weather"
    assert frame.description == "Get the current weather for a city."
    assert json.loads(bytes(frame.schema)) == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }


def test_register_tool_schema_is_kept_raw_byte_for_byte() -> None:
    frame = decode(REGISTER_TOOL)
    assert isinstance(frame, ep.RegisterTool)
    raw = bytes(frame.schema)
    assert raw.startswith(b"{")
    assert raw in line(REGISTER_TOOL)


def test_reference_ready() -> None:
    assert decode('{"type":"ready"}') == ep.Ready()


def test_reference_tool_result() -> None:
    frame = decode("""{"type":"tool_result","id":"...",
 "content":[{"type":"text","text":"Berlin: 16°C, fog"}]}""")
    assert frame == ep.ToolResult(id="...", content=[ep.TextBlock("Berlin: 16°C, fog")])
    assert isinstance(frame, ep.ToolResult)
    assert frame.is_error is False


def test_reference_subscribe() -> None:
    frame = decode("""{"type":"subscribe",
 "events":["session_start","turn_start","tool_call","turn_end","assistant_message"],
 "intercept":["tool_call"]}""")
    assert frame == ep.Subscribe(
        events=["session_start", "turn_start", "tool_call", "turn_end", "assistant_message"],
        intercept=["tool_call"],
    )
    assert isinstance(frame, ep.Subscribe)
    assert set(frame.events) < ep.EVENTS
    assert set(frame.intercept) == {"tool_call"} <= ep.INTERCEPTABLE


def test_reference_event_intercept_response() -> None:
    frame = decode("""{"type":"event_intercept_response","id":"...",
 "block":true,"reason":"refused: matches danger pattern \\"rm -rf\\""}""")
    assert frame == ep.EventInterceptResponse(
        id="...", block=True, reason='refused: matches danger pattern "rm -rf"'
    )


def test_reference_command_response() -> None:
    frame = decode("""{"type":"command_response","id":"...","action":"prompt",
 "prompt":"Show today's weather for Berlin in one line."}""")
    assert frame == ep.CommandResponse(
        id="...", action="prompt", prompt="Show today's weather for Berlin in one line."
    )
    assert isinstance(frame, ep.CommandResponse)
    assert frame.action in ep.ACTIONS


def test_reference_notify() -> None:
    frame = decode("""{"type":"notify","level":"info",
 "message":"refreshed cache (12 entries)"}""")
    assert frame == ep.Notify(level="info", message="refreshed cache (12 entries)")
    assert isinstance(frame, ep.Notify)
    assert frame.level in ep.LEVELS


def test_reference_shutdown_ack() -> None:
    assert decode('{"type":"shutdown_ack"}') == ep.ShutdownAck()


# --- defaults and variants ----------------------------------------------------


def test_hello_defaults() -> None:
    frame = decode('{"type":"hello","name":"x"}')
    assert frame == ep.Hello(name="x", version="", capabilities=[])


def test_register_command_default_description() -> None:
    assert decode('{"type":"register_command","name":"c"}') == ep.RegisterCommand(
        name="c", description=""
    )


def test_register_tool_default_schema_is_empty_object() -> None:
    frame = decode('{"type":"register_tool","name":"t"}')
    assert isinstance(frame, ep.RegisterTool)
    assert frame.description == ""
    assert bytes(frame.schema) == b"{}"


def test_command_response_with_only_id_and_action() -> None:
    frame = decode('{"type":"command_response","id":"7","action":"display"}')
    assert frame == ep.CommandResponse(
        id="7", action="display", prompt="", insert="", display="", error=""
    )


def test_command_response_with_only_id_is_noop() -> None:
    frame = decode('{"type":"command_response","id":1}')
    assert isinstance(frame, ep.CommandResponse)
    assert frame.action == "noop"


@pytest.mark.parametrize("action", sorted(ep.ACTIONS))
def test_command_response_actions(action: str) -> None:
    frame = decode(f'{{"type":"command_response","id":"i","action":"{action}"}}')
    assert isinstance(frame, ep.CommandResponse)
    assert frame.action == action


def test_command_response_with_insert_and_error() -> None:
    frame = decode(
        '{"type":"command_response","id":"i","action":"insert","insert":"x","error":"boom"}'
    )
    assert frame == ep.CommandResponse(id="i", action="insert", insert="x", error="boom")


def test_integer_ids_are_kept_as_integers() -> None:
    frame = decode('{"type":"tool_result","id":42}')
    assert isinstance(frame, ep.ToolResult)
    assert frame.id == 42


def test_tool_result_defaults() -> None:
    assert decode('{"type":"tool_result","id":"1"}') == ep.ToolResult(
        id="1", content=[], is_error=False
    )


def test_tool_result_with_text_and_image_blocks() -> None:
    frame = decode(
        '{"type":"tool_result","id":"1","is_error":true,"content":['
        '{"type":"text","text":"a chart"},'
        '{"type":"image","mime_type":"image/png","data":"iVBORw0KGgo="}]}'
    )
    assert frame == ep.ToolResult(
        id="1",
        content=[ep.TextBlock("a chart"), ep.ImageBlock("image/png", "iVBORw0KGgo=")],
        is_error=True,
    )


def test_subscribe_defaults() -> None:
    assert decode('{"type":"subscribe"}') == ep.Subscribe(events=[], intercept=[])


def test_event_intercept_response_defaults_to_allow() -> None:
    assert decode('{"type":"event_intercept_response","id":"1"}') == ep.EventInterceptResponse(
        id="1", block=False, reason=""
    )


def test_notify_defaults() -> None:
    assert decode('{"type":"notify"}') == ep.Notify(message="", level="info")


def test_unknown_fields_are_ignored() -> None:
    frame = decode('{"type":"hello","name":"x","future":{"nested":[1,2]}}')
    assert frame == ep.Hello(name="x")


def test_whitespace_around_the_object_is_accepted() -> None:
    assert ep.decode_extension_frame(b'  {"type":"ready"}\r') == ep.Ready()


# --- unknown types ------------------------------------------------------------


def test_unknown_type_is_an_unknown_frame_with_its_id() -> None:
    frame = decode('{"type":"register_widget","id":"w1","name":"x"}')
    assert frame == UnknownFrame(type="register_widget", id="w1")


def test_unknown_type_without_id() -> None:
    assert decode('{"type":"future_thing"}') == UnknownFrame(type="future_thing", id=None)


def test_host_frame_type_from_an_extension_is_unknown() -> None:
    # tool_call is a host -> extension frame; an extension must not send it.
    frame = decode('{"type":"tool_call","id":"3","name":"w"}')
    assert frame == UnknownFrame(type="tool_call", id="3")


# --- errors -------------------------------------------------------------------


def test_invalid_json_is_a_frame_error() -> None:
    exc = decode_error(b"not json")
    assert exc.message.startswith("invalid JSON: ")
    assert exc.id is None
    assert exc.type is None
    assert str(exc) == exc.message


def test_empty_line_is_invalid_json() -> None:
    exc = decode_error(b"")
    assert exc.message.startswith("invalid JSON: ")


def test_truncated_object_is_invalid_json() -> None:
    exc = decode_error(b'{"type":"hello","name":"a"')
    assert exc.message.startswith("invalid JSON: ")


def test_trailing_garbage_is_invalid_json() -> None:
    exc = decode_error(b'{"type":"ready"} x')
    assert exc.message.startswith("invalid JSON: ")
    assert "trailing characters" in exc.message


def test_invalid_utf8_is_invalid_json() -> None:
    exc = decode_error(b'{"type":"hello","name":"\xff"}')
    assert exc.message.startswith("invalid JSON: ")


@pytest.mark.parametrize("raw", [b"[1,2]", b'"hello"', b"42", b"null", b"true"])
def test_non_object_is_a_frame_error(raw: bytes) -> None:
    exc = decode_error(raw)
    assert exc.message == "a frame must be a JSON object"
    assert exc.id is None


def test_missing_type_is_a_frame_error_with_the_id() -> None:
    exc = decode_error(b'{"id":"abc","name":"x"}')
    assert exc.message == "missing or non-string `type`"
    assert exc.id == "abc"
    assert exc.type is None


def test_non_string_type_is_a_frame_error() -> None:
    exc = decode_error(b'{"type":5,"id":9}')
    assert exc.message == "missing or non-string `type`"
    assert exc.id == 9


def test_missing_required_field_names_the_frame_and_field() -> None:
    exc = decode_error(b'{"type":"hello"}')
    assert exc.message == "bad `hello` frame: Object missing required field `name`"
    assert exc.type == "hello"
    assert exc.id is None


def test_missing_id_of_a_reply_is_a_frame_error() -> None:
    exc = decode_error(b'{"type":"tool_result","content":[]}')
    assert exc.message == "bad `tool_result` frame: Object missing required field `id`"
    assert exc.id is None


def test_wrong_field_type_keeps_the_id() -> None:
    exc = decode_error(b'{"type":"tool_result","id":"t1","is_error":"yes"}')
    assert exc.id == "t1"
    assert exc.type == "tool_result"
    assert exc.message == "bad `tool_result` frame: Expected `bool`, got `str` - at `$.is_error`"


def test_wrong_id_type_is_reported_with_that_id() -> None:
    exc = decode_error(b'{"type":"command_response","id":[1],"action":"noop"}')
    assert exc.id == [1]
    assert exc.type == "command_response"
    assert "`$.id`" in exc.message


def test_bad_content_block_names_its_position() -> None:
    exc = decode_error(b'{"type":"tool_result","id":"t","content":[{"type":"video"}]}')
    assert exc.id == "t"
    assert exc.message.startswith("bad `tool_result` frame: ")
    assert "$.content[0]" in exc.message


def test_image_block_without_data_is_a_frame_error() -> None:
    exc = decode_error(
        b'{"type":"tool_result","id":"t","content":[{"type":"image","mime_type":"image/png"}]}'
    )
    assert exc.id == "t"
    assert "`data`" in exc.message


def test_frame_error_defaults() -> None:
    exc = FrameError("oops")
    assert (exc.message, exc.id, exc.type) == ("oops", None, None)


def test_nested_unknown_field_is_skipped() -> None:
    raw = b'{"type":"ready","x":' + b'{"a":' * 100 + b"1" + b"}" * 101
    assert ep.decode_extension_frame(raw) == ep.Ready()


def test_very_deeply_nested_object_is_a_frame_error() -> None:
    raw = b'{"a":' * 5000 + b"1" + b"}" * 5000
    try:
        ep.decode_extension_frame(raw)
    except FrameError:
        pass


@pytest.mark.parametrize(
    "raw",
    [b'{"type":"hello","name":5', b'{"type":"bogus","id":1', b'{"type":"hello"} x'],
    ids=["truncated-after-bad-field", "truncated-unknown-type", "trailing-after-bad-frame"],
)
def test_malformed_json_after_a_validation_error_says_invalid_json(raw: bytes) -> None:
    assert decode_error(raw).message.startswith("invalid JSON: ")


# --- host -> extension: encode ------------------------------------------------

HOST_FRAMES: list[msgspec.Struct] = [
    ep.HelloAck(
        protocol_version=1,
        zot_version="0.0.7",
        provider="anthropic",
        model="claude-opus-4-7",
        cwd="/Users/pat/Developer/zot",
    ),
    ep.CommandInvoked(id="c1", name="weather", args="berlin"),
    ep.CommandInvoked(id="c2", name="weather"),
    ep.ToolCall(id="t1", name="weather", args=msgspec.Raw(b'{"city":"Berlin"}')),
    ep.ToolCall(id="t2", name="weather"),
    ep.LifecycleEvent(event="turn_start", step=1),
    ep.LifecycleEvent(event="turn_end", stop="end_turn"),
    ep.LifecycleEvent(
        event="tool_call", tool_id="x", tool_name="read", tool_args={"path": "foo.go"}
    ),
    ep.EventIntercept(
        id="i1", event="tool_call", tool_id="x", tool_name="bash", tool_args={"command": "ls"}
    ),
    ep.Shutdown(),
]


@pytest.mark.parametrize("frame", HOST_FRAMES, ids=lambda f: type(f).__name__)
def test_encode_ends_with_exactly_one_newline(frame: msgspec.Struct) -> None:
    data = ep.encode(frame)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1


@pytest.mark.parametrize("frame", HOST_FRAMES, ids=lambda f: type(f).__name__)
def test_host_frames_round_trip(frame: msgspec.Struct) -> None:
    assert ep.decode_host_frame(ep.encode(frame)) == frame


def test_encode_escapes_newlines_inside_strings() -> None:
    data = ep.encode(ep.CommandInvoked(id="1", name="n", args="two\nlines"))
    assert data.count(b"\n") == 1
    decoded = ep.decode_host_frame(data)
    assert isinstance(decoded, ep.CommandInvoked)
    assert decoded.args == "two\nlines"


def test_encode_hello_ack_matches_the_reference() -> None:
    frame = ep.HelloAck(
        protocol_version=1,
        zot_version="0.0.7",
        provider="anthropic",
        model="claude-opus-4-7",
        cwd="/Users/pat/Developer/zot",
    )
    assert json.loads(ep.encode(frame)) == {
        "type": "hello_ack",
        "protocol_version": 1,
        "zot_version": "0.0.7",
        "provider": "anthropic",
        "model": "claude-opus-4-7",
        "cwd": "/Users/pat/Developer/zot",
    }


def test_hello_ack_beyond_the_reference_carries_the_extensions_dirs() -> None:
    frame = ep.HelloAck(
        protocol_version=1,
        zot_version="0.1.0",
        provider="",
        model="",
        cwd="/p",
        extension_dir="/h/extensions/x",
        data_dir="/h/data/x",
    )
    decoded = json.loads(ep.encode(frame))
    assert (decoded["extension_dir"], decoded["data_dir"]) == ("/h/extensions/x", "/h/data/x")
    assert ep.decode_host_frame(ep.encode(frame)) == frame


def test_encode_shutdown() -> None:
    assert ep.encode(ep.Shutdown()) == b'{"type":"shutdown"}\n'


def test_encode_tool_call_passes_args_verbatim() -> None:
    args = b'{ "city" : "Berlin",  "n": 1.50 }'
    data = ep.encode(ep.ToolCall(id="t", name="weather", args=msgspec.Raw(args)))
    assert data == b'{"type":"tool_call","id":"t","name":"weather","args":' + args + b"}\n"


def test_reference_host_examples_decode() -> None:
    assert ep.decode_host_frame(
        line("""{"type":"command_invoked","id":"...",
 "name":"weather","args":"berlin"}""")
    ) == ep.CommandInvoked(id="...", name="weather", args="berlin")
    call = ep.decode_host_frame(
        line("""{"type":"tool_call","id":"...","name":"weather",
 "args":{"city":"Berlin"}}""")
    )
    assert isinstance(call, ep.ToolCall)
    assert json.loads(bytes(call.args)) == {"city": "Berlin"}
    assert ep.decode_host_frame(
        line('{"type":"event","event":"turn_end","stop":"end_turn"}')
    ) == ep.LifecycleEvent(event="turn_end", stop="end_turn")
    assert ep.decode_host_frame(
        line("""{"type":"event_intercept","id":"...","event":"tool_call",
 "tool_id":"...","tool_name":"bash",
 "tool_args":{"command":"rm -rf /tmp/foo"}}""")
    ) == ep.EventIntercept(
        id="...",
        event="tool_call",
        tool_id="...",
        tool_name="bash",
        tool_args={"command": "rm -rf /tmp/foo"},
    )


def test_decode_host_frame_classifies_unknown_types() -> None:
    assert ep.decode_host_frame(b'{"type":"hello","name":"x"}') == UnknownFrame(type="hello")


# --- encode_event -------------------------------------------------------------


def raw_payload(**fields: str) -> dict[str, msgspec.Raw]:
    return {k: msgspec.Raw(v.encode()) for k, v in fields.items()}


def test_encode_event_is_an_event_frame() -> None:
    data = ep.encode_event(raw_payload(event='"turn_start"', step="1"))
    assert data == b'{"type":"event","event":"turn_start","step":1}\n'
    assert ep.decode_host_frame(data) == ep.LifecycleEvent(event="turn_start", step=1)


def test_encode_event_with_id_is_an_event_intercept_frame() -> None:
    data = ep.encode_event(
        raw_payload(event='"tool_call"', tool_name='"bash"', tool_args='{"command":"ls"}'),
        id="q7",
    )
    assert data == (
        b'{"type":"event_intercept","id":"q7","event":"tool_call",'
        b'"tool_name":"bash","tool_args":{"command":"ls"}}\n'
    )
    assert ep.decode_host_frame(data) == ep.EventIntercept(
        id="q7", event="tool_call", tool_name="bash", tool_args={"command": "ls"}
    )


@pytest.mark.parametrize("payload", [{}, {"event": '"tool_call"'}, {"event": '"x"', "n": "[1,{}]"}])
@pytest.mark.parametrize("rid", ["1", 'q"\\7'])
def test_event_intercept_maker_encodes_the_payload_once_for_any_id(
    payload: dict[str, str], rid: str
) -> None:
    make = ep.event_intercept_maker(raw_payload(**payload))
    expected = {
        "type": "event_intercept",
        "id": rid,
        **{k: json.loads(v) for k, v in payload.items()},
    }
    assert json.loads(make(rid)) == expected
    assert list(json.loads(make(rid))) == list(expected)
    assert make(rid).endswith(b"}\n")
    assert make(rid).count(b"\n") == 1


def test_encode_event_passes_unknown_fields_through_verbatim() -> None:
    odd = '{"nested": [1, 2.50, "x"],  "deep": {"a": null}}'
    data = ep.encode_event(raw_payload(event='"assistant_message"', extra=odd, flag="true"))
    assert b'"extra":' + odd.encode() in data
    assert json.loads(data) == {
        "type": "event",
        "event": "assistant_message",
        "extra": {"nested": [1, 2.5, "x"], "deep": {"a": None}},
        "flag": True,
    }


def test_encode_event_ends_with_exactly_one_newline() -> None:
    data = ep.encode_event(raw_payload(event='"x"', text='"a\\nb"'))
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1


def test_encode_event_keeps_payload_order_after_the_head() -> None:
    data = ep.encode_event(raw_payload(z="1", event='"turn_end"', a="2"))
    assert list(json.loads(data)) == ["type", "z", "event", "a"]


# --- frames.py helpers --------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"{}", True),
        (b'{"a":1}', True),
        (b"  \n\t{}", True),
        (b"[]", False),
        (b'"{"', False),
        (b"null", False),
        (b"1", False),
        (b"", False),
        (b"   ", False),
    ],
)
def test_is_json_object(raw: bytes, expected: bool) -> None:
    assert is_json_object(msgspec.Raw(raw)) is expected


def test_is_json_object_on_a_decoded_raw_value() -> None:
    frame = ep.decode_host_frame(b'{"type":"tool_call","id":"1","name":"n","args":  [1]}')
    assert isinstance(frame, ep.ToolCall)
    assert is_json_object(frame.args) is False


def test_tags_of() -> None:
    assert tags_of(ep.Hello, ep.Ready, ep.ShutdownAck) == frozenset(
        {"hello", "ready", "shutdown_ack"}
    )


def test_tags_of_refuses_an_untagged_struct() -> None:
    class Plain(msgspec.Struct):
        x: int

    with pytest.raises(AssertionError, match="Plain has no string tag"):
        tags_of(Plain)


# --- property -----------------------------------------------------------------

EXTENSION_FRAME_TYPES = (
    ep.Hello,
    ep.RegisterCommand,
    ep.RegisterTool,
    ep.Ready,
    ep.ToolResult,
    ep.Subscribe,
    ep.EventInterceptResponse,
    ep.CommandResponse,
    ep.Notify,
    ep.ShutdownAck,
    UnknownFrame,
)


def check_decodes_or_frame_error(raw: bytes) -> None:
    message: object = None
    try:
        frame = ep.decode_extension_frame(raw)
    except FrameError as exc:
        message = exc.message
    else:
        assert isinstance(frame, EXTENSION_FRAME_TYPES)
        return
    assert isinstance(message, str)
    assert message


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_frame_error(raw: bytes) -> None:
    check_decodes_or_frame_error(raw)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
type_values = st.sampled_from(
    [*sorted(tags_of(*EXTENSION_FRAME_TYPES[:-1])), "tool_call", "bogus", "text", ""]
)


@given(
    st.dictionaries(
        st.sampled_from(
            ["type", "id", "name", "content", "schema", "events", "block", "action", "zz"]
        ),
        json_values | type_values,
        max_size=5,
    )
)
def test_arbitrary_json_objects_decode_or_raise_frame_error(obj: dict[str, Any]) -> None:
    check_decodes_or_frame_error(json.dumps(obj).encode())
