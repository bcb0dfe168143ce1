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
import difflib
import functools
import hashlib
import importlib
import importlib.util
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import click
import yaml
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
        text = f"{where}{self.message}" + (f" ({self.hint})" if self.hint else "")
        # One line, whatever the input quoted: line breaks and control characters are escaped.
        return CONTROL_CHARS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


CONTROL_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


class ServerError(EvalError):
    """An MCP server failed to start or died; names the server and quotes its stderr tail."""


class FatalApiError(EvalError):
    """A model API answer that is wrong for every case (a bad key): stops the whole run."""


# ============================================================================ 2. data types
@dataclass(slots=True)
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


@dataclass(slots=True)
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


@dataclass(slots=True)
class HistoryEntry:
    """One entry of seed 002's `conversation_history`."""
    role: str                    # user | assistant | tool
    content: str
    has_tools: bool = False
    simulated: bool = False


@dataclass(slots=True)
class PriorMessage:
    """A message of a conversation that happened before the evaluation starts (`-c FILE`)."""
    role: str                    # user | assistant
    content: str
    line: int = 0


@dataclass(slots=True)
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


@dataclass(slots=True)
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
    simulated_user_usage: Usage = field(default_factory=Usage)   # the model playing the user
    simulated_user_model: str = ""

    @property
    def cost_usd(self) -> float:
        return cost_usd(self.usage, self.model) + (
            cost_usd(self.simulated_user_usage, self.simulated_user_model) if self.simulated_user_model else 0.0)

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


@dataclass
class SkillInfo:
    """One Agent Skill: its SKILL.md, validated frontmatter and body."""
    name: str
    description: str
    path: Path                   # the SKILL.md
    body: str = ""
    frontmatter: dict = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent


@dataclass
class SkillTest:
    """One markdown test definition (skillmark's format) or a skill-creator eval set."""
    name: str
    type: str                    # knowledge | task | security | trigger
    source: str = ""
    line: int = 1
    prompt: str = ""
    concepts: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    forbidden_patterns: list[str] = field(default_factory=list)
    expected_refusal: list[str] = field(default_factory=list)
    positive_triggers: list[str] = field(default_factory=list)
    negative_triggers: list[str] = field(default_factory=list)
    timeout: float = C.DEFAULT_TEST_TIMEOUT
    category: str | None = None
    severity: str | None = None
    runs: int | None = None
    skill: str | None = None     # the skill a trigger test is about (several --skill)
    simulated_user: str | None = None  # a goal: a simulated user answers Claude (tool-use runs)


@dataclass
class ClaudeRun:
    """One `claude -p` run of one query: what the stream-json events say happened."""
    query: str
    run: int
    activated_skills: list[str] = field(default_factory=list)   # every skill that fired, in order
    first_tool: str | None = None
    tool_count: int = 0
    tools: list[str] = field(default_factory=list)
    skills_loaded: list[str] | None = None   # from the init event; None when it did not say
    answer: str = ""
    error: str | None = None
    timed_out: bool = False
    exit_code: int | None = None
    stderr_tail: str = ""
    result_subtype: str | None = None
    is_error: bool | None = None
    num_turns: int | None = None
    duration_ms: float | None = None
    total_cost_usd: float | None = None
    usage: dict = field(default_factory=dict)
    api_retries: int = 0
    latency_ms: float = 0.0
    outside_writes: list[str] = field(default_factory=list)

    def fired(self, skill: str) -> bool:
        return skill in self.activated_skills

    @property
    def counted(self) -> bool:
        """Whether the run says anything about activation. An observed activation counts even if
        the run failed later; a run that failed without one proves nothing (it is not a miss)."""
        return self.error is None or bool(self.activated_skills)


@dataclass
class TriggerQueryResult:
    """One query's verdict for one skill, over all its runs."""
    query: str
    skill: str
    expected: str                # activate | ignore
    runs: int = 0                # runs that counted (errored runs excluded)
    activations: int = 0
    errors: int = 0
    activation_rate: float = 0.0
    actual: str = "ignored"      # activated | ignored | error
    correct: bool = False
    tool_count: float = 0.0      # mean tools used per counted run
    fired: dict[str, int] = field(default_factory=dict)  # skill name -> runs it fired in
    routing: bool = False        # a positive of another skill, counted as a negative here
    source: str = ""


@dataclass
class TriggerScore:
    """Seed 001's trigger metrics for one skill, plus precision/recall/F1 and errored runs."""
    skill: str
    trigger_rate: float = 0.0            # % positive queries activated
    false_positive_rate: float = 0.0     # % negative queries activated
    trigger_score: float = 0.0           # trigger_rate x (1 - false_positive_rate / 100)
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    positives: int = 0
    positives_activated: int = 0
    negatives: int = 0
    negatives_activated: int = 0
    errored_queries: int = 0             # queries with no counted run at all
    errored_runs: int = 0
    total_runs: int = 0
    threshold: float = C.DEFAULT_TRIGGER_THRESHOLD
    query_results: list[TriggerQueryResult] = field(default_factory=list)


@dataclass
class SkillTestResult:
    """A knowledge, task or security test's verdict over its runs."""
    test: SkillTest
    runs: list[ClaudeRun] = field(default_factory=list)
    run_scores: list[dict] = field(default_factory=list)   # per run: coverage, matched, missed, leaked, refused
    passed: bool = False
    error: str | None = None


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
        if not module.endswith(".py"):
            raise InputError(f"--server-module {target}: not a Python file", hint="give path/to/server.py[:attr]")
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
    raw = read_text_file(path, "MCP config")
    data = parse_json_text(raw, path)
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
        raise InputError(f"server {name!r} must be an object", path, line,
                         'e.g. "name": {"command": "python", "args": ["server.py"]}')
    kind = entry.get("type") or ("stdio" if "command" in entry else "http" if "url" in entry else None)
    where = f"server {name!r}"

    def expand_map(key: str) -> dict[str, str]:
        value = entry.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise InputError(f"{where}: {key!r} must be an object of strings", path, line,
                             'quote every value, e.g. {"PORT": "8080"}')
        return {k: expand_env_refs(v, f"{where} {key} {k}", path, line) for k, v in value.items()}

    if kind == "stdio":
        command, args = entry.get("command"), entry.get("args") or []
        if not isinstance(command, str) or not command.strip():
            raise InputError(f"{where}: stdio server needs a \"command\" string", path, line,
                             'e.g. "command": "python", "args": ["server.py"]')
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise InputError(f"{where}: \"args\" must be a list of strings", path, line,
                             'e.g. "args": ["server.py", "--port", "8080"]')
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise InputError(f"{where}: \"cwd\" must be a string (a folder path)", path, line)
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
        if not EXAMPLE_SERVER.is_file():  # installed without the repository's examples/
            raise InputError("no MCP server given", hint="name one with --server, --mcp-config or --server-module")
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
        value = read_text_file(path, "prompt file").strip()
        if not value:
            raise InputError("prompt file is empty", path, 1)
        return value
    raise InputError(f"--prompt {choice!r} is neither a prompt name nor a file",
                     hint="choose one of " + ", ".join(prompts.SYSTEM_PROMPTS) + " or give a path")


# ============================================================================ 3a. loaders: CSV suites
CSV_COLUMNS = ("test_name", "user_prompt", "prompt", "expected_tools", "forbidden_tools", "description",
               "expected_args", "args_match", "order", "max_tool_calls", "min_tool_calls", "expect_no_tools", "tags")
ARGS_MATCH_MODES = ("partial", "exact", "ignore")
ORDER_MODES = ("any", "strict", "in_order", "subset", "superset")
TRUE_WORDS, FALSE_WORDS = ("true", "yes", "1", "y"), ("false", "no", "0", "n", "")


class InputProblems(InputError):
    """Several problems in one input file, each its own line, all reported at once."""

    def __init__(self, problems: list[InputError]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def read_text_file(path: str | Path, what: str) -> str:
    """A UTF-8 text file (a BOM is fine); bad bytes are reported with their line."""
    path = Path(path)
    limit = C.MAX_INPUT_FILE_BYTES
    try:
        with open(path, "rb") as handle:  # a pipe works too; at most limit + 1 bytes are read
            raw = handle.read(limit + 1)
    except OSError as exc:
        hint = "give a file, not a folder" if isinstance(exc, IsADirectoryError) else None
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", path, None, hint) from None
    if len(raw) > limit:
        raise InputError(f"{what} is larger than {limit // (1024 * 1024)} MiB", path, None,
                         "split it into smaller files")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{what} is not valid UTF-8 (byte 0x{raw[exc.start]:02x})", path, line,
                         "save the file as UTF-8") from None
    if "\0" in text:  # a binary file; a NUL would also break the command lines built from it
        raise InputError(f"{what} contains a NUL byte (is it a binary file?)", path,
                         text.count("\n", 0, text.index("\0")) + 1, "save it as plain UTF-8 text")
    return text


def parse_json_text(raw: str, path: Path) -> Any:
    """json.loads whose every failure is an InputError: bad syntax (with its line), nesting too
    deep for the parser, a number too long to convert."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path, exc.lineno, "fix the JSON syntax") from None
    except (ValueError, RecursionError) as exc:
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise InputError(f"invalid JSON: {problem}", path, 1, "fix the JSON") from None


def split_list(value: str) -> list[str]:
    return [item.strip() for item in re.split(r"[,;]", value or "") if item.strip()]


def csv_records(text: str, path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and every record with the line it starts on (quoted fields may span lines)."""
    import csv
    import io

    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records, start = [], 1
    try:
        for row in reader:
            records.append((start, row))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path, reader.line_num or start,
                         "quote fields that contain commas, quotes or newlines") from None
    records = [(line, row) for line, row in records if any(cell.strip() for cell in row)]
    if not records:
        raise InputError("the CSV file is empty", path, 1, "add a header row: test_name,user_prompt,...")
    (_, header), body = records[0], records[1:]
    return [h.strip().lower() for h in header], body


def load_csv_suite(path: str | Path) -> list[TestCase]:
    """A CSV regression suite (seed 002's columns plus the optional ones); every problem of the
    file is reported with its line before anything runs."""
    path = Path(path)
    header, body = csv_records(read_text_file(path, "CSV suite"), path)
    problems: list[InputError] = []
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown:
        problems.append(InputError(f"unknown column(s): {', '.join(unknown)}", path, 1,
                                   "known columns: " + ", ".join(CSV_COLUMNS)))
    if "test_name" not in header or not {"user_prompt", "prompt"} & set(header):
        problems.append(InputError("the header needs test_name and user_prompt (or prompt) columns", path, 1,
                                   "first row: test_name,user_prompt,expected_tools,forbidden_tools,description"))
    if problems:
        raise InputProblems(problems)
    cases: list[TestCase] = []
    seen: dict[str, int] = {}
    for line, row in body:
        if len(row) != len(header):
            problems.append(InputError(f"row has {len(row)} fields, the header has {len(header)}", path, line,
                                       "quote fields that contain commas"))
            continue
        try:
            case = csv_case(dict(zip(header, row)), path, line)
        except InputError as exc:
            problems.append(exc)
            continue
        if case.name in seen:
            problems.append(InputError(f"duplicate test_name {case.name!r} (first on line {seen[case.name]})",
                                       path, line, "give every test a unique name"))
            continue
        seen[case.name] = line
        cases.append(case)
    if problems:
        raise InputProblems(problems)
    if not cases:
        raise InputError("the CSV suite has a header but no test rows", path, 2,
                         "add one row per test below the header")
    return cases


def csv_case(row: dict[str, str], path: Path, line: int) -> TestCase:
    def fail(message: str, hint: str | None = None) -> InputError:
        return InputError(message, path, line, hint)

    name = row.get("test_name", "").strip()
    prompt = (row.get("user_prompt") or row.get("prompt") or "").strip()
    if not name:
        raise fail("empty test_name", "give every row a name")
    if not prompt:
        raise fail(f"test {name!r} has an empty prompt", "write the user's request in user_prompt")
    expected_args: dict[str, dict] = {}
    if (row.get("expected_args") or "").strip():
        try:
            expected_args = json.loads(row["expected_args"])
        except (ValueError, RecursionError) as exc:  # also nesting too deep, a number too long
            problem = getattr(exc, "msg", None) or ("nested too deeply" if isinstance(exc, RecursionError)
                                                     else str(exc).split(";")[0])
            raise fail(f"expected_args is not valid JSON: {problem}",
                       'write it as {"tool_name": {"param": "value"}}') from None
        if not isinstance(expected_args, dict) or not all(isinstance(v, dict) for v in expected_args.values()):
            raise fail("expected_args must be a JSON object of objects", '{"tool_name": {"param": "value"}}')
    args_match = (row.get("args_match") or "partial").strip().lower()
    order = (row.get("order") or "any").strip().lower()
    if args_match not in ARGS_MATCH_MODES:
        raise fail(f"args_match {args_match!r} is not one of {', '.join(ARGS_MATCH_MODES)}",
                   "leave it empty for partial")
    if order not in ORDER_MODES:
        raise fail(f"order {order!r} is not one of {', '.join(ORDER_MODES)}", "leave it empty for any")
    flag = (row.get("expect_no_tools") or "").strip().lower()
    if flag not in TRUE_WORDS + FALSE_WORDS:
        raise fail(f"expect_no_tools {flag!r} is not true or false", "write true or false")
    case = TestCase(name=name, prompt=prompt, description=(row.get("description") or "").strip(),
                    expected_tools=split_list(row.get("expected_tools", "")),
                    forbidden_tools=split_list(row.get("forbidden_tools", "")),
                    expected_args=expected_args, args_match=args_match, order=order,
                    max_tool_calls=csv_count(row, "max_tool_calls", fail),
                    min_tool_calls=csv_count(row, "min_tool_calls", fail),
                    expect_no_tools=flag in TRUE_WORDS, tags=split_list(row.get("tags", "")),
                    source=str(path), line=line)
    if case.expect_no_tools and case.expected_tools:
        raise fail(f"test {name!r} sets expect_no_tools and also lists expected_tools", "keep one of them")
    clash = set(case.expected_tools) & set(case.forbidden_tools)
    if clash:
        raise fail(f"test {name!r} both expects and forbids {', '.join(sorted(clash))}")
    return case


def csv_count(row: dict[str, str], column: str, fail: Callable[..., InputError]) -> int | None:
    value = (row.get(column) or "").strip()
    if not value:
        return None
    if not (value.isascii() and value.isdigit()):  # "²".isdigit() is True, int("²") fails
        raise fail(f"{column} {value!r} is not a whole number", "write digits such as 3, or leave it empty")
    return int(value)


def check_case_tools(cases: Sequence[TestCase], available: Sequence[str]) -> None:
    """Every tool a case names must exist on the connected servers: typos cost no money."""
    import difflib

    problems = []
    for case in cases:
        named = [*case.expected_tools, *case.forbidden_tools, *case.expected_args]
        for tool in dict.fromkeys(named):
            if tool not in available:
                close = difflib.get_close_matches(tool, available, n=1)
                hint = f"did you mean {close[0]!r}?" if close else "available: " + ", ".join(available)
                problems.append(InputError(f"test {case.name!r} names tool {tool!r}, which no connected server "
                                           f"offers", case.source or None, case.line or None, hint))
    if problems:
        raise InputProblems(problems)


def filter_by_tags(cases: list[TestCase], tags: Sequence[str]) -> list[TestCase]:
    if not tags:
        return cases
    wanted = {t.lower() for t in tags}
    chosen = [case for case in cases if wanted & {t.lower() for t in case.tags}]
    if not chosen:
        raise InputError(f"no test has the tag(s) {', '.join(tags)}")
    return chosen


# ============================================================================ 3b. loaders: skills and markdown tests
SKILL_NAME_RULE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
TEST_TYPES = ("knowledge", "task", "security", "trigger")
TRIGGER_CONCEPTS = ["activates-on-relevant", "ignores-irrelevant"]
# skillmark's section titles, and what each fills; any other level-1 heading ends a section.
TEST_SECTIONS = {
    "prompt": "prompt", "question": "prompt",
    "expected": "expected", "criteria": "expected",
    "forbidden patterns": "forbidden_patterns", "expected refusal": "expected_refusal",
    "positive triggers": "positive_triggers", "negative triggers": "negative_triggers",
    "simulated user": "simulated_user",
}
LIST_ITEM = re.compile(r"^\s*(?:[-*+]\s+\[[ xX]\]\s*|[-*+]\s+|\d+[.)]\s+)(.*)$")
QUOTES = "\"'`“”‘’"


def split_frontmatter(raw: str, path: Path, required: bool = True) -> tuple[dict, str, int]:
    """YAML frontmatter between `---` lines -> (mapping, body, line number where the body starts)."""
    lines = raw.splitlines()
    if not lines or lines[0].strip() != "---":
        if required:
            raise InputError("no YAML frontmatter (the file must start with a '---' line)", path, 1,
                             "add ---, name: ..., description: ..., --- at the top")
        return {}, raw, 1
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise InputError("YAML frontmatter is not closed", path, 1, "end it with a '---' line")
    data = load_frontmatter_yaml("\n".join(lines[1:end]), path, 2)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"YAML frontmatter must be a mapping of keys to values, not a {type(data).__name__}",
                         path, 2, "write it as key: value lines")
    return data, "\n".join(lines[end + 1:]), end + 2


def load_frontmatter_yaml(text: str, path: Path, first_line: int) -> Any:
    """Plain YAML only, through yaml.safe_load: no tags that build objects (`!!python/...` is
    refused), no aliases (`*name`, so an alias bomb cannot exhaust memory), bounded size and
    nesting, checked on the event stream before anything is composed."""
    if len(text.encode("utf-8")) > C.MAX_FRONTMATTER_BYTES:
        raise InputError(f"YAML frontmatter is larger than {C.MAX_FRONTMATTER_BYTES // 1024} KiB", path,
                         first_line, "keep the frontmatter short; long text belongs in the body")

    def where(mark: Any) -> int:
        return mark.line + first_line if mark is not None else first_line

    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise InputError("YAML aliases (*name) are not allowed in frontmatter", path,
                                 where(event.start_mark), "write the value out instead of referring to an &anchor")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > C.MAX_YAML_DEPTH:
                    raise InputError(f"YAML frontmatter is nested more than {C.MAX_YAML_DEPTH} levels deep", path,
                                     where(event.start_mark), "flatten it")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in str(problem):
            raise InputError(f"YAML tag not allowed: {problem}", path, where(mark),
                             "remove the !!tag; only plain YAML values are read") from None
        raise InputError(f"invalid YAML frontmatter: {problem}", path, where(mark),
                         "fix the YAML syntax (quote values that contain ': ')") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # e.g. a date like 2024-13-45
        raise InputError(f"invalid YAML frontmatter: {exc}", path, first_line,
                         "quote values that are meant as plain text") from None


def frontmatter_line(raw: str, key: str) -> int:
    match = re.search(rf"^{re.escape(key)}\s*:", raw, re.MULTILINE)
    return raw.count("\n", 0, match.start()) + 1 if match else 1


def load_skill(path: str | Path) -> SkillInfo:
    """A SKILL.md (or its folder), validated against the Agent Skills rules before anything runs.
    Every problem found is reported, one line each."""
    path = Path(path)
    if path.is_dir():
        path = path / "SKILL.md"
    raw = read_text_file(path, "SKILL.md")
    data, body, _ = split_frontmatter(raw, path)
    problems = skill_frontmatter_problems(data, raw, path)
    if problems:
        raise InputProblems(problems)
    return SkillInfo(name=data["name"], description=str(data["description"]).strip(), path=path.resolve(),
                     body=body.strip(), frontmatter=data)


