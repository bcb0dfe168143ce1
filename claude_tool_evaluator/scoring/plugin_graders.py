"""The six grader kinds of `claude plugin eval` with Claude Code's meaning (2.1.332): regex,
tool_used, tool_order, file_exists, llm and baseline (a judge's 3 votes, passed on a majority),
the with-only rule under ablation, and a run's score (the weighted share of its scored graders
passed; a run passes at 1).

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from ..loaders.plugin_evals import PluginCase, PluginGrader, ToolStep, python_pattern
from ..patterns import BadPattern, PatternSkipped, untrusted_count, untrusted_search

__all__ = [
    "CaseEffect",
    "PluginRunView",
    "PluginToolCall",
    "SuiteEffect",
    "arm_delta",
    "case_effect",
    "claude_percent",
    "effect_points",
    "grade_run",
    "js_fixed",
    "plugin_title",
    "run_score",
    "suite_effect",
]

_JUDGE_VOTES = 3
# Claude Code's judge prompt (plugin eval): one word back, PASS only when FAIL is not said.
_JUDGE_ANSWER_RULE = "Respond with exactly one word: PASS or FAIL."
_TRACE_EDGE = 12  # a trace longer than 2 x this shows its first and last 12 events to the judge

# How a judge vote is asked: the prompt in, PASS (True) or FAIL out.
_Vote = Callable[[str, int], Awaitable[bool]]


@dataclass
class PluginToolCall:
    name: str
    input: dict[str, Any]

    @property
    def input_text(self) -> str:
        return json.dumps(self.input, ensure_ascii=False, separators=(",", ":"))


@dataclass
class PluginRunView:
    """What the graders read of one run: its tool calls in order, its last assistant text, its
    stream events (the trace), the files it created in its working folder, and that folder."""

    tool_calls: list[PluginToolCall] = field(default_factory=list)
    last_message: str = ""
    trace: list[dict] = field(default_factory=list)
    created_files: list[str] = field(default_factory=list)
    folder: Path | None = None
    mock_calls: list[dict] | None = None  # the run's calls of the mocks (None: none stood in)


@dataclass
class _GraderVerdict:
    name: str
    passed: bool
    weight: float
    explanation: str
    with_only: bool = False
    scored: bool = True
    votes: list[bool] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "passed": self.passed,
            "weight": self.weight,
            "explanation": self.explanation,
            "with_only": self.with_only,
            "scored": self.scored,
        }
        if self.votes:
            data["judge_votes"] = self.votes
        return data


def _js_flags(flags: str) -> dict[str, bool]:
    """A JavaScript RegExp's flags as the bounded pattern engine takes them (`g`, `u` and `y`
    change nothing a search or a count reads)."""
    return {"ignore_case": "i" in flags, "multiline": "m" in flags, "dotall": "s" in flags}


def _trace_text(trace: Sequence[dict]) -> str:
    return "\n".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in trace)


def _judge_trace(trace: Sequence[dict]) -> str:
    """The trace as Claude Code shows it to its judge: whole up to 24 events, else the first
    and last 12 around a count of those left out."""
    if len(trace) <= 2 * _TRACE_EDGE:
        return _trace_text(trace)
    left_out = len(trace) - 2 * _TRACE_EDGE
    return "\n".join(
        [
            _trace_text(trace[:_TRACE_EDGE]),
            f"[\u2026{left_out} messages elided\u2026]",
            _trace_text(trace[-_TRACE_EDGE:]),
        ]
    )


def _target_text(target: str | dict, run: PluginRunView) -> str | None:
    """What a regex reads (or an llm grader focuses on); None when a focus file is missing."""
    if isinstance(target, dict):
        if run.folder is None:
            return None
        path = (run.folder / target["path"]).resolve()
        if not path.is_relative_to(run.folder.resolve()) or not path.is_file():
            return None
        return path.read_text("utf-8", "replace")
    if target == "last_message":
        return run.last_message
    if target == "files":
        return "\n".join(run.created_files)
    if target == "mock_calls":  # each call of a mock, a JSON line: server, tool, input, error
        if run.mock_calls is None:
            return None
        return "\n".join(json.dumps(call, sort_keys=True) for call in run.mock_calls)
    return _trace_text(run.trace)


def _target_name(target: str | dict) -> str:
    return f"file {target['path']}" if isinstance(target, dict) else target


def _failed(grader: PluginGrader, why: str) -> _GraderVerdict:
    return _GraderVerdict(grader.name, False, grader.weight, why)


def _regex_verdict(grader: PluginGrader, run: PluginRunView) -> _GraderVerdict:
    text = _target_text(grader.get("target"), run)
    where = _target_name(grader.get("target"))
    if text is None:
        return _failed(grader, f"{where} is not available in this run")
    # the suite's pattern on the run's text, both untrusted: RE2, or a worker with a time limit
    pattern, flags = python_pattern(grader.get("pattern")), _js_flags(grader.get("flags", ""))
    match = grader.get("match")
    if match == "contains":
        passed = untrusted_search(pattern, text, **flags)
        why = f"matched {grader.get('pattern')}" if passed else f"pattern not found in {where}"
    elif match == "not_contains":
        passed = not untrusted_search(pattern, text, **flags)
        why = "pattern absent as expected" if passed else "pattern found (expected absent)"
    else:
        wanted = int(match.split(":", 1)[1])
        found = untrusted_count(pattern, text, **flags)
        passed, why = found == wanted, f"found {found} matches (expected {wanted})"
    return _GraderVerdict(grader.name, passed, grader.weight, why)


def _call_matches(call: PluginToolCall, step: ToolStep) -> bool:
    if call.name != step.tool:
        return False
    return step.input_match is None or untrusted_search(
        python_pattern(step.input_match), call.input_text
    )


def _first_call(run: PluginRunView, step: ToolStep) -> int:
    return next((i for i, c in enumerate(run.tool_calls) if _call_matches(c, step)), -1)


def _tool_order_verdict(grader: PluginGrader, run: PluginRunView) -> _GraderVerdict:
    before, after = grader.get("before"), grader.get("after")
    first, second = _first_call(run, before), _first_call(run, after)
    if first < 0:
        return _failed(grader, f'"before" tool {before.tool} never called')
    if second < 0:
        return _failed(grader, f'"after" tool {after.tool} never called')
    passed = first < second
    relation = "precedes" if passed else "does NOT precede"
    return _GraderVerdict(
        grader.name,
        passed,
        grader.weight,
        f"{before.tool}@{first} {relation} {after.tool}@{second}",
    )


def _tool_used_verdict(grader: PluginGrader, run: PluginRunView) -> _GraderVerdict:
    step = ToolStep(grader.get("tool"), grader.get("input_match"))
    count = sum(1 for c in run.tool_calls if _call_matches(c, step))
    low, high = grader.get("min", 1), grader.get("max")
    passed = count >= low and (high is None or count <= high)
    shown = "\u221e" if high is None else str(high)
    return _GraderVerdict(
        grader.name, passed, grader.weight, f"{step.tool} called {count}x (expected {low}..{shown})"
    )


def _glob_rule(glob: str) -> re.Pattern[str]:
    """Claude Code's path glob: `**/` any folders (or none), `**` anything, `*` within a folder,
    `?` one character; the whole path must match."""
    parts, i = ["^"], 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            parts.append(".*")
            i += 2
            continue
        parts.append("[^/]*" if char == "*" else "." if char == "?" else re.escape(char))
        i += 1
    return re.compile("".join(parts) + "$")


def _file_exists_verdict(grader: PluginGrader, run: PluginRunView) -> _GraderVerdict:
    rule, wanted = _glob_rule(grader.get("path")), grader.get("exists")
    found = any(rule.match(path.strip()) for path in run.created_files if path.strip())
    path = grader.get("path")
    if found == wanted:
        return _GraderVerdict(
            grader.name,
            True,
            grader.weight,
            f"{path} {'exists' if wanted else 'absent'} as expected",
        )
    return _failed(
        grader,
        f"{path} {'exists' if found else 'missing'} (expected {'present' if wanted else 'absent'})",
    )


def _llm_prompt(grader: PluginGrader, run: PluginRunView) -> str | None:
    focus = grader.get("focus")
    text = _judge_trace(run.trace) if focus == "trace" else _target_text(focus, run)
    if text is None:
        return None
    if text == "" and focus == "files":
        text = "(no file changes)"
    return (
        "You are grading the output of a coding agent against a criterion.\n"
        f"Criterion:\n{grader.get('criteria')}\n"
        f"Agent output ({_target_name(focus)}):\n{text}\n{_JUDGE_ANSWER_RULE}"
    )


def _baseline_prompt(grader: PluginGrader, case: PluginCase, run: PluginRunView) -> str | None:
    path = (case.folder / grader.get("baseline_file")).resolve()
    # read from the case's own folder only: a suite from elsewhere sends no other file to the judge
    if not path.is_relative_to(case.folder.resolve()) or not path.is_file():
        return None
    baseline = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return "\n".join(
        [
            "You are comparing a NEW coding-agent trajectory against a BASELINE.",
            f"Criterion:\n{grader.get('criteria')}",
            f"\nBASELINE trajectory:\n{_judge_trace(baseline)}",
            f"\nNEW trajectory:\n{_judge_trace(run.trace)}",
            "\nDoes the NEW trajectory satisfy the criterion at least as well as the BASELINE?",
            _JUDGE_ANSWER_RULE,
        ]
    )


async def _judged_verdict(
    grader: PluginGrader, case: PluginCase, run: PluginRunView, vote: _Vote
) -> _GraderVerdict:
    try:
        prompt = (
            _llm_prompt(grader, run)
            if grader.kind == "llm"
            else _baseline_prompt(grader, case, run)
        )
    except (OSError, ValueError) as exc:
        return _failed(grader, f"could not read what the judge needs: {exc}")
    if prompt is None:
        missing = (
            grader.get("baseline_file")
            if grader.kind == "baseline"
            else _target_name(grader.get("focus"))
        )
        return _failed(grader, f"{missing} does not exist")
    votes = [await vote(prompt, i) for i in range(_JUDGE_VOTES)]
    passed = sum(votes) > len(votes) / 2
    verdict = _GraderVerdict(
        grader.name,
        passed,
        grader.weight,
        "judge votes: " + " ".join("PASS" if v else "FAIL" for v in votes),
    )
    verdict.votes = votes
    return verdict


_GRADE: dict[str, Callable[[PluginGrader, PluginRunView], _GraderVerdict]] = {
    "regex": _regex_verdict,
    "tool_order": _tool_order_verdict,
    "tool_used": _tool_used_verdict,
    "file_exists": _file_exists_verdict,
}


def _with_only(grader: PluginGrader) -> bool:
    """Under ablation a grader marked `arm: with-only`, or a `tool_used` on Skill with no arm,
    only shows whether the plugin fired: graded in the with arm, never scored."""
    return grader.arm == "with-only" or (
        grader.arm is None and grader.kind == "tool_used" and grader.get("tool") == "Skill"
    )


async def grade_run(
    case: PluginCase, run: PluginRunView, arm: str | None, vote: _Vote
) -> list[_GraderVerdict]:
    """Every grader of the case on one run, as Claude Code grades an arm (`with`, `without`, or
    None without ablation): the without arm skips with-only graders unless every grader is one."""
    all_with_only = all(_with_only(g) for g in case.graders)
    graders = [g for g in case.graders if arm != "without" or all_with_only or not _with_only(g)]
    verdicts = []
    for grader in graders:
        try:
            if grader.kind in ("llm", "baseline"):
                verdict = await _judged_verdict(grader, case, run, vote)
            else:  # in a thread: a pattern's worker may take its whole time limit
                verdict = await asyncio.to_thread(_GRADE[grader.kind], grader, run)
        except (BadPattern, PatternSkipped) as exc:  # ran out of time: this grader's error
            verdict = _failed(grader, f"grader threw: {exc}")
        if arm is not None and not all_with_only and _with_only(grader):
            verdict.with_only, verdict.scored = True, False
        verdicts.append(verdict)
    return verdicts


def run_score(verdicts: Sequence[_GraderVerdict]) -> float:
    """The weighted share of the scored graders passed (0 with none scored)."""
    total = sum(v.weight for v in verdicts if not v.with_only)
    passed = sum(v.weight for v in verdicts if not v.with_only and v.passed)
    return passed / total if total > 0 else 0.0


def _rate(passed: int, runs: int) -> float:
    return passed / runs if runs else 0.0


@dataclass
class _ArmDelta:
    """The with/without difference of pass rates of one case (or the whole suite): the
    counts, Newcombe's interval of the delta, Fisher's exact p, and, when it is within noise,
    the runs per arm that would decide a difference of this size."""

    name: str
    with_passed: int
    with_runs: int
    without_passed: int
    without_runs: int
    score_with: float = 0.0
    score_without: float = 0.0
    interval: tuple[float, float] = (0.0, 0.0)
    p_value: float = 1.0
    significant: bool = False
    runs_to_decide: int | None = None

    @property
    def delta(self) -> float:
        return _rate(self.with_passed, self.with_runs) - _rate(
            self.without_passed, self.without_runs
        )

    def verdict(self) -> str:
        if not self.without_runs:
            return f"score {self.score_with:.2f} with the plugin (no arm without it)"
        low, high = self.interval
        shown = f"delta {self.delta:+.2f} [{low:+.2f}, {high:+.2f}], p = {self.p_value:.4f}"
        if self.significant:
            return f"significant: {shown}"
        more = (
            f"; about {self.runs_to_decide} runs per arm would decide it"
            if self.runs_to_decide
            else ""
        )
        return f"within noise: {shown}{more}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "with": {"passed": self.with_passed, "runs": self.with_runs, "score": self.score_with},
            "without": {
                "passed": self.without_passed,
                "runs": self.without_runs,
                "score": self.score_without,
            },
            "delta": self.delta,
            "interval": list(self.interval),
            "p_value": self.p_value,
            "significant": self.significant,
            "runs_to_decide": self.runs_to_decide,
            "verdict": self.verdict(),
        }


def arm_delta(
    name: str,
    with_scores: Sequence[float],
    without_scores: Sequence[float],
    alpha: float = 0.05,
) -> _ArmDelta:
    """A case's runs (scores per arm; a run passes at 1) as an ArmDelta at level alpha."""
    from .statistics import fisher_p_value, newcombe_interval, runs_to_decide

    with_passed = sum(1 for s in with_scores if s >= 1.0)
    without_passed = sum(1 for s in without_scores if s >= 1.0)
    found = _ArmDelta(
        name,
        with_passed,
        len(with_scores),
        without_passed,
        len(without_scores),
        sum(with_scores) / len(with_scores) if with_scores else 0.0,
        sum(without_scores) / len(without_scores) if without_scores else 0.0,
    )
    if not with_scores or not without_scores:
        return found
    found.interval = newcombe_interval(
        without_passed, len(without_scores), with_passed, len(with_scores), alpha
    )
    found.p_value = fisher_p_value(
        without_passed, len(without_scores), with_passed, len(with_scores)
    )
    found.significant = found.p_value < alpha
    if not found.significant:
        found.runs_to_decide = runs_to_decide(
            _rate(without_passed, len(without_scores)),
            _rate(with_passed, len(with_scores)),
            alpha,
            min(len(with_scores), len(without_scores)),
        )
    return found


