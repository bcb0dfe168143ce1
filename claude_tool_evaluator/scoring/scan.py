"""The hostile room: what scan finds in a tool definition, read as the model reads it (hidden
Unicode, look-alike letters, instructions, URLs and blobs, collisions, missing annotations).

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import test_constants as C

from ..hub.pins import tool_definition
from ..results_schema.document import CaseResult
from ..results_schema.security import ScanFindingRecord, ScanRecord
from ..sinks import HIDDEN_CHARACTERS, HIDDEN_UNSAFE
from .model_reading import (
    VARIATION_SELECTOR,
    Payload,
    Reading,
    as_read,
    encoded_payloads,
    hidden_flag,
    look_alikes_folded,
    plain,
    readings,
    selector_text,
    tag_decoded,
)
from .statistics import rounded_interval, wilson_interval

__all__ = [
    "Definition",
    "listed_read",
    "revealed",
    "scan_case_results",
    "scan_definitions",
    "scan_tools",
    "tool_read",
    "severity_rank",
]

if TYPE_CHECKING:
    from ..hub.tools import ToolSpec


# `scan` reads every tool definition (no model call) and reports what poisoning looks like: hidden
# characters anywhere in it (tag characters and variation selectors decoded to the text they
# smuggle), phrases addressed to the model, URLs, e-mail addresses and encoded blobs, words in
# look-alike letters, overlong descriptions, names that collide across servers, and tools without
# annotations. Each check is a row of SCAN_CHECKS. The phrases are matched in every string of the
# definition as the model reads it (model_reading.readings): look-alike letters folded, hidden
# text decoded, base64 and hex decoded even when split into chunks.
_HIDDEN_KINDS = {
    **{kind: re.compile(f"[{chars}]") for kind, chars in HIDDEN_CHARACTERS.items()},
    "variation-selector": VARIATION_SELECTOR,
}
_SCAN_DECODED_CHARS = 500  # a finding quotes this much of the text it decoded


def severity_rank(severity: str) -> int:
    return C.SCAN_SEVERITIES.index(severity)


def _hidden_kind(char: str) -> str | None:
    """Which kind of hidden character this is (HIDDEN_CHARACTERS, or a variation selector),
    "format" for any other format, private-use, unassigned or control character (tab and line
    breaks aside), else None."""
    import unicodedata

    for kind, pattern in _HIDDEN_KINDS.items():
        if pattern.match(char):
            return kind
    category = unicodedata.category(char)
    if category in ("Cf", "Co", "Cn") or (category == "Cc" and char not in "\t\n\r"):
        return "format"
    return None


def _harmless_run(text: str, kind: str, start: int, end: int) -> bool:
    """A lone variation selector (a glyph choice: an emoji's colour form, a kanji's variant) or a
    subdivision flag's tag characters: Unicode used as meant."""
    if kind == "variation-selector":
        return end - start == 1
    return kind == "tag" and hidden_flag(text, start)


def _run_decoded(kind: str, run: str) -> str | None:
    """The text a run of tag characters or variation selectors smuggles."""
    if kind == "tag":
        return tag_decoded(run)
    if kind == "variation-selector":
        return selector_text(run)
    return None


def _hidden_runs(text: str) -> list[dict]:
    """Every run of hidden characters of one kind: where it starts, how long it is, which code
    points, and (tag characters, variation selectors) the text they smuggle."""
    import unicodedata

    if plain(text):
        return []
    runs, index = [], 0
    while index < len(text):
        kind = _hidden_kind(text[index])
        if kind is None:
            index += 1
            continue
        end = index + 1
        while end < len(text) and _hidden_kind(text[end]) == kind:
            end += 1
        run = text[index:end]
        if not _harmless_run(text, kind, index, end):
            found = {
                "kind": kind,
                "at": index,
                "count": end - index,
                "codepoints": sorted(
                    {f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in run}
                ),
            }
            decoded = _run_decoded(kind, run)
            if decoded is not None:
                found["decoded"] = decoded
            runs.append(found)
        index = end
    return runs


def revealed(text: str) -> str:
    """A text as a model reads it: tag characters as the ASCII they mirror, other hidden
    characters gone (the rule of the scripted model too)."""
    return HIDDEN_UNSAFE.sub("", tag_decoded(text))


def _definition_strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, text) of every string in a definition, keys included: descriptions and titles at
    any depth, enum values, defaults, examples, nested schemas ($defs, items, anyOf...) and the
    annotations."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{where}.<key>", str(key)
            yield from _definition_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _definition_strings(item, f"{where}[{index}]")


