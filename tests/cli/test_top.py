"""``zot top`` as a user sees it: a real daemon (``zotd start``), real
extension processes, the real socket, and the screen as Textual draws it.

The screen runs under Textual's own harness (``App.run_test``, its pilot
pressing keys) on asyncio, inside a plain test function (the suite's async
tests run on trio); what is asserted is the text of the screen, read back
from what Textual renders. (The command itself: tests/cli/test_top_cli.py.)
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec
from textual.pilot import Pilot

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, Cli
from tests.conftest import add_extension
from tests.extensions.hostile_text import EVIL
from zotd.cli.output import printable
from zotd.cli.top_app import Target, TopApp
from zotd.model.audit import AuditRecord, GuardVerdict

cli = test_cli.cli  # the fixture, as this module's own

HOSTILE = Path(__file__).parent.parent / "extensions" / "hostile_text.py"
#: Characters no screen cell may hold: C0 controls, DEL, C1 controls, bidi controls.
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")
SIZE = (180, 40)

Scenario = Callable[[TopApp, Pilot[int]], Awaitable[None]]
T = TypeVar("T")


# --- helpers ---------------------------------------------------------------------------


def target(cli: Cli) -> Target:
    return Target(
        socket=cli.socket, cwd=cli.project, token=None, logs_dir=cli.home / "logs", workspace=None
    )


def run_top(cli: Cli, scenario: Scenario, size: tuple[int, int] = SIZE) -> None:
    """Runs the screen under Textual's pilot, on asyncio, through ``scenario``."""

    async def go() -> None:
        app = TopApp(target(cli))
        async with app.run_test(size=size) as pilot:
            await scenario(app, pilot)

    asyncio.run(go())


