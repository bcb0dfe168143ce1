"""Grading outcomes: the LLM judge (a `rubric` column, `# Rubric`, `answer_match: judge`), state
checks after each run (`verify`), and tolerant argument matching (`args_ignore`,
`args_match: exact_with_defaults`).

The judge goes through the real SDK to the scripted server, which records the forced
`tool_choice` and honours it as the API does; the verify commands are real processes."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER, TEST_API_KEY, invoke
from fake_anthropic import error, forced_tool, reply, text, tool_use

import evaluator as E
import prompts
import test_constants as C
from claude_tool_evaluator.grading import parse_grade
from claude_tool_evaluator.run_types import Usage, cost_usd
from claude_tool_evaluator.scoring.tool_use import args_match

C = C
PROMPT = "Which tables are in my warehouse?"
GOOD = "Your warehouse holds the orders, users, identifies, tracks and pages tables."
RUBRIC = "The answer must name the orders table and must not invent tables."
EVIDENCE = "The final answer lists only users and widgets; 'widgets' is not in the tool result."


def run_json(*args: object) -> tuple[int, dict, str]:
    code, out, err = invoke(*args, "--json")
    assert out.strip(), err
    return code, json.loads(out), err


def grade(passed: bool, score: float, evidence: str, usage: dict | None = None) -> dict:
    return reply(
        tool_use("grade", {"passed": passed, "score": score, "evidence": evidence}), usage=usage
    )


def is_judge(body: dict) -> bool:
    return forced_tool(body) == "grade"


def model(answer: str = GOOD, verdict: dict | None = None):
    """Claude lists the tables, then answers; the judge (a forced `grade` call) gives `verdict`."""

    def respond(body: dict) -> dict:
        if is_judge(body):
            return verdict or grade(True, 1.0, "It names orders, as the tool listed.")
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return reply(text(answer))
        return reply(tool_use("list_warehouse_tables"))

    return respond


def judge_requests(api) -> list[dict]:
    return [b for b in api.message_requests if is_judge(b)]


def suite(path: Path, header: str, *rows: str) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def rubric_suite(tmp_path: Path, rubric: str = RUBRIC) -> Path:
    return suite(
        tmp_path / "graded.csv",
        "test_name,user_prompt,expected_tools,rubric",
        f'tables,{PROMPT},list_warehouse_tables,"{rubric}"',
    )


def server() -> list[str]:
    return ["--server-module", str(EXAMPLE_SERVER)]


def cost_of(usage: dict | None, model_id: str) -> float:
    return cost_usd(Usage(**usage), model_id) if usage else 0.0


# ============================================================================ the judge
def test_judge_is_forced_to_grade_and_a_failed_verdict_fails_the_case_with_its_evidence(
    api, tmp_path
):
    api.responder = model("The tables are users and widgets.", grade(False, 0.2, EVIDENCE))
    out, report, junit, rows = (tmp_path / n for n in ("r.json", "r.md", "r.xml", "r.csv"))
    code, document, err = run_json(
        "--csv",
        rubric_suite(tmp_path),
        *server(),
        "-o",
        out,
        "--report",
        report,
        "--junit",
        junit,
        "--csv-out",
        rows,
    )
    assert code == 1, err
    [request] = judge_requests(api)
    assert request["tool_choice"] == {"type": "tool", "name": "grade"}
    assert [t["name"] for t in request["tools"]] == ["grade"]
    assert request["tools"][0]["input_schema"]["required"] == ["passed", "score", "evidence"]
    assert request["model"] == C.DEFAULT_JUDGE_MODEL == C.FAST_MODEL
    assert request["system"][0]["text"] == prompts.JUDGE_SYSTEM_PROMPT
    shown = request["messages"][0]["content"]
    # the question, the criteria, a compact trajectory (call, arguments, start of the result), the answer
    assert PROMPT in shown and RUBRIC in shown and "The tables are users and widgets." in shown
    assert "1. list_warehouse_tables({}) -> " in shown and "rudder_events.orders" in shown

    [result] = document["results"]
    assert result["grades"] == {"judge": {"passed": False, "score": 0.2, "evidence": EVIDENCE}}
    reason = f"judge: failed (score 0.20): {EVIDENCE}"
    assert result["verdict"] == {"passed": False, "reasons": [reason]}
    assert document["cases"][0]["reasons"] == {reason: 1} and result["error"] is None
    # every report carries the evidence
    assert "widgets" in report.read_text() and "score 0.20" in report.read_text()
    assert EVIDENCE in ET.parse(junit).getroot().find(".//failure").text
    assert list(csv.DictReader(io.StringIO(rows.read_text())))[0]["reasons"] == reason
    assert "judge: failed" in err
    E.results_document_model().model_validate_json(out.read_text())


def test_a_passed_verdict_passes_and_judge_model_picks_the_judge(api, tmp_path):
    api.responder = model()
    code, document, err = run_json(
        "--csv", rubric_suite(tmp_path), *server(), "--judge-model", "claude-opus-5-5"
    )
    assert code == 0, err
    assert [r["model"] for r in judge_requests(api)] == ["claude-opus-5-5"]
    assert document["results"][0]["grades"]["judge"]["passed"] is True
    assert document["results"][0]["judge_model"] == "claude-opus-5-5"


def test_the_cache_prevents_a_second_identical_call_and_cost_includes_the_judge(api, tmp_path):
    judge_usage = {
        "input_tokens": 2000,
        "output_tokens": 300,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    api.responder = model(verdict=grade(True, 0.9, "Names orders.", usage=judge_usage))
    code, document, err = run_json("--csv", rubric_suite(tmp_path), *server(), "-i", "3")
    assert code == 0, err
    assert len(judge_requests(api)) == 1, "three identical runs, one judge call"
    results = document["results"]
    assert all(
        r["grades"]["judge"] == {"passed": True, "score": 0.9, "evidence": "Names orders."}
        for r in results
    )
    paid = [r for r in results if r["judge_model"]]
    assert len(paid) == 1 and paid[0]["judge_usage"] == judge_usage
    judge_cost = cost_of(judge_usage, C.DEFAULT_JUDGE_MODEL)
    for r in results:
        conversation = cost_usd(Usage(**r["usage"]), r["model"])
        assert r["cost_usd"] == pytest.approx(
            conversation + (judge_cost if r["judge_model"] else 0), abs=2e-6
        )
    assert document["summary"]["cost_usd"] == pytest.approx(
        sum(r["cost_usd"] for r in results), abs=1e-5
    )
    assert document["summary"]["cost_usd"] > judge_cost


def test_different_runs_are_judged_separately(api, tmp_path):
    answers = iter(["First: orders and users.", "Second: orders, users and pages."])
    state = {}

    def respond(body: dict) -> dict:
        if is_judge(body):
            return grade(True, 1.0, "fine")
        last = body["messages"][-1]["content"]
        if isinstance(last, list):
            return reply(text(state.setdefault(id(body), next(answers))))
        return reply(tool_use("list_warehouse_tables"))

    api.responder = respond
    code, document, err = run_json(
        "--csv", rubric_suite(tmp_path), *server(), "-i", "2", "--concurrency", "1"
    )
    assert code == 0, err
    assert len(judge_requests(api)) == 2 and all(r["judge_model"] for r in document["results"])


def test_judge_cost_counts_against_max_cost(api, tmp_path):
    expensive = {"output_tokens": 100_000}  # $0.50 on the fast model: far more than a conversation
    api.responder = model(verdict=grade(True, 1.0, "fine", usage=expensive))
    answers = iter(["one: orders", "two: orders"])  # distinct runs: each is judged
    base = api.responder

    def respond(body: dict) -> dict:
        last = body["messages"][-1]["content"]
        if not is_judge(body) and isinstance(last, list):
            return reply(text(next(answers)))
        return base(body)

    api.responder = respond
    code, document, err = run_json(
        "--csv",
        rubric_suite(tmp_path),
        *server(),
        "-i",
        "2",
        "--concurrency",
        "1",
        "--max-cost",
        "0.1",
    )
    assert code == 1 and "stopped at --max-cost" in err, err
    assert document["summary"]["not_started"] == 1 and len(document["results"]) == 1
    assert document["results"][0]["cost_usd"] > 0.1


def test_dry_run_estimates_the_judge_calls(cli, api, tmp_path):
    plain = suite(
        tmp_path / "plain.csv",
        "test_name,user_prompt,expected_tools",
        f"tables,{PROMPT},list_warehouse_tables",
    )

    def estimate(path: Path) -> str:
        code, out, err = cli("--csv", path, *server(), "--dry-run", "-i", "3")
        assert code == 0, err
        return " ".join((out + err).split())

    def calls(output: str) -> int:
        return int(output.split("model calls: about ")[1].split(" ")[0].replace(",", ""))

    def dollars(output: str) -> float:
        return float(output.split("cost on claude-sonnet-5-5: about $")[1].split(" ")[0])

    without, judged = estimate(plain), estimate(rubric_suite(tmp_path))
    assert api.message_requests == []
    assert "judge: 3 call(s) on claude-haiku-5-5" in judged and "judge:" not in without
    assert calls(judged) == calls(without) + 3 and dollars(judged) > dollars(without)


def test_a_judge_call_is_retried_like_every_model_call(api, tmp_path):
    failures = iter([error(529, "overloaded_error", headers={"retry-after-ms": "1"})])

    def respond(body: dict) -> dict:
        if is_judge(body):
            return next(failures, grade(True, 1.0, "fine"))
        return model()(body)

    api.responder = respond
    code, document, err = run_json("--csv", rubric_suite(tmp_path), *server(), "--max-retries", "2")
    assert code == 0, err
    assert (
        len(judge_requests(api)) == 2
        and document["results"][0]["grades"]["judge"]["passed"] is True
    )


def test_a_judge_that_keeps_failing_is_an_error_of_the_run_and_retry_errors_reruns_it(
    api, tmp_path
):
    def broken_judge(body: dict) -> dict:
        return (
            error(400, "invalid_request_error", "judge says no")
            if is_judge(body)
            else model()(body)
        )

    api.responder = broken_judge
    out = tmp_path / "r.json"
    code, document, err = run_json("--csv", rubric_suite(tmp_path), *server(), "-o", out)
    assert code == 1, err
    [result] = document["results"]
    assert result["grades"]["judge"]["error"].startswith("BadRequestError (400)")
    assert result["error"].startswith("judge error: BadRequestError (400)")
    assert document["cases"][0]["error"] is True
    api.responder = model()
    code, document, err = run_json(
        "--csv", rubric_suite(tmp_path), *server(), "-o", out, "--retry-errors"
    )
    assert code == 0, err
    assert (
        document["results"][0]["error"] is None
        and document["results"][0]["grades"]["judge"]["passed"]
    )


def test_grades_survive_resume_and_compare_shows_the_evidence(cli, api, tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    api.responder = model()
    assert cli("--csv", rubric_suite(tmp_path), *server(), "-i", "6", "-o", good)[0] == 0
    api.responder = model("users and widgets", grade(False, 0.1, EVIDENCE))
    assert cli("--csv", rubric_suite(tmp_path), *server(), "-i", "6", "-o", bad)[0] == 1
    before = len(api.message_requests)
    code, document, err = run_json(
        "--csv", rubric_suite(tmp_path), *server(), "-i", "6", "-o", bad, "--resume"
    )
    assert code == 1 and len(api.message_requests) == before and "resuming: 6 run(s) kept" in err
    assert document["results"][0]["grades"]["judge"]["evidence"] == EVIDENCE
    assert document["cases"][0]["reasons"] == {f"judge: failed (score 0.10): {EVIDENCE}": 6}
    # six runs a side: 6/6 -> 0/6 is a regression (Fisher's two-sided p = 2 / C(12, 6) = 0.0022)
    code, out, err = cli("--compare", good, bad)
    assert code == 1 and "regression" in out and "widgets" in out


def test_answer_match_judge_grades_the_answer_against_the_expected_one(api, tmp_path):
    api.responder = model(
        "There are five tables.", grade(False, 0.0, "Expected 6 tables, the answer says five.")
    )
    graded = suite(
        tmp_path / "qa.csv",
        "test_name,user_prompt,expected_tools,expected_answer,answer_match",
        f"count,{PROMPT},list_warehouse_tables,six tables,judge",
    )
    code, document, err = run_json("--csv", graded, *server())
    assert code == 1, err
    [request] = judge_requests(api)
    assert (
        "Expected answer" in request["messages"][0]["content"]
        and "six tables" in request["messages"][0]["content"]
    )
    assert document["results"][0]["verdict"]["reasons"] == [
        "judge: failed (score 0.00): Expected 6 tables, the answer says five."
    ]


def test_markdown_rubric_and_verify(api, tmp_path):
    check = tmp_path / "check.py"
    check.write_text("import sys\nprint('state is fine')\n")
    test = tmp_path / "tables.md"
    test.write_text(
        f"---\nname: tables\ntype: task\nverify: {shlex.quote(sys.executable)} {check}\n---\n\n"
        f"# Prompt\n\n{PROMPT}\n\n# Rubric\n\n{RUBRIC}\n"
    )
    loaded = E.load_markdown_test(test)
    assert loaded.rubric == RUBRIC and loaded.verify.endswith("check.py")
    api.responder = model("users and widgets", grade(False, 0.3, EVIDENCE))
    code, document, err = run_json("--tests", test, *server())
    assert code == 1, err
    [result] = document["results"]
    assert result["grades"]["verify"] == {"passed": True, "reason": "state is fine"}
    assert result["verdict"]["reasons"] == [f"judge: failed (score 0.30): {EVIDENCE}"]
    assert document["tests"][0]["passed"] is False
    api.responder = model()
    code, document, err = run_json("--tests", test, *server())
    assert code == 0 and document["tests"][0]["passed"] is True, err


def test_a_graded_test_is_refused_in_skill_runs(cli, tmp_path):
    test = tmp_path / "graded.md"
    test.write_text(f"---\nname: graded\n---\n\n# Prompt\n\n{PROMPT}\n\n# Rubric\n\nBe right.\n")
    skill = Path(E.__file__).parent / "examples" / "skills" / "warehouse-sql"
    code, out, err = cli("--skill", skill, "--tests", test, "--claude-bin", "/bin/true")
    assert code == 2 and err.count("\n") == 1 and "graded in runs against MCP servers only" in err


def test_parse_grade_reads_the_tool_call_never_the_text():
    assert parse_grade(
        [{"type": "text", "text": '{"passed": true, "score": 1, "evidence": "x"}'}]
    ) == {"error": "the judge did not call the grade tool"}
    call = {
        "type": "tool_use",
        "id": "t",
        "name": "grade",
        "input": {"passed": True, "score": 1, "evidence": " ok "},
    }
    assert parse_grade([call]) == {"passed": True, "score": 1.0, "evidence": "ok"}
    assert (
        "no true/false passed"
        in parse_grade([dict(call, input={"passed": "yes", "score": 1})])["error"]
    )
    assert (
        "score from 0 to 1"
        in parse_grade([dict(call, input={"passed": True, "score": 7})])["error"]
    )


# ============================================================================ verify: state checks after each run
def verify_suite(tmp_path: Path, script: str) -> Path:
    path = tmp_path / "check.py"
    path.write_text(script, encoding="utf-8")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"
    return suite(
        tmp_path / "verified.csv",
        "test_name,user_prompt,expected_tools,verify",
        f"tables,{PROMPT},list_warehouse_tables,{command}",
    )


CHECK_INPUT = """\
import json, os, sys
from pathlib import Path
data = sys.stdin.read()
Path(os.environ["EVAL_CASE"] + "-" + os.environ["EVAL_ITERATION"] + ".json").write_text(data)
print("orders still holds", len(json.loads(data)["tools_called"]), "row(s) it should")
print("a second line is not the reason")
sys.exit({code})
"""


def test_a_passing_verify_gets_the_result_json_on_stdin_and_the_case_in_its_env(
    api, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    api.responder = model()
    code, document, err = run_json(
        "--csv", verify_suite(tmp_path, CHECK_INPUT.format(code=0)), *server(), "-i", "2"
    )
    assert code == 0, err
    for result in document["results"]:
        assert result["grades"] == {
            "verify": {"passed": True, "reason": "orders still holds 1 row(s) it should"}
        }
        seen = E.ToolRunResult.model_validate_json(
            (tmp_path / f"tables-{result['iteration']}.json").read_text()
        )
        assert (seen.test_name, seen.iteration, seen.tools_called) == (
            "tables",
            result["iteration"],
            ["list_warehouse_tables"],
        )
        assert seen.agent_reasoning == GOOD


def test_a_failing_verify_fails_the_case_with_its_first_line(api, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    api.responder = model()
    code, document, err = run_json(
        "--csv", verify_suite(tmp_path, CHECK_INPUT.format(code=1)), *server()
    )
    assert code == 1, err
    [result] = document["results"]
    assert result["grades"]["verify"] == {
        "passed": False,
        "reason": "orders still holds 1 row(s) it should",
    }
    assert result["verdict"]["reasons"] == ["verify failed: orders still holds 1 row(s) it should"]
    assert result["error"] is None and document["cases"][0]["error"] is False


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_verify_that_times_out_is_an_error_and_its_process_group_is_killed(api, tmp_path):
    pid_file = tmp_path / "child.pid"
    script = (
        f"import subprocess, time\nchild = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\ntime.sleep(60)\n"
    )
    api.responder = model()
    start = time.monotonic()
    code, document, err = run_json(
        "--csv", verify_suite(tmp_path, script), *server(), "--verify-timeout", "1"
    )
    assert time.monotonic() - start < 20
    assert code == 1, err
    [result] = document["results"]
    assert result["grades"]["verify"] == {"error": "timed out after 1s (process group killed)"}
    assert result["error"] == "verify error: timed out after 1s (process group killed)"
    assert document["cases"][0]["error"] is True
    assert result["verdict"]["reasons"] == [
        "run failed: verify error: timed out after 1s (process group killed)"
    ]
    deadline = time.monotonic() + 5
    while pid_alive(int(pid_file.read_text())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(int(pid_file.read_text())), "the command's own children are killed too"


def test_any_other_exit_is_an_error_and_output_is_redacted(api, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECK_DB_PASSWORD", "db-password-3f9a")  # a secret the command may need
    script = (
        "import os, sys\nprint('password', os.environ['CHECK_DB_PASSWORD'])\n"
        "print('stderr', os.environ['CHECK_DB_PASSWORD'], file=sys.stderr)\nsys.exit(3)\n"
    )
    api.responder = model()
    code, document, err = run_json("--csv", verify_suite(tmp_path, script), *server())
    assert code == 1, err
    [result] = document["results"]
    assert result["grades"]["verify"] == {"error": "exited with 3: stderr [REDACTED]"}
    assert "db-password-3f9a" not in json.dumps(document)


def test_a_verify_command_gets_no_api_credentials(api, tmp_path, monkeypatch):
    """A verify command got the whole environment: a script echoed the key, reversed (which no
    redactor can know), into the results."""
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "auth-token-5a6b7c8d")
    script = (
        "import os\nkey = os.environ.get('ANTHROPIC_API_KEY', '')\n"
        "token = os.environ.get('ANTHROPIC_AUTH_TOKEN', '')\n"
        "print('reversed:', key[::-1] or 'no key', token[::-1] or 'no token')\n"
    )
    api.responder = model()
    code, document, err = run_json("--csv", verify_suite(tmp_path, script), *server())
    assert document["results"][0]["grades"]["verify"] == {
        "passed": True,
        "reason": "reversed: no key no token",
    }
    assert TEST_API_KEY[::-1] not in json.dumps(document)


def test_a_verify_child_that_leaves_its_group_is_ended_too(api, tmp_path):
    """A verify child that calls setsid outlived the timeout (the group kill cannot reach it)."""
    marker = f"{4700 + os.getpid() % 97}.{time.time_ns() % 1000}"
    script = (
        "import subprocess, time\n"
        f"subprocess.Popen(['setsid', 'sleep', '{marker}'], start_new_session=True)\n"
        f"subprocess.Popen('(setsid sleep {marker} &)', shell=True)\n"
        "time.sleep(60)\n"
    )
    api.responder = model()
    code, document, err = run_json(
        "--csv", verify_suite(tmp_path, script), *server(), "--verify-timeout", "2"
    )
    assert document["results"][0]["grades"]["verify"]["error"].startswith("timed out after 2s")
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    left = [line for line in ps.splitlines() if f"sleep {marker}" in line and " Z" not in line]
    assert left == [], left


def test_verify_and_rubric_columns_are_checked_when_the_suite_loads(cli, tmp_path):
    path = suite(
        tmp_path / "bad.csv",
        "test_name,user_prompt,verify,rubric,args_ignore",
        "ok,hi,python check.py --case 'a b',Say hi.,\"*_id,limit\"",
        "bad,hi,python 'unclosed,,",
    )
    code, out, err = cli("--csv", path, *server(), "--dry-run")
    assert code == 2 and err.count("\n") == 1
    assert (
        f'{path}:3: verify "python \'unclosed" is not a command line: No closing quotation' in err
    )
    path = suite(
        tmp_path / "ok.csv",
        "test_name,user_prompt,verify,rubric,args_ignore",
        "ok,hi,python check.py --case 'a b',Say hi.,\"*_id,limit\"",
    )
    [case] = E.load_csv_suite(path)
    assert (case.verify, case.rubric, case.args_ignore) == (
        "python check.py --case 'a b'",
        "Say hi.",
        ["*_id", "limit"],
    )


# ============================================================================ argument matching tolerance
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "default": 3},
        "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
}


def test_args_ignore_leaves_out_keys_matching_its_globs():
    expected = {"user_id": "u_1", "name": "Maya", "filter": {"account_id": "a1", "country": "DE"}}
    actual = {"user_id": "u_999", "name": "maya ", "filter": {"account_id": "zz", "country": "de"}}
    assert not args_match(expected, actual, "exact")
    assert args_match(expected, actual, "exact", ["*_id"])
    assert args_match(expected, actual, "partial", ["*_id"])
    assert not args_match(expected, dict(actual, name="Other"), "exact", ["*_id"])
    assert args_match({"a": 1}, {"a": 1, "request_id": "r"}, "exact", ["request_id"])
    assert not args_match({"a": 1}, {"a": 1, "request_id": "r"}, "exact", ["Request_ID"]), (
        "globs are case-sensitive"
    )


def test_exact_with_defaults_drops_arguments_equal_to_the_schema_default():
    assert args_match(
        {"query": "LTV"},
        {"query": "ltv", "limit": 3, "schema": None},
        "exact_with_defaults",
        schema=SEARCH_SCHEMA,
    )
    assert args_match(
        {"query": "LTV", "limit": 3}, {"query": "LTV"}, "exact_with_defaults", schema=SEARCH_SCHEMA
    )
    assert not args_match(
        {"query": "LTV"}, {"query": "LTV", "limit": 5}, "exact_with_defaults", schema=SEARCH_SCHEMA
    )
    assert not args_match(
        {"query": "LTV"}, {"query": "LTV", "limit": 3}, "exact", schema=SEARCH_SCHEMA
    )
    assert not args_match(
        {"query": "LTV"}, {"query": "LTV", "extra": 1}, "exact_with_defaults", schema=SEARCH_SCHEMA
    )


def test_tolerant_argument_matching_end_to_end(api, tmp_path):
    calls = {
        "defaults": tool_use("search_profiles_docs", {"query": "LTV", "limit": 3}),
        "not_default": tool_use("search_profiles_docs", {"query": "LTV", "limit": 5}),
        "plain_exact": tool_use("search_profiles_docs", {"query": "LTV", "limit": 3}),
        "ignored": tool_use("run_sql_query", {"sql": "SELECT 1", "limit": 7}),
        "glob": tool_use("get_profile", {"user_id": "u_1002"}),
    }

    def respond(body: dict) -> dict:
        last = body["messages"][-1]["content"]
        if isinstance(last, list):
            return reply(text("done"))
        return reply(calls[last.split()[0]])

    api.responder = respond
    header = "test_name,user_prompt,expected_args,args_match,args_ignore"
    path = suite(
        tmp_path / "args.csv",
        header,
        'defaults,defaults please,"{""search_profiles_docs"": {""query"": ""LTV""}}",exact_with_defaults,',
        'not_default,not_default please,"{""search_profiles_docs"": {""query"": ""LTV""}}",exact_with_defaults,',
        'plain_exact,plain_exact please,"{""search_profiles_docs"": {""query"": ""LTV""}}",exact,',
        'ignored,ignored please,"{""run_sql_query"": {""sql"": ""SELECT 1""}}",exact,limit',
        'glob,glob please,"{""get_profile"": {""user_id"": ""u_1001""}}",exact,*_id',
    )
    code, document, err = run_json("--csv", path, *server())
    reasons = {r["test_name"]: r["verdict"]["reasons"] for r in document["results"]}
    assert reasons["defaults"] == [] and reasons["ignored"] == [] and reasons["glob"] == []
    assert reasons["not_default"] == [
        "argument mismatch for search_profiles_docs (exact_with_defaults): expected "
        '{"query": "LTV"}, got {"query": "LTV", "limit": 5}'
    ]
    assert reasons["plain_exact"][0].startswith(
        "argument mismatch for search_profiles_docs (exact)"
    )
    assert code == 1


def test_the_example_suite_uses_exact_with_defaults():
    cases = {
        c.name: c
        for c in E.load_csv_suite(Path(E.__file__).parent / "examples" / "test_queries.csv")
    }
    assert cases["ltv_docs"].args_match == "exact_with_defaults"


def test_unknown_args_match_names_the_new_mode(cli, tmp_path):
    path = suite(
        tmp_path / "bad.csv",
        "test_name,user_prompt,expected_args,args_match",
        'x,hi,"{""a"": {}}",fuzzy',
    )
    code, out, err = cli("--csv", path, "--dry-run")
    assert code == 2 and "exact_with_defaults" in err


def test_environment_is_left_alone():
    assert "EVAL_CASE" not in os.environ and "EVAL_ITERATION" not in os.environ
