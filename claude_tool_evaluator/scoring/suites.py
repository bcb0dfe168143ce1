"""How each kind of suite is scored (Scoring): tool checks, QA accuracy, answers of markdown tests.

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import test_constants as C

from ..answers import transcript_answer, transcript_tagged
from ..files import SpooledRecords, spooled_into
from ..loaders.csv_suites import check_case_tools
from ..results_schema.document import ClaudeRun, SkillTestRecord, ToolTimeRecord
from ..results_schema.sections import QaRecord, QaRunRecord, QaTaskRecord
from ..run_types import Verdict
from ..sinks import cap_text
from .literature import BFCL_TAG, TAU2_TAG, benchmark_run, literature_records
from .skills import score_skill_test, score_test_run
from .statistics import rounded_interval, summarize_case, wilson_interval
from .tool_use import OUTCOME_CHECKS, TOOL_CHECKS, score_tool_use
from .verdicts import case_result_from_summary, case_result_from_test, run_score_reasons

__all__ = [
    "AnswerScoring",
    "QaScoring",
    "Scoring",
    "SuiteScoring",
    "ToolCheckScoring",
    "skill_test_record",
]

if TYPE_CHECKING:
    from ..hub.calls import McpHub
    from ..hub.tools import ToolSpec
    from ..results_schema.document import CaseResult, SkillTestResult
    from ..run_types import SkillTest, TestCase, Transcript
    from .literature import BenchmarkRun


class Scoring(Protocol):
    """How a tool-use mode turns its runs into verdicts: each run's verdict (the journal, the
    progress bar and the reports share it), the verdict of each case over its runs, and the
    results sections the mode adds. `tools` are the servers' tools (schemas for the checks, the
    list for tool coverage); --merge restores each run's verdict as its shard gave it."""

    cases: Sequence[TestCase]
    tools: dict[str, Any]

    def connected(self, hub: McpHub) -> None: ...
    def verdict(self, t: Transcript) -> Verdict: ...
    def case_results(
        self, transcripts: Iterable[Transcript], threshold: float, group: str
    ) -> Iterator[CaseResult]: ...
    def sections(self) -> dict[str, Any]: ...  # once case_results has been read


class ToolCheckScoring:
    """The checks a case asks for (tools expected and forbidden, arguments, order, counts, the
    tools' own schemas) on each run; a case passes at --threshold of its runs."""

    def __init__(self, cases: Sequence[TestCase], check_names: bool) -> None:
        self.cases, self.check_names = cases, check_names
        self.tools: dict[str, ToolSpec] = {}
        # the cases the mode's own sections read (QA report, literature): all, but a red team's
        # attacked copies (RedTeamScoring)
        self.reported: Callable[[str], bool] = lambda name: True

    def connected(self, hub: McpHub) -> None:
        if self.check_names:
            check_case_tools(self.cases, hub.tool_names())  # before the first model call
        self.tools.update(hub.tools)

    def verdict(self, t: Transcript) -> Verdict:
        """Once per run: the journal, the progress bar and the reports share it (it is kept on
        the transcript, and goes with it)."""
        if t.verdict is None:
            t.verdict = score_tool_use(t.case, t, self.tools)
        return t.verdict

    def case_results(
        self, transcripts: Iterable[Transcript], threshold: float, group: str
    ) -> Iterator[CaseResult]:
        """A case over its runs; with several models, a case per model (runs come case by case,
        and model by model within a case). One case's runs in memory at a time."""
        for _, grouped in itertools.groupby(transcripts, key=lambda t: (t.case.name, t.model)):
            runs = list(grouped)
            summary = summarize_case(runs[0].case, [self.verdict(t) for t in runs], runs, threshold)
            case = case_result_from_summary(summary, group, sum(t.latency_ms for t in runs) / 1000)
            case.model = runs[0].model
            yield case

    def sections(self) -> dict[str, Any]:
        """What this kind of suite adds to the results, once case_results has been read."""
        return {}


class SuiteScoring(ToolCheckScoring):
    """A CSV suite's scoring; when its cases come from `import bfcl` or `import tau2`, its
    results add the benchmark's own figures (the `literature` section) beside ours."""

    def __init__(self, cases: Sequence[TestCase], check_names: bool) -> None:
        super().__init__(cases, check_names)
        # what the benchmarks' own figures need of their runs (only the imported cases' runs)
        self.runs: dict[tuple[str, int, str], BenchmarkRun] = {}
        self.passed: dict[tuple[str, str], bool] = {}  # (imported case, model) -> our verdict
        self.imported: set[str] = set()  # the names of the imported cases seen

    def verdict(self, t: Transcript) -> Verdict:
        verdict = super().verdict(t)
        if self.reported(t.case.name) and any(
            tag.startswith((BFCL_TAG, TAU2_TAG)) for tag in t.case.tags
        ):
            self.runs.setdefault((t.case.name, t.iteration, t.model), benchmark_run(t, verdict))
            self.imported.add(t.case.name)
        return verdict

    def case_results(
        self, transcripts: Iterable[Transcript], threshold: float, group: str
    ) -> Iterator[CaseResult]:
        for case in super().case_results(transcripts, threshold, group):
            if case.name in self.imported:
                self.passed[(case.name, case.model or "")] = case.passed
            yield case

    def sections(self) -> dict[str, Any]:
        records = literature_records(list(self.runs.values()), self.passed)
        return {"literature": records} if records else {}


