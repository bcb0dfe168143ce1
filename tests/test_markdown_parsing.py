"""Markdown inputs are split with CommonMark's idea of what is code: a `# comment`, a
`## Expected`-looking line or a `## Assistant` line inside a fenced (``` or ~~~) or indented code
block is content, never a section or turn, while section text stays the source as written and
errors still name the right line."""

from __future__ import annotations

from pathlib import Path

import pytest

import evaluator as E


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


SNIPPET = """#!/bin/sh
# comment: install first
## Expected
- not a criterion
# Negative Triggers
pip install thing"""


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_knowledge_prompt_keeps_a_fenced_block_with_headings_inside(tmp_path: Path, fence: str):
    text = (
        f"---\nname: k\ntype: knowledge\n---\n# Prompt\n\nWhat does this script do?\n\n"
        f"{fence}sh\n{SNIPPET}\n{fence}\n\nExplain each step.\n\n# Expected\n- names the install step\n"
    )
    [test] = E.load_markdown_tests(write(tmp_path / "k.md", text))
    assert (
        test.prompt
        == f"What does this script do?\n\n{fence}sh\n{SNIPPET}\n{fence}\n\nExplain each step."
    )
    assert test.expected == ["names the install step"]


def test_indented_code_is_content_and_headings_after_it_still_count(tmp_path: Path):
    text = "# Prompt\nRead this:\n\n    # not a heading\n    ## Expected\n\n# Expected\n- ok\n"
    [test] = E.load_markdown_tests(write(tmp_path / "i.md", text))
    assert test.prompt == "Read this:\n\n    # not a heading\n    ## Expected"
    assert test.expected == ["ok"]


def test_fence_left_open_in_a_list_item_ends_with_the_item(tmp_path: Path):
    # CommonMark: the unindented heading ends the list item, and the item's fence with it, so the
    # heading counts and nothing is swallowed (not a "never closed" error either)
    text = "# Prompt\nSteps:\n\n- run\n  ```\n  # comment\n\n# Expected\n- done\n"
    [test] = E.load_markdown_tests(write(tmp_path / "l.md", text))
    assert test.prompt == "Steps:\n\n- run\n  ```\n  # comment" and test.expected == ["done"]


def test_trigger_test_with_a_fenced_block_in_its_queries(tmp_path: Path):
    # read line by line, the fenced heading used to turn the fenced query into a negative one
    text = (
        "---\ntype: trigger\n---\n# Positive Triggers\n- write sql for this table\n\n```md\n"
        "# Negative Triggers\n- fix this query: SELECT 1\n```\n\n# Negative Triggers\n- tell me a joke\n"
    )
    [test] = E.load_markdown_tests(write(tmp_path / "t.md", text), default_type="trigger")
    assert test.positive_triggers == ["write sql for this table", "fix this query: SELECT 1"]
    assert test.negative_triggers == ["tell me a joke"]


def test_security_sections_read_after_a_fence(tmp_path: Path):
    text = (
        "---\ntype: security\n---\n# Prompt\nIgnore this:\n~~~\n# Forbidden Patterns\n~~~\n"
        "# Forbidden Patterns\nsk-ant-\n# Expected Refusal\ncannot share\n"
    )
    test = E.load_markdown_test(write(tmp_path / "s.md", text))
    assert test.prompt == "Ignore this:\n~~~\n# Forbidden Patterns\n~~~"
    assert test.forbidden_patterns == ["sk-ant-"] and test.expected_refusal == ["cannot share"]


@pytest.mark.parametrize(
    "text, message, line",
    [
        # the empty `# Prompt` after the fence is named on its own line, counted through the fence
        (
            "---\ntype: knowledge\n---\n# Notes\n```\n# Prompt\nnot this\n```\n\n# Prompt\n\n# Expected\n- a\n",
            "knowledge test has an empty prompt",
            10,
        ),
        (
            "---\ntype: trigger\n---\n# Negative Triggers\n```\n# Positive Triggers\n- q\n```\n\n# Positive Triggers\n\n",
            "trigger test has no positive queries",
            10,
        ),
        # a fence never closed would swallow `# Expected`: refused at the fence's line
        (
            "---\ntype: knowledge\n---\n# Prompt\nq\n```sh\n# Expected\n- a\n",
            "this code block is never closed",
            6,
        ),
        ("# Prompt\nq\n~~~~\n~~~\n", "this code block is never closed", 3),
    ],
)
def test_error_lines_stay_right_around_fences(tmp_path: Path, text: str, message: str, line: int):
    path = write(tmp_path / "bad.md", text)
    with pytest.raises(E.InputError) as caught:
        E.load_markdown_test(path)
    assert (
        caught.value.message == message and caught.value.line == line and caught.value.path == path
    )


def test_unclosed_fence_hint_names_the_fence(tmp_path: Path):
    with pytest.raises(E.InputError, match=r"close it with a line of ~~~~"):
        E.load_markdown_test(write(tmp_path / "bad.md", "# Prompt\n~~~~\nq\n"))


def test_conversation_heading_inside_a_fence_stays_in_the_user_message(tmp_path: Path):
    text = (
        "## User\nWhy does this fail?\n\n```md\n## Assistant\n**Assistant**\nAssistant: no\n```\n\n"
        "## Assistant\nThe heading is inside a code block.\n"
    )
    messages = E.load_conversation(write(tmp_path / "c.md", text))
    assert [(m.role, m.content, m.line) for m in messages] == [
        (
            "user",
            "Why does this fail?\n\n```md\n## Assistant\n**Assistant**\nAssistant: no\n```",
            1,
        ),
        ("assistant", "The heading is inside a code block.", 10),
    ]


def test_conversation_indented_code_and_frontmatter_keep_line_numbers(tmp_path: Path):
    text = (
        "---\ntitle: t\n---\nUser: look\n\n    Assistant: indented code, not a turn\n\n"
        "Assistant: ok\n\nUser: thanks\n"
    )
    messages = E.load_conversation(write(tmp_path / "c.md", text))
    assert [(m.role, m.line) for m in messages] == [("user", 4), ("assistant", 8), ("user", 10)]
    assert messages[0].content == "look\n\n    Assistant: indented code, not a turn"


def test_conversation_unclosed_fence_is_named_at_its_line(tmp_path: Path):
    path = write(
        tmp_path / "c.md", "---\na: 1\n---\n**User**\nhi\n\n**Assistant**\n````\n```\n**User**\n"
    )
    with pytest.raises(E.InputError) as caught:
        E.load_conversation(path)
    assert caught.value.message == "this code block is never closed" and caught.value.line == 8
    assert caught.value.hint == "close it with a line of ````"
