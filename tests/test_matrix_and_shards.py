"""Side by side and at scale: a model matrix (`--model` / `--trigger-model` repeated), shards of a
suite (`--shard K/N`) and putting them back together (`--merge`).

Tool-use runs go through the real `anthropic` SDK to the scripted server, whose answers differ by
the request's `model` (fake_anthropic.per_model), against the example MCP server in-process;
skill runs through the real Claude Code CLI against the same scripted server.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY, invoke
from fake_anthropic import ScriptedAnthropic, per_model, reply, text, tool_use, user_query

import evaluator as E
import test_constants as C
from claude_tool_evaluator.claude_code import find_claude_bin
from claude_tool_evaluator.pipeline import Job, in_shard
from claude_tool_evaluator.run_types import USAGE_FIELDS, Usage, cost_usd
from claude_tool_evaluator.runners.tool_use import ToolUseRunner

STRONG, FAST = "claude-sonnet-5-5", "claude-haiku-5-5"
PROMPTS = {f"case_{i}": f"Which warehouse tables exist? (question {i})" for i in range(1, 10)}
HARD = "case_2"  # the fast model answers it without looking: it fails there only


# ============================================================================ scripted models
def ends_with_tool_result(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def looks(body: dict) -> dict:
    """Lists the tables with the tool, then answers."""
    if ends_with_tool_result(body):
        return reply(text("orders, users, identifies, tracks and pages."))
    return reply(tool_use("list_warehouse_tables"))


def skips_the_hard_one(body: dict) -> dict:
    if user_query(body) == PROMPTS[HARD]:
        return reply(text("I think there are some tables."))
    return looks(body)


MODELS = per_model({STRONG: looks, FAST: skips_the_hard_one})


# ============================================================================ helpers
@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A scripted API answering per model, a working folder, a suite of `cases` CSV cases."""
    with ScriptedAnthropic(responder=MODELS) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        monkeypatch.setenv("COLUMNS", "200")
        monkeypatch.chdir(tmp_path)
        api.folder = tmp_path
        yield api


def suite(folder: Path, cases: int = 3, name: str = "suite.csv") -> Path:
    path = folder / name
    path.write_text(
        "test_name,user_prompt,expected_tools\n"
        + "".join(
            f"case_{i},{PROMPTS[f'case_{i}']},list_warehouse_tables\n" for i in range(1, cases + 1)
        ),
        encoding="utf-8",
    )
    return path


def run(api: ScriptedAnthropic, *args: Any) -> tuple[int, str, str, list[dict]]:
    """The CLI in-process: (exit code, stdout, stderr, the /v1/messages bodies it sent)."""
    start = len(api.requests)
    code, stdout, stderr = invoke(*args)
    sent = [r["body"] for r in api.requests[start:] if r["path"] == "/v1/messages"]
    return code, stdout, stderr, sent


def tool_run(api: ScriptedAnthropic, *args: Any) -> tuple[int, str, str, list[dict]]:
    return run(api, "--server-module", EXAMPLE_SERVER, *args)


def openings(requests: list[dict]) -> list[tuple[str, str]]:
    """(model, question) of the first call of every conversation."""
    return sorted((b["model"], user_query(b)) for b in requests if len(b["messages"]) == 1)


def verdicts(document: dict) -> list[tuple]:
    """What a run decided, without what it cost or how long it took."""
    return [
        (
            c["name"],
            c["model"],
            c["passed"],
            c["passes"],
            c["runs"],
            c["errors"],
            c["pass_rate"],
            tuple(c["interval"]),
            c["flaky"],
            c["reasons"],
        )
        for c in document["cases"]
    ]


def statistics(document: dict) -> dict:
    s = document["summary"]
    return {
        k: s[k]
        for k in (
            "cases",
            "passed",
            "failed",
            "flaky",
            "runs",
            "run_errors",
            "pass_rate",
            "tools",
            "confusion",
            "tool_coverage",
            "not_started",
            "interrupted",
        )
    }


def run_keys(document: dict) -> list[tuple]:
    return [
        (r["test_name"], r["iteration"], r["model"], r["verdict"]["passed"])
        for r in document["results"]
    ]


