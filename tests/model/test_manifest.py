"""extension.json manifests and discovery (zotd/model/manifest.py, zotd/model/discovery.py)."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zotd.model.discovery import discover, every_copy, project_dir
from zotd.model.manifest import (
    MANIFEST,
    MAX_MANIFEST_BYTES,
    Found,
    Manifest,
    ManifestError,
    Scope,
    check_name,
    load,
    read_manifest,
    read_manifest_with_warnings,
    resolve_exec,
    runs_nothing,
)


def make_exe(path: Path, *, executable: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def write_manifest(directory: Path, fields: dict[str, Any] | str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = fields if isinstance(fields, str) else json.dumps(fields)
    (directory / MANIFEST).write_text(text)
    return directory


def make_extension(root: Path, dirname: str, name: str | None = None, **extra: Any) -> Path:
    """``root/dirname`` with a working manifest named ``name`` (default: ``dirname``)."""
    directory = root / dirname
    make_exe(directory / "run")
    write_manifest(directory, {"name": name or dirname, "exec": "./run", **extra})
    return directory


def manifest_error(directory: Path) -> str:
    with pytest.raises(ManifestError) as info:
        read_manifest(directory)
    return str(info.value)


# --- read_manifest ------------------------------------------------------------


def test_reference_manifest(tmp_path: Path) -> None:
    write_manifest(
        tmp_path,
        """{
  "name": "weather",
  "version": "1.0.0",
  "exec": "./weather",
  "args": ["--mode", "daemon"],
  "language": "go",
  "description": "current weather for any city",
  "enabled": true
}""",
    )
    assert read_manifest(tmp_path) == Manifest(
        name="weather",
        exec="./weather",
        version="1.0.0",
        args=["--mode", "daemon"],
        language="go",
        description="current weather for any city",
        enabled=True,
    )


def test_manifest_defaults(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x", "exec": "./x"})
    manifest = read_manifest(tmp_path)
    assert manifest.enabled is True
    assert manifest.args == []
    assert (manifest.version, manifest.language, manifest.description) == ("", "", "")


def test_manifest_disabled(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x", "exec": "./x", "enabled": False})
    assert read_manifest(tmp_path).enabled is False


def test_manifest_unknown_fields_are_ignored(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x", "exec": "./x", "homepage": "https://example.com"})
    assert read_manifest(tmp_path).name == "x"


def test_no_manifest(tmp_path: Path) -> None:
    assert manifest_error(tmp_path) == f"no extension.json in {tmp_path}"


def test_bad_json(tmp_path: Path) -> None:
    write_manifest(tmp_path, '{"name": "x",')
    assert manifest_error(tmp_path).startswith(f"{tmp_path / MANIFEST}: invalid JSON: ")


def test_not_an_object(tmp_path: Path) -> None:
    write_manifest(tmp_path, '["x"]')
    assert manifest_error(tmp_path) == f"{tmp_path / MANIFEST}: Expected `object`, got `array`"


def test_missing_name(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"exec": "./x"})
    assert manifest_error(tmp_path) == (
        f"{tmp_path / MANIFEST}: Object missing required field `name`"
    )


#: A manifest with neither ``exec`` nor ``skills`` nor a theme (current zot's wording).
NOTHING_TO_RUN = "`exec` or `skills` is required (or a theme: theme.json or themes/theme.json)"


def test_missing_exec(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x"})
    assert manifest_error(tmp_path) == f"{tmp_path / MANIFEST}: {NOTHING_TO_RUN}"


def test_empty_exec(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x", "exec": ""})
    assert manifest_error(tmp_path) == f"{tmp_path / MANIFEST}: {NOTHING_TO_RUN}"


def test_empty_skills_and_no_exec(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x", "skills": []})
    assert manifest_error(tmp_path) == f"{tmp_path / MANIFEST}: {NOTHING_TO_RUN}"


def test_skills_without_exec_is_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    write_manifest(tmp_path, {"name": "x", "skills": ["skills"]})
    assert read_manifest(tmp_path) == Manifest(name="x", skills=["skills"])


def test_skills_only_loads_with_nothing_to_run(tmp_path: Path) -> None:
    skill = tmp_path / "ext" / "skills" / "commit" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: commit\ndescription: Write a commit.\n---\nBody\n")
    write_manifest(tmp_path / "ext", {"name": "Developer", "skills": ["skills/"]})
    found = load(tmp_path / "ext", Scope.GLOBAL)
    assert (found.error, found.argv, found.warnings) == ("", [], [])
    assert runs_nothing(found)
    assert [(s.name, s.path, s.description) for s in found.skills] == [
        ("developer:commit", str(skill), "Write a commit.")
    ]


@pytest.mark.parametrize("theme", ["theme.json", "themes/theme.json"])
def test_a_theme_only_manifest_needs_no_exec(tmp_path: Path, theme: str) -> None:
    (tmp_path / theme).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / theme).write_text("{}")
    write_manifest(tmp_path, {"name": "dark"})
    found = load(tmp_path, Scope.GLOBAL)
    assert (found.error, found.argv, found.skills) == ("", [], [])
    assert runs_nothing(found)


def test_a_theme_that_is_a_directory_is_no_theme(tmp_path: Path) -> None:
    (tmp_path / "theme.json").mkdir()
    write_manifest(tmp_path, {"name": "dark"})
    assert manifest_error(tmp_path) == f"{tmp_path / MANIFEST}: {NOTHING_TO_RUN}"


def test_exec_and_skills_runs_and_serves(tmp_path: Path) -> None:
    directory = make_extension(tmp_path, "both", skills=["SKILL.md"])
    (directory / "SKILL.md").write_text("---\ndescription: top\n---\n")
    found = load(directory, Scope.GLOBAL)
    assert found.error == "" and found.argv == [str(directory / "run")]
    assert not runs_nothing(found)
    assert [(s.name, s.description) for s in found.skills] == [("both:both", "top")]


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("../outside", "is outside the extension's directory (it leads to {out})"),
        ("/etc", "is outside the extension's directory (an absolute path; give one relative"),
        ("link", "is outside the extension's directory (it leads to {out})"),
        ("missing", "does not exist (no {dir}/missing)"),
        ("README.md", "is neither a directory nor a SKILL.md file (it is a file)"),
        ("fifo/SKILL.md", "is neither a directory nor a SKILL.md file (it is a FIFO)"),
        ("", "is not a path"),
    ],
)
def test_bad_skills_entries_are_manifest_errors(tmp_path: Path, entry: str, why: str) -> None:
    directory = tmp_path / "ext"
    (tmp_path / "outside").mkdir()
    (directory / "fifo").mkdir(parents=True)
    os.mkfifo(directory / "fifo" / "SKILL.md")
    (directory / "link").symlink_to(tmp_path / "outside")
    (directory / "README.md").write_text("")
    write_manifest(directory, {"name": "x", "skills": [entry]})
    found = load(directory, Scope.GLOBAL)  # the FIFO is never opened: this returns
    expected = why.format(out=tmp_path / "outside", dir=directory)
    assert found.error.startswith(f"{directory / MANIFEST}: `skills` entry {entry!r} {expected}")
    assert found.skills == [] and found.argv == []


def test_wrong_field_type(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"name": "x", "exec": "./x", "args": "--flag"})
    assert manifest_error(tmp_path) == (
        f"{tmp_path / MANIFEST}: Expected `array`, got `str` - at `$.args`"
    )


def test_unreadable_manifest(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).mkdir()
    assert manifest_error(tmp_path).startswith(f"cannot read {tmp_path / MANIFEST}: ")


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "-x", "a b", "x" * 129])
def test_unsafe_name(tmp_path: Path, name: str) -> None:
    write_manifest(tmp_path, {"name": name, "exec": "./x"})
    assert manifest_error(tmp_path) == (
        f"invalid name {name!r}: use letters, digits, '.', '_' and '-', "
        "starting with a letter or digit"
    )


@pytest.mark.parametrize("name", ["x", "hello-py", "a.b_c-d", "9lives", "x" * 128])
def test_safe_names(name: str) -> None:
    check_name(name)


def test_name_with_trailing_newline_is_unsafe() -> None:
    with pytest.raises(ManifestError, match="invalid name"):
        check_name("x\n")


# --- resolve_exec -------------------------------------------------------------


def test_resolve_absolute_path(tmp_path: Path) -> None:
    exe = make_exe(tmp_path / "bin" / "tool")
    manifest = Manifest(name="x", exec=str(exe))
    assert resolve_exec(manifest, tmp_path / "ext") == str(exe)


def test_resolve_dot_slash_is_relative_to_the_manifest_dir(tmp_path: Path) -> None:
    directory = tmp_path / "ext"
    exe = make_exe(directory / "run")
    result = resolve_exec(Manifest(name="x", exec="./run"), directory)
    assert os.path.isabs(result)
    assert Path(result) == exe


def test_resolve_relative_subdir(tmp_path: Path) -> None:
    directory = tmp_path / "ext"
    exe = make_exe(directory / "bin" / "run")
    assert Path(resolve_exec(Manifest(name="x", exec="bin/run"), directory)) == exe


def test_resolve_is_absolute_even_from_a_relative_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_exe(tmp_path / "ext" / "run")
    monkeypatch.chdir(tmp_path)
    assert resolve_exec(Manifest(name="x", exec="./run"), Path("ext")) == str(
        tmp_path / "ext" / "run"
    )


def test_resolve_bare_name_of_a_file_in_the_dir(tmp_path: Path) -> None:
    directory = tmp_path / "ext"
    exe = make_exe(directory / "weather")
    other = make_exe(tmp_path / "path" / "weather")
    result = resolve_exec(Manifest(name="x", exec="weather"), directory, path_env=str(other.parent))
    assert result == str(exe)


def test_resolve_bare_name_on_path(tmp_path: Path) -> None:
    exe = make_exe(tmp_path / "path" / "node")
    directory = tmp_path / "ext"
    directory.mkdir()
    path_env = os.pathsep.join([str(tmp_path / "empty"), str(exe.parent)])
    assert resolve_exec(Manifest(name="x", exec="node"), directory, path_env=path_env) == str(exe)


def test_resolve_bare_name_uses_the_environment_path_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = make_exe(tmp_path / "path" / "zot-test-tool")
    monkeypatch.setenv("PATH", str(exe.parent))
    assert resolve_exec(Manifest(name="x", exec="zot-test-tool"), tmp_path) == str(exe)


def test_resolve_bare_name_skips_non_executables_on_path(tmp_path: Path) -> None:
    make_exe(tmp_path / "a" / "tool", executable=False)
    exe = make_exe(tmp_path / "b" / "tool")
    path_env = os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")])
    result = resolve_exec(Manifest(name="x", exec="tool"), tmp_path / "ext", path_env=path_env)
    assert result == str(exe)


def test_resolve_bare_name_not_found(tmp_path: Path) -> None:
    directory = tmp_path / "ext"
    directory.mkdir()
    with pytest.raises(ManifestError) as info:
        resolve_exec(Manifest(name="x", exec="nope"), directory, path_env=str(tmp_path))
    assert str(info.value) == f"exec 'nope' is not in {directory} and not on PATH"


def test_resolve_bare_name_with_empty_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="not on PATH"):
        resolve_exec(Manifest(name="x", exec="sh"), tmp_path, path_env="")


def test_resolve_relative_not_found(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        resolve_exec(Manifest(name="x", exec="./missing"), tmp_path)
    assert str(info.value) == f"exec './missing' not found: no file {tmp_path / 'missing'}"


def test_resolve_absolute_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(ManifestError) as info:
        resolve_exec(Manifest(name="x", exec=str(missing)), tmp_path)
    assert str(info.value) == f"exec {str(missing)!r} not found: no file {missing}"


def test_resolve_a_directory_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(ManifestError, match="not found: no file"):
        resolve_exec(Manifest(name="x", exec="./sub"), tmp_path)


def test_resolve_not_executable_says_chmod(tmp_path: Path) -> None:
    # Mode 0644: no execute bit at all, so X_OK fails even for root.
    exe = make_exe(tmp_path / "run", executable=False)
    with pytest.raises(ManifestError, match="chmod \\+x") as info:
        resolve_exec(Manifest(name="x", exec="./run"), tmp_path)
    assert str(info.value) == f"exec './run' is not executable: chmod +x {exe}"


def test_resolve_bare_name_in_dir_not_executable_says_chmod(tmp_path: Path) -> None:
    exe = make_exe(tmp_path / "run", executable=False)
    with pytest.raises(ManifestError) as info:
        resolve_exec(Manifest(name="x", exec="run"), tmp_path, path_env="")
    assert str(info.value) == f"exec 'run' is not executable: chmod +x {exe}"


# --- load ---------------------------------------------------------------------


def test_load_a_working_extension(tmp_path: Path) -> None:
    directory = make_extension(tmp_path, "weather", args=["--mode", "daemon"])
    found = load(directory, Scope.GLOBAL)
    assert found.name == "weather"
    assert found.dir == directory
    assert found.scope == "global"
    assert found.manifest is not None
    assert found.argv == [str(directory / "run"), "--mode", "daemon"]
    assert found.error == ""


def test_load_uses_the_manifest_name_not_the_dir_name(tmp_path: Path) -> None:
    found = load(make_extension(tmp_path, "dir", name="real"), Scope.PROJECT)
    assert (found.name, found.error) == ("real", "")


def test_load_broken_manifest_never_raises(tmp_path: Path) -> None:
    directory = write_manifest(tmp_path / "broken", "{nope")
    found = load(directory, Scope.GLOBAL)
    assert found.name == "broken"
    assert found.manifest is None
    assert found.argv == []
    assert "invalid JSON" in found.error


def test_load_missing_exec_file_keeps_the_manifest(tmp_path: Path) -> None:
    directory = write_manifest(tmp_path / "ext", {"name": "x", "exec": "./gone"})
    found = load(directory, Scope.GLOBAL)
    assert found.name == "x"
    assert found.manifest is not None
    assert found.argv == []
    assert found.error == f"exec './gone' not found: no file {directory / 'gone'}"


def test_load_makes_the_dir_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_extension(tmp_path, "ext")
    monkeypatch.chdir(tmp_path)
    found = load(Path("ext"), Scope.EXPLICIT)
    assert found.dir == tmp_path / "ext"
    assert found.error == ""


# --- discover -----------------------------------------------------------------


def where(found: list[Found]) -> list[tuple[str, str]]:
    return [(f.name, f.scope) for f in found]


def test_project_dir(tmp_path: Path) -> None:
    assert project_dir(tmp_path) == tmp_path / ".zot" / "extensions"


def test_discover_nothing(tmp_path: Path) -> None:
    assert discover(workspace=tmp_path / "ws", global_dir=tmp_path / "global") == []


def test_discover_global_sorted_by_dir_name(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        make_extension(tmp_path / "global", name)
    found = discover(workspace=None, global_dir=tmp_path / "global")
    assert where(found) == [("alpha", "global"), ("mid", "global"), ("zeta", "global")]


def test_discover_order_explicit_project_global(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "g2")
    make_extension(tmp_path / "global", "g1")
    make_extension(project_dir(workspace), "p2")
    make_extension(project_dir(workspace), "p1")
    explicit = [make_extension(tmp_path / "dev", "e2"), make_extension(tmp_path / "dev", "e1")]
    found = discover(workspace=workspace, global_dir=tmp_path / "global", explicit=explicit)
    assert where(found) == [
        ("e2", "explicit"),
        ("e1", "explicit"),
        ("p1", "project"),
        ("p2", "project"),
        ("g1", "global"),
        ("g2", "global"),
    ]


def test_project_wins_over_global(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "weather", version="global")
    project = make_extension(project_dir(workspace), "weather", version="project")
    found = discover(workspace=workspace, global_dir=tmp_path / "global")
    assert where(found) == [("weather", "project")]
    assert found[0].dir == project
    assert found[0].manifest is not None
    assert found[0].manifest.version == "project"


def test_explicit_wins_over_project_and_global(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "weather")
    make_extension(project_dir(workspace), "weather")
    dev = make_extension(tmp_path / "dev", "weather")
    found = discover(workspace=workspace, global_dir=tmp_path / "global", explicit=[dev])
    assert where(found) == [("weather", "explicit")]
    assert found[0].dir == dev


def test_precedence_follows_the_manifest_name(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "weather")
    make_extension(project_dir(workspace), "my-weather", name="weather")
    found = discover(workspace=workspace, global_dir=tmp_path / "global")
    assert where(found) == [("weather", "project")]
    assert found[0].dir.name == "my-weather"


def test_without_workspace_the_project_dir_is_not_scanned(tmp_path: Path) -> None:
    make_extension(project_dir(tmp_path), "p")
    make_extension(tmp_path / "global", "g")
    assert where(discover(workspace=None, global_dir=tmp_path / "global")) == [("g", "global")]


def test_one_entry_per_name_within_a_scope(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = make_extension(tmp_path / "global", "a-dir", name="same")
    make_extension(tmp_path / "global", "b-dir", name="same")
    with caplog.at_level(logging.WARNING, logger="zotd.model.discovery"):
        found = discover(workspace=None, global_dir=tmp_path / "global")
    assert where(found) == [("same", "global")]
    assert found[0].dir == first
    assert "two global extensions are named 'same'" in caplog.text


def test_duplicate_explicit_dirs_give_one_entry(tmp_path: Path) -> None:
    dev = make_extension(tmp_path / "dev", "x")
    found = discover(workspace=None, global_dir=tmp_path / "global", explicit=[dev, dev])
    assert where(found) == [("x", "explicit")]


def test_broken_manifests_are_found_with_an_error(tmp_path: Path) -> None:
    root = tmp_path / "global"
    make_extension(root, "good")
    write_manifest(root / "badjson", "{")
    write_manifest(root / "noexec", {"name": "noexec"})
    write_manifest(root / "unsafe", {"name": "../x", "exec": "./x"})
    (root / "empty").mkdir()
    write_manifest(root / "missing", {"name": "missing", "exec": "./gone"})
    found = {f.name: f for f in discover(workspace=None, global_dir=root)}
    assert sorted(found) == ["badjson", "empty", "good", "missing", "noexec", "unsafe"]
    assert found["good"].error == ""
    assert "invalid JSON" in found["badjson"].error
    assert "`exec` or `skills` is required" in found["noexec"].error
    assert "invalid name '../x'" in found["unsafe"].error
    assert found["empty"].error == f"no extension.json in {root / 'empty'}"
    assert "not found" in found["missing"].error
    for name in ("badjson", "noexec", "unsafe", "empty", "missing"):
        assert found[name].argv == []


def test_broken_explicit_dir_does_not_raise(tmp_path: Path) -> None:
    found = discover(
        workspace=None, global_dir=tmp_path / "global", explicit=[tmp_path / "does-not-exist"]
    )
    assert where(found) == [("does-not-exist", "explicit")]
    assert found[0].error.startswith("no extension.json in ")


def test_a_broken_project_copy_gives_way_to_the_global_one(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    mine = make_extension(tmp_path / "global", "weather")
    write_manifest(project_dir(workspace) / "weather", "{")
    found = discover(workspace=workspace, global_dir=tmp_path / "global")
    assert where(found) == [("weather", "global")]
    assert (found[0].dir, found[0].error) == (mine, "")
    [aside] = found[0].passed_over
    assert (aside.found.scope, aside.why) == ("project", "failed")
    assert aside.found.dir == project_dir(workspace) / "weather"
    assert "invalid JSON" in aside.reason


def test_hidden_dirs_and_files_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "global"
    make_extension(root, ".hidden", name="hidden")
    make_extension(root, "shown")
    (root / "README.md").write_text("not an extension")
    assert where(discover(workspace=None, global_dir=root)) == [("shown", "global")]


def test_hidden_project_dirs_are_ignored(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(project_dir(workspace), ".cache", name="cache")
    assert discover(workspace=workspace, global_dir=tmp_path / "global") == []


def test_global_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "global").write_text("")
    assert discover(workspace=None, global_dir=tmp_path / "global") == []


# --- unknown keys: accepted, with a warning --------------------------------------

#: Every manifest key zot's own documents name (the reference's table, and
#: current zot's ``skills``) and the ones zotd documents (docs/extensions.md).
DOCUMENTED = {
    "name": "documented",
    "version": "1.0.0",
    "exec": "./run",
    "args": ["--mode", "daemon"],
    "language": "go",
    "description": "every key there is",
    "enabled": True,
    "skills": ["skills/"],
    "priority": -5,
    "env": {"MODE": "test"},
    "env_passthrough": ["HOME"],
}


def test_a_mistyped_key_is_accepted_with_a_warning(tmp_path: Path) -> None:
    directory = make_extension(tmp_path, "weather", enabeld=False)
    found = load(directory, Scope.GLOBAL)
    assert found.error == ""
    assert found.manifest is not None and found.manifest.enabled is True  # the typo did nothing
    assert found.warnings == [
        "extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?"
    ]


def test_an_unknown_key_far_from_any_gets_no_suggestion(tmp_path: Path) -> None:
    found = load(make_extension(tmp_path, "weather", colour="red"), Scope.GLOBAL)
    assert found.warnings == ["extension.json: unknown key `colour` (ignored)"]


def test_one_warning_per_unknown_key_in_file_order(tmp_path: Path) -> None:
    directory = make_extension(tmp_path, "weather", descripton="x", priorty=1, Exec="./run")
    assert load(directory, Scope.GLOBAL).warnings == [
        "extension.json: unknown key `descripton` (ignored); did you mean `description`?",
        "extension.json: unknown key `priorty` (ignored); did you mean `priority`?",
        "extension.json: unknown key `Exec` (ignored); did you mean `exec`?",
    ]


def test_every_documented_key_is_known(tmp_path: Path) -> None:
    make_exe(tmp_path / "documented" / "run")
    (tmp_path / "documented" / "skills").mkdir()
    write_manifest(tmp_path / "documented", DOCUMENTED)
    found = load(tmp_path / "documented", Scope.GLOBAL)
    assert (found.error, found.warnings) == ("", [])


def test_a_working_manifest_has_no_warnings(tmp_path: Path) -> None:
    assert load(make_extension(tmp_path, "weather"), Scope.GLOBAL).warnings == []


def test_read_manifest_still_ignores_unknown_keys(tmp_path: Path) -> None:
    directory = make_extension(tmp_path, "weather", enabeld=False)
    assert read_manifest(directory) == Manifest(name="weather", exec="./run")
    manifest, warnings = read_manifest_with_warnings(directory)
    assert manifest == Manifest(name="weather", exec="./run")
    assert warnings == ["extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?"]


def test_a_broken_manifest_has_an_error_not_warnings(tmp_path: Path) -> None:
    directory = write_manifest(tmp_path / "broken", {"name": "broken", "enabeld": True})
    found = load(directory, Scope.GLOBAL)
    assert found.error  # no exec
    assert found.warnings == []


def test_discover_keeps_the_warnings(tmp_path: Path) -> None:
    root = tmp_path / "global"
    make_extension(root, "typo", enabeld=True)
    make_extension(root, "fine")
    warnings = {f.name: f.warnings for f in discover(workspace=None, global_dir=root)}
    assert warnings == {
        "fine": [],
        "typo": ["extension.json: unknown key `enabeld` (ignored); did you mean `enabled`?"],
    }


# --- a project copy that cannot run gives way (issue 15) ------------------------------


def untrusted(found: Found) -> None:
    """A ``vet`` that trusts nothing."""
    found.untrusted = "not trusted"


def test_an_untrusted_project_copy_gives_way_to_the_global_one(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    mine = make_extension(tmp_path / "global", "guard", version="mine")
    theirs = make_extension(project_dir(workspace), "guard", version="theirs")
    found = discover(workspace=workspace, global_dir=tmp_path / "global", vet=untrusted)
    assert where(found) == [("guard", "global")]
    assert found[0].dir == mine and found[0].untrusted == ""
    [aside] = found[0].passed_over
    assert (aside.found.dir, aside.why, aside.reason) == (theirs, "untrusted", "not trusted")
    assert aside.found.untrusted == "not trusted"


def test_a_disabled_project_copy_does_not_turn_the_global_one_off(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "guard")
    make_extension(project_dir(workspace), "guard", enabled=False)
    found = discover(workspace=workspace, global_dir=tmp_path / "global")  # trusted or not
    assert where(found) == [("guard", "global")]
    assert found[0].manifest is not None and found[0].manifest.enabled
    [aside] = found[0].passed_over
    assert (aside.why, aside.reason) == ("disabled", 'its manifest says "enabled": false')


def test_a_project_copy_that_can_run_still_comes_first(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    mine = make_extension(tmp_path / "global", "weather")
    theirs = make_extension(project_dir(workspace), "weather")
    vetted: list[Path] = []
    found = discover(
        workspace=workspace, global_dir=tmp_path / "global", vet=lambda f: vetted.append(f.dir)
    )
    assert where(found) == [("weather", "project")]
    assert vetted == [theirs]  # only project copies are vetted
    [aside] = found[0].passed_over
    assert (aside.found.dir, aside.why) == (mine, "hidden")
    assert aside.reason == f"the project copy in {theirs} comes first"


def test_a_project_copy_alone_is_listed_as_it_is(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(project_dir(workspace), "repo-tool")
    write_manifest(project_dir(workspace) / "broken", "{")
    found = {
        f.name: f for f in discover(workspace=workspace, global_dir=tmp_path / "g", vet=untrusted)
    }
    assert (found["repo-tool"].scope, found["repo-tool"].untrusted) == ("project", "not trusted")
    assert found["broken"].error and found["broken"].passed_over == []


def test_a_disabled_or_broken_global_copy_still_takes_its_name(tmp_path: Path) -> None:
    # The user's own copies keep the documented precedence among themselves.
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "guard", enabled=False)
    make_extension(project_dir(workspace), "guard")
    dev = write_manifest(tmp_path / "dev" / "guard", "{")
    found = discover(
        workspace=workspace, global_dir=tmp_path / "global", explicit=[dev], vet=untrusted
    )
    assert where(found) == [("guard", "explicit")]
    assert [(a.found.scope, a.why) for a in found[0].passed_over] == [
        ("project", "hidden"),
        ("global", "hidden"),
    ]
    # Without the explicit one: the untrusted project copy gives way to the
    # disabled global one (the user's choice), which is what is listed.
    found = discover(workspace=workspace, global_dir=tmp_path / "global", vet=untrusted)
    assert where(found) == [("guard", "global")]
    assert [a.why for a in found[0].passed_over] == ["untrusted"]


def test_every_copy(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "guard")
    make_extension(tmp_path / "global", "other")
    make_extension(project_dir(workspace), "guard")
    found = discover(workspace=workspace, global_dir=tmp_path / "global", vet=untrusted)
    assert [(f.name, f.scope) for f in every_copy(found)] == [
        ("guard", "global"),
        ("guard", "project"),
        ("other", "global"),
    ]


def test_what_is_passed_over_is_not_part_of_the_comparison(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    make_extension(tmp_path / "global", "guard")
    before = discover(workspace=workspace, global_dir=tmp_path / "global")
    make_extension(project_dir(workspace), "guard")
    after = discover(workspace=workspace, global_dir=tmp_path / "global", vet=untrusted)
    assert before == after  # the global copy that runs is unchanged: no restart
    assert len(after[0].passed_over) == 1


# --- reading a cloned repository warily (issue 15) --------------------------------------


def bounded(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread, failing (not hanging the run) if it blocks."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    thread.join(30)  # a hang guard: a blocking read never returns
    assert not thread.is_alive(), "the read blocked"
    return result[0]


def test_a_manifest_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    directory = tmp_path / "x"
    directory.mkdir()
    os.mkfifo(directory / MANIFEST)
    found = bounded(lambda: load(directory, Scope.PROJECT))
    assert found.error == f"cannot read {directory / MANIFEST}: it is a FIFO, not a regular file"


def test_a_manifest_linked_to_a_device_is_refused_unopened(tmp_path: Path) -> None:
    directory = tmp_path / "x"
    directory.mkdir()
    (directory / MANIFEST).symlink_to("/dev/zero")
    found = bounded(lambda: load(directory, Scope.PROJECT))
    assert found.error == (
        f"cannot read {directory / MANIFEST}: it is a character device, not a regular file"
    )


def test_a_manifest_linked_to_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    directory = tmp_path / "x"
    directory.mkdir()
    (directory / MANIFEST).symlink_to(tmp_path / "pipe")
    found = bounded(lambda: load(directory, Scope.PROJECT))
    assert found.error.endswith("it is a FIFO, not a regular file")


def test_a_huge_manifest_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "x"
    write_manifest(
        directory,
        '{"name": "x", "exec": "./run", "description": "' + "a" * MAX_MANIFEST_BYTES + '"}',
    )
    assert (
        manifest_error(directory) == f"cannot read {directory / MANIFEST}: it is larger than 64 KiB"
    )


def test_a_manifest_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "x" / MANIFEST).mkdir(parents=True)
    assert manifest_error(tmp_path / "x").endswith("it is a directory, not a regular file")


def test_discovery_of_a_hostile_project_finishes(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    root = project_dir(workspace)
    for name in ("fifo", "zero"):
        (root / name).mkdir(parents=True)
    os.mkfifo(root / "fifo" / MANIFEST)
    (root / "zero" / MANIFEST).symlink_to("/dev/zero")
    os.mkfifo(root / "not-a-dir")  # an entry that is no directory is skipped, unopened
    (root / "loop").symlink_to(root / "loop")
    make_extension(tmp_path / "global", "fifo")
    found = bounded(lambda: discover(workspace=workspace, global_dir=tmp_path / "global"))
    by_name = {f.name: f for f in found}
    assert sorted(by_name) == ["fifo", "zero"]
    assert by_name["fifo"].scope == "global"  # the broken project copy gives way
    assert by_name["fifo"].passed_over[0].reason.endswith("it is a FIFO, not a regular file")
    assert by_name["zero"].error.endswith("it is a character device, not a regular file")


def test_a_scope_reads_at_most_max_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from zotd.model import discovery

    monkeypatch.setattr(discovery, "MAX_DIRS", 3)
    for i in range(5):
        make_extension(tmp_path / "global", f"e{i}")
    with caplog.at_level(logging.WARNING, logger="zotd.model.discovery"):
        found = discover(workspace=None, global_dir=tmp_path / "global")
    assert [f.name for f in found] == ["e0", "e1", "e2"]
    assert "has 5 extension directories: only the first 3 (by name) are read" in caplog.text
