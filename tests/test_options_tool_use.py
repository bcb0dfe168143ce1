"""The mode × option walk for the tool-use modes (query, csv, markdown, qa, redteam):
what each accepted option changes in what reached the scripted server, what was written and
the exit code; and the tools that change things.

The table, the lab and the registry of observers are in mode_lab.py; test_mode_options.py checks
that the observers cover exactly the table."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import (
    EXAMPLE_SERVER,
    ROOT,
)
from fake_anthropic import (
    ScriptedAnthropic,
    error,
    forced_tool,
    reply,
    tool_use,
    user_query,
)
from mode_lab import (  # the lab, the scripted models and the helpers several files share
    CASES,
    CSV_PROMPTS,
    ECHO_ENV,
    FINAL,
    GENERATE,
    LINGERING_SERVER,
    MD_PROMPT,
    MISC_COMMAND,
    MISC_SERVER,
    OBSERVERS,
    OVER_CAP,
    QA_PROMPT,
    QUERY,
    SECRET_VALUE,
    SKILL_DIR,
    TOOL_MODES,
    InFlight,
    Lab,
    Run,
    always_asks,
    answers,
    asks,
    baseline,
    broken,
    calls,
    draft_json,
    every_other_fails,
    first,
    graded_line,
    judged,
    loops,
    no_tools,
    observed_in,
    observes,
    over_the_cap,
    recorded_cassette,
    remote_example,
    shouts,
    simulated,
    sleeps,
    system_text,
    tool_args,
    tool_line,
    tool_names,
    tool_output,
    write,
)

import evaluator
import prompts
import test_constants as C
from claude_tool_evaluator.files import journal_path, results_lines_path


@observes("query", "query")
def _(lab, mode):
    run = lab.run(
        "-q",
        "How many rows has the orders table? (distinct query 17)",
        "--server-module",
        EXAMPLE_SERVER,
        "--json",
    )
    assert [user_query(b) for b in run.openings()] == [
        "How many rows has the orders table? (distinct query 17)"
    ]
    assert (
        run.document()["results"][0]["query"]
        == "How many rows has the orders table? (distinct query 17)"
    )


@observes("conversation", "query")
def _(lab, mode):
    run = lab.run(
        "-c", ROOT / "examples" / "sample_conv.md", "--server-module", EXAMPLE_SERVER, "--json"
    )
    opening_request = run.requests[0]
    assert len(opening_request["messages"]) > 1, "the file's earlier turns are sent"
    assert opening_request["messages"][0]["content"].startswith("Help me set up a profiles project")
    assert run.document()["metadata"]["input_type"] == "conversation"
    assert len(first(baseline(lab, mode))["messages"]) == 1


@observes("interactive", "query")
def _(lab, mode):
    out = lab.fresh("interactive.json")
    run = lab.run_process(
        "-q",
        QUERY,
        "--server-module",
        EXAMPLE_SERVER,
        "--interactive",
        "-o",
        out,
        model=asks,
        stdin="snowflake_prod, please\nend\n",
    )
    assert run.code == 0, run.output
    assert len(run.requests) == 2 and all(b.get("stream") for b in run.requests), (
        "streamed, as a person reads"
    )
    assert run.requests[1]["messages"][-1]["content"] == "snowflake_prod, please"
    document = json.loads(out.read_text())
    assert document["metadata"]["mode"] == "interactive"
    assert document["results"][0]["user_interventions"] == 1
    without = lab.run("-q", QUERY, "--server-module", EXAMPLE_SERVER, "--json", model=asks)
    assert (
        len(without.requests) == 1 and without.document()["results"][0]["ended_by"] == "needs_input"
    )
    assert without.document()["metadata"]["mode"] == "batch"


@observes("csv", "csv")
def _(lab, mode):
    run = baseline(lab, mode)
    assert sorted(user_query(b) for b in run.openings()) == sorted(CSV_PROMPTS)
    assert [c["name"] for c in run.document()["cases"]] == ["tables_a", "tables_b"]
    assert run.document()["metadata"]["evaluation"] == "csv"


@observes("tag", "csv")
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "--tag", "nightly", "--json"))
    assert [user_query(b) for b in run.openings()] == [CSV_PROMPTS[1]]
    assert [c["name"] for c in run.document()["cases"]] == ["tables_b"]
    assert len(baseline(lab, mode).openings()) == 2


@observes("tests", "markdown")
def _(lab, mode):
    run = baseline(lab, mode)
    assert [user_query(b) for b in run.openings()] == [MD_PROMPT]
    document = run.document()
    assert document["metadata"]["evaluation"] == "markdown"
    assert [(t["name"], t["passed"]) for t in document["tests"]] == [("tables-knowledge", True)]


@observes("qa", "qa")
def _(lab, mode):
    run = baseline(lab, mode)
    assert [user_query(b) for b in run.openings()] == [QA_PROMPT]
    document = run.document()
    assert document["metadata"]["evaluation"] == "qa" and document["qa"]["accuracy"] == 1.0
    [task] = document["qa"]["task_results"]
    assert (task["expected"], task["results"][0]["answer"], task["answer_match"]) == (
        FINAL,
        FINAL,
        "exact",
    )


@observes("tests", "qa")
def _(lab, mode):
    run = lab.run("--tests", lab.qa, "--server-module", EXAMPLE_SERVER, "--json")
    assert run.code == 0 and [user_query(b) for b in run.openings()] == [QA_PROMPT]
    assert run.document()["metadata"]["evaluation"] == "qa" and run.document()["qa"]["correct"] == 1
    assert system_text(first(run)) == prompts.QA_SYSTEM_PROMPT


@observes("answer_match", "qa")
def _(lab, mode):
    exact = lab.run(*tool_args(lab, mode, "--json"), model=shouts)
    normalized = lab.run(
        *tool_args(lab, mode, "--answer-match", "normalized", "--json"), model=shouts
    )
    assert exact.code == 1 and exact.document()["qa"]["correct"] == 0
    assert "(exact)" in exact.document()["qa"]["task_results"][0]["results"][0]["reasons"][0]
    assert normalized.code == 0 and normalized.document()["qa"]["correct"] == 1
    assert normalized.document()["qa"]["task_results"][0]["answer_match"] == "normalized"


def grades(body: dict) -> dict:
    """The judge's forced `grade` call passes; everything else as `answers`."""
    if body.get("tool_choice"):
        return reply(
            tool_use("grade", {"passed": True, "score": 1.0, "evidence": "names the same tables"})
        )
    return answers(body)


