"""The Claude Code runner for whole plugins: each case of a plugin's eval suite run through
`claude -p` in two arms, with the plugin (a copy loaded with --plugin-dir from the run's
temporary HOME) and without, each run graded by the six grader kinds. A Runner of the pipeline
(its journal, --resume, --retry-errors, --shard, -i auto's rounds, --max-cost, Ctrl-C): its
records are PluginRunResult.

May import: the rooms above the runners, runners.tool_use."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import prompts
import test_constants as C

from ..cache import CACHE_SAMPLE, ResponseCache
from ..claude_code import (
    CachingProxy,
    ClaudeCliSettings,
    RunFolder,
    confined_command,
    confinement_hidden,
    finish_claude_run,
    project_files,
    run_claude_process,
)
from ..claude_code.process import tool_grants
from ..claude_code.stream import StreamReader, claude_run_of, read_output
from ..dry_run import CostEstimate
from ..errors import InputError
from ..files import folder_digest
from ..grading import GRADE_TOOL, JUDGE_TOOL_CHOICE, Judge
from ..hub.mocks import MockCalls, MockedServer
from ..hub.served import remote_entry, served_over_http
from ..loaders.plugin_evals import Plugin, PluginCase, plugin_name_of
from ..loaders.servers import plugin_server_names
from ..pipeline import Job
from ..redaction import Redactor
from ..results_schema.document import (
    PluginGraderVerdictRecord,
    PluginRunResult,
    RunResult,
    VerdictRecord,
)
from ..run_types import ServerSpec, cost_usd
from ..scoring.plugin_graders import (
    PluginRunView,
    PluginToolCall,
    grade_run,
    run_score,
)
from ..session import ModelRequest, model_api_url, model_client
from ..sinks import one_line
from .baseline_reuse import BaselineReuse
from .plugin_recording import MockRecording
from .skills import estimate_claude_runs

__all__ = [
    "ARMS",
    "PluginRunPlan",
    "PluginRunner",
    "graded_calls_and_text",
]

ARMS = ("with", "without")
_AUTO_ARM_THRESHOLD = (
    0.5  # --runs auto: an arm is decided once its pass rate is clearly on one side
)
_PLUGIN_COPY_IGNORED = shutil.ignore_patterns(".git", "results", "__pycache__")


@dataclass
class PluginRunPlan:
    """One configuration of a `plugin` run: the plugin, which Claude Code and model, runs per
    case (None: each case's own `runs`), the arms, and what the runs load beside it."""

    plugin: Plugin
    binary: str
    model: str
    runs: int | None = None
    ablation: bool = True
    label: str = ""  # a matrix: which model and Claude Code version its runs are
    version: str | None = None  # the Claude Code version (a matrix's, or the one run's)
    base_url: str | None = None
    # --distractors installed: the user's other plugins, loaded in both arms beside it
    others: tuple[Path, ...] = ()
    scaffold: bool = False  # --scaffold: each case's scaffold_script runs before each run
    confine: bool = True  # claude -p in bubblewrap (not with --unconfined)
    allow_read: tuple[str, ...] = ()  # --allow-read: what of the hidden home it may read
    allow_tools: tuple[str, ...] = ()  # --allow-tools: the operator's grant (Claude Code's syntax)
    mocks: str = C.DEFAULT_MOCKS  # --mocks record|off
    allow_real_servers: bool = False  # --allow-real-servers: unmocked servers start under record
    disallow_tools: tuple[str, ...] = ()  # --disallow-tools: kept away in every case
    recording: MockRecording | None = None  # --record-mocks: the real servers, recorded
    fingerprints: dict[tuple[str, str], str] = field(default_factory=dict)
    digests: dict[Path, str] = field(default_factory=dict)

    def runs_of(self, case: PluginCase) -> int:
        return self.runs or case.runs

    def digest(self, folder: Path) -> str:
        """A loaded plugin's digest, read once for every case that loads it."""
        if folder not in self.digests:
            self.digests[folder] = folder_digest(folder)
        return self.digests[folder]

    @property
    def arms(self) -> tuple[str, ...]:
        return ARMS if self.ablation else ("with",)

    def settings(self, case: PluginCase) -> ClaudeCliSettings:
        """A case's `claude -p` settings as `claude plugin eval` (2.1.332) makes them: its model,
        turns and timeout; don't-ask mode, the case's allowed_tools and the operator's grants
        pre-approved (a Skill the case lists runs), a locked-down tool they name off the
        disallowed list (Bash then runs in Claude Code's sandbox; named with a pattern, only the
        pattern is approved), and --disallow-tools with the case's disallowed_tools kept away."""
        grants = tool_grants([*case.allowed_tools, *self.allow_tools])
        kept_away = tool_grants([*self.disallow_tools, *case.disallowed_tools])
        granted = [g for g in grants if g not in kept_away]
        whole = tuple(t for t in granted if t in C.CLAUDE_DISALLOWED_TOOLS)
        patterned = tuple(
            dict.fromkeys(
                base
                for t in granted
                if (base := t.split("(")[0]) in C.CLAUDE_DISALLOWED_TOOLS and base != t
            )
        )
        return ClaudeCliSettings(
            binary=self.binary,
            model=case.model or self.model,
            max_turns=case.max_turns,
            timeout=float(case.timeout_seconds),
            base_url=self.base_url,
            allow_tools=whole,
            sandbox="Bash" in whole or "Bash" in patterned,
            allowed_rules=tuple(t for t in granted if t not in whole),
            ungated=tuple(t for t in patterned if t not in kept_away),
            disallowed_rules=tuple(t for t in kept_away if t not in C.CLAUDE_DISALLOWED_TOOLS),
            allow_read=self.allow_read,
            confine=self.confine,
        )

    def fingerprint(self, case: PluginCase, arm: str) -> str:
        """What makes a run of the case in the arm reusable (--resume, --merge): the case's files
        (prompt, graders, baseline, scaffold), the plugin's files in the arm with it, the other
        plugins loaded beside it, and whether graders are judged under ablation and scaffolds run."""
        key = (case.name, arm)
        if key not in self.fingerprints:
            parts = [
                case.name,
                folder_digest(case.folder),
                arm,
                self.ablation,
                self.scaffold and bool(case.scaffold_script),
                [self.digest(p) for p in case.plugins] if arm == "with" else "",
                [self.digest(p) for p in self.others],
                self.allow_tools,
                self.disallow_tools,
            ]
            self.fingerprints[key] = hashlib.sha256(
                json.dumps(parts, default=str).encode()
            ).hexdigest()[:16]
        return self.fingerprints[key]

    def jobs(self) -> Iterator[Job]:
        """Per case, arm and run; the configuration (model, label) and the fingerprint are part
        of the key, the case, arm, run and label of what names it for --shard."""
        for case in self.plugin.cases:
            settings = self.settings(case)
            for arm in self.arms:
                fingerprint = self.fingerprint(case, arm)
                for run in range(1, self.runs_of(case) + 1):
                    yield Job(
                        key=(self.label, self.model, case.name, arm, run, fingerprint),
                        payload=(case, arm, settings, self),
                        identity=(case.name, arm, run, self.label or self.model),
                        case=(self.label, self.model, case.name, arm),
                        iteration=run,
                    )


def _install_plugin(source: Path, name: str, home: Path) -> Path:
    """A copy of a plugin folder in the run's temporary HOME (its results and VCS folders left
    out), so nothing the run does reaches the user's folder."""
    target = home / ".claude" / "plugins-under-test" / name
    shutil.copytree(source, target, ignore=_PLUGIN_COPY_IGNORED, symlinks=True)
    return target


def _server_rule(plugin: str, server: str) -> str:
    """The permission rule of one plugin server's tools: Claude Code names a plugin's server
    `plugin:P:S`, its tools `mcp__plugin_P_S__TOOL`."""
    return "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", f"plugin_{plugin}_{server}")


