"""End-to-end tests of the core tool-use evaluation: the CLI, the real anthropic SDK against the
scripted API server, and real MCP servers (stdio, in-process, streamable HTTP, a config of two,
and the public mcp-server-time)."""

from __future__ import annotations

import json
import sys
import time

import jsonschema
import pytest
from conftest import (
    EXAMPLE_SERVER,
    ROOT,
    TEST_API_KEY,
    example_server_command,
    invoke,
)
from fake_anthropic import error, reply, text, tool_use

import prompts
import test_constants as C
from claude_tool_evaluator.session import AnthropicModel, ModelRequest

MISC_SERVER = ROOT / "tests" / "servers" / "misc_server.py"
MISC = f"{sys.executable} {MISC_SERVER}"

RESULT_SCHEMA = {
    "type": "object",
    "required": ["schema_version", "metadata", "results"],
    "properties": {
        "metadata": {
            "type": "object",
            "required": [
                "total_results",
                "generated_at",
                "model",
                "mode",
                "iterations",
                "input_type",
            ],
        },
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "iteration",
                    "agent_reasoning",
                    "tools_called",
                    "tool_params",
                    "tool_results",
                    "conversation_turns",
                    "user_interventions",
                    "ended_by",
                    "conversation_history",
                    "latency_ms",
                    "token_count",
                    "error",
                    "tool_calls",
                    "usage",
                    "stop_reason",
                ],
                "properties": {
                    "tools_called": {"type": "array", "items": {"type": "string"}},
                    "tool_params": {"type": "object"},
                    "tool_results": {"type": "object"},
                    "conversation_history": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["role", "content", "has_tools"],
                            "properties": {"role": {"enum": ["user", "assistant", "tool"]}},
                        },
                    },
                    "ended_by": {
                        "enum": ["completion", "user_end", "needs_input", "max_turns", "error"]
                    },
                    "tool_calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": [
                                "name",
                                "input",
                                "output",
                                "is_error",
                                "duration_ms",
                                "server",
                            ],
                        },
                    },
                    "usage": {
                        "type": "object",
                        "required": [
                            "input_tokens",
                            "output_tokens",
                            "cache_creation_input_tokens",
                            "cache_read_input_tokens",
                        ],
                    },
                },
            },
        },
    },
}


def run_json(*args: str) -> tuple[int, dict]:
    code, out, err = invoke(*args, "--json")
    assert out.strip(), err
    document = json.loads(out)
    jsonschema.validate(document, RESULT_SCHEMA)
    return code, document


