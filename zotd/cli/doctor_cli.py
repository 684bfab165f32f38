"""``zot ext doctor [NAME] [--json]``: check each extension of this
directory's workspace, and say what to do about each problem.

With a daemon running, the facts are the daemon's (``list_extensions``,
``list_tools``, zotd's notes in each log since its last start); without one,
doctor starts each extension that may run for a dry run of its own
(:mod:`zotd.runtime.dry_run`) and stops it. It never starts a daemon. Both
ways the manifests are read from disk and each interpreter is asked its
version. The checks are :mod:`zotd.model.doctor`'s; the printing is
:mod:`.doctor_view`'s. Exit codes: 0 no problem, 1 problems (or an unknown
NAME), 2 usage.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
import msgspec

from ..client import Client
from ..model import doctor as dr
from ..model import doctor_daemon as dd
from ..model import doctor_frames as df
from ..model import manage
from ..model.config import Config
from ..model.manifest import Found, kind_of, load, runs_nothing
from ..model.paths import Paths
from ..protocol import agent as ap
from ..runtime import dry_run, version_probe
from .common import Options, Where, die, run_async, settings, with_client
from .doctor_view import show
from .ext_view import offline_info
from .local import local, workspace_of


def doctor(
    name: str | None = None,
    /,
    *,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Check each extension (or NAME) and say what to do about each problem.

    Reports its manifest's errors and warnings, whether its program and its
    runtime are found (and the runtime's version), trust, how its handshake
    went, what it registered and the names it lost, what it subscribes to
    and guards, its restarts and last exit, and its log. With a daemon,
    the daemon's view; without one (it never starts one), each extension
    that may run is started for a dry run and stopped. Exits 1 if it found
    a problem.

    Args:
        name: Only this extension.
    """
    o = dataclasses.replace(opts or Options(), no_start=True)  # a daemon is not started for it
    paths, config = settings(where)
    here = str(workspace_of(o))

    async def live(zot: Client) -> int:
        infos = await zot.list_extensions()
        tools = await zot.list_tools()
        found = await anyio.to_thread.run_sync(lambda: local(o, where)[0])
        if name is not None:
            infos = [i for i in infos if i.name == name]
            if not infos:
                _unknown(name, found)
        reports = [await _live_report(i, found, tools, config, here) for i in infos]
        return show(reports, o.json, daemon=True)

    def offline() -> int:
        found, _ = local(o, where)
        if name is not None:
            try:
                found = [manage.find(name, found)]
            except manage.ManageError as exc:
                die(f"zot: {exc}")
        reports = run_async(lambda: _offline_reports(found, config, paths, here))
        return show(reports, o.json, daemon=False)

    return with_client(o, where, live, offline)


def _unknown(name: str, found: list[Found]) -> None:
    try:
        manage.find(name, found)
    except manage.ManageError as exc:
        die(f"zot: {exc}")
    die(f"zot: no extension named {name!r} in this workspace (`zot ext list` lists them)")


# --- with a daemon ---------------------------------------------------------------------


async def _live_report(
    info: ap.ExtensionInfo, found: list[Found], tools: list[ap.ToolInfo], config: Config, here: str
) -> dr.Report:
    """One extension as the daemon sees it, with its manifest read from disk."""
    mine = next((f for f in found if f.name == info.name and str(f.dir) == info.dir), None)
    if mine is None and info.dir:  # (an --ext one: only the daemon knows it)
        mine = await anyio.to_thread.run_sync(_load, Path(info.dir), info.scope)
    trusted = dr.is_trusted(mine, info.state)
    findings = dr.manifest_findings(mine, here) if mine is not None else []
    if mine is None:
        findings += [dr.finding(dr.Severity.WARNING, info.name, w) for w in info.warnings]
    runtime = await version_probe.runtime_of(mine, trusted=trusted) if mine is not None else None
    findings += dr.runtime_findings(info.name, runtime)
    findings += dr.handshake_findings(
        info.name,
        info.kind,
        info.handshake,
        ready_grace=config.ready_grace,
        ready_idle=config.ready_idle,
        state=info.state,
    )
    for tool in tools:
        if tool.extension == info.name:
            findings += df.tool_findings(
                info.name, tool.name, _decoded(tool.schema), tool.exposure, tool.replay
            )
    notes, stderr = await anyio.to_thread.run_sync(dd.last_run, Path(info.log))
    crashed = info.exit_code not in (None, 0)
    findings += dd.info_findings(
        info, broken=bool(mine is not None and mine.error), stderr=stderr if crashed else ()
    )
    findings += dd.note_findings(info.name, notes)
    return dr.Report(
        name=info.name,
        scope=info.scope,
        dir=info.dir,
        kind=info.kind,
        enabled=info.enabled,
        state=info.state,
        checked="daemon",
        trusted=trusted,
        exec=list(mine.argv) if mine is not None else [],
        runtime=runtime,
        handshake=info.handshake,
        commands=info.commands,
        tools=info.tools,
        shadowed=info.shadowed,
        events=info.events,
        intercepts=info.intercepts,
        restarts=info.restarts,
        restart_reason=info.restart_reason,
        exit_code=info.exit_code,
        exit=dd.exit_words(info.exit_code),
        stderr_tail=stderr if crashed else [],
        log=info.log,
        findings=findings,
        problems=dr.count(findings),
    )