def one_error_line(code: int, stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


# ============================================================================ the model matrix
def test_two_models_side_by_side_show_the_case_that_depends_on_the_model(lab: ScriptedAnthropic):
    path = suite(lab.folder)
    code, stdout, stderr, sent = tool_run(
        lab,
        "--csv",
        path,
        "--model",
        STRONG,
        "--model",
        FAST,
        "-i",
        "2",
        "-o",
        "matrix.json",
        "--report",
        "matrix.md",
    )
    assert code == 1, stderr  # case_2 fails on the fast model
    assert openings(sent) == sorted(
        (m, q)
        for q in PROMPTS.values()
        if q in path.read_text()
        for m in (STRONG, FAST)
        for _ in range(2)
    ), "every case, model and iteration"
    document = json.loads(Path("matrix.json").read_text())
    E.results_document_model().model_validate(document)
    assert (
        document["metadata"]["models"] == [STRONG, FAST] and document["metadata"]["model"] == STRONG
    )
    # every run and every case carries its model, and is priced at that model's rates
    for result in document["results"]:
        usage = Usage(**{k: result["usage"][k] for k in USAGE_FIELDS})
        assert result["cost_usd"] == round(cost_usd(usage, result["model"]), 6)
    assert {(c["name"], c["model"]): c["passed"] for c in document["cases"]} == {
        (f"case_{i}", m): not (i == 2 and m == FAST) for i in (1, 2, 3) for m in (STRONG, FAST)
    }
    matrix = document["matrix"]
    assert matrix["models"] == [STRONG, FAST] and matrix["disagreements"] == [HARD]
    [row] = [r for r in matrix["cases"] if r["disagree"]]
    assert (row["passed_on"], row["failed_on"]) == ([STRONG], [FAST])
    assert row["models"][FAST]["passes"] == 0 and row["models"][STRONG]["passes"] == 2
    summaries = {s["model"]: s for s in matrix["summaries"]}
    assert (summaries[STRONG]["passed"], summaries[FAST]["passed"]) == (3, 2)
    assert summaries[STRONG]["price"] == C.PRICES["claude-sonnet"]
    assert summaries[FAST]["price"] == C.PRICES["claude-haiku"]
    for model, summary in summaries.items():
        spent = sum(r["cost_usd"] for r in document["results"] if r["model"] == model)
        assert summary["cost_usd"] == pytest.approx(spent, abs=1e-5) and summary["runs"] == 6
    tools = {t["tool"]: t["models"] for t in matrix["tools"]}
    assert (
        tools["list_warehouse_tables"][STRONG]["calls"] == 6
        and tools["list_warehouse_tables"][FAST]["calls"] == 4
    )
    assert (
        tools["list_warehouse_tables"][STRONG]["f1"]
        == 1.0
        > tools["list_warehouse_tables"][FAST]["f1"]
    )
    durations = [
        c["duration_ms"] for r in document["results"] if r["model"] == FAST for c in r["tool_calls"]
    ]
    assert tools["list_warehouse_tables"][FAST]["mean_ms"] == pytest.approx(
        sum(durations) / 4, abs=0.01
    )
    # markdown: the side-by-side tables and the disagreement, with each case named with its model
    report = Path("matrix.md").read_text()
    assert "### Models side by side" in report and f"| `{STRONG}` | 3/3 (100%) |" in report
    assert "**Pass on one model, fail on another (1)**" in report
    assert f"| `{HARD}` | `{STRONG}` | `{FAST}` |" in report
    assert f"| `{HARD}` | ✅ 2/2 · $" in report and "❌ 0/2 · $" in report
    assert f"`{HARD} ({FAST})` | 0/2 |" in report.split("### Failures")[1]
    assert f"| Model | `{STRONG}, {FAST}` |" in report
    assert (
        "| Tool (calls · F1 · mean call) |" in report
        and "| `list_warehouse_tables` | 6 · 1.00 · " in report
    )
    # the terminal: the same tables, and the disagreement in one line
    flat = " ".join((stdout + stderr).split())
    assert "Models side by side" in flat and "Cases per model" in flat and "Tools per model" in flat
    assert f"differs by model: {HARD}: passes on {STRONG}, fails on {FAST}" in flat


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"
)
def test_the_html_report_shows_the_models_side_by_side(lab: ScriptedAnthropic, tmp_path: Path):
    code, _, stderr, _ = tool_run(
        lab,
        "--csv",
        suite(lab.folder),
        "--model",
        STRONG,
        "--model",
        FAST,
        "-o",
        "m.json",
        "--html",
        "m.html",
    )
    assert code == 1 and Path("m.html").exists(), stderr
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            Path("m.html").resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    page = " ".join(
        re.sub(r"<script.*?</script>|<[^>]+>", " ", done.stdout, flags=re.DOTALL).split()
    )
    assert (
        "Models side by side" in page
        and f"1 case(s) pass on one model and fail on another: {HARD} "
        f"(passes on {STRONG}; fails on {FAST})"
        in page
    ), page[:3000]
    assert f"{HARD} ({FAST})" in page and f"{HARD} ({STRONG})" in page, (
        "each case on each model in the case table"
    )
    assert f"model {STRONG}, {FAST}" in page
    # the page drawn again from the results file (--from) shows the same
    run(lab, "--from", "m.json", "--html", "again.html")
    assert (
        '"matrix"' in Path("again.html").read_text()
        and "renderMatrix" in Path("again.html").read_text()
    )


