"""Settings: one invocation's options, parsed and checked once (settings_from), and the project
file's schema, whose keys are the same options (OPTIONS, in options.py).

May import: the rooms above it (the foundations up to the options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

import prompts
import test_constants as C

if TYPE_CHECKING:
    from pydantic import BaseModel

from .errors import UsageProblem
from .files import batch_ledger_path, journal_path, results_lines_path
from .loaders.servers import load_system_prompt
from .option_types import AutoRuns, Option, RunCount
from .options import OPTIONS, flag_of, writer_named
from .run_types import RunSettings

__all__ = [
    "Calibration",
    "ClaudeCode",
    "Crowd",
    "FIELD_HOMES",
    "GROUPS",
    "Grading",
    "Hostile",
    "Merging",
    "ModelApi",
    "Outputs",
    "PROJECT_NOT_OPTIONS",
    "Pins",
    "PluginTrust",
    "RUN_CAP_HINT",
    "RunPlan",
    "Servers",
    "Settings",
    "Statistics",
    "StrayArgument",
    "TaskEvals",
    "ToolSafety",
    "UserSimulation",
    "options_of",
    "project_model",
    "run_count_problem",
    "settings_from",
]


class StrayArgument(UsageProblem):
    """A positional argument no option takes; an option the mode refuses is said first (the
    argument is often that option's imagined value: `--baseline old.json`)."""


RUN_CAP_HINT = "pass --allow-many-runs if you mean it"


def run_count_problem(value: Any, allowed: bool) -> str:
    """What is wrong with a run count (-i, --runs, a project file's iterations or runs): over
    the cap without --allow-many-runs; checked before anything runs."""
    most = value.most if isinstance(value, AutoRuns) else value
    if allowed or not isinstance(most, int) or most <= C.MAX_RUNS_PER_CASE:
        return ""
    return f"{most:,} runs a case is over the cap of {C.MAX_RUNS_PER_CASE:,}"


# The project file's schema comes from OPTIONS: every key is an option (see project.py).
# Options that make no sense in a project file: what runs is the file's suites.
PROJECT_NOT_OPTIONS = frozenset(
    {
        "compare",
        "merge",
        "from_results",
        "schema",
        "schema_of",
        "generate_triggers",
        "generate_tests",
        "force",
        "generate_count",
        "plan",
        "detect",
        "rate",
        "alpha",
        "significant_only",
        # calibrate reads a labels file and a results file; a project file runs suites
        "calibrate",
        "judged_results",
        "min_kappa",
        # import and export write folders of files; a project file runs suites
        "import_source",
        "sessions_from",
        "session",
        "should_not_use",
        "export_format",
        "mcp_server",
        "categories",
        "domain",
        "split",
        "tasks",
        "limit",
    }
)


def _project_value_type(option: Option) -> Any:
    """The type a project file's value of this option has (ranges are the option's own)."""
    kind = option.kwargs.get("type")
    if option.kwargs.get("is_flag"):
        return bool
    if isinstance(kind, click.Choice):
        base: Any = Literal[tuple(kind.choices)]  # type: ignore[misc]
    elif isinstance(kind, RunCount):
        base = int | str  # a number of runs, or auto[:MIN-MAX]
    elif isinstance(kind, click.IntRange) or kind is int:
        base = int
    elif isinstance(kind, click.FloatRange) or kind is float:
        base = float
    else:
        base = str
    return list[base] | base if option.kwargs.get("multiple") else base


def project_model() -> type[BaseModel]:
    """The project file's schema, from OPTIONS (`python evaluator.py schema project`)."""
    from pydantic import ConfigDict, Field, create_model  # its models, made when asked for

    strict = ConfigDict(extra="forbid")
    options: dict[str, Any] = {
        o.name: (_project_value_type(o) | None, Field(None, description=o.help))
        for o in OPTIONS
        if o.name not in PROJECT_NOT_OPTIONS
    }
    defaults: Any = create_model("ProjectDefaults", __config__=strict, **options)
    suite: Any = create_model(
        "ProjectSuite",
        __config__=strict,
        name=(str, Field(description="The suite's name")),
        **options,
    )
    return create_model(
        "ProjectFile",
        __config__=ConfigDict(extra="forbid", title="evaluator.yaml"),
        servers=(
            dict[str, dict[str, Any]] | None,
            Field(None, description="MCP servers in the mcpServers shape (--mcp-config inline)"),
        ),
        defaults=(defaults | None, Field(None, description="Options every suite takes")),
        suites=(list[suite], Field(description="The suites to run, in order")),
    )


# ---------------------------------------------------------------------------- the settings, by concern
# One small frozen dataclass per concern: a function below the modes takes the groups it reads,
# and its signature says which concerns those are. A group's fields are the options it holds
# (each option is the field of one group; mode_table.py's option sets are computed from them,
# options_of) and, marked `derived`, what is worked out from them once (every --model, -i auto's
# range). The defaults are test_constants.py's.
_DERIVED = {"derived": True}  # a field no option fills: worked out from the options, or internal


@dataclass(frozen=True)
class _Inputs:
    """What to evaluate: a query or conversation, a suite's files, a skill and its tests, and the
    inputs of the modes that run nothing (a results file to render, a schema)."""

    query: str | None = None
    conversation: str | None = None
    interactive: bool = False  # a person at the terminal answers Claude, one conversation
    csv: str | None = None
    tag: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    qa: str | None = None  # a QA evaluation (mcp-builder's XML)
    answer_match: str | None = None  # --answer-match: every QA pair's, instead of its own
    skill: tuple[str, ...] = ()
    trigger: tuple[str, ...] = ()
    from_results: str | None = None  # --from: render the writers from an existing results file
    schema: bool = False
    schema_of: str = "results"  # schema: the results file's schema, or the project file's
    overlap: bool = False  # --overlap: how alike the skills' descriptions are (no Claude Code run)


@dataclass(frozen=True)
class ModelApi:
    """The model under test and the Messages API that serves it. --model is repeatable (a model
    matrix): `model` is the first, the one used where one model is needed, `models` every one of
    them (every case runs on each)."""

    model: str = C.DEFAULT_MODEL
    models: tuple[str, ...] = field(default=(), metadata=_DERIVED)
    prompt: str = prompts.DEFAULT_SYSTEM_PROMPT
    max_turns: int = C.DEFAULT_MAX_TURNS
    max_tokens: int = C.DEFAULT_MAX_TOKENS
    temperature: float | None = C.DEFAULT_TEMPERATURE
    base_url: str | None = None
    max_retries: int = C.DEFAULT_MAX_RETRIES
    request_timeout: float = C.DEFAULT_REQUEST_TIMEOUT

    def __post_init__(self) -> None:
        if not self.models:
            object.__setattr__(self, "models", (self.model,))

    def client_options(self) -> dict[str, Any]:
        """What an AnthropicModel (or model_client) is made with."""
        return {
            "base_url": self.base_url,
            "max_retries": self.max_retries,
            "timeout": self.request_timeout,
        }

    def run_settings(self, concurrency: int | None, interactive: bool) -> RunSettings:
        """What the conversation engine needs: one person reads Claude as it writes
        (`interactive`), one conversation at a time."""
        return RunSettings(
            model=self.model,
            system_prompt=load_system_prompt(self.prompt),
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            max_turns=self.max_turns,
            concurrency=1 if interactive else concurrency or C.DEFAULT_CONCURRENCY,
            stream=interactive,
        )


@dataclass(frozen=True)
class Servers:
    """The MCP servers a suite's tools come from, and how long and how much a call may take."""

    server: tuple[str, ...] = ()
    server_env: tuple[str, ...] = ()
    mcp_config: str | None = None
    server_module: tuple[str, ...] = ()
    tool_timeout: float = C.DEFAULT_TOOL_TIMEOUT
    stop_grace: float = C.DEFAULT_STOP_GRACE
    max_result_chars: int = C.DEFAULT_MAX_RESULT_CHARS
    server_url: tuple[str, ...] = ()
    transport: str = "http"

    @property
    def named(self) -> bool:
        """Whether any server is named (a cassette alone needs none)."""
        return bool(self.server or self.mcp_config or self.server_module or self.server_url)


@dataclass(frozen=True)
class ToolSafety:
    """Which calls reach the real servers: the tool policy, mocks, record and replay."""

    tool_policy: str = C.DEFAULT_TOOL_POLICY
    allow_tool: tuple[str, ...] = ()
    mock_tools: str | None = None
    record: str | None = None
    replay: str | None = None
    replay_miss: str = C.DEFAULT_REPLAY_MISS


@dataclass(frozen=True)
class ClaudeCode:
    """Where each case of a suite runs (our API loop, or `claude -p`), Claude Code's tool search
    and server start-up, and which Claude Code: several --claude-bin are a version matrix."""

    harness: tuple[str, ...] = ()  # --harness: api (our loop) and/or claude-code (`claude -p`)
    tool_search: tuple[str, ...] = ()  # --tool-search: Claude Code's ENABLE_TOOL_SEARCH values
    mcp_startup: str = "wait"  # --mcp-startup: whether Claude Code waits for the servers first
    claude_bin: str | None = None  # the first --claude-bin
    claude_bins: tuple[str, ...] = field(default=(), metadata=_DERIVED)  # every --claude-bin

    def __post_init__(self) -> None:
        if not self.claude_bins and self.claude_bin:
            object.__setattr__(self, "claude_bins", (self.claude_bin,))


@dataclass(frozen=True)
class Grading:
    """Grading outcomes: the LLM judge and the state checks (`verify`)."""

    judge_model: str = C.DEFAULT_JUDGE_MODEL
    verify_timeout: float = C.DEFAULT_VERIFY_TIMEOUT


@dataclass(frozen=True)
class Calibration:
    """calibrate: people's labels (--calibrate LABELS) against the judge verdicts of a results
    file (--judged-results), and the kappa below which a grader is flagged."""

    calibrate: str | None = None
    judged_results: str | None = None
    min_kappa: float = C.DEFAULT_MIN_KAPPA


# The run plan's families: what every durable mode takes (DURABLE_OPTIONS) and what runs part of a
# suite (PARTIAL_RUN_OPTIONS); mode_table.py reads them with options_of(RunPlan, family).
_DURABLE = {"family": "durable"}
_PARTIAL = {"family": "partial"}


@dataclass(frozen=True)
class RunPlan:
    """How often each case runs, how many at once, when it passes, what an earlier run gives, what
    the run may spend, and which part of the suite this invocation runs."""

    iterations: int = C.DEFAULT_ITERATIONS
    runs: int | None = None  # --runs: skill and plugin runs per query, test or case
    auto_runs: tuple[int, int] | None = field(default=None, metadata=_DERIVED)  # -i / --runs auto
    allow_many_runs: bool = False
    threshold: float = C.DEFAULT_CASE_THRESHOLD
    concurrency: int | None = field(default=None, metadata=_DURABLE)  # None: the mode's default
    resume: bool = field(default=False, metadata=_DURABLE)
    retry_errors: bool = field(default=False, metadata=_DURABLE)
    accept_changed_tools: bool = False  # --resume: keep runs made against other tools
    max_cost: float | None = field(default=None, metadata=_DURABLE)
    dry_run: bool = field(default=False, metadata=_DURABLE)
    batch: bool = False  # --batch: model calls through the Message Batches API
    cache: str | None = None  # --cache DIR: model answers kept by request, reused on a rerun
    keyword: str | None = field(default=None, metadata=_PARTIAL)  # -k EXPR: cases by name
    fail_fast: bool = field(default=False, metadata=_PARTIAL)  # -x: stop after a failing run
    rerun_failed: str | None = field(default=None, metadata=_PARTIAL)  # a results file's failures
    shard: tuple[int, int] | None = None  # --shard K/N: a stable share of the runs


@dataclass(frozen=True)
class Outputs:
    """What the run writes: each writer's value by its name (a path, or True for a flag such as
    --json), and whether the results document keeps only the summary."""

    writers: Mapping[str, Any] = field(default_factory=dict, metadata=_DERIVED)  # WRITERS' options
    summary_only: bool = False

    @property
    def output(self) -> str | None:
        """-o FILE: the results file, beside which the journal of the run is kept."""
        return self.writers.get("output")

    @property
    def json_out(self) -> bool:
        """--json: the results on stdout (so every line we print goes to stderr)."""
        return bool(self.writers.get("json_out"))

    def own_outputs(self) -> list[Path]:
        """The files this run writes itself: the isolation check must not count them."""
        paths = [Path(p) for p in self.writers.values() if isinstance(p, str)]
        if self.output:
            paths += [
                journal_path(self.output),
                results_lines_path(self.output),
                batch_ledger_path(self.output),
            ]
        return paths


@dataclass(frozen=True)
class UserSimulation:
    """A simulated user who answers Claude: its goal, its model, how many turns it takes."""

    simulate_user: str | None = None
    user_model: str = C.DEFAULT_USER_MODEL
    max_user_turns: int = C.DEFAULT_MAX_USER_TURNS


@dataclass(frozen=True)
class _TriggerRuns:
    """Skills through Claude Code: the trigger queries' model(s), when a query counts as
    triggering, its turns and time, and the score a suite must reach."""

    trigger_model: str = C.DEFAULT_TRIGGER_MODEL
    trigger_models: tuple[str, ...] = field(default=(), metadata=_DERIVED)  # every --trigger-model
    trigger_threshold: float = C.DEFAULT_TRIGGER_THRESHOLD
    trigger_max_turns: int = C.DEFAULT_TRIGGER_MAX_TURNS
    trigger_timeout: float | None = None
    min_trigger_score: float | None = None

    def __post_init__(self) -> None:
        if not self.trigger_models:
            object.__setattr__(self, "trigger_models", (self.trigger_model,))


@dataclass(frozen=True)
class TaskEvals:
    """Task evals through Claude Code: the tools they may use, what they may read, what they
    leave, and the baselines beside them."""

    # --allow-tools Bash,Write,Edit (or Claude Code's space-separated form): task runs' tools,
    # and plugin runs' operator grant
    allow_tools: tuple[str, ...] = ()
    unconfined: bool = False  # --unconfined: their Bash runs without Claude Code's sandbox
    allow_read: tuple[str, ...] = ()  # --allow-read PATH: what task runs may read of the home
    ignore_path: tuple[str, ...] = ()  # --ignore-path GLOB: changes there are no run's doing
    artifacts: str | None = None  # --artifacts DIR
    baseline: bool = False  # --baseline: without_skill runs too
    baseline_skill: str | None = None  # --baseline-skill PATH: old_skill runs too


@dataclass(frozen=True)
class _Descriptions:
    """Descriptions tried without editing files (--skill-description, --tool-overrides), or
    improved by the optimizer on a train/test split."""

    skill_description: tuple[str, ...] = ()
    tool_overrides: str | None = None
    optimize: bool = False  # --optimize: the description optimizer
    holdout: float = C.DEFAULT_HOLDOUT
    optimize_rounds: int = C.DEFAULT_OPTIMIZE_ROUNDS
    optimizer_model: str = C.DEFAULT_OPTIMIZER_MODEL


@dataclass(frozen=True)
class Crowd:
    """The crowded room: skills and tools beside the ones under test, step by step, in the order
    (and the optimizer's split) that --seed draws."""

    distractors: tuple[str, ...] = ()
    distractor_steps: str | None = None
    distractor_tools: tuple[str, ...] = ()
    tool_steps: str | None = None
    distractors_file: str | None = None
    seed: int = C.DEFAULT_SPLIT_SEED


@dataclass(frozen=True)
class Hostile:
    """The hostile room: the suite under attack (redteam), the definitions scanned (scan)."""

    redteam: bool = False
    attacks: tuple[str, ...] = ()
    vectors: tuple[str, ...] = ()
    redteam_judge: bool = False
    scan: bool = False
    fail_on: str = C.DEFAULT_SCAN_FAIL_ON
    judge: bool = False  # scan --judge: the judge reads every definition too


@dataclass(frozen=True)
class Pins:
    """--pin: the tools' definitions checked against a lock file (a changed one stops the run
    before any model call), or written to it (--update-pins)."""

    pin: str | None = None
    update_pins: bool = False


@dataclass(frozen=True)
class Statistics:
    """Is the change real: results files compared, and how many runs a case needs (plan)."""

    compare: tuple[str, ...] = ()
    alpha: float = C.DEFAULT_ALPHA  # compare / plan (and a plugin's delta): the significance level
    significant_only: bool = False  # compare: a suspected regression does not fail (exit 0)
    plan: bool = False  # plan: the runs per case that detect a change of --detect points
    detect: float = C.DEFAULT_DETECT_POINTS
    rate: float | None = None  # plan without a results file: the pass rate assumed


@dataclass(frozen=True)
class PluginTrust:
    """Whether a plugin's own code (hooks, servers, scaffold scripts) may run without asking:
    --trust-plugin, where no one can be asked (CI, a pipe)."""

    trust_plugin: bool = False


@dataclass(frozen=True)
class _PluginEvals:
    """A whole plugin's eval suite through Claude Code (plugin PATH), in two arms."""

    plugin: str | None = None  # --plugin PATH: the plugin's folder, or an installed plugin's name
    ablation: str = C.DEFAULT_ABLATION  # --ablation: with-without, or the plugin arm alone
    case: tuple[str, ...] = ()  # --case GLOB: only the plugin's cases whose name matches
    keep_events: bool = False  # --keep-events: each plugin run's stream-json events, kept
    scaffold: bool = False  # --scaffold: each case's scaffold_script runs first
    disallow_tools: tuple[str, ...] = ()  # --disallow-tools: kept from Claude in every case
    eval_dir: str | None = None  # --eval-dir DIR: the cases' folder below the target
    mocks: str = C.DEFAULT_MOCKS  # --mocks record|off: the suite's mocks stand in for servers
    allow_real_servers: bool = False  # --allow-real-servers: unmocked servers start (record)
    record_mocks: bool = False  # --record-mocks: the real servers run, their answers kept as mocks
    baseline_from: str | None = None  # --baseline-from FILE: reuse its runs without the plugin
    fresh_baseline: bool = False  # --fresh-baseline: run the arm without the plugin anyway


@dataclass(frozen=True)
class _Exchange:
    """What import reads (a benchmark, a plugin's evals/) and export writes; their -o is a folder."""

    import_source: str | None = None  # import: bfcl | tau2 | plugin-evals | sessions
    sessions_from: str | None = None  # import sessions PATH: session logs or stream-json files
    session: tuple[str, ...] = ()  # import sessions --session N|ID|all: the sessions made cases
    should_not_use: tuple[str, ...] = ()  # import sessions: what the cases' graders forbid
    export_format: str | None = None  # export: claude-plugin-eval
    mcp_server: str | None = None  # export --csv: the plugin's server whose tools the suite names
    categories: str | None = None  # import bfcl --categories
    domain: str = C.DEFAULT_TAU2_DOMAIN  # import tau2 --domain
    split: str = C.DEFAULT_TAU2_SPLIT  # import tau2 --split
    tasks: str | None = None  # import tau2 --tasks IDS
    limit: int | None = None  # import --limit N


@dataclass(frozen=True)
class _Drafting:
    """generate: trigger queries (or a starter test set) drafted for a skill."""

    generate_triggers: str | None = None
    generate_tests: str | None = None
    generate_count: int = C.DEFAULT_GENERATED_QUERIES
    force: bool = False


@dataclass(frozen=True)
class Merging:
    """merge: the results files of a sharded run, and (not options) their runs and documents,
    replayed instead of run."""

    merge: tuple[str, ...] = ()
    merged_runs: tuple = field(default=(), metadata=_DERIVED)
    merged_pieces: tuple = field(default=(), metadata=_DERIVED)


def _groups_of(holder: type) -> dict[str, Any]:
    """The groups a holder of them (Settings) holds, each by its place in it."""
    return {f.name: f.default_factory for f in fields(holder) if f.name != "given"}


def _field_homes(holder: type) -> dict[str, str]:
    """Each field of a holder's groups -> the group's place in the holder: where a value given by
    name goes (Settings.of), and where it is read from (Settings.value)."""
    return {f.name: home for home, group in _groups_of(holder).items() for f in fields(group)}


@dataclass(frozen=True)
class Settings:
    """Every option of one invocation, parsed and validated once at the CLI boundary, held by
    concern. `given` names the options the user actually typed. The modes take it whole and hand
    each room the groups it reads."""

    inputs: _Inputs = field(default_factory=_Inputs)
    api: ModelApi = field(default_factory=ModelApi)
    servers: Servers = field(default_factory=Servers)
    tool_safety: ToolSafety = field(default_factory=ToolSafety)
    claude_code: ClaudeCode = field(default_factory=ClaudeCode)
    grading: Grading = field(default_factory=Grading)
    run_plan: RunPlan = field(default_factory=RunPlan)
    outputs: Outputs = field(default_factory=Outputs)
    user_simulation: UserSimulation = field(default_factory=UserSimulation)
    trigger_runs: _TriggerRuns = field(default_factory=_TriggerRuns)
    task_evals: TaskEvals = field(default_factory=TaskEvals)
    descriptions: _Descriptions = field(default_factory=_Descriptions)
    crowd: Crowd = field(default_factory=Crowd)
    hostile: Hostile = field(default_factory=Hostile)
    pins: Pins = field(default_factory=Pins)
    statistics: Statistics = field(default_factory=Statistics)
    plugin_evals: _PluginEvals = field(default_factory=_PluginEvals)
    trust: PluginTrust = field(default_factory=PluginTrust)
    exchange: _Exchange = field(default_factory=_Exchange)
    drafting: _Drafting = field(default_factory=_Drafting)
    merging: Merging = field(default_factory=Merging)
    calibration: Calibration = field(default_factory=Calibration)
    given: frozenset[str] = frozenset()

    @classmethod
    def of(cls, given: frozenset[str] = frozenset(), **values: Any) -> Settings:
        """Settings from values by name (an option's, or a derived field's such as `models`;
        `writers`: the writers' values), each put in its group; the rest are the defaults."""
        homes = _field_homes(cls)
        parts: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            if name not in homes:
                raise TypeError(f"no setting is named {name!r}")
            parts.setdefault(homes[name], {})[name] = value
        groups = {home: _groups_of(cls)[home](**found) for home, found in parts.items()}
        return cls(**groups, given=given)

    def given_values(self) -> dict[str, Any]:
        """Each option the user gave, by name, with its value (--model and --trigger-model: every
        one given); what a shard records of its settings (finished_run.recorded_settings)."""
        every = {"model": self.api.models, "trigger_model": self.trigger_runs.trigger_models}
        return {name: every.get(name, self.value(name)) for name in sorted(self.given)}

    def value(self, name: str) -> Any:
        """An option's value by its name (a writer's from the outputs; None for no option)."""
        home = _field_homes(type(self)).get(name)
        if home is None:
            return self.outputs.writers.get(name)
        return getattr(getattr(self, home), name)

    @property
    def matrix(self) -> bool:
        """Whether more than one model (or Claude Code version) runs the suite."""
        return (
            len(self.api.models) > 1
            or len(self.trigger_runs.trigger_models) > 1
            or len(self.claude_code.claude_bins) > 1
        )


# Each group's class by its place in Settings, and each field's place ("writers": the outputs').
GROUPS, FIELD_HOMES = _groups_of(Settings), _field_homes(Settings)


def options_of(group: type, family: str | None = None) -> frozenset[str]:
    """The options a group holds (its fields but the derived ones), or those of one family of
    it (RunPlan's durable and partial-run options)."""
    return frozenset(
        f.name
        for f in fields(group)
        if not f.metadata.get("derived") and (family is None or f.metadata.get("family") == family)
    )


def settings_from(params: dict[str, Any], given: frozenset[str]) -> Settings:
    """Settings from explicit parameters (every option's value) and the names the user gave. The
    flat form's positional files are more --compare or --merge files, or (mcp-builder's habit)
    one QA evaluation."""
    params = dict(params)
    for name in ("config", "suite", "allow_outside_outputs"):  # the run command's own
        params.pop(name, None)
    more = tuple(params.pop("files", ()) or ())
    taker = next((n for n in ("compare", "merge") if params.get(n)), None)
    alone = more[0].lower() if len(more) == 1 and taker is None else ""
    if alone.endswith(".xml") and not params.get("qa"):
        params["qa"], given, more = more[0], given | {"qa"}, ()  # `evaluator.py eval.xml`: --qa
    elif alone.endswith(".csv") and not params.get("csv"):
        params["csv"], given, more = more[0], given | {"csv"}, ()  # `evaluator.py s.csv`: --csv
    if more and taker is None:
        raise StrayArgument(
            f"unexpected argument {more[0]!r}",
            hint="only compare and merge take more than one file (a .csv or .xml alone is a suite)",
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
    for name in ("harness", "tool_search"):
        values = tuple(params.get(name) or ())
        if len(set(values)) < len(values):
            twice = next(v for v in values if values.count(v) > 1)
            raise UsageProblem(f"{flag_of(name)} {twice} is given twice", hint="name each once")
    bins = tuple(params.pop("claude_bin", ()) or ())
    if len(set(bins)) < len(bins):
        raise UsageProblem("--claude-bin is given twice with the same path", hint="name each once")
    params.update(claude_bin=bins[0] if bins else None, claude_bins=bins)
    for name in ("iterations", "runs"):
        problem = run_count_problem(params.get(name), bool(params.get("allow_many_runs")))
        if problem:
            raise UsageProblem(f"{flag_of(name)} {problem}", hint=RUN_CAP_HINT)
    for name in ("iterations", "runs"):  # -i auto / --runs auto: the cap, and the rounds
        value = params.get(name)
        if isinstance(value, AutoRuns):
            params.update({name: value.most, "auto_runs": (value.least, value.most)})
    if models:
        params.update(model=models[0], models=models)
    if trigger_models:
        params.update(trigger_model=trigger_models[0], trigger_models=trigger_models)
    return Settings.of(
        **params,
        writers={name: value for name, value in outputs.items() if value},
        given=(given - {"files", "config", "suite"}) | ({taker} if more and taker else frozenset()),
    )
