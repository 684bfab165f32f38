"""What an extension reports: its live states, the host it reports them to,
and its entry in ``list_extensions``.

The seam between :class:`~.extension.Extension` and its workspace: the
workspace is the :class:`Host`; the extension's :class:`State` is what
``list_extensions``, ``extension_state`` pushes and ``zot ext list`` show.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

import trio

from ..protocol import extension as ep
from ..protocol.agent import ExtensionInfo, Metrics, PassedOver, Shadowed
from . import proc_figures

if TYPE_CHECKING:
    from .extension import Extension


class State(StrEnum):
    """Live states of an extension (its ``state`` on the wire: the values)."""

    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    #: A project-local extension the user has not trusted (see ``zot ext trust``).
    UNTRUSTED = "untrusted"
    #: Ended on its own; waiting out its backoff before a restart.
    RESTARTING = "restarting"
    #: Lazy (zotd's): not running; its registrations are listed from its
    #: last run, and its first use starts it.
    SLEEPING = "sleeping"
    EXITED = "exited"
    FAILED = "failed"
    DISABLED = "disabled"


#: States in which the process is alive and takes frames.
RUNNING = frozenset({State.STARTING, State.READY})

#: States in which an extension serves no skills.
_NO_SKILLS = frozenset({State.DISABLED, State.UNTRUSTED})


def serves_skills(ext: Extension) -> bool:
    """Whether ``ext`` serves its skills now: sound, enabled and trusted
    (a crashed process does not take them away)."""
    found = ext.found
    enabled = found.manifest is not None and found.manifest.enabled
    return enabled and not found.error and not found.untrusted and ext.state not in _NO_SKILLS


class Host(Protocol):
    """What an extension reports to, and asks of, its workspace."""

    def hello_ack(self, ext: Extension) -> ep.HelloAck: ...

    def on_register_command(self, ext: Extension, frame: ep.RegisterCommand) -> str | None: ...

    def on_register_tool(self, ext: Extension, frame: ep.RegisterTool) -> str | None: ...

    def on_notify(self, ext: Extension, frame: ep.Notify) -> None: ...

    def on_panel(self, ext: Extension, frame: ep.PanelRender | ep.PanelClose) -> None: ...

    def on_host_call(self, ext: Extension, frame: ep.CallToolRequest | ep.CallToolCancel) -> None:
        """Current zot's ext -> host ``call_tool`` (or its cancel)."""
        ...

    def on_one_way(self, ext: Extension, frame: ep.OneWay) -> None:
        """Current zot's ``submit``, ``submit_slash``, ``clear_notes``, ``open_panel``."""
        ...

    def on_reregister(self, ext: Extension) -> None:
        """``ext`` lists its registrations anew (an MCP server's
        ``list_changed``): drop what it registered; it registers again."""
        ...

    def on_changed(self, ext: Extension) -> None: ...

    def on_exit(self, ext: Extension) -> None: ...


def metrics(ext: Extension) -> Metrics:
    """``ext``'s metrics: its counts, and its process's memory and CPU while
    the process is up (read now: :func:`.proc_figures.look`)."""
    proc = proc_figures.look(ext.pid, ext.started_at) if ext.up else proc_figures.NOTHING
    return ext.metrics.figures(
        late_replies=ext.late_replies,
        rss_bytes=proc.rss_bytes,
        cpu_percent=proc.cpu_percent,
        cpu_s=proc.cpu_s,
    )


def info(
    ext: Extension,
    commands: list[str],
    tools: list[str],
    shadowed: list[Shadowed] | None = None,
    hint: str = "",
) -> ExtensionInfo:
    """``ext`` as ``list_extensions`` shows it, with the names it holds.

    Inline on the event loop: the log's tail, read once the process has
    exited, is one read of at most 8 KiB; its process's figures, while it
    runs, two small reads of ``/proc`` (see :func:`metrics`).
    """
    m = ext.found.manifest
    shows_pid = ext.up or ext.state == State.STOPPING  # (not while it sleeps)
    uptime = None
    if shows_pid and ext.started_at is not None:
        uptime = round(trio.current_time() - ext.started_at, 3)
    return ExtensionInfo(
        name=ext.name,
        version=m.version if m else "",
        description=m.description if m else "",
        language=m.language if m else "",
        scope=ext.found.scope,
        dir=str(ext.found.dir),
        enabled=m.enabled if m else True,
        state=ext.state,
        pid=ext.pid if shows_pid else None,
        restarts=ext.restarts,
        restart_reason=ext.restart_reason,
        exit_code=ext.exit_code,
        commands=commands,
        tools=tools,
        events=sorted(ext.events),
        intercepts=sorted(ext.intercepts),
        log=str(ext.log_path),
        last_error=ext.last_error,
        log_tail=ext.log.tail() if ext.exit_code is not None else [],
        capabilities=ext.capabilities,
        late_replies=ext.late_replies,
        warnings=[*ext.found.warnings, *([ext.hello_warning] if ext.hello_warning else [])],
        uptime_s=uptime,
        shadowed=shadowed or [],
        hint=hint,
        passed_over=[
            PassedOver(scope=a.found.scope, dir=str(a.found.dir), why=a.why, reason=a.reason)
            for a in ext.found.passed_over
        ],
        skills=[s.name for s in ext.found.skills] if serves_skills(ext) else [],
        kind=m.kind if m else "zot",
        sharing=ext.found.sharing,
        workspaces=ext.workspaces,
        metrics=metrics(ext),
        handshake=ext.handshake,
    )
