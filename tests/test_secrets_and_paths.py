"""Issue 11, the redactor (and issue 37: secrets wrapped, percent-encoded, or keys of a known
shape nobody told it about), the output paths, the load-time limits and the skill folders: secrets
in fatal lines and in escaped echoes, planted links, outputs that are inputs, full and read-only
disks, deep JSON, skill folders with links out, option ranges, servers that print, a skill that
did not load, and the handshake timeout. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import base64
import csv
import functools
import html
import io
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import (
    CLAUDE,
    EXAMPLE_SERVER,
    ROOT,
    TEST_API_KEY,
    free_port,
    invoke,
    needs_claude,
    suite,
)
from fake_anthropic import ScriptedAnthropic, error, reply, text, tool_use

import evaluator
import test_constants as C
from claude_tool_evaluator import run_types  # pytest would collect a bare TestCase
from claude_tool_evaluator.claude_code import detect_activation, install_skills
from claude_tool_evaluator.errors import OutputError, ServerError
from claude_tool_evaluator.files import (
    OUTPUT_FILE_MODE,
    check_json_depth,
    journal_path,
    results_lines_path,
    write_atomic,
)
from claude_tool_evaluator.hub.calls import McpHub
from claude_tool_evaluator.hub.stdio import ServersStdout
from claude_tool_evaluator.loaders.skills import load_skill_creator_evals
from claude_tool_evaluator.modes.skills import trigger_run_verdict
from claude_tool_evaluator.redaction import Redactor, spec_secrets
from claude_tool_evaluator.run_types import ServerSpec, case_hash
from claude_tool_evaluator.scoring.skills import score_trigger_query
from claude_tool_evaluator.scoring.tool_use import args_match

SERVERS = ROOT / "tests" / "servers"
MISC = f"{sys.executable} {SERVERS / 'misc_server.py'}"
LEAKY = SERVERS / "leaky_server.py"
SKILL_DIR = ROOT / "examples" / "skills" / "warehouse-sql"


def one_error_line(stderr: str) -> str:
    """The run stopped with exactly one `error:` line and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def mount_tmpfs(folder: Path, options: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")


@pytest.fixture
def tmpfs(tmp_path):
    """A folder on a tiny filesystem of its own (mounted by the test), unmounted afterwards."""
    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        folder = tmp_path / name
        mount_tmpfs(folder, options)
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# ----------------------------------------------------------------------------- 1. secrets in fatal lines
def test_a_server_that_fails_to_start_quoting_its_environment_is_redacted(cli, api, tmp_path):
    token = "svc-token-5e6f7a8b9c"
    script = tmp_path / "dump_env.py"
    script.write_text(
        "import os, sys\nsys.stderr.write('env: SVC_TOKEN=' + os.environ['SVC_TOKEN'] + '\\n')\n"
        "sys.exit(3)\n"
    )
    code, stdout, stderr = cli(
        "-q", "hi", "--server", f"{sys.executable} {script}", "--server-env", f"SVC_TOKEN={token}"
    )
    one_error_line(stderr)  # exactly one error: line, no traceback
    assert (
        code == 2 and token not in stderr and "SVC_TOKEN=[REDACTED]" in stderr
    )  # its stderr: on the lines below the error line
    assert api.message_requests == []


def test_an_http_server_at_a_dead_port_with_a_token_in_url_and_headers_is_redacted(
    cli, tmp_path, monkeypatch, no_api_key
):
    token = "http-token-0a1b2c3d4e"
    monkeypatch.setenv("HTTP_TOKEN", token)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "remote": {
                        "type": "http",
                        "url": f"http://127.0.0.1:{free_port()}/mcp?api_key=${{HTTP_TOKEN}}",
                        "headers": {"Authorization": "Bearer ${HTTP_TOKEN}"},
                    }
                }
            }
        )
    )
    code, stdout, stderr = cli("-q", "hi", "--mcp-config", config, "--dry-run")
    one_error_line(stderr)  # exactly one error: line, no traceback
    assert code == 2 and token not in stderr and "[REDACTED]" in stderr


def test_a_stdio_argument_holding_a_token_is_redacted(cli, tmp_path, monkeypatch, no_api_key):
    token, literal = "arg-token-9f8e7d6c5b", "literal-key-11223344"
    monkeypatch.setenv("ARG_TOKEN", token)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": str(tmp_path / "no-such-server"),
                        "args": ["--token", "${ARG_TOKEN}", f"--api-key={literal}"],
                    }
                }
            }
        )
    )
    code, stdout, stderr = cli("-q", "hi", "--mcp-config", config, "--dry-run")
    line = one_error_line(stderr)
    assert code == 2 and "command not found" in line
    assert token not in stderr and literal not in stderr and line.count("[REDACTED]") == 2


def test_a_401_quoting_the_key_is_redacted(cli, api, tmp_path):
    api.responder = lambda body: error(
        401, "authentication_error", f"invalid x-api-key: {TEST_API_KEY}"
    )
    code, stdout, stderr = cli("-q", "hi", "--server-module", EXAMPLE_SERVER)
    line = one_error_line(stderr)
    assert code == 2 and "rejected the API key" in line
    assert TEST_API_KEY not in stderr and "[REDACTED]" in line


# ----------------------------------------------------------------------------- 2. secrets echoed escaped or encoded
ESCAPY_SECRET = 'pw"with\\back\nslash/91ab-Zz'


def echoed_forms(secret: str) -> list[str]:
    """The forms servers echo a secret in: what the redactor must match."""
    raw = secret.encode()
    once = json.dumps(secret)[1:-1]
    return [
        secret,
        once,
        json.dumps(once)[1:-1],
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        base64.b64encode(raw).decode(),
        base64.b64encode(b'{"auth": "' + raw + b'"}').decode(),
        secret.replace("\n", "\\n"),
    ]


def secret_forms(secret: str) -> list[str]:
    """Those, and what our own sinks would make of a secret that got through (CSV, HTML)."""
    return echoed_forms(secret) + [secret.replace('"', '""'), html.escape(secret)]


def decoded_texts(path: Path) -> list[str]:
    """A written file as it is, and every text in it decoded from its format's escaping."""
    raw = path.read_text(encoding="utf-8")
    texts = [raw, html.unescape(raw)]
    if path.suffix in (".json", ".jsonl"):

        def strings(value):
            if isinstance(value, dict):
                return [s for k, v in value.items() for s in (k, *strings(v))]
            if isinstance(value, list):
                return [s for v in value for s in strings(v)]
            return [value] if isinstance(value, str) else []

        documents = (
            [json.loads(line) for line in raw.splitlines()]
            if path.suffix == ".jsonl"
            else [json.loads(raw)]
        )
        texts += [s for d in documents for s in strings(d)]
    elif path.suffix == ".csv":
        texts += [cell for row in csv.reader(io.StringIO(raw)) for cell in row]
    elif path.suffix == ".xml":
        for element in ET.fromstring(raw.encode()).iter():
            texts += [element.text or "", *element.attrib.values()]
    return texts


