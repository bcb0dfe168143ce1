"""How a call is answered: live, mocked, replayed from a cassette or withheld by the tool policy;
McpHub (the servers of a run) and RunTools (one run's view of them).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, the hub rooms above it."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError

import prompts
import test_constants as C

from ..errors import InputError, ServerError, say_kept_notes
from ..files import parse_json_text, read_text_file, write_text_atomic
from ..loaders.csv_suites import TOOL_BOUND_ARGUMENTS, TOOL_OVERRIDE_KEYS
from ..redaction import Redactor
from ..results_schema.document import Record
from ..run_types import ServerSpec
from ..sinks import line_of, safe_name
from .stdio import ServerConnection, explain_exception, list_all_tools, serving
from .tools import ToolOutcome, ToolSpec, tool_result_text

__all__ = [
    "CALL_SOURCES",
    "Cassette",
    "CassetteRecorder",
    "McpHub",
    "RunTools",
    "SOURCE_LABELS",
    "ToolPolicy",
    "listed_beyond_tools",
    "load_mock_tools",
    "tool_listing",
]

# One place decides (ToolPolicy.answer, called by McpHub.call_tool): a --mock-tools answer that
# matches, else the --replay cassette's recording, else the --tool-policy: the real server, or a
# stand-in for a tool the policy does not run (--allow-tool runs it anyway). Every answer says
# which it was (ToolOutcome.source / executed), and so does every ToolCall, results file and report.
CALL_SOURCES = ("live", "mock", "replay", "policy")


SOURCE_LABELS = {
    "live": "live",
    "mock": "mocked",
    "replay": "replayed",
    "policy": "withheld by policy",
    "decoy": "a distractor's (never a real server)",
    "canary": "the red team's canary (answered by its proxy, never a real server)",
}


def _canonical_arguments(arguments: Any) -> str:
    """A call's arguments as mocks and cassettes key them: JSON, sorted keys, no spaces."""
    return json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )


def tool_listing(tool: Any) -> dict:
    """A tool from `list_tools` as the hub and the cassettes keep it (annotations in the spec's
    camelCase: readOnlyHint, destructiveHint, idempotentHint, openWorldHint)."""
    annotations = getattr(tool, "annotations", None)
    listed = {
        "name": tool.name,
        "description": tool.description or "",
        "input_schema": dict(tool.input_schema or {"type": "object"}),
        "annotations": annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
        if annotations
        else {},
    }
    # title, outputSchema and _meta only when the server gives them (scan reads them)
    extra = {
        "title": getattr(tool, "title", None),
        "output_schema": getattr(tool, "output_schema", None),
        "meta": getattr(tool, "meta", None),
    }
    return listed | {key: value for key, value in extra.items() if value}


