"""The command examples of docs/cli.md and README.md, run for real.

Each page is one session, in the order of the page, against real daemons
started by the examples themselves (or by ``zot`` on its own, as for a
user), in a temporary home. What an example shows is what it must print.

The convention the pages follow (written for their editors at the top of
docs/cli.md too):

- A ```console block holds commands and their output. A line ``$ COMMAND``
  or ``DIR$ COMMAND`` (``DIR`` is ``~`` or ``~/...``) is a command, run by
  bash in ``DIR`` (``$ `` alone: the page's own directory, :data:`PAGES`);
  the lines after it, up to the next command, are all it prints, stdout
  and stderr together as a terminal shows them (with no colours: the
  output is not a terminal). A block must start with a command.
- In a ```bash block (README.md), each line is a command; ``COMMAND  #
  OUTPUT`` says it prints the one line ``OUTPUT``, a command without a
  comment prints nothing.
- A ```bash daemon block is one command that runs in the foreground until
  Ctrl+C (``zotd``): it is started in the background and runs until the
  page is done, then gets Ctrl+C and must exit 0. The README's installs
  zotd first, in the same command (:data:`INSTALL`, not run here).
- ```console norun and ```bash norun blocks are not run: Ctrl+C, an
  interactive prompt, a second terminal, the network, a service manager,
  installing packages. :data:`PAGES` has how many each page has, so that
  none goes unchecked by mistake.
- Commands may name ``/home/pat`` (the home directory) and
  ``/run/user/1000`` (the runtime directory); ``.venv/bin/X`` is the ``X``
  of the Python running the tests.

What the setup a page states is, :class:`Session` builds (``~`` is a
temporary home, with the environment of a user with no zotd settings).
Before comparing, both the output and the page's lines go through
:func:`normal`: the temporary paths read as the page's (``/home/pat``,
``/run/user/1000``, zotd's Python as ``/home/pat/src/zotd/.venv/bin``);
pids, uptimes, a process's memory and CPU, latencies, timestamps and zotd's version
become placeholders; runs of two or more spaces are one (table columns
widen with pids); trailing spaces go. Nothing else differs, and no line is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from zotd import __version__

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent
DOCS_WEATHER = Path(__file__).parents[1] / "extensions" / "docs-weather"
DOCS_SKY = Path(__file__).parents[1] / "extensions" / "docs-sky"

#: Longest a command of the pages may take (they take well under a second).
COMMAND_TIMEOUT = 60.0

#: A fenced block: its info string and body (fences at the start of a line).
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

#: ``$ COMMAND`` or ``~/dir$ COMMAND``.
PROMPT = re.compile(r"^(~(?:/[^\s$]*)?)?\$ (.*)$")

#: ``COMMAND  # OUTPUT`` in a ```bash block.
COMMENTED = re.compile(r"^(.*?\S)\s{2,}# (.*)$")

#: The fences a page may use for commands; any other kind of shell block
#: (```sh, ```shell) would go untested, and is refused.
RUN = {("console",), ("bash",)}
NORUN = {("console", "norun"), ("bash", "norun")}
DAEMON = {("bash", "daemon")}

#: How the README's quick start installs zotd before its daemon starts, in the
#: same command. The tests run an installed zotd: the prefix is checked to be
#: this one (a daemon block starting otherwise runs as it is), not run.
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -q -e . && "
SHELLISH = {"console", "bash", "sh", "shell", "zsh", "shell-session"}


@dataclass(frozen=True)
class Page:
    path: Path
    #: The directory of ``$ `` commands, under the home directory.
    cwd: str
    #: How many blocks it has that are not run.
    norun: int
    #: Fences allowed on it.
    fences: frozenset[tuple[str, ...]]


PAGES = {
    "cli": Page(
        ROOT / "docs" / "cli.md", "~/project", norun=6, fences=frozenset({("console",)} | NORUN)
    ),
    "readme": Page(
        ROOT / "README.md", "~/src/zotd", norun=1, fences=frozenset(RUN | NORUN | DAEMON)
    ),
}


# --- reading the pages -------------------------------------------------------------------


@dataclass
class Command:
    """One command of a page and what it prints."""

    line: int  # in the page, 1-based
    directory: str | None  # ``~/project``; None: the page's
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    line: int
    info: tuple[str, ...]
    commands: list[Command]


def blocks(text: str, page: Page) -> list[Block]:
    """The shell blocks of a page, each with its commands."""
    indented = re.findall(r"^[ \t]+```.*$", text, re.MULTILINE)
    assert not indented, f"indented fences are not read: {indented}"
    found = []
    for match in FENCE.finditer(text):
        info = tuple(match.group(1).split())
        if not info or info[0] not in SHELLISH:
            continue
        assert info in page.fences, f"{page.path.name}: ```{' '.join(info)} is not checked"
        first = text.count("\n", 0, match.start(2)) + 1
        body = match.group(2).splitlines()
        if info[0] == "console":
            commands = console_commands(body, first)
        else:
            commands = bash_commands(body, first)
        found.append(Block(first - 1, info, commands))
    return found


def console_commands(lines: list[str], first: int) -> list[Command]:
    commands: list[Command] = []
    for i, line in enumerate(lines):
        prompt = PROMPT.match(line)
        if prompt:
            assert not line.endswith("\\"), f"line {first + i}: no continuation lines"
            commands.append(Command(first + i, prompt.group(1), prompt.group(2)))
        else:
            assert commands, f"line {first + i}: a console block starts with a command"
            commands[-1].expected.append(line)
    return commands


def bash_commands(lines: list[str], first: int) -> list[Command]:
    commands = []
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        commented = COMMENTED.match(line)
        if commented:
            commands.append(Command(first + i, None, commented[1], [commented[2]]))
        else:
            commands.append(Command(first + i, None, line.rstrip()))
    return commands


# --- comparing ---------------------------------------------------------------------------

#: How long something has been up, as zot prints it: ``4 s``, ``2 h 5 min``.
DURATION = r"\d+ (?:s|min|h|d)(?: \d+ (?:min|h))?"
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:\d\d|Z)?")
PLACEHOLDERS = [
    (re.compile(r"\bpid \d+"), "pid PID"),
    (re.compile(r'"pid":\d+'), '"pid":PID'),
    (re.compile(rf"\bup {DURATION}"), "up UPTIME"),
    (re.compile(r'"uptime_s":[0-9.]+'), '"uptime_s":UPTIME'),
    (re.compile(r'"rss_bytes":\d+'), '"rss_bytes":RSS'),
    (re.compile(r'"(cpu_percent|cpu_s)":[0-9.]+'), r'"\1":CPU'),
    (re.compile(r"\b\d+(?:\.\d+)? ms\b"), "N ms"),  # zot audit's latencies
    (re.compile(r'"(latency_ms|took_ms)":[0-9.]+'), r'"\1":MS'),
    (TIMESTAMP, "TIME"),
    (
        re.compile(
            r'(\bzotd |\bzot/|"zotd_version":"|"name":"zot","version":")\d+\.\d+\.\d+[\w.+-]*'
        ),
        r"\1VERSION",
    ),
]


def normal(lines: list[str]) -> list[str]:
    """Lines with the placeholders of the module docstring put in (the PID and
    UPTIME cells of a ``zot ext list`` table too), and spaces evened out."""
    out = []
    columns: dict[str, int] = {}
    for line in lines:
        for pattern, replacement in PLACEHOLDERS:
            line = pattern.sub(replacement, line)
        cells = re.split(r" {2,}", line.rstrip())
        if cells[:2] == ["NAME", "VERSION"] and "PID" in cells:
            columns = {name: i for i, name in enumerate(cells)}
        elif columns and len(cells) == len(columns):
            pid, uptime = columns["PID"], columns.get("UPTIME")
            if re.fullmatch(r"\d+", cells[pid]):
                cells[pid] = "PID"
            if uptime is not None and re.fullmatch(DURATION, cells[uptime]):
                cells[uptime] = "UPTIME"
        else:
            columns = {}
        out.append("  ".join(cells))
    return out


def mismatch(command: Command, got: list[str]) -> str | None:
    """What differs between what ``command`` printed and what the page shows, or None."""
    want = normal(command.expected)
    have = normal(got)
    if want == have:
        return None
    shown = "\n".join(f"  {line}" for line in got) or "  (nothing)"
    page = "\n".join(f"  {line}" for line in command.expected) or "  (nothing)"
    for i, (w, h) in enumerate(zip(want, have, strict=False)):
        if w != h:
            first = f"first difference, line {i + 1}:\n  page: {w}\n  got:  {h}"
            break
    else:
        first = f"the page shows {len(want)} line(s), the command printed {len(have)}"
    return f"line {command.line}: $ {command.text}\n{first}\nthe page shows:\n{page}\nit printed:\n{shown}"


# --- running them ------------------------------------------------------------------------


class Session:
    """A user's machine in a temporary directory: a home (``/home/pat`` on the
    pages), a runtime directory (``/run/user/1000``) and zotd's Python first on
    the ``PATH``; no zotd settings in the environment."""

    def __init__(self, tmp: Path, page: Page) -> None:
        self.page = page
        self.tmp = tmp
        self.home = tmp / "pat"
        self.run_dir = tmp / "run"
        self.home.mkdir()
        self.run_dir.mkdir(mode=0o700)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ZOT", "XDG_", "PYTHON", "VIRTUAL_ENV"))
            and k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")
        }
        env.update(
            HOME=str(self.home),
            XDG_RUNTIME_DIR=str(self.run_dir),
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            # What is written to stdout and stderr comes out in order, as on a terminal.
            PYTHONUNBUFFERED="1",
            COLUMNS="80",
        )
        self.env = env
        self.daemons: list[subprocess.Popen[bytes]] = []
        self.socket = self.run_dir / "zot" / "zotd.sock"
        self.paths_out = [
            (str(BIN), "/home/pat/src/zotd/.venv/bin"),
            (str(self.run_dir), "/run/user/1000"),
            (str(self.home), "/home/pat"),
        ]

    def directory(self, name: str | None) -> Path:
        name = name or self.page.cwd
        return self.home / name.removeprefix("~").lstrip("/")

    def command_line(self, text: str) -> str:
        text = re.sub(r"(?<![\w/.])\.venv/bin/", f"{BIN}/", text)
        return text.replace("/home/pat", str(self.home)).replace(
            "/run/user/1000", str(self.run_dir)
        )

    def run(self, command: Command) -> list[str]:
        """What ``command`` prints, stdout and stderr together, paths as on the page."""
        res = subprocess.run(
            ["bash", "-c", self.command_line(command.text)],
            cwd=self.directory(command.directory),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        text = res.stdout.decode("utf-8", "replace")
        for path, shown in self.paths_out:
            text = text.replace(path, shown)
        return text.splitlines()

    def run_daemon(self, command: Command) -> None:
        """A foreground daemon, until :meth:`close` presses Ctrl+C."""
        log = (self.tmp / f"daemon-{len(self.daemons)}.log").open("wb")
        proc = subprocess.Popen(
            ["bash", "-c", "exec " + self.command_line(command.text)],
            cwd=self.directory(command.directory),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.daemons.append(proc)
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while self.zotd("status").returncode != 0:
            assert proc.poll() is None, Path(log.name).read_text()
            assert time.monotonic() < deadline, "the daemon did not answer"
            time.sleep(0.05)

    def zotd(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(BIN / "zotd"), *args],
            env=self.env,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )

    def close(self) -> list[str]:
        """Ctrl+C to the foreground daemons (their exit codes), then stops
        whatever daemon answers; kills the daemons it started, if need be."""
        problems = []
        for proc in self.daemons:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
            try:
                code = proc.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            if code != 0:
                problems.append(f"the foreground daemon exited with {code} after Ctrl+C")
        if self.socket.exists():
            self.zotd("stop")
        for pid in self._our_daemons():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            problems.append(f"a daemon (pid {pid}) was still running")
        return problems

    def _our_daemons(self) -> list[int]:
        """Daemons still running in this session (their command line names its socket)."""
        found = []
        for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"zotd" in argv and any(str(self.tmp).encode() in a for a in argv):
                found.append(int(entry.name))
        return found


def install_offline(session: Session, *args: str) -> None:
    res = subprocess.run(
        [str(BIN / "zot"), "ext", "install", "--no-start", *args],
        cwd=session.home / "project",
        env=session.env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert res.returncode == 0, res


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def build_common(session: Session) -> None:
    """~/src/zotd: the repository's examples, as in a clone; ~/project."""
    shutil.copytree(ROOT / "examples", session.home / "src" / "zotd" / "examples")
    (session.home / "project").mkdir()


