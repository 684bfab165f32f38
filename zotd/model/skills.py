"""The skills an extension ships: its manifest's ``skills`` (current zot).

``skills`` is a list of paths relative to the manifest: directories, scanned
for ``SKILL.md`` files, or ``SKILL.md`` files themselves. Each ``SKILL.md``
is one skill, served to agents as ``<kebab-case extension name>:<skill>``
(``developer:commit``), with the ``name`` and ``description`` of its front
matter (the skill's name defaults to its directory's).

Two steps, both plain blocking code that discovery runs in its worker thread:

- :func:`plan` checks the entries: an entry that leads outside the
  extension's directory (absolute, ``..``, or a link out), that does not
  exist, or that is neither a directory nor a file named ``SKILL.md``, is
  a :class:`SkillsError` (the manifest's error).
- :func:`scan` finds and reads the skills. A cloned repository may have
  planted anything, so: directories are walked without following links
  (a directory that is a link, or whose name starts with ``.``, is not
  entered), a ``SKILL.md`` that is a
  link is read only if it leads to a file inside the extension's
  directory, files are read through :mod:`.safe_files` (regular files only,
  never blocking, size-capped), and the walk stops at
  :data:`MAX_VISITED` entries, :data:`MAX_DEPTH` levels and
  :data:`MAX_SKILLS` skills. What is skipped gets a warning (shown in
  ``list_extensions``); the rest are served.

A directory holding a ``SKILL.md`` is one skill: what is below it (its
resources) is not searched for more.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

import msgspec

from .safe_files import FileRefused, open_regular

SKILL_FILE = "SKILL.md"

#: The most ``skills`` entries a manifest may list.
MAX_ENTRIES = 64
#: The most skills one extension serves; more are left out, with a warning.
MAX_SKILLS = 256
#: The most directory entries looked at while scanning one extension.
MAX_VISITED = 10_000
#: How deep below a ``skills`` directory the scan goes.
MAX_DEPTH = 16
#: The largest ``SKILL.md`` read.
MAX_SKILL_BYTES = 1024 * 1024
#: How much of a ``SKILL.md`` is read for its front matter.
FRONT_MATTER_BYTES = 64 * 1024
#: The longest description served (longer ones are cut, with "...").
MAX_DESCRIPTION = 4096

# The patterns are compiled on first use (``re``'s own cache), not at the
# daemon's start: most extensions serve no skills.

#: A skill's own name: as an extension's (letters, digits, ``.``, ``_``, ``-``).
_SKILL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
#: A ``key: value`` line of front matter, at its top level.
_KEY = r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*))?$"


class SkillsError(Exception):
    """A ``skills`` entry that cannot be used; the message says why."""


class Skill(msgspec.Struct, frozen=True):
    """One skill an extension serves.

    Attributes:
        name: ``<kebab-case extension name>:<skill name>``.
        path: its ``SKILL.md``, absolute (inside the extension's directory).
        description: from its front matter ("" if none).
    """

    name: str
    path: str
    description: str


class Source(msgspec.Struct, frozen=True):
    """One checked ``skills`` entry: a directory to scan, or one ``SKILL.md``."""

    entry: str
    path: Path
    is_dir: bool


def kebab(name: str) -> str:
    """``name`` in kebab-case, as zot prefixes skills with it:
    ``MyTools_v2`` -> ``my-tools-v2``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name)
    return re.sub(r"[^a-z0-9]+", "-", spaced.lower()).strip("-") or name.lower()


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a file"


