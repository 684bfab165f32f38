"""LineSplitter: newline framing with a bounded buffer (zotd/protocol/lines.py)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zotd.protocol.lines import DEFAULT_MAX_LINE, LineSplitter, Oversized


def feed_all(splitter: LineSplitter, *chunks: bytes | bytearray) -> list[bytes | Oversized]:
    out: list[bytes | Oversized] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    return out


def test_default_max_line_is_16_mib() -> None:
    assert DEFAULT_MAX_LINE == 16 * 1024 * 1024
    assert LineSplitter().max_line == DEFAULT_MAX_LINE


@pytest.mark.parametrize("bad", [0, -1])
def test_max_line_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="max_line must be at least 1"):
        LineSplitter(max_line=bad)


def test_one_complete_line() -> None:
    assert feed_all(LineSplitter(), b"hello\n") == [b"hello"]


def test_lines_are_yielded_without_their_newline() -> None:
    items = feed_all(LineSplitter(), b"a\nb\n")
    assert all(isinstance(item, bytes) and b"\n" not in item for item in items)


def test_many_lines_in_one_chunk() -> None:
    assert feed_all(LineSplitter(), b"one\ntwo\nthree\n") == [b"one", b"two", b"three"]


def test_line_split_across_two_chunks() -> None:
    splitter = LineSplitter()
    assert feed_all(splitter, b"hel") == []
    assert splitter.buffered == 3
    assert feed_all(splitter, b"lo\n") == [b"hello"]
    assert splitter.buffered == 0


def test_line_split_across_many_one_byte_chunks() -> None:
    splitter = LineSplitter()
    data = b'{"type":"ready"}\n'
    out = feed_all(splitter, *(data[i : i + 1] for i in range(len(data))))
    assert out == [b'{"type":"ready"}']


def test_chunk_ends_one_line_and_starts_the_next() -> None:
    splitter = LineSplitter()
    assert feed_all(splitter, b"first\nsec") == [b"first"]
    assert splitter.buffered == 3
    assert feed_all(splitter, b"ond\nthird\n") == [b"second", b"third"]


def test_newline_alone_completes_the_buffered_line() -> None:
    splitter = LineSplitter()
    assert feed_all(splitter, b"abc", b"\n") == [b"abc"]


def test_empty_lines_are_yielded_as_empty_bytes() -> None:
    assert feed_all(LineSplitter(), b"\n\na\n\n") == [b"", b"", b"a", b""]


def test_empty_chunk_yields_nothing_and_keeps_the_buffer() -> None:
    splitter = LineSplitter()
    assert feed_all(splitter, b"ab", b"", b"") == []
    assert splitter.buffered == 2
    assert feed_all(splitter, b"\n") == [b"ab"]


def test_carriage_return_is_kept() -> None:
    assert feed_all(LineSplitter(), b"a\r\n") == [b"a\r"]


def test_bytearray_input() -> None:
    splitter = LineSplitter()
    out = feed_all(splitter, bytearray(b"x\ny"), bytearray(b"z\n"))
    assert out == [b"x", b"yz"]
    assert all(type(item) is bytes for item in out)


def test_buffered_counts_the_unfinished_line() -> None:
    splitter = LineSplitter()
    assert splitter.buffered == 0
    feed_all(splitter, b"done\npart")
    assert splitter.buffered == 4


# --- the limit ----------------------------------------------------------------


def test_line_exactly_at_max_line_is_kept() -> None:
    assert feed_all(LineSplitter(max_line=5), b"12345\n") == [b"12345"]


def test_line_one_byte_over_max_line_is_oversized() -> None:
    assert feed_all(LineSplitter(max_line=5), b"123456\n") == [Oversized(6)]


def test_line_exactly_at_max_line_across_chunks_is_kept() -> None:
    splitter = LineSplitter(max_line=5)
    assert feed_all(splitter, b"123", b"45") == []
    assert splitter.buffered == 5
    assert feed_all(splitter, b"\n") == [b"12345"]


def test_line_one_byte_over_across_chunks_newline_in_last_chunk() -> None:
    splitter = LineSplitter(max_line=5)
    assert feed_all(splitter, b"123", b"456\n") == [Oversized(6)]
    assert splitter.buffered == 0


def test_line_one_byte_over_across_chunks_newline_alone() -> None:
    splitter = LineSplitter(max_line=5)
    assert feed_all(splitter, b"123", b"456") == []
    assert splitter.buffered == 0
    assert feed_all(splitter, b"\n") == [Oversized(6)]


def test_oversized_spread_over_many_chunks_is_never_stored() -> None:
    max_line = 64
    splitter = LineSplitter(max_line=max_line)
    for _ in range(100):
        assert feed_all(splitter, b"x" * 10) == []
        assert splitter.buffered <= max_line
    assert feed_all(splitter, b"x" * 7 + b"\n") == [Oversized(1007)]
    assert splitter.buffered == 0


def test_oversized_reports_the_whole_size_when_it_starts_after_a_line() -> None:
    splitter = LineSplitter(max_line=4)
    assert feed_all(splitter, b"ok\n123", b"45", b"678\n") == [b"ok", Oversized(8)]


def test_recovery_after_an_oversized_line_in_one_chunk() -> None:
    splitter = LineSplitter(max_line=4)
    assert feed_all(splitter, b"toolong\nok\n") == [Oversized(7), b"ok"]


def test_recovery_after_an_oversized_line_over_chunks() -> None:
    splitter = LineSplitter(max_line=4)
    assert feed_all(splitter, b"aaaa", b"aaaa", b"a\nbb", b"b\n") == [Oversized(9), b"bbb"]
    assert splitter.buffered == 0


def test_oversized_lines_in_a_row() -> None:
    splitter = LineSplitter(max_line=2)
    assert feed_all(splitter, b"aaa\nbbbb\n", b"ccccc", b"\nd\n") == [
        Oversized(3),
        Oversized(4),
        Oversized(5),
        b"d",
    ]


def test_oversized_is_a_frozen_value() -> None:
    marker = Oversized(3)
    assert marker == Oversized(3)
    assert marker != Oversized(4)
    with pytest.raises(AttributeError):
        marker.size = 4  # type: ignore[misc]


# --- close() ------------------------------------------------------------------


def test_close_on_empty_splitter_yields_nothing() -> None:
    assert list(LineSplitter().close()) == []


def test_close_after_complete_lines_yields_nothing() -> None:
    splitter = LineSplitter()
    feed_all(splitter, b"a\nb\n")
    assert list(splitter.close()) == []


def test_close_yields_the_unterminated_tail() -> None:
    splitter = LineSplitter()
    assert feed_all(splitter, b"a\ntail") == [b"a"]
    assert list(splitter.close()) == [b"tail"]
    assert splitter.buffered == 0


def test_close_yields_a_tail_exactly_at_max_line() -> None:
    splitter = LineSplitter(max_line=4)
    feed_all(splitter, b"abcd")
    assert list(splitter.close()) == [b"abcd"]


def test_close_yields_oversized_for_an_over_long_tail() -> None:
    splitter = LineSplitter(max_line=4)
    assert feed_all(splitter, b"abc", b"de", b"fgh") == []
    assert list(splitter.close()) == [Oversized(8)]


def test_close_twice_yields_the_tail_once() -> None:
    splitter = LineSplitter(max_line=4)
    feed_all(splitter, b"abcdef")
    assert list(splitter.close()) == [Oversized(6)]
    assert list(splitter.close()) == []


def test_splitter_is_reusable_after_close() -> None:
    splitter = LineSplitter(max_line=4)
    feed_all(splitter, b"abcdef")
    list(splitter.close())
    assert feed_all(splitter, b"ok\n") == [b"ok"]


# --- property -----------------------------------------------------------------

line_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))


@st.composite
def lines_and_chunks(draw: st.DrawFn) -> tuple[list[bytes], list[bytes], int, bool]:
    lines = draw(st.lists(line_bytes, max_size=12))
    max_line = draw(st.integers(min_value=1, max_value=24))
    # Without a final newline, the last line is ended by close().
    terminated = draw(st.booleans())
    data = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=len(data)), max_size=20)))
    bounds = [0, *cuts, len(data)]
    chunks = [data[a:b] for a, b in pairwise(bounds)]
    return lines, chunks, max_line, terminated


@given(lines_and_chunks())
def test_any_chunking_yields_the_lines_in_order(
    case: tuple[list[bytes], list[bytes], int, bool],
) -> None:
    lines, chunks, max_line, terminated = case
    splitter = LineSplitter(max_line=max_line)
    out: list[bytes | Oversized] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
        assert splitter.buffered <= max_line
    out.extend(splitter.close())
    expected: list[bytes | Oversized] = [
        line if len(line) <= max_line else Oversized(len(line)) for line in lines
    ]
    if lines and not terminated and lines[-1] == b"":
        # An empty unterminated last line is no line at all.
        expected.pop()
    assert out == expected
    assert splitter.buffered == 0