def _arguments_contain(expected: Any, actual: Any) -> bool:
    """A mock's `match`: every key it names has that value in the call (nested objects alike)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _arguments_contain(v, actual[k]) for k, v in expected.items()
        )
    return expected == actual


def _answer_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, indent=2, ensure_ascii=False)


@dataclass
class _MockAnswer:
    match: dict | None  # None: any arguments
    output: str
    is_error: bool = False


_MOCK_KEYS = ("match", "result", "is_error")


def load_mock_tools(path: str | Path) -> dict[str, list[_MockAnswer]]:
    """--mock-tools FILE.json: {"tool": {"result": ..., "is_error": false}} or {"tool": [{"match":
    {partial arguments}, "result": ...}, ...]}; the first entry that matches answers."""
    path = Path(path)
    raw = read_text_file(path, "--mock-tools file")
    data = parse_json_text(raw, path)
    hint = 'e.g. {"save_note": {"result": "saved"}} or {"get_profile": [{"match": {"user_id": "u_1"}, "result": "..."}]}'
    if not isinstance(data, dict) or not data:
        raise InputError("a --mock-tools file is a JSON object of tool names", path, None, hint)
    mocks: dict[str, list[_MockAnswer]] = {}
    for tool, entries in data.items():
        line = line_of(raw, json.dumps(tool))
        if not isinstance(entries, (list, dict)) or not entries:
            raise InputError(
                f"the mock of {tool!r} is not an object or a list of them", path, line, hint
            )
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, dict) or "result" not in entry:
                raise InputError(
                    f'the mock of {tool!r} needs a "result" (a string or a JSON value)',
                    path,
                    line,
                    hint,
                )
            unknown = sorted(set(entry) - set(_MOCK_KEYS))
            if unknown:
                raise InputError(
                    f"the mock of {tool!r} has an unknown key {unknown[0]!r}",
                    path,
                    line,
                    f"a mock has {', '.join(_MOCK_KEYS)}",
                )
            if "match" in entry and not isinstance(entry["match"], dict):
                raise InputError(
                    f'the "match" of {tool!r}\'s mock is not an object of arguments',
                    path,
                    line,
                    hint,
                )
            if not isinstance(entry.get("is_error", False), bool):
                raise InputError(
                    f'the "is_error" of {tool!r}\'s mock is not true or false', path, line
                )
            mocks.setdefault(tool, []).append(
                _MockAnswer(
                    entry.get("match"), _answer_text(entry["result"]), entry.get("is_error", False)
                )
            )
    return mocks


class _CassetteTool(Record):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = {"type": "object"}
    annotations: dict[str, Any] = {}


class _CassetteCall(Record):
    tool: str  # the server's own name of the tool
    arguments: dict[str, Any] = {}
    result: str
    is_error: bool = False


class _CassetteFile(Record):
    """One server's recording (--record DIR writes DIR/<server>.json): its tools with their
    annotations, and one answer per (tool, canonical arguments). Readable JSON, redacted."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    format: Literal[C.CASSETTE_FORMAT]  # type: ignore[valid-type]
    server: str
    recorded_at: str = ""
    tools: list[_CassetteTool] = []
    calls: list[_CassetteCall] = []


def _cassette_path(folder: str | Path, server: str) -> Path:
    return Path(folder) / f"{safe_name(server) or 'server'}.json"


def _load_cassette_file(path: Path) -> _CassetteFile:
    raw = read_text_file(path, "cassette file")
    data = parse_json_text(raw, path)
    if isinstance(data, dict) and data.get("format") != C.CASSETTE_FORMAT:
        raise InputError(
            f'not a cassette (its "format" is not {C.CASSETTE_FORMAT!r})',
            path,
            None,
            "record one with --record DIR",
        )
    try:
        return _CassetteFile.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise InputError(
            f"not a valid cassette: {where}: {problem['msg']}",
            path,
            None,
            "record it again with --record DIR",
        ) from None


