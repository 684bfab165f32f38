"""``zot ext doctor`` as a user runs it: the real CLI, real extensions from
tests/extensions/ (a healthy one, one with an unknown manifest key, one
whose program is missing, one that dies at start saying why, one that never
says hello, one rough at the edges), with a real daemon and without one
(a dry run of each, which must leave no process behind)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import WAIT, ZOT, Cli
from tests.cli.test_ext_cli import ext
from tests.conftest import EXTENSIONS, add_extension, pid_alive

#: What doctor says on stderr without a daemon, having dry-run one extension.
DRY_RUN = "(zotd is not running: 1 extension started for a dry run, and stopped)\n"
GREETER = Path(__file__).with_name("mcp_greeter.py")


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    # A dry run, and an agent's hello, wait for a hello up to ready_grace:
    # long enough for Python to start on a busy machine (a healthy extension
    # ends the wait as soon as it is ready).
    c.config.write_text('ready_grace = 60\n[restart]\npolicy = "never"\n')
    try:
        yield c
    finally:
        c.cleanup()


def install(cli: Cli, name: str, *args: str, script: str = "fake.py", **manifest: Any) -> Path:
    """A global extension ``name`` running tests/extensions/SCRIPT with ``args``."""
    return add_extension(
        cli.home / "extensions", name, *args, script=EXTENSIONS / script, manifest=manifest or None
    )


def healthy(cli: Cli) -> Path:
    return install(cli, "healthy", "--commands", "hi", "--tools", "echo")


def typo(cli: Cli) -> Path:
    return install(cli, "typo", enabeld=True)


def gone(cli: Cli) -> Path:
    return install(cli, "gone", exec="./missing", args=[])


def crash(cli: Cli) -> Path:
    return install(cli, "crash", script="doctor_crash.py")


def doctor(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    res = ext(cli, "doctor", *args)
    assert "Traceback" not in res.stderr, res.stderr
    return res


def reports(cli: Cli, *args: str) -> dict[str, dict[str, Any]]:
    res = doctor(cli, "--json", *args)
    return {r["name"]: r for r in json.loads(res.stdout)}


def blocks(text: str) -> dict[str, list[str]]:
    """Doctor's text by extension: its header line, then its indented lines."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("  "):
            current.append(line)
        elif " (" in line and "): " in line:
            current = out.setdefault(line.split(" (")[0], [line])
    return out


def pids_in(lines: list[str], what: str = "pid") -> list[int]:
    return [int(m[1]) for line in lines if (m := re.search(rf"\b{what} (\d+)", line))]


def gone_soon(pid: int) -> bool:
    deadline = time.monotonic() + WAIT
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# --- without a daemon: dry runs --------------------------------------------------------


def test_a_healthy_extension_is_ok_and_its_dry_run_leaves_nothing(cli: Cli) -> None:
    directory = healthy(cli)
    res = doctor(cli)
    assert res.returncode == 0, res
    assert res.stderr == DRY_RUN
    lines = res.stdout.splitlines()
    assert lines[0] == "healthy (global, ready, dry run): ok"
    assert f"  dir: {directory}" in lines
    fake = EXTENSIONS / "fake.py"
    assert f"  runs: {sys.executable} {fake} --name healthy --commands hi --tools echo" in lines
    assert f"  runtime: {sys.executable}: Python {sys.version.split()[0]}" in lines
    assert any(re.fullmatch(r"  handshake: hello after \d+\.\d\d s, ready after \d+\.\d\d s \(its `ready` frame\)", line) for line in lines), lines  # fmt: skip
    assert "  provides: /hi, echo" in lines
    assert f"  log: {cli.home / 'logs' / 'ext-healthy.log'}" in lines
    assert lines[-1] == "no problems found (1 extension)"
    [report] = reports(cli).values()
    assert report["checked"] == "dry run"
    assert report["handshake"]["hello_s"] is not None
    assert report["handshake"]["ready_s"] is not None
    assert report["handshake"]["auto_ready"] is False
    [pid] = pids_in(report["stderr_tail"])  # fake.py says its pid on stderr
    assert gone_soon(pid)


