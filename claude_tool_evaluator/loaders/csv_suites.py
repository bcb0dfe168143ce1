"""CSV regression suites: their columns, each row checked and turned into a TestCase; tool
overrides; filters by tag and name.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders.servers."""

from __future__ import annotations

import contextlib
import difflib
import itertools
import json
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..answers import answer_match_hint, answer_match_problem, normalize_answer_match
from ..errors import InputError, InputProblems
from ..files import check_json_depth, parse_json_text, read_text_file
from ..run_types import TestCase
from ..sinks import line_of, one_line
from .servers import wrong_file

__all__ = [
    "ANY_OF",
    "ARGS_MATCH_MODES",
    "CSV_COLUMNS",
    "CsvSuite",
    "OPTIONAL",
    "ORDER_MODES",
    "TOOL_BOUND_ARGUMENTS",
    "TOOL_OVERRIDE_KEYS",
    "case_tool_view",
    "check_case_tools",
    "csv_case",
    "csv_records",
    "filter_by_names",
    "filter_by_tags",
    "is_alternatives",
    "load_csv_suite",
    "load_tool_overrides",
    "name_matcher",
    "split_list",
    "verify_command",
]

CSV_COLUMNS: tuple[str, ...] = (
    "test_name",
    "user_prompt",
    "prompt",
    "expected_tools",
    "forbidden_tools",
    "description",
    "expected_args",
    "args_match",
    "order",
    "max_tool_calls",
    "min_tool_calls",
    "expect_no_tools",
    "tags",
)


CSV_COLUMNS += (
    "rubric",
    "verify",
    "args_ignore",
)  # graded outcomes: an LLM judge, a state check, tolerated args


CSV_COLUMNS += (
    "expected_answer",
    "answer_match",
)  # the answer Claude should give, and how it is compared


CSV_COLUMNS += (
    "simulated_user",
    "tools",
)  # a simulated user with this goal answers Claude; the tools this case shows Claude


ARGS_MATCH_MODES = ("partial", "exact", "ignore", "exact_with_defaults")


# An expected argument may accept several values: {"$any_of": [v1, v2, ...]} (each one compared as
# a plain expected value would be, and may itself hold alternatives), with "$optional": true when
# leaving the argument out is right too. Only a dict whose keys are these two is read this way, so
# an expected value that is any other dict still means that very dict. A tool's expected arguments
# may also be a list of argument objects: that many calls, each matched by a call of its own.
ANY_OF, OPTIONAL = "$any_of", "$optional"


def is_alternatives(value: Any) -> bool:
    return isinstance(value, dict) and ANY_OF in value and set(value) <= {ANY_OF, OPTIONAL}


def _expected_value_problem(value: Any, where: str) -> str | None:
    """Why an expected argument value is malformed (None when it is fine)."""
    if isinstance(value, dict):
        if any(k in (ANY_OF, OPTIONAL) for k in value) and not is_alternatives(value):
            return f"{where}: {OPTIONAL} goes with {ANY_OF}, and nothing else beside them"
        if is_alternatives(value):
            options, optional = value[ANY_OF], value.get(OPTIONAL, False)
            if not isinstance(options, list) or not options:
                return f"{where}: {ANY_OF} takes a non-empty list of accepted values"
            if not isinstance(optional, bool):
                return f"{where}: {OPTIONAL} is true or false"
            return next(
                filter(
                    None,
                    (_expected_value_problem(v, f"{where}[{i}]") for i, v in enumerate(options)),
                ),
                None,
            )
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return None
    return next(filter(None, (_expected_value_problem(v, f"{where}.{k}") for k, v in items)), None)


