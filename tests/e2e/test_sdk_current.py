"""The SDK speaks current zot: tool metadata, structured results, interactive
tools and their panels, ``call_tool``, ``tool_prompt``, one-way frames,
``before_agent_start`` and ``tool_cancel``.

Two kinds of test. On the wire (as tests/e2e/test_sdk_wire.py): the SDK
extension runs with this interpreter and the test plays the host over its
stdin and stdout, frame by frame, so that what the SDK sends and how it
takes the host's frames is checked whatever the daemon does with them.
Through a real daemon (as tests/e2e/test_sdk.py): what already works end
to end, seen from an agent's connection.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon
from tests.e2e.test_sdk import install, running, text_of
from tests.e2e.test_sdk_wire import ALWAYS, Start, Wire, call, doc_example, starting, text
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol.extension import TextBlock


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """Starts an extension from its source; kills it at the end of the test."""
    with starting(tmp_path) as run:
        yield run


def registered(wire: Wire) -> dict[str, dict[str, Any]]:
    """Its ``register_tool`` frames, by tool name."""
    return {f["name"]: f for f in wire.opening if f["type"] == "register_tool"}


def command(wire: Wire, rid: str, name: str, args: str = "") -> None:
    wire.send({"type": "command_invoked", "id": rid, "name": name, "args": args})


# --- tool metadata --------------------------------------------------------------------

OPTIONS = """
    import msgspec

    from zotd.sdk import Extension

    ext = Extension("options")


    class Weather(msgspec.Struct):
        city: str
        celsius: float


    @ext.tool(
        output_schema=Weather,
        namespace="weather",
        namespace_description="Weather tools",
        namespace_instructions="Ask for a city.",
        exposure="codemode",
        replay="safe",
    )
    def weather(city: str) -> Weather:
        return Weather(city, 21.5)


    @ext.tool(deferred=True, output_schema={"type": "object", "properties": {"n": {}}})
    def later() -> dict:
        return {"n": 1}


    @ext.tool(interactive=True)
    async def ask(question: str) -> str:
        return question


    @ext.tool
    def plain() -> str:
        return "x"


    for bad in ({"exposure": "everywhere"}, {"replay": "always"}):
        try:
            ext.tool(**bad)
        except ValueError as exc:
            ext.log("refused:", exc)

    ext.run()
"""

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}


def test_register_tool_carries_current_zots_metadata(start: Start) -> None:
    wire = start(OPTIONS)
    tools = registered(wire)
    weather = tools["weather"]
    assert weather["output_schema"] == WEATHER_SCHEMA
    assert (weather["namespace"], weather["namespace_description"]) == ("weather", "Weather tools")
    assert weather["namespace_instructions"] == "Ask for a city."
    assert (weather["exposure"], weather["replay"]) == ("codemode", "safe")
    assert (weather["deferred"], weather["interactive"]) == (False, False)
    later = tools["later"]
    assert later["deferred"] is True
    assert later["output_schema"] == {"type": "object", "properties": {"n": {}}}
    assert tools["ask"]["interactive"] is True
    plain = tools["plain"]
    assert "output_schema" not in plain
    assert (plain["deferred"], plain["interactive"], plain["exposure"]) == (False, False, "")
    # What the host would skip (an unknown exposure) is refused when registering.
    log = wire.stderr()
    assert "refused: unknown exposure 'everywhere'" in log
    assert "refused: unknown replay 'always'" in log


def test_hello_lists_tool_cancel_and_call_tool(start: Start) -> None:
    wire = start(OPTIONS)
    hello = wire.opening[0]
    assert hello["capabilities"][-3:] == ALWAYS == ["cancel", "tool_cancel", "call_tool"]


# --- structured results, markdown, activate_tools -----------------------------------------

STRUCTURED = """
    import msgspec

    from zotd.sdk import Extension, Markdown, Result, tool_error

    ext = Extension("structured")


    class Weather(msgspec.Struct):
        city: str
        celsius: float


    @ext.tool(output_schema=Weather)
    def weather(city: str):
        if city == "nowhere":
            return tool_error("no such city")
        if city == "text":
            return "just text"
        return Weather(city, 21.5)


    @ext.tool(output_schema={"type": "object"})
    def summary() -> Result:
        return Result(
            [Markdown("**2** files"), "plain"], structured={"files": 2}, activate_tools=["later"]
        )


    @ext.tool(deferred=True)
    def later() -> str:
        return "now"


    @ext.tool
    def unstructured() -> dict:
        return {"a": 1}


    ext.run()
