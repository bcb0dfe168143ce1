"""The sections of a results document: the renderers no sink owns, and the SECTIONS rows, all
here in the order the reports show them.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.table import Table

from ..results_schema.document import (
    BenchmarkRecord,
    IsolationRecord,
    Section,
    SkillRecord,
    SkillTestRecord,
    TriggerScoreRecord,
    dump_record,
    register_section,
)
from ..results_schema.plugin import PluginRecord
from ..results_schema.sections import (
    CalibrationRecord,
    ClaudeCodeRecord,
    CrowdingRecord,
    GraderAgreementRecord,
    LiteratureRecord,
    ModelMatrixRecord,
    OptimizationRecord,
    OverlapRecord,
    QaRecord,
)
from ..results_schema.security import SecurityRecord
from ..sinks import escape_markup, markdown_cell
from .calibration import (
    calibration_markdown,
    flags_markdown,
    html_calibration,
    html_flags,
    print_calibration,
    print_flags,
)
from .crowd import crowding_markdown, html_overlap, overlap_markdown, print_crowding, print_overlap
from .hostile import html_security, print_security, security_junit, security_markdown
from .html import html_block
from .markdown import (
    BENCHMARK_HEADERS,
    UNCONFINED_NOTE,
    benchmark_rows,
    markdown_benchmark,
    markdown_isolation,
    markdown_matrix,
    markdown_qa,
    percent,
    trigger_analysis_markdown,
)
from .optimization import html_optimization, optimization_markdown, print_optimization
from .plugin import html_plugin, plugin_comment, plugin_junit, plugin_markdown, print_plugin
from .terminal import print_benchmark, print_matrix, print_qa, print_trigger_table

__all__: list[str] = []  # a room of rows: importing it registers its sections (SECTIONS)


def _print_trigger_tables(console: Console, scores: Sequence[TriggerScoreRecord]) -> None:
    for score in scores:
        print_trigger_table(console, score)


def _print_isolation(console: Console, isolation: IsolationRecord) -> None:
    for path in isolation.outside_writes:
        console.print(
            f"[red]changed outside the temporary projects:[/red] {escape_markup(path)}",
            highlight=False,
        )
    for path in isolation.changed_elsewhere:
        console.print(
            f"[yellow]warning:[/yellow] {escape_markup(path)} changed while the runs ran; no run "
            "could change it (they are confined): another program did (--ignore-path leaves it out)",
            highlight=False,
            soft_wrap=True,
        )
    if isolation.unconfined:
        console.print(
            f"[yellow]warning:[/yellow] {UNCONFINED_NOTE}", highlight=False, soft_wrap=True
        )


def _html_isolation(isolation: IsolationRecord) -> dict:
    return dict(dump_record(isolation), note=UNCONFINED_NOTE if isolation.unconfined else None)


def _html_benchmark(benchmark: BenchmarkRecord) -> dict:
    tables = [("", BENCHMARK_HEADERS, benchmark_rows(benchmark.configurations, benchmark.deltas))]
    tables += [
        (e.name, BENCHMARK_HEADERS, benchmark_rows(e.configurations, e.deltas))
        for e in benchmark.evals
    ]
    return html_block(
        "Benchmark: task evals",
        tables,
        [
            f"{benchmark.runs_per_configuration} run(s) per eval and configuration; pass rate = "
            "expectations passed / total per run."
        ],
    )


register_section(Section("skills", list[SkillRecord], html_renderer=""))


register_section(Section("tests", list[SkillTestRecord], html_renderer=""))


register_section(
    Section(
        "matrix",
        ModelMatrixRecord,
        markdown_matrix,
        print_matrix,
        html_renderer="renderMatrix",
        place="before_cases",
    )
)


register_section(Section("qa", QaRecord, markdown_qa, print_qa, html_renderer="renderQa"))


register_section(
    Section(
        "trigger_scores",
        list[TriggerScoreRecord],
        lambda scores: [trigger_analysis_markdown(scores)],
        _print_trigger_tables,
        html_renderer="renderTriggers",
    )
)


register_section(
    Section("benchmark", BenchmarkRecord, markdown_benchmark, print_benchmark, _html_benchmark)
)


def _literature_columns(record: LiteratureRecord) -> tuple[list[str], list[str]]:
    """The benchmark's figure names and ours, in the order the rows first have them."""
    theirs = list(dict.fromkeys(k for f in record.figures for k in f.theirs))
    ours = list(dict.fromkeys(k for f in record.figures for k in f.ours))
    return theirs, ours