def _keep_servers(copy: Path, keep: set[str]) -> None:
    """The plugin copy's MCP servers cut down to `keep` (in its `.mcp.json`, or its manifest's
    `mcpServers`, inline or a file), so Claude Code never starts the others."""
    manifest_path = copy / ".claude-plugin" / "plugin.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    declared = manifest.get("mcpServers") if isinstance(manifest, dict) else None
    if isinstance(declared, dict):
        manifest["mcpServers"] = {k: v for k, v in declared.items() if k in keep}
        manifest_path.write_text(json.dumps(manifest))
        return
    source = copy / declared if isinstance(declared, str) else copy / ".mcp.json"
    if not source.is_file() or not source.resolve().is_relative_to(copy.resolve()):
        return
    data = json.loads(source.read_text())
    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
        data["mcpServers"] = {k: v for k, v in data["mcpServers"].items() if k in keep}
    elif isinstance(data, dict):
        data = {k: v for k, v in data.items() if k in keep}
    source.write_text(json.dumps(data))


@dataclass
class _StandIns:
    """A run's mocks (--mocks record, as claude plugin eval 2.1.332): each plugin server with a
    mock is served in-process under the plugin's server name and pre-approved; a server without
    one is not started unless --allow-real-servers; the calls counted."""

    calls: MockCalls = field(default_factory=MockCalls)
    log: list[dict] = field(default_factory=list)
    servers: list[tuple[str, MockedServer]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    recorders: dict[str, ServerSpec] = field(default_factory=dict)  # --record-mocks, by name

    def arrange(
        self, plan: PluginRunPlan, case: PluginCase, name: str, source: Path, copy: Path
    ) -> tuple[str, ...]:
        """What runs of the plugin's servers; the rules that pre-approve their tools."""
        servers = plugin_server_names(source)
        if plan.recording is not None:
            return self._recorded(plan.recording, name, source, copy, servers)
        if plan.mocks == "off":
            return tuple(_server_rule(name, s) for s in servers)
        mocked = [s for s in servers if s in case.mocks]
        real = [s for s in servers if s not in case.mocks and plan.allow_real_servers]
        if len(real) < len(servers):  # a mocked or unmocked server never starts for real
            _keep_servers(copy, set(real))
        for server in mocked:
            self.servers.append(
                (
                    _server_rule(name, server)[5:],
                    MockedServer(case.mocks[server], self.calls, self.log),
                )
            )
            self.warnings += case.mocks[server].warnings
        return tuple(_server_rule(name, s) for s in (*mocked, *real))

    def _recorded(
        self, recording: MockRecording, name: str, source: Path, copy: Path, servers: list[str]
    ) -> tuple[str, ...]:
        """--record-mocks: every server of the plugin reached through its recorder (the real
        process is the suite's, started once: the run's Claude Code starts none), pre-approved."""
        _keep_servers(copy, set())
        for server, spec in recording.servers_of(source).items():
            self.recorders[_server_rule(name, server)[5:]] = spec
        return tuple(_server_rule(name, s) for s in servers)

    @contextlib.asynccontextmanager
    async def served(self, root: Path) -> AsyncIterator[Path | None]:
        """The mocks at loopback URLs while the run lasts, in an MCP config for `claude -p`."""
        if not self.servers and not self.recorders:
            yield None
            return
        async with served_over_http([m.spec(n) for n, m in self.servers]) as reachable:
            entries = {s.name: remote_entry(s) for s in reachable}
            entries.update({n: remote_entry(s) for n, s in self.recorders.items()})
            config = root / "mocks.json"
            config.write_text(json.dumps({"mcpServers": entries}))
            yield config

    def record(self) -> dict[str, Any] | None:
        if not self.servers:
            return None
        return {
            "servers": [m.describe() for _, m in self.servers],
            "warnings": list(self.warnings),
            "calls": self.calls.record(),
        }


_SCAFFOLD_SECONDS = 120  # Claude Code kills a scaffold_script after two minutes


async def _run_scaffold(
    case: PluginCase, folder: RunFolder, confine: bool, allow_read: Sequence[str]
) -> str | None:
    """A case's scaffold_script as `claude plugin eval --scaffold` runs it: `bash SCRIPT` (the
    path from the case's folder) in the run's working folder, with only PATH and the run's
    temporary HOME and TMPDIR, stdout dropped, killed after two minutes; confined as the run's
    `claude -p` is (the script's folder bound back read-only). Why it failed (exit code and the
    start of its stderr), or None."""
    script = (case.folder / str(case.scaffold_script)).resolve()
    if not script.is_file():
        return f"scaffold failed: {case.scaffold_script} is not a file in the case's folder"
    home = folder.root / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TMPDIR": str(folder.root)}
    command = ["bash", str(script)]
    if confine:
        command = confined_command(command, folder.root, allow_read, [str(script.parent)])
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=folder.project,
        env={**env, "TERM": "dumb"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), _SCAFFOLD_SECONDS)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return f"scaffold failed: still running after {_SCAFFOLD_SECONDS} s"
    if process.returncode:
        said = one_line(stderr[:16384].decode("utf-8", "replace"), 500)
        return f"scaffold failed (exit {process.returncode}): {said}"
    return None


