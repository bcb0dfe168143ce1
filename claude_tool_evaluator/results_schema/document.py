"""The results document: its pydantic records (one schema, written and read back by -o, the
journal, --resume, compare, merge and render), the SECTIONS table a section is one row of, and
the readers of results files. Loaded when a run writes or reads results.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.alias_generators import to_camel

import test_constants as C

from ..errors import InputError
from ..files import check_json_depth, journal_path, json_lines, read_text_file, results_lines_path
from ..run_types import (
    HistoryEntry,
    SkillTest,
    TestCase,
    ToolCall,
    Transcript,
    Usage,
    Verdict,
    case_hash,
    names_agent,
)
from ..sinks import cap_text

__all__ = [
    "ArtifactRecord",
    "BenchmarkRecord",
    "CaseResult",
    "ClaudeRun",
    "ConfigurationStatsRecord",
    "DelegationRecord",
    "DeltaRecord",
    "EvalBenchmarkRecord",
    "ExpectationTallyRecord",
    "HookFiringRecord",
    "IsolationRecord",
    "Metadata",
    "PluginGraderVerdictRecord",
    "PluginRunResult",
    "QueryScoreRecord",
    "RUN_RESULT",
    "Record",
    "ResultsDocument",
    "ReusedRunRecord",
    "RunResult",
    "SECTIONS",
    "SKILL_NOT_LOADED",
    "Section",
    "SkillRecord",
    "SkillRunResult",
    "SkillTestRecord",
    "SkillTestResult",
    "StatRecord",
    "SummaryRecord",
    "ToolCoverageRecord",
    "ToolInfoRecord",
    "ToolRunResult",
    "ToolStatsRecord",
    "ToolTimeRecord",
    "TriggerScoreRecord",
    "VerdictRecord",
    "dump_record",
    "earlier_results",
    "earlier_tool_definitions",
    "first_schema_problem",
    "merged_piece_runs",
    "read_result_lines",
    "read_results_document",
    "register_section",
    "results_document_model",
    "results_schema",
    "skill_run_result",
    "tool_run_result",
    "transcript_from_result",
]


class Record(BaseModel):
    """A piece of a results file. Unknown keys are tolerated on reading, so a newer minor
    version's file still reads; missing or mistyped keys are not."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ArtifactRecord(Record):
    """A file a task run created or changed in its project (--artifacts' manifest.json rows)."""

    path: str  # relative to the project
    size: int
    sha256: str | None = None  # None: not read (see not_read)
    status: str = "new"  # new | changed
    # why its bytes were not read (sparse, over a size limit, the time budget spent): listed only
    not_read: str | None = None
    copied: bool = False  # copied to --artifacts (a file over the copy limit is listed only)
    redacted: bool = False  # a secret in it was masked (size and sha256 are the masked copy's)
    text: str | None = Field(
        default=None, exclude=True
    )  # a small text file's content, for the judge only


SKILL_NOT_LOADED = (
    "skill not loaded"  # how a run's error starts when an installed skill was missing
)


class DelegationRecord(Record):
    """A task Claude handed to a subagent: a top-level `Agent` tool_use (its `subagent_type`:
    `NAME` for a project's agent, `PLUGIN:NAME` for a plugin's, or a built-in such as Explore)."""

    agent: str
    description: str = ""
    prompt: str = ""


class HookFiringRecord(Record):
    """A hook that ran in a run (Claude Code's `hook_response` event, with --include-hook-events)
    and what it did: blocked the tool call (or the prompt), added context, or neither."""

    event: str  # PreToolUse | PostToolUse | UserPromptSubmit | SessionStart | Stop | ...
    name: str  # `PreToolUse:Read`: the event and, for tool events, the tool it matched
    outcome: str = ""  # Claude Code's own word: success | error | cancelled
    exit_code: int | None = None
    blocked: bool = False
    reason: str = ""  # why it blocked (its JSON reason, or stderr for exit code 2)
    context: str = ""  # the context it added (its plain stdout, or additionalContext)

    @property
    def effect(self) -> str:
        """What it did, in a word or two: blocked, added context, or ran."""
        return "blocked" if self.blocked else "added context" if self.context else "ran"

    @property
    def did(self) -> str:
        """What it did, with its reason or context (reports)."""
        detail = self.reason if self.blocked else self.context
        return f"{self.effect}: {detail}" if detail else self.effect