"""


def test_a_structured_tool_returns_its_data_and_its_text(start: Start) -> None:
    wire = start(STRUCTURED)
    call(wire, "1", "weather", city="Oslo")
    result = wire.recv()
    assert result["structured_content"] == {"city": "Oslo", "celsius": 21.5}
    assert json.loads(text(result)) == {"city": "Oslo", "celsius": 21.5}
    assert result["is_error"] is False
    # Content and failures are sent as ever: no structured content.
    call(wire, "2", "weather", city="text")
    plain = wire.recv()
    assert text(plain) == "just text" and "structured_content" not in plain
    call(wire, "3", "weather", city="nowhere")
    failed = wire.recv()
    assert failed["is_error"] and "structured_content" not in failed
    # A tool without an output schema: JSON text alone, as before.
    call(wire, "4", "unstructured")
    other = wire.recv()
    assert text(other) == '{"a":1}' and "structured_content" not in other


def test_a_result_with_structured_data_markdown_and_tools_to_activate(start: Start) -> None:
    wire = start(STRUCTURED)
    call(wire, "1", "summary")
    result = wire.recv()
    assert result["content"] == [
        {"type": "text", "text": "**2** files", "format": "markdown"},
        {"type": "text", "text": "plain"},
    ]
    assert result["structured_content"] == {"files": 2}
    assert result["activate_tools"] == ["later"]


# --- tool_cancel, as cancel ------------------------------------------------------------

CANCEL = """
    import asyncio
    import time
    from pathlib import Path

    from zotd.sdk import Extension

    ext = Extension("tool-cancel")


    @ext.tool
    async def slow_async() -> str:
        Path("started").write_text("yes")
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            Path("cancelled").write_text(f"cancelled() is {ext.cancelled()}")
            raise
        return "finished"


    @ext.tool
    def slow_sync() -> str:
        Path("started").write_text("yes")
        limit = time.monotonic() + 600
        while not ext.cancelled() and time.monotonic() < limit:
            time.sleep(0.005)
        Path("cancelled").write_text(f"cancelled() is {ext.cancelled()}")
        return "late, never sent"


    @ext.tool
    def ping() -> str:
        return "pong"


    ext.run()
"""


@pytest.mark.parametrize("tool", ["slow_async", "slow_sync"])
def test_tool_cancel_cancels_the_handler_and_nothing_is_sent(start: Start, tool: str) -> None:
    wire = start(CANCEL)
    call(wire, "1", tool)
    wire.wait_for(wire.tmp / "started")
    wire.send({"type": "tool_cancel", "id": "1"})
    assert wire.wait_for(wire.tmp / "cancelled") == "cancelled() is True"
    wire.send({"type": "tool_cancel", "id": "never-asked"})  # ignored
    time.sleep(0.05)  # (a sync handler's thread has returned by now)
    call(wire, "2", "ping")
    assert text(wire.recv()) == "pong"
    assert wire.rest() == [{"type": "shutdown_ack"}]  # nothing for "1"
    assert "Traceback" not in wire.stderr()


# --- interactive tools and the panels they open -------------------------------------------

INTERACTIVE = """
    from zotd.sdk import Extension

    ext = Extension("asker")


    @ext.tool(interactive=True)
    async def ask(question: str) -> str:
        async with ext.open_panel(
            "ask", title=question, lines=["y: yes", "n: no"], footer="y/n"
        ) as panel:
            async for key in panel:
                if key.text in ("y", "n"):
                    panel.render(title=question, lines=[f"you said {key.text}"])
                    return "yes" if key.text == "y" else "no"
        return "closed without an answer"


    @ext.tool(interactive=True)
    async def pick() -> str:
        panel = ext.open_panel("pick", lines="a\\nb")
        key = await panel.key()
        return "closed" if key is None else f"picked {key.key}"


    @ext.tool(interactive=True)
    def notice(text: str) -> str:
        panel = ext.open_panel("notice", lines=[text])
        panel.render(lines=[text, "(seen)"])
        panel.close()
        panel.close()  # once is enough: nothing more goes out
        return "shown"


    @ext.on_panel_key
    def other(panel_id: str, key: str, text: str) -> None:
        ext.notify(f"on_panel_key: {panel_id} {key}")


    ext.run()
