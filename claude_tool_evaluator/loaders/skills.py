"""Skills and markdown tests: SKILL.md frontmatter checked as the agentskills rules say,
skillmark's markdown tests and skill-creator's evals.json.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, the loaders above it."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

import test_constants as C

from ..answers import answer_match_hint, answer_match_problem, normalize_answer_match
from ..errors import InputError, InputProblems
from ..files import parse_json_text, read_text_file
from ..run_types import RoutingRule, SkillInfo, SkillTest
from ..sinks import line_of, one_line
from .csv_suites import verify_command
from .servers import PLUGIN_MANIFEST, read_plugin_manifest, wrong_file

__all__ = [
    "PLUGIN_MANIFEST",
    "QUOTES",
    "RESERVED_PROJECT_NAMES",
    "SKILL_COPY_IGNORED",
    "SKILL_NAME_RULE",
    "TRIGGER_CONCEPTS",
    "apply_skill_descriptions",
    "frontmatter_line",
    "kind_of_test_file",
    "load_frontmatter_yaml",
    "load_markdown_test",
    "load_markdown_tests",
    "load_skill",
    "load_skill_creator_evals",
    "load_subjects",
    "markdown_code_lines",
    "skill_description_problem",
    "skill_folder_problem",
    "split_frontmatter",
]

SKILL_NAME_RULE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


_TEST_TYPES = ("knowledge", "task", "security", "trigger")


TRIGGER_CONCEPTS = ["activates-on-relevant", "ignores-irrelevant"]


# skillmark's section titles, and what each fills; any other level-1 heading ends a section.
_TEST_SECTIONS = {
    "prompt": "prompt",
    "question": "prompt",
    "expected": "expected",
    "criteria": "expected",
    "forbidden patterns": "forbidden_patterns",
    "expected refusal": "expected_refusal",
    "positive triggers": "positive_triggers",
    "negative triggers": "negative_triggers",
    "simulated user": "simulated_user",
    "rubric": "rubric",
    "expected answer": "expected_answer",
}


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]\s+\[[ xX]\]\s*|[-*+]\s+|\d+[.)]\s+)(.*)$")


QUOTES = "\"'`“”‘’"


# What a YAML parser's complaint most often means, said as the fix (the first that matches).
_YAML_HINTS = (
    ("mapping values are not allowed", "quote a value that contains ': '"),
    ("found character '\\t'", "indent with spaces, not tabs"),
    (
        "expected <block end>",
        "this line is indented differently from the lines of its block: give each key of one "
        "item the same indentation",
    ),
    ("did not find expected key", "align this line's key with the keys above it"),
    ("did not find expected '-'", "give each item of the list its '- ' at the same indentation"),
    ("found undefined alias", "define the &anchor before using *it, or quote the '*'"),
)


def _yaml_hint(problem: str) -> str:
    return next((fix for sign, fix in _YAML_HINTS if sign in problem), "fix the YAML syntax")


def load_frontmatter_yaml(
    text: str, path: Path, first_line: int, what: str = "YAML frontmatter"
) -> Any:
    """Plain YAML only, through yaml.safe_load: no tags that build objects (`!!python/...` is
    refused), no aliases (`*name`, so an alias bomb cannot exhaust memory), bounded size and
    nesting, checked on the event stream before anything is composed."""
    if len(text.encode("utf-8")) > C.MAX_FRONTMATTER_BYTES:
        raise InputError(
            f"{what} is larger than {C.MAX_FRONTMATTER_BYTES // 1024} KiB",
            path,
            first_line,
            "keep the frontmatter short; long text belongs in the body",
        )

    def where(mark: Any) -> int:
        return mark.line + first_line if mark is not None else first_line

    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise InputError(
                    f"YAML aliases (*name) are not allowed in {what}",
                    path,
                    where(event.start_mark),
                    "write the value out instead of referring to an &anchor",
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > C.MAX_YAML_DEPTH:
                    raise InputError(
                        f"{what} is nested more than {C.MAX_YAML_DEPTH} levels deep",
                        path,
                        where(event.start_mark),
                        "flatten it",
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.constructor.ConstructorError) and "tag" in str(problem):
            raise InputError(
                f"YAML tag not allowed: {problem}",
                path,
                where(mark),
                "remove the !!tag; only plain YAML values are read",
            ) from None
        raise InputError(
            f"invalid {what}: {problem}", path, where(mark), _yaml_hint(str(problem))
        ) from None
    except (
        ValueError,
        TypeError,
        OverflowError,
        RecursionError,
    ) as exc:  # e.g. a date like 2024-13-45
        raise InputError(
            f"invalid YAML frontmatter: {exc}",
            path,
            first_line,
            "quote values that are meant as plain text",
        ) from None


def split_frontmatter(raw: str, path: Path, required: bool = True) -> tuple[dict, str, int]:
    """YAML frontmatter between `---` lines -> (mapping, body, line number where the body starts)."""
    lines = raw.splitlines()
    if not lines or lines[0].strip() != "---":
        if required:
            raise InputError(
                "no YAML frontmatter (the file must start with a '---' line)",
                path,
                1,
                "add ---, name: ..., description: ..., --- at the top",
            )
        return {}, raw, 1
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise InputError("YAML frontmatter is not closed", path, 1, "end it with a '---' line")
    data = load_frontmatter_yaml("\n".join(lines[1:end]), path, 2)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(
            f"YAML frontmatter must be a mapping of keys to values, not a {type(data).__name__}",
            path,
            2,
            "write it as key: value lines",
        )
    return data, "\n".join(lines[end + 1 :]), end + 2


def frontmatter_line(raw: str, key: str) -> int:
    match = re.search(rf"^{re.escape(key)}\s*:", raw, re.MULTILINE)
    return raw.count("\n", 0, match.start()) + 1 if match else 1


def _skill_frontmatter_problems(data: dict, raw: str, path: Path) -> list[InputError]:
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
            problem(
                "name",
                f"name {name!r} must be lowercase letters, digits and single hyphens, "
                "not starting or ending with a hyphen",
                "e.g. name: my-skill-name",
            )
        if name != folder:
            problem(
                "name",
                f"name {name!r} differs from its folder name {folder!r}",
                "rename the folder or the skill so they are equal",
            )
    if not isinstance(description, str) or not description.strip():
        problem(
            "description",
            "frontmatter has no 'description'",
            "say what the skill does and when to use it, in at most 1024 characters",
        )
    else:
        if len(description) > 1024:
            problem(
                "description",
                f"description is {len(description)} characters; the limit is 1024",
                "shorten it",
            )
        if "<" in description or ">" in description:
            problem(
                "description",
                "description contains '<' or '>', which skill validators reject",
                "reword it without angle brackets",
            )
    compatibility = data.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or len(compatibility) > 500
    ):
        problem("compatibility", "compatibility must be a string of at most 500 characters")
    return problems


SKILL_COPY_IGNORED = (".git", "node_modules", "__pycache__")  # never copied into a run's project


def skill_folder_problem(folder: Path) -> str | None:
    """Why a skill folder must not be copied into the runs' projects: a symbolic link leading
    outside it (what it points at would land where Claude reads, in every run), or more than
    C.MAX_SKILL_COPY_BYTES of files (copied again for every run). Links inside the folder are
    fine: they are copied as links."""
    root = os.path.realpath(folder)
    total = 0
    for current, dirs, files in os.walk(folder):  # a link to a folder is listed, never entered
        dirs[:] = [d for d in dirs if d not in SKILL_COPY_IGNORED]
        for name in [*dirs, *files]:
            entry = os.path.join(current, name)
            if os.path.islink(entry):
                target = os.path.realpath(entry)
                if os.path.commonpath([root, target]) != root:
                    return f"{os.path.relpath(entry, folder)} is a symbolic link to {target}, outside the skill folder"
            elif name in files:
                total += os.lstat(entry).st_size
                if total > C.MAX_SKILL_COPY_BYTES:
                    return (
                        f"the skill folder holds more than {C.MAX_SKILL_COPY_BYTES // (1024 * 1024)} MiB of files, "
                        "copied into every run"
                    )
    return None


def load_skill(path: str | Path) -> SkillInfo:
    """A SKILL.md (or its folder), validated against the Agent Skills rules before anything runs.
    Every problem found is reported, one line each."""
    path = Path(path)
    if path.is_dir():
        path = path / "SKILL.md"
    raw = read_text_file(path, "SKILL.md")
    other = wrong_file(raw, path, "--skill", "a SKILL.md")
    if other is not None and path.name.lower() != "skill.md":
        raise other
    data, body, _ = split_frontmatter(raw, path)
    problems = _skill_frontmatter_problems(data, raw, path)
    if problems:
        raise InputProblems(problems)
    problem = skill_folder_problem(path.resolve().parent)
    if problem:
        raise InputError(
            problem,
            path.resolve().parent,
            hint="copy what the skill needs into its folder, or leave it out of the folder",
        )
    return SkillInfo(
        name=data["name"],
        description=str(data["description"]).strip(),
        path=path.resolve(),
        body=body.strip(),
        frontmatter=data,
    )


def _load_agent(path: Path, plugin: Path | None = None, plugin_name: str = "") -> SkillInfo:
    """A subagent under test: an `agents/NAME.md` (frontmatter `name` in the skill name rules,
    `description`), a project's (installed as .claude/agents/NAME.md) or a plugin's (its name
    `PLUGIN:NAME`, as Claude Code lists it)."""
    raw = read_text_file(path, "agent file")
    data, body, _ = split_frontmatter(raw, path)
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not SKILL_NAME_RULE.fullmatch(name):
        raise InputError(
            f"agent name {name!r} is not lowercase letters, digits and single hyphens",
            path,
            frontmatter_line(raw, "name"),
            "give the agent's frontmatter a `name: my-agent`",
        )
    if not isinstance(description, str) or not description.strip():
        raise InputError(
            "the agent has no description: Claude Code lists it by its description",
            path,
            frontmatter_line(raw, "description"),
            "add `description: when Claude should hand it a task`",
        )
    return SkillInfo(
        name=f"{plugin_name}:{name}" if plugin is not None else name,
        description=description.strip(),
        path=path.resolve(),
        body=body.strip(),
        frontmatter=data,
        kind="agent",
        plugin=plugin,
    )


def _load_plugin_agents(folder: Path) -> list[SkillInfo]:
    """A plugin folder's agents (agents/*.md), each a subject named `PLUGIN:NAME`."""
    manifest = folder / PLUGIN_MANIFEST
    data, _ = read_plugin_manifest(folder)
    plugin_name = data.get("name")
    if not isinstance(plugin_name, str) or not SKILL_NAME_RULE.fullmatch(plugin_name):
        raise InputError(
            f"plugin name {plugin_name!r} is not lowercase letters, digits and single hyphens",
            manifest,
            1,
            'give the manifest a "name": "my-plugin"',
        )
    agents = [
        _load_agent(path, folder.resolve(), plugin_name)
        for path in sorted((folder / "agents").glob("*.md"))
    ]
    if not agents:
        raise InputError(
            "the plugin has no agents to evaluate",
            folder / "agents",
            hint="give --skill a plugin folder with agents/NAME.md, or a skill's folder",
        )
    return agents


