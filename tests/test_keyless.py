"""A first run without a key: the quick start's first command replays examples/recording, a
read-only --cache folder of the example suite's model answers shipped with the repository
(cache.py: its entries are checked by the hashes its manifest lists, not by this install's seal).

The recording is made by playing the README's scripted models (tests/test_readme.py's responder)
through a real run of the quick start's suite: `python tests/test_keyless.py` remakes it when the
example suite, the example server's tools or the system prompt change (a test here says so)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic
from test_readme import responder

from claude_tool_evaluator.cache import seal_recording
from claude_tool_evaluator.modes.common import KEYLESS_COMMAND

RECORDING = ROOT / "examples" / "recording"
ABOUT = (
    "the example suite (examples/test_queries.csv) against the bundled example server, its model "
    "answers played by the project's scripted stand-in for the API (tests/test_readme.py): a "
    "recording that shows what a run writes, not how Claude does"
)


def keyless_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "COLUMNS": "200",
    }


def run_quick_start(folder: Path, env: dict[str, str], *more: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*KEYLESS_COMMAND.replace("python ", sys.executable + " ", 1).split(), *more],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def remake_recording() -> int:
    """Runs the quick start's suite against the scripted models into a fresh --cache folder and
    turns it into examples/recording."""
    with tempfile.TemporaryDirectory() as tmp, ScriptedAnthropic(responder=responder) as api:
        cache = Path(tmp) / "recording"
        env = keyless_env(Path(tmp))
        env.update(ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url)
        command = KEYLESS_COMMAND.replace("examples/recording", str(cache))
        done = subprocess.run(
            [sys.executable, *command.split()[1:], "-o", str(Path(tmp) / "r.json")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode in (0, 1), done.stderr
        count = seal_recording(cache, ABOUT)
        shutil.rmtree(RECORDING, ignore_errors=True)
        shutil.copytree(cache, RECORDING)
        return count


@pytest.fixture
def copy_without_key(tmp_path: Path) -> Path:
    """The repository's examples in a folder of their own, as a user's checkout has them."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy2(ROOT / "evaluator.py", tmp_path / "evaluator.py")
    (tmp_path / "home").mkdir()
    return tmp_path


def test_the_quick_start_replays_the_recording_without_a_key(copy_without_key):
    folder = copy_without_key
    env = keyless_env(folder / "home")
    env["PYTHONPATH"] = str(ROOT)
    done = run_quick_start(folder, env, "-o", "results.json", "--report", "report.md")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert done.stderr.count("replay: the model's answers come from the recording") == 1, (
        done.stderr
    )
    assert "has no answer for this request" not in done.stdout + done.stderr, (
        "the recording is stale: remake it with `python tests/test_keyless.py`"
    )
    results = json.loads((folder / "results.json").read_text())
    assert len(results["results"]) == 16 and not any(r.get("error") for r in results["results"])
    assert (folder / "report.md").read_text().startswith("#")
    assert "Results" in done.stdout or "passed" in done.stdout


def test_an_edited_recording_entry_is_refused_and_its_case_errs(copy_without_key):
    folder = copy_without_key
    entry = next(
        p
        for p in (folder / "examples" / "recording").rglob("*.json")
        if p.parent.name != "recording"
    )
    entry.write_text(entry.read_text() + " ")  # still the same JSON, no longer the same bytes
    env = keyless_env(folder / "home")
    env["PYTHONPATH"] = str(ROOT)
    done = run_quick_start(folder, env, "-o", "results.json")
    assert "not the file the recording's manifest lists" in done.stderr, done.stderr[-2000:]
    errors = [r["error"] for r in json.loads((folder / "results.json").read_text())["results"]]
    assert any("has no answer for this request" in (e or "") for e in errors), errors


def test_without_a_key_the_error_names_the_keyless_command_and_dry_run(tmp_path):
    env = keyless_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "evaluator.py", "--csv", "examples/test_queries.csv"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert KEYLESS_COMMAND in done.stderr and "--dry-run" in done.stderr


if __name__ == "__main__":
    print(f"examples/recording: {remake_recording()} answers")
