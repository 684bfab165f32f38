"""API keys on the user's terms (issue 16, point 9), end to end: a real
daemon (in-process, real socket), an extension that reads a variable its
manifest never asks for (tests/extensions/env_probe.py, like a published
Kagi search extension), and ``ext_env`` through the client library.

The probe answers whether it sees the variable and the SHA-256 of its value,
so a test knows the very value arrived without it ever being printed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from zotd.client import Client, ZotdError, connect
from zotd.model import env_grants
from zotd.model.config import ExtensionSettings
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol.extension import TextBlock

PROBE = EXTENSIONS / "env_probe.py"
KEY = "zotd-test-kagi-key-0123456789"
OTHER = "zotd-test-tavily-key-9876543210"


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def kagi(root: Path, *, manifest: dict[str, Any] | None = None) -> Path:
    """``kagi-search``: its tool ``kagi_search`` reports ``KAGI_API_KEY``; its
    manifest asks for nothing (unless ``manifest`` says otherwise)."""
    return add_extension(
        root,
        "kagi-search",
        "--var",
        "KAGI_API_KEY",
        "--tool",
        "kagi_search",
        manifest=manifest,
        script=PROBE,
    )


def tavily(root: Path) -> Path:
    return add_extension(
        root, "tavily", "--var", "TAVILY_API_KEY", "--tool", "tavily_search", script=PROBE
    )


async def sees(zot: Client, tool: str = "kagi_search") -> str | None:
    """The SHA-256 of the variable the probe behind ``tool`` sees, None if unset."""
    result = await zot.call_tool(tool, {"query": "trio"})
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextBlock)
    report = json.loads(block.text)
    assert report["set"] == (report["sha256"] is not None)
    digest: str | None = report["sha256"]
    return digest


def daemon_env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), **extra}


def pid_of(infos: list[ap.ExtensionInfo], name: str) -> int | None:
    return next(i.pid for i in infos if i.name == name)


async def test_allow_then_deny_applies_live_without_editing_the_manifest(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    directory = kagi(paths.extensions_dir)
    manifest_before = (directory / "extension.json").read_bytes()
    await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with connect(paths.socket, cwd=project) as zot:
        assert await sees(zot) is None  # the allowlist hides it
        assert await zot.ext_env("kagi-search") == ap.EnvData(name="kagi-search", variables=[])
        before = pid_of(await zot.list_extensions(), "kagi-search")

        data = await zot.ext_env("kagi-search", allow=["KAGI_API_KEY"])
        assert data == ap.EnvData(
            name="kagi-search", variables=["KAGI_API_KEY"], allowed=["KAGI_API_KEY"]
        )
        after = pid_of(await zot.list_extensions(), "kagi-search")
        assert after is not None and after != before  # restarted, with the key
        assert await sees(zot) == sha(KEY)

        data = await zot.ext_env("kagi-search", deny=["KAGI_API_KEY"])
        assert data == ap.EnvData(name="kagi-search", variables=[], denied=["KAGI_API_KEY"])
        assert await sees(zot) is None
    assert (directory / "extension.json").read_bytes() == manifest_before
    grants = paths.home / env_grants.GRANTS_FILE
    assert grants.stat().st_mode & 0o777 == 0o600
    assert KEY not in grants.read_text()


async def test_zotd_toml_passes_it_and_a_deny_hides_it(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    kagi(paths.extensions_dir)
    tavily(paths.extensions_dir)
    config = msgspec.structs.replace(
        FAST, extensions={"kagi-search": ExtensionSettings(env_passthrough=["KAGI_API_KEY"])}
    )
    await start_daemon(config, env=daemon_env(KAGI_API_KEY=KEY, TAVILY_API_KEY=OTHER))
    async with connect(paths.socket, cwd=project) as zot:
        assert await sees(zot) == sha(KEY)
        assert await sees(zot, "tavily_search") is None  # only the one named in zotd.toml
        data = await zot.ext_env("kagi-search")
        assert (data.variables, data.config) == (["KAGI_API_KEY"], ["KAGI_API_KEY"])

        await zot.ext_env("kagi-search", deny=["KAGI_API_KEY"])
        assert await sees(zot) is None
        data = await zot.ext_env("kagi-search", allow=["KAGI_API_KEY"])
        assert (data.variables, data.allowed, data.denied) == (
            ["KAGI_API_KEY"],
            ["KAGI_API_KEY"],
            [],
        )
        assert await sees(zot) == sha(KEY)


async def test_a_deny_hides_what_the_manifest_passes(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    kagi(paths.extensions_dir, manifest={"env_passthrough": ["KAGI_API_KEY"]})
    await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with connect(paths.socket, cwd=project) as zot:
        assert await sees(zot) == sha(KEY)
        data = await zot.ext_env("kagi-search", deny=["KAGI_API_KEY"])
        assert (data.variables, data.manifest, data.denied) == (
            [],
            ["KAGI_API_KEY"],
            ["KAGI_API_KEY"],
        )
        assert await sees(zot) is None


async def test_grants_outlive_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    kagi(paths.extensions_dir)
    daemon = await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with connect(paths.socket, cwd=project) as zot:
        await zot.ext_env("kagi-search", allow=["KAGI_API_KEY"])
    daemon.request_shutdown()
    with trio.fail_after(30):
        while paths.socket.exists():
            await trio.sleep(0.05)
    await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with connect(paths.socket, cwd=project) as zot:
        assert await sees(zot) == sha(KEY)


async def test_every_workspace_that_runs_it_restarts_with_it(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    other = short_tmp / "other"
    other.mkdir()
    kagi(paths.extensions_dir)
    await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with (
        connect(paths.socket, cwd=project) as here,
        connect(paths.socket, cwd=other) as there,
    ):
        assert await sees(there) is None
        await here.ext_env("kagi-search", allow=["KAGI_API_KEY"])
        assert await sees(there) == sha(KEY)  # without a reconnect or a reload there


async def test_one_not_set_in_the_daemon_is_named_not_passed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    kagi(paths.extensions_dir)
    await start_daemon(env=daemon_env())
    async with connect(paths.socket, cwd=project) as zot:
        data = await zot.ext_env("kagi-search", allow=["KAGI_API_KEY"])
        assert (data.variables, data.allowed) == ([], ["KAGI_API_KEY"])
        assert await sees(zot) is None


@pytest.mark.parametrize(
    ("allow", "deny", "code", "says"),
    [
        (["NOT A NAME"], [], "bad_request", "'NOT A NAME' is not an environment variable name"),
        ([], ["1ABC"], "bad_request", "'1ABC' is not an environment variable name"),
        (["PATH"], [], "bad_request", "every extension gets PATH already"),
        ([], ["LC_ALL"], "bad_request", "every extension gets LC_ALL already"),
        (["K"], ["K"], "bad_request", "K: both allowed and denied"),
    ],
)
async def test_bad_names_are_refused(
    start_daemon: StartDaemon,
    paths: Paths,
    project: Path,
    allow: list[str],
    deny: list[str],
    code: str,
    says: str,
) -> None:
    kagi(paths.extensions_dir)
    await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as err:
            await zot.ext_env("kagi-search", allow=allow, deny=deny)
        assert err.value.code == code
        assert says in err.value.message
    assert not (paths.home / env_grants.GRANTS_FILE).exists()


async def test_an_unknown_extension_is_not_found_with_the_closest_name(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    kagi(paths.extensions_dir)
    await start_daemon(env=daemon_env())
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as err:
            await zot.ext_env("kagi-serch", allow=["KAGI_API_KEY"])
    assert err.value.code == "not_found"
    assert "did you mean 'kagi-search'?" in err.value.message
    assert not (paths.home / env_grants.GRANTS_FILE).exists()


async def test_a_damaged_grants_file_passes_nothing_and_is_not_overwritten(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    kagi(paths.extensions_dir, manifest={"env_passthrough": ["KAGI_API_KEY"]})
    paths.home.mkdir(parents=True, exist_ok=True)
    grants = paths.home / env_grants.GRANTS_FILE
    grants.write_text("{not json")
    await start_daemon(env=daemon_env(KAGI_API_KEY=KEY))
    async with connect(paths.socket, cwd=project) as zot:
        # It may hold a denial of what the manifest passes: nothing passes.
        assert await sees(zot) is None
        with pytest.raises(ZotdError) as err:
            await zot.ext_env("kagi-search")
        assert err.value.code == "unavailable"
        assert str(grants) in err.value.message
        with pytest.raises(ZotdError) as err:
            await zot.ext_env("kagi-search", allow=["KAGI_API_KEY"])
        assert err.value.code == "bad_request"
    assert grants.read_text() == "{not json"