"""


def key(wire: Wire, panel_id: str, name: str, typed: str = "") -> None:
    wire.send({"type": "panel_key", "panel_id": panel_id, "key": name, "text": typed})


def test_an_interactive_tool_opens_a_panel_and_awaits_its_keys(start: Start) -> None:
    wire = start(INTERACTIVE)
    call(wire, "1", "ask", question="Proceed?")
    assert wire.recv() == {
        "type": "open_panel",
        "panel": {"id": "ask", "title": "Proceed?", "lines": ["y: yes", "n: no"], "footer": "y/n"},
    }
    key(wire, "ask", "x", "x")  # not an answer: the tool waits on
    key(wire, "ask", "y", "y")
    rendered, closed, result = (wire.recv() for _ in range(3))
    assert (rendered["type"], rendered["panel_id"]) == ("panel_render", "ask")
    assert rendered["lines"] == ["you said y"]
    assert closed == {"type": "panel_close", "panel_id": "ask"}  # the `async with` ended
    assert (result["id"], text(result)) == ("1", "yes")
    # Its keys went to it alone; other panels' keys still reach @ext.on_panel_key.
    key(wire, "elsewhere", "k")
    assert wire.recv()["message"] == "on_panel_key: elsewhere k"
    assert wire.rest() == [{"type": "shutdown_ack"}]


def test_the_user_closing_the_panel_ends_the_wait(start: Start) -> None:
    wire = start(INTERACTIVE)
    call(wire, "1", "ask", question="Proceed?")
    assert wire.recv()["type"] == "open_panel"
    wire.send({"type": "panel_close", "panel_id": "ask"})
    result = wire.recv()  # no panel_close echoed back: it is closed already
    assert (result["type"], text(result)) == ("tool_result", "closed without an answer")


def test_a_cancelled_call_closes_the_panel_it_opened(start: Start) -> None:
    wire = start(INTERACTIVE)
    call(wire, "1", "pick")
    opened = wire.recv()
    assert opened["panel"]["lines"] == ["a", "b"]
    wire.send({"type": "tool_cancel", "id": "1"})
    assert wire.recv() == {"type": "panel_close", "panel_id": "pick"}
    assert wire.rest() == [{"type": "shutdown_ack"}]  # no result


def test_a_plain_handler_opens_renders_and_closes_a_panel(start: Start) -> None:
    wire = start(INTERACTIVE)
    call(wire, "1", "notice", text="done")
    frames = [wire.recv() for _ in range(4)]
    assert [f["type"] for f in frames] == [
        "open_panel",
        "panel_render",
        "panel_close",
        "tool_result",
    ]
    assert frames[1]["lines"] == ["done", "(seen)"]
    assert text(frames[3]) == "shown"
    assert wire.rest() == [{"type": "shutdown_ack"}]  # one panel_close, not two


# --- call_tool: the extension calls a tool through the host -----------------------------------

CALLS = """
    import asyncio
    from pathlib import Path

    from zotd.sdk import CallToolError, Extension, display

    ext = Extension("caller")


    @ext.tool
    async def relay(path: str) -> str:
        got = await ext.call_tool("read", {"path": path})
        return f"{got.text!r} error={got.is_error} truncated={got.truncated} {got.structured!r}"


    @ext.tool
    async def forward(path: str):
        return await ext.call_tool("read", {"path": path})  # its result, as this one's


    @ext.tool
    async def wait_long() -> str:
        try:
            await ext.call_tool("sleep", {"seconds": 600})
        except asyncio.CancelledError:
            Path("cancelled").write_text("yes")
            raise
        return "unreachable"


    @ext.tool
    async def impatient() -> str:
        try:
            async with asyncio.timeout(0.1):
                await ext.call_tool("sleep", {"seconds": 600})
        except TimeoutError:
            return "gave up"
        return "unreachable"


    @ext.tool
    async def refused() -> str:
        try:
            await ext.call_tool("read", {})
        except CallToolError as exc:
            return f"CallToolError: {exc}"
        return "sent"


    @ext.tool
    def from_a_thread() -> str:
        try:
            asyncio.run(ext.call_tool("read", {}))
        except CallToolError:
            return "wrong: CallToolError"
        except RuntimeError as exc:
            return f"RuntimeError: {exc}"
        return "sent"


    @ext.command("fetch")
    async def fetch(args: str):
        return display((await ext.call_tool("read", {"path": args})).text)


    ext.run()