class ClaudeRun(Record):
    """One `claude -p` run of one query: what the stream-json events say happened."""

    query: str
    run: int
    activated_skills: list[str] = []  # every skill that fired, in order
    first_tool: str | None = None
    tool_count: int = 0
    tools: list[str] = []
    skills_loaded: list[str] | None = None  # from the init event; None when it did not say
    answer: str = ""
    error: str | None = None
    timed_out: bool = False
    exit_code: int | None = None
    stderr_tail: str = ""
    result_subtype: str | None = None
    is_error: bool | None = None
    num_turns: int | None = None
    duration_ms: float | None = None
    total_cost_usd: float | None = None
    usage: dict[str, Any] = {}
    api_retries: int = 0
    latency_ms: float = 0.0
    outside_writes: list[str] = []
    test: str = ""  # "trigger", or the knowledge / task / security test this ran
    tool_calls: list[
        ToolCall
    ] = []  # top-level tool calls with their arguments and (cut) results: the HTML transcript
    # task runs: which configuration, what Claude Code refused, what the run left, how it was graded
    configuration: str = (
        ""  # with_skill | without_skill | old_skill ("" for trigger and other test runs)
    )
    refused_tools: list[
        str
    ] = []  # tool calls Claude Code refused ("Write: No such tool available ...")
    transcript_summary: str = ""
    artifacts: list[ArtifactRecord] = []
    expectations: list[dict[str, Any]] = []  # per expectation: {text, passed, evidence} (or error)
    judge_cost_usd: float = 0.0
    model: str = ""  # the --model / --trigger-model it ran on, as given to claude
    distractors: int | None = None  # --distractors: how many were installed beside the skills
    claude_version: str | None = None  # several --claude-bin: the Claude Code version it ran on
    delegations: list[DelegationRecord] = []  # top-level Agent calls, in order
    agents_loaded: list[str] | None = None  # from the init event's `agents`; None: not said
    hooks: list[HookFiringRecord] = []  # a plugin's hooks that ran, in order (--skill PLUGIN)

    @property
    def delegated_agents(self) -> list[str]:
        return list(dict.fromkeys(d.agent for d in self.delegations))

    @property
    def fired_names(self) -> list[str]:
        """Every skill that fired and every agent a task went to, in order."""
        return self.activated_skills + self.delegated_agents

    def fired(self, skill: str) -> bool:
        """Whether the skill fired, or (an agent under test) a task was delegated to it."""
        return skill in self.activated_skills or any(
            names_agent(skill, agent) for agent in self.delegated_agents
        )

    @property
    def counted(self) -> bool:
        """Whether the run says anything about activation. An observed activation counts even if
        the run failed later; a run that failed without one proves nothing (it is not a miss), and
        neither does a run whose skills did not all load, whatever else fired in it."""
        if self.error is None:
            return True
        return bool(self.activated_skills) and not self.error.startswith(SKILL_NOT_LOADED)


@dataclass
class SkillTestResult:
    """A knowledge, task or security test's verdict over its runs."""

    test: SkillTest
    runs: list[ClaudeRun] = field(default_factory=list)
    run_scores: list[dict] = field(
        default_factory=list
    )  # per run: coverage, matched, missed, leaked, refused
    passed: bool = False
    error: str | None = None


# ---------------------------------------------------------------------------- results records: one schema, written and read back
class VerdictRecord(Record):
    passed: bool
    reasons: list[str] = []