_PATH_IN_TEXT = re.compile(r"/[^\s:'\"`]+")
_UNREACHABLE = ("No such file or directory", "Permission denied", "Read-only file system")


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _confinement_notes(events: list[dict], run_root: Path) -> list[str]:
    """What the confinement kept from the plugin's hooks, as their own output says it: a line of
    a hook's stderr or stdout that fails on a path the confined run cannot see (the user's home,
    the temporary folder beyond the run's own) — `hook UserPromptSubmit could not reach
    /home/u/.ssh/id_rsa (hidden by the confinement): cat: ...: No such file or directory`. A
    hook that fails silently leaves nothing to report."""
    hidden, root = confinement_hidden(), run_root.resolve()
    notes = []
    for event in events:
        if event.get("type") != "system" or event.get("subtype") != "hook_response":
            continue
        name = str(event.get("hook_name") or event.get("hook_event") or "hook")
        said = f"{event.get('stderr') or ''}\n{event.get('stdout') or ''}"
        for line in (li for li in said.splitlines() if any(u in li for u in _UNREACHABLE)):
            for path in map(Path, _PATH_IN_TEXT.findall(line)):
                if any(_within(path, h) for h in hidden) and not _within(path, root):
                    notes.append(
                        f"hook {name} could not reach {path} (hidden by the confinement): "
                        + one_line(line, 200)
                    )
    return list(dict.fromkeys(notes))


