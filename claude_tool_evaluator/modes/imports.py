"""import: a benchmark from the literature (bfcl, tau2: modes.benchmarks writes them) or a
plugin's `evals/` suite, written into a folder as this product's suites: each skill's trigger
cases as a trigger eval, every other case as a task eval with one judged expectation per grader.

May import: the rooms above the modes, the modes below it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..files import write_json_atomic
from ..loaders.plugin_evals import Plugin, PluginCase, PluginGrader, load_plugin
from ..sinks import terminal_text, wrote_line


def grader_expectation(grader: PluginGrader) -> str:
    """A grader as one expectation sentence for this product's judge (task evals)."""
    get = grader.get
    if grader.kind == "regex":
        target = get("target")
        where = f"The file {target['path']}" if isinstance(target, dict) else f"The {target}"
        rule = f"/{get('pattern')}/{get('flags')}"
        match = get("match")
        if match == "contains":
            return f"{where} contains text matching the regular expression {rule}"
        if match == "not_contains":
            return f"{where} does not contain text matching the regular expression {rule}"
        return (
            f"{where} holds exactly {match.split(':')[1]} matches of the regular expression {rule}"
        )
    if grader.kind == "tool_used":
        low, high = get("min", 1), get("max")
        times = f"at least {low}" if high is None else f"between {low} and {high}"
        matching = f" with input matching /{get('input_match')}/" if get("input_match") else ""
        return f"The run calls the {get('tool')} tool{matching} {times} times"
    if grader.kind == "tool_order":
        return f"The run calls {get('before').tool} before it calls {get('after').tool}"
    if grader.kind == "file_exists":
        made = "was" if get("exists") else "was not"
        return f"A file matching {get('path')} {made} created by the run"
    if grader.kind == "baseline":
        return f"{get('criteria')} (at least as well as the baseline in {get('baseline_file')})"
    return str(get("criteria"))


def trigger_verdict(plugin: Plugin, case: PluginCase) -> tuple[str, bool] | None:
    """(skill, should it fire) when every grader of the case is a `tool_used` on Skill naming
    one of the plugin's skills (or none, with a single skill): a trigger query; else None."""
    if not case.graders or any(
        g.kind != "tool_used" or g.get("tool") != "Skill" for g in case.graders
    ):
        return None
    verdicts = set()
    for grader in case.graders:
        named = [s for s in plugin.skills if s in str(grader.get("input_match") or "")]
        skill = named[0] if named else plugin.skills[0] if len(plugin.skills) == 1 else None
        if skill is None:
            return None
        fires = grader.get("min", 1) >= 1 and grader.get("max") != 0
        verdicts.add((skill, fires))
    return verdicts.pop() if len(verdicts) == 1 else None


def task_skill(plugin: Plugin, case: PluginCase) -> str:
    """The skill a task eval is for: the first of the plugin's skills its graders or prompt
    name, else its first skill (the plugin's name when it ships none)."""
    said = case.prompt + " ".join(str(g.config) for g in case.graders)
    named = [s for s in plugin.skills if s in said]
    return (named or plugin.skills or [plugin.name])[0]


def import_plugin_evals(source: Path, target: Path) -> list[str]:
    """A plugin's `evals/` suite in this product's formats: each skill's trigger cases as a
    skill-creator trigger eval (`<skill>-trigger.json`, for --trigger), every other case as a
    task eval of its skill with one expectation per grader (`<skill>-evals.json`, for --tests)."""
    plugin = load_plugin(source)
    triggers: dict[str, list[dict[str, Any]]] = {}
    tasks: list[dict[str, Any]] = []
    for case in plugin.cases:
        verdict = trigger_verdict(plugin, case)
        if verdict is not None:
            triggers.setdefault(verdict[0], []).append(
                {"query": case.prompt, "should_trigger": verdict[1]}
            )
            continue
        tasks.append(
            {
                "skill": task_skill(plugin, case),
                "id": 0,
                "name": case.name,
                "prompt": case.prompt,
                "expected_output": "",
                "files": [],
                "expectations": [grader_expectation(g) for g in case.graders],
            }
        )
    said = []
    for skill, queries in triggers.items():
        path = target / f"{skill}-trigger.json"
        write_json_atomic(path, queries)
        said.append(
            f"{wrote_line(path)}: {len(queries)} trigger quer{'y' if len(queries) == 1 else 'ies'} "
            f"(--skill {terminal_text(plugin.folder / 'skills' / skill)} --trigger "
            f"{terminal_text(path)})"
        )
    by_skill: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_skill.setdefault(task.pop("skill"), []).append(task)
    for skill, evals in by_skill.items():
        path = target / f"{skill}-evals.json"
        for number, task in enumerate(evals, 1):
            task["id"] = number
        write_json_atomic(path, {"skill_name": skill, "evals": evals})
        said.append(
            f"{wrote_line(path)}: {len(evals)} task eval(s), one judged expectation per grader "
            f"(--skill {terminal_text(plugin.folder / 'skills' / skill)} --tests "
            f"{terminal_text(path)})"
        )
    return said
