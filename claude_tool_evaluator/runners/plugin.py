"""The Claude Code runner for whole plugins: each case of a plugin's eval suite run through
`claude -p` in two arms, with the plugin (a copy loaded with --plugin-dir from the run's
temporary HOME) and without, each run graded by the six grader kinds, and what they would cost.

May import: the rooms above the runners, runners.tool_use."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import prompts
import test_constants as C

from ..cache import ResponseCache
from ..claude_code import (
    CachingProxy,
    ClaudeCliSettings,
    RunFolder,
    finish_claude_run,
    project_files,
    run_claude_process,
)
from ..claude_code.stream import StreamReader, claude_run_of, read_output
from ..dry_run import CostEstimate
from ..grading import GRADE_TOOL, JUDGE_TOOL_CHOICE, Judge
from ..loaders.plugin_evals import Plugin, PluginCase
from ..loaders.servers import plugin_server_names
from ..pipeline import AutoRounds, Job
from ..records import cost_usd
from ..scoring.plugin_graders import (
    PluginRunView,
    PluginToolCall,
    grade_run,
    run_score,
)
from ..session import ModelRequest, model_api_url, model_client
from ..sinks import one_line
from .skills import estimate_claude_runs

ARMS = ("with", "without")
AUTO_ARM_THRESHOLD = 0.5  # --runs auto: an arm is decided once its pass rate is clearly on one side
PLUGIN_COPY_IGNORED = shutil.ignore_patterns(".git", "results", "__pycache__")


@dataclass
class PluginRunPlan:
    """What a `plugin` run does: the plugin, which Claude Code and model, runs per case (None:
    each case's own `runs`), the judge, the --cache folder, how many runs at once."""

    plugin: Plugin
    binary: str
    model: str = C.DEFAULT_TRIGGER_MODEL
    base_url: str | None = None
    runs: int | None = None
    judge_model: str = C.DEFAULT_JUDGE_MODEL
    cache: str | None = None
    concurrency: int = 2
    ablation: bool = True
    label: str = ""  # a matrix: which model and Claude Code version its runs are
    auto_least: int | None = None  # --runs auto[:MIN-MAX]: the rounds' MIN (`runs` is then MAX)
    # --distractors installed: the user's other plugins, loaded in both arms beside it
    others: tuple[Path, ...] = ()
    scaffold: bool = False  # --scaffold: each case's scaffold_script runs before each run

    def runs_of(self, case: PluginCase) -> int:
        return self.runs or case.runs

    @property
    def arms(self) -> tuple[str, ...]:
        return ARMS if self.ablation else ("with",)

    def settings(self, case: PluginCase) -> ClaudeCliSettings:
        """A case's `claude -p` settings: its model, turns and timeout; its allowed_tools come
        off the locked-down disallowed list (Bash then runs in Claude Code's sandbox)."""
        allowed = tuple(t for t in case.allowed_tools if t in C.CLAUDE_DISALLOWED_TOOLS)
        return ClaudeCliSettings(
            binary=self.binary,
            model=case.model or self.model,
            max_turns=case.max_turns,
            timeout=float(case.timeout_seconds),
            base_url=self.base_url,
            allow_tools=allowed,
            sandbox="Bash" in allowed,
        )

    def jobs(self) -> list[Job]:
        return [
            Job(
                key=(self.label, case.name, arm, run),
                payload=(case, arm, self.settings(case)),
                case=(case.name, arm),
                iteration=run,
            )
            for case in self.plugin.cases
            for arm in self.arms
            for run in range(1, self.runs_of(case) + 1)
        ]


@dataclass
class PluginArmRun:
    """One run of one case in one arm, graded; its stream events kept (`events`) for the readers
    of subagent delegations and hook firings."""

    case: str
    arm: str
    run: int
    label: str = ""  # a --model / --claude-bin matrix: `model @ version` (else "")
    score: float = 0.0
    passed: bool = False
    graders: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    turns: int | None = None
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    duration_ms: float = 0.0
    tools: list[str] = field(default_factory=list)
    answer: str = ""
    # what the plugin's parts did in the run: the subagents handed a task (`PLUGIN:AGENT`), each
    # hook that ran and what it did (`PreToolUse:Bash blocked: ...`), the MCP tools called
    delegations: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    mcp_calls: list[str] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)

    def as_dict(self, with_events: bool = False) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "events"}
        if with_events:
            data["events"] = self.events
        return data


