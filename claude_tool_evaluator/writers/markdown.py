"""The markdown report (--report).

May import: the rooms above the writers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import test_constants as C

from ..finished_run import MODE_TITLES, case_label, gates, is_matrix, models_text
from ..hub.calls import SOURCE_LABELS
from ..results_schema.document import ToolRunResult
from ..sinks import markdown_cell

__all__ = [
    "BENCHMARK_HEADERS",
    "UNCONFINED_NOTE",
    "benchmark_rows",
    "markdown_benchmark",
    "markdown_isolation",
    "markdown_matrix",
    "markdown_qa",
    "percent",
    "price_text",
    "rate_text",
    "render_markdown",
    "signed",
    "sources_text",
    "trigger_analysis_markdown",
    "trigger_score_label",
]

if TYPE_CHECKING:
    from ..finished_run import Results
    from ..results_schema.document import (
        BenchmarkRecord,
        CaseResult,
        ConfigurationStatsRecord,
        DeltaRecord,
        IsolationRecord,
        SummaryRecord,
        TriggerScoreRecord,
    )
    from ..results_schema.sections import MatrixCellRecord, ModelMatrixRecord, QaRecord


def signed(value: float, digits: int) -> str:
    return f"{value:+.{digits}f}"


def benchmark_rows(
    stats: Sequence[ConfigurationStatsRecord], deltas: Sequence[DeltaRecord]
) -> list[list[str]]:
    """[configuration, runs, pass rate, time, tokens, cost] rows, mean ± stddev, then a row per delta."""
    rows = [
        [
            s.configuration + (f" ({s.model})" if s.model else ""),
            f"{s.runs}" + (f" ({s.errored_runs} errored)" if s.errored_runs else ""),
            f"{s.pass_rate.mean * 100:.0f}% ± {s.pass_rate.stddev * 100:.0f}%",
            f"{s.time_seconds.mean:.1f} ± {s.time_seconds.stddev:.1f}",
            f"{s.tokens.mean:,.0f} ± {s.tokens.stddev:,.0f}",
            f"{s.cost_usd.mean:.4f} ± {s.cost_usd.stddev:.4f}",
        ]
        for s in stats
    ]
    rows += [
        [
            f"Δ with_skill − {d.baseline}" + (f" ({d.model})" if d.model else ""),
            "",
            f"{d.pass_rate * 100:+.0f}%",
            signed(d.time_seconds, 1),
            f"{d.tokens:+,.0f}",
            signed(d.cost_usd, 4),
        ]
        for d in deltas
    ]
    return rows


BENCHMARK_HEADERS = ["Configuration", "Runs", "Pass rate", "Time (s)", "Tokens", "Cost (USD)"]


def markdown_benchmark(benchmark: BenchmarkRecord) -> list[str]:
    """The task evals' benchmark: every configuration (mean ± stddev over runs) and the deltas,
    then per eval, with its expected output and each expectation's tally."""

    def table(rows: list[list[str]]) -> list[str]:
        return [
            "| " + " | ".join(BENCHMARK_HEADERS) + " |",
            "|---|---|---|---|---|---|",
            *["| " + " | ".join(markdown_cell(c, None) for c in row) + " |" for row in rows],
            "",
        ]

    lines = [
        "## Benchmark: task evals",
        "",
        f"{benchmark.runs_per_configuration} run(s) per eval and configuration; pass rate = expectations "
        "passed / total per run.",
        "",
    ] + table(benchmark_rows(benchmark.configurations, benchmark.deltas))
    for e in benchmark.evals:
        lines += [
            f"### {markdown_cell(e.name, None)}",
            "",
            f"Prompt: {markdown_cell(e.prompt, 300)}",
            "",
        ]
        if e.expected_output:
            lines += [f"Expected output: {markdown_cell(e.expected_output, 300)}", ""]
        lines += table(benchmark_rows(e.configurations, e.deltas))
        if e.expectations:
            configurations = [s.configuration for s in e.configurations]
            configurations = list(dict.fromkeys(configurations))
            lines += [
                "| Expectation | " + " | ".join(configurations) + " |",
                "|---|" + "---|" * len(configurations),
            ]
            for tally in e.expectations:
                cells = [
                    f"{tally.passed.get(c, 0)}/{tally.runs.get(c, 0)} "
                    + (
                        "✅"
                        if tally.runs.get(c) and tally.passed.get(c, 0) == tally.runs.get(c)
                        else "❌"
                    )
                    for c in configurations
                ]
                lines.append(f"| {markdown_cell(tally.text, 120)} | " + " | ".join(cells) + " |")
            lines.append("")
    return lines


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def rate_text(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}%"


