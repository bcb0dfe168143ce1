"""Conversation files, the needs-input rule, the user seam (terminal and simulated) and the
live view. The loop tests use a scripted `ModelClient`; the simulated user runs end to end
through the real anthropic SDK against the scripted API server."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import os
from pathlib import Path

import pytest
from conftest import EXAMPLE_SERVER, ROOT, invoke
from fake_anthropic import reply, text, tool_use
from rich.console import Console

import test_constants as C
from claude_tool_evaluator.engine import (
    StdinLines,
    TerminalUser,
    needs_user_input,
    run_conversation,
)
from claude_tool_evaluator.hub.calls import McpHub
from claude_tool_evaluator.loaders.conversations import conversation_case
from claude_tool_evaluator.run_types import PriorMessage, RunSettings, ServerSpec, Transcript, Usage
from claude_tool_evaluator.run_types import (
    TestCase as Case,  # renamed so that pytest does not try to collect it
)
from claude_tool_evaluator.runners.tool_use import StartedTranscripts
from claude_tool_evaluator.session import ModelReply, ModelRequest
from claude_tool_evaluator.writers.terminal import LiveConversationView
from evaluator import InputError, load_conversation

USER_MODEL = C.DEFAULT_USER_MODEL
ASSISTANT_MODEL = C.DEFAULT_MODEL


def write(tmp_path: Path, content: str, name: str = "conv.md") -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


def roles(messages: list[PriorMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


# ----------------------------------------------------------------------------- the parser: accepted formats
def test_bold_headers_with_paragraphs_code_blocks_and_rules(tmp_path):
    path = write(
        tmp_path,
        """# Setting up profiles

Notes before the first header are not a message.

**User**
Help me set up a profiles project

**Assistant**  
I'll help. A project needs two files.

Here is one:

```yaml
**User**
User: inside a code block
## Assistant
```

---

**User:** Let's focus on LTV

**Assistant**: Sure.

