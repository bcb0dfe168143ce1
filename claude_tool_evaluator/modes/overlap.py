"""overlap: which skills claim the same requests (a lexical filter, then the judge on close pairs).

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console

import prompts
import test_constants as C

from ..dry_run import CostEstimate, print_estimate
from ..errors import FatalApiError, InputError, is_api_error
from ..finished_run import Results, summary_record
from ..loaders.skills import load_skill
from ..pipeline import PipelineOutcome
from ..results_schema.document import CaseResult
from ..results_schema.sections import OverlapPairRecord, OverlapRecord
from ..run_types import Usage, cost_usd, estimated_tokens
from ..runners.crowd import print_decoy_estimate, skill_crowd_for
from ..scoring.skills import significant_words
from ..scoring.statistics import RunTotals, case_counts
from ..session import AnthropicModel, ModelRequest, api_error_message
from ..sinks import one_line
from ..writers.crowd import overlap_verdict
from ..writers.formats import write_outputs
from ..writers.terminal import print_summary
from .common import check_crowd_options, exit_code, require_api_key, run_metadata

__all__ = [
    "overlap_mode",
    "overlap_pairs",
]

if TYPE_CHECKING:
    from ..settings import ModelApi, Settings


# No Claude Code run: a lexical pre-filter over every pair of descriptions, then the judge (forced
# `assess_overlap` tool) on the closest pairs, each answered HIGH / MEDIUM / LOW with the queries
# that would confuse the two, one line saying why (the case's reason) and one saying how to tell
# them apart.
_OVERLAP_TOOL_CHOICE = {"type": "tool", "name": "assess_overlap"}


_OVERLAP_TOOL = {
    "name": "assess_overlap",
    "description": "Record your verdict on the pair. Call it exactly once.",
    "input_schema": {
        "type": "object",
        "properties": {
            "risk": {"type": "string", "enum": ["HIGH", "MEDIUM", "LOW"]},
            "queries": {"type": "array", "items": {"type": "string"}},
            "reason": {"type": "string"},
            "disambiguation": {"type": "string"},
        },
        "required": ["risk", "queries", "reason", "disambiguation"],
    },
}


def _description_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two descriptions' significant words: the cheap pre-filter."""
    left, right = set(significant_words(a)), set(significant_words(b))
    return len(left & right) / len(left | right) if left | right else 0.0


def overlap_pairs(
    skills: Sequence[tuple[str, str]], distractors: Sequence[tuple[str, str]]
) -> list[OverlapPairRecord]:
    """Every pair of the skills, and each skill against each distractor, closest first."""
    pairs = [(a, b) for i, a in enumerate(skills) for b in [*skills[i + 1 :], *distractors]]
    found = [
        OverlapPairRecord(a=a[0], b=b[0], similarity=round(_description_similarity(a[1], b[1]), 4))
        for a, b in pairs
    ]
    return sorted(found, key=lambda p: (-p.similarity, p.a, p.b))


def _overlap_request(a: str, a_text: str, b: str, b_text: str, model: str) -> ModelRequest:
    prompt = prompts.OVERLAP_PROMPT.format(
        a=a, a_description=a_text, b=b, b_description=b_text, count=C.OVERLAP_QUERIES
    )
    return ModelRequest(
        model,
        prompts.OVERLAP_SYSTEM_PROMPT,
        [{"role": "user", "content": prompt}],
        [_OVERLAP_TOOL],
        C.OVERLAP_MAX_TOKENS,
        tool_choice=_OVERLAP_TOOL_CHOICE,
    )


def _parse_overlap(content: list[dict]) -> dict:
    """The judge's `assess_overlap` call -> {risk, queries, reason, disambiguation}, or {error}."""
    call = next((b for b in content if b.get("type") == "tool_use"), {})
    data: dict = call["input"] if isinstance(call.get("input"), dict) else {}
    risk = str(data.get("risk", "")).strip().upper()
    if risk not in ("HIGH", "MEDIUM", "LOW"):
        return {
            "error": f"the judge gave no HIGH, MEDIUM or LOW risk (got {one_line(json.dumps(data), 200)})"
        }
    queries: list = data["queries"] if isinstance(data.get("queries"), list) else []
    return {
        "risk": risk,
        "queries": [one_line(str(q), 300) for q in queries[: C.OVERLAP_QUERIES] if str(q).strip()],
        "reason": one_line(str(data.get("reason") or ""), 300),
        "disambiguation": one_line(str(data.get("disambiguation") or ""), 500),
    }


def _estimate_overlap(requests: Sequence[ModelRequest], model: str) -> CostEstimate:
    typical = most = 0.0
    for request in requests:
        prompt = estimated_tokens([request.system, request.messages, request.tools])
        typical += cost_usd(
            Usage(input_tokens=prompt, output_tokens=C.ESTIMATED_OVERLAP_OUTPUT_TOKENS), model
        )
        most += cost_usd(Usage(input_tokens=prompt, output_tokens=C.OVERLAP_MAX_TOKENS), model)
    n = len(requests)
    return CostEstimate(n, model, n, n, typical, most, f"{n} pair(s) for the judge")