def test_a_query_on_two_models_names_each_run_with_its_model(lab: ScriptedAnthropic):
    code, stdout, stderr, sent = tool_run(
        lab, "-q", PROMPTS[HARD], "--model", STRONG, "--model", FAST
    )
    flat = " ".join((stdout + stderr).split())
    assert code == 0 and openings(sent) == sorted([(STRONG, PROMPTS[HARD]), (FAST, PROMPTS[HARD])])
    assert f"query ({STRONG})" in flat and f"query ({FAST})" in flat


def test_a_single_model_run_reads_as_before(lab: ScriptedAnthropic):
    code, stdout, stderr, sent = tool_run(
        lab, "--csv", suite(lab.folder), "--model", FAST, "--json", "--report", "one.md"
    )
    document = json.loads(stdout)
    assert code == 1 and {b["model"] for b in sent} == {FAST}
    assert "matrix" not in document and document["metadata"]["models"] is None
    assert [c["name"] for c in document["cases"]] == ["case_1", "case_2", "case_3"]
    report = Path("one.md").read_text()
    assert "side by side" not in report and f"| `{HARD}` | 0/1 |" in report
    assert "Models side by side" not in stderr and "differs by model" not in stderr


def test_the_matrix_dry_run_prices_each_model_and_sends_nothing(lab: ScriptedAnthropic):
    code, stdout, stderr, sent = tool_run(
        lab, "--csv", suite(lab.folder), "--model", STRONG, "--model", FAST, "-i", "2", "--dry-run"
    )
    output = stdout + stderr
    assert code == 0 and sent == [], output
    costs = {}
    for model in (STRONG, FAST):
        line = next(
            line for line in output.splitlines() if line.strip().startswith(f"cost on {model}:")
        )
        assert line.endswith("6 run(s)"), line
        costs[model] = float(line.split("about $")[1].split()[0])
    total = float(
        next(line for line in output.splitlines() if "cost in all" in line)
        .split("about $")[1]
        .split()[0]
    )
    assert "runs: 12" in output and total == pytest.approx(costs[STRONG] + costs[FAST], abs=2e-4)
    ratio = C.PRICES["claude-sonnet"]["input"] / C.PRICES["claude-haiku"]["input"]
    assert costs[STRONG] == pytest.approx(costs[FAST] * ratio, rel=0.05), (
        "each model at its own price"
    )


