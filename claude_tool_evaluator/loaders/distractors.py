"""Distractors: what sits beside the skill (or the tools) under test: installed skills, a
decoys file, generated decoys, and the steps of a crowd curve.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, the loaders above it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError

import test_constants as C

from ..errors import InputError
from ..files import parse_json_text, read_text_file
from ..results_schema.document import Record, first_schema_problem
from ..run_types import Distractor
from ..sinks import one_line
from .skills import SKILL_COPY_IGNORED, SKILL_NAME_RULE, load_skill, skill_description_problem

__all__ = [
    "CrowdStep",
    "DecoySkill",
    "DecoyTool",
    "DecoysFile",
    "DistractorSource",
    "SkillCrowd",
    "decoy_skills_problem",
    "decoy_tools_problem",
    "load_decoys_file",
    "load_distractor_skills",
    "parse_distractor_source",
    "parse_steps",
    "seeded_order",
]

_DISTRACTOR_HINT = (
    "give a folder of skills, `installed` (your ~/.claude skills and plugin skills) or "
    "lookalike:N (N decoys the model writes)"
)


_DISTRACTOR_TOOLS_HINT = (
    "give an mcpServers JSON file (its servers' tools sit beside yours) or lookalike:N (N decoy "
    "tools the model writes)"
)


_TOOL_NAME_RULE = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class DistractorSource:
    """One --distractors (or --distractor-tools) value: a folder of skills, `installed`, an
    mcpServers file (tools), or lookalike:N."""

    kind: str  # folder | installed | servers | lookalike
    text: str  # as given
    path: Path | None = None
    count: int = 0  # lookalike:N


def parse_distractor_source(value: str, flag: str, tools: bool = False) -> DistractorSource:
    text = value.strip()
    match = re.fullmatch(r"lookalike:(\d+)", text)
    if match:
        count = int(match.group(1))
        if not 1 <= count <= C.MAX_DECOYS:
            raise InputError(
                f"{flag} {value}: ask for 1 to {C.MAX_DECOYS} decoys", hint="e.g. lookalike:20"
            )
        return DistractorSource("lookalike", text, count=count)
    hint = _DISTRACTOR_TOOLS_HINT if tools else _DISTRACTOR_HINT
    if text == "installed" and not tools:
        return DistractorSource("installed", text)
    path = Path(text).expanduser()
    if tools:
        if not path.is_file():
            raise InputError(f"{flag} {value}: no such file", hint=hint)
        return DistractorSource("servers", text, path)
    if not path.is_dir():
        raise InputError(f"{flag} {value}: no such folder", hint=hint)
    return DistractorSource("folder", text, path)


def _skill_files_under(folder: Path, depth: int = C.DISTRACTOR_SEARCH_DEPTH) -> list[Path]:
    """The SKILL.md files in a folder of skills (a checkout of a skills collection, say), at most
    `depth` folders down; a folder holding a SKILL.md is one skill and is not searched further."""
    found = []
    for current, dirs, files in os.walk(folder):
        here = Path(current)
        if "SKILL.md" in files:
            found.append(here / "SKILL.md")
            dirs[:] = []
            continue
        level = len(here.relative_to(folder).parts)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKILL_COPY_IGNORED and not d.startswith(".") and level < depth
        )
    return sorted(found)


def _installed_skill_files(home: Path) -> list[Path]:
    """The user's own skills (~/.claude/skills/NAME/SKILL.md) and their plugins' skills
    (~/.claude/plugins/.../skills/NAME/SKILL.md), read where they are: nothing is written there."""
    claude = home / ".claude"
    found = sorted((claude / "skills").glob("*/SKILL.md"))
    for current, dirs, _ in os.walk(claude / "plugins"):
        here = Path(current)
        if here.name == "skills":
            found += sorted(here.glob("*/SKILL.md"))
            dirs[:] = []
            continue
        level = len(here.relative_to(claude / "plugins").parts)
        dirs[:] = sorted(d for d in dirs if d not in SKILL_COPY_IGNORED and level < 6)
    return found


def load_distractor_skills(
    sources: Sequence[DistractorSource], under_test: Sequence[str], home: Path | None = None
) -> tuple[list[Distractor], list[str]]:
    """The distractors of folder and `installed` sources, in the order found (the first of a
    name wins; none named like a skill under test), and every candidate left out with why: a
    collection holds skills that break a rule now and then, and they must not stop the run."""
    found: dict[str, Distractor] = {}
    skipped: list[str] = []
    for source in sources:
        if source.kind == "folder" and source.path is not None:
            files = _skill_files_under(source.path)
            if not files:
                raise InputError(
                    "--distractors: no SKILL.md in this folder", source.path, hint=_DISTRACTOR_HINT
                )
        elif source.kind == "installed":
            files = _installed_skill_files(home or Path.home())
        else:
            continue
        for path in files:
            try:
                skill = load_skill(path)
            except InputError as exc:
                skipped.append(f"{path.parent}: {one_line(str(exc).splitlines()[0], 200)}")
                continue
            if skill.name in under_test:
                skipped.append(f"{path.parent}: named like the skill under test")
            elif skill.name in found:
                skipped.append(f"{path.parent}: a second skill named {skill.name}")
            else:
                found[skill.name] = Distractor(
                    skill.name, skill.description, source.kind, skill.folder
                )
    return list(found.values()), skipped


def seeded_order(names: Sequence[str], seed: int) -> list[str]:
    """The crowd's order: step K installs (offers) the first K, so each step holds the one
    before it; the same seed gives the same order."""
    import random

    ordered = sorted(names)
    random.Random(seed).shuffle(ordered)
    return ordered


def parse_steps(value: str | None, flag: str) -> tuple[int, ...] | None:
    """--distractor-steps / --tool-steps `0,5,10,20,40`: whole numbers from 0, each once, sorted."""
    if value is None:
        return None
    try:
        steps = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        steps = []
    if not steps or any(n < 0 for n in steps):
        raise InputError(
            f"{flag} {value!r} is not a list of whole numbers from 0", hint=f"e.g. {flag} 0,5,10,20"
        )
    return tuple(sorted(set(steps)))


class DecoySkill(Record):
    name: str
    description: str


class DecoyTool(Record):
    name: str
    description: str
    like: str = ""  # the real tool it resembles: it takes that tool's arguments
    input_schema: dict[str, Any] = {"type": "object"}


class DecoysFile(Record):
    """--distractors-file: every decoy set written so far, by what it imitates and by seed, so a
    second run (the same seed) asks the model for nothing and the decoys can be reviewed."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    format: Literal[C.DECOYS_FORMAT]  # type: ignore[valid-type]
    skills: dict[str, dict[str, list[DecoySkill]]] = {}  # skill -> seed -> decoys
    tools: dict[str, dict[str, list[DecoyTool]]] = {}  # the tools' servers -> seed -> decoys


