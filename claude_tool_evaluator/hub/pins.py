"""Pins: every tool definition's SHA-256 (--pin FILE), what changed since, and the lock file.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, the hub rooms above it."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError

import test_constants as C

from ..errors import EvalError, InputError, ServerError
from ..files import parse_json_text, read_text_file, write_text_atomic
from ..redaction import Redactor
from ..results_schema.document import Record, first_schema_problem
from ..results_schema.security import PinChangeRecord, PinRecord
from ..sinks import json_text
from .tools import ToolSpec

__all__ = [
    "PinsChanged",
    "check_pins",
    "definition_sha256",
    "tool_definition",
]


# The lock file keeps, per server and tool, the SHA-256 of the tool's definition (its name,
# description, input schema and annotations, as canonical JSON) and the definition itself, so a
# later run against the same servers names every change with a diff of it. A change fails the
# run before any model call unless --update-pins (which writes the new definitions). A server the
# file does not know is pinned as it is (its tools count as added); one the run does not connect
# to is left as it was. A run whose servers list no tools at all, where the file pins some, stops
# in one line before any model call (a server that lost its tools, or failed to load them, is
# not a server whose pins match) unless --update-pins, which pins its empty list.
class _PinnedTool(Record):
    sha256: str
    definition: dict[str, Any]


class _PinsFile(Record):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    format: Literal[C.PINS_FORMAT]  # type: ignore[valid-type]
    written_at: str = ""
    servers: dict[str, dict[str, _PinnedTool]] = {}


class PinsChanged(EvalError):
    """--pin: a tool definition differs from its pin (and --update-pins was not given)."""

    def __init__(self, record: PinRecord) -> None:
        self.record = record
        super().__init__(f"{len(record.changes)} tool definition(s) changed since {record.file}")


def tool_definition(spec: ToolSpec) -> dict:
    return {
        "name": spec.remote_name,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "annotations": spec.annotations,
    }


def definition_sha256(definition: dict) -> str:
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _definition_diff(server: str, tool: str, old: dict | None, new: dict | None) -> str:
    def lines(definition: dict | None) -> list[str]:
        return [] if definition is None else json_text(definition).splitlines(keepends=True)

    return "".join(
        difflib.unified_diff(
            lines(old), lines(new), f"pinned {server}/{tool}", f"now {server}/{tool}", n=2
        )
    )


def _load_pins(path: Path) -> _PinsFile | None:
    """The lock file, or None when there is none yet."""
    if not path.exists():
        return None
    data = parse_json_text(read_text_file(path, "--pin file"), path)
    if not isinstance(data, dict) or data.get("format") != C.PINS_FORMAT:
        raise InputError(
            f'not a pins file (its "format" is not {C.PINS_FORMAT!r})',
            path,
            None,
            "give --pin a file of its own (it is written on the first run)",
        )
    try:
        return _PinsFile.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"not a valid pins file: {first_schema_problem(exc)}",
            path,
            None,
            "delete it and run again with --pin to pin the tools anew",
        ) from None


def _current_pins(tools: Iterable[ToolSpec]) -> dict[str, dict[str, _PinnedTool]]:
    found: dict[str, dict[str, _PinnedTool]] = {}
    for spec in tools:
        definition = tool_definition(spec)
        found.setdefault(spec.server, {})[spec.remote_name] = _PinnedTool(
            sha256=definition_sha256(definition), definition=definition
        )
    return found


def _pin_changes(
    pinned: dict[str, dict[str, _PinnedTool]], now: dict[str, dict[str, _PinnedTool]]
) -> list[PinChangeRecord]:
    """Every difference between the pins and the servers' tools now (servers in both, and the
    tools of a server new to the file, as added)."""
    changes = []
    for server in sorted(now):
        before, after = pinned.get(server, {}), now[server]
        for tool in sorted({*before, *after}):
            old, new = before.get(tool), after.get(tool)
            if old is not None and new is not None and old.sha256 == new.sha256:
                continue
            changes.append(
                PinChangeRecord(
                    server=server,
                    tool=tool,
                    change="added" if old is None else "removed" if new is None else "changed",
                    pinned_sha256=old.sha256 if old else None,
                    sha256=new.sha256 if new else None,
                    diff=_definition_diff(
                        server,
                        tool,
                        old.definition if old else None,
                        new.definition if new else None,
                    ),
                )
            )
    return changes


def check_pins(path: str, tools: Iterable[ToolSpec], update: bool, dry_run: bool) -> PinRecord:
    """--pin FILE after the servers listed their tools, before any model call: the first run
    writes the file; later ones compare (--update-pins writes the new definitions). Raises
    PinsChanged on a change without --update-pins. A dry run writes nothing."""
    target = Path(path)
    pinned = _load_pins(target)
    now = _current_pins(tools)
    emptied = {s: t for s, t in (pinned.servers if pinned else {}).items() if t} if not now else {}
    if emptied and not update:
        count, names = sum(len(t) for t in emptied.values()), ", ".join(sorted(emptied))
        lists = "the server now lists" if len(emptied) == 1 else "the servers now list"
        raise ServerError(
            f"{path}: {lists} no tools, where the file pins {count} tool(s) of {names}: the run "
            "stopped before any model call (if it really offers none now, --update-pins accepts "
            "that)"
        )
    now.update({server: {} for server in emptied})  # --update-pins: pinned as empty
    changes = _pin_changes(pinned.servers if pinned else {}, now) if pinned else []
    record = PinRecord(file=str(path), tools=sum(len(t) for t in now.values()), changes=changes)
    if pinned is not None and changes and not update:
        record.failed = True
        raise PinsChanged(record)
    if not dry_run and (pinned is None or (update and changes)):
        servers = dict(pinned.servers if pinned else {}, **now)
        document = _PinsFile(
            format=C.PINS_FORMAT,
            written_at=datetime.now(UTC).isoformat(timespec="seconds"),
            servers=servers,
        )
        write_text_atomic(
            target,
            json_text(Redactor.for_run().data(document.model_dump(mode="json"))) + "\n",
        )
        record.written = True
    return record
