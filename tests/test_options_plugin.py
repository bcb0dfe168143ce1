"""The mode × option walk for plugin, import and export: three rows of MODES like the
others.

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
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import (
    CLAUDE,
    EXAMPLE_SERVER,
    ROOT,
)
from fake_anthropic import (
    ScriptedAnthropic,
    error,
    forced_tool,
    listed_plugin_skills,
    mock_plugin_claude_code,
    user_query,
)
from mode_lab import (  # the lab, the scripted models and the helpers several files share
    MODE_BY_NAME,
    NEGATIVE,
    OBSERVERS,
    POSITIVE,
    SKILL_DIR,
    SQL_SKILL,
    TOOL_MODES,
    Lab,
    Run,
    claude_wrapper,
    lab_plugin,
    observed_in,
    observes,
    opt_skill_args,
    page_data,
    plugin_model,
    plugin_writers_run,
    proposes,
    runs_at_once,
    skill_args,
    tool_line,
    write,
)

import evaluator
import test_constants as C
from claude_tool_evaluator.loaders.plugin_evals import load_plugin


def plugin_args(lab: Lab, *more: Any) -> list[Any]:
    """01-greet once in each arm (with the plugin it passes, without it fails: a baseline)."""
    return ["plugin", lab_plugin(lab), "--case", "01-greet", "--runs", "1", *more]


def under_test_requests(run: Run) -> list[dict]:
    """The requests Claude Code made (not the judge's)."""
    return [b for b in run.requests if forced_tool(b) != "grade"]


def by_arm(document: dict) -> dict[tuple[str, str], list[dict]]:
    runs: dict[tuple[str, str], list[dict]] = {}
    for run in document["results"]:
        runs.setdefault((run["case"], run["arm"]), []).append(run)
    return runs


def verdicts(document: dict) -> list[tuple]:
    """Each case and arm's verdict, as a sharded run merged must give them too."""
    return sorted((c["name"], c["passed"], c["passes"], c["runs"]) for c in document["cases"])


def judged_plugin_run(lab: Lab) -> tuple[Run, Path]:
    """05-judged (an llm grader) in each arm, one run at a time, on another model and judge,
    its events kept, through a logging --claude-bin."""
    if "plugin-judged" not in lab.cache:
        script, log = claude_wrapper(lab)
        run = lab.run(
            "plugin",
            lab_plugin(lab),
            "--case",
            "05-judged",
            "--claude-bin",
            script,
            "--unconfined",  # the logging --claude-bin writes its log outside the run's folder
            "--concurrency",
            "1",
            "--model",
            "claude-opus-5-5",
            "--judge-model",
            "claude-sonnet-5-5",
            "--keep-events",
            "--json",
            model=plugin_model,
        )
        assert run.code == 0, run.output
        lab.cache["plugin-judged"] = run, log
    return lab.cache["plugin-judged"]


def cached_plugin_runs(lab: Lab) -> tuple[Run, Run]:
    """The arm with the plugin alone (--ablation none), twice through one --cache folder."""
    if "plugin-cache" not in lab.cache:
        folder = lab.fresh("plugin-cache")
        line = plugin_args(lab, "--ablation", "none", "--cache", folder, "--json")
        first = lab.run(*line, model=plugin_model)
        again = lab.run(*line, model=plugin_model)
        assert first.code == again.code == 0, first.output + again.output
        lab.cache["plugin-cache"] = first, again
    return lab.cache["plugin-cache"]


def plugin_dry_run(lab: Lab, *more: Any) -> Run:
    run = lab.run("plugin", lab_plugin(lab), "--dry-run", *more, cached=True)
    assert run.code == 0 and run.requests == [], run.output
    return run


def runs_priced(run: Run) -> int:
    return int(run.output.split("runs: ", 1)[1].split()[0])


@observes("plugin", "plugin")
def _(lab, mode):
    run, paths, _ = plugin_writers_run(lab)
    document = run.document()
    assert document["metadata"]["evaluation"] == "plugin"
    assert document["plugin"]["name"] == "greeter"
    assert Path(document["plugin"]["path"]) == lab_plugin(lab).resolve()
    assert {r["kind"] for r in document["results"]} == {"plugin_run"}
    assert [len(runs) for runs in by_arm(document).values()] == [2, 2]
    assert "01-greet: with 2/2, without 0/2: within noise" in run.output


@observes("runs", "plugin")
def _(lab, mode):
    plugin = load_plugin(lab_plugin(lab))
    every = sum(2 * case.runs for case in plugin.cases)  # each case's own runs, in two arms
    assert runs_priced(plugin_dry_run(lab)) == every
    assert runs_priced(plugin_dry_run(lab, "--runs", "3")) == 2 * 3 * len(plugin.cases)
    assert len(plugin_writers_run(lab)[0].document()["results"]) == 4  # --runs 2, one case


@observes("model", "plugin")
def _(lab, mode):
    run, _ = judged_plugin_run(lab)
    assert {b["model"] for b in under_test_requests(run)} == {"claude-opus-5-5"}
    assert {b["model"] for b in plugin_writers_run(lab)[0].requests} == {C.DEFAULT_MODEL}
    assert {r["model"] for r in run.document()["results"]} == {"claude-opus-5-5"}


@observes("judge_model", "plugin")
def _(lab, mode):
    run, _ = judged_plugin_run(lab)
    judged = [b for b in run.requests if forced_tool(b) == "grade"]
    assert len(judged) == 6 and {b["model"] for b in judged} == {"claude-sonnet-5-5"}
    grader = by_arm(run.document())[("05-judged", "with")][0]["graders"][0]
    assert grader["passed"] and grader["judge_votes"] == [True, True, True]


@observes("claude_bin", "plugin")
def _(lab, mode):
    run, _, log = plugin_writers_run(lab)
    started = [
        line.split()[-1] for line in log.read_text().splitlines() if line.startswith("start")
    ]
    assert sorted(started) == ["--version", "-p", "-p", "-p", "-p"]
    assert run.document()["metadata"]["claude_version"]


@observes("concurrency", "plugin")
def _(lab, mode):
    assert runs_at_once(plugin_writers_run(lab)[2]) == C.DEFAULT_PLUGIN_CONCURRENCY
    assert runs_at_once(judged_plugin_run(lab)[1]) == 1  # --concurrency 1


@observes("keep_events", "plugin")
def _(lab, mode):
    kept = judged_plugin_run(lab)[0].document()["results"]
    assert all(r["events"] and r["events"][-1]["type"] == "result" for r in kept)
    assert all(r["events"] is None for r in plugin_writers_run(lab)[0].document()["results"])


@observes("base_url", "plugin")
def _(lab, mode):
    with ScriptedAnthropic(responder=plugin_model) as other:
        run = lab.run(*plugin_args(lab, "--ablation", "none", "--base-url", other.url))
    assert run.code == 0, run.output
    assert run.requests == [] and other.message_requests


@observes("alpha", "plugin")
def _(lab, mode):
    run, paths, _ = plugin_writers_run(lab)
    out = lab.fresh("alpha.json")
    shutil.copy(paths["output"], out)
    line = ["plugin", lab_plugin(lab), "--case", "01-greet", "--runs", "2", "-o", out, "--resume"]
    looser = lab.run(*line, "--alpha", "0.4", model=plugin_model)  # 2/2 against 0/2: p = 1/3
    assert looser.code == 0 and looser.requests == [], looser.output
    assert "01-greet: with 2/2, without 0/2: significant" in looser.output
    assert "01-greet: with 2/2, without 0/2: within noise" in run.output  # at 0.05


@observes("resume", "plugin")
def _(lab, mode):
    _, paths, _ = plugin_writers_run(lab)
    out = lab.fresh("resume.json")
    shutil.copy(paths["output"], out)
    line = ["plugin", lab_plugin(lab), "--case", "01-greet", "--runs", "2", "-o", out]
    run = lab.run(*line, "--resume", model=plugin_model)
    assert run.code == 0 and run.requests == [], run.output
    assert "resuming: 4 run(s) kept from the earlier run, 0 to run" in run.output
    assert len(plugin_writers_run(lab)[0].requests) > 0  # the runs it kept


def fails_on_capital(body: dict) -> dict:
    if "capital" in user_query(body):
        return error(400, "invalid_request_error", "scripted bad request")
    return plugin_model(body)


@observes("retry_errors", "plugin")
def _(lab, mode):
    out = lab.fresh("plugin-retry.json")
    line = plugin_args(lab, "--case", "02-capital", "--ablation", "none", "-o", out)
    errored = lab.run(*line, model=fails_on_capital)
    assert errored.code == 1, errored.output
    assert [r["case"] for r in json.loads(out.read_text())["results"] if r["error"]] == [
        "02-capital"
    ]
    retried = lab.run(*line, "--retry-errors", model=plugin_model)
    assert retried.code == 0 and "resuming: 1 run(s) kept" in retried.output, retried.output
    assert {user_query(b) for b in retried.requests} == {"What is the capital of France?"}
    assert not any(r["error"] for r in json.loads(out.read_text())["results"])


@observes("max_cost", "plugin")
def _(lab, mode):
    run = lab.run(
        *plugin_args(lab, "--max-cost", "0.000001", "--concurrency", "1", "--json"),
        model=plugin_model,
    )
    assert run.code == 1 and "stopped at --max-cost $1e-06: 1 run(s) not started" in run.output
    assert len(run.document()["results"]) == 1 and run.document()["summary"]["not_started"] == 1


@observes("dry_run", "plugin")
def _(lab, mode):
    script, log = claude_wrapper(lab)
    run = lab.run(*plugin_args(lab, "--dry-run", "--claude-bin", script))
    assert run.code == 0 and run.requests == [] and "dry run: nothing was sent" in run.output
    assert "runs: 2" in run.output and not log.exists(), "no claude process at all"


def plugin_shards(lab: Lab) -> tuple[list[Path], Run]:
    """The writers run's suite in two shards, and their pieces merged."""
    if "plugin-shards" not in lab.cache:
        pieces = []
        for index in (1, 2):
            piece = lab.fresh(f"plugin-shard-{index}.json")
            run = lab.run(
                "plugin",
                lab_plugin(lab),
                "--case",
                "01-greet",
                "--runs",
                "2",
                "--shard",
                f"{index}/2",
                "-o",
                piece,
                model=plugin_model,
            )
            assert run.code == 0, run.output
            pieces.append(piece)
        merged = lab.run("merge", *pieces, "--json")
        assert merged.code == 0 and merged.requests == [], merged.output
        lab.cache["plugin-shards"] = pieces, merged
    return lab.cache["plugin-shards"]


@observes("shard", "plugin")
def _(lab, mode):
    pieces, merged = plugin_shards(lab)
    shares = [len(json.loads(p.read_text())["results"]) for p in pieces]
    assert sum(shares) == 4 and all(shares), shares  # each a stable share: both hold runs
    whole = plugin_writers_run(lab)[0].document()
    assert verdicts(merged.document()) == verdicts(whole)
    assert (
        merged.document()["plugin"]["deltas"][0]["verdict"]
        == (whole["plugin"]["deltas"][0]["verdict"])
    )


@observes("distractors", "plugin")
def _(lab, mode):
    home = lab.fresh("plugin-home")
    other = home.parent / "installed" / "cards" / "1.0.0"
    write(other / ".claude-plugin" / "plugin.json", '{"name": "cards", "version": "1.0.0"}')
    write(
        other / "skills" / "birthday-card" / "SKILL.md",
        "---\nname: birthday-card\ndescription: Writes a birthday card for a person.\n---\nBe kind.\n",
    )
    write(
        home / ".claude" / "plugins" / "installed_plugins.json",
        json.dumps({"version": 2, "plugins": {"cards@shop": [{"installPath": str(other)}]}}),
    )
    saved = os.environ["HOME"]
    os.environ["HOME"] = str(home)
    try:
        run = lab.run(*plugin_args(lab, "--distractors", "installed"), model=plugin_model)
        wrong = lab.run(*plugin_args(lab, "--distractors", "lookalike:2"))
    finally:
        os.environ["HOME"] = saved
    assert run.code == 0 and "1 other installed plugin(s) in both arms" in run.output, run.output
    assert all("cards:birthday-card" in json.dumps(b["messages"]) for b in run.requests)
    assert wrong.code == 2 and "plugin runs take `installed`" in wrong.stderr


@observes("ablation", "plugin")
def _(lab, mode):
    first, _ = cached_plugin_runs(lab)
    assert [(r["case"], r["arm"]) for r in first.document()["results"]] == [("01-greet", "with")]
    assert first.document()["plugin"]["ablation"] == "none"
    assert set(by_arm(plugin_writers_run(lab)[0].document())) == {
        ("01-greet", "with"),
        ("01-greet", "without"),
    }


@observes("cache", "plugin")
def _(lab, mode):
    first, again = cached_plugin_runs(lab)
    assert first.requests and again.requests == []
    assert verdicts(first.document()) == verdicts(again.document())


@observes("case", "plugin")
def _(lab, mode):
    assert runs_priced(plugin_dry_run(lab, "--case", "01-*")) == 4  # its own 2 runs, two arms
    assert (
        runs_priced(plugin_dry_run(lab, "--case", "0[56]-*"))
        == 4
        < runs_priced(plugin_dry_run(lab))
    )
    nothing = lab.run("plugin", lab_plugin(lab), "--case", "99-*", "--dry-run")
    assert nothing.code == 2 and "no case matches --case 99-*" in nothing.stderr


@observes("scaffold", "plugin")
def _(lab, mode):
    line = ["plugin", lab_plugin(lab), "--case", "06-staged", "--ablation", "none"]
    staged = lab.run(*line, "--scaffold", "--trust-plugin", model=plugin_model)
    assert staged.code == 0 and "06-staged [with] run 1: passed" in staged.output, staged.output
    assert "not run without --scaffold" not in staged.output
    assert "not run without --scaffold" in plugin_dry_run(lab, "--case", "06-staged").output


def offered_tools(run: Run) -> set[str]:
    """Every tool the requests of Claude Code's runs offered the model."""
    return {t["name"] for b in under_test_requests(run) for t in b.get("tools", [])}


def granted_runs(lab: Lab) -> tuple[Run, Run, Run]:
    """01-greet once with the plugin alone: as it is, with --allow-tools Bash (Claude Code's
    space-separated form beside a pattern), and with --disallow-tools Agent."""
    if "plugin-grants" not in lab.cache:
        line = plugin_args(lab, "--ablation", "none")
        runs = tuple(
            lab.run(*line, *more, model=plugin_model)
            for more in (
                (),
                ("--allow-tools", "Bash", "--allow-tools", "Grep Bash(ls:*)"),
                ("--disallow-tools", "Agent"),
            )
        )
        assert all(r.code == 0 for r in runs), [r.output for r in runs]
        lab.cache["plugin-grants"] = runs
    return lab.cache["plugin-grants"]


@observes("allow_tools", "plugin")
def _(lab, mode):
    plain, granted, _ = granted_runs(lab)
    assert "Bash" not in offered_tools(plain) and "Bash" in offered_tools(granted)


@observes("disallow_tools", "plugin")
def _(lab, mode):
    plain, _, kept = granted_runs(lab)
    assert "Agent" in offered_tools(plain) and "Agent" not in offered_tools(kept)


@observes("eval_dir", "plugin")
def _(lab, mode):
    folder = lab.root / "plugin-eval-dir" / "greeter"
    if not folder.exists():
        shutil.copytree(lab_plugin(lab), folder)
        (folder / "evals").rename(folder / "suite")
    missing = lab.run("plugin", folder, "--dry-run")
    assert missing.code == 2 and "has no eval suite" in missing.stderr, missing.output
    found = lab.run("plugin", folder, "--eval-dir", "suite", "--dry-run", cached=True)
    assert found.code == 0 and runs_priced(found) == runs_priced(plugin_dry_run(lab))
    outside = lab.run("plugin", folder, "--eval-dir", "../..", "--dry-run")
    assert outside.code == 2 and "outside" in outside.stderr, outside.output


@observes("tag", "plugin")
def _(lab, mode):
    assert runs_priced(plugin_dry_run(lab, "--tag", "skill")) == 4  # 01-greet alone: 2 runs x 2
    nothing = lab.run("plugin", lab_plugin(lab), "--tag", "nope", "--dry-run")
    assert nothing.code == 2 and "no case has --tag nope" in nothing.stderr


@observes("threshold", "plugin")
def _(lab, mode):
    line = ["plugin", lab_plugin(lab), "--case", "04-yaml-case", "--runs", "1", "--ablation"]
    strict = lab.run(*line, "none", model=plugin_model, cached=True)  # scores 0.33 with it
    assert strict.code == 1 and "below the threshold (score 1)" in strict.output, strict.output
    lenient = lab.run(*line, "none", "--threshold", "0.3", model=plugin_model, cached=True)
    assert lenient.code == 0, lenient.output


def server_runs(lab: Lab) -> dict[str, tuple[Run, set[str]]]:
    """tests/plugin_corpus/mocked-plugin with two real servers that only touch a marker each:
    `stock` (mocked) and `prices` (no mock); 01-suite-mock once with the plugin, by default,
    with --mocks off and with --allow-real-servers."""
    if "plugin-servers" not in lab.cache:
        folder = lab.root / "plugin-servers" / "larder"
        shutil.copytree(ROOT / "tests" / "plugin_corpus" / "mocked-plugin", folder)
        stock, prices = folder.parent / "stock-started", folder.parent / "prices-started"
        servers = {
            name: {"command": "sh", "args": ["-c", f'touch "{marker}"']}
            for name, marker in (("stock", stock), ("prices", prices))
        }
        (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
        line = ["plugin", folder, "--case", "01-suite-mock", "--ablation", "none", "--json"]
        # trusted (its servers are the lab's own) and unconfined: the markers are outside the run
        line += ["--trust-plugin", "--unconfined"]
        runs = {}
        for name, more in (
            ("record", ()),
            ("off", ("--mocks", "off")),
            ("real", ("--allow-real-servers",)),
        ):
            for marker in (stock, prices):
                marker.unlink(missing_ok=True)
            run = lab.run(*line, *more, model=mock_plugin_claude_code)
            runs[name] = run, {m.name for m in (stock, prices) if m.exists()}
        lab.cache["plugin-servers"] = runs
    return lab.cache["plugin-servers"]


@observes("mocks", "plugin")
def _(lab, mode):
    (mocked, started_mocked), (real, started_real) = (
        server_runs(lab)["record"],
        server_runs(lab)["off"],
    )
    assert mocked.code == 0 and started_mocked == set(), mocked.output
    assert mocked.document()["results"][0]["mocks"]["calls"]["total"] == 1
    assert started_real == {"stock-started", "prices-started"}, real.output
    assert real.document()["results"][0]["mocks"] is None and real.code == 1


@observes("allow_real_servers", "plugin")
def _(lab, mode):
    runs = server_runs(lab)
    assert runs["record"][1] == set()
    allowed, started = runs["real"]  # the unmocked server starts for real, the mocked one does not
    assert started == {"prices-started"} and allowed.code == 0, allowed.output


def recording_runs(lab: Lab) -> dict[str, tuple[Run, bool]]:
    """tests/plugin_corpus/recordable-plugin, 01-oat once with the plugin: priced with
    --record-mocks (--dry-run), run without it, then with it, then without it again; each with
    whether its real server started (it writes a marker; unconfined, so the marker lands)."""
    if "recording" not in lab.cache:
        folder = lab.root / "recordable" / "larder"
        shutil.copytree(ROOT / "tests" / "plugin_corpus" / "recordable-plugin", folder)
        marker = folder.parent / "stock-started"
        config = json.loads((folder / ".mcp.json").read_text())
        config["mcpServers"]["stock"]["env"] = {"STOCK_MARKER": str(marker)}
        (folder / ".mcp.json").write_text(json.dumps(config))
        line = ["plugin", folder, "--case", "01-oat", "--ablation", "none", "--json"]
        line += ["--unconfined"]
        runs = {"untrusted": (lab.run(*line, "--record-mocks"), marker.exists())}
        line += ["--trust-plugin"]
        for name, more in (
            ("dry", ("--record-mocks", "--dry-run")),
            ("before", ()),
            ("recording", ("--record-mocks",)),
            ("after", ()),
        ):
            marker.unlink(missing_ok=True)
            run = lab.run(*line, *more, model=mock_plugin_claude_code)
            runs[name] = run, marker.exists()
        lab.cache["recording"] = runs, folder / "evals" / "mocks"
    return lab.cache["recording"]


@observes("record_mocks", "plugin")
def _(lab, mode):
    runs, mocks = recording_runs(lab)
    untrusted, started = runs["untrusted"]  # no terminal to ask in: one line, nothing starts
    assert untrusted.code == 2 and not started and untrusted.requests == [], untrusted.output
    assert len(untrusted.stderr.strip().splitlines()) == 1, untrusted.stderr
    dry, started = runs["dry"]  # spends nothing, starts nothing
    assert dry.code == 0 and not started and dry.requests == [], dry.output
    before, started = runs["before"]  # no mock: the server is not started, the tool not offered
    assert before.code == 1 and not started and "--record-mocks" not in before.output
    recording, started = runs["recording"]
    assert recording.code == 0 and started, recording.output
    assert "--record-mocks: wrote mocks/stock/count.md" in recording.output
    assert recording.document()["results"][0]["mcp_calls"] == ["mcp__plugin_larder_stock__count"]
    assert (mocks / "stock" / "count.md").read_text().endswith("{{input.query}}\n")
    after, started = runs["after"]  # offline from the recorded mocks
    assert after.code == 0 and not started, after.output
    assert after.document()["results"][0]["mocks"]["calls"]["total"] == 1


@observes("output", "plugin")
def _(lab, mode):
    run, paths, _ = plugin_writers_run(lab)
    document = json.loads(paths["output"].read_text())
    assert document == run.document()
    assert [c["name"] for c in document["cases"]] == ["01-greet [with]", "01-greet [without]"]
    refused = lab.run(*plugin_args(lab, "-o", lab_plugin(lab) / "evals" / "01-greet" / "prompt.md"))
    assert refused.code == 2 and "writing it would destroy it" in refused.stderr


@observes("report", "plugin")
def _(lab, mode):
    report = plugin_writers_run(lab)[1]["report"].read_text()
    assert "## Plugin greeter v1.0.0: with vs without" in report
    assert "| 01-greet | 2/2 | 0/2 |" in report


@observes("junit", "plugin")
def _(lab, mode):
    root = ET.parse(plugin_writers_run(lab)[1]["junit"]).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    effect = [name for name in cases if name.startswith("plugin effect: greeter v1.0.0 — ")]
    assert set(cases) - set(effect) == {"01-greet [with]", "01-greet [without]"}
    assert len(effect) == 1 and "↑ +100.0 pts vs baseline" in effect[0]
    without = cases["01-greet [without]"]
    assert (
        without.find("failure")
        .get("message")
        .endswith("(a baseline: reported, it does not fail the suite)")
    )
    assert {p.get("value") for p in cases["01-greet [with]"].iter("property")} >= {"with_plugin"}


@observes("csv_out", "plugin")
def _(lab, mode):
    rows = list(csv.DictReader(io.StringIO(plugin_writers_run(lab)[1]["csv_out"].read_text())))
    assert [(r["test_name"], r["verdict"]) for r in rows] == [
        ("01-greet [with]", "pass"),
        ("01-greet [with]", "pass"),
        ("01-greet [without]", "fail"),
        ("01-greet [without]", "fail"),
    ]


@observes("html", "plugin")
def _(lab, mode):
    data = page_data(plugin_writers_run(lab)[1]["html"])
    assert [s["key"] for s in data["sections"]] == ["plugin"]
    # the plugin's own page: a case is one row holding both arms' runs
    assert len(data["runs"]) == 4 and {c["name"] for c in data["cases"]} == {"01-greet"}


@observes("pr_comment", "plugin")
def _(lab, mode):
    comment = plugin_writers_run(lab)[1]["pr_comment"].read_text()
    assert comment.startswith("### ✅ Plugin evaluation") and "| 01-greet | 2/2 | 0/2 |" in comment


@observes("json_out", "plugin")
def _(lab, mode):
    run = plugin_writers_run(lab)[0]
    assert run.document()["plugin"]["deltas"][0]["with_passed"] == 2
    assert "01-greet [with] run 1: passed" in run.stderr  # the rest goes to stderr


@pytest.mark.xdist_group("options-plugin")
@pytest.mark.skipif(CLAUDE is None, reason="the Claude Code CLI is not installed")
def test_plugin_writes_every_writer_s_output_and_the_step_summary(lab: Lab):
    """Done when: a plugin run writes the JSON, markdown, JUnit, HTML, PR comment, CSV rows,
    --json and GitHub's step summary, each holding its with/without table or runs."""
    run, paths, _ = plugin_writers_run(lab)
    for name in ("report", "pr_comment", "summary"):
        assert "| 01-greet | 2/2 | 0/2 |" in paths[name].read_text(), name
    assert json.loads(paths["output"].read_text())["plugin"] == run.document()["plugin"]
    assert paths["junit"].read_text().count("<testcase") == 3  # both arms and the plugin effect
    assert len(page_data(paths["html"])["runs"]) == 4
    assert len(paths["csv_out"].read_text().splitlines()) == 5


@pytest.mark.xdist_group("options-plugin")
@pytest.mark.skipif(CLAUDE is None, reason="the Claude Code CLI is not installed")
def test_plugin_shards_merge_into_the_verdicts_of_one_run(lab: Lab):
    """Done when: `plugin --shard 1/2` and `--shard 2/2`, then `merge`, give the verdicts (and
    the deltas) of one unsharded run."""
    pieces, merged = plugin_shards(lab)
    document = merged.document()
    assert document["metadata"]["merged_from"] == [str(p) for p in pieces]
    assert verdicts(document) == verdicts(plugin_writers_run(lab)[0].document())
    assert len(document["results"]) == 4


def test_help_of_plugin_import_and_export_comes_from_the_mode_table():
    """Done when: `help plugin|import|export` (and `MODE --help`) are built from the mode table
    like `help csv`: the options the row takes, under their help groups, and the row's examples;
    the top-level help lists them from MODES, and the verbs that run nothing from their table."""
    import re

    def shown(*args: str) -> str:
        result = CliRunner().invoke(evaluator.main, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    top = shown("--help")
    for name in ("plugin", "import", "export"):
        mode = MODE_BY_NAME[name]
        text = shown("help", name)
        assert text == shown(name, "--help")
        listed = set(re.findall(r"^\s+(-{1,2}[\w-]+)", text, re.MULTILINE)) - {"-h", "--help"}
        taken = [o for o in evaluator.OPTIONS if mode.takes(o.name)]
        assert listed == {o.flag for o in taken}, name
        assert all(f"\n{o.group}:\n" in text for o in taken), name
        assert mode.examples and all(example in text for example in mode.examples)
        assert re.search(rf"^  {name} +{re.escape(mode.summary)}$", top, re.MULTILINE), name
    for utility in ("init", "cache", "help"):
        assert re.search(rf"^  {utility} +\S", top, re.MULTILINE), utility


def test_plugin_refuses_an_output_that_is_one_of_the_suite_s_files(lab: Lab):
    """Done when: no output of a plugin run may be a file of its suite (-o on a case's prompt,
    --report on a grader): one line, exit 2, nothing run or written."""
    plugin = lab_plugin(lab)
    prompt = plugin / "evals" / "01-greet" / "prompt.md"
    grader = plugin / "evals" / "01-greet" / "graders" / "says-done.md"
    before = {path: path.read_bytes() for path in (prompt, grader)}
    for flag, path in (("-o", prompt), ("--report", grader), ("--junit", grader)):
        run = lab.run("plugin", plugin, flag, path)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.code == 2 and len(lines) == 1 and "would destroy it" in lines[0], run.stderr
        assert run.requests == []
    assert {path: path.read_bytes() for path in before} == before
    inside = lab.run("import", "plugin-evals", plugin, "-o", plugin / "evals")
    assert inside.code == 2 and "is inside the input --plugin" in inside.stderr


# ---------------------------------------------------------------------------- import (a folder of suites; no run)
def import_run(lab: Lab, *line: Any) -> Run:
    """An import's dry run into a folder of its own (the same line: the same run, cached)."""
    folder = lab.root / "imports" / "-".join(str(part).strip("-") for part in line)
    folder.parent.mkdir(exist_ok=True)
    run = lab.run("import", *line, "-o", folder, "--dry-run", cached=True)
    assert run.code == 0 and run.requests == [], run.output
    return run


def bfcl_import(lab: Lab) -> Run:
    return import_run(lab, "bfcl", "--categories", "simple_python,multiple", "--limit", "1")


def tau2_import(lab: Lab, *more: Any) -> Run:
    return import_run(lab, "tau2", *more)


def planned(run: Run) -> list[str]:
    """The files a dry run says it would write, by name."""
    return [
        Path(line.split()[2].rstrip(":")).name
        for line in run.stdout.splitlines()
        if line.startswith("would write ")
    ]


@observes("import_source", "import")
def _(lab, mode):
    assert planned(bfcl_import(lab)) == [
        "bfcl.csv",
        "bfcl_functions.json",
        "bfcl_server.py",
        "evaluator.yaml",
    ]
    assert planned(tau2_import(lab, "--tasks", "0,1"))[0] == "tau2_airline.csv"
    folder = lab.fresh("plugin-suites")
    run = lab.run("import", "plugin-evals", lab_plugin(lab), "-o", folder)
    assert run.code == 0 and sorted(p.name for p in folder.iterdir()) == [
        "greeting-card-evals.json"
    ]


@observes("plugin", "import")
def _(lab, mode):
    folder = lab.fresh("plugin-suites")
    run = lab.run("import", "--import", "plugin-evals", "--plugin", lab_plugin(lab), "-o", folder)
    assert run.code == 0, run.output
    evals = json.loads((folder / "greeting-card-evals.json").read_text())["evals"]
    assert [e["name"] for e in evals] == [c.name for c in load_plugin(lab_plugin(lab)).cases]
    alone = lab.run("import", "plugin-evals", "-o", lab.fresh("none"))
    assert alone.code == 2 and "needs the plugin's folder" in alone.stderr


@observes("output", "import")
def _(lab, mode):
    folder = lab.fresh("suites")
    run = lab.run("import", "plugin-evals", lab_plugin(lab), "-o", folder)
    assert run.code == 0 and f"wrote {folder / 'greeting-card-evals.json'}" in run.output
    inside = lab.run("import", "plugin-evals", lab_plugin(lab), "-o", lab_plugin(lab) / "evals")
    assert inside.code == 2 and "inside the input --plugin" in inside.stderr
    missing = lab.run("import", "plugin-evals", lab_plugin(lab))
    assert missing.code == 2 and "needs -o DIR" in missing.stderr


@observes("categories", "import")
def _(lab, mode):
    said = [
        line.split(":")[0]
        for line in bfcl_import(lab).stdout.splitlines()
        if line.endswith("entries")
    ]
    assert said == ["simple_python", "multiple"]
    wrong = lab.run("import", "tau2", "--categories", "multiple", "-o", lab.fresh("x"))
    assert (
        wrong.code == 2
        and "--categories does not apply to import tau2 (it is bfcl's)" in wrong.stderr
    )


@observes("limit", "import")
def _(lab, mode):
    assert "simple_python: 1 entries" in bfcl_import(lab).stdout
    assert "airline: 2 tasks" in tau2_import(lab, "--tasks", "0,1").stdout
    assert (
        "retail: 1 tasks (train split)"
        in tau2_import(lab, "--domain", "retail", "--split", "train", "--limit", "1").stdout
    )


@observes("domain", "import")
def _(lab, mode):
    retail = tau2_import(lab, "--domain", "retail", "--split", "train", "--limit", "1")
    assert retail.stdout.startswith("retail: ") and "tau2_retail.csv" in planned(retail)
    assert tau2_import(lab, "--tasks", "0,1").stdout.startswith("airline: ")  # the default
    wrong = lab.run("import", "bfcl", "--domain", "retail", "-o", lab.fresh("x"))
    assert (
        wrong.code == 2 and "--domain does not apply to import bfcl (it is tau2's)" in wrong.stderr
    )


@observes("split", "import")
def _(lab, mode):
    assert (
        "(train split)"
        in tau2_import(lab, "--domain", "retail", "--split", "train", "--limit", "1").stdout
    )
    assert "(base split, chosen by id)" in tau2_import(lab, "--tasks", "0,1").stdout


@observes("tasks", "import")
def _(lab, mode):
    assert (
        "airline: 2 tasks (base split, chosen by id)" in tau2_import(lab, "--tasks", "0,1").stdout
    )
    unknown = lab.run("import", "tau2", "--tasks", "9999", "-o", lab.fresh("x"), "--dry-run")
    assert unknown.code == 2 and "has no task '9999'" in unknown.stderr


@observes("dry_run", "import")
def _(lab, mode):
    folder = lab.fresh("dry")
    run = lab.run("import", "plugin-evals", lab_plugin(lab), "-o", folder, "--dry-run")
    assert run.code == 0 and not folder.exists(), run.output
    assert f"would write {folder / 'greeting-card-evals.json'}" in run.output
    assert "nothing was written" in run.output
    plugin = lab.fresh("plugin")
    cases, folder = sessions_import(lab, "--session", "all", "--dry-run", folder=plugin)
    assert cases.code == 0 and not plugin.exists(), cases.output
    assert f"would write {folder / 'shop-report-weekly-9c4b2d7e' / 'prompt.md'}" in cases.stdout
    assert "dry run: 7 file(s) planned, nothing was written" in cases.stdout


# ---------------------------------------------------------------------------- import sessions (cases of sessions; no run)
SESSIONS = ROOT / "tests" / "sessions" / "projects"  # two sessions: 1 restock (skill, agent,
# MCP tool), 2 a slash command answered in text (tests/test_import_sessions.py reads them too)


def sessions_import(lab: Lab, *line: Any, folder: Path | None = None) -> tuple[Run, Path]:
    """import sessions SESSIONS LINE -o FOLDER (a fresh one): the run and the cases' folder."""
    folder = folder or lab.fresh("plugin")
    return lab.run("import", "sessions", SESSIONS, *line, "-o", folder), folder / "evals"


def case_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@observes("sessions_from", "import")
def _(lab, mode):
    listed = lab.run("import", "sessions", SESSIONS)
    flat = lab.run("--import", "sessions", "--sessions-from", SESSIONS)
    assert listed.code == flat.code == 0 and listed.stdout == flat.stdout, listed.output
    assert "2 session(s) in" in listed.stdout and "  2  9c4b2d7e  " in listed.stdout
    alone = lab.run("import", "sessions")
    assert alone.code == 2 and "import sessions needs the sessions" in alone.stderr
    elsewhere = lab.run("import", "bfcl", "--sessions-from", SESSIONS, "-o", lab.fresh("x"))
    assert elsewhere.code == 2 and "(it is sessions's)" in elsewhere.stderr


@observes("session", "import")
def _(lab, mode):
    listed = lab.run("import", "sessions", SESSIONS)
    assert listed.code == 0 and "choose with --session" in listed.stdout
    second, folder = sessions_import(lab, "--session", "2")
    assert second.code == 0 and [p.name for p in folder.iterdir()] == [
        "shop-report-weekly-9c4b2d7e"
    ]
    by_id, folder = sessions_import(lab, "--session", "5a1e")
    assert by_id.code == 0 and [p.name for p in folder.iterdir()] == [
        "restock-the-oat-shelf-in-the-5a1e0c3d"
    ]
    every, folder = sessions_import(lab, "--session", "all")
    assert every.code == 0 and len(list(folder.iterdir())) == 2
    wrong, _ = sessions_import(lab, "--session", "3")
    assert wrong.code == 2 and "numbered 1 to 2" in wrong.stderr
    unknown, _ = sessions_import(lab, "--session", "ffff")
    assert unknown.code == 2 and "names no sessions" in unknown.stderr


@observes("should_not_use", "import")
def _(lab, mode):
    plain, folder = sessions_import(lab, "--session", "1")
    marked, marked_folder = sessions_import(
        lab, "--session", "1", "--should-not-use", "shop:auditor"
    )
    assert plain.code == marked.code == 0, marked.output
    graders = "restock-the-oat-shelf-in-the-5a1e0c3d/graders"
    assert (folder / graders / "uses-agent-shop-auditor.md").is_file()
    avoided = (marked_folder / graders / "avoids-agent-shop-auditor.md").read_text()
    assert "tool: Agent\n" in avoided and "min: 0\nmax: 0\n" in avoided
    assert not (marked_folder / graders / "uses-agent-shop-auditor.md").exists()
    unused, _ = sessions_import(lab, "--session", "1", "--should-not-use", "Bash")
    assert (
        unused.code == 2 and "--should-not-use Bash: no chosen session called it" in unused.stderr
    )


@observes("force", "import")
def _(lab, mode):
    plugin = lab.fresh("plugin")
    first, folder = sessions_import(lab, "--session", "2", folder=plugin)
    stale = folder / "shop-report-weekly-9c4b2d7e" / "graders" / "stale.md"
    stale.write_text("---\ntype: llm\n---\nleft from before\n")
    again, _ = sessions_import(lab, "--session", "2", folder=plugin)
    assert first.code == 0 and again.code == 2 and "exists already" in again.stderr
    assert "pass --force" in again.stderr and stale.is_file()
    forced, _ = sessions_import(lab, "--session", "2", "--force", folder=plugin)
    assert forced.code == 0 and not stale.exists(), forced.output
    assert case_files(folder) == [
        "shop-report-weekly-9c4b2d7e/graders/answer.md",
        "shop-report-weekly-9c4b2d7e/prompt.md",
    ]
    wrong = lab.run("import", "bfcl", "--force", "-o", lab.fresh("x"))
    assert wrong.code == 2 and "(it is sessions's)" in wrong.stderr


# ---------------------------------------------------------------------------- export (a plugin's cases; no run)
def exported(lab: Lab, *line: Any, folder: Path | None = None) -> tuple[Run, Path]:
    folder = folder or lab.fresh("exported")
    return lab.run("export", "claude-plugin-eval", *line, "-o", folder), folder


def export_plugin(lab: Lab) -> Path:
    """An empty plugin folder (a manifest): a CSV suite's cases go into its evals/."""
    folder = lab.fresh("tools-plugin")
    write(folder / ".claude-plugin" / "plugin.json", '{"name": "tools"}')
    return folder


@observes("export_format", "export")
def _(lab, mode):
    run, folder = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger)
    assert run.code == 0 and f"wrote 2 cases to {folder / 'evals'}" in run.output, run.output
    assert len(list((folder / "evals").glob("*/prompt.md"))) == 2
    assert load_plugin(folder).name == "warehouse-sql"  # claude plugin eval's suite


@observes("output", "export")
def _(lab, mode):
    run, folder = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger)
    assert run.code == 0 and (folder / ".claude-plugin" / "plugin.json").is_file()
    over = lab.run(
        "export",
        "claude-plugin-eval",
        "--skill",
        SKILL_DIR,
        "--tests",
        lab.trigger,
        "-o",
        lab.trigger,
    )
    assert over.code == 2 and "is the input --tests" in over.stderr


@observes("skill", "export")
def _(lab, mode):
    run, folder = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger)
    assert (folder / "skills" / "warehouse-sql" / "SKILL.md").read_bytes() == (
        SKILL_DIR / "SKILL.md"
    ).read_bytes()
    bare, _ = exported(lab, "--tests", lab.trigger)
    assert bare.code == 2 and "does not say which skill it tests" in bare.stderr