class Cassette:
    """A --replay folder: every server's recording, looked up by (server, tool, arguments)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise InputError(
                "--replay: no such folder"
                if not self.folder.exists()
                else "--replay takes a folder",
                self.folder,
                None,
                "give the folder a --record run wrote",
            )
        self.files = {
            f.server: f for f in map(_load_cassette_file, sorted(self.folder.glob("*.json")))
        }
        if not self.files:
            raise InputError(
                "--replay: the folder holds no cassette (*.json)",
                self.folder,
                None,
                "record one first: the same command with --record DIR",
            )
        self.answers = {
            (server, call.tool, _canonical_arguments(call.arguments)): call
            for server, f in self.files.items()
            for call in f.calls
        }

    def listings(self) -> dict[str, list[dict]]:
        return {server: [t.model_dump() for t in f.tools] for server, f in self.files.items()}

    def lookup(
        self, server: str, tool: str, arguments: dict, redactor: Redactor | None
    ) -> _CassetteCall | None:
        if server not in self.files and len(self.files) == 1:
            server = next(
                iter(self.files)
            )  # one server, named differently now (--mcp-config vs --server)
        found = self.answers.get((server, tool, _canonical_arguments(arguments)))
        if found is None and redactor is not None:  # recorded with its secrets masked
            found = self.answers.get((server, tool, _canonical_arguments(redactor.data(arguments))))
        return found


class CassetteRecorder:
    """--record DIR: the servers' tool lists, then every live call's answer (the latest wins),
    each server's file rewritten atomically as calls finish, through the run's redactor."""

    def __init__(self, folder: str | Path, redactor: Redactor | None = None) -> None:
        self.folder = Path(folder)
        self.redactor = redactor
        self.files: dict[str, _CassetteFile] = {}
        self.calls: dict[str, dict[tuple[str, str], _CassetteCall]] = {}

    def start(self, listings: dict[str, list[dict]]) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        for server, tools in listings.items():
            path = _cassette_path(self.folder, server)
            earlier = (
                _load_cassette_file(path) if path.is_file() else None
            )  # a cassette grows run by run
            self.files[server] = _CassetteFile(
                format=C.CASSETTE_FORMAT,
                server=server,
                recorded_at=now,
                tools=[_CassetteTool(**self.scrubbed(t)) for t in tools],
            )
            self.calls[server] = {
                (c.tool, _canonical_arguments(c.arguments)): c
                for c in (earlier.calls if earlier and earlier.server == server else [])
            }
            self.write(server)

    def scrubbed(self, value: Any) -> Any:
        return self.redactor.data(value) if self.redactor else value

    def record(self, server: str, tool: str, arguments: dict, output: str, is_error: bool) -> None:
        if server not in self.files:
            return
        arguments = self.scrubbed(arguments)
        self.calls[server][(tool, _canonical_arguments(arguments))] = _CassetteCall(
            tool=tool, arguments=arguments, result=self.scrubbed(output), is_error=is_error
        )
        self.write(server)

    def write(self, server: str) -> None:
        calls = sorted(
            self.calls[server].values(), key=lambda c: (c.tool, _canonical_arguments(c.arguments))
        )
        document = self.files[server].model_copy(update={"calls": calls}).model_dump(mode="json")
        write_text_atomic(
            _cassette_path(self.folder, server),
            json.dumps(self.scrubbed(document), indent=2, ensure_ascii=False) + "\n",
        )


@dataclass
class ToolPolicy:
    """How the hub answers Claude's calls: the settings of --tool-policy, --allow-tool,
    --mock-tools, --replay, --replay-miss and --record. The default runs everything not annotated
    destructive, against the real servers."""

    policy: str = C.DEFAULT_TOOL_POLICY
    allow: tuple[str, ...] = ()
    mocks: dict[str, list[_MockAnswer]] = field(default_factory=dict)
    mock_file: str | None = None
    replay: Cassette | None = None
    replay_miss: str = C.DEFAULT_REPLAY_MISS
    recorder: CassetteRecorder | None = None
    redactor: Any = None

    def allowed(self, tool: ToolSpec) -> bool:
        return any(
            fnmatch.fnmatchcase(name, pattern)
            for pattern in self.allow
            for name in (tool.name, tool.remote_name)
        )

    def policy_runs(self, tool: ToolSpec) -> bool:
        """Whether --tool-policy alone lets the real server run this tool."""
        if self.policy == "live":
            return True
        if self.policy == "strict":
            return not tool.destructive_by_spec
        return tool.read_only if self.policy == "read-only" else not tool.destructive

    def runs_live(self, tool: ToolSpec) -> bool:
        return self.policy_runs(tool) or self.allowed(tool)

    def withheld_reason(self) -> str:
        return {
            "read-only": "are not annotated readOnlyHint: true",
            "strict": "the MCP specification counts as destructive (unannotated tools included)",
        }.get(self.policy, "are annotated destructiveHint: true")

    def why(self, tool: ToolSpec, it: str = "it") -> str:
        """Why this policy treats a tool with no or contradictory annotations as it does (`it`:
        the pronoun for the tools a note names)."""
        if self.allowed(tool) and not self.policy_runs(tool):
            return f"--allow-tool names {it}"
        stricter = f"--tool-policy strict withholds {it}"
        if self.policy == "live":
            return "--tool-policy live runs every tool"
        if self.policy == "strict":
            return (
                "strict counts destructiveHint: true over readOnlyHint"
                if tool.contradictory
                else "strict follows the MCP specification, which counts an unannotated tool "
                "as destructive"
            )
        if self.policy == "read-only":
            return (
                f"read-only trusts readOnlyHint: true; {stricter}"
                if tool.contradictory
                else "read-only runs only what is annotated readOnlyHint: true"
            )
        if tool.contradictory:
            return f"safe takes readOnlyHint: true over destructiveHint; {stricter}"
        return (
            "safe withholds only tools annotated destructiveHint: true, and the MCP "
            f"specification counts an unannotated tool as destructive: {stricter}"
        )

    def notes(self, tools: dict[str, ToolSpec]) -> list[str]:
        """One line per server (and per treatment) naming the tools the annotations leave in
        doubt (none given, or read-only and destructive both): what happens to their calls, why,
        and the fix. A 30-tool server that says nothing is one line, not 30. The run header and
        --dry-run say them."""
        groups: dict[tuple[str, bool, str, str], list[ToolSpec]] = {}
        for tool in sorted(tools.values(), key=lambda t: (t.server, t.name)):
            if tool.unannotated or tool.contradictory:
                key = (tool.server, tool.unannotated, self.treatment(tool), self.why(tool))
                groups.setdefault(key, []).append(tool)
        lines = []
        for (server, unannotated, treatment, _), group in groups.items():
            names = [tool.name for tool in group]
            one = len(names) == 1
            it = "it" if one else "them"
            if unannotated:
                what = f"{'has' if one else 'have'} no readOnlyHint or destructiveHint"
                fix = (
                    f"annotate {it} in the server: readOnlyHint: true on what only reads, "
                    "destructiveHint: true on what changes things"
                )
            else:
                what = f"{'is' if one else 'are'} annotated readOnlyHint: true and destructiveHint: true"
                fix = f"drop the hint that is wrong from {it} in the server"
            lines.append(
                f"server {server}: {', '.join(names)} {what}: {treatment}, because "
                f"{self.why(group[0], it)}; the fix: {fix}"
            )
        return lines

    def mocks_of(self, tool: ToolSpec) -> list[_MockAnswer]:
        return self.mocks.get(tool.name) or self.mocks.get(tool.remote_name) or []

    def mock_for(self, tool: ToolSpec, arguments: dict) -> _MockAnswer | None:
        return next(
            (
                e
                for e in self.mocks_of(tool)
                if e.match is None or _arguments_contain(e.match, arguments)
            ),
            None,
        )

    def treatment(self, tool: ToolSpec) -> str:
        """What happens to this tool's calls, for --dry-run's table and the results' metadata."""
        mocks = self.mocks_of(tool)
        if any(e.match is None for e in mocks):
            return "mocked"
        parts = ["mocked when matched"] if mocks else []
        if self.replay is not None:
            parts.append("replayed")
            if self.replay_miss != "live":
                return ", ".join(parts + ["a miss fails the case"])
        if not self.runs_live(tool):
            return ", ".join(parts + ["withheld by policy"])
        return ", ".join(parts + ["live" if self.policy_runs(tool) else "live (--allow-tool)"])

    def unknown_mocks(self, tools: dict[str, ToolSpec]) -> list[str]:
        known = set(tools) | {t.remote_name for t in tools.values()}
        return [name for name in self.mocks if name not in known]

    def answer(self, tool: ToolSpec, arguments: dict) -> ToolOutcome | None:
        """A mock, a recording, a replay miss or a stand-in; None: the server runs the call."""
        mock = self.mock_for(tool, arguments)
        if mock is not None:
            return ToolOutcome(
                mock.output, mock.is_error, tool.server, 0.0, source="mock", executed=False
            )
        if self.replay is not None:
            recorded = self.replay.lookup(tool.server, tool.remote_name, arguments, self.redactor)
            if recorded is not None:
                return ToolOutcome(
                    recorded.result,
                    recorded.is_error,
                    tool.server,
                    0.0,
                    source="replay",
                    executed=False,
                )
            if self.replay_miss != "live":
                return ToolOutcome(
                    f"replay miss: the cassette {self.replay.folder} has no recording of "
                    f"{tool.name} with arguments {_canonical_arguments(arguments)} (record it with "
                    f"--record, or run with --replay-miss live)",
                    True,
                    tool.server,
                    0.0,
                    source="replay",
                    executed=False,
                    fails_case=True,
                )
        if not self.runs_live(tool):
            text = prompts.WITHHELD_TOOL_RESULT.format(
                tool=tool.name, policy=self.policy, reason=self.withheld_reason()
            )
            return ToolOutcome(text, True, tool.server, 0.0, source="policy", executed=False)
        return None


