"""Tools that change things: MCP tool annotations, --tool-policy (live, safe, read-only),
--allow-tool and --mock-tools, end to end through the CLI against the scripted Anthropic server and
real MCP servers (the example server over stdio, with its one state-changing tool `save_note`
writing to a temporary database; mcp-server-time; tests/servers/misc_server.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use
from rich.console import Console

import evaluator as E
import prompts
from claude_tool_evaluator.hub.calls import ToolPolicy
from claude_tool_evaluator.hub.tools import ToolSpec
from claude_tool_evaluator.run_types import ToolCall
from claude_tool_evaluator.writers.terminal import LiveConversationView

MISC_SERVER = ROOT / "tests" / "servers" / "misc_server.py"
TIME_SERVER = f"{sys.executable} -m mcp_server_time --local-timezone UTC"
EXAMPLE = f"{sys.executable} {EXAMPLE_SERVER}"
NOTE = {"title": "weekly plan", "text": "Build the LTV features first."}
ANSWER = "Done: I saved your plan as a note."


def tool_results(body: dict) -> list[dict]:
    content = body["messages"][-1]["content"]
    return (
        [b for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []
    )


def calls(*uses: tuple[str, dict]) -> Callable[[dict], Any]:
    """Claude calls these tools in one turn, then answers."""

    def model(body: dict) -> Any:
        if tool_results(body):
            return reply(text(ANSWER))
        return reply(*[tool_use(name, args) for name, args in uses])

    return model


def notes_in(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT title, text FROM notes").fetchall()
    finally:
        conn.close()


@pytest.fixture
def notes_db(tmp_path: Path) -> Path:
    """The example server's note database, in a temporary folder (never examples/data)."""
    return tmp_path / "notes.sqlite"


def example_server(notes_db: Path) -> list[str]:
    return ["--server", EXAMPLE, "--server-env", f"PROFILES_NOTES_DB={notes_db}"]


def suite(tmp_path: Path) -> Path:
    path = tmp_path / "notes.csv"
    path.write_text(
        "test_name,user_prompt,expected_tools,expected_args\n"
        "save_plan,Save my weekly plan as a note,save_note,"
        '"{""save_note"": {""title"": ""weekly plan""}}"\n',
        encoding="utf-8",
    )
    return path


