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

Importing it loads neither trio nor the daemon: only msgspec, platformdirs
and the standard library. It imports nothing of zotd but ``zotd.protocol``
(an import-linter contract holds it to that). Its modules: ``extension``
(the ``Extension`` object: decorators and what handlers call), ``handlers``
(what was registered, and the opening frames), ``runtime`` (frames
dispatched to handlers on asyncio: tasks, cancellation, replies),
``requests`` (a request in flight and its merged progress), ``stdio``
(reading and writing the frames' lines), ``schema`` (tool schemas from
signatures) and ``results`` (what handlers return, as frames). See
docs/sdk.md.
"""

from .extension import Extension
from .results import (
    Block,
    Image,
    Panel,
    Response,
    Result,
    Rewrite,
    block,
    display,
    error,
    insert,
    noop,
    prompt,
    replace_text,
    rewrite,
    tool_error,
)

__all__ = [
    "Block",
    "Extension",
    "Image",
    "Panel",
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
]
