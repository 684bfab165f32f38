"""Running under a service manager: the unit files ``zotd install-service``
writes, readiness (``sd_notify``) and socket activation (``LISTEN_FDS``).

The daemon tests run ``python -m zotd`` as a real subprocess and play
systemd's part by hand: a datagram socket for ``NOTIFY_SOCKET``, and a
listening socket passed as fd 3 with ``LISTEN_FDS``/``LISTEN_PID``.
"""

from __future__ import annotations

import fcntl
import json
import os
import plistlib
import select
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zotd.cli.zotd_cli import app
from zotd.model import service
from zotd.model.paths import Paths
from zotd.runtime.listener import SocketError, adopt_unix_listener

#: Upper bound for the daemon to answer, and to stop: a hang guard, generous
#: for a slow or busy machine.
WAIT = 30.0

SPEC = service.ServiceSpec(
    argv=("/opt/zot/bin/python", "-m", "zotd"),
    socket=Path("/run/user/1000/zot/zotd.sock"),
    log=Path("/home/u/.local/state/zot/logs/zotd.log"),
    runtime_dir=Path("/run/user/1000"),
)


# --- the unit files --------------------------------------------------------------------


def test_systemd_service_unit() -> None:
    lines = service.systemd_service(SPEC).splitlines()
    for line in (
        "[Service]",
        "Type=notify",
        "ExecStart=/opt/zot/bin/python -m zotd",
        "Restart=on-failure",
        "KillMode=mixed",
        "WantedBy=default.target",
    ):
        assert line in lines
    assert not [line for line in lines if line.startswith(("Environment=", "Requires="))]
    assert lines.index("[Unit]") < lines.index("[Service]") < lines.index("[Install]")


def test_systemd_units_for_socket_activation() -> None:
    unit = service.systemd_service(SPEC, socket_activation=True).splitlines()
    assert "Requires=zotd.socket" in unit
    assert "After=zotd.socket" in unit
    assert "Also=zotd.socket" in unit
    assert "WantedBy=default.target" not in unit  # the socket starts it
    sock = service.systemd_socket(SPEC).splitlines()
    for line in (
        "[Socket]",
        "ListenStream=%t/zot/zotd.sock",  # systemd's %t is $XDG_RUNTIME_DIR
        "SocketMode=0600",
        "DirectoryMode=0700",
        "WantedBy=sockets.target",
    ):
        assert line in sock
    elsewhere = service.ServiceSpec(argv=SPEC.argv, socket=Path("/tmp/z/zotd.sock"), log=SPEC.log)
    assert "ListenStream=/tmp/z/zotd.sock" in service.systemd_socket(elsewhere).splitlines()


def test_systemd_quoting() -> None:
    spec = service.ServiceSpec(
        argv=("/opt/my zot/python", "-m", "zotd"),
        socket=Path("/tmp/50%/zotd.sock"),
        log=SPEC.log,
        env={"ZOT_HOME": "/home/u/my zot", "ZOTD_CONFIG": "/c/$HOME%.toml"},
    )
    unit = service.systemd_service(spec).splitlines()
    assert 'ExecStart="/opt/my zot/python" -m zotd' in unit
    assert 'Environment="ZOT_HOME=/home/u/my zot"' in unit
    assert "Environment=ZOTD_CONFIG=/c/$HOME%%.toml" in unit  # % is a specifier; $ is literal
    assert "ListenStream=/tmp/50%%/zotd.sock" in service.systemd_socket(spec).splitlines()
    dollar = service.ServiceSpec(argv=("/opt/$x/python",), socket=SPEC.socket, log=SPEC.log)
    assert "ExecStart=/opt/$$x/python" in service.systemd_service(dollar).splitlines()


