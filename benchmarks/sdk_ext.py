"""The minimal SDK extension the benchmarks start: one tool, as echo_ext's.

``python sdk_ext.py NAME``; compared with ``echo_ext.py NAME tool``, the same
extension written against the raw protocol.
"""

import sys

from zotd.sdk import Extension

ext = Extension(sys.argv[1], "1.0.0")


@ext.tool(name=sys.argv[1], description="echo")
def echo(text: str = "") -> str:
    return text


ext.run()
