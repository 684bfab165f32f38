"""Fuzzing the protocol decoders with structurally valid but wrong frames.

``test_extension_protocol.py`` and ``test_agent_protocol.py`` already feed the
decoders arbitrary bytes and random small JSON objects. The strategies here
aim closer: they start from the decoders' own frame Structs (read with
:mod:`msgspec.inspect`, so a field added to a frame is fuzzed without touching
this file) and build every known ``type`` with fields of wrong types, missing
required fields, extra unknown fields, nulls, huge numbers, bounded and
unbounded nesting, odd strings (NUL, U+2028, lone surrogates, both escaped
and raw), ids of every JSON type, duplicated keys, and ``type`` values that
are near misses of the real ones (case, whitespace, NUL, ``-`` for ``_``).

Properties: the decoders only ever return a frame (or :class:`UnknownFrame`)
or raise :class:`FrameError` (``decode_server_frame``: ``msgspec.DecodeError``);
whatever decodes re-encodes to JSON that decodes back equal. And
:class:`LineSplitter` never holds more than ``max_line`` bytes, whatever the
chunks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zotd.protocol import agent as ap
from zotd.protocol import extension as ep
from zotd.protocol.frames import FrameError, UnknownFrame
from zotd.protocol.lines import LineSplitter, Oversized

# --- JSON text with what json.dumps cannot write ------------------------------


@dataclass(frozen=True)
class Deep:
    """A value nested ``depth`` levels deep (``[[[...]]]`` or ``{"a":{"a":...}}``)."""

    depth: int
    brackets: bool


@dataclass(frozen=True)
class Pairs:
    """A JSON object as (key, value) pairs: keys may repeat."""

    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Style:
    """How a frame is written: whitespace, escaping, line ending."""

    ascii_only: bool
    item_sep: str
    key_sep: str
    lead: str
    trail: str


def dump(value: Any, style: Style) -> str:
    """JSON text for ``value``; :class:`Deep` and :class:`Pairs` included."""
    if isinstance(value, Deep):
        if value.brackets:
            return "[" * value.depth + "]" * value.depth
        return '{"a":' * value.depth + "0" + "}" * value.depth
    if isinstance(value, Pairs):
        body = style.item_sep.join(
            dump(k, style) + style.key_sep + dump(v, style) for k, v in value.items
        )
        return "{" + body + "}"
    if isinstance(value, list):
        return "[" + style.item_sep.join(dump(v, style) for v in value) + "]"
    if isinstance(value, dict):
        return dump(Pairs(tuple(value.items())), style)
    return json.dumps(value, ensure_ascii=style.ascii_only)


def to_line(obj: Pairs, style: Style) -> bytes:
    # A lone surrogate written unescaped becomes bytes that are not UTF-8.
    return (style.lead + dump(obj, style) + style.trail).encode("utf-8", "surrogatepass")


# --- values --------------------------------------------------------------------

WEIRD_STRINGS = [
    "",
    "\x00",
    "a\x00b",
    "\u2028\u2029",
    "\ufeff",
    "\U0001f600",
    "\ud800",  # lone surrogates: json.dumps escapes them, or writes them raw
    "\udcff",
    "\ud83d\ude00",
    "e\u0301",
    "\\",
    '"',
    "\n\r\t",
    "x" * 300,
]
strings = st.text(max_size=12) | st.sampled_from(WEIRD_STRINGS)
HUGE_INTS = [2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, -(2**64), 10**30, -(10**40)]
ints = st.integers() | st.sampled_from(HUGE_INTS)
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e308, -1e308, 5e-324, -0.0, 1.5, 2.0**64]
)
scalars = st.none() | st.booleans() | ints | floats | strings
#: Deep enough to strain a decoder, shallow enough to compare with ``==``.
bounded_deep = st.builds(Deep, st.sampled_from([20, 100, 200]), st.booleans())
#: Past msgspec's recursion limit: the decoders must refuse these cleanly.
too_deep = st.builds(Deep, st.sampled_from([1200, 5000]), st.booleans())
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(strings, inner, max_size=4),
    max_leaves=10,
)


def any_value(*, deep: bool) -> st.SearchStrategy[Any]:
    """Any JSON value, sometimes deeply nested (past every limit if ``deep``)."""
    nested = (bounded_deep | too_deep) if deep else bounded_deep
    # Mostly shallow: a too-deep value hides every other mistake of the frame.
    return st.one_of(json_values, json_values, json_values, json_values, nested)


def valid_value(t: mi.Type, *, deep: bool) -> st.SearchStrategy[Any]:
    """A value of inspected type ``t`` (or, for nested Structs, a wrong one)."""
    if isinstance(t, mi.StrType):
        return strings
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.IntType):
        return ints
    if isinstance(t, mi.FloatType):
        return floats | ints
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.UnionType):
        return st.one_of([valid_value(member, deep=deep) for member in t.types])
    if isinstance(t, mi.ListType):
        return st.lists(valid_value(t.item_type, deep=deep), max_size=3)
    if isinstance(t, mi.StructType):
        return struct_objects(t, deep=deep)
    return any_value(deep=deep)  # Any, Raw


def wrong_value(t: mi.Type, *, deep: bool) -> st.SearchStrategy[Any]:
    """A JSON value that is usually not of type ``t`` (sometimes it is: fine)."""
    del t
    return st.one_of(
        st.none(),
        st.booleans(),
        ints,
        floats,
        strings,
        st.lists(scalars, min_size=1, max_size=3),
        st.dictionaries(strings, scalars, max_size=3),
        any_value(deep=deep),
    )


def near_misses(tag: str) -> list[str]:
    """Strings that a sloppy peer might send for ``tag``."""
    return [
        tag.upper(),
        tag.title(),
        tag.capitalize(),
        f" {tag}",
        f"{tag} ",
        f"{tag}\t",
        f"{tag}\n",
        f"{tag}\x00",
        f"\ufeff{tag}",
        f"{tag}\u200b",
        tag.replace("_", "-"),
        tag.replace("_", ""),
        f"{tag}s",
        tag[:-1],
    ]


KEY_NAMES = ["", "Type", "TYPE", "ID", "Id", "id ", " type", "type\x00", "__proto__", "\ud800"]
ID_VALUES = st.one_of(
    strings,
    ints,
    floats,
    st.booleans(),
    st.none(),
    st.lists(scalars, max_size=2),
    st.dictionaries(strings, scalars, max_size=2),
)


@st.composite
def struct_objects(
    draw: st.DrawFn,
    t: mi.StructType,
    *,
    deep: bool,
    other_tags: Sequence[str] = (),
    top: bool = False,
) -> Pairs:
    """A JSON object for Struct ``t``: each field right, wrong, null or missing.

    At the top level (``top``), the ``type`` may be a near miss or missing, an
    ``id`` of any JSON type may be added, and keys may repeat.
    """
    pairs: list[tuple[str, Any]] = []
    if t.tag_field is not None:
        tag = str(t.tag)
        choice = draw(st.integers(0, 19)) if top else 0
        if choice < 13:
            pairs.append((t.tag_field, tag))
        elif choice < 17:
            pairs.append((t.tag_field, draw(st.sampled_from(near_misses(tag)))))
        elif choice == 17 and other_tags:
            pairs.append((t.tag_field, draw(st.sampled_from(list(other_tags)))))
        elif choice == 18:
            pairs.append((t.tag_field, draw(wrong_value(mi.StrType(), deep=False))))
        # else: no type at all
    for field in t.fields:
        mode = draw(st.sampled_from(["valid"] * 6 + ["wrong", "null", "missing"]))
        if mode == "missing":
            continue
        if mode == "null":
            value: Any = None
        elif mode == "wrong":
            value = draw(wrong_value(field.type, deep=deep))
        else:
            value = draw(valid_value(field.type, deep=deep))
        pairs.append((field.encode_name, value))
    if top:
        if draw(st.booleans()) and not any(k == "id" for k, _ in pairs):
            pairs.append(("id", draw(ID_VALUES)))
        extras = draw(
            st.lists(
                st.tuples(st.sampled_from(KEY_NAMES) | strings, any_value(deep=deep)),
                max_size=3,
            )
        )
        pairs.extend(extras)
        if pairs and draw(st.integers(0, 4)) == 0:
            # Repeat a key (often `type` or `id`) with another value.
            key = draw(st.sampled_from([k for k, _ in pairs]))
            other: Any = draw(st.sampled_from([str(t.tag), *other_tags, None]) | ID_VALUES)
            pairs.insert(draw(st.integers(0, len(pairs))), (key, other))
    pairs = list(draw(st.permutations(pairs))) if len(pairs) > 1 else pairs
    return Pairs(tuple(pairs))


styles = st.builds(
    Style,
    ascii_only=st.booleans(),
    item_sep=st.sampled_from([",", ", ", " ,\t", ",\r"]),
    key_sep=st.sampled_from([":", ": ", " :\r "]),
    lead=st.sampled_from(["", " ", "\t", "\r"]),
    trail=st.sampled_from(["", " ", "\r", "\t \r"]),
)


def frames_of(union: Any, *, deep: bool = True, other_tags: Sequence[str] = ()) -> Any:
    """Strategy: (line, pairs) for a wrong-or-right frame of a tagged union."""
    info = mi.type_info(union)
    assert isinstance(info, mi.UnionType)
    structs = [t for t in info.types if isinstance(t, mi.StructType)]
    tags = sorted(str(t.tag) for t in structs)
    others = [*tags, *other_tags]
    return st.sampled_from(structs).flatmap(
        lambda t: st.tuples(struct_objects(t, deep=deep, other_tags=others, top=True), styles).map(
            lambda p: (to_line(p[0], p[1]), p[0])
        )
    )


def tags_in(union: Any) -> frozenset[str]:
    info = mi.type_info(union)
    assert isinstance(info, mi.UnionType)
    return frozenset(str(t.tag) for t in info.types if isinstance(t, mi.StructType))


EXT_TAGS = tags_in(ep.ExtensionFrame)
HOST_TAGS = tags_in(ep.HostFrame)
REQUEST_TAGS = tags_in(ap.Request)
SERVER_UNION = ap.Response | ap.NotifyPush | ap.ExtensionStatePush

extension_lines = frames_of(ep.ExtensionFrame, other_tags=sorted(HOST_TAGS))
host_lines = frames_of(ep.HostFrame, other_tags=sorted(EXT_TAGS))
request_lines = frames_of(ap.Request, other_tags=["response", "notify", "tool_call"])
#: No nesting past the limit here: see test_decode_server_frame_refuses_deep_nesting_cleanly.
server_lines = frames_of(SERVER_UNION, deep=False, other_tags=["ping", "hello", "tool_result"])


# --- the properties ------------------------------------------------------------


def check_decoder(
    decode: Callable[[bytes], Any],
    encode: Callable[[msgspec.Struct], bytes],
    line: bytes,
    known: frozenset[str],
    frame_types: tuple[type, ...],
) -> Any:
    """The decoder returns a frame or raises a clean FrameError; frames round-trip."""
    try:
        frame = decode(line)
    except FrameError as exc:
        assert isinstance(exc.message, str)
        assert exc.message
        assert str(exc) == exc.message
        assert exc.type is None or exc.type in known, exc.type
        return None
    assert isinstance(frame, (*frame_types, UnknownFrame)), frame
    assert isinstance(frame, msgspec.Struct)
    if isinstance(frame, UnknownFrame):
        assert isinstance(frame.type, str)
        assert frame.type not in known
    data = encode(frame)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert decode(data) == frame
    if _is_utf8(line):
        # Without bytes that are not UTF-8 to carry along, the output is strict JSON.
        decoded = json.loads(data)
        assert isinstance(decoded, dict)
        assert decoded["type"] == (frame.type if isinstance(frame, UnknownFrame) else _tag(frame))
    return frame


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _tag(frame: msgspec.Struct) -> str:
    tag = type(frame).__struct_config__.tag
    assert isinstance(tag, str)
    return tag


def _classes(union: Any) -> tuple[type, ...]:
    info = mi.type_info(union)
    assert isinstance(info, mi.UnionType)
    return tuple(t.cls for t in info.types if isinstance(t, mi.StructType))


@settings(max_examples=400)
@given(extension_lines)
def test_extension_frames_decode_or_raise_frame_error(case: tuple[bytes, Pairs]) -> None:
    check_decoder(
        ep.decode_extension_frame, ep.encode, case[0], EXT_TAGS, _classes(ep.ExtensionFrame)
    )


@settings(max_examples=300)
@given(host_lines)
def test_host_frames_decode_or_raise_frame_error(case: tuple[bytes, Pairs]) -> None:
    check_decoder(ep.decode_host_frame, ep.encode, case[0], HOST_TAGS, _classes(ep.HostFrame))


#: A key of two surrogates, written with ensure_ascii as the escapes \ud83d\ude00: a
#: valid pair, which a JSON decoder reads as one character (an emoji).
_ESCAPED_PAIR = Pairs(
    (("id", 1), ("type", "emit_event"), ("event", "turn_start"), ("\ud83d\ude00", 0))
)


@settings(max_examples=400)
@given(request_lines)
@example((to_line(_ESCAPED_PAIR, Style(True, ",", ":", "", "")), _ESCAPED_PAIR))
def test_requests_decode_or_raise_frame_error(case: tuple[bytes, Pairs]) -> None:
    line, pairs = case
    req = check_decoder(ap.decode_request, ap.encode, line, REQUEST_TAGS, _classes(ap.Request))
    if isinstance(req, ap.EmitEvent | ap.Intercept) and _is_utf8(line):
        # What the daemon does next with such a line: it must not fail either.
        # (Not UTF-8, it may: see test_event_payload_of_a_request_that_decoded.)
        payload = ap.event_payload(line)
        # The keys as a JSON decoder reads them (an escaped surrogate pair is one character).
        assert set(payload) == {_plain(k) for k, _ in pairs.items} - {"id", "type"}
        for value in payload.values():
            assert isinstance(value, msgspec.Raw)
            msgspec.json.decode(value)  # each value is one JSON value


#: Fields of the frames an event's payload becomes: the payload strategy keeps
#: clear of them, so that every line decodes.
_EVENT_FIELDS = {
    f.encode_name
    for cls in (ap.EmitEvent, ap.Intercept, ep.LifecycleEvent, ep.EventIntercept)
    for f in msgspec.structs.fields(cls)
}
payload_keys = strings.filter(lambda k: k not in _EVENT_FIELDS and k != "type")


@settings(max_examples=200)
@given(
    st.sampled_from(["emit_event", "intercept"]),
    st.lists(st.tuples(payload_keys, any_value(deep=False)), max_size=5),
    styles,
    st.sampled_from([None, "q1"]),
)
def test_event_payloads_pass_through_to_extensions_intact(
    tag: str, extras: list[tuple[str, Any]], style: Style, intercept_id: str | None
) -> None:
    # Unknown fields of emit_event/intercept go to extensions verbatim: the
    # request decodes, the payload is every field but id and type (the last of
    # repeated keys counts), and the event frame made of it is JSON with them.
    pairs = (("id", 7), ("type", tag), ("event", "tool_call"), *extras)
    line = to_line(Pairs(pairs), style)
    try:
        req = ap.decode_request(line)
    except FrameError as exc:
        # Only a lone surrogate, escaped or raw, makes this line invalid.
        assert exc.message.startswith("invalid JSON: ")
        assert _has_lone_surrogate(dump(Pairs(tuple(extras)), Style(False, ",", ":", "", "")))
        return
    assert isinstance(req, ap.EmitEvent | ap.Intercept)
    if not _is_utf8(line):
        return  # see test_event_payload_of_a_request_that_decoded
    payload = ap.event_payload(line)
    expected = _plain(Pairs((("event", "tool_call"), *extras)))  # as JSON reads it
    assert list(payload) == list(expected)
    frame = ep.encode_event(payload, id=intercept_id)
    assert frame.count(b"\n") == 1
    if _is_utf8(line):
        decoded = json.loads(frame)
        head = {"type": "event"} if intercept_id is None else {"type": "event_intercept"}
        assert decoded == {**head, **({"id": "q1"} if intercept_id else {}), **expected}
    host = ep.decode_host_frame(frame)
    assert isinstance(host, ep.EventIntercept if intercept_id else ep.LifecycleEvent)
    assert host.event == "tool_call"


def _plain(value: Any) -> Any:
    """``value`` as json.loads gives it back (Deep markers expanded)."""
    return json.loads(dump(value, Style(True, ",", ":", "", "")))


@settings(max_examples=300)
@given(server_lines)
def test_server_frames_decode_or_raise_decode_error(case: tuple[bytes, Pairs]) -> None:
    line = case[0]
    try:
        frame = ap.decode_server_frame(line)
    except msgspec.DecodeError as exc:
        assert str(exc)
        return
    assert isinstance(frame, ap.Response | ap.NotifyPush | ap.ExtensionStatePush)
    data = ap.encode(frame)
    assert data.count(b"\n") == 1
    assert ap.decode_server_frame(data) == frame


@settings(max_examples=200)
@given(st.sampled_from(sorted(REQUEST_TAGS)), ID_VALUES, styles)
def test_a_request_echoes_exactly_the_ids_a_client_can_send(
    tag: str, rid: Any, style: Style
) -> None:
    # With a known type, a readable id is kept whatever else is wrong, so the
    # daemon can still answer the request it belongs to.
    line = to_line(Pairs((("type", tag), ("id", rid), ("name", 5))), style)
    try:
        req = ap.decode_request(line)
    except FrameError as exc:
        if not _is_utf8(line) or _has_lone_surrogate(json.dumps(_plain(rid), ensure_ascii=False)):
            return  # not JSON: nothing can be read
        assert exc.type == tag
        assert exc.id == _plain(rid)
        return
    assert isinstance(req, _classes(ap.Request))
    assert req.id == _plain(rid)
    assert isinstance(rid, str | int) and not isinstance(rid, bool)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# --- LineSplitter ----------------------------------------------------------------

#: Chunks rich in newlines, CRs and long runs, as bytes or bytearray.
chunk_bytes = st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from([b"\n", b"\r\n", b"a", b"{}", b"\x00", b"x" * 17]), max_size=8).map(
        b"".join
    ),
    st.integers(0, 120).map(lambda n: b"y" * n),
)
feeds = st.lists(
    st.one_of(
        st.tuples(st.just("feed"), chunk_bytes, st.booleans()),
        st.tuples(st.just("close"), st.just(b""), st.just(False)),
    ),
    max_size=30,
)


def model_lines(stream: bytes, max_line: int) -> list[bytes | Oversized]:
    """What a splitter must yield for one stream, fed whole and then closed."""
    *complete, tail = stream.split(b"\n")
    out: list[bytes | Oversized] = [
        line if len(line) <= max_line else Oversized(len(line)) for line in complete
    ]
    if tail:
        out.append(tail if len(tail) <= max_line else Oversized(len(tail)))
    return out


@settings(max_examples=400)
@given(st.integers(1, 64), feeds)
def test_line_splitter_never_buffers_more_than_max_line(
    max_line: int, ops: list[tuple[str, bytes, bool]]
) -> None:
    splitter = LineSplitter(max_line=max_line)
    stream = bytearray()  # what was fed since the last close
    got: list[bytes | Oversized] = []
    for op, chunk, as_bytearray in [*ops, ("close", b"", False)]:
        if op == "feed":
            stream += chunk
            items = splitter.feed(bytearray(chunk) if as_bytearray else chunk)
        else:
            items = splitter.close()
        # Checked between items too: the buffer is bounded while a feed is
        # half-way through its chunk, not just after it.
        for item in items:
            assert splitter.buffered <= max_line
            if isinstance(item, Oversized):
                assert item.size > max_line
            else:
                assert isinstance(item, bytes)
                assert len(item) <= max_line
                assert b"\n" not in item
            got.append(item)
        assert splitter.buffered <= max_line
        if op == "close":
            assert splitter.buffered == 0
            assert got == model_lines(bytes(stream), max_line)
            # Every byte is accounted for: lines, dropped sizes and newlines.
            sizes = sum(len(i) if isinstance(i, bytes) else i.size for i in got)
            assert sizes + bytes(stream).count(b"\n") == len(stream)
            stream.clear()
            got.clear()


# --- known bugs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decode", "line", "tag"),
    [
        (ap.decode_request, b'{"type":"ping","id":1e400}', "ping"),
        (ap.decode_request, b'{"type":"call_tool","id":-1e999,"name":"x"}', "call_tool"),
        (ep.decode_extension_frame, b'{"type":"tool_result","id":1e400}', "tool_result"),
        (ep.decode_host_frame, b'{"type":"tool_call","id":1e400,"name":"n"}', "tool_call"),
        (ap.decode_request, b'{"type":"not_a_request","id":1e400}', None),
    ],
    ids=["ping", "call_tool", "tool_result", "tool_call", "unknown-type"],
)
def test_an_out_of_range_id_does_not_make_an_object_a_non_object(
    decode: Callable[[bytes], Any], line: bytes, tag: str | None
) -> None:
    try:
        frame = decode(line)
    except FrameError as exc:
        assert exc.message != "a frame must be a JSON object", exc.message
        assert exc.type == tag
        return
    assert tag is None
    assert isinstance(frame, UnknownFrame)


@pytest.mark.parametrize(
    ("decode", "line"),
    [
        (ap.decode_request, b'{"id":1,"type":"call_tool","name":"echo","args":{"a":"\xff"}}'),
        (ap.decode_request, b'{"id":1,"type":"emit_event","event":"turn_start","x":"\xc3("}'),
        (ap.decode_request, b'{"id":1,"type":"ping","\xed\xa0\x80":0}'),
        (ep.decode_extension_frame, b'{"type":"register_tool","name":"t","schema":{"\xff":1}}'),
        (ep.decode_extension_frame, b'{"type":"ready","x":"\xfe\xff"}'),
    ],
    ids=["call_tool-args", "emit_event-payload", "unknown-key", "tool-schema", "ready-extra"],
)
def test_a_line_that_is_not_utf8_is_not_a_frame(
    decode: Callable[[bytes], Any], line: bytes
) -> None:
    try:
        frame = decode(line)
    except FrameError:
        return
    raise AssertionError(f"decoded {frame!r} from a line that is not UTF-8")


@pytest.mark.parametrize("tag", ["emit_event", "intercept"])
def test_event_payload_of_a_request_that_decoded(tag: str) -> None:
    line = b'{"id":1,"type":"%s","event":"tool_call","\xff":1}' % tag.encode()
    try:
        ap.decode_request(line)
    except FrameError:
        return  # refusing the line is fine too
    ap.event_payload(line)


def _deepest_accepted_schema() -> bytes:
    """The most deeply nested tool schema decode_extension_frame accepts, here."""

    def line(depth: int) -> bytes:
        return (
            b'{"type":"register_tool","name":"t","schema":'
            + dump(Deep(depth, brackets=False), Style(True, ",", ":", "", "")).encode()
            + b"}"
        )

    low, high = 1, 4000  # accepted at low, refused at high
    while high - low > 1:
        mid = (low + high) // 2
        try:
            ep.decode_extension_frame(line(mid))
        except FrameError:
            high = mid
        else:
            low = mid
    frame = ep.decode_extension_frame(line(low))
    assert isinstance(frame, ep.RegisterTool)
    return bytes(frame.schema)


def test_decode_server_frame_refuses_deep_nesting_cleanly() -> None:
    schema = _deepest_accepted_schema()
    reply = ap.ok(1, "list_tools", ap.ToolsData([ap.ToolInfo("t", "", msgspec.Raw(schema), "e")]))
    try:
        ap.decode_server_frame(reply)
    except msgspec.DecodeError:
        pass
