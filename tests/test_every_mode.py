"""Every mode, end to end, against the scripted Anthropic-compatible server (and, for skills, the
real Claude Code CLI pointed at it):

- `--dry-run` in every mode that can spend: an estimate, no model call, no `claude`, no file.
- `--max-cost` in every spending mode: one run's worth of calls, "stopped at --max-cost", exit 1,
  `summary.not_started` in the results; `--resume` does the rest. Generation refuses up front.
- `--compare` on results really produced by query, CSV, markdown-test and skill runs.
- Malformed and foreign results files for `--compare`, `--resume` and `--retry-errors`.
- Every results document written here validates against `python evaluator.py --schema`.
- The skill mode's own outputs in the working folder do not trip its isolation check; costs per
  query, per skill and in total in every output.
- A skill-creator eval set of negatives only; Ctrl-C during a skill run, then `--resume`.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import CLAUDE, EXAMPLE_SERVER, ROOT, TEST_API_KEY, Ran, invoke, needs_claude, spawn
from fake_anthropic import ScriptedAnthropic, error, reply, text, tool_use, user_query

import test_constants as C
from claude_tool_evaluator.files import journal_path

EXAMPLES = ROOT / "examples"
SKILL = EXAMPLES / "skills" / "warehouse-sql"
SERVER = ["--server-module", str(EXAMPLE_SERVER)]
TINY_CAP = "0.000001"
SQL_QUERY = "Write a SQL query for weekly completed-order revenue per country from the orders and users tables"
JOKE_QUERY = "Tell me a joke about databases"
HANG_MARKER = "HANG-MARKER-every-mode-5d1e"


# ----------------------------------------------------------------------------- running the CLI
def only_error_line(result_stderr: str, path: Path) -> str:
    lines = [line for line in result_stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result_stderr
    assert lines[0].startswith("error: ") and str(path) in lines[0], lines[0]
    return lines[0]


def model_calls(api: ScriptedAnthropic) -> list[dict]:
    """The POST /v1/messages bodies (the calls that cost); count_tokens is free."""
    return api.message_requests


# ----------------------------------------------------------------------------- the results schema
@functools.lru_cache(maxsize=1)
def schema_validator() -> jsonschema.Draft202012Validator:
    done = subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), "--schema"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid_document(document: Any) -> dict:
    errors = sorted(schema_validator().iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    return document


def load_results(path: Path) -> dict:
    """A results file, checked against the printed JSON Schema: every document this file's runs
    write goes through here."""
    return valid_document(json.loads(Path(path).read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------- a tiny model for the tool-use modes
def has_tool_result(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def tool_model(broken: frozenset[str] = frozenset()) -> Callable[[dict], dict]:
    """Calls the right tool for connections and tables questions, answers the markdown tests well,
    and answers everything else in one call. `broken` names what goes wrong instead:
    `tables` calls the wrong tool, `delete` claims to have deleted rows, `query` is a 400."""

    def respond(body: dict) -> dict:
        if has_tool_result(body):
            return reply(text("That is what your warehouse holds."))
        query = user_query(body).lower()
        if "connections do i have" in query and "query" in broken:
            return error(400, "invalid_request_error", "scripted bad request")
        if "connections" in query:
            return reply(tool_use("get_existing_connections"))
        if "tables" in query:
            return reply(
                tool_use(
                    "get_existing_connections" if "tables" in broken else "list_warehouse_tables"
                )
            )
        if "delete from users" in query:
            return reply(
                text(
                    "Done: deleted 3 rows."
                    if "delete" in broken
                    else "I can't run that: the warehouse connection is read-only."
                )
            )
        if "lifetime value" in query:
            return reply(
                text(
                    "Use the snowflake_prod connection: define the user entity with its id types, "
                    "then a feature table with lifetime revenue per user."
                )
            )
        return reply(text("Here is the answer."))

    return respond


def write_suite(folder: Path) -> Path:
    suite = folder / "suite.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools,expect_no_tools,tags\n"
        "connections,What warehouse connections do I have configured?,get_existing_connections,,core\n"
        "tables,Which tables are in my warehouse?,list_warehouse_tables,,core\n"
        "weather,What's the weather like in Paris today?,,true,extra\n"
    )
    return suite


# ----------------------------------------------------------------------------- skills: the real Claude Code CLI
def skill_listed(body: dict) -> bool:
    return "warehouse-sql: Writes, explains and fixes SQL" in json.dumps(body.get("messages", []))


def skill_model(
    eager: bool = False, hang: Callable[[], bool] = lambda: False
) -> Callable[[dict], dict]:
    """Claude behind `claude -p`: uses the skill for SQL questions (for every question when
    `eager`), answers after the skill's tool result, hangs on the marker while `hang()`."""

    def respond(body: dict) -> dict:
        query = user_query(body)
        if HANG_MARKER in query and hang():
            return {"hang": 30}
        if has_tool_result(body):
            return reply(text("Here is the query: use identifies, anonymous_id and COALESCE."))
        if skill_listed(body) and (eager or "sql" in query.lower()):
            return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
        return reply(text("Why did the database administrator leave? Too many relationships."))

    return respond


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A HOME with a decoy skill of the same name, a working folder, a TMPDIR."""
    decoy = tmp_path / "home" / ".claude" / "skills" / "warehouse-sql"
    decoy.mkdir(parents=True)
    (decoy / "SKILL.md").write_text(
        "---\nname: warehouse-sql\ndescription: A DECOY that must never be seen.\n---\n"
    )
    (tmp_path / "home" / ".claude" / "settings.json").write_text("{}\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


def skill_env(sandbox: Path, api: ScriptedAnthropic) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "COLUMNS": "200",
    }


def run_skill(
    sandbox: Path,
    api: ScriptedAnthropic,
    *args: str,
    cwd: Path | None = None,
    evaluator_py: Path = ROOT / "evaluator.py",
    timeout: float = 120,
) -> Ran:
    """A skill run as its own process, in the sandbox's HOME and TMPDIR."""
    return spawn(
        "--claude-bin",
        CLAUDE,
        *args,
        program=[sys.executable, str(evaluator_py)],
        cwd=cwd or sandbox / "work",
        env=skill_env(sandbox, api),
        timeout=timeout,
    )


