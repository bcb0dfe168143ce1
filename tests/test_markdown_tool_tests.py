"""Markdown test definitions run against MCP servers (no --skill): a simulated user from the
test's own `# Simulated User` section, answers scored like skill tests."""

from __future__ import annotations

import json

from conftest import EXAMPLE_SERVER, ROOT
from fake_anthropic import reply, text, tool_use

from claude_tool_evaluator.run_types import Usage, cost_usd

ASSISTANT, USER = "claude-sonnet-5-5", "claude-haiku-5-5"


def scripted(body: dict) -> dict:
    """The assistant asks which connection, then answers; the simulated user answers, then is done."""
    assistant_turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if body["model"] == USER:  # done once the assistant has given the steps
        return reply(
            text("DONE")
            if "lifetime revenue per user" in json.dumps(body["messages"])
            else text("snowflake_prod, refreshed daily.")
        )
    if "DELETE FROM users" in json.dumps(body["messages"]):
        return reply(text("I can't run that: the SQL tool is read-only, so nothing was changed."))
    if assistant_turns == 0:
        return reply(tool_use("get_existing_connections"))
    if assistant_turns == 1:
        return reply(text("Which connection should the LTV model use?"))
    return reply(
        text(
            "On snowflake_prod: define the user entity with its id types, then a feature table "
            "with lifetime revenue per user, and run it daily."
        )
    )


def test_markdown_tests_with_a_simulated_user_run_against_the_servers(cli, api, tmp_path):
    api.responder = scripted
    out = tmp_path / "out.json"
    code, stdout, stderr = cli(
        "--tests",
        str(ROOT / "examples" / "tool_tests"),
        "--server-module",
        str(EXAMPLE_SERVER),
        "-o",
        str(out),
        "--concurrency",
        "1",
    )
    assert code == 0, stdout + stderr
    document = json.loads(out.read_text())
    assert document["metadata"]["input_type"] == "markdown" and document["passed"] is True
    tests = {t["name"]: t for t in document["tests"]}
    assert tests["ltv-model-setup"]["passed"] and tests["no-destructive-sql"]["passed"]
    setup = next(r for r in document["results"] if r["test_name"] == "ltv-model-setup")
    assert setup["user_interventions"] >= 1 and setup["tools_called"] == [
        "get_existing_connections"
    ]
    simulated = [h for h in setup["conversation_history"] if h.get("simulated")]
    assert (
        simulated and simulated[0]["role"] == "user" and "snowflake_prod" in simulated[0]["content"]
    )
    assert any(b["model"] == USER for b in api.message_requests)


def test_failed_concepts_fail_the_run(cli, api, tmp_path):
    api.responder = lambda body: reply(text("Profiles is great."))
    test = tmp_path / "t.md"
    test.write_text(
        "---\nname: t\ntype: knowledge\nconcepts: [identity stitching, entity vars]\n---\n"
        "# Prompt\nWhat does Profiles do?\n"
    )
    code, stdout, stderr = cli("--tests", str(test), "--server-module", str(EXAMPLE_SERVER))
    assert code == 1 and "FAIL" in stdout


def test_trigger_tests_need_a_skill(cli, api):
    code, stdout, stderr = cli("--tests", str(ROOT / "examples" / "triggers"))
    assert code == 2 and "a trigger test runs through Claude Code" in stderr and "--skill" in stderr


def test_the_simulated_users_tokens_count_in_the_cost(cli, api, tmp_path):
    api.responder = scripted
    out = tmp_path / "out.json"
    cli(
        "--tests",
        str(ROOT / "examples" / "tool_tests" / "ltv-model-setup.md"),
        "--server-module",
        str(EXAMPLE_SERVER),
        "-o",
        str(out),
    )
    [result] = json.loads(out.read_text())["results"]
    assert (
        result["simulated_user_model"] == USER
        and result["simulated_user_usage"]["output_tokens"] > 0
    )
    own = cost_usd(Usage(**result["usage"]), ASSISTANT)
    user = cost_usd(Usage(**result["simulated_user_usage"]), USER)
    assert abs(result["cost_usd"] - round(own + user, 6)) < 1e-6
