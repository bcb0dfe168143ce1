"""The crowded room: a skill among distractor skills and the servers' tools among distractor
tools, through the real Claude Code CLI, the real MCP servers and the scripted Anthropic server.

The scripted models are tests/fake_anthropic.py's crowd rule (its module docstring): Claude Code's
model fires the listed skill whose description shares the most words with the query (and every
skill the query names); the tool-use model calls the offered tool whose description shares the
most words with the prompt. Every expected curve, thief and verdict here is computed from that
rule (`crowd_skill_choice`, `best_match`) and the distractors the test wrote, never read back
from what the evaluator reported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, needs_claude
from fake_anthropic import (
    ScriptedAnthropic,
    best_match,
    crowd_claude_code,
    crowd_skill_choice,
    crowd_tool_use,
    forced_tool,
    listed_skills,
    reply,
    tool_use,
    user_query,
    words,
)

import evaluator as E
import prompts
import test_constants as C
from claude_tool_evaluator.loaders.distractors import (
    load_distractor_skills,
    parse_distractor_source,
    seeded_order,
)
from claude_tool_evaluator.modes.overlap import overlap_pairs
from claude_tool_evaluator.results_schema.document import Metadata, dump_record
from claude_tool_evaluator.results_schema.sections import (
    ConsolidationHintRecord,
    CrowdingRecord,
    CrowdPointRecord,
    DistractorRecord,
    ThiefRecord,
)
from claude_tool_evaluator.run_types import RoutingRule
from claude_tool_evaluator.writers.crowd import crowding_markdown, print_crowding
from claude_tool_evaluator.writers.html import render_html, write_html_report

SKILL = E.load_skill(ROOT / "examples" / "skills" / "warehouse-sql")
SKILL_DIR = ROOT / "examples" / "skills" / "warehouse-sql"

# Positive queries of warehouse-sql, and what a decoy needs to take each one.
KEEPS = "Write a SQL query joining identifies and tracks tables"  # no decoy shares as many words
TAKEN = "Compute weekly revenue per country in SQL"  # revenue-reporter shares more
TIED = "Fix my slow warehouse query"  # query-tuner shares as many: the tie goes to its name
POSITIVES = [KEEPS, TAKEN, TIED]
NEGATIVES = ["Tell me a joke about cats", "Draw a chart of signups"]  # chart-painter fires on one
DECOYS = [
    {"name": "revenue-reporter", "description": "Computes weekly revenue per country for finance."},
    {"name": "query-tuner", "description": "Tunes a slow warehouse query plan and its indexes."},
    {"name": "chart-painter", "description": "Draws a chart of signups and churn for the board."},
]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill_md(folder: Path, name: str, description: str) -> Path:
    return write(
        folder / name / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\nBody.\n"
    )


def trigger_file(path: Path, positives: list[str], negatives: list[str], front: str = "") -> Path:
    return write(
        path,
        f"---\nname: warehouse-sql-trigger\ntype: trigger\nskill: warehouse-sql\n{front}---\n\n"
        "# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in positives)
        + "\n# Negative Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in negatives),
    )


def decoy_writer(decoys: list[dict]):
    """The scripted model: the decoy writer's forced `write_decoys` call gets `decoys`; Claude
    Code's model follows the crowd rule."""

    def respond(body: dict) -> dict:
        if forced_tool(body) == "write_decoys":
            return reply(tool_use("write_decoys", {"decoys": decoys}))
        return crowd_claude_code(body)

    return respond


def decoy_calls(api: ScriptedAnthropic) -> int:
    return sum(1 for body in api.message_requests if forced_tool(body) == "write_decoys")


def expected_skill_curve(order: list[str], steps: list[int], descriptions: dict[str, str]):
    """What the crowd rule makes of each step: (triggerRate, falsePositiveRate, triggerScore)
    and {query: [thieves]} of the positives, from the distractors installed at that step."""
    curve, thieves = {}, {}
    for step in steps:
        listed = {SKILL.name: SKILL.description} | {n: descriptions[n] for n in order[:step]}
        fired = {q: crowd_skill_choice(q, listed) for q in POSITIVES + NEGATIVES}
        rate = 100 * sum(SKILL.name in fired[q] for q in POSITIVES) / len(POSITIVES)
        false = 100 * sum(SKILL.name in fired[q] for q in NEGATIVES) / len(NEGATIVES)
        curve[step] = (round(rate, 2), round(false, 2), round(rate * (1 - false / 100), 2))
        thieves[step] = {
            q: [n for n in fired[q] if n != SKILL.name]
            for q in POSITIVES
            if len(fired[q]) > 1 or (fired[q] and SKILL.name not in fired[q])
        }
    return curve, thieves


def test_the_rule_sets_up_what_this_file_claims():
    """The queries and decoys mean what the names say: checked on the rule itself, so a change of
    the rule or of the example skill's description fails here first, with a clear message."""
    every = {SKILL.name: SKILL.description} | {d["name"]: d["description"] for d in DECOYS}
    assert crowd_skill_choice(KEEPS, every) == [SKILL.name]
    assert crowd_skill_choice(TAKEN, every) == ["revenue-reporter"]
    assert crowd_skill_choice(TIED, every) == ["query-tuner"]
    assert crowd_skill_choice(TAKEN, {SKILL.name: SKILL.description}) == [SKILL.name]
    assert crowd_skill_choice(NEGATIVES[1], every) == ["chart-painter"]
    assert words("Tell me a joke about cats") & words(" ".join(every.values())) == set()


