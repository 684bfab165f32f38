"""The environment an extension gets (zotd.model.environment), the user's
grants (zotd.model.env_grants) and ``env_passthrough`` in ``zotd.toml``."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import msgspec
import pytest

from zotd.model import env_grants
from zotd.model.config import Config, ConfigError, load_config
from zotd.model.env_grants import Grants, GrantsError
from zotd.model.environment import Passthrough, allowlisted, extension_env, passthrough_for
from zotd.model.manifest import Manifest

DAEMON = {
    "PATH": "/usr/bin",
    "HOME": "/home/pat",
    "LC_ALL": "C",
    "KAGI_API_KEY": "k",
    "TAVILY_API_KEY": "t",
    "SAIA_API_KEY": "s",
    "ANTHROPIC_API_KEY": "never",
}


def manifest(**fields: object) -> Manifest:
    return msgspec.convert({"name": "kagi-search", "exec": "python3", **fields}, Manifest)


def config_with(**tables: list[str]) -> Config:
    return msgspec.convert(
        {"extensions": {n: {"env_passthrough": v} for n, v in tables.items()}}, Config
    )


# --- extension_env ----------------------------------------------------------------------


def test_only_the_allowlist_and_what_is_asked_for() -> None:
    env = extension_env(DAEMON, manifest(env_passthrough=["SAIA_API_KEY"]), "/z")
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/pat",
        "LC_ALL": "C",
        "SAIA_API_KEY": "s",
        "ZOT_HOME": "/z",
    }


def test_the_three_sources_add_up_less_what_is_denied() -> None:
    passing = Passthrough.of(
        manifest(env_passthrough=["SAIA_API_KEY"]),
        ["TAVILY_API_KEY"],
        Grants(allow=["KAGI_API_KEY", "MISSING"], deny=["SAIA_API_KEY"]),
    )
    env = extension_env(DAEMON, manifest(env={"MODE": "x"}), "/z", passing)
    assert {k for k in env if k.endswith("_KEY")} == {"KAGI_API_KEY", "TAVILY_API_KEY"}
    assert env["MODE"] == "x" and "MISSING" not in env
    assert passing.names == ["KAGI_API_KEY", "MISSING", "TAVILY_API_KEY"]
    assert passing.present(DAEMON) == ["KAGI_API_KEY", "TAVILY_API_KEY"]
    assert passing.missing(DAEMON) == ["MISSING"]
    assert passing.sources("SAIA_API_KEY") == ["manifest", "denied by command"]
    assert passing.sources("KAGI_API_KEY") == ["allowed by command"]
    assert passing.every == ["KAGI_API_KEY", "MISSING", "SAIA_API_KEY", "TAVILY_API_KEY"]


def test_a_denial_does_not_touch_the_allowlist_or_the_manifests_own_values() -> None:
    passing = Passthrough.of(None, (), Grants(deny=["PATH", "LC_ALL", "MODE"]))
    assert passing.denied == ("MODE",)  # the allowlist is out of every list
    env = extension_env(DAEMON, manifest(env={"MODE": "set by the manifest"}), "/z", passing)
    assert (env["PATH"], env["LC_ALL"], env["MODE"]) == ("/usr/bin", "C", "set by the manifest")


def test_allowlisted() -> None:
    assert allowlisted("PATH") and allowlisted("XDG_DATA_HOME") and allowlisted("ZOT_HOME")
    assert allowlisted("ZOTD_INSTANCE")
    assert not allowlisted("KAGI_API_KEY") and not allowlisted("ZOTD_TOKEN")


def test_passthrough_for_reads_zotd_toml_and_the_grants(tmp_path: Path) -> None:
    env_grants.change(tmp_path, "kagi-search", ["KAGI_API_KEY"], [])
    config = config_with(**{"kagi-search": ["TAVILY_API_KEY"], "other": ["SAIA_API_KEY"]})
    passing = passthrough_for(tmp_path, config, "kagi-search", manifest())
    assert passing == Passthrough(config=("TAVILY_API_KEY",), allowed=("KAGI_API_KEY",))
    assert passthrough_for(tmp_path, config, "other", None).names == ["SAIA_API_KEY"]


def test_a_damaged_grants_file_passes_nothing(tmp_path: Path) -> None:
    (tmp_path / env_grants.GRANTS_FILE).write_text('{"version": 1, "extensions": []}')
    config = config_with(**{"kagi-search": ["TAVILY_API_KEY"]})
    passing = passthrough_for(tmp_path, config, "kagi-search", manifest(env_passthrough=["X"]))
    assert passing == Passthrough()


# --- the grants file -------------------------------------------------------------------


def test_no_file_means_no_grants(tmp_path: Path) -> None:
    assert env_grants.load(tmp_path) == {}
    assert env_grants.grants_for(tmp_path / "nowhere", "x") == Grants()


def test_allow_and_deny_take_each_other_back(tmp_path: Path) -> None:
    grants, changed = env_grants.change(tmp_path, "k", ["B", "A", "A"], ["C"])
    assert (grants, changed) == (Grants(allow=["A", "B"], deny=["C"]), True)
    grants, changed = env_grants.change(tmp_path, "k", ["C"], ["A"])
    assert (grants, changed) == (Grants(allow=["B", "C"], deny=["A"]), True)
    assert env_grants.change(tmp_path, "k", ["B"], []) == (
        Grants(allow=["B", "C"], deny=["A"]),
        False,
    )
    assert env_grants.grants_for(tmp_path, "k") == Grants(allow=["B", "C"], deny=["A"])
    assert env_grants.grants_for(tmp_path, "other") == Grants()


def test_the_file_is_private_names_only_and_replaced_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env_grants.change(home, "kagi-search", ["KAGI_API_KEY"], [])
    env_grants.change(home, "tavily", [], ["TAVILY_API_KEY"])
    path = home / env_grants.GRANTS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "version": 1,
        "extensions": {
            "kagi-search": {"allow": ["KAGI_API_KEY"], "deny": []},
            "tavily": {"allow": [], "deny": ["TAVILY_API_KEY"]},
        },
    }
    assert os.listdir(home) == [env_grants.GRANTS_FILE]  # no temporary file left


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_grants.change(tmp_path, "k", ["A"], [])
    before = (tmp_path / env_grants.GRANTS_FILE).read_bytes()

    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(GrantsError, match=r"cannot write .*: No space left on device"):
        env_grants.change(tmp_path, "k", ["B"], [])
    assert (tmp_path / env_grants.GRANTS_FILE).read_bytes() == before
    assert os.listdir(tmp_path) == [env_grants.GRANTS_FILE]


def test_taking_everything_back_forgets_the_extension(tmp_path: Path) -> None:
    env_grants.change(tmp_path, "k", ["A"], [])
    env_grants.change(tmp_path, "k", [], ["A"])
    assert env_grants.load(tmp_path) == {"k": Grants(deny=["A"])}


@pytest.mark.parametrize("name", ["", "1A", "A B", "A-B", "A=B", "KÄY", "A\n"])
def test_not_variable_names_are_refused(tmp_path: Path, name: str) -> None:
    assert not env_grants.is_variable_name(name)
    with pytest.raises(GrantsError, match="not an environment variable name"):
        env_grants.change(tmp_path, "k", [name], [])
    with pytest.raises(GrantsError, match="not an environment variable name"):
        env_grants.change(tmp_path, "k", [], [name])
    assert not (tmp_path / env_grants.GRANTS_FILE).exists()


def test_both_allowed_and_denied_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GrantsError, match="A: both allowed and denied"):
        env_grants.change(tmp_path, "k", ["A"], ["A"])


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"version": 1, "extensions": {"k": {"allow": ["A B"]}}}',
        '{"version": 1, "extensions": {"k": {"allow": "A"}}}',
        '{"version": 1, "extensions": {"k": {"grant": ["A"]}}}',
    ],
)
def test_a_damaged_file_is_an_error_and_is_not_overwritten(tmp_path: Path, content: str) -> None:
    path = tmp_path / env_grants.GRANTS_FILE
    path.write_text(content)
    with pytest.raises(GrantsError, match="not a grants file zotd wrote"):
        env_grants.load(tmp_path)
    with pytest.raises(GrantsError):
        env_grants.change(tmp_path, "k", ["B"], [])
    assert path.read_text() == content


def test_a_fifo_in_its_place_is_refused_unopened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / env_grants.GRANTS_FILE)
    with pytest.raises(GrantsError, match="not a regular file"):
        env_grants.load(tmp_path)


def test_concurrent_changes_all_land(tmp_path: Path) -> None:
    names = [f"V{i}" for i in range(40)]
    threads = [
        threading.Thread(target=env_grants.change, args=(tmp_path, "k", [n], [])) for n in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert env_grants.grants_for(tmp_path, "k").allow == sorted(names)


# --- zotd.toml ---------------------------------------------------------------------------


def test_zotd_toml_env_passthrough(tmp_path: Path) -> None:
    path = tmp_path / "zotd.toml"
    path.write_text('[extensions.kagi-search]\nenv_passthrough = ["KAGI_API_KEY", "_X1"]\n')
    assert load_config(path).extensions["kagi-search"].env_passthrough == ["KAGI_API_KEY", "_X1"]


def test_zotd_toml_refuses_a_name_that_is_not_a_variable(tmp_path: Path) -> None:
    path = tmp_path / "zotd.toml"
    path.write_text('[extensions.kagi-search]\nenv_passthrough = ["KAGI_API_KEY", "KAGI API"]\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"{path}: field `extensions.kagi-search`: env_passthrough[1] is 'KAGI API', not an "
        "environment variable name (letters, digits and _, not starting with a digit)"
    )