def install_plugin(source: Path, name: str, home: Path) -> Path:
    """A copy of a plugin folder in the run's temporary HOME (its results and VCS folders left
    out), so nothing the run does reaches the user's folder."""
    target = home / ".claude" / "plugins-under-test" / name
    shutil.copytree(source, target, ignore=PLUGIN_COPY_IGNORED, symlinks=True)
    return target


@functools.lru_cache(maxsize=8)  # read once a suite, not at every run of the arm
def plugin_server_rules(plugin: str, folder: Path) -> tuple[str, ...]:
    """The permission rules that pre-approve the plugin's own MCP servers (`mcp__plugin_P_S`, as
    Claude Code names a plugin's server `plugin:P:S`): in don't-ask mode a tool not pre-approved
    is refused, and the servers a plugin ships are part of what is under test."""
    return tuple(
        "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", f"plugin_{plugin}_{server}")
        for server in plugin_server_names(folder)
    )


SCAFFOLD_SECONDS = 120  # Claude Code kills a scaffold_script after two minutes


async def run_scaffold(case: PluginCase, folder: RunFolder) -> str | None:
    """A case's scaffold_script as `claude plugin eval --scaffold` runs it: `bash SCRIPT` (the
    path from the case's folder) in the run's working folder, with only PATH and the run's
    temporary HOME and TMPDIR, stdout dropped, killed after two minutes. Why it failed (exit
    code and the start of its stderr), or None."""
    script = (case.folder / str(case.scaffold_script)).resolve()
    if not script.is_file():
        return f"scaffold failed: {case.scaffold_script} is not a file in the case's folder"
    home = folder.root / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TMPDIR": str(folder.root)}
    process = await asyncio.create_subprocess_exec(
        "bash",
        str(script),
        cwd=folder.project,
        env={**env, "TERM": "dumb"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), SCAFFOLD_SECONDS)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return f"scaffold failed: still running after {SCAFFOLD_SECONDS} s"
    if process.returncode:
        said = one_line(stderr[:16384].decode("utf-8", "replace"), 500)
        return f"scaffold failed (exit {process.returncode}): {said}"
    return None


def created_files(project: Path, before: set[str]) -> list[str]:
    """The files a run created in its working folder (paths relative to it), as Claude Code's
    `files` target lists them: files that were there before are not listed."""
    return sorted(name for name, _ in project_files(project) if name not in before)


Vote = Callable[[str, int], Any]


def graded_calls_and_text(stream: StreamReader) -> tuple[list[PluginToolCall], str]:
    """What Claude Code's plugin eval grades (2.1.332): every assistant event's tool calls, a
    subagent's too (unlike a skill run's record, which keeps the top level), and the text of
    the last assistant message that has any, its text blocks joined by line breaks."""
    calls = [
        PluginToolCall(
            str(b.get("name") or ""), b["input"] if isinstance(b.get("input"), dict) else {}
        )
        for b in stream.tool_uses
    ]
    return calls, stream.last_message


def ended_ungraded(events: list[dict], start_error: str | None) -> bool:
    """Whether a run scores 0 without grading (Claude Code's rule): it did not start, said
    nothing, or its result event is an API error (`is_error` with an `api_error_status`)."""
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    api_error = bool(
        result and result.get("is_error") and isinstance(result.get("api_error_status"), int)
    )
    return bool(start_error) or not events or api_error


