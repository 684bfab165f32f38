"""The intercept audit trail, end to end: a real daemon, real guard
processes, intercepts through the agent socket and ``zot hook``, and the
lines that land in ``$ZOT_HOME/logs/audit.jsonl``."""

from __future__ import annotations

import hashlib
import json
import logging
import stat
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.cli.test_hooks import HOOKS
from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from tests.e2e.test_examples import run_zot, user_env, wait_for_lines
from zotd.client import connect
from zotd.model.audit import trail_path
from zotd.model.paths import Paths


def sha(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def add_guard(paths: Paths) -> None:
    """tests/extensions/fake.py as a tool-call guard: blocks ``rm -rf``,
    never answers about a command with ``hang`` in it, allows the rest."""
    add_extension(paths.extensions_dir, "guard", "--intercept", "tool_call")


async def test_a_tool_call_intercept_is_one_private_line_with_a_digest_of_its_arguments(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_guard(paths)
    await start_daemon()
    args = {"command": "rm -rf /tmp/x", "timeout": 30}
    async with connect(paths.socket, cwd=project) as zot:
        verdict = await zot.intercept("bash", args, tool_id="t1")
        assert verdict.block
        assert not (await zot.intercept("bash", {"command": "hang"}, tool_id="t2")).block
    path = trail_path(paths.logs_dir)
    blocked, silent = await wait_for_lines(path, 2)
    assert (mode(path), mode(path.parent)) == (0o600, 0o700)
    assert {k: blocked[k] for k in ("event", "tool", "tool_id", "decision", "blocked_by")} == {
        "event": "tool_call",
        "tool": "bash",
        "tool_id": "t1",
        "decision": "block",
        "blocked_by": "guard",
    }
    assert blocked["reason"] == "guard refused: matches danger pattern"
    assert blocked["workspace"] == str(project)
    assert blocked["args_digest"] == sha(args)
    assert "args" not in blocked  # only with audit_args = true
    [asked] = blocked["guards"]
    assert (asked["guard"], asked["answer"]) == ("guard", "block")
    assert asked["latency_ms"] >= 0
    # Silence is visible: the guard that never answered is `silent`.
    assert silent["decision"] == "allow"
    assert [(g["guard"], g["answer"]) for g in silent["guards"]] == [("guard", "silent")]
    assert "latency_ms" not in silent["guards"][0]


async def test_with_audit_args_the_arguments_and_their_rewrite_are_kept(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(
        paths.extensions_dir,
        "padder",
        "--log",
        str(paths.home / "padder.questions"),
        "--max-line",
        "65536",
        "--pad",
        "3",
        script=EXTENSIONS / "strict_guard.py",
    )
    await start_daemon(msgspec.structs.replace(FAST, audit_args=True))
    async with connect(paths.socket, cwd=project) as zot:
        verdict = await zot.intercept("bash", {"command": "ls", "é": "\u2028"})
        assert verdict.rewritten_by == ["padder"]
    [record] = await wait_for_lines(trail_path(paths.logs_dir), 1)
    assert record["decision"] == "rewrite"
    assert record["rewrites"] == ["padder"]
    assert record["args"] == {"command": "ls", "é": "\u2028"}
    assert record["args_digest"] == sha({"command": "ls", "é": "\u2028"})
    assert record["rewritten_args"] == {"pad": "xxx"}
    assert record["rewritten_args_digest"] == sha({"pad": "xxx"})
    assert [(g["guard"], g["answer"]) for g in record["guards"]] == [("padder", "rewrite")]


async def test_the_trail_is_rotated_past_audit_max_bytes(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_guard(paths)
    await start_daemon(msgspec.structs.replace(FAST, audit_max_bytes=4096))
    path = trail_path(paths.logs_dir)
    async with connect(paths.socket, cwd=project) as zot:
        for n in range(40):
            await zot.intercept("bash", {"command": "ls"}, tool_id=f"t{n}")
            # One at a time: each decision its own write, once the last is in.
            with trio.fail_after(15):
                while not path.exists() or f'"tool_id":"t{n}"' not in path.read_text():
                    await trio.sleep(0.01)
    older = path.with_name("audit.jsonl.1")
    assert older.exists()
    for file in (path, older):
        assert mode(file) == 0o600
        assert file.stat().st_size <= 4096
    last = [json.loads(line) for line in path.read_text().splitlines()][-1]
    assert (last["tool_id"], last["decision"]) == ("t39", "allow")
    before = [json.loads(line) for line in older.read_text().splitlines()]
    ids = [int(r["tool_id"][1:]) for r in before]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # whole records, in order


async def test_a_claude_code_hook_is_audited_too(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_guard(paths)
    env = user_env(paths)
    await start_daemon(env=env)
    payload = json.loads((HOOKS / "pre-tool-use-dangerous.json").read_text())
    payload["cwd"] = str(project)
    ran = await run_zot(
        ["hook", "pre-tool-use"], cwd=project, env=env, stdin=json.dumps(payload).encode()
    )
    assert ran.code == 0 and '"deny"' in ran.out, ran
    [record] = await wait_for_lines(trail_path(paths.logs_dir), 1)
    assert (record["tool"], record["decision"], record["blocked_by"]) == ("bash", "block", "guard")
    assert record["tool_id"] == payload["tool_use_id"]


async def test_a_trail_that_cannot_be_written_harms_no_decision(
    start_daemon: StartDaemon, paths: Paths, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    add_guard(paths)
    path = trail_path(paths.logs_dir)
    path.mkdir(parents=True)  # EISDIR for every open, as a full disk would refuse every write
    daemon = await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        for _ in range(3):
            assert (await zot.intercept("bash", {"command": "rm -rf /"})).block
            assert not (await zot.intercept("bash", {"command": "ls"})).block
        trail = daemon.hub.audit
        with trio.fail_after(15):
            while trail.lost < 6:
                await trio.sleep(0.01)
        assert [info.state for info in await zot.list_extensions()] == ["ready"]
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "zotd.runtime.audit_trail" and r.levelno >= logging.WARNING
    ]
    assert warnings == [
        f"audit trail: cannot write {path} (Is a directory): decisions are not recorded until it can"
    ]
