"""Extensions that ship skills (current zot's manifest ``skills``), through a
real daemon: a skills-only extension is ready and never spawned, its skills
are served by ``list_skills`` and ``zot skills``, a hostile one hangs
nothing, exec + skills does both, and a project copy serves no skills until
trusted.

Nothing here asserts a time: the guards are for hangs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import trio

from tests.conftest import FAST, StartDaemon, add_extension
from tests.e2e.test_examples import run_zot, user_env
from zotd.client import Client, connect
from zotd.model.discovery import project_dir
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionInfo
from zotd.protocol.extension import TextBlock

#: The hang guard of each test.
GUARD = 30.0


def skills_only(root: Path, name: str, skills: list[str], **extra: Any) -> Path:
    """``root/name`` with a manifest naming no program, only ``skills``."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "version": "1.0.0", "skills": skills, **extra}
    (directory / "extension.json").write_text(json.dumps(manifest))
    return directory


def write_skill(directory: Path, front: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "SKILL.md").write_text(f"---\n{front}\n---\n# Body\n")
    return directory / "SKILL.md"


async def info(client: Client, name: str) -> ExtensionInfo:
    return next(e for e in await client.list_extensions() if e.name == name)


async def skills_of(client: Client) -> list[tuple[str, str, str, str]]:
    return [(s.name, s.extension, s.path, s.description) for s in await client.list_skills()]


