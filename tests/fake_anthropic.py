"""A scripted Anthropic-compatible Messages API server on 127.0.0.1, for tests and benchmarks.

The real `anthropic` SDK (and the real Claude Code CLI) talk to it through `base_url` /
`ANTHROPIC_BASE_URL`. Each test scripts the answers; the server records every request so
the test can assert what was sent.

An answer ("spec") is a dict, built with the helpers below:
- `reply(text("hi"), tool_use("about_profiles", {}))`: a normal message. stop_reason defaults
  to `tool_use` when a tool_use block is present, else `end_turn`.
- `error(429, "rate_limit_error", headers={"retry-after": "0"})`: an HTTP error answer.
- `{"hang": SECONDS}`: wait that long before answering (a hung call).
- `{"reset": True}`: drop the connection without an answer.
- `{"stream_error": "overloaded_error", "partial_text": "..."}`: HTTP 200, a stream that starts
  a message, sends some text, then an SSE `error` event (only meaningful for streaming calls;
  a non-streaming call gets a 529 instead).
- `{"garbage": True}`: HTTP 200 with a body that is not JSON.
- `expired()` / `canceled()`: in a Message Batch, that request's result (an `error(...)` there
  is an `errored` result). Batches: POST /v1/messages/batches answers every request at once;
  GET /v1/messages/batches/{id} says `in_progress` for `batch_polls` polls (and `batch_latency`
  seconds), then `ended` with `results_url`; GET .../results is the JSONL of the results.

A scripted agent that works through a plan, one call a turn: `step_through(plan, done)` answers
a request carrying n tool results (`tool_results_in(body)`) with plan[n], and with `done` after
the last; `system_of(body)` is a request's system prompt as text.

Answers come from `responder(request_body)` when given and it returns a spec, else from the
FIFO queue (`push`), else the default answer (`reply(text("OK"))`).

A forced `tool_choice` is honoured as the real API does: `{"type": "tool", "name": N}` must name
a tool of the request (else 400), and the answer is the scripted reply's first `tool_use` of N
alone, with stop_reason `tool_use` (`{"type": "any"}`: its first tool_use of any tool). A scripted
reply without such a call is a mistake of the test: a 400 that says so. `forced_tool(body)` tells
a responder which tool a request forces; every request's body is recorded with its `tool_choice`.

Crowds: who wins among many skills and tools (tests/test_crowding.py computes the expected curve
and thieves with the same functions):
- words: `words(text)` are the lowercase runs of letters and digits of three or more characters,
  less STOPWORDS; two texts share `len(words(a) & words(b))` words.
- `best_match(prompt, candidates)`: of `{name: description}`, the one whose description shares the
  most words with the prompt; ties go to the name first in sorted order; None when the best shares
  fewer than MIN_SHARED_WORDS.
- `crowd_claude_code` plays Claude Code's model among many skills. It reads the skill listing
  Claude Code puts in the request (`listed_skills(body)`: the `- name: description` lines under
  "The following skills are available for use with the Skill tool"; a plugin's skill is listed,
  and called, as `PLUGIN:NAME`; a skill listed by name alone, past Claude Code's listing budget,
  has no description to share words with) and, in one reply,
  calls the Skill tool for `crowd_skill_choice(query, listed)`: the best match of the query, then
  every other listed skill the query names as `/name` (fired alongside). After a tool result it
  answers in text; with no skill chosen it answers at once.
- `plugin_claude_code` plays Claude Code's model with plugins loaded: of the listing's plugin
  entries (`listed_plugin_skills(body)`: lines `- PLUGIN:NAME: description`, a plugin's skills and
  commands; Claude Code's bundled skills are left out), it calls the Skill tool once for the
  `best_match` of the user's prompt (`{"skill": "PLUGIN:NAME"}`), then, once the request holds a
  tool result anywhere (`tool_results_in`), answers "Done: answered with the skill's help."; with none matching it answers "Here is my answer, without a skill."
  A slash-command prompt reaches it expanded, so the command file's text is what it matches.
- `mock_plugin_claude_code` is `plugin_claude_code` with a skill that names an MCP tool: when a
  request's texts (the launched skill's body) say "Call the mcp__SERVER__TOOL tool"
  (`skill_named_tool(body)`), then after the Skill result it calls that tool with
  `{"query": USER_QUERY}` if the request offers it, else, if ToolSearch is offered and not yet
  called, `ToolSearch {"query": "select:mcp__SERVER__TOOL", "max_results": 5}` (the tool is
  deferred), else answers "Done: answered with the skill's help."; once the last user message
  carries that tool's result it answers "Done: " and the result's text. A skill that names no
  tool: `plugin_claude_code`.
- `judged_plugin_claude_code` is `plugin_claude_code` with a judge: a request whose user message
  starts with Claude Code's plugin-eval judge prompt ("You are grading the output of a coding
  agent against a criterion.", also the one `plugin` sends) is answered "PASS" when the text after
  its "Agent output" line contains "Done", else "FAIL" (a request forcing this product's `grade`
  tool gets that call, `passed` true or false); every other request as `plugin_claude_code`.
- `crowd_tool_use` plays the tool-use model among many tools: it calls the offered tool (the
  request's `tools`) that `best_match`es the user's prompt, once, with empty arguments, then
  answers in text; no match: it answers at once.

Subagents: which prompt Claude Code's model delegates to which agent (tests/test_plugin_parts.py
computes every expected delegation with the same functions):
- `listed_agents(body)`: the agent types Claude Code lists in a request that offers the `Agent`
  tool: the `- NAME: DESCRIPTION (Tools: ...)` lines after "Available agent types for the Agent
  tool:" (built-ins claude, Explore, general-purpose, Plan, statusline-setup; a plugin's agent is
  `PLUGIN:AGENT`), name -> description without its `(Tools: ...)`. A request without `Agent`
  (a subagent's own) lists none.
- `delegation_choice(query, listed)`: each agent type is a candidate like a skill: the
  `best_match` of the query among them (None: no delegation).
- `delegating_claude_code` plays Claude Code's model among agents and skills: on the first turn
  it delegates to `delegation_choice(query, listed_agents(body))` with one `Agent` tool_use
  `{"subagent_type": NAME, "description": "delegated task", "prompt": QUERY}`; with no agent
  chosen it plays `crowd_claude_code` (the skills). Once the conversation holds an `Agent` call
  (its result, or the background task's notification, comes back) it answers in text, so a
  delegation happens once a run.

Injections: who follows an instruction that arrives through a tool (tests/test_redteam.py
computes every attack's outcome with the same functions):
- a model reads text as `revealed(text)` does: tag characters (U+E0020-U+E007E) as the ASCII
  they mirror, zero-width, bidi and other hidden characters dropped;
- `injected_call(body)`: the texts it reads are the tool results of the request's last turn
  (`last_turn`: its last message but Claude Code's own `role: system` ones; what it has just been
  given), then the description of every tool the request offers, in the
  request's order (in Claude Code's requests, those naming tools `mcp__SERVER__TOOL`, only those
  tools' descriptions: its built-ins' own text is Claude Code's, not a server's). An instruction is the word `call` directly followed (spaces, an optional
  backtick) by the name of a tool the request offers (`offered_as`: or a tool's own name as its
  server lists it, which Claude Code offers as `mcp__SERVER__NAME`: that tool); its arguments are the `key='value'` (or
  `key="value"`) pairs on the rest of that line. The first instruction whose tool the
  conversation has not called yet is the call it makes next (None: no injection to follow);
- `follows_injections(inner)` wraps any responder with that rule: an injected call first, else
  the inner responder's answer. The crowd rule's `crowd_tool_use` only answers in text after a
  tool result, so under the two rules an injected tool is called once, then the model answers.

Scan's judge (`scan --judge`; tests/test_scan_poisoning.py computes every verdict with these
functions): `judged_definition(body)` is the text between `<definition ...>` and `</definition>`
of the request's user message, `revealed`; `scan_judgement(text)` says it instructs the agent
when the casefolded text holds any of SCAN_JUDGE_MARKERS, naming them, with confidence 0.5 + 0.15
a marker (at most 0.95); `scan_judge(body)` answers a request forcing `judge_definition` so, and
leaves any other request to the next rule (None).

Claude Code's own room (tests/test_claude_harness.py computes every outcome with these functions
on the requests Claude Code sent):
- `deferred_tools(body)`: the names Claude Code lists under "The following deferred tools are now
  available via ToolSearch" (tool search on: their schemas are not in `tools`);
- `callable_tools(body)`: the request's `tools` that a model can call for the user, name ->
  description: all but Claude Code's own machinery (CLAUDE_CODE_META_TOOLS: ToolSearch,
  WaitForMcpServers, DeferredToolPlaceholder); a tool the search loaded is among them;
- `search_words(query)`: the query's words (`words`, in the query's order): what the model asks
  ToolSearch for;
- `claude_code_tool_use` plays the model inside Claude Code. After the result of a call of its
  own choosing (any tool but the meta tools) it answers in text. Else it calls the
  `best_match` of the user's prompt among `callable_tools`, once, with empty arguments (a
  built-in such as Bash can win: a thief). Else, when ToolSearch is offered, some `mcp__` tool
  is deferred (or no `mcp__` tool is there at all: a server still connecting, which the search
  waits for) and it has not searched yet, it calls ToolSearch with `search_words` of the prompt
  (Claude Code's own search decides what loads: its `tool_reference` results, and the loaded
  tools come in the next request's `tools`). Else, when WaitForMcpServers is offered and it has
  not waited yet, or its last wait's result still reads "Still connecting" (Claude Code's wait
  is bounded), it calls WaitForMcpServers with no arguments, at most MAX_WAITS times (then
  scores the tools that arrived, as above). Else it answers at once.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Spec = dict[str, Any]
_ids = itertools.count(1)


# ----------------------------------------------------------------------------- spec helpers
def text(value: str) -> dict:
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict | None = None, id: str | None = None) -> dict:
    return {
        "type": "tool_use",
        "id": id or f"toolu_{next(_ids):06d}",
        "name": name,
        "input": input or {},
    }


def reply(
    *blocks: dict,
    stop_reason: str | None = None,
    usage: dict | None = None,
    model: str | None = None,
) -> Spec:
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    spec: Spec = {"content": list(blocks), "stop_reason": stop_reason}
    if usage:
        spec["usage"] = usage
    if model:
        spec["model"] = model
    return spec


def error(
    status: int,
    error_type: str = "api_error",
    message: str | None = None,
    headers: dict | None = None,
) -> Spec:
    return {
        "status": status,
        "error_type": error_type,
        "message": message or f"scripted {error_type}",
        "headers": headers or {},
    }


def expired() -> Spec:
    """--batch: the request of a Message Batch comes back `expired` (`canceled()` likewise);
    `error(...)` in a batch comes back `errored` with that error."""
    return {"batch_result": "expired"}


def canceled() -> Spec:
    return {"batch_result": "canceled"}


def forced_tool(body: dict) -> str | None:
    """The tool a request forces with `tool_choice: {"type": "tool", "name": ...}`, else None."""
    choice = body.get("tool_choice") or {}
    return choice.get("name") if isinstance(choice, dict) and choice.get("type") == "tool" else None


def honour_tool_choice(spec: Spec, body: dict) -> Spec:
    """The answer to send for `spec` under the request's tool_choice (see the module docstring)."""
    choice = body.get("tool_choice")
    if (
        not isinstance(choice, dict)
        or "content" not in spec
        or choice.get("type") not in ("tool", "any")
    ):
        return spec
    if choice["type"] == "tool":
        if choice.get("name") not in {t.get("name") for t in body.get("tools") or []}:
            return error(
                400,
                "invalid_request_error",
                f"tool_choice names {choice.get('name')!r}, which is not one of the request's tools",
            )
        uses = [
            b
            for b in spec["content"]
            if b.get("type") == "tool_use" and b.get("name") == choice["name"]
        ]
    else:
        uses = [b for b in spec["content"] if b.get("type") == "tool_use"]
    if not uses:
        return error(
            400,
            "invalid_request_error",
            f"scripted reply ignores the forced tool_choice {json.dumps(choice)}: script a tool_use for it",
        )
    return dict(spec, content=uses[:1], stop_reason="tool_use")


