"""The tool-use modes: a query or conversation, CSV suites, QA evaluations, markdown tests
against the servers.

May import: the rooms above the modes, modes.common."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import test_constants as C

from ..dry_run import print_estimate, print_run_plan
from ..errors import InputError, UsageProblem
from ..files import SpooledRecords, read_text_file
from ..finished_run import Results, summary_record
from ..grading import needs_judge
from ..hub.pins import PinsChanged, definition_sha256, tool_definition
from ..loaders.conversations import conversation_case
from ..loaders.csv_suites import (
    filter_by_names,
    filter_by_tags,
    load_csv_suite,
    load_tool_overrides,
)
from ..loaders.labels import flagged_graders
from ..loaders.qa import load_qa_suite
from ..loaders.servers import wrong_file
from ..loaders.skills import kind_of_test_file, load_markdown_tests
from ..pipeline import PipelineOutcome, jobs_to_run
from ..results_schema.document import CaseResult, ToolInfoRecord, tool_run_result
from ..results_schema.security import SecurityRecord
from ..run_types import TestCase
from ..runners.claude_harness import HARNESS_CLAUDE_CODE
from ..runners.crowd import (
    ToolCrowd,
    combined_cost,
    print_decoy_estimate,
    print_step_costs,
)
from ..runners.redteam import RedTeam, RedTeamScoring
from ..scoring.calibration import TOOL_USE_JUDGE
from ..scoring.harness import HarnessTally
from ..scoring.statistics import CaseCounts, RunTotals, tool_coverage, tools_expected
from ..scoring.suites import AnswerScoring, QaScoring, SuiteScoring, ToolCheckScoring
from ..scoring.verdicts import model_matrix
from ..stopping import run_async
from ..writers.formats import write_outputs
from ..writers.hostile import print_attack_costs, print_pins
from ..writers.terminal import (
    LiveConversationView,
    RunProgress,
    print_cache_saving,
    print_run_summary,
    print_summary,
    print_tool_table,
)
from .common import (
    check_auto_runs,
    check_crowd_options,
    exit_code,
    import_sdks,
    run_metadata,
    run_suite,
    servers_for,
    start_servers_early,
    tool_use_runner,
    user_source,
)

__all__ = [
    "check_tool_options",
    "csv_mode",
    "markdown_mode",
    "markdown_tool_cases",
    "qa_mode",
    "qa_suite",
    "query_cases",
    "query_mode",
    "tool_use_mode",
    "tool_use_results",
]

if TYPE_CHECKING:
    from ..results_schema.security import PinRecord, RedTeamRecord
    from ..run_types import SkillTest
    from ..runners.tool_use import ToolUseRunner
    from ..scoring.suites import Scoring
    from ..settings import Settings


def query_cases(settings: Settings) -> tuple[list[TestCase], str]:
    """-q, -c (with -q as a follow-up), or nothing: then the (terminal or simulated) user opens."""
    inputs, goal = settings.inputs, settings.user_simulation.simulate_user
    if inputs.interactive and goal is not None:
        raise InputError(
            "--interactive and --simulate-user exclude each other",
            hint="a conversation has one user: you at the terminal, or the simulated one",
        )
    if goal is not None and not goal.strip():
        raise InputError(
            "--simulate-user needs a goal",
            hint='e.g. --simulate-user "find my LTV model\'s inputs"',
        )
    if inputs.conversation:
        return [conversation_case(inputs.conversation, inputs.query)], "conversation"
    if inputs.query is not None:
        if not inputs.query.strip():
            raise InputError("the query is empty", hint='give -q "what to ask Claude"')
        return [TestCase(name="query", prompt=inputs.query)], "query"
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


def _check_batchable(settings: Settings, cases: Sequence[TestCase]) -> None:
    """--batch sends Claude's calls in rounds: nobody can answer Claude between two of them."""
    if not settings.run_plan.batch:
        return
    if settings.run_plan.cache:
        raise UsageProblem(
            "--cache does not apply with --batch: batched calls are priced at the batch discount, "
            "and a cached answer would mix the two prices (give one of them)"
        )
    if settings.inputs.interactive:
        raise UsageProblem(
            "--batch does not apply to --interactive runs: you answer Claude as it writes, "
            "one call at a time"
        )
    if settings.user_simulation.simulate_user is not None:
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


