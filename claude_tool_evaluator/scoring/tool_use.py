"""Tool use: argument matching and one entry per check in TOOL_CHECKS (expected, forbidden,
counts, order, schemas, judge, verify); a case's verdict is the checks its definition asks for.

May import: the rooms above scoring."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..answers import check_answer
from ..hub.tools import ToolSpec
from ..loaders.csv_suites import ANY_OF, OPTIONAL, case_tool_view, is_alternatives
from ..patterns import BadPattern, PatternSkipped
from ..run_types import TestCase, Transcript, Verdict

__all__ = [
    "OUTCOME_CHECKS",
    "TOOL_CHECKS",
    "args_match",
    "schema_problems",
    "score_expected_args",
    "score_order",
    "score_tool_use",
]

if TYPE_CHECKING:
    from ..run_types import ToolCall


def _normalize_arg(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_normalize_arg(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize_arg(v) for k, v in value.items()}
    return value


def _without_keys(value: Any, patterns: Sequence[str]) -> Any:
    """Arguments without the keys `args_ignore` names (globs such as `*_id`), at any depth. A glob
    cannot backtrack without end: fnmatch makes each `*` but the last an atomic group (bpo-40480),
    so matching a key takes time linear in its length for each star, whatever the glob."""
    if isinstance(value, dict):
        return {
            k: _without_keys(v, patterns)
            for k, v in value.items()
            if not any(fnmatch.fnmatchcase(str(k), p) for p in patterns)
        }
    if isinstance(value, list):
        return [_without_keys(v, patterns) for v in value]
    return value


def _without_defaults(arguments: dict, schema: dict | None) -> dict:
    """Arguments without those equal to their parameter's `default` in the tool's inputSchema:
    `{"query": "x", "limit": 3}` is `{"query": "x"}` when `limit` defaults to 3."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, dict):
        return arguments
    return {
        key: value
        for key, value in arguments.items()
        if not (
            isinstance(properties.get(key), dict)
            and "default" in properties[key]
            and _normalize_arg(properties[key]["default"]) == _normalize_arg(value)
        )
    }


def _value_matches(expected: Any, actual: Any, exact: bool = True) -> bool:
    """An actual argument value against an expected one: equal as normalize_arg has them, where
    {"$any_of": [...]} accepts any of its values, at any depth. A dict's expected keys must be
    there (unless "$optional") with matching values, and (`exact`, always below the top) no
    other key either."""
    if is_alternatives(expected):
        return any(_value_matches(option, actual) for option in expected[ANY_OF])
    if isinstance(expected, dict) and isinstance(actual, dict):
        if exact and any(key not in expected for key in actual):
            return False
        return all(
            _value_matches(value, actual[key])
            if key in actual
            else is_alternatives(value) and value.get(OPTIONAL) is True
            for key, value in expected.items()
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(_value_matches, expected, actual))
    return _normalize_arg(expected) == _normalize_arg(actual)


def args_match(
    expected: dict, actual: dict, mode: str, ignore: Sequence[str] = (), schema: dict | None = None
) -> bool:
    """`partial`: the listed keys are equal (strings trimmed, case-insensitive); `exact`: the
    same keys and values; `exact_with_defaults`: `exact` once arguments equal to the schema's
    `default` are dropped on both sides; `ignore`: anything. Keys matching an `ignore` glob are
    left out first. An expected value {"$any_of": [...], "$optional": true} accepts any of its
    values, or (optional) no such argument at all."""
    if mode == "ignore":
        return True
    if ignore:
        expected, actual = _without_keys(expected, ignore), _without_keys(actual, ignore)
    if mode == "exact_with_defaults":
        expected, actual, mode = (
            _without_defaults(expected, schema),
            _without_defaults(actual, schema),
            "exact",
        )
    return _value_matches(expected, actual, exact=mode == "exact")


def _calls_match(
    expected: list[dict], calls: list[ToolCall], case: TestCase, schema: dict | None
) -> bool:
    """Several expected calls of one tool: each matched by a call of its own, in any order (a
    full matching, not first come first served)."""

    def assign(index: int, used: frozenset[int]) -> bool:
        if index == len(expected):
            return True
        return any(
            assign(index + 1, used | {n})
            for n, call in enumerate(calls)
            if n not in used
            and args_match(expected[index], call.input, case.args_match, case.args_ignore, schema)
        )

    return assign(0, frozenset())


def _is_subsequence(wanted: list[str], sequence: list[str]) -> bool:
    remaining = iter(sequence)
    return all(item in remaining for item in wanted)


