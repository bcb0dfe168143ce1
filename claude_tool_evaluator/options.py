"""Every option of the command line as one row of OPTIONS (flags, help group, click settings),
and the Writer table (Writer, WRITERS, register_writer, writer_named) that every output format is
one row of; the rows are in writers/__init__.py. What an invocation's options hold (Settings) and
the project file's schema are settings.py's.

May import: the rooms above it (the foundations up to scoring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import click

import prompts
import test_constants as C

from .claude_code.process import tool_grants
from .loaders.servers import SERVER_TRANSPORTS
from .option_types import (
    POSITIVE_FLOAT,
    POSITIVE_INT,
    FiniteFloat,
    Option,
    RunCount,
    answer_match_option,
    option,
    shard_option,
)

__all__ = [
    "OPTIONS",
    "RUNNING",
    "TASKS",
    "WRITERS",
    "Writer",
    "flag_of",
    "option_named",
    "option_order",
    "register_writer",
    "writer_named",
]


# ---------------------------------------------------------------------------- options: one row per option
# Every option of the command line is one row of OPTIONS: its flags, its help group (the
# README's options tables), its help and its click settings. The command line, every verb's
# own help, the project file's keys and the refusals all read this table; a writer adds its
# own row when it registers (see Writer). `Settings` has a field for every row but a writer's.
_EVALUATE, RUNNING, _MODEL = "What to evaluate", "Running and output", "Model"


_SERVERS, _POLICY, _CONVERSATIONS = "MCP servers", "Tools that change things", "Conversations"


_GRADING, _SKILLS, TASKS, _OPTIMIZER = (
    "Grading",
    "Skills (Claude Code)",
    "Task evals (Claude Code)",
    "Description optimizer",
)


_CROWD = "The crowded room (distractors)"


_HOSTILE = "The hostile room (red team, scan, pins)"
_STATISTICS = "Is the change real? (compare, plan)"


_PLUGINS = "Whole plugins (plugin, export)"


_LITERATURE = "Benchmarks from the literature (import)"


OPTIONS: list[Option] = [
    option(_EVALUATE, "-q", "--query", help="One query to evaluate."),
    option(
        _EVALUATE,
        "-c",
        "--conversation",
        type=click.Path(),
        metavar="FILE.md",
        help="Continue a conversation from a markdown file (**User** / **Assistant** blocks, "
        "## User / ## Assistant headings, or User: / Assistant: lines).",
    ),
    option(
        _EVALUATE,
        "--csv",
        type=click.Path(),
        metavar="FILE.csv",
        help="Run a CSV regression suite.",
    ),
    option(
        _EVALUATE,
        "--tests",
        path=True,
        multiple=True,
        metavar="FILE_OR_DIR",
        help="Markdown tests (knowledge/task/security/trigger) or a skill-creator eval JSON. With "
        "--skill they run through Claude Code; without, against the MCP servers (a '# Simulated "
        "User' section gives a test its simulated user). A .xml file is a QA evaluation (as --qa).",
    ),
    option(
        _EVALUATE,
        "--qa",
        type=click.Path(),
        metavar="FILE.xml",
        help="Run a QA evaluation in mcp-builder's format (<qa_pair> question and answer) against "
        "the MCP servers: accuracy over the runs (--tests FILE.xml does the same).",
    ),
    option(
        _EVALUATE,
        "--skill",
        path=True,
        multiple=True,
        metavar="PATH",
        help="A SKILL.md or its folder, a subagent (agents/NAME.md) or a plugin folder (its "
        "agents) (repeatable: several are installed together).",
    ),
    option(
        _EVALUATE,
        "--trigger",
        path=True,
        multiple=True,
        metavar="FILE",
        help="One trigger test file (.md or eval .json).",
    ),
    option(
        _EVALUATE,
        "--compare",
        path=True,
        metavar="OLD.json NEW.json [...]",
        help="Compare results files, each against the one before: regressions, fixes, added and "
        "removed cases, pass rate, triggerScore and cost change (verb: compare).",
    ),
    option(
        _EVALUATE,
        "--generate-triggers",
        path=True,
        metavar="SKILL.md",
        help="Draft a trigger test for a skill (to -o FILE.md, else stdout) (verb: generate).",
    ),
    option(
        _EVALUATE,
        "--generate-tests",
        path=True,
        metavar="SKILL.md",
        help="Draft a starter set (trigger, knowledge, task, security) into -o DIR "
        "(verb: generate --all).",
    ),
    option(
        _EVALUATE,
        "--merge",
        path=True,
        metavar="PIECE.json [...]",
        help="Put the results files of a sharded run (--shard K/N) together into one run's "
        "document, verdicts and reports (verb: merge).",
    ),
    option(
        _EVALUATE,
        "--schema",
        is_flag=True,
        help="Print the JSON Schema of the results file and exit (verb: schema).",
    ),
    option(
        _EVALUATE,
        "--optimize",
        is_flag=True,
        help="Improve a skill's description (--skill S --trigger EVALS) or the MCP tools' "
        "descriptions (--csv SUITE): train/test split, proposals from --optimizer-model, the "
        "best chosen on the held-out queries.",
    ),
    option(
        _EVALUATE,
        "--overlap",
        is_flag=True,
        help="Judge which of the --skill skills (or the skill and its --distractors) claim the "
        "same requests: a lexical pre-filter, then the judge on the closest pairs; no Claude Code "
        "run (verb: overlap).",
    ),
    option(
        _EVALUATE,
        "--schema-of",
        type=click.Choice(["results", "project"]),
        default="results",
        show_default=True,
        help="schema: the JSON Schema of the results file, or of the project file "
        f"({C.PROJECT_FILE}).",
    ),
    option(
        _EVALUATE,
        "--from",
        name="from_results",
        type=click.Path(),
        metavar="RESULTS.json",
        help="Write the reports of an existing results file; nothing runs (verb: render).",
    ),
    option(
        RUNNING,
        "-i",
        "--iterations",
        type=RunCount(),
        default=C.DEFAULT_ITERATIONS,
        show_default=True,
        help="Run every case this many times; auto (auto:MIN-MAX, default "
        f"{C.AUTO_MIN_RUNS}-{C.AUTO_MAX_RUNS}): in rounds, each case stopping once its 95% "
        "interval clears --threshold (or at MAX).",
    ),
    option(
        RUNNING,
        "--allow-many-runs",
        is_flag=True,
        help=f"Let -i / --runs go over {C.MAX_RUNS_PER_CASE:,} runs a case (refused without it: "
        "most likely a typo).",
    ),
    option(
        RUNNING,
        "--concurrency",
        type=POSITIVE_INT,
        help=f"Runs at once (default {C.DEFAULT_CONCURRENCY}; skill runs: 2 per CPU, at most 10; "
        f"plugin runs: {C.DEFAULT_PLUGIN_CONCURRENCY}).",
    ),
    option(
        RUNNING,
        "--shard",
        metavar="K/N",
        callback=shard_option,
        help="Run only shard K of N: a stable share of the runs (by case, iteration and model); "
        "merge puts the N results files together.",
    ),
    option(
        RUNNING,
        "--threshold",
        type=FiniteFloat(0, 1),
        default=C.DEFAULT_CASE_THRESHOLD,
        show_default=True,
        help="A case passes when its pass rate over the iterations is at least this.",
    ),
    option(
        RUNNING,
        "--summary-only",
        is_flag=True,
        help="Big suites: keep only the summary in memory and in -o FILE; every run's full "
        "result goes to FILE.results.jsonl as it finishes.",
    ),
    option(
        RUNNING,
        "--resume",
        is_flag=True,
        help="Continue the run whose output is -o FILE: only runs not yet finished run.",
    ),
    option(
        RUNNING,
        "--accept-changed-tools",
        is_flag=True,
        help="With --resume / --retry-errors: keep the earlier runs even though the servers' "
        "tools changed since (refused without it, naming the changed tools).",
    ),
    option(
        RUNNING,
        "--retry-errors",
        is_flag=True,
        help="Rerun the runs of -o FILE that ended in an error (and any not yet run).",
    ),
    option(
        RUNNING,
        "--max-cost",
        type=POSITIVE_FLOAT,
        metavar="USD",
        help="Start no new run once the run has cost this much (it says so; --resume goes on).",
    ),
    option(
        RUNNING,
        "--dry-run",
        is_flag=True,
        help="Check inputs, connect to the servers, estimate calls and cost; no model or claude "
        "call. import, export: list the files they would write; nothing is written.",
    ),
    option(
        RUNNING,
        "--batch",
        is_flag=True,
        help="Tool-use runs: send Claude's calls through the Message Batches API, one batch per "
        "round of every conversation (half price; a round can take minutes to hours).",
    ),
    option(RUNNING, "--force", is_flag=True, help="--generate-*: overwrite existing files."),
    option(
        _MODEL,
        "--model",
        multiple=True,
        default=[C.DEFAULT_MODEL],
        show_default=True,
        help="Model under test (skill runs: the model of knowledge/task/security tests). "
        "Repeatable: every case runs on every model, reported side by side.",
    ),
    option(
        _MODEL,
        "--harness",
        multiple=True,
        type=click.Choice(C.HARNESSES),
        help="Where each case runs: api (our Messages API loop, the default) or claude-code (the "
        "real `claude -p` with the suite's servers as its MCP config, in a temporary HOME). "
        "Repeatable: every case runs each way, reported side by side.",
    ),
    option(
        _MODEL,
        "--tool-search",
        multiple=True,
        type=click.Choice(C.TOOL_SEARCH_VALUES),
        help="--harness claude-code: Claude Code's tool search (ENABLE_TOOL_SEARCH) on, off or "
        "auto (Claude Code decides). Repeatable: every case runs with each, side by side.",
    ),
    option(
        _MODEL,
        "--mcp-startup",
        type=click.Choice(C.MCP_STARTUP_CHOICES),
        default="wait",
        show_default=True,
        help="--harness claude-code: wait for the servers before Claude Code's first request, "
        "or send it at once (no-wait: as a session whose user types before a slow server has "
        "connected; the model must wait for it).",
    ),
    option(
        _MODEL,
        "--prompt",
        path=True,
        default=prompts.DEFAULT_SYSTEM_PROMPT,
        show_default=True,
        help="System prompt: a name from prompts.py or a file path.",
    ),
    option(
        _MODEL,
        "--max-turns",
        type=POSITIVE_INT,
        default=C.DEFAULT_MAX_TURNS,
        show_default=True,
        help="Model calls per conversation (skill tests: claude --max-turns).",
    ),
    option(
        _MODEL,
        "--max-tokens",
        type=POSITIVE_INT,
        default=C.DEFAULT_MAX_TOKENS,
        show_default=True,
        help="Most tokens in one answer; a cut answer is recorded as truncated.",
    ),
    option(
        _MODEL,
        "--temperature",
        type=FiniteFloat(0, 1),
        default=C.DEFAULT_TEMPERATURE,
        help="Sampling temperature, for models that take one (default: the API's).",
    ),
    option(
        _MODEL,
        "--base-url",
        help="Anthropic-compatible API base URL (default: $ANTHROPIC_BASE_URL).",
    ),
    option(
        _MODEL,
        "--max-retries",
        type=click.IntRange(min=0),
        default=C.DEFAULT_MAX_RETRIES,
        show_default=True,
        help="Retries of a failed model call (429, 5xx, overload, connection).",
    ),
    option(
        _MODEL,
        "--request-timeout",
        type=POSITIVE_FLOAT,
        default=C.DEFAULT_REQUEST_TIMEOUT,
        show_default=True,
        help="Seconds one model call may take.",
    ),
    option(
        _SERVERS,
        "--server",
        multiple=True,
        metavar='"CMD ARGS"',
        help="A stdio MCP server command (repeatable).",
    ),
    option(
        _SERVERS,
        "--server-env",
        multiple=True,
        metavar="KEY[=VALUE]",
        help="Environment for --server processes: KEY passes ours, KEY=VALUE sets it.",
    ),
    option(
        _SERVERS,
        "--mcp-config",
        type=click.Path(),
        help="A Claude-style mcpServers JSON file, or a Claude Code plugin folder: its servers, "
        "${CLAUDE_PLUGIN_ROOT} expanded (skill runs: a file, passed to claude).",
    ),
    option(
        _SERVERS,
        "--server-module",
        path=True,
        multiple=True,
        metavar="PATH.py[:ATTR]",
        help="Import a Python MCP server object and talk to it in-process (repeatable).",
    ),
    option(
        _SERVERS,
        "--tool-timeout",
        type=POSITIVE_FLOAT,
        default=C.DEFAULT_TOOL_TIMEOUT,
        show_default=True,
        help="Seconds one tool call may take.",
    ),
    option(
        _SERVERS,
        "--stop-grace",
        type=FiniteFloat(min=0, max=60),
        default=C.DEFAULT_STOP_GRACE,
        show_default=True,
        metavar="S",
        help="Seconds a stdio server may take to exit after its stdin closes at the end of a run; "
        "then its process group is terminated.",
    ),
    option(
        _SERVERS,
        "--max-result-chars",
        type=click.IntRange(min=0),
        default=C.DEFAULT_MAX_RESULT_CHARS,
        show_default=True,
        help="Tool results longer than this are cut (0: no limit).",
    ),
    option(
        _SERVERS,
        "--server-url",
        multiple=True,
        metavar="URL",
        help="A remote MCP server by URL (repeatable), over --transport.",
    ),
    option(
        _SERVERS,
        "--transport",
        type=click.Choice(SERVER_TRANSPORTS),
        default="http",
        show_default=True,
        help="How --server-url servers are reached: streamable HTTP, or legacy HTTP+SSE.",
    ),
    option(
        _SERVERS,
        "--tool-overrides",
        type=click.Path(),
        metavar="FILE.json",
        help='Show Claude other descriptions / input schemas for some tools ({"tool": '
        '{"description": ..., "input_schema": ...}}); the servers still run the calls.',
    ),
    option(
        _POLICY,
        "--tool-policy",
        type=click.Choice(C.TOOL_POLICIES),
        default=C.DEFAULT_TOOL_POLICY,
        show_default=True,
        help="Which calls the servers run: live (all; a run that can call a destructive tool "
        "says so), safe (not tools annotated destructiveHint: true; Claude gets a marked "
        "stand-in), strict (the MCP specification's defaults: not an unannotated tool, nor one "
        "that may destroy) or read-only (only tools annotated readOnlyHint: true).",
    ),
    option(
        _POLICY,
        "--allow-tool",
        multiple=True,
        metavar="NAME",
        help="Run this tool whatever --tool-policy says (repeatable; globs like 'create_*').",
    ),
    option(
        _POLICY,
        "--mock-tools",
        type=click.Path(),
        metavar="FILE.json",
        help='Answer matching calls from this file instead of the server: {"tool": {"result": '
        '...}} or {"tool": [{"match": {args}, "result": ...}]}.',
    ),
    option(
        _POLICY,
        "--record",
        type=click.Path(),
        metavar="DIR",
        help="Record the servers' tools and every live call's result into a cassette folder "
        "(redacted JSON, one file per server).",
    ),
    option(
        _POLICY,
        "--replay",
        type=click.Path(),
        metavar="DIR",
        help="Answer calls from a cassette folder; with no server named, its tools come from the "
        "cassette (no server runs).",
    ),
    option(
        _POLICY,
        "--replay-miss",
        type=click.Choice(C.REPLAY_MISS_CHOICES),
        default=C.DEFAULT_REPLAY_MISS,
        show_default=True,
        help="A call the cassette lacks: an error of the case, or a live call (under "
        "--tool-policy).",
    ),
    option(
        _CONVERSATIONS,
        "--interactive",
        is_flag=True,
        help="You answer when Claude asks: type a reply, 'end' (or Ctrl-D) to finish; Ctrl-C "
        "stops the run and keeps the results so far.",
    ),
    option(
        _CONVERSATIONS,
        "--simulate-user",
        metavar="GOAL",
        help="A second model plays a user with this goal and answers Claude's questions.",
    ),
    option(
        _CONVERSATIONS,
        "--user-model",
        default=C.DEFAULT_USER_MODEL,
        show_default=True,
        help="Model playing the simulated user.",
    ),
    option(
        _CONVERSATIONS,
        "--max-user-turns",
        type=POSITIVE_INT,
        default=C.DEFAULT_MAX_USER_TURNS,
        show_default=True,
        help="Messages the simulated user may send per conversation.",
    ),
    option(
        "CSV suites", "--tag", multiple=True, help="Only the CSV cases with this tag (repeatable)."
    ),
    option(
        "QA evaluations",
        "--answer-match",
        metavar="MODE",
        callback=answer_match_option,
        help="How every QA answer is compared (instead of each pair's own): exact (default), "
        "normalized, numeric, numeric:TOL, numeric:PCT%, contains, regex or judge.",
    ),
    option(
        _GRADING,
        "--judge-model",
        default=C.DEFAULT_JUDGE_MODEL,
        show_default=True,
        help="Model of the LLM judge that grades rubrics and `judge` answers.",
    ),
    option(
        _GRADING,
        "--verify-timeout",
        type=POSITIVE_FLOAT,
        default=C.DEFAULT_VERIFY_TIMEOUT,
        show_default=True,
        help="Seconds a case's verify command may take (then it is an error).",
    ),
    option(
        _GRADING,
        "--calibrate",
        type=click.Path(),
        metavar="LABELS",
        help="People's verdicts on judged runs (CSV run,grader,verdict,note or JSON lines, as the "
        "label sheet downloads them) to check the judge against (verb: calibrate LABELS RESULTS).",
    ),
    option(
        _GRADING,
        "--judged-results",
        type=click.Path(),
        metavar="RESULTS.json",
        help="calibrate: the results file whose judge verdicts the labels are about.",
    ),
    option(
        _GRADING,
        "--min-kappa",
        type=click.FloatRange(-1.0, 1.0),
        metavar="K",
        default=C.DEFAULT_MIN_KAPPA,
        show_default=True,
        help="calibrate: a judge grader whose Cohen's kappa against the labels is below this is "
        "flagged in every later report that shows it, until it is calibrated again.",
    ),
    option(
        _SKILLS,
        "--trigger-model",
        multiple=True,
        default=[C.DEFAULT_TRIGGER_MODEL],
        show_default=True,
        help="Model for trigger queries (a Claude Code alias or full id). Repeatable: every "
        "query runs on every model, side by side.",
    ),
    option(
        _SKILLS,
        "--trigger-threshold",
        type=FiniteFloat(0, 1, min_open=True),
        default=C.DEFAULT_TRIGGER_THRESHOLD,
        show_default=True,
        help="Activation rate at which a query counts as activating.",
    ),
    option(
        _SKILLS,
        "--trigger-max-turns",
        type=POSITIVE_INT,
        default=C.DEFAULT_TRIGGER_MAX_TURNS,
        show_default=True,
        help="--max-turns of each trigger query's claude run.",
    ),
    option(
        _SKILLS,
        "--trigger-timeout",
        type=POSITIVE_FLOAT,
        help="Seconds per trigger run (default: the test's timeout, 30).",
    ),
    option(
        _SKILLS,
        "--runs",
        type=RunCount(),
        help="Runs per query or test (default: the test's `runs`, else 3 for trigger queries "
        "and 1 for other tests; plugin: per case and arm, default each case's `runs`, else 3; "
        "export: each case's `runs`); auto (auto:MIN-MAX): in rounds, each stopping once decided.",
    ),
    option(
        _SKILLS,
        "--min-trigger-score",
        type=FiniteFloat(0, 100),
        metavar="PERCENT",
        help="Fail (exit 1) when a skill's triggerScore is below this.",
    ),
    option(
        _SKILLS,
        "--claude-bin",
        path=True,
        multiple=True,
        metavar="PATH",
        help="The Claude Code CLI (default: claude on PATH, then node_modules/.bin/claude). "
        "Repeatable: every query runs on every version, side by side (a version matrix).",
    ),
    option(
        _SKILLS,
        "--skill-description",
        multiple=True,
        metavar="TEXT|@FILE|NAME=TEXT",
        help="Install the skill with this description instead of its SKILL.md's (in the runs' "
        "temporary copy only); NAME=TEXT with several --skill.",
    ),
    option(
        _SKILLS,
        "--generate-count",
        type=click.IntRange(1, 50),
        default=C.DEFAULT_GENERATED_QUERIES,
        show_default=True,
        help="--generate-*: positive and negative queries each.",
    ),
    option(
        TASKS,
        "--allow-tools",
        multiple=True,
        callback=lambda context, parameter, value: tool_grants(value or ()),  # one parser
        metavar="TOOLS",
        help="Tools runs may use (Claude Code's syntax: `--allow-tools Bash Write`, `Bash,Write`, "
        "`'Bash Write'`, repeatable, "
        f"`Tool(pattern:*)`). Task runs: any of {', '.join(C.TASK_ALLOWABLE_TOOLS)}, file tools "
        "in their project only, Bash in Claude Code's sandbox (bubblewrap and socat, or "
        "--unconfined). plugin: the operator's grant, as claude plugin eval --allow-tools.",
    ),
    option(
        TASKS,
        "--unconfined",
        is_flag=True,
        help="Let task runs' Bash, and a plugin run's hooks and servers, run as you, outside any "
        "sandbox (where bubblewrap cannot start); named in the results and reports.",
    ),
    option(
        TASKS,
        "--allow-read",
        multiple=True,
        type=click.Path(),
        metavar="PATH",
        help="Task runs (and a plugin run's hooks and servers) may read this file or folder of "
        "your home (repeatable): Bash in the sandbox, Read and a confined plugin see nothing of "
        "your home by default (keys, credentials, history).",
    ),
    option(
        TASKS,
        "--ignore-path",
        multiple=True,
        metavar="GLOB",
        help="A file other programs change while skill runs run (an editor's autosave, a test "
        "cache): not watched by the outside-write check (repeatable).",
    ),
    option(
        TASKS,
        "--artifacts",
        type=click.Path(),
        metavar="DIR",
        help="Keep what each task run leaves in its project in "
        "DIR/<eval>/<configuration>/run-<n>/, with manifest.json (path, size, sha256).",
    ),
    option(
        TASKS,
        "--baseline",
        is_flag=True,
        help="Run every task also without the skill (without_skill), and report the delta.",
    ),
    option(
        TASKS,
        "--baseline-skill",
        type=click.Path(),
        metavar="PATH",
        help="Run every task also with this version of the skill (old_skill), and report the "
        "delta.",
    ),
    option(
        _OPTIMIZER,
        "--holdout",
        type=FiniteFloat(0, 1, max_open=True),
        default=C.DEFAULT_HOLDOUT,
        show_default=True,
        help="--optimize: share of the queries / cases held out as the test split (stratified).",
    ),
    option(
        _OPTIMIZER,
        "--seed",
        type=int,
        default=C.DEFAULT_SPLIT_SEED,
        show_default=True,
        help="--optimize: seed of the train/test split. Distractors: the order in which the steps "
        "add them, and which lookalike:N set --distractors-file keeps.",
    ),
    option(
        _OPTIMIZER,
        "--optimize-rounds",
        type=POSITIVE_INT,
        default=C.DEFAULT_OPTIMIZE_ROUNDS,
        show_default=True,
        help="--optimize: new descriptions asked for at most.",
    ),
    option(
        _OPTIMIZER,
        "--optimizer-model",
        default=C.DEFAULT_OPTIMIZER_MODEL,
        show_default=True,
        help="--optimize: the model that proposes descriptions.",
    ),
    option(
        _CROWD,
        "--distractors",
        multiple=True,
        metavar="SOURCE",
        help="Trigger runs: install these skills beside the one under test (repeatable): a folder "
        "of skills, `installed` (your own ~/.claude skills and plugin skills, copied into each "
        "run's temporary HOME) or lookalike:N (N decoys the model writes). plugin: `installed`, "
        "your other installed plugins, loaded in both arms.",
    ),
    option(
        _CROWD,
        "--distractor-steps",
        metavar="N,N,...",
        help="Run the trigger set at each of these counts of distractors (e.g. 0,5,10,20,40): "
        "the curve, and who took each query (default: all of them, once).",
    ),
    option(
        _CROWD,
        "--distractor-tools",
        multiple=True,
        metavar="SOURCE",
        help="CSV suites: offer these tools beside the servers' own (repeatable): an mcpServers "
        "file (its servers' tools; never called) or lookalike:N (N decoy tools the model writes, "
        "served in-process). A call to one gets a neutral error and counts as stolen.",
    ),
    option(
        _CROWD,
        "--tool-steps",
        metavar="N,N,...",
        help="Run the suite with each of these counts of distractor tools added (e.g. "
        "0,25,50,100): F1 per step, tokens of tool definitions, who took each miss.",
    ),
    option(
        _CROWD,
        "--distractors-file",
        type=click.Path(),
        metavar="FILE.json",
        help="Where lookalike:N decoys are kept: read when it holds the set (same subject and "
        "--seed: no model call), else written once. Review or edit it freely.",
    ),
    option(
        _HOSTILE,
        "--redteam",
        is_flag=True,
        help="Red-team the servers with your suite (--csv, --qa or -q): every case runs clean and "
        "under each attack (--attacks) with each vector (--vectors), through an adversarial "
        "proxy in front of each server; canaries decide success (verb: redteam).",
    ),
    option(
        _HOSTILE,
        "--attacks",
        multiple=True,
        metavar="CLASS[:VARIANT],...",
        help="redteam: the attack classes (result-injection, description-poisoning, shadowing, "
        "rug-pull), each with its default variants, or CLASS:VARIANT (default: every class).",
    ),
    option(
        _HOSTILE,
        "--vectors",
        multiple=True,
        metavar="SOURCE[:NAME],...",
        help="redteam: the injection vectors: ours (prompts.py, the default), agentdojo "
        "(AgentDojo's attack templates, read from its package: the benchmarks extra), or "
        "SOURCE:NAME.",
    ),
    option(
        _HOSTILE,
        "--redteam-judge",
        is_flag=True,
        help="redteam: also ask the judge (--judge-model) whether each attacked run followed the "
        "injected instruction (a run it says did counts as a success).",
    ),
    option(
        _HOSTILE,
        "--scan",
        is_flag=True,
        help="Check every tool definition of the servers (or of --replay's cassette): hidden "
        "Unicode, instructions to the model, URLs and encoded blobs, long descriptions, name "
        "collisions, missing annotations; no model call (verb: scan).",
    ),
    option(
        _HOSTILE,
        "--judge",
        is_flag=True,
        help="scan: also ask the judge (--judge-model) of every definition whether it instructs "
        "the agent beyond its function (what, and how sure), beside the static findings; its "
        "price is shown first, --dry-run stops there, --max-cost caps it, --cache answers "
        "repeats.",
    ),
    option(
        _HOSTILE,
        "--fail-on",
        type=click.Choice(C.SCAN_SEVERITIES),
        default=C.DEFAULT_SCAN_FAIL_ON,
        show_default=True,
        help="scan: exit 1 on a finding of this severity or above.",
    ),
    option(
        _HOSTILE,
        "--pin",
        path=True,
        metavar="FILE",
        help="Pin every tool definition (SHA-256 of name, description, schema, annotations) in "
        "FILE on the first run; a later run whose servers changed one fails before any model "
        "call, with a diff of it.",
    ),
    option(
        _HOSTILE,
        "--update-pins",
        is_flag=True,
        help="--pin: accept the changed definitions (they are reported) and write them to FILE.",
    ),
]


OPTIONS += [
    option(
        RUNNING,
        "-k",
        "--keyword",
        metavar="EXPR",
        help="Only the cases whose names match, pytest-style: words (a name holding it), and, "
        'or, not, parentheses (e.g. -k "tables and not slow").',
    ),
    option(
        RUNNING,
        "-x",
        "--fail-fast",
        is_flag=True,
        help="Stop starting runs at the first run that fails (the rest are not started; "
        "--resume does them).",
    ),
    option(
        RUNNING,
        "--rerun-failed",
        type=click.Path(),
        metavar="RESULTS.json",
        help="Run again only the cases that failed or errored in this results file; its passing "
        "cases' runs are kept, and -o gets the whole document.",
    ),
    option(
        RUNNING,
        "--cache",
        type=click.Path(),
        metavar="DIR",
        help="Keep every model answer in DIR under a hash of the exact request and the run's "
        "iteration: a rerun pays only for requests not seen before (Claude Code runs too, "
        "through a local caching proxy); says what it saved. Not with --batch.",
    ),
    option(
        _STATISTICS,
        "--plan",
        is_flag=True,
        help="Say how many runs per case detect a change worth detecting (--detect) with 80% "
        "power: from a results file's pass rates (--from) or an assumed one (--rate) "
        "(verb: plan).",
    ),
    option(
        _STATISTICS,
        "--detect",
        type=FiniteFloat(0, 100, min_open=True),
        default=C.DEFAULT_DETECT_POINTS,
        show_default=True,
        metavar="POINTS",
        help="plan: the smallest change in a pass rate worth detecting, in percentage points.",
    ),
    option(
        _STATISTICS,
        "--rate",
        type=FiniteFloat(0, 1),
        metavar="RATE",
        help=f"plan without a results file: the pass rate assumed for every case (default "
        f"{C.PLAN_ASSUMED_RATE:g}).",
    ),
    option(
        _STATISTICS,
        "--alpha",
        type=FiniteFloat(0, 0.5, min_open=True),
        default=C.DEFAULT_ALPHA,
        show_default=True,
        help="compare: a case is a regression or a fix only when its change is significant at "
        "this level (Fisher's exact test, Holm-corrected across cases); plan: the test's level; "
        "plugin: the level of each case's with/without delta.",
    ),
    option(
        _STATISTICS,
        "--significant-only",
        is_flag=True,
        help="compare: exit 1 only on a significant regression or a removed case; a suspected "
        "regression (every run passed before, every run fails now, not significant) is still "
        "listed first, under a warning.",
    ),
]


# a whole plugin's eval suite (plugin), and what import and export read and write
OPTIONS += [
    option(
        _EVALUATE,
        "--plugin",
        path=True,
        metavar="PATH",
        help="Run a plugin's eval suite (evals/, as claude plugin eval reads it) through Claude "
        "Code with and without the plugin: its folder, or the name of a plugin installed for you "
        "(verb: plugin PATH). import plugin-evals: the plugin whose suite is read.",
    ),
    option(
        _EVALUATE,
        "--import",
        name="import_source",
        type=click.Choice(C.IMPORT_SOURCES),
        help="Write a benchmark from the literature (bfcl: BFCL V4, tau2: τ²-bench, read from its "
        "package) or a plugin's evals/ suite (plugin-evals, with --plugin) into the folder -o DIR "
        "as this product's suites, or Claude Code sessions (sessions, with --sessions-from) as "
        "claude plugin eval cases into the plugin -o DIR (verb: import).",
    ),
    option(
        _EVALUATE,
        "--sessions-from",
        path=True,
        metavar="PATH",
        help="import sessions: Claude Code session logs (a session's .jsonl, a project folder, "
        "or ~/.claude/projects) or claude -p stream-json transcripts (verb: import sessions PATH).",
    ),
    option(
        _EVALUATE,
        "--session",
        multiple=True,
        metavar="N|ID|all",
        help="import sessions: a session to make a case of: its number as listed, its id (or "
        "enough of its start), or all (repeatable). Without it the sessions are listed.",
    ),
    option(
        _EVALUATE,
        "--should-not-use",
        multiple=True,
        metavar="NAME",
        help="import sessions: a skill, agent or MCP tool the session called but should not have: "
        "its grader says it is never called (min 0, max 0) (repeatable).",
    ),
    option(
        _EVALUATE,
        "--export",
        name="export_format",
        type=click.Choice(C.EXPORT_FORMATS),
        help="Write trigger sets and task evals (--tests) or a CSV suite (--csv) as claude plugin "
        "eval cases into the plugin folder -o DIR (made a plugin around --skill when it is none) "
        "(verb: export).",
    ),
    option(
        _PLUGINS,
        "--ablation",
        type=click.Choice(C.ABLATIONS),
        default=C.DEFAULT_ABLATION,
        show_default=True,
        help="plugin: run every case with and without the plugin (as claude plugin eval does), "
        "or with it alone (none).",
    ),
    option(
        _PLUGINS,
        "--case",
        multiple=True,
        metavar="GLOB",
        help="plugin: only the cases whose name matches (as claude plugin eval --case; "
        "repeatable).",
    ),
    option(
        _PLUGINS,
        "--disallow-tools",
        multiple=True,
        callback=lambda context, parameter, value: tool_grants(value or ()),  # one parser
        metavar="TOOLS",
        help="plugin: tools kept from Claude in every case, even if granted (Claude Code's syntax).",
    ),
    option(
        _PLUGINS,
        "--eval-dir",
        metavar="DIR",
        help="plugin: the cases' folder below the target (default: the manifest's, else evals/).",
    ),
    option(
        _PLUGINS,
        "--mocks",
        type=click.Choice(C.MOCK_MODES),
        default=C.DEFAULT_MOCKS,
        show_default=True,
        help="plugin: record: mocks/ stand in for MCP servers (unmocked: not started); off: none.",
    ),
    option(
        _PLUGINS,
        "--allow-real-servers",
        is_flag=True,
        help="plugin, --mocks record: also start the real servers that have no mock (as you).",
    ),
    option(
        _PLUGINS,
        "--record-mocks",
        is_flag=True,
        help="plugin: run the plugin's real MCP servers once (trusted, confined, granted) and "
        "write what they listed and answered as mocks/ in the suite (existing files kept).",
    ),
    option(
        _PLUGINS,
        "--baseline-from",
        type=click.Path(),
        metavar="RESULTS.json",
        help="plugin: reuse the runs without the plugin of this earlier plugin run's results "
        "where nothing they depend on changed (the case, graders, model, Claude Code, judge, "
        "grants, mocks, scaffold); --cache DIR keeps and reuses them too.",
    ),
    option(
        _PLUGINS,
        "--fresh-baseline",
        is_flag=True,
        help="plugin: run the arm without the plugin again, even where an earlier run "
        "(--baseline-from, --cache) could be reused.",
    ),
    option(
        _PLUGINS,
        "--keep-events",
        is_flag=True,
        help="plugin: keep each run's stream-json events in the results.",
    ),
    option(
        _PLUGINS,
        "--trust-plugin",
        is_flag=True,
        help="Assert that you trust the plugin's code: its hooks, MCP servers (plugin, --skill "
        "PLUGIN_DIR, --mcp-config PLUGIN_DIR) and scaffold scripts may run, confined, without "
        "the question a terminal asks once per folder (for CI and pipes, as claude plugin eval "
        "--trust-plugin).",
    ),
    option(
        _PLUGINS,
        "--scaffold",
        is_flag=True,
        help="plugin: run each case's scaffold_script first (bash, as you: trusted suites only).",
    ),
    option(
        _PLUGINS,
        "--mcp-server",
        metavar="NAME",
        help="export --csv: the plugin's MCP server whose tools the suite names (mcp__NAME__TOOL).",
    ),
    option(
        _LITERATURE,
        "--categories",
        metavar="LIST",
        help="import bfcl: comma-separated categories (default: every single-turn category).",
    ),
    option(
        _LITERATURE,
        "--domain",
        type=click.Choice(C.TAU2_DOMAINS),
        default=C.DEFAULT_TAU2_DOMAIN,
        show_default=True,
        help="import tau2: the domain.",
    ),
    option(
        _LITERATURE,
        "--split",
        type=click.Choice(C.TAU2_SPLITS),
        default=C.DEFAULT_TAU2_SPLIT,
        show_default=True,
        help="import tau2: the task split (base: every task).",
    ),
    option(
        _LITERATURE,
        "--tasks",
        metavar="IDS",
        help="import tau2: only these task ids, comma-separated.",
    ),
    option(
        _LITERATURE,
        "--limit",
        type=POSITIVE_INT,
        metavar="N",
        help="import: at most N entries per category (bfcl) or N tasks (tau2), from the first.",
    ),
]


def option_named(name: str) -> Option | None:
    return next((o for o in OPTIONS if o.name == name), None)


def flag_of(name: str) -> str:
    """An option as messages name it (`csv_out` -> --csv-out)."""
    found = option_named(name)
    return found.flag if found else name


def option_order(name: str) -> int:
    """Where an option stands in OPTIONS: refusals name the first one given."""
    return next((i for i, o in enumerate(OPTIONS) if o.name == name), len(OPTIONS))


@dataclass(frozen=True)
class Writer:
    """One output format: its option (the command line's and the project file's key), the function
    that writes a run's results, and the one that writes a comparison in the same format (None:
    `compare` refuses it). Every list of writers (the options, what each mode takes, the outputs
    checked before a run starts, what --merge ignores, what `render` can write) is computed from
    WRITERS, so a new format is one `register_writer` call."""

    option: Option
    # (its path, or True for a flag such as --json; the run's Results, a later room's record)
    write: Callable[[Any, Any], None]
    compare: Callable[[Any, Sequence[Any]], None] | None = None  # (path or True; comparisons)
    renders_from: bool = True  # `render` writes it from a results file
    modes: frozenset[str] | None = None  # the modes that take it; None: every mode writing results
    recorded: bool = False  # it changes what a run means: shards record it, --merge compares it
    # a project's suites add their parts to its one file (the pull-request comment), so two
    # suites naming the same path is no clash
    shared_by_suites: bool = False

    @property
    def name(self) -> str:
        return self.option.name

    @property
    def takes_path(self) -> bool:
        return not self.option.kwargs.get("is_flag")


WRITERS: list[Writer] = []  # in the order a run writes them (stdout last)


def register_writer(writer: Writer) -> Writer:
    """Adds a writer (or replaces the one of that name) and its option."""
    row = replace(writer, option=replace(writer.option, writer=True))
    WRITERS[:] = [w for w in WRITERS if w.name != row.name] + [row]
    OPTIONS[:] = [o for o in OPTIONS if o.name != row.name] + [row.option]
    return row


def writer_named(name: str) -> Writer | None:
    return next((w for w in WRITERS if w.name == name), None)
