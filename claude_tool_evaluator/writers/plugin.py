"""The plugin section in every sink: each case's with/without table (pass counts, mean scores,
the delta's verdict), what the plugin's parts did per case and arm, and the suite's warnings.

May import: the rooms above the writers, the writers below it."""

from __future__ import annotations

from rich.console import Console

from ..results_schema.plugin import ArmDeltaRecord, PluginRecord
from ..sinks import markdown_cell, terminal_text
from .html import html_block

__all__ = [
    "html_plugin",
    "plugin_comment",
    "plugin_markdown",
    "print_plugin",
]

_DELTA_HEADERS = [
    "case",
    "with (passed/runs)",
    "without (passed/runs)",
    "score with",
    "score without",
    "verdict",
]


def _delta_row(delta: ArmDeltaRecord) -> list[str]:
    return [
        delta.name,
        f"{delta.with_passed}/{delta.with_runs}",
        f"{delta.without_passed}/{delta.without_runs}",
        f"{delta.score_with:.2f}",
        f"{delta.score_without:.2f}",
        delta.verdict,
    ]


def _parts_rows(record: PluginRecord) -> list[list[str]]:
    return [
        [f"{p.case} ({p.label})" if p.label else p.case, p.arm, "; ".join(p.parts)]
        for p in record.parts
    ]


def _markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(markdown_cell(cell, None) for cell in row) + " |" for row in rows),
    ]


def plugin_markdown(record: PluginRecord) -> list[str]:
    lines = [
        f"## Plugin {markdown_cell(record.name)}: with vs without",
        "",
        *_markdown_table(_DELTA_HEADERS, [_delta_row(d) for d in record.deltas]),
    ]
    if record.parts:
        lines += ["", "### What the plugin's parts did", ""]
        lines += _markdown_table(["case", "arm", "in its runs"], _parts_rows(record))
    if record.warnings:
        lines += ["", "### Warnings", ""] + [f"- {markdown_cell(w, None)}" for w in record.warnings]
    return [*lines, ""]


def plugin_comment(record: PluginRecord) -> list[str]:
    """The pull request's view: each case with and without the plugin."""
    return [
        f"#### Plugin {markdown_cell(record.name)}: with vs without",
        "",
        *_markdown_table(_DELTA_HEADERS, [_delta_row(d) for d in record.deltas]),
        "",
    ]


def print_plugin(console: Console, record: PluginRecord) -> None:
    """Each case's (and the suite's) line, and under it what the plugin's parts did in each arm
    (its warnings were said before the runs)."""
    for d in record.deltas:
        console.print(
            terminal_text(
                f"{d.name}: with {d.with_passed}/{d.with_runs}, without "
                f"{d.without_passed}/{d.without_runs}: {d.verdict}"
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


def html_plugin(record: PluginRecord) -> dict:
    tables = [
        (
            "each case with and without the plugin",
            _DELTA_HEADERS,
            [_delta_row(d) for d in record.deltas],
        )
    ]
    if record.parts:
        tables.append(
            ("what the plugin's parts did", ["case", "arm", "in its runs"], _parts_rows(record))
        )
    return html_block(f"Plugin {record.name}: with vs without", tables, record.warnings)