# ============================================================================ annotations
def test_annotations_are_kept_shown_by_dry_run_and_recorded_in_metadata(
    cli, api, tmp_path, notes_db, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "200")
    dry = cli("--csv", suite(tmp_path), *example_server(notes_db), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert api.message_requests == []
    flat = " ".join(dry.output.split())
    assert "Tools (--tool-policy safe)" in flat
    rows = {
        line.split("│")[1].strip(): line for line in dry.output.splitlines() if line.count("│") >= 4
    }
    assert "destructive" in rows["save_note"] and "withheld by policy" in rows["save_note"]
    assert "read-only" in rows["get_profile"] and "live" in rows["get_profile"]

    api.responder = calls(("save_note", NOTE))
    out = tmp_path / "results.json"
    run = cli("--csv", suite(tmp_path), *example_server(notes_db), "-o", out)
    assert run.exit_code == 0, run.output
    meta = json.loads(out.read_text())["metadata"]
    assert meta["tool_policy"] == "safe"
    tools = {t["name"]: t for t in meta["tools"]}
    assert tools["save_note"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert tools["save_note"]["calls"] == "withheld by policy"
    assert (
        tools["get_profile"]["annotations"]["readOnlyHint"] is True
        and tools["get_profile"]["calls"] == "live"
    )


# ============================================================================ the policies
def test_safe_never_runs_a_destructive_tool_and_the_verdict_still_sees_the_call(
    cli, api, tmp_path, notes_db
):
    api.responder = calls(("save_note", NOTE))
    out, report, rows = tmp_path / "results.json", tmp_path / "report.md", tmp_path / "runs.csv"
    run = cli(
        "--csv",
        suite(tmp_path),
        *example_server(notes_db),
        "-o",
        out,
        "--report",
        report,
        "--csv-out",
        rows,
    )
    assert run.exit_code == 0, run.output  # expected_tools and expected_args see the withheld call
    assert not notes_db.exists() and notes_in(notes_db) == []  # the database was never touched
    assert "warning:" not in run.stderr
    # Claude got a clearly marked stand-in, as an error result
    [result] = tool_results(api.message_requests[1])
    assert result["is_error"] is True
    assert (
        result["content"].startswith("[not executed by the evaluator]")
        and "'save_note'" in result["content"]
    )
    assert "safe" in result["content"]
    document = json.loads(out.read_text())
    [call] = document["results"][0]["tool_calls"]
    assert (call["name"], call["input"], call["source"], call["executed"]) == (
        "save_note",
        NOTE,
        "policy",
        False,
    )
    assert document["cases"][0]["passed"] is True
    assert document["summary"]["tool_calls_by_source"] == {"policy": 1}
    markdown = report.read_text()
    assert "| Tool calls | 1 withheld by policy |" in markdown
    assert "## Tool calls not run against the server" in markdown and "`save_note`" in markdown
    assert "tool calls: 1 withheld by policy" in run.output  # the terminal summary
    [row] = csv.DictReader(io.StringIO(rows.read_text()))
    assert (row["tools_called"], row["tool_sources"]) == ("save_note", "policy")


def test_the_live_view_marks_calls_not_run_live():
    console = Console(record=True, width=200, force_terminal=False)
    view = LiveConversationView(console, 10)
    view.on_tool_call(
        ToolCall(
            "save_note",
            NOTE,
            "[not executed by the evaluator] ...",
            True,
            source="policy",
            executed=False,
        )
    )
    view.on_tool_call(
        ToolCall("get_profile", {"user_id": "u_1"}, "Profile", source="mock", executed=False)
    )
    view.on_tool_call(ToolCall("about_profiles", {}, "About"))
    shown = console.export_text()
    assert "⚙ save_note [withheld by policy]" in shown and "⚙ get_profile [mocked]" in shown
    assert "⚙ about_profiles {}" in shown


def test_live_runs_it_after_one_warning_line_printed_before_the_first_model_call(
    tmp_path, notes_db
):
    stderr_file = tmp_path / "stderr.txt"
    seen_at_first_call: list[str] = []

    def model(body: dict) -> Any:
        if not seen_at_first_call:
            seen_at_first_call.append(stderr_file.read_text())
        return calls(("save_note", NOTE))(body)

    with ScriptedAnthropic(responder=model) as api, stderr_file.open("w") as stderr:
        env = dict(
            os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url, COLUMNS="200"
        )
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "evaluator.py"),
                "--csv",
                str(suite(tmp_path)),
                *example_server(notes_db),
                "--tool-policy",
                "live",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=180,
            env=env,
            cwd=tmp_path,
        )
    assert done.returncode == 0, stderr_file.read_text()
    warnings = [line for line in stderr_file.read_text().splitlines() if "warning:" in line]
    assert warnings == [
        "warning: --tool-policy live: Claude can call 1 tool(s) annotated destructive, and they "
        "run for real: save_note"
    ]
    assert warnings[0] in seen_at_first_call[0]
    assert notes_in(notes_db) == [(NOTE["title"], NOTE["text"])]
    [call] = json.loads(done.stdout)["results"][0]["tool_calls"]
    assert (call["source"], call["executed"], call["is_error"]) == ("live", True, False)
    assert call["output"] == "Saved the note 'weekly plan' (29 characters)."


def test_allow_tool_runs_it_under_safe_and_read_only(cli, api, tmp_path, notes_db):
    api.responder = calls(("save_note", NOTE))
    run = cli(
        "--csv", suite(tmp_path), *example_server(notes_db), "--allow-tool", "save_*", "--json"
    )
    assert run.exit_code == 0, run.output
    assert notes_in(notes_db) == [(NOTE["title"], NOTE["text"])]
    [call] = json.loads(run.stdout)["results"][0]["tool_calls"]
    assert (call["source"], call["executed"]) == ("live", True)
    assert "warning:" not in run.stderr

    other = notes_db.with_name("other.sqlite")
    api.responder = calls(
        ("save_note", {"title": "b", "text": "c"}), ("get_profile", {"user_id": "u_1001"})
    )
    run = cli(
        "-q",
        "Save b and show u_1001",
        *example_server(other),
        "--tool-policy",
        "read-only",
        "--allow-tool",
        "save_note",
        "--json",
    )
    assert run.exit_code == 0, run.output
    assert notes_in(other) == [("b", "c")]
    assert [c["source"] for c in json.loads(run.stdout)["results"][0]["tool_calls"]] == [
        "live",
        "live",
    ]