async def run_arm(
    plan: PluginRunPlan,
    case: PluginCase,
    arm: str,
    run: int,
    settings: ClaudeCliSettings,
    vote: Vote,
) -> PluginArmRun:
    """One run of a case in an arm; never raises for a failed, hung or garbled run: that is an
    error on the run. As Claude Code does, a run cut short (its timeout, its turns) is graded on
    what it did; one that never started or ended on an API error scores 0 ungraded."""
    start = time.perf_counter()
    record = PluginArmRun(case.name, arm, run)
    try:
        folder = RunFolder.make()
    except OSError as exc:
        record.error = f"could not start claude: {exc}"
        return record
    try:
        home = folder.root / "home"
        loaded = [  # an install path is often a version (`.../name/1.0.0`): named by place
            install_plugin(other, f"installed-{i}", home) for i, other in enumerate(plan.others, 1)
        ]
        rules: tuple[str, ...] = ()
        if arm == "with":
            loaded.append(install_plugin(plan.plugin.folder, plan.plugin.name, home))
            rules = plugin_server_rules(plan.plugin.name, plan.plugin.folder)
        settings = replace(
            settings,
            plugin_dirs=tuple(str(p) for p in loaded),
            allowed_rules=settings.allowed_rules + rules,
        )
        if plan.scaffold and case.scaffold_script:
            record.error = await run_scaffold(case, folder)
            if record.error:  # as Claude Code: the run scores 0, ungraded
                return record
        before = set(created_files(folder.project, set()))
        done = await run_claude_process(settings, case.prompt, folder)
        stream = read_output(done.stdout)
        events = stream.events
        claude_run = claude_run_of(stream, [], case.prompt, run)
        finish_claude_run(claude_run, done, settings.timeout)
        if done.start_error:
            claude_run.error = done.start_error
        record.events, record.turns = events, claude_run.num_turns
        record.tools, record.answer = list(claude_run.tools), claude_run.answer
        record.delegations = claude_run.delegated_agents
        record.hooks = [f"{h.name} {h.did}" for h in claude_run.hooks]
        record.mcp_calls = [name for name in claude_run.tools if name.startswith("mcp__")]
        record.cost_usd = float(claude_run.total_cost_usd or 0.0)
        record.error = claude_run.error
        if not ended_ungraded(events, done.start_error):
            tool_calls, last_message = graded_calls_and_text(stream)
            view = PluginRunView(
                tool_calls=tool_calls,
                last_message=last_message,
                trace=events,
                created_files=created_files(folder.project, before),
                folder=folder.project,
            )
            verdicts = await grade_run(case, view, arm if plan.ablation else None, vote)
            record.graders = [v.as_dict() for v in verdicts]
            record.score = run_score(verdicts)
            record.passed = record.score >= 1.0
    except OSError as exc:
        record.error = f"could not prepare the run: {exc}"
    finally:
        folder.remove()
    record.duration_ms = round((time.perf_counter() - start) * 1000, 2)
    return record


def needs_judge(plugin: Plugin) -> bool:
    return any(g.kind in ("llm", "baseline") for c in plugin.cases for g in c.graders)


def judge_vote(judge: Judge, spent: list[float]) -> Vote:
    """A judge vote through this product's judge: Claude Code's grading prompt as the criterion,
    the verdict the forced `grade` call's `passed`; each of the 3 votes its own request (the
    judge caches identical requests), its cost added to `spent`."""

    async def vote(prompt: str, index: int) -> bool:
        request = ModelRequest(
            judge.model_id,
            prompts.JUDGE_SYSTEM_PROMPT,
            [{"role": "user", "content": f"{prompt}\n\n(Vote {index + 1} of 3.)"}],
            [GRADE_TOOL],
            C.JUDGE_MAX_TOKENS,
            tool_choice=JUDGE_TOOL_CHOICE,
        )
        grade, usage = await judge.grade_request(request)
        if usage is not None:
            spent.append(cost_usd(usage, judge.model_id))
        return grade.get("passed") is True

    return vote


