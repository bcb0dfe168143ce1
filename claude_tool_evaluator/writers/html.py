"""The HTML report: one self-contained page (opens offline) with its data, its script and its
content security policy.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import test_constants as C

from ..files import dump_streamed, materialized, write_text_atomic
from ..finished_run import MODE_TITLES, Results, gates, models_text
from ..redaction import Redactor
from ..results_schema.document import SECTIONS, PluginRunResult, ToolRunResult, dump_record
from ..run_types import Usage
from ..scoring.statistics import wilson_interval
from ..sinks import hidden_shown, json_text
from .comparison import pass_line, trigger_score_changes

__all__ = [
    "html_block",
    "html_comparison_data",
    "html_json",
    "render_html",
    "results_from_document",
    "write_html_report",
]

if TYPE_CHECKING:
    from ..results_schema.document import CaseResult, ResultsDocument, RunResult, SkillRunResult
    from ..results_schema.plugin import PluginRecord
    from ..run_types import ToolCall
    from .comparison import Comparison


# One file that opens offline, for any mode: the page (HTML, CSS, JS) is HTML_PAGE, the data goes
# in as JSON inside <script type="application/json"> (`html_json`: `<`, `>`, `&` escaped, so no
# text can end the script element), and the script builds the DOM with createElement and
# textContent only: every name, prompt, tool output and server message is text, never markup.
# The Content-Security-Policy lets only the page's own script (by its hash) and inline styles run
# and forbids every request (no other host, no fetch); charts are inline SVG drawn by the script.
_HTML_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src '{script_hash}'; "
    "base-uri 'none'; form-action 'none'"
)


def html_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: `<`, `>` and `&` only occur in JSON strings,
    where \\uXXXX means the same character. Hidden characters are given as visible escapes (the
    page shows `\\u200b`, not nothing: see HIDDEN_CHARACTERS)."""
    text = json_text(hidden_shown(value), indent=None)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _html_cut(text: Any, limit: int = C.HTML_TEXT_CHARS) -> str:
    """A text as the page shows it: long tool outputs and answers are cut (the results JSON has
    them whole), so a 200-case suite stays a small file."""
    text = "" if text is None else text if isinstance(text, str) else json_text(text)
    return (
        text
        if len(text) <= limit
        else text[:limit] + f"\n… ({len(text) - limit:,} more characters in the results JSON)"
    )


def _html_run_id(result: RunResult) -> str:
    """A run's id in the page and in feedback.json: the case (or the query) and the run number."""
    if isinstance(result, ToolRunResult):
        return f"{result.test_name}/run-{result.iteration}"
    if isinstance(result, PluginRunResult):
        label = f" ({result.label})" if result.label else ""
        return f"{result.case} [{result.arm}]{label}/run-{result.run}"
    configuration = f" [{result.configuration}]" if getattr(result, "configuration", "") else ""
    return f"{result.test if result.test and result.test != 'trigger' else result.query}{configuration}/run-{result.run}"


def _html_tool_step(call: ToolCall) -> dict:
    return {
        "role": "tool",
        "name": call.name,
        "input": _html_cut(json_text(call.input)),
        "output": _html_cut(call.output),
        "error": call.is_error,
        "ms": round(call.duration_ms, 1),
    }


def _html_tool_run_steps(r: ToolRunResult) -> list[dict]:
    """The conversation as turns: each `tool` entry of the history becomes the calls of its turn,
    with their arguments and results."""
    turns: dict[int, list[ToolCall]] = {}
    for call in r.tool_calls:
        turns.setdefault(call.turn, []).append(call)
    groups, steps = list(turns.values()), []
    for entry in r.conversation_history:
        if entry.role == "tool" and groups:
            steps += [_html_tool_step(call) for call in groups.pop(0)]
        elif entry.role == "tool":
            steps.append(
                {"role": "tool", "name": "(tools)", "input": "", "output": _html_cut(entry.content)}
            )
        elif entry.content or not entry.has_tools:
            steps.append(
                {"role": entry.role, "text": _html_cut(entry.content), "simulated": entry.simulated}
            )
    for group in groups:  # calls of a turn the history does not show (an interrupted run)
        steps += [_html_tool_step(call) for call in group]
    if not r.conversation_history and r.query:
        steps.insert(0, {"role": "user", "text": _html_cut(r.query)})
    return steps


def _html_skill_run_steps(r: SkillRunResult) -> list[dict]:
    steps: list[dict] = [{"role": "user", "text": _html_cut(r.query)}]
    if r.tool_calls:
        steps += [_html_tool_step(call) for call in r.tool_calls]
    else:
        steps += [{"role": "tool", "name": name, "input": "", "output": ""} for name in r.tools]
    if r.answer:
        steps.append({"role": "assistant", "text": _html_cut(r.answer)})
    return steps


