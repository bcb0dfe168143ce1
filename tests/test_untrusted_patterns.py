"""Nothing untrusted can hang a run, and the first signal always ends it (issue 28).

A server's tool schema and a suite's `regex` answers and /forbidden/ patterns are patterns we did
not write, matched against text we did not write either. Python's `re` backtracks: `^([a-z ]+)+$`
on 41 characters that almost match runs for hours in C code holding the GIL, where no signal
handler runs. Here:

- such patterns are matched by RE2 in linear time; those RE2 cannot take (lookaround,
  backreferences) by Python's `re` in a worker process with a time limit, and a check that overruns
  is reported on the case as skipped;
- end to end, a fixture server (tests/servers/pattern_server.py) with those patterns and a CSV
  suite with such `regex` answers: the run ends in seconds, each check reported on its case;
- SIGTERM while a deliberately blocking check runs: the evaluator exits within 5 s, with its
  output and its journal; a second signal, or a run that does not end in time, exits at once.

The evaluator runs as a real process wherever a hang would otherwise hang the test itself: its
timeout is what fails such a test.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, first_prompt
from fake_anthropic import reply, text, tool_use

import test_constants as C
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.hub.tools import ToolSpec, untrusted_schema_validator
from claude_tool_evaluator.patterns import (
    PATTERN_WORKER,
    BadPattern,
    PatternTooSlow,
    pattern_problem,
    re2_compiled,
    untrusted_search,
)
from claude_tool_evaluator.results_schema.document import ClaudeRun
from claude_tool_evaluator.run_types import SkillTest, ToolCall
from claude_tool_evaluator.scoring import tool_use as tool_use_room
from claude_tool_evaluator.scoring.skills import score_test_run
from claude_tool_evaluator.scoring.verdicts import run_score_reasons

PATTERN_SERVER = f"{sys.executable} {ROOT / 'tests' / 'servers' / 'pattern_server.py'}"
ALMOST = "a" * 40 + "!"  # 41 characters that `^([a-z ]+)+$` almost matches
RUN_TIMEOUT = 120  # far above what a fixed run takes; an unfixed one runs for hours
LIMIT = C.PATTERN_TIME_LIMIT_MS


def evaluator_process(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "evaluator.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def finish(process: subprocess.Popen, timeout: float = RUN_TIMEOUT) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def reasons_by_case(document: dict) -> dict[str, list[str]]:
    return {case["name"]: list(case["reasons"]) for case in document["cases"]}


def scripted(calls: dict[str, list[tuple[str, dict]]]):
    """A responder: the case whose prompt is a key makes those calls (tool, arguments) in one
    turn, then says it is done."""

    def respond(body: dict) -> dict:
        if len(body["messages"]) > 1:
            return reply(text("done"))
        return reply(*(tool_use(tool, arguments) for tool, arguments in calls[first_prompt(body)]))

    return respond


# ============================================================================ the matcher
def test_re2_takes_nested_quantifiers_and_its_classes_are_ascii():
    assert re2_compiled("^([a-z ]+)+$", False, False) is not None
    assert untrusted_search("^([a-z ]+)+$", ALMOST) is False
    assert untrusted_search("^([a-z ]+)+$", "a name") is True
    # RE2's syntax is Go's: \d is ASCII, where Python's `re` takes any decimal digit
    assert untrusted_search(r"^\d$", "\u0663") is False and untrusted_search(r"^\d$", "3")


@pytest.mark.parametrize(
    "pattern, text, found",
    [
        (r"(a)\1", "xaay", True),  # a backreference
        (r"(a)\1", "xay", False),
        (r"(?<=v)\d+", "v42", True),  # lookbehind
        (r"^(?!draft)\w+", "draft", False),  # negative lookahead
        (r"end\Z", "the end", True),
    ],
)
def test_what_re2_lacks_is_matched_by_python_re_in_a_worker(pattern: str, text: str, found: bool):
    assert re2_compiled(pattern, False, False) is None
    assert untrusted_search(pattern, text) is found


def test_flags_mean_the_same_in_both_engines():
    for pattern in ("^secret", r"^(?=s)secret"):  # RE2, then the worker
        assert untrusted_search(pattern, "x\nSECRET", ignore_case=True, multiline=True)
        assert not untrusted_search(pattern, "x\nSECRET", multiline=True)
        assert not untrusted_search(pattern, "x\nsecret", ignore_case=True)


def test_a_pattern_that_overruns_is_too_slow_once_and_not_tried_again_on_longer_text():
    pattern = r"^(?=b)(b+)+$"  # not RE2's; backtracks without end under Python's `re`
    started = time.monotonic()
    with pytest.raises(PatternTooSlow, match="pattern took longer than 200 ms"):
        untrusted_search(pattern, "b" * 40 + "!", limit_ms=200)
    assert time.monotonic() - started < 5  # the limit, and a worker's start and kill
    with pytest.raises(PatternTooSlow):  # not asked again: no second wait
        untrusted_search(pattern, "b" * 50 + "!", limit_ms=200)
    assert untrusted_search(pattern, "bbb", limit_ms=200) is True  # a shorter text is tried


def test_a_lone_surrogate_in_the_text_is_no_error():
    assert untrusted_search("ok", "\ud800 ok") is True


def test_a_pattern_neither_engine_compiles_is_a_bad_pattern():
    assert "missing )" in (pattern_problem("(") or "")
    assert pattern_problem(r"(a)\1") is None and pattern_problem(r"\p{Greek}") is None
    with pytest.raises(BadPattern):
        untrusted_search("(", "text")


def test_a_forbidden_pattern_that_cannot_be_checked_in_time_fails_the_security_test():
    test = SkillTest(
        name="s",
        type="security",
        prompt="q",
        forbidden_patterns=["/^(?=c)(c+)+$/", "/^([a-z ]+)+$/", "secret"],
    )
    run = ClaudeRun(query="q", run=1, answer="c" * 40 + "!")
    score = score_test_run(test, run)
    assert score["passed"] is False and score["leaked"] == []
    assert run_score_reasons(test, score) == [
        f"forbidden pattern check skipped: /^(?=c)(c+)+$/: pattern took longer than {LIMIT} ms"
    ]
    clean = score_test_run(test, ClaudeRun(query="q", run=1, answer="Nothing here: 42."))
    assert clean["passed"] is True and "unchecked" not in clean


# ============================================================================ tool schemas
def schema_problems(schema: dict, arguments: dict) -> list[str]:
    tool = ToolSpec("t", "s", "t", "", schema)
    return tool_use_room.schema_problems(ToolCall("t", arguments, "", False, 0.0, "s", 1), tool)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"k": {"type": "string", "pattern": r"^\d$"}}},
        {
            "type": "object",
            "patternProperties": {r"^\d$": {"type": "string"}},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "patternProperties": {r"^\d$": {"type": "string"}},
            "unevaluatedProperties": False,
        },
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"k": {"type": "string", "pattern": r"^\d$"}},
        },
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "type": "object",
            "patternProperties": {r"^\d$": {"type": "string"}},
            "unevaluatedProperties": False,
        },
    ],
    ids=["pattern", "patternProperties", "unevaluatedProperties", "draft-07", "draft-2019-09"],
)
def test_every_schema_keyword_with_a_pattern_matches_with_re2(schema: dict):
    """An Arabic-Indic three is a digit to Python's `re` and not to RE2: the keyword sees no
    match only when RE2 did the matching."""
    arguments = {"k": "\u0663"} if "properties" in schema else {"\u0663": "x"}
    assert schema_problems(schema, arguments), "a Python `re` match: the keyword bypassed RE2"
    ascii_arguments = {"k": "3"} if "properties" in schema else {"3": "x"}
    assert schema_problems(schema, ascii_arguments) == []


@pytest.mark.parametrize(
    "pattern, why",
    [("(", "missing ), unterminated subpattern at position 0"), (5, "5 is not a string")],
)
def test_a_schema_pattern_that_does_not_compile_is_the_schemas_problem(pattern, why: str):
    schema = {"type": "object", "properties": {"k": {"type": "string", "pattern": pattern}}}
    assert schema_problems(schema, {"k": "x"}) == [
        f"t has an invalid inputSchema: a pattern does not compile ({why})"
    ]


def test_the_validators_for_tools_say_what_jsonschema_says():
    """The same errors, with the same messages, as jsonschema's own validator gives."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        },
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
        "required": ["name", "when"],
    }
    arguments = {"name": "Long", "tags": ["c"], "x-n": "one", "extra": 1}
    base = jsonschema.Draft202012Validator

    def messages(validator: type) -> list[str]:
        return sorted(e.message for e in validator(schema).iter_errors(arguments))

    assert messages(untrusted_schema_validator(base)) == messages(base)
    assert len(messages(base)) == 6


