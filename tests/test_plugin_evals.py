"""Whole plugins in Claude Code's own eval format (`evals/`): the suite read as `claude plugin
eval` reads it, its static findings before any spend, the six grader kinds, and, through the real
CLI against the scripted server, agreement with `claude plugin eval --json` per case and arm, a
slash command reaching the model expanded, and a significant with/without delta.

The fixture plugin tests/plugins/greeter ships a skill (greeting-card), a command (welcome) and
four cases; under the scripted server's `plugin_claude_code` rule (see its docstring) the with arm
calls the skill for prompts sharing its words, and the outcome of every grader follows by hand:
- 01-greet: with: Skill(greeter:greeting-card), then "Done: ..." -> both graders pass (1.0);
  without: no skill, "Here is my answer ..." -> both fail (0.0). 2/2 vs 0/2.
- 02-capital: no skill either way; `tool_used Skill min 0 max 0 arm both` and `not_contains
  error` pass -> 2/2 vs 2/2.
- 03-welcome-command: `/greeter:welcome Alex` expands to the command's text, whose words match
  the skill; `tool_used Skill` with no arm is with-only (shown, not scored), `file_exists` absent
  passes -> 2/2 vs 2/2 (without, the with-only grader is not graded at all).
- 04-yaml-case: tool_order Skill before Read fails (no Read), `tool_used Read max 0` can never
  pass (expected 1..0: the warning), `count:1` of "Done" passes with the plugin only -> with
  1/3 (0.33), without 0 -> 0/2 vs 0/2."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, Ran, needs_claude, spawn
from fake_anthropic import (
    ScriptedAnthropic,
    called_tools,
    claude_code_tool_use,
    delegating_claude_code,
    delegation_choice,
    forced_tool,
    listed_agents,
    plugin_claude_code,
    reply,
    request_texts,
    text,
    tool_results_in,
    tool_use,
    user_query,
)
from plugin_side_by_side import claude_code_env

from claude_tool_evaluator.errors import InputProblems
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.loaders.plugin_evals import case_warnings, load_case, load_plugin
from claude_tool_evaluator.scoring.plugin_graders import (
    PluginRunView,
    PluginToolCall,
    arm_delta,
    grade_run,
    run_score,
)

PLUGIN = ROOT / "tests" / "plugins" / "greeter"
EXPECTED_PASSES = {  # case -> (with passed, without passed), 2 runs each (see the docstring)
    "01-greet": (2, 0),
    "02-capital": (2, 2),
    "03-welcome-command": (2, 2),
    "04-yaml-case": (0, 0),
}


def evaluator(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> Ran:
    environment = {**os.environ, "ANTHROPIC_API_KEY": TEST_API_KEY, **(env or {})}
    return spawn(*args, cwd=cwd, env=environment, timeout=600)


def test_the_suite_is_read_as_claude_code_reads_it(tmp_path: Path):
    plugin = load_plugin(PLUGIN)
    assert (plugin.name, plugin.skills, plugin.commands) == (
        "greeter",
        ["greeting-card"],
        ["welcome"],
    )
    cases = {c.name: c for c in plugin.cases}
    assert list(cases) == list(EXPECTED_PASSES)
    greet = cases["01-greet"]
    assert (greet.runs, greet.max_turns, greet.timeout_seconds, greet.tags) == (
        2,
        4,
        300,
        ["skill"],
    )
    assert [g.name for g in greet.graders] == ["says-done", "uses-skill"]  # files in name order
    says_done = greet.graders[0]
    assert says_done.config == {  # the body is the pattern; Claude Code's defaults filled in
        "target": "last_message",
        "pattern": "Done",
        "flags": "",
        "match": "contains",
    }
    yaml_case = cases["04-yaml-case"]
    assert yaml_case.prompt.startswith("Write a formal greeting card that greets Sam")
    assert cases["02-capital"].max_turns == 10  # Claude Code's default
    scaffolded = tmp_path / "scaffolded"
    (scaffolded / "graders").mkdir(parents=True)
    (scaffolded / "case.yaml").write_text(
        'schema_version: "1.0"\nname: s\ncontext: {scaffold_script: setup.sh}\n'
        "execution: {prompt: Go., env: {A: b}}\ngraders: [{name: g, type: regex, pattern: x}]\n"
    )
    assert case_warnings(load_case(scaffolded)) == [
        "s: execution.env not acted on by this product's runs (claude plugin eval acts on them)",
        "s: its scaffold_script is not run without --scaffold (author-supplied bash that runs as "
        "you: pass it only for suites you trust); the case runs against an unstaged workspace",
    ]
    assert case_warnings(load_case(scaffolded), scaffold=True) == [
        "s: execution.env not acted on by this product's runs (claude plugin eval acts on them)"
    ]
    assert case_warnings(yaml_case) == [
        "04-yaml-case/never-read: tool_used Read expects 1..0, which no run can meet (set min: 0 "
        "too); scored as Claude Code scores it: failed"
    ]


def broken_plugin(tmp_path: Path) -> Path:
    folder = tmp_path / "greeter"
    shutil.copytree(PLUGIN, folder)
    evals = folder / "evals"
    (evals / "05-no-graders").mkdir()
    (evals / "05-no-graders" / "prompt.md").write_text("Say hello.\n")
    (evals / "06-typo" / "graders").mkdir(parents=True)
    (evals / "06-typo" / "prompt.md").write_text("Say hello.\n")
    (evals / "06-typo" / "graders" / "uses.md").write_text(
        "---\ntype: tool_used\ntool: Skill\nminimum: 1\n---\n"
    )
    (evals / "07-missing-command" / "graders").mkdir(parents=True)
    (evals / "07-missing-command" / "prompt.md").write_text("/greeter:farewell Alex\n")
    (evals / "07-missing-command" / "graders" / "done.md").write_text(
        "---\ntype: regex\n---\nDone\n"
    )
    return folder


def test_static_findings_are_one_line_each_exit_2_before_any_spend(tmp_path: Path):
    folder = broken_plugin(tmp_path)
    with ScriptedAnthropic() as api:
        done = evaluator("plugin", str(folder), "--base-url", api.url)
        assert api.requests == []
    assert done.exit_code == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr
    assert any("05-no-graders/prompt.md" in line and "no graders" in line for line in lines), lines
    assert any(
        "06-typo/graders/uses.md:4" in line and "unknown tool_used grader field 'minimum'" in line
        for line in lines
    ), lines
    assert any(
        "07-missing-command/prompt.md" in line and "no command or skill 'farewell'" in line
        for line in lines
    ), lines


def run_view(calls: list[tuple[str, dict]], answer: str = "", files: list[str] | None = None):
    return PluginRunView(
        tool_calls=[PluginToolCall(n, i) for n, i in calls],
        last_message=answer,
        created_files=files or [],
    )


def test_each_grader_kind_means_what_it_means_in_claude_code(tmp_path: Path):
    asyncio.run(each_grader_kind(tmp_path))


async def each_grader_kind(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    case_dir = folder / "evals" / "c" / "graders"
    case_dir.mkdir(parents=True)
    (folder / "evals" / "c" / "prompt.md").write_text("Do it.\n")
    graders = {
        "a-regex-count.md": "---\ntype: regex\nmatch: count:2\nflags: i\n---\ndone\n",
        "b-order.md": "---\ntype: tool_order\nbefore: Read\nafter: {tool: Write, input_match: out}\n---\n",
        "c-files.md": "---\ntype: file_exists\npath: 'reports/**/*.md'\n---\n",
        "d-skill.md": "---\ntype: tool_used\ntool: Skill\n---\n",
        "e-judge.md": "---\ntype: llm\n---\nThe answer says done.\n",
    }
    for name, content in graders.items():
        (case_dir / name).write_text(content)
    case = load_plugin(folder).cases[0]
    votes = itertools.cycle([True, False, True])  # 2 of 3: passed

    async def vote(prompt: str, index: int) -> bool:
        assert "The answer says done." in prompt and "Done and DONE" in prompt
        return next(votes)

    view = run_view(
        [
            ("Read", {"file_path": "a"}),
            ("Skill", {"skill": "p:s"}),
            ("Write", {"file_path": "out.md"}),
        ],
        "Done and DONE",
        ["reports/2026/x.md"],
    )
    verdicts = await grade_run(case, view, "with", vote)
    by_name = {v.name: v for v in verdicts}
    assert by_name["a-regex-count"].passed and by_name["a-regex-count"].explanation == (
        "found 2 matches (expected 2)"
    )
    assert by_name["b-order"].explanation == "Read@0 precedes Write@2"
    assert by_name["c-files"].passed
    assert by_name["d-skill"].with_only and not by_name["d-skill"].scored  # shown, not scored
    assert (
        by_name["e-judge"].passed
        and by_name["e-judge"].explanation == "judge votes: PASS FAIL PASS"
    )
    assert run_score(verdicts) == 1.0
    # The without arm does not grade with-only graders at all; no arm (--ablation none) scores all.
    no_votes = iter([False, False, True])

    async def vote_fail(prompt: str, index: int) -> bool:
        return next(no_votes)

    without = await grade_run(case, run_view([], "nothing"), "without", vote_fail)
    assert "d-skill" not in {v.name for v in without}
    assert run_score(without) == 0.0
    alone = await grade_run(case, view, None, vote)
    assert not any(v.with_only for v in alone)


def test_five_of_five_against_none_is_significant():
    delta = arm_delta("case", [1.0] * 5, [0.0] * 5)
    assert delta.significant and round(delta.p_value, 4) == 0.0079
    low, high = delta.interval
    assert 0.3 < low < 0.5 and high == 1.0
    assert delta.verdict().startswith("significant: delta +1.00 [+0.")
    noisy = arm_delta("case", [1.0, 1.0], [0.0, 0.0])
    assert not noisy.significant and noisy.runs_to_decide and noisy.runs_to_decide > 2
    assert "would decide it" in noisy.verdict()
    alone = arm_delta("case", [1.0, 0.5], [])  # --ablation none: no arm without the plugin
    assert alone.verdict() == "score 0.75 with the plugin (no arm without it)"


def claude_plugin_eval(api_url: str, tmp_path: Path, *args: str) -> dict:
    """`claude plugin eval` itself on the fixture plugin, against the same scripted server."""
    home = tmp_path / "cc-home"
    home.mkdir()
    out = tmp_path / "cc.json"
    done = subprocess.run(
        [
            str(CLAUDE),
            "plugin",
            "eval",
            str(PLUGIN),
            "--json",
            str(out),
            "--trust-plugin",
            "--no-publish",
            "--output-dir",
            str(tmp_path / "cc-out"),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=claude_code_env(api_url, TEST_API_KEY, home),
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert out.is_file(), done.stdout + done.stderr
    return json.loads(out.read_text())


def pass_counts(document: dict) -> dict[str, tuple[int, ...]]:
    """Per case, the runs passed in each arm, in Claude Code's JSON (`cases[].arms`)."""
    return {
        case["name"]: tuple(
            sum(1 for r in case["arms"][arm] if r["passed"]) for arm in ("with", "without")
        )
        for case in document["cases"]
    }


