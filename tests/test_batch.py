"""`--batch`: tool-use suites through the Message Batches API, against the scripted server's batch
endpoints (create, retrieve, results as JSONL) and the example MCP server.

- A multi-turn CSV suite gives the same verdicts as the direct run, one batch per round, no
  direct /v1/messages call, at the batch price.
- Errored and expired batch requests become that case's error, with the reason; the suite goes on.
- `--resume` after the process is killed mid-poll reattaches to the batch in flight: none of its
  requests is sent again.
- `--max-cost` holds round by round; `--dry-run` shows the direct and the batch price.
- Interactive, simulated-user and skill runs refuse `--batch` with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic, error, expired, reply, text, tool_use

import test_constants as C
from claude_tool_evaluator.run_types import Usage, cost_usd

C = C
SERVER = ["--server-module", str(EXAMPLE_SERVER)]

# Five cases: one tool then an answer (2 rounds), two tools one after the other (3 rounds), no tool
# (1 round), and a case that fails (Claude answers without the tool the case expects).
SUITE = (
    "test_name,user_prompt,expected_tools,expect_no_tools\n"
    "about,Tell me about profiles,about_profiles,\n"
    "connections,Which warehouse connections and tables do I have?,"
    '"get_existing_connections,list_warehouse_tables",\n'
    "hello,Just say hello,,true\n"
    "lazy,Describe the orders table (lazy),describe_table,\n"
    "about_again,Tell me about profiles again,about_profiles,\n"
)


def tool_results(body: dict) -> int:
    """How many tool turns the conversation has had so far."""
    return sum(
        1
        for m in body["messages"]
        if m["role"] == "user"
        and isinstance(m["content"], list)
        and any(b.get("type") == "tool_result" for b in m["content"])
    )


def prompt_of(body: dict) -> str:
    return body["messages"][0]["content"]


def scripted(body: dict) -> dict:
    """The same answers however a request arrives (directly or in a batch)."""
    prompt, turns = prompt_of(body), tool_results(body)
    if "profiles" in prompt:
        return (
            reply(tool_use("about_profiles", {}))
            if turns == 0
            else reply(text("Profiles builds a customer 360."))
        )
    if "connections" in prompt:
        if turns == 0:
            return reply(tool_use("get_existing_connections", {}))
        if turns == 1:
            return reply(tool_use("list_warehouse_tables", {}))
        return reply(text("You have one connection and these tables."))
    if "lazy" in prompt:
        return reply(text("It probably has orders in it."))
    return reply(text("Hello."))


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "suite.csv"
    path.write_text(SUITE)
    return path


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    """Points the SDK at a scripted server made by the test (`env(api)`)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)

    @contextlib.contextmanager
    def point(api: ScriptedAnthropic) -> Iterator[ScriptedAnthropic]:
        with api:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
            yield api

    return point


def verdicts(document: dict) -> dict[str, bool]:
    return {case["name"]: case["passed"] for case in document["cases"]}


def by_name(document: dict) -> dict[str, dict]:
    return {r["test_name"]: r for r in document["results"]}


