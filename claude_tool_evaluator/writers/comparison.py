"""Comparing results files: each case's change (Fisher's exact test, Holm-corrected), and how a
comparison shows in markdown, the terminal and JSON. A case's p-value, interval and runs to decide
are all at the level Holm tests it at; a case that passed every run before and fails every run now
without being significant is a suspected regression, never under a ✅.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console

import test_constants as C

from ..finished_run import case_label, is_matrix
from ..results_schema.document import read_results_document
from ..scoring.harness import harness_note, harness_reason, split_model
from ..scoring.statistics import (
    bootstrap_difference,
    fisher_p_value,
    holm_adjusted,
    holm_levels,
    newcombe_interval,
    runs_to_decide,
    wilson_interval,
)
from ..sinks import escape_markup, markdown_cell
from .markdown import percent

__all__ = [
    "CaseChange",
    "Comparison",
    "RateChange",
    "VERDICT_ICONS",
    "change_counts",
    "compare_files",
    "comparison_json",
    "confidence_label",
    "counted_runs",
    "holm_text",
    "pass_line",
    "print_comparison",
    "render_comparison",
    "trigger_score_changes",
]

if TYPE_CHECKING:
    from ..results_schema.document import CaseResult, ResultsDocument


# A case is a regression or a fix only when the change in its pass rate is significant: Fisher's
# exact test on its runs, Holm-corrected across the cases compared, at --alpha. A change that is
# not is "within noise", with the runs per side that would decide a change of its size; one from
# every run passing to every run failing is a "suspected regression". Holm tests the case with the
# smallest p at alpha / m, the next at alpha / (m − 1), ...: its interval and its runs to decide
# are at that same level, so the three numbers of a row tell one story.
def confidence_label(alpha: float) -> str:
    """1 − alpha as a percentage with the digits it needs: 95%, 97.5%, 99.7% (never 100%)."""
    shown = (1 - alpha) * 100
    if abs(shown - round(shown)) < 1e-9:
        return f"{round(shown)}%"
    digits = next((d for d in range(1, 9) if float(f"{shown:.{d}f}") < 100), 9)
    return f"{shown:.{digits}f}".rstrip("0").rstrip(".") + "%"


def holm_text(family: int) -> str:
    """`Holm over 16 cases`: the correction a case's figures are at ("" for a rate tested alone)."""
    return f"Holm over {family} cases" if family > 1 else ""


@dataclass
class RateChange:
    """One rate in the old file and the new: the difference (new − old), its Newcombe interval
    and the exact test's p-value; for a case, Holm-adjusted across the `family` of cases both
    files ran, with its interval and runs to decide at `level`, the level Holm tests it at."""

    label: str
    old_successes: int
    old_runs: int
    new_successes: int
    new_runs: int
    alpha: float = C.DEFAULT_ALPHA
    adjusted_p: float | None = None
    family: int = 1  # the cases Holm corrects over (1: a rate of the whole files, alone)
    level: float | None = None  # the level Holm tests this one at (None: alpha)

    @property
    def old_rate(self) -> float:
        return self.old_successes / self.old_runs

    @property
    def new_rate(self) -> float:
        return self.new_successes / self.new_runs

    @property
    def difference(self) -> float:
        return self.new_rate - self.old_rate

    @property
    def tested_at(self) -> float:
        """The level of its p-value, its interval and its runs to decide."""
        return self.alpha if self.level is None else self.level

    @property
    def interval(self) -> tuple[float, float]:
        """Newcombe's interval at 1 − its level (98.3 % for the smallest of three Holm p's)."""
        return newcombe_interval(
            self.old_successes, self.old_runs, self.new_successes, self.new_runs, self.tested_at
        )

    @functools.cached_property
    def p_value(self) -> float:
        return fisher_p_value(self.old_successes, self.old_runs, self.new_successes, self.new_runs)

    @property
    def significant(self) -> bool:
        p = self.p_value if self.adjusted_p is None else self.adjusted_p
        return p < self.alpha

    @property
    def complete_break(self) -> bool:
        """Every run passed before and every run fails now."""
        return self.old_successes == self.old_runs > 0 and self.new_successes == 0 < self.new_runs

    @property
    def runs_to_decide(self) -> int | None:
        """Runs per side that would detect a change of this size (80 % power) at its level, never
        fewer than the exact test needs to call even a complete flip significant there, and, when
        it is not significant, more than the runs a side already made (they did not decide it)."""
        made = 0 if self.significant else min(self.old_runs, self.new_runs)
        return runs_to_decide(self.old_rate, self.new_rate, self.tested_at, made)

    def deciding(self) -> str:
        """`about 6 runs per side (at 99.7%, Holm over 16 cases) would decide a change this size`."""
        runs = self.runs_to_decide
        if not runs:
            return ""
        holm = holm_text(self.family)
        at = f" (at {confidence_label(self.tested_at)}, {holm})" if holm else ""
        return f"about {runs} runs per side{at} would decide a change this size"

    def shown(self) -> str:
        """`-20.0 pts (97.5% −51.2…+18.7), p 1 (Holm over 3 cases)`: the difference, its interval
        and p-value, at one level."""
        low, high = self.interval
        p = self.p_value if self.adjusted_p is None else self.adjusted_p
        holm = holm_text(self.family)
        return (
            f"{self.difference * 100:+.1f} pts ({confidence_label(self.tested_at)} "
            f"{low * 100:+.1f}…{high * 100:+.1f}), p {p:.3g}" + (f" ({holm})" if holm else "")
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
            "level": round(self.tested_at, 10),
            "family": self.family,
            "significant": self.significant,
            "runs_to_decide": self.runs_to_decide,
        }


