"""Trying a description without editing a file: --skill-description (through the real Claude Code
CLI: the scripted server records the skill listing Claude Code sent) and --tool-overrides (what
the Messages API is sent changes, while the real MCP server still runs the calls)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY, Ran, needs_claude, spawn
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use, user_query
from test_optimize import CONFUSABLE, ORIGINAL, Models, choose, tool_results, words

from claude_tool_evaluator.claude_code import skill_md_with_description
from claude_tool_evaluator.loaders.skills import split_frontmatter


def listed_description(body: dict, name: str) -> str | None:
    """The description Claude Code listed for a skill: a `- name: description` line of the
    system-reminder in the messages (or of the system prompt, for other versions)."""
    texts = [
        body.get("system")
        if isinstance(body.get("system"), str)
        else " ".join(b.get("text", "") for b in body.get("system") or [])
    ]
    for message in body.get("messages", []):
        content = message.get("content")
        texts += (
            [content]
            if isinstance(content, str)
            else [b.get("text", "") for b in content or [] if isinstance(b, dict)]
        )
    for chunk in texts:
        for line in (chunk or "").splitlines():
            if line.startswith(f"- {name}: "):
                return line[len(f"- {name}: ") :]
    return None


class ClaudeCodeModel:
    """Claude Code's model: it uses the Skill tool when the skill's listed description shares a
    word with the query, and records every listing it saw."""

    def __init__(self, skill: str, proposals: list[dict] | None = None) -> None:
        self.skill, self.listings = skill, []
        self.proposer = Models(proposals or [])

    def __call__(self, body: dict) -> dict:
        from test_optimize import is_proposer

        if is_proposer(body):
            return self.proposer(body)
        if tool_results(body):
            return reply(text("Done."))
        listed = listed_description(body, self.skill)
        if listed is not None:
            self.listings.append(listed)
            if words(user_query(body)) & words(listed) and any(
                t.get("name") == "Skill" for t in body.get("tools", [])
            ):
                return reply(tool_use("Skill", {"skill": self.skill}))
        return reply(text("Answered without a skill."))


def make_skill(folder: Path, name: str, description: str) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"---\nname: {name}\ndescription: {description}\nlicense: MIT\nmetadata:\n  owner: team-a\n---\n"
        f"# {name}\n\nThe body stays as it is.\n",
        encoding="utf-8",
    )
    (path.parent / "notes.txt").write_text("a file beside the skill\n")
    return path


def write_trigger(path: Path, positives: list[str], negatives: list[str], skill: str = "") -> Path:
    path.write_text(
        f"---\nname: trigger\ntype: trigger\n{'skill: ' + skill + chr(10) if skill else ''}---\n\n"
        "# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in positives)
        + "\n# Negative Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in negatives),
        encoding="utf-8",
    )
    return path


def run_cli(work: Path, api: ScriptedAnthropic, *args: object, timeout: float = 300) -> Ran:
    """The evaluator as its own process in `work`'s HOME, TMPDIR and working folder."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work / "home"),
        "TMPDIR": str(work / "tmp"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "PYTHONPATH": str(ROOT),
    }
    for folder in ("home", "tmp", "work"):
        (work / folder).mkdir(exist_ok=True)
    return spawn(*args, cwd=work / "work", env=env, timeout=timeout)


# ============================================================================ --skill-description
@needs_claude
def test_skill_description_changes_what_claude_code_lists_and_not_the_file(tmp_path: Path):
    skill = make_skill(tmp_path, "doc-helper", "Helps with documents.")
    before = skill.read_bytes()
    trigger = write_trigger(tmp_path / "t.md", ["Plan the zebra migration"], ["Tell me a joke"])
    model = ClaudeCodeModel("doc-helper")
    with ScriptedAnthropic(responder=model) as api:
        plain = run_cli(
            tmp_path,
            api,
            "--skill",
            skill.parent,
            "--trigger",
            trigger,
            "--runs",
            "1",
            "--claude-bin",
            CLAUDE,
            "-o",
            tmp_path / "plain.json",
        )
        listed_plain = list(model.listings)
        model.listings.clear()
        given = run_cli(
            tmp_path,
            api,
            "--skill",
            skill.parent,
            "--trigger",
            trigger,
            "--runs",
            "1",
            "--claude-bin",
            CLAUDE,
            "--skill-description",
            "Plans zebra work: migrations and rollouts.",
            "-o",
            tmp_path / "given.json",
            "--report",
            tmp_path / "given.md",
        )
    assert plain.exit_code == 1, plain.stdout + plain.stderr  # the positive does not fire
    assert given.exit_code == 0, given.stdout + given.stderr  # with the given description it does
    assert set(listed_plain) == {"Helps with documents."}
    assert set(model.listings) == {"Plans zebra work: migrations and rollouts."}
    assert skill.read_bytes() == before, "the user's SKILL.md is never edited"
    document = json.loads((tmp_path / "given.json").read_text())
    assert document["metadata"]["skill_descriptions"] == {
        "doc-helper": "Plans zebra work: migrations and rollouts."
    }
    assert document["skills"][0]["description_overridden"] is True
    assert (
        json.loads((tmp_path / "plain.json").read_text())["metadata"]["skill_descriptions"] is None
    )
    assert "Plans zebra work: migrations and rollouts." in (tmp_path / "given.md").read_text()
    assert "(--skill-description): Plans zebra work" in " ".join(given.stdout.split())


