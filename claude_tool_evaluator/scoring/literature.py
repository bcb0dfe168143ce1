"""Benchmarks from the literature: BFCL's and τ²-bench's own figures beside ours, BFCL's own
checker when it is installed.

May import: the rooms above scoring, the scoring rooms above it."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..results_schema.sections import LiteratureFigure, LiteratureRecord
from .statistics import pass_hat_k

__all__ = [
    "BFCL_CATEGORIES",
    "BFCL_DATA_ERRORS",
    "BFCL_PROTOCOL_MODEL",
    "BFCL_TAG",
    "BenchmarkRun",
    "BfclData",
    "TAU2_NL_TAG",
    "TAU2_TAG",
    "benchmark_module",
    "benchmark_run",
    "bfcl_entries",
    "bfcl_modules",
    "literature_records",
]

if TYPE_CHECKING:
    from ..run_types import Transcript, Verdict


# Cases imported by `import bfcl` carry the tag bfcl:CATEGORY, those of `import tau2` tau2:DOMAIN
# (and tau2:nl_assertion when the task's reward counts its natural-language assertions). Their
# runs are also scored as the benchmark reports them, beside this evaluator's own verdicts.
BFCL_TAG, TAU2_TAG, TAU2_NL_TAG = "bfcl:", "tau2:", "tau2:nl_assertion"


# BFCL's categories this evaluator imports, in its leaderboard's order.
BFCL_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)


# BFCL's leaderboard columns over those categories (eval_runner_helper.generate_leaderboard_csv):
# title, categories, weighted by entries (else an unweighted mean of the categories), note. Shown
# only when every category of it ran, as BFCL shows N/A otherwise.
_BFCL_HEADLINES = (
    (
        "Non-Live AST (Python)",
        ("simple_python", "multiple", "parallel", "parallel_multiple"),
        False,
        "BFCL's Non-Live also averages simple over Java and JavaScript, which are not imported",
    ),
    (
        "Live AST",
        ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
        True,
        "weighted by entries, as BFCL weighs it",
    ),
    ("Irrelevance", ("irrelevance", "live_irrelevance"), False, ""),
    ("Relevance", ("live_relevance",), False, ""),
)


_BENCHMARKS_EXTRA = 'pip install ".[benchmarks]"'


def benchmark_module(module: str, package: str) -> Any:
    """A benchmark package's module; missing, one line saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(
            f"the benchmark's data comes from the {package} package, which is not installed",
            hint=f"{_BENCHMARKS_EXTRA}, or pip install {package}",
        ) from None


BFCL_PROTOCOL_MODEL = (
    "claude-sonnet-4-5-20250929-FC"  # the checker reads only its underscore_to_dot
)


@functools.cache
def bfcl_modules() -> Any:
    """BFCL's loader, tool conversion and AST checker, imported without its model handlers:
    bfcl_eval.constants.model_config imports every vendor SDK (11 s, torch included), and the
    checker reads only whether a Claude FC model's names have `.` made `_`. The verdicts are
    the same (bench notes). BFCL_PROJECT_ROOT keeps its result/ and score/ folders out of
    site-packages."""
    import types

    os.environ.setdefault(
        "BFCL_PROJECT_ROOT", str(Path(tempfile.gettempdir()) / "evaluator-bfcl-project")
    )
    config = "bfcl_eval.constants.model_config"
    if config not in sys.modules:
        benchmark_module("bfcl_eval", "bfcl-eval")
        stub = types.ModuleType(config)
        stub.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
            BFCL_PROTOCOL_MODEL: types.SimpleNamespace(underscore_to_dot=True)
        }
        sys.modules[config] = stub
    checker = benchmark_module("bfcl_eval.eval_checker.ast_eval.ast_checker", "bfcl-eval")
    utils = importlib.import_module("bfcl_eval.utils")
    return types.SimpleNamespace(
        ast_checker=checker.ast_checker,
        Language=importlib.import_module("bfcl_eval.constants.enums").Language,
        ModelStyle=importlib.import_module("bfcl_eval.constants.enums").ModelStyle,
        load_dataset_entry=utils.load_dataset_entry,
        load_file=utils.load_file,
        convert_to_tool=importlib.import_module("bfcl_eval.model_handler.utils").convert_to_tool,
        mapping=importlib.import_module("bfcl_eval.constants.type_mappings").GORILLA_TO_OPENAPI,
        prompts=importlib.import_module("bfcl_eval.constants.eval_config").PROMPT_PATH,
        answers=importlib.import_module("bfcl_eval.constants.eval_config").POSSIBLE_ANSWER_PATH,
        prefix=importlib.import_module("bfcl_eval.constants.category_mapping").VERSION_PREFIX,
    )