class ToolRunResult(Record):
    """One conversation: seed 002's fields first, then the additions."""

    kind: Literal["tool_run"] = "tool_run"
    iteration: int
    test_name: str
    query: str
    agent_reasoning: str = ""
    tools_called: list[str] = []
    tool_params: dict[str, Any] = {}
    tool_results: dict[str, Any] = {}
    conversation_turns: int = 0
    user_interventions: int = 0
    ended_by: str = "completion"
    conversation_history: list[HistoryEntry] = []
    latency_ms: float = 0.0
    token_count: int = 0
    error: str | None = None
    tool_calls: list[ToolCall] = []
    usage: Usage = Usage()
    stop_reason: str | None = None
    truncated: bool = False
    model_calls: int = 0
    model: str = ""
    cost_usd: float = 0.0
    case_hash: str
    simulated_user_usage: Usage | None = None
    simulated_user_model: str | None = None
    verdict: VerdictRecord | None = None
    grades: dict[
        str, dict[str, Any]
    ] = {}  # "judge": {passed, score, evidence}, "verify": {passed, reason}; or {error}
    judge_usage: Usage | None = None
    judge_model: str | None = None
    batch_api: bool = False  # --batch: priced at the Message Batches discount
    harness: str = "api"  # --harness: "api", or "claude-code" (with its --tool-search)
    # through Claude Code: deferred, searches [{query, loaded}], loaded, waited, servers
    # {name: {status_at_start, waited}}, builtins (called), withheld, tool_search, claude_version
    claude_code: dict[str, Any] = {}


class SkillRunResult(ClaudeRun):
    """One `claude -p` run as the results file keeps it: what its stream-json events say
    happened, and what it cost."""

    kind: Literal["skill_run"] = "skill_run"
    fingerprint: str
    cost_usd: float = 0.0
    verdict: VerdictRecord | None = None


class PluginGraderVerdictRecord(Record):
    """One grader's verdict on a plugin run, as claude plugin eval gives it: a with-only grader
    (under ablation) is shown, not scored; a judge's three votes are kept."""

    name: str
    passed: bool
    weight: float = 1.0
    explanation: str = ""
    with_only: bool = False
    scored: bool = True
    judge_votes: list[bool] | None = None


class ReusedRunRecord(Record):
    """Where a reused run (of the arm without the plugin) was made: an earlier results file
    (--baseline-from) or the --cache folder, that run's id and date."""

    source: Literal["file", "cache"]
    place: str  # the results file or the cache folder
    run_id: str = ""  # the earlier results' suite hash, or the invocation that stored it
    date: str = ""  # when it was made (the earlier results' generated_at, or when it was kept)


class PluginRunResult(Record):
    """One `claude -p` run of a plugin's eval case in one arm (with the plugin, or without it: a
    baseline), graded by the case's graders; what the plugin's parts did in it."""

    kind: Literal["plugin_run"] = "plugin_run"
    case: str
    arm: str  # with | without
    run: int
    model: str = ""  # the --model it ran on (a case's own `model` aside)
    label: str = ""  # a --model / --claude-bin matrix: `model @ version` (else "")
    claude_version: str | None = None
    query: str = ""  # the case's prompt
    score: float = 0.0  # the weighted share of its scored graders passed; it passes at 1
    passed: bool = False
    graders: list[PluginGraderVerdictRecord] = []
    error: str | None = None
    turns: int | None = None
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    latency_ms: float = 0.0
    usage: dict[str, Any] = {}
    tools: list[str] = []
    answer: str = ""
    # what the plugin's parts did: the subagents handed a task (`PLUGIN:AGENT`), each hook that
    # ran and what it did (`PreToolUse:Bash blocked: ...`), the MCP tools called
    delegations: list[str] = []
    hooks: list[str] = []
    mcp_calls: list[str] = []
    # what the confinement kept from the plugin's code, as its hooks' output says it (each a
    # line: `hook NAME could not reach PATH (hidden by the confinement): ...`)
    confinement: list[str] = []
    plugins: list[str] = []  # the plugin folders the run loaded (the arm with it: the case's)
    # the mocks that stood in for the plugin's servers, as claude plugin eval's `mocks`:
    # {servers: [{server, kind, tools}], warnings: [...], calls: {total, errors, unmocked}}
    mocks: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None  # --keep-events: its stream-json events
    fingerprint: str = ""  # its case's files, the plugin's (the arm with it), what else loaded
    # the arm without the plugin: the key of everything the run depends on (runners.baseline_reuse)
    # under which a later run reuses it, and where it was made when this run is such a reuse
    baseline_key: str = ""
    reused_from: ReusedRunRecord | None = None
    verdict: VerdictRecord | None = None


