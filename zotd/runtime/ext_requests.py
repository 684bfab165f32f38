"""An extension's face to its workspace: the requests it takes, and each
run's link.

:class:`Requestable` is a base of :class:`~.extension.Extension` (which owns
the state it reads, declared below). Every request goes through the
extension's :class:`~.waking.Waking` (held while it sleeps or wakes), then
the current run's :class:`~.link.Link`: a zot extension's
:class:`~.calls.Calls` (frames down its stdin), or an MCP server's calls
(:mod:`.mcp_calls`), made anew for each run (an MCP session is used once)
and drawing their ids from the extension's one counter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import msgspec
import trio

from ..model.config import Config
from ..model.errors import RequestError
from ..model.manifest import Found, Kind, kind_of
from ..protocol import extension as ep
from .calls import Calls
from .link import Link, R
from .process import Process
from .status import RUNNING, Host, State
from .waking import Waking

if TYPE_CHECKING:
    from .extension import Extension
    from .mcp_link import McpLink


class Requestable:
    """The requests an extension takes (see the module)."""

    name: str
    found: Found
    state: State
    last_error: str
    _host: Host
    _config: Config
    _calls: Waking
    _link: Link | None
    _mcp: McpLink | None
    _process: Process | None
    _process_exited: trio.Event

    def _new_link(self) -> Link:
        """A run's link (a new one for each run: an MCP session is used once)."""
        link: Link = Calls(
            cast("Extension", self),
            self._config.extension_queue,
            self._config.extension_queue_bytes,
        )
        if kind_of(self.found) == Kind.MCP and not self.found.error:
            try:
                from .mcp_link import McpLink  # (imports the `mcp` package: only when needed)
            except ImportError as exc:  # a broken install: this one fails, not the workspace
                self.found = msgspec.structs.replace(
                    self.found, error=f"cannot speak MCP: {exc} (pip install 'mcp>=2')"
                )
                self.last_error = self.found.error
            else:
                self._mcp = McpLink(cast("Extension", self), host=self._host, config=self._config)
                link = self._mcp.calls
        self._calls.attach(link)
        return link

    # --- requests -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether it takes requests: its process is up, or it sleeps and
        wakes for them (see :mod:`.waking`)."""
        return self.state in RUNNING or self.state == State.SLEEPING

    @property
    def up(self) -> bool:
        """Whether its process is up and takes frames."""
        return self.state in RUNNING

    @property
    def alive(self) -> bool:
        """Whether its process has been spawned and has not exited yet."""
        return self._process is not None and not self._process_exited.is_set()

    @property
    def pending(self) -> int:
        """Requests sent to it (or held for it) and not yet answered, failed or withdrawn."""
        sent = len(self._link.pending) if self._link is not None else 0
        return sent + len(self._calls.held)

    async def request(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        *,
        on_reply: Callable[[R], None] | None = None,
    ) -> R:
        """Sends the frame ``make(id)`` and waits for the reply with that id
        (see :meth:`Calls.request <.calls.Calls.request>`).

        Cancellation (the caller's deadline) withdraws the request: the
        extension is sent ``cancel``, and a reply that comes later is dropped.
        """
        return await self._calls.request(make, expect, on_reply=on_reply)

    def ask(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        callback: Callable[[R | RequestError], None],
        *,
        timeout: float | None = None,
        alone: bool = True,
        progress: Callable[[ep.ToolProgress], None] | None = None,
    ) -> str:
        """Sends the frame ``make(id)`` without waiting; ``callback`` gets the
        reply or the error; returns the id (see :meth:`Calls.ask <.calls.Calls.ask>`)."""
        return self._calls.ask(
            make, expect, callback, timeout=timeout, alone=alone, progress=progress
        )

    def withdraw(self, rid: str) -> None:
        """Forgets a request; sends ``cancel`` if it was still unanswered."""
        self._calls.withdraw(rid)

    def send_nowait(self, frame: bytes, *, force: bool = False) -> bool:
        """Queues a one-way frame; ``False`` if it was dropped (queue full or
        not running; ``force``: past a full queue too)."""
        return self._calls.send_nowait(frame, force=force)
