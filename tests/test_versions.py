"""Version canaries: several --claude-bin side by side. The real Claude Code CLI and a wrapper that
reports another version (`--version`) and runs the real one with a marker in its system prompt, so
the scripted model can behave differently under it: results per version, the matrix naming the
query that changed, and `compare` of one version's results against the other's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import CLAUDE, ROOT, TEST_API_KEY, needs_claude
from fake_anthropic import ScriptedAnthropic, reply, system_of, text, tool_use, user_query

from claude_tool_evaluator.claude_code import claude_version
from claude_tool_evaluator.claude_code.binary import node_version_note
from claude_tool_evaluator.modes.skills import short_version

SKILL = ROOT / "examples" / "skills" / "warehouse-sql"
SQL = "Write a SQL query for weekly revenue per country"
JOKE = "Tell me a joke"
CANARY = "CANARY-VERSION-NINE"


def has_tool_result(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def model(body: dict) -> dict:
    """Fires the skill for SQL questions, except under the canary version's system prompt."""
    if has_tool_result(body):
        return reply(text("Use identifies and anonymous_id."))
    listed = "warehouse-sql: Writes, explains and fixes SQL" in json.dumps(body.get("messages"))
    if listed and "sql" in user_query(body).lower() and CANARY not in system_of(body):
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    return reply(text("No skill needed."))


def wrapper(folder: Path) -> Path:
    script = folder / "claude-9"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "9.9.9 (Claude Code)"; exit 0; fi\n'
        f'exec "{CLAUDE}" --append-system-prompt "{CANARY}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def run(tmp_path: Path, api: ScriptedAnthropic, *args: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "ANTHROPIC_API_KEY": TEST_API_KEY,
        "ANTHROPIC_BASE_URL": api.url,
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), "--skill", str(SKILL), *args],
        cwd=tmp_path / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def trigger(path: Path, positives: list[str], negatives: list[str]) -> Path:
    path.write_text(
        "---\nname: t\ntype: trigger\nskill: warehouse-sql\n---\n\n# Positive Triggers\n\n"
        + "".join(f'- "{q}"\n' for q in positives)
        + (
            "\n# Negative Triggers\n\n" + "".join(f'- "{q}"\n' for q in negatives)
            if negatives
            else ""
        )
    )
    return path


@needs_claude
def test_two_versions_side_by_side_and_compared(tmp_path):
    for name in ("home", "work"):
        (tmp_path / name).mkdir()
    real = short_version(claude_version(CLAUDE))
    nine = wrapper(tmp_path)
    both = trigger(tmp_path / "both.md", [SQL], [JOKE])
    out = tmp_path / "matrix.json"
    with ScriptedAnthropic(responder=model) as api:
        done = run(tmp_path, api, "--trigger", str(both), "--runs", "1",
                   "--claude-bin", CLAUDE, "--claude-bin", str(nine), "-o", str(out))  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr  # the canary misses the SQL query
        assert f"Claude Code {real}, 9.9.9: 4 run(s)" in done.stdout + done.stderr
        document = json.loads(out.read_text())
        assert document["metadata"]["claude_versions"] == [real, "9.9.9"]
        cases = {(c["name"], c["claude_version"]): c for c in document["cases"]}
        sql = f"warehouse-sql: {SQL}"
        assert cases[(sql, real)]["passed"] and not cases[(sql, "9.9.9")]["passed"]
        assert cases[(sql, real)]["model"] == f"haiku @ {real}"
        assert cases[(f"warehouse-sql: {JOKE}", "9.9.9")]["passed"]
        assert {r["claude_version"] for r in document["results"]} == {real, "9.9.9"}
        assert document["matrix"]["models"][:2] == [f"haiku @ {real}", "haiku @ 9.9.9"]
        assert document["matrix"]["disagreements"] == [sql], "the query that changed"

        # one version's results against the other's: five runs each make the change significant
        sure = trigger(tmp_path / "sql.md", [SQL], [])
        old, new = tmp_path / "old.json", tmp_path / "new.json"
        for binary, path in ((CLAUDE, old), (str(nine), new)):
            run(tmp_path, api, "--trigger", str(sure), "--runs", "5", "--claude-bin", binary,
                "-o", str(path))  # fmt: skip
    compared = subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), "compare", str(old), str(new), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compared.returncode == 1, compared.stdout + compared.stderr
    [step] = json.loads(compared.stdout)["comparisons"]
    [change] = [c for c in step["cases"] if c["name"] == sql]
    assert change["change"] == "regression"
    assert (change["old_claude_version"], change["new_claude_version"]) == (real, "9.9.9")
    assert change["statistics"]["p_value"] == round(2 / 252, 6)  # 5/5 -> 0/5: 2 / C(10, 5)