def test_read_only_runs_only_tools_annotated_read_only(cli, api, tmp_path):
    # misc_server's tools say nothing: safe runs them, read-only does not; mcp-server-time's are read-only
    api.responder = calls(("echo", {"text": "hello"}), ("get_current_time", {"timezone": "UTC"}))
    servers = ["--server", f"{sys.executable} {MISC_SERVER}", "--server", TIME_SERVER]
    safe = json.loads(cli("-q", "Echo and time", *servers, "--json").stdout)
    assert [c["source"] for c in safe["results"][0]["tool_calls"]] == ["live", "live"]
    run = cli("-q", "Echo and time", *servers, "--tool-policy", "read-only", "--json")
    assert run.exit_code == 0, run.output
    echo, time_call = json.loads(run.stdout)["results"][0]["tool_calls"]
    assert (echo["source"], echo["executed"], echo["is_error"]) == ("policy", False, True)
    assert "readOnlyHint" in echo["output"] and "hello" not in echo["output"]
    assert (time_call["source"], time_call["executed"]) == ("live", True) and "UTC" in time_call[
        "output"
    ]
    # what Claude got for the withheld call is the stand-in, from prompts.py
    withheld = tool_results(api.message_requests[-1])[0]["content"]
    assert withheld == prompts.WITHHELD_TOOL_RESULT.format(
        tool="echo", policy="read-only", reason="are not annotated readOnlyHint: true"
    )


def test_the_policy_and_the_tool_options_are_refused_by_other_modes_and_checked(
    cli, api, tmp_path, notes_db
):
    bad = cli(
        "--csv",
        suite(tmp_path),
        *example_server(notes_db),
        "--allow-tool",
        "no_such_*",
        "--dry-run",
    )
    assert bad.exit_code == 2 and bad.stderr.startswith(
        "error: --allow-tool no_such_* matches no tool"
    )
    assert bad.stderr.count("\n") == 1
    refused = cli("--compare", "a.json", "b.json", "--tool-policy", "live")
    assert refused.exit_code == 2 and "--tool-policy does not apply to --compare" in refused.stderr
    choice = cli("-q", "hi", "--tool-policy", "yolo")
    assert choice.exit_code == 2 and "yolo" in choice.output
    assert api.message_requests == []