RunResult = Annotated[ToolRunResult | SkillRunResult | PluginRunResult, Field(discriminator="kind")]


RUN_RESULT = TypeAdapter(RunResult)


class CaseResult(Record):
    """The one verdict type every writer reads: a CSV case, a markdown test, a skill test, or a
    trigger query for one skill, over all its runs."""

    name: str
    kind: str  # case | test | trigger_query
    group: str = ""  # the suite, test file or skill it belongs to (JUnit's classname)
    passed: bool
    error: bool = False  # no run said anything (every run errored)
    runs: int = 0
    passes: int = 0
    errors: int = 0
    pass_rate: float = 0.0
    interval: tuple[float, float] | None = (0.0, 1.0)  # None: one judgement (an overlap pair)
    pass_at_k: float = 0.0
    pass_hat_k: float = 0.0
    flaky: bool = False
    reasons: dict[str, int] = {}  # failure reason -> runs that gave it
    # redteam: the runs of an attacked case the attack succeeded in (its verdict, `passed`, is
    # the case's own checks: utility under attack); None: no attack ran in it
    breaches: int | None = None
    prompt: str = ""
    description: str = ""
    cost_usd: float = 0.0
    seconds: float = 0.0
    tags: list[str] = []  # a CSV case's tags
    configuration: str = (
        ""  # a task's with_skill, or a baseline (reported, never failing the suite)
    )
    model: str | None = None  # the model its runs ran on (a model matrix has a case per model)
    distractors: int | None = None  # --distractors: the step (distractors installed) it ran at
    claude_version: str | None = None  # several --claude-bin: the Claude Code version it ran on
    source: str = ""  # the file it is written in (a suite, a test file): where CI annotates it
    line: int = 0  # its line in that file (0: the file as a whole)


class ToolStatsRecord(Record):
    tool: str
    true_positives: int
    false_positives: int
    false_negatives: int
    precision: float
    recall: float
    f1: float


class ToolCoverageRecord(Record):
    """Which of the servers' tools a suite exercises (tool-use modes)."""

    available: list[str] = []  # every tool the connected servers offer
    expected: list[str] = []  # named by some case (expected_tools, expected_args)
    called: list[str] = []  # called in some run (unknown names included)
    never_called: list[str] = []  # offered, but called in no run
    expected_not_called: list[str] = []
    unexpected: list[str] = []  # called, but expected by no case
    calls: dict[str, int] = {}  # tool -> calls over all runs
    coverage: float | None = None  # share of the offered tools called at least once; None: no tools


class SummaryRecord(Record):
    """The whole run in numbers, the same for every mode."""

    cases: int
    passed: int
    failed: int
    flaky: int = 0
    runs: int = 0
    run_errors: int = 0
    pass_rate: float = 0.0
    threshold: float = 1.0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p95_ms: float = 0.0
    tools: list[ToolStatsRecord] = []
    confusion: dict[str, dict[str, int]] = {}
    not_started: int = 0
    interrupted: bool = False
    tool_coverage: ToolCoverageRecord | None = None
    tool_calls_by_source: dict[
        str, int
    ] = {}  # live | mock | replay | policy: who answered Claude's calls


class QueryScoreRecord(Record):
    """One trigger query's verdict for one skill (seed 001's camelCase names)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, alias_generator=to_camel)
    query: str
    expected: str
    actual: str
    correct: bool
    tool_count: float = 0.0
    activation_rate: float = 0.0
    activations: int = 0
    runs: int = 0
    errored_runs: int = 0
    fired_skills: dict[str, int] = {}
    routing: bool = False
    source: str = ""
    cost_usd: float = 0.0
    routing_failures: dict[str, int] = {}  # a broken routing assertion -> runs that broke it
    hooks: dict[str, int] = {}  # a plugin's hook and what it did -> runs it did it in


class TriggerScoreRecord(Record):
    """Seed 001's trigger metrics for one skill; a rate is null ("n/a") when it has no queries."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, alias_generator=to_camel)
    skill: str
    trigger_rate: float | None
    false_positive_rate: float | None
    trigger_score: float
    precision: float
    recall: float | None
    f1: float
    positives: int
    positives_activated: int
    negatives: int
    negatives_activated: int
    errored_queries: int
    errored_runs: int
    total_runs: int
    threshold: float
    cost_usd: float = 0.0
    query_results: list[QueryScoreRecord] = []
    model: str | None = (
        None  # the trigger model (several --trigger-model: a score per skill and model)
    )
    distractors: int | None = None  # --distractor-steps: a score per skill, model and step


