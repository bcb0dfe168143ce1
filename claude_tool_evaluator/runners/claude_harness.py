"""Suites through Claude Code (`--harness claude-code`): each run of a case is a real `claude -p`
with the suite's servers as its MCP config (in the temporary HOME and project skill runs use),
read back from its stream-json into the call records the API loop makes, and what Claude Code's
room adds to a run: the tool search (deferred tools, the searches, what they loaded), servers
not ready at the first request, and the built-ins that took a call.

May import: the rooms above the runners."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import test_constants as C

from .. import HERE, PROGRAMS
from ..claude_code.binary import claude_version, find_claude_bin
from ..claude_code.process import ClaudeCliSettings, run_in_folder
from ..claude_code.proxy import CachingProxy
from ..claude_code.runs import RunFolder
from ..claude_code.stream import StreamCall, StreamReader, StreamText, read_output, stream_error
from ..errors import InputError
from ..hub.served import remote_entry, served_over_http
from ..run_types import HARNESS_MARK, VERSION_MARK, HistoryEntry, ToolCall, Transcript, Usage
from ..sinks import one_line

__all__ = [
    "ClaudeHarness",
    "HARNESS_CLAUDE_CODE",
    "arm_model",
    "arms_of",
    "check_cases",
    "claude_names",
    "read_stream",
]

if TYPE_CHECKING:
    from ..cache import ResponseCache
    from ..hub.calls import ToolPolicy
    from ..hub.hostile import AttackState
    from ..hub.tools import ToolSpec
    from ..run_types import ServerSpec, TestCase
    from ..settings import ClaudeCode, ModelApi

_HARNESS_API, HARNESS_CLAUDE_CODE = C.HARNESSES
# --tool-search: Claude Code's ENABLE_TOOL_SEARCH (auto: left unset, Claude Code decides)
_TOOL_SEARCH_ENV = {"on": "true", "off": "false"}
_SEARCH_TOOL, _WAIT_TOOL = "ToolSearch", "WaitForMcpServers"
# Claude Code's own machinery around MCP tools: neither a suite's tool nor a built-in thief
_META_TOOLS = frozenset({_SEARCH_TOOL, _WAIT_TOOL, "DeferredToolPlaceholder"})
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# A stdio server as Claude Code starts it: in the folder the hub starts it in (Claude Code's MCP
# config has no working folder, and a run's own folder is its temporary project).
_IN_FOLDER_LAUNCHER = PROGRAMS / "in_folder.py"
# A module server (--server-module) as Claude Code starts it: a process serving it over stdio.
_MODULE_LAUNCHER = PROGRAMS / "serve_module.py"


@dataclass(frozen=True)
class _Arm:
    """How a job's case is run: through our API loop, or through Claude Code with a tool-search
    setting (and, several --claude-bin, a binary and its version). `label` is what results and
    reports call it."""

    harness: str = _HARNESS_API
    tool_search: str = "auto"
    binary: str = ""  # several --claude-bin: this arm's CLI ("": the one found)
    version: str = ""  # several --claude-bin: its Claude Code version, part of the label

    @property
    def label(self) -> str:
        if self.harness == _HARNESS_API:
            return _HARNESS_API
        return (
            self.harness
            + ("" if self.tool_search == "auto" else f" tool-search {self.tool_search}")
            + (f"{VERSION_MARK}{self.version}" if self.version else "")
        )


_API_ARM = _Arm()


def arm_model(model: str, arm: _Arm) -> str:
    """What a run's model is reported as: the model itself through the API, `MODEL via
    claude-code[ tool-search on]` through Claude Code (its price is its model's)."""
    return model if arm == _API_ARM else f"{model}{HARNESS_MARK}{arm.label}"


def arms_of(claude_code: ClaudeCode) -> list[_Arm]:
    """--harness (each), and for Claude Code each --tool-search value and, several --claude-bin,
    each binary (its version asked before any spend: two of one version are one line, exit 2):
    every case runs on each."""
    binaries: list[tuple[str, str]] = [("", "")]
    if HARNESS_CLAUDE_CODE in claude_code.harness and len(claude_code.claude_bins) > 1:
        binaries = []
        for given in claude_code.claude_bins:
            binary = find_claude_bin(given)
            version = claude_version(binary).split()[0]
            if version in [v for _, v in binaries]:
                raise InputError(
                    f"--claude-bin {given} is Claude Code {version}, as an earlier --claude-bin",
                    hint="name each version once",
                )
            binaries.append((binary, version))
    arms: list[_Arm] = []
    for harness in claude_code.harness or (_HARNESS_API,):
        if harness == _HARNESS_API:
            arms.append(_API_ARM)
            continue
        for search in claude_code.tool_search or ("auto",):
            arms += [_Arm(harness, search, binary, version) for binary, version in binaries]
    return arms


def _claude_tool_name(server: str, tool: str) -> str:
    """The name Claude Code gives a server's tool: `mcp__SERVER__TOOL`."""
    return f"mcp__{_NAME_UNSAFE.sub('_', server)}__{_NAME_UNSAFE.sub('_', tool)}"


def claude_names(tools: dict[str, ToolSpec]) -> dict[str, str]:
    """Claude Code's name of each of the suite's tools -> the suite's own name of it."""
    return {_claude_tool_name(t.server, t.remote_name): name for name, t in tools.items()}


def _server_entry(spec: ServerSpec) -> dict[str, Any]:
    """One server of the suite as an entry of Claude Code's --mcp-config."""
    if spec.kind == "stdio":  # started in its own folder (the evaluator's, as the hub starts it)
        folder = str(Path(spec.cwd or ".").resolve())
        entry: dict[str, Any] = {
            "command": sys.executable,
            "args": ["-I", "-S", str(_IN_FOLDER_LAUNCHER), folder, spec.command, *spec.args],
        }
        if spec.env:
            entry["env"] = dict(spec.env)
        return entry
    if spec.kind in ("http", "sse"):
        return remote_entry(spec)
    return {
        "command": sys.executable,
        "args": [
            str(_MODULE_LAUNCHER),
            spec.name,
            str(Path(spec.module).resolve()),
            spec.attr or "",
        ],
        "env": {"PYTHONPATH": str(HERE)},
    }


def check_cases(cases: Sequence[TestCase]) -> None:
    """A `claude -p` run is one prompt: a case with earlier messages cannot be one."""
    for case in cases:
        if case.history:
            raise InputError(
                f"case {case.name} has earlier messages, and a run through Claude Code is one prompt",
                case.source or None,
                case.line or None,
                "run it with --harness api",
            )


# ---------------------------------------------------------------------------- a run's stream, read
@dataclass
class _StreamReading:
    """What one run's stream-json says, as the API loop's records and Claude Code's own facts."""

    calls: list[ToolCall]
    history: list[HistoryEntry]
    facts: dict[str, Any]
    final_text: str
    model_calls: int
    usage: Usage
    result: dict | None


def _suite_call(
    call: StreamCall, name: str, tool: ToolSpec, withheld: set[str], answered: frozenset[str]
) -> ToolCall:
    """A call of one of the suite's tools as the API harness records it: by its suite name; a
    withheld one answered by the policy; one of `answered` (the red team's canary and
    look-alikes) by the proxy answering it, never executed anywhere."""
    kept, canary = call.name not in withheld, call.name in answered
    return ToolCall(
        name=name,
        input=call.input,
        output=call.output,
        is_error=call.is_error,
        server=tool.server,
        turn=call.message,
        id=str(call.block.get("id", "")),
        source="canary" if canary else "live" if kept else "policy",
        executed=kept and not canary and not call.is_error,
    )


def _server_statuses(stream: StreamReader, waited: bool) -> dict[str, dict[str, Any]]:
    """Each server's status at the start (the init event), whether the model waited for the
    servers, and when a late one connected."""
    servers = {
        str(s.get("name")): {"status_at_start": str(s.get("status")), "waited": waited}
        for s in stream.init.get("mcp_servers") or []
        if isinstance(s, dict)
    }
    for name, after in stream.connected_after().items():
        if name in servers:
            servers[name]["connected_after_ms"] = after
    return servers


def _claude_code_facts(
    stream: StreamReader, names: dict[str, str], tools: dict[str, ToolSpec], withheld: set[str]
) -> dict[str, Any]:
    """What Claude Code's room added to a run: its version, whether the tools were deferred, the
    searches and what they loaded, the waits, each server's status at the start (and when a late
    one connected), the built-ins called, the suite's tools withheld."""
    top = stream.top_calls
    searches = [
        {"query": str(c.input.get("query", "")), "loaded": [names.get(n, n) for n in c.loaded]}
        for c in top
        if c.name == _SEARCH_TOOL
    ]
    waited = any(c.name == _WAIT_TOOL for c in top)
    return {
        "claude_version": stream.init.get("claude_code_version"),
        "deferred": _SEARCH_TOOL in (stream.init.get("tools") or []),
        "searches": searches,
        "loaded": sorted({n for s in searches for n in s["loaded"] if n in tools}),
        "waited": waited,
        "servers": _server_statuses(stream, waited),
        "builtins": [c.name for c in top if c.name not in names and c.name not in _META_TOOLS],
        "withheld": sorted(names[n] for n in withheld if n in names),
    }


def read_stream(
    stream: StreamReader,
    prompt: str,
    names: dict[str, str],
    tools: dict[str, ToolSpec],
    withheld: set[str],
    answered: frozenset[str] = frozenset(),
) -> _StreamReading:
    """A run's stream as the API loop's records (the top level: a subagent's calls are not the
    run's): each call of a suite tool (suite_call), the conversation, the final text (the result
    event's, else the last text), the model calls and usage, and Claude Code's facts."""
    calls: list[ToolCall] = []
    history = [HistoryEntry(role="user", content=prompt)]
    for step in stream.steps:
        if isinstance(step, StreamText) and step.text:
            history.append(HistoryEntry(role="assistant", content=step.text))
        elif isinstance(step, StreamCall) and step.name in names:
            name = names[step.name]
            calls.append(_suite_call(step, name, tools[name], withheld, answered))
            history.append(HistoryEntry(role="assistant", content=f"[{name}]", has_tools=True))
            history.append(HistoryEntry(role="tool", content=step.output))
    texts = [s.text for s in stream.steps if isinstance(s, StreamText) and s.text]
    result = stream.result
    final = (result or {}).get("result")
    return _StreamReading(
        calls,
        history,
        _claude_code_facts(stream, names, tools, withheld),
        final if isinstance(final, str) else (texts[-1] if texts else ""),
        stream.messages,
        Usage.from_api(result.get("usage") or {}) if result else Usage(),
        result,
    )


def _answered_by(calls: list[ToolCall], answers: list[tuple[str, dict]]) -> None:
    """Each call that reached the evaluator's in-process servers as they answered it (in order,
    by tool): a mock, the cassette, the policy, the canary or the live server; a call Claude Code
    refused never reached them and stays as read from the stream."""
    left = list(answers)
    for call in calls:
        found = next((i for i, (name, _) in enumerate(left) if name == call.name), None)
        if found is None:
            continue
        said = left.pop(found)[1]
        call.source = str(said.get("source") or call.source)
        call.executed = bool(said.get("executed", call.executed))
        call.duration_ms = float(said.get("duration_ms") or call.duration_ms)


# ---------------------------------------------------------------------------- the harness
class ClaudeHarness:
    """The Claude Code side of a tool-use runner: made once its hub has listed the tools, it runs
    one case through `claude -p` and gives back the transcript the API loop would have."""

    def __init__(
        self,
        claude_code: ClaudeCode,
        api: ModelApi,
        servers: Sequence[ServerSpec],
        tools: dict[str, ToolSpec],
        policy: ToolPolicy,
        prompt: str,
        answered: dict[str, ToolSpec] | None = None,
    ) -> None:
        """`answered`: tools the evaluator's own in-process servers answer (the red team's canary
        and look-alikes), always pre-approved: whether Claude calls them is what is measured."""
        self.mcp_startup, self.base_url, self.max_turns = (
            claude_code.mcp_startup,
            api.base_url,
            api.max_turns,
        )
        self.binary = find_claude_bin(claude_code.claude_bin)
        self.version = claude_version(self.binary)
        self.tools = dict(tools, **(answered or {}))
        self.names = claude_names(self.tools)
        self.answered = frozenset(claude_names(answered or {}))
        # a mocked or replayed tool is answered without its server: Claude Code may call it
        live = {
            _claude_tool_name(t.server, t.remote_name)
            for t in tools.values()
            if policy.runs_live(t) or policy.mocks_of(t) or policy.replay is not None
        }
        self.withheld = set(self.names) - live - self.answered
        self.config = {"mcpServers": {spec.name: _server_entry(spec) for spec in servers}}
        self.prompt = prompt
        self.proxy: CachingProxy | None = None

    def open_cache(self, cache: ResponseCache, upstream: str) -> CachingProxy:
        """--cache: Claude Code reaches the model through the caching proxy (closed by the caller)."""
        self.proxy = CachingProxy(cache, upstream).__enter__()
        return self.proxy

    def cli_settings(
        self, model: str, arm: _Arm, iteration: int, mcp_config: Path
    ) -> ClaudeCliSettings:
        environment: tuple[tuple[str, str], ...] = ()
        if self.mcp_startup == "no-wait":  # the first request goes out at once
            environment += (("CLAUDE_CODE_MCP_STARTUP_WAIT_MS", "0"),)
        if arm.tool_search in _TOOL_SEARCH_ENV:
            environment += (("ENABLE_TOOL_SEARCH", _TOOL_SEARCH_ENV[arm.tool_search]),)
        base_url = self.base_url
        if self.proxy is not None:
            base_url = f"{self.proxy.url}/sample/{iteration}"
        return ClaudeCliSettings(
            binary=arm.binary or self.binary,
            model=model,
            max_turns=self.max_turns,
            timeout=C.DEFAULT_HARNESS_TIMEOUT,
            base_url=base_url,
            mcp_config=str(mcp_config),
            allowed_rules=tuple(sorted(set(self.names) - self.withheld)),
            environment=environment,
            append_system_prompt=self.prompt,
        )

    async def run(
        self,
        case: TestCase,
        iteration: int,
        model: str,
        arm: _Arm,
        in_process: Sequence[ServerSpec] = (),
        answers: AttackState | None = None,
    ) -> Transcript:
        """One run of the case; a run that fails, hangs or says nothing is an error on it.
        `in_process`: servers of this run alone that the evaluator runs itself (a red team's
        proxies, of the suite's servers' names), served to Claude Code over loopback HTTP in
        place of the suite's servers; `answers`: their state, which says who answered each call
        (a mock, the cassette, the policy, the canary, the live server)."""
        started = time.perf_counter()
        transcript = Transcript(
            case=case, iteration=iteration, model=arm_model(model, arm), harness=arm.label
        )
        try:
            folder = RunFolder.make()
        except OSError as exc:
            transcript.error, transcript.ended_by = f"could not start claude: {exc}", "error"
            return transcript
        try:
            async with served_over_http(in_process) as served:
                entries = {spec.name: _server_entry(spec) for spec in served}
                config = folder.root / "mcp.json"
                config.write_text(
                    json.dumps({"mcpServers": entries} if served else self.config),
                    encoding="utf-8",
                )
                settings = self.cli_settings(model, arm, iteration, config)
                done, _, _, _ = await run_in_folder(folder, case.prompt, (), settings, None)
        except OSError as exc:
            transcript.error, transcript.ended_by = f"could not serve its tools: {exc}", "error"
            return transcript
        finally:
            folder.remove()
        transcript.latency_ms = round((time.perf_counter() - started) * 1000, 2)
        if done.start_error:
            transcript.error, transcript.ended_by = done.start_error, "error"
            return transcript
        stream = read_output(done.stdout)
        reading = read_stream(
            stream, case.prompt, self.names, self.tools, self.withheld, self.answered
        )
        if answers is not None:
            _answered_by(reading.calls, answers.answers)
        transcript.tool_calls, transcript.history = reading.calls, reading.history
        transcript.final_text, transcript.model_calls = reading.final_text, reading.model_calls
        transcript.usage = reading.usage
        transcript.claude_code = dict(reading.facts, tool_search=arm.tool_search)
        subtype = (reading.result or {}).get("subtype")
        transcript.stop_reason = (reading.result or {}).get("stop_reason")
        transcript.ended_by = "max_turns" if subtype == "error_max_turns" else "completion"
        error = stream_error(stream.events, reading.result)
        if done.timed_out:
            error = f"timed out after {settings.timeout:g}s (process group killed)"
        elif error and done.returncode not in (0, None):
            stderr = one_line(done.stderr.decode("utf-8", "replace"), 300)
            error += f"; claude exited with {done.returncode}" + (
                f", stderr: {stderr}" if stderr else ""
            )
        if error:
            transcript.error, transcript.ended_by = error, "error"
        return transcript
