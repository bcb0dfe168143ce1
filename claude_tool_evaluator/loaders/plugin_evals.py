"""A plugin and its eval suite as `claude plugin eval` (Claude Code 2.1.332) reads them: the
manifest (`.claude-plugin/plugin.json`), its skills, commands and agents, the eval folder (the
manifest's `experimental.evals`, else `evals/`), each case (`case.yaml` and/or `prompt.md`), its
graders (`graders/*.md` or a `graders:` list) of six kinds with Claude Code's fields and defaults,
and the static findings made before any spend.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, the loaders above it."""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, InputProblems
from ..files import read_text_file, resolves_inside
from .servers import PLUGIN_MANIFEST, read_plugin_manifest
from .skills import frontmatter_line, load_frontmatter_yaml, split_frontmatter

__all__ = [
    "MAX_RUNS",
    "MockServerFiles",
    "MockTool",
    "Plugin",
    "PluginCase",
    "PluginGrader",
    "ToolStep",
    "case_warnings",
    "eval_dir_of",
    "outside_links",
    "plugin_name_of",
    "installed_plugins",
    "load_case",
    "load_plugin",
    "plugin_name_of",
    "python_pattern",
    "resolve_plugin",
]

# Claude Code's case schema (2.1.332): what a case.yaml's top level and its `execution` hold,
# and which of those a prompt.md's frontmatter may set (anything else there is refused).
_CASE_TOP_KEYS = (
    "schema_version",
    "name",
    "description",
    "tags",
    "plugins",
    "runs",
    "expected_outcome",
)
_EXECUTION_KEYS = (
    "model",
    "max_turns",
    "timeout_seconds",
    "allowed_tools",
    "disallowed_tools",
    "artifact_publish",
    "growthbook_overrides",
    "append_system_prompt",
    "env",
)
_CASE_YAML_KEYS = (*_CASE_TOP_KEYS, "context", "execution", "graders")
# What Claude Code acts on that a `plugin` run here does not (yet): said in one warning line.
_NOT_HONOURED_EXECUTION = (
    "artifact_publish",
    "growthbook_overrides",
    "append_system_prompt",
    "env",
)
_SUPPORTED_SCHEMA_MAJOR = 1
_DEFAULT_RUNS, MAX_RUNS = 3, 50
_DEFAULT_MAX_TURNS, _MAX_TURNS = 10, 200
_DEFAULT_TIMEOUT_SECONDS, _MAX_TIMEOUT_SECONDS = 300, 3600

_TARGETS = ("trace", "last_message", "files", "mock_calls")
_COMMON_GRADER_FIELDS = ("type", "name", "weight", "arm")
# Each kind's own fields beside COMMON_GRADER_FIELDS; a field not listed is refused (Claude Code's
# schema is strict). The body of a grader file fills `criteria` (llm, baseline) or `pattern` (regex).
_GRADER_FIELDS = {
    "regex": ("target", "pattern", "flags", "match"),
    "tool_order": ("before", "after"),
    "tool_used": ("tool", "input_match", "min", "max"),
    "file_exists": ("path", "exists"),
    "llm": ("criteria", "focus"),
    "baseline": ("baseline_file", "criteria"),
}
_REQUIRED_GRADER_FIELDS = {
    "regex": ("pattern",),
    "tool_order": ("before", "after"),
    "tool_used": ("tool",),
    "file_exists": ("path",),
    "llm": ("criteria",),
    "baseline": ("baseline_file", "criteria"),
}
_BODY_FIELD = {"llm": "criteria", "baseline": "criteria", "regex": "pattern"}
_MATCH_RULE = re.compile(r"contains|not_contains|count:\d+")
_JS_FLAGS = re.compile(r"[dgimsuvy]*")
_SLASH_COMMAND = re.compile(r"^/([A-Za-z0-9_.-]+):([A-Za-z0-9_.:-]+)")
_AGENT_REFERENCE = re.compile(r"\b([A-Za-z0-9_-]+):([A-Za-z0-9_-]+)\b")


# ---------------------------------------------------------------------------- mocks (Claude Code 2.1.332)
_MOCK_RESPONDERS = ("fixed",)
_MOCK_FIELDS = ("type", "expect", "error", "abort_when", "tools")
_MOCK_FILE_NAME = re.compile(r"[A-Za-z0-9_-]+")  # Claude Code's rule: the tool's name, plainly
_SERVER_RESPONDER = "_server.md"  # Claude Code's server-wide responder (type: agent only)
# what Claude Code 2.1.332 reads in a mock file that this product does not run or that does not
# belong there: each refused with one line naming the file
_MOCK_REFUSALS = {
    "agent": "type: agent (a model playing the server) is not run by this product: write the "
    "tool's answer (type: fixed), or record it from the real server (--record-mocks)",
    "abort_when": "`abort_when:` needs `type: agent`; a fixed responder guards its input with "
    "`expect:`",
    "tools": "`tools:` belongs in mocks/<server>/_server.md (a server-wide agent responder)",
}