def _html_plugin_run(result: PluginRunResult) -> dict:
    """A plugin run's page data beside the common fields: the prompt, the tools it called and its
    answer; the arm, score and the plugin's parts as facts; each grader's verdict."""
    steps: list[dict] = [{"role": "user", "text": _html_cut(result.query)}]
    steps += [{"role": "tool", "name": name, "input": "", "output": ""} for name in result.tools]
    if result.answer:
        steps.append({"role": "assistant", "text": _html_cut(result.answer)})
    facts = {
        "arm": f"{result.arm} the plugin",
        "score": f"{result.score:.2f}",
        "turns": result.turns,
        "delegated to": ", ".join(result.delegations),
        "hooks": _html_cut("; ".join(result.hooks), 2000),
        "MCP calls": ", ".join(result.mcp_calls),
    }
    grades = {
        f"grader {g.name}": {
            "passed": g.passed,
            "text": _html_cut(g.explanation + ("" if g.scored else " (shown, not scored)"), 2000),
        }
        for g in result.graders
    }
    return {
        "iteration": result.run,
        "arm": result.arm,
        "model": result.label or result.model,
        "tokens": Usage.from_api(result.usage).total,
        "steps": steps,
        "facts": {k: v for k, v in facts.items() if v not in (None, "")},
        "grades": grades,
    }


def _html_run(result: RunResult) -> dict:
    verdict = result.verdict
    common = {
        "id": _html_run_id(result),
        "error": result.error,
        "cost": result.cost_usd,
        "latency_ms": result.latency_ms,
        "passed": None if verdict is None else verdict.passed,
        "reasons": verdict.reasons if verdict else [],
    }
    if isinstance(result, PluginRunResult):
        return dict(common, **_html_plugin_run(result))
    if isinstance(result, ToolRunResult):
        return dict(
            common,
            iteration=result.iteration,
            model=result.model,
            tokens=result.token_count,
            ended_by=result.ended_by,
            steps=_html_tool_run_steps(result),
            grades={
                name: {k: _html_cut(v, 2000) if isinstance(v, str) else v for k, v in grade.items()}
                for name, grade in result.grades.items()
            },
        )
    facts = {
        "activated skills": ", ".join(result.activated_skills) or "none",
        "skills loaded": "?"
        if result.skills_loaded is None
        else ", ".join(result.skills_loaded) or "none",
        "ended": "timeout" if result.timed_out else result.result_subtype or "",
        "turns": result.num_turns,
    }
    if result.delegations:  # a run with subagents under test, or one that handed off a task
        facts["delegated to"] = ", ".join(result.delegated_agents)
    if result.hooks:  # a plugin's hooks: what each did, in order
        facts["hooks"] = _html_cut("; ".join(f"{h.name}: {h.did}" for h in result.hooks), 2000)
    if result.stderr_tail and result.error:
        facts["stderr"] = _html_cut(result.stderr_tail, 2000)
    grades = {
        f"expectation {n}": {
            "passed": bool(e.get("passed")),
            **{k: _html_cut(e[k], 2000) for k in ("text", "evidence", "error") if e.get(k)},
        }
        for n, e in enumerate(getattr(result, "expectations", None) or [], 1)
        if isinstance(e, dict)
    }
    return dict(
        common,
        iteration=result.run,
        tokens=Usage.from_api(result.usage).total,
        steps=_html_skill_run_steps(result),
        facts={k: v for k, v in facts.items() if v not in (None, "")},
        grades=grades,
    )


def _html_case(case: CaseResult, run_ids: list[str], tags: list[str]) -> dict:
    return {
        "name": case.name,
        "group": case.group,
        "kind": case.kind,
        "tags": tags,
        "passed": case.passed,
        "error": case.error,
        "flaky": case.flaky,
        "runs": case.runs,
        "passes": case.passes,
        "pass_rate": case.pass_rate,
        "interval": None if case.interval is None else list(case.interval),
        "breaches": case.breaches,
        "cost": case.cost_usd,
        "seconds": case.seconds,
        "reasons": [[reason, n] for reason, n in case.reasons.items()],
        "prompt": _html_cut(case.prompt),
        "description": case.description,
        "run_ids": run_ids,
    }


def _dumped_section(value: Any) -> Any:
    """A section as the page embeds it: whole (the page holds every case and run anyway)."""
    return materialized(dump_streamed(value))


