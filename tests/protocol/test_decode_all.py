"""Decoding a read's worth of lines at once (FrameDecoder.decode_all): the
same frames as line by line, or ``None`` whenever one line would not decode
on its own (then each line is decoded alone, and says why)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zotd.protocol import agent as ap
from zotd.protocol import extension as ep
from zotd.protocol.frames import FrameError, UnknownFrame
from zotd.protocol.lines import Oversized

REQUESTS = [
    b'{"id":1,"type":"call_tool","name":"echo","args":{"text":"hi"}}',
    b'{"type":"ping","id":"p"}',
    b'{"id":3,"type":"call_tool","name":"echo","args":{},"timeout_s":2.5}',
    b' {"id":4,"type":"list_tools"} ',
    b'{"id":5,"type":"emit_event","event":"turn_start","extra":[1,2]}',
]

REPLIES = [
    b'{"type":"tool_result","id":"1","content":[{"type":"text","text":"hi"}]}',
    b'{"type":"notify","level":"info","message":"m"}',
    b'{"type":"tool_result","id":"2","content":[],"is_error":true}',
    b'{"type":"event_intercept_response","id":"3","block":false}',
]


def one_by_one(decode: Any, lines: list[bytes]) -> list[Any]:
    return [decode(line) for line in lines]


def test_requests_decode_as_they_do_one_by_one() -> None:
    assert ap.decode_requests(REQUESTS) == one_by_one(ap.decode_request, REQUESTS)
    assert ap.decode_requests(REQUESTS[:1]) == [ap.decode_request(REQUESTS[0])]
    assert ap.decode_requests([]) == []


def test_replies_decode_as_they_do_one_by_one() -> None:
    assert ep.decode_extension_frames(REPLIES) == one_by_one(ep.decode_extension_frame, REPLIES)


@pytest.mark.parametrize(
    "odd",
    [
        b"",  # blank: skipped, not a frame
        b"   ",
        b"this is not json",
        b"[1, 2]",
        b'{"id":9,"type":"no_such_request"}',  # an UnknownFrame, alone
        b'{"id":9,"type":"call_tool"}',  # a known type with a field missing
        b'{"id":9,"type":"call_tool","name":"\xc3\xa9"}',  # UTF-8: checked alone
        b'{"id":9,"type":"ping","x":"\xff"}',  # not UTF-8
        b"[" * 5000 + b"]" * 5000,  # nested too deeply
    ],
)
def test_one_odd_line_leaves_the_read_to_be_decoded_line_by_line(odd: bytes) -> None:
    lines = [REQUESTS[0], odd, REQUESTS[1]]
    assert ap.decode_requests(lines) is None
    # ... and alone it says what it is.
    try:
        alone = ap.decode_request(odd)
    except FrameError:
        return
    assert isinstance(alone, UnknownFrame | ap.CallTool)


def test_a_marker_for_an_oversized_line_is_no_frame() -> None:
    lines: list[Any] = [REQUESTS[0], Oversized(99), REQUESTS[1]]
    assert ap.decode_requests(lines) is None
    assert ep.decode_extension_frames([REPLIES[0], Oversized(7)]) is None


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "id": st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=5)),
                "type": st.sampled_from(["ping", "list_tools", "status"]),
            }
        ),
        max_size=8,
    )
)
def test_any_read_of_well_formed_requests_decodes_at_once(frames: list[dict[str, Any]]) -> None:
    lines = [json.dumps(f).encode() for f in frames]  # (ASCII: non-ASCII is escaped)
    decoded = ap.decode_requests(lines)
    assert decoded == one_by_one(ap.decode_request, lines)
    assert all(isinstance(d, msgspec.Struct) for d in decoded or [])
