"""From the command line into a mode: the mode chosen, every output path checked before anything
runs (its folder writable, no output an input or another output), one live run per -o, and
merging a sharded run's pieces (they name the mode that merges them). Loaded when a command runs.

May import: every room above it but the command line and the project file."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from .cache import ResponseCache
from .dry_run import unknown_model_warnings
from .errors import InputError
from .files import (
    batch_ledger_path,
    check_writable_folder,
    file_key,
    journal_path,
    results_lines_path,
)
from .mode_table import MODES, select_mode
from .modes.optimizer import optimized_file_path
from .options import OPTIONS, flag_of
from .pipeline import output_lock
from .results_schema.document import (
    PluginRunResult,
    ToolRunResult,
    merged_piece_runs,
    read_results_document,
)
from .settings import FIELD_HOMES, Settings
from .sinks import make_console, terminal_text
from .writers import WRITERS, Writer, writer_named

__all__ = [
    "check_output_paths",
    "input_paths",
    "merge_mode",
    "output_paths",
    "run_settings_for",
    "writer_flagged",
]

if TYPE_CHECKING:
    from .mode_table import Mode
    from .results_schema.document import Metadata, ResultsDocument, RunResult


def _piece_models(meta: Metadata) -> str:
    models = [meta.model, *(meta.models or []), meta.trigger_model, *(meta.trigger_models or [])]
    return ", ".join(model for model in dict.fromkeys(models) if model)


def _run_identity(result: RunResult) -> tuple:
    if isinstance(result, ToolRunResult):
        return f"run {result.iteration} of {result.test_name!r}", result.model
    if isinstance(result, PluginRunResult):
        return f"run {result.run} of {result.case!r} [{result.arm}]", result.label or result.model
    configuration = f" ({result.configuration})" if getattr(result, "configuration", "") else ""
    return (
        f"run {result.run} of {result.test or 'trigger'} {result.query!r}{configuration}",
        result.model,
    )


def _check_pieces(
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
            ("models", _piece_models(m), _piece_models(meta)),
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
            identity = _run_identity(result)
            if identity in seen:
                raise InputError(
                    f"{seen[identity]} and {path} both hold {identity[0]}"
                    + (f" on {identity[1]}" if identity[1] else "")
                    + ": overlapping pieces",
                    hint="merge the files of one run's shards, each once",
                )
            seen[identity] = path


def _merged_settings(
    settings: Settings, piece: ResultsDocument, runs: tuple, pieces: tuple
) -> Settings:
    """The settings the shards ran with (as the first piece recorded them), with this
    invocation's outputs and the pieces' runs to replay."""
    recorded = dict(piece.metadata.settings or {})
    params: dict[str, Any] = {}
    for name, value in recorded.items():
        if name not in FIELD_HOMES and writer_named(name) is None:
            raise InputError(
                f"the shard was run with an option this evaluator does not know ({name})",
                settings.merging.merge[0],
                1,
                "merge with the evaluator version the shards ran",
            )
        if name in ("model", "trigger_model"):
            values = tuple(value) if isinstance(value, list) else (value,)
            params.update({name: values[0], name + "s": values})
        elif name in FIELD_HOMES:
            params[name] = tuple(value) if isinstance(value, list) else value
    given = frozenset(recorded) | {name for name in settings.given if writer_named(name)}
    return Settings.of(
        **params,
        writers=settings.outputs.writers,
        merge=settings.merging.merge,
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
    if len(settings.merging.merge) < 2:
        raise InputError(
            "merge needs the results files of at least two shards",
            hint="merge shard-1.json shard-2.json -o results.json",
        )
    pieces = [read_results_document(path) for path in settings.merging.merge]
    runs = [merged_piece_runs(path, piece) for path, piece in zip(settings.merging.merge, pieces)]
    _check_pieces(settings.merging.merge, pieces, runs)
    merged = _merged_settings(
        settings, pieces[0], tuple(run for piece_runs in runs for run in piece_runs), tuple(pieces)
    )
    mode = next((m for m in MODES if m.name != "merge" and m.selected(merged)), None)
    if mode is None or "shard" not in mode.options:
        raise InputError(
            f"{settings.merging.merge[0]}: its recorded options name no suite to merge",
            settings.merging.merge[0],
            1,
        )
    return mode.run(merged, console)


# ---------------------------------------------------------------------------- output paths, checked before anything runs
_NO_JOURNAL_MODES = ("schema", "generate", "compare", "render", "merge", "plan")


def input_paths(settings: Settings) -> list[tuple[str, Path]]:
    found = []
    for option in OPTIONS:
        if not option.path or option.writer:
            continue
        value = settings.value(option.name)
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


def _output_folder(settings: Settings, mode: Mode) -> Path | None:
    """-o when it is a folder the mode writes files into (import, export, generate --all)."""
    if settings.outputs.output and (
        mode.writes_folder or (mode.name == "generate" and settings.drafting.generate_tests)
    ):
        return Path(settings.outputs.output)
    return None


def output_paths(settings: Settings, mode: Mode) -> list[tuple[str, Path]]:
    """(option, path) of every file this invocation writes; a folder -o is output_folder's."""
    found = []
    folder = _output_folder(settings, mode)
    for writer in WRITERS:
        value = settings.outputs.writers.get(writer.name)
        if not value or not writer.takes_path or (writer.name == "output" and folder is not None):
            continue
        found.append((writer.option.flag, Path(value)))
        if writer.name == "output" and mode.name not in _NO_JOURNAL_MODES:
            found += [
                ("-o's journal", journal_path(value)),
                ("-o's results lines", results_lines_path(value)),
            ]
            if settings.run_plan.batch:
                found.append(("-o's batch ledger", batch_ledger_path(value)))
            if mode.name == "optimize":
                best = optimized_file_path(settings)
                if best is not None:
                    found.append(("the optimized description file", best))
    return found