def load_subjects(path: str | Path) -> list[SkillInfo]:
    """What one --skill names: a skill (SKILL.md or its folder), a subagent (`agents/NAME.md`),
    or a plugin folder (.claude-plugin/plugin.json: its agents)."""
    path = Path(path)
    if path.is_dir() and (path / PLUGIN_MANIFEST).is_file():
        return _load_plugin_agents(path)
    if path.is_file() and path.suffix.lower() == ".md" and path.parent.name == "agents":
        return [_load_agent(path)]
    return [load_skill(path)]


def skill_description_problem(text: str) -> str | None:
    """Why a description cannot stand in a SKILL.md (the same rules as the loader's)."""
    if not text.strip():
        return "it is empty"
    if len(text) > C.MAX_SKILL_DESCRIPTION_CHARS:
        return f"it is {len(text)} characters; the limit is {C.MAX_SKILL_DESCRIPTION_CHARS}"
    if "<" in text or ">" in text:
        return "it contains '<' or '>', which skill validators reject"
    return None


def apply_skill_descriptions(skills: list[SkillInfo], values: Sequence[str]) -> list[SkillInfo]:
    """--skill-description TEXT, @FILE, or NAME=TEXT / NAME=@FILE (needed with several --skill):
    the skills as they will be installed, each description checked like SKILL.md's."""
    names = {s.name for s in skills}
    given: dict[str, str] = {}
    agent = next((s for s in skills if s.kind == "agent"), None)
    if values and agent is not None:
        raise InputError(
            f"--skill-description rewrites a SKILL.md; {agent.name} is an agent",
            agent.path,
            hint="edit the agent file's description, or leave --skill-description out",
        )
    for value in values:
        name, sep, rest = value.partition("=")
        if sep and name in names:
            text = rest
        elif len(skills) == 1:
            name, text = skills[0].name, value
        else:
            raise InputError(
                f"--skill-description {one_line(value, 40)!r} does not say which skill it is for",
                hint=f"write NAME=TEXT with NAME one of {', '.join(sorted(names))}",
            )
        if text.startswith("@"):
            text = read_text_file(text[1:], "--skill-description file")
        text = text.strip()
        problem = skill_description_problem(text)
        if problem:
            raise InputError(
                f"--skill-description for {name}: {problem}",
                hint="give at most 1024 characters of plain text without angle brackets",
            )
        if name in given:
            raise InputError(
                f"--skill-description for {name} is given twice", hint="give one per skill"
            )
        given[name] = text
    return [
        replace(s, description=given[s.name], description_override=True) if s.name in given else s
        for s in skills
    ]