def _expected_args_problem(expected_args: Any) -> str | None:
    """Why a case's expected_args is malformed: it is {tool: {arg: value}} or {tool: [{arg:
    value}, ...]} (several calls of the tool), with alternatives where an argument has several."""
    if not isinstance(expected_args, dict):
        return "expected_args must be a JSON object of objects"
    for tool, calls in expected_args.items():
        listed = calls if isinstance(calls, list) else [calls]
        if not listed or not all(isinstance(c, dict) for c in listed):
            return (
                f"expected_args of {tool}: an object of arguments, or a list of them (one per call)"
            )
        for i, call in enumerate(listed):
            where = f"{tool}[{i}]" if isinstance(calls, list) else tool
            problem = _expected_value_problem(call, where)
            if problem or is_alternatives(call):
                return problem or f"{where}: {ANY_OF} belongs to an argument, not to all of them"
    return None


ORDER_MODES = ("any", "strict", "in_order", "subset", "superset")


_TRUE_WORDS, _FALSE_WORDS = ("true", "yes", "1", "y"), ("false", "no", "0", "n", "")


def split_list(value: str) -> list[str]:
    return [item.strip() for item in re.split(r"[,;]", value or "") if item.strip()]


def csv_records(text: Any, path: Path) -> Iterator[tuple[int, list[str]]]:
    """Every record that is not blank, with the line it starts on (quoted fields may span lines),
    read as it goes from a text or a text stream; the first is the header."""
    import csv

    if isinstance(text, str):
        import io

        text = io.StringIO(text, newline="")
    first = text.readline()
    text.seek(0)
    delimiter = ";" if ";" in first and "," not in first else ","  # a spreadsheet's export
    reader = csv.reader(text, strict=True, delimiter=delimiter)
    start = 1
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                yield start, row
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(
            f"malformed CSV: {exc}",
            path,
            reader.line_num or start,
            "quote fields that contain commas, quotes or newlines",
        ) from None


def _csv_count(row: dict[str, str], column: str, fail: Callable[..., InputError]) -> int | None:
    value = (row.get(column) or "").strip()
    if not value:
        return None
    if not (value.isascii() and value.isdigit()):  # "²".isdigit() is True, int("²") fails
        raise fail(
            f"{column} {value!r} is not a whole number", "write digits such as 3, or leave it empty"
        )
    return int(value)


def verify_command(value: str, fail: Callable[..., InputError]) -> str:
    """A `verify` command line: run by the shell after each run; it must at least split as one."""
    value = value.strip()
    if value:
        try:
            if not shlex.split(value):
                raise ValueError("it is empty")
        except ValueError as exc:
            raise fail(
                f"verify {value!r} is not a command line: {exc}",
                "e.g. python check_state.py (quote arguments that hold spaces)",
            ) from None
    return value


def _csv_answer(
    row: dict[str, str], name: str, fail: Callable[..., InputError]
) -> tuple[str | None, str]:
    """The expected_answer and answer_match columns, checked: a bad mode is the row's error."""
    expected = (row.get("expected_answer") or "").strip() or None
    match = (row.get("answer_match") or "").strip()
    if not match and expected is None:
        return None, "exact"
    problem = answer_match_problem(match or "exact", expected)
    if problem:
        raise fail(f"test {name!r}: {problem}", answer_match_hint())
    return expected, normalize_answer_match(match or "exact")


