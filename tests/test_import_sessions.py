"""import sessions: Claude Code's own session logs (and stream-json transcripts) made cases of
Claude Code's eval suite, which `plugin` and the real `claude plugin eval --json` both load and run.

One real session is recorded once for the module: the real CLI (`claude -p`, with the fixture
plugin tests/plugins/greeter, a temporary HOME) against the scripted server's
`judged_plugin_claude_code` rule, whose outcome follows by hand: the prompt shares the words of
greeter:greeting-card, so the model calls Skill(greeter:greeting-card), then answers "Done:
answered with the skill's help.". Imported, the case has a `tool_used` grader on that skill and a
drafted `llm` grader quoting that answer. Run once by each tool (1 run per arm): with the plugin
the skill is called and the judge passes the answer ("Done"): both graders pass; without it the
model answers "Here is my answer, without a skill.": the judge fails it (and the Skill grader,
with-only under ablation, is not graded there).

The hand-written logs in tests/sessions/ (the shapes Claude Code 2.1.332 writes; see
claude_code/sessions.py) hold what a recorded session rarely does: a subagent's records in the
session's file, a garbled line, a secret in the prompt and in a tool result that the answer
repeats, a slash command, a stream-json transcript with and without the echoed prompt."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, invoke, needs_claude
from fake_anthropic import ScriptedAnthropic, judged_plugin_claude_code
from plugin_side_by_side import claude_code_env
from test_plugin_suites import ours_by_run, run_claude_plugin_eval, run_ours, theirs_by_run

GREETER = ROOT / "tests" / "plugins" / "greeter"
SESSIONS = ROOT / "tests" / "sessions"
PROMPT = "Please write a formal greeting card that greets Alex warmly by name."
SECRET = "ghp_" + "Mx4Nc8Vb2Lk6Jh0Gf4Ds8Aq2Wz6Ex0Rc4Tv8Y"  # a token pasted into the prompt
# the fixture logs' secrets (tests/sessions/projects): in the prompt, and in a tool result that
# the final answer repeats
FIXTURE_SECRETS = (
    "ghp_" + "Q7w3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb",
    "sk-ant-api03-" + "Zq8Wm2Rt6Yp0Lk4Jh8Gf2Ds6Az0Xc4Vb8Nm2Qw6Er0Ty4",
)


def written(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text("utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def record_session(api_url: str, home: Path, project: Path) -> subprocess.CompletedProcess:
    """One real `claude -p` session (kept: no --no-session-persistence) with the greeter plugin."""
    return subprocess.run(
        [
            str(CLAUDE),
            "-p",
            f"{PROMPT} My token: {SECRET}",
            "--output-format",
            "stream-json",
            "--verbose",
            "--plugin-dir",
            str(GREETER),
            "--permission-mode",
            "dontAsk",
            "--max-turns",
            "4",
        ],
        cwd=project,
        env=claude_code_env(api_url, TEST_API_KEY, home),
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real session recorded, imported into a copy of the greeter plugin, and its case run by
    `plugin` and by `claude plugin eval` (one run per arm each), all on one scripted server."""
    if CLAUDE is None:
        pytest.skip("Claude Code 2.1.332 is not installed (npm ci)")
    folder = tmp_path_factory.mktemp("sessions")
    home, project, plugin = folder / "home", folder / "shop", folder / "greeter"
    home.mkdir()
    project.mkdir()
    shutil.copytree(GREETER, plugin)
    with ScriptedAnthropic(responder=judged_plugin_claude_code) as api:
        done = record_session(api.url, home, project)
        assert done.returncode == 0, done.stdout + done.stderr
        projects = home / ".claude" / "projects"
        listed = invoke("import", "sessions", projects)
        imported = invoke("import", "sessions", projects, "--session", "1", "-o", plugin)
        assert imported.exit_code == 0, imported.output
        cases = sorted(
            set(plugin.glob("evals/*"))
            - {plugin / "evals" / c.name for c in GREETER.glob("evals/*")}
        )
        assert len(cases) == 1, cases
        case = cases[0].name
        ours, our_doc = run_ours(api.url, folder, plugin, "--case", case, "--runs", "1")
        code, said, theirs = run_claude_plugin_eval(
            api.url, folder, plugin, "--case", case, "--runs", "1"
        )
    return {
        "logs": sorted(projects.glob("*/*.jsonl")),
        "listed": listed,
        "case": cases[0],
        "ours": ours,
        "our_doc": our_doc,
        "code": code,
        "said": said,
        "theirs": theirs,
    }


@needs_claude
def test_a_recorded_session_is_listed_and_becomes_a_case_redacted(recorded: dict):
    [log] = recorded["logs"]
    session_id = log.stem
    assert recorded["listed"].exit_code == 0
    assert f"  1  {session_id[:8]}  " in recorded["listed"].stdout
    assert "(greeter:greeting-card)" in recorded["listed"].stdout
    case = recorded["case"]
    assert case.name == f"please-write-a-formal-greeting-card-{session_id[:8]}"
    files = written(case)
    assert sorted(files) == [
        "graders/answer.md",
        "graders/uses-skill-greeter-greeting-card.md",
        "prompt.md",
    ]
    assert f"{PROMPT} My token: [REDACTED]" in files["prompt.md"]
    assert f"From Claude Code session {session_id} ({log}" in files["prompt.md"]
    assert (
        'input_match: \'"skill":\\s*"greeter:greeting-card"\''
        in files["graders/uses-skill-greeter-greeting-card.md"]
    )
    assert "type: llm" in files["graders/answer.md"]
    assert "> Done: answered with the skill's help." in files["graders/answer.md"]
    assert not any(SECRET in text for text in files.values())
    assert SECRET in log.read_text()  # the session log itself kept it: the import redacted it


