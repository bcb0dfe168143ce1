"""The command line: a click group whose default command is the flat CLI, one verb per row of
MODES, the project file, and the verbs that run nothing (UTILITIES: `init`, `cache`, `help`).

May import: every room above it."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import test_constants as C

from . import __version__
from .errors import (
    FatalApiError,
    InputError,
    OutputError,
    ServerError,
    UsageProblem,
    notes_of_a_run_that_went_ahead,
)
from .mode_table import MODES, modes_for_help, select_mode
from .options import OPTIONS, option_named
from .patterns import PATTERN_WORKERS
from .redaction import error_line, report_input_error
from .settings import Settings, StrayArgument, settings_from
from .sinks import terminal_text
from .stopping import (
    FORGOTTEN_AT_START,
    STOPPED_AT_END,
    interrupted_exit_code,
    stop_signals_like_ctrl_c,
    stopped_by,
)

__all__ = [
    "build_cli",
    "given_options",
    "main",
    "run_program",
]

if TYPE_CHECKING:
    from .mode_table import Mode


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


# mcp-builder's evaluation.py flags, and what says the same here: one line instead of "no such option".
_MCP_BUILDER_FLAGS = {
    "-t": "--transport",
    "-a": "--args",
    "-e": "--env",
    "-u": "--url",
    "-H": "--header",
}


def _mcp_builder_habit(args: Sequence[str]) -> None:
    """`evaluation.py -t stdio -c python -a server.py eval.xml`: the same run here is
    `--qa eval.xml --server "python server.py"`; said in one line, before anything runs."""
    if not any(a.lower().endswith(".xml") for a in args):
        return
    given = {
        _MCP_BUILDER_FLAGS.get(a, a): i
        for i, a in enumerate(args)
        if a in _MCP_BUILDER_FLAGS or a in ("--args", "--env", "--url", "--header")
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


# ---------------------------------------------------------------------------- commands and help
def _exit_stopped(code: int) -> None:
    """A stopped invocation whose outputs are written ends without tearing down every module it
    imported (most of a second, and seconds on a busy machine): what was printed is flushed and the
    pattern workers are stopped first, which is all the interpreter's exit would still do."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    PATTERN_WORKERS.close()
    os._exit(code)


_EXIT_AT_ONCE: list[bool] = []  # run as the program (run_program), not called as a function


def _end_process(code: int) -> None:
    """The invocation's end. Run as the program, the process ends at once, its outputs flushed:
    tearing down the interpreter (the SDKs' hundred thousand objects, module by module) takes a
    second or more, and nothing is left to do (every output is written, every file closed or
    removed, every child stopped). Called as a function (tests), a SystemExit as click's."""
    if not _EXIT_AT_ONCE:
        sys.exit(code)
    logging.shutdown()
    _exit_stopped(code)


_PROGRAM = "python evaluator.py"  # how the help names the program, unless invoked otherwise


def _invoked_as() -> str:
    """The name the program was invoked as, for its help: `python evaluator.py`, or the console
    script's own name (`claude-tool-eval`) when it was started as one."""
    name = Path(sys.argv[0]).name if _EXIT_AT_ONCE and sys.argv and sys.argv[0] else ""
    return _PROGRAM if not name or name.endswith(".py") else name


def _write_examples(formatter: click.HelpFormatter, examples: Sequence[str]) -> None:
    if examples:
        formatter.write("\nExamples:\n")
        for example in examples:
            formatter.write(f"  {example}\n")  # as is: a wrapped example would not copy


# Claude Code's variadic grants (`--allow-tools <tools...>`): the words after the option up to
# the next option are each a grant; click takes one value an option, so they are spread out
_VARIADIC_GRANTS = ("--allow-tools", "--disallow-tools")
_ONE_GRANT = r"[A-Za-z_][A-Za-z0-9_*-]*(?:\([^)]*\))?"
_GRANT_WORD = re.compile(rf"{_ONE_GRANT}(?:[ ,]+{_ONE_GRANT})*")