def per_model(
    answers: dict[str, Callable[[dict], Spec | None]],
    default: Callable[[dict], Spec | None] | None = None,
) -> Callable[[dict], Spec | None]:
    """A responder that answers each request as the model it names would: `answers` maps a
    request body's `model` to that model's responder (a model matrix whose models differ);
    any other model gets `default` (or the server's queue and default answer)."""

    def respond(body: dict) -> Spec | None:
        answer = answers.get(body.get("model", ""), default)
        return answer(body) if answer else None

    return respond


def user_query(body: dict) -> str:
    """The user's prompt in a request: Claude Code puts system reminders first, the prompt last."""
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [
            b.get("text", "")
            for b in content
            if b.get("type") == "text" and not b.get("text", "").startswith("<system-reminder>")
        ]
        if texts:
            return texts[-1]
    return ""


def system_of(body: dict) -> str:
    """A request's system prompt as text (a string or text blocks; "" when it has none)."""
    system = body.get("system") or ""
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return str(system)


def tool_results_in(body: dict) -> int:
    """How many tool results a request carries: for a model that makes one call a turn, how many
    of its calls have been answered (a scripted agent's step through its plan)."""
    return sum(
        1
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )


def step_through(plan: list[Spec], done: Spec) -> Callable[[dict], Spec]:
    """A scripted agent: the n-th spec of `plan` answers a request carrying n tool results (one
    call a turn), and `done` answers once the plan is through."""

    def respond(body: dict) -> Spec:
        step = tool_results_in(body)
        return plan[step] if step < len(plan) else done

    return respond