def build_cli(session: Session) -> None:
    """The setup docs/cli.md states: ~/src/weather (and the bare ~/src/weather.git),
    ~/src/sky, ~/src/broken, hello-py installed globally and weather in ~/project."""
    build_common(session)
    src = session.home / "src"
    shutil.copytree(DOCS_WEATHER, src / "weather")
    shutil.copytree(DOCS_SKY, src / "sky")
    git("init", "-q", "-b", "main", cwd=src / "weather")
    git("add", ".", cwd=src / "weather")
    git(
        "-c",
        "user.name=pat",
        "-c",
        "user.email=pat@example.com",
        "commit",
        "-qm",
        "weather",
        cwd=src / "weather",
    )
    git("clone", "-q", "--bare", "weather", "weather.git", cwd=src)
    shutil.rmtree(src / "weather" / ".git")
    (src / "greeter").mkdir()
    shutil.copy(Path(__file__).parent / "mcp_greeter.py", src / "greeter" / "server.py")
    (src / "claude_desktop_config.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "greeter": {"command": "python3", "args": ["x.py"]},
                    "hello": {"command": "python3", "args": [str(src / "greeter" / "server.py")]},
                    "linear": {"type": "sse", "url": "https://mcp.linear.app/sse"},
                }
            }
        )
    )
    (src / "broken").mkdir()
    (src / "broken" / "extension.json").write_text(
        '{"name": "broken", "version": "0.1.0", "exec": "./missing", "enabeld": true}\n'
    )
    install_offline(session, str(src / "zotd" / "examples" / "extensions" / "hello-py"))
    install_offline(session, "--project", str(src / "weather"))


