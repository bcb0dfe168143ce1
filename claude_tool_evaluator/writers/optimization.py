"""The description optimizer in the reports: its verdict and the diff of each description.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ..sinks import escape_markup, markdown_cell, preview, terminal_text, wrote_line
from .html import html_block

__all__ = [
    "html_optimization",
    "optimization_markdown",
    "print_optimization",
]

if TYPE_CHECKING:
    from ..results_schema.sections import OptimizationRecord, OptimizationRoundRecord, SplitRecord


def _optimization_verdict(record: OptimizationRecord) -> str:
    rounds = {r.round: r for r in record.rounds}
    first, best = rounds[0], rounds[record.best_round]

    def score(r: OptimizationRoundRecord) -> str:
        if r.test_total:
            return f"{r.test_passed}/{r.test_total} held-out test {'queries' if record.target == 'skill' else 'cases'}"
        return f"{r.train_passed}/{r.train_total} train items (no test split)"

    if not record.improved:
        return f"Nothing beat the original: it passes {score(first)}; keep it."
    return f"Round {best.round} beat the original: {score(best)} against {score(first)} for the original."


def _description_diff(original: str, new: str, name: str, label: str) -> list[str]:
    """A unified diff of two descriptions, a sentence a line, each line safe for a terminal."""

    def sentences(text: str) -> list[str]:
        return [terminal_text(part) for part in re.split(r"(?<=[.!?;])\s+", text.strip()) if part]

    return list(
        difflib.unified_diff(
            sentences(original),
            sentences(new),
            f"{name} (original)",
            f"{name} ({label})",
            lineterm="",
            n=3,
        )
    )


def _optimization_diffs(record: OptimizationRecord) -> list[str]:
    lines: list[str] = []
    for name, text in record.best.items():
        lines += _description_diff(
            record.original.get(name, ""), text, name, f"round {record.best_round}"
        )
    return lines


def print_optimization(console: Console, record: OptimizationRecord) -> None:
    table = Table(title=escape_markup(f"Description optimization: {record.subject}"))
    for column in ("round", "status", "train", "test", "cost $", "candidate"):
        table.add_column(column, overflow="fold")
    for r in record.rounds:
        candidate = (
            "; ".join(r.descriptions.values())
            if r.status != "dropped"
            else "dropped: " + "; ".join(r.refused)
        )
        table.add_row(
            f"{r.round}{' *' if r.round == record.best_round else ''}",
            r.status,
            f"{r.train_passed}/{r.train_total}" if r.status == "scored" else "-",
            (f"{r.test_passed}/{r.test_total}" if r.test_total else "n/a")
            if r.status == "scored"
            else "-",
            f"{r.cost_usd + r.proposer_cost_usd:.4f}",
            escape_markup(preview(candidate, 90)),
        )
    console.print(table)
    console.print(escape_markup(_optimization_verdict(record)), highlight=False, soft_wrap=True)
    for line in _optimization_diffs(record):
        colour = "green" if line.startswith("+") else "red" if line.startswith("-") else "default"
        console.print(
            f"[{colour}]{escape_markup(line)}[/{colour}]", highlight=False, soft_wrap=True
        )
    if record.best_file:
        console.print(wrote_line(record.best_file), highlight=False, markup=False)


def optimization_markdown(record: OptimizationRecord) -> list[str]:
    train = [s for s in record.split if s.split == "train"]
    test = [s for s in record.split if s.split == "test"]

    def strata(entries: list[SplitRecord]) -> str:
        counts: dict[str, int] = {}
        for e in entries:
            counts[e.stratum] = counts.get(e.stratum, 0) + 1
        return "; ".join(f"{n} {markdown_cell(k, 40)}" for k, n in sorted(counts.items()))

    lines = [
        f"## Description optimization: {markdown_cell(record.subject, None)}",
        "",
        f"**{markdown_cell(_optimization_verdict(record), None)}**",
        "",
        f"Split (seed {record.seed}, holdout {record.holdout:g}, stratified): train {len(train)} "
        f"({strata(train)}), test {len(test)} ({strata(test)}). {record.runs} run(s) per item; proposals by "
        f"{markdown_cell(record.optimizer_model, None, code=True)}, shown train failures only. "
        f"Stopped: {markdown_cell(record.stopped, None)}. Cost ${record.cost_usd:.4f}.",
        "",
        "| Round | Status | Train | Test | Cost | Candidate |",
        "|---|---|---|---|---|---|",
    ]
    for r in record.rounds:
        mark = " ⭐" if r.round == record.best_round else ""
        candidate = "; ".join(
            f"{n}: {d}" if record.target == "tools" else d for n, d in r.descriptions.items()
        )
        if r.status == "dropped":
            candidate = "dropped: " + "; ".join(r.refused)
        train_cell = f"{r.train_passed}/{r.train_total}" if r.status == "scored" else "-"
        test_cell = (
            (f"{r.test_passed}/{r.test_total}" if r.test_total else "n/a")
            if r.status == "scored"
            else "-"
        )
        lines.append(
            f"| {r.round}{mark} | {r.status} | {train_cell} | {test_cell} | ${r.cost_usd + r.proposer_cost_usd:.4f} | "
            f"{markdown_cell(candidate, 160)} |"
        )
    lines.append("")
    if record.improved:
        diff = _optimization_diffs(record)
        fence = "`" * max(
            3, 1 + max((len(run) for line in diff for run in re.findall(r"`+", line)), default=0)
        )
        lines += [
            f"### The best candidate (round {record.best_round}) against the original",
            "",
            f"{fence}diff",
            *diff,
            fence,
            "",
        ]
        if record.best_file:
            lines += [f"Ready to use: {markdown_cell(record.best_file, None, code=True)}", ""]
    return lines


def html_optimization(record: OptimizationRecord) -> dict:
    rows = [
        [
            f"{r.round}{' (best)' if r.round == record.best_round else ''}",
            r.status,
            f"{r.train_passed}/{r.train_total}" if r.status == "scored" else "-",
            f"{r.test_passed}/{r.test_total}" if r.status == "scored" and r.test_total else "-",
            f"${r.cost_usd + r.proposer_cost_usd:.4f}",
            "; ".join(r.descriptions.values()) if r.status != "dropped" else "; ".join(r.refused),
        ]
        for r in record.rounds
    ]
    headers = ["Round", "Status", "Train", "Test", "Cost", "Candidate"]
    return html_block(
        f"Description optimization: {record.subject}",
        [("", headers, rows)],
        [
            f"stopped: {record.stopped}" if record.stopped else "",
            "improved" if record.improved else "the original stays the best",
        ],
    )
