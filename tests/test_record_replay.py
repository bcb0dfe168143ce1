"""--record DIR and --replay DIR: a suite recorded against a real server (mcp-server-time) replays
with no server configured, with the same verdicts and tool outputs; a call the cassette lacks
fails its case (or goes live with --replay-miss live); cassettes are readable JSON that hold no
secret (tests/servers/leaky_server.py echoes one back); a bad cassette is one line, exit 2."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from fake_anthropic import reply, text, tool_use

import test_constants as C
from claude_tool_evaluator.redaction import Redactor

TIME_SERVER = f"{sys.executable} -m mcp_server_time --local-timezone UTC"
LEAKY_SERVER = f"{sys.executable} {ROOT / 'tests' / 'servers' / 'leaky_server.py'}"
CONVERSIONS = {  # prompt -> convert_time arguments
    "What is 09:00 in Tokyo when it is 09:00 in New York?": {
        "source_timezone": "America/New_York",
        "time": "09:00",
        "target_timezone": "Asia/Tokyo",
    },
    "Convert 18:45 from Asia/Kolkata to Europe/London": {
        "source_timezone": "Asia/Kolkata",
        "time": "18:45",
        "target_timezone": "Europe/London",
    },
}


def tool_result_blocks(body: dict) -> list[dict]:
    content = body["messages"][-1]["content"]
    return (
        [b for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []
    )


def prompt_of(body: dict) -> str:
    return body["messages"][0]["content"]


def converter(shift: dict[str, str] | None = None) -> Callable[[dict], Any]:
    """Claude converts the prompt's time with convert_time (its arguments changed by `shift`),
    then answers with the target time it read from the result."""

    def model(body: dict) -> Any:
        results = tool_result_blocks(body)
        if not results:
            return reply(
                tool_use("convert_time", {**CONVERSIONS[prompt_of(body)], **(shift or {})})
            )
        content = results[0]["content"]
        if results[0].get("is_error"):
            return reply(text("The conversion failed."))
        return reply(text(f"It is {json.loads(content)['target']['datetime'][11:16]} there."))

    return model


@pytest.fixture
def time_suite(tmp_path: Path) -> Path:
    path = tmp_path / "times.csv"
    rows = ["test_name,user_prompt,expected_tools,expected_args"]
    for i, (prompt, args) in enumerate(CONVERSIONS.items()):
        rows.append(
            f'convert_{i},{prompt},convert_time,"'
            + json.dumps({"convert_time": args}).replace('"', '""')
            + '"'
        )
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def runs(document: dict) -> list[tuple]:
    return [
        (
            r["test_name"],
            r["verdict"]["passed"],
            [(c["name"], c["input"], c["output"], c["is_error"]) for c in r["tool_calls"]],
        )
        for r in document["results"]
    ]


def test_a_suite_recorded_against_a_real_server_replays_with_no_server(
    cli, api, tmp_path, time_suite
):
    cassettes = tmp_path / "cassettes"
    api.responder = converter()
    recorded_out = tmp_path / "recorded.json"
    recorded = cli(
        "--csv", time_suite, "--server", TIME_SERVER, "--record", cassettes, "-o", recorded_out
    )
    assert recorded.exit_code == 0, recorded.output
    [cassette] = sorted(cassettes.iterdir())
    assert cassette.name == "mcp_server_time.json"
    data = json.loads(
        cassette.read_text()
    )  # readable JSON: the tools, their annotations, the calls
    assert data["format"] == C.CASSETTE_FORMAT and data["server"] == "mcp_server_time"
    assert {t["name"]: t["annotations"]["readOnlyHint"] for t in data["tools"]} == {
        "get_current_time": True,
        "convert_time": True,
    }
    assert sorted(json.dumps(c["arguments"], sort_keys=True) for c in data["calls"]) == sorted(
        json.dumps(a, sort_keys=True) for a in CONVERSIONS.values()
    )
    assert all(c["tool"] == "convert_time" and not c["is_error"] for c in data["calls"])
    recorded_doc = json.loads(recorded_out.read_text())
    assert recorded_doc["metadata"]["record"] == str(cassettes)
    assert all(c["source"] == "live" for r in recorded_doc["results"] for c in r["tool_calls"])

    replayed_out, report = tmp_path / "replayed.json", tmp_path / "replayed.md"
    replayed = cli(
        "--csv", time_suite, "--replay", cassettes, "-o", replayed_out, "--report", report
    )
    assert replayed.exit_code == 0, replayed.output
    replayed_doc = json.loads(replayed_out.read_text())
    assert runs(replayed_doc) == runs(recorded_doc)  # the same verdicts and tool outputs
    assert (
        [c["passed"] for c in replayed_doc["cases"]]
        == [c["passed"] for c in recorded_doc["cases"]]
        == [True, True]
    )
    calls = [c for r in replayed_doc["results"] for c in r["tool_calls"]]
    assert {(c["source"], c["executed"], c["server"]) for c in calls} == {
        ("replay", False, "mcp_server_time")
    }
    meta = replayed_doc["metadata"]
    assert meta["replay"] == str(cassettes)
    # no server configured: the tools came from the cassette (not the bundled example server)
    assert sorted(t["name"] for t in meta["tools"]) == ["convert_time", "get_current_time"]
    assert {
        tuple(sorted(b["name"] for b in body["tools"])) for body in api.message_requests[-4:]
    } == {("convert_time", "get_current_time")}
    assert "| Tool calls | 2 replayed |" in report.read_text()

    # the same server under another name (an mcpServers config): its tools from the server, answers from the cassette
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": sys.executable,
                        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                    }
                }
            }
        ),
        encoding="utf-8",
    )
    renamed = cli("--csv", time_suite, "--replay", cassettes, "--mcp-config", config, "--json")
    assert renamed.exit_code == 0, renamed.output
    renamed_doc = json.loads(renamed.stdout)
    assert runs(renamed_doc) == runs(recorded_doc)
    assert {
        (c["source"], c["server"]) for r in renamed_doc["results"] for c in r["tool_calls"]
    } == {("replay", "time")}


def test_a_replay_miss_fails_the_case_naming_the_tool_and_arguments(cli, api, tmp_path, time_suite):
    cassettes = tmp_path / "cassettes"
    api.responder = converter()
    assert cli("--csv", time_suite, "--server", TIME_SERVER, "--record", cassettes).exit_code == 0
    api.responder = converter({"time": "10:30"})  # calls the cassette never saw
    out = tmp_path / "miss.json"
    miss = cli("--csv", time_suite, "--replay", cassettes, "-o", out)
    assert miss.exit_code == 1, miss.output
    document = json.loads(out.read_text())
    for result in document["results"]:
        assert result["error"].startswith("replay miss: the cassette")
        assert "convert_time" in result["error"] and '"time":"10:30"' in result["error"]
        assert any(
            reason.startswith("run failed: replay miss") and '"time":"10:30"' in reason
            for reason in result["verdict"]["reasons"]
        )
        [call] = result["tool_calls"]
        assert (call["source"], call["executed"], call["is_error"]) == ("replay", False, True)
    # --replay-miss live with the server named: the misses run for real
    live = cli(
        "--csv",
        time_suite,
        "--replay",
        cassettes,
        "--replay-miss",
        "live",
        "--server",
        TIME_SERVER,
        "--json",
    )
    assert live.exit_code == 1, live.output  # the arguments differ from the suite's expected_args
    calls = [c for r in json.loads(live.stdout)["results"] for c in r["tool_calls"]]
    assert {(c["source"], c["executed"]) for c in calls} == {("live", True)}
    assert all("10:30" in c["output"] for c in calls)
    # ... and with no server there is nothing to go live to: one line, exit 2
    nowhere = cli("--csv", time_suite, "--replay", cassettes, "--replay-miss", "live")
    assert nowhere.exit_code == 2 and nowhere.stderr.startswith(
        "error: --replay-miss live calls the real server"
    )
    assert nowhere.stderr.count("\n") == 1


def test_cassettes_hold_no_secret(cli, api, tmp_path, monkeypatch):
    secret = "cassette-secret-8c1f2e9d"
    monkeypatch.setenv("LEAKY_TOKEN", secret)
    cassettes = tmp_path / "cassettes"

    def model(body: dict) -> Any:
        if tool_result_blocks(body):
            return reply(text("Here are the values."))
        return reply(
            tool_use("env_json", {"name": "LEAKY_TOKEN"}),
            tool_use("env_base64", {"name": "LEAKY_TOKEN"}),
            tool_use("env_url", {"name": "LEAKY_TOKEN"}),
        )

    api.responder = model
    run = cli(
        "-q",
        "Show LEAKY_TOKEN",
        "--server",
        LEAKY_SERVER,
        "--server-env",
        "LEAKY_TOKEN",
        "--record",
        cassettes,
        "--json",
    )
    assert run.exit_code == 0, run.output
    # the server really echoed it to Claude ...
    sent = json.dumps([tool_result_blocks(b) for b in api.message_requests])
    assert secret in sent
    # ... and not one form of it reached the cassette
    written = "".join(p.read_text() for p in cassettes.iterdir())
    for form in (
        secret,
        base64.b64encode(secret.encode()).decode()[:20],
        secret.replace("-", "%2D"),
    ):
        assert form not in written
    data = json.loads((cassettes / "leaky_server.json").read_text())
    assert len(data["calls"]) == 3 and all(Redactor.MASK in c["result"] for c in data["calls"])
    # the redacted recording replays
    replayed = cli("-q", "Show LEAKY_TOKEN", "--replay", cassettes, "--json")
    assert replayed.exit_code == 0, replayed.output
    calls = json.loads(replayed.stdout)["results"][0]["tool_calls"]
    assert [c["source"] for c in calls] == ["replay"] * 3 and secret not in replayed.stdout


def test_record_merges_into_an_existing_cassette_and_dry_run_writes_nothing(
    cli, api, tmp_path, time_suite
):
    cassettes = tmp_path / "cassettes"
    dry = cli("--csv", time_suite, "--server", TIME_SERVER, "--record", cassettes, "--dry-run")
    assert dry.exit_code == 0 and not cassettes.exists() and api.message_requests == []
    api.responder = converter()
    assert cli("--csv", time_suite, "--server", TIME_SERVER, "--record", cassettes).exit_code == 0
    api.responder = converter({"time": "10:30"})
    assert (
        cli("--csv", time_suite, "--server", TIME_SERVER, "--record", cassettes).exit_code == 1
    )  # wrong args
    data = json.loads((cassettes / "mcp_server_time.json").read_text())
    assert sorted(c["arguments"]["time"] for c in data["calls"]) == [
        "09:00",
        "10:30",
        "10:30",
        "18:45",
    ]


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{broken", "invalid JSON"),
        ('{"format": "something else", "server": "x"}', "not a cassette"),
        (
            json.dumps(
                {
                    "format": C.CASSETTE_FORMAT,
                    "server": "x",
                    "calls": [{"tool": "t", "arguments": {}}],
                }
            ),
            "calls.0.result",
        ),
        (json.dumps({"format": C.CASSETTE_FORMAT, "server": "x", "extra": 1}), "extra"),
    ],
)
def test_a_bad_cassette_is_one_line_naming_the_file_and_exit_2(
    cli, api, tmp_path, content, problem
):
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    bad = cassettes / "x.json"
    bad.write_text(content, encoding="utf-8")
    run = cli("-q", "hi", "--replay", cassettes)
    assert run.exit_code == 2, run.output
    assert (
        run.stderr.count("\n") == 1
        and run.stderr.startswith(f"error: {bad}")
        and problem in run.stderr
    )
    assert api.message_requests == []


def test_replay_and_record_folders_are_checked_before_anything_runs(cli, api, tmp_path):
    for args, problem in [
        (["--replay", tmp_path / "absent"], "--replay: no such folder"),
        (["--replay", tmp_path], "holds no cassette"),
        (["--record", tmp_path / "missing" / "deeper"], "does not exist"),
        (["--replay-miss", "live"], "--replay-miss applies to --replay"),
    ]:
        run = cli("-q", "hi", *args)
        assert run.exit_code == 2 and problem in run.stderr and run.stderr.count("\n") == 1, (
            args,
            run.output,
        )
    file = tmp_path / "file.json"
    file.write_text("{}")
    run = cli("-q", "hi", "--record", file)
    assert run.exit_code == 2 and "--record takes a folder" in run.stderr
    assert api.message_requests == []