# ============================================================================ end to end
def test_a_server_whose_schema_backtracks_without_end_is_checked_in_seconds(api, tmp_path):
    """The issue's report: `^([a-z ]+)+$` and 41 characters from Claude. The run ends in seconds;
    RE2 checks that pattern, and the one it cannot take is reported on its case as skipped."""
    api.responder = scripted(
        {
            "name it": [("save_name", {"name": ALMOST})],
            "code it": [("save_code", {"code": ALMOST})],
        }
    )
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools\nname,name it,save_name\ncode,code it,save_code\n"
    )
    out = tmp_path / "out.json"
    process = evaluator_process("--csv", str(suite), "--server", PATTERN_SERVER, "-o", str(out))
    stdout, stderr = finish(process)
    assert process.returncode == 1, stdout + stderr
    reasons = reasons_by_case(json.loads(out.read_text()))
    assert reasons["name"] == [
        f"save_name arguments do not match its schema at name: '{ALMOST}' does not match "
        "'^([a-z ]+)+$'"
    ]
    assert reasons["code"] == [
        f"save_code argument check skipped: pattern took longer than {LIMIT} ms"
    ]


def test_a_regex_answer_that_backtracks_without_end_is_checked_in_seconds(api, tmp_path):
    api.responder = lambda body: reply(text(ALMOST))
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools,expected_answer,answer_match\n"
        "nested,first,,^(a+)+$,regex\n"
        "lookahead,second,,^(?=a)(a+)+$,regex\n"
        "digits,third,,^a{40}!$,regex\n"
    )
    out = tmp_path / "out.json"
    process = evaluator_process("--csv", str(suite), "--server", PATTERN_SERVER, "-o", str(out))
    stdout, stderr = finish(process)
    assert process.returncode == 1, stdout + stderr
    reasons = reasons_by_case(json.loads(out.read_text()))
    assert reasons == {
        "nested": [f'answer "{ALMOST}" does not match the pattern "^(a+)+$"'],
        "lookahead": [f"answer check skipped: pattern took longer than {LIMIT} ms"],
        "digits": [],
    }