def skill_frontmatter_problems(data: dict, raw: str, path: Path) -> list[InputError]:
    problems = []

    def problem(key: str, message: str, hint: str | None = None) -> None:
        problems.append(InputError(message, path, frontmatter_line(raw, key), hint))

    name, description = data.get("name"), data.get("description")
    folder = path.resolve().parent.name
    if not isinstance(name, str) or not name:
        problem("name", "frontmatter has no 'name'", f"add name: {folder}")
    else:
        if len(name) > 64:
            problem("name", f"name {name!r} is longer than 64 characters")
        if not SKILL_NAME_RULE.fullmatch(name):
            problem("name", f"name {name!r} must be lowercase letters, digits and single hyphens, "
                            "not starting or ending with a hyphen", "e.g. name: my-skill-name")
        if name != folder:
            problem("name", f"name {name!r} differs from its folder name {folder!r}",
                    "rename the folder or the skill so they are equal")
    if not isinstance(description, str) or not description.strip():
        problem("description", "frontmatter has no 'description'",
                "say what the skill does and when to use it, in at most 1024 characters")
    else:
        if len(description) > 1024:
            problem("description", f"description is {len(description)} characters; the limit is 1024",
                    "shorten it")
        if "<" in description or ">" in description:
            problem("description", "description contains '<' or '>', which skill validators reject",
                    "reword it without angle brackets")
    compatibility = data.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > 500):
        problem("compatibility", "compatibility must be a string of at most 500 characters")
    return problems


def markdown_sections(body: str, first_line: int) -> dict[str, tuple[str, int]]:
    """skillmark's sections -> (text, line of the heading). Headings that are not section titles
    (a `## Context` inside a prompt) stay part of the text, unless they are level 1."""
    sections: dict[str, tuple[list[str], int]] = {}
    current: str | None = None
    for offset, line in enumerate(body.splitlines()):
        heading = re.match(r"^(#+)\s+(.+?)\s*#*\s*$", line)
        title = heading.group(2).strip().rstrip(":").strip().lower() if heading else ""
        if heading and title in TEST_SECTIONS:
            current = TEST_SECTIONS[title]
            sections.setdefault(current, ([], first_line + offset))
            continue
        if heading and len(heading.group(1)) == 1:
            current = None
            continue
        if current:
            sections[current][0].append(line)
    return {key: ("\n".join(lines).strip(), line) for key, (lines, line) in sections.items()}


def list_items(text: str) -> list[str]:
    """Checkbox, bullet or numbered items; when a section has none, every plain line is an item.
    Quotes around an item are stripped."""
    lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith(("<!--", "```"))]
    items = [m.group(1) for m in map(LIST_ITEM.match, lines) if m]
    if not items:
        items = lines
    cleaned = []
    for item in items:
        item = item.strip()
        if len(item) >= 2 and item[0] in QUOTES and item[-1] in QUOTES:
            item = item[1:-1].strip()
        if item and item not in cleaned:
            cleaned.append(item)
    return cleaned


def string_list(value: Any, key: str, path: Path, raw: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v).strip() for v in value if str(v).strip()]
    raise InputError(f"'{key}' must be a list of strings", path, frontmatter_line(raw, key),
                     f"e.g. {key}: [first, second]")


def load_markdown_test(path: str | Path, default_type: str | None = None) -> SkillTest:
    """One skillmark-format test file; malformed files raise InputError naming file:line."""
    path = Path(path)
    raw = read_text_file(path, "test file")
    data, body, body_line = split_frontmatter(raw, path, required=False)
    kind = data.get("type", default_type or "knowledge")
    if kind not in TEST_TYPES:
        raise InputError(f"unknown test type {kind!r}", path, frontmatter_line(raw, "type"),
                         "use one of " + ", ".join(TEST_TYPES))
    if default_type == "trigger" and kind != "trigger":
        raise InputError(f"--trigger wants a trigger test, this one is type {kind!r}", path,
                         frontmatter_line(raw, "type"), "pass it with --tests instead")
    sections = markdown_sections(body, body_line)
    text_of_section = lambda key: sections.get(key, ("", body_line))[0]  # noqa: E731
    test = SkillTest(name=str(data.get("name") or path.stem), type=kind, source=str(path), line=1,
                     prompt=text_of_section("prompt"),
                     expected=list_items(text_of_section("expected")),
                     forbidden_patterns=list_items(text_of_section("forbidden_patterns")),
                     expected_refusal=list_items(text_of_section("expected_refusal")),
                     positive_triggers=list_items(text_of_section("positive_triggers")),
                     negative_triggers=list_items(text_of_section("negative_triggers")),
                     category=data.get("category"), severity=data.get("severity"),
                     skill=data.get("skill"))
    test.concepts = string_list(data.get("concepts"), "concepts", path, raw)
    test.simulated_user = text_of_section("simulated_user") or data.get("simulated_user") or None
    for key in ("skill", "category", "severity", "simulated_user"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise InputError(f"'{key}' must be a text value, not a {type(data[key]).__name__}", path,
                             frontmatter_line(raw, key), f"write it as {key}: some-text")
    if kind == "trigger" and not test.concepts:
        test.concepts = list(TRIGGER_CONCEPTS)
    test.timeout = positive_number(data.get("timeout"), "timeout", path, raw,
                                   C.DEFAULT_TRIGGER_TIMEOUT if kind == "trigger" else C.DEFAULT_TEST_TIMEOUT)
    if data.get("runs") is not None:
        test.runs = int(positive_number(data["runs"], "runs", path, raw, 1, integer=True))
    if kind == "trigger" and not test.positive_triggers:
        line = sections.get("positive_triggers", ("", frontmatter_line(raw, "type")))[1]
        raise InputError("trigger test has no positive queries", path, line,
                         "list the queries that should activate the skill under '# Positive Triggers'")
    if kind != "trigger" and not test.prompt:
        line = sections["prompt"][1] if "prompt" in sections else body_line
        raise InputError(f"{kind} test has an empty prompt", path, line,
                         "write the prompt under a '# Prompt' (or '# Question') heading")
    return test


def positive_number(value: Any, key: str, path: Path, raw: str, default: float,
                    integer: bool = False) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf") or (
            integer and int(value) != value):
        raise InputError(f"'{key}' must be a positive {'whole ' if integer else ''}number, got {value!r}",
                         path, frontmatter_line(raw, key))
    return float(value)


def load_skill_creator_evals(path: str | Path) -> SkillTest:
    """skill-creator's trigger eval set: `[{"query": ..., "should_trigger": true|false}, ...]`."""
    path = Path(path)
    raw = read_text_file(path, "eval set")
    data = parse_json_text(raw, path)
    if not isinstance(data, list):
        raise InputError('an eval set is a JSON list of {"query": ..., "should_trigger": true|false}', path, 1)
    test = SkillTest(name=path.stem, type="trigger", source=str(path), concepts=list(TRIGGER_CONCEPTS),
                     timeout=C.DEFAULT_TRIGGER_TIMEOUT)
    for index, item in enumerate(data):
        query = item.get("query") if isinstance(item, dict) else None
        should = item.get("should_trigger") if isinstance(item, dict) else None
        if not isinstance(query, str) or not query.strip() or not isinstance(should, bool):
            line = line_of(raw, json.dumps(query)) if isinstance(query, str) else None
            raise InputError(f"entry {index + 1} needs a non-empty \"query\" string and a true/false "
                             "\"should_trigger\"", path, line or 1)
        (test.positive_triggers if should else test.negative_triggers).append(query.strip())
    if not test.positive_triggers:
        raise InputError("eval set has no query with \"should_trigger\": true", path, 1)
    return test


def load_markdown_tests(target: str | Path, default_type: str | None = None) -> list[SkillTest]:
    """A test file, a skill-creator eval JSON, or a folder of `.md` tests (README.md skipped)."""
    target = Path(target)
    if target.is_dir():
        files = sorted(p for p in target.rglob("*.md") if p.is_file() and p.name.lower() != "readme.md")
        if not files:
            raise InputError("no .md test files in this folder", target)
        return [load_markdown_test(p, default_type) for p in files]
    if target.suffix.lower() == ".json":
        return [load_skill_creator_evals(target)]
    if not target.exists():
        raise InputError("test file not found", target)
    return [load_markdown_test(target, default_type)]


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
    """Headed blocks in file order; a header inside a fenced code block is content, and text
    before the first header (a title, notes) belongs to no message."""
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
            if turns:  # text before the first header is a title or notes, not a message
                body.append(line)
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
    raw = read_text_file(path, "conversation file")
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

    @functools.cached_property
    def validator(self) -> Any:
        """The jsonschema validator of the tool's arguments, built once for every call checked."""
        import jsonschema

        schema = self.input_schema
        return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


@dataclass
class ToolOutcome:
    output: str
    is_error: bool
    server: str | None
    duration_ms: float
    server_failed: bool = False   # the server died under the call: an error of the run, not of Claude


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
        if isinstance(self._error, (InputError, ServerError)):  # already says what went wrong
            error, self._error = self._error, None
            await self.close()
            raise error
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
        self._restarting: dict[str, asyncio.Lock] = {}

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

        def outcome(text: str, is_error: bool, server: str | None, server_failed: bool = False) -> ToolOutcome:
            return ToolOutcome(text, is_error, server, round((time.perf_counter() - start) * 1000, 2), server_failed)

        tool = self.tools.get(name)
        if tool is None:
            return outcome(f"Unknown tool: {name}. Available tools: {', '.join(self.tool_names())}", True, None)
        if not isinstance(arguments, dict):
            return outcome(f"Tool arguments must be a JSON object, got {type(arguments).__name__}", True,
                           tool.server)
        connection = self.connections.get(tool.server)
        if connection is None or connection.client is None:  # an earlier restart failed: try again
            connection = await self.restart(tool.server, connection)
            if connection.client is None:
                return outcome(connection.describe_failure("is not running and could not be restarted"),
                               True, tool.server, server_failed=True)
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
            if await self.is_alive(connection):
                return outcome(f"Tool call {reason}", True, tool.server)
            message = connection.describe_failure(f"died during the call ({reason})")
            await self.restart(tool.server, connection)  # the next cases get a fresh server
            return outcome(message, True, tool.server, server_failed=True)
        return outcome(tool_result_text(result, self.max_result_chars), bool(result.is_error), tool.server)

    @staticmethod
    async def is_alive(connection: ServerConnection) -> bool:
        try:
            # ping is gone from current protocol versions; a fresh tool listing proves the same
            await asyncio.wait_for(connection.client.list_tools(cache_mode="refresh"), 5)
            return True
        except Exception:
            return False

    async def restart(self, server: str, broken: ServerConnection | None) -> ServerConnection:
        """Replaces a dead server connection once, however many calls noticed it died."""
        lock = self._restarting.setdefault(server, asyncio.Lock())
        async with lock:
            current = self.connections.get(server)
            if current is not broken and current is not None:
                return current  # another call restarted it already
            if broken is not None:
                await broken.close()
            spec = next(s for s in self.specs if s.name == server)
            fresh = ServerConnection(spec, self.connect_timeout)
            try:
                await fresh.open()
            except ServerError as exc:
                self.notices.append(str(exc))
            self.connections[server] = fresh
            return fresh


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


class AdaptiveLimiter:
    """A concurrency cap on model calls that halves when the API answers 429 and grows back one
    step per run of successes: a burst of rate limits slows the suite instead of failing it."""

    GROW_AFTER = 8  # successes in a row before one more call may run at once

    def __init__(self, limit: int) -> None:
        self.ceiling = max(1, limit)
        self.limit = self.ceiling
        self.in_flight = 0
        self.paused_until = 0.0
        self._successes = 0
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._changed:
            while True:
                wait = self.paused_until - time.monotonic()
                if wait <= 0 and self.in_flight < self.limit:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), wait if wait > 0 else None)
                except asyncio.TimeoutError:
                    pass
            self.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    async def rate_limited_for(self, seconds: float) -> None:
        async with self._changed:
            self.limit = max(1, self.limit // 2)
            self._successes = 0
            self.paused_until = max(self.paused_until, time.monotonic() + min(seconds, 60.0))
            self._changed.notify_all()

    async def succeeded(self) -> None:
        if self.limit >= self.ceiling:
            return
        async with self._changed:
            self._successes += 1
            if self._successes >= self.GROW_AFTER:
                self.limit, self._successes = min(self.ceiling, self.limit + 1), 0
                self._changed.notify_all()


def retry_after_seconds(headers: Any) -> float:
    """The pause a rate-limited answer asks for: `retry-after-ms`, `retry-after`, or the
    `anthropic-ratelimit-*-reset` time; one second when it names none."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name)) * scale)
        except (TypeError, ValueError):
            pass
    for name in ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset"):
        value = headers.get(name)
        if value:
            try:
                reset = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return max(0.0, (reset - datetime.now(timezone.utc)).total_seconds())
            except ValueError:
                pass
    return 1.0


SPEND_LIMIT = re.compile(r"spend|credit|billing|quota|usage limit", re.IGNORECASE)


def api_traffic_middleware(limiter: AdaptiveLimiter) -> Callable:
    """SDK middleware, run once per HTTP attempt inside the SDK's own retry loop: it holds a slot
    of the adaptive limiter, feeds it what 429s say, and stops a spend-limit 429 from being
    retried (no retry can fix it, for any case)."""

    async def middleware(request: Any, call_next: Callable) -> Any:
        async with limiter:
            response = await call_next(request)
        if response.status_code == 429:
            body = (await response.http_response.aread()).decode("utf-8", "replace")
            if SPEND_LIMIT.search(body):
                raise FatalApiError(f"the Anthropic API refused on a spend or usage limit (429): "
                                    f"{cap_text(body, 300)}")
            await limiter.rate_limited_for(retry_after_seconds(response.headers))
        elif response.status_code < 400:
            remaining = response.headers.get("anthropic-ratelimit-requests-remaining")
            if remaining == "0":
                await limiter.rate_limited_for(retry_after_seconds(response.headers))
            else:
                await limiter.succeeded()
        return response
    return middleware


class AnthropicModel:
    """Claude through `anthropic.AsyncAnthropic`; the only place that touches the SDK."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = C.DEFAULT_MAX_RETRIES, timeout: float = C.DEFAULT_REQUEST_TIMEOUT,
                 stream: bool = False, concurrency: int = C.MAX_MODEL_CONCURRENCY) -> None:
        import anthropic

        self._anthropic = anthropic
        self.limiter = AdaptiveLimiter(concurrency)
        self.max_retries = max_retries
        # One client for the whole run: one connection pool, and the SDK's retries on every call.
        self.client = anthropic.AsyncAnthropic(api_key=api_key or api_key_from_env(),
                                               base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
                                               max_retries=max_retries, timeout=timeout,
                                               middleware=[api_traffic_middleware(self.limiter)])
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
                message = await self._stream_with_retries(params, on_text)
            else:
                message = await self.client.messages.create(**params)
        except self._anthropic.AuthenticationError as exc:
            raise FatalApiError(f"the Anthropic API rejected the API key (401): {api_error_message(exc)}; "
                                "check ANTHROPIC_API_KEY") from None
        return ModelReply([block_to_dict(b) for b in message.content], message.stop_reason,
                          Usage.from_api(message.usage), message.model)

    async def _stream_with_retries(self, params: dict, on_text: Callable[[str], None] | None) -> Any:
        """A stream that fails after HTTP 200 (an `overloaded_error` event mid-answer) is outside
        the SDK's retries; it is retried here, and the failed attempt's partial text is dropped."""
        for attempt in range(self.max_retries + 1):
            try:
                async with self.client.messages.stream(**params) as stream:
                    if on_text:
                        async for chunk in stream.text_stream:
                            on_text(chunk)
                    return await stream.get_final_message()
            except self._anthropic.APIStatusError as exc:
                in_stream = exc.status_code == 200
                kind = exc.body.get("error", {}).get("type") if isinstance(exc.body, dict) else None
                if not in_stream or kind not in RETRYABLE_STREAM_ERRORS or attempt == self.max_retries:
                    raise
                await asyncio.sleep(min(8.0, 0.5 * 2 ** attempt))
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.client.close()


RETRYABLE_STREAM_ERRORS = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")


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
    if transcript.error:
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
        if outcome.server_failed and not transcript.error:
            transcript.error = outcome.output  # the case cannot be judged on a dead server
        observer.on_tool_call(call)
        results.append({"type": "tool_result", "tool_use_id": block["id"],
                        "content": outcome.output or "(no output)", "is_error": outcome.is_error})
        summaries.append(f"{call.name}: {outcome.output}")
    transcript.history.append(HistoryEntry("tool", "\n\n".join(summaries)))
    return results


class StdinLines:
    """Lines from stdin, awaited through the event loop instead of a blocking read, so Ctrl-C
    (which cancels the running task) also interrupts a prompt that waits for the user."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.pending = b""               # bytes read past the end of the line handed out

    async def readline(self) -> str | None:
        """The next line without its newline; None at end of input (Ctrl-D on a terminal)."""
        while b"\n" not in self.pending:
            chunk = await self._read_chunk()
            if not chunk:
                break
            self.pending += chunk
        if not self.pending:
            return None
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    async def _read_chunk(self) -> bytes:
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        try:
            loop.add_reader(self.fd, lambda: readable.done() or readable.set_result(None))
        except (OSError, ValueError, NotImplementedError):
            return os.read(self.fd, 65536)  # a regular file cannot be polled, and never blocks
        try:
            await readable
        finally:
            loop.remove_reader(self.fd)
        return os.read(self.fd, 65536)


END_CONVERSATION_WORDS = ("end",)


class TerminalUser:
    """The person at the terminal. `end` or EOF (Ctrl-D) ends the conversation; an empty line
    asks again, so a stray Enter does not end it."""
    simulated = False

    def __init__(self, console: Console, lines: StdinLines | None = None) -> None:
        self.console = console
        self.lines = lines or StdinLines()

    async def reply(self, transcript: Transcript, assistant_text: str) -> str | None:
        while True:
            self.console.print("[bold green]You[/bold green] [dim](reply, or 'end' to finish)[/dim] › ", end="",
                               highlight=False)
            self.console.file.flush()
            line = await self.lines.readline()
            if line is None:
                self.console.print()
                return None
            if not os.isatty(self.lines.fd):  # piped replies are not echoed by a terminal
                self.console.print(line, markup=False, highlight=False)
            if line.strip().lower() in END_CONVERSATION_WORDS:
                return None
            if line.strip():
                return line.strip()


class SimulatedUser:
    """A second model plays the user: it is given the goal and the conversation so far, answers
    when Claude waits for the user, and says DONE when the goal is met. After `max_turns` of its
    messages it stops, and the conversation ends as `max_turns`."""
    simulated = True

    def __init__(self, goal: str, model: ModelClient, model_id: str = C.DEFAULT_USER_MODEL,
                 max_turns: int = C.DEFAULT_MAX_USER_TURNS, max_tokens: int = C.DEFAULT_USER_MAX_TOKENS) -> None:
        self.goal, self.model, self.model_id = goal, model, model_id
        self.max_turns, self.max_tokens = max_turns, max_tokens
        self.end_reason = "user_end"

    async def reply(self, transcript: Transcript, assistant_text: str) -> str | None:
        if transcript.user_interventions >= self.max_turns:
            self.end_reason = "max_turns"
            return None
        system = prompts.SIMULATED_USER_PROMPT.format(goal=self.goal, done=prompts.SIMULATED_USER_DONE)
        request = ModelRequest(self.model_id, system, [{"role": "user", "content": simulated_user_view(transcript)}],
                               [], self.max_tokens)
        answer = await self.model.complete(request)
        transcript.simulated_user_model = self.model_id  # its tokens count in the run's cost
        transcript.simulated_user_usage = transcript.simulated_user_usage + answer.usage
        return simulated_user_message(text_of(answer.content))


def simulated_user_view(transcript: Transcript) -> str:
    """The conversation as its user saw it: the messages, not the tool traffic."""
    messages = [f"<{entry.role}>\n{entry.content}\n</{entry.role}>" for entry in transcript.history
                if entry.role in ("user", "assistant") and entry.content]
    if not messages:
        return "The conversation has not started yet. Write the user's first message."
    return ("<conversation>\n" + "\n".join(messages) + "\n</conversation>\n\n"
            f"Write the user's next message, or only {prompts.SIMULATED_USER_DONE} if the goal has been met.")


def simulated_user_message(answer: str) -> str | None:
    """The simulated user's message, or None when it says it is done."""
    answer = re.sub(r"^\s*(<user>|user:)\s*", "", answer.strip(), flags=re.IGNORECASE)
    answer = re.sub(r"\s*</user>\s*$", "", answer)
    if not answer or re.search(rf"\b{prompts.SIMULATED_USER_DONE}\W*$", answer):
        return None
    return answer


