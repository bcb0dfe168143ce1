"""Writes the hostile corpus next to this file: `python tests/hostile/make_corpus.py`.

The files hold raw control characters on purpose, so they are generated from the readable
escapes below rather than edited by hand. See README.md for what each file is for."""

from __future__ import annotations

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

MARKUP = "[/x] [bold red]not bold[/] [link=http://evil.example]rich link[/link] [/]"
ANSI = "\x1b[2J\x1b[H\x1b[31mred\x1b[0m \x1bc"
OSC = (
    "\x1b]0;PWNED-TITLE\x07 \x1b]52;c;cHduZWQ=\x07 "
    "\x1b]8;;http://evil.example/\x1b\\osc link\x1b]8;;\x1b\\"
)
CONTROLS = "\x01\x08\x0b\x0c\x7f\x85\x9b[31m\x9d0;C1-TITLE\x9c \u202eevil-bidi\u202c"
# the same without the characters str.splitlines() breaks at (\x0b \x0c \x85), for one-line items
INLINE_CONTROLS = "\x01\x07\x08\x7f\x9b[31m\x9d0;C1-TITLE\x9c \u202eevil-bidi\u202c"
NONCHAR = "\ufffe"
HTML = "<script>alert(1)</script><img src=x onerror=alert(2)>"
TABLE = "a|b || c \\| d"
TICKS = "`tick` ``double`` ```fence"
BACKSLASH = "back\\slash\\"
EVERYTHING = " ".join([MARKUP, ANSI, OSC, CONTROLS, NONCHAR, HTML, TABLE, TICKS, BACKSLASH])
LINES = "line one\nline two\r\nline three"

# What the scripted model answers, what the hostile server's tool returns, what it writes to
# stderr (at start, and when its crash tool kills it).
ANSWER = f"Here is your answer {EVERYTHING}\n{LINES}\nIs that what you wanted?"
TOOL_OUTPUT = f"tool output {EVERYTHING}\n{LINES}"
SERVER_STDERR = f"server stderr {EVERYTHING} {LINES}"
# A tool name the scripted model calls: no server has it, so it comes back in failure reasons.
BAD_TOOL_NAME = f"bad[/x]tool{OSC}<script>|`"

# CSV suite: each name starts with a formula prefix, each prompt holds a marker the scripted
# model acts on (TOOL: call the hostile tool, CRASH: call the tool that kills the server with
# hostile stderr, BADNAME: call BAD_TOOL_NAME, anything else: answer with ANSWER).
SUITE = [
    {
        "test_name": f'=HYPERLINK("http://evil.example","x") {MARKUP} {ANSI}',
        "user_prompt": f"+TOOL {OSC} {LINES}",
        "expected_tools": "hostile_output",
    },
    {
        "test_name": f"@SUM(1) {HTML} {TABLE} {TICKS} {BACKSLASH}",
        "user_prompt": f"-CRASH {CONTROLS} {NONCHAR}",
        "expected_tools": "hostile_output",
    },
    {
        "test_name": f"-2+3 {LINES} {CONTROLS} {NONCHAR}",
        "user_prompt": f"\t=1+1 BADNAME {HTML}",
        "expect_no_tools": "true",
    },
    {
        "test_name": f"+plus {OSC}",
        "user_prompt": f"@ANSWER {MARKUP} {TICKS}",
        "expect_no_tools": "true",
    },
    {
        "test_name": f"\t=tab first {MARKUP}",
        "user_prompt": f"\r=ANSWER {TABLE}",
        "expect_no_tools": "true",
    },
]

KNOWLEDGE_TEST = f"""---
name: {json.dumps(" ".join(["knowledge", MARKUP, OSC, CONTROLS, NONCHAR, HTML, TABLE, TICKS]))}
type: knowledge
---

# Prompt

ANSWER this {EVERYTHING}

# Expected

- [ ] Here is your answer
- [ ] {HTML} {TABLE} {TICKS} concept never said
"""

TRIGGER = f"""---
name: hostile-trigger
type: trigger
skill: warehouse-sql
---

# Positive Triggers

- "=SQL {MARKUP} {OSC} {HTML} {TABLE} {TICKS}"
- "@write SQL {INLINE_CONTROLS} {NONCHAR} {ANSI} {BACKSLASH}"

# Negative Triggers

- "-a joke {MARKUP} {OSC} {HTML}"
"""


def main() -> None:
    (HERE / "answer.txt").write_text(ANSWER, encoding="utf-8", newline="")
    (HERE / "tool_output.txt").write_text(TOOL_OUTPUT, encoding="utf-8", newline="")
    (HERE / "server_stderr.txt").write_text(SERVER_STDERR, encoding="utf-8", newline="")
    (HERE / "bad_tool_name.txt").write_text(BAD_TOOL_NAME, encoding="utf-8", newline="")
    with open(HERE / "suite.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(
            handle, ["test_name", "user_prompt", "expected_tools", "expect_no_tools"]
        )
        writer.writeheader()
        writer.writerows(SUITE)
    (HERE / "tests" / "knowledge.md").write_text(KNOWLEDGE_TEST, encoding="utf-8", newline="")
    (HERE / "trigger.md").write_text(TRIGGER, encoding="utf-8", newline="")


if __name__ == "__main__":
    main()
