"""``zotd install-service``: the daemon as a user service, under systemd
(Linux) or launchd (macOS); the unit files themselves are
:mod:`zotd.model.service`'s."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

from cyclopts import Parameter

from .argv import die, settings
from .common import Where


def install_service(
    *,
    uninstall: bool = False,
    socket_activation: bool = False,
    print_: Annotated[bool, Parameter(name="--print")] = False,
    directory: Annotated[Path | None, Parameter(name="--dir")] = None,
    where: Where | None = None,
) -> int:
    """Install zotd as a user service: systemd on Linux, launchd on macOS.

    Writes the unit (~/.config/systemd/user/zotd.service, or
    ~/Library/LaunchAgents/dev.zot.zotd.plist) that runs this installation's
    zotd, and prints the commands that enable it. ZOT_HOME, ZOTD_SOCKET and
    ZOTD_CONFIG (or --socket / --config) are written into it when set.

    Args:
        uninstall: Remove the files instead (and systemd's links to them).
        socket_activation: systemd only: also write zotd.socket, so systemd
            listens on the socket and starts zotd at the first connection.
        print_: Print the files instead of writing them.
        directory: Write into this directory [default: where the service manager looks].
    """
    from ..model import logfiles, service

    try:
        manager = service.manager_for(sys.platform)
        folder = directory or service.service_dir(manager, os.environ, Path.home())
        if uninstall:
            removed = service.uninstall(manager, folder)
            if not removed:
                print(f"no zotd service files in {folder}")
                return 0
            for path in removed:
                print(f"removed {path}")
            print("To stop the daemon the service manager runs now:")
            print("\n".join("  " + step for step in service.disable_steps(manager, removed)))
            return 0
        paths, _ = settings(where, "zotd")
        env = service.passed_env(
            paths,
            os.environ,
            socket_given=bool(where and where.socket),
            config_given=bool(where and where.config),
        )
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        spec = service.ServiceSpec(
            argv=service.daemon_argv(),
            socket=paths.socket,
            log=paths.daemon_log,
            env=env,
            runtime_dir=Path(runtime) if runtime else None,
        )
        files = service.unit_files(manager, spec, socket_activation=socket_activation)
        if print_:
            for name, text in files.items():
                if len(files) > 1:
                    print(f"# {folder / name}")
                print(text, end="" if text.endswith("\n") else "\n")
            return 0
        if manager == "launchd":
            try:
                # launchd does not make it, and would make the file 0644.
                os.close(logfiles.open_append(paths.daemon_log))
            except OSError as exc:
                return die(f"zotd: cannot create {paths.daemon_log}: {exc.strerror or exc}")
        done = service.install(manager, folder, files)
    except service.ServiceError as exc:
        return die(f"zotd: {exc}")
    for path in done.written:
        print(f"wrote {path}")
    for path in done.removed:
        print(f"removed {path} (not part of this install)")
    print("To start zotd now and at every login:")
    steps = service.enable_steps(manager, folder, socket_activation=socket_activation)
    print("\n".join("  " + step for step in steps))
    if manager == "systemd":
        print("Its log: journalctl --user -u zotd")
    print("To remove it: zotd install-service --uninstall")
    return 0