def _tool_times(calls: Iterable[tuple[str, float]]) -> list[ToolTimeRecord]:
    """(tool, milliseconds) of calls -> per tool: calls, total, mean and longest time."""
    by_tool: dict[str, list[float]] = {}
    for name, ms in calls:
        by_tool.setdefault(name, []).append(ms)
    return [
        ToolTimeRecord(
            tool=name,
            calls=len(times),
            total_ms=round(sum(times), 2),
            mean_ms=round(sum(times) / len(times), 2),
            max_ms=round(max(times), 2),
        )
        for name, times in sorted(by_tool.items())
    ]


def _qa_run_record(t: Transcript, verdict: Verdict) -> QaRunRecord:
    notes = {tag: transcript_tagged(t, tag) for tag in ("summary", "feedback")}
    return QaRunRecord(
        iteration=t.iteration,
        correct=verdict.passed,
        answer=None if t.error else transcript_answer(t),
        reasons=verdict.reasons,
        seconds=round(t.latency_ms / 1000, 3),
        tool_calls=len(t.tool_calls),
        tools=_tool_times([(c.name, c.duration_ms) for c in t.tool_calls]),
        **{tag: cap_text(text, C.QA_NOTE_CHARS) if text else None for tag, text in notes.items()},
        error=t.error,
        model=t.model,
    )


def _merged_tool_times(records: Iterable[ToolTimeRecord]) -> list[ToolTimeRecord]:
    by_tool: dict[str, list[ToolTimeRecord]] = {}
    for record in records:
        by_tool.setdefault(record.tool, []).append(record)
    merged = []
    for name, parts in sorted(by_tool.items()):
        calls, total = sum(p.calls for p in parts), sum(p.total_ms for p in parts)
        merged.append(
            ToolTimeRecord(
                tool=name,
                calls=calls,
                total_ms=round(total, 2),
                mean_ms=round(total / calls, 2) if calls else 0.0,
                max_ms=max(p.max_ms for p in parts),
            )
        )
    return merged


def _qa_task_record(case: TestCase, runs: Sequence[QaRunRecord]) -> QaTaskRecord:
    """One <qa_pair> over its runs (model by model, iteration by iteration)."""
    correct = sum(r.correct for r in runs)
    return QaTaskRecord(
        name=case.name,
        question=case.prompt,
        expected=case.expected_answer or "",
        answer_match=case.answer_match,
        runs=len(runs),
        correct=correct,
        accuracy=round(correct / len(runs), 4),
        interval=rounded_interval(wilson_interval(correct, len(runs))),
        mean_seconds=round(sum(r.seconds for r in runs) / len(runs), 3),
        tool_calls=sum(r.tool_calls for r in runs),
        tools=_merged_tool_times(t for r in runs for t in r.tools),
        results=list(runs),
    )


class _QaTally:
    """The QA section, built task by task as the runs stream past: each task's record goes to a
    spool; what is over every run is counted (the tools' times merged as they come)."""

    def __init__(self) -> None:
        self.tasks = SpooledRecords(QaTaskRecord)
        self.runs = self.correct = self.tool_calls = 0
        self.seconds = 0.0
        self.tools: list[ToolTimeRecord] = []

    def add(self, task: QaTaskRecord) -> None:
        self.tasks.append(task)
        self.runs += task.runs
        self.correct += task.correct
        self.tool_calls += task.tool_calls
        self.seconds += sum(r.seconds for r in task.results)
        self.tools = _merged_tool_times([*self.tools, *task.tools])

    def record(self) -> QaRecord:
        """mcp-builder's report over every run: accuracy, durations, tool calls, every task."""
        runs = self.runs
        qa = QaRecord(
            tasks=len(self.tasks),
            runs=runs,
            correct=self.correct,
            accuracy=round(self.correct / runs, 4) if runs else 0.0,
            interval=rounded_interval(wilson_interval(self.correct, runs)),
            mean_task_seconds=round(self.seconds / runs, 3) if runs else 0.0,
            mean_tool_calls=round(self.tool_calls / runs, 2) if runs else 0.0,
            tool_calls=self.tool_calls,
            tools=self.tools,
        )
        spooled_into(qa, "task_results", self.tasks)
        return qa