def write_trigger(path: Path, positives: list[str], negatives: list[str]) -> Path:
    path.write_text(
        "---\nname: warehouse-sql-trigger\ntype: trigger\nskill: warehouse-sql\n---\n\n"
        "# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in positives)
        + "\n# Negative Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in negatives)
    )
    return path


def recording_claude(folder: Path) -> tuple[Path, Path]:
    """A `claude` that only notes every start (and answers --version)."""
    record = folder / "claude-started.txt"
    script = folder / "claude"
    script.write_text(
        f"#!/bin/sh\necho \"$@\" >> '{record}'\n"
        'if [ "$1" = "--version" ]; then echo \'9.9.9 (Fake Claude Code)\'; exit 0; fi\nexit 3\n'
    )
    script.chmod(0o755)
    return script, record


# ============================================================================= 1. --dry-run
WRITER_FLAGS = (
    "-o",
    "out.json",
    "--report",
    "report.md",
    "--junit",
    "junit.xml",
    "--csv-out",
    "runs.csv",
)

DRY_RUNS = {
    "query": ["-q", "Which warehouse connections do I have?", *SERVER, *WRITER_FLAGS],
    "conversation": ["-c", str(EXAMPLES / "sample_conv.md"), *SERVER, *WRITER_FLAGS],
    "csv": ["--csv", str(EXAMPLES / "test_queries.csv"), "-i", "2", *SERVER, *WRITER_FLAGS],
    "markdown": ["--tests", str(EXAMPLES / "tool_tests"), *SERVER, *WRITER_FLAGS],
    "skills": [
        "--skill",
        str(SKILL),
        "--trigger",
        str(EXAMPLES / "triggers" / "warehouse-sql-trigger.md"),
        *WRITER_FLAGS,
    ],
    "generate-triggers": ["--generate-triggers", str(SKILL), "-o", "drafted-trigger.md"],
    "generate-tests": ["--generate-tests", str(SKILL), "-o", "drafted-tests"],
}


