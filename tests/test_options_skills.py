"""The mode × option walk for the skill modes through the real Claude Code CLI: trigger
runs, task evals, trying descriptions and the description optimizer.

The table, the lab and the registry of observers are in mode_lab.py; test_mode_options.py checks
that the observers cover exactly the table."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import (
    EXAMPLE_SERVER,
)
from fake_anthropic import (
    ScriptedAnthropic,
    deferred_tools,
    forced_tool,
    reply,
    text,
    tool_use,
    user_query,
)
from mode_lab import (  # the lab, the scripted models and the helpers several files share
    EVERY_SKILL,
    KNOWLEDGE_PROMPT,
    MISC_COMMAND,
    MISC_SERVER,
    NEGATIVE,
    OBSERVERS,
    OPT_TOOLS,
    OTHER_SKILL_DIR,
    OVER_CAP,
    POSITIVE,
    SKILL_DIR,
    SKILL_LISTING,
    SQL_SKILL,
    TASK_PROMPT,
    TOOL_MODES,
    InFlight,
    Lab,
    Run,
    baseline,
    claude_wrapper,
    fails_on,
    first,
    flips,
    is_optimizer,
    listed,
    observed_in,
    observes,
    opening,
    opt_args,
    opt_baseline,
    opt_run,
    opt_skill_args,
    opt_suite,
    opt_trigger,
    over_the_cap,
    per_query,
    proposals,
    proposes,
    runs_at_once,
    skill_args,
    skill_baseline,
    slow_skill,
    task_baseline,
    task_line,
    task_model,
    tool_args,
    tool_names,
    tool_output,
    tool_results,
    trigger_file,
    under_test,
    write,
    writers_run,
)

import evaluator
import test_constants as C
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.modes.optimizer import SplitItem, stratified_split


def skill_test_args(lab: Lab, *more: Any) -> list[Any]:
    return ["--skill", SKILL_DIR, "--tests", lab.knowledge, "--runs", "1", *more]


def skill_test_baseline(lab: Lab) -> Run:
    run = lab.run(*skill_test_args(lab, "--json"), model=SQL_SKILL, cached=True)
    assert run.code == 0, run.output
    return run


@observes("skill", "skills")
def _(lab, mode):
    run = skill_baseline(lab)
    assert all(SKILL_LISTING in listed(b) for b in run.requests)
    other = lab.run(
        "--skill",
        OTHER_SKILL_DIR,
        "--trigger",
        lab.trigger,
        "--runs",
        "1",
        "--json",
        model=SQL_SKILL,
    )
    assert not any(SKILL_LISTING in listed(b) for b in other.requests)
    assert all("data-profile-report" in listed(b) for b in other.requests)
    assert [s["name"] for s in other.document()["skills"]] == ["data-profile-report"]


@observes("trigger", "skills")
def _(lab, mode):
    assert set(per_query(skill_baseline(lab))) == {POSITIVE, NEGATIVE}
    document = writers_run(lab)[0].document()
    assert {q["query"]: q["actual"] for q in document["trigger_scores"][0]["queryResults"]} == {
        POSITIVE: "activated",
        NEGATIVE: "ignored",
    }
    other = trigger_file(
        lab.fresh("other-trigger.md"), ["Fix my SQL join, it returns too many rows"], []
    )
    run = lab.run("--skill", SKILL_DIR, "--trigger", other, "--runs", "1", model=SQL_SKILL)
    assert set(per_query(run)) == {"Fix my SQL join, it returns too many rows"}


@observes("tests", "skills")
def _(lab, mode):
    run = skill_test_baseline(lab)
    assert set(per_query(run)) == {KNOWLEDGE_PROMPT}
    assert [(t["name"], t["passed"]) for t in run.document()["tests"]] == [("stitching", True)]
    assert KNOWLEDGE_PROMPT not in per_query(skill_baseline(lab))


@observes("trigger_model", "skills")
def _(lab, mode):
    run = lab.run(*skill_args(lab, "--trigger-model", "claude-opus-5-5", "--json"), model=SQL_SKILL)
    assert {b["model"] for b in run.requests} == {"claude-opus-5-5"}
    assert "claude-opus-5-5" not in {b["model"] for b in skill_baseline(lab).requests}
    assert run.document()["metadata"]["trigger_model"] == "claude-opus-5-5"


@observes("trigger_threshold", "skills")
def _(lab, mode):
    half = trigger_file(lab.fresh("half-trigger.md"), ["Write the SQL for daily active users"], [])
    line = ["--skill", SKILL_DIR, "--trigger", half, "--runs", "2", "--json"]
    default = lab.run(*line, model=flips())
    strict = lab.run(*line, "--trigger-threshold", "0.75", model=flips())
    for run in (default, strict):
        [query] = run.document()["trigger_scores"][0]["queryResults"]
        assert query["activations"] == 1 and query["runs"] == 2, run.output
    assert (
        default.code == 0
        and default.document()["trigger_scores"][0]["queryResults"][0]["actual"] == "activated"
    )
    assert (
        strict.code == 1
        and strict.document()["trigger_scores"][0]["queryResults"][0]["actual"] == "ignored"
    )


@observes("trigger_max_turns", "skills")
def _(lab, mode):
    run = lab.run(*skill_args(lab, "--trigger-max-turns", "1"), model=SQL_SKILL)
    assert per_query(skill_baseline(lab))[POSITIVE] == 2, "the Skill call, then the answer"
    assert per_query(run)[POSITIVE] == 1


@observes("trigger_timeout", "skills")
def _(lab, mode):
    slow = trigger_file(lab.fresh("slow-trigger.md"), ["Write a slow SQL query for revenue"], [])
    line = ["--skill", SKILL_DIR, "--trigger", slow, "--runs", "1", "--json"]
    hasty = lab.run(*line, "--trigger-timeout", "1", model=slow_skill(3))
    patient = lab.run(*line, "--trigger-timeout", "20", model=slow_skill(3))
    [timed_out] = hasty.document()["results"]
    assert timed_out["timed_out"] and "timed out after 1s" in timed_out["error"]
    [finished] = patient.document()["results"]
    assert not finished["timed_out"] and finished["error"] is None and patient.code == 0


@observes("runs", "skills")
def _(lab, mode):
    run = lab.run(*skill_args(lab, "--runs", "2", "--json"), model=SQL_SKILL)
    assert (
        len(run.document()["results"]) == 4 and len(writers_run(lab)[0].document()["results"]) == 2
    )
    assert per_query(run) == {q: 2 * n for q, n in per_query(skill_baseline(lab)).items()}


@observes("allow_many_runs", "skills")
def _(lab, mode):
    output = over_the_cap(lab, lambda *more: skill_args(lab, *more), "--runs", SQL_SKILL)
    assert f"runs: {OVER_CAP * 2} " in output  # one positive and one negative query


@observes("min_trigger_score", "skills")
def _(lab, mode):
    # Every query activates: the negative one is wrong, so the trigger test fails on its verdicts;
    # with --min-trigger-score the skill's triggerScore decides instead.
    low = lab.run(*skill_args(lab, "--min-trigger-score", "0", "--json"), model=EVERY_SKILL)
    high = lab.run(*skill_args(lab, "--min-trigger-score", "100", "--json"), model=EVERY_SKILL)
    assert low.document()["trigger_scores"][0]["falsePositiveRate"] == 100
    assert low.code == 0 and low.document()["passed"] is True, low.output
    assert high.code == 1 and "below --min-trigger-score 100" in high.output
    assert high.document()["metadata"]["min_trigger_score"] == 100


@observes("claude_bin", "skills")
def _(lab, mode):
    script, log = claude_wrapper(lab)
    run = lab.run(*skill_args(lab, "--claude-bin", script, "--json"), model=SQL_SKILL)
    assert run.code == 0, run.output
    starts = [line for line in log.read_text().splitlines() if line.startswith("start")]
    assert sorted(line.split()[-1] for line in starts) == ["--version", "-p", "-p"]
    assert (
        run.document()["metadata"]["claude_version"]
        == writers_run(lab)[0].document()["metadata"]["claude_version"]
    )


@observes("concurrency", "skills")
def _(lab, mode):
    most = {}
    for width in (1, 2):
        script, log = claude_wrapper(lab)
        run = lab.run(
            *skill_args(lab, "--claude-bin", script, "--concurrency", width), model=slow_skill(0.3)
        )
        assert run.code == 0 and f"{width} at once" in run.output, run.output
        most[width] = runs_at_once(log)
    assert most == {1: 1, 2: 2}


@observes("model", "skills")
def _(lab, mode):
    run = lab.run(*skill_test_args(lab, "--model", "claude-opus-5-5", "--json"), model=SQL_SKILL)
    assert {b["model"] for b in run.requests} == {"claude-opus-5-5"}
    assert {b["model"] for b in skill_test_baseline(lab).requests} == {C.DEFAULT_MODEL}
    assert run.document()["metadata"]["test_model"] == "claude-opus-5-5"


@observes("max_turns", "skills")
def _(lab, mode):
    run = lab.run(*skill_test_args(lab, "--max-turns", "1"), model=SQL_SKILL)
    assert per_query(skill_test_baseline(lab)) == {KNOWLEDGE_PROMPT: 2}, (
        "the Skill call, then the answer"
    )
    assert per_query(run) == {KNOWLEDGE_PROMPT: 1}


@observes("base_url", "skills")
def _(lab, mode):
    with ScriptedAnthropic(responder=SQL_SKILL) as other:
        run = lab.run(*skill_args(lab, "--base-url", other.url))
    assert run.code == 0, run.output
    assert run.requests == [] and set(map(user_query, other.message_requests)) == {
        POSITIVE,
        NEGATIVE,
    }


# A stdio MCP server in plain Python (no SDK import): Claude Code connects to it in milliseconds,
# even on a loaded machine, so the observation does not race the server's start-up.
TINY_MCP_SERVER = """\
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, result = message.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "tiny", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo_env", "description": "Returns an environment variable.",
                             "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


