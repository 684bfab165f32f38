"""What a soak run does: its plan, the daemon's settings, the request mix, and
what the soak's extensions and clients are expected to do (their tools, their
subscriptions, the clean errors, the wording of the blocks and the cancels).

Plain data: every other module of the soak reads it; it imports nothing of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXT_SCRIPTS = HERE / "extensions"

#: Each extension's tools, and who must answer them.
TOOLS = {
    "echo": "echo",
    "crash_echo": "crasher",
    "hang_echo": "hanger",
    "flood_echo": "flooder",
    "garbage_echo": "garbage",
    "progress_echo": "newer",
    "stuck_echo": "stuck",
    "late_echo": "latecomer",
}
EXTENSIONS = (
    "echo",
    "crasher",
    "hanger",
    "flooder",
    "garbage",
    "guard",
    "rewriter",
    "newer",
    "stuck",
    "latecomer",
)
#: The tools the latecomer registers after ``ready`` (``late_<i>``), besides ``late_echo``.
LATE_PREFIX = "late_"


def owner_of(tool: str) -> str | None:
    """The extension that must answer ``tool`` (``None``: no soak tool)."""
    return TOOLS.get(tool) or ("latecomer" if tool.startswith(LATE_PREFIX) else None)


#: Who subscribes to which event (``emit_event`` may deliver to these only).
SUBSCRIBERS = {
    "turn_start": {"echo", "flooder"},
    "turn_end": {"echo", "stuck"},
    "tool_call": {"guard"},
    "session_start": set(),
    "assistant_message": set(),
}
#: Clean errors: what a request may fail with while extensions misbehave.
CLEAN_ERRORS = {"timeout", "extension_failed", "not_found", "unavailable", "busy"}
#: The rewriter's block when it rewrites a tool call's arguments into a non-object.
NOT_AN_OBJECT = (
    "extension 'rewriter' rewrote the tool's arguments into something that is not a JSON object"
)
#: zotd's block when the rewriter breaks ``nonce`` in the arguments of ``echo``.
MISFIT = (
    "the arguments of tool 'echo' as rewritten by 'rewriter' do not fit its schema: "
    "$.nonce: expected a string, got an integer"
)
#: zotd's block when it could not check the rewritten arguments of ``echo``
#: against its schema within the intercept's deadline (it fails closed).
UNCHECKED = (
    "the arguments of tool 'echo' as rewritten by 'rewriter' could not be checked "
    "against its schema within the intercept's deadline"
)
#: The two ways a ``cancel`` is answered (``cancelled`` true, false).
IN_FLIGHT = "the call was in flight: answered `cancelled`"
ANSWERED_ALREADY = "the call had been answered already"
#: What the newer extension's panels show below their lines.
PANEL_FOOTER = "q: close"

#: The fault of a client that stops reading (a row of the table).
UNREAD = "client stopped reading for 1-4 s, with 40-120 requests"

#: The largest padding of a ``stuck_echo`` call: the frames zotd may have
#: written (or had in hand) before a stall stay small, so the bytes the
#: stuck extension exempts after one (``--exempt``) are few.
STUCK_PAD = 1024
#: A ``stuck_echo`` frame is at most this long (the padding and the rest).
STUCK_FRAME = STUCK_PAD + 512

#: zotd.toml for the run: short deadlines so that waiting one out costs little.
SETTINGS: dict[str, Any] = {
    "tool_timeout": 2.0,
    "command_timeout": 2.0,
    "intercept_timeout": 1.0,
    "shutdown_timeout": 0.5,
    "kill_timeout": 0.5,
    "ready_grace": 2.0,
    "hello_timeout": 5.0,
    "max_frame_bytes": 65536,
    "extension_queue": 64,
    # The byte bounds of issue 15, small enough that the non-reading clients
    # (up to 120 replies of up to 40 KB each) pass the outbox's.
    "extension_queue_bytes": 2 * 1024 * 1024,
    "client_outbox_bytes": 1024 * 1024,
    "log_level": "info",
    # The figures are counted from the extension logs: no rotation mid-run.
    "max_log_bytes": 1 << 30,
}
#: ``[restart]``, used if this zotd has a restart policy: restart crashed
#: extensions fast, and let a crash loop trip the intensity limit now and then.
RESTART: dict[str, Any] = {
    "policy": "on-failure",
    "backoff_initial": 0.1,
    "backoff_max": 1.0,
    "intensity": 8,
    "window": 10.0,
}

#: How long a client waits after a `busy` reply before its next request.
BUSY_BACKOFF = 0.1
#: A dead extension the daemon has not restarted for this long is reloaded.
REVIVE_AFTER = 1.5
#: Longest wait for the daemon to exit after SIGTERM.
EXIT_WAIT = 20.0
#: A panel the newer extension still lists this long after its client saw it
#: closed (or hung up with it open) was never closed for the extension.
LEAK_AFTER = 2.0
#: How long a client waits for a call to ``hang_echo`` it means to give up.
PATIENCE = (0.05, 0.3)

#: The requests clients make, and their shares (percent).
MIX: dict[str, int] = {
    **dict(zip(TOOLS, [13, 7, 5, 7, 8, 5, 3, 2], strict=True)),  # call_tool of each tool
    "give_up": 4,  # call_tool hang_echo, given up after PATIENCE
    "say": 8,  # invoke_command /say
    "panel": 4,  # invoke_command /panel, a size or a key, panel_close
    "intercept": 10,  # intercept tool_call
    "turn_start": 3,  # intercept turn_start
    "assistant_message": 3,  # intercept assistant_message
    "emit": 8,
    "list_tools": 3,
    "list_extensions": 2,
    "ping": 5,
}


@dataclass(frozen=True)
class Plan:
    """What one run does."""

    clients: int
    duration: float
    seed: int
    workers: int = 2  # concurrent requests per connection
    reload_every: float = 1.5
    crash_every: float = 2.0
    signal_every: float = 2.5
    hangup_every: float = 0.7
    #: A connection that stops reading its replies for a while.
    unread_every: float = 5.0
    unread_pause: tuple[float, float] = (1.0, 4.0)
    unread_requests: tuple[int, int] = (40, 120)
    unread_pad: tuple[int, int] = (1024, 40_000)
    #: A burst of registrations after ``ready``: tools in a burst.
    late_every: float = 6.0
    late_tools: tuple[int, int] = (100, 300)
    quick: bool = False

    @property
    def rss_every(self) -> float:
        """Seconds between the RSS samples of the table: 5 minutes, or a
        twelfth of the load for shorter runs."""
        return min(300.0, self.duration / 12)