def _restore_scoring(scoring: Scoring, settings: Settings) -> None:
    """--merge: the tools the pieces' servers offered (for tool coverage). Each run keeps the
    verdict its piece gave it (replay_pipeline reads it back with the run): the tools' schemas
    that graded it are not at hand here."""
    available: list[str] = next(
        (
            p.summary.tool_coverage.available
            for p in settings.merging.merged_pieces
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
    threshold, summary_only = settings.run_plan.threshold, settings.outputs.summary_only
    counts = CaseCounts()
    cases = SpooledRecords(CaseResult)
    harness = HarnessTally()  # --harness claude-code: what Claude Code's room did
    for case in scoring.case_results(
        harness.observed(runs.observed(outcome.records)), threshold, suite_name
    ):
        cases.append(case)
        counts.add(case)
        harness.add_case(case)
    summary = summary_record(counts, runs, threshold, outcome)
    summary.tool_coverage = runs.coverage(
        sorted(getattr(scoring, "tools", {})), tools_expected(getattr(scoring, "cases", []))
    )
    summary.tool_calls_by_source = runs.by_source()
    simulation = settings.user_simulation
    simulated = (
        {
            "goal": simulation.simulate_user,
            "model": simulation.user_model,
            "max_user_turns": simulation.max_user_turns,
        }
        if simulation.simulate_user
        else None
    )
    metadata = run_metadata(
        mode,
        settings,
        0 if summary_only else runs.runs,
        outcome,
        input_type=input_type,
        simulated_user=simulated,
        tool_overrides=load_tool_overrides(overrides)
        if (overrides := settings.descriptions.tool_overrides)
        else None,
    )
    passed = (
        counts.cases > 0
        and counts.passed == counts.cases
        and not outcome.not_started
        and not outcome.interrupted
    )
    sections = scoring.sections()
    claude_code = harness.record()
    if claude_code is not None:
        sections["claude_code"] = claude_code
    if settings.matrix:
        sections["matrix"] = model_matrix(cases, runs, counts, settings.api.models)
    flags = flagged_graders(
        ("", TOOL_USE_JUDGE) for c in getattr(scoring, "cases", []) if needs_judge(c)
    )
    if flags:  # judge graders an earlier calibrate put below their floor
        sections["judge_flags"] = flags
    return Results(
        metadata,
        passed,
        summary,
        cases,
        lambda: (
            () if summary_only else outcome.results(lambda t: tool_run_result(t, scoring.verdict))
        ),
        0 if summary_only else runs.runs,
        sections,
        suite_name,
    )


def _tool_policy_metadata(settings: Settings, runner: ToolUseRunner) -> dict[str, Any]:
    policy, hub = runner.tool_policy, runner.hub
    tools = (
        [
            ToolInfoRecord(
                name=t.name,
                server=t.server,
                annotations=t.annotations,
                calls=policy.treatment(t),
                definition_sha256=definition_sha256(tool_definition(t)),
            )
            for t in sorted(hub.tools.values(), key=lambda t: t.name)
        ]
        if hub
        else None
    )
    safety = settings.tool_safety
    return {
        "tool_policy": safety.tool_policy,
        "allowed_tools": list(safety.allow_tool),
        "mock_tools": safety.mock_tools,
        "replay": safety.replay,
        "record": safety.record,
        "tools": tools,
    }


def _check_harness(settings: Settings) -> None:
    """Before any spend: what a Claude Code run cannot do yet is one line, exit 2."""
    if HARNESS_CLAUDE_CODE not in settings.claude_code.harness:
        for name in ("tool_search", "mcp_startup", "claude_bin"):
            if name in settings.given:
                raise InputError(
                    f"--{name.replace('_', '-')} applies to runs through Claude Code",
                    hint="add --harness claude-code",
                )
        return
    refused = [
        (settings.run_plan.batch, "--batch"),
        (
            settings.inputs.interactive or settings.user_simulation.simulate_user is not None,
            "a simulated or live user",
        ),
        (bool(settings.descriptions.tool_overrides), "--tool-overrides"),
    ]
    for given, what in refused:
        if given:
            raise InputError(
                f"--harness claude-code does not run with {what} yet",
                hint="run that part through the API harness (--harness api)",
            )


def check_tool_options(settings: Settings) -> None:
    """The pins', --resume's and the cassette's options together."""
    plan = settings.run_plan
    if settings.pins.update_pins and not settings.pins.pin:
        raise InputError("--update-pins updates the file --pin names", hint="add --pin tools.lock")
    if plan.accept_changed_tools and not (plan.resume or plan.retry_errors):
        raise InputError(
            "--accept-changed-tools keeps the runs --resume or --retry-errors would keep",
            hint="add --resume -o FILE, or leave it out",
        )
    if "replay_miss" in settings.given and not settings.tool_safety.replay:
        raise InputError(
            "--replay-miss applies to --replay", hint="e.g. --replay cassettes/ --replay-miss live"
        )


def _pins_failed(
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
    if not settings.run_plan.dry_run:
        write_outputs(results, settings.outputs, console)
    print_summary(console, results)
    return 1


def _redteam_passed(results: Results, record: RedTeamRecord, redteam: RedTeam) -> bool:
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
    api, plan, merging = settings.api, settings.run_plan, settings.merging
    # the options together, before a server starts or a decoy is written
    _check_batchable(settings, cases)
    check_crowd_options(settings)
    check_tool_options(settings)
    check_auto_runs(settings)
    _check_harness(settings)
    user_for = user_source(settings, console)
    redteam = (  # bad --vectors: no server
        RedTeam(settings.hostile, cases, api, plan, settings.grading, settings.servers)
        if settings.hostile.redteam
        else None
    )
    servers = servers_for(settings) if not merging.merge else []
    crowd = (
        ToolCrowd(settings.crowd, cases, servers, console, api, plan, settings.servers)
        if settings.crowd.distractor_tools
        else None
    )
    if crowd is not None:
        servers = crowd.prepare(servers)
        cases = scoring.cases = crowd.expand(crowd.total)
    if redteam is not None:
        scoring, cases = RedTeamScoring(scoring, redteam), redteam.cases
    interactive = settings.inputs.interactive
    view = LiveConversationView(console, api.max_turns) if interactive else None
    runner = tool_use_runner(
        settings,
        cases,
        servers,
        user_for=user_for,
        observer=view,
        on_connect=scoring.connected,
        verdict_of=scoring.verdict,
        console=console,
    )
    runner.crowd, runner.redteam = crowd, redteam
    if merging.merge:
        _restore_scoring(scoring, settings)
    else:
        import_sdks(plan.dry_run)
    if plan.dry_run:
        todo = jobs_to_run(runner, plan, settings.outputs.output)
        try:
            if crowd is not None:
                steps = run_async(crowd.estimate(runner, todo))
                print_estimate(
                    console,
                    combined_cost(
                        [c for _, c in steps], api.model, steps[0][1].detail if steps else ""
                    ),
                )
                print_step_costs(console, steps, "distractor tools")
                print_decoy_estimate(console, crowd.keeper)
            elif redteam is not None:
                parts = run_async(redteam.estimate(runner, todo))
                print_estimate(
                    console,
                    combined_cost(
                        [c for _, c in parts], api.model, parts[0][1].detail if parts else ""
                    ),
                )
                print_attack_costs(console, parts)
            else:
                print_estimate(console, run_async(runner.estimate(todo)))
            print_run_plan(
                console,
                plan.auto_runs[0] if plan.auto_runs else plan.iterations,
                plan.auto_runs[1] if plan.auto_runs else None,
            )
        except PinsChanged as exc:
            return _pins_failed(
                exc.record, settings, console, scoring, mode, input_type, suite_name
            )
        if runner.hub is not None:
            print_tool_table(console, runner.hub.tools, runner.tool_policy)
        if runner.pins is not None:
            print_pins(console, runner.pins)
        return 0
    if crowd is not None and crowd.keeper.cost and plan.max_cost is not None:
        plan = replace(plan, max_cost=max(0.0, plan.max_cost - crowd.keeper.cost))
        settings = replace(settings, run_plan=plan)
    progress = (
        None
        if interactive or mode == "query" or merging.merge
        else RunProgress(
            console,
            None,
            scoring.verdict,
            lambda t: (t.usage, t.cost_usd),
            redteam.breached if redteam else None,
            lazy=True,
        )
    )
    try:
        with progress or contextlib.nullcontext():
            outcome = run_suite(
                runner,
                settings,
                console,
                on_record=(
                    view.on_conversation_end if view else progress.on_record if progress else None
                ),
                on_count=progress.set_total if progress else None,
                on_start=progress.begin if progress else None,
                verdict=scoring.verdict,
            )
    except PinsChanged as exc:
        return _pins_failed(exc.record, settings, console, scoring, mode, input_type, suite_name)
    results = tool_use_results(settings, outcome, scoring, mode, input_type, suite_name)
    results.metadata = results.metadata.model_copy(update=_tool_policy_metadata(settings, runner))
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
        results.passed = _redteam_passed(results, security.redteam, redteam)
    write_outputs(results, settings.outputs, console)
    outcome.finish()
    if mode == "query" and not interactive:  # the live view showed it as it ran
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
    suite = settings.inputs.csv
    if not suite:
        raise InputError("--csv needs a suite file", hint="--csv tests.csv")
    cases = filter_by_names(
        filter_by_tags(load_csv_suite(suite), settings.inputs.tag), settings.run_plan.keyword
    )
    return tool_use_mode(
        settings,
        console,
        cases,
        SuiteScoring(cases, True),
        "csv",
        "csv",
        Path(suite).stem,
    )


def qa_suite(settings: Settings) -> tuple[list[TestCase], Settings, str]:
    """A QA evaluation's cases, the settings it runs with (its own system prompt and --max-turns
    unless they are given) and its name."""
    inputs = settings.inputs
    files = ([inputs.qa] if inputs.qa else []) + list(inputs.tests)
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
    cases = list(filter_by_names(every_case, settings.run_plan.keyword))
    if inputs.answer_match:
        cases = [replace(case, answer_match=inputs.answer_match) for case in cases]
    api = settings.api
    api = replace(
        api,
        max_turns=api.max_turns if "max_turns" in settings.given else C.DEFAULT_QA_MAX_TURNS,
        prompt=api.prompt if "prompt" in settings.given else "QA_SYSTEM_PROMPT",
    )
    settings = replace(settings, api=api)
    return cases, settings, Path(files[0]).stem


def qa_mode(settings: Settings, console: Console) -> int:
    """--qa FILE.xml (or --tests FILE.xml): mcp-builder's QA evaluation against the servers, with
    its own system prompt and --max-turns unless they are given."""
    start_servers_early(settings)
    cases, settings, name = qa_suite(settings)
    return tool_use_mode(settings, console, cases, QaScoring(cases), "qa", "qa", name)


def markdown_mode(settings: Settings, console: Console) -> int:
    """--tests without --skill: knowledge / task / security tests against the MCP servers."""
    start_servers_early(settings)
    tests = [t for target in settings.inputs.tests for t in load_markdown_tests(target)]
    keyword = settings.run_plan.keyword
    if keyword:
        named = {c.name for c in filter_by_names(markdown_tool_cases(tests), keyword)}
        tests = [t for t in tests if t.name in named]
    cases = markdown_tool_cases(tests)
    return tool_use_mode(
        settings, console, cases, AnswerScoring(tests, cases), "markdown", "markdown", "tests"
    )
