"""The one reader of `claude -p`'s stream-json (claude_code/stream.py): the skill runs' records,
the suites' Claude Code harness and the plugin runs' graders read a run's events through it.
The streams here are written by hand in the shapes Claude Code 2.1.332 writes (an init event,
assistant and user events, a subagent's events with a parent_tool_use_id, hook events, a
WaitForMcpServers result with `tool_use_result.connected`, the result event), and every value
asserted is counted from them by hand."""

from __future__ import annotations

import json

import test_constants as C
from claude_tool_evaluator.claude_code.stream import (
    StreamReader,
    detect_activation,
    read_output,
    transcript_summary,
)
from claude_tool_evaluator.hub.tools import ToolSpec
from claude_tool_evaluator.run_types import HistoryEntry, Usage
from claude_tool_evaluator.runners.claude_harness import claude_names, read_stream
from claude_tool_evaluator.runners.plugin import graded_calls_and_text

CLOCK = "mcp__clock__get_time"
NOTES = "mcp__notes__save_note"
TOOLS = {
    "get_time": ToolSpec("get_time", "clock", "get_time", "Current time", {}),
    "save_note": ToolSpec("save_note", "notes", "save_note", "Saves a note", {}),
}
REFUSAL = "Permission to use Bash has been denied"
LONG = "x" * (C.CLAUDE_TOOL_RESULT_CHARS + 10)


def assistant(message_id: str, *blocks: dict, at: str = "", parent: str | None = None) -> dict:
    event = {
        "type": "assistant",
        "message": {
            "id": message_id,
            "model": "claude-haiku-4-5",
            "content": list(blocks),
            "usage": {"input_tokens": 100, "output_tokens": 10},
        },
        "parent_tool_use_id": parent,
    }
    return dict(event, timestamp=at) if at else event


def call(call_id: str, name: str, **arguments: object) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def said(text: str) -> dict:
    return {"type": "text", "text": text}


def result(call_id: str, content: object, is_error: bool = False, **event: object) -> dict:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return {
        "type": "user",
        "message": {"content": [dict(block, is_error=True) if is_error else block]},
        "parent_tool_use_id": None,
        **event,
    }


INIT = {
    "type": "system",
    "subtype": "init",
    "claude_code_version": "2.1.332",
    "tools": ["Bash", "ToolSearch", "WaitForMcpServers"],
    "mcp_servers": [
        {"name": "clock", "status": "connected"},
        {"name": "notes", "status": "pending"},
    ],
    "skills": ["/sql-helper", "plugin:notes-skill"],
    "agents": ["reviewer"],
}
HOOK = {
    "type": "system",
    "subtype": "hook_response",
    "hook_event": "PreToolUse",
    "hook_name": "PreToolUse:Bash",
    "exit_code": 2,
    "stderr": "no shell here",
    "outcome": "success",
}
EVENTS = [
    INIT,
    {"type": "system", "subtype": "api_retry"},
    # message m1 comes in two events (one id): one model call
    assistant(
        "m1",
        said("Let me look."),
        call("t1", "ToolSearch", query="time"),
        at="2026-01-01T10:00:00Z",
    ),
    result("t1", [{"type": "tool_reference", "tool_name": CLOCK}]),
    assistant("m1", call("t2", "WaitForMcpServers")),
    result(
        "t2",
        "connected",
        tool_use_result={"connected": ["notes"]},
        timestamp="2026-01-01T10:00:01.5Z",
    ),
    assistant("m2", call("t3", CLOCK, tz="UTC"), call("t4", NOTES, text="hi")),
    result("t3", [{"type": "text", "text": "10:00"}]),
    result("t4", LONG),
    HOOK,
    assistant("m3", call("t5", "Bash", command="ls"), call("t6", "Skill", skill="/sql-helper go")),
    result("t5", REFUSAL, is_error=True),
    # a subagent's turn: not the top level's calls, but what the plugin graders read
    assistant("s1", call("u1", "Read", file_path="/x"), said("sub text"), parent="t6"),
    {**result("u1", "file"), "parent_tool_use_id": "t6"},
    assistant("m4", said("It is 10:00."), said("  ")),
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 4,
        "result": "It is 10:00 in UTC.",
        "usage": {"input_tokens": 400, "output_tokens": 40},
        "total_cost_usd": 0.01,
        "permission_denials": [{"tool_name": "Write"}],
    },
]


