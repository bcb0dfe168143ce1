"""Grading outcomes: QA evaluations in mcp-builder's XML format (end to end against the public
mcp-server-time through the real SDK and the scripted API), one answer-matching vocabulary
(exact, normalized, numeric, contains, regex, judge) for QA pairs, CSV suites and markdown tests,
concept matching that respects numbers and identifiers, and the suite's tool coverage."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from conftest import EXAMPLE_SERVER, ROOT
from fake_anthropic import reply, text, tool_use, user_query

import evaluator as E
import prompts
import test_constants as C
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.answers import (
    answer_match_problem,
    answer_problems,
    transcript_answer,
    transcript_tagged,
)
from claude_tool_evaluator.mode_table import select_mode
from claude_tool_evaluator.modes.tool_suites import markdown_tool_cases
from claude_tool_evaluator.results_schema.document import ClaudeRun
from claude_tool_evaluator.run_types import HistoryEntry, ToolCall, Transcript
from claude_tool_evaluator.scoring.skills import concept_matches, score_concepts, score_test_run
from claude_tool_evaluator.scoring.statistics import tool_coverage, wilson_interval
from claude_tool_evaluator.scoring.tool_use import score_tool_use
from claude_tool_evaluator.scoring.verdicts import run_score_reasons

TIME_SERVER = f"{sys.executable} -m mcp_server_time --local-timezone UTC"
PROFILE_TOOLS = [
    "about_profiles",
    "describe_table",
    "get_existing_connections",
    "get_profile",
    "list_warehouse_tables",
    "profiles_workflow_guide",
    "run_sql_query",
    "save_note",
    "search_profiles_docs",
]


def write(path: Path, content: str) -> Path:
    path.write_text(content, encoding="utf-8")
    return path


def tool_results(body: dict) -> list[dict]:
    content = body["messages"][-1]["content"]
    return (
        [b for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []
    )


def result_text(block: dict) -> str:
    content = block.get("content")
    return (
        content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
    )


def system_text(body: dict) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)


def qa_xml(pairs: list[tuple[str, str, str | None]]) -> str:
    """An evaluation file laid out as mcp-builder writes them: three-space indents, one
    <qa_pair> per question; an optional match attribute on the answer."""
    out = ["<evaluation>"]
    for question, answer, match in pairs:
        attribute = f' match="{match}"' if match else ""
        out += [
            "   <qa_pair>",
            f"      <question>{question}</question>",
            f"      <answer{attribute}>{answer}</answer>",
            "   </qa_pair>",
        ]
    return "\n".join(out + ["</evaluation>", ""])


# ============================================================================ the four mis-graded examples
@pytest.mark.parametrize(
    "given, expected, mode, right",
    [
        ("11614.73", "11614.72", "normalized", False),
        ("11614.73", "11614.72", "numeric", False),
        ("about 11614.7", "11614.72", "normalized", False),
        ("about 11614.7", "11614.72", "numeric:0.005", False),
        ("sara_dev", "sarah_dev", "normalized", False),
        ("sara_dev", "sarah_dev", "contains", False),
        ("$11,614.72", "11614.72", "normalized", True),
        ("$11,614.72", "11614.72", "numeric", True),
    ],
)
def test_the_four_misgraded_examples_as_answers(given: str, expected: str, mode: str, right: bool):
    assert (answer_problems(expected, mode, given) == []) is right


@pytest.mark.parametrize(
    "concept, answer, right",
    [
        ("11614.72", "The final amount is 11614.73 dollars.", False),
        ("11614.72", "It comes to about 11614.7 in the end.", False),
        ("sarah_dev", "The issues were closed by sara_dev.", False),
        ("11614.72", "The final amount is $11,614.72.", True),
        ("sarah_dev", "The issues were closed by sarah_dev.", True),
        ("final amount of 11614.72", "The final amount is $11,614.72.", True),
        ("closed by sarah_dev", "Most issues were closed by sara_dev.", False),
    ],
)
def test_the_four_misgraded_examples_as_concepts(concept: str, answer: str, right: bool):
    assert concept_matches(concept, answer) is right
    assert score_concepts(answer, [concept])["coverage"] == (1.0 if right else 0.0)


def test_concepts_keep_fuzzy_matching_for_plain_words_and_exactness_for_code():
    answer = (
        "Join tracks to identifies on anonymous_id, deduplicated, and use COALESCE(t.user_id, i.user_id); "
        "summarisation keeps the token budget."
    )
    assert concept_matches("summarization", answer)  # fuzzy, as before
    assert concept_matches("Token budget allocation", "allocate the token budget")
    assert concept_matches(
        "Using COALESCE of the event's user_id and the identified user_id", answer
    )
    assert concept_matches("Joining `tracks` or `pages` to `identifies` on `anonymous_id`", answer)
    assert not concept_matches("anonymous_ids", answer), "an identifier is a whole token"
    assert not concept_matches("join on anon_id", answer)
    assert not concept_matches("getUserById", "call get_user_by_id"), "camelCase is code: exact"
    assert concept_matches("os.path", "use os.path.join") and not concept_matches(
        "os.path", "use os.pathlib"
    )
    assert concept_matches("v3.0.0", "released as v3.0.0.") and not concept_matches(
        "v3.0.0", "v3.0.1"
    )
    assert concept_matches("3 rows", "it returned 3 rows") and not concept_matches(
        "3 rows", "it returned 30 rows"
    )
    assert concept_matches("e.g. the orders table", "for example the orders table"), (
        "e.g. is not code"
    )


# ============================================================================ the answer vocabulary
@pytest.mark.parametrize(
    "expected, mode, given, reason",
    [
        ("Website Redesign", "exact", "Website Redesign", None),
        (
            "Website Redesign",
            "exact",
            "website redesign",
            'answer "website redesign" is not "Website Redesign" (exact)',
        ),
        ("Website Redesign", "normalized", "  website   REDESIGN. ", None),
        ("1000", "normalized", "1,000.00", None),
        ("€1,200", "normalized", "1200", None),
        ("octocat", "exact", "NOT_FOUND", 'Claude answered NOT_FOUND; expected "octocat"'),
        ("octocat", "exact", "", 'no answer; expected "octocat"'),
        ("147", "numeric", "147 days", None),
        ("147", "numeric", "148", "answer 148 is 1 off 147"),
        ("147", "numeric:1", "148", None),
        ("147", "numeric:1%", "148.4", None),
        ("147", "numeric:1%", "149", "answer 149 is 2 off 147 (tolerance 1%)"),
        ("4.46", "numeric:0.005", "pH 4.46", None),
        (
            "147",
            "numeric",
            "between 140 and 150",
            "holds several numbers (140, 150); expected the number 147",
        ),
        ("147", "numeric", "about a hundred", "holds no number; expected the number 147"),
        ("legacy-pipeline", "contains", "The repository is legacy-pipeline.", None),
        (
            "pipeline",
            "contains",
            "The repository is legacy-pipelines.",
            'does not contain "pipeline"',
        ),
        (r"^v\d+\.\d+\.\d+$", "regex", "v3.0.0", None),
        (r"^v\d+\.\d+\.\d+$", "regex", "release v3.0.0", "does not match the pattern"),
    ],
)
def test_answer_match_modes(expected: str, mode: str, given: str, reason: str | None):
    problems = answer_problems(expected, mode, given)
    if reason is None:
        assert problems == []
    else:
        assert len(problems) == 1 and reason in problems[0], problems


def transcript(final: str, case: run_types.TestCase, history: list[str] = ()) -> Transcript:
    t = Transcript(case=case, iteration=1, model="m", final_text=final)
    t.history = [HistoryEntry("assistant", h) for h in history] + [HistoryEntry("assistant", final)]
    return t


def test_the_answer_compared_is_the_last_response_block_else_the_final_text():
    case = run_types.TestCase(name="c", prompt="q", expected_answer="42", answer_match="exact")
    last = transcript(
        "<summary>s</summary><response>41</response> then <response> 42 </response>", case
    )
    assert transcript_answer(last) == "42" and score_tool_use(case, last, {}).passed
    earlier = transcript("I am done.", case, ["<feedback>ok</feedback>\n<response>42</response>"])
    assert transcript_answer(earlier) == "42" and transcript_tagged(earlier, "feedback") == "ok"
    bare = transcript("  42\n", case)
    assert transcript_answer(bare) == "42" and E.TOOL_CHECKS["answer"](case, bare, {}) == []
    wrong = transcript("The answer is 42", case)
    assert E.TOOL_CHECKS["answer"](case, wrong, {}) == [
        'answer "The answer is 42" is not "42" (exact)'
    ]


def test_the_answer_check_leaves_judged_failed_and_unasked_runs_alone():
    judged = run_types.TestCase(name="j", prompt="q", expected_answer="six", answer_match="judge")
    assert E.TOOL_CHECKS["answer"](judged, transcript("6", judged), {}) == []
    plain = run_types.TestCase(name="p", prompt="q")
    assert E.TOOL_CHECKS["answer"](plain, transcript("anything", plain), {}) == []
    asked = run_types.TestCase(name="a", prompt="q", expected_answer="6")
    failed = transcript("", asked)
    failed.error = "APIError: boom"
    assert E.TOOL_CHECKS["answer"](asked, failed, {}) == []
    assert score_tool_use(asked, failed, {}).reasons == ["run failed: APIError: boom"]


@pytest.mark.parametrize(
    "match, expected, problem",
    [
        ("exact", "x", None),
        ("Normalized", "x", None),
        ("numeric:0.005", "3", None),
        ("numeric:1%", "$1,000", None),
        ("judge", None, None),
        ("fuzzy", "x", "is not one of exact, normalized, numeric, contains, regex, judge"),
        ("numeric:abc", "3", "the tolerance must be a number or a percentage"),
        ("contains:2", "x", "only numeric takes a tolerance"),
        ("numeric", "three", "one number, not 'three'"),
        ("numeric", "3 or 4", "one number"),
        ("regex", "(", "not a valid regular expression"),
        ("exact", None, "answer_match exact needs an expected answer"),
    ],
)
def test_answer_match_is_checked_before_anything_runs(
    match: str, expected: str | None, problem: str | None
):
    found = answer_match_problem(match, expected)
    assert (found is None) if problem is None else (problem in (found or "")), found


# ============================================================================ loading QA evaluations
# Written by hand, exactly as mcp-builder lays out its example_evaluation.xml: a root
# <evaluation>, three-space indented <qa_pair>s, questions on one or several lines, no attributes.
MCP_BUILDER_STYLE = """<evaluation>
   <qa_pair>
      <question>Calculate the compound interest on $10,000 invested at 5% annual interest rate, compounded monthly for 3 years. What is the final amount in dollars (rounded to 2 decimal places)?</question>
      <answer>11614.72</answer>
   </qa_pair>
   <qa_pair>
      <question>Find the issue closed in Q1 2024 that had the most comments before being closed.
         What was the GitHub username of the user who closed it?</question>
      <answer>sarah_dev</answer>
   </qa_pair>
   <qa_pair>
      <question>A sphere has a volume of 500 m³ &amp; a density of 2 kg/m³. Calculate its mass × g (g=9.8 m/s²) in newtons. Round to 2 decimal places.</question>
      <answer>9800.00</answer>
   </qa_pair>
