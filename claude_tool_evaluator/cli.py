"""The command line: a click group whose default command is the flat CLI, one verb per row of
MODES, the project file, `init`, `import` and `help`.

May import: every room above it."""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from pydantic import ValidationError

import test_constants as C

from . import __version__
from .errors import FatalApiError, InputError, OutputError, ServerError, UsageProblem
from .files import read_text_file, write_text_atomic
from .hub.stdio import stop_stdio_servers
from .loaders.csv_suites import load_csv_suite
from .loaders.qa import load_qa_suite
from .loaders.servers import config_server_spec
from .loaders.skills import load_frontmatter_yaml, load_markdown_tests, load_skill
from .mode_table import MODES, check_output_paths, run_settings_for, select_mode
from .modes.benchmarks import (
    TAU2_DOMAINS,
    TAU2_SPLITS,
    bfcl_categories,
    import_bfcl,
    import_folder,
    import_tau2,
)
from .options import (
    OPTIONS,
    PROJECT_NOT_OPTIONS,
    AutoRuns,
    Settings,
    flag_of,
    option_named,
    project_model,
)
from .patterns import PATTERN_WORKERS
from .redaction import Redactor, error_line
from .results import writer_named
from .runners.generate import yaml_scalar
from .scoring.literature import BFCL_CATEGORIES
from .session import ENDPOINTS_ANSWERING
from .sinks import make_console, safe_name, terminal_text
from .stopping import (
    EXIT_INTERRUPTED,
    STOP_SIGNALS,
    interrupted_exit_code,
    stop_signals_like_ctrl_c,
    stopped_by,
)
from .writers.github import GithubStep, report_input_error

if TYPE_CHECKING:
    from .mode_table import Mode
    from .options import Option


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
