"""Memory stays flat at any suite size (issue 23): after a `--summary-only` run, no record of a
case or a run is left alive, whatever the case count. Not timed, and not a measure of bytes (the
benchmarks measure peak RSS): it counts the live objects of every per-case and per-run type, in
the evaluator's own process, at two suite sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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

TYPES = set(json.loads(sys.argv[2]))
counts = {}

def count(moment):
    gc.collect()
    seen = collections.Counter(type(o).__name__ for o in gc.get_objects())
    counts[moment] = {name: seen.get(name, 0) for name in TYPES}

write_outputs = evaluator.write_outputs

def counted(*args, **kwargs):
    count("writers start")
    write_outputs(*args, **kwargs)
    count("writers done")

evaluator.write_outputs = counted
try:
    evaluator.main(sys.argv[3:])
except SystemExit as exc:
    counts["exit"] = exc.code
json.dump(counts, open(sys.argv[1], "w"))
"""


def live_objects(api: ScriptedAnthropic, folder: Path, cases: int) -> dict:
    suite = folder / f"suite{cases}.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools,expect_no_tools\n"
        + "".join(f"case_{i:05d},Say something about case {i},,true\n" for i in range(cases))
    )
    counts = folder / f"counts{cases}.json"
    env = dict(
        os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url, PYTHONPATH=str(ROOT)
    )
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(counts), json.dumps(PER_CASE_TYPES)]
        + ["--csv", str(suite), "--summary-only", "-o", str(folder / f"out{cases}.json")]
        + ["--concurrency", "16"],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(counts.read_text())
    lines = (folder / f"out{cases}.json.results.jsonl").read_text().splitlines()
    assert result["exit"] == 0 and len(lines) == cases  # every run happened, and was kept on disk
    return result


def test_no_per_case_object_outlives_its_case_whatever_the_suite_size(tmp_path: Path):
    with ScriptedAnthropic(record=False) as api:
        small = live_objects(api, tmp_path, 200)
        large = live_objects(api, tmp_path, 2000)
    document = json.loads((tmp_path / "out2000.json").read_text())
    assert document["summary"]["cases"] == 2000 and len(document["cases"]) == 2000
    for moment in ("writers start", "writers done"):
        grown = {
            name: (small[moment][name], large[moment][name])
            for name in PER_CASE_TYPES
            if large[moment][name] > small[moment][name]
        }
        assert grown == {}, f"{moment}: live objects grew with the case count: {grown}"
