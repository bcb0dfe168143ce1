"""`export claude-plugin-eval`: a skill's trigger set, skill-creator's task evals (evals.json) or a
CSV suite written as Claude Code's own eval suite (`evals/<case>/prompt.md` + `graders/*.md`),
which `claude plugin eval` loads and runs. The folder it writes is a plugin: the skill under
`skills/<name>/` and a manifest, unless it already is one (then only its `evals/` is written).
The case files themselves: modes.plugin_cases.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

import test_constants as C

from ..errors import InputError, UsageProblem
from ..loaders.csv_suites import load_csv_suite
from ..loaders.plugin_evals import MAX_RUNS
from ..loaders.skills import (
    PLUGIN_MANIFEST,
    SKILL_COPY_IGNORED,
    load_markdown_tests,
    load_skill,
)
from ..run_types import RoutingRule, SkillInfo, SkillTest, TestCase
from ..runners.skills import assign_trigger_skills
from ..settings import Settings
from ..sinks import terminal_text
from .common import FolderWrites
from .plugin_cases import (
    CaseGrader,
    EvalCase,
    case_slug,
    plugin_eval_dir,
    skill_call_pattern,
    write_case,
)

__all__ = [
    "export_mode",
]

# What a trigger case lets Claude use: what `claude plugin eval init` offers a skill's case.
_TRIGGER_ALLOWED_TOOLS = ["Read", "Glob", "Grep", "Skill"]


def _fired_grader(name: str, fired: bool) -> CaseGrader:
    """A `tool_used` grader: the skill fired at least once, or never (`min: 0` said)."""
    fields: dict[str, Any] = {"type": "tool_used", "tool": "Skill"}
    fields["input_match"] = skill_call_pattern(name)
    if not fired:
        fields.update(min=0, max=0)
    said = f"{name} fires" if fired else f"{name} never fires"
    return CaseGrader(f"{case_slug(name)}-{'fires' if fired else 'quiet'}", fields, said)


def _routing_graders(rule: RoutingRule | None) -> list[CaseGrader]:
    """A query's routing assertions as graders: must_fire / must_not_fire skills, and
    max_skills as a cap on Skill calls."""
    if rule is None:
        return []
    graders = [_fired_grader(n, True) for n in rule.must_fire]
    graders += [_fired_grader(n, False) for n in rule.must_not_fire]
    if rule.max_skills is not None:
        graders.append(
            CaseGrader(
                "max-skills",
                {"type": "tool_used", "tool": "Skill", "min": 0, "max": rule.max_skills},
                f"at most {rule.max_skills} skill calls",
            )
        )
    return graders


def _trigger_cases(test: SkillTest, runs: int | None) -> list[EvalCase]:
    """A trigger set: a case per query, its skill's firing graded (and its routing rule)."""
    assert test.skill is not None, "assign_trigger_skills names every trigger test's skill"
    cases = []
    queries = [(q, True) for q in test.positive_triggers]
    queries += [(q, False) for q in test.negative_triggers]
    for query, positive in queries:
        front: dict[str, Any] = {
            "description": f"{'should' if positive else 'should not'} fire {test.skill}",
            "tags": ["trigger", "positive" if positive else "negative"],
            "max_turns": C.DEFAULT_TRIGGER_MAX_TURNS,
            "allowed_tools": _TRIGGER_ALLOWED_TOOLS,
        }
        if runs:
            front["runs"] = runs
        graders = [_fired_grader(test.skill, positive)]
        graders += [
            g
            for g in _routing_graders(test.routing.get(query))
            if g.name not in {x.name for x in graders}
        ]
        cases.append(EvalCase(test.name, query, front, graders))
    return cases


def _task_case(test: SkillTest, runs: int | None) -> EvalCase:
    """A skill-creator task eval: its prompt, an llm grader per expectation, its expected output
    as the case's expected_outcome."""
    front: dict[str, Any] = {"tags": ["task"], "max_turns": C.DEFAULT_MAX_TURNS}
    if test.expected_output:
        front["expected_outcome"] = test.expected_output
    if runs:
        front["runs"] = runs
    graders = [
        CaseGrader(f"expectation-{n:02d}", {"type": "llm"}, text)
        for n, text in enumerate(test.expectations, 1)
    ]
    return EvalCase(str(test.eval_id or test.name), test.prompt, front, graders)


