"""Comparing results files: each case's change (Fisher's exact test, Holm-corrected), and how a
comparison shows in markdown, the terminal and JSON.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console

import test_constants as C

from ..result_records import read_results_document
from ..results import case_label, is_matrix
from ..scoring.statistics import (
    bootstrap_difference,
    fewest_deciding_runs,
    fisher_p_value,
    holm_adjusted,
    newcombe_interval,
    runs_to_detect,
    wilson_interval,
)
from ..sinks import escape_markup, markdown_cell
from .markdown import percent

if TYPE_CHECKING:
    from ..result_records import CaseResult, ResultsDocument


# A case is a regression or a fix only when the change in its pass rate is significant: Fisher's
# exact test on its runs, Holm-corrected across the cases compared, at --alpha. A change that is
# not is "within noise", with the runs per side that would decide a change of its size.
def confidence_label(alpha: float) -> str:
    return f"{(1 - alpha) * 100:g}%"


@dataclass
class RateChange:
    """One rate in the old file and the new: the difference (new − old), its Newcombe interval
    and the exact test's p-value (Holm-adjusted across the cases, for a case)."""

    label: str
    old_successes: int
    old_runs: int
    new_successes: int
    new_runs: int
    alpha: float = C.DEFAULT_ALPHA
    adjusted_p: float | None = None

    @property
    def old_rate(self) -> float:
        return self.old_successes / self.old_runs

    @property
    def new_rate(self) -> float:
        return self.new_successes / self.new_runs

    @property
    def difference(self) -> float:
        return self.new_rate - self.old_rate

    @functools.cached_property
    def interval(self) -> tuple[float, float]:
        return newcombe_interval(
            self.old_successes, self.old_runs, self.new_successes, self.new_runs, self.alpha
        )

    @functools.cached_property
    def p_value(self) -> float:
        return fisher_p_value(self.old_successes, self.old_runs, self.new_successes, self.new_runs)

    @property
    def significant(self) -> bool:
        p = self.p_value if self.adjusted_p is None else self.adjusted_p
        return p < self.alpha

    @property
    def runs_to_decide(self) -> int | None:
        """Runs per side that would detect a change of this size (80 % power, at alpha), and never
        fewer than the exact test needs to call even a complete flip significant."""
        runs = runs_to_detect(self.old_rate, self.new_rate, self.alpha)
        return None if runs is None else max(runs, fewest_deciding_runs(self.alpha))

    def shown(self) -> str:
        """`-20.0 pts (95% −51.2…+18.7), p 0.63`: the difference, its interval and p-value."""
        low, high = self.interval
        p = self.p_value if self.adjusted_p is None else self.adjusted_p
        return (
            f"{self.difference * 100:+.1f} pts ({confidence_label(self.alpha)} "
            f"{low * 100:+.1f}…{high * 100:+.1f}), p {p:.3g}"
        )

    def json(self) -> dict:
        low, high = self.interval
        return {
            "label": self.label,
            "old": [self.old_successes, self.old_runs],
            "new": [self.new_successes, self.new_runs],
            "difference": round(self.difference, 4),
            "interval": [round(low, 4), round(high, 4)],
            "p_value": round(self.p_value, 6),
            "adjusted_p": None if self.adjusted_p is None else round(self.adjusted_p, 6),
            "significant": self.significant,
            "runs_to_decide": self.runs_to_decide,
        }


@dataclass
class MeanChange:
    """A per-run mean (cost, latency) in the old file and the new, with a bootstrap interval of
    the difference (None when a file holds fewer than two runs)."""

    label: str
    unit: str  # "$" or "ms"
    old_mean: float
    new_mean: float
    interval: tuple[float, float] | None

    def shown(self) -> str:
        def value(x: float, sign: str = "") -> str:
            return f"${x:{sign}.4f}" if self.unit == "$" else f"{x:{sign}.0f} ms"

        change = value(self.new_mean - self.old_mean, "+")
        interval = (
            f" (95% {value(self.interval[0], '+')}…{value(self.interval[1], '+')})"
            if self.interval
            else ""
        )
        return f"{value(self.old_mean)} → {value(self.new_mean)}: {change}{interval}"

    def json(self) -> dict:
        return {
            "label": self.label,
            "unit": self.unit,
            "old": round(self.old_mean, 6),
            "new": round(self.new_mean, 6),
            "interval": [round(x, 6) for x in self.interval] if self.interval else None,
        }


