"""An SDK extension is ready before it loads asyncio: what it imports before ``ready``.

An extension's start is mostly its imports, so the SDK writes its handshake
(``hello``, the registrations, ``subscribe``, ``ready``) before it imports
its runtime, and asyncio with it (see ``zotd/sdk/extension.py``). These
tests check that structurally, never by the clock: a real extension process
runs with a spy on its imports (a finder first on ``sys.meta_path``) that
notes, as each module starts to load, whether ``ready`` had been written by
then. The extension's stdout is a regular file, so the spy reads exactly
what had been written when each import began: no race with a reader.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

#: A hang guard for the extension's run, generous for a busy machine.
DEADLINE = 30.0

#: What the SDK leaves until the handshake is out: asyncio and the heavy
#: modules under it, ``data_dir``'s platformdirs, the protocol's decoders,
#: and its own event loop's half.
DEFERRED = {
    "asyncio",
    "concurrent.futures",
    "ssl",
    "platformdirs",
    "zotd.protocol.extension",
    "zotd.sdk.runtime",
    "zotd.sdk.bridge",
    "zotd.sdk.reader",
    "zotd.sdk.calls",
}

#: Put before the extension's code: notes each module whose import begins,
#: "before" or "after" the ``ready`` line is in the frames' file.
SPY = """
import os
import sys

FRAMES = os.environ["SPY_FRAMES"]
REPORT = open(os.environ["SPY_REPORT"], "a", buffering=1)


class Spy:
    def find_spec(self, name, path=None, target=None):
        with open(FRAMES, "rb") as frames:
            ready = b'{"type":"ready"}' in frames.read()
        REPORT.write(f"{name} {'after' if ready else 'before'}\\n")
        return None


sys.meta_path.insert(0, Spy())
"""

#: An extension with every kind of handler (every decorator runs before
#: ``ready``), importing every public name of the SDK.
EVERYTHING = """
from typing import Annotated

import msgspec

from zotd.sdk import *  # noqa: F403
from zotd.sdk import Extension, Panel, block, prompt

ext = Extension("startup", "1.0.0")


class Ticket(msgspec.Struct):
    title: str
    priority: Annotated[int, msgspec.Meta(ge=1, le=5)] = 3


@ext.command("hello", "say hi")
def hello(args: str):
    return prompt(f"Greet {args or 'me'}.")


@ext.tool(description="Says it again, on the event loop.")
async def echo(text: str, times: int = 1) -> str:
    import asyncio  # loaded by run() by now

    await asyncio.sleep(0)
    return text * times


@ext.tool(output_schema=Ticket)
def file_ticket(ticket: Ticket) -> Ticket:
    \"\"\"Files a ticket.\"\"\"
    return ticket


@ext.tool(interactive=True, deferred=True, exposure="codemode", namespace="desk", replay="safe")
async def ask(question: str) -> str:
    \"\"\"Asks the user.\"\"\"
    return question


@ext.on("turn_end")
def seen(event: dict) -> None:
    pass


@ext.intercept_tool_call
def careful(tool_name: str, tool_args: dict):
    return block("no") if tool_name == "rm" else None


@ext.intercept("assistant_message")
def tidy(event: dict):
    return None


@ext.before_agent_start
def system(event: dict):
    return None


@ext.on_panel_key
def key(panel_id: str, key: str, text: str):
    return Panel(panel_id, lines=[key])


@ext.on_panel_resize
def resize(panel_id: str, width: int, height: int):
    return None


@ext.on_panel_close
def close(panel_id: str):
    return None


ext.run()
"""


def run_spied(tmp: Path, source: str, host: list[dict[str, Any]]) -> tuple[list[Any], Path]:
    """Runs ``source`` under the spy, its stdin ``host``'s frames and then
    closed; its frames (from the file its stdout was), and the spy's report."""
    script = tmp / "ext.py"
    script.write_text(SPY + textwrap.dedent(source))
    frames_path, report = tmp / "frames.jsonl", tmp / "imports.txt"
    env = dict(
        os.environ, ZOT_HOME=str(tmp / "home"), SPY_FRAMES=str(frames_path), SPY_REPORT=str(report)
    )
    with open(frames_path, "wb") as out, open(tmp / "stderr.log", "wb") as err:
        process = subprocess.Popen(
            [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=out, stderr=err, env=env
        )
        assert process.stdin is not None
        process.stdin.write(b"".join(json.dumps(f).encode() + b"\n" for f in host))
        process.stdin.close()  # the extension answers what it was asked, then leaves
        try:
            code = process.wait(timeout=DEADLINE)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    log = (tmp / "stderr.log").read_text(errors="replace")
    assert code == 0, log
    assert "skipped" not in log and "failed" not in log, log
    return [json.loads(line) for line in frames_path.read_bytes().splitlines()], report


def imports(report: Path) -> tuple[set[str], set[str]]:
    """The modules whose import began before ``ready`` was written, and after."""
    before: set[str] = set()
    after: set[str] = set()
    for line in report.read_text().splitlines():
        name, when = line.split()
        (before if when == "before" else after).add(name)
    return before, after


HELLO_ACK = {
    "type": "hello_ack",
    "protocol_version": 1,
    "zot_version": "test",
    "provider": "",
    "model": "",
    "cwd": "/",
}


def test_the_handshake_is_written_before_asyncio_is_imported(tmp_path: Path) -> None:
    echo = {"type": "tool_call", "id": "1", "name": "echo", "args": {"text": "hi", "times": 2}}
    frames, report = run_spied(tmp_path, EVERYTHING, [HELLO_ACK, echo])

    kinds = [f["type"] for f in frames]
    ready = kinds.index("ready")
    assert kinds[: ready + 1] == [
        "hello",
        "register_command",
        "register_tool",
        "register_tool",
        "register_tool",
        "subscribe",
        "ready",
    ]
    # ... and it still answers, with its async def handler on the event loop.
    [result] = frames[ready + 1 :]
    assert (result["type"], result["id"], result["is_error"]) == ("tool_result", "1", False)
    assert result["content"] == [{"type": "text", "text": "hihi"}]

    before, after = imports(report)
    assert not DEFERRED & before, f"imported before `ready`: {sorted(DEFERRED & before)}"
    # The spy saw the runtime load them once the handshake was out.
    assert {"asyncio", "zotd.sdk.runtime", "zotd.protocol.extension"} <= after


def test_data_dir_loads_platformdirs_when_a_handler_asks(tmp_path: Path) -> None:
    source = """
    from zotd.sdk import Extension

    ext = Extension("dirs", "1.0.0")


    @ext.tool(description="Where the extension keeps its state.")
    def where() -> str:
        return str(ext.data_dir)


    ext.run()
    """
    where = {"type": "tool_call", "id": "1", "name": "where", "args": {}}
    frames, report = run_spied(tmp_path, source, [HELLO_ACK, where])

    assert [f["type"] for f in frames] == ["hello", "register_tool", "ready", "tool_result"]
    directory = tmp_path / "home" / "data" / "dirs"
    assert frames[-1]["content"] == [{"type": "text", "text": str(directory)}]
    assert directory.is_dir()
    before, after = imports(report)
    assert not DEFERRED & before, f"imported before `ready`: {sorted(DEFERRED & before)}"
    assert "platformdirs" in after
