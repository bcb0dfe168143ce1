"""The hostile room: what scan finds in a tool definition (hidden Unicode, instructions, URLs
and blobs, collisions, missing annotations).

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import test_constants as C

from ..hub.pins import tool_definition
from ..result_records import CaseResult, ScanFindingRecord, ScanRecord
from ..sinks import HIDDEN_CHARACTERS, HIDDEN_UNSAFE
from .statistics import rounded_interval, wilson_interval

if TYPE_CHECKING:
    from ..hub.tools import ToolSpec


# `scan` reads every tool definition (no model call) and reports what poisoning looks like: hidden
# characters anywhere in it (the tag characters decoded to the text they smuggle), phrases
# addressed to the model, URLs, e-mail addresses and encoded blobs, overlong descriptions, names
# that collide across servers, and tools without annotations. Each check is a row of SCAN_CHECKS.
HIDDEN_KINDS = {kind: re.compile(f"[{chars}]") for kind, chars in HIDDEN_CHARACTERS.items()}


def hidden_kind(char: str) -> str | None:
    """Which kind of hidden character this is (HIDDEN_CHARACTERS), "format" for any other format,
    private-use, unassigned or control character (tab and line breaks aside), else None."""
    import unicodedata

    for kind, pattern in HIDDEN_KINDS.items():
        if pattern.match(char):
            return kind
    category = unicodedata.category(char)
    if category in ("Cf", "Co", "Cn") or (category == "Cc" and char not in "\t\n\r"):
        return "format"
    return None


def hidden_runs(text: str) -> list[dict]:
    """Every run of hidden characters of one kind: where it starts, how long it is, which code
    points, and (tag characters) the ASCII text they smuggle."""
    import unicodedata

    runs, index = [], 0
    while index < len(text):
        kind = hidden_kind(text[index])
        if kind is None:
            index += 1
            continue
        end = index + 1
        while end < len(text) and hidden_kind(text[end]) == kind:
            end += 1
        run = text[index:end]
        found = {
            "kind": kind,
            "at": index,
            "count": end - index,
            "codepoints": sorted({f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in run}),
        }
        if kind == "tag":
            found["decoded"] = "".join(
                chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E
            )
        runs.append(found)
        index = end
    return runs


def revealed(text: str) -> str:
    """A text as a model reads it: tag characters as the ASCII they mirror, other hidden
    characters gone (the rule of the scripted model too)."""
    text = "".join(chr(ord(c) - 0xE0000) if 0xE0020 <= ord(c) <= 0xE007E else c for c in text)
    return HIDDEN_UNSAFE.sub("", text)


def definition_strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, text) of every string in a definition, keys included."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{where}.<key>", str(key)
            yield from definition_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from definition_strings(item, f"{where}[{index}]")


# Phrases a description addresses to the model, read as `revealed` text: (pattern, severity, what).
SCAN_PHRASES: tuple[tuple[re.Pattern, str, str], ...] = (
    (
        re.compile(
            r"\b(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+|your\s+)?(previous|prior|above|"
            r"earlier|other)\s+(instructions|prompts|rules|messages)",
            re.I,
        ),
        "high",
        "tells the model to ignore its instructions",
    ),
    (
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|information)\s*>", re.I),
        "high",
        "a tag addressed to the model",
    ),
    (
        re.compile(r"\[\s*system\b|\bsystem\s+(notice|message|override|instruction)", re.I),
        "high",
        "poses as a system message",
    ),
    (
        re.compile(
            r"\b(do\s+not|don't|never)\s+(tell|inform|mention|reveal|show|alert|notify)\b[^.\n]{0,60}"
            r"\b(user|human|anyone)",
            re.I,
        ),
        "high",
        "asks to hide something from the user",
    ),
    (
        re.compile(r"\bthis\s+is\s+an\s+important\s+message\b", re.I),
        "high",
        "poses as a message from the user",
    ),
    (
        re.compile(r"~/\.ssh|\bid_rsa\b|/etc/passwd|\.aws/credentials|\bmcp\.json\b", re.I),
        "high",
        "names a secret file",
    ),
)


SCAN_URL = re.compile(r"\bhttps?://[^\s\"'<>)]+|\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")


SCAN_BLOB = re.compile(
    rf"[A-Za-z0-9+/]{{{C.SCAN_BLOB_MIN_CHARS},}}={{0,2}}|\b[0-9a-fA-F]{{{C.SCAN_BLOB_MIN_CHARS},}}\b"
)


def finding(
    spec: ToolSpec,
    check: str,
    severity: str,
    detail: str,
    where: str = "",
    decoded: str | None = None,
) -> ScanFindingRecord:
    return ScanFindingRecord(
        server=spec.server,
        tool=spec.remote_name,
        check=check,
        severity=severity,  # type: ignore[arg-type]
        detail=detail,
        where=where,
        decoded=decoded,
    )


def scan_hidden(spec: ToolSpec, others: Sequence[ToolSpec]) -> list[ScanFindingRecord]:
    found = []
    for where, text in definition_strings(tool_definition(spec), spec.remote_name):
        for run in hidden_runs(text):
            decoded = run.get("decoded")
            found.append(
                finding(
                    spec,
                    "hidden-unicode",
                    "high",
                    f"{run['count']} {run['kind']} character(s) at {run['at']}: "
                    + ", ".join(run["codepoints"][:4])
                    + (f"; they spell {decoded!r}" if decoded else ""),
                    where,
                    decoded,
                )
            )
    return found


def scan_phrases(spec: ToolSpec, others: Sequence[ToolSpec]) -> list[ScanFindingRecord]:
    found = []
    names = {o.remote_name for o in others} | {o.name for o in others}
    calls_other = re.compile(r"\b(call|invoke)\s+`?([A-Za-z0-9_.-]+)`?", re.I)
    for where, text in definition_strings(tool_definition(spec), spec.remote_name):
        shown = revealed(text)
        for pattern, severity, what in SCAN_PHRASES:
            match = pattern.search(shown)
            if match:
                found.append(
                    finding(
                        spec, "instruction-phrases", severity, f"{what}: {match.group()!r}", where
                    )
                )
        for match in calls_other.finditer(shown):
            if match.group(2) in names - {spec.remote_name, spec.name}:
                found.append(
                    finding(
                        spec,
                        "instruction-phrases",
                        "medium",
                        f"tells the model to call another tool: {match.group()!r}",
                        where,
                    )
                )
    return found


def scan_urls_and_blobs(spec: ToolSpec, others: Sequence[ToolSpec]) -> list[ScanFindingRecord]:
    found = []
    for where, text in definition_strings(tool_definition(spec), spec.remote_name):
        shown = revealed(text)
        for match in SCAN_URL.finditer(shown):
            found.append(
                finding(spec, "urls", "medium", f"a URL or address: {match.group()!r}", where)
            )
        for match in SCAN_BLOB.finditer(shown):
            found.append(
                finding(
                    spec,
                    "encoded-blobs",
                    "medium",
                    f"{len(match.group())} characters of base64 or hex: {match.group()[:24]!r}…",
                    where,
                )
            )
    return found


def scan_long(spec: ToolSpec, others: Sequence[ToolSpec]) -> list[ScanFindingRecord]:
    size = len(spec.description)
    if size <= C.SCAN_LONG_DESCRIPTION_CHARS:
        return []
    return [
        finding(
            spec,
            "long-description",
            "low",
            f"the description is {size:,} characters long (more than "
            f"{C.SCAN_LONG_DESCRIPTION_CHARS:,}: room to hide instructions in)",
            "description",
        )
    ]


def folded_name(name: str) -> str:
    return re.sub(r"[-_.\s]", "", name.casefold())


def one_edit_apart(a: str, b: str) -> bool:
    """Whether one insertion, deletion or substitution makes `a` into `b`."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def scan_collisions(spec: ToolSpec, others: Sequence[ToolSpec]) -> list[ScanFindingRecord]:
    """Another server's tool of the same name, or of a look-alike one (the same letters but for
    case and separators, or one letter apart): a tool could shadow the other."""
    found = []
    mine = folded_name(spec.remote_name)
    for other in others:
        if other.server == spec.server:
            continue
        theirs = folded_name(other.remote_name)
        if other.remote_name == spec.remote_name:
            how = "the same name"
        elif mine == theirs or (min(len(mine), len(theirs)) >= 6 and one_edit_apart(mine, theirs)):
            how = "a look-alike name"
        else:
            continue
        found.append(
            finding(
                spec,
                "name-collision",
                "medium",
                f"server {other.server} offers {other.remote_name}: {how}",
                "name",
            )
        )
    return found


