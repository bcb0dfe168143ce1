"""The records of the sections the modes add to a results document: QA, the description
optimizer, the model matrix, tool discovery and server readiness, the Claude Code harness, the
literature benchmarks, the crowd and the skills' overlap. Each is the `record` of one SECTIONS row.

May import: the foundations and the results document's own records."""

from __future__ import annotations

from typing import Literal

from ..run_types import Usage
from .document import Record, ToolStatsRecord, ToolTimeRecord

__all__ = [
    "CalibrationRecord",
    "ClaudeCodeRecord",
    "ConsolidationHintRecord",
    "CrowdPointRecord",
    "CrowdingRecord",
    "DistractorRecord",
    "GraderAgreementRecord",
    "HarnessCaseRecord",
    "LiteratureFigure",
    "LiteratureRecord",
    "MatrixCaseRecord",
    "MatrixCellRecord",
    "MatrixToolCellRecord",
    "MatrixToolRecord",
    "ModelMatrixRecord",
    "ModelSummaryRecord",
    "OptimizationRecord",
    "OptimizationRoundRecord",
    "OverlapPairRecord",
    "OverlapRecord",
    "QaRecord",
    "QaRunRecord",
    "QaTaskRecord",
    "ServerReadinessRecord",
    "SplitRecord",
    "ThiefRecord",
    "ToolDiscoveryRecord",
]


class QaRunRecord(Record):
    """One run of one QA task: the answer compared, whether it was right, and Claude's notes."""

    iteration: int
    correct: bool
    answer: str | None = None  # the last <response> (else the final text); None when the run failed
    reasons: list[str] = []
    seconds: float = 0.0
    tool_calls: int = 0
    tools: list[ToolTimeRecord] = []
    summary: str | None = None  # Claude's <summary> of its steps
    feedback: str | None = None  # Claude's <feedback> on the tools
    error: str | None = None
    model: str | None = None


class QaTaskRecord(Record):
    """One <qa_pair> over its runs."""

    name: str
    question: str
    expected: str
    answer_match: str = "exact"
    runs: int = 0
    correct: int = 0
    accuracy: float = 0.0
    interval: tuple[float, float] = (0.0, 1.0)
    mean_seconds: float = 0.0
    tool_calls: int = 0  # over all its runs
    tools: list[ToolTimeRecord] = []
    results: list[QaRunRecord] = []


class QaRecord(Record):
    """--qa: mcp-builder's report over every run: accuracy (correct runs / runs) with its 95 %
    Wilson interval, durations, tool calls, and per task the expected and given answers."""

    tasks: int
    runs: int
    correct: int
    accuracy: float
    interval: tuple[float, float] = (0.0, 1.0)
    mean_task_seconds: float = 0.0
    mean_tool_calls: float = 0.0
    tool_calls: int = 0
    tools: list[ToolTimeRecord] = []
    task_results: list[QaTaskRecord] = []


class SplitRecord(Record):
    """--optimize: one query or case, its stratum and its split."""

    item: str
    stratum: str
    split: str  # train | test


class OptimizationRoundRecord(Record):
    """--optimize: one candidate; round 0 is the original."""

    round: int
    status: Literal[
        "scored", "dropped", "incomplete"
    ]  # scored | dropped (invalid twice) | incomplete (--max-cost, Ctrl-C)
    descriptions: dict[str, str] = {}  # what differs from the original (round 0: the original)
    train_passed: int = 0
    train_total: int = 0
    test_passed: int = 0
    test_total: int = 0
    train_score: float | None = None
    test_score: float | None = None
    cost_usd: float = 0.0  # the candidate's runs
    proposer_cost_usd: float = 0.0  # asking the optimizer model for it
    refused: list[str] = []  # why a proposal was sent back (or dropped)


class OptimizationRecord(Record):
    """--optimize: the split, every round, and the best candidate (chosen by its test score,
    then its train score, then the shorter)."""

    target: str  # skill | tools
    subject: str
    optimizer_model: str
    holdout: float
    seed: int
    runs: int
    rounds_requested: int
    split: list[SplitRecord] = []
    original: dict[str, str] = {}
    rounds: list[OptimizationRoundRecord] = []
    best_round: int = 0
    improved: bool = False
    best: dict[str, str] = {}  # the best candidate's descriptions that differ from the original
    best_file: str | None = None
    stopped: str = ""  # rounds | train all passing | max-cost | interrupted
    cost_usd: float = 0.0


class ModelSummaryRecord(Record):
    """One model of a model matrix over the whole suite, priced at its own rates."""

    model: str
    cases: int = 0
    passed: int = 0
    pass_rate: float = 0.0
    runs: int = 0
    run_errors: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    price: dict[str, float] = {}  # USD per million tokens (test_constants.PRICES)
    priced: bool = True  # False: not in PRICES, priced as FALLBACK_PRICE


class MatrixCellRecord(Record):
    """One case on one model."""

    passed: bool
    error: bool = False
    passes: int = 0
    runs: int = 0
    pass_rate: float = 0.0
    cost_usd: float = 0.0
    mean_latency_ms: float = 0.0


