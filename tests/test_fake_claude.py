"""A `claude` that misbehaves: hangs (with a child that would be orphaned), exits non-zero,
exits 0 without a `result` event, prints garbage, or fails after its result. Each run is
recorded as an error, never as "not activated"; the suite goes on; the exit code is 1 (a test
failed because its runs errored); and no process of the fake is left afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, Ran, spawn
from fake_anthropic import ScriptedAnthropic

SKILL = ROOT / "examples" / "skills" / "warehouse-sql"
POSITIVE = "Write a SQL query for weekly revenue per country"
NEGATIVE = "Tell me a joke"

# The fake answers `--version` (the evaluator checks the install first), then behaves as told.
PRELUDE = """#!/usr/bin/env python3
import json, os, subprocess, sys, time
if sys.argv[1:] == ["--version"]:
    print("9.9.9 (Fake Claude Code)")
    sys.exit(0)
query = sys.argv[sys.argv.index("-p") + 1]
def emit(event):
    print(json.dumps(event), flush=True)
INIT = {"type": "system", "subtype": "init", "tools": ["Skill", "Read"], "skills": ["warehouse-sql"],
        "slash_commands": ["warehouse-sql"], "model": "fake"}
SKILL_USE = {"type": "assistant", "parent_tool_use_id": None, "message": {"content": [
    {"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {"skill": "warehouse-sql"}}]}}
"""

BEHAVIOURS = {
    # Hangs, after starting a grandchild that carries the marker and would outlive a plain kill.
    "hang": """
emit(INIT)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "MARKER"])
time.sleep(300)
""",
    "exit3": """
sys.stderr.write("fatal: the fake claude broke on purpose\\n")
sys.exit(3)
""",
    # Starts well and activates the skill for SQL queries, then stops without a result event.
    "no_result": """
emit(INIT)
if "SQL" in query:
    emit(SKILL_USE)
sys.exit(0)
""",
    "garbage": """
print("this is not json")
print("{")
print("[1, 2, 3]")
print(json.dumps({"type": "assistant", "message": "not an object"}))
print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": 42}, "x"]}}))
print("[" * 5000 + "]" * 5000)
print("9" * 5000)
sys.stdout.flush()
os.write(1, bytes(range(256)) + b"\\n")
sys.exit(0)
""",
    # A complete, successful-looking run, and then a failing exit code.
    "fail_after_result": """
emit(INIT)
emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "ok"})
sys.exit(1)
""",
}


def fake_claude(folder: Path, behaviour: str, marker: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "claude"
    script.write_text(PRELUDE + BEHAVIOURS[behaviour].replace("MARKER", marker))
    script.chmod(0o755)
    return script


def leftovers(marker: str) -> list[str]:
    """Processes whose command line carries the marker (the fake's path or its grandchild's args)."""
    found = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,stat=,args="], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in found.splitlines()
        if marker in line and " Z" not in f" {line.split()[1]}" and "ps -eo" not in line
    ]


def assert_no_leftovers(marker: str) -> None:
    deadline = time.monotonic() + 5  # SIGKILLed processes need a moment to be reaped
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(marker) == []


@pytest.fixture(scope="module", autouse=True)
def live_api():
    global LIVE_API
    with ScriptedAnthropic() as LIVE_API:
        yield LIVE_API


LIVE_API: ScriptedAnthropic


def run_evaluator(
    tmp_path: Path, claude: Path | None, *extra: str, path_dirs: list[Path] = ()
) -> tuple[Ran, dict]:
    trigger = tmp_path / "trigger.md"
    trigger.write_text(
        f"---\nname: fake-trigger\ntype: trigger\n---\n\n# Positive Triggers\n\n- {POSITIVE}\n\n"
        f"# Negative Triggers\n\n- {NEGATIVE}\n"
    )
    out = tmp_path / "results.json"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # The fake claude never calls the API, but the evaluator checks the endpoint is alive first.
    env = {
        "PATH": os.pathsep.join([*map(str, path_dirs), os.environ["PATH"]]),
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-0123456789",
        "ANTHROPIC_BASE_URL": LIVE_API.url,
        "PYTHONPATH": str(ROOT),
    }
    args = [
        "--skill",
        str(SKILL),
        "--trigger",
        str(trigger),
        "--runs",
        "1",
        "--trigger-timeout",
        "2",
        "-o",
        str(out),
        *extra,
    ]
    if claude is not None:
        args += ["--claude-bin", str(claude)]
    done = spawn(*args, cwd=tmp_path, env=env, timeout=60)
    assert out.exists(), done.stderr + done.stdout
    return done, json.loads(out.read_text())


def assert_every_run_errored(done: Ran, document: dict) -> dict[str, dict]:
    """Both queries ran (the suite went on), each run is an error, exit code 1."""
    assert done.exit_code == 1, done.stderr + done.stdout
    runs = {r["query"]: r for r in document["results"]}
    assert set(runs) == {POSITIVE, NEGATIVE}
    assert all(r["error"] for r in runs.values()), runs
    [score] = document["trigger_scores"]
    verdicts = {q["query"]: q for q in score["queryResults"]}
    assert all(q["actual"] != "ignored" for q in verdicts.values()), verdicts  # never a silent miss
    return verdicts


@pytest.fixture
def marker() -> str:
    return f"FAKE-CLAUDE-{uuid.uuid4().hex[:12]}"


def test_hanging_claude_times_out_and_its_whole_group_is_killed(tmp_path: Path, marker: str):
    claude = fake_claude(tmp_path / marker, "hang", marker)
    start = time.monotonic()
    done, document = run_evaluator(tmp_path, claude)
    assert time.monotonic() - start < 30
    verdicts = assert_every_run_errored(done, document)
    assert all(q["actual"] == "error" and q["erroredRuns"] == 1 for q in verdicts.values())
    assert all(r["timed_out"] and "timed out after 2s" in r["error"] for r in document["results"])
    assert_no_leftovers(marker)


def test_claude_exiting_non_zero_is_an_error_with_its_stderr(tmp_path: Path, marker: str):
    claude = fake_claude(tmp_path / marker, "exit3", marker)
    done, document = run_evaluator(tmp_path, claude)
    verdicts = assert_every_run_errored(done, document)
    assert all(q["actual"] == "error" for q in verdicts.values())
    for run in document["results"]:
        assert run["exit_code"] == 3 and "claude exited with 3" in run["error"]
        assert "broke on purpose" in run["error"]
    assert_no_leftovers(marker)


def test_claude_found_on_path_is_used_and_failures_are_errors(tmp_path: Path, marker: str):
    fake_claude(tmp_path / marker, "exit3", marker)
    done, document = run_evaluator(tmp_path, None, path_dirs=[tmp_path / marker])
    assert "9.9.9 (Fake Claude Code)" in done.stdout + done.stderr
    assert_every_run_errored(done, document)
    assert_no_leftovers(marker)


def test_exit_zero_without_a_result_event_is_an_error(tmp_path: Path, marker: str):
    claude = fake_claude(tmp_path / marker, "no_result", marker)
    done, document = run_evaluator(tmp_path, claude)
    verdicts = assert_every_run_errored(done, document)
    for run in document["results"]:
        assert run["exit_code"] == 0 and "without a result event" in run["error"]
    # The activation seen before the output stopped still counts; the negative proves nothing.
    assert verdicts[POSITIVE]["actual"] == "activated"
    assert verdicts[NEGATIVE]["actual"] == "error" and verdicts[NEGATIVE]["erroredRuns"] == 1
    assert_no_leftovers(marker)


@pytest.mark.parametrize(
    "behaviour, reason",
    [
        ("garbage", "without a result event"),  # lines that are not stream-json
        ("fail_after_result", "claude exited with 1"),  # a result event, then a failing exit
    ],
)
def test_garbled_or_failing_runs_are_errors(
    tmp_path: Path, marker: str, behaviour: str, reason: str
):
    claude = fake_claude(tmp_path / marker, behaviour, marker)
    done, document = run_evaluator(tmp_path, claude)
    verdicts = assert_every_run_errored(done, document)
    assert all(q["actual"] == "error" for q in verdicts.values())
    assert all(reason in r["error"] for r in document["results"])
    assert_no_leftovers(marker)
