"""Bad input never crashes a loader: every malformed file under tests/corpus/ is refused through
the real CLI with exit 2 and one `error: file:line: what (how to fix)` line per problem, and
hypothesis feeds random bytes and random mutations of the valid examples to each loader, whose
only allowed outcomes are a successful load or an InputError naming the file."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evaluator
import test_constants as C
from claude_tool_evaluator.loaders.conversations import conversation_case
from claude_tool_evaluator.loaders.skills import load_skill_creator_evals
from evaluator import InputError

CORPUS = ROOT / "tests" / "corpus"
EXAMPLES = ROOT / "examples"
WAREHOUSE_SKILL = EXAMPLES / "skills" / "warehouse-sql"
WAREHOUSE_TRIGGER = EXAMPLES / "triggers" / "warehouse-sql-trigger.md"

# How each loader is reached from the command line; FILE is the corpus file (a SKILL.md's folder
# for skills). None of these needs an API key: bad input is refused before any key or network.
CLI_ARGS: dict[str, Callable[[Path], list[str]]] = {
    "csv": lambda f: ["--csv", str(f)],
    "markdown_tests": lambda f: ["--skill", str(WAREHOUSE_SKILL), "--tests", str(f)],
    "conversation": lambda f: ["-c", str(f)],
    "mcp_config": lambda f: ["--mcp-config", str(f), "-q", "hi"],
    "skill": lambda f: ["--skill", str(f.parent), "--trigger", str(WAREHOUSE_TRIGGER)],
    "skill_creator": lambda f: ["--skill", str(WAREHOUSE_SKILL), "--tests", str(f)],
}

# corpus file -> (fragment of the message, line it must name; None: the file has no line to name)
EXPECTED: dict[str, tuple[str, int | None]] = {
    "csv/bad_count.csv": ("max_tool_calls '²' is not a whole number", 2),
    "csv/bad_expected_args.csv": ("expected_args is not valid JSON", 2),
    "csv/bad_order.csv": ("order 'sideways' is not one of", 2),
    "csv/duplicate_name.csv": ("duplicate test_name 'a' (first on line 2)", 4),
    "csv/empty.csv": ("the CSV file is empty", 1),
    "csv/empty_prompt.csv": ("test 'b' has an empty prompt", 3),
    "csv/expected_args_not_object.csv": ("expected_args must be a JSON object of objects", 2),
    "csv/header_only.csv": ("a header but no test rows", 2),
    "csv/missing_column.csv": ("the header needs test_name and user_prompt", 1),
    "csv/non_utf8.csv": ("not valid UTF-8 (byte 0xe9)", 2),
    "csv/nul_byte.csv": ("contains a NUL byte", 2),
    "csv/ragged_row.csv": ("row has 7 fields, the header has 5", 3),
    "csv/unclosed_quote.csv": ("malformed CSV", 3),
    "csv/unknown_column.csv": (
        "unknown column 'expected_toolz' (did you mean 'expected_tools'?)",
        1,
    ),
    "markdown_tests/alias_bomb.md": ("YAML aliases (*name) are not allowed", 4),
    "markdown_tests/bad_date.md": ("invalid YAML frontmatter: month must be in 1..12", 2),
    "markdown_tests/bad_yaml.md": ("invalid YAML frontmatter: mapping values are not allowed", 3),
    "markdown_tests/concepts_dict.md": ("'concepts' must be a list of strings", 4),
    "markdown_tests/deep_nesting.md": ("nested more than", 3),
    "markdown_tests/empty_prompt.md": ("knowledge test has an empty prompt", 5),
    "markdown_tests/frontmatter_list.md": ("must be a mapping of keys to values, not a list", 2),
    "markdown_tests/frontmatter_number.md": ("must be a mapping of keys to values", 2),
    "markdown_tests/frontmatter_unclosed.md": ("YAML frontmatter is not closed", 1),
    "markdown_tests/huge_frontmatter.md": ("YAML frontmatter is larger than 64 KiB", 2),
    "markdown_tests/non_utf8.md": ("not valid UTF-8 (byte 0xff)", 5),
    "markdown_tests/nul_byte.md": ("contains a NUL byte", 5),
    "markdown_tests/python_tag.md": ("YAML tag not allowed", 3),
    "markdown_tests/runs_fraction.md": ("'runs' must be a positive whole number, got 1.5", 4),
    "markdown_tests/skill_list.md": ("'skill' must be a text value, not a list", 4),
    "markdown_tests/timeout_negative.md": ("'timeout' must be a positive number, got -5", 4),
    "markdown_tests/trigger_without_positives.md": ("trigger test has no positive queries", 3),
    "markdown_tests/unknown_type.md": ("unknown test type 'quiz'", 3),
    "conversation/empty.md": ("no conversation turns found", 1),
    "conversation/empty_message.md": ("empty Assistant message", 4),
    "conversation/no_turns.md": ("no conversation turns found", 1),
    "conversation/non_utf8.md": ("not valid UTF-8 (byte 0xc3)", 2),
    "conversation/nul_byte.md": ("contains a NUL byte", 2),
    "conversation/starts_with_assistant.md": ("starts with an Assistant message", 1),
    "conversation/two_assistant_turns.md": ("two Assistant messages in a row", 7),
    "conversation/unclosed_fence.md": ("this code block is never closed", 6),
    "mcp_config/args_not_list.json": ('"args" must be a list of strings', 3),
    "mcp_config/bad_url.json": ('http server needs a "url"', 3),
    "mcp_config/cwd_not_string.json": ('"cwd" must be a string', 3),
    "mcp_config/deep_nesting.json": ("invalid JSON: nested too deeply", 1),
    "mcp_config/env_not_strings.json": ("'env' must be an object of strings", 3),
    "mcp_config/invalid_json.json": ("invalid JSON: Expecting property name", 3),
    "mcp_config/missing_command.json": ('stdio server needs a "command" string', 3),
    "mcp_config/no_servers.json": ('no "mcpServers" object with at least one server', 1),
    "mcp_config/non_utf8.json": ("not valid UTF-8 (byte 0xe9)", 1),
    "mcp_config/not_an_object.json": ('no "mcpServers" object with at least one server', 1),
    "mcp_config/server_not_object.json": ("server 'a' must be an object", 3),
    "mcp_config/undefined_var.json": ("${CORPUS_SURELY_UNSET_VAR_42}, which is not set", 3),
    "mcp_config/unknown_type.json": ("unknown server type 'carrier-pigeon'", 3),
    "skill/Bad_Name/SKILL.md": ("name 'Bad_Name' must be lowercase letters", 2),
    "skill/alias/SKILL.md": ("YAML aliases (*name) are not allowed", 3),
    "skill/angle-bracket/SKILL.md": ("description contains '<' or '>'", 3),
    "skill/bad-yaml/SKILL.md": ("invalid YAML frontmatter", 3),
    "skill/empty-folder/SKILL.md": ("cannot read SKILL.md: No such file or directory", None),
    "skill/frontmatter-list/SKILL.md": ("must be a mapping of keys to values", 2),
    "skill/long-description/SKILL.md": ("the limit is 1024", 3),
    "skill/name-mismatch/SKILL.md": ("differs from its folder name 'name-mismatch'", 2),
    "skill/no-description/SKILL.md": ("frontmatter has no 'description'", 1),
    "skill/no-frontmatter/SKILL.md": ("no YAML frontmatter", 1),
    "skill/non-utf8/SKILL.md": ("not valid UTF-8 (byte 0xe9)", 3),
    "skill/python-tag/SKILL.md": ("YAML tag not allowed", 3),
    "skill_creator/empty.json": ("eval set has no queries", 1),
    "skill_creator/empty_file.json": ("invalid JSON", 1),
    "skill_creator/entry_not_object.json": ('entry 1 needs a non-empty "query" string', 1),
    "skill_creator/huge_number.json": ("invalid JSON: Exceeds the limit", 1),
    "skill_creator/invalid_json.json": ("invalid JSON: Expecting ',' delimiter", 3),
    "skill_creator/missing_query.json": ('entry 1 needs a non-empty "query" string', 1),
    "skill_creator/not_a_list.json": ("an eval set is a JSON list", 1),
    "skill_creator/should_trigger_string.json": ('entry 1 needs a non-empty "query" string', 2),
}


def corpus_files() -> list[str]:
    files = sorted(
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name not in ("README.md", ".keep")
    )
    return files + ["skill/empty-folder/SKILL.md"]  # a skill folder without its SKILL.md


def test_every_corpus_file_has_an_expectation_and_every_loader_enough_files():
    assert sorted(corpus_files()) == sorted(EXPECTED)
    for loader in CLI_ARGS:
        assert sum(1 for name in EXPECTED if name.startswith(loader + "/")) >= 6, loader


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """No API key, no way to reach a network, and a working directory of our own."""
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CORPUS_SURELY_UNSET_VAR_42"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_is_refused_through_the_cli(cli_env, name: str):
    path = CORPUS / name
    loader = name.split("/")[0]
    result = CliRunner().invoke(evaluator.main, CLI_ARGS[loader](path))
    err = result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2, (result.exit_code, err, result.stdout)
    assert "Traceback" not in err + result.stdout
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "no error line"
    fragment, line = EXPECTED[name]
    for text in lines:
        assert text.startswith("error: "), text
        assert str(path) in text, f"{text!r} does not name {path}"
    where = f"{path}:{line}: " if line else f"{path}: "
    assert any(text.startswith(f"error: {where}") and fragment in text for text in lines), (
        where,
        fragment,
        lines,
    )


def test_skill_problems_are_each_their_own_line(cli, cli_env):
    """Bad_Name breaks two rules (the charset and the folder name is fine): each problem a line."""
    path = CORPUS / "skill" / "Bad_Name" / "SKILL.md"
    result = cli(*CLI_ARGS["skill"](path))
    assert result.exit_code == 2
    assert all(line.startswith(f"error: {path}:") for line in result.stderr.splitlines())


# ---------------------------------------------------------------------------------- files that are not files
LOADERS: dict[str, Callable[[Path], object]] = {
    "csv": evaluator.load_csv_suite,
    "markdown_tests": lambda p: evaluator.load_markdown_test(p),
    "conversation": conversation_case,
    "mcp_config": evaluator.load_mcp_config,
    "skill": evaluator.load_skill,
    "skill_creator": load_skill_creator_evals,
}
FILE_NAMES = {
    "csv": "suite.csv",
    "markdown_tests": "test.md",
    "conversation": "conv.md",
    "mcp_config": "mcp.json",
    "skill": "SKILL.md",
    "skill_creator": "evals.json",
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_missing_file(tmp_path: Path, loader: str):
    path = tmp_path / "missing" / FILE_NAMES[loader]
    with pytest.raises(InputError) as caught:
        LOADERS[loader](path)
    assert str(path) in str(caught.value) and "No such file" in str(caught.value)


@pytest.mark.parametrize(
    "loader", sorted(set(LOADERS) - {"skill"})
)  # a skill's folder is valid input
def test_directory_instead_of_file(tmp_path: Path, loader: str):
    path = tmp_path / FILE_NAMES[loader]
    path.mkdir()
    with pytest.raises(InputError) as caught:
        LOADERS[loader](path)
    assert str(path) in str(caught.value) and "give a file, not a folder" in str(caught.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_unreadable_file(tmp_path: Path, loader: str):
    path = tmp_path / FILE_NAMES[loader]
    path.write_text("x")
    path.chmod(0)
    try:
        with pytest.raises(InputError, match="Permission denied"):
            LOADERS[loader](path)
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_huge_file_is_refused_without_reading_it_all(tmp_path: Path, loader: str):
    folder = tmp_path / "huge-skill" if loader == "skill" else tmp_path
    folder.mkdir(exist_ok=True)
    path = folder / FILE_NAMES[loader]
    with open(path, "wb") as handle:  # sparse: costs no disk
        handle.truncate(C.MAX_INPUT_FILE_BYTES + 1)
    with pytest.raises(InputError) as caught:
        LOADERS[loader](path)
    assert str(caught.value) == f"{path}: {caught.value.message} (split it into smaller files)"
    assert "larger than 10 MiB" in caught.value.message


def test_huge_file_through_the_cli(cli, cli_env, tmp_path: Path):
    path = tmp_path / "big.csv"
    with open(path, "wb") as handle:
        handle.truncate(C.MAX_INPUT_FILE_BYTES + 1)
    result = cli("--csv", str(path))
    assert result.exit_code == 2 and result.stderr.startswith(
        f"error: {path}: CSV suite is larger than 10 MiB"
    )


def test_yaml_goes_through_safe_load_only():
    """Nothing in the evaluator parses YAML any other way."""
    source = "\n".join(path.read_text() for path in (ROOT / "claude_tool_evaluator").rglob("*.py"))
    calls = set(re.findall(r"yaml\.(\w+)\(", source))
    # safe_dump writes (a SKILL.md copy), never reads; compose (with SafeLoader, after the same
    # checks) only finds the project file's lines, and constructs nothing
    assert calls <= {"safe_load", "parse", "safe_dump", "compose"}, calls
    assert "yaml.compose(text, Loader=yaml.SafeLoader)" in source


# ---------------------------------------------------------------------------------- property tests
VALID_MCP_CONFIG = """{
  "mcpServers": {
    "profiles": {"command": "python", "args": ["server.py", "--port", "${PORT:-8080}"], "env": {"MODE": "test"}},
    "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Key": "${KEY:-none}"}},
    "local": {"type": "stdio", "command": "node", "args": [], "cwd": "."}
  }
}
"""
VALID_EVAL_SET = """[
  {"query": "Write a SQL query for weekly revenue", "should_trigger": true},
  {"query": "Fix this join: SELECT * FROM a JOIN b", "should_trigger": true},
  {"query": "Tell me a joke", "should_trigger": false}
]
"""


def valid_examples(loader: str) -> list[tuple[str, str]]:
    """(file name to write as, text) of each valid example of a loader."""

    def read(*paths: Path) -> list[tuple[str, str]]:
        return [(p.name, p.read_text(encoding="utf-8")) for p in paths]

    return {
        "csv": lambda: read(EXAMPLES / "test_queries.csv"),
        "markdown_tests": lambda: read(
            *sorted((EXAMPLES / "tests").glob("*.md")),
            *sorted((EXAMPLES / "triggers").glob("*.md")),
        ),
        "conversation": lambda: read(EXAMPLES / "sample_conv.md", EXAMPLES / "test_conv.md"),
        "mcp_config": lambda: [("mcp.json", VALID_MCP_CONFIG)],
        "skill": lambda: [
            (p.parent.name, p.read_text(encoding="utf-8"))
            for p in sorted((EXAMPLES / "skills").glob("*/SKILL.md"))
        ],
        "skill_creator": lambda: [("evals.json", VALID_EVAL_SET)],
    }[loader]()


def test_the_valid_examples_load(tmp_path: Path):
    for loader in LOADERS:
        for name, text in valid_examples(loader):
            LOADERS[loader](write_input(tmp_path, loader, name, text.encode("utf-8")))


def write_input(root: Path, loader: str, name: str, data: bytes) -> Path:
    """The file where its loader expects it: a SKILL.md inside a folder named like the skill."""
    path = root / name / "SKILL.md" if loader == "skill" else root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def load_or_refuse(loader: str, name: str, data: bytes) -> None:
    """The property: a successful load, or an InputError whose every line names the file."""
    with tempfile.TemporaryDirectory() as scratch:
        path = write_input(Path(scratch), loader, name, data)
        try:
            LOADERS[loader](path)
        except InputError as exc:
            text = str(exc)
            assert text.strip(), "an empty error message"
            for line in text.splitlines():
                assert line.startswith(str(path)), line
        # any other exception propagates and fails the test


# Pieces that tend to break parsers, inserted at random places.
NASTY = [
    "---",
    "...",
    "```",
    "~~~",
    "**User**",
    "**Assistant**",
    "## User",
    "Assistant:",
    "# Prompt",
    "# Positive Triggers",
    "!!python/object:os.system",
    "&a",
    "*a",
    "? [a]: b",
    "{",
    "}",
    "[",
    "]",
    ":",
    ": ",
    '"',
    "'",
    ",",
    ";",
    "\\",
    "\t",
    "\r",
    "\r\n",
    "\u2028",
    "\x85",
    "\ufeff",
    "\x00",
    "\xff",
    "${UNSET_VAR_XYZ}",
    "2024-13-45",
    "9" * 5000,
    "[" * 300,
    "-",
    "- [x] ",
    "1. ",
    "<",
    ">",
    "é",
    "😀",
    "type: trigger",
    "type: [a]",
    "concepts: {a: 1}",
    "timeout: .nan",
    "runs: 1e308",
    "name: ",
    '"should_trigger": "yes"',
    '"query": null',
    '"args": "x"',
    '"cwd": 1',
    "null",
    "true",
    "[]",
]


@st.composite
def mutated(draw: st.DrawFn, texts: list[tuple[str, str]]) -> tuple[str, bytes]:
    name, text = draw(st.sampled_from(texts))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(
                ["delete", "duplicate", "swap", "insert", "nasty", "replace", "truncate"]
            )
        )
        if not lines:
            lines = [""]
        i = draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op in ("insert", "nasty", "replace"):
            piece = draw(st.sampled_from(NASTY)) if op == "nasty" else draw(st.text(max_size=20))
            at = draw(st.integers(0, len(lines[i])))
            end = at + (draw(st.integers(0, 10)) if op == "replace" else 0)
            lines[i] = lines[i][:at] + piece + lines[i][end:]
        elif op == "truncate":
            lines = lines[: i + 1]
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    data = "".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:  # now and then, a byte-level cut
        data = data[: draw(st.integers(0, len(data)))]
    return name, data


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def property_tests(loader: str):
    texts = valid_examples(loader)
    name = texts[0][0]

    @PROPERTY
    @given(data=st.binary(max_size=3000))
    def random_bytes(data: bytes) -> None:
        load_or_refuse(loader, name, data)

    @PROPERTY
    @given(
        prefix=st.sampled_from(
            [
                b"",
                b"---\n",
                b"---\nname: x\n---\n",
                b"**User**\n",
                b"test_name,user_prompt\n",
                b'{"mcpServers": ',
                b"[",
            ]
        ),
        data=st.binary(max_size=1000),
    )
    def random_bytes_after_a_plausible_start(prefix: bytes, data: bytes) -> None:
        load_or_refuse(loader, name, prefix + data)

    @PROPERTY
    @given(case=mutated(texts))
    def mutations_of_valid_files(case: tuple[str, bytes]) -> None:
        load_or_refuse(loader, *case)

    return random_bytes, random_bytes_after_a_plausible_start, mutations_of_valid_files


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_random_bytes(loader: str):
    property_tests(loader)[0]()


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_random_bytes_after_a_plausible_start(loader: str):
    property_tests(loader)[1]()


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_mutations_of_valid_files(loader: str):
    property_tests(loader)[2]()


# ---------------------------------------------------------------------------- run counts: a cap
# -i 100000000000 is a typo that would spin for minutes building its runs: refused before any
# server starts (the server here does not exist, and is never reached), as is a project file's.
RUN_CAP_LINE = "runs a case is over the cap of 1,000 (pass --allow-many-runs if you mean it)"


@pytest.mark.parametrize(
    "args, flag",
    [
        (["-i", "100000000000"], "-i 100,000,000,000"),
        (["-i", "auto:5-100000000000"], "-i 100,000,000,000"),
        (["--optimize", "--runs", "5000"], "--runs 5,000"),
    ],
)
def test_a_run_count_over_the_cap_is_refused_before_anything_starts(cli, cli_env, args, flag):
    suite = EXAMPLES / "test_queries.csv"
    done = cli("--csv", str(suite), "--server", "no-such-server-anywhere", *args)
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [f"error: {flag} {RUN_CAP_LINE}"]


def test_a_project_files_run_count_over_the_cap_names_its_line(cli, cli_env, tmp_path: Path):
    project = tmp_path / "evaluator.yaml"
    project.write_text(
        "suites:\n"
        "  - name: fine\n"
        f"    csv: {EXAMPLES / 'test_queries.csv'}\n"
        "    server: no-such-server-anywhere\n"
        "  - name: typo\n"
        f"    csv: {EXAMPLES / 'test_queries.csv'}\n"
        "    server: no-such-server-anywhere\n"
        "    iterations: 100000000000\n"
    )
    done = cli("--config", str(project))
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        f"error: {project}:8: iterations: 100,000,000,000 {RUN_CAP_LINE}"
    ]
