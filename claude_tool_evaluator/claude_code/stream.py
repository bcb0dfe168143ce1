"""Reading a `claude -p` run's stream-json: its lines parsed into events, and what the events say
(the skills loaded and fired, the tool calls and their results, the refusals, the hooks that ran,
the subagents handed a task, the result event, what the calls spent, why the run is an error).

May import: the foundations (errors, stopping, sinks, files, records, redaction, patterns),
result_records, answers, loaders, hub, session, batches, engine; claude_code.binary."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

import test_constants as C

from ..records import ToolCall, Usage, cost_usd
from ..result_records import SKILL_NOT_LOADED, ClaudeRun, DelegationRecord, HookFiringRecord
from ..sinks import cap_text, one_line, tail


def normalize_skill_name(value: Any) -> str | None:
    """`sql-helper`, `/sql-helper args` and `plugin:sql-helper` all name the skill `sql-helper`."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lstrip("/").split()[0].split(":")[-1] or None


SKILL_MD_PATH = re.compile(r"(?:^|[\\/])([^\\/]+)[\\/]SKILL\.md$", re.IGNORECASE)


def skill_of_tool_use(block: dict) -> str | None:
    """The skill a tool_use block activates: a Skill call, or a Read of a skill's SKILL.md."""
    tool_input = block["input"] if isinstance(block.get("input"), dict) else {}
    if block.get("name") == "Skill":
        return normalize_skill_name(tool_input.get("skill") or tool_input.get("command"))
    if block.get("name") == "Read":
        match = SKILL_MD_PATH.search(
            str(tool_input.get("file_path") or tool_input.get("path") or "")
        )
        return match.group(1) if match else None
    return None


def parse_stream_json(text: str) -> tuple[list[dict], int]:
    """stream-json lines -> events, and how many lines were not JSON objects (a cut-off last line)."""
    events, bad = [], 0
    for line in text.split("\n"):  # not splitlines(): JSON leaves \x85 and U+2028 in strings raw
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # garbage, a number too long, nesting too deep
            bad += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad += 1
    return events, bad


# How Claude Code says its sandbox did not start (in a Bash result, or a run's `errors`).
SANDBOX_FAILED = re.compile(
    r"^(?:Exit code \d+\n)?bwrap: |sandbox is required but|sandbox required but unavailable",
    re.IGNORECASE,
)

# How Claude Code says it refused a tool call: a tool it was not given ("No such tool available:
# Write. Write exists but is not enabled in this context", seen with 2.1.330), one it may not use
# ("Permission to use Write has been denied"), or what its sandbox answers a command that writes
# outside ("Read-only file system"), links a file from outside ("Invalid cross-device link") or
# that could not be sandboxed at all.
REFUSED_TOOL = re.compile(
    r"no such tool available|not enabled in this context|permission|denied|not allowed"
    r"|read-only file system|invalid cross-device link|^(?:exit code \d+\n)?bwrap: ",
    re.IGNORECASE | re.MULTILINE,
)


def tool_results_of(event: dict) -> list[dict]:
    message = event["message"] if isinstance(event.get("message"), dict) else {}
    content = message.get("content")
    return (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )


def tool_result_content(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


def content_blocks(event: dict) -> list[dict]:
    """An assistant event's content blocks (dicts only)."""
    message = event["message"] if isinstance(event.get("message"), dict) else {}
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# Hook events whose plain stdout Claude Code adds to the conversation as context.
CONTEXT_HOOK_EVENTS = ("UserPromptSubmit", "SessionStart")


DELEGATING_TOOLS = ("Agent", "Task")  # Task: the Agent tool's name before Claude Code 2.1


def delegation_of_tool_use(block: dict) -> DelegationRecord | None:
    """The delegation a tool_use block makes: an `Agent` call with its `subagent_type`."""
    tool_input = block["input"] if isinstance(block.get("input"), dict) else {}
    agent = tool_input.get("subagent_type")
    if block.get("name") not in DELEGATING_TOOLS or not isinstance(agent, str) or not agent.strip():
        return None
    return DelegationRecord(
        agent=agent.strip(),
        description=str(tool_input.get("description") or ""),
        prompt=cap_text(str(tool_input.get("prompt") or ""), C.CLAUDE_TOOL_RESULT_CHARS),
    )


def delegations_of(events: Iterable[dict]) -> list[DelegationRecord]:
    """Every task Claude handed to a subagent, in order: top-level `Agent` calls only (a
    subagent's own events carry a parent_tool_use_id)."""
    return [
        delegation
        for event in events
        if event.get("type") == "assistant" and not event.get("parent_tool_use_id")
        for block in content_blocks(event)
        if block.get("type") == "tool_use"
        for delegation in [delegation_of_tool_use(block)]
        if delegation is not None
    ]


def hook_json_output(stdout: str) -> dict:
    """A hook's stdout as the JSON object Claude Code reads ({} when it is plain text)."""
    text = stdout.strip()
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def hook_firing_of(event: dict) -> HookFiringRecord | None:
    """What a `hook_response` event (--include-hook-events) says a hook did. Claude Code's hook
    contract: exit code 2 blocks (stderr the reason), as does JSON `decision: "block"` or
    `hookSpecificOutput.permissionDecision: "deny"` (its reason); a UserPromptSubmit or
    SessionStart hook's plain stdout, or any hook's `additionalContext`, is added as context."""
    if event.get("type") != "system" or event.get("subtype") != "hook_response":
        return None
    hook_event = str(event.get("hook_event") or "")
    stdout, stderr = str(event.get("stdout") or ""), str(event.get("stderr") or "")
    exit_code = event.get("exit_code") if isinstance(event.get("exit_code"), int) else None
    output = hook_json_output(stdout)
    specific = output.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    blocked = (
        exit_code == 2
        or output.get("decision") == "block"
        or specific.get("permissionDecision") == "deny"
    )
    reason = (
        stderr
        if exit_code == 2
        else str(output.get("reason") or specific.get("permissionDecisionReason") or "")
    )
    context = str(specific.get("additionalContext") or "")
    if not context and not output and exit_code == 0 and hook_event in CONTEXT_HOOK_EVENTS:
        context = stdout
    return HookFiringRecord(
        event=hook_event,
        name=str(event.get("hook_name") or hook_event),
        outcome=str(event.get("outcome") or ""),
        exit_code=exit_code,
        blocked=bool(blocked),
        reason=one_line(reason.strip(), 300) if blocked else "",
        context=cap_text(context.strip(), C.CLAUDE_TOOL_RESULT_CHARS),
    )


def hook_firings_of(events: Iterable[dict]) -> list[HookFiringRecord]:
    """Every hook that ran in a run and what it did, in order."""
    return [firing for event in events if (firing := hook_firing_of(event)) is not None]


def transcript_summary(events: list[dict], limit: int = C.TRANSCRIPT_SUMMARY_CHARS) -> str:
    """A task run's steps, one line each: Claude's text, each tool call with its arguments, and
    the start of each tool result (top-level events only). What the judge reads besides the answer."""
    lines: list[str] = []
    for event in events:
        if event.get("parent_tool_use_id"):
            continue
        if event.get("type") == "assistant":
            for block in content_blocks(event):
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    lines.append(f"assistant: {one_line(block['text'], C.JUDGE_RESULT_CHARS)}")
                elif block.get("type") == "tool_use":
                    arguments = json.dumps(block.get("input"), ensure_ascii=False, sort_keys=True)
                    lines.append(
                        f"tool call {block.get('name')}({one_line(arguments, C.JUDGE_RESULT_CHARS)})"
                    )
        elif event.get("type") == "user":
            for block in tool_results_of(event):
                lines.append(
                    f"  -> {'ERROR ' if block.get('is_error') else ''}"
                    f"{one_line(tool_result_content(block) or '(no output)', C.JUDGE_RESULT_CHARS)}"
                )
    return cap_text("\n".join(lines), limit)


def result_reason(result: dict) -> str:
    """Why a result event says the run failed: its `result` text, else its first `errors` entry
    (an `error_during_execution` has `result: null`: "Sandbox required but unavailable: ...")."""
    if isinstance(result.get("result"), str) and result["result"].strip():
        return result["result"]
    errors = result.get("errors")
    return str(errors[0]) if isinstance(errors, list) and errors else ""


def stream_error(events: list[dict], result: dict | None) -> str | None:
    """Why a run's stream says it failed (None: it finished). Hitting --max-turns is finishing:
    the skill had its chance to fire, the case its turns."""
    if not events:
        return "no stream-json output"
    if result is None:
        return "output ended without a result event (truncated)"
    if result.get("is_error") and result.get("subtype") != "error_max_turns":
        reason = tail(result_reason(result), 300)
        return f"claude reported an error ({result.get('subtype')}): {reason}".rstrip(": ")
    return None


def run_error(
    events: list[dict], result: dict | None, record: ClaudeRun, installed: Sequence[str]
) -> str | None:
    missing = [
        name
        for name in installed
        if record.skills_loaded is not None
        and name not in record.skills_loaded
        and name not in (record.agents_loaded or ())
    ]
    if missing:
        return (
            f"{SKILL_NOT_LOADED}: {', '.join(missing)} is missing from the init event's skills "
            "and agents (check its SKILL.md or agent file's frontmatter)"
        )
    broken = stream_error(events, result)
    if broken:
        return broken
    failed = next((c for c in record.tool_calls if SANDBOX_FAILED.search(c.output)), None)
    if failed is not None:  # every Bash call then fails: the run says nothing about the skill
        return f"Claude Code's sandbox did not start: {one_line(failed.output, 300)}"
    return None


def answered_calls(events: Iterable[dict]) -> tuple[Usage, float]:
    """What the calls a run's events show spent (each assistant message's usage, once per message
    id, subagents' too; its output tokens as the stream started: a floor), and their cost at each
    message's model: a run without a result event (cut by a signal or its timeout) still spent it."""
    messages: dict[str, tuple[Usage, str]] = {}
    for event in events:
        message = event.get("message") if event.get("type") == "assistant" else None
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            key = str(message.get("id") or len(messages))
            messages[key] = (Usage.from_api(message["usage"]), str(message.get("model") or ""))
    total = Usage()
    for usage, _ in messages.values():
        total = total + usage
    return total, sum(cost_usd(usage, model) for usage, model in messages.values())


class ActivationReader:
    """Reads one run's stream-json events in order: the init event's skills, each top-level tool
    call (a forked skill's subagent reports with a parent_tool_use_id: its tools are not ours) and
    its result, the refusals, retries, and the result event."""

    def __init__(self, record: ClaudeRun) -> None:
        self.record = record
        self.result: dict | None = None
        self.last_text = ""
        self.names: dict[str, str] = {}  # tool_use id -> tool name
        self.calls: dict[str, ToolCall] = {}  # tool_use id -> its call

    def read(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "system":
            self.system(event)
        elif kind == "assistant" and not event.get("parent_tool_use_id"):
            for block in content_blocks(event):
                self.assistant_block(block)
                delegation = (
                    delegation_of_tool_use(block) if block.get("type") == "tool_use" else None
                )
                if delegation is not None:
                    self.record.delegations.append(delegation)
        elif kind == "user" and not event.get("parent_tool_use_id"):
            for block in tool_results_of(event):
                self.tool_result(block)
        elif kind == "result":
            self.result = event

    def system(self, event: dict) -> None:
        firing = hook_firing_of(event)
        if firing is not None:
            self.record.hooks.append(firing)
        if event.get("subtype") == "init" and isinstance(event.get("agents"), list):
            self.record.agents_loaded = sorted(str(a) for a in event["agents"])
        if event.get("subtype") == "api_retry":
            self.record.api_retries += 1
        elif event.get("subtype") == "init" and any(
            isinstance(event.get(key), list) for key in ("skills", "slash_commands")
        ):
            listed = [
                s
                for key in ("skills", "slash_commands")
                if isinstance(event.get(key), list)
                for s in event[key]
            ]
            self.record.skills_loaded = sorted(n for n in map(normalize_skill_name, listed) if n)

    def assistant_block(self, block: dict) -> None:
        record = self.record
        if block.get("type") == "tool_use":
            name, call_id = str(block.get("name")), str(block.get("id"))
            record.tools.append(name)
            self.names[call_id] = name
            call = ToolCall(
                name,
                block["input"] if isinstance(block.get("input"), dict) else {},
                turn=len(record.tool_calls) + 1,
                id=call_id,
            )
            record.tool_calls.append(call)
            self.calls[call_id] = call
            skill = skill_of_tool_use(block)
            if skill and skill not in record.activated_skills:
                record.activated_skills.append(skill)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            self.last_text = block["text"].strip() or self.last_text

    def tool_result(self, block: dict) -> None:
        content = tool_result_content(block)
        call = self.calls.get(str(block.get("tool_use_id")))
        if call is not None:
            call.output = cap_text(content, C.CLAUDE_TOOL_RESULT_CHARS)
            call.is_error = bool(block.get("is_error"))
        if block.get("is_error") and REFUSED_TOOL.search(content):
            name = self.names.get(str(block.get("tool_use_id")), "tool")
            self.record.refused_tools.append(f"{name}: {one_line(content, 200)}")

    def finish(self, events: list[dict], installed: Sequence[str]) -> ClaudeRun:
        record, result = self.record, self.result
        for denial in (result or {}).get("permission_denials") or []:
            if isinstance(denial, dict) and not any(
                r.startswith(f"{denial.get('tool_name')}:") for r in record.refused_tools
            ):
                record.refused_tools.append(f"{denial.get('tool_name')}: permission denied")
        record.first_tool = record.tools[0] if record.tools else None
        record.tool_count = len(record.tools)
        record.answer = self.last_text
        if result is not None:
            record.result_subtype = result.get("subtype")
            record.is_error = result.get("is_error")
            record.num_turns = result.get("num_turns")
            record.duration_ms = result.get("duration_ms")
            record.total_cost_usd = result.get("total_cost_usd")
            record.usage = result["usage"] if isinstance(result.get("usage"), dict) else {}
            if isinstance(result.get("result"), str):
                record.answer = result["result"]
        if result is None:  # cut short: what the calls answered so far spent
            usage, cost = answered_calls(events)
            if usage.total:
                record.usage, record.total_cost_usd = asdict(usage), round(cost, 6)
        record.error = run_error(events, result, record, installed)
        return record


def detect_activation(
    events: list[dict], installed: Sequence[str], query: str = "", run: int = 1
) -> ClaudeRun:
    """What one run's events say: which skills fired (top-level Skill calls or Reads of a
    SKILL.md, in order, after any other tools too), the tools used, the result event, and why the
    run is an error when it is one (no result, an API error, the skill not loaded at all, a
    sandbox that did not start)."""
    reader = ActivationReader(ClaudeRun(query=query, run=run))
    for event in events:
        reader.read(event)
    return reader.finish(events, installed)
