#!/usr/bin/env python3
"""Evaluate how Claude uses tools and skills.

Connects to real MCP servers, hands their tools to Claude through the Anthropic Messages API,
runs every tool call Claude makes against the real server, and records what happened; runs
Agent Skill trigger benchmarks through the real Claude Code CLI; scores both and writes
reports a CI job can gate on.

The file reads top to bottom in data-flow order:
inputs -> load -> cases -> run -> transcripts -> score -> verdicts -> report -> CLI.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import re
import shlex
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import click
from rich.console import Console
from rich.table import Table

import prompts
import test_constants as C

HERE = Path(__file__).resolve().parent
EXAMPLE_SERVER = HERE / "examples" / "profiles_server.py"


# ============================================================================ 1. errors
class EvalError(Exception):
    """Root of the evaluator's own errors."""


class InputError(EvalError):
    """Bad input from the user: reported as one line naming file and line, exit code 2."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None,
                 hint: str | None = None) -> None:
        self.message, self.path, self.line, self.hint = message, path, line, hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}: " if self.path and self.line else f"{self.path}: " if self.path else ""
        return f"{where}{self.message}" + (f" ({self.hint})" if self.hint else "")


class ServerError(EvalError):
    """An MCP server failed to start or died; names the server and quotes its stderr tail."""


class FatalApiError(EvalError):
    """A model API answer that is wrong for every case (a bad key): stops the whole run."""


# ============================================================================ 2. data types
@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(*(a + b for a, b in zip(astuple_usage(self), astuple_usage(other))))

    @property
    def total(self) -> int:
        return sum(astuple_usage(self))

    @classmethod
    def from_api(cls, usage: Any) -> "Usage":
        get = (lambda k: usage.get(k)) if isinstance(usage, dict) else (lambda k: getattr(usage, k, None))
        return cls(*(int(get(k) or 0) for k in USAGE_FIELDS))


USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def astuple_usage(usage: Usage) -> tuple[int, ...]:
    return tuple(getattr(usage, k) for k in USAGE_FIELDS)


def price_for(model: str) -> tuple[dict[str, float], bool]:
    """Per-million-token prices for a model id (longest matching prefix); False when guessed."""
    matches = [prefix for prefix in C.PRICES if model.startswith(prefix)]
    if not matches:
        return C.FALLBACK_PRICE, False
    return C.PRICES[max(matches, key=len)], True


def cost_usd(usage: Usage, model: str) -> float:
    price, _ = price_for(model)
    return (usage.input_tokens * price["input"] + usage.output_tokens * price["output"]
            + usage.cache_creation_input_tokens * price["cache_write"]
            + usage.cache_read_input_tokens * price["cache_read"]) / 1_000_000


@dataclass
class ToolCall:
    """One tool call Claude made, and what the server answered."""
    name: str
    input: dict
    output: str = ""
    is_error: bool = False
    duration_ms: float = 0.0
    server: str | None = None
    turn: int = 0
    id: str = ""


@dataclass
class HistoryEntry:
    """One entry of seed 002's `conversation_history`."""
    role: str                    # user | assistant | tool
    content: str
    has_tools: bool = False
    simulated: bool = False


@dataclass
class PriorMessage:
    """A message of a conversation that happened before the evaluation starts (`-c FILE`)."""
    role: str                    # user | assistant
    content: str
    line: int = 0


@dataclass
class TestCase:
    """One thing to evaluate: a prompt (with optional prior history) and what should happen."""
    name: str
    prompt: str
    description: str = ""
    history: list[PriorMessage] = field(default_factory=list)
    expected_tools: list[str] = field(default_factory=list)
    forbidden_tools: list[str] = field(default_factory=list)
    expected_args: dict[str, dict] = field(default_factory=dict)
    args_match: str = "partial"
    order: str = "any"
    max_tool_calls: int | None = None
    min_tool_calls: int | None = None
    expect_no_tools: bool = False
    tags: list[str] = field(default_factory=list)
    simulated_user: str | None = None
    source: str = ""             # file the case came from
    line: int = 0


@dataclass
class Transcript:
    """The single record of one run of one case: what was sent, what came back, timings, usage."""
    case: TestCase
    iteration: int
    model: str
    final_text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    model_calls: int = 0
    user_interventions: int = 0
    ended_by: str = "completion"  # completion | user_end | needs_input | max_turns | error
    stop_reason: str | None = None
    truncated: bool = False
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0
    error: str | None = None

    @property
    def cost_usd(self) -> float:
        return cost_usd(self.usage, self.model)

    @property
    def tools_called(self) -> list[str]:
        return [call.name for call in self.tool_calls]


@dataclass
class RunSettings:
    """Everything the conversation engine needs besides the case itself."""
    model: str = C.DEFAULT_MODEL
    system_prompt: str = prompts.CLAUDE_CODE_SYSTEM_PROMPT
    max_tokens: int = C.DEFAULT_MAX_TOKENS
    temperature: float | None = C.DEFAULT_TEMPERATURE
    max_turns: int = C.DEFAULT_MAX_TURNS
    concurrency: int = C.DEFAULT_CONCURRENCY
    stream: bool = False


@dataclass
class ServerSpec:
    """How to reach one MCP server: `stdio` (command), `http` (url) or `module` (in-process)."""
    name: str
    kind: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    module: str = ""
    attr: str | None = None