def test_a_matrix_resumes_and_compares(lab: ScriptedAnthropic):
    path = suite(lab.folder)
    args = ["--csv", path, "--model", STRONG, "--model", FAST, "-o", "m.json"]
    first = tool_run(lab, *args)
    assert first[0] == 1 and len(first[3]) > 0
    again = tool_run(lab, *args, "--resume")
    assert (
        again[3] == []
        and "resuming: 6 run(s) kept from the earlier run, 0 to run" in again[1] + again[2]
    )
    lab.responder = per_model({STRONG: looks, FAST: looks})  # the fast model learns to look
    fixed = tool_run(lab, "--csv", path, "--model", STRONG, "--model", FAST, "-o", "fixed.json")
    assert fixed[0] == 0
    code, stdout, _, _ = run(lab, "--compare", "m.json", "fixed.json", "--json")
    [comparison] = json.loads(stdout)["comparisons"]
    changes = {c["name"]: c["change"] for c in comparison["cases"]}
    # one run a side: the fast model's flip is compared on its own label, and is noise ("within
    # noise": Fisher's exact test cannot call 0/1 -> 1/1 significant)
    assert (
        code == 0
        and changes[f"{HARD} ({FAST})"] == "noise"
        and changes[f"{HARD} ({STRONG})"] == "unchanged"
    )
    assert len(changes) == 6


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", STRONG, "--model", STRONG], f"--model {STRONG} is given twice"),
        (["--shard", "0/3"], "'0/3' is not K/N with 1 <= K <= N"),
        (["--shard", "4/3"], "'4/3' is not K/N with 1 <= K <= N"),
        (["--shard", "two/3"], "is not K/N"),
    ],
)
def test_bad_matrix_and_shard_options_are_one_line(
    lab: ScriptedAnthropic, args: list[str], message: str
):
    code, stdout, stderr, sent = tool_run(lab, "--csv", suite(lab.folder), *args)
    assert message in one_error_line(code, stderr) and sent == [] and stdout == ""


def test_generation_drafts_with_one_model(lab: ScriptedAnthropic):
    code, _, stderr, sent = run(
        lab,
        "--generate-triggers",
        ROOT / "examples" / "skills" / "warehouse-sql",
        "--model",
        STRONG,
        "--model",
        FAST,
    )
    assert "drafts with one model" in one_error_line(code, stderr) and sent == []


# ============================================================================ shards and merge
def shard_files(
    api: ScriptedAnthropic, path: Path, count: int, *more: Any, prefix: str = "shard"
) -> list[Path]:
    files = []
    for index in range(1, count + 1):
        out = Path(f"{prefix}-{index}.json")
        code, _, stderr, _ = tool_run(
            api, "--csv", path, *more, "--shard", f"{index}/{count}", "-o", out
        )
        assert code in (0, 1) and out.exists(), stderr
        files.append(out)
    return files


