"""Running part of a suite, and run counts that decide, against the scripted server:

- `-k EXPR` runs only the cases whose names match (pytest's and / or / not / parentheses).
- `-x` starts no run after the first failing one; `--resume` does the rest.
- `--rerun-failed R.json` runs only the cases that failed or errored there and writes the whole
  document again.
- `-i auto`: a case that always passes stops after the minimum rounds, a 50/50 case runs to the
  cap; the server counts each case's calls, and the results say the runs each took.
"""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER
from fake_anthropic import reply, text, tool_use, user_query

import test_constants as C
from claude_tool_evaluator.run_types import Usage, cost_usd
from claude_tool_evaluator.scoring.statistics import auto_decided, wilson_interval

C = C
SERVER = ["--server-module", str(EXAMPLE_SERVER)]


def suite(path: Path, names: list[str]) -> Path:
    """Every case expects list_warehouse_tables; its prompt names the case."""
    path.write_text(
        "test_name,user_prompt,expected_tools\n"
        + "".join(f"{n},tables please ({n}),list_warehouse_tables\n" for n in names)
    )
    return path


def has_tool_result(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def model(failing: frozenset[str] = frozenset(), every_other: frozenset[str] = frozenset()):
    """Calls the expected tool, except for the cases named in `failing` (never) and
    `every_other` (its 1st, 3rd, 5th ... opening fails: a 50/50 case that fails first)."""
    counters: dict[str, itertools.count] = {}
    lock = threading.Lock()

    def respond(body: dict) -> dict:
        if has_tool_result(body):
            return reply(text("Those are your tables."))
        name = user_query(body).split("(")[-1].rstrip(")")
        if name in every_other:
            with lock:
                n = next(counters.setdefault(name, itertools.count(1)))
            if n % 2 == 1:
                return reply(text("No tool today."))
        if name in failing:
            return reply(text("No tool today."))
        return reply(tool_use("list_warehouse_tables"))

    return respond


def openings(api, name: str) -> int:
    return sum(
        1
        for body in api.message_requests
        if not has_tool_result(body) and user_query(body).endswith(f"({name})")
    )


def calls_of(api, name: str) -> list[dict]:
    return [b for b in api.message_requests if f"({name})" in json.dumps(b["messages"][0])]


# ---------------------------------------------------------------------------- -k
@pytest.mark.parametrize(
    "expression, chosen",
    [
        ("tables", {"tables_one", "tables_two"}),
        ("tables and not two", {"tables_one"}),
        ("conn or (tables and two)", {"connections", "tables_two"}),
        ("not (tables or conn)", {"weather"}),
        ("TABLES_ONE", {"tables_one"}),
    ],
)
def test_keyword_expressions_choose_cases_by_name(cli, api, tmp_path, expression, chosen):
    names = ["tables_one", "tables_two", "connections", "weather"]
    api.responder = model()
    done = cli("--csv", suite(tmp_path / "s.csv", names), *SERVER, "-k", expression, "--json")
    assert done.exit_code == 0, done.output
    assert {c["name"] for c in json.loads(done.stdout)["cases"]} == chosen
    assert {n for n in names if openings(api, n)} == chosen


@pytest.mark.parametrize("expression", ["tables and", "(tables", "or tables", "a b"])
def test_a_malformed_keyword_expression_is_one_line(cli, tmp_path, expression, no_api_key):
    done = cli("--csv", suite(tmp_path / "s.csv", ["a"]), *SERVER, "-k", expression)
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "-k" in done.stderr


def test_a_keyword_that_matches_nothing_is_one_line(cli, tmp_path, no_api_key):
    done = cli("--csv", suite(tmp_path / "s.csv", ["a"]), *SERVER, "-k", "zzz")
    assert done.exit_code == 2 and "matches no case" in done.stderr


# ---------------------------------------------------------------------------- -x
def test_fail_fast_starts_nothing_after_the_first_failure_and_resume_does_the_rest(
    cli, api, tmp_path
):
    names = ["a", "b", "c", "d"]
    path, out = suite(tmp_path / "s.csv", names), tmp_path / "r.json"
    api.responder = model(failing=frozenset({"a"}))
    done = cli("--csv", path, *SERVER, "-x", "--concurrency", "1", "-o", out)
    assert done.exit_code == 1
    assert "stopped at the first failing run (-x): a 1; 3 run(s) not started" in " ".join(
        done.output.split()
    )
    document = json.loads(out.read_text())
    assert document["summary"]["not_started"] == 3 and len(document["results"]) == 1
    assert [n for n in names if openings(api, n)] == ["a"]
    api.responder = model()
    resumed = cli("--csv", path, *SERVER, "--resume", "--concurrency", "1", "-o", out)
    assert len(json.loads(out.read_text())["results"]) == 4, resumed.output
    assert [openings(api, n) for n in names] == [1, 1, 1, 1]


# ---------------------------------------------------------------------------- --rerun-failed
def test_rerun_failed_runs_only_the_failing_cases_and_writes_the_whole_document(cli, api, tmp_path):
    names = ["a", "b", "c"]
    path, first, second = suite(tmp_path / "s.csv", names), tmp_path / "1.json", tmp_path / "2.json"
    api.responder = model(failing=frozenset({"b"}))
    assert cli("--csv", path, *SERVER, "-i", "2", "-o", first).exit_code == 1
    before = len(api.message_requests)
    api.responder = model()
    done = cli("--csv", path, *SERVER, "-i", "2", "--rerun-failed", first, "-o", second)
    assert done.exit_code == 0, done.output
    assert "--rerun-failed: 4 run(s) of passing cases kept" in done.output
    rerun = api.message_requests[before:]
    assert {user_query(b) for b in rerun if not has_tool_result(b)} == {"tables please (b)"}
    assert len(rerun) == 4  # two runs of b: a tool call and the answer each
    document = json.loads(second.read_text())
    assert [(c["name"], c["passed"], c["runs"]) for c in document["cases"]] == [
        ("a", True, 2),
        ("b", True, 2),
        ("c", True, 2),
    ]
    assert len(document["results"]) == 6 and document["passed"] is True
    nothing = cli("--csv", path, *SERVER, "--rerun-failed", second, "-o", tmp_path / "3.json")
    assert nothing.exit_code == 2 and "nothing to rerun" in nothing.stderr


# ---------------------------------------------------------------------------- -i auto
def test_auto_runs_stop_a_sure_case_early_and_run_a_coin_flip_to_the_cap(cli, api, tmp_path):
    path, out = suite(tmp_path / "s.csv", ["sure", "coin"]), tmp_path / "auto.json"
    api.responder = model(every_other=frozenset({"coin"}))
    done = cli("--csv", path, *SERVER, "-i", "auto", "--threshold", "0.5", "-o", out)
    cases = {c["name"]: c for c in json.loads(out.read_text())["cases"]}
    # sure: after the minimum rounds 5/5 has a 95 % Wilson interval from 0.566 > 0.5
    assert wilson_interval(5, 5)[0] > 0.5
    assert cases["sure"]["runs"] == C.AUTO_MIN_RUNS == openings(api, "sure") == 5
    # coin: fails first, then every other run: never decided, so it runs to the cap
    assert cases["coin"]["runs"] == C.AUTO_MAX_RUNS == openings(api, "coin") == 20
    assert cases["coin"]["passes"] == 10 and done.exit_code == 0, done.output
    document = json.loads(out.read_text())
    assert document["metadata"]["auto_runs"] == [C.AUTO_MIN_RUNS, C.AUTO_MAX_RUNS]
    # the cost of each case is the cost of the calls the server answered for it
    for name in ("sure", "coin"):
        runs = [r for r in document["results"] if r["test_name"] == name]
        assert len(runs) == cases[name]["runs"]
        priced = sum(cost_usd(Usage.from_api(r["usage"]), r["model"]) for r in runs)
        assert cases[name]["cost_usd"] == pytest.approx(priced, abs=1e-6)
        assert sum(r["model_calls"] for r in runs) == len(calls_of(api, name))


def test_auto_runs_with_custom_bounds_and_a_failed_run_at_threshold_1(cli, api, tmp_path):
    path = suite(tmp_path / "s.csv", ["sure", "broken"])
    api.responder = model(failing=frozenset({"broken"}))
    done = cli("--csv", path, *SERVER, "-i", "auto:2-6", "--json")
    cases = {c["name"]: c for c in json.loads(done.stdout)["cases"]}
    # at --threshold 1 one failed run settles a case; a case that keeps passing runs to the cap
    assert cases["broken"]["runs"] == 2 and cases["sure"]["runs"] == 6


def test_auto_runs_refuse_what_splits_a_case(cli, tmp_path, no_api_key):
    path = suite(tmp_path / "s.csv", ["a"])
    done = cli("--csv", path, *SERVER, "-i", "auto", "--shard", "1/2")
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "--shard" in done.stderr
    bad = cli("--csv", path, *SERVER, "-i", "auto:5-2")
    assert bad.exit_code == 2 and "MIN <= MAX" in bad.stderr


def test_auto_stop_rule():
    assert auto_decided(5, 5, 20, 0.5)
    assert wilson_interval(3, 3)[0] < 0.5 < wilson_interval(4, 4)[0]
    assert not auto_decided(3, 3, 20, 0.5) and auto_decided(4, 4, 20, 0.5)
    assert auto_decided(10, 20, 20, 0.5)  # at the cap: nothing left to run
    assert auto_decided(3, 4, 20, 1.0)  # a failure settles threshold 1
    assert not auto_decided(19, 19, 20, 1.0)  # still could fail
    assert auto_decided(0, 5, 20, 0.5)
