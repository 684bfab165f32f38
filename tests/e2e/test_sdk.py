"""The Python SDK (``zotd.sdk``) under a real daemon, as a user of it sees it.

Every test writes a small SDK extension into ``$ZOT_HOME/extensions/``,
starts an in-process daemon, and looks at the extension only through
``zotd.client``: what ``list_tools`` shows, what a call returns, what lands
in the extension's log.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import zotd
from tests.conftest import StartDaemon
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol.agent import CallData, InvokeData, NotifyPush, PanelClosePush, PanelRenderPush
from zotd.protocol.extension import ImageBlock, TextBlock

#: ``Extension("name"`` or ``Extension('name'``: the name an SDK script gives itself.
EXTENSION_NAME = re.compile(r"""\bExtension\(\s*(?:name\s*=\s*)?["']([^"']+)["']""")


def extension_name(source: str) -> str:
    """The name in a script's ``Extension(...)`` call."""
    found: list[str] = EXTENSION_NAME.findall(source)
    assert len(found) == 1, f"expected one Extension(...) call, found {found}"
    return found[0]


def install(root: Path, source: str) -> str:
    """Writes ``source`` as ``root/<name>/main.py`` with its ``extension.json``
    (run by this interpreter, which has zotd installed); returns the name."""
    source = textwrap.dedent(source)
    name = extension_name(source)
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "main.py").write_text(source)
    manifest = {
        "name": name,
        "version": "0.0.1",
        "exec": sys.executable,
        "args": ["main.py"],
        "language": "python",
    }
    (directory / "extension.json").write_text(json.dumps(manifest))
    return name


@asynccontextmanager
async def running(
    start_daemon: StartDaemon, paths: Paths, project: Path, *sources: str, **hello: Any
) -> AsyncIterator[Client]:
    """Installs the extensions, starts a daemon, connects as an agent of
    ``project``, and checks that every extension came up ``ready``."""
    names = [install(paths.extensions_dir, source) for source in sources]
    await start_daemon()
    async with connect(paths.socket, cwd=project, **hello) as zot:
        states = {e.name: (e.state, e.last_error) for e in await zot.list_extensions()}
        for name in names:
            assert states[name][0] == "ready", (
                states[name],
                paths.extension_log(name).read_text(),
            )
        yield zot


def text_of(result: CallData) -> str:
    """The text of a result's one text block."""
    assert len(result.content) == 1, result
    block = result.content[0]
    assert isinstance(block, TextBlock), result
    return block.text


async def log_of(zot: Client, name: str) -> str:
    return "\n".join((await zot.ext_logs(name, lines=500)).lines)


# --- tools: schemas and arguments ------------------------------------------------

TYPED = """
    from typing import Literal

    from zotd.sdk import Extension

    ext = Extension("sdk-typed")


    @ext.tool(description="Forecast for a city.")
    def forecast(
        city: str,
        days: int = 1,
        units: Literal["metric", "imperial"] = "metric",
        hourly: bool = False,
        tags: list[str] | None = None,
    ) -> str:
        return f"{city}|{days!r}|{units}|{hourly!r}|{tags!r}"


    @ext.tool()
    def documented(ratio: float) -> str:
        '''Described by its docstring.'''
        return repr(ratio)


    ext.run()
"""


async def test_typed_tool_schema_is_listed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, TYPED) as zot:
        tools = {t.name: t for t in await zot.list_tools()}
        assert set(tools) == {"forecast", "documented"}
        forecast = tools["forecast"]
        assert (forecast.extension, forecast.description) == ("sdk-typed", "Forecast for a city.")
        assert forecast.schema == {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "default": 1},
                "units": {"enum": ["imperial", "metric"], "default": "metric"},
                "hourly": {"type": "boolean", "default": False},
                "tags": {
                    "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                    "default": None,
                },
            },
            "required": ["city"],
        }
        documented = tools["documented"]
        assert documented.description == "Described by its docstring."
        assert documented.schema == {
            "type": "object",
            "properties": {"ratio": {"type": "number"}},
            "required": ["ratio"],
        }
        # Defaults fill what the model left out; given values arrive converted.
        assert text_of(await zot.call_tool("forecast", {"city": "Oslo"})) == (
            "Oslo|1|metric|False|None"
        )
        result = await zot.call_tool(
            "forecast",
            {"city": "Rome", "days": 3, "units": "imperial", "hourly": True, "tags": ["a"]},
        )
        assert text_of(result) == "Rome|3|imperial|True|['a']"
        assert not result.is_error
        # An integer is a fine float.
        assert text_of(await zot.call_tool("documented", {"ratio": 2})) == "2.0"