def test_launchd_plist() -> None:
    spec = service.ServiceSpec(
        argv=SPEC.argv, socket=SPEC.socket, log=SPEC.log, env={"ZOT_HOME": "/home/u/zot"}
    )
    job = plistlib.loads(service.launchd_plist(spec).encode())
    assert job == {
        "Label": "dev.zot.zotd",
        "ProgramArguments": ["/opt/zot/bin/python", "-m", "zotd"],
        "EnvironmentVariables": {"ZOT_HOME": "/home/u/zot"},
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": str(SPEC.log),
        "StandardErrorPath": str(SPEC.log),
    }
    assert "EnvironmentVariables" not in plistlib.loads(service.launchd_plist(SPEC).encode())
    with pytest.raises(service.ServiceError, match="needs systemd"):
        service.unit_files("launchd", SPEC, socket_activation=True)


def test_the_daemon_command_is_this_installation() -> None:
    assert service.daemon_argv() == (sys.executable, "-m", "zotd")


def test_only_the_variables_that_were_set_go_into_the_unit(tmp_path: Path) -> None:
    paths = Paths(home=tmp_path / "h", socket=tmp_path / "s.sock", config_file=Path("c.toml"))
    assert service.passed_env(paths, {}, socket_given=False, config_given=False) == {}
    env = service.passed_env(
        paths, {"ZOT_HOME": "h", "ZOTD_CONFIG": "c.toml"}, socket_given=True, config_given=False
    )
    assert env == {
        "ZOT_HOME": str(tmp_path / "h"),
        "ZOTD_SOCKET": str(tmp_path / "s.sock"),
        "ZOTD_CONFIG": str(Path("c.toml").absolute()),  # the daemon's cwd is not ours
    }


def test_platforms_and_directories() -> None:
    assert service.manager_for("linux") == "systemd"
    assert service.manager_for("darwin") == "launchd"
    with pytest.raises(service.ServiceError, match="not 'win32'"):
        service.manager_for("win32")
    home = Path("/home/u")
    assert service.service_dir("systemd", {}, home) == home / ".config/systemd/user"
    xdg = {"XDG_CONFIG_HOME": "/xdg"}
    assert service.service_dir("systemd", xdg, home) == Path("/xdg/systemd/user")
    assert service.service_dir("launchd", xdg, home) == home / "Library/LaunchAgents"