def _cached_tool_prefix(definitions: list[dict]) -> list[dict]:
    """Tool definitions as every request sends them: the last one marked for the prompt cache."""
    if definitions:
        definitions = [
            *definitions[:-1],
            dict(definitions[-1], cache_control={"type": "ephemeral"}),
        ]
    return definitions


def _dumped(item: Any, *leave_out: str) -> dict:
    """An MCP listing item as the spec writes it (camelCase, no empty fields), less `leave_out`."""
    fields = item.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {key: value for key, value in fields.items() if key not in leave_out and value != {}}


async def _paged(list_page: Any, field_name: str) -> list[Any]:
    items, cursor = [], None
    for _ in range(100):  # a server that keeps handing out cursors must not loop us forever
        page = await list_page(cursor=cursor)
        items.extend(getattr(page, field_name))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def _resource_text(client: Any, uri: str) -> str:
    """The text of a resource's contents (a blob's mime type only), cut at SCAN_RESOURCE_CHARS."""
    result = await client.read_resource(uri)
    parts = [
        getattr(content, "text", None) or f"[{getattr(content, 'mime_type', None) or 'blob'}]"
        for content in result.contents
    ]
    return "\n".join(parts)[: C.SCAN_RESOURCE_CHARS]


async def listed_beyond_tools(client: Any) -> list[dict]:
    """What a connected MCP client's server shows a model besides its tools (see beyond_tools)."""
    capabilities = client.server_capabilities
    listed: list[dict] = []
    if client.instructions:
        listed.append({"kind": "instructions", "name": "instructions", "text": client.instructions})
    if capabilities.resources is not None:
        resources = await _paged(client.list_resources, "resources")
        for index, resource in enumerate(resources):
            entry = {"kind": "resource", **_dumped(resource, "icons")}
            if index < C.SCAN_RESOURCES_READ:
                try:
                    entry["contents"] = await _resource_text(client, resource.uri)
                except Exception:  # noqa: S112 - an unreadable resource has only its listing
                    pass
            listed.append(entry)
        templates = await _paged(client.list_resource_templates, "resource_templates")
        listed += [{"kind": "resource-template", **_dumped(t, "icons")} for t in templates]
    if capabilities.prompts is not None:
        prompts_listed = await _paged(client.list_prompts, "prompts")
        listed += [{"kind": "prompt", **_dumped(p, "icons")} for p in prompts_listed]
    return listed


