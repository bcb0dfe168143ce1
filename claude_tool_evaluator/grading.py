"""Grading after a run: the judge (an LLM grade, 2 of 3 votes) and state checks (a `verify`
command), and what they cost.

May import: the rooms above it (up to options)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import prompts
import test_constants as C

from .cache import CACHE_SAMPLE
from .claude_code import drain
from .errors import FatalApiError, is_api_error
from .hub.processes import (
    RUN_MARKER,
    die_with_parent,
    end_descendants,
    kill_process_group,
    run_marker,
)
from .run_types import Usage, cost_usd, estimated_tokens
from .session import ModelRequest, api_error_message
from .sinks import cap_text, one_line, tail

__all__ = [
    "GRADE_TOOL",
    "JUDGE_TOOL_CHOICE",
    "Judge",
    "grade_expectations",
    "judge_estimate",
    "judge_question",
    "judge_trajectory",
    "judges_answer",
    "needs_judge",
    "parse_grade",
    "run_verify",
]

if TYPE_CHECKING:
    from .redaction import Redactor
    from .results_schema.document import ArtifactRecord, ClaudeRun
    from .run_types import SkillTest, TestCase, Transcript
    from .session import ModelClient


# The judge answers through this tool only (forced by JUDGE_TOOL_CHOICE): its verdict is read from
# the tool call's arguments, never scraped from text.
GRADE_TOOL = {
    "name": "grade",
    "description": "Record your verdict on the run. Call it exactly once.",
    "input_schema": {
        "type": "object",
        "properties": {
            "passed": {"type": "boolean", "description": "True only if every criterion is met."},
            "score": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "The share of the criteria met, from 0 to 1 (1 when passed).",
            },
            "evidence": {
                "type": "string",
                "description": "One to three sentences quoting or pointing at what decided the verdict.",
            },
        },
        "required": ["passed", "score", "evidence"],
    },
}


JUDGE_TOOL_CHOICE = {"type": "tool", "name": "grade"}


def judges_answer(case: TestCase | SkillTest) -> bool:
    """`answer_match: judge`: the judge grades the answer against `expected_answer`."""
    return str(getattr(case, "answer_match", "") or "").strip().lower() == "judge"


def needs_judge(case: TestCase) -> bool:
    return bool(case.rubric) or judges_answer(case)


def judge_question(transcript: Transcript) -> str:
    """What the user asked: every user message of the run (one, unless it was a conversation)."""
    asked = [
        entry.content for entry in transcript.history if entry.role == "user" and entry.content
    ]
    if len(asked) <= 1:
        return asked[0] if asked else transcript.case.prompt
    return "\n\n".join(f"[user message {i}]\n{text}" for i, text in enumerate(asked, 1))


def judge_trajectory(transcript: Transcript) -> str:
    """The run's tool calls, one line each: arguments and the start of the result."""
    calls = transcript.tool_calls
    lines = [
        f"{i}. {call.name}({one_line(json.dumps(call.input, ensure_ascii=False, sort_keys=True), C.JUDGE_RESULT_CHARS)})"
        f" -> {'ERROR ' if call.is_error else ''}{one_line(call.output or '(no output)', C.JUDGE_RESULT_CHARS)}"
        for i, call in enumerate(calls[: C.JUDGE_TOOL_CALLS], 1)
    ]
    if len(calls) > C.JUDGE_TOOL_CALLS:
        lines.append(f"... and {len(calls) - C.JUDGE_TOOL_CALLS} more tool call(s)")
    return "\n".join(lines) or "(no tool calls)"


def _judge_criteria(case: TestCase) -> str:
    parts = (
        [prompts.JUDGE_RUBRIC_CRITERIA.format(rubric=case.rubric.strip())] if case.rubric else []
    )
    if judges_answer(case):
        parts.append(
            prompts.JUDGE_EXPECTED_CRITERIA.format(
                expected=str(getattr(case, "expected_answer", "") or "")
            )
        )
    return "\n\n".join(parts)


def _judge_request(case: TestCase, transcript: Transcript, model: str) -> ModelRequest:
    prompt = prompts.JUDGE_PROMPT.format(
        question=judge_question(transcript),
        criteria=_judge_criteria(case),
        trajectory=judge_trajectory(transcript),
        answer=cap_text(transcript.final_text, C.JUDGE_ANSWER_CHARS) or "(no answer)",
    )
    return ModelRequest(
        model,
        prompts.JUDGE_SYSTEM_PROMPT,
        [{"role": "user", "content": prompt}],
        [GRADE_TOOL],
        C.JUDGE_MAX_TOKENS,
        tool_choice=JUDGE_TOOL_CHOICE,
    )