# BFCL's data files are JSON lines in bfcl-eval as installed (nothing here copies them): what this
# evaluator reads of an entry and of its possible answer, checked line by line before BFCL's own
# loader and checker read them, so a file edited or cut short is one line naming it and the line.
_BFCL_REINSTALL = (
    "bfcl-eval's own data, read as installed: reinstall it with "
    "pip install --force-reinstall --no-deps bfcl-eval"
)


def _bfcl_entry_problem(entry: dict) -> str | None:
    question, function = entry["question"], entry["function"]
    if not isinstance(question, list) or not all(
        isinstance(turn, list)
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in turn)
        for turn in question
    ):
        return '"question" is not a list of turns, each a list of messages with a "role" and a "content"'
    if not isinstance(function, list) or not all(
        isinstance(f, dict) and isinstance(f.get("name"), str) for f in function
    ):
        return '"function" is not a list of function documents, each with a "name"'
    return None


def _bfcl_answer_problem(answer: dict) -> str | None:
    truth = answer["ground_truth"]
    if not isinstance(truth, list) or not all(
        isinstance(call, dict)
        and all(
            isinstance(args, dict) and all(isinstance(v, list) for v in args.values())
            for args in call.values()
        )
        for call in truth
    ):
        return '"ground_truth" is not a list of calls, each {function: {parameter: [values]}}'
    return None


_BFCL_FILE_KINDS = {  # kind -> (the keys of its every line, what else it must be)
    "entry": (("id", "question", "function"), _bfcl_entry_problem),
    "answer": (("id", "ground_truth"), _bfcl_answer_problem),
}


def _bfcl_line(line: str, kind: str) -> dict:
    """One line of a BFCL data file as this evaluator and BFCL's loader read it; else ValueError
    saying what is wrong with it."""
    keys, problem_of = _BFCL_FILE_KINDS[kind]
    if not line.strip():
        raise ValueError("an empty line, where BFCL reads one entry a line")
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a line of JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"a BFCL {kind} is a JSON object, and this line is not")
    missing = [key for key in keys if key not in value]
    if missing:
        has = ", ".join(f'"{k}"' for k in keys[:-1]) + f' and "{keys[-1]}"'
        raise ValueError(
            f"a BFCL {kind} has {has}, and this one has no "
            + " and no ".join(f'"{k}"' for k in missing)
        )
    problem = problem_of(value) or (
        None if isinstance(value["id"], str) else '"id" is not a string'
    )
    if problem:
        raise ValueError(problem)
    return value


def _bfcl_file_lines(path: Path, kind: str) -> dict[str, int]:
    """A BFCL data file (`kind` entry or answer), every line checked (bfcl_line); each entry's
    line, by id. A line that is not as BFCL writes it is an InputError naming the file and the
    line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8"
        raise InputError(
            f"BFCL's data cannot be read: {reason}", path, hint=_BFCL_REINSTALL
        ) from None
    lines = text.split("\n")
    if lines[-1] == "":  # the newline that ends the last line
        lines.pop()
    found: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        try:
            found[_bfcl_line(line, kind)["id"]] = number
        except ValueError as exc:
            raise InputError(str(exc), path, number, _BFCL_REINSTALL) from None
    return found


def _bfcl_files(category: str) -> tuple[Path, Path]:
    """A category's data file and its possible answers' (which irrelevance has not)."""
    bfcl = bfcl_modules()
    name = f"{bfcl.prefix}_{category}.json"
    return bfcl.prompts / name, bfcl.answers / name


class BfclData:
    """A category's data checked (bfcl_file_lines) before BFCL's loader reads it: `entry_line`
    and `answer_line` (by id); `problem` makes a failure of BFCL's own reading one line naming the
    file (and the entry's line when known)."""

    def __init__(self, category: str) -> None:
        self.data, self.answers = _bfcl_files(category)
        self.entry_line = _bfcl_file_lines(self.data, "entry")
        self.answer_line = _bfcl_file_lines(self.answers, "answer") if self.answers.exists() else {}

    def possible_answers(self, bfcl: Any) -> dict[str, dict]:
        """The possible answers by id, as BFCL's loader reads them ({}: the category has none)."""
        return {a["id"]: a for a in bfcl.load_file(self.answers)} if self.answer_line else {}

    def problem(self, exc: BaseException, entry_id: object = None) -> InputError:
        line = self.entry_line.get(entry_id) if isinstance(entry_id, str) else None
        what = f"BFCL entry {entry_id}" if line else "BFCL's data"
        return InputError(
            f"{what} is not as this evaluator reads it ({type(exc).__name__}: {exc})",
            self.data,
            line,
            _BFCL_REINSTALL,
        )


# What BFCL's loader or an entry's reading raises on data not as BFCL writes it.
BFCL_DATA_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, AssertionError)