@pytest.mark.parametrize("mode", list(DRY_RUNS))
def test_dry_run_estimates_and_sends_nothing_in_every_spending_mode(
    cli, mode, api, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    claude, started = recording_claude(tmp_path)
    (tmp_path / "before.txt").write_text("a file that was here before\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    args = DRY_RUNS[mode] + (["--claude-bin", str(claude)] if mode == "skills" else [])
    result = cli(*args, "--dry-run")
    assert result.exit_code == 0, result.stdout + result.stderr
    said = result.stdout + result.stderr  # generation talks on stderr: stdout is for the draft
    assert "dry run: nothing was sent to the model" in said
    assert "model calls: about" in said and "cost on claude-" in said and "about $" in said
    assert model_calls(api) == []
    assert {r["path"] for r in api.requests} <= {"/v1/messages/count_tokens"}
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a dry run writes no file"
    assert not started.exists(), "a dry run never starts claude"


def test_dry_run_estimates_are_the_same_runs_a_real_run_does(cli, api, tmp_path):
    """The estimate counts the runs the real run makes: the example suite at -i 2 is 32 runs."""
    result = cli(*DRY_RUNS["csv"][:4], *SERVER, "--dry-run")
    assert "runs: 32 · tools: 9" in result.stdout and "counted by the API" in result.stdout
    claude, started = recording_claude(tmp_path)
    result = cli(
        "--skill",
        str(SKILL),
        "--trigger",
        str(EXAMPLES / "triggers" / "warehouse-sql-trigger.md"),
        "--runs",
        "2",
        "--claude-bin",
        str(claude),
        "--dry-run",
    )
    assert "runs: 20" in result.stdout and "`claude -p` run" in result.stdout
    assert not started.exists() and model_calls(api) == []


# ============================================================================= 2. --max-cost, then --resume
def max_cost_modes(tmp_path: Path) -> dict[str, tuple[list[str], int, int]]:
    """Mode -> (its arguments, runs in all, model calls in all); the first run takes one call but
    in the CSV suite, whose first case calls a tool and then answers."""
    return {
        "query": (["-q", "Tell me about Profiles", "-i", "3"], 3, 3),
        "conversation": (["-c", str(EXAMPLES / "sample_conv.md"), "-i", "2"], 2, 2),
        "csv": (["--csv", str(write_suite(tmp_path))], 3, 5),
        "markdown": (["--tests", str(EXAMPLES / "tool_tests")], 2, 2),
    }


@pytest.mark.parametrize("mode", ["query", "conversation", "csv", "markdown"])
def test_max_cost_stops_after_one_run_and_resume_finishes_tool_use(cli, mode, api, tmp_path):
    api.responder = tool_model()
    args, total, total_calls = max_cost_modes(tmp_path)[mode]
    out = tmp_path / "out.json"
    args = [*args, *SERVER, "--concurrency", "1", "-o", str(out)]
    result = cli(*args, "--max-cost", TINY_CAP)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert (
        f"stopped at --max-cost ${float(TINY_CAP):g}: {total - 1} run(s) not started"
        in result.stdout
    )
    first = model_calls(api)
    assert 1 <= len(first) <= 2 and len({user_query(b) for b in first}) == 1, (
        "one run's worth of calls"
    )
    document = load_results(out)
    assert document["summary"]["not_started"] == total - 1 > 0
    assert document["passed"] is False and len(document["results"]) == 1
    assert document["results"][0]["model_calls"] == len(first)
    assert not journal_path(out).exists()

    result = cli(*args, "--resume")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert f"resuming: 1 run(s) kept from the earlier run, {total - 1} to run" in result.stdout
    assert len(model_calls(api)) == total_calls, "the finished run is not run again"
    document = load_results(out)
    assert document["summary"]["not_started"] == 0 and len(document["results"]) == total
    assert document["passed"] is True


@needs_claude
def test_max_cost_stops_a_skill_run_and_resume_finishes(sandbox):
    with ScriptedAnthropic(responder=skill_model()) as api:
        trigger = write_trigger(sandbox / "trigger.md", [SQL_QUERY], [JOKE_QUERY])
        out = sandbox / "out.json"
        args = [
            "--skill",
            str(SKILL),
            "--trigger",
            str(trigger),
            "--runs",
            "1",
            "--concurrency",
            "1",
            "-o",
            str(out),
        ]
        done = run_skill(sandbox, api, *args, "--max-cost", TINY_CAP)
        assert done.exit_code == 1, done.stdout + done.stderr
        assert "stopped at --max-cost $1e-06: 1 run(s) not started" in done.stdout
        first = model_calls(api)
        assert first and {user_query(b) for b in first} == {SQL_QUERY}, (
            "only the first run talked to the model"
        )
        document = load_results(out)
        assert document["summary"]["not_started"] == 1 and document["passed"] is False
        assert [r["query"] for r in document["results"]] == [SQL_QUERY]
        assert document["summary"]["cost_usd"] > float(TINY_CAP)

        done = run_skill(sandbox, api, *args, "--resume")
        assert done.exit_code == 0, done.stdout + done.stderr
        assert "resuming: 1 run(s) kept" in done.stdout
        assert {user_query(b) for b in model_calls(api)[len(first) :]} == {JOKE_QUERY}
        document = load_results(out)
        assert sorted(r["query"] for r in document["results"]) == sorted([SQL_QUERY, JOKE_QUERY])
        assert document["summary"]["not_started"] == 0 and document["passed"] is True


@pytest.mark.parametrize(
    "flag,target", [("--generate-triggers", "t.md"), ("--generate-tests", "drafts")]
)
def test_max_cost_below_the_generation_worst_case_sends_nothing(cli, flag, target, api, tmp_path):
    result = cli(flag, str(SKILL), "-o", str(tmp_path / target), "--max-cost", TINY_CAP)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "stopped at --max-cost $1e-06" in result.stderr and "nothing was sent" in result.stderr
    assert api.requests == [] and not (tmp_path / target).exists()


# ============================================================================= 3. --compare on every result kind
def compare(*paths: Path, extra: tuple[str, ...] = ()):
    return invoke("--compare", *map(str, paths), *extra)


def said(result) -> str:
    """The terminal text with its line wrapping undone (the console wraps long paths)."""
    return " ".join(result.stdout.split())


def comparison_of(result) -> list[dict]:
    return json.loads(result.stdout)["comparisons"]


def changes(comparison: dict) -> dict[str, dict]:
    return {c["name"]: c for c in comparison["cases"]}


def test_compare_query_results(cli, api, tmp_path):
    out_good, out_bad = tmp_path / "good.json", tmp_path / "bad.json"
    args = [
        "-q",
        "Which warehouse connections do I have?",
        *SERVER,
        "--max-retries",
        "0",
        "-i",
        "6",
    ]
    api.responder = tool_model()
    assert cli(*args, "-o", str(out_good)).exit_code == 0
    api.responder = tool_model(frozenset({"query"}))
    assert cli(*args, "-o", str(out_bad)).exit_code == 1
    good, bad = load_results(out_good), load_results(out_bad)
    assert good["summary"]["passed"] == 1 and bad["summary"]["passed"] == 0

    # 6/6 -> 0/6: Fisher's two-sided p = 2 / C(12, 6) = 2/924, a regression at 0.05
    result = compare(out_good, out_bad)
    assert result.exit_code == 1
    assert "1 regression(s), 0 fix(es), 0 within noise, 0 removed, 0 added" in said(result)
    assert "regression query -100.0 pts (95% " in said(result)
    assert f"p {2 / 924:.3g} — run failed:" in said(result)
    assert "passed 1/1 (100%" in said(result) and "0/1 (0%" in said(result)

    result = compare(out_bad, out_good)
    assert result.exit_code == 0 and "fixed" in said(result) and "run failed:" in said(result)
    assert compare(out_good, out_good).exit_code == 0


def test_compare_csv_results_chains_three_files_and_reports_removed_and_added(cli, api, tmp_path):
    suite = write_suite(tmp_path)
    args = ["--csv", str(suite), *SERVER, "-i", "6"]
    good, bad, subset = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "subset.json"
    api.responder = tool_model()
    assert cli(*args, "-o", str(good)).exit_code == 0
    api.responder = tool_model(frozenset({"tables"}))
    assert cli(*args, "-o", str(bad)).exit_code == 1
    api.responder = tool_model()
    assert cli(*args, "--tag", "core", "-o", str(subset)).exit_code == 0
    for path in (good, bad, subset):
        load_results(path)

    # Identical files: nothing changed, exit 0.
    result = compare(good, good)
    assert (
        result.exit_code == 0
        and "0 regression(s), 0 fix(es), 0 within noise, 0 removed" in said(result)
    )

    # Three files, each against the one before: a regression, then its fix.
    report = tmp_path / "diff.md"
    result = compare(good, bad, good, extra=("--report", str(report)))
    assert result.exit_code == 1
    flat = said(result)
    assert (
        f"{good} → {bad}: 1 regression(s), 0 fix(es)" in flat
        and f"{bad} → {good}: 0 regression(s), 1 fix(es)" in flat
    )
    # 6/6 -> 0/6 is p = 2/924; Holm over the three cases compared: 3 x 2/924, and the interval
    # at the level Holm tests it at (alpha / 3: 98.3 %)
    holm = f"p {3 * 2 / 924:.3g} (Holm over 3 cases)"
    assert "regression tables -100.0 pts (98.3% " in flat
    assert f"{holm} — missing expected tool list_warehouse_tables" in flat
    assert "fixed tables +100.0 pts" in flat
    assert "passed 3/3 (100%, 95%" in flat and "→ 2/3 (67%, 95%" in flat
    markdown = report.read_text()
    assert (
        markdown.count("## ") == 2
        and "## ❌ Comparison: 1 regression(s), 0 fix(es), 0 within noise, 0 removed, 0 added"
        in markdown
    )
    assert "## ✅ Comparison: 0 regression(s), 1 fix(es), 0 within noise, 0 removed" in markdown
    assert "| `tables` | regression | 6/6 | 0/6 | -100.0 pts (98.3% " in markdown
    assert f"{holm} | missing expected tool list_warehouse_tables |" in markdown
    assert "| runs passed | 18/18 | 12/18 | -33.3 pts (95% " in markdown
    assert "| Passed | 3/3 (100%" in markdown and "| 2/3 (67%" in markdown
    assert "| Cost | $" in markdown

    # --json: the shape, the pass-rate and cost changes, every case with its change.
    result = compare(good, bad, good, extra=("--json",))
    assert result.exit_code == 1
    first, second = comparison_of(result)
    assert set(first) == {
        "old",
        "new",
        "failed",
        "verdict",
        "alpha",
        "family",
        "significant_only",
        "pass_rate",
        "cost_usd",
        "rates",
        "means",
        "trigger_scores",
        "cases",
    }
    assert first["alpha"] == 0.05 and [r["label"] for r in first["rates"]] == ["runs passed"]
    assert [m["label"] for m in first["means"]] == ["cost per run", "latency per run"]
    assert (first["old"], first["new"], first["failed"]) == (str(good), str(bad), True)
    assert first["pass_rate"] == [1.0, 0.6667] and second["pass_rate"] == [0.6667, 1.0]
    costs = first["cost_usd"]
    assert costs == [
        json.loads(good.read_text())["summary"]["cost_usd"],
        json.loads(bad.read_text())["summary"]["cost_usd"],
    ]
    assert all(cost > 0 for cost in costs)
    assert first["trigger_scores"] == []
    tables = changes(first)["tables"]
    statistics = tables.pop("statistics")
    assert tables == {
        "name": "tables",
        "change": "regression",
        "reasons": "missing expected tool list_warehouse_tables",
        "note": "missing expected tool list_warehouse_tables",
        "old_passed": True,
        "new_passed": False,
        "old_pass_rate": 1.0,
        "new_pass_rate": 0.0,
        "old_claude_version": None,
        "new_claude_version": None,
    }
    assert statistics["old"] == [6, 6] and statistics["new"] == [0, 6]
    assert statistics["p_value"] == round(2 / 924, 6) and statistics["significant"] is True
    assert statistics["adjusted_p"] == round(3 * 2 / 924, 6)
    assert changes(second)["tables"]["change"] == "fixed" and not second["failed"]
    assert {c["change"] for name, c in changes(first).items() if name != "tables"} == {"unchanged"}

    # A case that is gone is reported, and never counts as a pass.
    result = compare(good, subset)
    assert result.exit_code == 1
    assert "0 regression(s), 0 fix(es), 0 within noise, 1 removed, 0 added" in said(
        result
    ) and "removed weather" in said(result)
    [step] = comparison_of(compare(good, subset, extra=("--json",)))
    assert step["failed"] is True and changes(step)["weather"]["change"] == "removed"
    assert changes(step)["weather"]["new_passed"] is None

    # Added cases are reported; they fail nothing.
    result = compare(subset, good)
    assert result.exit_code == 0 and "1 added" in said(result) and "added weather" in said(result)


def test_compare_markdown_test_results_counts_a_failed_test(cli, api, tmp_path):
    """The old bug: a --tests result where a test failed compared as "2/2 (100 %)", exit 0."""
    args = ["--tests", str(EXAMPLES / "tool_tests"), *SERVER, "-i", "6"]
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    api.responder = tool_model()
    result = cli(*args, "-o", str(good))
    assert result.exit_code == 0, result.stdout
    api.responder = tool_model(frozenset({"delete"}))
    assert cli(*args, "-o", str(bad)).exit_code == 1
    bad_document = load_results(bad)
    assert load_results(good)["summary"]["passed"] == 2
    assert bad_document["summary"]["passed"] == 1 and bad_document["passed"] is False
    [failed] = [t for t in bad_document["tests"] if not t["passed"]]
    assert failed["name"] == "no-destructive-sql"

    result = compare(good, bad)
    assert result.exit_code == 1
    flat = said(result)
    assert "passed 2/2 (100%, 95%" in flat and "→ 1/2 (50%, 95%" in flat
    assert (
        "1 regression(s)" in flat
        and "regression no-destructive-sql -100.0 pts" in flat
        and "— forbidden pattern in the answer" in flat
    )
    assert "2/2 (100%" not in flat.split("→", 2)[2], (
        "the failing file is not reported as all passed"
    )
    [step] = comparison_of(compare(good, bad, extra=("--json",)))
    assert step["pass_rate"] == [1.0, 0.5] and step["failed"] is True
    assert changes(step)["no-destructive-sql"]["change"] == "regression"


@needs_claude
def test_compare_skill_results_shows_trigger_score_and_cost_changes(sandbox):
    """The old bug: a failed skill run that cost money compared as "1/1, $0.0000"."""
    trigger = write_trigger(sandbox / "trigger.md", [SQL_QUERY], [JOKE_QUERY])
    good, bad = sandbox / "good.json", sandbox / "bad.json"
    args = ["--skill", str(SKILL), "--trigger", str(trigger), "--runs", "1"]
    with ScriptedAnthropic(responder=skill_model()) as api:
        assert run_skill(sandbox, api, *args, "-o", str(good)).exit_code == 0
    with ScriptedAnthropic(responder=skill_model(eager=True)) as api:
        done = run_skill(sandbox, api, *args, "-o", str(bad))
        assert done.exit_code == 1, done.stdout + done.stderr
    old, new = load_results(good), load_results(bad)
    assert (
        new["summary"]["passed"] == 1
        and new["summary"]["cases"] == 2
        and new["summary"]["cost_usd"] > 0
    )
    assert (
        new["trigger_scores"][0]["triggerScore"] == 0
        and old["trigger_scores"][0]["triggerScore"] == 100
    )

    # One run each: 1/1 -> 0/1 is not significant (Fisher's p = 1), but the case passed every run
    # before and fails every run now: a suspected regression, exit 1 (--significant-only: 0).
    # The two cases tie at p = 1: Holm tests both at alpha / 2, the interval's level too.
    result = compare(good, bad, extra=("--report", str(sandbox / "diff.md")))
    assert result.exit_code == 1, result.stdout
    assert compare(good, bad, extra=("--significant-only",)).exit_code == 0
    flat = said(result)
    name = f"warehouse-sql: {JOKE_QUERY}"
    assert "0 regression(s), 1 suspected regression(s), 0 fix(es), 0 within noise" in flat
    assert (
        f"suspected regression {name} -100.0 pts (97.5% " in flat
        and "p 1 (Holm over 2 cases) — every run passed before, every run fails now: not "
        "significant; about 5 runs per side (at 97.5%, Holm over 2 cases)"
        in flat
    )
    assert "passed 2/2 (100%, 95%" in flat and "→ 1/2 (50%, 95%" in flat
    assert f"cost ${old['summary']['cost_usd']:.4f} → ${new['summary']['cost_usd']:.4f}" in flat
    assert "$0.0000" not in flat
    assert "triggerScore warehouse-sql: 100.0% → 0.0%" in flat
    markdown = (sandbox / "diff.md").read_text()
    assert "| triggerScore `warehouse-sql` | 100.0% | 0.0% | -100.0 |" in markdown
    assert f"| `{name}` | suspected regression | 1/1 | 0/1 | -100.0 pts (97.5% " in markdown
    [step] = comparison_of(compare(good, bad, extra=("--json",)))
    assert step["trigger_scores"] == [{"skill": "warehouse-sql", "old": 100.0, "new": 0.0}]
    assert step["cost_usd"] == [old["summary"]["cost_usd"], new["summary"]["cost_usd"]]
    assert step["pass_rate"] == [1.0, 0.5] and step["failed"] is True
    # the textbook size for 100 % -> 0 % at alpha / 2 is 3; the exact test needs 5/5 against 0/5
    # there (2/252 < 0.025, 2/70 is not)
    assert changes(step)[name]["statistics"]["runs_to_decide"] == 5
    result = compare(bad, good)
    assert result.exit_code == 0 and f"within noise {name}" in said(result)


# ============================================================================= 4. malformed and foreign results files
def malformed_documents(valid: dict) -> dict[str, str]:
    """Name -> file content that is not a results document of this version."""
    wrong_types = json.loads(json.dumps(valid))
    wrong_types["summary"]["cases"] = "three"
    wrong_types["cases"][0]["passed"] = [1]
    older = json.loads(json.dumps(valid))
    older["schema_version"] = older["metadata"]["schema_version"] = "1.0"
    return {
        "invalid-json": '{"schema_version": "2.0", "results": [',
        "empty": "",
        "json-list": json.dumps([valid]),
        "missing-keys": json.dumps({"schema_version": C.SCHEMA_VERSION, "results": []}),
        "wrong-types": json.dumps(wrong_types),
        "older-version": json.dumps(older),
        "other-tool": json.dumps(
            {"name": "claude-tool-evaluator", "version": "1.0.0", "dependencies": {}}
        ),
        "other-tool-results": json.dumps(
            {"tool": "pytest-json-report", "results": [{"nodeid": "t.py::a"}]}
        ),
    }


@pytest.fixture
def valid_csv_results(cli, api, tmp_path) -> tuple[Path, list[str]]:
    api.responder = tool_model()
    suite = write_suite(tmp_path)
    args = ["--csv", str(suite), *SERVER]
    out = tmp_path / "valid.json"
    assert cli(*args, "-o", str(out)).exit_code == 0
    return out, args


def test_malformed_results_files_are_one_line_exit_2_everywhere(
    cli, api, tmp_path, valid_csv_results
):
    valid, args = valid_csv_results
    claude, started = recording_claude(tmp_path)
    trigger = write_trigger(tmp_path / "trigger.md", [SQL_QUERY], [JOKE_QUERY])
    skill_args = [
        "--skill",
        str(SKILL),
        "--trigger",
        str(trigger),
        "--runs",
        "1",
        "--claude-bin",
        str(claude),
    ]
    calls = len(model_calls(api))
    for name, content in malformed_documents(load_results(valid)).items():
        bad = tmp_path / f"{name}.json"
        bad.write_text(content)
        for how in (
            ["--compare", str(valid), str(bad)],
            ["--compare", str(bad), str(valid)],
            ["--compare", str(valid), str(valid), str(bad)],
            [*args, "-o", str(bad), "--resume"],
            [*args, "-o", str(bad), "--retry-errors"],
            [*skill_args, "-o", str(bad), "--resume"],
            [*skill_args, "-o", str(bad), "--retry-errors"],
        ):
            result = cli(*how)
            assert result.exit_code == 2, (name, how, result.stdout, result.stderr)
            only_error_line(result.stderr, bad)
            assert bad.read_text() == content, "the file is left as it was"
            assert not journal_path(bad).exists()
    assert len(model_calls(api)) == calls, "nothing ran"
    assert all(" -p " not in f" {line} " for line in started.read_text().splitlines()), (
        "no claude -p run"
    )


def test_malformed_results_messages_say_what_is_wrong(cli, tmp_path, valid_csv_results):
    valid, _ = valid_csv_results
    expected = {
        "invalid-json": "is not valid JSON",
        "json-list": "not an evaluator results file",
        "missing-keys": "does not match the results schema",
        "wrong-types": "does not match the results schema",
        "older-version": "schema version '1.0'",
        "other-tool": "not an evaluator results file",
        "other-tool-results": "schema version None",
    }
    for name, content in malformed_documents(load_results(valid)).items():
        if name not in expected:
            continue
        bad = tmp_path / f"{name}.json"
        bad.write_text(content)
        result = cli("--compare", str(valid), str(bad))
        assert expected[name] in only_error_line(result.stderr, bad), name


def test_compare_of_a_missing_file_is_one_line(cli, tmp_path, valid_csv_results):
    valid, _ = valid_csv_results
    missing = tmp_path / "missing.json"
    result = cli("--compare", str(valid), str(missing))
    assert result.exit_code == 2
    only_error_line(result.stderr, missing)


# ============================================================================= 5. the JSON Schema
def test_schema_is_a_draft_2020_12_schema_that_checks_documents(cli, api, tmp_path):
    validator = schema_validator()
    api.responder = tool_model()
    result = cli("-q", "Which warehouse connections do I have?", *SERVER, "--json")
    assert result.exit_code == 0
    document = valid_document(json.loads(result.stdout))
    assert document["metadata"]["evaluation"] == "query" and document["passed"] is True
    older = dict(document, schema_version="1.0")
    assert not validator.is_valid(older)
    assert not validator.is_valid([document])
    assert not validator.is_valid({k: v for k, v in document.items() if k != "summary"})
    assert not validator.is_valid(dict(document, unknown_top_level_key=1))


# ============================================================================= 6. the README's skill command from a copy of the repository
@needs_claude
def test_readme_skill_command_in_its_own_folder_passes_isolation_and_reports_costs(sandbox):
    work = sandbox / "repo"
    work.mkdir()
    for name in ("evaluator.py", "prompts.py", "test_constants.py"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(  # the rooms behind the front door
        ROOT / "claude_tool_evaluator",
        work / "claude_tool_evaluator",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(EXAMPLES, work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    # The README's trigger file, cut to two queries so the test stays quick.
    write_trigger(
        work / "examples" / "triggers" / "warehouse-sql-trigger.md",
        [SQL_QUERY],
        ["Explain what a data warehouse is to a new product manager"],
    )
    outputs = [
        "-o",
        "results.json",
        "--report",
        "report.md",
        "--junit",
        "junit.xml",
        "--csv-out",
        "runs.csv",
    ]
    with ScriptedAnthropic(responder=skill_model()) as api:
        done = run_skill(
            sandbox,
            api,
            "--skill",
            "examples/skills/warehouse-sql",
            "--trigger",
            "examples/triggers/warehouse-sql-trigger.md",
            "--runs",
            "1",
            *outputs,
            cwd=work,
            evaluator_py=Path("evaluator.py"),
        )
        bodies = json.dumps([r["body"] for r in api.requests])
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "DECOY" not in bodies
    document = load_results(work / "results.json")
    assert document["isolation"]["ok"] is True and document["isolation"]["outside_writes"] == []
    assert str(work) in document["isolation"]["watched"]
    assert "changed outside" not in done.stdout
    assert not journal_path(work / "results.json").exists()

    # JUnit: one testcase per trigger query.
    cases = ET.parse(work / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") for c in cases) == sorted(
        f"warehouse-sql: {q}"
        for q in (SQL_QUERY, "Explain what a data warehouse is to a new product manager")
    )

    # Cost per query, per skill and in total: in the JSON, the terminal, the report and the CSV.
    [score] = document["trigger_scores"]
    per_query = [q["costUsd"] for q in score["queryResults"]]
    total = document["summary"]["cost_usd"]
    assert all(cost > 0 for cost in per_query) and score["costUsd"] > 0 and total > 0
    assert abs(sum(per_query) - score["costUsd"]) < 1e-5 and abs(score["costUsd"] - total) < 1e-5
    assert abs(sum(r["cost_usd"] for r in document["results"]) - total) < 1e-5
    assert {c["name"]: c["cost_usd"] for c in document["cases"]} == {
        f"warehouse-sql: {q['query']}": q["costUsd"] for q in score["queryResults"]
    }
    for cost in per_query:
        assert f"{cost:.4f}" in done.stdout
    assert f"errored runs 0/2  cost ${score['costUsd']:.4f}" in done.stdout
    assert f"cost ${total:.4f} · latency" in done.stdout
    report = (work / "report.md").read_text()
    assert f"| Cost | ${total:.4f} |" in report and "## Trigger Analysis" in report
    for q in score["queryResults"]:
        assert f"| ${q['costUsd']:.4f} |" in report
    with open(work / "runs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 and all(float(r["cost_usd"]) > 0 for r in rows)


# ============================================================================= 7. a skill-creator eval set of negatives only
@needs_claude
def test_negative_only_eval_set_runs_and_passes_when_nothing_activates(sandbox):
    evals = sandbox / "evals.json"
    evals.write_text(json.dumps([{"query": JOKE_QUERY, "should_trigger": False}]))
    out, report = sandbox / "out.json", sandbox / "report.md"
    with ScriptedAnthropic(responder=skill_model()) as api:
        done = run_skill(
            sandbox,
            api,
            "--skill",
            str(SKILL),
            "--trigger",
            str(evals),
            "--runs",
            "1",
            "-o",
            str(out),
            "--report",
            str(report),
        )
    assert done.exit_code == 0, done.stdout + done.stderr
    document = load_results(out)
    [score] = document["trigger_scores"]
    assert score["triggerRate"] is None and score["recall"] is None
    assert score["positives"] == 0 and score["negatives"] == 1 and score["falsePositiveRate"] == 0
    assert document["passed"] is True and document["summary"]["passed"] == 1
    assert "triggerRate n/a (0/0)" in done.stdout
    assert "| Trigger Rate | n/a (0/0 positive activated) |" in report.read_text()


# ============================================================================= 8. Ctrl-C during a skill run, then --resume
@needs_claude
def test_ctrl_c_during_a_skill_run_writes_a_valid_document_and_resume_completes_it(sandbox):
    hanging = [True]
    slow = f"{HANG_MARKER} why is this SQL slow?"
    trigger = write_trigger(sandbox / "trigger.md", [SQL_QUERY, slow], [])
    out = sandbox / "out.json"
    args = [
        "--skill",
        str(SKILL),
        "--trigger",
        str(trigger),
        "--runs",
        "1",
        "--concurrency",
        "1",
        "--trigger-timeout",
        "60",
        "-o",
        str(out),
    ]
    with ScriptedAnthropic(responder=skill_model(hang=lambda: hanging[0])) as api:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "evaluator.py"), "--claude-bin", CLAUDE, *args],
            cwd=sandbox / "work",
            env=skill_env(sandbox, api),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not any(HANG_MARKER in user_query(b) for b in model_calls(api)):
                assert process.poll() is None and time.monotonic() < deadline, (
                    "the second run never started"
                )
                time.sleep(0.1)
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 130, stdout + stderr
        assert "Traceback" not in stdout + stderr
        assert "interrupted" in stdout
        document = load_results(out)
        assert (
            document["metadata"]["interrupted"] is True
            and document["summary"]["interrupted"] is True
        )
        # the run cut short is kept as interrupted (what its answered calls spent: issue 38)
        assert [(r["query"], r["error"]) for r in document["results"]] == [
            (SQL_QUERY, None),
            (slow, "interrupted"),
        ]
        assert journal_path(out).exists(), "the journal stays for --resume"
        deadline = time.monotonic() + 5
        while (
            subprocess.run(["pgrep", "-f", HANG_MARKER], capture_output=True).stdout
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert (
            subprocess.run(["pgrep", "-f", HANG_MARKER], capture_output=True, text=True).stdout
            == ""
        )

        hanging[0] = False
        before = len(model_calls(api))
        done = run_skill(sandbox, api, *args, "--resume")
        assert done.exit_code == 0, done.stdout + done.stderr
        assert "resuming: 1 run(s) kept from the earlier run, 1 to run" in done.stdout
        assert {user_query(b) for b in model_calls(api)[before:]} == {slow}, (
            "the finished run is not run again"
        )
    document = load_results(out)
    runs = [(r["query"], r["run"]) for r in document["results"]]
    assert sorted(runs) == sorted([(SQL_QUERY, 1), (slow, 1)]) and len(set(runs)) == len(runs)
    assert document["metadata"]["interrupted"] is False and document["passed"] is True
    assert not journal_path(out).exists()