def tool_results_of(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


# ----------------------------------------------------------------------------- the conversation loop
def test_single_query_with_one_tool_call_over_stdio(cli, api, tmp_path):
    api.push(
        reply(text("Let me look."), tool_use("get_existing_connections")),
        reply(text("You have three connections.")),
    )
    out = tmp_path / "results.json"
    code, stdout, stderr = cli(
        "-q", "Which connections do I have?", "--server", example_server_command(), "-o", str(out)
    )
    assert code == 0, stderr
    document = json.loads(out.read_text())
    jsonschema.validate(document, RESULT_SCHEMA)
    result = document["results"][0]
    assert result["tools_called"] == ["get_existing_connections"]
    assert "snowflake_prod" in result["tool_results"]["get_existing_connections"]
    assert result["agent_reasoning"] == "You have three connections."
    assert result["ended_by"] == "completion" and result["stop_reason"] == "end_turn"
    assert [h["role"] for h in result["conversation_history"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result["conversation_turns"] == 4
    assert document["metadata"]["mode"] == "batch" and document["metadata"]["input_type"] == "query"

    first, second = api.message_requests
    names = [t["name"] for t in first["tools"]]
    assert names == sorted(names) and "run_sql_query" in names
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in first["tools"][:-1])
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert (
        "tools whenever they can answer" in first["system"][0]["text"]
    )  # CLAUDE_CODE_SYSTEM_PROMPT
    assert first["tools"] == second["tools"], "tool definitions must be byte-stable across calls"
    assert first["model"] == C.DEFAULT_MODEL
    assert result["usage"]["cache_read_input_tokens"] > 0, "the second call reads the cached prefix"
    assert result["token_count"] == sum(result["usage"].values())


def test_parallel_tool_calls_are_answered_in_one_message_in_order(api):
    first, second, third = (
        tool_use("describe_table", {"table": "orders"}),
        tool_use("about_profiles"),
        tool_use("describe_table", {"table": "users"}),
    )
    api.push(reply(first, second, third), reply(text("Done.")))
    code, document = run_json(
        "-q", "Describe orders and users", "--server", example_server_command()
    )
    assert code == 0
    result = document["results"][0]
    assert result["tools_called"] == ["describe_table", "about_profiles", "describe_table"]
    assert [c["input"] for c in result["tool_calls"]] == [
        {"table": "orders"},
        {},
        {"table": "users"},
    ]
    results = tool_results_of(api.message_requests[1])
    assert [r["tool_use_id"] for r in results] == [first["id"], second["id"], third["id"]]
    assert (
        len(api.message_requests[1]["messages"]) == 3
    )  # user, assistant, one user message of results


def test_tool_errors_timeouts_and_unknown_tools_become_error_results(api):
    api.push(
        reply(
            tool_use("fail", {"message": "disk full"}),
            tool_use("no_such_tool"),
            tool_use("slow", {"seconds": 20}),
        ),
        reply(text("Everything failed.")),
    )
    start = time.monotonic()
    code, document = run_json("-q", "try things", "--server", MISC, "--tool-timeout", "1")
    assert time.monotonic() - start < 15
    calls = document["results"][0]["tool_calls"]
    assert [c["is_error"] for c in calls] == [True, True, True]
    assert "disk full" in calls[0]["output"]
    assert "Unknown tool: no_such_tool" in calls[1]["output"] and "echo" in calls[1]["output"]
    assert "timed out after 1s" in calls[2]["output"]
    sent = tool_results_of(api.message_requests[1])
    assert [r["is_error"] for r in sent] == [True, True, True]
    assert (
        document["results"][0]["error"] is None
    )  # tool failures are Claude's to handle, not the run's


def test_huge_tool_results_are_capped(api):
    api.push(reply(tool_use("huge", {"size": 200_000})), reply(text("ok")))
    code, document = run_json("-q", "big", "--server", MISC, "--max-result-chars", "1000")
    output = document["results"][0]["tool_calls"][0]["output"]
    assert len(output) < 1200 and "truncated 199000 of 200000 characters" in output


def test_refusal_stops_without_running_tools(api):
    api.push(
        reply(
            text("I can't help with that."),
            tool_use("run_sql_query", {"sql": "select 1"}),
            stop_reason="refusal",
        )
    )
    code, document = run_json("-q", "something bad", "--server-module", str(EXAMPLE_SERVER))
    result = document["results"][0]
    assert result["stop_reason"] == "refusal" and result["tools_called"] == []
    assert len(api.message_requests) == 1


def test_pause_turn_continues_and_max_tokens_is_truncated(api):
    api.push(
        reply(text("Searching..."), stop_reason="pause_turn"),
        reply(text("A long answer that was cut"), stop_reason="max_tokens"),
    )
    code, document = run_json("-q", "explain", "--server-module", str(EXAMPLE_SERVER))
    result = document["results"][0]
    assert len(api.message_requests) == 2
    assert (
        api.message_requests[1]["messages"][-1]["role"] == "assistant"
    )  # paused content sent back
    assert result["truncated"] is True and result["stop_reason"] == "max_tokens"


def test_max_turns_reached(api):
    api.responder = lambda body: reply(tool_use("about_profiles"))
    code, document = run_json(
        "-q", "loop forever", "--server-module", str(EXAMPLE_SERVER), "--max-turns", "3"
    )
    result = document["results"][0]
    assert result["ended_by"] == "max_turns"
    assert len(api.message_requests) == 3 and result["tools_called"] == ["about_profiles"] * 3


def test_question_in_batch_mode_ends_as_needs_input(api):
    api.push(reply(text("Which warehouse connection should I use?")))
    code, document = run_json("-q", "set up a project", "--server-module", str(EXAMPLE_SERVER))
    assert document["results"][0]["ended_by"] == "needs_input"


def test_iterations_run_concurrently_with_separate_state(api):
    api.delay = 0.4
    api.responder = lambda body: (
        reply(text("final")) if len(body["messages"]) > 1 else reply(tool_use("about_profiles"))
    )
    start = time.monotonic()
    code, document = run_json(
        "-q", "about", "--server-module", str(EXAMPLE_SERVER), "-i", "4", "--concurrency", "4"
    )
    elapsed = time.monotonic() - start
    results = document["results"]
    assert [r["iteration"] for r in results] == [1, 2, 3, 4]
    assert all(r["tools_called"] == ["about_profiles"] for r in results)
    assert all(len(r["conversation_history"]) == 4 for r in results)
    assert document["metadata"]["iterations"] == 4 and document["metadata"]["total_results"] == 4
    assert len(api.message_requests) == 8
    assert elapsed < 8 * 0.4, "four conversations of two calls must overlap"


def test_model_options_are_sent(api, tmp_path):
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("You are a test prompt.")
    run_json(
        "-q",
        "hi",
        "--server-module",
        str(EXAMPLE_SERVER),
        "--model",
        "claude-haiku-5-5",
        "--max-tokens",
        "123",
        "--temperature",
        "0.2",
        "--prompt",
        str(prompt_file),
    )
    request = api.message_requests[0]
    assert (request["model"], request["max_tokens"], request["temperature"]) == (
        "claude-haiku-5-5",
        123,
        0.2,
    )
    assert request["system"][0]["text"] == "You are a test prompt."
    run_json(
        "-q", "hi", "--server-module", str(EXAMPLE_SERVER), "--prompt", "MINIMAL_SYSTEM_PROMPT"
    )
    assert api.message_requests[1]["system"][0]["text"] == prompts.MINIMAL_SYSTEM_PROMPT


def test_base_url_option_and_api_errors_become_case_errors(api, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    api.push(error(400, "invalid_request_error", "messages: bad"))
    code, document = run_json(
        "-q", "hi", "--server-module", str(EXAMPLE_SERVER), "--base-url", api.url
    )
    result = document["results"][0]
    assert code == 1 and result["ended_by"] == "error"
    assert "BadRequestError (400)" in result["error"] and "messages: bad" in result["error"]


def test_summary_goes_to_the_terminal_without_output_file(cli, api):
    api.push(reply(tool_use("about_profiles")), reply(text("Profiles builds customer 360 tables.")))
    code, out, err = cli("-q", "about", "--server-module", str(EXAMPLE_SERVER))
    assert code == 0
    assert "about_pro" in out and "Profiles builds customer 360 tables." in out


def test_streaming_model_client_gets_the_same_reply(api):
    import asyncio

    api.push(reply(text("streamed answer"), tool_use("echo", {"text": "hi"})))
    model = AnthropicModel(base_url=api.url, stream=True)
    chunks: list[str] = []

    async def call():
        try:
            request = ModelRequest(
                "claude-sonnet-5-5", "sys", [{"role": "user", "content": "hi"}], [], 50
            )
            return await model.complete(request, chunks.append)
        finally:
            await model.close()

    result = asyncio.run(call())
    assert "".join(chunks) == "streamed answer"
    assert result.content[1] == {
        "type": "tool_use",
        "id": result.content[1]["id"],
        "name": "echo",
        "input": {"text": "hi"},
    }
    assert result.stop_reason == "tool_use" and api.message_requests[0]["stream"] is True


# ----------------------------------------------------------------------------- MCP transports


def test_streamable_http_server_from_config_with_headers(
    api, tmp_path, example_server_url, monkeypatch
):
    monkeypatch.setenv("PROFILES_TOKEN", "secret-token-value")
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "remote": {
                        "type": "http",
                        "url": example_server_url,
                        "headers": {"Authorization": "Bearer ${PROFILES_TOKEN}"},
                    }
                }
            }
        )
    )
    api.push(reply(tool_use("list_warehouse_tables")), reply(text("tables listed")))
    code, document = run_json("-q", "tables?", "--mcp-config", str(config))
    call = document["results"][0]["tool_calls"][0]
    assert call["server"] == "remote" and not call["is_error"] and "orders" in call["output"]