class SkillTestRecord(Record):
    name: str
    type: str
    source: str = ""
    skill: str | None = None
    category: str | None = None
    severity: str | None = None
    passed: bool
    error: str | None = None
    activated_skills: list[str] = []
    run_scores: list[dict[str, Any]] = []
    cost_usd: float = 0.0
    configuration: str = ""  # a task's with_skill | without_skill | old_skill
    expected_output: str = ""  # a task eval's, shown beside its expectations
    model: str | None = None


class StatRecord(Record):
    """A metric over runs: mean ± sample standard deviation (n-1; 0 for one run), min and max."""

    mean: float = 0.0
    stddev: float = 0.0
    min: float = 0.0
    max: float = 0.0


class ConfigurationStatsRecord(Record):
    """One configuration's runs (of an eval, or of every eval): pass rate (expectations passed /
    total, per run), time, tokens and cost, each as mean ± stddev over the runs."""

    configuration: str
    model: str = ""
    runs: int = 0
    errored_runs: int = 0
    expectations_passed: int = 0
    expectations_total: int = 0
    pass_rate: StatRecord = StatRecord()
    time_seconds: StatRecord = StatRecord()
    tokens: StatRecord = StatRecord()
    cost_usd: StatRecord = StatRecord()


class DeltaRecord(Record):
    """with_skill − a baseline, in means: positive pass_rate is the skill helping."""

    baseline: str  # without_skill | old_skill
    model: str = ""
    pass_rate: float = 0.0
    time_seconds: float = 0.0
    tokens: float = 0.0
    cost_usd: float = 0.0


class ExpectationTallyRecord(Record):
    """One expectation: in how many runs of each configuration the judge found it met."""

    text: str
    passed: dict[str, int] = {}
    runs: dict[str, int] = {}
    evidence: dict[str, str] = {}  # configuration -> the judge's evidence in its last graded run


class EvalBenchmarkRecord(Record):
    name: str
    eval_id: int | str | None = None
    prompt: str = ""
    expected_output: str = ""
    configurations: list[ConfigurationStatsRecord] = []
    deltas: list[DeltaRecord] = []
    expectations: list[ExpectationTallyRecord] = []


class BenchmarkRecord(Record):
    """Task evals side by side: per configuration over every eval, the deltas, and per eval."""

    skill_name: str = ""
    runs_per_configuration: int = 1
    judge_model: str = ""
    configurations: list[ConfigurationStatsRecord] = []
    deltas: list[DeltaRecord] = []
    evals: list[EvalBenchmarkRecord] = []


class SkillRecord(Record):
    name: str
    description: str  # as installed: --skill-description's when given
    path: str
    description_overridden: bool = False


class IsolationRecord(Record):
    """What the write guard watched, and what changed there while the runs ran: blamed on the
    runs (`outside_writes`, which fail the suite) only when one could have done it (a task run
    with Bash and --unconfined); else another program did it (`changed_elsewhere`, a warning)."""

    watched: list[str] = []
    outside_writes: list[str] = []
    ok: bool = True
    unconfined: bool = False  # --unconfined: task runs' Bash ran as the user, outside any sandbox
    changed_elsewhere: list[str] = []


class ToolInfoRecord(Record):
    """A tool of the run's servers (or cassette): its MCP annotations and what the run did with its calls."""

    name: str
    server: str
    annotations: dict[str, Any] = {}
    calls: str = "live"  # live | withheld by policy | mocked | replayed, ... (ToolPolicy.treatment)
    # sha256 of its definition as the server lists it (what --pin pins): --resume compares them
    definition_sha256: str | None = None