class MatrixCaseRecord(Record):
    """One case side by side: model -> its cell (a model it did not run on is left out)."""

    name: str
    kind: str = "case"
    group: str = ""
    models: dict[str, MatrixCellRecord] = {}
    disagree: bool = False  # passes on some model and fails on another
    passed_on: list[str] = []
    failed_on: list[str] = []


class MatrixToolCellRecord(Record):
    calls: int = 0
    mean_ms: float = 0.0  # how long a call took, on average
    precision: float | None = None  # None: no case expected or called it on this model
    recall: float | None = None
    f1: float | None = None


class MatrixToolRecord(Record):
    """One tool side by side: model -> how often it was called, and its selection scores."""

    tool: str
    models: dict[str, MatrixToolCellRecord] = {}


class ModelMatrixRecord(Record):
    """A run on several models (--model, or --trigger-model, repeated): each model's totals, every
    case and tool side by side, and the cases that pass on one model and fail on another."""

    models: list[str]
    summaries: list[ModelSummaryRecord] = []
    cases: list[MatrixCaseRecord] = []
    tools: list[MatrixToolRecord] = []
    disagreements: list[str] = []  # names of the cases whose verdict depends on the model


class ToolDiscoveryRecord(Record):
    """Through Claude Code: how one tool fared with the tool search, over one harness's runs."""

    tool: str
    harness: str
    runs: int = 0  # runs of cases that expect it
    deferred_runs: int = 0  # of them, runs where Claude Code deferred it behind ToolSearch
    loaded_runs: int = 0  # deferred runs where a search loaded it
    called_runs: int = 0  # runs that called it
    discovery_rate: float | None = None  # loaded / deferred (None: never deferred)


class ServerReadinessRecord(Record):
    """Through Claude Code: whether a server was ready at the first request, over one harness's
    runs, and whether the model waited for it when it was not."""

    server: str
    harness: str
    runs: int = 0
    not_ready_runs: int = 0  # its status in the init event was not `connected`
    waited_runs: int = 0  # of those, runs where the model called WaitForMcpServers
    # the longest it took to connect after Claude Code's first answer, in a run that waited for it
    connected_after_ms: float | None = None


class HarnessCaseRecord(Record):
    """A case through the API and through Claude Code, side by side (--harness api --harness
    claude-code): each way's passes, Claude Code's rate minus the API's with Newcombe's interval,
    Fisher's p, and what made the difference."""

    case: str
    model: str
    harness: str  # the Claude Code side's label (with its --tool-search)
    api_passes: int = 0
    api_runs: int = 0
    passes: int = 0
    runs: int = 0
    difference: float = 0.0
    interval: tuple[float, float] = (-1.0, 1.0)
    p_value: float = 1.0
    note: str = ""


class ClaudeCodeRecord(Record):
    """What Claude Code's room did to a suite's runs: each tool's discovery through the tool
    search, each server's readiness, the built-ins that took calls, and (both harnesses) each
    case both ways."""

    tools: list[ToolDiscoveryRecord] = []
    servers: list[ServerReadinessRecord] = []
    builtins: dict[str, int] = {}  # built-in tool -> runs that called it instead of a suite tool
    cases: list[HarnessCaseRecord] = []
    late_servers: list[str] = []  # servers not ready at the first request in any run


class LiteratureFigure(Record):
    """One row of a benchmark's own report: a category or domain (or a headline aggregate), the
    benchmark's figures as its paper computes them, and ours beside them."""

    name: str
    cases: int = 0
    runs: int = 0
    theirs: dict[
        str, float
    ] = {}  # e.g. {"accuracy": 0.91} (BFCL), {"pass^1": .., "pass^2": ..} (τ²)
    ours: dict[
        str, float
    ] = {}  # {"cases passed": .., "runs passed": ..}: this evaluator's verdicts
    note: str = ""


class LiteratureRecord(Record):
    """An imported benchmark's headline figures (`import bfcl`, `import tau2`): the cases tagged
    `bfcl:CATEGORY` or `tau2:DOMAIN`, scored as the benchmark reports them."""

    benchmark: str  # BFCL V4 | τ²-bench
    metric: str  # what `theirs` means, in a line
    figures: list[LiteratureFigure] = []
    notes: list[str] = []


class DistractorRecord(Record):
    """A distractor of the crowd, in the seeded order: step K installs (or offers) the first K."""

    name: str
    source: str  # folder | installed | lookalike (skills); server name | lookalike (tools)
    description: str = ""


class CrowdPointRecord(Record):
    """One step of the curve, for one model (and skill): the rates in %, each with its 95 %
    Wilson interval. Skills: triggerRate, falsePositiveRate, triggerScore over the queries.
    Tools: recall, precision and F1 of the expected tools over the calls."""

    distractors: int  # distractors installed (skills) or distractor tools offered (tools)
    model: str = ""
    subject: str = ""  # the skill under test ("" for tools)
    offered: int = 0  # tools: every tool offered at this step (the servers' own included)
    runs: int = 0  # runs of the positive queries (skills) or of the cases (tools) that counted
    stolen_runs: int = 0  # of those, the runs another skill (tool) took
    series: dict[str, float | None] = {}
    intervals: dict[str, tuple[float, float]] = {}
    tool_tokens: int | None = None  # tools: estimated tokens of the definitions each call carries
    tools: list[ToolStatsRecord] = []  # tools: precision, recall and F1 of each expected tool
    listed: int | None = None  # skills: distractors Claude Code listed (fewest over the runs)