**User**
Which tables?
""",  # noqa: W291 (the two spaces after **Assistant** are a markdown hard break)
    )
    messages = load_conversation(path)
    assert roles(messages) == [
        ("user", "Help me set up a profiles project"),
        (
            "assistant",
            "I'll help. A project needs two files.\n\nHere is one:\n\n```yaml\n**User**\n"
            "User: inside a code block\n## Assistant\n```",
        ),
        ("user", "Let's focus on LTV"),
        ("assistant", "Sure."),
        ("user", "Which tables?"),
    ]
    assert [m.line for m in messages] == [5, 8, 21, 23, 25]


def test_heading_headers(tmp_path):
    path = write(
        tmp_path,
        "## User\n\nHi there.\n\nSecond paragraph.\n\n### Assistant:\nHello.\n\n## user\nbye\n",
    )
    assert roles(load_conversation(path)) == [
        ("user", "Hi there.\n\nSecond paragraph."),
        ("assistant", "Hello."),
        ("user", "bye"),
    ]


def test_line_prefixes_with_continuation_lines(tmp_path):
    path = write(
        tmp_path,
        "User: Which connections do I have?\nPlease check.\n\n"
        "Assistant: Three of them.\n\n~~~\nUser: still code\n~~~\nUser: thanks\n",
    )
    assert roles(load_conversation(path)) == [
        ("user", "Which connections do I have?\nPlease check."),
        ("assistant", "Three of them.\n\n~~~\nUser: still code\n~~~"),
        ("user", "thanks"),
    ]


def test_the_first_header_fixes_the_style(tmp_path):
    path = write(
        tmp_path,
        "**User**\nWhat is my id?\n\n**Assistant**\nIt is below.\nUser: u_1001\n\n"
        "## User\nnot a header in a bold file\n",
    )
    assert roles(load_conversation(path)) == [
        ("user", "What is my id?"),
        ("assistant", "It is below.\nUser: u_1001\n\n## User\nnot a header in a bold file"),
    ]


def test_bold_text_that_merely_starts_with_a_role_is_content(tmp_path):
    path = write(tmp_path, "**User**\nhi\n\n**Assistant**\n**User** management is in settings.\n")
    assert roles(load_conversation(path))[-1] == (
        "assistant",
        "**User** management is in settings.",
    )


def test_frontmatter_longer_fences_and_merged_user_messages(tmp_path):
    path = write(
        tmp_path,
        "---\ntitle: x\n---\n**User**\nfirst\n\n**User**\nsecond\n\n**Assistant**\n"
        "````md\n```\n**User**\n```\n````\n",
    )
    messages = load_conversation(path)
    assert roles(messages) == [
        ("user", "first\n\nsecond"),
        ("assistant", "````md\n```\n**User**\n```\n````"),
    ]
    assert messages[0].line == 4


def test_bundled_examples_parse(tmp_path):
    sample = load_conversation(ROOT / "examples" / "sample_conv.md")
    other = load_conversation(ROOT / "examples" / "test_conv.md")
    assert [m.role for m in sample] == ["user", "assistant", "user"]
    assert "```yaml" in sample[1].content and "LTV" in sample[-1].content
    assert [m.role for m in other] == ["user", "assistant", "user", "assistant"]


def test_conversation_case_splits_off_the_last_user_message(tmp_path):
    case = conversation_case(ROOT / "examples" / "sample_conv.md")
    assert case.name == "sample_conv" and "LTV" in case.prompt
    assert [m.role for m in case.history] == ["user", "assistant"]
    ends_with_answer = conversation_case(ROOT / "examples" / "test_conv.md")
    assert ends_with_answer.prompt == "" and ends_with_answer.history[-1].role == "assistant"
    follow_up = conversation_case(ROOT / "examples" / "test_conv.md", "Break it down by month.")
    assert follow_up.prompt == "Break it down by month." and len(follow_up.history) == 4


# ----------------------------------------------------------------------------- the parser: malformed files
@pytest.mark.parametrize(
    "content, line, fragment",
    [
        ("", 1, "no conversation turns found"),
        ("Just some notes.\nNo headers here.\n", 1, "no conversation turns found"),
        ("**User**\nhi\n\n**Assistant**\n\n---\n\n**User**\nmore\n", 4, "empty Assistant message"),
        ("**User**\n\n**Assistant**\nhi\n", 1, "empty User message"),
        (
            "User: hi\nAssistant: one\n\nAssistant: two\n",
            4,
            "two Assistant messages in a row (the previous one starts at line 2)",
        ),
        (
            "# Title\n\n**Assistant**\nHello!\n\n**User**\nhi\n",
            3,
            "starts with an Assistant message",
        ),
        (
            "**User**\nhi\n\n**Assistant**\n```python\nprint(1)\n\n**User**\nlost\n",
            5,
            "code block is never closed",
        ),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, content, line, fragment):
    path = write(tmp_path, content)
    with pytest.raises(InputError) as caught:
        load_conversation(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert fragment in str(caught.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="cannot read conversation file"):
        load_conversation(tmp_path / "missing.md")
    binary = tmp_path / "binary.md"
    binary.write_bytes(b"**User**\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"conversation file is not valid UTF-8 \(byte 0xff\)"):
        load_conversation(binary)


def test_bad_file_on_the_command_line_is_one_line_and_exit_2(cli, tmp_path):
    path = write(tmp_path, "**User**\nhi\n**Assistant**\na\n**Assistant**\nb\n")
    result = cli("-c", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"error: {path}:5: two Assistant messages in a row (the previous one starts at line 3) "
        "(add the User message between them, or merge them into one)"
    ]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["-q", "hi", "--interactive", "--simulate-user", "goal"], "exclude each other"),
        (["-q", "hi", "--simulate-user", "  "], "--simulate-user needs a goal"),
        (
            ["-q", "hi", "--simulate-user", "goal", "--max-user-turns", "0"],
            "Invalid value for '--max-user-turns': 0 is not in the range x>=1",
        ),
    ],
)
def test_conflicting_conversation_options(cli, api, args, fragment):
    result = cli(*args)
    assert (
        result.exit_code == 2
        and fragment in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
    )


# ----------------------------------------------------------------------------- the needs-input rule
@pytest.mark.parametrize(
    "answer",
    [
        "Which warehouse are you using: Snowflake or BigQuery?",
        "I found two models.\n\nWhich one should I open?",
        "I can build that. Would you like me to include refunds as negative revenue.",
        "To continue, please provide the connection name.",
        "Here are your options:\n\n1. **Snowflake**\n2. **BigQuery**\n\n**Which do you prefer?**",
        "",
    ],
)
def test_questions_need_the_user(answer):
    assert needs_user_input(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "You have three connections: snowflake_prod, bigquery_staging and redshift_legacy.",
        "User u_1001 spent 442.20 USD over three orders.",
        "Is it possible? Yes: the orders table has one row per order, so a SUM works.",
    ],
)
def test_statements_do_not(answer):
    assert not needs_user_input(answer)


# ----------------------------------------------------------------------------- the loop with a scripted model
class ScriptedModel:
    """The engine's ModelClient seam, answering from a list; records what it was sent."""

    def __init__(self, *replies: list[dict]) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    async def complete(self, request, on_text=None) -> ModelReply:
        self.requests.append(copy.deepcopy(request))  # the engine keeps appending to its messages
        content = self.replies.pop(0)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        if on_text:
            for block in content:
                if block["type"] == "text":
                    on_text(block["text"])
        return ModelReply(content, stop, Usage(10, 5), request.model)