def test_a_skill_run_reads_the_top_level_calls_refusals_hooks_and_result():
    run = detect_activation(EVENTS, ["sql-helper"], "what time is it", 2)
    top = ["ToolSearch", "WaitForMcpServers", CLOCK, NOTES, "Bash", "Skill"]
    assert run.tools == top and run.first_tool == "ToolSearch" and run.tool_count == 6
    assert [(c.name, c.turn, c.id) for c in run.tool_calls] == [
        (name, turn, f"t{turn}") for turn, name in enumerate(top, 1)
    ]
    clock, notes, bash = run.tool_calls[2], run.tool_calls[3], run.tool_calls[4]
    assert (clock.input, clock.output, clock.is_error) == ({"tz": "UTC"}, "10:00", False)
    assert notes.output.startswith("x" * C.CLAUDE_TOOL_RESULT_CHARS + "\n...[truncated 10 of")
    assert bash.is_error and bash.output == REFUSAL
    assert run.refused_tools == [f"Bash: {REFUSAL}", "Write: permission denied"]
    assert run.activated_skills == ["sql-helper"]
    assert run.skills_loaded == ["notes-skill", "sql-helper"] and run.agents_loaded == ["reviewer"]
    assert [(h.name, h.blocked, h.reason) for h in run.hooks] == [
        ("PreToolUse:Bash", True, "no shell here")
    ]
    assert run.api_retries == 1 and run.answer == "It is 10:00 in UTC."
    assert (run.num_turns, run.result_subtype, run.error) == (4, "success", None)
    # the judge's reading of a task run: the top level's steps, each result where it came
    assert transcript_summary(StreamReader.of(EVENTS)).splitlines() == [
        "assistant: Let me look.",
        'tool call ToolSearch({"query": "time"})',
        "  -> (no output)",
        "tool call WaitForMcpServers({})",
        "  -> connected",
        f'tool call {CLOCK}({{"tz": "UTC"}})',
        f'tool call {NOTES}({{"text": "hi"}})',
        "  -> 10:00",
        "  -> " + "x" * (C.JUDGE_RESULT_CHARS - 1) + "…",
        'tool call Bash({"command": "ls"})',
        'tool call Skill({"skill": "/sql-helper go"})',
        f"  -> ERROR {REFUSAL}",
        "assistant: It is 10:00.",
    ]


def test_a_run_cut_short_counts_what_its_answered_calls_spent_once_per_message():
    cut = EVENTS[:5]  # m1 twice: one message, one usage
    run = detect_activation(cut, [])
    assert run.usage == {
        "input_tokens": 100,
        "output_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    assert run.error == "output ended without a result event (truncated)"
    assert run.answer == "Let me look."
    assert StreamReader.of(cut).answered_calls()[0] == Usage(input_tokens=100, output_tokens=10)


def test_the_harness_reads_the_suites_calls_the_search_the_wait_and_the_built_ins():
    names = claude_names(TOOLS)
    assert names == {CLOCK: "get_time", NOTES: "save_note"}
    reading = read_stream(StreamReader.of(EVENTS), "what time is it", names, TOOLS, {NOTES})
    clock, notes = reading.calls
    assert (clock.name, clock.server, clock.turn, clock.source, clock.executed) == (
        "get_time",
        "clock",
        2,
        "live",
        True,
    )
    assert clock.output == "10:00" and clock.id == "t3"
    assert (notes.name, notes.source, notes.executed, notes.output) == (
        "save_note",
        "policy",
        False,
        LONG,  # the whole result: the API harness keeps what the tool said
    )
    assert reading.model_calls == 4  # m1 (two events), m2, m3, m4; s1 is a subagent's
    assert reading.final_text == "It is 10:00 in UTC."
    assert reading.usage == Usage(input_tokens=400, output_tokens=40)
    assert reading.history == [
        HistoryEntry(role="user", content="what time is it"),
        HistoryEntry(role="assistant", content="Let me look."),
        HistoryEntry(role="assistant", content="[get_time]", has_tools=True),
        HistoryEntry(role="tool", content="10:00"),
        HistoryEntry(role="assistant", content="[save_note]", has_tools=True),
        HistoryEntry(role="tool", content=LONG),
        HistoryEntry(role="assistant", content="It is 10:00."),
        HistoryEntry(role="assistant", content="  "),
    ]
    assert reading.facts == {
        "claude_version": "2.1.332",
        "deferred": True,
        "searches": [{"query": "time", "loaded": ["get_time"]}],
        "loaded": ["get_time"],
        "waited": True,
        "servers": {
            "clock": {"status_at_start": "connected", "waited": True},
            # its wait's result came 1.5 s after the first answer
            "notes": {"status_at_start": "pending", "waited": True, "connected_after_ms": 1500.0},
        },
        "builtins": ["Bash", "Skill"],
        "withheld": ["save_note"],
    }


def test_a_canary_is_answered_in_process_and_never_executed():
    names = claude_names(TOOLS)
    reading = read_stream(StreamReader.of(EVENTS), "q", names, TOOLS, set(), frozenset({CLOCK}))
    assert [(c.name, c.source, c.executed) for c in reading.calls] == [
        ("get_time", "canary", False),
        ("save_note", "live", True),
    ]


def test_the_plugin_graders_read_every_call_a_subagents_too_and_the_last_message():
    calls, last = graded_calls_and_text(StreamReader.of(EVENTS))
    assert [c.name for c in calls] == [
        "ToolSearch",
        "WaitForMcpServers",
        CLOCK,
        NOTES,
        "Bash",
        "Skill",
        "Read",
    ]
    assert calls[-1].input == {"file_path": "/x"}
    assert (
        last == "It is 10:00.\n  "
    )  # the last assistant message with text, its blocks a line each


def test_the_output_is_read_line_by_line_and_garbage_lines_are_skipped():
    lines = [json.dumps(e) for e in EVENTS[:3]] + ["not json", "[1]", "", json.dumps(EVENTS[-1])]
    stream = read_output(("\n".join(lines) + "\n").encode())
    assert [e.get("type") for e in stream.events] == ["system", "system", "assistant", "result"]
    assert stream.result == EVENTS[-1] and stream.init == INIT and stream.messages == 1