@observes("judge_model", "qa")
def _(lab, mode):
    judged = lambda run: [b for b in run.requests if b.get("tool_choice")]  # noqa: E731
    default = lab.run(*tool_args(lab, mode, "--answer-match", "judge", "--json"), model=grades)
    chosen = lab.run(
        *tool_args(
            lab, mode, "--answer-match", "judge", "--judge-model", "claude-opus-5-5", "--json"
        ),
        model=grades,
    )
    assert default.code == 0 and chosen.code == 0, chosen.output
    assert {b["model"] for b in judged(default)} == {C.DEFAULT_JUDGE_MODEL}
    assert {b["model"] for b in judged(chosen)} == {"claude-opus-5-5"}
    assert judged(baseline(lab, mode)) == [], "an exact answer needs no judge"


@observes("iterations", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "-i", "2", "--json"))
    assert len(run.openings()) == 2 * CASES[mode]
    assert (
        len(run.document()["results"])
        == 2 * CASES[mode]
        == 2 * len(baseline(lab, mode).document()["results"])
    )
    assert run.document()["metadata"]["iterations"] == 2


@observes("allow_many_runs", *TOOL_MODES)
def _(lab, mode):
    output = over_the_cap(lab, lambda *more: tool_args(lab, mode, *more), "-i")
    assert f"runs: {OVER_CAP * CASES[mode]} " in output


@observes("concurrency", *TOOL_MODES)
def _(lab, mode):
    most = {}
    for width in (1, 2):
        model = InFlight(0.2)
        run = lab.run(*tool_args(lab, mode, "-i", "2", "--concurrency", width), model=model)
        assert run.code == 0, run.output
        most[width] = model.most
    assert most == {1: 1, 2: 2}