async def test_bad_arguments_are_an_error_result_naming_the_field(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, TYPED) as zot:
        (before,) = await zot.list_extensions()
        wrong_type = await zot.call_tool("forecast", {"city": "Oslo", "days": "three"})
        assert wrong_type.is_error
        assert text_of(wrong_type) == ("invalid arguments: Expected `int`, got `str` - at `$.days`")
        missing = await zot.call_tool("forecast", {"days": 2})
        assert missing.is_error
        assert "`city`" in text_of(missing)
        not_in_enum = await zot.call_tool("forecast", {"city": "Oslo", "units": "kelvin"})
        assert not_in_enum.is_error
        assert "`$.units`" in text_of(not_in_enum)
        # Nothing crashed: the same process answers the next call.
        assert text_of(await zot.call_tool("forecast", {"city": "Oslo", "days": 2})).startswith(
            "Oslo|2|"
        )
        (after,) = await zot.list_extensions()
        assert (after.state, after.pid) == ("ready", before.pid)


async def test_explicit_schema_hands_over_a_dict(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        import json

        from zotd.sdk import Extension

        ext = Extension("sdk-explicit")

        SCHEMA = {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "what to look for"}},
            "required": ["q"],
            "additionalProperties": False,
        }


        @ext.tool("search", schema=SCHEMA)
        def find(args):
            '''Searches the notes.'''
            return type(args).__name__ + " " + json.dumps(args, sort_keys=True)


        ext.run()
    """
    async with running(start_daemon, paths, project, source) as zot:
        (tool,) = await zot.list_tools()
        assert (tool.name, tool.description) == ("search", "Searches the notes.")
        assert tool.schema == {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "what to look for"}},
            "required": ["q"],
            "additionalProperties": False,
        }
        result = await zot.call_tool("search", {"q": "trio", "limit": 3})
        assert text_of(result) == 'dict {"limit": 3, "q": "trio"}'
        # As documented: the schema is what the model is told, not a check.
        assert text_of(await zot.call_tool("search", {"q": 5})) == 'dict {"q": 5}'


async def test_struct_parameter(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    source = """
        from typing import Annotated

        import msgspec

        from zotd.sdk import Extension

        ext = Extension("sdk-struct")


        class Where(msgspec.Struct):
            file: str
            line: int


        class Ticket(msgspec.Struct):
            '''A ticket.'''

            title: str
            priority: Annotated[int, msgspec.Meta(ge=1, le=5)] = 3
            where: Where | None = None


        @ext.tool()
        def file_ticket(ticket: Ticket) -> str:
            assert isinstance(ticket, Ticket)
            where = f"{ticket.where.file}:{ticket.where.line}" if ticket.where else "-"
            return f"{type(ticket).__name__} {ticket.title} P{ticket.priority} {where}"


        ext.run()
    """
    async with running(start_daemon, paths, project, source) as zot:
        (tool,) = await zot.list_tools()
        assert tool.schema == {
            "description": "A ticket.",
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "priority": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
                "where": {"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}], "default": None},
            },
            "required": ["title"],
            "$defs": {
                "Where": {
                    "title": "Where",
                    "type": "object",
                    "properties": {"file": {"type": "string"}, "line": {"type": "integer"}},
                    "required": ["file", "line"],
                }
            },
        }
        # The struct's fields are the arguments, at the top level.
        result = await zot.call_tool(
            "file_ticket", {"title": "crash", "where": {"file": "a.py", "line": 7}}
        )
        assert text_of(result) == "Ticket crash P3 a.py:7"
        too_high = await zot.call_tool("file_ticket", {"title": "x", "priority": 9})
        assert too_high.is_error
        assert text_of(too_high) == "invalid arguments: Expected `int` <= 5 - at `$.priority`"
        nested = await zot.call_tool("file_ticket", {"title": "x", "where": {"file": "a.py"}})
        assert nested.is_error
        assert "`line`" in text_of(nested) and "$.where" in text_of(nested)


# --- tools: results ----------------------------------------------------------------

RESULTS = """
    import asyncio

    from zotd.sdk import Extension, Image, Result, tool_error

    ext = Extension("sdk-results")
    PIXELS = bytes(range(256))


    @ext.tool()
    def picture() -> Image:
        return Image(PIXELS)


    @ext.tool()
    def captioned() -> list:
        return ["a caption", Image(PIXELS, "image/webp"), "a footnote"]


    @ext.tool()
    def partial() -> Result:
        return Result(["half of it", Image(b"GIF89a", "image/gif")], is_error=True)


    @ext.tool()
    def refused() -> Result:
        return tool_error("not today")


    @ext.tool()
    def nothing() -> None:
        return None


    @ext.tool()
    def data() -> dict:
        return {"n": 1, "items": [1, 2]}


    def _explode(what: str) -> str:
        raise ValueError(f"the {what} is on fire")


    @ext.tool()
    def broken() -> str:
        return _explode("disk")


    @ext.tool()
    async def broken_async() -> str:
        await asyncio.sleep(0)
        raise KeyError("gone")


    ext.run()