@dataclass
class MockTool:
    """One mocked tool: what the model sees of it (from `_tools.json`; without one, a permissive
    schema and no description) and its answer (`<tool>.md`: frontmatter `type: fixed`, optional
    `expect:` of input fields and `error: true`; the body the answer, `{{input.FIELD}}` filled in).
    A tool listed without a `<tool>.md` has no answer: a call of it is unmocked."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    answer: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    error: bool = False


@dataclass
class MockServerFiles:
    """`mocks/<server>/`: the stand-in for one of a plugin's MCP servers."""

    server: str
    folder: Path
    tools: list[MockTool]
    listed: bool  # whether `_tools.json` gave the tool list
    warnings: list[str] = field(default_factory=list)


def _mock_tool_files(folder: Path) -> dict[str, MockTool]:
    tools = {}
    for path in sorted(folder.glob("*.md")):
        if path.name == _SERVER_RESPONDER:
            raise InputError(
                "a server-wide responder (type: agent, a model playing the server) is not run by "
                "this product",
                path,
                1,
                "write one <tool>.md per tool (type: fixed), or record them (--record-mocks)",
            )
        if not _MOCK_FILE_NAME.fullmatch(path.stem):
            raise InputError(
                'name responder files after the tool (letters, digits, "_" and "-" only), e.g. '
                "list_issues.md",
                path,
            )
        raw = read_text_file(path, "mock")
        data, body, _ = split_frontmatter(raw.lstrip("\ufeff"), path, required=False)
        for key in data:
            if key not in _MOCK_FIELDS:
                raise InputError(
                    f"unknown mock field {key!r} (expected one of: {', '.join(_MOCK_FIELDS)})",
                    path,
                    frontmatter_line(raw, key),
                )
            if key in _MOCK_REFUSALS:
                raise InputError(_MOCK_REFUSALS[key], path, frontmatter_line(raw, key))
        kind = data.get("type", "fixed")
        if kind in _MOCK_REFUSALS:
            raise InputError(_MOCK_REFUSALS[kind], path, frontmatter_line(raw, "type"))
        if "error" in data and not isinstance(data["error"], bool):
            raise InputError("error must be true or false", path, frontmatter_line(raw, "error"))
        if kind not in _MOCK_RESPONDERS:
            raise InputError(
                f"mock type must be {' | '.join(_MOCK_RESPONDERS)}, not {kind!r}",
                path,
                frontmatter_line(raw, "type"),
            )
        expect = data.get("expect") or {}
        if not isinstance(expect, dict):
            raise InputError("expect must map input fields to values", path)
        tools[path.stem] = MockTool(
            path.stem, answer=body.strip(), expect=expect, error=data.get("error") is True
        )
    return tools


def _mock_server(folder: Path) -> MockServerFiles:
    """One server's mocks: `_tools.json` (`{"tools": [{name, description, inputSchema}]}`) and
    each `<tool>.md`; a tool answered but not listed is served as Claude Code serves it, with a
    permissive schema and no description, and a warning says so."""
    answers = _mock_tool_files(folder)
    listing = folder / "_tools.json"
    server = MockServerFiles(folder.name, folder, [], listing.is_file())
    if listing.is_file():
        try:
            data = json.loads(read_text_file(listing, "mock tool list"))
        except ValueError:
            raise InputError("not valid JSON", listing, 1) from None
        entries = data.get("tools") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise InputError('must be {"tools": [{name, description, inputSchema}]}', listing, 1)
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise InputError("each tool needs a name", listing, 1)
            answered = answers.pop(entry["name"], None) or MockTool(entry["name"])
            answered.description = str(entry.get("description") or "") or None
            schema = entry.get("inputSchema")
            answered.input_schema = schema if isinstance(schema, dict) else {"type": "object"}
            server.tools.append(answered)
    for name, tool in answers.items():
        server.tools.append(tool)
        server.warnings.append(
            f"mocks/{folder.name}/{name}: no _tools.json lists it: served with a permissive "
            "schema and no description"
        )
    return server


def _case_mocks(eval_dir: Path, case_folder: Path) -> dict[str, MockServerFiles]:
    """The mocks a case's runs serve, by server: the suite's `EVALDIR/mocks/<server>/`, each
    overridden by the case's own `CASE/mocks/<server>/`."""
    found: dict[str, MockServerFiles] = {}
    for base in (eval_dir / "mocks", case_folder / "mocks"):
        if base.is_dir():
            for folder in sorted(p for p in base.iterdir() if p.is_dir()):
                found[folder.name] = _mock_server(folder)
    return found


