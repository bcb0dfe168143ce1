"""plugin: a whole plugin's eval suite (Claude Code's `evals/` format) run through Claude Code
with and without the plugin, every grader kind scored as `claude plugin eval` scores it, and the
with/without delta of each case and of the suite with its interval and Fisher's p.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import asyncio
import fnmatch
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from rich.console import Console

import test_constants as C

from ..claude_code import claude_version, find_claude_bin
from ..dry_run import combined_estimate, print_estimate
from ..errors import InputError, UsageProblem
from ..files import parse_json_text, read_text_file, write_json_atomic, write_text_atomic
from ..loaders.plugin_evals import (
    MAX_RUNS,
    Plugin,
    PluginCase,
    case_warnings,
    installed_plugins,
    load_plugin,
    resolve_plugin,
)
from ..options import AutoRuns
from ..pipeline import PipelineOutcome
from ..records import Usage
from ..redaction import Redactor
from ..result_records import CaseResult
from ..results import Results, make_metadata, summary_record
from ..runners.plugin import (
    ARMS,
    PluginArmRun,
    PluginRunPlan,
    estimate_plugin_runs,
    run_plugin_suite,
)
from ..scoring.plugin_graders import ArmDelta, arm_delta
from ..scoring.statistics import RunTotals, case_counts
from ..settings import Settings
from ..sinks import markdown_cell, terminal_text, wrote_line
from ..writers.formats import write_junit
from ..writers.github import append_step_summary, comment_text, results_outputs
from ..writers.html import write_html_report

RESULTS_KIND = "plugin-eval"


@dataclass
class PluginRequest:
    """What `python evaluator.py plugin PATH ...` asks for."""

    spec: str
    runs: int | AutoRuns | None = None
    models: list[str] = field(default_factory=lambda: [C.DEFAULT_TRIGGER_MODEL])
    claude_bins: list[str | None] = field(default_factory=lambda: [None])
    base_url: str | None = None
    judge_model: str = C.DEFAULT_JUDGE_MODEL
    output: str | None = None
    report: str | None = None
    dry_run: bool = False
    max_cost: float | None = None
    resume: bool = False
    cache: str | None = None
    concurrency: int = 2
    alpha: float = 0.05
    ablation: bool = True
    keep_events: bool = False
    cases: tuple[str, ...] = ()  # --case GLOB: only the cases whose name matches one
    distractors: str | None = None  # `installed`: the user's other plugins beside it
    pr_comment: str | None = None  # --pr-comment FILE: the report as a pull request comment
    junit: str | None = None  # --junit FILE: a testcase per case and arm
    html: str | None = None  # --html FILE: the product's HTML report of the cases and arms
    scaffold: bool = False  # --scaffold: run each case's scaffold_script (bash, as the user)


def case_deltas(plugin: Plugin, runs: list[PluginArmRun], alpha: float) -> list[ArmDelta]:
    """Each case's with/without delta, then the suite's (every run of every case pooled); in a
    matrix, those of each configuration, named `case (model @ version)`."""
    found = []
    for label in dict.fromkeys(r.label for r in runs) or [""]:
        shown = f" ({label})" if label else ""

        def scores(case: str | None, arm: str, label: str = label) -> list[float]:
            return [
                r.score
                for r in runs
                if r.label == label and r.arm == arm and (case is None or r.case == case)
            ]

        found += [
            arm_delta(c.name + shown, scores(c.name, "with"), scores(c.name, "without"), alpha)
            for c in plugin.cases
        ]
        found.append(
            arm_delta("(all cases)" + shown, scores(None, "with"), scores(None, "without"), alpha)
        )
    return found


def results_document(
    plugin: Plugin,
    plans: list[PluginRunPlan],
    runs: list[PluginArmRun],
    deltas: list[ArmDelta],
    warnings: list[str],
    keep_events: bool,
) -> dict[str, Any]:
    first = plans[0]
    return {
        "kind": RESULTS_KIND,
        "plugin": {
            "name": plugin.name,
            "path": str(plugin.folder),
            "eval_dir": str(plugin.eval_dir),
        },
        "configurations": [{"label": p.label, "model": p.model, "claude": p.binary} for p in plans],
        "ablation": first.ablation,
        "warnings": warnings,
        "cases": [
            {
                "name": case.name,
                "runs_per_arm": first.runs_of(case),
                "graders": [
                    {"name": g.name, "type": g.kind, "weight": g.weight, "arm": g.arm}
                    for g in case.graders
                ],
                "arms": {
                    arm: [
                        r.as_dict(keep_events) for r in runs if r.case == case.name and r.arm == arm
                    ]
                    for arm in first.arms
                },
            }
            for case in plugin.cases
        ],
        "deltas": [d.as_dict() for d in deltas],
        "cost_usd": round(sum(r.cost_usd + r.judge_cost_usd for r in runs), 6),
    }


PART_KINDS = (("delegations", "delegated to"), ("hooks", "hook"), ("mcp_calls", "MCP call"))


def parts_in_runs(runs: list[PluginArmRun]) -> list[str]:
    """What the plugin's parts did over one case's runs in one arm, each with the runs it
    happened in: `delegated to shop:invoice-auditor (3/3)`, `hook UserPromptSubmit added
    context: ... (3/3)`, `MCP call mcp__plugin_shop_stock__count (2/3)`."""
    seen: dict[str, int] = {}
    for run in runs:
        for field_name, word in PART_KINDS:
            for item in dict.fromkeys(getattr(run, field_name)):
                seen[f"{word} {item}"] = seen.get(f"{word} {item}", 0) + 1
    return [f"{what} ({count}/{len(runs)})" for what, count in seen.items()]


def parts_report(plugin: Plugin, runs: list[PluginArmRun]) -> list[str]:
    """The report's section on the plugin's parts: per case and arm, the subagents, hooks and
    MCP calls of its runs (nothing when no run used any)."""
    lines = []
    for case in plugin.cases:
        for arm in ARMS:
            done = [r for r in runs if r.case == case.name and r.arm == arm]
            parts = parts_in_runs(done)
            if parts:
                lines.append(
                    f"| {markdown_cell(case.name)} | {arm} | "
                    f"{markdown_cell('; '.join(parts), None)} |"
                )
    if not lines:
        return []
    return ["", "## What the plugin's parts did", "", "| case | arm | in its runs |"] + [
        "|---|---|---|",
        *lines,
    ]


def markdown_report(
    plugin: Plugin, deltas: list[ArmDelta], warnings: list[str], runs: list[PluginArmRun]
) -> str:
    lines = [
        f"# Plugin {markdown_cell(plugin.name)}: with vs without",
        "",
        "| case | with (passed/runs) | without (passed/runs) | score with | score without | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for d in deltas:
        lines.append(
            f"| {markdown_cell(d.name)} | {d.with_passed}/{d.with_runs} | "
            f"{d.without_passed}/{d.without_runs} | {d.score_with:.2f} | {d.score_without:.2f} | "
            f"{markdown_cell(d.verdict(), None)} |"
        )
    lines += parts_report(plugin, runs)
    if warnings:
        lines += ["", "## Warnings", ""] + [f"- {markdown_cell(w, None)}" for w in warnings]
    return "\n".join(lines) + "\n"


def arm_case(plugin: Plugin, case: PluginCase, arm: str, runs: list[PluginArmRun]) -> CaseResult:
    """A case in one arm as the product's verdict every writer reads: the plugin arm gates (as
    a task eval's with_skill), the arm without it is reported beside it (a baseline); it passes
    as claude plugin eval's case does, at a mean score of 1. Its failing graders are its reasons."""
    reasons: dict[str, int] = {}
    for run in runs:
        why = (
            [run.error]
            if run.error
            else [
                f"{g['name']}: {g['explanation']}"
                for g in run.graders
                if g["scored"] and not g["passed"]
            ]
        )
        for reason in why:
            reasons[reason or "failed"] = reasons.get(reason or "failed", 0) + 1
    passes = sum(1 for r in runs if r.passed)
    score = sum(r.score for r in runs) / len(runs) if runs else 0.0
    return CaseResult(
        name=case.name,
        kind="case",
        group=f"plugin {plugin.name}",
        passed=bool(runs) and score >= 1.0,
        error=bool(runs) and all(r.error for r in runs),
        runs=len(runs),
        passes=passes,
        errors=sum(1 for r in runs if r.error),
        pass_rate=passes / len(runs) if runs else 0.0,
        reasons=reasons,
        prompt=case.prompt,
        cost_usd=sum(r.cost_usd + r.judge_cost_usd for r in runs),
        seconds=sum(r.duration_ms for r in runs) / 1000,
        tags=case.tags,
        configuration="with_skill" if arm == "with" else "without_skill",
        model=runs[0].label or None if runs else None,
        source=str(case.source or case.folder),
    )