def test_config_with_two_servers_disambiguates_shared_tool_names(
    cli, api, tmp_path, example_server_url
):
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "profiles": {"type": "http", "url": example_server_url},
                    "misc": {
                        "command": sys.executable,
                        "args": [str(MISC_SERVER)],
                        "env": {"GREETING": "${NOPE:-hello}"},
                    },
                }
            }
        )
    )
    api.push(
        reply(
            tool_use("misc__about_profiles"),
            tool_use("profiles__about_profiles"),
            tool_use("echo_env", {"name": "GREETING"}),
        ),
        reply(text("ok")),
    )
    code, out, err = cli("-q", "about", "--mcp-config", str(config), "--json")
    assert "offered by several servers" in err and "misc__about_profiles" in err
    calls = json.loads(out)["results"][0]["tool_calls"]
    assert [(c["server"], c["is_error"]) for c in calls] == [
        ("misc", False),
        ("profiles", False),
        ("misc", False),
    ]
    assert calls[0]["output"] == "misc about_profiles" and "Profiles" in calls[1]["output"]
    assert calls[2]["output"] == "hello"
    names = {t["name"] for t in api.message_requests[0]["tools"]}
    assert {"misc__about_profiles", "profiles__about_profiles", "echo", "run_sql_query"} <= names
    assert "about_profiles" not in names


