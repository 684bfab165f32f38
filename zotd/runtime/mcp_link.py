"""An MCP server as an extension: zotd is its MCP client.

(Spine: being written.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..model.config import Config
from .status import Host

if TYPE_CHECKING:
    from .extension import Extension
    from .link import Link


class McpLink:
    """The MCP client session of one MCP server extension."""

    def __init__(self, ext: Extension, *, host: Host, config: Config) -> None:
        self._ext = ext
        self._host = host
        self._config = config
        manifest = ext.found.manifest
        #: Whether it is reached at a ``url`` (no process).
        self.remote = manifest is not None and bool(manifest.url)
        self.calls: Link = NotImplemented

    async def run(
        self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream, done: trio.Event
    ) -> None:
        raise NotImplementedError

    async def run_remote(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