</evaluation>
"""


def test_a_file_in_mcp_builders_format_loads(tmp_path: Path):
    path = write(tmp_path / "evaluation.xml", MCP_BUILDER_STYLE)
    cases = E.load_qa_suite(path)
    assert [(c.name, c.line, c.expected_answer, c.answer_match) for c in cases] == [
        ("task-1", 2, "11614.72", "exact"),
        ("task-2", 6, "sarah_dev", "exact"),
        ("task-3", 11, "9800.00", "exact"),
    ]
    assert cases[0].prompt.startswith("Calculate the compound interest on $10,000") and cases[
        0
    ].prompt.endswith("?")
    assert cases[1].prompt == (
        "Find the issue closed in Q1 2024 that had the most comments before being closed.\n"
        "         What was the GitHub username of the user who closed it?"
    )
    assert "500 m³ & a density" in cases[2].prompt and "× g (g=9.8 m/s²)" in cases[2].prompt
    # the same pairs the standard library's parser (what mcp-builder's evaluation.py uses) reads
    root = ET.fromstring(MCP_BUILDER_STYLE)
    assert [(c.prompt, c.expected_answer) for c in cases] == [
        (p.find("question").text.strip(), p.find("answer").text.strip())
        for p in root.findall(".//qa_pair")
    ]


def test_the_shipped_example_loads_with_its_own_answer_matches():
    cases = E.load_qa_suite(ROOT / "examples" / "qa" / "time_evaluation.xml")
    assert [c.answer_match for c in cases] == ["exact", "numeric:0.01", "normalized"]
    assert all(c.expected_answer for c in cases)


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    ' <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n]>\n'
    "<evaluation><qa_pair><question>&lol2;</question><answer>a</answer></qa_pair></evaluation>\n"
)
EXTERNAL_ENTITY = (
    '<!DOCTYPE evaluation [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n'
    "<evaluation><qa_pair><question>&secret;</question><answer>a</answer></qa_pair></evaluation>\n"
)
PAIR = "   <qa_pair>\n      <question>q</question>\n      <answer>a</answer>\n   </qa_pair>\n"


@pytest.mark.parametrize(
    "content, line, fragment",
    [
        (
            "<evaluation>\n" + PAIR + "   <qa_pair>\n      <question>q</question>\n</evaluation>\n",
            8,
            "malformed XML: mismatched tag",
        ),
        (
            "<evaluation>\n   <qa_pair>\n      <question>Tom & Jerry?</question>\n",
            3,
            "malformed XML: not well-formed",
        ),
        ("<evaluation>\n" + PAIR.replace(">q<", ">&nbsp;<"), 3, "malformed XML: undefined entity"),
        ("", 1, "malformed XML: no element found"),
        (BILLION_LAUGHS, 2, "DOCTYPE declarations are not allowed in a QA evaluation"),
        (EXTERNAL_ENTITY, 1, "DOCTYPE declarations are not allowed"),
        ("<evaluation>\n</evaluation>\n", 1, "the evaluation has no <qa_pair>"),
        (
            "<evaluation>\n"
            + PAIR
            + "   <qa_pair>\n      <question>q</question>\n   </qa_pair>\n</evaluation>\n",
            6,
            "<qa_pair> 2 needs exactly one <answer>, it has 0",
        ),
        (
            "<evaluation>\n" + PAIR.replace(">a<", ">  <") + "</evaluation>\n",
            4,
            "<qa_pair> 1 has an empty <answer>",
        ),
        (
            "<evaluation>\n"
            + PAIR.replace("<answer>", '<answer match="fuzzy">')
            + "</evaluation>\n",
            4,
            "<qa_pair> 1: answer_match 'fuzzy' is not one of",
        ),
        (
            "<evaluation>\n"
            + PAIR.replace("<answer>", '<answer match="numeric">')
            + "</evaluation>\n",
            4,
            "answer_match numeric needs an expected answer that is one number",
        ),
        (
            "<evaluation>" + "<x>" * 40 + "</x>" * 40 + "</evaluation>",
            1,
            "nested more than 32 levels",
        ),
    ],
)
def test_a_bad_evaluation_file_is_one_line_with_its_line_and_exit_2(
    cli, tmp_path: Path, no_api_key, content: str, line: int, fragment: str
):
    path = write(tmp_path / "evaluation.xml", content)
    code, stdout, stderr = cli("--qa", path)
    assert code == 2 and stdout == "", stderr
    lines = stderr.splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith(f"error: {path}:{line}: ") and fragment in lines[0]
    ), lines


def test_tests_reads_an_xml_file_as_a_qa_evaluation_and_refuses_unknown_formats(
    cli, tmp_path: Path, no_api_key
):
    good = write(tmp_path / "evaluation.xml", "<evaluation>\n" + PAIR + "</evaluation>\n")
    settings = E.settings_from(
        E.main.get_command(click.Context(E.main), "run")
        .make_context("evaluator", ["--tests", str(good)])
        .params,
        frozenset({"tests"}),
    )
    assert select_mode(settings).name == "qa"
    unknown = write(tmp_path / "suite.yaml", "a: b\n")
    code, _, stderr = cli("--tests", unknown)
    assert code == 2 and stderr == (
        f"error: {unknown}: unknown test file format '.yaml' (give markdown tests (.md), "
        "a skill-creator eval set (.json) or a QA evaluation (.xml))\n"
    )
    mixed = write(tmp_path / "k.md", "# Prompt\nq\n")
    code, _, stderr = cli("--tests", good, "--tests", mixed)
    assert (
        code == 2 and stderr.count("\n") == 1 and f"{mixed} is not a QA evaluation (.xml)" in stderr
    )
    code, _, stderr = cli(
        "--skill", ROOT / "examples" / "skills" / "warehouse-sql", "--tests", good
    )
    assert (
        code == 2
        and stderr.count("\n") == 1
        and "runs against your MCP servers, not through Claude Code" in stderr
    )
    code, _, stderr = cli("--qa", good, "--answer-match", "fuzzy")
    assert code == 2 and stderr.count("\n") == 1 and "'fuzzy' is not one of" in stderr


# ============================================================================ QA end to end: mcp-server-time
# (question, expected answer, match attribute, convert_time arguments or None, how Claude answers
# from the real tool result). Every zone here has no daylight saving time: the answers are stable.
def hh_mm(result: dict) -> str:
    return result["target"]["datetime"][11:16]


def twelve_hour(result: dict) -> str:
    hours, minutes = map(int, hh_mm(result).split(":"))
    return f"{hours % 12 or 12}:{minutes:02d} {'AM' if hours < 12 else 'PM'}"


def hours(result: dict) -> float:
    return float(result["time_difference"].rstrip("h"))


TIME_TASKS = [
    (
        "At 09:00 in Asia/Tokyo, what time is it in Asia/Kolkata?\n         Answer as HH:MM.",
        "05:30",
        None,
        ("Asia/Tokyo", "09:00", "Asia/Kolkata"),
        hh_mm,
    ),
    (
        "At 09:00 in Asia/Tokyo, what time is it in Asia/Kolkata on a 24-hour clock?",
        "05:30",
        None,
        ("Asia/Tokyo", "09:00", "Asia/Kolkata"),
        twelve_hour,
    ),
    (
        "Converting 18:45 from Asia/Kolkata to Asia/Tokyo, what time difference does the tool report?",
        "+3.50H",
        "normalized",
        ("Asia/Kolkata", "18:45", "Asia/Tokyo"),
        lambda r: f"  {r['time_difference']} ",
    ),
    (
        "Converting 18:45 from Asia/Kolkata to Asia/Tokyo, what is the time in Tokyo (HH:MM)?",
        "22:15",
        "normalized",
        ("Asia/Kolkata", "18:45", "Asia/Tokyo"),
        lambda r: hh_mm(r) + " JST",
    ),
    (
        "How many hours ahead of UTC is Asia/Kathmandu?",
        "5.75",
        "numeric:0.01",
        ("UTC", "12:00", "Asia/Kathmandu"),
        lambda r: f"{hours(r)} hours",
    ),
    (
        "How many minutes ahead of Asia/Kolkata is Asia/Kathmandu?",
        "15",
        "numeric:1%",
        ("Asia/Kolkata", "12:00", "Asia/Kathmandu"),
        lambda r: f"{hours(r) * 60:.1f}",
    ),
    (
        "How many hours ahead of UTC is Asia/Kathmandu, rounded to the nearest whole hour?",
        "6",
        "numeric",
        ("UTC", "12:00", "Asia/Kathmandu"),
        lambda r: str(hours(r)),
    ),
    ("What is the population of the city whose zone is Asia/Tokyo?", "14000000", None, None, None),
]
RIGHT = {1: True, 2: False, 3: True, 4: False, 5: True, 6: True, 7: False, 8: False}
WHY = {
    2: 'answer "5:30 AM" is not "05:30" (exact)',
    4: 'answer "22:15 JST" is not "22:15", even normalized',
    7: "answer 5.75 is 0.25 off 6",
    8: 'Claude answered NOT_FOUND; expected "14000000"',
}


def time_model(body: dict) -> dict:
    """Claude on the QA tasks: calls convert_time with the task's arguments, then answers from
    what the real server returned, with a summary and feedback, the answer last."""
    task = next(
        t
        for t in TIME_TASKS
        if t[0].replace("\n         ", "\n") == user_query(body) or t[0] == user_query(body)
    )
    question, _, _, arguments, answer = task
    if arguments is None:
        return reply(
            text("<summary>No tool knows populations.</summary>\n<response>NOT_FOUND</response>")
        )
    results = tool_results(body)
    if not results:
        source, time, target = arguments
        return reply(
            tool_use(
                "convert_time", {"source_timezone": source, "time": time, "target_timezone": target}
            )
        )
    data = json.loads(result_text(results[0]))
    return reply(
        text(
            f"<summary>Called convert_time({', '.join(arguments)}) and read the result.</summary>\n"
            f"<feedback>convert_time is clear; its time_difference format (+5.75h) is undocumented."
            f"</feedback>\n<response>{answer(data)}</response>"
        )
    )


@pytest.fixture
def time_suite(tmp_path: Path) -> Path:
    return write(tmp_path / "time.xml", qa_xml([(q, a, m) for q, a, m, _, _ in TIME_TASKS]))


def test_a_qa_suite_runs_end_to_end_against_mcp_server_time(
    cli, api, tmp_path: Path, time_suite: Path
):
    api.responder = time_model
    out, report, junit, rows = (
        tmp_path / name for name in ("qa.json", "qa.md", "junit.xml", "runs.csv")
    )
    code, stdout, stderr = cli(
        "--qa",
        time_suite,
        "--server",
        TIME_SERVER,
        "-i",
        "2",
        "--concurrency",
        "3",
        "-o",
        out,
        "--report",
        report,
        "--junit",
        junit,
        "--csv-out",
        rows,
    )
    assert code == 1, stdout + stderr
    document = json.loads(out.read_text())
    E.results_document_model().model_validate(document)
    assert document["metadata"]["evaluation"] == "qa" and document["metadata"]["input_type"] == "qa"
    qa = document["qa"]
    assert (qa["tasks"], qa["runs"], qa["correct"], qa["accuracy"]) == (8, 16, 8, 0.5)
    assert qa["interval"] == [round(x, 4) for x in wilson_interval(8, 16)]
    assert qa["tool_calls"] == 14 and [t["tool"] for t in qa["tools"]] == ["convert_time"]
    assert (
        qa["tools"][0]["calls"] == 14
        and qa["tools"][0]["total_ms"] > 0
        and qa["mean_task_seconds"] > 0
    )
    for number, task in enumerate(qa["task_results"], 1):
        assert task["name"] == f"task-{number}" and task["runs"] == 2
        assert task["correct"] == (2 if RIGHT[number] else 0), task
        assert task["expected"] == TIME_TASKS[number - 1][1]
        for run in task["results"]:
            assert run["correct"] is RIGHT[number] and run["seconds"] > 0
            assert run["summary"].startswith(("Called convert_time", "No tool knows"))
            if number in WHY:
                assert run["reasons"] == [WHY[number]] or WHY[number] in run["reasons"][0], run[
                    "reasons"
                ]
            if number != 8:
                assert run["tool_calls"] == 1 and run["tools"][0]["tool"] == "convert_time"
                assert "undocumented" in run["feedback"]
    answers = {t["name"]: {r["answer"] for r in t["results"]} for t in qa["task_results"]}
    assert (
        answers["task-1"] == {"05:30"}
        and answers["task-2"] == {"5:30 AM"}
        and answers["task-5"] == {"5.75 hours"}
    )
    assert answers["task-6"] == {"15.0"} and answers["task-8"] == {"NOT_FOUND"}
    assert [c["passed"] for c in document["cases"]] == [RIGHT[n] for n in range(1, 9)]
    coverage = document["summary"]["tool_coverage"]
    assert (
        coverage["available"] == ["convert_time", "get_current_time"]
        and coverage["coverage"] == 0.5
    )
    assert coverage["never_called"] == ["get_current_time"] and coverage["calls"] == {
        "convert_time": 14
    }
    # every model call had the QA system prompt and the tools of the real server
    bodies = api.message_requests
    assert all(system_text(b) == prompts.QA_SYSTEM_PROMPT for b in bodies)
    assert {t["name"] for t in bodies[0]["tools"]} == {"convert_time", "get_current_time"}
    # the markdown report: accuracy, each task's answers, durations, tool calls, summary and feedback
    markdown = report.read_text()
    assert "### QA accuracy" in markdown and "| Accuracy | 8/16 runs (50%; 95% interval" in markdown
    assert (
        "**Expected answer**: `05:30` (exact)" in markdown and "| 1 | `5:30 AM` | ❌ |" in markdown
    )
    assert (
        "convert_time ×1" in markdown and "**Feedback** (run 1): convert_time is clear" in markdown
    )
    assert "`get_current_time` |  | never called |" in markdown
    # the terminal
    assert (
        "QA accuracy 50%: 8/16 runs correct" in stdout
        and "feedback on the tools: convert_time is clear" in stdout
    )
    assert "tool coverage 1/2 (50%) · never called: get_current_time" in " ".join(stdout.split())
    # JUnit and the per-run CSV
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("8", "4")
    runs = list(csv.DictReader(io.StringIO(rows.read_text())))
    assert len(runs) == 16 and {r["verdict"] for r in runs if r["test_name"] == "task-2"} == {
        "fail"
    }
    assert any(WHY[2] in r["reasons"] for r in runs)

    # --resume: nothing runs again, the same verdicts come back
    before = len(api.message_requests)
    code, stdout, _ = cli(
        "--qa", time_suite, "--server", TIME_SERVER, "-i", "2", "-o", out, "--resume"
    )
    assert (
        code == 1 and len(api.message_requests) == before and "resuming: 16 run(s) kept" in stdout
    )
    assert json.loads(out.read_text())["qa"]["correct"] == 8


def test_qa_dry_run_max_cost_and_the_default_turn_limit(cli, api, tmp_path: Path, time_suite: Path):
    api.responder = time_model
    code, stdout, _ = cli("--qa", time_suite, "--server", TIME_SERVER, "--dry-run")
    assert code == 0 and api.message_requests == [] and "runs: 8" in stdout
    assert f"at most {8 * C.DEFAULT_QA_MAX_TURNS:,})" in stdout
    code, stdout, _ = cli(
        "--qa",
        time_suite,
        "--server",
        TIME_SERVER,
        "--concurrency",
        "1",
        "--max-cost",
        "0.000001",
        "--json",
    )
    assert (
        code == 1
        and "stopped at --max-cost" in stdout + _
        and json.loads(stdout)["qa"]["runs"] == 1
    )

    def loops(body: dict) -> dict:
        return reply(tool_use("get_current_time", {"timezone": "UTC"}))

    api.responder = loops
    one = write(tmp_path / "one.xml", qa_xml([("What time is it in UTC?", "12:00", None)]))
    start = len(api.message_requests)
    code, stdout, _ = cli("--qa", one, "--server", TIME_SERVER, "--json")
    assert len(api.message_requests) - start == C.DEFAULT_QA_MAX_TURNS == 40
    assert json.loads(stdout)["results"][0]["ended_by"] == "max_turns"
    start = len(api.message_requests)
    cli("--qa", one, "--server", TIME_SERVER, "--max-turns", "3")
    assert len(api.message_requests) - start == 3


def test_answer_match_overrides_every_pair(cli, api, tmp_path: Path):
    def answers(body: dict) -> dict:
        return reply(text("<response>  05:30 </response>"))

    api.responder = answers
    suite = write(
        tmp_path / "s.xml", qa_xml([("When?", "05:30:00", None), ("Again?", "05:30", "regex")])
    )
    code, stdout, _ = cli("--qa", suite, "--server", TIME_SERVER, "--json")
    assert code == 1 and [c["passed"] for c in json.loads(stdout)["cases"]] == [False, True]
    code, stdout, _ = cli(
        "--qa", suite, "--server", TIME_SERVER, "--answer-match", "contains", "--json"
    )
    document = json.loads(stdout)
    assert [t["answer_match"] for t in document["qa"]["task_results"]] == ["contains", "contains"]
    assert [c["passed"] for c in document["cases"]] == [False, True]  # "05:30:00" is not in "05:30"


# ============================================================================ CSV suites and markdown tests
USERS_SQL = "SELECT COUNT(*) AS n FROM users"


def counts_users(say: Callable[[str], str]) -> Callable[[dict], dict]:
    """Counts the example warehouse's users with run_sql_query, then answers from the real result."""

    def model(body: dict) -> dict:
        if body.get("tool_choice"):
            return reply(
                tool_use("grade", {"passed": False, "score": 0.2, "evidence": "6 is not six"})
            )
        results = tool_results(body)
        if not results:
            return reply(tool_use("run_sql_query", {"sql": USERS_SQL}))
        count = re.findall(r"^\d+$", result_text(results[0]), re.MULTILINE)[0]
        return reply(text(say(count)))

    return model


