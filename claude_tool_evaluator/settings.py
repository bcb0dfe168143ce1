"""Settings: one invocation's options, parsed and checked once (settings_from), and the project
file's schema, whose keys are the same options (OPTIONS, in options.py).

May import: the rooms above it (the foundations up to the options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
from .options import OPTIONS, AutoRuns, Option, RunCount, flag_of, writer_named
from .run_types import RunSettings


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
        # import and export write folders of files; a project file runs suites
        "import_source",
        "export_format",
        "mcp_server",
        "categories",
        "domain",
        "split",
        "tasks",
        "limit",
    }
)


def project_value_type(option: Option) -> Any:
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
        o.name: (project_value_type(o) | None, Field(None, description=o.help))
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


@dataclass(frozen=True)
class Settings:
    """Every option of one invocation, parsed and validated once at the CLI boundary; the
    defaults are test_constants.py's. `given` names the options the user actually typed."""

    # what to evaluate
    query: str | None = None
    conversation: str | None = None
    csv: str | None = None
    tag: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    qa: str | None = None  # a QA evaluation (mcp-builder's XML)
    answer_match: str | None = None  # --answer-match: every QA pair's, instead of its own
    skill: tuple[str, ...] = ()
    trigger: tuple[str, ...] = ()
    compare: tuple[str, ...] = ()
    generate_triggers: str | None = None
    generate_tests: str | None = None
    generate_count: int = C.DEFAULT_GENERATED_QUERIES
    force: bool = False
    schema: bool = False
    schema_of: str = "results"  # schema: the results file's schema, or the project file's
    optimize: bool = False  # --optimize: the description optimizer
    overlap: bool = False  # --overlap: how alike the skills' descriptions are (no Claude Code run)
    alpha: float = C.DEFAULT_ALPHA  # compare / plan: the significance level
    significant_only: bool = False  # compare: a suspected regression does not fail (exit 0)
    keyword: str | None = None  # -k EXPR: only the cases whose names match
    cache: str | None = None  # --cache DIR: model answers kept by request, reused on a rerun
    fail_fast: bool = False  # -x: no run starts after the first failing one
    rerun_failed: str | None = None  # only the failing cases of this results file run again
    auto_runs: tuple[int, int] | None = None  # -i auto / --runs auto: (least, most) runs a case
    plan: bool = False  # plan: the runs per case that detect a change of --detect points
    detect: float = C.DEFAULT_DETECT_POINTS
    rate: float | None = None  # plan without a results file: the pass rate assumed
    # who answers Claude
    interactive: bool = False
    simulate_user: str | None = None
    user_model: str = C.DEFAULT_USER_MODEL
    max_user_turns: int = C.DEFAULT_MAX_USER_TURNS
    # how often, how many at once, when a case passes
    iterations: int = C.DEFAULT_ITERATIONS
    allow_many_runs: bool = False
    accept_changed_tools: bool = False
    runs: int | None = None
    concurrency: int | None = None  # None: the mode's own default
    threshold: float = C.DEFAULT_CASE_THRESHOLD
    # outputs (a writer's name -> its path, or True for a flag such as --json) and durability
    outputs: Mapping[str, Any] = field(default_factory=dict)
    from_results: str | None = None  # --from: render the writers from an existing results file
    summary_only: bool = False
    resume: bool = False
    retry_errors: bool = False
    max_cost: float | None = None
    dry_run: bool = False
    batch: bool = False  # --batch: model calls through the Message Batches API
    # the model: --model is repeatable (a model matrix); `model` is the first, the one used where
    # one model is needed, `models` every one of them (every case runs on each)
    model: str = C.DEFAULT_MODEL
    models: tuple[str, ...] = ()
    harness: tuple[str, ...] = ()  # --harness: api (our loop) and/or claude-code (`claude -p`)
    tool_search: tuple[str, ...] = ()  # --tool-search: Claude Code's ENABLE_TOOL_SEARCH values
    mcp_startup: str = "wait"  # --mcp-startup: whether Claude Code waits for the servers first
    prompt: str = prompts.DEFAULT_SYSTEM_PROMPT
    max_turns: int = C.DEFAULT_MAX_TURNS
    max_tokens: int = C.DEFAULT_MAX_TOKENS
    temperature: float | None = C.DEFAULT_TEMPERATURE
    base_url: str | None = None
    max_retries: int = C.DEFAULT_MAX_RETRIES
    request_timeout: float = C.DEFAULT_REQUEST_TIMEOUT
    # MCP servers
    server: tuple[str, ...] = ()
    server_env: tuple[str, ...] = ()
    mcp_config: str | None = None
    server_module: tuple[str, ...] = ()
    tool_timeout: float = C.DEFAULT_TOOL_TIMEOUT
    stop_grace: float = C.DEFAULT_STOP_GRACE
    max_result_chars: int = C.DEFAULT_MAX_RESULT_CHARS
    server_url: tuple[str, ...] = ()
    transport: str = "http"
    # which calls reach the real servers: the tool policy, mocks, record and replay
    tool_policy: str = C.DEFAULT_TOOL_POLICY
    allow_tool: tuple[str, ...] = ()
    mock_tools: str | None = None
    record: str | None = None
    replay: str | None = None
    replay_miss: str = C.DEFAULT_REPLAY_MISS
    # grading outcomes: the LLM judge and the state checks
    judge_model: str = C.DEFAULT_JUDGE_MODEL
    verify_timeout: float = C.DEFAULT_VERIFY_TIMEOUT
    # skills through Claude Code
    trigger_model: str = C.DEFAULT_TRIGGER_MODEL
    trigger_models: tuple[str, ...] = ()  # --trigger-model repeated: every trigger query on each
    trigger_threshold: float = C.DEFAULT_TRIGGER_THRESHOLD
    trigger_max_turns: int = C.DEFAULT_TRIGGER_MAX_TURNS
    trigger_timeout: float | None = None
    min_trigger_score: float | None = None
    claude_bin: str | None = None  # the first --claude-bin
    claude_bins: tuple[str, ...] = ()  # every --claude-bin: several are a version matrix
    # task evals through Claude Code: tools they may use, what they leave, the baselines beside them
    allow_tools: str | None = None  # --allow-tools Bash,Write,Edit (task runs only)
    unconfined: bool = False  # --unconfined: their Bash runs without Claude Code's sandbox
    allow_read: tuple[str, ...] = ()  # --allow-read PATH: what task runs may read of the home
    ignore_path: tuple[str, ...] = ()  # --ignore-path GLOB: changes there are no run's doing
    artifacts: str | None = None  # --artifacts DIR
    baseline: bool = False  # --baseline: without_skill runs too
    baseline_skill: str | None = None  # --baseline-skill PATH: old_skill runs too
    # descriptions: tried without editing files (--skill-description, --tool-overrides), or optimised
    skill_description: tuple[str, ...] = ()
    tool_overrides: str | None = None
    holdout: float = C.DEFAULT_HOLDOUT
    seed: int = C.DEFAULT_SPLIT_SEED
    optimize_rounds: int = C.DEFAULT_OPTIMIZE_ROUNDS
    optimizer_model: str = C.DEFAULT_OPTIMIZER_MODEL
    # the crowded room: skills and tools beside the ones under test, step by step
    distractors: tuple[str, ...] = ()
    distractor_steps: str | None = None
    distractor_tools: tuple[str, ...] = ()
    tool_steps: str | None = None
    distractors_file: str | None = None
    # the hostile room: the suite under attack, the definitions scanned, the definitions pinned
    redteam: bool = False
    attacks: tuple[str, ...] = ()
    vectors: tuple[str, ...] = ()
    redteam_judge: bool = False
    scan: bool = False
    fail_on: str = C.DEFAULT_SCAN_FAIL_ON
    pin: str | None = None
    update_pins: bool = False
    # at scale: a share of the runs (--shard K/N), or the pieces of a sharded run put together
    shard: tuple[int, int] | None = None
    merge: tuple[str, ...] = ()
    merged_runs: tuple = ()  # --merge: the pieces' runs, replayed instead of run (not an option)
    merged_pieces: tuple = ()  # --merge: the pieces' documents (not an option)
    # plugin: a whole plugin's eval suite through Claude Code (plugin PATH), and what import and
    # export read and write (their -o is a folder)
    plugin: str | None = None  # --plugin PATH: the plugin's folder, or an installed plugin's name
    ablation: str = C.DEFAULT_ABLATION  # --ablation: with-without, or the plugin arm alone
    case: tuple[str, ...] = ()  # --case GLOB: only the plugin's cases whose name matches
    keep_events: bool = False  # --keep-events: each plugin run's stream-json events, kept
    scaffold: bool = False  # --scaffold: each case's scaffold_script runs first
    import_source: str | None = None  # import: bfcl | tau2 | plugin-evals
    export_format: str | None = None  # export: claude-plugin-eval
    mcp_server: str | None = None  # export --csv: the plugin's server whose tools the suite names
    categories: str | None = None  # import bfcl --categories
    domain: str = C.DEFAULT_TAU2_DOMAIN  # import tau2 --domain
    split: str = C.DEFAULT_TAU2_SPLIT  # import tau2 --split
    tasks: str | None = None  # import tau2 --tasks IDS
    limit: int | None = None  # import --limit N
    given: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.models:
            object.__setattr__(self, "models", (self.model,))
        if not self.trigger_models:
            object.__setattr__(self, "trigger_models", (self.trigger_model,))
        if not self.claude_bins and self.claude_bin:
            object.__setattr__(self, "claude_bins", (self.claude_bin,))

    @property
    def matrix(self) -> bool:
        """Whether more than one model (or Claude Code version) runs the suite."""
        return len(self.models) > 1 or len(self.trigger_models) > 1 or len(self.claude_bins) > 1

    def run_settings(self) -> RunSettings:
        """What the conversation engine needs of these settings."""
        interactive = (
            self.interactive
        )  # one person reads Claude as it writes, one conversation at a time
        return RunSettings(
            model=self.model,
            system_prompt=load_system_prompt(self.prompt),
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            max_turns=self.max_turns,
            concurrency=1 if interactive else self.concurrency or C.DEFAULT_CONCURRENCY,
            stream=interactive,
        )

    @property
    def output(self) -> str | None:
        """-o FILE: the results file, beside which the journal of the run is kept."""
        return self.outputs.get("output")

    @property
    def json_out(self) -> bool:
        """--json: the results on stdout (so every line we print goes to stderr)."""
        return bool(self.outputs.get("json_out"))

    def own_outputs(self) -> list[Path]:
        """The files this run writes itself: the isolation check must not count them."""
        paths = [Path(p) for p in self.outputs.values() if isinstance(p, str)]
        if self.output:
            paths += [
                journal_path(self.output),
                results_lines_path(self.output),
                batch_ledger_path(self.output),
            ]
        return paths


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
    return Settings(
        **params,
        outputs={name: value for name, value in outputs.items() if value},
        given=(given - {"files", "config", "suite"}) | ({taker} if more and taker else frozenset()),
    )