def test_shards_are_disjoint_their_union_is_the_suite_and_the_merge_is_the_unsharded_run(
    lab: ScriptedAnthropic,
):
    path = suite(lab.folder, cases=9)
    matrix = ["--model", STRONG, "--model", FAST, "-i", "2"]
    code, _, _, whole_sent = tool_run(
        lab,
        "--csv",
        path,
        *matrix,
        "-o",
        "whole.json",
        "--report",
        "whole.md",
        "--junit",
        "whole.xml",
        "--csv-out",
        "whole.csv",
    )
    whole = json.loads(Path("whole.json").read_text())
    asked: list[list[tuple[str, str]]] = []
    hashes, ran = set(), []
    for index in (1, 2, 3):
        start = len(lab.requests)
        _, _, stderr, sent = tool_run(
            lab, "--csv", path, *matrix, "--shard", f"{index}/3", "-o", f"part-{index}.json"
        )
        asked.append(openings(sent))
        piece = json.loads(Path(f"part-{index}.json").read_text())
        assert (
            piece["metadata"]["shard"] == f"{index}/3"
            and len(piece["results"]) == len(asked[-1]) > 0
        ), stderr
        hashes.add(piece["metadata"]["suite_hash"])
        ran.append({(r["test_name"], r["iteration"], r["model"]) for r in piece["results"]})
        assert start < len(lab.requests)
    assert len(hashes) == 1 and None not in hashes, "one suite, whichever shard ran it"
    assert all(not a & b for i, a in enumerate(ran) for b in ran[i + 1 :]), "shards are disjoint"
    assert sorted(x for r in ran for x in r) == sorted(k[:3] for k in run_keys(whole)), (
        "together they are the suite"
    )
    assert sorted(sum(asked, [])) == openings(whole_sent), (
        "and they asked what the unsharded run asked"
    )
    assert min(len(r) for r in ran) >= 3, f"shards balance roughly: {[len(r) for r in ran]}"
    code_merged, stdout, stderr, sent = run(
        lab,
        "--merge",
        "part-1.json",
        "part-2.json",
        "part-3.json",
        "-o",
        "merged.json",
        "--report",
        "merged.md",
        "--junit",
        "merged.xml",
        "--csv-out",
        "merged.csv",
    )
    assert sent == [] and code_merged == code == 1, stderr
    merged = json.loads(Path("merged.json").read_text())
    E.results_document_model().model_validate(merged)
    assert verdicts(merged) == verdicts(whole) and statistics(merged) == statistics(whole)
    assert run_keys(merged) == run_keys(whole), "the runs in the unsharded run's order"
    assert merged["passed"] == whole["passed"] is False
    assert merged["matrix"]["disagreements"] == whole["matrix"]["disagreements"] == [HARD]
    assert [(c["name"], c["models"].keys()) for c in merged["matrix"]["cases"]] == [
        (c["name"], c["models"].keys()) for c in whole["matrix"]["cases"]
    ]
    assert merged["metadata"]["merged_from"] == ["part-1.json", "part-2.json", "part-3.json"]
    assert merged["metadata"]["shard"] is None and merged["metadata"]["models"] == [STRONG, FAST]
    assert merged["summary"]["cost_usd"] == pytest.approx(
        sum(r["cost_usd"] for r in merged["results"]), abs=1e-5
    )

    # every writer works on a merge, and says what the unsharded run says
    def cases_of(xml: str) -> list[tuple]:
        return [
            (c.get("classname"), c.get("name"), c.find("failure") is not None)
            for c in ET.parse(xml).iter("testcase")
        ]

    assert cases_of("merged.xml") == cases_of("whole.xml") and len(cases_of("merged.xml")) == 18
    rows = lambda name: sorted(
        (r["test_name"], r["iteration"], r["verdict"]) for r in csv.DictReader(open(name))
    )  # noqa: E731
    assert rows("merged.csv") == rows("whole.csv") and len(rows("merged.csv")) == 36
    report = Path("merged.md").read_text()
    assert (
        "**Pass on one model, fail on another (1)**" in report
        and f"| `{HARD}` | `{STRONG}` | `{FAST}` |" in report
    )
    failures = lambda name: (
        Path(name).read_text().split("### Failures")[1].split("### All cases")[0]
    )  # noqa: E731
    assert failures("merged.md") == failures(
        "whole.md"
    ) and f"`{HARD} ({FAST})` | 0/2 |" in failures("merged.md")
    assert f"differs by model: {HARD}" in " ".join((stdout + stderr).split())


ANSWER = "orders, users, identifies, tracks and pages."


