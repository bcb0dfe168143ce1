"""The project file (evaluator.yaml, or --config FILE): its servers, defaults and suites, each
suite run as the command line would run it, from the file's folder; and `init`, which writes a
starter project file from what a folder holds. Loaded when a project file runs or `init` does.

May import: every room above it but the command line."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from pydantic import ValidationError

import test_constants as C

from .dispatch import (
    check_output_paths,
    input_paths,
    output_paths,
    run_settings_for,
    writer_flagged,
)
from .errors import FatalApiError, InputError, OutputError, ServerError, UsageProblem
from .files import file_key, read_text_file, write_text_atomic
from .loaders.csv_suites import load_csv_suite
from .loaders.qa import load_qa_suite
from .loaders.servers import config_server_spec
from .loaders.skills import load_frontmatter_yaml, load_markdown_tests, load_skill
from .mode_table import MODES, select_mode
from .options import OPTIONS, WRITERS, flag_of, option_named, writer_named
from .redaction import error_line
from .runners.generate import yaml_scalar
from .settings import (
    PROJECT_NOT_OPTIONS,
    RUN_CAP_HINT,
    project_model,
    run_count_problem,
    settings_from,
)
from .sinks import escape_markup, make_console, safe_name, terminal_text, wrote_line
from .stopping import EXIT_INTERRUPTED, STOP_SIGNALS

__all__ = [
    "init_project",
    "load_project",
    "run_project",
]

if TYPE_CHECKING:
    from .mode_table import Mode
    from .option_types import Option
    from .settings import Settings


# ---------------------------------------------------------------------------- the project file
# evaluator.yaml (or --config FILE): servers in the mcpServers shape, `defaults` for every suite,
# and `suites`, each a name plus options. Every key is an option of the command line and means the
# same (the values go through the same click types); options given on the command line override
# the file. Each suite runs from the file's folder, so its paths are relative to the file.
def _yaml_with_lines(text: str, path: Path) -> tuple[Any, dict[tuple, int]]:
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
class _ProjectSuite:
    name: str
    values: dict[str, Any]  # option -> the file's value, as written
    line: int


@dataclass
class _Project:
    path: Path
    suites: list[_ProjectSuite]
    mcp_config: Path | None = None  # the file's servers, written as an mcpServers file
    lines: dict[tuple, int] = field(default_factory=dict)


def _project_error(exc: ValidationError, path: Path, lines: dict[tuple, int]) -> InputError:
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


def load_project(path: Path) -> _Project:
    text = read_text_file(path, "project file")
    data, lines = _yaml_with_lines(text, path)
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
        raise _project_error(exc, path, lines) from None
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
        suites.append(_ProjectSuite(entry["name"], values, line))
    project = _Project(path, suites, lines=lines)
    if checked.servers:  # type: ignore[attr-defined]
        for name, entry in data["servers"].items():
            config_server_spec(name, entry, path, text)  # each server checked like an mcp.json's
    return project


_SERVER_SOURCES = frozenset({"server", "mcp_config", "server_module", "server_url", "replay"})


def _key_line(project: _Project, suite: _ProjectSuite, name: str) -> int:
    """The line of a suite's key: its own, else the `defaults:` one it took, else the suite's."""
    at = ("suites", project.suites.index(suite), name)
    return project.lines.get(at) or project.lines.get(("defaults", name)) or suite.line


def _project_params(
    project: _Project, suite: _ProjectSuite, overrides: dict[str, Any], given: frozenset[str]
) -> tuple[dict, frozenset]:
    """A suite's parameters: every option's default, the file's values (through the options' own
    click types and callbacks), then what the command line gave."""
    by_name = {o.name: o.click_parameter() for o in OPTIONS}
    command = click.Command("project", params=list(by_name.values()))
    context = command.make_context("project", [], resilient_parsing=True)
    params = dict(context.params)
    for name, value in suite.values.items():
        line = _key_line(project, suite, name)
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
    if project.mcp_config and not (set(suite.values) & _SERVER_SOURCES):
        params["mcp_config"] = str(project.mcp_config)
    file_given = frozenset(suite.values) | (
        {"mcp_config"} if "mcp_config" in params and project.mcp_config else frozenset()
    )
    params.update({name: overrides[name] for name in given})
    for name in ("iterations", "runs"):  # the file's own run counts, refused at their line
        problem = run_count_problem(params.get(name), bool(params.get("allow_many_runs")))
        if problem and name in suite.values and name not in given:
            raise InputError(
                f"{name}: {problem}", project.path, _key_line(project, suite, name), RUN_CAP_HINT
            )
    return params, file_given | given


# What a project file's suite writes: every writer's file, and the files and folders these options
# fill (cassettes, task artifacts, decoys, pins, the answer cache). A project file's value of any
# of them stays inside the project's folder, links followed, unless the user who runs it says
# otherwise (--allow-outside-outputs): a project file from a pull request or a download cannot
# write over ~/.bashrc. The command line's own values go where the user typed.
_WRITTEN_BY_RUNS = ("record", "artifacts", "distractors_file", "pin", "cache")


def _written_keys() -> list[str]:
    return [w.name for w in WRITERS if w.takes_path] + list(_WRITTEN_BY_RUNS)


def _check_outputs_inside(
    project: _Project,
    suite: _ProjectSuite,
    params: dict[str, Any],
    given: frozenset[str],
    folder: Path,
) -> None:
    """Run from the project's folder (`folder`, resolved before moving there: the file's own
    path may be relative to where the command was typed): each of its outputs resolves inside."""
    for name in _written_keys():
        value = params.get(name)
        if name not in suite.values or name in given or not isinstance(value, str) or not value:
            continue
        if not Path(os.path.realpath(value)).is_relative_to(folder):
            raise InputError(
                f"{name}: {value} is outside the project's folder {folder}",
                project.path,
                _key_line(project, suite, name),
                "give a path inside it, or add --allow-outside-outputs to let this project file "
                "write there",
            )


def _make_output_folders(suite: _ProjectSuite, settings: Settings) -> None:
    """The folders of the outputs the file names are made when missing."""
    for name, value in settings.outputs.writers.items():
        writer = writer_named(name)
        if name in suite.values and writer and writer.takes_path and value:
            Path(value).parent.mkdir(parents=True, exist_ok=True)


def _check_outputs_in_project(
    project: _Project,
    suite: _ProjectSuite,
    settings: Settings,
    mode: Mode,
    inputs: Sequence[tuple[str, Path]],
) -> None:
    """-o's rule for every suite (no output is an input or another output), with every input of
    the project counted: the file itself and each suite's (one suite's report never overwrites
    another's suite file)."""
    try:
        check_output_paths(settings, mode, inputs)
    except InputError as exc:
        raise InputError(
            f"suite {suite.name!r}: {exc.message}", project.path, suite.line, exc.hint
        ) from None