def scan_unannotated(spec: ToolSpec, others: Sequence[ToolSpec]) -> list[ScanFindingRecord]:
    if not spec.unannotated:
        return []
    return [
        finding(
            spec,
            "no-annotations",
            "low",
            "no readOnlyHint or destructiveHint: a client cannot tell whether it changes things",
            "annotations",
        )
    ]


# Every check `scan` makes, in the order its findings are listed: one row per check.
SCAN_CHECKS: dict[str, Callable[[ToolSpec, Sequence[ToolSpec]], list[ScanFindingRecord]]] = {
    "hidden-unicode": scan_hidden,
    "instruction-phrases": scan_phrases,
    "urls": scan_urls_and_blobs,
    "long-description": scan_long,
    "name-collision": scan_collisions,
    "no-annotations": scan_unannotated,
}


def severity_rank(severity: str) -> int:
    return C.SCAN_SEVERITIES.index(severity)


def scan_tools(tools: Sequence[ToolSpec], fail_on: str) -> ScanRecord:
    specs = sorted(tools, key=lambda t: (t.server, t.remote_name))
    findings = [f for spec in specs for check in SCAN_CHECKS.values() for f in check(spec, specs)]
    return ScanRecord(
        servers=sorted({t.server for t in specs}),
        tools=len(specs),
        fail_on=fail_on,
        findings=findings,
    )


def scan_case_results(tools: Sequence[ToolSpec], record: ScanRecord) -> list[CaseResult]:
    """A case per tool: failed by a finding at or above --fail-on; every finding is a reason."""
    cases = []
    for spec in sorted(tools, key=lambda t: (t.server, t.remote_name)):
        mine = [f for f in record.findings if (f.server, f.tool) == (spec.server, spec.remote_name)]
        failing = [f for f in mine if severity_rank(f.severity) >= severity_rank(record.fail_on)]
        reasons: dict[str, int] = {}
        for f in mine:
            key = f"{f.severity}: {f.check}: {f.detail}" + (f" ({f.where})" if f.where else "")
            reasons[key] = 1
        cases.append(
            CaseResult(
                name=spec.remote_name,
                kind="scan",
                group=f"scan: {spec.server}",
                passed=not failing,
                runs=1,
                passes=int(not failing),
                pass_rate=float(not failing),
                interval=rounded_interval(wilson_interval(int(not failing), 1)),
                reasons=reasons,
                prompt=spec.description,
                description=f"{len(mine)} finding(s)",
            )
        )
    return cases