"""

CAN_CALL = {"capabilities": ["call_tool"]}


def host_result(cid: str, *blocks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"type": "tool_result", "id": cid, "name": "read", "content": list(blocks), **fields}


def test_call_tool_names_its_parent_and_returns_the_hosts_result(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    call(wire, "t1", "relay", path="a.txt")
    call(wire, "t2", "relay", path="b.txt")
    first, second = wire.recv(), wire.recv()
    by_parent = {f["parent_id"]: f for f in (first, second)}
    assert set(by_parent) == {"t1", "t2"}
    one, two = by_parent["t1"], by_parent["t2"]
    assert (one["type"], one["name"], one["args"]) == ("call_tool", "read", {"path": "a.txt"})
    assert two["args"] == {"path": "b.txt"} and one["id"] != two["id"]
    # Answered the other way round: each result goes to its own call.
    wire.send(host_result(two["id"], {"type": "text", "text": "bee"}))
    wire.send(
        host_result(
            one["id"],
            {"type": "text", "text": "hello"},
            truncated=True,
            structured_content={"lines": 1},
        )
    )
    results = {r["id"]: text(r) for r in (wire.recv(), wire.recv())}
    assert results == {
        "t1": "'hello' error=False truncated=True {'lines': 1}",
        "t2": "'bee' error=False truncated=False None",
    }
    # A result no call waits for is dropped, and said so in the log.
    wire.send(host_result("call-99"))
    wire.wait_for_log("dropped a tool_result for 'call-99'")


def test_a_called_tools_result_can_be_returned_as_it_is(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    call(wire, "t1", "forward", path="a.md")
    asked = wire.recv()
    reply = {"type": "text", "text": "# no such file", "format": "markdown"}
    wire.send(host_result(asked["id"], reply, is_error=True))
    result = wire.recv()
    assert (result["id"], result["is_error"], result["content"]) == ("t1", True, [reply])


def test_a_command_calls_with_no_parent(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    command(wire, "c1", "fetch", "a.txt")
    asked = wire.recv()
    assert (asked["type"], asked.get("parent_id")) == ("call_tool", None)
    wire.send(host_result(asked["id"], {"type": "text", "text": "contents"}))
    reply = wire.recv()
    assert (reply["id"], reply["action"], reply["display"]) == ("c1", "display", "contents")


def test_without_the_hosts_capability_nothing_is_sent(start: Start) -> None:
    wire = start(CALLS)  # a hello_ack without capabilities
    call(wire, "t1", "refused")
    result = wire.recv()  # the result itself, not a call_tool
    assert result["type"] == "tool_result", result
    assert text(result) == (
        "CallToolError: the host does not offer call_tool (its hello_ack does not list it)"
    )


def test_call_tool_only_on_the_sdks_loop(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    call(wire, "t1", "from_a_thread")
    result = wire.recv()
    assert result["type"] == "tool_result", result
    assert text(result).startswith("RuntimeError: call_tool() works in async def handlers")


def test_cancelling_the_handler_cancels_its_call(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    call(wire, "t1", "wait_long")
    asked = wire.recv()
    wire.send({"type": "tool_cancel", "id": "t1"})
    assert wire.recv() == {"type": "call_tool_cancel", "id": asked["id"]}
    assert wire.wait_for(wire.tmp / "cancelled") == "yes"
    assert wire.rest() == [{"type": "shutdown_ack"}]


def test_a_timeout_around_the_call_cancels_it(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    call(wire, "t1", "impatient")
    asked = wire.recv()  # never answered
    assert wire.recv() == {"type": "call_tool_cancel", "id": asked["id"]}
    result = wire.recv()
    assert (result["id"], text(result)) == ("t1", "gave up")


def test_a_call_waiting_when_the_host_leaves_fails(start: Start) -> None:
    wire = start(CALLS, **CAN_CALL)
    call(wire, "t1", "relay", path="a.txt")
    assert wire.recv()["type"] == "call_tool"
    (result,) = wire.end_input()  # the extension answers what it was asked, and exits
    assert (result["id"], result["is_error"]) == ("t1", True)
    assert text(result) == "CallToolError: the host closed the extension's stdin"


# --- tool_prompt and the one-way frames ------------------------------------------------------

COMMANDS = """
    from zotd.sdk import Extension, tool_prompt

    ext = Extension("prompter")


    @ext.command("explain")
    def explain(args: str):
        return tool_prompt(f"Explain {args}.", "read", {"path": args})


    @ext.command("bad-prompt")
    def bad_prompt(args: str):
        return tool_prompt("Explain.", "")


    @ext.command("hand-over")
    def hand_over(args: str):
        ext.clear_notes()
        ext.submit("run the tests")
        ext.submit_slash("/todo milk")


    @ext.command("bad-slash")
    def bad_slash(args: str):
        ext.submit_slash("todo milk")


    @ext.command("bad-submit")
    async def bad_submit(args: str):
        ext.submit("   ")


    ext.run()
