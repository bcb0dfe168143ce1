"""The mode × option walk for generation, compare and schema, shards and merge, the
writers (--html, --from, --pr-comment, the tables), whether a change is real, part of a suite
and --cache.

The table, the lab and the registry of observers are in mode_lab.py; test_mode_options.py checks
that the observers cover exactly the table."""

from __future__ import annotations

import csv
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import (
    CLAUDE,
    EXAMPLE_SERVER,
    ROOT,
)
from fake_anthropic import (
    claude_code_tool_use,
    user_query,
)
from mode_lab import (  # the lab, the scripted models and the helpers several files share
    ATTACKED,
    CASES,
    CSV_PROMPTS,
    FINAL,
    GENERATE,
    MD_PROMPT,
    NEGATIVE,
    OBSERVERS,
    OPT_TOOLS,
    POSITIVE,
    QA_PROMPT,
    SHARD_LINES,
    SKILL_DIR,
    SQL_SKILL,
    TOOL_MODES,
    Lab,
    Run,
    answers,
    baseline,
    claude_model,
    claude_wrapper,
    draft_json,
    first,
    merged,
    no_tools,
    observed_in,
    observes,
    opened,
    opt_args,
    opt_run,
    overlap_writers,
    page_data,
    per_query,
    proposals,
    shard_runs,
    skill_args,
    skill_baseline,
    system_text,
    task_baseline,
    through_claude_code,
    tool_args,
    write,
    writers_run,
)

import evaluator
import prompts
import test_constants as C
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.options import option_named
from claude_tool_evaluator.scoring.statistics import runs_to_detect


def generate_baseline(lab: Lab) -> Run:
    run = lab.run(*GENERATE, model=draft_json, cached=True)
    assert run.code == 0, run.output
    return run


