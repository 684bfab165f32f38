"""``before_agent_start`` in virtual time: one guard after another, 5 s each.

The workspace runs in-process against in-memory fake extensions under
``MockClock(autojump_threshold=0)`` (see tests/runtime/test_deadlines.py),
so each deadline is measured exactly. What the agent and the extensions see
through a real daemon is in tests/e2e/test_events_current.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.fakes import Behaviour, FakeIO
from tests.runtime.test_deadlines import elapsed, open_workspace
from zotd.model.config import Config
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import extension as ep
from zotd.runtime.system_prompt import MAX_PROMPT

EVENT = "before_agent_start"
BASE = "You are zot."

#: Every host frame each fake guard read, by guard.
Seen = dict[str, list[ep.HostFrame]]


def payload(prompt: str = BASE) -> dict[str, Raw]:
    return {"system_prompt": Raw(msgspec.json.encode(prompt))}


def guard(name: str, seen: Seen, delay: float = 0.0, **answer: Any) -> Behaviour:
    """Intercepts ``before_agent_start``; answers after ``delay`` with the
    fields ``answer`` (``append=TEXT``: the prompt it got followed by TEXT;
    ``silent=True``: never)."""
    silent = answer.pop("silent", False)
    append = answer.pop("append", None)

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, intercept=[EVENT])
        async with trio.open_nursery() as nursery:
            async for frame in io.frames():
                seen.setdefault(name, []).append(frame)
                if isinstance(frame, ep.EventIntercept) and not silent:
                    nursery.start_soon(reply, io, frame)

    async def reply(io: FakeIO, frame: ep.EventIntercept) -> None:
        await trio.sleep(delay)
        fields = dict(answer)
        if append is not None:
            fields["system_prompt"] = (frame.system_prompt or "") + append
        await io.send(type="event_intercept_response", id=frame.id, **fields)

    return behaviour


def asked(seen: Seen, name: str) -> list[ep.EventIntercept]:
    return [f for f in seen.get(name, []) if isinstance(f, ep.EventIntercept)]


def cancels(seen: Seen, name: str) -> list[str]:
    return [f.id for f in seen.get(name, []) if isinstance(f, ep.Cancel)]


async def test_each_guard_has_5s_of_its_own(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    seen: Seen = {}
    behaviours = {
        "a": guard("a", seen, silent=True),
        "b": guard("b", seen, 3, append=" [b]"),
        "c": guard("c", seen, silent=True),
        "d": guard("d", seen, 4.5, append=" [d]"),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    start = trio.current_time()
    verdict = await ws.intercept(EVENT, payload())
    assert elapsed(start) == 5 + 3 + 5 + 4.5
    assert (verdict.block, verdict.system_prompt) == (False, BASE + " [b] [d]")
    assert verdict.rewritten_by == ["b", "d"]
    # Each asked once, about what the one before left; the silent ones withdrawn.
    assert [f.system_prompt for n in "abcd" for f in asked(seen, n)] == [
        BASE,
        BASE,
        BASE + " [b]",
        BASE + " [b]",
    ]
    for name in "ac":
        assert cancels(seen, name) == [asked(seen, name)[0].id]
        assert "did not answer within 5 s" in paths.extension_log(name).read_text()
    assert cancels(seen, "b") == cancels(seen, "d") == []


async def test_the_deadline_includes_writing_the_request(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def not_reading(io: FakeIO) -> None:
        await io.hello("stuck", intercept=[EVENT])
        await trio.sleep_forever()

    seen: Seen = {}
    ws, _ = await open_workspace(
        nursery,
        paths,
        project,
        {"stuck": not_reading, "z": guard("z", seen, 1, append=" [z]")},
        stuck={"lockstep": True},  # its stdin takes nothing it does not read
    )
    await ws.wait_settled()
    start = trio.current_time()
    verdict = await ws.intercept(EVENT, payload())
    assert elapsed(start) == 5 + 1
    assert (verdict.system_prompt, verdict.rewritten_by) == (BASE + " [z]", ["z"])
    assert "did not answer within 5 s" in paths.extension_log("stuck").read_text()


async def test_the_agents_cancel_withdraws_the_question_in_flight(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    seen: Seen = {}
    behaviours = {
        "a": guard("a", seen, 1, append=" [a]"),
        "b": guard("b", seen, silent=True),
        "c": guard("c", seen, append=" [c]"),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    start = trio.current_time()
    with trio.move_on_after(3) as scope:
        await ws.intercept(EVENT, payload())
    assert scope.cancelled_caught
    assert elapsed(start) == 3
    await trio.sleep(1)  # the cancel frame on its way
    assert cancels(seen, "b") == [asked(seen, "b")[0].id]
    assert asked(seen, "c") == []  # never asked
    assert cancels(seen, "a") == []  # it had answered


async def test_failures_keep_the_prompt_and_say_why(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def crashing(io: FakeIO) -> None:
        await io.hello("crash", intercept=[EVENT])
        async for frame in io.frames():
            if isinstance(frame, ep.EventIntercept):
                io.crash()

    async def malformed(io: FakeIO) -> None:
        await io.hello("malformed", intercept=[EVENT])
        async for frame in io.frames():
            if isinstance(frame, ep.EventIntercept):
                await io.send(type="event_intercept_response", id=frame.id, block="maybe")

    seen: Seen = {}
    behaviours = {
        "crash": crashing,
        "malformed": malformed,
        "n-list": guard("n-list", seen, system_prompt=["not", "text"]),
        "n-null": guard("n-null", seen, system_prompt=None),
        "z": guard("z", seen, append=" [z]"),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    start = trio.current_time()
    verdict = await ws.intercept(EVENT, payload())
    assert elapsed(start) == 0  # nobody waited for
    assert (verdict.system_prompt, verdict.rewritten_by) == (BASE + " [z]", ["z"])
    assert asked(seen, "z")[0].system_prompt == BASE
    kept = "the system prompt is kept as it was"
    for name, why in {
        "crash": "it failed",
        "malformed": "it failed (extension 'malformed' sent a malformed reply",
        "n-list": "its `system_prompt` is an array, not a string",
        "n-null": "its `system_prompt` is null, not a string",
    }.items():
        assert f"{kept}: {why}" in paths.extension_log(name).read_text(), name


async def test_a_prompt_over_1_mib_is_kept(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    fits = "x" * (MAX_PROMPT - 2)  # encoded: MAX_PROMPT bytes, with its quotes
    seen: Seen = {}
    behaviours = {
        "a-big": guard("a-big", seen, system_prompt=fits + "y"),
        "b-fits": guard("b-fits", seen, system_prompt=fits),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    verdict = await ws.intercept(EVENT, payload())
    assert verdict.system_prompt == fits
    assert verdict.rewritten_by == ["b-fits"]
    assert asked(seen, "b-fits")[0].system_prompt == BASE
    log = paths.extension_log("a-big").read_text()
    assert f"takes {MAX_PROMPT + 1} bytes, over the {MAX_PROMPT}-byte limit" in log


async def test_no_frame_over_max_frame_bytes_is_sent(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    seen: Seen = {}
    behaviours = {
        "a": guard("a", seen, system_prompt="y" * 600),
        "b": guard("b", seen, append=" [b]"),
    }
    config = Config(max_frame_bytes=1024)
    ws, _ = await open_workspace(nursery, paths, project, behaviours, config)
    await ws.wait_settled()
    with pytest.raises(RequestError) as err:
        await ws.intercept(EVENT, payload("x" * 2000))
    assert err.value.code == "frame_too_large"
    assert asked(seen, "a") == []
    # a's rewrite fits in its reply, but no longer in a frame for b, with
    # the rest of the event.
    with pytest.raises(RequestError) as err:
        await ws.intercept(EVENT, {**payload(), "model": Raw(msgspec.json.encode("m" * 500))})
    assert err.value.code == "frame_too_large"
    assert "as 'a' rewrote it" in err.value.message
    assert len(asked(seen, "a")) == 1
    assert asked(seen, "b") == []
    assert "rewrite refused" in paths.extension_log("a").read_text()


async def test_without_guards_the_prompt_comes_back_unchanged(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    seen: Seen = {}
    ws, _ = await open_workspace(nursery, paths, project, {"other": guard("other", seen)})
    await ws.wait_settled()
    ws.extensions["other"].intercepts.clear()  # a guard no longer
    verdict = await ws.intercept(EVENT, payload(" untrimmed \n"))
    assert (verdict.block, verdict.system_prompt, verdict.rewritten_by) == (
        False,
        " untrimmed \n",
        [],
    )
    with pytest.raises(RequestError) as err:
        await ws.intercept(EVENT, {"system_prompt": Raw(b"null")})
    assert err.value.code == "bad_request"