def load_decoys_file(path: Path) -> DecoysFile:
    """The decoys kept so far (none when the file does not exist yet)."""
    if not path.exists():
        return DecoysFile(format=C.DECOYS_FORMAT)
    raw = read_text_file(path, "--distractors-file")
    data = parse_json_text(raw, path)
    if not isinstance(data, dict) or data.get("format") != C.DECOYS_FORMAT:
        raise InputError(
            f'not a decoys file (its "format" is not {C.DECOYS_FORMAT!r})',
            path,
            1,
            "give a new path, or a file an earlier lookalike:N run wrote",
        )
    try:
        return DecoysFile.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"not a valid decoys file: {first_schema_problem(exc)}",
            path,
            1,
            "fix it, or delete it to write the decoys again",
        ) from None


def decoy_skills_problem(decoys: Sequence[DecoySkill], taken: Iterable[str]) -> str | None:
    """Why a set of decoy skills cannot be installed (None when it can)."""
    seen = set(taken)
    for decoy in decoys:
        if len(decoy.name) > 64 or not SKILL_NAME_RULE.fullmatch(decoy.name):
            return f"the name {decoy.name!r} is not lowercase letters, digits and single hyphens"
        if decoy.name in seen:
            return f"the name {decoy.name!r} is taken"
        seen.add(decoy.name)
        problem = skill_description_problem(decoy.description)
        if problem:
            return f"the description of {decoy.name!r} cannot stand in a SKILL.md: {problem}"
    return None


def decoy_tools_problem(decoys: Sequence[DecoyTool], taken: Iterable[str]) -> str | None:
    """Why a set of decoy tools cannot be offered (None when it can)."""
    seen = set(taken)
    for decoy in decoys:
        if not _TOOL_NAME_RULE.fullmatch(decoy.name):
            return f"the name {decoy.name!r} is not letters, digits, _ and - (at most 64)"
        if decoy.name in seen:
            return f"the name {decoy.name!r} is taken"
        seen.add(decoy.name)
        if not decoy.description.strip() or len(decoy.description) > C.MAX_TOOL_DESCRIPTION_CHARS:
            return f"the description of {decoy.name!r} is empty or too long"
    return None


@dataclass
class CrowdStep:
    """One step of a crowd: the first `count` distractors of the seeded order."""

    count: int
    installed: tuple[Distractor, ...]
    fingerprint: str  # what makes a run at this step reusable (--resume)


@dataclass
class SkillCrowd:
    """--distractors: every distractor in the seeded order, the steps, and what was left out."""

    sources: list[str]
    seed: int
    distractors: list[Distractor]
    steps: list[CrowdStep]
    skipped: list[str] = field(default_factory=list)
    decoys_file: str | None = None
    decoy_cost: float = 0.0
    named: bool = False  # --distractor-steps given: each query's case is named with its step
    keeper: Any = None  # the DecoyKeeper: what a dry run would still have to write

    def descriptions(self) -> dict[str, str]:
        return {d.name: d.description for d in self.distractors}