# ============================================================================ 3. loaders: servers and prompts
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env_refs(value: str, where: str, path: Path, line: int | None) -> str:
    """`${VAR}` and `${VAR:-default}` as Claude Code expands them in an mcpServers config."""
    def sub(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise InputError(f"{where} refers to ${{{name}}}, which is not set", path, line,
                         f"export {name}=... or give a default as ${{{name}:-value}}")
    return ENV_REF.sub(sub, value)


def parse_server_env(items: Sequence[str]) -> dict[str, str]:
    """`--server-env KEY` passes our value of KEY; `--server-env KEY=VALUE` sets it."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise InputError(f"--server-env {item!r} is not KEY or KEY=VALUE")
        if not sep:
            if key not in os.environ:
                raise InputError(f"--server-env {key}: {key} is not set in this environment",
                                 hint=f"export {key}=... or pass --server-env {key}=VALUE")
            value = os.environ[key]
        env[key] = value
    return env


def parse_server_command(command: str, env: dict[str, str], index: int = 0) -> ServerSpec:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InputError(f"--server {command!r}: {exc}") from None
    if not argv:
        raise InputError("--server is empty", hint='give a command, e.g. --server "python my_server.py"')
    return ServerSpec(name=safe_name(server_name_from_argv(argv)) or f"server{index + 1}", kind="stdio", command=argv[0],
                      args=argv[1:], env=dict(env))


def server_name_from_argv(argv: list[str]) -> str:
    """A short name for a server command: its script, its `-m` module, or its program."""
    for i, arg in enumerate(argv[1:], 1):
        if arg.endswith((".py", ".js", ".mjs", ".ts")):
            return Path(arg).stem
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1].split(".")[-1]
    return Path(argv[0]).name


def parse_server_module(target: str) -> ServerSpec:
    module, _, attr = target.partition(":")
    if module.endswith(".py") or "/" in module:
        if not Path(module).is_file():
            raise InputError(f"--server-module {target}: no such file", hint="give path/to/server.py[:attr]")
    elif not re.fullmatch(r"[A-Za-z_][\w.]*", module):
        raise InputError(f"--server-module {target!r} is neither a file nor a module name")
    return ServerSpec(name=safe_name(Path(module).stem.split(".")[-1]), kind="module", module=module,
                      attr=attr or None)


def safe_name(name: str) -> str:
    """A server name usable inside an Anthropic tool name (`^[a-zA-Z0-9_-]{1,128}$`)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name).strip("_")[:40]


def load_mcp_config(path: str | Path) -> list[ServerSpec]:
    """Claude Desktop / Claude Code `mcpServers` JSON, as is."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read MCP config: {exc.__class__.__name__}: {exc}", path) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path, exc.lineno, "fix the JSON syntax") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise InputError('no "mcpServers" object with at least one server', path, 1,
                         'expected {"mcpServers": {"name": {"command": ...}}}')
    return [config_server_spec(name, entry, path, raw) for name, entry in servers.items()]


def line_of(raw: str, needle: str) -> int | None:
    index = raw.find(needle)
    return raw.count("\n", 0, index) + 1 if index >= 0 else None


def config_server_spec(name: str, entry: Any, path: Path, raw: str) -> ServerSpec:
    line = line_of(raw, json.dumps(name))
    if not isinstance(entry, dict):
        raise InputError(f"server {name!r} must be an object", path, line)
    kind = entry.get("type") or ("stdio" if "command" in entry else "http" if "url" in entry else None)
    where = f"server {name!r}"

    def expand_map(key: str) -> dict[str, str]:
        value = entry.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise InputError(f"{where}: {key!r} must be an object of strings", path, line)
        return {k: expand_env_refs(v, f"{where} {key} {k}", path, line) for k, v in value.items()}

    if kind == "stdio":
        command, args = entry.get("command"), entry.get("args") or []
        if not isinstance(command, str) or not command.strip():
            raise InputError(f"{where}: stdio server needs a \"command\" string", path, line)
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise InputError(f"{where}: \"args\" must be a list of strings", path, line)
        cwd = entry.get("cwd")
        return ServerSpec(name=safe_name(name) or "server", kind="stdio",
                          command=expand_env_refs(command, where, path, line),
                          args=[expand_env_refs(a, f"{where} args", path, line) for a in args],
                          env=expand_map("env"), cwd=str((path.parent / cwd).resolve()) if cwd else None)
    if kind in ("http", "streamable-http", "streamable_http"):
        url = entry.get("url")
        if not isinstance(url, str) or not re.match(r"https?://", url):
            raise InputError(f"{where}: http server needs a \"url\" starting with http:// or https://", path, line)
        return ServerSpec(name=safe_name(name) or "server", kind="http",
                          url=expand_env_refs(url, f"{where} url", path, line), headers=expand_map("headers"))
    raise InputError(f"{where}: unknown server type {kind!r}", path, line,
                     'use "type": "stdio" (with "command") or "type": "http" (with "url")')


def resolve_servers(servers: Sequence[str], server_env: Sequence[str], mcp_config: str | None,
                    server_modules: Sequence[str]) -> list[ServerSpec]:
    """All servers the user named; the bundled example server when none is named."""
    env = parse_server_env(server_env)
    specs = [parse_server_command(cmd, env, i) for i, cmd in enumerate(servers)]
    if mcp_config:
        specs += load_mcp_config(mcp_config)
    specs += [parse_server_module(target) for target in server_modules]
    if not specs:
        specs = [ServerSpec(name="profiles", kind="stdio", command=sys.executable, args=[str(EXAMPLE_SERVER)],
                            env=env)]
    seen: dict[str, int] = {}
    for spec in specs:  # two servers of one name would make tool names ambiguous
        seen[spec.name] = seen.get(spec.name, 0) + 1
        if seen[spec.name] > 1:
            spec.name = f"{spec.name}{seen[spec.name]}"
    return specs


def load_system_prompt(choice: str) -> str:
    """A prompt name from prompts.py, or a path to a text file."""
    if choice in prompts.SYSTEM_PROMPTS:
        return prompts.SYSTEM_PROMPTS[choice]
    path = Path(choice)
    if path.is_file():
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read prompt file: {exc}", path) from None
        if not value:
            raise InputError("prompt file is empty", path, 1)
        return value
    raise InputError(f"--prompt {choice!r} is neither a prompt name nor a file",
                     hint="choose one of " + ", ".join(prompts.SYSTEM_PROMPTS) + " or give a path")


# ============================================================================ 3c. loaders: conversation files
# A turn header is a line of its own. The first header in a file fixes the file's style, and
# only headers of that style start turns afterwards: a "User: 42" line inside an answer of a
# `**User**` file is content, not a new turn.
TURN_HEADER_STYLES = {
    # `**User**` alone, or `**User:** text` / `**User**: text`; never `**User** management ...`
    "bold": re.compile(r"\*\*(user|assistant)(?:\*\*|:\*\*[ \t]*(.*)|\*\*[ \t]*:[ \t]*(.*))", re.IGNORECASE),
    "heading": re.compile(r"#{1,6}[ \t]+(user|assistant)[ \t]*:?[ \t]*#*[ \t]*$", re.IGNORECASE),
    "prefix": re.compile(r"(user|assistant)[ \t]*:[ \t]*(.*)", re.IGNORECASE),
}
CODE_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})")
THEMATIC_BREAK = re.compile(r"[ ]{0,3}([-*_])([ \t]*\1){2,}[ \t]*")


@dataclass
class TurnHeader:
    style: str
    role: str
    rest: str                    # text after the header on the same line (`User: hi`)


def parse_turn_header(line: str, style: str | None) -> TurnHeader | None:
    styles = [style] if style else list(TURN_HEADER_STYLES)
    for name in styles:
        match = TURN_HEADER_STYLES[name].fullmatch(line.strip())
        if match:
            rest = next((g for g in match.groups()[1:] if g), "")
            return TurnHeader(name, match.group(1).lower(), rest.strip())
    return None


def skip_frontmatter(lines: list[str]) -> int:
    """Index of the first line after a leading YAML frontmatter block (0 when there is none)."""
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() == "---":
                return index + 1
    return 0


def split_conversation_turns(lines: list[str], path: Path) -> list[PriorMessage]:
    """Headed blocks in file order; a header inside a fenced code block is content."""
    turns: list[PriorMessage] = []
    body: list[str] = []
    style: str | None = None
    fence: tuple[str, int] | None = None       # (fence character run, line) of the open code block
    first = skip_frontmatter(lines)
    for number, line in enumerate(lines[first:], start=first + 1):
        fence_match = CODE_FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0][0] and len(fence_match.group(1)) >= len(fence[0]) \
                    and not line.strip().strip(fence[0][0]):
                fence = None
            body.append(line)
            continue
        if fence_match:
            fence = (fence_match.group(1), number)
        header = None if fence else parse_turn_header(line, style)
        if header is None:
            if turns:
                body.append(line)
            elif line.strip() and not line.lstrip().startswith(("#", "<!--")):
                raise InputError("text before the first turn header", path, number,
                                 "start each message with a **User** / **Assistant** line, a ## User / "
                                 "## Assistant heading, or a User: / Assistant: prefix")
            continue
        if turns:
            turns[-1].content = message_text(body)
        style = header.style
        turns.append(PriorMessage(header.role, "", number))
        body = [header.rest] if header.rest else []
    if fence is not None:
        raise InputError("this code block is never closed", path, fence[1],
                         f"close it with a line of {fence[0]}")
    if turns:
        turns[-1].content = message_text(body)
    return turns


def message_text(body: list[str]) -> str:
    """A message's text without surrounding blank lines or the rules that separate turns."""
    while body and (not body[-1].strip() or THEMATIC_BREAK.fullmatch(body[-1])):
        body = body[:-1]
    return "\n".join(body).strip("\n").strip()