# ----------------------------------------------------------------------------- same verdicts, half the price
def test_a_multi_turn_suite_through_batches_matches_the_direct_run(
    cli, suite: Path, tmp_path: Path, env
):
    with env(ScriptedAnthropic(responder=scripted)) as api:
        direct = cli("--csv", suite, *SERVER, "-o", tmp_path / "direct.json")
        assert direct.exit_code == 1, direct.output  # `lazy` fails
        assert len(api.message_requests) == 9 and api.batch_creations == []
    with env(ScriptedAnthropic(responder=scripted)) as api:
        batched = cli("--csv", suite, *SERVER, "--batch", "-o", tmp_path / "batch.json")
        assert batched.exit_code == 1, batched.output
        assert api.message_requests == [], "no direct /v1/messages call with --batch"
        rounds = [len(body["requests"]) for body in api.batch_creations]
        assert rounds == [5, 3, 1], "one batch per round, each with every conversation still going"
        custom_ids = [r["custom_id"] for body in api.batch_creations for r in body["requests"]]
        assert len(set(custom_ids)) == 9 and all(len(c) <= 64 for c in custom_ids)
        first = api.batch_creations[0]["requests"][0]["params"]
        assert first["model"] == C.DEFAULT_MODEL and first["tools"] and "stream" not in first
        assert any(p.endswith("/results") for p in api.batch_retrievals)
    old = json.loads((tmp_path / "direct.json").read_text())
    new = json.loads((tmp_path / "batch.json").read_text())
    assert (
        verdicts(new)
        == verdicts(old)
        == {"about": True, "connections": True, "hello": True, "lazy": False, "about_again": True}
    )
    assert new["metadata"]["batch_api"] is True and old["metadata"]["batch_api"] is False
    for name, run in by_name(new).items():
        before = by_name(old)[name]
        assert run["batch_api"] is True and run["error"] is None
        assert (
            run["tools_called"] == before["tools_called"]
            and run["model_calls"] == before["model_calls"]
        )
        assert [run["usage"][k] for k in ("input_tokens", "output_tokens")] == [
            before["usage"][k] for k in ("input_tokens", "output_tokens")
        ]
        listed = cost_usd(Usage(**run["usage"]), run["model"])
        assert run["cost_usd"] == pytest.approx(listed * C.BATCH_PRICE_FACTOR, abs=2e-6)
    # Which run writes the scripted prompt cache first differs; the suite's tokens do not.
    for kind in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        assert sum(r["usage"][kind] for r in new["results"]) == sum(
            r["usage"][kind] for r in old["results"]
        )
    assert new["summary"]["cost_usd"] == pytest.approx(
        old["summary"]["cost_usd"] * C.BATCH_PRICE_FACTOR, abs=1e-5
    )
    assert "batch 1 (msgbatch_" in batched.stderr + batched.stdout, "a progress line per poll"
    assert not (tmp_path / "batch.json.batches.jsonl").exists(), (
        "the ledger goes once every run is done"
    )


def test_errored_and_expired_requests_become_case_errors(cli, suite: Path, tmp_path: Path, env):
    def troubled(body: dict) -> dict:
        if "again" in prompt_of(body) and tool_results(body) == 1:
            return expired()
        if "connections" in prompt_of(body) and tool_results(body) == 0:
            return error(500, "overloaded_error", "Overloaded")
        return scripted(body)

    with env(ScriptedAnthropic(responder=troubled)) as api:
        result = cli("--csv", suite, *SERVER, "--batch", "-o", tmp_path / "out.json")
        assert result.exit_code == 1, result.output
        assert api.message_requests == []
    runs = by_name(json.loads((tmp_path / "out.json").read_text()))
    assert "expired" in runs["about_again"]["error"] and "msgbatch_" in runs["about_again"]["error"]
    assert runs["about_again"]["tools_called"] == ["about_profiles"], (
        "what happened before the failed round stays"
    )
    assert (
        "errored" in runs["connections"]["error"]
        and "overloaded_error: Overloaded" in runs["connections"]["error"]
    )
    assert runs["connections"]["ended_by"] == "error" and runs["connections"]["model_calls"] == 0
    assert runs["about"]["error"] is None and runs["hello"]["error"] is None, "the suite goes on"
    verdict = verdicts(json.loads((tmp_path / "out.json").read_text()))
    assert (
        verdict["about"]
        and verdict["hello"]
        and not verdict["about_again"]
        and not verdict["connections"]
    )


