"""The mode table (MODES): one row per mode (what selects it, the options it takes, what runs
it, its examples), how a mode is chosen and an option refused, merging shards, and the outputs
checked before anything runs.

May import: every room above it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import test_constants as C

from .errors import InputError, UsageProblem
from .files import (
    batch_ledger_path,
    check_writable_folder,
    file_key,
    journal_path,
    results_lines_path,
)
from .loaders.skills import kind_of_test_file
from .modes.hostile import redteam_mode, scan_mode
from .modes.optimizer import optimize_mode, optimized_file_path
from .modes.overlap import overlap_mode
from .modes.results_files import compare_mode, generate_mode, plan_mode, render_mode, schema_mode
from .modes.skills import skill_mode
from .modes.tool_suites import csv_mode, markdown_mode, qa_files_given, qa_mode, query_mode
from .options import OPTIONS, Settings, flag_of, option_named, option_order
from .pipeline import output_lock
from .result_records import ToolRunResult, merged_piece_runs, read_results_document
from .results import WRITERS, writer_named
from .session import ResponseCache
from .sinks import make_console

if TYPE_CHECKING:
    from .result_records import Metadata, ResultsDocument, RunResult


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