def bad_run(mode: str) -> Callable[[dict], dict]:
    """A run that fails its case: an API error in query mode and a red team of the query (a query
    expects nothing), an answer without the tool and the concepts in the others."""
    return broken if mode in ("query", "redteam") else no_tools


@observes("threshold", *TOOL_MODES)
def _(lab, mode):
    half = lab.run(
        *tool_args(lab, mode, "-i", "2", "--concurrency", "1", "--json"),
        model=every_other_fails(bad_run(mode)),
    )
    lenient = lab.run(
        *tool_args(lab, mode, "-i", "2", "--concurrency", "1", "--threshold", "0.5", "--json"),
        model=every_other_fails(bad_run(mode)),
    )
    assert [c["pass_rate"] for c in half.document()["cases"]] == [0.5] * CASES[mode]
    assert [c["pass_rate"] for c in lenient.document()["cases"]] == [0.5] * CASES[mode]
    assert (half.code, half.document()["passed"]) == (1, False), "by default every run must pass"
    assert (lenient.code, lenient.document()["passed"]) == (0, True), half.output
    assert lenient.document()["metadata"]["threshold"] == 0.5


@observes("output", *TOOL_MODES)
def _(lab, mode):
    out = lab.fresh("results.json")
    run = lab.run(*tool_args(lab, mode, "-o", out))
    assert run.code == 0, run.output
    document = evaluator.results_document_model().model_validate_json(out.read_text())
    assert document.metadata.evaluation == mode and len(document.results) == CASES[mode]
    assert not journal_path(out).exists()


@observes("json_out", *TOOL_MODES)
def _(lab, mode):
    document = baseline(lab, mode).document()
    evaluator.results_document_model().model_validate(document)
    assert document["metadata"]["evaluation"] == mode
    without = lab.run(*tool_args(lab, mode), cached=True)
    with pytest.raises(json.JSONDecodeError):
        json.loads(without.stdout)


@observes("report", *TOOL_MODES)
def _(lab, mode):
    report = lab.fresh("report.md")
    run = lab.run(*tool_args(lab, mode, "--report", report))
    assert run.code == 0 and f"wrote {report}" in run.output
    content = report.read_text()
    assert content.startswith("#")
    names = {
        "query": ["query"],
        "csv": ["tables_a", "tables_b"],
        "markdown": ["tables-knowledge"],
        "qa": ["task-1", "QA accuracy", FINAL],
        "redteam": ["Red team", "description-poisoning", "ours:plain"],
    }[mode]
    assert all(name in content for name in names), content


@observes("junit", *TOOL_MODES)
def _(lab, mode):
    junit = lab.fresh("junit.xml")
    run = lab.run(*tool_args(lab, mode, "--junit", junit))
    assert run.code == 0, run.output
    cases = ET.parse(junit).getroot().iter("testcase")
    assert len(list(cases)) == CASES[mode] + (mode == "redteam")  # and one per attack class


@observes("csv_out", *TOOL_MODES)
def _(lab, mode):
    rows = lab.fresh("runs.csv")
    run = lab.run(*tool_args(lab, mode, "-i", "2", "--csv-out", rows))
    assert run.code == 0, run.output
    assert len(list(csv.DictReader(io.StringIO(rows.read_text())))) == 2 * CASES[mode]


@observes("summary_only", *TOOL_MODES)
def _(lab, mode):
    full, slim = lab.fresh("full.json"), lab.fresh("slim.json")
    lab.run(*tool_args(lab, mode, "-o", full))
    run = lab.run(*tool_args(lab, mode, "-o", slim, "--summary-only"))
    assert run.code == 0, run.output
    kept, lines = (
        json.loads(slim.read_text()),
        results_lines_path(slim).read_text().splitlines(),
    )
    assert kept["results"] == [] and len(lines) == CASES[mode]
    assert kept["metadata"]["results_file"] == str(results_lines_path(slim))
    assert len(json.loads(full.read_text())["results"]) == CASES[mode]
    assert not results_lines_path(full).exists()


