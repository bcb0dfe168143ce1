"""Cost controls: --dry-run (no model call, token counting) and --max-cost (stop starting)."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLE_SERVER, ROOT
from fake_anthropic import reply, text

import test_constants as C
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.pipeline import Job
from claude_tool_evaluator.run_types import RunSettings, estimated_tokens
from claude_tool_evaluator.runners.tool_use import estimate_tool_runs

SUITE = str(ROOT / "examples" / "test_queries.csv")


def test_dry_run_counts_tokens_and_estimates_without_calling_the_model(cli, api):
    code, out, err = cli(
        "--csv", SUITE, "--server-module", str(EXAMPLE_SERVER), "--dry-run", "-i", "2"
    )
    assert code == 0, err
    assert api.message_requests == []
    counted = [r for r in api.requests if r["path"] == "/v1/messages/count_tokens"]
    assert len(counted) == 1 and len(counted[0]["body"]["tools"]) == 9
    assert "runs: 32 · tools: 9" in out and "counted by the API" in out
    assert "model calls: about 64 (at most 320)" in out
    assert "cost on claude-sonnet-5-5: about $" in out


def test_dry_run_needs_no_api_key_and_still_checks_the_suite(cli, no_api_key, tmp_path):
    code, out, err = cli("-q", "hi", "--server-module", str(EXAMPLE_SERVER), "--dry-run")
    assert code == 0 and "estimated locally" in out and "model calls: about 2 (at most 10" in out
    bad = tmp_path / "bad.csv"
    bad.write_text("test_name,user_prompt,expected_tools\na,hi,no_such_tool\n")
    code, out, err = cli("--csv", str(bad), "--server-module", str(EXAMPLE_SERVER), "--dry-run")
    assert code == 2 and "no_such_tool" in err


def test_estimate_arithmetic():
    case = run_types.TestCase("c", "x" * 40, expected_tools=["a", "b"])
    jobs = [Job(("c", i, "h"), (case, i)) for i in (1, 2)]
    settings = RunSettings(model="claude-haiku-5-5", max_turns=4)
    estimate = estimate_tool_runs(jobs, settings, prefix_tokens=1000, counted=False, tool_count=2)
    assert (estimate.runs, estimate.calls_expected, estimate.calls_max) == (2, 6, 8)
    price = C.PRICES["claude-haiku"]
    prompt = estimated_tokens("x" * 40)

    def call(turn: int, first: bool) -> float:
        return (
            (prompt + turn * C.ESTIMATED_TOKENS_PER_TURN) * price["input"]
            + C.ESTIMATED_OUTPUT_TOKENS * price["output"]
            + 1000 * (price["cache_write"] if first else price["cache_read"])
        ) / 1e6

    expected = (
        call(0, True) + call(1, False) + call(2, False) + sum(call(t, False) for t in range(3))
    )
    assert abs(estimate.cost_expected - expected) < 1e-12


def test_max_cost_stops_starting_new_cases_and_resume_finishes(cli, api, tmp_path):
    api.responder = lambda body: reply(text("fine"))
    suite = tmp_path / "s.csv"
    suite.write_text("test_name,user_prompt\n" + "".join(f"c{i},prompt {i}\n" for i in range(6)))
    out = tmp_path / "out.json"
    args = [
        "--csv",
        str(suite),
        "--server-module",
        str(EXAMPLE_SERVER),
        "--concurrency",
        "1",
        "-o",
        str(out),
    ]
    code, stdout, stderr = cli(*args, "--max-cost", "0.000001")
    assert code == 1
    assert (
        "stopped at --max-cost $1e-06: 5 run(s) not started; rerun with --resume to do them"
        in stdout
    )
    assert [r["test_name"] for r in json.loads(out.read_text())["results"]] == ["c0"]
    assert len(api.message_requests) == 1
    code, stdout, stderr = cli(*args, "--resume")
    assert code == 0
    assert [r["test_name"] for r in json.loads(out.read_text())["results"]] == [
        f"c{i}" for i in range(6)
    ]
    assert len(api.message_requests) == 6


def test_summary_only_streams_full_results_to_a_lines_file(cli, api, tmp_path):
    api.responder = lambda body: (
        reply(text("done"))
        if len(body["messages"]) > 1
        else reply(__import__("fake_anthropic").tool_use("about_profiles"))
    )
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools\n"
        + "".join(f"c{i},p{i},about_profiles\n" for i in range(60))
    )
    out = tmp_path / "out.json"
    code, stdout, stderr = cli(
        "--csv",
        str(suite),
        "--server-module",
        str(EXAMPLE_SERVER),
        "-o",
        str(out),
        "--summary-only",
        "--concurrency",
        "8",
    )
    assert code == 0, stderr
    document = json.loads(out.read_text())
    assert (
        document["results"] == []
        and document["summary"]["passed"] == 60
        and len(document["cases"]) == 60
    )
    lines = [
        json.loads(line) for line in (tmp_path / "out.json.results.jsonl").read_text().splitlines()
    ]
    assert sorted(r["test_name"] for r in lines) == sorted(f"c{i}" for i in range(60))
    assert all(r["tool_calls"][0]["output"] for r in lines), "the lines file keeps the full results"
    assert document["metadata"]["results_file"].endswith("out.json.results.jsonl")
    assert not journal_path(out).exists()
    assert "... and 10 more passing case(s)" in stdout
    assert document["metadata"]["suite_wall_time_s"] > 0


@pytest.mark.parametrize("runs", [1, 3])
def test_a_dry_runs_plan_never_claims_what_its_runs_cannot_detect(cli, runs, tmp_path, monkeypatch):
    # 3 runs a side cannot make even 3/3 against 0/3 significant (Fisher's p is 0.1): the plan
    # line says so instead of "3 run(s) per case detect a change of 90 points".
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    suite = tmp_path / "s.csv"
    suite.write_text("test_name,user_prompt,expected_tools\na,hello,\n")
    done = cli(
        "--csv", str(suite), "--server-module", str(EXAMPLE_SERVER), "-i", str(runs), "--dry-run"
    )
    assert done.exit_code == 0, done.output
    flat = " ".join(done.output.split())
    assert (
        f"plan: {runs} run(s) per case can detect no change from a 90% pass rate (80% power, "
        "alpha 0.05: even a drop to 0% needs 4 per case)" in flat
    )
    assert "detect a change of" not in flat