def arm_runs(document: dict) -> dict[tuple[str, str], list[dict]]:
    """Our results document's runs by case and arm (`results`, in run order)."""
    found: dict[tuple[str, str], list[dict]] = {}
    for run in document["results"]:
        found.setdefault((run["case"], run["arm"]), []).append(run)
    return found


def our_pass_counts(document: dict) -> dict[str, tuple[int, ...]]:
    """Per case of our document's plugin section, the runs passed in each arm."""
    runs = arm_runs(document)
    return {
        case["name"]: tuple(
            sum(1 for r in runs.get((case["name"], arm), []) if r["passed"])
            for arm in ("with", "without")
        )
        for case in document["plugin"]["cases"]
    }


@needs_claude
def test_pass_counts_agree_with_claude_plugin_eval(tmp_path: Path):
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        ours = evaluator(
            "plugin",
            str(PLUGIN),
            "--base-url",
            api.url,
            "-o",
            str(tmp_path / "ours.json"),
            "--report",
            str(tmp_path / "ours.md"),
            "--pr-comment",
            str(tmp_path / "comment.md"),
            env={
                "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
                "GITHUB_OUTPUT": str(tmp_path / "outputs.txt"),
            },
        )
        # 04-yaml-case scores 0.33 with the plugin: under Claude Code's threshold of 1, a failure
        assert ours.exit_code == 1, ours.stdout + ours.stderr
        assert "below the threshold (score 1) with the plugin: 01-greet" not in ours.stdout
        assert "below the threshold (score 1) with the plugin: 04-yaml-case" in ours.stdout
        expanded = [
            r for r in api.requests if "WELCOME-TEMPLATE-7" in json.dumps(r["body"].get("messages"))
        ]
        theirs = claude_plugin_eval(api.url, tmp_path)
    # a slash command reaches the model expanded by Claude Code (the command file's text)
    assert expanded, "no request held the expanded /greeter:welcome command"
    assert "04-yaml-case/never-read: tool_used Read expects 1..0" in ours.stdout
    our_counts = our_pass_counts(json.loads((tmp_path / "ours.json").read_text()))
    assert pass_counts(theirs) == EXPECTED_PASSES
    assert our_counts == EXPECTED_PASSES
    # grader by grader, the first run of each arm says the same
    our_doc = json.loads((tmp_path / "ours.json").read_text())
    our_runs = arm_runs(our_doc)
    for our_case, their_case in zip(our_doc["plugin"]["cases"], theirs["cases"], strict=True):
        for arm in ("with", "without"):
            first = our_runs[(our_case["name"], arm)][0]
            ours_first = {g["name"]: g["passed"] for g in first["graders"]}
            theirs_first = {g["name"]: g["passed"] for g in their_case["arms"][arm][0]["graders"]}
            assert ours_first == theirs_first, (our_case["name"], arm)
    outputs = (tmp_path / "outputs.txt").read_text()  # what the GitHub Action uploads
    assert "passed=false" in outputs and f"pr_comment={tmp_path / 'comment.md'}" in outputs
    assert f"output={tmp_path / 'ours.json'}" in outputs
    for written in ("ours.md", "comment.md", "summary.md"):  # report, PR comment, step summary
        assert "| 01-greet | 2/2 | 0/2 |" in (tmp_path / written).read_text()