def _check_suites_write_apart(
    project: _Project, planned: Sequence[tuple[_ProjectSuite, Settings, Mode]]
) -> None:
    """No two suites write the same file (the second would overwrite the first's results after
    it was paid for): one line naming both, before any suite runs."""
    written: dict[Any, tuple[_ProjectSuite, str]] = {}
    for suite, settings, mode in planned:
        for flag, path in output_paths(settings, mode):
            writer = writer_flagged(flag)
            if writer is not None and writer.shared_by_suites:
                continue
            earlier = written.setdefault(file_key(path), (suite, flag))
            if earlier[0] is not suite:
                raise InputError(
                    f"suite {suite.name!r}: {flag} {path} is what suite {earlier[0].name!r} "
                    f"writes ({earlier[1]}): the second would overwrite the first",
                    project.path,
                    suite.line,
                    "give each suite its own output files",
                )


# Path options whose value need not exist when a suite is planned: a prompt's name, a module's
# dotted name, a command on PATH, --merge's patterns, reads allowed if present, and what runs write.
_MAY_NOT_EXIST = ("prompt", "server_module", "claude_bin", "merge", "allow_read", *_WRITTEN_BY_RUNS)


def _check_inputs_exist(project: _Project, suite: _ProjectSuite, given: frozenset[str]) -> None:
    """A file the project file names for a suite (`csv: suite.csv`) that is not there: one line
    naming the project file and the key's line, before any suite runs (the loader's own line
    names only the missing file, which the user never typed on a command line)."""
    for name, value in suite.values.items():
        option = option_named(name)
        if name in given or option is None or not option.path or option.writer:
            continue  # the command line's value wins
        if name in _MAY_NOT_EXIST:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item and not Path(item).expanduser().exists():
                raise InputError(
                    f"suite {suite.name!r}: {name}: {item} does not exist",
                    project.path,
                    _key_line(project, suite, name),
                    f"paths in {project.path.name} are relative to its folder "
                    f"({project.path.resolve().parent})",
                )


