"""The skills an extension ships (zotd/model/skills.py): entries, the scan, front matter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zotd.model import skills as sk
from zotd.model.skills import Skill, front_matter, kebab, plan, scan


def write_skill(path: Path, text: str) -> Path:
    """``path/SKILL.md`` holding ``text``."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(text)
    return path / "SKILL.md"


def scan_dir(directory: Path, *entries: str, name: str = "dev") -> tuple[list[Skill], list[str]]:
    return scan(directory, name, plan(directory, list(entries)))


# --- names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("developer", "developer"),
        ("hello-py", "hello-py"),
        ("my_tools", "my-tools"),
        ("MyTools", "my-tools"),
        ("zot.Review2", "zot-review2"),
        ("__x__", "x"),
        ("HTTPServer", "httpserver"),
    ],
)
def test_kebab(name: str, expected: str) -> None:
    assert kebab(name) == expected


# --- front matter ---------------------------------------------------------------


def test_front_matter_plain() -> None:
    text = "---\nname: commit\ndescription: Write a good commit message.\n---\n# Commit\n"
    assert front_matter(text) == {"name": "commit", "description": "Write a good commit message."}


def test_front_matter_quoted_values() -> None:
    text = (
        "---\n"
        "name: 'it''s'\n"
        'description: "a \\"quoted\\" value: with a colon # not a comment"\n'
        "---\n"
    )
    assert front_matter(text) == {
        "name": "it's",
        "description": 'a "quoted" value: with a colon # not a comment',
    }


def test_front_matter_comments_and_unknown_lines() -> None:
    text = "---\n# a comment\nname: x # trailing comment\n- a list item\nlicense: MIT\n---\n"
    assert front_matter(text) == {"name": "x", "license": "MIT"}


def test_front_matter_blocks_and_continuations() -> None:
    text = (
        "---\n"
        "description: >\n"
        "  Folded over\n"
        "  two lines.\n"
        "usage: |\n"
        "  line one\n"
        "  line two\n"
        "summary: starts here\n"
        "  and goes on\n"
        "---\n"
    )
    assert front_matter(text) == {
        "description": "Folded over two lines.",
        "usage": "line one\nline two",
        "summary": "starts here and goes on",
    }


def test_no_front_matter() -> None:
    assert front_matter("# Commit\nname: not front matter\n") == {}
    assert front_matter("") == {}
    assert front_matter("\n---\nname: x\n---\n") == {}  # not at the top


def test_front_matter_without_its_closing_line() -> None:
    assert front_matter("---\nname: x\ndescription: d") == {"name": "x", "description": "d"}


def test_front_matter_first_value_wins_and_the_body_is_not_read() -> None:
    text = "---\nname: a\nname: b\n---\ndescription: in the body\n"
    assert front_matter(text) == {"name": "a"}


def test_front_matter_byte_order_mark_and_crlf() -> None:
    assert front_matter("\ufeff---\r\nname: x\r\n---\r\n") == {"name": "x"}


def test_front_matter_an_unclosed_quote_keeps_the_rest() -> None:
    assert front_matter('---\ndescription: "no end\n---\n') == {"description": "no end"}


def test_front_matter_empty_value() -> None:
    assert front_matter("---\nname:\ndescription:   \n---\n") == {"name": "", "description": ""}


# --- the scan -------------------------------------------------------------------


def test_scan_finds_nested_skills_with_names_and_descriptions(tmp_path: Path) -> None:
    a = write_skill(tmp_path / "skills" / "commit", "---\ndescription: Commit it.\n---\n")
    b = write_skill(tmp_path / "skills" / "git" / "rebase", "---\nname: rb\n---\nbody\n")
    c = write_skill(tmp_path / "skills" / "plain", "no front matter\n")
    found, warnings = scan_dir(tmp_path, "skills")
    assert warnings == []
    assert found == [
        Skill("dev:commit", str(a), "Commit it."),
        Skill("dev:plain", str(c), ""),
        Skill("dev:rb", str(b), ""),
    ]


def test_a_listed_skill_file_and_the_prefix_in_kebab_case(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "one", "---\nname: only\n---\n")
    found, _ = scan_dir(tmp_path, "one/SKILL.md", name="My_Tools")
    assert found == [Skill("my-tools:only", str(path), "")]


def test_a_skill_directory_is_not_searched_further(tmp_path: Path) -> None:
    write_skill(tmp_path / "s" / "outer", "---\nname: outer\n---\n")
    write_skill(tmp_path / "s" / "outer" / "templates" / "inner", "---\nname: inner\n---\n")
    found, _ = scan_dir(tmp_path, "s")
    assert [s.name for s in found] == ["dev:outer"]


def test_hidden_directories_are_skipped(tmp_path: Path) -> None:
    write_skill(tmp_path / "s" / ".git" / "x", "")
    write_skill(tmp_path / "s" / "seen", "")
    assert [s.name for s in scan_dir(tmp_path, "s")[0]] == ["dev:seen"]


def test_a_fifo_named_skill_md_is_skipped_unopened(tmp_path: Path) -> None:
    (tmp_path / "s" / "trap").mkdir(parents=True)
    os.mkfifo(tmp_path / "s" / "trap" / "SKILL.md")
    write_skill(tmp_path / "s" / "good", "")
    found, warnings = scan_dir(tmp_path, "s")  # returns: a FIFO opened would block
    assert [s.name for s in found] == ["dev:good"]
    assert warnings == ["skills: s/trap/SKILL.md: it is a FIFO, not a regular file (skipped)"]