# --- install-service ---------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment of an in-process ``zotd install-service``: ZOT_HOME set,
    the socket and the config left to their defaults."""
    for name in ("ZOTD_SOCKET", "ZOTD_CONFIG", "ZOTD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ZOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path


def zotd(*args: str) -> Any:
    return app(list(args), result_action="return_value")


def test_the_socket_unit_starts_the_service_unit_of_its_name() -> None:
    # systemd starts `zotd.service` for `zotd.socket` (the socket unit names
    # no other), and the documentation names the unit so.
    assert (service.SERVICE_UNIT, service.SOCKET_UNIT) == ("zotd.service", "zotd.socket")
    assert "Service=" not in service.systemd_socket(SPEC)


@pytest.mark.skipif(sys.platform != "linux", reason="systemd")
def test_install_and_uninstall_the_systemd_units(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    units = cli_env / "config" / "systemd" / "user"  # from XDG_CONFIG_HOME
    assert zotd("install-service", "--socket-activation") == 0
    out = capsys.readouterr().out
    service_unit = (units / "zotd.service").read_text()
    assert f"ExecStart={sys.executable} -m zotd" in service_unit.splitlines()
    assert f"Environment=ZOT_HOME={cli_env / 'home'}" in service_unit.splitlines()
    assert "ZOTD_SOCKET" not in service_unit and "ZOTD_CONFIG" not in service_unit
    socket_unit = (units / "zotd.socket").read_text()
    assert "ListenStream=%t/zot/zotd.sock" in socket_unit.splitlines()
    assert oct((units / "zotd.service").stat().st_mode & 0o777) == "0o644"
    assert f"wrote {units / 'zotd.service'}\nwrote {units / 'zotd.socket'}\n" in out
    assert "  systemctl --user daemon-reload\n  systemctl --user enable --now zotd.socket\n" in out

    # `systemctl enable` links it; a plain install replaces the socket variant.
    (units / "sockets.target.wants").mkdir()
    (units / "sockets.target.wants" / "zotd.socket").symlink_to(units / "zotd.socket")
    assert zotd("install-service") == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in units.iterdir()) == ["sockets.target.wants", "zotd.service"]
    assert not (units / "sockets.target.wants" / "zotd.socket").is_symlink()
    assert f"removed {units / 'zotd.socket'} (not part of this install)" in out
    assert "systemctl --user enable --now zotd.service" in out

    (units / "default.target.wants").mkdir()
    (units / "default.target.wants" / "zotd.service").symlink_to(units / "zotd.service")
    assert zotd("install-service", "--uninstall") == 0
    out = capsys.readouterr().out
    assert not (units / "zotd.service").exists()
    assert not (units / "default.target.wants" / "zotd.service").is_symlink()
    assert f"removed {units / 'zotd.service'}\n" in out
    assert "  systemctl --user stop zotd.service\n  systemctl --user daemon-reload\n" in out
    assert zotd("install-service", "--uninstall") == 0
    assert capsys.readouterr().out == f"no zotd service files in {units}\n"


def test_install_into_a_directory_with_explicit_paths(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    where = cli_env / "units"
    args = ("--dir", str(where), "--socket", "s/zotd.sock", "--config", "z.toml")
    monkeypatch.chdir(cli_env)
    assert zotd("install-service", *args) == 0
    unit = (where / "zotd.service").read_text().splitlines()
    assert f"Environment=ZOTD_SOCKET={cli_env / 's' / 'zotd.sock'}" in unit
    assert f"Environment=ZOTD_CONFIG={cli_env / 'z.toml'}" in unit
    capsys.readouterr()
    assert zotd("install-service", "--print", "--socket-activation", *args) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"# {where / 'zotd.service'}\n# Written by")
    assert f"# {where / 'zotd.socket'}\n" in printed
    assert f"ListenStream={cli_env / 's' / 'zotd.sock'}\n" in printed
    assert sorted(os.listdir(where)) == ["zotd.service"]  # --print writes nothing


def test_install_and_uninstall_the_launchd_agent(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setenv("HOME", str(cli_env / "user"))
    agents = cli_env / "user" / "Library" / "LaunchAgents"
    assert zotd("install-service") == 0
    plist = agents / "dev.zot.zotd.plist"
    job = plistlib.loads(plist.read_bytes())
    assert job["ProgramArguments"] == [sys.executable, "-m", "zotd"]
    assert job["StandardErrorPath"] == str(cli_env / "home" / "logs" / "zotd.log")
    assert (cli_env / "home" / "logs").is_dir()  # launchd does not create it
    out = capsys.readouterr().out
    assert f"  launchctl bootstrap gui/{os.getuid()} {plist}\n" in out
    assert zotd("install-service", "--uninstall") == 0
    assert not plist.exists()
    assert f"  launchctl bootout gui/{os.getuid()}/dev.zot.zotd\n" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        zotd("install-service", "--socket-activation")
    assert "--socket-activation needs systemd" in capsys.readouterr().err


def test_install_service_elsewhere_is_a_clear_error(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SystemExit) as exited:
        zotd("install-service", "--dir", str(cli_env))
    assert exited.value.code == 1
    assert "knows systemd (Linux) and launchd (macOS), not 'win32'" in capsys.readouterr().err


# --- sd_notify ---------------------------------------------------------------------------


@pytest.fixture
def manager_socket(short_tmp: Path) -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket playing systemd's notify socket, and its address."""
    path = short_tmp / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(WAIT)
        yield sock, str(path)


def test_notify_sends_one_datagram(manager_socket: tuple[socket.socket, str]) -> None:
    sock, address = manager_socket
    assert service.notify("READY=1\nSTATUS=up", {"NOTIFY_SOCKET": address})
    assert sock.recv(4096) == b"READY=1\nSTATUS=up"