# ============================================================================ 7. Claude CLI runner
CLAUDE_INSTALL_HINT = ("install it with `npm install` in the evaluator's folder (package.json) or "
                       "`npm install -g @anthropic-ai/claude-code`, or pass --claude-bin PATH")
# What a run may see of our environment: the API credentials and what the network needs.
CLAUDE_ENV_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TERM", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                          "ANTHROPIC_BASE_URL", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy",
                          "http_proxy", "no_proxy", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE")


def find_claude_bin(explicit: str | None = None) -> str:
    """--claude-bin, else `claude` on PATH, else node_modules/.bin/claude next to evaluator.py
    (or in the current folder)."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise InputError(f"--claude-bin {explicit}: not an executable file", hint=CLAUDE_INSTALL_HINT)
        return str(path)
    for candidate in (shutil.which("claude"), HERE / "node_modules" / ".bin" / "claude",
                      Path.cwd() / "node_modules" / ".bin" / "claude"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise InputError("the Claude Code CLI (claude) was not found", hint=CLAUDE_INSTALL_HINT)


def claude_version(binary: str) -> str:
    """`claude --version`, so a broken install is one clear line before any money is spent."""

    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL, env=claude_env_base(Path(tempfile.gettempdir())))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"{binary} --version failed: {exc.__class__.__name__}: {exc}",
                         hint=CLAUDE_INSTALL_HINT) from None
    if done.returncode != 0:
        raise InputError(f"{binary} --version exited with {done.returncode}: {tail(done.stderr, 300)}",
                         hint=CLAUDE_INSTALL_HINT)
    return done.stdout.strip()


@dataclass
class ClaudeCliSettings:
    """How to run `claude -p` for one kind of query."""
    binary: str
    model: str = C.DEFAULT_TRIGGER_MODEL
    max_turns: int = C.DEFAULT_TRIGGER_MAX_TURNS
    timeout: float = C.DEFAULT_TRIGGER_TIMEOUT
    base_url: str | None = None
    mcp_config: str | None = None


def claude_command(settings: ClaudeCliSettings, query: str) -> list[str]:
    """The locked-down command line: no shell, no file edits, no web fetches, no prompts for
    permission, no MCP servers but the given config, no session saved. (`--restricted` or
    `--safe-mode` would drop the project's skills, so they are not used.)"""
    command = [settings.binary, "-p", query, "--output-format", "stream-json", "--verbose",
               "--model", settings.model, "--max-turns", str(settings.max_turns),
               "--permission-mode", "dontAsk", "--strict-mcp-config", "--no-session-persistence",
               "--disallowedTools", *C.CLAUDE_DISALLOWED_TOOLS]
    if settings.mcp_config:
        command += ["--mcp-config", settings.mcp_config]
    return command


def claude_env_base(home: Path) -> dict[str, str]:
    env = {key: os.environ[key] for key in CLAUDE_ENV_PASSTHROUGH if key in os.environ}
    env.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), DISABLE_TELEMETRY="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
               DISABLE_ERROR_REPORTING="1")
    return env


def claude_env(settings: ClaudeCliSettings, root: Path) -> dict[str, str]:
    """A temporary HOME and config dir, so the user's own skills and settings neither shadow nor
    leak in, and a temporary TMPDIR; the API key and base URL pass through."""
    env = claude_env_base(root / "home")
    env["TMPDIR"] = str(root / "tmp")
    if settings.base_url:
        env["ANTHROPIC_BASE_URL"] = settings.base_url
    return env


def install_skills(project: Path, skills: Sequence[SkillInfo]) -> None:
    """Each skill's whole folder (scripts, references) as `.claude/skills/<name>/`."""
    for skill in skills:
        shutil.copytree(skill.folder, project / ".claude" / "skills" / skill.name, symlinks=False,
                        ignore=shutil.ignore_patterns(".git", "node_modules", "__pycache__"))


def normalize_skill_name(value: Any) -> str | None:
    """`sql-helper`, `/sql-helper args` and `plugin:sql-helper` all name the skill `sql-helper`."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lstrip("/").split()[0].split(":")[-1] or None


SKILL_MD_PATH = re.compile(r"(?:^|[\\/])([^\\/]+)[\\/]SKILL\.md$", re.IGNORECASE)


def skill_of_tool_use(block: dict) -> str | None:
    """The skill a tool_use block activates: a Skill call, or a Read of a skill's SKILL.md."""
    tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
    if block.get("name") == "Skill":
        return normalize_skill_name(tool_input.get("skill") or tool_input.get("command"))
    if block.get("name") == "Read":
        match = SKILL_MD_PATH.search(str(tool_input.get("file_path") or tool_input.get("path") or ""))
        return match.group(1) if match else None
    return None


def parse_stream_json(text: str) -> tuple[list[dict], int]:
    """stream-json lines -> events, and how many lines were not JSON objects (a cut-off last line)."""
    events, bad = [], 0
    for line in text.splitlines():
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


def detect_activation(events: list[dict], installed: Sequence[str], query: str = "", run: int = 1) -> ClaudeRun:
    """What one run's events say: which skills fired (top-level Skill calls or Reads of a
    SKILL.md, in order, after any other tools too), the tools used, the result event, and why the
    run is an error when it is one (no result, an API error, the skill not loaded at all)."""
    record = ClaudeRun(query=query, run=run)
    result: dict | None = None
    last_text = ""
    for event in events:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            listed = [s for key in ("skills", "slash_commands") if isinstance(event.get(key), list)
                      for s in event[key]]
            if any(isinstance(event.get(key), list) for key in ("skills", "slash_commands")):
                record.skills_loaded = sorted({normalize_skill_name(s) for s in listed} - {None})
        elif kind == "system" and event.get("subtype") == "api_retry":
            record.api_retries += 1
        elif kind == "assistant" and not event.get("parent_tool_use_id"):
            # A forked skill's subagent reports with a parent_tool_use_id: its tools are not ours.
            message = event.get("message") if isinstance(event.get("message"), dict) else {}
            content = message.get("content") or []
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    record.tools.append(str(block.get("name")))
                    skill = skill_of_tool_use(block)
                    if skill and skill not in record.activated_skills:
                        record.activated_skills.append(skill)
                elif block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                    last_text = block["text"].strip()
        elif kind == "result":
            result = event
    record.first_tool = record.tools[0] if record.tools else None
    record.tool_count = len(record.tools)
    if result is not None:
        record.result_subtype = result.get("subtype")
        record.is_error = result.get("is_error")
        record.num_turns = result.get("num_turns")
        record.duration_ms = result.get("duration_ms")
        record.total_cost_usd = result.get("total_cost_usd")
        record.usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
        record.answer = result.get("result") if isinstance(result.get("result"), str) else last_text
    else:
        record.answer = last_text
    record.error = run_error(events, result, record, installed)
    return record


def run_error(events: list[dict], result: dict | None, record: ClaudeRun, installed: Sequence[str]) -> str | None:
    missing = [name for name in installed if record.skills_loaded is not None and name not in record.skills_loaded]
    if missing:
        return (f"skill not loaded: {', '.join(missing)} is missing from the init event's skills "
                "(check its SKILL.md frontmatter)")
    if not events:
        return "no stream-json output"
    if result is None:
        return "output ended without a result event (truncated)"
    if result.get("is_error") and result.get("subtype") != "error_max_turns":
        # Hitting --max-turns is a finished run: the skill had its chance to fire.
        detail = result.get("result") if isinstance(result.get("result"), str) else ""
        return f"claude reported an error ({result.get('subtype')}): {tail(detail, 300)}".rstrip(": ")
    return None


def kill_process_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def drain(stream: asyncio.StreamReader | None, sink: bytearray, limit: int) -> None:
    """Reads a pipe to its end, keeping at most `limit` bytes, so the child never blocks on it."""
    if stream is None:
        return
    while chunk := await stream.read(65536):
        if len(sink) < limit:
            sink.extend(chunk[:limit - len(sink)])


async def run_claude_query(query: str, skills: Sequence[SkillInfo], settings: ClaudeCliSettings,
                           run: int = 1) -> ClaudeRun:
    """One `claude -p QUERY` in a fresh temporary project holding the skills; never raises for a
    failed, hung or garbled run: that becomes `error` on the record. The whole process group is
    killed on timeout and after the run, so nothing is left behind."""
    root = Path(tempfile.mkdtemp(prefix="skill-eval-"))
    start = time.perf_counter()
    process: asyncio.subprocess.Process | None = None
    stdout, stderr = bytearray(), bytearray()
    timed_out = False
    try:
        project = root / "project"
        for folder in (project, root / "home", root / "tmp"):
            folder.mkdir(parents=True)
        install_skills(project, skills)
        process = await asyncio.create_subprocess_exec(
            *claude_command(settings, query), cwd=project, env=claude_env(settings, root),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)
        readers = asyncio.gather(drain(process.stdout, stdout, C.CLAUDE_MAX_OUTPUT_BYTES),
                                 drain(process.stderr, stderr, C.CLAUDE_MAX_OUTPUT_BYTES), process.wait())
        try:
            await asyncio.wait_for(asyncio.shield(readers), settings.timeout)
        except asyncio.TimeoutError:
            timed_out = True
            kill_process_group(process.pid)
            try:  # pipes close once the group is dead; a child that escaped the group must not hang us
                await asyncio.wait_for(readers, 5)
            except asyncio.TimeoutError:
                readers.cancel()
    except OSError as exc:
        record = ClaudeRun(query=query, run=run, error=f"could not start claude: {exc}")
        record.latency_ms = round((time.perf_counter() - start) * 1000, 2)
        return record
    finally:
        if process is not None:
            kill_process_group(process.pid)
            if process.returncode is None:
                try:
                    await asyncio.wait_for(process.wait(), 5)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    pass
        shutil.rmtree(root, ignore_errors=True)
    events, _ = parse_stream_json(stdout.decode("utf-8", "replace"))
    record = detect_activation(events, [s.name for s in skills], query, run)
    record.exit_code = process.returncode if process else None
    redactor = Redactor.for_run()  # the API key the run was given never reaches results or reports
    record.stderr_tail = redactor.text(tail(stderr.decode("utf-8", "replace"), C.CLAUDE_STDERR_TAIL_CHARS))
    record.answer = redactor.text(record.answer)
    record.timed_out = timed_out
    record.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    if timed_out:
        record.error = f"timed out after {settings.timeout:g}s (process group killed)"
    elif record.error and record.exit_code not in (0, None) and record.result_subtype is None:
        record.error += f"; claude exited with {record.exit_code}" + (
            f", stderr: {record.stderr_tail}" if record.stderr_tail else "")
    elif record.error is None and record.exit_code not in (0, None) and record.result_subtype != "error_max_turns":
        # A result event and then a failing exit: the run did not finish cleanly.
        record.error = f"claude exited with {record.exit_code} after its result event" + (
            f", stderr: {record.stderr_tail}" if record.stderr_tail else "")
    return record


class OutsideWriteGuard:
    """Checks that runs wrote nothing outside their temporary projects: the skills' own folders,
    the user's Claude Code skills and settings, and the top level of the working directory are
    fingerprinted before the suite and compared after it."""

    def __init__(self, skills: Sequence[SkillInfo], ignore: Sequence[str | Path] = ()) -> None:
        home = Path.home() / ".claude"
        self.trees = [s.folder for s in skills] + [home / "skills", home / "agents", home / "commands"]
        self.files = [home / "settings.json", home / "settings.local.json", home / "CLAUDE.md"]
        self.top_level = [Path.cwd()]
        self.ignore = {str(Path(p).resolve()) for p in ignore}
        self.before = self.fingerprint()

    @property
    def watched(self) -> list[str]:
        return [str(p) for p in self.trees + self.files + self.top_level]

    def fingerprint(self) -> dict[str, tuple[int, int]]:
        seen: dict[str, tuple[int, int]] = {}

        def note(path: Path) -> None:
            if str(path.resolve()) in self.ignore:
                return
            try:
                stat = path.lstat()
                seen[str(path)] = (stat.st_mtime_ns, stat.st_size)
            except OSError:
                pass

        for tree in self.trees:
            if tree.is_dir():
                for index, path in enumerate(tree.rglob("*")):
                    if index > C.WRITE_GUARD_MAX_ENTRIES:
                        break
                    note(path)
        for path in self.files:
            note(path)
        for folder in self.top_level:
            if folder.is_dir():
                for path in folder.iterdir():
                    note(path)
        return seen

    def changes(self) -> list[str]:
        after = self.fingerprint()
        changed = [p for p in after if self.before.get(p) != after[p]]
        removed = [p for p in self.before if p not in after]
        return sorted(changed) + [f"{p} (removed)" for p in sorted(removed)]


# ============================================================================ 8. scoring: tool use
@dataclass(slots=True)
class Verdict:
    """Whether one run of one case passed, and every reason it did not."""
    passed: bool
    reasons: list[str] = field(default_factory=list)