def test_the_same_version_twice_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    if CLAUDE is None:
        return
    copy = tmp_path / "claude-copy"
    copy.write_text(f'#!/bin/sh\nexec "{CLAUDE}" "$@"\n')
    copy.chmod(0o755)
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), "--skill", str(SKILL), "--trigger",
         str(trigger(tmp_path / "t.md", [SQL], [])), "--claude-bin", CLAUDE, "--claude-bin",
         str(copy), "--dry-run"],
        cwd=tmp_path / "work", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "are both Claude Code" in done.stderr
    assert done.stderr.count("\n") == 1


def fake_install(root: Path, node: str, claude: bytes) -> Path:
    """An npm install of Claude Code 2.1.332 (its package.json declares node >=22.0.0) whose
    bin/claude.exe holds `claude`, and a `node` on PATH that reports version `node`."""
    package = root / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps(
            {
                "name": "@anthropic-ai/claude-code",
                "version": "2.1.332",
                "engines": {"node": ">=22.0.0"},
                "scripts": {"postinstall": "node install.cjs"},
            }
        )
    )
    binary = package / "bin" / "claude.exe"
    binary.write_bytes(claude)
    binary.chmod(0o755)
    (root / "path").mkdir()
    (root / "path" / "node").write_text(f"#!/bin/sh\necho {node}\n")
    (root / "path" / "node").chmod(0o755)
    return binary


NATIVE = b"\x7fELF\x02\x01\x01" + bytes(64)
NODE_SCRIPT = (
    b"#!/bin/sh\n[ \"$1\" = --version ] && echo '2.1.332 (Claude Code)' && exit 0\nexit 3\n"
)
OLD_NODE_NOTE = (
    "Node.js v20.20.2 is older than the node >=22.0.0 Claude Code 2.1.332 declares: its claude "
    "is a native program and does not run on Node, but its npm install does (`node "
    "install.cjs` puts that program in place); install Node 22 or later before you reinstall "
    "or upgrade it"
)


def test_an_older_node_is_named_with_the_version_claude_code_needs(tmp_path, monkeypatch):
    native = fake_install(tmp_path / "old", "v20.20.2", NATIVE)
    monkeypatch.setenv("PATH", f"{tmp_path / 'old' / 'path'}{os.pathsep}{os.environ['PATH']}")
    assert node_version_note(str(native)) == OLD_NODE_NOTE
    script = fake_install(tmp_path / "script", "v20.20.2", NODE_SCRIPT)
    note = node_version_note(str(script))
    assert note and note.endswith(
        "and its claude runs on Node: if its runs fail, install a newer Node"
    )
    new = fake_install(tmp_path / "new", "v22.3.0", NATIVE)
    monkeypatch.setenv("PATH", f"{tmp_path / 'new' / 'path'}{os.pathsep}{os.environ['PATH']}")
    assert node_version_note(str(new)) is None, "Node 22 is new enough"


def test_the_node_note_is_said_once_a_process_and_leads_the_hint_when_claude_fails(tmp_path):
    script = fake_install(tmp_path, "v20.20.2", NODE_SCRIPT)
    env = {**os.environ, "PATH": f"{tmp_path / 'path'}{os.pathsep}{os.environ['PATH']}"}
    program = (
        "import sys\n"
        "from claude_tool_evaluator.claude_code.binary import claude_version\n"
        "from claude_tool_evaluator.errors import InputError\n"
        f"print(claude_version({str(script)!r}), claude_version({str(script)!r}))\n"
        "from claude_tool_evaluator.errors import notes_of_a_run_that_went_ahead\n"
        "print(*notes_of_a_run_that_went_ahead(True), sep='\\n', file=sys.stderr)\n"
        f"open({str(script)!r}, 'w').write('#!/bin/sh\\nexit 3\\n')\n"
        "try:\n"
        f"    claude_version({str(script)!r})\n"
        "except InputError as exc:\n"
        "    print('hint:', exc.hint)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: Node.js")]
    assert notes == [
        "note: Node.js v20.20.2 is older than the node >=22.0.0 Claude Code 2.1.332 declares, and "
        "its claude runs on Node: if its runs fail, install a newer Node"
    ], done.stderr
    assert done.stdout.splitlines()[0] == "2.1.332 (Claude Code) 2.1.332 (Claude Code)"
    hint = done.stdout.splitlines()[1]
    assert hint.startswith("hint: Node.js v20.20.2 is older than") and "npm install" in hint