@dataclass
class CaseChange:
    name: str
    change: str  # regression | fixed | noise (within noise) | added | removed | unchanged
    old: CaseResult | None
    new: CaseResult | None
    rate: RateChange | None = None  # both files ran it: the statistics of its pass rate

    @property
    def reasons(self) -> str:
        case = self.new if self.change in ("regression", "added") else self.old
        return "; ".join(case.reasons) if case and self.change in ("regression", "fixed") else ""

    @property
    def shown_change(self) -> str:
        return "within noise" if self.change == "noise" else self.change

    @property
    def note(self) -> str:
        """What the reports say beside it: why it regressed, or the runs that would decide it."""
        if self.change == "noise" and self.rate is not None:
            runs = self.rate.runs_to_decide
            return (
                f"not significant; about {runs} runs per side would decide a change this size"
                if runs
                else "not significant"
            )
        return self.reasons


@dataclass
class Comparison:
    """One step of a comparison: an older results file against a newer one."""

    old_path: str
    new_path: str
    old: ResultsDocument
    new: ResultsDocument
    changes: list[CaseChange]
    alpha: float = C.DEFAULT_ALPHA
    rates: list[RateChange] = field(default_factory=list)  # runs passed, trigger rates, accuracy
    means: list[MeanChange] = field(default_factory=list)  # cost and latency per run

    def of(self, kind: str) -> list[CaseChange]:
        return [c for c in self.changes if c.change == kind]

    @property
    def failed(self) -> bool:
        """A regression, or a case that is gone: a removed case is never counted as a pass."""
        return bool(self.of("regression") or self.of("removed"))

    def counts(self) -> str:
        return (
            f"{len(self.of('regression'))} regression(s), {len(self.of('fixed'))} fix(es), "
            f"{len(self.of('noise'))} within noise, {len(self.of('removed'))} removed, "
            f"{len(self.of('added'))} added"
        )


CHANGE_ORDER = ("regression", "removed", "fixed", "noise", "added", "unchanged")


def counted_runs(case: CaseResult) -> int:
    """The runs a case's pass rate is over (a trigger query's errored runs count for nothing)."""
    return case.runs - (case.errors if case.kind == "trigger_query" else 0)


def case_change(
    name: str, old: CaseResult | None, new: CaseResult | None, alpha: float
) -> CaseChange:
    if old is None or new is None:
        return CaseChange(name, "added" if old is None else "removed", old, new)
    if counted_runs(old) == 0 or counted_runs(new) == 0:  # nothing to test: the verdicts say it
        kind = (
            "regression"
            if old.passed and not new.passed
            else "fixed"
            if new.passed and not old.passed
            else "unchanged"
        )
        return CaseChange(name, kind, old, new)
    rate = RateChange(name, old.passes, counted_runs(old), new.passes, counted_runs(new), alpha)
    return CaseChange(name, "unchanged", old, new, rate)


def decide_changes(changes: Sequence[CaseChange]) -> None:
    """Holm across every case both files ran; then each one's kind."""
    tested = [c for c in changes if c.rate is not None]
    for change, adjusted in zip(tested, holm_adjusted([c.rate.p_value for c in tested])):  # type: ignore[union-attr]
        rate = change.rate
        assert rate is not None
        rate.adjusted_p = adjusted
        if rate.significant:
            change.change = "regression" if rate.difference < 0 else "fixed"
        elif rate.difference != 0 or change.old.passed != change.new.passed:  # type: ignore[union-attr]
            change.change = "noise"


def document_rates(old: ResultsDocument, new: ResultsDocument, alpha: float) -> list[RateChange]:
    """The whole files' rates: runs passed, each skill's trigger rate, QA accuracy."""
    found = []
    old_runs, new_runs = (sum(counted_runs(c) for c in d.cases) for d in (old, new))
    if old_runs and new_runs:
        found.append(
            RateChange(
                "runs passed",
                sum(c.passes for c in old.cases),
                old_runs,
                sum(c.passes for c in new.cases),
                new_runs,
                alpha,
            )
        )
    before = {(s.skill, s.model): s for s in old.section("trigger_scores") or []}
    for score in new.section("trigger_scores") or []:
        earlier = before.get((score.skill, score.model))
        if earlier and earlier.positives and score.positives:
            found.append(
                RateChange(
                    f"trigger rate {score.skill}" + (f" ({score.model})" if score.model else ""),
                    earlier.positives_activated,
                    earlier.positives,
                    score.positives_activated,
                    score.positives,
                    alpha,
                )
            )
    qa_old, qa_new = old.section("qa"), new.section("qa")
    if qa_old and qa_new and qa_old.runs and qa_new.runs:
        found.append(
            RateChange(
                "answer accuracy", qa_old.correct, qa_old.runs, qa_new.correct, qa_new.runs, alpha
            )
        )
    return found