@needs_claude
def test_skill_description_from_a_file_and_by_name_with_two_skills(tmp_path: Path):
    one = make_skill(tmp_path, "doc-helper", "Helps with documents.")
    two = make_skill(tmp_path, "pdf-helper", "Reads PDF files.")
    (tmp_path / "desc.txt").write_text("Handles every zebra question.\n")
    trigger = write_trigger(
        tmp_path / "doc-helper-trigger.md",
        ["A zebra question"],
        ["Tell me a joke"],
        skill="doc-helper",
    )
    model = ClaudeCodeModel("doc-helper")
    with ScriptedAnthropic(responder=model) as api:
        done = run_cli(
            tmp_path,
            api,
            "--skill",
            one.parent,
            "--skill",
            two.parent,
            "--trigger",
            trigger,
            "--runs",
            "1",
            "--claude-bin",
            CLAUDE,
            "--skill-description",
            f"doc-helper=@{tmp_path / 'desc.txt'}",
            "-o",
            tmp_path / "r.json",
        )
        others = [listed_description(b, "pdf-helper") for b in api.message_requests]
    assert done.exit_code == 0, done.stdout + done.stderr
    assert set(model.listings) == {"Handles every zebra question."}
    assert set(o for o in others if o) == {"Reads PDF files."}