# ---- the plugin's effect as `claude plugin eval` 2.1.332 reports it (its JSON aggregates, its
# HTML report's headline and tiles, its terminal table), read from its bundled report code.


def js_fixed(value: float, digits: int) -> str:
    """JavaScript's `Number.prototype.toFixed`: the exact binary value rounded half away from
    zero (Python's format rounds half to even: 0.125 gives "0.12" where Claude Code shows
    "0.13")."""
    exact = Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{exact:.{digits}f}"


def claude_percent(share: float) -> str:
    """A share as Claude Code's report shows it: one decimal, dropped when whole, and never
    100% for a share under 1 (0.9996 reads 99.9%)."""
    shown = math.floor(share * 1000 + 0.5) / 10  # JavaScript's Math.round(share * 1000) / 10
    if share < 1 and shown >= 100:
        shown = 99.9
    return f"{int(shown)}%" if shown == int(shown) else f"{js_fixed(shown, 1)}%"


def effect_points(delta: float) -> str:
    """A score difference in points with Claude Code's arrow: `↑ +33.3 pts`, `· 0.0 pts`,
    `↓ -12.5 pts`."""
    arrow, sign = ("↑", "+") if delta > 0 else ("↓", "") if delta < 0 else ("·", "")
    return f"{arrow} {sign}{js_fixed(delta * 100, 1)} pts"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class CaseEffect:
    """One case's aggregates as `claude plugin eval --json` has them: the mean run score and the
    share of perfect runs (score 1) of each arm, and the delta of mean scores. The arm without
    the plugin's figures are absent when it did not run; the delta (and its baseline score) also
    when a run of either arm ended on an error, as Claude Code leaves a case's delta out when a
    run was not fully graded."""

    name: str
    score: float
    pass_rate: float
    score_without: float | None = None
    pass_rate_without: float | None = None
    delta: float | None = None