def document_means(old: ResultsDocument, new: ResultsDocument, alpha: float) -> list[MeanChange]:
    """Cost and latency per run, with bootstrap intervals over the files' runs."""
    found = []
    for label, unit, value in (
        ("cost per run", "$", lambda r: r.cost_usd),
        ("latency per run", "ms", lambda r: r.latency_ms),
    ):
        a, b = [value(r) for r in old.results], [value(r) for r in new.results]
        if a and b:
            found.append(
                MeanChange(
                    label, unit, sum(a) / len(a), sum(b) / len(b), bootstrap_difference(a, b, alpha)
                )
            )
    return found


def compare_documents(
    old_path: str,
    new_path: str,
    old: ResultsDocument,
    new: ResultsDocument,
    alpha: float = C.DEFAULT_ALPHA,
) -> Comparison:
    old_matrix, new_matrix = (
        is_matrix(old.cases),
        is_matrix(new.cases),
    )  # a model matrix: a case per model
    before = {case_label(c, old_matrix): c for c in old.cases}
    after = {case_label(c, new_matrix): c for c in new.cases}
    changes = [
        case_change(name, before.get(name), after.get(name), alpha)
        for name in dict.fromkeys([*before, *after])
    ]
    decide_changes(changes)
    changes.sort(key=lambda c: CHANGE_ORDER.index(c.change))
    return Comparison(
        old_path,
        new_path,
        old,
        new,
        changes,
        alpha,
        document_rates(old, new, alpha),
        document_means(old, new, alpha),
    )


def compare_files(paths: Sequence[str], alpha: float = C.DEFAULT_ALPHA) -> list[Comparison]:
    """Each file against the one before it: a history of runs reads as a chain of changes. Every
    file is read and checked before anything is compared."""
    documents = [read_results_document(p) for p in paths]
    return [
        compare_documents(paths[i], paths[i + 1], documents[i], documents[i + 1], alpha)
        for i in range(len(paths) - 1)
    ]


def pass_line(document: ResultsDocument) -> str:
    s = document.summary
    low, high = wilson_interval(s.passed, s.cases)
    return f"{s.passed}/{s.cases} ({percent(s.pass_rate)}, 95% {percent(low)}–{percent(high)})"


def trigger_score_changes(c: Comparison) -> list[tuple[str, float | None, float | None]]:
    old = {s.skill: s.trigger_score for s in c.old.section("trigger_scores") or []}
    new = {s.skill: s.trigger_score for s in c.new.section("trigger_scores") or []}
    return [(skill, old.get(skill), new.get(skill)) for skill in dict.fromkeys([*old, *new])]


def change_counts(ch: CaseChange) -> tuple[str, str]:
    old = "-" if ch.old is None else f"{ch.old.passes}/{ch.old.runs}"
    new = "-" if ch.new is None else f"{ch.new.passes}/{ch.new.runs}"
    return old, new


