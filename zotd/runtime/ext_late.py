"""An extension's state for running, made when first used.

:class:`Late` is a base of :class:`~.extension.Extension`. A workspace
opens with an ``Extension`` for each of its extensions, but a lazy one
asleep on its cache needs little of its state to be listed: its name, its
manifest, its state and its registrations. The rest (its log, counters,
events, the holder of its requests, its link) is made the first time any of
it is read, by :meth:`Late._complete` (through ``__getattr__``, which
Python calls only for an attribute an object does not have: no cost once
made). An extension that starts with its workspace is complete from the
start. A workspace of ten sleeping extensions opens about as fast as an
empty one.

Whatever was set before the rest was made (a restart's count and reason,
the metrics handed on to a restarted run, the workspaces sharing it) is
kept: :meth:`~Late._complete` only makes what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..model.config import Config
from ..model.metrics import Counters
from ..protocol import extension as ep
from ..protocol.agent import HandshakeInfo
from .callers import Served
from .extension_log import ExtensionLog
from .link import Link
from .outcome import Outcome
from .process import Process
from .status import State
from .waking import Waking

if TYPE_CHECKING:
    from pathlib import Path

    from .extension import Extension
    from .inbox import Inbox
    from .mcp_link import McpLink


class Late:
    """The part of an extension's state that running it needs (see the module)."""

    name: str
    log_path: Path
    state: State
    idle_stop: float
    lazy: bool
    _config: Config
    #: A lazy one's supervisor, started when something first wants it (see
    #: ``SleepCycle.doze``); ``None`` once started, or if it never dozed.
    _start_later: Callable[[Extension], None] | None
    #: Whether the rest of its state is still to be made.
    _late: bool

    #: Its log (``$ZOT_HOME/logs/ext-<name>.log``): the daemon's notes and its stderr.
    log: ExtensionLog
    pid: int | None
    exit_code: int | None
    #: Why it was last restarted ("" if never).
    restart_reason: str
    #: When (trio time) it is to be started again, while ``restarting``.
    restart_at: float | None
    #: When (trio time) its process was spawned.
    started_at: float | None
    #: What its ``hello`` says it can do (``tool_cancel`` and
    #: ``call_tool`` change what it is sent; the rest is informational).
    capabilities: list[str]
    #: A warning about its ``hello`` (another name than its manifest's), or "".
    hello_warning: str
    #: The tool calls it is serving now, by request id (see zotd.runtime.callers).
    serving: dict[str, Served]
    #: Replies that came for no pending request (after a ``cancel``, or
    #: after the host stopped waiting): dropped, and counted here.
    late_replies: int
    #: Calls, errors, latencies and intercept answers (kept across restarts).
    metrics: Counters
    #: How its last start's handshake went (``None`` before any start).
    handshake: HandshakeInfo | None
    #: How many workspaces use this process (1 unless it is shared).
    workspaces: int
    #: Set once :meth:`run` has finished.
    finished: trio.Event
    #: Set once :meth:`stop` was called: its end is asked for, not a crash.
    stop_requested: trio.Event
    _process: Process | None
    _process_exited: trio.Event
    #: A stop's code, and why zotd failed the run itself: how it ended.
    _outcome: Outcome
    _winding_down: bool
    #: What was listed while it slept (from a wake until it is ready).
    _slept: list[ep.RegisterCommand | ep.RegisterTool] | None
    #: Being put to sleep for idleness (its end is no crash).
    _dozing: bool
    _became_ready: trio.Event
    #: Its requests: held while it sleeps or wakes, else through the run's link.
    _calls: Waking
    #: An MCP server's client session (:mod:`.mcp_link`), else ``None``.
    _mcp: McpLink | None
    #: The current run's requests: down its stdin (zot's protocol), or as an
    #: MCP client's requests (an MCP server: :mod:`.mcp_calls`). A lazy one has
    #: none until it first runs (a sleeping MCP server does not even import
    #: the `mcp` package).
    _link: Link | None
    #: Its stdout's reader and its handshake; made when the process starts.
    _inbox: Inbox | None

    def _new_link(self) -> Link:
        raise NotImplementedError

    def _begin(self) -> None:
        raise NotImplementedError

    def _complete(self) -> None:
        """Makes what is still to be made of its state (once; what was set
        already is kept)."""
        made = self.__dict__
        if not made.get("_late"):
            return
        made["_late"] = False
        for name, make in _LATE:
            if name not in made:
                made[name] = make(self)

    if not TYPE_CHECKING:  # (so that the type checker still sees a typo)

        def __getattr__(self, name: str) -> Any:
            made = self.__dict__
            if name in _NAMES and made.get("_late"):
                self._complete()
                return made[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _waking(ext: Late) -> Waking:
    config = ext._config
    calls = Waking(
        ext,  # type: ignore[arg-type]  # (Late is a base of Extension only)
        idle_stop=ext.idle_stop,
        queue=config.extension_queue,
        queue_bytes=config.extension_queue_bytes,
    )
    if ext.state == State.SLEEPING:  # it dozed: what it is asked is held, and wakes it
        calls.hold()
        if ext._start_later is not None:
            calls.on_want = ext._begin
    return calls


#: What :meth:`Late._complete` makes, in order (the link after the requests' holder).
_LATE: tuple[tuple[str, Callable[[Late], object]], ...] = (
    ("log", lambda e: ExtensionLog(e.name, e.log_path, e._config.max_log_bytes)),
    ("pid", lambda e: None),
    ("exit_code", lambda e: None),
    ("restart_reason", lambda e: ""),
    ("restart_at", lambda e: None),
    ("started_at", lambda e: None),
    ("capabilities", lambda e: []),
    ("hello_warning", lambda e: ""),
    ("serving", lambda e: {}),
    ("late_replies", lambda e: 0),
    ("metrics", lambda e: Counters()),
    ("handshake", lambda e: None),
    ("workspaces", lambda e: 1),
    ("finished", lambda e: trio.Event()),
    ("stop_requested", lambda e: trio.Event()),
    ("_process", lambda e: None),
    ("_process_exited", lambda e: trio.Event()),
    ("_outcome", lambda e: Outcome()),
    ("_winding_down", lambda e: False),
    ("_slept", lambda e: None),
    ("_dozing", lambda e: False),
    ("_became_ready", lambda e: trio.Event()),
    ("_calls", _waking),
    ("_mcp", lambda e: None),
    ("_link", lambda e: None if e.lazy else e._new_link()),
    ("_inbox", lambda e: None),
)

_NAMES = frozenset(name for name, _ in _LATE)
