"""zotd.model.metrics: what counts as a call, how it ended, the counts, the
latency percentiles over the recent window, and the figures on the wire."""

from __future__ import annotations

import msgspec
import pytest

from zotd.model.metrics import WINDOW, Counters, Ending, GuardAnswer, counted, ending_of
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep


def test_tool_calls_and_commands_count_intercept_questions_do_not() -> None:
    assert counted(ep.ToolResult)
    assert counted(ep.CommandResponse)
    assert not counted(ep.EventInterceptResponse)


def test_how_a_reply_ends_a_request() -> None:
    assert ending_of(ep.ToolResult(id="1")) is Ending.OK
    assert ending_of(ep.ToolResult(id="1", is_error=True)) is Ending.ERROR
    assert ending_of(ep.CommandResponse(id="1", action="prompt", prompt="hi")) is Ending.OK
    assert ending_of(ep.CommandResponse(id="1", error="no such city")) is Ending.ERROR


def test_nothing_recorded() -> None:
    assert Counters().figures() == ap.Metrics()
    assert Counters().figures().p50_ms is None


def test_each_ending_is_counted_where_it_belongs() -> None:
    c = Counters()
    c.ended(Ending.OK, 0.010)
    c.ended(Ending.OK, 0.030)
    c.ended(Ending.ERROR, 0.020)
    c.ended(Ending.FAILED, 9.0)  # a call and an error, but no answer: not a latency
    c.ended(Ending.TIMEOUT, 60.0)
    c.ended(Ending.TIMEOUT, 60.0)
    c.ended(Ending.CANCEL, 1.0)
    m = c.figures(late_replies=4)
    assert (m.calls, m.errors, m.timeouts, m.cancels, m.late_replies) == (4, 2, 2, 1, 4)
    assert (m.p50_ms, m.p95_ms) == (20.0, 30.0)


def test_nearest_rank_percentiles() -> None:
    c = Counters()
    for ms in range(100, 0, -1):  # 100 ms .. 1 ms, out of order
        c.ended(Ending.OK, ms / 1000)
    m = c.figures()
    assert (m.p50_ms, m.p95_ms) == (50.0, 95.0)
    one = Counters()
    one.ended(Ending.OK, 0.0042)
    assert (one.figures().p50_ms, one.figures().p95_ms) == (4.2, 4.2)


def test_percentiles_are_over_the_recent_window_only() -> None:
    c = Counters()
    for _ in range(WINDOW):
        c.ended(Ending.OK, 10.0)  # slow, long ago
    for _ in range(WINDOW):
        c.ended(Ending.OK, 0.001)  # fast, lately
    m = c.figures()
    assert m.calls == 2 * WINDOW  # the counts are not windowed
    assert (m.p50_ms, m.p95_ms) == (1.0, 1.0)
    c.ended(Ending.OK, 10.0)
    assert c.figures().p95_ms == 1.0  # one slow answer in 256 is not the 95th percentile


def test_the_window_is_bounded() -> None:
    c = Counters()
    for i in range(10 * WINDOW):
        c.ended(Ending.OK, float(i))
    assert len(c._latencies) == WINDOW


def test_milliseconds_are_rounded_to_microseconds() -> None:
    c = Counters()
    c.ended(Ending.OK, 0.123456789)
    assert c.figures().p50_ms == 123.457


def test_intercept_answers_by_kind() -> None:
    c = Counters()
    for answer in (GuardAnswer.ALLOW, GuardAnswer.ALLOW, GuardAnswer.BLOCK, GuardAnswer.SILENT):
        c.answered(answer)
    m = c.figures()
    assert m.intercepts == {"allow": 2, "block": 1, "silent": 1}
    assert m.calls == 0  # intercepts are not calls


def test_process_figures_pass_through() -> None:
    m = Counters().figures(rss_bytes=12_345_678, cpu_percent=3.5, cpu_s=0.25)
    assert (m.rss_bytes, m.cpu_percent, m.cpu_s) == (12_345_678, 3.5, 0.25)


@pytest.mark.parametrize("ending", list(Ending))
def test_the_figures_round_trip_on_the_wire(ending: Ending) -> None:
    c = Counters()
    c.ended(ending, 0.5)
    c.answered(GuardAnswer.REWRITE)
    m = c.figures(rss_bytes=1, cpu_percent=0.0, cpu_s=0.0)
    assert msgspec.json.decode(msgspec.json.encode(m), type=ap.Metrics) == m