def plan(directory: Path, entries: Sequence[str]) -> list[Source]:
    """The manifest's ``skills`` entries, checked (see the module).

    Raises:
        SkillsError: an entry outside ``directory``, missing, or neither a
            directory nor a ``SKILL.md``; or too many entries.
    """
    if len(entries) > MAX_ENTRIES:
        raise SkillsError(f"`skills` lists {len(entries)} paths: at most {MAX_ENTRIES}")
    root = os.path.realpath(directory)
    sources = []
    for entry in entries:
        if not entry.strip() or "\0" in entry:
            raise SkillsError(f"`skills` entry {entry!r} is not a path")
        if os.path.isabs(entry):
            raise SkillsError(
                f"`skills` entry {entry!r} is outside the extension's directory "
                "(an absolute path; give one relative to extension.json)"
            )
        path = directory / entry
        real = os.path.realpath(path)
        if not _inside(real, root):
            raise SkillsError(
                f"`skills` entry {entry!r} is outside the extension's directory "
                f"(it leads to {real})"
            )
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise SkillsError(f"`skills` entry {entry!r} does not exist (no {path})") from None
        except OSError as exc:
            raise SkillsError(f"`skills` entry {entry!r}: {exc.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            sources.append(Source(entry, path, is_dir=True))
        elif stat.S_ISREG(st.st_mode) and path.name == SKILL_FILE:
            sources.append(Source(entry, path, is_dir=False))
        else:
            raise SkillsError(
                f"`skills` entry {entry!r} is neither a directory nor a {SKILL_FILE} file "
                f"(it is {_kind(st.st_mode)})"
            )
    return sources


class _Scan:
    """One extension's scan: the skills found so far, the warnings, the bounds."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.root = os.path.realpath(directory)
        self.prefix = prefix
        self.skills: dict[str, Skill] = {}
        self.warnings: list[str] = []
        self.visited = 0
        self.full = False

    def rel(self, path: Path) -> str:
        return os.path.relpath(path, self.directory)

    def warn(self, message: str) -> None:
        self.warnings.append(f"skills: {message}")

    def walk(self, top: Path) -> None:
        stack = [(top, 0)]
        while stack and not self.full:
            here, depth = stack.pop()
            subdirs: list[Path] = []
            try:
                with os.scandir(here) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                self.warn(f"cannot list {self.rel(here)}: {exc.strerror} (skipped)")
                continue
            if self.visited + len(entries) > MAX_VISITED:
                self.warn(f"more than {MAX_VISITED} entries: the rest are not searched")
                self.full = True
                return
            self.visited += len(entries)
            if any(e.name == SKILL_FILE for e in entries):
                self.read(here / SKILL_FILE)  # a skill: its own files are not searched
                continue
            for e in entries:
                try:
                    if not e.name.startswith(".") and e.is_dir(follow_symlinks=False):
                        subdirs.append(Path(e.path))
                except OSError:
                    continue
            if subdirs and depth >= MAX_DEPTH:
                self.warn(f"{self.rel(here)} is more than {MAX_DEPTH} levels deep (not searched)")
                continue
            stack.extend((d, depth + 1) for d in reversed(subdirs))

    def read(self, path: Path) -> None:
        """Reads one ``SKILL.md`` (in the extension's directory) into a skill."""
        if len(self.skills) >= MAX_SKILLS:
            self.warn(f"more than {MAX_SKILLS} skills: the rest are left out")
            self.full = True
            return
        rel = self.rel(path)
        real = os.path.realpath(path)
        if not _inside(real, self.root):
            self.warn(f"{rel} leads outside the extension's directory, to {real} (skipped)")
            return
        try:
            head = read_head(real, MAX_SKILL_BYTES, FRONT_MATTER_BYTES)
        except FileRefused as exc:
            self.warn(f"{rel}: {exc} (skipped)")
            return
        except OSError as exc:
            self.warn(f"{rel}: {exc.strerror} (skipped)")
            return
        fields = front_matter(head.decode("utf-8", "replace"))
        own = fields.get("name", "").strip()
        name = own or path.parent.name
        if not re.fullmatch(_SKILL_NAME, name):
            fallback = path.parent.name
            if own and re.fullmatch(_SKILL_NAME, fallback):
                self.warn(f"{rel}: invalid name {own!r}: served as {fallback!r}")
                name = fallback
            else:
                self.warn(f"{rel}: invalid skill name {name!r} (skipped)")
                return
        full = f"{self.prefix}:{name}"
        if full in self.skills:
            self.warn(f"{rel}: a second skill named {name!r} (skipped)")
            return
        description = " ".join(fields.get("description", "").split("\n")).strip()
        if len(description) > MAX_DESCRIPTION:
            description = description[: MAX_DESCRIPTION - 3] + "..."
        self.skills[full] = Skill(full, str(path), description)


def scan(
    directory: Path, extension: str, sources: Sequence[Source]
) -> tuple[list[Skill], list[str]]:
    """The skills of ``sources`` (from :func:`plan`), by name, and a warning
    for each ``SKILL.md`` or directory skipped (see the module)."""
    directory = directory.absolute()
    state = _Scan(directory, kebab(extension))
    for source in sources:
        if state.full:
            break
        if source.is_dir:
            state.walk(directory / source.entry)
        else:
            state.read(directory / source.entry)
    return sorted(state.skills.values(), key=lambda s: s.name), state.warnings


def read_head(path: str, limit: int, head: int) -> bytes:
    """The first ``head`` bytes of a regular file of at most ``limit`` bytes
    (opened as :func:`~.safe_files.open_regular` opens it: nothing blocks).

    Raises:
        FileRefused: not a regular file, or larger than ``limit``.
        OSError: it cannot be read.
    """
    fd = open_regular(path, limit, follow_symlinks=False)
    try:
        chunks: list[bytes] = []
        got = 0
        while got < head:
            chunk = os.read(fd, head - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def front_matter(text: str) -> dict[str, str]:
    """The ``key: value`` pairs of a ``---`` block at the top of ``text``.

    The simple subset of YAML that skills use: plain, single- and
    double-quoted values, ``|`` and ``>`` blocks and indented continuation
    lines, ``#`` comments. No block (the text does not start with ``---``):
    nothing. No closing ``---``: the block runs to the end of ``text``. A
    key given twice keeps its first value; anything else is ignored.
    """
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        return {}
    fields: dict[str, str] = {}
    i = 1
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.rstrip() in ("---", "..."):
            break
        match = re.match(_KEY, line)
        if match is None:
            continue
        key, raw = match.group(1), (match.group(2) or "").strip()
        more: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
            if lines[i].rstrip() in ("---", "..."):
                break
            more.append(lines[i])
            i += 1
        if key not in fields:
            fields[key] = _value(raw, more)
    return fields


def _value(raw: str, more: list[str]) -> str:
    """A front matter value: its first line ``raw`` and its indented continuation."""
    rest = [m.strip() for m in more]
    while rest and not rest[-1]:
        rest.pop()
    if raw[:1] in ("|", ">"):
        if raw[:1] == "|":
            return "\n".join(rest)
        return _fold(rest)
    if raw[:1] in ('"', "'"):
        return _quoted(" ".join([raw, *rest]) if rest else raw)
    plain = re.sub(r"\s+#.*$", "", raw) if not raw.startswith("#") else ""
    return _fold([plain, *rest]) if rest else plain


def _fold(lines: list[str]) -> str:
    """Lines folded as YAML folds them: one space between, a blank line is a newline."""
    out: list[str] = []
    para: list[str] = []
    for line in lines:
        if line:
            para.append(line)
        else:
            out.append(" ".join(para))
            para = []
    out.append(" ".join(para))
    return "\n".join(p for p in out if p).strip()


def _quoted(text: str) -> str:
    """A quoted value: up to its closing quote (``''`` in single quotes is
    one; ``\\"``, ``\\\\``, ``\\n`` and ``\\t`` in double quotes), or the whole
    text if it does not close."""
    quote = text[0]
    out: list[str] = []
    i = 1
    while i < len(text):
        c = text[i]
        if quote == "'" and c == "'":
            if text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out)
        if quote == '"' and c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
            continue
        if quote == '"' and c == '"':
            return "".join(out)
        out.append(c)
        i += 1
    return "".join(out)
