"""Reading a `claude -p` run's stream-json: its lines parsed into events, and what the events say
(the skills loaded and fired, the tool calls and their results, the refusals, the hooks that ran,
the subagents handed a task, the result event, what the calls spent, why the run is an error).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine; claude_code.binary."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import test_constants as C

from ..results_schema.document import (
    SKILL_NOT_LOADED,
    ClaudeRun,
    DelegationRecord,
    HookFiringRecord,
)
from ..run_types import ToolCall, Usage, cost_usd
from ..sinks import cap_text, one_line, tail

__all__ = [
    "StreamCall",
    "StreamReader",
    "StreamText",
    "claude_run_of",
    "delegations_of",
    "detect_activation",
    "hook_firings_of",
    "normalize_skill_name",
    "parse_stream_json",
    "read_output",
    "stream_error",
    "transcript_summary",
]


def normalize_skill_name(value: Any) -> str | None:
    """`sql-helper`, `/sql-helper args` and `plugin:sql-helper` all name the skill `sql-helper`."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lstrip("/").split()[0].split(":")[-1] or None


_SKILL_MD_PATH = re.compile(r"(?:^|[\\/])([^\\/]+)[\\/]SKILL\.md$", re.IGNORECASE)


def _skill_of_tool_use(block: dict) -> str | None:
    """The skill a tool_use block activates: a Skill call, or a Read of a skill's SKILL.md."""
    tool_input = block["input"] if isinstance(block.get("input"), dict) else {}
    if block.get("name") == "Skill":
        return normalize_skill_name(tool_input.get("skill") or tool_input.get("command"))
    if block.get("name") == "Read":
        match = _SKILL_MD_PATH.search(
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
_SANDBOX_FAILED = re.compile(
    r"^(?:Exit code \d+\n)?bwrap: |sandbox is required but|sandbox required but unavailable",
    re.IGNORECASE,
)

# How Claude Code says it refused a tool call: a tool it was not given ("No such tool available:
# Write. Write exists but is not enabled in this context", seen with 2.1.330), one it may not use
# ("Permission to use Write has been denied"), or what its sandbox answers a command that writes
# outside ("Read-only file system"), links a file from outside ("Invalid cross-device link") or
# that could not be sandboxed at all.
_REFUSED_TOOL = re.compile(
    r"no such tool available|not enabled in this context|permission|denied|not allowed"
    r"|read-only file system|invalid cross-device link|^(?:exit code \d+\n)?bwrap: ",
    re.IGNORECASE | re.MULTILINE,
)


def _tool_results_of(event: dict) -> list[dict]:
    message = event["message"] if isinstance(event.get("message"), dict) else {}
    content = message.get("content")
    return (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )


def _tool_result_content(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


def _content_blocks(event: dict) -> list[dict]:
    """An assistant event's content blocks (dicts only)."""
    message = event["message"] if isinstance(event.get("message"), dict) else {}
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# Hook events whose plain stdout Claude Code adds to the conversation as context.
_CONTEXT_HOOK_EVENTS = ("UserPromptSubmit", "SessionStart")


_DELEGATING_TOOLS = ("Agent", "Task")  # Task: the Agent tool's name before Claude Code 2.1


def _delegation_of_tool_use(block: dict) -> DelegationRecord | None:
    """The delegation a tool_use block makes: an `Agent` call with its `subagent_type`."""
    tool_input = block["input"] if isinstance(block.get("input"), dict) else {}
    agent = tool_input.get("subagent_type")
    if (
        block.get("name") not in _DELEGATING_TOOLS
        or not isinstance(agent, str)
        or not agent.strip()
    ):
        return None
    return DelegationRecord(
        agent=agent.strip(),
        description=str(tool_input.get("description") or ""),
        prompt=cap_text(str(tool_input.get("prompt") or ""), C.CLAUDE_TOOL_RESULT_CHARS),
    )


def _hook_json_output(stdout: str) -> dict:
    """A hook's stdout as the JSON object Claude Code reads ({} when it is plain text)."""
    text = stdout.strip()
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _hook_firing_of(event: dict) -> HookFiringRecord | None:
    """What a `hook_response` event (--include-hook-events) says a hook did. Claude Code's hook
    contract: exit code 2 blocks (stderr the reason), as does JSON `decision: "block"` or
    `hookSpecificOutput.permissionDecision: "deny"` (its reason); a UserPromptSubmit or
    SessionStart hook's plain stdout, or any hook's `additionalContext`, is added as context."""
    if event.get("type") != "system" or event.get("subtype") != "hook_response":
        return None
    hook_event = str(event.get("hook_event") or "")
    stdout, stderr = str(event.get("stdout") or ""), str(event.get("stderr") or "")
    exit_code = event.get("exit_code") if isinstance(event.get("exit_code"), int) else None
    output = _hook_json_output(stdout)
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
    if not context and not output and exit_code == 0 and hook_event in _CONTEXT_HOOK_EVENTS:
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


def _event_time(event: dict) -> float | None:
    """An event's `timestamp` (ISO 8601, as Claude Code writes it) in seconds; None without one."""
    try:
        return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError):
        return None


# ---------------------------------------------------------------------------- the one reader
@dataclass
class StreamText:
    """A text block of a top-level assistant message."""

    text: str


@dataclass
class StreamCall:
    """A top-level tool call, and its result once the stream gives it (by the call's id: a
    result belongs to the latest call of its id)."""

    block: dict  # the tool_use block as Claude Code wrote it
    name: str
    input: dict
    message: int  # which top-level assistant message made it: 1, 2, ... (the turn)
    output: str = ""  # its result's text, whole
    is_error: bool = False
    loaded: list[str] = field(default_factory=list)  # the tools its result loaded (ToolSearch)

    @property
    def id(self) -> str:
        return str(self.block.get("id"))


@dataclass
class _StreamResult:
    """A tool result at the top level, where it came in the stream."""

    output: str
    is_error: bool


class StreamReader:
    """Reads one run's stream-json events in order, once, for every reader of a run (the skill
    runs' records, the suites' Claude Code harness, the plugin runs' graders): the init event,
    the hooks that ran, the retries, the top level's steps (texts, tool calls with their results,
    the results where they came: a subagent's events carry a parent_tool_use_id and are not the
    top level's), the refusals and delegations among them, every tool_use block at any level and
    the text of the last assistant message that has any, what the assistant messages spent, the
    servers a wait saw connect, and the result event."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.init: dict = {}  # the first init event
        self.skills_loaded: list[str] | None = None  # from the init event; None: it did not say
        self.agents_loaded: list[str] | None = None
        self.api_retries = 0
        self.hooks: list[HookFiringRecord] = []
        self.steps: list[StreamText | StreamCall | _StreamResult] = []
        self.calls: dict[str, StreamCall] = {}  # tool_use id -> its latest call
        self.refused: list[str] = []  # "Write: No such tool available ..."
        self.delegations: list[DelegationRecord] = []
        self.tool_uses: list[dict] = []  # every tool_use block, a subagent's too
        self.last_message = ""  # the last assistant message with text: its texts, a line each
        self.result: dict | None = None  # the last result event
        self.message_ids: set[str] = set()  # the top level's assistant messages
        self.spent: dict[str, tuple[Usage, str]] = {}  # message id -> its usage and model
        self.answered = False  # whether the top level has an assistant message yet
        self.first_answer_at: float | None = None  # its timestamp
        self.connections: list[tuple[list, float]] = []  # (servers connected, when)

    @classmethod
    def of(cls, events: Iterable[dict]) -> StreamReader:
        reader = cls()
        for event in events:
            reader.read(event)
        return reader

    @property
    def top_calls(self) -> list[StreamCall]:
        return [step for step in self.steps if isinstance(step, StreamCall)]

    def read(self, event: dict) -> None:
        self.events.append(event)
        kind, top = event.get("type"), not event.get("parent_tool_use_id")
        if kind == "system":
            self.system(event)
        elif kind == "assistant":
            self.assistant(event, top)
        elif kind == "user" and top:
            self.tool_results(event)
        elif kind == "result":
            self.result = event

    def system(self, event: dict) -> None:
        firing = _hook_firing_of(event)
        if firing is not None:
            self.hooks.append(firing)
        subtype = event.get("subtype")
        if subtype == "api_retry":
            self.api_retries += 1
        if subtype != "init":
            return
        self.init = self.init or event
        if isinstance(event.get("agents"), list):
            self.agents_loaded = sorted(str(a) for a in event["agents"])
        lists = [event[k] for k in ("skills", "slash_commands") if isinstance(event.get(k), list)]
        if lists:  # an empty list says: none loaded
            found = (normalize_skill_name(s) for listed in lists for s in listed)
            self.skills_loaded = sorted(n for n in found if n)

    def assistant(self, event: dict, top: bool) -> None:
        message = event["message"] if isinstance(event.get("message"), dict) else {}
        if isinstance(message.get("usage"), dict):
            key = str(message.get("id") or len(self.spent))
            self.spent[key] = (Usage.from_api(message["usage"]), str(message.get("model") or ""))
        blocks = _content_blocks(event)
        self.tool_uses += [b for b in blocks if b.get("type") == "tool_use"]
        texts = [str(b.get("text") or "") for b in blocks if b.get("type") == "text"]
        if texts:
            self.last_message = "\n".join(texts)
        if top:
            self.top_message(event, message, blocks)

    def top_message(self, event: dict, message: dict, blocks: list[dict]) -> None:
        if not self.answered:
            self.answered, self.first_answer_at = True, _event_time(event)
        self.message_ids.add(str(message.get("id") or len(self.message_ids)))
        for block in blocks:
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                self.steps.append(StreamText(block["text"]))
            elif block.get("type") == "tool_use":
                tool_input = block.get("input")
                call = StreamCall(
                    block,
                    str(block.get("name")),
                    tool_input if isinstance(tool_input, dict) else {},
                    len(self.message_ids),
                )
                self.steps.append(call)
                self.calls[call.id] = call
                delegation = _delegation_of_tool_use(block)
                if delegation is not None:
                    self.delegations.append(delegation)

    def tool_results(self, event: dict) -> None:
        said = event.get("tool_use_result")
        when = _event_time(event)
        if isinstance(said, dict) and isinstance(said.get("connected"), list) and when is not None:
            self.connections.append((said["connected"], when))
        for block in _tool_results_of(event):
            output, is_error = _tool_result_content(block), bool(block.get("is_error"))
            self.steps.append(_StreamResult(output, is_error))
            call = self.calls.get(str(block.get("tool_use_id")))
            if call is not None:
                content = block.get("content")
                call.output, call.is_error = output, is_error
                call.loaded = [
                    str(c.get("tool_name"))
                    for c in (content if isinstance(content, list) else [])
                    if isinstance(c, dict) and c.get("type") == "tool_reference"
                ]
            if is_error and _REFUSED_TOOL.search(output):
                name = call.name if call is not None else "tool"
                self.refused.append(f"{name}: {one_line(output, 200)}")

    @property
    def messages(self) -> int:
        """How many assistant messages the top level had (a message's blocks may come in
        several events, one message id)."""
        return len(self.message_ids)

    def answered_calls(self) -> tuple[Usage, float]:
        """What the calls the stream shows spent (each assistant message's usage, once per
        message id, subagents' too; its output tokens as the stream started: a floor), and their
        cost at each message's model: a run without a result event (cut by a signal or its
        timeout) still spent it."""
        total = Usage()
        for usage, _ in self.spent.values():
            total = total + usage
        return total, sum(cost_usd(usage, model) for usage, model in self.spent.values())

    def connected_after(self) -> dict[str, float]:
        """How long after the first top-level answer each late server connected (ms), from the
        WaitForMcpServers results (`tool_use_result.connected`) and the events' timestamps."""
        found: dict[str, float]
        first, found = self.first_answer_at, {}
        if first is None:
            return found
        for names, when in self.connections:
            for name in names:
                found.setdefault(str(name), round(max(0.0, when - first) * 1000, 1))
        return found


def read_output(stdout: bytes) -> StreamReader:
    """A run's stdout (stream-json lines), read."""
    events, _ = parse_stream_json(stdout.decode("utf-8", "replace"))
    return StreamReader.of(events)


def delegations_of(events: Iterable[dict]) -> list[DelegationRecord]:
    """Every task Claude handed to a subagent, in order: top-level `Agent` calls only (a
    subagent's own events carry a parent_tool_use_id)."""
    return StreamReader.of(events).delegations


def hook_firings_of(events: Iterable[dict]) -> list[HookFiringRecord]:
    """Every hook that ran in a run and what it did, in order."""
    return StreamReader.of(events).hooks


def transcript_summary(stream: StreamReader, limit: int = C.TRANSCRIPT_SUMMARY_CHARS) -> str:
    """A task run's steps, one line each: Claude's text, each tool call with its arguments, and
    the start of each tool result (the top level only). What the judge reads besides the answer."""
    lines: list[str] = []
    for step in stream.steps:
        if isinstance(step, StreamText) and step.text.strip():
            lines.append(f"assistant: {one_line(step.text, C.JUDGE_RESULT_CHARS)}")
        elif isinstance(step, StreamCall):
            arguments = json.dumps(step.block.get("input"), ensure_ascii=False, sort_keys=True)
            lines.append(
                f"tool call {step.block.get('name')}({one_line(arguments, C.JUDGE_RESULT_CHARS)})"
            )
        elif isinstance(step, _StreamResult):
            lines.append(
                f"  -> {'ERROR ' if step.is_error else ''}"
                f"{one_line(step.output or '(no output)', C.JUDGE_RESULT_CHARS)}"
            )
    return cap_text("\n".join(lines), limit)


def _result_reason(result: dict) -> str:
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
        reason = tail(_result_reason(result), 300)
        return f"claude reported an error ({result.get('subtype')}): {reason}".rstrip(": ")
    return None


def _run_error(stream: StreamReader, record: ClaudeRun, installed: Sequence[str]) -> str | None:
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
    broken = stream_error(stream.events, stream.result)
    if broken:
        return broken
    failed = next((c for c in record.tool_calls if _SANDBOX_FAILED.search(c.output)), None)
    if failed is not None:  # every Bash call then fails: the run says nothing about the skill
        return f"Claude Code's sandbox did not start: {one_line(failed.output, 300)}"
    return None


def _skill_run_calls(stream: StreamReader, record: ClaudeRun) -> None:
    """The top-level tool calls as a skill run records them: each call in order (its result
    cut), which skills fired (in order, after any other tools too), what Claude Code refused."""
    for turn, call in enumerate(stream.top_calls, 1):
        record.tools.append(call.name)
        record.tool_calls.append(
            ToolCall(
                call.name,
                call.input,
                cap_text(call.output, C.CLAUDE_TOOL_RESULT_CHARS),
                call.is_error,
                turn=turn,
                id=call.id,
            )
        )
        skill = _skill_of_tool_use(call.block)
        if skill and skill not in record.activated_skills:
            record.activated_skills.append(skill)
    record.refused_tools = list(stream.refused)
    for denial in (stream.result or {}).get("permission_denials") or []:
        if isinstance(denial, dict) and not any(
            r.startswith(f"{denial.get('tool_name')}:") for r in record.refused_tools
        ):
            record.refused_tools.append(f"{denial.get('tool_name')}: permission denied")
    record.first_tool = record.tools[0] if record.tools else None
    record.tool_count = len(record.tools)


def claude_run_of(
    stream: StreamReader, installed: Sequence[str], query: str = "", run: int = 1
) -> ClaudeRun:
    """A skill run's record of what its stream says: the skills and agents loaded, the hooks, the
    delegations, the tool calls (skill_run_calls), the answer (the result's, else the last text),
    the result event's numbers (or, cut short, what the answered calls spent), and why the run is
    an error when it is one (no result, an API error, the skill not loaded at all, a sandbox that
    did not start)."""
    record = ClaudeRun(query=query, run=run)
    record.skills_loaded, record.agents_loaded = stream.skills_loaded, stream.agents_loaded
    record.hooks, record.delegations = list(stream.hooks), list(stream.delegations)
    record.api_retries = stream.api_retries
    _skill_run_calls(stream, record)
    texts = [s.text.strip() for s in stream.steps if isinstance(s, StreamText) and s.text.strip()]
    record.answer = texts[-1] if texts else ""
    result = stream.result
    if result is not None:
        record.result_subtype = result.get("subtype")
        record.is_error = result.get("is_error")
        record.num_turns = result.get("num_turns")
        record.duration_ms = result.get("duration_ms")
        record.total_cost_usd = result.get("total_cost_usd")
        record.usage = result["usage"] if isinstance(result.get("usage"), dict) else {}
        if isinstance(result.get("result"), str):
            record.answer = result["result"]
    else:  # cut short: what the calls answered so far spent
        usage, cost = stream.answered_calls()
        if usage.total:
            record.usage, record.total_cost_usd = asdict(usage), round(cost, 6)
    record.error = _run_error(stream, record, installed)
    return record


def detect_activation(
    events: list[dict], installed: Sequence[str], query: str = "", run: int = 1
) -> ClaudeRun:
    """What one run's events say (claude_run_of): which skills fired (top-level Skill calls or
    Reads of a SKILL.md), the tools used, the result event, and why the run is an error."""
    return claude_run_of(StreamReader.of(events), installed, query, run)