"""


def test_a_command_answers_tool_prompt(start: Start) -> None:
    wire = start(COMMANDS)
    command(wire, "1", "explain", "a.py")
    reply = wire.recv()
    assert (reply["action"], reply["prompt"], reply["error"]) == (
        "tool_prompt",
        "Explain a.py.",
        "",
    )
    assert (reply["tool_name"], reply["tool_args"]) == ("read", {"path": "a.py"})
    command(wire, "2", "bad-prompt")
    bad = wire.recv()
    assert bad["error"] == "ValueError: tool_prompt() needs the name of the tool to run"
    assert bad["action"] == "noop"


def test_clear_notes_submit_and_submit_slash(start: Start) -> None:
    wire = start(COMMANDS)
    command(wire, "1", "hand-over")
    frames = [wire.recv() for _ in range(4)]
    assert frames[:3] == [
        {"type": "clear_notes"},
        {"type": "submit", "text": "run the tests"},
        {"type": "submit_slash", "text": "/todo milk"},
    ]
    assert (frames[3]["type"], frames[3]["id"]) == ("command_response", "1")
    command(wire, "2", "bad-slash")
    assert wire.recv()["error"].startswith("ValueError: submit_slash() runs a slash command")
    command(wire, "3", "bad-submit")
    assert wire.recv()["error"] == "ValueError: submit() needs some text"
    assert wire.rest() == [{"type": "shutdown_ack"}]


# --- before_agent_start ------------------------------------------------------------------

PROMPTS = """
    from zotd.sdk import Extension, block

    ext = Extension("prompts")


    @ext.before_agent_start
    def system(event: dict):
        ext.log("asked:", event["system_prompt"])
        prompt = event["system_prompt"]
        if prompt == "delete me":
            return ""
        if prompt == "keep me":
            return None
        if prompt == "block me":
            return block("no")
        if prompt == "number":
            return 42
        return prompt + "\\nAnswer in French."


    ext.run()