def waits_for_mcp(body: dict) -> dict:
    """Waits for Claude Code's MCP servers (they connect in the background) until its tools are
    listed, then answers."""
    names = {t["name"] for t in body.get("tools", [])}
    if "WaitForMcpServers" not in names or any(n.startswith("mcp__") for n in names):
        return reply(text("Done."))
    return reply(tool_use("WaitForMcpServers", {}))


@observes("mcp_config", "skills")
def _(lab, mode):
    server = write(lab.fresh("tiny_mcp.py"), TINY_MCP_SERVER)
    config = write(
        lab.fresh("mcp.json"),
        json.dumps({"mcpServers": {"cfg": {"command": sys.executable, "args": [str(server)]}}}),
    )
    # (--trigger-max-turns: room to wait again while the server is still connecting)
    run = lab.run(
        *skill_args(lab, "--mcp-config", config, "--trigger-max-turns", "6"), model=waits_for_mcp
    )
    mcp_tools = lambda r: {  # noqa: E731
        name
        for b in r.requests
        for name in [t["name"] for t in b.get("tools", [])] + deferred_tools(b)
        if name.startswith("mcp__")
    }
    # The server's tools are listed at once (2.1.332: deferred behind ToolSearch, by name), or
    # (still connecting) after WaitForMcpServers.
    assert "mcp__cfg__echo_env" in mcp_tools(run), (mcp_tools(run), tool_output(run), run.output)
    without = lab.run(*skill_args(lab, "--trigger-max-turns", "6"), model=waits_for_mcp)
    assert mcp_tools(without) == set()
    assert not any(
        t["name"] == "WaitForMcpServers" for b in without.requests for t in b.get("tools", [])
    )