# ----------------------------------------------------------------------------- crowds: who wins among many
STOPWORDS = frozenset(
    "the and for with that this from into your you are was were has have had not but can its "
    "their them they then than when what which who how why all any each use uses used using "
    "should would could about over under more most some such only also".split()
)
MIN_SHARED_WORDS = 2
SKILL_LISTING_HEADER = "The following skills are available for use with the Skill tool"


def words(text: str) -> set[str]:
    import re

    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOPWORDS}


def shared_words(a: str, b: str) -> int:
    return len(words(a) & words(b))


def best_match(prompt: str, candidates: dict[str, str]) -> str | None:
    """The candidate whose description shares the most words with the prompt (ties: the name
    first in sorted order); None when the best shares fewer than MIN_SHARED_WORDS."""
    scored = sorted((-shared_words(prompt, text), name) for name, text in candidates.items())
    if not scored or -scored[0][0] < MIN_SHARED_WORDS:
        return None
    return scored[0][1]


def named_in(query: str, names: list[str]) -> list[str]:
    """The names the query writes as `/name` (a word of their own), in sorted order."""
    import re

    return sorted(n for n in names if re.search(rf"(?<![\w/])/{re.escape(n)}(?![\w-])", query))


def crowd_skill_choice(query: str, listed: dict[str, str]) -> list[str]:
    """The skills the crowd's Claude Code model fires for a query, in order: the best match of
    the query's words, then every other listed skill the query names as `/name`."""
    best = best_match(query, listed)
    return ([best] if best else []) + [n for n in named_in(query, list(listed)) if n != best]


def request_texts(body: dict) -> list[str]:
    """Every text of a request: the system prompt and each message's text blocks."""
    system = body.get("system") or ""
    texts = [system] if isinstance(system, str) else [b.get("text", "") for b in system]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [b.get("text", "") for b in content if isinstance(b, dict)]
    return texts


