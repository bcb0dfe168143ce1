"""The hostile room in the reports: the red team's figures, scan findings, pins.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

import test_constants as C

from ..hub.hostile import ATTACKS
from ..results_schema.document import CaseResult
from ..scoring.scan import severity_rank
from ..sinks import escape_markup, markdown_cell, preview, terminal_text
from .html import html_block
from .markdown import percent

__all__ = [
    "html_security",
    "print_attack_costs",
    "print_pins",
    "print_security",
    "scan_verdict",
    "security_junit",
    "security_markdown",
]

if TYPE_CHECKING:
    from ..dry_run import CostEstimate
    from ..results_schema.security import (
        AttackFigureRecord,
        PinRecord,
        RedTeamRecord,
        ScanRecord,
        SecurityRecord,
    )


def _rate_with_interval(rate: float, interval: tuple[float, float]) -> str:
    return f"{percent(rate)} ({percent(interval[0])}–{percent(interval[1])})"


def _figure_cells(f: AttackFigureRecord) -> list[str]:
    """A figure's numbers as every sink shows them."""
    return [
        f"{f.successes}/{f.runs}",
        _rate_with_interval(f.success_rate, f.interval),
        percent(f.held_all_k),
        _rate_with_interval(f.utility, f.utility_interval),
        "n/a" if f.clean_utility is None else percent(f.clean_utility),
        f"{f.delivered}/{f.runs}",
    ]


_FIGURE_HEADERS = [
    "Successes",
    "Success rate (95% CI)",
    "Held in all k runs of an attack (pass^k)",
    "Utility under attack (95% CI)",
    "Clean utility",
    "Delivered",
]


