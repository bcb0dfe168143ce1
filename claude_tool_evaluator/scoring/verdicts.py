"""Verdicts over runs: case results from runs, a model matrix, and what a run cost.

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import test_constants as C

from ..files import SpooledRecords, spooled_into
from ..results_schema.document import CaseResult
from ..results_schema.sections import (
    MatrixCaseRecord,
    MatrixCellRecord,
    MatrixToolCellRecord,
    MatrixToolRecord,
    ModelMatrixRecord,
    ModelSummaryRecord,
)
from ..run_types import Usage, cli_model_id, price_for
from .statistics import (
    CaseCounts,
    RunTotals,
    pass_at_k,
    pass_hat_k,
    rounded_interval,
    wilson_interval,
)

__all__ = [
    "case_result_from_query",
    "case_result_from_summary",
    "case_result_from_test",
    "claude_run_usage",
    "model_matrix",
    "run_score_reasons",
]

if TYPE_CHECKING:
    from ..results_schema.document import ClaudeRun, SkillTestResult
    from ..run_types import SkillTest, TriggerQueryResult
    from .statistics import CaseSummary


def case_result_from_summary(summary: CaseSummary, group: str, seconds: float) -> CaseResult:
    return CaseResult(
        name=summary.name,
        kind="case",
        group=group,
        passed=summary.passed,
        error=summary.errors == summary.runs and summary.runs > 0,
        runs=summary.runs,
        passes=summary.passes,
        errors=summary.errors,
        pass_rate=round(summary.pass_rate, 4),
        interval=rounded_interval(summary.interval),
        pass_at_k=round(summary.pass_at_k, 4),
        pass_hat_k=round(summary.pass_hat_k, 4),
        flaky=summary.flaky,
        reasons=summary.reasons,
        prompt=summary.prompt,
        description=summary.description,
        cost_usd=summary.cost_usd,
        seconds=round(seconds, 3),
        tags=summary.tags,
        source=summary.source,
        line=summary.line,
    )


def run_score_reasons(test: SkillTest, score: dict) -> list[str]:
    """Why one run of a knowledge / task / security test failed, as reasons."""
    if "error" in score:
        return [f"run failed: {score['error']}"]
    if score.get("passed"):
        return []
    graded = list(score.get("graded") or [])  # the outcome checks of a tool-use run (judge, verify)
    unmet = [f"expectation not met: {text}" for text in score.get("failed_expectations") or []]
    if "coverage" in score:
        low = score["coverage"] < C.DEFAULT_CONCEPT_PASS_RATE - 1e-9 or not (
            score.get("answer") or graded or unmet
        )
        return (
            (
                [
                    f"concept coverage {score['coverage']:.0%} below {C.DEFAULT_CONCEPT_PASS_RATE:.0%}"
                    + (f"; missed: {', '.join(score['missed'][:5])}" if score.get("missed") else "")
                ]
                if low
                else []
            )
            + list(score.get("answer") or [])
            + graded
            + unmet
        )
    reasons = [f"forbidden pattern in the answer: {p}" for p in score.get("leaked", [])]
    reasons += [f"forbidden pattern check skipped: {u}" for u in score.get("unchecked", [])]
    return (
        reasons + (["the answer did not refuse"] if score.get("refused") is False else []) + graded
    )


def case_result_from_test(
    result: SkillTestResult, group: str, cost: float, seconds: float
) -> CaseResult:
    """A knowledge / task / security test: it passes when half of its completed runs pass."""
    scores = result.run_scores
    passes = sum(1 for s in scores if s.get("passed"))
    errors = sum(1 for s in scores if "error" in s)
    reasons: dict[str, int] = {}
    for score in scores:
        for reason in run_score_reasons(result.test, score):
            reasons[reason] = reasons.get(reason, 0) + 1
    runs = len(scores)
    return CaseResult(
        name=result.test.name,
        kind="test",
        group=group,
        passed=result.passed,
        error=bool(result.error),
        runs=runs,
        passes=passes,
        errors=errors,
        pass_rate=round(passes / runs, 4) if runs else 0.0,
        interval=rounded_interval(wilson_interval(passes, runs)),
        pass_at_k=round(pass_at_k(runs, passes, runs), 4) if runs else 0.0,
        pass_hat_k=round(pass_hat_k(runs, passes, runs), 4) if runs else 0.0,
        flaky=0 < passes < runs,
        reasons=reasons,
        prompt=result.test.prompt,
        description=result.test.type,
        cost_usd=round(cost, 6),
        seconds=round(seconds, 3),
        source=result.test.source,
        line=result.test.line,
    )


def case_result_from_query(q: TriggerQueryResult, cost: float, seconds: float) -> CaseResult:
    """A trigger query for one skill: passes when its activation rate is on the right side of
    the threshold; `passes` counts the runs that did what the query expects."""
    right = q.right_runs
    wrong = "activated" if q.expected == "ignore" else "did not activate"
    missed = q.activations if q.expected == "ignore" else q.runs - q.activations
    activated_right = (q.actual == "activated") == (q.expected == "activate")
    reasons = (
        {}
        if q.correct
        else {"every run errored": q.errors}
        if q.actual == "error"
        else {f"expected to {q.expected}, but {wrong}": missed}
        if not activated_right
        else {}
    )
    if not q.correct:
        reasons.update(q.routing_failures)
    return CaseResult(
        name=f"{q.skill}: {q.query}",
        kind="trigger_query",
        group=q.skill,
        passed=q.correct,
        error=q.actual == "error",
        runs=q.runs + q.errors,
        passes=right,
        errors=q.errors,
        pass_rate=round(right / q.runs, 4) if q.runs else 0.0,
        interval=rounded_interval(wilson_interval(right, q.runs)),
        flaky=0 < right < q.runs,
        reasons=reasons,
        prompt=q.query,
        description=q.expected + (" (routing)" if q.routing else ""),
        cost_usd=round(cost, 6),
        seconds=round(seconds, 3),
        source=q.source,
    )


def _matrix_row(cases: Sequence[CaseResult], models: Sequence[str]) -> MatrixCaseRecord:
    """One case side by side: its verdict on each model it ran on."""
    first = cases[0]
    row = MatrixCaseRecord(name=first.name, kind=first.kind, group=first.group)
    for case in cases:
        row.models[case.model or ""] = MatrixCellRecord(
            passed=case.passed,
            error=case.error,
            passes=case.passes,
            runs=case.runs,
            pass_rate=case.pass_rate,
            cost_usd=case.cost_usd,
            mean_latency_ms=round(case.seconds * 1000 / case.runs, 2) if case.runs else 0.0,
        )
    row.passed_on = [m for m in models if m in row.models and row.models[m].passed]
    row.failed_on = [m for m in models if m in row.models and not row.models[m].passed]
    row.disagree = bool(row.passed_on and row.failed_on)
    return row


def _matrix_model_summary(
    model: str, mine: CaseCounts, totals: RunTotals | None
) -> ModelSummaryRecord:
    """One model's line of a matrix: its cases' verdicts, its runs' usage, cost and latency."""
    totals = totals or RunTotals()
    price, priced = price_for(cli_model_id(model))
    return ModelSummaryRecord(
        model=model,
        cases=mine.cases,
        passed=mine.passed,
        pass_rate=round(mine.passed / mine.cases, 4) if mine.cases else 0.0,
        runs=totals.runs,
        run_errors=totals.errors,
        usage=totals.usage,
        cost_usd=round(totals.cost, 6),
        latency_p50_ms=totals.latency.quantile(0.5),
        latency_p95_ms=totals.latency.quantile(0.95),
        price=dict(price),
        priced=priced,
    )


