"""The plugin section in every sink: each case's with/without table (pass counts, mean scores,
the delta's verdict), what the plugin's parts did per case and arm, and the suite's warnings.

May import: the rooms above the writers, the writers below it."""

from __future__ import annotations

from rich.console import Console

from ..results_schema.document import CaseResult
from ..results_schema.plugin import ArmDeltaRecord, PluginCaseRecord, PluginRecord
from ..scoring.plugin_graders import claude_percent, effect_points
from ..sinks import json_text, markdown_cell, terminal_text
from .html import html_block

__all__ = [
    "html_plugin",
    "plugin_comment",
    "plugin_junit",
    "plugin_markdown",
    "print_plugin",
]

_WITHOUT = "baseline (without)"  # the arm without the plugin: a baseline, never a failure


def _delta_headers(record: PluginRecord) -> list[str]:
    return [
        "case",
        f"with {record.name} (passed/runs)",
        f"{_WITHOUT} (passed/runs)",
        "score with",
        "score without",
        "Δ score",
        "pass rates: delta, interval, p",
    ]


def _score_delta(record: PluginRecord, delta: ArmDeltaRecord) -> str:
    """The row's score delta in Claude Code's points: a case's from its aggregates (— when a run
    errored), the suite's the mean of its cases' (claude plugin eval's `meanDelta`)."""
    if not delta.without_runs:
        return "—"
    if not delta.case:
        effect = next((e for e in record.effects if e.label == delta.label), None)
        shown = effect.mean_delta if effect else None
    else:
        first = record.effects[0].label if record.effects else ""
        case = next((c for c in record.cases if c.name == delta.case), None)
        shown = (
            case.delta
            if case is not None and delta.label == first
            else delta.score_with - delta.score_without
        )
    return "—" if shown is None else effect_points(shown)


def _delta_row(record: PluginRecord, delta: ArmDeltaRecord) -> list[str]:
    return [
        delta.name,
        f"{delta.with_passed}/{delta.with_runs}",
        f"{delta.without_passed}/{delta.without_runs}" if delta.without_runs else "—",
        f"{delta.score_with:.2f}",
        f"{delta.score_without:.2f}" if delta.without_runs else "—",
        _score_delta(record, delta),
        delta.verdict,
    ]


def _delta_rows(record: PluginRecord) -> list[list[str]]:
    return [_delta_row(record, d) for d in record.deltas]


def _plugin_effect_lines(record: PluginRecord) -> list[str]:
    """The plugin's effect in claude plugin eval's words and numbers, a line per configuration:
    `greeter v1.0.0 — Plugin effect: ↑ +33.3 pts vs baseline — improved 2 · flat 2 · regressed 0
    of 4 cases.`, then its suite score, baseline, cases at the threshold and perfect runs."""
    lines = []
    for effect in record.effects:
        label = f" ({effect.label})" if effect.label else ""
        lines.append(
            f"{effect.title}{label} — "
            + (effect.headline or "no baseline arm was run: absolute scores only.")
        )
        baseline = (
            f" · baseline {claude_percent(effect.baseline_score)} without it"
            if effect.baseline_score is not None
            else ""
        )
        lines.append(
            f"suite score {claude_percent(effect.overall_score)} with the plugin{baseline} · "
            f"{effect.cases_passed} of {effect.cases_total} cases ≥ "
            f"{claude_percent(effect.threshold)} threshold · perfect runs "
            f"{claude_percent(effect.overall_pass_rate)}"
        )
    return lines


def _parts_rows(record: PluginRecord) -> list[list[str]]:
    return [
        [f"{p.case} ({p.label})" if p.label else p.case, p.arm, "; ".join(p.parts)]
        for p in record.parts
    ]


_REUSED_HEADERS = ["case", "arm", "runs reused", "from", "run", "date"]


def _reused_rows_of(case: PluginCaseRecord) -> list[list[str]]:
    return [
        [
            f"{case.name} ({arm.label})" if arm.label else case.name,
            _WITHOUT if arm.arm == "without" else arm.arm,
            f"{arm.runs}/{arm.of}",
            f"{arm.source} {arm.place}",
            arm.run_id or "—",
            arm.date or "—",
        ]
        for arm in case.reused
    ]


def _reused_rows(record: PluginRecord) -> list[list[str]]:
    """Per case, the arms whose runs were reused rather than run, and from which earlier run:
    `01-greet | baseline (without) | 2/2 | file r.json | 1a2b3c | 2026-12-02T07:30:00+00:00`."""
    return [row for case in record.cases for row in _reused_rows_of(case)]


def _reused_line(row: list[str]) -> str:
    case, arm, runs, source, run_id, date = row
    return f"{case}: {arm} reused {runs} run(s) from {source} (run {run_id}, {date})"


def _markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(markdown_cell(cell, None) for cell in row) + " |" for row in rows),
    ]


def _effect_markdown(record: PluginRecord) -> list[str]:
    """The headline in bold, the suite's figures under it (a paragraph each)."""
    lines = _plugin_effect_lines(record)
    return [
        f"**{markdown_cell(line, None)}**" if n % 2 == 0 else markdown_cell(line, None)
        for n, line in enumerate(lines)
    ]


def _blank_between(lines: list[str]) -> list[str]:
    return [part for line in lines for part in (line, "")]


def _title(record: PluginRecord) -> str:
    return record.effects[0].title if record.effects else record.name


