"""The extension handshake as a state machine (zotd/protocol/handshake.py):
frames and times in, actions out; every phase, every illegal frame."""

from __future__ import annotations

import math
import typing

import pytest

from zotd.protocol import extension as ep
from zotd.protocol.frames import UnknownFrame
from zotd.protocol.handshake import (
    DELIVER,
    IGNORE,
    REGISTRATIONS,
    SETTLE,
    Greet,
    Handshake,
    Ignore,
    Phase,
    Ready,
    Refuse,
)

NAME = "weather"
SPAWNED = 100.0  # any clock: the machine never reads one
HELLO_TIMEOUT, READY_GRACE, READY_IDLE = 10.0, 3.0, 0.2

#: One frame of every type an extension may send.
SAMPLES: dict[type, ep.ExtensionFrame] = {
    ep.Hello: ep.Hello(name=NAME),
    ep.RegisterCommand: ep.RegisterCommand(name="forecast"),
    ep.RegisterTool: ep.RegisterTool(name="get_weather"),
    ep.Ready: ep.Ready(),
    ep.ToolResult: ep.ToolResult(id="1"),
    ep.Subscribe: ep.Subscribe(events=["turn_start"]),
    ep.EventInterceptResponse: ep.EventInterceptResponse(id="2"),
    ep.CommandResponse: ep.CommandResponse(id="3"),
    ep.Notify: ep.Notify(message="hi"),
    ep.ShutdownAck: ep.ShutdownAck(),
    ep.PanelRender: ep.PanelRender(panel_id="p"),
    ep.PanelClose: ep.PanelClose(panel_id="p"),
    ep.ToolProgress: ep.ToolProgress(id="1"),
    ep.CallToolRequest: ep.CallToolRequest(id="c1", name="read"),
    ep.CallToolCancel: ep.CallToolCancel(id="c1"),
    ep.Submit: ep.Submit(text="go on"),
    ep.SubmitSlash: ep.SubmitSlash(text="/plan"),
    ep.ClearNotes: ep.ClearNotes(),
    ep.OpenPanel: ep.OpenPanel(panel=ep.PanelSpec(id="ask")),
}
UNKNOWN = UnknownFrame(type="from_the_future")
NOT_HELLO = [frame for kind, frame in SAMPLES.items() if kind is not ep.Hello]
REGISTERING_FRAMES = [SAMPLES[kind] for kind in (ep.RegisterCommand, ep.RegisterTool, ep.Subscribe)]
#: Passed on whatever the phase (once there was a `hello`), moving no deadline.
OTHERS = [
    frame for kind, frame in SAMPLES.items() if kind not in (ep.Hello, ep.Ready, *REGISTRATIONS)
] + [UNKNOWN]


def tag(frame: ep.ExtensionFrame | UnknownFrame) -> str:
    if isinstance(frame, UnknownFrame):
        return frame.type
    return str(type(frame).__struct_config__.tag)


def fresh(
    hello_timeout: float = HELLO_TIMEOUT,
    ready_grace: float = READY_GRACE,
    ready_idle: float = READY_IDLE,
    *,
    strict_name: bool = False,
) -> Handshake:
    return Handshake(
        NAME,
        spawned=SPAWNED,
        hello_timeout=hello_timeout,
        ready_grace=ready_grace,
        ready_idle=ready_idle,
        strict_name=strict_name,
    )


def late() -> Handshake:
    shake = fresh()
    assert shake.tick(SPAWNED + READY_GRACE) is SETTLE
    return shake


def registering(at: float = SPAWNED + 1) -> Handshake:
    shake = fresh()
    assert isinstance(shake.receive(SAMPLES[ep.Hello], at), Greet)
    return shake


def ready() -> Handshake:
    shake = registering()
    assert shake.receive(ep.Ready(), SPAWNED + 1.1) == Ready()
    return shake


def refused() -> Handshake:
    shake = fresh()
    assert isinstance(shake.receive(ep.Ready(), SPAWNED + 1), Refuse)
    return shake


def test_every_frame_type_has_a_sample() -> None:
    assert set(SAMPLES) == set(typing.get_args(ep.ExtensionFrame))


def test_phases_are_strings() -> None:
    assert [str(p) for p in Phase] == ["hello", "late", "registering", "ready", "refused"]


# --- HELLO: spawned, waiting for `hello` ----------------------------------------


def test_it_starts_waiting_for_hello_until_the_grace() -> None:
    shake = fresh()
    assert shake.phase is Phase.HELLO
    assert not shake.settled
    assert shake.deadline == SPAWNED + READY_GRACE  # the earlier of the two windows


def test_hello_is_greeted_and_opens_the_quiet_window() -> None:
    shake = fresh()
    hello = ep.Hello(name=NAME, capabilities=["panels"])
    action = shake.receive(hello, SPAWNED + 0.5)
    assert action == Greet(hello)
    assert shake.phase is Phase.REGISTERING
    assert not shake.settled
    assert shake.deadline == SPAWNED + 0.5 + READY_IDLE