def case_effect(
    name: str,
    with_scores: Sequence[float],
    without_scores: Sequence[float] | None,
    errored: bool = False,
) -> CaseEffect:
    """A case's runs (each arm's run scores; `errored`: a run of either arm ended on an error)
    as its aggregates."""
    score = _mean(with_scores)
    pass_rate = _mean([1.0 if s >= 1 else 0.0 for s in with_scores])
    if not without_scores:
        return CaseEffect(name, score, pass_rate)
    without = _mean(without_scores)
    rate_without = _mean([1.0 if s >= 1 else 0.0 for s in without_scores])
    if errored:
        return CaseEffect(name, score, pass_rate, pass_rate_without=rate_without)
    return CaseEffect(name, score, pass_rate, without, rate_without, score - without)


@dataclass(frozen=True)
class SuiteEffect:
    """The suite's aggregates (`casesTotal`, `casesPassed`, `overallScore`, `overallPassRate`,
    `meanDelta`) and what the HTML report derives from them: the baseline score (the mean of the
    cases' scores without the plugin), and the cases improved (delta > 0), flat (exactly 0) and
    regressed (< 0) among those with a delta."""

    cases_total: int
    cases_passed: int
    overall_score: float
    overall_pass_rate: float
    mean_delta: float | None
    baseline_score: float | None
    improved: int
    flat: int
    regressed: int

    @property
    def cases_with_delta(self) -> int:
        return self.improved + self.flat + self.regressed

    def headline(self) -> str:
        """Claude Code's verdict line: `Plugin effect: ↑ +33.3 pts vs baseline — improved 2 ·
        flat 2 · regressed 0 of 4 cases.` ("" without a delta: no arm without the plugin)."""
        if self.mean_delta is None or not self.cases_with_delta:
            return ""
        count = self.cases_with_delta
        return (
            f"Plugin effect: {effect_points(self.mean_delta)} vs baseline — improved "
            f"{self.improved} · flat {self.flat} · regressed {self.regressed} of {count} "
            f"{'case' if count == 1 else 'cases'}."
        )


def suite_effect(cases: Sequence[CaseEffect], threshold: float = 1.0) -> SuiteEffect:
    """The suite's aggregates from its cases' (a case passes at a score >= threshold)."""
    deltas = [c.delta for c in cases if c.delta is not None]
    baselines = [c.score_without for c in cases if c.score_without is not None]
    return SuiteEffect(
        cases_total=len(cases),
        cases_passed=sum(1 for c in cases if c.score >= threshold),
        overall_score=_mean([c.score for c in cases]),
        overall_pass_rate=_mean([c.pass_rate for c in cases]),
        mean_delta=_mean(deltas) if deltas else None,
        baseline_score=_mean(baselines) if baselines else None,
        improved=sum(1 for d in deltas if d > 0),
        flat=sum(1 for d in deltas if d == 0),
        regressed=sum(1 for d in deltas if d < 0),
    )


def plugin_title(name: str, version: str | None) -> str:
    """The report's title for a plugin, as Claude Code's: `greeter v1.0.0` (a version that is
    not a plain version string is left out)."""
    if version and re.fullmatch(r"[0-9A-Za-z._+-]{1,40}", version):
        return f"{name} v{version}"
    return name