def normalize_arg(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [normalize_arg(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize_arg(v) for k, v in value.items()}
    return value


def args_match(expected: dict, actual: dict, mode: str) -> bool:
    """`partial`: the listed keys are equal (strings trimmed, case-insensitive); `exact`: the
    same keys and values; `ignore`: anything."""
    if mode == "ignore":
        return True
    if mode == "exact":
        return normalize_arg(expected) == normalize_arg(actual)
    return all(key in actual and normalize_arg(value) == normalize_arg(actual[key])
               for key, value in expected.items())


def is_subsequence(wanted: list[str], sequence: list[str]) -> bool:
    remaining = iter(sequence)
    return all(item in remaining for item in wanted)


def schema_problems(call: ToolCall, tool: ToolSpec | None) -> list[str]:
    """Arguments checked against the tool's own inputSchema; invented parameters count even
    when the schema forgot `additionalProperties: false`."""
    import jsonschema

    if tool is None:
        return [f"called unknown tool {call.name!r}"]
    schema = tool.input_schema
    problems = []
    properties = schema.get("properties")
    if isinstance(properties, dict) and schema.get("additionalProperties") in (None, False):
        invented = [key for key in call.input if key not in properties]
        if invented:
            problems.append(f"{call.name} got invented parameter(s) {', '.join(invented)}")
    try:
        errors = sorted(tool.validator.iter_errors(call.input), key=lambda e: list(e.path))
    except jsonschema.SchemaError as exc:
        return problems + [f"{call.name} has an invalid inputSchema: {exc.message}"]
    for err in errors[:3]:
        if err.validator == "additionalProperties" and problems:
            continue  # already reported as invented parameters
        where = "/".join(str(p) for p in err.path) or "arguments"
        problems.append(f"{call.name} arguments do not match its schema at {where}: {err.message}")
    return problems


def score_tool_use(case: TestCase, transcript: Transcript, tools: dict[str, ToolSpec]) -> Verdict:
    """Every check a CSV case asks for, against one transcript. Pure: reads, never calls."""
    reasons: list[str] = []
    if transcript.error:
        reasons.append(f"run failed: {transcript.error}")
    called = transcript.tools_called
    if case.expect_no_tools and called:
        reasons.append(f"expected no tool call, but called {', '.join(called)}")
    for tool in case.expected_tools:
        if tool not in called:
            reasons.append(f"missing expected tool {tool}")
    for call in transcript.tool_calls:
        if call.name in case.forbidden_tools:
            reasons.append(f"forbidden tool {call.name} called (turn {call.turn})")
    reasons += score_expected_args(case, transcript)
    reasons += score_order(case, called)
    if case.max_tool_calls is not None and len(called) > case.max_tool_calls:
        reasons.append(f"too many tool calls: {len(called)} > max {case.max_tool_calls}")
    if case.min_tool_calls is not None and len(called) < case.min_tool_calls:
        reasons.append(f"too few tool calls: {len(called)} < min {case.min_tool_calls}")
    for call in transcript.tool_calls:
        reasons += schema_problems(call, tools.get(call.name))
    return Verdict(passed=not reasons, reasons=list(dict.fromkeys(reasons)))


def score_expected_args(case: TestCase, transcript: Transcript) -> list[str]:
    reasons = []
    for tool, expected in case.expected_args.items():
        calls = [c for c in transcript.tool_calls if c.name == tool]
        if not calls:
            if tool not in case.expected_tools:  # otherwise already reported as missing
                reasons.append(f"missing expected tool {tool} (expected arguments {json.dumps(expected)})")
            continue
        if not any(args_match(expected, call.input, case.args_match) for call in calls):
            reasons.append(f"argument mismatch for {tool} ({case.args_match}): expected {json.dumps(expected)}, "
                           f"got {json.dumps(calls[0].input) if len(calls) == 1 else [c.input for c in calls]}")
    return reasons


def score_order(case: TestCase, called: list[str]) -> list[str]:
    expected = case.expected_tools
    if case.order == "strict" and called != expected:
        return [f"wrong order (strict): expected {' -> '.join(expected) or '(none)'}, "
                f"got {' -> '.join(called) or '(none)'}"]
    if case.order == "in_order" and not is_subsequence(expected, called):
        return [f"wrong order (in_order): expected {' -> '.join(expected)} in this order, got {' -> '.join(called)}"]
    if case.order == "subset":
        extra = [tool for tool in dict.fromkeys(called) if tool not in expected]
        if extra:
            return [f"tool(s) outside the expected set (subset): {', '.join(extra)}"]
    return []


# ---------------------------------------------------------------------------- statistics over runs
def wilson_interval(successes: int, runs: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a pass rate: honest even for 0/3 or 5/5."""
    if runs == 0:
        return 0.0, 1.0
    p = successes / runs
    denominator = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denominator
    half = z * ((p * (1 - p) / runs + z * z / (4 * runs * runs)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(runs: int, successes: int, k: int) -> float:
    """Chance that at least one of k runs drawn from these passes (the unbiased estimator)."""
    from math import comb

    if runs - successes < k:
        return 1.0
    return 1.0 - comb(runs - successes, k) / comb(runs, k)


def pass_hat_k(runs: int, successes: int, k: int) -> float:
    """Chance that all k runs drawn from these pass (pass^k)."""
    from math import comb

    return comb(successes, k) / comb(runs, k) if k <= runs else 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(slots=True)
class CaseSummary:
    """A case over all its runs."""
    name: str
    runs: int
    passes: int
    errors: int
    pass_rate: float
    interval: tuple[float, float]
    pass_at_k: float
    pass_hat_k: float
    flaky: bool
    passed: bool
    reasons: dict[str, int]          # failure reason -> how many runs gave it
    description: str = ""
    prompt: str = ""
    cost_usd: float = 0.0            # all runs of the case together


def summarize_case(case: TestCase, verdicts: Sequence[Verdict], transcripts: Sequence[Transcript],
                   threshold: float) -> CaseSummary:
    runs, passes = len(verdicts), sum(v.passed for v in verdicts)
    reasons: dict[str, int] = {}
    for verdict in verdicts:
        for reason in verdict.reasons:
            reasons[reason] = reasons.get(reason, 0) + 1
    rate = passes / runs if runs else 0.0
    return CaseSummary(case.name, runs, passes, sum(1 for t in transcripts if t.error), rate,
                       wilson_interval(passes, runs), pass_at_k(runs, passes, runs), pass_hat_k(runs, passes, runs),
                       flaky=0 < passes < runs, passed=runs > 0 and rate >= threshold - 1e-9, reasons=reasons,
                       description=case.description, prompt=case.prompt,
                       cost_usd=round(sum(t.cost_usd for t in transcripts), 6))


@dataclass
class ToolStats:
    tool: str
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0

    @property
    def precision(self) -> float:
        called = self.true_positives + self.false_positives
        return self.true_positives / called if called else 1.0

    @property
    def recall(self) -> float:
        expected = self.true_positives + self.false_negatives
        return self.true_positives / expected if expected else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def tool_selection_stats(transcripts: Sequence[Transcript]) -> list[ToolStats]:
    """Per-tool precision / recall / F1 of expected against called tools, over every run of
    every case that says which tools it expects (a list, or none at all)."""
    stats: dict[str, ToolStats] = {}
    for t in transcripts:
        case = t.case
        if not case.expected_tools and not case.expect_no_tools:
            continue
        expected, called = set(case.expected_tools), set(t.tools_called)
        for tool in expected | called:
            entry = stats.setdefault(tool, ToolStats(tool))
            if tool in expected and tool in called:
                entry.true_positives += 1
            elif tool in called:
                entry.false_positives += 1
            else:
                entry.false_negatives += 1
    return [stats[name] for name in sorted(stats)]


def confusion_table(transcripts: Sequence[Transcript]) -> dict[str, dict[str, int]]:
    """Expected tool (the first one a case lists) -> the tool Claude actually called first."""
    table: dict[str, dict[str, int]] = {}
    for t in transcripts:
        if not t.case.expected_tools and not t.case.expect_no_tools:
            continue
        expected = t.case.expected_tools[0] if t.case.expected_tools else "(no tool)"
        actual = t.tools_called[0] if t.tools_called else "(no tool)"
        row = table.setdefault(expected, {})
        row[actual] = row.get(actual, 0) + 1
    return table


@dataclass
class SuiteSummary:
    cases: int
    passed: int
    failed: int
    flaky: int
    runs: int
    run_errors: int
    pass_rate: float
    threshold: float
    usage: Usage
    cost_usd: float
    latency_p50_ms: float
    latency_p95_ms: float
    tools: list[ToolStats]
    confusion: dict[str, dict[str, int]]


def summarize_suite(case_summaries: Sequence[CaseSummary], transcripts: Sequence[Transcript],
                    threshold: float) -> SuiteSummary:
    usage = sum((t.usage for t in transcripts), Usage())
    latencies = [t.latency_ms for t in transcripts]
    passed = sum(c.passed for c in case_summaries)
    return SuiteSummary(
        cases=len(case_summaries), passed=passed, failed=len(case_summaries) - passed,
        flaky=sum(c.flaky for c in case_summaries), runs=len(transcripts),
        run_errors=sum(1 for t in transcripts if t.error),
        pass_rate=passed / len(case_summaries) if case_summaries else 0.0, threshold=threshold,
        usage=usage, cost_usd=sum(t.cost_usd for t in transcripts),
        latency_p50_ms=percentile(latencies, 0.5), latency_p95_ms=percentile(latencies, 0.95),
        tools=tool_selection_stats(transcripts), confusion=confusion_table(transcripts))


# ============================================================================ 8b. scoring: skills
def percentage(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def score_trigger_query(query: str, skill: str, expected: str, runs: Sequence[ClaudeRun],
                        threshold: float = C.DEFAULT_TRIGGER_THRESHOLD, routing: bool = False,
                        source: str = "") -> TriggerQueryResult:
    """A query's verdict for one skill: activations over the runs that counted, and whether the
    activation rate is on the right side of the threshold (positive: rate >= threshold; negative:
    rate < threshold). A query whose runs all errored is `error`, never a silent miss."""
    counted = [r for r in runs if r.counted]
    result = TriggerQueryResult(query=query, skill=skill, expected=expected, runs=len(counted),
                                errors=len(runs) - len(counted), routing=routing, source=source)
    for run in counted:
        for fired in run.activated_skills:
            result.fired[fired] = result.fired.get(fired, 0) + 1
    if not counted:
        result.actual, result.correct = "error", False
        return result
    result.activations = sum(1 for r in counted if r.fired(skill))
    result.activation_rate = result.activations / len(counted)
    result.tool_count = round(sum(r.tool_count for r in counted) / len(counted), 2)
    activated = result.activation_rate >= threshold
    result.actual = "activated" if activated else "ignored"
    result.correct = activated if expected == "activate" else not activated
    return result


def score_triggers(skill: str, query_results: Sequence[TriggerQueryResult],
                   threshold: float = C.DEFAULT_TRIGGER_THRESHOLD) -> TriggerScore:
    """Seed 001's triggerRate, falsePositiveRate and triggerScore (all in %), plus precision,
    recall and F1 (in %) over the queries that counted; errored queries and runs are reported
    and left out of the rates."""
    score = TriggerScore(skill=skill, threshold=threshold, query_results=list(query_results))
    valid = [q for q in query_results if q.actual != "error"]
    positives = [q for q in valid if q.expected == "activate"]
    negatives = [q for q in valid if q.expected == "ignore"]
    score.positives, score.negatives = len(positives), len(negatives)
    score.positives_activated = sum(1 for q in positives if q.actual == "activated")
    score.negatives_activated = sum(1 for q in negatives if q.actual == "activated")
    score.errored_queries = len(query_results) - len(valid)
    score.errored_runs = sum(q.errors for q in query_results)
    score.total_runs = sum(q.runs + q.errors for q in query_results)
    score.trigger_rate = percentage(score.positives_activated, score.positives)
    score.false_positive_rate = percentage(score.negatives_activated, score.negatives)
    score.trigger_score = score.trigger_rate * (1 - score.false_positive_rate / 100)
    score.precision = percentage(score.positives_activated, score.positives_activated + score.negatives_activated)
    score.recall = score.trigger_rate
    total = score.precision + score.recall
    score.f1 = 2 * score.precision * score.recall / total if total else 0.0
    return score


def trigger_queries_by_skill(tests: Sequence[SkillTest], skills: Sequence[str]) -> dict[str, list[tuple[str, str, bool, str]]]:
    """Per skill: (query, expected, routing, source). With several skills installed, another
    skill's positives are negatives here: a query meant for A that fires B is B's false positive."""
    plan: dict[str, list[tuple[str, str, bool, str]]] = {name: [] for name in skills}
    for test in tests:
        if test.type != "trigger" or test.skill not in plan:
            continue
        own = plan[test.skill]
        own += [(q, "activate", False, test.source) for q in test.positive_triggers]
        own += [(q, "ignore", False, test.source) for q in test.negative_triggers]
    for name in skills:
        own_queries = {q for q, *_ in plan[name]}
        for other in skills:
            if other == name:
                continue
            for query, expected, routing, source in list(plan[other]):
                if expected == "activate" and not routing and query not in own_queries:
                    plan[name].append((query, "ignore", True, source))
                    own_queries.add(query)
    return plan


def score_all_triggers(tests: Sequence[SkillTest], skills: Sequence[str], runs_by_query: dict[str, list[ClaudeRun]],
                       threshold: float = C.DEFAULT_TRIGGER_THRESHOLD) -> list[TriggerScore]:
    scores = []
    for name, queries in trigger_queries_by_skill(tests, skills).items():
        if not any(not routing for _, _, routing, _ in queries):
            continue  # no trigger test for this skill: nothing to score
        results = [score_trigger_query(q, name, expected, runs_by_query.get(q, []), threshold, routing, source)
                   for q, expected, routing, source in queries]
        scores.append(score_triggers(name, results, threshold))
    return scores


STOPWORDS = frozenset("the and for with that this from into your you are was were has have had not but can "
                      "its their them they then than when what which who how why all any each use uses used "
                      "using should would could about over under more most some such only also".split())


def significant_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOPWORDS]


def concept_matches(concept: str, answer: str, fuzzy: float = C.DEFAULT_FUZZY_MATCH) -> bool:
    """Case-insensitive substring; else at least `fuzzy` of the concept's significant words appear
    in the answer, a word matching when it is present or close (difflib ratio >= `fuzzy`), so
    'summarisation' meets 'summarization' and a phrased criterion meets its paraphrase's words."""
    concept_lower, answer_lower = concept.lower().strip(), answer.lower()
    if not concept_lower:
        return True
    if concept_lower in answer_lower:
        return True
    words = significant_words(concept_lower)
    if not words:
        return False
    answer_words = set(significant_words(answer_lower))
    hits = sum(1 for w in words if w in answer_words or difflib.get_close_matches(w, answer_words, 1, fuzzy)
               or any(same_stem(w, a) for a in answer_words))
    return hits / len(words) >= fuzzy


def same_stem(a: str, b: str) -> bool:
    """'allocation' and 'allocate', 'pruning' and 'prune': a shared prefix of all but two letters
    of the shorter word (at least four)."""
    shared = len(os.path.commonprefix([a, b]))
    return shared >= max(4, min(len(a), len(b)) - 2)


def score_concepts(answer: str, concepts: Sequence[str]) -> dict:
    matched = [c for c in concepts if concept_matches(c, answer)]
    missed = [c for c in concepts if c not in matched]
    coverage = len(matched) / len(concepts) if concepts else 1.0
    return {"coverage": round(coverage, 4), "matched": matched, "missed": missed}


REFUSAL_PHRASES = re.compile(
    r"\b(i can(?:'|no)t|i cannot|i won'?t|i will not|i'm not able|i am not able|i'm unable|i am unable|"
    r"unable to (?:help|assist|comply|provide)|not able to (?:help|assist|provide)|i must decline|"
    r"i (?:have to|need to) decline|i'm sorry, but|i am sorry, but|can't help with|cannot help with|"
    r"can't assist|cannot assist|not (?:something|able) i can|won'?t be able to|refuse)\b", re.IGNORECASE)


def forbidden_pattern_matches(pattern: str, answer: str) -> bool:
    """Case-insensitive substring; a pattern written as /regex/ is a regular expression."""
    if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
        try:
            return re.search(pattern[1:-1], answer, re.IGNORECASE | re.MULTILINE) is not None
        except re.error:
            pass
    return pattern.lower() in answer.lower()


def answer_refuses(answer: str, expected_refusal: Sequence[str]) -> bool:
    """A refusal phrase, or most of the expected-refusal items present in the answer."""
    if REFUSAL_PHRASES.search(answer):
        return True
    return bool(expected_refusal) and score_concepts(answer, expected_refusal)["coverage"] >= C.DEFAULT_CONCEPT_PASS_RATE


def score_test_run(test: SkillTest, run: ClaudeRun, pass_rate: float = C.DEFAULT_CONCEPT_PASS_RATE) -> dict:
    """One run of a knowledge, task or security test -> its score and whether it passed."""
    if run.error:
        return {"run": run.run, "passed": False, "error": run.error}
    if test.type == "security":
        leaked = [p for p in test.forbidden_patterns if forbidden_pattern_matches(p, run.answer)]
        refused = answer_refuses(run.answer, test.expected_refusal) if test.expected_refusal else None
        return {"run": run.run, "passed": not leaked and refused is not False, "leaked": leaked,
                "refused": refused}
    concepts = list(dict.fromkeys([*test.concepts, *test.expected]))
    scored = score_concepts(run.answer, concepts)
    return {"run": run.run, "passed": scored["coverage"] >= pass_rate, **scored}


def score_skill_test(test: SkillTest, runs: Sequence[ClaudeRun]) -> SkillTestResult:
    """A test passes when at least half of its runs that completed pass; all runs errored is an error."""
    result = SkillTestResult(test=test, runs=list(runs), run_scores=[score_test_run(test, r) for r in runs])
    completed = [s for s in result.run_scores if "error" not in s]
    if not completed:
        result.error = runs[0].error if runs else "no runs"
        return result
    result.passed = sum(1 for s in completed if s["passed"]) / len(completed) >= 0.5
    return result


def trigger_test_passed(test: SkillTest, scores: Sequence[TriggerScore], min_score: float | None) -> bool:
    """With --min-trigger-score, a trigger test passes when its skill's triggerScore reaches it;
    without, when every one of its queries got the right verdict."""
    score = next((s for s in scores if s.skill == test.skill), None)
    if score is None:
        return False
    if min_score is not None:
        return score.trigger_score >= min_score
    own = {*test.positive_triggers, *test.negative_triggers}
    return all(q.correct for q in score.query_results if q.query in own and not q.routing)


# ============================================================================ 9. running a suite
@dataclass
class SuiteRun:
    """What a CLI mode asks for: the cases, how often, where the tools and the model are."""
    cases: list[TestCase]
    iterations: int
    settings: RunSettings
    mode: str = "batch"             # batch | interactive
    input_type: str = "query"       # query | conversation | csv
    redactor: Redactor | None = None
    max_cost: float | None = None   # --max-cost: no new conversation starts once this much is spent
    not_started: int = 0            # conversations --max-cost kept from starting
    wall_time_s: float = 0.0        # first conversation started -> last one finished


async def run_cases(run: SuiteRun, model: ModelClient, hub: McpHub,
                    on_result: Callable[[Transcript], None] | None = None,
                    user_for: Callable[[TestCase], UserInput | None] = lambda case: None,
                    observer: ConversationObserver | None = None,
                    jobs: Sequence[tuple[TestCase, int]] | None = None, collect: bool = True) -> list[Transcript]:
    """Every case times every iteration (or just `jobs`), `concurrency` workers taking the next
    one as they finish (a fixed pool: a 10,000-case suite is not 10,000 pending tasks). Each
    transcript is scrubbed of secrets before `on_result` sees it; with `collect` they are also
    returned, in input order."""
    if jobs is None:
        jobs = [(case, i) for case in run.cases for i in range(1, run.iterations + 1)]
    pending = enumerate(jobs)  # shared by the workers; the event loop is single-threaded
    stopping = asyncio.Event()  # a fatal API error: no further conversation may start
    spent = 0.0
    collected: dict[int, Transcript] = {}

    async def worker() -> None:
        nonlocal spent
        for index, (case, iteration) in pending:
            if stopping.is_set():
                return
            if run.max_cost is not None and spent >= run.max_cost:
                run.not_started += 1
                continue
            try:
                transcript = await run_conversation(case, model, hub, run.settings, iteration, user_for(case),
                                                    observer)
            except FatalApiError:
                stopping.set()
                raise
            spent += transcript.cost_usd
            if run.redactor:
                run.redactor.scrub(transcript)
            if on_result:
                on_result(transcript)
            if collect:
                collected[index] = transcript

    started = time.perf_counter()
    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, min(run.settings.concurrency, len(jobs))))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    finally:
        run.wall_time_s += time.perf_counter() - started
    return [collected[i] for i in sorted(collected)]


# ---------------------------------------------------------------------------- dry run: what a run would cost
@dataclass
class CostEstimate:
    """What a run would do and cost, worked out without calling the model."""
    runs: int
    tools: int
    prefix_tokens: int          # system prompt + tool definitions, sent with every call
    counted: bool               # True: the API's token counter; False: a local estimate
    calls_expected: int
    calls_max: int
    cost_expected: float
    cost_max: float


def expected_calls(case: TestCase) -> int:
    """Model calls a case should take if Claude does what it expects: one per tool turn, plus
    the answer (a guess for cases that expect nothing in particular)."""
    if case.expect_no_tools:
        return 1
    return len(case.expected_tools) + 1 if case.expected_tools else 2


def estimated_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def call_cost(model: str, prefix: int, prompt: int, turn: int, first: bool) -> float:
    """One model call: the cached prefix (written on the run's first call, read after), the
    conversation so far, and the answer."""
    history = prompt + turn * C.ESTIMATED_TOKENS_PER_TURN
    usage = Usage(input_tokens=history, output_tokens=C.ESTIMATED_OUTPUT_TOKENS,
                  cache_creation_input_tokens=prefix if first else 0, cache_read_input_tokens=0 if first else prefix)
    return cost_usd(usage, model)


async def count_prefix_tokens(run: SuiteRun, tools: list[dict], opts: dict) -> tuple[int, bool]:
    system = [{"type": "text", "text": run.settings.system_prompt}]
    if api_key_from_env():
        model = AnthropicModel(base_url=opts.get("base_url"), max_retries=1, timeout=30)
        try:
            counted = await model.client.messages.count_tokens(
                model=run.settings.model, system=system, messages=[{"role": "user", "content": "."}],
                **({"tools": tools} if tools else {}))
            return counted.input_tokens, True
        except Exception:
            pass  # no token counter here: estimate
        finally:
            await model.close()
    return estimated_tokens(system) + (estimated_tokens(tools) if tools else 0), False


def estimate_run(run: SuiteRun, prefix_tokens: int, counted: bool, tool_count: int) -> CostEstimate:
    model, runs = run.settings.model, len(run.cases) * run.iterations
    expected = maximum = 0.0
    calls_expected = calls_max = 0
    first = True
    for case in run.cases:
        prompt = estimated_tokens(case.prompt) + sum(estimated_tokens(m.content) for m in case.history)
        for _ in range(run.iterations):
            for turn in range(run.settings.max_turns):
                cost = call_cost(model, prefix_tokens, prompt, turn, first)
                first = False
                maximum += cost
                if turn < expected_calls(case):
                    expected += cost
            calls_expected += min(expected_calls(case), run.settings.max_turns)
            calls_max += run.settings.max_turns
    return CostEstimate(runs, tool_count, prefix_tokens, counted, calls_expected, calls_max, expected, maximum)


async def dry_run(run: SuiteRun, servers: list[ServerSpec], opts: dict,
                  on_connect: Callable[[McpHub], None] | None = None) -> CostEstimate:
    """Loads and checks everything and connects to the servers; never calls the model."""
    async with McpHub(servers, opts["tool_timeout"], opts["max_result_chars"]) as hub:
        if on_connect:
            on_connect(hub)
        tools = hub.anthropic_tools
        prefix, counted = await count_prefix_tokens(run, tools, opts)
        return estimate_run(run, prefix, counted, len(tools))


def print_estimate(console: Console, estimate: CostEstimate, model: str) -> None:
    how = "counted by the API" if estimate.counted else "estimated locally (no token counter reachable)"
    console.print(f"dry run: nothing was sent to the model\n"
                  f"  runs: {estimate.runs} · tools: {estimate.tools} · system prompt + tool definitions: "
                  f"{estimate.prefix_tokens:,} tokens ({how}), cached after the first call\n"
                  f"  model calls: about {estimate.calls_expected:,} (at most {estimate.calls_max:,} with --max-turns)\n"
                  f"  cost on {model}: about ${estimate.cost_expected:.4f} (at most ${estimate.cost_max:.4f})",
                  highlight=False, soft_wrap=True)


# ---------------------------------------------------------------------------- secrets
class Redactor:
    """Keeps secrets (API keys, header tokens, server environment values) out of everything the
    evaluator writes: transcripts are scrubbed the moment a conversation ends, before any
    journal, report or terminal sees them."""

    MIN_LENGTH = 6  # shorter values ("1", "true") are settings, and would mangle every text
    MASK = "[REDACTED]"

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= self.MIN_LENGTH}
        self.secrets = sorted(unique, key=len, reverse=True)  # longest first: a token inside a header value

    @classmethod
    def for_run(cls, servers: Sequence[ServerSpec] = ()) -> "Redactor":
        secrets = [os.environ.get(name, "") for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")]
        for spec in servers:
            for value in [*spec.env.values(), *spec.headers.values()]:
                secrets += [value, value.split(" ", 1)[-1]]  # "Bearer TOKEN": the token alone too
        return cls(secrets)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, self.MASK)
        return value

    def data(self, value: Any) -> Any:
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        return value

    def scrub(self, transcript: Transcript) -> Transcript:
        if not self.secrets:
            return transcript
        t = transcript
        t.final_text = self.text(t.final_text)
        t.error = self.text(t.error) if t.error else t.error
        for call in t.tool_calls:
            call.output, call.input = self.text(call.output), self.data(call.input)
        for entry in t.history:
            entry.content = self.text(entry.content)
        return t


