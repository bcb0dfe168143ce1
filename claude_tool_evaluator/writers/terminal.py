"""The terminal: the case table, the summary, progress and the live conversation view.

May import: the rooms above the writers, writers.markdown."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

import test_constants as C

from ..engine import ConversationObserver
from ..finished_run import MODE_TITLES, case_label, gates, passes_text
from ..hub.calls import SOURCE_LABELS
from ..redaction import Redactor
from ..run_types import Usage
from ..sinks import escape_markup, preview, terminal_text
from .markdown import (
    BENCHMARK_HEADERS,
    benchmark_rows,
    percent,
    price_text,
    rate_text,
    sources_text,
    trigger_score_label,
)

__all__ = [
    "LiveConversationView",
    "RunProgress",
    "print_benchmark",
    "print_cache_saving",
    "print_case_table",
    "print_matrix",
    "print_qa",
    "print_run_summary",
    "print_summary",
    "print_tool_table",
    "print_trigger_table",
]

if TYPE_CHECKING:
    from ..finished_run import Results
    from ..hub.calls import ToolPolicy
    from ..hub.tools import ToolSpec
    from ..results_schema.document import (
        BenchmarkRecord,
        CaseResult,
        Metadata,
        ToolCoverageRecord,
        TriggerScoreRecord,
    )
    from ..results_schema.sections import MatrixCaseRecord, ModelMatrixRecord, QaRecord
    from ..run_types import ToolCall, Transcript, Verdict


def print_benchmark(console: Console, benchmark: BenchmarkRecord) -> None:
    """The benchmark in the terminal: every configuration and the deltas, then one row per eval."""
    table = Table(title="Task evals: benchmark (mean ± stddev over runs)", title_justify="left")
    for header in BENCHMARK_HEADERS:
        table.add_column(header)
    for row in benchmark_rows(benchmark.configurations, benchmark.deltas):
        table.add_row(*[escape_markup(c) for c in row])
    for e in benchmark.evals:
        for row in benchmark_rows(e.configurations, e.deltas):
            table.add_row(
                *[escape_markup(f"{e.name}: {row[0]}"), *[escape_markup(c) for c in row[1:]]]
            )
    console.print(table)


def print_trigger_table(console: Console, score: TriggerScoreRecord) -> None:
    table = Table(title=escape_markup(f"Trigger results: {trigger_score_label(score)}"))
    for column in ("query", "expected", "actual", "rate", "tools", "fired", "cost $"):
        table.add_column(column, overflow="fold")
    for q in score.query_results:
        colour = "yellow" if q.actual == "error" else "green" if q.correct else "red"
        table.add_row(
            escape_markup(preview(q.query, 70)),
            q.expected + (" (routing)" if q.routing else ""),
            f"[{colour}]{q.actual}[/{colour}]",
            f"{q.activations}/{q.runs}",
            f"{q.tool_count:g}",
            escape_markup(", ".join(sorted(q.fired_skills)) or "-"),
            f"{q.cost_usd:.4f}",
        )
    console.print(table)
    for q in score.query_results:  # a plugin's hooks: what each did, in how many runs
        if q.hooks:
            said = ", ".join(f"{hook} ({n}/{q.runs})" for hook, n in sorted(q.hooks.items()))
            console.print(
                f"  hooks on {escape_markup(preview(q.query, 50))}: {escape_markup(said)}"
            )
    console.print(
        f"triggerRate {rate_text(score.trigger_rate)} ({score.positives_activated}/{score.positives})  "
        f"falsePositiveRate {rate_text(score.false_positive_rate)} ({score.negatives_activated}/"
        f"{score.negatives})  [bold]triggerScore {score.trigger_score:.1f}%[/bold]  "
        f"precision {score.precision:.0f}%  recall {rate_text(score.recall)}  F1 {score.f1:.0f}%  "
        f"errored runs {score.errored_runs}/{score.total_runs}  cost ${score.cost_usd:.4f}",
        highlight=False,
    )


def _attack_text(c: CaseResult) -> str:
    """A red team's case: whether the attack held in every run or breached some (its own
    checks, utility, are the case's verdict)."""
    if c.breaches is None:
        return "no attack"
    if c.breaches:
        return f"[red]breached {c.breaches}/{c.runs}[/red]"
    return "[yellow]not measured[/yellow]" if c.error else "[green]held[/green]"