def load_conversation(path: str | Path) -> list[PriorMessage]:
    """A conversation in markdown (seed 002's `**User**` / `**Assistant**` blocks, `## User`
    headings, or `User:` prefixes) as the messages to send as prior turns.

    Consecutive user messages are merged into one; the Messages API needs the conversation to
    start with the user and has no use for two assistant answers in a row, so those are errors."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read conversation file: {exc.__class__.__name__}: {exc}", path) from None
    turns = split_conversation_turns(raw.splitlines(), path)
    if not turns:
        raise InputError("no conversation turns found", path, 1,
                         "mark messages with **User** / **Assistant** lines, ## User / ## Assistant "
                         "headings, or User: / Assistant: prefixes")
    merged: list[PriorMessage] = []
    for turn in turns:
        label = turn.role.capitalize()
        if not turn.content:
            raise InputError(f"empty {label} message", path, turn.line, "write the message below its header")
        if not merged and turn.role == "assistant":
            raise InputError("the conversation starts with an Assistant message", path, turn.line,
                             "the Messages API needs the user to speak first; add the User message before it")
        if merged and merged[-1].role == turn.role == "assistant":
            raise InputError(f"two Assistant messages in a row (the previous one starts at line "
                             f"{merged[-1].line})", path, turn.line,
                             "add the User message between them, or merge them into one")
        if merged and merged[-1].role == turn.role:
            merged[-1].content += "\n\n" + turn.content
            continue
        merged.append(turn)
    return merged


def conversation_case(path: str | Path, follow_up: str | None = None) -> TestCase:
    """A conversation file as a case: its last user message is the prompt and everything before
    it the prior history; a file that ends with Claude's answer has no prompt of its own.
    `follow_up` (-q next to -c) is one more user message after the file."""
    history = load_conversation(path)
    if follow_up and follow_up.strip():
        if history[-1].role == "user":
            history[-1].content += "\n\n" + follow_up.strip()
        else:
            history.append(PriorMessage("user", follow_up.strip()))
    prompt = history.pop().content if history[-1].role == "user" else ""
    return TestCase(name=Path(path).stem, prompt=prompt, history=history, source=str(path))


# ============================================================================ 4. MCP hub
@dataclass
class ToolSpec:
    """A tool as Claude sees it (`name`), and where it really lives (`server`, `remote_name`)."""
    name: str
    server: str
    remote_name: str
    description: str
    input_schema: dict

    def to_anthropic(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass
class ToolOutcome:
    output: str
    is_error: bool
    server: str | None
    duration_ms: float


def tail(text: str, limit: int = C.STDERR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def cap_text(text: str, limit: int) -> str:
    """Keeps huge tool results from eating memory and tokens; says how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n...[truncated {len(text) - limit} of {len(text)} characters]"


