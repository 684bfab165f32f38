"""zotd.model.call_chain: current zot's rules for an extension's ``call_tool``."""

from __future__ import annotations

import msgspec
import pytest

from zotd.model import call_chain
from zotd.model.call_chain import MAX_OUTSTANDING, RESULT_CAP, Kind, Parent, cap, cut_utf8, vet
from zotd.protocol import extension as ep


def judge(request_id: str = "c1", name: str = "weather", **overrides: object) -> call_chain.Verdict:
    fields: dict[str, object] = {
        "parent_id": None,
        "parent": None,
        "capable": True,
        "serving": False,
        "in_flight": set(),
        "outstanding": 0,
    }
    fields.update(overrides)
    return vet(request_id, name, **fields)  # type: ignore[arg-type]


# --- the time limit -------------------------------------------------------------


@pytest.mark.parametrize(("tool_timeout", "limit"), [(60.0, 60.0), (5.0, 5.0), (600.0, 60.0)])
def test_at_most_sixty_seconds(tool_timeout: float, limit: float) -> None:
    assert call_chain.time_limit(tool_timeout) == limit


# --- vet ------------------------------------------------------------------------------


def test_a_first_call_runs_with_nothing_above_it() -> None:
    assert judge() == call_chain.Verdict(Kind.RUN, chain=())


def test_a_nested_call_runs_under_its_parents_chain() -> None:
    verdict = judge(parent_id="7", parent=Parent("relay", ("outer",)), serving=True)
    assert verdict == call_chain.Verdict(Kind.RUN, chain=("outer", "relay"))


def test_an_empty_id_is_dropped() -> None:
    verdict = judge(request_id="")
    assert verdict.kind is Kind.DROP
    assert "without an `id`" in verdict.reason


def test_an_id_in_flight_is_dropped_even_without_the_capability() -> None:
    verdict = judge(in_flight={"c1"}, capable=False)
    assert verdict.kind is Kind.DROP
    assert "still in flight" in verdict.reason


def test_without_the_capability_it_is_refused() -> None:
    verdict = judge(capable=False)
    assert verdict.kind is Kind.REFUSE
    assert "list `call_tool`" in verdict.reason


def test_without_parent_id_while_serving_it_is_refused() -> None:
    assert judge(serving=True).kind is Kind.REFUSE


def test_an_unknown_parent_is_refused() -> None:
    verdict = judge(parent_id="gone", serving=True)
    assert verdict.kind is Kind.REFUSE
    assert "'gone'" in verdict.reason


def test_too_many_in_flight_is_refused() -> None:
    assert judge(outstanding=MAX_OUTSTANDING - 1).kind is Kind.RUN
    verdict = judge(outstanding=MAX_OUTSTANDING)
    assert verdict.kind is Kind.REFUSE
    assert f"at most {MAX_OUTSTANDING}" in verdict.reason


def test_an_empty_name_is_refused() -> None:
    verdict = judge(name="")
    assert verdict.kind is Kind.REFUSE


# --- the chain ----------------------------------------------------------------------


def test_four_calls_in_a_chain_and_no_more() -> None:
    assert call_chain.chain_refusal(("a", "b", "c"), "d") is None
    reason = call_chain.chain_refusal(("a", "b", "c", "d"), "e")
    assert reason is not None
    assert "at most 4 calls (a -> b -> c -> d -> e)" in reason


def test_no_tool_twice() -> None:
    reason = call_chain.chain_refusal(("a", "b"), "a")
    assert reason is not None
    assert "'a' is already in this chain" in reason


def test_the_chain_refusal_reaches_vet() -> None:
    verdict = judge(parent_id="1", parent=Parent("weather"), serving=True)
    assert verdict.kind is Kind.REFUSE
    assert "already in this chain" in verdict.reason


def test_parent_chain() -> None:
    assert Parent("c", ("a", "b")).chain == ("a", "b", "c")


# --- the cap ----------------------------------------------------------------------------


def test_a_small_result_is_kept_whole() -> None:
    content: list[ep.Block] = [ep.TextBlock("hi"), ep.ImageBlock("image/png", "AAAA")]
    out = cap(content, msgspec.Raw(b'{"a":1}'))
    assert (out.content, out.truncated) == (content, False)
    assert out.structured == msgspec.Raw(b'{"a":1}')


def test_text_is_cut_at_a_utf8_boundary_and_the_rest_dropped() -> None:
    content: list[ep.Block] = [
        ep.TextBlock("ab"),
        ep.TextBlock("€€€", format="markdown"),  # 3 bytes each
        ep.TextBlock("gone"),
    ]
    out = cap(content, limit=2 + 7)
    assert out.truncated
    assert out.content == [ep.TextBlock("ab"), ep.TextBlock("€€", format="markdown")]


def test_an_image_that_does_not_fit_is_dropped() -> None:
    content: list[ep.Block] = [ep.TextBlock("abc"), ep.ImageBlock("image/png", "A" * 100)]
    out = cap(content, limit=50)
    assert (out.content, out.truncated) == ([ep.TextBlock("abc")], True)


def test_nothing_fits_past_the_cut() -> None:
    # A later small block is not taken once one was cut.
    content: list[ep.Block] = [ep.TextBlock("x" * 10), ep.TextBlock("y")]
    out = cap(content, limit=5)
    assert out.content == [ep.TextBlock("xxxxx")]


def test_structured_content_that_does_not_fit_is_dropped() -> None:
    out = cap([ep.TextBlock("abc")], msgspec.Raw(b'{"k":"' + b"v" * 20 + b'"}'), limit=10)
    assert out.structured is msgspec.UNSET
    assert out.truncated
    assert out.content == [ep.TextBlock("abc")]


def test_the_default_cap_is_256_kib() -> None:
    out = cap([ep.TextBlock("z" * (RESULT_CAP + 10))])
    assert out.truncated
    (block,) = out.content
    assert isinstance(block, ep.TextBlock)
    assert len(block.text) == RESULT_CAP


@pytest.mark.parametrize("size", range(8))
def test_cut_utf8_never_splits_a_character(size: int) -> None:
    data = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    head = cut_utf8(data, size)
    assert len(head) <= size
    assert data.startswith(head)
    head.decode()  # whole characters
    assert len(head) > size - 4  # and not more cut than one character


def test_cut_utf8_keeps_what_fits() -> None:
    assert cut_utf8(b"abc", 10) == b"abc"
    assert cut_utf8(b"abc", 0) == b""