@pytest.mark.parametrize("frame", NOT_HELLO, ids=tag)
def test_any_other_first_frame_is_refused(frame: ep.ExtensionFrame) -> None:
    shake = fresh()
    action = shake.receive(frame, SPAWNED + 1)
    assert action == Refuse(f"first frame must be `hello`, got `{tag(frame)}`")
    assert shake.phase is Phase.REFUSED


def test_a_hello_with_another_name_runs_under_the_manifests_with_a_warning() -> None:
    shake = fresh()
    hello = ep.Hello(name="wether")
    action = shake.receive(hello, SPAWNED + 1)
    assert action == Greet(
        hello, "`hello` names 'wether' but extension.json names 'weather'; it runs as 'weather'"
    )
    assert shake.phase is Phase.REGISTERING
    assert shake.name == NAME


def test_a_hello_with_another_name_is_refused_when_strict() -> None:
    shake = fresh(strict_name=True)
    action = shake.receive(ep.Hello(name="wether"), SPAWNED + 1)
    assert action == Refuse(
        "`hello` names 'wether' but extension.json names 'weather'; they must match "
        "(strict_hello_name)"
    )
    assert shake.phase is Phase.REFUSED


def test_an_unknown_frame_before_hello_passes_and_refuses_nothing() -> None:
    shake = fresh()
    assert shake.receive(UNKNOWN, SPAWNED + 1) is DELIVER
    assert shake.phase is Phase.HELLO
    assert isinstance(shake.receive(SAMPLES[ep.Hello], SPAWNED + 2), Greet)


def test_nothing_is_due_before_the_deadline() -> None:
    shake = fresh()
    assert shake.tick(SPAWNED) is None
    assert shake.tick(SPAWNED + READY_GRACE - 0.001) is None
    assert shake.phase is Phase.HELLO


def test_no_hello_within_the_grace_settles_it_but_does_not_refuse_it() -> None:
    shake = fresh()
    assert shake.tick(SPAWNED + READY_GRACE) is SETTLE
    assert shake.phase is Phase.LATE
    assert shake.settled
    assert shake.deadline == SPAWNED + HELLO_TIMEOUT


def test_a_hello_timeout_within_the_grace_refuses_without_settling() -> None:
    shake = fresh(hello_timeout=2.0, ready_grace=3.0)
    assert shake.deadline == SPAWNED + 2.0
    assert shake.tick(SPAWNED + 2.0) == Refuse("sent no `hello` frame within 2 s")


def test_a_late_wake_past_both_windows_refuses() -> None:
    assert fresh().tick(SPAWNED + 60) == Refuse("sent no `hello` frame within 10 s")


# --- LATE: no `hello` within the grace ------------------------------------------


def test_no_hello_within_hello_timeout_is_refused() -> None:
    shake = late()
    assert shake.tick(SPAWNED + HELLO_TIMEOUT - 0.001) is None
    assert shake.tick(SPAWNED + HELLO_TIMEOUT) == Refuse("sent no `hello` frame within 10 s")
    assert shake.phase is Phase.REFUSED
    assert shake.deadline == math.inf


@pytest.mark.parametrize("frame", NOT_HELLO, ids=tag)
def test_any_other_first_frame_is_refused_when_late_too(frame: ep.ExtensionFrame) -> None:
    shake = late()
    assert shake.receive(frame, SPAWNED + 5) == Refuse(
        f"first frame must be `hello`, got `{tag(frame)}`"
    )


def test_a_wrong_name_is_greeted_when_late_too() -> None:
    action = late().receive(ep.Hello(name="other"), SPAWNED + 5)
    assert isinstance(action, Greet) and action.note is not None


def test_an_unknown_frame_when_late_passes() -> None:
    shake = late()
    assert shake.receive(UNKNOWN, SPAWNED + 5) is DELIVER
    assert shake.phase is Phase.LATE


def test_a_late_hello_gets_one_quiet_window_then_the_grace_says_why() -> None:
    shake = late()
    at = SPAWNED + 5
    assert isinstance(shake.receive(SAMPLES[ep.Hello], at), Greet)
    assert shake.deadline == at + READY_IDLE
    assert shake.tick(at + READY_IDLE) == Ready("no `ready` within 3 s; proceeding without it")


def test_a_late_hello_that_keeps_registering_is_ready_one_quiet_window_after_it() -> None:
    shake = late()
    at = SPAWNED + 5
    shake.receive(SAMPLES[ep.Hello], at)
    assert shake.receive(SAMPLES[ep.RegisterTool], at + 0.1) is DELIVER
    assert shake.deadline == at + READY_IDLE  # the grace: it moves no further
    assert isinstance(shake.tick(at + READY_IDLE), Ready)


# --- REGISTERING: `hello` accepted ---------------------------------------------


def test_ready_ends_the_handshake() -> None:
    shake = registering()
    assert shake.receive(ep.Ready(), SPAWNED + 1.1) == Ready(None)
    assert shake.phase is Phase.READY
    assert shake.settled
    assert shake.deadline == math.inf