def _absolute_path(value: str, option: Option) -> str:
    """A typed path made absolute; a value that only may be a path (a prompt's name, a server
    module's dotted name, `PATH.py:attr`) only when its path part exists here."""
    path, sep, rest = value.partition(":") if option.name == "server_module" else (value, "", "")
    if option.writer or isinstance(option.kwargs.get("type"), click.Path) or Path(path).exists():
        return str(Path(path).absolute()) + sep + rest
    return value


def _absolute_path_options(params: dict[str, Any], given: frozenset[str]) -> dict[str, Any]:
    """Command-line values that are paths, made absolute: a project's suites run from the
    project's folder, but what the user typed is relative to where they typed it."""
    fixed = dict(params)
    for name in given:
        option = option_named(name)
        value = fixed.get(name)
        if option is None or not option.path or not value:
            continue
        if isinstance(value, (list, tuple)):
            fixed[name] = type(value)(_absolute_path(v, option) for v in value)
        elif isinstance(value, str):
            fixed[name] = _absolute_path(value, option)
    return fixed


@contextlib.contextmanager
def _working_folder(folder: Path) -> Iterator[None]:
    """A project's suites run from its folder (its paths are relative to it), one at a time."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def _select_mode_in_project(settings: Settings, project: _Project, suite: _ProjectSuite) -> Mode:
    try:
        return select_mode(settings)
    except InputError as exc:
        raise InputError(
            f"suite {suite.name!r}: {exc.message}", project.path, suite.line, exc.hint
        ) from None


def _check_servers_start(planned: Sequence[tuple[_ProjectSuite, Settings, Mode]]) -> None:
    """Every MCP server the project's tool-use suites start, started once and stopped before
    any suite runs: a server that will not start (or list its tools) is one line naming its
    suite, exit 2, before the suites before it have spent anything. Each distinct set once."""
    from .hub.calls import McpHub
    from .modes.common import servers_for
    from .stopping import run_async

    async def probe(settings: Settings, specs: Sequence[Any]) -> None:
        async with McpHub(
            specs,
            settings.servers.tool_timeout,
            settings.servers.max_result_chars,
            stop_grace=settings.servers.stop_grace,
        ):
            pass

    seen: set[str] = set()
    for suite, settings, mode in planned:
        if not mode.takes("server") or settings.merging.merge or settings.tool_safety.replay:
            continue
        specs = servers_for(settings, needs_key=False)
        key = repr(specs)
        if not specs or key in seen:
            continue
        seen.add(key)
        try:
            run_async(probe(settings, specs))
        except ServerError as exc:
            raise InputError(
                f"suite {suite.name}: {exc}",
                hint="no suite ran; fix the server (its command, path or environment) and rerun",
            ) from None


def _run_one_suite(suite: _ProjectSuite, settings: Settings, mode: Mode, total: int) -> int:
    """One suite; what stops it (a server that dies, the API refusing every call, a full disk)
    is one line and exit 2 for that suite, as on the command line, and the next suites run."""
    console = make_console(stderr=settings.outputs.json_out)
    if total > 1:
        console.rule(f"suite {escape_markup(suite.name)} ({mode.name})", style="bold")
    try:
        code = run_settings_for(settings, mode)
    except (ServerError, FatalApiError, OutputError) as exc:
        click.echo(error_line(f"suite {suite.name}: {exc}"), err=True)
        return 2
    if code == EXIT_INTERRUPTED or code in (128 + s for s in STOP_SIGNALS):
        raise click.Abort()
    return code


def run_project(
    path: Path,
    only: Sequence[str],
    overrides: dict[str, Any],
    given: frozenset[str],
    allow_outside_outputs: bool = False,
) -> int:
    """Every suite of a project file (or those --suite names), each from the file's folder; the
    exit code is the worst gate: 2 bad input (found before any suite runs), 1 a suite failed.
    The file's outputs stay in its folder unless `allow_outside_outputs`."""
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
    overrides = _absolute_path_options(overrides, given)
    folder = path.resolve().parent
    with tempfile.TemporaryDirectory(prefix="evaluator-project-") as scratch:
        data, _ = _yaml_with_lines(read_text_file(path, "project file"), path)
        if data.get("servers"):
            project.mcp_config = Path(scratch) / "mcp.json"
            project.mcp_config.write_text(json.dumps({"mcpServers": data["servers"]}))
        planned = []
        with _working_folder(folder):
            for suite in suites:  # every suite checked before any runs: bad input costs nothing
                _check_inputs_exist(project, suite, given)
                params, suite_given = _project_params(project, suite, overrides, given)
                if not allow_outside_outputs:
                    _check_outputs_inside(
                        project, suite, params, given, folder
                    )  # before a folder is made
                settings = settings_from(params, suite_given)
                _make_output_folders(suite, settings)
                mode = _select_mode_in_project(settings, project, suite)
                planned.append((suite, settings, mode))
            inputs = [("--config", path.resolve())]
            inputs += [found for _, settings, _ in planned for found in input_paths(settings)]
            for suite, settings, mode in planned:
                _check_outputs_in_project(project, suite, settings, mode, inputs)
            _check_suites_write_apart(project, planned)
            if len(planned) > 1:
                _check_servers_start(planned)
            codes = [
                _run_one_suite(suite, settings, mode, len(planned))
                for suite, settings, mode in planned
            ]
    return max(codes, default=0)


