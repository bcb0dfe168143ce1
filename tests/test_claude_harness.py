"""Suites through Claude Code (`--harness claude-code`): the real `claude -p` CLI, the suite's
real MCP servers as its MCP config, and the scripted Anthropic server playing the model inside
Claude Code (tests/fake_anthropic.py's `claude_code_tool_use` rule, in its module docstring).

Every expected call and verdict here is computed from that rule on the requests Claude Code
actually sent (its own tool search decides what loads), never read back from what the evaluator
reported."""

from __future__ import annotations

from fake_anthropic import (
    CLAUDE_CODE_META_TOOLS,
    answered_tools,
    callable_tools,
    claude_code_tool_use,
    deferred_tools,
    search_words,
    text,
    tool_use,
)

DEFERRED_SYSTEM = (
    "The following deferred tools are now available via ToolSearch. Their schemas are NOT loaded:\n"
    "WebFetch\nmcp__clock__get_time\n\nAvailable agent types for the Agent tool:\n- claude: x"
)


def request(tools: list[dict], *messages: dict, system: str = DEFERRED_SYSTEM) -> dict:
    return {
        "system": [{"type": "text", "text": system}],
        "tools": tools,
        "messages": list(messages),
    }


def user(*blocks: dict) -> dict:
    return {"role": "user", "content": list(blocks)}


SEARCH = {"name": "ToolSearch", "description": "Fetches full schema definitions"}
WAIT = {"name": "WaitForMcpServers", "description": "Wait for MCP servers"}
CLOCK = {"name": "mcp__clock__get_time", "description": "Current time in a timezone"}


def test_the_rules_read_claude_codes_requests_as_documented():
    first = request(
        [SEARCH, WAIT],
        user(
            text("<system-reminder>x</system-reminder>"), text("What is the current time in Paris?")
        ),
    )
    assert deferred_tools(first) == ["WebFetch", "mcp__clock__get_time"]
    assert (
        callable_tools(first) == {}
        and {"ToolSearch", "WaitForMcpServers"} <= CLAUDE_CODE_META_TOOLS
    )
    assert search_words("What is the current time in Paris? The time!") == "current time paris"
    # nothing callable matches: it searches with the query's words
    searched = claude_code_tool_use(first)["content"][0]
    assert searched["name"] == "ToolSearch" and searched["input"]["query"] == "current time paris"
    # the search loaded the tool: it is offered, and the model calls it
    call = tool_use("ToolSearch", {"query": "current time paris"}, id="toolu_s")
    loaded = request(
        [SEARCH, WAIT, CLOCK],
        first["messages"][0],
        {"role": "assistant", "content": [call]},
        user(
            {
                "type": "tool_result",
                "tool_use_id": "toolu_s",
                "content": [{"type": "tool_reference", "tool_name": CLOCK["name"]}],
            }
        ),
        {"role": "system", "content": [text("<total_tokens>1 left</total_tokens>")]},
    )
    assert answered_tools(loaded) == ["ToolSearch"]
    assert claude_code_tool_use(loaded)["content"][0]["name"] == CLOCK["name"]
    # the search loaded nothing useful: no second search, it waits once, then answers
    empty = request([SEARCH, WAIT], *loaded["messages"][:3])
    assert claude_code_tool_use(empty)["content"][0]["name"] == "WaitForMcpServers"
    wait = tool_use("WaitForMcpServers", {}, id="toolu_w")
    waited = request(
        [SEARCH, WAIT],
        *empty["messages"],
        {"role": "assistant", "content": [wait]},
        user({"type": "tool_result", "tool_use_id": "toolu_w", "content": "ready: true"}),
    )
    assert claude_code_tool_use(waited)["content"][0]["type"] == "text"
    # after its own call's result it answers in text
    used = tool_use(CLOCK["name"], {}, id="toolu_c")
    done = request(
        [SEARCH, CLOCK],
        *loaded["messages"][:3],
        {"role": "assistant", "content": [used]},
        user({"type": "tool_result", "tool_use_id": "toolu_c", "content": "12:00"}),
    )
    assert claude_code_tool_use(done)["content"][0]["type"] == "text"
