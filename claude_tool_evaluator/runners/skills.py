"""The Claude Code runner for skills: trigger queries and tests through `claude -p`, and what
they would cost.

May import: the rooms above the runners, runners.tool_use."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import test_constants as C

from ..cache import CACHE_SAMPLE, ResponseCache
from ..claude_code import (
    CachingProxy,
    OutsideWriteGuard,
    RunWatch,
    TaskSetup,
    file_sha256,
    project_files,
    run_claude_query,
)
from ..dry_run import CostEstimate, combined_estimate
from ..errors import InputError
from ..grading import Judge, grade_expectations, judge_estimate
from ..pipeline import Job
from ..redaction import Redactor
from ..results_schema.document import SkillRunResult, skill_run_result
from ..run_types import TestCase, Usage, cli_model_id, cost_usd
from ..session import model_api_url, model_client
from ..sinks import safe_name

__all__ = [
    "SkillRunner",
    "SkillSuitePlan",
    "assign_trigger_skills",
    "estimate_claude_runs",
    "plugin_hooks_text",
]

if TYPE_CHECKING:
    from ..claude_code import ClaudeCliSettings
    from ..loaders.distractors import SkillCrowd
    from ..results_schema.document import ClaudeRun, RunResult
    from ..run_types import SkillInfo, SkillTest


@dataclass
class SkillSuitePlan:
    """What a skill evaluation runs: every trigger query (each with every skill installed) and
    every knowledge / task / security test, each so many times."""

    skills: list[SkillInfo]
    tests: list[SkillTest]
    trigger_settings: ClaudeCliSettings
    test_settings: ClaudeCliSettings
    runs: int | None = None  # --runs: overrides every test's own `runs`
    threshold: float = C.DEFAULT_TRIGGER_THRESHOLD
    concurrency: int = C.DEFAULT_CONCURRENCY
    trigger_timeout: float | None = None  # --trigger-timeout: overrides the tests' `timeout`
    trigger_models: tuple[
        str, ...
    ] = ()  # --trigger-model repeated (default: trigger_settings.model)
    test_models: tuple[str, ...] = ()  # --model repeated (default: test_settings.model)
    # task tests (skill-creator's evals, skillmark's task tests): configurations and what they may do
    baseline: bool = False  # --baseline: each task also runs without the skill (without_skill)
    baseline_skill: SkillInfo | None = (
        None  # --baseline-skill: and with this version of it (old_skill)
    )
    allow_tools: tuple[str, ...] = ()  # --allow-tools for task runs
    artifacts: Path | None = None  # --artifacts DIR
    judge_model: str = C.DEFAULT_JUDGE_MODEL
    unconfined: bool = False  # --unconfined: Bash runs without Claude Code's sandbox
    allow_read: tuple[str, ...] = ()  # --allow-read: what task runs may read of the user's home
    ignore_globs: tuple[str, ...] = ()  # --ignore-path: changes there are nobody's
    cache: str | None = None  # --cache DIR: claude reaches the model through a caching proxy
    # several --claude-bin: `model @ version` -> its model, binary and version (the models above
    # are then these labels: every model runs on every version, side by side like a model matrix)
    variants: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    def variant(self, label: str) -> dict[str, Any]:
        """The ClaudeCliSettings fields of a model (or a version matrix's `model @ version`)."""
        if label not in self.variants:
            return {"model": label}
        model, binary, version = self.variants[label]
        return {"model": model, "binary": binary, "label": label, "version": version}

    @property
    def sandboxed(self) -> bool:
        """Whether task runs run Bash in Claude Code's sandbox."""
        return "Bash" in self.allow_tools and not self.unconfined

    @property
    def confined(self) -> bool:
        """Whether no run can write outside its project: no Bash, or Bash in the sandbox (file
        tools are kept to the project by permission rules, other runs have no tool that writes)."""
        return "Bash" not in self.allow_tools or not self.unconfined

    crowd: SkillCrowd | None = None  # --distractors: trigger runs at each step of the crowd

    def configurations(self, test: SkillTest) -> list[str]:
        """A task runs with the skill, and per baseline asked for; any other test once ("")."""
        if not test.is_task:
            return [""]
        return (
            ["with_skill"]
            + (["without_skill"] if self.baseline else [])
            + (["old_skill"] if self.baseline_skill else [])
        )

    def skill_under_test(self, test: SkillTest) -> str | None:
        return test.skill or (
            self.skills[0].name
            if len(self.skills) == 1
            else self.baseline_skill.name
            if self.baseline_skill
            else None
        )

    def skills_for(self, test: SkillTest, configuration: str) -> list[SkillInfo]:
        """What a configuration installs: every skill; the others without the one under test
        (none when no one skill is under test); the old version in its place."""
        target = self.skill_under_test(test)
        if configuration == "without_skill":
            return [s for s in self.skills if target and s.name != target]
        if configuration == "old_skill" and self.baseline_skill is not None:
            return [s for s in self.skills if s.name not in (target, self.baseline_skill.name)] + [
                self.baseline_skill
            ]
        return list(self.skills)

    @property
    def task_tests(self) -> list[SkillTest]:
        return [t for t in self.tests if t.is_task]

    def __post_init__(self) -> None:
        self.trigger_models = self.trigger_models or (self.trigger_settings.model,)
        self.test_models = self.test_models or (self.test_settings.model,)

    def trigger_jobs(self) -> list[tuple[str, int, float]]:
        """Unique queries -> (query, runs, timeout); a query in several tests runs once per run."""
        jobs: dict[str, tuple[int, float]] = {}
        for test in self.tests:
            if test.type != "trigger":
                continue
            runs = self.runs or test.runs or C.DEFAULT_TRIGGER_RUNS
            timeout = self.trigger_timeout or test.timeout
            for query in [*test.positive_triggers, *test.negative_triggers]:
                old_runs, old_timeout = jobs.get(query, (0, 0.0))
                jobs[query] = (max(runs, old_runs), max(timeout, old_timeout))
        return [(query, runs, timeout) for query, (runs, timeout) in jobs.items()]

    @property
    def other_tests(self) -> list[SkillTest]:
        return [t for t in self.tests if t.type != "trigger"]

    def test_runs(self, test: SkillTest) -> int:
        return self.runs or test.runs or 1


def plugin_hooks_text(subject: SkillInfo) -> list[str]:
    """A plugin's agent's runs also depend on its plugin's hooks (hooks/hooks.json), as read."""
    hooks = subject.plugin / "hooks" / "hooks.json" if subject.plugin is not None else None
    return (
        [hooks.read_text(encoding="utf-8", errors="replace")] if hooks and hooks.is_file() else []
    )


def _skill_suite_fingerprint(plan: SkillSuitePlan) -> str:
    """What makes an earlier run's records reusable: the same skills, models and turn limits."""
    parts: list[list[str | int]] = [
        [s.name, s.description, s.body, *plugin_hooks_text(s)] for s in plan.skills
    ]
    parts += [[c.model, c.max_turns] for c in (plan.trigger_settings, plan.test_settings)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def estimate_claude_runs(jobs: Sequence[Job]) -> CostEstimate:
    """Each `claude -p` call sends Claude Code's system prompt and tool definitions (cached after
    the first call of a run) plus the query; a typical trigger run takes two calls. Several models:
    each model's runs at its own price, and the sum."""
    by_model: dict[str, list[Job]] = {}
    for job in jobs:
        by_model.setdefault(job.payload[2].model, []).append(job)
    if len(by_model) > 1:
        return combined_estimate(
            [estimate_claude_runs(model_jobs) for model_jobs in by_model.values()]
        )
    expected = maximum = 0.0
    calls_expected = calls_max = 0
    model = ""
    for job in jobs:
        settings: ClaudeCliSettings = job.payload[2]
        model = cli_model_id(settings.model)
        typical = min(C.TYPICAL_CLAUDE_RUN_CALLS, settings.max_turns)
        for call in range(settings.max_turns):
            usage = Usage(
                input_tokens=C.TYPICAL_CLAUDE_QUERY_TOKENS + call * C.ESTIMATED_TOKENS_PER_TURN,
                output_tokens=C.ESTIMATED_OUTPUT_TOKENS,
                cache_creation_input_tokens=C.CLAUDE_CODE_PREFIX_TOKENS if call == 0 else 0,
                cache_read_input_tokens=0 if call == 0 else C.CLAUDE_CODE_PREFIX_TOKENS,
            )
            maximum += cost_usd(usage, model)
            expected += cost_usd(usage, model) if call < typical else 0.0
        calls_expected += typical
        calls_max += settings.max_turns
    detail = (
        f"each a `claude -p` run: about {C.CLAUDE_CODE_PREFIX_TOKENS:,} tokens of Claude Code's system prompt "
        f"and tools per call, {C.TYPICAL_CLAUDE_RUN_CALLS} calls in a typical run"
    )
    return CostEstimate(
        len(jobs),
        model or C.DEFAULT_TRIGGER_MODEL,
        calls_expected,
        calls_max,
        expected,
        maximum,
        detail,
    )


class SkillRunner:
    """`claude -p` runs, each in its own temporary project holding the skills: one job per
    trigger query and run, and per knowledge / task / security test and run."""

    def __init__(
        self, plan: SkillSuitePlan, ignore: Sequence[Path] = (), redactor: Redactor | None = None
    ) -> None:
        self.plan, self.ignore = plan, list(ignore)
        self.concurrency = plan.concurrency
        self.auto_threshold = plan.threshold  # --runs auto: a query or test passes at it
        self.redactor = redactor or Redactor.for_run()
        self.fingerprint = _skill_suite_fingerprint(plan)
        self.outside_writes: list[str] = []
        self.watched: list[str] = []
        self.task_fingerprints: dict[
            tuple, str
        ] = {}  # (test, run, model, configuration) -> its fingerprint
        self.judge: Judge | None = None
        self.judge_client: Any = None
        self.guarded = list(plan.skills) + ([plan.baseline_skill] if plan.baseline_skill else [])
        self.changed_elsewhere: list[str] = []
        self.proxy: CachingProxy | None = None  # --cache: started by session()
        # runs in flight, by their job's key: what a stop signal cuts short is recorded from them
        self.in_flight: dict[tuple, tuple[RunWatch, ClaudeCliSettings, str, str]] = {}
        if plan.artifacts is not None:
            self.ignore.append(plan.artifacts)

    def new_guard(self) -> OutsideWriteGuard:
        return OutsideWriteGuard(
            self.guarded, self.ignore, self.plan.ignore_globs, unconfined=not self.plan.confined
        )

    def task_fingerprint(self, test: SkillTest, configuration: str) -> str:
        """A task run's records are reusable when the suite, this configuration's skills, the
        eval (prompt, expectations, input files' contents) and the allowed tools are the same."""
        files = [
            [
                f.name,
                file_sha256(f)
                if f.is_file()
                else [[r, file_sha256(p)] for r, p in project_files(f)],
            ]
            for f in test.files
        ]
        parts = [
            self.fingerprint,
            configuration,
            [[s.name, s.description, s.body] for s in self.plan.skills_for(test, configuration)],
            test.expectations,
            test.expected_output,
            files,
            sorted(self.plan.allow_tools),
        ] + ([sorted(self.plan.allow_read)] if self.plan.allow_read else [])
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]

    def task_jobs(self, test: SkillTest, model: str) -> list[Job]:
        """A task: per configuration and run; the configuration is part of the key."""
        settings = replace(
            self.plan.test_settings,
            timeout=test.timeout,
            allow_tools=self.plan.allow_tools,
            allow_read=self.plan.allow_read,
            **self.plan.variant(model),
            sandbox=self.plan.sandboxed,
        )
        jobs = []
        for configuration in self.plan.configurations(test):
            fingerprint = self.task_fingerprint(test, configuration)
            for i in range(1, self.plan.test_runs(test) + 1):
                self.task_fingerprints[(test.name, i, model, configuration)] = fingerprint
                jobs.append(
                    Job(
                        (test.name, test.prompt, i, fingerprint, configuration, model),
                        (test.name, test.prompt, settings, i, (test, configuration)),
                        (test.name, i, model, configuration),
                        case=(test.name, model, configuration),
                        iteration=i,
                    )
                )
        return jobs

    def jobs(self) -> list[Job]:
        """Per query (or test), model and run; the model is part of the key."""
        jobs = []
        for query, runs, timeout in self.plan.trigger_jobs():
            for model in self.plan.trigger_models:
                settings = replace(
                    self.plan.trigger_settings, timeout=timeout, **self.plan.variant(model)
                )
                jobs += [
                    Job(
                        ("trigger", query, i, self.fingerprint, model),
                        ("trigger", query, settings, i),
                        ("trigger", query, i, model),
                        case=("trigger", query, model),
                        iteration=i,
                    )
                    for i in range(1, runs + 1)
                ]
        for test in self.plan.other_tests:
            for model in self.plan.test_models:
                if test.is_task:
                    jobs += self.task_jobs(test, model)
                    continue
                settings = replace(
                    self.plan.test_settings, timeout=test.timeout, **self.plan.variant(model)
                )
                jobs += [
                    Job(
                        (test.name, test.prompt, i, self.fingerprint, model),
                        (test.name, test.prompt, settings, i),
                        (test.name, i, model),
                        case=(test.name, model),
                        iteration=i,
                    )
                    for i in range(1, self.plan.test_runs(test) + 1)
                ]
        return jobs

    @asynccontextmanager
    async def session(self) -> Any:
        """The write guard fingerprints what runs must not touch before the first run, and
        compares after the last (the run's own outputs and journal excepted). A change is the
        runs' only when one could have made it; else it is another program's, and a warning."""
        guard = self.new_guard()
        graded = any(t.expectations for t in self.plan.task_tests)
        proxy = (
            CachingProxy(
                ResponseCache.open(self.plan.cache), model_api_url(self.plan.test_settings.base_url)
            )
            if self.plan.cache
            else None
        )
        try:
            if proxy is not None:
                self.proxy = proxy.__enter__()
            if (
                graded
            ):  # task evals' expectations: the judge, through the API like every other judge call
                self.judge_client = model_client(
                    self.plan.cache, base_url=self.plan.test_settings.base_url
                )
                self.judge = Judge(self.judge_client, self.plan.judge_model)
            yield guard
        finally:
            changes, self.watched = guard.changes(), guard.watched
            if self.plan.confined:
                self.changed_elsewhere = changes
            else:
                self.outside_writes = changes
            if self.judge_client is not None:
                await self.judge_client.close()
            if proxy is not None:
                proxy.__exit__(None, None, None)
                self.proxy = None

    def through_cache(self, settings: ClaudeCliSettings, run: int) -> ClaudeCliSettings:
        """--cache: the run's claude reaches the model through the caching proxy, as sample `run`."""
        if self.proxy is None:
            return settings
        return replace(settings, base_url=f"{self.proxy.url}/sample/{run}")

    def watch(
        self,
        job: Job,
        skills: Sequence[SkillInfo],
        settings: ClaudeCliSettings,
        configuration: str = "",
    ) -> RunWatch:
        """A run's output as it comes, kept until it ends (see under_way)."""
        label, query, _, run, *_ = job.payload
        watch = RunWatch(query, run, [s.name for s in skills])
        self.in_flight[job.key] = (watch, settings, label, configuration)
        return watch

    async def run(self, job: Job) -> ClaudeRun:
        label, query, settings, run, *more = job.payload
        settings = self.through_cache(settings, run)
        CACHE_SAMPLE.set(str(run))  # the judge's calls of this run: its sample
        if not more:
            watch = self.watch(job, self.plan.skills, settings)
            record = await run_claude_query(query, self.plan.skills, settings, run, watch=watch)
            del self.in_flight[job.key]
            record.test, record.model = label, settings.label or settings.model
            record.claude_version = settings.version or None
            return record
        test, configuration = more[0]
        artifacts = (
            self.plan.artifacts / safe_name(test.name) / configuration / f"run-{run}"
            if self.plan.artifacts is not None
            else None
        )
        if artifacts is not None and len(self.plan.test_models) > 1:
            artifacts = artifacts.parent / safe_name(settings.model) / artifacts.name
        setup = TaskSetup(
            files=list(test.files),
            artifacts=artifacts,
            guard=None if self.plan.confined else self.new_guard,
        )
        skills = self.plan.skills_for(test, configuration)
        watch = self.watch(job, skills, settings, configuration)
        record = await run_claude_query(query, skills, settings, run, setup, watch=watch)
        del self.in_flight[job.key]
        record.test, record.model, record.configuration = (
            label,
            settings.label or settings.model,
            configuration,
        )
        record.claude_version = settings.version or None
        if test.expectations and self.judge is not None:
            record.expectations, cost = await grade_expectations(self.judge, test, record)
            record.judge_cost_usd = round(cost, 6)
        return record

    def cost(self, record: ClaudeRun) -> float:
        return (record.total_cost_usd or 0.0) + record.judge_cost_usd

    def to_result(self, record: ClaudeRun) -> SkillRunResult:
        return skill_run_result(record, self.result_fingerprint(record))

    def result_fingerprint(self, record: ClaudeRun) -> str:
        """The suite's fingerprint, or a task run's own (its configuration's skills, its eval)."""
        return self.task_fingerprints.get(
            (record.test, record.run, record.model, record.configuration), self.fingerprint
        )

    def result_key(self, result: RunResult) -> tuple:
        if not isinstance(result, SkillRunResult):
            return ("foreign",)
        return (
            (result.test, result.query, result.run, result.fingerprint)
            + ((result.configuration,) if result.configuration else ())
            + (result.model,)
        )

    def from_result(self, job: Job, result: RunResult, scored: bool = False) -> ClaudeRun:
        if not isinstance(result, SkillRunResult):  # result_key keeps other kinds apart
            raise InputError(
                f"{job.key[0]!r}: the earlier result is not a claude -p run",
                hint="choose another -o",
            )
        return result  # a SkillRunResult is a ClaudeRun

    def under_way(self) -> list[tuple[tuple, ClaudeRun]]:
        """The runs a stop signal cut short, as `interrupted`, with what their answered calls
        spent (the activations they showed count as any failed run's do: see ClaudeRun.counted)."""
        cut = []
        for key, (watch, settings, label, configuration) in self.in_flight.items():
            record = watch.interrupted()
            record.test, record.model = label, settings.label or settings.model
            record.configuration, record.claude_version = configuration, settings.version or None
            cut.append((key, record))
        return cut

    async def estimate(self, jobs: Sequence[Job]) -> CostEstimate:
        estimate = estimate_claude_runs(jobs)
        for job in jobs:  # a task eval's run: one judge call per expectation
            if len(job.payload) > 4 and job.payload[4][0].expectations:
                test = job.payload[4][0]
                per_call = judge_estimate(
                    TestCase(
                        name=test.name,
                        prompt=test.prompt,
                        rubric=test.expectations[0] + test.expected_output,
                    ),
                    self.plan.judge_model,
                )
                calls = len(test.expectations)
                estimate.cost_expected += calls * per_call
                estimate.cost_max += calls * per_call
                estimate.calls_expected += calls
                estimate.calls_max += calls
        return estimate


def assign_trigger_skills(tests: Sequence[SkillTest], skills: Sequence[SkillInfo]) -> None:
    """Which skill each trigger test is about: its `skill:` key, the only skill, or the skill its
    name or file name starts with (`sql-helper-trigger.md`)."""
    names = sorted((s.name for s in skills), key=len, reverse=True)
    for test in tests:
        if test.type != "trigger":
            continue
        if test.skill:
            if test.skill not in names:
                raise InputError(
                    f"trigger test names skill {test.skill!r}, which is not among the --skill "
                    f"options ({', '.join(sorted(names))})",
                    test.source,
                    1,
                    f"add --skill path/to/{test.skill}",
                )
            continue
        if len(names) == 1:
            test.skill = names[0]
            continue
        stem = Path(test.source).stem
        test.skill = next((n for n in names if test.name.startswith(n) or stem.startswith(n)), None)
        if test.skill is None:
            json_file = Path(test.source).suffix.lower() == ".json"
            raise InputError(
                "trigger test does not say which of the skills it tests",
                test.source,
                1,
                'add "skill": "NAME" to its entries, or name the file NAME-evals.json'
                if json_file
                else "add `skill: NAME` to its frontmatter, or name the file NAME-trigger.md",
            )