def test_problems_found_without_a_daemon(cli: Cli) -> None:
    healthy(cli)
    typo_dir, gone_dir = typo(cli), gone(cli)
    crash(cli)
    res = doctor(cli)
    assert res.returncode == 1, res
    found = blocks(res.stdout)
    assert found["healthy"][0] == "healthy (global, ready, dry run): ok"
    assert found["typo"][:2] == [
        "typo (global, ready, dry run): 1 problem",
        "  warning: extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?; "
        f"rename or remove the key in {typo_dir}/extension.json",
    ]
    assert found["gone"][:2] == [
        "gone (global, failed, not run): 1 problem",
        f"  error: cannot start: exec './missing' not found: no file {gone_dir}/missing; fix `exec` "
        f"in {gone_dir}/extension.json (or install what it names), then run `zot ext reload gone`",
    ]
    assert found["crash"][:2] == [
        "crash (global, failed, dry run): 1 problem",
        "  error: exited with code 3 before it was asked to stop; its stderr ends: "
        "doctor_crash: loading its settings | doctor_crash: error: no API key in WEATHER_KEY; "
        "fix what it says, then run `zot ext doctor crash` again",
    ]
    assert "  last exit: exited with code 3" in found["crash"]
    assert "  stderr: doctor_crash: error: no API key in WEATHER_KEY" in found["crash"]
    assert res.stdout.splitlines()[-1] == "3 problems in crash, gone, typo (3 of 4 extensions)"
    assert res.stderr == "(zotd is not running: 3 extensions started for a dry run, and stopped)\n"


def test_one_that_never_says_hello_is_stopped_with_what_it_started(cli: Cli) -> None:
    cli.config.write_text("ready_grace = 0.5\nshutdown_timeout = 0.5\nkill_timeout = 0.5\n")
    install(cli, "silent", "--stubborn", "--orphan", script="doctor_silent.py")
    res = doctor(cli, "silent")
    assert res.returncode == 1, res
    lines = res.stdout.splitlines()
    assert lines[:4] == [
        "silent (global, failed, dry run): 3 problems",
        "  error: it did not say `hello` within the dry run's 0.5 s; write "
        '{"type": "hello", "name": "silent"} as its first line on stdout (anything else it '
        "prints goes to stderr)",
        "  warning: wrote 1 line(s) to stdout that are not frames (first: 'Starting the weather "
        "service on port 8080...': invalid JSON: JSON is malformed: invalid character (byte 0)); "
        "write only JSON frames to stdout; log to stderr",
        "  warning: did not exit on `shutdown`: it took SIGKILL; exit when it reads `shutdown`, "
        "or when its stdin ends",
    ]
    assert "  handshake: no hello" in lines
    [pid] = pids_in(lines, "doctor_silent: pid")
    [orphan] = pids_in(lines, "orphan pid")
    assert gone_soon(pid)
    assert gone_soon(orphan)  # out of its group, and ended all the same


def test_a_rough_extension_has_each_problem_said(cli: Cli) -> None:
    cli.config.write_text("ready_grace = 60\nshutdown_timeout = 0.5\nkill_timeout = 0.5\n")
    install(cli, "rough", script="doctor_rough.py")
    res = doctor(cli)
    assert res.returncode == 1, res
    lines = blocks(res.stdout)["rough"]
    assert lines[0] == "rough (global, failed, dry run): 8 problems"
    findings = [line.split("; ")[0] for line in lines[1:10]]
    assert findings == [
        "  error: tool 'hidden_tool' is skipped: unknown exposure 'sometimes'",
        "  error: tool 'listy' is refused: its `schema` is not a JSON object",
        "  warning: sent hello again",
        "  warning: tool 'odd_schema': its schema is not valid JSON Schema (type: 'objekt' is not "
        "valid under any of the given schemas)",
        "  warning: subscribes to 'turn_begin', an event zot does not send",
        "  warning: asks to intercept 'session_start', which cannot be intercepted",
        "  warning: wrote 1 line(s) to stdout that are not frames (first: 'debug: registering "
        "tools': invalid JSON: JSON is malformed: invalid character (byte 0))",
        "  warning: did not exit on `shutdown`: it took SIGTERM",
        "  note: no `ready` frame: taken as ready after 0.2 s without registrations",
    ]
    assert "  provides: /rough, odd_schema" in lines
    assert "  on: turn_begin" in lines
    assert "  guards: session_start" in lines
    [pid] = pids_in(lines, "doctor_rough: pid")
    assert gone_soon(pid)