@functools.cache
def _markdown_parser() -> Any:
    """CommonMark's block parser, used only to learn which lines are code. Inline parsing is
    switched off (nothing here looks inside paragraphs), and the import waits until a markdown
    file is read so that runs without one do not pay for it."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


def _fence_swallows_the_rest(lines: list[str], token: Any) -> bool:
    """A fence without its closing line runs to the end of the file (CommonMark), silently taking
    every later section or turn with it, so it is refused. A fence ended early by the end of its
    list item or quote takes nothing else and is left alone."""
    start, end = token.map
    # the closing line may carry the quote's `>` or the list item's indent in front of the fence
    closer = re.compile(rf"[\s>]*{re.escape(token.markup[0])}{{{len(token.markup)},}}\s*")
    closed = end - 1 > start and closer.fullmatch(lines[end - 1]) is not None
    return not closed and not any(line.strip() for line in lines[end:])


def markdown_code_lines(lines: list[str], path: str | Path | None, first_line: int) -> set[int]:
    """Indexes into `lines` of the lines inside fenced (``` or ~~~) or indented code blocks, fence
    lines included: a `# comment` or `**User**` there is content, never a heading or a turn.
    Scanning lines by hand got fences wrong; markdown-it knows the CommonMark rules (longer closing
    fences, fences in list items). `first_line` is the file's line number of lines[0]."""
    code: set[int] = set()
    # `lines` come from splitlines(), which also breaks at \f or U+2028 where markdown does not;
    # joined on "\n" markdown-it sees exactly these lines, so token.map indexes `lines` directly.
    for token in _markdown_parser().parse("\n".join(lines)):
        if token.type not in ("fence", "code_block") or not token.map:
            continue
        start, end = token.map
        if token.type == "fence" and _fence_swallows_the_rest(lines, token):
            raise InputError(
                "this code block is never closed",
                path,
                first_line + start,
                f"close it with a line of {token.markup}",
            )
        code.update(range(start, end))
    return code


def _markdown_sections(
    body: str, first_line: int, path: str | Path | None = None
) -> dict[str, tuple[str, int]]:
    """skillmark's sections -> (text, line of the heading). Headings that are not section titles
    (a `## Context` inside a prompt) stay part of the text, unless they are level 1. A heading-looking
    line inside a code block (a shell `# comment` in a fenced snippet) is always text. Section text is
    the source lines as written, never re-rendered markdown."""
    sections: dict[str, tuple[list[str], int]] = {}
    current: str | None = None
    lines = body.splitlines()
    code = markdown_code_lines(lines, path, first_line)
    for offset, line in enumerate(lines):
        heading = None if offset in code else re.match(r"^(#+)\s+(.+?)\s*#*\s*$", line)
        title = heading.group(2).strip().rstrip(":").strip().lower() if heading else ""
        if heading and title in _TEST_SECTIONS:
            current = _TEST_SECTIONS[title]
            sections.setdefault(current, ([], first_line + offset))
            continue
        if heading and len(heading.group(1)) == 1:
            current = None
            continue
        if current:
            sections[current][0].append(line)
    return {key: ("\n".join(lines).strip(), line) for key, (lines, line) in sections.items()}


def _list_items(text: str) -> list[str]:
    """Checkbox, bullet or numbered items; when a section has none, every plain line is an item.
    Quotes around an item are stripped."""
    lines = [
        line
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith(("<!--", "```"))
    ]
    items = [m.group(1) for m in map(_LIST_ITEM.match, lines) if m]
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


def _item_lines(raw: str, items: Sequence[str], start: int) -> dict[str, int]:
    """Each item's line in the file: the first line holding it from `start` on (its section's
    heading), each item searched on the lines after the one before it."""
    lines, found, at = raw.splitlines(), {}, max(start, 1)
    for item in items:
        line = next((n for n in range(at, len(lines) + 1) if item in lines[n - 1]), None)
        found[item] = line or start
        at = line + 1 if line else at
    return found


def _string_list(value: Any, key: str, path: Path, raw: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v).strip() for v in value if str(v).strip()]
    raise InputError(
        f"'{key}' must be a list of strings",
        path,
        frontmatter_line(raw, key),
        f"e.g. {key}: [first, second]",
    )


