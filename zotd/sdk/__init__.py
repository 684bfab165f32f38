"""The Python SDK for zot extensions: a useful extension in a dozen lines.

Example::

    from zotd.sdk import Extension, prompt

    ext = Extension("hello", "1.0.0")

    @ext.command("hello", "say hi")
    def hello(args: str):
        return prompt("Greet me in one short sentence.")

    @ext.tool(description="Current weather for a city.")
    def weather(city: str) -> str:
        return f"{city}: sunny"

    ext.run()

Beyond commands and tools: ``ext.progress()`` reports how far a tool call
has got, ``ext.cancelled()`` says the host gave up on a request,
``@ext.intercept(event)`` guards turns and assistant messages as well as tool
calls (:func:`block`, :func:`rewrite`, :func:`replace_text`), and a command
may open a :class:`Panel`, redrawn with ``ext.render_panel()``, with
``@ext.on_panel_key`` and friends for what the user does in it.

Current zot's additions: ``@ext.tool(...)`` takes ``interactive``,
``output_schema``, ``deferred``, ``exposure``, ``namespace*`` and
``replay``; a tool returns :class:`Result` with ``structured`` data and
``activate_tools``, or :class:`Markdown` text; any handler may
``ext.open_panel()`` (a :class:`LivePanel` whose keys it awaits), await
``ext.call_tool()`` (a :class:`CallResult`), ``ext.submit()``,
``ext.submit_slash()`` and ``ext.clear_notes()``; a command may answer
:func:`tool_prompt`; ``@ext.before_agent_start`` rewrites the system prompt.

Importing it loads neither trio nor the daemon, nor even asyncio: only
msgspec, the protocol's frames and a few small modules of the standard
library. It imports nothing of zotd but ``zotd.protocol`` (an
import-linter contract holds it to that). ``run()`` writes the handshake
first and only then imports the runtime, which runs on asyncio, so an
extension is ready about as soon as a raw one. Its modules, those loaded
at import: ``extension`` (the ``Extension`` object: decorators and
``run``), ``actions`` (what handlers call), ``handlers`` (what was
registered, and the opening frames), ``requests`` (a request in flight and
its merged progress), ``panels`` (panels a handler opened and waits on),
``stdio`` (writing the frames' lines), ``schema`` (tool schemas from
signatures), ``results`` (what commands and tools return, as frames) and
``guards`` (what guards return); those ``run()`` loads once the handshake
is out: ``runtime`` (frames dispatched to handlers on asyncio: tasks,
cancellation, replies), ``reader`` (the host's lines) and ``calls`` (the
extension's own tool calls). See docs/sdk.md.
"""

from .extension import Exposure, Extension, Replay
from .guards import Block, Rewrite, block, replace_text, rewrite
from .panels import KeyPress, LivePanel
from .results import (
    CallResult,
    CallToolError,
    Image,
    Markdown,
    Panel,
    Response,
    Result,
    display,
    error,
    insert,
    noop,
    prompt,
    tool_error,
    tool_prompt,
)

__all__ = [
    "Block",
    "CallResult",
    "CallToolError",
    "Exposure",
    "Extension",
    "Image",
    "KeyPress",
    "LivePanel",
    "Markdown",
    "Panel",
    "Replay",
    "Response",
    "Result",
    "Rewrite",
    "block",
    "display",
    "error",
    "insert",
    "noop",
    "prompt",
    "replace_text",
    "rewrite",
    "tool_error",
    "tool_prompt",
]
