"""The mode table (MODES): one row per mode (what selects it, the options it takes, the function
that runs it, named by its room and loaded when it runs, its examples), and how a mode is chosen
and an option refused. The command line's help reads it without loading any mode.

May import: every room above the modes (the rows name the modes' rooms, not import them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import test_constants as C

from .errors import InputError, UsageProblem
from .options import OPTIONS, flag_of, option_named, option_order
from .rooms import RoomFunction
from .settings import (
    ClaudeCode,
    Grading,
    ModelApi,
    Pins,
    PluginTrust,
    RunPlan,
    Servers,
    Settings,
    TaskEvals,
    ToolSafety,
    UserSimulation,
    options_of,
)
from .writers import writer_named

__all__ = [
    "MODES",
    "Mode",
    "mode_named",
    "modes_for_help",
    "select_mode",
]

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console


# The option sets the rows share, each a group of Settings (or, the run plan's, a family of one):
# an option added to a group is in its set, so the table and the settings cannot drift apart.
_DURABLE_OPTIONS = options_of(RunPlan, "durable")


_MODEL_OPTIONS = options_of(ModelApi)


_SERVER_OPTIONS = options_of(Servers)


_TOOL_SAFETY_OPTIONS = options_of(ToolSafety)


# suites through Claude Code too: where each case runs, its tool search, which Claude Code
_HARNESS_OPTIONS = options_of(ClaudeCode)


_GRADING_OPTIONS = options_of(Grading)  # cases may carry a rubric or verify


# running part of a suite: some of its cases, stopping at the first failure, or the failed ones again
_PARTIAL_RUN_OPTIONS = options_of(RunPlan, "partial")


_SIMULATED_USER_OPTIONS = options_of(UserSimulation)


# task evals through Claude Code: what they may do, read and leave, their baselines
_TASK_EVAL_OPTIONS = options_of(TaskEvals)


# a plugin's own code (hooks, servers, scaffold scripts) runs only in a trusted folder
_TRUST_OPTIONS = options_of(PluginTrust)


_TOOL_USE_OPTIONS = (
    _TRUST_OPTIONS
    | _DURABLE_OPTIONS
    | _MODEL_OPTIONS
    | _SERVER_OPTIONS
    | _SIMULATED_USER_OPTIONS
    | _TOOL_SAFETY_OPTIONS
    | {"iterations", "allow_many_runs", "threshold", "summary_only", "tool_overrides"}
    | {"accept_changed_tools"}
    | {"batch", "cache"}
    | options_of(Pins)
)


# scan: what reaches the servers (or the cassette), the severity that fails, the judge (its model,
# price, budget and cache), the pins, and the writers of findings (a scan makes no runs:
# --csv-out, a row per run, is refused)
_SCAN_OPTIONS = frozenset(
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
        "trust_plugin",
        "judge",
        "judge_model",
        "max_cost",
        "dry_run",
        "cache",
        "pin",
        "update_pins",
        "output",
        "report",
        "junit",
        "html",
        "json_out",
    }
)


# plugin: a plugin's suite through Claude Code in two arms, durable as every suite (the journal,
# --resume, --retry-errors, --shard, --max-cost), the matrices of skill runs, and its own options
_PLUGIN_OPTIONS = frozenset(
    {
        "plugin",
        "runs",
        "model",
        "claude_bin",
        "base_url",
        "judge_model",
        "concurrency",
        "alpha",
        "cache",
        "max_cost",
        "dry_run",
        "resume",
        "retry_errors",
        "shard",
        "distractors",
        "ablation",
        "case",
        "keep_events",
        "scaffold",
        "trust_plugin",
        "unconfined",
        "allow_read",
        "allow_tools",
        "disallow_tools",
        "eval_dir",
        "tag",
        "threshold",
        "mocks",
        "allow_real_servers",
        "record_mocks",
        "baseline_from",
        "fresh_baseline",
    }
)


def _test_files_of_kind(settings: Settings, kind: str) -> bool:
    """Whether any --tests file is of this kind (its loader's room loads when a mode is chosen,
    not for the help)."""
    from .loaders.skills import kind_of_test_file

    return any(kind_of_test_file(f) == kind for f in settings.inputs.tests)


def _qa_files_given(settings: Settings) -> bool:
    """--qa, or a QA evaluation (.xml) among the --tests files."""
    return bool(settings.inputs.qa) or _test_files_of_kind(settings, "qa")


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
    # the option(s) its verb's positional arguments fill, in order (`csv FILE` is --csv; `import
    # plugin-evals PLUGIN` is --import plugin-evals --plugin PLUGIN)
    argument: str | tuple[str, ...] = ""
    implies: tuple[tuple[str, Any], ...] = ()  # what its verb sets (`optimize` is --optimize)
    # what its first positional argument changes: the options the positionals then fill
    # (`import sessions PATH` is --import sessions --sessions-from PATH)
    arguments_after: tuple[tuple[str, tuple[str, ...]], ...] = ()
    writes_folder: bool = False  # its -o is a folder it writes files into (import, export)
    # the files it reads beyond the paths its options name (a plugin's suite): no output may be one
    inputs: Callable[[Settings], list[tuple[str, Path]]] | None = None

    @property
    def arguments(self) -> tuple[str, ...]:
        return (self.argument,) if isinstance(self.argument, str) else self.argument

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


MODES.extend(
    (
        # export and import first: their command lines hold options that select other modes
        # (export --skill S --tests T), and only --export / --import selects them
        Mode(
            "export",
            "export",
            lambda s: bool(s.exchange.export_format),
            frozenset(
                {
                    "export_format",
                    "output",
                    "skill",
                    "tests",
                    "csv",
                    "mcp_server",
                    "runs",
                    "dry_run",
                }
            ),
            RoomFunction("modes.plugin_export", "export_mode"),
            (
                "python evaluator.py export claude-plugin-eval --skill examples/skills/warehouse-sql "
                "--tests examples/triggers/warehouse-sql-trigger.md -o warehouse-sql-plugin",
                "python evaluator.py export claude-plugin-eval --skill "
                "examples/skills/data-profile-report --tests "
                "examples/triggers/data-profile-report-trigger.md -o data-profile-plugin --dry-run",
            ),
            "trigger sets, task evals or a CSV suite as claude plugin eval cases",
            "none",
            "export_format",
            writes_folder=True,
        ),
        Mode(
            "import",
            "import",
            lambda s: bool(s.exchange.import_source),
            frozenset(
                {
                    "import_source",
                    "plugin",
                    "output",
                    "categories",
                    "domain",
                    "split",
                    "tasks",
                    "limit",
                    "sessions_from",
                    "session",
                    "should_not_use",
                    "force",
                    "dry_run",
                }
            ),
            RoomFunction("modes.imports", "import_mode"),
            (
                "python evaluator.py import bfcl --categories simple_python --limit 5 -o bfcl-suite",
                "python evaluator.py import tau2 --domain airline --limit 3 -o tau2-airline",
                "python evaluator.py import plugin-evals tests/plugins/greeter -o greeter-suites",
                "python evaluator.py import sessions ~/.claude/projects/my-project",
                "python evaluator.py import sessions ~/.claude/projects/my-project --session 1 -o "
                "my-plugin",
            ),
            "a benchmark (bfcl, tau2) or a plugin's evals/ suite as this product's suites, or "
            "Claude Code sessions as plugin eval cases",
            "none",
            ("import_source", "plugin"),
            arguments_after=(("sessions", ("import_source", "sessions_from")),),
            writes_folder=True,
        ),
        Mode(
            "plugin",
            "plugin runs",
            lambda s: bool(s.plugin_evals.plugin),
            _PLUGIN_OPTIONS,
            RoomFunction("modes.plugin", "plugin_mode"),
            (
                "python evaluator.py plugin tests/plugins/greeter --dry-run",
                "python evaluator.py plugin tests/plugins/greeter --runs 5 -o plugin.json --report "
                "plugin.md --html plugin.html",
                "python evaluator.py plugin tests/plugins/greeter --shard 1/2 -o shard-1.json",
            ),
            "a plugin's evals/ suite through Claude Code, with and without the plugin",
            "results",
            "plugin",
            inputs=RoomFunction("modes.plugin", "plugin_inputs"),
        ),
        Mode(
            "schema",
            "--schema",
            lambda s: s.inputs.schema,
            frozenset({"schema", "schema_of", "output"}),
            RoomFunction("modes.results_files", "schema_mode"),
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
            lambda s: bool(s.drafting.generate_triggers or s.drafting.generate_tests),
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
            RoomFunction("modes.results_files", "generate_mode"),
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
            lambda s: bool(s.statistics.compare),
            frozenset({"compare", "alpha", "significant_only"}),
            RoomFunction("modes.results_files", "compare_mode"),
            ("python evaluator.py compare old.json new.json --report diff.md --html diff.html",),
            "compare results files: significant regressions and fixes, pass rate and cost",
            "comparison",
            "compare",
        ),
        Mode(
            "calibrate",
            "calibrate",
            lambda s: bool(s.calibration.calibrate),
            # it calls no model: nothing to price (--dry-run) or cap (--max-cost), both refused
            frozenset(
                {"calibrate", "judged_results", "min_kappa", "output", "report", "html", "json_out"}
            ),
            RoomFunction("modes.calibrate", "calibrate_mode"),
            (
                "python evaluator.py calibrate labels.csv results.json --report calibration.md",
                "python evaluator.py render results.json --label-sheet label-sheet.html",
            ),
            "the judge against people: agreement and Cohen's kappa per judge grader",
            "none",
            ("calibrate", "judged_results"),
        ),
        Mode(
            "merge",
            "--merge",
            lambda s: bool(s.merging.merge),
            frozenset({"merge"}),
            RoomFunction("dispatch", "merge_mode"),
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
            lambda s: s.statistics.plan,
            frozenset({"plan", "from_results", "detect", "rate", "alpha"}),
            RoomFunction("modes.results_files", "plan_mode"),
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
            lambda s: bool(s.inputs.from_results),
            frozenset({"from_results"}),
            RoomFunction("modes.results_files", "render_mode"),
            ("python evaluator.py render results.json --html report.html",),
            "write the reports of an existing results file; nothing runs",
            "render",
            "from_results",
        ),
        Mode(
            "optimize",
            "--optimize runs",
            lambda s: s.descriptions.optimize,
            frozenset(
                {
                    "optimize",
                    "trust_plugin",
                    "holdout",
                    "seed",
                    "optimize_rounds",
                    "optimizer_model",
                    "runs",
                    "allow_many_runs",
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
            RoomFunction("modes.optimizer", "optimize_mode"),
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
            lambda s: s.inputs.overlap,
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
            RoomFunction("modes.overlap", "overlap_mode"),
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
            lambda s: s.hostile.scan,
            _SCAN_OPTIONS,
            RoomFunction("modes.hostile", "scan_mode"),
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
            lambda s: s.hostile.redteam,
            _TOOL_USE_OPTIONS
            | _GRADING_OPTIONS
            # its servers are the evaluator's in-process proxies, ready at once: no --mcp-startup
            | (_HARNESS_OPTIONS - {"mcp_startup"})
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
            RoomFunction("modes.hostile", "redteam_mode"),
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
            lambda s: bool(s.inputs.skill or s.inputs.trigger),
            _DURABLE_OPTIONS
            | _TASK_EVAL_OPTIONS
            | _PARTIAL_RUN_OPTIONS
            | _TRUST_OPTIONS
            | {
                "skill",
                "tests",
                "trigger",
                "trigger_model",
                "trigger_threshold",
                "trigger_max_turns",
                "trigger_timeout",
                "runs",
                "allow_many_runs",
                "min_trigger_score",
                "claude_bin",
                "model",
                "max_turns",
                "base_url",
                "mcp_config",
                "skill_description",
                "shard",
                "judge_model",
                "distractors",
                "distractor_steps",
                "distractors_file",
                "seed",
                "cache",
            },
            RoomFunction("modes.skills", "skill_mode"),
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
            lambda s: bool(s.inputs.tests) and not _test_files_of_kind(s, "qa"),
            _TOOL_USE_OPTIONS
            | _GRADING_OPTIONS
            | _PARTIAL_RUN_OPTIONS
            | _HARNESS_OPTIONS
            | {"tests", "shard"},
            RoomFunction("modes.tool_suites", "markdown_mode"),
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
            _qa_files_given,
            _TOOL_USE_OPTIONS
            | _PARTIAL_RUN_OPTIONS
            | _HARNESS_OPTIONS
            | {"judge_model", "qa", "tests", "answer_match", "shard"},
            RoomFunction("modes.tool_suites", "qa_mode"),
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
            lambda s: bool(s.inputs.csv),
            _TOOL_USE_OPTIONS
            | _GRADING_OPTIONS
            | _PARTIAL_RUN_OPTIONS
            | _HARNESS_OPTIONS
            | {"csv", "tag", "shard", "distractor_tools", "tool_steps", "distractors_file", "seed"},
            RoomFunction("modes.tool_suites", "csv_mode"),
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
                s.inputs.query is not None
                or bool(s.inputs.conversation)
                or s.inputs.interactive
                or s.user_simulation.simulate_user is not None
            ),
            _TOOL_USE_OPTIONS | _HARNESS_OPTIONS | {"query", "conversation", "interactive"},
            RoomFunction("modes.tool_suites", "query_mode"),
            (
                'python evaluator.py -q "Which warehouse connections do I have?" -i 5 -o results.json',
                "python evaluator.py -c examples/sample_conv.md -o conv.json",
                'python evaluator.py -q "Help me set up a profiles project" --interactive',
                'python evaluator.py -q "Build an LTV model" --simulate-user "an analyst on Snowflake '
                'prod"',
            ),
            "one query (-q TEXT) or conversation (-c FILE, --interactive, or a simulated user)",
            "results",
            "query",
        ),
    )
)


# The order --help lists the modes in: the everyday jobs first (a query, a suite, a skill), the
# tools around them after. MODES keeps its own order: the one a flat command line selects in.
_HELP_ORDER = (
    "query",
    "csv",
    "markdown",
    "qa",
    "skills",
    "plugin",
    "compare",
    "plan",
    "calibrate",
    "optimize",
    "overlap",
    "redteam",
    "scan",
    "merge",
    "render",
    "generate",
    "import",
    "export",
    "schema",
)


def modes_for_help() -> list[Mode]:
    """Every mode, in HELP_ORDER (a mode it does not name yet comes last)."""
    place = {name: index for index, name in enumerate(_HELP_ORDER)}
    return sorted(MODES, key=lambda m: place.get(m.name, len(place)))


def mode_named(name: str) -> Mode | None:
    return next((m for m in MODES if m.name == name), None)


# A refused option whose twin the mode takes: the refusal names the twin instead of other modes.
_TWINS = {
    "iterations": ("runs", "--runs N: every query and test runs N times"),
    "runs": ("iterations", "-i N: every case runs N times"),
}


def _refusal(name: str, mode: Mode) -> str:
    twin, how = _TWINS.get(name, ("", ""))
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
        argument = option_named(mode.arguments[0])
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
        raise UsageProblem(_refusal(refused[0], mode))
    return mode
