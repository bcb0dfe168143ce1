"""The tool-use runner: a suite's cases through the conversation engine against the hub, and
what a run of it would cost.

May import: the rooms above the runners."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console

import prompts
import test_constants as C

from ..batches import BatchedModel, BatchLedger, RunNotStarted
from ..cache import CACHE_SAMPLE, ResponseCache
from ..dry_run import CostEstimate, call_cost, combined_estimate, expected_calls
from ..engine import ConversationObserver, run_conversation
from ..errors import InputError
from ..files import batch_ledger_path, check_writable_folder
from ..grading import Judge, judge_estimate, needs_judge, run_verify
from ..hub.calls import Cassette, CassetteRecorder, McpHub, RunTools, ToolPolicy, load_mock_tools
from ..hub.hostile import forwarding_servers
from ..hub.pins import check_pins, definition_sha256, tool_definition
from ..loaders.csv_suites import case_tool_view, load_tool_overrides
from ..pipeline import Job
from ..redaction import Redactor, environment_without_credentials
from ..results_schema.document import (
    ToolRunResult,
    earlier_tool_definitions,
    tool_run_result,
    transcript_from_result,
)
from ..run_types import case_hash, estimated_tokens
from ..session import AnthropicModel, api_key_from_env, model_api_url, model_client
from ..settings import ClaudeCode, Grading, ModelApi, Pins, RunPlan, Servers, ToolSafety
from ..sinks import escape_markup
from .claude_harness import (
    HARNESS_CLAUDE_CODE,
    ClaudeHarness,
    arm_model,
    arms_of,
    check_cases,
)

__all__ = [
    "RedactingObserver",
    "StartedTranscripts",
    "ToolUseRunner",
    "count_prefix_tokens",
    "estimate_tool_runs",
    "tool_policy_for",
]

if TYPE_CHECKING:
    from ..batches import BatchRun
    from ..engine import UserInput
    from ..hub.hostile import AttackState
    from ..hub.tools import ToolSpec
    from ..results_schema.document import RunResult
    from ..results_schema.security import PinRecord
    from ..run_types import RunSettings, ServerSpec, TestCase, ToolCall, Transcript, Verdict
    from ..scoring.suites import ToolCheckScoring
    from ..session import CachedModel, ModelClient


def estimate_tool_runs(
    jobs: Sequence[Job],
    run_settings: RunSettings,
    prefix_tokens: int,
    counted: bool,
    tool_count: int,
    judge_model: str = C.DEFAULT_JUDGE_MODEL,
) -> CostEstimate:
    model, max_turns = run_settings.model, run_settings.max_turns
    expected = maximum = 0.0
    calls_expected = calls_max = 0
    for index, job in enumerate(jobs):
        case = job.payload[0]
        prompt = estimated_tokens(case.prompt) + sum(
            estimated_tokens(m.content) for m in case.history
        )
        for turn in range(max_turns):
            cost = call_cost(model, prefix_tokens, prompt, turn, index == 0 and turn == 0)
            maximum += cost
            expected += cost if turn < expected_calls(case) else 0.0
        calls_expected += min(expected_calls(case), max_turns)
        calls_max += max_turns
    judged = [job.payload[0] for job in jobs if needs_judge(job.payload[0])]
    for case in judged:  # one judge call per run of a case with a rubric or a `judge` answer match
        cost = judge_estimate(case, judge_model)
        expected, maximum = expected + cost, maximum + cost
    calls_expected, calls_max = calls_expected + len(judged), calls_max + len(judged)
    how = "counted by the API" if counted else "estimated locally (no token counter reachable)"
    detail = (
        f"tools: {tool_count} · system prompt + tool definitions: {prefix_tokens:,} tokens ({how}), "
        f"cached after the first call"
        + (f" · judge: {len(judged)} call(s) on {judge_model}" if judged else "")
    )
    return CostEstimate(len(jobs), model, calls_expected, calls_max, expected, maximum, detail)


# ---------------------------------------------------------------------------- the tool-use runner
def _check_cassette_folder(folder: Path, create: bool = True) -> None:
    """--record DIR: a folder (made if missing, its parent must exist) that takes new files."""
    if folder.exists() and not folder.is_dir():
        raise InputError(
            "--record takes a folder, and this is a file",
            folder,
            None,
            "give a folder, e.g. cassettes/",
        )
    if not folder.exists():
        if not folder.parent.is_dir():
            raise InputError(
                f"--record {folder}: the folder {folder.parent} does not exist",
                hint="create it first",
            )
        if not create:
            return
        try:
            folder.mkdir()
        except OSError as exc:
            raise InputError(
                f"--record {folder}: cannot create it: {exc.strerror or exc}"
            ) from None
    check_writable_folder("--record", folder, folder)


def tool_policy_for(
    safety: ToolSafety,
    redactor: Redactor | None = None,
    *,
    servers_named: bool = True,
    dry_run: bool = False,
) -> ToolPolicy:
    """--tool-policy, --allow-tool, --mock-tools, --replay, --replay-miss and --record, each file
    and folder checked before any server starts (one line naming it, exit 2). `servers_named`:
    whether any server is named (a --replay-miss live needs one)."""
    if safety.record:
        _check_cassette_folder(Path(safety.record), create=not dry_run)
    if safety.replay and safety.replay_miss == "live" and not servers_named:
        raise InputError(
            "--replay-miss live calls the real server on a miss, and no server is named",
            hint="name it with --server, --mcp-config, --server-module or --server-url",
        )
    return ToolPolicy(
        policy=safety.tool_policy,
        allow=tuple(safety.allow_tool),
        mocks=load_mock_tools(safety.mock_tools) if safety.mock_tools else {},
        mock_file=safety.mock_tools,
        replay=Cassette(safety.replay) if safety.replay else None,
        replay_miss=safety.replay_miss,
        redactor=redactor,
        recorder=CassetteRecorder(safety.record, redactor)
        if safety.record and not dry_run
        else None,
    )


def _check_tool_policy(hub: McpHub, policy: ToolPolicy) -> None:
    """After the servers (or the cassette) listed their tools, before the first model call: every
    mocked tool exists, and --allow-tool names at least one."""
    unknown = policy.unknown_mocks(hub.tools)
    if unknown:
        raise InputError(
            f"mocks {unknown[0]!r}, which no server offers",
            policy.mock_file,
            None,
            "tools: " + ", ".join(hub.tool_names()),
        )
    for pattern in policy.allow:
        if not any(
            fnmatch.fnmatchcase(n, pattern)
            for t in hub.tools.values()
            for n in (t.name, t.remote_name)
        ):
            raise InputError(
                f"--allow-tool {pattern} matches no tool",
                hint="tools: " + ", ".join(hub.tool_names()),
            )


class StartedTranscripts(ConversationObserver):
    """The conversations under way: what a run interrupted by Ctrl-C adds to the finished ones
    (the engine marks them `ended_by: error`, "interrupted"). Finished ones are let go, so a
    long suite does not keep every transcript alive here."""

    def __init__(self) -> None:
        self.under_way: dict[int, Transcript] = {}

    @property
    def transcripts(self) -> list[Transcript]:
        return list(self.under_way.values())

    def on_start(self, transcript: Transcript) -> None:
        self.under_way[id(transcript)] = transcript

    def done(self, transcript: Transcript) -> None:
        self.under_way.pop(id(transcript), None)


class RedactingObserver(ConversationObserver):
    """Shows a live conversation without its secrets (the model still sees the real values)."""

    def __init__(self, inner: ConversationObserver, redactor: Redactor) -> None:
        self.inner, self.redactor = inner, redactor

    def on_start(self, transcript: Transcript) -> None:
        self.inner.on_start(transcript)

    def on_user(self, text: str, simulated: bool = False) -> None:
        self.inner.on_user(self.redactor.text(text), simulated)

    def on_assistant_text(self, text: str) -> None:
        self.inner.on_assistant_text(self.redactor.text(text))

    def on_tool_call(self, call: ToolCall) -> None:
        self.inner.on_tool_call(self.redactor.deep(call))  # a copy: the transcript keeps the call

    def on_turn_end(self, transcript: Transcript) -> None:
        self.inner.on_turn_end(transcript)


class _ObserverGroup(ConversationObserver):
    """Several observers seen by the engine as one."""

    def __init__(self, *observers: ConversationObserver) -> None:
        self.observers = observers

    def on_start(self, transcript: Transcript) -> None:
        for observer in self.observers:
            observer.on_start(transcript)

    def on_user(self, text: str, simulated: bool = False) -> None:
        for observer in self.observers:
            observer.on_user(text, simulated)

    def on_assistant_text(self, text: str) -> None:
        for observer in self.observers:
            observer.on_assistant_text(text)

    def on_tool_call(self, call: ToolCall) -> None:
        for observer in self.observers:
            observer.on_tool_call(call)

    def on_turn_end(self, transcript: Transcript) -> None:
        for observer in self.observers:
            observer.on_turn_end(transcript)


async def count_prefix_tokens(
    base_url: str | None, run_settings: RunSettings, tools: list[dict]
) -> tuple[int, bool]:
    system = (
        [{"type": "text", "text": run_settings.system_prompt}] if run_settings.system_prompt else []
    )
    if api_key_from_env():
        model = AnthropicModel(base_url=base_url, max_retries=1, timeout=30)
        try:
            counted = await model.client.messages.count_tokens(
                model=run_settings.model,
                **({"system": system} if system else {}),  # type: ignore[arg-type]  # plain dicts for the SDK's TextBlockParam
                messages=[{"role": "user", "content": "."}],
                **({"tools": tools} if tools else {}),  # type: ignore[arg-type]  # MCP listings: plain dicts
            )
            return counted.input_tokens, True
        except Exception:
            pass  # no token counter here: estimate
        finally:
            await model.close()
    return estimated_tokens(system) + (estimated_tokens(tools) if tools else 0), False


# What later rooms add to the tool-use runner: they fill these two places of every runner the
# tool-use modes make (runner.crowd, runner.redteam), so the runner names neither of them.
class _ToolCrowdHook(Protocol):
    """--distractor-tools (runners.crowd.ToolCrowd): each case sees its crowd step's tools."""

    distractor_servers: set[str]  # left out of --pin: the decoys are not the suite's tools

    def connected(self, hub: McpHub) -> None: ...
    def hub_for(self, hub: McpHub, case: TestCase) -> Any: ...


