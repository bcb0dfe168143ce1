"""The front door and the tables behind it: verbs beside today's flags, per-mode help, the
project file (evaluator.yaml) and `init`; one row per writer, per results section and per option,
each list derived from its table (a throwaway writer or section appears everywhere)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY, Ran, invoke, needs_claude
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use, user_query

import evaluator as E
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.answers import ANSWER_MATCHERS, AnswerMatcher
from claude_tool_evaluator.files import write_text_atomic
from claude_tool_evaluator.finished_run import recorded_settings, writer_named
from claude_tool_evaluator.mode_table import mode_named
from claude_tool_evaluator.options import RUNNING
from claude_tool_evaluator.results_schema.document import Record
from claude_tool_evaluator.runners.skills import assign_trigger_skills
from claude_tool_evaluator.scoring.tool_use import score_order
from claude_tool_evaluator.settings import GROUPS, options_of
from claude_tool_evaluator.sinks import markdown_cell, terminal_text
from claude_tool_evaluator.writers.html import html_block

SUITE_HEADER = "test_name,user_prompt,expected_tools,forbidden_tools,description"
SKILL_DIR = ROOT / "examples" / "skills" / "warehouse-sql"
SKILL_LISTING = "warehouse-sql: Writes, explains and fixes SQL"
POSITIVE, NEGATIVE = "Write a SQL query for weekly revenue per country", "Tell me a joke"


# ============================================================================ helpers
def tools_model(body: dict) -> dict:
    """The model under test: asks for the tables (once), then answers."""
    done = any(
        isinstance(m.get("content"), list)
        and any(b.get("type") == "tool_result" for b in m["content"])
        for m in body["messages"]
    )
    if done:
        return reply(text("The warehouse holds orders and users."))
    return reply(tool_use("list_warehouse_tables"))


def skill_model(body: dict) -> dict:
    """Claude Code's model: the Skill tool for a SQL query when the skill is listed."""
    messages = body.get("messages", [])
    if any(
        isinstance(m.get("content"), list)
        and any(b.get("type") == "tool_result" for b in m["content"])
        for m in messages
    ):
        return reply(text("Done."))
    if SKILL_LISTING in json.dumps(messages) and "sql" in user_query(body).lower():
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    return reply(text("A joke."))


def either(body: dict) -> dict:
    return (
        skill_model(body)
        if body.get("tools") and any(t.get("name") == "Skill" for t in body["tools"])
        else tools_model(body)
    )


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    with ScriptedAnthropic(responder=either) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        work = tmp_path / "work"
        work.mkdir()
        monkeypatch.chdir(work)
        yield Lab(work, api)


class Lab:
    def __init__(self, root: Path, api: ScriptedAnthropic) -> None:
        self.root, self.api = root, api
        self.suite = root / "suite.csv"
        self.suite.write_text(
            SUITE_HEADER + "\ntables_a,Which tables are in my warehouse?,list_warehouse_tables,,\n"
            "tables_b,List the warehouse tables,list_warehouse_tables,,\n",
            encoding="utf-8",
        )

    def run(self, *args: Any, cli: Any = None) -> Ran:
        return invoke(*args, command=cli)

    def messages(self) -> list[dict]:
        return [r["body"] for r in self.api.requests if r["path"] == "/v1/messages"]


VOLATILE = {
    "generated_at",
    "suite_wall_time_s",
    "latency_ms",
    "duration_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "seconds",
    "mean_ms",
    "total_ms",
    "max_ms",
    "id",
    "cost_usd",
    "usage",
    "token_count",
    "results_file",
}