def parse_grade(content: list[dict]) -> dict:
    """The judge's `grade` tool call -> {passed, score, evidence}, or {error} when it is missing or malformed."""
    call = next(
        (b for b in content if b.get("type") == "tool_use" and b.get("name") == "grade"), None
    )
    if call is None:
        return {"error": "the judge did not call the grade tool"}
    data = call["input"] if isinstance(call.get("input"), dict) else {}
    passed, score, evidence = data.get("passed"), data.get("score"), data.get("evidence")
    if not isinstance(passed, bool):
        return {
            "error": f"the judge's grade has no true/false passed (got {one_line(json.dumps(data), 200)})"
        }
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        return {
            "error": f"the judge's grade has no score from 0 to 1 (got {one_line(json.dumps(data), 200)})"
        }
    return {"passed": passed, "score": float(score), "evidence": str(evidence or "").strip()}


class Judge:
    """The LLM judge of one run of the evaluator. Identical inputs are judged once: the verdict is
    cached by the request's exact content (concurrent identical requests share the one call), so
    only the run that made the call pays for it. Calls go through the run's model client, with
    its retries, rate limiting and fatal-error handling."""

    def __init__(self, model: ModelClient, model_id: str) -> None:
        self.model, self.model_id = model, model_id
        self.cache: dict[str, asyncio.Future] = {}
        self.calls = 0

    async def grade(self, case: TestCase, transcript: Transcript) -> tuple[dict, Usage | None]:
        """(grade, usage of the call made for it, or None when the verdict came from the cache)."""
        return await self.grade_request(_judge_request(case, transcript, self.model_id))

    async def grade_request(self, request: ModelRequest) -> tuple[dict, Usage | None]:
        """Any judge request (a run against its criteria, a task run against one expectation)."""
        key = hashlib.sha256(
            json.dumps(
                [request.model, request.system, request.messages, request.tools], sort_keys=True
            ).encode()
        ).hexdigest()
        if key in self.cache:
            grade, _ = await asyncio.shield(self.cache[key])
            return dict(grade), None
        future = self.cache[key] = asyncio.ensure_future(self._call(request))
        try:
            grade, usage = await asyncio.shield(future)
        except BaseException:
            self.cache.pop(key, None)
            raise
        if (
            "error" in grade
        ):  # a failed call is not a verdict: an identical request later tries again
            self.cache.pop(key, None)
        return dict(grade), usage

    async def _call(self, request: ModelRequest) -> tuple[dict, Usage]:
        # --cache: a grade is one per exact request, like this judge's own cache (not per run)
        CACHE_SAMPLE.set("judge")
        self.calls += 1
        try:
            reply = await self.model.complete(request)
        except FatalApiError:
            raise
        except Exception as exc:
            return {
                "error": api_error_message(exc)
                if is_api_error(exc)
                else f"{exc.__class__.__name__}: {exc}"
            }, Usage()
        return parse_grade(reply.content), reply.usage


def _artifacts_for_judge(artifacts: Sequence[ArtifactRecord]) -> str:
    """Small text files in full (up to a total), every other file by path, size and sha256."""
    parts, budget = [], C.ARTIFACT_TEXT_TOTAL_CHARS
    for a in artifacts:
        header = f"--- {a.path} ({a.status}, {a.size} bytes, " + (
            f"not read: {a.not_read})" if a.not_read else f"sha256 {a.sha256})"
        )
        if a.text is not None and len(a.text) <= budget:
            budget -= len(a.text)
            parts.append(f"{header}\n{a.text}")
        else:
            parts.append(
                header
                + (" (binary or too large to show)" if a.text is None else " (not shown: too long)")
            )
    return "\n".join(parts)


def _expectation_request(
    test: SkillTest, record: ClaudeRun, expectation: str, model: str
) -> ModelRequest:
    """The judge's request for one expectation of a task eval: the judge prompt of every other
    grade, with the expectation as the criterion (the eval's expected output beside it) and the
    run's transcript summary and the files it left as the trajectory."""
    criteria = prompts.JUDGE_EXPECTATION_CRITERIA.format(
        expectation=expectation, expected_output=test.expected_output or "(none given)"
    )
    trajectory = (record.transcript_summary or "(no steps recorded)") + (
        prompts.JUDGE_ARTIFACTS.format(artifacts=_artifacts_for_judge(record.artifacts))
        if record.artifacts
        else ""
    )
    prompt = prompts.JUDGE_PROMPT.format(
        question=test.prompt,
        criteria=criteria,
        trajectory=trajectory,
        answer=cap_text(record.answer, C.JUDGE_ANSWER_CHARS) or "(no answer)",
    )
    return ModelRequest(
        model,
        prompts.JUDGE_SYSTEM_PROMPT,
        [{"role": "user", "content": prompt}],
        [GRADE_TOOL],
        C.JUDGE_MAX_TOKENS,
        tool_choice=JUDGE_TOOL_CHOICE,
    )


