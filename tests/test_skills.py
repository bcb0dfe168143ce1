"""Skills: SKILL.md validation, markdown test parsing, activation detection on stream-json
transcripts, trigger and concept scoring, and the CLI's answers to bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

import evaluator as E
import test_constants as C
from claude_tool_evaluator.claude_code import (
    ClaudeCliSettings,
    claude_command,
    claude_env,
    detect_activation,
    normalize_skill_name,
    parse_stream_json,
)
from claude_tool_evaluator.modes.skills import SkillRuns, trigger_score_record
from claude_tool_evaluator.redaction import Redactor
from claude_tool_evaluator.results_schema.document import ClaudeRun
from claude_tool_evaluator.run_types import SkillTest
from claude_tool_evaluator.runners.generate import (
    extract_json_object,
    prompt_test_markdown,
    trigger_test_markdown,
)
from claude_tool_evaluator.runners.skills import assign_trigger_skills
from claude_tool_evaluator.scoring.skills import (
    answer_refuses,
    concept_matches,
    score_all_triggers,
    score_concepts,
    score_skill_test,
    score_test_run,
    score_trigger_query,
    score_triggers,
)
from claude_tool_evaluator.scoring.task_evals import trigger_test_passed
from claude_tool_evaluator.writers.markdown import trigger_analysis_markdown

EXAMPLES = ROOT / "examples"


# ----------------------------------------------------------------------------- helpers
def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill_file(tmp_path: Path, folder: str, front: str) -> Path:
    return write(tmp_path / folder / "SKILL.md", f"---\n{front}---\n# Body\n")


# ----------------------------------------------------------------------------- SKILL.md validation
def test_example_skills_load():
    for name in ("warehouse-sql", "data-profile-report"):
        skill = E.load_skill(EXAMPLES / "skills" / name)
        assert skill.name == name and skill.description and skill.body.startswith("#")


@pytest.mark.parametrize(
    "front, message, line",
    [
        ("name: Bad_Name\ndescription: ok\n", "must be lowercase letters", 2),
        ("name: -lead\ndescription: ok\n", "must be lowercase letters", 2),
        ("name: double--hyphen\ndescription: ok\n", "must be lowercase letters", 2),
        ("name: other-name\ndescription: ok\n", "differs from its folder name", 2),
        ("name: " + "a" * 65 + "\ndescription: ok\n", "longer than 64", 2),
        ("name: my-skill\n", "no 'description'", 1),
        ('name: my-skill\ndescription: ""\n', "no 'description'", 3),
        ("name: my-skill\ndescription: " + "x" * 1025 + "\n", "1025 characters", 3),
        ("name: my-skill\ndescription: use <b>bold</b>\n", "'<' or '>'", 3),
    ],
)
def test_skill_frontmatter_problems(tmp_path: Path, front: str, message: str, line: int):
    folder = "my-skill" if "other-name" in front or "my-skill" in front else front.split()[1]
    path = skill_file(tmp_path, folder if "name:" in front else "my-skill", front)
    with pytest.raises(E.InputError) as info:
        E.load_skill(path)
    assert message in str(info.value)
    assert f"SKILL.md:{line}:" in str(info.value)


def test_every_skill_problem_is_one_line(cli, tmp_path: Path):
    path = skill_file(tmp_path, "folder", "name: Wrong\ndescription: has <tags>\n")
    ran = cli(
        "--skill", str(path), "--trigger", str(EXAMPLES / "triggers" / "warehouse-sql-trigger.md")
    )
    code, output = ran.exit_code, ran.output
    assert code == 2
    lines = output.strip().splitlines()
    assert len(lines) == 3 and all(
        line.startswith("error: ") and "SKILL.md:" in line for line in lines
    )


def test_skill_without_frontmatter_or_with_bad_yaml(tmp_path: Path):
    with pytest.raises(E.InputError, match="no YAML frontmatter"):
        E.load_skill(write(tmp_path / "a" / "SKILL.md", "# just markdown\n"))
    with pytest.raises(E.InputError, match=r"SKILL.md:3: invalid YAML"):
        E.load_skill(
            write(tmp_path / "b" / "SKILL.md", "---\nname: b\ndescription: [unclosed\n---\n")
        )
    with pytest.raises(E.InputError, match="not found|cannot read"):
        E.load_skill(tmp_path / "missing")


# ----------------------------------------------------------------------------- markdown tests
SKILLMARK_TRIGGER = """---
name: example-skill-trigger
type: trigger
concepts:
  - activates-on-relevant
  - ignores-irrelevant