def csv_case(row: dict[str, str], path: Path, line: int) -> TestCase:
    def fail(message: str, hint: str | None = None) -> InputError:
        return InputError(message, path, line, hint)

    name = row.get("test_name", "").strip()
    prompt = (row.get("user_prompt") or row.get("prompt") or "").strip()
    goal = (row.get("simulated_user") or "").strip() or None
    if not name:
        raise fail("empty test_name", "give every row a name")
    if not prompt and not goal:
        raise fail(
            f"test {name!r} has an empty prompt",
            "write the user's request in user_prompt (or a simulated_user goal: it opens)",
        )
    expected_args: dict[str, Any] = {}
    if (row.get("expected_args") or "").strip():
        try:
            expected_args = json.loads(row["expected_args"])
        except (ValueError, RecursionError) as exc:  # also nesting too deep, a number too long
            problem = getattr(exc, "msg", None) or (
                "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
            )
            raise fail(
                f"expected_args is not valid JSON: {problem}",
                'write it as {"tool_name": {"param": "value"}}',
            ) from None
        check_json_depth(expected_args, "expected_args", path, line)
        problem = _expected_args_problem(expected_args)
        if problem:
            raise fail(
                problem,
                '{"tool_name": {"param": "value", "other": {"$any_of": ["a", "b"]}}}',
            )
    args_match = (row.get("args_match") or "partial").strip().lower()
    order = (row.get("order") or "any").strip().lower()
    if args_match not in ARGS_MATCH_MODES:
        raise fail(
            f"args_match {args_match!r} is not one of {', '.join(ARGS_MATCH_MODES)}",
            "leave it empty for partial",
        )
    if order not in ORDER_MODES:
        raise fail(
            f"order {order!r} is not one of {', '.join(ORDER_MODES)}", "leave it empty for any"
        )
    flag = (row.get("expect_no_tools") or "").strip().lower()
    if flag not in _TRUE_WORDS + _FALSE_WORDS:
        raise fail(f"expect_no_tools {flag!r} is not true or false", "write true or false")
    case = TestCase(
        name=name,
        prompt=prompt,
        description=(row.get("description") or "").strip(),
        expected_tools=split_list(row.get("expected_tools", "")),
        forbidden_tools=split_list(row.get("forbidden_tools", "")),
        expected_args=expected_args,
        args_match=args_match,
        order=order,
        max_tool_calls=_csv_count(row, "max_tool_calls", fail),
        min_tool_calls=_csv_count(row, "min_tool_calls", fail),
        expect_no_tools=flag in _TRUE_WORDS,
        tags=split_list(row.get("tags", "")),
        simulated_user=goal,
        source=str(path),
        line=line,
        tools=split_list(row.get("tools", "")),
    )
    bad = next((e for e in case.tools if not all(p.strip() for p in e.split("="))), None)
    if bad is not None or any(e.count("=") > 1 for e in case.tools):
        raise fail(f"tools entry {bad!r} is not NAME or NAME=TOOL", "e.g. search,lookup=get_record")
    case.rubric, case.verify = (
        (row.get("rubric") or "").strip(),
        verify_command(row.get("verify") or "", fail),
    )
    case.args_ignore = split_list(row.get("args_ignore", ""))
    case.expected_answer, case.answer_match = _csv_answer(row, name, fail)
    if case.expect_no_tools and case.expected_tools:
        raise fail(
            f"test {name!r} sets expect_no_tools and also lists expected_tools", "keep one of them"
        )
    clash = set(case.expected_tools) & set(case.forbidden_tools)
    if clash:
        raise fail(f"test {name!r} both expects and forbids {', '.join(sorted(clash))}")
    return case


def _no_tagged_test(
    tags: Sequence[str], known: Iterable[str], path: Path | None = None
) -> InputError:
    """--tag naming no test's tag: the nearest tag the suite has (`--tag smok`: did you mean
    smoke?), else the tags it has."""
    known = sorted(set(known))
    close = [m for tag in tags for m in difflib.get_close_matches(tag, known, n=1)]
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else f"its tags: {', '.join(known[:20])}"
        if known
        else "no test has a tag (the tags column)"
    )
    return InputError(f"no test has the tag(s) {', '.join(tags)}", path, hint=hint)