@pytest.mark.parametrize("summary_only", [False, True])
def test_a_secret_echoed_json_escaped_url_encoded_or_base64_is_redacted_everywhere(
    cli, api, tmp_path, monkeypatch, summary_only
):
    monkeypatch.setenv("LEAKY_SECRET", ESCAPY_SECRET)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "leaky": {
                        "command": sys.executable,
                        "args": [str(LEAKY)],
                        "env": {"LEAKY_SECRET": "${LEAKY_SECRET}"},
                    }
                }
            }
        )
    )
    calls = [
        tool_use(name, {"name": "LEAKY_SECRET"}) for name in ("env_json", "env_url", "env_base64")
    ]

    def respond(body: dict) -> dict:
        if len(body["messages"]) == 1:
            return reply(*calls)
        outputs = [
            b["content"]
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        return reply(text("The server said: " + " | ".join(map(str, outputs))))

    api.responder = respond
    csv_file = suite(tmp_path / "s.csv", ["leak"], "env_json")
    out, report, csv_out, junit = (tmp_path / n for n in ("r.json", "r.md", "r.csv", "r.xml"))
    code, stdout, stderr = cli(
        "--csv",
        csv_file,
        "--mcp-config",
        config,
        "-o",
        out,
        "--report",
        report,
        "--csv-out",
        csv_out,
        "--junit",
        junit,
        "--json",
        *(["--summary-only"] if summary_only else []),
    )
    assert code == 0, stderr
    files = [out, report, csv_out, junit] + ([results_lines_path(out)] if summary_only else [])
    (tmp_path / "stdout.json").write_text(stdout)
    files.append(tmp_path / "stdout.json")
    results = (
        [json.loads(line) for line in results_lines_path(out).read_text().splitlines()]
        if summary_only
        else json.loads(out.read_text())["results"]
    )
    outputs = [c["output"] for c in results[0]["tool_calls"]]
    assert len(outputs) == 3 and all("[REDACTED]" in o for o in outputs), outputs
    for path in files:
        for blob in decoded_texts(path):
            for form in secret_forms(ESCAPY_SECRET):
                assert form not in blob, f"{path.name} holds the secret as {form!r}"
    for form in secret_forms(ESCAPY_SECRET):
        assert form not in stderr


def test_the_redactor_matches_every_form_and_documents_its_floor():
    redactor = Redactor([ESCAPY_SECRET, "short"])
    for form in echoed_forms(ESCAPY_SECRET):
        assert form not in redactor.text(f"before {form} after"), form
    assert (
        redactor.text("a short text") == "a short text"
    )  # below the floor: a setting, not a secret
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Reliability, cost and secrets") :]
    assert f"shorter than {Redactor.MIN_LENGTH} characters" in section[: section.index("\n## ", 1)]


# ----------------------------------------------------------------------------- 7 and 20. one atomic writer, one file mode
def test_every_output_has_one_mode_and_planted_links_are_never_followed(cli, api, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.md"
    victim.write_text("precious")
    work = tmp_path / "work"
    work.mkdir()
    out, report, junit, csv_out = (work / n for n in ("r.json", "r.md", "r.xml", "r.csv"))
    report.symlink_to(victim)  # a link at the target
    (work / ".r.xml.tmp").symlink_to(outside / "old-fixed-temp-name")  # at the old fixed temp name
    journal_path(out).symlink_to(outside / "journal-target")  # a dangling link at the journal
    api.responder = lambda body: reply(text("done"))
    code, stdout, stderr = cli(
        "--csv",
        suite(tmp_path / "s.csv", ["a", "b"]),
        "--server-module",
        EXAMPLE_SERVER,
        "-o",
        out,
        "--report",
        report,
        "--junit",
        junit,
        "--csv-out",
        csv_out,
        "--summary-only",
    )
    assert code == 0, stderr
    assert (
        victim.read_text() == "precious"
        and not report.is_symlink()
        and "Tool-use evaluation" in report.read_text()
    )
    assert sorted(p.name for p in outside.iterdir()) == ["victim.md"], (
        "nothing was written through a link"
    )
    umask = os.umask(0)
    os.umask(umask)
    written = [
        out,
        report,
        junit,
        csv_out,
        results_lines_path(out),
    ]  # results.jsonl: the journal renamed
    modes = {p.name: p.stat().st_mode & 0o777 for p in written}
    assert set(modes.values()) == {0o666 & ~umask} == {OUTPUT_FILE_MODE}, modes
    assert not [p for p in work.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_a_failed_write_leaves_no_temporary_file_and_is_one_output_error(tmp_path):
    target = tmp_path / "report.md"

    def half_then_fail(handle):
        handle.write("half a report")
        raise RuntimeError("the renderer broke")

    with pytest.raises(RuntimeError):
        write_atomic(target, half_then_fail)

    def disk_full(handle):
        handle.write("x")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="the disk is full"):
        write_atomic(target, disk_full)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- 8. an output that is an input or another output
@pytest.mark.parametrize(
    "outputs",
    [
        ["-o", "{csv}"],
        ["--csv-out", "{csv}"],
        ["-o", "{link}"],
        ["-o", "{out}", "--report", "{out}"],
        ["--junit", "{out}", "--csv-out", "{out}"],
        ["-o", "{out}", "--report", "{out}.journal.jsonl"],
    ],
)
def test_an_output_that_is_an_input_or_another_output_is_refused_before_anything_runs(
    cli, api, tmp_path, outputs
):
    csv_file = suite(tmp_path / "s.csv", ["a"])
    (tmp_path / "link.csv").symlink_to(csv_file)
    before = csv_file.read_text()
    names = {"csv": csv_file, "link": tmp_path / "link.csv", "out": tmp_path / "r.json"}
    code, stdout, stderr = cli(
        "--csv", csv_file, "--server-module", EXAMPLE_SERVER, *[o.format(**names) for o in outputs]
    )
    line = one_error_line(stderr)
    assert code == 2 and ("destroy it" in line or "are the same file" in line), line
    assert csv_file.read_text() == before and api.message_requests == []


def test_compare_refuses_to_write_over_a_file_it_compares(cli, tmp_path):
    old = tmp_path / "old.json"
    old.write_text("{}")
    code, stdout, stderr = cli("--compare", old, tmp_path / "new.json", "-o", old)
    assert code == 2 and "destroy it" in one_error_line(stderr) and old.read_text() == "{}"


# ----------------------------------------------------------------------------- 10. output paths checked first; a full disk
@pytest.mark.parametrize("option", ["-o", "--report", "--junit", "--csv-out"])
def test_bad_output_paths_are_one_line_before_the_first_model_call(cli, api, tmp_path, option):
    csv_file = suite(tmp_path / "s.csv", ["a"])
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    for path, says in (
        (tmp_path / "a-folder", "is a folder"),
        (tmp_path / "missing" / "out", "does not exist"),
        (tmp_path / "a-file" / "out", "does not exist"),
    ):
        code, stdout, stderr = cli(
            "--csv", csv_file, "--server-module", EXAMPLE_SERVER, option, path
        )
        assert code == 2 and says in one_error_line(stderr)
    assert api.message_requests == [] and not (tmp_path / "missing").exists()


def test_a_read_only_output_folder_is_one_line_before_the_first_model_call(
    cli, api, tmp_path, tmpfs
):
    folder = tmpfs("readonly", "ro,size=64k")
    csv_file = suite(tmp_path / "s.csv", ["a"])
    for option in ("-o", "--report", "--junit", "--csv-out"):
        code, stdout, stderr = cli(
            "--csv", csv_file, "--server-module", EXAMPLE_SERVER, option, folder / "out"
        )
        assert code == 2 and "Read-only file system" in one_error_line(stderr)
    code, stdout, stderr = cli("--schema", "-o", folder / "schema.json")
    assert code == 2 and "Read-only file system" in one_error_line(stderr)
    assert api.message_requests == []


def test_a_disk_that_fills_mid_run_is_one_line_and_the_run_resumes(cli, api, tmp_path, tmpfs):
    folder = tmpfs("tiny", "size=96k")
    api.responder = lambda body: (
        reply(text("done"))
        if len(body["messages"]) > 1
        else reply(tool_use("huge", {"size": 30_000}))
    )
    names = [f"c{i}" for i in range(8)]
    csv_file, out = suite(tmp_path / "s.csv", names), folder / "r.json"
    args = ["--csv", csv_file, "--server", MISC, "--concurrency", "1", "-o", out]
    code, stdout, stderr = cli(*args)
    line = one_error_line(stderr)
    assert code == 2 and "the disk is full" in line and "--resume" in line, stderr
    journal = journal_path(out)
    kept = [
        json.loads(line)["test_name"]
        for line in journal.read_text().splitlines()
        if line.endswith("}")
    ]
    assert 1 <= len(kept) < len(names)
    subprocess.run(["mount", "-o", "remount,size=16m", str(folder)], check=True)
    before = len(api.message_requests)
    code, stdout, stderr = cli(*args, "--resume")
    assert code == 0, stderr
    assert sorted(r["test_name"] for r in json.loads(out.read_text())["results"]) == names
    assert len(api.message_requests) - before == 2 * (len(names) - len(kept)), (
        "finished runs are not paid twice"
    )


# ----------------------------------------------------------------------------- 9. JSON nesting, checked at load time
def nested(depth: int) -> str:
    return '{"a": ' * (depth - 1) + "[1]" + "}" * (depth - 1)


def test_deep_expected_args_are_refused_at_load_time_even_in_a_dry_run(cli, tmp_path, no_api_key):
    csv_file = tmp_path / "s.csv"
    with csv_file.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["test_name", "user_prompt", "expected_tools", "expected_args"])
        writer.writerow(["deep", "go", "about_profiles", '{"about_profiles": ' + nested(600) + "}"])
    code, stdout, stderr = cli("--csv", csv_file, "--server-module", EXAMPLE_SERVER, "--dry-run")
    line = one_error_line(stderr)
    assert code == 2 and f"nested more than {C.MAX_JSON_DEPTH} levels" in line and "s.csv:2" in line


def test_the_depth_limit_holds_for_every_json_input_and_is_below_what_walks_it(tmp_path):
    limit = C.MAX_JSON_DEPTH
    deep = tmp_path / "deep.json"
    for loader, content in (
        (evaluator.load_mcp_config, '{"mcpServers": ' + nested(limit + 5) + "}"),
        (load_skill_creator_evals, "[" + nested(limit + 5) + "]"),
        (
            evaluator.read_results_document,
            '{"schema_version": "2.0", "results": [' + nested(limit + 5) + "]}",
        ),
    ):
        deep.write_text(content)
        with pytest.raises(evaluator.InputError, match="nested more than"):
            loader(deep)
    # what passes the check is hashed and scored without trouble, even on a shallow stack
    case = run_types.TestCase(
        name="x", prompt="p", expected_args={"t": json.loads(nested(limit - 1))}
    )
    check_json_depth(case.expected_args, "expected_args", None, None)
    case_hash(case)
    args_match(case.expected_args["t"], case.expected_args["t"], "exact")


# ----------------------------------------------------------------------------- 11. skill folders
def skill_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "warehouse-sql"
    folder.parent.mkdir(parents=True)
    import shutil

    shutil.copytree(SKILL_DIR, folder)
    return folder


def test_a_skill_folder_with_a_link_outside_is_refused_at_load_time(cli, tmp_path, no_api_key):
    folder = skill_copy(tmp_path)
    secret = tmp_path / "outside.txt"
    secret.write_text("not for Claude")
    (folder / "reference.md").symlink_to(secret)
    code, stdout, stderr = cli(
        "--skill",
        folder,
        "--trigger",
        ROOT / "examples" / "triggers" / "warehouse-sql-trigger.md",
        "--dry-run",
    )
    line = one_error_line(stderr)
    assert (
        code == 2
        and "reference.md is a symbolic link" in line
        and "outside the skill folder" in line
    )
    (folder / "reference.md").unlink()
    (folder / "big").symlink_to(tmp_path, target_is_directory=True)  # a link to a (large) folder
    code, stdout, stderr = cli(
        "--skill",
        folder,
        "--trigger",
        ROOT / "examples" / "triggers" / "warehouse-sql-trigger.md",
        "--dry-run",
    )
    assert code == 2 and "big is a symbolic link" in one_error_line(stderr)


def test_a_skill_folder_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    folder = skill_copy(tmp_path)
    monkeypatch.setattr(C, "MAX_SKILL_COPY_BYTES", 64 * 1024)
    (folder / "data.bin").write_bytes(b"x" * 65 * 1024)
    with pytest.raises(evaluator.InputError, match="copied into every run"):
        evaluator.load_skill(folder)


def test_links_inside_a_skill_are_copied_as_links_and_a_link_out_added_later_is_refused(tmp_path):
    folder = skill_copy(tmp_path)
    (folder / "same.md").symlink_to("SKILL.md")
    skill = evaluator.load_skill(folder)
    project = tmp_path / "project"
    install_skills(project, [skill])
    copied = project / ".claude" / "skills" / "warehouse-sql" / "same.md"
    assert copied.is_symlink() and copied.read_text() == (folder / "SKILL.md").read_text()
    (folder / "late.md").symlink_to(tmp_path / "outside.txt")  # after loading, before a run
    with pytest.raises(OSError, match="outside the skill folder"):
        install_skills(tmp_path / "project2", [skill])


# ----------------------------------------------------------------------------- 15. option ranges and finiteness
@pytest.mark.parametrize(
    "option,value",
    [
        ("--tool-timeout", "0"),
        ("--tool-timeout", "-1"),
        ("--tool-timeout", "nan"),
        ("--tool-timeout", "inf"),
        ("--request-timeout", "0"),
        ("--request-timeout", "nan"),
        ("--max-retries", "-1"),
        ("--max-cost", "nan"),
        ("--max-cost", "inf"),
        ("--max-cost", "0"),
        ("--max-result-chars", "-5"),
        ("--temperature", "nan"),
        ("--threshold", "nan"),
        ("--trigger-threshold", "nan"),
        ("--min-trigger-score", "nan"),
        ("--trigger-timeout", "nan"),
    ],
)
def test_out_of_range_and_non_finite_options_are_refused(cli, option, value, no_api_key):
    mode = (
        [
            "--skill",
            SKILL_DIR,
            "--trigger",
            ROOT / "examples" / "triggers" / "warehouse-sql-trigger.md",
        ]
        if "trigger" in option
        else ["-q", "hi", "--server-module", EXAMPLE_SERVER]
    )
    code, stdout, stderr = cli(*mode, "--dry-run", option, value)
    assert code == 2 and f"Invalid value for '{option}'" in one_error_line(stderr)


# ----------------------------------------------------------------------------- 16 and 17. servers that print
def test_an_in_process_server_that_prints_leaves_json_stdout_intact(cli, api):
    api.push(
        reply(tool_use("shout", {"text": "a"}), tool_use("ashout", {"text": "b"})),
        reply(text("done")),
    )
    code, stdout, stderr = cli(
        "-q", "hi", "--server-module", SERVERS / "printing_server.py", "--json"
    )
    document = json.loads(stdout)
    assert [c["output"] for c in document["results"][0]["tool_calls"]] == ["a", "b"]
    assert "printing_server: imported" in stderr and "printing_server: shout a" in stderr
    assert "printing_server: ashout b" in stderr
    assert not isinstance(sys.stdout, ServersStdout), "stdout is put back"


def test_a_server_writing_garbage_to_stdout_is_one_warning_line(cli, api):
    api.push(reply(tool_use("junk_stdout", {"lines": 10})), reply(text("ok")))
    code, stdout, stderr = cli(
        "-q", "hi", "--server", f"{sys.executable} {LEAKY} --junk-at-start", "--json"
    )
    assert json.loads(stdout)["results"][0]["tool_calls"][0]["output"] == "answered after junk"
    assert "Traceback" not in stderr and "Failed to parse" not in stderr, stderr
    warnings = [line for line in stderr.splitlines() if "not MCP messages" in line]
    assert len(warnings) == 1 and "'leaky_server'" in warnings[0], stderr


# ----------------------------------------------------------------------------- 19. a skill that did not load
def test_a_run_whose_skill_did_not_load_is_an_error_whatever_else_fired():
    events = [
        {"type": "system", "subtype": "init", "skills": ["other-skill"]},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "tool_use", "name": "Skill", "input": {"skill": "other-skill"}}
                ]
            },
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": "done"},
    ]
    run = detect_activation(events, ["my-skill", "other-skill"], "q")
    assert run.error and run.activated_skills == ["other-skill"]
    for skill, expected in (
        ("my-skill", "activate"),
        ("my-skill", "ignore"),
        ("other-skill", "activate"),
    ):
        result = score_trigger_query("q", skill, expected, [run])
        assert result.actual == "error" and not result.correct and result.errors == 1
        assert not trigger_run_verdict(run, skill, expected).passed


