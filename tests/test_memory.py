"""Memory stays flat at any suite size (issue 23): after a `--summary-only` run, no record of a
case or a run is left alive, whatever the case count (a CSV suite, a model matrix, a QA file). Not timed, and not a measure of bytes (the
benchmarks measure peak RSS): it counts the live objects of every per-case and per-run type, in
the evaluator's own process, at two suite sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic

# Every type the evaluator makes one of (or more) per case or per run, on the way from the suite
# file to the writers.
PER_CASE_TYPES = (
    "TestCase",
    "Job",
    "Transcript",
    "ToolCall",
    "HistoryEntry",
    "Verdict",
    "Usage",
    "ToolRunResult",
    "VerdictRecord",
    "CaseResult",
    "CaseSummary",
    "QaRunRecord",
    "QaTaskRecord",
    "MatrixCaseRecord",
    "SkillTestRecord",
)

# Runs the command line in this process and counts the live objects of those types (after a
# full collection) at two moments: when the writers start (every run scored), and when they
# are done. write_outputs is wrapped to observe, nothing else is changed.
DRIVER = """
import collections, gc, json, sys
import evaluator
from claude_tool_evaluator.modes import tool_suites

TYPES = set(json.loads(sys.argv[2]))
counts = {}

def count(moment):
    gc.collect()
    seen = collections.Counter(type(o).__name__ for o in gc.get_objects())
    counts[moment] = {name: seen.get(name, 0) for name in TYPES}

write_outputs = tool_suites.write_outputs  # as the tool-use modes call it

def counted(*args, **kwargs):
    count("writers start")
    write_outputs(*args, **kwargs)
    count("writers done")

tool_suites.write_outputs = counted
try:
    evaluator.main(sys.argv[3:])
except SystemExit as exc:
    counts["exit"] = exc.code
json.dump(counts, open(sys.argv[1], "w"))
"""


def csv_suite(folder: Path, cases: int) -> list[str]:
    suite = folder / f"suite{cases}.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools,expect_no_tools\n"
        + "".join(f"case_{i:05d},Say something about case {i},,true\n" for i in range(cases))
    )
    return ["--csv", str(suite)]


def qa_suite(folder: Path, cases: int) -> list[str]:
    suite = folder / f"qa{cases}.xml"
    pairs = "".join(
        f"<qa_pair><question>What is {i} + 1?</question><answer>{i + 1}</answer></qa_pair>"
        for i in range(cases)
    )
    suite.write_text(f"<evaluation>{pairs}</evaluation>")
    return ["--qa", str(suite)]


def live_objects(
    api: ScriptedAnthropic, folder: Path, cases: int, suite: list[str], more: list[str]
) -> dict:
    counts = folder / f"counts{cases}.json"
    env = dict(
        os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url, PYTHONPATH=str(ROOT)
    )
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(counts), json.dumps(PER_CASE_TYPES), *suite, *more]
        + ["--summary-only", "-o", str(folder / f"out{cases}.json"), "--concurrency", "16"],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(counts.read_text())
    runs = cases * (more.count("--model") or 1)
    lines = (folder / f"out{cases}.json.results.jsonl").read_text().splitlines()
    assert result["exit"] in (0, 1) and len(lines) == runs  # every run happened, kept on disk
    return result


@pytest.mark.parametrize(
    "mode, sizes, suite, more",
    [
        ("csv", (200, 2000), csv_suite, []),
        ("model matrix", (100, 1000), csv_suite, ["--model", "claude-a", "--model", "claude-b"]),
        ("qa", (100, 1000), qa_suite, []),
    ],
)
def test_no_per_case_object_outlives_its_case_whatever_the_suite_size(
    tmp_path: Path, mode: str, sizes: tuple[int, int], suite: Callable, more: list[str]
):
    counted = {}
    with ScriptedAnthropic(record=False) as api:
        for cases in sizes:
            counted[cases] = live_objects(api, tmp_path, cases, suite(tmp_path, cases), more)
    small, large = counted[sizes[0]], counted[sizes[1]]
    document = json.loads((tmp_path / f"out{sizes[1]}.json").read_text())
    per_model = more.count("--model") or 1
    assert document["summary"]["cases"] == len(document["cases"]) == sizes[1] * per_model
    for moment in ("writers start", "writers done"):
        grown = {
            name: (small[moment][name], large[moment][name])
            for name in PER_CASE_TYPES
            if large[moment][name] > small[moment][name]
        }
        assert grown == {}, f"{mode}, {moment}: live objects grew with the case count: {grown}"