def test_an_untrusted_project_extension_is_not_run(cli: Cli) -> None:
    cli.config.write_text("trust_project_extensions = false\n")
    # fake.py writes its hello_ack to ran.log (in its directory: its cwd).
    directory = add_extension(
        cli.project / ".zot" / "extensions", "local", "--events-log", "ran.log"
    )
    res = doctor(cli)
    assert res.returncode == 1, res
    lines = res.stdout.splitlines()
    assert lines[0] == "local (project, untrusted, not run): 1 problem"
    assert lines[1].startswith("  warning: local is not trusted yet"), lines
    assert lines[1].endswith(
        f"; not run; run `zot ext trust` in {cli.project} once you have read what it runs"
    ), lines
    assert "  trusted: no" in lines
    assert not (directory / "ran.log").exists()  # it never ran
    [report] = reports(cli).values()
    assert (report["trusted"], report["checked"], report["handshake"]) == (False, "not run", None)


def test_an_mcp_server_is_initialized_and_listed(cli: Cli) -> None:
    directory = cli.home / "extensions" / "greeter"
    directory.mkdir(parents=True)
    (directory / "extension.json").write_text(
        json.dumps(
            {"name": "greeter", "kind": "mcp", "exec": sys.executable, "args": [str(GREETER)]}
        )
    )
    res = doctor(cli)
    assert res.returncode == 0, res
    lines = res.stdout.splitlines()
    assert lines[0] == "greeter (global, ready, dry run): ok"
    assert any(re.fullmatch(r"  handshake: initialize answered after \d+\.\d\d s, ready after \d+\.\d\d s \(its tools and prompts listed\)", line) for line in lines), lines  # fmt: skip
    assert "  provides: greet" in lines


# --- with a daemon -------------------------------------------------------------------


def test_the_daemons_view(cli: Cli) -> None:
    healthy(cli)
    typo_dir, gone_dir = typo(cli), gone(cli)
    crash(cli)
    cli.start()
    res = doctor(cli)
    assert res.returncode == 1, res
    assert res.stderr == ""
    found = blocks(res.stdout)
    assert found["healthy"][0] == "healthy (global, ready): ok"
    assert any(line.startswith("  handshake: hello after ") for line in found["healthy"])
    assert found["typo"][:2] == [
        "typo (global, ready): 1 problem",
        "  warning: extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?; "
        f"rename or remove the key in {typo_dir}/extension.json",
    ]
    assert found["gone"][:2] == [
        "gone (global, failed): 1 problem",
        f"  error: cannot start: exec './missing' not found: no file {gone_dir}/missing; fix `exec` "
        f"in {gone_dir}/extension.json (or install what it names), then run `zot ext reload gone`",
    ]
    assert found["crash"][:2] == [
        "crash (global, failed): 1 problem",
        "  error: failed: exited with code 3; its stderr ends: doctor_crash: loading its settings"
        " | doctor_crash: error: no API key in WEATHER_KEY; see `zot ext logs crash`, then run "
        "`zot ext reload crash`",
    ]
    got = reports(cli)
    assert {r["checked"] for r in got.values()} == {"daemon"}
    shake = got["healthy"]["handshake"]
    assert shake["hello_s"] is not None
    assert shake["ready_s"] is not None
    assert shake["out_of_order"] == []
    assert got["gone"]["handshake"] is None  # never started
    assert got["crash"]["exit_code"] == 3
    # The handshake is in the daemon's own listing too.
    listed = {i.name: i for i in cli.extensions().values()}
    assert listed["healthy"].handshake is not None
    assert listed["healthy"].handshake.hello_s is not None


def test_the_daemons_view_of_one_that_never_says_hello(cli: Cli) -> None:
    cli.config.write_text('ready_grace = 0.5\nhello_timeout = 1.5\n[restart]\npolicy = "never"\n')
    install(cli, "silent", script="doctor_silent.py")
    cli.start()
    deadline = time.monotonic() + WAIT
    while (report := reports(cli, "silent")["silent"])["state"] != "failed":
        assert time.monotonic() < deadline, report
        time.sleep(0.1)
    whats = [f["what"] for f in report["findings"]]
    assert any(w.startswith("failed: refused: sent no `hello` frame within 1.5 s") for w in whats)
    assert any(w.startswith("zotd noted: skipped a malformed line") for w in whats), whats
    assert report["handshake"]["hello_s"] is None
    assert doctor(cli, "silent").returncode == 1