@observes("tests", "export")
def _(lab, mode):
    run, folder = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger)
    cases = (folder / "evals").iterdir()
    asked = sorted((case / "prompt.md").read_text().rstrip("\n").splitlines()[-1] for case in cases)
    assert run.code == 0 and asked == sorted([POSITIVE, NEGATIVE]), run.output


@observes("csv", "export")
def _(lab, mode):
    folder = export_plugin(lab)
    run, _ = exported(lab, "--csv", lab.csv, "--mcp-server", "profiles", folder=folder)
    assert run.code == 0, run.output
    assert sorted(p.name for p in (folder / "evals").iterdir()) == ["tables-a-01", "tables-b-02"]


@observes("mcp_server", "export")
def _(lab, mode):
    folder = export_plugin(lab)
    run, _ = exported(lab, "--csv", lab.csv, "--mcp-server", "profiles", folder=folder)
    graders = " ".join(p.read_text() for p in (folder / "evals").rglob("graders/*.md"))
    assert "tool: mcp__profiles__list_warehouse_tables" in graders
    unnamed, _ = exported(lab, "--csv", lab.csv, folder=export_plugin(lab))
    assert unnamed.code == 2 and "--mcp-server NAME" in unnamed.stderr


@observes("runs", "export")
def _(lab, mode):
    run, folder = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger, "--runs", "5")
    assert all("runs: 5\n" in p.read_text() for p in (folder / "evals").glob("*/prompt.md"))
    auto, _ = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger, "--runs", "auto")
    assert auto.code == 2 and "--runs auto" in auto.stderr