def product_results(plugin: Plugin, runs: list[PluginArmRun]) -> Results:
    """The runs as the product's Results, for its JUnit and HTML writers."""
    labels = list(dict.fromkeys(r.label for r in runs)) or [""]
    cases = [
        arm_case(
            plugin,
            case,
            arm,
            [r for r in runs if r.case == case.name and r.arm == arm and r.label == label],
        )
        for label in labels
        for case in plugin.cases
        for arm in ARMS
        if any(r.case == case.name and r.arm == arm for r in runs)
    ]
    totals = RunTotals()
    for run in runs:
        totals.add(Usage(), run.cost_usd + run.judge_cost_usd, run.duration_ms, bool(run.error))
    outcome = PipelineOutcome([], [])
    summary = summary_record(case_counts(cases), totals, 1.0, outcome)
    return Results(
        make_metadata("plugin", Settings(), len(runs), outcome, input_type="plugin"),
        all(c.passed for c in cases if c.configuration == "with_skill"),
        summary,
        cases,
        lambda: (),
        0,
        suite_name=f"plugin {plugin.name}",
    )


def earlier_runs(path: str | None) -> list[PluginArmRun]:
    """--resume: the runs an earlier results file of this verb already holds."""
    if not path or not Path(path).is_file():
        return []
    data = parse_json_text(read_text_file(path, "results file"), Path(path))
    if not isinstance(data, dict) or data.get("kind") != RESULTS_KIND:
        raise InputError("not a results file of the plugin verb", path, hint="drop --resume")
    kept = {f.name for f in dataclass_fields(PluginArmRun)} - {"events"}
    found = []
    for case in data.get("cases") or []:
        for arm_runs in (case.get("arms") or {}).values():
            for run in arm_runs:  # a key of another version is left out, not a traceback
                found.append(PluginArmRun(**{k: v for k, v in run.items() if k in kept}))
    return found