def _created_files(project: Path, before: set[str]) -> list[str]:
    """The files a run created in its working folder (paths relative to it), as Claude Code's
    `files` target lists them: files that were there before are not listed."""
    return sorted(name for name, _ in project_files(project) if name not in before)


_Vote = Callable[[str, int], Any]


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


def _ended_ungraded(events: list[dict], start_error: str | None) -> bool:
    """Whether a run scores 0 without grading (Claude Code's rule): it did not start, said
    nothing, or its result event is an API error (`is_error` with an `api_error_status`)."""
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    api_error = bool(
        result and result.get("is_error") and isinstance(result.get("api_error_status"), int)
    )
    return bool(start_error) or not events or api_error


def _needs_judge(plugin: Plugin) -> bool:
    return any(g.kind in ("llm", "baseline") for c in plugin.cases for g in c.graders)


def _judge_vote(judge: Judge, spent: list[float]) -> _Vote:
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


async def _unjudged(prompt: str, index: int) -> bool:
    raise RuntimeError("an llm or baseline grader ran without a judge")


def _plan_record(plan: PluginRunPlan, case: PluginCase, arm: str, run: int) -> PluginRunResult:
    """A run's record before it runs: what names it (its configuration and fingerprint too)."""
    return PluginRunResult(
        case=case.name,
        arm=arm,
        run=run,
        model=plan.model,
        label=plan.label,
        claude_version=plan.version,
        query=case.prompt,
        fingerprint=plan.fingerprint(case, arm),
    )


