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

Importing it loads neither trio nor the daemon: only msgspec and the
standard library. See docs/sdk.md.
"""

from .extension import Extension
from .results import (
    Block,
    Image,
    Response,
    Result,
    block,
    display,
    error,
    insert,
    noop,
    prompt,
    tool_error,
)

__all__ = [
    "Block",
    "Extension",
    "Image",
    "Response",
    "Result",
    "block",
    "display",
    "error",
    "insert",
    "noop",
    "prompt",
    "tool_error",
]