# ============================================================================ mocks
def test_mocks_answer_matching_calls_by_argument_and_leave_the_rest_live(
    cli, api, tmp_path, notes_db
):
    mocks = tmp_path / "mocks.json"
    mocks.write_text(
        json.dumps(
            {
                "get_profile": [
                    {"match": {"user_id": "u_1001"}, "result": "Profile u_1001: Mock Person"},
                    {
                        "match": {"user_id": "u_9999"},
                        "result": {"error": "no such user"},
                        "is_error": True,
                    },
                ],
                "save_note": {"result": "Saved (mock)."},
            }
        ),
        encoding="utf-8",
    )
    api.responder = calls(
        ("get_profile", {"user_id": "u_1001"}),
        ("get_profile", {"user_id": "u_9999"}),
        ("get_profile", {"user_id": "u_1002"}),
        ("save_note", NOTE),
    )
    out, report = tmp_path / "r.json", tmp_path / "r.md"
    run = cli(
        "-q",
        "Show three profiles and save a note",
        *example_server(notes_db),
        "--mock-tools",
        mocks,
        "-o",
        out,
        "--report",
        report,
    )
    assert run.exit_code == 0, run.output
    first, second, third, note = json.loads(out.read_text())["results"][0]["tool_calls"]
    assert (first["output"], first["source"], first["executed"], first["is_error"]) == (
        "Profile u_1001: Mock Person",
        "mock",
        False,
        False,
    )
    assert json.loads(second["output"]) == {"error": "no such user"} and second["is_error"] is True
    assert second["source"] == "mock"
    assert third["source"] == "live" and third["executed"] is True and "u_1002" in third["output"]
    # a destructive tool's mock is its stand-in under the safe policy: not the policy's error
    assert (note["source"], note["output"], note["is_error"]) == ("mock", "Saved (mock).", False)
    assert not notes_db.exists()
    sent = [r["content"] for r in tool_results(api.message_requests[1])]
    assert sent[0] == "Profile u_1001: Mock Person" and sent[3] == "Saved (mock)."
    assert "| Tool calls | 1 live, 3 mocked |" in report.read_text()


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "invalid JSON"),
        ("[]", "is a JSON object of tool names"),
        ('{"get_profile": {"answer": "x"}}', 'needs a "result"'),
        ('{"get_profile": [{"result": "x", "matches": {}}]}', "unknown key 'matches'"),
        ('{"get_profile": [{"result": "x", "match": "u_1"}]}', '"match"'),
        ('{"get_profile": "x"}', "is not an object or a list"),
        ('{"no_such_tool": {"result": "x"}}', "mocks 'no_such_tool', which no server offers"),
    ],
)
def test_a_bad_mock_file_is_one_line_naming_it_and_exit_2(cli, api, tmp_path, content, problem):
    mocks = tmp_path / "bad-mocks.json"
    mocks.write_text(content, encoding="utf-8")
    run = cli("-q", "hi", "--server-module", EXAMPLE_SERVER, "--mock-tools", mocks)
    assert run.exit_code == 2, run.output
    assert (
        run.stderr.count("\n") == 1
        and run.stderr.startswith("error: ")
        and str(mocks) in run.stderr
    )
    assert problem in run.stderr, run.stderr
    assert api.message_requests == []
    missing = cli(
        "-q", "hi", "--server-module", EXAMPLE_SERVER, "--mock-tools", tmp_path / "absent.json"
    )
    assert (
        missing.exit_code == 2
        and "absent.json" in missing.stderr
        and missing.stderr.count("\n") == 1
    )


def test_old_results_without_sources_still_read_as_live(tmp_path):
    call = ToolCall("t", {})
    assert (call.source, call.executed) == ("live", True)
    record = E.ToolRunResult.model_validate(
        {
            "iteration": 1,
            "test_name": "x",
            "query": "q",
            "case_hash": "h",
            "tool_calls": [{"name": "t", "input": {}}],
        }
    )
    assert (record.tool_calls[0].source, record.tool_calls[0].executed) == ("live", True)


# ============================================================================ tools that say nothing, or contradict themselves
STATE_SERVER = ROOT / "tests" / "servers" / "state_server.py"


def state_server(state: Path) -> list[str]:
    return ["--server", f"{sys.executable} {STATE_SERVER}", "--server-env", f"STATE_FILE={state}"]


def changes_the_graph(body: dict) -> Any:
    return calls(
        ("create_entities", {"names": ["alice"]}),
        ("delete_entities", {"names": ["bob"]}),
        ("wipe", {}),
        ("read_graph", {}),
    )(body)


def test_unannotated_and_contradictory_tools_are_listed_with_why_they_run(cli, api, tmp_path):
    """--tool-policy safe ran unannotated tools that change things (server-memory's
    create_entities, delete_entities) and contradictory ones, silently. The dry run's table and
    the run header now say, in one line per server (not four wrapped lines per tool), which
    tools, what happens to their calls, why, and the fix."""
    state = tmp_path / "graph.json"
    state.write_text('["bob", "carol"]')
    dry = cli("-q", "tidy the graph", *state_server(state), "--dry-run")
    assert dry.exit_code == 0, dry.output
    unannotated = (
        "note: server state_server: create_entities, delete_entities have no readOnlyHint or "
        "destructiveHint: live, because safe withholds only tools annotated destructiveHint: "
        "true, and the MCP specification counts an unannotated tool as destructive: --tool-policy "
        "strict withholds them; the fix: annotate them in the server: readOnlyHint: true on what "
        "only reads, destructiveHint: true on what changes things"
    )
    contradictory = (
        "note: server state_server: wipe is annotated readOnlyHint: true and destructiveHint: "
        "true: live, because safe takes readOnlyHint: true over destructiveHint; --tool-policy "
        "strict withholds it; the fix: drop the hint that is wrong from it in the server"
    )
    notes = [line for line in dry.output.splitlines() if line.startswith("note:")]
    assert notes == [unannotated, contradictory], dry.output
    api.responder = changes_the_graph
    run = cli("-q", "tidy the graph", *state_server(state))
    assert run.exit_code == 0, run.output
    header = [line for line in run.stderr.splitlines() if line.startswith("note:")]
    assert header == [unannotated, contradictory], run.stderr
    assert json.loads(state.read_text()) == [], "under safe they ran, as the notes said"


