"""plugin: a whole plugin's eval suite (Claude Code's `evals/` format) run through Claude Code
with and without the plugin, every grader kind scored as `claude plugin eval` scores it, and the
with/without delta of each case and of the suite with its interval and Fisher's p. The runs go
through the pipeline (journal, --resume, --retry-errors, --shard and merge, --max-cost, Ctrl-C,
--runs auto), the document is the product's results document with a `plugin` section, and every
writer writes it.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

import test_constants as C

from ..claude_code import check_confinement, claude_version, find_claude_bin
from ..dry_run import print_estimate
from ..errors import InputError, UsageProblem
from ..files import folder_files
from ..finished_run import Results, summary_record
from ..loaders.labels import flagged_graders
from ..loaders.plugin_evals import (
    MAX_RUNS,
    Plugin,
    PluginCase,
    case_warnings,
    eval_dir_of,
    installed_plugins,
    load_plugin,
    resolve_plugin,
)
from ..loaders.servers import read_plugin_manifest
from ..pipeline import PipelineOutcome, jobs_to_run, made_elsewhere, pipeline_jobs
from ..redaction import Redactor
from ..results_schema.document import CaseResult, PluginRunResult
from ..results_schema.plugin import (
    ArmDeltaRecord,
    PluginCaseRecord,
    PluginConfigurationRecord,
    PluginEffectRecord,
    PluginGraderRecord,
    PluginPartsRecord,
    PluginRecord,
    ReusedArmRecord,
)
from ..run_types import Usage
from ..runners.baseline_reuse import BaselineReuse
from ..runners.plugin import ARMS, PluginRunner, PluginRunPlan
from ..runners.plugin_recording import MockRecording
from ..scoring.calibration import JUDGE_GRADER_KINDS
from ..scoring.plugin_graders import (
    CaseEffect,
    arm_delta,
    case_effect,
    plugin_title,
    suite_effect,
)
from ..scoring.statistics import (
    RunTotals,
    case_counts,
    pass_at_k,
    pass_hat_k,
    preload_scipy_stats,
    rounded_interval,
    wilson_interval,
)
from ..settings import Settings
from ..sinks import terminal_text
from ..stopping import run_async
from ..writers.formats import write_outputs
from ..writers.terminal import print_summary
from .common import exit_code, require_plugin_trust, run_metadata, run_suite

__all__ = [
    "plugin_inputs",
    "plugin_mode",
]

_CONFIGURATIONS = {"with": "with_plugin", "without": "without_plugin"}  # a case's arm, as reported


def plugin_inputs(settings: Settings) -> list[tuple[str, Path]]:
    """Every file of the plugin (its suite, its parts, an eval folder the manifest names
    elsewhere): no output may be one of them (`-o P/evals/CASE/prompt.md` would destroy the
    case). Its results and VCS folders are left out, as its copies leave them out."""
    folder = resolve_plugin(settings.plugin_evals.plugin or "", Path.home())
    folders = [folder]
    try:
        manifest, _ = read_plugin_manifest(folder)
        named = settings.plugin_evals.eval_dir
        evals = folder / named if named else eval_dir_of(folder, manifest)
        if evals.is_dir() and not evals.resolve().is_relative_to(folder.resolve()):
            folders.append(evals)
    except InputError:
        pass  # the suite's own reading says so, in its place
    return [("--plugin", path) for where in folders for path in folder_files(where)]


def _plugin_suite(settings: Settings) -> Plugin:
    """The plugin and its suite (only the cases --case names), every problem one line before
    anything runs; what this plugin run cannot take, said the same way."""
    plan, cases = settings.run_plan, settings.plugin_evals.case
    if plan.runs and plan.runs > MAX_RUNS and not plan.auto_runs:
        raise UsageProblem(f"--runs {plan.runs}: at most {MAX_RUNS} runs per case and arm")
    if plan.auto_runs and plan.auto_runs[1] > MAX_RUNS:
        raise UsageProblem(
            f"--runs auto:{plan.auto_runs[0]}-{plan.auto_runs[1]}: at most {MAX_RUNS} "
            "runs per case and arm"
        )
    if plan.auto_runs and plan.shard:
        raise UsageProblem(
            "--runs auto decides each arm from all its runs as they finish, and --shard splits "
            "a case's runs between machines: give a number of runs with --shard"
        )
    wrong = [d for d in settings.crowd.distractors if d != "installed"]
    if wrong:
        raise UsageProblem(
            f"--distractors {wrong[0]}: plugin runs take `installed` (your other installed "
            "plugins, loaded in both arms)"
        )
    plugin = load_plugin(
        resolve_plugin(settings.plugin_evals.plugin or "", Path.home()),
        settings.plugin_evals.eval_dir,
        cases,
    )
    if cases:
        plugin.cases = [
            c for c in plugin.cases if any(fnmatch.fnmatchcase(c.name, g) for g in cases)
        ]
        if not plugin.cases:
            raise InputError(f"no case matches --case {' '.join(cases)}", plugin.eval_dir)
    tags = settings.inputs.tag
    if tags:
        plugin.cases = [c for c in plugin.cases if set(c.tags) & set(tags)]
        if not plugin.cases:
            raise InputError(f"no case has --tag {' '.join(tags)}", plugin.eval_dir)
    return plugin


def _skipped_lines(plugin: Plugin) -> list[str]:
    """The case files Claude Code would not load, one line each, then its count line."""
    if not plugin.skipped:
        return []
    count = len(plugin.skipped)
    return [str(problem) for problem in plugin.skipped] + [
        f"Couldn't load {count} case file{'s' if count > 1 else ''}"
    ]


def _reuse_asked(settings: Settings) -> bool:
    """Whether runs without the plugin may be reused (--baseline-from, --cache)."""
    evals = settings.plugin_evals
    return bool(evals.baseline_from or settings.run_plan.cache) and not evals.fresh_baseline


def _baseline_reuse(settings: Settings) -> BaselineReuse:
    """Where the runs without the plugin come from when nothing they depend on changed, and where
    fresh ones are kept; --baseline-from's file read now (a bad one: one line, before any spend)."""
    evals = settings.plugin_evals
    if evals.ablation == "none":
        for name, given in (
            ("--baseline-from", evals.baseline_from),
            ("--fresh-baseline", evals.fresh_baseline),
        ):
            if given:
                raise UsageProblem(f"{name}: --ablation none runs no arm without the plugin")
    return BaselineReuse(
        settings.grading.judge_model,
        None if settings.merging.merge else evals.baseline_from,
        None if settings.merging.merge else settings.run_plan.cache,
        evals.fresh_baseline,
    )