# ----------------------------------------------------------------------------- 20. the handshake timeout
def test_the_handshake_timeout_is_what_it_says():
    marker = f"hang-{uuid.uuid4().hex}"
    spec = ServerSpec(
        name="hang",
        kind="stdio",
        command=sys.executable,
        args=["-c", f"import time; time.sleep(60)  # {marker}"],
    )

    async def connect() -> float:
        start = time.monotonic()
        with pytest.raises(ServerError, match="did not finish its MCP handshake within 2s"):
            async with McpHub([spec], connect_timeout=2):
                pass
        return time.monotonic() - start

    elapsed = asyncio.run(connect())
    # the SDK gives a server 2 s to exit once its stdin closes: the only time spent past the limit
    assert elapsed < 2 + 3, elapsed
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps


# ============================================================================ issue 22: redaction after grading, of everything
KEY_LIKE = "sk-live-4fQ9zR7tXb2Lm8Kp3Vw6Yc1Hd5Jn0Ge"  # a credential the server is given


def every_sink(tmp_path: Path) -> tuple[list[str], list[Path]]:
    """The writer options, and the files they write (plus the journal a kill would leave)."""
    files = [tmp_path / n for n in ("r.json", "r.md", "r.csv", "r.xml", "r.html")]
    options = ["-o", files[0], "--report", files[1], "--csv-out", files[2], "--junit", files[3]]
    return [*map(str, options), "--html", str(files[4])], files