def _redteam_verdict(results: Results) -> str | None:
    """The verdict line of a red team (cases with `breaches`), as the rows above it say it:
    the attacks that succeeded, the clean cases that failed their own checks."""
    attacked = breached = breaches = runs = clean_failed = 0
    for c in results.cases:
        if c.breaches is None:
            clean_failed += not c.passed
        else:
            attacked, breached = attacked + 1, breached + bool(c.breaches)
            breaches, runs = breaches + c.breaches, runs + c.runs
    if not attacked:
        return None
    if results.passed:
        return f"every attack held in all {runs} attacked run(s)"
    why = []
    if breached:
        why.append(
            f"an attack succeeded in {breached} of {attacked} attacked case(s) "
            f"({breaches} breached run(s))"
        )
    if clean_failed:
        why.append(f"{clean_failed} case(s) without an attack failed their own checks")
    return "; ".join(why) or None


def print_case_table(
    console: Console, cases: Iterable[CaseResult], title: str, matrix: bool | None = None
) -> None:
    """Failures and flaky cases (and a red team's breached ones), then passes while the table
    stays readable (SUMMARY_TABLE_ROWS); `title` ends with the count passed (read as the cases
    stream past). A red team's rows say held or breached, and utility apart."""
    table = Table()
    shown: list[CaseResult] = []
    passes: list[CaseResult] = []
    total = passed = baseline = baseline_passed = attacked = held = 0
    models: set[str | None] = set()
    for c in cases:
        total += 1
        passed += c.passed
        if not gates(c):  # a baseline configuration: counted apart (it never fails the suite)
            baseline, baseline_passed = baseline + 1, baseline_passed + c.passed
        if c.breaches is not None:
            attacked, held = attacked + 1, held + (not c.breaches)
        models.add(c.model)
        if not c.passed or c.flaky or c.breaches:
            shown.append(c)
        elif len(passes) < C.SUMMARY_TABLE_ROWS:
            passes.append(c)
    shown += passes[: max(0, C.SUMMARY_TABLE_ROWS - len(shown))]
    matrix = len(models) > 1 if matrix is None else matrix
    counted = passes_text(passed, total, baseline_passed, baseline)
    if attacked:
        counted = f"attacks held in {held}/{attacked} attacked case(s); utility: {counted}"
    table.title = escape_markup(f"{title}: {counted}")
    passes_header = "utility passes" if attacked else "passes"
    for column in ("case", "result", passes_header, "95% interval", "cost $", "reasons"):
        table.add_column(column, overflow="fold")
    for c in sorted(shown, key=lambda c: (c.passed and not c.breaches, c.passed)):
        verdict = (
            "[yellow]error[/yellow]"
            if c.error
            else "[green]pass[/green]"
            if c.passed
            else "[red]FAIL[/red]"
            if gates(c)
            else "baseline"  # the arm without the plugin or the skill: never a failure
        )
        verdict += " [yellow](flaky)[/yellow]" if c.flaky else ""
        if attacked:
            verdict = f"{_attack_text(c)} · utility: {verdict}"
        table.add_row(
            escape_markup(case_label(c, matrix)),
            verdict,
            f"{c.passes}/{c.runs}",
            "-" if c.interval is None else f"{percent(c.interval[0])}–{percent(c.interval[1])}",
            f"{c.cost_usd:.4f}",
            escape_markup("; ".join(c.reasons)),
        )
    if total:
        console.print(table)
    if len(shown) < total:
        console.print(
            f"... and {total - len(shown)} more passing case(s): see --report or -o",
            highlight=False,
        )


def print_qa(console: Console, qa: QaRecord) -> None:
    """Every QA task: expected and given answers, runs correct, duration, tool calls; then
    Claude's summary and feedback on the tools, a line each."""
    table = Table(
        title=escape_markup(
            f"QA accuracy {percent(qa.accuracy)}: {qa.correct}/{qa.runs} runs correct "
            f"(95% interval {percent(qa.interval[0])}–{percent(qa.interval[1])})"
        )
    )
    for column in ("task", "expected", "answers", "correct", "duration", "tool calls"):
        table.add_column(column, overflow="fold")
    for task in qa.task_results:
        answers = list(
            dict.fromkeys("error" if r.error else r.answer or "(none)" for r in task.results)
        )
        colour = "green" if task.correct == task.runs else "red" if task.correct == 0 else "yellow"
        tools = ", ".join(f"{t.tool}×{t.calls} {t.mean_ms:.0f}ms" for t in task.tools) or "-"
        table.add_row(
            escape_markup(task.name),
            escape_markup(preview(task.expected, 60)),
            escape_markup("; ".join(preview(a, 60) for a in answers)),
            f"[{colour}]{task.correct}/{task.runs}[/{colour}]",
            f"{task.mean_seconds:.1f}s",
            escape_markup(f"{task.tool_calls}: {tools}" if task.tool_calls else "0"),
        )
    console.print(table)
    for task in qa.task_results:
        for title, note in (
            ("summary", next((r.summary for r in task.results if r.summary), None)),
            ("feedback on the tools", next((r.feedback for r in task.results if r.feedback), None)),
        ):
            if note:
                console.print(
                    f"{escape_markup(task.name)} {title}: {escape_markup(preview(note, 300))}",
                    highlight=False,
                    soft_wrap=True,
                )
    console.print(
        f"average task duration {qa.mean_task_seconds:.1f}s · tool calls {qa.tool_calls} "
        f"({qa.mean_tool_calls:.1f} per run)",
        highlight=False,
    )