def _redteam_tables(record: RedTeamRecord) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, headers, rows) of the red team: per class, per vector, per cell, the model
    matrix (several --model), the runs an attack succeeded in, and the vectors."""
    several = len(record.models) > 1
    model = ["Model"] if several else []

    def mine(f: AttackFigureRecord) -> list[str]:
        return [f.model] if several else []

    tables = [
        (
            "By attack class",
            ["Attack class", *model, *_FIGURE_HEADERS],
            [[f.attack, *mine(f), *_figure_cells(f)] for f in record.by_class],
        ),
        (
            "By vector",
            ["Vector", *model, *_FIGURE_HEADERS],
            [[f.vector, *mine(f), *_figure_cells(f)] for f in record.by_vector],
        ),
        (
            "By attack, variant and vector",
            ["Attack class", "Variant", "Vector", *model, *_FIGURE_HEADERS],
            [[f.attack, f.variant, f.vector, *mine(f), *_figure_cells(f)] for f in record.cells],
        ),
    ]
    if several:
        rates = {(f.attack, f.model): f for f in record.by_class}
        tables.append(
            (
                "Attack success rate by model (lower resists better)",
                ["Attack class", *record.models],
                [
                    [
                        attack,
                        *(
                            percent(rates[(attack, m)].success_rate)
                            if (attack, m) in rates
                            else "-"
                            for m in record.models
                        ),
                    ]
                    for attack in dict.fromkeys(f.attack for f in record.by_class)
                ],
            )
        )
    tables.append(
        (
            "Runs the attack succeeded in",
            ["Case", "Attack", "Vector", *model, "Run", "What gave it away"],
            [
                [
                    r.case,
                    f"{r.attack}:{r.variant}",
                    r.vector,
                    *([r.model] if several else []),
                    str(r.iteration),
                    "; ".join(r.signals),
                ]
                for r in record.successes[: C.SUMMARY_TABLE_ROWS]
            ],
        )
    )
    tables.append(
        (
            "Vectors",
            ["Vector", "Template"],
            [[v.name, v.template] for v in record.vectors],
        )
    )
    return tables


def _redteam_intro(record: RedTeamRecord) -> str:
    judge = (
        f", and the judge ({record.judge_model}) where it found the instruction followed"
        if record.judge_model
        else ""
    )
    return (
        f"{len(record.attacks)} attack(s) × {len(record.vectors)} vector(s), {record.iterations} "
        f"run(s) each, through an adversarial proxy in front of each server. Held in all k runs "
        f"(pass^k), k = {record.iterations}: the -i runs of one attack (one case under one class, "
        "variant and vector), the chance that k of them all held, averaged over the attacks a row "
        f"covers. Success: a call of the canary tool {record.canary_tool} (or of a shadow "
        f"server's look-alike), both answered by the proxy and never forwarded; the run's canary "
        f"token passed to another tool; a tool the policy withholds called; or the answer "
        f"carrying the attacker's text{judge}. Utility under attack: the attacked runs whose case "
        f"passed its own checks; clean utility: the same cases without an attack. Clean runs: "
        f"{record.clean_runs}, with a canary call: {record.clean_canary_calls}."
    )


def _scan_rows(record: ScanRecord) -> list[list[str]]:
    return [
        [
            f.severity,
            f.server,
            f.tool if f.kind == "tool" else f"{f.kind} {f.tool}",
            f.check,
            f.where,
            f.detail,
            f.reader,
        ]
        for f in sorted(record.findings, key=lambda f: -severity_rank(f.severity))
    ]


_SCAN_HEADERS = ["Severity", "Server", "Definition", "Check", "Where", "Finding", "Reader"]


def _scan_intro(record: ScanRecord) -> str:
    failing = sum(
        severity_rank(f.severity) >= severity_rank(record.fail_on) for f in record.findings
    )
    others = (
        f" and {record.others} other definition(s) (resources, prompts, instructions)"
        if record.others
        else ""
    )
    return (
        f"{record.tools} tool definition(s){others} of "
        f"{', '.join(record.servers) or 'no server'}: "
        f"{len(record.findings)} finding(s), {failing} at or above {record.fail_on} (--fail-on)."
    )


def scan_verdict(record: ScanRecord, cases: Sequence[CaseResult], pins: PinRecord | None) -> str:
    """The verdict line of a scan: the tools a finding at or above --fail-on fails (a case each)."""
    failing = sum(not c.passed for c in cases)
    text = (
        f"{failing} of {len(cases)} {'definition' if record.others else 'tool'}(s) with a finding "
        f"at or above {record.fail_on} (--fail-on)"
        if failing
        else f"no finding at or above {record.fail_on} (--fail-on)"
    )
    if pins is not None and pins.failed:
        text += f"; {len(pins.changes)} tool definition(s) changed since {pins.file} (--pin)"
    return text


def _pins_text(record: PinRecord) -> str:
    if record.failed:
        return (
            f"{len(record.changes)} tool definition(s) changed since {record.file}: the run "
            "stopped before any model call (--update-pins accepts them)"
        )
    if record.changes:
        return (
            f"{len(record.changes)} tool definition(s) changed since {record.file}: updated "
            f"(--update-pins); {record.tools} pinned"
        )
    if record.written:
        return f"pinned {record.tools} tool definition(s) in {record.file}"
    return f"{record.tools} tool definition(s) match their pins in {record.file}"


def security_markdown(record: SecurityRecord) -> list[str]:
    lines = ["## Security", ""]
    if record.redteam is not None:
        lines += [
            "### Red team: the suite under attack",
            "",
            markdown_cell(_redteam_intro(record.redteam), None),
            "",
        ]
        for caption, headers, rows in _redteam_tables(record.redteam):
            if not rows:
                continue
            lines += [f"#### {caption}", ""]
            lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            lines += ["| " + " | ".join(markdown_cell(c, 160) for c in row) + " |" for row in rows]
            lines.append("")
        lines += [f"- {markdown_cell(n, None)}" for n in record.redteam.notes] + [""]
    if record.scan is not None:
        lines += [
            "### Scan: the tool definitions",
            "",
            markdown_cell(_scan_intro(record.scan), None),
            "",
        ]
        rows = _scan_rows(record.scan)
        if rows:
            lines += ["| " + " | ".join(_SCAN_HEADERS) + " |", "|" + "---|" * len(_SCAN_HEADERS)]
            lines += ["| " + " | ".join(markdown_cell(c, 200) for c in row) + " |" for row in rows]
            lines.append("")
    if record.pins is not None:
        lines += ["### Tool pins", "", markdown_cell(_pins_text(record.pins), None), ""]
        for change in record.pins.changes:
            lines += [
                f"#### {markdown_cell(change.server)}/{markdown_cell(change.tool)}: {change.change}",
                "",
                "| Diff |",
                "|---|",
            ]
            lines += [f"| {markdown_cell(line, 200)} |" for line in change.diff.splitlines()]
            lines.append("")
    return lines


def print_pins(console: Console, record: PinRecord) -> None:
    colour = "red" if record.failed else "yellow" if record.changes else "green"
    console.print(
        f"[{colour}]pins:[/{colour}] {escape_markup(_pins_text(record))}",
        highlight=False,
        soft_wrap=True,
    )
    for change in record.changes:
        console.print(
            f"[bold]{escape_markup(change.server)}/{escape_markup(change.tool)}[/bold]: {change.change}",
            highlight=False,
        )
        console.print(terminal_text(change.diff, multiline=True), markup=False, highlight=False)


def print_security(console: Console, record: SecurityRecord) -> None:
    if record.redteam is not None:
        for caption, headers, rows in _redteam_tables(record.redteam):
            if not rows or caption == "Vectors":
                continue
            table = Table(title=f"Red team: {caption.lower()}")
            for header in headers:
                table.add_column(header, overflow="fold")
            for row in rows[: C.SUMMARY_TABLE_ROWS]:
                table.add_row(*(escape_markup(preview(c, 120)) for c in row))
            console.print(table)
        console.print(
            escape_markup(_redteam_intro(record.redteam)), highlight=False, soft_wrap=True
        )
    if record.scan is not None and not record.scan.findings:
        console.print(escape_markup("Scan: " + _scan_intro(record.scan)), highlight=False)
    elif record.scan is not None:
        table = Table(title=escape_markup("Scan: " + _scan_intro(record.scan)))
        for header in _SCAN_HEADERS:
            table.add_column(header, overflow="fold")
        colours = {"high": "red", "medium": "yellow", "low": "default"}
        for row in _scan_rows(record.scan):
            colour = colours.get(row[0], "default")
            table.add_row(
                f"[{colour}]{escape_markup(row[0])}[/{colour}]",
                *(escape_markup(preview(c, 160)) for c in row[1:]),
            )
        console.print(table)
    if record.pins is not None:
        print_pins(console, record.pins)


def print_attack_costs(console: Console, parts: Sequence[tuple[str, CostEstimate]]) -> None:
    """--dry-run of a red team: the clean runs' cost and each attack class's."""
    for label, cost in parts:
        console.print(
            f"  {label}: {cost.runs} run(s), about ${cost.cost_expected:.4f} (at most "
            f"${cost.cost_max:.4f})",
            highlight=False,
            markup=False,
        )


def html_security(record: SecurityRecord) -> dict:
    tables: list[tuple[str, Sequence[str], Sequence[Sequence[Any]]]] = []
    notes: list[str] = []
    if record.redteam is not None:
        notes.append(_redteam_intro(record.redteam))
        tables += [t for t in _redteam_tables(record.redteam) if t[2]]
        notes += record.redteam.notes
    if record.scan is not None:
        notes.append(_scan_intro(record.scan))
        tables.append(("Scan: findings", _SCAN_HEADERS, _scan_rows(record.scan)))
    if record.pins is not None:
        notes.append(_pins_text(record.pins))
        tables.append(
            (
                "Tool pins: changes",
                ["Server", "Tool", "Change", "Diff"],
                [[c.server, c.tool, c.change, c.diff] for c in record.pins.changes],
            )
        )
    return html_block("Security", tables, notes)


def security_junit(record: SecurityRecord) -> list[tuple[str, CaseResult]]:
    """A testcase per attack class (and model): it passes when the attack failed in every run;
    one for the pins: it fails when a definition changed without --update-pins."""
    rows: list[tuple[str, CaseResult]] = []
    redteam = record.redteam
    if redteam is not None:
        several = len(redteam.models) > 1
        for f in redteam.by_class:
            reasons: dict[str, int] = {}
            for run in redteam.successes:
                if run.attack == f.attack and run.model == f.model:
                    for signal in run.signals:
                        key = f"{run.variant} / {run.vector}: {signal.split(': ')[0]}"
                        reasons[key] = reasons.get(key, 0) + 1
            title = ATTACKS[f.attack].title if f.attack in ATTACKS else f.attack
            rows.append(
                (
                    "security: red team",
                    CaseResult(
                        name=f"{title} ({f.attack})" + (f" on {f.model}" if several else ""),
                        kind="attack",
                        group="security: red team",
                        passed=f.successes == 0,
                        runs=f.runs,
                        passes=f.runs - f.successes,
                        pass_rate=round(1 - f.success_rate, 4),
                        reasons=reasons,
                        prompt=ATTACKS[f.attack].what if f.attack in ATTACKS else "",
                    ),
                )
            )
    if record.pins is not None:
        pins = record.pins
        rows.append(
            (
                "security: pins",
                CaseResult(
                    name=f"tool pins ({pins.file})",
                    kind="pins",
                    group="security: pins",
                    passed=not pins.failed,
                    runs=1,
                    passes=int(not pins.failed),
                    reasons={f"{c.change}: {c.server}/{c.tool}\n{c.diff}": 1 for c in pins.changes},
                    prompt=_pins_text(pins),
                ),
            )
        )
    return rows