"""


async def test_images_and_several_blocks(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    pixels = base64.b64encode(bytes(range(256))).decode()
    async with running(start_daemon, paths, project, RESULTS) as zot:
        picture = await zot.call_tool("picture")
        assert picture.content == [ImageBlock(mime_type="image/png", data=pixels)]
        assert not picture.is_error
        captioned = await zot.call_tool("captioned")
        assert captioned.content == [
            TextBlock("a caption"),
            ImageBlock(mime_type="image/webp", data=pixels),
            TextBlock("a footnote"),
        ]
        partial = await zot.call_tool("partial")
        assert partial.is_error
        assert partial.content == [
            TextBlock("half of it"),
            ImageBlock(mime_type="image/gif", data=base64.b64encode(b"GIF89a").decode()),
        ]
        refused = await zot.call_tool("refused")
        assert (refused.content, refused.is_error) == ([TextBlock("not today")], True)
        nothing = await zot.call_tool("nothing")
        assert (nothing.content, nothing.is_error) == ([], False)
        data = await zot.call_tool("data")
        assert json.loads(text_of(data)) == {"n": 1, "items": [1, 2]}


async def test_an_exception_is_an_error_result_with_the_traceback_in_the_log(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, RESULTS) as zot:
        result = await zot.call_tool("broken")
        assert result.is_error
        assert text_of(result) == "ValueError: the disk is on fire"
        result = await zot.call_tool("broken_async")
        assert result.is_error
        assert text_of(result) == "KeyError: 'gone'"
        log = await log_of(zot, "sdk-results")
        assert "[sdk-results] tool 'broken' failed:" in log
        assert "Traceback (most recent call last):" in log
        assert re.search(
            r'line \d+, in _explode\n +raise ValueError\(f"the \{what\} is on fire"\)', log
        )
        assert "ValueError: the disk is on fire" in log
        assert "[sdk-results] tool 'broken_async' failed:" in log
        # The extension lives on.
        assert (await zot.list_extensions())[0].state == "ready"
        assert (await zot.call_tool("refused")).content == [TextBlock("not today")]


# --- handlers: sync, async, at the same time -----------------------------------

CONCURRENT = """
    import asyncio
    import threading
    import time
    from pathlib import Path

    from zotd.sdk import Extension, block, display

    ext = Extension("sdk-concurrent")
    arrived = 0
    all_in = None


    @ext.tool()
    def slow(seconds: float) -> str:
        time.sleep(seconds)
        return "slow done"


    @ext.tool()
    def held(gate: str, name: str) -> str:
        # Says it has started, then waits until the test lets it go.
        Path(gate, name + ".started").touch()
        while not Path(gate, "release").exists():
            time.sleep(0.005)
        return name + " released"


    @ext.tool()
    async def together(n: int) -> str:
        # Returns once n calls are waiting here at the same time.
        global arrived, all_in
        if all_in is None:
            all_in = asyncio.Event()
        arrived += 1
        if arrived >= n:
            all_in.set()
        await all_in.wait()
        return "together"


    @ext.tool()
    def where_sync() -> str:
        return threading.current_thread().name


    @ext.tool()
    async def where_async(pause: float = 0.0) -> str:
        await asyncio.sleep(pause)
        return threading.current_thread().name


    @ext.command("where")
    async def where(args: str):
        return display(threading.current_thread().name + " " + args)


    @ext.tool()
    def big(char: str, size: int) -> str:
        ext.notify(char * 1000)  # notifications go out between the replies
        return char * size


    @ext.intercept_tool_call
    def guard(tool_name: str, tool_args: dict):
        if tool_name == "bash":
            return block("no bash: " + threading.current_thread().name)
        return None


    ext.run()
