#!/usr/bin/env python
"""`plugin` beside `claude plugin eval -j N` on speed (issue 44, item 9): the same five-case
plugin suite, both arms, the same runs per case and the same concurrency, against one scripted
Anthropic-compatible server (tests/fake_anthropic.py, `plugin_claude_code`) that answers every
request after a fixed delay. Target: our wall time over theirs <= 0.9.

    python tests/benchmarks/run_benchmarks.py --only 11      # as a target of the benchmark script
    python tests/benchmarks/plugin_speed.py --rounds 5       # alone, more rounds

The two sides run alternately (the order swapped every round, so a drift of the machine's load
falls on both), each a whole process as a user starts it; the ratio is of the medians. Both sides'
documents must agree on every case's passes per arm, or the figure is not reported as a pass."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _path in (str(ROOT), str(ROOT / "tests")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fake_anthropic import ScriptedAnthropic, plugin_claude_code  # noqa: E402

GREETER = ROOT / "tests" / "plugins" / "greeter"
EVALUATOR = ROOT / "evaluator.py"
API_KEY = "sk-ant-benchmark-0000"
DELAY = 0.3  # seconds before the scripted server answers each request (the setting)
RUNS = 3  # per case and arm
CONCURRENCY = 2  # `plugin --concurrency 2` against `claude plugin eval -j 2`
TARGET = 0.9
FIFTH_CASE = {  # added to greeter's four: a question no skill answers (one request a run)
    "prompt.md": "---\nruns: 2\n---\nHow do I brew a good cup of green tea?\n",
    "graders/answers.md": "---\ntype: regex\nmatch: not_contains\nflags: i\n---\nerror\n",
}


def five_case_plugin(work: Path) -> Path:
    """tests/plugins/greeter (four cases) and a fifth case, in the work folder."""
    plugin = work / "greeter"
    shutil.copytree(GREETER, plugin)
    for name, text in FIFTH_CASE.items():
        path = plugin / "evals" / "05-green-tea" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return plugin


@dataclass
class SideRun:
    """One whole run of one side: its wall time, what its children spent of the CPU, the model
    requests it made and when (process start -> first answer, last answer -> exit)."""

    seconds: float
    cpu_seconds: float
    requests: int
    to_first_answer: float
    after_last_answer: float
    passes: dict[tuple[str, str], int]


@dataclass
class _Clock:
    """When the scripted server answered each request (after its delay)."""

    answered: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def responder(self) -> Callable[[dict], dict]:
        def respond(body: dict) -> dict:
            with self.lock:
                self.answered.append(time.perf_counter())
            return plugin_claude_code(body)

        return respond


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}


def ours_command(plugin: Path, url: str, out: Path) -> tuple[list[str], dict[str, str], Path]:
    argv = [
        *(sys.executable, str(EVALUATOR), "plugin", str(plugin), "--base-url", url),
        *("-o", str(out / "ours.json"), "--trust-plugin"),
        *("--concurrency", str(CONCURRENCY), "--runs", str(RUNS)),
    ]
    return argv, {**_clean_env(), "ANTHROPIC_API_KEY": API_KEY}, ROOT


def theirs_command(plugin: Path, url: str, out: Path) -> tuple[list[str], dict[str, str], Path]:
    """As tests/test_plugin_suites.py runs it: trusted, not published, a HOME of its own."""
    home = out / "home"
    home.mkdir()
    claude = ROOT / "node_modules" / ".bin" / "claude"
    argv = [
        *(str(claude), "plugin", "eval", str(plugin), "--json", str(out / "cc.json")),
        *("--trust-plugin", "--no-publish", "--output-dir", str(out / "cc-out")),
        *("-j", str(CONCURRENCY), "--runs", str(RUNS)),
    ]
    env = {
        **_clean_env(),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": API_KEY,
        "HOME": str(home),
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return argv, env, out


def _our_passes(out: Path) -> dict[tuple[str, str], int]:
    document = json.loads((out / "ours.json").read_text())
    passes: dict[tuple[str, str], int] = {}
    for run in document["results"]:
        key = (run["case"], run["arm"])
        passes[key] = passes.get(key, 0) + bool(run["passed"])
    return passes


def _their_passes(out: Path) -> dict[tuple[str, str], int]:
    document = json.loads((out / "cc.json").read_text())
    return {
        (case["name"], arm): sum(bool(run["passed"]) for run in runs)
        for case in document["cases"]
        for arm, runs in case["arms"].items()
    }


SIDES = {
    "plugin": (ours_command, _our_passes),
    "claude plugin eval": (theirs_command, _their_passes),
}


def run_side(name: str, plugin: Path, api: ScriptedAnthropic, clock: _Clock, out: Path) -> SideRun:
    command, passes_of = SIDES[name]
    out.mkdir(parents=True)
    argv, env, cwd = command(plugin, api.url, out)
    clock.answered.clear()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=1800,
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: a case under the threshold (04-yaml-case), on both sides
        raise RuntimeError(
            f"{name} exited {done.returncode}: {(done.stdout + done.stderr)[-3000:]}"
        )
    answered = sorted(clock.answered)
    return SideRun(
        seconds=seconds,
        cpu_seconds=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        requests=len(answered),
        to_first_answer=answered[0] - started if answered else float("nan"),
        after_last_answer=started + seconds - answered[-1] if answered else float("nan"),
        passes=passes_of(out),
    )


def measure_plugin_speed(work: Path, rounds: int = 3, say: Callable[[str], None] = print) -> dict:
    """Both sides `rounds` times, alternately; the outcome as run_benchmarks.Outcome's fields."""
    plugin = five_case_plugin(work)
    say(
        f"a five-case plugin (tests/plugins/greeter + 05-green-tea), both arms, --runs {RUNS} "
        f"(30 runs a side), concurrency {CONCURRENCY} (`plugin --concurrency`, `claude plugin eval "
        f"-j`), scripted server delay {DELAY}s a request; {rounds} alternating rounds, medians; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start"
    )
    clock = _Clock()
    runs: dict[str, list[SideRun]] = {name: [] for name in SIDES}
    with ScriptedAnthropic(responder=clock.responder(), delay=DELAY, record=False) as api:
        for index in range(rounds):
            order = list(SIDES) if index % 2 == 0 else list(reversed(SIDES))
            for name in order:
                run = run_side(name, plugin, api, clock, work / f"round{index}-{name.split()[0]}")
                runs[name].append(run)
                say(
                    f"round {index + 1} {name}: {run.seconds:.2f}s, {run.requests} requests, "
                    f"CPU {run.cpu_seconds:.1f}s, first answer at {run.to_first_answer:.2f}s, "
                    f"exit {run.after_last_answer:.2f}s after the last"
                )
    ours, theirs = runs["plugin"], runs["claude plugin eval"]
    median = {name: statistics.median(r.seconds for r in rs) for name, rs in runs.items()}
    ratio = median["plugin"] / median["claude plugin eval"]
    agree = all(r.passes == theirs[0].passes for r in [*ours, *theirs])
    details = [
        f"{name}: wall " + ", ".join(f"{r.seconds:.2f}" for r in rs) + f" s (median "
        f"{median[name]:.2f}); CPU of its processes median "
        f"{statistics.median(r.cpu_seconds for r in rs):.1f} s; model requests "
        f"{statistics.median(r.requests for r in rs):.0f} (ideal model time at concurrency "
        f"{CONCURRENCY}: {statistics.median(r.requests for r in rs) * DELAY / CONCURRENCY:.1f} s); "
        f"start -> first answer {statistics.median(r.to_first_answer for r in rs):.2f} s, last "
        f"answer -> exit {statistics.median(r.after_last_answer for r in rs):.2f} s"
        for name, rs in runs.items()
    ]
    details.append(
        "passes per case and arm agree on both sides in every round: "
        + ("yes" if agree else f"NO: ours {ours[0].passes}, theirs {theirs[0].passes}")
    )
    return {
        "number": 11,
        "title": "plugin vs claude plugin eval",
        "summary": f"five cases x 2 arms x {RUNS} runs, -j {CONCURRENCY}, {DELAY}s a request: "
        f"plugin {median['plugin']:.2f}s vs claude plugin eval "
        f"{median['claude plugin eval']:.2f}s, ratio {ratio:.2f}",
        "target": f"<= {TARGET} x claude plugin eval's wall time, same passes",
        "passed": ratio <= TARGET and agree,
        "details": details,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="plugin-speed-"))
    try:
        outcome = measure_plugin_speed(
            work, opts.rounds, lambda line: print(f"    {line}", flush=True)
        )
    finally:
        if opts.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"[11] {outcome['title']}: {outcome['summary']} | target {outcome['target']} | "
        f"{'PASS' if outcome['passed'] else 'FAIL'}"
    )
    for line in outcome["details"]:
        print(f"    {line}")
    return 0 if outcome["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
