"""A finished run as every writer reads it (Results: its records, verdicts and sections), and
the run's metadata.

May import: the rooms above it (up to the runners)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import test_constants as C

from .cache import ResponseCache
from .files import JsonStream, dump_streamed, results_lines_path
from .options import writer_named
from .redaction import Redactor
from .results_schema.document import SECTIONS, Metadata, SummaryRecord, dump_record

__all__ = [
    "MODE_TITLES",
    "Results",
    "case_label",
    "gates",
    "is_matrix",
    "make_metadata",
    "models_text",
    "passes_text",
    "recorded_settings",
    "summary_record",
    "writer_named",
]

if TYPE_CHECKING:
    from .files import SpooledRecords
    from .pipeline import PipelineOutcome
    from .results_schema.document import CaseResult, RunResult, Section
    from .scoring.statistics import CaseCounts, RunTotals
    from .settings import ModelApi, Outputs, RunPlan


def summary_record(
    cases: CaseCounts, runs: RunTotals, threshold: float, outcome: PipelineOutcome
) -> SummaryRecord:
    """The whole run in numbers, from the counts of its cases and the totals of its runs."""
    return SummaryRecord(
        cases=cases.cases,
        passed=cases.passed,
        failed=cases.cases - cases.passed,
        flaky=cases.flaky,
        runs=runs.runs,
        run_errors=runs.errors,
        pass_rate=round(cases.passed / cases.cases, 4) if cases.cases else 0.0,
        threshold=threshold,
        usage=runs.usage,
        cost_usd=round(runs.cost, 6),
        latency_p50_ms=runs.latency.quantile(0.5),
        latency_p95_ms=runs.latency.quantile(0.95),
        tools=[s.record() for s in runs.tool_stats()],
        confusion=runs.confusion,
        not_started=outcome.not_started,
        interrupted=outcome.interrupted,
    )


# ============================================================================ 11. results: what every writer reads
def gates(case: CaseResult) -> bool:
    """Whether a case's failure fails the suite (the exit code and the results' `passed`): a
    baseline configuration (a task run without the skill, or with its old version; a plugin's
    case without the plugin) is reported beside it, and never fails the suite. Its verdict is
    still shown as it is, in JUnit too (a `gates: false` property says it does not count)."""
    return case.configuration in ("", "with_skill", "with_plugin")


def passes_text(
    passed: int, total: int, baseline_passed: int, baseline: int, what: str = ""
) -> str:
    """ "3/4 passed". Baseline configurations (a task eval without the skill) are counted apart:
    they never fail the suite, so "1/2 passed" above a passing run would mislead."""
    text = f"{passed - baseline_passed}/{total - baseline} {what}passed"
    if baseline:
        text += f"; the baseline {baseline_passed}/{baseline}, which never fails the suite"
    return text


def is_matrix(cases: Iterable[CaseResult]) -> bool:
    models: set[str | None] = set()
    for case in cases:
        models.add(case.model)
        if len(models) > 1:
            return True
    return False


@dataclass
class Results:
    """A finished (or interrupted) run as every writer sees it: the document's parts as typed
    records; the per-case verdicts and the per-run results streamed (after a run they are read
    back from spools: a 100,000-case suite is never held, as records or as JSON). `cases` reads
    like a list: iterate it (as often as needed), len() it; a writer keeps no more of it than
    what it writes."""

    metadata: Metadata
    passed: bool
    summary: SummaryRecord
    cases: Sequence[CaseResult] | SpooledRecords
    results: Callable[[], Iterable[RunResult]]
    result_count: int
    sections: dict[str, Any] = field(default_factory=dict)  # SECTIONS key -> its record(s)
    suite_name: str = "suite"
    redacted_by: Redactor | None = None  # set on the copy every sink reads (see redacted)
    clean: Results | None = field(default=None, repr=False, compare=False)

    def redacted(self) -> Results:
        """What every sink reads: a copy with every field redacted, labels (case names, prompts,
        descriptions, tags) included, the per-run results redacted as they stream. The runs were
        graded before: the verdicts are the unredacted runs'. Made once per set of secrets."""
        if self.redacted_by is not None:
            return self
        redactor = Redactor.for_run()
        if self.clean is not None and self.clean.redacted_by is redactor:
            return self.clean
        runs = self.results
        self.clean = replace(
            self,
            metadata=redactor.deep(self.metadata),
            summary=redactor.deep(self.summary),
            cases=redactor.deep(self.cases),
            results=lambda: map(redactor.deep, runs()),
            sections=redactor.deep(self.sections),
            suite_name=redactor.text(self.suite_name),
            redacted_by=redactor,
        )
        return self.clean

    def document(self) -> dict:
        """The results document with its per-case and per-run lists streamed (see dump_json)."""
        document: dict[str, Any] = {
            "schema_version": C.SCHEMA_VERSION,
            "metadata": dump_record(self.metadata),
            "passed": self.passed,
            "summary": dump_record(self.summary),
            "cases": JsonStream(lambda: map(dump_record, self.cases), len(self.cases)),
            "results": JsonStream(lambda: map(dump_record, self.results()), self.result_count),
        }
        for section in SECTIONS:
            value = self.sections.get(section.key)
            if value is not None:
                document[section.key] = dump_streamed(value)
        return document

    @functools.cached_property
    def matrix(self) -> bool:
        """A model matrix: a case per model (named NAME (MODEL) in the reports)."""
        return is_matrix(self.cases)

    @property
    def stopped_before_any_case(self) -> str | None:
        """Why no case ran, when the run stopped before the first (tool pins that changed), for
        the headlines: "0/0 cases passed" would say nothing."""
        security = self.sections.get("security")
        pins = getattr(security, "pins", None)
        if pins is not None and pins.failed and not self.summary.runs:
            return (
                f"stopped before any model call: {len(pins.changes)} tool definition(s) changed "
                f"since {pins.file} (--pin)"
            )
        return None

    @functools.cached_property
    def headline_count(self) -> str:
        """ "3/4 cases passed", or why no case ran (passes_text). Every headline (the report, the
        step summary, the comment) reads it: the cases are counted once."""
        stopped = self.stopped_before_any_case
        if stopped:
            return stopped
        baseline = passed = 0
        for case in self.cases:
            if not gates(case):
                baseline, passed = baseline + 1, passed + case.passed
        return passes_text(self.summary.passed, self.summary.cases, passed, baseline, "cases ")

    def shown(self, place: str) -> list[tuple[Section, Any]]:
        """The sections this run has that the reports show at `place`, in SECTIONS' order."""
        return [
            (section, self.sections[section.key])
            for section in SECTIONS
            if section.place == place and self.sections.get(section.key) not in (None, [])
        ]