class CsvSuite(Sequence[TestCase]):
    """A CSV regression suite (seed 002's columns plus the optional ones). Every problem of the
    file is reported with its line when it is loaded, before anything runs; after that it reads
    like a list of its cases (those with --tag's tags), each made again from the file's text as
    it is reached, so a 100,000-case suite is never 100,000 cases in memory: what stays is the
    text (at most MAX_INPUT_FILE_BYTES) and what the checks after connecting need (the tools the
    cases name)."""

    def __init__(self, path: Path, text: str, tags: Sequence[str] = ()) -> None:
        self.path, self.raw, self.tags = path, text.encode("utf-8", "surrogatepass"), tuple(tags)
        self.size = 0
        # expected, forbidden or given expected_args; None once a case shows only some tools
        self.tools_named: set[str] | None = set()
        self.tools_expected: set[str] = set()  # expected, or given expected_args (tool coverage)
        self.check()

    def records(self) -> Iterator[tuple[int, list[str]]]:
        import io

        stream = io.TextIOWrapper(
            io.BytesIO(self.raw), encoding="utf-8", errors="surrogatepass", newline=""
        )
        return csv_records(stream, self.path)

    def header(self) -> list[str]:
        found = next(self.records(), None)
        if found is None:
            raise InputError(
                "the CSV file is empty", self.path, 1, "add a header row: test_name,user_prompt,..."
            )
        return [h.strip().lower() for h in found[1]]

    def wanted(self, case: TestCase) -> bool:
        """--tag: a case with one of the tags (any case without --tag)."""
        return not self.tags or bool(
            {t.lower() for t in self.tags} & {t.lower() for t in case.tags}
        )

    def check(self) -> None:
        """One pass over the file: every problem with its line, the cases counted."""
        path, header = self.path, self.header()
        problems: list[InputError] = []
        for column in (h for h in header if h not in CSV_COLUMNS):
            close = difflib.get_close_matches(column, CSV_COLUMNS, n=1)
            problems.append(
                InputError(
                    f"unknown column {column!r}",
                    path,
                    1,
                    f"did you mean {close[0]!r}?"
                    if close
                    else "known columns: " + ", ".join(CSV_COLUMNS),
                )
            )
        lacking = [
            column
            for column, there in (
                ("test_name", "test_name" in header),
                ("user_prompt", bool({"user_prompt", "prompt"} & set(header))),
            )
            if not there
        ]
        if lacking:
            first = ",".join(next(self.records())[1])  # the file's own first row, as written
            problems.append(
                InputError(
                    "the header needs test_name and user_prompt (or prompt) columns",
                    path,
                    1,
                    f"its first row is {one_line(first, 120)!r}: add {' and '.join(lacking)}, "
                    "e.g. test_name,user_prompt,expected_tools",
                )
            )
        if problems:
            raise InputProblems(problems)
        seen: set[str] = set()
        rows = 0
        known_tags: set[str] = set()  # every case's, for --tag's "did you mean"
        for line, row in itertools.islice(self.records(), 1, None):
            rows += 1
            if len(row) != len(header):
                problems.append(
                    InputError(
                        f"row has {len(row)} fields, the header has {len(header)}",
                        path,
                        line,
                        "quote fields that contain commas",
                    )
                )
                continue
            try:
                case = csv_case(dict(zip(header, row)), path, line)
            except InputError as exc:
                problems.append(exc)
                continue
            if case.name in seen:
                problems.append(self.duplicate(case, line))
                continue
            seen.add(case.name)
            known_tags.update(case.tags)
            if self.wanted(case):
                self.size += 1
                if case.tools:
                    self.tools_named = None
                elif self.tools_named is not None:
                    self.tools_named.update(
                        case.expected_tools, case.forbidden_tools, case.expected_args
                    )
                self.tools_expected.update(case.expected_tools, case.expected_args)
        if problems:
            raise InputProblems(problems)
        if not rows:
            raise InputError(
                "the CSV suite has a header but no test rows",
                path,
                2,
                "add one row per test below the header",
            )
        if not self.size:
            raise _no_tagged_test(self.tags, known_tags, path)

    def duplicate(self, case: TestCase, line: int) -> InputError:
        """The error of a second row with a name; the first is found again (the error's path)."""
        header, first = self.header(), line
        for at, row in itertools.islice(self.records(), 1, None):
            with contextlib.suppress(InputError):
                if (
                    len(row) == len(header)
                    and csv_case(dict(zip(header, row)), self.path, at).name == case.name
                ):
                    first = at
                    break
        return InputError(
            f"duplicate test_name {case.name!r} (first on line {first})",
            self.path,
            line,
            "give every test a unique name",
        )

    def all_cases(self) -> Iterator[TestCase]:
        header = self.header()
        for line, row in itertools.islice(self.records(), 1, None):
            yield csv_case(dict(zip(header, row)), self.path, line)

    def __iter__(self) -> Iterator[TestCase]:
        return (case for case in self.all_cases() if self.wanted(case))

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        if not -self.size <= index < self.size:
            raise IndexError(index)
        return next(itertools.islice(self, index % self.size, None))

    def tagged(self, tags: Sequence[str]) -> CsvSuite:
        return CsvSuite(self.path, self.raw.decode("utf-8", "surrogatepass"), tags)