@pytest.fixture(scope="module")
def five_each_way(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, Path]:
    """01-greet under --runs auto, with the JUnit and HTML writers: it passes every run with the
    plugin and none without, so each arm is decided after its first five runs (5/5 against 0/5).
    One run, read by the tests of the delta and of --runs auto; its run folders go in a TMPDIR
    of its own, which the run leaves empty."""
    folder = tmp_path_factory.mktemp("five-each-way")
    (folder / "tmp").mkdir()
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        done = evaluator(
            "plugin",
            str(PLUGIN),
            "--base-url",
            api.url,
            "--runs",
            "auto",
            "--case",
            "01-greet",
            "--junit",
            str(folder / "plugin.xml"),
            "--html",
            str(folder / "plugin.html"),
            "-o",
            str(folder / "ours.json"),
            env={"TMPDIR": str(folder / "tmp")},
        )
    assert done.exit_code == 0, done.stdout + done.stderr
    return done, folder


@needs_claude
@pytest.mark.xdist_group("plugin-five-each-way")
def test_five_runs_each_way_report_a_significant_delta(five_each_way):
    done, folder = five_each_way
    assert (
        "01-greet: with 5/5, without 0/5: significant: delta +1.00 [+0.39, +1.00], p = 0.0079"
        in done.stdout
    )
    junit = (folder / "plugin.xml").read_text()  # the product's JUnit and HTML writers
    assert 'name="configuration" value="with_plugin"' in junit
    assert "passed 0/5 runs (a baseline: reported, it does not fail the suite)" in junit
    assert "01-greet" in (folder / "plugin.html").read_text()
    deltas = json.loads((folder / "ours.json").read_text())["plugin"]["deltas"]
    assert deltas[0]["significant"] and round(deltas[0]["p_value"], 4) == 0.0079
    # each run's folder (its HOME, the plugin copy) is removed off the run's slot, all before exit
    assert list((folder / "tmp").iterdir()) == []