def sources_text(counts: dict[str, int]) -> str:
    """ "12 live, 3 mocked, 1 withheld by policy": who answered the run's tool calls."""
    return ", ".join(f"{n} {SOURCE_LABELS.get(source, source)}" for source, n in counts.items())


def _passed_row(results: Results) -> str:
    """The cases passed; beside a baseline (never counted), the gating cases only."""
    s = results.summary
    gating = [c for c in results.cases if gates(c)]
    if len(gating) == len(results.cases) or not gating:
        return f"| Passed | {s.passed}/{s.cases} ({percent(s.pass_rate)}) |"
    passed = sum(1 for c in gating if c.passed)
    return f"| Passed | {passed}/{len(gating)} ({percent(passed / len(gating))}; baseline apart) |"


def _markdown_headline(results: Results) -> list[str]:
    s, meta = results.summary, results.metadata
    icon = "✅" if results.passed else "❌"
    model = models_text(meta)
    lines = [
        f"## {icon} {MODE_TITLES.get(meta.evaluation, 'Evaluation')}: "
        + markdown_cell(results.headline_count, None),
        "",
        "| Metric | Value |",
        "|---|---|",
        _passed_row(results),
        f"| Runs | {s.runs} (pass threshold {percent(s.threshold)}) |",
        f"| Flaky | {s.flaky} |",
        f"| Runs with errors | {s.run_errors} |",
        f"| Model | {markdown_cell(model, None, code=True)}"
        + (f" (Claude Code {markdown_cell(meta.claude_version)})" if meta.claude_version else "")
        + " |",
        f"| Tokens | {s.usage.total:,} (input {s.usage.input_tokens:,}, output {s.usage.output_tokens:,}, "
        f"cache write {s.usage.cache_creation_input_tokens:,}, cache read {s.usage.cache_read_input_tokens:,}) |",
        f"| Cost | ${s.cost_usd:.4f} |",
        f"| Latency p50 / p95 | {s.latency_p50_ms / 1000:.1f}s / {s.latency_p95_ms / 1000:.1f}s |",
    ]
    for name, description in (meta.skill_descriptions or {}).items():
        lines.append(
            f"| Description of {markdown_cell(name, 64)} (--skill-description) | "
            f"{markdown_cell(description, None)} |"
        )
    for name, override in (meta.tool_overrides or {}).items():
        shown = override.get("description") or "(its server's)"
        lines.append(
            f"| Tool {markdown_cell(name, 64)} (--tool-overrides) | {markdown_cell(shown, None)}"
            + (" · input schema overridden" if "input_schema" in override else "")
            + " |"
        )
    if s.tool_calls_by_source:
        lines.append(f"| Tool calls | {markdown_cell(sources_text(s.tool_calls_by_source))} |")
    if s.not_started:
        lines.append(f"| Not started (--max-cost) | {s.not_started} |")
    if s.interrupted:
        lines.append("| Interrupted | yes: rerun with --resume |")
    return lines + [""]


def price_text(price: dict[str, float]) -> str:
    return f"${price.get('input', 0):g} / ${price.get('output', 0):g}"


def _matrix_cell_text(cell: MatrixCellRecord | None) -> str:
    if cell is None:
        return "-"
    verdict = "⚠️ error" if cell.error else "✅" if cell.passed else "❌"
    return f"{verdict} {cell.passes}/{cell.runs} · ${cell.cost_usd:.4f} · {cell.mean_latency_ms / 1000:.1f}s"