def _markdown_answer(
    data: dict, sections: dict[str, tuple[str, int]], path: Path, raw: str
) -> tuple[str | None, str]:
    """`# Expected Answer` and `answer_match:` of a markdown test, checked like a CSV row's."""
    expected = sections.get("expected_answer", ("", 1))[0] or None
    match = data.get("answer_match")
    if match is None and expected is None:
        return None, "exact"
    line = (
        frontmatter_line(raw, "answer_match")
        if match is not None
        else sections["expected_answer"][1]
    )
    problem = (
        "'answer_match' must be a text value"
        if match is not None and not isinstance(match, str)
        else answer_match_problem(match or "exact", expected)
    )
    if problem:
        raise InputError(problem, path, line, answer_match_hint())
    return expected, normalize_answer_match(match or "exact")


def _positive_number(
    value: Any, key: str, path: Path, raw: str, default: float, integer: bool = False
) -> float:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value < float("inf")
        or (integer and int(value) != value)
    ):
        raise InputError(
            f"'{key}' must be a positive {'whole ' if integer else ''}number, got {value!r}",
            path,
            frontmatter_line(raw, key),
        )
    return float(value)


_ROUTING_KEYS = ("must_fire", "must_not_fire", "max_skills")


def _routing_rule(
    data: dict,
    problem: Callable[[str, str], InputError],
    positive: bool = True,
    every_query: bool = False,
) -> RoutingRule | None:
    """A trigger query's routing assertions from a mapping (a markdown test's frontmatter, an eval
    entry): `must_fire` and `must_not_fire` (skill names) and `max_skills` (a whole number; 0: no
    skill at all may fire). `must_fire` applies to positive queries only, and so does `max_skills:
    0` to negative ones: in a file's frontmatter (`every_query`) it leaves the positive queries
    alone, on a positive eval entry it is refused (the skill must fire). `problem(key, message)`
    makes the error."""
    if not any(data.get(key) is not None for key in _ROUTING_KEYS):
        return None
    names: dict[str, tuple[str, ...]] = {}
    for key in ("must_fire", "must_not_fire"):
        value = data.get(key)
        value = [value] if isinstance(value, str) else value if value is not None else []
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise problem(key, f"'{key}' must be a list of skill names")
        names[key] = tuple(v.strip().lstrip("/") for v in value)
    most = data.get("max_skills")
    if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 0):
        raise problem("max_skills", f"'max_skills' must be a whole number, 0 or more, got {most!r}")
    if most == 0 and positive:
        if not every_query:
            raise problem(
                "max_skills",
                "'max_skills: 0' (no skill may fire) contradicts \"should_trigger\": true (the "
                "skill must fire)",
            )
        most = None  # a file's rule: its positive queries need their skill to fire
        if not names["must_fire"] and not names["must_not_fire"]:
            return None
    return RoutingRule(names["must_fire"] if positive else (), names["must_not_fire"], most)


