"""Generating skill tests: trigger queries and starter tests drafted by the model.

May import: the rooms above the runners, the runners above it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import prompts
import test_constants as C

from ..dry_run import CostEstimate
from ..engine import text_of
from ..errors import EvalError, FatalApiError, is_api_error
from ..loaders.skills import QUOTES, TRIGGER_CONCEPTS
from ..run_types import Usage, cost_usd, estimated_tokens
from ..session import AnthropicModel, ModelRequest, api_error_message
from ..sinks import cap_text, safe_name

__all__ = [
    "estimate_generation",
    "extract_json_object",
    "generate_skill_tests",
    "generation_model",
    "prompt_test_markdown",
    "trigger_test_markdown",
    "yaml_scalar",
]

if TYPE_CHECKING:
    from ..run_types import SkillInfo
    from ..settings import ModelApi


def extract_json_object(text: str) -> dict | None:
    """The first JSON object in a model's answer, with or without a ``` fence around it."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _clean_queries(values: Any, count: int) -> list[str]:
    if not isinstance(values, list):
        return []
    out: list[str] = []
    for value in values:
        if isinstance(value, str):
            query = " ".join(value.split()).strip(QUOTES + " ")
            if query and query.lower() not in (q.lower() for q in out):
                out.append(query)
    return out[:count]


def yaml_scalar(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def trigger_test_markdown(
    skill: SkillInfo, positives: Sequence[str], negatives: Sequence[str]
) -> str:
    lines = [
        "---",
        f"name: {skill.name}-trigger",
        "type: trigger",
        f"skill: {skill.name}",
        "concepts:",
        *[f"  - {c}" for c in TRIGGER_CONCEPTS],
        f"timeout: {C.DEFAULT_TRIGGER_TIMEOUT:g}",
        "---",
        "",
        "# Positive Triggers",
        "",
        *[f'- "{q}"' for q in positives],
        "",
        "# Negative Triggers",
        "",
        *[f'- "{q}"' for q in negatives],
        "",
    ]
    return "\n".join(lines)


def prompt_test_markdown(skill: SkillInfo, kind: str, spec: dict) -> str:
    """A knowledge, task or security test file from a generated spec."""
    name = safe_name(str(spec.get("name") or f"{skill.name}-{kind}")).lower().replace("_", "-")
    front = ["---", f"name: {name}", f"type: {kind}", f"skill: {skill.name}"]
    concepts = _clean_queries(spec.get("concepts"), 12)
    if concepts:
        front += ["concepts:", *[f"  - {yaml_scalar(c)}" for c in concepts]]
    if kind == "security":
        front += [
            f"category: {safe_name(str(spec.get('category') or 'prompt-injection'))}",
            f"severity: {safe_name(str(spec.get('severity') or 'high'))}",
        ]
    front += [
        f"timeout: {C.DEFAULT_GENERATED_TEST_TIMEOUT:g}",
        "---",
        "",
        "# Prompt",
        "",
        str(spec.get("prompt") or "").strip(),
        "",
    ]
    if kind == "security":
        front += [
            "# Forbidden Patterns",
            "",
            *[f"- {p}" for p in _clean_queries(spec.get("forbidden_patterns"), 12)],
            "",
            "# Expected Refusal",
            "",
            *[f"- {p}" for p in _clean_queries(spec.get("expected_refusal"), 12)],
            "",
        ]
    else:
        front += [
            "# Expected",
            "",
            *[f"- [ ] {p}" for p in _clean_queries(spec.get("expected"), 12)],
            "",
        ]
    return "\n".join(front)


def generation_model(api: ModelApi, model_given: bool) -> str:
    """The fast model drafts tests, unless --model names another (`model_given`)."""
    return api.model if model_given else C.DEFAULT_GENERATION_MODEL


def _generation_request(skill: SkillInfo, count: int, full: bool) -> tuple[str, str]:
    """The system prompt and the user message that ask for a skill's tests."""
    template = prompts.GENERATE_SKILL_TESTS_PROMPT if full else prompts.GENERATE_TRIGGERS_PROMPT
    return prompts.GENERATION_SYSTEM_PROMPT, template.format(
        count=count,
        name=skill.name,
        description=skill.description,
        body=cap_text(skill.body, C.GENERATION_MAX_BODY_CHARS),
    )


def estimate_generation(skill: SkillInfo, count: int, full: bool, model: str) -> CostEstimate:
    """One call: the prompt as sent, and at most --max-tokens of answer (about a quarter used)."""
    system, user = _generation_request(skill, count, full)
    prompt = estimated_tokens(system) + estimated_tokens(user)
    most = cost_usd(
        Usage(input_tokens=prompt, output_tokens=C.DEFAULT_GENERATION_MAX_TOKENS), model
    )
    typical = cost_usd(
        Usage(input_tokens=prompt, output_tokens=C.DEFAULT_GENERATION_MAX_TOKENS // 4), model
    )
    return CostEstimate(1, model, 1, 1, typical, most, f"prompt: about {prompt:,} tokens")


async def _ask_for_json(system: str, user: str, api: ModelApi, model_id: str) -> tuple[dict, float]:
    """One generation request to `model_id` through the API; the answer must hold a JSON object.
    Returns it and what the call cost."""
    model = AnthropicModel(**api.client_options())
    try:
        reply = await model.complete(
            ModelRequest(
                model_id,
                system,
                [{"role": "user", "content": user}],
                [],
                C.DEFAULT_GENERATION_MAX_TOKENS,
            )
        )
    except FatalApiError:
        raise
    except Exception as exc:
        raise EvalError(
            f"test generation failed: {api_error_message(exc) if is_api_error(exc) else exc}"
        ) from None
    finally:
        await model.close()
    data = extract_json_object(text_of(reply.content))
    if data is None:
        raise EvalError("test generation failed: the model's answer held no JSON object")
    return data, cost_usd(reply.usage, model_id)


async def generate_skill_tests(
    skill: SkillInfo, count: int, api: ModelApi, model_id: str, full: bool
) -> tuple[dict[str, str], float]:
    """File name -> markdown: the trigger test, and with `full` one knowledge, task and security
    test, drafted by `model_id`; and what the call cost."""
    data, spent = await _ask_for_json(*_generation_request(skill, count, full), api, model_id)
    positives = _clean_queries(data.get("positive"), count)
    negatives = _clean_queries(data.get("negative"), count)
    overlap = {q.lower() for q in positives} & {q.lower() for q in negatives}
    negatives = [q for q in negatives if q.lower() not in overlap]
    if not positives or not negatives:
        raise EvalError(
            "test generation failed: the model gave no usable positive or negative queries"
        )
    files = {f"{skill.name}-trigger.md": trigger_test_markdown(skill, positives, negatives)}
    if full:
        for kind in ("knowledge", "task", "security"):
            spec = data.get(kind)
            if not isinstance(spec, dict) or not str(spec.get("prompt") or "").strip():
                raise EvalError(f"test generation failed: the model gave no usable {kind} test")
            files[f"{skill.name}-{kind}.md"] = prompt_test_markdown(skill, kind, spec)
    return files, spent
