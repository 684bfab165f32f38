"""The SDK's newer frames, on the wire: progress, cancel, rewriting guards, panels.

No daemon here: each test writes a small SDK extension, runs it with this
interpreter, and plays the host over its stdin and stdout, frame by frame
(``hello_ack`` first, as zotd does). Every read has a short deadline, so a
missing frame fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from zotd.sdk.extension import PROGRESS_INTERVAL

#: How long to wait for one frame before failing: a hang guard, generous for a
#: slow or busy machine (the first frame comes after Python has started).
DEADLINE = 30.0

DOC = Path(__file__).parents[2] / "docs" / "sdk.md"


class Wire:
    """An SDK extension process, and the host's end of its stdio.

    ``ack`` adds fields to the ``hello_ack`` it is sent (``capabilities``, say).
    """

    def __init__(self, tmp: Path, source: str, **ack: Any) -> None:
        self.tmp = tmp
        #: The project directory, ``cwd`` of the ``hello_ack``.
        self.project = tmp / "project"
        self.project.mkdir()
        script = tmp / "ext.py"
        script.write_text(textwrap.dedent(source))
        self.stderr_path = tmp / "stderr.log"
        env = dict(os.environ, ZOT_HOME=str(tmp / "home"), PYTHONUNBUFFERED="1")
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(script)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=tmp,
                env=env,
            )
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        #: What it sent before ``ready``, in order.
        self.opening = self._until("ready")
        hello_ack = {"protocol_version": 1, "zot_version": "test", "provider": "", "model": ""}
        self.send({"type": "hello_ack", **hello_ack, "cwd": str(self.project), **ack})

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # end of output

    def send(self, frame: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()

    def recv(self, timeout: float = DEADLINE) -> dict[str, Any]:
        """The next frame it writes."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame in {timeout} s; stderr:\n{self.stderr()}") from None
        assert line, f"the extension ended its output; stderr:\n{self.stderr()}"
        frame: dict[str, Any] = json.loads(line)
        return frame

    def _until(self, kind: str) -> list[dict[str, Any]]:
        frames = [self.recv()]
        while frames[-1]["type"] != kind:
            frames.append(self.recv())
        return frames

    def frames_for(self, rid: str, count: int) -> list[dict[str, Any]]:
        """The next ``count`` frames, which must all be about request ``rid``."""
        frames = [self.recv() for _ in range(count)]
        assert all(f.get("id") == rid for f in frames), frames
        return frames

    def rest(self) -> list[dict[str, Any]]:
        """Says ``shutdown``; every frame it writes until ``shutdown_ack``."""
        self.send({"type": "shutdown"})
        return self._until("shutdown_ack")

    def end_input(self) -> list[dict[str, Any]]:
        """Closes its stdin; every frame it writes until its output ends."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        frames: list[dict[str, Any]] = []
        while True:
            try:
                line = self._lines.get(timeout=DEADLINE)
            except queue.Empty:
                raise AssertionError(f"its output did not end; stderr:\n{self.stderr()}") from None
            if not line:
                return frames
            frames.append(json.loads(line))

    def wait_for(self, path: Path) -> str:
        """The text of ``path`` once a handler has written it (not empty)."""
        limit = time.monotonic() + DEADLINE
        while not (path.exists() and (found := path.read_text())):
            assert time.monotonic() < limit, f"no {path.name}; stderr:\n{self.stderr()}"
            time.sleep(0.005)
        return found

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for_log(self, text: str) -> None:
        """Waits until ``text`` is in its stderr (its log)."""
        limit = time.monotonic() + DEADLINE
        while text not in self.stderr():
            assert time.monotonic() < limit, f"no {text!r} in stderr:\n{self.stderr()}"
            time.sleep(0.005)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=DEADLINE)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


Start = Callable[..., Wire]


@contextmanager
def starting(tmp: Path) -> Iterator[Start]:
    """Starts extensions from their source (``ack``: fields added to the
    ``hello_ack``) in directories under ``tmp``; kills them at the end."""
    started: list[Wire] = []

    def run(source: str, **ack: Any) -> Wire:
        directory = tmp / f"ext{len(started)}"
        directory.mkdir()
        wire = Wire(directory, source, **ack)
        started.append(wire)
        return wire

    try:
        yield run
    finally:
        for wire in started:
            wire.kill()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """Starts an extension from its source; kills it at the end of the test."""
    with starting(tmp_path) as run:
        yield run


def call(wire: Wire, rid: str, name: str, **args: Any) -> None:
    wire.send({"type": "tool_call", "id": rid, "name": name, "args": args})


def text(frame: dict[str, Any]) -> str:
    assert frame["type"] == "tool_result", frame
    return "\n".join(block["text"] for block in frame["content"])


def progress_of(frames: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    assert all(f["type"] == "tool_progress" for f in frames), frames
    return [(f["message"], f.get("progress"), f.get("total")) for f in frames]


# --- the opening ------------------------------------------------------------------

#: What every hello lists last: zotd's ``cancel``, and current zot's
#: ``tool_cancel`` and ``call_tool`` (what zot's SDK always sends).
ALWAYS = ["cancel", "tool_cancel", "call_tool"]


def test_subscribe_lists_the_intercepts_that_have_handlers(start: Start) -> None:
    every = start(
        """
        from zotd.sdk import Extension

        ext = Extension("guards")

        @ext.intercept_tool_call
        def guard(tool_name, tool_args):
            return None

        @ext.intercept("assistant_message")
        def message(event):
            return None

        @ext.on("turn_end")
        def ended(event):
            pass

        ext.run()
        """
    )
    one = start(
        """
        from zotd.sdk import Extension

        ext = Extension("turns")

        @ext.intercept("turn_start")
        async def turn(event):
            return None

        @ext.command("x")
        def x(args):
            return None

        ext.run()
        """
    )
    plain = start(
        """
        from zotd.sdk import Extension

        ext = Extension("plain")

        @ext.tool
        def t() -> str:
            return ""

        ext.run()
        """
    )
    hello, subscribe, _ = every.opening
    assert subscribe == {
        "type": "subscribe",
        "events": ["turn_end"],
        "intercept": ["assistant_message", "tool_call"],
    }
    assert hello["capabilities"] == ["events", "intercept", *ALWAYS]
    hello, _, subscribe, _ = one.opening
    assert subscribe == {"type": "subscribe", "events": [], "intercept": ["turn_start"]}
    assert hello["capabilities"] == ["commands", "intercept", "panels", *ALWAYS]
    hello, _, _ = plain.opening  # hello, register_tool, ready: no subscribe
    assert hello["capabilities"] == ["tools", "tool_progress", *ALWAYS]


def test_an_unknown_intercept_is_refused_when_registering(start: Start) -> None:
    wire = start(
        """
        from zotd.sdk import Extension

        ext = Extension("bad-guard")
        try:
            ext.intercept("turn_end")
        except ValueError as exc:
            ext.log("refused:", exc)

        @ext.tool
        def t() -> str:
            return ""

        ext.run()
        """
    )
    assert [f["type"] for f in wire.opening] == ["hello", "register_tool", "ready"]
    assert "refused: cannot intercept 'turn_end'" in wire.stderr()


# --- progress ---------------------------------------------------------------------

PROGRESS = """
    import asyncio
    import time

    from zotd.sdk import Extension

    ext = Extension("progress")

    @ext.tool
    def sync_work() -> str:
        ext.progress("starting", 0, 2)
        time.sleep(0.1)  # twice the interval: no update is merged
        ext.progress("halfway", 1, 2)
        time.sleep(0.1)
        ext.progress("almost")
        return "sync done"

    @ext.tool
    async def async_work() -> str:
        ext.progress("starting", 0.0, 1.5)
        await asyncio.sleep(0.07)
        await asyncio.to_thread(ext.progress, "from a thread it started", 1, 1.5)
        return "async done"

    @ext.tool
    def chatty(pause: float) -> str:
        for n in range(1, 201):
            ext.progress(f"step {n}", n, 200)
        time.sleep(pause)
        return "chatty done"

    @ext.tool
    def bad_number() -> str:
        ext.progress("x", "3")
        return "unreachable"

    @ext.command("outside")
    def outside(args):
        ext.progress("not a tool call")

    try:
        ext.progress("before run")
    except RuntimeError as exc:
        ext.log("before run:", exc)

    ext.run()
