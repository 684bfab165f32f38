"""The checks of ``zot ext doctor`` on a running daemon's view of an
extension: its state, crashes and restarts, the names it lost, and zotd's
notes about its last run in its log (:func:`last_run`). Plain functions;
the records are :mod:`.doctor`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ..protocol import extension as ep
from ..protocol.agent import ExtensionInfo
from . import hints, logfiles
from .doctor import Finding, Severity
from .doctor import finding as _f
from .doctor_frames import shadow_findings, subscribe_findings
from .restart import describe_exit

#: The lines of a log read to find its last run (about 256 bytes a line).
LOG_LINES = 400

#: The most lines of an extension's own stderr shown.
STDERR_LINES = 5


# --- the daemon's view -------------------------------------------------------------


def info_findings(
    info: ExtensionInfo, *, broken: bool = False, stderr: Sequence[str] = ()
) -> list[Finding]:
    """What a running daemon says of it: its state, crashes and restarts,
    names it lost, replies it sent too late, calls that timed out. Not what
    its manifest says (``broken``: it failed for that; untrusted): that is
    :func:`~.doctor.manifest_findings`'. ``stderr``: the end of what its last
    process wrote there (see :func:`last_run`), said with a crash."""
    name = info.name
    said = "; its stderr ends: " + " | ".join(stderr) if stderr else ""
    out = []
    if info.state == "failed" and info.last_error and not broken:
        why = hints.why_not(name, "failed", reason=info.last_error)
        fix = why.fix if why is not None else ""
        out.append(_f(Severity.ERROR, name, f"failed: {info.last_error}{said}", fix))
    elif info.state in ("exited", "restarting") and info.exit_code not in (None, 0):
        out.append(
            _f(
                Severity.ERROR,
                name,
                f"its last process {describe_exit(info.exit_code)}{said}",
                f"see `zot ext logs {name}`",
            )
        )
    if info.restarts and info.restart_reason:  # (a reload gives none)
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"restarted {info.restarts} time(s), the last after it {info.restart_reason}",
                f"see `zot ext logs {name}` for why it ended",
            )
        )
    elif info.restarts:
        out.append(_f(Severity.NOTE, name, f"restarted {info.restarts} time(s), by reloads"))
    for warning in info.warnings:
        if warning.startswith("`hello` names"):
            out.append(
                _f(Severity.WARNING, name, warning, "name it in its `hello` as extension.json does")
            )
    out += shadow_findings(name, info.shadowed)
    out += subscribe_findings(name, info.events, info.intercepts)
    if info.metrics.timeouts:
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"{info.metrics.timeouts} call(s) timed out",
                "answer every call within its deadline (or report progress)",
            )
        )
    if info.late_replies:
        out.append(
            _f(
                Severity.NOTE,
                name,
                f"{info.late_replies} reply(ies) came after their request was "
                "answered, cancelled or past its deadline (dropped)",
            )
        )
    return out


#: zotd's notes in an extension's log that are problems, and what to do.
_NOTED = (
    (
        "unknown exposure",
        Severity.ERROR,
        f"use {hints.one_of(sorted(ep.EXPOSURES))}, or leave it out",
    ),
    ("`schema` must be a JSON object", Severity.ERROR, "give a JSON Schema object"),
    ("unknown replay", Severity.WARNING, f"use {hints.one_of(sorted(ep.REPLAYS))}"),
    (
        "skipped a malformed line",
        Severity.WARNING,
        "write only JSON frames to stdout; log to stderr",
    ),
    ("longer than the", Severity.WARNING, "send smaller frames"),
    ("notify frames and bad lines in one second", Severity.WARNING, "send fewer notifications"),
    (
        "did not exit after shutdown",
        Severity.WARNING,
        "exit when it reads `shutdown`, or when its stdin ends",
    ),
    ("closed its stdout but kept running", Severity.ERROR, "keep stdout open while it runs"),
    (
        "cannot intercept",
        Severity.WARNING,
        f"intercept only {hints.one_of(sorted(ep.INTERCEPTABLE))}; subscribe to the others as events",
    ),
)


def note_findings(name: str, notes: Iterable[str]) -> list[Finding]:
    """zotd's notes about its last run (see :func:`last_run`) that are
    problems: each once, with how many times it was noted."""
    seen: dict[str, tuple[Severity, str, int]] = {}
    for note in notes:
        for marker, severity, fix in _NOTED:
            if marker in note:
                key = note[:300]
                _, _, times = seen.get(key, (severity, fix, 0))
                seen[key] = (severity, fix, times + 1)
                break
    out = []
    for note, (severity, fix, times) in seen.items():
        again = f" ({times} times)" if times > 1 else ""
        out.append(_f(severity, name, f"zotd noted: {note}{again}", fix))
    return out


def last_run(log: Path) -> tuple[list[str], list[str]]:
    """zotd's notes and the extension's own stderr lines in its log since
    zotd's last ``started pid`` line (bounded: the last :data:`LOG_LINES`
    lines of the file; nothing if it cannot be read). A log is shared by
    every process of the extension: another workspace's lines may be among them."""
    lines = logfiles.tail(log, LOG_LINES)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("[zotd ") and "] started pid " in lines[i]:
            lines = lines[i + 1 :]
            break
    notes, stderr = [], []
    for line in lines:
        if line.startswith("[zotd "):
            notes.append(line.partition("] ")[2])
        elif line.strip():
            stderr.append(line[:300])
    return notes, stderr[-STDERR_LINES:]


def exit_words(code: int | None) -> str:
    """How its last process ended, in words ("" if it has not)."""
    return "" if code is None else describe_exit(code)
