"""Every complete example of docs/sdk.md runs, under a real daemon.

Each fenced ```python block of the page is a whole extension (illustrative
pieces are fenced ```python fragment and skipped). For each one this test
writes it out with an ``extension.json`` named after its ``Extension(...)``,
starts a daemon, and checks that it comes up ``ready`` with the commands,
tools, events and guard its decorators declare (read from the source with
``ast``), with no traceback in its log; for most it also makes one call and
looks at the answer.
"""

from __future__ import annotations

import ast
import base64
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import StartDaemon
from tests.e2e.test_sdk import EXTENSION_NAME, install
from zotd.client import Client, connect
from zotd.model.paths import Paths
from zotd.protocol.agent import NotifyPush
from zotd.protocol.extension import ImageBlock, TextBlock

DOC = Path(__file__).parents[2] / "docs" / "sdk.md"

#: A fenced block: its info string and its body (fences at the start of a line).
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[str]:
    """The complete ```python blocks of a Markdown text (not ```python fragment)."""
    # An indented python fence (in a list item) would be skipped by FENCE:
    # refuse it rather than test less than the page shows.
    indented = re.findall(r"^[ \t]+```python.*$", text, re.MULTILINE)
    assert not indented, f"indented python blocks are not checked: {indented}"
    blocks = []
    for match in FENCE.finditer(text):
        info = match.group(1).split()
        if info[:1] != ["python"]:
            continue
        assert info in (["python"], ["python", "fragment"]), f"unknown fence ```{match.group(1)}"
        if info == ["python"]:
            blocks.append(match.group(2))
    return blocks


@dataclass
class Declared:
    """What an example's decorators register."""

    commands: set[str] = field(default_factory=set)
    tools: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    intercepts: set[str] = field(default_factory=set)


def _string(node: ast.expr) -> str:
    assert isinstance(node, ast.Constant) and isinstance(node.value, str), ast.dump(node)
    return node.value


def declared(source: str) -> Declared:
    """The registrations of ``@ext.command/tool/on/intercept/intercept_tool_call``
    and ``@ext.before_agent_start`` in ``source``."""
    found = Declared()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in node.decorator_list:
            if isinstance(dec, ast.Attribute) and dec.attr == "intercept_tool_call":
                found.intercepts.add("tool_call")
            if isinstance(dec, ast.Attribute) and dec.attr == "before_agent_start":
                found.intercepts.add("before_agent_start")
            if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)):
                continue
            kind = dec.func.attr
            keywords = {k.arg: k.value for k in dec.keywords}
            if kind == "command":
                found.commands.add(_string(dec.args[0]).removeprefix("/"))
            elif kind == "tool":
                name = keywords.get("name") or (dec.args[0] if dec.args else None)
                found.tools.add(node.name if name is None else _string(name))
            elif kind == "on":
                found.events.add(_string(dec.args[0]))
            elif kind == "intercept":
                found.intercepts.add(_string(dec.args[0]))
    return found


BLOCKS = python_blocks(DOC.read_text())


def _id(index: int, block: str) -> str:
    found: list[str] = EXTENSION_NAME.findall(block)
    return found[0] if len(found) == 1 else f"block-{index + 1}"


#: Test ids; a block without one ``Extension(...)`` fails in its own test.
NAMES = [_id(i, block) for i, block in enumerate(BLOCKS)]


def text_of(content: list[TextBlock | ImageBlock]) -> str:
    return "\n".join(b.text for b in content if isinstance(b, TextBlock))


# --- one cheap call per example, where there is one ------------------------------

Check = Callable[[Client, Paths, Path], Awaitable[None]]


async def check_hello(zot: Client, paths: Paths, project: Path) -> None:
    reply = await zot.invoke_command("hello", "Ada")
    assert (reply.action, reply.prompt) == ("prompt", "Greet Ada in one short sentence.")
    result = await zot.call_tool("weather", {"city": "Oslo"})
    assert result.content == [TextBlock("Oslo: sunny, 21 °C")]


async def check_snippets(zot: Client, paths: Paths, project: Path) -> None:
    reply = await zot.invoke_command("snippet", "review")
    assert reply.action == "insert" and reply.insert.startswith("Review the staged")
    assert (await zot.invoke_command("snippet", "nope")).error == "no snippet named 'nope'"
    assert (await zot.invoke_command("snippet")).display == "snippets: explain, review"
    assert (await zot.invoke_command("review", "tests")).prompt == (
        "Review the staged changes, focusing on tests."
    )