def tool_result_text(result: Any, limit: int) -> str:
    """The text Claude sees for an MCP CallToolResult."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '')}]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(str(block))
        if sum(map(len, parts)) > limit > 0:
            break
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return cap_text("\n".join(parts), limit)


def load_server_object(spec: ServerSpec) -> Any:
    """Imports an in-process MCP server: `path.py[:attr]` or `package.module[:attr]`."""
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

    try:
        if spec.module.endswith(".py") or "/" in spec.module:
            path = Path(spec.module).resolve()
            sys.path.insert(0, str(path.parent))  # the server's own sibling imports must resolve
            module_spec = importlib.util.spec_from_file_location(f"_evaluated_server_{path.stem}", path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(spec.module)
    except Exception as exc:
        raise ServerError(f"server '{spec.name}': importing {spec.module} failed: "
                          f"{exc.__class__.__name__}: {exc}") from None
    if spec.attr:
        if not hasattr(module, spec.attr):
            raise InputError(f"--server-module {spec.module}: no attribute {spec.attr!r}")
        return getattr(module, spec.attr)
    candidates = [value for value in vars(module).values() if isinstance(value, (MCPServer, Server))]
    if not candidates:
        raise InputError(f"--server-module {spec.module}: no MCPServer or Server object found",
                         hint="name it as path.py:attr")
    return candidates[0]


class ServerConnection:
    """One live MCP client session. It runs in a task of its own so the SDK's task groups and
    cancel scopes stay in the task that opened them, whichever task calls tools."""

    def __init__(self, spec: ServerSpec, connect_timeout: float) -> None:
        self.spec = spec
        self.connect_timeout = connect_timeout
        self.client: Any = None
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task | None = None

    def stderr_tail(self) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            return tail(self._stderr.read())
        except (OSError, ValueError):
            return ""

    def _client(self) -> Any:
        from mcp import Client, StdioServerParameters, stdio_client

        spec = self.spec
        if spec.kind == "stdio":
            params = StdioServerParameters(command=spec.command, args=spec.args, env=spec.env or None, cwd=spec.cwd)
            return Client(stdio_client(params, errlog=self._stderr), read_timeout_seconds=None)
        if spec.kind == "http":
            return Client(http_transport(spec.url, spec.headers))
        return Client(load_server_object(spec))

    async def _serve(self) -> None:
        try:
            async with self._client() as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # the opener re-raises it as a ServerError
            self._error = exc
            self._ready.set()
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self.client = None

    async def open(self) -> None:
        self._task = asyncio.create_task(self._serve(), name=f"mcp-{self.spec.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), self.connect_timeout)
        except asyncio.TimeoutError:
            message = self.describe_failure(f"did not finish its MCP handshake within {self.connect_timeout:g}s")
            await self.close()
            raise ServerError(message) from None
        if self._error is not None or self.client is None:
            await asyncio.sleep(0.05)  # let a dying process finish writing its stderr
            message = self.describe_failure(explain_exception(self._error))
            await self.close()
            raise ServerError(message)

    def describe_failure(self, what: str) -> str:
        spec = self.spec
        target = {"stdio": " ".join([spec.command, *spec.args]), "http": spec.url,
                  "module": spec.module}[spec.kind]
        message = f"MCP server '{spec.name}' ({target}) {what}"
        stderr = self.stderr_tail()
        return message + (f"; its stderr ends with: {stderr}" if stderr else "")

    async def close(self) -> None:
        self._stop.set()
        if self._task:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            except (asyncio.TimeoutError, Exception):
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._stderr.close()


def http_transport(url: str, headers: dict[str, str]) -> Any:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if not headers:
        return streamable_http_client(url)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def transport():  # the client owns its HTTP connection pool, so it must close it
        async with create_mcp_http_client(headers=headers) as http_client:
            async with streamable_http_client(url, http_client=http_client) as streams:
                yield streams
    return transport()


def explain_exception(exc: BaseException | None) -> str:
    """A readable reason from an exception, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "failed"
    if isinstance(exc, FileNotFoundError):
        return f"could not start: command not found ({exc.filename or exc})"
    text = str(exc) or exc.__class__.__name__
    return f"failed: {exc.__class__.__name__}: {text}" if text != exc.__class__.__name__ else f"failed: {text}"


async def list_all_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(1000):  # a server that keeps handing out cursors must not loop us forever
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