@observes("resume", *TOOL_MODES)
def _(lab, mode):
    out = lab.fresh("results.json")
    first_run = lab.run(*tool_args(lab, mode, "-o", out))
    resumed = lab.run(*tool_args(lab, mode, "-o", out, "--resume"))
    again = lab.run(*tool_args(lab, mode, "-o", out))
    assert len(first_run.openings()) == len(again.openings()) == CASES[mode]
    assert resumed.requests == [] and f"resuming: {CASES[mode]} run(s) kept" in resumed.output
    assert resumed.code == 0 and len(json.loads(out.read_text())["results"]) == CASES[mode]


def changed_example_server(lab: Lab) -> Path:
    """The example server with one tool's description changed (its data where it was)."""
    copy = lab.fresh(EXAMPLE_SERVER.name)
    text = EXAMPLE_SERVER.read_text(encoding="utf-8")
    here = 'Path(__file__).resolve().parent / "data"'
    changed = "List the tables in the user's warehouse, with row and column counts."
    assert here in text and changed in text
    text = text.replace(here, f"Path({str(EXAMPLE_SERVER.parent / 'data')!r})")
    copy.write_text(text.replace(changed, "List every table there is (changed)."))
    return copy


@observes("accept_changed_tools", *TOOL_MODES)
def _(lab, mode):
    # --resume after a server's tool changed: refused in one line naming it, before any model
    # call; with --accept-changed-tools the earlier runs are kept, and a note says so
    out = lab.fresh("results.json")
    assert lab.run(*tool_args(lab, mode, "-o", out)).code == 0
    resume = [*tool_line(lab, mode), "--server-module", changed_example_server(lab)]
    resume += ["-o", out, "--resume"]
    refused = lab.run(*resume)
    assert refused.code == 2 and refused.requests == [], refused.output
    assert [line for line in refused.output.splitlines() if "error" in line] == [
        f"error: --resume: the servers' tools changed since {out} was written "
        "(list_warehouse_tables changed); its runs would be mixed with runs against the new "
        "tools (write a new -o file, or add --accept-changed-tools to keep them anyway)"
    ]
    kept = lab.run(*resume, "--accept-changed-tools")
    assert kept.code == 0 and kept.requests == [], kept.output
    flat = " ".join(kept.output.split())
    assert f"resuming: {CASES[mode]} run(s) kept" in flat
    assert (
        "--accept-changed-tools: the kept runs saw other tools (list_warehouse_tables changed)"
        in flat
    )


@observes("retry_errors", *TOOL_MODES)
def _(lab, mode):
    errored = lab.fresh("errored.json")
    lab.run(*tool_args(lab, mode, "-o", errored), model=broken)
    kept = errored.with_name("kept.json")
    shutil.copy(errored, kept)
    resumed = lab.run(*tool_args(lab, mode, "-o", kept, "--resume"))
    retried = lab.run(*tool_args(lab, mode, "-o", errored, "--retry-errors"))
    assert resumed.requests == [] and all(
        r["error"] for r in json.loads(kept.read_text())["results"]
    )
    assert len(retried.openings()) == CASES[mode], retried.output
    assert retried.code == 0 and not any(
        r["error"] for r in json.loads(errored.read_text())["results"]
    )


@observes("max_cost", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(
        *tool_args(lab, mode, "-i", "2", "--concurrency", "1", "--max-cost", "0.000001", "--json")
    )
    assert len(run.openings()) == 1 and "stopped at --max-cost" in run.output
    assert run.code == 1 and run.document()["passed"] is False
    assert run.document()["summary"]["not_started"] == 2 * CASES[mode] - 1


@observes("dry_run", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "--dry-run"))
    assert run.code == 0 and run.requests == [] and "dry run: nothing was sent" in run.output
    assert f"runs: {CASES[mode]}" in run.output
    assert baseline(lab, mode).requests