def positives_in(markdown: str) -> list[str]:
    section = markdown.split("# Positive Triggers", 1)[1].split("# Negative Triggers", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


@observes("generate_triggers", "generate")
def _(lab, mode):
    run = generate_baseline(lab)
    [request] = run.requests
    assert "Skill name: warehouse-sql" in request["messages"][0]["content"]
    assert system_text(request) == prompts.GENERATION_SYSTEM_PROMPT
    path = write(lab.fresh("warehouse-sql-trigger.md"), run.stdout)
    test = evaluator.load_markdown_test(path)
    assert (
        test.type == "trigger"
        and test.positive_triggers[0] == "Write SQL for metric number 0 per country"
    )


@observes("generate_tests", "generate")
def _(lab, mode):
    folder = lab.fresh("drafts").parent
    run = lab.run("--generate-tests", SKILL_DIR, "-o", folder, model=draft_json)
    assert run.code == 0, run.output
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(
        f"warehouse-sql-{k}.md" for k in ("trigger", "knowledge", "task", "security")
    )
    assert {evaluator.load_markdown_test(folder / n).type for n in names} == {
        "trigger",
        "knowledge",
        "task",
        "security",
    }
    marker = "Also write three tests derived from the skill's instructions"
    assert marker in run.requests[0]["messages"][0]["content"]
    assert marker not in generate_baseline(lab).requests[0]["messages"][0]["content"]


@observes("generate_count", "generate")
def _(lab, mode):
    run = lab.run(*GENERATE, "--generate-count", "2", model=draft_json)
    assert "Write 2 positive queries" in run.requests[0]["messages"][0]["content"]
    assert len(positives_in(run.stdout)) == 2
    assert len(positives_in(generate_baseline(lab).stdout)) == C.DEFAULT_GENERATED_QUERIES


@observes("force", "generate")
def _(lab, mode):
    target = write(lab.fresh("mine.md"), "my own notes\n")
    kept = lab.run(*GENERATE, "-o", target, model=draft_json)
    assert kept.code == 2 and kept.requests == [] and "the file exists" in kept.stderr
    assert target.read_text() == "my own notes\n"
    forced = lab.run(*GENERATE, "-o", target, "--force", model=draft_json)
    assert forced.code == 0 and "# Positive Triggers" in target.read_text()


@observes("output", "generate")
def _(lab, mode):
    target = lab.fresh("drafted.md")
    run = lab.run(*GENERATE, "-o", target, model=draft_json)
    assert run.code == 0 and "# Positive Triggers" in target.read_text()
    assert run.stdout.strip() == "" and "# Positive Triggers" in generate_baseline(lab).stdout


@observes("model", "generate")
def _(lab, mode):
    run = lab.run(*GENERATE, "--model", "claude-opus-5-5", model=draft_json)
    assert [b["model"] for b in run.requests] == ["claude-opus-5-5"]
    assert [b["model"] for b in generate_baseline(lab).requests] == [C.DEFAULT_GENERATION_MODEL]


@observes("max_cost", "generate")
def _(lab, mode):
    run = lab.run(*GENERATE, "--max-cost", "0.000001", model=draft_json)
    assert run.code == 1 and run.requests == [] and "stopped at --max-cost" in run.output
    assert len(generate_baseline(lab).requests) == 1


@observes("dry_run", "generate")
def _(lab, mode):
    run = lab.run(*GENERATE, "--dry-run", model=draft_json)
    assert run.code == 0 and run.requests == [] and "dry run: nothing was sent" in run.output
    assert run.stdout.strip() == ""


# ---------------------------------------------------------------------------- compare and schema
def results_files(lab: Lab) -> tuple[Path, Path, Path]:
    """old: a CSV suite that passes; new: the same suite failing; newer: passing again."""
    if "results-files" not in lab.cache:
        paths = []
        for name, model in (("old", answers), ("new", no_tools), ("newer", answers)):
            path = lab.root / "out" / f"{name}.json"
            lab.run("--csv", lab.csv, "--server-module", EXAMPLE_SERVER, "-o", path, model=model)
            paths.append(path)
        lab.cache["results-files"] = tuple(paths)
    return lab.cache["results-files"]


def compare_files(lab: Lab) -> tuple[Path, Path]:
    """old and new of the CSV suite, six runs a case: each case 6/6 -> 0/6, Fisher's p = 2/924,
    Holm over the two cases 4/924: a significant regression at the default --alpha 0.05."""
    if "compare-files" not in lab.cache:
        paths = []
        for name, model in (("old-6", answers), ("new-6", no_tools)):
            path = lab.root / "out" / f"{name}.json"
            lab.run(*tool_args(lab, "csv", "-i", "6", "-o", path), model=model)
            paths.append(path)
        lab.cache["compare-files"] = tuple(paths)
    return lab.cache["compare-files"]


@observes("compare", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    worse = lab.run("--compare", old, new)
    better = lab.run("--compare", new, old)
    assert worse.code == 1 and "2 regression(s)" in worse.output
    assert better.code == 0 and "2 fix(es)" in better.output


@observes("files", "compare")
def _(lab, mode):
    old, new, newer = results_files(lab)
    run = lab.run("--compare", old, new, newer, "--json")
    assert [(c["old"], c["new"]) for c in run.document()["comparisons"]] == [
        (str(old), str(new)),
        (str(new), str(newer)),
    ]
    assert len(lab.run("--compare", old, new, "--json").document()["comparisons"]) == 1


@observes("report", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    report = lab.fresh("diff.md")
    run = lab.run("--compare", old, new, "--report", report)
    assert run.code == 1
    content = report.read_text()
    assert "Comparison: 2 regression(s)" in content and "`tables_a` | regression" in content


@observes("output", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    out = lab.fresh("diff.json")
    lab.run("--compare", old, new, "-o", out)
    [comparison] = json.loads(out.read_text())["comparisons"]
    assert comparison["failed"] and {c["change"] for c in comparison["cases"]} == {"regression"}


@observes("json_out", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    run = lab.run("--compare", old, new, "--json")
    assert run.document()["comparisons"][0]["failed"] is True
    with pytest.raises(json.JSONDecodeError):
        json.loads(lab.run("--compare", old, new).stdout)


@observes("schema", "schema")
def _(lab, mode):
    run = lab.run("--schema")
    schema = run.document()
    assert run.code == 0 and schema == evaluator.results_schema()
    for path in results_files(lab):
        jsonschema.validate(json.loads(path.read_text()), schema)
    jsonschema.validate(
        writers_run(lab)[0].document() if CLAUDE else baseline(lab, "markdown").document(), schema
    )


@observes("output", "schema")
def _(lab, mode):
    out = lab.fresh("schema.json")
    run = lab.run("--schema", "-o", out)
    assert run.code == 0 and json.loads(out.read_text()) == evaluator.results_schema()
    assert "$defs" not in run.stdout and f"wrote {out}" in run.output


def run_names(document: dict) -> list[tuple]:
    return sorted(
        (r.get("test_name") or r.get("query"), r.get("iteration") or r.get("run"), r.get("model"))
        for r in document["results"]
    )


@observes("shard", "csv", "markdown", "qa", "skills")
def _(lab, mode):
    one, two = shard_runs(lab, mode)
    first, second = run_names(one.document()), run_names(two.document())
    assert first and second and not set(first) & set(second), (first, second)
    if mode == "skills":
        whole = lab.run(*skill_args(lab, "--runs", "2", "--json"), model=SQL_SKILL, cached=True)
    else:
        whole = lab.run(*tool_args(lab, mode, "-i", SHARD_LINES[mode], "--json"), cached=True)
    assert sorted(first + second) == run_names(whole.document())
    assert len(one.requests) + len(two.requests) == len(whole.requests)
    assert (
        one.document()["metadata"]["shard"] == "1/2"
        and two.document()["metadata"]["shard"] == "2/2"
    )
    assert whole.document()["metadata"]["shard"] is None


@observes("merge", "merge")
def _(lab, mode):
    run = merged(lab, "--json")
    document = run.document()
    whole = lab.run(
        *tool_args(lab, "csv", "-i", SHARD_LINES["csv"], "--json"), cached=True
    ).document()
    assert run.requests == [] and run.code == whole_code(whole)
    assert [(c["name"], c["passed"], c["passes"], c["runs"]) for c in document["cases"]] == [
        (c["name"], c["passed"], c["passes"], c["runs"]) for c in whole["cases"]
    ]
    assert run_names(document) == run_names(whole) and document["metadata"]["shard"] is None
    assert document["metadata"]["merged_from"] == [str(p.path) for p in shard_runs(lab, "csv")]


def whole_code(document: dict) -> int:
    return 0 if document["passed"] else 1


@observes("files", "merge")
def _(lab, mode):
    one, two = shard_runs(lab, "csv")
    alone = lab.run("--merge", one.path)
    assert alone.code == 2 and "at least two" in alone.stderr
    assert merged(lab, "--json").code in (0, 1)


@observes("output", "merge")
def _(lab, mode):
    out = lab.fresh("merged.json")
    run = merged(lab, "-o", out)
    document = evaluator.results_document_model().model_validate_json(out.read_text())
    assert f"wrote {out}" in run.output and document.metadata.evaluation == "csv"
    assert len(document.results) == 2 * SHARD_LINES["csv"] and not journal_path(out).exists()


@observes("json_out", "merge")
def _(lab, mode):
    assert merged(lab, "--json").document()["metadata"]["merged_from"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(merged(lab).stdout)


@observes("report", "merge")
def _(lab, mode):
    report = lab.fresh("merged.md")
    merged(lab, "--report", report)
    content = report.read_text()
    assert (
        "tables_a" in content
        and "tables_b" in content
        and f"{2 * SHARD_LINES['csv']} (pass threshold" in content
    )


@observes("junit", "merge")
def _(lab, mode):
    junit = lab.fresh("merged.xml")
    merged(lab, "--junit", junit)
    assert sorted(case.get("name") for case in ET.parse(junit).iter("testcase")) == [
        "tables_a",
        "tables_b",
    ]


@observes("csv_out", "merge")
def _(lab, mode):
    rows = lab.fresh("merged.csv")
    merged(lab, "--csv-out", rows)
    assert len(list(csv.DictReader(rows.open()))) == 2 * SHARD_LINES["csv"]


def merged_html(lab, mode):
    page = lab.fresh("merged.html")
    merged(lab, "--html", page)
    assert "tables_a" in page.read_text() and "<html" in page.read_text().lower()


if option_named("html") and "merge" not in OBSERVERS.get("html", {}):
    observes("html", "merge")(merged_html)


@observes("html", *TOOL_MODES)
def _(lab, mode):
    page = lab.fresh("report.html")
    run = lab.run(*tool_args(lab, mode, "--html", page))
    assert run.code == 0 and f"wrote {page}" in run.output, run.output
    data = page_data(page)
    names = {
        "query": None,
        "csv": ["tables_a", "tables_b"],
        "markdown": ["tables-knowledge"],
        "qa": ["task-1"],
        "redteam": ["query", ATTACKED],
    }[mode]
    assert len(data["cases"]) == CASES[mode] and len(data["runs"]) == CASES[mode]
    assert names is None or [c["name"] for c in data["cases"]] == names
    assert ("qa" in {s["key"] for s in data["sections"]}) == (mode == "qa")
    assert ("security" in {s["key"] for s in data["sections"]}) == (mode == "redteam")


@observes("html", "skills")
def _(lab, mode):
    page = lab.fresh("skills.html")
    run = lab.run(*skill_args(lab, "--html", page), model=SQL_SKILL)
    assert run.code == 0, run.output
    data = page_data(page)
    [triggers] = [s["data"] for s in data["sections"] if s["key"] == "trigger_scores"]
    assert [t["skill"] for t in triggers] == ["warehouse-sql"]
    assert sorted(c["name"] for c in data["cases"]) == [
        f"warehouse-sql: {NEGATIVE}",
        f"warehouse-sql: {POSITIVE}",
    ]


@observes("html", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    page = lab.fresh("diff.html")
    run = lab.run("--compare", old, new, "--html", page)
    assert run.code == 1 and page.exists()
    [step] = page_data(page)["comparisons"]
    assert step["failed"] and {c["change"] for c in step["changes"]} == {"regression"}


def rendered(lab: Lab, *outputs: Any) -> Run:
    old, _, _ = results_files(lab)
    return lab.run("--from", old, *outputs)


@observes("from_results", "render")
def _(lab, mode):
    old, new, _ = results_files(lab)
    first, second = lab.fresh("old.html"), lab.fresh("new.html")
    assert (
        lab.run("--from", old, "--html", first).code == 0
        and lab.run("--from", new, "--html", second).code == 0
    )
    assert [c["passed"] for c in page_data(first)["cases"]] == [True, True]
    assert [c["passed"] for c in page_data(second)["cases"]] == [False, False]


@observes("html", "render")
def _(lab, mode):
    page = lab.fresh("rendered.html")
    run = rendered(lab, "--html", page)
    assert run.code == 0 and run.requests == [] and f"wrote {page}" in run.output
    assert [c["name"] for c in page_data(page)["cases"]] == ["tables_a", "tables_b"]


@observes("report", "render")
def _(lab, mode):
    report = lab.fresh("rendered.md")
    assert rendered(lab, "--report", report).code == 0
    assert "Tool-use evaluation: 2/2 cases passed" in report.read_text()


@observes("junit", "render")
def _(lab, mode):
    junit = lab.fresh("rendered.xml")
    assert rendered(lab, "--junit", junit).code == 0
    assert sorted(case.get("name") for case in ET.parse(junit).iter("testcase")) == [
        "tables_a",
        "tables_b",
    ]


@observes("csv_out", "render")
def _(lab, mode):
    rows = lab.fresh("rendered.csv")
    assert rendered(lab, "--csv-out", rows).code == 0
    assert [r["test_name"] for r in csv.DictReader(rows.open())] == ["tables_a", "tables_b"]


# ---------------------------------------------------------------------------- --pr-comment (tests/test_github_action.py: the comment in a GitHub Actions step)
def comment_of(path: Path) -> tuple[str, list[str]]:
    """A pull-request comment's headline, and the names in its tables' first column."""
    lines = path.read_text().splitlines()
    names = [
        line.split(" | ")[0].strip("| `")
        for line in lines
        if line.startswith("| ") and not line.startswith("| Case ")
    ]
    return lines[0], names


@observes("pr_comment", *TOOL_MODES)
def _(lab, mode):
    comment = lab.fresh("comment.md")
    run = lab.run(*tool_args(lab, mode, "--pr-comment", comment), model=no_tools)
    # a query expects nothing: answering without tools passes (the red team's suite is a query,
    # clean and attacked, and the attacked run that calls no tool holds)
    failed = mode not in ("query", "redteam")
    assert run.code == int(failed) and f"wrote {comment}" in run.output, run.output
    headline, names = comment_of(comment)
    title, cases, file = {
        "query": ("Tool-use evaluation", [], None),
        "csv": ("Tool-use evaluation", ["tables_a", "tables_b"], lab.csv),
        "markdown": ("Markdown tests", ["tables-knowledge"], lab.md),
        "qa": ("QA evaluation", ["task-1"], lab.qa),
        "redteam": ("Red team", [], None),
    }[mode]
    written = f" of `{file}`" if file else ""  # outside the working folder: its absolute path
    passed = f"{0 if failed else CASES[mode]}/{CASES[mode]}"
    icon = "❌" if failed else "✅"
    assert headline == f"### {icon} {title}{written}: {passed} cases passed", headline
    assert names == cases
    if mode == "csv":  # where each case is written: the suite's rows 2 and 3
        assert f"| `{lab.csv}:2` |" in comment.read_text()
        assert f"| `{lab.csv}:3` |" in comment.read_text()


@observes("pr_comment", "skills")
def _(lab, mode):
    run, paths = writers_run(lab)
    headline, names = comment_of(paths["pr_comment"])
    assert headline == f"### ✅ Skill evaluation of `{lab.trigger}`: 2/2 cases passed", headline
    assert names == []  # nothing failed
    # where each trigger query is written: trigger_file's lines 8 (positive) and 12 (negative)
    cases = json.loads(paths["output"].read_text())["cases"]
    assert {c["name"]: (c["source"], c["line"]) for c in cases} == {
        f"warehouse-sql: {POSITIVE}": (str(lab.trigger), 8),
        f"warehouse-sql: {NEGATIVE}": (str(lab.trigger), 12),
    }


@observes("pr_comment", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    comment = lab.fresh("diff-comment.md")
    run = lab.run("--compare", old, new, "--pr-comment", comment)
    assert run.code == 1 and f"wrote {comment}" in run.output
    headline, names = comment_of(comment)
    assert headline.startswith("### ❌ Against the baseline: 2 regression(s), 0 fix(es)")
    assert names == ["tables_a", "tables_b"]
    assert f"| {4 / 924:.3g} |" in comment.read_text()  # 6/6 -> 0/6: 2/924, Holm over two


@observes("pr_comment", "render")
def _(lab, mode):
    comment = lab.fresh("rendered-comment.md")
    assert rendered(lab, "--pr-comment", comment).code == 0
    headline, names = comment_of(comment)
    assert headline.startswith("### ✅ Tool-use evaluation of `") and names == []


@observes("pr_comment", "merge")
def _(lab, mode):
    comment = lab.fresh("merged-comment.md")
    run = merged(lab, "--pr-comment", comment)
    document = merged(lab, "--json").document()
    headline, _ = comment_of(comment)
    s = document["summary"]
    assert f"{s['passed']}/{s['cases']} cases passed" in headline and run.code in (0, 1)
    assert headline.startswith(("### ✅ Tool-use evaluation", "### ❌ Tool-use evaluation"))


@observes("pr_comment", "optimize")
def _(lab, mode):
    comment = lab.fresh("optimize-comment.md")
    assert lab.run(*opt_args(lab, "--pr-comment", comment), model=OPT_TOOLS).code == 0
    headline, _ = comment_of(comment)
    assert headline.startswith("### ") and "The best candidate's runs" in headline


@observes("pr_comment", "overlap")
def _(lab, mode):
    headline, names = comment_of(overlap_writers(lab)[1]["pr_comment"])
    assert headline == "### ❌ Skill overlap: 0/1 cases passed"
    assert names == ["warehouse-sql / data-profile-report"]


# ---------------------------------------------------------------------------- writers the tables now give more modes
@observes("schema_of", "schema")
def _(lab, mode):
    project = lab.run("--schema", "--schema-of", "project").document()
    assert project["title"] == "evaluator.yaml" and "suites" in project["properties"]
    assert lab.run("--schema", "--schema-of", "results").document() == evaluator.results_schema()


@observes("junit", "optimize")
def _(lab, mode):
    junit = lab.fresh("optimize.xml")
    run = lab.run(*opt_args(lab, "--junit", junit), model=OPT_TOOLS)
    assert run.code == 0 and f"wrote {junit}" in run.output
    assert {case.get("name") for case in ET.parse(junit).iter("testcase")}, "the best run's cases"


@observes("csv_out", "optimize")
def _(lab, mode):
    rows = lab.fresh("optimize.csv")
    assert lab.run(*opt_args(lab, "--csv-out", rows), model=OPT_TOOLS).code == 0
    assert list(csv.DictReader(rows.open())), "one row per run of the best candidate"


@observes("html", "optimize")
def _(lab, mode):
    page = lab.fresh("optimize.html")
    assert lab.run(*opt_args(lab, "--html", page), model=OPT_TOOLS).code == 0
    sections = {s["key"]: s for s in page_data(page)["sections"]}
    assert sections["optimization"]["data"]["title"].startswith("Description optimization")


@observes("output", "render")
def _(lab, mode):
    old, _, _ = results_files(lab)
    again = lab.fresh("again.json")
    assert rendered(lab, "-o", again).code == 0
    assert json.loads(again.read_text()) == json.loads(Path(old).read_text())


@observes("json_out", "render")
def _(lab, mode):
    old, _, _ = results_files(lab)
    run = rendered(lab, "--json")
    assert run.code == 0 and run.document() == json.loads(Path(old).read_text())


@observes("benchmark_json", "render")
def _(lab, mode):
    run = task_baseline(lab)
    source, benchmark = lab.fresh("tasks.json"), lab.fresh("rendered-benchmark.json")
    source.write_text(run.stdout)
    assert lab.run("--from", source, "--benchmark-json", benchmark).code == 0
    document = json.loads(benchmark.read_text())
    assert [r["configuration"] for r in document["runs"]] == ["with_skill"]


# ---------------------------------------------------------------------------- is the change real? compare --alpha, plan
@observes("alpha", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    usual = lab.run("--compare", old, new, "--json")
    strict = lab.run("--compare", old, new, "--alpha", "0.001", "--json")
    # Holm's adjusted p of each case is 2 x 2/924 = 0.0043: below 0.05, above 0.001, where
    # 6/6 -> 0/6 is a suspected regression (every run passed, every run fails), still exit 1
    [step], [strict_step] = usual.document()["comparisons"], strict.document()["comparisons"]
    assert usual.code == 1 and {c["change"] for c in step["cases"]} == {"regression"}
    assert strict.code == 1 and {c["change"] for c in strict_step["cases"]} == {"suspected"}
    assert (step["alpha"], strict_step["alpha"]) == (0.05, 0.001)
    assert strict_step["cases"][0]["statistics"]["adjusted_p"] == round(4 / 924, 6)


def plan_runs(run: Run) -> int:
    """The runs per case plan's last line asks for (`plan: -i N ...`)."""
    assert run.code == 0 and run.requests == [], run.output
    line = next(x for x in run.stdout.splitlines() if x.startswith("plan: -i "))
    return int(line.split()[2])


@observes("plan", "plan")
def _(lab, mode):
    run = lab.run("--plan")
    assert plan_runs(run) == runs_to_detect(C.PLAN_ASSUMED_RATE, 0.8)
    assert "every case (assumed rate)" in run.stdout
    alone = lab.run("--detect", "10")
    assert alone.code == 2 and "plan: -i" not in alone.output


@observes("from_results", "plan")
def _(lab, mode):
    old, _ = compare_files(lab)  # each case passed 6 of 6 runs
    run = lab.run("--plan", "--from", old)
    assert plan_runs(run) == runs_to_detect(1.0, 0.9)
    rows = [line for line in run.stdout.splitlines() if "tables_" in line]
    assert len(rows) == 2 and all("100%" in row and " 6 " in row for row in rows), run.stdout
    assert "tables_a" not in lab.run("--plan").stdout


@observes("detect", "plan")
def _(lab, mode):
    wide = lab.run("--plan", "--detect", "20")
    assert plan_runs(wide) == runs_to_detect(0.9, 0.7)
    assert plan_runs(wide) < plan_runs(lab.run("--plan")) == runs_to_detect(0.9, 0.8)


@observes("rate", "plan")
def _(lab, mode):
    even = lab.run("--plan", "--rate", "0.5")
    assert plan_runs(even) == runs_to_detect(0.5, 0.4)
    assert plan_runs(even) > plan_runs(lab.run("--plan"))


@observes("significant_only", "compare")
def _(lab, mode):
    old, new = compare_files(lab)
    # at --alpha 0.001 neither 6/6 -> 0/6 is significant (Holm: 4/924): suspected regressions,
    # which fail the comparison unless --significant-only lets them through, under a warning
    args = ("--compare", old, new, "--alpha", "0.001")
    strict = lab.run(*args, "--json")
    through = lab.run(*args, "--significant-only", "--json")
    assert strict.code == 1 and through.code == 0
    [step], [let] = strict.document()["comparisons"], through.document()["comparisons"]
    assert (step["verdict"], let["verdict"]) == ("failed", "warning")
    assert {c["change"] for c in let["cases"]} == {"suspected"} and not let["failed"]
    report = lab.fresh("diff.md")
    lab.run(*args, "--significant-only", "--report", report)
    assert report.read_text().startswith("## ⚠️ Comparison: 0 regression(s), 2 suspected")


@observes("alpha", "plan")
def _(lab, mode):
    strict = lab.run("--plan", "--alpha", "0.01")
    assert plan_runs(strict) == runs_to_detect(0.9, 0.8, 0.01)
    assert plan_runs(strict) > plan_runs(lab.run("--plan")) and "alpha 0.01" in strict.stdout


# ---------------------------------------------------------------------------- part of a suite (-k, -x, --rerun-failed) and --cache
SECOND_MD_PROMPT = "Which user tables does my warehouse hold?"
SECOND_QA_PROMPT = "Name every table the warehouse holds, please."


def two_cases(lab: Lab, mode: str) -> tuple[list[Any], tuple[str, str], tuple[str, str]]:
    """The mode's command line on a suite of two cases, their prompts and their names."""
    if mode == "csv":
        return tool_args(lab, mode), CSV_PROMPTS, ("tables_a", "tables_b")
    if mode == "markdown":
        folder = lab.root / "two-tests"
        write(folder / "a.md", lab.md.read_text())
        write(
            folder / "b.md",
            "---\nname: users-knowledge\ntype: knowledge\nconcepts: [users]\n---\n\n"
            f"# Prompt\n\n{SECOND_MD_PROMPT}\n",
        )
        line = ["--tests", folder, "--server-module", EXAMPLE_SERVER]
        return line, (MD_PROMPT, SECOND_MD_PROMPT), ("tables-knowledge", "users-knowledge")
    pairs = "".join(
        f"   <qa_pair>\n      <question>{q}</question>\n      <answer>{FINAL}</answer>\n"
        "   </qa_pair>\n"
        for q in (QA_PROMPT, SECOND_QA_PROMPT)
    )
    qa = write(lab.root / "two-pairs.xml", f"<evaluation>\n{pairs}</evaluation>\n")
    line = ["--qa", qa, "--server-module", EXAMPLE_SERVER]
    return line, (QA_PROMPT, SECOND_QA_PROMPT), ("task-1", "task-2")


def fails_prompt(prompt: str) -> Callable[[dict], dict]:
    """`answers`, except the conversation about `prompt`, which answers without looking."""

    def model(body: dict) -> dict:
        return no_tools(body) if prompt in user_query(body) else answers(body)

    return model


PARTIAL_MODES = ("csv", "markdown", "qa")


@observes("keyword", *PARTIAL_MODES)
def _(lab, mode):
    line, prompts, names = two_cases(lab, mode)
    every = lab.run(*line, "--json")
    chosen = lab.run(*line, "-k", f"{names[1]} and not {names[0]}", "--json")
    assert sorted(opened(every, prompts)) == sorted(prompts), every.output
    assert opened(chosen, prompts) == [prompts[1]] and chosen.code == 0, chosen.output
    assert [c["name"] for c in chosen.document()["cases"]] == [names[1]]
    assert len(every.document()["cases"]) == 2


@observes("fail_fast", *PARTIAL_MODES)
def _(lab, mode):
    line, prompts, names = two_cases(lab, mode)
    failing = fails_prompt(prompts[0])
    whole = lab.run(*line, "--concurrency", "1", "--json", model=failing)
    first = lab.run(*line, "--concurrency", "1", "-x", "--json", model=failing)
    assert opened(whole, prompts) == list(prompts) and whole.code == 1
    assert opened(first, prompts) == [prompts[0]] and first.code == 1, first.output
    assert "stopped at the first failing run (-x)" in first.output
    assert first.document()["summary"]["not_started"] == 1
    assert [c["name"] for c in first.document()["cases"]] == [names[0]]


@observes("rerun_failed", *PARTIAL_MODES)
def _(lab, mode):
    line, prompts, names = two_cases(lab, mode)
    earlier, again = lab.fresh("failed.json"), lab.fresh("again.json")
    assert lab.run(*line, "-o", earlier, model=fails_prompt(prompts[1])).code == 1
    run = lab.run(*line, "--rerun-failed", earlier, "-o", again)
    assert run.code == 0 and opened(run, prompts) == [prompts[1]], run.output
    assert "--rerun-failed: 1 run(s) of passing cases kept" in run.output
    document = json.loads(again.read_text())
    assert [(c["name"], c["passed"]) for c in document["cases"]] == [
        (names[0], True),
        (names[1], True),
    ]
    assert len(document["results"]) == 2 and document["passed"] is True


# --harness claude-code: the suite's cases through the real `claude -p` (the modes that take it)
HARNESS_MODES = ("query", "csv", "markdown", "qa", "redteam")


def claude_code_facts(run: Run) -> list[dict]:
    return [r["claude_code"] for r in run.document()["results"]]


@observes("harness", *HARNESS_MODES)
def _(lab, mode):
    """Every run goes through Claude Code (its requests offer its built-ins and name the tools
    `mcp__server__tool`), and says so; the API harness's requests offer only the suite's tools."""
    api = baseline(lab, mode)
    run = through_claude_code(lab, mode)
    assert {r["harness"] for r in run.document()["results"]} == {"claude-code"}
    offered = {t["name"] for b in run.requests for t in b.get("tools") or []}
    assert "Read" in offered and "Read" not in {t["name"] for t in first(api).get("tools") or []}
    assert all(f["claude_version"] for f in claude_code_facts(run))


@observes("tool_search", *HARNESS_MODES)
def _(lab, mode):
    """on: Claude Code defers the servers' tools behind ToolSearch; off: it offers them."""
    on, off = (through_claude_code(lab, mode, "--tool-search", v) for v in ("on", "off"))
    assert all(f["deferred"] and f["tool_search"] == "on" for f in claude_code_facts(on))
    assert not any(f["deferred"] for f in claude_code_facts(off))
    assert "ToolSearch" in {t["name"] for t in on.requests[0]["tools"]}
    assert any(t["name"].startswith("mcp__") for t in off.requests[0]["tools"])


# A server Claude Code starts that is "still connecting" on purpose (tests/servers/held_server.py):
# it answers `initialize` only once released. Released by the scripted model's first request
# under no-wait (so the request surely left while it was pending), after a moment by default
# (Claude Code waits for it, however long the moment is on a busy machine).
HELD_SERVER = ROOT / "tests" / "servers" / "held_server.py"


def releasing(release: Path, model: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def respond(body: dict) -> dict:
        release.touch()
        return model(body)

    return respond


@observes("mcp_startup", *(m for m in HARNESS_MODES if m != "redteam"))
def _(lab, mode):
    """no-wait: the held server is still connecting when Claude Code sends its first request
    (which lacks its tools); by default Claude Code waits for it."""
    release = lab.fresh("release")
    held = f"{sys.executable} {HELD_SERVER} {release}"
    waited = lab.run(
        *tool_args(lab, mode, "--harness", "claude-code", "--tool-search", "off", "--json",
                   servers=("--server", held + " --after 1")),
        model=claude_code_tool_use,
    )  # fmt: skip
    release.unlink(missing_ok=True)
    at_once = lab.run(
        *tool_args(lab, mode, "--harness", "claude-code", "--tool-search", "off", "--json",
                   "--mcp-startup", "no-wait", servers=("--server", held)),
        model=releasing(release, claude_code_tool_use),
    )  # fmt: skip
    for run in (waited, at_once):
        assert run.code in (0, 1) and run.document()["results"], run.output

    def held_status(run: Run) -> list[str]:
        return [
            s["status_at_start"]
            for f in claude_code_facts(run)
            for name, s in f["servers"].items()
            if name == "held_server"
        ]

    assert held_status(waited) and set(held_status(waited)) == {"connected"}, held_status(waited)
    assert "pending" in held_status(at_once), held_status(at_once)
    first_offered = {t["name"] for t in at_once.requests[0]["tools"]}
    assert not any(name.startswith("mcp__held_server__") for name in first_offered)
    assert any(t["name"].startswith("mcp__held_server__") for t in waited.requests[0]["tools"]), (
        "by default the held server's tools are there from the first request"
    )


@observes("claude_bin", *HARNESS_MODES)
def _(lab, mode):
    script, log = claude_wrapper(lab)
    run = through_claude_code(lab, mode, "--claude-bin", script)
    starts = [line.split()[-1] for line in log.read_text().splitlines() if line.startswith("start")]
    assert starts.count("--version") == 1
    assert starts.count("-p") == len(run.document()["results"])


@observes("cache", *TOOL_MODES)
def _(lab, mode):
    cache = lab.fresh("cache")
    first_run = lab.run(*tool_args(lab, mode, "--cache", cache, "--json"))
    second = lab.run(*tool_args(lab, mode, "--cache", cache, "--json"))
    made = len(first_run.requests)
    assert made > 0 and second.requests == [], second.output
    assert f"--cache: {made} model call(s) answered from the cache, 0 sent" in " ".join(
        second.output.split()
    )
    assert second.document()["metadata"]["cache"]["hits"] == made
    assert [c["passed"] for c in second.document()["cases"]] == [
        c["passed"] for c in first_run.document()["cases"]
    ]
    assert len(lab.run(*tool_args(lab, mode)).requests) == made, "without it, every call again"
    assert baseline(lab, mode).document()["metadata"].get("cache") is None


@observes("cache", "optimize")
def _(lab, mode):
    cache = lab.fresh("cache")
    first_run, document = opt_run(lab, "--cache", cache)
    second, again = opt_run(lab, "--cache", cache)
    assert proposals(first_run) and second.requests == [], "the optimizer's calls are cached too"
    assert again["metadata"]["cache"]["hits"] == len(first_run.requests)
    assert [(r["train_score"], r["descriptions"]) for r in again["optimization"]["rounds"]] == [
        (r["train_score"], r["descriptions"]) for r in document["optimization"]["rounds"]
    ]
    assert proposals(opt_run(lab)[0]), "without it the optimizer is asked again"


# -k, -x, --rerun-failed and --cache in skill runs: the trigger queries are the cases
NEVER = claude_model(lambda query, body: False)  # the positive query fails, the negative passes


@observes("keyword", "skills")
def _(lab, mode):
    run = lab.run(*skill_args(lab, "-k", "revenue", "--json"), model=SQL_SKILL)
    assert set(per_query(run)) == {POSITIVE} and run.code == 0, run.output
    [scores] = run.document()["trigger_scores"]
    assert [q["query"] for q in scores["queryResults"]] == [POSITIVE]
    assert set(per_query(skill_baseline(lab))) == {POSITIVE, NEGATIVE}


@observes("fail_fast", "skills")
def _(lab, mode):
    whole = lab.run(*skill_args(lab, "--concurrency", "1", "--json"), model=NEVER)
    first_run = lab.run(*skill_args(lab, "--concurrency", "1", "-x", "--json"), model=NEVER)
    assert set(per_query(whole)) == {POSITIVE, NEGATIVE} and whole.code == 1
    assert set(per_query(first_run)) == {POSITIVE} and first_run.code == 1, first_run.output
    assert "stopped at the first failing run (-x)" in first_run.output
    assert first_run.document()["summary"]["not_started"] == 1


@observes("rerun_failed", "skills")
def _(lab, mode):
    earlier, again = lab.fresh("failed.json"), lab.fresh("again.json")
    assert lab.run(*skill_args(lab, "-o", earlier), model=NEVER).code == 1
    run = lab.run(*skill_args(lab, "--rerun-failed", earlier, "-o", again), model=SQL_SKILL)
    assert run.code == 0 and set(per_query(run)) == {POSITIVE}, run.output
    assert "--rerun-failed: 1 run(s) of passing cases kept" in run.output
    document = json.loads(again.read_text())
    assert document["passed"] is True and len(document["results"]) == 2
    assert {q["query"]: q["actual"] for q in document["trigger_scores"][0]["queryResults"]} == {
        POSITIVE: "activated",
        NEGATIVE: "ignored",
    }


@observes("cache", "skills")
def _(lab, mode):
    cache = lab.fresh("cache")
    first_run = lab.run(*skill_args(lab, "--cache", cache, "--json"), model=SQL_SKILL)
    second = lab.run(*skill_args(lab, "--cache", cache, "--json"), model=SQL_SKILL)
    assert first_run.requests and second.requests == [], "Claude Code went through the proxy"
    assert second.document()["metadata"]["cache"]["hits"] == len(first_run.requests)
    assert second.code == 0 and second.document()["passed"] is True, second.output


@pytest.mark.parametrize("mode, option", observed_in(__name__))
def test_an_accepted_option_has_an_effect(lab: Lab, mode: str, option: str):
    OBSERVERS[option][mode](lab, mode)