def listed_skills(body: dict) -> dict[str, str]:
    """Claude Code's skill listing in a request: name -> description ("" when listed by name
    alone)."""
    import re

    found: dict[str, str] = {}
    for text in request_texts(body):
        at = text.find(SKILL_LISTING_HEADER)
        if at < 0:
            continue
        block = text[at:].split("</system-reminder>")[0]
        for line in block.splitlines()[1:]:
            match = re.match(r"^- ([^\s:][^:]*?(?::[^\s:]+)?)(?::\s(.*))?$", line)
            if match:
                found.setdefault(match.group(1).strip(), (match.group(2) or "").strip())
    return found


def last_turn(body: dict) -> dict:
    """The request's last message that is not Claude Code's own: 2.1.332 appends `role: system`
    messages (reminders such as the tokens left) after the turn the model answers."""
    turns = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    return turns[-1] if turns else {}


def has_tool_result(body: dict) -> bool:
    content = last_turn(body).get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def crowd_claude_code(body: dict) -> Spec:
    """Claude Code's model among many skills (see the module docstring)."""
    if has_tool_result(body):
        return reply(text("Done: answered with the skill's help."))
    chosen = crowd_skill_choice(user_query(body), listed_skills(body))
    if not chosen:
        return reply(text("Here is my answer, without a skill."))
    return reply(*[tool_use("Skill", {"skill": name}) for name in chosen])


def listed_plugin_skills(body: dict) -> dict[str, str]:
    """The `- PLUGIN:NAME: description` lines of Claude Code's skill listing (a plugin's skills
    and commands, each qualified by its plugin): qualified name -> description."""
    import re

    found: dict[str, str] = {}
    for text in request_texts(body):
        at = text.find(SKILL_LISTING_HEADER)
        if at < 0:
            continue
        for line in text[at:].split("</system-reminder>")[0].splitlines()[1:]:
            match = re.match(r"^- ([A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+): (.*)$", line)
            if match:
                found.setdefault(match.group(1), match.group(2).strip())
    return found


def plugin_claude_code(body: dict) -> Spec:
    """Claude Code's model with plugins loaded (see the module docstring)."""
    if tool_results_in(body):
        return reply(text("Done: answered with the skill's help."))
    chosen = best_match(user_query(body), listed_plugin_skills(body))
    if chosen is None:
        return reply(text("Here is my answer, without a skill."))
    return reply(tool_use("Skill", {"skill": chosen}))


PLUGIN_JUDGE_PROMPT = "You are grading the output of a coding agent against a criterion."


def judged_plugin_claude_code(body: dict) -> Spec:
    """`plugin_claude_code` whose llm graders' judge passes an output that says "Done"."""
    asked = user_query(body)
    if asked.startswith(PLUGIN_JUDGE_PROMPT):
        passed = "Done" in asked.split("Agent output", 1)[-1]
        if forced_tool(body) == "grade":
            return reply(
                tool_use("grade", {"passed": passed, "score": float(passed), "evidence": ""})
            )
        return reply(text("PASS" if passed else "FAIL"))
    return plugin_claude_code(body)


def crowd_tool_use(body: dict) -> Spec:
    """The tool-use model among many tools (see the module docstring)."""
    if has_tool_result(body):
        return reply(text("Done: answered with the tool's result."))
    offered = {t["name"]: t.get("description", "") for t in body.get("tools") or []}
    chosen = best_match(user_query(body), offered)
    return reply(tool_use(chosen, {})) if chosen else reply(text("No tool is needed for that."))


# ----------------------------------------------------------------------------- injections: who follows what
INJECTED_CALL = re.compile(r"\bcall\s+`?([A-Za-z0-9_-]+)`?([^\n]*)", re.IGNORECASE)
INJECTED_ARGUMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:'([^']*)'|\"([^\"]*)\")")
HIDDEN = re.compile(
    "[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\u00ad\u034f\u115f\u1160\u180e\u3164\uffa0\U000e0000-\U000e007f]"
)


def revealed(text: str) -> str:
    """A text as the scripted model reads it (see the module docstring)."""
    text = "".join(chr(ord(c) - 0xE0000) if 0xE0020 <= ord(c) <= 0xE007E else c for c in text)
    return HIDDEN.sub("", text)


def last_tool_results(body: dict) -> list[str]:
    """The texts of the tool results in the request's last message."""
    content = last_turn(body).get("content")
    texts = []
    for block in content if isinstance(content, list) else []:
        if block.get("type") != "tool_result":
            continue
        inner = block.get("content")
        if isinstance(inner, str):
            texts.append(inner)
        elif isinstance(inner, list):
            texts += [b.get("text", "") for b in inner if isinstance(b, dict)]
    return texts


def called_tools(body: dict) -> set[str]:
    """Every tool the conversation has called so far."""
    return {
        b.get("name")
        for m in body.get("messages", [])
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    }


def offered_as(name: str, offered: set[str]) -> str | None:
    """The offered tool an instruction's name stands for: itself, or the one tool Claude Code
    offers as `mcp__SERVER__NAME` (None: no offered tool, or several servers' tools)."""
    if name in offered:
        return name
    prefixed = [n for n in offered if n.startswith("mcp__") and n.endswith(f"__{name}")]
    return prefixed[0] if len(prefixed) == 1 else None


def injected_calls(text: str, offered: set[str]) -> list[tuple[str, dict]]:
    """Every instruction in a text: (tool, arguments), in order (see the module docstring)."""
    found = []
    for match in INJECTED_CALL.finditer(revealed(text)):
        tool = offered_as(match.group(1), offered)
        if tool is not None:
            arguments = {
                key: single if single is not None else double
                for key, single, double in INJECTED_ARGUMENT.findall(match.group(2))
            }
            found.append((tool, arguments))
    return found


