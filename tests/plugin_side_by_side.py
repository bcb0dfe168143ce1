"""One shared run set for the plugin's reports: the fixture plugin tests/plugins/greeter run by
`plugin` (every report: -o, --report, --html, --junit, --pr-comment, the step summary) and by
`claude plugin eval` (--json and its HTML --report) against the same scripted server
(`plugin_claude_code`, whose outcomes tests/test_plugin_evals.py's docstring computes by hand).
conftest's session fixture `greeter_side_by_side` makes it once; the report tests and the browser
test read it."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fake_anthropic import ScriptedAnthropic, plugin_claude_code

GREETER = Path(__file__).resolve().parent / "plugins" / "greeter"


def claude_code_env(api_url: str, api_key: str, home: Path) -> dict[str, str]:
    """The environment a test's `claude -p` / `claude plugin eval` runs in: this process's, less
    every ANTHROPIC_*/CLAUDE_* variable, pointed at the scripted server, with a HOME of its own
    and no telemetry or other traffic."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))},
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": api_key,
        "HOME": str(home),
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


@dataclass
class SideBySide:
    folder: Path
    ours_exit: int
    ours_stdout: str
    theirs_stdout: str

    def read(self, name: str) -> str:
        return (self.folder / name).read_text(encoding="utf-8")

    @property
    def ours(self) -> dict:
        return json.loads(self.read("ours.json"))

    @property
    def theirs(self) -> dict:
        return json.loads(self.read("cc.json"))


def run_side_by_side(
    folder: Path, evaluator: Path, claude: str, api_key: str, python: str
) -> SideBySide:
    """Both runs, one after the other, on one scripted server."""
    home = folder / "cc-home"
    home.mkdir(parents=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        ours = subprocess.run(
            [
                python,
                str(evaluator),
                "plugin",
                str(GREETER),
                "--base-url",
                api.url,
                *("-o", str(folder / "ours.json"), "--report", str(folder / "ours.md")),
                *("--html", str(folder / "ours.html"), "--junit", str(folder / "ours.xml")),
                *("--pr-comment", str(folder / "comment.md")),
            ],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={
                **clean,
                "ANTHROPIC_API_KEY": api_key,
                "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
            },
            timeout=900,
        )
        theirs = subprocess.run(
            [
                claude,
                "plugin",
                "eval",
                str(GREETER),
                *("--json", str(folder / "cc.json"), "--report", str(folder / "cc.html")),
                *("--trust-plugin", "--no-publish", "--output-dir", str(folder / "cc-out")),
            ],
            capture_output=True,
            text=True,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            env=claude_code_env(api.url, api_key, home),
            timeout=900,
        )
    assert (folder / "ours.json").is_file(), ours.stdout + ours.stderr
    assert (folder / "cc.json").is_file(), theirs.stdout + theirs.stderr
    return SideBySide(folder, ours.returncode, ours.stdout, theirs.stdout + theirs.stderr)