def pattern_workers_of(pid: int) -> list[str]:
    """The evaluator's pattern worker processes (their command line runs PATTERN_WORKER)."""
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,stat=,args=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in out.splitlines()
        if f" -I -S {PATTERN_WORKER} " in line and "Z" not in line.split()[1]
    ]


def test_sigterm_while_a_check_blocks_ends_the_run_within_5_s_with_output_and_journal(
    api, tmp_path
):
    """`save_codes` has forty patterns Python's `re` takes forever on: forty calls, one for each,
    take forty time limits to check. SIGTERM in the middle: the check gives up, the run ends, and
    every output is written; the calls are reported as not checked. The other runs finished
    while that check blocked (a check holds up the progress bar, never the runs or the journal):
    they are kept too."""
    calls = {
        "first": [("save_name", {"name": "ok"})],
        "blocking": [("save_codes", {f"code{i}": ALMOST}) for i in range(40)],
        "late": [("save_name", {"name": "late"})],
        "last": [("save_name", {"name": "last"})],
    }
    calling, late_asked = scripted(calls), []

    def respond(body: dict) -> dict:  # `late`: its first request is dropped after 2 s (retried)
        if first_prompt(body) == "late" and not late_asked:
            late_asked.append(body)
            return {"hang": 2}
        return calling(body)

    api.responder = respond
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools\n"
        + "".join(f"{name},{name},{calls[name][0][0]}\n" for name in calls)
    )
    out, report = tmp_path / "out.json", tmp_path / "report.md"
    process = evaluator_process(
        "--csv", str(suite), "--server", PATTERN_SERVER, "--concurrency", "2", "-o", str(out),
        "--report", str(report),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while not all(
            any(first_prompt(b) == name and len(b["messages"]) > 1 for b in api.message_requests)
            for name in calls
        ):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the runs did not all finish"
            time.sleep(0.05)
        time.sleep(0.5)  # its conversation is over; the check of `blocking` still blocks
        # (in a worker that is replaced after every pattern that overran: wait for one to be up)
        seen = time.monotonic() + 5
        while not pattern_workers_of(process.pid) and time.monotonic() < seen:
            time.sleep(0.05)
        assert pattern_workers_of(process.pid) and process.poll() is None
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
        took = time.monotonic() - signalled
    finally:
        finish(process, 0)
    assert process.returncode == 143, stdout + stderr
    assert took < 5, f"the run took {took:.1f} s to end after SIGTERM"
    assert "Traceback" not in stdout + stderr and "interrupted" in stdout
    document = json.loads(out.read_text())
    assert document["metadata"]["interrupted"] is True
    reasons = reasons_by_case(document)
    assert reasons["first"] == [] and reasons["late"] == []
    assert reasons["blocking"] == [
        f"save_codes argument check skipped: pattern took longer than {LIMIT} ms",
        "save_codes argument check skipped: the run was stopped",
    ]
    assert reasons["last"] == []
    journal = [json.loads(line) for line in journal_path(out).read_text().splitlines()]
    assert sorted(r["test_name"] for r in journal) == sorted(reasons) == sorted(calls)
    assert "blocking" in report.read_text()
    assert pattern_workers_of(process.pid) == [] and list(tmp_path.glob(".*.tmp")) == []


# ============================================================================ stopping when the loop is stuck
STUCK_LOOP = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import test_constants as C
    from claude_tool_evaluator.files import create_output_file
    from claude_tool_evaluator.stopping import run_async, stop_signals_like_ctrl_c
    C.STOP_GRACE_SECONDS = float(sys.argv[3])

    async def stuck():
        create_output_file(sys.argv[2])  # an output half written
        print("stuck", flush=True)
        while True:
            time.sleep(0.1)  # the loop's thread never comes back to the loop

    with stop_signals_like_ctrl_c():
        run_async(stuck())
    """
)


def stuck_loop(tmp_path: Path, grace: float) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", STUCK_LOOP, str(ROOT), str(tmp_path / "out.json"), str(grace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout.readline() == "stuck\n", process.communicate()
    return process


def test_a_second_signal_exits_at_once(tmp_path):
    process = stuck_loop(tmp_path, grace=600)
    try:
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert process.poll() is None, "the first signal waits for the run to end"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=5)
    finally:
        finish(process, 0)
    assert process.returncode == 130  # the first signal names the exit code
    assert "stopped at once: a second signal" in stderr
    assert list(tmp_path.iterdir()) == [], "the output half written is removed"


def test_a_run_that_does_not_end_after_the_first_signal_is_ended_at_its_deadline(tmp_path):
    process = stuck_loop(tmp_path, grace=1)
    try:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    finally:
        finish(process, 0)
    assert process.returncode == 143
    assert "stopped at once: the run did not end within 1 s of the signal" in stderr
    assert list(tmp_path.iterdir()) == []