@pytest.mark.parametrize("mode", ["markdown", "qa"])
def test_markdown_tests_and_qa_evaluations_merge_to_the_unsharded_run(
    lab: ScriptedAnthropic, mode: str
):
    """The other suites' own sections (tests, qa) come out of a merge as out of one run."""
    if mode == "markdown":
        for i in (1, 2, 3):
            Path(f"t{i}.md").write_text(
                f"---\nname: tables-{i}\ntype: knowledge\nconcepts: [orders, users]\n---\n\n"
                f"# Prompt\n\n{PROMPTS[f'case_{i}']}\n",
                encoding="utf-8",
            )
        line = ["--tests", "t1.md", "--tests", "t2.md", "--tests", "t3.md"]
    else:
        Path("qa.xml").write_text(
            "<evaluation>"
            + "".join(
                f"<qa_pair><question>{PROMPTS[f'case_{i}']}</question><answer>{ANSWER}</answer></qa_pair>"
                for i in (1, 2, 3)
            )
            + "</evaluation>",
            encoding="utf-8",
        )
        line = ["--qa", "qa.xml"]
    line += ["--model", STRONG, "--model", FAST, "-i", "2"]
    code, stdout, _, _ = tool_run(lab, *line, "--json")
    whole = json.loads(stdout)
    for index in (1, 2):
        tool_run(lab, *line, "--shard", f"{index}/2", "-o", f"piece-{index}.json")
    merged_code, stdout, stderr, sent = run(
        lab, "--merge", "piece-1.json", "piece-2.json", "--json"
    )
    merged = json.loads(stdout)
    assert sent == [] and merged_code == code == 1, (
        stderr
    )  # the hard question fails on the fast model
    assert verdicts(merged) == verdicts(whole) and run_keys(merged) == run_keys(whole)
    assert (
        merged["matrix"]["disagreements"]
        == whole["matrix"]["disagreements"]
        == ["tables-2" if mode == "markdown" else "task-2"]
    )
    if mode == "markdown":
        assert [(t["name"], t["model"], t["passed"]) for t in merged["tests"]] == [
            (t["name"], t["model"], t["passed"]) for t in whole["tests"]
        ]
    else:
        keep = ("tasks", "runs", "correct", "accuracy", "interval")
        assert {k: merged["qa"][k] for k in keep} == {k: whole["qa"][k] for k in keep}
        assert [
            [(r["model"], r["iteration"], r["correct"], r["answer"]) for r in t["results"]]
            for t in merged["qa"]["task_results"]
        ] == [
            [(r["model"], r["iteration"], r["correct"], r["answer"]) for r in t["results"]]
            for t in whole["qa"]["task_results"]
        ]


def test_a_run_always_lands_in_the_same_shard(lab: ScriptedAnthropic):
    """The hash is sha256 of the run's identity, not Python's salted hash(): another process
    (another CI runner) picks the same runs."""
    path = suite(lab.folder, cases=9)
    _, _, _, here = tool_run(lab, "--csv", path, "--shard", "2/3", "--dry-run")
    chosen = [
        job.identity
        for job in ToolUseRunner(E.load_csv_suite(path), []).jobs()
        if in_shard(job, (2, 3))
    ]
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    code = (
        "import evaluator as E, json, sys; "
        "from claude_tool_evaluator.pipeline import in_shard; "
        "from claude_tool_evaluator.runners.tool_use import ToolUseRunner; "
        "cases = E.load_csv_suite(sys.argv[1]); "
        "print(json.dumps([list(j.identity) for j in ToolUseRunner(cases, []).jobs() "
        "if in_shard(j, (2, 3))]))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert [tuple(x) for x in json.loads(other.stdout)] == chosen and 0 < len(chosen) < 9
    jobs = [Job(("case", i, "h", "m"), None, (f"case_{i}", 1, "m")) for i in range(3000)]
    sizes = [sum(in_shard(job, (k, 3)) for job in jobs) for k in (1, 2, 3)]
    assert sum(sizes) == 3000 and all(900 < size < 1100 for size in sizes), sizes


@pytest.fixture
def pieces(lab: ScriptedAnthropic) -> tuple[ScriptedAnthropic, Path, list[Path]]:
    path = suite(lab.folder, cases=6)
    return lab, path, shard_files(lab, path, 3)


def rewrite(path: Path, change) -> Path:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "shard 3/3 is missing: 2 of 3 given"),
        ("twice", "are both shard 1/3: the same runs twice"),
        ("overlap", "overlapping pieces"),
        ("other-suite", "ran different suites (suite hash "),
        ("other-options", "ran with different options (--threshold: "),
        ("other-models", f"ran different models ({STRONG} vs {FAST})"),
        ("not-a-shard", "not the results of a shard"),
        ("not-json", "results file is not valid JSON"),
        ("not-the-schema", "does not match the results schema"),
        ("interrupted", "this shard was interrupted"),
        ("suite-edited", "the suite here is not the one the pieces ran"),
        ("one-piece", "merge needs the results files of at least two shards"),
    ],
)
def test_merge_refuses_pieces_that_are_not_one_run(pieces, case: str, message: str):
    api, path, (one, two, three) = pieces
    given = [one, two, three]
    if case == "missing":
        given = [one, two]
    elif case == "twice":
        given = [one, one, two, three]
    elif case == "overlap":  # shard 3's file holding a run of shard 1 as well
        extra = json.loads(one.read_text())["results"][0]
        rewrite(three, lambda d: d["results"].append(extra))
    elif case == "other-suite":
        other = suite(path.parent, cases=5, name="other.csv")
        given = [one, two, shard_files(api, other, 3, prefix="other")[2]]
    elif case == "other-options":
        given = [one, two, shard_files(api, path, 3, "--threshold", "0.5", prefix="lenient")[2]]
    elif case == "other-models":
        given = [one, two, shard_files(api, path, 3, "--model", FAST, prefix="fast")[2]]
    elif case == "not-a-shard":
        tool_run(api, "--csv", path, "-o", "whole.json")
        given = [one, two, Path("whole.json")]
    elif case == "not-json":
        three.write_text("{not json")
    elif case == "not-the-schema":
        rewrite(three, lambda d: d["summary"].pop("cases"))
    elif case == "interrupted":
        rewrite(three, lambda d: d["metadata"].update(interrupted=True))
    elif case == "suite-edited":
        path.write_text(
            path.read_text().replace("list_warehouse_tables\ncase_2", "describe_table\ncase_2")
        )
    elif case == "one-piece":
        given = [one]
    code, stdout, stderr, sent = run(
        api, "--merge", *given, "-o", "merged.json", "--report", "merged.md"
    )
    line = one_error_line(code, stderr)
    assert message in line, line
    assert (
        sent == []
        and stdout == ""
        and not Path("merged.json").exists()
        and not Path("merged.md").exists()
    )