@pytest.mark.skipif(sys.platform != "linux", reason="abstract sockets are Linux's")
def test_notify_to_an_abstract_socket() -> None:
    name = f"zotd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(WAIT)
        assert service.notify("STOPPING=1", {"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096) == b"STOPPING=1"


def test_notify_without_a_manager_is_quiet(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert not service.notify("READY=1", {})
    assert not caplog.records
    # A manager that is gone, or a strange address, is logged, never raised.
    assert not service.notify("READY=1", {"NOTIFY_SOCKET": str(short_tmp / "gone")})
    assert not service.notify("READY=1", {"NOTIFY_SOCKET": "vsock:2:1234"})
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]


# --- LISTEN_FDS ----------------------------------------------------------------------------


def test_listen_fds_are_for_our_pid_only_and_are_unset() -> None:
    env = {"LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "zotd.socket", "A": "b"}
    assert service.listen_fds(env, pid=2) == []  # meant for another process
    assert env == {"A": "b"}
    assert service.listen_fds({"LISTEN_FDS": "1"}, pid=2) == []
    assert service.listen_fds({"LISTEN_PID": "2", "LISTEN_FDS": "x"}, pid=2) == []
    assert service.listen_fds({"LISTEN_PID": "2", "LISTEN_FDS": "0"}, pid=2) == []
    assert service.listen_fds({}, pid=2) == []


def test_only_a_listening_unix_stream_socket_is_adopted() -> None:
    read, write = os.pipe()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        try:
            for fd in (read, idle.fileno()):
                with pytest.raises(SocketError, match="passed file descriptor"):
                    adopt_unix_listener(fd)
                os.fstat(fd)  # still open: it was not ours to close
        finally:
            os.close(read)
            os.close(write)


# --- the daemon under a (pretend) service manager ------------------------------------------


def daemon_env(tmp: Path, **extra: str) -> dict[str, str]:
    drop = ("ZOTD_", "NOTIFY_SOCKET", "LISTEN_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        ZOT_HOME=str(tmp / "home"),
        ZOTD_SOCKET=str(tmp / "run" / "zotd.sock"),
        ZOTD_CONFIG=str(tmp / "zotd.toml"),
        **extra,
    )
    return env


def ask(path: Path, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    """Sends requests on one connection; returns the replies (one each)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT)
        sock.connect(str(path))
        sock.sendall(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        with sock.makefile("rb") as lines:
            return [json.loads(lines.readline()) for _ in requests]


HELLO = {"id": 1, "type": "hello", "protocol_version": 1, "attach": False, "client": "test"}
PING = {"id": 2, "type": "ping"}


def answers_as(path: Path, pid: int) -> None:
    hello, ping = ask(path, HELLO, PING)
    assert hello["success"] and hello["data"]["pid"] == pid, hello
    assert ping["data"] == {"pong": True}, ping


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Daemons a test started; killed (by pid) if the test left them running."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=WAIT)


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(") ", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def open_files(pid: int) -> list[str]:
    """What the file descriptors of ``pid`` point to (Linux's /proc)."""
    found = []
    for n in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{n}"))
        except FileNotFoundError:
            pass  # closed meanwhile (a Python starting up opens and closes many)
    return found


def test_daemon_says_ready_once_it_answers_and_stopping_at_sigterm(
    short_tmp: Path,
    manager_socket: tuple[socket.socket, str],
    procs: list[subprocess.Popen[bytes]],
) -> None:
    manager, address = manager_socket
    out = short_tmp / "zotd.out"
    with out.open("wb") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "zotd"],
            env=daemon_env(short_tmp, NOTIFY_SOCKET=address),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    procs.append(daemon)
    sock = short_tmp / "run" / "zotd.sock"
    assert manager.recv(4096).decode() == f"READY=1\nSTATUS=listening on {sock}"
    answers_as(sock, daemon.pid)  # at once: READY=1 means it answers
    daemon.send_signal(signal.SIGTERM)
    assert manager.recv(4096).decode().splitlines()[0] == "STOPPING=1"
    assert daemon.wait(timeout=WAIT) == 0, out.read_text()
    assert not sock.exists()  # its own socket, removed


#: Runs ``python -m zotd`` as systemd would with one socket (given as argv[1]).
ACTIVATE = """
import os, sys
fd = int(sys.argv[1])
os.dup2(fd, 3)
os.close(fd)
os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS="1", LISTEN_FDNAMES="zotd.socket")
os.execv(sys.executable, [sys.executable, "-m", "zotd"])
"""


def activate(listening: socket.socket, tmp: Path, out: Path) -> subprocess.Popen[bytes]:
    """Starts the daemon as systemd does on a connection to its socket unit:
    the socket as fd 3, ``LISTEN_FDS`` the count, ``LISTEN_PID`` the daemon's
    own pid, which only the child knows (it sets it and execs, keeping its pid)."""
    fd = fcntl.fcntl(listening.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
    try:
        with out.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-c", ACTIVATE, str(fd)],
                env=daemon_env(tmp),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=[fd],
            )
    finally:
        os.close(fd)


@pytest.fixture
def listening(short_tmp: Path) -> Iterator[socket.socket]:
    """The socket of a socket unit: bound and listening at the daemon's path."""
    path = short_tmp / "run" / "zotd.sock"
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        sock.listen()
        yield sock


def test_daemon_serves_a_socket_passed_by_socket_activation(
    short_tmp: Path, listening: socket.socket, procs: list[subprocess.Popen[bytes]]
) -> None:
    sock = short_tmp / "run" / "zotd.sock"
    bound = sock.stat().st_ino
    out = short_tmp / "zotd.out"
    daemon = activate(listening, short_tmp, out)
    procs.append(daemon)
    # Connecting succeeds at once (the kernel queues it); only a daemon
    # that accepts on the passed socket replies.
    answers_as(sock, daemon.pid)
    assert "(passed by the service manager)" in out.read_text()
    if sys.platform == "linux":  # its children inherit neither the fd nor the variables
        kids = children(daemon.pid)
        assert kids  # the watchdog, at least
        for child in kids:
            environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            assert not [v for v in environ if v.startswith(b"LISTEN_")], child
            fds = open_files(child)
            assert not [f for f in fds if f.startswith("socket:")], (child, fds)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=WAIT) == 0, out.read_text()
    assert sock.stat().st_ino == bound  # zotd did not bind it, so it left it
    assert "zotd stopped" in out.read_text()


def test_zotd_stop_under_socket_activation(
    short_tmp: Path, listening: socket.socket, procs: list[subprocess.Popen[bytes]]
) -> None:
    """``zotd stop``'s own check that the daemon is gone reaches the socket
    unit, which starts a new daemon: that one's answer means the old one stopped."""
    sock = short_tmp / "run" / "zotd.sock"
    out = short_tmp / "zotd.out"
    first = activate(listening, short_tmp, out)
    procs.append(first)
    answers_as(sock, first.pid)
    stop = subprocess.Popen(
        [sys.executable, "-m", "zotd", "stop"],
        env=daemon_env(short_tmp),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    procs.append(stop)
    assert first.wait(timeout=WAIT) == 0, out.read_text()
    # Playing systemd: a connection waits on the socket, so start the service.
    assert select.select([listening], [], [], WAIT)[0]
    second = activate(listening, short_tmp, out)
    procs.append(second)
    stdout, _ = stop.communicate(timeout=WAIT)
    assert (stop.returncode, stdout.decode()) == (0, f"zotd stopped (pid {first.pid})\n")
    answers_as(sock, second.pid)
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=WAIT) == 0, out.read_text()