@observes("output", "skills")
def _(lab, mode):
    _, paths = writers_run(lab)
    document = evaluator.results_document_model().model_validate_json(paths["output"].read_text())
    assert document.metadata.evaluation == "skills" and len(document.results) == 2


@observes("json_out", "skills")
def _(lab, mode):
    run, _ = writers_run(lab)
    assert run.document()["metadata"]["evaluation"] == "skills"
    assert "Claude Code" in run.stderr, "the terminal output goes to stderr"
    with pytest.raises(json.JSONDecodeError):
        json.loads(skill_baseline(lab).stdout)


@observes("report", "skills")
def _(lab, mode):
    _, paths = writers_run(lab)
    assert "## Trigger Analysis" in paths["report"].read_text()


@observes("junit", "skills")
def _(lab, mode):
    _, paths = writers_run(lab)
    assert len(list(ET.parse(paths["junit"]).getroot().iter("testcase"))) >= 2


@observes("csv_out", "skills")
def _(lab, mode):
    _, paths = writers_run(lab)
    rows = list(csv.DictReader(io.StringIO(paths["csv_out"].read_text())))
    assert len(rows) == 2


@observes("resume", "skills")
def _(lab, mode):
    _, paths = writers_run(lab)
    out = lab.fresh("resume.json")
    shutil.copy(paths["output"], out)
    run = lab.run(*skill_args(lab, "-o", out, "--resume"), model=SQL_SKILL)
    assert run.code == 0 and run.requests == [] and "resuming: 2 run(s) kept" in run.output, (
        run.output
    )
    assert len(skill_baseline(lab).requests) > 0


