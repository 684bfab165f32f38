"""``zot ext env`` as a user runs it: real ``zot`` processes, a real daemon
started with ``zotd start`` (its environment holds the API key), with and
without it; and the examples of docs/configuration.md's "API keys", run.

The extension is tests/extensions/env_probe.py installed as ``kagi-search``
(a stand-in for a published Kagi search extension: its manifest asks for
nothing, its tool ``kagi_search`` reads ``KAGI_API_KEY``). What it sees is
checked through ``zot call``: the probe answers the SHA-256 of the value.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import RUN_TIMEOUT, ZOT, Cli
from tests.cli.test_ext_cli import ext, ok, outcome
from tests.conftest import EXTENSIONS, add_extension

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"
KEY = "zotd-cli-test-kagi-key-42"
NOT_SET_NOTE = (
    "not set in zotd's environment: {}; set it where zotd starts, then restart zotd "
    '(docs/configuration.md, "API keys")\n'
)
NOTHING = (
    "kagi-search gets no variables beyond the allowlist; let it see one with `zot ext env "
    "kagi-search --allow VAR`, or with env_passthrough in [extensions.kagi-search] of zotd.toml\n"
)
OFFLINE = "zotd is not running; this applies when it next starts\n"

#: A fenced block of the page: its info string and body.
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    c = Cli(short_tmp)
    try:
        yield c
    finally:
        c.cleanup()


def install_kagi(cli: Cli) -> None:
    """``zot ext install`` of the probe as ``kagi-search`` (global)."""
    source = add_extension(
        cli.tmp / "src",
        "kagi-search",
        "--var",
        "KAGI_API_KEY",
        "--tool",
        "kagi_search",
        script=EXTENSIONS / "env_probe.py",
        self_contained=True,
    )
    ok(ext(cli, "install", str(source)))


def start_with_key(cli: Cli) -> None:
    """``zotd start`` with ``KAGI_API_KEY`` in its environment (and in no
    later ``zot`` command's)."""
    cli.env["KAGI_API_KEY"] = KEY
    cli.start()
    del cli.env["KAGI_API_KEY"]


def seen(cli: Cli) -> str | None:
    """The SHA-256 of the ``KAGI_API_KEY`` the running extension sees (None: unset)."""
    res = ok(cli.zot("call", "kagi_search", '{"query": "trio"}'))
    report = json.loads(res.stdout)
    digest: str | None = report["sha256"]
    return digest


SHA = hashlib.sha256(KEY.encode()).hexdigest()


# --- with a daemon ------------------------------------------------------------------------


def test_allow_and_deny_live(cli: Cli) -> None:
    install_kagi(cli)
    start_with_key(cli)
    assert seen(cli) is None
    assert outcome(ext(cli, "env", "kagi-search")) == (0, NOTHING, "")

    res = ok(ext(cli, "env", "kagi-search", "--allow", "KAGI_API_KEY"))
    assert res.stdout == (
        "VARIABLE      FROM                STATE\n"
        "KAGI_API_KEY  allowed by command  passed\n"
        "restarted kagi-search: ready; provides kagi_search\n"
    )
    assert seen(cli) == SHA

    res = ok(ext(cli, "env", "kagi-search", "--deny", "KAGI_API_KEY", "--allow", "SAIA_API_KEY"))
    assert res.stdout == (
        "VARIABLE      FROM                STATE\n"
        "KAGI_API_KEY  denied by command   hidden (denied)\n"
        "SAIA_API_KEY  allowed by command  not set\n"
        + NOT_SET_NOTE.format("SAIA_API_KEY")
        + "restarted kagi-search: ready; provides kagi_search\n"
    )
    assert seen(cli) is None

    res = ok(ext(cli, "env", "kagi-search", "--json"))
    assert json.loads(res.stdout) == {
        "name": "kagi-search",
        "variables": [],
        "manifest": [],
        "config": [],
        "allowed": ["SAIA_API_KEY"],
        "denied": ["KAGI_API_KEY"],
    }
    # Names only, anywhere zotd writes.
    for log in (cli.home / "logs").iterdir():
        assert KEY not in log.read_text(), log
    assert KEY not in (cli.home / "env-grants.json").read_text()


def test_zotd_toml_passes_it(cli: Cli) -> None:
    cli.config.write_text('[extensions.kagi-search]\nenv_passthrough = ["KAGI_API_KEY"]\n')
    install_kagi(cli)
    start_with_key(cli)
    assert seen(cli) == SHA
    res = ok(ext(cli, "env", "kagi-search"))
    assert res.stdout == ("VARIABLE      FROM       STATE\nKAGI_API_KEY  zotd.toml  passed\n")


def test_errors_live(cli: Cli) -> None:
    install_kagi(cli)
    start_with_key(cli)
    assert outcome(ext(cli, "env", "kagi-serch")) == (
        1,
        "",
        "zot: no extension named 'kagi-serch'; did you mean 'kagi-search'? "
        "(`zot ext list` lists them)\n",
    )
    assert outcome(ext(cli, "env", "kagi-search", "--allow", "KAGI KEY")) == (
        1,
        "",
        "zot: 'KAGI KEY' is not an environment variable name\n",
    )
    assert outcome(ext(cli, "env", "kagi-search", "--deny", "HOME")) == (
        1,
        "",
        "zot: every extension gets HOME already (zotd's allowlist); --allow and --deny are "
        "for the variables beyond it\n",
    )
    assert not (cli.home / "env-grants.json").exists()


def test_a_bad_name_in_zotd_toml_stops_the_daemon_and_the_command(cli: Cli) -> None:
    install_kagi(cli)
    cli.config.write_text('[extensions.kagi-search]\nenv_passthrough = ["KAGI-API-KEY"]\n')
    message = (
        f"bad config file {cli.config}: field `extensions.kagi-search`: env_passthrough[0] is "
        "'KAGI-API-KEY', not an environment variable name (letters, digits and _, not "
        "starting with a digit)\n"
    )
    res = cli.zotd("start")
    assert res.returncode == 2, res
    assert res.stderr.endswith(message), res.stderr
    assert outcome(ext(cli, "env", "kagi-search")) == (2, "", "zot: " + message)


# --- without a daemon -----------------------------------------------------------------------


def test_without_a_daemon_it_applies_at_the_next_start(cli: Cli) -> None:
    install_kagi(cli)
    assert outcome(ext(cli, "env", "kagi-search")) == (0, NOTHING, "")
    res = ok(ext(cli, "env", "kagi-search", "--allow", "KAGI_API_KEY"))
    # Whether it is set is told from this command's own environment.
    assert res.stdout == (
        "VARIABLE      FROM                STATE\n"
        "KAGI_API_KEY  allowed by command  not set\n"
        "not set in this environment (zotd is not running): KAGI_API_KEY; set it where zotd "
        'starts, then restart zotd (docs/configuration.md, "API keys")\n' + OFFLINE
    )
    cli.env["KAGI_API_KEY"] = KEY
    res = ok(ext(cli, "env", "kagi-search", "--json"))
    assert json.loads(res.stdout)["variables"] == ["KAGI_API_KEY"]
    del cli.env["KAGI_API_KEY"]
    assert (cli.home / "env-grants.json").stat().st_mode & 0o777 == 0o600

    start_with_key(cli)
    assert seen(cli) == SHA


def test_errors_without_a_daemon(cli: Cli) -> None:
    install_kagi(cli)
    assert outcome(ext(cli, "env", "nope")) == (
        1,
        "",
        "zot: no extension named 'nope' (installed: kagi-search)\n",
    )
    assert outcome(ext(cli, "env", "kagi-search", "--allow", "9LIVES")) == (
        1,
        "",
        "zot: '9LIVES' is not an environment variable name\n",
    )
    assert outcome(ext(cli, "env", "kagi-search", "--allow", "LC_ALL")) == (
        1,
        "",
        "zot: every extension gets LC_ALL already (zotd's allowlist); --allow and --deny are "
        "for the variables beyond it\n",
    )
    (cli.home / "env-grants.json").write_text("[]")
    res = ext(cli, "env", "kagi-search")
    assert res.returncode == 1
    assert res.stderr.startswith(f"zot: {cli.home / 'env-grants.json'} is not a grants file")
    assert (cli.home / "env-grants.json").read_text() == "[]"


# --- the page's examples ------------------------------------------------------------------------


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_pages_examples_run(short_tmp: Path) -> None:
    """Each ```console block of "API keys" runs in a fresh home against a
    daemon started with ``KAGI_API_KEY`` and ``kagi-search`` installed, with
    the ```toml blocks above it in the section as zotd.toml; each command
    prints exactly the lines under it."""
    blocks = FENCE.findall(section(DOC.read_text(), "API keys"))
    toml = ""
    ran = 0
    for n, (info, body) in enumerate(blocks):
        if info.strip() == "toml":
            toml += body
            continue
        if info.strip() != "console":
            continue
        root = short_tmp / f"s{n}"
        root.mkdir()
        cli = Cli(root)
        try:
            if toml:
                cli.config.write_text(toml)
            install_kagi(cli)
            start_with_key(cli)
            for command, expected in commands(body):
                argv = shlex.split(command)
                assert argv[0] == "zot", command
                res = subprocess.run(
                    [str(ZOT), *argv[1:]],
                    cwd=cli.project,
                    env=cli.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=RUN_TIMEOUT,
                    check=False,
                )
                assert (res.returncode, res.stdout) == (0, expected), command
                ran += 1
            # What the page says it passes, it passes.
            shown = json.loads(ok(ext(cli, "env", "kagi-search", "--json")).stdout)
            assert (seen(cli) == SHA) == ("KAGI_API_KEY" in shown["variables"])
        finally:
            cli.cleanup()
    assert ran >= 5 and toml, (ran, toml)


def commands(body: str) -> list[tuple[str, str]]:
    """``$ COMMAND`` lines and what follows each up to the next."""
    out: list[tuple[str, str]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], ""))
        else:
            assert out, f"a block must start with a command: {line!r}"
            command, printed = out[-1]
            out[-1] = (command, printed + line + "\n")
    return out