"""


def ask_prompt(wire: Wire, rid: str, **fields: Any) -> dict[str, Any]:
    wire.send({"type": "event_intercept", "id": rid, "event": "before_agent_start", **fields})
    reply = wire.recv()
    assert reply["type"] == "event_intercept_response" and reply["id"] == rid, reply
    assert not reply.get("block"), reply  # it never blocks
    return reply


def test_before_agent_start_replaces_deletes_or_keeps_the_prompt(start: Start) -> None:
    wire = start(PROMPTS)
    assert wire.opening[-2] == {
        "type": "subscribe",
        "events": [],
        "intercept": ["before_agent_start"],
    }
    replaced = ask_prompt(wire, "1", system_prompt="Be brief.", session_id="s", cwd="/p")
    assert replaced["system_prompt"] == "Be brief.\nAnswer in French."
    assert ask_prompt(wire, "2", system_prompt="delete me")["system_prompt"] == ""
    assert "system_prompt" not in ask_prompt(wire, "3", system_prompt="keep me")
    # A guard's mistakes keep the prompt, and are in its log.
    assert "system_prompt" not in ask_prompt(wire, "4", system_prompt="block me")
    assert "system_prompt" not in ask_prompt(wire, "5", system_prompt="number")
    log = wire.stderr()
    assert "it cannot block or rewrite" in log
    assert "returns a str or None, not int" in log
    # With no prompt to change, the guard is not asked.
    assert "system_prompt" not in ask_prompt(wire, "6")
    assert wire.stderr().count("asked:") == 5


# --- the docs' examples, played through (tests/e2e/test_sdk_docs.py only starts them) ---


def test_docs_interactive_example(start: Start) -> None:
    wire = start(doc_example("ask-user"))
    assert registered(wire)["ask_user"]["interactive"] is True
    call(wire, "1", "ask_user", question="Which?", choices=["tea", "coffee"])
    opened = wire.recv()
    assert (opened["type"], opened["panel"]["lines"]) == ("open_panel", ["> tea", "  coffee"])
    key(wire, "ask-user", "down")
    assert wire.recv()["lines"] == ["  tea", "> coffee"]
    key(wire, "ask-user", "enter", "\n")
    assert wire.recv() == {"type": "panel_close", "panel_id": "ask-user"}
    assert text(wire.recv()) == "coffee"
    call(wire, "2", "ask_user", question="Which?", choices=["tea"])
    assert wire.recv()["type"] == "open_panel"
    key(wire, "ask-user", "escape")
    assert wire.recv()["type"] == "panel_close"
    skipped = wire.recv()
    assert skipped["is_error"] and text(skipped) == "the user did not answer"


def test_docs_call_tool_example(start: Start) -> None:
    wire = start(doc_example("word-count"), **CAN_CALL)
    call(wire, "1", "count_words", path="a.txt")
    asked = wire.recv()
    assert (asked["name"], asked["args"], asked["parent_id"]) == ("read", {"path": "a.txt"}, "1")
    wire.send(host_result(asked["id"], {"type": "text", "text": "one two\nthree"}))
    assert text(wire.recv()) == "a.txt: 3 words"
    call(wire, "2", "count_words", path="b.txt")
    asked = wire.recv()
    wire.send(host_result(asked["id"], {"type": "text", "text": "no such file"}, is_error=True))
    assert text(wire.recv()) == "could not read b.txt: no such file"
    without = start(doc_example("word-count"))
    call(without, "1", "count_words", path="a.txt")
    refused = without.recv()
    assert refused["is_error"] and "does not offer call_tool" in text(refused)


def test_docs_submit_example(start: Start) -> None:
    wire = start(doc_example("nudge"))
    command(wire, "1", "retest", "the parser")
    frames = [wire.recv() for _ in range(4)]
    assert frames[:3] == [
        {"type": "clear_notes"},
        {"type": "notify", "message": "asking for a test run", "level": "info"},
        {"type": "submit", "text": "Run the test suite and fix what fails. Focus on the parser."},
    ]
    assert frames[3]["id"] == "1"
    command(wire, "2", "later", "buy milk")
    assert wire.recv() == {"type": "submit_slash", "text": "/todo buy milk"}


# --- through a real daemon -----------------------------------------------------------------

DAEMON = """
    import asyncio
    from pathlib import Path

    import msgspec

    from zotd.sdk import Extension, Markdown, Result, tool_prompt

    ext = Extension("sdk-current")


    class Weather(msgspec.Struct):
        city: str
        celsius: float


    @ext.tool(output_schema=Weather, namespace="meteo", exposure="direct", replay="idempotent")
    def weather(city: str) -> Weather:
        return Weather(city, 21.5)


    @ext.tool(namespace="meteo", namespace_description="Weather", namespace_instructions="Cities.")
    def find_tools(query: str) -> Result:
        return Result([Markdown(f"**1** tool for {query}")], activate_tools=["forecast"])


    @ext.tool(deferred=True, exposure="deferred")
    def forecast(city: str) -> str:
        return f"{city}: sun"


    @ext.tool(interactive=True)
    async def confirm(question: str) -> str:
        assert ext.host is not None
        (ext.data_dir / "started").write_text("yes")
        go = Path(ext.host.cwd) / "go"
        while not go.exists():
            await asyncio.sleep(0.02)
        return f"confirmed: {question}"


    @ext.tool
    async def hang() -> str:
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            (ext.data_dir / "cancelled").write_text("yes")
            raise
        return "unreachable"


    @ext.command("explain")
    def explain(args: str):
        return tool_prompt(f"Explain {args}.", "read", {"path": args})


    @ext.tool(interactive=True)
    async def ask(question: str) -> str:
        async with ext.open_panel("ask", title=question, lines=["y/n"]) as panel:
            async for key in panel:
                if key.text in ("y", "n"):
                    panel.render(title=question, lines=[f"you said {key.text}"])
                    return "yes" if key.text == "y" else "no"
        return "no answer"


    @ext.tool
    async def count_words(path: str) -> str:
        got = await ext.call_tool("read", {"path": path})
        return f"{len(got.text.split())} words, error={got.is_error}"


    @ext.tool
    async def weather_again(city: str) -> str:
        got = await ext.call_tool("weather", {"city": city})
        return f"{got.structured['celsius']} again, error={got.is_error}"


    @ext.command("hand-over")
    def hand_over(args: str):
        ext.clear_notes()
        ext.submit("run the tests")
        ext.submit_slash("/todo milk")


    @ext.before_agent_start
    def french(event: dict):
        return event["system_prompt"] + " Answer in French."


    ext.run()