"""


def test_progress_from_a_sync_tool_then_its_result(start: Start) -> None:
    wire = start(PROGRESS)
    call(wire, "1", "sync_work")
    *updates, result = wire.frames_for("1", 4)
    assert progress_of(updates) == [("starting", 0, 2), ("halfway", 1, 2), ("almost", None, None)]
    assert text(result) == "sync done"


def test_progress_from_an_async_tool_and_a_thread_it_starts(start: Start) -> None:
    wire = start(PROGRESS)
    call(wire, "a", "async_work")
    *updates, result = wire.frames_for("a", 3)
    assert progress_of(updates) == [
        ("starting", 0.0, 1.5),
        ("from a thread it started", 1, 1.5),
    ]
    assert text(result) == "async done"


def until_result(wire: Wire, rid: str) -> tuple[list[tuple[str, Any, Any]], dict[str, Any]]:
    """The progress updates for ``rid``, then its result."""
    frames = [wire.recv()]
    while frames[-1]["type"] != "tool_result":
        frames.append(wire.recv())
    assert all(f["id"] == rid for f in frames), frames
    return progress_of(frames[:-1]), frames[-1]


@pytest.mark.parametrize("pause", [0, 0.12])
def test_close_updates_are_merged_keeping_the_latest(start: Start, pause: float) -> None:
    # The first goes at once; the 199 that follow within the interval are
    # merged into the latest, sent when the interval is up (after a pause)
    # or just before the result (without one). A slow machine may let a few
    # more through, but never two within one interval: at most one a
    # PROGRESS_INTERVAL of the time the call took (the extension's loop
    # keeps the same monotonic clock as this test), and the one before the
    # result.
    wire = start(PROGRESS)
    began = time.monotonic()
    call(wire, "c", "chatty", pause=pause)
    updates, result = until_result(wire, "c")
    took = time.monotonic() - began
    assert updates[0] == ("step 1", 1, 200)
    assert updates[-1] == ("step 200", 200, 200)
    assert len(updates) <= took / PROGRESS_INTERVAL + 2, (took, updates)
    assert text(result) == "chatty done"


def test_progress_outside_a_tool_call_raises(start: Start) -> None:
    wire = start(PROGRESS)
    assert "before run: progress() works only inside a tool handler" in wire.stderr()
    wire.send({"type": "command_invoked", "id": "o", "name": "outside", "args": ""})
    reply = wire.recv()
    assert reply["type"] == "command_response" and reply["id"] == "o"
    assert reply["error"].startswith("RuntimeError: progress() works only inside a tool handler")
    call(wire, "b", "bad_number")
    bad = wire.recv()
    assert (
        bad["is_error"] and text(bad) == "TypeError: progress(): progress must be a number, not str"
    )


# --- cancel -----------------------------------------------------------------------

CANCEL = """
    import asyncio
    import time
    from pathlib import Path

    from zotd.sdk import Extension

    ext = Extension("cancel")

    @ext.tool
    async def slow_async() -> str:
        Path("started").write_text("yes")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            Path("async-cancelled").write_text(f"cancelled() is {ext.cancelled()}")
            return "a reply after the cancel, never sent"
        return "finished"

    @ext.tool
    def slow_sync() -> str:
        Path("started").write_text("yes")
        limit = time.monotonic() + 10
        while not ext.cancelled() and time.monotonic() < limit:
            time.sleep(0.005)
        ext.progress("never sent: cancelled")
        Path("sync-cancelled").write_text(f"cancelled() is {ext.cancelled()}")
        return "late"

    @ext.tool
    def ping() -> str:
        return f"pong, cancelled() is {ext.cancelled()}"

    @ext.command("wait")
    async def wait(args):
        await asyncio.sleep(10)

    @ext.intercept("turn_start")
    async def hesitate(event):
        Path("started").write_text("yes")
        try:
            await asyncio.sleep(10)
        finally:
            Path("guard-cancelled").write_text("yes")

    ext.run()