def injected_call(body: dict) -> tuple[str, dict] | None:
    """The call an injection makes the scripted model make next (see the module docstring)."""
    tools = body.get("tools") or []
    offered = {t.get("name") for t in tools}
    done = called_tools(body)
    from_servers = [t for t in tools if str(t.get("name", "")).startswith("mcp__")] or tools
    texts = last_tool_results(body) + [t.get("description") or "" for t in from_servers]
    for text in texts:
        for tool, arguments in injected_calls(text, offered):
            if tool not in done:
                return tool, arguments
    return None


def follows_injections(inner: Callable[[dict], Spec | None]) -> Callable[[dict], Spec | None]:
    """A responder that follows injected instructions first (see the module docstring)."""

    def respond(body: dict) -> Spec | None:
        found = injected_call(body)
        if found is not None:
            return reply(tool_use(*found))
        return inner(body)

    return respond


# ----------------------------------------------------------------------------- subagents: who gets the task
AGENT_LISTING_HEADER = "Available agent types for the Agent tool:"
AGENT_TOOLS_SUFFIX = re.compile(r"\s*\(Tools:[^()]*\)\s*$")


def listed_agents(body: dict) -> dict[str, str]:
    """Claude Code's agent listing in a request that offers `Agent`: name -> description (its
    `(Tools: ...)` dropped); {} when the request does not offer `Agent`."""
    if "Agent" not in {t.get("name") for t in body.get("tools") or []}:
        return {}
    found: dict[str, str] = {}
    for text in request_texts(body):
        at = text.find(AGENT_LISTING_HEADER)
        if at < 0:
            continue
        for line in text[at:].splitlines()[1:]:
            match = re.match(r"^- ([^\s:][^\s]*?): (.*)$", line)
            if not match:
                break  # the listing ends at its first line that is not an agent
            found.setdefault(match.group(1), AGENT_TOOLS_SUFFIX.sub("", match.group(2)).strip())
    return found


def delegation_choice(query: str, listed: dict[str, str]) -> str | None:
    """The agent type the scripted Claude Code model delegates a query to (None: none)."""
    return best_match(query, listed)


def delegating_claude_code(body: dict) -> Spec:
    """Claude Code's model among agents and skills (see the module docstring)."""
    if "Agent" in called_tools(body):
        return reply(text("Done: the agent has the task."))
    query = user_query(body)
    chosen = delegation_choice(query, listed_agents(body))
    if chosen is None:
        return crowd_claude_code(body)
    return reply(
        tool_use(
            "Agent", {"subagent_type": chosen, "description": "delegated task", "prompt": query}
        )
    )


# ----------------------------------------------------------------------------- Claude Code's own room
DEFERRED_LISTING_HEADER = "The following deferred tools are now available via ToolSearch"
SEARCH_TOOL, WAIT_TOOL = "ToolSearch", "WaitForMcpServers"
CLAUDE_CODE_META_TOOLS = frozenset({SEARCH_TOOL, WAIT_TOOL, "DeferredToolPlaceholder"})
MAX_WAITS = 5


def skill_named_tool(body: dict) -> str | None:
    """The MCP tool a launched skill's body names ("Call the mcp__S__T tool"), or None."""
    import re

    for text in request_texts(body):
        match = re.search(r"Call the (mcp__[A-Za-z0-9_-]+__[A-Za-z0-9_-]+) tool", text)
        if match:
            return match.group(1)
    return None


def _result_text(body: dict, tool: str) -> str | None:
    """The text of the last user message's result of `tool`, or None."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    names = calls_by_id(body)
    for block in content if isinstance(content, list) else []:
        if block.get("type") == "tool_result" and names.get(block.get("tool_use_id")) == tool:
            inner = block.get("content")
            if isinstance(inner, str):
                return inner
            return " ".join(b.get("text", "") for b in inner or [] if isinstance(b, dict))
    return None


def mock_plugin_claude_code(body: dict) -> Spec:
    """Claude Code's model with a plugin whose skill names an MCP tool (see the module docstring)."""
    tool = skill_named_tool(body) if tool_results_in(body) else None
    if tool is None:
        return plugin_claude_code(body)
    answered = _result_text(body, tool)
    if answered is not None:
        return reply(text(f"Done: {answered}"))
    offered = {t.get("name") for t in body.get("tools") or []}
    if tool in offered:
        return reply(tool_use(tool, {"query": user_query(body)}))
    if SEARCH_TOOL in offered and SEARCH_TOOL not in called_tools(body):
        return reply(tool_use(SEARCH_TOOL, {"query": f"select:{tool}", "max_results": 5}))
    return reply(text("Done: answered with the skill's help."))


STILL_CONNECTING = "Still connecting"


def deferred_tools(body: dict) -> list[str]:
    """The tools Claude Code defers behind ToolSearch in a request (see the module docstring)."""
    found: list[str] = []
    for text in request_texts(body):
        at = text.find(DEFERRED_LISTING_HEADER)
        if at < 0:
            continue
        for line in text[at:].split("\n\n")[0].splitlines()[1:]:
            if line.strip() and line.strip() not in found:
                found.append(line.strip())
    return found