def test_out_of_order_frames_as_the_daemon_saw_them(cli: Cli) -> None:
    cli.config.write_text("ready_grace = 60\nshutdown_timeout = 0.5\nkill_timeout = 0.5\n")
    install(cli, "rough", script="doctor_rough.py")
    cli.start()
    report = reports(cli)["rough"]
    assert report["handshake"]["out_of_order"] == ["hello again"]
    assert report["handshake"]["auto_ready"] is True
    whats = [f["what"] for f in report["findings"]]
    assert "sent hello again" in whats
    assert any("unknown exposure 'sometimes'" in w for w in whats), whats
    assert any(w.startswith("zotd noted: cannot intercept") for w in whats), whats


# --- the command line --------------------------------------------------------------------


def test_json_shape_and_exit_codes(cli: Cli) -> None:
    healthy(cli)
    typo(cli)
    res = doctor(cli, "--json")
    assert res.returncode == 1, res
    got = json.loads(res.stdout)
    assert [r["name"] for r in got] == ["healthy", "typo"]
    assert set(got[0]) >= {
        "name", "scope", "dir", "kind", "enabled", "state", "checked", "trusted", "exec",
        "runtime", "handshake", "commands", "tools", "shadowed", "events", "intercepts",
        "restarts", "restart_reason", "exit_code", "exit", "stderr_tail", "log", "findings",
        "problems",
    }  # fmt: skip
    assert got[0]["findings"] == []
    assert got[0]["runtime"]["path"] == sys.executable
    assert got[0]["runtime"]["version"].startswith("Python 3.")
    assert got[1]["findings"] == [
        {
            "severity": "warning",
            "extension": "typo",
            "what": "extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?",
            "fix": f"rename or remove the key in {cli.home}/extensions/typo/extension.json",
        }
    ]
    assert got[1]["problems"] == 1
    assert doctor(cli, "healthy").returncode == 0
    assert doctor(cli, "healthy", "--json").returncode == 0
    unknown = doctor(cli, "nope")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == "zot: no extension named 'nope' (installed: healthy, typo)\n"
    assert doctor(cli, "healthy", "typo").returncode == 2
    assert doctor(cli, "--loud").returncode == 2


def test_nothing_installed(cli: Cli) -> None:
    res = doctor(cli)
    assert (res.returncode, res.stdout) == (
        0,
        "no extensions installed; install one with `zot ext install <path|git-url>`\n",
    )
    assert json.loads(doctor(cli, "--json").stdout) == []


# --- interrupted ---------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    """The children of ``pid`` (Linux's /proc/PID/task/*/children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def marked(instance_of: int) -> list[int]:
    """The processes whose environment carries the mark of a watchdog
    started by process ``instance_of`` (``ZOTD_INSTANCE=<pid>-...``)."""
    mark = f"ZOTD_INSTANCE={instance_of}-".encode()
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if any(v.startswith(mark) for v in (proc / "environ").read_bytes().split(b"\0")):
                out.append(int(proc.name))
        except OSError:
            continue
    return [p for p in out if pid_alive(p)]


def dry_running(cli: Cli, script: str) -> tuple[subprocess.Popen[bytes], int]:
    """``zot ext doctor`` running, and the pid of the extension it dry-runs."""
    zot = cli.popen([str(ZOT), "ext", "doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + WAIT
    while True:
        found = [
            p for p in children_of(zot.pid)
            if script.encode() in Path(f"/proc/{p}/cmdline").read_bytes()
        ]  # fmt: skip
        if found:
            return zot, found[0]
        assert zot.poll() is None, zot.communicate()
        assert time.monotonic() < deadline, "no dry run started"
        time.sleep(0.02)


@pytest.mark.skipif(sys.platform != "linux", reason="finds processes in /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_doctor_interrupted_or_killed_leaves_nothing_behind(cli: Cli, sig: int) -> None:
    cli.config.write_text("ready_grace = 60\n")  # it is mid-dry-run when the signal comes
    install(cli, "silent", "--stubborn", "--orphan", script="doctor_silent.py")
    zot, pid = dry_running(cli, "doctor_silent.py")
    deadline = time.monotonic() + WAIT
    while len(marked(zot.pid)) < 2:  # the extension, and the sleep it started on its own
        assert time.monotonic() < deadline, "the orphan did not start"
        time.sleep(0.02)
    orphans = marked(zot.pid)
    cli.pids.update(orphans)
    zot.send_signal(sig)
    assert zot.wait(timeout=WAIT) == (130 if sig == signal.SIGINT else -signal.SIGKILL)
    assert gone_soon(pid)
    for orphan in orphans:
        assert gone_soon(orphan)