def _mcp_tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


def _csv_export_case(case: TestCase, server: str, runs: int | None) -> EvalCase:
    """A CSV case: each expected tool called, each forbidden one never, `order: strict` as
    tool_order graders, its rubric as an llm grader (the server's tools are `mcp__SERVER__TOOL`)."""
    front: dict[str, Any] = {"max_turns": C.DEFAULT_MAX_TURNS}
    if case.tags:
        front["tags"] = list(case.tags)
    if runs:
        front["runs"] = runs
    graders = [
        CaseGrader(
            f"calls-{case_slug(t)}", {"type": "tool_used", "tool": _mcp_tool_name(server, t)}
        )
        for t in dict.fromkeys(case.expected_tools)
    ]
    graders += [
        CaseGrader(
            f"never-{case_slug(t)}",
            {"type": "tool_used", "tool": _mcp_tool_name(server, t), "min": 0, "max": 0},
        )
        for t in dict.fromkeys(case.forbidden_tools)
    ]
    if case.order == "strict":
        graders += [
            CaseGrader(
                f"order-{n:02d}",
                {
                    "type": "tool_order",
                    "before": _mcp_tool_name(server, first),
                    "after": _mcp_tool_name(server, then),
                },
            )
            for n, (first, then) in enumerate(zip(case.expected_tools, case.expected_tools[1:]), 1)
        ]
    if case.rubric:
        graders.append(CaseGrader("rubric", {"type": "llm"}, case.rubric))
    return EvalCase(case.name, case.prompt, front, graders)


def _numbered(cases: Iterable[EvalCase]) -> list[EvalCase]:
    """Each case named `<slug>-NN` (NN counts every exported case): folder names of their own."""
    return [
        EvalCase(f"{case_slug(c.name)}-{n:02d}", c.prompt, c.front, c.graders)
        for n, c in enumerate(cases, 1)
    ]


def _check_gradable(cases: Sequence[EvalCase], source: str) -> None:
    """Claude Code refuses a case without graders: say which, before anything is written."""
    empty = next((c for c in cases if not c.graders), None)
    if empty is not None:
        raise InputError(
            f"case {empty.name!r} would have no grader, which claude plugin eval refuses to load",
            source,
            hint="give a task eval expectations, a CSV case expected or forbidden tools or a rubric",
        )


def _wraps_skill(target: Path, skill: SkillInfo | None) -> bool:
    """Whether the export makes the folder a plugin around the skill (it is none yet), checked
    before anything is written."""
    if target.exists() and not target.is_dir():
        raise InputError("export -o takes a folder, and this is a file", target)
    if not target.parent.is_dir():
        raise InputError(f"export -o {target}: the folder {target.parent} does not exist")
    if (target / PLUGIN_MANIFEST).is_file():
        return False
    if skill is not None and target.resolve().is_relative_to(skill.folder.resolve()):
        raise InputError(
            f"export -o {target} is inside the skill it would copy ({skill.folder})",
            hint="export into a folder outside the skill",
        )
    if skill is None:
        raise InputError(
            f"{target} is no plugin (no {PLUGIN_MANIFEST})",
            hint="give --skill path/to/skill to make it one around the skill, or -o a plugin folder",
        )
    if (target / "skills" / skill.name).exists():
        raise InputError(
            f"{target / 'skills' / skill.name} exists already", hint="export into a new folder"
        )
    return True


def _wrap_skill(target: Path, skill: SkillInfo, files: FolderWrites) -> None:
    """The folder made a plugin: its manifest and the skill as `skills/<name>/`."""
    files.copy_folder(
        skill.folder,
        target / "skills" / skill.name,
        shutil.ignore_patterns(*SKILL_COPY_IGNORED),
    )
    files.text(
        target / PLUGIN_MANIFEST,
        json.dumps({"name": skill.name, "version": "0.0.0", "description": skill.description})
        + "\n",
    )


