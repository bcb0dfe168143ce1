"""The whole mode × option table, walked from `evaluator.MODES`: every option a mode refuses exits
2 with one line (here), and every option a mode accepts has an effect its family's file
observes (test_options_*.py: tool use, skills, outputs, crowd and hostile, plugin; the bench
they share, the table, the lab and OBSERVERS, is mode_lab.py).

Both halves are generated from the table, so a new mode or option is covered (or fails here)
without anyone remembering to add it:

- `SAMPLES` holds a sample command-line value for every option of the click command; the
  refusal matrix is every mode's selecting command line plus every option it does not take.
- `OBSERVERS` maps option -> mode -> a function that runs that mode with and without the option
  (or with two distinctive values) and asserts what differs: what reached the scripted
  Anthropic server (model, max_tokens, temperature, system prompt, tools, how many requests,
  the user's text), what was written (-o, --report, --junit, --csv-out, --json), exit codes and
  the results' metadata. Its keys must be exactly the table's (mode, option) pairs.

Tool-use modes (query, csv, markdown) run in-process against the example server module; skill
runs go through the real Claude Code CLI against the scripted server (one skill, one positive and
one negative query, `--runs 1`); generation against the scripted server; compare and schema on
results files written by earlier runs. Runs that several observers of one file read are cached
in its lab.
"""

from __future__ import annotations

import json

import pytest
import test_options_calibrate  # noqa: F401  (registers its observers)
import test_options_crowd_and_hostile  # noqa: F401  (registers its observers)
import test_options_outputs  # noqa: F401  (registers its observers)
import test_options_plugin  # noqa: F401  (registers its observers)
import test_options_skills  # noqa: F401  (registers its observers)
import test_options_tool_use  # noqa: F401  (registers its observers)
from click.testing import CliRunner
from conftest import (
    CLAUDE,
    EXAMPLE_SERVER,
)
from mode_lab import (  # the lab, the scripted models and the helpers several files share
    ALIASES,
    CROWD_TOOLS,
    MODE_BY_NAME,
    MODE_LINES,
    OBSERVERS,
    OPTION_NAMES,
    REFUSED,
    SAMPLES,
    SWITCHED,
    TOOL_MODES,
    Lab,
    accepted,
    baseline,
    calibrated,
    crowd_baseline,
    flagged_run,
    opt_baseline,
    overlap_baseline,
    parsed,
    plugin_writers_run,
    poisoned_scan,
    table_pairs,
    task_baseline,
    through_claude_code,
    tool_args,
    tool_crowd_line,
    writers_run,
)

import evaluator
from claude_tool_evaluator.mode_table import select_mode
from claude_tool_evaluator.options import flag_of

FAMILY_MODULES = (
    "test_options_tool_use",
    "test_options_skills",
    "test_options_outputs",
    "test_options_crowd_and_hostile",
    "test_options_plugin",
    "test_options_calibrate",
)


# ============================================================================ refusals
def test_every_option_has_a_sample_value_and_every_mode_a_command_line():
    assert set(SAMPLES) == set(OPTION_NAMES), (
        "give SAMPLES a value for every option (and none for gone ones)"
    )
    assert set(MODE_LINES) == set(MODE_BY_NAME), (
        "give MODE_LINES a selecting command line for every mode"
    )
    for name, args in MODE_LINES.items():
        settings = parsed(args)
        assert select_mode(settings).name == name
    assert {name for names in ALIASES.values() for name in names} <= set(OPTION_NAMES)


def test_the_refusal_matrix_is_the_whole_table():
    every = {(m.name, o) for m in evaluator.MODES for o in OPTION_NAMES if not accepted(m, o)}
    generated = {tuple(p.values[:2]) for p in REFUSED + SWITCHED}
    assert generated == every and len(REFUSED) > 200
    # Only options that select a mode of their own can hand a command line to another mode.
    modes_of_their_own = ("skill", "trigger", "optimize", "redteam", "plan")
    modes_of_their_own += ("export_format", "import_source")  # export --csv, import --plugin
    assert all(p.values[1] in modes_of_their_own for p in SWITCHED), SWITCHED


