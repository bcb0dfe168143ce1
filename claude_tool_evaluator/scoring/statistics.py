"""Statistics over runs: Wilson and Newcombe intervals, Fisher's exact test with Holm's
correction, runs to detect a change, bootstrap, pass@k and pass^k, -i auto's decision, and the
totals of a suite.

May import: the rooms above scoring, scoring.tool_use."""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import test_constants as C

from ..hub.calls import CALL_SOURCES
from ..loaders.csv_suites import CsvSuite
from ..results_schema.document import ToolCoverageRecord, ToolStatsRecord
from ..run_types import Usage

__all__ = [
    "CaseCounts",
    "CaseSummary",
    "RunTotals",
    "auto_decided",
    "bootstrap_difference",
    "case_counts",
    "detectable_change",
    "fewest_deciding_runs",
    "fisher_p_value",
    "holm_adjusted",
    "holm_levels",
    "newcombe_interval",
    "pass_at_k",
    "pass_hat_k",
    "percentile",
    "preload_scipy_stats",
    "rounded_interval",
    "runs_to_decide",
    "runs_to_detect",
    "shifted_rate",
    "summarize_case",
    "tool_coverage",
    "tool_selection_stats",
    "tools_expected",
    "wilson_interval",
]

if TYPE_CHECKING:
    from ..results_schema.document import CaseResult
    from ..run_types import TestCase, Transcript, Verdict


def wilson_interval(successes: int, runs: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a pass rate: honest even for 0/3 or 5/5."""
    if runs == 0:
        return 0.0, 1.0
    p = successes / runs
    denominator = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denominator
    half = z * ((p * (1 - p) / runs + z * z / (4 * runs * runs)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def rounded_interval(interval: tuple[float, float]) -> tuple[float, float]:
    """An interval as the results records keep it: to 4 places."""
    low, high = interval
    return round(low, 4), round(high, 4)


# Is a change real? Compare's statistics and the run counts that decide. The exact test and the
# bootstrap are scipy's (imported when a comparison needs them: no other mode pays for it); the
# Newcombe interval, Holm's step-down and the textbook sample size are a few lines each on top of
# the Wilson interval above, where statsmodels would bring pandas and patsy for them.
def _z_for(alpha: float) -> float:
    """The two-sided normal quantile of a significance level (1.96 for 0.05)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - alpha / 2)


