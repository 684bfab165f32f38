"""The checks of ``zot ext doctor`` on what an extension says: the tools,
commands and subscriptions it registers, and everything a dry run of it saw
(:class:`~.doctor.Trial`: its handshake, bad output, crash and stop).
Plain functions; the records are :mod:`.doctor`'s.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from jsonschema import Draft202012Validator, validators

from ..protocol import extension as ep
from ..protocol.agent import Shadowed
from ..protocol.frames import is_json_object
from . import hints
from .config import BUILTIN_TOOLS
from .doctor import Finding, Severity, Trial, first_line, handshake_findings
from .doctor import finding as _f
from .manifest import Kind
from .registry import Registry
from .restart import describe_exit

# --- registrations -----------------------------------------------------------------


def tool_findings(name: str, tool: str, schema: Any, exposure: str, replay: str) -> list[Finding]:
    """One tool as registered: its ``schema`` (decoded JSON), ``exposure`` and ``replay``."""
    out = []
    label = hints.label("tool", tool)
    if exposure and exposure not in ep.EXPOSURES:
        out.append(
            _f(
                Severity.ERROR,
                name,
                f"tool {label} is skipped: unknown exposure {exposure!r}",
                f"use {hints.one_of(sorted(ep.EXPOSURES))}, or leave it out",
            )
        )
    if not isinstance(schema, dict):
        out.append(
            _f(
                Severity.ERROR,
                name,
                f"tool {label} is refused: its `schema` is not a JSON object",
                'give a JSON Schema object, like {"type": "object", "properties": {...}}',
            )
        )
    else:
        problem = schema_problem(schema)
        if problem is not None:
            out.append(
                _f(
                    Severity.WARNING,
                    name,
                    f"tool {label}: its schema is not valid JSON Schema ({problem})",
                    "fix it: zotd cannot check rewritten arguments against it, and a model host may refuse the tool",
                )
            )
    if replay and replay not in ep.REPLAYS:
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"tool {label}: unknown replay {replay!r}, taken as 'never'",
                f"use {hints.one_of(sorted(ep.REPLAYS))}",
            )
        )
    return out


def frame_findings(
    name: str, frames: Sequence[ep.RegisterCommand | ep.RegisterTool]
) -> list[Finding]:
    """What it registered, frame by frame (a dry run sees them all)."""
    out = []
    for frame in frames:
        if isinstance(frame, ep.RegisterTool):
            try:
                schema = msgspec.json.decode(frame.schema)
            except (msgspec.DecodeError, RecursionError):
                schema = None
            out += tool_findings(name, frame.name, schema, frame.exposure, frame.replay)
    return out


def subscribe_findings(
    name: str, events: Iterable[str], intercepts: Iterable[str]
) -> list[Finding]:
    """What it subscribed to: events zot does not send, events it cannot intercept."""
    out = []
    for event in sorted(set(events) - ep.EVENTS):
        close = difflib.get_close_matches(event, sorted(ep.EVENTS), n=1)
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"subscribes to {event!r}, an event zot does not send",
                f"did you mean {close[0]!r}?" if close else "remove it",
            )
        )
    for event in sorted(set(intercepts) - ep.INTERCEPTABLE):
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"asks to intercept {event!r}, which cannot be intercepted",
                f"intercept {hints.one_of(sorted(ep.INTERCEPTABLE))}, or subscribe to it as an event",
            )
        )
    return out


def shadow_findings(name: str, shadowed: Iterable[Shadowed]) -> list[Finding]:
    """The names it registered and another holds."""
    out = []
    for s in shadowed:
        if s.held_by == "zot":
            fix = "rename it: zot keeps that name"
        else:
            fix = f"rename it, or run `zot ext disable {s.held_by}` if you want this one"
        out.append(_f(Severity.WARNING, name, f"{s.name} is hidden: {s.reason}", fix))
    return out


# --- what a dry run saw ------------------------------------------------------------


def trial_findings(
    name: str, kind: str, trial: Trial, *, ready_grace: float, ready_idle: float
) -> list[Finding]:
    """A dry run: its handshake, registrations, bad output, crash and stop."""
    if trial.spawn_error:
        fix = "check its `exec` and that it is executable"
        return [_f(Severity.ERROR, name, trial.spawn_error, fix)]
    if trial.error:
        return [_f(Severity.ERROR, name, trial.error, "run it with `zotd --ext DIR` to see more")]
    out = []
    again = f"fix what it says, then run `zot ext doctor {name}` again"
    if trial.refused:
        out.append(
            _f(
                Severity.ERROR,
                name,
                f"broke the protocol: {trial.refused}",
                first_line(name, kind),
            )
        )
    elif trial.exit_code is not None:
        why = f"{describe_exit(trial.exit_code)} before it was asked to stop"
        if trial.stderr_tail:
            why += "; its stderr ends: " + " | ".join(trial.stderr_tail)
        out.append(_f(Severity.ERROR, name, why, again))
    elif trial.mcp_error:
        out.append(_f(Severity.ERROR, name, trial.mcp_error, first_line(name, kind)))
    elif trial.handshake.hello_s is None:
        said = "answer MCP's `initialize`" if kind == Kind.MCP else "say `hello`"
        out.append(
            _f(
                Severity.ERROR,
                name,
                f"it did not {said} within the dry run's {trial.hello_bound or ready_grace:g} s",
                first_line(name, kind),
            )
        )
    else:
        out += handshake_findings(
            name, kind, trial.handshake, ready_grace=ready_grace, ready_idle=ready_idle
        )
    if trial.hello_name and trial.hello_name != name:
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"its `hello` names {trial.hello_name!r}; it runs as {name!r}",
                f"name it {name!r} in its `hello`, as extension.json does",
            )
        )
    out += frame_findings(name, trial.registrations)
    out += subscribe_findings(name, trial.events, trial.intercepts)
    if trial.bad_lines:
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"wrote {trial.bad_lines} line(s) to stdout that are not frames (first: {trial.first_bad})",
                "write only JSON frames to stdout; log to stderr",
            )
        )
    if trial.oversized:
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"wrote {trial.oversized} line(s) longer than max_frame_bytes",
                "send smaller frames",
            )
        )
    if trial.unknown_types:
        known = ", ".join(trial.unknown_types)
        out.append(
            _f(Severity.NOTE, name, f"sent frames of types zotd does not know (ignored): {known}")
        )
    if trial.stop:
        out.append(
            _f(
                Severity.WARNING,
                name,
                f"did not exit on `shutdown`: it took {trial.stop}",
                "exit when it reads `shutdown`, or when its stdin ends",
            )
        )
    return out


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (its own ``$schema``'s
    draft, else 2020-12), in one line; ``None`` if it is."""
    try:
        cls = validators.validator_for(schema, default=Draft202012Validator)
        error = next(iter(cls(cls.META_SCHEMA).iter_errors(schema)), None)
    except Exception as exc:  # an unresolvable $ref, too deep, ...: say so
        return f"{type(exc).__name__}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message[:200]}"


def holdings(
    registered: Sequence[tuple[str, Sequence[ep.RegisterCommand | ep.RegisterTool]]],
    *,
    reserved_commands: Iterable[str],
) -> dict[str, tuple[list[str], list[str], list[Shadowed]]]:
    """Who would hold which name, were these extensions' registrations made
    in this order in one workspace: per extension, the commands and tools
    it holds and the names it would lose (to whom, and why)."""
    registry = Registry(reserved_commands=reserved_commands, builtin_tools=BUILTIN_TOOLS)
    for name, frames in registered:
        for frame in frames:
            if isinstance(frame, ep.RegisterCommand):
                registry.add_command(name, frame.name, frame.description)
            elif is_json_object(frame.schema):  # (zotd refuses the others)
                registry.add_tool(name, frame.name, frame.description, frame.schema, frame)
    return {
        name: (
            [c.name for c in registry.commands_of(name)],
            [t.name for t in registry.tools_of(name)],
            registry.shadowed_of(name),
        )
        for name, _ in registered
    }
