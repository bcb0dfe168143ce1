"""--interactive on a real pseudo-terminal: the evaluator runs as a child process (with the
bundled example server over stdio) against a scripted Anthropic API in this process; the test
types like a person would, then checks the screen and the results file."""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import pexpect
from conftest import ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use

PROMPT = "to finish)"  # the end of the "You (reply, or 'end' to finish) ›" prompt
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """`python evaluator.py ARGS` on a pseudo-terminal, with everything it printed kept."""

    def __init__(self, api: ScriptedAnthropic, *args: str) -> None:
        env = dict(os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url)
        env.pop("NO_COLOR", None)
        self.screen = io.StringIO()
        self.child = pexpect.spawn(
            sys.executable,
            [str(ROOT / "evaluator.py"), *args],
            env=env,
            cwd=str(ROOT),
            encoding="utf-8",
            timeout=180,  # a bound for a loaded 2-core machine, not a timing: a hang still fails
            dimensions=(50, 120),
        )
        self.child.logfile_read = self.screen

    def wait_for_prompt(self) -> None:
        self.child.expect_exact(PROMPT)

    def type(self, line: str) -> None:
        self.wait_for_prompt()
        self.child.sendline(line)

    def finish(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        return self.child.exitstatus

    @property
    def text(self) -> str:
        return ANSI.sub("", self.screen.getvalue()).replace("\r\n", "\n")


def results(path: Path) -> list[dict]:
    return json.loads(path.read_text())["results"]


def test_reply_then_end(api, tmp_path):
    api.push(
        reply(text("Let me check your connections."), tool_use("get_existing_connections")),
        reply(
            text("You have snowflake_prod and bigquery_staging. Which one should the project use?")
        ),
        reply(
            text("The project will use snowflake_prod. Would you like me to add an LTV model too?")
        ),
    )
    out = tmp_path / "out.json"
    terminal = Terminal(
        api, "-q", "Help me set up a profiles project", "--interactive", "-o", str(out)
    )
    terminal.type("snowflake_prod")
    terminal.type("end")
    assert terminal.finish() == 0

    screen = terminal.text
    assert "You\nHelp me set up a profiles project" in screen
    assert "Claude\nLet me check your connections." in screen
    assert "⚙ get_existing_connections {}" in screen and "↳ 3 connections configured" in screen
    assert re.search(r"turn 1/10 · [\d,]+ tokens · \$\d+\.\d{4}", screen)
    assert "Which one should the project use?\nturn 2/10" in screen
    assert "› snowflake_prod\nClaude\nThe project will use snowflake_prod." in screen
    assert "› end\nended by user_end · 1 user reply" in screen

    [result] = results(out)
    assert result["ended_by"] == "user_end" and result["user_interventions"] == 1
    assert result["tools_called"] == ["get_existing_connections"]
    assert [h["role"] for h in result["conversation_history"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert result["conversation_history"][4] == {
        "role": "user",
        "content": "snowflake_prod",
        "has_tools": False,
        "simulated": False,
    }
    assert json.loads(out.read_text())["metadata"]["mode"] == "interactive"
    assert all(body.get("stream") is True for body in api.message_requests), (
        "Claude's text streams to the screen"
    )
    assert api.message_requests[-1]["messages"][-1] == {"role": "user", "content": "snowflake_prod"}


def test_ctrl_d_ends_one_conversation_and_the_next_iteration_starts(api, tmp_path):
    api.push(reply(text("Which warehouse do you use?")), reply(text("Which warehouse do you use?")))
    out = tmp_path / "out.json"
    terminal = Terminal(api, "-q", "Set up a project", "--interactive", "-i", "2", "-o", str(out))
    terminal.wait_for_prompt()
    terminal.child.sendeof()
    terminal.type("end")
    assert terminal.finish() == 0
    assert [(r["iteration"], r["ended_by"], r["user_interventions"]) for r in results(out)] == [
        (1, "user_end", 0),
        (2, "user_end", 0),
    ]
    assert terminal.text.count("query · iteration") == 2


def test_a_conversation_file_that_ends_with_an_answer_asks_first(api, tmp_path):
    api.push(reply(text("January: 249.00 USD, March: 59.00 USD, April: 134.20 USD.")))
    out = tmp_path / "out.json"
    terminal = Terminal(
        api, "-c", str(ROOT / "examples" / "test_conv.md"), "--interactive", "-o", str(out)
    )
    terminal.type("By month, please.")
    assert terminal.finish() == 0
    screen = terminal.text
    assert screen.index("Which warehouse connections do I have") < screen.index(
        "for a total of 442.20 USD"
    )
    assert screen.index("for a total of 442.20 USD") < screen.index(PROMPT)
    [result] = results(out)
    assert result["ended_by"] == "completion" and result["user_interventions"] == 1
    assert [m["role"] for m in api.message_requests[0]["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_ctrl_c_at_the_prompt_keeps_the_results_so_far(api, tmp_path):
    api.push(
        reply(text("Which connection should I use?")),
        reply(text("Done: snowflake_prod it is.")),
        reply(text("Let me look."), tool_use("about_profiles")),
        reply(text("Which warehouse?")),
    )
    out = tmp_path / "out.json"
    terminal = Terminal(api, "-q", "Set up a project", "--interactive", "-i", "3", "-o", str(out))
    terminal.type("snowflake_prod")
    terminal.wait_for_prompt()
    terminal.child.sendintr()
    assert terminal.finish() == 130
    assert "interrupted: keeping 2 run(s)" in terminal.text
    assert "Traceback" not in terminal.text
    first, partial = results(out)
    assert (first["ended_by"], first["error"], first["user_interventions"]) == (
        "completion",
        None,
        1,
    )
    assert (partial["ended_by"], partial["error"]) == ("error", "interrupted")
    assert (
        partial["tools_called"] == ["about_profiles"]
        and partial["agent_reasoning"] == "Which warehouse?"
    )


def test_ctrl_c_while_claude_is_thinking(api, tmp_path):
    api.push({"hang": 20})
    out = tmp_path / "out.json"
    terminal = Terminal(
        api, "-c", str(ROOT / "examples" / "sample_conv.md"), "--interactive", "-o", str(out)
    )
    terminal.child.expect_exact("Let's focus on customer LTV modeling")
    while not api.message_requests:  # the model call is under way
        terminal.child.expect([pexpect.TIMEOUT], timeout=0.1)
    terminal.child.sendintr()
    assert terminal.finish() == 130
    [partial] = results(out)
    assert (partial["ended_by"], partial["error"], partial["model_calls"]) == (
        "error",
        "interrupted",
        0,
    )
    assert json.loads(out.read_text())["metadata"]["input_type"] == "conversation"
