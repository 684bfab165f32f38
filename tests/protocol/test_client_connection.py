"""The client's sans-IO connection: ids, reply matching, push routing, limits.

Plain functions: bytes in, events out, no event loop and no socket.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

import zotd.client.connection as connection_module
import zotd.client.errors as errors_module
from zotd.client.connection import Connection, Pending, decode_data
from zotd.client.errors import ZotdError
from zotd.protocol import agent as ap

Conn = Connection[str]


def reply(rid: object, data: object = None, **extra: object) -> bytes:
    frame = {"type": "response", "id": rid, "command": "x", "success": True, "data": data}
    return msgspec.json.encode(frame | extra) + b"\n"


def failure(rid: int, code: str, message: str) -> bytes:
    error = {"code": code, "message": message}
    return reply(rid, success=False, error=error)


def progress(rid: object, message: str) -> bytes:
    frame = {"type": "tool_progress", "request_id": rid, "extension": "e", "tool": "t"}
    return msgspec.json.encode(frame | {"message": message}) + b"\n"


def call(name: str = "echo", args: bytes = b"{}") -> ap.CallTool:
    return ap.CallTool(id=0, name=name, args=msgspec.Raw(args))


# --- out -----------------------------------------------------------------------------


def test_each_request_gets_the_next_id_and_goes_as_its_struct() -> None:
    conn = Conn()
    rid1, line1 = conn.send(ap.Ping(id=0), "a")
    rid2, line2 = conn.send(call("echo", b'{"city":"Berlin"}'), "b")
    assert (rid1, rid2) == (1, 2)
    assert line1.endswith(b"\n") and line2.count(b"\n") == 1
    assert ap.decode_request(line1) == ap.Ping(id=1)
    sent = ap.decode_request(line2)
    assert isinstance(sent, ap.CallTool)
    assert (sent.id, sent.name, bytes(sent.args)) == (2, "echo", b'{"city":"Berlin"}')
    assert conn.in_flight == 2


def test_fields_go_exactly_as_given_with_id_and_type_set_here() -> None:
    conn = Conn()
    rid, line = conn.send_fields("emit_event", {"event": "turn_start", "step": 1, "id": 9}, "a")
    # No field a Struct would add (its defaults): the extensions get these.
    assert msgspec.json.decode(line) == {
        "event": "turn_start",
        "step": 1,
        "id": rid,
        "type": "emit_event",
    }
    payload = ap.event_payload(line)
    assert {k: bytes(v) for k, v in payload.items()} == {"event": b'"turn_start"', "step": b"1"}


def test_intercept_fields_are_the_intercept_structs() -> None:
    conn = Conn()
    fields = {"event": "tool_call", "tool_id": "t1", "tool_name": "bash", "tool_args": {"x": 1}}
    _, line = conn.send_fields("intercept", fields, "a")
    sent = ap.decode_request(line)
    assert isinstance(sent, ap.Intercept)
    assert (sent.event, sent.tool_id, sent.tool_name, bytes(sent.tool_args)) == (
        "tool_call",
        "t1",
        "bash",
        b'{"x":1}',
    )


def test_an_oversized_request_fails_here_and_is_not_in_flight() -> None:
    conn = Conn(max_frame_bytes=100)
    with pytest.raises(ZotdError) as err:
        conn.send(call(args=b'{"t":"' + b"x" * 100 + b'"}'), "a")
    assert err.value.code == "frame_too_large"
    assert "over the 100-byte limit" in err.value.message
    assert conn.in_flight == 0
    rid, _ = conn.send(ap.Ping(id=0), "b")  # the connection is still good
    assert conn.receive_data(reply(rid)) != []


# --- replies -------------------------------------------------------------------------


def test_a_reply_wakes_its_request_and_finish_returns_it() -> None:
    conn = Conn()
    rid, _ = conn.send(ap.Ping(id=0), "waiter")
    [event] = conn.receive_data(reply(rid, {"pong": True}))
    assert isinstance(event, Pending)
    assert event.waiter == "waiter"
    answer = conn.finish(rid)
    assert decode_data(ap.PingData, answer.data, ap.Ping) == ap.PingData(pong=True)
    assert conn.in_flight == 0


def test_replies_split_across_chunks_and_out_of_order() -> None:
    conn = Conn()
    rid1, _ = conn.send(ap.Ping(id=0), "one")
    rid2, _ = conn.send(ap.Ping(id=0), "two")
    both = reply(rid2, 2) + reply(rid1, 1)
    assert conn.receive_data(both[:7]) == []
    events = conn.receive_data(both[7:])
    assert [e.waiter for e in events if isinstance(e, Pending)] == ["two", "one"]
    assert (bytes(conn.finish(rid1).data), bytes(conn.finish(rid2).data)) == (b"1", b"2")


def test_a_failed_reply_raises_its_code_and_message() -> None:
    conn = Conn()
    rid, _ = conn.send(call("missing"), "a")
    conn.receive_data(failure(rid, "not_found", "no tool 'missing'"))
    with pytest.raises(ZotdError) as err:
        conn.finish(rid)
    assert (err.value.code, err.value.message) == ("not_found", "no tool 'missing'")
    assert str(err.value) == "no tool 'missing' (not_found)"


def test_replies_for_no_request_in_flight_are_dropped() -> None:
    conn = Conn()
    rid, _ = conn.send(ap.Ping(id=0), "a")
    assert conn.receive_data(reply(rid + 1) + reply("x") + reply(None)) == []
    assert conn.in_flight == 1


def test_unreadable_and_oversized_lines_are_dropped_and_reading_goes_on() -> None:
    conn = Conn(max_frame_bytes=200)
    rid, _ = conn.send(ap.Ping(id=0), "a")
    junk = b"not json\n" + b'{"type":"from_the_future"}\n' + b"[" * 300 + b"\n"
    events = conn.receive_data(junk + reply(rid, True))
    assert [e.waiter for e in events if isinstance(e, Pending)] == ["a"]


def test_a_reply_that_does_not_fit_is_a_bad_reply_naming_the_request() -> None:
    with pytest.raises(ZotdError) as err:
        decode_data(ap.CallData, msgspec.Raw(b'{"extension":"e","content":"no"}'), ap.CallTool)
    assert err.value.code == "bad_reply"
    assert err.value.message.startswith("zotd's reply to call_tool did not fit: ")


# --- pushes --------------------------------------------------------------------------


def test_push_frames_come_out_as_events_in_order() -> None:
    conn = Conn()
    rid, _ = conn.send(ap.Ping(id=0), "a")
    note = b'{"type":"notify","extension":"e","level":"info","message":"hi"}\n'
    events = conn.receive_data(note + reply(rid) + progress(99, "not ours"))
    assert events[0] == ap.NotifyPush(extension="e", level="info", message="hi")
    assert isinstance(events[1], Pending)
    assert events[2] == ap.ToolProgressPush(
        request_id=99, extension="e", tool="t", message="not ours"
    )


def test_tool_progress_goes_to_its_calls_on_progress() -> None:
    conn = Conn()
    seen: list[str] = []
    with_cb, _ = conn.send(call(), "a", on_progress=lambda p: seen.append(p.message))
    without, _ = conn.send(call(), "b")
    events = conn.receive_data(progress(with_cb, "half") + progress(without, "third"))
    assert seen == ["half"]
    assert events == [
        ap.ToolProgressPush(request_id=without, extension="e", tool="t", message="third")
    ]


def test_an_on_progress_that_raises_is_logged_and_the_connection_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conn = Conn()

    def broken(_: ap.ToolProgressPush) -> None:
        raise ValueError("bug")

    rid, _ = conn.send(call(), "a", on_progress=broken)
    with caplog.at_level(logging.ERROR, logger="zotd.client"):
        events = conn.receive_data(
            progress(rid, "x") + reply(rid, {"extension": "e", "content": []})
        )
    assert "an on_progress callback failed" in caplog.text
    assert [type(e) for e in events] == [Pending]


# --- giving up, losing the connection ------------------------------------------------


def test_abandoning_a_cancellable_request_writes_a_cancel() -> None:
    conn = Conn()
    rid, _ = conn.send(call(), "a")
    cancel = conn.abandon(rid)
    assert cancel is not None
    assert ap.decode_request(cancel) == ap.CancelCall(id=rid + 1, request_id=rid)
    assert conn.in_flight == 0
    # Its late reply and the cancel's own are for nobody.
    assert conn.receive_data(failure(rid, "cancelled", "given up") + reply(rid + 1)) == []


def test_abandoning_sends_no_cancel_when_there_is_nothing_to_give_up() -> None:
    conn = Conn()
    ping, _ = conn.send(ap.Ping(id=0), "a")
    assert conn.abandon(ping) is None  # not a request zotd can give up
    answered, _ = conn.send(ap.InvokeCommand(id=0, name="x"), "b")
    conn.receive_data(reply(answered))
    assert conn.abandon(answered) is None  # its reply is in already
    by_name, _ = conn.send_fields("intercept", {"event": "tool_call"}, "c")
    conn.lose("gone")
    assert conn.abandon(by_name) is None  # nobody to tell


def test_losing_the_connection_fails_everything_in_flight() -> None:
    conn = Conn()
    rid1, _ = conn.send(ap.Ping(id=0), "one")
    rid2, _ = conn.send(call(), "two")
    assert conn.lose("the connection to zotd was closed") == ["one", "two"]
    assert conn.lose("later") == ["one", "two"]
    for rid in (rid1, rid2):
        with pytest.raises(ZotdError) as err:
            conn.finish(rid)
        assert (err.value.code, err.value.message) == (
            "connection_lost",
            "the connection to zotd was closed",
        )
    with pytest.raises(ZotdError) as err:
        conn.send(ap.Ping(id=0), "three")
    assert err.value.code == "connection_lost"
    with pytest.raises(ZotdError):
        conn.send_fields("ping", {}, "four")
    assert conn.in_flight == 0


@pytest.mark.parametrize("module", [connection_module, errors_module])
def test_the_connection_does_no_io(module: ModuleType) -> None:
    assert module.__file__ is not None
    source = Path(module.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"anyio", "trio", "asyncio", "socket", "select", "os", "subprocess"}