def writer_flagged(flag: str) -> Writer | None:
    """The writer an output_paths flag names (None for a file beside one: -o's journal, ...)."""
    return next((w for w in WRITERS if w.option.flag == flag), None)


def _written_extension(flag: str, mode: Mode) -> str:
    """The extension a writer's file has (its metavar's: FILE.md -> .md; -o's results are JSON
    except generate's drafts), or "" when it does not say."""
    if flag == "-o":
        return "" if mode.name == "generate" or mode.writes_folder else ".json"
    writer = writer_flagged(flag)
    metavar = str(writer.option.kwargs.get("metavar") or "") if writer else ""
    return Path(metavar).suffix.lower()


def _check_output_extension(flag: str, path: Path, mode: Mode) -> None:
    """A writer given a file another writer's extension names (`--html report.md`): one line;
    an extension no writer claims (`.htm`, none) is the user's choice."""
    wanted, given = _written_extension(flag, mode), path.suffix.lower()
    if not wanted or given == wanted:
        return
    claims = [
        w.option.flag
        for w in WRITERS
        if w.takes_path
        and w.option.flag != flag
        and _written_extension(w.option.flag, mode) == given
    ]
    if claims:
        raise InputError(
            f"{flag} {path}: {flag} writes a {wanted} file, and {given} is what {claims[0]} writes",
            hint=f"did you mean {claims[0]} {path}? Or name it {path.with_suffix(wanted).name}",
        )


def _check_output_folder(folder: Path, mode: Mode, inputs: Sequence[tuple[str, Path]]) -> None:
    """A folder -o: writable, and (import, export) neither an input nor inside one: `import
    plugin-evals P -o P/evals` would write into the suite it reads."""
    for flag, path in inputs if mode.writes_folder else ():
        same = file_key(path) == file_key(folder)
        if same or (path.is_dir() and folder.absolute().resolve().is_relative_to(path.resolve())):
            raise InputError(
                f"-o {folder} is {'the' if same else 'inside the'} input {flag} {path}: writing "
                "there would change it",
                hint="choose a folder outside what it reads",
            )
    if folder.is_dir():
        check_writable_folder("-o", folder, folder)
    elif not folder.exists():
        check_writable_folder("-o", folder, folder.parent)


def check_output_paths(
    settings: Settings, mode: Mode, more_inputs: Sequence[tuple[str, Path]] = ()
) -> None:
    """Before the first model call, for every mode: each output's folder exists and is writable,
    no output is a folder, and no output is an input or another output (-o on the --csv suite
    would destroy it; --report on -o would replace the results). One line, exit 2. A project
    file gives `more_inputs`: itself and its other suites' inputs."""
    found = [*more_inputs, *input_paths(settings), *(mode.inputs(settings) if mode.inputs else ())]
    inputs = {file_key(path): (flag, path) for flag, path in found}
    outputs: dict[Any, tuple[str, Path]] = {}
    folder = _output_folder(settings, mode)
    if folder is not None:
        _check_output_folder(folder, mode, found)
    written = output_paths(settings, mode)
    for flag, path in written:
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
            # a file of the writer's own kind in it: --html DIR suggests DIR/results.html
            named = path / f"results{_written_extension(flag, mode)}"
            raise InputError(f"{flag} {path} is a folder", hint=f"give a file path, e.g. {named}")
        check_writable_folder(flag, path, path.parent)
    for flag, path in written:  # once no output is an input or another
        _check_output_extension(flag, path, mode)


def run_settings_for(settings: Settings, chosen: Mode | None = None) -> int:
    """The one call from the command line (a verb, the flat form, or a project file's suite)
    into the modes."""
    mode = select_mode(settings, chosen)
    check_output_paths(settings, mode)
    if not settings.run_plan.dry_run and mode.takes("model"):  # the dry run prices them itself
        for line in unknown_model_warnings(settings.api.models):
            click.echo(terminal_text(line), err=True)
    ResponseCache.forget()  # this invocation's hits and misses
    journaled = (
        bool(settings.outputs.output) and mode.takes("resume") and not settings.run_plan.dry_run
    )
    writes_folder = (
        bool(settings.outputs.output) and mode.writes_folder and not settings.run_plan.dry_run
    )
    with (
        output_lock(
            Path(settings.outputs.output).absolute() if writes_folder else settings.outputs.output
        )
        if settings.outputs.output and (journaled or writes_folder)
        else contextlib.nullcontext()
    ):  # one live run per -o
        return mode.run(
            settings, make_console(stderr=settings.outputs.json_out or mode.name == "generate")
        )