"""


def test_cancel_an_async_tool(start: Start) -> None:
    wire = start(CANCEL)
    call(wire, "1", "slow_async")
    wire.wait_for(wire.tmp / "started")  # (cancelled before it starts, it would never run)
    wire.send({"type": "cancel", "id": "1"})
    assert wire.wait_for(wire.tmp / "async-cancelled") == "cancelled() is True"
    call(wire, "2", "ping")
    assert text(wire.recv()) == "pong, cancelled() is False"
    assert wire.rest() == [{"type": "shutdown_ack"}]  # nothing for "1"


def test_cancel_a_sync_tool(start: Start) -> None:
    wire = start(CANCEL)
    call(wire, "1", "slow_sync")
    wire.wait_for(wire.tmp / "started")
    wire.send({"type": "cancel", "id": "1"})
    assert wire.wait_for(wire.tmp / "sync-cancelled") == "cancelled() is True"
    time.sleep(0.05)  # its thread has returned by now
    call(wire, "2", "ping")
    assert text(wire.recv()) == "pong, cancelled() is False"
    assert wire.rest() == [{"type": "shutdown_ack"}]  # no result, no progress for "1"


def test_cancel_a_command_and_an_intercept(start: Start) -> None:
    wire = start(CANCEL)
    wire.send({"type": "command_invoked", "id": "c", "name": "wait", "args": ""})
    wire.send({"type": "event_intercept", "id": "g", "event": "turn_start", "step": 1})
    wire.wait_for(wire.tmp / "started")
    wire.send({"type": "cancel", "id": "c"})
    wire.send({"type": "cancel", "id": "g"})
    assert wire.wait_for(wire.tmp / "guard-cancelled") == "yes"
    assert wire.rest() == [{"type": "shutdown_ack"}]


def test_a_cancel_for_an_unknown_or_finished_request_is_ignored(start: Start) -> None:
    wire = start(CANCEL)
    wire.send({"type": "cancel", "id": "never-asked"})
    call(wire, "1", "ping")
    assert text(wire.recv()) == "pong, cancelled() is False"
    wire.send({"type": "cancel", "id": "1"})  # answered already
    call(wire, "2", "ping")
    assert wire.recv()["id"] == "2"
    assert wire.rest() == [{"type": "shutdown_ack"}]
    assert "Traceback" not in wire.stderr()


# --- guards -----------------------------------------------------------------------

GUARDS = """
    from zotd.sdk import Extension, block, replace_text, rewrite

    ext = Extension("guards")

    @ext.intercept_tool_call
    def guard(tool_name: str, tool_args: dict):
        if tool_name == "bash" and "rm -rf" in tool_args.get("command", ""):
            return block("no rm -rf")
        if tool_name == "bash":
            return rewrite({**tool_args, "timeout": 30})
        if tool_name == "oops":
            return replace_text("not for tool calls")
        return None

    @ext.intercept("turn_start")
    def turn(event: dict):
        ext.log("turn_start event:", sorted(event.items()))
        if event["step"] > 3:
            return block("three steps is plenty")
        return None

    @ext.intercept("assistant_message")
    async def tidy(event: dict):
        if "password" in event["text"]:
            return replace_text(event["text"].replace("hunter2", "*******"))
        return None

    ext.run()