@functools.cache
def bfcl_entries(category: str) -> dict[str, tuple[dict, dict | None]]:
    """A BFCL category's entries as its checker reads them (the original function documents)
    and their possible answers, by id."""
    bfcl = bfcl_modules()
    checked = BfclData(category)
    try:
        answers = checked.possible_answers(bfcl)
        entries = bfcl.load_dataset_entry(category, False, False)
        return {e["id"]: (e, answers.get(e["id"])) for e in entries}
    except BFCL_DATA_ERRORS as exc:
        raise checked.problem(exc) from None


@functools.cache
def _bfcl_checker_available() -> bool:
    try:
        bfcl_modules()
        return True
    except InputError:
        return False


def _bfcl_success(t: Transcript, category: str) -> bool:
    """BFCL's own verdict on a run: its first response's calls (decoded as BFCL decodes Claude's
    tool_use blocks) through its AST checker; irrelevance: no call; live_relevance: some call."""
    calls = [c for c in t.tool_calls if c.turn == 1]
    if t.error:
        return False
    if category.endswith("irrelevance"):
        return not calls
    if category == "live_relevance":
        return bool(calls)
    entry, answer = bfcl_entries(category).get(t.case.name, ({}, None))
    if not entry or answer is None:
        return False
    bfcl = bfcl_modules()
    try:
        verdict = bfcl.ast_checker(
            entry["function"],
            [{c.name: c.input} for c in calls],
            answer["ground_truth"],
            bfcl.Language.PYTHON,
            category,
            BFCL_PROTOCOL_MODEL,
        )
    except Exception:  # a call BFCL's checker cannot read is not a correct one
        return False
    return bool(verdict.get("valid"))


@dataclass(frozen=True)
class BenchmarkRun:
    """One run of an imported case: our verdict, and whether the benchmark counts it a success."""

    case: str
    model: str
    tags: tuple[str, ...]
    passed: bool  # this evaluator's verdict
    succeeded: bool  # the benchmark's: BFCL's AST check, τ²'s reward of 1


def _graded_pass(t: Transcript, grader: str) -> bool:
    return bool((t.grades.get(grader) or {}).get("passed"))


def benchmark_run(t: Transcript, verdict: Verdict) -> BenchmarkRun:
    """BFCL's verdict on a run is its AST checker's (bfcl-eval installed), else ours (they agree:
    tests/test_literature.py measures it). τ²'s reward is its `verify`
    (the database against the gold actions' and what had to be said: tau2_verify.py), times the
    judge's verdict on the assertions when the task's reward counts them."""
    tags = tuple(t.case.tags)
    succeeded = verdict.passed
    category = next((tag.removeprefix(BFCL_TAG) for tag in tags if tag.startswith(BFCL_TAG)), None)
    if category in BFCL_CATEGORIES and _bfcl_checker_available():
        succeeded = _bfcl_success(t, category)
    if any(tag.startswith(TAU2_TAG) for tag in tags):
        succeeded = (
            not t.error
            and _graded_pass(t, "verify")
            and (TAU2_NL_TAG not in tags or _graded_pass(t, "judge"))
        )
    return BenchmarkRun(t.case.name, t.model, tags, verdict.passed, succeeded)


def _runs_by_tag(runs: Iterable[BenchmarkRun], prefix: str) -> dict[str, list[BenchmarkRun]]:
    grouped: dict[str, list[BenchmarkRun]] = {}
    for run in runs:
        tag = next((t for t in run.tags if t.startswith(prefix) and t != TAU2_NL_TAG), None)
        if tag is not None:
            grouped.setdefault(tag.removeprefix(prefix), []).append(run)
    return grouped