def test_dry_run_prices_and_sends_nothing(tmp_path: Path):
    with ScriptedAnthropic() as api:
        done = evaluator("plugin", str(PLUGIN), "--base-url", api.url, "--dry-run", "--runs", "3")
        assert api.requests == []
    assert done.exit_code == 0, done.stderr
    assert "runs: 24" in done.stdout  # 4 cases x 2 arms x 3 runs


@needs_claude
def test_a_model_matrix_resumes_and_max_cost_holds(tmp_path: Path):
    out = tmp_path / "ours.json"
    common = ["plugin", str(PLUGIN), "--case", "02-capital", "-o", str(out)]
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        first = evaluator(
            *common, "--base-url", api.url, "--model", "haiku", "--model", "sonnet", "--runs", "1"
        )
        assert first.exit_code == 0, first.stdout + first.stderr
        made = len(api.requests)
        again = evaluator(
            *common,
            "--base-url",
            api.url,
            "--model",
            "haiku",
            "--model",
            "sonnet",
            "--runs",
            "1",
            "--resume",
        )
        assert again.exit_code == 0 and len(api.requests) == made  # every run was already there
        capped = evaluator(  # the first run spends more than the cap: no other run starts
            *common,
            "--base-url",
            api.url,
            "--runs",
            "3",
            "--max-cost",
            "0.000001",
            "--concurrency",
            "1",
            "-o",
            str(tmp_path / "capped.json"),
        )
        assert capped.exit_code == 1, capped.stdout + capped.stderr
        assert "stopped at --max-cost $1e-06: 5 run(s) not started" in capped.stdout
        assert len(json.loads((tmp_path / "capped.json").read_text())["results"]) == 1
    document = json.loads(out.read_text())
    labels = {r["label"].split(" @ ")[0] for r in document["results"]}
    assert labels == {"haiku", "sonnet"}
    assert [d["name"].split(" (")[0] for d in document["plugin"]["deltas"]] == [
        "02-capital",
        "(all cases)",
        "02-capital",
        "(all cases)",
    ]


def test_an_installed_plugin_is_found_by_name(tmp_path: Path):
    installed = tmp_path / "home" / ".claude" / "plugins"
    installed.mkdir(parents=True)
    copy = shutil.copytree(PLUGIN, tmp_path / "cache" / "greeter")
    (installed / "installed_plugins.json").write_text(
        json.dumps({"version": 2, "plugins": {"greeter@team-tools": [{"installPath": str(copy)}]}})
    )
    for name in ("greeter", "greeter@team-tools"):
        done = evaluator("plugin", name, "--dry-run", env={"HOME": str(tmp_path / "home")})
        assert done.exit_code == 0 and "runs: 16" in done.stdout, done.stdout + done.stderr
    missing = evaluator(
        "plugin", "no-such-plugin", "--dry-run", env={"HOME": str(tmp_path / "home")}
    )
    assert (
        missing.exit_code == 2
        and "neither a plugin folder nor an installed plugin" in missing.stderr
    )


def test_import_reads_an_evals_suite_into_trigger_sets_and_task_evals(tmp_path: Path):
    folder = shutil.copytree(PLUGIN, tmp_path / "greeter")
    for name, grader in (
        ("05-fires", "---\ntype: tool_used\ntool: Skill\ninput_match: greeting-card\n---\n"),
        ("06-quiet", "---\ntype: tool_used\ntool: Skill\nmin: 0\nmax: 0\n---\n"),
    ):
        (folder / "evals" / name / "graders").mkdir(parents=True)
        (folder / "evals" / name / "prompt.md").write_text(f"The query of {name}.\n")
        (folder / "evals" / name / "graders" / "skill.md").write_text(grader)
    out = tmp_path / "imported"
    done = evaluator("import", "plugin-evals", str(folder), "-o", str(out))
    assert done.exit_code == 0, done.stderr
    assert json.loads((out / "greeting-card-trigger.json").read_text()) == [
        {"query": "The query of 05-fires.", "should_trigger": True},
        {"query": "The query of 06-quiet.", "should_trigger": False},
    ]
    tasks = json.loads((out / "greeting-card-evals.json").read_text())["evals"]
    assert [t["name"] for t in tasks] == list(EXPECTED_PASSES)
    assert tasks[0]["expectations"] == [
        "The last_message contains text matching the regular expression /Done/",
        "The run calls the Skill tool with input matching /greeting-card/ at least 1 times",
    ]
    # both load as this product's suites (nothing is sent: --dry-run)
    skill = str(folder / "skills" / "greeting-card")
    for given in (
        ["--trigger", str(out / "greeting-card-trigger.json")],
        ["--tests", str(out / "greeting-card-evals.json")],
    ):
        loaded = evaluator("--skill", skill, *given, "--dry-run")
        assert loaded.exit_code == 0, loaded.stdout + loaded.stderr
    refused = evaluator("import", "bfcl", str(folder), "-o", str(out))
    assert refused.exit_code == 2 and "takes no PLUGIN argument" in refused.stderr