# ---------------------------------------------------------------------------- init: a starter project file
_INIT_SKIPPED = ("node_modules", "__pycache__", "tests", "test", "results", "venv", "build", "dist")


def _project_candidates(folder: Path) -> list[Path]:
    """The files init looks at: at most four folders deep, outside hidden folders, dependencies
    and test fixtures."""
    found = []
    for current, dirs, files in os.walk(folder):
        depth = len(Path(current).relative_to(folder).parts)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in _INIT_SKIPPED and depth < 3
        )
        found += [Path(current) / name for name in sorted(files)]
    return found


def _loads(loader: Callable[[Any], Any], path: Path) -> bool:
    """Whether a candidate suite file loads: init only proposes suites that run."""
    try:
        loader(path)
        return True
    except (InputError, OSError):
        return False


def _project_suites(folder: Path, files: Sequence[Path]) -> list[tuple[str, list[tuple[str, Any]]]]:
    suites: list[tuple[str, list[tuple[str, Any]]]] = []

    def rel(p: Path) -> str:
        return p.relative_to(folder).as_posix()

    for skill in (p.parent for p in files if p.name == "SKILL.md" and _loads(load_skill, p)):
        triggers = [
            p
            for p in files
            if p.suffix in (".md", ".json")
            and "trigger" in p.name
            and p.name.startswith(skill.name)
            and _loads(lambda f: load_markdown_tests(f, "trigger"), p)
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
        if path.suffix == ".csv" and _loads(load_csv_suite, path):
            kind = "csv"
        elif path.suffix == ".xml" and _loads(load_qa_suite, path):
            kind = "qa"
        if kind:
            suites.append(
                (
                    safe_name(path.stem) or kind,
                    [(kind, rel(path)), ("output", f"results/{safe_name(path.stem) or kind}.json")],
                )
            )
    return suites


_PLAIN_YAML = re.compile(r"[\w./-]+")  # a value YAML reads back as the same string
_MCP_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:mcp|fastmcp)\b", re.MULTILINE)


@dataclass(frozen=True)
class _FoundServer:
    """An MCP server init found in the folder, and how the project file names it."""

    what: str  # "server.py (a Python MCP server)", for init's lines
    defaults: list[str]  # lines under `defaults:` (an mcpServers file)
    servers: list[str]  # lines under a top-level `servers:` (a command to start)


def _python_server(folder: Path, path: Path) -> _FoundServer | None:
    """A Python file named like a server that imports the MCP SDK (or FastMCP)."""
    if not (path.stem == "server" or path.stem.endswith(("_server", "-server"))):
        return None
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:100_000]
    except OSError:
        return None
    if not _MCP_IMPORT.search(head):
        return None
    rel = path.relative_to(folder).as_posix()
    name = safe_name(path.stem.removesuffix("_server").removesuffix("-server")) or "server"
    return _FoundServer(
        f"{rel}, a Python MCP server",
        [],
        [f"  {name}:", "    command: python", f"    args: [{yaml_scalar(rel)}]"],
    )


