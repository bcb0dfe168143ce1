"""Faults reproduced on this machine: the scripted API injecting 429/529/500 bursts, hangs,
resets, garbage and mid-stream overloads; MCP servers that crash, spam stdout or return 50 MB;
runs killed with SIGINT and SIGKILL and then resumed; secrets that must not leak."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY, first_prompt, suite
from fake_anthropic import error, reply, text, tool_use

import test_constants as C
from claude_tool_evaluator.engine import ConversationObserver, text_of
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.redaction import Redactor
from claude_tool_evaluator.run_types import ToolCall
from claude_tool_evaluator.runners.tool_use import RedactingObserver
from claude_tool_evaluator.session import AdaptiveLimiter, AnthropicModel, ModelRequest

MISC = f"{sys.executable} {ROOT / 'tests' / 'servers' / 'misc_server.py'}"


@pytest.fixture(autouse=True)
def no_orphan_servers():
    """After every fault here, no MCP server this process started may still be running."""
    yield
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True, text=True
        ).stdout
        orphans = [
            line
            for line in out.splitlines()[1:]
            if "misc_server.py" in line and line.split()[1] in (str(os.getpid()), "1")
        ]
        if not orphans:
            return
        time.sleep(0.1)
    raise AssertionError(f"MCP server processes left behind: {orphans}")


def echo_then_done(body: dict) -> dict:
    """Each case echoes its own prompt, so a mixed-up result would show."""
    if len(body["messages"]) > 1:
        return reply(text("done"))
    return reply(tool_use("echo", {"text": first_prompt(body)}))


# ----------------------------------------------------------------------------- model API faults
def test_rate_limit_bursts_lose_duplicate_or_misattribute_nothing(cli, api, tmp_path):
    lock, seen = threading.Lock(), {"n": 0}

    def bursty(body: dict) -> dict:
        with lock:
            seen["n"] += 1
            n = seen["n"]
        if n <= 12:
            return (
                error(429, "rate_limit_error", headers={"retry-after": "0"})
                if n % 2
                else error(529, "overloaded_error")
            )
        return echo_then_done(body)

    api.responder = bursty
    names = [f"c{i:02d}" for i in range(12)]
    out = tmp_path / "r.json"
    code, stdout, stderr = cli(
        "--csv",
        str(suite(tmp_path / "s.csv", names, "echo")),
        "--server",
        MISC,
        "--concurrency",
        "6",
        "--max-retries",
        "12",
        "-o",
        str(out),
    )
    assert code == 0, stderr
    results = json.loads(out.read_text())["results"]
    assert [r["test_name"] for r in results] == names
    for r in results:
        assert r["tool_calls"][0]["output"] == f"prompt {r['test_name']}"
        assert r["error"] is None


def test_retries_exhausted_become_a_case_error_and_the_suite_goes_on(cli, api, tmp_path):
    api.responder = lambda body: (
        error(500, "api_error", "server exploded")
        if "bad" in first_prompt(body)
        else echo_then_done(body)
    )
    out = tmp_path / "r.json"
    code, stdout, stderr = cli(
        "--csv",
        str(suite(tmp_path / "s.csv", ["good1", "bad", "good2"], "echo")),
        "--server",
        MISC,
        "--max-retries",
        "1",
        "-o",
        str(out),
    )
    results = {r["test_name"]: r for r in json.loads(out.read_text())["results"]}
    assert code == 1
    assert results["bad"]["ended_by"] == "error"
    assert results["bad"]["error"] == "InternalServerError (500): server exploded"
    assert results["good1"]["error"] is None and results["good2"]["error"] is None
    assert sum("bad" in first_prompt(b) for b in api.message_requests) == 2  # one try, one retry


def test_a_bad_key_stops_the_whole_run_with_one_line(cli, api, tmp_path):
    api.responder = lambda body: error(401, "authentication_error", "invalid x-api-key")
    code, stdout, stderr = cli(
        "--csv",
        str(suite(tmp_path / "s.csv", [f"c{i}" for i in range(6)])),
        "--server-module",
        str(EXAMPLE_SERVER),
        "--concurrency",
        "1",
    )
    assert code == 2
    lines = stderr.strip().splitlines()
    assert (
        lines[-1].startswith("error: the Anthropic API rejected the API key (401)")
        and "Traceback" not in stderr
    )
    assert len(api.message_requests) == 1, "401 is not retried, and no further case starts"


def test_a_spend_limit_429_is_not_retried(cli, api, tmp_path):
    api.responder = lambda body: error(
        429, "rate_limit_error", "You have reached your spend limit for this month"
    )
    code, stdout, stderr = cli("-q", "hi", "--server-module", str(EXAMPLE_SERVER))
    assert code == 2 and "spend or usage limit" in stderr
    assert len(api.message_requests) == 1


def test_a_hung_call_times_out_as_a_case_error(cli, api):
    api.push({"hang": 8})
    start = time.monotonic()
    code, stdout, stderr = cli(
        "-q",
        "hi",
        "--server-module",
        str(EXAMPLE_SERVER),
        "--request-timeout",
        "1",
        "--max-retries",
        "0",
        "--json",
    )
    assert time.monotonic() - start < 7
    result = json.loads(stdout)["results"][0]
    assert result["ended_by"] == "error" and "APITimeoutError" in result["error"]


def test_connection_reset_is_retried(cli, api):
    api.push({"reset": True}, reply(text("after the reset")))
    code, stdout, stderr = cli("-q", "hi", "--server-module", str(EXAMPLE_SERVER), "--json")
    assert json.loads(stdout)["results"][0]["agent_reasoning"] == "after the reset"


def test_garbage_answer_becomes_a_case_error(cli, api):
    api.push({"garbage": True})
    code, stdout, stderr = cli(
        "-q", "hi", "--server-module", str(EXAMPLE_SERVER), "--max-retries", "0", "--json"
    )
    result = json.loads(stdout)["results"][0]
    assert code == 1 and result["ended_by"] == "error" and result["error"]


def test_mid_stream_overload_is_retried_and_partial_text_never_scored(api):
    api.push(
        {"stream_error": "overloaded_error", "partial_text": "PARTIAL "},
        reply(text("complete answer")),
    )
    model = AnthropicModel(base_url=api.url, stream=True, max_retries=2)
    shown: list[str] = []

    async def call():
        try:
            return await model.complete(
                ModelRequest("claude-sonnet-5-5", "s", [{"role": "user", "content": "hi"}], [], 50),
                shown.append,
            )
        finally:
            await model.close()

    result = asyncio.run(call())
    assert text_of(result.content) == "complete answer"
    assert "PARTIAL " in shown  # the user saw it stream, but it is not the answer
    assert len(api.message_requests) == 2


def test_adaptive_limiter_halves_on_429_and_recovers():
    async def scenario():
        limiter = AdaptiveLimiter(8)
        await limiter.rate_limited_for(0)
        await limiter.rate_limited_for(0)
        assert limiter.limit == 2
        for _ in range(AdaptiveLimiter.GROW_AFTER):
            await limiter.succeeded()
        assert limiter.limit == 3
        await limiter.rate_limited_for(0.3)
        start = time.monotonic()
        async with limiter:
            pass
        return time.monotonic() - start

    assert asyncio.run(scenario()) >= 0.25  # retry-after pauses every new call


# ----------------------------------------------------------------------------- MCP server faults
def test_server_crash_mid_suite_is_recorded_and_the_next_case_reconnects(cli, api, tmp_path):
    api.responder = lambda body: (
        reply(text("done"))
        if len(body["messages"]) > 1
        else reply(tool_use("crash"))
        if "crash" in first_prompt(body)
        else echo_then_done(body)
    )
    out = tmp_path / "r.json"
    cli(
        "--csv",
        str(suite(tmp_path / "s.csv", ["before", "crash", "after"])),
        "--server",
        MISC,
        "--concurrency",
        "1",
        "-o",
        str(out),
    )
    results = {r["test_name"]: r for r in json.loads(out.read_text())["results"]}
    assert results["crash"]["ended_by"] == "error"
    assert (
        "died during the call" in results["crash"]["error"]
        and "misc server crashing" in results["crash"]["error"]
    )
    assert (
        results["after"]["error"] is None
        and results["after"]["tool_calls"][0]["output"] == "prompt after"
    )


def test_junk_on_stdout_and_huge_results_stay_bounded(cli, api):
    api.push(
        reply(tool_use("junk_stdout"), tool_use("huge", {"size": 2_000_000})), reply(text("ok"))
    )
    code, stdout, stderr = cli("-q", "hi", "--server", MISC, "--json")
    calls = json.loads(stdout)["results"][0]["tool_calls"]
    assert calls[0]["output"] == "answered after junk"
    assert "truncated 1980000 of 2000000 characters" in calls[1]["output"]
    # 50 MB in-process (over stdio the SDK's line reader takes about a minute for that much)
    api.push(reply(tool_use("huge", {"size": 50_000_000})), reply(text("ok")))
    code, stdout, stderr = cli(
        "-q", "hi", "--server-module", str(ROOT / "tests" / "servers" / "misc_server.py"), "--json"
    )
    output = json.loads(stdout)["results"][0]["tool_calls"][0]["output"]
    assert len(output) < C.DEFAULT_MAX_RESULT_CHARS + 200
    assert "truncated 49980000 of 50000000 characters" in output


# ----------------------------------------------------------------------------- interruption and resume
def live_processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def wait_for_lines(path: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {count} lines")


@pytest.mark.parametrize("kill", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_resumes_with_every_case_exactly_once(cli, api, tmp_path, kill):
    api.delay = 0.3
    api.responder = lambda body: reply(text(f"answer to {first_prompt(body)}"))
    names = [f"case{i}" for i in range(10)]
    marker = f"marker-{uuid.uuid4().hex}"
    csv_file, out = suite(tmp_path / "s.csv", names), tmp_path / "out.json"
    journal = journal_path(out)
    command = [
        sys.executable,
        str(ROOT / "evaluator.py"),
        "--csv",
        str(csv_file),
        "-o",
        str(out),
        "--server",
        f"{MISC} --{marker}",
        "--concurrency",
        "2",
    ]
    process = subprocess.Popen(
        command, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wait_for_lines(journal, 3)
    process.send_signal(kill)
    stderr = process.communicate(timeout=60)[1].decode()
    if kill == signal.SIGINT:
        assert process.returncode == 130, stderr
        partial = json.loads(out.read_text())  # a valid file of what finished
        assert 3 <= len(partial["results"]) < 10 and "Traceback" not in stderr
    else:
        assert process.returncode == -signal.SIGKILL and not out.exists()
    done_before = {
        json.loads(line)["test_name"]
        for line in journal.read_text().splitlines()
        if line.endswith("}")
    }
    deadline = time.monotonic() + 10
    while live_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_processes(marker) == [], "the MCP server outlived the evaluator"

    requests_before = len(api.message_requests)
    code, stdout, stderr = cli(*command[2:], "--resume")
    assert code == 0, stderr
    results = json.loads(out.read_text())["results"]
    assert sorted(r["test_name"] for r in results) == names, "every case exactly once"
    assert all(r["agent_reasoning"] == f"answer to prompt {r['test_name']}" for r in results)
    assert len(api.message_requests) - requests_before == 10 - len(done_before)
    assert not journal.exists()
    assert live_processes(marker) == []


def test_an_existing_journal_needs_resume_or_deleting(cli, api, tmp_path):
    out = tmp_path / "out.json"
    journal_path(out).write_text("")
    code, stdout, stderr = cli(
        "--csv",
        str(suite(tmp_path / "s.csv", ["a"])),
        "-o",
        str(out),
        "--server-module",
        str(EXAMPLE_SERVER),
    )
    assert code == 2 and "holds the results of an unfinished run" in stderr and "--resume" in stderr


def test_retry_errors_reruns_only_failed_cases_and_edited_cases_rerun(cli, api, tmp_path):
    failing = {"b"}
    api.responder = lambda body: (
        error(400, "invalid_request_error", "nope")
        if first_prompt(body)[7:] in failing
        else reply(text("ok"))
    )
    csv_file, out = suite(tmp_path / "s.csv", ["a", "b", "c"]), tmp_path / "out.json"
    args = ["--csv", str(csv_file), "-o", str(out), "--server-module", str(EXAMPLE_SERVER)]
    assert cli(*args)[0] == 1
    failing.clear()
    before = len(api.message_requests)
    assert cli(*args, "--retry-errors")[0] == 0
    assert [first_prompt(b) for b in api.message_requests[before:]] == ["prompt b"]
    csv_file.write_text(csv_file.read_text().replace("prompt c", "prompt c edited"))
    before = len(api.message_requests)
    cli(*args, "--resume")
    assert [first_prompt(b) for b in api.message_requests[before:]] == ["prompt c edited"]
    assert len(json.loads(out.read_text())["results"]) == 3


# ----------------------------------------------------------------------------- secrets
def test_secrets_never_reach_results_journals_reports_or_the_terminal(
    cli, api, tmp_path, monkeypatch
):
    server_secret, header_secret = "srv-secret-4f9a8b7c", "hdr-token-1a2b3c4d5e"
    monkeypatch.setenv("HEADER_TOKEN", header_secret)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "misc": {
                        "command": sys.executable,
                        "args": [str(ROOT / "tests" / "servers" / "misc_server.py")],
                        "env": {
                            "SERVICE_PASSWORD": server_secret,
                            "API_HEADER": "Bearer ${HEADER_TOKEN}",
                        },
                    }
                }
            }
        )
    )
    api.responder = lambda body: (
        reply(text(f"The password is {server_secret}"))
        if len(body["messages"]) > 1
        else reply(
            tool_use("echo_env", {"name": "SERVICE_PASSWORD"}),
            tool_use("echo", {"text": f"key {TEST_API_KEY} token {header_secret}"}),
        )
    )
    out, report, csv_out, junit = (tmp_path / n for n in ("r.json", "r.md", "r.csv", "r.xml"))
    csv_file = tmp_path / "s.csv"
    csv_file.write_text(
        "test_name,user_prompt,expected_tools\nleak,show secrets,no_such\n".replace(
            "no_such", "echo"
        )
    )
    code, stdout, stderr = cli(
        "--csv",
        str(csv_file),
        "--mcp-config",
        str(config),
        "-o",
        str(out),
        "--report",
        str(report),
        "--csv-out",
        str(csv_out),
        "--junit",
        str(junit),
        "--json",
    )
    results = json.loads(out.read_text())["results"]
    assert results[0]["tool_calls"][0]["output"] == "[REDACTED]"
    assert "[REDACTED]" in results[0]["agent_reasoning"]
    for blob in (
        out.read_text(),
        report.read_text(),
        csv_out.read_text(),
        junit.read_text(),
        stdout,
        stderr,
    ):
        for secret in (server_secret, header_secret, TEST_API_KEY):
            assert secret not in blob


def test_the_live_view_never_shows_secrets():
    seen: list[str] = []

    class Screen(ConversationObserver):
        def on_assistant_text(self, text: str) -> None:
            seen.append(text)

        def on_tool_call(self, call: ToolCall) -> None:
            seen.append(call.output + json.dumps(call.input))

    view = RedactingObserver(Screen(), Redactor(["hunter2-password"]))
    view.on_assistant_text("the password is hunter2-password")
    view.on_tool_call(ToolCall("echo", {"text": "hunter2-password"}, "got hunter2-password"))
    assert seen and not any("hunter2-password" in s for s in seen)
