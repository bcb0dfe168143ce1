"""The modes over results files and drafts: generate, compare, plan, render, schema.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

import test_constants as C

from ..dry_run import print_estimate
from ..errors import EvalError, FatalApiError, InputError
from ..files import write_json_atomic, write_text_atomic
from ..finished_run import case_label, is_matrix
from ..loaders.skills import load_markdown_test, load_skill
from ..options import WRITERS
from ..redaction import error_line
from ..results_schema.document import read_results_document, results_schema
from ..runners.generate import estimate_generation, generate_skill_tests, generation_model
from ..scoring.statistics import detectable_change, runs_to_detect, shifted_rate
from ..session import check_model_endpoint
from ..settings import project_model
from ..sinks import escape_markup, terminal_text, wrote_line
from ..stopping import run_async
from ..writers.comparison import compare_files, counted_runs, print_comparison
from ..writers.formats import write_comparisons, write_outputs
from ..writers.html import results_from_document
from ..writers.markdown import percent
from .common import require_api_key

__all__ = [
    "compare_mode",
    "generate_mode",
    "plan_mode",
    "render_mode",
    "schema_mode",
]

if TYPE_CHECKING:
    from ..run_types import SkillInfo
    from ..settings import Settings, Statistics


def _generated_file_names(skill: SkillInfo, full: bool) -> list[str]:
    kinds = ("trigger", "knowledge", "task", "security") if full else ("trigger",)
    return [f"{skill.name}-{kind}.md" for kind in kinds]


def _generation_targets(settings: Settings, skill: SkillInfo, full: bool) -> list[Path]:
    """Where the drafts go; an existing file is overwritten only with --force."""
    output = settings.outputs.output
    if full and not output:
        raise InputError(
            "--generate-tests needs -o DIR", hint="the folder the four test files go into"
        )
    if not output:
        return []
    if full and Path(output).exists() and not Path(output).is_dir():
        raise InputError("-o must be a folder for --generate-tests", output)
    targets = (
        [Path(output) / name for name in _generated_file_names(skill, full)]
        if full
        else [Path(output)]
    )
    existing = next((t for t in targets if t.exists()), None)
    if existing and not settings.drafting.force:
        raise InputError(
            "the file exists", existing, hint="add --force to overwrite it, or choose another -o"
        )
    return targets


def _check_generated_files(files: dict[str, str]) -> None:
    """What we write must load back as it is."""
    with tempfile.TemporaryDirectory() as scratch:
        for name, text in files.items():
            (Path(scratch) / name).write_text(text, encoding="utf-8")
            try:
                load_markdown_test(Path(scratch) / name)
            except InputError as exc:
                raise EvalError(f"generated {name} does not load: {exc.message}") from None


def generate_mode(settings: Settings, console: Console) -> int:
    """--generate-triggers SKILL.md [-o FILE.md] / --generate-tests SKILL.md -o DIR."""
    drafting, plan = settings.drafting, settings.run_plan
    full = drafting.generate_tests is not None
    if len(settings.api.models) > 1:
        raise InputError("--generate-* drafts with one model", hint="give --model once")
    if full and drafting.generate_triggers:
        raise InputError("give either --generate-triggers or --generate-tests, not both")
    source = drafting.generate_tests or drafting.generate_triggers
    if not source:
        raise InputError("--generate-triggers and --generate-tests need a skill", hint="a SKILL.md")
    skill = load_skill(source)
    targets = _generation_targets(settings, skill, full)
    model = generation_model(settings.api, "model" in settings.given)
    estimate = estimate_generation(skill, drafting.generate_count, full, model)
    if plan.dry_run:
        print_estimate(console, estimate)
        return 0
    if plan.max_cost is not None and estimate.cost_max > plan.max_cost:
        console.print(
            f"[yellow]stopped at --max-cost ${plan.max_cost:g}[/yellow]: the generation call could "
            f"cost up to ${estimate.cost_max:.4f}; nothing was sent",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    require_api_key()
    check_model_endpoint(settings.api.base_url)
    try:
        files, spent = run_async(
            generate_skill_tests(skill, drafting.generate_count, settings.api, model, full)
        )
        _check_generated_files(files)
    except FatalApiError:
        raise
    except EvalError as exc:  # the model's answer was unusable: one line, exit 1, nothing written
        click.echo(error_line(exc), err=True)
        return 1
    console.print(f"generation cost ${spent:.4f}", highlight=False)
    if not targets:
        drafted = next(iter(files.values()))  # for a file when redirected, for eyes on a terminal
        click.echo(
            terminal_text(drafted, multiline=True) if sys.stdout.isatty() else drafted, nl=False
        )
        return 0
    for target, text in zip(targets, files.values()):
        write_text_atomic(target, text)
        console.print(wrote_line(target), highlight=False, markup=False)
    return 0


def compare_mode(settings: Settings, console: Console) -> int:
    """--compare OLD NEW [NEWER ...]: each file against the one before; exit 1 on any
    regression, suspected regression (every run passed before, every run fails now: unless
    --significant-only) or removed case."""
    if len(settings.statistics.compare) < 2:
        raise InputError(
            "--compare needs at least two results files", hint="--compare old.json new.json"
        )
    statistics = settings.statistics
    comparisons = compare_files(statistics.compare, statistics.alpha, statistics.significant_only)
    write_comparisons(comparisons, settings.outputs, console)
    if not settings.outputs.json_out:
        for comparison in comparisons:
            print_comparison(console, comparison)
    return 1 if any(c.failed for c in comparisons) else 0


@dataclass
class _CasePlan:
    """One case's run count: its pass rate, the runs it has, what they detect, what would."""

    name: str
    rate: float
    runs: int  # 0: an assumed rate
    needed: int | None  # runs per case that detect the change asked for (None: none can)
    detects_now: float | None  # the smallest change its runs detect now