def test_csv_expected_answers_are_graded_end_to_end(cli, api, tmp_path: Path):
    suite = write(
        tmp_path / "answers.csv",
        "test_name,user_prompt,expected_tools,expected_answer,answer_match\n"
        "exact,How many users are there?,run_sql_query,6,\n"
        "numeric,How many users do we have?,run_sql_query,6.0,numeric\n"
        "wrong,Count the users,run_sql_query,7,normalized\n"
        "judged,Count our users,run_sql_query,six,judge\n"
        "no_answer,List the users,run_sql_query,,\n",
    )
    api.responder = counts_users(lambda n: f"There are {n} users.\n<response>{n}</response>")
    code, stdout, _ = cli("--csv", suite, "--server-module", EXAMPLE_SERVER, "--json")
    cases = {c["name"]: c for c in json.loads(stdout)["cases"]}
    assert code == 1 and {n: c["passed"] for n, c in cases.items()} == {
        "exact": True,
        "numeric": True,
        "wrong": False,
        "judged": False,
        "no_answer": True,
    }
    assert list(cases["wrong"]["reasons"]) == ['answer "6" is not "7", even normalized']
    assert not any(r.startswith("answer ") for r in cases["judged"]["reasons"]), (
        "judge answers are the judge's"
    )
    assert any("6 is not six" in r for r in cases["judged"]["reasons"])