async def unjudged(prompt: str, index: int) -> bool:
    raise RuntimeError("an llm or baseline grader ran without a judge")


async def in_rounds(
    plan: PluginRunPlan,
    one: Callable[[Job], Awaitable[None]],
    results: list[PluginArmRun],
    finished: set[tuple],
) -> None:
    """--runs auto: the pipeline's rounds (AutoRounds), each arm of each case a case of its own:
    MIN runs first, then one more at a time until the arm's pass rate is clearly above or below
    one half (its 95 % interval), or MAX runs. Runs kept by --resume count as done."""
    jobs = plan.jobs()
    rounds = AutoRounds(
        [j for j in jobs if j.key not in finished], plan.auto_least or 1, AUTO_ARM_THRESHOLD
    )
    by_key = {j.key: j for j in jobs}
    for record in results:
        job = by_key.get((record.label, record.case, record.arm, record.run))
        if job is not None:
            rounds.kept(job, record.passed)
    while batch := rounds.next_round():
        before = len(results)
        await asyncio.gather(*(one(job) for job in batch))
        for record in results[before:]:
            rounds.finished(
                by_key[(record.label, record.case, record.arm, record.run)], record.passed
            )
        if len(results) == before:  # --max-cost: nothing ran
            return


async def run_plugin_suite(
    plan: PluginRunPlan,
    on_result: Callable[[PluginArmRun], None],
    done_before: Sequence[PluginArmRun] = (),
    max_cost: float | None = None,
) -> list[PluginArmRun]:
    """Every job of the plan not already in `done_before` (--resume), `concurrency` at a time,
    each result handed to `on_result` as it completes; once --max-cost is reached no run starts."""
    finished = {(r.label, r.case, r.arm, r.run) for r in done_before}
    results: list[PluginArmRun] = [r for r in done_before if r.label == plan.label]
    spent = [sum(r.cost_usd + r.judge_cost_usd for r in done_before)]
    gate = asyncio.Semaphore(max(1, plan.concurrency))
    proxy = (
        CachingProxy(ResponseCache.open(plan.cache), model_api_url(plan.base_url))
        if plan.cache
        else None
    )
    judge_client = (
        model_client(plan.cache, base_url=plan.base_url) if needs_judge(plan.plugin) else None
    )
    judge = Judge(judge_client, plan.judge_model) if judge_client is not None else None

    async def one(job: Job) -> None:
        case, arm, settings = job.payload
        async with gate:
            if max_cost is not None and spent[0] >= max_cost:
                return
            if proxy is not None:  # --cache: as the skills' runs, each run its own sample
                settings = replace(settings, base_url=f"{proxy.url}/sample/{job.iteration}")
            judge_spent: list[float] = []
            vote = judge_vote(judge, judge_spent) if judge is not None else unjudged
            record = await run_arm(plan, case, arm, job.iteration, settings, vote)
            record.label = plan.label
            record.judge_cost_usd = round(sum(judge_spent), 6)
            spent[0] += record.cost_usd + record.judge_cost_usd
            results.append(record)
            on_result(record)

    try:
        if proxy is not None:
            proxy.__enter__()
        if plan.auto_least is None:
            await asyncio.gather(*(one(j) for j in plan.jobs() if j.key not in finished))
        else:
            await in_rounds(plan, one, results, finished)
    finally:
        if judge_client is not None:
            await judge_client.close()
        if proxy is not None:
            proxy.__exit__(None, None, None)
    order = {job.key: i for i, job in enumerate(plan.jobs())}
    return sorted(results, key=lambda r: order.get((r.label, r.case, r.arm, r.run), len(order)))


def estimate_plugin_runs(plan: PluginRunPlan) -> CostEstimate:
    """--dry-run: every run priced as a `claude -p` run of its case's max_turns."""
    return estimate_claude_runs(plan.jobs())
