"""What the CLIs print, and how they end: closed pipes, exit codes, --json
everywhere, progress and notes while something runs, colours on a terminal,
uptimes as people read them, shell completion."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import test_cli
from tests.cli.test_cli import RUN_TIMEOUT, ZOT, Cli, read_line
from tests.conftest import add_extension, add_newer_zot
from zotd.cli import output
from zotd.cli.output import BROKEN_PIPE_EXIT, Progress, duration, json_printable, printable, styler

# --- pure pieces ---------------------------------------------------------------------------

cli = test_cli.cli  # the fixtures, as this module's own
ext_dir = test_cli.ext_dir


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h"),
        (2 * 3600 + 5 * 60 + 7, "2 h 5 min"),
        (86400, "1 d"),
        (3 * 86400 + 4 * 3600 + 59, "3 d 4 h"),
        (-1, "0 s"),
    ],
)
def test_uptimes_read_as_people_read_them(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain ascii, é, 日本", "plain ascii, é, 日本"),
        ("\x1b[2J\x1b]52;c;cGF5bG9hZA==\x07", "\\x1b[2J\\x1b]52;c;cGF5bG9hZA==\\x07"),
        ("ok\rEVIL\x08\x7f", "ok\\rEVIL\\x08\\x7f"),
        ("one\ntwo\tthree", "one\\ntwo\\tthree"),
        ("\x9b2J\x85\x80\x9f", "\\x9b2J\\x85\\x80\\x9f"),
        ("a\u202egnp.exe\u2066\u2069\u202a", "a\\u202egnp.exe\\u2066\\u2069\\u202a"),
        ("line\u2028sep\ud800", "line\\u2028sep\\ud800"),
    ],
)
def test_control_characters_show_as_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(text).isprintable()


def test_multiline_text_keeps_its_newlines_and_tabs_only() -> None:
    text = "a\r\nb\tc\rfake\x1b[31m\u202e\n"
    assert printable(text, multiline=True) == "a\nb\tc\\rfake\\x1b[31m\\u202e\n"


def test_printable_text_is_passed_through_as_it_is() -> None:
    # The shortcut past the tables (str.isprintable) is sound: every
    # character they escape is one isprintable refuses.
    assert not any(chr(c).isprintable() for c in output._UNPRINTABLE)
    text = "naïve — 名前 ✓ [x]"
    assert printable(text) is text and printable(text, multiline=True) is text


def test_json_keeps_what_a_terminal_may_act_on_escaped() -> None:
    plain = '{"a": "b"}'
    assert json_printable(plain) is plain
    assert json_printable('"\x7f\x9b\u202e\ud800é"') == '"\\u007f\\u009b\\u202e\\ud800é"'


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_states_are_coloured_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    paint = styler(FakeTerminal())
    assert paint("failed", "failed") == "\x1b[1;31mfailed\x1b[0m"
    assert paint("ready", "ready") == "\x1b[32mready\x1b[0m"
    assert paint("odd", "odd") == "odd"
    assert styler(io.StringIO())("failed", "failed") == "failed"  # not a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert styler(FakeTerminal())("failed", "failed") == "failed"


def test_progress_is_a_line_per_update_off_a_terminal() -> None:
    out = io.StringIO()
    shown = Progress(out)
    shown.update("step 1", 1, 3)
    shown.update("", 5, None)
    shown.update("almost", None, None)
    shown.close()
    assert out.getvalue() == "progress: 1/3 (33%)  step 1\nprogress: 5\nprogress: almost\n"


def test_progress_is_a_bar_that_redraws_itself_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out = FakeTerminal()
    shown = Progress(out)
    shown.update("step 1", 1, 4)
    shown.close()
    bar = "[" + "#" * 6 + "-" * 18 + "] 1/4 (25%)  step 1"
    assert out.getvalue() == "\r\x1b[2K" + bar + "\r\x1b[2K"


def test_a_progress_message_cannot_drive_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for out in (io.StringIO(), FakeTerminal()):
        Progress(out).update("\x1b]52;c;SGk=\x07 \u202eevil\r", None, None)
        assert "\\x1b]52;c;SGk=\\x07 \\u202eevil\\r" in out.getvalue()
        assert "\x07" not in out.getvalue() and "\u202e" not in out.getvalue()


# --- closed pipes -------------------------------------------------------------------------


def closed_pipe_run(cli: Cli, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Runs ``argv`` with a stdout whose reader is already gone (``| head`` that has quit)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            argv,
            cwd=cli.project,
            env=cli.env,
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    finally:
        os.close(write)


def test_a_closed_pipe_ends_every_command_quietly(cli: Cli, ext_dir: Path) -> None:
    log = cli.home / "logs" / "ext-fx.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(500)))
    commands = [
        [str(ZOT), "ext", "logs", "fx", "-n", "100"],
        [str(ZOT), "ext", "list"],
        [sys.executable, "-m", "zotd", "status"],
        [sys.executable, "-m", "zotd", "status", "--json"],
    ]
    cli.start("-e", str(ext_dir))
    commands += [[str(ZOT), "tools"], [str(ZOT), "commands", "--json"], [str(ZOT), "run", "/go"]]
    for argv in commands:
        res = closed_pipe_run(cli, argv)
        assert (res.returncode, res.stderr) == (BROKEN_PIPE_EXIT, ""), (argv, res)
    # Help is printed by rich, which ends as quietly, with exit 1.
    res = closed_pipe_run(cli, [str(ZOT), "--help"])
    assert (res.returncode, res.stderr) == (1, "")


def test_head_takes_the_first_line_and_zot_exits_quietly(cli: Cli, ext_dir: Path) -> None:
    cli.start("-e", str(ext_dir))
    res = subprocess.run(
        f"{ZOT} tools | head -1",
        shell=True,
        cwd=cli.project,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert res.returncode == 0, res
    assert res.stdout.startswith("a_rather_long_tool_name")
    assert res.stderr == ""


# --- exit codes ---------------------------------------------------------------------------


def test_an_install_that_does_not_start_exits_1(cli: Cli) -> None:
    crashing = cli.tmp / "src" / "crashy"
    crashing.mkdir(parents=True)
    (crashing / "extension.json").write_text(
        json.dumps({"name": "crashy", "exec": "/bin/sh", "args": ["-c", "exit 3"]})
    )
    broken = cli.tmp / "src" / "broken"
    broken.mkdir()
    (broken / "extension.json").write_text('{"name": "broken", "exec": "./missing"}')
    # Without a daemon: the manifest says it cannot start.
    res = cli.zot("ext", "install", str(broken), "--no-start")
    assert res.returncode == 1, res
    assert "installed broken (global)" in res.stdout
    assert "./missing" in res.stderr
    cli.zot("ext", "remove", "broken", "--yes", "--no-start")
    # With one: it starts, and fails (or cannot start at all).
    cli.start()
    res = cli.zot("ext", "install", str(broken))
    assert res.returncode == 1, res
    assert "broken cannot start" in res.stdout
    # It runs, and exits before it says hello: failed, or restarting after that.
    res = cli.zot("ext", "install", str(crashing))
    assert res.returncode == 1, res
    assert re.match(r"installed crashy \(global\) in \S+: (failed|restarting)", res.stdout), res


def test_trust_that_leaves_one_failed_exits_1(cli: Cli) -> None:
    (cli.project / ".zot" / "extensions").mkdir(parents=True)
    add_extension(cli.project / ".zot" / "extensions", "good", "--tools", "echo")
    bad = cli.project / ".zot" / "extensions" / "bad"
    bad.mkdir()
    (bad / "extension.json").write_text('{"name": "bad", "exec": "./missing"}')
    offline = cli.zot("ext", "trust", "--no-start")
    assert offline.returncode == 1, offline
    assert "bad cannot start" in offline.stderr
    assert "trusted good" in offline.stdout
    cli.start()
    live = cli.zot("ext", "trust")
    assert live.returncode == 1, live
    assert re.search(r"^good: ready", live.stdout, re.M), live.stdout
    assert re.search(r"^bad: failed", live.stdout, re.M), live.stdout


# --- --json -------------------------------------------------------------------------------


def test_status_json_without_a_daemon(cli: Cli) -> None:
    res = cli.zotd("status", "--json")
    assert res.returncode == 1
    assert json.loads(res.stdout) == {"running": False, "socket": str(cli.socket)}


def test_logs_follow_json_is_one_object_per_line(cli: Cli) -> None:
    add_extension(cli.home / "extensions", "wx", "--tools", "echo")
    log = cli.home / "logs" / "ext-wx.log"
    log.parent.mkdir(parents=True)
    log.write_text("old 1\nold 2\n")
    proc = cli.popen(
        [str(ZOT), "ext", "logs", "wx", "-f", "-n", "1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = {"extension": "wx", "path": str(log)}
    assert json.loads(read_line(proc.stdout)) == {**line, "line": "old 2"}
    with log.open("a") as f:
        f.write("new \u00e9 1\nhalf")  # a line still being written is not printed yet
        f.flush()
        assert json.loads(read_line(proc.stdout)) == {**line, "line": "new \u00e9 1"}
        f.write(" done\n")
    assert json.loads(read_line(proc.stdout)) == {**line, "line": "half done"}
    proc.terminate()
    proc.wait(timeout=5)


# --- feedback while it runs ---------------------------------------------------------------


def test_call_shows_progress_on_stderr(cli: Cli) -> None:
    add_newer_zot(cli.home / "extensions", "nz", cli.tmp / "frames.jsonl")
    cli.start()
    res = cli.zot("call", "nz-count", '{"n": 3}')
    assert res.returncode == 0, res
    assert res.stderr.splitlines() == [
        "progress: 1/3 (33%)  step 1",
        "progress: 2/3 (67%)  step 2",
        "progress: 3/3 (100%)  step 3",
    ]


def test_a_client_that_starts_the_daemon_says_so(cli: Cli) -> None:
    env = {k: v for k, v in cli.env.items() if k != "ZOTD_NO_AUTOSTART"}
    res = subprocess.run(
        [str(ZOT), "commands"],
        cwd=cli.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert res.returncode == 0, res
    match = re.fullmatch(r"zot: started zotd, pid (\d+) \(its log: (\S+)\)\n", res.stderr)
    assert match is not None, res.stderr
    cli.pids.add(int(match[1]))
    assert match[2] == str(cli.home / "logs" / "zotd.log")
    again = subprocess.run(
        [str(ZOT), "commands"], cwd=cli.project, env=env, capture_output=True, text=True, timeout=30
    )
    assert (again.returncode, again.stderr) == (0, "")  # it was running: nothing to say


def test_ext_list_colours_states_on_a_terminal(cli: Cli) -> None:
    add_extension(cli.home / "extensions", "wx", "--tools", "echo")
    cli.start()
    cli.extensions()  # the workspace runs

    def on_terminal(extra: dict[str, str]) -> str:
        master, slave = os.openpty()
        try:
            proc = subprocess.Popen(
                [str(ZOT), "ext", "list"],
                cwd=cli.project,
                env={**cli.env, "TERM": "xterm", **extra},
                stdin=subprocess.DEVNULL,
                stdout=slave,
                stderr=slave,
            )
        finally:
            os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        assert proc.wait(timeout=RUN_TIMEOUT) == 0
        return out.decode()

    env = {k: v for k, v in cli.env.items() if k != "NO_COLOR"}
    cli.env = env
    assert "\x1b[32mready\x1b[0m" in on_terminal({})
    assert "\x1b[" not in on_terminal({"NO_COLOR": "1"})
    assert "\x1b[" not in cli.zot("ext", "list").stdout  # not a terminal


# --- shell completion ---------------------------------------------------------------------


@pytest.mark.parametrize("program", ["zot", "zotd"])
def test_shell_completion_installs_and_completes(cli: Cli, program: str) -> None:
    env = {**cli.env, "HOME": str(cli.tmp)}
    program_path = str(Path(sys.executable).parent / program)
    out = cli.tmp / f"{program}.bash"
    res = subprocess.run(
        [program_path, "--install-completion", "--shell", "bash", "--output", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert res.returncode == 0, res
    assert str(out) in res.stdout
    assert f"_{program}" in out.read_text()
    if shutil.which("bash") is None:
        pytest.skip("no bash to complete with")
    words = "zot ex" if program == "zot" else "zotd sta"
    script = (
        f"source {out}; COMP_WORDS=({words}); COMP_CWORD=1; _{program}; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", script], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done
    expected = {"ext"} if program == "zot" else {"start", "status"}
    assert expected <= set(done.stdout.split()), done.stdout
    for shell in ("zsh", "fish"):
        target = cli.tmp / f"{program}.{shell}"
        res = subprocess.run(
            [program_path, "--install-completion", "--shell", shell, "--output", str(target)],
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        assert res.returncode == 0, res
        assert program in target.read_text()


# --- conflicts you can see ----------------------------------------------------------------


def test_hidden_names_and_guards_are_shown(cli: Cli) -> None:
    exts = cli.home / "extensions"
    add_extension(exts, "aa", "--commands", "go", "--tools", "echo")
    add_extension(exts, "bb", "--commands", "go,own", "--tools", "echo", manifest={"priority": 1})
    add_extension(exts, "guard", "--intercept", "tool_call", "--events", "turn_end")
    cli.start()
    cli.extensions()
    infos = cli.extensions()
    # Which of aa and bb got the names first is theirs to race for.
    holder = next(n for n in ("aa", "bb") if "echo" in infos[n].tools)
    hidden = "bb" if holder == "aa" else "aa"
    tools = cli.zot("tools")
    assert tools.returncode == 0, tools
    assert tools.stdout.splitlines() == [f"echo  the echo tool  ({holder})"]
    assert re.fullmatch(
        rf"hidden: echo of {hidden} \({holder} holds it: [^\n]+\)\n", tools.stderr
    ), tools.stderr
    commands = cli.zot("commands")
    assert re.match(rf"hidden: /go of {hidden} \({holder} holds it: ", commands.stderr), commands
    listed = cli.zot("ext", "list")
    assert listed.returncode == 0, listed
    provides = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert "echo (hidden)" in provides[hidden]
    assert "/go (hidden)" in provides[hidden]
    assert "on turn_end, guards tool_call" in provides["guard"]
    assert f"{hidden}: echo is hidden: " in listed.stderr
    assert re.search(
        r"^\(this is \S+'s workspace; each workspace runs its own copy of every "
        r"extension it sees: 1 workspace\(s\), 3 extension process\(es\) in all\)$",
        listed.stderr,
        re.M,
    ), listed.stderr


# --- paths --------------------------------------------------------------------------------


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_install_of_a_relative_directory(cli: Cli, running: bool) -> None:
    add_extension(cli.project / "src", "rel", "--tools", "echo")
    if running:
        cli.start()
    res = cli.zot("ext", "install", "src/rel", "--no-start")
    assert res.returncode == 0, res
    assert (cli.home / "extensions" / "rel" / "extension.json").is_file()
    missing = cli.zot("ext", "install", "./nowhere", "--no-start")
    assert missing.returncode == 1
    assert str(cli.project / "nowhere") in missing.stderr  # named as the user's path, made whole


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_a_manifest_key_misspelt_is_a_warning_in_the_list(cli: Cli, running: bool) -> None:
    add_extension(cli.home / "extensions", "typo", "--tools", "echo", manifest={"enabeld": False})
    if running:
        cli.start()
    listed = cli.zot("ext", "list")
    assert listed.returncode == 0, listed
    assert (
        "typo: warning: extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?\n"
        in listed.stderr
    )
    state = "ready" if running else "stopped"
    assert listed.stdout.splitlines()[1].split()[:5] == ["typo", "0.0.1", "global", "yes", state]


@pytest.mark.parametrize("running", [False, True], ids=["offline", "live"])
def test_disable_then_enable_keeps_a_trusted_project_extension_trusted(
    cli: Cli, running: bool
) -> None:
    add_extension(cli.project / ".zot" / "extensions", "pj", "--tools", "echo")
    assert cli.zot("ext", "trust", "--no-start").returncode == 0
    if running:
        cli.start()
    assert cli.zot("ext", "disable", "pj", "--no-start").returncode == 0
    enabled = cli.zot("ext", "enable", "pj", "--no-start")
    assert enabled.returncode == 0, enabled
    if not running:
        cli.start()
    assert cli.extensions()["pj"].state == "ready"


def test_enable_that_leaves_it_not_running_exits_1(cli: Cli) -> None:
    broken = cli.home / "extensions" / "broken"
    broken.mkdir(parents=True)
    (broken / "extension.json").write_text(
        '{"name": "broken", "exec": "./missing", "enabled": false}'
    )
    cli.start()
    res = cli.zot("ext", "enable", "broken")
    assert res.returncode == 1, res
    assert res.stdout.startswith("enabled broken: failed: broken cannot start"), res.stdout


def test_installed_disabled_as_its_manifest_says_is_a_success(cli: Cli) -> None:
    source = add_extension(cli.tmp / "src", "off", "--tools", "echo", manifest={"enabled": False})
    cli.start()
    res = cli.zot("ext", "install", str(source))
    assert res.returncode == 0, res
    assert res.stdout.startswith("installed off (global) in "), res.stdout


def test_a_daemon_that_cannot_start_shows_its_own_log_lines_only(cli: Cli) -> None:
    log = cli.home / "logs" / "zotd.log"
    log.parent.mkdir(parents=True)
    log.write_text("an older daemon's line\n" * 3)
    cli.socket.parent.mkdir(parents=True)
    cli.socket.write_text("not a socket")  # so the daemon refuses to start
    env = {k: v for k, v in cli.env.items() if k != "ZOTD_NO_AUTOSTART"}
    res = subprocess.run(
        [str(ZOT), "tools"], cwd=cli.project, env=env, capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 1, res
    assert "is not a socket" in res.stderr
    assert "older daemon" not in res.stderr
    started = cli.zotd("start")
    assert started.returncode == 1, started
    assert "is not a socket" in started.stderr
    assert "older daemon" not in started.stderr


def test_reloading_one_that_stays_untrusted_is_no_restart(cli: Cli) -> None:
    add_extension(cli.project / ".zot" / "extensions", "pj", "--tools", "echo")
    add_extension(cli.home / "extensions", "wx", "--tools", "forecast")
    cli.start()
    untrusted = cli.zot("ext", "reload", "pj")
    assert untrusted.returncode == 1, untrusted
    assert "zot ext trust" in untrusted.stderr
    assert cli.zot("ext", "reload", "wx").returncode == 0
    listed = {i["name"]: i for i in json.loads(cli.zot("ext", "list", "--json").stdout)}
    assert (listed["pj"]["state"], listed["pj"]["restarts"]) == ("untrusted", 0)
    assert (listed["wx"]["state"], listed["wx"]["restarts"]) == ("ready", 1)