class McpHub:
    """The open MCP servers and their tools; the only place that talks MCP.

    Use as `async with McpHub(specs) as hub:`; `hub.tools` maps the names Claude sees to
    ToolSpecs; `await hub.call_tool(name, args)` never raises for tool-level failures."""

    def __init__(self, specs: Sequence[ServerSpec], tool_timeout: float = C.DEFAULT_TOOL_TIMEOUT,
                 max_result_chars: int = C.DEFAULT_MAX_RESULT_CHARS,
                 connect_timeout: float = C.DEFAULT_CONNECT_TIMEOUT) -> None:
        self.specs = list(specs)
        self.tool_timeout = tool_timeout
        self.max_result_chars = max_result_chars
        self.connect_timeout = connect_timeout
        self.connections: dict[str, ServerConnection] = {}
        self.tools: dict[str, ToolSpec] = {}
        self.notices: list[str] = []
        self._anthropic_tools: list[dict] = []

    async def __aenter__(self) -> "McpHub":
        try:
            listings = {}
            for spec in self.specs:
                connection = ServerConnection(spec, self.connect_timeout)
                await connection.open()
                self.connections[spec.name] = connection
                try:
                    listings[spec.name] = await asyncio.wait_for(list_all_tools(connection.client),
                                                                 self.connect_timeout)
                except Exception as exc:
                    raise ServerError(connection.describe_failure(f"failed to list its tools: "
                                                                  f"{explain_exception(exc)}")) from None
            self._register_tools(listings)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for connection in reversed(list(self.connections.values())):
            await connection.close()
        self.connections.clear()

    def _register_tools(self, listings: dict[str, list[Any]]) -> None:
        owners: dict[str, list[str]] = {}
        for server, tools in listings.items():
            for tool in tools:
                owners.setdefault(tool.name, []).append(server)
        for name, servers in sorted(owners.items()):
            if len(servers) > 1:
                self.notices.append(f"tool '{name}' is offered by several servers ({', '.join(servers)}); "
                                    f"Claude sees them as " + ", ".join(f"{s}__{name}" for s in servers))
        for server, tools in listings.items():
            for tool in tools:
                exposed = f"{server}__{tool.name}" if len(owners[tool.name]) > 1 else tool.name
                schema = dict(tool.input_schema or {"type": "object"})
                schema.setdefault("type", "object")
                self.tools[exposed] = ToolSpec(exposed, server, tool.name, tool.description or "", schema)
        # Sorted and built once, so every request carries byte-identical tool definitions and the
        # cache_control mark on the last one caches the whole tool prefix.
        definitions = [self.tools[name].to_anthropic() for name in sorted(self.tools)]
        if definitions:
            definitions[-1] = dict(definitions[-1], cache_control={"type": "ephemeral"})
        self._anthropic_tools = definitions

    @property
    def anthropic_tools(self) -> list[dict]:
        return self._anthropic_tools

    def tool_names(self) -> list[str]:
        return sorted(self.tools)

    async def call_tool(self, name: str, arguments: Any) -> ToolOutcome:
        start = time.perf_counter()

        def outcome(text: str, is_error: bool, server: str | None) -> ToolOutcome:
            return ToolOutcome(text, is_error, server, round((time.perf_counter() - start) * 1000, 2))

        tool = self.tools.get(name)
        if tool is None:
            return outcome(f"Unknown tool: {name}. Available tools: {', '.join(self.tool_names())}", True, None)
        if not isinstance(arguments, dict):
            return outcome(f"Tool arguments must be a JSON object, got {type(arguments).__name__}", True,
                           tool.server)
        connection = self.connections.get(tool.server)
        if connection is None or connection.client is None:
            return outcome(connection.describe_failure("is not running") if connection
                           else f"server '{tool.server}' is not connected", True, tool.server)
        try:
            result = await asyncio.wait_for(
                connection.client.call_tool(tool.remote_name, arguments, read_timeout_seconds=self.tool_timeout),
                self.tool_timeout + 1)
        except (asyncio.TimeoutError, TimeoutError):
            return outcome(f"Tool call timed out after {self.tool_timeout:g}s", True, tool.server)
        except Exception as exc:
            reason = explain_exception(exc)
            if "timed out" in reason.lower():
                return outcome(f"Tool call timed out after {self.tool_timeout:g}s", True, tool.server)
            return outcome(connection.describe_failure(f"tool call {reason}"), True, tool.server)
        return outcome(tool_result_text(result, self.max_result_chars), bool(result.is_error), tool.server)


# ============================================================================ 5. model session
@dataclass
class ModelRequest:
    model: str
    system: str
    messages: list[dict]
    tools: list[dict]
    max_tokens: int
    temperature: float | None = None


@dataclass
class ModelReply:
    content: list[dict]          # content blocks as plain dicts, ready to send back
    stop_reason: str | None
    usage: Usage
    model: str


class ModelClient(Protocol):
    """The engine's model seam: the Anthropic API in production, a scripted model in unit tests."""

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        ...