def render_comparison(c: Comparison) -> str:
    icon = "❌" if c.failed else "✅"
    old_cost, new_cost = c.old.summary.cost_usd, c.new.summary.cost_usd
    lines = [
        f"## {icon} Comparison: {c.counts()}",
        "",
        f"{markdown_cell(c.old_path, None, code=True)} → {markdown_cell(c.new_path, None, code=True)} "
        f"({c.old.metadata.evaluation} → {c.new.metadata.evaluation}); a change counts when "
        f"significant at alpha {c.alpha:g} (Fisher's exact test, Holm-corrected across cases)",
        "",
        "| | Old | New | Change |",
        "|---|---|---|---|",
        f"| Passed | {pass_line(c.old)} | {pass_line(c.new)} | |",
        f"| Cost | ${old_cost:.4f} | ${new_cost:.4f} | {new_cost - old_cost:+.4f} |",
    ]
    for rate in c.rates:
        lines.append(
            f"| {markdown_cell(rate.label, None)} | {rate.old_successes}/{rate.old_runs} | "
            f"{rate.new_successes}/{rate.new_runs} | {rate.shown()} |"
        )
    for mean in c.means:
        lines.append(f"| {mean.label} | | | {mean.shown()} |")
    for skill, before, after in trigger_score_changes(c):
        delta = f"{after - before:+.1f}" if before is not None and after is not None else ""
        lines.append(
            f"| triggerScore {markdown_cell(skill, None, code=True)} | "
            f"{'-' if before is None else f'{before:.1f}%'} | "
            f"{'-' if after is None else f'{after:.1f}%'} | {delta} |"
        )
    lines.append("")
    changed = [ch for ch in c.changes if ch.change != "unchanged"]
    if changed:
        lines += [
            f"| Case | Change | Old | New | Difference ({confidence_label(c.alpha)} interval), "
            "Holm p | Note |",
            "|---|---|---|---|---|---|",
        ]
        for ch in changed:
            old, new = change_counts(ch)
            lines.append(
                f"| {markdown_cell(ch.name, code=True)} | {ch.shown_change} | {old} | {new} | "
                f"{ch.rate.shown() if ch.rate else ''} | {markdown_cell(ch.note, None)} |"
            )
        lines.append("")
    return "\n".join(lines)


CHANGE_COLOURS = {
    "regression": "red",
    "removed": "red",
    "fixed": "green",
    "added": "cyan",
    "noise": "yellow",
}


def print_comparison(console: Console, c: Comparison) -> None:
    colour = "red" if c.failed else "green"
    console.print(
        f"[bold {colour}]{escape_markup(c.old_path)} → {escape_markup(c.new_path)}: "
        f"{c.counts()}[/bold {colour}] (alpha {c.alpha:g}, Holm-corrected)",
        highlight=False,
    )
    console.print(
        f"  passed {pass_line(c.old)} → {pass_line(c.new)} · cost ${c.old.summary.cost_usd:.4f} → "
        f"${c.new.summary.cost_usd:.4f}",
        highlight=False,
    )
    for rate in c.rates:
        console.print(f"  {escape_markup(rate.label)}: {rate.shown()}", highlight=False)
    for mean in c.means:
        console.print(f"  {mean.label}: {mean.shown()}", highlight=False)
    for skill, before, after in trigger_score_changes(c):
        console.print(
            f"  triggerScore {escape_markup(skill)}: {'-' if before is None else f'{before:.1f}%'} → "
            f"{'-' if after is None else f'{after:.1f}%'}",
            highlight=False,
        )
    for ch in c.changes:
        if ch.change in CHANGE_COLOURS:
            tint = CHANGE_COLOURS[ch.change]
            stats = f" {ch.rate.shown()}" if ch.rate else ""
            console.print(
                f"  [{tint}]{ch.shown_change:<12}[/{tint}] {escape_markup(ch.name)}{stats}"
                + (f" — {escape_markup(ch.note)}" if ch.note else ""),
                highlight=False,
            )


def comparison_json(comparisons: Sequence[Comparison]) -> dict:
    return {
        "comparisons": [
            {
                "old": c.old_path,
                "new": c.new_path,
                "failed": c.failed,
                "alpha": c.alpha,
                "pass_rate": [c.old.summary.pass_rate, c.new.summary.pass_rate],
                "cost_usd": [c.old.summary.cost_usd, c.new.summary.cost_usd],
                "rates": [rate.json() for rate in c.rates],
                "means": [mean.json() for mean in c.means],
                "trigger_scores": [
                    {"skill": s, "old": a, "new": b} for s, a, b in trigger_score_changes(c)
                ],
                "cases": [
                    {
                        "name": ch.name,
                        "change": ch.change,
                        "reasons": ch.reasons,
                        "note": ch.note,
                        "old_passed": ch.old.passed if ch.old else None,
                        "new_passed": ch.new.passed if ch.new else None,
                        "old_pass_rate": ch.old.pass_rate if ch.old else None,
                        "new_pass_rate": ch.new.pass_rate if ch.new else None,
                        "statistics": ch.rate.json() if ch.rate else None,
                        "old_claude_version": getattr(ch.old, "claude_version", None),
                        "new_claude_version": getattr(ch.new, "claude_version", None),
                    }
                    for ch in c.changes
                ],
            }
            for c in comparisons
        ]
    }