class McpHub:
    """The open MCP servers and their tools; the only place that talks MCP.

    Use as `async with McpHub(specs) as hub:`; `hub.tools` maps the names Claude sees to
    ToolSpecs; `await hub.call_tool(name, args)` never raises for tool-level failures."""

    def __init__(
        self,
        specs: Sequence[ServerSpec],
        tool_timeout: float = C.DEFAULT_TOOL_TIMEOUT,
        max_result_chars: int = C.DEFAULT_MAX_RESULT_CHARS,
        connect_timeout: float = C.DEFAULT_CONNECT_TIMEOUT,
        policy: ToolPolicy | None = None,
        stop_grace: float = C.DEFAULT_STOP_GRACE,
    ) -> None:
        self.specs = list(specs)
        self.stop_grace = stop_grace
        self.policy = policy or ToolPolicy(
            policy="live"
        )  # a bare hub (tests, tools) runs every call
        self.tool_timeout = tool_timeout
        self.max_result_chars = max_result_chars
        self.connect_timeout = connect_timeout
        self.connections: dict[str, ServerConnection] = {}
        self.tools: dict[str, ToolSpec] = {}
        self.notices: list[str] = []
        self._anthropic_tools: list[dict] = []
        self.definitions: dict[str, dict] = {}  # name -> what Claude is shown (overrides applied)
        self.bound_arguments: dict[str, dict] = {}  # --tool-overrides' `arguments`, by name
        self._restarting: dict[str, asyncio.Lock] = {}
        self.call_slots = asyncio.Semaphore(C.TOOL_CALLS_IN_FLIGHT)

    async def __aenter__(self) -> McpHub:
        """Every server connects at once (a stdio server may have started already, see
        start_stdio_servers); the first failure, in the servers' order, is the one raised."""
        try:
            for spec in self.specs:
                self.connections[spec.name] = ServerConnection(
                    spec, self.connect_timeout, self.stop_grace
                )
            found = await asyncio.gather(
                *(self.listing(c) for c in self.connections.values()), return_exceptions=True
            )
            listings: dict[str, list[dict]] = {}
            for spec, listing in zip(self.specs, found):
                if isinstance(listing, BaseException):
                    raise listing
                listings[spec.name] = listing
            if (
                not self.specs and self.policy.replay is not None
            ):  # --replay with no server: the cassette's tools
                listings = self.policy.replay.listings()
            elif self.policy.recorder is not None:
                self.policy.recorder.start(listings)
            self._register_tools(listings)
            say_kept_notes()  # the servers answered: the run goes ahead
        except BaseException:
            await self.close()
            raise
        return self

    async def listing(self, connection: ServerConnection) -> list[dict]:
        """One server connected, and its tools."""
        await connection.open()
        try:
            tools = await asyncio.wait_for(list_all_tools(connection.client), self.connect_timeout)
        except Exception as exc:
            raise ServerError(
                connection.describe_failure(f"failed to list its tools: {explain_exception(exc)}")
            ) from None
        return [tool_listing(tool) for tool in tools]

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def beyond_tools(self) -> dict[str, list[dict]]:
        """What else each server shows a model: its instructions, resources (and the text of the
        first SCAN_RESOURCES_READ, cut at SCAN_RESOURCE_CHARS), resource templates and prompts
        (with their arguments), each a listing `{kind, name, ...fields}`, by server. A server
        that offers none, or fails to list them, has none."""
        found = {}
        for server, connection in self.connections.items():
            try:
                found[server] = await asyncio.wait_for(
                    listed_beyond_tools(connection.client), self.connect_timeout
                )
            except Exception as exc:  # a listing it cannot give is no definition to read
                self.notices.append(f"{server}: {explain_exception(exc)} (resources and prompts)")
                found[server] = []
        return found

    async def close(self) -> None:
        """Every server at once: a stdio server's stdin closed, --stop-grace, its group ended."""
        connections = list(self.connections.values())
        self.connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def _register_tools(self, listings: dict[str, list[dict]]) -> None:
        owners: dict[str, list[str]] = {}
        for server, tools in listings.items():
            for tool in tools:
                owners.setdefault(tool["name"], []).append(server)
        for name, servers in sorted(owners.items()):
            if len(servers) > 1:
                self.notices.append(
                    f"tool '{name}' is offered by several servers ({', '.join(servers)}); "
                    f"Claude sees them as " + ", ".join(f"{s}__{name}" for s in servers)
                )
        for server, tools in listings.items():
            for tool in tools:
                exposed = (
                    f"{server}__{tool['name']}" if len(owners[tool["name"]]) > 1 else tool["name"]
                )
                schema = dict(tool["input_schema"] or {"type": "object"})
                schema.setdefault("type", "object")
                self.tools[exposed] = ToolSpec(
                    exposed,
                    server,
                    tool["name"],
                    tool["description"] or "",
                    schema,
                    dict(tool.get("annotations") or {}),
                    title=tool.get("title"),
                    output_schema=tool.get("output_schema"),
                    meta=dict(tool.get("meta") or {}),
                )
        self._show([self.tools[name].to_anthropic() for name in sorted(self.tools)])

    def _show(self, definitions: list[dict]) -> None:
        """Sorted and built once, so every request carries byte-identical tool definitions and the
        cache_control mark on the last one caches the whole tool prefix."""
        self.definitions = {d["name"]: d for d in definitions}
        self._anthropic_tools = _cached_tool_prefix(definitions)

    def override_tools(self, overrides: dict[str, dict], source: str = "--tool-overrides") -> None:
        """Shows Claude another description and/or input schema for some tools (`tool` or
        `server__tool`); `tools` keeps what the servers said, and the servers still run the calls.
        A name that matches no tool is bad input, before the first model call."""
        by_name = {}
        for name, override in overrides.items():
            spec = self.tools.get(name) or next(
                (t for t in self.tools.values() if f"{t.server}__{t.remote_name}" == name), None
            )
            if spec is None:
                raise InputError(
                    f"{source}: no connected server offers a tool named {name!r}",
                    hint="the tools are: " + ", ".join(self.tool_names()),
                )
            by_name[spec.name] = override
            if TOOL_BOUND_ARGUMENTS in override:
                self.bound_arguments[spec.name] = override[TOOL_BOUND_ARGUMENTS]
        definitions = []
        for name in sorted(self.tools):
            definition = self.tools[name].to_anthropic()
            override = by_name.get(name, {})
            for key in TOOL_OVERRIDE_KEYS:
                if key in override:
                    definition[key] = override[key]
            definitions.append(definition)
        self._show(definitions)

    @property
    def anthropic_tools(self) -> list[dict]:
        return self._anthropic_tools

    def tool_names(self) -> list[str]:
        return sorted(self.tools)

    async def call_tool(self, name: str, arguments: Any) -> ToolOutcome:
        """A tool call, once one of the hub's C.TOOL_CALLS_IN_FLIGHT slots is free: a --batch
        round hands 1,000 conversations their answers at once, and 1,000 calls under way (each
        with its state in the server, in this process for a --server-module) would be the run's
        memory peak. The wait is not the call's duration."""
        async with self.call_slots:
            return await self.call_tool_now(name, arguments)

    async def call_tool_now(self, name: str, arguments: Any) -> ToolOutcome:
        start = time.perf_counter()

        def outcome(
            text: str, is_error: bool, server: str | None, server_failed: bool = False
        ) -> ToolOutcome:
            return ToolOutcome(
                text,
                is_error,
                server,
                round((time.perf_counter() - start) * 1000, 2),
                server_failed,
            )

        tool = self.tools.get(name)
        if tool is None:
            return replace(
                outcome(
                    f"Unknown tool: {name}. Available tools: {', '.join(self.tool_names())}",
                    True,
                    None,
                ),
                executed=False,
            )
        if not isinstance(arguments, dict):
            return replace(
                outcome(
                    f"Tool arguments must be a JSON object, got {type(arguments).__name__}",
                    True,
                    tool.server,
                ),
                executed=False,
            )
        answered = self.policy.answer(
            tool, arguments
        )  # mocked, replayed or withheld: not the server
        if answered is not None:
            answered.duration_ms = round((time.perf_counter() - start) * 1000, 2)
            return answered
        if not any(spec.name == tool.server for spec in self.specs):
            return ToolOutcome(
                f"no server runs {tool.name}: its tools came from the cassette {self.policy.replay.folder} "
                f"(name the server to call it live)"
                if self.policy.replay
                else f"no server runs {tool.name}",
                True,
                tool.server,
                0.0,
                fails_case=True,
                executed=False,
            )
        connection = self.connections.get(tool.server)
        if connection is None or connection.client is None:  # an earlier restart failed: try again
            connection = await self.restart(tool.server, connection)
            if connection.client is None:
                return outcome(
                    connection.describe_failure("is not running and could not be restarted"),
                    True,
                    tool.server,
                    server_failed=True,
                )
        try:
            result = await asyncio.wait_for(
                serving(
                    connection,
                    connection.client.call_tool(
                        tool.remote_name, arguments, read_timeout_seconds=self.tool_timeout
                    ),
                ),
                self.tool_timeout + 1,
            )
        except TimeoutError:
            return outcome(f"Tool call timed out after {self.tool_timeout:g}s", True, tool.server)
        except Exception as exc:
            reason = explain_exception(exc)
            if "timed out" in reason.lower():
                return outcome(
                    f"Tool call timed out after {self.tool_timeout:g}s", True, tool.server
                )
            if await self.is_alive(connection):
                return outcome(f"Tool call {reason}", True, tool.server)
            message = connection.describe_failure(f"died during the call ({reason})")
            await self.restart(tool.server, connection)  # the next cases get a fresh server
            return outcome(message, True, tool.server, server_failed=True)
        answer = self.answered(
            result,
            outcome(
                tool_result_text(result, self.max_result_chars), bool(result.is_error), tool.server
            ),
        )
        if self.policy.recorder is not None:
            self.policy.recorder.record(
                tool.server, tool.remote_name, arguments, answer.output, answer.is_error
            )
        return answer

    def answered(self, result: Any, outcome: ToolOutcome) -> ToolOutcome:
        """Who answered a call the server made: the server (a proxy in front of one says
        otherwise: see ProxiedHub)."""
        return outcome

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
            fresh = ServerConnection(spec, self.connect_timeout, self.stop_grace)
            try:
                await fresh.open()
            except ServerError as exc:
                self.notices.append(str(exc))
            self.connections[server] = fresh
            return fresh