@needs_claude
@pytest.mark.xdist_group("plugin-five-each-way")
def test_runs_auto_stops_each_arm_once_it_is_decided(five_each_way):
    """01-greet passes every run with the plugin and none without: after the first 5 rounds each
    arm's 95 % interval is wholly on one side of one half, so no sixth run is made."""
    done, folder = five_each_way
    assert "01-greet: with 5/5, without 0/5: significant" in done.stdout
    arms = arm_runs(json.loads((folder / "ours.json").read_text()))
    assert [len(arms[("01-greet", "with")]), len(arms[("01-greet", "without")])] == [5, 5]
    twin = evaluator("--plugin", str(PLUGIN), "-i", "auto", "--dry-run")  # -i: the suites' count
    assert twin.exit_code == 2 and "-i does not apply to plugin runs: use --runs N" in twin.stderr
    too_many = evaluator("plugin", str(PLUGIN), "--runs", "51", "--dry-run")
    assert too_many.exit_code == 2 and "at most 50 runs" in too_many.stderr


@needs_claude
def test_a_cached_run_is_answered_from_the_cache(tmp_path: Path):
    args = [
        "plugin",
        str(PLUGIN),
        "--case",
        "01-greet",
        "--runs",
        "1",
        "--cache",
        str(tmp_path / "c"),
    ]
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        first = evaluator(*args, "--base-url", api.url)
        made = len(api.requests)
        again = evaluator(*args, "--base-url", api.url)
    assert first.exit_code == again.exit_code == 0, again.stdout + again.stderr
    assert made > 0 and len(api.requests) == made
    assert "01-greet: with 1/1, without 0/1" in again.stdout


@needs_claude
def test_distractors_installed_loads_the_other_plugins_in_both_arms(tmp_path: Path):
    """Another installed plugin (cards, a birthday-card skill sharing one word with 01-greet's
    prompt: too few to be chosen) is listed in every run; the plugin under test only with it."""
    home = tmp_path / "home"
    other = tmp_path / "plugins" / "cards" / "1.0.0"
    (other / ".claude-plugin").mkdir(parents=True)
    (other / ".claude-plugin" / "plugin.json").write_text('{"name": "cards", "version": "1.0.0"}')
    (other / "skills" / "birthday-card").mkdir(parents=True)
    (other / "skills" / "birthday-card" / "SKILL.md").write_text(
        "---\nname: birthday-card\ndescription: Writes a birthday card for a person.\n---\nBe kind.\n"
    )
    (home / ".claude" / "plugins").mkdir(parents=True)
    (home / ".claude" / "plugins" / "installed_plugins.json").write_text(
        json.dumps({"version": 2, "plugins": {"cards@shop": [{"installPath": str(other)}]}})
    )
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        done = evaluator(
            "plugin",
            str(PLUGIN),
            "--base-url",
            api.url,
            "--case",
            "01-greet",
            "--runs",
            "1",
            "--distractors",
            "installed",
            env={"HOME": str(home)},
        )
        listings = [json.dumps(r["body"].get("messages")) for r in api.requests]
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "1 other installed plugin(s) in both arms" in done.stdout
    assert "01-greet: with 1/1, without 0/1" in done.stdout
    first_requests = [text for text in listings if "cards:birthday-card" in text]
    assert first_requests and all("cards:birthday-card" in text for text in listings)
    assert any("greeter:greeting-card" not in text for text in listings)  # the without arm


@needs_claude
def test_a_hung_run_is_an_error_on_its_case_and_the_suite_goes_on(tmp_path: Path):
    folder = shutil.copytree(PLUGIN, tmp_path / "greeter")
    (folder / "evals" / "08-hang" / "graders").mkdir(parents=True)
    (folder / "evals" / "08-hang" / "prompt.md").write_text(
        "---\nruns: 1\ntimeout_seconds: 3\n---\nHANG-PLEASE forever.\n"
    )
    (folder / "evals" / "08-hang" / "graders" / "done.md").write_text(
        "---\ntype: regex\n---\nDone\n"
    )

    def responder(body: dict):
        return {"hang": 30} if "HANG-PLEASE" in user_query(body) else plugin_claude_code(body)

    with ScriptedAnthropic(responder=responder) as api:
        done = evaluator(
            "plugin",
            str(folder),
            "--base-url",
            api.url,
            "--case",
            "08-hang",
            "--case",
            "02-capital",
            "--runs",
            "1",
            "-o",
            str(tmp_path / "ours.json"),
        )
    assert done.exit_code == 1, done.stdout + done.stderr
    assert "08-hang [with] run 1: error (score 0.00): timed out after 3s" in done.stdout
    assert "02-capital: with 1/1, without 1/1" in done.stdout
    cases = json.loads((tmp_path / "ours.json").read_text())["plugin"]["cases"]
    assert [c["name"] for c in cases] == ["02-capital", "08-hang"]