def test_merge_takes_only_writers(pieces):
    api, path, files = pieces
    code, _, stderr, _ = run(api, "--merge", *files, "--model", FAST)
    assert "--model does not apply to --merge" in one_error_line(code, stderr)
    code, _, stderr, _ = run(api, "--merge", *files, "-o", files[0])
    assert "writing it would destroy it" in one_error_line(code, stderr)


def test_merge_of_summary_only_shards_reads_their_results_lines(lab: ScriptedAnthropic):
    path = suite(lab.folder, cases=6)
    tool_run(lab, "--csv", path, "-o", "whole.json")
    files = shard_files(lab, path, 2, "--summary-only")
    assert all(json.loads(f.read_text())["results"] == [] for f in files)
    code, _, stderr, _ = run(lab, "--merge", *files, "-o", "merged.json")
    merged, whole = (json.loads(Path(p).read_text()) for p in ("merged.json", "whole.json"))
    assert verdicts(merged) == verdicts(whole) and run_keys(merged) == run_keys(whole), stderr


# ============================================================================ skills: --trigger-model twice
def claude_code_model(activates: bool):
    """Claude Code's model: calls the Skill tool for SQL questions when `activates`, else answers."""

    def respond(body: dict) -> dict:
        if ends_with_tool_result(body):
            return reply(text("Use identifies and anonymous_id, joined with COALESCE."))
        listed = "warehouse-sql: Writes, explains and fixes SQL" in json.dumps(
            body.get("messages", [])
        )
        if activates and listed and "sql" in user_query(body).lower():
            return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
        return reply(
            text(
                "Join identifies on anonymous_id."
                if activates
                else "Here is an answer without any skill."
            )
        )

    return respond


OPUS = "claude-opus-5-5"
POSITIVE, NEGATIVE = (
    "Write a SQL query for weekly revenue per country",
    "Tell me a joke about databases",
)


def claude_installed() -> bool:
    try:
        find_claude_bin(os.environ.get("CLAUDE_BIN"))
    except E.InputError:
        return False
    return True