SETUPS: dict[str, Callable[[Session], None]] = {"cli": build_cli, "readme": build_common}


@pytest.fixture
def session_tmp() -> Iterator[Path]:
    # Short: the socket path must fit a Unix socket's.
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="zd", dir="/tmp")))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_page(name: str, tmp: Path) -> list[str]:
    """Runs every example of a page; what went wrong, in the page's order."""
    page = PAGES[name]
    session = Session(tmp, page)
    problems = []
    try:
        SETUPS[name](session)
        for block in blocks(page.path.read_text(), page):
            if block.info in NORUN:
                continue
            if block.info in DAEMON:
                (command,) = block.commands
                if command.text.startswith(INSTALL):
                    command = replace(command, text=command.text[len(INSTALL) :])
                session.run_daemon(command)
                continue
            for command in block.commands:
                found = mismatch(command, session.run(command))
                if found is not None:
                    problems.append(found)
    finally:
        problems += session.close()
    return problems


# --- the tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_block_is_run_or_counted(name: str) -> None:
    page = PAGES[name]
    found = blocks(page.path.read_text(), page)
    skipped = [b.line for b in found if b.info in NORUN]
    assert len(skipped) == page.norun, f"{page.path.name}: blocks not run at lines {skipped}"
    run = [b for b in found if b.info not in NORUN]
    assert run and all(b.commands for b in run)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_examples_print_what_the_page_shows(name: str, session_tmp: Path) -> None:
    problems = run_page(name, session_tmp)
    assert not problems, f"{PAGES[name].path.name}:\n\n" + "\n\n".join(problems)


