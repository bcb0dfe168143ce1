"""A plugin's parts through the real Claude Code CLI and the scripted Anthropic server: which
prompts Claude delegates to which subagent (a routing table like the skills'), and which of the
plugin's hooks fired and what they did, per run.

The scripted model is tests/fake_anthropic.py's subagent rule (its module docstring): Claude
Code's model delegates a query to the listed agent type whose description shares the most words
with it (`delegation_choice`). Every expected delegation here is computed from that rule and the
agent listing Claude Code sent (`listed_agents` of the recorded request), never read back from
what the evaluator reported."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, Ran, invoke, needs_claude
from fake_anthropic import (
    ScriptedAnthropic,
    crowd_claude_code,
    crowd_skill_choice,
    delegating_claude_code,
    delegation_choice,
    listed_agents,
    listed_skills,
    reply,
    request_texts,
    tool_results_in,
    tool_use,
    user_query,
)

from claude_tool_evaluator.claude_code import (
    ClaudeCliSettings,
    RunFolder,
    delegations_of,
    detect_activation,
    hook_firings_of,
    parse_stream_json,
    run_claude_process,
)
from claude_tool_evaluator.run_types import RoutingRule

AUDITOR = "Audits supplier invoices for duplicate charges and wrong totals."
PLANNER = "Plans parcel shipping routes and courier pickup slots for warehouses."
AUDIT = "Check these supplier invoices for duplicate charges"
SHIP = "Plan the courier pickup slots for parcel shipping"
JOKE = "Tell me a joke about cats"
HOOK_CONTEXT = "SHOP CONTEXT: prices are in euros"
BLOCK_REASON = "reading notes is blocked by shop"
SKILL_DIR = ROOT / "examples" / "skills" / "warehouse-sql"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def agent_md(path: Path, name: str, description: str) -> Path:
    return write(
        path, f"---\nname: {name}\ndescription: {description}\n---\nYou do {name}'s work.\n"
    )


def shop_plugin(root: Path) -> Path:
    """A plugin `shop` with two agents, a UserPromptSubmit hook that adds context and a
    PreToolUse hook that blocks every Read."""
    folder = root / "shop"
    write(
        folder / ".claude-plugin" / "plugin.json", json.dumps({"name": "shop", "version": "1.0.0"})
    )
    agent_md(folder / "agents" / "invoice-auditor.md", "invoice-auditor", AUDITOR)
    agent_md(folder / "agents" / "shipping-planner.md", "shipping-planner", PLANNER)
    block = json.dumps({"decision": "block", "reason": BLOCK_REASON})
    hooks = {
        "hooks": {
            "UserPromptSubmit": [
                {"hooks": [{"type": "command", "command": f"echo '{HOOK_CONTEXT}'"}]}
            ],
            "PreToolUse": [
                {"matcher": "Read", "hooks": [{"type": "command", "command": f"echo '{block}'"}]}
            ],
        }
    }
    write(folder / "hooks" / "hooks.json", json.dumps(hooks))
    return folder


def trigger_file(
    path: Path, skill: str, positives: list[str], negatives: list[str], front: str = ""
) -> Path:
    return write(
        path,
        f"---\nname: delegation\ntype: trigger\nskill: {skill}\n{front}---\n\n# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in positives)
        + "\n# Negative Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in negatives),
    )


def first_request_of(api: ScriptedAnthropic, query: str) -> dict:
    """The main conversation's first request for a query (it offers the Agent tool)."""
    return next(b for b in api.message_requests if user_query(b) == query and listed_agents(b))


