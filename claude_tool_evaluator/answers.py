"""One answer vocabulary everywhere: how an expected answer is matched (exact, normalized,
contains, regex, numeric, judge) and the reasons a mismatch gives.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from .patterns import BadPattern, PatternSkipped, pattern_problem, untrusted_search
from .sinks import preview

__all__ = [
    "ANSWER_MATCHERS",
    "AnswerMatcher",
    "NUMBER",
    "answer_match_hint",
    "answer_match_problem",
    "answer_numbers",
    "answer_problems",
    "check_answer",
    "normalize_answer_match",
    "tagged",
    "transcript_answer",
    "transcript_tagged",
]

if TYPE_CHECKING:
    from .run_types import TestCase, Transcript


# How an expected answer is compared with the answer Claude gave (QA pairs, CSV `expected_answer`,
# markdown `# Expected Answer`): `exact` after trimming (mcp-builder's rule), `normalized` (case,
# whitespace, thousands separators, a leading currency sign, trailing zeros, a final period),
# `numeric[:TOL]` (the one number in the answer equals the expected one, within TOL absolute or
# TOL% relative), `contains` (the normalized expected text appears as a whole), `regex` (the
# expected answer is a pattern searched for), `judge` (an LLM judge decides: check_judge).
_NOT_FOUND = "NOT_FOUND"


_RESPONSE_TAGS = {
    tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL | re.IGNORECASE)
    for tag in ("response", "summary", "feedback")
}


# A number as people write it: an optional sign and currency sign, thousands separators, decimals;
# never part of an identifier (v3.0.0, sara_dev2) and never followed by more digits or decimals.
NUMBER = re.compile(
    r"(?<![\w.,])(?P<sign>[-+\u2212]?)[$€£¥₹]?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?![\d_]|[.,]\d)"
)


_TOLERANCE = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<percent>%?)")


def normalize_answer_match(match: str) -> str:
    mode, _, tolerance = match.strip().partition(":")
    return mode.strip().lower() + (":" + tolerance.strip() if tolerance.strip() else "")


def answer_numbers(text: str) -> list[Decimal]:
    """The numbers of a text, each as an exact Decimal ($11,614.720 -> 11614.72)."""
    numbers = []
    for m in NUMBER.finditer(text):
        sign = "-" if m.group("sign") in ("-", "\u2212") else ""
        try:
            numbers.append(
                Decimal(sign + m.group("int").replace(",", "") + (m.group("frac") or ""))
            )
        except InvalidOperation:
            continue
    return numbers


def tagged(text: str, tag: str) -> str | None:
    """The last <tag>...</tag> of a text, trimmed (mcp-builder's extract_xml_content)."""
    found = _RESPONSE_TAGS[tag].findall(text or "")
    return found[-1].strip() if found else None


def transcript_tagged(transcript: Transcript, tag: str) -> str | None:
    """The last <tag> block Claude wrote in a run: in its final answer, else in an earlier turn."""
    texts = [transcript.final_text] + [
        h.content for h in reversed(transcript.history) if h.role == "assistant"
    ]
    return next(
        (found for found in (tagged(text, tag) for text in texts) if found is not None), None
    )


def transcript_answer(transcript: Transcript) -> str:
    """The answer compared: the last <response>...</response> when there is one, else the final text."""
    response = transcript_tagged(transcript, "response")
    return response if response is not None else (transcript.final_text or "").strip()


def _canonical_number(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "+0") else text


def _normalized_answer(text: str) -> str:
    """Case, whitespace, thousands separators, a leading currency sign and trailing zeros of
    numbers, wrapping quotes or backticks and a final period do not count."""
    import unicodedata

    text = unicodedata.normalize("NFKC", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1]
    text = NUMBER.sub(
        lambda m: (
            _canonical_number(answer_numbers(m.group(0))[0])
            if answer_numbers(m.group(0))
            else m.group(0)
        ),
        text,
    )
    return " ".join(text.casefold().split()).removesuffix(".").strip()


@dataclass(frozen=True)
class AnswerMatcher:
    """One way an expected answer is compared with the answer given: what it checks of the
    expected answer when a suite is loaded (a problem, or None), and why a given answer does not
    match (nothing when it does). `shown` and `wanted` are the two answers, quoted for reasons."""

    problem: Callable[[str], str | None]  # why this expected answer cannot be used
    mismatch: Callable[
        [str, str, str, str, str], list[str]
    ]  # (expected, given, tolerance, shown, wanted)
    needs_expected: bool = True
    takes_tolerance: bool = False


def _exact_mismatch(
    expected: str, given: str, tolerance: str, shown: str, wanted: str
) -> list[str]:
    return [] if given == expected else [f"answer {shown} is not {wanted} (exact)"]


def _normalized_mismatch(
    expected: str, given: str, tolerance: str, shown: str, wanted: str
) -> list[str]:
    if _normalized_answer(given) == _normalized_answer(expected):
        return []
    return [f"answer {shown} is not {wanted}, even normalized"]


def _contains_mismatch(
    expected: str, given: str, tolerance: str, shown: str, wanted: str
) -> list[str]:
    found = re.search(
        rf"(?<!\w){re.escape(_normalized_answer(expected))}(?!\w)", _normalized_answer(given)
    )
    return [] if found else [f"answer {shown} does not contain {wanted}"]


def _regex_mismatch(
    expected: str, given: str, tolerance: str, shown: str, wanted: str
) -> list[str]:
    try:
        found = untrusted_search(expected, given)
    except PatternSkipped as exc:
        return [f"answer check skipped: {exc}"]
    except BadPattern as exc:
        return [f"the expected answer is not a valid regular expression: {exc}"]
    return [] if found else [f"answer {shown} does not match the pattern {wanted}"]


def _numeric_problem(expected: str) -> str | None:
    if len(set(answer_numbers(expected))) != 1:
        return f"answer_match numeric needs an expected answer that is one number, not {expected!r}"
    return None


def _numeric_mismatch(
    expected: str, given: str, tolerance: str, shown: str, wanted: str
) -> list[str]:
    target = answer_numbers(expected)[0]
    values = list(dict.fromkeys(answer_numbers(given)))
    if len(values) != 1:
        found = (
            "no number"
            if not values
            else (f"several numbers ({', '.join(map(_canonical_number, values))})")
        )
        return [f"answer {shown} holds {found}; expected the number {_canonical_number(target)}"]
    bound = _TOLERANCE.fullmatch(tolerance) if tolerance else None
    allowed = (
        Decimal(0)
        if bound is None
        else (
            abs(target) * Decimal(bound.group("value")) / 100
            if tolerance.endswith("%")
            else Decimal(bound.group("value"))
        )
    )
    if abs(values[0] - target) <= allowed:
        return []
    within = f" (tolerance {tolerance})" if tolerance else ""
    return [
        f"answer {_canonical_number(values[0])} is {_canonical_number(abs(values[0] - target))} "
        f"off {_canonical_number(target)}{within}"
    ]


def _regex_problem(expected: str) -> str | None:
    problem = pattern_problem(expected)
    return f"the expected answer is not a valid regular expression: {problem}" if problem else None


def _no_problem(expected: str) -> str | None:
    return None


# Every answer_match mode, one row each: a new way of comparing answers is one entry. `judge` is
# graded by the LLM judge (check_judge); here it only needs no expected answer.
ANSWER_MATCHERS: dict[str, AnswerMatcher] = {
    "exact": AnswerMatcher(_no_problem, _exact_mismatch),
    "normalized": AnswerMatcher(_no_problem, _normalized_mismatch),
    "numeric": AnswerMatcher(_numeric_problem, _numeric_mismatch, takes_tolerance=True),
    "contains": AnswerMatcher(_no_problem, _contains_mismatch),
    "regex": AnswerMatcher(_regex_problem, _regex_mismatch),
    "judge": AnswerMatcher(_no_problem, lambda *_: [], needs_expected=False),
}


def answer_match_hint() -> str:
    names = list(ANSWER_MATCHERS)
    return f"answer_match is {', '.join(names[:-1])} or {names[-1]}; numeric takes a tolerance: numeric:0.005, numeric:1%"


def answer_match_problem(match: str, expected: str | None) -> str | None:
    """Why an answer_match (with its expected answer) cannot be used, or None: loaders report
    it with the file and line before anything runs."""
    mode, _, tolerance = normalize_answer_match(match).partition(":")
    matcher = ANSWER_MATCHERS.get(mode)
    if matcher is None:
        return f"answer_match {match!r} is not one of {', '.join(ANSWER_MATCHERS)}"
    if tolerance and not matcher.takes_tolerance:
        return f"answer_match {match!r}: only numeric takes a tolerance, written numeric:0.005 or numeric:1%"
    if tolerance and not _TOLERANCE.fullmatch(tolerance):
        return f"answer_match {match!r}: the tolerance must be a number or a percentage"
    if not matcher.needs_expected:
        return None
    if not expected or not expected.strip():
        return f"answer_match {mode} needs an expected answer"
    return matcher.problem(expected.strip())


def answer_problems(expected: str, match: str, given: str) -> list[str]:
    """Why `given` is not the expected answer under `match` (nothing when it is). Pure."""
    mode, _, tolerance = normalize_answer_match(match).partition(":")
    given, expected = (given or "").strip(), expected.strip()
    wanted = json.dumps(expected, ensure_ascii=False)
    if not given:
        return [f"no answer; expected {wanted}"]
    if given == _NOT_FOUND and expected != _NOT_FOUND:
        return [f"Claude answered {_NOT_FOUND}; expected {wanted}"]
    shown = json.dumps(preview(given, 120), ensure_ascii=False)
    problem = answer_match_problem(match, expected)
    if problem:  # the loaders refuse it first
        return [problem]
    return ANSWER_MATCHERS[mode].mismatch(expected, given, tolerance, shown, wanted)


def check_answer(case: TestCase, transcript: Transcript) -> list[str]:
    """The run's answer against the case's expected answer; `judge` is check_judge's, and a run
    that failed says so already."""
    if case.expected_answer is None or case.answer_match == "judge" or transcript.error:
        return []
    return answer_problems(case.expected_answer, case.answer_match, transcript_answer(transcript))