def _print_tool_coverage(console: Console, c: ToolCoverageRecord) -> None:
    covered = sum(1 for tool in c.available if tool in c.calls)
    parts = [f"tool coverage {covered}/{len(c.available)} ({percent(c.coverage or 0.0)})"]
    if c.never_called:
        parts.append("never called: " + ", ".join(c.never_called))
    if c.expected_not_called:
        parts.append("expected but never called: " + ", ".join(c.expected_not_called))
    if c.expected and c.unexpected:
        parts.append("called but expected by no case: " + ", ".join(c.unexpected))
    console.print(escape_markup(" · ".join(parts)), highlight=False, soft_wrap=True)


def _print_descriptions_shown(console: Console, meta: Metadata) -> None:
    """What Claude saw instead of the files: --skill-description and --tool-overrides."""
    for name, description in (meta.skill_descriptions or {}).items():
        console.print(
            f"description of {terminal_text(name)} (--skill-description): {terminal_text(description)}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    for name, override in (meta.tool_overrides or {}).items():
        console.print(
            f"tool {terminal_text(name)} (--tool-overrides): "
            f"{terminal_text(override.get('description') or '(its server description)')}"
            + (" · input schema overridden" if "input_schema" in override else ""),
            highlight=False,
            soft_wrap=True,
            markup=False,
        )


def print_matrix(console: Console, matrix: ModelMatrixRecord) -> None:
    """A model matrix side by side: per model its totals, per case (those whose verdict depends on
    the model first) a column per model, per tool its calls and F1; then the disagreements."""
    table = Table(title="Models side by side")
    for column in (
        "model",
        "passed",
        "runs",
        "errors",
        "cost $",
        "latency p50 / p95",
        "$/MTok in / out",
    ):
        table.add_column(column, overflow="fold")
    for s in matrix.summaries:
        table.add_row(
            escape_markup(s.model),
            f"{s.passed}/{s.cases} ({percent(s.pass_rate)})",
            str(s.runs),
            str(s.run_errors),
            f"{s.cost_usd:.4f}",
            f"{s.latency_p50_ms / 1000:.1f}s / {s.latency_p95_ms / 1000:.1f}s",
            escape_markup(price_text(s.price) + ("" if s.priced else " (guessed)")),
        )
    console.print(table)
    cases = Table(title="Cases per model")
    cases.add_column("case", overflow="fold")
    for model in matrix.models:
        cases.add_column(escape_markup(model), overflow="fold")
    disagreeing: list[MatrixCaseRecord] = []  # shown first, and named again below
    agreeing: list[MatrixCaseRecord] = []
    total = 0
    for row in matrix.cases:
        total += 1
        if row.disagree:
            disagreeing.append(row)
        elif len(agreeing) < C.SUMMARY_TABLE_ROWS:
            agreeing.append(row)
    for row in (disagreeing + agreeing)[: C.SUMMARY_TABLE_ROWS]:
        cells = []
        for model in matrix.models:
            cell = row.models.get(model)
            colour = "yellow" if cell is None or cell.error else "green" if cell.passed else "red"
            cells.append(
                "-"
                if cell is None
                else f"[{colour}]{cell.passes}/{cell.runs}[/{colour}] ${cell.cost_usd:.4f} "
                f"{cell.mean_latency_ms / 1000:.1f}s"
            )
        cases.add_row(
            escape_markup(row.name) + (" [yellow](differs)[/yellow]" if row.disagree else ""),
            *cells,
        )
    console.print(cases)
    if total > C.SUMMARY_TABLE_ROWS:
        console.print(
            f"... and {total - C.SUMMARY_TABLE_ROWS} more case(s): see --report or -o",
            highlight=False,
        )
    if matrix.tools:
        tools = Table(title="Tools per model (calls · F1 · mean call)")
        tools.add_column("tool", overflow="fold")
        for model in matrix.models:
            tools.add_column(escape_markup(model), overflow="fold")
        for tool in matrix.tools:
            tools.add_row(
                escape_markup(tool.tool),
                *(
                    "-"
                    if (c := tool.models.get(m)) is None
                    else f"{c.calls} · {'n/a' if c.f1 is None else f'{c.f1:.2f}'} · "
                    f"{c.mean_ms:.0f} ms"
                    for m in matrix.models
                ),
            )
        console.print(tools)
    if not disagreeing:
        console.print("every case has the same verdict on every model", highlight=False)
    for row in disagreeing:
        console.print(
            f"[yellow]differs by model:[/yellow] {escape_markup(row.name)}: passes on "
            f"{escape_markup(', '.join(row.passed_on))}, fails on {escape_markup(', '.join(row.failed_on))}",
            highlight=False,
            soft_wrap=True,
        )


def _cost_text(cost: float, cache: dict[str, Any] | None) -> str:
    """The run's cost as the totals line says it: under --cache, what was spent apart from what
    the cache answered (the results keep the whole cost, so a cached rerun equals its run)."""
    saved = cache.get("saved_usd", 0.0) if cache else 0.0
    if not saved:
        return f"cost ${cost:.4f}"
    return f"cost ${max(cost - saved, 0.0):.4f} spent (${saved:.4f} more answered from --cache)"


def print_cache_saving(console: Console, cache: dict[str, Any] | None) -> None:
    """--cache: what this run took from the folder, and what that would have cost."""
    if cache:
        console.print(
            f"--cache: {cache['hits']} model call(s) answered from the cache, {cache['misses']} "
            f"sent; ${cache['saved_usd']:.4f} saved"
            + (
                f"; {cache['refused']} entr(ies) refused (see the warnings above)"
                if cache.get("refused")
                else ""
            ),
            highlight=False,
            markup=False,
        )


def print_summary(
    console: Console, results: Results, verdict: str | None = None, runs_table: bool = True
) -> None:
    """The cases (failures and flaky first, passes while the table stays readable), the mode's
    own tables, then one line of totals and the verdict (with `verdict`, or a red team's, saying
    why). Without `runs_table` (scan, overlap: no suite of model runs) the mode's own tables are
    the results: no case table of passes and intervals, no line of tokens and latency."""
    results = results.redacted()

    def sections(place: str) -> None:
        for section, value in results.shown(place):
            if section.terminal:
                section.terminal(console, value)

    sections("first")
    sections("before_cases")
    if runs_table:
        print_case_table(
            console,
            (c for c in results.cases if c.kind != "trigger_query"),
            MODE_TITLES.get(results.metadata.evaluation, "Results"),
            results.matrix,
        )
    sections("after_cases")
    s = results.summary
    if s.tool_coverage is not None and s.tool_coverage.available and s.runs:
        _print_tool_coverage(console, s.tool_coverage)
    if s.tool_calls_by_source and set(s.tool_calls_by_source) != {"live"}:
        console.print(
            f"tool calls: {terminal_text(sources_text(s.tool_calls_by_source))}",
            highlight=False,
            markup=False,
        )
    _print_descriptions_shown(console, results.metadata)
    print_cache_saving(console, results.metadata.cache)
    if results.metadata.auto_runs:
        taken = [c.runs for c in results.cases]
        console.print(
            f"-i auto: {min(taken, default=0)}–{max(taken, default=0)} run(s) per case "
            f"(between {results.metadata.auto_runs[0]} and the cap of "
            f"{results.metadata.auto_runs[1]}); {sum(t >= results.metadata.auto_runs[1] for t in taken)} "
            "case(s) ran to the cap",
            highlight=False,
            markup=False,
        )
    if runs_table:
        console.print(
            f"tokens {s.usage.total:,} (cache read {s.usage.cache_read_input_tokens:,}) · "
            f"{_cost_text(s.cost_usd, results.metadata.cache)} · latency p50 {s.latency_p50_ms / 1000:.1f}s "
            f"p95 {s.latency_p95_ms / 1000:.1f}s · runs with errors {s.run_errors}",
            highlight=False,
            soft_wrap=True,
        )
    verdict = verdict or _redteam_verdict(results)
    console.print(
        ("[bold green]PASS[/bold green]" if results.passed else "[bold red]FAIL[/bold red]")
        + (f": {escape_markup(verdict)}" if verdict else ""),
        highlight=False,
        soft_wrap=True,
    )


_ANNOTATION_LABELS = {
    "readOnlyHint": "read-only",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "open-world",
}


def print_tool_table(console: Console, tools: dict[str, ToolSpec], policy: ToolPolicy) -> None:
    """--dry-run: every tool with the MCP annotations its server sets true (read-only, destructive,
    idempotent, open-world), and what --tool-policy (with mocks and replay) does with its calls."""
    table = Table(title=f"Tools (--tool-policy {policy.policy})", show_lines=False)
    table.add_column("tool", no_wrap=True)
    for column in ("server", "annotations", "calls"):
        table.add_column(column, overflow="fold")
    for tool in sorted(tools.values(), key=lambda t: t.name):
        marks = [
            label
            for hint, label in _ANNOTATION_LABELS.items()
            if tool.annotations.get(hint) is True
        ]
        treatment = policy.treatment(tool)
        escaped = escape_markup(treatment)
        shown = (
            f"[red]{escaped}[/red]"
            if tool.destructive and treatment.startswith("live")
            else f"[yellow]{escaped}[/yellow]"
            if "withheld" in treatment
            else escaped
        )
        table.add_row(
            escape_markup(tool.name), escape_markup(tool.server), ", ".join(marks) or "-", shown
        )
    console.print(table)
    for note in policy.notes(tools):  # redacted and escaped like every line of ours
        shown = escape_markup(Redactor.for_run().text(note))
        console.print(f"[yellow]note:[/yellow] {shown}", highlight=False, soft_wrap=True)


class RunProgress:
    """The live progress line of a suite: runs done, passes, failures, tokens, cost, ETA. A red
    team's (`attack_of`: a run's breach, None for a clean run) counts the attacked runs held and
    breached first, and the passes and failures as what they are: utility."""

    def __init__(
        self,
        console: Console,
        total: int | None,  # None until the pipeline has counted the runs (set_total)
        verdict_of: Callable[[Any], Verdict | None],
        usage_of: Callable[[Any], tuple[Usage, float]],
        attack_of: Callable[[Any], bool | None] | None = None,
        lazy: bool = False,  # shown from begin() (the runs' session open), not from `with`
    ) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.verdict_of, self.usage_of, self.attack_of = verdict_of, usage_of, attack_of
        self.lazy, self.shown = lazy, False
        self.passes = self.failures = self.held = self.breached = 0
        self.usage = Usage()
        self.cost = 0.0
        self.progress = Progress(
            TextColumn("[bold]runs"),
            BarColumn(),
            MofNCompleteColumn(),
            *(
                [
                    TextColumn(
                        "attacks: [green]{task.fields[held]} held[/green] "
                        "[red]{task.fields[breached]} breached[/red] · utility:"
                    )
                ]
                if attack_of
                else []
            ),
            TextColumn(
                "[green]{task.fields[passes]} pass[/green] [red]{task.fields[failures]} fail[/red]"
            ),
            TextColumn("{task.fields[tokens]} tok ${task.fields[cost]}"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task(
            "runs", total=total, passes=0, failures=0, held=0, breached=0, tokens=0, cost="0.0000"
        )

    def __enter__(self) -> RunProgress:
        if not self.lazy:
            self.begin()
        return self

    def begin(self) -> None:
        """Show the bar (once): a lazy one when the runs' session is open, so a suite refused
        while the servers connect prints its error without an empty `runs 0/N` above it."""
        if not self.shown:
            self.shown = True
            self.progress.start()

    def set_total(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.shown:
            self.progress.stop()

    def on_record(self, record: Any) -> None:
        verdict = self.verdict_of(record)
        if verdict is not None:
            self.passes += verdict.passed
            self.failures += not verdict.passed
        breached = self.attack_of(record) if self.attack_of else None  # after its verdict
        if breached is not None:
            self.held, self.breached = self.held + (not breached), self.breached + breached
        usage, cost = self.usage_of(record)
        self.usage, self.cost = self.usage + usage, self.cost + cost
        self.progress.update(
            self.task,
            advance=1,
            passes=self.passes,
            failures=self.failures,
            held=self.held,
            breached=self.breached,
            tokens=f"{self.usage.total:,}",
            cost=f"{self.cost:.4f}",
        )


def print_run_summary(console: Console, transcripts: list[Transcript]) -> None:
    """-q without -o or --json: every run as a row, and Claude's last answer."""
    table = Table(title="Evaluation results", show_lines=False)
    for column in (
        "case",
        "iter",
        "tools called",
        "turns",
        "tokens",
        "cost $",
        "latency",
        "ended by",
    ):
        table.add_column(column, overflow="fold")
    several = len({t.model for t in transcripts}) > 1  # a model matrix: each run names its model
    for t in transcripts:
        ended = f"[red]error[/red]: {escape_markup(t.error)}" if t.error else t.ended_by
        name = f"{t.case.name} ({t.model})" if several else t.case.name
        table.add_row(
            escape_markup(name),
            str(t.iteration),
            escape_markup(
                ", ".join(
                    call.name
                    + ("" if call.source == "live" else f" ({SOURCE_LABELS[call.source]})")
                    for call in t.tool_calls
                )
                or "-"
            ),
            str(len(t.history)),
            f"{t.usage.total:,}",
            f"{t.cost_usd:.4f}",
            f"{t.latency_ms / 1000:.1f}s",
            ended,
        )
    console.print(table)
    last = next((t for t in transcripts if t.final_text), None)
    if last:
        console.print(
            f"[bold]Final answer[/bold] ({escape_markup(last.case.name)}, iteration {last.iteration}):"
        )
        console.print(terminal_text(last.final_text, multiline=True), markup=False, highlight=False)


class LiveConversationView(ConversationObserver):
    """A conversation on the terminal as it happens: user and Claude text (streamed), each tool
    call with its arguments and the start of its result, and a status line after every model
    turn with turns, tokens and cost."""

    def __init__(self, console: Console, max_turns: int) -> None:
        self.console = console
        self.max_turns = max_turns
        self.in_text = False  # Claude's text is being printed; its header is out

    def say(self, markup: str, text: str = "") -> None:
        self.console.print(markup, highlight=False)
        if text:
            self.console.print(terminal_text(text, multiline=True), markup=False, highlight=False)

    def end_text(self) -> None:
        if self.in_text:
            self.console.print()
            self.in_text = False

    def on_start(self, transcript: Transcript) -> None:
        self.console.rule(
            f"{escape_markup(transcript.case.name)} · iteration {transcript.iteration}"
        )
        for entry in transcript.history:
            label = (
                "[bold green]You[/bold green]"
                if entry.role == "user"
                else "[bold cyan]Claude[/bold cyan]"
            )
            self.say(label, entry.content)

    def on_user(self, text: str, simulated: bool = False) -> None:
        if simulated:  # a person's reply is on the screen already: they typed it
            self.say("[bold magenta]Simulated user[/bold magenta]", text)

    def on_assistant_text(self, text: str) -> None:
        if not self.in_text:
            self.say("[bold cyan]Claude[/bold cyan]")
            self.in_text = True
        self.console.print(
            terminal_text(text, multiline=True),
            end="",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def on_tool_call(self, call: ToolCall) -> None:
        self.end_text()
        arguments = json.dumps(call.input, ensure_ascii=False)
        how = (
            ""
            if call.source == "live"
            else f"[magenta]{escape_markup('[' + SOURCE_LABELS.get(call.source, call.source) + ']')}[/magenta] "
        )
        self.console.print(
            f"  [yellow]⚙ {escape_markup(call.name)}[/yellow] {how}", end="", highlight=False
        )
        self.console.print(terminal_text(preview(arguments, 200)), markup=False, highlight=False)
        colour = "red" if call.is_error else "dim"
        shown = preview(
            call.output or "(no output)", min(C.TOOL_RESULT_PREVIEW_CHARS, self.console.width - 8)
        )
        self.console.print(f"    [{colour}]↳ {escape_markup(shown)}[/{colour}]", highlight=False)

    def on_turn_end(self, transcript: Transcript) -> None:
        self.end_text()
        self.console.print(
            f"[dim]turn {transcript.model_calls}/{self.max_turns} · "
            f"{transcript.usage.total:,} tokens · ${transcript.cost_usd:.4f}[/dim]",
            highlight=False,
        )

    def on_conversation_end(self, transcript: Transcript) -> None:
        self.end_text()
        detail = f": {transcript.error}" if transcript.error else ""
        self.console.print(
            f"[bold]ended by {transcript.ended_by}[/bold]{escape_markup(detail)} · "
            f"{transcript.user_interventions} user repl{'y' if transcript.user_interventions == 1 else 'ies'} · "
            f"{transcript.usage.total:,} tokens · ${transcript.cost_usd:.4f}",
            highlight=False,
        )
