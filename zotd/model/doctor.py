"""The checks of ``zot ext doctor``: what is wrong with an extension, and what
to do about it.

Plain functions, each over one thing doctor knows of an extension: its
discovered manifest (:class:`~.manifest.Found`), its program's interpreter
(:class:`Runtime`), its handshake (:class:`~zotd.protocol.agent.HandshakeInfo`).
What it registers, and what a dry run of it saw (:class:`Trial`), are
checked in :mod:`.doctor_frames`; the daemon's view of it in
:mod:`.doctor_daemon`. Each check gives :class:`Finding` s: an error or a
warning is a problem (doctor then exits 1), a note is not. Finding the
facts (spawning the extension, asking the daemon, running ``node
--version``) is the callers'.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

import msgspec

from ..protocol import extension as ep
from ..protocol.agent import HandshakeInfo, Shadowed
from . import hints
from .discovery import DISABLED, FAILED, HIDDEN, UNTRUSTED
from .manifest import MANIFEST, Found, Kind, Scope


class Severity(StrEnum):
    """How bad a finding is: errors and warnings are problems, notes are not."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Finding(msgspec.Struct):
    """One thing doctor found: ``what`` it is, and ``fix``, what to do ("" for
    a note that needs nothing)."""

    severity: str
    extension: str
    what: str
    fix: str = ""

    @property
    def problem(self) -> bool:
        """Whether it is a problem (an error or a warning)."""
        return self.severity != Severity.NOTE

    def line(self) -> str:
        """``warning: WHAT; FIX``."""
        return f"{self.severity}: {self.what}" + (f"; {self.fix}" if self.fix else "")


class Runtime(msgspec.Struct, omit_defaults=True):
    """What its program runs on: ``interpreter`` as named (by ``exec``, or the
    ``#!`` line of ``program``: ``origin``), where it ``path`` is ("" if not
    found), and the first line of its ``--version`` (or why there is none)."""

    program: str
    interpreter: str = ""
    origin: str = ""
    path: str = ""
    version: str = ""
    version_error: str = ""


class Report(msgspec.Struct):
    """One extension as ``zot ext doctor --json`` shows it: its facts and findings.

    ``checked`` says where the facts come from: ``daemon`` (the running
    daemon's view), ``dry run`` (doctor started it itself, and stopped it),
    or ``not run`` (it is disabled, broken, untrusted, or runs nothing).
    """

    name: str
    scope: str
    dir: str
    kind: str
    enabled: bool
    state: str
    checked: str
    trusted: bool
    exec: list[str]
    runtime: Runtime | None
    handshake: HandshakeInfo | None
    commands: list[str]
    tools: list[str]
    shadowed: list[Shadowed]
    events: list[str]
    intercepts: list[str]
    restarts: int
    restart_reason: str
    exit_code: int | None
    exit: str
    stderr_tail: list[str]
    log: str
    findings: list[Finding]
    problems: int = 0


@dataclass(slots=True)
class Trial:
    """What a dry run of an extension saw (filled by the runtime's dry run).

    ``settled`` is ``False`` if it was still in its handshake at the dry
    run's bound; ``exit_code`` is set if it exited before it was stopped;
    ``stop`` names the signal its stop needed ("" if it exited on
    ``shutdown``).
    """

    handshake: HandshakeInfo = field(default_factory=HandshakeInfo)
    registrations: list[ep.RegisterCommand | ep.RegisterTool] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    intercepts: list[str] = field(default_factory=list)
    hello_name: str = ""
    refused: str = ""
    spawn_error: str = ""
    settled: bool = True
    #: How long it was given to say ``hello`` (0: not said).
    hello_bound: float = 0.0
    bad_lines: int = 0
    first_bad: str = ""
    oversized: int = 0
    unknown_types: list[str] = field(default_factory=list)
    exit_code: int | None = None
    stop: str = ""
    stderr_tail: list[str] = field(default_factory=list)
    #: An MCP server's session: why it broke or was not answered ("" if fine).
    mcp_error: str = ""
    #: Why the dry run itself could not finish (a bug of doctor's), or "".
    error: str = ""


def finding(severity: Severity, name: str, what: str, fix: str = "") -> Finding:
    """A :class:`Finding` about extension ``name``."""
    return Finding(str(severity), name, what, fix)


def count(findings: Iterable[Finding]) -> int:
    """How many of ``findings`` are problems."""
    return sum(1 for f in findings if f.problem)


# --- the manifest ------------------------------------------------------------------


def manifest_findings(found: Found, workspace: str = "") -> list[Finding]:
    """Its manifest: broken, odd keys, disabled, untrusted, and the copies of
    its name that are not used, with why."""
    name = found.name
    manifest = found.origin or found.dir / MANIFEST
    out = []
    if found.error:
        out.append(
            finding(Severity.ERROR, name, f"cannot start: {found.error}", _fix_then_reload(found))
        )
    for warning in found.warnings:
        if "unknown key" in warning:
            fix = f"rename or remove the key in {manifest}"
        else:
            fix = f"fix it in {found.dir}"
        out.append(finding(Severity.WARNING, name, warning, fix))
    if found.manifest is not None and not found.manifest.enabled:
        out.append(
            finding(
                Severity.NOTE,
                name,
                'disabled (its manifest says "enabled": false)',
                f"run `zot ext enable {name}` to use it",
            )
        )
    elif found.untrusted and not found.error:
        out.append(untrusted_finding(name, found.untrusted, workspace))
    for aside in found.passed_over:
        where = f"the {aside.found.scope} copy in {aside.found.origin or aside.found.dir}"
        if aside.why == UNTRUSTED:
            why = untrusted_finding(name, aside.found.untrusted, workspace)
            out.append(finding(Severity.WARNING, name, f"{where} is not used: {why.what}", why.fix))
        elif aside.why == FAILED:
            out.append(
                finding(
                    Severity.WARNING,
                    name,
                    f"{where} is not used: {aside.reason}",
                    f"fix it, then run `zot ext reload {name}`",
                )
            )
        elif aside.why in (DISABLED, HIDDEN):
            out.append(finding(Severity.NOTE, name, f"{where} is not used: {aside.reason}"))
    return out