def runs_of(document: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for run in document["skill_runs"]:
        found.setdefault(run["query"], []).append(run)
    return found


@needs_claude
def test_a_plugins_agents_are_routed_like_skills_and_its_hooks_reported_per_run(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    plugin = shop_plugin(tmp_path)
    trigger = trigger_file(
        tmp_path / "auditor-trigger.md",
        "shop:invoice-auditor",
        [AUDIT],
        [SHIP, JOKE],
        "must_not_fire: [shipping-planner]\n",
    )
    with ScriptedAnthropic(responder=delegating_claude_code) as api:
        done = cli(
            "--skill", plugin, "--trigger", trigger, "--runs", "1", "--json",
            "--html", tmp_path / "report.html", "--trust-plugin", api=api,
        )  # fmt: skip
        listed = {q: listed_agents(first_request_of(api, q)) for q in (AUDIT, SHIP, JOKE)}
        contexts = [
            b for b in api.message_requests if any(HOOK_CONTEXT in t for t in request_texts(b))
        ]
    document = json.loads(done.stdout)
    expected = {q: delegation_choice(q, listed[q]) for q in listed}
    # what the rule makes of these queries among Claude Code's own agent types and the plugin's
    assert expected == {AUDIT: "shop:invoice-auditor", SHIP: "shop:shipping-planner", JOKE: None}
    runs = {r["query"]: r for r in document["results"] if r.get("kind") == "skill_run"}
    for query, agent in expected.items():
        assert [d["agent"] for d in runs[query]["delegations"]] == ([agent] if agent else [])
        assert "shop:invoice-auditor" in runs[query]["agents_loaded"]
        # the UserPromptSubmit hook ran in every run (again when a background agent's
        # notification comes back as a prompt), and what it added reached the model
        hooks = runs[query]["hooks"]
        assert hooks and all(
            (h["event"], h["name"], h["blocked"], h["context"])
            == ("UserPromptSubmit", "UserPromptSubmit", False, HOOK_CONTEXT)
            for h in hooks
        )
    assert {user_query(b) for b in contexts} >= set(expected)
    [score] = document["trigger_scores"]
    assert score["skill"] == "shop:invoice-auditor"
    verdicts = {
        q["query"]: (q["actual"], q["correct"], q["routingFailures"]) for q in score["queryResults"]
    }
    assert verdicts == {
        AUDIT: ("activated", True, {}),
        # not delegated to the auditor, but to the agent the file says must not get it
        SHIP: ("ignored", False, {"must_not_fire: shipping-planner fired": 1}),
        JOKE: ("ignored", True, {}),
    }
    assert done.exit_code == 1  # a query broke its routing rule
    # the plugin's folder is watched for what its hooks' commands could write there: nothing
    isolation = document["isolation"]
    assert isolation["watched"].count(str(plugin.resolve())) == 1 and isolation["ok"]
    # the HTML report's run facts say where each task went and what each hook did
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert '"delegated to": "shop:invoice-auditor"' in page
    assert f'"hooks": "UserPromptSubmit: added context: {HOOK_CONTEXT}' in page


def reads_notes_or_delegates(body: dict) -> dict:
    """The scripted model: a prompt naming notes.txt gets one Read of it (then text); any other
    prompt, the subagent rule."""
    if "notes.txt" in user_query(body) and not tool_results_in(body):
        return reply(tool_use("Read", {"file_path": "notes.txt"}))
    return delegating_claude_code(body)


def claude_events(api: ScriptedAnthropic, plugin: Path, query: str) -> list[dict]:
    """One real `claude -p` run with the plugin, as the evaluator starts it; its stream's events."""
    settings = ClaudeCliSettings(binary=str(CLAUDE), base_url=api.url, plugin_dirs=(str(plugin),))
    folder = RunFolder.make()
    try:
        (folder.project / "notes.txt").write_text("secret notes\n", encoding="utf-8")
        done = asyncio.run(run_claude_process(settings, query, folder))
    finally:
        folder.remove()
    events, bad = parse_stream_json(done.stdout.decode())
    assert events and not bad, done.stderr
    return events


@needs_claude
def test_the_stream_readers_see_delegations_blocking_hooks_and_added_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    plugin = shop_plugin(tmp_path)
    with ScriptedAnthropic(responder=reads_notes_or_delegates) as api:
        blocked = claude_events(api, plugin, "Summarise notes.txt for me")
        delegated = claude_events(api, plugin, AUDIT)
        listed = listed_agents(first_request_of(api, AUDIT))
    # the PreToolUse hook blocked the Read, with its reason; the prompt hook added its context
    firings = hook_firings_of(blocked)
    assert [(f.event, f.name, f.blocked) for f in firings] == [
        ("UserPromptSubmit", "UserPromptSubmit", False),
        ("PreToolUse", "PreToolUse:Read", True),
    ]
    assert (firings[0].context, firings[1].reason) == (HOOK_CONTEXT, BLOCK_REASON)
    assert firings[1].did == f"blocked: {BLOCK_REASON}"
    assert delegations_of(blocked) == []
    record = detect_activation(blocked, [])
    assert record.hooks == firings
    [read] = record.tool_calls
    assert read.name == "Read" and read.is_error and BLOCK_REASON in read.output
    # the delegation, top-level only: the subagent's own turn (parent_tool_use_id) is not one
    assert [(d.agent, d.description, d.prompt) for d in delegations_of(delegated)] == [
        (delegation_choice(AUDIT, listed), "delegated task", AUDIT)
    ]
    assert any(e.get("parent_tool_use_id") for e in delegated)
    assert not any(f.blocked for f in hook_firings_of(delegated))


@needs_claude
def test_a_project_agent_file_is_installed_and_its_delegations_scored(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    agent = agent_md(tmp_path / "agents" / "invoice-auditor.md", "invoice-auditor", AUDITOR)
    entries = [
        {"query": AUDIT, "should_trigger": True, "must_fire": ["invoice-auditor"]},
        {"query": JOKE, "should_trigger": False, "must_not_fire": ["invoice-auditor"]},
    ]
    evals = write(tmp_path / "evals.json", json.dumps(entries))
    with ScriptedAnthropic(responder=delegating_claude_code) as api:
        done = cli("--skill", agent, "--trigger", evals, "--runs", "2", "--json", api=api)
        listed = listed_agents(first_request_of(api, AUDIT))
    document = json.loads(done.stdout)
    # a project's agent is listed by its own name, and the rule hands it the audit
    assert listed["invoice-auditor"] == AUDITOR
    assert delegation_choice(AUDIT, listed) == "invoice-auditor"
    assert delegation_choice(JOKE, listed) is None
    [score] = document["trigger_scores"]
    assert (score["triggerScore"], score["totalRuns"]) == (100.0, 4)
    runs = [r for r in document["results"] if r.get("kind") == "skill_run"]
    assert sorted((r["query"], [d["agent"] for d in r["delegations"]]) for r in runs) == sorted(
        [(AUDIT, ["invoice-auditor"])] * 2 + [(JOKE, [])] * 2
    )
    assert all(r["hooks"] == [] for r in runs)  # no plugin, no hooks
    assert done.exit_code == 0


def test_routing_rules_name_agents_with_or_without_their_plugin():
    rule = RoutingRule(("invoice-auditor",), ("shop:shipping-planner",), 0)
    assert rule.problems([], ["shop:invoice-auditor"]) == []
    assert rule.problems(["some-skill"], ["shop:shipping-planner"]) == [
        "must_fire: invoice-auditor did not fire",
        "must_not_fire: shop:shipping-planner fired",
        "max_skills 0: 1 skill fired (some-skill)",
    ]
    # a plugin-qualified name never matches another plugin's agent of the same name
    assert RoutingRule(("shop:invoice-auditor",)).problems([], ["other:invoice-auditor"]) == [
        "must_fire: shop:invoice-auditor did not fire"
    ]


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("name: Invoice Auditor\ndescription: audits\n", "agent name 'Invoice Auditor' is not"),
        ("name: invoice-auditor\n", "the agent has no description"),
    ],
)
def test_a_bad_agent_file_is_one_line_naming_it(cli, tmp_path: Path, front: str, problem: str):
    agent = write(tmp_path / "agents" / "x.md", f"---\n{front}---\nBody.\n")
    trigger = trigger_file(tmp_path / "t.md", "x", ["a"], ["b"])
    done = cli("--skill", agent, "--trigger", trigger, "--dry-run")
    assert done.exit_code == 2
    assert problem in done.output and str(agent) in done.output
    assert "Traceback" not in done.output


# ----------------------------------------------------------------------------- export claude-plugin-eval
SQL_POSITIVES = [
    "Write a SQL query joining identifies and tracks tables",
    "Compute weekly revenue per country in SQL from the orders table",
]
SQL_NEGATIVES = ["Tell me a joke about cats", "Draw a picture of a lighthouse"]


def export(*args: object) -> Ran:
    return invoke("export", "claude-plugin-eval", *args)


@needs_claude
def test_an_exported_trigger_set_runs_in_claude_plugin_eval_one_case_per_query(tmp_path: Path):
    """The export is a plugin around the skill with a case per query; Claude Code's own runner
    loads it and grades each arm as the crowd rule makes the scripted model fire the skill: with
    the plugin, a positive query fires it (listed as `warehouse-sql:warehouse-sql`) and a
    negative one does not; without it, nothing fires."""
    trigger = write(
        tmp_path / "warehouse-sql-trigger.md",
        "---\nname: warehouse-sql-trigger\ntype: trigger\n---\n\n# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in SQL_POSITIVES)
        + "\n# Negative Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in SQL_NEGATIVES),
    )
    plugin = tmp_path / "exported"
    done = export("--skill", SKILL_DIR, "--tests", trigger, "-o", plugin, "--runs", "1")
    assert done.exit_code == 0, done.output
    assert f"wrote 4 cases to {plugin / 'evals'}" in done.output
    assert (plugin / "skills" / "warehouse-sql" / "SKILL.md").is_file()
    out = tmp_path / "out.json"
    with ScriptedAnthropic(responder=crowd_claude_code) as api:
        ran = subprocess.run(
            [str(CLAUDE), "plugin", "eval", str(plugin), "--json", str(out), "--trust-plugin",
             "--no-publish", "--model", "haiku", "--output-dir", str(tmp_path / "results")],
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(tmp_path / "home"),
                "ANTHROPIC_BASE_URL": api.url,
                "ANTHROPIC_API_KEY": TEST_API_KEY,
                "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            },
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        listings = {
            user_query(b): listed_skills(b)
            for b in api.message_requests
            if "warehouse-sql:warehouse-sql" in listed_skills(b)
        }
    assert out.is_file(), ran.stderr
    result = json.loads(out.read_text())
    assert result["suite"]["ablation"] == "with-without"
    by_prompt = {c["promptMarkdown"].strip(): c for c in result["cases"]}
    assert sorted(by_prompt) == sorted(SQL_POSITIVES + SQL_NEGATIVES)  # one case per query
    for query, case in by_prompt.items():
        fires = "warehouse-sql:warehouse-sql" in crowd_skill_choice(query, listings[query])
        assert fires == (query in SQL_POSITIVES)
        [with_run], [without_run] = case["arms"]["with"], case["arms"]["without"]
        assert with_run["passed"] is True, with_run  # the skill fired on its positives only
        assert without_run["passed"] is (query in SQL_NEGATIVES), without_run
        assert case["runsPerCase"] == 1


def test_task_evals_and_csv_suites_export_as_graded_cases(tmp_path: Path):
    plugin = tmp_path / "plugin"
    write(
        plugin / ".claude-plugin" / "plugin.json",
        json.dumps({"name": "warehouse", "experimental": {"evals": "checks"}}),
    )
    evals = write(
        tmp_path / "evals" / "evals.json",
        json.dumps(
            {
                "skill_name": "warehouse-sql",
                "evals": [
                    {
                        "id": 1,
                        "prompt": "Weekly revenue per country",
                        "expected_output": "A SQL query",
                        "expectations": ["It joins orders and users", "It groups by week"],
                    }
                ],
            }
        ),
    )
    suite = write(
        tmp_path / "suite.csv",
        "test_name,user_prompt,expected_tools,forbidden_tools,order\n"
        'sum,"Add 2 and 3","get-sum,echo",delete-all,strict\n',
    )
    done = export("--tests", evals, "--csv", suite, "--mcp-server", "every", "-o", plugin)
    assert done.exit_code == 0, done.output
    folder = plugin / "checks"  # the manifest's experimental.evals
    assert sorted(p.name for p in folder.iterdir()) == ["1-01", "sum-02"]
    task = (folder / "1-01" / "prompt.md").read_text()
    assert "expected_outcome: A SQL query" in task and task.endswith("Weekly revenue per country\n")
    assert (folder / "1-01" / "graders" / "expectation-02.md").read_text() == (
        "---\ntype: llm\n---\n\nIt groups by week\n"
    )
    graders = {p.name: p.read_text() for p in (folder / "sum-02" / "graders").iterdir()}
    assert graders["never-delete-all.md"] == (
        "---\ntype: tool_used\ntool: mcp__every__delete-all\nmin: 0\nmax: 0\n---\n"
    )
    assert "tool: mcp__every__get-sum" in graders["calls-get-sum.md"]
    assert "before: mcp__every__get-sum\nafter: mcp__every__echo" in graders["order-01.md"]
    # nothing is written twice: the same export again is refused, and changes nothing
    again = export("--tests", evals, "-o", plugin)
    assert again.exit_code == 2 and "exists already" in again.output


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ((), "nothing to export"),
        (("--csv", "suite.csv"), "--mcp-server NAME"),
        (("--tests", "t.md"), "trigger test does not say which skill it tests"),
    ],
)
def test_a_bad_export_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple, problem: str
):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "suite.csv", "test_name,user_prompt,expected_tools\na,q,x\n")
    write(tmp_path / "t.md", "---\nname: t\ntype: trigger\n---\n# Positive Triggers\n- a\n")
    done = export(*args, "-o", tmp_path / "out")
    assert done.exit_code == 2 and problem in done.output and "Traceback" not in done.output
    assert not (tmp_path / "out").exists()


