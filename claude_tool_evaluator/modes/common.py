"""What every mode shares: the API key, the servers started early, the user source, the exit
code, and what a mode that writes a folder (import, export) plans to write (FolderWrites).

May import: the rooms above the modes."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..engine import SimulatedUser, StdinLines, TerminalUser
from ..errors import EvalError, InputError, UsageProblem
from ..files import write_json_atomic, write_text_atomic
from ..hub.stdio import start_stdio_servers
from ..loaders.servers import resolve_servers
from ..options import flag_of
from ..runners.tool_use import servers_named
from ..session import api_key_from_env
from ..sinks import terminal_text, wrote_line
from ..stopping import interrupted_exit_code

if TYPE_CHECKING:
    from ..engine import UserInput
    from ..finished_run import Results
    from ..pipeline import PipelineOutcome
    from ..run_types import ServerSpec, TestCase
    from ..session import ModelClient
    from ..settings import Settings


def require_api_key() -> None:
    if not api_key_from_env():
        raise InputError(
            "ANTHROPIC_API_KEY is not set",
            hint="export ANTHROPIC_API_KEY=sk-ant-..., with a key from https://console.anthropic.com",
        )


def servers_for(settings: Settings, needs_key: bool = True) -> list[ServerSpec]:
    """The key is checked before any server starts, after a bad --mcp-config is reported (its own
    line, key or not); a dry run needs no key (it calls no model), nor does `scan`."""
    if "transport" in settings.given and not settings.server_url:
        raise InputError(
            "--transport applies to --server-url",
            hint="e.g. --server-url http://127.0.0.1:3001/sse --transport sse",
        )
    if settings.replay and not servers_named(settings):
        servers = []  # the cassette's tools, no server at all (not the bundled example server)
    else:
        servers = resolve_servers(
            settings.server,
            settings.server_env,
            settings.mcp_config,
            settings.server_module,
            settings.server_url,
            settings.transport,
        )
    if needs_key and not settings.dry_run:
        require_api_key()
    return servers


def start_servers_early(settings: Settings) -> None:
    """The stdio servers start now, before the suite is loaded and the SDKs are imported, so their
    start-up (often seconds of imports of their own) overlaps ours. A problem naming them is said
    later, in its place (servers_for); a server no connection takes stops with the invocation."""
    if settings.merge or (settings.replay and not servers_named(settings)):
        return
    with contextlib.suppress(EvalError):
        start_stdio_servers(
            resolve_servers(
                settings.server,
                settings.server_env,
                settings.mcp_config,
                settings.server_module,
                settings.server_url,
                settings.transport,
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
    if settings.interactive:
        stdin = StdinLines()  # one reader for the whole run: it may hold typed-ahead lines
        return lambda case, model: TerminalUser(console, stdin)

    def simulated_or_nobody(case: TestCase, model: ModelClient) -> UserInput | None:
        goal = settings.simulate_user or case.simulated_user
        return (
            SimulatedUser(goal, model, settings.user_model, settings.max_user_turns)
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
    if not settings.auto_runs:
        return
    flag = "--runs auto" if settings.skill else "-i auto"
    for name, why in (
        ("shard", "splits a case's runs between machines"),
        ("batch", "sends every round's calls as one batch that may take hours"),
        ("distractor_tools", "runs each case at every step of the crowd"),
        ("distractors", "runs each query at every step of the crowd"),
    ):
        if getattr(settings, name):
            raise UsageProblem(
                f"{flag} decides each case from all its runs as they finish, and {flag_of(name)} "
                f"{why}: give a number of runs with {flag_of(name)}"
            )


@dataclass
class FolderWrites:
    """What an import or an export writes into its folder, planned before anything is written:
    each file's text or JSON (with a note a line says beside it) and the folders copied whole.
    Written at the end, or (--dry-run) only listed."""

    files: dict[Path, tuple[str, Any, str]] = field(default_factory=dict)  # kind, value, note
    copies: list[tuple[Path, Path, Any]] = field(default_factory=list)  # source, target, ignore

    def text(self, path: Path, content: str, note: str = "") -> None:
        self.files[path] = ("text", content, note)

    def json(self, path: Path, value: Any, note: str = "") -> None:
        self.files[path] = ("json", value, note)

    def copy_folder(self, source: Path, target: Path, ignore: Any = None) -> None:
        self.copies.append((source, target, ignore))

    def write(self, dry_run: bool) -> list[str]:
        """Writes every file (each folder made as needed), or says what would be written; the
        lines to print: every file of a dry run, the noted ones of a real one."""
        if dry_run:
            listed = [
                f"would copy {terminal_text(source)} to {terminal_text(target)}"
                for source, target, _ in self.copies
            ] + [
                f"would write {terminal_text(path)}" + (f": {note}" if note else "")
                for path, (_, _, note) in self.files.items()
            ]
            return [*listed, f"dry run: {len(self.files)} file(s) planned, nothing was written"]
        for source, target, ignore in self.copies:
            shutil.copytree(source, target, symlinks=True, ignore=ignore)
        said = []
        for path, (kind, value, note) in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "json":
                write_json_atomic(path, value)
            else:
                write_text_atomic(path, value)
            if note:
                said.append(f"{wrote_line(path)}: {note}")
        return said