class RunTools:
    """The tools as one run sees them: the case's own selection of the servers' tools (CSV
    `tools`, under the names it gives them; None: every tool as the hub shows it), each call
    carrying the arguments --tool-overrides binds to its tool, "{run}" made the run's id."""

    def __init__(self, hub: McpHub, view: dict[str, str] | None, run_id: str) -> None:
        self.hub, self.view, self.run_id = hub, view, run_id
        self.anthropic_tools = (
            hub.anthropic_tools
            if view is None
            else _cached_tool_prefix(
                [
                    dict(hub.definitions[target], name=shown)
                    for shown, target in sorted(view.items())
                    if target in hub.definitions
                ]
            )
        )

    def bound(self, tool: str) -> dict:
        return {
            key: value.replace("{run}", self.run_id) if isinstance(value, str) else value
            for key, value in self.hub.bound_arguments.get(tool, {}).items()
        }

    async def call_tool(self, name: str, arguments: Any) -> ToolOutcome:
        target = name if self.view is None else self.view.get(name)
        if target is None:
            return ToolOutcome(
                f"Unknown tool: {name}. Available tools: {', '.join(sorted(self.view or ()))}",
                True,
                None,
                0.0,
                executed=False,
            )
        if isinstance(arguments, dict) and target in self.hub.bound_arguments:
            arguments = {**arguments, **self.bound(target)}
        return await self.hub.call_tool(target, arguments)