async def _judge_overlaps(
    pairs: Sequence[tuple[OverlapPairRecord, ModelRequest]], api: ModelApi, budget: float | None
) -> tuple[float, int]:
    """The judge on each pair in turn, until the budget (--max-cost's) is spent: (cost, pairs
    not judged)."""
    model = AnthropicModel(**api.client_options())
    spent = 0.0
    try:
        for index, (pair, request) in enumerate(pairs):
            if budget is not None and spent >= budget:
                return spent, len(pairs) - index
            try:
                reply = await model.complete(request)
            except FatalApiError:
                raise
            except Exception as exc:
                pair.judged, pair.error = (
                    True,
                    (
                        api_error_message(exc)
                        if is_api_error(exc)
                        else f"{exc.__class__.__name__}: {exc}"
                    ),
                )
                continue
            pair.cost_usd = round(cost_usd(reply.usage, request.model), 6)
            spent += pair.cost_usd
            verdict = _parse_overlap(reply.content)
            pair.judged = True
            if "error" in verdict:
                pair.error = verdict["error"]
            else:
                pair.risk, pair.queries = verdict["risk"], verdict["queries"]
                pair.reason, pair.disambiguation = verdict["reason"], verdict["disambiguation"]
    finally:
        await model.close()
    return spent, 0


def _overlap_case(pair: OverlapPairRecord) -> CaseResult:
    """A judged pair as a case: it fails when the judge says HIGH (or could not judge it); its
    reason is the judge's one line on why. One judgement: no interval."""
    passed = not pair.error and pair.risk != "HIGH"
    reasons = (
        {f"judge error: {pair.error}": 1}
        if pair.error
        else {f"HIGH overlap: {pair.reason or 'the judge gave no reason'}": 1}
        if not passed
        else {}
    )
    return CaseResult(
        name=f"{pair.a} / {pair.b}",
        kind="overlap_pair",
        group="overlap",
        passed=passed,
        error=bool(pair.error),
        runs=1,
        passes=int(passed),
        errors=int(bool(pair.error)),
        pass_rate=float(passed),
        interval=None,
        reasons=reasons,
        prompt="; ".join(pair.queries),
        description=pair.risk,
        cost_usd=pair.cost_usd,
    )


def overlap_mode(settings: Settings, console: Console) -> int:
    """overlap (--overlap): every pair of the --skill skills, and each against its --distractors,
    through a lexical pre-filter; the judge reads the closest pairs. Its price is shown before it
    runs; --max-cost caps it; --dry-run stops there. A HIGH pair fails the run (exit 1)."""
    skills = [load_skill(path) for path in settings.inputs.skill]
    if not skills:
        raise InputError(
            "overlap needs skills",
            hint="give --skill A --skill B, or --skill S --distractors SOURCE",
        )
    names = [s.name for s in skills]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise InputError(
            f"skill {twice!r} is given twice", hint="each --skill must have its own name"
        )
    if settings.crowd.distractors and not settings.run_plan.dry_run:
        require_api_key()
    check_crowd_options(settings)
    crowd = skill_crowd_for(
        settings.crowd, skills, console, settings.api, settings.run_plan.dry_run, whole=True
    )
    distractors = crowd.distractors if crowd else []
    if len(skills) + len(distractors) < 2:
        raise InputError(
            "overlap needs two skills at least",
            hint="give --skill A --skill B, or --skill S --distractors SOURCE",
        )
    texts = {d.name: d.description for d in distractors} | {s.name: s.description for s in skills}
    pairs = overlap_pairs(
        [(s.name, s.description) for s in skills], [(d.name, d.description) for d in distractors]
    )
    above = [p for p in pairs if p.similarity >= C.OVERLAP_MIN_SIMILARITY - 1e-9]
    chosen = above[: C.OVERLAP_JUDGED_PAIRS]
    requests = [
        (p, _overlap_request(p.a, texts[p.a], p.b, texts[p.b], settings.grading.judge_model))
        for p in chosen
    ]
    estimate = _estimate_overlap([r for _, r in requests], settings.grading.judge_model)
    console.print(
        f"overlap: {len(pairs)} pair(s), {len(above)} above the lexical pre-filter; the judge reads "
        f"{len(chosen)} on {settings.grading.judge_model}: about ${estimate.cost_expected:.4f} (at most "
        f"${estimate.cost_max:.4f})",
        highlight=False,
        markup=False,
    )
    if settings.run_plan.dry_run:
        print_estimate(console, estimate)
        print_decoy_estimate(console, crowd.keeper if crowd else None)
        return 0
    if requests:
        require_api_key()
    decoy_cost = crowd.decoy_cost if crowd else 0.0
    budget = (
        None
        if settings.run_plan.max_cost is None
        else max(0.0, settings.run_plan.max_cost - decoy_cost)
    )
    spent, not_judged = asyncio.run(_judge_overlaps(requests, settings.api, budget))
    record = OverlapRecord(
        skills=names,
        distractors=[d.name for d in distractors],
        judge_model=settings.grading.judge_model,
        pairs=pairs,
        below_filter=len(pairs) - len(above),
        not_judged=len(above) - len(chosen) + not_judged,
        cost_usd=round(spent + decoy_cost, 6),
    )
    cases = [_overlap_case(p) for p in pairs if p.judged]
    outcome = PipelineOutcome([], [], not_started=not_judged)
    totals = RunTotals()
    for pair in (p for p in pairs if p.judged):
        totals.add(Usage(), pair.cost_usd, 0.0, bool(pair.error))
    summary = summary_record(case_counts(cases), totals, 1.0, outcome)
    summary.cost_usd = record.cost_usd
    results = Results(
        run_metadata("overlap", settings, 0, outcome, input_type="skills"),
        all(c.passed for c in cases) and not not_judged,
        summary,
        cases,
        lambda: (),
        0,
        {"overlap": record},
        "overlap",
    )
    if not_judged:
        console.print(
            f"[yellow]stopped at --max-cost ${settings.run_plan.max_cost:g}[/yellow]: {not_judged} pair(s) "
            "not judged",
            highlight=False,
        )
    write_outputs(results, settings.outputs, console)
    print_summary(console, results, overlap_verdict(record), runs_table=False)
    return exit_code(results, outcome)
