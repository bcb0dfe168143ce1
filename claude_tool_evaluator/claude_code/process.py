"""One `claude -p` run: its settings and locked-down command line and environment, the process
started (dying with the evaluator), read as it comes and ended with everything it left running;
a whole run in a fresh temporary folder, its stream read into the run's record.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine; the other rooms of
claude_code."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import test_constants as C

from ..hub.processes import (
    RUN_MARKER,
    die_with_parent,
    end_descendants,
    kill_process_group,
    run_marker,
)
from ..results_schema.document import ArtifactRecord, ClaudeRun
from ..sinks import tail
from .binary import claude_env_base, confined_command, read_permission_rules, sandbox_settings
from .runs import OutsideWriteGuard, RunFolder, TaskSetup, keep_run_files, prepare_project
from .stream import StreamReader, claude_run_of, read_output, transcript_summary

__all__ = [
    "ClaudeCliSettings",
    "RunWatch",
    "claude_command",
    "claude_env",
    "drain",
    "finish_claude_run",
    "run_claude_process",
    "run_claude_query",
    "run_in_folder",
    "tool_grants",
]

if TYPE_CHECKING:
    from ..run_types import Distractor, SkillInfo


@dataclass
class ClaudeCliSettings:
    """How to run `claude -p` for one kind of query."""

    binary: str
    model: str = C.DEFAULT_TRIGGER_MODEL
    max_turns: int = C.DEFAULT_TRIGGER_MAX_TURNS
    timeout: float = C.DEFAULT_TRIGGER_TIMEOUT
    base_url: str | None = None
    mcp_config: str | None = None
    # --allow-tools: task runs only; taken off the disallowed list, file tools kept to the project
    allow_tools: tuple[str, ...] = ()
    sandbox: bool = (
        False  # Bash confined by Claude Code's own sandbox (see CLAUDE_SANDBOX_SETTINGS)
    )
    # --allow-read: task runs only; what Bash (in the sandbox) and Read may read of the user's home
    allow_read: tuple[str, ...] = ()
    label: str = ""  # several --claude-bin: `model @ version`, what its runs are reported as
    version: str = ""  # several --claude-bin: this binary's Claude Code version
    # --skill PLUGIN: plugins loaded with --plugin-dir (read in place); their hooks are reported
    plugin_dirs: tuple[str, ...] = ()
    # --harness claude-code: the suite's live tools pre-approved (`mcp__server__tool`; a withheld
    # one is not, so don't-ask mode refuses its call), Claude Code's switches (ENABLE_TOOL_SEARCH)
    # and --prompt appended
    allowed_rules: tuple[str, ...] = ()
    # plugin runs: locked-down tools a grant names with a pattern (`Bash(npm test:*)`) come off
    # the disallowed list without a blanket approval (the pattern in allowed_rules approves), and
    # what --disallow-tools and a case's disallowed_tools keep away
    ungated: tuple[str, ...] = ()
    disallowed_rules: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    append_system_prompt: str = ""
    # a plugin run: the whole `claude -p` (the plugin's hooks and servers with it) in bubblewrap,
    # the user's home and the temporary folder hidden (binary.confined_command)
    confine: bool = False


_GRANT = re.compile(r"[^\s,()]+(?:\([^)]*\))?")


def tool_grants(values: Sequence[str]) -> tuple[str, ...]:
    """Tool grants in Claude Code's syntax (`--allow-tools Bash Write 'mcp__server__*'`,
    `Tool(pattern:*)`): names separated by spaces or commas, repeatable, a pattern in brackets
    kept whole (`Bash(npm test:*)`), each once in the order given."""
    found: list[str] = []
    for value in values:
        found += _GRANT.findall(value)
    return tuple(dict.fromkeys(found))


def _claude_prompt_argument(query: str) -> str:
    """The argv sink: `-p` is a flag and the prompt a positional argument, so a query starting
    with `-` would be read as an option (`--allowedTools=Bash`); a leading space keeps it a prompt."""
    return " " + query if query.startswith("-") else query


def _permission_rules(tools: Sequence[str]) -> list[str]:
    """What pre-approves the allowed tools: Bash as it is (the sandbox confines it), and the file
    tools for paths inside the project only: `Edit(./**)`, the rule Claude Code applies to every
    file-editing tool (a `Write(...)` rule is not read; seen with 2.1.197), so a Write or Edit
    outside the project is refused. Links are resolved before matching: a link in the project to
    a file outside is refused too. A file tool not allowed stays on the disallowed list."""
    rules = ["Bash"] if "Bash" in tools else []
    return rules + (["Edit(./**)"] if any(t != "Bash" for t in tools) else [])


def claude_command(
    settings: ClaudeCliSettings, query: str, run_home: Path | None = None
) -> list[str]:
    """The locked-down command line: no shell, no file edits, no web fetches, no prompts for
    permission, no MCP servers but the given config, no session saved. (`--restricted` or
    `--safe-mode` would drop the project's skills, so they are not used.) A task run's
    --allow-tools come off the disallowed list and are pre-approved (`--allowedTools`, file tools
    for the project only): in `dontAsk` mode a tool that is not pre-approved is refused. A run
    allowed Bash runs in Claude Code's sandbox (unless --unconfined), which hides the user's home
    but for the run's own HOME (`run_home`) and --allow-read."""
    command = [
        settings.binary,
        "-p",
        _claude_prompt_argument(query),
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        settings.model,
        "--max-turns",
        str(settings.max_turns),
        "--permission-mode",
        "dontAsk",
        *([] if settings.plugin_dirs else ["--strict-mcp-config"]),
        "--no-session-persistence",
        "--disallowedTools",
        *[
            t
            for t in C.CLAUDE_DISALLOWED_TOOLS
            if t not in settings.allow_tools and t not in settings.ungated
        ],
        *settings.disallowed_rules,
    ]
    rules = (
        _permission_rules(settings.allow_tools)
        + read_permission_rules(settings.allow_read)
        + list(settings.allowed_rules)
    )
    if rules:
        command += ["--allowedTools", *rules]
    if settings.sandbox:
        command += ["--settings", json.dumps(sandbox_settings(settings.allow_read, run_home))]
    if settings.mcp_config:
        command += ["--mcp-config", settings.mcp_config]
    # A plugin's own MCP servers load only without --strict-mcp-config (seen with 2.1.332); the
    # run's HOME and project are temporary, so no other server config is there to load.
    for folder in settings.plugin_dirs:
        command += ["--plugin-dir", folder]
    if settings.plugin_dirs:  # a plugin's hooks: what each did is read from these events
        command.append("--include-hook-events")
    if settings.append_system_prompt:
        command += ["--append-system-prompt", settings.append_system_prompt]
    return command


def claude_env(
    settings: ClaudeCliSettings, root: Path, tmp: Path | None = None, marker: str = ""
) -> dict[str, str]:
    """A temporary HOME and config dir, so the user's own skills and settings neither shadow nor
    leak in, and a temporary TMPDIR; the API key and base URL pass through (the sandbox hides the
    key from Bash), and the run's marker (see end_descendants)."""
    env = claude_env_base(root / "home")
    env["TMPDIR"] = str(tmp or root / "tmp")
    if settings.base_url:
        env["ANTHROPIC_BASE_URL"] = settings.base_url
    env.update(settings.environment)
    if marker:
        env[RUN_MARKER] = marker
    return env


async def drain(stream: asyncio.StreamReader | None, sink: bytearray, limit: int) -> None:
    """Reads a pipe to its end, keeping at most `limit` bytes, so the child never blocks on it."""
    if stream is None:
        return
    while chunk := await stream.read(65536):
        if len(sink) < limit:
            sink.extend(chunk[: limit - len(sink)])


# ---------------------------------------------------------------------------- one `claude -p` run
@dataclass
class _ClaudeProcess:
    """What one `claude -p` process gave back."""

    stdout: bytes = b""
    stderr: bytes = b""
    returncode: int | None = None
    timed_out: bool = False
    start_error: str | None = None


async def run_claude_process(
    settings: ClaudeCliSettings, query: str, folder: RunFolder, stdout: bytearray | None = None
) -> _ClaudeProcess:
    """`claude -p QUERY` in the run's project, its output read as it comes (into `stdout` when
    given: what a run cut short had said); on timeout, and after it ends anyway, its process group
    is killed and every process it left (see end_descendants) is ended, so nothing outlives the run."""
    done, marker = _ClaudeProcess(), run_marker()
    stdout, stderr = bytearray() if stdout is None else stdout, bytearray()
    process: asyncio.subprocess.Process | None = None
    try:
        command = claude_command(settings, query, folder.root / "home")
        if settings.confine:
            command = confined_command(
                command, folder.root, settings.allow_read, settings.plugin_dirs, [folder.tmp]
            )
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=folder.project,
            env=claude_env(settings, folder.root, folder.tmp, marker),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        readers = asyncio.gather(
            drain(process.stdout, stdout, C.CLAUDE_MAX_OUTPUT_BYTES),
            drain(process.stderr, stderr, C.CLAUDE_MAX_OUTPUT_BYTES),
            process.wait(),
        )
        try:
            await asyncio.wait_for(asyncio.shield(readers), settings.timeout)
        except TimeoutError:
            done.timed_out = True
            kill_process_group(process.pid)
            try:  # pipes close once the group is dead; a child that escaped the group must not hang us
                await asyncio.wait_for(readers, 5)
            except TimeoutError:
                readers.cancel()
    except OSError as exc:
        done.start_error = f"could not start claude: {exc}"
    finally:
        if process is not None:
            kill_process_group(process.pid)
            if process.returncode is None:
                try:
                    await asyncio.wait_for(process.wait(), 5)
                except (TimeoutError, asyncio.CancelledError):
                    pass
            end_descendants(process.pid, marker)
    done.stdout, done.stderr = bytes(stdout), bytes(stderr)
    done.returncode = process.returncode if process is not None else None
    return done


def finish_claude_run(record: ClaudeRun, done: _ClaudeProcess, timeout: float) -> None:
    """The process's side of a run's record: exit code, stderr, and why it is an error when the
    process (not its events) says so."""
    record.exit_code = done.returncode
    record.stderr_tail = tail(done.stderr.decode("utf-8", "replace"), C.CLAUDE_STDERR_TAIL_CHARS)
    record.timed_out = done.timed_out
    stderr = f", stderr: {record.stderr_tail}" if record.stderr_tail else ""
    if done.timed_out:
        record.error = f"timed out after {timeout:g}s (process group killed)"
    elif record.error and record.exit_code not in (0, None) and record.result_subtype is None:
        record.error += f"; claude exited with {record.exit_code}{stderr}"
    elif (
        record.error is None
        and record.exit_code not in (0, None)
        and record.result_subtype != "error_max_turns"
    ):
        # A result event and then a failing exit: the run did not finish cleanly.
        record.error = f"claude exited with {record.exit_code} after its result event{stderr}"


def _finish_task_run(
    record: ClaudeRun,
    stream: StreamReader,
    artifacts: list[ArtifactRecord],
    guard: OutsideWriteGuard | None,
) -> None:
    """A task run's own side: its steps for the judge, what it left, and what it changed outside
    its project while it ran (an unconfined run: that fails it)."""
    record.transcript_summary = transcript_summary(stream)
    record.artifacts = artifacts
    if guard is None:
        return
    record.outside_writes = guard.changes()
    if record.outside_writes:
        shown = ", ".join(record.outside_writes[:3]) + (
            " ..." if len(record.outside_writes) > 3 else ""
        )
        record.error = f"wrote outside its temporary project: {shown}" + (
            f"; {record.error}" if record.error else ""
        )


async def run_in_folder(
    folder: RunFolder,
    query: str,
    skills: Sequence[SkillInfo],
    settings: ClaudeCliSettings,
    task: TaskSetup | None,
    distractors: Sequence[Distractor] = (),
    watch: RunWatch | None = None,
) -> tuple[_ClaudeProcess, list[ArtifactRecord], str | None, OutsideWriteGuard | None]:
    """A run in its folder: the project prepared, `claude` run, what a task run left kept;
    (the process, the artifacts, why they could not be kept, the outside-write guard)."""
    try:
        before = prepare_project(folder.project, skills, task, folder.root / "home", distractors)
    except OSError as exc:
        return _ClaudeProcess(start_error=f"could not start claude: {exc}"), [], None, None
    guard = task.guard() if task and task.guard else None
    done = await run_claude_process(settings, query, folder, watch.stdout if watch else None)
    if task is None or done.start_error:
        return done, [], None, guard
    try:
        artifacts = await keep_run_files(folder.project, before, task.artifacts)
    except OSError as exc:
        return done, [], f"could not keep the run's files: {exc}", guard
    return done, artifacts, None, guard


async def run_claude_query(
    query: str,
    skills: Sequence[SkillInfo],
    settings: ClaudeCliSettings,
    run: int = 1,
    task: TaskSetup | None = None,
    distractors: Sequence[Distractor] = (),
    watch: RunWatch | None = None,
) -> ClaudeRun:
    """One `claude -p QUERY` in a fresh temporary project holding the skills (and the crowd beside
    them: --distractors); never raises for a failed, hung or garbled run: that becomes `error` on
    the record. Nothing it started outlives it. A task run (`task`) gets its input files in the
    project first; what it leaves there is kept (masked copies), and an unconfined run that wrote
    outside the project fails. The record is as the run was: the sinks redact it. `watch` sees
    its output as it comes (RunWatch: the record of a run a stop signal cuts short)."""
    start = time.perf_counter()
    try:
        folder = RunFolder.make()
    except OSError as exc:
        return ClaudeRun(query=query, run=run, error=f"could not start claude: {exc}")
    try:
        done, artifacts, artifact_error, guard = await run_in_folder(
            folder, query, skills, settings, task, distractors, watch
        )
    finally:
        folder.remove()
    latency = round((time.perf_counter() - start) * 1000, 2)
    if done.start_error:
        return ClaudeRun(query=query, run=run, error=done.start_error, latency_ms=latency)
    stream = read_output(done.stdout)
    record = claude_run_of(stream, [s.name for s in skills], query, run)
    finish_claude_run(record, done, settings.timeout)
    if task is not None:
        _finish_task_run(record, stream, artifacts, guard)
    if artifact_error and not record.error:
        record.error = artifact_error
    record.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    return record


@dataclass
class RunWatch:
    """A `claude -p` run in flight, as its output comes: a run a stop signal cuts short is
    recorded from what it said so far (its activations, its calls, what the answered calls
    spent), as `interrupted`."""

    query: str
    run: int
    installed: list[str]
    stdout: bytearray = field(default_factory=bytearray)
    started: float = field(default_factory=time.perf_counter)

    def interrupted(self) -> ClaudeRun:
        record = claude_run_of(
            read_output(bytes(self.stdout)), self.installed, self.query, self.run
        )
        record.error = "interrupted"
        record.latency_ms = round((time.perf_counter() - self.started) * 1000, 2)
        return record
