"""The crowded room and overlap in the reports.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

import test_constants as C

from ..sinks import escape_markup, markdown_cell, preview
from .html import html_block

__all__ = [
    "crowding_markdown",
    "html_overlap",
    "overlap_markdown",
    "overlap_verdict",
    "print_crowding",
    "print_overlap",
]

if TYPE_CHECKING:
    from ..results_schema.sections import CrowdingRecord, CrowdPointRecord, OverlapRecord


_CROWD_SERIES = {
    "skills": ("triggerRate", "falsePositiveRate", "triggerScore"),
    "tools": ("recall", "precision", "f1"),
}


def _crowd_value(point: CrowdPointRecord, name: str) -> str:
    """A rate of the curve with its interval: `67% (21–94%)`, or n/a."""
    value = point.series.get(name)
    if value is None:
        return "n/a"
    low, high = point.intervals.get(name, (0.0, 100.0))
    return f"{value:.0f}% ({low:.0f}–{high:.0f}%)"


def _crowd_rows(record: CrowdingRecord) -> tuple[list[str], list[list[str]]]:
    """The curve as a table: (headers, rows), the same in every report."""
    series = _CROWD_SERIES[record.kind]
    if record.kind == "skills":
        headers = ["Distractors", "Model", "Skill", *series, "Runs taken", "Listed"]
        rows = [
            [
                str(p.distractors),
                p.model,
                p.subject,
                *[_crowd_value(p, s) for s in series],
                f"{p.stolen_runs}/{p.runs}",
                "?" if p.listed is None else str(p.listed),
            ]
            for p in record.points
        ]
    else:
        headers = [
            "Distractor tools",
            "Tools offered",
            "Model",
            *series,
            "Tool tokens",
            "Runs taken",
        ]
        rows = [
            [
                str(p.distractors),
                str(p.offered),
                p.model,
                *[_crowd_value(p, s) for s in series],
                f"{p.tool_tokens or 0:,}",
                f"{p.stolen_runs}/{p.runs}",
            ]
            for p in record.points
        ]
    return headers, rows


def _thief_rows(record: CrowdingRecord) -> tuple[list[str], list[list[str]]]:
    what = "Query" if record.kind == "skills" else "Case"
    headers = ["Step", "Model", what, "Expected", "Taken by", "Runs", "Instead / alongside"]
    rows = [
        [
            str(t.distractors),
            t.model,
            t.case,
            t.expected,
            t.thief + (" (distractor)" if t.decoy else ""),
            f"{t.runs}/{t.of_runs}",
            f"{t.instead} / {t.alongside}",
        ]
        for t in record.thieves
    ]
    return headers, rows


def _crowd_intro(record: CrowdingRecord) -> str:
    unit = "skills" if record.kind == "skills" else "tools"
    return (
        f"{len(record.distractors)} distractor {unit} from {', '.join(record.sources)}, added in a "
        f"seeded order (seed {record.seed}): step K holds the first K. Rates in % with their 95 % "
        "Wilson intervals"
        + (
            " over the queries. Runs taken: runs of the positive queries another skill fired in. "
            "Listed: distractors Claude Code's init event named (fewest over the runs)."
            if record.kind == "skills"
            else " over the expected tools' calls (a call to a distractor is a false positive)."
        )
        + (f" Decoys written for ${record.decoy_cost_usd:.4f}." if record.decoy_cost_usd else "")
    )


def crowding_markdown(record: CrowdingRecord) -> list[str]:
    headers, rows = _crowd_rows(record)
    title = (
        "skills beside the skill under test"
        if record.kind == "skills"
        else "tools beside the servers' own"
    )
    lines = [f"## The crowded room: {title}", "", markdown_cell(_crowd_intro(record), None), ""]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(markdown_cell(c, 60) for c in row) + " |" for row in rows]
    lines.append("")
    if record.kind == "tools":
        lines += [
            "### Each expected tool, step by step",
            "",
            "| Step | Model | Tool | Precision | Recall | F1 |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {p.distractors} | {markdown_cell(p.model)} | {markdown_cell(t.tool, code=True)} | "
            f"{t.precision:.2f} | {t.recall:.2f} | {t.f1:.2f} |"
            for p in record.points
            for t in p.tools
        ]
        lines.append("")
    headers, rows = _thief_rows(record)
    lines += [
        "### Who took the queries" if record.kind == "skills" else "### Who took the misses",
        "",
    ]
    if rows:
        lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(markdown_cell(c, 80) for c in row) + " |" for row in rows]
    else:
        lines.append("Nothing was taken: every miss (if any) called nothing else.")
    lines.append("")
    if record.hints:
        lines += ["### Consolidation hints", ""]
        for hint in record.hints:
            lines += [
                f"- {markdown_cell(hint.taken_by, code=True)} took {hint.rate:.0%} of "
                f"{markdown_cell(hint.expected, code=True)}'s runs ({markdown_cell(', '.join(hint.cases), 300)})",
                "",
                f"  | {markdown_cell(hint.kind.title())} | Description |",
                "  |---|---|",
                f"  | {markdown_cell(hint.expected, code=True)} | {markdown_cell(hint.expected_description, 400)} |",
                f"  | {markdown_cell(hint.taken_by, code=True)} | {markdown_cell(hint.taken_by_description, 400)} |",
                "",
            ]
    if record.skipped:
        lines += [f"Left out of the crowd ({len(record.skipped)}):", ""]
        lines += [f"- {markdown_cell(s, 200)}" for s in record.skipped[:20]]
        lines.append("")
    return lines


def print_crowding(console: Console, record: CrowdingRecord) -> None:
    headers, rows = _crowd_rows(record)
    table = Table(title="The crowded room: " + ("skills" if record.kind == "skills" else "tools"))
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*[escape_markup(c) for c in row])
    console.print(table)
    headers, rows = _thief_rows(record)
    if rows:
        table = Table(title="Who took them")
        for header in headers:
            table.add_column(header, overflow="fold")
        for row in rows[: C.SUMMARY_TABLE_ROWS]:
            table.add_row(*[escape_markup(preview(c, 70)) for c in row])
        console.print(table)
    for hint in record.hints:
        console.print(
            f"[yellow]consolidate?[/yellow] {escape_markup(hint.taken_by)} took {hint.rate:.0%} of "
            f"{escape_markup(hint.expected)}'s runs",
            highlight=False,
            soft_wrap=True,
        )


def _overlap_rows(record: OverlapRecord) -> list[list[str]]:
    return [
        [
            f"{p.a} / {p.b}",
            f"{p.similarity:.2f}",
            (p.risk if p.judged else "not judged") if not p.error else "error",
            p.error or p.reason or "-",
            "; ".join(p.queries) or "-",
            p.disambiguation or "-",
        ]
        for p in record.pairs
    ]


_OVERLAP_HEADERS = ["Pair", "Word overlap", "Risk", "Reason", "Confusing queries", "Disambiguation"]


def _overlap_intro(record: OverlapRecord) -> str:
    judged = sum(p.judged for p in record.pairs)
    return (
        f"{judged} pair(s) judged by {record.judge_model}; {record.below_filter} below the lexical "
        f"pre-filter (LOW without the judge)"
        + (f"; {record.not_judged} above it not judged" if record.not_judged else "")
        + f". Cost ${record.cost_usd:.4f}."
    )


def overlap_verdict(record: OverlapRecord) -> str:
    """The verdict line of overlap: the pairs judged HIGH (a failing case each), the judge's
    errors, the pairs --max-cost left unjudged."""
    judged = [p for p in record.pairs if p.judged]
    high = sum(p.risk == "HIGH" and not p.error for p in judged)
    errors = sum(bool(p.error) for p in judged)
    why = [f"{high} of {len(judged)} judged pair(s) HIGH" if high else "no judged pair HIGH"]
    why += [f"{errors} pair(s) the judge could not judge"] if errors else []
    why += (
        [f"{record.not_judged} pair(s) above the pre-filter not judged"]
        if record.not_judged
        else []
    )
    return "; ".join(why)


def overlap_markdown(record: OverlapRecord) -> list[str]:
    lines = ["## Skill overlap", "", markdown_cell(_overlap_intro(record), None), ""]
    lines += ["| " + " | ".join(_OVERLAP_HEADERS) + " |", "|" + "---|" * len(_OVERLAP_HEADERS)]
    lines += [
        "| " + " | ".join(markdown_cell(c, 300) for c in row) + " |"
        for row in _overlap_rows(record)
    ]
    return lines + [""]


def print_overlap(console: Console, record: OverlapRecord) -> None:
    table = Table(title="Skill overlap")
    for header in _OVERLAP_HEADERS:
        table.add_column(header, overflow="fold")
    for row in _overlap_rows(record):
        colour = {"HIGH": "red", "MEDIUM": "yellow"}.get(row[2], "default")
        table.add_row(
            escape_markup(row[0]),
            row[1],
            f"[{colour}]{escape_markup(row[2])}[/{colour}]",
            *(escape_markup(preview(c, 120)) for c in row[3:]),
        )
    console.print(table)
    console.print(escape_markup(_overlap_intro(record)), highlight=False, soft_wrap=True)


def html_overlap(record: OverlapRecord) -> dict:
    return html_block(
        "Skill overlap", [("", _OVERLAP_HEADERS, _overlap_rows(record))], [_overlap_intro(record)]
    )
