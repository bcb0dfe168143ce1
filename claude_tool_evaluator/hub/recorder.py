"""Mocks recorded from a plugin's real MCP servers (`plugin PATH --record-mocks`): each real
server, started once for the suite, is put behind an in-process MCP server (the `mcp` SDK's
lowlevel Server) that lists what it lists and forwards every call, keeping the listing and each
answer; afterwards they are written as Claude Code 2.1.332's mocks (`mocks/<server>/_tools.json`
and one `<tool>.md` of `type: fixed` per tool called), every byte through the one redactor, and
an existing mock file is kept, never overwritten.

An answer that repeats a string field of the call's input is written as a template
(`{{input.FIELD}}` where the value was), so one `<tool>.md` answers each case as the server did
when the calls differ only in what they echo; calls that still answer differently keep the
first answer, and a line says so.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
the loaders, the hub's other rooms."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import test_constants as C

from .. import __version__
from ..errors import InputError, ServerError
from ..files import write_text_atomic
from ..redaction import Redactor
from ..run_types import ServerSpec
from .stdio import ServerConnection, explain_exception, list_all_tools

__all__ = [
    "RecordedAnswer",
    "RecordedServer",
    "write_recorded_mocks",
]

_TOOL_FILE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")  # Claude Code's rule for `<tool>.md`
_TEMPLATED_MIN_CHARS = 3  # shorter input values are too common to stand for the input


@dataclass
class RecordedAnswer:
    """One call of a real tool, as it was answered (the text its content blocks held)."""

    tool: str
    arguments: dict[str, Any]
    text: str
    error: bool


def _answer_text(result: Any) -> str:
    """A tool result as a fixed mock answers it: its text blocks joined by line breaks; with
    none, its structured content as JSON."""
    texts = [getattr(b, "text", None) for b in getattr(result, "content", None) or []]
    joined = "\n".join(t for t in texts if isinstance(t, str))
    if joined or getattr(result, "structured_content", None) is None:
        return joined
    return json.dumps(result.structured_content, ensure_ascii=False)


def _templated(answer: str, arguments: dict[str, Any]) -> str:
    """The answer with each string input value it repeats written `{{input.FIELD}}` (longest
    value first, so a value inside another stays whole)."""
    values = sorted(
        (
            (key, value)
            for key, value in arguments.items()
            if isinstance(value, str) and len(value) >= _TEMPLATED_MIN_CHARS
        ),
        key=lambda item: len(item[1]),
        reverse=True,
    )
    for key, value in values:
        if re.fullmatch(r"[A-Za-z0-9_.-]+", key):
            answer = answer.replace(value, "{{input." + key + "}}")
    return answer


class RecordedServer:
    """One of a plugin's real MCP servers, started once (`spec`: already confined by the runner)
    and served in-process in its place: its tool list and each answer kept for the mocks."""

    def __init__(self, plugin: Path, server: str, spec: ServerSpec) -> None:
        import mcp.types as types
        from mcp.server.lowlevel import Server

        self.plugin, self.name, self.spec = plugin, server, spec
        self.listed: list[dict[str, Any]] | None = None
        self.answers: list[RecordedAnswer] = []
        self.connection: ServerConnection | None = None
        self.failure: str | None = None

        async def list_tools(ctx: Any, params: Any) -> Any:
            client = self._client()
            tools = await asyncio.wait_for(list_all_tools(client), C.DEFAULT_TOOL_TIMEOUT)
            self.listed = [
                {
                    "name": t.name,
                    "description": t.description or "",
                    "inputSchema": t.input_schema or {"type": "object"},
                }
                for t in tools
            ]
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, params: Any) -> Any:
            arguments = dict(params.arguments or {})
            try:
                result = await asyncio.wait_for(
                    self._client().call_tool(params.name, arguments), C.DEFAULT_TOOL_TIMEOUT
                )
            except Exception as exc:  # the real server's failure is this call's error
                text = f"{server}.{params.name} failed: {explain_exception(exc)}"
                return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
            self.answers.append(
                RecordedAnswer(params.name, arguments, _answer_text(result), bool(result.is_error))
            )
            return result

        self.server = Server(
            f"recording-{server}",
            version=__version__,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )

    def _client(self) -> Any:
        if self.connection is None or self.connection.client is None:
            raise ServerError(self.failure or f"MCP server '{self.name}' is not running")
        return self.connection.client

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The real server for as long as the block lasts; one that does not start is said on
        every call of it (the suite goes on)."""
        connection = ServerConnection(self.spec, C.DEFAULT_CONNECT_TIMEOUT)
        try:
            await connection.open()
            self.connection = connection
        except (ServerError, InputError, OSError) as exc:  # one line; the runs go on without it
            self.failure = str(exc)
        try:
            yield
        finally:
            if self.connection is not None:
                await self.connection.close()
                self.connection = None

    def in_process(self, name: str) -> ServerSpec:
        return ServerSpec(name=name, kind="module", module="(recording)", instance=self.server)


def _tool_file(answers: Sequence[RecordedAnswer]) -> tuple[str, str | None]:
    """A tool's `<tool>.md` from its answers, and a line when they disagree."""
    bodies = [(_templated(a.text, a.arguments), a.error) for a in answers]
    body, error = bodies[0]
    text = "---\ntype: fixed\n" + ("error: true\n" if error else "") + "---\n" + body + "\n"
    differing = len(set(bodies))
    note = (
        f"{len(answers)} calls answered {differing} ways; the first's answer is written"
        if differing > 1
        else None
    )
    return text, note


def _write_new(path: Path, text: str, shown: str, lines: list[str]) -> None:
    if path.exists():
        lines.append(f"kept {shown} (it exists; delete it to record it again)")
        return
    write_text_atomic(path, text)
    lines.append(f"wrote {shown}")


def write_recorded_mocks(
    servers: Sequence[RecordedServer], mocks_dir: Path, redactor: Redactor
) -> list[str]:
    """Each recorded server's mocks under `mocks_dir/<server>/`, redacted; an existing file
    kept. One line per file written or kept, and per tool or server that could not be."""
    lines: list[str] = []
    for server in servers:
        shown = f"mocks/{server.name}"
        if server.failure is not None:
            lines.append(f"{shown}: nothing recorded: {server.failure}")
            continue
        if server.listed is None:
            lines.append(f"{shown}: nothing recorded: no run listed its tools")
            continue
        folder = mocks_dir / server.name
        folder.mkdir(parents=True, exist_ok=True)
        listing = json.dumps({"tools": server.listed}, indent=2, ensure_ascii=False)
        _write_new(
            folder / "_tools.json", redactor.text(listing) + "\n", f"{shown}/_tools.json", lines
        )
        by_tool: dict[str, list[RecordedAnswer]] = {}
        for answer in server.answers:
            by_tool.setdefault(answer.tool, []).append(answer)
        for tool, answers in by_tool.items():
            if not _TOOL_FILE_NAME.match(tool):
                lines.append(f"{shown}: {tool!r} is not a name Claude Code takes for a <tool>.md")
                continue
            text, note = _tool_file(answers)
            _write_new(folder / f"{tool}.md", redactor.text(text), f"{shown}/{tool}.md", lines)
            if note:
                lines.append(f"{shown}/{tool}.md: {note}")
    return lines