def load_markdown_test(path: str | Path, default_type: str | None = None) -> SkillTest:
    """One skillmark-format test file; malformed files raise InputError naming file:line."""
    path = Path(path)
    raw = read_text_file(path, "test file")
    data, body, body_line = split_frontmatter(raw, path, required=False)
    kind = data.get("type", default_type or "knowledge")
    if kind not in _TEST_TYPES:
        raise InputError(
            f"unknown test type {kind!r}",
            path,
            frontmatter_line(raw, "type"),
            "use one of " + ", ".join(_TEST_TYPES),
        )
    if default_type == "trigger" and kind != "trigger":
        raise InputError(
            f"--trigger wants a trigger test, this one is type {kind!r}",
            path,
            frontmatter_line(raw, "type"),
            "pass it with --tests instead",
        )
    sections = _markdown_sections(body, body_line, path)
    text_of_section = lambda key: sections.get(key, ("", body_line))[0]  # noqa: E731
    test = SkillTest(
        name=str(data.get("name") or path.stem),
        type=kind,
        source=str(path),
        line=1,
        prompt=text_of_section("prompt"),
        expected=_list_items(text_of_section("expected")),
        forbidden_patterns=_list_items(text_of_section("forbidden_patterns")),
        expected_refusal=_list_items(text_of_section("expected_refusal")),
        positive_triggers=_list_items(text_of_section("positive_triggers")),
        negative_triggers=_list_items(text_of_section("negative_triggers")),
        category=data.get("category"),
        severity=data.get("severity"),
        skill=data.get("skill"),
    )
    test.concepts = _string_list(data.get("concepts"), "concepts", path, raw)
    test.simulated_user = text_of_section("simulated_user") or data.get("simulated_user") or None
    test.rubric = text_of_section("rubric")
    for key in ("skill", "category", "severity", "simulated_user", "verify"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise InputError(
                f"'{key}' must be a text value, not a {type(data[key]).__name__}",
                path,
                frontmatter_line(raw, key),
                f"write it as {key}: some-text",
            )
    test.verify = verify_command(
        data.get("verify") or "",
        lambda message, hint=None: InputError(message, path, frontmatter_line(raw, "verify"), hint),
    )
    test.expected_answer, test.answer_match = _markdown_answer(data, sections, path, raw)
    if kind == "trigger" and not test.concepts:
        test.concepts = list(TRIGGER_CONCEPTS)
    test.timeout = _positive_number(
        data.get("timeout"),
        "timeout",
        path,
        raw,
        C.DEFAULT_TRIGGER_TIMEOUT if kind == "trigger" else C.DEFAULT_TEST_TIMEOUT,
    )
    if data.get("runs") is not None:
        test.runs = int(_positive_number(data["runs"], "runs", path, raw, 1, integer=True))
    given = next((key for key in _ROUTING_KEYS if data.get(key) is not None), None)
    if given and kind != "trigger":
        raise InputError(
            f"'{given}' is a routing assertion of trigger tests, and this is a {kind} test",
            path,
            frontmatter_line(raw, given),
            "move it to a `type: trigger` file",
        )

    def routing_problem(key: str, message: str) -> InputError:
        example = "1" if key == "max_skills" else "[skill-name]"
        return InputError(message, path, frontmatter_line(raw, key), f"e.g. {key}: {example}")

    for key in ("positive_triggers", "negative_triggers"):
        start = sections.get(key, ("", body_line))[1]
        test.query_lines.update(_item_lines(raw, getattr(test, key), start))
    for positive, queries in ((True, test.positive_triggers), (False, test.negative_triggers)):
        rule = _routing_rule(data, routing_problem, positive, every_query=True)
        if rule is not None:
            test.routing.update(dict.fromkeys(queries, rule))
    if kind == "trigger" and not test.positive_triggers:
        line = sections.get("positive_triggers", ("", frontmatter_line(raw, "type")))[1]
        raise InputError(
            "trigger test has no positive queries",
            path,
            line,
            "list the queries that should activate the skill under '# Positive Triggers'",
        )
    if kind != "trigger" and not test.prompt:
        line = sections["prompt"][1] if "prompt" in sections else body_line
        raise InputError(
            f"{kind} test has an empty prompt",
            path,
            line,
            "write the prompt under a '# Prompt' (or '# Question') heading",
        )
    return test


def load_skill_creator_evals(path: str | Path) -> SkillTest:
    """skill-creator's trigger eval set: `[{"query": ..., "should_trigger": true|false}, ...]`."""
    path = Path(path)
    raw = read_text_file(path, "eval set")
    data = parse_json_text(raw, path)
    if not isinstance(data, list):
        raise InputError(
            'an eval set is a JSON list of {"query": ..., "should_trigger": true|false}', path, 1
        )
    test = SkillTest(
        name=path.stem,
        type="trigger",
        source=str(path),
        concepts=list(TRIGGER_CONCEPTS),
        timeout=C.DEFAULT_TRIGGER_TIMEOUT,
    )
    for index, item in enumerate(data):
        query = item.get("query") if isinstance(item, dict) else None
        should = item.get("should_trigger") if isinstance(item, dict) else None
        if not isinstance(query, str) or not query.strip() or not isinstance(should, bool):
            line = line_of(raw, json.dumps(query)) if isinstance(query, str) else None
            raise InputError(
                f'entry {index + 1} needs a non-empty "query" string and a true/false '
                '"should_trigger"',
                path,
                line or 1,
            )
        (test.positive_triggers if should else test.negative_triggers).append(query.strip())

        where = line_of(raw, json.dumps(query)) or 1
        test.query_lines.setdefault(query.strip(), where)

        def routing_problem(
            key: str, message: str, number: int = index + 1, line: int = where
        ) -> InputError:
            example = "1" if key == "max_skills" else '["skill-name"]'
            return InputError(f"entry {number}: {message}", path, line, f'e.g. "{key}": {example}')

        rule = _routing_rule(item, routing_problem, should)
        if rule is not None:
            test.routing[query.strip()] = rule
        named = item.get("skill") if isinstance(item, dict) else None
        if named is not None and (
            not isinstance(named, str) or (test.skill and named != test.skill)
        ):
            raise InputError(
                f'entry {index + 1}: "skill" must name the one skill every entry tests',
                path,
                line_of(raw, json.dumps(query)) or 1,
                'one file per skill: every entry\'s "skill" the same (or name the file NAME-evals.json)',
            )
        test.skill = named or test.skill
    if (
        not test.positive_triggers and not test.negative_triggers
    ):  # negatives only is valid: triggerRate n/a
        raise InputError(
            "eval set has no queries",
            path,
            1,
            'add {"query": "...", "should_trigger": true} entries',
        )
    return test


# Names an input file may not have: Claude Code would read them as the project's own settings
# (whose allow lists add to ours: `.claude/settings.json` could open the sandbox) or servers.
RESERVED_PROJECT_NAMES = (".claude", ".mcp.json")


_TASK_EVALS_HINT = (
    'write {"skill_name": "...", "evals": [{"id": 1, "prompt": "...", "expected_output": "...", '
    '"files": [], "expectations": ["..."]}]} (skill-creator\'s evals/evals.json)'
)


def _eval_files_root(path: Path) -> Path:
    """Where an evals file's input files must stay: the skill's folder when the file is
    `<skill>/evals/evals.json` (skill-creator's layout), else the evals file's own folder."""
    return (path.parent.parent if path.parent.name == "evals" else path.parent).resolve()


def _eval_input_file(path: Path, name: str, where: str, line: int) -> Path:
    """An eval's input file: relative to the evals file's folder, else (skill-creator's own
    convention) to the skill's root when the evals file is `<skill>/evals/evals.json`. It must
    stay inside that folder: an absolute path, a `..` that climbs out or a link that points out
    would copy any file of the machine into every run's project (and its artifacts)."""

    def refused(problem: str, hint: str) -> InputError:
        return InputError(f"{where}: input file {name!r} {problem}", path, line, hint)

    inside = "files are paths inside the skill's folder, relative to the evals file's folder"
    if Path(name).is_absolute() or name.startswith("~"):
        raise refused("is an absolute path", inside)
    root = _eval_files_root(path)
    candidates = [path.parent / name]
    if path.parent.name == "evals":
        candidates.append(path.parent.parent / name)
    found = next((c for c in candidates if os.path.lexists(c)), None)
    if found is None:
        raise refused(f"not found (looked for {candidates[0]})", inside)
    resolved = found.resolve()
    if not resolved.is_relative_to(root):
        raise refused(f"is outside the skill's folder {root} (it leads to {resolved})", inside)
    if resolved.name in RESERVED_PROJECT_NAMES:
        raise refused(
            "would be read by Claude Code as the project's own settings",
            f"rename it: {' and '.join(RESERVED_PROJECT_NAMES)} are not input file names",
        )
    problem = skill_folder_problem(resolved) if resolved.is_dir() else None
    if problem:
        raise refused(f"is a folder whose {problem}", inside)
    return resolved


def _task_evals_list(path: Path, data: dict, raw: str) -> tuple[list, str | None]:
    """The evals file's `evals` list and `skill_name`, checked."""
    evals = data.get("evals")
    if not isinstance(evals, list) or not evals:
        raise InputError(
            'task evals need a non-empty "evals" list',
            path,
            line_of(raw, '"evals"') or 1,
            _TASK_EVALS_HINT,
        )
    skill_name = data.get("skill_name")
    if skill_name is not None and (not isinstance(skill_name, str) or not skill_name.strip()):
        raise InputError(
            '"skill_name" must be the skill\'s name (text)', path, line_of(raw, '"skill_name"') or 1
        )
    return evals, skill_name.strip() if skill_name else None


def _eval_strings(item: dict, key: str, fail: Callable[[str], InputError]) -> list[str]:
    value = item.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise fail(f'"{key}" must be a list of non-empty strings')
    return [v.strip() for v in value]


def _eval_expectations(item: dict, fail: Callable[[str], InputError]) -> list[str]:
    """What the judge grades: `expectations` (skill-creator's evals.json), or `assertions` (the
    agentskills.io spelling, which skill-creator's own SKILL.md uses). An eval with neither would
    pass with nothing graded: refused."""
    if "expectations" in item and "assertions" in item:
        raise fail('give "expectations" or "assertions" (the same list), not both')
    key = "assertions" if "assertions" in item else "expectations"
    found = _eval_strings(item, key, fail)
    if not found:
        raise fail('has nothing to grade: give its "expectations", the statements the judge checks')
    return found


def _task_eval(path: Path, raw: str, item: Any, index: int, skill_name: str | None) -> SkillTest:
    """One entry of `evals`, checked: id, prompt, expected output, expectations, input files."""
    where = f"eval {index}"
    if not isinstance(item, dict):
        raise InputError(f"{where} is not an object", path, 1, _TASK_EVALS_HINT)
    prompt = item.get("prompt")
    line = (line_of(raw, json.dumps(prompt)) if isinstance(prompt, str) else None) or 1

    def fail(problem: str) -> InputError:
        return InputError(f"{where}: {problem}", path, line, _TASK_EVALS_HINT)

    eval_id = item.get("id", index)
    if isinstance(eval_id, bool) or not isinstance(eval_id, (int, str)) or not str(eval_id).strip():
        raise fail('"id" must be a number or a name')
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError(f'{where} needs a non-empty "prompt" string', path, line, _TASK_EVALS_HINT)
    expected = item.get("expected_output", "")
    if not isinstance(expected, str):
        raise fail('"expected_output" must be text')
    expectations = _eval_expectations(item, fail)
    files = _eval_strings(item, "files", fail)
    name = item.get("name")
    return SkillTest(
        name=name if isinstance(name, str) and name.strip() else f"eval-{eval_id}",
        type="task",
        source=str(path),
        line=line,
        prompt=prompt.strip(),
        skill=skill_name,
        eval_id=eval_id,
        expected_output=expected.strip(),
        expectations=expectations,
        files=[_eval_input_file(path, f, where, line) for f in files],
    )


def _check_task_eval_names(tests: Sequence[SkillTest], path: Path) -> None:
    """Every eval its own name, and every input file of an eval its own name (each is copied to
    the project's top folder by its name)."""
    seen: set[str] = set()
    for test in tests:
        if test.name in seen:
            raise InputError(
                f"{test.name}: two evals are named {test.name!r}",
                path,
                test.line,
                "give every eval its own id",
            )
        seen.add(test.name)
        names = [f.name for f in test.files]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice:
            raise InputError(
                f"{test.name}: two input files are named {twice!r} (each is copied to the project's "
                "top folder by its name)",
                path,
                test.line,
                "rename one of them",
            )


def _load_task_evals(path: Path, data: dict, raw: str) -> list[SkillTest]:
    """skill-creator's `evals/evals.json`, read as it is: each eval a task test graded by the judge,
    one verdict per expectation. `files` are relative to the evals file's folder (skill-creator
    writes them relative to the skill's root, `evals/files/x.pdf`: when the evals file sits in the
    skill's `evals/` folder, the skill's root is tried next), and stay inside that folder; a
    missing one is an error."""
    evals, skill_name = _task_evals_list(path, data, raw)
    tests = [_task_eval(path, raw, item, index, skill_name) for index, item in enumerate(evals, 1)]
    _check_task_eval_names(tests, path)
    return tests


def _load_eval_file(path: str | Path) -> list[SkillTest]:
    """A skill-creator JSON file: a trigger eval set (a list), or task evals (`evals/evals.json`)."""
    path = Path(path)
    raw = read_text_file(path, "eval set")
    data = parse_json_text(raw, path)
    if isinstance(data, dict) and "evals" in data:
        return _load_task_evals(path, data, raw)
    if isinstance(data, dict):
        raise InputError(
            'an eval set is a JSON list of {"query": ..., "should_trigger": true|false}, or task evals '
            '{"skill_name": ..., "evals": [...]} (skill-creator\'s evals/evals.json)',
            path,
            1,
        )
    return [load_skill_creator_evals(path)]


_TEST_FILE_KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "markdown",
    "": "markdown",
    ".json": "evals",
    ".xml": "qa",
}