def test_a_wrong_line_is_a_mismatch() -> None:
    command = Command(
        1, None, "zotd status", ["zotd 0.1.0 running: pid 4, up 3 min; 2 extension process(es)"]
    )
    printed = [f"zotd {__version__} running: pid 123456, up 2 h 5 min; 2 extension process(es)"]
    assert mismatch(command, printed) is None
    assert mismatch(command, [printed[0].replace("2 ext", "3 ext")]) is not None
    assert mismatch(command, [*printed, "one more line"]) is not None
    assert mismatch(command, []) is not None


def test_table_cells_are_placeholders_only_where_they_vary() -> None:
    page = [
        "NAME     VERSION  SCOPE   ENABLED  STATE  PID  UPTIME  RESTARTS  PROVIDES  DIR",
        "weather  0.1.0    global  yes      ready  41   3 min   0         weather   /home/pat/x",
    ]
    got = [
        "NAME     VERSION  SCOPE   ENABLED  STATE  PID      UPTIME  RESTARTS  PROVIDES  DIR",
        "weather  0.1.0    global  yes      ready  4194301  0 s     0         weather   /home/pat/x",
    ]
    assert normal(page) == normal(got)
    assert normal(page) != normal([got[0], got[1].replace("ready", "failed")])
    assert normal(page) != normal([got[0], got[1].replace("  0  ", "  1  ")])
