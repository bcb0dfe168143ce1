"""import: a benchmark from the literature (bfcl, tau2: modes.benchmarks writes them) or a
plugin's `evals/` suite, written into a folder as this product's suites: each skill's trigger
cases as a trigger eval, every other case as a task eval with one judged expectation per grader;
or Claude Code sessions, as claude plugin eval cases (modes.sessions writes them).

May import: the rooms above the modes, the modes below it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from ..errors import UsageProblem
from ..loaders.plugin_evals import Plugin, PluginCase, PluginGrader, load_plugin
from ..options import flag_of, option_order
from ..settings import Settings
from ..sinks import terminal_text
from .benchmarks import bfcl_categories, import_bfcl, import_folder, import_tau2
from .common import FolderWrites
from .sessions import import_sessions

__all__ = [
    "import_mode",
]


def _grader_expectation(grader: PluginGrader) -> str:
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


def _trigger_verdict(plugin: Plugin, case: PluginCase) -> tuple[str, bool] | None:
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


def _task_skill(plugin: Plugin, case: PluginCase) -> str:
    """The skill a task eval is for: the first of the plugin's skills its graders or prompt
    name, else its first skill (the plugin's name when it ships none)."""
    said = case.prompt + " ".join(str(g.config) for g in case.graders)
    named = [s for s in plugin.skills if s in said]
    return (named or plugin.skills or [plugin.name])[0]


def _import_plugin_evals(source: Path, target: Path, files: FolderWrites) -> None:
    """A plugin's `evals/` suite in this product's formats: each skill's trigger cases as a
    skill-creator trigger eval (`<skill>-trigger.json`, for --trigger), every other case as a
    task eval of its skill with one expectation per grader (`<skill>-evals.json`, for --tests)."""
    plugin = load_plugin(source)
    triggers: dict[str, list[dict[str, Any]]] = {}
    tasks: list[dict[str, Any]] = []
    for case in plugin.cases:
        verdict = _trigger_verdict(plugin, case)
        if verdict is not None:
            triggers.setdefault(verdict[0], []).append(
                {"query": case.prompt, "should_trigger": verdict[1]}
            )
            continue
        tasks.append(
            {
                "skill": _task_skill(plugin, case),
                "id": 0,
                "name": case.name,
                "prompt": case.prompt,
                "expected_output": "",
                "files": [],
                "expectations": [_grader_expectation(g) for g in case.graders],
            }
        )
    for skill, queries in triggers.items():
        path = target / f"{skill}-trigger.json"
        files.json(
            path,
            queries,
            f"{len(queries)} trigger quer{'y' if len(queries) == 1 else 'ies'} (--skill "
            f"{terminal_text(plugin.folder / 'skills' / skill)} --trigger {terminal_text(path)})",
        )
    by_skill: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_skill.setdefault(task.pop("skill"), []).append(task)
    for skill, evals in by_skill.items():
        path = target / f"{skill}-evals.json"
        for number, task in enumerate(evals, 1):
            task["id"] = number
        files.json(
            path,
            {"skill_name": skill, "evals": evals},
            f"{len(evals)} task eval(s), one judged expectation per grader (--skill "
            f"{terminal_text(plugin.folder / 'skills' / skill)} --tests {terminal_text(path)})",
        )


# What each benchmark takes beyond -o: any other of these is refused (it is another's).
_IMPORT_OPTIONS = {
    "bfcl": ("categories", "limit"),
    "tau2": ("domain", "split", "tasks", "limit"),
    "plugin-evals": ("plugin",),
    "sessions": ("sessions_from", "session", "should_not_use", "force"),
}


def _check_import_options(settings: Settings) -> str:
    """The benchmark (or plugin-evals), once every option given is one it takes: an option of
    another benchmark is one line naming whose it is."""
    source = str(settings.exchange.import_source)
    if source == "sessions" and not settings.exchange.sessions_from:
        raise UsageProblem(
            "import sessions needs the sessions: import sessions PATH (a session's .jsonl, a "
            "project folder or ~/.claude/projects)"
        )
    if source != "sessions" and not settings.outputs.output:
        raise UsageProblem(f"import {source} needs -o DIR: the folder it writes the suites into")
    if source == "plugin-evals" and not settings.plugin_evals.plugin:
        raise UsageProblem(
            "import plugin-evals needs the plugin's folder: import plugin-evals PLUGIN -o DIR"
        )
    if source != "plugin-evals" and settings.plugin_evals.plugin:
        raise UsageProblem(
            f"import {source} takes no PLUGIN argument (got {settings.plugin_evals.plugin!r})"
        )
    for name in sorted(settings.given, key=option_order):
        owners = [s for s, names in _IMPORT_OPTIONS.items() if name in names]
        if owners and source not in owners:
            raise UsageProblem(
                f"{flag_of(name)} does not apply to import {source} (it is {' and '.join(owners)}'s)"
            )
    return source


def import_mode(settings: Settings, console: Console) -> int:
    """import bfcl | tau2 | plugin-evals PLUGIN -o DIR: the suites (and what serves their tools,
    and a project file) read from the benchmark's package or the plugin's suite, planned first
    (bad input: one line, nothing written), then written into DIR; --dry-run lists them.
    import sessions PATH [--session N|ID|all -o PLUGIN]: the sessions listed, or made cases."""
    source = _check_import_options(settings)
    if source == "sessions":
        exchange = settings.exchange
        said = import_sessions(
            Path(str(exchange.sessions_from)),
            exchange.session,
            exchange.should_not_use,
            settings.outputs.output,
            settings.drafting.force,
            settings.run_plan.dry_run,
        )
        for line in said:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return 0
    target = import_folder(Path(str(settings.outputs.output)))
    files = FolderWrites(target)
    if source == "plugin-evals":
        _import_plugin_evals(Path(str(settings.plugin_evals.plugin)), target, files)
        said = []
    elif source == "bfcl":
        said = import_bfcl(
            target, bfcl_categories(settings.exchange.categories), settings.exchange.limit, files
        )
    else:
        said = import_tau2(
            target,
            settings.exchange.domain,
            settings.exchange.split,
            settings.exchange.tasks,
            settings.exchange.limit,
            files,
        )
    for line in said + files.write(settings.run_plan.dry_run):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