def test_strict_follows_the_specification_defaults(cli, api, tmp_path):
    state = tmp_path / "graph.json"
    state.write_text('["bob", "carol"]')
    api.responder = changes_the_graph
    out = tmp_path / "r.json"
    run = cli("-q", "tidy the graph", *state_server(state), "--tool-policy", "strict", "-o", out)
    assert run.exit_code == 0, run.output
    assert json.loads(state.read_text()) == ["bob", "carol"], "nothing ran that may destroy"
    [result] = json.loads(out.read_text())["results"]
    sources = {c["name"]: (c["source"], c["is_error"]) for c in result["tool_calls"]}
    assert sources == {
        "create_entities": ("policy", True),
        "delete_entities": ("policy", True),
        "wipe": ("policy", True),
        "read_graph": ("live", False),
    }
    withheld = next(c for c in result["tool_calls"] if c["name"] == "create_entities")["output"]
    assert "the MCP specification counts as destructive" in withheld
    tools = {t["name"]: t["calls"] for t in json.loads(out.read_text())["metadata"]["tools"]}
    assert tools == {
        "create_entities": "withheld by policy",
        "delete_entities": "withheld by policy",
        "read_graph": "live",
        "wipe": "withheld by policy",
    }
    # mcp-server-git (annotated): git_reset may destroy, git_commit only adds, git_status reads
    spec = {"readOnlyHint": False, "destructiveHint": False}
    strict = ToolPolicy(policy="strict")
    tool = lambda annotations: ToolSpec("t", "s", "t", "", {}, annotations)  # noqa: E731
    assert strict.policy_runs(tool(spec)) and strict.policy_runs(tool({"readOnlyHint": True}))
    assert not strict.policy_runs(tool({"readOnlyHint": False}))
    assert not strict.policy_runs(tool({"destructiveHint": True}))


MEMORY_SERVER = ROOT / "node_modules" / ".bin" / "mcp-server-memory"


@pytest.mark.skipif(not MEMORY_SERVER.exists(), reason="npm install brings server-memory")
def test_server_memory_under_strict_adds_and_deletes_nothing(cli, api, tmp_path):
    """The real server-memory (package.json) annotates its tools: create_entities only adds
    (readOnlyHint: false, destructiveHint: false), so even --tool-policy strict runs it;
    delete_entities is destructive and is withheld, so the entity it would delete stays."""
    memory = tmp_path / "memory.jsonl"
    entity = {"name": "kept", "entityType": "t", "observations": []}
    api.responder = calls(
        ("create_entities", {"entities": [entity]}),
        ("delete_entities", {"entityNames": ["kept"]}),
    )
    server = ["--server", str(MEMORY_SERVER), "--server-env", f"MEMORY_FILE_PATH={memory}"]
    dry = cli("-q", "remember", *server, "--tool-policy", "strict", "--dry-run")
    rows = {
        line.split()[1]: line for line in dry.output.splitlines() if "mcp-server-memory" in line
    }
    assert "live" in rows["create_entities"] and "withheld" in rows["delete_entities"], dry.output
    out = tmp_path / "r.json"
    run = cli("-q", "remember kept", *server, "--tool-policy", "strict", "-o", str(out))
    assert run.exit_code == 0, run.output
    assert '"kept"' in memory.read_text(), "the additive call ran, the deletion did not"
    sources = {
        c["name"]: c["source"] for c in json.loads(out.read_text())["results"][0]["tool_calls"]
    }
    assert sources == {"create_entities": "live", "delete_entities": "policy"}
