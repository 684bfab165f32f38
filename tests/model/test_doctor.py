"""``zot ext doctor``'s checks (zotd/model/doctor.py, doctor_frames.py,
doctor_daemon.py, interpreters.py): plain functions over manifests read
from real directories, handshakes, frames, the daemon's entries and logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import pytest

from zotd.model import doctor as dr
from zotd.model import doctor_daemon as dd
from zotd.model import doctor_frames as df
from zotd.model import interpreters
from zotd.model.discovery import discover
from zotd.model.manifest import Found, load
from zotd.protocol import extension as ep
from zotd.protocol.agent import ExtensionInfo, HandshakeInfo, Metrics, Shadowed


class Grace(TypedDict):
    ready_grace: float
    ready_idle: float


GRACE: Grace = {"ready_grace": 3.0, "ready_idle": 0.2}


def extension(root: Path, name: str, program: str = "#!/bin/sh\nexit 0\n", **fields: Any) -> Path:
    """``root/name``: a manifest running ``./run`` (``program``), with ``fields``."""
    directory = root / name
    directory.mkdir(parents=True)
    run = directory / "run"
    run.write_text(program)
    run.chmod(0o755)
    (directory / "extension.json").write_text(json.dumps({"name": name, "exec": "./run", **fields}))
    return directory


def whats(findings: list[dr.Finding]) -> list[tuple[str, str]]:
    return [(f.severity, f.what) for f in findings]


def info(name: str = "wx", **fields: Any) -> ExtensionInfo:
    base: dict[str, Any] = {
        "name": name, "version": "1", "description": "", "language": "", "scope": "global",
        "dir": f"/x/{name}", "enabled": True, "state": "ready", "pid": 7, "restarts": 0,
        "restart_reason": "", "exit_code": None, "commands": [], "tools": [], "events": [],
        "intercepts": [], "log": "", "last_error": "", "log_tail": [],
    }  # fmt: skip
    base.update(fields)
    return ExtensionInfo(**base)


# --- the manifest ----------------------------------------------------------------------


def test_a_sound_manifest_has_no_findings(tmp_path: Path) -> None:
    assert dr.manifest_findings(load(extension(tmp_path, "wx"), "global")) == []


def test_an_exec_that_does_not_resolve_is_an_error_saying_what_to_fix(tmp_path: Path) -> None:
    directory = extension(tmp_path, "wx")
    (directory / "extension.json").write_text(json.dumps({"name": "wx", "exec": "./missing"}))
    [finding] = dr.manifest_findings(load(directory, "global"))
    assert finding.severity == "error"
    assert finding.problem
    assert finding.what == f"cannot start: exec './missing' not found: no file {directory}/missing"
    assert finding.fix == (
        f"fix `exec` in {directory}/extension.json (or install what it names), "
        "then run `zot ext reload wx`"
    )
    assert finding.line() == f"error: {finding.what}; {finding.fix}"


def test_a_manifest_that_is_not_json_is_an_error(tmp_path: Path) -> None:
    directory = extension(tmp_path, "wx")
    (directory / "extension.json").write_text("{nope")
    [finding] = dr.manifest_findings(load(directory, "global"))
    assert finding.severity == "error"
    assert "invalid JSON" in finding.what
    assert finding.fix == "fix it, then run `zot ext reload wx`"


def test_an_unknown_key_is_a_warning_with_the_closest_one(tmp_path: Path) -> None:
    directory = extension(tmp_path, "wx", enabeld=True)
    [finding] = dr.manifest_findings(load(directory, "global"))
    assert whats([finding]) == [
        ("warning", "extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?")
    ]
    assert finding.fix == f"rename or remove the key in {directory}/extension.json"


def test_disabled_is_a_note_not_a_problem(tmp_path: Path) -> None:
    found = load(extension(tmp_path, "wx", enabled=False), "global")
    [finding] = dr.manifest_findings(found)
    assert finding.severity == "note"
    assert not finding.problem
    assert finding.fix == "run `zot ext enable wx` to use it"
    assert dr.count([finding]) == 0


def test_an_untrusted_project_extension_says_to_trust_it(tmp_path: Path) -> None:
    found = load(extension(tmp_path, "wx"), "project")
    found.untrusted = "not trusted yet"
    [finding] = dr.manifest_findings(found, "/home/pat/project")
    assert finding.severity == "warning"
    assert finding.what.startswith("wx is not trusted yet")
    assert "not run" in finding.what
    assert finding.fix.startswith("run `zot ext trust` in /home/pat/project")
    assert not dr.is_trusted(found, "")
    assert dr.is_trusted(load(extension(tmp_path, "other"), "global"), "")


def test_a_project_copy_passed_over_for_the_global_one_is_reported(tmp_path: Path) -> None:
    workspace = tmp_path / "proj"
    extension(workspace / ".zot" / "extensions", "wx")
    extension(tmp_path / "global", "wx")

    def distrust(found: Found) -> None:
        found.untrusted = "not trusted yet"

    [found] = discover(workspace=workspace, global_dir=tmp_path / "global", vet=distrust)
    assert found.scope == "global"
    [finding] = dr.manifest_findings(found, str(workspace))
    assert finding.severity == "warning"
    assert finding.what.startswith(
        f"the project copy in {workspace}/.zot/extensions/wx is not used: wx is not trusted yet"
    )
    assert "`zot ext trust`" in finding.fix


# --- the runtime ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (b"#!/usr/bin/env python3\nimport sys\n", "python3"),
        (b"#!/usr/bin/env -S node --no-warnings\n", "node"),
        (b"#! /usr/bin/ruby -w\n", "/usr/bin/ruby"),
        (b"#!/usr/bin/env A=1 bun\n", "bun"),
        (b"#!\n", None),
        (b"\x7fELF\x02\x01", None),
        (b"", None),
    ],
)
def test_the_interpreter_of_a_shebang_line(line: bytes, named: str | None) -> None:
    assert interpreters.shebang(line) == named


def test_an_exec_that_is_an_interpreter_is_its_runtime() -> None:
    assert interpreters.interpreter_of(["/usr/bin/node", "x.js"], b"\x7fELF") == (
        interpreters.Interpreter("/usr/bin/node", "exec")
    )
    assert interpreters.interpreter_of(["/opt/ext/run"], b"#!/usr/bin/env python3\n") == (
        interpreters.Interpreter("python3", "#!")
    )
    assert interpreters.interpreter_of(["/opt/ext/run"], b"\x7fELF") is None
    assert interpreters.known("python3.12")
    assert interpreters.known("/usr/local/bin/node")
    assert not interpreters.known("weather")


def test_a_runtime_that_is_not_installed_is_an_error(tmp_path: Path) -> None:
    directory = extension(tmp_path, "wx", program="#!/usr/bin/env no-such-runtime-zz\n")
    found = load(directory, "global")
    runtime, askable = interpreters.runtime_for(found.argv, found.dir, "/nonexistent", True)
    assert runtime == dr.Runtime(str(directory / "run"), "no-such-runtime-zz", "#!", "")
    assert not askable
    [finding] = dr.runtime_findings("wx", runtime)
    assert finding.severity == "error"
    assert finding.what == (
        f"its runtime 'no-such-runtime-zz' (named by the `#!` line of {directory}/run) "
        "is not installed or not on PATH"
    )
    assert (
        finding.fix
        == f"install no-such-runtime-zz, or name another in the `#!` line of {directory}/run"
    )


def test_a_runtime_is_asked_its_version_only_if_known_and_not_an_untrusted_file(
    tmp_path: Path,
) -> None:
    python = Path(sys.executable)
    bin_dir = str(python.parent)
    found = load(extension(tmp_path, "wx", program=f"#!/usr/bin/env {python.name}\n"), "project")
    runtime, askable = interpreters.runtime_for(found.argv, found.dir, bin_dir, False)
    assert runtime.path == str(python)
    assert askable  # outside its directory: asking it runs nothing of the project's
    own = tmp_path / "own" / "python3"  # a "python3" the project ships itself
    own.parent.mkdir()
    own.write_text("#!/bin/sh\necho gotcha\n")
    own.chmod(0o755)
    inside = load(extension(own.parent, "ext", program=f"#!{own}\n"), "project")
    assert interpreters.runtime_for([str(own)], own.parent, bin_dir, False)[1] is False
    assert interpreters.runtime_for([str(own)], own.parent, bin_dir, True)[1] is True
    assert interpreters.runtime_for(inside.argv, inside.dir, bin_dir, True)[0].interpreter == str(
        own
    )


def test_a_version_that_cannot_be_had_is_a_warning() -> None:
    runtime = dr.Runtime("/x/run", "node", "exec", "/usr/bin/node", "", "did not finish within 5 s")
    [finding] = dr.runtime_findings("wx", runtime)
    assert whats([finding]) == [("warning", "`node --version` did not finish within 5 s")]
    assert dr.runtime_findings("wx", dr.Runtime("/x/run")) == []
    assert interpreters.version_line(b"\n  v20.11.1 \nmore\n") == "v20.11.1"


# --- the handshake -------------------------------------------------------------------


def test_a_prompt_handshake_has_no_findings() -> None:
    hs = HandshakeInfo(hello_s=0.05, ready_s=0.06)
    assert dr.handshake_findings("wx", "zot", hs, **GRACE) == []
    assert dr.handshake_findings("wx", "zot", None, **GRACE) == []


def test_no_hello_is_an_error_unless_the_process_ended() -> None:
    hs = HandshakeInfo()
    [finding] = dr.handshake_findings("wx", "zot", hs, **GRACE)
    assert whats([finding]) == [("error", "it did not say `hello`")]
    assert finding.fix.startswith('write {"type": "hello", "name": "wx"} as its first line')
    [starting] = dr.handshake_findings("wx", "zot", hs, **GRACE, state="starting")
    assert starting.what.startswith("it has not managed to say `hello` yet")
    assert dr.handshake_findings("wx", "zot", hs, **GRACE, state="failed") == []
    [mcp] = dr.handshake_findings("srv", "mcp", hs, **GRACE)
    assert mcp.what == "it did not answer MCP's `initialize`"


def test_a_late_hello_and_no_ready() -> None:
    late = HandshakeInfo(hello_s=4.5, ready_s=4.7, auto_ready=True)
    assert whats(dr.handshake_findings("wx", "zot", late, **GRACE)) == [
        ("warning", "it took 4.5 s to say `hello`, past ready_grace (3 s): agents stopped waiting for it"),
        ("warning", "no `ready` frame within ready_grace (3 s): agents waited for it"),
    ]  # fmt: skip
    quiet = HandshakeInfo(hello_s=0.1, ready_s=0.3, auto_ready=True)
    [note] = dr.handshake_findings("wx", "zot", quiet, **GRACE)
    assert note.severity == "note"
    assert note.what == "no `ready` frame: taken as ready after 0.2 s without registrations"
    assert dr.handshake_findings("srv", "mcp", quiet, **GRACE) == []  # (MCP has no `ready`)


def test_frames_out_of_order_are_warnings() -> None:
    hs = HandshakeInfo(hello_s=0.1, ready_s=0.1, out_of_order=["hello again", "ready again"])
    findings = dr.handshake_findings("wx", "zot", hs, **GRACE)
    assert [(f.what, f.fix) for f in findings] == [
        ("sent hello again", "send `hello` once"),
        ("sent ready again", "send `ready` once"),
    ]
    refused = HandshakeInfo(out_of_order=["register_tool before hello"])
    assert ("warning", "sent register_tool before hello") in whats(
        dr.handshake_findings("wx", "zot", refused, **GRACE, state="failed")
    )


# --- registrations -------------------------------------------------------------------


def test_a_tool_with_an_unknown_exposure_is_skipped() -> None:
    [finding] = df.tool_findings("wx", "t", {"type": "object"}, "sometimes", "")
    assert whats([finding]) == [("error", "tool 't' is skipped: unknown exposure 'sometimes'")]
    assert finding.fix == "use codemode, deferred, direct or model-only, or leave it out"


def test_bad_schemas() -> None:
    [listy] = df.tool_findings("wx", "t", [1, 2], "", "")
    assert whats([listy]) == [("error", "tool 't' is refused: its `schema` is not a JSON object")]
    [odd] = df.tool_findings("wx", "t", {"type": "objekt"}, "", "")
    assert odd.severity == "warning"
    assert odd.what.startswith("tool 't': its schema is not valid JSON Schema (type: 'objekt'")
    good = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert df.tool_findings("wx", "t", good, "direct", "safe") == []


def test_an_unknown_replay_is_a_warning() -> None:
    [finding] = df.tool_findings("wx", "t", {}, "", "twice")
    assert whats([finding]) == [("warning", "tool 't': unknown replay 'twice', taken as 'never'")]


def test_frames_are_checked_as_registered() -> None:
    frames: list[ep.RegisterCommand | ep.RegisterTool] = [
        ep.RegisterCommand(name="go"),
        ep.RegisterTool(name="a", schema=msgspec.Raw(b'"str"')),
        ep.RegisterTool(name="b", schema=msgspec.Raw(b'{"type": "object"}'), exposure="x"),
    ]
    assert [f.what for f in df.frame_findings("wx", frames)] == [
        "tool 'a' is refused: its `schema` is not a JSON object",
        "tool 'b' is skipped: unknown exposure 'x'",
    ]


def test_subscriptions_to_what_zot_does_not_send() -> None:
    findings = df.subscribe_findings(
        "wx", ["turn_begin", "turn_end"], ["tool_call", "session_start"]
    )
    assert [(f.what, f.fix) for f in findings] == [
        ("subscribes to 'turn_begin', an event zot does not send", "did you mean 'turn_end'?"),
        (
            "asks to intercept 'session_start', which cannot be intercepted",
            "intercept assistant_message, before_agent_start, tool_call or turn_start, "
            "or subscribe to it as an event",
        ),
    ]


def test_holdings_say_who_keeps_a_contested_name() -> None:
    tool = msgspec.Raw(b'{"type": "object"}')
    held = df.holdings(
        [
            ("a", [ep.RegisterTool(name="forecast", schema=tool), ep.RegisterCommand(name="go")]),
            ("b", [ep.RegisterTool(name="forecast", schema=tool), ep.RegisterCommand(name="help")]),
            ("c", [ep.RegisterTool(name="listy", schema=msgspec.Raw(b"[1]"))]),
        ],
        reserved_commands=["help"],
    )
    assert held["a"] == (["go"], ["forecast"], [])
    commands, tools, lost = held["b"]
    assert (commands, tools) == ([], [])
    assert [(s.name, s.held_by) for s in lost] == [("/help", "zot"), ("forecast", "a")]
    assert held["c"] == ([], [], [])
    findings = df.shadow_findings("b", lost)
    assert [f.fix for f in findings] == [
        "rename it: zot keeps that name",
        "rename it, or run `zot ext disable a` if you want this one",
    ]


# --- a dry run -------------------------------------------------------------------------


def test_a_healthy_trial_has_no_findings() -> None:
    trial = dr.Trial(handshake=HandshakeInfo(hello_s=0.1, ready_s=0.1), hello_name="wx")
    assert df.trial_findings("wx", "zot", trial, **GRACE) == []


def test_a_trial_that_crashed_says_its_stderr() -> None:
    trial = dr.Trial(exit_code=3, stderr_tail=["error: no API key"])
    [finding] = df.trial_findings("wx", "zot", trial, **GRACE)
    assert finding.severity == "error"
    assert finding.what == (
        "exited with code 3 before it was asked to stop; its stderr ends: error: no API key"
    )
    killed = df.trial_findings("wx", "zot", dr.Trial(exit_code=-9), **GRACE)
    assert killed[0].what.startswith("was killed by SIGKILL")


def test_a_trial_without_hello() -> None:
    trial = dr.Trial(settled=False, bad_lines=1, first_bad="'banner': not JSON")
    assert whats(df.trial_findings("wx", "zot", trial, **GRACE)) == [
        ("error", "it did not say `hello` within the dry run's 3 s"),
        ("warning", "wrote 1 line(s) to stdout that are not frames (first: 'banner': not JSON)"),
    ]
    shorter = dr.Trial(settled=False, hello_bound=1.5)  # hello_timeout under ready_grace
    assert whats(df.trial_findings("wx", "zot", shorter, **GRACE)) == [
        ("error", "it did not say `hello` within the dry run's 1.5 s")
    ]


def test_a_trial_refused_spawned_or_broken() -> None:
    refused = dr.Trial(refused="first frame must be `hello`, got `ready`")
    assert whats(df.trial_findings("wx", "zot", refused, **GRACE)) == [
        ("error", "broke the protocol: first frame must be `hello`, got `ready`")
    ]
    spawn = dr.Trial(spawn_error="cannot start /x/run: Exec format error")
    assert whats(df.trial_findings("wx", "zot", spawn, **GRACE)) == [
        ("error", "cannot start /x/run: Exec format error")
    ]
    mcp = dr.Trial(mcp_error="did not answer `initialize` within the dry run's 15 s")
    assert whats(df.trial_findings("srv", "mcp", mcp, **GRACE)) == [
        ("error", "did not answer `initialize` within the dry run's 15 s")
    ]


def test_a_trial_that_needed_a_signal_named_itself_otherwise_and_sent_unknown_frames() -> None:
    trial = dr.Trial(
        handshake=HandshakeInfo(hello_s=0.1, ready_s=0.1),
        hello_name="weather",
        stop="SIGTERM",
        unknown_types=["from_the_future"],
        oversized=2,
    )
    assert whats(df.trial_findings("wx", "zot", trial, **GRACE)) == [
        ("warning", "its `hello` names 'weather'; it runs as 'wx'"),
        ("warning", "wrote 2 line(s) longer than max_frame_bytes"),
        ("note", "sent frames of types zotd does not know (ignored): from_the_future"),
        ("warning", "did not exit on `shutdown`: it took SIGTERM"),
    ]


# --- the daemon's view -----------------------------------------------------------------


def test_a_ready_extension_has_no_findings() -> None:
    assert dd.info_findings(info()) == []


def test_a_failed_extension_with_its_stderr() -> None:
    failed = info(state="failed", last_error="exited with code 3", exit_code=3)
    [finding] = dd.info_findings(failed, stderr=["boom"])
    assert finding.what == "failed: exited with code 3; its stderr ends: boom"
    assert finding.fix == "see `zot ext logs wx`, then run `zot ext reload wx`"
    assert dd.info_findings(failed, broken=True) == []  # (its manifest's finding says it)


def test_restarts_after_crashes_and_by_reloads() -> None:
    crashed = info(restarts=2, restart_reason="exited with code 1")
    assert whats(dd.info_findings(crashed)) == [
        ("warning", "restarted 2 time(s), the last after it exited with code 1")
    ]
    reloaded = info(restarts=1)
    assert whats(dd.info_findings(reloaded)) == [("note", "restarted 1 time(s), by reloads")]


def test_lost_names_timeouts_and_late_replies() -> None:
    entry = info(
        shadowed=[Shadowed("forecast", "sky", "sky registered it first")],
        metrics=Metrics(timeouts=2),
        late_replies=1,
    )
    assert whats(dd.info_findings(entry)) == [
        ("warning", "forecast is hidden: sky registered it first"),
        ("warning", "2 call(s) timed out"),
        ("note", "1 reply(ies) came after their request was answered, cancelled or past its deadline (dropped)"),
    ]  # fmt: skip


def test_zotds_notes_that_are_problems_once_each() -> None:
    notes = [
        "started pid 4: x",
        "tool 'a': unknown exposure 'x' (not codemode, deferred, direct, model-only): skipped",
        "skipped a malformed line (not JSON): banner",
        "skipped a malformed line (not JSON): banner",
        "ready: no `ready` frame; ready after 0.2 s of quiet",
    ]
    assert whats(dd.note_findings("wx", notes)) == [
        ("error", f"zotd noted: {notes[1]}"),
        ("warning", f"zotd noted: {notes[2]} (2 times)"),
    ]


def test_the_last_run_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "ext-wx.log"
    log.write_text(
        "[zotd 2026-11-30 11:00:00.000] started pid 1: x\n"
        "old stderr\n"
        "[zotd 2026-11-30 11:00:01.000] skipped a malformed line (x): y\n"
        "[zotd 2026-11-30 11:00:02.000] started pid 2: x\n"
        "new stderr\n"
        "[zotd 2026-11-30 11:00:03.000] cannot intercept ['a']: only [...]\n"
    )
    assert dd.last_run(log) == (["cannot intercept ['a']: only [...]"], ["new stderr"])
    assert dd.last_run(tmp_path / "none.log") == ([], [])
    assert dd.exit_words(None) == ""
    assert dd.exit_words(-15) == "was killed by SIGTERM"
