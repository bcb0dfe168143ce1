"""The shipped examples cover the jobs: every example plugin has an eval suite that loads as
Claude Code 2.1.332 reads it, and a folder of plugins is refused in one line that names them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic

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


FASTMCP_SERVER = """from mcp.server.fastmcp import FastMCP

mcp = FastMCP("tutorial")

if __name__ == "__main__":
    mcp.run()
"""


@pytest.mark.parametrize("how", ["--server", "--server-module"])
def test_a_server_on_the_fastmcp_import_fails_with_its_traceback_as_lines_and_a_hint(tmp_path, how):
    server = tmp_path / "tutorial_server.py"
    server.write_text(FASTMCP_SERVER)
    named = f"{sys.executable} {server}" if how == "--server" else str(server)
    with ScriptedAnthropic() as api:
        done = subprocess.run(
            [sys.executable, "evaluator.py", how, named, "-q", "hi"],
            cwd=ROOT,
            env={**os.environ, "ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": api.url},
            capture_output=True,
            text=True,
            timeout=120,
        )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and lines[0].startswith("error: "), done.stderr
    assert "from mcp.server.mcpserver import MCPServer" in lines[0]
    assert "warehouse-tools/server.py" in lines[0]
    assert len(lines) == 1, "one error line: the server's stderr tail quoted in it, escaped"
    if how == "--server":
        assert "Traceback" in lines[0], lines