"""


def intercept(wire: Wire, rid: str, event: str, **fields: Any) -> dict[str, Any]:
    wire.send({"type": "event_intercept", "id": rid, "event": event, **fields})
    reply = wire.recv()
    assert reply["type"] == "event_intercept_response" and reply["id"] == rid, reply
    # Fields at their defaults are left out of the frame.
    return {"block": False, "reason": "", "modified_args": None, "replace_text": "", **reply}


def test_the_tool_call_guard_rewrites_blocks_and_allows(start: Start) -> None:
    wire = start(GUARDS)
    rewritten = intercept(
        wire, "1", "tool_call", tool_id="t1", tool_name="bash", tool_args={"command": "ls"}
    )
    assert rewritten["block"] is False
    assert rewritten["modified_args"] == {"command": "ls", "timeout": 30}
    assert rewritten["replace_text"] == ""
    blocked = intercept(
        wire, "2", "tool_call", tool_id="t2", tool_name="bash", tool_args={"command": "rm -rf /"}
    )
    assert (blocked["block"], blocked["reason"], blocked["modified_args"]) == (
        True,
        "no rm -rf",
        None,
    )
    allowed = intercept(wire, "3", "tool_call", tool_id="t3", tool_name="read", tool_args={})
    assert (allowed["block"], allowed["modified_args"]) == (False, None)
    # A rewrite that does not fit the event is the guard's bug: logged, allowed.
    wrong = intercept(wire, "4", "tool_call", tool_id="t4", tool_name="oops", tool_args={})
    assert (wrong["block"], wrong["modified_args"], wrong["replace_text"]) == (False, None, "")
    assert "replace_text() changes an assistant message, not 'tool_call'" in wire.stderr()


def test_a_turn_start_guard_blocks(start: Start) -> None:
    wire = start(GUARDS)
    assert intercept(wire, "1", "turn_start", step=1)["block"] is False
    blocked = intercept(wire, "2", "turn_start", step=4, extra="kept")
    assert (blocked["block"], blocked["reason"]) == (True, "three steps is plenty")
    # The handler gets every field but the frame's own type and id.
    assert "turn_start event: [('event', 'turn_start'), ('extra', 'kept'), ('step', 4)]" in (
        wire.stderr()
    )


def test_an_assistant_message_guard_replaces_the_text(start: Start) -> None:
    wire = start(GUARDS)
    replaced = intercept(wire, "1", "assistant_message", text="the password is hunter2")
    assert (replaced["block"], replaced["replace_text"]) == (False, "the password is *******")
    kept = intercept(wire, "2", "assistant_message", text="hello")
    assert (kept["block"], kept["replace_text"]) == (False, "")


# --- panels -----------------------------------------------------------------------

PANELS = """
    import time

    from zotd.sdk import Extension, Panel, display

    ext = Extension("panels")
    items = ["apple", "banana", "cherry"]
    chosen = {"p1": 0}


    def view(panel_id: str) -> Panel:
        lines = [("> " if i == chosen[panel_id] else "  ") + item for i, item in enumerate(items)]
        return Panel(panel_id, title="fruit", lines=lines, footer="up/down, enter")


    @ext.command("fruit", "pick a fruit")
    def fruit(args: str):
        chosen["p1"] = 0
        return view("p1")


    @ext.command("fruit-note", "a panel and a note")
    def fruit_note(args: str):
        return display("opened", panel=Panel("p2", lines=["hi"]))


    @ext.command("fruit-close", "close it")
    def fruit_close(args: str):
        ext.close_panel(args or "p1")


    @ext.on_panel_key
    def key(panel_id: str, key: str, text: str):
        if key == "slow":
            time.sleep(0.05)  # the next key waits its turn
        if key == "down":
            chosen[panel_id] = min(chosen[panel_id] + 1, len(items) - 1)
        elif key == "enter":
            ext.render_panel(panel_id, title="chosen", lines=[items[chosen[panel_id]]])
            return None
        elif key == "char":
            ext.notify(f"typed {text!r}")
            return None
        return view(panel_id)


    @ext.on_panel_resize
    async def resize(panel_id: str, width: int, height: int):
        return Panel(panel_id, title=f"{width}x{height}", lines=f"{width} wide\\n{height} high")


    @ext.on_panel_close
    def closed(panel_id: str):
        ext.notify(f"{panel_id} closed")


    ext.run()
