"""The smaller faults a newcomer met (issue 45, item 7), each as the newcomer met it: what the
evaluator says when given a folder for a report, a suite its servers refuse, a CSV without its
columns, a tag it lacks, a project file naming a missing file, a Ctrl-C before any run, and the
console script's help. Each runs in this process (or as a small process that loads nothing heavy)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

EXAMPLE_SUITE = ROOT / "examples" / "test_queries.csv"


@pytest.fixture
def keyless(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No API key, no network, and a working folder of our own: bad input is refused before
    either matters."""
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # discard: nothing listens
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("--html", "results.html"),
        ("--report", "results.md"),
        ("--junit", "results.xml"),
        ("-o", "results.json"),
    ],
)
def test_a_folder_given_to_a_writer_suggests_a_file_of_its_kind(cli, keyless, flag, named):
    (keyless / "out").mkdir()
    ran = cli("--csv", EXAMPLE_SUITE, flag, "out")
    assert ran.exit_code == 2
    assert ran.stderr == f"error: {flag} out is a folder (give a file path, e.g. out/{named})\n"


def test_a_suite_refused_once_the_servers_answer_shows_no_empty_progress_bar(
    cli, api, tmp_path, example_server_url
):
    suite = tmp_path / "suite.csv"
    suite.write_text("test_name,user_prompt,expected_tools\nt,List the tables,list_tabels\n")
    ran = cli("--csv", suite, "--server-url", example_server_url)
    assert ran.exit_code == 2, ran.output
    assert "names tool 'list_tabels', which no connected server offers" in ran.stderr
    assert not re.search(r"^runs\b", ran.output, re.MULTILINE), ran.output
    assert not api.requests, "nothing was sent to the model"


def test_a_missing_column_is_shown_against_the_files_own_first_row(cli, keyless):
    suite = keyless / "suite.csv"
    suite.write_text("test_name,expected_tools\nt,list_warehouse_tables\n")
    ran = cli("--csv", suite)
    assert ran.exit_code == 2
    assert ran.stderr == (
        f"error: {suite}:1: the header needs test_name and user_prompt (or prompt) columns "
        "(its first row is 'test_name,expected_tools': add user_prompt, e.g. "
        "test_name,user_prompt,expected_tools)\n"
    )
    suite.write_text("t,List the tables,list_warehouse_tables\n")  # no header at all
    assert "(its first row is 't,List the tables,list_warehouse_tables': add test_name and " in (
        cli("--csv", suite).stderr
    )


def test_a_tag_no_test_has_gets_the_nearest_tag_the_suite_has(cli, keyless):
    ran = cli("--csv", EXAMPLE_SUITE, "--tag", "smok")
    assert ran.exit_code == 2
    assert (
        ran.stderr
        == f"error: {EXAMPLE_SUITE}: no test has the tag(s) smok (did you mean 'smoke'?)\n"
    )
    ran = cli("--csv", EXAMPLE_SUITE, "--tag", "zzz")
    assert ran.stderr.startswith(f"error: {EXAMPLE_SUITE}: no test has the tag(s) zzz (its tags: ")


def test_a_missing_file_named_in_the_project_file_names_the_project_files_line(cli, keyless):
    (keyless / "evaluator.yaml").write_text(
        "defaults:\n  max_cost: 1\n\nsuites:\n  - name: tools\n    csv: tool-suite.csv\n"
        "    output: results.json\n"
    )
    ran = cli()
    assert ran.exit_code == 2
    assert ran.stderr == (
        "error: evaluator.yaml:6: suite 'tools': csv: tool-suite.csv does not "
        f"exist (paths in evaluator.yaml are relative to its folder ({keyless.resolve()}))\n"
    )
    assert cli("--csv", EXAMPLE_SUITE, "--dry-run").exit_code == 0, "the command line's wins"


def test_ctrl_c_before_any_run_is_one_line_and_no_blank_one(cli, keyless, monkeypatch):
    """Ctrl-C while the command line is read, the suite loaded or the servers started (no run
    under way: a run stops itself): click's handler printed an empty line and nothing else."""
    from claude_tool_evaluator import dispatch

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(dispatch, "run_settings_for", interrupted)
    ran = cli("--csv", EXAMPLE_SUITE)
    assert ran.exit_code == 130
    assert ran.stderr == "interrupted: stopped while no run was under way\n"


def front_door(*argv: str, before: str = "") -> subprocess.CompletedProcess:
    """evaluator.py's run_program as a process starts it (`before` runs first), sys.argv as given."""
    program = (
        f"import sys\nsys.argv[:] = {list(argv)!r}\n{before}\n"
        "import evaluator\nevaluator.run_program()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_ctrl_c_while_the_program_loads_is_the_same_line_and_no_traceback():
    """A Ctrl-C in the first seconds on a busy machine lands while the rooms are imported."""
    raising = (
        "import builtins\n"
        "real = builtins.__import__\n"
        "def importing(name, *args, **kwargs):\n"
        "    if name == 'claude_tool_evaluator.cli':\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = importing\n"
    )
    done = front_door("evaluator.py", "--csv", str(EXAMPLE_SUITE), before=raising)
    assert (done.returncode, done.stderr) == (
        130,
        "interrupted: stopped while no run was under way\n",
    )


def test_the_console_scripts_help_names_it_as_it_was_invoked():
    """(`python evaluator.py --help` still says that: test_front_door's help tests.)"""
    done = front_door("/venv/bin/claude-tool-eval", "csv", "--help")
    assert done.returncode == 0, done.stderr
    assert "python evaluator.py" not in done.stdout
    assert done.stdout.startswith("Usage: claude-tool-eval csv [OPTIONS] FILE.csv")
    assert "\n  claude-tool-eval --csv examples/test_queries.csv" in done.stdout
    top = front_door("/venv/bin/claude-tool-eval", "--help").stdout
    assert (
        top.startswith("Usage: claude-tool-eval [MODE | VERB]") and "python evaluator.py" not in top
    )