async def test_a_skills_only_extension_is_ready_never_spawned_and_serves_its_skills(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    ext = skills_only(paths.extensions_dir, "dev_tools", ["skills"])
    commit = write_skill(ext / "skills" / "commit", "name: commit\ndescription: Write a commit.")
    review = write_skill(ext / "skills" / "code" / "review", 'description: "Review: carefully"')
    await start_daemon()
    with trio.fail_after(GUARD):
        async with connect(paths.socket, cwd=project) as zot:
            e = await info(zot, "dev_tools")
            assert (e.state, e.pid, e.exit_code, e.last_error) == ("ready", None, None, "")
            assert (e.commands, e.tools, e.warnings) == ([], [], [])
            assert e.skills == ["dev-tools:commit", "dev-tools:review"]
            assert await skills_of(zot) == [
                ("dev-tools:commit", "dev_tools", str(commit), "Write a commit."),
                ("dev-tools:review", "dev_tools", str(review), "Review: carefully"),
            ]
            # Disabled, it serves none; enabled again, it does.
            await zot.ext_disable("dev_tools")
            disabled = await info(zot, "dev_tools")
            assert (disabled.state, disabled.skills) == ("disabled", [])
            assert await zot.list_skills() == []
            await zot.ext_enable("dev_tools")
            assert (await info(zot, "dev_tools")).state == "ready"
            assert len(await zot.list_skills()) == 2
            # A reload reads the skills again.
            write_skill(ext / "skills" / "commit", "name: commit\ndescription: Changed.")
            [reloaded] = await zot.ext_reload("dev_tools")
            assert (reloaded.state, reloaded.pid) == ("ready", None)
            assert (await skills_of(zot))[0][3] == "Changed."
    log = paths.extension_log("dev_tools").read_text()
    assert "started pid" not in log
    assert "ready: no process to start" in log


async def test_a_hostile_extension_hangs_nothing_and_says_what_is_wrong(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    root = paths.extensions_dir
    secret = short_tmp / "secret.md"
    secret.write_text("---\ndescription: private\n---\n")
    hostile = skills_only(root, "hostile", ["s"])
    (hostile / "s" / "trap").mkdir(parents=True)
    os.mkfifo(hostile / "s" / "trap" / "SKILL.md")
    (hostile / "s" / "leak").mkdir()
    (hostile / "s" / "leak" / "SKILL.md").symlink_to(secret)
    good = write_skill(hostile / "s" / "good", "description: fine")
    listed_fifo = skills_only(root, "fifo", ["f/SKILL.md"])
    (listed_fifo / "f").mkdir()
    os.mkfifo(listed_fifo / "f" / "SKILL.md")
    escapes = skills_only(root, "escapes", ["../hostile"])
    link_out = skills_only(root, "linkout", ["out"])
    (link_out / "out").symlink_to(short_tmp)
    await start_daemon()
    with trio.fail_after(GUARD):
        async with connect(paths.socket, cwd=project) as zot:
            h = await info(zot, "hostile")
            assert (h.state, h.pid) == ("ready", None)
            assert h.warnings == [
                f"skills: s/leak/SKILL.md leads outside the extension's directory, to {secret} "
                "(skipped)",
                "skills: s/trap/SKILL.md: it is a FIFO, not a regular file (skipped)",
            ]
            assert await skills_of(zot) == [("hostile:good", "hostile", str(good), "fine")]
            manifest = "extension.json: `skills` entry"
            f = await info(zot, "fifo")
            assert f.state == "failed"
            assert f.last_error == (
                f"{listed_fifo}/{manifest} 'f/SKILL.md' is neither a directory nor a SKILL.md "
                "file (it is a FIFO)"
            )
            e = await info(zot, "escapes")
            assert e.state == "failed"
            assert e.last_error == (
                f"{escapes}/{manifest} '../hostile' is outside the extension's directory "
                f"(it leads to {hostile})"
            )
            o = await info(zot, "linkout")
            assert o.state == "failed"
            assert o.last_error == (
                f"{link_out}/{manifest} 'out' is outside the extension's directory "
                f"(it leads to {short_tmp})"
            )


async def test_exec_and_skills_runs_the_process_and_serves_the_skills(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    ext = add_extension(
        paths.extensions_dir, "both", "--tools", "forecast", manifest={"skills": ["skills"]}
    )
    skill = write_skill(ext / "skills" / "weather", "description: Ask the forecast tool.")
    await start_daemon()
    with trio.fail_after(GUARD):
        async with connect(paths.socket, cwd=project) as zot:
            e = await info(zot, "both")
            assert e.state == "ready" and e.pid is not None and e.tools == ["forecast"]
            assert await skills_of(zot) == [
                ("both:weather", "both", str(skill), "Ask the forecast tool.")
            ]
            result = await zot.call_tool("forecast", {"city": "Oslo"})
            assert result.content == [TextBlock('{"city": "Oslo"}')]
    assert "started pid" in paths.extension_log("both").read_text()


async def test_an_untrusted_project_copy_serves_no_skills_until_trusted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    ext = skills_only(project_dir(project), "local-skills", ["skills"])
    skill = write_skill(ext / "skills" / "deploy", "description: Deploy it.")
    await start_daemon(msgspec.structs.replace(FAST, trust_project_extensions=False))
    with trio.fail_after(GUARD):
        async with connect(paths.socket, cwd=project) as zot:
            e = await info(zot, "local-skills")
            assert (e.state, e.scope, e.pid) == ("untrusted", "project", None)
            assert await zot.list_skills() == []
            [trusted] = await zot.ext_trust()
            assert (trusted.name, trusted.state, trusted.pid) == ("local-skills", "ready", None)
            assert await skills_of(zot) == [
                ("local-skills:deploy", "local-skills", str(skill), "Deploy it.")
            ]
    assert "started pid" not in paths.extension_log("local-skills").read_text()


async def test_zot_skills_lists_them(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    ext = skills_only(paths.extensions_dir, "Developer", ["skills"])
    commit = write_skill(ext / "skills" / "commit", "description: Write a commit.")
    write_skill(ext / "skills" / "esc", "description: bell \x07 here")  # shown escaped
    await start_daemon()
    text = await run_zot(["skills"], cwd=project, env=user_env(paths))
    assert (text.code, text.err) == (0, "")
    assert text.out.splitlines() == [
        "developer:commit  Write a commit.  (Developer)",
        "developer:esc     bell \\x07 here   (Developer)",
    ]
    with_paths = await run_zot(["skills", "--paths"], cwd=project, env=user_env(paths))
    assert with_paths.out.splitlines()[0].split("  ")[-1] == str(commit)
    raw = await run_zot(["skills", "--json"], cwd=project, env=user_env(paths))
    assert raw.code == 0
    assert json.loads(raw.out)[0] == {
        "name": "developer:commit",
        "extension": "Developer",
        "path": str(commit),
        "description": "Write a commit.",
    }
    listed = await run_zot(["ext", "list", "--json"], cwd=project, env=user_env(paths))
    [dev] = [e for e in json.loads(listed.out) if e["name"] == "Developer"]
    assert (dev["state"], dev["pid"]) == ("ready", None)
    assert dev["skills"] == ["developer:commit", "developer:esc"]
    table = await run_zot(["ext", "list"], cwd=project, env=user_env(paths))
    assert "skills developer:commit developer:esc" in table.out