def screen(app: TopApp) -> str:
    """What the terminal shows now, line by line (the cells' characters)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def assert_no_controls(app: TopApp) -> None:
    """No cell of the screen holds a control character (an extension's included)."""
    for strip in app.screen._compositor.render_strips():
        assert not CONTROLS.search(strip.text), repr(strip.text)


def row(app: TopApp, name: str) -> dict[str, str] | None:
    """The table row of extension ``name`` as shown, by column (``None`` if not shown)."""
    lines = screen(app).splitlines()
    header = next(
        (i for i, line in enumerate(lines) if re.match(r"^\s*NAME\s+STATE\s", line)), None
    )
    if header is None:
        return None
    head = lines[header]
    names = re.findall(r"\S+(?: \S+)*", head)  # LAST ERROR is one column
    starts = [head.index(n) for n in names]
    for line in lines[header + 1 :]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
        if cells and cells[0] == name:
            return dict(zip(names, cells, strict=True))
    return None


async def until(app: TopApp, pilot: Pilot[int], ok: Callable[[], bool], what: str) -> None:
    """Lets the app run until ``ok()``, for at most :data:`WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen(app)}")
        await pilot.pause(0.05)


async def until_row(
    app: TopApp, pilot: Pilot[int], name: str, ok: Callable[[dict[str, str]], bool], what: str
) -> dict[str, str]:
    """Lets the app run until ``name``'s row passes ``ok``; returns that row."""
    seen: list[dict[str, str]] = []

    def shown() -> bool:
        r = row(app, name)
        if r is not None and ok(r):
            seen.append(r)
        return bool(seen)

    await until(app, pilot, shown, f"{name}: {what}")
    return seen[0]


def ready(r: dict[str, str]) -> bool:
    return r["STATE"] == "ready" and r["PID"] != "-"


def cell(app: TopApp, name: str, column: str) -> str:
    """One cell of extension ``name``'s row, as shown."""
    found = row(app, name)
    assert found is not None, screen(app)
    return found[column]


def in_thread(fn: Callable[..., T], *args: object) -> Awaitable[T]:
    """A blocking call (a CLI run) without stopping the screen."""
    return asyncio.to_thread(fn, *args)


def fx(cli: Cli, name: str = "fx") -> Path:
    """An extension (fake.py) for ``--ext``: ``fx`` has the tool ``echo``, others none."""
    return add_extension(cli.tmp / "exts", name, "--tools", "echo" if name == "fx" else "")


# --- the table -------------------------------------------------------------------------


def test_rows_show_each_extension_live(cli: Cli) -> None:
    cli.start("-e", str(fx(cli)), "-e", str(fx(cli, "fy")))

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        shown = await until_row(app, pilot, "fx", ready, "ready with a pid")
        await until_row(app, pilot, "fy", ready, "ready with a pid")
        listed = json.loads((await in_thread(cli.zot, "ext", "list", "--json")).stdout)
        pids = {i["name"]: str(i["pid"]) for i in listed}
        assert shown["PID"] == pids["fx"]
        assert shown["RESTARTS"] == "0"
        assert cell(app, "fy", "PID") == pids["fy"]
        assert f"zot top: {cli.project}" in screen(app)
        # Calls made meanwhile show as calls per second, and their latency.
        stop = threading.Event()

        def call_until_stopped() -> None:
            while not stop.is_set():
                res = cli.zot("call", "echo", '{"text": "hi"}')
                assert res.returncode == 0, res

        calls = asyncio.create_task(asyncio.to_thread(call_until_stopped))
        try:
            busy = await until_row(
                app,
                pilot,
                "fx",
                lambda r: r["CALLS/S"] not in ("-", "0.0") and r["P95"] != "-",
                "calls per second",
            )
        finally:
            stop.set()
            await calls
        assert float(busy["CALLS/S"]) > 0
        assert re.fullmatch(r"[\d.]+ (ms|s)", busy["P95"]), busy
        assert cell(app, "fy", "CALLS/S") in ("-", "0.0")

    run_top(cli, scenario)


def test_reload_key_restarts_the_highlighted_extension(cli: Cli) -> None:
    cli.start("-e", str(fx(cli)), "-e", str(fx(cli, "fy")))

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        before_x = await until_row(app, pilot, "fx", ready, "ready")
        before_y = await until_row(app, pilot, "fy", ready, "ready")
        await pilot.press("down")  # fx, then fy: fy is highlighted
        await pilot.press("r")
        after = await until_row(
            app, pilot, "fy", lambda r: ready(r) and r["RESTARTS"] == "1", "restarted once"
        )
        assert after["PID"] != before_y["PID"]
        await until(app, pilot, lambda: "reloaded fy: ready" in screen(app), "the status line")
        assert cell(app, "fx", "PID") == before_x["PID"]
        cli.pids.update(int(r["PID"]) for r in (before_x, before_y, after))

    run_top(cli, scenario)


def test_disable_and_enable_keys(cli: Cli) -> None:
    wx = add_extension(cli.home / "extensions", "wx", "--tools", "echo")
    cli.start()

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        await until_row(app, pilot, "wx", ready, "ready")
        await pilot.press("d")
        await until_row(app, pilot, "wx", lambda r: r["STATE"] == "disabled", "disabled")
        assert cell(app, "wx", "PID") == "-"
        assert json.loads((wx / "extension.json").read_text())["enabled"] is False
        await pilot.press("e")
        await until_row(app, pilot, "wx", ready, "ready again")
        assert json.loads((wx / "extension.json").read_text())["enabled"] is True

    run_top(cli, scenario)


# --- the log pane ----------------------------------------------------------------------


def test_the_log_pane_follows_the_extensions_log(cli: Cli) -> None:
    cli.start("-e", str(fx(cli)))

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        first = await until_row(app, pilot, "fx", ready, "ready")
        assert "log: fx" not in screen(app)
        await pilot.press("l")
        await until(
            app,
            pilot,
            lambda: f"fake fx starting, pid {first['PID']}" in screen(app),
            "the log's start line",
        )
        assert "log: fx" in screen(app)
        # What the extension writes next shows as it comes (here: a new process's).
        await in_thread(cli.zot, "ext", "reload", "fx")
        second = await until_row(app, pilot, "fx", lambda r: r["RESTARTS"] == "1", "restarted")
        cli.pids.update((int(first["PID"]), int(second["PID"])))
        await until(
            app,
            pilot,
            lambda: f"fake fx starting, pid {second['PID']}" in screen(app),
            "the new process's line",
        )
        await pilot.press("l")
        await until(app, pilot, lambda: "log: fx" not in screen(app), "the pane closed")

    run_top(cli, scenario)


def test_what_an_extension_writes_is_shown_escaped(cli: Cli) -> None:
    evil = add_extension(cli.tmp / "exts", "evil", script=HOSTILE)
    cli.start("-e", str(evil))

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        await until_row(app, pilot, "evil", ready, "ready")
        await pilot.press("i")  # the intercepts pane away: the log gets the whole width
        await pilot.press("l")
        shown = f"stderr says {printable(EVIL, multiline=True)}"
        await until(app, pilot, lambda: shown in screen(app), "the escaped stderr line")
        for piece in ("\\x1b[2J", "\\x1b]52;c;SGVsbG8=\\x07", "cr\\rOVER", "\\x9b31m", "\\u202e"):
            assert piece in screen(app)
        assert_no_controls(app)

    run_top(cli, scenario, size=(220, 40))


# --- the intercepts pane ---------------------------------------------------------------


def record(decision: str, tool: str, **fields: object) -> bytes:
    made = AuditRecord(
        time="2026-11-30T11:00:22.123Z",
        workspace=str(fields.pop("workspace", "/srv/elsewhere")),
        event="tool_call",
        decision=decision,
        tool=tool,
        took_ms=2.5,
        **fields,  # type: ignore[arg-type]
    )
    return msgspec.json.encode(made) + b"\n"


def test_the_intercepts_pane_tails_the_audit_trail(cli: Cli) -> None:
    cli.start("-e", str(fx(cli)))
    audit = cli.home / "logs" / "audit.jsonl"
    assert not audit.exists()  # nothing decided yet: the pane is empty, and says nothing

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        await until_row(app, pilot, "fx", ready, "ready")
        audit.parent.mkdir(parents=True, exist_ok=True)
        with audit.open("ab") as f:
            f.write(record("allow", "ls"))
            f.write(b'{"time": "torn\n')
            f.write(
                record(
                    "block",
                    "bash",
                    blocked_by="guard",
                    reason="no rm -rf\x1b[2J",
                    guards=[GuardVerdict("guard", "block", 1.0, "no")],
                )
            )
        await until(app, pilot, lambda: "tool_call bash by guard" in screen(app), "the block")
        text = screen(app)
        assert re.search(r"\d\d:\d\d:\d\d allow tool_call ls \(2\.5 ms\) in /srv/elsewhere", text)
        assert "block tool_call bash by guard: no rm -rf\\x1b[2J (2.5 ms)" in text
        assert "1 unreadable line(s) skipped" in text
        assert_no_controls(app)
        with audit.open("ab") as f:
            f.write(record("rewrite", "edit", rewrites=["tidy"], workspace=str(cli.project)))
        # Of this workspace: no "in DIR".
        rewrite = re.compile(r"rewrite tool_call edit rewritten by tidy \(2\.5 ms\)(?! in)")
        await until(app, pilot, lambda: rewrite.search(screen(app)) is not None, "the rewrite")
        await pilot.press("i")
        await until(app, pilot, lambda: "─ intercepts ─" not in screen(app), "the pane hidden")

    run_top(cli, scenario)


# --- zotd going away -------------------------------------------------------------------


def test_the_daemon_stopping_shows_a_message_and_it_reconnects(cli: Cli) -> None:
    ext = fx(cli)
    cli.start("-e", str(ext))

    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        first = await until_row(app, pilot, "fx", ready, "ready")
        stopped = await in_thread(cli.zotd, "stop")
        assert stopped.returncode == 0, stopped
        await until(app, pilot, lambda: "zotd went away" in screen(app), "the message")
        # At once "it closed the connection"; then, trying again, what it finds.
        await until(app, pilot, lambda: "zotd is not running" in screen(app), "why")
        assert "Traceback" not in screen(app)
        await in_thread(cli.start, "-e", str(ext))
        second = await until_row(
            app, pilot, "fx", lambda r: ready(r) and r["PID"] != first["PID"], "back"
        )
        await until(app, pilot, lambda: "zotd went away" not in screen(app), "the message gone")
        cli.pids.update((int(first["PID"]), int(second["PID"])))

    run_top(cli, scenario)


def test_no_daemon_at_first_says_so(cli: Cli) -> None:
    async def scenario(app: TopApp, pilot: Pilot[int]) -> None:
        await until(app, pilot, lambda: "cannot reach zotd" in screen(app), "the message")
        assert str(cli.socket) in screen(app)
        await pilot.press("r")
        await until(app, pilot, lambda: "no extension selected" in screen(app), "the refusal")

    run_top(cli, scenario)