@dataclass
class _MeanChange:
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


_SHOWN_CHANGES = {"noise": "within noise", "suspected": "suspected regression"}


VERDICT_ICONS = {"failed": "❌", "warning": "⚠️", "passed": "✅"}
_CHANGE_ORDER = ("regression", "suspected", "removed", "fixed", "noise", "added", "unchanged")


@dataclass
class CaseChange:
    name: str
    change: (
        str  # regression | suspected | fixed | noise (within noise) | added | removed | unchanged
    )
    old: CaseResult | None
    new: CaseResult | None
    rate: RateChange | None = None  # both files ran it: the statistics of its pass rate

    @property
    def reasons(self) -> str:
        case = self.new if self.change in ("regression", "suspected", "added") else self.old
        shown = self.change in ("regression", "suspected", "fixed")
        return "; ".join(case.reasons) if case and shown else ""

    @property
    def shown_change(self) -> str:
        return _SHOWN_CHANGES.get(self.change, self.change)

    @property
    def harness_note(self) -> str:
        """A case run through the API in one file and through Claude Code in the other: its two
        verdicts in a sentence, with why the failing side failed ("" otherwise)."""
        old, new = self.old, self.new
        if old is None or new is None or not old.runs or not new.runs:
            return ""
        sides = {split_model(old.model or "")[1]: old, split_model(new.model or "")[1]: new}
        api = sides.pop("api", None)
        if api is None or len(sides) != 1:
            return ""
        claude = next(iter(sides.values()))
        return harness_note(
            api.passes / api.runs,
            claude.passes / claude.runs,
            harness_reason(api),
            harness_reason(claude),
        )

    @property
    def note(self) -> str:
        """What the reports say beside it: why it regressed (through the API and Claude Code:
        which side fails, and why), or the runs that would decide it."""
        if self.harness_note:
            return "; ".join(
                part
                for part in (self.harness_note, self.rate.deciding() if self.rate else "")
                if part
            )
        if self.change in ("noise", "suspected") and self.rate is not None:
            deciding = self.rate.deciding()
            said = f"not significant; {deciding}" if deciding else "not significant"
            if self.change == "suspected":
                said = f"every run passed before, every run fails now: {said}"
            return "; ".join(part for part in (said, self.reasons) if part)
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
    means: list[_MeanChange] = field(default_factory=list)  # cost and latency per run
    significant_only: bool = False  # --significant-only: a suspected regression does not fail

    def of(self, kind: str) -> list[CaseChange]:
        return [c for c in self.changes if c.change == kind]

    @property
    def family(self) -> int:
        """The cases both files ran: what Holm corrects over."""
        return sum(1 for c in self.changes if c.rate is not None)

    @property
    def failed(self) -> bool:
        """A regression, a case that is gone (never counted as a pass), or a suspected regression
        (unless --significant-only)."""
        suspected = bool(self.of("suspected")) and not self.significant_only
        return bool(self.of("regression") or self.of("removed") or suspected)

    @property
    def verdict(self) -> str:
        """failed (exit 1), warning (a suspected regression let through), or passed."""
        return "failed" if self.failed else "warning" if self.of("suspected") else "passed"

    @property
    def icon(self) -> str:
        return VERDICT_ICONS[self.verdict]

    def counts(self) -> str:
        suspected = len(self.of("suspected"))
        return (
            f"{len(self.of('regression'))} regression(s), "
            + (f"{suspected} suspected regression(s), " if suspected else "")
            + f"{len(self.of('fixed'))} fix(es), "
            f"{len(self.of('noise'))} within noise, {len(self.of('removed'))} removed, "
            f"{len(self.of('added'))} added"
        )

    def method(self) -> str:
        """How a change is decided, in a sentence's words."""
        holm = holm_text(self.family)
        return (
            f"significant at alpha {self.alpha:g} (Fisher's exact test, "
            + (
                f"{holm}: each case's p, interval and runs to decide at the level Holm tests it at"
                if holm
                else "one case"
            )
            + ")"
        )

    def suspicion(self) -> str:
        """What a suspected regression means here, and what it does to the exit code ("" when
        there is none)."""
        suspected = self.of("suspected")
        if not suspected:
            return ""
        effect = (
            "let through by --significant-only (exit 0)"
            if self.significant_only
            else "it fails the comparison all the same (exit 1; --significant-only lets it through)"
        )
        return (
            f"{len(suspected)} suspected regression(s): every run passed before and every run "
            f"fails now, which is not significant over {self.family} case(s) at these run counts; "
            + effect
        )


