"""Signals, orphans and the -o lock (issue 11, items 3, 14 and 18), with the evaluator as a real
process: the scripted API hangs on one case (or the real Claude Code CLI on one query) so the run
is mid-way, and then

- SIGTERM and SIGHUP stop it the way Ctrl-C does: the partial results are in -o (valid against
  `python evaluator.py --schema`, `metadata.interrupted` true), --report and --junit are written,
  the exit code is 143 / 129, no server or `claude` process is left, no skill-eval-* folder;
- `kill -9` leaves no child process behind either, even one that would not stop by itself;
- a second run into the same -o, or a --resume of it, while the first is alive is one line, exit 2;
- a run that stops before recording anything (a server that does not start, a 401) leaves no
  journal that would refuse the next run.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, first_prompt, needs_claude
from fake_anthropic import (
    ScriptedAnthropic,
    error,
    has_tool_result,
    reply,
    text,
    tool_use,
    user_query,
)

from claude_tool_evaluator.files import journal_path, lock_path

MISC = f"{sys.executable} {ROOT / 'tests' / 'servers' / 'misc_server.py'}"
SKILL = ROOT / "examples" / "skills" / "warehouse-sql"
EXIT_CODES = {signal.SIGTERM: 143, signal.SIGHUP: 129}

# A server that stops listening while its tool runs: it never sees its stdin close, so only a
# kill stops it (or the kernel, when the evaluator that started it dies).
BLOCKING_SERVER = """
import sys, time
from mcp.server.mcpserver import MCPServer
mcp = MCPServer("blocking", log_level="WARNING")

@mcp.tool()
async def block() -> str:
    \"\"\"Blocks the whole server for two minutes.\"\"\"
    open(sys.argv[2], "w").close()
    time.sleep(120)
    return "done"

@mcp.tool()
def echo(text: str) -> str:
    \"\"\"Echoes the text.\"\"\"
    return text