def test_a_description_override_is_refused_for_an_agent(cli, tmp_path: Path):
    agent = agent_md(tmp_path / "agents" / "invoice-auditor.md", "invoice-auditor", AUDITOR)
    trigger = trigger_file(tmp_path / "t.md", "invoice-auditor", [AUDIT], [JOKE])
    done = cli(
        "--skill", agent, "--skill-description", "Other words", "--trigger", trigger, "--dry-run"
    )
    assert done.exit_code == 2 and "invoice-auditor is an agent" in done.output


def test_a_plugins_hooks_are_part_of_what_makes_its_runs_reusable(tmp_path: Path):
    """--resume reuses a run only for the same subjects: a plugin's agent's runs also depend on
    the plugin's hooks."""
    from claude_tool_evaluator.loaders.skills import load_subjects
    from claude_tool_evaluator.runners.skills import plugin_hooks_text

    plugin = shop_plugin(tmp_path)
    before = [plugin_hooks_text(s) for s in load_subjects(plugin)]
    write(plugin / "hooks" / "hooks.json", json.dumps({"hooks": {}}))
    after = [plugin_hooks_text(s) for s in load_subjects(plugin)]
    assert before != after and after == [['{"hooks": {}}']] * 2


def test_routing_assertions_export_as_tool_used_graders(tmp_path: Path):
    entries = [
        {"query": "Write SQL for revenue", "should_trigger": True, "max_skills": 1},
        {"query": "Draw a chart", "should_trigger": False, "must_not_fire": ["chart-painter"]},
    ]
    evals = write(tmp_path / "warehouse-sql-evals.json", json.dumps(entries))
    done = export("--skill", SKILL_DIR, "--tests", evals, "-o", tmp_path / "plugin", "--runs", "5")
    assert done.exit_code == 0, done.output
    folder = tmp_path / "plugin" / "evals"
    [positive, negative] = sorted(folder.iterdir())
    assert "runs: 5\n" in (positive / "prompt.md").read_text()
    graders = {p.name: p.read_text() for p in (positive / "graders").iterdir()}
    assert graders["max-skills.md"].startswith(
        "---\ntype: tool_used\ntool: Skill\nmin: 0\nmax: 1\n---\n"
    )
    graders = {p.name: p.read_text() for p in (negative / "graders").iterdir()}
    assert sorted(graders) == ["chart-painter-quiet.md", "warehouse-sql-quiet.md"]
    assert graders["chart-painter-quiet.md"].startswith(
        "---\ntype: tool_used\ntool: Skill\n"
        'input_match: \'"skill":\\s*"(?:[^":]+:)?chart-painter"\'\nmin: 0\nmax: 0\n---\n'
    )