# ============================================================================ the loaders
def test_routing_assertions_in_markdown_frontmatter_and_json_entries(tmp_path: Path):
    md = trigger_file(
        tmp_path / "t.md",
        ["write sql"],
        ["tell a joke"],
        "must_fire: [warehouse-sql]\nmust_not_fire: query-tuner\nmax_skills: 1\n",
    )
    [test] = E.load_markdown_tests(md, "trigger")
    assert test.routing["write sql"] == RoutingRule(("warehouse-sql",), ("query-tuner",), 1)
    assert test.routing["tell a joke"] == RoutingRule((), ("query-tuner",), 1)
    evals = write(
        tmp_path / "evals.json",
        json.dumps(
            [
                {"query": "q1", "should_trigger": True, "max_skills": 2},
                {"query": "q2", "should_trigger": False, "must_not_fire": ["a", "b"]},
                {"query": "q3", "should_trigger": True},
            ]
        ),
    )
    [test] = E.load_markdown_tests(evals, "trigger")
    assert test.routing == {
        "q1": RoutingRule((), (), 2),
        "q2": RoutingRule((), ("a", "b"), None),
    }
    rule = RoutingRule(("warehouse-sql",), ("query-tuner",), 1)
    assert rule.problems(["query-tuner", "chart-painter"]) == [
        "must_fire: warehouse-sql did not fire",
        "must_not_fire: query-tuner fired",
        "max_skills 1: 2 skills fired (query-tuner, chart-painter)",
    ]


def test_max_skills_0_says_no_skill_may_fire(cli, tmp_path: Path):
    """Issue 36: `max_skills: 0` (no skill at all may fire on this query) is a rule, not an error.
    On an eval entry it applies to that query; a positive entry cannot keep it (its skill must
    fire): one line. In a trigger file's frontmatter it applies to the negative queries only."""
    evals = write(
        tmp_path / "evals.json",
        json.dumps(
            [
                {"query": "q1", "should_trigger": True},
                {"query": "q2", "should_trigger": False, "max_skills": 0},
            ]
        ),
    )
    [test] = E.load_markdown_tests(evals, "trigger")
    assert test.routing == {"q2": RoutingRule((), (), 0)}
    assert RoutingRule((), (), 0).problems([]) == []
    assert RoutingRule((), (), 0).problems(["chart-painter"]) == [
        "max_skills 0: 1 skill fired (chart-painter)"
    ]
    md = trigger_file(tmp_path / "t.md", ["write sql"], ["tell a joke"], "max_skills: 0\n")
    [test] = E.load_markdown_tests(md, "trigger")
    assert test.routing == {"tell a joke": RoutingRule((), (), 0)}
    both = write(
        tmp_path / "both.json",
        json.dumps([{"query": "q1", "should_trigger": True, "max_skills": 0}]),
    )
    ran = cli("--skill", SKILL_DIR, "--trigger", both, "--dry-run")
    code, output = ran.exit_code, ran.output
    lines = output.strip().splitlines()
    assert code == 2 and len(lines) == 1, output
    assert lines[0].startswith(
        f"error: {both}:1: entry 1: 'max_skills: 0' (no skill may fire) contradicts "
        '"should_trigger": true (the skill must fire)'
    ), output