def newcombe_interval(
    old_successes: int, old_runs: int, new_successes: int, new_runs: int, alpha: float = 0.05
) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) of new rate − old rate, from the two
    Wilson intervals: honest for small counts and rates of 0 or 1."""
    z = _z_for(alpha)
    p1, p2 = old_successes / old_runs, new_successes / new_runs
    low1, high1 = wilson_interval(old_successes, old_runs, z)
    low2, high2 = wilson_interval(new_successes, new_runs, z)
    difference = p2 - p1
    return (
        max(-1.0, difference - ((p2 - low2) ** 2 + (high1 - p1) ** 2) ** 0.5),
        min(1.0, difference + ((high2 - p2) ** 2 + (p1 - low1) ** 2) ** 0.5),
    )


def preload_scipy_stats() -> None:
    """scipy.stats imported now in a daemon thread: its import takes a second or more of CPU
    (several under load), and a mode that reports Fisher's p after minutes of waiting on Claude
    Code would otherwise pay it at its end, when nothing else is left to overlap it. numpy comes
    first, here in the calling thread: its import sets and deletes variables of os.environ, which
    would race a thread copying the environment for a child (a KeyError seen). A failed import is
    left for fisher_p_value to meet (and say) where it always did."""
    import sys
    import threading

    if "scipy.stats" in sys.modules:
        return
    try:
        import numpy  # noqa: F401
    except ImportError:
        return

    def load() -> None:
        with contextlib.suppress(Exception):
            import scipy.stats  # noqa: F401

    threading.Thread(target=load, name="preload-scipy-stats", daemon=True).start()


def fisher_p_value(old_successes: int, old_runs: int, new_successes: int, new_runs: int) -> float:
    """Fisher's exact test, two-sided: the chance of a table at most as likely as this one when
    both rates are the same (scipy)."""
    from scipy.stats import fisher_exact

    table = [
        [old_successes, old_runs - old_successes],
        [new_successes, new_runs - new_successes],
    ]
    return float(fisher_exact(table).pvalue)


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down correction: the i-th smallest of m p-values times (m − i + 1), kept
    non-decreasing and at most 1. A case is significant when its adjusted p is below alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """The level Holm's step-down tests each p-value at: alpha / (m − rank), rank counted from
    the smallest of the m p-values (0 for it: Bonferroni's alpha / m) and shared by tied
    p-values (the first rank of the tie). A p-value's Holm-adjusted p is below alpha only when
    it is itself below its level, so an interval and a run count at this level tell the same
    story as the adjusted p."""
    import math

    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    levels, first = [alpha] * m, 0
    for rank, index in enumerate(order):
        if rank and not math.isclose(p_values[index], p_values[order[rank - 1]], rel_tol=1e-9):
            first = rank
        levels[index] = alpha / (m - first)
    return levels


def runs_to_detect(
    old_rate: float, new_rate: float, alpha: float = 0.05, power: float = C.PLAN_POWER
) -> int | None:
    """Runs per side that detect this difference of two rates with this power (a two-sided test
    at alpha): the textbook normal-approximation sample size, (z_a·√(2·p̄q̄) + z_b·√(p1q1 + p2q2))²
    / (p1 − p2)². None when the rates are equal (nothing to detect)."""
    from statistics import NormalDist

    if abs(old_rate - new_rate) < 1e-12:
        return None
    mean = (old_rate + new_rate) / 2
    z_beta = NormalDist().inv_cdf(power)
    spread = (
        _z_for(alpha) * (2 * mean * (1 - mean)) ** 0.5
        + z_beta * (old_rate * (1 - old_rate) + new_rate * (1 - new_rate)) ** 0.5
    )
    return max(1, int(-(-(spread**2) // ((old_rate - new_rate) ** 2))))


def fewest_deciding_runs(alpha: float) -> int:
    """The fewest runs per side at which Fisher's exact test can call any change significant:
    n/n against 0/n has the two-sided p of 2 / C(2n, n)."""
    from math import comb

    return next(n for n in range(1, 1000) if 2 / comb(2 * n, n) < alpha)


def runs_to_decide(
    old_rate: float, new_rate: float, level: float, runs_made: int = 0
) -> int | None:
    """Runs per side that would decide a change of this size at this level (a case's Holm level):
    the textbook size (80 % power), never fewer than Fisher's exact test needs to call even a
    complete flip significant at the level, and more than `runs_made` (the runs a side already
    made that did not decide it: so many would not). None when the rates are equal."""
    runs = runs_to_detect(old_rate, new_rate, level)
    if runs is None:
        return None
    return max(runs, fewest_deciding_runs(level), runs_made + 1)


def shifted_rate(rate: float, change: float) -> float:
    """The rate a change of this size moves to: a drop, or a rise when there is no room below."""
    return rate - change if rate - change >= 0 else min(1.0, rate + change)


def detectable_change(
    rate: float, runs: int, alpha: float = 0.05, power: float = C.PLAN_POWER
) -> float:
    """The smallest change from this rate that so many runs per side detect with this power."""
    low, high = 1e-4, max(rate, 1 - rate)
    if (runs_to_detect(rate, shifted_rate(rate, high), alpha, power) or 0) > runs:
        return high
    for _ in range(40):
        middle = (low + high) / 2
        needed = runs_to_detect(rate, shifted_rate(rate, middle), alpha, power) or 0
        low, high = (low, middle) if needed <= runs else (middle, high)
    return high


def bootstrap_difference(
    old: Sequence[float], new: Sequence[float], alpha: float = 0.05
) -> tuple[float, float] | None:
    """A percentile bootstrap interval of mean(new) − mean(old) (scipy, seeded: the same files
    give the same interval); None with fewer than two values on a side."""
    if len(old) < 2 or len(new) < 2:
        return None
    import numpy
    from scipy.stats import bootstrap

    def difference(a: Any, b: Any, axis: int = -1) -> Any:
        return numpy.mean(b, axis=axis) - numpy.mean(a, axis=axis)

    found = bootstrap(
        (list(old), list(new)),
        difference,
        vectorized=True,
        paired=False,
        confidence_level=1 - alpha,
        n_resamples=C.BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=numpy.random.default_rng(C.BOOTSTRAP_SEED),
    )
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def pass_at_k(runs: int, successes: int, k: int) -> float:
    """Chance that at least one of k runs drawn from these passes (the unbiased estimator)."""
    from math import comb

    if runs - successes < k:
        return 1.0
    return 1.0 - comb(runs - successes, k) / comb(runs, k)


def pass_hat_k(runs: int, successes: int, k: int) -> float:
    """Chance that all k runs drawn from these pass (pass^k)."""
    from math import comb

    return comb(successes, k) / comb(runs, k) if k <= runs else 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def auto_decided(passes: int, runs: int, cap: int, threshold: float) -> bool:
    """-i auto: whether a case's verdict is settled: its 95 % Wilson interval lies wholly on one
    side of the threshold, or no outcome of its remaining runs up to the cap could change it
    (with --threshold 1 one failed run settles it; a case that keeps passing runs to the cap)."""
    if runs == 0:
        return False
    low, high = wilson_interval(passes, runs, C.AUTO_CONFIDENCE_Z)
    if low >= threshold or high < threshold - 1e-9:
        return True
    remaining = max(0, cap - runs)
    settled_fail = (passes + remaining) / (runs + remaining) < threshold - 1e-9
    settled_pass = passes / (runs + remaining) >= threshold - 1e-9
    return settled_fail or settled_pass or remaining == 0


@dataclass(slots=True)
class CaseSummary:
    """A case over all its runs."""

    name: str
    runs: int
    passes: int
    errors: int
    pass_rate: float
    interval: tuple[float, float]
    pass_at_k: float
    pass_hat_k: float
    flaky: bool
    passed: bool
    reasons: dict[str, int]  # failure reason -> how many runs gave it
    description: str = ""
    prompt: str = ""
    cost_usd: float = 0.0  # all runs of the case together
    tags: list[str] = field(default_factory=list)
    source: str = ""  # the file the case is written in, and its line there
    line: int = 0


def summarize_case(
    case: TestCase, verdicts: Sequence[Verdict], transcripts: Sequence[Transcript], threshold: float
) -> CaseSummary:
    runs, passes = len(verdicts), sum(v.passed for v in verdicts)
    reasons: dict[str, int] = {}
    for verdict in verdicts:
        for reason in verdict.reasons:
            reasons[reason] = reasons.get(reason, 0) + 1
    rate = passes / runs if runs else 0.0
    return CaseSummary(
        case.name,
        runs,
        passes,
        sum(1 for t in transcripts if t.error),
        rate,
        wilson_interval(passes, runs),
        pass_at_k(runs, passes, runs),
        pass_hat_k(runs, passes, runs),
        flaky=0 < passes < runs,
        passed=runs > 0 and rate >= threshold - 1e-9,
        reasons=reasons,
        description=case.description,
        prompt=case.prompt,
        cost_usd=round(sum(t.cost_usd for t in transcripts), 6),
        tags=list(case.tags),
        source=case.source,
        line=case.line,
    )


@dataclass
class _ToolStats:
    tool: str
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0

    @property
    def precision(self) -> float:
        called = self.true_positives + self.false_positives
        return self.true_positives / called if called else 1.0

    @property
    def recall(self) -> float:
        expected = self.true_positives + self.false_negatives
        return self.true_positives / expected if expected else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def record(self) -> ToolStatsRecord:
        """As the results file keeps it (rates to four places)."""
        return ToolStatsRecord(
            tool=self.tool,
            true_positives=self.true_positives,
            false_positives=self.false_positives,
            false_negatives=self.false_negatives,
            precision=round(self.precision, 4),
            recall=round(self.recall, 4),
            f1=round(self.f1, 4),
        )


class _LatencyQuantiles:
    """Quantiles of run latencies: exact (every value kept, 8 bytes each) up to
    C.EXACT_QUANTILE_RUNS runs; past that the values go into log-spaced buckets
    C.QUANTILE_BUCKET_RATIO wide, and a quantile is read from its bucket's geometric middle (within
    1 % of the exact one), so a suite of any size keeps a bounded count of numbers."""

    def __init__(self) -> None:
        self.values: array | None = array("d")
        self.buckets: dict[int, int] = {}
        self.count = 0

    def add(self, value: float) -> None:
        self.count += 1
        if self.values is None:
            self.bucket(value)
            return
        self.values.append(value)
        if len(self.values) > C.EXACT_QUANTILE_RUNS:
            for kept in self.values:
                self.bucket(kept)
            self.values = None

    def bucket(self, value: float) -> None:
        import math

        key = math.floor(math.log(value, C.QUANTILE_BUCKET_RATIO)) if value > 0 else -(1 << 30)
        self.buckets[key] = self.buckets.get(key, 0) + 1

    def quantile(self, fraction: float) -> float:
        if self.values is not None:
            return percentile(self.values, fraction)
        rank, seen = (self.count - 1) * fraction, 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen > rank:
                return (
                    0.0 if key == -(1 << 30) else round(C.QUANTILE_BUCKET_RATIO ** (key + 0.5), 2)
                )
        return 0.0


class RunTotals:
    """What the summaries say about a suite's runs, added up as the runs stream past, one at a
    time: usage, cost, latency quantiles and errors; for tool-use runs also the tool selection
    scores, the confusion table, the calls per tool and per source (live, mock, ...), the calls'
    durations per tool and the tools the runs' cases expect. Its size grows with the tools, never
    with the runs. `by_model`: the same for each model apart (a model matrix)."""

    def __init__(self, by_model: bool = False) -> None:
        self.runs = self.errors = 0
        self.usage = Usage()
        self.cost = 0.0
        self.latency = _LatencyQuantiles()
        self.tools: dict[str, _ToolStats] = {}
        self.confusion: dict[str, dict[str, int]] = {}
        self.calls: dict[str, int] = {}
        self.sources: dict[str, int] = {}
        self.durations: dict[str, list[float]] = {}  # tool -> [calls, total ms]
        self.expected: set[str] = set()
        self.models: dict[str, RunTotals] | None = {} if by_model else None

    def add(
        self, usage: Usage, cost: float, latency_ms: float, errored: bool, model: str = ""
    ) -> None:
        """One run of any kind."""
        self.runs += 1
        self.errors += errored
        self.usage = self.usage + usage
        self.cost += cost
        self.latency.add(latency_ms)
        if self.models is not None:
            self.models.setdefault(model, RunTotals()).add(usage, cost, latency_ms, errored)

    def add_transcript(self, t: Transcript) -> None:
        """One tool-use run: its numbers, and what it did with the tools."""
        self.add(t.usage, t.cost_usd, t.latency_ms, bool(t.error), t.model)
        for totals in (self, self.models.get(t.model) if self.models is not None else None):
            if totals is not None:
                totals.add_tool_use(t)

    def add_tool_use(self, t: Transcript) -> None:
        case, called = t.case, t.tools_called
        self.expected.update(case.expected_tools, case.expected_args)
        for call in t.tool_calls:
            self.calls[call.name] = self.calls.get(call.name, 0) + 1
            self.sources[call.source] = self.sources.get(call.source, 0) + 1
            took = self.durations.setdefault(call.name, [0, 0.0])
            took[0], took[1] = took[0] + 1, took[1] + call.duration_ms
        if not case.expected_tools and not case.expect_no_tools:
            return  # selection and confusion: only cases that say which tools they expect
        expected, chosen = set(case.expected_tools), set(called)
        for tool in expected | chosen:
            entry = self.tools.setdefault(tool, _ToolStats(tool))
            if tool in expected and tool in chosen:
                entry.true_positives += 1
            elif tool in chosen:
                entry.false_positives += 1
            else:
                entry.false_negatives += 1
        first = case.expected_tools[0] if case.expected_tools else "(no tool)"
        row = self.confusion.setdefault(first, {})
        actual = called[0] if called else "(no tool)"
        row[actual] = row.get(actual, 0) + 1

    def observed(self, transcripts: Iterable[Transcript]) -> Iterator[Transcript]:
        """The transcripts, each added here as it passes (one pass feeds the cases and this)."""
        for t in transcripts:
            self.add_transcript(t)
            yield t

    def tool_stats(self) -> list[_ToolStats]:
        return [self.tools[name] for name in sorted(self.tools)]

    def by_source(self) -> dict[str, int]:
        """How many calls each of live, mock, replay and policy answered (only those that did)."""
        order = [*CALL_SOURCES, *(s for s in self.sources if s not in CALL_SOURCES)]
        return {source: self.sources[source] for source in order if self.sources.get(source)}

    def coverage(self, available: Sequence[str], expected: Iterable[str]) -> ToolCoverageRecord:
        """Which of the servers' tools the suite expects, which Claude called, which it never did."""
        wanted = sorted({*expected, *self.expected})
        calls = self.calls
        covered = [tool for tool in available if tool in calls]
        return ToolCoverageRecord(
            available=list(available),
            expected=wanted,
            called=sorted(calls),
            never_called=[tool for tool in available if tool not in calls],
            expected_not_called=[tool for tool in wanted if tool not in calls],
            unexpected=[tool for tool in sorted(calls) if tool not in wanted],
            calls=dict(sorted(calls.items())),
            coverage=round(len(covered) / len(available), 4) if available else None,
        )


def tools_expected(cases: Iterable[TestCase]) -> set[str]:
    """The tools the cases expect (listed, or given expected arguments)."""
    if isinstance(cases, CsvSuite):  # counted when the file was checked
        return cases.tools_expected
    return {tool for case in cases for tool in [*case.expected_tools, *case.expected_args]}


def _transcript_totals(transcripts: Iterable[Transcript]) -> RunTotals:
    totals = RunTotals()
    for t in transcripts:
        totals.add_transcript(t)
    return totals


def tool_selection_stats(transcripts: Iterable[Transcript]) -> list[_ToolStats]:
    """Per-tool precision / recall / F1 of expected against called tools, over every run of
    every case that says which tools it expects (a list, or none at all)."""
    return _transcript_totals(transcripts).tool_stats()


def tool_coverage(
    cases: Iterable[TestCase], transcripts: Iterable[Transcript], available: Sequence[str]
) -> ToolCoverageRecord:
    """Which of the servers' tools the suite expects, which Claude called, which it never did."""
    return _transcript_totals(transcripts).coverage(available, tools_expected(cases))


@dataclass
class CaseCounts:
    """Cases' verdicts counted as they stream past (the summaries' numbers), per model too."""

    cases: int = 0
    passed: int = 0
    flaky: int = 0
    models: dict[str, CaseCounts] = field(default_factory=dict)

    def add(self, case: CaseResult, per_model: bool = True) -> None:
        self.cases += 1
        self.passed += case.passed
        self.flaky += case.flaky
        if per_model:
            self.models.setdefault(case.model or "", CaseCounts()).add(case, False)


def case_counts(cases: Iterable[CaseResult]) -> CaseCounts:
    counts = CaseCounts()
    for case in cases:
        counts.add(case)
    return counts
