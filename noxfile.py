"""Developer tasks. `nox` runs tests, lint and typecheck, as CI does.

Each session installs one of the project's extras (pyproject.toml), where
the tools' versions are pinned: nothing here names a version.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = None  # the interpreter nox runs under (3.11+)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (real subprocess extensions, a real socket)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check style and formatting with ruff, and the layers with import-linter."""
    # The package itself too: import-linter reads the import graph of an
    # importable zotd.
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check with mypy (strict on zotd/)."""
    session.install("-e", ".[typecheck]")
    session.run("mypy")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks against the bare relay and the MCP SDK; prints a table (`-- --quick`)."""
    session.install("-e", ".[bench]")
    session.run("python", "benchmarks/bench.py", *session.posargs)


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """Fault-injection soak: prints lost/wrong replies and orphans (`-- --quick`)."""
    session.install("-e", ".[soak]")
    session.run("python", "soak/soak.py", *session.posargs)
