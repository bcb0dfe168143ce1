"""Text sinks: every text from outside is escaped for where it goes (JSON, CSV, markdown, the
terminal, XML, GitHub workflow commands), and the console every mode prints to.

May import: errors, stopping."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

import test_constants as C

__all__ = [
    "HIDDEN",
    "HIDDEN_CHARACTERS",
    "HIDDEN_UNSAFE",
    "cap_text",
    "csv_cell",
    "escape_markup",
    "hidden_shown",
    "json_text",
    "line_of",
    "make_console",
    "markdown_cell",
    "on_github_actions",
    "one_line",
    "preview",
    "safe_name",
    "tail",
    "terminal_text",
    "visible_escapes",
    "workflow_command",
    "workflow_data",
    "workflow_property",
    "workspace_path",
    "wrote_line",
    "xml_text",
]


def safe_name(name: str) -> str:
    """A server name usable inside an Anthropic tool name (`^[a-zA-Z0-9_-]{1,128}$`)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name).strip("_")[:40]


def line_of(raw: str, needle: str) -> int | None:
    index = raw.find(needle)
    return raw.count("\n", 0, index) + 1 if index >= 0 else None


def tail(text: str, limit: int = C.STDERR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def cap_text(text: str, limit: int) -> str:
    """Keeps huge tool results from eating memory and tokens; says how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n...[truncated {len(text) - limit} of {len(text)} characters]"


def one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# Characters that show as nothing, or reorder what is shown, while a model reads them: tag
# characters (U+E0000-U+E007F: each of U+E0020-U+E007E mirrors a printable ASCII character, so a
# whole sentence can hide in a tool description, "ASCII smuggling"), zero-width spaces, joiners
# and invisible operators (U+200B-U+200D, U+2060-U+2064, U+FEFF), bidi embeddings, overrides,
# isolates and marks (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) and other blanks
# (U+00AD, U+034F, U+115F, U+1160, U+180E, U+3164, U+FFA0). Every sink below shows them as
# visible escapes (`\u200b`, `\U000e0041`): a poisoned description never looks clean in a report.
HIDDEN_CHARACTERS = {
    "tag": "\U000e0000-\U000e007f",
    "zero-width": "\u200b-\u200d\u2060-\u2064\ufeff",
    "bidi": "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069",
    "blank": "\u00ad\u034f\u115f\u1160\u180e\u3164\uffa0",
}


HIDDEN = "".join(HIDDEN_CHARACTERS.values())  # a character class's body: every one of them


HIDDEN_UNSAFE = re.compile(f"[{HIDDEN}]")


# The JSON sink: JSON escapes C0 controls itself; what it leaves raw with ensure_ascii=False
# (DEL, C1 controls, line separators, hidden characters, lone surrogates) is written as \uXXXX
# too (a surrogate pair above U+FFFF), so `--json` on a terminal carries no escape sequence, a
# hidden character shows, and the file always encodes as UTF-8.
_JSON_UNSAFE = re.compile(f"[\\x7f-\\x9f\\u2028\\u2029{HIDDEN}\\ud800-\\udfff]")


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(value: Any, indent: int | None = 2) -> str:
    return _JSON_UNSAFE.sub(
        lambda m: _json_escape(m.group()), json.dumps(value, indent=indent, ensure_ascii=False)
    )


def visible_escapes(text: str, unsafe: re.Pattern) -> str:
    return unsafe.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def hidden_shown(value: Any) -> Any:
    """JSON-like data with every hidden character of its texts (keys too) written as a visible
    escape: what the HTML page is given, since the page shows text as it is (textContent)."""
    if isinstance(value, str):
        return visible_escapes(value, HIDDEN_UNSAFE)
    if isinstance(value, list | tuple):
        return [hidden_shown(v) for v in value]
    if isinstance(value, dict):
        return {hidden_shown(k): hidden_shown(v) for k, v in value.items()}
    return value


# The CSV sink: a text cell a spreadsheet would read as a formula (= + - @, or a tab or carriage
# return before one) starts with an apostrophe, as OWASP recommends; control characters (ESC,
# NUL, C1), hidden characters, line separators and lone surrogates are shown escaped (`\x1b`), as
# in every other sink; tabs and line breaks stay (the CSV quoting keeps them).
_CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


_CSV_UNSAFE = re.compile(
    f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\\u2028\\u2029{HIDDEN}\\ud800-\\udfff]"
)


def csv_cell(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    value = visible_escapes(value, _CSV_UNSAFE)
    return "'" + value if value.startswith(_CSV_FORMULA_START) else value


# The XML sink: characters XML 1.0 forbids (C0 controls but tab and line breaks, lone surrogates,
# U+FFFE, U+FFFF), the C1 controls it discourages, and hidden characters and line separators
# (which hide, reorder or break what a CI page shows) are written as visible escapes (`\x1b`).
_XML_UNSAFE = re.compile(
    f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029{HIDDEN}\\ud800-\\udfff\\ufffe\\uffff]"
)


def xml_text(text: Any) -> str:
    return visible_escapes(str(text), _XML_UNSAFE)


# The markdown sink: data goes into a report only through `markdown_cell`. One line (line breaks
# flattened, control characters shown escaped), `|` escaped as GFM wants, no HTML (`<script>` is
# `&lt;script&gt;`), no code span or link it could end or open (backtick, backslash and
# brackets as entities), no @-mention (see MENTION). Only text of plain identifier characters is
# shown as `code`.
_MARKDOWN_ESCAPES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "|": "\\|",
    "`": "&#96;",
    "\\": "&#92;",
    "[": "&#91;",
    "]": "&#93;",
}


_MARKDOWN_UNSAFE = re.compile("[" + re.escape("".join(_MARKDOWN_ESCAPES)) + "]")


_MARKDOWN_CODE_SAFE = re.compile(r"[\w.:/@+=(){},' -]+")


# GitHub notifies whoever markdown names outside code (`@user`, `@org/team`, after anything but a
# letter, digit or `_`): in the markdown sink a mention in data is shown as code, which names
# nobody, so a pull-request comment (or a report someone pastes into one) never pings anyone.
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][\w-]*)?")


_TERMINAL_BLOCK_UNSAFE = re.compile(
    f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029{HIDDEN}\\ud800-\\udfff]"
)


# Every sink escapes what it did not write. Text from outside (names, prompts, answers, tool
# output, server stderr) reaches the terminal only through `terminal_text` (printed with
# markup=False) or `escape_markup` (inside our own Rich markup): control characters, escape
# sequences (OSC title/clipboard/links, clear screen, CSI), hidden characters (bidi overrides,
# zero-width and tag characters) and lone surrogates are shown as visible escapes (`\x1b`,
# `\u202e`, `\u200b`), never sent raw, and data is never markup.
_TERMINAL_LINE_UNSAFE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029{HIDDEN}\\ud800-\\udfff]")


def _visible_text(text: Any, multiline: bool = False) -> str:
    """Text with every control and hidden character shown as a visible escape: one line, or with
    `multiline` a block that keeps its line breaks and tabs. What every sink starts from."""
    text = str(text)
    if multiline:
        return visible_escapes(text.replace("\r\n", "\n"), _TERMINAL_BLOCK_UNSAFE)
    return visible_escapes(text, _TERMINAL_LINE_UNSAFE)


# The GitHub Actions log: the runner reads a line of a step's stdout or stderr as a workflow
# command when it starts with `::` (after blanks), and reads the legacy `##[command]` form
# anywhere on a line. A line the console wraps may start anywhere in the data, and data may end
# where our text starts one, so on GitHub Actions no `::` and no `##[` of data reaches the log:
# the first character of each is shown as a visible escape (`\x3a:`, `\x23#[`).
_WORKFLOW_COMMAND_STARTS = re.compile(r":(?=:)|#(?=#\[)")


def _workflow_inert(text: str) -> str:
    return _WORKFLOW_COMMAND_STARTS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def on_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def terminal_text(text: Any, multiline: bool = False) -> str:
    """The terminal sink for plain text (print it with markup=False): visible_text, and on GitHub
    Actions nothing the runner would read as a workflow command (see WORKFLOW_COMMAND_STARTS)."""
    shown = _visible_text(text, multiline)
    return _workflow_inert(shown) if on_github_actions() else shown


def wrote_line(path: Any) -> str:
    """What a mode prints for each file it writes."""
    return f"wrote {terminal_text(path)}"


def markdown_cell(text: Any, limit: int | None = 80, code: bool = False) -> str:
    """Data as one markdown table cell (or heading, or list item): see MARKDOWN_ESCAPES."""
    text = _visible_text(" ".join(str(text).split()))
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    if code and _MARKDOWN_CODE_SAFE.fullmatch(text):
        return f"`{text}`"
    text = _MARKDOWN_UNSAFE.sub(lambda m: _MARKDOWN_ESCAPES[m.group()], text)
    return _MENTION.sub(lambda m: f"`{m.group()}`", text)


def escape_markup(text: Any) -> str:
    """The terminal sink for data placed inside our own Rich markup: one line, control
    characters shown escaped, and no `[...]` of the data read as a tag."""
    from rich.markup import escape

    return escape(terminal_text(text))


def workflow_data(text: Any) -> str:
    """The GitHub Actions sink (a workflow command's message, `::error ...::MESSAGE`): `%`, CR and
    LF escaped as GitHub documents, so no text from outside ends the line and starts a command of
    its own; control characters are shown escaped, as on the terminal."""
    lines = [_visible_text(line) for line in str(text).replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: Any) -> str:
    """A workflow command's property value (`file=`, `title=`): `:` and `,` escaped too, which
    would end it."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: Any, **properties: Any) -> str:
    """`::command key=value,...::message`, every value escaped; empty properties left out."""
    given = ",".join(
        f"{key}={workflow_property(value)}" for key, value in properties.items() if value
    )
    return f"::{command}{' ' + given if given else ''}::{workflow_data(message)}"


def make_console(stderr: bool = False) -> Console:
    """Where our lines go: a terminal at its own width; anything else (CI logs, pipes, files) at
    LOG_WIDTH columns, so a long reason or path is not wrapped over a dozen lines."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else max(C.LOG_WIDTH, shutil.get_terminal_size().columns)
    return Console(stderr=stderr, emoji=False, width=width)


def preview(text: str, limit: int = C.TOOL_RESULT_PREVIEW_CHARS) -> str:
    """One line of at most `limit` characters: enough to see what a tool answered."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# What a step tells GitHub Actions: workflow commands on its output (`::error file=F,line=N::`
# puts a failing case on its suite's line, in the log and on the pull request's diff), markdown
# appended to $GITHUB_STEP_SUMMARY (the job's summary page) and `name=value` lines appended to
# $GITHUB_OUTPUT (the step's outputs). Each is one sink of GITHUB_SINKS, which write_outputs and
# write_comparisons run when the environment names it; the --pr-comment writer (registered with
# the others) writes the body a workflow posts on the pull request (action.yml does).
def workspace_path(source: str) -> str:
    """A case's file as GitHub names it: relative to the checkout ($GITHUB_WORKSPACE, else the
    working folder), with forward slashes; a file outside it keeps its absolute path."""
    root = Path(os.environ.get("GITHUB_WORKSPACE") or ".").resolve()
    path = Path(source).resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()