class QaScoring(ToolCheckScoring):
    """--qa: each run is graded on its answer (and on a judge's or a verify command's verdict
    when a case asks for one), not on the tools' schemas: a QA task may take dozens of calls, and
    a call that goes wrong on the way is Claude's feedback, not a wrong answer. The QA section
    (every run's answer, timings and notes) is built from the runs as the cases are."""

    UNGRADED = ("schemas",)

    def __init__(self, cases: list[TestCase]) -> None:
        super().__init__(cases, False)
        self.tally = _QaTally()

    def verdict(self, t: Transcript) -> Verdict:
        if t.verdict is None:
            reasons = [
                reason
                for name, check in TOOL_CHECKS.items()
                if name not in self.UNGRADED
                for reason in check(t.case, t, self.tools)
            ]
            t.verdict = Verdict(passed=not reasons, reasons=list(dict.fromkeys(reasons)))
        return t.verdict

    def case_results(
        self, transcripts: Iterable[Transcript], threshold: float, group: str
    ) -> Iterator[CaseResult]:
        self.tally = _QaTally()
        return super().case_results(self.tasks(transcripts), threshold, group)

    def tasks(self, transcripts: Iterable[Transcript]) -> Iterator[Transcript]:
        """The runs, each task's (all its models') tallied as they pass."""
        for _, grouped in itertools.groupby(transcripts, key=lambda t: t.case.name):
            runs = list(grouped)
            records = [_qa_run_record(t, self.verdict(t)) for t in runs]
            if not self.reported(runs[0].case.name):
                yield from runs
                continue
            self.tally.add(
                _qa_task_record(
                    runs[0].case, sorted(records, key=lambda r: (r.model or "", r.iteration))
                )
            )
            yield from runs

    def sections(self) -> dict[str, Any]:
        return {"qa": self.tally.record()}


def _transcript_as_claude_run(transcript: Transcript) -> ClaudeRun:
    """A tool-use transcript seen as a skill-test run, so the same answer scorers judge both."""
    t = transcript
    return ClaudeRun(
        query=t.case.prompt,
        run=t.iteration,
        first_tool=t.tools_called[0] if t.tools_called else None,
        tool_count=len(t.tool_calls),
        tools=t.tools_called,
        answer=t.final_text,
        error=t.error,
        total_cost_usd=round(t.cost_usd, 6),
        usage=asdict(t.usage),
        latency_ms=t.latency_ms,
    )


def skill_test_record(result: SkillTestResult, cost: float) -> SkillTestRecord:
    test = result.test
    return SkillTestRecord(
        name=test.name,
        type=test.type,
        source=test.source,
        skill=test.skill,
        category=test.category,
        severity=test.severity,
        passed=result.passed,
        error=result.error,
        activated_skills=sorted({s for r in result.runs for s in r.activated_skills}),
        run_scores=result.run_scores,
        cost_usd=round(cost, 6),
    )


class AnswerScoring:
    """Knowledge / task / security tests run against the MCP servers: each run's answer scored
    like a skill test's (concepts, forbidden patterns, refusal)."""

    def __init__(self, tests: list[SkillTest], cases: Sequence[TestCase] = ()) -> None:
        self.tests = {t.name: t for t in tests}
        self.records = SpooledRecords(SkillTestRecord)  # the tests section, a test at a time
        self.cases = cases  # the suite's (its tool coverage)
        self.tools: dict[str, Any] = {}

    def connected(self, hub: McpHub) -> None:
        self.tools = dict(hub.tools)  # for the suite's tool coverage

    def answer(self, t: Transcript) -> ClaudeRun:
        return _transcript_as_claude_run(t)

    def run_score(self, t: Transcript) -> dict:
        """The answer's score, failed also by the outcome checks of TOOL_CHECKS (judge, verify)."""
        score = score_test_run(self.tests[t.case.name], self.answer(t))
        graded = [reason for name in OUTCOME_CHECKS for reason in TOOL_CHECKS[name](t.case, t, {})]
        return (
            dict(score, passed=False, graded=graded) if graded and "error" not in score else score
        )

    def verdict(self, t: Transcript) -> Verdict:
        if t.verdict is None:
            score = self.run_score(t)
            t.verdict = Verdict(
                bool(score.get("passed")), run_score_reasons(self.tests[t.case.name], score)
            )
        return t.verdict

    def case_results(
        self, transcripts: Iterable[Transcript], threshold: float, group: str
    ) -> Iterator[CaseResult]:
        self.records = SpooledRecords(SkillTestRecord)
        for (name, model), grouped in itertools.groupby(
            transcripts, key=lambda t: (t.case.name, t.model)
        ):
            runs = list(grouped)
            result = score_skill_test(
                self.tests[name],
                [self.answer(t) for t in runs],
                threshold,
                [self.run_score(t) for t in runs],
            )
            cost = sum(t.cost_usd for t in runs)
            case = case_result_from_test(
                result,
                Path(self.tests[name].source).name or group,
                cost,
                sum(t.latency_ms for t in runs) / 1000,
            )
            case.model = model
            record = skill_test_record(result, cost)
            record.model = model
            self.records.append(record)
            yield case

    def sections(self) -> dict[str, Any]:
        return {"tests": self.records}