@needs_claude
def test_max_skills_0_passes_a_query_only_when_no_skill_fired(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Among folder distractors: a negative query nothing fires on keeps `max_skills: 0`; one a
    distractor takes (chart-painter, by the crowd rule) breaks it, and fails."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "crowd"
    for decoy in DECOYS:
        skill_md(folder, decoy["name"], decoy["description"])
    entries = [
        {"query": KEEPS, "should_trigger": True},
        *({"query": q, "should_trigger": False, "max_skills": 0} for q in NEGATIVES),
    ]
    evals = write(tmp_path / "warehouse-sql-evals.json", json.dumps(entries))
    with ScriptedAnthropic(responder=crowd_claude_code) as api:
        done = cli(
            "--skill", SKILL_DIR, "--trigger", evals, "--distractors", folder,
            "--runs", "1", "--json", api=api,
        )  # fmt: skip
    listed = {SKILL.name: SKILL.description} | {d["name"]: d["description"] for d in DECOYS}
    assert crowd_skill_choice(NEGATIVES[0], listed) == []
    assert crowd_skill_choice(NEGATIVES[1], listed) == ["chart-painter"]
    cases = {c["prompt"]: c for c in json.loads(done.stdout)["cases"]}
    assert cases[NEGATIVES[0]]["passed"] is True
    assert cases[NEGATIVES[1]]["passed"] is False
    assert cases[NEGATIVES[1]]["reasons"] == {"max_skills 0: 1 skill fired (chart-painter)": 1}
    assert cases[KEEPS]["passed"] is True and done.exit_code == 1


@pytest.mark.parametrize(
    "front, message",
    [
        ("max_skills: -1\n", "t.md:5: 'max_skills' must be a whole number, 0 or more, got -1"),
        ("must_not_fire: {a: 1}\n", "t.md:5: 'must_not_fire' must be a list of skill names"),
    ],
)
def test_a_bad_routing_assertion_is_one_line_naming_file_and_line(
    cli, tmp_path: Path, front: str, message: str
):
    md = trigger_file(tmp_path / "t.md", ["write sql"], [], front)
    ran = cli("--skill", SKILL_DIR, "--trigger", md, "--dry-run")
    code, output = ran.exit_code, ran.output
    lines = output.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {md.parent}/{message}")


@pytest.mark.parametrize(
    "args, said",
    [
        (["--distractor-steps", "0,1"], "error: --distractor-steps needs --distractors"),
        (["--distractors", "nowhere"], "error: --distractors nowhere: no such folder"),
        (["--distractors", "lookalike:0"], "error: --distractors lookalike:0: ask for 1 to 200"),
        (
            ["--distractors", "lookalike:2", "--distractors", "lookalike:3"],
            "error: --distractors: give lookalike:N once",
        ),
        (
            ["--distractors", str(ROOT / "examples" / "skills"), "--distractors-file", "d.json"],
            "error: --distractors-file keeps lookalike:N decoys, and none is asked for",
        ),
        (
            ["--distractors", str(ROOT / "examples" / "skills"), "--distractor-steps", "0,9"],
            "error: --distractor-steps asks for 9 distractors; the sources give 1",
        ),
        (
            ["--distractors", str(ROOT / "examples" / "skills"), "--distractor-steps", "a,b"],
            "error: --distractor-steps 'a,b' is not a list of whole numbers from 0",
        ),
        (
            ["--distractors", str(ROOT / "examples" / "skills"), "--shard", "1/2"],
            "error: --shard does not split a crowd of distractors",
        ),
        (["--seed", "3"], "error: --seed orders the distractors (and picks a lookalike:N set)"),
    ],
)
def test_bad_crowd_options_are_one_line_before_anything_runs(
    cli, args: list[str], said: str, no_api_key, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    trigger = trigger_file(tmp_path / "t.md", [KEEPS], [])
    ran = cli("--skill", SKILL_DIR, "--trigger", trigger, "--dry-run", *args)
    code, output = ran.exit_code, ran.output
    assert code == 2 and len(output.strip().splitlines()) == 1, output
    assert output.startswith(said), output


def test_a_folder_of_skills_is_searched_and_what_breaks_a_rule_is_left_out(tmp_path: Path):
    collection = tmp_path / "collection"
    skill_md(collection / "skills", "alpha-one", "Does alpha things.")
    skill_md(collection / "nested" / "deeper", "beta-two", "Does beta things.")
    write(collection / "skills" / "broken" / "SKILL.md", "---\nname: Broken\n---\n")
    skill_md(collection / "skills", "warehouse-sql", "A second skill of the name under test.")
    found, skipped = load_distractor_skills(
        [parse_distractor_source(str(collection), "--distractors")], ["warehouse-sql"]
    )
    assert [d.name for d in found] == ["beta-two", "alpha-one"]
    assert len(skipped) == 2 and any("named like the skill under test" in s for s in skipped)
    assert seeded_order(["a", "b", "c", "d"], 7) == seeded_order(["d", "c", "b", "a"], 7)


# ============================================================================ skills in the crowd (real Claude Code)
@needs_claude
def test_decoys_take_exactly_the_queries_they_share_more_words_with(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """lookalike:3 through the real Claude Code CLI: one decoy-writing call, kept in the file; at
    each step the curve and the thieves are what the crowd rule computes; a second run with the
    same seed asks for no decoys and reuses every run (--resume)."""
    monkeypatch.chdir(tmp_path)
    trigger = trigger_file(tmp_path / "trigger.md", POSITIVES, NEGATIVES)
    decoys, out = tmp_path / "decoys.json", tmp_path / "crowd.json"
    steps = [0, 1, 2, 3]
    line = [
        "--skill", SKILL_DIR, "--trigger", trigger, "--runs", "1", "--seed", "5",
        "--distractors", "lookalike:3", "--distractors-file", decoys,
        "--distractor-steps", ",".join(map(str, steps)), "--concurrency", "6",
    ]  # fmt: skip
    with ScriptedAnthropic(responder=decoy_writer(DECOYS)) as api:
        first = cli(*line, "-o", out, "--report", tmp_path / "crowd.md", api=api)
        assert decoy_calls(api) == 1, "one model call writes the set"
        request = next(b for b in api.message_requests if forced_tool(b) == "write_decoys")
        assert "warehouse-sql" in user_query(request) and "lookalike" not in user_query(request)
    assert first.exit_code == 1, first.output  # TAKEN and TIED are lost in the crowd
    kept = json.loads(decoys.read_text())
    assert kept["format"] == C.DECOYS_FORMAT
    assert kept["skills"]["warehouse-sql"]["5"] == DECOYS
    document = json.loads(out.read_text())
    crowding = document["crowding"]
    order = seeded_order([d["name"] for d in DECOYS], 5)
    assert [d["name"] for d in crowding["distractors"]] == order
    curve, thieves = expected_skill_curve(
        order, steps, {d["name"]: d["description"] for d in DECOYS}
    )
    got = {
        p["distractors"]: tuple(
            p["series"][k] for k in ("triggerRate", "falsePositiveRate", "triggerScore")
        )
        for p in crowding["points"]
    }
    assert got == curve
    reported: dict[int, dict[str, list[str]]] = {step: {} for step in steps}
    for t in crowding["thieves"]:
        reported[t["distractors"]].setdefault(t["case"], []).append(t["thief"])
        assert t["runs"] == t["of_runs"] == 1 and t["instead"] == 1 and t["decoy"]
    assert reported == thieves
    assert thieves[3] == {TAKEN: ["revenue-reporter"], TIED: ["query-tuner"]}, "the setup holds"
    # every step's runs saw exactly that step's decoys (the listing Claude Code sent)
    for run in document["results"]:
        assert set(run["skills_loaded"]) >= {SKILL.name, *order[: run["distractors"]]}
        assert not set(run["skills_loaded"]) & set(order[run["distractors"] :])
    # each query has a case per step, failing where its skill lost it
    failed = {c["name"] for c in document["cases"] if not c["passed"]}
    assert f"warehouse-sql: {TIED} (+3 distractors)" in failed
    assert f"warehouse-sql: {TIED} (+0 distractors)" not in failed
    assert [h["taken_by"] for h in crowding["hints"]] == ["query-tuner", "revenue-reporter"]
    report = (tmp_path / "crowd.md").read_text()
    assert "## The crowded room" in report and "revenue-reporter (distractor)" in report
    # the same seed again: the kept set, no model call for it, every run kept
    with ScriptedAnthropic(responder=decoy_writer([])) as api:
        again = cli(*line, "-o", out, "--resume", api=api)
        assert decoy_calls(api) == 0 and api.message_requests == []
    assert "resuming: 20 run(s) kept" in again.output, again.output
    assert json.loads(out.read_text())["crowding"]["points"] == crowding["points"]


@needs_claude
def test_routing_assertions_give_verdicts_and_reasons(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """must_not_fire / max_skills / must_fire from an eval set's entries, among folder
    distractors: each query's verdict and reasons are what the crowd rule's firings break."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "crowd"
    for decoy in DECOYS:
        skill_md(folder, decoy["name"], decoy["description"])
    alongside = f"{KEEPS}, then ask /chart-painter"
    entries = [
        {"query": TIED, "should_trigger": True, "must_not_fire": ["query-tuner"]},
        {"query": alongside, "should_trigger": True, "max_skills": 1},
        {"query": KEEPS, "should_trigger": True, "must_fire": ["warehouse-sql"], "max_skills": 1},
        {"query": NEGATIVES[0], "should_trigger": False, "must_not_fire": ["chart-painter"]},
    ]
    evals = write(tmp_path / "warehouse-sql-evals.json", json.dumps(entries))
    with ScriptedAnthropic(responder=crowd_claude_code) as api:
        done = cli(
            "--skill", SKILL_DIR, "--trigger", evals, "--distractors", folder,
            "--runs", "2", "--json", api=api,
        )  # fmt: skip
    document = json.loads(done.stdout)
    listed = {SKILL.name: SKILL.description} | {d["name"]: d["description"] for d in DECOYS}
    assert crowd_skill_choice(alongside, listed) == ["warehouse-sql", "chart-painter"]
    cases = {c["prompt"]: c for c in document["cases"]}
    assert cases[TIED]["passed"] is False and cases[TIED]["reasons"] == {
        "expected to activate, but did not activate": 2,
        "must_not_fire: query-tuner fired": 2,
    }
    assert cases[alongside]["passed"] is False and cases[alongside]["reasons"] == {
        "max_skills 1: 2 skills fired (warehouse-sql, chart-painter)": 2
    }
    assert cases[KEEPS]["passed"] and cases[NEGATIVES[0]]["passed"]
    [score] = document["trigger_scores"]
    queries = {q["query"]: q for q in score["queryResults"]}
    assert queries[alongside]["actual"] == "activated" and not queries[alongside]["correct"]
    assert queries[alongside]["routingFailures"] == {
        "max_skills 1: 2 skills fired (warehouse-sql, chart-painter)": 2
    }
    runs = [r for r in document["results"] if r["query"] == alongside]
    assert [r["verdict"]["passed"] for r in runs] == [False, False]
    assert done.exit_code == 1
    thieves = {(t["case"], t["thief"]): t for t in document["crowding"]["thieves"]}
    assert thieves[(alongside, "chart-painter")]["alongside"] == 2
    assert thieves[(TIED, "query-tuner")]["instead"] == 2


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under root: its mode and, for a file, its bytes."""
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


@needs_claude
def test_installed_copies_the_users_skills_and_plugin_skills_and_never_writes_home(
    tmp_path: Path,
):
    """`installed` reads a (fake) HOME's ~/.claude skills and plugin skills, installs them in
    every run's temporary HOME, and leaves that HOME byte for byte as it was."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    skill_md(home / ".claude" / "skills", "revenue-reporter", DECOYS[0]["description"])
    write(home / ".claude" / "skills" / "revenue-reporter" / "notes.txt", "the user's notes\n")
    plugin = home / ".claude" / "plugins" / "cache" / "market" / "charts" / "1.0.0" / "skills"
    skill_md(plugin, "chart-painter", DECOYS[2]["description"])
    write(home / ".claude" / "settings.json", '{"enabledPlugins": {"charts@market": true}}\n')
    trigger = trigger_file(tmp_path / "trigger.md", [KEEPS, TAKEN], [NEGATIVES[1]])
    before = snapshot(home)
    out = tmp_path / "installed.json"
    with ScriptedAnthropic(responder=crowd_claude_code) as api:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "evaluator.py"),
                "--claude-bin",
                CLAUDE,
                "--skill",
                str(SKILL_DIR),
                "--trigger",
                str(trigger),
                "--runs",
                "1",
                "--distractors",
                "installed",
                "-o",
                str(out),
            ],  # fmt: skip
            cwd=work,
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "TMPDIR": str(tmp_path),
                "ANTHROPIC_API_KEY": TEST_API_KEY,
                "ANTHROPIC_BASE_URL": api.url,
            },
            capture_output=True,
            text=True,
            timeout=180,
        )
        listings = [listed_skills(b) for b in api.message_requests if listed_skills(b)]
    assert snapshot(home) == before, "the user's HOME must not change"
    assert done.returncode == 1, done.stderr + done.stdout  # TAKEN is taken
    document = json.loads(out.read_text())
    crowd = document["crowding"]
    assert sorted(d["name"] for d in crowd["distractors"]) == ["chart-painter", "revenue-reporter"]
    assert {d["source"] for d in crowd["distractors"]} == {"installed"}
    assert listings and all({"revenue-reporter", "chart-painter"} <= set(x) for x in listings)
    assert [(t["case"], t["thief"]) for t in crowd["thieves"]] == [(TAKEN, "revenue-reporter")]
    assert document["isolation"]["ok"] is True


@needs_claude
def test_dry_run_prices_every_step_and_the_decoys_it_would_write(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    trigger = trigger_file(tmp_path / "trigger.md", POSITIVES, NEGATIVES)
    with ScriptedAnthropic(responder=decoy_writer(DECOYS)) as api:
        done = cli(
            "--skill", SKILL_DIR, "--trigger", trigger, "--runs", "2",
            "--distractors", "lookalike:3", "--distractor-steps", "0,3", "--dry-run", api=api,
        )  # fmt: skip
        assert api.requests == []
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    steps = {int(line.split()[1]): line for line in lines if line.strip().startswith("step ")}
    assert set(steps) == {0, 3} and all("10 run(s)" in line for line in steps.values())
    price = lambda line: float(line.split("about $")[1].split()[0])  # noqa: E731
    assert price(steps[3]) > price(steps[0]), "the distractors' listing costs tokens"
    assert any("decoys: 3 decoys to write, 1 call(s)" in line for line in lines), done.output
    assert "runs: 20" in done.output


# ============================================================================ tools in the crowd (real MCP servers)
SERVER = '''\
import json, os
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("shop", log_level="WARNING")


def note(tool):
    with open(os.environ["CROWD_CALLS"], "a") as handle:
        handle.write(tool + "\\n")


@mcp.tool()
def list_tables() -> str:
    """Lists the tables of the warehouse."""
    note("list_tables")
    return "orders, users"


@mcp.tool()
def get_customer(customer_id: str = "7") -> str:
    """Gets one customer's profile by id."""
    note("get_customer")
    return "customer 7: Ada"


if __name__ == "__main__":
    mcp.run()
'''
TOOL_DECOYS = [
    {"name": "customer_profile_lookup", "description": "Get the profile of a customer by number.",
     "like": "get_customer"},
    {"name": "warehouse_cost_report", "description": "Reports warehouse spend per month.",
     "like": "list_tables"},
]  # fmt: skip
TOOL_CASES = {
    "tables": ("List the tables of the warehouse", "list_tables"),
    "customer": ("Get the profile of customer 7", "get_customer"),
}


def tool_writer(body: dict) -> dict:
    if forced_tool(body) == "write_decoys":
        return reply(tool_use("write_decoys", {"decoys": TOOL_DECOYS}))
    return crowd_tool_use(body)


def test_a_tool_sweep_reports_f1_and_thieves_and_decoys_never_reach_the_real_server(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    server, calls = write(tmp_path / "shop_server.py", SERVER), tmp_path / "calls.txt"
    suite = write(
        tmp_path / "shop.csv",
        "test_name,user_prompt,expected_tools\n"
        + "".join(f"{name},{prompt},{tool}\n" for name, (prompt, tool) in TOOL_CASES.items()),
    )
    out, decoys = tmp_path / "tools.json", tmp_path / "decoys.json"
    with ScriptedAnthropic(responder=tool_writer) as api:
        done = cli(
            "--csv", suite, "--server", f"{sys.executable} {server}",
            "--server-env", f"CROWD_CALLS={calls}", "-i", "2", "--seed", "3",
            "--distractor-tools", "lookalike:2", "--distractors-file", decoys,
            "--tool-steps", "0,1,2", "-o", out, "--html", tmp_path / "tools.html", api=api,
        )  # fmt: skip
        assert decoy_calls(api) == 1
        offered = [
            sorted(t["name"] for t in b["tools"])
            for b in api.message_requests
            if forced_tool(b) != "write_decoys"
        ]
    document = json.loads(out.read_text())
    crowding = document["crowding"]
    order = seeded_order([d["name"] for d in TOOL_DECOYS], 3)
    assert crowding["kind"] == "tools" and [d["name"] for d in crowding["distractors"]] == order
    real = {"list_tables": "Lists the tables of the warehouse.",
            "get_customer": "Gets one customer's profile by id."}  # fmt: skip
    descriptions = {d["name"]: d["description"] for d in TOOL_DECOYS}
    for step in (0, 1, 2):
        tools = real | {n: descriptions[n] for n in order[:step]}
        assert sorted(tools) in offered
        chosen = {name: best_match(prompt, tools) for name, (prompt, _) in TOOL_CASES.items()}
        hits = sum(chosen[name] == tool for name, (_, tool) in TOOL_CASES.items())
        recall = round(100 * hits / len(TOOL_CASES), 2)
        [point] = [p for p in crowding["points"] if p["distractors"] == step]
        assert point["offered"] == 2 + step and point["runs"] == 4
        assert point["series"]["recall"] == recall == point["series"]["precision"]
        assert point["series"]["f1"] == recall
        expected_thieves = {
            (name, tool, chosen[name])
            for name, (_, tool) in TOOL_CASES.items()
            if chosen[name] != tool
        }
        got = {
            (t["case"], t["expected"], t["thief"])
            for t in crowding["thieves"]
            if t["distractors"] == step
        }
        assert got == expected_thieves
        assert all(t["runs"] == t["of_runs"] == 2 for t in crowding["thieves"])
        tokens = [p["tool_tokens"] for p in crowding["points"]]
        assert tokens == sorted(tokens) and tokens[0] < tokens[-1]
    stolen = "customer_profile_lookup"
    assert ("customer", "get_customer", stolen) in {
        (t["case"], t["expected"], t["thief"]) for t in crowding["thieves"]
    }, "the setup holds: the decoy shares more words with the prompt"
    decoy_runs = [
        call
        for run in document["results"]
        for call in run["tool_calls"]
        if call["name"] in descriptions
    ]
    assert decoy_runs and all(
        c["server"] == "decoys" and c["source"] == "decoy" and c["is_error"]
        and c["output"] == prompts.DECOY_TOOL_RESULT
        for c in decoy_runs
    )  # fmt: skip
    logged = calls.read_text().split()
    assert set(logged) <= set(real), "a call to a decoy never reaches the real server"
    assert document["summary"]["tool_coverage"]["available"] == sorted(real)
    assert done.exit_code == 1, done.output  # the stolen cases fail
    page = (tmp_path / "tools.html").read_text()
    assert '"renderer":"renderCrowding"' in page.replace(" ", "")


def tool_suite(tmp_path: Path) -> list[str]:
    server, calls = write(tmp_path / "shop_server.py", SERVER), tmp_path / "calls.txt"
    suite = write(
        tmp_path / "shop.csv",
        "test_name,user_prompt,expected_tools\n"
        + "".join(f"{name},{prompt},{tool}\n" for name, (prompt, tool) in TOOL_CASES.items()),
    )
    return [
        "--csv", suite, "--server", f"{sys.executable} {server}", "--server-env",
        f"CROWD_CALLS={calls}", "--distractor-tools", "lookalike:2",
        "--distractors-file", tmp_path / "decoys.json", "--tool-steps", "0,2",
    ]  # fmt: skip


def test_a_tool_sweep_on_a_model_matrix_under_max_cost_and_dry_run(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The sweep's curve per model of a matrix; --dry-run prices every step with its own tool
    definitions and calls nothing; --max-cost stops it like any run."""
    monkeypatch.chdir(tmp_path)
    line = tool_suite(tmp_path)
    with ScriptedAnthropic(responder=tool_writer) as api:
        dry = cli(*line, "--dry-run", api=api)
        assert api.message_requests == []
    steps = [row for row in dry.output.splitlines() if row.strip().startswith("step ")]
    assert [row.split()[1] for row in steps] == ["0", "2"] and "2 run(s)" in steps[0], dry.output
    assert "decoys: 2 decoys to write, 1 call(s)" in dry.output
    price = [float(row.split("about $")[1].split()[0]) for row in steps]
    assert price[1] > price[0], "more tools, more tokens in every call"
    with ScriptedAnthropic(responder=tool_writer) as api:
        matrix = cli(
            *line, "--model", "claude-haiku-5-5", "--model", "claude-opus-5-5",
            "--json", api=api,
        )  # fmt: skip
    points = json.loads(matrix.stdout)["crowding"]["points"]
    assert sorted((p["distractors"], p["model"]) for p in points) == [
        (0, "claude-haiku-5-5"), (0, "claude-opus-5-5"), (2, "claude-haiku-5-5"), (2, "claude-opus-5-5"),
    ]  # fmt: skip
    assert {p["model"] for p in points if p["series"]["recall"] == 50.0} == {
        "claude-haiku-5-5",
        "claude-opus-5-5",
    }
    with ScriptedAnthropic(responder=tool_writer) as api:
        capped = cli(*line, "--max-cost", "0.000001", "--concurrency", "1", "--json", api=api)
        conversations = [b for b in api.message_requests if forced_tool(b) != "write_decoys"]
    assert "stopped at --max-cost" in capped.output and capped.exit_code == 1
    assert len(json.loads(capped.stdout)["results"]) == 1 and len(conversations) <= 2


def test_an_mcpservers_file_of_distractors_is_listed_and_never_called(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """--distractor-tools FILE: the user's other servers' tools are offered; a call to one gets
    the neutral answer from the evaluator, and their server never runs it."""
    monkeypatch.chdir(tmp_path)
    shop, calls = write(tmp_path / "shop_server.py", SERVER), tmp_path / "calls.txt"
    other = write(
        tmp_path / "other_server.py",
        SERVER.replace('"shop"', '"other"')
        .replace("def list_tables", "def profile_of_customer")
        .replace("Lists the tables of the warehouse.", "Get the profile of a customer quickly.")
        .replace("def get_customer", "def unrelated"),
    )
    config = write(
        tmp_path / "setup.json",
        json.dumps(
            {
                "mcpServers": {
                    "other": {
                        "command": sys.executable,
                        "args": [str(other)],
                        "env": {"CROWD_CALLS": str(tmp_path / "other-calls.txt")},
                    }
                }
            }
        ),
    )
    suite = write(
        tmp_path / "shop.csv",
        "test_name,user_prompt,expected_tools\ncustomer,Get the profile of customer 7,get_customer\n",
    )
    with ScriptedAnthropic(responder=crowd_tool_use) as api:
        done = cli(
            "--csv", suite, "--server", f"{sys.executable} {shop}",
            "--server-env", f"CROWD_CALLS={calls}", "--distractor-tools", config, "--json", api=api,
        )  # fmt: skip
    document = json.loads(done.stdout)
    [run] = document["results"]
    assert run["tools_called"] == ["profile_of_customer"]
    assert run["tool_calls"][0]["source"] == "decoy" and not run["tool_calls"][0]["executed"]
    assert not (tmp_path / "other-calls.txt").exists(), "the distractor server never ran a call"
    crowd = document["crowding"]
    assert {d["name"]: d["source"] for d in crowd["distractors"]} == {
        "profile_of_customer": "other",
        "unrelated": "other",
    }
    assert [(t["expected"], t["thief"], t["decoy"]) for t in crowd["thieves"]] == [
        ("get_customer", "profile_of_customer", True)
    ]


# ============================================================================ overlap
def overlap_judge(risks: dict[frozenset, str]):
    def respond(body: dict) -> dict:
        prompt = body["messages"][0]["content"]
        names = ("warehouse-sql", *[d["name"] for d in OVERLAP_DECOYS])
        pair = frozenset(n for n in names if f'name="{n}"' in prompt)
        risk = risks.get(pair, "LOW")
        return reply(
            tool_use(
                "assess_overlap",
                {
                    "risk": risk,
                    "queries": [f"a query for {' or '.join(sorted(pair))}"]
                    if risk != "LOW"
                    else [],
                    "disambiguation": f"{sorted(pair)[0]} owns the reports",
                },
            )
        )

    return respond


OVERLAP_DECOYS = [
    *DECOYS,
    {"name": "sql-fixer", "description": "Fixes failing SQL queries against the event warehouse."},
]


def test_overlap_judges_the_closest_pairs_and_fails_on_high(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "crowd"
    for decoy in OVERLAP_DECOYS:
        skill_md(folder, decoy["name"], decoy["description"])
    line = ["overlap", SKILL_DIR, "--distractors", folder]
    with ScriptedAnthropic(responder=overlap_judge({})) as api:
        dry = cli(*line, "--dry-run", api=api)
        assert api.requests == []
    assert dry.exit_code == 0 and "the judge reads" in dry.output and "about $" in dry.output
    pairs = overlap_pairs(
        [(SKILL.name, SKILL.description)], [(d["name"], d["description"]) for d in OVERLAP_DECOYS]
    )
    close = [p for p in pairs if p.similarity >= C.OVERLAP_MIN_SIMILARITY]
    assert 0 < len(close) < len(pairs), "the setup holds: the pre-filter drops a pair"
    high = frozenset({"warehouse-sql", "query-tuner"})
    out = tmp_path / "overlap.json"
    with ScriptedAnthropic(responder=overlap_judge({high: "HIGH"})) as api:
        done = cli(*line, "-o", out, "--report", tmp_path / "overlap.md", api=api)
        judged = [b for b in api.message_requests if forced_tool(b) == "assess_overlap"]
    assert len(judged) == len(close)
    assert f"the judge reads {len(close)} on" in done.output
    document = json.loads(out.read_text())
    record = document["overlap"]
    by_pair = {frozenset((p["a"], p["b"])): p for p in record["pairs"]}
    assert by_pair[high]["risk"] == "HIGH" and by_pair[high]["judged"]
    assert by_pair[high]["queries"] == ["a query for query-tuner or warehouse-sql"]
    assert record["below_filter"] == len(pairs) - len(close)
    assert done.exit_code == 1 and document["passed"] is False
    assert [c["name"] for c in document["cases"] if not c["passed"]] == [
        f"{by_pair[high]['a']} / {by_pair[high]['b']}"
    ]
    assert "## Skill overlap" in (tmp_path / "overlap.md").read_text()
    with ScriptedAnthropic(responder=overlap_judge({})) as api:
        capped = cli(*line, "--max-cost", "0.000001", "--json", api=api)
        assert len(api.message_requests) == 1, "no new pair once --max-cost is spent"
    assert capped.exit_code == 1 and "stopped at --max-cost" in capped.output
    assert json.loads(capped.stdout)["overlap"]["not_judged"] == len(close) - 1


def test_overlap_gives_the_judges_reason_and_no_interval_for_one_judgement(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Issue 36: a HIGH pair's reason is the judge's one line on why the two collide, not its
    disambiguation (which restates both descriptions); one judgement has no 95 % interval."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")
    tuner = next(d for d in OVERLAP_DECOYS if d["name"] == "query-tuner")
    skill_md(tmp_path / "crowd", tuner["name"], tuner["description"])
    restated = f"warehouse-sql: {SKILL.description} query-tuner: {tuner['description']}"
    reason = "Both claim requests about slow warehouse queries."

    def judge(body: dict) -> dict:
        answer = {"risk": "HIGH", "queries": ["Fix my slow warehouse query"]}
        return reply(
            tool_use("assess_overlap", answer | {"reason": reason, "disambiguation": restated})
        )

    out = tmp_path / "overlap.json"
    line = ["overlap", SKILL_DIR, "--distractors", tmp_path / "crowd", "-o", out]
    with ScriptedAnthropic(responder=judge) as api:
        done = cli(*line, "--report", tmp_path / "overlap.md", api=api)
        [asked] = [b for b in api.message_requests if forced_tool(b) == "assess_overlap"]
    assert done.exit_code == 1, done.output
    assert "reason" in asked["tools"][0]["input_schema"]["required"]
    [case] = json.loads(out.read_text())["cases"]
    assert case["reasons"] == {f"HIGH overlap: {reason}": 1}
    assert case["interval"] is None
    assert json.loads(out.read_text())["overlap"]["pairs"][0]["reason"] == reason
    assert reason in " ".join(done.output.split())
    assert "95% interval" not in done.output
    for absent in ("0%–79%", "21%–100%"):
        assert absent not in done.output and absent not in (tmp_path / "overlap.md").read_text()
    assert done.output.strip().splitlines()[-1] == "FAIL: 1 of 1 judged pair(s) HIGH"


def test_tool_crowd_options_are_checked_before_any_server_starts(cli, tmp_path: Path, no_api_key):
    suite = write(tmp_path / "s.csv", "test_name,user_prompt,expected_tools\na,hello,x\n")
    for args, said in (
        (["--tool-steps", "0,2"], "error: --tool-steps needs --distractor-tools"),
        (["--seed", "2"], "error: --seed orders the distractors"),
        (
            ["--distractor-tools", "lookalike:2", "--replay", str(tmp_path)],
            "error: --distractor-tools sits beside live servers, and --replay answers from a cassette",
        ),
        (["--distractor-tools", str(tmp_path / "none.json")], "error: --distractor-tools"),
        (
            ["--distractor-tools", "lookalike:2", "--resume", "-o", str(tmp_path / "r.json")],
            "error: --resume of a run with lookalike:N decoy tools needs the decoys it ran with",
        ),
    ):
        ran = cli("--csv", suite, "--dry-run", *args)
        code, output = ran.exit_code, ran.output
        assert code == 2 and output.startswith(said) and len(output.strip().splitlines()) == 1, (
            output
        )


def test_overlap_needs_two_skills(cli, tmp_path: Path, no_api_key):
    ran = cli("overlap", SKILL_DIR)
    code, output = ran.exit_code, ran.output
    assert code == 2 and output.startswith("error: overlap needs two skills at least"), output


# ============================================================================ hostile text
HOSTILE = "evil | `code` [link](x) \x1b]52;c;AAAA\x07 \u202e <script>alert(1)</script>\nline"


def test_the_crowding_section_escapes_what_it_did_not_write():
    """Queries, descriptions and sources are data in every sink: markdown cells, the terminal
    (no escape sequence or bidi override reaches it raw) and the HTML page (JSON, textContent)."""
    record = CrowdingRecord(
        kind="skills",
        steps=[1],
        seed=1,
        sources=[HOSTILE],
        distractors=[DistractorRecord(name="decoy", source="folder", description=HOSTILE)],
        points=[
            CrowdPointRecord(
                distractors=1, model=HOSTILE, subject="s", series={"triggerRate": 50.0}
            )
        ],
        thieves=[
            ThiefRecord(case=HOSTILE, expected="s", thief="decoy", distractors=1, runs=1, of_runs=2)
        ],
        hints=[
            ConsolidationHintRecord(
                kind="skill",
                expected="s",
                taken_by="decoy",
                rate=0.5,
                taken_by_description=HOSTILE,
                cases=[HOSTILE],
            )
        ],
    )
    markdown = "\n".join(crowding_markdown(record))
    assert "<script>" not in markdown and "\x1b" not in markdown and "\u202e" not in markdown
    assert "evil \\| &#96;code&#96;" in markdown
    from rich.console import Console

    console = Console(record=True, width=200, color_system=None)
    print_crowding(console, record)
    shown = console.export_text()
    assert "\x1b" not in shown and "\u202e" not in shown and "\\x1b" in shown
    page = render_html(
        {"title": "t", "sections": [{"key": "crowding", "data": dump_record(record)}]}
    )
    assert "<script>alert" not in page and "\\u003cscript\\u003e" in page


@pytest.mark.skipif(
    not (shutil.which("chromium") or os.environ.get("CI")), reason="chromium is not installed"
)
def test_the_curve_is_drawn_by_the_page_and_data_stays_text(tmp_path: Path):
    """The HTML page draws the curve itself (an inline SVG: a line and a band per rate, a dot per
    step) and shows every name and query as text, in a real browser."""
    trap = "<script>document.title='pwned'</script>"
    points = [
        CrowdPointRecord(
            distractors=step,
            model="haiku",
            subject="warehouse-sql",
            series={"triggerRate": rate, "falsePositiveRate": 0.0, "triggerScore": rate},
            intervals={"triggerRate": (rate / 2, 100.0), "triggerScore": (rate / 3, 100.0)},
        )
        for step, rate in ((0, 100.0), (4, 60.0), (8, 40.0))
    ]
    record = CrowdingRecord(
        kind="skills",
        steps=[0, 4, 8],
        seed=42,
        sources=["lookalike:8"],
        points=points,
        thieves=[
            ThiefRecord(
                case=trap,
                expected="warehouse-sql",
                thief="metric-definer",
                distractors=4,
                runs=1,
                of_runs=1,
                instead=1,
            )
        ],
    )
    results = E.Results(
        Metadata(total_results=0, generated_at="now", mode="batch", evaluation="skills", model="m"),
        False,
        E.SummaryRecord(cases=0, passed=0, failed=0),
        [],
        lambda: (),
        0,
        {"crowding": record},
        "crowd",
    )
    page = tmp_path / "crowd.html"
    write_html_report(str(page), results)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}",
         "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    dom = done.stdout
    assert "The crowded room: skills beside the skill under test" in dom, done.stderr[-2000:]
    assert dom.count("<polyline") == 3 and dom.count("<polygon") == 2 and dom.count("<circle") == 9
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert "<title>pwned" not in dom and "Skill evaluation report" in dom