@dataclass
class ToolStep:
    """One side of a tool_order grader: a tool, and a regex its input (as JSON) must match."""

    tool: str
    input_match: str | None = None


@dataclass
class PluginGrader:
    """One grader with Claude Code's defaults filled in."""

    name: str
    kind: str
    weight: float = 1.0
    arm: str | None = None  # with-only | both | None (unset)
    config: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    line: int = 1

    def get(self, key: str, default: Any = None) -> Any:
        return self.config.get(key, default)


@dataclass
class PluginCase:
    name: str
    folder: Path
    prompt: str
    graders: list[PluginGrader]
    runs: int = _DEFAULT_RUNS
    max_turns: int = _DEFAULT_MAX_TURNS
    timeout_seconds: int = _DEFAULT_TIMEOUT_SECONDS
    allowed_tools: list[str] = field(default_factory=list)
    disallowed_tools: list[str] = field(default_factory=list)
    model: str | None = None
    tags: list[str] = field(default_factory=list)
    scaffold_script: str | None = None
    source: Path | None = None  # the file the case's prompt came from
    not_honoured: list[str] = field(default_factory=list)  # fields read but not acted on here
    # the plugin folders the arm with the plugin loads: the case's `plugins:` (paths from its
    # folder), else the target when it is a plugin (a root suite's case without any: none)
    plugins: list[Path] = field(default_factory=list)
    mocks: dict[str, MockServerFiles] = field(default_factory=dict)  # by server (see _case_mocks)


@dataclass
class Plugin:
    """A plugin folder: its name from the manifest (else the folder), what it ships, its suite."""

    folder: Path
    name: str
    manifest: dict[str, Any]
    skills: list[str]
    commands: list[str]
    agents: list[str]
    eval_dir: Path
    cases: list[PluginCase] = field(default_factory=list)
    # the case files Claude Code would not load either: each skipped with its one line
    skipped: list[InputError] = field(default_factory=list)

    @property
    def is_plugin(self) -> bool:
        """Whether the target is a plugin (a manifest); else a suite root whose cases name theirs."""
        return bool(self.manifest)

    @property
    def mcp_config(self) -> Path | None:
        path = self.folder / ".mcp.json"
        return path if path.is_file() else None


def _shipped_names(folder: Path, kind: str) -> list[str]:
    """The plugin's skills (`skills/<name>/SKILL.md`), commands or agents (`<kind>/<name>.md`)."""
    base = folder / kind
    if not base.is_dir():
        return []
    if kind == "skills":
        return sorted(p.parent.name for p in base.glob("*/SKILL.md"))
    return sorted(p.stem for p in base.glob("*.md"))


def eval_dir_of(folder: Path, manifest: dict[str, Any]) -> Path:
    """The manifest's `experimental.evals` (a folder inside the plugin), else `evals/`; one
    that resolves outside the plugin (`../outside-evals`, an absolute path, a link out) is one
    line naming the manifest, for every verb that reads a suite."""
    experimental = manifest.get("experimental")
    named = experimental.get("evals") if isinstance(experimental, dict) else None
    if not isinstance(named, str) or not named.strip():
        named = "evals"
    found = folder / named
    if not resolves_inside(found, folder):
        raise InputError(
            f"the eval folder {named!r} resolves outside the plugin ({found.resolve()})",
            folder / PLUGIN_MANIFEST if named != "evals" else found,
            1 if named != "evals" else None,
            "a plugin's suite stays in its folder: name a folder inside it in experimental.evals",
        )
    return found.resolve()


def plugin_name_of(folder: Path, manifest: dict[str, Any] | None = None) -> str:
    """A plugin's name as Claude Code names it: the manifest's `name` (read when not given), else
    its folder's; refused when it could name a place: a path separator, `..`, a leading dot or
    an absolute path (file names are made from it)."""
    if manifest is None:
        manifest, _ = read_plugin_manifest(folder)
    given = manifest.get("name")
    name = given if isinstance(given, str) and given else folder.name
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]*", str(name)) or ".." in str(name):
        raise InputError(
            f"plugin name {name!r} is not a plain name",
            folder / PLUGIN_MANIFEST,
            1,
            'give "name" letters, digits, - and _ only (e.g. "my-plugin")',
        )
    return str(name)


_UNWALKED = frozenset({".git", "results", "__pycache__"})  # what a suite's copy leaves out