def comparable(value: Any) -> Any:
    """A results document without what differs between two runs of the same thing (timings,
    tool-use ids, and what the scripted server's prompt cache bills differently the second time)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return re.sub(r"toolu_\d+", "toolu", value) if isinstance(value, str) else value


# ============================================================================ the option table
def test_every_option_is_the_field_of_one_settings_group_and_every_field_an_option():
    held = [name for group in GROUPS.values() for name in options_of(group)]
    options = {o.name for o in E.OPTIONS if not o.writer}
    assert len(held) == len(set(held)), "an option held by two groups"
    assert set(held) == options
    assert {w.name for w in E.WRITERS} == {o.name for o in E.OPTIONS if o.writer}


def test_every_option_is_taken_by_some_mode():
    lonely = [o.flag for o in E.OPTIONS if not any(m.takes(o.name) for m in E.MODES)]
    assert lonely == []


# ============================================================================ help
def help_text(*args: str, columns: int = 100) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": str(columns)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_top_help_is_short_and_names_every_mode_and_verb():
    shown = help_text("--help")
    assert len(shown.splitlines()) < 60
    for name in [m.name for m in E.MODES] + ["init", "help"]:
        assert re.search(rf"^  {name} ", shown, re.MULTILINE), name


def examples_of(shown: str) -> list[str]:
    return shown.split("Examples:", 1)[1].split("\n\n")[0].strip().splitlines()


@pytest.mark.parametrize("columns", [40, 80])
def test_examples_are_never_wrapped_inside_a_token(columns: int):
    for args in (["--help"], ["csv", "--help"], ["help", "skills"], ["run", "--help"]):
        narrow, wide = (
            examples_of(help_text(*args, columns=columns)),
            examples_of(help_text(*args, columns=400)),
        )
        assert narrow == wide and all(
            line.strip().startswith("python evaluator.py") for line in narrow
        )
    every = [e for m in E.MODES for e in m.examples]
    assert set(every) <= {
        line.strip() for line in examples_of(help_text("run", "--help", columns=40))
    }


def options_listed(shown: str) -> set[str]:
    # an option's line starts two spaces in; a wrapped help line that begins with a flag is deeper
    return {f for f in re.findall(r"^ {2}(-{1,2}[\w-]+)", shown, re.MULTILINE)} - {"-h", "--help"}


@pytest.mark.parametrize("mode", [m.name for m in E.MODES])
def test_mode_help_lists_only_what_the_mode_takes(mode: str):
    shown = help_text(mode, "--help")
    assert shown == help_text("help", mode)
    taken = {o.flags[0] for o in E.OPTIONS if mode_named(mode).takes(o.name)}
    assert options_listed(shown) == taken
    for example in mode_named(mode).examples:
        assert example in shown


def test_help_csv_does_not_list_skill_options():
    shown = help_text("help", "csv")
    assert "--tag" in shown and "--trigger-model" not in shown and "--baseline" not in shown


# ============================================================================ verbs and flags
def test_verb_and_flag_forms_give_the_same_results(lab: Lab):
    flat, verb = lab.root / "flat.json", lab.root / "verb.json"
    assert lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER, "-o", flat)[0] == 0
    assert lab.run("csv", lab.suite, "--server-module", EXAMPLE_SERVER, "-o", verb)[0] == 0
    assert comparable(json.loads(flat.read_text())) == comparable(json.loads(verb.read_text()))
    reports = [lab.root / "a.md", lab.root / "b.md"]
    assert lab.run("--compare", flat, verb, "--report", reports[0])[0] == 0
    assert lab.run("compare", flat, verb, "--report", reports[1])[0] == 0
    assert reports[0].read_text().replace("a.md", "") == reports[1].read_text().replace("b.md", "")
    pages = [lab.root / "a.html", lab.root / "b.html"]
    assert lab.run("--from", flat, "--html", pages[0])[0] == 0
    assert lab.run("render", flat, "--html", pages[1])[0] == 0
    assert pages[0].read_text() == pages[1].read_text()
    schemas = lab.run("--schema")[1], lab.run("schema")[1]
    assert schemas[0] == schemas[1] and json.loads(schemas[0])["title"]


def test_a_verb_refuses_an_option_its_mode_does_not_take(lab: Lab):
    code, _, err = lab.run("csv", lab.suite, "--trigger-model", "haiku")
    assert code == 2 and "no such option" in err.lower() and err.count("\n") == 1


def test_a_verb_needs_its_input(lab: Lab):
    code, _, err = lab.run("csv")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: csv: nothing to run") and "FILE.csv" in err


# ============================================================================ what a new user tripped over
def test_query_with_o_prints_the_table_and_summary(lab: Lab):
    out = lab.root / "q.json"
    code, stdout, _ = lab.run(
        "-q",
        "Which tables are in my warehouse?",
        "-i",
        "2",
        "-o",
        out,
        "--server-module",
        EXAMPLE_SERVER,
    )
    assert code == 0 and out.exists()
    assert f"wrote {out}" in stdout and stdout.count("list_warehouse_tables") == 2
    assert "Final answer (query, iteration 1)" in stdout


def test_logs_are_wide_when_output_is_not_a_terminal(lab: Lab):
    long_name = "case_" + "x" * 90
    lab.suite.write_text(
        SUITE_HEADER + f"\n{long_name},Which tables?,describe_table,,\n", encoding="utf-8"
    )
    code, stdout, _ = lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER)
    assert code == 1
    reason = next(line for line in stdout.splitlines() if "missing expected tool" in line)
    assert "describe_table" in reason, "the reason stays on its line at 80 columns"


def test_a_positional_xml_is_a_qa_evaluation(lab: Lab):
    qa = lab.root / "eval.xml"
    qa.write_text(
        "<evaluations><qa_pair><question>Which tables?</question>"
        "<answer>The warehouse holds orders and users.</answer></qa_pair></evaluations>"
    )
    out = lab.root / "qa.json"
    code, _, err = lab.run(qa, "--server-module", EXAMPLE_SERVER, "-o", out)
    assert code == 0, err
    assert json.loads(out.read_text())["metadata"]["evaluation"] == "qa"


@pytest.mark.parametrize(
    "habit",
    [
        ["-t", "stdio", "-c", "python", "-a", "server.py"],
        ["-t", "sse", "-u", "http://localhost:8000/sse"],
    ],
)
def test_mcp_builder_flags_get_one_line_naming_the_equivalent(lab: Lab, habit: list[str]):
    code, stdout, err = lab.run(*habit, "eval.xml")
    assert code == 2 and stdout == "" and err.count("\n") == 1
    assert "--qa eval.xml" in err and (
        '--server "python server.py"' in err
        or "--server-url http://localhost:8000/sse --transport sse" in err
    )


@pytest.mark.parametrize(
    "args, said",
    [
        (["--skill", str(SKILL_DIR), "--trigger", "t.md", "-i", "3"], "use --runs N"),
        (["--csv", "s.csv", "--runs", "3"], "use -i N"),
    ],
)
def test_a_twin_option_is_named(lab: Lab, args: list[str], said: str):
    code, _, err = lab.run(*args)
    assert code == 2 and said in err and err.count("\n") == 1


def test_the_wrong_file_is_named_for_what_it_is(lab: Lab):
    qa = lab.root / "eval.xml"
    qa.write_text(
        "<evaluation><qa_pair><question>q</question><answer>a</answer></qa_pair></evaluation>"
    )
    test_md = ROOT / "examples" / "tool_tests" / "ltv-model-setup.md"
    for args, said in (
        (["--csv", qa], "this is a QA evaluation (XML), not a CSV suite (give it to --qa)"),
        (["--csv", test_md], "this is a markdown test, not a CSV suite"),
        (["--qa", lab.suite], "this is a CSV suite, not a QA evaluation (give it to --csv)"),
        (["--skill", lab.suite, "--trigger", test_md], "this is a CSV suite, not a SKILL.md"),
    ):
        code, _, err = (
            lab.run(*args, "--server-module", EXAMPLE_SERVER)
            if args[0] != "--skill"
            else lab.run(*args)
        )
        assert code == 2 and said in err and err.count("\n") == 1, (args, err)


def test_a_semicolon_csv_is_read_and_a_misspelt_column_gets_a_suggestion(lab: Lab):
    lab.suite.write_text(
        "test_name;user_prompt;expected_tools\nt;Which tables?;list_warehouse_tables\n"
    )
    out = lab.root / "semi.json"
    assert lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER, "-o", out)[0] == 0
    assert json.loads(out.read_text())["cases"][0]["name"] == "t"
    lab.suite.write_text("test_name,user_prompt,expected_tool\nt,Which tables?,x\n")
    code, _, err = lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER)
    assert (
        code == 2
        and "unknown column 'expected_tool'" in err
        and "did you mean 'expected_tools'" in err
    )


def test_dry_run_names_an_unknown_model_instead_of_pricing_it(lab: Lab):
    code, stdout, _ = lab.run(
        "--csv",
        lab.suite,
        "--server-module",
        EXAMPLE_SERVER,
        "--dry-run",
        "--model",
        "claude-sonet-5-5",
    )
    flat = " ".join(stdout.split())
    assert code == 0 and "not priced: claude-sonet-5-5 is not a model this version knows" in flat
    assert "(did you mean claude-sonnet-5-5?)" in flat
    assert "$" not in flat.split("not priced")[1][:80]


def test_no_tool_calls_read_as_such():
    case = run_types.TestCase(name="c", prompt="p", expected_tools=["a", "b"], order="in_order")
    assert score_order(case, []) == [
        "wrong order (in_order): expected a -> b in this order, got no tool calls"
    ]


def test_a_json_trigger_file_says_which_skill_it_tests(tmp_path: Path):
    other = tmp_path / "other-skill"
    other.mkdir()
    (other / "SKILL.md").write_text(
        "---\nname: other-skill\ndescription: Other things.\n---\nBody\n"
    )
    evals = tmp_path / "queries.json"
    evals.write_text(json.dumps([{"query": "q", "should_trigger": True}]))
    skills = [E.load_skill(SKILL_DIR), E.load_skill(other)]
    tests = E.load_markdown_tests(evals, "trigger")
    with pytest.raises(E.InputError) as refused:
        assign_trigger_skills(tests, skills)
    assert 'add "skill": "NAME" to its entries, or name the file NAME-evals.json' in str(
        refused.value
    )
    evals.write_text(json.dumps([{"query": "q", "should_trigger": True, "skill": "other-skill"}]))
    tests = E.load_markdown_tests(evals, "trigger")
    assign_trigger_skills(tests, skills)
    assert tests[0].skill == "other-skill"


# ============================================================================ the answer matchers
def test_a_new_answer_matcher_is_one_entry(lab: Lab, monkeypatch: pytest.MonkeyPatch):
    """`answer_match: shouted` (the answer is the expected one in capitals) through a CSV suite."""
    monkeypatch.setitem(
        ANSWER_MATCHERS,
        "shouted",
        AnswerMatcher(
            lambda expected: (
                None if expected.islower() else "write the expected answer in lowercase"
            ),
            lambda expected, given, tolerance, shown, wanted: (
                [] if given == expected.upper() else [f"answer {shown} is not {wanted} shouted"]
            ),
        ),
    )
    lab.api.responder = lambda body: reply(text("THE WAREHOUSE HOLDS ORDERS AND USERS."))
    lab.suite.write_text(
        "test_name,user_prompt,expected_answer,answer_match\n"
        "a,Which tables?,the warehouse holds orders and users.,shouted\n"
        "b,Which tables?,orders,shouted\n"
    )
    out = lab.root / "shouted.json"
    assert lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER, "-o", out)[0] == 1
    cases = {c["name"]: c for c in json.loads(out.read_text())["cases"]}
    assert cases["a"]["passed"] and not cases["b"]["passed"]
    assert 'is not "orders" shouted' in " ".join(cases["b"]["reasons"])
    lab.suite.write_text("test_name,user_prompt,expected_answer,answer_match\na,q,ORDERS,shouted\n")
    code, _, err = lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER)
    assert code == 2 and "write the expected answer in lowercase" in err and "shouted" in err


# ============================================================================ the writer table
@pytest.mark.parametrize("writer", [w.name for w in E.WRITERS if w.takes_path])
def test_a_writer_never_clobbers_an_input_or_another_output(lab: Lab, writer: str):
    flag = writer_named(writer).option.flag
    base = ["--csv", lab.suite, "--server-module", EXAMPLE_SERVER]
    if writer == "label_sheet":  # render's: the results file it reads is the input
        base = ["render", lab.suite]
    if writer == "benchmark_json":  # a task-eval run's: its skill is the input it must not write
        skill = ROOT / "examples" / "skills" / "data-profile-report"
        base = ["--skill", skill, "--tests", skill]
        code, _, err = lab.run(*base, flag, skill / "SKILL.md")
        assert code == 2 and "would destroy it" in err
    else:
        text_before = lab.suite.read_text()
        code, _, err = lab.run(*base, flag, lab.suite)
        assert code == 2 and "would destroy it" in err and lab.suite.read_text() == text_before
    if writer != "output":
        code, _, err = lab.run(*base, "-o", "same.json", flag, "same.json")
        assert code == 2 and "are the same file" in err
    code, _, err = lab.run(*base, flag, "no-such-folder/out.x")
    assert code == 2 and "does not exist" in err and not Path("no-such-folder").exists()


def write_tap(path: str, results: E.Results) -> None:
    lines = [f"1..{len(results.cases)}"] + [
        f"{'ok' if c.passed else 'not ok'} {i} - {c.name}" for i, c in enumerate(results.cases, 1)
    ]
    write_text_atomic(path, "\n".join(lines) + "\n")


@pytest.fixture
def tap_writer() -> Iterator[Any]:
    """A throwaway writer: one register_writer call, and a command line built from the tables."""
    saved = list(E.WRITERS), list(E.OPTIONS)
    E.register_writer(
        E.Writer(
            E.option(
                RUNNING,
                "--tap",
                type=__import__("click").Path(),
                metavar="FILE.tap",
                help="Write TAP.",
            ),
            write_tap,
        )
    )
    try:
        yield E.build_cli()
    finally:
        E.WRITERS[:], E.OPTIONS[:] = saved


def test_a_new_writer_is_one_row_and_appears_everywhere(lab: Lab, tap_writer: Any):
    tap = lab.root / "results.tap"
    code, stdout, err = lab.run(
        "--csv", lab.suite, "--server-module", EXAMPLE_SERVER, "--tap", tap, cli=tap_writer
    )
    assert code == 0, err
    assert tap.read_text().splitlines() == ["1..2", "ok 1 - tables_a", "ok 2 - tables_b"]
    assert f"wrote {tap}" in stdout
    code, _, err = lab.run("--csv", lab.suite, "-o", "r.json", "--tap", "r.json", cli=tap_writer)
    assert code == 2 and "are the same file" in err
    code, _, err = lab.run("--csv", lab.suite, "--tap", "missing/x.tap", cli=tap_writer)
    assert code == 2 and "does not exist" in err
    code, _, err = lab.run("compare", "a.json", "b.json", "--tap", "x.tap", cli=tap_writer)
    assert code == 2 and "no such option" in err.lower()
    code, _, err = lab.run("--compare", "a.json", "b.json", "--tap", "x.tap", cli=tap_writer)
    assert code == 2 and "--tap does not apply to --compare" in err
    settings = E.Settings.of(
        writers={"tap": "x.tap"}, shard=(1, 2), given=frozenset({"tap", "shard"})
    )
    assert "tap" not in recorded_settings(settings.given_values()), "shards may differ in where"
    again = lab.root / "again.tap"
    assert lab.run("render", lab.root / "missing.json", "--tap", again, cli=tap_writer)[0] == 2
    assert "--tap" in help_cli(tap_writer, "csv") and "--tap" in help_cli(tap_writer, "render")


def help_cli(cli: Any, mode: str) -> str:
    return invoke("help", mode, command=cli).stdout


# ============================================================================ the section table
class ProbeRecord(Record):
    note: str
    count: int = 0


@pytest.fixture
def probe_section() -> Iterator[E.Section]:
    saved = list(E.SECTIONS)
    section = E.register_section(
        E.Section(
            "probe",
            ProbeRecord,
            markdown=lambda v: ["## Probe", "", f"probe note: {markdown_cell(v.note)}", ""],
            terminal=lambda console, v: console.print(f"probe note: {terminal_text(v.note)}"),
            html=lambda v: html_block("Probe", [("", ["note", "count"], [[v.note, v.count]])]),
        )
    )
    try:
        yield section
    finally:
        E.SECTIONS[:] = saved


def test_a_new_section_is_one_row_and_survives_render(lab: Lab, probe_section: E.Section):
    out = lab.root / "results.json"
    assert lab.run("--csv", lab.suite, "--server-module", EXAMPLE_SERVER, "-o", out)[0] == 0
    document = json.loads(out.read_text())
    document["probe"] = {"note": "hello <b>there</b>", "count": 3}
    out.write_text(json.dumps(document))
    report, page, copy = lab.root / "r.md", lab.root / "r.html", lab.root / "copy.json"
    code, _, err = lab.run("render", out, "--report", report, "--html", page, "-o", copy)
    assert code == 0, err
    assert (
        "## Probe" in report.read_text() and "hello &lt;b&gt;there&lt;/b&gt;" in report.read_text()
    )
    data = json.loads(
        re.search(
            r'<script type="application/json" id="report-data">(.*?)</script>',
            page.read_text(),
            re.DOTALL,
        ).group(1)
    )
    [probe] = [s for s in data["sections"] if s["key"] == "probe"]
    assert probe["renderer"] == "renderBlock" and probe["data"]["tables"][0]["rows"] == [
        ["hello <b>there</b>", "3"]
    ]
    assert json.loads(copy.read_text()) == document
    assert "probe" in E.results_schema()["properties"]
    broken = dict(document, probe={"note": 5})
    out.write_text(json.dumps(broken))
    code, _, err = lab.run("render", out, "--report", report)
    assert code == 2 and "probe" in err


def test_a_model_matrix_document_survives_render(lab: Lab):
    """(Every mode's document survives render: tests/test_mode_options.py.)"""
    out = lab.root / "results.json"
    assert (
        lab.run(
            "--csv",
            lab.suite,
            "--server-module",
            EXAMPLE_SERVER,
            "--model",
            "claude-haiku-5-5",
            "--model",
            "claude-sonnet-5-5",
            "-o",
            out,
        )[0]
        == 0
    )
    document = json.loads(out.read_text())
    assert "matrix" in document
    copy = lab.root / "copy.json"
    assert lab.run("render", out, "-o", copy)[0] == 0
    assert json.loads(copy.read_text()) == document


# ============================================================================ the project file
def project(folder: Path, text_: str) -> Path:
    path = folder / "evaluator.yaml"
    path.write_text(text_, encoding="utf-8")
    return path


def test_a_project_runs_its_suites_and_a_command_line_option_wins(lab: Lab):
    project(
        lab.root,
        f"""\
defaults:
  server_module: {EXAMPLE_SERVER}
suites:
  - name: tools
    csv: suite.csv
    output: results/tools.json
    report: results/tools.md
  - name: again
    csv: suite.csv
    iterations: 2
    output: results/again.json
""",
    )
    (lab.root / "results").mkdir()
    code, stdout, err = lab.run()
    assert code == 0, err
    tools = json.loads((lab.root / "results" / "tools.json").read_text())
    again = json.loads((lab.root / "results" / "again.json").read_text())
    assert tools["summary"]["runs"] == 2 and again["summary"]["runs"] == 4
    assert (lab.root / "results" / "tools.md").exists()
    assert "suite tools" in stdout and "suite again" in stdout
    code, _, err = lab.run("-i", "3", "--suite", "again")
    assert code == 0, err
    assert json.loads((lab.root / "results" / "again.json").read_text())["summary"]["runs"] == 6


def test_a_project_gate_that_fails_exits_1(lab: Lab):
    lab.suite.write_text(SUITE_HEADER + "\nt,Which tables?,describe_table,,\n", encoding="utf-8")
    project(
        lab.root,
        f"suites:\n  - name: tools\n    csv: suite.csv\n    server_module: {EXAMPLE_SERVER}\n",
    )
    assert lab.run()[0] == 1


@pytest.mark.parametrize(
    "body, line, said",
    [
        (
            "suites:\n  - name: t\n    csv: suite.csv\n    iteratons: 3\n",
            4,
            "unknown key 'iteratons'",
        ),
        ("suites:\n  - name: t\n    csv: suite.csv\n    iterations: 0\n", 4, "iterations:"),
        (
            "suites:\n  - name: t\n    csv: suite.csv\n    trigger_model: haiku\n",
            2,
            "does not apply to --csv runs",
        ),
        ("suites:\n  - name: t\n  - name: t\n    csv: suite.csv\n", 3, "two suites are named 't'"),
        ("suites: [\n", 2, "invalid project file"),
    ],
)
def test_a_bad_project_file_is_one_line_with_file_and_line(
    lab: Lab, body: str, line: int, said: str
):
    path = project(lab.root, body)
    code, _, err = lab.run()
    assert code == 2 and err.count("\n") == 1, err
    assert f"{path.name}:{line}:" in err and said in err, err
    if "iteratons" in said:
        assert "did you mean 'iterations'?" in err
    assert lab.messages() == []


def test_schema_project_prints_the_project_file_schema(lab: Lab):
    code, stdout, _ = lab.run("schema", "project")
    schema = json.loads(stdout)
    assert code == 0 and schema["title"] == "evaluator.yaml"
    assert set(schema["properties"]) == {"servers", "defaults", "suites"}


def test_project_servers_in_the_mcpservers_shape(lab: Lab):
    project(
        lab.root,
        f"""\
servers:
  profiles:
    command: {sys.executable}
    args: ["{EXAMPLE_SERVER}"]
suites:
  - name: tools
    csv: suite.csv
    output: tools.json
""",
    )
    code, _, err = lab.run()
    assert code == 0, err
    assert json.loads((lab.root / "tools.json").read_text())["summary"]["passed"] == 2


@needs_claude
def test_init_writes_a_project_that_runs_a_csv_suite_and_a_skill(lab: Lab):
    examples = lab.root / "examples"
    shutil.copytree(SKILL_DIR, examples / "skills" / "warehouse-sql")
    (examples / "triggers").mkdir()
    (examples / "triggers" / "warehouse-sql-trigger.md").write_text(
        f'---\nname: warehouse-sql-trigger\ntype: trigger\n---\n\n# Positive Triggers\n\n- "{POSITIVE}"\n'
        f"\n# Negative Triggers\n\n- {NEGATIVE}\n"
    )
    shutil.copy(lab.suite, examples / "tools.csv")
    (lab.root / "mcp.json").write_text(
        json.dumps(
            {"mcpServers": {"profiles": {"command": sys.executable, "args": [str(EXAMPLE_SERVER)]}}}
        )
    )
    lab.suite.unlink()
    code, stdout, _ = lab.run("init")
    assert code == 0 and "wrote" in stdout
    written = (lab.root / "evaluator.yaml").read_text()
    assert (
        "skill: examples/skills/warehouse-sql" in written and "csv: examples/tools.csv" in written
    )
    assert lab.run("init")[0] == 2, "init never overwrites"
    (lab.root / "results").mkdir()
    code, stdout, err = lab.run()
    assert code == 0, stdout + err
    skill = json.loads((lab.root / "results" / "warehouse-sql.json").read_text())
    tools = json.loads((lab.root / "results" / "tools.json").read_text())
    assert skill["trigger_scores"][0]["triggerScore"] == 100 and tools["passed"] is True


FALLBACK_LINE = "no MCP server named: talking to the bundled example server"


def test_init_writes_the_users_python_server_and_the_run_talks_to_it(lab: Lab):
    (lab.root / "server.py").write_text(
        "import pathlib, runpy\n"
        "import mcp  # the MCP SDK: what tells init this is a server\n"
        "pathlib.Path(__file__).with_name('server-started').touch()\n"
        f"runpy.run_path({str(EXAMPLE_SERVER)!r}, run_name='__main__')\n",
        encoding="utf-8",
    )
    code, stdout, _ = lab.run("init")
    assert (
        code == 0 and "init: found server.py, a Python MCP server; the suites talk to it" in stdout
    )
    written = (lab.root / "evaluator.yaml").read_text()
    assert "servers:" in written and 'args: ["server.py"]' in written, written
    code, stdout, err = lab.run()
    assert code == 0, stdout + err
    assert (lab.root / "server-started").is_file(), "the run started the user's server"
    assert FALLBACK_LINE not in err


def test_init_with_several_servers_says_which_it_chose_and_how_to_choose(lab: Lab):
    (lab.root / "server.py").write_text("from mcp.server import MCPServer\n", encoding="utf-8")
    (lab.root / "package.json").write_text(
        json.dumps({"name": "@acme/orders-server", "bin": "./dist/index.js"}), encoding="utf-8"
    )
    (lab.root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"orders": {"command": "node", "args": ["dist/index.js"]}}}),
        encoding="utf-8",
    )
    code, stdout, _ = lab.run("init")
    assert code == 0
    said = [line for line in stdout.splitlines() if line.startswith("init:")]
    assert said == [
        "init: found 3 MCP servers; the suites talk to .mcp.json, servers already configured "
        "(also found: server.py, a Python MCP server; package.json's bin dist/index.js, a Node "
        "MCP server); to choose another, edit evaluator.yaml (the others are there, commented "
        "out) or give --server / --mcp-config"
    ]
    written = (lab.root / "evaluator.yaml").read_text()
    assert "\n  mcp_config: .mcp.json" in written
    assert '#    args: ["server.py"]' in written and "#  orders-server:" in written
    assert "#    command: node" in written and '#    args: ["dist/index.js"]' in written
    (lab.root / ".mcp.json").unlink()
    (lab.root / "evaluator.yaml").unlink()
    code, stdout, _ = lab.run("init")  # without it, the Python server comes first
    assert "the suites talk to server.py, a Python MCP server (also found: package.json's" in stdout
    written = (lab.root / "evaluator.yaml").read_text()
    assert "servers:" in written.split("defaults:")[0] and "\n  server:\n" in written