def _spread_grants(args: Sequence[str]) -> list[str]:
    """`--allow-tools Bash Write 'mcp__s__*' PATH` as click reads it: `--allow-tools Bash
    --allow-tools Write --allow-tools 'mcp__s__*' PATH`. A word that is no tool name (a path, an
    option) or names a file or folder that exists ends the grants: Claude Code would take a
    plugin's path there as a tool too, and run the folder it stands in instead."""
    spread: list[str] = []
    taking: bool | None = False  # None: the option's first word, which click takes itself
    option = ""
    for at, word in enumerate(args):
        if word == "--":
            return spread + list(args[at:])
        if word in _VARIADIC_GRANTS or word.startswith(tuple(f"{g}=" for g in _VARIADIC_GRANTS)):
            spread.append(word)
            taking, option = True, word.split("=")[0]
            if "=" not in word:
                taking = None
            continue
        if taking is None:
            taking = True
        elif taking and _GRANT_WORD.fullmatch(word) and not Path(word).exists():
            spread.append(option)
        else:
            taking = False
        spread.append(word)
    return spread


class _EvaluatorCommand(click.Command):
    """One command's help: its options grouped like the README's options tables, then its mode's
    examples, each on a line of its own (never wrapped inside a token, so they copy)."""

    def __init__(self, *args: Any, modes: Sequence[Mode] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.modes = list(modes)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _spread_grants(args))

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
        _write_examples(formatter, [e for m in self.modes for e in m.examples])

    def get_help(self, ctx: click.Context) -> str:
        return super().get_help(ctx).replace(_PROGRAM, _invoked_as())


@dataclass(frozen=True)
class _Utility:
    """A verb that runs nothing (`init`, `cache`, `help`): its name, its line in the top-level
    help, and what builds its command (given the group, which `help` reads)."""

    name: str
    summary: str
    factory: Callable[[click.Group], click.Command]


class _StoppedOutsideARun(click.Abort):
    """A stop signal (Ctrl-C) while no run was under way (start-up, loading, between suites): one
    line saying so, not click's blank line (a run under way is stopped by run_async instead)."""


_STOPPED_OUTSIDE_A_RUN = "interrupted: stopped while no run was under way"