@observes("dry_run", "export")
def _(lab, mode):
    folder = lab.fresh("dry-export")
    run, _ = exported(lab, "--skill", SKILL_DIR, "--tests", lab.trigger, "--dry-run", folder=folder)
    assert run.code == 0 and not folder.exists(), run.output
    assert "would copy " in run.output and f"to {folder / 'skills' / 'warehouse-sql'}" in run.output
    assert (
        run.output.count("would write ") == 1 + 2 * 2
    )  # the manifest; a prompt and a grader a case


# ---------------------------------------------------------------------------- the trust gate: --trust-plugin
# A plugin's own code (hooks, servers, scaffold scripts) runs only in a folder the user trusted;
# the lab has no terminal, so without --trust-plugin a run is one line, exit 2, and nothing of the
# plugin starts (no model request, no server, no hook).
HOOK_SAYS = "TRUSTED-HOOK-RAN"


SECRET = "lab-private-key-6d1f"  # in the lab's HOME: what a confined hook cannot read


def lab_secret(lab: Lab) -> Path:
    secret = lab.root / "home" / ".ssh" / "id_rsa"
    if not secret.exists():
        write(secret, SECRET + "\n")
    return secret


def hooked_greeter(lab: Lab) -> Path:
    """The lab's plugin (greeter) with a UserPromptSubmit hook that reads a key in the user's
    home by its absolute path and says what it read (Claude Code adds it as context)."""
    folder = lab.root / "hooked" / "greeter"
    if not folder.exists():
        shutil.copytree(lab_plugin(lab), folder)
        command = f"cat {lab_secret(lab)}; echo {HOOK_SAYS}"
        hooks = {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}
        write(folder / "hooks" / "hooks.json", json.dumps({"hooks": hooks}))
    return folder