def _plugin_page(data: dict, plugin: PluginRecord, every_case: Iterable[CaseResult]) -> None:
    """The plugin's own page: titled with the plugin (`Plugin greeter v1.0.0`), a case per case
    of the suite (the arm with the plugin's verdict: the arm without it is a baseline, never a
    failure, never counted), its runs those of both arms, each labelled (`with greeter`,
    `baseline (without)`); the model Claude Code ran on."""
    title = plugin.effects[0].title if plugin.effects else plugin.name
    data["title"] = f"Plugin {title}"
    models = list(dict.fromkeys(c.model for c in plugin.configurations if c.model))
    if models:
        data["model"] = ", ".join(models)
    cases = list(every_case)
    arms = {"with": f"with {plugin.name}", "without": "baseline (without)"}
    for run in data["runs"].values():
        if run.get("arm") in arms:
            run["arm"] = arms[run["arm"]]
            run["facts"]["arm"] = run["arm"]
    baselines = {
        (case.name.removesuffix(" [without]"), case.model): entry["run_ids"]
        for case, entry in zip(cases, data["cases"])
        if not gates(case)
    }
    shown = [
        dict(
            entry,
            name=entry["name"].replace(" [with]", "", 1),
            run_ids=entry["run_ids"]
            + baselines.get((case.name.removesuffix(" [with]"), case.model), []),
        )
        for case, entry in zip(cases, data["cases"])
        if gates(case)
    ]
    data["cases"] = shown
    passed = sum(1 for c in cases if gates(c) and c.passed)  # the baseline is never counted
    low, high = wilson_interval(passed, len(shown))
    data["summary"] = dict(
        data["summary"],
        passed=passed,
        cases=len(shown),
        pass_rate=passed / len(shown) if shown else 0.0,
        interval=[low, high],
    )


def _html_results_data(results: Results) -> dict:
    """What the page shows of a finished run: the overview's numbers, every case, every run's
    transcript (cut where long), and what the mode adds (skills, QA, coverage)."""
    s, meta = results.summary, results.metadata
    records = list(results.results())
    runs = [_html_run(r) for r in records]
    seen: dict[str, int] = {}
    for run in runs:  # ids stay unique (they key the page's runs and the review notes)
        seen[run["id"]] = seen.get(run["id"], 0) + 1
        run["id"] += f" #{seen[run['id']]}" if seen[run["id"]] > 1 else ""
    matrix = results.matrix  # a model matrix: a case per model, named NAME (MODEL)
    label = lambda name, model: f"{name} ({model})" if matrix and model else name  # noqa: E731
    trigger_cases: dict[tuple, list[str]] = {}
    for case in results.cases:
        if case.kind == "trigger_query":
            trigger_cases.setdefault(
                (case.prompt, case.model if matrix else None, case.distractors), []
            ).append(label(case.name, case.model))
    by_case: dict[str, list[str]] = {}
    tags_of: dict[str, list[str]] = {}
    for result, run in zip(records, runs):
        if isinstance(result, ToolRunResult):
            owners = [label(result.test_name, result.model)]
        elif isinstance(result, PluginRunResult):
            owners = [label(f"{result.case} [{result.arm}]", result.label or None)]
        elif result.test and result.test != "trigger":
            owners = [label(result.test, result.model)]
        else:
            owners = trigger_cases.get(
                (result.query, result.model if matrix else None, result.distractors), []
            )
        for owner in owners:
            by_case.setdefault(owner, []).append(run["id"])
    for case in results.cases:  # a trigger query's tag: activate / ignore; a skill test's: its type
        if case.kind in ("trigger_query", "test") and case.description:
            tags_of[case.name] = [case.description]
    low, high = wilson_interval(s.passed, s.cases)
    model = (
        meta.model
        if meta.evaluation != "skills"
        else f"{meta.trigger_model} (triggers), {meta.test_model} (tests)"
    )
    data: dict[str, Any] = {
        "title": MODE_TITLES.get(meta.evaluation, "Evaluation"),
        "evaluation": meta.evaluation,
        "passed": results.passed,
        "model": model,
        "claude_version": meta.claude_version,
        "generated_at": meta.generated_at,
        "wall_time_s": meta.suite_wall_time_s,
        "iterations": meta.iterations,
        "summary": dict(dump_record(s), interval=[low, high]),
        "cases": [
            dict(
                _html_case(
                    c, by_case.get(label(c.name, c.model), []), c.tags or tags_of.get(c.name, [])
                ),
                name=label(c.name, c.model),
            )
            for c in results.cases
        ],
        "runs": {run["id"]: run for run in runs},
        "runs_kept": bool(runs) or not results.result_count,
        "results_file": meta.results_file,
    }
    if results.sections.get("matrix") is not None:  # a model matrix: every model in the header
        data["model"] = models_text(meta)
    plugin = results.sections.get("plugin")
    if plugin is not None:
        _plugin_page(data, plugin, results.cases)
    data["sections"] = [
        {
            "key": section.key,
            "place": place,
            "renderer": section.html_renderer,
            "data": section.html(value) if section.html else _dumped_section(value),
        }
        for place in ("first", "before_cases", "after_cases")
        for section, value in results.shown(place)
        if section.html_renderer
    ]
    return data