"""


async def test_async_and_sync_handlers(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, CONCURRENT) as zot:
        # A plain function runs in a worker thread, an async one on the loop.
        sync_thread = text_of(await zot.call_tool("where_sync"))
        assert sync_thread != "MainThread"
        assert sync_thread.startswith("sdk-concurrent")
        assert text_of(await zot.call_tool("where_async")) == "MainThread"
        assert (await zot.invoke_command("where", "x")).display == "MainThread x"
        verdict = await zot.intercept("bash", {"command": "ls"})
        assert verdict.block
        assert verdict.extension == "sdk-concurrent"
        assert verdict.reason.startswith("no bash: sdk-concurrent")
        assert not (await zot.intercept("read", {"path": "x"})).block
        # Many async handlers wait at once, not one after the other: none of
        # these returns before all ten are in (one after the other, none would).
        with trio.fail_after(30):  # a hang guard
            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(zot.call_tool, "together", {"n": 10})


@pytest.mark.slow
async def test_a_slow_sync_tool_blocks_neither_other_calls_nor_the_guard(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, CONCURRENT) as zot:
        # Two sync handlers that run until the test lets them go (not for a
        # guessed while): whatever the machine's speed, the rest is answered
        # while both are still running.
        gate = paths.home / "gate"
        gate.mkdir()
        done: list[str] = []

        async def slow(key: str) -> None:
            args = {"gate": str(gate), "name": key}
            assert text_of(await zot.call_tool("held", args)) == f"{key} released"
            done.append(key)

        with trio.fail_after(30):  # a hang guard
            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow, "slow 1")
                nursery.start_soon(slow, "slow 2")
                # Side by side (threads), not one after the other: both have
                # started, and neither has ended.
                while not all((gate / f"slow {i}.started").exists() for i in (1, 2)):
                    await trio.sleep(0.01)
                assert text_of(await zot.call_tool("where_sync")).startswith("sdk-concurrent")
                assert (await zot.intercept("bash", {"command": "ls"})).block
                assert text_of(await zot.call_tool("where_async")) == "MainThread"
                assert done == []
                (gate / "release").touch()
        assert sorted(done) == ["slow 1", "slow 2"]


async def test_replies_never_interleave(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # Replies far bigger than a pipe's buffer, from many threads at once, with
    # notifications in between: each must arrive whole and be the right one.
    size = 300_000
    chars = "abcdefghijklmnopqrstuvwxyz0123"
    async with running(start_daemon, paths, project, CONCURRENT) as zot:
        await zot.subscribe()
        results: dict[str, str] = {}

        async def call(char: str) -> None:
            results[char] = text_of(await zot.call_tool("big", {"char": char, "size": size}))

        with trio.fail_after(30):  # a hang guard
            async with trio.open_nursery() as nursery:
                for char in chars:
                    nursery.start_soon(call, char)
        assert results == {char: char * size for char in chars}
        notes = []
        with trio.fail_after(30):  # a hang guard: until all of them are in
            async for frame in zot.notifications():
                if isinstance(frame, NotifyPush):
                    notes.append(frame.message)
                    if len(notes) == len(chars):
                        break
        assert sorted(notes) == sorted(char * 1000 for char in chars)
        log = await log_of(zot, "sdk-concurrent")
        assert "malformed" not in log


# --- stdout, the log, notifications ---------------------------------------------


async def test_print_goes_to_the_log_not_the_protocol(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # The first request zotd sends an extension has the id "1": a print()
    # that reached stdout would be read as the reply to it.
    source = """
        import subprocess
        import sys

        from zotd.sdk import Extension

        ext = Extension("sdk-print")
        FORGED = '{"type":"tool_result","id":"1","content":[{"type":"text","text":"forged"}]}'


        @ext.tool()
        def chatty() -> str:
            print(FORGED)
            print("a plain print", flush=True)
            sys.stdout.write("written to sys.stdout\\n")
            sys.stdout.flush()
            subprocess.run(["echo", "echoed by a child"], check=True)
            ext.log("through ext.log")
            return "the real reply"


        ext.run()
    """
    async with running(start_daemon, paths, project, source) as zot:
        assert text_of(await zot.call_tool("chatty")) == "the real reply"
        assert text_of(await zot.call_tool("chatty")) == "the real reply"
        log = await log_of(zot, "sdk-print")
        for line in (
            '{"type":"tool_result","id":"1","content":[{"type":"text","text":"forged"}]}',
            "a plain print",
            "written to sys.stdout",
            "echoed by a child",
            "[sdk-print] through ext.log",
        ):
            assert log.count(line) == 2, (line, log)
        assert "malformed" not in log and "no such call" not in log


async def test_notify_reaches_a_subscribed_client(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        from zotd.sdk import Extension, noop

        ext = Extension("sdk-notify")


        @ext.command("announce")
        def announce(args: str):
            ext.notify(f"announced {args}", "success")  # from a worker thread
            return noop()


        @ext.command("warn")
        async def warn(args: str):
            ext.notify(f"careful: {args}", level="warn")  # from the event loop
            return noop()


        ext.run()
    """
    async with running(start_daemon, paths, project, source) as zot:
        await zot.subscribe()
        assert (await zot.invoke_command("announce", "the release")).action == "noop"
        assert (await zot.invoke_command("/warn", "wet floor")).action == "noop"
        notes = []
        with trio.fail_after(30):  # a hang guard
            async for frame in zot.notifications():
                if isinstance(frame, NotifyPush):
                    notes.append(frame)
                    if len(notes) == 2:
                        break
        assert notes == [
            NotifyPush(extension="sdk-notify", level="success", message="announced the release"),
            NotifyPush(extension="sdk-notify", level="warn", message="careful: wet floor"),
        ]