def kind_of_test_file(path: str | Path) -> str | None:
    """What a --tests / --trigger file holds, by its extension: markdown tests, a skill-creator
    eval set, a QA evaluation (mcp-builder's XML); None for anything else."""
    return _TEST_FILE_KINDS.get(Path(path).suffix.lower())


def load_markdown_tests(target: str | Path, default_type: str | None = None) -> list[SkillTest]:
    """A test file, a skill-creator eval JSON, or a folder of `.md` tests (README.md skipped); a
    folder holding skill-creator's `evals.json` (or `evals/evals.json`: a skill's folder) is that file."""
    target = Path(target)
    evals = (
        next(
            (p for p in (target / "evals.json", target / "evals" / "evals.json") if p.is_file()),
            None,
        )
        if target.is_dir()
        else None
    )
    if evals is not None and default_type != "trigger":
        return _load_eval_file(evals)
    if target.is_dir():
        files = sorted(
            p for p in target.rglob("*.md") if p.is_file() and p.name.lower() != "readme.md"
        )
        if not files:
            raise InputError("no .md test files in this folder", target)
        return [load_markdown_test(p, default_type) for p in files]
    kind = kind_of_test_file(target)
    if kind == "qa":
        raise InputError(
            "a QA evaluation (.xml) runs against your MCP servers, not through Claude Code",
            target,
            hint="run it without --skill: --qa FILE.xml",
        )
    if kind is None:
        raise InputError(
            f"unknown test file format {target.suffix!r}",
            target,
            hint="give markdown tests (.md), a skill-creator eval set (.json) or a QA evaluation (.xml)",
        )
    if kind == "evals":
        tests = _load_eval_file(target)
        if default_type == "trigger" and any(t.type != "trigger" for t in tests):
            raise InputError(
                "--trigger wants a trigger eval set, this file holds task evals",
                target,
                hint="pass it with --tests instead",
            )
        return tests
    if not target.exists():
        raise InputError("test file not found", target)
    return [load_markdown_test(target, default_type)]