async def _run_arm(
    plan: PluginRunPlan,
    case: PluginCase,
    arm: str,
    run: int,
    settings: ClaudeCliSettings,
    vote: _Vote,
    discard: Callable[[RunFolder], None] = RunFolder.remove,
) -> PluginRunResult:
    """One run of a case in an arm; never raises for a failed, hung or garbled run: that is an
    error on the run. As Claude Code does, a run cut short (its timeout, its turns) is graded on
    what it did; one that never started or ended on an API error scores 0 ungraded. Its folder
    goes to `discard` once nothing reads it (the runner's _FolderSweeper: off the run's slot)."""
    start = time.perf_counter()
    record = _plan_record(plan, case, arm, run)
    try:
        folder = RunFolder.make()
    except OSError as exc:
        record.error = f"could not start claude: {exc}"
        return record
    try:
        home = folder.root / "home"
        loaded = [  # an install path is often a version (`.../name/1.0.0`): named by place
            _install_plugin(other, f"installed-{i}", home) for i, other in enumerate(plan.others, 1)
        ]
        rules: tuple[str, ...] = ()
        stand_ins = _StandIns()
        if arm == "with":
            for folder_of_plugin in case.plugins:
                name = plugin_name_of(folder_of_plugin)
                copy = _install_plugin(folder_of_plugin, name, home)
                loaded.append(copy)
                rules += stand_ins.arrange(plan, case, name, folder_of_plugin, copy)
            record.plugins = [str(p) for p in case.plugins]
        settings = replace(
            settings,
            plugin_dirs=tuple(str(p) for p in loaded),
            allowed_rules=settings.allowed_rules + rules,
        )
        if plan.scaffold and case.scaffold_script:
            record.error = await _run_scaffold(case, folder, plan.confine, plan.allow_read)
            if record.error:  # as Claude Code: the run scores 0, ungraded
                return record
        before = set(_created_files(folder.project, set()))
        async with stand_ins.served(folder.root) as mcp_config:
            if mcp_config is not None:
                settings = replace(settings, mcp_config=str(mcp_config))
            done = await run_claude_process(settings, case.prompt, folder)
        record.mocks = stand_ins.record()
        stream = read_output(done.stdout)
        events = stream.events
        claude_run = claude_run_of(stream, [], case.prompt, run)
        finish_claude_run(claude_run, done, settings.timeout)
        if done.start_error:
            claude_run.error = done.start_error
        record.events, record.turns = events, claude_run.num_turns
        record.tools, record.answer = list(claude_run.tools), claude_run.answer
        record.usage = dict(claude_run.usage)
        record.delegations = claude_run.delegated_agents
        record.hooks = [f"{h.name} {h.did}" for h in claude_run.hooks]
        record.mcp_calls = [name for name in claude_run.tools if name.startswith("mcp__")]
        if settings.confine:
            record.confinement = _confinement_notes(events, folder.root)
        record.cost_usd = float(claude_run.total_cost_usd or 0.0)
        record.error = claude_run.error
        if not _ended_ungraded(events, done.start_error):
            tool_calls, last_message = graded_calls_and_text(stream)
            view = PluginRunView(
                tool_calls=tool_calls,
                last_message=last_message,
                trace=events,
                created_files=_created_files(folder.project, before),
                folder=folder.project,
                mock_calls=stand_ins.log if stand_ins.servers else None,
            )
            verdicts = await grade_run(case, view, arm if plan.ablation else None, vote)
            record.graders = [
                PluginGraderVerdictRecord(
                    name=v.name,
                    passed=v.passed,
                    weight=v.weight,
                    explanation=v.explanation,
                    with_only=v.with_only,
                    scored=v.scored,
                    judge_votes=v.votes or None,
                )
                for v in verdicts
            ]
            record.score = run_score(verdicts)
            record.passed = record.score >= 1.0
    except OSError as exc:
        record.error = f"could not prepare the run: {exc}"
    finally:
        discard(folder)
        record.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    return record


@dataclass
class _FolderSweeper:
    """Run folders removed in a worker thread once their run is read, so the run's slot goes to
    the next run at once instead of waiting on the delete of Claude Code's files and the plugin
    copy (tens of milliseconds a run, more under load); the session waits for every removal
    before it ends, and a folder a killed evaluator left is removed by the next one
    (remove_stale_run_folders)."""

    pending: set[asyncio.Future] = field(default_factory=set)

    def discard(self, folder: RunFolder) -> None:
        removal = asyncio.get_running_loop().run_in_executor(None, folder.remove)
        self.pending.add(removal)
        removal.add_done_callback(self.pending.discard)

    async def wait(self) -> None:
        while self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)


def _run_verdict(record: PluginRunResult) -> VerdictRecord:
    """A run's verdict as the writers read it: passed at a score of 1; its error, else the scored
    graders it failed, as reasons."""
    reasons = (
        [record.error]
        if record.error
        else [f"{g.name}: {g.explanation}" for g in record.graders if g.scored and not g.passed]
    )
    return VerdictRecord(passed=record.passed, reasons=reasons)


@contextlib.asynccontextmanager
async def _recordings(plans: Sequence[PluginRunPlan]) -> AsyncIterator[None]:
    """--record-mocks: the real servers every plan records, running for the whole suite."""
    recordings = {id(p.recording): p.recording for p in plans if p.recording is not None}
    async with contextlib.AsyncExitStack() as stack:
        for recording in recordings.values():  # the plans of a matrix share one
            await stack.enter_async_context(recording.session())
        yield


