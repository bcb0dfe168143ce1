"""The hostile room's modes: redteam (the suite under attack) and scan (every definition).

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..dry_run import CostEstimate, print_estimate
from ..errors import InputError
from ..finished_run import Results, summary_record
from ..hub.calls import McpHub
from ..hub.pins import PinsChanged, check_pins
from ..loaders.csv_suites import filter_by_tags, load_csv_suite
from ..pipeline import PipelineOutcome
from ..redaction import Redactor
from ..results_schema.security import ScanJudgementRecord, ScanRecord, SecurityRecord
from ..run_types import Usage
from ..runners.tool_use import tool_policy_for
from ..scoring.scan import (
    Definition,
    listed_read,
    scan_case_results,
    scan_definitions,
    tool_read,
)
from ..scoring.scan_judge import judge_definitions, judge_findings, judge_request, judged_price
from ..scoring.statistics import RunTotals, case_counts
from ..scoring.suites import QaScoring, SuiteScoring, ToolCheckScoring
from ..session import model_client
from ..stopping import run_async
from ..writers.formats import write_outputs
from ..writers.hostile import scan_verdict
from ..writers.terminal import print_summary
from .common import require_api_key, run_metadata, servers_for
from .tool_suites import check_tool_options, qa_suite, query_cases, tool_use_mode

__all__ = [
    "redteam_mode",
    "scan_mode",
]

if TYPE_CHECKING:
    from ..results_schema.security import PinRecord
    from ..settings import Settings


def redteam_mode(settings: Settings, console: Console) -> int:
    """redteam SUITE (--redteam): the suite (--csv, --qa or -q) clean and under attack, through
    the adversarial proxies; the `security` section holds the figures."""
    inputs = settings.inputs
    if inputs.tag and not inputs.csv:
        raise InputError("--tag picks CSV cases", hint="give the suite with --csv FILE")
    if inputs.answer_match and not inputs.qa:
        raise InputError("--answer-match applies to a QA evaluation", hint="give --qa FILE.xml")
    if inputs.csv:
        cases = filter_by_tags(load_csv_suite(inputs.csv), inputs.tag)
        scoring: Any = SuiteScoring(cases, True)
        input_type, name = "csv", Path(inputs.csv).stem
    elif inputs.qa:
        cases, settings, name = qa_suite(settings)
        scoring, input_type = QaScoring(cases), "qa"
    elif inputs.query is not None:
        cases, input_type = query_cases(settings)
        scoring, name = ToolCheckScoring(cases, False), "query"
    else:
        raise InputError(
            "redteam needs a suite to attack",
            hint="redteam examples/test_queries.csv, or --qa FILE.xml, or -q QUERY",
        )
    return tool_use_mode(settings, console, cases, scoring, "redteam", input_type, name)


def _judged(
    settings: Settings,
    console: Console,
    definitions: list[Definition],
    record: ScanRecord,
    redactor: Redactor,
) -> bool:
    """scan --judge: the judge's price shown, then (unless --dry-run, which stops here: False)
    every definition judged until --max-cost is spent, through --cache; its verdicts are findings
    (reader "judge") in `record`, beside the static ones."""
    model_name = settings.grading.judge_model
    ordered = sorted(definitions, key=lambda d: (d.server, d.kind != "tool", d.kind, d.name))
    chosen = ordered if settings.hostile.judge else []
    requests = [judge_request(d, model_name, redactor.text) for d in chosen]
    about, most = judged_price(requests, model_name)
    console.print(
        f"scan: the judge reads {len(chosen)} definition(s) on {model_name}: about ${about:.4f} "
        f"(at most ${most:.4f})",
        highlight=False,
        markup=False,
    )
    if settings.run_plan.dry_run:
        n = len(requests)
        detail = f"{n} definition(s) for the judge"
        print_estimate(console, CostEstimate(n, model_name, n, n, about, most, detail))
        return False
    require_api_key()

    async def judge() -> tuple[list[ScanJudgementRecord], int]:
        model = model_client(settings.run_plan.cache, **settings.api.client_options())
        try:
            return await judge_definitions(
                chosen, model, model_name, settings.run_plan.max_cost, redactor.text
            )
        finally:
            await model.close()

    record.judged, record.not_judged = run_async(judge())
    record.judge_model = model_name
    record.cost_usd = round(sum(j.cost_usd for j in record.judged), 6)
    record.findings += judge_findings(record.judged, model_name)
    return True


def scan_mode(settings: Settings, console: Console) -> int:
    """scan (--scan): every definition of the servers a model reads (tools, resources, resource
    templates, prompts, instructions; or --replay's cassette's tools) checked by SCAN_CHECKS and
    across definitions, a case per definition; no model call. Exit 1 on a finding at or above --fail-on
    (or a changed pin)."""
    check_tool_options(settings)
    servers = servers_for(settings, needs_key=False)
    redactor = Redactor.for_run(servers)
    policy = tool_policy_for(
        settings.tool_safety,
        redactor,
        servers_named=settings.servers.named,
        dry_run=settings.run_plan.dry_run,
    )

    async def listed() -> tuple[list[Definition], PinRecord | None]:
        async with McpHub(
            servers, settings.servers.tool_timeout, settings.servers.max_result_chars, policy=policy
        ) as hub:
            pins = None
            if settings.pins.pin:
                try:
                    pins = check_pins(
                        settings.pins.pin, hub.tools.values(), settings.pins.update_pins, False
                    )
                except PinsChanged as exc:
                    pins = exc.record
            others = await hub.beyond_tools()
            definitions = [tool_read(t) for t in hub.tools.values()]
            definitions += [
                listed_read(server, listing)
                for server, listings in others.items()
                for listing in listings
            ]
            return definitions, pins

    definitions, pins = run_async(listed())
    record = scan_definitions(definitions, settings.hostile.fail_on)
    if settings.hostile.judge or settings.run_plan.dry_run:
        if not _judged(settings, console, definitions, record, redactor):
            return 0  # --dry-run: the price shown, nothing spent or written
    cases = scan_case_results(definitions, record)
    outcome = PipelineOutcome([], [], not_started=record.not_judged)
    totals = RunTotals()
    for judgement in record.judged:
        totals.add(Usage(), judgement.cost_usd, 0.0, bool(judgement.error))
    summary = summary_record(case_counts(cases), totals, 1.0, outcome)
    summary.cost_usd = record.cost_usd
    results = Results(
        run_metadata("scan", settings, 0, outcome),
        all(c.passed for c in cases) and not (pins and pins.failed) and not record.not_judged,
        summary,
        cases,
        lambda: (),
        0,
        {"security": SecurityRecord(scan=record, pins=pins)},
        "scan",
    )
    if record.not_judged:
        console.print(
            f"[yellow]stopped at --max-cost ${settings.run_plan.max_cost:g}[/yellow]: "
            f"{record.not_judged} definition(s) not judged",
            highlight=False,
        )
    write_outputs(results, settings.outputs, console)
    print_summary(console, results, scan_verdict(record, cases, pins), runs_table=False)
    return 0 if results.passed else 1
