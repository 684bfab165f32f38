"""``zot``: what agents and operators ask of a running zotd.

``zot commands``, ``zot tools``, ``zot run /NAME [ARGS]``, ``zot call TOOL
'{json}'``, ``zot events``. Each prints readable text, or JSON with ``--json``.
They talk to the daemon only through :mod:`zotd.client`. What extensions
sent (names, descriptions, output, notes) is printed through
:func:`.output.printable`, so that it cannot drive the terminal.
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream
from cyclopts import App, Parameter

from .. import __version__
from ..client import Client, ZotdError
from ..protocol import agent as ap
from ..protocol.extension import ImageBlock, TextBlock
from . import ext_cli, hook_cli
from .argv import zot_argv
from .common import (
    Options,
    Where,
    die,
    entry,
    print_json,
    run_async,
    settings,
    table,
    token_for,
    with_client,
)
from .output import Progress, printable

app = App(
    name="zot",
    # Flags are switched on, never off: no --no-json, no --no-no-start.
    default_parameter=Parameter(negative=()),
    help="Talk to zotd: run extension commands, call tools, follow events, manage extensions.",
    version=__version__,
)
app.command(ext_cli.app)
app.command(hook_cli.app)
app.command("zotd.cli.skills_cli:skills", name="skills", help="List the extensions' skills.")
app.command("zotd.cli.audit_cli:audit", name="audit", help="Read the intercept audit trail.")
app.command("zotd.cli.top_cli:top", name="top", help="A live view of every extension.")
app.command(
    "zotd.cli.integrate_cli:integrate",
    name="integrate",
    help="Wire zot's hooks and zot mcp into Claude Code, Codex CLI or Gemini CLI.",
)
app.register_install_completion_command(
    help="Install shell completion for zot (bash, zsh or fish; --shell to choose)."
)


@app.command
def commands(*, opts: Options | None = None, where: Where | None = None) -> int:
    """List the slash commands of the workspace's extensions (by name).

    Commands an extension registered but another holds are listed after
    them, on stderr, with who holds each and why.
    """
    o = opts or Options()

    async def body(zot: Client) -> int:
        reply = await zot.list_commands_data()
        found = sorted(reply.commands, key=lambda c: c.name)
        if o.json:
            print_json(found)
            return 0
        if not found:
            print("no commands (no extension registered one)")
        else:
            print(table([_cells(f"/{c.name}", c.description, f"({c.extension})") for c in found]))
        _print_hidden(reply.shadowed, "/")
        return 0

    return with_client(o, where, body)


@app.command
def tools(*, opts: Options | None = None, where: Where | None = None) -> int:
    """List the tools the workspace's extensions offer the model (by name),
    each with its extension, and whether it is deferred, interactive or not
    exposed directly (current zot's tool metadata; `--json` has all of it).

    Tools an extension registered but another holds are listed after them,
    on stderr, with who holds each and why.
    """
    o = opts or Options()

    async def body(zot: Client) -> int:
        reply = await zot.list_tools_data()
        found = sorted(reply.tools, key=lambda t: t.name)
        if o.json:
            print_json(found)
            return 0
        if not found:
            print("no tools (no extension registered one)")
        else:
            print(table([_cells(t.name, t.description, _whose(t)) for t in found]))
        _print_hidden(reply.shadowed, "")
        return 0

    return with_client(o, where, body)


def _whose(tool: ap.ToolInfo) -> str:
    """``(weather)``, with what its metadata says the model sees of it:
    ``(mcp; deferred, interactive, codemode)``."""
    flags = [f for f, on in (("deferred", tool.deferred), ("interactive", tool.interactive)) if on]
    if tool.exposure and tool.exposure != "direct":
        flags.append(tool.exposure)
    return f"({tool.extension}; {', '.join(flags)})" if flags else f"({tool.extension})"


def _cells(*cells: str) -> list[str]:
    """A table row of what extensions registered, each cell on one line, escaped."""
    return [printable(c) for c in cells]


def _print_hidden(shadowed: list[ap.ShadowedInfo], prefix: str) -> None:
    """The registrations the reply says lost their name, on stderr:
    ``hidden: /x of b (a holds it: why)``."""
    for s in sorted(shadowed, key=lambda s: (s.name, s.extension)):
        line = f"hidden: {prefix}{s.name} of {s.extension} ({s.held_by} holds it: {s.reason})"
        print(printable(line), file=sys.stderr)


@app.command
def run(
    name: str,
    /,
    *args: Annotated[str, Parameter(allow_leading_hyphen=True)],
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Run a slash command, as a user typing /NAME ARGS would.

    Prints what the extension answered: the prompt the agent would submit, the
    text to insert or to display, the panel it opened (as it first looks; it
    closes when the command ends). Notes extensions send while it runs go to
    stderr. Exits 1 if the extension reported an error.

    Args:
        name: The command, with or without its slash (/hellopy or hellopy).
        args: Everything after the command name.
    """
    o = opts or Options()

    async def body(zot: Client) -> int:
        await zot.subscribe()  # the notes the command sends while it runs
        failed: ZotdError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(_print_notes, zot)
            try:
                res = await zot.invoke_command(name, " ".join(args))
            except ZotdError as exc:  # raised out of the group, it would come wrapped
                failed = exc
            tg.cancel_scope.cancel()
        _drain_notes(zot)  # those that came with the reply
        if failed is not None:
            raise failed
        if o.json:
            print_json(res)
        else:
            _print_result(res)
        return 1 if res.error else 0

    return with_client(o, where, body)


def _print_result(res: ap.InvokeData) -> None:
    """A command's answer as text: the prompt, insert and display text keep
    their lines (escaped otherwise); names, titles and panel lines are one line each."""
    ext = printable(res.extension)
    if res.action == "prompt":
        print(f"[{ext}] prompt: {printable(res.prompt or '', multiline=True)}")
    elif res.action == "insert":
        print(f"[{ext}] insert: {printable(res.insert or '', multiline=True)}")
    elif res.action == "display":
        print(printable(res.display or "", multiline=True))
    elif not res.error and res.open_panel is None:
        print(f"[{ext}] done (nothing to show)")
    if res.open_panel is not None:
        # A one-shot command cannot drive a panel: show it as it opened
        # (it closes when this connection does).
        panel = res.open_panel
        print(f"[{ext}] {printable(panel.title or panel.id)}")
        for line in panel.lines:
            print(f"  {printable(line)}")
        if panel.footer:
            print(f"  {printable(panel.footer)}")
    if res.error:
        print(f"[{ext}] error: {printable(res.error, multiline=True)}", file=sys.stderr)


def _note_line(frame: ap.NotifyPush) -> str:
    """``[ext] level: message``, one line however many the message had."""
    return printable(f"[{frame.extension}] {frame.level}: {frame.message}")


def _note(frame: ap.Push) -> None:
    if isinstance(frame, ap.NotifyPush):
        print(_note_line(frame), file=sys.stderr)


async def _print_notes(zot: Client) -> None:
    async for frame in zot.notifications():
        _note(frame)


def _drain_notes(zot: Client) -> None:
    stream = zot.notifications()
    if isinstance(stream, MemoryObjectReceiveStream):
        while True:
            try:
                _note(stream.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return


@app.command
def call(
    tool: str,
    args: str = "{}",
    /,
    *,
    timeout: float | None = None,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Call a tool as the model would, with a JSON object of arguments.

    Prints the text the tool returned (images as a one-line summary). Exits 1
    if the tool reported an error. Progress the tool reports is shown on
    stderr while it runs (a bar on a terminal, a line per update otherwise).

    Args:
        tool: The tool's name.
        args: Its arguments, a JSON object, e.g. '{"city": "Berlin"}'.
        timeout: Seconds to wait for the result [default: the daemon's tool_timeout].
    """
    o = opts or Options()
    if timeout is not None and timeout <= 0:
        die("zot: --timeout must be a positive number of seconds", code=2)
    try:
        parsed = msgspec.json.decode(args)
    except msgspec.DecodeError as exc:
        die(f"zot: ARGS is not valid JSON: {exc}", code=2)
    if not isinstance(parsed, dict):
        die('zot: ARGS must be a JSON object, like \'{"city": "Berlin"}\'', code=2)

    async def body(zot: Client) -> int:
        shown = Progress()

        def progress(push: ap.ToolProgressPush) -> None:
            shown.update(push.message, push.progress, push.total)

        try:
            res = await zot.call_tool(tool, parsed, timeout_s=timeout, on_progress=progress)
        finally:
            shown.close()
        if o.json:
            print_json(res)
        else:
            out = sys.stderr if res.is_error else sys.stdout
            for block in res.content:
                print(_describe_block(block), file=out)
        return 1 if res.is_error else 0

    return with_client(o, where, body)


def _describe_block(block: Any) -> str:
    """A content block as text to print (escaped: :func:`.output.printable`)."""
    if isinstance(block, TextBlock):
        return printable(block.text, multiline=True)
    if isinstance(block, ImageBlock):
        try:
            size = f"{len(base64.b64decode(block.data, validate=True))} bytes"
        except (binascii.Error, ValueError):
            size = "invalid base64"
        return printable(f"[image {block.mime_type}, {size}]")
    return printable(str(block), multiline=True)


@app.command
def events(*, opts: Options | None = None, where: Where | None = None) -> int:
    """Follow the extensions' notifications and state changes until Ctrl+C."""
    o = opts or Options()

    async def body(zot: Client) -> int:
        await zot.subscribe()
        if not o.json:
            print("following notifications (Ctrl+C to stop)", file=sys.stderr)
        async for frame in zot.notifications():
            if o.json:
                print_json(frame)
            elif isinstance(frame, ap.NotifyPush):
                print(_note_line(frame))
            elif isinstance(frame, ap.ExtensionStatePush):
                names = [f"/{c.name}" for c in frame.commands] + [t.name for t in frame.tools]
                detail = f" ({frame.error})" if frame.error else ""
                what = " ".join(names) or "nothing registered"
                print(printable(f"[{frame.extension}] {frame.state}{detail}: {what}"))
            sys.stdout.flush()
        print("zotd closed the connection", file=sys.stderr)
        return 1

    return with_client(o, where, body)


@app.command
def mcp(
    *,
    cwd: Path | None = None,
    token: str | None = None,
    no_start: bool = False,
    where: Where | None = None,
) -> int:
    """Serve the workspace's tools and commands to an MCP host, over stdio.

    A Model Context Protocol server: tools/list and tools/call are the
    workspace's tools, prompts/list and prompts/get its slash commands. Starts
    the daemon if none is running. Needs the `mcp` extra (pip install 'zotd[mcp]').

    Args:
        cwd: The project directory (workspace) [default: the current directory].
        token: The daemon's token, if it has one [default: $ZOTD_TOKEN, else token in zotd.toml].
        no_start: Do not start the daemon if none is running [default: start it, unless $ZOTD_NO_AUTOSTART=1].
    """
    paths, config = settings(where)
    try:
        from ..integrations import mcp_bridge
    except ImportError as exc:
        die(f"zot mcp: needs the mcp package (pip install 'zotd[mcp]'): {exc}")

    async def go() -> int:
        return await mcp_bridge.serve(
            socket=paths.socket,
            cwd=cwd or Path(os.getcwd()),
            token=token_for(token, config),
            start=False if no_start else None,
            # Answers owed at the end of input may take as long as zotd's own deadlines.
            drain_timeout=max(config.tool_timeout, config.command_timeout) + 5,
        )

    return run_async(go)


def main() -> None:
    """Entry point of the ``zot`` command."""
    entry(app, "zot", zot_argv)