def schema_problems(call: ToolCall, tool: ToolSpec | None) -> list[str]:
    """Arguments checked against the tool's own inputSchema; invented parameters count even
    when the schema forgot `additionalProperties: false`."""
    import jsonschema

    if tool is None:
        return [f"called unknown tool {call.name!r}"]
    schema = tool.input_schema
    problems = []
    properties = schema.get("properties")
    if isinstance(properties, dict) and schema.get("additionalProperties") in (None, False):
        invented = [key for key in call.input if key not in properties]
        if invented:
            problems.append(f"{call.name} got invented parameter(s) {', '.join(invented)}")
    try:
        errors = sorted(tool.validator.iter_errors(call.input), key=lambda e: list(e.path))
    except jsonschema.SchemaError as exc:
        return problems + [f"{call.name} has an invalid inputSchema: {exc.message}"]
    except BadPattern as exc:
        return problems + [
            f"{call.name} has an invalid inputSchema: a pattern does not compile ({exc})"
        ]
    except PatternSkipped as exc:  # a pattern of the server's that could not be checked in time
        return problems + [f"{call.name} argument check skipped: {exc}"]
    for err in errors[:3]:
        if err.validator == "additionalProperties" and problems:
            continue  # already reported as invented parameters
        where = "/".join(str(p) for p in err.path) or "arguments"
        problems.append(f"{call.name} arguments do not match its schema at {where}: {err.message}")
    return problems


_ToolCheck = Callable[[TestCase, Transcript, dict[str, ToolSpec]], list[str]]


def _check_run_error(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]
) -> list[str]:
    return [f"run failed: {transcript.error}"] if transcript.error else []


def _check_no_tools(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]
) -> list[str]:
    called = transcript.tools_called
    return (
        [f"expected no tool call, but called {', '.join(called)}"]
        if case.expect_no_tools and called
        else []
    )


def _check_expected_tools(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]
) -> list[str]:
    return [
        f"missing expected tool {tool}"
        for tool in case.expected_tools
        if tool not in transcript.tools_called
    ]


_NEVER_LOADED = "never loaded by the tool search"


def _missed_in_claude_code(tool: str, facts: dict, tools: dict[str, ToolSpec]) -> str | None:
    """Why Claude Code's room kept an expected tool from being called (None: nothing it did):
    withheld by the policy, a built-in called before any search, deferred and never loaded by the
    tool search, its server not ready at the first request and never waited for, or a built-in
    called instead."""
    if tool in (facts.get("withheld") or []):
        return "is withheld by the tool policy (Claude Code refuses its calls)"
    builtins = facts.get("builtins") or []
    if builtins and not facts.get("searches"):  # a built-in took the call before any search
        return f"lost to Claude Code's built-in {builtins[0]}"
    if facts.get("deferred") and tool not in (facts.get("loaded") or []):
        queries = [s.get("query", "") for s in facts.get("searches") or []]
        return (
            "was "
            + _NEVER_LOADED
            + (f" (searched: {', '.join(repr(q) for q in queries)})" if queries else " (no search)")
        )
    spec = tools.get(tool)
    status = (facts.get("servers") or {}).get(spec.server if spec else "", {})
    if status.get("status_at_start") not in (None, "connected") and not facts.get("waited"):
        return f"was missing: its server {spec.server if spec else ''} was not ready at the first request"
    if builtins:
        return f"lost to Claude Code's built-in {builtins[0]}"
    return None


def _check_claude_code(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]
) -> list[str]:
    """Through Claude Code: what kept each missing expected tool from being called."""
    if not transcript.claude_code:
        return []
    reasons = []
    for tool in case.expected_tools:
        if tool in transcript.tools_called:
            continue
        why = _missed_in_claude_code(tool, transcript.claude_code, tools)
        if why:
            reasons.append(f"expected tool {tool} {why}")
    return reasons


def _check_forbidden_tools(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]
) -> list[str]:
    return [
        f"forbidden tool {call.name} called (turn {call.turn})"
        for call in transcript.tool_calls
        if call.name in case.forbidden_tools
    ]


def _check_call_counts(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]
) -> list[str]:
    count = len(transcript.tool_calls)
    reasons = []
    if case.max_tool_calls is not None and count > case.max_tool_calls:
        reasons.append(f"too many tool calls: {count} > max {case.max_tool_calls}")
    if case.min_tool_calls is not None and count < case.min_tool_calls:
        reasons.append(f"too few tool calls: {count} < min {case.min_tool_calls}")
    return reasons


def _check_schemas(case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]) -> list[str]:
    return [
        problem
        for call in transcript.tool_calls
        for problem in schema_problems(call, tools.get(call.name))
    ]