def test_a_skill_md_linking_out_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\ndescription: private\n---\n")
    ext = tmp_path / "ext"
    (ext / "s" / "leak").mkdir(parents=True)
    (ext / "s" / "leak" / "SKILL.md").symlink_to(secret)
    found, warnings = scan_dir(ext, "s")
    assert found == []
    assert warnings == [
        f"skills: s/leak/SKILL.md leads outside the extension's directory, to {secret} (skipped)"
    ]


def test_a_skill_md_linking_inside_is_read(tmp_path: Path) -> None:
    write_skill(tmp_path / "real", "---\ndescription: shared\n---\n")
    (tmp_path / "s" / "alias").mkdir(parents=True)
    (tmp_path / "s" / "alias" / "SKILL.md").symlink_to(tmp_path / "real" / "SKILL.md")
    found, warnings = scan_dir(tmp_path, "s")
    assert (warnings, [(s.name, s.description) for s in found]) == ([], [("dev:alias", "shared")])


def test_a_linked_directory_is_not_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_skill(outside / "stolen", "")
    (tmp_path / "ext" / "s").mkdir(parents=True)
    (tmp_path / "ext" / "s" / "elsewhere").symlink_to(outside)
    (tmp_path / "ext" / "s" / "loop").symlink_to(tmp_path / "ext" / "s")
    assert scan_dir(tmp_path / "ext", "s") == ([], [])


def test_a_skill_md_over_the_size_cap_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sk, "MAX_SKILL_BYTES", 100)
    write_skill(tmp_path / "s" / "big", "x" * 101)
    found, warnings = scan_dir(tmp_path, "s")
    assert found == []
    assert warnings == ["skills: s/big/SKILL.md: it is larger than 100 bytes (skipped)"]


def test_only_the_head_is_read_for_the_front_matter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sk, "FRONT_MATTER_BYTES", 30)
    write_skill(tmp_path / "s" / "long", "---\nname: long\n" + "description: cut here\n---\n")
    [skill], _ = scan_dir(tmp_path, "s")
    assert (skill.name, skill.description) == ("dev:long", "cu")


def test_at_most_max_skills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sk, "MAX_SKILLS", 3)
    for i in range(5):
        write_skill(tmp_path / "s" / f"k{i}", "")
    found, warnings = scan_dir(tmp_path, "s")
    assert [s.name for s in found] == ["dev:k0", "dev:k1", "dev:k2"]
    assert warnings == ["skills: more than 3 skills: the rest are left out"]


def test_at_most_max_visited_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sk, "MAX_VISITED", 10)
    for i in range(11):
        (tmp_path / "s" / f"d{i}").mkdir(parents=True)
    found, warnings = scan_dir(tmp_path, "s")
    assert found == []
    assert warnings == ["skills: more than 10 entries: the rest are not searched"]


def test_at_most_max_depth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sk, "MAX_DEPTH", 2)
    write_skill(tmp_path / "s" / "a" / "shallow", "")
    write_skill(tmp_path / "s" / "a" / "b" / "c" / "deep", "")
    found, warnings = scan_dir(tmp_path, "s")
    assert [s.name for s in found] == ["dev:shallow"]
    assert warnings == ["skills: s/a/b is more than 2 levels deep (not searched)"]


def test_an_invalid_name_falls_back_to_the_directory(tmp_path: Path) -> None:
    write_skill(tmp_path / "s" / "commit", "---\nname: Commit it now\n---\n")
    found, warnings = scan_dir(tmp_path, "s")
    assert [s.name for s in found] == ["dev:commit"]
    assert warnings == [
        "skills: s/commit/SKILL.md: invalid name 'Commit it now': served as 'commit'"
    ]


def test_a_skill_with_no_valid_name_is_skipped(tmp_path: Path) -> None:
    write_skill(tmp_path / "s" / "bad dir", "")
    found, warnings = scan_dir(tmp_path, "s")
    assert found == []
    assert warnings == ["skills: s/bad dir/SKILL.md: invalid skill name 'bad dir' (skipped)"]


def test_a_second_skill_of_one_name_is_skipped(tmp_path: Path) -> None:
    write_skill(tmp_path / "s" / "a", "---\nname: same\n---\n")
    write_skill(tmp_path / "s" / "b", "---\nname: same\n---\n")
    found, warnings = scan_dir(tmp_path, "s")
    assert [s.path for s in found] == [str(tmp_path / "s" / "a" / "SKILL.md")]
    assert warnings == ["skills: s/b/SKILL.md: a second skill named 'same' (skipped)"]


def test_a_long_description_is_cut(tmp_path: Path) -> None:
    write_skill(tmp_path / "s" / "long", "---\ndescription: " + "y" * 5000 + "\n---\n")
    [skill], _ = scan_dir(tmp_path, "s")
    assert len(skill.description) == sk.MAX_DESCRIPTION and skill.description.endswith("...")


def test_too_many_entries(tmp_path: Path) -> None:
    with pytest.raises(sk.SkillsError, match="at most 64"):
        plan(tmp_path, ["."] * 65)
