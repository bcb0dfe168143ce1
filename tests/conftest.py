"""Shared fixtures: the scripted Anthropic-compatible server, the example server, a clean env."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
for path in (str(ROOT), str(TESTS)):
    if path not in sys.path:
        sys.path.insert(0, path)

import evaluator  # noqa: E402
from fake_anthropic import ScriptedAnthropic  # noqa: E402

EXAMPLE_SERVER = ROOT / "examples" / "profiles_server.py"
TEST_API_KEY = "sk-ant-test-key-0123456789"


def locate_claude() -> str | None:
    """The real Claude Code CLI: $CLAUDE_BIN, else what `npm install` put in node_modules or PATH."""
    try:
        return evaluator.find_claude_bin(os.environ.get("CLAUDE_BIN"))
    except evaluator.InputError:
        return None


CLAUDE = locate_claude()
if CLAUDE is None and os.environ.get("CI"):
    raise RuntimeError("the Claude Code CLI is required in CI: run `npm install` at the repository root")
needs_claude = pytest.mark.skipif(CLAUDE is None, reason="the Claude Code CLI (claude) is not installed: "
                                                         "run `npm install` at the repository root")


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch):
    """A scripted Anthropic API on 127.0.0.1; the environment points the SDK at it."""
    with ScriptedAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@pytest.fixture
def no_api_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)


def example_server_command() -> str:
    return f"{sys.executable} {EXAMPLE_SERVER}"