# A schema keyword whose value is data (a default, an example, a reference, the dialect), not
# prose: a URL there is what the tool takes (server-everything's default file URL, every
# schema's $schema), not somewhere the model is sent. Phrases are looked for there all the same.
_DATA_VALUE = re.compile(
    r"\.(default|examples|const|enum|\$schema|\$id|\$ref|format|uri|uriTemplate|mimeType"
    r"|contents)(\[\d+\])*$"
)


def _decoded_text(reading: Reading) -> str | None:
    """What a finding quotes of a reading: its text when reading it undid something."""
    if not reading.how:
        return None
    text = reading.text.strip()
    return text if len(text) <= _SCAN_DECODED_CHARS else text[: _SCAN_DECODED_CHARS - 1] + "…"


def _read_through(reading: Reading) -> str:
    return f" (read through {', '.join(reading.how)})" if reading.how else ""


@dataclass(frozen=True)
class Definition:
    """One thing a server shows a model, as scan reads it: a tool, a resource, a resource
    template, a prompt or the server's instructions; `fields` is everything of it a model may
    read (a tool's name, title, description, input and output schemas, annotations, `_meta`)."""

    server: str
    kind: str
    name: str
    fields: dict
    unannotated: bool = False  # a tool that says neither readOnlyHint nor destructiveHint

    @property
    def label(self) -> str:
        """How a finding's case is named: a tool by its name, anything else by kind and name."""
        return self.name if self.kind == "tool" else f"{self.kind} {self.name}"


def tool_read(spec: ToolSpec) -> Definition:
    """A tool as the model is shown it: its pinned definition, and its title, output schema and
    `_meta` when the server gives them."""
    fields = tool_definition(spec)
    extra = {"title": spec.title, "output_schema": spec.output_schema, "_meta": spec.meta}
    fields |= {key: value for key, value in extra.items() if value}
    return Definition(spec.server, "tool", spec.remote_name, fields, spec.unannotated)


def listed_read(server: str, listing: dict) -> Definition:
    """A resource, resource template, prompt or server's instructions as the hub lists it."""
    fields = {key: value for key, value in listing.items() if key != "kind"}
    return Definition(server, str(listing["kind"]), str(listing.get("name") or ""), fields)


@dataclass(frozen=True)
class _Neighbours:
    """The names a definition may name: its own tool's, and every other tool's of the scan."""

    own: frozenset[str]
    others: frozenset[str]


@dataclass(frozen=True)
class _Hit:
    severity: str
    what: str
    quote: str


# A phrase detector: the hits in a text as the model reads it, for a tool among its neighbours.
_PhraseDetector = Callable[[str, _Neighbours], Iterator[_Hit]]

_NEGATION = re.compile(r"\b(?:not|never|no|don't|dont|nor)\s+(?:\w+\s+){0,2}$", re.I)


def _phrase(
    pattern: str, severity: str, what: str, *, unless_negated: bool = False
) -> _PhraseDetector:
    """A detector of one phrase (its first match), read case-insensitively; `unless_negated`:
    not when "not", "never" or "don't" comes just before it ("do not send secrets to...")."""
    compiled = re.compile(pattern, re.I)

    def detect(text: str, neighbours: _Neighbours) -> Iterator[_Hit]:
        for match in compiled.finditer(text):
            if unless_negated and _NEGATION.search(
                text[max(0, match.start() - 40) : match.start()]
            ):
                continue
            yield _Hit(severity, what, match.group())
            return

    return detect


# What an imperative naming another tool is sent on: the reply, the user's data, secrecy. With
# one in its sentence, "use list_tables" is no cross-reference but a hijack.
_COERCION = re.compile(
    r"\bbefore\s+(?:answering|responding|replying|you\s+(?:answer|respond|reply)|doing\s+anything"
    r"|any(?:thing)?\s+else)|\binstead\s+of\b|\bevery\s+time\b|\bwhenever\b|\bregardless\b"
    r"|\bimmediately\b|\bsilently\b|\bsecretly\b|\bwithout\s+(?:telling|informing|notifying)"
    r"|\b(?:the\s+user's|their|user)\s+(?:full\s+|entire\s+|whole\s+|complete\s+|previous\s+)?"
    r"(?:conversation|chat|history|messages|request|query|prompt|input|credentials|files|emails"
    r"|contacts|notes|data)\b|\b(?:full|entire|whole|complete)\s+(?:conversation|chat|history)\b"
    r"|\b(?:conversation|chat|message)\s+history\b|\bcredentials\b|\bpasswords?\b|\bapi\s*keys?\b"
    r"|\bsecrets\b|\bprivate\s+keys?\b|~/\.ssh|\bid_rsa\b",
    re.I,
)
_CALL_VERBS = ("call", "invoke", "execute", "trigger")  # "use" and "run" cross-reference as well
_IMPERATIVE = r"\b(call|invoke|execute|trigger|run|use)\s+"
_CALL_IMPERATIVE = r"\b(call|invoke|execute|trigger)\s+"
_NOT_A_TOOL_NAME = frozenset("this that same other next following previous above below".split())
_SENTENCE_END = re.compile(r"[.!?;\n]")
_SENTENCE_CHARS = 300