def _plan_case(name: str, rate: float, runs: int, change: float, alpha: float) -> _CasePlan:
    return _CasePlan(
        name,
        rate,
        runs,
        runs_to_detect(rate, shifted_rate(rate, change), alpha),
        detectable_change(rate, runs, alpha) if runs else None,
    )


def _plan_rows(statistics: Statistics, from_results: str | None) -> list[_CasePlan]:
    change = statistics.detect / 100
    if not from_results:
        rate = C.PLAN_ASSUMED_RATE if statistics.rate is None else statistics.rate
        return [_plan_case("every case (assumed rate)", rate, 0, change, statistics.alpha)]
    if statistics.rate is not None:
        raise InputError(
            "--rate is the pass rate assumed without a results file, and one is given",
            hint="give a results file (its cases' own rates) or --rate, not both",
        )
    document = read_results_document(from_results)
    matrix = is_matrix(document.cases)
    return [
        _plan_case(
            case_label(case, matrix),
            case.passes / counted_runs(case) if counted_runs(case) else C.PLAN_ASSUMED_RATE,
            counted_runs(case),
            change,
            statistics.alpha,
        )
        for case in document.cases
    ]


def plan_mode(settings: Settings, console: Console) -> int:
    """plan [RESULTS.json]: the runs per case that detect a change of --detect points with 80 %
    power at --alpha (the textbook sample size for two proportions), from each case's pass rate
    in the results file, or from --rate; and the smallest change each case's runs detect now."""
    statistics = settings.statistics
    rows = _plan_rows(statistics, settings.inputs.from_results)
    table = Table(
        title=f"Runs per case that detect a change of {statistics.detect:g} points "
        f"({C.PLAN_POWER:.0%} power, alpha {statistics.alpha:g})"
    )
    for header in ("Case", "Pass rate", "Runs now", "Detects now", "Runs needed"):
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(
            escape_markup(row.name),
            percent(row.rate),
            str(row.runs) if row.runs else "-",
            f"{row.detects_now * 100:.0f} pts" if row.detects_now is not None else "-",
            str(row.needed) if row.needed else "-",
        )
    console.print(table)
    most = max((row.needed for row in rows if row.needed), default=None)
    if most:
        console.print(
            f"plan: -i {most} (--runs {most} for skills) detects a change of {statistics.detect:g} "
            f"points in every case listed; -i auto stops each case once it is decided",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    return 0


def render_mode(settings: Settings, console: Console) -> int:
    """render RESULTS.json (--from): the reports of a finished run, written from its results
    file, which is checked against the schema first; nothing runs."""
    if not settings.outputs.writers:
        flags = ", ".join(w.option.flag for w in WRITERS if w.renders_from)
        raise InputError(
            "render needs an output to write",
            hint=f"e.g. render results.json --html report.html (any of {flags})",
        )
    if not settings.inputs.from_results:
        raise InputError(
            "--from needs a results file", hint="--from results.json --html report.html"
        )
    results = results_from_document(
        read_results_document(settings.inputs.from_results), settings.inputs.from_results
    )
    write_outputs(results, settings.outputs, console)
    return 0


def schema_mode(settings: Settings, console: Console) -> int:
    """schema [results|project] (--schema): the JSON Schema of the results file, or of the
    project file, to stdout or -o FILE."""
    schema = (
        project_model().model_json_schema()
        if settings.inputs.schema_of == "project"
        else results_schema()
    )
    if settings.outputs.output:
        write_json_atomic(settings.outputs.output, schema)
        console.print(wrote_line(settings.outputs.output), highlight=False, markup=False)
    else:
        click.echo(json.dumps(schema, indent=2))
    return 0