def _share(flags: Sequence[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0


def _our_figures(runs: Sequence[BenchmarkRun], passed: Mapping[tuple[str, str], bool]) -> dict:
    cases = {(r.case, r.model) for r in runs}
    return {
        "cases passed": _share([passed.get(c, False) for c in cases]),
        "runs passed": _share([r.passed for r in runs]),
    }


def _bfcl_record(
    runs: Sequence[BenchmarkRun], passed: Mapping[tuple[str, str], bool]
) -> LiteratureRecord:
    """BFCL's accuracy per category (correct runs / runs) and its leaderboard's aggregates."""
    by_category = _runs_by_tag(runs, BFCL_TAG)
    figures, accuracy = [], {}
    for category in sorted(
        by_category,
        key=lambda c: (
            c not in BFCL_CATEGORIES,
            BFCL_CATEGORIES.index(c) if c in BFCL_CATEGORIES else 0,
            c,
        ),
    ):
        mine = by_category[category]
        cases = len({(r.case, r.model) for r in mine})
        accuracy[category] = (_share([r.succeeded for r in mine]), cases)
        figures.append(
            LiteratureFigure(
                name=category,
                cases=cases,
                runs=len(mine),
                theirs={"accuracy": accuracy[category][0]},
                ours=_our_figures(mine, passed),
            )
        )
    for title, parts, weighted, note in _BFCL_HEADLINES:
        if not all(p in accuracy for p in parts) or len(parts) == 1:
            continue
        values = [accuracy[p] for p in parts]
        value = (
            sum(a * n for a, n in values) / sum(n for _, n in values)
            if weighted
            else sum(a for a, _ in values) / len(values)
        )
        mine = [r for p in parts for r in by_category[p]]
        figures.append(
            LiteratureFigure(
                name=title,
                cases=sum(n for _, n in values),
                runs=len(mine),
                theirs={"accuracy": round(value, 4)},
                ours=_our_figures(mine, passed),
                note=note,
            )
        )
    return LiteratureRecord(
        benchmark="BFCL V4",
        metric="accuracy: runs whose first response makes exactly the expected calls, as BFCL's "
        "AST checker decides (irrelevance: no call at all)",
        figures=figures,
        notes=[
            "accuracy: BFCL's own AST checker (bfcl-eval) on each run's first response"
            if _bfcl_checker_available()
            else "bfcl-eval is not installed here: accuracy is our verdicts' (they agree with "
            "BFCL's checker, see the README)",
            "BFCL runs each entry once; with -i N every run counts, as N entries would.",
            "Overall is not shown: BFCL's weighs in multi-turn and agentic categories, not imported.",
        ],
    )


def _tau2_record(
    runs: Sequence[BenchmarkRun], passed: Mapping[tuple[str, str], bool]
) -> LiteratureRecord:
    """τ²-bench's pass^k per domain: the mean over tasks of C(successes, k) / C(trials, k), for k
    up to the trials every task had (-i k), and the average reward over every run."""
    figures = []
    for domain, mine in sorted(_runs_by_tag(runs, TAU2_TAG).items()):
        by_task: dict[tuple[str, str], list[bool]] = {}
        for r in mine:
            by_task.setdefault((r.case, r.model), []).append(r.succeeded)
        trials = min(len(v) for v in by_task.values())
        theirs = {
            f"pass^{k}": round(
                sum(pass_hat_k(len(v), sum(v), k) for v in by_task.values()) / len(by_task), 4
            )
            for k in range(1, trials + 1)
        }
        theirs["avg_reward"] = _share([r.succeeded for r in mine])
        figures.append(
            LiteratureFigure(
                name=domain,
                cases=len(by_task),
                runs=len(mine),
                theirs=theirs,
                ours=_our_figures(mine, passed),
            )
        )
    return LiteratureRecord(
        benchmark="τ²-bench",
        metric="pass^k: the chance that k trials of a task all succeed (reward 1: the database "
        "ends as the gold actions leave it, and what had to be said was said), averaged over tasks",
        figures=figures,
        notes=[
            "Ours also asks for the gold actions in order with their arguments, the information "
            "in the final answer and the assertions (rubric) on every task: stricter than τ²'s reward."
        ],
    )


def literature_records(
    runs: Sequence[BenchmarkRun], passed: Mapping[tuple[str, str], bool]
) -> list[LiteratureRecord]:
    """The benchmarks' own figures over their runs; `passed`: (case, model) -> our verdict."""
    records = []
    if _runs_by_tag(runs, BFCL_TAG):
        records.append(_bfcl_record(runs, passed))
    if _runs_by_tag(runs, TAU2_TAG):
        records.append(_tau2_record(runs, passed))
    return records