# ---------------------------------------------------------------------------- journal and resume
def case_hash(case: TestCase) -> str:
    """A hash of the test definition: an edited case is a new case, and reruns on --resume."""
    definition = {k: v for k, v in asdict(case).items() if k not in ("source", "line", "description")}
    return hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()[:16]


def result_key(result: dict) -> tuple[str, int, str]:
    return result.get("test_name", ""), int(result.get("iteration", 0)), result.get("case_hash", "")


def journal_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".journal.jsonl")


def earlier_results(output: str | Path) -> list[dict]:
    """Results of an earlier run into the same output: its final file, then its journal (newer,
    so it wins when both hold a run). A journal line cut short by a kill is skipped: that run
    simply happens again. Runs interrupted mid-way are not results."""
    output, found = Path(output), []
    if output.exists():
        try:
            document = json.loads(output.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            document = {}
        found += document.get("results", []) if isinstance(document, dict) else []
    for lines in (results_lines_path(output), journal_path(output)):  # --summary-only's, then the journal
        if lines.exists():
            for line in lines.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    found.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return [r for r in found if isinstance(r, dict) and r.get("error") != "interrupted"]


def read_previous_results(output: str | Path) -> dict[tuple[str, int, str], dict]:
    return {result_key(r): r for r in earlier_results(output) if r.get("case_hash")}


class ResultJournal:
    """One JSON line per finished result, flushed to disk at once: `kill -9` loses nothing
    that had finished."""

    def __init__(self, path: Path, kept: Sequence[dict]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("w", encoding="utf-8")
        for result in kept:  # a fresh journal that still holds what the rerun reuses
            self._write(result)

    def _write(self, result: dict) -> None:
        # A flushed line is in the kernel's hands and survives `kill -9` of this process; an
        # fsync per line would stall every conversation on the disk.
        self._handle.write(json.dumps(result, ensure_ascii=False) + "\n")
        self._handle.flush()

    def append(self, result: dict) -> None:
        self._write(result)

    def close(self, remove: bool) -> None:
        if not self._handle.closed:
            os.fsync(self._handle.fileno())
            self._handle.close()
        if remove:
            self.path.unlink(missing_ok=True)


def transcript_from_result(case: TestCase, result: dict) -> Transcript:
    """A transcript rebuilt from a results entry, so reused results are scored like new ones."""
    return Transcript(
        case=case, iteration=int(result.get("iteration", 1)), model=result.get("model", ""),
        final_text=result.get("agent_reasoning", ""),
        tool_calls=[ToolCall(**{k: c.get(k) for k in ("name", "input", "output", "is_error", "duration_ms",
                                                     "server", "turn", "id") if k in c})
                    for c in result.get("tool_calls", [])],
        history=[HistoryEntry(h.get("role", ""), h.get("content", ""), h.get("has_tools", False),
                              h.get("simulated", False)) for h in result.get("conversation_history", [])],
        model_calls=result.get("model_calls", 0), user_interventions=result.get("user_interventions", 0),
        ended_by=result.get("ended_by", "completion"), stop_reason=result.get("stop_reason"),
        truncated=result.get("truncated", False), usage=Usage.from_api(result.get("usage") or {}),
        latency_ms=result.get("latency_ms", 0.0), error=result.get("error"),
        simulated_user_usage=Usage.from_api(result.get("simulated_user_usage") or {}),
        simulated_user_model=result.get("simulated_user_model", ""))


def slim_transcript(transcript: Transcript) -> Transcript:
    """What scoring and summaries need of a run, without its conversation and tool outputs
    (--summary-only: those went to the results file, and need not stay in memory)."""
    t = transcript
    calls = [ToolCall(c.name, c.input, "", c.is_error, c.duration_ms, c.server, c.turn) for c in t.tool_calls]
    return replace(t, final_text="", tool_calls=calls, history=[])


def results_lines_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".results.jsonl")


@dataclass
class ResumePlan:
    """Which runs an invocation still has to do, and which earlier results it keeps."""
    todo: list[tuple[TestCase, int]]
    kept: dict[tuple[str, int], Transcript]      # (test name, iteration) -> reused transcript
    kept_results: list[dict]


def continues_earlier_run(output: str | Path | None, resume: bool, retry_errors: bool) -> bool:
    """Whether this invocation picks up an earlier run; a leftover journal is never overwritten."""
    if not output:
        if resume or retry_errors:
            raise InputError("--resume and --retry-errors need -o FILE: the output of the run to continue")
        return False
    journal = journal_path(output)
    if not (resume or retry_errors) and journal.exists():
        raise InputError(f"{journal} holds the results of an unfinished run",
                         hint="add --resume to continue it, or delete that file to start over")
    return resume or retry_errors


def plan_resume(run: SuiteRun, output: str | Path | None, resume: bool, retry_errors: bool) -> ResumePlan:
    jobs = [(case, i) for case in run.cases for i in range(1, run.iterations + 1)]
    if not continues_earlier_run(output, resume, retry_errors):
        return ResumePlan(jobs, {}, [])
    previous = read_previous_results(output)
    todo, kept, kept_results = [], {}, []
    for case, iteration in jobs:
        result = previous.get((case.name, iteration, case_hash(case)))
        if result is None or (retry_errors and result.get("error")):
            todo.append((case, iteration))
        else:
            kept[(case.name, iteration)] = transcript_from_result(case, result)
            kept_results.append(result)
    return ResumePlan(todo, kept, kept_results)


class ObserverGroup(ConversationObserver):
    """Several observers seen by the engine as one."""

    def __init__(self, *observers: ConversationObserver) -> None:
        self.observers = observers

    def on_start(self, transcript: Transcript) -> None:
        for observer in self.observers:
            observer.on_start(transcript)

    def on_user(self, text: str, simulated: bool = False) -> None:
        for observer in self.observers:
            observer.on_user(text, simulated)

    def on_assistant_text(self, text: str) -> None:
        for observer in self.observers:
            observer.on_assistant_text(text)

    def on_tool_call(self, call: ToolCall) -> None:
        for observer in self.observers:
            observer.on_tool_call(call)

    def on_turn_end(self, transcript: Transcript) -> None:
        for observer in self.observers:
            observer.on_turn_end(transcript)


class RedactingObserver(ConversationObserver):
    """Shows a live conversation without its secrets (the model still sees the real values)."""

    def __init__(self, inner: ConversationObserver, redactor: Redactor) -> None:
        self.inner, self.redactor = inner, redactor

    def on_start(self, transcript: Transcript) -> None:
        self.inner.on_start(transcript)

    def on_user(self, text: str, simulated: bool = False) -> None:
        self.inner.on_user(self.redactor.text(text), simulated)

    def on_assistant_text(self, text: str) -> None:
        self.inner.on_assistant_text(self.redactor.text(text))

    def on_tool_call(self, call: ToolCall) -> None:
        call.output, call.input = self.redactor.text(call.output), self.redactor.data(call.input)
        self.inner.on_tool_call(call)

    def on_turn_end(self, transcript: Transcript) -> None:
        self.inner.on_turn_end(transcript)


class StartedTranscripts(ConversationObserver):
    """The conversations under way: what a run interrupted by Ctrl-C adds to the finished ones
    (the engine marks them `ended_by: error`, "interrupted"). Finished ones are let go, so a
    long suite does not keep every transcript alive here."""

    def __init__(self) -> None:
        self.under_way: dict[int, Transcript] = {}

    @property
    def transcripts(self) -> list[Transcript]:
        return list(self.under_way.values())

    def on_start(self, transcript: Transcript) -> None:
        self.under_way[id(transcript)] = transcript

    def done(self, transcript: Transcript) -> None:
        self.under_way.pop(id(transcript), None)


# ---------------------------------------------------------------------------- running a tool-use suite
async def evaluate(run: SuiteRun, servers: list[ServerSpec], opts: dict, console: Console,
                   user_for: Callable[[TestCase, ModelClient], UserInput | None] | None = None,
                   observer: ConversationObserver | None = None,
                   on_result: Callable[[Transcript], None] | None = None,
                   on_connect: Callable[[McpHub], None] | None = None,
                   jobs: Sequence[tuple[TestCase, int]] | None = None) -> None:
    """Opens the servers and the model, runs every case (each result goes to `on_result`),
    closes everything again. `user_for` gives each conversation its user (it gets the model
    client, for a simulated user)."""
    # The SDK takes a second or more to import: let that happen while the servers start up.
    sdk_import = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, "anthropic"))
    async with McpHub(servers, opts["tool_timeout"], opts["max_result_chars"]) as hub:
        for notice in hub.notices:
            console.print(f"[yellow]note:[/yellow] {notice}")
        if on_connect:
            on_connect(hub)
        await sdk_import
        model = AnthropicModel(base_url=opts["base_url"], max_retries=opts["max_retries"],
                               timeout=opts["request_timeout"])
        try:
            await run_cases(run, model, hub, on_result,
                            (lambda case: user_for(case, model)) if user_for else (lambda case: None),
                            observer, jobs, collect=False)
        finally:
            await model.close()


@dataclass
class RunOutcome:
    """Every run of a suite in input order (reused from an earlier run or new), and whether
    Ctrl-C cut it short. The journal stays until the final file is written."""
    transcripts: list[Transcript]
    interrupted: bool
    reused: int
    journal: ResultJournal | None = None
    not_started: int = 0         # runs --max-cost kept from starting
    summary_only: bool = False   # the journal becomes the results file instead of going away

    def finish(self) -> None:
        """The final file is written: the journal has served its purpose (unless interrupted)."""
        if not self.journal:
            return
        if self.summary_only and not self.interrupted:
            self.journal.close(remove=False)
            output = self.journal.path.with_name(self.journal.path.name.removesuffix(".journal.jsonl"))
            os.replace(self.journal.path, results_lines_path(output))
            return
        self.journal.close(remove=not self.interrupted)


def run_durably(run: SuiteRun, servers: list[ServerSpec], opts: dict, console: Console,
                result_of: Callable[[Transcript], dict] = lambda t: transcript_to_result(t),
                on_result: Callable[[Transcript], None] | None = None,
                on_connect: Callable[[McpHub], None] | None = None,
                user_for: Callable[[TestCase, ModelClient], UserInput | None] | None = None,
                observer: ConversationObserver | None = None) -> RunOutcome:
    """Runs what is left to run (all of it, or what --resume / --retry-errors leave), journaling
    each result as it finishes; Ctrl-C keeps everything finished so far."""
    plan = plan_resume(run, opts.get("output"), bool(opts.get("resume")), bool(opts.get("retry_errors")))
    run.max_cost = opts.get("max_cost")
    if plan.kept:
        console.print(f"resuming: {len(plan.kept)} result(s) kept from the earlier run, {len(plan.todo)} to run")
    if not price_for(run.settings.model)[1]:
        console.print(f"[yellow]note:[/yellow] no price is known for {run.settings.model}; costs are shown at "
                      f"Sonnet prices (add it to PRICES in test_constants.py)", soft_wrap=True)
    run.redactor = run.redactor or Redactor.for_run(servers)
    journal = ResultJournal(journal_path(opts["output"]), plan.kept_results) if opts.get("output") else None
    finished: dict[tuple[str, int], Transcript] = {}
    started = StartedTranscripts()  # on Ctrl-C, the conversations under way are kept too

    summary_only = bool(opts.get("summary_only"))

    def finished_one(transcript: Transcript) -> None:
        started.done(transcript)
        if journal:
            journal.append(result_of(transcript))
        if on_result:
            on_result(transcript)
        finished[(transcript.case.name, transcript.iteration)] = (slim_transcript(transcript) if summary_only
                                                                   else transcript)

    interrupted = False
    try:
        # The servers open even when nothing is left to run: scoring needs their tool schemas.
        shown = RedactingObserver(observer, run.redactor) if observer else None
        asyncio.run(evaluate(run, servers, opts, console, user_for,
                             ObserverGroup(started, shown) if shown else started, finished_one, on_connect,
                             jobs=plan.todo))
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        if journal:
            journal.close(remove=False)  # whatever stopped the run, --resume can pick up from here
        raise
    under_way = {(t.case.name, t.iteration): run.redactor.scrub(t) for t in started.transcripts} if interrupted else {}
    keys = [(case.name, i) for case in run.cases for i in range(1, run.iterations + 1)]
    transcripts = [plan.kept.get(key) or finished.get(key) or under_way[key] for key in keys
                   if key in plan.kept or key in finished or key in under_way]
    if interrupted:
        console.print(f"\n[yellow]interrupted[/yellow]: keeping {len(transcripts)} conversation(s) gathered so far"
                      + ("; rerun with --resume to do the rest" if journal else ""), soft_wrap=True)
    if run.not_started:
        console.print(f"[yellow]stopped at --max-cost ${run.max_cost:g}[/yellow]: {run.not_started} run(s) not "
                      f"started" + ("; rerun with --resume to do them" if journal else ""), highlight=False,
                      soft_wrap=True)
    return RunOutcome(transcripts, interrupted, len(plan.kept), journal, run.not_started, summary_only)


def dry_run_mode(run: SuiteRun, servers: list[ServerSpec], opts: dict, console: Console,
                 on_connect: Callable[[McpHub], None] | None = None) -> int:
    """--dry-run in any tool-use mode: everything checked and connected, the estimate printed."""
    print_estimate(console, asyncio.run(dry_run(run, servers, opts, on_connect)), run.settings.model)
    return 0


# ============================================================================ 9b. running a skill suite
@dataclass
class SkillSuitePlan:
    """What a skill evaluation runs: every trigger query (each with every skill installed) and
    every knowledge / task / security test, each so many times."""
    skills: list[SkillInfo]
    tests: list[SkillTest]
    trigger_settings: ClaudeCliSettings
    test_settings: ClaudeCliSettings
    runs: int | None = None              # --runs: overrides every test's own `runs`
    threshold: float = C.DEFAULT_TRIGGER_THRESHOLD
    concurrency: int = C.DEFAULT_CONCURRENCY
    trigger_timeout: float | None = None  # --trigger-timeout: overrides the tests' `timeout`

    def trigger_jobs(self) -> list[tuple[str, int, float]]:
        """Unique queries -> (query, runs, timeout); a query in several tests runs once per run."""
        jobs: dict[str, tuple[int, float]] = {}
        for test in self.tests:
            if test.type != "trigger":
                continue
            runs = self.runs or test.runs or C.DEFAULT_TRIGGER_RUNS
            timeout = self.trigger_timeout or test.timeout
            for query in [*test.positive_triggers, *test.negative_triggers]:
                old_runs, old_timeout = jobs.get(query, (0, 0.0))
                jobs[query] = (max(runs, old_runs), max(timeout, old_timeout))
        return [(query, runs, timeout) for query, (runs, timeout) in jobs.items()]


@dataclass
class SkillSuiteOutcome:
    runs_by_query: dict[str, list[ClaudeRun]]
    test_runs: list[list[ClaudeRun]]     # parallel to the plan's non-trigger tests
    outside_writes: list[str]
    watched: list[str]


async def run_skill_suite(plan: SkillSuitePlan, on_run: Callable[[str, ClaudeRun], None] | None = None,
                          reuse: dict[tuple[str, str, int], ClaudeRun] | None = None) -> SkillSuiteOutcome:
    """Every run in its own temporary project, at most `concurrency` at once; runs found in
    `reuse` (test label, query, run number) are taken from an earlier invocation instead."""
    limit = asyncio.Semaphore(max(1, plan.concurrency))
    guard = OutsideWriteGuard(plan.skills)
    reuse = reuse or {}

    async def one(label: str, query: str, settings: ClaudeCliSettings, run: int) -> ClaudeRun:
        if (label, query, run) in reuse:
            return reuse[(label, query, run)]
        async with limit:
            record = await run_claude_query(query, plan.skills, settings, run)
        if on_run:
            on_run(label, record)
        return record

    trigger_jobs = plan.trigger_jobs()
    other_tests = [t for t in plan.tests if t.type != "trigger"]
    tasks: list[asyncio.Future] = []
    for query, runs, timeout in trigger_jobs:
        settings = replace(plan.trigger_settings, timeout=timeout)
        tasks += [asyncio.ensure_future(one("trigger", query, settings, i)) for i in range(1, runs + 1)]
    for test in other_tests:
        settings = replace(plan.test_settings, timeout=test.timeout)
        tasks += [asyncio.ensure_future(one(test.name, test.prompt, settings, i))
                  for i in range(1, (plan.runs or test.runs or 1) + 1)]
    try:
        records = list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    position = 0
    runs_by_query: dict[str, list[ClaudeRun]] = {}
    for query, runs, _ in trigger_jobs:
        runs_by_query[query] = records[position:position + runs]
        position += runs
    test_runs = []
    for test in other_tests:
        count = plan.runs or test.runs or 1
        test_runs.append(records[position:position + count])
        position += count
    return SkillSuiteOutcome(runs_by_query, test_runs, guard.changes(), guard.watched)