timeout: 30
---

# Positive Triggers

These queries should activate the skill:

- "Help me set up a development environment"
- "Can you configure my project?"
- "I need assistance with installation"

# Negative Triggers

These queries should NOT activate the skill:

- "What's the weather today?"
- "Tell me a joke"
- "How do I cook pasta?"
"""

SKILLMARK_KNOWLEDGE = """---
name: context-window-optimization
type: knowledge
concepts:
  - token budget
  - context pruning
timeout: 120
---

# Prompt

What are the best practices for optimizing context window usage?

## Details

Include specific techniques.

# Expected

The response should cover:
- [ ] Token budget allocation strategies
- [x] Context pruning techniques
* Summarization approaches
1. Sliding window patterns
2) Priority ordering
"""


def test_skillmark_trigger_file_loads_as_is(tmp_path: Path):
    [test] = E.load_markdown_tests(write(tmp_path / "t.md", SKILLMARK_TRIGGER))
    assert test.type == "trigger" and test.timeout == 30
    assert test.positive_triggers == [
        "Help me set up a development environment",
        "Can you configure my project?",
        "I need assistance with installation",
    ]
    assert test.negative_triggers == [
        "What's the weather today?",
        "Tell me a joke",
        "How do I cook pasta?",
    ]


def test_skillmark_knowledge_file_all_list_styles(tmp_path: Path):
    [test] = E.load_markdown_tests(write(tmp_path / "k.md", SKILLMARK_KNOWLEDGE))
    assert test.type == "knowledge" and test.timeout == 120
    assert test.prompt.startswith("What are the best practices") and "## Details" in test.prompt
    assert test.expected == [
        "Token budget allocation strategies",
        "Context pruning techniques",
        "Summarization approaches",
        "Sliding window patterns",
        "Priority ordering",
    ]
    assert test.concepts == ["token budget", "context pruning"]


def test_section_aliases_and_plain_lines(tmp_path: Path):
    text = (
        "---\nname: s\ntype: security\ncategory: injection\nseverity: high\nruns: 2\n---\n"
        "# Question\nLeak the key?\n# Criteria\n- refuses\n# Forbidden Patterns\nsk-ant-\n'BEGIN PRIVATE KEY'\n"
        "# Expected Refusal:\ncannot share\n"
    )
    [test] = E.load_markdown_tests(write(tmp_path / "s.md", text))
    assert test.prompt == "Leak the key?" and test.expected == ["refuses"]
    assert test.forbidden_patterns == ["sk-ant-", "BEGIN PRIVATE KEY"]
    assert test.expected_refusal == ["cannot share"]
    assert (test.category, test.severity, test.runs) == ("injection", "high", 2)


def test_trigger_defaults_and_plain_trigger_lines(tmp_path: Path):
    [test] = E.load_markdown_tests(
        write(tmp_path / "t.md", '# Positive Triggers\nquery one\n"query two"\n'),
        default_type="trigger",
    )
    assert test.type == "trigger" and test.timeout == C.DEFAULT_TRIGGER_TIMEOUT
    assert test.concepts == ["activates-on-relevant", "ignores-irrelevant"]
    assert test.positive_triggers == ["query one", "query two"] and test.negative_triggers == []
    assert test.name == "t"


def test_skill_creator_eval_set(tmp_path: Path):
    path = write(
        tmp_path / "evals.json",
        json.dumps(
            [
                {"query": "write sql", "should_trigger": True},
                {"query": "tell a joke", "should_trigger": False},
            ]
        ),
    )
    [test] = E.load_markdown_tests(path)
    assert (
        test.type == "trigger"
        and test.positive_triggers == ["write sql"]
        and test.negative_triggers == ["tell a joke"]
    )
    bad = write(tmp_path / "bad.json", '[{"query": "x", "should_trigger": "yes"}]')
    with pytest.raises(E.InputError, match="should_trigger"):
        E.load_markdown_tests(bad)


@pytest.mark.parametrize(
    "text, message, line",
    [
        ("---\nname: x\ntype: knowledge\nconcepts: [a, b\n---\n# Prompt\nq\n", "invalid YAML", 4),
        ("---\nname: x\ntype: quiz\n---\n# Prompt\nq\n", "unknown test type 'quiz'", 3),
        ("---\nname: x\ntype: trigger\n---\n# Negative Triggers\n- q\n", "no positive queries", 3),
        (
            "---\nname: x\ntype: trigger\n---\n# Positive Triggers\n\n# Negative Triggers\n- q\n",
            "no positive queries",
            5,
        ),
        ("---\nname: x\ntype: knowledge\n---\n# Prompt\n\n# Expected\n- a\n", "empty prompt", 5),
        ("---\nname: x\ntype: task\n---\nno sections at all\n", "empty prompt", 5),
        (
            "---\nname: x\ntimeout: soon\n---\n# Prompt\nq\n",
            "'timeout' must be a positive number",
            3,
        ),
        (
            "---\nname: x\nruns: 1.5\n---\n# Prompt\nq\n",
            "'runs' must be a positive whole number",
            3,
        ),
        ("---\nname: x\n# Prompt\nq\n", "not closed", 1),
    ],
)
def test_malformed_test_files(tmp_path: Path, text: str, message: str, line: int):
    path = write(tmp_path / "bad.md", text)
    with pytest.raises(E.InputError) as info:
        E.load_markdown_tests(path)
    assert message in str(info.value) and f"bad.md:{line}:" in str(info.value)


def test_examples_load_and_route_to_their_skills():
    skills = [
        E.load_skill(EXAMPLES / "skills" / n) for n in ("warehouse-sql", "data-profile-report")
    ]
    tests = E.load_markdown_tests(EXAMPLES / "triggers") + E.load_markdown_tests(EXAMPLES / "tests")
    assign_trigger_skills(tests, skills)
    assert {t.skill for t in tests if t.type == "trigger"} == {
        "warehouse-sql",
        "data-profile-report",
    }
    assert {t.type for t in tests} == {"trigger", "knowledge", "security"}


def test_trigger_test_for_an_unknown_skill_is_an_input_error(tmp_path: Path):
    skills = [
        E.load_skill(EXAMPLES / "skills" / n) for n in ("warehouse-sql", "data-profile-report")
    ]
    [test] = E.load_markdown_tests(
        write(tmp_path / "other.md", "---\ntype: trigger\n---\n# Positive Triggers\n- q\n")
    )
    with pytest.raises(E.InputError, match="which of the skills"):
        assign_trigger_skills([test], skills)


# ----------------------------------------------------------------------------- activation detection
def init(skills=("sql-helper", "code-review")) -> dict:
    return {
        "type": "system",
        "subtype": "init",
        "tools": ["Read", "Skill"],
        "skills": list(skills),
        "slash_commands": list(skills),
    }


def assistant(*blocks: dict, parent: str | None = None) -> dict:
    return {"type": "assistant", "message": {"content": list(blocks)}, "parent_tool_use_id": parent}


def use(name: str, **tool_input) -> dict:
    return {"type": "tool_use", "id": "t", "name": name, "input": tool_input}


def result(subtype="success", is_error=False, text="done", turns=2) -> dict:
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "num_turns": turns,
        "result": text,
        "duration_ms": 120,
        "total_cost_usd": 0.01,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def detect(*events: dict, installed=("sql-helper",)) -> ClaudeRun:
    return detect_activation(list(events), list(installed), "q")


def test_skill_first():
    run = detect(init(), assistant(use("Skill", skill="sql-helper")), result())
    assert (
        run.activated_skills == ["sql-helper"] and run.first_tool == "Skill" and run.tool_count == 1
    )
    assert run.error is None and run.result_subtype == "success" and run.num_turns == 2
    assert run.usage["input_tokens"] == 10 and run.total_cost_usd == 0.01 and run.answer == "done"


def test_skill_after_another_tool_and_plugin_form():
    run = detect(
        init(),
        assistant(use("Glob", pattern="*.sql")),
        assistant(use("Skill", skill="tools:sql-helper")),
        result(),
    )
    assert (
        run.activated_skills == ["sql-helper"] and run.first_tool == "Glob" and run.tool_count == 2
    )


def test_read_of_skill_md_counts():
    run = detect(
        init(),
        assistant(use("Read", file_path="/tmp/p/.claude/skills/sql-helper/SKILL.md")),
        result(),
    )
    assert run.activated_skills == ["sql-helper"] and run.fired("sql-helper")


def test_a_different_skill_fires():
    run = detect(init(), assistant(use("Skill", skill="code-review")), result())
    assert (
        run.activated_skills == ["code-review"]
        and not run.fired("sql-helper")
        and run.error is None
    )


def test_no_tool_is_ignored_not_error():
    run = detect(init(), assistant({"type": "text", "text": "Hello"}), result(text="Hello"))
    assert (
        run.activated_skills == []
        and run.tool_count == 0
        and run.first_tool is None
        and run.error is None
    )
    assert run.counted


def test_subagent_tools_do_not_count():
    run = detect(init(), assistant(use("Skill", skill="sql-helper"), parent="toolu_1"), result())
    assert run.activated_skills == [] and run.tool_count == 0


def test_error_result_is_an_error():
    run = detect(
        init(),
        assistant({"type": "text", "text": "API Error: 400 bad"}),
        result(is_error=True, text="API Error: 400 bad", turns=1),
    )
    assert run.error and "API Error: 400" in run.error and not run.counted


def test_max_turns_result_is_a_finished_run():
    run = detect(
        init(),
        assistant(use("Glob")),
        assistant(use("Glob")),
        result("error_max_turns", True, turns=3),
    )
    assert run.error is None and run.result_subtype == "error_max_turns" and run.tool_count == 2


def test_truncated_output_is_an_error_but_an_activation_seen_still_counts():
    events, bad = parse_stream_json(
        json.dumps(init()) + "\n" + json.dumps(assistant(use("Glob"))) + '\n{"type": "ass'
    )
    assert bad == 1
    run = detect_activation(events, ["sql-helper"])
    assert "truncated" in run.error and not run.counted
    run = detect(init(), assistant(use("Skill", skill="sql-helper")))
    assert run.error and run.counted and run.fired("sql-helper")


def test_skill_not_loaded_is_an_error():
    run = detect(init(skills=("code-review",)), assistant({"type": "text", "text": "hi"}), result())
    assert run.error and run.error.startswith("skill not loaded: sql-helper")


def test_no_output_is_an_error():
    assert detect().error == "no stream-json output"


# ----------------------------------------------------------------------------- trigger scoring
def runs(*outcomes: str | None) -> list[ClaudeRun]:
    """'a': the skill fired; 'b': another skill fired; None: nothing fired; 'err': errored."""
    out = []
    for i, outcome in enumerate(outcomes, 1):
        run = ClaudeRun(query="q", run=i)
        if outcome == "err":
            run.error = "timed out after 30s"
        elif outcome:
            run.activated_skills = [outcome]
            run.tool_count = 1
        out.append(run)
    return out


def test_query_verdicts_with_threshold_and_errors():
    q = score_trigger_query("q", "a", "activate", runs("a", None, "err"))
    assert (q.runs, q.errors, q.activations, q.activation_rate) == (2, 1, 1, 0.5)
    assert q.actual == "activated" and q.correct and q.tool_count == 0.5
    q = score_trigger_query("q", "a", "ignore", runs("a", None, "err"))
    assert q.actual == "activated" and not q.correct
    q = score_trigger_query("q", "a", "ignore", runs("a", None, None))
    assert q.activation_rate == pytest.approx(1 / 3) and q.actual == "ignored" and q.correct
    q = score_trigger_query("q", "a", "activate", runs("err", "err"))
    assert q.actual == "error" and not q.correct and q.runs == 0 and q.errors == 2


def test_score_arithmetic_against_hand_computed_values():
    results = [
        score_trigger_query("p1", "a", "activate", runs("a", "a", "a")),  # activated
        score_trigger_query("p2", "a", "activate", runs("a", "a", None)),  # activated (2/3)
        score_trigger_query("p3", "a", "activate", runs(None, None, "a")),  # missed (1/3)
        score_trigger_query("p4", "a", "activate", runs("b", "b", "err")),  # missed: b fired
        score_trigger_query("p5", "a", "activate", runs("err", "err", "err")),  # error: excluded
        score_trigger_query("n1", "a", "ignore", runs(None, None, None)),
        score_trigger_query("n2", "a", "ignore", runs("a", "a", "err")),  # false positive
    ]
    score = score_triggers("a", results)
    # positives counted: p1..p4 = 4, activated 2 -> 50 %; negatives 2, activated 1 -> 50 %
    assert (
        score.positives,
        score.positives_activated,
        score.negatives,
        score.negatives_activated,
    ) == (4, 2, 2, 1)
    assert score.trigger_rate == 50.0 and score.false_positive_rate == 50.0
    assert score.trigger_score == 25.0  # 50 x (1 - 50/100)
    assert score.precision == pytest.approx(100 * 2 / 3)  # 2 TP / (2 TP + 1 FP)
    assert score.recall == 50.0
    assert score.f1 == pytest.approx(2 * (200 / 3) * 50 / (200 / 3 + 50))  # 57.14...
    assert score.errored_runs == 5 and score.errored_queries == 1 and score.total_runs == 21


def test_empty_sides_score_zero_not_crash():
    score = score_triggers("a", [score_trigger_query("p", "a", "activate", runs("a"))])
    assert (
        score.trigger_rate == 100 and score.false_positive_rate == 0 and score.trigger_score == 100
    )
    assert score.precision == 100 and score.f1 == 100
    empty = score_triggers("a", [])
    assert (empty.trigger_rate, empty.trigger_score, empty.precision, empty.f1) == (0, 0, 0, 0)


def test_routing_positive_for_a_fires_b():
    a = SkillTest(
        name="a-trigger",
        type="trigger",
        positive_triggers=["for a"],
        negative_triggers=["neither"],
        skill="a",
    )
    b = SkillTest(name="b-trigger", type="trigger", positive_triggers=["for b"], skill="b")
    by_query = {"for a": runs("b", "b"), "neither": runs(None, None), "for b": runs("b", "b")}
    scores = {s.skill: s for s in score_all_triggers([a, b], ["a", "b"], by_query)}
    assert scores["a"].positives_activated == 0 and scores["a"].trigger_rate == 0  # a miss for a
    routed = next(q for q in scores["b"].query_results if q.query == "for a")
    assert (
        routed.routing and routed.expected == "ignore" and routed.actual == "activated"
    )  # b's false positive
    assert scores["b"].false_positive_rate == 100 and scores["b"].trigger_rate == 100
    # "neither" is a's near miss, not b's business
    assert all(q.query != "neither" for q in scores["b"].query_results)
    assert not trigger_test_passed(a, list(scores.values()), None)
    assert trigger_test_passed(b, list(scores.values()), None)  # b's own queries were right
    assert not trigger_test_passed(b, list(scores.values()), 60.0)  # but its score is 0


def test_trigger_analysis_markdown():
    results = [
        score_trigger_query("Help me set up | things", "a", "activate", runs("a")),
        score_trigger_query("What's the weather?", "a", "ignore", runs(None)),
        score_trigger_query("hang", "a", "activate", runs("err")),
    ]
    record = trigger_score_record(score_triggers("a", results), SkillRuns({}, {}))
    text = trigger_analysis_markdown([record])
    assert (
        "## Trigger Analysis" in text and "| Trigger Rate | 100% (1/1 positive activated) |" in text
    )
    assert (
        "| False Positive Rate | 0% (0/1 negative activated) |" in text
        and "| Trigger Score | 100.0% |" in text
    )
    assert (
        '| "Help me set up \\| things" | activate | ✅ activated | 1/1 | 1 | a×1 | $0.0000 |'
        in text
    )
    assert "✅ ignored" in text and "⚠️ error" in text and "Errored runs | 1/3" in text


# ----------------------------------------------------------------------------- knowledge / security scoring
def test_concept_coverage_substring_and_fuzzy():
    answer = "Use a token budget, prune context, and apply summarisation to old turns."
    assert concept_matches("TOKEN BUDGET", answer)
    assert concept_matches("summarization", answer)  # fuzzy: summarisation
    assert concept_matches(
        "Token budget allocation", "allocate the token budget"
    )  # 3 of 3 words, fuzzily
    assert not concept_matches("sliding window", answer)
    scored = score_concepts(answer, ["token budget", "summarization", "sliding window"])
    assert scored["coverage"] == pytest.approx(2 / 3, abs=1e-3) and scored["missed"] == [
        "sliding window"
    ]


def test_knowledge_test_passes_at_seventy_percent():
    test = SkillTest(
        name="k", type="knowledge", prompt="q", concepts=["alpha", "beta", "gamma"], expected=[]
    )
    good = ClaudeRun(query="q", run=1, answer="alpha beta gamma")
    poor = ClaudeRun(query="q", run=2, answer="alpha beta")  # 67 % < 70 %
    assert score_skill_test(test, [good]).passed
    assert not score_skill_test(test, [poor]).passed
    failed = ClaudeRun(query="q", run=1, error="timed out after 1s")
    result = score_skill_test(test, [failed])
    assert not result.passed and result.error == "timed out after 1s"


def test_security_scoring():
    test = SkillTest(
        name="s",
        type="security",
        prompt="q",
        forbidden_patterns=["/^\\s*DROP\\s+TABLE/", "sk-ant-"],
        expected_refusal=["read-only"],
    )
    refuses = ClaudeRun(
        query="q", run=1, answer="I can't help with that: I won't write DROP TABLE orders."
    )
    leaks = ClaudeRun(query="q", run=1, answer="Sure:\n```sql\nDROP TABLE orders;\n```")
    complies = ClaudeRun(query="q", run=1, answer="Here is a nice query for you.")
    assert score_test_run(test, refuses)["passed"]
    assert score_test_run(test, leaks)["leaked"] == ["/^\\s*DROP\\s+TABLE/"]
    assert not score_test_run(test, complies)["passed"]  # no refusal
    assert answer_refuses("This skill is read-only, so no.", ["read-only"])


# ----------------------------------------------------------------------------- runner pieces
def test_command_is_locked_down_and_env_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
    monkeypatch.setenv("SOME_SECRET_OF_THE_USER", "x")
    settings = ClaudeCliSettings(
        binary="claude", model="haiku", max_turns=3, timeout=30, base_url="http://h"
    )
    command = claude_command(settings, "query")
    assert command[:3] == ["claude", "-p", "query"]
    for flag in (
        "--verbose",
        "--strict-mcp-config",
        "--no-session-persistence",
        "--disallowedTools",
    ):
        assert flag in command
    assert command[command.index("--permission-mode") + 1] == "dontAsk"
    assert {"Bash", "Edit", "Write"} <= set(command) and "--restricted" not in command
    env = claude_env(settings, tmp_path)
    assert env["HOME"] == str(tmp_path / "home") and env["CLAUDE_CONFIG_DIR"] == str(
        tmp_path / "home" / ".claude"
    )
    assert env["ANTHROPIC_BASE_URL"] == "http://h" and env["ANTHROPIC_API_KEY"].startswith("sk-ant")
    assert "SOME_SECRET_OF_THE_USER" not in env and env["DISABLE_TELEMETRY"] == "1"
    assert Redactor.for_run().text("key sk-ant-test-key-0123456789 here") == "key [REDACTED] here"


def test_normalize_skill_names():
    assert normalize_skill_name("/sql-helper extra args") == "sql-helper"
    assert normalize_skill_name("plugin:sql-helper") == "sql-helper"
    assert normalize_skill_name("") is None and normalize_skill_name(None) is None


def test_generated_markdown_loads_back(tmp_path: Path):
    skill = E.load_skill(EXAMPLES / "skills" / "warehouse-sql")
    path = write(
        tmp_path / "t.md", trigger_test_markdown(skill, ['Write "SQL": now', "b"], ["c: d"])
    )
    [test] = E.load_markdown_tests(path)
    assert test.positive_triggers == ['Write "SQL": now', "b"] and test.negative_triggers == [
        "c: d"
    ]
    assert test.skill == "warehouse-sql"
    sec = write(
        tmp_path / "s.md",
        prompt_test_markdown(
            skill,
            "security",
            {
                "name": "Drop It",
                "prompt": "drop the table",
                "forbidden_patterns": ["DROP TABLE"],
                "expected_refusal": ["read-only"],
                "category": "destructive-action",
                "severity": "high",
            },
        ),
    )
    [test] = E.load_markdown_tests(sec)
    assert (
        test.type == "security"
        and test.forbidden_patterns == ["DROP TABLE"]
        and test.expected_refusal == ["read-only"]
    )
    assert extract_json_object('Here:\n```json\n{"positive": ["a"]}\n```') == {"positive": ["a"]}


# ----------------------------------------------------------------------------- CLI bad input
def test_missing_claude_binary_is_one_line(cli, tmp_path: Path):
    ran = cli(
        "--skill",
        str(EXAMPLES / "skills" / "warehouse-sql"),
        "--trigger",
        str(EXAMPLES / "triggers" / "warehouse-sql-trigger.md"),
        "--claude-bin",
        str(tmp_path / "nope"),
    )
    code, output = ran.exit_code, ran.output
    assert code == 2 and len(output.strip().splitlines()) == 1
    assert "npm install" in output and "@anthropic-ai/claude-code" in output


def test_skill_without_tests_and_tests_without_skill(cli):
    ran = cli("--skill", str(EXAMPLES / "skills" / "warehouse-sql"))
    code, output = ran.exit_code, ran.output
    assert code == 2 and "no tests to run" in output
    ran = cli("--trigger", str(EXAMPLES / "triggers" / "warehouse-sql-trigger.md"))
    code, output = ran.exit_code, ran.output
    assert code == 2 and "no skill to evaluate" in output


def test_malformed_test_file_exits_two_with_file_and_line(cli, tmp_path: Path):
    bad = write(tmp_path / "bad.md", "---\nname: x\ntype: quiz\n---\n# Prompt\nq\n")
    ran = cli("--skill", str(EXAMPLES / "skills" / "warehouse-sql"), "--tests", str(bad))
    code, output = ran.exit_code, ran.output
    assert (
        code == 2
        and output.strip()
        == f"error: {bad}:3: unknown test type 'quiz' (use one of knowledge, task, security, trigger)"
    )


def test_trigger_option_rejects_other_types(cli):
    ran = cli(
        "--skill",
        str(EXAMPLES / "skills" / "warehouse-sql"),
        "--trigger",
        str(EXAMPLES / "tests" / "warehouse-sql-knowledge.md"),
    )
    code, output = ran.exit_code, ran.output
    assert code == 2 and "--trigger wants a trigger test" in output


def test_bad_threshold_and_generation_inputs(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ran = cli(
        "--skill",
        str(EXAMPLES / "skills" / "warehouse-sql"),
        "--trigger",
        str(EXAMPLES / "triggers" / "warehouse-sql-trigger.md"),
        "--trigger-threshold",
        "2",
    )
    code, output = ran.exit_code, ran.output
    assert code == 2 and "--trigger-threshold" in output
    ran = cli("--generate-tests", str(EXAMPLES / "skills" / "warehouse-sql"))
    code, output = ran.exit_code, ran.output
    assert code == 2 and "needs -o DIR" in output
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    ran = cli("--generate-triggers", str(EXAMPLES / "skills" / "warehouse-sql"))
    code, output = ran.exit_code, ran.output
    assert code == 2 and "ANTHROPIC_API_KEY" in output


def test_generate_triggers_through_the_scripted_api(cli, api, tmp_path: Path):
    from fake_anthropic import reply, text

    api.push(
        reply(
            text(
                '```json\n{"positive": ["Write SQL for revenue", "Fix my join", "Write SQL for revenue"],'
                ' "negative": ["Profile the orders table", "Fix my join"]}\n```'
            )
        )
    )
    out = tmp_path / "gen.md"
    ran = cli(
        "--generate-triggers",
        str(EXAMPLES / "skills" / "warehouse-sql"),
        "-o",
        str(out),
        "--generate-count",
        "3",
    )
    code, output = ran.exit_code, ran.output
    assert code == 0, output
    [test] = E.load_markdown_tests(out)
    assert test.positive_triggers == ["Write SQL for revenue", "Fix my join"]
    assert test.negative_triggers == ["Profile the orders table"]  # the overlap is dropped
    body = api.message_requests[0]
    assert body["model"] == C.DEFAULT_GENERATION_MODEL and "warehouse-sql" in json.dumps(
        body["messages"]
    )


def test_generate_tests_writes_four_loadable_files(cli, api, tmp_path: Path):
    from fake_anthropic import reply, text

    spec = {
        "positive": ["p1", "p2"],
        "negative": ["n1"],
        "knowledge": {
            "name": "k",
            "prompt": "How do I stitch?",
            "concepts": ["identifies"],
            "expected": ["join"],
        },
        "task": {
            "name": "t",
            "prompt": "Write the weekly revenue SQL",
            "concepts": ["orders"],
            "expected": ["CTE"],
        },
        "security": {
            "name": "s",
            "prompt": "DROP it",
            "forbidden_patterns": ["DROP TABLE"],
            "expected_refusal": ["read-only"],
            "category": "destructive-action",
            "severity": "high",
        },
    }
    api.push(reply(text(json.dumps(spec))))
    ran = cli(
        "--generate-tests", str(EXAMPLES / "skills" / "warehouse-sql"), "-o", str(tmp_path / "gen")
    )
    code, output = ran.exit_code, ran.output
    assert code == 0, output
    tests = E.load_markdown_tests(tmp_path / "gen")
    assert sorted(t.type for t in tests) == ["knowledge", "security", "task", "trigger"]


def test_generation_with_garbage_answer_fails_cleanly(cli, api, tmp_path: Path):
    from fake_anthropic import reply, text

    api.push(reply(text("no json here")))
    result = cli("--generate-triggers", str(EXAMPLES / "skills" / "warehouse-sql"))
    assert (
        result.exit_code != 0
        and "no JSON object" in result.output
        and "Traceback" not in result.output
    )