@observes("batch", *TOOL_MODES)
def _(lab, mode):
    start = len(lab.api.requests)
    run = lab.run(*tool_args(lab, mode, "--batch", "--json"))
    created = [r["body"] for r in lab.api.requests[start:] if r["path"] == "/v1/messages/batches"]
    assert run.code == baseline(lab, mode).code, run.output
    assert run.requests == [] and created, (
        "every model call through the Message Batches API, none direct"
    )
    document = run.document()
    assert sum(len(b["requests"]) for b in created) == sum(
        r["model_calls"] for r in document["results"]
    )
    assert document["metadata"]["batch_api"] is True and all(
        r["batch_api"] for r in document["results"]
    )
    assert [c["passed"] for c in document["cases"]] == [
        c["passed"] for c in baseline(lab, mode).document()["cases"]
    ]
    assert baseline(lab, mode).document()["metadata"]["batch_api"] is False


@observes("model", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "--model", "claude-opus-5-5"))
    assert {b["model"] for b in run.requests} == {"claude-opus-5-5"}
    assert {b["model"] for b in baseline(lab, mode).requests} == {C.DEFAULT_MODEL}


@observes("prompt", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "--prompt", "MINIMAL_SYSTEM_PROMPT"))
    assert system_text(first(run)).strip() == prompts.MINIMAL_SYSTEM_PROMPT.strip()
    default = (
        prompts.QA_SYSTEM_PROMPT
        if mode == "qa"
        else prompts.SYSTEM_PROMPTS[prompts.DEFAULT_SYSTEM_PROMPT]
    )
    assert system_text(first(baseline(lab, mode))).strip() == default.strip()
    own = write(lab.fresh("prompt.txt"), "You are the lab's own system prompt, number 31.")
    assert system_text(first(lab.run(*tool_args(lab, mode, "--prompt", own)))) == own.read_text()


@observes("max_turns", *TOOL_MODES)
def _(lab, mode):
    for turns in (2, 3):
        run = lab.run(*tool_args(lab, mode, "--max-turns", turns, "--json"), model=loops)
        assert len(run.requests) == turns * CASES[mode]
        assert {r["ended_by"] for r in run.document()["results"]} == {"max_turns"}


@observes("max_tokens", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "--max-tokens", "777"))
    assert {b["max_tokens"] for b in run.requests} == {777}
    assert {b["max_tokens"] for b in baseline(lab, mode).requests} == {C.DEFAULT_MAX_TOKENS}


@observes("temperature", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, "--temperature", "0.3"))
    assert {b.get("temperature") for b in run.requests} == {0.3}
    assert {b.get("temperature") for b in baseline(lab, mode).requests} == {None}


@observes("base_url", *TOOL_MODES, "generate")
def _(lab, mode):
    with ScriptedAnthropic(responder=draft_json if mode == "generate" else answers) as other:
        line = ["--generate-triggers", SKILL_DIR] if mode == "generate" else tool_args(lab, mode)
        run = lab.run(*line, "--base-url", other.url)
    assert run.code == 0, run.output
    assert run.requests == [] and other.message_requests, "every call goes to --base-url"


@observes("max_retries", *TOOL_MODES, "generate")
def _(lab, mode):
    failing = lambda body: error(
        500, "api_error", "scripted outage", headers={"retry-after-ms": "1"}
    )  # noqa: E731
    line = ["--generate-triggers", SKILL_DIR] if mode == "generate" else tool_args(lab, mode)
    jobs = 1 if mode == "generate" else CASES[mode]
    for retries in (0, 2):
        run = lab.run(*line, "--max-retries", retries, model=failing)
        assert run.code == 1, run.output
        assert len(run.requests) == (retries + 1) * jobs


@observes("request_timeout", *TOOL_MODES, "generate")
def _(lab, mode):
    generating = mode == "generate"
    line = (
        [*GENERATE, "--max-retries", "0"]
        if generating
        else tool_args(lab, mode, "--max-retries", "0", "--json")
    )
    model = sleeps(1.2, draft_json if generating else answers)
    patient = lab.run(*line, model=model)
    hasty = lab.run(*line, "--request-timeout", "0.4", model=model)
    assert patient.code == 0, patient.output
    assert hasty.code == 1, hasty.output
    if generating:
        assert "test generation failed" in hasty.stderr and "imed out" in hasty.stderr, hasty.stderr
    else:
        assert all("APITimeoutError" in (r["error"] or "") for r in hasty.document()["results"])