class Metadata(Record):
    total_results: int
    generated_at: str
    mode: str  # seed 002's batch | interactive
    evaluation: str  # query | csv | markdown | skills: the table row that ran
    model: str
    iterations: int = 1
    input_type: str = ""
    suite_wall_time_s: float = 0.0
    schema_version: str = C.SCHEMA_VERSION
    results_file: str | None = None
    interrupted: bool = False
    threshold: float = 1.0
    claude_version: str | None = None
    trigger_model: str | None = None
    test_model: str | None = None
    trigger_threshold: float | None = None
    min_trigger_score: float | None = None
    simulated_user: dict[str, Any] | None = None
    batch_api: bool = False  # --batch: model calls through Message Batches
    skill_descriptions: dict[str, str] | None = None  # --skill-description: what Claude Code listed
    tool_overrides: dict[str, dict[str, Any]] | None = (
        None  # --tool-overrides: what Claude was shown
    )
    # Which calls reached the real servers (tool-use modes): --tool-policy, --allow-tool, --mock-tools,
    # --replay, --record, and every tool with its MCP annotations and what the run did with its calls.
    tool_policy: str | None = None
    allowed_tools: list[str] = []
    mock_tools: str | None = None
    replay: str | None = None
    record: str | None = None
    tools: list[ToolInfoRecord] | None = None
    models: list[str] | None = None  # a model matrix: every --model, in order
    trigger_models: list[str] | None = None  # every --trigger-model, in order (skill runs)
    shard: str | None = None  # "K/N": this file holds that share of the runs (--shard)
    merged_from: list[str] | None = None  # --merge: the pieces this document was put together from
    suite_hash: str | None = (
        None  # every run of the whole suite (all shards), by name and definition
    )
    settings: dict[str, Any] | None = (
        None  # the options that shape the results (what --merge checks and reuses)
    )
    auto_runs: list[int] | None = None  # -i auto: [least, most] runs a case; cases[].runs: taken
    cache: dict[str, Any] | None = None  # --cache: folder, hits, misses, refused, saved_usd
    claude_versions: list[str] | None = None  # several --claude-bin: every version, side by side


class ToolTimeRecord(Record):
    """The calls of one tool and the time they took."""

    tool: str
    calls: int
    total_ms: float
    mean_ms: float
    max_ms: float


@dataclass(frozen=True)
class Section:
    """One section of a results document beyond the parts every mode writes: its key, its record
    type, and how each sink shows it. `ResultsDocument`, `results_from_document` and the markdown,
    terminal, HTML and JUnit writers all iterate SECTIONS, so whatever section a mode writes
    survives --from, and a new section is one row. `junit` gives testcases of its own (a red
    team's attack classes), each in a testsuite it names; `comment` gives its lines in a
    pull-request comment. Rows are registered next to their renderers (`register_section`); a
    renderer left None shows nothing in that sink."""

    key: str
    record: Any  # its type in the document: a Record, or a list of one
    markdown: Callable[[Any], list[str]] | None = None
    terminal: Callable[[Any, Any], None] | None = None  # (console, value)
    html: Callable[[Any], Any] | None = None  # the page's data for it (default: the dumped record)
    html_renderer: str = "renderBlock"  # the page's function that draws it (HTML_SCRIPT)
    place: str = "after_cases"  # first | before_cases | after_cases: where the reports show it
    junit: Callable[[Any], list[tuple[str, CaseResult]]] | None = None  # (testsuite, testcase)
    comment: Callable[[Any], list[str]] | None = None  # its lines in a pull-request comment


SECTIONS: list[Section] = []  # in the order the reports show them


def register_section(section: Section) -> Section:
    """Adds a section (or replaces the one of that key): the document model, the readers and every
    renderer pick it up."""
    SECTIONS[:] = [s for s in SECTIONS if s.key != section.key] + [section]
    return section