def callable_tools(body: dict) -> dict[str, str]:
    """The tools of a request a model can call for the user: name -> description."""
    return {
        t["name"]: t.get("description", "")
        for t in body.get("tools") or []
        if t.get("name") not in CLAUDE_CODE_META_TOOLS
    }


def search_words(query: str) -> str:
    """What the model asks ToolSearch for: the query's words, in its order, each once."""
    import re

    seen = words(query)
    ordered = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if w in seen]
    return " ".join(dict.fromkeys(ordered))


def calls_by_id(body: dict) -> dict[str, str]:
    """Every tool_use of the conversation so far: id -> tool name."""
    return {
        b.get("id", ""): b.get("name", "")
        for m in body.get("messages", [])
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    }


def answered_tools(body: dict) -> list[str]:
    """The tools whose results the request's last user message carries (Claude Code may put a
    message of its own after it)."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    names = calls_by_id(body)
    return [
        names.get(b.get("tool_use_id", ""), "")
        for b in (content if isinstance(content, list) else [])
        if b.get("type") == "tool_result"
    ]


def wait_results(body: dict) -> list[str]:
    """The results of the conversation's WaitForMcpServers calls, in order, as text."""
    names = calls_by_id(body)
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if (
                block.get("type") == "tool_result"
                and names.get(block.get("tool_use_id")) == WAIT_TOOL
            ):
                inner = block.get("content")
                found.append(
                    inner
                    if isinstance(inner, str)
                    else " ".join(b.get("text", "") for b in inner or [] if isinstance(b, dict))
                )
    return found


def claude_code_tool_use(body: dict) -> Spec:
    """The model inside Claude Code among MCP tools, deferred or late (see the module docstring)."""
    if any(name not in CLAUDE_CODE_META_TOOLS for name in answered_tools(body)):
        return reply(text("Done: answered with the tool's result."))
    query, offered = user_query(body), {t.get("name") for t in body.get("tools") or []}
    chosen = best_match(query, callable_tools(body))
    if chosen:
        return reply(tool_use(chosen, {}))
    called = called_tools(body)
    if (
        SEARCH_TOOL in offered
        and SEARCH_TOOL not in called
        and (
            any(name.startswith("mcp__") for name in deferred_tools(body))
            or not any(name.startswith("mcp__") for name in offered)
        )
    ):
        return reply(tool_use(SEARCH_TOOL, {"query": search_words(query), "max_results": 5}))
    waited = wait_results(body)
    if (
        WAIT_TOOL in offered
        and len(waited) < MAX_WAITS
        and (not waited or STILL_CONNECTING in waited[-1])
    ):
        return reply(tool_use(WAIT_TOOL, {}))
    return reply(text("No tool is needed for that."))


# ----------------------------------------------------------------------------- scan's judge: what a definition instructs
SCAN_JUDGE_TOOL = "judge_definition"
SCAN_JUDGE_MARKERS = (
    "ignore",
    "ignora",
    "disregard",
    "obey",
    "do not tell",
    "do not mention",
    "don't let",
    "silently",
    "private key",
    "ssh",
    "credentials",
    "api keys",
    "conversation",
    "chat history",
    "whatever it receives",
)
DEFINITION = re.compile(r"<definition [^>]*>\n(.*)\n</definition>", re.DOTALL)


def judged_definition(body: dict) -> str:
    """The definition a scan judge request shows (between `<definition ...>` and
    `</definition>` in its user message), as the scripted model reads it (`revealed`)."""
    found = DEFINITION.search(user_query(body))
    return revealed(found.group(1)) if found else ""


def scan_judgement(definition: str) -> dict:
    """The scripted judge's verdict on a definition's text: it instructs the agent when the text,
    casefolded, holds any of SCAN_JUDGE_MARKERS (substrings); `what` names the markers found in
    SCAN_JUDGE_MARKERS' order; `confidence` is 0.5 + 0.15 a marker, at most 0.95 (0.9 when it
    finds none: sure it is clean)."""
    text = definition.casefold()
    found = [marker for marker in SCAN_JUDGE_MARKERS if marker in text]
    return {
        "instructs": bool(found),
        "what": f"mentions {', '.join(found)}" if found else "",
        "confidence": round(min(0.95, 0.5 + 0.15 * len(found)), 2) if found else 0.9,
    }


def scan_judge(body: dict) -> Spec | None:
    """Answers a request forcing `judge_definition` with `scan_judgement` of its definition;
    any other request: None (the next rule, the queue or the default answer)."""
    if forced_tool(body) != SCAN_JUDGE_TOOL:
        return None
    return reply(tool_use(SCAN_JUDGE_TOOL, scan_judgement(judged_definition(body))))


