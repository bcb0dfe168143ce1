"""End to end: the real Claude Code CLI against the scripted Anthropic-compatible server.

These run `python evaluator.py --skill ... --trigger ...` as a user would; the evaluator runs the
real `claude` binary, which talks to the scripted server. They skip only where the binary is
absent, and never in CI (CI installs it with `npm install`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, Ran, needs_claude, spawn
from fake_anthropic import ScriptedAnthropic, last_turn, reply, text, tool_use, user_query

from claude_tool_evaluator.files import journal_path

pytestmark = needs_claude

SKILL_SOURCE = ROOT / "examples" / "skills" / "warehouse-sql" / "SKILL.md"
HANG_MARKER = "HANG-MARKER-7f3c"


def listed_skills(body: dict) -> str:
    """The skill listing: in the first user message for haiku-4-5, in a `system`-role message for
    newer models (seen with 2.1.197); searched anywhere in the request."""
    return json.dumps(body.get("messages", []))


def responder(body: dict):
    """A tiny model: it hangs on the hang marker, answers after a tool result, uses the skill for
    SQL questions when the skill is listed with the project's description, else just answers."""
    content = last_turn(body).get("content")
    query = user_query(body)
    if HANG_MARKER in query:
        return {"hang": 30}
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return reply(text("Here is the query: use identifies, anonymous_id and COALESCE."))
    if "sql" in query.lower() and "warehouse-sql: Writes, explains and fixes SQL" in listed_skills(
        body
    ):
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    return reply(text("Why did the chicken cross the road?"))


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under root with its mtime and size; TMPDIR's own mtime moves because
    the evaluator makes (and removes) its run folders there, so only its contents count."""
    out = {}
    for path in root.rglob("*"):
        if path == root / "tmp":
            continue
        stat = path.lstat()
        out[str(path)] = (stat.st_mtime_ns, stat.st_size)
    return out


@pytest.fixture
def sandbox(tmp_path: Path):
    """A user's machine in miniature: a HOME with its own (decoy) skill of the same name, a
    working directory, a TMPDIR."""
    home, work, tmp = tmp_path / "home", tmp_path / "work", tmp_path / "tmp"
    decoy = home / ".claude" / "skills" / "warehouse-sql"
    decoy.mkdir(parents=True)
    (decoy / "SKILL.md").write_text(
        "---\nname: warehouse-sql\ndescription: A DECOY that must never be seen.\n---\nDecoy.\n"
    )
    (home / ".claude" / "settings.json").write_text("{}\n")
    work.mkdir()
    tmp.mkdir()
    (work / "notes.txt").write_text("the user's own file\n")
    return tmp_path


def run_evaluator(sandbox: Path, api: ScriptedAnthropic, *args: str, timeout: float = 90) -> Ran:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "PYTHONPATH": str(ROOT),
    }
    return spawn("--claude-bin", CLAUDE, *args, cwd=sandbox / "work", env=env, timeout=timeout)


def write_trigger(sandbox: Path, positives: list[str], negatives: list[str]) -> Path:
    path = sandbox / "trigger.md"
    path.write_text(
        "---\nname: warehouse-sql-trigger\ntype: trigger\n---\n\n# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in positives)
        + "\n# Negative Triggers\n\n"
        + "".join(f"- {q}\n" for q in negatives)
    )
    return path


def test_positive_activates_negative_does_not_and_nothing_outside_changes(sandbox: Path):
    with ScriptedAnthropic(responder=responder) as api:
        trigger = write_trigger(
            sandbox, ["Write a SQL query for weekly revenue per country"], ["Tell me a joke"]
        )
        before = {p: v for p, v in snapshot(sandbox).items() if "/results" not in p}
        out = sandbox / "results.json"
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            str(SKILL_SOURCE.parent),
            "--trigger",
            str(trigger),
            "--runs",
            "2",
            "-o",
            str(out),
            "--report",
            str(sandbox / "results.md"),
        )
        after = {p: v for p, v in snapshot(sandbox).items() if "/results" not in p}
    assert done.exit_code == 0, done.stderr + done.stdout
    document = json.loads(out.read_text())
    [score] = document["trigger_scores"]
    assert (
        score["triggerRate"] == 100
        and score["falsePositiveRate"] == 0
        and score["triggerScore"] == 100
    )
    by_query = {q["query"]: q for q in score["queryResults"]}
    positive = by_query["Write a SQL query for weekly revenue per country"]
    assert (
        positive["actual"] == "activated"
        and positive["activations"] == 2
        and positive["toolCount"] == 1
    )
    assert (
        by_query["Tell me a joke"]["actual"] == "ignored"
        and by_query["Tell me a joke"]["toolCount"] == 0
    )
    runs = document["results"]
    assert len(runs) == 4 and all(r["error"] is None and r["exit_code"] == 0 for r in runs)
    assert all(r["skills_loaded"] and "warehouse-sql" in r["skills_loaded"] for r in runs)
    assert {r["first_tool"] for r in runs} == {"Skill", None}
    assert document["isolation"]["ok"] is True
    # The user's HOME, working directory and TMPDIR are exactly as they were: runs wrote only
    # inside their temporary projects, which are gone again.
    assert after == before
    # The decoy skill in the user's HOME never reached the model; the key never reached a report.
    bodies = json.dumps([r["body"] for r in api.requests])
    assert "DECOY" not in bodies
    assert all(r["headers"].get("x-api-key") == TEST_API_KEY for r in api.requests)
    assert TEST_API_KEY not in out.read_text() and TEST_API_KEY not in done.stdout + done.stderr
    assert "## Trigger Analysis" in (sandbox / "results.md").read_text()
    assert "✅ activated" in (sandbox / "results.md").read_text()


def test_hung_query_times_out_as_an_error_and_leaves_no_process(sandbox: Path):
    with ScriptedAnthropic(responder=responder) as api:
        # its own marker: another test's hung query may be alive while this one looks
        marker = f"{HANG_MARKER}-alone"
        trigger = write_trigger(sandbox, [f"SQL please {marker}"], ["Tell me a joke"])
        out = sandbox / "results.json"
        start = time.monotonic()
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            str(SKILL_SOURCE),
            "--trigger",
            str(trigger),
            "--runs",
            "1",
            "--trigger-timeout",
            "12",  # the joke's run must finish in time on a loaded machine too
            "-o",
            str(out),
        )
        elapsed = time.monotonic() - start
    assert done.exit_code == 1, done.stderr + done.stdout
    assert elapsed < 40
    [score] = json.loads(out.read_text())["trigger_scores"]
    hung = next(q for q in score["queryResults"] if HANG_MARKER in q["query"])
    assert hung["actual"] == "error" and hung["erroredRuns"] == 1 and hung["runs"] == 0
    assert score["erroredRuns"] == 1 and score["erroredQueries"] == 1
    assert score["positives"] == 0  # excluded from the rates, not counted as a miss
    [run] = [r for r in json.loads(out.read_text())["results"] if HANG_MARKER in r["query"]]
    assert run["timed_out"] and "timed out after 12s" in run["error"]
    leftovers = subprocess.run(
        ["pgrep", "-f", marker], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


def test_knowledge_test_runs_through_the_cli(sandbox: Path):
    test_file = sandbox / "knowledge.md"
    test_file.write_text(
        "---\nname: stitching\ntype: knowledge\nconcepts: [identifies, anonymous_id, COALESCE]\n"
        "timeout: 60\n---\n\n# Question\n\nHow do I stitch anonymous SQL events to users?\n"
    )
    with ScriptedAnthropic(responder=responder) as api:
        out = sandbox / "results.json"
        done = run_evaluator(
            sandbox, api, "--skill", str(SKILL_SOURCE), "--tests", str(test_file), "-o", str(out)
        )
    assert done.exit_code == 0, done.stderr + done.stdout
    [test] = json.loads(out.read_text())["tests"]
    assert test["passed"] and test["activated_skills"] == ["warehouse-sql"]
    assert test["run_scores"][0]["coverage"] == 1.0


def test_resume_reuses_finished_runs_and_retry_errors_reruns_the_hung_one(sandbox: Path):
    with ScriptedAnthropic(responder=responder) as api:
        trigger = write_trigger(
            sandbox,
            ["Write a SQL query for weekly revenue per country"],
            [f"{HANG_MARKER} tell me a story"],
        )
        out = sandbox / "resume.json"
        args = [
            "--skill",
            str(SKILL_SOURCE.parent),
            "--trigger",
            str(trigger),
            "--runs",
            "1",
            "--trigger-timeout",
            "8",  # the other run finishes well within it on a loaded machine
            "-o",
            str(out),
        ]
        first = run_evaluator(sandbox, api, *args)
        records = {r["query"]: r for r in json.loads(out.read_text())["results"]}
        assert records[f"{HANG_MARKER} tell me a story"]["timed_out"] is True, first.stdout
        assert not journal_path(out).exists()
        calls = len(api.message_requests)
        again = run_evaluator(sandbox, api, *args, "--resume")
        assert again.exit_code == first.exit_code and "resuming: 2 run(s) kept" in again.stdout
        assert len(api.message_requests) == calls, "a finished run is not run again"
        retried = run_evaluator(sandbox, api, *args, "--retry-errors")
        assert "resuming: 1 run(s) kept" in retried.stdout
        hung_again = [b for b in api.message_requests[calls:] if HANG_MARKER in user_query(b)]
        assert hung_again and all(
            HANG_MARKER in user_query(b) for b in api.message_requests[calls:]
        )
