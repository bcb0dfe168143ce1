"""The code stays formatted, lint-clean and type-clean: `ruff format --check`, `ruff check` and
`mypy` (configured in pyproject.toml) each exit 0 from the repository root, run by this
interpreter. Skipped only where the tool is not installed (both are in the `test` extras)."""

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
        ["ruff", "format", "--check", "."],
        marks=pytest.mark.skipif(not installed("ruff"), reason="ruff is not installed"),
        id="ruff-format",
    ),
    pytest.param(
        ["ruff", "check", "."],
        marks=pytest.mark.skipif(not installed("ruff"), reason="ruff is not installed"),
        id="ruff-check",
    ),
    pytest.param(
        ["mypy"],
        marks=pytest.mark.skipif(not installed("mypy"), reason="mypy is not installed"),
        id="mypy",
    ),
]


@pytest.mark.parametrize("command", CHECKS)
def test_tool_passes(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"`{' '.join(command)}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
    )