def load_csv_suite(path: str | Path) -> CsvSuite:
    """A CSV regression suite, checked whole: every problem of the file with its line."""
    path = Path(path)
    text = read_text_file(path, "CSV suite")
    other = wrong_file(text, path, "--csv", "a CSV suite")
    if other is not None:
        raise other
    return CsvSuite(path, text)


def case_tool_view(case: TestCase) -> dict[str, str] | None:
    """A case's `tools`: the name Claude sees -> the servers' tool; None: every tool, as is."""
    if not case.tools:
        return None
    pairs = (entry.partition("=") for entry in case.tools)
    return {shown.strip(): (target or shown).strip() for shown, _, target in pairs}


def _tools_named(cases: Iterable[TestCase]) -> set[str] | None:
    """Every tool the cases name (expected, forbidden, or with expected arguments); None when a
    case shows Claude only some tools (`tools`), whose names are checked case by case."""
    if isinstance(cases, CsvSuite):  # counted when the file was checked: no pass over its cases
        return cases.tools_named
    named: set[str] = set()
    for case in cases:
        if case.tools:
            return None
        named.update(case.expected_tools, case.forbidden_tools, case.expected_args)
    return named


def check_case_tools(cases: Iterable[TestCase], available: Sequence[str]) -> None:
    """Every tool a case names must exist on the connected servers (and, when the case shows
    Claude only some of them, be one of those): typos cost no money."""
    import difflib

    named = _tools_named(cases)
    if named is not None and named <= set(available):
        return  # a CSV suite knows its tools: no pass over its cases
    problems = []
    for case in cases:
        view = case_tool_view(case)

        def missing(case: TestCase, tool: str, among: Sequence[str], what: str) -> None:
            close = difflib.get_close_matches(tool, among, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "available: " + ", ".join(among)
            problems.append(
                InputError(
                    f"test {case.name!r} names tool {tool!r}, which {what}",
                    case.source or None,
                    case.line or None,
                    hint,
                )
            )

        for tool in dict.fromkeys((view or {}).values()):
            if tool not in available:
                missing(case, tool, available, "no connected server offers")
        for tool in dict.fromkeys(
            [*case.expected_tools, *case.forbidden_tools, *case.expected_args]
        ):
            if view is not None and tool not in view:
                missing(case, tool, list(view), "the case's tools do not show Claude")
            elif view is None and tool not in available:
                missing(case, tool, available, "no connected server offers")
    if problems:
        raise InputProblems(problems)


TOOL_OVERRIDE_KEYS = ("description", "input_schema")


# --tool-overrides' `arguments`: bound to every call of the tool (over Claude's), never shown to
# Claude; "{run}" in a string becomes the run's id (also EVAL_RUN for a `verify` command)
TOOL_BOUND_ARGUMENTS = "arguments"


_TOOL_OVERRIDES_HINT = (
    'write {"tool_name": {"description": "...", "input_schema": {...}}}, either key optional'
)


def load_tool_overrides(path: str | Path) -> dict[str, dict]:
    """--tool-overrides FILE.json: what Claude is shown for some tools instead of what their
    servers say (the servers still run the calls). Names are checked once the servers are up."""
    raw = read_text_file(path, "--tool-overrides file")
    data = parse_json_text(raw, Path(path))
    if not isinstance(data, dict) or not data:
        raise InputError(
            "--tool-overrides must be a JSON object of tool name to override",
            path,
            1,
            _TOOL_OVERRIDES_HINT,
        )
    for name, override in data.items():
        line = line_of(raw, json.dumps(name))
        if (
            not isinstance(override, dict)
            or not override
            or set(override) - {*TOOL_OVERRIDE_KEYS, TOOL_BOUND_ARGUMENTS}
        ):
            raise InputError(
                f"the override of {name!r} must be an object with description, input_schema "
                "and/or arguments",
                path,
                line,
                _TOOL_OVERRIDES_HINT,
            )
        description = override.get("description")
        if "description" in override and (
            not isinstance(description, str) or not description.strip()
        ):
            raise InputError(f"the description of {name!r} must be a non-empty string", path, line)
        bound = override.get(TOOL_BOUND_ARGUMENTS)
        if TOOL_BOUND_ARGUMENTS in override and not isinstance(bound, dict):
            raise InputError(f"the arguments of {name!r} must be a JSON object", path, line)
        schema = override.get("input_schema")
        if "input_schema" in override and (
            not isinstance(schema, dict) or schema.get("type", "object") != "object"
        ):
            raise InputError(
                f"the input_schema of {name!r} must be a JSON Schema object of type object",
                path,
                line,
            )
    return data


def filter_by_tags(cases: Sequence[TestCase], tags: Sequence[str]) -> Sequence[TestCase]:
    if not tags:
        return cases
    if isinstance(cases, CsvSuite):
        return cases.tagged(tags)
    wanted = {t.lower() for t in tags}
    chosen = [case for case in cases if wanted & {t.lower() for t in case.tags}]
    if not chosen:
        raise _no_tagged_test(tags, {t for case in cases for t in case.tags})
    return chosen


# -k EXPR: pytest's keyword expressions over case names. A word matches a name that holds it (any
# case); `and`, `or`, `not` and parentheses combine them: `-k "tables and not slow"`.
_KEYWORD_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def name_matcher(expression: str) -> Callable[[str], bool]:
    """-k EXPR as a predicate on names; a malformed expression is one line."""
    tokens = _KEYWORD_TOKEN.findall(expression)
    at = [0]

    def problem(what: str) -> InputError:
        return InputError(
            f"-k {expression!r}: {what}",
            hint='words, and / or / not and parentheses, e.g. -k "tables and not slow"',
        )

    def peek() -> str | None:
        return tokens[at[0]] if at[0] < len(tokens) else None

    def take() -> str:
        token = peek()
        if token is None:
            raise problem("it ends too soon")
        at[0] += 1
        return token

    def either() -> Callable[[str], bool]:
        parts = [both()]
        while peek() == "or":
            take()
            parts.append(both())
        return lambda name: any(part(name) for part in parts)

    def both() -> Callable[[str], bool]:
        parts = [negation()]
        while peek() == "and":
            take()
            parts.append(negation())
        return lambda name: all(part(name) for part in parts)

    def negation() -> Callable[[str], bool]:
        if peek() == "not":
            take()
            inner = negation()
            return lambda name: not inner(name)
        token = take()
        if token == "(":
            inner = either()
            if take() != ")":
                raise problem("a parenthesis is not closed")
            return inner
        if token in (")", "and", "or"):
            raise problem(f"{token!r} where a word belongs")
        word = token.lower()
        return lambda name: word in name.lower()

    if not tokens:
        raise problem("it is empty")
    matcher = either()
    if peek() is not None:
        raise problem(f"{peek()!r} after a complete expression")
    return matcher


def filter_by_names(cases: Sequence[TestCase], expression: str | None) -> Sequence[TestCase]:
    """-k: the cases whose names match; none is one line."""
    if not expression:
        return cases
    matches = name_matcher(expression)
    chosen = [case for case in cases if matches(case.name)]
    if not chosen:
        raise InputError(
            f"-k {expression!r} matches no case",
            hint="case names: " + ", ".join(c.name for c in itertools.islice(cases, 10)),
        )
    return chosen