def _matrix_tool_rows(
    models: Sequence[str], per_model: Mapping[str, RunTotals]
) -> dict[str, MatrixToolRecord]:
    """Per tool, each model's calls, mean duration and selection scores (tool-use modes)."""
    tool_rows: dict[str, MatrixToolRecord] = {}
    for model in models:
        totals = per_model.get(model, RunTotals())
        for name in sorted({*totals.tools, *totals.durations}):
            s, (calls, total) = totals.tools.get(name), totals.durations.get(name, [0, 0.0])
            tool_rows.setdefault(name, MatrixToolRecord(tool=name)).models[model] = (
                MatrixToolCellRecord(
                    calls=int(calls),
                    mean_ms=round(total / calls, 2) if calls else 0.0,
                    precision=round(s.precision, 4) if s else None,
                    recall=round(s.recall, 4) if s else None,
                    f1=round(s.f1, 4) if s else None,
                )
            )
    return tool_rows


def model_matrix(
    cases: Iterable[CaseResult], runs: RunTotals, counts: CaseCounts, models: Sequence[str]
) -> ModelMatrixRecord:
    """The side-by-side view of a model matrix, from the verdicts every writer reads (`cases`,
    one per case and model, a case's models next to each other), and each model's run totals
    (per model: usage, cost, latency; in tool-use modes its tool selection scores and its calls'
    durations per tool). The rows go to a spool, as the cases do: one in memory at a time."""
    rows = SpooledRecords(MatrixCaseRecord)
    disagreements = []
    for _, grouped in itertools.groupby(cases, key=lambda c: (c.kind, c.name)):
        row = _matrix_row(list(grouped), models)
        rows.append(row)
        if row.disagree:
            disagreements.append(row.name)
    per_model = runs.models or {}
    summaries = [
        _matrix_model_summary(model, counts.models.get(model, CaseCounts()), per_model.get(model))
        for model in models
    ]
    tool_rows = _matrix_tool_rows(models, per_model)
    matrix = ModelMatrixRecord(
        models=list(models),
        summaries=summaries,
        tools=[tool_rows[name] for name in sorted(tool_rows)],
        disagreements=disagreements,
    )
    spooled_into(matrix, "cases", rows)
    return matrix


def claude_run_usage(record: ClaudeRun) -> Usage:
    return Usage.from_api(record.usage or {})
