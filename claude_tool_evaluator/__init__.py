"""The rooms of the evaluator; `evaluator.py` beside this folder is the front door.

The data flows down the rooms, and so do the imports (a room imports only rooms above it in
this list; a later room reaches an earlier one's extension points through the tables it fills:
OPTIONS, WRITERS, SECTIONS, MODES, TOOL_CHECKS):

    inputs -> load -> cases -> run -> transcripts -> score -> verdicts -> report -> CLI

    errors, stopping, sinks, files,     foundations: errors, stop signals, escaping for every
    run_types, redaction, patterns      sink, files written atomically, the types a run is made
                                        of, the redactor, untrusted regular expressions
    results_schema/, answers            the results file's pydantic schema (the hostile room's
                                        and the plugin's sections apart); one answer vocabulary
    loaders/                            CSV, QA, markdown tests, skills, conversations, servers,
                                        distractors, injection vectors
    hub/                                MCP servers: processes, stdio, calls (policy, mocks,
                                        cassettes), the adversarial proxy, pins
    session, batches, engine            the Anthropic session and its cache; Message Batches; the
                                        conversation loop
    claude_code                         one `claude -p` run: HOME, sandbox, caching proxy, stream
    scoring/                            transcripts -> verdicts (TOOL_CHECKS), statistics
    options, settings, grading,         OPTIONS and WRITERS; Settings; the judge and state
    dry_run, pipeline, runners/         checks; cost estimates; journal, resume, signals; runners
    finished_run, writers/              what every writer reads; json, markdown, junit, csv,
                                        html, github, the sections (SECTIONS)
    modes/                              one module per family of modes
    mode_table, cli                     MODES and the command line

Beside the rooms, programs/ holds what the evaluator starts as processes of their own (package
data, run by path: PROGRAMS). This file imports nothing: a room loads when something uses it."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "EXAMPLE_SERVER",
    "HERE",
    "PROGRAMS",
]

__version__ = "0.2.0"


# The checkout (or the environment) this package sits in: its examples/ and node_modules/.
HERE = Path(__file__).resolve().parent.parent


EXAMPLE_SERVER = HERE / "examples" / "profiles_server.py"


# The programs the evaluator starts as processes of their own (a pattern worker, the
# die-with-parent trampoline, Claude Code's MCP server launchers): package data, run by path.
PROGRAMS = Path(__file__).resolve().parent / "programs"