def markdown_matrix(matrix: ModelMatrixRecord) -> list[str]:
    """A model matrix side by side: each model's totals, the cases whose verdict depends on the
    model, then every case and every tool with a column per model."""
    models = matrix.models
    header = " | ".join(markdown_cell(m, None, code=True) for m in models)
    lines = [
        "### Models side by side",
        "",
        "| Model | Passed | Runs | Runs with errors | Cost | Latency p50 / p95 | Price in / out per MTok |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in matrix.summaries:
        lines.append(
            f"| {markdown_cell(s.model, None, code=True)} | {s.passed}/{s.cases} ({percent(s.pass_rate)}) | "
            f"{s.runs} | {s.run_errors} | ${s.cost_usd:.4f} | {s.latency_p50_ms / 1000:.1f}s / "
            f"{s.latency_p95_ms / 1000:.1f}s | {price_text(s.price)}{'' if s.priced else ' (guessed)'} |"
        )
    lines.append("")
    disagreeing = [row for row in matrix.cases if row.disagree]
    if disagreeing:
        lines += [
            f"**Pass on one model, fail on another ({len(disagreeing)})**",
            "",
            "| Case | Passes on | Fails on |",
            "|---|---|---|",
        ]
        lines += [
            f"| {markdown_cell(row.name, code=True)} | "
            f"{', '.join(markdown_cell(m, None, code=True) for m in row.passed_on)} | "
            f"{', '.join(markdown_cell(m, None, code=True) for m in row.failed_on)} |"
            for row in disagreeing
        ]
    else:
        lines.append("Every case has the same verdict on every model.")
    lines += ["", "| Case | " + header + " |", "|---|" + "---|" * len(models)]
    lines += [
        f"| {markdown_cell(row.name, code=True)} | "
        + " | ".join(_matrix_cell_text(row.models.get(m)) for m in models)
        + " |"
        for row in matrix.cases
    ]
    lines.append("")
    if matrix.tools:
        lines += [
            "| Tool (calls · F1 · mean call) | " + header + " |",
            "|---|" + "---|" * len(models),
        ]
        for tool in matrix.tools:
            cells = [tool.models.get(m) for m in models]
            lines.append(
                f"| {markdown_cell(tool.tool, None, code=True)} | "
                + " | ".join(
                    "-"
                    if c is None
                    else f"{c.calls} · {'n/a' if c.f1 is None else f'{c.f1:.2f}'} · {c.mean_ms:.0f} ms"
                    for c in cells
                )
                + " |"
            )
        lines.append("")
    return lines


def _interval_text(case: CaseResult) -> str:
    """A case's 95 % interval; "-" for one judgement (an overlap pair), which has none."""
    if case.interval is None:
        return "-"
    return f"{percent(case.interval[0])}–{percent(case.interval[1])}"


def _result_text(case: CaseResult) -> str:
    """A case's verdict; a red team's attacked case says held or breached, and utility apart."""
    verdict = "⚠️ error" if case.error else "✅" if case.passed else "❌"
    if not gates(case):  # a baseline (a plugin's arm without it, a task without the skill)
        return f"baseline ({'passed' if case.passed else 'not passed'})"
    if case.breaches is None:
        return verdict
    attack = f"breached {case.breaches}/{case.runs}" if case.breaches else "held"
    return f"{attack} · utility {verdict}"


def _reasons_text(case: CaseResult, separator: str) -> str:
    return separator.join(
        f"{markdown_cell(r, None)}" + (f" ({n}/{case.runs} runs)" if case.runs > 1 else "")
        for r, n in case.reasons.items()
    )


def _markdown_failures(cases: Iterable[CaseResult], matrix: bool | None = None) -> list[str]:
    matrix = is_matrix(cases) if matrix is None else matrix
    rows = [
        f"| {markdown_cell(case_label(c, matrix), code=True)} | {c.passes}/{c.runs} | {_reasons_text(c, '<br>')} |"
        for c in cases
        if not c.passed
    ]
    if not rows:
        return []
    return ["### Failures", "", "| Case | Passes | Reasons |", "|---|---|---|", *rows, ""]


def _markdown_flaky(cases: Iterable[CaseResult], matrix: bool | None = None) -> list[str]:
    matrix = is_matrix(cases) if matrix is None else matrix
    rows = [
        f"| {markdown_cell(case_label(c, matrix), code=True)} | {c.passes}/{c.runs} | "
        f"{_interval_text(c)} | {c.pass_at_k:.2f} | {c.pass_hat_k:.2f} |"
        for c in cases
        if c.flaky
    ]
    if not rows:
        return []
    return [
        "### Flaky",
        "",
        "| Case | Passes | 95% interval | pass@k | pass^k |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def _markdown_all_cases(cases: Iterable[CaseResult], matrix: bool | None = None) -> list[str]:
    lines = [
        "### All cases",
        "",
        "| Case | Result | Passes | 95% interval | Cost |",
        "|---|---|---|---|---|",
    ]
    matrix = is_matrix(cases) if matrix is None else matrix
    lines += [
        f"| {markdown_cell(case_label(c, matrix), code=True)} | {_result_text(c)} | "
        f"{c.passes}/{c.runs} | {_interval_text(c)} | ${c.cost_usd:.4f} |"
        for c in cases
    ]
    return lines + [""]


def _markdown_tool_selection(summary: SummaryRecord) -> list[str]:
    lines: list[str] = []
    if summary.tools:
        lines += [
            "### Tool selection",
            "",
            "| Tool | Precision | Recall | F1 | TP | FP | FN |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {markdown_cell(s.tool, None, code=True)} | {s.precision:.2f} | {s.recall:.2f} | {s.f1:.2f} | "
            f"{s.true_positives} | {s.false_positives} | {s.false_negatives} |"
            for s in summary.tools
        ]
        lines.append("")
    if summary.confusion:
        actual_tools = sorted({tool for row in summary.confusion.values() for tool in row})
        lines += [
            "### Confusion (expected tool → tool called first)",
            "",
            "| Expected \\ Called | "
            + " | ".join(markdown_cell(t, None, code=True) for t in actual_tools)
            + " |",
            "|---|" + "---|" * len(actual_tools),
        ]
        for expected in sorted(summary.confusion):
            row = summary.confusion[expected]
            lines.append(
                f"| {markdown_cell(expected, None, code=True)} | "
                + " | ".join(str(row.get(t, "")) for t in actual_tools)
                + " |"
            )
        lines.append("")
    return lines


def _markdown_tool_coverage(summary: SummaryRecord) -> list[str]:
    """Which of the servers' tools the suite expected, which Claude called, which it never did."""
    c = summary.tool_coverage
    if c is None or not (c.available or c.called):
        return []
    covered = sum(1 for tool in c.available if tool in c.calls)
    lines = [
        "### Tool coverage",
        "",
        f"{covered}/{len(c.available)} of the servers' tools called in some run"
        + (f" ({percent(c.coverage)})" if c.coverage is not None else "")
        + ".",
        "",
        "| Tool | Expected by a case | Calls |",
        "|---|---|---|",
    ]
    for tool in [*c.available, *(t for t in c.called if t not in c.available)]:
        calls = str(c.calls[tool]) if tool in c.calls else "never called"
        lines.append(
            f"| {markdown_cell(tool, None, code=True)} | {'yes' if tool in c.expected else ''} | "
            f"{calls}{'' if tool in c.available or not c.available else ' (not offered)'} |"
        )
    lines.append("")
    if c.expected and c.unexpected:
        lines += [
            "Called, but expected by no case: "
            + ", ".join(markdown_cell(t, None, code=True) for t in c.unexpected),
            "",
        ]
    if c.expected_not_called:
        lines += [
            "Expected, but never called: "
            + ", ".join(markdown_cell(t, None, code=True) for t in c.expected_not_called),
            "",
        ]
    return lines


def _markdown_calls_not_live(results: Results) -> list[str]:
    """Every call the servers did not run (mocked, replayed, withheld by --tool-policy), up to
    SUMMARY_TABLE_ROWS of them; the results JSON has each call's `source` and `executed`."""
    counts = results.summary.tool_calls_by_source
    if not counts or set(counts) == {"live"}:
        return []
    rows: list[str] = []
    for result in results.results():
        if not isinstance(result, ToolRunResult):
            continue  # a claude -p run's calls are its own tools, always live
        for call in result.tool_calls:
            if call.source != "live" and len(rows) < C.SUMMARY_TABLE_ROWS:
                rows.append(
                    f"| {markdown_cell(result.test_name)} | {result.iteration} | "
                    f"{markdown_cell(call.name, code=True)} | {markdown_cell(SOURCE_LABELS.get(call.source, call.source))} | "
                    f"{markdown_cell(call.output, 60)} |"
                )
    lines = [
        "## Tool calls not run against the server",
        "",
        f"{markdown_cell(sources_text(counts))} (tool policy: {markdown_cell(results.metadata.tool_policy or '-')}).",
        "",
    ]
    if rows:
        lines += ["| Case | Run | Tool | Answered | Answer |", "|---|---|---|---|---|", *rows, ""]
    return lines


def markdown_qa(qa: QaRecord) -> list[str]:
    """mcp-builder's evaluation report: accuracy, durations, tool calls, then every task with its
    expected and given answers and Claude's summary and feedback."""
    lines = [
        "### QA accuracy",
        "",
        "| Metric | Value |",
        "|---|---|",
        f"| Accuracy | {qa.correct}/{qa.runs} runs ({percent(qa.accuracy)}; 95% interval "
        f"{percent(qa.interval[0])}–{percent(qa.interval[1])}) |",
        f"| Tasks | {qa.tasks} |",
        f"| Average task duration | {qa.mean_task_seconds:.2f}s |",
        f"| Average tool calls per run | {qa.mean_tool_calls:.2f} |",
        f"| Total tool calls | {qa.tool_calls} |",
        "",
    ]
    if qa.tools:
        lines += ["| Tool | Calls | Total time | Mean | Longest |", "|---|---|---|---|---|"]
        lines += [
            f"| {markdown_cell(t.tool, None, code=True)} | {t.calls} | {t.total_ms / 1000:.2f}s | "
            f"{t.mean_ms:.0f} ms | {t.max_ms:.0f} ms |"
            for t in qa.tools
        ]
        lines.append("")
    for task in qa.task_results:
        mark = "✅" if task.correct == task.runs else "❌" if task.correct == 0 else "⚠️"
        lines += [
            f"#### {mark} {markdown_cell(task.name, None)}: {task.correct}/{task.runs} correct",
            "",
            f"**Question**: {markdown_cell(task.question, 2000)}",
            "",
            f"**Expected answer**: {markdown_cell(task.expected, 300, code=True)} ({task.answer_match})",
            "",
            "| Run | Answer | Correct | Duration | Tool calls |",
            "|---|---|---|---|---|",
        ]
        for r in task.results:
            given = f"error: {r.error}" if r.error else r.answer if r.answer else "(none)"
            tools = ", ".join(f"{t.tool} ×{t.calls} ({t.total_ms / 1000:.2f}s)" for t in r.tools)
            lines.append(
                f"| {r.iteration} | {markdown_cell(given, 200, code=True)} | {'✅' if r.correct else '❌'} | "
                f"{r.seconds:.2f}s | {r.tool_calls}{': ' + markdown_cell(tools, 300) if tools else ''} |"
            )
        lines.append("")
        for r in task.results:
            which = f" (run {r.iteration})" if task.runs > 1 else ""
            for title, note in (("Summary", r.summary), ("Feedback", r.feedback)):
                if note:
                    lines += [f"**{title}**{which}: {markdown_cell(note, C.QA_NOTE_CHARS)}", ""]
    return lines


def trigger_score_label(score: TriggerScoreRecord) -> str:
    """A skill's scores as the reports name them: with the crowd's step when there is one."""
    return score.skill + (
        f" (+{score.distractors} distractors)" if score.distractors is not None else ""
    )


def trigger_analysis_markdown(scores: Sequence[TriggerScoreRecord]) -> str:
    """Seed 001's "Trigger Analysis" section: a metric table with counts, a query table."""
    lines = ["## Trigger Analysis", ""]
    for score in scores:
        if len(scores) > 1:
            lines += [f"### {markdown_cell(trigger_score_label(score), None)}", ""]
        lines += [
            "| Metric | Value |",
            "|--------|-------|",
            f"| Trigger Rate | {rate_text(score.trigger_rate)} ({score.positives_activated}/{score.positives} "
            "positive activated) |",
            f"| False Positive Rate | {rate_text(score.false_positive_rate)} ({score.negatives_activated}/"
            f"{score.negatives} negative activated) |",
            f"| Trigger Score | {score.trigger_score:.1f}% |",
            f"| Precision / Recall / F1 | {score.precision:.0f}% / {rate_text(score.recall)} / {score.f1:.0f}% |",
            f"| Errored runs | {score.errored_runs}/{score.total_runs} "
            f"({score.errored_queries} queries without a usable run) |",
            f"| Cost | ${score.cost_usd:.4f} |",
            "",
            "#### Query Results" if len(scores) > 1 else "### Query Results",
            "",
            "| Query | Expected | Actual | Rate | Tools | Fired | Cost |",
            "|-------|----------|--------|------|-------|-------|------|",
        ]
        for q in score.query_results:
            mark = "⚠️" if q.actual == "error" else "✅" if q.correct else "❌"
            expected = q.expected + (" (routing)" if q.routing else "")
            fired = ", ".join(f"{name}×{n}" for name, n in sorted(q.fired_skills.items())) or "-"
            lines.append(
                f'| "{markdown_cell(q.query)}" | {expected} | {mark} {q.actual} | '
                f"{q.activations}/{q.runs} | {q.tool_count:g} | {markdown_cell(fired, 40)} | "
                f"${q.cost_usd:.4f} |"
            )
        hooked = [q for q in score.query_results if q.hooks]
        if hooked:  # a plugin's hooks: what each did, in how many of the query's runs
            lines += ["", "| Query | Hooks (runs) |", "|-------|--------------|"]
            lines += [
                f'| "{markdown_cell(q.query)}" | '
                + markdown_cell(
                    ", ".join(f"{h} ({n}/{q.runs})" for h, n in sorted(q.hooks.items()))
                )
                + " |"
                for q in hooked
            ]
        lines.append("")
    return "\n".join(lines)


UNCONFINED_NOTE = (
    "Task runs were not confined (--unconfined): their Bash commands ran as you, outside any "
    "sandbox, and could read and write whatever you can."
)


def markdown_isolation(isolation: IsolationRecord | None) -> list[str]:
    if isolation is None or not (
        isolation.outside_writes or isolation.changed_elsewhere or isolation.unconfined
    ):
        return []
    lines = ["## Isolation", ""] + ([UNCONFINED_NOTE, ""] if isolation.unconfined else [])
    if isolation.outside_writes:
        lines += ["Files changed outside the temporary projects:", ""]
        lines += [f"- {markdown_cell(p, None, code=True)}" for p in isolation.outside_writes]
        lines += [""]
    if isolation.changed_elsewhere:
        lines += [
            "Files changed while the runs ran, which no run could change (confined): another "
            "program did it (`--ignore-path GLOB` leaves such files out):",
            "",
        ]
        lines += [f"- {markdown_cell(p, None, code=True)}" for p in isolation.changed_elsewhere]
        lines += [""]
    return lines


def render_markdown(results: Results) -> str:
    """A report that reads well as a pull-request comment: the verdict first, failures next,
    then what the mode adds (tool selection, trigger analysis, isolation)."""

    def sections(place: str) -> list[str]:
        return [
            line
            for section, value in results.shown(place)
            if section.markdown
            for line in section.markdown(value)
        ]

    lines = sections("first") + _markdown_headline(results) + sections("before_cases")
    matrix = results.matrix
    gating = [c for c in results.cases if gates(c)]  # a baseline is never a failure
    lines += _markdown_failures(gating, matrix) + _markdown_flaky(results.cases, matrix)
    lines += _markdown_all_cases(results.cases, matrix)
    lines += _markdown_tool_selection(results.summary) + _markdown_tool_coverage(results.summary)
    lines += _markdown_calls_not_live(results) + sections("after_cases")
    return "\n".join(lines)