def test_server_env_passes_only_named_variables(api, monkeypatch):
    monkeypatch.setenv("MY_SETTING", "from-parent")
    monkeypatch.setenv("NOT_PASSED", "hidden")
    monkeypatch.setenv("SERVICE_TOKEN", "service-token-value")
    api.push(
        reply(
            tool_use("echo_env", {"name": "MY_SETTING"}),
            tool_use("echo_env", {"name": "NOT_PASSED"}),
            tool_use("echo_env", {"name": "EXTRA"}),
            tool_use("echo_env", {"name": "SERVICE_TOKEN"}),
            tool_use("echo_env", {"name": "ANTHROPIC_API_KEY"}),
        ),
        reply(text("ok")),
    )
    code, document = run_json(
        "-q",
        "env",
        "--server",
        MISC,
        "--server-env",
        "MY_SETTING",
        "--server-env",
        "EXTRA=set-here",
        "--server-env",
        "SERVICE_TOKEN",
    )
    outputs = [c["output"] for c in document["results"][0]["tool_calls"]]
    # the server got what was named, and no API key; settings are shown, credentials never
    assert outputs == ["from-parent", "<unset>", "set-here", "[REDACTED]", "<unset>"]


def test_public_time_server_over_stdio(api):
    api.push(
        reply(tool_use("get_current_time", {"timezone": "Europe/Paris"})),
        reply(text("It is time.")),
    )
    code, document = run_json(
        "-q",
        "What time is it in Paris?",
        "--server",
        f"{sys.executable} -m mcp_server_time --local-timezone UTC",
    )
    call = document["results"][0]["tool_calls"][0]
    assert not call["is_error"] and "Europe/Paris" in call["output"]
    assert {"get_current_time", "convert_time"} <= {
        t["name"] for t in api.message_requests[0]["tools"]
    }


def test_default_server_is_the_bundled_example(api):
    api.push(reply(tool_use("about_profiles")), reply(text("ok")))
    code, document = run_json("-q", "about")
    assert document["results"][0]["tool_calls"][0]["server"] == "profiles"
    assert not document["results"][0]["tool_calls"][0]["is_error"]


# ----------------------------------------------------------------------------- bad input: one line, exit 2
def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_missing_api_key_stops_before_any_server_starts(cli, no_api_key, tmp_path):
    marker = tmp_path / "started"
    code, out, err = cli("-q", "hi", "--server", f"touch {marker}")
    assert_one_line_error(code, err, "ANTHROPIC_API_KEY is not set", "export ANTHROPIC_API_KEY=")
    assert not marker.exists()