class ScriptedUser:
    """A user that answers from a list (None ends) and counts how often it was asked."""

    simulated = False

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def reply(self, transcript, assistant_text):
        self.asked.append(assistant_text)
        return self.answers.pop(0)


def example_hub() -> McpHub:
    return McpHub([ServerSpec(name="profiles", kind="module", module=str(EXAMPLE_SERVER))])


def converse(
    case: Case | str, model: ScriptedModel, user=None, observer=None, **settings
) -> Transcript:
    case = Case(name="t", prompt=case) if isinstance(case, str) else case

    async def go() -> Transcript:
        async with example_hub() as hub:
            return await run_conversation(
                case, model, hub, RunSettings(**settings), user=user, observer=observer
            )

    return asyncio.run(go())


def text_block(value: str) -> dict:
    return {"type": "text", "text": value}


def tool_block(name: str, arguments: dict | None = None, id: str = "toolu_1") -> dict:
    return {"type": "tool_use", "id": id, "name": name, "input": arguments or {}}


def test_a_question_prompts_the_user_and_the_reply_is_sent():
    model = ScriptedModel(
        [tool_block("get_existing_connections")],
        [text_block("You have three. Which one should the project use?")],
        [text_block("Done: the project uses snowflake_prod.")],
    )
    user = ScriptedUser("snowflake_prod")
    transcript = converse("Set up a project", model, user)
    assert user.asked == ["You have three. Which one should the project use?"]
    assert transcript.ended_by == "completion" and transcript.user_interventions == 1
    assert model.requests[-1].messages[-1] == {"role": "user", "content": "snowflake_prod"}
    assert [h.role for h in transcript.history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


def test_no_question_means_no_prompt():
    user = ScriptedUser()
    transcript = converse(
        "Which connections?", ScriptedModel([text_block("You have three connections.")]), user
    )
    assert (
        user.asked == []
        and transcript.ended_by == "completion"
        and transcript.user_interventions == 0
    )


def test_a_question_in_batch_mode_ends_as_needs_input():
    transcript = converse(
        "Set up a project", ScriptedModel([text_block("Which warehouse do you use?")])
    )
    assert transcript.ended_by == "needs_input" and transcript.model_calls == 1


def test_max_turns_stops_a_model_that_keeps_calling_tools():
    model = ScriptedModel(*[[tool_block("about_profiles", id=f"toolu_{i}")] for i in range(5)])
    transcript = converse("Tell me everything", model, ScriptedUser(), max_turns=2)
    assert (
        transcript.ended_by == "max_turns"
        and transcript.model_calls == 2
        and len(transcript.tool_calls) == 2
    )


def piped_stdin(data: bytes, close: bool = True) -> StdinLines:
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    if close:
        os.close(write_end)
    return StdinLines(read_end)


def terminal_user(data: bytes) -> tuple[TerminalUser, io.StringIO]:
    screen = io.StringIO()
    return TerminalUser(
        Console(file=screen, width=100, color_system=None), piped_stdin(data)
    ), screen


@pytest.mark.parametrize(
    "typed, ended_by, interventions",
    [
        (b"end\n", "user_end", 0),
        (b"", "user_end", 0),  # EOF (Ctrl-D)
        (b"\n  \nsnowflake_prod\nEND\n", "user_end", 1),  # blank lines ask again
    ],
)
def test_terminal_user_end_and_eof(typed, ended_by, interventions):
    model = ScriptedModel(
        [text_block("Which connection should I use?")],
        [text_block("Noted. Shall I create the project now?")],
    )
    user, screen = terminal_user(typed)
    transcript = converse("Set up a project", model, user)
    assert transcript.ended_by == ended_by and transcript.user_interventions == interventions
    assert "You (reply, or 'end' to finish) ›" in screen.getvalue()


def test_stdin_lines_keep_typed_ahead_lines_and_partial_last_line():
    lines = piped_stdin(b"one\ntwo\r\nthree")

    async def read_all():
        return [await lines.readline() for _ in range(4)]

    assert asyncio.run(read_all()) == ["one", "two", "three", None]


def test_history_ending_with_an_answer_is_the_final_state_in_batch_mode():
    case = conversation_case(ROOT / "examples" / "test_conv.md")
    model = ScriptedModel()
    transcript = converse(case, model)
    assert transcript.ended_by == "completion" and transcript.model_calls == 0
    assert transcript.final_text.startswith("I checked the orders table")


def test_history_ending_with_an_answer_asks_the_user_first():
    case = conversation_case(ROOT / "examples" / "test_conv.md")
    model = ScriptedModel([text_block("March: 59.00 USD; April: 134.20 USD; January: 249.00 USD.")])
    user = ScriptedUser("By month, please.")
    transcript = converse(case, model, user)
    assert user.asked[0].startswith("I checked the orders table")
    sent = model.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[-1]["content"] == "By month, please." and transcript.ended_by == "completion"


def test_ctrl_c_marks_the_partial_conversation_and_still_stops():
    class InterruptingUser(ScriptedUser):
        async def reply(self, transcript, assistant_text):
            raise KeyboardInterrupt

    started = StartedTranscripts()
    with pytest.raises(KeyboardInterrupt):
        converse(
            "Set up a project",
            ScriptedModel([text_block("Which warehouse?")]),
            InterruptingUser(),
            observer=started,
        )
    [partial] = started.transcripts
    assert (
        partial.ended_by == "error" and partial.error == "interrupted" and partial.model_calls == 1
    )


def test_live_view_shows_text_tool_calls_and_a_status_line():
    screen = io.StringIO()
    view = LiveConversationView(Console(file=screen, width=120, color_system=None), max_turns=10)
    model = ScriptedModel(
        [
            text_block("Let me look."),
            tool_block("run_sql_query", {"sql": "select count(*) from orders"}),
        ],
        [text_block("There are 9 orders.")],
    )
    transcript = converse("How many orders?", model, observer=view, stream=True)
    view.on_conversation_end(transcript)
    shown = screen.getvalue()
    assert "You\nHow many orders?" in shown and "Claude\nLet me look." in shown
    assert '⚙ run_sql_query {"sql": "select count(*) from orders"}' in shown
    assert "↳ " in shown and "9" in shown.split("↳ ")[1].splitlines()[0]
    assert "turn 1/10 ·" in shown and "turn 2/10 ·" in shown and "tokens · $" in shown
    assert "ended by completion · 0 user replies" in shown


# ----------------------------------------------------------------------------- the simulated user, end to end
def by_model(assistant: list[dict], user: list[dict]):
    """A responder for the scripted API: the model under test and the user model answer from
    their own scripts."""

    def respond(body: dict) -> dict:
        script = user if body["model"] == USER_MODEL else assistant
        assert script, f"no scripted answer left for {body['model']}"
        return script.pop(0)

    return respond


def run_simulated(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out.json"
    result = invoke(*args, "--server-module", EXAMPLE_SERVER, "-o", out)
    assert result.exit_code == 0, result.stderr
    return json.loads(out.read_text())


def requests_for(api, model: str) -> list[dict]:
    return [body for body in api.message_requests if body["model"] == model]


def test_simulated_user_answers_and_says_done(api, tmp_path):
    api.responder = by_model(
        assistant=[
            reply(tool_use("get_existing_connections")),
            reply(
                text(
                    "You have snowflake_prod and bigquery_staging. Which one should the LTV model use?"
                )
            ),
            reply(text("The LTV model on snowflake_prod is set up. Anything else you need?")),
        ],
        user=[reply(text("snowflake_prod, please.")), reply(text("DONE"))],
    )
    goal = "Set up an LTV model on the Snowflake production connection"
    document = run_simulated(tmp_path, "-q", "Help me build an LTV model", "--simulate-user", goal)
    [result] = document["results"]
    assert result["ended_by"] == "user_end" and result["user_interventions"] == 1
    simulated = [h for h in result["conversation_history"] if h.get("simulated")]
    assert simulated == [
        {
            "role": "user",
            "content": "snowflake_prod, please.",
            "has_tools": False,
            "simulated": True,
        }
    ]
    assert [h["role"] for h in result["conversation_history"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert document["metadata"]["simulated_user"] == {
        "goal": goal,
        "model": USER_MODEL,
        "max_user_turns": 5,
    }

    first_ask, second_ask = requests_for(api, USER_MODEL)
    assert goal in first_ask["system"][0]["text"] and "DONE" in first_ask["system"][0]["text"]
    assert "tools" not in first_ask
    seen = first_ask["messages"][0]["content"]
    assert (
        "<user>\nHelp me build an LTV model\n</user>" in seen
        and "Which one should the LTV model use?" in seen
    )
    assert "snowflake_prod [default]" not in seen, "the simulated user does not see tool results"
    assert "<user>\nsnowflake_prod, please.\n</user>" in second_ask["messages"][0]["content"]
    assert requests_for(api, ASSISTANT_MODEL)[-1]["messages"][-1] == {
        "role": "user",
        "content": "snowflake_prod, please.",
    }


def test_simulated_user_conversation_ends_by_completion(api, tmp_path):
    api.responder = by_model(
        assistant=[
            reply(text("Which connection: snowflake_prod or bigquery_staging?")),
            reply(text("Done: your LTV model reads from snowflake_prod.")),
        ],
        user=[reply(text("snowflake_prod"))],
    )
    [result] = run_simulated(
        tmp_path, "-q", "Build an LTV model", "--simulate-user", "LTV on Snowflake"
    )["results"]
    assert result["ended_by"] == "completion" and result["user_interventions"] == 1
    assert result["agent_reasoning"] == "Done: your LTV model reads from snowflake_prod."


def test_simulated_user_runs_out_of_turns(api, tmp_path):
    api.responder = by_model(
        assistant=[reply(text(f"Question {i}: which table?")) for i in range(3)],
        user=[reply(text("orders")), reply(text("still orders"))],
    )
    [result] = run_simulated(
        tmp_path, "-q", "Build an LTV model", "--simulate-user", "LTV", "--max-user-turns", "2"
    )["results"]
    assert result["ended_by"] == "max_turns" and result["user_interventions"] == 2
    assert len(requests_for(api, USER_MODEL)) == 2


def test_simulated_user_opens_the_conversation_and_continues_a_file(api, tmp_path):
    api.responder = by_model(
        assistant=[reply(text("u_1001 has 3 orders. Shall I list them?"))],
        user=[reply(text("How many orders does u_1001 have?")), reply(text("No thanks. DONE"))],
    )
    [opened] = run_simulated(
        tmp_path, "--simulate-user", "Count u_1001's orders", "--user-model", USER_MODEL
    )["results"]
    assert opened["conversation_history"][0] == {
        "role": "user",
        "content": "How many orders does u_1001 have?",
        "has_tools": False,
        "simulated": True,
    }
    assert opened["ended_by"] == "user_end" and opened["user_interventions"] == 1
    assert "has not started" in requests_for(api, USER_MODEL)[0]["messages"][0]["content"]

    api.requests.clear()
    api.responder = by_model(assistant=[], user=[reply(text("DONE"))])
    document = run_simulated(
        tmp_path, "-c", str(ROOT / "examples" / "test_conv.md"), "--simulate-user", "monthly split"
    )
    [continued] = document["results"]
    assert continued["ended_by"] == "user_end" and continued["model_calls"] == 0
    assert document["metadata"]["input_type"] == "conversation"
    assert (
        "<assistant>\nI checked the orders table"
        in requests_for(api, USER_MODEL)[0]["messages"][0]["content"]
    )


def test_conversation_file_in_batch_mode_sends_the_history(api, tmp_path):
    api.push(
        reply(text("I'll add total_revenue and order_count as entity_vars on the user entity."))
    )
    document = run_simulated(tmp_path, "-c", str(ROOT / "examples" / "sample_conv.md"))
    [result] = document["results"]
    sent = api.message_requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert (
        sent[0]["content"] == "Help me set up a profiles project" and "LTV" in sent[-1]["content"]
    )
    assert result["query"] == sent[-1]["content"] and result["ended_by"] == "completion"
    assert [h["role"] for h in result["conversation_history"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
