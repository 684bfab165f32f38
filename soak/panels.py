"""Panels (the newer extension's ``/panel``): the :class:`PanelBoard` that
hands each connection's panel frames to the worker that opened the panel,
the open-look-press-close exchange clients make, and the watch for panels
the extension still has open well after they closed (``/panels``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio

from soak.plan import LEAK_AFTER, PANEL_FOOTER
from soak.state import Ended, Soak, jitter
from zotd.client import Client, ZotdError
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep

#: The push frames a panel gets.
PanelPush = ap.PanelRenderPush | ap.PanelClosePush


class PanelBoard:
    """The panels one connection opened, and the push frames that came for them.

    The connection's push reader hands each ``panel_render`` and
    ``panel_close`` to :meth:`route`; the worker that opened the panel takes
    them in order with :meth:`next`. A frame for a panel this connection
    never opened is wrong, and so is one for a panel it has finished with,
    unless it is the ``stopped`` close of a panel whose extension stopped as
    it was being closed (the reader may hand it over after the worker saw
    the close's reply).
    """

    def __init__(self) -> None:
        self.frames: dict[str, list[PanelPush]] = {}
        self.finished: set[str] = set()
        self.gone = False
        self._changed = trio.Event()

    def expect(self, panel_id: str) -> None:
        self.frames[panel_id] = []

    def finish(self, panel_id: str) -> list[PanelPush]:
        """Done with the panel; returns the frames it left untaken."""
        self.finished.add(panel_id)
        return self.frames.pop(panel_id, [])

    def route(self, frame: PanelPush) -> str | None:
        """Files a frame for its panel's worker; what is wrong with it, if anything."""
        frames = self.frames.get(frame.panel_id)
        if frames is not None:
            frames.append(frame)
            self._changed.set()
            self._changed = trio.Event()
            return None
        if frame.panel_id in self.finished:
            if isinstance(frame, ap.PanelClosePush) and frame.reason == "stopped":
                return None
            return f"{describe_panel(frame)} after the panel was closed"
        return f"{describe_panel(frame)}: not a panel this connection opened"

    def end(self) -> None:
        """The connection is gone: no frame will come."""
        self.gone = True
        self._changed.set()

    async def next(self, panel_id: str) -> PanelPush:
        """The panel's next frame; waits for it."""
        while True:
            frames = self.frames[panel_id]
            if frames:
                return frames.pop(0)
            if self.gone:
                raise ZotdError("connection_lost", "the connection closed")
            await self._changed.wait()


def describe_panel(frame: PanelPush) -> str:
    if isinstance(frame, ap.PanelClosePush):
        return f"panel_close of {frame.panel_id!r} ({frame.extension}, {frame.reason})"
    return f"panel_render of {frame.panel_id!r} ({frame.extension}): {frame.title!r} {frame.lines!r:.120}"


async def panel(soak: Soak, zot: Client, cid: int, rng: random.Random, board: PanelBoard) -> None:
    """``/panel NONCE`` opens a panel; the user looks at it for a moment,
    now and then resizes it, then presses a key (its render must come,
    with the nonce) or ``q`` (the extension's close must come); then the
    client closes the panel.

    The extension may stop meanwhile (killed, crashed, reloaded): then
    zotd closes the panel with a ``stopped`` push, which may come
    instead of a render, and a ``not_found`` for the panel's key, size
    or close must follow one. Either ends the panel: ``stopped``.
    """
    nonce = soak.nonce(cid)
    panel_id = f"p-{nonce}"
    title = f"panel {panel_id}"
    board.expect(panel_id)  # before the command: a stopped close may beat its reply
    bound = 2 * soak.config.command_timeout
    spec = ep.PanelSpec(panel_id, title, [f"opened {nonce}"], PANEL_FOOTER)
    stats = soak.stats

    def check_open(r: ap.InvokeData) -> str | None:
        if (r.extension, r.action, r.error, r.open_panel) != ("newer", "noop", "", spec):
            return f"/panel {nonce} got {r!r:.200}"
        return None

    def render(line: str) -> Callable[[PanelPush | None], str | None]:
        def check(frame: PanelPush | None) -> str | None:
            want = ap.PanelRenderPush("newer", panel_id, title, [line], PANEL_FOOTER)
            if frame != want:
                got = "nothing" if frame is None else describe_panel(frame)
                return f"{got}, want a render of {panel_id} with the line {line!r}"
            stats.panels["rendered"] += 1
            return None

        return check

    def closed_by_q(frame: PanelPush | None) -> str | None:
        if frame != ap.PanelClosePush("newer", panel_id, "extension"):
            got = "nothing" if frame is None else describe_panel(frame)
            return f"{got}, want the close of {panel_id} by its extension"
        stats.panels["closed by the extension (`q`)"] += 1
        return None

    def closed_by_client(frame: PanelPush | None) -> str | None:
        if frame is not None:
            return f"panel_close of {panel_id}: not_found, then {describe_panel(frame)}"
        stats.panels["closed by the client"] += 1
        return None

    async def exchange(
        send: Callable[[], Awaitable[None]], answered: bool = True
    ) -> PanelPush | None:
        """Sends a request about the panel, then takes the frame that answers
        it (if it is ``answered`` by one). ``not_found`` means the panel is
        gone: the ``stopped`` close must have come, and is taken instead."""
        try:
            await send()
        except ZotdError as exc:
            if exc.code != "not_found":
                raise
        else:
            if not answered:
                return None
        frame = await board.next(panel_id)
        if isinstance(frame, ap.PanelClosePush) and frame.reason == "stopped":
            raise Ended("stopped")
        return frame

    is_open = False
    try:
        _, outcome = await soak.ask(
            "invoke_command /panel",
            lambda: zot.invoke_command("panel", nonce),
            check_open,
            bound,
        )
        if outcome != "ok":
            return
        stats.panels["opened"] += 1
        is_open = True
        await trio.sleep(rng.uniform(0, 0.4))  # the user reads it
        inputs: list[tuple[str, Callable[[], Awaitable[None]], Any]] = []
        if rng.random() < 0.25:
            width, height = rng.randint(20, 120), rng.randint(5, 40)
            inputs.append(
                (
                    "panel_resize",
                    partial(zot.panel_resize, panel_id, width, height),
                    render(f"size {width}x{height}"),
                )
            )
        key = rng.choice(["q", "x", "enter", "down"])
        inputs.append(
            (
                "panel_key",
                partial(zot.panel_key, panel_id, key, text=nonce),
                closed_by_q if key == "q" else render(f"key {key}: {nonce}"),
            )
        )
        for kind, send, check in inputs:
            _, outcome = await soak.ask(kind, partial(exchange, send), check, bound)
            if outcome == "stopped" or (kind, key, outcome) == ("panel_key", "q", "ok"):
                is_open = False
            if outcome != "ok":
                break
    finally:
        if is_open:
            for _ in range(20):  # again after `busy`: the panel must not stay open
                _, outcome = await soak.ask(
                    "panel_close",
                    partial(exchange, partial(zot.panel_close, panel_id), False),
                    closed_by_client,
                    bound,
                )
                if outcome != "busy":
                    break
        soak.panel_closed[panel_id] = trio.current_time()
        for frame in board.finish(panel_id):
            if not (isinstance(frame, ap.PanelClosePush) and frame.reason == "stopped"):
                stats.bad_pushes += 1
                stats.sample(stats.wrong_samples, f"{describe_panel(frame)}: not expected")


def audit_panels(soak: Soak, shown: str, asked: float) -> None:
    """Flags the panels ``/panels`` (asked at ``asked``) lists that were
    closed for their client more than :data:`LEAK_AFTER` before: zotd
    never told the extension (it queues ``panel_close`` before it answers
    the client's close, and before the ``/panels`` sent later)."""
    m = re.match(r"open \d+:(.*)", shown)
    if m is None:
        return
    stats = soak.stats
    for panel_id in m.group(1).split():
        closed = soak.panel_closed.get(panel_id)
        if closed is None or closed + LEAK_AFTER > asked or panel_id in stats.leaked_panels:
            continue
        stats.leaked_panels.add(panel_id)
        stats.sample(
            stats.wrong_samples,
            f"newer still had panel {panel_id} open {asked - closed:.1f} s after it closed",
        )


async def panel_watch(soak: Soak) -> None:
    """Asks the newer extension which panels it has open (``/panels``),
    about once a second, and flags those closed for their client a while
    ago (see :func:`audit_panels`)."""
    rng = random.Random(soak.plan.seed + 5)

    def check(r: ap.InvokeData) -> str | None:
        if r.extension != "newer" or not r.display.startswith("open "):
            return f"/panels got {r!r:.200}"
        return None

    async with soak.connection() as zot:
        await soak.hello(zot)
        while not await soak.paused(jitter(rng, 1.0)):
            asked = trio.current_time()
            reply = await soak.ask(
                "invoke_command /panels",
                lambda: zot.invoke_command("panels"),
                check,
                2 * soak.config.command_timeout,
            )
            if reply[0] is not None:
                audit_panels(soak, reply[0].display, asked)


async def panels_left(soak: Soak, zot: Client) -> str:
    """What the newer extension says it has open (``/panels``) once no other
    client is connected: ``open 0:`` unless zotd failed to tell it of a
    panel that closed. Asked again for a few seconds, as the closes of
    the last clients' panels may still be on their way. (``no answer``
    if newer is not running then, as after a crash loop: a new process
    would have nothing open anyway.)"""
    shown = "no answer"
    with trio.move_on_after(5):
        while True:
            asked = trio.current_time()
            try:
                shown = (await zot.invoke_command("panels")).display
            except ZotdError as exc:
                shown = f"no answer ({exc.code})"
            if shown.startswith("open 0:"):
                break
            await trio.sleep(0.25)
    audit_panels(soak, shown, asked)
    return shown