def outside_links(folder: Path, root: Path, what: str) -> list[InputError]:
    """Every entry of `folder` (links not followed; its results and VCS folders left out) that
    resolves outside `root`, one line each naming it: a prompt.md linked to ~/.ssh/id_rsa is
    refused before it is read, let alone sent."""
    found = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _UNWALKED)
        for name in sorted([*dirs, *files]):
            path = Path(here) / name
            if not resolves_inside(path, root):
                found.append(
                    InputError(
                        f"resolves outside the {what} (to {path.resolve()})",
                        path,
                        hint=f"a suite file stays in its {what}: copy it in instead of linking it",
                    )
                )
        dirs[:] = [d for d in dirs if resolves_inside(Path(here) / d, root)]
    return found


def _positive_int(value: Any, key: str, limit: int, path: Path, line: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise InputError(
            f"{key} must be a whole number from 1 to {limit}, not {value!r}", path, line
        )
    return value


def _string_list(value: Any, key: str, path: Path, line: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{key} must be a list of strings", path, line, f"{key}: [Skill, Read]")
    return list(value)


def _tool_step(value: Any, key: str, path: Path, line: int) -> ToolStep:
    if isinstance(value, str):
        return ToolStep(value)
    if isinstance(value, dict) and isinstance(value.get("tool"), str):
        unknown = sorted(set(value) - {"tool", "input_match"})
        if unknown:
            raise InputError(f"{key}: unknown field {unknown[0]!r} (tool, input_match)", path, line)
        match = value.get("input_match")
        return ToolStep(value["tool"], match if isinstance(match, str) else None)
    raise InputError(f"{key} must be a tool name or {{tool, input_match}}", path, line)


def _target_value(value: Any, key: str, path: Path, line: int) -> str | dict:
    if value in _TARGETS:
        return str(value)
    if (
        isinstance(value, dict)
        and value.get("source") == "file"
        and isinstance(value.get("path"), str)
    ):
        return {"source": "file", "path": value["path"]}
    raise InputError(
        f"{key} must be one of {', '.join(_TARGETS)} or {{source: file, path: ...}}", path, line
    )


def python_pattern(pattern: str) -> str:
    """A JavaScript RegExp's source as Python's re reads it: JS named groups `(?<name>...)` and
    their back references `\\k<name>` in Python's spelling (lookbehinds are left as they are)."""
    named = re.sub(r"\(\?<(?![=!])([A-Za-z_][A-Za-z0-9_]*)>", r"(?P<\1>", pattern)
    return re.sub(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P=\1)", named)


def _js_regex_problem(pattern: str) -> str | None:
    try:
        re.compile(python_pattern(pattern))
    except re.error as exc:
        return str(exc)
    return None


def _make_grader(data: dict[str, Any], path: Path, line: int) -> PluginGrader:
    """One grader from its fields (a grader file's frontmatter with its body, or an entry of a
    `graders:` list), checked field by field as Claude Code's strict schema does."""
    kind = data.get("type")
    if kind not in _GRADER_FIELDS:
        raise InputError(
            f"grader type must be one of {' | '.join(_GRADER_FIELDS)}, not {kind!r}", path, line
        )
    allowed = (*_COMMON_GRADER_FIELDS, *_GRADER_FIELDS[kind])
    for key in data:
        if key not in allowed:
            raise InputError(
                f"unknown {kind} grader field {key!r} (expected one of: {', '.join(allowed)})",
                path,
                line,
            )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("a grader needs a name", path, line)
    for key in _REQUIRED_GRADER_FIELDS[kind]:
        if data.get(key) in (None, ""):
            raise InputError(f"{kind} grader {name!r} needs {key}", path, line)
    weight = data.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
        raise InputError(f"weight must be a positive number, not {weight!r}", path, line)
    arm = data.get("arm")
    if arm not in (None, "with-only", "both"):
        raise InputError(f"arm must be with-only or both, not {arm!r}", path, line)
    config: dict[str, Any] = {}
    if kind == "regex":
        config["target"] = _target_value(data.get("target", "last_message"), "target", path, line)
        config["pattern"] = str(data["pattern"])
        flags = str(data.get("flags", ""))
        if not _JS_FLAGS.fullmatch(flags):
            raise InputError("flags must be JS RegExp flags (d g i m s u v y)", path, line)
        config["flags"] = flags
        match = str(data.get("match", "contains"))
        if not _MATCH_RULE.fullmatch(match):
            raise InputError("match must be contains | not_contains | count:N", path, line)
        config["match"] = match
        problem = _js_regex_problem(config["pattern"])
        if problem:
            raise InputError(f"pattern does not compile: {problem}", path, line)
    elif kind == "tool_order":
        config["before"] = _tool_step(data["before"], "before", path, line)
        config["after"] = _tool_step(data["after"], "after", path, line)
    elif kind == "tool_used":
        config["tool"] = str(data["tool"])
        if data.get("input_match") is not None:
            config["input_match"] = str(data["input_match"])
        for key in ("min", "max"):
            value = data.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(f"{key} must be a whole number of 0 or more", path, line)
                config[key] = value
    elif kind == "file_exists":
        config["path"] = str(data["path"])
        exists = data.get("exists", True)
        if not isinstance(exists, bool):
            raise InputError("exists must be true or false", path, line)
        config["exists"] = exists
    elif kind == "llm":
        config["criteria"] = str(data["criteria"])
        config["focus"] = _target_value(data.get("focus", "last_message"), "focus", path, line)
    else:
        config["baseline_file"] = str(data["baseline_file"])
        config["criteria"] = str(data["criteria"])
    return PluginGrader(name, kind, float(weight), arm, config, path, line)


def _grader_files(folder: Path) -> list[PluginGrader]:
    """`graders/*.md` in name order: frontmatter `type:` and fields, the body the criteria or
    pattern (a file without frontmatter is skipped, as Claude Code skips it)."""
    graders = []
    for path in sorted((folder / "graders").glob("*.md")):
        raw = read_text_file(path, "grader")
        if not raw.lstrip("\ufeff").startswith("---"):
            continue
        data, body, _ = split_frontmatter(raw.lstrip("\ufeff"), path)
        if not isinstance(data.get("type"), str):
            raise InputError(
                'frontmatter must include "type:" (regex | tool_order | tool_used | file_exists | '
                "llm | baseline)",
                path,
                1,
            )
        fields = {"name": path.stem, **data}
        body_field = _BODY_FIELD.get(str(data["type"]))
        if body_field and fields.get(body_field) is None and body.strip():
            fields[body_field] = body.strip()
        known = (*_COMMON_GRADER_FIELDS, *_GRADER_FIELDS.get(str(data["type"]), ()))
        unknown = [k for k in data if k not in known]
        line = frontmatter_line(raw, unknown[0]) if unknown else 1
        graders.append(_make_grader(fields, path, line))
    return graders


def _yaml_case(path: Path) -> dict[str, Any]:
    raw = read_text_file(path, "case.yaml")
    data = load_frontmatter_yaml(raw, path, 1, "case.yaml")
    if not isinstance(data, dict):
        raise InputError("case.yaml must be a YAML object", path, 1)
    version = data.get("schema_version")
    if not isinstance(version, str):
        raise InputError('missing required field schema_version (e.g. "1.0")', path, 1)
    major = version.split(".")[0]
    if not major.isdigit() or int(major) > _SUPPORTED_SCHEMA_MAJOR:
        raise InputError(
            f"schema_version {version!r} is not one Claude Code 2.1.332 reads (up to "
            f"{_SUPPORTED_SCHEMA_MAJOR}.x)",
            path,
            frontmatter_line(raw, "schema_version"),
        )
    for key in data:
        if key not in _CASE_YAML_KEYS:
            raise InputError(
                f"unknown case.yaml field {key!r} (expected one of: {', '.join(_CASE_YAML_KEYS)})",
                path,
                frontmatter_line(raw, key),
            )
    execution = data.get("execution") or {}
    if not isinstance(execution, dict):
        raise InputError("execution must be a mapping", path, frontmatter_line(raw, "execution"))
    for key in execution:
        if key not in (*_EXECUTION_KEYS, "prompt"):
            raise InputError(
                f"unknown execution field {key!r}", path, frontmatter_line(raw, str(key))
            )
    graders = data.get("graders") or []
    if not isinstance(graders, list):
        raise InputError("graders must be a list", path, frontmatter_line(raw, "graders"))
    made = []
    for entry in graders:
        if not isinstance(entry, dict):
            raise InputError(
                "each grader must be a mapping", path, frontmatter_line(raw, "graders")
            )
        line = frontmatter_line(raw, "graders")
        named = re.search(rf"name:\s*['\"]?{re.escape(str(entry.get('name', '')))}", raw)
        if named:
            line = raw.count("\n", 0, named.start()) + 1
        made.append(_make_grader(entry, path, line))
    return {"top": data, "execution": execution, "graders": made, "raw": raw}


def load_case(folder: Path) -> PluginCase | None:
    """A case folder as Claude Code merges it: case.yaml first, then prompt.md's frontmatter
    (top-level and execution keys) and body (the prompt), graders from both (the list, then the
    files). None when the folder holds neither."""
    yaml_path, prompt_path = folder / "case.yaml", folder / "prompt.md"
    top: dict[str, Any] = {}
    execution: dict[str, Any] = {}
    graders: list[PluginGrader] = []
    source: Path | None = None
    if yaml_path.is_file():
        loaded = _yaml_case(yaml_path)
        top, execution, graders = dict(loaded["top"]), dict(loaded["execution"]), loaded["graders"]
        source = yaml_path
    file_graders = _grader_files(folder)
    if prompt_path.is_file():
        raw = read_text_file(prompt_path, "prompt.md")
        data, body, _ = split_frontmatter(raw.lstrip("\ufeff"), prompt_path, required=False)
        for key, value in data.items():
            if key in _CASE_TOP_KEYS:
                top[key] = value
            elif key in _EXECUTION_KEYS:
                execution[key] = value
            else:
                raise InputError(
                    f'unknown frontmatter key "{key}" (expected one of: '
                    f"{', '.join((*_CASE_TOP_KEYS, *_EXECUTION_KEYS))})",
                    prompt_path,
                    frontmatter_line(raw, key),
                )
        if body.strip():
            execution["prompt"] = body.strip()
        source = prompt_path
    elif not yaml_path.is_file() and not file_graders:
        return None
    graders = graders + file_graders
    where = source or folder
    if yaml_path.is_file() and not prompt_path.is_file() and not str(top.get("name") or "").strip():
        # seen with 2.1.332: "invalid case.yaml: name: Required" (a prompt.md names it by folder)
        raise InputError("invalid case.yaml: name: Required", yaml_path, 1)
    if not str(execution.get("prompt") or "").strip():
        raise InputError(
            "execution.prompt is required (a prompt.md body, or execution.prompt in case.yaml)",
            where,
        )
    if not graders:
        raise InputError(
            "the case has no graders (Claude Code refuses to load it)",
            where,
            hint="add graders/<name>.md with a type: in its frontmatter, or a graders: list",
        )
    names = [g.name for g in graders]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InputError(f'duplicate grader name "{duplicate}"', where)
    context: dict[str, Any] = top["context"] if isinstance(top.get("context"), dict) else {}
    not_honoured = [f"context.{k}" for k in context if context[k] and k != "scaffold_script"] + [
        f"execution.{k}" for k in _NOT_HONOURED_EXECUTION if execution.get(k)
    ]
    plugins = [
        (folder / entry).resolve()
        for entry in _string_list(top.get("plugins"), "plugins", where, 1)
    ]
    return PluginCase(
        name=str(top.get("name") or folder.name),
        folder=folder,
        prompt=str(execution["prompt"]).strip(),
        graders=graders,
        runs=_positive_int(top.get("runs", _DEFAULT_RUNS), "runs", MAX_RUNS, where, 1),
        max_turns=_positive_int(
            execution.get("max_turns", _DEFAULT_MAX_TURNS), "max_turns", _MAX_TURNS, where, 1
        ),
        timeout_seconds=_positive_int(
            execution.get("timeout_seconds", _DEFAULT_TIMEOUT_SECONDS),
            "timeout_seconds",
            _MAX_TIMEOUT_SECONDS,
            where,
            1,
        ),
        allowed_tools=_string_list(execution.get("allowed_tools"), "allowed_tools", where, 1),
        disallowed_tools=_string_list(
            execution.get("disallowed_tools"), "disallowed_tools", where, 1
        ),
        model=str(execution["model"]) if execution.get("model") else None,
        tags=_string_list(top.get("tags"), "tags", where, 1),
        scaffold_script=str(context.get("scaffold_script"))
        if context.get("scaffold_script")
        else None,
        source=source,
        not_honoured=not_honoured,
        plugins=plugins,
    )


def _shipped(folder: Path) -> tuple[str, list[str], list[str], list[str]]:
    """A plugin folder's name, skills, commands and agents."""
    return (
        plugin_name_of(folder),
        _shipped_names(folder, "skills"),
        _shipped_names(folder, "commands"),
        _shipped_names(folder, "agents"),
    )


def _static_findings(plugin: Plugin) -> list[InputError]:
    """What `claude plugin validate` would say before any run: a slash command or a
    `plugin:agent` that the plugin the case loads does not ship; a baseline file or scaffold
    script named by a path that leads out of the plugin (`../../secret.jsonl`)."""
    findings = []
    for case in plugin.cases:
        where = case.source or case.folder
        named = [(g.source, g.line, g.get("baseline_file")) for g in case.graders]
        for source, line, given in [*named, (where, 1, case.scaffold_script)]:
            if given and not resolves_inside(case.folder / str(given), plugin.folder):
                findings.append(
                    InputError(
                        f"{given!r} resolves outside the plugin ({(case.folder / given).resolve()})",
                        source,
                        line,
                        "a suite file stays in its plugin",
                    )
                )
        loaded = {name: parts for name, *parts in map(_shipped, case.plugins)}
        command = _SLASH_COMMAND.match(case.prompt)
        if command and command.group(1) in loaded:
            owner, name = command.group(1), command.group(2)
            skills, commands, _ = loaded[owner]
            if name not in commands and name not in skills:
                findings.append(
                    InputError(
                        f"/{owner}:{name}: the plugin ships no command or skill {name!r}",
                        where,
                        hint=f"its commands: {', '.join(commands) or 'none'}",
                    )
                )
        for grader in case.graders:
            if grader.kind != "tool_used" or grader.get("tool") != "Agent":
                continue
            for prefix, agent in _AGENT_REFERENCE.findall(str(grader.get("input_match") or "")):
                if prefix in loaded and agent not in loaded[prefix][2]:
                    findings.append(
                        InputError(
                            f"grader {grader.name!r} names agent {prefix}:{agent}, which the "
                            "plugin does not ship",
                            grader.source,
                            grader.line,
                            f"its agents: {', '.join(loaded[prefix][2]) or 'none'}",
                        )
                    )
    return findings


def _outside_target(plugin: Plugin, case: PluginCase) -> list[InputError]:
    """A case may load plugins inside the target folder's tree only (a `plugins:` path that
    leaves it would load code from anywhere on the machine), and only folders."""
    problems = []
    for folder in case.plugins:
        if not folder.is_relative_to(plugin.folder):
            problems.append(
                InputError(
                    f"plugins: {folder} is outside {plugin.folder}",
                    case.source or case.folder,
                    hint="a case may name plugins inside the target folder only",
                )
            )
        elif not folder.is_dir():
            problems.append(
                InputError(f"plugins: {folder} is not a folder", case.source or case.folder)
            )
    return problems


def case_warnings(case: PluginCase, scaffold: bool = False) -> list[str]:
    """The case's warnings: what it sets that these runs do not act on, a scaffold_script left
    unrun without --scaffold (Claude Code's words), and graders Claude Code accepts that no run
    can pass (a tool_used range that is empty: `max: 0` with its default
    `min: 1` reads "expected 1..0")."""
    lines = (
        [
            f"{case.name}: {', '.join(case.not_honoured)} not acted on by this product's runs "
            "(claude plugin eval acts on them)"
        ]
        if case.not_honoured
        else []
    )
    lines += [f"{case.name}: {line}" for m in case.mocks.values() for line in m.warnings]
    if case.scaffold_script and not scaffold:
        lines.append(
            f"{case.name}: its scaffold_script is not run without --scaffold (author-supplied bash "
            "that runs as you: pass it only for suites you trust); the case runs against an "
            "unstaged workspace"
        )
    for grader in case.graders:
        if grader.kind == "tool_used":
            low, high = grader.get("min", 1), grader.get("max")
            if high is not None and high < low:
                lines.append(
                    f"{case.name}/{grader.name}: tool_used {grader.get('tool')} expects {low}..{high}, "
                    "which no run can meet (set min: 0 too); scored as Claude Code scores it: failed"
                )
    return lines


# What makes a folder a plugin for Claude Code: its manifest (optional there), or one of the parts
# it loads from a plugin folder, or an eval suite.
_PLUGIN_PARTS = (".claude-plugin", "skills", "agents", "commands", "hooks", ".mcp.json", "evals")


def _refuse_non_plugin(folder: Path) -> None:
    """One line for a folder that holds none of a plugin's parts (a folder of plugins, say),
    naming the plugins inside it."""
    if any((folder / part).exists() for part in _PLUGIN_PARTS):
        return
    inside = sorted(
        p.name for p in folder.iterdir() if p.is_dir() and (p / ".claude-plugin").is_dir()
    )
    raise InputError(
        "not a plugin: no .claude-plugin/plugin.json, skills/, agents/, commands/, hooks/, "
        ".mcp.json or evals/ in it",
        folder,
        hint=f"give one of the plugins in it: {', '.join(inside)}"
        if inside
        else "give the folder holding .claude-plugin/",
    )


def _eval_dir(folder: Path, manifest: dict[str, Any], named: str | None) -> Path:
    """--eval-dir (a folder below the target), else the manifest's, else `evals/`."""
    if not named:
        return eval_dir_of(folder, manifest)
    found = (folder / named).resolve()
    if not found.is_relative_to(folder):
        raise InputError(f"--eval-dir {named}: outside {folder}", hint="name a folder below it")
    return found


def load_plugin(
    folder: Path, eval_dir: str | None = None, case_globs: Sequence[str] = ()
) -> Plugin:
    """The target at `folder` (a plugin, or a suite root whose cases name their plugins with
    `plugins:`) with every case of its suite. As Claude Code: a case file it cannot load is
    skipped (Plugin.skipped, one line each) and the rest runs; no case left, or a suite-wide
    problem (a case's plugin outside the target, a command the plugin does not ship), is one
    line per problem (InputProblems) before anything runs. With `case_globs` (--case), only the
    case folders whose name matches are read, as Claude Code reads only those."""
    folder = folder.resolve()
    if not folder.is_dir():
        raise InputError(
            "not a plugin folder", folder, hint="give the folder holding .claude-plugin/"
        )
    if eval_dir is None:  # --eval-dir names the suite: the target need not look like a plugin
        _refuse_non_plugin(folder)
    if not resolves_inside(folder / PLUGIN_MANIFEST, folder):
        raise InputError(
            f"resolves outside the plugin (to {(folder / PLUGIN_MANIFEST).resolve()})",
            folder / PLUGIN_MANIFEST,
        )
    manifest, _ = read_plugin_manifest(folder)
    plugin = Plugin(
        folder=folder,
        name=plugin_name_of(folder, manifest),
        manifest=manifest,
        skills=_shipped_names(folder, "skills"),
        commands=_shipped_names(folder, "commands"),
        agents=_shipped_names(folder, "agents"),
        eval_dir=_eval_dir(folder, manifest, eval_dir),
    )
    if not plugin.eval_dir.is_dir():
        raise InputError(
            "the plugin has no eval suite",
            plugin.eval_dir,
            hint="add evals/<case>/prompt.md with graders/, name the folder in the manifest's "
            "experimental.evals, or give --eval-dir",
        )
    problems = outside_links(plugin.eval_dir, folder, "plugin")
    if problems:  # nothing of the suite is read while any of it lies outside
        raise InputProblems(problems)
    for case_folder in sorted(p for p in plugin.eval_dir.iterdir() if p.is_dir()):
        if case_folder.name.startswith(".") or case_folder.name in ("results", "mocks"):
            continue
        if case_globs and not any(fnmatch.fnmatchcase(case_folder.name, g) for g in case_globs):
            continue
        try:
            case = load_case(case_folder)
        except InputProblems as exc:
            plugin.skipped.extend(exc.problems)
            continue
        except InputError as exc:
            plugin.skipped.append(exc)
            continue
        if case is None:
            continue
        if not case.plugins and plugin.is_plugin:
            case.plugins = [folder]
        problems += _outside_target(plugin, case)
        try:
            case.mocks = _case_mocks(plugin.eval_dir, case.folder)
        except InputError as exc:  # a suite-level mock file every case reads: said once
            if str(exc) not in map(str, problems):
                problems.append(exc)
        plugin.cases.append(case)
    if not problems:
        problems += _static_findings(plugin)
    if problems:  # the skipped files said beside what stops the run: all fixed at once
        raise InputProblems(plugin.skipped + problems)
    if not plugin.cases:
        if plugin.skipped:
            raise InputProblems(plugin.skipped)
        if case_globs:
            raise InputError(f"no case matches --case {' '.join(case_globs)}", plugin.eval_dir)
        raise InputError("the eval suite has no cases", plugin.eval_dir)
    return plugin


def installed_plugins(home: Path) -> list[tuple[str, Path]]:
    """The plugins installed for the user as Claude Code records them
    (`~/.claude/plugins/installed_plugins.json`: `plugins` maps `name@marketplace` to its install,
    or a list of them, each with an `installPath`): (`name@marketplace`, folder), the folders
    that exist only."""
    record = home / ".claude" / "plugins" / "installed_plugins.json"
    if not record.is_file():
        return []
    try:
        data = json.loads(read_text_file(record, "installed plugins"))
    except ValueError:
        raise InputError("not valid JSON", record, 1) from None
    plugins = data.get("plugins") if isinstance(data, dict) else None
    found = []
    for key, installs in (plugins if isinstance(plugins, dict) else {}).items():
        for install in installs if isinstance(installs, list) else [installs]:
            path = install.get("installPath") if isinstance(install, dict) else None
            if isinstance(path, str) and Path(path).is_dir():
                found.append((str(key), Path(path)))
                break
    return found


def _installed_plugin_folder(spec: str, home: Path) -> Path | None:
    """A plugin named `name` or `name@marketplace` among the installed ones."""
    return next(
        (path for key, path in installed_plugins(home) if spec in (key, key.split("@")[0])),
        None,
    )


def resolve_plugin(spec: str, home: Path) -> Path:
    """PATH as a folder when it is one, else a plugin name among the installed plugins."""
    path = Path(spec)
    if path.is_dir():
        return path
    found = _installed_plugin_folder(spec, home)
    if found is None:
        raise InputError(
            f"{spec!r} is neither a plugin folder nor an installed plugin",
            hint="give the plugin's folder, or a name from `claude plugin list`",
        )
    return found