class _FrontDoor(click.Group):
    """`python evaluator.py [VERB] ...`: a first argument that is no verb is today's flat command
    line (the `run` command), so every call that worked before works unchanged. Every usage error
    is one line and exit 2. A verb's command is built when it is asked for (click's lazily
    loading group): a start builds, and loads the rooms of, only the command it runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.factories: dict[str, Callable[[], click.Command]] = {}
        self.utilities: list[_Utility] = []  # listed after the modes in the top-level help

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.factories, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.factories:
            self.add_command(self.factories[cmd_name](), cmd_name)
        return self.commands.get(cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (
            args[0] not in self.factories and args[0] not in ("-h", "--help", "--version")
        ):
            _mcp_builder_habit(args)
            self.misspelt_verb(args)
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def misspelt_verb(self, args: list[str]) -> None:
        """`cvs suite.csv`: a first word that is no file but nearly a verb is that typo, not a
        stray argument of the flat form."""
        import difflib

        word = args[0] if args else ""
        if not word or word.startswith("-") or "/" in word or Path(word).exists():
            return
        close = difflib.get_close_matches(word, list(self.factories), n=1, cutoff=0.6)
        if close:
            raise click.UsageError(
                f"no mode or verb named {word!r}: did you mean {close[0]}? "
                f"(python evaluator.py {close[0]} ...; --help lists them)"
            )

    def get_help(self, ctx: click.Context) -> str:
        return super().get_help(ctx).replace(_PROGRAM, _invoked_as())

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write("Usage: python evaluator.py [MODE | VERB] [OPTIONS] ...\n\n")
        formatter.write(
            "  Evaluate how Claude uses the tools of your MCP servers and your Agent Skills.\n\n"
        )
        formatter.write("Modes (each also runs in the flat form, e.g. --csv FILE):\n")
        width = max(
            len(name) for name in [*(m.name for m in MODES), *(u.name for u in self.utilities)]
        )
        for mode in modes_for_help():
            formatter.write(f"  {mode.name:<{width}}  {mode.summary}\n")
        for utility in self.utilities:
            formatter.write(f"  {utility.name:<{width}}  {utility.summary}\n")
        formatter.write("\n")
        formatter.write(
            f"With no mode, {C.PROJECT_FILE} here (or --config FILE) runs its suites.\n"
        )
        formatter.write(
            "python evaluator.py MODE --help (or help MODE) lists what MODE takes; "
            "run --help lists every option.\n"
        )
        _write_examples(
            formatter,
            [
                'python evaluator.py -q "Which warehouse connections do I have?" '
                "--server-module examples/profiles_server.py",
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

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # before click's handler, which prints a blank line
            raise _StoppedOutsideARun() from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,  # click's; the front door always ends the process itself
        **extra: Any,
    ) -> Any:
        for forget in FORGOTTEN_AT_START:  # what an earlier invocation in this process left
            forget()
        try:
            with stop_signals_like_ctrl_c():
                code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            click.echo(error_line(exc.format_message()), err=True)
            code = 2
        except InputError as exc:
            report_input_error(exc)
            code = 2
        except _StoppedOutsideARun:
            click.echo(_STOPPED_OUTSIDE_A_RUN, err=True)
            code = interrupted_exit_code()
        except click.Abort:
            code = interrupted_exit_code()
        finally:
            for stop in STOPPED_AT_END:  # whatever ended the invocation (no server outlives it)
                stop()
        if stopped_by:
            _exit_stopped(code or 0)
        _end_process(code or 0)


def _invoke(settings_of: Callable[[], Settings], chosen: Mode | None = None) -> int:
    """Runs one command's settings; what stops it before a result is one line and exit 2. The
    rooms a run needs load here, not at the start."""
    from .dispatch import run_settings_for

    notes_of_a_run_that_went_ahead(False)  # what an earlier invocation in this process kept
    went_ahead = False
    try:
        code = run_settings_for(settings_of(), chosen)
        went_ahead = True
        return code
    except InputError as exc:
        report_input_error(exc)
        return 2
    except (ServerError, FatalApiError, OutputError) as exc:
        click.echo(error_line(exc), err=True)  # one line: redacted whole, then escaped
        return 2
    finally:
        for note in notes_of_a_run_that_went_ahead(went_ahead):
            click.echo(note, err=True)


_CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def _say_refused_option_first(params: dict[str, Any], given: frozenset[str]) -> None:
    """An option the mode refuses, when there is one: `--csv s.csv --baseline old.json` is
    "--baseline does not apply to --csv runs", not "unexpected argument 'old.json'"."""
    try:
        select_mode(settings_from(params, given))
    except UsageProblem:
        raise
    except InputError:  # no mode at all: the stray argument is the problem
        pass


def _run_command() -> click.Command:
    """Today's flat command line: every option, the mode chosen by the flags given; with no mode
    and a project file, the project's suites."""

    def run(**params: Any) -> int:
        allow_outside_outputs = params.pop("allow_outside_outputs")  # the project's, no option
        given = given_options(click.get_current_context()) - {"allow_outside_outputs"}
        try:
            settings = settings_from(params, given)
        except StrayArgument:
            _say_refused_option_first({**params, "files": ()}, given)
            raise
        project = Path(params.get("config") or C.PROJECT_FILE)
        if params.get("config") or (
            project.is_file() and not any(m.selected(settings) for m in MODES)
        ):
            from .project import run_project

            return run_project(
                project, params.get("suite") or (), params, given, allow_outside_outputs
            )
        if allow_outside_outputs:
            raise UsageProblem(
                "--allow-outside-outputs lets a project file write outside its folder, and no "
                "project file runs here",
                hint="give --config FILE, or leave it out: the command line's outputs go where "
                "it says",
            )
        return _invoke(lambda: settings)

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
        click.Option(
            ["--allow-outside-outputs"],
            is_flag=True,
            help="With a project file: let its outputs (output, report, ...) be written outside "
            "its folder.",
        ),
    ]
    return _EvaluatorCommand(
        "run",
        params=params,
        callback=run,
        modes=MODES,
        help="Today's flat command line: every option; the flags given choose the mode.",
        context_settings=_CONTEXT_SETTINGS,
    )