@pytest.mark.parametrize(
    "row, fragment",
    [
        (
            "a,q,,6,fuzzy",
            "test 'a': answer_match 'fuzzy' is not one of exact, normalized, numeric, contains, regex, judge",
        ),
        (
            "a,q,,six,numeric",
            "test 'a': answer_match numeric needs an expected answer that is one number",
        ),
        ("a,q,,,normalized", "test 'a': answer_match normalized needs an expected answer"),
        ("a,q,,6,numeric:lots", "the tolerance must be a number or a percentage"),
    ],
)
def test_a_bad_answer_column_is_its_rows_error(
    cli, tmp_path: Path, no_api_key, row: str, fragment: str
):
    suite = write(
        tmp_path / "s.csv",
        "test_name,user_prompt,expected_tools,expected_answer,answer_match\n"
        "ok,q,,6,exact\n" + row + "\n",
    )
    code, _, stderr = cli("--csv", suite)
    assert (
        code == 2
        and stderr.startswith(f"error: {suite}:3: ")
        and fragment in stderr
        and stderr.count("\n") == 1
    )


def test_markdown_tests_take_an_expected_answer(tmp_path: Path):
    path = write(
        tmp_path / "users.md",
        "---\nname: users\ntype: knowledge\nanswer_match: numeric:0.5\n---\n\n"
        "# Prompt\n\nHow many users are there?\n\n# Expected Answer\n\n6\n",
    )
    test = E.load_markdown_test(path)
    assert (test.expected_answer, test.answer_match) == ("6", "numeric:0.5")
    run = lambda answer: ClaudeRun(query="q", run=1, answer=answer)  # noqa: E731
    assert score_test_run(test, run("There are 6 users."))["passed"]
    assert score_test_run(test, run("<response>6.4</response>"))["passed"]
    failed = score_test_run(test, run("There are 7 users."))
    assert not failed["passed"] and run_score_reasons(test, failed) == [
        "answer 7 is 1 off 6 (tolerance 0.5)"
    ]
    plain = E.load_markdown_test(
        write(tmp_path / "p.md", "# Prompt\nq\n\n# Expected Answer\nsarah_dev\n")
    )
    assert (plain.expected_answer, plain.answer_match) == ("sarah_dev", "exact")
    assert run_score_reasons(plain, score_test_run(plain, run("sara_dev"))) == [
        'answer "sara_dev" is not "sarah_dev" (exact)'
    ]
    [case] = markdown_tool_cases([test])
    assert (case.expected_answer, case.answer_match) == ("6", "numeric:0.5")


