"""Issue 37, "Trust nothing the run reads back": the writers and the paths.

- A pull-request comment mentions nobody: `@someone` and `@org/team` in a case name, a reason, a
  suite's file name (anything the tool did not write) reach the comment as code, never as a
  mention GitHub would notify.
- In a GitHub Actions step, no name or path starts a workflow command: an output path holding a
  line break and `::warning::` (given with -o, or by a project file's `output:`), a path long
  enough to be wrapped right before its `::`, a suite or case name holding `::` or the runner's
  legacy `##[command]` form (read anywhere on a line) are printed escaped on stdout and stderr,
  whatever the line they are on (`wrote PATH`, a suite's rule, an error line).
- A project file writes inside its folder: `output:`, `report:` and every other key that names a
  file or folder a run writes, pointing outside it (`../x`, an absolute path, a folder that is a
  link out), is one line naming the project file, the key's line and the path, exit 2, before any
  suite runs or a folder is made; `--allow-outside-outputs` lets it (and is refused without a
  project file). Inside the folder, a project's output that is one of its inputs (the project
  file itself, another suite's suite file) is refused like `-o` on an input.

Every test runs `python evaluator.py` against the scripted Anthropic server and the example MCP
server, as tests/test_github_action.py does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER
from fake_anthropic import reply, text
from test_github_action import CONNECTIONS, TABLES, Step, calls, evaluate, has_tool_result, write

MENTION = re.compile(r"@[A-Za-z0-9]")  # what GitHub would read as a mention outside code


def workflow_lines(output: str) -> list[str]:
    """The lines the runner reads as workflow commands: `::` after leading blanks (it trims
    them), or the legacy `##[command]` anywhere on the line."""
    return [line for line in output.splitlines() if line.lstrip().startswith("::") or "##[" in line]


def outside_code_spans(markdown: str) -> str:
    return re.sub(r"`[^`\n]*`", "", markdown)


# ============================================================================ 1. PR comments mention nobody
MENTION_SUITE = (
    "test_name,user_prompt,expected_tools,expected_answer,answer_match\n"
    f"ask @octocat!,{TABLES},list_warehouse_tables,@octo-org/core-team,contains\n"  # line 2
    f"cc @octo-org/core-team?,{CONNECTIONS},get_existing_connections,,\n"  # line 3
)


def test_a_pr_comment_mentions_nobody(api, tmp_path):
    step = Step(tmp_path)
    write(tmp_path / "evals" / "@octo-org" / "team suite.csv", MENTION_SUITE)

    def answer(body: dict) -> dict:
        if has_tool_result(body):
            return reply(text("Ask @octocat or @octo-org/security about it."))
        return calls({TABLES: "list_warehouse_tables"})(body)

    api.responder = answer
    done = evaluate(
        api,
        tmp_path,
        *("--csv", "evals/@octo-org/team suite.csv", "--server-module", str(EXAMPLE_SERVER)),
        *("--pr-comment", "out/comment.md", "--report", "out/report.md"),
        step=step,
    )
    assert done.exit_code == 1, done.stdout + done.stderr
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "@octocat" in comment and "@octo-org/core-team" in comment  # shown, as code
    assert MENTION.findall(outside_code_spans(comment)) == [], comment
    for markdown in (step.summary.read_text(), (tmp_path / "out" / "report.md").read_text()):
        assert MENTION.findall(outside_code_spans(markdown)) == [], markdown


# ============================================================================ 2. no name or path starts a workflow command
LONG = "a" * 150  # a LOG_WIDTH (160) line breaks right before what follows the space


@pytest.mark.parametrize(
    "output",
    [
        "out/r\n::warning::newline.json",
        f"out/{LONG} ::warning::wrapped.json",
        "out/##[warning]legacy.json",
    ],
)
def test_an_output_path_starts_no_workflow_command(api, tmp_path, output):
    step = Step(tmp_path)
    write(tmp_path / "suite.csv", f"test_name,user_prompt,expected_tools\nt,{TABLES},\n")
    api.responder = lambda body: reply(text("no tools needed"))
    done = evaluate(
        api,
        tmp_path,
        *("--csv", "suite.csv", "--server-module", str(EXAMPLE_SERVER), "-o", output),
        step=step,
    )
    assert done.exit_code == 0, done.stdout + done.stderr
    assert (tmp_path / output).is_file()
    assert workflow_lines(done.stdout) == [] and workflow_lines(done.stderr) == []
    assert any(line.startswith("wrote out/") for line in done.stdout.splitlines())


HOSTILE_NAMES = ("x\n::warning::suite", "::error::starts", "y ##[warning]legacy")


def test_a_projects_names_and_outputs_start_no_workflow_command(api, tmp_path):
    step = Step(tmp_path)
    write(
        tmp_path / "suite.csv", f'test_name,user_prompt,expected_tools\n"::warning::t",{TABLES},\n'
    )
    suites = "".join(  # JSON strings are YAML's double-quoted scalars
        f"  - name: {json.dumps(name)}\n    csv: suite.csv\n"
        f"    output: {json.dumps(f'out/{i}-{name}')}\n"
        for i, name in enumerate(HOSTILE_NAMES)
    )
    write(
        tmp_path / "evaluator.yaml",
        f"defaults:\n  server_module: {EXAMPLE_SERVER}\nsuites:\n{suites}",
    )
    api.responder = lambda body: reply(text("no tools needed"))
    done = evaluate(api, tmp_path, "--config", "evaluator.yaml", step=step)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert workflow_lines(done.stdout) == [] and workflow_lines(done.stderr) == []
    assert sum(line.startswith("wrote out/") for line in done.stdout.splitlines()) == 3
    assert "[warning]legacy (csv)" in done.stdout  # a suite's name is data, never markup


def test_an_error_line_naming_a_path_starts_no_workflow_command(api, tmp_path):
    step = Step(tmp_path)
    done = evaluate(
        api,
        tmp_path,
        *("--csv", "missing ##[warning]suite.csv", "--server-module", str(EXAMPLE_SERVER)),
        step=step,
    )
    assert done.exit_code == 2
    assert [c for c in workflow_lines(done.stderr) if not c.startswith("::error ")] == []


# ============================================================================ 3. a project file writes inside its folder
def project_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    write(folder / "suite.csv", f"test_name,user_prompt,expected_tools\nt,{TABLES},\n")
    return folder


def project_file(folder: Path, suite_keys: str, defaults: str = "") -> Path:
    return write(
        folder / "evaluator.yaml",
        f"defaults:\n  server_module: {EXAMPLE_SERVER}\n{defaults}"  # lines 1-2 (+ defaults)
        "suites:\n"
        "  - name: tools\n"
        "    csv: suite.csv\n"
        f"{suite_keys}",
    )


WRITTEN_KEYS = (
    "output",
    "report",
    "junit",
    "csv_out",
    "html",
    "benchmark_json",
    "pr_comment",
    "record",
    "artifacts",
    "distractors_file",
    "pin",
    "cache",
)


@pytest.mark.parametrize("key", WRITTEN_KEYS)
def test_a_project_file_cannot_write_outside_its_folder(api, tmp_path, key):
    folder = project_folder(tmp_path)
    victim = write(tmp_path / "victim.sh", "#!/bin/sh\necho precious\n")
    path = project_file(folder, f"    {key}: ../made/../victim.sh\n")
    done = evaluate(api, folder, "--config", "evaluator.yaml")
    assert done.exit_code == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: {path.name}:6: {key}: ../made/../victim.sh is outside the project's folder "
        f"{folder} (give a path inside it, or add --allow-outside-outputs to let this "
        "project file write there)"
    ]
    assert victim.read_text() == "#!/bin/sh\necho precious\n" and not (tmp_path / "made").exists()
    assert api.requests == []


def test_a_project_file_named_from_another_folder_writes_inside_its_own(api, tmp_path):
    # `python evaluator.py --config examples/evaluator.yaml`: the file's path is relative to where
    # the command was typed, its outputs to the file's folder
    folder = project_folder(tmp_path)
    project_file(folder, "    output: results/tools.json\n")
    api.responder = lambda body: reply(text("no tools needed"))
    done = evaluate(api, tmp_path, "--config", f"{folder.name}/evaluator.yaml")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert (folder / "results" / "tools.json").is_file()


def test_absolute_paths_defaults_and_linked_folders_are_outside_too(api, tmp_path):
    folder = project_folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    victim = write(outside / "victim.md", "precious")
    for suite_keys, defaults, line, key, shown in (
        (f"    report: {victim}\n", "", 6, "report", str(victim)),
        ("", "  junit: ../junit.xml\n", 3, "junit", "../junit.xml"),
        (
            "    output: results/ok.json\n    report: linked/victim.md\n",
            "",
            7,
            "report",
            "linked/victim.md",
        ),
    ):
        path = project_file(folder, suite_keys, defaults)
        done = evaluate(api, folder, "--config", "evaluator.yaml")
        assert done.exit_code == 2, done.stdout + done.stderr
        [said] = done.stderr.splitlines()
        assert said.startswith(f"error: {path.name}:{line}: {key}: {shown} is outside"), said
    assert victim.read_text() == "precious" and not (folder / "results").exists()
    assert api.requests == []


def test_allow_outside_outputs_lets_a_project_write_there(api, tmp_path):
    folder = project_folder(tmp_path)
    project_file(folder, "    output: ../shared/tools.json\n")
    (tmp_path / "shared").mkdir()
    api.responder = lambda body: reply(text("no tools needed"))
    done = evaluate(api, folder, "--config", "evaluator.yaml", "--allow-outside-outputs")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert (tmp_path / "shared" / "tools.json").is_file()
    # the command line's own outputs were never the file's to limit
    done = evaluate(api, folder, "--config", "evaluator.yaml", "-o", "../shared/again.json")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert (tmp_path / "shared" / "again.json").is_file()


def test_allow_outside_outputs_without_a_project_file_is_refused(api, tmp_path):
    write(tmp_path / "suite.csv", f"test_name,user_prompt,expected_tools\nt,{TABLES},\n")
    done = evaluate(
        api,
        tmp_path,
        *("--csv", "suite.csv", "--server-module", str(EXAMPLE_SERVER)),
        "--allow-outside-outputs",
    )
    assert done.exit_code == 2
    [said] = done.stderr.splitlines()
    assert said.startswith("error: --allow-outside-outputs ") and "project file" in said, said
    assert api.requests == []


def test_a_project_output_never_overwrites_its_inputs(api, tmp_path):
    folder = project_folder(tmp_path)
    write(folder / "other.csv", f"test_name,user_prompt,expected_tools\nu,{CONNECTIONS},\n")
    for suite_keys, says in (
        ("    report: evaluator.yaml\n", "report evaluator.yaml is the input"),
        (
            "  - name: other\n    csv: other.csv\n    csv_out: suite.csv\n",
            "--csv-out suite.csv is the input",
        ),
    ):
        path = project_file(folder, suite_keys)
        before = {p: p.read_text() for p in (path, folder / "suite.csv")}
        done = evaluate(api, folder, "--config", "evaluator.yaml")
        assert done.exit_code == 2, done.stdout + done.stderr
        [said] = done.stderr.splitlines()
        assert says in said and "destroy it" in said, said
        assert {p: p.read_text() for p in before} == before
    assert api.requests == []