def _option_defaults() -> dict[str, Any]:
    """Every option's default, as click gives it (what a command line that names none gets)."""
    command = click.Command("defaults", params=[o.click_parameter() for o in OPTIONS])
    return dict(command.make_context("defaults", [], resilient_parsing=True).params)


def _positional_metavar(mode: Mode) -> str:
    """`FILE.csv`, `OLD.json NEW.json [...] ...`, `bfcl|tau2|plugin-evals [PATH]`: what a verb's
    positional arguments are, from the options they fill (the first given, the rest optional)."""
    shown = []
    for index, name in enumerate(mode.arguments):
        option = option_named(name)
        kind = option.kwargs.get("type") if option else None
        metavar = (option.kwargs.get("metavar") if option else None) or (
            "|".join(kind.choices) if isinstance(kind, click.Choice) else name.upper()
        )
        if option and (option.kwargs.get("multiple") or name in ("compare", "merge")):
            metavar += " ..."
        shown.append(metavar if index == 0 else f"[{metavar}]")
    return " ".join(shown)


def _fill_arguments(mode: Mode, values: Sequence[str], params: dict[str, Any]) -> set[str]:
    """A verb's positional arguments put into the options they fill (mode.arguments, in order;
    the last takes the rest when it is repeatable), each checked by its option's own type (`import
    bfcl`'s choice): the names filled."""
    filled: set[str] = set()
    values = list(values)
    names = list(dict(mode.arguments_after).get(values[0], mode.arguments) if values else ())
    for index, name in enumerate(names):
        if not values:
            break
        option = option_named(name)
        if option is None:
            continue
        many = index == len(names) - 1 and bool(
            option.kwargs.get("multiple") or name in ("compare", "merge")
        )
        taken, values = (values, []) if many else (values[:1], values[1:])
        kind = option.kwargs.get("type")
        if isinstance(kind, click.ParamType):
            try:
                taken = [kind.convert(v, None, None) for v in taken]
            except click.BadParameter as exc:
                raise click.UsageError(f"{mode.name}: {exc.format_message()}") from None
        current = params.get(name)
        params[name] = tuple(current or ()) + tuple(taken) if many else taken[0]
        filled.add(name)
    if values:
        raise click.UsageError(
            f"{mode.name} takes {_positional_metavar(mode)}, not also {values[0]!r}"
        )
    return filled


def _mode_command(mode: Mode) -> click.Command:
    """A verb: only the options its mode takes; its positional arguments fill mode.arguments."""

    def run(**params: Any) -> int:
        context = click.get_current_context()
        given = given_options(context) - {"arguments"}
        given |= _fill_arguments(mode, params.pop("arguments", ()) or (), params)
        for name, value in mode.implies:
            params[name] = value
            given |= {name}
        return _invoke(lambda: settings_from({**_option_defaults(), **params}, given), mode)

    params: list[click.Parameter] = []
    if any(mode.arguments):
        params.append(
            click.Argument(
                ["arguments"], nargs=-1, required=False, metavar=_positional_metavar(mode)
            )
        )
    params += [o.click_parameter() for o in OPTIONS if mode.takes(o.name)]
    return _EvaluatorCommand(
        mode.name,
        params=params,
        callback=run,
        modes=[mode],
        help=f"{mode.summary[:1].upper()}{mode.summary[1:]}.",
        context_settings=_CONTEXT_SETTINGS,
    )


def _init_command() -> click.Command:
    @click.command("init", context_settings=_CONTEXT_SETTINGS)
    def init() -> int:
        """Write a starter evaluator.yaml from what this folder holds (never overwrites one)."""
        from .project import init_project

        return init_project(Path.cwd())

    return init