@needs_claude
def test_llm_graders_are_three_votes_of_our_judge(tmp_path: Path):
    """The judge is this product's (its forced `grade` call); it votes FAIL on the second of
    the three votes and PASS on the others: 2 of 3, passed, with the votes in the explanation."""
    folder = shutil.copytree(PLUGIN, tmp_path / "greeter")
    (folder / "evals" / "09-judged" / "graders").mkdir(parents=True)
    (folder / "evals" / "09-judged" / "prompt.md").write_text(
        "---\nruns: 1\n---\nPlease write a formal greeting card that greets Alex warmly by name.\n"
    )
    (folder / "evals" / "09-judged" / "graders" / "warm.md").write_text(
        "---\ntype: llm\n---\nThe card greets Alex warmly.\n"
    )

    def responder(body: dict):
        if forced_tool(body) == "grade":
            passed = "(Vote 2 of 3.)" not in json.dumps(body["messages"])
            return reply(
                tool_use("grade", {"passed": passed, "score": float(passed), "evidence": "x"})
            )
        return plugin_claude_code(body)

    with ScriptedAnthropic(responder=responder) as api:
        done = evaluator(
            "plugin",
            str(folder),
            "--base-url",
            api.url,
            "--case",
            "09-judged",
            "-o",
            str(tmp_path / "ours.json"),
        )
        judged = [r for r in api.requests if forced_tool(r["body"]) == "grade"]
    assert done.exit_code == 0, done.stdout + done.stderr
    assert len(judged) == 6  # 3 votes on each arm's run
    assert "The card greets Alex warmly." in json.dumps(judged[0]["body"]["messages"])
    runs = arm_runs(json.loads((tmp_path / "ours.json").read_text()))
    grader = runs[("09-judged", "with")][0]["graders"][0]
    assert grader["passed"] and grader["explanation"] == "judge votes: PASS FAIL PASS"
    assert grader["judge_votes"] == [True, False, True]


@needs_claude
def test_file_exists_sees_the_files_a_run_created(tmp_path: Path):
    folder = shutil.copytree(PLUGIN, tmp_path / "greeter")
    case = folder / "evals" / "10-writes"
    (case / "graders").mkdir(parents=True)
    (case / "prompt.md").write_text(
        "---\nruns: 1\nallowed_tools: [Write]\n---\nSAVE-NOTE for Alex, please.\n"
    )
    (case / "graders" / "note.md").write_text("---\ntype: file_exists\npath: 'notes/*.txt'\n---\n")
    (case / "graders" / "listed.md").write_text(
        "---\ntype: regex\ntarget: files\n---\n^notes/alex\\.txt$\n"
    )

    def responder(body: dict):
        if "SAVE-NOTE" not in user_query(body):
            return plugin_claude_code(body)
        if tool_results_in(body):
            return reply(text("Saved."))
        folder = re.search(r"Primary working directory: (\S+)", "\n".join(request_texts(body)))[1]
        return reply(tool_use("Write", {"file_path": f"{folder}/notes/alex.txt", "content": "Hi"}))

    with ScriptedAnthropic(responder=responder) as api:
        done = evaluator(
            "plugin",
            str(folder),
            "--base-url",
            api.url,
            "--case",
            "10-writes",
            "-o",
            str(tmp_path / "ours.json"),
        )
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "10-writes: with 1/1, without 1/1" in done.stdout


def test_a_baseline_grader_compares_with_the_case_s_baseline_trajectory(tmp_path: Path):
    case_dir = tmp_path / "p" / "evals" / "c"
    (case_dir / "graders").mkdir(parents=True)
    (case_dir / "prompt.md").write_text("Do it.\n")
    (case_dir / "baseline.jsonl").write_text('{"type": "assistant", "note": "BASELINE-STEP"}\n')
    (case_dir / "graders" / "as-good.md").write_text(
        "---\ntype: baseline\nbaseline_file: baseline.jsonl\n---\nIt is at least as tidy.\n"
    )
    (case_dir / "graders" / "outside.md").write_text(
        "---\ntype: baseline\nbaseline_file: ../../../secret.jsonl\n---\nAnything.\n"
    )
    (tmp_path / "secret.jsonl").write_text('{"secret": 1}\n')
    # the plugin verbs refuse the suite before anything runs (tests/test_hostile_plugins.py);
    # the grader keeps its own guard, seen here on the case read alone
    with pytest.raises(InputProblems, match="resolves outside the plugin"):
        load_plugin(tmp_path / "p")
    case = load_case(case_dir)
    assert case is not None
    prompts_seen = []

    async def vote(prompt: str, index: int) -> bool:
        prompts_seen.append(prompt)
        return True

    view = PluginRunView(trace=[{"type": "assistant", "note": "NEW-STEP"}])
    verdicts = {v.name: v for v in asyncio.run(grade_run(case, view, "with", vote))}
    assert verdicts["as-good"].passed and len(prompts_seen) == 3
    assert "BASELINE trajectory:" in prompts_seen[0] and "BASELINE-STEP" in prompts_seen[0]
    assert "NEW-STEP" in prompts_seen[0] and "It is at least as tidy." in prompts_seen[0]
    assert not verdicts["outside"].passed  # no file outside the case's folder reaches the judge
    assert verdicts["outside"].explanation == "../../../secret.jsonl does not exist"


def test_javascript_named_groups_read_as_claude_code_reads_them(tmp_path: Path):
    case_dir = tmp_path / "p" / "evals" / "c"
    (case_dir / "graders").mkdir(parents=True)
    (case_dir / "prompt.md").write_text("Do it.\n")
    (case_dir / "graders" / "twice.md").write_text(
        "---\ntype: regex\n---\n(?<word>[a-z]+) \\k<word>\n"
    )
    case = load_plugin(tmp_path / "p").cases[0]  # Python's re alone refuses `(?<word>`

    async def never_asked(prompt: str, index: int) -> bool:
        raise AssertionError("a regex grader asks no judge")

    verdicts = asyncio.run(grade_run(case, run_view([], "hello hello"), None, never_asked))
    assert verdicts[0].passed