@pytest.mark.parametrize(
    "content, line, fragment",
    [
        (
            "---\nanswer_match: fuzzy\n---\n# Prompt\nq\n# Expected Answer\n6\n",
            2,
            "answer_match 'fuzzy' is not one of",
        ),
        (
            "---\nanswer_match: [a]\n---\n# Prompt\nq\n# Expected Answer\n6\n",
            2,
            "'answer_match' must be a text value",
        ),
        (
            "---\nanswer_match: numeric\n---\n# Prompt\nq\n",
            2,
            "answer_match numeric needs an expected answer",
        ),
        ("# Prompt\nq\n\n# Expected Answer\nabout six\n", None, None),
    ],
)
def test_a_bad_markdown_answer_names_its_line(
    tmp_path: Path, content: str, line: int | None, fragment: str | None
):
    path = write(tmp_path / "t.md", content)
    if line is None:
        assert E.load_markdown_test(path).expected_answer == "about six"
        return
    with pytest.raises(E.InputError) as caught:
        E.load_markdown_test(path)
    assert caught.value.line == line and fragment in str(caught.value)


# ============================================================================ tool coverage
def test_tool_coverage_of_a_suite_against_the_example_server(cli, api, tmp_path: Path):
    suite = write(
        tmp_path / "coverage.csv",
        "test_name,user_prompt,expected_tools,expected_args\n"
        "connections,Which connections do I have?,get_existing_connections,\n"
        'describe,Describe the orders table,,"{""describe_table"": {""table"": ""orders""}}"\n',
    )

    def model(body: dict) -> dict:
        if tool_results(body):
            return reply(text("Done."))
        if "connections" in user_query(body):
            return reply(tool_use("get_existing_connections"), tool_use("get_existing_connections"))
        return reply(tool_use("list_warehouse_tables"))

    api.responder = model
    report = tmp_path / "report.md"
    code, stdout, stderr = cli(
        "--csv",
        suite,
        "--server-module",
        EXAMPLE_SERVER,
        "-o",
        tmp_path / "r.json",
        "--report",
        report,
    )
    assert code == 1, stdout + stderr
    coverage = json.loads((tmp_path / "r.json").read_text())["summary"]["tool_coverage"]
    assert coverage == {
        "available": PROFILE_TOOLS,
        "expected": ["describe_table", "get_existing_connections"],
        "called": ["get_existing_connections", "list_warehouse_tables"],
        "never_called": [
            t
            for t in PROFILE_TOOLS
            if t not in ("get_existing_connections", "list_warehouse_tables")
        ],
        "expected_not_called": ["describe_table"],
        "unexpected": ["list_warehouse_tables"],
        "calls": {"get_existing_connections": 2, "list_warehouse_tables": 1},
        "coverage": 0.2222,
    }
    markdown = report.read_text()
    assert (
        "### Tool coverage" in markdown
        and "2/9 of the servers' tools called in some run (22%)." in markdown
    )
    assert (
        "| `describe_table` | yes | never called |" in markdown
        and "| `get_existing_connections` | yes | 2 |" in markdown
    )
    assert "Called, but expected by no case: `list_warehouse_tables`" in markdown
    assert "Expected, but never called: `describe_table`" in markdown
    flat = " ".join(stdout.split())
    assert "tool coverage 2/9 (22%)" in flat and "expected but never called: describe_table" in flat
    assert "called but expected by no case: list_warehouse_tables" in flat


def test_tool_coverage_is_pure_and_counts_tools_no_server_offers():
    case = run_types.TestCase(name="c", prompt="q", expected_tools=["a"])
    t = Transcript(
        case=case, iteration=1, model="m", tool_calls=[ToolCall("a", {}), ToolCall("ghost", {})]
    )
    coverage = tool_coverage([case], [t], ["a", "b"])
    assert (coverage.called, coverage.never_called, coverage.unexpected, coverage.coverage) == (
        ["a", "ghost"],
        ["b"],
        ["ghost"],
        0.5,
    )
    assert tool_coverage([], [], []).coverage is None


def test_any_root_element_holds_qa_pairs_as_mcp_builder_reads_them(tmp_path: Path):
    for root in ("evaluation", "evaluations", "tests"):
        path = write(tmp_path / f"{root}.xml", f"<{root}>\n" + PAIR + f"</{root}>\n")
        assert [c.prompt for c in E.load_qa_suite(path)] == ["q"]
