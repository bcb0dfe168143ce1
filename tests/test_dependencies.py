"""Every import is declared in the extra that needs it: deptry (a well-kept checker that reads the
code's imports and the installed distributions' metadata, so an import that only a neighbour's
dependency brings shows as "transitive") over three parts of the checkout, each against what its
environment installs. A missing or misplaced declaration fails here, in the richest environment,
before a user's base install meets it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the programs an imported benchmark suite runs, in the benchmark's own environment
BENCHMARK_PROGRAMS = "claude_tool_evaluator/modes/programs"
_NOT_PRODUCT = ["tests", BENCHMARK_PROGRAMS, "action"]


def deptry(*args: str) -> tuple[int, str]:
    """deptry's exit code and its findings (colours off), run over this checkout with pyproject's
    [tool.deptry] and the given arguments."""
    done = subprocess.run(
        [sys.executable, "-m", "deptry", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    return done.returncode, re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def test_the_product_imports_only_its_base_dependencies():
    """The package, the front door and examples/ (run by a base install's users) against
    [project.dependencies] alone: the extras are development groups here, so importing one of
    their packages is a misplaced import (DEP004) and an undeclared one is missing or transitive."""
    code, found = deptry(
        ".",
        *(arg for part in _NOT_PRODUCT for arg in ("--extend-exclude", part)),
        "--optional-dependencies-dev-groups",
        "test,benchmarks",
    )
    assert code == 0, found


def test_the_tests_import_only_the_base_and_test_dependencies():
    """tests/ against the base plus `test`. AgentDojo (benchmarks) is read by the red team's
    tests only behind an ImportError guard that skips them outside CI."""
    code, found = deptry(
        "tests",
        "--optional-dependencies-dev-groups",
        "benchmarks",
        "--per-rule-ignores",
        "DEP004=agentdojo",
        "--ignore",
        "DEP002",  # the base's packages the tests leave to the product
    )
    assert code == 0, found


def test_the_benchmark_programs_import_only_declared_packages():
    """The programs an imported benchmark runs may use the benchmarks extra too."""
    code, found = deptry(BENCHMARK_PROGRAMS, "--ignore", "DEP002")
    assert code == 0, found


@pytest.mark.parametrize(
    "undeclared", ["import certifi\n", "def f():\n    import httpcore\n"], ids=["top", "nested"]
)
def test_an_undeclared_import_fails_the_check(tmp_path, undeclared):
    """The check can fail: a copy of the project file with a module importing a package only a
    neighbour brings (certifi, httpcore: installed, declared by nobody here)."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "claude_tool_evaluator").mkdir()
    (tmp_path / "claude_tool_evaluator" / "__init__.py").write_text(undeclared)
    done = subprocess.run(
        [sys.executable, "-m", "deptry", ".", "--optional-dependencies-dev-groups", "test"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 1 and "DEP003" in done.stdout + done.stderr, done.stdout