async def grade_expectations(
    judge: Judge, test: SkillTest, record: ClaudeRun
) -> tuple[list[dict], float]:
    """Every expectation of a task eval, graded by the judge on one run: [{text, passed,
    evidence}] (an {error} when the judge failed), and what the judge's calls cost."""
    graded, cost = [], 0.0
    for expectation in test.expectations:
        if record.error:
            graded.append(
                {
                    "text": expectation,
                    "passed": False,
                    "evidence": f"not graded: the run failed ({record.error})",
                }
            )
            continue
        grade, usage = await judge.grade_request(
            _expectation_request(test, record, expectation, judge.model_id)
        )
        cost += cost_usd(usage, judge.model_id) if usage else 0.0
        if "error" in grade:
            graded.append(
                {
                    "text": expectation,
                    "passed": False,
                    "evidence": "",
                    "error": f"judge: {grade['error']}",
                }
            )
        else:
            graded.append(
                {"text": expectation, "passed": grade["passed"], "evidence": grade["evidence"]}
            )
    return graded, cost


def judge_estimate(case: TestCase, model: str) -> float:
    """--dry-run: one judge call for a run of this case."""
    prompt = estimated_tokens(
        [
            prompts.JUDGE_SYSTEM_PROMPT,
            prompts.JUDGE_PROMPT,
            GRADE_TOOL,
            case.prompt,
            _judge_criteria(case),
        ]
    )
    usage = Usage(
        input_tokens=prompt + C.ESTIMATED_JUDGE_TRAJECTORY_TOKENS,
        output_tokens=C.ESTIMATED_JUDGE_OUTPUT_TOKENS,
    )
    return cost_usd(usage, model)


async def run_verify(
    command: str, stdin: bytes, env: dict[str, str], timeout: float, redactor: Redactor
) -> dict:
    """A case's `verify` command, through the shell, in a process group of its own: exit 0 is
    {passed: true}, 1 is {passed: false}, with the first line of its stdout as the reason; any
    other exit, a timeout (the whole group is killed) or a failure to start is {error}. What it
    printed is redacted like everything else. Whatever it started ends with it, even a process
    that left its group (`setsid`): see end_descendants."""
    process: asyncio.subprocess.Process | None = None
    stdout, stderr = bytearray(), bytearray()
    marker = run_marker()
    env = dict(env, **{RUN_MARKER: marker})

    async def feed(pipe: asyncio.StreamWriter | None) -> None:
        if pipe is None:  # stdin=PIPE always gives one
            return
        try:
            pipe.write(stdin)
            await pipe.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it need not read its input
        finally:
            pipe.close()

    try:
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        work = asyncio.gather(
            feed(process.stdin),
            drain(process.stdout, stdout, C.VERIFY_OUTPUT_BYTES),
            drain(process.stderr, stderr, C.VERIFY_OUTPUT_BYTES),
            process.wait(),
        )
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout)
        except TimeoutError:
            kill_process_group(process.pid)
            try:  # pipes close once the group is dead; a child that escaped it must not hang us
                await asyncio.wait_for(work, 5)
            except TimeoutError:
                work.cancel()
            return {"error": f"timed out after {timeout:g}s (process group killed)"}
    except OSError as exc:
        return {"error": redactor.text(f"could not start {command!r}: {exc}")}
    finally:
        if process is not None:
            kill_process_group(process.pid)  # whatever it left running in its group goes too
            if process.returncode is None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(process.wait(), 5)
            end_descendants(process.pid, marker)
    out = redactor.text(stdout.decode("utf-8", "replace"))
    reason = one_line(next((line for line in out.splitlines() if line.strip()), ""), 500)
    if process.returncode in (0, 1):
        return {"passed": process.returncode == 0, "reason": reason}
    err = redactor.text(tail(stderr.decode("utf-8", "replace"), 500))
    code = process.returncode
    if code is None:  # never once wait() has returned; a line, not a crash, if it were
        return {"error": "ended without an exit status"}
    how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
    return {
        "error": f"{how}" + (f": {one_line(err, 500)}" if err else f": {reason}" if reason else "")
    }