def test_a_catastrophic_regex_grader_is_that_graders_error_within_the_limit(tmp_path: Path):
    """Regex graders go through the bounded pattern engine: `^(a+)+$` (which Python's re takes
    hours over on 36 `a`s and a `b`) is answered by RE2 at once; one RE2 cannot take (a
    lookahead) runs in the worker and, past C.PATTERN_TIME_LIMIT_MS, is that grader's error
    (its explanation says so) while the case's other graders are graded."""
    import test_constants as C

    case_dir = tmp_path / "p" / "evals" / "c"
    (case_dir / "graders").mkdir(parents=True)
    (case_dir / "prompt.md").write_text("Do it.\n")
    for name, pattern in [("nested", "^(a+)+$"), ("looking", "^(?=a)(a+)+$"), ("b", "B$")]:
        front = "flags: i\n" if name == "b" else ""
        (case_dir / "graders" / f"{name}.md").write_text(
            f"---\ntype: regex\n{front}---\n{pattern}\n"
        )
    case = load_plugin(tmp_path / "p").cases[0]

    async def never_asked(prompt: str, index: int) -> bool:
        raise AssertionError("a regex grader asks no judge")

    started = time.monotonic()
    verdicts = asyncio.run(grade_run(case, run_view([], "a" * 36 + "b"), None, never_asked))
    took = time.monotonic() - started
    by_name = {v.name: v for v in verdicts}
    assert not by_name["nested"].passed
    assert by_name["nested"].explanation == "pattern not found in last_message"
    assert not by_name["looking"].passed
    assert by_name["looking"].explanation == (
        f"grader threw: pattern took longer than {C.PATTERN_TIME_LIMIT_MS} ms"
    )
    assert by_name["b"].passed  # the `i` flag reads as JavaScript's
    assert took < C.PATTERN_TIME_LIMIT_MS / 1000 + C.PATTERN_WORKER_START_SECONDS


def crew_model(body: dict) -> dict:
    """The crew plugin's scripted model: the subagent rule first (`delegation_choice` among the
    agents Claude Code lists), else the model among MCP tools in Claude Code's room
    (`claude_code_tool_use`: the best match of the prompt, searched for when deferred)."""
    if "Agent" in called_tools(body) or delegation_choice(user_query(body), listed_agents(body)):
        return delegating_claude_code(body)
    return claude_code_tool_use(body)


