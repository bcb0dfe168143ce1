"""Reusing the arm without the plugin (issue 47): on a suite whose plugin changed and nothing else,
the second `plugin` run (--baseline-from the first's results) makes at most 55 % of the model
requests `claude plugin eval` makes for the same suite.

Every request is counted at the scripted server (tests/fake_anthropic.py, the plugin rule:
`plugin_claude_code`, whose outcomes tests/test_plugin_evals.py computes by hand), Claude Code's
and the judge's alike. The suite is the fixture plugin tests/plugins/greeter (four cases, both
arms, 3 runs each); the change is one word of its skill's description. Three runs, one after the
other on one server: `plugin` before the change (-o first.json), then, after the change,
`claude plugin eval` (both arms, as it always runs them) and `plugin --baseline-from first.json`.
Run by run_benchmarks.py (its target table names `measure`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
for _path in (str(ROOT), str(TESTS)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fake_anthropic import ScriptedAnthropic, plugin_claude_code  # noqa: E402

from claude_tool_evaluator.claude_code import find_claude_bin  # noqa: E402

GREETER = TESTS / "plugins" / "greeter"
API_KEY = "sk-ant-benchmark-0000"
TARGET = 0.55  # the second run's requests over claude plugin eval's, at most
RUNS = 3


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}


def _requests(api: ScriptedAnthropic, start: int) -> int:
    return sum(1 for r in api.requests[start:] if r["path"] == "/v1/messages")


def _ours(api: ScriptedAnthropic, plugin: Path, work: Path, *more: str) -> tuple[int, str, str]:
    """`python evaluator.py plugin` against the server: its requests, its stdout and stderr."""
    start = len(api.requests)
    done = subprocess.run(
        [sys.executable, str(ROOT / "evaluator.py"), "plugin", str(plugin), "--runs", str(RUNS)]
        + ["--concurrency", "2", "--base-url", api.url, *more],
        capture_output=True,
        text=True,
        cwd=work,
        stdin=subprocess.DEVNULL,
        env={**_clean_env(), "ANTHROPIC_API_KEY": API_KEY},
        timeout=1800,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"plugin exited {done.returncode}: {done.stderr[-2000:]}")
    return _requests(api, start), done.stdout, done.stderr


def _theirs(api: ScriptedAnthropic, plugin: Path, work: Path) -> int:
    """`claude plugin eval` (both arms) against the server: its requests."""
    home = work / "cc-home"
    home.mkdir(parents=True, exist_ok=True)
    start = len(api.requests)
    out = work / "cc.json"
    done = subprocess.run(
        [find_claude_bin(None), "plugin", "eval", str(plugin), "--runs", str(RUNS), "-j", "2"]
        + ["--json", str(out), "--trust-plugin", "--no-publish"]
        + ["--output-dir", str(work / "cc-out")],
        capture_output=True,
        text=True,
        cwd=work,
        stdin=subprocess.DEVNULL,
        env={
            **_clean_env(),
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": API_KEY,
            "HOME": str(home),
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        },
        timeout=1800,
    )
    if not out.is_file():
        raise RuntimeError(f"claude plugin eval wrote no --json: {done.stderr[-2000:]}")
    return _requests(api, start)


def _change(plugin: Path, old: str, new: str, part: str) -> None:
    """One change to the plugin alone: a sentence of its skill's SKILL.md."""
    skill = plugin / "skills" / "greeting-card" / "SKILL.md"
    text = skill.read_text()
    head, _, body = text.partition("\n---\n")
    if part == "description":
        head = head.replace(old, new)
    else:
        body = body.replace(old, new)
    skill.write_text(f"{head}\n---\n{body}")


def _reused(out: str) -> int:
    return sum(1 for r in json.loads(out).get("results", []) if r.get("reused_from"))


def measure(work: Path) -> tuple[str, str, str, bool, list[str]]:
    """(title, summary, target, passed, details) of the target. Two changes to the plugin alone,
    each measured against claude plugin eval on the plugin as changed: its skill's instructions
    (the body of SKILL.md; the second run with --cache, which gives the runs without the plugin
    and answers the requests with it that did not change), then its skill's description (the
    second run with --baseline-from; no request with the plugin is the same as before, so that
    arm's share of claude plugin eval's requests is the floor of any run that makes it again)."""
    plugin, first, cache = work / "greeter", work / "first.json", work / "cache"
    shutil.copytree(GREETER, plugin)
    found: dict[str, tuple[int, int, int]] = {}
    with ScriptedAnthropic(responder=plugin_claude_code) as api:
        fresh, _, _ = _ours(api, plugin, work, "-o", str(first), "--cache", str(cache))
        for part, old, new, more in (
            ("instructions", "one warm sentence", "one kind sentence", ("--cache", str(cache))),
            ("description", "by name.", "by name, kindly.", ("--baseline-from", str(first))),
        ):
            _change(plugin, old, new, part)
            theirs = _theirs(api, plugin, work / part)
            again, out, _ = _ours(api, plugin, work, *more, "--json")
            found[part] = again, theirs, _reused(out)
    ratios = {part: again / theirs for part, (again, theirs, _) in found.items()}
    return (
        "baseline reuse",
        ", ".join(
            f"{part} changed: second plugin run {again} requests vs claude plugin eval {theirs} "
            f"({ratios[part]:.2f}x)"
            for part, (again, theirs, _) in found.items()
        ),
        f"<= {TARGET:.2f} x claude plugin eval's requests (the instructions changed)",
        ratios["instructions"] <= TARGET and all(n == 4 * RUNS for *_, n in found.values()),
        [
            "tests/plugins/greeter, 4 cases, both arms, "
            f"--runs {RUNS}, concurrency 2 (-j 2); the first plugin run made {fresh} requests",
            *(
                f"{part}: {n} runs without the plugin reused; {more}"
                for part, (_, _, n), more in zip(
                    found,
                    found.values(),
                    (
                        "--cache answers the unchanged requests with the plugin too",
                        "every request with the plugin changed: that arm alone is "
                        f"{ratios['description']:.2f} of claude plugin eval's",
                    ),
                    strict=True,
                )
            ),
        ],
    )