def plugin_markdown(record: PluginRecord) -> list[str]:
    lines = [
        f"## Plugin {markdown_cell(_title(record))}: with vs without",
        "",
        *_blank_between(_effect_markdown(record)),
        *_markdown_table(_delta_headers(record), _delta_rows(record)),
        "",
        "Scores are claude plugin eval's (a run's share of its graders passed; a case's the mean "
        "of its runs; Δ in points, with minus baseline); the pass rates count runs that passed "
        "every grader, with Newcombe's interval and Fisher's exact p.",
    ]
    if record.parts:
        lines += ["", "### What the plugin's parts did", ""]
        lines += _markdown_table(["case", "arm", "in its runs"], _parts_rows(record))
    if _reused_rows(record):
        lines += ["", "### Runs reused, not run (nothing they depend on changed)", ""]
        lines += _markdown_table(_REUSED_HEADERS, _reused_rows(record))
    if record.warnings:
        lines += ["", "### Warnings", ""] + [f"- {markdown_cell(w, None)}" for w in record.warnings]
    return [*lines, ""]


def plugin_comment(record: PluginRecord) -> list[str]:
    """The pull request's view: each case with and without the plugin."""
    return [
        f"#### Plugin {markdown_cell(_title(record))}: with vs without",
        "",
        *_blank_between(_effect_markdown(record)),
        *_markdown_table(_delta_headers(record), _delta_rows(record)),
        "",
    ]


def print_plugin(console: Console, record: PluginRecord) -> None:
    """Each case's (and the suite's) line, and under it what the plugin's parts did in each arm
    (its warnings were said before the runs), under the plugin's effect as claude plugin eval
    says it."""
    for line in _plugin_effect_lines(record):
        console.print(terminal_text(line), markup=False, highlight=False, soft_wrap=True)
    for d in record.deltas:
        console.print(
            terminal_text(
                f"{d.name}: with {d.with_passed}/{d.with_runs}, without "
                f"{d.without_passed}/{d.without_runs}: {d.verdict}; score {d.score_with:.2f} "
                f"with, {d.score_without:.2f} {_WITHOUT}: Δ {_score_delta(record, d)}"
            ),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        for parts in record.parts:
            if d.case and parts.case == d.case and parts.label == d.label:
                console.print(
                    terminal_text(f"  [{parts.arm}] {'; '.join(parts.parts)}"),
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
    for row in _reused_rows(record):
        console.print(
            terminal_text(_reused_line(row)), markup=False, highlight=False, soft_wrap=True
        )


def _tile_figures(record: PluginRecord) -> list[dict]:
    """Claude Code's report tiles, per configuration: suite score, Δ, baseline, cases at the
    threshold, perfect runs (its words and number format)."""
    return [
        {
            "label": effect.label,
            "title": effect.title,
            "headline": effect.headline,
            "suite_score": claude_percent(effect.overall_score),
            "delta": "" if effect.mean_delta is None else effect_points(effect.mean_delta),
            "baseline": ""
            if effect.baseline_score is None
            else claude_percent(effect.baseline_score),
            "cases": f"{effect.cases_passed} of {effect.cases_total} ≥ "
            f"{claude_percent(effect.threshold)} threshold",
            "cases_total": effect.cases_total,
            "perfect_runs": claude_percent(effect.overall_pass_rate),
        }
        for effect in record.effects
    ]


def _grader_text(config: dict) -> str:
    return " ".join(
        f"{key} {value if isinstance(value, int | float) and not isinstance(value, bool) else json_text(value, indent=None)}"
        for key, value in config.items()
    )


def html_plugin(record: PluginRecord) -> dict:
    """The plugin page's data (renderPlugin): the tiles and headline, the with/without table,
    and per case its score with and without, Δ, prompt and graders (its runs, both arms, are the
    page's runs of that case)."""
    tables = [
        ("each case with and without the plugin", _delta_headers(record), _delta_rows(record))
    ]
    if record.parts:
        tables.append(
            ("what the plugin's parts did", ["case", "arm", "in its runs"], _parts_rows(record))
        )
    if _reused_rows(record):
        tables.append(("runs reused, not run", _REUSED_HEADERS, _reused_rows(record)))
    block = html_block(f"Plugin {_title(record)}: with vs without", tables, record.warnings)
    return dict(
        block,
        plugin=record.name,
        tiles=_tile_figures(record),
        cases=[
            {
                "name": case.name,
                "prompt": case.prompt,
                "score": claude_percent(case.score),
                "score_without": ""
                if case.score_without is None
                else claude_percent(case.score_without),
                "delta": "—" if case.delta is None else effect_points(case.delta),
                "reused": [_reused_line(row) for row in _reused_rows_of(case)],
                "graders": [
                    [
                        g.name,
                        g.type,
                        _grader_text({**g.config, **({"arm": g.arm} if g.arm else {})})
                        + (f" ×{g.weight:g}" if g.weight != 1 else ""),
                    ]
                    for g in case.graders
                ],
            }
            for case in record.cases
        ],
    )


def plugin_junit(record: PluginRecord) -> list[tuple[str, CaseResult]]:
    """A testcase `plugin effect` beside the cases, its name the headline and its output the
    suite's figures: CI shows the plugin's effect as the other reports do (it never fails)."""
    lines = _plugin_effect_lines(record)
    return [
        (
            f"plugin {record.name}",
            CaseResult(
                name=f"plugin effect: {lines[n]}",
                kind="case",
                group=f"plugin {record.name}",
                passed=True,
                prompt=lines[n + 1],
            ),
        )
        for n in range(0, len(lines), 2)
    ]