def _load(directory: Path, scope: str) -> Found | None:
    found = load(directory, scope)
    return None if found.error and found.manifest is None else found


def _decoded(schema: object) -> object:
    if isinstance(schema, msgspec.Raw):
        try:
            return msgspec.json.decode(schema)
        except msgspec.DecodeError:
            return None
    return schema


# --- without one: dry runs ---------------------------------------------------------------


async def _offline_reports(
    found: list[Found], config: Config, paths: Paths, here: str
) -> list[dr.Report]:
    """Each extension found on disk, those that may run dry-run side by side."""
    workspace = Path(here)
    runnable = [f for f in found if _runnable(f)]
    runtimes = {
        f.name: await version_probe.runtime_of(f, trusted=dr.is_trusted(f, ""))
        for f in found
        if f.argv and not f.error
    }
    trials = await dry_run.trials(
        [dry_run.Subject(f, workspace) for f in runnable], config=config, home=paths.home
    )
    held = df.holdings(
        [(f.name, trials[f.name].registrations) for f in runnable if f.name in trials],
        reserved_commands=config.reserved_commands,
    )
    return [
        _offline_report(
            f, trials.get(f.name), held.get(f.name), runtimes.get(f.name), config, paths, here
        )
        for f in found
    ]


def _runnable(found: Found) -> bool:
    """Whether a dry run may start it: sound, enabled, trusted, with a process to start."""
    manifest = found.manifest
    if found.error or found.untrusted or manifest is None or not manifest.enabled:
        return False
    return bool(found.argv) and not runs_nothing(found)


def _offline_report(
    found: Found,
    trial: dr.Trial | None,
    held: tuple[list[str], list[str], list[ap.Shadowed]] | None,
    runtime: dr.Runtime | None,
    config: Config,
    paths: Paths,
    here: str,
) -> dr.Report:
    info = offline_info(found, here)
    kind = kind_of(found)
    findings = dr.manifest_findings(found, here)
    findings += dr.runtime_findings(found.name, runtime)
    commands: list[str] = []
    tools: list[str] = []
    shadowed: list[ap.Shadowed] = []
    state = info.state
    if trial is not None:
        trial_findings = df.trial_findings(
            found.name, kind, trial, ready_grace=config.ready_grace, ready_idle=config.ready_idle
        )
        findings += trial_findings
        if held is not None:
            commands, tools, shadowed = held
        findings += df.shadow_findings(found.name, shadowed)
        state = (
            "failed" if any(f.severity == dr.Severity.ERROR for f in trial_findings) else "ready"
        )
    elif runs_nothing(found) and state == "stopped":
        state = "ready"  # skills or a theme only: nothing to start
    elif found.manifest is not None and found.manifest.url and state == "stopped":
        findings.append(
            dr.finding(
                dr.Severity.NOTE,
                found.name,
                f"an MCP server at {found.manifest.url}: not contacted without a daemon",
            )
        )
    return dr.Report(
        name=found.name,
        scope=found.scope,
        dir=str(found.dir),
        kind=kind,
        enabled=info.enabled,
        state=state,
        checked="dry run" if trial is not None else "not run",
        trusted=dr.is_trusted(found, info.state),
        exec=list(found.argv),
        runtime=runtime,
        handshake=trial.handshake if trial is not None else None,
        commands=commands,
        tools=tools,
        shadowed=shadowed,
        events=trial.events if trial is not None else [],
        intercepts=trial.intercepts if trial is not None else [],
        restarts=0,
        restart_reason="",
        exit_code=trial.exit_code if trial is not None else None,
        exit=dd.exit_words(trial.exit_code) if trial is not None else "",
        stderr_tail=trial.stderr_tail if trial is not None else [],
        log=str(paths.extension_log(found.name)),
        findings=findings,
        problems=dr.count(findings),
    )