def block_to_dict(block: Any) -> dict:
    """An API content block as the dict to send back in the next request."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    dumped = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    dumped.pop("parsed_output", None)
    return dumped


def api_key_from_env() -> str | None:
    return os.environ.get("ANTHROPIC_API_KEY") or None


class AnthropicModel:
    """Claude through `anthropic.AsyncAnthropic`; the only place that touches the SDK."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = C.DEFAULT_MAX_RETRIES, timeout: float = C.DEFAULT_REQUEST_TIMEOUT,
                 stream: bool = False) -> None:
        import anthropic

        self._anthropic = anthropic
        self.client = anthropic.AsyncAnthropic(api_key=api_key or api_key_from_env(),
                                               base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
                                               max_retries=max_retries, timeout=timeout)
        self.stream = stream

    @staticmethod
    def request_params(request: ModelRequest) -> dict:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
            "system": [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}],
        }
        if request.tools:
            params["tools"] = request.tools
        if request.temperature is not None:
            # The 2.x SDK no longer types sampling parameters (newer models fix them); the API
            # still takes `temperature` for models that accept it.
            params["extra_body"] = {"temperature": request.temperature}
        return params

    async def complete(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelReply:
        params = self.request_params(request)
        try:
            if self.stream or on_text:
                async with self.client.messages.stream(**params) as stream:
                    if on_text:
                        async for chunk in stream.text_stream:
                            on_text(chunk)
                    message = await stream.get_final_message()
            else:
                message = await self.client.messages.create(**params)
        except self._anthropic.AuthenticationError as exc:
            raise FatalApiError(f"the Anthropic API rejected the API key (401): {api_error_message(exc)}; "
                                "check ANTHROPIC_API_KEY") from None
        return ModelReply([block_to_dict(b) for b in message.content], message.stop_reason,
                          Usage.from_api(message.usage), message.model)

    async def close(self) -> None:
        await self.client.close()


def api_error_message(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    text = message or str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}" + (f" ({status})" if status else "") + f": {text}"


# ============================================================================ 6. conversation engine
QUESTION_PATTERNS = re.compile(
    r"\b(would you like|do you want|shall i|should i|which (one|option|of)|what would you|"
    r"could you (please )?(tell|share|provide|clarify|confirm|specify)|can you (please )?(tell|share|provide|"
    r"clarify|confirm|specify)|please (provide|specify|confirm|let me know|tell me|share)|let me know|"
    r"do you have|are you (looking|using|trying)|please choose|which would you prefer)\b", re.IGNORECASE)


def needs_user_input(text: str) -> bool:
    """Whether an assistant turn that ended without tool use is waiting for the user.

    The rule: the final paragraph of the text ends with a question mark, or any of the last
    three sentences asks for a choice or for information ("would you like", "which one",
    "please provide", "let me know", ...). Text with no words at all counts as waiting (when
    unsure, ask). Pure statements do not."""
    stripped = text.strip()
    if not stripped:
        return True
    last_paragraph = stripped.split("\n\n")[-1].strip().rstrip("*_` )")
    if last_paragraph.endswith("?"):
        return True
    sentences = re.split(r"(?<=[.!?])\s+", stripped)
    return any(QUESTION_PATTERNS.search(sentence) for sentence in sentences[-3:])


class UserInput(Protocol):
    """Who answers when Claude waits for the user: nobody (batch), a terminal, or a simulated user."""
    simulated: bool

    async def reply(self, transcript: Transcript, assistant_text: str) -> str | None:
        """The user's next message, or None to end the conversation."""


def user_end_reason(user: UserInput | None) -> str:
    """`ended_by` when the user returned None: `user_end`, unless the user says otherwise
    (a simulated user that ran out of --max-user-turns sets `end_reason = "max_turns"`)."""
    return getattr(user, "end_reason", None) or "user_end"


class ConversationObserver:
    """Hooks for showing a conversation as it happens; the default shows nothing."""

    def on_start(self, transcript: Transcript) -> None: ...
    def on_user(self, text: str, simulated: bool = False) -> None: ...
    def on_assistant_text(self, text: str) -> None: ...
    def on_tool_call(self, call: ToolCall) -> None: ...
    def on_turn_end(self, transcript: Transcript) -> None: ...


def text_of(content: list[dict]) -> str:
    return "\n".join(block["text"] for block in content if block.get("type") == "text").strip()


def initial_messages(case: TestCase) -> list[dict]:
    messages = [{"role": m.role, "content": m.content} for m in case.history]
    if case.prompt:
        messages.append({"role": "user", "content": case.prompt})
    return messages


async def run_conversation(case: TestCase, model: ModelClient, hub: McpHub, settings: RunSettings,
                           iteration: int = 1, user: UserInput | None = None,
                           observer: ConversationObserver | None = None) -> Transcript:
    """One conversation: Claude and the real tools until Claude is done, the user ends it, or
    the turn limit is reached. Failures become `transcript.error`; only a fatal API error raises."""
    observer = observer or ConversationObserver()
    transcript = Transcript(case=case, iteration=iteration, model=settings.model)
    transcript.history = [HistoryEntry(m.role, m.content) for m in case.history]
    messages = initial_messages(case)
    if case.prompt:
        transcript.history.append(HistoryEntry("user", case.prompt))
    observer.on_start(transcript)
    start = time.perf_counter()
    try:
        await converse(transcript, messages, model, hub, settings, user, observer)
    except FatalApiError:
        raise
    except (asyncio.CancelledError, KeyboardInterrupt):
        # Ctrl-C: the part that happened is still a result (the observer holds it); the run stops.
        transcript.error, transcript.ended_by = "interrupted", "error"
        transcript.latency_ms = round((time.perf_counter() - start) * 1000, 2)
        raise
    except Exception as exc:
        transcript.error = api_error_message(exc) if is_api_error(exc) else f"{exc.__class__.__name__}: {exc}"
        transcript.ended_by = "error"
    transcript.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    return transcript


def is_api_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("anthropic")


async def converse(transcript: Transcript, messages: list[dict], model: ModelClient, hub: McpHub,
                   settings: RunSettings, user: UserInput | None, observer: ConversationObserver) -> None:
    if not messages or messages[-1]["role"] != "user":
        # The history ends with Claude's answer: that is the final state, unless someone can reply.
        transcript.final_text = messages[-1]["content"] if messages else ""
        if not await ask_user(transcript, messages, user, observer):
            transcript.ended_by = "completion" if user is None else user_end_reason(user)
            return
    while True:
        if transcript.model_calls >= settings.max_turns:
            transcript.ended_by = "max_turns"
            return
        on_text = observer.on_assistant_text if settings.stream else None
        reply = await model.complete(ModelRequest(settings.model, settings.system_prompt, messages,
                                                  hub.anthropic_tools, settings.max_tokens,
                                                  settings.temperature), on_text)
        transcript.model_calls += 1
        transcript.usage = transcript.usage + reply.usage
        transcript.stop_reason = reply.stop_reason
        messages.append({"role": "assistant", "content": reply.content})
        text = text_of(reply.content)
        tool_uses = [b for b in reply.content if b.get("type") == "tool_use"]
        transcript.history.append(HistoryEntry("assistant", text, has_tools=bool(tool_uses)))
        if text:
            transcript.final_text = text
            if not settings.stream:
                observer.on_assistant_text(text)
        if reply.stop_reason == "pause_turn":
            continue
        if reply.stop_reason == "max_tokens":
            transcript.truncated = True
        if tool_uses and reply.stop_reason == "tool_use":
            messages.append({"role": "user", "content": await run_tool_calls(transcript, tool_uses, hub, observer)})
            observer.on_turn_end(transcript)
            continue
        observer.on_turn_end(transcript)
        if reply.stop_reason in ("refusal", "max_tokens") or not needs_user_input(text):
            transcript.ended_by = "completion"
            return
        if user is None:
            transcript.ended_by = "needs_input"
            return
        if not await ask_user(transcript, messages, user, observer):
            transcript.ended_by = user_end_reason(user)
            return


async def ask_user(transcript: Transcript, messages: list[dict], user: UserInput | None,
                   observer: ConversationObserver) -> bool:
    """Gets the user's next message into the conversation; False when the user ends it."""
    if user is None:
        return False
    answer = await user.reply(transcript, transcript.final_text)
    if answer is None or not answer.strip():
        return False
    messages.append({"role": "user", "content": answer})
    transcript.history.append(HistoryEntry("user", answer, simulated=user.simulated))
    transcript.user_interventions += 1
    observer.on_user(answer, user.simulated)
    return True


async def run_tool_calls(transcript: Transcript, tool_uses: list[dict], hub: McpHub,
                         observer: ConversationObserver) -> list[dict]:
    """Runs a turn's tool calls in order and answers all of them in one user message."""
    results, summaries = [], []
    for block in tool_uses:
        outcome = await hub.call_tool(block["name"], block.get("input"))
        call = ToolCall(block["name"], block.get("input") if isinstance(block.get("input"), dict) else {},
                        outcome.output, outcome.is_error, outcome.duration_ms, outcome.server,
                        transcript.model_calls, block["id"])
        transcript.tool_calls.append(call)
        observer.on_tool_call(call)
        results.append({"type": "tool_result", "tool_use_id": block["id"],
                        "content": outcome.output or "(no output)", "is_error": outcome.is_error})
        summaries.append(f"{call.name}: {outcome.output}")
    transcript.history.append(HistoryEntry("tool", "\n\n".join(summaries)))
    return results


# ============================================================================ 9. running a suite
@dataclass
class SuiteRun:
    """What a CLI mode asks for: the cases, how often, where the tools and the model are."""
    cases: list[TestCase]
    iterations: int
    settings: RunSettings
    mode: str = "batch"             # batch | interactive
    input_type: str = "query"       # query | conversation | csv


async def run_cases(run: SuiteRun, model: ModelClient, hub: McpHub,
                    on_result: Callable[[Transcript], None] | None = None,
                    user_for: Callable[[TestCase], UserInput | None] = lambda case: None,
                    observer: ConversationObserver | None = None) -> list[Transcript]:
    """Every case times every iteration, at most `concurrency` at once; results in input order."""
    limit = asyncio.Semaphore(max(1, run.settings.concurrency))

    async def one(case: TestCase, iteration: int) -> Transcript:
        async with limit:
            transcript = await run_conversation(case, model, hub, run.settings, iteration, user_for(case), observer)
        if on_result:
            on_result(transcript)
        return transcript

    jobs = [one(case, i) for case in run.cases for i in range(1, run.iterations + 1)]
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# ============================================================================ 10. reports
def transcript_to_result(transcript: Transcript) -> dict:
    """One entry of the results JSON: seed 002's fields first, then the additions."""
    t = transcript
    tool_params: dict[str, Any] = {}
    tool_results: dict[str, Any] = {}
    for call in t.tool_calls:  # seed 002's dicts keep the last call per tool; `tool_calls` keeps all
        tool_params[call.name] = call.input
        tool_results[call.name] = call.output
    return {
        "iteration": t.iteration,
        "test_name": t.case.name,
        "query": t.case.prompt,
        "agent_reasoning": t.final_text,
        "tools_called": t.tools_called,
        "tool_params": tool_params,
        "tool_results": tool_results,
        "conversation_turns": len(t.history),
        "user_interventions": t.user_interventions,
        "ended_by": t.ended_by,
        "conversation_history": [history_entry_dict(h) for h in t.history],
        "latency_ms": t.latency_ms,
        "token_count": t.usage.total,
        "error": t.error,
        "tool_calls": [asdict(c) for c in t.tool_calls],
        "usage": asdict(t.usage),
        "stop_reason": t.stop_reason,
        "truncated": t.truncated,
        "model_calls": t.model_calls,
        "model": t.model,
        "cost_usd": round(t.cost_usd, 6),
    }


def history_entry_dict(entry: HistoryEntry) -> dict:
    out = {"role": entry.role, "content": entry.content, "has_tools": entry.has_tools}
    if entry.simulated:
        out["simulated"] = True
    return out


def build_results_document(run: SuiteRun, results: list[dict], extra: dict | None = None) -> dict:
    metadata = {
        "total_results": len(results),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": run.settings.model,
        "mode": run.mode,
        "iterations": run.iterations,
        "input_type": run.input_type,
        "schema_version": C.SCHEMA_VERSION,
    }
    document = {"schema_version": C.SCHEMA_VERSION, "metadata": metadata, "results": results}
    document.update(extra or {})
    return document


def write_json_atomic(path: str | Path, document: Any) -> None:
    """Writes next to the target and renames, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def print_run_summary(console: Console, transcripts: list[Transcript]) -> None:
    table = Table(title="Evaluation results", show_lines=False)
    for column in ("case", "iter", "tools called", "turns", "tokens", "cost $", "latency", "ended by"):
        table.add_column(column, overflow="fold")
    for t in transcripts:
        ended = f"[red]error[/red]: {t.error}" if t.error else t.ended_by
        table.add_row(t.case.name, str(t.iteration), ", ".join(t.tools_called) or "-", str(len(t.history)),
                      f"{t.usage.total:,}", f"{t.cost_usd:.4f}", f"{t.latency_ms / 1000:.1f}s", ended)
    console.print(table)
    last = next((t for t in transcripts if t.final_text), None)
    if last:
        console.print(f"[bold]Final answer[/bold] ({last.case.name}, iteration {last.iteration}):")
        console.print(last.final_text, markup=False, highlight=False)


# ============================================================================ 11. CLI
def fail_input(message: str) -> "click.exceptions.Exit":
    click.echo(f"error: {message}", err=True)
    return click.exceptions.Exit(2)


def require_api_key() -> None:
    if not api_key_from_env():
        raise InputError("ANTHROPIC_API_KEY is not set",
                         hint="export ANTHROPIC_API_KEY=sk-ant-... (create a key at https://console.anthropic.com)")


def build_settings(opts: dict) -> RunSettings:
    if opts["max_turns"] < 1 or opts["concurrency"] < 1 or opts["max_tokens"] < 1:
        raise InputError("--max-turns, --concurrency and --max-tokens must be at least 1")
    return RunSettings(model=opts["model"], system_prompt=load_system_prompt(opts["prompt"]),
                       max_tokens=opts["max_tokens"], temperature=opts["temperature"],
                       max_turns=opts["max_turns"], concurrency=opts["concurrency"])


def query_cases(query: str) -> list[TestCase]:
    if not query.strip():
        raise InputError("the query is empty", hint='give -q "what to ask Claude"')
    return [TestCase(name="query", prompt=query)]


async def evaluate(run: SuiteRun, servers: list[ServerSpec], opts: dict, console: Console) -> list[Transcript]:
    """Opens the servers and the model, runs every case, closes everything again."""
    model = AnthropicModel(base_url=opts["base_url"], max_retries=opts["max_retries"],
                           timeout=opts["request_timeout"])
    try:
        async with McpHub(servers, opts["tool_timeout"], opts["max_result_chars"]) as hub:
            for notice in hub.notices:
                console.print(f"[yellow]note:[/yellow] {notice}")
            return await run_cases(run, model, hub)
    finally:
        await model.close()


def tool_eval_mode(opts: dict) -> int:
    """-q / -i: run a query against the servers, write or print the results."""
    console = Console(stderr=opts["json_out"])
    settings = build_settings(opts)
    if opts["iterations"] < 1:
        raise InputError("--iterations must be at least 1")
    cases = query_cases(opts["query"])
    require_api_key()
    servers = resolve_servers(opts["server"], opts["server_env"], opts["mcp_config"], opts["server_module"])
    run = SuiteRun(cases, opts["iterations"], settings)
    transcripts = asyncio.run(evaluate(run, servers, opts, console))
    document = build_results_document(run, [transcript_to_result(t) for t in transcripts])
    if opts["output"]:
        write_json_atomic(opts["output"], document)
        console.print(f"wrote {len(transcripts)} result(s) to {opts['output']}")
    if opts["json_out"]:
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    elif not opts["output"]:
        print_run_summary(console, transcripts)
    return 1 if any(t.error for t in transcripts) else 0


def options(*decorators: Callable) -> Callable:
    def apply(function: Callable) -> Callable:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function
    return apply


SERVER_OPTIONS = options(
    click.option("--server", multiple=True, metavar='"CMD ARGS"', help="A stdio MCP server command (repeatable)."),
    click.option("--server-env", multiple=True, metavar="KEY[=VALUE]",
                 help="Environment variable for --server processes: KEY passes ours, KEY=VALUE sets it."),
    click.option("--mcp-config", type=click.Path(), help="A Claude-style mcpServers JSON file."),
    click.option("--server-module", multiple=True, metavar="PATH.py[:ATTR]",
                 help="Import a Python MCP server object and talk to it in-process (repeatable)."),
    click.option("--tool-timeout", type=float, default=C.DEFAULT_TOOL_TIMEOUT, show_default=True,
                 help="Seconds one tool call may take."),
    click.option("--max-result-chars", type=int, default=C.DEFAULT_MAX_RESULT_CHARS, show_default=True,
                 help="Tool results longer than this are cut (0: no limit)."),
)

MODEL_OPTIONS = options(
    click.option("--model", default=C.DEFAULT_MODEL, show_default=True, help="Model under test."),
    click.option("--prompt", default=prompts.DEFAULT_SYSTEM_PROMPT, show_default=True,
                 help="System prompt: a name from prompts.py or a file path."),
    click.option("--max-turns", type=int, default=C.DEFAULT_MAX_TURNS, show_default=True,
                 help="Model calls per conversation."),
    click.option("--max-tokens", type=int, default=C.DEFAULT_MAX_TOKENS, show_default=True),
    click.option("--temperature", type=float, default=C.DEFAULT_TEMPERATURE),
    click.option("--base-url", help="Anthropic-compatible API base URL (default: $ANTHROPIC_BASE_URL)."),
    click.option("--max-retries", type=int, default=C.DEFAULT_MAX_RETRIES, show_default=True,
                 help="Retries of a failed model call (429, 5xx, overload, connection errors)."),
    click.option("--request-timeout", type=float, default=C.DEFAULT_REQUEST_TIMEOUT, show_default=True,
                 help="Seconds one model call may take."),
)

RUN_OPTIONS = options(
    click.option("-q", "--query", help="One query to evaluate."),
    click.option("-i", "--iterations", type=int, default=C.DEFAULT_ITERATIONS, show_default=True,
                 help="Run every case this many times."),
    click.option("--concurrency", type=int, default=C.DEFAULT_CONCURRENCY, show_default=True,
                 help="Conversations run at once."),
    click.option("-o", "--output", type=click.Path(), help="Write the results JSON here."),
    click.option("--json", "json_out", is_flag=True, help="Print the results JSON to stdout."),
)


def run_mode(opts: dict) -> int:
    """Picks the one mode the options ask for and runs it; returns the exit code."""
    if opts.get("query") is not None or opts.get("conversation"):
        return tool_eval_mode(opts)
    raise InputError("nothing to evaluate", hint='give -q "a query" (see --help for the other modes)')


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@RUN_OPTIONS
@SERVER_OPTIONS
@MODEL_OPTIONS
def main(**opts: Any) -> None:
    """Evaluate how Claude uses the tools of your MCP servers.

    \b
    Examples:
      python evaluator.py -q "Tell me about profiles"
      python evaluator.py -q "List my warehouse tables" -i 5 -o results.json
      python evaluator.py --server "python my_server.py" -q "..."
      python evaluator.py --mcp-config .mcp.json -q "..."
    """
    try:
        code = run_mode(opts)
    except InputError as exc:
        raise fail_input(str(exc)) from None
    except (ServerError, FatalApiError) as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(2) from None
    raise click.exceptions.Exit(code)


if __name__ == "__main__":
    main()
