"""The smaller faults a newcomer met (issue 45, item 7), each as the newcomer met it: what the
evaluator says when given a folder for a report, a suite its servers refuse, a CSV without its
columns, a tag it lacks, a project file naming a missing file, a Ctrl-C before any run, and the
console script's help. Each runs in this process (or as a small process that loads nothing heavy)."""

from __future__ import annotations

import re
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