def assert_nowhere(secret: str, files: list[Path], *texts: str) -> None:
    for path in files:
        for blob in decoded_texts(path):
            assert secret not in blob, f"{path.name} holds {secret!r}"
    for blob in texts:
        assert secret not in blob


def test_an_exact_argument_check_passes_with_a_setting_in_the_server_env_and_keeps_it(
    cli, api, tmp_path
):
    """--server-env MODE=production made "production" a secret, redacted before grading: an exact
    argument check that passes without the option failed with it, and every report said
    [REDACTED] where the word was. A setting is not a secret, and grading sees the run as it was."""
    suite_file = tmp_path / "s.csv"
    suite_file.write_text(
        "test_name,user_prompt,expected_tools,expected_args,args_match\n"
        'mode,Echo the mode,echo,"{""echo"": {""text"": ""production""}}",exact\n'
    )
    api.responder = lambda body: (
        reply(text("The mode is production."))
        if len(body["messages"]) > 1
        else reply(tool_use("echo", {"text": "production"}))
    )
    outcomes = []
    for extra in ([], ["--server-env", "MODE=production"]):
        out = tmp_path / f"r{len(outcomes)}.json"
        code, stdout, stderr = cli("--csv", suite_file, "--server", MISC, *extra, "-o", out)
        document = json.loads(out.read_text())
        outcomes.append((code, document["passed"], document["results"][0]["tool_calls"][0]))
    assert outcomes[0][:2] == outcomes[1][:2] == (0, True), outcomes
    assert outcomes[1][2]["input"] == {"text": "production"} and outcomes[1][2]["output"] == (
        "production"
    )
    # the example config's LOG_LEVEL=warning is a setting too
    specs = evaluator.load_mcp_config(ROOT / "examples" / "mcp.json")
    assert Redactor.for_run(specs).text("level warning") == "level warning"


def test_what_counts_as_a_secret():
    """Credentials by name, by URL userinfo, by flag and by randomness; settings are not."""
    spec = ServerSpec(
        name="s",
        kind="stdio",
        command="server",
        args=[
            "--dsn",
            "postgresql://app:Tr0ub4dor-Horse@db.internal:5432/shop",
            "--key",
            "plain-looking-key",
            "-p",
            "hunter2hunter",
            "--region",
            "us-east-1",
            "gh0RandomToken9Kz7Qx2Lm4Vb8Np1",
        ],
        env={"MODE": "production", "LOG_LEVEL": "warning", "GITHUB_TOKEN": "ghp-named-secret"},
        headers={"Authorization": "Bearer bearer-token-value", "Accept": "application/json"},
    )
    found = set(spec_secrets(spec))
    assert {
        "Tr0ub4dor-Horse",
        "plain-looking-key",
        "hunter2hunter",
        "gh0RandomToken9Kz7Qx2Lm4Vb8Np1",
        "ghp-named-secret",
        "bearer-token-value",
    } <= found
    assert not found & {"production", "warning", "us-east-1", "application/json", "server"}


def test_a_key_in_labels_reaches_no_sink(cli, api, tmp_path, capsys):
    """A key in a CSV case's name, prompt, description and tag, and in a -q prompt, was written
    raw to the results, HTML, markdown, JUnit, CSV and the terminal table."""
    suite_file = tmp_path / "s.csv"
    suite_file.write_text(
        "test_name,user_prompt,description,tags,expected_tools\n"
        f"case-{TEST_API_KEY},use {TEST_API_KEY} now,about {TEST_API_KEY},tag-{TEST_API_KEY},\n"
    )
    api.responder = lambda body: reply(text("done"))
    options, files = every_sink(tmp_path)
    code, stdout, stderr = cli("--csv", suite_file, "--server-module", EXAMPLE_SERVER, *options)
    assert code == 0, stderr
    assert "case-[REDACTED]" in json.loads(files[0].read_text())["cases"][0]["name"]
    assert_nowhere(TEST_API_KEY, files, stdout, stderr)
    # the model saw the prompt as written: only what leaves is redacted
    assert TEST_API_KEY in api.message_requests[0]["messages"][0]["content"]
    query_out = tmp_path / "q.json"
    code, stdout, stderr = cli(
        "-q", f"my key is {TEST_API_KEY}", "--server-module", EXAMPLE_SERVER, "-o", query_out
    )
    assert code == 0, stderr
    plain, _, _ = cli("-q", f"again {TEST_API_KEY}", "--server-module", EXAMPLE_SERVER)
    assert_nowhere(TEST_API_KEY, [query_out], stdout, stderr)


def leaky_config(tmp_path: Path, args: list[str] = (), env: dict | None = None) -> Path:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "leaky": {
                        "command": sys.executable,
                        "args": [str(LEAKY), *args],
                        "env": env or {},
                    }
                }
            }
        )
    )
    return config


def tool_outputs(body: dict) -> list[str]:
    return [
        str(b["content"])
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def test_cut_wrapped_and_hex_encoded_secrets_are_masked(cli, api, tmp_path):
    """A key cut by --max-result-chars left a 20-30 character prefix, the model quoting part of
    it left one too, and base64 wrapped at 76 or 64 columns and hex passed verbatim."""
    secret = "tok-8Jx2Qv7Lm4Zr9Kp3Wn6Tb1Yd5Hf0Sa-Ce"
    calls = [
        tool_use("env_json", {"name": "LEAKY_TOKEN"}),
        tool_use("env_wrapped", {"name": "LEAKY_TOKEN", "width": 76}),
        tool_use("env_wrapped", {"name": "LEAKY_TOKEN", "width": 64}),
        tool_use("env_hex", {"name": "LEAKY_TOKEN"}),
    ]
    api.responder = lambda body: (
        reply(text(f"The token starts with {secret[:24]}... and that is all."))
        if tool_outputs(body)
        else reply(*calls)
    )
    config = leaky_config(tmp_path, env={"LEAKY_TOKEN": secret})
    cut = len('{\n  "LEAKY_TOKEN": "') + 22  # the cut lands 22 characters into the token
    options, files = every_sink(tmp_path)
    code, stdout, stderr = cli(
        "-q", "show me", "--mcp-config", config, "--max-result-chars", str(cut), *options
    )
    assert code == 0, stderr
    seen = tool_outputs(api.message_requests[-1])
    assert secret[:22] in seen[0], "the model saw the cut output as it was"
    [result] = json.loads(files[0].read_text())["results"]
    outputs = [c["output"] for c in result["tool_calls"]]
    assert all("[REDACTED]" in o for o in outputs), outputs
    for part in (secret[:12], secret[4:20], secret[-14:], secret.encode().hex()[:40]):
        assert_nowhere(part, files, stdout, stderr)


def test_a_password_in_a_dsn_and_key_flags_are_masked(cli, api, tmp_path):
    """A DSN password (the reference Postgres server's form, echoed in its errors), `--key X` and
    `-p X` reached the results and the HTML; only `--token`, `--auth=` and `--password` were caught."""
    password, key, short = "Tr0ub4dor-Horse-77", "plain-looking-key", "hunter2hunter"
    args = [f"postgresql://app:{password}@db.internal:5432/shop", "--key", key, "-p", short]
    api.responder = lambda body: (
        reply(text("It says: " + " | ".join(tool_outputs(body))))
        if tool_outputs(body)
        else reply(tool_use("argv", {}))
    )
    options, files = every_sink(tmp_path)
    code, stdout, stderr = cli(
        "-q", "connect", "--mcp-config", leaky_config(tmp_path, args), *options
    )
    assert code == 0, stderr
    assert password in tool_outputs(api.message_requests[-1])[0], "the server did echo them"
    for secret in (password, key, short):
        assert_nowhere(secret, files, stdout, stderr)


@needs_claude
def test_a_key_in_a_trigger_query_reaches_no_sink(tmp_path):
    """The skill mode too: a trigger query holding the key, through the real Claude Code CLI."""
    trigger = tmp_path / "trigger.md"
    trigger.write_text(
        "---\nname: warehouse-sql-trigger\ntype: trigger\n---\n\n# Positive Triggers\n\n"
        f"- Write SQL with key {TEST_API_KEY}\n"
    )
    options, files = every_sink(tmp_path)
    with ScriptedAnthropic(responder=lambda body: reply(text("ok"))) as api:
        env = dict(
            os.environ,
            ANTHROPIC_API_KEY=TEST_API_KEY,
            ANTHROPIC_BASE_URL=api.url,
            HOME=str(tmp_path),
        )
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "evaluator.py"),
                "--claude-bin",
                CLAUDE,
                "--skill",
                str(SKILL_DIR),
                "--trigger",
                str(trigger),
                "--runs",
                "1",
                *options,
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=180,
        )
    assert done.returncode == 1, done.stdout + done.stderr  # the skill never fired: a miss
    document = json.loads(files[0].read_text())
    assert document["results"][0]["query"] == "Write SQL with key [REDACTED]"
    assert_nowhere(TEST_API_KEY, files, done.stdout, done.stderr)