mcp.run()
"""


# ----------------------------------------------------------------------------- helpers
@functools.lru_cache(maxsize=1)
def schema_validator() -> jsonschema.Draft202012Validator:
    done = subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), "--schema"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return jsonschema.Draft202012Validator(json.loads(done.stdout))


def load_results(path: Path) -> dict:
    document = json.loads(path.read_text(encoding="utf-8"))
    errors = list(schema_validator().iter_errors(document))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    return document


def live_processes(marker: str) -> list[str]:
    """Processes whose command line holds the marker (zombies are dead: they do not count)."""
    out = subprocess.run(
        ["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in out.splitlines()[1:]
        if marker in line and "ps -ww" not in line and not line.split()[1].startswith("Z")
    ]


def wait_until(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    process: subprocess.Popen | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(
                f"the evaluator ended before {what}: {process.returncode}, "
                f"{process.stderr.read() if process.stderr else ''}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def no_process_left(marker: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while live_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_processes(marker) == [], "processes outlived the evaluator"


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def suite(path: Path, names: list[str]) -> Path:
    path.write_text(
        "test_name,user_prompt,expected_tools\n" + "".join(f"{n},prompt {n},echo\n" for n in names)
    )
    return path


def echo_model(
    hang_on: str | None = None, hang: Callable[[], bool] = lambda: True
) -> Callable[[dict], dict]:
    """Each case calls echo with its prompt and then answers; the case `hang_on` hangs the API."""

    def respond(body: dict) -> dict:
        if hang_on and first_prompt(body) == f"prompt {hang_on}" and hang():
            return {"hang": 60}
        if len(body["messages"]) > 1:
            return reply(text("done"))
        return reply(tool_use("echo", {"text": first_prompt(body)}))

    return respond


def evaluator_process(
    *args: str, env: dict | None = None, cwd: Path | None = None
) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "evaluator.py"), *args],
        env=env or dict(os.environ),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def asked(api: ScriptedAnthropic, prompt: str) -> bool:
    return any(first_prompt(b) == prompt for b in api.message_requests)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


# ============================================================================= 3. SIGTERM / SIGHUP in a CSV suite
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_mid_csv_suite_writes_every_output_and_leaves_no_process(api, tmp_path, signum):
    api.responder = echo_model(hang_on="c3")
    marker = f"marker-{uuid.uuid4().hex}"
    names = [f"c{i}" for i in range(6)]
    out, report, junit = tmp_path / "out.json", tmp_path / "report.md", tmp_path / "junit.xml"
    process = evaluator_process(
        "--csv",
        str(suite(tmp_path / "s.csv", names)),
        "--server",
        f"{MISC} --{marker}",
        "--concurrency",
        "1",
        "-o",
        str(out),
        "--report",
        str(report),
        "--junit",
        str(junit),
    )
    try:
        wait_until(lambda: asked(api, "prompt c3"), 60, "the hanging case", process)
        assert live_processes(marker), "the MCP server is running"
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        stop(process)
    assert process.returncode == EXIT_CODES[signum], stdout + stderr
    assert "Traceback" not in stdout + stderr and "interrupted" in stdout
    document = load_results(out)
    assert document["metadata"]["interrupted"] is True and document["passed"] is False
    finished = [r["test_name"] for r in document["results"] if r.get("error") != "interrupted"]
    assert finished == ["c0", "c1", "c2"]
    assert "c0" in report.read_text()
    cases = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    assert "c0" in cases
    assert journal_path(out).exists(), "the journal stays for --resume"
    assert not lock_path(out).exists()
    no_process_left(marker)


# ============================================================================= 3. kill -9: no orphan
def test_kill_9_mid_tool_call_leaves_no_server_behind(api, tmp_path):
    """The server is stuck in a tool call and never reads its stdin again: before, it outlived
    the evaluator by two minutes."""
    server = tmp_path / "blocking_server.py"
    server.write_text(BLOCKING_SERVER)
    marker = f"marker-{uuid.uuid4().hex}"
    api.responder = lambda body: (
        reply(text("done")) if len(body["messages"]) > 1 else reply(tool_use("block"))
    )
    started = tmp_path / "tool-started"
    process = evaluator_process(
        "-q",
        "block please",
        "--server",
        f"{sys.executable} {server} {marker} {started}",
        "--tool-timeout",
        "100",
    )
    try:
        wait_until(started.exists, 60, "the tool call", process)
        assert live_processes(marker), "the MCP server is running"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        stop(process)
    no_process_left(marker, timeout=5)


# ============================================================================= 18. one live run per -o
def test_a_second_run_or_resume_into_the_same_output_is_refused_while_the_first_is_alive(
    cli, api, tmp_path
):
    hanging = [True]
    api.responder = echo_model(hang_on="c1", hang=lambda: hanging[0])
    names = ["c0", "c1", "c2"]
    out = tmp_path / "out.json"
    args = [
        "--csv",
        str(suite(tmp_path / "s.csv", names)),
        "--server",
        MISC,
        "--concurrency",
        "1",
        "-o",
        str(out),
    ]
    first = evaluator_process(*args)
    try:
        wait_until(lambda: asked(api, "prompt c1"), 60, "the hanging case", first)
        calls = len(api.message_requests)
        for extra in ([], ["--resume"], ["--retry-errors"]):
            code, stdout, stderr = cli(*args, *extra)
            lines = error_lines(stderr)
            assert code == 2 and len(lines) == 1, stderr
            assert (
                lines[0].startswith("error: ")
                and str(out) in lines[0]
                and "still alive" in lines[0]
            )
            assert f"pid {first.pid}" in lines[0]
        assert len(api.message_requests) == calls, "the refused runs called no model"
        assert first.poll() is None, "the first run goes on"
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    finally:
        stop(first)
    assert first.returncode == 143
    assert not lock_path(out).exists()
    hanging[0] = False
    code, stdout, stderr = cli(*args, "--resume")  # the lock went with the run
    assert code == 0, stderr
    assert sorted(r["test_name"] for r in load_results(out)["results"]) == names


def test_the_lock_dies_with_its_run_even_on_kill_9(cli, api, tmp_path):
    hanging = [True]
    api.responder = echo_model(hang_on="c1", hang=lambda: hanging[0])
    out = tmp_path / "out.json"
    args = [
        "--csv",
        str(suite(tmp_path / "s.csv", ["c0", "c1"])),
        "--server",
        MISC,
        "--concurrency",
        "1",
        "-o",
        str(out),
    ]
    first = evaluator_process(*args)
    try:
        wait_until(lambda: asked(api, "prompt c1"), 60, "the hanging case", first)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        stop(first)
    assert lock_path(out).exists()  # left behind, but no longer held
    hanging[0] = False
    code, stdout, stderr = cli(*args, "--resume")
    assert code == 0, stderr
    assert not lock_path(out).exists()


# ============================================================================= 14. nothing recorded, no journal
def test_a_server_that_does_not_start_leaves_no_journal_to_refuse_the_next_run(cli, api, tmp_path):
    api.responder = echo_model()
    out = tmp_path / "out.json"
    csv_file = suite(tmp_path / "s.csv", ["a"])
    code, stdout, stderr = cli(
        "--csv", str(csv_file), "--server", "no-such-mcp-server-binary-4d2f", "-o", str(out)
    )
    assert code == 2 and "command not found" in stderr, stderr
    assert not journal_path(out).exists() and not lock_path(out).exists()
    code, stdout, stderr = cli("--csv", str(csv_file), "--server", MISC, "-o", str(out))
    assert code == 0, stderr


def test_a_bad_key_leaves_no_journal_to_refuse_the_next_run(cli, api, tmp_path):
    bad_key = [True]
    api.responder = lambda body: (
        error(401, "authentication_error", "invalid x-api-key")
        if bad_key[0]
        else echo_model()(body)
    )
    out = tmp_path / "out.json"
    args = ["--csv", str(suite(tmp_path / "s.csv", ["a", "b"])), "--server", MISC, "-o", str(out)]
    code, stdout, stderr = cli(*args)
    assert code == 2, stderr
    assert not journal_path(out).exists()
    bad_key[0] = False
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr


def test_a_resume_that_stops_before_recording_keeps_the_earlier_journal(cli, api, tmp_path):
    """The journal of an interrupted run is what --resume continues from: a resume that fails
    before recording anything must leave it as it was."""
    out = tmp_path / "out.json"
    journal = journal_path(out)
    csv_file = suite(tmp_path / "s.csv", ["a", "b"])
    api.responder = echo_model()
    assert cli("--csv", str(csv_file), "--server", MISC, "-o", str(out))[0] == 0
    earlier = json.loads(out.read_text())["results"][0]
    out.unlink()
    journal.write_text(json.dumps(earlier) + "\n")
    before = journal.read_bytes()
    code, stdout, stderr = cli(
        "--csv",
        str(csv_file),
        "--server",
        "no-such-mcp-server-binary-4d2f",
        "-o",
        str(out),
        "--resume",
    )
    assert code == 2, stderr
    assert journal.read_bytes() == before


# ============================================================================= 3. skills: the real Claude Code CLI
HANG_MARKER = "HANG-MARKER-signals-9b4e"
SQL_QUERY = "Write a SQL query for weekly completed-order revenue per country from the orders and users tables"


def skill_model(body: dict) -> dict:
    query = user_query(body)
    if HANG_MARKER in query:
        return {"hang": 60}
    content = (body.get("messages") or [{}])[-1].get("content")
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return reply(text("Here is the query: use identifies, anonymous_id and COALESCE."))
    if "sql" in query.lower() and "warehouse-sql: Writes, explains and fixes SQL" in json.dumps(
        body.get("messages")
    ):
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    return reply(text("A joke."))


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".claude").mkdir(parents=True)
    (tmp_path / "home" / ".claude" / "settings.json").write_text("{}\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


def skill_run(sandbox: Path, api: ScriptedAnthropic, out: Path) -> subprocess.Popen:
    trigger = sandbox / "trigger.md"
    trigger.write_text(
        "---\nname: warehouse-sql-trigger\ntype: trigger\nskill: warehouse-sql\n---\n\n"
        f'# Positive Triggers\n\n- "{SQL_QUERY}"\n- "{HANG_MARKER} why is this SQL slow?"\n'
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
    }
    return evaluator_process(
        "--claude-bin",
        CLAUDE,
        "--skill",
        str(SKILL),
        "--trigger",
        str(trigger),
        "--runs",
        "1",
        "--concurrency",
        "1",
        "--trigger-timeout",
        "100",
        "-o",
        str(out),
        "--report",
        str(sandbox / "report.md"),
        "--junit",
        str(sandbox / "junit.xml"),
        env=env,
        cwd=sandbox / "work",
    )


def hanging_claude_started(api: ScriptedAnthropic) -> bool:
    return any(HANG_MARKER in user_query(b) for b in api.message_requests)


def run_folders(sandbox: Path) -> list[Path]:
    return list((sandbox / "tmp").glob("skill-eval-*"))


@needs_claude
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_mid_skill_run_writes_every_output_and_leaves_no_claude_and_no_folder(
    sandbox, signum
):
    out = sandbox / "out.json"
    with ScriptedAnthropic(responder=skill_model) as api:
        process = skill_run(sandbox, api, out)
        try:
            wait_until(lambda: hanging_claude_started(api), 90, "the hanging query", process)
            assert live_processes(HANG_MARKER) and run_folders(sandbox)
            process.send_signal(signum)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            stop(process)
    assert process.returncode == EXIT_CODES[signum], stdout + stderr
    assert "Traceback" not in stdout + stderr
    document = load_results(out)
    assert document["metadata"]["interrupted"] is True
    assert [r["query"] for r in document["results"] if r.get("error") != "interrupted"] == [
        SQL_QUERY
    ]
    assert "Trigger" in (sandbox / "report.md").read_text()
    ET.parse(sandbox / "junit.xml")
    no_process_left(HANG_MARKER, timeout=5)
    assert run_folders(sandbox) == []
    assert not lock_path(out).exists()


@needs_claude
def test_kill_9_mid_skill_run_leaves_no_claude_behind(sandbox):
    """Before, `claude -p` was re-parented to PID 1 and went on calling the API."""
    out = sandbox / "out.json"
    with ScriptedAnthropic(responder=skill_model) as api:
        process = skill_run(sandbox, api, out)
        try:
            wait_until(lambda: hanging_claude_started(api), 90, "the hanging query", process)
            assert live_processes(HANG_MARKER)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
        finally:
            stop(process)
        no_process_left(HANG_MARKER, timeout=5)


# ============================================================================= issue 38, item 8: what an interrupted run spent
COST_MARKER = "COST-MARKER-signals-5c1d"
ANSWERED_USAGE = {
    "input_tokens": 120_000,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 1,
}


def answers_then_hangs(body: dict) -> dict:
    """The first call of the marked query is answered (a Skill call, with a known usage); the
    next one, after the tool's result, hangs."""
    query = user_query(body)
    if COST_MARKER not in query:
        return skill_model(body)
    if has_tool_result(body):
        return {"hang": 60}
    return reply(tool_use("Skill", {"skill": "warehouse-sql"}), usage=ANSWERED_USAGE)