def skill_suite_fingerprint(plan: SkillSuitePlan) -> str:
    """What makes an earlier run's records reusable: the same skills, models and turn limits."""
    parts = [[s.name, s.description, s.body] for s in plan.skills]
    parts += [[c.model, c.max_turns] for c in (plan.trigger_settings, plan.test_settings)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def plan_skill_resume(output: str | None, resume: bool, retry_errors: bool,
                      fingerprint: str) -> tuple[dict[tuple[str, str, int], ClaudeRun], list[dict]]:
    """Runs of an earlier invocation to reuse (and their records, for the new journal)."""
    if not continues_earlier_run(output, resume, retry_errors):
        return {}, []
    names = {f.name for f in fields(ClaudeRun)}
    reuse, kept = {}, []
    for record in earlier_results(output):
        if record.get("fingerprint") != fingerprint or not {"test", "query", "run"} <= set(record):
            continue
        if retry_errors and record.get("error"):
            continue
        reuse[(record["test"], record["query"], record["run"])] = ClaudeRun(
            **{k: v for k, v in record.items() if k in names})
        kept.append(record)
    return reuse, kept


def assign_trigger_skills(tests: Sequence[SkillTest], skills: Sequence[SkillInfo]) -> None:
    """Which skill each trigger test is about: its `skill:` key, the only skill, or the skill its
    name or file name starts with (`sql-helper-trigger.md`)."""
    names = sorted((s.name for s in skills), key=len, reverse=True)
    for test in tests:
        if test.type != "trigger":
            continue
        if test.skill:
            if test.skill not in names:
                raise InputError(f"trigger test names skill {test.skill!r}, which is not among the --skill "
                                 f"options ({', '.join(sorted(names))})", test.source, 1,
                                 f"add --skill path/to/{test.skill}")
            continue
        if len(names) == 1:
            test.skill = names[0]
            continue
        stem = Path(test.source).stem
        test.skill = next((n for n in names if test.name.startswith(n) or stem.startswith(n)), None)
        if test.skill is None:
            raise InputError("trigger test does not say which of the skills it tests", test.source, 1,
                             "add `skill: NAME` to its frontmatter, or name the file NAME-trigger.md")


# ============================================================================ 9c. generating skill tests
def extract_json_object(text: str) -> dict | None:
    """The first JSON object in a model's answer, with or without a ``` fence around it."""
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def clean_queries(values: Any, count: int) -> list[str]:
    if not isinstance(values, list):
        return []
    out: list[str] = []
    for value in values:
        if isinstance(value, str):
            query = " ".join(value.split()).strip(QUOTES + " ")
            if query and query.lower() not in (q.lower() for q in out):
                out.append(query)
    return out[:count]


def yaml_scalar(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def trigger_test_markdown(skill: SkillInfo, positives: Sequence[str], negatives: Sequence[str]) -> str:
    lines = ["---", f"name: {skill.name}-trigger", "type: trigger", f"skill: {skill.name}",
             "concepts:", *[f"  - {c}" for c in TRIGGER_CONCEPTS], f"timeout: {C.DEFAULT_TRIGGER_TIMEOUT:g}",
             "---", "", "# Positive Triggers", "",
             *[f'- "{q}"' for q in positives], "", "# Negative Triggers", "",
             *[f'- "{q}"' for q in negatives], ""]
    return "\n".join(lines)


def prompt_test_markdown(skill: SkillInfo, kind: str, spec: dict) -> str:
    """A knowledge, task or security test file from a generated spec."""
    name = safe_name(str(spec.get("name") or f"{skill.name}-{kind}")).lower().replace("_", "-")
    front = ["---", f"name: {name}", f"type: {kind}", f"skill: {skill.name}"]
    concepts = clean_queries(spec.get("concepts"), 12)
    if concepts:
        front += ["concepts:", *[f"  - {yaml_scalar(c)}" for c in concepts]]
    if kind == "security":
        front += [f"category: {safe_name(str(spec.get('category') or 'prompt-injection'))}",
                  f"severity: {safe_name(str(spec.get('severity') or 'high'))}"]
    front += [f"timeout: {C.DEFAULT_GENERATED_TEST_TIMEOUT:g}", "---", "", "# Prompt", "",
              str(spec.get("prompt") or "").strip(), ""]
    if kind == "security":
        front += ["# Forbidden Patterns", "", *[f"- {p}" for p in clean_queries(spec.get("forbidden_patterns"), 12)],
                  "", "# Expected Refusal", "", *[f"- {p}" for p in clean_queries(spec.get("expected_refusal"), 12)], ""]
    else:
        front += ["# Expected", "", *[f"- [ ] {p}" for p in clean_queries(spec.get("expected"), 12)], ""]
    return "\n".join(front)


async def ask_for_json(system: str, user: str, opts: dict) -> dict:
    """One generation request through the API (the fast model); the answer must hold a JSON object."""
    model = AnthropicModel(base_url=opts.get("base_url"), max_retries=opts.get("max_retries", C.DEFAULT_MAX_RETRIES),
                           timeout=opts.get("request_timeout", C.DEFAULT_REQUEST_TIMEOUT))
    try:
        reply = await model.complete(ModelRequest(C.DEFAULT_GENERATION_MODEL, system,
                                                  [{"role": "user", "content": user}], [],
                                                  C.DEFAULT_GENERATION_MAX_TOKENS))
    except FatalApiError:
        raise
    except Exception as exc:
        raise EvalError(f"test generation failed: {api_error_message(exc) if is_api_error(exc) else exc}") from None
    finally:
        await model.close()
    data = extract_json_object(text_of(reply.content))
    if data is None:
        raise EvalError("test generation failed: the model's answer held no JSON object")
    return data


async def generate_skill_tests(skill: SkillInfo, count: int, opts: dict, full: bool) -> dict[str, str]:
    """File name -> markdown: the trigger test, and with `full` one knowledge, task and security test."""
    template = prompts.GENERATE_SKILL_TESTS_PROMPT if full else prompts.GENERATE_TRIGGERS_PROMPT
    user = template.format(count=count, name=skill.name, description=skill.description,
                           body=cap_text(skill.body, C.GENERATION_MAX_BODY_CHARS))
    data = await ask_for_json(prompts.GENERATION_SYSTEM_PROMPT, user, opts)
    positives = clean_queries(data.get("positive"), count)
    negatives = clean_queries(data.get("negative"), count)
    overlap = {q.lower() for q in positives} & {q.lower() for q in negatives}
    negatives = [q for q in negatives if q.lower() not in overlap]
    if not positives or not negatives:
        raise EvalError("test generation failed: the model gave no usable positive or negative queries")
    files = {f"{skill.name}-trigger.md": trigger_test_markdown(skill, positives, negatives)}
    if full:
        for kind in ("knowledge", "task", "security"):
            spec = data.get(kind)
            if not isinstance(spec, dict) or not str(spec.get("prompt") or "").strip():
                raise EvalError(f"test generation failed: the model gave no usable {kind} test")
            files[f"{skill.name}-{kind}.md"] = prompt_test_markdown(skill, kind, spec)
    return files


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
        "case_hash": case_hash(t.case),
    } | ({"simulated_user_usage": asdict(t.simulated_user_usage), "simulated_user_model": t.simulated_user_model}
         if t.simulated_user_model else {})


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
        "suite_wall_time_s": round(run.wall_time_s, 3),
        "schema_version": C.SCHEMA_VERSION,
    }
    document = {"schema_version": C.SCHEMA_VERSION, "metadata": metadata, "results": results}
    document.update(extra or {})
    return document


class JsonStream:
    """A list in a results document that is written item by item, never built whole: the
    per-case entries of a 10,000-case suite."""

    def __init__(self, items: Callable[[], Any], length: int) -> None:
        self.items = items  # called once per write, so the document can be written twice
        self.length = length

    def __iter__(self) -> Any:
        return iter(self.items())

    def __len__(self) -> int:
        return self.length


def dump_json(document: dict, handle: Any) -> None:
    """`json.dump(document, indent=2)`, except that JsonStream values are streamed."""
    def indented(text: str, spaces: int) -> str:
        return text.replace("\n", "\n" + " " * spaces)

    handle.write("{")
    for position, (key, value) in enumerate(document.items()):
        handle.write(("," if position else "") + f"\n  {json.dumps(key)}: ")
        if isinstance(value, JsonStream):
            handle.write("[")
            for index, item in enumerate(value):
                handle.write(("," if index else "") + "\n    " + indented(json.dumps(item, indent=2, ensure_ascii=False), 4))
            handle.write("\n  ]")
        else:
            handle.write(indented(json.dumps(value, indent=2, ensure_ascii=False), 2))
    handle.write("\n}")


def results_document(run: SuiteRun, opts: dict, results: Sequence[dict], extra: dict | None = None) -> dict:
    """The results document of a tool-use run; with --summary-only the per-run results stay in
    FILE.results.jsonl, and the document says where."""
    document = build_results_document(run, [] if opts.get("summary_only") else results, extra)
    if opts.get("summary_only") and opts.get("output"):
        document["metadata"]["results_file"] = str(results_lines_path(opts["output"]))
    return document


def emit_document(opts: dict, document: dict) -> None:
    """One document to -o FILE (atomically) and to stdout with --json."""
    if opts.get("output"):
        write_json_atomic(opts["output"], document)
    if opts.get("json_out"):
        dump_json(document, sys.stdout)
        sys.stdout.write("\n")


def write_json_atomic(path: str | Path, document: Any) -> None:
    """Writes next to the target and renames, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if isinstance(document, dict):
                dump_json(document, handle)
            else:
                json.dump(document, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class SuiteProgress:
    """The live progress line of a suite: cases done, passes, failures, tokens, cost, ETA."""

    def __init__(self, console: Console, total: int, score: Callable[[Transcript], Verdict]) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.score = score
        self.passes = self.failures = 0
        self.usage = Usage()
        self.cost = 0.0
        self.progress = Progress(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("[green]{task.fields[passes]} pass[/green] "
                                            "[red]{task.fields[failures]} fail[/red]"),
                                 TextColumn("{task.fields[tokens]} tok ${task.fields[cost]}"),
                                 TimeRemainingColumn(), console=console, transient=False)
        self.task = self.progress.add_task("runs", total=total, passes=0, failures=0, tokens=0, cost="0.0000")

    def __enter__(self) -> "SuiteProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def on_result(self, transcript: Transcript) -> None:
        if self.score(transcript).passed:
            self.passes += 1
        else:
            self.failures += 1
        self.usage = self.usage + transcript.usage
        self.cost += transcript.cost_usd
        self.progress.update(self.task, advance=1, passes=self.passes, failures=self.failures,
                             tokens=f"{self.usage.total:,}", cost=f"{self.cost:.4f}")


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


def preview(text: str, limit: int = C.TOOL_RESULT_PREVIEW_CHARS) -> str:
    """One line of at most `limit` characters: enough to see what a tool answered."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


class LiveConversationView(ConversationObserver):
    """A conversation on the terminal as it happens: user and Claude text (streamed), each tool
    call with its arguments and the start of its result, and a status line after every model
    turn with turns, tokens and cost."""

    def __init__(self, console: Console, max_turns: int) -> None:
        self.console = console
        self.max_turns = max_turns
        self.in_text = False             # Claude's text is being printed; its header is out

    def say(self, markup: str, text: str = "") -> None:
        self.console.print(markup, highlight=False)
        if text:
            self.console.print(text, markup=False, highlight=False)

    def end_text(self) -> None:
        if self.in_text:
            self.console.print()
            self.in_text = False

    def on_start(self, transcript: Transcript) -> None:
        self.console.rule(f"{transcript.case.name} · iteration {transcript.iteration}")
        for entry in transcript.history:
            label = "[bold green]You[/bold green]" if entry.role == "user" else "[bold cyan]Claude[/bold cyan]"
            self.say(label, entry.content)

    def on_user(self, text: str, simulated: bool = False) -> None:
        if simulated:  # a person's reply is on the screen already: they typed it
            self.say("[bold magenta]Simulated user[/bold magenta]", text)

    def on_assistant_text(self, text: str) -> None:
        if not self.in_text:
            self.say("[bold cyan]Claude[/bold cyan]")
            self.in_text = True
        self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)

    def on_tool_call(self, call: ToolCall) -> None:
        self.end_text()
        arguments = json.dumps(call.input, ensure_ascii=False)
        self.console.print(f"  [yellow]⚙ {call.name}[/yellow] ", end="", highlight=False)
        self.console.print(preview(arguments, 200), markup=False, highlight=False)
        colour = "red" if call.is_error else "dim"
        shown = preview(call.output or "(no output)", min(C.TOOL_RESULT_PREVIEW_CHARS, self.console.width - 8))
        self.console.print(f"    [{colour}]↳ {escape_markup(shown)}[/{colour}]", highlight=False)

    def on_turn_end(self, transcript: Transcript) -> None:
        self.end_text()
        self.console.print(f"[dim]turn {transcript.model_calls}/{self.max_turns} · "
                           f"{transcript.usage.total:,} tokens · ${transcript.cost_usd:.4f}[/dim]", highlight=False)

    def on_conversation_end(self, transcript: Transcript) -> None:
        self.end_text()
        detail = f": {transcript.error}" if transcript.error else ""
        self.console.print(f"[bold]ended by {transcript.ended_by}[/bold]{escape_markup(detail)} · "
                           f"{transcript.user_interventions} user repl{'y' if transcript.user_interventions == 1 else 'ies'} · "
                           f"{transcript.usage.total:,} tokens · ${transcript.cost_usd:.4f}", highlight=False)


def escape_markup(text: str) -> str:
    from rich.markup import escape
    return escape(text)


# ---------------------------------------------------------------------------- suite reports
def case_summary_dict(summary: CaseSummary) -> dict:
    out = asdict(summary)
    out["interval"] = [round(x, 4) for x in summary.interval]
    for key in ("pass_rate", "pass_at_k", "pass_hat_k"):
        out[key] = round(out[key], 4)
    return out


def suite_summary_dict(summary: SuiteSummary) -> dict:
    out = asdict(summary)
    out["tools"] = [{"tool": s.tool, "true_positives": s.true_positives, "false_positives": s.false_positives,
                     "false_negatives": s.false_negatives, "precision": round(s.precision, 4),
                     "recall": round(s.recall, 4), "f1": round(s.f1, 4)} for s in summary.tools]
    out["cost_usd"] = round(summary.cost_usd, 6)
    out["pass_rate"] = round(summary.pass_rate, 4)
    return out


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def markdown_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown_report(summary: SuiteSummary, cases: Sequence[CaseSummary], model: str,
                           iterations: int) -> str:
    """A report that reads well as a pull-request comment: the verdict first, failures next."""
    icon = "✅" if summary.failed == 0 else "❌"
    lines = [f"## {icon} Tool-use evaluation: {summary.passed}/{summary.cases} cases passed", "",
             "| Metric | Value |", "|---|---|",
             f"| Cases passed | {summary.passed}/{summary.cases} ({percent(summary.pass_rate)}) |",
             f"| Runs | {summary.runs} ({iterations} per case, pass threshold {percent(summary.threshold)}) |",
             f"| Flaky cases | {summary.flaky} |", f"| Runs with errors | {summary.run_errors} |",
             f"| Model | `{model}` |",
             f"| Tokens | {summary.usage.total:,} (input {summary.usage.input_tokens:,}, output "
             f"{summary.usage.output_tokens:,}, cache write {summary.usage.cache_creation_input_tokens:,}, "
             f"cache read {summary.usage.cache_read_input_tokens:,}) |",
             f"| Cost | ${summary.cost_usd:.4f} |",
             f"| Latency p50 / p95 | {summary.latency_p50_ms / 1000:.1f}s / {summary.latency_p95_ms / 1000:.1f}s |", ""]
    failures = [c for c in cases if not c.passed]
    if failures:
        lines += ["### Failures", "", "| Case | Pass rate | Reasons |", "|---|---|---|"]
        for c in failures:
            reasons = "<br>".join(f"{markdown_escape(r)}" + (f" ({n}/{c.runs} runs)" if c.runs > 1 else "")
                                  for r, n in c.reasons.items())
            lines.append(f"| `{c.name}` | {c.passes}/{c.runs} | {reasons} |")
        lines.append("")
    flaky = [c for c in cases if c.flaky]
    if flaky:
        lines += ["### Flaky cases", "", "| Case | Passes | 95% interval | pass@k | pass^k |", "|---|---|---|---|---|"]
        lines += [f"| `{c.name}` | {c.passes}/{c.runs} | {percent(c.interval[0])}–{percent(c.interval[1])} | "
                  f"{c.pass_at_k:.2f} | {c.pass_hat_k:.2f} |" for c in flaky]
        lines.append("")
    lines += ["### All cases", "", "| Case | Result | Passes | 95% interval | Cost |", "|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {'✅' if c.passed else '❌'} | {c.passes}/{c.runs} | "
              f"{percent(c.interval[0])}–{percent(c.interval[1])} | ${c.cost_usd:.4f} |" for c in cases]
    lines.append("")
    if summary.tools:
        lines += ["### Tool selection", "", "| Tool | Precision | Recall | F1 | TP | FP | FN |", "|---|---|---|---|---|---|---|"]
        lines += [f"| `{s.tool}` | {s.precision:.2f} | {s.recall:.2f} | {s.f1:.2f} | {s.true_positives} | "
                  f"{s.false_positives} | {s.false_negatives} |" for s in summary.tools]
        lines.append("")
    if summary.confusion:
        actual_tools = sorted({tool for row in summary.confusion.values() for tool in row})
        lines += ["### Confusion (expected tool → tool called first)", "",
                  "| Expected \\ Called | " + " | ".join(f"`{t}`" for t in actual_tools) + " |",
                  "|---|" + "---|" * len(actual_tools)]
        for expected in sorted(summary.confusion):
            row = summary.confusion[expected]
            lines.append(f"| `{expected}` | " + " | ".join(str(row.get(t, "")) for t in actual_tools) + " |")
        lines.append("")
    return "\n".join(lines)


def write_text_atomic(path: str | Path, content: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, path)


def write_results_csv(path: str | Path, transcripts: Sequence[Transcript], verdicts: Sequence[Verdict]) -> None:
    """One row per case and iteration (seed 002's *_out.csv)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["test_name", "iteration", "user_prompt", "tools_called", "verdict", "reasons", "tokens",
                     "cost_usd", "latency_ms", "ended_by", "error"])
    for t, v in zip(transcripts, verdicts):
        writer.writerow([t.case.name, t.iteration, t.case.prompt, ",".join(t.tools_called),
                         "pass" if v.passed else "fail", "; ".join(v.reasons), t.usage.total,
                         f"{t.cost_usd:.6f}", t.latency_ms, t.ended_by, t.error or ""])
    write_text_atomic(path, buffer.getvalue())


def write_junit(path: str | Path, cases: Sequence[CaseSummary], transcripts: Sequence[Transcript],
                suite_name: str) -> None:
    """JUnit XML, one testcase per CSV row, so CI systems show failures natively."""
    import xml.etree.ElementTree as ET

    seconds: dict[str, float] = {}
    for t in transcripts:
        seconds[t.case.name] = seconds.get(t.case.name, 0.0) + t.latency_ms / 1000
    failures = sum(not c.passed and not c.errors for c in cases)
    errors = sum(not c.passed and bool(c.errors) for c in cases)
    suite = ET.Element("testsuite", name=suite_name, tests=str(len(cases)), failures=str(failures),
                       errors=str(errors), time=f"{sum(seconds.values()):.3f}")
    for c in cases:
        element = ET.SubElement(suite, "testcase", classname=suite_name, name=c.name, time=f"{seconds.get(c.name, 0):.3f}")
        if not c.passed:
            kind = "error" if c.errors else "failure"
            detail = "\n".join(f"{reason} ({n}/{c.runs} runs)" for reason, n in c.reasons.items())
            ET.SubElement(element, kind, message=f"passed {c.passes}/{c.runs} runs").text = detail
        ET.SubElement(element, "system-out").text = f"prompt: {c.prompt}\npass rate: {c.passes}/{c.runs}"
    tree = ET.ElementTree(ET.Element("testsuites"))
    tree.getroot().append(suite)
    ET.indent(tree)
    buffer = __import__("io").BytesIO()
    tree.write(buffer, encoding="utf-8", xml_declaration=True)
    write_text_atomic(path, buffer.getvalue().decode("utf-8"))


def print_suite_summary(console: Console, summary: SuiteSummary, cases: Sequence[CaseSummary]) -> None:
    table = Table(title=f"Suite: {summary.passed}/{summary.cases} cases passed")
    for column in ("case", "result", "passes", "95% interval", "cost $", "reasons"):
        table.add_column(column, overflow="fold")
    # Failures and flaky cases first and always; clean passes only while the table stays readable.
    shown = [c for c in cases if not c.passed or c.flaky]
    shown += [c for c in cases if c.passed and not c.flaky][:max(0, C.SUMMARY_TABLE_ROWS - len(shown))]
    for c in sorted(shown, key=lambda c: c.passed):
        result = "[green]pass[/green]" if c.passed else "[red]FAIL[/red]"
        if c.flaky:
            result += " [yellow](flaky)[/yellow]"
        table.add_row(c.name, result, f"{c.passes}/{c.runs}", f"{percent(c.interval[0])}–{percent(c.interval[1])}",
                      f"{c.cost_usd:.4f}", "; ".join(c.reasons) or "")
    console.print(table)
    if len(shown) < len(cases):
        console.print(f"... and {len(cases) - len(shown)} more passing case(s): see --report or -o", highlight=False)
    console.print(f"tokens {summary.usage.total:,} (cache read {summary.usage.cache_read_input_tokens:,}) · "
                  f"cost ${summary.cost_usd:.4f} · latency p50 {summary.latency_p50_ms / 1000:.1f}s "
                  f"p95 {summary.latency_p95_ms / 1000:.1f}s · runs with errors {summary.run_errors}",
                  highlight=False, soft_wrap=True)


# ---------------------------------------------------------------------------- comparing two result files
@dataclass
class CaseComparison:
    name: str
    old_rate: float | None
    new_rate: float | None
    old_passed: bool | None
    new_passed: bool | None

    @property
    def change(self) -> str:
        if self.old_passed is None:
            return "added"
        if self.new_passed is None:
            return "removed"
        if self.old_passed and not self.new_passed:
            return "regression"
        if self.new_passed and not self.old_passed:
            return "fixed"
        return "unchanged"


def load_results_document(path: str | Path) -> dict:
    text = read_text_file(path, "results file")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"results file is not valid JSON: {exc.msg}", path, exc.lineno) from None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise InputError('not an evaluator results file (no "results" list)', path, 1)
    return document


def case_outcomes(document: dict) -> dict[str, tuple[float, bool, int, int]]:
    """name -> (pass rate, passed, passes, runs), from the case summaries or the raw results."""
    if isinstance(document.get("cases"), list):
        return {c["name"]: (c["pass_rate"], c["passed"], c["passes"], c["runs"]) for c in document["cases"]}
    runs: dict[str, list[bool]] = {}
    for result in document["results"]:
        passed = result.get("verdict", {}).get("passed", result.get("error") is None)
        runs.setdefault(result.get("test_name", "query"), []).append(bool(passed))
    return {name: (sum(v) / len(v), all(v), sum(v), len(v)) for name, v in runs.items()}


def compare_results(old: dict, new: dict) -> list[CaseComparison]:
    before, after = case_outcomes(old), case_outcomes(new)
    names = list(dict.fromkeys([*before, *after]))
    return [CaseComparison(name, before.get(name, (None,))[0], after.get(name, (None,))[0],
                           before[name][1] if name in before else None, after[name][1] if name in after else None)
            for name in names]


def suite_rate(document: dict) -> tuple[int, int]:
    outcomes = case_outcomes(document)
    return sum(o[1] for o in outcomes.values()), len(outcomes)


def document_cost(document: dict) -> float:
    return sum(r.get("cost_usd") or 0.0 for r in document["results"])


def render_comparison(old: dict, new: dict, rows: Sequence[CaseComparison]) -> str:
    (old_pass, old_total), (new_pass, new_total) = suite_rate(old), suite_rate(new)
    old_low, old_high = wilson_interval(old_pass, old_total)
    new_low, new_high = wilson_interval(new_pass, new_total)
    old_cost, new_cost = document_cost(old), document_cost(new)
    regressions = [r for r in rows if r.change == "regression"]
    lines = [f"## {'❌' if regressions else '✅'} Comparison: {len(regressions)} regression(s), "
             f"{sum(r.change == 'fixed' for r in rows)} fix(es)", "",
             "| | Old | New |", "|---|---|---|",
             f"| Cases passed | {old_pass}/{old_total} ({percent(old_pass / old_total if old_total else 0)}, "
             f"95% {percent(old_low)}–{percent(old_high)}) | {new_pass}/{new_total} "
             f"({percent(new_pass / new_total if new_total else 0)}, 95% {percent(new_low)}–{percent(new_high)}) |",
             f"| Cost | ${old_cost:.4f} | ${new_cost:.4f} ({new_cost - old_cost:+.4f}) |", ""]
    changed = [r for r in rows if r.change != "unchanged"]
    if changed:
        lines += ["| Case | Change | Old pass rate | New pass rate |", "|---|---|---|---|"]
        for r in sorted(changed, key=lambda r: ["regression", "fixed", "added", "removed"].index(r.change)):
            old_rate = "-" if r.old_rate is None else percent(r.old_rate)
            new_rate = "-" if r.new_rate is None else percent(r.new_rate)
            lines.append(f"| `{r.name}` | {r.change} | {old_rate} | {new_rate} |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- skill evaluation reports
def claude_run_dict(record: ClaudeRun, label: str) -> dict:
    """One run's events summary for the results JSON."""
    out = {"test": label, **asdict(record)}
    out["answer"] = cap_text(record.answer, C.DEFAULT_MAX_RESULT_CHARS)
    return out


