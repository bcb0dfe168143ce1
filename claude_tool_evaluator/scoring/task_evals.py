"""Task evals: the benchmark of configurations (with and without the skill) as skill-creator
reports it: pass rates, time and tokens, and their deltas.

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import test_constants as C

from ..results_schema.document import (
    BenchmarkRecord,
    ConfigurationStatsRecord,
    DeltaRecord,
    EvalBenchmarkRecord,
    ExpectationTallyRecord,
    StatRecord,
)
from ..run_types import USAGE_FIELDS
from .skills import score_test_run

__all__ = [
    "run_tokens",
    "task_benchmark",
    "trigger_test_passed",
]

if TYPE_CHECKING:
    from ..results_schema.document import ClaudeRun
    from ..run_types import SkillTest, TriggerScore


def _stat_of(values: Sequence[float]) -> StatRecord:
    """mean ± sample standard deviation (skill-creator's aggregate_benchmark.py: n-1, 0 for one run)."""
    if not values:
        return StatRecord()
    mean = sum(values) / len(values)
    stddev = (
        (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
        if len(values) > 1
        else 0.0
    )
    return StatRecord(
        mean=round(mean, 4),
        stddev=round(stddev, 4),
        min=round(min(values), 4),
        max=round(max(values), 4),
    )


def run_tokens(record: ClaudeRun) -> int:
    """Every token the run's calls processed: input, output, cache writes and cache reads."""
    usage = record.usage or {}
    return sum(
        int(usage.get(k) or 0) for k in USAGE_FIELDS if isinstance(usage.get(k) or 0, (int, float))
    )


def _run_pass_rate(test: SkillTest, record: ClaudeRun) -> float:
    """Expectations passed / total in this run; a test without expectations: 1 when its run passed."""
    score = score_test_run(test, record)
    if test.expectations:
        return (
            score.get("expectations_passed", 0) / len(test.expectations)
            if "error" not in score
            else 0.0
        )
    return 1.0 if score.get("passed") else 0.0


def _configuration_stats(
    test_runs: Sequence[tuple[SkillTest, ClaudeRun]], configuration: str, model: str
) -> ConfigurationStatsRecord:
    passed = sum(sum(1 for e in r.expectations if e.get("passed") is True) for t, r in test_runs)
    return ConfigurationStatsRecord(
        configuration=configuration,
        model=model,
        runs=len(test_runs),
        errored_runs=sum(1 for _, r in test_runs if r.error),
        expectations_passed=passed,
        expectations_total=sum(len(t.expectations) for t, _ in test_runs),
        pass_rate=_stat_of([_run_pass_rate(t, r) for t, r in test_runs]),
        time_seconds=_stat_of([r.latency_ms / 1000 for _, r in test_runs]),
        tokens=_stat_of([float(run_tokens(r)) for _, r in test_runs]),
        cost_usd=_stat_of([float(r.total_cost_usd or 0.0) for _, r in test_runs]),
    )


def _deltas_of(stats: Sequence[ConfigurationStatsRecord]) -> list[DeltaRecord]:
    """with_skill − each baseline there is, per model."""
    out = []
    for primary in (s for s in stats if s.configuration == "with_skill"):
        for base in (
            s for s in stats if s.configuration != "with_skill" and s.model == primary.model
        ):
            out.append(
                DeltaRecord(
                    baseline=base.configuration,
                    model=primary.model,
                    pass_rate=round(primary.pass_rate.mean - base.pass_rate.mean, 4),
                    time_seconds=round(primary.time_seconds.mean - base.time_seconds.mean, 4),
                    tokens=round(primary.tokens.mean - base.tokens.mean, 4),
                    cost_usd=round(primary.cost_usd.mean - base.cost_usd.mean, 6),
                )
            )
    return out


def task_benchmark(
    tests: Sequence[SkillTest],
    records: Sequence[ClaudeRun],
    models: Sequence[str],
    runs_per_configuration: int,
    judge_model: str = "",
) -> BenchmarkRecord:
    """The task tests' runs side by side: per configuration (and model, with several) over every
    eval, with the deltas; and the same per eval, with each expectation's tally."""
    by_name = {t.name: t for t in tests}
    runs = [(by_name[r.test], r) for r in records if r.configuration and r.test in by_name]
    shown_model = (lambda m: m) if len(models) > 1 else (lambda m: "")
    configurations = [
        c for c in C.TASK_CONFIGURATIONS if any(r.configuration == c for _, r in runs)
    ]

    def stats_for(pairs: Sequence[tuple[SkillTest, ClaudeRun]]) -> list[ConfigurationStatsRecord]:
        return [
            _configuration_stats(chosen, c, shown_model(m))
            for m in models
            for c in configurations
            if (
                chosen := [(t, r) for t, r in pairs if r.configuration == c and (r.model or m) == m]
            )
        ]

    overall = stats_for(runs)
    evals = []
    for test in tests:
        pairs = [(t, r) for t, r in runs if t.name == test.name]
        if not pairs:
            continue
        tallies = []
        for text in test.expectations:
            tally = ExpectationTallyRecord(text=text)
            for _, record in pairs:
                verdict = next((e for e in record.expectations if e.get("text") == text), None)
                c = record.configuration
                tally.runs[c] = tally.runs.get(c, 0) + 1
                tally.passed[c] = tally.passed.get(c, 0) + (
                    1 if verdict and verdict.get("passed") is True else 0
                )
                if verdict and (verdict.get("evidence") or verdict.get("error")):
                    tally.evidence[c] = str(verdict.get("evidence") or verdict.get("error"))
            tallies.append(tally)
        stats = stats_for(pairs)
        evals.append(
            EvalBenchmarkRecord(
                name=test.name,
                eval_id=test.eval_id,
                prompt=test.prompt,
                expected_output=test.expected_output,
                configurations=stats,
                deltas=_deltas_of(stats),
                expectations=tallies,
            )
        )
    skill_names = sorted({t.skill for t in tests if t.skill})
    return BenchmarkRecord(
        skill_name=", ".join(skill_names),
        runs_per_configuration=runs_per_configuration,
        judge_model=judge_model,
        configurations=overall,
        deltas=_deltas_of(overall),
        evals=evals,
    )


def trigger_test_passed(
    test: SkillTest, scores: Sequence[TriggerScore], min_score: float | None
) -> bool:
    """With --min-trigger-score, a trigger test passes when its skill's triggerScore reaches it;
    without, when every one of its queries got the right verdict."""
    score = next((s for s in scores if s.skill == test.skill), None)
    if score is None:
        return False
    if min_score is not None:
        return score.trigger_score >= min_score
    own = {*test.positive_triggers, *test.negative_triggers}
    return all(q.correct for q in score.query_results if q.query in own and not q.routing)