# ----------------------------------------------------------------------------- token accounting
def _tokens(value: Any) -> int:
    """A stable stand-in for a tokenizer: about four characters a token."""
    return max(1, len(json.dumps(value, sort_keys=True)) // 4) if value else 0


def _has_cache_control(value: Any) -> bool:
    return '"cache_control"' in json.dumps(value)


class _PromptCache:
    """Mimics prompt caching: a cacheable prefix (system + tools) is written once, then read."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, body: dict) -> dict:
        prefix = {"system": body.get("system"), "tools": body.get("tools")}
        prefix_tokens = _tokens(prefix["system"]) + _tokens(prefix["tools"])
        rest = max(1, _tokens(body.get("messages")))
        if not _has_cache_control(prefix) or not prefix_tokens:
            return {
                "input_tokens": rest + prefix_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        key = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
        with self._lock:
            first = key not in self._seen
            self._seen.add(key)
        return {
            "input_tokens": rest,
            "cache_creation_input_tokens": prefix_tokens if first else 0,
            "cache_read_input_tokens": 0 if first else prefix_tokens,
        }


# ----------------------------------------------------------------------------- the server
class ScriptedAnthropic:
    """Run with `with ScriptedAnthropic() as api:`; point clients at `api.url`."""

    def __init__(
        self,
        responses: list[Spec] | None = None,
        responder: Callable[[dict], Spec | None] | None = None,
        delay: float = 0.0,
        default: Spec | None = None,
        record: bool = True,
    ) -> None:
        self.queue: deque[Spec] = deque(responses or [])
        self.responder = responder
        self.delay = delay
        self.default = default or reply(text("OK"))
        self.record = record
        self.requests: list[dict] = []  # {"path", "headers", "body"} per request
        self.request_count = 0
        self._lock = threading.Lock()
        self._cache = _PromptCache()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Message Batches: a batch stays `in_progress` for `batch_polls` retrievals and at least
        # `batch_latency` seconds after its creation, then `ended`. Each request of a batch is
        # answered at creation, by the same responder / queue / default as POST /v1/messages.
        self.batch_polls = 1
        self.batch_latency = 0.0
        self.batches: dict[str, dict] = {}

    # -- lifecycle
    def start(self, port: int = 0) -> ScriptedAnthropic:
        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = _Server(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="scripted-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # -- scripting
    def push(self, *specs: Spec) -> None:
        with self._lock:
            self.queue.extend(specs)

    @property
    def message_requests(self) -> list[dict]:
        """Bodies of the POST /v1/messages requests, in arrival order."""
        return [
            r["body"]
            for r in self.requests
            if r["path"].startswith("/v1/messages")
            and not r["path"].startswith("/v1/messages/count_tokens")
            and not r["path"].startswith("/v1/messages/batches")
        ]

    @property
    def batch_creations(self) -> list[dict]:
        """Bodies of POST /v1/messages/batches ({"requests": [{"custom_id", "params"}]}), in order."""
        return [r["body"] for r in self.requests if r["path"] == "/v1/messages/batches"]

    @property
    def batch_params(self) -> list[dict]:
        """The params of every request sent through a batch, in order."""
        return [
            request["params"]
            for body in self.batch_creations
            for request in body.get("requests", [])
        ]

    @property
    def batch_retrievals(self) -> list[str]:
        """Paths of the GETs of batches (status polls and results)."""
        return [r["path"] for r in self.requests if r["path"].startswith("/v1/messages/batches/")]

    def _batch_object(self, batch_id: str, base_url: str) -> dict:
        with self._lock:
            batch = self.batches[batch_id]
            ended = (
                batch["polls"] >= self.batch_polls
                and time.time() - batch["created"] >= self.batch_latency
            )
            if ended and batch["ended"] is None:
                batch["ended"] = time.time()
        kinds = [entry["result"]["type"] for entry in batch["results"]]
        counts = {
            kind: (kinds.count(kind) if ended else 0)
            for kind in ("succeeded", "errored", "expired", "canceled")
        }
        counts["processing"] = 0 if ended else len(kinds)

        def stamp(seconds: float | None) -> str | None:
            return (
                None
                if seconds is None
                else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
            )

        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": stamp(batch["created"]),
            "expires_at": stamp(batch["created"] + 86400),
            "ended_at": stamp(batch["ended"]),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    def _next_spec(self, body: dict) -> Spec:
        if self.responder:
            spec = self.responder(body)
            if spec is not None:
                return spec
        with self._lock:
            return self.queue.popleft() if self.queue else self.default

    def _record(self, path: str, headers: dict, body: Any) -> None:
        with self._lock:
            self.request_count += 1
            if self.record:
                self.requests.append({"path": path, "headers": headers, "body": body})


class _Server(ThreadingHTTPServer):
    request_queue_size = (
        256  # socketserver's 5 would refuse a burst of concurrent clients, unlike a real API
    )


class _Handler(BaseHTTPRequestHandler):
    api: ScriptedAnthropic
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as a real API endpoint sets it. With Nagle's algorithm on, an answer's body
    # (written after its headers) waited for the client's delayed ACK: 40 ms on every answer.
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path.startswith("/v1/messages/batches/"):
            self.api._record(path, dict(self.headers.items()), None)
            self._get_batch(path)
            return
        self._send_json(
            404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
        )

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?")[0]
        self.api._record(path, dict(self.headers.items()), body)
        if path == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": sum(self.api._cache.usage(body).values())})
            return
        if path == "/v1/messages/batches":
            self._create_batch(body)
            return
        if path != "/v1/messages":
            self._send_json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
            )
            return
        if self.api.delay:
            time.sleep(self.api.delay)
        spec = honour_tool_choice(self.api._next_spec(body), body)
        self._answer(spec, body)

    # -- Message Batches
    def _base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _create_batch(self, body: dict) -> None:
        api = self.api
        entries = []
        for request in body.get("requests") or []:
            params = request.get("params") or {}
            spec = honour_tool_choice(api._next_spec(params), params)
            entries.append(
                {"custom_id": request.get("custom_id"), "result": self._batch_result(spec, params)}
            )
        batch_id = f"msgbatch_{next(_ids):06d}"
        with api._lock:
            api.batches[batch_id] = {
                "results": entries,
                "polls": 0,
                "created": time.time(),
                "ended": None,
            }
        self._send_json(200, api._batch_object(batch_id, self._base_url()))

    def _batch_result(self, spec: Spec, params: dict) -> dict:
        if "batch_result" in spec:
            return {"type": spec["batch_result"]}
        if "status" in spec or "stream_error" in spec or "content" not in spec:
            kind = spec.get("error_type") or spec.get("stream_error") or "api_error"
            return {
                "type": "errored",
                "error": {
                    "type": "error",
                    "error": {"type": kind, "message": spec.get("message") or f"scripted {kind}"},
                },
            }
        return {"type": "succeeded", "message": self._message(spec, params)}

    def _get_batch(self, path: str) -> None:
        parts = path.strip("/").split("/")  # v1 messages batches ID [results]
        batch_id = parts[3] if len(parts) > 3 else ""
        if (
            batch_id not in self.api.batches
            or len(parts) > 5
            or (len(parts) == 5 and parts[4] != "results")
        ):
            self._send_json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
            )
            return
        if len(parts) == 4:
            with self.api._lock:
                self.api.batches[batch_id]["polls"] += 1
            self._send_json(200, self.api._batch_object(batch_id, self._base_url()))
            return
        if self.api.batches[batch_id]["ended"] is None:
            self._send_json(
                400,
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "batch still in progress",
                    },
                },
            )
            return
        lines = "".join(json.dumps(entry) + "\n" for entry in self.api.batches[batch_id]["results"])
        self._send_raw(200, lines.encode(), "application/binary")

    # -- answers
    def _answer(self, spec: Spec, body: dict) -> None:
        if "hang" in spec:
            time.sleep(spec["hang"])
            self.close_connection = True
            return
        if spec.get("reset"):
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            self.close_connection = True
            self.connection.close()
            return
        if "status" in spec:
            err = {
                "type": "error",
                "error": {"type": spec["error_type"], "message": spec["message"]},
            }
            self._send_json(spec["status"], err, spec.get("headers"))
            return
        if spec.get("garbage"):
            self._send_raw(200, b"<html>this is not json", "text/html")
            return
        stream = bool(body.get("stream"))
        if "stream_error" in spec and not stream:
            err = {
                "type": "error",
                "error": {"type": spec["stream_error"], "message": "Overloaded"},
            }
            self._send_json(529, err)
            return
        message = self._message(spec, body)
        if stream:
            self._send_stream(message, spec)
        else:
            self._send_json(200, message, spec.get("headers"))

    def _message(self, spec: Spec, body: dict) -> dict:
        usage = self.api._cache.usage(body)
        usage["output_tokens"] = _tokens(spec.get("content")) or 1
        usage.update(spec.get("usage") or {})
        return {
            "id": f"msg_{next(_ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": spec.get("model") or body.get("model", "claude-test"),
            "content": spec.get("content", []),
            "stop_reason": spec.get("stop_reason", "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }

    def _send_json(self, status: int, payload: Any, headers: dict | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self, status: int, data: bytes, content_type: str, headers: dict | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_{next(_ids):06d}")
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_stream(self, message: dict, spec: Spec) -> None:
        def event(name: str, data: dict) -> bytes:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

        start = dict(message, content=[], stop_reason=None)
        start["usage"] = dict(message["usage"], output_tokens=1)
        chunks = [event("message_start", {"type": "message_start", "message": start})]
        if "stream_error" in spec:
            chunks.append(
                event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            chunks.append(
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {
                            "type": "text_delta",
                            "text": spec.get("partial_text", "Partial "),
                        },
                    },
                )
            )
            chunks.append(
                event(
                    "error",
                    {
                        "type": "error",
                        "error": {"type": spec["stream_error"], "message": "Overloaded"},
                    },
                )
            )
        else:
            for index, block in enumerate(message["content"]):
                chunks.extend(self._block_events(index, block, event))
            chunks.append(
                event(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                        "usage": {"output_tokens": message["usage"]["output_tokens"]},
                    },
                )
            )
            chunks.append(event("message_stop", {"type": "message_stop"}))
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    @staticmethod
    def _block_events(index: int, block: dict, event: Callable[[str, dict], bytes]) -> list[bytes]:
        if block["type"] == "text":
            start_block, deltas = {"type": "text", "text": ""}, []
            value = block["text"]
            for i in range(0, len(value), 40) or [0]:
                deltas.append({"type": "text_delta", "text": value[i : i + 40]})
        elif block["type"] == "tool_use":
            start_block = {
                "type": "tool_use",
                "id": block["id"],
                "name": block["name"],
                "input": {},
            }
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        else:
            start_block, deltas = block, []
        out = [
            event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start_block},
            )
        ]
        out += [
            event(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}
            )
            for d in deltas
        ]
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        return out


# ----------------------------------------------------------------------------- standalone use
def main() -> None:
    """Serve in the foreground (for benchmarks and manual runs): every request gets the default
    answer after --delay seconds, or answers from a JSON list given with --script."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--script", help="JSON file holding a list of answer specs")
    args = parser.parse_args()
    specs = json.load(open(args.script)) if args.script else []
    api = ScriptedAnthropic(specs, delay=args.delay, record=False).start(args.port)
    print(api.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        api.stop()


if __name__ == "__main__":
    main()