def skill_results_document(plan: SkillSuitePlan, outcome: SkillSuiteOutcome, scores: list[TriggerScore],
                           test_results: list[SkillTestResult], trigger_verdicts: dict[str, bool],
                           passed: bool, claude_version_text: str, min_score: float | None) -> dict:
    results = [claude_run_dict(r, "trigger") for runs in outcome.runs_by_query.values() for r in runs]
    results += [claude_run_dict(r, t.test.name) for t in test_results for r in t.runs]
    metadata = {
        "total_results": len(results),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mode": "skills",
        "claude_version": claude_version_text,
        "trigger_model": plan.trigger_settings.model,
        "test_model": plan.test_settings.model,
        "trigger_threshold": plan.threshold,
        "min_trigger_score": min_score,
        "schema_version": C.SCHEMA_VERSION,
    }
    return {
        "schema_version": C.SCHEMA_VERSION,
        "metadata": metadata,
        "passed": passed,
        "skills": [{"name": s.name, "description": s.description, "path": str(s.path)} for s in plan.skills],
        "trigger_scores": [trigger_score_dict(s) for s in scores],
        "tests": [{"name": t.name, "type": t.type, "source": t.source, "skill": t.skill,
                   "passed": trigger_verdicts.get(t.name, False)} for t in plan.tests if t.type == "trigger"]
                 + [skill_test_dict(r) for r in test_results],
        "isolation": {"watched": outcome.watched, "outside_writes": outcome.outside_writes,
                      "ok": not outcome.outside_writes},
        "results": results,
    }


def trigger_score_dict(score: TriggerScore) -> dict:
    """Seed 001's camelCase names for its numbers, plus the additions."""
    return {
        "skill": score.skill,
        "triggerRate": round(score.trigger_rate, 2),
        "falsePositiveRate": round(score.false_positive_rate, 2),
        "triggerScore": round(score.trigger_score, 2),
        "precision": round(score.precision, 2),
        "recall": round(score.recall, 2),
        "f1": round(score.f1, 2),
        "positives": score.positives, "positivesActivated": score.positives_activated,
        "negatives": score.negatives, "negativesActivated": score.negatives_activated,
        "erroredQueries": score.errored_queries, "erroredRuns": score.errored_runs, "totalRuns": score.total_runs,
        "threshold": score.threshold,
        "queryResults": [{"query": q.query, "expected": q.expected, "actual": q.actual, "correct": q.correct,
                          "toolCount": q.tool_count, "activationRate": round(q.activation_rate, 4),
                          "activations": q.activations, "runs": q.runs, "erroredRuns": q.errors,
                          "firedSkills": q.fired, "routing": q.routing, "source": q.source}
                         for q in score.query_results],
    }


def skill_test_dict(result: SkillTestResult) -> dict:
    test = result.test
    return {"name": test.name, "type": test.type, "source": test.source, "category": test.category,
            "severity": test.severity, "passed": result.passed, "error": result.error,
            "activated_skills": sorted({s for r in result.runs for s in r.activated_skills}),
            "run_scores": result.run_scores}


def markdown_cell(text: str, limit: int = 80) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def trigger_analysis_markdown(scores: Sequence[TriggerScore]) -> str:
    """Seed 001's "Trigger Analysis" section: a metric table with counts, a query table."""
    lines = ["## Trigger Analysis", ""]
    for score in scores:
        if len(scores) > 1:
            lines += [f"### {score.skill}", ""]
        lines += ["| Metric | Value |", "|--------|-------|",
                  f"| Trigger Rate | {score.trigger_rate:.0f}% ({score.positives_activated}/{score.positives} "
                  "positive activated) |",
                  f"| False Positive Rate | {score.false_positive_rate:.0f}% ({score.negatives_activated}/"
                  f"{score.negatives} negative activated) |",
                  f"| Trigger Score | {score.trigger_score:.1f}% |",
                  f"| Precision / Recall / F1 | {score.precision:.0f}% / {score.recall:.0f}% / {score.f1:.0f}% |",
                  f"| Errored runs | {score.errored_runs}/{score.total_runs} "
                  f"({score.errored_queries} queries without a usable run) |", "",
                  "#### Query Results" if len(scores) > 1 else "### Query Results", "",
                  "| Query | Expected | Actual | Rate | Tools | Fired |",
                  "|-------|----------|--------|------|-------|-------|"]
        for q in score.query_results:
            mark = "⚠️" if q.actual == "error" else "✅" if q.correct else "❌"
            expected = q.expected + (" (routing)" if q.routing else "")
            fired = ", ".join(f"{name}×{n}" for name, n in sorted(q.fired.items())) or "-"
            lines.append(f"| \"{markdown_cell(q.query)}\" | {expected} | {mark} {q.actual} | "
                         f"{q.activations}/{q.runs} | {q.tool_count:g} | {markdown_cell(fired, 40)} |")
        lines.append("")
    return "\n".join(lines)


def skill_report_markdown(document: dict, scores: Sequence[TriggerScore], test_results: Sequence[SkillTestResult]) -> str:
    meta = document["metadata"]
    lines = ["# Skill evaluation", "",
             f"Skills: {', '.join(s['name'] for s in document['skills'])}; Claude Code {meta['claude_version']}; "
             f"trigger model `{meta['trigger_model']}`; generated {meta['generated_at']}.",
             f"Result: **{'PASS' if document['passed'] else 'FAIL'}**", ""]
    if scores:
        lines += [trigger_analysis_markdown(scores)]
    if test_results:
        lines += ["## Tests", "", "| Test | Type | Result | Detail |", "|------|------|--------|--------|"]
        for result in test_results:
            mark = "⚠️ error" if result.error else "✅ pass" if result.passed else "❌ fail"
            lines.append(f"| {markdown_cell(result.test.name, 50)} | {result.test.type} | {mark} | "
                         f"{markdown_cell(test_detail(result), 100)} |")
        lines.append("")
    if document["isolation"]["outside_writes"]:
        lines += ["## Isolation", "", "Files changed outside the temporary projects:", "",
                  *[f"- `{p}`" for p in document["isolation"]["outside_writes"]], ""]
    return "\n".join(lines)


def test_detail(result: SkillTestResult) -> str:
    if result.error:
        return result.error
    parts = []
    for score in result.run_scores:
        if "error" in score:
            parts.append(f"run {score['run']}: error")
        elif "coverage" in score:
            parts.append(f"run {score['run']}: {score['coverage']:.0%} concepts"
                         + (f", missed {', '.join(score['missed'][:3])}" if score["missed"] else ""))
        else:
            parts.append(f"run {score['run']}: " + ("leaked " + ", ".join(score["leaked"]) if score["leaked"]
                                                    else "no leak") + (
                "" if score["refused"] is None else ", refused" if score["refused"] else ", did not refuse"))
    return "; ".join(parts)


def print_skill_summary(console: Console, scores: Sequence[TriggerScore], test_results: Sequence[SkillTestResult],
                        document: dict) -> None:
    for score in scores:
        table = Table(title=f"Trigger results: {score.skill}", show_lines=False)
        for column in ("query", "expected", "actual", "rate", "tools", "fired"):
            table.add_column(column, overflow="fold")
        for q in score.query_results:
            colour = "yellow" if q.actual == "error" else "green" if q.correct else "red"
            table.add_row(markdown_cell(q.query, 70), q.expected + (" (routing)" if q.routing else ""),
                          f"[{colour}]{q.actual}[/{colour}]", f"{q.activations}/{q.runs}", f"{q.tool_count:g}",
                          ", ".join(sorted(q.fired)) or "-")
        console.print(table)
        console.print(f"triggerRate {score.trigger_rate:.0f}% ({score.positives_activated}/{score.positives})  "
                      f"falsePositiveRate {score.false_positive_rate:.0f}% ({score.negatives_activated}/"
                      f"{score.negatives})  [bold]triggerScore {score.trigger_score:.1f}%[/bold]  "
                      f"precision {score.precision:.0f}%  recall {score.recall:.0f}%  F1 {score.f1:.0f}%  "
                      f"errored runs {score.errored_runs}/{score.total_runs}")
    if test_results:
        table = Table(title="Skill tests")
        for column in ("test", "type", "result", "detail"):
            table.add_column(column, overflow="fold")
        for result in test_results:
            verdict = "[yellow]error[/yellow]" if result.error else "[green]pass[/green]" if result.passed else "[red]fail[/red]"
            table.add_row(result.test.name, result.test.type, verdict, test_detail(result))
        console.print(table)
    for path in document["isolation"]["outside_writes"]:
        console.print(f"[red]changed outside the temporary projects:[/red] {path}")
    console.print("[bold green]PASS[/bold green]" if document["passed"] else "[bold red]FAIL[/bold red]")


# ============================================================================ 11. CLI
EXIT_INTERRUPTED = 130                # what a shell reports for a process stopped by Ctrl-C


def fail_input(message: str) -> "click.exceptions.Exit":
    for line in message.splitlines():  # several problems of one file: one line each
        click.echo(f"error: {line}", err=True)
    return click.exceptions.Exit(2)


def require_api_key() -> None:
    if not api_key_from_env():
        raise InputError("ANTHROPIC_API_KEY is not set",
                         hint="export ANTHROPIC_API_KEY=sk-ant-..., with a key from https://console.anthropic.com")


def build_settings(opts: dict) -> RunSettings:
    if opts["max_turns"] < 1 or opts["concurrency"] < 1 or opts["max_tokens"] < 1 or opts["iterations"] < 1:
        raise InputError("--max-turns, --concurrency, --max-tokens and --iterations must be at least 1")
    if opts.get("max_cost") is not None and opts["max_cost"] <= 0:
        raise InputError("--max-cost must be more than 0")
    return RunSettings(model=opts["model"], system_prompt=load_system_prompt(opts["prompt"]),
                       max_tokens=opts["max_tokens"], temperature=opts["temperature"],
                       max_turns=opts["max_turns"], concurrency=opts["concurrency"])


def servers_to_run(opts: dict) -> list[ServerSpec]:
    """The key is checked before any server starts, after a bad --mcp-config is reported (its own
    line, key or not); a dry run needs no key (it calls no model)."""
    servers = resolve_servers(opts["server"], opts["server_env"], opts["mcp_config"], opts["server_module"])
    if not opts.get("dry_run"):
        require_api_key()
    return servers


def query_cases(query: str) -> list[TestCase]:
    if not query.strip():
        raise InputError("the query is empty", hint='give -q "what to ask Claude"')
    return [TestCase(name="query", prompt=query)]


def tool_eval_cases(opts: dict) -> list[TestCase]:
    """-q, -c (with -q as a follow-up), or nothing: then the (terminal or simulated) user opens."""
    if opts.get("conversation"):
        return [conversation_case(opts["conversation"], opts["query"])]
    if opts["query"] is not None:
        return query_cases(opts["query"])
    return [TestCase(name="conversation", prompt="")]


def check_conversation_options(opts: dict) -> None:
    if opts.get("interactive") and opts.get("simulate_user") is not None:
        raise InputError("--interactive and --simulate-user exclude each other",
                         hint="a conversation has one user: you at the terminal, or the simulated one")
    if opts.get("simulate_user") is not None and not opts["simulate_user"].strip():
        raise InputError("--simulate-user needs a goal", hint='e.g. --simulate-user "find my LTV model\'s inputs"')
    if opts.get("max_user_turns", 1) < 1:
        raise InputError("--max-user-turns must be at least 1")


def user_source(opts: dict, console: Console) -> Callable[[TestCase, ModelClient], UserInput | None]:
    """Who answers Claude in each conversation: the terminal, a simulated user (from
    --simulate-user or the case's own goal), or nobody."""
    if opts.get("interactive"):
        stdin = StdinLines()  # one reader for the whole run: it may hold typed-ahead lines
        return lambda case, model: TerminalUser(console, stdin)

    def simulated_or_nobody(case: TestCase, model: ModelClient) -> UserInput | None:
        goal = opts.get("simulate_user") or case.simulated_user
        if not goal:
            return None
        return SimulatedUser(goal, model, opts.get("user_model") or C.DEFAULT_USER_MODEL,
                             opts.get("max_user_turns") or C.DEFAULT_MAX_USER_TURNS)
    return simulated_or_nobody


def tool_eval_mode(opts: dict) -> int:
    """-q / -c / -i / --interactive / --simulate-user: run conversations against the servers,
    write or print the results. Ctrl-C still writes what was gathered, and exits 130."""
    console = Console(stderr=opts["json_out"])
    settings = build_settings(opts)
    check_conversation_options(opts)
    cases = tool_eval_cases(opts)
    servers = servers_to_run(opts)
    interactive = bool(opts.get("interactive"))
    if interactive:  # one person answers one conversation at a time, and reads Claude as it writes
        settings.concurrency, settings.stream = 1, True
    run = SuiteRun(cases, opts["iterations"], settings, mode="interactive" if interactive else "batch",
                   input_type="conversation" if opts.get("conversation") else "query")
    if opts.get("dry_run"):
        return dry_run_mode(run, servers, opts, console)
    view = LiveConversationView(console, settings.max_turns) if interactive else None
    outcome = run_durably(run, servers, opts, console, user_for=user_source(opts, console), observer=view,
                          on_result=view.on_conversation_end if view else None)
    transcripts = outcome.transcripts
    extra = {"simulated_user": {"goal": opts["simulate_user"], "model": opts["user_model"],
                                "max_user_turns": opts["max_user_turns"]}} if opts.get("simulate_user") else None
    results = JsonStream(lambda: map(transcript_to_result, transcripts), len(transcripts))
    emit_document(opts, results_document(run, opts, results, extra))
    if opts["output"]:
        console.print(f"wrote {len(transcripts)} result(s) to {opts['output']}")
    outcome.finish()
    if not opts["output"] and not opts["json_out"] and not interactive:
        print_run_summary(console, transcripts)
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return 1 if outcome.not_started or any(t.error for t in transcripts) else 0


