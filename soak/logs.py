"""What the logs say once the daemon has stopped: the extensions' ``FAULT``,
``CANCEL``, ``DROPPED`` and ``UNKNOWN-PANEL`` lines, the daemon's notes in
the extension logs (its reactions), the pids it started, the push frames it
dropped and any error it logged.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

NOTES = [
    ("skipped a malformed line", "malformed lines skipped"),
    ("no such request pending", "replies to no pending call dropped"),
    ("-byte line: longer than", "oversized lines dropped"),
    ("sending SIGTERM", "stops escalated to SIGTERM"),
    ("sending SIGKILL", "stops escalated to SIGKILL"),
    ("stdin queue full", "frames dropped: stdin queue full"),
    ("; restarting in", "restarts by the restart policy"),
    ("left stopped until", "crash loops stopped by the intensity limit"),
    ("] refused:", "extensions refused (protocol error)"),
    ("no `ready` frame; ready after", "no `ready`: ready after a moment of quiet"),
    ("no `ready` within", "no `ready`: ready only at `ready_grace`"),
    ("dropped `tool_progress` for id", "tool_progress for no pending call dropped"),
    ("` for panel ", "panel frames for a panel not open dropped"),
    ("in its answer about", "rewrites for the wrong event ignored"),
    ("rewrite refused:", "rewrites refused (not an object, or a misfit)"),
]


@dataclass
class LogFigures:
    faults: Counter[str] = field(default_factory=Counter)
    reactions: Counter[str] = field(default_factory=Counter)
    flood_frames: int = 0
    pids: set[int] = field(default_factory=set)
    noise_dropped: int = 0
    push_dropped: int = 0
    daemon_errors: list[str] = field(default_factory=list)
    #: ``cancel`` frames received (``CANCEL`` lines), by extension.
    cancels: Counter[str] = field(default_factory=Counter)
    #: Calls the hanger dropped on ``cancel`` (``DROPPED`` lines).
    dropped_work: int = 0
    #: Keys and sizes for a panel the newer extension had not opened.
    unknown_panels: int = 0
    #: Frames dropped because an extension's stdin queue was full, by extension.
    queue_full: Counter[str] = field(default_factory=Counter)
    #: ``stuck_echo`` calls the stuck extension read past their deadline: by
    #: nonce, (when it read it, wall clock; whether it came soon after a stall).
    late_calls: dict[str, tuple[float, bool]] = field(default_factory=dict)


def read_logs(root: Path) -> LogFigures:
    figures = LogFigures()
    started = re.compile(r"\] started pid (\d+)")
    noise = re.compile(r"\] dropped (\d+) notify frames and bad lines")
    for path in sorted((root / "home" / "logs").glob("ext-*.log*")):  # rotated ones too
        name = path.name.partition(".log")[0].removeprefix("ext-")
        for line in path.read_text("utf-8", "replace").splitlines():
            if line.startswith("CANCEL "):
                figures.cancels[name] += 1
            elif line.startswith("LATE-CALL "):
                _, nonce, at, exempt = [*line.split(), "", "", ""][:4]
                try:
                    figures.late_calls[nonce] = (float(at), exempt == "1")
                except ValueError:
                    pass
            elif line.startswith("DROPPED "):
                figures.dropped_work += 1
            elif line.startswith("UNKNOWN-PANEL "):
                figures.unknown_panels += 1
            elif line.startswith("FAULT "):
                kind, _, detail = line[6:].partition(" ")
                if kind == "flood":
                    figures.flood_frames += int(detail.removeprefix("frames=") or 0)
                    figures.faults[f"{name}: flood bursts"] += 1
                elif kind in ("crash", "garbage", "guard", "rewriter", "progress", "panel"):
                    figures.faults[f"{name}: {kind} ({detail.partition(' ')[0]})"] += 1
                elif kind in ("hang", "late"):
                    figures.faults[f"{name}: {kind} (call never answered)"] += kind == "hang"
                    figures.faults[f"{name}: {kind} (answer after the deadline)"] += kind == "late"
                elif kind == "stuck":
                    figures.faults[f"{name}: stopped reading its stdin for 1-4 s"] += 1
                elif kind == "late-registration":
                    figures.faults[f"{name}: registrations after `ready` (bursts)"] += 1
                elif kind == "grandchild":
                    figures.faults[f"{name}: grandchild left in its group"] += 1
                else:
                    figures.faults[f"{name}: {kind}"] += 1
            elif line.startswith("[zotd "):
                m = started.search(line)
                if m:
                    figures.pids.add(int(m.group(1)))
                m = noise.search(line)
                if m:
                    figures.noise_dropped += int(m.group(1))
                for needle, label in NOTES:
                    if needle in line:
                        figures.reactions[label] += 1
                if "stdin queue full" in line:
                    figures.queue_full[name] += 1
    figures.faults = Counter({k: v for k, v in figures.faults.items() if v})
    daemon_log = (root / "daemon.log").read_text("utf-8", "replace").splitlines()
    for line in daemon_log:
        m = re.search(r"dropped (\d+) push frame", line)
        if m:
            figures.push_dropped += int(m.group(1))
    figures.daemon_errors = [
        line for line in daemon_log if " ERROR " in line or line.startswith("Traceback")
    ]
    return figures


# --- the table ----------------------------------------------------------------------
