"""The results JSON, JUnit XML, CSV rows and skill-creator's benchmark.json (their WRITERS rows
are in writers/__init__.py), and write_outputs: every output a run asks for, redacted.

Importing it fills SECTIONS (writers.sections): whatever writes or reads results through the
writers has every section of the document.

May import: the rooms above the writers, every other writer."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from ..errors import OutputError
from ..files import dump_json, journal_path, write_json_atomic, write_text_atomic
from ..finished_run import case_label, gates
from ..options import WRITERS
from ..results_schema.document import (
    SECTIONS,
    BenchmarkRecord,
    PluginRunResult,
    SkillRunResult,
    ToolRunResult,
    dump_record,
)
from ..run_types import Usage
from ..scoring.task_evals import run_tokens
from ..sinks import csv_cell, json_text, wrote_line, xml_text

# every section's row, in the order the reports show them, before a results document is made or read
from . import sections  # noqa: F401  (fills SECTIONS)
from .comparison import comparison_json, render_comparison
from .github import GITHUB_SINKS
from .html import html_comparison_data, render_html
from .markdown import render_markdown, signed

__all__ = [
    "print_comparison_json",
    "print_results_json",
    "write_comparison_html",
    "write_comparison_json",
    "write_comparison_markdown",
    "write_comparisons",
    "write_junit",
    "write_markdown_report",
    "write_outputs",
    "write_results_csv",
    "write_results_json",
    "write_skill_creator_benchmark",
]

if TYPE_CHECKING:
    from ..finished_run import Results
    from ..options import Writer
    from ..results_schema.document import CaseResult, RunResult
    from ..settings import Outputs
    from .comparison import Comparison


def write_results_json(path: str, results: Results) -> None:
    write_json_atomic(path, results.document())


def write_markdown_report(path: str, results: Results) -> None:
    write_text_atomic(path, render_markdown(results))


_RESULT_CSV_COLUMNS = [
    "test_name",
    "iteration",
    "user_prompt",
    "tools_called",
    "verdict",
    "reasons",
    "tokens",
    "cost_usd",
    "latency_ms",
    "ended_by",
    "error",
    "skills_fired",
    "tool_sources",
]  # who answered each of tools_called: live, mock, replay or policy (withheld)


def _csv_row(result: RunResult) -> list[Any]:
    verdict = "" if result.verdict is None else "pass" if result.verdict.passed else "fail"
    reasons = "; ".join(result.verdict.reasons) if result.verdict else ""
    if isinstance(result, ToolRunResult):
        return [
            result.test_name,
            result.iteration,
            result.query,
            ",".join(result.tools_called),
            verdict,
            reasons,
            result.token_count,
            f"{result.cost_usd:.6f}",
            result.latency_ms,
            result.ended_by,
            result.error or "",
            "",
            ",".join(call.source for call in result.tool_calls),
        ]
    if isinstance(result, PluginRunResult):
        label = f" ({result.label})" if result.label else ""
        return [
            f"{result.case} [{result.arm}]{label}",
            result.run,
            result.query,
            ",".join(result.tools),
            verdict,
            reasons,
            Usage.from_api(result.usage).total,
            f"{result.cost_usd + result.judge_cost_usd:.6f}",
            result.latency_ms,
            "",
            result.error or "",
            "",
            "",
        ]
    tokens = Usage.from_api(result.usage).total
    ended = "timeout" if result.timed_out else result.result_subtype or ""
    name = f"{result.test} [{result.configuration}]" if result.configuration else result.test
    return [
        name,
        result.run,
        result.query,
        ",".join(result.tools),
        verdict,
        reasons,
        tokens,
        f"{result.cost_usd:.6f}",
        result.latency_ms,
        ended,
        result.error or "",
        ",".join(result.activated_skills),
        "",
    ]


def write_results_csv(path: str, results: Results) -> None:
    """One row per run (seed 002's *_out.csv), for every mode."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(_RESULT_CSV_COLUMNS)
    for result in results.results():
        writer.writerow([csv_cell(value) for value in _csv_row(result)])
    write_text_atomic(path, buffer.getvalue())


def _junit_testcase(
    ET: Any, suite: Any, group: str, case: CaseResult, matrix: bool = False
) -> None:
    element = ET.SubElement(
        suite,
        "testcase",
        classname=xml_text(group),
        name=xml_text(case_label(case, matrix)),
        time=f"{case.seconds:.3f}",
    )
    if case.configuration:
        properties = ET.SubElement(element, "properties")
        ET.SubElement(
            properties, "property", name="configuration", value=xml_text(case.configuration)
        )
        ET.SubElement(properties, "property", name="pass_rate", value=f"{case.pass_rate:.4f}")
        ET.SubElement(properties, "property", name="gates", value=str(gates(case)).lower())
    if not case.passed:  # as the results' verdict says, baselines included
        detail = "\n".join(f"{reason} ({n}/{case.runs} runs)" for reason, n in case.reasons.items())
        baseline = "" if gates(case) else " (a baseline: reported, it does not fail the suite)"
        ET.SubElement(
            element,
            "error" if case.error else "failure",
            message=f"passed {case.passes}/{case.runs} runs{baseline}",
        ).text = xml_text(detail)
    ET.SubElement(element, "system-out").text = xml_text(
        f"prompt: {case.prompt}\npass rate: {case.passes}/{case.runs}\ncost: ${case.cost_usd:.4f}"
    )


def write_junit(path: str, results: Results) -> None:
    """JUnit XML: a testsuite per group (the suite, a skill's trigger queries, the tests), a
    testcase per case, test or trigger query, and the testcases a section gives (Section.junit),
    so CI systems show failures natively."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites")
    # group -> (its testsuite element, [tests, failures, errors, time])
    suites: dict[str, tuple[Any, list[float]]] = {}
    matrix = results.matrix
    for case in results.cases:  # a case at a time; each testsuite's counts added up as they come
        group = case.group or results.suite_name
        if group not in suites:
            suites[group] = (ET.SubElement(root, "testsuite", name=xml_text(group)), [0, 0, 0, 0.0])
        suite, counts = suites[group]
        counts[0] += 1
        counts[1] += not case.passed and not case.error
        counts[2] += not case.passed and bool(case.error)
        counts[3] += case.seconds
        _junit_testcase(ET, suite, group, case, matrix)
    for section in SECTIONS:  # a section's own testcases (a red team's attack classes)
        value = results.sections.get(section.key)
        if section.junit is not None and value is not None:
            for group, case in section.junit(value):
                if group not in suites:
                    element = ET.SubElement(root, "testsuite", name=xml_text(group))
                    suites[group] = (element, [0, 0, 0, 0.0])
                suite, counts = suites[group]
                counts[0] += 1
                counts[1] += not case.passed and not case.error
                counts[2] += not case.passed and bool(case.error)
                counts[3] += case.seconds
                _junit_testcase(ET, suite, group, case, matrix)
    for suite, (tests, failures, errors, seconds) in suites.values():
        suite.set("tests", str(int(tests)))
        suite.set("failures", str(int(failures)))
        suite.set("errors", str(int(errors)))
        suite.set("time", f"{seconds:.3f}")
    tree = ET.ElementTree(root)
    ET.indent(tree)
    buffer = __import__("io").BytesIO()
    tree.write(buffer, encoding="utf-8", xml_declaration=True)
    write_text_atomic(path, buffer.getvalue().decode("utf-8"))


def write_skill_creator_benchmark(path: str, results: Results) -> None:
    """--benchmark-json: skill-creator's benchmark.json (references/schemas.md), so its viewer
    reads our task runs: runs[] with result{pass_rate, passed, failed, total, time_seconds, tokens,
    tool_calls, errors} and expectations, run_summary per configuration with mean/stddev/min/max,
    and the delta as signed strings (with_skill − without_skill, else − old_skill)."""
    benchmark = results.sections.get("benchmark") or BenchmarkRecord()
    evals = {e.name: e for e in benchmark.evals}
    ids = {
        e.name: e.eval_id if isinstance(e.eval_id, int) else index
        for index, e in enumerate(benchmark.evals, 1)
    }
    runs = []
    for result in results.results():
        if (
            not isinstance(result, SkillRunResult)
            or not result.configuration
            or result.test not in evals
        ):
            continue
        passed = sum(1 for e in result.expectations if e.get("passed") is True)
        total = len(result.expectations)
        notes = ([f"error: {result.error}"] if result.error else []) + [
            f"refused: {r}" for r in result.refused_tools
        ]
        runs.append(
            {
                "eval_id": ids[result.test],
                "eval_name": result.test,
                "configuration": result.configuration,
                "run_number": result.run,
                "result": {
                    "pass_rate": round(passed / total, 4)
                    if total
                    else (0.0 if result.error else 1.0),
                    "passed": passed,
                    "failed": total - passed,
                    "total": total,
                    "time_seconds": round(result.latency_ms / 1000, 3),
                    "tokens": run_tokens(result),
                    "tool_calls": result.tool_count,
                    "errors": 1 if result.error else 0,
                },
                "expectations": [
                    {
                        "text": e.get("text", ""),
                        "passed": e.get("passed") is True,
                        "evidence": str(e.get("evidence") or e.get("error") or ""),
                    }
                    for e in result.expectations
                ],
                "notes": notes,
            }
        )
    summary: dict[str, Any] = {}
    for stats in benchmark.configurations:
        key = stats.configuration + (f" ({stats.model})" if stats.model else "")
        summary[key] = {
            name: dump_record(getattr(stats, name))
            for name in ("pass_rate", "time_seconds", "tokens")
        }
    delta = next((d for d in benchmark.deltas if d.baseline == "without_skill"), None) or next(
        iter(benchmark.deltas), None
    )
    if delta is not None:
        summary["delta"] = {
            "pass_rate": signed(delta.pass_rate, 2),
            "time_seconds": signed(delta.time_seconds, 1),
            "tokens": signed(delta.tokens, 0),
        }
    meta = results.metadata
    document = {
        "metadata": {
            "skill_name": benchmark.skill_name,
            "skill_path": "",
            "executor_model": meta.test_model,
            "analyzer_model": benchmark.judge_model,
            "timestamp": meta.generated_at,
            "evals_run": list(ids.values()),
            "runs_per_configuration": benchmark.runs_per_configuration,
        },
        "runs": runs,
        "run_summary": summary,
        "notes": [
            f"delta against {d.baseline}" + (f" ({d.model})" if d.model else "") + ": pass rate "
            f"{signed(d.pass_rate, 2)}, time {signed(d.time_seconds, 1)}s, tokens {signed(d.tokens, 0)}"
            for d in benchmark.deltas
        ],
    }
    write_json_atomic(path, json.loads(json_text(document)))


# Option name -> writer. Every mode that produces verdicts gets every writer; a new report
# format is one entry here (and one click option).
def print_results_json(flag: Any, results: Results) -> None:
    dump_json(results.document(), sys.stdout)
    sys.stdout.write("\n")


def write_comparison_json(path: str, comparisons: Sequence[Comparison]) -> None:
    write_json_atomic(path, comparison_json(comparisons))


def write_comparison_markdown(path: str, comparisons: Sequence[Comparison]) -> None:
    write_text_atomic(path, "\n".join(render_comparison(c) for c in comparisons))


def write_comparison_html(path: str, comparisons: Sequence[Comparison]) -> None:
    write_text_atomic(path, render_html(html_comparison_data(comparisons)))


def print_comparison_json(flag: Any, comparisons: Sequence[Comparison]) -> None:
    click.echo(json_text(comparison_json(comparisons)))


def _write_one(
    writer: Writer, value: Any, write: Callable[[], None], outputs: Outputs, console: Console
) -> None:
    """One output; a full disk says where the finished runs are kept."""
    try:
        write()
    except OutputError as exc:
        journal = journal_path(outputs.output) if outputs.output else None
        if journal is None or not journal.exists():
            raise
        raise OutputError(
            f"{exc}; every finished run is in {journal}: make room and rerun with --resume"
        ) from None
    if writer.takes_path:
        console.print(wrote_line(value), highlight=False, markup=False)


def write_outputs(results: Results, outputs: Outputs, console: Console) -> None:
    """Every output asked for, in WRITERS' order, and what GitHub Actions reads from the step
    when it runs in one (GITHUB_SINKS): all of them redacted."""
    results = results.redacted()
    for sink in GITHUB_SINKS:
        if sink.active():
            sink.results(results, outputs, console)
    for writer in WRITERS:
        value = outputs.writers.get(writer.name)
        if value:
            _write_one(
                writer, value, functools.partial(writer.write, value, results), outputs, console
            )


def write_comparisons(
    comparisons: Sequence[Comparison], outputs: Outputs, console: Console
) -> None:
    for sink in GITHUB_SINKS:
        if sink.active():
            sink.comparisons(comparisons, outputs, console)
    for writer in WRITERS:
        value = outputs.writers.get(writer.name)
        if value and writer.compare is not None:
            _write_one(
                writer,
                value,
                functools.partial(writer.compare, value, comparisons),
                outputs,
                console,
            )