def _literature_rows(record: LiteratureRecord) -> tuple[list[str], list[list[str]]]:
    """The table every sink shows: per row, the benchmark's figures, then ours."""
    theirs, ours = _literature_columns(record)
    headers = ["", "cases", "runs", *theirs, *(f"ours: {k}" for k in ours), "note"]
    rows = [
        [
            f.name,
            str(f.cases),
            str(f.runs),
            *(percent(f.theirs[k]) if k in f.theirs else "" for k in theirs),
            *(percent(f.ours[k]) if k in f.ours else "" for k in ours),
            f.note,
        ]
        for f in record.figures
    ]
    return headers, rows


def _markdown_literature(records: list[LiteratureRecord]) -> list[str]:
    lines = []
    for record in records:
        headers, rows = _literature_rows(record)
        lines += [
            f"### {markdown_cell(record.benchmark, None)}: its own figures beside ours",
            "",
            markdown_cell(record.metric, None),
            "",
            "| " + " | ".join(markdown_cell(h, None) for h in headers) + " |",
            "|" + "---|" * len(headers),
        ]
        lines += ["| " + " | ".join(markdown_cell(c, 300) for c in row) + " |" for row in rows]
        lines += [""] + [f"- {markdown_cell(n, None)}" for n in record.notes] + [""]
    return lines


def _print_escaped_table(
    console: Console, title: str, headers: Sequence[str], rows: Iterable[Sequence[str]]
) -> None:
    """A terminal table of text the evaluator did not write (names, reasons): every cell and
    the title escaped, long cells folded."""
    table = Table(title=escape_markup(title))
    for header in headers:
        table.add_column(escape_markup(header), overflow="fold")
    for row in rows:
        table.add_row(*(escape_markup(cell) for cell in row))
    console.print(table)


def _print_literature(console: Console, records: list[LiteratureRecord]) -> None:
    for record in records:
        headers, rows = _literature_rows(record)
        _print_escaped_table(console, f"{record.benchmark}: {record.metric}", headers, rows)
        for note in record.notes:
            console.print(f"[dim]{escape_markup(note)}[/dim]", highlight=False, soft_wrap=True)


def _html_literature(records: list[LiteratureRecord]) -> dict:
    tables = [(r.benchmark, *_literature_rows(r)) for r in records]
    return html_block(
        "Benchmarks from the literature: their figures beside ours",
        tables,
        [f"{r.benchmark}: {r.metric}" for r in records] + [n for r in records for n in r.notes],
    )


register_section(
    Section(
        "literature",
        list[LiteratureRecord],
        _markdown_literature,
        _print_literature,
        _html_literature,
        place="before_cases",
    )
)


register_section(
    Section(
        "isolation",
        IsolationRecord,
        markdown_isolation,
        _print_isolation,
        _html_isolation,
        html_renderer="renderIsolation",
    )
)


register_section(
    Section(
        "crowding",
        CrowdingRecord,
        crowding_markdown,
        print_crowding,
        html_renderer="renderCrowding",
        place="before_cases",
    )
)


register_section(
    Section("overlap", OverlapRecord, overlap_markdown, print_overlap, html_overlap, place="first")
)


register_section(
    Section(
        "security",
        SecurityRecord,
        security_markdown,
        print_security,
        html_security,
        place="before_cases",
        junit=security_junit,
    )
)


register_section(
    Section(
        "optimization",
        OptimizationRecord,
        optimization_markdown,
        print_optimization,
        html_optimization,
        place="first",
    )
)