def _sentence_around(text: str, start: int, end: int) -> str:
    """The sentence a match stands in (at most SENTENCE_CHARS either side), the match itself left
    out (a tool named list_messages is no mention of messages)."""
    before = text[max(0, start - _SENTENCE_CHARS) : start]
    after = text[end : end + _SENTENCE_CHARS]
    return _SENTENCE_END.split(before)[-1] + " " + _SENTENCE_END.split(after, maxsplit=1)[0]


@functools.lru_cache(maxsize=256)
def _imperatives_naming(names: frozenset[str]) -> tuple[re.Pattern, ...]:
    """The imperatives that name a tool: "the X tool", a call of a name shaped like a tool's
    (snake_case or camelCase), or one of `names`. Group 1 is the verb, group 2 the name."""
    quoted_names = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    patterns = [
        _IMPERATIVE + r"the\s+[`'\"]?([A-Za-z][\w.-]*)[`'\"]?\s+tool\b",
        _CALL_IMPERATIVE + r"(?:the\s+)?[`'\"]?((?-i:[A-Za-z][A-Za-z0-9]*_\w+|[a-z]+[A-Z]\w*))\b",
    ]
    if names:
        patterns.append(_IMPERATIVE + rf"(?:the\s+)?(?:tool\s+)?[`'\"]?({quoted_names})(?![\w-])")
    return tuple(re.compile(p, re.I) for p in patterns)


def _names_another_tool(text: str, neighbours: _Neighbours) -> Iterator[_Hit]:
    """An imperative naming another tool: one of the scan's ("use export_data"), any by "the X
    tool", or a call of a name shaped like a tool's ("call send_report": another server's, maybe
    one the scan does not see). High with a coercion in its sentence, else medium for the
    call-verbs; "use X" or "run X" alone is a cross-reference, never a finding."""
    for imperative in _imperatives_naming(neighbours.others - neighbours.own):
        for match in imperative.finditer(text):
            named = match.group(2)
            if named in neighbours.own or named.casefold() in _NOT_A_TOOL_NAME:
                continue
            if _COERCION.search(_sentence_around(text, match.start(), match.end())):
                yield _Hit("high", "tells the model to call another tool", match.group())
                return
            if match.group(1).casefold() in _CALL_VERBS:
                yield _Hit("medium", "tells the model to call another tool", match.group())
                return


_EXFIL_VERBS = (
    r"\b(?:send|forward|upload|post|transmit|exfiltrate|leak|e-?mail|mail|copy|share|pipe)\b"
)
_ADDRESS = r"(?:https?://[^\s\"'<>)]+|[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
_SECRET_DATA = (
    r"\b(?:conversation|chat\s+history|message\s+history|previous\s+messages|all\s+messages"
    r"|credentials|passwords?|api\s*keys?|secrets|private\s+keys?|ssh\s+keys?|tokens|cookies"
    r"|environment\s+variables|system\s+prompt)\b"
)
_AUDIENCE = r"(?:the\s+user|the\s+human|anyone|them)"