def hooked_run(lab: Lab, *more: Any) -> Run:
    """01-greet once with the hooked plugin, trusted (confined unless `more` says otherwise)."""
    line = ["plugin", hooked_greeter(lab), "--case", "01-greet", "--runs", "1"]
    run = lab.run(
        *line,
        "--ablation",
        "none",
        "--json",
        "--trust-plugin",
        *more,
        model=plugin_model,
        cached=True,
    )
    assert run.code == 0, run.output
    return run


def confinement_of(run: Run) -> list[str]:
    (record,) = run.document()["results"]
    return record["confinement"]


def agent_plugin(lab: Lab) -> Path:
    """A plugin with an agent and the same hook: `--skill PLUGIN_DIR` evaluates its agents, and
    Claude Code runs its hooks."""
    folder = lab.root / "hooked" / "sqlplug"
    if not folder.exists():
        write(folder / ".claude-plugin" / "plugin.json", '{"name": "sqlplug", "version": "1.0.0"}')
        write(
            folder / "agents" / "sql-helper.md",
            "---\nname: sql-helper\ndescription: Writes SQL for the warehouse.\n---\nWrite SQL.\n",
        )
        command = f"cat {lab_secret(lab)}; echo {HOOK_SAYS}"  # confined: reads nothing
        hook = {"hooks": [{"type": "command", "command": command}]}
        write(folder / "hooks" / "hooks.json", json.dumps({"hooks": {"UserPromptSubmit": [hook]}}))
    return folder