def untrusted_finding(name: str, reason: str, workspace: str = "") -> Finding:
    """A project extension that may not run until trusted: the ``zot ext trust`` hint."""
    why = hints.why_not(name, "untrusted", reason=reason, workspace=workspace)
    assert why is not None
    what = why.sentence + (f" ({reason})" if reason and not reason.startswith("it changed") else "")
    return finding(
        Severity.WARNING, name, f"{what}; not run", f"{why.fix} once you have read what it runs"
    )


def _fix_then_reload(found: Found) -> str:
    if "exec" in found.error and ("not found" in found.error or "not on PATH" in found.error):
        return f"fix `exec` in {found.dir / MANIFEST} (or install what it names), then run `zot ext reload {found.name}`"
    return f"fix it, then run `zot ext reload {found.name}`"


# --- the runtime -------------------------------------------------------------------


def runtime_findings(name: str, runtime: Runtime | None) -> list[Finding]:
    """Its interpreter: not found, or not answering ``--version``."""
    if runtime is None or not runtime.interpreter:
        return []
    where = f"the `#!` line of {runtime.program}" if runtime.origin == "#!" else "`exec`"
    if not runtime.path:
        return [
            finding(
                Severity.ERROR,
                name,
                f"its runtime {runtime.interpreter!r} (named by {where}) is not installed or not on PATH",
                f"install {runtime.interpreter}, or name another in {where}",
            )
        ]
    if runtime.version_error:
        return [
            finding(
                Severity.WARNING,
                name,
                f"`{runtime.interpreter} --version` {runtime.version_error}",
                f"check that {runtime.path} runs",
            )
        ]
    return []


# --- the handshake -----------------------------------------------------------------


#: States in which how its process ended says more than its handshake.
_ENDED = frozenset({"failed", "exited", "restarting", "stopping"})


def handshake_findings(
    name: str,
    kind: str,
    hs: HandshakeInfo | None,
    *,
    ready_grace: float,
    ready_idle: float,
    state: str = "",
) -> list[Finding]:
    """How its last handshake went: no ``hello``, a late one, no ``ready``,
    frames out of order. ``None``: it was never started (nothing to say).
    ``state``: the daemon's (one whose process ended is not told it said
    no ``hello``: how it ended is the finding)."""
    if hs is None:
        return []
    out = []
    hello = "answer MCP's `initialize`" if kind == Kind.MCP else "say `hello`"
    if hs.hello_s is None and state == "starting":
        out.append(
            finding(
                Severity.ERROR,
                name,
                f"it has not managed to {hello} yet: agents stopped waiting for it after "
                f"ready_grace ({ready_grace:g} s), and zotd stops it at hello_timeout",
                first_line(name, kind),
            )
        )
    elif hs.hello_s is None and state not in _ENDED:
        out.append(finding(Severity.ERROR, name, f"it did not {hello}", first_line(name, kind)))
    elif hs.hello_s is not None and hs.hello_s > ready_grace:
        out.append(
            finding(
                Severity.WARNING,
                name,
                f"it took {hs.hello_s:.1f} s to {hello}, past ready_grace ({ready_grace:g} s): "
                "agents stopped waiting for it",
                "start faster: say hello before slow work (imports, network)",
            )
        )
    if hs.hello_s is not None and hs.ready_s is not None and hs.auto_ready and kind != Kind.MCP:
        if hs.ready_s >= ready_grace:
            out.append(
                finding(
                    Severity.WARNING,
                    name,
                    f"no `ready` frame within ready_grace ({ready_grace:g} s): agents waited for it",
                    'send {"type": "ready"} after its registrations',
                )
            )
        else:
            out.append(
                finding(
                    Severity.NOTE,
                    name,
                    f"no `ready` frame: taken as ready after {ready_idle:g} s without registrations",
                    'send {"type": "ready"} after its registrations, so agents do not wait',
                )
            )
    for frame in hs.out_of_order:
        fix = "send `hello` first, then registrations, then `ready`"
        if frame.endswith(" again"):
            fix = f"send `{frame.split()[0]}` once"
        out.append(finding(Severity.WARNING, name, f"sent {frame}", fix))
    return out


def first_line(name: str, kind: str) -> str:
    """What to do about an extension that does not open its handshake."""
    if kind == Kind.MCP:
        return "check that it is an MCP server speaking stdio, with nothing else on stdout"
    return (
        f'write {{"type": "hello", "name": "{name}"}} as its first line on stdout '
        "(anything else it prints goes to stderr)"
    )


def is_trusted(found: Found | None, state: str) -> bool:
    """Whether it may run as far as trust goes (only project extensions need it)."""
    if state == "untrusted":
        return False
    return found is None or found.scope != Scope.PROJECT or not found.untrusted