def stdio_run(lab: Lab, mode: str) -> Run:
    """The mode with a second, stdio server (--server) given a variable (--server-env)."""
    return lab.run(
        *tool_args(
            lab,
            mode,
            "--json",
            servers=(
                "--server",
                MISC_COMMAND,
                "--server-env",
                f"EVAL_MODE_OPTION_TOKEN={SECRET_VALUE}",
            ),
        ),
        model=ECHO_ENV,
        cached=True,
    )


@observes("server", *TOOL_MODES)
def _(lab, mode):
    run = stdio_run(lab, mode)  # (the CSV cases fail: they expect list_warehouse_tables)
    assert "echo_env" in tool_names(run) and "echo_env" not in tool_names(baseline(lab, mode))
    assert {"echo_env"} <= set(run.document()["results"][0]["tools_called"])


@observes("server_env", *TOOL_MODES)
def _(lab, mode):
    assert "EVAL_MODE_OPTION_TOKEN" not in os.environ, "the value can only come from --server-env"
    run = stdio_run(lab, mode)
    assert SECRET_VALUE in tool_output(run), "the server process got the variable"
    assert SECRET_VALUE not in run.stdout, "a credential by its name: redacted from the results"
    assert all(r["tool_results"]["echo_env"] == "[REDACTED]" for r in run.document()["results"])


@observes("mcp_config", *TOOL_MODES)
def _(lab, mode):
    config = write(
        lab.fresh("mcp.json"),
        json.dumps(
            {
                "mcpServers": {
                    "cfg": {
                        "command": sys.executable,
                        "args": [str(MISC_SERVER)],
                        "env": {"EVAL_MODE_OPTION_TOKEN": "from-config"},
                    }
                }
            }
        ),
    )
    run = lab.run(*tool_args(lab, mode, "--json", servers=("--mcp-config", config)), model=ECHO_ENV)
    assert "echo_env" in tool_names(run) and "echo_env" not in tool_names(baseline(lab, mode))
    assert "from-config" in tool_output(run)


@observes("server_module", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_args(lab, mode, servers=("--server-module", MISC_SERVER)), model=ECHO_ENV)
    assert "echo_env" in tool_names(run) and "list_warehouse_tables" in tool_names(run)
    assert "echo_env" not in tool_names(baseline(lab, mode))
    assert "<unset>" in tool_output(run)


@observes("tool_timeout", *TOOL_MODES)
def _(lab, mode):
    line = tool_args(lab, mode, "--json", servers=("--server-module", MISC_SERVER))
    patient = lab.run(*line, model=calls("slow", seconds=1.0))
    hasty = lab.run(*line, "--tool-timeout", "0.3", model=calls("slow", seconds=1.0))
    assert {r["tool_results"]["slow"] for r in patient.document()["results"]} == {"slept 1.0"}
    calls_made = [c for r in hasty.document()["results"] for c in r["tool_calls"]]
    assert calls_made and all(c["is_error"] and "0.3" in c["output"] for c in calls_made), (
        calls_made
    )


@observes("stop_grace", *TOOL_MODES)
def _(lab, mode):
    """A server that lingers a second after its stdin closes: terminated by default (0.2 s),
    left to exit on its own with --stop-grace 5."""
    endings = {}
    for grace in ((), ("--stop-grace", "5")):
        marker = lab.root / "out" / f"lingering-{mode}-{next(lab.count)}"
        server = ("--server", f"{sys.executable} {LINGERING_SERVER} {marker}")
        run = lab.run(*tool_args(lab, mode, *grace, servers=server))
        assert run.code in (0, 1), run.output
        endings[grace] = marker.read_text()
    assert endings == {(): "terminated", ("--stop-grace", "5"): "exited on its own"}


@observes("max_result_chars", *TOOL_MODES)
def _(lab, mode):
    line = tool_args(lab, mode, servers=("--server-module", MISC_SERVER))
    whole = lab.run(*line, model=calls("huge", size=3000))
    cut = lab.run(*line, "--max-result-chars", "100", model=calls("huge", size=3000))
    assert "x" * 3000 in tool_output(whole)
    assert "x" * 100 in tool_output(cut) and "x" * 101 not in tool_output(cut)