def _export_claude_plugin_eval(
    target: Path,
    skill_path: str | None,
    test_files: Sequence[str],
    csv_files: Sequence[str],
    mcp_server: str | None,
    runs: int | None,
    files: FolderWrites,
) -> list[str]:
    """Every case read and checked first (bad input: one line, nothing written), then the plugin
    folder and its cases planned into `files`; the lines to say what they are and how to run
    them."""
    skill = load_skill(skill_path) if skill_path else None
    tests = [t for path in test_files for t in load_markdown_tests(path)]
    if not tests and not csv_files:
        raise InputError("nothing to export", hint="give --tests FILE and/or --csv FILE")
    if csv_files and not mcp_server:
        raise InputError(
            "a CSV suite's tools are the plugin's MCP server's",
            hint="name the server as the plugin's .mcp.json does: --mcp-server NAME",
        )
    unexported = next((t for t in tests if t.type not in ("trigger", "task")), None)
    if unexported is not None:
        raise InputError(
            f"test {unexported.name!r} is a {unexported.type} test: only trigger sets and task "
            "evals (evals.json) are exported",
            unexported.source,
            unexported.line,
        )
    if skill is not None:
        assign_trigger_skills(tests, [skill])
    unnamed = next((t for t in tests if t.type == "trigger" and not t.skill), None)
    if unnamed is not None:
        raise InputError(
            "trigger test does not say which skill it tests",
            unnamed.source,
            1,
            "give --skill path/to/skill, or `skill: NAME` in its frontmatter",
        )
    with_files = next((t for t in tests if t.files), None)
    if with_files is not None:
        raise InputError(
            f"task eval {with_files.name!r} has input files, which a claude plugin eval case "
            "does not start with",
            with_files.source,
            with_files.line,
            "leave its files out, or copy them in with the case's scaffold_script",
        )
    cases = [
        case
        for test in tests
        for case in (
            _trigger_cases(test, runs) if test.type == "trigger" else [_task_case(test, runs)]
        )
    ]
    for path in csv_files:
        cases += [_csv_export_case(c, str(mcp_server), runs) for c in load_csv_suite(path)]
    cases = _numbered(cases)
    _check_gradable(cases, ", ".join([*test_files, *csv_files]))
    wrap = _wraps_skill(target, skill)
    folder = target / "evals" if wrap else plugin_eval_dir(target)
    taken = next((c.name for c in cases if (folder / c.name).exists()), None)
    if taken is not None:
        raise InputError(f"{folder / taken} exists already", hint="export into a new folder")
    if wrap:
        assert skill is not None, "wraps_skill wants a skill to wrap"
        _wrap_skill(target, skill, files)
    for case in cases:
        write_case(folder, case, files)
    return [
        f"{len(cases)} case{'s' if len(cases) != 1 else ''} to {folder}",
        f"run them: claude plugin eval {target} --trust-plugin",
    ]


def export_mode(settings: Settings, console: Console) -> int:
    """export claude-plugin-eval -o DIR: trigger sets and task evals (--tests) or a CSV suite
    (--csv) as claude plugin eval cases in the plugin folder DIR (made a plugin around --skill
    when it is none); every case checked before anything is written; --dry-run lists them."""
    if not settings.outputs.output:
        raise UsageProblem("export needs -o DIR: the plugin folder its cases are written into")
    if len(settings.inputs.skill) > 1:
        raise UsageProblem("export takes one --skill: the skill its trigger sets are about")
    if settings.run_plan.auto_runs:
        raise UsageProblem("--runs auto: an exported case runs a number of times (its `runs`)")
    if settings.run_plan.runs and settings.run_plan.runs > MAX_RUNS:
        raise UsageProblem(
            f"--runs {settings.run_plan.runs}: claude plugin eval runs a case at most {MAX_RUNS} times"
        )
    files = FolderWrites(Path(settings.outputs.output))
    cases, run = _export_claude_plugin_eval(
        Path(settings.outputs.output),
        settings.inputs.skill[0] if settings.inputs.skill else None,
        settings.inputs.tests,
        (settings.inputs.csv,) if settings.inputs.csv else (),
        settings.exchange.mcp_server,
        settings.run_plan.runs,
        files,
    )
    said = files.write(settings.run_plan.dry_run)
    lines = [*said] if settings.run_plan.dry_run else [f"wrote {cases}", run]
    for line in lines:
        console.print(terminal_text(line), markup=False, highlight=False, soft_wrap=True)
    return 0
