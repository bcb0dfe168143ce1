"""CSV regression suites: loading (and refusing) suite files, every verdict reason end to end
through the real SDK and the example server, statistics checked by hand, reports, JUnit,
--compare and run_tests.py."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER, ROOT, invoke
from fake_anthropic import error, reply, text, tool_use

import evaluator
import test_constants as C
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.loaders.csv_suites import ARGS_MATCH_MODES, ORDER_MODES
from claude_tool_evaluator.run_types import ToolCall, Transcript
from claude_tool_evaluator.scoring.statistics import (
    pass_at_k,
    pass_hat_k,
    percentile,
    tool_selection_stats,
    wilson_interval,
)

HEADER = (
    "test_name,user_prompt,expected_tools,forbidden_tools,description,expected_args,args_match,order,"
    "max_tool_calls,min_tool_calls,expect_no_tools,tags"
)


def by_prompt(scripts: dict[str, list[dict]]):
    """A responder: the first user message picks the script, the number of assistant turns
    so far picks the step; past the end, Claude just says it is done."""

    def respond(body: dict) -> dict:
        first = body["messages"][0]["content"]
        prompt = first if isinstance(first, str) else first[0].get("text", "")
        steps = scripts.get(prompt)
        if steps is None:
            return reply(text("I don't know that test."))
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return steps[step] if step < len(steps) else reply(text("Done."))

    return respond


def write_suite(path: Path, rows: list[str]) -> Path:
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- every verdict reason
VERDICT_ROWS = [
    "good,good prompt,about_profiles,run_sql_query,passes,,,,,,,smoke",
    "missing,missing prompt,get_existing_connections,,,,,,,,,",
    "forbidden,forbidden prompt,list_warehouse_tables,run_sql_query,,,,,,,,",
    'args,args prompt,describe_table,,,"{""describe_table"": {""table"": ""orders""}}",partial,,,,,',
    'args_exact,exact prompt,describe_table,,,"{""describe_table"": {""table"": ""orders""}}",exact,,,,,',
    'strict,strict prompt,"list_warehouse_tables,describe_table",,,,,strict,,,,',
    'in_order,in order prompt,"list_warehouse_tables,describe_table",,,,,in_order,,,,',
    "subset,subset prompt,about_profiles,,,,,subset,,,,",
    "too_many,too many prompt,,,,,,,1,,,",
    "too_few,too few prompt,,,,,,,,2,,",
    "schema,schema prompt,run_sql_query,,,,,,,,,",
    "no_tools,no tools prompt,,,,,,,,,true,irrelevance",
    "api_error,api error prompt,about_profiles,,,,,,,,,",
]
VERDICT_SCRIPTS = {
    "good prompt": [reply(tool_use("about_profiles"))],
    "missing prompt": [reply(tool_use("about_profiles"))],
    "forbidden prompt": [
        reply(tool_use("list_warehouse_tables")),
        reply(tool_use("run_sql_query", {"sql": "select 1"})),
    ],
    "args prompt": [reply(tool_use("describe_table", {"table": " ORDERS "}))],
    "exact prompt": [reply(tool_use("describe_table", {"table": "users"}))],
    "strict prompt": [
        reply(tool_use("describe_table", {"table": "users"})),
        reply(tool_use("list_warehouse_tables")),
    ],
    "in order prompt": [
        reply(tool_use("list_warehouse_tables")),
        reply(tool_use("about_profiles")),
        reply(tool_use("describe_table", {"table": "users"})),
    ],
    "subset prompt": [reply(tool_use("about_profiles"), tool_use("get_existing_connections"))],
    "too many prompt": [reply(tool_use("about_profiles"), tool_use("about_profiles"))],
    "too few prompt": [reply(tool_use("about_profiles"))],
    "schema prompt": [reply(tool_use("run_sql_query", {"sql": 42, "dialect": "postgres"}))],
    "no tools prompt": [reply(tool_use("about_profiles"))],
    "api error prompt": [error(400, "invalid_request_error", "bad request for this case")],
}


def test_every_verdict_reason_end_to_end(cli, api, tmp_path):
    api.responder = by_prompt(VERDICT_SCRIPTS)
    suite = write_suite(tmp_path / "suite.csv", VERDICT_ROWS)
    out, report, csv_out, junit = (tmp_path / n for n in ("r.json", "r.md", "r.csv", "r.xml"))
    code, stdout, stderr = cli(
        "--csv",
        str(suite),
        "--server-module",
        str(EXAMPLE_SERVER),
        "-o",
        str(out),
        "--report",
        str(report),
        "--csv-out",
        str(csv_out),
        "--junit",
        str(junit),
    )
    assert code == 1, stderr
    document = json.loads(out.read_text())
    reasons = {r["test_name"]: r["verdict"]["reasons"] for r in document["results"]}
    assert reasons["good"] == []
    assert reasons["missing"] == ["missing expected tool get_existing_connections"]
    assert reasons["forbidden"] == ["forbidden tool run_sql_query called (turn 2)"]
    assert reasons["args"] == []  # partial match trims and ignores case
    assert reasons["args_exact"] == [
        'argument mismatch for describe_table (exact): expected {"table": "orders"}, '
        'got {"table": "users"}'
    ]
    assert reasons["strict"] == [
        "wrong order (strict): expected list_warehouse_tables -> describe_table, "
        "got describe_table -> list_warehouse_tables"
    ]
    assert reasons["in_order"] == []  # others may come between
    assert reasons["subset"] == [
        "tool(s) outside the expected set (subset): get_existing_connections"
    ]
    assert reasons["too_many"] == ["too many tool calls: 2 > max 1"]
    assert reasons["too_few"] == ["too few tool calls: 1 < min 2"]
    assert reasons["schema"] == [
        "run_sql_query got invented parameter(s) dialect",
        "run_sql_query arguments do not match its schema at sql: 42 is not of type 'string'",
    ]
    assert reasons["no_tools"] == ["expected no tool call, but called about_profiles"]
    assert reasons["api_error"][0].startswith("run failed: BadRequestError (400)")
    assert "missing expected tool about_profiles" in reasons["api_error"]

    summary = document["summary"]
    assert (summary["cases"], summary["passed"], summary["failed"], summary["run_errors"]) == (
        13,
        3,
        10,
        1,
    )
    assert [c["name"] for c in document["cases"]] == [
        row.split(",")[0] for row in VERDICT_ROWS
    ]  # file order
    tools = {t["tool"]: t for t in summary["tools"]}
    assert (
        tools["about_profiles"]["false_positives"] >= 3
        and tools["get_existing_connections"]["false_negatives"] == 1
    )
    assert summary["confusion"]["get_existing_connections"] == {"about_profiles": 1}

    markdown = report.read_text()
    assert markdown.startswith("## ❌ Tool-use evaluation: 3/13 cases passed")
    assert (
        markdown.index("### Failures")
        < markdown.index("### All cases")
        < markdown.index("### Tool selection")
    )
    assert (
        "forbidden tool run_sql_query called (turn 2)" in markdown and "### Confusion" in markdown
    )

    rows = list(csv.DictReader(io.StringIO(csv_out.read_text())))
    assert len(rows) == 13 and rows[0]["verdict"] == "pass" and rows[1]["verdict"] == "fail"
    assert rows[2]["tools_called"] == "list_warehouse_tables,run_sql_query"

    root = ET.parse(junit).getroot()
    suite_element = root.find("testsuite")
    assert (
        suite_element.get("tests"),
        suite_element.get("failures"),
        suite_element.get("errors"),
    ) == ("13", "9", "1")
    cases = {c.get("name"): c for c in suite_element.iter("testcase")}
    assert cases["good"].find("failure") is None
    assert "missing expected tool get_existing_connections" in cases["missing"].find("failure").text
    assert cases["api_error"].find("error") is not None


def test_tag_filter_and_all_pass_exit_code(cli, api, tmp_path):
    api.responder = by_prompt(VERDICT_SCRIPTS)
    suite = write_suite(tmp_path / "suite.csv", VERDICT_ROWS)
    code, out, err = cli(
        "--csv", str(suite), "--server-module", str(EXAMPLE_SERVER), "--tag", "smoke", "--json"
    )
    assert code == 0, err
    assert [r["test_name"] for r in json.loads(out)["results"]] == ["good"]


def test_iterations_give_pass_rates_intervals_and_flaky_cases(cli, api, tmp_path):
    calls = {"n": 0}

    def alternating(body: dict) -> dict:
        if len(body["messages"]) > 1:
            return reply(text("Done."))
        calls["n"] += 1
        return reply(tool_use("about_profiles" if calls["n"] % 3 else "get_existing_connections"))

    api.responder = alternating
    suite = write_suite(
        tmp_path / "suite.csv", ["flaky,tell me about profiles,about_profiles,,,,,,,,,"]
    )
    out = tmp_path / "r.json"
    code, stdout, stderr = cli(
        "--csv",
        str(suite),
        "--server-module",
        str(EXAMPLE_SERVER),
        "-i",
        "3",
        "--concurrency",
        "1",
        "-o",
        str(out),
    )
    case = json.loads(out.read_text())["cases"][0]
    assert (case["runs"], case["passes"], case["flaky"], case["passed"]) == (3, 2, True, False)
    assert case["pass_rate"] == pytest.approx(0.6667, abs=1e-4)
    assert case["interval"] == pytest.approx([0.2077, 0.9385], abs=1e-4)
    assert (case["pass_at_k"], case["pass_hat_k"]) == (1.0, 0.0)
    assert code == 1
    calls["n"] = 0
    code, stdout, stderr = cli(
        "--csv",
        str(suite),
        "--server-module",
        str(EXAMPLE_SERVER),
        "-i",
        "3",
        "--concurrency",
        "1",
        "--threshold",
        "0.6",
        "-o",
        str(out),
    )
    assert code == 0 and json.loads(out.read_text())["cases"][0]["passed"] is True


# ----------------------------------------------------------------------------- statistics, by hand
def test_wilson_interval_against_hand_computed_values():
    # 8/10: p=.8, z=1.959964: centre=(.8+.19207)/1.38415=.71674, half=.22616 -> [.4902, .9433]
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 3) == pytest.approx((0.0, 0.5615), abs=1e-4)
    assert wilson_interval(5, 5) == pytest.approx((0.5655, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_pass_at_k_and_pass_hat_k_against_hand_computed_values():
    # n=5, c=3: pass@2 = 1 - C(2,2)/C(5,2) = 1 - 1/10; pass^2 = C(3,2)/C(5,2) = 3/10
    assert pass_at_k(5, 3, 2) == pytest.approx(0.9)
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0
    assert pass_hat_k(5, 5, 5) == 1.0 and pass_hat_k(5, 4, 5) == 0.0
    assert percentile([1, 2, 3, 4], 0.5) == 2.5 and percentile([10], 0.95) == 10


def test_tool_stats_precision_recall_f1():
    case = run_types.TestCase("c", "p", expected_tools=["a", "b"])
    runs = [
        Transcript(case, 1, "m", tool_calls=[ToolCall("a", {}), ToolCall("c", {})]),
        Transcript(case, 2, "m", tool_calls=[ToolCall("a", {}), ToolCall("b", {})]),
    ]
    stats = {s.tool: s for s in tool_selection_stats(runs)}
    assert (stats["a"].precision, stats["a"].recall) == (1.0, 1.0)
    assert (stats["b"].true_positives, stats["b"].false_negatives, stats["b"].recall) == (1, 1, 0.5)
    assert (stats["c"].false_positives, stats["c"].precision, stats["c"].f1) == (1, 0.0, 0.0)
    assert stats["b"].f1 == pytest.approx(2 * 1.0 * 0.5 / 1.5)


# ----------------------------------------------------------------------------- malformed suites
def suite_error(tmp_path: Path, content: bytes | str, api=None) -> str:
    path = tmp_path / "bad.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, out, err = invoke("--csv", str(path), "--server-module", str(EXAMPLE_SERVER))
    assert code == 2, err
    assert "Traceback" not in err and all(
        line.startswith("error: ") for line in err.strip().splitlines()
    )
    return err


@pytest.mark.parametrize(
    "content, expected",
    [
        (
            "test_name,user_prompt\na,hello\nb,hi,extra\n",
            "bad.csv:3: row has 3 fields, the header has 2",
        ),
        ("name,user_prompt\na,hello\n", "bad.csv:1: unknown column 'name'"),
        (
            "test_name,expected_tools\na,about_profiles\n",
            "bad.csv:1: the header needs test_name and user_prompt",
        ),
        ("test_name,user_prompt\na,hello\nb,   \n", "bad.csv:3: test 'b' has an empty prompt"),
        (
            "test_name,user_prompt\na,hello\nb,x\na,again\n",
            "bad.csv:4: duplicate test_name 'a' (first on line 2)",
        ),
        (
            'test_name,user_prompt,expected_args\na,hello,"{not json"\n',
            "bad.csv:2: expected_args is not valid JSON",
        ),
        (
            "test_name,user_prompt,order\na,hello,sideways\n",
            "bad.csv:2: order 'sideways' is not one of",
        ),
        (
            "test_name,user_prompt,max_tool_calls\na,hello,many\n",
            "bad.csv:2: max_tool_calls 'many' is not a whole number",
        ),
        ("", "bad.csv:1: the CSV file is empty"),
        ("test_name,user_prompt\n", "bad.csv:2: the CSV suite has a header but no test rows"),
        (
            b"test_name,user_prompt\na,caf\xe9\n",
            "bad.csv:2: CSV suite is not valid UTF-8 (byte 0xe9)",
        ),
        ('test_name,user_prompt\na,"unterminated\n', "bad.csv"),
    ],
)
def test_malformed_suites_give_one_line_with_file_and_line(tmp_path, no_api_key, content, expected):
    assert expected in suite_error(tmp_path, content)


def test_all_problems_of_a_file_are_reported_at_once(tmp_path, no_api_key):
    err = suite_error(tmp_path, "test_name,user_prompt\na,\nb,x,y\nc,ok\nc,ok\n")
    assert [Path(line.split(": ", 2)[1]).name for line in err.strip().splitlines()] == [
        "bad.csv:2",
        "bad.csv:3",
        "bad.csv:5",
    ]


def test_unknown_tool_is_caught_before_any_model_call(cli, api, tmp_path):
    suite = write_suite(tmp_path / "suite.csv", ["typo,hello,get_existing_conections,,,,,,,,,"])
    code, out, err = cli("--csv", str(suite), "--server-module", str(EXAMPLE_SERVER))
    assert code == 2
    assert "suite.csv:2: test 'typo' names tool 'get_existing_conections'" in err
    assert "did you mean 'get_existing_connections'?" in err
    assert api.message_requests == []


def test_bom_quoted_commas_and_newlines_load(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_bytes(
        "\ufefftest_name,user_prompt,expected_tools\n"
        'multi,"First line, with a comma\nsecond line","about_profiles,search_profiles_docs"\n'
        "next,plain,\n".encode()
    )
    cases = evaluator.load_csv_suite(path)
    assert cases[0].prompt == "First line, with a comma\nsecond line"
    assert cases[0].expected_tools == ["about_profiles", "search_profiles_docs"]
    assert (cases[0].line, cases[1].line) == (2, 4)


def test_example_suite_loads_and_covers_every_column_and_mode():
    cases = evaluator.load_csv_suite(ROOT / "examples" / "test_queries.csv")
    assert len(cases) >= 15
    assert {c.order for c in cases} == set(ORDER_MODES)
    assert {c.args_match for c in cases if c.expected_args} == set(ARGS_MATCH_MODES)
    assert sum(c.expect_no_tools for c in cases) >= 2
    assert any(c.max_tool_calls is not None for c in cases) and any(c.min_tool_calls for c in cases)
    assert any(c.forbidden_tools for c in cases) and all(c.tags for c in cases)


# ----------------------------------------------------------------------------- compare
def results_file(path: Path, cases: list[tuple[str, int, int]], cost: float) -> Path:
    """A results document of the current schema, as a CSV suite run writes it."""
    passed = sum(p == r for _, p, r in cases)
    document = {
        "schema_version": C.SCHEMA_VERSION,
        "passed": passed == len(cases),
        "metadata": {
            "total_results": 0,
            "generated_at": "2026-01-01T00:00:00+00:00",
            "mode": "batch",
            "evaluation": "csv",
            "model": "claude-sonnet-5-5",
        },
        "summary": {
            "cases": len(cases),
            "passed": passed,
            "failed": len(cases) - passed,
            "pass_rate": passed / len(cases),
            "cost_usd": cost,
        },
        "results": [],
        "cases": [
            {
                "name": n,
                "kind": "case",
                "passes": p,
                "runs": r,
                "pass_rate": p / r,
                "passed": p == r,
                "reasons": {} if p == r else {"missing expected tool x": r - p},
            }
            for n, p, r in cases
        ],
    }
    path.write_text(json.dumps(document))
    return path


def test_compare_finds_regressions_and_fixes(cli, tmp_path):
    # a flips 10/10 -> 0/10 and b the other way: Fisher's two-sided p is 2 / C(20, 10) =
    # 1.08e-05, times the 4 cases compared (Holm) = 4.33e-05; d's 3/3 -> 2/3 is within noise
    old = results_file(
        tmp_path / "old.json",
        [("a", 10, 10), ("b", 0, 10), ("c", 3, 3), ("d", 3, 3), ("gone", 3, 3)],
        0.30,
    )
    new = results_file(
        tmp_path / "new.json",
        [("a", 0, 10), ("b", 10, 10), ("c", 3, 3), ("d", 2, 3), ("added", 3, 3)],
        0.36,
    )
    report = tmp_path / "cmp.md"
    code, out, err = cli("--compare", str(old), str(new), "--report", str(report))
    assert code == 1
    markdown = report.read_text()
    assert markdown.startswith(
        "## ❌ Comparison: 1 regression(s), 1 fix(es), 1 within noise, 1 removed, 1 added"
    )
    # a and b tie at the smallest p: Holm tests both at alpha / 4, their intervals at 98.75 %
    holm = "p 4.33e-05 (Holm over 4 cases)"
    assert f"| `a` | regression | 10/10 | 0/10 | -100.0 pts (98.8% -100.0…-45.7), {holm} |" in (
        markdown
    )
    assert f"| `b` | fixed | 0/10 | 10/10 | +100.0 pts (98.8% +45.7…+100.0), {holm} |" in markdown
    assert "| `d` | within noise | 3/3 | 2/3 | -33.3 pts" in markdown
    assert "| `added` | added |" in markdown and "| `gone` | removed |" in markdown
    assert "| Cost | $0.3000 | $0.3600 | +0.0600 |" in markdown
    assert "| Passed | 4/5 (80%, 95% 38%–96%) | 3/5 (60%, 95% 23%–88%) |" in markdown
    code, out, err = cli("--compare", str(old), str(old))
    assert code == 0
    code, out, err = cli("--compare", str(old), str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json" in err


# ----------------------------------------------------------------------------- run_tests.py
def test_run_tests_runs_the_example_suite_and_summarises(api, tmp_path):
    api.responder = lambda body: reply(
        text("Done.")
    )  # no tool calls: only the irrelevance cases pass
    env = dict(os.environ, ANTHROPIC_BASE_URL=api.url)
    process = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run_tests.py"),
            "--results-dir",
            str(tmp_path),
            "--",
            "--server-module",
            str(EXAMPLE_SERVER),
            "--concurrency",
            "8",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert process.returncode == 1, process.stderr
    assert "FAIL  test_queries.csv: 3/16 cases passed" in process.stdout
    assert (tmp_path / "test_queries.json").exists() and (tmp_path / "test_queries.md").exists()