class PluginRunner:
    """The pipeline's runner of a plugin's suite: every configuration's jobs (PluginRunPlan), one
    `claude -p` run each, `concurrency` at once; --cache puts a caching proxy between Claude Code
    and the model, and the judge of llm and baseline graders reads through it too."""

    auto_threshold = _AUTO_ARM_THRESHOLD  # --runs auto: each arm decided around one half

    def __init__(
        self,
        plans: Sequence[PluginRunPlan],
        concurrency: int,
        judge_model: str,
        cache: str | None = None,
        keep_events: bool = False,
        redactor: Redactor | None = None,
        reuse: BaselineReuse | None = None,
    ) -> None:
        self.plans, self.concurrency, self.judge_model = list(plans), concurrency, judge_model
        self.reuse = reuse  # the arm without the plugin: reused when its key is unchanged
        self.cache, self.keep_events = cache, keep_events
        self.redactor = redactor or Redactor.for_run()
        self.judge: Judge | None = None
        self.proxy: CachingProxy | None = None
        self.in_flight: dict[tuple, Job] = {}  # what a stop signal cuts short (see under_way)
        self.sweeper = _FolderSweeper()

    def jobs(self) -> Iterator[Job]:
        for plan in self.plans:
            yield from plan.jobs()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """--cache's proxy, and the judge when a grader needs one, for the whole suite."""
        base_url = self.plans[0].base_url if self.plans else None
        proxy = (
            CachingProxy(ResponseCache.open(self.cache), model_api_url(base_url))
            if self.cache
            else None
        )
        plugin = self.plans[0].plugin if self.plans else None
        client = (
            model_client(self.cache, base_url=base_url)
            if plugin is not None and _needs_judge(plugin)
            else None
        )
        try:
            if proxy is not None:
                self.proxy = proxy.__enter__()
            if client is not None:
                self.judge = Judge(client, self.judge_model)
            async with _recordings(self.plans):
                yield
        finally:
            await self.sweeper.wait()
            if client is not None:
                await client.close()
            self.judge = None
            if proxy is not None:
                proxy.__exit__(None, None, None)
                self.proxy = None

    async def run(self, job: Job) -> PluginRunResult:
        case, arm, settings, plan = job.payload
        if self.proxy is not None:  # --cache: as the skills' runs, each run its own sample
            settings = replace(settings, base_url=f"{self.proxy.url}/sample/{job.iteration}")
        CACHE_SAMPLE.set(str(job.iteration))  # the judge's calls of this run: its sample
        spent: list[float] = []
        vote = _judge_vote(self.judge, spent) if self.judge is not None else _unjudged
        self.in_flight[job.key] = job
        try:
            record = await _run_arm(
                plan, case, arm, job.iteration, settings, vote, self.sweeper.discard
            )
        finally:
            self.in_flight.pop(job.key, None)
        record.judge_cost_usd = round(sum(spent), 6)
        if self.reuse is not None:
            self.reuse.made(plan, case, record)
        return record

    def reused(self, job: Job) -> PluginRunResult | None:
        """The pipeline's question before it runs a job: a run made earlier under the same key
        (the arm without the plugin, runners.baseline_reuse), or None."""
        return self.reuse.reused(job) if self.reuse is not None else None

    def cost(self, record: PluginRunResult) -> float:
        return record.cost_usd + record.judge_cost_usd

    def to_result(self, record: PluginRunResult) -> PluginRunResult:
        """The run as the results keep it: its verdict, its events only with --keep-events."""
        return record.model_copy(
            update={
                "verdict": _run_verdict(record),
                "events": record.events if self.keep_events else None,
            }
        )

    def result_key(self, result: RunResult) -> tuple:
        if not isinstance(result, PluginRunResult):
            return ("foreign",)
        return (result.label, result.model, result.case, result.arm, result.run, result.fingerprint)

    def from_result(self, job: Job, result: RunResult, scored: bool = False) -> PluginRunResult:
        if not isinstance(result, PluginRunResult):  # result_key keeps other kinds apart
            raise InputError(
                f"{job.key[2]!r}: the earlier result is not a plugin run", hint="choose another -o"
            )
        return result

    def under_way(self) -> list[tuple[tuple, PluginRunResult]]:
        """The runs a stop signal cut short, each an `interrupted` run (--resume runs it again)."""
        cut = []
        for key, job in self.in_flight.items():
            case, arm, _, plan = job.payload
            record = _plan_record(plan, case, arm, job.iteration)
            record.error = "interrupted"
            cut.append((key, record))
        return cut

    async def estimate(self, jobs: Sequence[Job]) -> CostEstimate:
        """--dry-run: every run priced as a `claude -p` run of its case's max_turns."""
        return estimate_claude_runs(jobs)