# ---------------------------------------------------------------------------- tools that change things
def sources(run: Run) -> list[str]:
    """Who answered each tool call of the run (live, mock, replay, policy), from the results."""
    return [c["source"] for r in run.document()["results"] for c in r["tool_calls"]]


ECHO_MARKER = calls("echo", text="policy-marker-61")


@observes("tool_policy", *TOOL_MODES)
def _(lab, mode):
    line = tool_args(lab, mode, "--json", servers=("--server-module", MISC_SERVER))
    default = lab.run(*line, model=ECHO_MARKER)  # safe: misc_server's unannotated tools run
    strict = lab.run(*line, "--tool-policy", "read-only", model=ECHO_MARKER)
    assert set(sources(default)) == {"live"} and "policy-marker-61" in tool_output(default)
    assert set(sources(strict)) == {"policy"} and "policy-marker-61" not in tool_output(strict)
    assert "[not executed by the evaluator]" in tool_output(strict)
    assert strict.document()["metadata"]["tool_policy"] == "read-only"


@observes("allow_tool", *TOOL_MODES)
def _(lab, mode):
    line = tool_args(
        lab, mode, "--json", "--tool-policy", "read-only", servers=("--server-module", MISC_SERVER)
    )
    withheld = lab.run(*line, model=ECHO_MARKER)
    allowed = lab.run(*line, "--allow-tool", "ech?", model=ECHO_MARKER)
    assert set(sources(withheld)) == {"policy"} and set(sources(allowed)) == {"live"}
    assert "policy-marker-61" in tool_output(allowed)
    assert allowed.document()["metadata"]["allowed_tools"] == ["ech?"]


@observes("mock_tools", *TOOL_MODES)
def _(lab, mode):
    mocks = write(
        lab.fresh("mocks.json"),
        json.dumps({"list_warehouse_tables": {"result": "MOCKED-TABLES-7"}}),
    )
    run = lab.run(*tool_args(lab, mode, "--json", "--mock-tools", mocks))
    assert set(tool_output(run).splitlines()) == {"MOCKED-TABLES-7"} and set(sources(run)) == {
        "mock"
    }
    assert "MOCKED-TABLES-7" not in tool_output(baseline(lab, mode))
    assert set(sources(baseline(lab, mode))) == {"live"}


@observes("record", *TOOL_MODES)
def _(lab, mode):
    folder = recorded_cassette(lab, mode)
    [cassette] = list(folder.iterdir())
    data = json.loads(cassette.read_text())
    assert [c["tool"] for c in data["calls"]] == ["list_warehouse_tables"]
    assert data["calls"][0]["result"] in tool_output(baseline(lab, mode))


@observes("replay", *TOOL_MODES)
def _(lab, mode):
    folder = recorded_cassette(lab, mode)
    run = lab.run(*tool_line(lab, mode), "--json", "--replay", folder)  # no server at all
    assert run.code == 0, run.output
    assert set(sources(run)) == {"replay"} and tool_output(run) == tool_output(baseline(lab, mode))
    assert set(sources(baseline(lab, mode))) == {"live"}


@observes("replay_miss", *TOOL_MODES)
def _(lab, mode):
    folder = recorded_cassette(lab, mode)
    model = calls("get_existing_connections")  # not in the cassette
    missed = lab.run(*tool_args(lab, mode, "--json", "--replay", folder), model=model)
    live = lab.run(
        *tool_args(lab, mode, "--json", "--replay", folder, "--replay-miss", "live"), model=model
    )
    assert missed.code == 1 and set(sources(missed)) == {"replay"}
    assert all(r["error"].startswith("replay miss") for r in missed.document()["results"])
    assert set(sources(live)) == {"live"} and "snowflake_prod" in tool_output(live)


