"""What every mode shares: the API key, the servers started early, the user source, the exit
code, and what a mode that writes a folder (import, export) plans to write (FolderWrites).

May import: the rooms above the modes."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from .. import EXAMPLE_SERVER
from ..cache import is_recording
from ..engine import SimulatedUser, StdinLines, TerminalUser
from ..errors import EvalError, InputError, InputProblems, UsageProblem, note_if_the_run_goes_ahead
from ..files import resolves_inside, write_json_atomic, write_text_atomic
from ..finished_run import make_metadata
from ..hub.stdio import start_stdio_servers
from ..loaders.plugin_evals import outside_links
from ..loaders.servers import PLUGIN_MANIFEST, resolve_servers
from ..options import flag_of
from ..pipeline import run_pipeline
from ..redaction import Redactor
from ..runners.tool_use import ToolUseRunner
from ..session import api_key_from_env
from ..sinks import terminal_text, wrote_line
from ..stopping import interrupted_exit_code
from ..trust import plugin_code, require_trust, trusted

__all__ = [
    "KEYLESS_COMMAND",
    "FolderWrites",
    "check_auto_runs",
    "check_crowd_options",
    "exit_code",
    "import_sdks",
    "require_api_key",
    "require_plugin_trust",
    "run_metadata",
    "run_suite",
    "servers_for",
    "start_servers_early",
    "tool_use_runner",
    "user_source",
]

if TYPE_CHECKING:
    from ..engine import UserInput
    from ..finished_run import Results
    from ..pipeline import PipelineOutcome, Runner
    from ..results_schema.document import Metadata
    from ..run_types import ServerSpec, TestCase
    from ..session import ModelClient
    from ..settings import PluginTrust, Settings


# The quick start's first command: the example suite answered from the recording shipped beside
# it (a read-only --cache folder, cache.py), so it needs no key.
KEYLESS_COMMAND = "python evaluator.py --csv examples/test_queries.csv --cache examples/recording"


def require_api_key() -> None:
    if not api_key_from_env():
        raise InputError(
            "ANTHROPIC_API_KEY is not set",
            hint="export ANTHROPIC_API_KEY=sk-ant-..., with a key from https://console.anthropic.com; "
            f"without one, `{KEYLESS_COMMAND}` replays a recorded run of the example suite, and "
            "--dry-run prices a run without calling the model",
        )


def require_plugin_trust(
    trust: PluginTrust, folder: Path, scaffolds: Sequence[tuple[str, Path]] = ()
) -> None:
    """The trust gate (trust.py) for the plugin in `folder`, before any of its code starts: its
    hooks and servers, and the scaffold scripts given."""
    require_trust(plugin_code(folder, scaffolds), trust.trust_plugin)


def _plugin_config_folder(mcp_config: str | None) -> Path | None:
    """--mcp-config PLUGIN_DIR: the plugin folder whose servers it starts (None: a config file)."""
    if not mcp_config or not Path(mcp_config).is_dir():
        return None
    folder = Path(mcp_config)
    return (
        folder if (folder / PLUGIN_MANIFEST).is_file() or (folder / ".mcp.json").is_file() else None
    )


def _announce_recording(folder: str) -> None:
    """The one line saying a run is a replay (no model is called)."""
    click.echo(
        f"replay: the model's answers come from the recording {terminal_text(folder)} "
        "(no model is called; a request it lacks is an error of its case)",
        err=True,
    )


def _say_example_server_once() -> None:
    """The one line (once an invocation, on stderr, once its run went ahead) saying no server was
    named, so the run talks to the bundled example server: a suite written for the user's server
    then fails on its tool names, and this line says why."""
    note_if_the_run_goes_ahead(
        "no MCP server named: talking to the bundled example server "
        f"({terminal_text(EXAMPLE_SERVER.name)}); name yours with --server, --mcp-config or "
        "--server-module (or `init` in its folder)"
    )


def servers_for(settings: Settings, needs_key: bool = True) -> list[ServerSpec]:
    """The key is checked before any server starts, after a bad --mcp-config is reported (its own
    line, key or not); a dry run needs no key (it calls no model), nor does `scan`."""
    named = settings.servers
    if "transport" in settings.given and not named.server_url:
        raise InputError(
            "--transport applies to --server-url",
            hint="e.g. --server-url http://127.0.0.1:3001/sse --transport sse",
        )
    if settings.tool_safety.replay and not named.named:
        servers = []  # the cassette's tools, no server at all (not the bundled example server)
    else:
        plugin = _plugin_config_folder(named.mcp_config)
        if plugin is not None:  # its servers start here, even for a dry run (it lists their tools)
            require_plugin_trust(settings.trust, plugin)
        servers = resolve_servers(
            named.server,
            named.server_env,
            named.mcp_config,
            named.server_module,
            named.server_url,
            named.transport,
        )
        if not named.named:
            _say_example_server_once()
    if is_recording(settings.run_plan.cache) and not settings.run_plan.dry_run:
        _announce_recording(str(settings.run_plan.cache))
    elif needs_key and not settings.run_plan.dry_run:
        require_api_key()
    return servers


def tool_use_runner(
    settings: Settings, cases: Sequence[TestCase], servers: list[ServerSpec], **more: Any
) -> ToolUseRunner:
    """A tool-use runner of these cases and servers, handed the groups of the settings it reads
    (`more`: its user source, observer and hooks)."""
    return ToolUseRunner(
        cases,
        servers,
        settings.api,
        settings.run_plan,
        server_limits=settings.servers,
        safety=settings.tool_safety,
        claude_code=settings.claude_code,
        grading=settings.grading,
        pins=settings.pins,
        output=settings.outputs.output,
        tool_overrides=settings.descriptions.tool_overrides,
        interactive=settings.inputs.interactive,
        **more,
    )


def run_suite(runner: Runner, settings: Settings, console: Console, **more: Any) -> PipelineOutcome:
    """The runner's jobs through the durable pipeline (or --merge's pieces replayed), handed the
    groups of the settings it reads (`more`: run_pipeline's callbacks)."""
    return run_pipeline(
        runner,
        settings.run_plan,
        settings.outputs,
        console,
        merging=settings.merging,
        base_url=settings.api.base_url,
        **more,
    )


def run_metadata(
    mode: str, settings: Settings, result_count: int, outcome: PipelineOutcome, **extra: Any
) -> Metadata:
    """The results' metadata (make_metadata), handed the groups of the settings it reads."""
    return make_metadata(
        mode,
        result_count,
        outcome,
        api=settings.api,
        plan=settings.run_plan,
        outputs=settings.outputs,
        given=settings.given_values(),
        trigger_models=settings.trigger_runs.trigger_models,
        merge=settings.merging.merge,
        interactive=settings.inputs.interactive,
        **extra,
    )


def start_servers_early(settings: Settings) -> None:
    """The stdio servers start now, before the suite is loaded and the SDKs are imported, so their
    start-up (often seconds of imports of their own) overlaps ours. A problem naming them is said
    later, in its place (servers_for); a server no connection takes stops with the invocation."""
    named = settings.servers
    if settings.merging.merge or (settings.tool_safety.replay and not named.named):
        return
    plugin = _plugin_config_folder(named.mcp_config)
    if plugin is not None and not settings.trust.trust_plugin and not trusted(plugin_code(plugin)):
        return  # servers_for asks first
    with contextlib.suppress(EvalError):
        start_stdio_servers(
            resolve_servers(
                named.server,
                named.server_env,
                named.mcp_config,
                named.server_module,
                named.server_url,
                named.transport,
            )
        )


def import_sdks(dry_run: bool) -> None:
    """The MCP SDK, and for a run the Anthropic SDK and jsonschema (the tools' argument checks),
    imported once, here: after the input is checked (bad input never waits for them), while the
    stdio servers start, and not on the event loop in the middle of the first runs. A dry run
    needs the Anthropic SDK only to count tokens (with a key), and checks no arguments."""
    import mcp  # noqa: F401

    if not dry_run:
        import jsonschema  # noqa: F401
    if not dry_run or api_key_from_env():
        import anthropic  # noqa: F401


def user_source(
    settings: Settings, console: Console
) -> Callable[[TestCase, ModelClient], UserInput | None]:
    """Who answers Claude in each conversation: the terminal, a simulated user (from
    --simulate-user or the case's own goal), or nobody."""
    if settings.inputs.interactive:
        stdin = StdinLines()  # one reader for the whole run: it may hold typed-ahead lines
        return lambda case, model: TerminalUser(console, stdin)

    def simulated_or_nobody(case: TestCase, model: ModelClient) -> UserInput | None:
        simulation = settings.user_simulation
        goal = simulation.simulate_user or case.simulated_user
        return (
            SimulatedUser(goal, model, simulation.user_model, simulation.max_user_turns)
            if goal
            else None
        )

    return simulated_or_nobody


def exit_code(results: Results, outcome: PipelineOutcome) -> int:
    if outcome.interrupted:
        return interrupted_exit_code()
    return 0 if results.passed else 1


def check_auto_runs(settings: Settings) -> None:
    """-i auto / --runs auto decide each case from all of its runs, round by round: what splits
    or batches a case's runs cannot take part."""
    plan, crowd = settings.run_plan, settings.crowd
    if not plan.auto_runs:
        return
    flag = "--runs auto" if settings.inputs.skill else "-i auto"
    for given, name, why in (
        (plan.shard, "shard", "splits a case's runs between machines"),
        (plan.batch, "batch", "sends every round's calls as one batch that may take hours"),
        (crowd.distractor_tools, "distractor_tools", "runs each case at every step of the crowd"),
        (crowd.distractors, "distractors", "runs each query at every step of the crowd"),
    ):
        if given:
            raise UsageProblem(
                f"{flag} decides each case from all its runs as they finish, and {flag_of(name)} "
                f"{why}: give a number of runs with {flag_of(name)}"
            )


def check_crowd_options(settings: Settings) -> None:
    """The crowd's options together: steps and the decoys file need their source; --shard does
    not split a crowd (its steps' runs share one seeded order)."""
    crowd = settings.crowd
    for given, needs, flag in (
        (crowd.distractor_steps, crowd.distractors, "--distractors"),
        (crowd.tool_steps, crowd.distractor_tools, "--distractor-tools"),
    ):
        if given is not None and not needs:
            raise InputError(
                f"{'--distractor-steps' if flag == '--distractors' else '--tool-steps'} needs "
                f"{flag}",
                hint=f"e.g. {flag} lookalike:20",
            )
    lookalike = any(
        v.strip().startswith("lookalike:") for v in [*crowd.distractors, *crowd.distractor_tools]
    )
    if crowd.distractors_file and not lookalike:
        raise InputError(
            "--distractors-file keeps lookalike:N decoys, and none is asked for",
            hint="add --distractors lookalike:N (or --distractor-tools lookalike:N)",
        )
    crowded = bool(crowd.distractors or crowd.distractor_tools)
    if settings.run_plan.shard and crowded:
        raise InputError(
            "--shard does not split a crowd of distractors: run it in one piece",
            hint="leave --shard out (--concurrency runs the steps' runs at once)",
        )
    if "seed" in settings.given and not settings.descriptions.optimize and not crowded:
        raise InputError(
            "--seed orders the distractors (and picks a lookalike:N set), and none is given",
            hint="add --distractors SOURCE (skills) or --distractor-tools SOURCE (a CSV suite)",
        )
    if crowd.distractor_tools and settings.tool_safety.replay:
        raise InputError(
            "--distractor-tools sits beside live servers, and --replay answers from a cassette",
            hint="run the crowd without --replay (the distractors are never called anyway)",
        )


@dataclass
class FolderWrites:
    """What an import or an export writes into its folder (`root`, its -o), planned before
    anything is written: each file's text or JSON (with a note a line says beside it) and the
    folders copied whole. Every path is checked inside `root` as it is planned (a name made from
    a manifest, a linked `evals/`: one line, nothing written), and every byte goes through the
    redactor. Written at the end, or (--dry-run) only listed."""

    root: Path
    files: dict[Path, tuple[str, Any, str]] = field(default_factory=dict)  # kind, value, note
    copies: list[tuple[Path, Path, Any]] = field(default_factory=list)  # source, target, ignore
    replaced: list[Path] = field(default_factory=list)  # folders removed first (--force)

    def inside(self, path: Path) -> Path:
        if not resolves_inside(path, self.root):
            raise InputError(
                f"would write outside {self.root} (to {path.resolve()})",
                path,
                hint="every file an import or export writes stays in its -o folder",
            )
        return path

    def text(self, path: Path, content: str, note: str = "") -> None:
        self.files[self.inside(path)] = ("text", content, note)

    def json(self, path: Path, value: Any, note: str = "") -> None:
        self.files[self.inside(path)] = ("json", value, note)

    def copy_folder(self, source: Path, target: Path, ignore: Any = None) -> None:
        """A folder copied whole (links kept as links); one with a link out of it is refused."""
        problems = outside_links(source, source, "folder it is copied from")
        if problems:
            raise InputProblems(problems)
        self.copies.append((source, self.inside(target), ignore))

    def replace_folder(self, folder: Path) -> None:
        """A folder (inside `root`, no link) removed before anything is written: what the
        planned files replace, whole, so that none of its old files stays among them."""
        if folder.is_symlink():
            raise InputError("is a link, which an import does not replace", folder)
        self.replaced.append(self.inside(folder))

    def write(self, dry_run: bool) -> list[str]:
        """Writes every file (each folder made as needed), or says what would be written; the
        lines to print: every file of a dry run, the noted ones of a real one."""
        redactor = Redactor.for_run()
        if dry_run:
            listed = (
                [f"would replace {terminal_text(folder)}" for folder in self.replaced]
                + [
                    f"would copy {terminal_text(source)} to {terminal_text(target)}"
                    for source, target, _ in self.copies
                ]
                + [
                    f"would write {terminal_text(path)}" + (f": {note}" if note else "")
                    for path, (_, _, note) in self.files.items()
                ]
            )
            return [
                *(redactor.text(line) for line in listed),
                f"dry run: {len(self.files)} file(s) planned, nothing was written",
            ]

        def copy_redacted(source: str, target: str) -> None:
            Path(target).write_bytes(redactor.masked_bytes(Path(source).read_bytes()))
            shutil.copystat(source, target)

        for folder in self.replaced:
            shutil.rmtree(folder)
        for source, target, ignore in self.copies:
            shutil.copytree(
                source, target, symlinks=True, ignore=ignore, copy_function=copy_redacted
            )
        said = []
        for path, (kind, value, note) in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            self.inside(path)  # its folder, made now, may not be a link out either
            if kind == "json":
                write_json_atomic(path, redactor.data(value))
            else:
                write_text_atomic(path, redactor.text(value))
            if note:
                said.append(redactor.text(f"{wrote_line(path)}: {note}"))
        return said
