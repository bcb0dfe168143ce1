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