# --- the host, data_dir, commands ----------------------------------------------


async def test_host_carries_the_workspace_and_data_dir_is_under_zot_home(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        import json
        import os

        from zotd.sdk import Extension, display

        ext = Extension("sdk-host")


        @ext.command("host")
        def host(args: str):
            h = ext.host
            return display(json.dumps({
                "cwd": h.cwd,
                "provider": h.provider,
                "model": h.model,
                "zot_version": h.zot_version,
                "protocol_version": h.protocol_version,
                "process_cwd": os.getcwd(),
                "data_dir": str(ext.data_dir),
            }))


        ext.run()
    """
    async with running(
        start_daemon, paths, project, source, provider="anthropic", model="m1"
    ) as zot:
        reply = await zot.invoke_command("host")
        assert (reply.action, reply.error) == ("display", "")
        seen = json.loads(reply.display)
    data_dir = paths.home / "data" / "sdk-host"
    assert seen == {
        "cwd": str(project),
        "provider": "anthropic",
        "model": "m1",
        "zot_version": zotd.__version__,
        "protocol_version": 1,
        "process_cwd": str(paths.extensions_dir / "sdk-host"),
        "data_dir": str(data_dir),
    }
    assert data_dir.is_dir()
    assert data_dir.stat().st_mode & 0o777 == 0o700


async def test_command_responses_map_to_invoke_command(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        from zotd.sdk import Extension, display, error, insert, noop, prompt

        ext = Extension("sdk-commands")


        @ext.command("p", "prompts")
        def p(args: str):
            return prompt(f"prompt {args}")


        @ext.command("/i", "inserts")
        def i(args: str):
            return insert(f"insert {args}")


        @ext.command("d")
        async def d(args: str):
            return display(f"display {args}")


        @ext.command("n")
        def n(args: str):
            return noop()


        @ext.command("e")
        def e(args: str):
            return error(f"error {args}")


        @ext.command("s")
        def s(args: str):
            return f"string [{args}]"


        @ext.command("none")
        def none(args: str):
            return None


        @ext.command("raises")
        def raises(args: str):
            raise RuntimeError("no luck")


        @ext.command("wrong")
        def wrong(args: str):
            return 42


        ext.run()
    """

    def invoked(action: str, field: str = "", text: str = "", error: str = "") -> InvokeData:
        fields: dict[str, Any] = {field: text} if field else {}
        return InvokeData(extension="sdk-commands", action=action, error=error, **fields)

    async with running(start_daemon, paths, project, source) as zot:
        commands = {c.name: c.description for c in await zot.list_commands()}
        assert commands == {
            "p": "prompts",
            "i": "inserts",
            "d": "",
            "n": "",
            "e": "",
            "s": "",
            "none": "",
            "raises": "",
            "wrong": "",
        }
        assert await zot.invoke_command("p", "  a b  ") == invoked("prompt", "prompt", "prompt a b")
        assert await zot.invoke_command("/i", "x") == invoked("insert", "insert", "insert x")
        assert await zot.invoke_command("d", "y") == invoked("display", "display", "display y")
        assert await zot.invoke_command("n") == invoked("noop")
        assert await zot.invoke_command("e", "z") == invoked("noop", error="error z")
        assert await zot.invoke_command("s") == invoked("display", "display", "string []")
        assert await zot.invoke_command("none") == invoked("noop")
        assert await zot.invoke_command("raises") == invoked("noop", error="RuntimeError: no luck")
        wrong = await zot.invoke_command("wrong")
        assert wrong.action == "noop"
        assert "returned int" in wrong.error
        log = await log_of(zot, "sdk-commands")
        assert "[sdk-commands] command /raises failed:" in log
        assert "RuntimeError: no luck" in log


# --- events ---------------------------------------------------------------------


async def test_events_reach_the_observers(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        import json
        import threading

        from zotd.sdk import Extension

        ext = Extension("sdk-events")
        lock = threading.Lock()


        def save(who: str, event: dict) -> None:
            with lock, open(ext.data_dir / "events.jsonl", "a") as f:
                f.write(json.dumps({"who": who, **event}) + "\\n")


        @ext.on("turn_start")
        def first(event: dict) -> None:
            save("sync", event)


        @ext.on("turn_start")
        async def second(event: dict) -> None:
            save("async", event)


        @ext.on("turn_end")
        def broken(event: dict) -> None:
            raise RuntimeError("observer broke")


        @ext.on("tool_call")
        def calls(event: dict) -> None:
            save("tool_call", event)


        ext.run()
    """
    seen = paths.home / "data" / "sdk-events" / "events.jsonl"

    async def lines(count: int) -> list[dict[str, Any]]:
        with trio.fail_after(30):  # a hang guard
            while True:
                found = seen.read_text().splitlines() if seen.exists() else []
                if len(found) >= count:
                    # (less what zotd adds to every event: its cwd and sequence)
                    read = [json.loads(line) for line in found]
                    for e in read:
                        assert e.pop("cwd") == str(project) and e.pop("sequence") > 0
                    return sorted(read, key=lambda e: e["who"])
                await trio.sleep(0.02)

    async with running(start_daemon, paths, project, source) as zot:
        (ext,) = await zot.list_extensions()
        assert ext.events == ["tool_call", "turn_end", "turn_start"]
        assert ext.intercepts == []
        assert await zot.emit_event("turn_start", step=3, extra={"k": "v"}) == ["sdk-events"]
        assert await lines(2) == [
            {"who": "async", "event": "turn_start", "step": 3, "extra": {"k": "v"}},
            {"who": "sync", "event": "turn_start", "step": 3, "extra": {"k": "v"}},
        ]
        # A broken observer is logged; the others go on.
        assert await zot.emit_event("turn_end", stop="end_turn") == ["sdk-events"]
        assert await zot.emit_event(
            "tool_call", tool_id="t1", tool_name="read", tool_args={"path": "a.py"}
        ) == ["sdk-events"]
        assert (await lines(3))[2] == {
            "who": "tool_call",
            "event": "tool_call",
            "tool_id": "t1",
            "tool_name": "read",
            "tool_args": {"path": "a.py"},
        }
        assert await zot.emit_event("session_start") == []  # not subscribed
        log = await log_of(zot, "sdk-events")
        assert "[sdk-events] the broken observer failed:" in log
        assert "RuntimeError: observer broke" in log


# --- leaving ----------------------------------------------------------------------


async def wait_for_exit_note(log: Path, limit: float) -> str:
    """The extension's log once zotd noted the process's end."""
    with trio.fail_after(limit):
        while True:
            text = log.read_text()
            if re.search(r"\] (exited with code|was killed by)", text):
                return text
            await trio.sleep(0.01)


async def test_shutdown_is_acknowledged_and_the_extension_exits_at_once(
    start_daemon: StartDaemon, paths: Paths, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="zotd.runtime.extension")
    daemon = await start_daemon()
    name = install(
        paths.extensions_dir,
        """
        import time

        from zotd.sdk import Extension

        ext = Extension("sdk-bye")


        @ext.tool()
        def work() -> str:
            time.sleep(0.01)  # a thread that has come and gone
            return "done"


        ext.run()
        """,
    )
    async with connect(paths.socket, cwd=project) as zot:
        assert text_of(await zot.call_tool("work")) == "done"
        (ext,) = await zot.list_extensions()
        assert ext.state == "ready" and ext.pid is not None
    daemon.request_shutdown()
    log = await wait_for_exit_note(paths.extension_log(name), limit=30)
    assert f"extension {name}: shutdown_ack" in caplog.messages
    assert "exited with code 0" in log
    # Inside FAST.shutdown_timeout (1 s), after which zotd would say so and send
    # SIGTERM: the daemon's own clock is the judge, not a bound of the test's.
    assert "did not exit after shutdown" not in log and "SIGTERM" not in log


async def test_shutdown_does_not_wait_for_a_running_sync_handler(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # A handler sleeping in its thread must not hold the process up: the SDK
    # exits at once, well before zotd would send SIGTERM. (At fb23ce6 it did
    # not: asyncio.run joined the default executor's threads first.)
    daemon = await start_daemon()
    name = install(
        paths.extensions_dir,
        """
        import time

        from zotd.sdk import Extension

        ext = Extension("sdk-busy")


        @ext.tool()
        def slow(seconds: float) -> str:
            ext.notify("slow is running")
            time.sleep(seconds)
            return "done"


        ext.run()
        """,
    )
    async with connect(paths.socket, cwd=project) as zot:
        await zot.subscribe()
        failure: list[str] = []

        async def call() -> None:
            try:
                await zot.call_tool("slow", {"seconds": 10})
            except ZotdError as exc:
                failure.append(exc.code)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            with trio.fail_after(30):  # a hang guard: until the handler is running
                async for frame in zot.notifications():
                    if isinstance(frame, NotifyPush) and frame.message == "slow is running":
                        break
            daemon.request_shutdown()
            log = await wait_for_exit_note(paths.extension_log(name), limit=30)
    assert failure == ["shutting_down"]
    # Within FAST.shutdown_timeout, by the daemon's own clock (see above).
    assert "did not exit after shutdown" not in log, log


def run_by_hand(
    tmp: Path, source: str, *, input: str | None = None, stdin: Any = None
) -> subprocess.CompletedProcess[str]:
    """An SDK extension (``source``) run as someone trying it by hand: frames
    piped in as ``input``, or ``stdin`` a file; its output once it exits."""
    script = tmp / "by_hand.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, str(script)],
        input=input,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ, ZOT_HOME=str(tmp / "home")),
    )


def test_end_of_input_finishes_the_requests_first(short_tmp: Path) -> None:
    # Frames piped in by hand, without `shutdown`: every request is answered
    # before the extension exits, from a pipe or from a regular file.
    source = """
        import time

        from zotd.sdk import Extension

        ext = Extension("by-hand")


        @ext.tool()
        def slowish(n: int) -> str:
            time.sleep(0.2)
            return f"answer {n}"


        ext.run()
        """
    frames = "".join(
        json.dumps({"type": "tool_call", "id": str(n), "name": "slowish", "args": {"n": n}}) + "\n"
        for n in (1, 2)
    )
    (short_tmp / "frames.txt").write_text(frames)
    for stdin in ("pipe", "file"):
        with open(short_tmp / "frames.txt") as file:
            out = run_by_hand(
                short_tmp,
                source,
                input=frames if stdin == "pipe" else None,
                stdin=file if stdin == "file" else None,
            )
        assert out.returncode == 0, out.stderr
        replies = [json.loads(line) for line in out.stdout.splitlines()]
        assert [r["type"] for r in replies[:3]] == ["hello", "register_tool", "ready"]
        answers = {r["id"]: r["content"] for r in replies[3:]}
        assert answers == {str(n): [{"type": "text", "text": f"answer {n}"}] for n in (1, 2)}, stdin


def test_run_with_dev_null_as_stdin_it_says_hello_and_exits(short_tmp: Path) -> None:
    """``/dev/null`` is a device the event loop cannot wait on: read as a
    file, it ends at once (it used to hang, waiting for a line)."""
    source = "from zotd.sdk import Extension\n\nExtension('idle').run()\n"
    out = run_by_hand(short_tmp, source, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["type"] for line in out.stdout.splitlines()] == ["hello", "ready"]
    assert out.stderr == ""


def test_blank_lines_from_the_host_are_skipped_quietly(short_tmp: Path) -> None:
    source = """
        from zotd.sdk import Extension

        ext = Extension("echo")


        @ext.tool()
        def echo(text: str) -> str:
            return text


        ext.run()
        """
    call = json.dumps({"type": "tool_call", "id": "1", "name": "echo", "args": {"text": "hi"}})
    out = run_by_hand(short_tmp, source, input=f"\n  \n{call}\n\n")
    assert out.returncode == 0, out.stderr
    replies = [json.loads(line) for line in out.stdout.splitlines()]
    assert replies[-1]["content"] == [{"type": "text", "text": "hi"}]
    assert "malformed" not in out.stderr, out.stderr


def test_importing_the_sdk_loads_neither_trio_nor_anyio() -> None:
    code = (
        "import sys, zotd.sdk\n"
        "heavy = {'trio', 'anyio', 'zotd.runtime.daemon', 'zotd.client', 'zotd.runtime.workspace'}\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.strip() == "[]", out.stdout


# --- bugs ---------------------------------------------------------------------------


async def test_an_unencodable_result_still_gets_a_reply(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        import os

        from zotd.sdk import Extension

        ext = Extension("sdk-surrogate")


        @ext.tool()
        def listing() -> str:
            return os.fsdecode(b"caf\\xe9.txt")  # 'caf\\udce9.txt'


        ext.run()
    """
    async with running(start_daemon, paths, project, source) as zot:
        # Any reply will do (an error result, or the name made encodable);
        # the bug is that none comes and the call times out.
        result = await zot.call_tool("listing", timeout_s=1.0)
        assert result.extension == "sdk-surrogate"


async def test_annotated_constraints_on_plain_parameters(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        from typing import Annotated

        import msgspec

        from zotd.sdk import Extension

        ext = Extension("sdk-annotated")


        @ext.tool()
        def forecast(
            city: Annotated[str, msgspec.Meta(description="a city name")],
            days: Annotated[int, msgspec.Meta(ge=1, le=7)] = 1,
        ) -> str:
            return f"{city} {days}"


        ext.run()
    """
    async with running(start_daemon, paths, project, source) as zot:
        (tool,) = await zot.list_tools()
        assert tool.schema["properties"]["city"] == {"type": "string", "description": "a city name"}
        assert tool.schema["properties"]["days"]["maximum"] == 7
        result = await zot.call_tool("forecast", {"city": "Oslo", "days": 100})
        assert result.is_error


async def test_a_bare_tool_decorator_registers_or_fails_loudly(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    source = """
        from zotd.sdk import Extension

        ext = Extension("sdk-bare")


        @ext.tool
        def weather(city: str) -> str:
            return city


        ext.run()
    """
    name = install(paths.extensions_dir, source)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        (ext,) = await zot.list_extensions()
        # Either works: the tool is there, or the mistake is reported.
        assert ext.tools == ["weather"] or (
            ext.state == "failed" and "Traceback" in paths.extension_log(name).read_text()
        )


def test_extension_name_is_read_from_the_source() -> None:
    assert extension_name('ext = Extension("a-b", "1.0.0")') == "a-b"
    assert extension_name("ext = Extension(name='x')") == "x"


# --- beyond the reference, through the daemon ------------------------------------

NEWER = """
    import asyncio
    from pathlib import Path

    from zotd.sdk import Extension, Panel, replace_text, rewrite

    ext = Extension("sdk-newer")


    @ext.tool()
    def crunch(n: int) -> str:
        for i in range(n):
            ext.progress(f"chunk {i + 1}", i + 1, n)
            import time
            time.sleep(0.2)  # well past the SDK's merging interval (0.05 s), on a busy machine too
        return "crunched"


    @ext.tool()
    async def wait() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            (ext.data_dir / "cancelled").write_text("yes")
            raise
        return "never"


    @ext.intercept("tool_call")
    def quiet(event):
        if event.get("tool_name") == "bash":
            return rewrite({**event["tool_args"], "quiet": True})


    @ext.intercept("assistant_message")
    def polite(event):
        return replace_text(event["text"].replace("darn", "d**n"))


    @ext.command("picker")
    def picker(args: str):
        return Panel("pick", "Pick one", ["> red", "  blue"], "enter to choose")


    @ext.on_panel_key
    def key(panel_id, key, text):
        if key == "down":
            return Panel(panel_id, "Pick one", ["  red", "> blue"], "enter to choose")
        if key == "enter":
            ext.close_panel(panel_id)


    ext.run()
"""


async def test_what_goes_beyond_the_reference_works_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, NEWER) as zot:
        progress: list[tuple[str, float | None, float | None]] = []
        result = await zot.call_tool(
            "crunch",
            {"n": 3},
            on_progress=lambda p: progress.append((p.message, p.progress, p.total)),
        )
        assert text_of(result) == "crunched"
        assert progress == [("chunk 1", 1, 3), ("chunk 2", 2, 3), ("chunk 3", 3, 3)]

        with pytest.raises(ZotdError) as err:
            await zot.call_tool("wait", {}, timeout_s=0.3)
        assert err.value.code == "timeout"
        marker = paths.home / "data" / "sdk-newer" / "cancelled"
        with trio.fail_after(30):  # a hang guard
            while not marker.exists():
                await trio.sleep(0.02)

        verdict = await zot.intercept("bash", {"command": "make"})
        assert (verdict.block, verdict.args) == (False, {"command": "make", "quiet": True})
        message = await zot.intercept_event("assistant_message", text="darn it")
        assert message.text == "d**n it"

        opened = await zot.invoke_command("picker")
        assert opened.open_panel is not None and opened.open_panel.lines[0] == "> red"
        await zot.panel_key("pick", "down")
        await zot.panel_key("pick", "enter")
        pushes = []
        with trio.fail_after(30):  # a hang guard
            async for frame in zot.notifications():
                pushes.append(frame)
                if len(pushes) == 2:
                    break
        assert pushes == [
            PanelRenderPush(
                "sdk-newer", "pick", "Pick one", ["  red", "> blue"], "enter to choose"
            ),
            PanelClosePush("sdk-newer", "pick"),
        ]
