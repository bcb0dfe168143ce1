"""Issue 37, "Trust nothing the run reads back": the writers and the paths.

- A pull-request comment mentions nobody: `@someone` and `@org/team` in a case name, a reason, a
  suite's file name (anything the tool did not write) reach the comment as code, never as a
  mention GitHub would notify.
- In a GitHub Actions step, no name or path starts a workflow command: an output path holding a
  line break and `::warning::` (given with -o, or by a project file's `output:`), a path long
  enough to be wrapped right before its `::`, a suite or case name holding `::` or the runner's
  legacy `##[command]` form (read anywhere on a line) are printed escaped on stdout and stderr,
  whatever the line they are on (`wrote PATH`, a suite's rule, an error line).

Every test runs `python evaluator.py` against the scripted Anthropic server and the example MCP
server, as tests/test_github_action.py does.
"""

from __future__ import annotations

import json
import re

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
    assert done.returncode == 1, done.stdout + done.stderr
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
    assert done.returncode == 0, done.stdout + done.stderr
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
    assert done.returncode == 0, done.stdout + done.stderr
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
    assert done.returncode == 2
    assert [c for c in workflow_lines(done.stderr) if not c.startswith("::error ")] == []