# Options that do not shape a run's results (how fast, on which machine, where from): shards of one
# suite may differ in them, and in the writers (see Writer.recorded); every other option a shard
# was given is recorded for --merge.
_UNRECORDED_OPTIONS = frozenset(
    {
        "resume",
        "retry_errors",
        "dry_run",
        "concurrency",
        "shard",
        "merge",
        "summary_only",
        "base_url",
        "claude_bin",
        "max_retries",
        "request_timeout",
        "max_cost",
        "record",
        "artifacts",
    }
)


def recorded_settings(given: Mapping[str, Any]) -> dict[str, Any]:
    """What a shard records of the options it was given (`given`: each given option's value by
    name, as Settings.given_values says them): the flat `settings` of the results metadata, which
    --merge holds the pieces to and rebuilds their settings from."""
    recorded: dict[str, Any] = {}
    for name, value in sorted(given.items()):
        writer = writer_named(name)
        if name in _UNRECORDED_OPTIONS or (writer is not None and not writer.recorded):
            continue
        recorded[name] = list(value) if isinstance(value, tuple) else value
    return Redactor.for_run().data(recorded)


def _scale_metadata(
    api: ModelApi,
    trigger_models: Sequence[str],
    plan: RunPlan,
    merge: Sequence[str],
    given: Mapping[str, Any],
    outcome: PipelineOutcome,
) -> dict[str, Any]:
    """The metadata of a model matrix (every model) and of a shard (which share of which suite,
    and the options it ran with, redacted like everything else)."""
    found: dict[str, Any] = {}
    if len(api.models) > 1:
        found["models"] = list(api.models)
    if len(trigger_models) > 1:
        found["trigger_models"] = list(trigger_models)
    if plan.shard or merge:
        found["suite_hash"] = outcome.suite_hash or None
        found["settings"] = recorded_settings(given)
    if plan.shard:
        found["shard"] = f"{plan.shard[0]}/{plan.shard[1]}"
    if merge:
        found["merged_from"] = list(merge)
    return found


def make_metadata(
    mode: str,
    result_count: int,
    outcome: PipelineOutcome,
    *,
    api: ModelApi,
    plan: RunPlan,
    outputs: Outputs,
    given: Mapping[str, Any],
    trigger_models: Sequence[str] = (),
    merge: Sequence[str] = (),
    interactive: bool = False,
    **extra: Any,
) -> Metadata:
    """The results' metadata: the run (`mode`, its wall time, how it ended) and what of the
    settings shaped it (`given`: the options given, by name: a shard records them)."""
    return Metadata(
        total_results=result_count,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        mode="interactive" if interactive else "batch",
        evaluation=mode,
        model=api.model,
        iterations=plan.iterations,
        suite_wall_time_s=round(outcome.wall_time_s, 3),
        interrupted=outcome.interrupted,
        threshold=plan.threshold,
        batch_api=plan.batch,
        auto_runs=list(plan.auto_runs) if plan.auto_runs else None,
        cache=ResponseCache.open(plan.cache).record() if plan.cache else None,
        results_file=str(results_lines_path(outputs.output))
        if outputs.summary_only and outputs.output
        else None,
        **_scale_metadata(api, trigger_models, plan, merge, given, outcome),
        **extra,
    )


def case_label(case: CaseResult, matrix: bool) -> str:
    """A case as the reports name it: with its model when a model matrix has one per model."""
    return f"{case.name} ({case.model})" if matrix and case.model else case.name


MODE_TITLES = {
    "query": "Tool-use evaluation",
    "csv": "Tool-use evaluation",
    "markdown": "Markdown tests",
    "skills": "Skill evaluation",
    "qa": "QA evaluation",
    "optimize": "The best candidate's runs",
    "overlap": "Skill overlap",
    "redteam": "Red team",
    "scan": "Tool definition scan",
    "plugin": "Plugin evaluation",
    "calibrate": "Judge calibration",
}


def models_text(meta: Metadata) -> str:
    """The model(s) a run used, as its reports name them (every model of a model matrix)."""
    tested = ", ".join(meta.models) if meta.models else meta.model
    if meta.evaluation != "skills":
        return tested
    triggers = ", ".join(meta.trigger_models) if meta.trigger_models else meta.trigger_model
    return f"{triggers} (triggers), {', '.join(meta.models) if meta.models else meta.test_model} (tests)"