async def check_forecast(zot: Client, paths: Paths, project: Path) -> None:
    (tool,) = await zot.list_tools()
    assert tool.schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "default": 1},
            "units": {"enum": ["imperial", "metric"], "default": "metric"},
        },
        "required": ["city"],
    }
    result = await zot.call_tool("forecast", {"city": "Oslo", "days": 2})
    assert text_of(result.content) == "Oslo, day 1: 20 °C\nOslo, day 2: 20 °C"
    bad = await zot.call_tool("forecast", {"city": "Oslo", "days": "two"})
    assert bad.is_error
    assert text_of(bad.content) == "invalid arguments: Expected `int`, got `str` - at `$.days`"
    missing = await zot.call_tool("forecast", {})
    assert text_of(missing.content) == "invalid arguments: Object missing required field `city`"


async def check_swatch(zot: Client, paths: Paths, project: Path) -> None:
    result = await zot.call_tool("swatch", {"color": "red", "size": 4})
    caption, image = result.content
    assert caption == TextBlock("a 4x4 red square:")
    assert isinstance(image, ImageBlock) and image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    assert (await zot.call_tool("swatch", {"color": "mauve"})).is_error


async def check_lines(zot: Client, paths: Paths, project: Path) -> None:
    (project / "notes.txt").write_text("one\ntwo\nthree\n")
    result = await zot.call_tool("read_lines", {"path": "notes.txt", "start": 2})
    assert not result.is_error
    assert text_of(result.content) == "    2 two\n    3 three\n(3 lines in all)"
    assert (await zot.call_tool("read_lines", {"path": "missing.txt"})).is_error
    assert (await zot.call_tool("read_lines", {"path": "../../etc/passwd"})).is_error
    past = await zot.call_tool("read_lines", {"path": "notes.txt", "start": 9})
    assert past.is_error and text_of(past.content) == "notes.txt has only 3 lines"


async def check_glossary(zot: Client, paths: Paths, project: Path) -> None:
    (tool,) = await zot.list_tools()
    assert tool.schema["additionalProperties"] is False
    assert text_of((await zot.call_tool("define", {"term": "WAL"})).content) == "write-ahead log"
    assert (await zot.call_tool("define", {"term": 3})).is_error


async def check_tickets(zot: Client, paths: Paths, project: Path) -> None:
    (tool,) = await zot.list_tools()
    assert tool.schema["description"] == "A bug report for the team's tracker."
    assert set(tool.schema["properties"]) == {"title", "priority", "labels", "where"}
    assert tool.schema["properties"]["priority"]["maximum"] == 5
    assert set(tool.schema["$defs"]) == {"Location"}
    result = await zot.call_tool(
        "file_ticket", {"title": "crash on start", "where": {"file": "a.py", "line": 3}}
    )
    assert text_of(result.content) == "filed P3 'crash on start' at a.py:3 []"
    bad = await zot.call_tool("file_ticket", {"title": "crash", "priority": 9})
    assert text_of(bad.content) == "invalid arguments: Expected `int` <= 5 - at `$.priority`"


async def check_activity(zot: Client, paths: Paths, project: Path) -> None:
    delivered = await zot.emit_event(
        "tool_call", tool_id="t1", tool_name="read", tool_args={"path": "a.py"}
    )
    assert delivered == ["activity"]
    seen = paths.home / "data" / "activity" / "tool-calls.jsonl"
    with trio.fail_after(30):  # a hang guard, generous for a busy machine
        while not (seen.exists() and seen.read_text().endswith("\n")):
            await trio.sleep(0.02)
    assert json.loads(seen.read_text()) == {"tool": "read", "args": {"path": "a.py"}}


async def check_guard(zot: Client, paths: Paths, project: Path) -> None:
    verdict = await zot.intercept("bash", {"command": "rm -rf /tmp/x"})
    assert verdict.block and verdict.extension == "guard"
    assert verdict.reason == "refused: 'rm -rf /tmp/x' matches 'rm -rf'"
    assert not (await zot.intercept("bash", {"command": "ls"})).block
    assert not (await zot.intercept("read", {"path": "rm -rf"})).block


async def check_workers(zot: Client, paths: Paths, project: Path) -> None:
    texts: list[str] = []

    async def build() -> None:
        texts.append(text_of((await zot.call_tool("build", {"target": "docs"})).content))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(build)
        nursery.start_soon(zot.call_tool, "pause", {"seconds": 0.05})
    assert sorted(texts) == [f"build #{n} of docs: ok" for n in (1, 2, 3)]