@needs_claude
def test_an_interrupted_claude_code_run_counts_the_calls_that_were_answered(sandbox):
    """A `claude -p` run cut by SIGTERM reported $0.0000 (no result event, so no cost) although
    its first call had been answered: the stream-json usage it gave before the signal counts."""
    from claude_tool_evaluator.run_types import Usage, cost_usd

    trigger = sandbox / "trigger.md"
    trigger.write_text(
        "---\nname: warehouse-sql-trigger\ntype: trigger\nskill: warehouse-sql\n---\n\n"
        f'# Positive Triggers\n\n- "{COST_MARKER} a weekly revenue query in SQL"\n'
    )
    out = sandbox / "out.json"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": "",
    }
    with ScriptedAnthropic(responder=answers_then_hangs) as api:
        env["ANTHROPIC_BASE_URL"] = api.url
        process = evaluator_process(
            "--claude-bin",
            CLAUDE,
            "--skill",
            str(SKILL),
            "--trigger",
            str(trigger),
            "--runs",
            "1",
            "--trigger-timeout",
            "100",
            "-o",
            str(out),
            env=env,
            cwd=sandbox / "work",
        )
        try:
            wait_until(
                lambda: sum(COST_MARKER in user_query(b) for b in api.message_requests) >= 2,
                90,
                "the hanging second call",
                process,
            )
            time.sleep(0.5)  # the answered call's events reach the evaluator's pipe
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            stop(process)
        model = next(b["model"] for b in api.message_requests if COST_MARKER in user_query(b))
    assert process.returncode == 143, stdout + stderr
    document = load_results(out)
    [record] = document["results"]
    assert record["error"] == "interrupted" and record["activated_skills"] == ["warehouse-sql"]
    expected = cost_usd(Usage.from_api(ANSWERED_USAGE), model)
    assert record["total_cost_usd"] == pytest.approx(expected) and expected > 0.1
    assert record["usage"]["input_tokens"] == ANSWERED_USAGE["input_tokens"]
    assert document["summary"]["cost_usd"] == pytest.approx(expected)
    [totals] = [line for line in stdout.splitlines() if line.startswith("tokens ")]
    assert f"cost ${expected:.4f}" in totals, stdout