@pytest.mark.parametrize("mode, option, expected", REFUSED)
def test_a_refused_option_exits_2_with_one_line(
    mode: str, option: str, expected: str, monkeypatch, tmp_path
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # nothing may reach a model anyway
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(evaluator.main, MODE_LINES[mode] + SAMPLES[option])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (
        result.stderr
    )
    assert result.stdout.strip() == ""
    assert list(tmp_path.iterdir()) == [], "a refused command line writes nothing"
    if "does not apply to" in expected:  # it names one of the options given, as typed
        named = lines[0].removeprefix("error: ").split(" does not apply to ")[0]
        given = parsed(MODE_LINES[mode] + SAMPLES[option]).given
        assert named in {flag_of(name) for name in given}, lines[0]


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--csv", "s.csv", "--runs", "3"],
            "error: --runs does not apply to --csv runs: use -i N: every case runs N times",
        ),
        (
            ["-q", "hi", "--csv", "s.csv"],
            "error: -q does not apply to --csv runs (it works with redteam runs, -q / -c runs)",
        ),
        (["--schema", "--json"], "error: --json does not apply to --schema (it works with"),
        (
            ["--compare", "a.json", "b.json", "--tag", "x"],
            "error: --tag does not apply to --compare (it works with plugin runs, redteam runs, --csv runs)",
        ),
        (
            ["--tests", "t.md", "--interactive"],
            "error: --interactive does not apply to --tests runs against MCP servers",
        ),
        (["-q", "hi", "extra.json"], "error: unexpected argument 'extra.json'"),
    ],
)
def test_refusals_read_as_written(args: list[str], line: str, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = CliRunner().invoke(evaluator.main, args)
    assert (
        result.exit_code == 2 and result.stderr.startswith(line) and result.stderr.count("\n") == 1
    ), result.stderr


@pytest.mark.parametrize("mode, option, other", SWITCHED)
def test_an_option_that_selects_another_mode_is_a_valid_command_line_of_that_mode(
    mode, option, other
):
    settings = parsed(MODE_LINES[mode] + SAMPLES[option])
    assert select_mode(settings).name == other != mode


# ============================================================================ every mode's document survives render
def test_every_mode_document_survives_render(lab: Lab):
    """What each mode writes reads back through the section table and is written again unchanged
    (`render -o`); together they hold every section of the table."""
    documents = {mode: baseline(lab, mode).document() for mode in TOOL_MODES}
    documents["optimize"] = opt_baseline(lab)[1]
    if CLAUDE:
        documents["tasks"] = task_baseline(lab).document()
        documents["skills"] = json.loads(writers_run(lab)[1]["output"].read_text())
        documents["claude-code"] = through_claude_code(lab, "csv").document()
        documents["plugin"] = plugin_writers_run(lab)[0].document()
    documents["overlap"] = overlap_baseline(lab).document()
    calibration, folder = calibrated(lab, "--json")  # and a later run it flags
    documents["calibration"] = calibration.document()
    documents["judge-flags"] = flagged_run(lab, folder, "--json").document()
    documents["scan"] = poisoned_scan(lab).document()  # hidden characters in its findings
    documents["tool-crowding"] = lab.run(*tool_crowd_line(lab), model=CROWD_TOOLS).document()
    documents["matrix"] = lab.run(
        *tool_args(lab, "csv"),
        "--model",
        "claude-haiku-5-5",
        "--model",
        "claude-opus-5-5",
        "--json",
    ).document()
    tagged = lab.fresh("imported.csv")  # a case as `import tau2` tags it: the literature section
    tagged.write_text("test_name,user_prompt,tags\nt,Which connections do I have?,tau2:demo\n")
    documents["literature"] = lab.run(
        "--csv", tagged, "--server-module", EXAMPLE_SERVER, "--json"
    ).document()
    for name, document in documents.items():
        source, copy = lab.fresh(f"{name}.json"), lab.fresh(f"{name}-again.json")
        source.write_text(json.dumps(document))
        assert lab.run("render", source, "-o", copy).code == 0
        assert json.loads(copy.read_text()) == document, name
    written = {key for document in documents.values() for key in document}
    if CLAUDE:
        documents["crowding"] = crowd_baseline(lab).document()
    expected = (
        {s.key for s in evaluator.SECTIONS}
        if CLAUDE
        else {"qa", "tests", "optimization", "matrix", "overlap", "crowding", "security"}
        | {"calibration", "judge_flags"}
    )
    assert expected <= written


def test_the_observers_cover_exactly_the_table():
    """Every family's observers are registered (imported above): exactly the table's pairs, each
    run by the family file that defines it."""
    registered = {(mode, option) for option, by_mode in OBSERVERS.items() for mode in by_mode}
    table = set(table_pairs())
    assert table - registered == set(), "accepted options without an observer"
    assert registered - table == set(), "observers of options the table no longer accepts"
    homes = {getattr(OBSERVERS[option][mode], "__module__", "") for mode, option in registered}
    assert homes <= set(FAMILY_MODULES), f"observers no family file runs: {homes}"
