"""Conversation files: markdown transcripts (**User** blocks, ## headings, User: lines) to the
history of a TestCase.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, the loaders above it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..files import read_text_file
from ..run_types import PriorMessage, TestCase
from .skills import markdown_code_lines

__all__ = [
    "conversation_case",
    "load_conversation",
]

# A turn header is a line of its own. The first header in a file fixes the file's style, and
# only headers of that style start turns afterwards: a "User: 42" line inside an answer of a
# `**User**` file is content, not a new turn.
_TURN_HEADER_STYLES = {
    # `**User**` alone, or `**User:** text` / `**User**: text`; never `**User** management ...`
    "bold": re.compile(
        r"\*\*(user|assistant)(?:\*\*|:\*\*[ \t]*(.*)|\*\*[ \t]*:[ \t]*(.*))", re.IGNORECASE
    ),
    "heading": re.compile(r"#{1,6}[ \t]+(user|assistant)[ \t]*:?[ \t]*#*[ \t]*$", re.IGNORECASE),
    "prefix": re.compile(r"(user|assistant)[ \t]*:[ \t]*(.*)", re.IGNORECASE),
}


_THEMATIC_BREAK = re.compile(r"[ ]{0,3}([-*_])([ \t]*\1){2,}[ \t]*")


@dataclass
class _TurnHeader:
    style: str
    role: str
    rest: str  # text after the header on the same line (`User: hi`)


def _parse_turn_header(line: str, style: str | None) -> _TurnHeader | None:
    styles = [style] if style else list(_TURN_HEADER_STYLES)
    for name in styles:
        match = _TURN_HEADER_STYLES[name].fullmatch(line.strip())
        if match:
            rest = next((g for g in match.groups()[1:] if g), "")
            return _TurnHeader(name, match.group(1).lower(), rest.strip())
    return None


def _skip_frontmatter(lines: list[str]) -> int:
    """Index of the first line after a leading YAML frontmatter block (0 when there is none)."""
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() == "---":
                return index + 1
    return 0


def _message_text(body: list[str]) -> str:
    """A message's text without surrounding blank lines or the rules that separate turns."""
    while body and (not body[-1].strip() or _THEMATIC_BREAK.fullmatch(body[-1])):
        body = body[:-1]
    return "\n".join(body).strip("\n").strip()


def _split_conversation_turns(lines: list[str], path: Path) -> list[PriorMessage]:
    """Headed blocks in file order; a header inside a fenced or indented code block is content
    (markdown-it decides what is code, and refuses a fence never closed), and text before the
    first header (a title, notes) belongs to no message."""
    turns: list[PriorMessage] = []
    body: list[str] = []
    style: str | None = None
    first = _skip_frontmatter(lines)
    # the frontmatter is not markdown: its `---` lines would read as rules or setext headings
    code = markdown_code_lines(lines[first:], path, first + 1)
    for index, line in enumerate(lines[first:]):
        header = None if index in code else _parse_turn_header(line, style)
        if header is None:
            if turns:  # text before the first header is a title or notes, not a message
                body.append(line)
            continue
        if turns:
            turns[-1].content = _message_text(body)
        style = header.style
        turns.append(PriorMessage(header.role, "", first + index + 1))
        body = [header.rest] if header.rest else []
    if turns:
        turns[-1].content = _message_text(body)
    return turns


def load_conversation(path: str | Path) -> list[PriorMessage]:
    """A conversation in markdown (seed 002's `**User**` / `**Assistant**` blocks, `## User`
    headings, or `User:` prefixes) as the messages to send as prior turns.

    Consecutive user messages are merged into one; the Messages API needs the conversation to
    start with the user and has no use for two assistant answers in a row, so those are errors."""
    path = Path(path)
    raw = read_text_file(path, "conversation file")
    turns = _split_conversation_turns(raw.splitlines(), path)
    if not turns:
        raise InputError(
            "no conversation turns found",
            path,
            1,
            "mark messages with **User** / **Assistant** lines, ## User / ## Assistant "
            "headings, or User: / Assistant: prefixes",
        )
    merged: list[PriorMessage] = []
    for turn in turns:
        label = turn.role.capitalize()
        if not turn.content:
            raise InputError(
                f"empty {label} message", path, turn.line, "write the message below its header"
            )
        if not merged and turn.role == "assistant":
            raise InputError(
                "the conversation starts with an Assistant message",
                path,
                turn.line,
                "the Messages API needs the user to speak first; add the User message before it",
            )
        if merged and merged[-1].role == turn.role == "assistant":
            raise InputError(
                f"two Assistant messages in a row (the previous one starts at line "
                f"{merged[-1].line})",
                path,
                turn.line,
                "add the User message between them, or merge them into one",
            )
        if merged and merged[-1].role == turn.role:
            merged[-1].content += "\n\n" + turn.content
            continue
        merged.append(turn)
    return merged


def conversation_case(path: str | Path, follow_up: str | None = None) -> TestCase:
    """A conversation file as a case: its last user message is the prompt and everything before
    it the prior history; a file that ends with Claude's answer has no prompt of its own.
    `follow_up` (-q next to -c) is one more user message after the file."""
    history = load_conversation(path)
    if follow_up and follow_up.strip():
        if history[-1].role == "user":
            history[-1].content += "\n\n" + follow_up.strip()
        else:
            history.append(PriorMessage("user", follow_up.strip()))
    prompt = history.pop().content if history[-1].role == "user" else ""
    return TestCase(name=Path(path).stem, prompt=prompt, history=history, source=str(path))