def test_the_judge_is_batched_too(cli, tmp_path: Path, env):
    path = tmp_path / "judged.csv"
    path.write_text(
        "test_name,user_prompt,expected_tools,rubric\n"
        "about,Tell me about profiles,about_profiles,Says what Profiles builds\n"
    )

    def judged(body: dict) -> dict:
        if body.get("tool_choice"):
            return reply(
                tool_use(
                    "grade", {"passed": True, "score": 1.0, "evidence": "names the customer 360"}
                )
            )
        return scripted(body)

    with env(ScriptedAnthropic(responder=judged)) as api:
        result = cli("--csv", path, *SERVER, "--batch", "-o", tmp_path / "out.json")
        assert result.exit_code == 0, result.output
        assert api.message_requests == []
        assert [len(b["requests"]) for b in api.batch_creations] == [1, 1, 1], (
            "two rounds, then the judge's"
        )
        assert api.batch_params[-1]["tool_choice"] == {"type": "tool", "name": "grade"}
    [run] = json.loads((tmp_path / "out.json").read_text())["results"]
    assert run["grades"]["judge"]["passed"] is True and run["judge_model"] == C.DEFAULT_JUDGE_MODEL
    listed = cost_usd(Usage(**run["usage"]), run["model"]) + cost_usd(
        Usage(**run["judge_usage"]), run["judge_model"]
    )
    assert run["cost_usd"] == pytest.approx(listed * C.BATCH_PRICE_FACTOR, abs=2e-6)


