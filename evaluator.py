#!/usr/bin/env python3
"""Evaluate how Claude uses tools and skills.

Connects to real MCP servers, hands their tools to Claude through the Anthropic Messages API,
runs every tool call Claude makes against the real server, and records what happened; runs
Agent Skill trigger benchmarks through the real Claude Code CLI; scores both and writes
reports a CI job can gate on.

This file is the front door: `python evaluator.py ...`, the `claude-tool-eval` command and
`import evaluator` start here. The program is the package beside it, claude_tool_evaluator/,
whose rooms follow the data flow (its __init__ draws them):
inputs -> load -> cases -> run -> transcripts -> score -> verdicts -> report -> CLI.
A name of the supported API (__all__) loads the room that holds it when it is first asked for.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# The supported API: the entry point, the results model and its reader, the loaders, and the
# tables a new option, writer, section, mode or check is one row of. Everything else may change.
__all__ = [
    "main",
    "build_cli",
    "Settings",
    "settings_from",
    "run_settings_for",
    "EvalError",
    "InputError",
    "ResultsDocument",
    "results_document_model",
    "results_schema",
    "read_results_document",
    "read_result_lines",
    "Results",
    "CaseResult",
    "SummaryRecord",
    "ToolRunResult",
    "SkillRunResult",
    "load_csv_suite",
    "load_qa_suite",
    "load_markdown_test",
    "load_markdown_tests",
    "load_skill",
    "load_conversation",
    "load_mcp_config",
    "load_project",
    "Option",
    "option",
    "OPTIONS",
    "Writer",
    "register_writer",
    "WRITERS",
    "Section",
    "register_section",
    "SECTIONS",
    "Mode",
    "MODES",
    "TOOL_CHECKS",
]

PACKAGE = "claude_tool_evaluator"

# The room of each name of __all__ (and of the version: "" is the package itself).
API_ROOMS = {
    "__version__": "",
    "main": "cli",
    "build_cli": "cli",
    "Settings": "settings",
    "settings_from": "settings",
    "run_settings_for": "dispatch",
    "EvalError": "errors",
    "InputError": "errors",
    "ResultsDocument": "results_schema.document",
    "results_document_model": "results_schema.document",
    "results_schema": "results_schema.document",
    "read_results_document": "results_schema.document",
    "read_result_lines": "results_schema.document",
    "Results": "finished_run",
    "CaseResult": "results_schema.document",
    "SummaryRecord": "results_schema.document",
    "ToolRunResult": "results_schema.document",
    "SkillRunResult": "results_schema.document",
    "load_csv_suite": "loaders.csv_suites",
    "load_qa_suite": "loaders.qa",
    "load_markdown_test": "loaders.skills",
    "load_markdown_tests": "loaders.skills",
    "load_skill": "loaders.skills",
    "load_conversation": "loaders.conversations",
    "load_mcp_config": "loaders.servers",
    "load_project": "project",
    "Option": "options",
    "option": "options",
    "OPTIONS": "options",
    "Writer": "writers",
    "register_writer": "writers",
    "WRITERS": "writers",
    "Section": "results_schema.document",
    "register_section": "results_schema.document",
    "SECTIONS": "results_schema.document",
    "Mode": "mode_table",
    "MODES": "mode_table",
    "TOOL_CHECKS": "scoring.tool_use",
}


# The rooms that fill the tables: OPTIONS, WRITERS and MODES (the command line's), SECTIONS.
TABLE_ROOMS = ("cli", "writers.formats")


def __getattr__(name: str) -> Any:
    room = API_ROOMS.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for filler in TABLE_ROOMS:  # every table full before any of the API is given out
        importlib.import_module(f"{PACKAGE}.{filler}")
    value = getattr(importlib.import_module(f"{PACKAGE}.{room}" if room else PACKAGE), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def run_program() -> None:
    """The program (`python evaluator.py`, `claude-tool-eval`): it ends the process as soon as
    its outputs are written."""
    try:
        from claude_tool_evaluator.cli import run_program as run
    # A Python without the install (no venv active), or this file without its rooms: one line,
    # not a traceback.
    except ModuleNotFoundError as missing:
        install = "pip install -e ."
        if (missing.name or "").split(".")[0] == PACKAGE:
            problem = f"{PACKAGE}/ is not beside {__file__}: copy it too, or install ({install})"
        else:
            problem = (
                f"{missing.name} is not installed in {sys.executable}: activate the environment "
                f"(. .venv/bin/activate) or install it ({install})"
            )
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # Ctrl-C while the rooms load (seconds on a busy machine)
        print("interrupted: stopped while no run was under way", file=sys.stderr)
        sys.exit(130)
    run()


if __name__ == "__main__":
    run_program()
