"""The action's evaluate step, when the evaluator exits 2 (bad input or usage, a server or an API
it cannot use): the pull-request comment says the run stopped and quotes its `error:` lines,
redacted and escaped as every comment is, so the pull request shows what to fix without
opening the log. The upload and the comment steps then run as after any run; the step fails.

    python action/stopped.py STDERR COMMENT

STDERR is what the evaluator printed there; the comment is written to COMMENT, appended to the
job's summary, and the step's outputs name it (`pr_comment`, `stopped`), with `passed=false`
and the pull request's number (an evaluator that stopped early set neither)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import test_constants as C
from claude_tool_evaluator.redaction import Redactor
from claude_tool_evaluator.sinks import markdown_cell
from claude_tool_evaluator.writers.github import (
    append_step_summary,
    github_pull_request,
    output_entry,
    workflow_run_url,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# the evaluator's hint for a benchmark package, which in the action is an input
BENCHMARKS_HINT = '.[benchmarks]"'


def stopped_comment(printed: list[str]) -> str:
    """The comment for a run whose standard error was `printed` (its lines)."""
    errors = [
        line for line in (ANSI.sub("", p).strip() for p in printed) if line.startswith("error:")
    ]
    shown = errors[: C.GITHUB_ANNOTATIONS]
    lines = ["### ❌ The evaluation stopped on bad input (exit 2)", ""]
    if shown:
        lines += ["The evaluator stopped on what these lines say: fix it and push again.", ""]
        lines += [f"- {markdown_cell(e, C.PR_COMMENT_REASON_CHARS * 3)}" for e in shown]
        if len(errors) > len(shown):
            lines += [
                "",
                f"…and {len(errors) - len(shown)} more: the workflow run's log has them all",
            ]
        if any(BENCHMARKS_HINT in e for e in errors):
            lines += [
                "",
                "In this action: give `extras: benchmarks` to install the benchmarks extra.",
            ]
    else:
        lines.append("It printed no error line: the workflow run's log says what happened.")
    pull, run = github_pull_request(), workflow_run_url()
    footer = [f"commit {pull.head_sha}"] if pull and pull.head_sha else []
    if run:
        footer.append(f"[workflow run]({run}): its log has the whole output")
    if footer:
        lines += ["", "<sub>" + " · ".join(footer) + "</sub>"]
    return Redactor.for_run().text("\n".join(lines) + "\n")


def main(stderr: str, comment: str) -> int:
    try:
        printed = Path(stderr).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        printed = []
    body = stopped_comment(printed)
    Path(comment).write_text(body, encoding="utf-8")
    append_step_summary(body)
    pull = github_pull_request()
    path = os.path.abspath(comment)
    outputs = {
        "passed": "false",
        "pr_comment": path,
        "stopped": path,
        "pull_request": str(pull.number) if pull else "",
    }
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as handle:
        handle.write("".join(output_entry(name, value) for name, value in outputs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
