"""The Claude Code runner: one `claude -p` run in a temporary project and HOME, in its sandbox,
behind a local caching proxy for --cache, its stream parsed into activations and transcripts.
Its rooms, from the top: process (one run), proxy (--cache), runs (a run's folder and what it
leaves), skills (installing skills and the crowd), stream (reading stream-json), binary (the CLI,
its version, its sandbox). This file names what the other rooms use of them.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine."""

from __future__ import annotations

from .binary import (
    allow_read_problem,
    check_confinement,
    check_sandbox,
    claude_version,
    confined_command,
    confinement_hidden,
    find_claude_bin,
    sandbox_problem,
    sandbox_settings,
)
from .process import (
    ClaudeCliSettings,
    RunWatch,
    claude_command,
    claude_env,
    drain,
    finish_claude_run,
    run_claude_process,
    run_claude_query,
)
from .proxy import CachingProxy, claude_request_key
from .runs import (
    OutsideWriteGuard,
    RunFolder,
    TaskSetup,
    collect_artifacts,
    file_sha256,
    prepare_project,
    process_start_time,
    project_files,
    remove_stale_run_folders,
)
from .skills import install_skills, skill_md_with_description
from .stream import (
    delegations_of,
    detect_activation,
    hook_firings_of,
    normalize_skill_name,
    parse_stream_json,
)

__all__ = [
    "CachingProxy",
    "ClaudeCliSettings",
    "OutsideWriteGuard",
    "RunFolder",
    "RunWatch",
    "TaskSetup",
    "allow_read_problem",
    "check_confinement",
    "check_sandbox",
    "claude_command",
    "claude_env",
    "claude_request_key",
    "claude_version",
    "confined_command",
    "confinement_hidden",
    "collect_artifacts",
    "delegations_of",
    "detect_activation",
    "drain",
    "file_sha256",
    "find_claude_bin",
    "finish_claude_run",
    "hook_firings_of",
    "install_skills",
    "normalize_skill_name",
    "parse_stream_json",
    "prepare_project",
    "process_start_time",
    "project_files",
    "remove_stale_run_folders",
    "run_claude_process",
    "run_claude_query",
    "sandbox_problem",
    "sandbox_settings",
    "skill_md_with_description",
]
