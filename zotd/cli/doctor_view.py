"""How ``zot ext doctor`` prints its reports: per extension a header line,
its findings (each a line saying what to do), then its facts, indented; or,
with ``--json``, the list of :class:`~zotd.model.doctor.Report` s.

Everything a manifest or an extension chose (names, paths, versions, what
it wrote to stderr, registered names) is escaped for the terminal
(:func:`.output.printable`).
"""

from __future__ import annotations

import sys

from ..model.doctor import Report, Severity
from ..protocol.agent import HandshakeInfo
from .common import print_json
from .output import printable

_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}


def show(reports: list[Report], json: bool, *, daemon: bool) -> int:
    """Prints the reports; the exit code: 1 if any found a problem, else 0."""
    reports = sorted(reports, key=lambda r: r.name)
    problems = sum(r.problems for r in reports)
    if json:
        print_json(reports)
        return 1 if problems else 0
    if not reports:
        print("no extensions installed; install one with `zot ext install <path|git-url>`")
        return 0
    for report in reports:
        for line in lines(report):
            print(line)
    with_problems = [r.name for r in reports if r.problems]
    if problems:
        print(
            printable(
                f"{_count(problems, 'problem')} in {', '.join(with_problems)} "
                f"({len(with_problems)} of {_count(len(reports), 'extension')})"
            )
        )
    else:
        print(f"no problems found ({_count(len(reports), 'extension')})")
    if not daemon:
        sys.stdout.flush()  # (the report first, where both go to one place)
        print(offline_note(reports), file=sys.stderr)
    return 1 if problems else 0


def offline_note(reports: list[Report]) -> str:
    """What doctor says on stderr without a daemon: how many it dry-ran."""
    tried = sum(1 for r in reports if r.checked == "dry run")
    if not tried:
        return "(zotd is not running: checked on disk; none could be started for a dry run)"
    return f"(zotd is not running: {_count(tried, 'extension')} started for a dry run, and stopped)"


def lines(r: Report) -> list[str]:
    """One report as text: its header, findings and facts."""
    summary = _count(r.problems, "problem") if r.problems else "ok"
    checked = "" if r.checked == "daemon" else f", {r.checked}"
    out = [printable(f"{r.name} ({r.scope}, {r.state}{checked}): {summary}")]
    findings = sorted(r.findings, key=lambda f: _ORDER.get(Severity(f.severity), 3))
    out += ["  " + printable(f.line()) for f in findings]
    out += ["  " + printable(fact) for fact in facts(r)]
    return out


def facts(r: Report) -> list[str]:
    """What doctor knows of it, one line each."""
    out = [f"dir: {r.dir}"]
    if r.exec:
        out.append(f"runs: {' '.join(r.exec)}")
    rt = r.runtime
    if rt is not None and rt.interpreter:
        named = " (from its #! line)" if rt.origin == "#!" else ""
        where = f" at {rt.path}" if rt.path and rt.path != rt.interpreter else ""
        version = f": {rt.version}" if rt.version else ""
        out.append(
            f"runtime: {rt.interpreter}{named}{where}{version or ('' if rt.path else ': not found')}"
        )
    if not r.trusted:
        out.append("trusted: no")
    if r.handshake is not None:
        out.append(f"handshake: {handshake(r.handshake, r.kind)}")
    provides = [f"/{c}" for c in r.commands] + r.tools
    if r.checked != "not run":
        out.append(f"provides: {', '.join(provides) or 'nothing'}")
    for s in r.shadowed:
        out.append(f"lost: {s.name} to {s.held_by}")
    if r.events:
        out.append(f"on: {' '.join(r.events)}")
    if r.intercepts:
        out.append(f"guards: {' '.join(r.intercepts)}")
    if r.restarts:
        why = f" (last: {r.restart_reason})" if r.restart_reason else ""
        out.append(f"restarts: {r.restarts}{why}")
    if r.exit:
        out.append(f"last exit: {r.exit}")
    if r.problems:  # (a healthy one's stderr is no news)
        out += [f"stderr: {line}" for line in r.stderr_tail]
    if r.log:
        out.append(f"log: {r.log}")
    return out


def handshake(hs: HandshakeInfo, kind: str) -> str:
    """``hello after 0.05 s, ready after 0.06 s (its `ready` frame)``."""
    hello = "initialize answered" if kind == "mcp" else "hello"
    if hs.hello_s is None:
        return f"no {hello}"
    text = f"{hello} after {hs.hello_s:.2f} s"
    if hs.ready_s is None:
        return text + ", not ready"
    if kind == "mcp":
        how = "its tools and prompts listed"
    elif hs.auto_ready:
        how = "without a `ready` frame"
    else:
        how = "its `ready` frame"
    text += f", ready after {hs.ready_s:.2f} s ({how})"
    if hs.out_of_order:
        text += f"; out of order: {', '.join(hs.out_of_order)}"
    return text


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")