@pytest.mark.parametrize(
    "value, message",
    [
        ("x" * 1025, "is 1025 characters; the limit is 1024"),
        ("use <b>bold</b>", "'<' or '>'"),
        ("   ", "it is empty"),
    ],
)
def test_a_bad_skill_description_is_one_line_before_any_run(
    cli, tmp_path: Path, value: str, message: str, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    skill = make_skill(tmp_path, "doc-helper", "Helps with documents.")
    trigger = write_trigger(tmp_path / "t.md", ["zebra"], ["joke"])
    result = cli(
        "--skill", str(skill.parent), "--trigger", str(trigger), "--skill-description", value
    )
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr, (
        result.stderr
    )


def test_with_two_skills_a_description_must_name_its_skill(cli, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    one = make_skill(tmp_path, "doc-helper", "Helps with documents.")
    two = make_skill(tmp_path, "pdf-helper", "Reads PDF files.")
    trigger = write_trigger(tmp_path / "t.md", ["zebra"], ["joke"], skill="doc-helper")
    result = cli(
        "--skill",
        str(one.parent),
        "--skill",
        str(two.parent),
        "--trigger",
        str(trigger),
        "--skill-description",
        "Plain text",
    )
    assert (
        result.exit_code == 2
        and "does not say which skill" in result.stderr
        and "NAME=TEXT" in result.stderr
    )


def test_the_copy_keeps_the_rest_of_the_frontmatter_and_the_body(tmp_path: Path):
    skill = make_skill(tmp_path, "doc-helper", "Helps with documents.")
    text_out = skill_md_with_description(skill.read_text(), "New: with a colon, and 'quotes'.")
    data, body, _ = split_frontmatter(text_out, skill)
    assert data == {
        "name": "doc-helper",
        "description": "New: with a colon, and 'quotes'.",
        "license": "MIT",
        "metadata": {"owner": "team-a"},
    }
    assert body.strip() == "# doc-helper\n\nThe body stays as it is."


# ============================================================================ --tool-overrides
def write_suite(folder: Path) -> Path:
    path = folder / "suite.csv"
    path.write_text(
        "test_name,user_prompt,expected_tools\n"
        "invoice,Get the birch doc 1001,lookup_invoice\n"
        "receipt,Get the mango doc 2001,lookup_receipt\n",
        encoding="utf-8",
    )
    return path


def test_tool_overrides_change_what_claude_is_shown_and_the_server_still_runs_the_calls(
    cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.chdir(tmp_path)
    calls = tmp_path / "calls.jsonl"
    schema = {
        "type": "object",
        "properties": {"number": {"type": "string", "description": "the receipt number"}},
        "required": ["number"],
    }
    overrides = tmp_path / "overrides.json"
    overrides.write_text(
        json.dumps(
            {
                "confusable_server__lookup_receipt": {
                    "description": "Finds mango receipts.",
                    "input_schema": schema,
                }
            }
        )
    )
    suite = write_suite(tmp_path)
    server = [
        "--server",
        f"{sys.executable} {CONFUSABLE}",
        "--server-env",
        f"CONFUSABLE_CALLS={calls}",
    ]
    with ScriptedAnthropic(responder=Models([])) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        code_plain, out, err = cli("--csv", suite, *server, "-o", tmp_path / "plain.json")
        assert code_plain == 1, out + err  # both look alike: the receipt goes to lookup_invoice
        plain_requests = list(api.message_requests)
        code, out, err = cli(
            "--csv",
            suite,
            *server,
            "--tool-overrides",
            overrides,
            "-o",
            tmp_path / "o.json",
            "--report",
            tmp_path / "o.md",
        )
        assert code == 0, out + err
        requests = api.message_requests[len(plain_requests) :]
    shown = {t["name"]: t for t in requests[0]["tools"]}
    assert shown["lookup_receipt"]["description"] == "Finds mango receipts."
    assert shown["lookup_receipt"]["input_schema"] == schema
    assert shown["lookup_invoice"]["description"] == ORIGINAL
    assert {t["name"]: t["description"] for t in plain_requests[0]["tools"]} == {
        "lookup_invoice": ORIGINAL,
        "lookup_receipt": ORIGINAL,
    }
    assert all(
        {t["name"]: t["description"] for t in r["tools"]}["lookup_receipt"]
        == "Finds mango receipts."
        for r in requests
    )
    # the real server ran the call Claude made with what it was shown
    ran = [json.loads(line) for line in calls.read_text().splitlines()]
    assert {"tool": "lookup_receipt", "number": "2001"} in ran
    assert (
        choose("Get the mango doc 2001", {n: t["description"] for n, t in shown.items()})
        == "lookup_receipt"
    )
    document = json.loads((tmp_path / "o.json").read_text())
    assert document["metadata"]["tool_overrides"] == json.loads(overrides.read_text())
    receipt_run = next(r for r in document["results"] if r["test_name"] == "receipt")
    assert "receipt 2001: paid" in json.dumps(receipt_run["tool_results"])
    assert json.loads((tmp_path / "plain.json").read_text())["metadata"]["tool_overrides"] is None
    report = (tmp_path / "o.md").read_text()
    assert "(--tool-overrides) | Finds mango receipts. · input schema overridden |" in report
    assert "(--tool-overrides): Finds mango receipts." in " ".join(out.split())


@pytest.mark.parametrize(
    "content, message",
    [
        (
            {"lookup_payment": {"description": "x"}},
            "no connected server offers a tool named 'lookup_payment'",
        ),
        ({"lookup_receipt": {"description": ""}}, "must be a non-empty string"),
        (
            {"lookup_receipt": {"title": "x"}},
            "must be an object with description, input_schema and/or arguments",
        ),
        ({"lookup_receipt": {"input_schema": {"type": "string"}}}, "of type object"),
        ([], "must be a JSON object"),
    ],
)
def test_bad_tool_overrides_are_one_line_before_the_first_model_call(
    cli, tmp_path, monkeypatch, content, message
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.chdir(tmp_path)
    overrides = tmp_path / "bad.json"
    overrides.write_text(json.dumps(content))
    with ScriptedAnthropic(responder=Models([])) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        code, out, err = cli(
            "--csv",
            write_suite(tmp_path),
            "--server",
            f"{sys.executable} {CONFUSABLE}",
            "--tool-overrides",
            overrides,
        )
        assert api.message_requests == []
    assert code == 2 and err.count("\n") == 1 and message in err, err
