"""Agent protocol v1 (zotd/protocol/agent.py): requests, replies and push frames."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zotd.protocol import agent as ap
from zotd.protocol.extension import ImageBlock, TextBlock
from zotd.protocol.frames import FrameError, UnknownFrame


def request_error(raw: bytes) -> FrameError:
    with pytest.raises(FrameError) as info:
        ap.decode_request(raw)
    return info.value


# --- decode_request -----------------------------------------------------------


def test_hello_with_only_an_id_takes_the_defaults() -> None:
    req = ap.decode_request(b'{"id":1,"type":"hello"}')
    assert req == ap.Hello(
        id=1,
        protocol_version=1,
        cwd=None,
        provider="",
        model="",
        client="",
        token=None,
        attach=True,
    )


def test_hello_with_every_field() -> None:
    req = ap.decode_request(
        b'{"id":1,"type":"hello","protocol_version":1,"cwd":"/abs/project",'
        b'"provider":"anthropic","model":"m","client":"name/version","token":"s3cret",'
        b'"attach":false}'
    )
    assert req == ap.Hello(
        id=1,
        protocol_version=1,
        cwd="/abs/project",
        provider="anthropic",
        model="m",
        client="name/version",
        token="s3cret",
        attach=False,
    )


def test_string_ids_are_kept_as_strings() -> None:
    assert ap.decode_request(b'{"id":"req-1","type":"ping"}') == ap.Ping(id="req-1")


@pytest.mark.parametrize(
    ("type_", "cls"),
    [
        ("ping", ap.Ping),
        ("list_extensions", ap.ListExtensions),
        ("list_commands", ap.ListCommands),
        ("list_tools", ap.ListTools),
        ("status", ap.Status),
        ("shutdown", ap.Shutdown),
    ],
)
def test_requests_without_fields(type_: str, cls: type[msgspec.Struct]) -> None:
    req = ap.decode_request(f'{{"id":3,"type":"{type_}"}}'.encode())
    assert type(req) is cls
    assert req == cls(id=3)  # type: ignore[call-arg]


def test_invoke_command() -> None:
    req = ap.decode_request(b'{"id":2,"type":"invoke_command","name":"weather","args":"berlin"}')
    assert req == ap.InvokeCommand(id=2, name="weather", args="berlin")


def test_invoke_command_default_args() -> None:
    req = ap.decode_request(b'{"id":2,"type":"invoke_command","name":"weather"}')
    assert req == ap.InvokeCommand(id=2, name="weather", args="")


def test_call_tool_keeps_args_raw() -> None:
    args = b'{ "city" : "Berlin",  "n": 1.50, "deep": {"x": [1, 2]} }'
    req = ap.decode_request(b'{"id":4,"type":"call_tool","name":"weather","args":' + args + b"}")
    assert isinstance(req, ap.CallTool)
    assert req.name == "weather"
    assert bytes(req.args) == args
    assert req.timeout_s is None


def test_call_tool_defaults_to_empty_object_args() -> None:
    req = ap.decode_request(b'{"id":4,"type":"call_tool","name":"weather"}')
    assert isinstance(req, ap.CallTool)
    assert bytes(req.args) == b"{}"


def test_call_tool_accepts_non_object_args_raw() -> None:
    # Whether args is an object is checked by the daemon (is_json_object), not here.
    req = ap.decode_request(b'{"id":4,"type":"call_tool","name":"w","args":[1]}')
    assert isinstance(req, ap.CallTool)
    assert bytes(req.args) == b"[1]"


def test_call_tool_timeout() -> None:
    req = ap.decode_request(b'{"id":4,"type":"call_tool","name":"w","timeout_s":2.5}')
    assert isinstance(req, ap.CallTool)
    assert req.timeout_s == 2.5


def test_emit_event() -> None:
    req = ap.decode_request(b'{"id":5,"type":"emit_event","event":"turn_start","step":1}')
    assert req == ap.EmitEvent(id=5, event="turn_start")


def test_intercept() -> None:
    req = ap.decode_request(
        b'{"id":6,"type":"intercept","event":"tool_call","tool_id":"t",'
        b'"tool_name":"bash","tool_args":{"command":"rm -rf /tmp/foo"}}'
    )
    assert isinstance(req, ap.Intercept)
    assert (req.event, req.tool_id, req.tool_name) == ("tool_call", "t", "bash")
    assert bytes(req.tool_args) == b'{"command":"rm -rf /tmp/foo"}'


def test_intercept_defaults() -> None:
    req = ap.decode_request(b'{"id":6,"type":"intercept"}')
    assert isinstance(req, ap.Intercept)
    assert (req.event, req.tool_id, req.tool_name) == ("tool_call", "", "")
    assert bytes(req.tool_args) == b"{}"


def test_subscribe_defaults_to_on() -> None:
    assert ap.decode_request(b'{"id":7,"type":"subscribe"}') == ap.Subscribe(
        id=7, notifications=True
    )


def test_subscribe_off() -> None:
    req = ap.decode_request(b'{"id":7,"type":"subscribe","notifications":false}')
    assert req == ap.Subscribe(id=7, notifications=False)


# --- error classification ------------------------------------------------------


def test_bad_json_is_a_frame_error_without_id() -> None:
    exc = request_error(b'{"id":1,"type":')
    assert exc.message.startswith("invalid JSON: ")
    assert exc.id is None
    assert exc.type is None


def test_garbage_is_a_frame_error_without_id() -> None:
    exc = request_error(b"hello there")
    assert exc.message.startswith("invalid JSON: ")
    assert exc.id is None


def test_non_object_is_a_frame_error() -> None:
    exc = request_error(b'[{"id":1,"type":"ping"}]')
    assert exc.message == "a frame must be a JSON object"
    assert exc.id is None


def test_missing_type_keeps_the_id() -> None:
    exc = request_error(b'{"id":12}')
    assert exc.message == "missing or non-string `type`"
    assert exc.id == 12
    assert exc.type is None


def test_known_type_missing_field_keeps_the_id() -> None:
    exc = request_error(b'{"id":"a1","type":"invoke_command"}')
    assert exc.id == "a1"
    assert exc.type == "invoke_command"
    assert exc.message == "bad `invoke_command` frame: Object missing required field `name`"


def test_known_type_missing_id() -> None:
    exc = request_error(b'{"type":"ping"}')
    assert exc.id is None
    assert exc.type == "ping"
    assert exc.message == "bad `ping` frame: Object missing required field `id`"


def test_known_type_wrong_field_type_names_the_field() -> None:
    exc = request_error(b'{"id":9,"type":"call_tool","name":"w","timeout_s":"soon"}')
    assert exc.id == 9
    assert exc.type == "call_tool"
    assert (
        exc.message
        == "bad `call_tool` frame: Expected `float | null`, got `str` - at `$.timeout_s`"
    )


def test_bad_id_type_is_reported_with_that_id() -> None:
    exc = request_error(b'{"id":1.5,"type":"ping"}')
    assert exc.id == 1.5
    assert exc.type == "ping"
    assert "`$.id`" in exc.message


def test_unknown_type_is_an_unknown_frame() -> None:
    assert ap.decode_request(b'{"id":8,"type":"ext_teleport","where":"mars"}') == UnknownFrame(
        type="ext_teleport", id=8
    )


def test_unknown_type_without_id() -> None:
    assert ap.decode_request(b'{"type":"nope"}') == UnknownFrame(type="nope", id=None)


def test_response_is_not_a_request() -> None:
    line = ap.ok(1, "ping", ap.PingData())
    assert ap.decode_request(line) == UnknownFrame(type="response", id=1)


def test_deeply_nested_request_is_a_frame_error() -> None:
    raw = b'{"id":1,"type":"ping","x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    try:
        ap.decode_request(raw)
    except FrameError:
        pass


# --- ok() / fail() ------------------------------------------------------------


def test_ok_exact_json() -> None:
    assert ap.ok(1, "ping", ap.PingData()) == (
        b'{"type":"response","id":1,"command":"ping","success":true,"data":{"pong":true}}\n'
    )


def test_ok_with_string_id_and_empty_data() -> None:
    assert ap.ok("s", "shutdown", ap.Empty()) == (
        b'{"type":"response","id":"s","command":"shutdown","success":true,"data":{}}\n'
    )


def test_ok_with_null_id() -> None:
    assert ap.ok(None, "ping", ap.PingData()) == (
        b'{"type":"response","id":null,"command":"ping","success":true,"data":{"pong":true}}\n'
    )


def test_ok_has_no_error_key() -> None:
    reply = json.loads(ap.ok(1, "emit_event", ap.EmitData(delivered=[])))
    assert "error" not in reply
    assert reply["data"] == {"delivered": []}


def test_ok_keeps_default_valued_data_fields() -> None:
    reply = json.loads(ap.ok(1, "intercept", ap.InterceptData(block=False)))
    assert reply["data"] == {
        "block": False,
        "reason": "",
        "extension": "",
        "args": None,
        "text": None,
        "rewritten_by": [],
    }


def test_fail_exact_json() -> None:
    assert ap.fail(3, "call_tool", ap.ErrorCode.TIMEOUT, "no tool_result within 60 s") == (
        b'{"type":"response","id":3,"command":"call_tool","success":false,'
        b'"error":{"code":"timeout","message":"no tool_result within 60 s"}}\n'
    )


def test_fail_with_null_id_and_command() -> None:
    assert ap.fail(None, None, ap.ErrorCode.BAD_REQUEST, "invalid JSON") == (
        b'{"type":"response","id":null,"command":null,"success":false,'
        b'"error":{"code":"bad_request","message":"invalid JSON"}}\n'
    )


def test_fail_has_no_data_key() -> None:
    reply = json.loads(ap.fail(1, "ping", ap.ErrorCode.INTERNAL, "bug"))
    assert "data" not in reply
    assert reply["error"] == {"code": "internal", "message": "bug"}


def test_replies_end_with_exactly_one_newline() -> None:
    for data in (
        ap.ok(1, "invoke_command", ap.InvokeData(extension="e", action="display", display="a\nb")),
        ap.fail(1, "x", ap.ErrorCode.NOT_FOUND, "two\nlines"),
    ):
        assert data.endswith(b"\n")
        assert data.count(b"\n") == 1


def test_error_codes() -> None:
    codes = {v for k, v in vars(ap.ErrorCode).items() if k.isupper()}
    assert codes == {
        "bad_request",
        "hello_required",
        "unauthorized",
        "unknown_command",
        "not_found",
        "unavailable",
        "timeout",
        "extension_failed",
        "frame_too_large",
        "shutting_down",
        "busy",
        "cancelled",
        "internal",
    }


# --- event_payload ------------------------------------------------------------


def test_event_payload_drops_id_and_type() -> None:
    payload = ap.event_payload(b'{"id":5,"type":"emit_event","event":"turn_start","step":1}')
    assert set(payload) == {"event", "step"}


def test_event_payload_keeps_values_raw() -> None:
    payload = ap.event_payload(
        b'{"id":5,"type":"emit_event","event":"tool_call",'
        b'"tool_args":{ "path" : "foo.go" },"extra":[1, 2.50, null]}'
    )
    assert {k: bytes(v) for k, v in payload.items()} == {
        "event": b'"tool_call"',
        "tool_args": b'{ "path" : "foo.go" }',
        "extra": b"[1, 2.50, null]",
    }


def test_event_payload_keeps_field_order() -> None:
    payload = ap.event_payload(b'{"z":1,"id":5,"event":"e","type":"emit_event","a":2}')
    assert list(payload) == ["z", "event", "a"]


def test_event_payload_of_intercept() -> None:
    payload = ap.event_payload(
        b'{"id":"q","type":"intercept","event":"tool_call","tool_name":"bash"}'
    )
    assert {k: bytes(v) for k, v in payload.items()} == {
        "event": b'"tool_call"',
        "tool_name": b'"bash"',
    }


# --- decode_server_frame ------------------------------------------------------


def test_decode_success_response() -> None:
    frame = ap.decode_server_frame(ap.ok(1, "ping", ap.PingData()))
    assert frame == ap.Response(id=1, command="ping", success=True, data={"pong": True})
    assert isinstance(frame, ap.Response)
    assert frame.error is None
    assert msgspec.convert(frame.data, ap.PingData) == ap.PingData(pong=True)


def test_decode_failure_response() -> None:
    frame = ap.decode_server_frame(ap.fail(None, None, ap.ErrorCode.BAD_REQUEST, "nope"))
    assert frame == ap.Response(
        id=None,
        command=None,
        success=False,
        error=ap.ErrorBody(code="bad_request", message="nope"),
    )


def test_decode_call_data_blocks() -> None:
    data = ap.CallData(
        extension="w",
        content=[TextBlock("hi"), ImageBlock("image/png", "AAAA")],
        is_error=True,
    )
    frame = ap.decode_server_frame(ap.ok("c", "call_tool", data))
    assert isinstance(frame, ap.Response)
    assert msgspec.convert(frame.data, ap.CallData) == data


def test_decode_notify_push() -> None:
    line = b'{"type":"notify","extension":"weather","level":"info","message":"refreshed"}\n'
    assert ap.decode_server_frame(line) == ap.NotifyPush(
        extension="weather", level="info", message="refreshed"
    )


def test_decode_extension_state_push() -> None:
    push = ap.ExtensionStatePush(
        extension="weather",
        state="ready",
        commands=[ap.CommandInfo("weather", "current weather", "weather")],
        tools=[ap.ToolInfo("weather", "Get the weather.", {"type": "object"}, "weather")],
    )
    line = ap.encode(push)
    assert json.loads(line) == {
        "type": "extension_state",
        "extension": "weather",
        "state": "ready",
        "commands": [{"name": "weather", "description": "current weather", "extension": "weather"}],
        "tools": [
            {
                "name": "weather",
                "description": "Get the weather.",
                "schema": {"type": "object"},
                "extension": "weather",
            }
        ],
        "error": "",
    }
    assert ap.decode_server_frame(line) == push


def test_extension_state_push_error_defaults_to_empty() -> None:
    frame = ap.decode_server_frame(
        b'{"type":"extension_state","extension":"e","state":"failed","commands":[],"tools":[]}'
    )
    assert isinstance(frame, ap.ExtensionStatePush)
    assert frame.error == ""


def test_decode_server_frame_rejects_unknown_types() -> None:
    with pytest.raises(msgspec.ValidationError):
        ap.decode_server_frame(b'{"type":"ping","id":1}')


# --- property -----------------------------------------------------------------

REQUEST_TYPES = (
    ap.Hello,
    ap.Ping,
    ap.ListExtensions,
    ap.ListCommands,
    ap.ListTools,
    ap.InvokeCommand,
    ap.CallTool,
    ap.EmitEvent,
    ap.Intercept,
    ap.Subscribe,
    ap.Status,
    ap.Shutdown,
    UnknownFrame,
)


def check_request_or_frame_error(raw: bytes) -> None:
    message: object = None
    try:
        req = ap.decode_request(raw)
    except FrameError as exc:
        message = exc.message
    else:
        assert isinstance(req, REQUEST_TYPES)
        return
    assert isinstance(message, str)
    assert message


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_frame_error(raw: bytes) -> None:
    check_request_or_frame_error(raw)


scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
)
field_values = (
    scalars | st.lists(scalars, max_size=3) | st.dictionaries(st.text(max_size=3), scalars)
)
type_values = st.sampled_from(
    [
        "hello",
        "ping",
        "invoke_command",
        "call_tool",
        "emit_event",
        "intercept",
        "subscribe",
        "response",
        "bogus",
    ]
)


@given(
    st.dictionaries(
        st.sampled_from(
            ["id", "type", "name", "args", "timeout_s", "event", "cwd", "attach", "tool_args"]
        ),
        field_values | type_values,
        max_size=5,
    )
)
def test_arbitrary_json_objects_decode_or_raise_frame_error(obj: dict[str, Any]) -> None:
    check_request_or_frame_error(json.dumps(obj).encode())