def test_without_ready_it_is_ready_after_the_quiet() -> None:
    shake = registering(at=SPAWNED + 1)
    assert shake.tick(SPAWNED + 1 + READY_IDLE - 0.001) is None
    action = shake.tick(SPAWNED + 1 + READY_IDLE)
    assert action == Ready("no `ready` frame; ready after 0.2 s of quiet")
    assert shake.phase is Phase.READY


@pytest.mark.parametrize("frame", REGISTERING_FRAMES, ids=tag)
def test_a_registration_passes_and_moves_the_quiet_later(frame: ep.ExtensionFrame) -> None:
    shake = registering(at=SPAWNED + 1)
    assert shake.receive(frame, SPAWNED + 1.15) is DELIVER
    assert shake.deadline == SPAWNED + 1.15 + READY_IDLE
    # Woken at the old deadline: nothing is due yet.
    assert shake.tick(SPAWNED + 1 + READY_IDLE) is None
    assert shake.phase is Phase.REGISTERING


def test_a_second_hello_is_ignored_with_a_note_and_counts_as_a_registration() -> None:
    shake = registering(at=SPAWNED + 1)
    assert shake.receive(SAMPLES[ep.Hello], SPAWNED + 1.1) == Ignore("ignored a second `hello`")
    assert shake.phase is Phase.REGISTERING
    assert shake.deadline == SPAWNED + 1.1 + READY_IDLE


def test_a_second_hello_with_another_name_is_ignored_too() -> None:
    shake = registering()
    assert shake.receive(ep.Hello(name="other"), SPAWNED + 1.1) == Ignore(
        "ignored a second `hello`"
    )


@pytest.mark.parametrize("frame", OTHERS, ids=tag)
def test_replies_and_notes_pass_but_keep_nobody_waiting(frame: ep.ExtensionFrame) -> None:
    # An extension serving calls without ever sending `ready` is ready after
    # its registrations end, not at the grace.
    shake = registering(at=SPAWNED + 1)
    assert shake.receive(frame, SPAWNED + 1.15) is DELIVER
    assert shake.deadline == SPAWNED + 1 + READY_IDLE


def test_registering_for_ever_is_ready_at_the_grace() -> None:
    shake = registering(at=SPAWNED + 0.5)
    for i in range(1, 25):  # every 0.1 s, up to 2.9 s after the spawn
        t = SPAWNED + 0.5 + i * 0.1
        assert shake.receive(SAMPLES[ep.RegisterCommand], t) is DELIVER
        assert shake.tick(t) is None
    assert shake.deadline == SPAWNED + READY_GRACE
    assert shake.tick(SPAWNED + READY_GRACE) == Ready(
        "no `ready` within 3 s; proceeding without it"
    )


def test_quiet_and_grace_at_once_the_grace_says_why() -> None:
    shake = fresh(ready_idle=0.5)
    shake.receive(SAMPLES[ep.Hello], SPAWNED + 2.5)
    assert shake.deadline == SPAWNED + READY_GRACE  # both windows end here
    assert shake.tick(SPAWNED + READY_GRACE) == Ready(
        "no `ready` within 3 s; proceeding without it"
    )


# --- READY ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [*REGISTERING_FRAMES, *OTHERS],
    ids=tag,
)
def test_once_ready_everything_else_passes(frame: ep.ExtensionFrame) -> None:
    # Registrations too: a late registration is legal.
    shake = ready()
    assert shake.receive(frame, SPAWNED + 50) is DELIVER
    assert shake.phase is Phase.READY


def test_once_ready_a_second_hello_is_ignored_with_a_note() -> None:
    assert ready().receive(SAMPLES[ep.Hello], SPAWNED + 50) == Ignore("ignored a second `hello`")


def test_once_ready_a_second_ready_is_ignored_quietly() -> None:
    assert ready().receive(ep.Ready(), SPAWNED + 50) is IGNORE
    assert IGNORE.note is None


def test_once_ready_time_brings_nothing() -> None:
    shake = ready()
    assert shake.deadline == math.inf
    assert shake.tick(SPAWNED + 1000) is None


def test_ready_by_the_quiet_is_final() -> None:
    shake = registering(at=SPAWNED + 1)
    shake.tick(SPAWNED + 2)
    assert shake.receive(ep.Ready(), SPAWNED + 2.1) is IGNORE
    assert shake.tick(SPAWNED + 1000) is None


# --- REFUSED --------------------------------------------------------------------


@pytest.mark.parametrize("frame", [*SAMPLES.values(), UNKNOWN], ids=tag)
def test_once_refused_nothing_counts(frame: ep.ExtensionFrame | UnknownFrame) -> None:
    shake = refused()
    assert shake.receive(frame, SPAWNED + 2) is IGNORE
    assert shake.phase is Phase.REFUSED
    assert shake.settled


def test_once_refused_time_brings_nothing() -> None:
    shake = refused()
    assert shake.deadline == math.inf
    assert shake.tick(SPAWNED + HELLO_TIMEOUT) is None