class _RedTeamHook(Protocol):
    """redteam (runners.redteam.RedTeam): each run through its adversarial proxies, then judged
    for what the attacks did."""

    extra_specs: dict[str, ToolSpec]  # the canary's and the look-alikes': answered in-process

    def attacked(
        self, base: Any, case: TestCase, iteration: int, model: str
    ) -> AbstractAsyncContextManager[Any]: ...
    def attack_servers(
        self, base: Any, case: TestCase, iteration: int, model: str
    ) -> tuple[list[ServerSpec], AttackState]: ...
    async def grade(self, transcript: Transcript, judge: Judge) -> None: ...


class ToolUseRunner:
    """Conversations with Claude (Anthropic API) over the tools of the MCP servers: one job per
    case and iteration. It takes the concerns it reads: the model and its API, the run plan, the
    servers' limits, which calls reach them, where each case runs, the grading, the pins, and
    (not groups) the -o file (the batch ledger and --resume's tools), --tool-overrides, and
    whether a person answers Claude (--interactive)."""

    scoring: ToolCheckScoring  # set by --optimize --csv on its candidates' runners

    def __init__(
        self,
        cases: Sequence[TestCase],
        servers: list[ServerSpec],
        api: ModelApi | None = None,
        plan: RunPlan | None = None,
        *,
        server_limits: Servers | None = None,
        safety: ToolSafety | None = None,
        claude_code: ClaudeCode | None = None,
        grading: Grading | None = None,
        pins: Pins | None = None,
        output: str | None = None,
        tool_overrides: str | None = None,
        interactive: bool = False,
        user_for: Callable[[TestCase, ModelClient], UserInput | None] = lambda case, model: None,
        observer: ConversationObserver | None = None,
        on_connect: Callable[[McpHub], None] | None = None,
        verdict_of: Callable[[Transcript], Verdict] | None = None,
        console: Console | None = None,
    ) -> None:
        # a group not given is its defaults
        api, plan, safety = api or ModelApi(), plan or RunPlan(), safety or ToolSafety()
        self.cases, self.servers, self.output = cases, servers, output
        self.api, self.plan, self.server_limits = api, plan, server_limits or Servers()
        self.claude_code, self.grading = claude_code or ClaudeCode(), grading or Grading()
        self.pin_options = pins or Pins()
        self.verdict_of, self.console = verdict_of, console
        self.run_settings = api.run_settings(plan.concurrency, interactive)
        self.concurrency = self.run_settings.concurrency
        if plan.batch:  # every conversation under way at once: a round is one batch of all of them
            self.concurrency = plan.concurrency or C.BATCH_CONVERSATIONS
        self.user_for, self.on_connect = user_for, on_connect
        self.redactor = Redactor.for_run(servers)
        self.started = StartedTranscripts()  # on Ctrl-C, the conversations under way are kept too
        shown = RedactingObserver(observer, self.redactor) if observer else None
        self.observer = _ObserverGroup(self.started, shown) if shown else self.started
        self.hub: McpHub | None = None
        self.model: ModelClient | None = None
        self.judge: Judge | None = None
        # --tool-overrides (or a candidate of --optimize): what Claude is shown for some tools
        self.tool_overrides: dict[str, dict] = (
            load_tool_overrides(tool_overrides) if tool_overrides else {}
        )
        self.tool_policy = tool_policy_for(  # mocks and cassettes read before any server starts
            safety,
            self.redactor,
            servers_named=bool(servers),  # with --replay, only the servers named are started
            dry_run=plan.dry_run,
        )
        # --distractor-tools: each case sees its step's tools; redteam: each run through its
        # adversarial proxies (the tool-use modes fill both)
        self.crowd: _ToolCrowdHook | None = None
        self.redteam: _RedTeamHook | None = None
        self.pins: PinRecord | None = None  # --pin: the definitions checked against the file
        self.invocation = secrets.token_hex(4)  # runs of another invocation get other ids
        # --harness / --tool-search: each case runs each way; Claude Code's side is made once the
        # hub has listed the tools (connect)
        self.arms = arms_of(self.claude_code)
        if any(arm.harness == HARNESS_CLAUDE_CODE for arm in self.arms):
            check_cases(cases)
        self.claude: ClaudeHarness | None = None

    def run_id(self, case: TestCase, iteration: int, model: str) -> str:
        """A run's id, unique to this invocation: "{run}" in --tool-overrides' arguments, and
        EVAL_RUN for its `verify` command (a server keeping state per run keys it by this)."""
        return f"{case.name}/{iteration}/{model}/{self.invocation}"

    def tools_for(self, case: TestCase, iteration: int, model: str) -> McpHub | RunTools:
        if self.hub is None:
            raise RuntimeError("a tool-use run outside its runner's session")
        view = case_tool_view(case)
        if view is None and not self.hub.bound_arguments:
            return self.hub
        return RunTools(self.hub, view, self.run_id(case, iteration, model))

    def jobs(self) -> Iterator[Job]:
        """One job per case, model (--model, repeatable), harness (--harness, --tool-search) and
        iteration, made as they are reached; its payload is (case, iteration, model, arm), and
        the model (and a harness other than the API's) is part of its key."""
        for case in self.cases:
            definition = case_hash(case)
            for model in self.api.models:
                for arm in self.arms:
                    shown = arm_model(model, arm)
                    for i in range(1, self.plan.iterations + 1):
                        yield Job(
                            (case.name, i, definition, shown),
                            (case, i, model, arm),
                            (case.name, i, shown),
                            case=(case.name, shown),
                            iteration=i,
                        )

    @asynccontextmanager
    async def session(self) -> Any:
        """The servers open even when nothing is left to run: scoring needs their tool schemas.
        The SDKs were imported while the servers started (import_sdks)."""
        async with self.connect() as hub:
            client = self.api.client_options()
            model: AnthropicModel | CachedModel | BatchedModel
            if self.plan.batch:  # every model call of the run, the judge's too, in batches
                ledger = BatchLedger(batch_ledger_path(self.output) if self.output else None)
                model = BatchedModel(
                    AnthropicModel(**client), ledger, self.plan.max_cost, self.say_batch
                )
            else:  # --cache never mixes with --batch (refused)
                model = model_client(self.plan.cache, **client)
            self.model = model
            self.judge = Judge(self.model, self.grading.judge_model)
            proxy = (
                self.claude.open_cache(
                    ResponseCache.open(self.plan.cache), model_api_url(self.api.base_url)
                )
                if self.claude is not None and self.plan.cache
                else None
            )
            try:
                yield hub
            finally:
                if proxy is not None:
                    proxy.__exit__(None, None, None)
                await model.close()

    @asynccontextmanager
    async def connect(self) -> Any:
        async with McpHub(
            self.servers,
            self.server_limits.tool_timeout,
            self.server_limits.max_result_chars,
            policy=self.tool_policy,
            stop_grace=self.server_limits.stop_grace,
        ) as hub:
            for notice in hub.notices:
                self.say_notice(notice)
            _check_tool_policy(hub, self.tool_policy)
            if self.tool_overrides:
                hub.override_tools(self.tool_overrides)
            if self.on_connect:
                self.on_connect(hub)
            if self.crowd is not None:
                self.crowd.connected(hub)
            if self.pin_options.pin:  # before any model call: a changed definition stops the run
                distractors = self.crowd.distractor_servers if self.crowd else set()
                self.pins = check_pins(
                    self.pin_options.pin,
                    [t for t in hub.tools.values() if t.server not in distractors],
                    self.pin_options.update_pins,
                    self.plan.dry_run,
                )
            self.check_tools_unchanged(hub)
            self.hub = hub
            if (
                self.claude is None
                and not self.plan.dry_run
                and any(arm.harness == HARNESS_CLAUDE_CODE for arm in self.arms)
            ):
                self.claude = ClaudeHarness(
                    self.claude_code,
                    self.api,
                    self.servers,
                    hub.tools,
                    self.tool_policy,
                    # our default imitates Claude Code's own; any other (--prompt, a QA
                    # evaluation's) is appended to Claude Code's
                    ""
                    if self.api.prompt == prompts.DEFAULT_SYSTEM_PROMPT
                    else self.run_settings.system_prompt,
                    self.answered_in_process(hub),
                )
            self.warn_destructive()
            if not self.plan.dry_run:  # the dry run's tool table says them
                for note in self.tool_policy.notes(hub.tools):
                    self.say_notice(note)
            yield hub

    def answered_in_process(self, hub: McpHub) -> dict[str, ToolSpec]:
        """Through Claude Code, the tools the evaluator answers itself (always pre-approved): the
        red team's canary and look-alikes, a crowd's distractors."""
        if self.redteam is not None:
            return self.redteam.extra_specs
        if self.crowd is not None:
            return {
                name: tool
                for name, tool in hub.tools.items()
                if tool.server in self.crowd.distractor_servers
            }
        return {}

    def check_tools_unchanged(self, hub: McpHub) -> None:
        """--resume / --retry-errors keep the earlier run's runs: not when the servers' tools
        changed since (a case would show 4/8 flaky, half its runs against other tools), unless
        --accept-changed-tools. Before any model call; the earlier file's metadata says what
        its runs saw (a run killed before writing it left none: nothing to compare)."""
        plan, output = self.plan, self.output
        if not (plan.resume or plan.retry_errors) or not output:
            return
        earlier = earlier_tool_definitions(output)
        if earlier is None:
            return
        now = {t.name: definition_sha256(tool_definition(t)) for t in hub.tools.values()}
        changes = [
            f"{name} {'added' if name not in earlier else 'removed' if name not in now else 'changed'}"
            for name in sorted(set(earlier) | set(now))
            if earlier.get(name) != now.get(name)
        ]
        if not changes:
            return
        if plan.accept_changed_tools:
            self.say_notice(
                "--accept-changed-tools: the kept runs saw other tools (" + ", ".join(changes) + ")"
            )
            return
        raise InputError(
            f"--resume: the servers' tools changed since {output} was written "
            f"({', '.join(changes[:5])}{', ...' if len(changes) > 5 else ''}); its runs would be "
            "mixed with runs against the new tools",
            hint="write a new -o file, or add --accept-changed-tools to keep them anyway",
        )

    def say_notice(self, notice: str) -> None:
        Console(stderr=True, emoji=False).print(
            f"[yellow]note:[/yellow] {escape_markup(self.redactor.text(notice))}",
            highlight=False,
            soft_wrap=True,  # one line in a log, however narrow the terminal
        )

    def warn_destructive(self) -> None:
        """--tool-policy live: one line before the first model call when a tool that changes
        things can run (one a catch-all mock answers cannot)."""
        policy, hub = self.tool_policy, self.hub
        if policy.policy != "live" or hub is None or self.plan.dry_run:
            return
        risky = [
            t.name
            for t in hub.tools.values()
            if t.destructive and policy.treatment(t).startswith("live")
        ]
        if risky:
            Console(stderr=True, emoji=False).print(
                f"[yellow]warning:[/yellow] --tool-policy live: Claude can call {len(risky)} tool(s) annotated "
                f"destructive, and they run for real: {escape_markup(self.redactor.text(', '.join(sorted(risky))))}",
                highlight=False,
                soft_wrap=True,
            )

    async def run(self, job: Job) -> Transcript:
        batched = self.model if isinstance(self.model, BatchedModel) else None
        with batched.conversation(job.key) if batched else contextlib.nullcontext() as batch_run:
            transcript = await self.run_and_grade(job, batch_run)
        if batch_run is not None and batch_run.capped:
            raise RunNotStarted(
                f"{job.key}: stopped at --max-cost"
            )  # not a result: --resume does it
        return transcript

    async def run_and_grade(self, job: Job, batch_run: BatchRun | None = None) -> Transcript:
        if self.model is None or self.hub is None:  # session() sets them; every run is inside it
            raise RuntimeError("a tool-use run outside its runner's session")
        case, iteration, model, arm = job.payload
        CACHE_SAMPLE.set(str(iteration))  # --cache: each iteration its own sample
        run_settings = (
            self.run_settings
            if model == self.run_settings.model
            else replace(self.run_settings, model=model)
        )
        if arm.harness == HARNESS_CLAUDE_CODE:
            if self.claude is None:
                raise RuntimeError("a Claude Code run outside its runner's session")
            # under a red team, Claude Code reaches the run's proxies (their names are the
            # servers'), each answering from the run's own view of the servers
            # (their names are the servers'); with mocks, a cassette, --record, a crowd or a
            # server inside the evaluator, forwarding proxies of the run's view (its crowd
            # step's), whose mocks, cassette, recorder and decoys answer as through the API
            view = (
                self.crowd.hub_for(self.hub, case)
                if self.crowd is not None
                else self.tools_for(case, iteration, model)
            )
            policy = self.tool_policy
            served: tuple[list[ServerSpec], AttackState | None] = ([], None)
            if self.redteam is not None:
                served = self.redteam.attack_servers(view, case, iteration, arm_model(model, arm))
            elif (
                policy.mocks
                or policy.replay is not None
                or policy.recorder is not None
                or self.crowd is not None
                or any(spec.instance is not None for spec in self.servers)
            ):
                served = forwarding_servers(view)
            transcript = await self.claude.run(case, iteration, model, arm, *served)
        else:
            async with self.run_hub(case, iteration, model) as hub:
                transcript = await run_conversation(
                    case,
                    self.model,
                    hub,
                    run_settings,
                    iteration,
                    self.user_for(case, self.model),
                    self.observer,
                )
        transcript.batch_api = batch_run is not None
        try:
            if batch_run is None or not batch_run.capped:
                await self.grade_run(transcript)
                if self.redteam is not None and self.judge is not None:
                    await self.redteam.grade(transcript, self.judge)
        except (asyncio.CancelledError, KeyboardInterrupt):
            transcript.error = (
                transcript.error or "interrupted"
            )  # an ungraded run is no result: --resume reruns it
            raise
        self.started.done(transcript)
        return transcript

    @asynccontextmanager
    async def run_hub(self, case: TestCase, iteration: int, model: str) -> Any:
        """The tools one run talks to: its step's crowd, or its own view of the servers; under a
        red team, that view behind the run's adversarial proxies."""
        if self.hub is None:
            raise RuntimeError("a tool-use run outside its runner's session")
        base: Any = (
            self.crowd.hub_for(self.hub, case)
            if self.crowd
            else self.tools_for(case, iteration, model)
        )
        if self.redteam is None:
            yield base
            return
        async with self.redteam.attacked(base, case, iteration, model) as hub:
            yield hub

    def say_batch(self, line: str) -> None:
        """--batch: a line per poll of a batch (redacted and escaped like every line we print)."""
        console = self.console or Console(stderr=True, emoji=False)
        console.print(
            f"[dim]{escape_markup(self.redactor.text(line))}[/dim]", highlight=False, soft_wrap=True
        )

    async def grade_run(self, transcript: Transcript) -> None:
        """The grading that needs I/O, after the conversation: the case's `verify` command, then
        the LLM judge (not for a run that failed). Results go to `transcript.grades`, for the
        checks of TOOL_CHECKS to read; a grader that could not give a verdict is the run's error."""
        case = transcript.case
        if not (case.verify or needs_judge(case)):
            return
        if case.verify:  # the command and the judge see the run as it was; the sinks redact
            stdin = tool_run_result(transcript).model_dump_json(by_alias=True).encode()
            env = environment_without_credentials(
                EVAL_CASE=case.name,
                EVAL_ITERATION=str(transcript.iteration),
                EVAL_RUN=self.run_id(case, transcript.iteration, transcript.model),
            )
            transcript.grades["verify"] = await run_verify(
                case.verify, stdin, env, self.grading.verify_timeout, self.redactor
            )
        if needs_judge(case) and not transcript.error:
            if self.judge is None:  # session() sets it; every run is inside it
                raise RuntimeError("a tool-use run graded outside its runner's session")
            grade, usage = await self.judge.grade(case, transcript)
            transcript.grades["judge"] = grade
            if usage is not None:
                transcript.judge_usage, transcript.judge_model = (
                    transcript.judge_usage + usage,
                    self.judge.model_id,
                )
        failed = [
            f"{name} error: {grade['error']}"
            for name, grade in transcript.grades.items()
            if "error" in grade
        ]
        if failed and not transcript.error:
            transcript.error = "; ".join(failed)

    def cost(self, record: Transcript) -> float:
        return record.cost_usd

    def to_result(self, record: Transcript) -> ToolRunResult:
        return tool_run_result(record, self.verdict_of)

    def result_key(self, result: RunResult) -> tuple:
        if not isinstance(result, ToolRunResult):
            return ("foreign",)
        return result.test_name, result.iteration, result.case_hash, result.model

    def from_result(self, job: Job, result: RunResult, scored: bool = False) -> Transcript:
        """The run again as a transcript; `scored`: with the verdict its results line carries."""
        if not isinstance(result, ToolRunResult):  # result_key keeps other kinds apart
            raise InputError(
                f"{job.key[0]!r}: the earlier result is not a tool-use run",
                hint="choose another -o",
            )
        return transcript_from_result(job.payload[0], result, scored)

    def under_way(self) -> list[tuple[tuple, Transcript]]:
        for t in self.started.transcripts:  # --batch: what they spent so far was at the batch price
            t.batch_api = self.plan.batch
        keys = {
            (case.name, i, arm_model(model, arm)): key
            for key, (case, i, model, arm) in ((j.key, j.payload) for j in self.jobs())
        }
        return [
            (keys[(t.case.name, t.iteration, t.model)], t)
            for t in self.started.transcripts
            if (t.case.name, t.iteration, t.model) in keys
        ]

    async def estimate(self, jobs: Sequence[Job]) -> CostEstimate:
        async with self.connect() as hub:
            views = {json.dumps(case_tool_view(j.payload[0])) for j in jobs} - {"null"}
            tools = max(  # cases that show Claude tools of their own: the largest of them
                [RunTools(hub, json.loads(v), "").anthropic_tools for v in views]
                or [hub.anthropic_tools],
                key=lambda definitions: len(json.dumps(definitions)),
            )
            prefix, counted = await count_prefix_tokens(self.api.base_url, self.run_settings, tools)
            by_model: dict[tuple[str, bool], list[Job]] = {}
            for job in jobs:  # through Claude Code, its own system prompt and tools come first
                way = len(job.payload) > 3 and job.payload[3].harness == HARNESS_CLAUDE_CODE
                by_model.setdefault((job.payload[2], way), []).append(job)
            estimate = combined_estimate(
                [
                    estimate_tool_runs(
                        model_jobs,
                        replace(self.run_settings, model=model),
                        prefix + (C.CLAUDE_CODE_PREFIX_TOKENS if claude_code else 0),
                        counted,
                        len(tools),
                        self.grading.judge_model,
                    )
                    for (model, claude_code), model_jobs in (
                        by_model or {(self.run_settings.model, False): []}
                    ).items()
                ]
            )
            return (
                replace(estimate, batch_factor=C.BATCH_PRICE_FACTOR)
                if self.plan.batch
                else estimate
            )