def server_plugin(lab: Lab) -> tuple[Path, Path]:
    """A plugin shipping the example server as its MCP server, through a launcher that leaves a
    marker when it starts: (the folder, the marker)."""
    folder, marker = lab.root / "hooked" / "tables", lab.root / "hooked" / "tables-started"
    if not folder.exists():
        write(folder / ".claude-plugin" / "plugin.json", '{"name": "tables"}')
        launcher = (
            "import pathlib, runpy, sys; pathlib.Path(sys.argv[1]).touch(); "
            "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        )
        server = {
            "command": sys.executable,
            "args": ["-c", launcher, str(marker), str(EXAMPLE_SERVER)],
        }
        write(folder / ".mcp.json", json.dumps({"mcpServers": {"profiles": server}}))
    return folder, marker


def assert_untrusted(run: Run, folder: Path) -> None:
    """One line naming the folder and the flag, exit 2, and no model request."""
    assert run.code == 2 and run.requests == [], run.output
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and str(folder.resolve()) in lines[0] and "--trust-plugin" in lines[0]
    assert "not a trusted plugin folder" in lines[0]


@observes("trust_plugin", "plugin")
def _(lab, mode):
    folder = hooked_greeter(lab)
    line = ["plugin", folder, "--case", "01-greet", "--runs", "1", "--ablation", "none"]
    assert_untrusted(lab.run(*line, model=plugin_model), folder)
    assert lab.run("plugin", folder, "--dry-run").code == 0, "a dry run runs nothing: no trust"
    trusted = hooked_run(lab)
    (record,) = trusted.document()["results"]
    assert any(HOOK_SAYS in hook for hook in record["hooks"]), record["hooks"]


# ---------------------------------------------------------------------------- confinement: --unconfined, --allow-read
# Trusted, the plugin's hooks run confined: the hook's read of the key in the user's home reads
# nothing, the run says so, and the key never reaches the model.
@observes("unconfined", "plugin")
def _(lab, mode):
    confined, unconfined = hooked_run(lab), hooked_run(lab, "--unconfined")
    assert SECRET not in json.dumps(confined.requests)
    assert any(f"could not reach {lab_secret(lab)}" in n for n in confinement_of(confined))
    assert SECRET in json.dumps(unconfined.requests) and confinement_of(unconfined) == []
    assert "--unconfined: the plugin's hooks and MCP servers run as you" in unconfined.output


@observes("allow_read", "plugin")
def _(lab, mode):
    opened = hooked_run(lab, "--allow-read", lab_secret(lab))
    assert SECRET in json.dumps(opened.requests) and confinement_of(opened) == []
    assert SECRET not in json.dumps(hooked_run(lab).requests)


OPT_SKILLS = proposes(SQL_SKILL)  # the optimizer's proposal, and Claude Code with the SQL skill


@observes("trust_plugin", "skills", "optimize")
def _(lab, mode):
    folder = agent_plugin(lab)
    line = skill_args(lab) if mode == "skills" else opt_skill_args(lab)
    line = [str(folder) if part == SKILL_DIR else part for part in line]
    assert_untrusted(lab.run(*line, model=OPT_SKILLS), folder)
    trusted = lab.run(*line, "--trust-plugin", model=OPT_SKILLS)
    assert trusted.code in (0, 1) and trusted.requests, trusted.output
    assert any(HOOK_SAYS in json.dumps(b) for b in trusted.requests), "the hook ran"
    assert SECRET not in json.dumps(trusted.requests), "confined: the home's key stays unread"


@observes("trust_plugin", *TOOL_MODES, "scan")
def _(lab, mode):
    folder, marker = server_plugin(lab)
    marker.unlink(missing_ok=True)  # another mode's trusted run started it
    line = ["--scan"] if mode == "scan" else tool_line(lab, mode)
    refused = lab.run(*line, "--mcp-config", folder)
    assert_untrusted(refused, folder)
    assert not marker.exists(), "the plugin's server did not start"
    trusted = lab.run(*line, "--mcp-config", folder, "--trust-plugin")
    assert trusted.code in (0, 1), trusted.output
    assert marker.exists()
    if mode != "scan":
        assert trusted.requests and "list_warehouse_tables" in json.dumps(trusted.requests[0])


# ------------------------------------------------ reusing the arm without the plugin (issue 47)
# The arm without the plugin depends on the case, its graders, the model, Claude Code, the
# judge, the grants, the mocks and the scaffold, not on the plugin: a run after a change to the
# plugin alone takes it from an earlier run (--baseline-from, --cache) and asks no model for it.
REUSE_MOCK = {"tools": [{"name": "lookup", "description": "A", "inputSchema": {"type": "object"}}]}


def reuse_plugin(lab: Lab, name: str) -> Path:
    """A copy of the lab's plugin with a suite-level mock (the runs without it serve none, but
    depend on it as claude plugin eval's do), one copy per change made to it."""
    folder = lab.root / "reuse" / name / "greeter"
    if not folder.exists():
        shutil.copytree(lab_plugin(lab), folder)
        write(folder / "evals" / "mocks" / "notes" / "_tools.json", json.dumps(REUSE_MOCK))
    return folder


def reuse_line(folder: Path, *more: Any) -> list[Any]:
    return ["plugin", folder, "--case", "01-greet", "--runs", "1", "--json", *more]


def change_the_skill(folder: Path) -> None:
    """A change to the plugin alone: its skill's description (still the greeting card's)."""
    skill = folder / "skills" / "greeting-card" / "SKILL.md"
    skill.write_text(skill.read_text().replace("by name.", "by name, kindly."))


def baseline_requests(run: Run) -> list[dict]:
    """The requests of runs without the plugin: Claude Code's, listing none of its skills."""
    return [b for b in under_test_requests(run) if not listed_plugin_skills(b)]


def comparable(document: dict) -> list[tuple]:
    """What a reused run must give as a fresh one does: per run its verdicts, and the deltas."""
    runs = sorted(
        (r["case"], r["arm"], r["run"], r["score"], r["passed"], r["turns"], r["answer"])
        + tuple((g["name"], g["passed"]) for g in r["graders"])
        for r in document["results"]
    )
    deltas = [(d["name"], d["delta"], d["p_value"]) for d in document["plugin"]["deltas"]]
    return [*runs, *deltas, document["passed"]]


def reuse_runs(lab: Lab) -> dict[str, Run]:
    """01-greet once per arm into -o and a --cache folder; the plugin's skill changed; then run
    again taking the arm without it from the file, from the cache, and fresh (--fresh-baseline)."""
    if "plugin-reuse" not in lab.cache:
        folder = reuse_plugin(lab, "changed")
        first_file, cache = lab.fresh("reuse-first.json"), lab.fresh("reuse-cache")
        runs = {
            "first": lab.run(
                *reuse_line(folder, "-o", first_file, "--cache", cache), model=plugin_model
            )
        }
        change_the_skill(folder)
        pages = ("--report", lab.fresh("reuse-report.md"), "--html", lab.fresh("reuse-page.html"))
        runs["file"] = lab.run(
            *reuse_line(folder, "--baseline-from", first_file, *pages), model=plugin_model
        )
        runs["cache"] = lab.run(*reuse_line(folder, "--cache", cache), model=plugin_model)
        runs["fresh"] = lab.run(
            *reuse_line(folder, "--baseline-from", first_file, "--fresh-baseline"),
            model=plugin_model,
        )
        for run in runs.values():
            assert run.code == 0, run.output
        lab.cache["plugin-reuse"] = runs, first_file, cache
    return lab.cache["plugin-reuse"]


@observes("baseline_from", "plugin")
def _(lab, mode):
    runs, first_file, _ = reuse_runs(lab)
    assert len(baseline_requests(runs["first"])) >= 1  # the first run asked for it
    again = runs["file"]
    assert again.requests and baseline_requests(again) == [], "no model request for it"
    assert "baseline: 1 of 1 run(s) without the plugin reused (--baseline-from" in again.output
    document = again.document()
    (without,) = by_arm(document)[("01-greet", "without")]
    made = without["reused_from"]
    assert made["source"] == "file" and Path(made["place"]) == Path(first_file).absolute()
    assert made["date"] == json.loads(Path(first_file).read_text())["metadata"]["generated_at"]
    (reused,) = document["plugin"]["cases"][0]["reused"]
    assert (reused["arm"], reused["runs"], reused["of"]) == ("without", 1, 1)
    assert "01-greet: baseline (without) reused 1/1 run(s) from file" in again.output
    assert comparable(document) == comparable(runs["fresh"].document())


@observes("fresh_baseline", "plugin")
def _(lab, mode):
    runs, _, _ = reuse_runs(lab)
    fresh = runs["fresh"]
    assert len(baseline_requests(fresh)) == len(baseline_requests(runs["first"])) >= 1
    assert all(r["reused_from"] is None for r in fresh.document()["results"])
    assert "without the plugin reused" not in fresh.output


def test_plugin_reuses_the_arm_without_it_from_the_cache_folder(lab: Lab):
    runs, _, cache = reuse_runs(lab)
    again = runs["cache"]
    assert again.requests and baseline_requests(again) == []
    (without,) = by_arm(again.document())[("01-greet", "without")]
    assert without["reused_from"]["source"] == "cache"
    assert Path(without["reused_from"]["place"]) == Path(cache)
    assert comparable(again.document()) == comparable(runs["fresh"].document())


def test_plugin_reports_say_which_arm_was_reused_and_from_where(lab: Lab):
    """The terminal (the observer above), the markdown report and the HTML page of the run that
    reused the arm without the plugin."""
    runs, first_file, _ = reuse_runs(lab)
    (report,) = (lab.root / "out").glob("*/reuse-report.md")
    assert "Runs reused, not run" in report.read_text() and str(first_file) in report.read_text()
    (page,) = (lab.root / "out").glob("*/reuse-page.html")
    assert "runs reused, not run" in json.dumps(page_data(page))


REUSE_KEY_CHANGES = {  # a part of the key, changed: the arm without the plugin runs again
    "prompt": lambda folder: (folder / "evals" / "01-greet" / "prompt.md").write_text(
        (folder / "evals" / "01-greet" / "prompt.md").read_text().replace("Alex", "Sam")
    ),
    "grader": lambda folder: write(
        folder / "evals" / "01-greet" / "graders" / "more.md", "---\ntype: regex\n---\nDone\n"
    ),
    "mock": lambda folder: write(
        folder / "evals" / "mocks" / "notes" / "_tools.json",
        json.dumps(REUSE_MOCK).replace('"A"', '"B"'),
    ),
    "model": ("--model", "claude-opus-5-5"),
    "grant": ("--allow-tools", "Write"),
    "disallowed": ("--disallow-tools", "Agent"),
    "mocks mode": ("--mocks", "off"),
}


@pytest.mark.parametrize("part", [None, *REUSE_KEY_CHANGES])
def test_plugin_reuses_the_arm_without_it_unless_its_key_changed(lab: Lab, part: str | None):
    """Priced by --dry-run (which spends nothing): after a change to the plugin alone every run
    without it is reused, and the estimate prices only the runs with it; after a change to one
    part of the key none is. The judge model is no part of a case no judge grades."""
    runs, first_file, _ = reuse_runs(lab)
    folder = reuse_plugin(lab, f"key-{part}")
    change_the_skill(folder)
    change = REUSE_KEY_CHANGES.get(part or "", ("--judge-model", "claude-opus-5-5"))
    if callable(change):
        change(folder)
    more = change if isinstance(change, tuple) else ()
    run = lab.run(*reuse_line(folder, "--baseline-from", first_file, "--dry-run", *more))
    assert run.code == 0 and run.requests == [], run.output
    reused = 0 if part else 1
    assert f"baseline: {reused} of 1 run(s) without the plugin would be reused" in run.output
    assert runs_priced(run) == 2 - reused


def test_plugin_max_cost_counts_only_the_runs_it_makes(lab: Lab):
    """A cap the run with the plugin passes (it goes first, one run at a time): were the run
    without it a job, it would then be left unstarted; reused, it is there, and costs nothing."""
    runs, first_file, _ = reuse_runs(lab)
    folder = lab.root / "reuse" / "changed" / "greeter"
    capped = ("--max-cost", "0.000000001", "--concurrency", "1")
    run = lab.run(*reuse_line(folder, "--baseline-from", first_file, *capped), model=plugin_model)
    document = run.document()
    (with_it,) = by_arm(document)[("01-greet", "with")]
    assert with_it["cost_usd"] > 0.000000001, run.output  # the cap was passed
    assert "not started" not in run.output and baseline_requests(run) == []
    (without,) = by_arm(document)[("01-greet", "without")]
    assert without["reused_from"]["source"] == "file" and without["cost_usd"] == 0


def test_plugin_refuses_a_baseline_file_that_is_not_a_plugin_run_s_results(lab: Lab):
    bad = write(lab.fresh("reuse-bad.json"), '{"results": [')
    run = lab.run(*reuse_line(reuse_plugin(lab, "bad"), "--baseline-from", bad))
    assert run.code == 2 and run.requests == [], run.output
    assert str(bad) in run.output and "Traceback" not in run.output
    assert len(run.output.strip().splitlines()) == 1, run.output


@pytest.mark.parametrize("mode, option", observed_in(__name__))
def test_an_accepted_option_has_an_effect(lab: Lab, mode: str, option: str):
    OBSERVERS[option][mode](lab, mode)
