"""The judge against people: which verdicts in a results file a judge gave (a plugin case's `llm`
and `baseline` graders, the tool-use judge), each under the run id a label sheet names it by, and
how well people's labels agree with them (agreement, Cohen's kappa with its interval, the
confusion table). Pure functions of records: nothing here reads a file or calls a model.

May import: the foundations, results_schema."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import test_constants as C

from ..results_schema.document import PluginRunResult, RunResult, ToolRunResult
from ..results_schema.plugin import PluginRecord

__all__ = [
    "JUDGE_GRADER_KINDS",
    "TOOL_USE_JUDGE",
    "Agreement",
    "JudgedVerdict",
    "agreement",
    "judged_verdicts",
    "run_id",
]


# The plugin graders whose verdicts are a model's votes (the others are rules a person can read).
JUDGE_GRADER_KINDS = ("llm", "baseline")


TOOL_USE_JUDGE = "judge"  # the grader name a tool-use run's judge verdict goes by


def run_id(result: RunResult) -> str:
    """How a label sheet names a run: `CASE/ARM/RUN` for a plugin run (`/LABEL` in a matrix),
    `CASE/ITERATION/MODEL` for a tool-use run (its verify command's EVAL_RUN without the
    invocation), `QUERY/RUN/MODEL` for a skill run."""
    if isinstance(result, PluginRunResult):
        return f"{result.case}/{result.arm}/{result.run}" + (
            f"/{result.label}" if result.label else ""
        )
    if isinstance(result, ToolRunResult):
        return f"{result.test_name}/{result.iteration}/{result.model}"
    return f"{result.test or result.query}/{result.run}/{result.model}"


@dataclass(frozen=True)
class JudgedVerdict:
    """One verdict a judge gave on one run: the run, the grader (its case's), the verdict, and what
    a person needs to give their own (the prompt, the final answer, the criterion, the transcript,
    the judge's explanation)."""

    run: str
    case: str
    grader: str
    passed: bool
    scope: str = ""  # the plugin the case is in ("" for a tool-use suite)
    prompt: str = ""
    answer: str = ""
    criterion: str = ""
    transcript: str = ""
    explanation: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.run, self.grader)


def _criteria(plugin: PluginRecord | None) -> dict[tuple[str, str], tuple[str, str]]:
    """(case, grader) -> (its kind, its criterion) for the plugin's judge graders."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for case in plugin.cases if plugin else ():
        for grader in case.graders:
            if grader.type in JUDGE_GRADER_KINDS:
                text = grader.config.get("criteria") or grader.config.get("baseline_file") or ""
                found[(case.name, grader.name)] = (grader.type, str(text))
    return found


def _plugin_transcript(result: PluginRunResult) -> str:
    lines = [f"tool calls: {', '.join(result.tools) or '(none)'}"]
    lines += [f"delegated to {d}" for d in result.delegations]
    lines += [f"hook {h}" for h in result.hooks]
    lines += [f"MCP call {m}" for m in result.mcp_calls]
    if result.error:
        lines.append(f"error: {result.error}")
    return "\n".join(lines)


def _tool_transcript(result: ToolRunResult) -> str:
    lines = []
    for entry in result.conversation_history:
        lines.append(f"{entry.role}: {entry.content}")
    for call in result.tool_calls:
        lines.append(f"tool {call.name} {call.input} -> {call.output}")
    return "\n".join(lines)


def judged_verdicts(
    results: Iterable[RunResult], plugin: PluginRecord | None = None
) -> list[JudgedVerdict]:
    """Every judge verdict in a results file's runs: a plugin run's `llm` / `baseline` graders
    (by the plugin section's grader kinds, or the judge's votes the verdict kept), a tool-use
    run's judge grade (not an error). Rule-based graders and runs the judge did not read are not
    here: there is nothing to calibrate in them."""
    criteria = _criteria(plugin)
    scope = plugin.name if plugin else ""
    found = []
    for result in results:
        if isinstance(result, PluginRunResult):
            for verdict in result.graders:
                kind = criteria.get((result.case, verdict.name))
                if kind is None and verdict.judge_votes is None:
                    continue
                found.append(
                    JudgedVerdict(
                        run_id(result),
                        result.case,
                        verdict.name,
                        verdict.passed,
                        scope,
                        result.query,
                        result.answer,
                        kind[1] if kind else "",
                        _plugin_transcript(result),
                        verdict.explanation,
                    )
                )
        elif isinstance(result, ToolRunResult):
            grade = result.grades.get(TOOL_USE_JUDGE) or {}
            if "passed" not in grade:
                continue
            found.append(
                JudgedVerdict(
                    run_id(result),
                    result.test_name,
                    TOOL_USE_JUDGE,
                    bool(grade["passed"]),
                    "",
                    result.query,
                    result.agent_reasoning,
                    "",
                    _tool_transcript(result),
                    str(grade.get("evidence") or ""),
                )
            )
    return found


@dataclass(frozen=True)
class Agreement:
    """People's labels against a judge's verdicts on the same runs: the confusion table (person
    first: `pass_fail` is a run a person passed and the judge failed), the observed agreement
    p_o, the agreement expected by chance from each side's own pass rate p_e, and Cohen's kappa
    (p_o − p_e) / (1 − p_e) with its 95 % interval. Kappa is None when p_e is 1 (both sides gave
    one verdict only: chance explains everything, and kappa is undefined)."""

    pass_pass: int
    pass_fail: int
    fail_pass: int
    fail_fail: int
    observed: float
    expected: float
    kappa: float | None
    interval: tuple[float, float] | None

    @property
    def n(self) -> int:
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail


def _kappa_variance(table: Sequence[Sequence[float]], kappa: float, expected: float) -> float:
    """The large-sample variance of kappa (Fleiss, Cohen & Everitt 1969, "Large sample standard
    errors of kappa and weighted kappa"), from the table of proportions (rows: the person,
    columns: the judge), divided by n by the caller."""
    rows = [sum(row) for row in table]
    columns = [sum(table[i][j] for i in range(2)) for j in range(2)]
    diagonal = sum(table[i][i] * (1 - (rows[i] + columns[i]) * (1 - kappa)) ** 2 for i in range(2))
    off = (1 - kappa) ** 2 * sum(
        table[i][j] * (columns[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j
    )
    return max(0.0, diagonal + off - (kappa - expected * (1 - kappa)) ** 2) / (1 - expected) ** 2


def agreement(pairs: Iterable[tuple[bool, bool]]) -> Agreement:
    """(person's verdict, judge's verdict) pairs -> their agreement. The interval is kappa ± z·SE
    with the large-sample standard error (see _kappa_variance), cut to [−1, 1]; with few labels
    it is wide, which is the point of showing it."""
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for person, judge in pairs:
        counts[(bool(person), bool(judge))] += 1
    n = sum(counts.values())
    if n == 0:
        return Agreement(0, 0, 0, 0, 0.0, 0.0, None, None)
    table = [
        [counts[(True, True)] / n, counts[(True, False)] / n],
        [counts[(False, True)] / n, counts[(False, False)] / n],
    ]
    observed = table[0][0] + table[1][1]
    person_pass, judge_pass = sum(table[0]), table[0][0] + table[1][0]
    expected = person_pass * judge_pass + (1 - person_pass) * (1 - judge_pass)
    kappa: float | None = None
    interval: tuple[float, float] | None = None
    if expected < 1 - 1e-12:
        kappa = (observed - expected) / (1 - expected)
        half = C.KAPPA_CONFIDENCE_Z * math.sqrt(_kappa_variance(table, kappa, expected) / n)
        interval = (max(-1.0, kappa - half), min(1.0, kappa + half))
    return Agreement(
        counts[(True, True)],
        counts[(True, False)],
        counts[(False, True)],
        counts[(False, False)],
        observed,
        expected,
        kappa,
        interval,
    )