def _node_server(folder: Path) -> _FoundServer | None:
    """The folder's package.json with a `bin`: a Node server its users start with `node BIN`."""
    path = folder / "package.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    bin_entry, package = data.get("bin"), str(data.get("name") or "")
    if isinstance(bin_entry, dict) and bin_entry:
        package, bin_entry = next(iter(bin_entry.items()))
    if not isinstance(bin_entry, str) or not bin_entry.strip():
        return None
    script = Path(bin_entry).as_posix().removeprefix("./")
    name = safe_name(str(package).rsplit("/", 1)[-1]) or "server"
    return _FoundServer(
        f"package.json's bin {script}, a Node MCP server",
        [],
        [f"  {name}:", "    command: node", f"    args: [{yaml_scalar(script)}]"],
    )


def _found_servers(folder: Path, found: Sequence[Path]) -> list[_FoundServer]:
    """Every MCP server the folder holds, the first the one init writes: servers already
    configured (an mcpServers file), then a Python server (shallowest first), then a Node one."""
    servers = [
        _FoundServer(f"{name}, servers already configured", [f"  mcp_config: {name}"], [])
        for name in ("mcp.json", ".mcp.json")
        if (folder / name).is_file()
    ]
    python = (_python_server(folder, p) for p in sorted(found, key=lambda p: len(p.parts)))
    servers += [server for server in python if server]
    node = _node_server(folder)
    return servers + ([node] if node else [])


def _servers_said(servers: Sequence[_FoundServer]) -> list[str]:
    """init's lines about the servers: which it found, and with several, which it chose and how
    to choose another."""
    if not servers:
        return []
    if len(servers) == 1:
        return [f"init: found {servers[0].what}; the suites talk to it"]
    others = "; ".join(s.what for s in servers[1:])
    return [
        f"init: found {len(servers)} MCP servers; the suites talk to {servers[0].what} "
        f"(also found: {others}); to choose another, edit {C.PROJECT_FILE} (the others are "
        "there, commented out) or give --server / --mcp-config"
    ]


def _starter_project(folder: Path) -> tuple[str, list[str]]:
    """A commented evaluator.yaml from what the folder holds: the user's MCP server (an mcpServers
    file, a Python server, a Node package's bin), skill folders (with their trigger files and task
    evals), CSV suites and QA evaluations; and init's lines about the server it chose."""
    found = _project_candidates(folder)
    servers = _found_servers(folder, found)
    chosen = servers[0] if servers else None
    lines = [
        "# evaluator.yaml: the suites `python evaluator.py` runs from this folder.",
        "# Every key is an option of the command line (its name with _ for -); options given on",
        "# the command line override these. `python evaluator.py schema project` prints the schema.",
        "",
    ]
    if chosen and chosen.servers:
        lines += [f"servers:   # the MCP server every tool-use suite talks to: {chosen.what}"]
        lines += chosen.servers
    others = [s for s in servers[1:] if s.servers]
    if others:  # the other servers found, to choose instead
        lines += [] if chosen and chosen.servers else ["# servers:"]
        lines += [f"#{line}" for other in others for line in other.servers]
    lines += [""] if (chosen and chosen.servers) or others else []
    lines += [
        "defaults:",
        f"  model: {C.DEFAULT_MODEL}",
        "  # max_cost: 5          # USD: start no new run once a suite has cost this much",
    ]
    if chosen and chosen.defaults:
        lines += [f"{chosen.defaults[0]}   # the MCP servers every tool-use suite talks to"]
    lines += [f"#{line}" for other in servers[1:] for line in other.defaults]
    lines += ["", "suites:"]
    suites = _project_suites(folder, found)
    if not suites:
        lines += [
            "  # - name: tools",
            "  #   csv: my-suite.csv",
            "  #   output: results/tools.json",
        ]
    for name, keys in suites:
        lines.append(f"  - name: {name}")
        lines += [
            f"    {key}: {value if _PLAIN_YAML.fullmatch(str(value)) else yaml_scalar(value)}"
            for key, value in keys
        ]
    return "\n".join(lines) + "\n", _servers_said(servers)


def init_project(folder: Path) -> int:
    target = folder / C.PROJECT_FILE
    if target.exists():
        raise InputError(
            "the project file exists",
            target,
            hint="edit it, or remove it to start over (init never overwrites)",
        )
    text, said = _starter_project(folder)
    write_text_atomic(target, text)
    click.echo(wrote_line(target))
    for line in said:
        click.echo(terminal_text(line))
    return 0
