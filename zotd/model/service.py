"""Running zotd under a service manager: unit files, readiness, passed sockets.

Three pieces, none of which needs a library:

- The files a service manager reads: a systemd user unit (plus a socket
  unit for socket activation) or a launchd agent. They are rendered as
  text by pure functions (:func:`systemd_service`, :func:`systemd_socket`,
  :func:`launchd_plist`) and written or removed by :func:`install` and
  :func:`uninstall`, which is all ``zotd install-service`` does.
- :func:`notify`, systemd's readiness protocol (``sd_notify``): one datagram
  of newline-separated ``KEY=value`` assignments (``READY=1``,
  ``STOPPING=1``, ``STATUS=...``) sent to the Unix socket named by
  ``$NOTIFY_SOCKET``; a name starting with ``@`` is in the abstract namespace.
- :func:`listen_fds`, systemd's socket activation protocol
  (``sd_listen_fds``): ``$LISTEN_FDS`` sockets, passed from file descriptor
  3 on, meant for the process whose pid is ``$LISTEN_PID``.

No trio here: the daemon calls :func:`notify` inline (it sends one small
datagram and never raises) and takes the socket :func:`listen_fds` found
through :func:`zotd.runtime.listener.adopt_unix_listener`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Literal

import msgspec

from .paths import Paths

log = logging.getLogger(__name__)

Manager = Literal["systemd", "launchd"]

#: The systemd units ``zotd install-service`` writes.
SERVICE_UNIT = "zotd.service"
SOCKET_UNIT = "zotd.socket"

#: The launchd job's label; its file is ``<label>.plist``.
LAUNCHD_LABEL = "dev.zot.zotd"

#: The variables a unit passes on to the daemon when they were set at install time.
PASSED_ENV = ("ZOT_HOME", "ZOTD_SOCKET", "ZOTD_CONFIG")

#: The first file descriptor of socket activation (``SD_LISTEN_FDS_START``).
LISTEN_FDS_START = 3

#: Longest a readiness datagram may wait for room in the manager's queue.
NOTIFY_TIMEOUT = 0.5

_HEADER = "Written by `zotd install-service`; remove with `zotd install-service --uninstall`."


class ServiceError(Exception):
    """The service files cannot be made here; the message says why."""


class ServiceSpec(msgspec.Struct, frozen=True):
    """What a unit file says about the daemon it runs.

    Attributes:
        argv: the command that runs the daemon in the foreground
            (:func:`daemon_argv`).
        socket: the agent socket (the socket unit listens there).
        log: where launchd sends the daemon's output (systemd uses the journal).
        env: variables the daemon gets (:func:`passed_env`).
        runtime_dir: ``$XDG_RUNTIME_DIR`` at install time; a socket below it
            is written relative to systemd's ``%t``, the same directory.
    """

    argv: tuple[str, ...]
    socket: Path
    log: Path
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    runtime_dir: Path | None = None


def daemon_argv() -> tuple[str, ...]:
    """This installation's daemon: the running interpreter's ``-m zotd``.

    The interpreter path is kept as it is (not resolved), so a virtual
    environment's ``python`` stays the one that has zotd installed.
    """
    if not sys.executable:
        raise ServiceError("cannot tell which Python runs zotd (sys.executable is empty)")
    return (sys.executable, "-m", "zotd")


def passed_env(
    paths: Paths, environ: Mapping[str, str], *, socket_given: bool, config_given: bool
) -> dict[str, str]:
    """The daemon's environment in the unit: each of :data:`PASSED_ENV` that
    was set (in ``environ``, or as ``--socket`` / ``--config``), as the
    absolute path it resolved to; the unset ones stay the default."""
    env = {}
    if environ.get("ZOT_HOME"):
        env["ZOT_HOME"] = str(paths.home)
    if socket_given or environ.get("ZOTD_SOCKET"):
        env["ZOTD_SOCKET"] = str(paths.socket)
    if config_given or environ.get("ZOTD_CONFIG"):
        env["ZOTD_CONFIG"] = str(paths.config_file.absolute())
    return env


def manager_for(platform: str) -> Manager:
    """The service manager of a platform (``sys.platform``).

    Raises:
        ServiceError: neither Linux nor macOS.
    """
    if platform.startswith("linux"):
        return "systemd"
    if platform == "darwin":
        return "launchd"
    raise ServiceError(
        f"install-service knows systemd (Linux) and launchd (macOS), not {platform!r}; "
        "run `zotd` (the foreground daemon) under your own service manager"
    )


def service_dir(manager: Manager, environ: Mapping[str, str], home: Path) -> Path:
    """Where the manager looks for the user's own units.

    systemd: ``$XDG_CONFIG_HOME/systemd/user`` (``~/.config/systemd/user``);
    launchd: ``~/Library/LaunchAgents``.
    """
    if manager == "launchd":
        return home / "Library" / "LaunchAgents"
    config = environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if os.path.isabs(config) else home / ".config"
    return base / "systemd" / "user"


# --- rendering ------------------------------------------------------------------------


def _specifiers(text: str) -> str:
    # systemd expands %-specifiers in most settings: a literal % is written %%.
    return text.replace("%", "%%")


def _quoted(text: str) -> str:
    # A word of a systemd setting, in double quotes when it needs them.
    if text and not any(c in text for c in " \t\"'\\;"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _exec_word(arg: str) -> str:
    # In ExecStart=, $NAME is expanded as well: a literal $ is written $$.
    return _quoted(_specifiers(arg).replace("$", "$$"))


def _socket_address(spec: ServiceSpec) -> str:
    if spec.runtime_dir is not None and spec.socket.is_relative_to(spec.runtime_dir):
        return "%t/" + _specifiers(spec.socket.relative_to(spec.runtime_dir).as_posix())
    return _specifiers(str(spec.socket))


def systemd_service(spec: ServiceSpec, *, socket_activation: bool = False) -> str:
    """``zotd.service``: a ``Type=notify`` user service that runs the daemon.

    The daemon says ``READY=1`` once its socket answers. ``KillMode=mixed``
    sends the stop signal to the daemon alone, so it stops its extensions
    in order (each gets ``shutdown``); whatever is left when it exits is
    killed. With ``socket_activation`` the service comes with
    ``zotd.socket`` and is started by it.
    """
    lines = [f"# {_HEADER}", "[Unit]", "Description=zotd, the zot extension host"]
    if socket_activation:
        lines += [f"Requires={SOCKET_UNIT}", f"After={SOCKET_UNIT}"]
    lines += [
        "",
        "[Service]",
        "Type=notify",
        "ExecStart=" + " ".join(_exec_word(a) for a in spec.argv),
    ]
    lines += [
        "Environment=" + _quoted(_specifiers(f"{k}={v}")) for k, v in sorted(spec.env.items())
    ]
    lines += [
        "Restart=on-failure",
        "RestartSec=1",
        "KillMode=mixed",
        "",
        "[Install]",
        f"Also={SOCKET_UNIT}" if socket_activation else "WantedBy=default.target",
    ]
    return "\n".join(lines) + "\n"


def systemd_socket(spec: ServiceSpec) -> str:
    """``zotd.socket``: systemd listens on the agent socket (0600, in a 0700
    directory) and starts ``zotd.service`` with it at the first connection."""
    lines = [
        f"# {_HEADER}",
        "[Unit]",
        "Description=zotd socket: starts the zot extension host on the first connection",
        "",
        "[Socket]",
        f"ListenStream={_socket_address(spec)}",
        "SocketMode=0600",
        "DirectoryMode=0700",
        "RemoveOnStop=yes",
        "",
        "[Install]",
        "WantedBy=sockets.target",
    ]
    return "\n".join(lines) + "\n"


def launchd_plist(spec: ServiceSpec) -> str:
    """``dev.zot.zotd.plist``: a launchd agent that starts the daemon at login
    and again if it fails (an exit with code 0, after ``zotd stop``, stays stopped)."""
    import plistlib  # (here: the daemon, which imports this module, never writes one)

    job: dict[str, object] = {"Label": LAUNCHD_LABEL, "ProgramArguments": list(spec.argv)}
    if spec.env:
        job["EnvironmentVariables"] = dict(sorted(spec.env.items()))
    job |= {
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": str(spec.log),
        "StandardErrorPath": str(spec.log),
    }
    return plistlib.dumps(job, sort_keys=False).decode()


def unit_files(manager: Manager, spec: ServiceSpec, *, socket_activation: bool) -> dict[str, str]:
    """File name -> text of every file the manager gets.

    Raises:
        ServiceError: socket activation was asked of launchd.
    """
    if manager == "launchd":
        if socket_activation:
            raise ServiceError("--socket-activation needs systemd; launchd runs zotd at login")
        return {f"{LAUNCHD_LABEL}.plist": launchd_plist(spec)}
    files = {SERVICE_UNIT: systemd_service(spec, socket_activation=socket_activation)}
    if socket_activation:
        files[SOCKET_UNIT] = systemd_socket(spec)
    return files


def _names(manager: Manager) -> tuple[str, ...]:
    if manager == "launchd":
        return (f"{LAUNCHD_LABEL}.plist",)
    return (SERVICE_UNIT, SOCKET_UNIT)


# --- installing -----------------------------------------------------------------------


class Installed(msgspec.Struct):
    """What :func:`install` did."""

    written: list[Path] = msgspec.field(default_factory=list)
    #: Files of an earlier install that the new one does not have.
    removed: list[Path] = msgspec.field(default_factory=list)


def install(manager: Manager, directory: Path, files: Mapping[str, str]) -> Installed:
    """Writes ``files`` into ``directory`` (each through a temporary file and
    a rename, mode 0644) and removes the manager's other zotd files there.

    Raises:
        ServiceError: a file cannot be written.
    """
    done = Installed()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            path = directory / name
            tmp = path.with_name(f".{name}.tmp")
            tmp.write_text(text)
            tmp.chmod(0o644)
            os.replace(tmp, path)
            done.written.append(path)
        for name in _names(manager):
            if name not in files:
                done.removed += _remove(manager, directory, name)
    except OSError as exc:
        raise ServiceError(f"cannot write to {directory}: {exc.strerror or exc}") from None
    return done


def uninstall(manager: Manager, directory: Path) -> list[Path]:
    """Removes zotd's files from ``directory``, and for systemd the links
    ``systemctl enable`` made to them (``<target>.wants/zotd.*``); returns
    what was removed.

    Raises:
        ServiceError: a file cannot be removed.
    """
    removed = []
    try:
        for name in _names(manager):
            removed += _remove(manager, directory, name)
    except OSError as exc:
        raise ServiceError(f"cannot remove from {directory}: {exc.strerror or exc}") from None
    return removed


def _remove(manager: Manager, directory: Path, name: str) -> list[Path]:
    # The file, and (systemd) the links `systemctl enable` made to it, dangling or not.
    wants = sorted(directory.glob("*.wants")) if manager == "systemd" else []
    removed = []
    for path in [*(w / name for w in wants), directory / name]:
        if path.is_symlink() or path.exists():
            path.unlink()
            removed.append(path)
    return removed


def enable_steps(manager: Manager, directory: Path, *, socket_activation: bool) -> list[str]:
    """The commands that start the installed service now and at every login."""
    if manager == "launchd":
        plist = directory / f"{LAUNCHD_LABEL}.plist"
        return [f"launchctl bootstrap gui/{os.getuid()} {plist}"]
    unit = SOCKET_UNIT if socket_activation else SERVICE_UNIT
    return ["systemctl --user daemon-reload", f"systemctl --user enable --now {unit}"]


def disable_steps(manager: Manager, removed: list[Path]) -> list[str]:
    """The commands that stop a service whose files were just removed."""
    if manager == "launchd":
        return [f"launchctl bootout gui/{os.getuid()}/{LAUNCHD_LABEL}"]
    units = sorted({p.name for p in removed}, reverse=True)  # zotd.socket first
    return [f"systemctl --user stop {' '.join(units)}", "systemctl --user daemon-reload"]


# --- talking to systemd ---------------------------------------------------------------


def notify(state: str, environ: Mapping[str, str] | None = None) -> bool:
    """Tells the service manager ``state`` (``"READY=1"``, ``"STOPPING=1"``,
    with ``"\\nSTATUS=..."`` lines if wanted) over ``$NOTIFY_SOCKET``.

    Returns whether it was sent: ``False`` at once when the variable is
    unset (no manager waits for us). A failure is logged, never raised:
    the daemon runs on whether or not its manager hears it.
    """
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):
        target = b"\0" + os.fsencode(address[1:])  # the abstract namespace (Linux)
    elif address.startswith("/"):
        target = os.fsencode(address)
    else:
        log.warning("NOTIFY_SOCKET=%r is not a Unix socket address; not notifying", address)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.settimeout(NOTIFY_TIMEOUT)
            sock.sendto(state.encode(), target)
    except OSError as exc:
        log.warning("could not notify the service manager at %s: %s", address, exc)
        return False
    return True


def listen_fds(
    environ: MutableMapping[str, str] | None = None, pid: int | None = None
) -> list[int]:
    """The sockets passed by socket activation: ``[3, 4, ...]``, or ``[]``.

    They count only if ``$LISTEN_PID`` is our pid (``pid``, by default
    :func:`os.getpid`): the variables may have been meant for a parent. The
    variables (``LISTEN_PID``, ``LISTEN_FDS``, ``LISTEN_FDNAMES``) are
    removed from ``environ`` (by default the process environment) either
    way, and the descriptors made close-on-exec, so that no child of the
    daemon takes them for its own.
    """
    env = os.environ if environ is None else environ
    for_pid = env.pop("LISTEN_PID", None)
    count = env.pop("LISTEN_FDS", None)
    env.pop("LISTEN_FDNAMES", None)
    if for_pid is None or count is None:
        return []
    try:
        target, n = int(for_pid), int(count)
    except ValueError:
        log.warning("ignoring LISTEN_PID=%r LISTEN_FDS=%r: not numbers", for_pid, count)
        return []
    if target != (os.getpid() if pid is None else pid):
        log.info("LISTEN_FDS is for pid %d, not this process: ignored", target)
        return []
    fds = list(range(LISTEN_FDS_START, LISTEN_FDS_START + max(n, 0)))
    try:
        for fd in fds:
            os.set_inheritable(fd, False)
    except OSError as exc:
        log.warning("ignoring LISTEN_FDS=%d: %s", n, exc)
        return []
    return fds
