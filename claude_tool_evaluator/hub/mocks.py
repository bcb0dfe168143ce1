"""A plugin's MCP server stood in for by its eval suite's mocks, as `claude plugin eval`
(Claude Code 2.1.332) stands in for it: an in-process MCP server (the `mcp` SDK's lowlevel
Server) that lists the mocked tools and answers each call from its `<tool>.md`, and counts the
calls (total, errors, the unmocked ones) as Claude Code's `mocks.calls` does.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
the loaders, the hub's other rooms."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..loaders.plugin_evals import MockServerFiles, MockTool
from ..run_types import ServerSpec

__all__ = [
    "MockCalls",
    "MockedServer",
]

# Claude Code 2.1.332's fixed-answer template: `{{input.FIELD}}` (a dotted path into the call's
# input) and `{{file:PATH}}` (a file below the mock's folder, its path may hold `{input.FIELD}`
# segments, each a plain file-name segment)
_TEMPLATE = re.compile(
    r"\{\{\s*(input\.[A-Za-z0-9_.-]+|file:(?:[^{}]|\{input\.[A-Za-z0-9_.-]+\})+?)\s*\}\}"
)
_FILE_SEGMENT = re.compile(r"\{input\.([A-Za-z0-9_.-]+)\}")
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_FILE_MAX_BYTES = 4 * 1024 * 1024


def _input_value(arguments: dict[str, Any], path: str) -> str:
    """`{{input.FIELD}}` (a dotted path into the call's input): a string as it is, anything else
    as JSON; a missing field as empty."""
    value: Any = arguments
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _mock_file(folder: Path, template: str, arguments: dict[str, Any]) -> tuple[str, str | None]:
    """`{{file:PATH}}`: the file's text, or why it cannot be read (a segment that is not a plain
    file name, a path outside the mock's folder, a file missing)."""
    problem: str | None = None

    def segment(match: re.Match) -> str:
        nonlocal problem
        value = _input_value(arguments, match.group(1))
        if not _PLAIN_SEGMENT.fullmatch(value) or ".." in value:
            problem = problem or (
                f"{{input.{match.group(1)}}} = {json.dumps(value)} is not a plain file-name segment"
            )
        return value

    name = _FILE_SEGMENT.sub(segment, template.strip())
    if problem:
        return "", problem
    root = folder.resolve()
    path = (root / name).resolve()
    if path == root or not path.is_relative_to(root):
        return "", f"{{{{file:{template.strip()}}}}} names a path outside the mock's directory"
    try:
        with path.open("rb") as handle:
            return handle.read(_FILE_MAX_BYTES).decode("utf-8", "replace"), None
    except OSError as exc:
        return "", f"{{{{file:{template.strip()}}}}}: {exc.strerror or exc}"


def _rendered(answer: str, folder: Path, arguments: dict[str, Any]) -> tuple[str, str | None]:
    """A fixed answer with its template filled in, or why it could not be (the call's error)."""
    problems: list[str] = []

    def fill(match: re.Match) -> str:
        what = match.group(1)
        if what.startswith("input."):
            return _input_value(arguments, what[len("input.") :])
        text, problem = _mock_file(folder, what[len("file:") :], arguments)
        if problem:
            problems.append(problem)
        return text

    text = _TEMPLATE.sub(fill, answer)
    return (text, problems[0]) if problems else (text, None)


def _unexpected(tool: MockTool, arguments: dict[str, Any]) -> str | None:
    """Why a call's input does not match the mock's `expect:` fields, or None."""
    for key, wanted in tool.expect.items():
        if arguments.get(key) != wanted:
            return (
                f"mock {tool.name}: expected input {key}={json.dumps(wanted)}, got "
                f"{json.dumps(arguments.get(key))}"
            )
    return None


@dataclass
class MockCalls:
    """One run's calls of the mocks: Claude Code's `mocks.calls` (total, errors, unmocked)."""

    total: int = 0
    errors: int = 0
    unmocked: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"total": self.total, "errors": self.errors, "unmocked": list(self.unmocked)}


class MockedServer:
    """One server's mocks served in-process: its tool list from `_tools.json`, each call answered
    from its `<tool>.md` (its template filled in; `error: true` or an input `expect:` does not
    match: an error result); a tool with no answer is an unmocked call (an error result)."""

    def __init__(self, files: MockServerFiles, calls: MockCalls, log: list[dict]) -> None:
        import mcp.types as types
        from mcp.server.lowlevel import Server

        self.files, self.calls = files, calls
        by_name = {t.name: t for t in files.tools}
        listed = [
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in files.tools
        ]

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=listed)

        async def call_tool(ctx: Any, params: Any) -> Any:
            arguments = dict(params.arguments or {})
            tool = by_name.get(params.name)
            calls.total += 1
            if tool is None or tool.answer is None:
                calls.errors += 1
                calls.unmocked.append(f"{files.server}.{params.name}")
                answer, failed = f"no mock for {files.server}.{params.name}", True
            elif (why := _unexpected(tool, arguments)) is not None:
                calls.errors += 1
                answer, failed = why, True
            else:
                answer, problem = _rendered(tool.answer, files.folder, arguments)
                failed = tool.error or problem is not None
                answer = problem or answer
                calls.errors += int(failed)
            log.append(
                {"server": files.server, "tool": params.name, "input": arguments, "error": failed}
            )
            return types.CallToolResult(content=[types.TextContent(text=answer)], is_error=failed)

        self.server = Server(
            files.server, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool
        )

    def spec(self, name: str) -> ServerSpec:
        return ServerSpec(name=name, kind="module", module="(mocks)", instance=self.server)

    def describe(self) -> dict[str, Any]:
        """Claude Code's `mocks.servers[]` entry: a shadow and its tools' responders."""
        return {
            "server": self.files.server,
            "kind": "shadow",
            "tools": [
                {"tool": t.name, "responder": "fixed" if t.answer is not None else "none"}
                for t in self.files.tools
            ],
        }