# What a poisoned definition asks for, as concepts (classes of words, not sentences): a secret
# of the user's machine, an access to it, another tool as the receiver, an outside destination.
_SECRET_THING = (
    r"(?:private\s+keys?|ssh\s+(?:keys?|folder|directory|dir|config)|\.ssh\b|\bid_rsa\b"
    r"|\bid_ed25519\b|\.aws\b|\.env\b|\bkeychain\b|\bseed\s+phrase\b|\bwallet\s+keys?\b)"
)
_SECRET_ACCESS = (
    r"\b(?:read|open|cat|load|fetch|retrieve|grab|collect|gather|copy|include|attach|extract"
    r"|dump|print|upload|send|pass|forward|get|take|look\s+up|harvest)\b"
)
_USER_SECRETS = (
    rf"(?:{_SECRET_THING}|\b(?:credentials|passwords?|api\s*keys?|tokens|cookies|secrets"
    r"|conversation|chat\s+history|message\s+history|environment\s+variables)\b)"
)
_TO_ANOTHER_TOOL = (
    r"\b(?:pass|give|hand|forward|send|provide|supply|feed|keep|save|store)\b[^.\n]{0,60}?"
    r"\b(?:to|into|as|for)\b[^.\n]{0,30}?\b(?:next|following|other|another|later|subsequent"
    r"|any)\s+(?:tool|call|function|step|action)s?\b"
)
_WHAT_IT_IS_GIVEN = (
    r"(?:\bwhatever\b|\banything\b|\beverything\b|\ball\s+(?:the\s+)?(?:data|content|text|input)"
    r"|\bwhat(?:ever)?\s+(?:it|you)\s+(?:is|are|get|gets|receive|receives|was|were)\b"
    r"|\bthe\s+(?:data|content|input|text|payload)\s+(?:it|you)\s+(?:is|are|get|gets|receives?)\b"
    r"|\bits\s+(?:whole\s+|entire\s+)?input\b)"
)
_OUTSIDE = rf"(?:{_ADDRESS}|\b(?:remote|external|outside|third[- ]party|offsite|off-site)\b)"
_SENDING = (
    r"\b(?:send|forward|upload|post|transmit|exfiltrate|leak|e-?mail|mail|copy|copie|share|pipe"
    r"|relay|deliver|publish|sync|mirror|replicate|push)(?:s|es|ed|ing)?\b"
)
_SENDS_ON = (
    rf"{_SENDING}[^.\n]{{0,80}}?{_WHAT_IT_IS_GIVEN}[^.\n]{{0,80}}?{_OUTSIDE}"
    rf"|{_WHAT_IT_IS_GIVEN}[^.\n]{{0,40}}?{_SENDING}[^.\n]{{0,60}}?{_OUTSIDE}"
)

# A secret of the user's handed to "the next tool": half of an instruction split between tools.
_HANDS_A_SECRET_ON_PATTERN = (
    rf"{_USER_SECRETS}[^.\n]{{0,120}}?{_TO_ANOTHER_TOOL}"
    rf"|{_TO_ANOTHER_TOOL}[^.\n]{{0,60}}?{_USER_SECRETS}"
)

# The same concepts in the languages a description is most often written in besides English
# (Spanish, French, German, Portuguese, Italian): what a translation of an injection keeps.
_OTHER_OVERRIDE = (
    r"\b(?:ignora|ignorez|ignorer|ignorar|olvida|olvide|omite|oublie[zr]?|vergiss|ignoriere"
    r"|ignorieren|esque[cç]a|dimentica)\b[^.\n]{0,40}?\b(?:instrucciones|indicaciones|instructions"
    r"|consignes|anweisungen|vorgaben|instru[cç][õo]es|istruzioni|reglas|r[èe]gles|regeln|regras"
    r"|regole)\b"
)
_OTHER_SECRECY = (
    r"\bsin\s+(?:dec[ií]rselo|decirle|avisar|informar)\w*\s+al\s+usuario"
    r"|\bno\s+(?:le\s+)?(?:digas|digan|menciones|avises)\b[^.\n]{0,30}\busuario"
    r"|\bsans\s+(?:le\s+)?(?:dire|pr[ée]venir|informer|avertir)\b[^.\n]{0,20}\butilisateur"
    r"|\bohne\s+(?:den|dem)\s+(?:Benutzer|Nutzer|Anwender)"
    r"|\bsem\s+(?:avisar|informar|contar)\b[^.\n]{0,10}\busu[aá]rio"
    r"|\bsenza\s+(?:dire|avvisare|informare)\w*\b[^.\n]{0,10}\butente"
)
_OTHER_SENDS_SECRETS = (
    r"\b(?:env[íi]a|envie|enviar|manda|reenv[íi]a|sube|envoie[zr]?|transf[èe]re[zr]?|sende|schicke"
    r"|[üu]bermittle|invia|inoltra|mande)\b[^.\n]{0,60}?\b(?:claves?\s+(?:privadas?|ssh)"
    r"|contrase[ñn]as|credenciales|cl[ée]s?\s+(?:priv[ée]es?|ssh)|mots?\s+de\s+passe|identifiants"
    r"|(?:privaten?\s+)?Schl[üu]ssel|Passw[öo]rter|Zugangsdaten|chaves?\s+(?:privadas?|ssh)|senhas"
    r"|credenciais|chiavi?\s+(?:privat[ae]|ssh)|credenziali|historial|historique|Verlauf"
    r"|conversaci[óo]n|conversation|Unterhaltung|conversa)\b"
)

