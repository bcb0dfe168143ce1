"""The skill mode: trigger queries, knowledge and security tests and task evals through Claude
Code, with model and Claude Code version matrices and crowds.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import test_constants as C

from ..claude_code import (
    ClaudeCliSettings,
    allow_read_problem,
    check_confinement,
    check_sandbox,
    claude_version,
    find_claude_bin,
    remove_stale_run_folders,
    sandbox_problem,
)
from ..claude_code.process import tool_grants
from ..dry_run import print_estimate, print_run_plan
from ..errors import InputError
from ..finished_run import Results, summary_record
from ..grading import judges_answer
from ..loaders.csv_suites import name_matcher
from ..loaders.servers import resolve_servers
from ..loaders.skills import (
    apply_skill_descriptions,
    load_markdown_tests,
    load_skill,
    load_subjects,
)
from ..pipeline import jobs_to_run, pipeline_jobs
from ..redaction import Redactor
from ..results_schema.document import (
    IsolationRecord,
    QueryScoreRecord,
    SkillRecord,
    SkillTestRecord,
    TriggerScoreRecord,
    skill_run_result,
)
from ..results_schema.sections import CrowdingRecord, DistractorRecord
from ..run_types import VERSION_MARK, Verdict
from ..runners.crowd import (
    CrowdedSkillRunner,
    print_decoy_estimate,
    print_step_costs,
    skill_crowd_for,
)
from ..runners.skills import SkillRunner, SkillSuitePlan, assign_trigger_skills
from ..scoring.crowd import consolidation_hints, skill_crowd_point, skill_thieves
from ..scoring.skills import (
    score_all_triggers,
    score_skill_test,
    score_test_run,
    trigger_queries_by_skill,
)
from ..scoring.statistics import RunTotals, case_counts
from ..scoring.suites import skill_test_record
from ..scoring.task_evals import task_benchmark, trigger_test_passed
from ..scoring.verdicts import (
    case_result_from_query,
    case_result_from_test,
    claude_run_usage,
    model_matrix,
    run_score_reasons,
)
from ..sinks import escape_markup, terminal_text
from ..stopping import run_async
from ..writers.formats import write_outputs
from ..writers.terminal import RunProgress, print_summary
from .common import (
    check_auto_runs,
    check_crowd_options,
    exit_code,
    require_api_key,
    require_plugin_trust,
    run_metadata,
    run_suite,
)

__all__ = [
    "SkillRuns",
    "load_skill_suite",
    "short_version",
    "skill_mode",
    "skill_plan",
    "skill_results",
    "trigger_run_verdict",
    "trigger_score_record",
]

if TYPE_CHECKING:
    from ..loaders.distractors import SkillCrowd
    from ..pipeline import PipelineOutcome
    from ..results_schema.document import CaseResult, ClaudeRun, SkillTestResult
    from ..run_types import RoutingRule, SkillInfo, SkillTest, TriggerScore
    from ..settings import Settings


def _default_skill_concurrency() -> int:
    """Each run is a mostly idle `claude` process waiting on the API: two per CPU, at most ten."""
    return max(2, min(10, 2 * (os.cpu_count() or 1)))


def _graded_by(test: SkillTest) -> list[str]:
    """What a knowledge, task or security test run through Claude Code is graded on."""
    return [
        *test.concepts,
        *test.expected,
        *test.forbidden_patterns,
        *test.expected_refusal,
        *test.expectations,
        *([test.expected_answer] if test.expected_answer is not None else []),
    ]


def load_skill_suite(settings: Settings) -> tuple[list[SkillInfo], list[SkillTest]]:
    """Skills and tests, validated before anything runs."""
    skills = [subject for path in settings.inputs.skill for subject in load_subjects(path)]
    if not skills:
        raise InputError(
            "no skill to evaluate", hint="give --skill path/to/SKILL.md (or its folder)"
        )
    names = [s.name for s in skills]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InputError(
            f"skill {duplicate!r} is given twice", hint="each --skill must have its own name"
        )
    skills = apply_skill_descriptions(skills, settings.descriptions.skill_description)
    tests = [t for target in settings.inputs.tests for t in load_markdown_tests(target)]
    tests += [
        t for target in settings.inputs.trigger for t in load_markdown_tests(target, "trigger")
    ]
    if not tests:
        raise InputError(
            "no tests to run", hint="give --trigger FILE.md and/or --tests FILE_OR_DIR"
        )
    graded = next((t for t in tests if t.rubric or t.verify or judges_answer(t)), None)
    if graded is not None:
        what = (
            "# Rubric" if graded.rubric else "verify:" if graded.verify else "answer_match: judge"
        )
        raise InputError(
            f"test {graded.name!r} has a {what}, which is graded in runs against MCP servers only",
            graded.source,
            graded.line,
            "run it with --tests and without --skill",
        )
    ungraded = next((t for t in tests if t.type != "trigger" and not _graded_by(t)), None)
    if ungraded is not None:
        raise InputError(
            f"test {ungraded.name!r} has nothing to grade: it would pass whatever Claude does",
            ungraded.source,
            ungraded.line,
            "give it concepts, '# Expected' items, '# Forbidden Patterns', '# Expected Refusal' "
            "or an '# Expected Answer'",
        )
    assign_trigger_skills(tests, skills)
    return skills, tests


def _parse_allow_tools(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """`Bash,Write,Edit` (or `Bash Write`): the locked-down tools a task run may use (inside its
    temporary project), read by the one grant parser plugin runs read theirs with."""
    if not value:
        return ()
    names = list(tool_grants([value] if isinstance(value, str) else value))
    allowed = {n.lower(): n for n in C.TASK_ALLOWABLE_TOOLS}
    unknown = next((n for n in names if n.lower() not in allowed), None)
    if unknown is not None or not names:
        shown = value if isinstance(value, str) else " ".join(value)
        raise InputError(
            f"--allow-tools {shown}: {unknown or 'no tool'} is not one of "
            f"{', '.join(C.TASK_ALLOWABLE_TOOLS)}",
            hint="e.g. --allow-tools Bash,Write,Edit (WebFetch stays off: it leaves the machine)",
        )
    return tuple(dict.fromkeys(allowed[n.lower()] for n in names))


def _artifacts_folder(value: str) -> Path:
    """--artifacts DIR: a folder (made when the runs start), or a place where one can be made."""
    path = Path(value).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise InputError(
            f"--artifacts {value}: not a folder", hint="give a folder (it is made if missing)"
        )
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(
            f"--artifacts {value}: {existing} is not a writable folder", hint="give another folder"
        )
    return path


def _allow_read_paths(values: Sequence[str]) -> tuple[str, ...]:
    """--allow-read PATH: an existing file or folder, as its real path (what the sandbox binds
    back, and Read's permission rules name)."""
    paths = []
    for value in values:
        path = Path(value).expanduser()
        if not path.exists():
            raise InputError(
                f"--allow-read {value}: not found", hint="give a file or folder that exists"
            )
        paths.append(str(path.resolve()))
    problem = allow_read_problem(paths)
    if problem:
        raise InputError(f"--allow-read: {problem}", hint="give the folder the task reads")
    return tuple(dict.fromkeys(paths))


def _unconfined_warning() -> str:
    """The line --unconfined gets before anything runs: what it lets Bash do, and whether the
    sandbox it turns off would have started here."""
    problem = sandbox_problem(os.environ.get("PATH"))
    where = (
        "Claude Code's sandbox could start here (drop --unconfined to run Bash in it)"
        if problem is None
        else f"Claude Code's sandbox cannot start here: {problem}"
    )
    return (
        "--unconfined: task runs' Bash runs as you, outside any sandbox, and can read and write "
        f"whatever you can (your keys too); {where}"
    )


def _task_plan_options(
    settings: Settings, skills: list[SkillInfo], tests: list[SkillTest]
) -> dict[str, Any]:
    """--baseline, --baseline-skill, --allow-tools and --artifacts, checked before anything runs:
    they apply to task tests only, and an eval set names a skill that is given."""
    evals = settings.task_evals
    tasks = [t for t in tests if t.is_task]
    given = [
        flag
        for flag, value in (
            ("--baseline", evals.baseline),
            ("--baseline-skill", evals.baseline_skill),
            ("--allow-tools", evals.allow_tools),
            ("--allow-read", evals.allow_read),
            ("--artifacts", evals.artifacts),
            ("--benchmark-json", settings.outputs.writers.get("benchmark_json")),
        )
        if value
    ]
    if given and not tasks:
        raise InputError(
            f"{given[0]} applies to task tests, and none is given",
            hint="give task evals with --tests path/to/evals/evals.json (or a `type: task` test)",
        )
    names = sorted(s.name for s in skills)
    for test in tasks:
        if test.eval_id is not None and test.skill and test.skill not in names:
            raise InputError(
                f"the evals are for skill {test.skill!r}, which is not among the --skill options "
                f"({', '.join(names)})",
                test.source,
                1,
                f"add --skill path/to/{test.skill}",
            )
    old = load_skill(evals.baseline_skill) if evals.baseline_skill else None
    if old is not None and old.folder.resolve() in {s.folder.resolve() for s in skills}:
        raise InputError(
            f"--baseline-skill {evals.baseline_skill} is the skill under test itself",
            hint="give the other version's folder (a copy of the old SKILL.md, e.g. from git)",
        )
    allow_tools = _parse_allow_tools(evals.allow_tools)
    if evals.unconfined and "Bash" not in allow_tools:
        raise InputError(
            "--unconfined applies to task runs allowed Bash, and --allow-tools does not name it",
            hint="drop --unconfined (file tools are kept to the project either way)",
        )
    return {
        "baseline": evals.baseline,
        "baseline_skill": old,
        "allow_tools": allow_tools,
        "artifacts": _artifacts_folder(evals.artifacts) if evals.artifacts else None,
        "judge_model": settings.grading.judge_model,
        "unconfined": evals.unconfined,
        "allow_read": _allow_read_paths(evals.allow_read),
    }


def short_version(version: str) -> str:
    """`2.1.197 (Claude Code)` -> `2.1.197`."""
    return version.split()[0] if version.split() else version


def _version_matrix(settings: Settings) -> dict[str, Any]:
    """Several --claude-bin: every model on every version (`haiku @ 2.1.197`), each binary's
    version asked once (`claude --version`, free and local, a dry run too); two binaries of one
    version are one line. One binary: the models as they are."""
    if len(settings.claude_code.claude_bins) < 2 or settings.merging.merge:
        return {
            "trigger_models": settings.trigger_runs.trigger_models,
            "test_models": settings.api.models,
        }
    binaries = [find_claude_bin(b) for b in settings.claude_code.claude_bins]
    versions = [short_version(claude_version(b)) for b in binaries]
    for i, version in enumerate(versions):
        if version in versions[:i]:
            other = binaries[versions.index(version)]
            raise InputError(
                f"--claude-bin {binaries[i]} and {other} are both Claude Code {version}",
                hint="give each version once (a version matrix compares versions)",
            )
    variants = {
        f"{model}{VERSION_MARK}{version}": (model, binary, version)
        for model in dict.fromkeys([*settings.trigger_runs.trigger_models, *settings.api.models])
        for binary, version in zip(binaries, versions)
    }

    def labels(models: Sequence[str]) -> tuple[str, ...]:
        return tuple(f"{m}{VERSION_MARK}{v}" for m in models for v in versions)

    return {
        "trigger_models": labels(settings.trigger_runs.trigger_models),
        "test_models": labels(settings.api.models),
        "variants": variants,
    }


def skill_plan(
    settings: Settings, skills: list[SkillInfo], tests: list[SkillTest]
) -> SkillSuitePlan:
    servers = settings.servers
    if servers.mcp_config and Path(servers.mcp_config).is_dir():
        raise InputError(
            "skill runs pass --mcp-config to claude as a file, and this is a folder",
            servers.mcp_config,
            None,
            "give an mcpServers file; a whole plugin runs with `python evaluator.py plugin PATH`",
        )
    if servers.mcp_config and not Path(servers.mcp_config).is_file():
        raise InputError("MCP config not found", servers.mcp_config)
    plugins = list(dict.fromkeys(s.plugin for s in skills if s.plugin is not None))
    if plugins and not settings.run_plan.dry_run and not settings.merging.merge:
        for folder in plugins:
            require_plugin_trust(settings.trust, folder)  # its hooks and servers load with it
        check_confinement(settings.task_evals.unconfined)
    binary = (
        find_claude_bin(settings.claude_code.claude_bin) if not settings.merging.merge else ""
    )  # --merge runs no `claude`
    base = ClaudeCliSettings(
        binary=binary,
        base_url=settings.api.base_url,
        mcp_config=str(Path(servers.mcp_config).resolve()) if servers.mcp_config else None,
        plugin_dirs=tuple(str(folder) for folder in plugins),
        # a plugin's hooks and servers run in its runs: confined as a plugin run's are
        confine=bool(plugins) and not settings.task_evals.unconfined,
    )
    return SkillSuitePlan(
        skills=skills,
        tests=tests,
        trigger_settings=replace(
            base,
            model=settings.trigger_runs.trigger_model,
            max_turns=settings.trigger_runs.trigger_max_turns,
        ),
        test_settings=replace(base, model=settings.api.model, max_turns=settings.api.max_turns),
        runs=settings.run_plan.runs,
        threshold=settings.trigger_runs.trigger_threshold,
        concurrency=settings.run_plan.concurrency or _default_skill_concurrency(),
        trigger_timeout=settings.trigger_runs.trigger_timeout,
        ignore_globs=settings.task_evals.ignore_path,
        cache=settings.run_plan.cache,
        **_version_matrix(settings),
        **_task_plan_options(settings, skills, tests),
    )


# What a trigger run's scorer never reads, left out of the runs it groups (the spool keeps them).
_TRIGGER_UNSCORED = {"answer": "", "stderr_tail": "", "tool_calls": [], "transcript_summary": ""}


@dataclass
class SkillRuns:
    """A skill suite's records, grouped the way its scorers read them."""

    by_query: dict[str, list[ClaudeRun]]
    by_test: dict[str, list[ClaudeRun]]

    @classmethod
    def of(
        cls,
        plan: SkillSuitePlan,
        outcome: PipelineOutcome,
        model: str | None = None,
        distractors: int | None | str = "any",
    ) -> SkillRuns:
        """The records (of one model, when given: a model matrix scores each model apart; of one
        step of a crowd, when `distractors` is a count, or None for the runs without one), read
        back from the run spool; a trigger run without what its scorer does not read (its answer,
        calls and stderr: the results file has them)."""
        by_query: dict[str, list[ClaudeRun]] = {}
        by_test: dict[str, list[ClaudeRun]] = {}
        for record in outcome.records:
            if model is not None and record.model != model:
                continue
            if record.test == "trigger":
                if distractors != "any" and record.distractors != distractors:
                    continue
                slim = record.model_copy(update=_TRIGGER_UNSCORED)
                by_query.setdefault(record.query, []).append(slim)
            else:
                by_test.setdefault(record.test, []).append(record)
        return cls(by_query, by_test)

    def cost(self, queries: Iterable[str]) -> float:
        return sum(r.total_cost_usd or 0.0 for q in queries for r in self.by_query.get(q, []))


def trigger_run_verdict(
    record: ClaudeRun, skill: str, expected: str, rule: RoutingRule | None = None
) -> Verdict:
    if not record.counted:
        return Verdict(False, [f"run failed: {record.error}"])
    broken = rule.problems(record.activated_skills, record.delegated_agents) if rule else []
    if record.fired(skill) == (expected == "activate"):
        return Verdict(not broken, broken)
    fired = ", ".join(record.fired_names) or "no skill"
    return Verdict(False, [f"expected {skill} to {expected}; fired: {fired}", *broken])


def _skill_run_key(record: ClaudeRun) -> tuple:
    """A run of a skill suite, as its verdict is found again when the runs are read back."""
    return record.test, record.query, record.run, record.model, record.configuration


def _skill_run_verdicts(
    runs: SkillRuns, scores: Sequence[TriggerScore], test_results: Sequence[SkillTestResult]
) -> dict[tuple, Verdict]:
    """Each run's own verdict (by skill_run_key): a trigger run against what its query expects
    of its own skill, a test run by its test's scorer."""
    verdicts: dict[tuple, Verdict] = {}
    for result in test_results:
        for record, graded in zip(result.runs, result.run_scores):
            verdicts[_skill_run_key(record)] = Verdict(
                bool(graded.get("passed")), run_score_reasons(result.test, graded)
            )
    for score in scores:
        for q in score.query_results:
            if q.routing:
                continue
            for record in runs.by_query.get(q.query, []):
                verdicts[_skill_run_key(record)] = trigger_run_verdict(
                    record, score.skill, q.expected, q.rule
                )
    return verdicts


def trigger_score_record(score: TriggerScore, runs: SkillRuns) -> TriggerScoreRecord:
    """A skill's scores; a rate over no queries is n/a (an eval set of negatives only is valid)."""
    own = [q for q in score.query_results if not q.routing]
    return TriggerScoreRecord(
        skill=score.skill,
        trigger_rate=round(score.trigger_rate, 2) if score.positives else None,
        false_positive_rate=round(score.false_positive_rate, 2) if score.negatives else None,
        trigger_score=round(score.trigger_score, 2),
        precision=round(score.precision, 2),
        recall=round(score.recall, 2) if score.positives else None,
        f1=round(score.f1, 2),
        positives=score.positives,
        positives_activated=score.positives_activated,
        negatives=score.negatives,
        negatives_activated=score.negatives_activated,
        errored_queries=score.errored_queries,
        errored_runs=score.errored_runs,
        total_runs=score.total_runs,
        threshold=score.threshold,
        cost_usd=round(runs.cost(q.query for q in own), 6),
        query_results=[
            QueryScoreRecord(
                query=q.query,
                expected=q.expected,
                actual=q.actual,
                correct=q.correct,
                tool_count=q.tool_count,
                activation_rate=round(q.activation_rate, 4),
                activations=q.activations,
                runs=q.runs,
                errored_runs=q.errors,
                fired_skills=q.fired,
                routing=q.routing,
                source=q.source,
                cost_usd=round(runs.cost([q.query]), 6),
                routing_failures=q.routing_failures,
                hooks=q.hooks,
            )
            for q in score.query_results
        ],
    )


def _skill_crowding_record(
    plan: SkillSuitePlan, crowd: SkillCrowd, outcome: PipelineOutcome
) -> CrowdingRecord:
    """The crowding section of a skill suite: each step's scores per trigger model and skill, who
    took each positive query, and the pairs worth consolidating."""
    names = [s.name for s in plan.skills]
    distractor_names = {d.name for d in crowd.distractors}
    points, thieves = [], []
    totals: dict[tuple[str, str, int], int] = {}
    for step in crowd.steps:
        installed = [d.name for d in step.installed]
        for model in plan.trigger_models:
            runs = SkillRuns.of(plan, outcome, model, step.count)
            for score in score_all_triggers(plan.tests, names, runs.by_query, plan.threshold):
                points.append(skill_crowd_point(score, step.count, model, runs.by_query, installed))
                thieves += skill_thieves(score, step.count, model, runs.by_query, distractor_names)
                totals[(score.skill, model, step.count)] = sum(
                    1
                    for q in score.query_results
                    if not q.routing and q.expected == "activate"
                    for r in runs.by_query.get(q.query, [])
                    if r.counted
                )
    descriptions = {**crowd.descriptions(), **{s.name: s.description for s in plan.skills}}
    return CrowdingRecord(
        kind="skills",
        steps=[s.count for s in crowd.steps],
        seed=crowd.seed,
        sources=crowd.sources,
        distractors=[
            DistractorRecord(name=d.name, source=d.source, description=d.description)
            for d in crowd.distractors
        ],
        points=points,
        thieves=thieves,
        hints=consolidation_hints("skill", thieves, totals, descriptions),
        skipped=crowd.skipped,
        decoys_file=crowd.decoys_file,
        decoy_cost_usd=round(crowd.decoy_cost, 6),
    )


@dataclass
class _SkillScoring:
    """A skill suite's verdicts as its steps make them: the trigger queries' (per model and crowd
    step), then the tests' (per model and configuration); each run's own verdict by
    skill_run_key."""

    trigger_verdicts: dict[str, bool]  # trigger test -> passed (over every model and step)
    scores: list[TriggerScore] = field(default_factory=list)
    score_records: list[TriggerScoreRecord] = field(default_factory=list)
    test_results: list[SkillTestResult] = field(default_factory=list)
    test_records: list[SkillTestRecord] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    verdicts: dict[tuple, Verdict] = field(default_factory=dict)
    version: str = ""  # the Claude Code the run used (--claude-bin: each label's own, see plan)

    def claude_version(self, plan: SkillSuitePlan, label: str) -> str | None:
        """The Claude Code version a case ran under: its --claude-bin's, or the run's."""
        return plan.variant(label).get("version") or short_version(self.version) or None


def _score_skill_triggers(
    settings: Settings, plan: SkillSuitePlan, outcome: PipelineOutcome, scored: _SkillScoring
) -> None:
    """Each model on its own runs (one, unless a model matrix), at each step of a crowd."""
    names = [s.name for s in plan.skills]
    trigger_tests = [t for t in plan.tests if t.type == "trigger"]
    query_lines = {(t.source, q): n for t in trigger_tests for q, n in t.query_lines.items()}
    steps = [step.count for step in plan.crowd.steps] if plan.crowd else [None]
    for step, model in itertools.product(steps, plan.trigger_models):
        runs = SkillRuns.of(plan, outcome, model, step)
        model_scores = score_all_triggers(plan.tests, names, runs.by_query, plan.threshold)
        for q in (q for s in model_scores for q in s.query_results):
            case = case_result_from_query(
                q,
                runs.cost([q.query]),
                sum(r.latency_ms for r in runs.by_query.get(q.query, [])) / 1000,
            )
            case.model, case.distractors = model, step
            case.line = query_lines.get((q.source, q.query), 0)
            case.claude_version = scored.claude_version(plan, model)
            if plan.crowd is not None and plan.crowd.named:
                case.name += f" (+{step} distractors)"
            scored.cases.append(case)
        for test in trigger_tests:
            scored.trigger_verdicts[test.name] &= trigger_test_passed(
                test, model_scores, settings.trigger_runs.min_trigger_score
            )
        scored.verdicts.update(_skill_run_verdicts(runs, model_scores, []))
        for score in model_scores:
            record = trigger_score_record(score, runs)
            record.model, record.distractors = model, step
            scored.score_records.append(record)
        scored.scores += model_scores


def _add_skill_test_case(
    plan: SkillSuitePlan, scored: _SkillScoring, result: SkillTestResult, model: str
) -> None:
    """A test's verdict as a case and as a record of the tests section."""
    cost = sum((x.total_cost_usd or 0.0) + x.judge_cost_usd for x in result.runs)
    case = case_result_from_test(
        result, "tests", cost, sum(x.latency_ms for x in result.runs) / 1000
    )
    record = skill_test_record(result, cost)
    case.model = record.model = model
    case.claude_version = scored.claude_version(plan, model)
    if result.runs and result.runs[0].configuration:
        case.configuration = record.configuration = result.runs[0].configuration
        record.expected_output = result.test.expected_output
    scored.cases.append(case)
    scored.test_records.append(record)


def _score_skill_tests(
    plan: SkillSuitePlan, outcome: PipelineOutcome, scored: _SkillScoring
) -> None:
    """Each test model's tests: a verdict per test, and per task eval and configuration (the
    baselines are reported beside the skill, never failing the suite)."""
    for model in plan.test_models:
        runs = SkillRuns.of(plan, outcome, model)
        model_tests = [
            score_skill_test(t, runs.by_test[t.name])
            for t in plan.other_tests
            if t.name in runs.by_test and not t.is_task
        ]
        baselines: list[SkillTestResult] = []
        for test in plan.task_tests:
            for configuration in plan.configurations(test):
                chosen = [
                    r for r in runs.by_test.get(test.name, []) if r.configuration == configuration
                ]
                if chosen:
                    result = score_skill_test(
                        replace(test, name=f"{test.name} [{configuration}]"), chosen
                    )
                    (model_tests if configuration == "with_skill" else baselines).append(result)
        for result in model_tests + baselines:
            _add_skill_test_case(plan, scored, result, model)
        scored.verdicts.update(_skill_run_verdicts(runs, [], model_tests + baselines))
        scored.test_results += model_tests


def _skill_suite_passed(
    settings: Settings,
    plan: SkillSuitePlan,
    runner: SkillRunner,
    outcome: PipelineOutcome,
    scored: _SkillScoring,
) -> bool:
    """Every trigger test and test passed, every skill at --min-trigger-score, nothing written
    outside the run's folders, and every run made."""
    below = [
        s
        for s in scored.scores
        if settings.trigger_runs.min_trigger_score is not None
        and s.trigger_score < settings.trigger_runs.min_trigger_score
    ]
    complete = (
        len(scored.test_results) == len(plan.other_tests) * len(plan.test_models)
        and not outcome.not_started
        and not outcome.interrupted
    )
    return (
        all(scored.trigger_verdicts.values())
        and all(r.passed for r in scored.test_results)
        and not below
        and not runner.outside_writes
        and complete
    )


def _skill_run_totals(settings: Settings, outcome: PipelineOutcome) -> RunTotals:
    totals = RunTotals(by_model=settings.matrix)
    for r in outcome.records:  # read back from the run spool, a run at a time
        cost = (r.total_cost_usd or 0.0) + r.judge_cost_usd
        totals.add(claude_run_usage(r), cost, r.latency_ms, bool(r.error), r.model)
    return totals


def _skill_sections(
    plan: SkillSuitePlan, runner: SkillRunner, outcome: PipelineOutcome, scored: _SkillScoring
) -> dict[str, Any]:
    """The skills, their trigger scores, the tests, what the write guard saw; a crowd's curve and
    a task benchmark when the suite has them."""
    trigger_tests = [t for t in plan.tests if t.type == "trigger"]
    sections: dict[str, Any] = {
        "skills": [
            SkillRecord(
                name=s.name,
                description=s.description,
                path=str(s.path),
                description_overridden=s.description_override,
            )
            for s in plan.skills
        ],
        "trigger_scores": scored.score_records,
        "tests": [
            SkillTestRecord(
                name=t.name,
                type=t.type,
                source=t.source,
                skill=t.skill,
                passed=scored.trigger_verdicts[t.name],
            )
            for t in trigger_tests
        ]
        + scored.test_records,
        "isolation": IsolationRecord(
            watched=runner.watched,
            outside_writes=runner.outside_writes,
            ok=not runner.outside_writes,
            unconfined=not plan.confined,
            changed_elsewhere=runner.changed_elsewhere,
        ),
    }
    if plan.crowd is not None:
        sections["crowding"] = _skill_crowding_record(plan, plan.crowd, outcome)
    if plan.task_tests:
        sections["benchmark"] = task_benchmark(
            plan.task_tests,
            outcome.records,
            plan.test_models,
            max((plan.test_runs(t) for t in plan.task_tests), default=1),
            plan.judge_model,
        )
    return sections


def skill_results(
    settings: Settings,
    plan: SkillSuitePlan,
    runner: SkillRunner,
    outcome: PipelineOutcome,
    version: str,
) -> Results:
    """A skill suite's runs scored (triggers, then tests), summed up and made into sections."""
    scored = _SkillScoring(
        {t.name: True for t in plan.tests if t.type == "trigger"}, version=version
    )
    _score_skill_triggers(settings, plan, outcome, scored)
    _score_skill_tests(plan, outcome, scored)
    runs_total = _skill_run_totals(settings, outcome)
    metadata = run_metadata(
        "skills",
        settings,
        runs_total.runs,
        outcome,
        claude_version=version,
        claude_versions=list(dict.fromkeys(v for _, _, v in plan.variants.values())) or None,
        trigger_model=plan.trigger_settings.model,
        test_model=plan.test_settings.model,
        trigger_threshold=plan.threshold,
        min_trigger_score=settings.trigger_runs.min_trigger_score,
        input_type="skills",
        skill_descriptions={s.name: s.description for s in plan.skills if s.description_override}
        or None,
    )
    sections = _skill_sections(plan, runner, outcome, scored)
    cases = scored.cases
    counts = case_counts(cases)
    summary = summary_record(counts, runs_total, plan.threshold, outcome)
    if settings.matrix:
        models = list(dict.fromkeys([*plan.trigger_models, *plan.test_models]))
        first: dict[tuple, int] = {}  # a case's models next to each other, in its first place
        for index, case in enumerate(cases):
            first.setdefault((case.kind, case.name), index)
        side_by_side = sorted(cases, key=lambda c: first[(c.kind, c.name)])
        sections["matrix"] = model_matrix(side_by_side, runs_total, counts, models)
    verdicts = scored.verdicts
    return Results(
        metadata,
        _skill_suite_passed(settings, plan, runner, outcome, scored),
        summary,
        cases,
        lambda: (
            skill_run_result(r, runner.result_fingerprint(r), verdicts.get(_skill_run_key(r)))
            for r in outcome.records
        ),
        runs_total.runs,
        sections,
        "skills",
    )


def _skill_mode_end(
    settings: Settings,
    console: Console,
    plan: SkillSuitePlan,
    runner: SkillRunner,
    outcome: PipelineOutcome,
    version: str,
) -> int:
    """A skill suite's runs (run, or replayed by --merge) scored, written and summed up."""
    results = skill_results(settings, plan, runner, outcome, version)
    write_outputs(results, settings.outputs, console)
    outcome.finish()
    print_summary(console, results)
    for score in results.sections["trigger_scores"]:
        if (
            settings.trigger_runs.min_trigger_score is not None
            and score.trigger_score < settings.trigger_runs.min_trigger_score
        ):
            console.print(
                f"[red]{escape_markup(score.skill)}: triggerScore {score.trigger_score:.1f}% is below "
                f"--min-trigger-score {settings.trigger_runs.min_trigger_score:g}[/red]",
                highlight=False,
            )
    return exit_code(results, outcome)


def _progress_verdicts(plan: SkillSuitePlan) -> Callable[[ClaudeRun], Verdict | None]:
    """Each run's verdict as it finishes, for the progress bar: a trigger run against what its
    query expects of its own skill, a test run by its test's scorer."""
    names = [s.name for s in plan.skills]
    rules = {
        (test.skill, query): rule
        for test in plan.tests
        if test.type == "trigger"
        for query, rule in test.routing.items()
    }
    expected = {
        q: (skill, e, rules.get((skill, q)))
        for skill, queries in trigger_queries_by_skill(plan.tests, names).items()
        for q, e, routing, _ in queries
        if not routing
    }
    tests = {t.name: t for t in plan.other_tests}

    def verdict(record: ClaudeRun) -> Verdict | None:
        if record.test in tests:
            return Verdict(bool(score_test_run(tests[record.test], record).get("passed")))
        return (
            trigger_run_verdict(record, *expected[record.query])
            if record.query in expected
            else None
        )

    return verdict


def _tests_named(tests: list[SkillTest], expression: str | None) -> list[SkillTest]:
    """-k for skill runs: a trigger test keeps the queries that match (as `skill: query`, the
    name its results give them), any other test is kept when its name matches."""
    if not expression:
        return tests
    matches = name_matcher(expression)
    kept = []
    for test in tests:
        if test.type != "trigger":
            if matches(test.name):
                kept.append(test)
            continue
        chosen = replace(
            test,
            positive_triggers=[q for q in test.positive_triggers if matches(f"{test.skill}: {q}")],
            negative_triggers=[q for q in test.negative_triggers if matches(f"{test.skill}: {q}")],
        )
        if chosen.positive_triggers or chosen.negative_triggers:
            kept.append(chosen)
    if not kept:
        raise InputError(f"-k {expression!r} matches no test or trigger query")
    return kept


def skill_mode(settings: Settings, console: Console) -> int:
    """--skill with --trigger / --tests: every query and test through the real Claude Code CLI;
    with --distractors, the trigger queries at every step of the crowd."""
    skills, tests = load_skill_suite(settings)
    check_auto_runs(settings)
    tests = _tests_named(tests, settings.run_plan.keyword)
    plan = skill_plan(settings, skills, tests)
    if settings.crowd.distractors and not settings.run_plan.dry_run:
        require_api_key()  # lookalike decoys may be written before any run
    check_crowd_options(settings)
    plan.crowd = skill_crowd_for(
        settings.crowd, skills, console, settings.api, settings.run_plan.dry_run
    )
    secrets = (
        resolve_servers((), (), settings.servers.mcp_config, ())
        if settings.servers.mcp_config
        else []
    )
    runner = (
        CrowdedSkillRunner(
            plan, plan.crowd, settings.outputs.own_outputs(), Redactor.for_run(secrets)
        )
        if plan.crowd
        else SkillRunner(plan, settings.outputs.own_outputs(), Redactor.for_run(secrets))
    )
    if plan.sandboxed and plan.task_tests and not settings.merging.merge:
        check_sandbox(os.environ.get("PATH"))  # before anything runs (a dry run says it too)
    if not plan.confined and plan.task_tests and not settings.merging.merge:
        console.print(
            f"[yellow]warning:[/yellow] {escape_markup(_unconfined_warning())}",
            highlight=False,
            soft_wrap=True,
        )
    if settings.run_plan.dry_run:
        todo = jobs_to_run(runner, settings.run_plan, settings.outputs.output)
        print_estimate(console, run_async(runner.estimate(todo)))
        print_run_plan(
            console,
            settings.run_plan.auto_runs[0]
            if settings.run_plan.auto_runs
            else settings.run_plan.runs or C.DEFAULT_TRIGGER_RUNS,
            settings.run_plan.auto_runs[1] if settings.run_plan.auto_runs else None,
        )
        if isinstance(runner, CrowdedSkillRunner) and plan.crowd is not None:
            print_step_costs(console, runner.step_costs, "distractors")
            print_decoy_estimate(console, plan.crowd.keeper)
        return 0
    if plan.crowd is not None and plan.crowd.decoy_cost and settings.run_plan.max_cost is not None:
        budget = max(0.0, settings.run_plan.max_cost - plan.crowd.decoy_cost)
        settings = replace(settings, run_plan=replace(settings.run_plan, max_cost=budget))
    if (
        settings.merging.merge
    ):  # --merge: the pieces' runs, their Claude Code version, what their write guards saw
        outcome = run_suite(runner, settings, console)
        version = settings.merging.merged_pieces[0].metadata.claude_version or ""
        isolation = [p.isolation for p in settings.merging.merged_pieces if p.isolation is not None]
        runner.watched = sorted({path for i in isolation for path in i.watched})
        runner.outside_writes = sorted({path for i in isolation for path in i.outside_writes})
        runner.changed_elsewhere = sorted({p for i in isolation for p in i.changed_elsewhere})
        return _skill_mode_end(settings, console, plan, runner, outcome, version)
    require_api_key()
    remove_stale_run_folders()  # what runs killed with their evaluator left behind
    if (
        plan.artifacts is not None
    ):  # made before the write guard looks, so it is not a write outside
        plan.artifacts.mkdir(parents=True, exist_ok=True)
    version = claude_version(plan.trigger_settings.binary)
    jobs = sum(1 for _ in pipeline_jobs(runner, settings.run_plan.shard))  # --shard's share
    versions = list(dict.fromkeys(v for _, _, v in plan.variants.values()))
    crowd_note = (
        f", among {len(plan.crowd.distractors)} distractor(s) at step(s) "
        f"{', '.join(str(s.count) for s in plan.crowd.steps)}"
        if plan.crowd
        else ""
    )
    console.print(
        f"Claude Code {terminal_text(', '.join(versions) if versions else version)}: "
        f"{jobs} run(s) of {len(skills)} skill(s)"
        f"{crowd_note}, {plan.concurrency} at once",
        highlight=False,
        markup=False,
    )
    with RunProgress(
        console,
        jobs,
        _progress_verdicts(plan),
        lambda r: (claude_run_usage(r), (r.total_cost_usd or 0.0) + r.judge_cost_usd),
    ) as p:
        outcome = run_suite(
            runner, settings, console, on_record=p.on_record, verdict=_progress_verdicts(plan)
        )
    return _skill_mode_end(settings, console, plan, runner, outcome, version)