def _claude_code_tables(record: ClaudeCodeRecord) -> list[tuple[str, list[str], list[list[str]]]]:
    """The tables every sink shows of Claude Code's room: (caption, headers, rows)."""
    tables = []
    if record.cases:
        tables.append(
            (
                "each case through the API and through Claude Code",
                ["case", "model", "API", "Claude Code", "difference (95% interval)", "p", "why"],
                [
                    [
                        c.case,
                        c.model,
                        f"{c.api_passes}/{c.api_runs}",
                        f"{c.passes}/{c.runs} ({c.harness})",
                        f"{c.difference:+.0%} ({c.interval[0]:+.0%} to {c.interval[1]:+.0%})",
                        f"{c.p_value:.4g}",
                        c.note,
                    ]
                    for c in record.cases
                ],
            )
        )
    if record.tools:
        tables.append(
            (
                "expected tools and the tool search",
                [
                    "tool",
                    "harness",
                    "runs",
                    "deferred",
                    "loaded by a search",
                    "called",
                    "discovery",
                ],
                [
                    [
                        t.tool,
                        t.harness,
                        str(t.runs),
                        str(t.deferred_runs),
                        str(t.loaded_runs),
                        str(t.called_runs),
                        "" if t.discovery_rate is None else percent(t.discovery_rate),
                    ]
                    for t in record.tools
                ],
            )
        )
    if record.servers:
        tables.append(
            (
                "servers at Claude Code's first request",
                ["server", "harness", "runs", "not ready", "model waited", "connected after"],
                [
                    [
                        r.server,
                        r.harness,
                        str(r.runs),
                        str(r.not_ready_runs),
                        str(r.waited_runs),
                        ""
                        if r.connected_after_ms is None
                        else f"{r.connected_after_ms / 1000:.1f}s",
                    ]
                    for r in record.servers
                ],
            )
        )
    if record.builtins:
        tables.append(
            (
                "Claude Code built-ins called where an expected tool was not",
                ["built-in", "runs"],
                [[name, str(count)] for name, count in record.builtins.items()],
            )
        )
    return tables


def _late_server_notes(record: ClaudeCodeRecord) -> list[str]:
    return [
        f"server {name} was not ready at Claude Code's first request in some runs: its tools were "
        "missing until it connected"
        for name in record.late_servers
    ]


def _markdown_claude_code(record: ClaudeCodeRecord) -> list[str]:
    lines = ["## Inside Claude Code", ""]
    lines += [f"- warning: {markdown_cell(n, None)}" for n in _late_server_notes(record)]
    for caption, headers, rows in _claude_code_tables(record):
        lines += [
            "",
            f"{markdown_cell(caption, None)}:",
            "",
            "| " + " | ".join(headers) + " |",
            "|" + "---|" * len(headers),
        ]
        lines += ["| " + " | ".join(markdown_cell(c, 300) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _print_claude_code(console: Console, record: ClaudeCodeRecord) -> None:
    for note in _late_server_notes(record):
        console.print(
            f"[yellow]warning:[/yellow] {escape_markup(note)}", highlight=False, soft_wrap=True
        )
    for caption, headers, rows in _claude_code_tables(record):
        _print_escaped_table(console, f"Inside Claude Code: {caption}", headers, rows)


def _html_claude_code(record: ClaudeCodeRecord) -> dict:
    return html_block("Inside Claude Code", _claude_code_tables(record), _late_server_notes(record))


register_section(
    Section(
        "claude_code",
        ClaudeCodeRecord,
        _markdown_claude_code,
        _print_claude_code,
        _html_claude_code,
        place="before_cases",
    )
)


register_section(
    Section(
        "plugin",
        PluginRecord,
        plugin_markdown,
        print_plugin,
        html_plugin,
        html_renderer="renderPlugin",
        place="before_cases",
        junit=plugin_junit,
        comment=plugin_comment,
    )
)


register_section(
    Section(
        "calibration",
        CalibrationRecord,
        calibration_markdown,
        print_calibration,
        html_calibration,
        place="first",
    )
)


# A later run's judge graders that their last calibration put below the floor (calibrate keeps
# them in C.CALIBRATION_FILE): shown before anything else in every report of that run.
register_section(
    Section(
        "judge_flags",
        list[GraderAgreementRecord],
        flags_markdown,
        print_flags,
        html_flags,
        place="first",
    )
)