"""


async def wait_for_file(path: Path) -> None:
    with trio.fail_after(30):  # a hang guard, generous for a busy machine
        while not path.exists():
            await trio.sleep(0.02)


async def test_tool_metadata_and_structured_results_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, DAEMON) as zot:
        tools = {t.name: t for t in await zot.list_tools()}
        weather = tools["weather"]
        assert weather.output_schema == WEATHER_SCHEMA
        assert (weather.namespace, weather.exposure, weather.replay) == (
            "meteo",
            "direct",
            "idempotent",
        )
        finder = tools["find_tools"]
        assert (finder.namespace_description, finder.namespace_instructions) == (
            "Weather",
            "Cities.",
        )
        assert (tools["forecast"].deferred, tools["forecast"].exposure) == (True, "deferred")
        assert tools["confirm"].interactive and not weather.interactive

        result = await zot.call_tool("weather", {"city": "Oslo"})
        assert not isinstance(result.structured_content, msgspec.UnsetType)
        assert msgspec.json.decode(result.structured_content) == {"city": "Oslo", "celsius": 21.5}
        assert json.loads(text_of(result)) == {"city": "Oslo", "celsius": 21.5}
        found = await zot.call_tool("find_tools", {"query": "rain"})
        assert found.content == [TextBlock("**1** tool for rain", format="markdown")]
        assert found.activate_tools == ["forecast"]


async def test_an_interactive_tool_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # A deadline far shorter than the wait: only an interactive tool outlives it.
    config = msgspec.structs.replace(FAST, tool_timeout=0.3)
    name = install(paths.extensions_dir, DAEMON)
    await start_daemon(config)
    started = paths.home / "data" / name / "started"
    async with connect(paths.socket, cwd=project) as headless:
        refused = await headless.call_tool("confirm", {"question": "Deploy?"})
        assert refused.is_error and "interactive" in text_of(refused)
        assert not started.exists()  # it was never called
    async with connect(paths.socket, cwd=project, capabilities=["interactive"]) as agent:
        answers: list[str] = []

        async def ask() -> None:
            answers.append(text_of(await agent.call_tool("confirm", {"question": "Deploy?"})))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await wait_for_file(started)
            await trio.sleep(1.0)  # past the tool deadline: the user takes their time
            (project / "go").touch()
        assert answers == ["confirmed: Deploy?"]


async def test_tool_cancel_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, DAEMON) as zot:
        (info,) = await zot.list_extensions()
        # zotd sends a `tool_cancel` (not `cancel`) to an extension that lists it.
        assert "tool_cancel" in info.capabilities and "call_tool" in info.capabilities
        with pytest.raises(ZotdError) as err:
            await zot.call_tool("hang", {}, timeout_s=0.3)
        assert err.value.code == "timeout"
        await wait_for_file(paths.home / "data" / "sdk-current" / "cancelled")


async def test_tool_prompt_and_before_agent_start_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, DAEMON) as zot:
        reply = await zot.invoke_command("explain", "a.py")
        assert (reply.action, reply.prompt, reply.error) == ("tool_prompt", "Explain a.py.", "")
        assert (reply.tool_name, reply.tool_args) == ("read", {"path": "a.py"})
        verdict = await zot.intercept_event("before_agent_start", system_prompt="Be brief.")
        assert verdict.system_prompt == "Be brief. Answer in French."


async def next_push(zot: Client) -> ap.Push:
    """The next push frame, but ``extension_state`` (the extension's start)."""
    with trio.fail_after(30):  # a hang guard, generous for a busy machine
        async for frame in zot.notifications():
            if not isinstance(frame, ap.ExtensionStatePush):
                return frame
    raise AssertionError("the connection closed")


async def test_an_interactive_tools_panel_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with (
        running(start_daemon, paths, project, DAEMON, capabilities=["interactive"]) as agent,
        trio.open_nursery() as nursery,
    ):
        answers: list[str] = []

        async def ask() -> None:
            answers.append(text_of(await agent.call_tool("ask", {"question": "Deploy?"})))

        nursery.start_soon(ask)
        opened = await next_push(agent)
        assert isinstance(opened, ap.OpenPanelPush), opened
        assert (opened.extension, opened.panel.id, opened.panel.title) == (
            "sdk-current",
            "ask",
            "Deploy?",
        )
        await agent.panel_key("ask", "y", text="y")
        rendered, closed = await next_push(agent), await next_push(agent)
        assert isinstance(rendered, ap.PanelRenderPush) and rendered.lines == ["you said y"]
        assert isinstance(closed, ap.PanelClosePush) and closed.panel_id == "ask"
    assert answers == ["yes"]


async def test_call_tool_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with (
        running(start_daemon, paths, project, DAEMON, capabilities=["host_tools"]) as agent,
        trio.open_nursery() as nursery,
    ):
        # A tool of the agent's own: zotd asks the agent, which answers.
        counted: list[str] = []

        async def count() -> None:
            counted.append(text_of(await agent.call_tool("count_words", {"path": "a.txt"})))

        nursery.start_soon(count)
        push = await next_push(agent)
        assert isinstance(push, ap.HostToolCallPush), push
        assert (push.extension, push.name, push.args) == ("sdk-current", "read", {"path": "a.txt"})
        await agent.host_tool_result(push.call_id, [TextBlock("one two three")])
        # A tool of an extension, its structured content included.
        again = await agent.call_tool("weather_again", {"city": "Oslo"})
        assert text_of(again) == "21.5 again, error=False"
    assert counted == ["3 words, error=False"]


async def test_one_way_frames_through_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    async with running(start_daemon, paths, project, DAEMON) as zot:
        await zot.subscribe()
        assert (await zot.invoke_command("hand-over")).error == ""
        pushes = [await next_push(zot) for _ in range(3)]
    assert pushes == [
        ap.ClearNotesPush("sdk-current"),
        ap.SubmitPush("sdk-current", "run the tests"),
        ap.SubmitSlashPush("sdk-current", "/todo milk"),
    ]