def test_missing_api_key_in_a_real_subprocess(cli, tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ANTHROPIC")}
    code, out, err = cli.process("-q", "hi", env=env, timeout=60)
    assert_one_line_error(code, err, "ANTHROPIC_API_KEY")


def test_server_command_that_does_not_exist(cli, api):
    code, out, err = cli("-q", "hi", "--server", "no-such-mcp-server-binary --flag")
    assert_one_line_error(code, err, "no-such-mcp-server-binary", "command not found")


def test_server_that_exits_at_start_quotes_its_stderr(cli, api):
    code, out, err = cli("-q", "hi", "--server", f"{MISC} --exit-at-start")
    assert_one_line_error(code, err, "MCP server 'misc_server'", "refusing to start")


def plugin_with_servers(tmp_path, how: str):
    """A Claude Code plugin folder shipping the example server under ${CLAUDE_PLUGIN_ROOT}: in a
    wrapped .mcp.json, a bare .mcp.json, or inline in its manifest."""
    import shutil

    folder = tmp_path / "my-plugin"
    (folder / ".claude-plugin").mkdir(parents=True)
    (folder / "servers").mkdir()
    shutil.copy(EXAMPLE_SERVER, folder / "servers" / "profiles.py")
    (folder / "servers" / "data").symlink_to(EXAMPLE_SERVER.parent / "data")
    server = {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/servers/profiles.py"]}
    manifest: dict = {"name": "my-plugin"}
    if how == "inline":
        manifest["mcpServers"] = {"warehouse": server}
    else:
        servers = {"warehouse": server}
        (folder / ".mcp.json").write_text(
            json.dumps({"mcpServers": servers} if how == "wrapped" else servers)
        )
    (folder / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("how", ["wrapped", "bare", "inline"])
def test_a_plugin_folder_is_a_server_config_with_its_root_expanded(api, tmp_path, how):
    """A plugin's MCP servers as Claude Code starts them: `${CLAUDE_PLUGIN_ROOT}` is the folder,
    the servers come from its .mcp.json (wrapped or bare) or its manifest's mcpServers."""
    folder = plugin_with_servers(tmp_path, how)
    api.push(reply(tool_use("list_warehouse_tables")), reply(text("tables listed")))
    code, document = run_json("-q", "tables?", "--mcp-config", str(folder), "--trust-plugin")
    call = document["results"][0]["tool_calls"][0]
    assert code == 0 and call["server"] == "warehouse" and "orders" in call["output"]


def test_a_plugin_folder_without_servers_or_in_a_skill_run_is_one_line(cli, api, tmp_path):
    bare = tmp_path / "bare-plugin"
    (bare / ".claude-plugin").mkdir(parents=True)
    (bare / ".claude-plugin" / "plugin.json").write_text('{"name": "bare-plugin"}')
    code, out, err = cli("-q", "hi", "--mcp-config", str(bare))
    assert_one_line_error(code, err, "bare-plugin", "ships no MCP servers")
    folder = plugin_with_servers(tmp_path, "wrapped")
    skill = ROOT / "examples" / "skills" / "warehouse-sql"
    trigger = tmp_path / "trigger.md"
    trigger.write_text('---\ntype: trigger\n---\n# Positive Triggers\n- "weekly revenue SQL"\n')
    code, out, err = cli(
        "--skill", str(skill), "--trigger", str(trigger), "--dry-run", "--mcp-config", str(folder)
    )
    assert_one_line_error(code, err, "my-plugin", "plugin PATH")


def test_unreadable_and_invalid_configs(cli, api, tmp_path):
    code, out, err = cli("-q", "hi", "--mcp-config", str(tmp_path / "missing.json"))
    assert_one_line_error(code, err, "missing.json", "cannot read MCP config")
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {\n  "a": {"command": "x",}\n}}')
    code, out, err = cli("-q", "hi", "--mcp-config", str(bad))
    assert_one_line_error(code, err, "bad.json:2:", "invalid JSON")
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"mcpServers": {\n  "a": {"type": "carrier-pigeon", "url": "x"}\n}}')
    code, out, err = cli("-q", "hi", "--mcp-config", str(unknown))
    assert_one_line_error(code, err, "unknown.json:2:", "unknown server type 'carrier-pigeon'")
    undefined = tmp_path / "undefined.json"
    undefined.write_text(
        '{"mcpServers": {"a": {"command": "x", "env": {"T": "${SURELY_UNSET_VAR}"}}}}'
    )
    code, out, err = cli("-q", "hi", "--mcp-config", str(undefined))
    assert_one_line_error(code, err, "SURELY_UNSET_VAR", "is not set")


def test_other_bad_inputs(cli, api, tmp_path):
    assert_one_line_error(*cli("-q", "   ")[::2], "query is empty")
    assert_one_line_error(*cli()[::2], "nothing to evaluate")
    assert_one_line_error(*cli("-q", "hi", "--prompt", "NO_SUCH_PROMPT")[::2], "NO_SUCH_PROMPT")
    assert_one_line_error(*cli("-q", "hi", "--server-module", "nowhere.py")[::2], "nowhere.py")
    assert_one_line_error(
        *cli("-q", "hi", "-i", "0")[::2],
        "'0' is not a number of runs (1 or more) nor auto[:MIN-MAX]",
    )
    assert_one_line_error(
        *cli("-q", "hi", "--server-module", str(ROOT / "README.md"))[::2], "not a Python file"
    )
    broken = tmp_path / "broken_server.py"
    broken.write_text("raise RuntimeError('database unreachable')\n")
    assert_one_line_error(
        *cli("-q", "hi", "--server-module", str(broken))[::2],
        "importing",
        "RuntimeError: database unreachable",
    )
    assert_one_line_error(
        *cli("-q", "hi", "--server-module", f"{EXAMPLE_SERVER}:nope")[::2],
        "no attribute 'nope'",
    )


def test_api_key_never_appears_in_results(cli, api, tmp_path):
    api.push(reply(tool_use("about_profiles")), reply(text("ok")))
    out = tmp_path / "r.json"
    cli("-q", "hi", "--server-module", str(EXAMPLE_SERVER), "-o", str(out))
    assert TEST_API_KEY not in out.read_text()