# Every phrase `scan` looks for, as the model reads it (a new one is one entry): overrides of the
# model's instructions, secrecy toward the user, exfiltration, another tool named, secret files.
_PHRASE_DETECTORS: tuple[_PhraseDetector, ...] = (
    _phrase(
        r"\b(?:ignore|disregard|forget|override|bypass|set\s+aside)\s+(?:(?:all|any|of|the|these"
        r"|those|your|prior|previous|earlier|above|other|original)\s+)*(?:guidance|directions"
        r"|policies|safeguards|orders)\b",
        "high",
        "tells the model to ignore its instructions",
    ),
    _phrase(_OTHER_OVERRIDE, "high", "tells the model to ignore its instructions (translated)"),
    _phrase(_OTHER_SECRECY, "high", "asks to hide something from the user (translated)"),
    _phrase(
        _OTHER_SENDS_SECRETS,
        "high",
        "tells the model to send the user's secrets (translated)",
    ),
    _phrase(
        rf"{_SECRET_ACCESS}[^.\n]{{0,60}}?{_SECRET_THING}",
        "high",
        "tells the model to read a secret of the user's machine",
        unless_negated=True,
    ),
    _phrase(
        r"\b(?:decode|decipher|decrypt|unscramble|rot-?13|reverse|unencode)\b[^.\n]{0,60}?"
        r"\b(?:and|then)\s+(?:obey|follow|execute|carry\s+out|comply|act\s+on|run|do\s+(?:what|as))"
        r"|\b(?:obey|follow|execute|carry\s+out)\s+(?:the\s+)?(?:decoded|hidden|encoded|encrypted)\b",
        "high",
        "asks the model to decode hidden text and follow it",
    ),
    _phrase(
        _HANDS_A_SECRET_ON_PATTERN,
        "medium",
        "tells the model to hand the user's secrets to another tool",
        unless_negated=True,
    ),
    _phrase(
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|of|the|these|those|your)\s+)*"
        r"(?:(?:previous|prior|above|earlier|preceding|former|original|system|existing|safety"
        r"|developer|other)\s+)?(?:instructions?|prompts?|directives|guidelines|guardrails)\b"
        r"|\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|of|the|your)\s+)*"
        r"(?:previous|prior|above|earlier|preceding|former|original|system|existing|safety)\s+"
        r"(?:rules|directions|constraints|messages|context)\b",
        "high",
        "tells the model to ignore its instructions",
    ),
    _phrase(
        r"\b(?:new|updated|real|actual|true|revised|secret|hidden)\s+(?:system\s+)?"
        r"(?:instructions?|directives?|system\s+prompt)\b",
        "high",
        "announces new instructions",
    ),
    _phrase(
        r"\b(?:reveal|print|repeat|show|output|leak|send|share|include)\b[^.\n]{0,30}"
        r"\b(?:your|the)\s+system\s+prompt\b",
        "high",
        "asks for the system prompt",
    ),
    _phrase(r"\bsystem\s+prompt\b", "medium", "mentions the system prompt"),
    _phrase(r"\byou\s+are\s+now\b|\bfrom\s+now\s+on\b", "medium", "reassigns the model's role"),
    _phrase(
        r"<\s*/?\s*(important|system|instructions?|secret|information)\s*>",
        "high",
        "a tag addressed to the model",
    ),
    _phrase(
        r"\[\s*system\b|\bsystem\s+(notice|message|override|instruction)",
        "high",
        "poses as a system message",
    ),
    _phrase(
        r"\bthis\s+is\s+an\s+important\s+message\b", "high", "poses as a message from the user"
    ),
    _phrase(
        r"\b(?:do\s+not|don't|dont|never|must\s+not|should\s+not)\s+(?:tell|inform|mention|reveal"
        r"|show|alert|notify|warn|disclose)\b[^.\n]{0,60}\b(?:user|human|anyone)"
        rf"|\b(?:do\s+not|don't|dont|never)\s+let\s+{_AUDIENCE}\s+(?:know|see|notice|find\s+out)\b"
        rf"|\bwithout\s+(?:telling|informing|notifying|alerting|warning|letting)\s+{_AUDIENCE}"
        r"|\b(?:do\s+not|don't|dont|never)\s+(?:mention|bring\s+up|disclose|discuss)\s+"
        r"(?:this|that|it|these|any\s+of\s+this)\b"
        rf"|\b(?:keep|hide)\s+(?:this|it|that)\s+(?:(?:a\s+)?secret\s+|hidden\s+)?from\s+{_AUDIENCE}"
        r"|\bthe\s+user\s+(?:must|should)\s+not\s+(?:know|see|notice|be\s+told)\b",
        "high",
        "asks to hide something from the user",
    ),
    _phrase(
        rf"{_EXFIL_VERBS}[^.\n]{{0,80}}?\b(?:to|into)\s+{_ADDRESS}",
        "high",
        "tells the model to send data to an address",
        unless_negated=True,
    ),
    _phrase(
        rf"{_EXFIL_VERBS}[^.\n]{{0,30}}?{_SECRET_DATA}[^.\n]{{0,60}}?\b(?:to|into)\b",
        "high",
        "tells the model to send the user's data somewhere",
        unless_negated=True,
    ),
    _names_another_tool,
    _phrase(
        r"~/\.ssh|\bid_rsa\b|/etc/passwd|\.aws/credentials|\bmcp\.json\b",
        "high",
        "names a secret file",
    ),
)