class ResultsDocument(Record):
    """A results file (`-o`): what every mode writes and `--resume`, `--retry-errors`, `compare`,
    `merge` and `render` read back. Its sections come from SECTIONS (see results_document_model);
    `python evaluator.py schema` prints its JSON Schema."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, title="Claude tool-use evaluator results"
    )
    schema_version: Literal[C.SCHEMA_VERSION]  # type: ignore[valid-type]
    metadata: Metadata
    passed: bool
    summary: SummaryRecord
    cases: list[CaseResult]
    results: list[RunResult]

    def section(self, key: str) -> Any:
        """A section's record (None when the document has none)."""
        return getattr(self, key, None)


_DOCUMENT_MODELS: dict[tuple, type[ResultsDocument]] = {}


def results_document_model() -> type[ResultsDocument]:
    """ResultsDocument with one optional field per registered section, built once per set of
    sections."""
    key = tuple((s.key, repr(s.record)) for s in SECTIONS)
    if key not in _DOCUMENT_MODELS:
        fields: dict[str, Any] = {s.key: (s.record | None, None) for s in SECTIONS}
        _DOCUMENT_MODELS[key] = create_model("ResultsDocument", __base__=ResultsDocument, **fields)
    return _DOCUMENT_MODELS[key]


def results_schema() -> dict:
    return results_document_model().model_json_schema(by_alias=True)


def dump_record(record: BaseModel) -> dict:
    return record.model_dump(mode="json", by_alias=True)


def tool_run_result(
    transcript: Transcript, verdict_of: Callable[[Transcript], Verdict] | None = None
) -> ToolRunResult:
    t = transcript
    tool_params: dict[str, Any] = {}
    tool_results: dict[str, Any] = {}
    for (
        call
    ) in t.tool_calls:  # seed 002's dicts keep the last call per tool; `tool_calls` keeps all
        tool_params[call.name] = call.input
        tool_results[call.name] = call.output
    verdict = verdict_of(t) if verdict_of else None
    return ToolRunResult(
        iteration=t.iteration,
        test_name=t.case.name,
        query=t.case.prompt,
        agent_reasoning=t.final_text,
        tools_called=t.tools_called,
        tool_params=tool_params,
        tool_results=tool_results,
        conversation_turns=len(t.history),
        user_interventions=t.user_interventions,
        ended_by=t.ended_by,
        conversation_history=t.history,
        latency_ms=t.latency_ms,
        token_count=t.usage.total,
        error=t.error,
        tool_calls=t.tool_calls,
        usage=t.usage,
        stop_reason=t.stop_reason,
        truncated=t.truncated,
        model_calls=t.model_calls,
        model=t.model,
        cost_usd=round(t.cost_usd, 6),
        case_hash=case_hash(t.case),
        simulated_user_usage=t.simulated_user_usage if t.simulated_user_model else None,
        simulated_user_model=t.simulated_user_model or None,
        verdict=VerdictRecord(passed=verdict.passed, reasons=verdict.reasons) if verdict else None,
        grades=t.grades,
        judge_usage=t.judge_usage if t.judge_model else None,
        judge_model=t.judge_model or None,
        harness=t.harness,
        claude_code=t.claude_code,
        batch_api=t.batch_api,
    )


def transcript_from_result(
    case: TestCase, result: ToolRunResult, scored: bool = False
) -> Transcript:
    """A transcript rebuilt from a results entry, so reused results are scored like new ones;
    `scored`: with the verdict the entry carries (read back after a run, or from a --merge piece)."""
    r = result
    return Transcript(
        case=case,
        iteration=r.iteration,
        model=r.model,
        final_text=r.agent_reasoning,
        tool_calls=list(r.tool_calls),
        history=list(r.conversation_history),
        model_calls=r.model_calls,
        user_interventions=r.user_interventions,
        ended_by=r.ended_by,
        stop_reason=r.stop_reason,
        truncated=r.truncated,
        usage=r.usage,
        latency_ms=r.latency_ms,
        error=r.error,
        simulated_user_usage=r.simulated_user_usage or Usage(),
        simulated_user_model=r.simulated_user_model or "",
        grades=dict(r.grades),
        judge_usage=r.judge_usage or Usage(),
        judge_model=r.judge_model or "",
        batch_api=r.batch_api,
        harness=r.harness,
        claude_code=dict(r.claude_code),
        verdict=Verdict(r.verdict.passed, list(r.verdict.reasons))
        if scored and r.verdict is not None
        else None,
    )