@needs_claude
def test_the_case_runs_in_plugin_and_in_claude_plugin_eval_alike(recorded: dict):
    case = recorded["case"].name
    theirs, ours = recorded["theirs"], recorded["our_doc"]
    assert "Couldn't load" not in recorded["said"], recorded["said"]
    assert [c["name"] for c in theirs["cases"]] == [case]
    assert recorded["code"] == 0 and recorded["ours"].exit_code == 0, recorded["ours"].output
    assert theirs_by_run(theirs) == ours_by_run(ours)
    by_arm = {r["arm"]: r for r in ours["results"]}
    assert by_arm["with"]["passed"] is True and by_arm["without"]["passed"] is False
    graded = {g["name"]: g["passed"] for g in by_arm["with"]["graders"]}
    assert graded == {"answer": True, "uses-skill-greeter-greeting-card": True}


# ---------------------------------------------------------------------------- hand-written logs
def test_secrets_in_the_prompt_and_a_tool_result_never_reach_the_case(cli, tmp_path: Path):
    ran = cli("import", "sessions", SESSIONS / "projects", "--session", "1", "-o", tmp_path / "p")
    assert ran.exit_code == 0, ran.output
    files = written(tmp_path / "p" / "evals")
    case = "restock-the-oat-shelf-in-the-5a1e0c3d"
    assert "My token is [REDACTED]" in files[f"{case}/prompt.md"]
    assert "answered with the key [REDACTED]" in files[f"{case}/graders/answer.md"]
    for secret in FIXTURE_SECRETS:
        assert not any(secret in text for text in files.values())
        assert secret not in ran.output
    # a secret at the start of a prompt: the listing shows it redacted too
    log = tmp_path / "early" / "s.jsonl"
    log.parent.mkdir()
    record = {"type": "user", "sessionId": "e1", "message": {"role": "user", "content": SECRET}}
    log.write_text(json.dumps(record) + "\n")
    listed = cli("import", "sessions", log)
    assert listed.exit_code == 0 and "[REDACTED]" in listed.stdout and SECRET not in listed.output


def test_the_top_level_s_skills_agents_and_mcp_tools_are_graded_not_a_subagent_s(
    cli, tmp_path: Path
):
    ran = cli("import", "sessions", SESSIONS / "projects", "--session", "all", "-o", tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "skipped 1 garbled line(s) (first: line 10)" in ran.output
    files = written(tmp_path / "evals")
    restock = "restock-the-oat-shelf-in-the-5a1e0c3d/graders/"
    assert sorted(f for f in files if f.startswith(restock)) == [
        restock + "answer.md",
        restock + "uses-agent-shop-auditor.md",
        restock + "uses-mcp-plugin-shop-stock-count.md",
        restock + "uses-skill-shop-restock.md",
    ]  # the subagent's mcp__plugin_shop_ledger__audit is its own call, not graded
    prompt = files["restock-the-oat-shelf-in-the-5a1e0c3d/prompt.md"]
    assert "allowed_tools:\n- Skill\n- Agent\n- mcp__plugin_shop_stock__count\n" in prompt
    assert (
        "tool: mcp__plugin_shop_stock__count\n"
        in files[restock + "uses-mcp-plugin-shop-stock-count.md"]
    )
    assert files["shop-report-weekly-9c4b2d7e/prompt.md"].endswith("\n/shop:report weekly\n")


def test_a_stream_json_transcript_needs_its_echoed_prompt(cli, tmp_path: Path):
    ran = cli("import", "sessions", SESSIONS / "stream", "--session", "all", "-o", tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "unreplayed.jsonl: skipped, no user's prompt in it" in ran.output
    files = written(tmp_path / "evals")
    case = "how-many-rice-units-are-left-3e8f1b6a"
    assert files[f"{case}/prompt.md"].endswith("\nHow many rice units are left in the larder?\n")
    assert "> Four rice units are left." in files[f"{case}/graders/answer.md"]
    alone = cli("import", "sessions", SESSIONS / "stream" / "unreplayed.jsonl")
    lines = alone.stderr.strip().splitlines()
    assert alone.exit_code == 2 and len(lines) == 1 and "--replay-user-messages" in lines[0]


def test_nothing_usable_is_one_line_naming_the_file_and_line(cli):
    ran = cli("import", "sessions", SESSIONS / "garbled")
    lines = ran.stderr.strip().splitlines()
    assert ran.exit_code == 2 and len(lines) == 1, ran.output
    assert f"{SESSIONS / 'garbled' / 'cut-off.jsonl'}:2: no JSON record here" in lines[0]
    assert "(2 garbled line(s) skipped)" in lines[0]