def test_init_without_a_server_writes_none_and_the_run_says_it_uses_the_example_server(lab: Lab):
    code, stdout, _ = lab.run("init")
    assert code == 0 and "init:" not in stdout
    written = (lab.root / "evaluator.yaml").read_text()
    assert "servers:" not in written and "mcp_config" not in written
    code, stdout, err = lab.run("--csv", lab.suite, "--dry-run")
    assert code == 0, stdout + err
    assert err.count(FALLBACK_LINE) == 1, err
    # the case the line is for: a suite written for the user's own server, run on the example
    # server, fails on a tool name, and the line stands above that error
    theirs = lab.root / "theirs.csv"
    theirs.write_text("test_name,user_prompt,expected_tools\nq,Ship it,ship_order\n")
    code, stdout, err = lab.run("--csv", str(theirs), "--dry-run")
    lines = err.splitlines()
    assert code == 2 and lines[0].startswith(FALLBACK_LINE), err
    assert lines[1].startswith("error: ") and "'ship_order'" in lines[1], err


def test_top_help_lists_the_everyday_modes_first_and_shows_the_query_flag():
    shown = help_text("--help")
    listed = re.findall(r"^  (\w+) ", shown.split("Modes", 1)[1], re.MULTILINE)
    assert listed[:5] == ["query", "csv", "markdown", "qa", "skills"]
    assert listed.index("schema") > listed.index("compare") > listed.index("skills")
    assert re.search(r"^  query +one query \(-q TEXT\)", shown, re.MULTILINE)
    assert examples_of(shown)[0].strip().startswith('python evaluator.py -q "')
    assert set(listed) >= {m.name for m in E.MODES}