@observes("retry_errors", "skills")
def _(lab, mode):
    out = lab.fresh("retry.json")
    errored = lab.run(*skill_args(lab, "-o", out), model=fails_on(NEGATIVE))
    assert errored.code == 1
    assert [r["query"] for r in json.loads(out.read_text())["results"] if r["error"]] == [NEGATIVE]
    retried = lab.run(*skill_args(lab, "-o", out, "--retry-errors"), model=SQL_SKILL)
    assert set(per_query(retried)) == {NEGATIVE} and "resuming: 1 run(s) kept" in retried.output
    assert retried.code == 0 and not any(r["error"] for r in json.loads(out.read_text())["results"])


@observes("max_cost", "skills")
def _(lab, mode):
    run = lab.run(
        *skill_args(lab, "--max-cost", "0.0001", "--concurrency", "1", "--json"), model=SQL_SKILL
    )
    assert len(set(per_query(run))) == 1 and "stopped at --max-cost" in run.output
    assert run.code == 1 and len(run.document()["results"]) == 1
    assert len(set(per_query(skill_baseline(lab)))) == 2


@observes("dry_run", "skills")
def _(lab, mode):
    script, log = claude_wrapper(lab)
    run = lab.run(*skill_args(lab, "--dry-run", "--claude-bin", script))
    assert run.code == 0 and run.requests == [] and "dry run: nothing was sent" in run.output
    assert "runs: 2" in run.output and not log.exists(), "no claude process at all"


@observes("allow_tools", "skills")
def _(lab, mode):
    [allowed] = task_baseline(lab).document()["results"]
    assert [a["path"] for a in allowed["artifacts"]] == ["weekly.sql"] and allowed[
        "refused_tools"
    ] == []
    refused = lab.run(*task_line(lab, "--json"), model=task_model)
    [record] = refused.document()["results"]
    assert (
        refused.code == 1
        and record["artifacts"] == []
        and record["refused_tools"][0].startswith("Write: ")
    )


@observes("artifacts", "skills")
def _(lab, mode):
    folder = lab.fresh("artifacts")
    run = lab.run(
        *task_line(lab, "--allow-tools", "Write", "--artifacts", folder, "--json"), model=task_model
    )
    assert run.code == 0, run.output
    kept = folder / "eval-1" / "with_skill" / "run-1"
    assert (kept / "weekly.sql").read_text() == "SELECT 1;\n"
    assert [f["path"] for f in json.loads((kept / "manifest.json").read_text())["files"]] == [
        "weekly.sql"
    ]
    assert not (Path.cwd() / "eval-1").exists(), "without --artifacts nothing is kept on disk"


@observes("unconfined", "skills")
def _(lab, mode):
    confined = lab.run(*task_line(lab, "--allow-tools", "Bash", "--json"), model=task_model)
    loose = lab.run(
        *task_line(lab, "--allow-tools", "Bash", "--unconfined", "--json"), model=task_model
    )
    assert confined.code == loose.code == 1, confined.output + loose.output  # Write is refused
    assert confined.document()["isolation"]["unconfined"] is False
    assert loose.document()["isolation"]["unconfined"] is True
    without_bash = lab.run(*task_line(lab, "--allow-tools", "Write", "--unconfined"))
    assert without_bash.code == 2 and "--unconfined applies to task runs allowed Bash" in (
        without_bash.output
    )