# ============================================================================ issue 37: keys encoded, wrapped, or unknown
ENCODING = SERVERS / "encoding_server.py"
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def random_key(prefix: str, length: int, seed: int) -> str:
    """A key nobody typed, the same every run."""
    chooser = random.Random(seed)
    return prefix + "".join(chooser.choice(KEY_ALPHABET) for _ in range(length))


API_KEY_90 = random_key("sk-ant-api03-", 90, seed=1)  # the API key of the tests below
SERVICE_TOKEN = random_key("", 48, seed=2)  # a server's credential
UNKNOWN_KEY = random_key("sk-ant-api03-", 93, seed=3) + "AA"  # a key we were never told about


HEX_BYTES = re.compile(r"(?:(?:0[xX]|\\+x)?[0-9A-Fa-f]{2}[\s,:]*){6,}")


def hex_decoded(text: str) -> str:
    """Every run of hex bytes (`73 6b`, `73:6b`, `0x73,0x6b`, `\\x73\\x6b`, `736b`) decoded."""
    pairs = re.compile(r"(?:0[xX]|\\+x)?([0-9A-Fa-f]{2})")
    return HEX_BYTES.sub(
        lambda run: bytes.fromhex("".join(pairs.findall(run.group()))).decode("latin-1"), text
    )


def unicode_unescaped(text: str) -> str:
    """Every `\\uXXXX` escape (escaped once or more) decoded."""
    return re.sub(r"\\+u([0-9A-Fa-f]{4})", lambda escape: chr(int(escape[1], 16)), text)


def squeezed(text: str) -> str:
    """`text` without its markup and anything a key is not made of: what two adjacent fields
    (`"first": "sk-...", "second": "..."`, `'sk-...' + '...'`, two cells) say read together."""
    return re.sub(r"<[^>]*>|[^A-Za-z0-9_-]", "", text)


