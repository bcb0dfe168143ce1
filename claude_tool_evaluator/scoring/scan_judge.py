"""The hostile room's semantic reader: `scan --judge` asks the judge model, of each definition,
whether it instructs the agent beyond its function (what, and how sure), with a forced tool call
as grading does; its verdicts become findings beside the static reader's.

May import: the rooms above scoring (session, run_types, results_schema, sinks), the scoring
rooms above it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import prompts
import test_constants as C

from ..errors import FatalApiError, is_api_error
from ..results_schema.security import ScanFindingRecord, ScanJudgementRecord
from ..run_types import Usage, cost_usd, estimated_tokens
from ..session import ModelRequest, api_error_message
from ..sinks import one_line
from .scan import Definition

__all__ = [
    "judge_definitions",
    "judge_findings",
    "judge_request",
    "judged_price",
]

# The judge answers through this tool only (forced), so its verdict is read, never parsed from prose.
_JUDGE_TOOL = {
    "name": "judge_definition",
    "description": "Record your verdict on the definition. Call it exactly once.",
    "input_schema": {
        "type": "object",
        "properties": {
            "instructs": {"type": "boolean"},
            "what": {"type": "string"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["instructs", "what", "confidence"],
    },
}
_JUDGE_TOOL_CHOICE = {"type": "tool", "name": "judge_definition"}


def _same(text: str) -> str:
    return text


def _shown(definition: Definition, redact: Callable[[str], str]) -> str:
    """The definition as the judge reads it: its fields as JSON, characters as they are (the
    hidden ones too: the agent is given them), the run's secrets masked (a server may put its
    environment in a description), cut at SCAN_JUDGE_DEFINITION_CHARS."""
    text = redact(json.dumps(definition.fields, ensure_ascii=False, indent=1, default=str))
    if len(text) > C.SCAN_JUDGE_DEFINITION_CHARS:
        text = text[: C.SCAN_JUDGE_DEFINITION_CHARS] + "\n[... cut]"
    return text


def judge_request(
    definition: Definition, model: str, redact: Callable[[str], str] = _same
) -> ModelRequest:
    prompt = prompts.SCAN_JUDGE_PROMPT.format(
        server=redact(definition.server),
        kind=definition.kind,
        name=redact(definition.name),
        definition=_shown(definition, redact),
    )
    return ModelRequest(
        model,
        prompts.SCAN_JUDGE_SYSTEM_PROMPT,
        [{"role": "user", "content": prompt}],
        [_JUDGE_TOOL],
        C.SCAN_JUDGE_MAX_TOKENS,
        tool_choice=_JUDGE_TOOL_CHOICE,
    )


def judged_price(requests: Sequence[ModelRequest], model: str) -> tuple[float, float]:
    """(about, at most) what the judge's requests cost: the prompt's tokens (a character in four),
    and the typical or the largest verdict."""
    typical = most = 0.0
    for request in requests:
        prompt = estimated_tokens([request.system, request.messages, request.tools])
        typical += cost_usd(
            Usage(input_tokens=prompt, output_tokens=C.ESTIMATED_SCAN_JUDGE_OUTPUT_TOKENS), model
        )
        most += cost_usd(Usage(input_tokens=prompt, output_tokens=C.SCAN_JUDGE_MAX_TOKENS), model)
    return typical, most


def _verdict(content: list[dict]) -> dict:
    """The judge's `judge_definition` call -> {instructs, what, confidence}, or {error}."""
    call = next((b for b in content if b.get("type") == "tool_use"), {})
    data: dict = call["input"] if isinstance(call.get("input"), dict) else {}
    instructs, confidence = data.get("instructs"), data.get("confidence")
    if not isinstance(instructs, bool) or not isinstance(confidence, int | float):
        return {
            "error": "the judge gave no instructs (true or false) and confidence (got "
            f"{one_line(json.dumps(data), 200)})"
        }
    return {
        "instructs": instructs,
        "what": one_line(str(data.get("what") or ""), 300),
        "confidence": round(min(1.0, max(0.0, float(confidence))), 3),
    }


async def judge_definitions(
    definitions: Sequence[Definition],
    model: Any,
    judge_model: str,
    budget: float | None,
    redact: Callable[[str], str] = _same,
) -> tuple[list[ScanJudgementRecord], int]:
    """The judge (a model client: --cache's when given) on each definition in turn, until the
    budget (--max-cost's) is spent: (the judgements, how many definitions were left). A call
    that fails is that definition's error; the scan goes on."""
    judged: list[ScanJudgementRecord] = []
    spent = 0.0
    for index, definition in enumerate(definitions):
        if budget is not None and spent >= budget:
            return judged, len(definitions) - index
        record = ScanJudgementRecord(
            server=definition.server, kind=definition.kind, name=definition.name
        )
        judged.append(record)
        request = judge_request(definition, judge_model, redact)
        try:
            reply = await model.complete(request)
        except FatalApiError:
            raise
        except Exception as exc:
            record.error = (
                api_error_message(exc) if is_api_error(exc) else f"{exc.__class__.__name__}: {exc}"
            )
            continue
        record.cost_usd = round(cost_usd(reply.usage, request.model), 6)
        spent += record.cost_usd
        verdict = _verdict(reply.content)
        if "error" in verdict:
            record.error = verdict["error"]
        else:
            record.instructs = verdict["instructs"]
            record.what = verdict["what"]
            record.confidence = verdict["confidence"]
    return judged, 0


def _severity(confidence: float) -> str:
    if confidence >= C.SCAN_JUDGE_HIGH:
        return "high"
    return "medium" if confidence >= C.SCAN_JUDGE_MEDIUM else "low"


def judge_findings(
    judged: Sequence[ScanJudgementRecord], judge_model: str
) -> list[ScanFindingRecord]:
    """A finding (reader "judge") for each definition the judge says instructs the agent: high
    when it is at least SCAN_JUDGE_HIGH sure, medium from SCAN_JUDGE_MEDIUM, else low."""
    return [
        ScanFindingRecord(
            server=j.server,
            tool=j.name,
            kind=j.kind,
            check="judged-instructions",
            severity=_severity(j.confidence or 0.0),  # type: ignore[arg-type]
            detail=f"the judge ({judge_model}, {j.confidence or 0.0:.0%} sure): "
            f"{j.what or 'instructs the agent beyond its function'}",
            where=j.name,
            reader="judge",
        )
        for j in judged
        if j.instructs
    ]
