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
}
EXTENSIONS = ("echo", "crasher", "hanger", "flooder", "garbage", "guard", "rewriter", "newer")
#: Who subscribes to which event (``emit_event`` may deliver to these only).
SUBSCRIBERS = {
    "turn_start": {"echo", "flooder"},
    "turn_end": {"echo"},
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
#: The two ways a ``cancel`` is answered (``cancelled`` true, false).
IN_FLIGHT = "the call was in flight: answered `cancelled`"
ANSWERED_ALREADY = "the call had been answered already"
#: What the newer extension's panels show below their lines.
PANEL_FOOTER = "q: close"

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
    **dict(zip(TOOLS, [18, 7, 5, 7, 8, 5], strict=True)),  # call_tool of each tool
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
    quick: bool = False