def plugin_verb(request: PluginRequest, console: Console) -> int:
    """Load and check the suite (every problem one line, exit 2, before any spend), say which
    graders can never pass, then run every case in both arms (or price them: --dry-run), write
    the results as they complete, and report each case's with/without delta."""
    if isinstance(request.runs, int) and request.runs > MAX_RUNS:
        raise UsageProblem(f"--runs {request.runs}: at most {MAX_RUNS} runs per case and arm")
    folder = resolve_plugin(request.spec, Path.home())
    plugin = load_plugin(folder)
    if request.cases:
        plugin.cases = [
            c for c in plugin.cases if any(fnmatch.fnmatchcase(c.name, g) for g in request.cases)
        ]
        if not plugin.cases:
            raise InputError(f"no case matches --case {' '.join(request.cases)}", plugin.eval_dir)
    warnings = [line for case in plugin.cases for line in case_warnings(case, request.scaffold)]
    for line in warnings:
        console.print(f"warning: {terminal_text(line)}", markup=False, highlight=False)
    others = (
        tuple(
            path
            for key, path in installed_plugins(Path.home())
            if key.split("@")[0] != plugin.name and path.resolve() != plugin.folder
        )
        if request.distractors == "installed"
        else ()
    )
    if request.distractors == "installed":
        console.print(
            terminal_text(
                f"--distractors installed: {len(others)} other installed plugin(s) in both arms"
            ),
            markup=False,
            highlight=False,
        )
    combos = [(b, m) for b in request.claude_bins for m in request.models]
    plans = []
    for claude_bin, model in combos:
        binary = find_claude_bin(claude_bin)
        version = "" if request.dry_run or len(combos) == 1 else claude_version(binary)
        plans.append(
            PluginRunPlan(
                plugin,
                binary,
                model,
                request.base_url,
                request.runs.most if isinstance(request.runs, AutoRuns) else request.runs,
                request.judge_model,
                request.cache,
                request.concurrency,
                request.ablation,
                f"{model} @ {version}" if version else "",
                request.runs.least if isinstance(request.runs, AutoRuns) else None,
                others,
                request.scaffold,
            )
        )
    if request.dry_run:
        print_estimate(console, combined_estimate([estimate_plugin_runs(p) for p in plans]))
        return 0
    if len(plans) == 1:
        claude_version(plans[0].binary)  # a broken install is one clear line before any spend
    done_before = earlier_runs(request.output) if request.resume else []
    collected: list[PluginArmRun] = list(done_before)

    def save(record: PluginArmRun) -> None:
        collected.append(record)
        state = "error" if record.error else "passed" if record.passed else "failed"
        shown = f" ({record.label})" if record.label else ""
        console.print(
            terminal_text(
                f"{record.case}{shown} [{record.arm}] run {record.run}: {state} "
                f"(score {record.score:.2f})" + (f": {record.error}" if record.error else "")
            ),
            markup=False,
            highlight=False,
        )
        if request.output:
            deltas = case_deltas(plugin, collected, request.alpha)
            write_json_atomic(
                request.output,
                results_document(plugin, plans, collected, deltas, warnings, request.keep_events),
            )

    runs: list[PluginArmRun] = []
    for plan in plans:
        runs += asyncio.run(run_plugin_suite(plan, save, [*done_before, *runs], request.max_cost))
    deltas = case_deltas(plugin, runs, request.alpha)
    for d in deltas:
        console.print(
            terminal_text(
                f"{d.name}: with {d.with_passed}/{d.with_runs}, without "
                f"{d.without_passed}/{d.without_runs}: {d.verdict()}"
            ),
            markup=False,
            highlight=False,
        )
        for arm in ARMS:
            parts = parts_in_runs([r for r in runs if r.case == d.name and r.arm == arm])
            if parts:
                console.print(
                    terminal_text(f"  [{arm}] {'; '.join(parts)}"), markup=False, highlight=False
                )
    if request.output:
        write_json_atomic(
            request.output,
            results_document(plugin, plans, runs, deltas, warnings, request.keep_events),
        )
        console.print(wrote_line(request.output), markup=False, highlight=False)
    report = markdown_report(plugin, deltas, warnings, runs)
    if request.report:
        write_text_atomic(request.report, Redactor.for_run().text(report))
        console.print(wrote_line(request.report), markup=False, highlight=False)
    if request.pr_comment:  # the PR comment's form: redacted, with the product's footer
        write_text_atomic(request.pr_comment, comment_text(report.splitlines(), request.pr_comment))
        console.print(wrote_line(request.pr_comment), markup=False, highlight=False)
    append_step_summary(report)  # under GitHub Actions: the job's summary page
    results = product_results(plugin, runs).redacted()
    for path, write in ((request.junit, write_junit), (request.html, write_html_report)):
        if path:
            write(path, results)
            console.print(wrote_line(path), markup=False, highlight=False)
    written = {
        "output": request.output,
        "report": request.report,
        "junit": request.junit,
        "html": request.html,
        "pr_comment": request.pr_comment,
    }
    # under GitHub Actions: the step's outputs name every file written (the action uploads them)
    results_outputs(results, Settings(outputs={k: v for k, v in written.items() if v}), console)
    unstarted = sum(  # -i auto stops by design: only fixed run counts can fall short
        len(p.jobs()) - sum(1 for r in runs if r.label == p.label)
        for p in plans
        if p.auto_least is None
    )
    if unstarted > 0:
        console.print(
            f"--max-cost reached: {unstarted} run(s) not started", markup=False, highlight=False
        )
    failing = [
        d.name for d in deltas if not d.name.startswith("(all cases)") and d.score_with < 1.0
    ]
    if failing:
        console.print(
            terminal_text(f"below the threshold (score 1) with the plugin: {', '.join(failing)}"),
            markup=False,
            highlight=False,
        )
    # as the other modes: 1 when a case failed (as claude plugin eval: its with-plugin score
    # under 1), a run errored, or --max-cost left runs unstarted
    return 1 if failing or unstarted > 0 or any(r.error for r in runs) else 0