def bash_task_model(command: str) -> Callable[[dict], dict]:
    """task_model, with one Bash command for the Write (the judge as there)."""

    def model(body: dict) -> dict:
        if forced_tool(body) == "grade" or user_query(body) != TASK_PROMPT:
            return task_model(body)
        done = [
            b
            for m in body.get("messages", [])
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        if SKILL_LISTING in listed(body) and len(done) == 1:
            return reply(tool_use("Bash", {"command": command, "description": "a step"}))
        return task_model(body)

    return model


@observes("allow_read", "skills")
def _(lab, mode):
    rows = write(lab.root / "home" / "shared" / "rows.sql", "SELECT 'ROWS';\n")
    model = bash_task_model(f"cat {rows} > weekly.sql")
    hidden = lab.run(*task_line(lab, "--allow-tools", "Bash", "--json"), model=model)
    opened = lab.run(
        *task_line(lab, "--allow-tools", "Bash", "--allow-read", rows.parent, "--json"),
        model=model,
    )
    assert hidden.code == opened.code == 0, hidden.output + opened.output
    sizes = [
        {a["path"]: a["size"] for a in run.document()["results"][0]["artifacts"]}
        for run in (hidden, opened)
    ]
    assert sizes == [{"weekly.sql": 0}, {"weekly.sql": len("SELECT 'ROWS';\n")}]
    missing = lab.run(*task_line(lab, "--allow-read", lab.root / "nowhere"))
    assert missing.code == 2 and "--allow-read" in missing.output and "not found" in missing.output


@observes("ignore_path", "skills")
def _(lab, mode):
    def autosaving(body: dict) -> dict:  # an editor saving in the working folder as runs run
        (Path.cwd() / f"draft-{time.time_ns()}.swp").write_text("x")
        return task_model(body)

    seen = lab.run(*task_line(lab, "--allow-tools", "Write", "--json"), model=autosaving)
    ignored = lab.run(
        *task_line(lab, "--allow-tools", "Write", "--ignore-path", "*.swp", "--json"),
        model=autosaving,
    )
    assert seen.code == ignored.code == 0, seen.output + ignored.output
    assert any(p.endswith(".swp") for p in seen.document()["isolation"]["changed_elsewhere"])
    assert ignored.document()["isolation"]["changed_elsewhere"] == []


@observes("baseline", "skills")
def _(lab, mode):
    run = lab.run(
        *task_line(lab, "--allow-tools", "Write", "--baseline", "--json"), model=task_model
    )
    assert run.code == 0, run.output
    assert sorted(r["configuration"] for r in run.document()["results"]) == [
        "with_skill",
        "without_skill",
    ]
    assert [r["configuration"] for r in task_baseline(lab).document()["results"]] == ["with_skill"]
    [delta] = run.document()["benchmark"]["deltas"]
    assert delta["baseline"] == "without_skill" and delta["pass_rate"] == 1.0
    assert task_baseline(lab).document()["benchmark"]["deltas"] == []


@observes("baseline_skill", "skills")
def _(lab, mode):
    old = lab.fresh("old") / "warehouse-sql"
    write(
        old / "SKILL.md",
        "---\nname: warehouse-sql\ndescription: OLD-VERSION of the SQL skill.\n---\nOld.\n",
    )
    run = lab.run(
        *task_line(lab, "--allow-tools", "Write", "--baseline-skill", old, "--json"),
        model=task_model,
    )
    assert run.code == 0, run.output
    assert sorted(r["configuration"] for r in run.document()["results"]) == [
        "old_skill",
        "with_skill",
    ]
    assert any("OLD-VERSION" in listed(b) for b in run.requests)
    assert not any("OLD-VERSION" in listed(b) for b in task_baseline(lab).requests)


@observes("benchmark_json", "skills")
def _(lab, mode):
    path = lab.fresh("benchmark.json")
    run = lab.run(
        *task_line(lab, "--allow-tools", "Write", "--benchmark-json", path), model=task_model
    )
    assert run.code == 0, run.output
    document = json.loads(path.read_text())
    assert [(r["configuration"], r["result"]["passed"]) for r in document["runs"]] == [
        ("with_skill", 1)
    ]
    assert document["run_summary"]["with_skill"]["pass_rate"]["mean"] == 1.0


@observes("judge_model", "skills")
def _(lab, mode):
    chosen = lab.run(
        *task_line(lab, "--allow-tools", "Write", "--judge-model", "claude-opus-5-5", "--json"),
        model=task_model,
    )
    assert chosen.code == 0, chosen.output
    assert [b["model"] for b in chosen.requests if forced_tool(b)] == ["claude-opus-5-5"]
    assert [b["model"] for b in task_baseline(lab).requests if forced_tool(b)] == [
        C.DEFAULT_JUDGE_MODEL
    ]


# ---------------------------------------------------------------------------- trying descriptions: --skill-description, --tool-overrides
@observes("skill_description", "skills")
def _(lab, mode):
    run = lab.run(
        *skill_args(lab, "--skill-description", "Answers zebra questions.", "--json"),
        model=SQL_SKILL,
    )
    assert all("warehouse-sql: Answers zebra questions." in listed(b) for b in run.requests)
    assert not any(SKILL_LISTING in listed(b) for b in run.requests)
    assert run.code == 1, "the SQL query no longer finds the skill by its description"
    assert run.document()["metadata"]["skill_descriptions"] == {
        "warehouse-sql": "Answers zebra questions."
    }
    assert skill_baseline(lab).code == 0


@observes("tool_overrides", *TOOL_MODES)
def _(lab, mode):
    overrides = write(
        lab.fresh("overrides.json"),
        json.dumps(
            {"list_warehouse_tables": {"description": "OVERRIDDEN: every table of the warehouse."}}
        ),
    )
    run = lab.run(*tool_args(lab, mode, "--tool-overrides", overrides, "--json"))
    assert run.code == 0, run.output
    shown = {t["name"]: t["description"] for t in first(run)["tools"]}
    assert shown["list_warehouse_tables"] == "OVERRIDDEN: every table of the warehouse."
    assert {t["name"]: t["description"] for t in first(baseline(lab, mode))["tools"]}[
        "list_warehouse_tables"
    ] != shown["list_warehouse_tables"]
    assert "orders" in tool_output(run), "the server still ran the call"
    assert run.document()["metadata"]["tool_overrides"] == json.loads(overrides.read_text())


OPT_SKILLS = proposes(SQL_SKILL)


def opt_skill_baseline(lab: Lab) -> Run:
    run = lab.run(*opt_skill_args(lab), model=OPT_SKILLS, cached=True)
    assert run.code == 0, run.output
    return run


@observes("optimize", "optimize")
def _(lab, mode):
    run, document = opt_baseline(lab)
    plain = lab.run(
        "--csv", opt_suite(lab), "--server-module", EXAMPLE_SERVER, "--json", model=OPT_TOOLS
    )
    assert document["optimization"]["rounds"][0]["round"] == 0 and proposals(run)
    assert plain.document().get("optimization") is None and not proposals(plain)


@observes("csv", "optimize")
def _(lab, mode):
    _, document = opt_baseline(lab)
    assert sorted(s["item"] for s in document["optimization"]["split"]) == [
        "orders_columns",
        "tables_a",
        "tables_b",
        "users_columns",
    ]
    assert document["optimization"]["target"] == "tools"


@observes("holdout", "optimize")
def _(lab, mode):
    _, base = opt_baseline(lab)
    _, half = opt_run(lab, "--holdout", "0.5")
    count = {
        name: sum(s["split"] == "test" for s in doc["optimization"]["split"])
        for name, doc in (("base", base), ("half", half))
    }
    assert count == {"base": 1, "half": 2} and half["optimization"]["holdout"] == 0.5


@observes("seed", "optimize")
def _(lab, mode):
    _, base = opt_baseline(lab)
    names = [
        ("tables_a", "list_warehouse_tables"),
        ("tables_b", "list_warehouse_tables"),
        ("orders_columns", "describe_table"),
        ("users_columns", "describe_table"),
    ]

    def split(seed: int) -> dict[str, str]:
        items = stratified_split([SplitItem(n, t) for n, t in names], 0.4, seed)
        return {i.key: i.split for i in items}

    assert {s["item"]: s["split"] for s in base["optimization"]["split"]} == split(42)
    other = next(seed for seed in range(100) if split(seed) != split(42))
    _, seeded = opt_run(lab, "--seed", other)
    assert {s["item"]: s["split"] for s in seeded["optimization"]["split"]} == split(other)
    assert seeded["optimization"]["seed"] == other


@observes("optimize_rounds", "optimize")
def _(lab, mode):
    run, base = opt_baseline(lab)
    more, document = opt_run(lab, "--optimize-rounds", "2")
    assert len(proposals(run)) == 1 and len(proposals(more)) == 2
    assert [r["round"] for r in document["optimization"]["rounds"]] == [0, 1, 2]


@observes("optimizer_model", "optimize")
def _(lab, mode):
    run, _ = opt_run(lab, "--optimizer-model", "claude-sonnet-5-5")
    assert {b["model"] for b in proposals(run)} == {"claude-sonnet-5-5"}
    assert {b["model"] for b in proposals(opt_baseline(lab)[0])} == {C.DEFAULT_OPTIMIZER_MODEL}


@observes("runs", "optimize")
def _(lab, mode):
    run, document = opt_run(lab, "--runs", "2")
    openings = [b for b in under_test(run) if opening(b)]
    assert len(openings) == 2 * len([b for b in under_test(opt_baseline(lab)[0]) if opening(b)])
    assert document["optimization"]["runs"] == 2


@observes("allow_many_runs", "optimize")
def _(lab, mode):
    output = over_the_cap(lab, lambda *more: opt_args(lab, *more), "--runs", OPT_TOOLS)
    assert f"runs: {8 * OVER_CAP} " in output  # eight at --runs 1 (see its dry_run observer)


def just_the_original(lab: Lab) -> str:
    """A --max-cost the original's runs reach (all four start at once, with --concurrency 4, before
    any has cost anything): no proposal is asked for after them."""
    return f"{opt_baseline(lab)[1]['optimization']['rounds'][0]['cost_usd'] * 0.3:.8f}"


@observes("max_cost", "optimize")
def _(lab, mode):
    run, document = opt_run(lab, "--max-cost", just_the_original(lab), "--concurrency", "4")
    assert document["optimization"]["stopped"] == "max-cost" and not proposals(run)
    assert "stopped at --max-cost" in run.output
    assert opt_baseline(lab)[1]["optimization"]["stopped"] != "max-cost" and proposals(
        opt_baseline(lab)[0]
    )
    starved = lab.run(*opt_args(lab, "--max-cost", "0.0001", "--concurrency", "1"), model=OPT_TOOLS)
    assert starved.code == 1 and "the original was not scored to the end" in starved.output


@observes("dry_run", "optimize")
def _(lab, mode):
    run = lab.run(*opt_args(lab, "--dry-run"), model=OPT_TOOLS)
    assert run.code == 0 and run.requests == [] and "dry run: nothing was sent" in run.output
    assert "runs: 8" in run.output and "1 to 2 proposal call(s)" in " ".join(run.output.split())


@observes("resume", "optimize")
def _(lab, mode):
    out = lab.fresh("resume.json")
    first = lab.run(
        *opt_args(lab, "-o", out, "--max-cost", just_the_original(lab), "--concurrency", "4"),
        model=OPT_TOOLS,
    )
    assert first.code == 0 and journal_path(out).exists(), first.output
    blocked = lab.run(*opt_args(lab, "-o", out), model=OPT_TOOLS)
    assert blocked.code == 2 and "add --resume" in blocked.output and blocked.requests == []
    again = lab.run(*opt_args(lab, "-o", out, "--resume"), model=OPT_TOOLS)
    assert again.code == 0, again.output
    assert [r["status"] for r in json.loads(out.read_text())["optimization"]["rounds"]] == [
        "scored",
        "scored",
    ]
    assert len(proposals(again)) == 1
    assert len([b for b in under_test(again) if opening(b)]) == 4, (
        "only round 1's runs: the original was kept"
    )
    assert not journal_path(out).exists()


@observes("concurrency", "optimize")
def _(lab, mode):
    most = {}
    for width in (1, 2):
        model = InFlight(0.2)
        lab.run(
            *opt_args(lab, "--concurrency", width, "--optimize-rounds", "1"), model=proposes(model)
        )
        most[width] = model.most
    assert most == {1: 1, 2: 2}


@observes("output", "optimize")
def _(lab, mode):
    run, document = opt_baseline(lab)
    assert document["metadata"]["evaluation"] == "optimize" and document["optimization"][
        "best_round"
    ] in (0, 1)
    jsonschema.validate(document, evaluator.results_schema())
    assert "wrote " in run.output


@observes("json_out", "optimize")
def _(lab, mode):
    run = lab.run(*opt_args(lab, "--json"), model=OPT_TOOLS)
    assert run.code == 0 and run.document()["optimization"]["target"] == "tools", run.output
    assert "round 0:" in run.stderr and "round 0:" not in run.stdout


@observes("report", "optimize")
def _(lab, mode):
    report = lab.fresh("optimize.md")
    run = lab.run(*opt_args(lab, "--report", report), model=OPT_TOOLS)
    assert (
        run.code == 0 and "## Description optimization: the tools of optimize" in report.read_text()
    )
    assert "| Round | Status | Train | Test | Cost | Candidate |" in report.read_text()


@observes("server", "optimize")
def _(lab, mode):
    run, _ = opt_run(lab, "--server", MISC_COMMAND)
    assert "echo_env" in tool_names(run) and "echo_env" not in tool_names(opt_baseline(lab)[0])


@observes("server_module", "optimize")
def _(lab, mode):
    run, _ = opt_run(lab, "--server-module", MISC_SERVER)
    assert "echo_env" in tool_names(run) and "echo_env" not in tool_names(opt_baseline(lab)[0])


@observes("model", "optimize")
def _(lab, mode):
    run, _ = opt_run(lab, "--model", "claude-opus-5-5")
    assert {b["model"] for b in under_test(run)} == {"claude-opus-5-5"}
    assert {b["model"] for b in under_test(opt_baseline(lab)[0])} == {C.DEFAULT_MODEL}


@observes("base_url", "optimize")
def _(lab, mode):
    with ScriptedAnthropic(responder=OPT_TOOLS) as other:
        run = lab.run(*opt_args(lab, "--base-url", other.url))
        assert run.code == 0, run.output
        assert run.requests == [] and other.message_requests, "every call goes to --base-url"
        assert any(is_optimizer(b) for b in other.message_requests), "the optimizer's too"


@observes("skill", "optimize")
def _(lab, mode):
    run = opt_skill_baseline(lab)
    assert run.document()["optimization"]["subject"] == "warehouse-sql"
    assert any(SKILL_LISTING in listed(b) for b in under_test(run))
    other = lab.run(
        "--optimize",
        "--skill",
        OTHER_SKILL_DIR,
        "--trigger",
        opt_trigger(lab),
        "--runs",
        "1",
        "--optimize-rounds",
        "1",
        "--json",
        model=OPT_SKILLS,
    )
    assert other.code == 0, other.output
    assert other.document()["optimization"]["subject"] == "data-profile-report"
    assert not any(SKILL_LISTING in listed(b) for b in under_test(other))


@observes("trigger", "optimize")
def _(lab, mode):
    items = {s["item"] for s in opt_skill_baseline(lab).document()["optimization"]["split"]}
    assert items == {
        POSITIVE,
        "Compute weekly revenue per country from the orders table",
        NEGATIVE,
        "Write a haiku about autumn",
    }
    assert {user_query(b) for b in under_test(opt_skill_baseline(lab))} <= items


@observes("trigger_model", "optimize")
def _(lab, mode):
    run = lab.run(*opt_skill_args(lab, "--trigger-model", "claude-opus-5-5"), model=OPT_SKILLS)
    assert run.code == 0, run.output
    assert {b["model"] for b in under_test(run)} == {"claude-opus-5-5"}
    assert "claude-opus-5-5" not in {b["model"] for b in under_test(opt_skill_baseline(lab))}


@observes("claude_bin", "optimize")
def _(lab, mode):
    script, log = claude_wrapper(lab)
    run = lab.run(*opt_skill_args(lab, "--claude-bin", script), model=OPT_SKILLS)
    assert run.code == 0, run.output
    starts = [line.split()[-1] for line in log.read_text().splitlines() if line.startswith("start")]
    assert starts.count("--version") == 1 and starts.count("-p") == len(under_test_openings(run))


def under_test_openings(run: Run) -> list[dict]:
    return [b for b in under_test(run) if not tool_results(b) and user_query(b)]


@pytest.mark.parametrize("mode, option", observed_in(__name__))
def test_an_accepted_option_has_an_effect(lab: Lab, mode: str, option: str):
    OBSERVERS[option][mode](lab, mode)