def _say_reuse(console: Console, runner: PluginRunner, settings: Settings) -> None:
    """How many runs without the plugin an earlier run gives, and from where: `baseline: 4 of 4
    run(s) without the plugin reused (--baseline-from r.json); 4 run(s) to make`."""
    reuse = runner.reuse
    if reuse is None or not reuse.sources or reuse.fresh:
        return
    jobs = list(pipeline_jobs(runner, settings.run_plan.shard))
    reused = sum(1 for job in jobs if made_elsewhere(runner, job) is not None)
    baseline = sum(1 for job in jobs if job.payload[1] == "without")
    verb = "would be reused" if settings.run_plan.dry_run else "reused"
    console.print(
        terminal_text(
            f"baseline: {reused} of {baseline} run(s) without the plugin {verb} "
            f"({', '.join(reuse.sources)}); {len(jobs) - reused} run(s) to make"
        ),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _other_plugins(settings: Settings, plugin: Plugin) -> tuple[Path, ...]:
    """--distractors installed: the user's other installed plugins."""
    if "installed" not in settings.crowd.distractors:
        return ()
    return tuple(
        path
        for key, path in installed_plugins(Path.home())
        if key.split("@")[0] != plugin.name and path.resolve() != plugin.folder
    )


def _mock_recording(settings: Settings, plugin: Plugin) -> MockRecording | None:
    """--record-mocks: the real servers of every plugin the cases load, to be recorded (not when
    merging a sharded run's pieces: nothing runs)."""
    if not settings.plugin_evals.record_mocks or settings.merging.merge:
        return None
    return MockRecording(
        tuple(dict.fromkeys(p for case in plugin.cases for p in case.plugins)),
        confine=not settings.task_evals.unconfined,
        allow_read=settings.task_evals.allow_read,
    )


def _plugin_plans(
    settings: Settings, plugin: Plugin, others: tuple[Path, ...]
) -> list[PluginRunPlan]:
    """A plan per Claude Code and model (several: a matrix, each labelled `model @ version`);
    merging a sharded run's pieces, the configurations its runs name (no `claude` runs)."""
    recording = _mock_recording(settings, plugin)  # one for every plan: the servers start once

    def plan(binary: str, model: str, label: str, version: str | None) -> PluginRunPlan:
        return PluginRunPlan(
            plugin,
            binary,
            model,
            runs=settings.run_plan.runs,
            ablation=settings.plugin_evals.ablation != "none",
            label=label,
            version=version,
            base_url=settings.api.base_url,
            others=others,
            scaffold=settings.plugin_evals.scaffold,
            confine=not settings.task_evals.unconfined,
            allow_read=settings.task_evals.allow_read,
            allow_tools=settings.task_evals.allow_tools,
            disallow_tools=settings.plugin_evals.disallow_tools,
            mocks=settings.plugin_evals.mocks,
            allow_real_servers=settings.plugin_evals.allow_real_servers,
            recording=recording,
        )

    if settings.merging.merge:
        ran = {
            (r.model, r.label, r.claude_version): None
            for r in settings.merging.merged_runs
            if isinstance(r, PluginRunResult)
        }
        return [plan("", model, label, version) for model, label, version in ran]
    combos = [
        (b, m) for b in settings.claude_code.claude_bins or (None,) for m in settings.api.models
    ]
    plans = []
    for claude_bin, model in combos:
        binary = find_claude_bin(claude_bin)
        version = (  # a broken install: one line; a dry run reads it for the reuse key only
            ""
            if settings.run_plan.dry_run and not _reuse_asked(settings)
            else claude_version(binary)
        )
        shown = version.split()[0] if version.split() else version
        label = f"{model} @ {version}" if version and len(combos) > 1 else ""
        plans.append(plan(binary, model, label, shown or None))
    return plans


def _runs_of(records: Sequence[PluginRunResult], label: str, case: str | None, arm: str) -> list:
    return [
        r for r in records if r.label == label and r.arm == arm and (case is None or r.case == case)
    ]


def _reused_arms(records: Sequence[PluginRunResult], label: str, case: str) -> list:
    """The arms of a case whose runs were reused, each with its source (the first run's)."""
    found = []
    for arm in ARMS:
        runs = _runs_of(records, label, case, arm)
        reused = [r for r in runs if r.reused_from is not None]
        if reused and (made := reused[0].reused_from) is not None:
            found.append(
                ReusedArmRecord(
                    arm=arm,
                    label=label,
                    runs=len(reused),
                    of=len(runs),
                    source=made.source,
                    place=made.place,
                    run_id=made.run_id,
                    date=made.date,
                )
            )
    return found


def _case_deltas(
    plugin: Plugin, records: Sequence[PluginRunResult], alpha: float
) -> list[ArmDeltaRecord]:
    """Each case's with/without delta, then the suite's (every run of every case pooled); in a
    matrix, those of each configuration, named `case (model @ version)`."""
    found = []
    for label in dict.fromkeys(r.label for r in records) or [""]:
        shown = f" ({label})" if label else ""
        for case, name in [*((c.name, c.name) for c in plugin.cases), (None, "(all cases)")]:
            scores = {arm: [r.score for r in _runs_of(records, label, case, arm)] for arm in ARMS}
            d = arm_delta(name + shown, scores["with"], scores["without"], alpha)
            found.append(
                ArmDeltaRecord(
                    name=d.name,
                    case=case or "",
                    label=label,
                    with_passed=d.with_passed,
                    with_runs=d.with_runs,
                    score_with=d.score_with,
                    without_passed=d.without_passed,
                    without_runs=d.without_runs,
                    score_without=d.score_without,
                    delta=d.delta,
                    interval=d.interval,
                    p_value=d.p_value,
                    significant=d.significant,
                    runs_to_decide=d.runs_to_decide,
                    verdict=d.verdict(),
                )
            )
    return found


def _manifest_version(plugin: Plugin) -> str | None:
    version = plugin.manifest.get("version")
    return str(version) if isinstance(version, str | int | float) else None


def _case_effects(
    plugin: Plugin, records: Sequence[PluginRunResult], label: str
) -> dict[str, CaseEffect]:
    """Each case's aggregates in one configuration as claude plugin eval has them (a case with
    no run with the plugin has none)."""
    found = {}
    for case in plugin.cases:
        runs = {arm: _runs_of(records, label, case.name, arm) for arm in ARMS}
        if runs["with"]:
            found[case.name] = case_effect(
                case.name,
                [r.score for r in runs["with"]],
                [r.score for r in runs["without"]] or None,
                errored=any(r.error for arm in ARMS for r in runs[arm]),
            )
    return found


def _plugin_effects(
    plugin: Plugin, records: Sequence[PluginRunResult], threshold: float
) -> list[PluginEffectRecord]:
    """The plugin's effect per configuration: claude plugin eval's suite aggregates and
    headline."""
    found = []
    for label in dict.fromkeys(r.label for r in records):
        suite = suite_effect(list(_case_effects(plugin, records, label).values()), threshold)
        found.append(
            PluginEffectRecord(
                label=label,
                title=plugin_title(plugin.name, _manifest_version(plugin)),
                threshold=threshold,
                cases_total=suite.cases_total,
                cases_passed=suite.cases_passed,
                overall_score=suite.overall_score,
                overall_pass_rate=suite.overall_pass_rate,
                mean_delta=suite.mean_delta,
                baseline_score=suite.baseline_score,
                improved=suite.improved,
                flat=suite.flat,
                regressed=suite.regressed,
                headline=suite.headline(),
            )
        )
    return found


_PART_KINDS = (
    ("delegations", "delegated to"),
    ("hooks", "hook"),
    ("mcp_calls", "MCP call"),
    ("confinement", "confined:"),
)


def _parts_in_runs(runs: Sequence[PluginRunResult]) -> list[str]:
    """What the plugin's parts did over one case's runs in one arm, each with the runs it
    happened in: `delegated to shop:invoice-auditor (3/3)`, `hook UserPromptSubmit added
    context: ... (3/3)`, `MCP call mcp__plugin_shop_stock__count (2/3)`."""
    seen: dict[str, int] = {}
    for run in runs:
        for field_name, word in _PART_KINDS:
            for item in dict.fromkeys(getattr(run, field_name)):
                seen[f"{word} {item}"] = seen.get(f"{word} {item}", 0) + 1
    return [f"{what} ({count}/{len(runs)})" for what, count in seen.items()]


def _plugin_parts(plugin: Plugin, records: Sequence[PluginRunResult]) -> list[PluginPartsRecord]:
    """Per case, arm and configuration, the subagents, hooks and MCP calls of its runs (none
    when no run used any)."""
    found = []
    for label in dict.fromkeys(r.label for r in records):
        for case in plugin.cases:
            for arm in ARMS:
                parts = _parts_in_runs(_runs_of(records, label, case.name, arm))
                if parts:
                    found.append(
                        PluginPartsRecord(case=case.name, arm=arm, label=label, parts=parts)
                    )
    return found


def _arm_case(
    plugin: Plugin,
    case: PluginCase,
    arm: str,
    label: str,
    runs: Sequence[PluginRunResult],
    threshold: float,
) -> CaseResult:
    """A case in one arm as the product's verdict every writer reads: the plugin arm gates, the
    arm without it is reported beside it (a baseline, as a task eval's without_skill); it passes
    as claude plugin eval's case does, at a mean score of at least --threshold (default 1). Its
    failing graders are its reasons."""
    reasons: dict[str, int] = {}
    for run in runs:
        for reason in run.verdict.reasons if run.verdict else []:
            reasons[reason or "failed"] = reasons.get(reason or "failed", 0) + 1
    passes = sum(1 for r in runs if r.passed)
    score = sum(r.score for r in runs) / len(runs) if runs else 0.0
    count = len(runs)
    return CaseResult(
        name=f"{case.name} [{arm}]",
        kind="case",
        group=f"plugin {plugin.name}",
        passed=bool(runs) and score >= threshold,
        error=bool(runs) and all(r.error for r in runs),
        runs=count,
        passes=passes,
        errors=sum(1 for r in runs if r.error),
        pass_rate=round(passes / count, 4) if count else 0.0,
        interval=rounded_interval(wilson_interval(passes, count)),
        pass_at_k=round(pass_at_k(count, passes, count), 4) if count else 0.0,
        pass_hat_k=round(pass_hat_k(count, passes, count), 4) if count else 0.0,
        flaky=0 < passes < count,
        reasons=reasons,
        prompt=case.prompt,
        description=f"score {score:.2f} {arm} the plugin",
        cost_usd=round(sum(r.cost_usd + r.judge_cost_usd for r in runs), 6),
        seconds=round(sum(r.latency_ms for r in runs) / 1000, 3),
        tags=case.tags,
        configuration=_CONFIGURATIONS[arm],
        model=label or None,
        source=str(case.source or case.folder),
    )


def _grader_config(config: dict) -> dict:
    """A grader's fields as plain data (a tool_order step as `{"tool": ..., "input_match": ...}`)."""
    return {
        key: {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
        if dataclasses.is_dataclass(value) and not isinstance(value, type)
        else value
        for key, value in config.items()
    }


def _effect_fields(effect: CaseEffect | None) -> dict:
    if effect is None:
        return {}
    return {
        "score": effect.score,
        "pass_rate": effect.pass_rate,
        "score_without": effect.score_without,
        "pass_rate_without": effect.pass_rate_without,
        "delta": effect.delta,
    }


def _plugin_record(
    settings: Settings,
    plugin: Plugin,
    plans: Sequence[PluginRunPlan],
    records: Sequence[PluginRunResult],
    warnings: list[str],
    others: tuple[Path, ...],
) -> PluginRecord:
    labels = list(dict.fromkeys(r.label for r in records)) or [""]
    effects = _case_effects(plugin, records, labels[0])
    return PluginRecord(
        name=plugin.name,
        version=_manifest_version(plugin),
        path=str(plugin.folder),
        eval_dir=str(plugin.eval_dir),
        ablation=settings.plugin_evals.ablation,
        configurations=[
            PluginConfigurationRecord(label=p.label, model=p.model, claude_version=p.version)
            for p in plans
        ],
        cases=[
            PluginCaseRecord(
                name=case.name,
                prompt=case.prompt,
                source=str(case.source or case.folder),
                runs_per_arm=settings.run_plan.runs or case.runs,
                tags=case.tags,
                graders=[
                    PluginGraderRecord(
                        name=g.name,
                        type=g.kind,
                        weight=g.weight,
                        arm=g.arm,
                        config=_grader_config(g.config),
                    )
                    for g in case.graders
                ],
                **_effect_fields(effects.get(case.name)),
                plugins=[str(folder) for folder in case.plugins],
                reused=[arm for label in labels for arm in _reused_arms(records, label, case.name)],
            )
            for case in plugin.cases
        ],
        deltas=_case_deltas(plugin, records, settings.statistics.alpha),
        effects=_plugin_effects(plugin, records, 1.0),
        parts=_plugin_parts(plugin, records),
        warnings=warnings,
        others=[str(path) for path in others],
    )


def _judge_flags(plugin: Plugin) -> dict[str, list]:
    """The plugin's judge graders an earlier calibrate put below their floor (the reports flag
    them), as the section that shows them."""
    flags = flagged_graders(
        (plugin.name, grader.name)
        for case in plugin.cases
        for grader in case.graders
        if grader.kind in JUDGE_GRADER_KINDS
    )
    return {"judge_flags": flags} if flags else {}


def _plugin_results(
    settings: Settings,
    plugin: Plugin,
    plans: Sequence[PluginRunPlan],
    outcome: PipelineOutcome,
    warnings: list[str],
    others: tuple[Path, ...],
) -> Results:
    """The runs scored: a case per case, arm and configuration (the arm with the plugin gates,
    the one without is a baseline), the plugin section, and the document. The suite passes when
    every case reaches --threshold with the plugin, no run errored, every run was made and every
    case file loaded."""
    records: list[PluginRunResult] = list(outcome.records)
    labels = list(dict.fromkeys(r.label for r in records)) or [""]
    cases = [
        _arm_case(plugin, case, arm, label, runs, settings.run_plan.threshold)
        for label in labels
        for case in plugin.cases
        for arm in ARMS
        if (runs := _runs_of(records, label, case.name, arm))
    ]
    totals = RunTotals(by_model=len(plans) > 1)
    for r in records:
        usage = Usage.from_api(r.usage or {})
        totals.add(usage, r.cost_usd + r.judge_cost_usd, r.latency_ms, bool(r.error), r.label)
    versions = [p.version for p in plans if p.version]
    metadata = run_metadata(
        "plugin",
        settings,
        len(records),
        outcome,
        input_type="plugin",
        claude_version=versions[0] if versions else None,
        claude_versions=list(dict.fromkeys(versions)) if len(plans) > 1 else None,
    )
    passed = (
        all(c.passed for c in cases if c.configuration == _CONFIGURATIONS["with"])
        and not any(r.error for r in records)
        and not outcome.not_started
        and not plugin.skipped  # as Claude Code: a case file it could not load fails the suite
    )
    return Results(
        metadata,
        passed,
        summary_record(case_counts(cases), totals, 1.0, outcome),
        cases,
        lambda: outcome.results(lambda record: record),
        len(records),
        {"plugin": _plugin_record(settings, plugin, plans, records, warnings, others)}
        | _judge_flags(plugin),
        f"plugin {plugin.name}",
    )


def _scaffolds(settings: Settings, plugin: Plugin) -> list[tuple[str, Path]]:
    """--scaffold: the cases' scaffold scripts that would run, as the trust question lists them."""
    if not settings.plugin_evals.scaffold:
        return []
    return [
        (case.name, case.folder / case.scaffold_script)
        for case in plugin.cases
        if case.scaffold_script
    ]


def _say_run(console: Console, redactor: Redactor, record: PluginRunResult) -> None:
    """A run's line as it finishes: `01-greet [with] run 1: passed (score 1.00)`, redacted (its
    error may quote what a hook or Claude Code said)."""
    state = "error" if record.error else "passed" if record.passed else "failed"
    shown = f" ({record.label})" if record.label else ""
    console.print(
        terminal_text(
            redactor.text(
                f"{record.case}{shown} [{record.arm}] run {record.run}: {state} "
                f"(score {record.score:.2f})" + (f": {record.error}" if record.error else "")
            )
        ),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def plugin_mode(settings: Settings, console: Console) -> int:
    """plugin PATH (--plugin): load and check the suite (every problem one line, exit 2, before
    any spend), say which graders can never pass, then run every case in both arms through the
    pipeline (or price them: --dry-run), and write and report each case's with/without delta.
    Exit 1 when a case scores under 1 with the plugin (claude plugin eval's threshold), a run
    errored, or --max-cost left runs unstarted."""
    plugin = _plugin_suite(settings)
    warnings = _skipped_lines(plugin) + [
        line
        for case in plugin.cases
        for line in case_warnings(case, settings.plugin_evals.scaffold)
    ]
    for line in warnings:
        shown = terminal_text(Redactor.for_run().text(line))
        console.print(f"warning: {shown}", markup=False, highlight=False)
    others = _other_plugins(settings, plugin)
    if "installed" in settings.crowd.distractors:
        console.print(
            f"--distractors installed: {len(others)} other installed plugin(s) in both arms",
            markup=False,
            highlight=False,
        )
    plans = _plugin_plans(settings, plugin, others)
    runner = PluginRunner(
        plans,
        settings.run_plan.concurrency or C.DEFAULT_PLUGIN_CONCURRENCY,
        settings.grading.judge_model,
        settings.run_plan.cache,
        settings.plugin_evals.keep_events,
        Redactor.for_run(),
        _baseline_reuse(settings),
    )
    _say_reuse(console, runner, settings)
    if settings.run_plan.dry_run:
        todo = jobs_to_run(runner, settings.run_plan, settings.outputs.output)
        print_estimate(console, run_async(runner.estimate(todo)))
        return 0
    if not settings.merging.merge:  # nothing of the plugin runs before this (nor in a dry run)
        require_plugin_trust(settings.trust, plugin.folder, _scaffolds(settings, plugin))
        loaded = dict.fromkeys(p for case in plugin.cases for p in case.plugins)
        for folder in (f for f in loaded if f != plugin.folder):  # a suite root's cases' plugins
            require_plugin_trust(settings.trust, folder)
        check_confinement(settings.task_evals.unconfined)
        if settings.task_evals.unconfined:
            console.print(
                "--unconfined: the plugin's hooks and MCP servers run as you, your home in reach",
                markup=False,
                highlight=False,
            )
    if any(plan.ablation for plan in plans):  # each case's delta reads Fisher's p at the end
        preload_scipy_stats()
    outcome = run_suite(
        runner,
        settings,
        console,
        on_record=lambda record: _say_run(console, runner.redactor, record),
        verdict=lambda record: record.passed,
    )
    recording = plans[0].recording if plans else None
    if recording is not None:
        for line in recording.write(plugin.eval_dir / "mocks"):
            shown = terminal_text(runner.redactor.text(line))
            console.print(f"--record-mocks: {shown}", markup=False, highlight=False)
    results = _plugin_results(settings, plugin, plans, outcome, warnings, others)
    write_outputs(results, settings.outputs, console)
    outcome.finish()
    print_summary(console, results)
    failing = [c.name for c in results.cases if c.configuration == "with_plugin" and not c.passed]
    if failing:
        console.print(
            terminal_text(
                Redactor.for_run().text(
                    f"below the threshold (score {settings.run_plan.threshold:g}) with the plugin: "
                    + ", ".join(name.removesuffix(" [with]") for name in failing)
                )
            ),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return exit_code(results, outcome)
