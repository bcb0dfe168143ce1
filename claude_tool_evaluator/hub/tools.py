"""Tools and servers: a tool's definition (ToolSpec) with its schema checked without Python's
backtracking `re`, and a call's outcome.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..patterns import BadPattern, untrusted_search
from ..sinks import cap_text

__all__ = [
    "ToolOutcome",
    "ToolSpec",
    "tool_result_text",
    "untrusted_schema_validator",
]


# ---------------------------------------------------------------------------- tool schemas, checked without Python's backtracking `re`
class _UntrustedRe:
    """What jsonschema's keyword functions call as `re` (only `re.search`): untrusted_search."""

    @staticmethod
    def search(pattern: Any, text: str) -> bool:
        if not isinstance(pattern, str):  # a schema's `"pattern": 5`
            raise BadPattern(f"{pattern!r} is not a string")
        return untrusted_search(pattern, text)


@functools.lru_cache(maxsize=1)
def _jsonschema_keywords_without_re() -> dict[Callable, Callable]:
    """Each of jsonschema's keyword functions -> a copy whose `re`, and that of every helper it
    calls, is UntrustedRe: `pattern`, `patternProperties`, `additionalProperties` and
    `unevaluatedProperties` keep jsonschema's own rules and messages, and a server's patterns never
    reach Python's `re`. (No `format` is asserted: the validators get no format checker.)"""
    import types

    from jsonschema import _keywords, _legacy_keywords, _utils

    def own_functions(module: Any) -> dict[str, types.FunctionType]:
        return {
            name: value
            for name, value in vars(module).items()
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__
        }

    def rebound(module: Any, helpers: dict[str, Callable]) -> dict[str, Any]:
        namespace = {**vars(module), **helpers, "re": _UntrustedRe}
        for name, function in own_functions(module).items():
            copy = types.FunctionType(
                function.__code__, namespace, name, function.__defaults__, function.__closure__
            )
            copy.__kwdefaults__ = function.__kwdefaults__
            namespace[name] = copy  # a helper calling itself (or a sibling) calls the copy
        return namespace

    utils = rebound(_utils, {})
    helpers = {name: utils[name] for name in own_functions(_utils)}
    copies: dict[Callable, Callable] = {}
    for module in (_keywords, _legacy_keywords):
        namespace = rebound(module, helpers)
        copies.update({f: namespace[name] for name, f in own_functions(module).items()})
    return copies


@functools.cache
def untrusted_schema_validator(base: Any) -> Any:
    """A jsonschema validator class like `base`, whose regular expressions are untrusted_search's."""
    import jsonschema

    copies = _jsonschema_keywords_without_re()
    keywords = {name: copies.get(function, function) for name, function in base.VALIDATORS.items()}
    return jsonschema.validators.extend(base, keywords)


# ---------------------------------------------------------------------------- tools and servers
@dataclass
class ToolSpec:
    """A tool as Claude sees it (`name`), and where it really lives (`server`, `remote_name`)."""

    name: str
    server: str
    remote_name: str
    description: str
    input_schema: dict
    annotations: dict = field(
        default_factory=dict
    )  # the server's MCP tool annotations: readOnlyHint, destructiveHint, ...
    # What else a client may show the model of the tool (scan reads them; pins and requests do not)
    title: str | None = None
    output_schema: dict | None = None
    meta: dict = field(default_factory=dict)  # the definition's `_meta`

    def to_anthropic(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    @property
    def read_only(self) -> bool:
        """Annotated `readOnlyHint: true`: it changes nothing."""
        return self.annotations.get("readOnlyHint") is True

    @property
    def destructive(self) -> bool:
        """Annotated `destructiveHint: true` (and not read-only): what --tool-policy safe
        withholds. An unannotated tool is not (the spec's pessimistic default would withhold
        every tool of every server that says nothing): --tool-policy strict applies it."""
        return self.annotations.get("destructiveHint") is True and not self.read_only

    @property
    def unannotated(self) -> bool:
        """Says neither readOnlyHint nor destructiveHint."""
        return not {"readOnlyHint", "destructiveHint"} & set(self.annotations)

    @property
    def contradictory(self) -> bool:
        """Annotated both read-only and destructive."""
        return self.read_only and self.annotations.get("destructiveHint") is True

    @property
    def destructive_by_spec(self) -> bool:
        """Destructive as the MCP specification reads the annotations with their defaults
        (readOnlyHint false, destructiveHint true): unless annotated read-only, or annotated
        `destructiveHint: false` (only additive changes). Contradictory ones count destructive."""
        if self.contradictory:
            return True
        return not self.read_only and self.annotations.get("destructiveHint", True) is not False

    @functools.cached_property
    def validator(self) -> Any:
        """The jsonschema validator of the tool's arguments, built once for every call checked."""
        import jsonschema

        schema = self.input_schema
        base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return untrusted_schema_validator(base)(schema)


@dataclass
class ToolOutcome:
    output: str
    is_error: bool
    server: str | None
    duration_ms: float
    server_failed: bool = (
        False  # the server died under the call: an error of the run, not of Claude
    )
    source: str = "live"  # live | mock | replay | policy: who answered (see ToolCall)
    executed: bool = True  # the server ran the call
    fails_case: bool = False  # not the server's answer and not Claude's doing: a replay miss


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
