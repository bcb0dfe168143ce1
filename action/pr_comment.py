"""The action's pull-request comment: posted, or the one this action posted before updated.

`python pr_comment.py BODY.md`, run by action.yml's comment step, with `gh` on PATH (GH_TOKEN is
the token that posts). The comment this action posted before is the one whose author is the
token's own identity (GraphQL's `viewer`: `/user` refuses the workflow's GITHUB_TOKEN, whose
comments are github-actions[bot]'s) AND whose first line is the marker: a comment anyone else
wrote, marker or not, is never edited (a new one is posted). A body over GitHub's limit is cut at
a line with a note that links the workflow run, whose artifact holds the whole comment, and names
the sections left out. It runs after the evaluator, in the Python the evaluator is installed in.

Reads MARKER, PULL_REQUEST, ARTIFACT and the runner's GITHUB_REPOSITORY, GITHUB_SERVER_URL and
GITHUB_RUN_ID; says what went wrong as a workflow `::warning`, never failing the step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from claude_tool_evaluator.sinks import workflow_command

# GitHub refuses a comment body over 65,536 characters ("Body is too long (maximum is 65536
# characters)"). Measured here in UTF-8 bytes, which are never fewer than the characters, the
# code points or the UTF-16 units, whichever GitHub counts.
GITHUB_COMMENT_LIMIT = 65_536
# What a trimmed body keeps free for the note: its words, the link and the left-out headings.
NOTE_ROOM = 8_192
NOTE_HEADINGS = 8  # left-out sections named in the note, each cut to HEADING_CHARS
HEADING_CHARS = 120
# Whose comments the workflow's GITHUB_TOKEN writes, when the token cannot say who it is.
GITHUB_TOKEN_LOGIN = "github-actions[bot]"
FENCE = "```"


def size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def warning(message: str) -> None:
    """A workflow `::warning` (its data escaped as GitHub documents: sinks.workflow_command)."""
    print(workflow_command("warning", message, title="comment"), flush=True)


def fit(text: str, limit: int, note: str) -> str:
    """`text` as it is when it fits in `limit` bytes; else its first lines that fit (a code block
    left open closed), then `note` and a list of the section headings (`#` lines) cut away."""
    if size(text) <= limit:
        return text
    kept: list[str] = []
    used = 0
    lines = text.split("\n")
    for line in lines:
        if used + size(line) + 1 > limit - NOTE_ROOM:
            break
        kept.append(line)
        used += size(line) + 1
    if sum(line.lstrip().startswith(FENCE) for line in kept) % 2:
        kept.append(FENCE)
    left_out = [line.strip() for line in lines[len(kept) :] if line.startswith("#")]
    named = [
        f"- {heading.lstrip('#').strip()[:HEADING_CHARS]}" for heading in left_out[:NOTE_HEADINGS]
    ]
    if len(left_out) > NOTE_HEADINGS:
        named.append(f"- …and {len(left_out) - NOTE_HEADINGS} more")
    parts = ["\n".join(kept).rstrip(), "---", note]
    if named:
        parts.append("Left out:\n\n" + "\n".join(named))
    fitted = "\n\n".join(parts) + "\n"
    if size(fitted) > limit:  # a note longer than its room (a long artifact name): cut bytes
        fitted = fitted.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")
    return fitted


def gh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["gh", *args], capture_output=True, text=True, encoding="utf-8")


def refusal(done: subprocess.CompletedProcess) -> str:
    """What gh said when a call failed: its last line (e.g. `... (HTTP 403)`)."""
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"gh exited {done.returncode}"


def json_values(text: str) -> list:
    """The JSON values in `text` one after another: `gh api --paginate` prints each page's
    array in turn."""
    decoder, at = json.JSONDecoder(), 0
    values: list = []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return values
        value, at = decoder.raw_decode(text, at)
        values.append(value)


def viewer() -> str:
    """The login of the token that posts (GraphQL's viewer answers GITHUB_TOKEN too)."""
    done = gh("api", "graphql", "-f", "query={ viewer { login } }")
    if done.returncode == 0:
        try:
            login = json.loads(done.stdout)["data"]["viewer"]["login"]
            if isinstance(login, str) and login:
                return login
        except (ValueError, KeyError, TypeError):
            pass
    return GITHUB_TOKEN_LOGIN


def own_comment(pages: list, login: str, marker: str) -> int | None:
    """The id of the first comment `login` wrote whose first line is the marker."""
    for page in pages:
        for comment in page if isinstance(page, list) else [page]:
            if not isinstance(comment, dict):
                continue
            author = (comment.get("user") or {}).get("login") or ""
            body = comment.get("body") or ""
            first = body.splitlines()[0].strip() if body else ""
            if author.casefold() == login.casefold() and first == marker:
                return comment.get("id")
    return None


def main(body_file: str) -> int:
    env = os.environ
    marker, repository = env["MARKER"], env["GITHUB_REPOSITORY"]
    run_url = f"{env['GITHUB_SERVER_URL']}/{repository}/actions/runs/{env['GITHUB_RUN_ID']}"
    body = Path(body_file).read_text(encoding="utf-8")
    whole = f"{marker}\n\n{body}"
    note = (
        f"**This comment is cut** to fit GitHub's limit of {GITHUB_COMMENT_LIMIT:,} characters "
        f"(the whole of it is {len(whole):,}): the artifact `{env['ARTIFACT']}` of "
        f"[the workflow run]({run_url}) holds all of it ({Path(body_file).name}), with the "
        "reports."
    )
    posted = Path(f"{body_file}.posted")
    posted.write_text(fit(whole, GITHUB_COMMENT_LIMIT, note), encoding="utf-8")
    comments = f"repos/{repository}/issues/{env['PULL_REQUEST']}/comments"

    login = viewer()
    listed = gh("api", f"{comments}?per_page=100", "--paginate")
    pages: list = []
    if listed.returncode != 0:
        warning(f"the comments could not be listed ({refusal(listed)}): posting a new one")
    else:
        try:
            pages = json_values(listed.stdout)
        except ValueError as exc:
            warning(f"the comments' listing is not JSON ({exc}): posting a new one")
    found = own_comment(pages, login, marker)
    if found is not None:
        done = gh(
            "api", "--method", "PATCH", f"repos/{repository}/issues/comments/{found}",
            "-F", f"body=@{posted}",
        )  # fmt: skip
        if done.returncode == 0:
            return 0
        warning(f"the comment {found} could not be updated ({refusal(done)}): posting a new one")
    done = gh("api", "--method", "POST", comments, "-F", f"body=@{posted}")
    if done.returncode != 0:
        warning(
            f"the comment could not be posted ({refusal(done)}): the workflow needs "
            "`pull-requests: write`, which a pull request from a fork does not get"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