def decoded_runs(reading: str) -> list[str]:
    """Every base64 run of `reading` decoded (standard or URL-safe) at each of its four
    alignments, every base32 run (either case) at each of its eight, and every run of plain hex
    at both of its two."""
    found = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", reading):
        standard = run.replace("-", "+").replace("_", "/")
        for offset in range(4):
            part = standard[offset:]
            found.append(base64.b64decode(part[: len(part) // 4 * 4]).decode("latin-1"))
    for run in re.findall(r"[A-Z2-7]{16,}|[a-z2-7]{16,}", reading):  # one case: 10+ bytes
        for offset in range(8):
            part = run[offset:]
            part = part[: len(part) // 8 * 8]
            found.append(base64.b32decode(part, casefold=True).decode("latin-1"))
    for run in re.findall(r"[0-9A-Fa-f]{12,}", reading):
        for offset in range(2):
            part = run[offset:]
            found.append(bytes.fromhex(part[: len(part) // 2 * 2]).decode("latin-1"))
    return found


@functools.lru_cache(maxsize=64)  # a text is read once for every secret looked for
def readings(text: str) -> list[str]:
    """`text`, and what a reader could decode of it: line breaks (real and JSON-escaped) read
    through, percent-escapes, hex bytes, `\\uXXXX` escapes and HTML entities decoded, adjacent
    fields read together, each of those backwards too, and every base64, base32 and hex run of
    them decoded (see decoded_runs)."""
    joined = re.sub(r"\s+|\\[rn]", "", text)
    plain = [text, joined, squeezed(text)]
    for reading in (text, joined):
        plain += [
            urllib.parse.unquote(reading, errors="replace"),
            hex_decoded(reading),
            unicode_unescaped(reading),
            html.unescape(reading),
        ]
    found = plain + [reading[::-1] for reading in plain]
    for reading in plain[1:]:
        found += decoded_runs(reading)
    return found


def recoverable(key: str, *texts: str, window: int = 20) -> list[str]:
    """The `window`-character runs of `key` that can be read back from any of `texts`."""
    runs = {key[i : i + window] for i in range(len(key) - window + 1)}
    # each run holds one of these whole: a reading holding none of them holds no run (faster)
    half = window // 2
    blocks = {key[i : i + half] for i in range(0, len(key) - half + 1, half)}
    found = set()
    for shown in texts:
        for reading in readings(shown):
            if any(block in reading for block in blocks):
                found |= {run for run in runs if run in reading}
    return sorted(found)


def wrapped(lead: str, stream: str, width: int) -> str:
    """`stream` after `lead`, broken at `width` columns (the first line's lead counted)."""
    line = lead + stream
    return "\n".join(line[i : i + width] for i in range(0, len(line), width))


@pytest.mark.parametrize("key", [API_KEY_90, SERVICE_TOKEN], ids=["api-key", "credential"])
def test_base64_of_a_secret_anywhere_in_a_wrapped_stream_is_masked(key):
    """Base64 of a secret wrapped over lines with other text on its first line: only its last
    line was masked (81-83 of a 90-character key readable at 64 columns, 42-44 at 76)."""
    redactor = Redactor([key])
    for prefix in (b"p" * n for n in range(6)):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            stream = encode(prefix + key.encode()).decode()
            for lead in ("", "blob: ", "data:text/plain;base64,", "x"):
                for width in (4, 16, 60, 64, 76, 100, 1000):
                    for shown in (
                        wrapped(lead, stream, width),
                        lead
                        + "\n".join(stream[i : i + width] for i in range(0, len(stream), width)),
                        wrapped(lead, stream, width).replace("\n", "\r\n  "),
                        json.dumps(wrapped(lead, stream, width))[1:-1],
                    ):
                        masked = redactor.text(f"before\n{shown}\nafter")
                        assert not recoverable(key, masked), (lead, width, prefix, masked)
                        assert masked.startswith("before") and masked.endswith("after")


@pytest.mark.parametrize(
    "key", [API_KEY_90, SERVICE_TOKEN, ESCAPY_SECRET], ids=["api-key", "credential", "escapy"]
)
def test_a_percent_encoded_secret_is_masked_whichever_bytes_are_encoded(key):
    """A key percent-encoded byte by byte (`%73%6B%2D...`) was written as it was."""
    redactor = Redactor([key])
    raw = key.encode()
    for every in (1, 2, 3):
        for hex_format in ("%{:02X}", "%{:02x}"):
            shown = "".join(
                hex_format.format(b) if i % every == 0 else chr(b) for i, b in enumerate(raw)
            )
            masked = redactor.text(f"https://example.invalid/?q={shown}&next=1")
            assert "[REDACTED]" in masked and masked.endswith("&next=1"), masked
            assert not recoverable(key, masked), (every, hex_format, masked)
    # base64 in a URL: its `+`, `/` and `=` percent-encoded
    shown = urllib.parse.quote(base64.b64encode(b"pp" + raw).decode(), safe="")
    assert not recoverable(key, redactor.text(f"?blob={shown}"))


SHAPED_KEYS = [
    UNKNOWN_KEY,
    "sk-ant-admin01-" + random_key("", 40, seed=4),
    "sk-proj-" + random_key("", 60, seed=5),
    "sk-" + "T3BlbkFJ" + random_key("", 40, seed=6).replace("-", "x").replace("_", "y"),
    "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "gho_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2",
    "ghs_" + "0123456789abcdefABCDEF0123456789abcd",
    "github_pat_11ABCDEFG0abcdefghijkl_"
    + "mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijk",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "xoxp-123456789012-123456789012-123456789012-0123456789abcdef0123456789abcdef",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
    "sk_live_51H8abcdefGHIJKLmnopQRSTuvwx",
    "rk_live_51H8abcdefGHIJKLmnopQRSTuvwx",
    "glpat-" + "xY9zA8bC7dE6fG5hI4jK",
    "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "pypi-AgEIcHlwaS5vcmc" + random_key("", 60, seed=7),
]

NOT_KEYS = [
    "sk-ant-...",
    "export ANTHROPIC_API_KEY=sk-ant-api03-...",
    "sk-ant-test-key-0123456789",  # a test's key: masked as the API key, not by its shape
    "sk-ant-benchmark-0000",
    "task-0123456789abcdef0123456789abcdef0123",
    "disk-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "get_github_pat_scopes",
    "hf_hub_download",
    "ghp_short",
    "AKIA",
    "MAKIAIOSFODNN7EXAMPLEX",
    "xoxb-short",
    "search_profiles_docs",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "123e4567-e89b-12d3-a456-426614174000",
    "sk_live_key",
    "The Stripe key starts with sk_live_ and the Slack one with xoxb-.",
    # what issue 38's readings read (hex bytes, escapes, entities): none of it a key
    "ab cd ef 12 34 56",
    "dead beef cafe babe",
    "0x1f 0x2a 0x00 0xff",
    "\\x00\\x01\\x02\\x03\\x04\\x05",
    "caf\\u00e9 na\\u00efve",
    "\\u0073\\u006b\\u002d\\u0061\\u006e\\u0074\\u002d...",  # `sk-ant-...`
    "Fish &amp; chips &lt; 5 &#8364; &#x20AC; &copy;",
    "&#115;&#107;&#45;&#97;&#110;&#116;&#45;&#97;&#112;&#105;&#48;&#51;&#45;...",
    "73 6b 2d 61 6e 74 2d 61 70 69 30 33 2d 2e 2e 2e",  # `sk-ant-api03-...`
    "NBSWY3DPEB3W64TMMQWCA5DINFZSA2LT",  # base32 of something else
    "yek-terces-a-si-siht",
    "use sk-ant-api03-xxxxxxxx as the key",
    "2024-01-15 12:30:45",
    "mac 00:1a:2b:3c:4d:5e",
]


def test_key_shaped_strings_are_masked_and_ordinary_words_are_not():
    """An `sk-ant-api03-` key we were never told about (in a case's name or prompt) was written
    raw: a key of a well-known shape is masked wherever it is, told about or not."""
    redactor = Redactor()
    for key in SHAPED_KEYS:
        for shown in (key, f"case-{key}", f"use {key} now", f'{{"token": "{key}"}}', f"({key})."):
            masked = redactor.text(shown)
            assert key[4:] not in masked and "[REDACTED]" in masked, (key, masked)
    for words in NOT_KEYS:
        assert redactor.text(words) == words
    assert Redactor(["0123456789abcdef"]).data({"k": SHAPED_KEYS[4]}) == {"k": "[REDACTED]"}


def assert_no_key_recoverable(files: list[Path], *texts: str) -> None:
    for key in (API_KEY_90, SERVICE_TOKEN, UNKNOWN_KEY):
        for path in files:
            for blob in decoded_texts(path):
                assert not recoverable(key, blob), f"{path.name} gives back part of {key[:16]}"
        for blob in texts:
            assert not recoverable(key, blob), f"a printed line gives back part of {key[:16]}"


def test_no_twenty_characters_of_a_key_reach_any_sink_however_encoded(
    cli, api, tmp_path, monkeypatch
):
    """Done when (issue 37): the API key and a server's credential shown behind 0-5 bytes of
    prefix, after other text on the same line, base64-wrapped at 64 and 76 columns and
    percent-encoded, and an unknown `sk-ant-api03-` key in a case's name and prompt: no 20
    characters of any of them in any output file, on stdout or on stderr."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY_90)
    suite_file = tmp_path / "s.csv"
    suite_file.write_text(
        "test_name,user_prompt,expected_tools,forbidden_tools\n"
        f"shown-{UNKNOWN_KEY},show me everything with {UNKNOWN_KEY},encoded,\n"
        f"refused-{UNKNOWN_KEY},never show {UNKNOWN_KEY},,encoded\n"
    )
    calls = [tool_use("encoded", {"name": n}) for n in ("CLIENT_KEY", "SERVICE_TOKEN")]
    api.responder = lambda body: (
        reply(text(f"For {UNKNOWN_KEY} the server said:\n" + "\n".join(tool_outputs(body))))
        if tool_outputs(body)
        else reply(*calls)
    )
    options, files = every_sink(tmp_path)
    comment = tmp_path / "comment.md"
    code, stdout, stderr = cli(
        "--csv",
        suite_file,
        "--server",
        f"{sys.executable} {ENCODING}",
        "--server-env",
        f"CLIENT_KEY={API_KEY_90}",
        "--server-env",
        f"SERVICE_TOKEN={SERVICE_TOKEN}",
        *options,
        "--pr-comment",
        comment,
    )
    assert code == 1, stderr  # the second case fails: its name is in every report
    said = "\n".join(tool_outputs(api.message_requests[-1]))
    assert recoverable(API_KEY_90, said) and recoverable(SERVICE_TOKEN, said), "it did show them"
    assert_no_key_recoverable([*files, comment], stdout, stderr)
    assert "shown-[REDACTED]" in json.loads(files[0].read_text())["cases"][0]["name"]


@pytest.mark.parametrize("name", ["CLIENT_KEY", "SERVICE_TOKEN"])
def test_a_server_failing_with_keys_encoded_on_its_stderr_leaks_none_in_the_error_line(
    cli, api, tmp_path, monkeypatch, name
):
    """A server printing a key base64-wrapped after other text to stderr leaked it through the
    fatal `error:` line, as the reports did."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY_90)
    code, stdout, stderr = cli(
        "-q",
        f"hi {UNKNOWN_KEY}",
        "--server",
        f"{sys.executable} {ENCODING} --die-printing {name}",
        "--server-env",
        f"CLIENT_KEY={API_KEY_90}",
        "--server-env",
        f"SERVICE_TOKEN={SERVICE_TOKEN}",
    )
    one_error_line(stderr)  # exactly one error: line, no traceback
    assert code == 2 and "[REDACTED]" in stderr and "blob" in stderr, (
        stderr
    )  # the stderr tail: below the error line
    assert_no_key_recoverable([], stdout, stderr)


# ============================================================================ issue 38: every form, and servers' credentials
def ascii_hex(raw: bytes, pattern: str, separator: str = "") -> str:
    return separator.join(pattern.format(b) for b in raw)


def every_nth(value: str, every: int, escape: str) -> str:
    """Every `every`th character of `value` shown as `escape` (formatted with its code point)."""
    return "".join(escape.format(ord(c)) if i % every == 0 else c for i, c in enumerate(value))


MSSQL_PASSWORD = "Str0ng&<Pass>" + random_key("", 20, seed=8)
DB_PASSWORD = random_key("", 24, seed=9)
SLACK_HOOK_PATH = "T04ABCD1234/B05EFGH5678/" + random_key("", 24, seed=10).replace("-", "q")
DISCORD_HOOK_PATH = "112233445566778899/" + random_key("", 68, seed=11)
GENERIC_HOOK_TOKEN = random_key("", 32, seed=12).replace("-", "x").replace("_", "y")
SERVER_CREDENTIALS = {  # the server's environment: a variable each
    "MSSQL_CONNECTION_STRING": "Server=tcp:db.internal,1433;Database=shop;User Id=app;"
    f"Password={MSSQL_PASSWORD};Encrypt=True;",
    "SLACK_WEBHOOK_URL": f"https://hooks.slack.com/services/{SLACK_HOOK_PATH}",
    "DISCORD_WEBHOOK_URL": f"https://discord.com/api/webhooks/{DISCORD_HOOK_PATH}",
    "DATABASE_URL": f"postgresql://app:{DB_PASSWORD}@db.internal:5432/shop",
    "ALERT_HOOK": f"https://alerts.example.invalid/hooks/incoming/{GENERIC_HOOK_TOKEN}",
}
# what of each is the credential: no 20 characters of these may reach a sink
SERVER_SECRETS = [MSSQL_PASSWORD, DB_PASSWORD, SLACK_HOOK_PATH, DISCORD_HOOK_PATH]
SERVER_SECRETS += [GENERIC_HOOK_TOKEN]
FORM_KEYS = [API_KEY_90, SERVICE_TOKEN, ESCAPY_SECRET + "-and-some-more-9Qz", MSSQL_PASSWORD]


def shown_split(key: str) -> list[tuple[str, ...]]:
    """`key` cut in two at a third, the half and two thirds: the two parts, as adjacent fields."""
    return [(key[:cut], key[cut:]) for cut in (len(key) // 3, len(key) // 2, len(key) * 2 // 3)]


@pytest.mark.parametrize("key", FORM_KEYS, ids=["api-key", "credential", "escapy", "password"])
def test_a_secret_split_across_adjacent_fields_is_masked(key):
    """The first part of a key in one JSON value and the rest in the next (or in two list items,
    two concatenated strings, two tool calls' arguments or outputs) was written as it was: each
    field alone holds no whole key. Read together they give none back now."""
    redactor = Redactor([key])
    for first, second in shown_split(key):
        for shown in (
            json.dumps({"first": first, "second": second}),
            json.dumps([first, second]),
            f"{first!r} + {second!r}",
            f"part 1: {first}\tpart 2: {second}",
            f"a={first}&b={second} (end)",
        ):
            masked = redactor.text(shown)
            assert not recoverable(key, masked), (shown, masked)
        document = {
            "tool_calls": [
                {"name": "half", "input": {"note": first}, "output": f"the first half: {first}"},
                {"name": "half", "input": {"note": second}, "output": f"{second} is the rest"},
            ],
            "fields": [first, second],
        }
        masked = redactor.data(document)
        calls = masked["tool_calls"]
        for joined in (
            calls[0]["input"]["note"] + calls[1]["input"]["note"],
            calls[0]["output"] + calls[1]["output"],
            "".join(masked["fields"]),
        ):
            assert not recoverable(key, joined), (first, second, joined)
        assert calls[0]["name"] == "half" and calls[1]["output"].endswith(" is the rest")


def test_what_a_split_reads_as_is_only_a_known_secret():
    """Adjacent fields are read together for the secrets the redactor was told about, not for
    key shapes: two parts of a key nobody told it about, neither of a key's shape, are left.
    A key written so that one text still holds it whole is masked (issue 46): concatenated
    (`'sk-ant-...' + '...'`) or reversed (tests/test_redaction_forms.py has every such form)."""
    first, second = UNKNOWN_KEY[:20], UNKNOWN_KEY[20:]
    shown = json.dumps({"first": first, "second": second})
    assert Redactor().text(shown) == shown
    assert Redactor().data([first, second]) == [first, second]
    assert Redactor().text(f"{first!r} + {second!r}") == "'[REDACTED]'"
    assert Redactor().text(UNKNOWN_KEY[::-1]) == "[REDACTED]"


@pytest.mark.parametrize("key", FORM_KEYS, ids=["api-key", "credential", "escapy", "password"])
def test_a_secret_as_hex_bytes_with_separators_is_masked(key):
    """`73 6b 2d ...`, `73:6b:...`, `0x73 0x6b`, `0x73,0x6b`, `\\x73\\x6b` and a dump of 16 bytes a
    line were written as they were (only `736b2d...` was masked)."""
    redactor = Redactor([key])
    raw = key.encode()
    pairs = [f"{b:02x}" for b in raw]
    for shown in (
        ascii_hex(raw, "{:02x}", " "),
        ascii_hex(raw, "{:02X}", " "),
        ascii_hex(raw, "{:02x}", ":"),
        ascii_hex(raw, "0x{:02x}", " "),
        ascii_hex(raw, "0x{:02x}", ","),
        ascii_hex(raw, "0x{:02X}", ", "),
        ascii_hex(raw, "\\x{:02x}"),
        ascii_hex(raw, "\\\\x{:02x}"),
        "bytes: " + ascii_hex(b"ppp" + raw, "{:02x}", " "),
        "\n".join(" ".join(pairs[i : i + 16]) for i in range(0, len(pairs), 16)),
        "[" + ascii_hex(raw, "0x{:02x}", ", ") + "]",
    ):
        masked = redactor.text(f"before {shown} after")
        assert not recoverable(key, masked), (shown, masked)
        assert masked.startswith("before ") and masked.endswith(" after"), masked


@pytest.mark.parametrize("key", FORM_KEYS, ids=["api-key", "credential", "escapy", "password"])
def test_a_secret_as_unicode_escapes_is_masked(key):
    """A key with every character (or every second or third) written `\\u0073` was written as it
    was: JSON only escapes what it must, so no form had them."""
    redactor = Redactor([key])
    for every in (1, 2, 3):
        for escape in ("\\u{:04x}", "\\u{:04X}", "\\\\u{:04x}"):
            shown = every_nth(key, every, escape)
            masked = redactor.text(f'{{"value": "{shown}"}}')
            assert not recoverable(key, masked), (every, escape, masked)
            assert masked.startswith('{"value": "') and masked.endswith('"}'), masked


@pytest.mark.parametrize("key", FORM_KEYS, ids=["api-key", "credential", "escapy", "password"])
def test_a_secret_as_html_entities_is_masked(key):
    """`&#115;&#107;...`, `&#x73;...` (of every character or some) and a key whose `&`, `<` and
    `"` are named entities were written as they were."""
    redactor = Redactor([key])
    for every in (1, 2, 3):
        for entity in ("&#{};", "&#x{:x};", "&#X{:X};", "&#{}"):
            shown = every_nth(key, every, entity)
            masked = redactor.text(f"<td>{shown}</td>")
            assert not recoverable(key, masked), (every, entity, masked)
            assert masked.startswith("<td>") and masked.endswith("</td>"), masked
    for shown in (html.escape(key), html.escape(key, quote=False)):
        masked = redactor.text(f"<p>{shown}</p>")
        assert not recoverable(key, masked), masked


@pytest.mark.parametrize("key", FORM_KEYS, ids=["api-key", "credential", "escapy", "password"])
def test_a_reversed_secret_is_masked(key):
    """A key written backwards was written as it was."""
    redactor = Redactor([key])
    for shown in (key[::-1], f"backwards: {key[::-1]} (end)", json.dumps(key[::-1])):
        masked = redactor.text(shown)
        assert not recoverable(key, masked) and "[REDACTED]" in masked, masked


@pytest.mark.parametrize("key", FORM_KEYS, ids=["api-key", "credential", "escapy", "password"])
def test_base32_of_a_secret_is_masked_at_any_alignment_and_wrapped(key):
    """Base32 of a key (alone, after 1-4 other bytes, without its padding, in lower case,
    wrapped at 64 and 76 columns) was written as it was."""
    redactor = Redactor([key])
    for prefix in (b"p" * n for n in range(5)):
        stream = base64.b32encode(prefix + key.encode()).decode()
        for shown in (
            stream,
            stream.rstrip("="),
            stream.lower(),
            f"b32: {stream} (end)",
            wrapped("b32: ", stream, 64),
            wrapped("", stream, 76),
        ):
            masked = redactor.text(f"before\n{shown}\nafter")
            assert not recoverable(key, masked), (prefix, masked)


def test_what_the_new_readings_read_is_left_alone_when_it_is_no_secret():
    """Hex-looking words, escapes, entities, base32 and placeholders that are not a secret's
    are left as they were, with secrets known (NOT_KEYS: without, as keys)."""
    redactor = Redactor([API_KEY_90, SERVICE_TOKEN, MSSQL_PASSWORD])
    for words in NOT_KEYS:
        assert redactor.text(words) == words
    # a credential that is a URL: its scheme and host are anyone's, the rest is not
    redactor = Redactor(["https://auth.example.invalid/oauth/callback?state=Zx81Qv"])
    for words in ("see https://auth.example.invalid/docs", "auth.example.invalid is up"):
        assert redactor.text(words) == words
    assert redactor.text("https://auth.example.invalid/oauth/cal") == "[REDACTED]"


def test_a_long_text_is_masked_as_a_short_one():
    """Texts of Matcher.LONG_TEXT characters or more are searched by RE2, shorter ones by `re`:
    each form is masked the same in both, and a text RE2 cannot take (a lone surrogate, as a
    file's bytes that are not UTF-8 are read) is read by `re`."""
    redactor = Redactor([API_KEY_90, SERVICE_TOKEN])
    raw = API_KEY_90.encode()
    filler = "lorem ipsum dolor sit amet\n" * 200
    for shown in (
        API_KEY_90,
        ascii_hex(raw, "{:02x}", " "),
        every_nth(API_KEY_90, 1, "\\u{:04x}"),
        every_nth(API_KEY_90, 2, "&#{};"),
        API_KEY_90[::-1],
        base64.b32encode(b"pp" + raw).decode(),
        json.dumps({"a": API_KEY_90[:40], "b": API_KEY_90[40:]}),
        f"...{API_KEY_90[30:]}",
    ):
        short = redactor.text(shown)
        assert "[REDACTED]" in short and not recoverable(API_KEY_90, short), short
        assert redactor.text(f"{filler}{shown}\n{filler}") == f"{filler}{short}\n{filler}"
    masked = redactor.masked_bytes(b"\xff\xfe" * 3000 + b" key " + raw + b" end")
    assert masked.endswith(b" key [REDACTED] end") and masked.startswith(b"\xff\xfe")


def test_connection_strings_webhooks_and_url_userinfo_are_a_servers_secrets():
    """`MSSQL_CONNECTION_STRING='Server=...;Password=...;'`, `SLACK_WEBHOOK_URL=...`, a Discord
    webhook and `user:pass@` in URLs of any scheme were not recognised as credentials."""
    mssql_arg_password = random_key("", 18, seed=13)
    libpq_password = random_key("", 18, seed=14)
    token_as_user = random_key("", 40, seed=15).replace("-", "a").replace("_", "b")
    spec = ServerSpec(
        name="s",
        kind="stdio",
        command="server",
        args=[
            "--connection-string",
            f"Data Source=db;Initial Catalog=shop;User ID=sa;Pwd={mssql_arg_password};",
            f"--dsn=host=db user=app password={libpq_password} dbname=shop",
            "--upstream",
            f"https://{token_as_user}@git.example.invalid/org/repo.git",
            "--schema",
            "https://api.example.invalid/v1/items/123e4567-e89b-12d3-a456-426614174000",
        ],
        env={
            **SERVER_CREDENTIALS,
            "REDIS_URL": "rediss://:redis-pass-Zq81@cache.internal:6380/0",
            "AMQP_URL": "amqp+ssl://guest:amqp-pass-Lx42@mq.internal/vhost",
            "MYSQL_DSN": "app:mysql-pass-Kd93@tcp(db.internal:3306)/shop",
            "BLOB_URL": "https://acct.blob.core.invalid/c?sv=2022-11-02&sig=Qm9v8Xk2Lp4Zr7Tn1Wc5",
            "MODE": "production",
            "HOMEPAGE": "https://example.invalid/docs/getting-started",
            "IMAGE": "postgres:16-alpine@sha256:0123456789abcdef",
            "SETTINGS": "Server=db;Database=shop;Encrypt=True;",
        },
    )
    found = set(spec_secrets(spec))
    assert {
        MSSQL_PASSWORD,
        DB_PASSWORD,
        SLACK_HOOK_PATH,
        DISCORD_HOOK_PATH,
        GENERIC_HOOK_TOKEN,
        mssql_arg_password,
        libpq_password,
        token_as_user,
        "redis-pass-Zq81",
        "amqp-pass-Lx42",
        "mysql-pass-Kd93",
        "Qm9v8Xk2Lp4Zr7Tn1Wc5",
    } <= found, found
    ordinary = {"production", "shop", "db", "sa", "app", "16-alpine", "2022-11-02", "True"}
    ordinary |= {"123e4567-e89b-12d3-a456-426614174000", "getting-started", "incoming"}
    assert not found & ordinary, found & ordinary
    redactor = Redactor(found)
    for name, value in SERVER_CREDENTIALS.items():
        assert "[REDACTED]" in redactor.text(f"{name}={value}")
    assert (
        redactor.text(SERVER_CREDENTIALS["SLACK_WEBHOOK_URL"])
        == "https://hooks.slack.com/services/[REDACTED]"
    )


def joined_fields(path: Path) -> list[str]:
    """The texts of adjacent fields of a written file read together: in JSON, every string in
    document order, and the strings at one place of consecutive list items (each tool call's
    `output`, each call's `input.note`); in CSV, each row's cells and each column's."""
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(raw)))
        return ["".join(row) for row in rows] + ["".join(column) for column in zip(*rows)]
    if path.suffix not in (".json", ".jsonl"):
        return []
    places: dict[str, list[str]] = {}

    def gather(value, place: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                gather(item, f"{place}.{key}")
        elif isinstance(value, list):
            for item in value:
                gather(item, f"{place}[]")
        elif isinstance(value, str):
            places.setdefault(place, []).append(value)
            places.setdefault("", []).append(value)

    for line in raw.splitlines() if path.suffix == ".jsonl" else [raw]:
        gather(json.loads(line), "")
    return ["".join(texts) for texts in places.values()]


def assert_no_secret_recoverable(secrets: list[str], files: list[Path], *texts: str) -> None:
    for path in files:
        for blob in [*decoded_texts(path), *joined_fields(path)]:
            for secret in secrets:
                assert not recoverable(secret, blob), f"{path.name} gives back part of {secret}"
    for blob in texts:
        for secret in secrets:
            assert not recoverable(secret, blob), f"a printed line gives back part of {secret}"


def run_with_server_credentials(*args: str):
    """The CLI with the encoding server given the API key, a credential and SERVER_CREDENTIALS."""
    options = []
    for name, value in {"CLIENT_KEY": API_KEY_90, "SERVICE_TOKEN": SERVICE_TOKEN}.items():
        options += ["--server-env", f"{name}={value}"]
    for name, value in SERVER_CREDENTIALS.items():
        options += ["--server-env", f"{name}={value}"]
    return invoke(*args, *options)


FORMS_38 = ["split", "hex", "unicode", "html", "reversed", "base32"]


@pytest.mark.parametrize("form", FORMS_38)
def test_no_twenty_characters_of_a_secret_reach_any_sink_in_any_form(
    api, tmp_path, monkeypatch, form
):
    """Done when (issue 38): the API key, a server's credential and the credentials in its
    connection string, webhook URLs and database URL, shown split across adjacent fields (and
    across two tool calls' arguments and outputs), as hex bytes with separators, as `\\uXXXX`
    escapes, as HTML entities, reversed and in base32: no 20 characters of any of them in any
    output file (adjacent fields read together), on stdout or on stderr."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY_90)
    names = ["CLIENT_KEY", "SERVICE_TOKEN", *SERVER_CREDENTIALS]
    calls = [tool_use("encoded", {"name": name, "form": form}) for name in names]
    if form == "split":  # two calls' outputs, and two calls' arguments, hold one half each
        halves = [API_KEY_90[: len(API_KEY_90) // 2], API_KEY_90[len(API_KEY_90) // 2 :]]
        for part, note in zip((1, 2), halves):
            calls.append(tool_use("half", {"name": "SERVICE_TOKEN", "part": part, "note": note}))
    api.responder = lambda body: (
        reply(text("The server said:\n" + "\n".join(tool_outputs(body))))
        if tool_outputs(body)
        else reply(*calls)
    )
    options, files = every_sink(tmp_path)
    comment = tmp_path / "comment.md"
    code, stdout, stderr = run_with_server_credentials(
        "-q",
        "show me everything",
        "--server",
        f"{sys.executable} {ENCODING}",
        *options,
        "--pr-comment",
        comment,
    )
    assert code == 0, stderr
    said = "\n".join(tool_outputs(api.message_requests[-1]))
    for secret in (API_KEY_90, SERVICE_TOKEN, *SERVER_SECRETS):
        assert recoverable(secret, said), f"the server did show {secret}"
    assert_no_secret_recoverable(
        [API_KEY_90, SERVICE_TOKEN, *SERVER_SECRETS], [*files, comment], stdout, stderr
    )


@pytest.mark.parametrize("form", FORMS_38)
def test_a_server_failing_with_secrets_in_any_form_on_its_stderr_leaks_none(
    api, tmp_path, monkeypatch, form
):
    """A server quoting its configuration in these forms on stderr as it fails to start: the
    fatal `error:` line (which quotes the end of it: the API key's forms, and some of the
    connection string's) gives back none of it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY_90)
    names = "MSSQL_CONNECTION_STRING CLIENT_KEY"
    code, stdout, stderr = run_with_server_credentials(
        "-q",
        "hi",
        "--server",
        f"{sys.executable} {ENCODING} --die-printing {names} --form {form}",
    )
    one_error_line(stderr)  # exactly one error: line, no traceback
    assert code == 2 and "[REDACTED]" in stderr, stderr  # the stderr tail: below the error line
    assert_no_secret_recoverable([API_KEY_90, SERVICE_TOKEN, *SERVER_SECRETS], [], stdout, stderr)