@pytest.mark.skipif(
    not claude_installed(), reason="the Claude Code CLI is not installed (npm install)"
)
def test_two_trigger_models_through_claude_code_side_by_side_and_sharded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    trigger = tmp_path / "warehouse-sql-trigger.md"
    trigger.write_text(
        f'---\nname: warehouse-sql-trigger\ntype: trigger\n---\n\n# Positive Triggers\n\n- "{POSITIVE}"\n'
        f'\n# Negative Triggers\n\n- "{NEGATIVE}"\n',
        encoding="utf-8",
    )
    knowledge = tmp_path / "stitching.md"
    knowledge.write_text(
        "---\nname: stitching\ntype: knowledge\nconcepts: [identifies, anonymous_id]\ntimeout: 60\n"
        "---\n\n# Prompt\n\nHow do I stitch anonymous events to users?\n",
        encoding="utf-8",
    )
    for folder in ("home", "work"):
        (tmp_path / folder).mkdir()
    with ScriptedAnthropic(
        responder=per_model({OPUS: claude_code_model(True), FAST: claude_code_model(False)})
    ) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.chdir(tmp_path / "work")
        line = [
            "--skill",
            ROOT / "examples" / "skills" / "warehouse-sql",
            "--trigger",
            trigger,
            "--tests",
            knowledge,
            "--runs",
            "1",
            "--trigger-model",
            OPUS,
            "--trigger-model",
            FAST,
            "--model",
            OPUS,
            "--model",
            FAST,
        ]
        dry = run(api, *line, "--dry-run")
        assert dry[0] == 0 and dry[3] == [] and "runs: 6" in dry[1] + dry[2], dry[2]
        assert (
            all(f"cost on {m}: about $" in dry[1] + dry[2] for m in (OPUS, FAST))
            and "cost in all" in dry[1] + dry[2]
        )
        code, stdout, stderr, sent = run(api, *line, "-o", "whole.json", "--report", "whole.md")
        assert {b["model"] for b in sent} == {OPUS, FAST}, stderr
        document = json.loads(Path("whole.json").read_text())
        assert code == 1 and document["metadata"]["trigger_models"] == [OPUS, FAST]
        assert document["metadata"]["models"] == [OPUS, FAST]
        assert sorted((r["test"], r["query"], r["model"]) for r in document["results"]) == sorted(
            [("trigger", q, m) for q in (POSITIVE, NEGATIVE) for m in (OPUS, FAST)]
            + [("stitching", "How do I stitch anonymous events to users?", m) for m in (OPUS, FAST)]
        )
        assert {
            (t["name"], t["model"]): t["passed"]
            for t in document["tests"]
            if t["type"] == "knowledge"
        } == {("stitching", OPUS): True, ("stitching", FAST): False}
        scores = {s["model"]: s for s in document["trigger_scores"]}
        assert scores[OPUS]["triggerScore"] == 100 and scores[FAST]["triggerScore"] == 0
        matrix = document["matrix"]
        assert matrix["disagreements"] == [f"warehouse-sql: {POSITIVE}", "stitching"]
        assert all(
            (r["passed_on"], r["failed_on"]) == ([OPUS], [FAST])
            for r in matrix["cases"]
            if r["disagree"]
        )
        assert "**Pass on one model, fail on another (2)**" in Path("whole.md").read_text()
        assert (
            f"differs by model: warehouse-sql: {POSITIVE}: passes on {OPUS}, fails on {FAST}"
            in " ".join((stdout + stderr).split())
        )
        for index in (1, 2):
            run(api, *line, "--shard", f"{index}/2", "-o", f"part-{index}.json")
        code_merged, _, stderr, sent = run(
            api, "--merge", "part-1.json", "part-2.json", "-o", "merged.json"
        )
        assert Path("merged.json").exists(), stderr
        merged = json.loads(Path("merged.json").read_text())
        assert sent == [] and code_merged == code, stderr
        assert [
            (c["name"], c["model"], c["passed"], c["passes"], c["runs"]) for c in merged["cases"]
        ] == [
            (c["name"], c["model"], c["passed"], c["passes"], c["runs"]) for c in document["cases"]
        ]
        assert [
            {k: s[k] for k in ("skill", "model", "triggerScore", "positivesActivated")}
            for s in merged["trigger_scores"]
        ] == [
            {k: s[k] for k in ("skill", "model", "triggerScore", "positivesActivated")}
            for s in document["trigger_scores"]
        ]
        assert merged["matrix"]["disagreements"] == matrix["disagreements"]
        assert merged["metadata"]["claude_version"] == document["metadata"]["claude_version"]
