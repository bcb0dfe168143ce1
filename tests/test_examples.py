"""The shipped examples cover the jobs: every example plugin has an eval suite that loads as
Claude Code 2.1.332 reads it, and a folder of plugins is refused in one line that names them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

from claude_tool_evaluator.loaders.plugin_evals import load_plugin

EXAMPLE_PLUGINS = sorted(p for p in (ROOT / "examples" / "plugins").iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", EXAMPLE_PLUGINS, ids=lambda p: p.name)
def test_every_example_plugin_ships_a_suite(folder):
    plugin = load_plugin(folder)
    assert plugin.cases and all(case.graders for case in plugin.cases)


def test_a_folder_of_plugins_is_not_a_plugin():
    done = subprocess.run(
        [sys.executable, "evaluator.py", "plugin", "examples/plugins", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "not a plugin" in done.stderr
    assert "give one of the plugins in it: shop, warehouse-tools" in done.stderr