def _check_judge(case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]) -> list[str]:
    """The LLM judge's verdict (graded by the runner): a failed one with its evidence."""
    grade = transcript.grades.get("judge")
    if not grade:
        return []
    if "error" in grade:  # also the run's error, unless the run had failed before
        return [] if transcript.error else [f"judge error: {grade['error']}"]
    if grade.get("passed"):
        return []
    return [
        f"judge: failed (score {float(grade.get('score') or 0):.2f}): {grade.get('evidence') or 'no evidence given'}"
    ]


def _check_verify(case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]) -> list[str]:
    """The `verify` command's verdict on the server's state after the run."""
    grade = transcript.grades.get("verify")
    if not grade:
        return []
    if "error" in grade:
        return [] if transcript.error else [f"verify error: {grade['error']}"]
    return [] if grade.get("passed") else [f"verify failed: {grade.get('reason') or 'exit code 1'}"]


def score_expected_args(
    case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec] | None = None
) -> list[str]:
    reasons = []
    ignoring = f", ignoring {', '.join(case.args_ignore)}" if case.args_ignore else ""
    for tool, expected in case.expected_args.items():
        calls = [c for c in transcript.tool_calls if c.name == tool]
        if not calls:
            if tool not in case.expected_tools:  # otherwise already reported as missing
                reasons.append(
                    f"missing expected tool {tool} (expected arguments {json.dumps(expected)})"
                )
            continue
        spec = (tools or {}).get(tool)
        schema = spec.input_schema if spec else None
        if isinstance(expected, list):
            if not _calls_match(expected, calls, case, schema):
                reasons.append(
                    f"argument mismatch for {tool} ({case.args_match}{ignoring}): expected "
                    f"{len(expected)} call(s) {json.dumps(expected)}, got {[c.input for c in calls]}"
                )
            continue
        if not any(
            args_match(expected, call.input, case.args_match, case.args_ignore, schema)
            for call in calls
        ):
            reasons.append(
                f"argument mismatch for {tool} ({case.args_match}{ignoring}): expected {json.dumps(expected)}, "
                f"got {json.dumps(calls[0].input) if len(calls) == 1 else [c.input for c in calls]}"
            )
    return reasons


def score_order(case: TestCase, called: list[str]) -> list[str]:
    expected = case.expected_tools
    got = " -> ".join(called) or "no tool calls"
    if case.order == "strict" and called != expected:
        return [f"wrong order (strict): expected {' -> '.join(expected) or '(none)'}, got {got}"]
    if case.order == "in_order" and not _is_subsequence(expected, called):
        return [
            f"wrong order (in_order): expected {' -> '.join(expected)} in this order, got {got}"
        ]
    if case.order == "subset":
        extra = [tool for tool in dict.fromkeys(called) if tool not in expected]
        if extra:
            return [f"tool(s) outside the expected set (subset): {', '.join(extra)}"]
    return []


# Every check a case can ask for, in the order its reasons are listed: each reads one run and
# returns why it failed (nothing when it passed, or when the case does not ask for it). A new
# check is one entry here.
TOOL_CHECKS: dict[str, _ToolCheck] = {
    "run_error": _check_run_error,
    "expect_no_tools": _check_no_tools,
    "expected_tools": _check_expected_tools,
    "claude_code": _check_claude_code,
    "forbidden_tools": _check_forbidden_tools,
    "expected_args": lambda case, transcript, tools: score_expected_args(case, transcript, tools),
    "order": lambda case, transcript, tools: score_order(case, transcript.tools_called),
    "tool_call_counts": _check_call_counts,
    "schemas": _check_schemas,
    "answer": lambda case, transcript, tools: check_answer(case, transcript),
    "judge": _check_judge,
    "verify": _check_verify,
}


# The checks of TOOL_CHECKS that grade a run's outcome: markdown tests (scored by their answers)
# run these too.
OUTCOME_CHECKS = ("judge", "verify")


def _tools_seen(case: TestCase, tools: dict[str, ToolSpec]) -> dict[str, ToolSpec]:
    """The tools a run of the case saw, by the names Claude saw (CSV `tools`)."""
    view = case_tool_view(case)
    if view is None:
        return tools
    return {
        shown: replace(tools[target], name=shown)
        for shown, target in view.items()
        if target in tools
    }


def score_tool_use(case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]) -> Verdict:
    """Every check of TOOL_CHECKS against one transcript. Pure: reads, never calls."""
    tools = _tools_seen(case, tools)
    reasons = [
        reason for check in TOOL_CHECKS.values() for reason in check(case, transcript, tools)
    ]
    return Verdict(passed=not reasons, reasons=list(dict.fromkeys(reasons)))
