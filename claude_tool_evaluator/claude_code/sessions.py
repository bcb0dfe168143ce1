"""Reading what Claude Code kept of a session: its session log (`~/.claude/projects/<cwd-slug>/
<session>.jsonl`, one JSON record a line) or a `claude -p --output-format stream-json` transcript,
into what a case is made of: the user's first message, the skills, agents and MCP tools the top
level called, the final answer, and where it came from.

A session log's records (seen with Claude Code 2.1.332): `user` and `assistant` records carry an
Anthropic `message` (a user's prompt is a string or text blocks; tool results are `tool_result`
blocks; a skill's body comes back as a user message marked `isMeta`), with `uuid`, `parentUuid`,
`sessionId`, `timestamp`, `cwd`, `version` and `isSidechain` (a subagent's records, when they are
kept in the same file); the rest (`attachment`, `summary`, `queue-operation`, `last-prompt`,
`api-request`, `cost-state`, ...) say nothing a case needs. A stream-json transcript has the same
`user`/`assistant` events with `session_id` and `parent_tool_use_id` (a subagent's), a `system`
init event and a `result` event; it carries the prompt only when Claude Code echoed it
(`--replay-user-messages`). Both are read by the one stream reader (claude_code.stream).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine; claude_code.stream, binary."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .stream import StreamCall, StreamReader, StreamText

__all__ = [
    "RecordedSession",
    "read_session_file",
    "session_files",
]


@dataclass
class RecordedSession:
    """One session as a case needs it. `skills` are named as the session called them
    (`PLUGIN:NAME` for a plugin's), `agents` by their subagent_type, `mcp_tools` by their full
    `mcp__SERVER__TOOL` names; each once, in the order first called."""

    id: str
    source: Path
    form: str  # "session log" | "stream-json"
    started: str  # the first record's timestamp (ISO 8601), "" without one
    prompt: str
    answer: str
    skills: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    mcp_tools: list[str] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)  # the lines that were no JSON record

    @property
    def used(self) -> list[str]:
        return [*self.skills, *self.agents, *self.mcp_tools]


def session_files(path: Path) -> list[Path]:
    """The session files a PATH names: a file itself; a project folder's `*.jsonl`; the projects
    folder's `*/*.jsonl` (a session's own subfolder, a subagent's log, is not a session)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(
            "no such file or folder",
            path,
            hint="give a session .jsonl file, a project folder or ~/.claude/projects",
        )
    found = sorted(path.glob("*.jsonl")) or sorted(path.glob("*/*.jsonl"))
    if not found:
        raise InputError(
            "holds no session logs (*.jsonl, or */*.jsonl in the projects folder)",
            path,
            hint="Claude Code keeps them in ~/.claude/projects/<project>/<session>.jsonl",
        )
    return found


def _records(path: Path) -> tuple[list[tuple[int, dict]], list[int]]:
    """Each JSON object record with its line number, and the numbers of the lines that were not."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror or exc}", path) from None
    records, bad = [], []
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines(): see parse_stream_json
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            bad.append(number)
            continue
        if isinstance(record, dict):
            records.append((number, record))
        else:
            bad.append(number)
    return records, bad


# A slash command as a session log keeps the user's line: `/NAME ARGS`, said again as typed.
_COMMAND_NAME = re.compile(r"<command-name>\s*(/[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# What Claude Code writes as a user message that no user typed (a local command's output).
_NOT_TYPED = ("<local-command-", "Caveat: ")


def _typed_text(record: dict) -> str | None:
    """A user record's typed text (a prompt, a slash command as typed), or None: tool results,
    a skill's body (`isMeta`), a local command's output."""
    message = record.get("message") if isinstance(record.get("message"), dict) else {}
    content = message.get("content") if message else None
    if record.get("isMeta") or content is None:
        return None
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        content = "\n".join(t for t in texts if isinstance(t, str))
    if not isinstance(content, str) or not content.strip() or content.startswith(_NOT_TYPED):
        return None
    command = _COMMAND_NAME.search(content)
    if command:
        args = _COMMAND_ARGS.search(content)
        return f"{command.group(1)} {args.group(1).strip() if args else ''}".strip()
    return content.strip()


def _as_stream_event(record: dict) -> dict:
    """A session log's record as the stream reader reads an event: a sidechain's (a subagent's
    records in the session's own file) is not the top level's."""
    if record.get("isSidechain") and not record.get("parent_tool_use_id"):
        return {**record, "parent_tool_use_id": "sidechain"}
    return record


def _final_answer(reader: StreamReader) -> str:
    """The top level's last answer: the result event's text, else the texts after its last call
    (the last text when none came after it)."""
    if reader.result is not None and isinstance(reader.result.get("result"), str):
        return reader.result["result"].strip()
    after: list[str] = []
    last = ""
    for step in reader.steps:
        if isinstance(step, StreamCall):
            after = []
        elif isinstance(step, StreamText):
            after.append(step.text)
            last = step.text
    return ("\n".join(after) or last).strip()


def _used(reader: StreamReader) -> tuple[list[str], list[str], list[str]]:
    """The skills, agents and MCP tools the top level called, each once, in order."""
    skills: dict[str, None] = {}
    agents: dict[str, None] = {}
    tools: dict[str, None] = {}
    for call in reader.top_calls:
        if call.name == "Skill":
            name = call.input.get("skill") or call.input.get("command")
            if isinstance(name, str) and name.strip():
                skills[name.strip().lstrip("/").split()[0]] = None
        elif call.name in ("Agent", "Task"):
            agent = call.input.get("subagent_type")
            if isinstance(agent, str) and agent.strip():
                agents[agent.strip()] = None
        elif call.name.startswith("mcp__"):
            tools[call.name] = None
    return list(skills), list(agents), list(tools)


def read_session_file(path: Path) -> RecordedSession:
    """One file's session (a session log or a stream-json transcript), its garbled lines counted;
    its prompt is "" when no line of it holds one (nothing usable)."""
    records, bad = _records(path)
    events = [r for _, r in records if r.get("type") in ("user", "assistant", "system", "result")]
    stream_json = any("session_id" in r for r in events) and not any(
        "sessionId" in r for r in events
    )
    reader = StreamReader.of(_as_stream_event(r) for r in events)
    prompt = None
    for record in events:
        top = not record.get("isSidechain") and not record.get("parent_tool_use_id")
        if record.get("type") == "assistant" and top:
            break  # what a user says after the first answer is no prompt of the case
        if record.get("type") == "user" and top:
            prompt = _typed_text(record)
            if prompt:
                break
    ids = [r.get("sessionId") or r.get("session_id") for r in events]
    stamps = [r["timestamp"] for _, r in records if isinstance(r.get("timestamp"), str)]
    skills, agents, tools = _used(reader)
    return RecordedSession(
        id=str(next((i for i in ids if isinstance(i, str) and i), path.stem)),
        source=path,
        form="stream-json" if stream_json else "session log",
        started=min(stamps) if stamps else "",
        prompt=prompt or "",
        answer=_final_answer(reader),
        skills=skills,
        agents=agents,
        mcp_tools=tools,
        bad_lines=bad,
    )