def _cache_command() -> click.Command:
    """`cache verify DIR` / `cache prune DIR`: a --cache folder read as the untrusted input it is."""
    from .cache import prune_cache, verify_cache

    @click.group("cache", context_settings=_CONTEXT_SETTINGS)
    def cache() -> None:
        """Check or clean a --cache folder (entries edited, copied, broken or unused)."""

    @cache.command("verify", context_settings=_CONTEXT_SETTINGS)
    @click.argument("folder", metavar="DIR")
    def verify(folder: str) -> int:
        """Every entry a run would refuse, one line each (exit 1 if any), and which key sealed
        the entries: CLAUDE_TOOL_EVAL_CACHE_SECRET when it is set (verify with the same), else
        this install's own key (in ~/.config/claude-tool-evaluator/)."""
        refused, sound, sealed = verify_cache(folder)
        for line in refused:
            click.echo(line)
        counted = f"{sound} entr{'y' if sound == 1 else 'ies'} sound"
        click.echo(
            "sealed with "
            + (", ".join(f"{name}: {count}" for name, count in sealed.items()) or "nothing")
        )
        said = f"{len(refused)} refused (`cache prune` removes them)" if refused else "none refused"
        click.echo(f"{terminal_text(folder)}: {counted}, {said}")
        return 1 if refused else 0

    @cache.command("prune", context_settings=_CONTEXT_SETTINGS)
    @click.argument("folder", metavar="DIR")
    @click.option(
        "--unused-for",
        type=click.FloatRange(min=0),
        metavar="DAYS",
        help="Also remove sound entries no run has read for DAYS days.",
    )
    @click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
    def prune(folder: str, unused_for: float | None, dry_run: bool) -> int:
        """Remove every entry a run would refuse (and, with --unused-for, stale ones)."""
        for line in prune_cache(folder, unused_for, dry_run):
            click.echo(line)
        return 0

    return cache


def _help_command(group: click.Group) -> click.Command:
    @click.command("help", context_settings=_CONTEXT_SETTINGS)
    @click.argument("topic", required=False)
    def help_(topic: str | None) -> int:
        """help MODE: only the options MODE takes, with its examples."""
        context = click.get_current_context()
        target = group.get_command(context, topic) if topic else None
        if topic and target is None:
            raise click.UsageError(
                f"no mode or verb named {topic!r}: try one of "
                + ", ".join(group.list_commands(context))
            )
        shown = target or group
        click.echo(
            shown.get_help(
                click.Context(shown, info_name=topic or "evaluator.py", parent=context.parent)
            )
        )
        return 0

    return help_


# The verbs that run nothing, listed after the modes in the top-level help.
_UTILITIES = (
    _Utility(
        "init",
        f"write a starter {C.PROJECT_FILE} from this folder",
        lambda group: _init_command(),
    ),
    _Utility(
        "cache",
        "cache verify | prune DIR: check or clean a --cache folder",
        lambda group: _cache_command(),
    ),
    _Utility("help", "help MODE: only the options MODE takes, with examples", _help_command),
)


def build_cli() -> click.Group:
    """The command line, built from the tables (OPTIONS, WRITERS, MODES) as they are now: a
    factory per verb, each command built when it is asked for."""
    group = _FrontDoor(context_settings=_CONTEXT_SETTINGS, invoke_without_command=False)
    group.factories["run"] = _run_command
    for mode in MODES:
        group.factories[mode.name] = functools.partial(_mode_command, mode)
    for utility in _UTILITIES:
        group.factories[utility.name] = functools.partial(utility.factory, group)
    group.utilities = list(_UTILITIES)
    click.version_option(__version__, "--version", prog_name="claude-tool-eval")(group)
    return group


main = build_cli()


def run_program() -> None:
    """The program (`python evaluator.py`, `claude-tool-eval`): like main(), but it ends the
    process as soon as its outputs are written (see end_process)."""
    _EXIT_AT_ONCE.append(True)
    main()


if __name__ == "__main__":
    run_program()