@needs_claude
def test_subagents_hooks_and_mcp_calls_are_reported_per_run(tmp_path: Path):
    """A plugin's parts through the real CLI: the audit prompt is handed to its agent (the word
    overlap of the prompt and `ledger-auditor`'s description), its UserPromptSubmit hook adds
    context in every run with the plugin, and the tally prompt reaches its MCP server's tool
    (its real server: `--mocks off`, since by default, as in Claude Code, a server without a mock
    does not start)."""
    plugin = tmp_path / "crew"
    shutil.copytree(ROOT / "tests" / "plugins" / "crew", plugin)
    server = {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/gizmo_server.py"]}
    (plugin / ".mcp.json").write_text(json.dumps({"mcpServers": {"gizmos": server}}))
    out, report = tmp_path / "crew.json", tmp_path / "crew.md"
    with ScriptedAnthropic(responder=crew_model) as api:
        done = evaluator(
            "plugin",
            str(plugin),
            "--mocks",
            "off",
            "--base-url",
            api.url,
            "-o",
            str(out),
            "--report",
            str(report),
            "--trust-plugin",
        )
        results = [b for b in api.message_requests if ": 7 gizmos" in json.dumps(b)]
    assert done.exit_code == 0, done.stdout + done.stderr
    runs = arm_runs(json.loads(out.read_text()))
    context = "UserPromptSubmit added context: Crew context: amounts are in euros."
    for run in runs[("01-audit", "with")]:
        assert run["delegations"] == ["crew:ledger-auditor"] and context in run["hooks"]
    for run in runs[("02-tally", "with")]:
        assert [c.endswith("__tally_gizmo_inventory") for c in run["mcp_calls"]] == [True]
        assert context in run["hooks"] and not run["delegations"]
    for case in ("01-audit", "02-tally"):  # without the plugin: none of its parts
        for run in runs[(case, "without")]:
            assert run["delegations"] == run["hooks"] == run["mcp_calls"] == []
    assert results, "the MCP tool's answer came back from the plugin's real server"
    text = report.read_text()
    assert "| 01-audit | with | delegated to crew:ledger-auditor (2/2); hook " in text
    assert "__tally_gizmo_inventory (2/2)" in text and "[with] delegated to crew:" in done.stdout


def test_an_option_the_plugin_verb_does_not_take_is_one_line_and_exit_2():
    """Every option of the modes' table that `plugin` does not take is refused as the modes
    refuse one: one line naming it, exit 2, nothing run."""
    from click.testing import CliRunner

    from claude_tool_evaluator.cli import main
    from claude_tool_evaluator.options import OPTIONS

    command = main.factories["plugin"]()
    taken = {flag for parameter in command.params for flag in parameter.opts}
    refused = [o for o in OPTIONS if not set(o.flags) & taken]
    assert len(refused) > 50 and not any(o.flag == "--runs" for o in refused)
    for row in refused:
        valueless = row.kwargs.get("is_flag") or row.kwargs.get("count")
        args = ["plugin", str(PLUGIN), row.flag, *([] if valueless else ["x"])]
        result = CliRunner().invoke(main, args)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, (row.flag, result.output)
        assert lines[0].startswith("error: ") and row.flag in lines[0], (row.flag, lines)


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@needs_claude
def test_a_live_plugin_run_holds_its_output_and_a_resume_asks_nothing_it_journaled(
    tmp_path: Path,
):
    """Done when: the -o lock refuses a second plugin run into the output of one still alive
    (one line, exit 2, no request); Ctrl-C keeps what finished (the journal), and --resume then
    makes no request for the runs the journal holds."""
    hanging = [True]

    def responder(body: dict):
        if hanging[0] and "capital" in user_query(body):
            return {"hang": 60}
        return plugin_claude_code(body)

    out = tmp_path / "ours.json"
    with ScriptedAnthropic(responder=responder) as api:
        args = ["plugin", str(PLUGIN), "--case", "0[12]-*", "--runs", "1", "--concurrency", "1"]
        args += ["--base-url", api.url, "-o", str(out)]
        first = subprocess.Popen(
            [sys.executable, str(ROOT / "evaluator.py"), *args],
            env={**os.environ, "ANTHROPIC_API_KEY": TEST_API_KEY},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            journal = journal_path(out)
            wait_for(
                lambda: journal.exists() and len(journal.read_text().splitlines()) == 2,
                first,
                "01-greet's two runs",
            )
            wait_for(
                lambda: any("capital" in user_query(b) for b in api.message_requests),
                first,
                "the hanging run",
            )
            asked = len(api.message_requests)
            second = evaluator(*args)
            lines = [line for line in second.stderr.splitlines() if line.strip()]
            assert second.exit_code == 2 and len(lines) == 1, second.stderr
            assert "still alive" in lines[0] and f"pid {first.pid}" in lines[0]
            assert len(api.message_requests) == asked and first.poll() is None
            first.send_signal(signal.SIGINT)
            stdout, stderr = first.communicate(timeout=120)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        assert first.returncode == 130, stdout + stderr
        kept = [json.loads(line) for line in journal_path(out).read_text().splitlines()]
        assert sorted((r["case"], r["arm"]) for r in kept) == [
            ("01-greet", "with"),
            ("01-greet", "without"),
        ]
        hanging[0] = False
        before = len(api.message_requests)
        again = evaluator(*args, "--resume")
        asked_again = {user_query(b) for b in api.message_requests[before:]}
    assert again.exit_code == 0, again.stdout + again.stderr
    assert "resuming: 2 run(s) kept from the earlier run, 2 to run" in again.stdout
    assert asked_again == {"What is the capital of France?"}
    assert len(json.loads(out.read_text())["results"]) == 4 and not journal_path(out).exists()


def reads_the_staged_file(body: dict) -> dict:
    """A model that reads `staged.txt` once (Read), then answers with what it read."""
    if tool_results_in(body):
        said = json.dumps(body.get("messages"))
        return reply(text("STAGED-OK" if "from the scaffold" in said else "nothing staged"))
    return reply(tool_use("Read", {"file_path": "staged.txt"}))


@needs_claude
def test_scaffold_stages_the_workspace_only_when_asked(tmp_path: Path):
    """`--scaffold` runs a case's scaffold_script in the run's working folder first (as claude
    plugin eval --scaffold does); without it the case runs unstaged, with Claude Code's warning;
    a scaffold that fails is the run's error, scored 0."""
    plugin = tmp_path / "staged"
    shutil.copytree(PLUGIN, plugin)
    for extra in (plugin / "evals").iterdir():
        shutil.rmtree(extra)
    case = plugin / "evals" / "01-staged"
    (case / "graders").mkdir(parents=True)
    (case / "prompt.md").write_text("---\nruns: 1\n---\nWhat does staged.txt say?\n")
    (case / "graders" / "read.md").write_text("---\ntype: regex\n---\nSTAGED-OK\n")
    (case / "case.yaml").write_text('schema_version: "1.0"\ncontext: {scaffold_script: setup.sh}\n')
    (case / "setup.sh").write_text("echo 'from the scaffold' > staged.txt\n")
    with ScriptedAnthropic(responder=reads_the_staged_file) as api:
        staged = evaluator(
            "plugin", str(plugin), "--base-url", api.url, "--scaffold", "--trust-plugin"
        )
        unstaged = evaluator("plugin", str(plugin), "--base-url", api.url)
        (case / "setup.sh").write_text("echo 'no such fixture' >&2; exit 3\n")
        failed = evaluator(
            "plugin", str(plugin), "--base-url", api.url, "--scaffold", "--trust-plugin"
        )
    assert staged.exit_code == 0, staged.stdout + staged.stderr
    assert "01-staged [with] run 1: passed" in staged.stdout and "scaffold" not in staged.stdout
    assert unstaged.exit_code == 1 and "not run without --scaffold" in unstaged.stdout
    assert "01-staged [with] run 1: failed" in unstaged.stdout
    assert failed.exit_code == 1
    assert "run 1: error (score 0.00): scaffold failed (exit 3): no such fixture" in failed.stdout