@observes("simulate_user", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(
        *tool_args(lab, mode, "--simulate-user", "GOAL-MARKER-23: find the connection", "--json"),
        model=asks,
    )
    users = [b for b in run.requests if simulated(b)]
    assert len(users) == CASES[mode] and all("GOAL-MARKER-23" in system_text(b) for b in users)
    assert {b["model"] for b in users} == {C.DEFAULT_USER_MODEL}
    assert all(r["user_interventions"] == 1 for r in run.document()["results"])
    assert (
        run.document()["metadata"]["simulated_user"]["goal"]
        == "GOAL-MARKER-23: find the connection"
    )
    without = lab.run(*tool_args(lab, mode, "--json"), model=asks)
    assert not any(simulated(b) for b in without.requests)
    assert {r["ended_by"] for r in without.document()["results"]} == {"needs_input"}


@observes("user_model", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(
        *tool_args(
            lab, mode, "--simulate-user", "find the connection", "--user-model", "claude-opus-5-5"
        ),
        model=asks,
    )
    assert {b["model"] for b in run.requests if simulated(b)} == {"claude-opus-5-5"}
    assert {b["model"] for b in run.requests if not simulated(b)} == {C.DEFAULT_MODEL}


@observes("max_user_turns", *TOOL_MODES)
def _(lab, mode):
    for turns in (1, 2):
        run = lab.run(
            *tool_args(
                lab,
                mode,
                "--simulate-user",
                "find the connection",
                "--max-user-turns",
                turns,
                "--json",
            ),
            model=always_asks,
        )
        assert sum(simulated(b) for b in run.requests) == turns * CASES[mode]
        assert {r["user_interventions"] for r in run.document()["results"]} == {turns}


def servers_of(run: Run) -> set[str]:
    return {c["server"] for r in run.document()["results"] for c in r["tool_calls"]}


@observes("server_url", *TOOL_MODES)
def _(lab, mode):
    run = lab.run(*tool_line(lab, mode), "--server-url", remote_example(lab, "http"), "--json")
    assert run.code == 0, run.output
    assert servers_of(run) == {"127_0_0_1"} != servers_of(baseline(lab, mode))
    assert all(
        "orders" in r["tool_results"]["list_warehouse_tables"] for r in run.document()["results"]
    )


@observes("transport", *TOOL_MODES)
def _(lab, mode):
    url = remote_example(lab, "sse")
    over_sse = lab.run(*tool_line(lab, mode), "--server-url", url, "--transport", "sse", "--json")
    assert over_sse.code == 0, over_sse.output
    assert servers_of(over_sse) == {"127_0_0_1"}
    over_http = lab.run(
        *tool_line(lab, mode), "--server-url", url
    )  # the default transport: streamable HTTP
    assert over_http.code == 2 and over_http.requests == [], over_http.output
    assert over_http.stderr.startswith(f"error: MCP server '127_0_0_1' ({url})")


@observes("judge_model", "csv", "markdown")
def _(lab, mode):
    line = graded_line(lab, mode, "rubric", "The answer names the orders table.")
    default = lab.run(*line, model=judged)
    chosen = lab.run(*line, "--judge-model", "claude-opus-5-5", model=judged)
    assert default.code == chosen.code == 0, default.output + chosen.output
    assert [b["model"] for b in default.requests if forced_tool(b)] == [C.DEFAULT_JUDGE_MODEL]
    assert [b["model"] for b in chosen.requests if forced_tool(b)] == ["claude-opus-5-5"]
    assert chosen.document()["results"][0]["judge_model"] == "claude-opus-5-5"
    assert chosen.document()["results"][0]["grades"]["judge"]["passed"] is True


@observes("verify_timeout", "csv", "markdown")
def _(lab, mode):
    check = write(lab.fresh("slow_check.py"), "import time\ntime.sleep(1.5)\nprint('state ok')\n")
    line = graded_line(lab, mode, "verify", f"{sys.executable} {check}")
    patient = lab.run(*line)
    hasty = lab.run(*line, "--verify-timeout", "0.5")
    assert patient.code == 0, patient.output
    assert patient.document()["results"][0]["grades"]["verify"] == {
        "passed": True,
        "reason": "state ok",
    }
    assert hasty.code == 1
    assert hasty.document()["results"][0]["grades"]["verify"] == {
        "error": "timed out after 0.5s (process group killed)"
    }


@pytest.mark.parametrize("mode, option", observed_in(__name__))
def test_an_accepted_option_has_an_effect(lab: Lab, mode: str, option: str):
    OBSERVERS[option][mode](lab, mode)