class ThiefRecord(Record):
    """Who took a query (a case) at one step: a skill that fired instead of (or alongside) the one
    under test, or the tool called instead of an expected one, counted over the runs."""

    case: str  # the query (skills) or the case (tools)
    expected: str  # the skill under test, or the expected tool that was missed
    thief: str
    distractors: int
    model: str = ""
    runs: int = 0  # runs it took
    of_runs: int = 0  # runs of the query (case) at this step
    instead: int = 0  # runs where the expected skill did not fire (tool was not called)
    alongside: int = 0  # runs where it fired too
    decoy: bool = False  # the thief is a distractor (not another skill under test, or a real tool)


class ConsolidationHintRecord(Record):
    """Two skills (tools) confused for each other above C.CONSOLIDATION_HINT_RATE: both
    descriptions side by side, and the queries (cases) involved."""

    kind: str  # skill | tool
    expected: str
    taken_by: str
    rate: float  # share of the expected one's runs the other took (its most crowded step)
    expected_description: str = ""
    taken_by_description: str = ""
    cases: list[str] = []


class CrowdingRecord(Record):
    """--distractors (skills) or --distractor-tools (tools): the crowd, the curve step by step,
    who took which query, and the pairs worth consolidating."""

    kind: Literal["skills", "tools"]
    steps: list[int]
    seed: int
    sources: list[str] = []
    distractors: list[DistractorRecord] = []
    points: list[CrowdPointRecord] = []
    thieves: list[ThiefRecord] = []
    hints: list[ConsolidationHintRecord] = []
    skipped: list[str] = []  # candidates left out of the crowd, each with why
    decoys_file: str | None = None
    decoy_cost_usd: float = 0.0


class OverlapPairRecord(Record):
    """Two skills: how alike their descriptions read (the lexical pre-filter) and, for the
    closest pairs, the judge's risk that one takes the other's queries."""

    a: str
    b: str
    similarity: float  # Jaccard similarity of the descriptions' significant words
    judged: bool = False
    risk: str = "LOW"  # HIGH | MEDIUM | LOW (LOW without the judge below the pre-filter)
    queries: list[str] = []  # requests that would confuse them
    reason: str = ""  # the judge's one line on why (the case's reason)
    disambiguation: str = ""  # the judge's line on how the descriptions should differ
    error: str | None = None
    cost_usd: float = 0.0


class OverlapRecord(Record):
    """overlap: every pair of the skills (or the skill under test against its distractors)."""

    skills: list[str]
    distractors: list[str] = []
    judge_model: str = ""
    pairs: list[OverlapPairRecord] = []
    below_filter: int = 0  # pairs LOW by the lexical pre-filter alone
    not_judged: int = 0  # pairs above it the judge did not read (beyond the limit, or --max-cost)
    cost_usd: float = 0.0


class GraderAgreementRecord(Record):
    """One judge grader against people's labels (calibrate): the grader (by its name in its
    plugin: a plugin's cases that name a grader alike share it; the tool-use judge is `judge`),
    the cases its labels covered, the confusion table (person first: `pass_fail` is a run a person passed and the judge
    failed), the observed and chance agreement, Cohen's kappa with its 95 % interval (None:
    undefined, both sides gave one verdict only), and whether it is below the floor. The
    calibration file keeps one per grader, with when and from which labels."""

    scope: str = ""  # the plugin the grader is in ("" for a tool-use suite)
    grader: str  # its name; `(every grader)` for the calibration's overall row
    cases: list[str] = []  # the cases of the labelled runs
    n: int = 0
    pass_pass: int = 0
    pass_fail: int = 0
    fail_pass: int = 0
    fail_fail: int = 0
    agreement: float = 0.0  # p_o
    expected: float = 0.0  # p_e
    kappa: float | None = None
    interval: tuple[float, float] | None = None
    min_kappa: float = 0.0
    below_floor: bool = False  # kappa under --min-kappa, or undefined
    labels: str = ""  # the labels file it was calibrated on
    calibrated_at: str = ""  # when (UTC, ISO 8601)


class CalibrationRecord(Record):
    """calibrate: people's labels against the judge's verdicts of one results file, per grader and
    overall; the method of the interval; what was not labelled; where the calibration is kept."""

    labels: str
    results: str
    min_kappa: float
    method: str = ""  # how the interval is computed
    graders: list[GraderAgreementRecord] = []
    overall: GraderAgreementRecord | None = None
    unlabelled: int = 0  # judge verdicts in the results file no label names
    calibration_file: str = ""  # where later runs read the flags from