"""


def test_a_command_opens_a_panel_and_keys_redraw_it(start: Start) -> None:
    wire = start(PANELS)
    hello = wire.opening[0]
    assert "panels" in hello["capabilities"]
    wire.send({"type": "command_invoked", "id": "1", "name": "fruit", "args": ""})
    opened = wire.recv()
    assert opened["type"] == "command_response" and opened["action"] == "noop"
    assert opened["open_panel"] == {
        "id": "p1",
        "title": "fruit",
        "lines": ["> apple", "  banana", "  cherry"],
        "footer": "up/down, enter",
    }
    wire.send({"type": "panel_key", "panel_id": "p1", "key": "slow"})  # no "text"
    wire.send({"type": "panel_key", "panel_id": "p1", "key": "down", "text": ""})
    wire.send({"type": "panel_key", "panel_id": "p1", "key": "enter", "text": "\n"})
    first, second, third = (wire.recv() for _ in range(3))
    assert first["type"] == second["type"] == third["type"] == "panel_render"
    # In the order the keys came, though the first took longer.
    assert first["lines"] == ["> apple", "  banana", "  cherry"]
    assert second["lines"] == ["  apple", "> banana", "  cherry"]
    assert third == {
        "type": "panel_render",
        "panel_id": "p1",
        "title": "chosen",
        "lines": ["banana"],
        "footer": "",
    }
    wire.send({"type": "panel_key", "panel_id": "p1", "key": "char", "text": "q"})
    assert wire.recv() == {"type": "notify", "message": "typed 'q'", "level": "info"}
    wire.send({"type": "panel_resize", "panel_id": "p1", "width": 80, "height": 24})
    resized = wire.recv()
    assert (resized["type"], resized["title"]) == ("panel_render", "80x24")
    assert resized["lines"] == ["80 wide", "24 high"]  # one str, split


def test_panel_close_from_the_host_and_from_the_extension(start: Start) -> None:
    wire = start(PANELS)
    wire.send({"type": "command_invoked", "id": "1", "name": "fruit-note", "args": ""})
    opened = wire.recv()
    assert (opened["action"], opened["display"]) == ("display", "opened")
    assert opened["open_panel"] == {"id": "p2", "title": "", "lines": ["hi"], "footer": ""}
    wire.send({"type": "panel_close", "panel_id": "p2"})
    assert wire.recv() == {"type": "notify", "message": "p2 closed", "level": "info"}
    wire.send({"type": "command_invoked", "id": "2", "name": "fruit-close", "args": "p1"})
    assert wire.recv() == {"type": "panel_close", "panel_id": "p1"}
    reply = wire.recv()
    assert (reply["type"], reply["id"], reply["open_panel"]) == ("command_response", "2", None)


# --- the docs' examples -------------------------------------------------------------

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def doc_example(name: str) -> str:
    """The example of docs/sdk.md whose extension is called ``name``."""
    blocks: list[tuple[str, str]] = FENCE.findall(DOC.read_text())
    found = [
        body
        for info, body in blocks
        if info.split()[:1] == ["python"] and f'Extension("{name}"' in body
    ]
    assert len(found) == 1, name
    return found[0]


# tests/test_sdk_docs.py runs these under a daemon, but looks only at what
# they register; here they are used.


def test_docs_guard_examples(start: Start) -> None:
    rules = start(doc_example("house-rules"))
    assert rules.opening[1]["intercept"] == ["assistant_message", "turn_start"]
    assert intercept(rules, "1", "turn_start", step=1)["block"] is False
    blocked = intercept(rules, "2", "turn_start", step=21)
    assert blocked["block"] and blocked["reason"] == "stopped after 20 steps; ask again to go on"
    replaced = intercept(rules, "3", "assistant_message", text="key sk-abcdefghijklmnopqrstu ok")
    assert replaced["replace_text"] == "key sk-[redacted] ok"
    assert intercept(rules, "4", "assistant_message", text="fine")["replace_text"] == ""
    tame = start(doc_example("tame-bash"))
    tamed = intercept(tame, "1", "tool_call", tool_name="bash", tool_args={"command": "make"})
    assert tamed["modified_args"] == {"command": "make", "timeout": 120}
    assert intercept(tame, "2", "tool_call", tool_name="bash", tool_args={"command": "sudo x"})[
        "block"
    ]


def test_docs_progress_example(start: Start) -> None:
    count = start(doc_example("line-count"))
    (count.project / "a.py").write_text("1\n2\n")
    (count.project / "b.py").write_text("3\n")
    call(count, "1", "count_lines")
    updates, result = until_result(count, "1")
    assert updates == [("reading a.py", 0, 2), ("reading b.py", 1, 2)]
    assert text(result) == "3 lines in 2 files"


def test_docs_cancel_example(start: Start) -> None:
    patient = start(doc_example("patient"))
    call(patient, "1", "wait_for_file", path="flag")
    call(patient, "2", "wait_for_file", path="never")
    time.sleep(0.05)
    (patient.project / "flag").touch()
    assert text(patient.recv()) == "flag is there"
    patient.send({"type": "cancel", "id": "2"})
    patient.wait_for_log("stopped waiting for never")
    assert patient.rest() == [{"type": "shutdown_ack"}]


def test_docs_panel_example(start: Start) -> None:
    todo = start(doc_example("todo"))
    for rid, args in (("1", "milk"), ("2", "bread"), ("3", "")):
        todo.send({"type": "command_invoked", "id": rid, "name": "todo", "args": args})
    assert [todo.recv()["display"] for _ in range(2)] == ["added 'milk'", "added 'bread'"]
    assert todo.recv()["open_panel"]["lines"] == ["> [ ] milk", "  [ ] bread"]
    for key, typed in (("down", ""), ("space", " "), ("q", "q")):
        todo.send({"type": "panel_key", "panel_id": "todo", "key": key, "text": typed})
    moved, toggled, closed = (todo.recv() for _ in range(3))
    assert moved["lines"] == ["  [ ] milk", "> [ ] bread"]
    assert (toggled["title"], toggled["lines"][1]) == ("todo: 1 left", "> [x] bread")
    assert closed == {"type": "panel_close", "panel_id": "todo"}
    assert "Traceback" not in todo.stderr(), todo.stderr()