def skill_run_result(
    record: ClaudeRun, fingerprint: str, verdict: Verdict | None = None
) -> SkillRunResult:
    own = {
        name: getattr(record, name) for name in ClaudeRun.model_fields
    }  # a kept SkillRunResult too
    return SkillRunResult(
        **dict(own, answer=cap_text(record.answer, C.DEFAULT_MAX_RESULT_CHARS)),
        fingerprint=fingerprint,
        cost_usd=round(record.total_cost_usd or 0.0, 6),
        verdict=VerdictRecord(passed=verdict.passed, reasons=verdict.reasons) if verdict else None,
    )


def first_schema_problem(exc: ValidationError) -> str:
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" + (
        f" ({len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    )


def read_results_document(path: str | Path) -> ResultsDocument:
    """A results file, checked against the schema: anything else is one line naming the file."""
    text = read_text_file(path, "results file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"results file is not valid JSON: {exc.msg}", path, exc.lineno) from None
    except (ValueError, RecursionError) as exc:
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise InputError(f"results file is not valid JSON: {problem}", path, 1) from None
    check_json_depth(data, "results file", path, 1)
    if not isinstance(data, dict) or "results" not in data:
        raise InputError('not an evaluator results file (no "results" list)', path, 1)
    if data.get("schema_version") != C.SCHEMA_VERSION:
        raise InputError(
            f"results file has schema version {data.get('schema_version')!r}; this evaluator reads "
            f"{C.SCHEMA_VERSION!r}",
            path,
            1,
            "rerun the suite with this version to compare or resume",
        )
    try:
        return results_document_model().model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"results file does not match the results schema: {first_schema_problem(exc)}",
            path,
            1,
            "python evaluator.py --schema prints the schema",
        ) from None


def read_result_lines(path: Path) -> list[RunResult]:
    found = []
    for value in json_lines(path):
        try:
            found.append(RUN_RESULT.validate_python(value))
        except (ValueError, RecursionError):  # ValidationError is a ValueError
            continue  # a line from another version: that run happens again
    return found


def merged_piece_runs(path: str, piece: ResultsDocument) -> list[RunResult]:
    """A piece's runs: in the file, or (--summary-only) in the results lines it names."""
    if piece.metadata.results_file:
        lines = Path(piece.metadata.results_file)
        lines = lines if lines.is_absolute() or lines.exists() else Path(path).parent / lines.name
        if not lines.exists():
            raise InputError(
                f"a --summary-only piece: its runs are in {piece.metadata.results_file}, which is not "
                "here",
                path,
                1,
                "put that file where the piece says, or rerun the shard without --summary-only",
            )
        return read_result_lines(lines)
    return list(piece.results)


def earlier_tool_definitions(output: str | Path) -> dict[str, str] | None:
    """The tools an earlier run into this output saw, by name (their definitions' sha256), from
    its final file; None when it has none or did not record them (an older version's)."""
    path = Path(output)
    if not path.exists():
        return None
    tools = read_results_document(path).metadata.tools
    if not tools or any(t.definition_sha256 is None for t in tools):
        return None
    return {t.name: t.definition_sha256 or "" for t in tools}


def earlier_results(output: str | Path) -> list[RunResult]:
    """Results of an earlier run into the same output: its final file (checked against the
    schema), then its journal (newer, so it wins when both hold a run). A journal line cut short
    by a kill is skipped: that run simply happens again. Runs interrupted mid-way are not results."""
    output, found = Path(output), []
    if output.exists():
        found += read_results_document(output).results
    for lines in (
        results_lines_path(output),
        journal_path(output),
    ):  # --summary-only's, then the journal
        if lines.exists():
            found += read_result_lines(lines)
    return [r for r in found if r.error != "interrupted"]