def html_block(
    title: str,
    tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]]]],
    notes: Sequence[str] = (),
) -> dict:
    """A section as the page's generic renderer (renderBlock) draws it: a heading, lines of text
    and tables of (caption, headers, rows). Every cell is text, never markup."""
    return {
        "title": title,
        "notes": list(notes),
        "tables": [
            {
                "caption": caption,
                "headers": list(headers),
                "rows": [[str(cell) for cell in row] for row in rows],
            }
            for caption, headers, rows in tables
        ],
    }


def results_from_document(document: ResultsDocument, path: str | Path) -> Results:
    """A results file read back as every writer reads a finished run (--from, --compare)."""
    sections = {
        section.key: document.section(section.key)
        for section in SECTIONS
        if document.section(section.key) is not None
    }
    return Results(
        document.metadata,
        document.passed,
        document.summary,
        document.cases,
        lambda: iter(document.results),
        len(document.results),
        sections,
        Path(path).stem or "suite",
    )


def html_comparison_data(comparisons: Sequence[Comparison]) -> dict:
    """A comparison: every step's changes (regressions and fixes first), and the newest file's
    cases and transcripts below them."""
    newest = comparisons[-1]
    data = _html_results_data(results_from_document(newest.new, newest.new_path))
    data["title"] = "Comparison"
    data["comparisons"] = [
        {
            "old": c.old_path,
            "new": c.new_path,
            "failed": c.failed,
            "verdict": c.verdict,  # failed, warning (a suspected regression let through), passed
            "badge": "regressed"
            if c.of("regression") or c.of("removed")
            else "suspected regression"
            if c.of("suspected")
            else "no regression",
            "method": c.method(),
            "suspicion": c.suspicion(),
            "old_passed": pass_line(c.old),
            "new_passed": pass_line(c.new),
            "old_cost": c.old.summary.cost_usd,
            "new_cost": c.new.summary.cost_usd,
            "trigger_scores": [[skill, a, b] for skill, a, b in trigger_score_changes(c)],
            "alpha": c.alpha,
            "counts": c.counts(),
            "statistics": [[rate.label, rate.shown()] for rate in c.rates]
            + [[mean.label, mean.shown()] for mean in c.means],
            "changes": [
                {
                    "name": ch.name,
                    "change": ch.change,
                    "shown": ch.shown_change,
                    "reasons": ch.note,
                    "statistics": ch.rate.shown() if ch.rate else "",
                    "old": None if ch.old is None else f"{ch.old.passes}/{ch.old.runs}",
                    "new": None if ch.new is None else f"{ch.new.passes}/{ch.new.runs}",
                }
                for ch in c.changes
                if ch.change != "unchanged"
            ],
        }
        for c in comparisons
    ]
    changes = {ch["name"]: ch["change"] for ch in data["comparisons"][-1]["changes"]}
    for case in data["cases"]:
        case["change"] = changes.get(case["name"], "")
    data["passed"] = not any(c.failed for c in comparisons)
    data["warning"] = (
        "suspected regression" if any(c.of("suspected") for c in comparisons) else None
    )
    return data


# The page's script. It reads the data as JSON and builds every element with createElement /
# textContent (never innerHTML), so the data is always text.
# The page's script (report.js beside this file): its hash is the only script the page's CSP allows.
_HTML_SCRIPT = Path(__file__).with_name("report.js").read_text(encoding="utf-8")


# The page around it (report.html beside this file): __CSP__, __DATA__ and __SCRIPT__ are filled in.
_HTML_PAGE = Path(__file__).with_name("report.html").read_text(encoding="utf-8")


def render_html(data: dict) -> str:
    """The page with its data: one file, no request to anywhere (see HTML_CSP)."""
    import base64
    import hashlib

    data = Redactor.for_run().data(data)  # an API key in an old results file never reaches a page
    digest = base64.b64encode(hashlib.sha256(_HTML_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    page = _HTML_PAGE.replace("__CSP__", _HTML_CSP.format(script_hash=f"sha256-{digest}"))
    before, _, after = page.partition(
        "__DATA__"
    )  # the data last: no text of it is ever a placeholder
    return before + html_json(data) + after.replace("__SCRIPT__", _HTML_SCRIPT)


def write_html_report(path: str, results: Results) -> None:
    write_text_atomic(path, render_html(_html_results_data(results)))
