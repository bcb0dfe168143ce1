"""Every sink escapes what it did not write: the hostile corpus (tests/hostile/) through every
mode and every writer.

Names, prompts, answers, tool output, tool names and server stderr hold Rich markup, ANSI and OSC
escape sequences (window title, clipboard, links, clear screen), C0/C1 control characters, bidi
overrides, U+FFFE, `<script>`, `|`, line breaks, backticks and spreadsheet formula prefixes. Each
run is a real `python evaluator.py` (the skill mode with the real Claude Code CLI), against the
scripted Anthropic-compatible server and tests/servers/hostile_server.py. Checked: no crash,
every file parses (json, xml.etree, csv), the terminal capture holds no control character or
escape sequence, markdown tables keep their column counts and hold no HTML, CSV cells that
would be formulas start with an apostrophe, and Rich markup in data is shown, not applied.

The numbers in the test names are the items of the issue "Hostile text, signals and output
paths": 4 markup crashes, 5 terminal escape injection, 6 JUnit well-formedness, 12 the markdown
report, 13 CSV formula injection."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, Ran, spawn
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use, user_query
from rich.console import Console

import evaluator as E
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.claude_code import ClaudeCliSettings, claude_command, parse_stream_json
from claude_tool_evaluator.pipeline import ResultJournal
from claude_tool_evaluator.run_types import HistoryEntry, ToolCall, Transcript
from claude_tool_evaluator.sinks import (
    csv_cell,
    escape_markup,
    json_text,
    markdown_cell,
    terminal_text,
    xml_text,
)
from claude_tool_evaluator.writers.html import render_html
from claude_tool_evaluator.writers.terminal import (
    LiveConversationView,
    print_case_table,
    print_run_summary,
)

HOSTILE = ROOT / "tests" / "hostile"
SERVER_SCRIPT = ROOT / "tests" / "servers" / "hostile_server.py"
SERVER = ["--server", f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER_SCRIPT))}"]
SKILL = ROOT / "examples" / "skills" / "warehouse-sql"


def corpus(name: str) -> str:
    with open(HOSTILE / name, encoding="utf-8", newline="") as handle:
        return handle.read()


ANSWER = corpus("answer.txt")
BAD_TOOL_NAME = corpus("bad_tool_name.txt")

# What must never reach a terminal from data: C0 controls but tab and line feed (ESC, BEL, CR,
# backspace, ...), DEL, C1 controls (8-bit CSI, OSC, ST), bidi overrides and isolates.
RAW_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


# ----------------------------------------------------------------------------- the scripted model
def has_tool_result(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def skill_listed(body: dict) -> bool:
    return "warehouse-sql: Writes, explains and fixes SQL" in json.dumps(body.get("messages", []))


def hostile_model(body: dict) -> dict:
    """Acts on the marker in the prompt (see tests/hostile/make_corpus.py): TOOL calls the hostile
    tool, CRASH the tool that kills the server, BADNAME a tool with a hostile name; after a tool
    result, and for anything else, it answers with the hostile answer. Behind `claude -p` it uses
    the warehouse-sql skill for SQL questions."""
    if has_tool_result(body):
        return reply(text(ANSWER))
    query = user_query(body)
    last = (body.get("messages") or [{}])[-1].get("content")
    if skill_listed(body) and "sql" in query.lower():
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    if "CRASH" in query:
        return reply(tool_use("hostile_crash"))
    if "BADNAME" in query or (isinstance(last, str) and last.startswith("[/x] reply")):
        return reply(tool_use(BAD_TOOL_NAME), tool_use("hostile_output"))
    if "TOOL" in query:
        return reply(tool_use("hostile_output"))
    return reply(text(ANSWER))


# ----------------------------------------------------------------------------- running and checking
def run(
    api: ScriptedAnthropic,
    cwd: Path,
    *args: str,
    stdin: str | None = None,
    env: dict | None = None,
    timeout: float = 120,
) -> Ran:
    environment = env or dict(
        os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url, COLUMNS="160"
    )
    done = spawn(*args, cwd=cwd, env=environment, input=stdin, encoding="utf-8", timeout=timeout)
    assert "MarkupError" not in done.output, done.output
    return done


def assert_clean_terminal(done: Ran) -> str:
    """The terminal capture: no control character or escape sequence that came from data."""
    said = done.stdout + done.stderr
    raw = sorted(set(RAW_CONTROLS.findall(said)))
    assert not raw, f"raw control characters reached the terminal: {raw!r}"
    return said


WRITERS = (
    "-o",
    "out.json",
    "--report",
    "report.md",
    "--junit",
    "junit.xml",
    "--csv-out",
    "runs.csv",
)


def check_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def check_junit(path: Path) -> list[ET.Element]:
    cases = list(ET.parse(path).getroot().iter("testcase"))
    assert cases
    return cases


def check_csv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][0] == "test_name" and len(rows) > 1
    for row in rows:
        assert len(row) == len(rows[0])
        for cell in row:
            assert not cell.startswith(FORMULA_START), f"a formula cell: {cell!r}"
    return rows


def markdown_tables(report: str) -> list[list[str]]:
    tables, current = [], []
    for line in report.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def unescaped_pipes(row: str) -> int:
    return re.sub(r"\\\|", "", row).count("|")


def check_markdown(path: Path) -> str:
    """Every table keeps its column count (every row the header's number of `|`), backticks
    pair up in every row, and there is no HTML or control character from data."""
    report = path.read_text(encoding="utf-8")
    assert "<script" not in report.lower() and "<img" not in report.lower()
    assert not RAW_CONTROLS.findall(report.replace("\r\n", "\n"))
    tables = markdown_tables(report)
    assert tables
    for table in tables:
        columns = unescaped_pipes(table[0])
        assert re.fullmatch(r"\|(-*\|)+", table[1].replace(" ", "")), table[1]
        for row in table:
            assert unescaped_pipes(row) == columns, f"{row!r} breaks a {columns - 1}-column table"
            assert row.count("`") % 2 == 0, f"an unpaired backtick: {row!r}"
    return report


def check_writers(folder: Path) -> dict:
    document = check_json(folder / "out.json")
    check_junit(folder / "junit.xml")
    check_csv(folder / "runs.csv")
    check_markdown(folder / "report.md")
    return document


# ============================================================================= the CSV suite, once, every writer
# The tests that read the one CSV run run on one worker, so it runs once (`--dist loadgroup`).
CSV_RUN = pytest.mark.xdist_group("hostile-csv-run")


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-csv")
    with ScriptedAnthropic(responder=hostile_model) as api:
        # one at a time: the CRASH case kills the server under whatever else is running
        done = run(
            api,
            folder,
            "--csv",
            str(HOSTILE / "suite.csv"),
            *SERVER,
            "--concurrency",
            "1",
            *WRITERS,
        )
    return folder, done


@CSV_RUN
def test_csv_suite_runs_to_its_verdicts_through_every_writer(csv_run):
    folder, done = csv_run
    assert done.exit_code == 1, done.stdout + done.stderr  # two cases fail, as the corpus says
    document = check_writers(folder)
    names = [c["name"] for c in document["cases"]]
    assert [n.split()[0] for n in names] == [
        '=HYPERLINK("http://evil.example","x")',
        "@SUM(1)",
        "-2+3",
        "+plus",
        "=tab",
    ]
    assert {c["name"].split()[0]: c["passed"] for c in document["cases"]} == {
        '=HYPERLINK("http://evil.example","x")': True,
        "@SUM(1)": False,
        "-2+3": False,
        "+plus": True,
        "=tab": True,
    }
    # the data itself is kept as it was in the JSON: escaping is the sinks' business
    assert "\x1b]0;PWNED-TITLE\x07" in names[3]
    crash = document["cases"][1]
    assert any(
        "server stderr [/x]" in reason and "\x1b]52;c;" in reason for reason in crash["reasons"]
    )


def flat(said: str) -> str:
    """The capture without whitespace and table borders: a folded table cell reads as one."""
    return re.sub(r"[\s│┃]", "", said)


@CSV_RUN
def test_4_rich_markup_in_names_reasons_and_output_is_shown_not_applied(csv_run):
    _, done = csv_run
    said = flat(done.stdout + done.stderr)
    assert "MarkupError" not in said
    assert "=tabfirst[/x][boldred]notbold[/]" in said  # a name
    assert "serverstderr[/x][boldred]" in said  # a reason: a crashed server's stderr


@CSV_RUN
def test_5_terminal_capture_holds_no_escape_sequence_from_data(csv_run):
    _, done = csv_run
    assert_clean_terminal(done)
    said = flat(done.stdout + done.stderr)
    assert (
        "+plus\\x1b]0;PWNED-TITLE\\x07\\x1b]52;c;cHduZWQ=\\x07" in said
    )  # shown, as visible escapes
    assert "\\x9b[31m\\x9d0;C1-TITLE\\x9c\\u202eevil-bidi\\u202c" in said


@CSV_RUN
def test_6_junit_is_well_formed_and_keeps_the_text_visible(csv_run):
    folder, _ = csv_run
    cases = check_junit(folder / "junit.xml")
    names = [c.get("name") for c in cases]
    assert any("\\x1b]0;PWNED-TITLE\\x07" in n for n in names)
    assert any("\\ufffe" in n for n in names)
    out = "".join(c.findtext("system-out") or "" for c in cases)
    assert "\\x01" in out and "\\x0b" in out
    failures = "".join(
        (c.find("failure") if c.find("failure") is not None else c.find("error")).text or ""
        for c in cases
        if c.find("failure") is not None or c.find("error") is not None
    )
    assert "server stderr" in failures and "\\x1b" in failures


@CSV_RUN
def test_12_markdown_report_tables_hold_and_carry_no_html(csv_run):
    folder, _ = csv_run
    report = check_markdown(folder / "report.md")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    assert "a\\|b \\|\\| c &#92;\\| d" in report and "&#96;tick&#96;" in report
    assert "line one line two" in report  # line breaks flattened


@CSV_RUN
def test_13_csv_out_neutralises_formula_cells(csv_run):
    folder, _ = csv_run
    rows = check_csv(folder / "runs.csv")
    names = [row[0] for row in rows[1:]]
    assert [n[:2] for n in names] == ["'=", "'@", "'-", "'+", "'="]  # the loader strips the tab
    prompts = [row[2] for row in rows[1:]]
    assert [p[:2] for p in prompts] == ["'+", "'-", "'=", "'@", "'="]
    # the data stays readable, its escape sequences and bidi overrides shown, never raw
    assert "\\x1b]0;PWNED-TITLE\\x07" in names[3]
    raw = (folder / "runs.csv").read_text(encoding="utf-8")
    assert not RAW_CONTROLS.search(raw), RAW_CONTROLS.search(raw)


# ============================================================================= the other modes
def test_csv_suite_json_to_stdout_is_json_and_clean(tmp_path):
    with ScriptedAnthropic(responder=hostile_model) as api:
        done = run(
            api,
            tmp_path,
            "--csv",
            str(HOSTILE / "suite.csv"),
            *SERVER,
            "--concurrency",
            "1",
            "--json",
        )
    assert_clean_terminal(done)
    document = json.loads(done.stdout)
    assert any(
        "\x85" in c["name"] and "\u202e" in c["name"] for c in document["cases"]
    )  # escaped, not lost


def test_query_mode_prints_the_hostile_answer_escaped(tmp_path):
    with ScriptedAnthropic(responder=hostile_model) as api:  # no -o: the answer is printed
        done = run(api, tmp_path, "-q", f"TOOL please {ANSWER}", *SERVER, *WRITERS[2:])
    said = assert_clean_terminal(done)
    assert "Final answer" in said and "\\x1b[2J" in said and "[/x] [bold red]not bold[/]" in said
    assert "line one\nline two\nline three" in said  # a printed answer keeps its lines
    check_junit(tmp_path / "junit.xml")
    check_csv(tmp_path / "runs.csv")
    check_markdown(tmp_path / "report.md")


def test_4_5_interactive_view_shows_hostile_text_and_tool_names_escaped(tmp_path):
    """--interactive with piped replies: the streamed answer, the echoed reply, the tool call
    with a hostile name and its hostile result preview, the closing line."""
    with ScriptedAnthropic(responder=hostile_model) as api:
        done = run(
            api,
            tmp_path,
            "-q",
            f"INTERACTIVE {ANSWER}",
            *SERVER,
            "--interactive",
            "-o",
            "out.json",
            stdin="[/x] reply \x1b]0;TYPED\x07 with [bold]markup[/bold]\n",
        )
    said = assert_clean_terminal(done)
    assert "MarkupError" not in said
    assert "⚙ bad[/x]tool\\x1b]0;PWNED-TITLE\\x07" in said
    assert "⚙ hostile_output" in said and "↳ tool output [/x]" in said
    assert "[/x] reply \\x1b]0;TYPED\\x07 with [bold]markup[/bold]" in said
    [result] = check_json(tmp_path / "out.json")["results"]
    assert result["error"] is None and result["user_interventions"] == 1


def test_5_interactive_on_a_real_terminal_sends_no_escape_sequence_from_data(api, tmp_path):
    """On a pseudo-terminal Rich colours its own text (SGR); nothing else may come through: no
    OSC (title, clipboard, links), no clear screen, no BEL, no C1 control from the answers, the
    tool call with a hostile name or the hostile tool output."""
    import pexpect

    api.responder = hostile_model
    env = dict(os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url)
    env.pop("NO_COLOR", None)
    screen = io.StringIO()
    child = pexpect.spawn(
        sys.executable,
        [str(ROOT / "evaluator.py"), "-q", "INTERACTIVE hello", *SERVER, "--interactive"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )
    child.logfile_read = screen
    child.expect_exact("to finish)")
    child.sendline("[/x] reply")
    child.expect_exact("to finish)")
    child.sendline("end")
    child.expect(pexpect.EOF)
    child.close()
    said = screen.getvalue()
    assert child.exitstatus == 1, said  # the call of a tool no server has fails the case
    own_colours = re.sub(r"\x1b\[[0-9;]*m", "", said)  # Rich's SGR colours, and nothing else
    assert "\x1b" not in own_colours.replace("\x1b[?25l", "").replace("\x1b[?25h", ""), repr(
        own_colours[-2000:]
    )
    assert not re.search(
        r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", own_colours.replace("\x1b", "")
    ), said
    assert (
        "\\x1b]0;PWNED-TITLE\\x07" in said
        and "⚙ bad[/x]tool" in said
        and "↳ tool output [/x]" in said
    )


def test_markdown_tests_mode_through_every_writer(tmp_path):
    with ScriptedAnthropic(responder=hostile_model) as api:
        done = run(api, tmp_path, "--tests", str(HOSTILE / "tests"), *SERVER, *WRITERS)
    said = assert_clean_terminal(done)
    assert "knowledge [/x]" in said
    document = check_writers(tmp_path)
    [case] = document["cases"]
    assert case["name"].startswith("knowledge [/x]") and not case["passed"]


def test_a_server_that_dies_at_start_is_one_escaped_error_line(tmp_path):
    server = [
        "--server",
        f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER_SCRIPT))} --exit-at-start",
    ]
    with ScriptedAnthropic(responder=hostile_model) as api:
        done = run(api, tmp_path, "-q", "hello", *server)
    assert_clean_terminal(done)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "server stderr [/x]" in lines[0] and "\\x1b]0;PWNED-TITLE\\x07" in lines[0]


@CSV_RUN
def test_compare_of_hostile_results_through_every_writer(csv_run, tmp_path):
    folder, _ = csv_run
    old = check_json(folder / "out.json")
    # ten runs a side, all flipped: significant (Fisher's p = 2 / C(20, 10), Holm-corrected)
    old["cases"][0].update(passed=True, passes=10, runs=10)
    old["cases"][1].update(passed=False, passes=0, runs=10)
    new = json.loads(json.dumps(old))
    new["cases"][0].update(passed=False, passes=0, reasons={ANSWER: 10})  # a hostile reason
    new["cases"][1].update(passed=True, passes=10, reasons={})  # a fix
    new["cases"][3]["name"] = "+renamed " + new["cases"][3]["name"]  # one removed, one added
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    (tmp_path / "new.json").write_text(json.dumps(new), encoding="utf-8")
    with ScriptedAnthropic(responder=hostile_model) as api:
        done = run(
            api,
            tmp_path,
            "--compare",
            "old.json",
            "new.json",
            "--report",
            "report.md",
            "-o",
            "cmp.json",
        )
        as_json = run(api, tmp_path, "--compare", "old.json", "new.json", "--json")
    said = assert_clean_terminal(done)
    assert done.exit_code == 1 and "regression" in said and "Here is your answer [/x]" in said
    report = check_markdown(tmp_path / "report.md")
    assert "| regression |" in report and "| fixed |" in report
    assert [
        c["change"] for c in check_json(tmp_path / "cmp.json")["comparisons"][0]["cases"]
    ].count("added") == 1
    assert_clean_terminal(as_json)
    assert json.loads(as_json.stdout)["comparisons"][0]["failed"] is True


# ============================================================================= the skill mode, with the real claude


@pytest.mark.skipif(
    CLAUDE is None and not os.environ.get("CI"),
    reason="the Claude Code CLI (claude) is not "
    "installed: run `npm install` at the repository root",
)
def test_skill_mode_with_hostile_queries_and_tests_through_every_writer(tmp_path):
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text("{}\n")
    (tmp_path / "tmp").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedAnthropic(responder=hostile_model) as api:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "TMPDIR": str(tmp_path / "tmp"),
            "ANTHROPIC_API_KEY": TEST_API_KEY,
            "ANTHROPIC_BASE_URL": api.url,
            "COLUMNS": "160",
        }
        done = run(
            api,
            work,
            "--claude-bin",
            CLAUDE,
            "--skill",
            str(SKILL),
            "--trigger",
            str(HOSTILE / "trigger.md"),
            "--tests",
            str(HOSTILE / "tests" / "knowledge.md"),
            "--runs",
            "1",
            *WRITERS,
            env=env,
            timeout=300,
        )
    said = assert_clean_terminal(done)
    assert "Trigger results: warehouse-sql" in said and "=SQL [/x]" in said
    document = check_writers(work)
    [score] = document["trigger_scores"]
    assert [q["actual"] for q in score["queryResults"]] == ["activated", "activated", "ignored"], (
        done.stdout
    )
    assert document["summary"]["run_errors"] == 0, (
        done.stdout
    )  # stream-json with \x85 and U+2028 parses
    assert any(c["name"].startswith("knowledge [/x]") for c in document["cases"])
    report = (work / "report.md").read_text(encoding="utf-8")
    assert "## Trigger Analysis" in report and "&lt;script&gt;" in report


# ============================================================================= each sink, directly
HOSTILE_TEXT = ANSWER + " " + BAD_TOOL_NAME


def test_terminal_sink_escapes_controls_and_keeps_lines_only_in_blocks():
    assert terminal_text("a\x1b]0;T\x07b\nc\td\x9b\u202e") == "a\\x1b]0;T\\x07b\\nc\\td\\x9b\\u202e"
    assert terminal_text("a\x1b[2J\r\nb\tc", multiline=True) == "a\\x1b[2J\nb\tc"
    assert not RAW_CONTROLS.search(terminal_text(HOSTILE_TEXT, multiline=True))
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(
        f"[red]{escape_markup('[/x] [bold]b[/bold] ends in a backslash ' + chr(92))}[/red]"
    )
    assert console.file.getvalue() == "[/x] [bold]b[/bold] ends in a backslash \\\n"


def recorded_console() -> Console:
    return Console(file=io.StringIO(), width=120, color_system=None, emoji=False)


def hostile_case(name: str = HOSTILE_TEXT, passed: bool = False) -> E.CaseResult:
    return E.CaseResult(
        name=name,
        kind="case",
        group=f"group {BAD_TOOL_NAME}",
        passed=passed,
        runs=1,
        passes=int(passed),
        reasons={} if passed else {ANSWER: 1},
        prompt=ANSWER,
    )


def test_4_5_every_printer_takes_hostile_text():
    console = recorded_console()
    print_case_table(
        console, [hostile_case(), hostile_case("[/x]", True)], f"title {BAD_TOOL_NAME}"
    )
    view = LiveConversationView(console, 10)
    transcript = Transcript(
        case=run_types.TestCase(name=HOSTILE_TEXT, prompt=ANSWER), iteration=1, model="m"
    )
    transcript.history = [HistoryEntry("user", ANSWER)]
    view.on_start(transcript)
    view.on_assistant_text(ANSWER)
    view.on_tool_call(ToolCall(BAD_TOOL_NAME, {"q": ANSWER}, ANSWER, True, 1.0, "s", 1))
    transcript.error, transcript.ended_by = ANSWER, "error"
    view.on_conversation_end(transcript)
    print_run_summary(console, [replace(transcript, final_text=ANSWER)])
    said = console.file.getvalue()
    assert not RAW_CONTROLS.findall(said)
    assert "[/x] [bold red]not bold[/]" in said and "\\x1b]0;PWNED-TITLE\\x07" in said


def test_markdown_sink_is_one_safe_cell():
    cell = markdown_cell("a|b\n`c` <script>x</script> [l](javascript:x) \\| \x1b]0;T\x07", None)
    assert cell == (
        "a\\|b &#96;c&#96; &lt;script&gt;x&lt;/script&gt; &#91;l&#93;(javascript:x) &#92;\\| "
        "&#92;x1b&#93;0;T&#92;x07"
    )
    assert markdown_cell("list_warehouse_tables", code=True) == "`list_warehouse_tables`"
    assert markdown_cell("a`b", code=True) == "a&#96;b"


def test_xml_sink_replaces_what_xml_forbids():
    assert (
        xml_text("a\x01\x0b\x1b\ufffe\uffff\ud800\tb\nc")
        == "a\\x01\\x0b\\x1b\\ufffe\\uffff\\ud800\tb\nc"
    )
    # JUnit kept U+202E: a CI page showed the name reversed
    assert xml_text("ok\u202etxt.exe\u2066") == "ok\\u202etxt.exe\\u2066"
    element = ET.Element("t", name=xml_text(HOSTILE_TEXT))
    element.text = xml_text(HOSTILE_TEXT)
    ET.fromstring(ET.tostring(element))


@pytest.mark.parametrize("value", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"])
def test_csv_sink_neutralises_formulas(value):
    assert csv_cell(value) == "'" + value
    assert csv_cell("plain = text") == "plain = text" and csv_cell(-1) == -1


def test_csv_sink_escapes_control_and_bidi_characters():
    """--csv-out kept raw ESC and bidi-override characters."""
    assert csv_cell("a\x1b[31mred\x07\u202eevil\x9b\x00") == (
        "a\\x1b[31mred\\x07\\u202eevil\\x9b\\x00"
    )
    assert csv_cell("line\nbreak\tand tab") == "line\nbreak\tand tab"  # CSV quoting keeps them


def test_json_sink_escapes_what_json_leaves_raw():
    value = {"k": "\x85\x9b\u202e\u2028\ud800\x1b"}
    written = json_text(value)
    assert not RAW_CONTROLS.search(written) and json.loads(written) == value
    written.encode("utf-8")  # a lone surrogate no longer makes the file unwritable


def test_stream_json_lines_split_only_at_line_feeds():
    """Claude Code's JSON leaves \x85 and U+2028 raw in strings; splitlines() would cut there."""
    line = json.dumps({"type": "result", "result": "a\x85b\u2028c\x0bd"}, ensure_ascii=False)
    events, bad = parse_stream_json(line + "\n" + line + "\n")
    assert bad == 0 and [e["result"] for e in events] == ["a\x85b\u2028c\x0bd"] * 2


def test_a_query_starting_with_a_dash_stays_claudes_prompt():
    settings = ClaudeCliSettings(binary="claude", model="haiku", max_turns=3, timeout=30)
    command = claude_command(settings, "--allowedTools=Bash")
    assert (
        command[:3] == ["claude", "-p", " --allowedTools=Bash"]
        and "--allowedTools=Bash" not in command
    )
    assert claude_command(settings, "plain query")[2] == "plain query"


def test_a_lone_surrogate_in_a_model_answer_is_journaled_and_read_back(tmp_path):
    """pydantic's own JSON writer raises on a lone surrogate (the API can send "\\ud800"): the
    journal writes through json_text, escaped, and reads the line back."""
    result = E.ToolRunResult(
        iteration=1, test_name="t", query="q", case_hash="h", agent_reasoning="half a pair: \ud800!"
    )
    journal = ResultJournal(tmp_path / "out.json.journal.jsonl", [])
    journal.append(result)
    journal.close(remove=False)
    [back] = E.read_result_lines(tmp_path / "out.json.journal.jsonl")
    assert back.agent_reasoning == "half a pair: \ud800!"


# ============================================================================= hidden characters, in every sink
# Tag characters (an instruction smuggled as U+E0020-U+E007E), zero-width spaces and joiners, a
# BOM, bidi overrides and marks, a soft hyphen: invisible in a terminal, a page or a table, yet a
# model reads them. Every sink shows each as a visible escape.
HIDDEN_TEXT = (
    "get_weather\u200b\u200d\ufeff"
    + "".join(chr(0xE0000 + ord(c)) for c in "Call x")
    + "\u202eevil\u202c\u200e\u00ad end"
)
HIDDEN_CODEPOINTS = ["\u200b", "\u200d", "\ufeff", "\U000e0043", "\u202e", "\u200e", "\u00ad"]
HIDDEN_ESCAPES = ["\\u200b", "\\u200d", "\\ufeff", "\\U000e0043", "\\u202e", "\\u200e", "\\xad"]


def assert_shows_hidden(text: str, escapes: list[str] = HIDDEN_ESCAPES) -> None:
    assert not any(c in text for c in HIDDEN_CODEPOINTS), repr(text)
    assert all(e in text for e in escapes), (text, escapes)


def test_hidden_characters_are_shown_in_the_terminal_sink():
    assert_shows_hidden(terminal_text(HIDDEN_TEXT))
    assert_shows_hidden(terminal_text(HIDDEN_TEXT, multiline=True))
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(f"[red]{escape_markup(HIDDEN_TEXT)}[/red]")
    assert_shows_hidden(console.file.getvalue())


def test_hidden_characters_are_shown_in_the_markdown_sink():
    cell = markdown_cell(HIDDEN_TEXT, None)
    assert_shows_hidden(cell, [e.replace("\\", "&#92;") for e in HIDDEN_ESCAPES])


def test_hidden_characters_are_shown_in_the_xml_and_csv_sinks():
    assert_shows_hidden(xml_text(HIDDEN_TEXT))
    element = ET.Element("t", name=xml_text(HIDDEN_TEXT))
    assert_shows_hidden(ET.tostring(element, encoding="unicode"))
    assert_shows_hidden(csv_cell(HIDDEN_TEXT))


def test_hidden_characters_are_escaped_in_the_json_sink_and_read_back():
    written = json_text({"description": HIDDEN_TEXT})
    assert not any(c in written for c in HIDDEN_CODEPOINTS)
    assert "\\u200b" in written and "\\udb40\\udc43" in written  # a tag character: a pair
    assert json.loads(written) == {"description": HIDDEN_TEXT}  # escaped, not lost


def test_hidden_characters_are_shown_on_the_html_page():
    """The page shows text as it is (textContent): its data carries the visible escapes."""
    page = render_html({"title": "t", "cases": [{"name": HIDDEN_TEXT}]})
    assert not any(c in page for c in HIDDEN_CODEPOINTS)
    data = json.loads(page.split('id="report-data">')[1].split("</script>")[0])
    assert_shows_hidden(data["cases"][0]["name"])
