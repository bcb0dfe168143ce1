"""Suites in the shapes plugin authors write (tests/plugin_corpus/), each run by `plugin` and by
`claude plugin eval --json` on the same scripted server, compared run by run: pass, score,
turns and every grader's verdict. Each suite's two runs are made once for the module.

What the scripted server (`plugin_claude_code`) does, by hand:
- root-suite (a suite at a repository root; each case names its plugin, pantry):
  01-low-shelves: with pantry the prompt shares most words with shelf-audit: Skill, then "Done"
  (3 turns): both graders pass; without it no skill, one turn: both fail. 2 runs each.
  02-scale-recipe: recipe-scaler with the plugin (its `tool_used Skill` grader has no arm: a
  with-only indicator under ablation, not scored); `not_contains error` passes in both arms.
  03-weather: no skill either way: `min 0 max 0` passes in both.
- mocked-plugin (larder; its `stock` server stood in for by mocks, the real one would touch a
  marker): with the plugin the skill names mcp__plugin_larder_stock__count, deferred: Skill,
  ToolSearch select:, the tool, then "Done: " and the mock's answer (01: the suite's mock, its
  template filled with the query; 02: the case's own mock; 03: the case's own mock, its
  `{{file:count.txt}}` filled from the file beside it); without it one turn, nothing passes.
- commands-plugin (memo): 01's `/memo:draft ...` reaches the model expanded (the command's text
  shares its words with memo-writer): Skill, then "Done" with the plugin; without it the command
  does not exist and the model answers at once. 02: no skill either way, `max 0` passes.
- refused-case: 02-judged-wrongly's llm grader has `target:` (Claude Code refuses the file): it
  is skipped with a line and the exit is 1; 01-tidy-notes runs and passes with the plugin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, Ran, needs_claude, spawn
from fake_anthropic import ScriptedAnthropic, mock_plugin_claude_code, plugin_claude_code
from plugin_side_by_side import claude_code_env

from claude_tool_evaluator.claude_code.process import claude_command, tool_grants
from claude_tool_evaluator.errors import InputError
from claude_tool_evaluator.loaders.plugin_evals import load_case, load_plugin
from claude_tool_evaluator.runners.plugin import PluginRunPlan

CORPUS = ROOT / "tests" / "plugin_corpus"


def run_claude_plugin_eval(
    api_url: str, folder: Path, target: Path, *args: str
) -> tuple[int, str, dict]:
    """`claude plugin eval TARGET --json` itself, its exit code, what it said, its document."""
    home, out = folder / "cc-home", folder / "cc.json"
    home.mkdir(parents=True)
    done = subprocess.run(
        [
            str(CLAUDE),
            "plugin",
            "eval",
            str(target),
            "--json",
            str(out),
            "--trust-plugin",
            "--no-publish",
            "--output-dir",
            str(folder / "cc-out"),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        env=claude_code_env(api_url, TEST_API_KEY, home),
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert out.is_file(), done.stdout + done.stderr
    return done.returncode, done.stdout + done.stderr, json.loads(out.read_text())


def run_ours(api_url: str, folder: Path, target: Path, *args: str) -> tuple[Ran, dict]:
    out = folder / "ours.json"
    ran = spawn(
        "plugin",
        str(target),
        "--base-url",
        api_url,
        "-o",
        str(out),
        "--trust-plugin",  # as claude plugin eval is given it: no terminal to ask in
        *args,
        cwd=ROOT,
        env={**os.environ, "ANTHROPIC_API_KEY": TEST_API_KEY},
        timeout=900,
    )
    assert out.is_file(), ran.stdout + ran.stderr
    return ran, json.loads(out.read_text())


def both_ways(
    tmp_path_factory: pytest.TempPathFactory, suite: str, target: Path | None = None, model=None
) -> dict:
    folder = tmp_path_factory.mktemp(suite)
    target = target or CORPUS / suite
    with ScriptedAnthropic(responder=model or plugin_claude_code) as api:
        ours, our_doc = run_ours(api.url, folder, target)
        code, said, theirs = run_claude_plugin_eval(api.url, folder, target)
    return {"ours": ours, "our_doc": our_doc, "code": code, "said": said, "theirs": theirs}


def with_marker(tmp_path_factory: pytest.TempPathFactory, suite: str) -> tuple[Path, Path]:
    """A copy of the suite whose real MCP server would touch a marker file (an absolute path)."""
    copy = tmp_path_factory.mktemp(f"{suite}-copy") / suite
    shutil.copytree(CORPUS / suite, copy)
    marker = copy.parent / "REAL-SERVER-STARTED"
    command = f'touch "{marker}"; sleep 60'
    servers = {"mcpServers": {"stock": {"command": "sh", "args": ["-c", command]}}}
    (copy / ".mcp.json").write_text(json.dumps(servers))
    return copy, marker


@pytest.fixture(scope="module")
def mocked_plugin(tmp_path_factory: pytest.TempPathFactory) -> dict:
    copy, marker = with_marker(tmp_path_factory, "mocked-plugin")
    ran = both_ways(tmp_path_factory, "mocked-plugin", copy, mock_plugin_claude_code)
    return {**ran, "marker": marker}


@pytest.fixture(scope="module")
def root_suite(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return both_ways(tmp_path_factory, "root-suite")


@pytest.fixture(scope="module")
def refused_case(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return both_ways(tmp_path_factory, "refused-case")


def run_facts(run: dict, score: str = "score") -> tuple:
    """What must agree of one run: passed, score, turns, each grader's verdict (and whether it
    was scored)."""
    graders = sorted((g["name"], g["passed"], g.get("scored", True)) for g in run["graders"])
    return (run["passed"], round(run[score], 4), run["turns"], tuple(graders))


def theirs_by_run(document: dict) -> dict[tuple[str, str], list[tuple]]:
    return {
        (case["name"], arm): sorted(run_facts(r) for r in runs)
        for case in document["cases"]
        for arm, runs in case["arms"].items()
    }


def ours_by_run(document: dict) -> dict[tuple[str, str], list[tuple]]:
    found: dict[tuple[str, str], list[tuple]] = {}
    for run in document["results"]:
        found.setdefault((run["case"], run["arm"]), []).append(run_facts(run))
    return {key: sorted(runs) for key, runs in found.items()}


@needs_claude
def test_a_root_suite_loads_each_case_s_plugin_and_agrees_run_by_run(root_suite: dict):
    theirs, ours = theirs_by_run(root_suite["theirs"]), ours_by_run(root_suite["our_doc"])
    assert ours == theirs
    # the case's plugin loaded: the skill launched in three turns, one turn without it
    assert [f[2] for f in ours[("01-low-shelves", "with")]] == [3, 3]
    assert [f[2] for f in ours[("01-low-shelves", "without")]] == [1, 1]
    assert all(f[0] for f in ours[("01-low-shelves", "with")])
    pantry = str(CORPUS / "root-suite" / "plugins" / "pantry")
    for run in root_suite["our_doc"]["results"]:
        assert run["plugins"] == ([pantry] if run["arm"] == "with" else []), run["case"]
    assert {c["name"]: c["plugins"] for c in root_suite["our_doc"]["plugin"]["cases"]} == {
        name: [pantry] for name in ("01-low-shelves", "02-scale-recipe", "03-weather")
    }
    assert root_suite["code"] == root_suite["ours"].exit_code == 0, root_suite["ours"].stdout


@needs_claude
def test_a_refused_case_file_is_skipped_with_a_line_and_the_rest_runs(refused_case: dict):
    assert "Couldn't load 1 case file" in refused_case["said"]
    ours = refused_case["ours"]
    assert "Couldn't load 1 case file" in ours.stdout + ours.stderr
    assert "02-judged-wrongly/graders/judge.md" in ours.stdout + ours.stderr
    assert ours_by_run(refused_case["our_doc"]) == theirs_by_run(refused_case["theirs"])
    assert [c["name"] for c in refused_case["theirs"]["cases"]] == ["01-tidy-notes"]
    assert refused_case["code"] == ours.exit_code == 1


def test_a_case_may_name_plugins_inside_the_target_only(tmp_path: Path):
    suite = tmp_path / "repo"
    case = suite / "evals" / "01-away"
    case.mkdir(parents=True)
    (case / "prompt.md").write_text('---\nplugins: ["../../../elsewhere"]\n---\nHi\n')
    (case / "graders").mkdir()
    (case / "graders" / "hi.md").write_text("---\ntype: regex\n---\nhi\n")
    (tmp_path / "elsewhere").mkdir()
    with ScriptedAnthropic() as api:
        ran = spawn(
            "plugin",
            str(suite),
            "--base-url",
            api.url,
            cwd=ROOT,
            env={**os.environ, "ANTHROPIC_API_KEY": TEST_API_KEY},
            timeout=300,
        )
        assert api.requests == []
    assert ran.exit_code == 2 and "Traceback" not in ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "01-away/prompt.md" in lines[0] and "outside" in lines[0], lines


def test_grants_read_as_claude_code_reads_them_and_reach_the_command_line(tmp_path: Path):
    assert tool_grants(["Bash,Write", "Edit  mcp__plugin_p_s__*", "Bash(npm test:*) Read"]) == (
        "Bash",
        "Write",
        "Edit",
        "mcp__plugin_p_s__*",
        "Bash(npm test:*)",
        "Read",
    )
    case = load_case(CORPUS / "root-suite" / "evals" / "01-low-shelves")
    assert case is not None and case.allowed_tools == ["Skill"]
    case.disallowed_tools = ["Write"]
    plugin = load_plugin(CORPUS / "root-suite")
    plan = PluginRunPlan(
        plugin,
        "claude",
        "claude-sonnet-5-5",
        allow_tools=("Write", "Bash(ls:*)", "mcp__plugin_pantry_stock__*"),
        disallow_tools=("Agent",),
    )
    command = claude_command(plan.settings(case), "hi")
    allowed = command[command.index("--allowedTools") + 1 :]
    disallowed = command[command.index("--disallowedTools") + 1 : command.index("--allowedTools")]
    # the case's Skill and the operator's grants pre-approved; Write granted but kept away by the
    # case's disallowed_tools; Bash off the locked list, approved only for its pattern
    assert {"Skill", "Bash(ls:*)", "mcp__plugin_pantry_stock__*"} <= set(allowed)
    assert "Bash" not in allowed and "Write" not in allowed
    assert "Write" in disallowed and "Agent" in disallowed and "Bash" not in disallowed
    assert command[command.index("--permission-mode") + 1] == "dontAsk"


@needs_claude
def test_mocks_stand_in_for_the_plugin_s_server_as_in_claude_code(mocked_plugin: dict):
    ours, theirs = ours_by_run(mocked_plugin["our_doc"]), theirs_by_run(mocked_plugin["theirs"])
    assert ours == theirs
    assert all(run[0] for run in ours[("01-suite-mock", "with")] + ours[("02-case-mock", "with")])
    assert not mocked_plugin["marker"].exists()  # the real server never started, either side
    assert mocked_plugin["code"] == mocked_plugin["ours"].exit_code == 0
    runs = {(r["case"], r["arm"]): r for r in mocked_plugin["our_doc"]["results"]}
    suite_mock = runs[("01-suite-mock", "with")]
    assert suite_mock["mocks"]["calls"] == {"total": 1, "errors": 0, "unmocked": []}
    assert suite_mock["mocks"]["servers"] == [
        {"server": "stock", "kind": "shadow", "tools": [{"tool": "count", "responder": "fixed"}]}
    ]
    assert "LARDER-42 units for: How many units of oat" in suite_mock["answer"]
    assert "CASE-7 units" in runs[("02-case-mock", "with")]["answer"]
    # {{file:count.txt}}: the file beside the case's mock, as Claude Code fills it in
    assert (
        "FILED-9 units (shelf B) for: How many units of tea"
        in runs[("03-file-mock", "with")]["answer"]
    )
    assert all(run[0] for run in ours[("03-file-mock", "with")])
    assert runs[("01-suite-mock", "without")]["mocks"] is None
    their_runs = {
        (c["name"], arm): rs[0]
        for c in mocked_plugin["theirs"]["cases"]
        for arm, rs in c["arms"].items()
    }
    assert their_runs[("01-suite-mock", "with")]["mocks"]["calls"]["total"] == 1


@pytest.fixture(scope="module")
def commands_plugin(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return both_ways(tmp_path_factory, "commands-plugin")


@needs_claude
def test_slash_command_cases_with_hooks_and_grants_agree_run_by_run(commands_plugin: dict):
    ours = ours_by_run(commands_plugin["our_doc"])
    assert ours == theirs_by_run(commands_plugin["theirs"])
    assert ours[("01-draft-command", "with")][0][0] is True
    assert ("02-plain-question", "without") in ours
    assert commands_plugin["code"] == commands_plugin["ours"].exit_code == 0
    hooks = [r["hooks"] for r in commands_plugin["our_doc"]["results"] if r["arm"] == "with"]
    assert all(any("UserPromptSubmit" in h for h in run) for run in hooks), hooks


def test_a_case_yaml_alone_needs_a_name_as_claude_code_reads_it(tmp_path: Path):
    case = tmp_path / "02-unnamed"
    case.mkdir()
    (case / "case.yaml").write_text(
        'schema_version: "1.0"\nexecution: {prompt: Hi}\ngraders:\n'
        "  - {name: hi, type: regex, pattern: hi}\n"
    )
    with pytest.raises(InputError, match="name: Required"):
        load_case(case)
    (case / "prompt.md").write_text("Hi\n")  # a prompt.md names the case by its folder
    loaded = load_case(case)
    assert loaded is not None and loaded.name == "02-unnamed"


@pytest.fixture(scope="module")
def recorded_mocks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """recordable-plugin: `plugin --record-mocks` runs its real server once (confined: the marker
    it would write outside the run never appears), then the real server is replaced by one that
    would touch a marker, and the suite runs offline from the recorded mocks by `plugin` and by
    `claude plugin eval --json` (the arm with the plugin alone)."""
    folder = tmp_path_factory.mktemp("recordable")
    copy = folder / "larder"
    shutil.copytree(CORPUS / "recordable-plugin", copy)
    confined_marker, offline_marker = folder / "RECORDED-SERVER-WROTE", folder / "REAL-STARTED"
    config = json.loads((copy / ".mcp.json").read_text())
    config["mcpServers"]["stock"]["env"] = {"STOCK_MARKER": str(confined_marker)}
    (copy / ".mcp.json").write_text(json.dumps(config))
    for run in ("recording", "offline"):
        (folder / run).mkdir()
    with ScriptedAnthropic(responder=mock_plugin_claude_code) as api:
        recording, recorded_doc = run_ours(
            api.url, folder / "recording", copy, "--record-mocks", "--ablation", "none"
        )
        mocks = {
            p.relative_to(copy / "evals" / "mocks").as_posix(): p.read_text()
            for p in sorted((copy / "evals" / "mocks").rglob("*"))
            if p.is_file()
        }
        command = f'touch "{offline_marker}"; sleep 60'
        servers = {"mcpServers": {"stock": {"command": "sh", "args": ["-c", command]}}}
        (copy / ".mcp.json").write_text(json.dumps(servers))
        ours, our_doc = run_ours(api.url, folder / "offline", copy, "--ablation", "none")
        code, said, theirs = run_claude_plugin_eval(
            api.url, folder / "claude", copy, "--ablation", "none"
        )
    return {
        "recording": recording,
        "recorded_doc": recorded_doc,
        "mocks": mocks,
        "ours": ours,
        "our_doc": our_doc,
        "code": code,
        "said": said,
        "theirs": theirs,
        "markers": [confined_marker, offline_marker],
    }


@needs_claude
def test_mocks_recorded_from_the_real_server_are_what_claude_code_serves(recorded_mocks: dict):
    recording = recorded_mocks["recording"]
    assert recording.exit_code == 0, recording.stdout + recording.stderr
    assert "--record-mocks: wrote mocks/stock/_tools.json" in recording.stdout
    assert "--record-mocks: wrote mocks/stock/count.md" in recording.stdout
    mocks = recorded_mocks["mocks"]
    assert set(mocks) == {"stock/_tools.json", "stock/count.md"}  # audit was never called
    listed = json.loads(mocks["stock/_tools.json"])["tools"]
    assert [t["name"] for t in listed] == ["count", "audit"]
    assert listed[0]["inputSchema"]["properties"] == {"query": {"type": "string"}}
    # the query each case sent is written as the template, so one answer serves both cases
    assert (
        mocks["stock/count.md"] == "---\ntype: fixed\n---\nLARDER-42 units for: {{input.query}}\n"
    )
    assert all(r["passed"] for r in recorded_mocks["recorded_doc"]["results"])
    # offline: both serve the recorded mocks, agree run by run, and both cases pass
    ours, theirs = ours_by_run(recorded_mocks["our_doc"]), theirs_by_run(recorded_mocks["theirs"])
    assert ours == theirs
    assert all(run[0] for runs in ours.values() for run in runs) and len(ours) == 2
    assert recorded_mocks["code"] == recorded_mocks["ours"].exit_code == 0, recorded_mocks["said"]
    for said in (
        recorded_mocks["said"],
        recorded_mocks["ours"].stdout + recorded_mocks["ours"].stderr,
    ):
        assert "permissive schema" not in said and "_tools.json" not in said, said
    their_runs = [r for c in recorded_mocks["theirs"]["cases"] for r in c["arms"]["with"]]
    assert all(r["mocks"]["calls"]["unmocked"] == [] for r in their_runs)
    assert all(not r["mocks"]["warnings"] for r in their_runs)
    # the recorded server ran confined (its write outside the run never landed); offline, the
    # real server never started, either side
    assert not any(marker.exists() for marker in recorded_mocks["markers"])


@pytest.mark.parametrize(
    "name, text, said",
    [
        ("_server.md", "---\ntype: agent\ntools: [count]\n---\nA larder.\n", "server-wide"),
        ("count.md", "---\ntype: agent\n---\nA larder's stock server.\n", "type: agent"),
        ("count.md", "---\ntype: fixed\nabort_when: never\n---\n9\n", "abort_when"),
        ("count.md", "---\ntype: fixed\ntools: [count]\n---\n9\n", "_server.md"),
        ("count.md", "---\ntype: fixed\nerror: maybe\n---\n9\n", "error must be true or false"),
        ("count.md", "---\ntype: fixed\nreply: 9\n---\n9\n", "unknown mock field 'reply'"),
        ("list.issues.md", "---\ntype: fixed\n---\n9\n", "name responder files after the tool"),
    ],
)
def test_a_mock_file_claude_code_reads_differently_is_refused_with_one_line(
    tmp_path: Path, name: str, text: str, said: str
):
    """Every field Claude Code 2.1.332 reads in a mock file is honoured (type: fixed, expect:,
    error:, {{input.X}} and {{file:P}}) or refused with one line naming the file."""
    copy = tmp_path / "larder"
    shutil.copytree(CORPUS / "mocked-plugin", copy)
    mock = copy / "evals" / "mocks" / "stock" / name
    mock.write_text(text)
    with pytest.raises(InputError) as refused:
        load_plugin(copy)
    line = str(refused.value)
    assert said in line and name in line and "\n" not in line, line


def claude_code_target(folder: Path, *line: str) -> str:
    """Which folder `claude plugin eval LINE` took for its target: its trust refusal (no
    terminal, no --trust-plugin: nothing runs) names it."""
    done = subprocess.run(
        [str(CLAUDE), "plugin", "eval", *line, "--no-publish"],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "HOME": str(folder)},
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    said = done.stdout + done.stderr
    assert "is not a trusted plugin directory" in said, said
    return said.split("Error: ", 1)[-1].split(" is not a trusted", 1)[0]


@needs_claude
def test_variadic_grants_are_read_as_claude_code_reads_them(tmp_path: Path):
    """`--allow-tools Bash Write 'mcp__s__*'` (Claude Code's variadic form) is three grants, here
    as there; a plugin's path after them is still the target here, where Claude Code takes it as
    one more tool and evaluates the folder it stands in."""
    import click

    import evaluator

    target = str(CORPUS / "mocked-plugin")
    grants = ["--allow-tools", "Bash", "Write", "mcp__plugin_larder_stock__*"]
    kept = ["--disallow-tools", "Agent", "TaskStop"]
    plugin = evaluator.main.get_command(click.Context(evaluator.main), "plugin")
    for line in ([target, *grants, *kept], [*grants, *kept, target]):
        params = plugin.make_context("plugin", list(line)).params
        assert params["allow_tools"] == ("Bash", "Write", "mcp__plugin_larder_stock__*"), line
        assert params["disallow_tools"] == ("Agent", "TaskStop")
        assert params["arguments"] == (target,)
    # Claude Code: the target first, the grants after it, finds the plugin; the target last is
    # swallowed by --allow-tools (its target is then the folder it runs in)
    assert claude_code_target(tmp_path, target, *grants, *kept) == target
    assert claude_code_target(tmp_path, *grants, *kept, target) == str(tmp_path)


def test_recorded_mocks_are_redacted_templated_and_never_overwrite(tmp_path: Path):
    """write_recorded_mocks by hand: a secret the server echoed is masked; answers that differ
    only in the input they echo make one template, others keep the first and say so; an error
    answer is `error: true`; a mock file that exists is kept, and the line says which."""
    from claude_tool_evaluator.hub.recorder import (
        RecordedAnswer,
        RecordedServer,
        write_recorded_mocks,
    )
    from claude_tool_evaluator.redaction import Redactor
    from claude_tool_evaluator.run_types import ServerSpec

    secret = "sk-live-0123456789abcdefXYZ"
    server = RecordedServer(tmp_path, "stock", ServerSpec(name="stock", kind="stdio"))
    server.listed = [{"name": "count", "description": f"key {secret}", "inputSchema": {}}]
    server.answers = [
        RecordedAnswer("count", {"query": "oats"}, "42 units of oats", False),
        RecordedAnswer("count", {"query": "rice"}, "42 units of rice", False),
        RecordedAnswer("shelf", {"row": "B"}, "shelf one", False),
        RecordedAnswer("shelf", {"row": "C"}, "shelf two", False),
        RecordedAnswer("audit", {}, "audit failed", True),
    ]
    mocks = tmp_path / "mocks"
    (mocks / "stock").mkdir(parents=True)
    (mocks / "stock" / "audit.md").write_text("---\ntype: fixed\n---\nmine\n")
    lines = write_recorded_mocks([server], mocks, Redactor.of([secret]))
    folder = mocks / "stock"
    assert secret not in (folder / "_tools.json").read_text()
    assert "[REDACTED]" in (folder / "_tools.json").read_text()
    assert (
        folder / "count.md"
    ).read_text() == "---\ntype: fixed\n---\n42 units of {{input.query}}\n"
    assert (folder / "shelf.md").read_text().endswith("---\nshelf one\n")
    assert (folder / "audit.md").read_text() == "---\ntype: fixed\n---\nmine\n"
    assert "kept mocks/stock/audit.md (it exists; delete it to record it again)" in lines
    assert any("shelf.md: 2 calls answered 2 ways" in line for line in lines), lines
    server.answers = [RecordedAnswer("audit", {}, "audit failed", True)]
    (folder / "audit.md").unlink()
    write_recorded_mocks([server], mocks, Redactor.of([secret]))
    assert (folder / "audit.md").read_text() == "---\ntype: fixed\nerror: true\n---\naudit failed\n"
