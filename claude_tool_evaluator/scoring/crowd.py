"""The crowded room: the curve of a skill's (or the tools') activation as distractors are added,
who took what, and what to consolidate.

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import test_constants as C

from ..results_schema.sections import ConsolidationHintRecord, CrowdPointRecord, ThiefRecord
from .statistics import tool_selection_stats, wilson_interval

__all__ = [
    "consolidation_hints",
    "skill_crowd_point",
    "skill_thieves",
    "tool_crowd_point",
    "tool_thieves",
]

if TYPE_CHECKING:
    from ..results_schema.document import ClaudeRun
    from ..run_types import Transcript, TriggerScore


def _wilson_percent(part: int, whole: int) -> tuple[float, float]:
    low, high = wilson_interval(part, whole)
    return round(low * 100, 2), round(high * 100, 2)


def skill_crowd_point(
    score: TriggerScore,
    step: int,
    model: str,
    runs_by_query: dict[str, list[ClaudeRun]],
    installed: Sequence[str],
) -> CrowdPointRecord:
    """One step of a skill's curve: triggerRate, falsePositiveRate and triggerScore (in %), each
    with its 95 % Wilson interval over the queries (the score's from the rates' bounds)."""
    tr_low, tr_high = _wilson_percent(score.positives_activated, score.positives)
    fp_low, fp_high = _wilson_percent(score.negatives_activated, score.negatives)
    if not score.negatives:
        ts = (tr_low, tr_high)
    elif not score.positives:
        ts = (round(100 - fp_high, 2), round(100 - fp_low, 2))
    else:
        ts = (round(tr_low * (1 - fp_high / 100), 2), round(tr_high * (1 - fp_low / 100), 2))
    own = [q for q in score.query_results if not q.routing]
    runs = [r for q in own for r in runs_by_query.get(q.query, []) if r.counted]
    positive = [
        r
        for q in own
        if q.expected == "activate"
        for r in runs_by_query.get(q.query, [])
        if r.counted
    ]
    stolen = [r for r in positive if any(name != score.skill for name in r.activated_skills)]
    crowd = set(installed)
    listings = [len(crowd & set(r.skills_loaded)) for r in runs if r.skills_loaded is not None]
    return CrowdPointRecord(
        distractors=step,
        model=model,
        subject=score.skill,
        runs=len(positive),
        stolen_runs=len(stolen),
        series={
            "triggerRate": round(score.trigger_rate, 2) if score.positives else None,
            "falsePositiveRate": round(score.false_positive_rate, 2) if score.negatives else None,
            "triggerScore": round(score.trigger_score, 2),
        },
        intervals={
            **({"triggerRate": (tr_low, tr_high)} if score.positives else {}),
            **({"falsePositiveRate": (fp_low, fp_high)} if score.negatives else {}),
            "triggerScore": ts,
        },
        listed=min(listings) if listings else None,
    )


def skill_thieves(
    score: TriggerScore,
    step: int,
    model: str,
    runs_by_query: dict[str, list[ClaudeRun]],
    distractors: Iterable[str],
) -> list[ThiefRecord]:
    """Per positive query of the skill: every other skill that fired in its runs, instead of the
    skill or alongside it, counted over the runs that counted."""
    crowd, found = set(distractors), []
    for q in score.query_results:
        if q.routing or q.expected != "activate":
            continue
        counted = [r for r in runs_by_query.get(q.query, []) if r.counted]
        by_thief: dict[str, ThiefRecord] = {}
        for run in counted:
            for name in dict.fromkeys(run.activated_skills):
                if name == score.skill:
                    continue
                thief = by_thief.setdefault(
                    name,
                    ThiefRecord(
                        case=q.query,
                        expected=score.skill,
                        thief=name,
                        distractors=step,
                        model=model,
                        of_runs=len(counted),
                        decoy=name in crowd,
                    ),
                )
                thief.runs += 1
                if run.fired(score.skill):
                    thief.alongside += 1
                else:
                    thief.instead += 1
        found += sorted(by_thief.values(), key=lambda t: (-t.runs, t.thief))
    return found


def _tool_thefts(transcript: Transcript) -> list[tuple[str, str]]:
    """(expected tool, the tool called instead) of every expected tool the run missed while it
    called another: the first tool it called that the case does not expect, else (through
    Claude Code) the first of its built-ins it called (Bash, Workflow, WebFetch, ...)."""
    expected = transcript.case.expected_tools
    called = transcript.tools_called
    builtins = (transcript.claude_code or {}).get("builtins") or []
    other = next((name for name in [*called, *builtins] if name not in expected), None)
    if other is None:
        return []
    return [(tool, other) for tool in expected if tool not in called]


def tool_crowd_point(
    step: int, model: str, transcripts: Sequence[Transcript], offered: int, tokens: int
) -> CrowdPointRecord:
    """One step of the tools' curve: recall, precision and F1 of the expected tools (in %, over
    every call: a call to a distractor is a false positive), each with its 95 % Wilson interval
    (F1's from the bounds of the other two), and each expected tool's own."""
    stats = tool_selection_stats(transcripts)
    expected = {tool for t in transcripts for tool in t.case.expected_tools}
    tp = sum(s.true_positives for s in stats if s.tool in expected)
    fn = sum(s.false_negatives for s in stats if s.tool in expected)
    fp = sum(s.false_positives for s in stats)

    def f1(p: float, r: float) -> float:
        return round(2 * p * r / (p + r), 2) if p + r else 0.0

    recall = round(100 * tp / (tp + fn), 2) if tp + fn else None
    precision = round(100 * tp / (tp + fp), 2) if tp + fp else None
    r_low, r_high = _wilson_percent(tp, tp + fn)
    p_low, p_high = _wilson_percent(tp, tp + fp)
    stolen = [t for t in transcripts if _tool_thefts(t)]
    return CrowdPointRecord(
        distractors=step,
        model=model,
        offered=offered,
        runs=len(transcripts),
        stolen_runs=len(stolen),
        series={
            "recall": recall,
            "precision": precision,
            "f1": f1(precision or 0.0, recall or 0.0) if recall is not None else None,
        },
        intervals={
            "recall": (r_low, r_high),
            "precision": (p_low, p_high),
            "f1": (f1(p_low, r_low), f1(p_high, r_high)),
        },
        tool_tokens=tokens,
        tools=[s.record() for s in stats if s.tool in expected],
    )


def tool_thieves(
    step: int,
    model: str,
    transcripts: Sequence[Transcript],
    case_of: Callable[[Transcript], str],
    distractors: Iterable[str],
) -> list[ThiefRecord]:
    """Per case and missed expected tool: the tool called instead, counted over the runs."""
    crowd = set(distractors)
    runs: dict[str, int] = {}
    found: dict[tuple[str, str, str], ThiefRecord] = {}
    for t in transcripts:
        case = case_of(t)
        runs[case] = runs.get(case, 0) + 1
        for expected, thief in _tool_thefts(t):
            record = found.setdefault(
                (case, expected, thief),
                ThiefRecord(
                    case=case,
                    expected=expected,
                    thief=thief,
                    distractors=step,
                    model=model,
                    decoy=thief in crowd,
                ),
            )
            record.runs += 1
            record.instead += 1
    for record in found.values():
        record.of_runs = runs[record.case]
    return sorted(found.values(), key=lambda t: (t.case, -t.runs, t.thief))


def consolidation_hints(
    kind: str,
    thieves: Sequence[ThiefRecord],
    totals: dict[tuple[str, str, int], int],
    descriptions: Mapping[str, str],
) -> list[ConsolidationHintRecord]:
    """Pairs confused above C.CONSOLIDATION_HINT_RATE: at its most crowded step, the share of the
    expected skill's (tool's) runs the other took, on the model where it took the most; `totals`
    holds those runs by (expected, model, step). Both descriptions side by side, and the queries
    (cases) involved."""
    top: dict[tuple[str, str], int] = {}
    for thief in thieves:
        key = (thief.expected, thief.model)
        top[key] = max(top.get(key, thief.distractors), thief.distractors)
    taken: dict[tuple[str, str, str], int] = {}
    cases: dict[tuple[str, str], list[str]] = {}
    for thief in thieves:
        if thief.distractors == top[(thief.expected, thief.model)]:
            pair = (thief.expected, thief.thief, thief.model)
            taken[pair] = taken.get(pair, 0) + thief.runs
            cases.setdefault((thief.expected, thief.thief), []).append(thief.case)
    rates: dict[tuple[str, str], float] = {}
    for (expected, other, model), runs in taken.items():
        whole = totals.get((expected, model, top[(expected, model)]), 0)
        rate = runs / whole if whole else 0.0
        rates[(expected, other)] = max(rates.get((expected, other), 0.0), rate)
    return [
        ConsolidationHintRecord(
            kind=kind,
            expected=expected,
            taken_by=other,
            rate=round(rate, 4),
            expected_description=descriptions.get(expected, ""),
            taken_by_description=descriptions.get(other, ""),
            cases=list(dict.fromkeys(cases[(expected, other)])),
        )
        for (expected, other), rate in sorted(rates.items(), key=lambda i: (-i[1], i[0]))
        if rate >= C.CONSOLIDATION_HINT_RATE - 1e-9
    ]