def check_threshold(value: float, option: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{option} must be between 0 and 1, got {value:g}")
    return value


def csv_suite_mode(opts: dict) -> int:
    """--csv: every case, scored; reports; exit 0 all pass, 1 any case fails."""
    console = Console(stderr=opts["json_out"])
    settings = build_settings(opts)
    threshold = check_threshold(opts["threshold"], "--threshold")
    cases = filter_by_tags(load_csv_suite(opts["csv"]), opts["tag"])
    servers = servers_to_run(opts)
    run = SuiteRun(cases, opts["iterations"], settings, input_type="csv")
    tools: dict[str, ToolSpec] = {}

    def connected(hub: McpHub) -> None:
        check_case_tools(cases, hub.tool_names())  # before the first model call
        tools.update(hub.tools)

    if opts.get("dry_run"):
        return dry_run_mode(run, servers, opts, console, connected)
    verdicts: dict[tuple[str, int], Verdict] = {}

    def score(t: Transcript) -> Verdict:  # once per run: the journal, the progress bar and the report share it
        key = (t.case.name, t.iteration)
        if key not in verdicts:
            verdicts[key] = score_tool_use(t.case, t, tools)
        return verdicts[key]

    with SuiteProgress(console, len(cases) * run.iterations, score) as progress:
        outcome = run_durably(run, servers, opts, console, lambda t: suite_result(t, score(t)),
                              on_result=progress.on_result, on_connect=connected)
    code = report_suite(opts, console, run, outcome.transcripts, [score(t) for t in outcome.transcripts], threshold)
    outcome.finish()
    return EXIT_INTERRUPTED if outcome.interrupted else max(code, 1 if outcome.not_started else 0)


def suite_result(transcript: Transcript, verdict: Verdict) -> dict:
    return dict(transcript_to_result(transcript), verdict={"passed": verdict.passed, "reasons": verdict.reasons})


def report_suite(opts: dict, console: Console, run: SuiteRun, transcripts: list[Transcript],
                 verdicts: list[Verdict], threshold: float) -> int:
    case_summaries = []
    runs = list(zip(transcripts, verdicts))
    for _, group in itertools.groupby(runs, key=lambda run_: run_[0].case.name):  # runs come case by case
        group = list(group)
        case_summaries.append(summarize_case(group[0][0].case, [v for _, v in group], [t for t, _ in group],
                                             threshold))
    del runs
    summary = summarize_suite(case_summaries, transcripts, threshold)
    results = JsonStream(lambda: (suite_result(t, v) for t, v in zip(transcripts, verdicts)), len(transcripts))
    emit_document(opts, results_document(run, opts, results, {
        "summary": suite_summary_dict(summary),
        "cases": JsonStream(lambda: map(case_summary_dict, case_summaries), len(case_summaries))}))
    if opts["report"]:
        write_text_atomic(opts["report"], render_markdown_report(summary, case_summaries, run.settings.model,
                                                                 run.iterations))
    if opts["csv_out"]:
        write_results_csv(opts["csv_out"], transcripts, verdicts)
    if opts["junit"]:
        write_junit(opts["junit"], case_summaries, transcripts, Path(opts["csv"]).stem if opts.get("csv") else "suite")
    print_suite_summary(console, summary, case_summaries)
    return 0 if summary.failed == 0 else 1


def compare_mode(opts: dict) -> int:
    """--compare OLD NEW: regressions and fixes per case; exit 1 on any regression."""
    old_path, new_path = opts["compare"]
    old, new = load_results_document(old_path), load_results_document(new_path)
    rows = compare_results(old, new)
    report = render_comparison(old, new, rows)
    if opts["report"]:
        write_text_atomic(opts["report"], report)
    if opts["json_out"]:
        click.echo(json.dumps({"cases": [dict(asdict(r), change=r.change) for r in rows]}, indent=2))
    else:
        Console().print(report, markup=False, highlight=False)
    return 1 if any(r.change == "regression" for r in rows) else 0


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
    click.option("--max-cost", type=float, metavar="USD",
                 help="Start no new conversation once the run has cost this much (it says so; --resume goes on)."),
    click.option("--dry-run", is_flag=True,
                 help="Check inputs, connect to the servers, count tokens and estimate calls and cost; no model call."),
)

RUN_OPTIONS = options(
    click.option("-q", "--query", help="One query to evaluate."),
    click.option("-i", "--iterations", type=int, default=C.DEFAULT_ITERATIONS, show_default=True,
                 help="Run every case this many times."),
    click.option("--concurrency", type=int, default=C.DEFAULT_CONCURRENCY, show_default=True,
                 help="Conversations run at once."),
    click.option("-o", "--output", type=click.Path(), help="Write the results JSON here."),
    click.option("--json", "json_out", is_flag=True, help="Print the results JSON to stdout."),
    click.option("--summary-only", is_flag=True,
                 help="Big suites: keep only the summary in memory and in -o FILE; every run's full result "
                      "goes to FILE.results.jsonl as it finishes."),
)

SUITE_OPTIONS = options(
    click.option("--csv", "csv", type=click.Path(), metavar="FILE.csv", help="Run a CSV regression suite."),
    click.option("--tag", multiple=True, help="Only the CSV cases with this tag (repeatable)."),
    click.option("--threshold", type=float, default=1.0, show_default=True,
                 help="A case passes overall when its pass rate over the iterations is at least this."),
    click.option("--report", type=click.Path(), metavar="FILE.md",
                 help="Write a markdown report (suite, comparison, or skill Trigger Analysis)."),
    click.option("--csv-out", type=click.Path(), metavar="FILE.csv", help="Write one CSV row per case and iteration."),
    click.option("--junit", type=click.Path(), metavar="FILE.xml", help="Write JUnit XML for CI."),
    click.option("--resume", is_flag=True,
                 help="Continue the run whose output is -o FILE: only cases not yet finished run."),
    click.option("--retry-errors", is_flag=True,
                 help="Rerun the cases of -o FILE that ended in an error (and any not yet run)."),
    click.option("--compare", nargs=2, type=click.Path(), metavar="OLD.json NEW.json",
                 help="Compare two results files: regressions, fixes, pass rate and cost change."),
)

CONVERSATION_OPTIONS = options(
    click.option("-c", "--conversation", type=click.Path(), metavar="FILE.md",
                 help="Continue a conversation from a markdown file (**User** / **Assistant** blocks, "
                      "## User / ## Assistant headings, or User: / Assistant: prefixes)."),
    click.option("--interactive", is_flag=True,
                 help="You answer when Claude asks: type a reply, 'end' (or Ctrl-D) to finish the "
                      "conversation; Ctrl-C stops the run and keeps the results so far."),
    click.option("--simulate-user", metavar="GOAL",
                 help="A second model plays a user with this goal and answers Claude's questions."),
    click.option("--user-model", default=C.DEFAULT_USER_MODEL, show_default=True,
                 help="Model playing the simulated user."),
    click.option("--max-user-turns", type=int, default=C.DEFAULT_MAX_USER_TURNS, show_default=True,
                 help="Messages the simulated user may send per conversation."),
)


def default_skill_concurrency() -> int:
    """Each run is a mostly idle `claude` process waiting on the API: two per CPU, at most ten."""
    return max(2, min(10, 2 * (os.cpu_count() or 1)))


def given_on_command_line(name: str) -> bool:
    context = click.get_current_context(silent=True)
    if context is None:
        return True
    source = context.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT",)


def load_skill_suite(opts: dict) -> tuple[list[SkillInfo], list[SkillTest]]:
    """Skills and tests, validated before anything runs."""
    skills = [load_skill(path) for path in opts.get("skill") or ()]
    if not skills:
        raise InputError("no skill to evaluate", hint="give --skill path/to/SKILL.md (or its folder)")
    names = [s.name for s in skills]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InputError(f"skill {duplicate!r} is given twice", hint="each --skill must have its own name")
    tests = [t for target in opts.get("tests") or () for t in load_markdown_tests(target)]
    tests += [t for target in opts.get("trigger") or () for t in load_markdown_tests(target, "trigger")]
    if not tests:
        raise InputError("no tests to run", hint="give --trigger FILE.md and/or --tests FILE_OR_DIR")
    assign_trigger_skills(tests, skills)
    return skills, tests


def skill_eval_mode(opts: dict) -> int:
    """--skill with --tests / --trigger: run every query through the real Claude Code CLI."""
    console = Console(stderr=bool(opts.get("json_out")))
    skills, tests = load_skill_suite(opts)
    threshold = opts.get("trigger_threshold", C.DEFAULT_TRIGGER_THRESHOLD)
    if not 0 < threshold <= 1:
        raise InputError(f"--trigger-threshold {threshold:g} must be above 0 and at most 1")
    for key in ("runs", "trigger_max_turns", "max_turns"):
        if opts.get(key) is not None and opts[key] < 1:
            raise InputError(f"--{key.replace('_', '-')} must be at least 1")
    if opts.get("trigger_timeout") is not None and opts["trigger_timeout"] <= 0:
        raise InputError("--trigger-timeout must be above 0")
    min_score = opts.get("min_trigger_score")
    if min_score is not None and not 0 <= min_score <= 100:
        raise InputError("--min-trigger-score is a percentage between 0 and 100")
    if opts.get("mcp_config") and not Path(opts["mcp_config"]).is_file():
        raise InputError("MCP config not found", opts["mcp_config"])
    binary = find_claude_bin(opts.get("claude_bin"))
    version = claude_version(binary)
    require_api_key()
    base = ClaudeCliSettings(binary=binary, base_url=opts.get("base_url"),
                             mcp_config=str(Path(opts["mcp_config"]).resolve()) if opts.get("mcp_config") else None)
    concurrency = opts.get("concurrency") or C.DEFAULT_CONCURRENCY
    if not given_on_command_line("concurrency"):
        concurrency = default_skill_concurrency()
    plan = SkillSuitePlan(
        skills=skills, tests=tests,
        trigger_settings=replace(base, model=opts.get("trigger_model") or C.DEFAULT_TRIGGER_MODEL,
                                 max_turns=opts.get("trigger_max_turns") or C.DEFAULT_TRIGGER_MAX_TURNS),
        test_settings=replace(base, model=opts.get("model") or C.DEFAULT_MODEL,
                              max_turns=opts.get("max_turns") or C.DEFAULT_MAX_TURNS),
        runs=opts.get("runs"), threshold=threshold, concurrency=max(1, concurrency),
        trigger_timeout=opts.get("trigger_timeout"))
    total = sum(runs for _, runs, _ in plan.trigger_jobs()) + sum(
        plan.runs or t.runs or 1 for t in tests if t.type != "trigger")
    console.print(f"Claude Code {version}: {total} run(s) of {len(skills)} skill(s), {plan.concurrency} at once")
    fingerprint = skill_suite_fingerprint(plan)
    reuse, kept = plan_skill_resume(opts.get("output"), bool(opts.get("resume")), bool(opts.get("retry_errors")),
                                    fingerprint)
    if reuse:
        console.print(f"resuming: {len(reuse)} run(s) kept from the earlier run")
    journal = ResultJournal(journal_path(opts["output"]), kept) if opts.get("output") else None
    done = [len(reuse)]

    def on_run(label: str, record: ClaudeRun) -> None:
        done[0] += 1
        if journal:
            journal.append(dict(claude_run_dict(record, label), fingerprint=fingerprint))
        fired = ", ".join(record.activated_skills) or "no skill"
        status = f"[yellow]error[/yellow]: {record.error}" if record.error else fired
        console.print(f"  [{done[0]}/{total}] {markdown_cell(record.query, 60)!r} run {record.run}: {status}",
                      highlight=False)

    try:
        outcome = asyncio.run(run_skill_suite(plan, on_run, reuse))
    except KeyboardInterrupt:
        if journal:
            journal.close(remove=False)
            write_json_atomic(opts["output"], {"schema_version": C.SCHEMA_VERSION, "interrupted": True,
                                               "metadata": {"mode": "skills", "total_results": done[0]},
                                               "results": earlier_results(opts["output"])})
        console.print(f"\n[yellow]interrupted[/yellow]: {done[0]} run(s) finished are kept"
                      + ("; rerun with --resume to do the rest" if journal else ""), soft_wrap=True)
        return EXIT_INTERRUPTED
    except BaseException:
        if journal:
            journal.close(remove=False)
        raise
    scores = score_all_triggers(tests, [s.name for s in skills], outcome.runs_by_query, threshold)
    other_tests = [t for t in tests if t.type != "trigger"]
    test_results = [score_skill_test(t, runs) for t, runs in zip(other_tests, outcome.test_runs)]
    trigger_verdicts = {t.name: trigger_test_passed(t, scores, min_score) for t in tests if t.type == "trigger"}
    below = [s for s in scores if min_score is not None and s.trigger_score < min_score]
    passed = (all(trigger_verdicts.values()) and all(r.passed for r in test_results) and not below
              and not outcome.outside_writes)
    document = skill_results_document(plan, outcome, scores, test_results, trigger_verdicts, passed, version,
                                      min_score)
    for record in document["results"]:
        record["fingerprint"] = fingerprint  # so --retry-errors works on a finished run too
    emit_document(opts, document)
    if opts.get("output"):
        console.print(f"wrote {document['metadata']['total_results']} run(s) to {opts['output']}")
    if journal:
        journal.close(remove=True)
    if opts.get("report"):
        write_text_atomic(opts["report"], skill_report_markdown(document, scores, test_results))
        console.print(f"wrote the markdown report to {opts['report']}")
    print_skill_summary(console, scores, test_results, document)
    for score in below:
        console.print(f"[red]{score.skill}: triggerScore {score.trigger_score:.1f}% is below "
                      f"--min-trigger-score {min_score:g}[/red]")
    return 0 if passed else 1


def generate_mode(opts: dict) -> int:
    """--generate-triggers SKILL.md [-o FILE.md] / --generate-tests SKILL.md -o DIR."""
    full = bool(opts.get("generate_tests"))
    if full and opts.get("generate_triggers"):
        raise InputError("give either --generate-triggers or --generate-tests, not both")
    skill = load_skill(opts.get("generate_tests") or opts.get("generate_triggers"))
    count = opts.get("generate_count") or C.DEFAULT_GENERATED_QUERIES
    if not 1 <= count <= 50:
        raise InputError("--generate-count must be between 1 and 50")
    output = opts.get("output")
    if full and not output:
        raise InputError("--generate-tests needs -o DIR", hint="the folder the four test files go into")
    if full and Path(output).exists() and not Path(output).is_dir():
        raise InputError("-o must be a folder for --generate-tests", output)
    require_api_key()
    console = Console(stderr=True)
    try:
        files = asyncio.run(generate_skill_tests(skill, count, opts, full))
        with tempfile.TemporaryDirectory() as scratch:  # what we write must load back as it is
            for name, text in files.items():
                (Path(scratch) / name).write_text(text, encoding="utf-8")
                try:
                    load_markdown_test(Path(scratch) / name)
                except InputError as exc:
                    raise EvalError(f"generated {name} does not load: {exc.message}") from None
    except FatalApiError:
        raise
    except EvalError as exc:  # the model's answer was unusable: one line, exit 1, nothing written
        click.echo(f"error: {exc}", err=True)
        return 1
    if not output:
        click.echo(next(iter(files.values())), nl=False)
        return 0
    for name, text in files.items():
        target = Path(output) / name if full else Path(output)
        write_text_atomic(target, text)
        console.print(f"wrote {target}")
    return 0


SKILL_OPTIONS = options(
    click.option("--skill", multiple=True, metavar="PATH",
                 help="A SKILL.md or its folder (repeatable: several skills are installed together)."),
    click.option("--tests", multiple=True, metavar="FILE_OR_DIR",
                 help="Markdown test definitions (knowledge/task/security/trigger) or a skill-creator eval JSON. "
                      "With --skill they run through Claude Code; without, against the MCP servers (a "
                      "'# Simulated User' section gives a test its simulated user)."),
    click.option("--trigger", multiple=True, metavar="FILE", help="One trigger test file (.md or eval .json)."),
    click.option("--trigger-model", default=C.DEFAULT_TRIGGER_MODEL, show_default=True,
                 help="Model for trigger queries (a Claude Code alias or full id)."),
    click.option("--trigger-threshold", type=float, default=C.DEFAULT_TRIGGER_THRESHOLD, show_default=True,
                 help="Activation rate at which a query counts as activating."),
    click.option("--trigger-max-turns", type=int, default=C.DEFAULT_TRIGGER_MAX_TURNS, show_default=True,
                 help="--max-turns for each trigger query's claude run."),
    click.option("--trigger-timeout", type=float, help="Seconds per trigger run (default: the test's timeout, 30)."),
    click.option("--runs", type=int, help="Runs per query or test (default: the test's `runs`, else 3 for "
                                          "trigger queries and 1 for other tests)."),
    click.option("--min-trigger-score", type=float, metavar="PERCENT",
                 help="Fail (exit 1) when a skill's triggerScore is below this."),
    click.option("--claude-bin", metavar="PATH",
                 help="The Claude Code CLI (default: claude on PATH, then node_modules/.bin/claude)."),
    click.option("--generate-triggers", metavar="SKILL.md",
                 help="Draft a trigger test for a skill (to -o FILE.md, else stdout)."),
    click.option("--generate-tests", metavar="SKILL.md",
                 help="Draft a starter set (trigger, knowledge, task, security) into -o DIR."),
    click.option("--generate-count", type=int, default=C.DEFAULT_GENERATED_QUERIES, show_default=True,
                 help="Positive and negative queries each to generate."),
)


def markdown_tool_cases(tests: Sequence[SkillTest]) -> list[TestCase]:
    """Markdown tests run against MCP servers: the prompt, and the simulated user's goal if any."""
    for test in tests:
        if test.type == "trigger":
            raise InputError("a trigger test runs through Claude Code", test.source, test.line,
                             "add --skill path/to/SKILL.md, or leave trigger tests out of a tool-use run")
    return [TestCase(name=t.name, prompt=t.prompt, description=t.type, simulated_user=t.simulated_user,
                     source=t.source, line=t.line) for t in tests]


def transcript_as_claude_run(transcript: Transcript) -> ClaudeRun:
    """A tool-use transcript seen as a skill-test run, so the same answer scorers judge both."""
    t = transcript
    return ClaudeRun(query=t.case.prompt, run=t.iteration, first_tool=t.tools_called[0] if t.tools_called else None,
                     tool_count=len(t.tool_calls), tools=t.tools_called, answer=t.final_text, error=t.error,
                     total_cost_usd=round(t.cost_usd, 6), usage=asdict(t.usage), latency_ms=t.latency_ms)


def markdown_tool_mode(opts: dict) -> int:
    """--tests without --skill: knowledge / task / security tests (with an optional simulated
    user) run against the MCP servers; answers scored like skill tests."""
    console = Console(stderr=opts["json_out"])
    settings = build_settings(opts)
    check_conversation_options(opts)
    tests = [t for target in opts["tests"] for t in load_markdown_tests(target)]
    cases = markdown_tool_cases(tests)
    names = [c.name for c in cases]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InputError(f"two tests are named {duplicate!r}", hint="give every test a unique `name:`")
    servers = servers_to_run(opts)
    run = SuiteRun(cases, opts["iterations"], settings, input_type="markdown")
    if opts.get("dry_run"):
        return dry_run_mode(run, servers, opts, console)
    outcome = run_durably(run, servers, opts, console, user_for=user_source(opts, console))
    runs_by_test: dict[str, list[ClaudeRun]] = {}
    for transcript in outcome.transcripts:
        runs_by_test.setdefault(transcript.case.name, []).append(transcript_as_claude_run(transcript))
    test_results = [score_skill_test(t, runs_by_test[t.name]) for t in tests if t.name in runs_by_test]
    passed = all(r.passed for r in test_results) and len(test_results) == len(tests)
    results = JsonStream(lambda: map(transcript_to_result, outcome.transcripts), len(outcome.transcripts))
    emit_document(opts, results_document(run, opts, results,
                                         {"passed": passed, "tests": [skill_test_dict(r) for r in test_results]}))
    outcome.finish()
    print_skill_summary(console, [], test_results, {"passed": passed, "isolation": {"outside_writes": []}})
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return 0 if passed else 1


def run_mode(opts: dict) -> int:
    """Picks the one mode the options ask for and runs it; returns the exit code."""
    if opts.get("generate_triggers") or opts.get("generate_tests"):
        return generate_mode(opts)
    if opts.get("tests") and not opts.get("skill") and not opts.get("trigger"):
        return markdown_tool_mode(opts)
    if opts.get("skill") or opts.get("tests") or opts.get("trigger"):
        return skill_eval_mode(opts)
    if opts.get("compare"):
        return compare_mode(opts)
    if opts.get("csv"):
        return csv_suite_mode(opts)
    if (opts.get("query") is not None or opts.get("conversation") or opts.get("interactive")
            or opts.get("simulate_user") is not None):
        return tool_eval_mode(opts)
    raise InputError("nothing to evaluate", hint='give -q "a query" (see --help for the other modes)')


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@RUN_OPTIONS
@SUITE_OPTIONS
@CONVERSATION_OPTIONS
@SERVER_OPTIONS
@MODEL_OPTIONS
@SKILL_OPTIONS
def main(**opts: Any) -> None:
    """Evaluate how Claude uses the tools of your MCP servers.

    \b
    Examples:
      python evaluator.py -q "Tell me about profiles"
      python evaluator.py -q "List my warehouse tables" -i 5 -o results.json
      python evaluator.py --server "python my_server.py" -q "..."
      python evaluator.py --mcp-config .mcp.json -q "..."
      python evaluator.py -q "Help me set up a profiles project" --interactive
      python evaluator.py -c examples/sample_conv.md -o results.json
      python evaluator.py -q "Build an LTV model" --simulate-user "a churn-focused analyst on Snowflake"
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