async def check_visits(zot: Client, paths: Paths, project: Path) -> None:
    await zot.subscribe()
    first = await zot.invoke_command("visits")
    assert first.display == f"{project}: visit 1 (model unknown)"
    assert (await zot.invoke_command("visits")).display.startswith(f"{project}: visit 2")
    with trio.fail_after(30):  # a hang guard, generous for a busy machine
        async for frame in zot.notifications():
            if isinstance(frame, NotifyPush):
                assert frame == NotifyPush("visits", "success", f"first visit to {project}")
                break


async def check_explainer(zot: Client, paths: Paths, project: Path) -> None:
    reply = await zot.invoke_command("explain", "app.py")
    assert (reply.action, reply.prompt) == (
        "tool_prompt",
        "Explain what app.py does, for a newcomer.",
    )
    assert (reply.tool_name, reply.tool_args) == ("read", {"path": "app.py"})
    assert (await zot.invoke_command("explain")).error == "which file? /explain PATH"


async def check_meteo(zot: Client, paths: Paths, project: Path) -> None:
    tools = {t.name: t for t in await zot.list_tools()}
    assert set(tools["reading"].output_schema["required"]) == {"city", "celsius", "sky"}
    oslo = await zot.call_tool("reading", {"city": "Oslo"})
    assert text_of(oslo.content) == '{"city":"Oslo","celsius":4.5,"sky":"snow"}'
    assert not isinstance(oslo.structured_content, msgspec.UnsetType)
    assert msgspec.json.decode(oslo.structured_content) == json.loads(text_of(oslo.content))
    missing = await zot.call_tool("reading", {"city": "Paris"})
    assert missing.is_error and missing.structured_content is msgspec.UNSET
    warm = await zot.call_tool("warm_cities", {})
    assert text_of(warm.content) == "1 warm: Rome"
    assert not isinstance(warm.structured_content, msgspec.UnsetType)
    assert msgspec.json.decode(warm.structured_content) == {"warm": ["Rome"]}


async def check_toolbox(zot: Client, paths: Paths, project: Path) -> None:
    tools = {t.name: t for t in await zot.list_tools()}
    assert {n: t.deferred for n, t in tools.items()} == {
        "find_converter": False,
        "c_to_f": True,
        "km_to_mi": True,
    }
    assert {t.namespace for t in tools.values()} == {"units"}
    found = await zot.call_tool("find_converter", {"query": "celsius"})
    assert found.activate_tools == ["c_to_f"]
    assert found.content == [TextBlock("- `c_to_f`: Celsius to Fahrenheit", format="markdown")]
    assert text_of((await zot.call_tool("c_to_f", {"celsius": 100})).content) == "212 °F"


async def check_house_style(zot: Client, paths: Paths, project: Path) -> None:
    verdict = await zot.intercept_event("before_agent_start", system_prompt="You are zot.")
    style = "Answer in British English, in at most 200 words."
    assert verdict.system_prompt == f"You are zot.\n\n{style}"
    again = await zot.intercept_event("before_agent_start", system_prompt=style)
    assert again.system_prompt == style  # kept


CHECKS: dict[str, Check] = {
    "hello": check_hello,
    "snippets": check_snippets,
    "forecast": check_forecast,
    "swatch": check_swatch,
    "lines": check_lines,
    "glossary": check_glossary,
    "tickets": check_tickets,
    "activity": check_activity,
    "guard": check_guard,
    "workers": check_workers,
    "visits": check_visits,
    "explainer": check_explainer,
    "meteo": check_meteo,
    "toolbox": check_toolbox,
    "house-style": check_house_style,
}


def test_the_page_has_its_examples() -> None:
    text = DOC.read_text()
    assert len(BLOCKS) >= 10
    assert "```python fragment" in text  # fragments exist, and are skipped
    # One extension per name, and every check still finds its example.
    assert len(set(NAMES)) == len(NAMES), NAMES
    assert set(CHECKS) <= set(NAMES), set(CHECKS) - set(NAMES)


@pytest.mark.parametrize("source", BLOCKS, ids=NAMES)
async def test_example_runs(
    source: str, start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    name = install(paths.extensions_dir, source)
    want = declared(source)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        (ext,) = await zot.list_extensions()
        log = paths.extension_log(name).read_text()
        assert ext.state == "ready", (ext.state, ext.last_error, log)
        commands = {c.name for c in await zot.list_commands() if c.extension == name}
        tools = {t.name for t in await zot.list_tools() if t.extension == name}
        assert (commands, tools) == (want.commands, want.tools), log
        assert (set(ext.events), set(ext.intercepts)) == (want.events, want.intercepts)
        assert want.commands or want.tools or want.events or want.intercepts
        check = CHECKS.get(name)
        if check is not None:
            await check(zot, paths, project)
        log = paths.extension_log(name).read_text()
        assert "Traceback" not in log and "malformed" not in log, log