# ----------------------------------------------------------------------------- kill -9 mid-poll, then --resume
def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(
                f"the evaluator ended before {what}: {process.returncode} "
                f"{process.stderr.read() if process.stderr else ''}"
            )
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_resume_reattaches_to_the_batch_in_flight_after_kill_9(suite: Path, tmp_path: Path):
    out = tmp_path / "out.json"
    ledger = tmp_path / "out.json.batches.jsonl"
    with ScriptedAnthropic(responder=scripted) as api:
        environ = dict(
            os.environ,
            ANTHROPIC_API_KEY=TEST_API_KEY,
            ANTHROPIC_BASE_URL=api.url,
            PYTHONPATH=str(ROOT),
        )
        command = [
            sys.executable,
            str(ROOT / "evaluator.py"),
            "--csv",
            str(suite),
            *SERVER,
            "--batch",
            "-o",
            str(out),
        ]
        api.batch_polls = 10**6  # the first batch stays in progress
        process = subprocess.Popen(
            command,
            env=environ,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            wait_until(
                lambda: len(api.batch_creations) == 1 and len(api.batch_retrievals) >= 1,
                120,
                "the first batch is polled",
                process,
            )
            os.kill(process.pid, signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        first_batch = {r["custom_id"] for r in api.batch_creations[0]["requests"]}
        [entry] = [json.loads(line) for line in ledger.read_text().splitlines()]
        assert set(entry["requests"]) == first_batch and entry["batch"].startswith("msgbatch_")
        assert not out.exists()

        fresh = subprocess.run(
            command, env=environ, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert (
            fresh.returncode == 2 and "--resume" in fresh.stderr and str(ledger) in fresh.stderr
        ), fresh.stderr
        assert len(api.batch_creations) == 1, "refused before any request"

        api.batch_polls = 1  # the batch in flight ends at its next poll
        polls_before = len(api.batch_retrievals)
        resumed = subprocess.run(
            [*command, "--resume"],
            env=environ,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert resumed.returncode == 1, resumed.stdout + resumed.stderr
        assert "reattaching to " + entry["batch"] in resumed.stdout + resumed.stderr
        assert "5 answer(s) taken from the earlier run's batches" in resumed.stdout + resumed.stderr
        later = [r["custom_id"] for body in api.batch_creations[1:] for r in body["requests"]]
        assert later and first_batch.isdisjoint(later), (
            "no request of the batch in flight was sent again"
        )
        assert [len(body["requests"]) for body in api.batch_creations[1:]] == [3, 1], (
            "rounds 2 and 3 only"
        )
        assert any(entry["batch"] in path for path in api.batch_retrievals[polls_before:])
        assert api.message_requests == []
    document = json.loads(out.read_text())
    assert verdicts(document) == {
        "about": True,
        "connections": True,
        "hello": True,
        "lazy": False,
        "about_again": True,
    }
    assert all(r["error"] is None and r["batch_api"] for r in document["results"])
    assert not ledger.exists() and not Path(str(out) + ".journal.jsonl").exists()


# ----------------------------------------------------------------------------- cost: the cap and the estimate
def test_max_cost_holds_round_by_round(cli, tmp_path: Path, env):
    """Each request may write up to 10,000 tokens: its worst case at batch price is about $0.077,
    so a $0.10 cap sends one of the two conversations; the other is not started, and --resume does it."""
    path = tmp_path / "two.csv"
    path.write_text(
        "test_name,user_prompt,expected_tools\n"
        "about,Tell me about profiles,about_profiles\n"
        "about_again,Tell me about profiles again,about_profiles\n"
    )
    out = tmp_path / "out.json"
    with env(ScriptedAnthropic(responder=scripted)) as api:
        capped = cli(
            "--csv",
            path,
            *SERVER,
            "--batch",
            "--max-tokens",
            "10000",
            "--max-cost",
            "0.10",
            "-o",
            out,
        )
        assert capped.exit_code == 1, capped.output
        assert "stopped at --max-cost" in capped.output and "1 run(s) not started" in capped.output
        assert [len(b["requests"]) for b in api.batch_creations] == [1, 1], (
            "one conversation, both its rounds"
        )
        spent = json.loads(out.read_text())["summary"]["cost_usd"]
        assert 0 < spent <= 0.10
        assert [r["test_name"] for r in json.loads(out.read_text())["results"]] == ["about"]

        nothing = cli(
            "--csv",
            path,
            *SERVER,
            "--batch",
            "--max-tokens",
            "10000",
            "--max-cost",
            "0.01",
            "-o",
            tmp_path / "none.json",
        )
        assert nothing.exit_code == 1 and "2 run(s) not started" in nothing.output
        assert len(api.batch_creations) == 2, "no batch when not even one request fits"

        resumed = cli(
            "--csv", path, *SERVER, "--batch", "--max-tokens", "10000", "--resume", "-o", out
        )
        assert resumed.exit_code == 0, resumed.output
        assert [len(b["requests"]) for b in api.batch_creations[2:]] == [1, 1]
    assert verdicts(json.loads(out.read_text())) == {"about": True, "about_again": True}


def test_dry_run_shows_the_direct_and_the_batch_price(cli, suite: Path, env):
    with env(ScriptedAnthropic(responder=scripted)) as api:
        plain = cli("--csv", suite, *SERVER, "--dry-run")
        batched = cli("--csv", suite, *SERVER, "--dry-run", "--batch")
        assert api.message_requests == [] and api.batch_creations == []
    assert plain.exit_code == batched.exit_code == 0
    assert "--batch" not in plain.output

    def dollars(line_start: str) -> list[float]:
        line = next(
            line for line in batched.output.splitlines() if line.strip().startswith(line_start)
        )
        return [float(amount) for amount in re.findall(r"\$([0-9.]+)", line)]

    direct, batch = dollars("cost on"), dollars("cost with --batch")
    assert "with direct calls" in batched.output and "50% off" in batched.output
    assert (
        batch == pytest.approx([d * C.BATCH_PRICE_FACTOR for d in direct], abs=1e-4)
        and direct[0] > 0
    )


# ----------------------------------------------------------------------------- who cannot batch
@pytest.mark.parametrize(
    "args, says",
    [
        (["-q", "hello", "--interactive"], "--batch does not apply to --interactive runs"),
        (
            ["-q", "hello", "--simulate-user", "an analyst"],
            "--batch does not apply to --simulate-user runs",
        ),
        (
            [
                "--skill",
                str(ROOT / "examples" / "skills" / "warehouse-sql"),
                "--trigger",
                str(ROOT / "examples" / "triggers" / "warehouse-sql-trigger.md"),
            ],
            "--batch does not apply to --skill runs",
        ),
    ],
)
def test_modes_that_cannot_batch_refuse_it_in_one_line(cli, args: list[str], says: str, api):
    result = cli(*args, "--batch")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr
    assert api.requests == []


def test_a_case_with_a_simulated_user_refuses_batch(cli, tmp_path: Path, api):
    test = tmp_path / "asks.md"
    test.write_text(
        "---\nname: asks\ntype: task\nsimulated_user: an analyst who wants tables\n---\n\n"
        "# Prompt\n\nList my tables.\n"
    )
    result = cli("--tests", test, *SERVER, "--batch")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and str(test) in lines[0]
        and "simulated user" in lines[0]
        and "--batch" in lines[0]
    )
    assert api.requests == []