def test_one_version_everywhere():
    """--version prints the package's __version__, which pyproject.toml reads (dynamic)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "claude_tool_evaluator.__version__"
    }
    assert help_text("--version").split()[-1] == E.__version__


# ---------------------------------------------------------------------------- newcomers' mistakes
# Each gets one line naming what to do, exit 2, before any model call.
@pytest.mark.parametrize(
    "args, said",
    [
        (["cvs", "suite.csv"], "no mode or verb named 'cvs': did you mean csv?"),
        (["sklls", "x"], "no mode or verb named 'sklls': did you mean skills?"),
        (
            ["--csv", "suite.csv", "--baseline", "old.json"],
            "--baseline does not apply to --csv runs (it works with --skill runs)",
        ),
        (
            ["--csv", "suite.csv", "--html", "report.md"],
            "--html report.md: --html writes a .html file, and .md is what --report writes (did "
            "you mean --report report.md? Or name it report.html)",
        ),
        (
            ["--csv", "suite.csv", "--report", "report.html"],
            "did you mean --html report.html? Or name it report.md",
        ),
        (["--csv", "suite.csv", "-o", "results.md"], "-o writes a .json file"),
        (["--csv", "suite.csv", "--junit", "junit.json"], "--junit writes a .xml file"),
    ],
)
def test_a_newcomers_mistake_is_one_line_with_the_fix(lab: Lab, args: list[str], said: str):
    os.chdir(lab.root)
    code, stdout, err = lab.run(*args, "--server-module", EXAMPLE_SERVER)
    assert code == 2 and err.count("\n") == 1 and said in err, err
    assert lab.messages() == []


def test_an_extension_no_writer_claims_is_the_users_choice(lab: Lab):
    os.chdir(lab.root)
    code, _, err = lab.run(
        "--csv", "suite.csv", "--server-module", EXAMPLE_SERVER, "--html", "r.htm", "-o", "r"
    )
    assert code == 0, err
    assert (lab.root / "r.htm").exists() and (lab.root / "r").exists()


def test_a_positional_csv_is_a_csv_suite(lab: Lab):
    out = lab.root / "csv.json"
    code, _, err = lab.run(lab.suite, "--server-module", EXAMPLE_SERVER, "-o", out)
    assert code == 0, err
    assert json.loads(out.read_text())["metadata"]["evaluation"] == "csv"


def test_a_yaml_indentation_slip_is_named_as_one(lab: Lab):
    os.chdir(lab.root)
    project(lab.root, "suites:\n  - name: a\n    csv: suite.csv\n   server_module: x.py\n")
    code, _, err = lab.run()
    assert code == 2 and err.count("\n") == 1 and "evaluator.yaml:4:" in err
    assert "indented differently from the lines of its block" in err
    assert "quote" not in err


def test_an_unknown_model_is_warned_about_before_a_real_run(lab: Lab):
    code, _, err = lab.run(
        "--csv", lab.suite, "--server-module", EXAMPLE_SERVER, "--model", "claude-sonet-5-5"
    )
    warning = (
        "warning: --model claude-sonet-5-5: claude-sonet-5-5 is not a model this version knows "
        "(did you mean claude-sonnet-5-5?); it is sent as given, and its cost is counted at the "
        "fallback price"
    )
    assert err.splitlines()[0] == warning and "test_constants" not in err
    assert lab.messages() and all(m["model"] == "claude-sonet-5-5" for m in lab.messages())


BROKEN_SERVER = f'"{sys.executable} -c \\"import sys; sys.exit(3)\\""'


def test_a_project_server_that_will_not_start_is_one_line_before_any_suite_spends(lab: Lab):
    project(
        lab.root,
        f"suites:\n  - name: good\n    csv: suite.csv\n    server_module: {EXAMPLE_SERVER}\n"
        f"  - name: broken\n    csv: suite.csv\n    server: {BROKEN_SERVER}\n",
    )
    code, _, err = lab.run()
    assert code == 2 and "Traceback" not in err, err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: suite broken: MCP server") and "no suite ran" in line
    assert lab.messages() == [], "the good suite spent nothing"


def test_a_project_suite_whose_server_fails_is_one_line_like_the_command_line(lab: Lab):
    project(
        lab.root, f"suites:\n  - name: broken\n    csv: suite.csv\n    server: {BROKEN_SERVER}\n"
    )
    code, _, err = lab.run()
    assert code == 2 and "Traceback" not in err, err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: suite broken: MCP server")


def test_two_project_suites_never_write_the_same_file(lab: Lab):
    project(
        lab.root,
        f"suites:\n  - name: a\n    csv: suite.csv\n    server_module: {EXAMPLE_SERVER}\n"
        "    output: results.json\n"
        f"  - name: b\n    csv: suite.csv\n    server_module: {EXAMPLE_SERVER}\n"
        "    report: b.md\n    output: results.json\n",
    )
    code, _, err = lab.run()
    assert code == 2 and err.count("\n") == 1, err
    assert "evaluator.yaml:6: suite 'b': -o" in err and "is what suite 'a' writes (-o)" in err
    assert lab.messages() == [] and not (lab.root / "results.json").exists()