_SCAN_URL = re.compile(r"\bhttps?://[^\s\"'<>)]+|\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")


# A run of base64 or hex as long as this, not decoding to text: a blob (base64 has digits and both
# cases in any 40 characters of real data; a URL's path or a long word has not).
_SCAN_BLOB = re.compile(
    rf"[A-Za-z0-9+/]{{{C.SCAN_BLOB_MIN_CHARS},}}={{0,2}}|\b[0-9a-fA-F]{{{C.SCAN_BLOB_MIN_CHARS},}}\b"
)


def _blob_shaped(run: str) -> bool:
    return bool(
        re.fullmatch(r"[0-9a-fA-F]+", run)
        or (re.search(r"\d", run) and re.search("[a-z]", run) and re.search("[A-Z]", run))
    )


def _finding(
    spec: Definition,
    check: str,
    severity: str,
    detail: str,
    where: str = "",
    decoded: str | None = None,
) -> ScanFindingRecord:
    return ScanFindingRecord(
        server=spec.server,
        tool=spec.name,
        kind=spec.kind,
        check=check,
        severity=severity,  # type: ignore[arg-type]
        detail=detail,
        where=where,
        decoded=decoded,
    )


def _scan_hidden(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    found = []
    for where, text in _definition_strings(spec.fields, spec.name):
        for run in _hidden_runs(text):
            decoded = run.get("decoded")
            found.append(
                _finding(
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


def _neighbours_of(spec: Definition, others: Sequence[Definition]) -> _Neighbours:
    return _Neighbours(
        own=frozenset({spec.name}),
        others=frozenset({o.name for o in others if o.kind == "tool"}),
    )


def _scan_phrases(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    """Every phrase detector's hits in every string of the definition, as the model reads it
    (and in every payload decoded from it); the same hit in one place once."""
    neighbours = _neighbours_of(spec, others)
    found: dict[tuple[str, str], ScanFindingRecord] = {}
    for where, text in _definition_strings(spec.fields, spec.name):
        # A resource's text is a document (it names functions, says "use X"): high hits only.
        least = "high" if where.endswith(".contents") else "low"
        for reading in readings(text):
            for detect in _PHRASE_DETECTORS:
                for hit in detect(reading.text, neighbours):
                    if severity_rank(hit.severity) < severity_rank(least):
                        continue
                    detail = f"{hit.what}: {hit.quote!r}{_read_through(reading)}"
                    found.setdefault(
                        (where, f"{hit.what}: {hit.quote}"),
                        _finding(
                            spec,
                            "instruction-phrases",
                            hit.severity,
                            detail,
                            where,
                            _decoded_text(reading),
                        ),
                    )
    return list(found.values())


def _scan_urls(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    """URLs and e-mail addresses in the prose of a definition (not in data values: DATA_VALUE),
    as the model reads it."""
    found: dict[tuple[str, str], ScanFindingRecord] = {}
    for where, text in _definition_strings(spec.fields, spec.name):
        if _DATA_VALUE.search(where):
            continue
        for reading in readings(text):
            for match in _SCAN_URL.finditer(reading.text):
                if "ROT13" in reading.how and not match.group().startswith("http"):
                    continue  # an address in ROT13 is still shaped like one: only a URL counts
                found.setdefault(
                    (where, match.group()),
                    _finding(
                        spec,
                        "urls",
                        "medium",
                        f"a URL or address: {match.group()!r}{_read_through(reading)}",
                        where,
                        _decoded_text(reading),
                    ),
                )
    return list(found.values())


def _encoded_size(payload: Payload) -> int:
    """The characters of a payload, the spaces or line breaks between its pieces left out."""
    return len(payload.encoded) - payload.words + 1


def _payload_finding(
    spec: Definition, where: str, read: Reading, payload: Payload
) -> ScanFindingRecord:
    pieces = f" in {payload.words} pieces" if payload.words > 1 else ""
    return _finding(
        spec,
        "encoded-blobs",
        "medium",
        f"{_encoded_size(payload)} characters of {payload.encoding}{pieces} that decode to text: "
        f"{payload.text[:60]!r}{_read_through(read)}",
        where,
        payload.text,
    )


def _binary_blob_findings(
    spec: Definition, where: str, read: Reading, payloads: list[Payload]
) -> list[ScanFindingRecord]:
    """A long run of base64 or hex that decodes to no text, in prose (not in a URL, not in a data
    value: an example image is data)."""
    if _DATA_VALUE.search(where):
        return []
    prose = _SCAN_URL.sub(" ", read.text)
    return [
        _finding(
            spec,
            "encoded-blobs",
            "medium",
            f"{len(match.group())} characters of base64 or hex: {match.group()[:24]!r}…",
            where,
        )
        for match in _SCAN_BLOB.finditer(prose)
        if _blob_shaped(match.group()) and not any(match.group() in p.encoded for p in payloads)
    ]


def _scan_blobs(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    """Base64 or hex of at least SCAN_BLOB_MIN_CHARS: decoding to text (whole or split into
    pieces by spaces or line breaks, anywhere), or to something else (in prose)."""
    found = []
    for where, text in _definition_strings(spec.fields, spec.name):
        read = as_read(text)
        payloads = [
            p for p in encoded_payloads(read.text) if _encoded_size(p) >= C.SCAN_BLOB_MIN_CHARS
        ]
        found += [_payload_finding(spec, where, read, p) for p in payloads]
        found += _binary_blob_findings(spec, where, read, payloads)
    return found


def _mixed_script_words(text: str) -> list[str]:
    """Words that mix Latin letters with Cyrillic or Greek ones drawn the same ("раypal"): one
    word in two scripts is how a homoglyph hides."""
    return [
        word
        for word in re.findall(r"\w+", text)
        if re.search("[A-Za-z]", word) and look_alikes_folded(word) != word
    ]


def _scan_look_alikes(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    found = []
    for where, text in _definition_strings(spec.fields, spec.name):
        words = _mixed_script_words(text)
        if words:
            found.append(
                _finding(
                    spec,
                    "look-alike-letters",
                    "medium",
                    f"{len(words)} word(s) mixing Latin letters with look-alikes from another "
                    f"script: {', '.join(repr(w) for w in words[:4])}",
                    where,
                    _decoded_text(as_read(text)),
                )
            )
    return found


def _scan_long(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    size = len(str(spec.fields.get("description") or ""))
    if size <= C.SCAN_LONG_DESCRIPTION_CHARS:
        return []
    return [
        _finding(
            spec,
            "long-description",
            "low",
            f"the description is {size:,} characters long (more than "
            f"{C.SCAN_LONG_DESCRIPTION_CHARS:,}: room to hide instructions in)",
            "description",
        )
    ]


def _folded_name(name: str) -> str:
    return re.sub(r"[-_.\s]", "", name.casefold())


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether one insertion, deletion or substitution makes `a` into `b`."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def _scan_collisions(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    """Another server's tool of the same name, or of a look-alike one (the same letters but for
    case and separators, or one letter apart): a tool could shadow the other."""
    found: list[ScanFindingRecord] = []
    if spec.kind != "tool":
        return found
    mine = _folded_name(spec.name)
    for other in others:
        if other.server == spec.server or other.kind != "tool":
            continue
        theirs = _folded_name(other.name)
        if other.name == spec.name:
            how = "the same name"
        elif mine == theirs or (min(len(mine), len(theirs)) >= 6 and _one_edit_apart(mine, theirs)):
            how = "a look-alike name"
        else:
            continue
        found.append(
            _finding(
                spec,
                "name-collision",
                "medium",
                f"server {other.server} offers {other.name}: {how}",
                "name",
            )
        )
    return found


def _scan_unannotated(spec: Definition, others: Sequence[Definition]) -> list[ScanFindingRecord]:
    if not spec.unannotated:
        return []
    return [
        _finding(
            spec,
            "no-annotations",
            "low",
            "no readOnlyHint or destructiveHint: a client cannot tell whether it changes things",
            "annotations",
        )
    ]


# Every check `scan` makes, in the order its findings are listed: one row per check.
_SCAN_CHECKS: dict[str, Callable[[Definition, Sequence[Definition]], list[ScanFindingRecord]]] = {
    "hidden-unicode": _scan_hidden,
    "look-alike-letters": _scan_look_alikes,
    "instruction-phrases": _scan_phrases,
    "urls": _scan_urls,
    "encoded-blobs": _scan_blobs,
    "long-description": _scan_long,
    "name-collision": _scan_collisions,
    "no-annotations": _scan_unannotated,
}


# ---------------------------------------------------------------------------- across definitions
_HANDS_A_SECRET_ON = re.compile(_HANDS_A_SECRET_ON_PATTERN, re.I)
_SENDS_WHAT_IT_IS_GIVEN = re.compile(_SENDS_ON, re.I)


def _role_quote(spec: Definition, role: re.Pattern) -> tuple[str, str] | None:
    """(where, quote) of the first place a definition, as the model reads it, plays `role`."""
    for where, text in _definition_strings(spec.fields, spec.name):
        for reading in readings(text):
            match = role.search(reading.text)
            if match and not _NEGATION.search(
                reading.text[max(0, match.start() - 40) : match.start()]
            ):
                return where, match.group()
    return None


def _scan_across(specs: Sequence[Definition]) -> list[ScanFindingRecord]:
    """An instruction split between definitions: one hands a secret of the user's (a key, the
    credentials, the conversation) to "the next tool", another sends what it is given somewhere
    outside. Neither half alone need say much; together they are an exfiltration. Each half gets
    a high finding naming the other."""
    sources = [(s, q) for s in specs if (q := _role_quote(s, _HANDS_A_SECRET_ON))]
    sinks = [(s, q) for s in specs if (q := _role_quote(s, _SENDS_WHAT_IT_IS_GIVEN))]
    found = []
    for source, (source_where, source_quote) in sources:
        for sink, (sink_where, sink_quote) in sinks:
            if sink is source:
                continue
            found.append(
                _finding(
                    source,
                    "split-instruction",
                    "high",
                    f"hands a secret to another tool ({source_quote!r}), and {sink.server}'s "
                    f"{sink.label} sends what it is given outside ({sink_quote!r})",
                    source_where,
                )
            )
            found.append(
                _finding(
                    sink,
                    "split-instruction",
                    "high",
                    f"sends what it is given outside ({sink_quote!r}), and {source.server}'s "
                    f"{source.label} hands it a secret ({source_quote!r})",
                    sink_where,
                )
            )
    return found


def _in_order(definitions: Sequence[Definition]) -> list[Definition]:
    return sorted(definitions, key=lambda d: (d.server, d.kind != "tool", d.kind, d.name))


def scan_definitions(definitions: Sequence[Definition], fail_on: str) -> ScanRecord:
    """Every check of SCAN_CHECKS on every definition, then the rules across definitions."""
    specs = _in_order(definitions)
    findings = [f for spec in specs for check in _SCAN_CHECKS.values() for f in check(spec, specs)]
    findings += _scan_across(specs)
    return ScanRecord(
        servers=sorted({t.server for t in specs}),
        tools=sum(d.kind == "tool" for d in specs),
        others=sum(d.kind != "tool" for d in specs),
        fail_on=fail_on,
        findings=findings,
    )


def scan_tools(tools: Sequence[ToolSpec], fail_on: str) -> ScanRecord:
    return scan_definitions([tool_read(t) for t in tools], fail_on)


def scan_case_results(
    definitions: Sequence[Definition | ToolSpec], record: ScanRecord
) -> list[CaseResult]:
    """A case per definition: failed by a finding at or above --fail-on; every finding (of
    either reader) is a reason. A definition the judge could not judge (--judge) is an error."""
    cases = []
    read = [d if isinstance(d, Definition) else tool_read(d) for d in definitions]
    errors = {(j.server, j.kind, j.name): j.error for j in record.judged if j.error}
    for spec in _in_order(read):
        mine = [
            f
            for f in record.findings
            if (f.server, f.kind, f.tool) == (spec.server, spec.kind, spec.name)
        ]
        failing = [f for f in mine if severity_rank(f.severity) >= severity_rank(record.fail_on)]
        reasons: dict[str, int] = {}
        for f in mine:
            key = f"{f.severity}: {f.check}: {f.detail}" + (f" ({f.where})" if f.where else "")
            if f.reader != "static":
                key = f"{f.reader}: {key}"
            reasons[key] = 1
        error = errors.get((spec.server, spec.kind, spec.name))
        if error:
            reasons[f"judge error: {error}"] = 1
        passed = not failing and not error
        cases.append(
            CaseResult(
                name=spec.label,
                kind="scan",
                group=f"scan: {spec.server}",
                passed=passed,
                error=bool(error),
                runs=1,
                passes=int(passed),
                errors=int(bool(error)),
                pass_rate=float(passed),
                interval=rounded_interval(wilson_interval(int(passed), 1)),
                reasons=reasons,
                prompt=str(spec.fields.get("description") or spec.fields.get("text") or ""),
                description=f"{len(mine)} finding(s)",
                cost_usd=sum(
                    j.cost_usd
                    for j in record.judged
                    if (j.server, j.kind, j.name) == (spec.server, spec.kind, spec.name)
                ),
            )
        )
    return cases