def counted_runs(case: CaseResult) -> int:
    """The runs a case's pass rate is over (a trigger query's errored runs count for nothing)."""
    return case.runs - (case.errors if case.kind == "trigger_query" else 0)


def _case_change(
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


def _decide_changes(changes: Sequence[CaseChange], alpha: float = C.DEFAULT_ALPHA) -> None:
    """Holm across every case both files ran, each case's level; then each one's kind."""
    tested = [c for c in changes if c.rate is not None]
    p_values = [c.rate.p_value for c in tested]  # type: ignore[union-attr]
    for change, adjusted, level in zip(
        tested, holm_adjusted(p_values), holm_levels(p_values, alpha)
    ):
        rate = change.rate
        assert rate is not None
        rate.adjusted_p, rate.level, rate.family = adjusted, level, len(tested)
        if rate.significant:
            change.change = "regression" if rate.difference < 0 else "fixed"
        elif rate.complete_break:
            change.change = "suspected"
        elif rate.difference != 0 or change.old.passed != change.new.passed:  # type: ignore[union-attr]
            change.change = "noise"


def _document_rates(old: ResultsDocument, new: ResultsDocument, alpha: float) -> list[RateChange]:
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


def _document_means(old: ResultsDocument, new: ResultsDocument, alpha: float) -> list[_MeanChange]:
    """Cost and latency per run, with bootstrap intervals over the files' runs."""
    found = []
    for label, unit, value in (
        ("cost per run", "$", lambda r: r.cost_usd),
        ("latency per run", "ms", lambda r: r.latency_ms),
    ):
        a, b = [value(r) for r in old.results], [value(r) for r in new.results]
        if a and b:
            found.append(
                _MeanChange(
                    label, unit, sum(a) / len(a), sum(b) / len(b), bootstrap_difference(a, b, alpha)
                )
            )
    return found


def _compare_documents(
    old_path: str,
    new_path: str,
    old: ResultsDocument,
    new: ResultsDocument,
    alpha: float = C.DEFAULT_ALPHA,
    significant_only: bool = False,
) -> Comparison:
    old_matrix, new_matrix = (
        is_matrix(old.cases),
        is_matrix(new.cases),
    )  # a model matrix: a case per model
    before = {case_label(c, old_matrix): c for c in old.cases}
    after = {case_label(c, new_matrix): c for c in new.cases}
    changes = [
        _case_change(name, before.get(name), after.get(name), alpha)
        for name in dict.fromkeys([*before, *after])
    ]
    _decide_changes(changes, alpha)
    changes.sort(key=lambda c: _CHANGE_ORDER.index(c.change))
    return Comparison(
        old_path,
        new_path,
        old,
        new,
        changes,
        alpha,
        _document_rates(old, new, alpha),
        _document_means(old, new, alpha),
        significant_only,
    )


def compare_files(
    paths: Sequence[str], alpha: float = C.DEFAULT_ALPHA, significant_only: bool = False
) -> list[Comparison]:
    """Each file against the one before it: a history of runs reads as a chain of changes. Every
    file is read and checked before anything is compared."""
    documents = [read_results_document(p) for p in paths]
    return [
        _compare_documents(
            paths[i], paths[i + 1], documents[i], documents[i + 1], alpha, significant_only
        )
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
    old_cost, new_cost = c.old.summary.cost_usd, c.new.summary.cost_usd
    suspicion = c.suspicion()
    lines = [
        f"## {c.icon} Comparison: {c.counts()}",
        "",
        f"{markdown_cell(c.old_path, None, code=True)} → {markdown_cell(c.new_path, None, code=True)} "
        f"({c.old.metadata.evaluation} → {c.new.metadata.evaluation}); a change counts when "
        f"{c.method()}",
        "",
        *(
            [f"**{VERDICT_ICONS['warning']} {markdown_cell(suspicion, None)}**", ""]
            if suspicion
            else []
        ),
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
        holm = holm_text(c.family)
        lines += [
            f"| Case | Change | Old | New | Difference (interval), p{f' ({holm})' if holm else ''} "
            "| Note |",
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


_CHANGE_COLOURS = {
    "regression": "red",
    "suspected": "red",
    "removed": "red",
    "fixed": "green",
    "added": "cyan",
    "noise": "yellow",
}


_VERDICT_COLOURS = {"failed": "red", "warning": "yellow", "passed": "green"}


def print_comparison(console: Console, c: Comparison) -> None:
    colour = _VERDICT_COLOURS[c.verdict]
    holm = holm_text(c.family)
    console.print(
        f"[bold {colour}]{c.icon} {escape_markup(c.old_path)} → {escape_markup(c.new_path)}: "
        f"{c.counts()}[/bold {colour}] (alpha {c.alpha:g}{f', {holm}' if holm else ''})",
        highlight=False,
    )
    if c.suspicion():
        console.print(f"  [{colour}]{escape_markup(c.suspicion())}[/{colour}]", highlight=False)
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
        if ch.change in _CHANGE_COLOURS:
            tint = _CHANGE_COLOURS[ch.change]
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
                "verdict": c.verdict,
                "alpha": c.alpha,
                "family": c.family,
                "significant_only": c.significant_only,
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
