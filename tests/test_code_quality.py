"""The code stays formatted, lint-clean, type-clean and layered: `ruff format --check`, `ruff
check`, `mypy` and `lint-imports` (import-linter: the rooms' imports flow one way, so no import
cycle can form) each exit 0 from the repository root, configured in pyproject.toml and run by
this interpreter. Skipped only where the tool is not installed (all are in the `test` extras)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


CHECKS = [
    pytest.param(
        ["-m", "ruff", "format", "--check", "."],
        marks=pytest.mark.skipif(not installed("ruff"), reason="ruff is not installed"),
        id="ruff-format",
    ),
    pytest.param(
        ["-m", "ruff", "check", "."],
        marks=pytest.mark.skipif(not installed("ruff"), reason="ruff is not installed"),
        id="ruff-check",
    ),
    pytest.param(
        ["-m", "mypy"],
        marks=pytest.mark.skipif(not installed("mypy"), reason="mypy is not installed"),
        id="mypy",
    ),
    pytest.param(  # lint-imports, by this interpreter
        ["-c", "from importlinter.cli import lint_imports_command as c; c()", "--no-cache"],
        marks=pytest.mark.skipif(
            not installed("importlinter"), reason="import-linter is not installed"
        ),
        id="import-linter",
    ),
]


@pytest.mark.parametrize("command", CHECKS)
def test_tool_passes(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"`{' '.join(command)}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
    )
