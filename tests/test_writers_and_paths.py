"""Issue 37, "Trust nothing the run reads back": the writers and the paths.

- A pull-request comment mentions nobody: `@someone` and `@org/team` in a case name, a reason, a
  suite's file name (anything the tool did not write) reach the comment as code, never as a
  mention GitHub would notify.

Every test runs `python evaluator.py` against the scripted Anthropic server and the example MCP
server, as tests/test_github_action.py does.
"""

from __future__ import annotations

import re

from conftest import EXAMPLE_SERVER
from fake_anthropic import reply, text
from test_github_action import CONNECTIONS, TABLES, Step, calls, evaluate, has_tool_result, write

MENTION = re.compile(r"@[A-Za-z0-9]")  # what GitHub would read as a mention outside code


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
