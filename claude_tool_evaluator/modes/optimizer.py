"""The description optimizer (--optimize): a skill's or the tools' descriptions improved on a
train/test split, round by round, the best by its held-out score.

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import prompts
import test_constants as C

from ..claude_code import claude_version, remove_stale_run_folders, skill_md_with_description
from ..dry_run import CostEstimate, print_estimate
from ..errors import FatalApiError, InputError, OutputError, UsageProblem, is_api_error
from ..files import journal_path, json_lines, open_output_file, output_error, write_text_atomic
from ..hub.calls import McpHub
from ..loaders.csv_suites import check_case_tools, load_csv_suite
from ..loaders.skills import skill_description_problem
from ..pipeline import PipelineOutcome, continues_earlier_run, run_pipeline
from ..redaction import Redactor
from ..results_schema.document import RUN_RESULT, dump_record
from ..results_schema.sections import OptimizationRecord, OptimizationRoundRecord, SplitRecord
from ..run_types import SkillTest, Usage, cost_usd, estimated_tokens
from ..runners.crowd import CrowdedSkillRunner, skill_crowd_for
from ..runners.skills import SkillRunner
from ..runners.tool_use import ToolUseRunner
from ..scoring.skills import score_all_triggers
from ..scoring.suites import ToolCheckScoring
from ..session import ModelRequest, api_error_message, model_client
from ..settings import Outputs
from ..sinks import cap_text, json_text, terminal_text
from ..stopping import interrupted_exit_code, run_async
from ..writers.formats import write_outputs
from ..writers.optimization import print_optimization
from .common import check_crowd_options, require_api_key, servers_for, tool_use_runner
from .skills import SkillRuns, load_skill_suite, skill_plan, skill_results
from .tool_suites import tool_use_results

__all__ = [
    "CandidateScore",
    "OptimizeLoop",
    "SHOULD_NOT_TRIGGER",
    "SHOULD_TRIGGER",
    "SplitItem",
    "optimize_mode",
    "optimized_file_path",
    "stratified_split",
]

if TYPE_CHECKING:
    from ..finished_run import Results
    from ..hub.tools import ToolSpec
    from ..run_types import Transcript
    from ..runners.skills import SkillSuitePlan
    from ..settings import Settings


# A skill's description (trigger evals) or the MCP tools' descriptions (a CSV suite) improved on a
# train split and chosen on a held-out test split. Every candidate is scored by the pipeline's own
# runner and scorers (SkillRunner + score_triggers, ToolUseRunner + the TOOL_CHECKS): there is no
# second way to count a trigger or a tool choice. The proposer never sees a test query or score.
SHOULD_TRIGGER, SHOULD_NOT_TRIGGER = "should trigger", "should not trigger"


_PROPOSE_TOOL_CHOICE = {"type": "tool", "name": "propose"}


@dataclass
class SplitItem:
    """One query (skills) or case (tools) of the optimizer's suite, and the split it is in."""

    key: str  # the query, or the case name
    stratum: str  # should (not) trigger; the expected tool(s)
    split: str = "train"


def stratified_split(items: list[SplitItem], holdout: float, seed: int) -> list[SplitItem]:
    """Each stratum shuffled with the seed and `holdout` of it held out as the test split; the
    fractions left over are carried from stratum to stratum, so small strata (a single case for a
    tool) still add up, and a stratum of two or more keeps at least one item in train."""
    import random

    rng, carry = random.Random(seed), 0.0
    strata: dict[str, list[SplitItem]] = {}
    for item in items:
        strata.setdefault(item.stratum, []).append(item)
    for stratum in sorted(strata):
        group = sorted(strata[stratum], key=lambda i: i.key)
        rng.shuffle(group)
        wanted = len(group) * holdout + carry
        held = min(int(wanted + 1e-9), len(group) - 1 if len(group) > 1 else 1)
        carry = wanted - held
        for index, item in enumerate(group):
            item.split = "test" if index < held else "train"
    return items


@dataclass
class CandidateScore:
    """A candidate's runs and what the pipeline's scorers made of them, per split."""

    passed: dict[str, bool]  # item key -> passed
    cost: float
    complete: bool  # every run done (not cut by --max-cost or Ctrl-C)
    failures: list[dict]  # train failures, as the proposer is shown them
    runner: Any = None
    outcome: Any = None
    extra: Any = None  # the task's own (scoring, plan)

    def counts(self, items: Sequence[SplitItem], split: str) -> tuple[int, int]:
        chosen = [i for i in items if i.split == split]
        return sum(1 for i in chosen if self.passed.get(i.key)), len(chosen)


def _score_rate(passed: int, total: int) -> float | None:
    return passed / total if total else None


def _replayed_outcome(runner: Any, results: Sequence[Any]) -> PipelineOutcome:
    """A candidate scored before (--resume): its journaled runs in job order, as the pipeline
    would hold them; nothing runs again."""
    by_key = {runner.result_key(r): r for r in results}
    outcome = PipelineOutcome([], [])
    for job in runner.jobs():
        if job.key in by_key:
            outcome.records.append(runner.from_result(job, by_key[job.key]))
            outcome.keys.append(job.key)
    outcome.reused = len(outcome.records)
    return outcome


def _propose_tool(tools: Sequence[str] | None) -> dict:
    """The optimizer answers through this tool only: a description (skills), or a map of tool
    name to description limited to the tools it may rewrite."""
    if tools is None:
        schema = {
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "The new description, plain text."}
            },
            "required": ["description"],
        }
    else:
        schema = {
            "type": "object",
            "properties": {
                "descriptions": {
                    "type": "object",
                    "description": "Tool name -> its new description.",
                    "properties": {name: {"type": "string"} for name in tools},
                    "additionalProperties": False,
                }
            },
            "required": ["descriptions"],
        }
    return {
        "name": "propose",
        "description": "Propose the new description(s). Call it exactly once.",
        "input_schema": schema,
    }


def optimized_file_path(settings: Settings) -> Path | None:
    """The best candidate as a ready file next to -o: a SKILL.md copy with the new description,
    or a --tool-overrides JSON. The user's own files are never edited."""
    if not settings.outputs.output:
        return None
    output = Path(settings.outputs.output)
    stem = output.name.removesuffix(".json")
    return output.with_name(
        f"{stem}.SKILL.md" if settings.inputs.skill else f"{stem}.tool-overrides.json"
    )


def _optimizer_outputs(settings: Settings) -> list[Path]:
    """What --optimize writes itself: the write guard of skill runs must not count it."""
    best = optimized_file_path(settings)
    return settings.outputs.own_outputs() + ([best] if best else [])


class _SkillDescriptionTask:
    """--optimize --skill S --trigger EVALS: the skill's description, scored by trigger runs."""

    kind = "skill"

    def __init__(self, settings: Settings) -> None:
        skills, tests = load_skill_suite(settings)
        if len(skills) != 1:
            raise InputError(
                "--optimize improves one skill's description at a time", hint="give one --skill"
            )
        self.settings, self.skill = settings, skills[0]
        self.timeout = max(t.timeout for t in tests)
        seen: dict[str, SplitItem] = {}
        for test in tests:
            for query, stratum in [
                *((q, SHOULD_TRIGGER) for q in test.positive_triggers),
                *((q, SHOULD_NOT_TRIGGER) for q in test.negative_triggers),
            ]:
                seen.setdefault(query, SplitItem(query, stratum))
        self.items = list(seen.values())
        if len(self.items) < 2:
            raise InputError(
                "--optimize needs at least two trigger queries",
                hint="give --trigger with more queries",
            )
        self.version = ""
        self.redactor = Redactor.for_run([])
        # --distractors: every candidate runs among them (one step: the whole crowd), and the
        # proposer is told which of them took which training query
        if settings.crowd.distractors and not settings.run_plan.dry_run:
            require_api_key()
        check_crowd_options(settings)
        self.crowd = skill_crowd_for(
            settings.crowd,
            skills,
            Console(stderr=True, emoji=False),
            settings.api,
            settings.run_plan.dry_run,
            whole=True,
        )

    @property
    def subject(self) -> str:
        return self.skill.name

    def original(self) -> dict[str, str]:
        return {self.skill.name: self.skill.description}

    def plan(self, candidate: dict[str, str]) -> SkillSuitePlan:
        description = candidate[self.skill.name]
        skill = (
            self.skill
            if description == self.skill.description
            else replace(self.skill, description=description, description_override=True)
        )
        test = SkillTest(
            name=f"{skill.name}-optimize",
            type="trigger",
            source=str(self.settings.inputs.trigger[0]),
            positive_triggers=[i.key for i in self.items if i.stratum == SHOULD_TRIGGER],
            negative_triggers=[i.key for i in self.items if i.stratum == SHOULD_NOT_TRIGGER],
            timeout=self.timeout,
            skill=skill.name,
        )
        plan = skill_plan(self.settings, [skill], [test])
        plan.crowd = self.crowd
        return plan

    def runner(self, candidate: dict[str, str]) -> SkillRunner:
        if self.crowd is not None:
            return CrowdedSkillRunner(
                self.plan(candidate), self.crowd, _optimizer_outputs(self.settings), self.redactor
            )
        return SkillRunner(self.plan(candidate), _optimizer_outputs(self.settings), self.redactor)

    def prepare(self) -> None:
        require_api_key()
        remove_stale_run_folders()
        self.version = claude_version(self.plan(self.original()).trigger_settings.binary)

    async def estimate(self) -> CostEstimate:
        runner = self.runner(self.original())
        return await runner.estimate(list(runner.jobs()))

    def scored(
        self, runner: SkillRunner, outcome: PipelineOutcome, complete: bool
    ) -> CandidateScore:
        plan = runner.plan
        runs = SkillRuns.of(plan, outcome)
        [score] = score_all_triggers(plan.tests, [self.skill.name], runs.by_query, plan.threshold)
        results = {q.query: q for q in score.query_results if not q.routing}
        train = {i.key for i in self.items if i.split == "train"}
        failures = [
            {
                "query": q.query,
                "expected": q.expected,
                "actual": q.actual,
                "activations": q.activations,
                "runs": q.runs,
                "errors": q.errors,
                "taken_by": sorted(n for n in q.fired if n != self.skill.name),
            }
            for q in results.values()
            if q.query in train and not q.correct
        ]
        return CandidateScore(
            {
                k: bool(results[k].correct) if k in results else False
                for k in (i.key for i in self.items)
            },
            runs.cost(results),
            complete,
            failures,
            runner,
            outcome,
        )

    def results(self, best: CandidateScore, settings: Settings) -> Results:
        return skill_results(settings, best.runner.plan, best.runner, best.outcome, self.version)

    def request(
        self,
        current: dict[str, str],
        score: CandidateScore,
        history: list[tuple[dict, int, int]],
        train_total: int,
    ) -> tuple[str, list[str] | None]:
        lines = []
        for f in score.failures[: C.OPTIMIZER_FAILURES_SHOWN]:
            if f["actual"] == "error":
                lines.append(f'- every run failed, so it cannot be judged: "{f["query"]}"')
            elif f["expected"] == "activate":
                taken = f.get("taken_by") or []
                lines.append(
                    f"- should trigger, but did not (activated in {f['activations']} of {f['runs']} "
                    f'runs): "{f["query"]}"' + (f" (taken by {', '.join(taken)})" if taken else "")
                )
            else:
                lines.append(
                    f"- should not trigger, but did (activated in {f['activations']} of {f['runs']} "
                    f'runs): "{f["query"]}"'
                )
        passed = train_total - len(score.failures)
        attempts = [
            f"Attempt {n} ({p}/{t} training queries passed):\n{c[self.skill.name]}"
            for n, (c, p, t) in enumerate(history, 1)
        ]
        thieves = sorted({n for f in score.failures for n in f.get("taken_by") or []})
        known = self.crowd.descriptions() if self.crowd else {}
        crowd = (
            prompts.OPTIMIZE_CROWD_NOTE.format(
                name=self.skill.name,
                thieves="\n".join(
                    f"- {n}: {known.get(n, '(not one of the distractors)')}" for n in thieves
                ),
            )
            if thieves and self.crowd
            else ""
        )
        return prompts.OPTIMIZE_SKILL_PROMPT.format(
            name=self.skill.name,
            description=current[self.skill.name],
            body=cap_text(self.skill.body, C.OPTIMIZER_BODY_CHARS),
            score=f"{passed} of {train_total} passed",
            failures="\n".join(lines) or prompts.OPTIMIZER_NO_FAILURES,
            history="\n\n".join(attempts) or prompts.OPTIMIZER_NO_HISTORY,
            limit=C.MAX_SKILL_DESCRIPTION_CHARS,
        ) + crowd, None

    def proposal(
        self, data: dict, allowed: list[str] | None, current: dict[str, str]
    ) -> tuple[dict | None, str]:
        description = data.get("description")
        if not isinstance(description, str):
            return None, "`description` must be a string"
        description = description.strip()
        problem = skill_description_problem(description)
        if problem:
            return None, f"the description is invalid: {problem}"
        return {self.skill.name: description}, ""

    def best_file_text(self, best: dict[str, str]) -> str:
        return skill_md_with_description(
            self.skill.path.read_text(encoding="utf-8"), best[self.skill.name]
        )


class _ToolDescriptionTask:
    """--optimize --csv SUITE: the MCP tools' descriptions, scored by the suite's checks."""

    kind = "tools"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        if not settings.inputs.csv:
            raise InputError("--optimize of tool descriptions needs --csv SUITE")
        self.cases = list(
            load_csv_suite(settings.inputs.csv)
        )  # a few dozen cases, read every round
        if len(self.cases) < 2:
            raise InputError("--optimize needs at least two cases", settings.inputs.csv)
        self.items = [
            SplitItem(
                c.name, " + ".join(c.expected_tools) or ("no tool" if c.expect_no_tools else "any")
            )
            for c in self.cases
        ]
        self.servers = servers_for(settings)
        self.tools: dict[str, ToolSpec] = {}
        self.suite = Path(settings.inputs.csv).stem

    @property
    def subject(self) -> str:
        return f"the tools of {self.suite}"

    def original(self) -> dict[str, str]:
        return {name: spec.description for name, spec in sorted(self.tools.items())}

    def run_settings(self) -> Settings:
        plan = self.settings.run_plan
        return replace(
            self.settings,
            run_plan=replace(plan, iterations=plan.runs or C.DEFAULT_OPTIMIZE_RUNS),
        )

    def runner(
        self, candidate: dict[str, str], scoring: ToolCheckScoring | None = None
    ) -> ToolUseRunner:
        scoring = scoring or ToolCheckScoring(self.cases, True)
        runner = tool_use_runner(
            self.run_settings(),
            self.cases,
            self.servers,
            on_connect=scoring.connected,
            verdict_of=scoring.verdict,
        )
        runner.tool_overrides = {
            name: {"description": text}
            for name, text in candidate.items()
            if self.tools.get(name) and text != self.tools[name].description
        }
        runner.scoring = scoring
        return runner

    def prepare(self) -> None:
        async def listing() -> None:
            async with McpHub(
                self.servers,
                self.settings.servers.tool_timeout,
                self.settings.servers.max_result_chars,
                stop_grace=self.settings.servers.stop_grace,
            ) as hub:
                check_case_tools(self.cases, hub.tool_names())
                self.tools = dict(hub.tools)

        run_async(listing())

    async def estimate(self) -> CostEstimate:
        runner = tool_use_runner(self.run_settings(), self.cases, self.servers)
        return await runner.estimate(list(runner.jobs()))

    def scored(
        self, runner: ToolUseRunner, outcome: PipelineOutcome, complete: bool
    ) -> CandidateScore:
        scoring = runner.scoring
        scoring.tools.update(self.tools)  # a replayed candidate never connected
        transcripts = outcome.records
        cases = {
            c.name: c
            for c in scoring.case_results(transcripts, self.settings.run_plan.threshold, self.suite)
        }
        by_case: dict[str, list[Transcript]] = {}
        for t in transcripts:
            by_case.setdefault(t.case.name, []).append(t)
        train = {i.key for i in self.items if i.split == "train"}
        failures = []
        for case in self.cases:
            result = cases.get(case.name)
            if case.name in train and result is not None and not result.passed:
                failures.append(
                    {
                        "case": case.name,
                        "prompt": case.prompt,
                        "expected": list(case.expected_tools),
                        "forbidden": list(case.forbidden_tools),
                        "no_tools": case.expect_no_tools,
                        "called": [list(t.tools_called) for t in by_case.get(case.name, [])],
                        "reasons": list(result.reasons),
                    }
                )
        return CandidateScore(
            {i.key: bool(cases[i.key].passed) if i.key in cases else False for i in self.items},
            sum(t.cost_usd for t in transcripts),
            complete,
            failures,
            runner,
            outcome,
        )

    def results(self, best: CandidateScore, settings: Settings) -> Results:
        return tool_use_results(
            self.run_settings(), best.outcome, best.runner.scoring, "optimize", "csv", self.suite
        )

    def involved(self, failures: list[dict]) -> list[str]:
        names = {
            n
            for f in failures
            for n in [*f["expected"], *f["forbidden"], *(x for run in f["called"] for x in run)]
        }
        return sorted(n for n in names if n in self.tools)

    def request(
        self,
        current: dict[str, str],
        score: CandidateScore,
        history: list[tuple[dict, int, int]],
        train_total: int,
    ) -> tuple[str, list[str] | None]:
        tools = self.involved(score.failures)
        lines = []
        for f in score.failures[: C.OPTIMIZER_FAILURES_SHOWN]:
            expected = ", ".join(f["expected"]) or ("no tool at all" if f["no_tools"] else "(any)")
            called = "; ".join(
                f"run {i}: {', '.join(run) or 'no tool'}" for i, run in enumerate(f["called"], 1)
            )
            lines.append(
                f'- case {f["case"]}: "{f["prompt"]}"\n  expected: {expected}'
                + (f"; must not call: {', '.join(f['forbidden'])}" if f["forbidden"] else "")
                + f"\n  called: {called or 'nothing'}\n  why it failed: {'; '.join(f['reasons'])}"
            )
        descriptions = "\n".join(f"- {name}: {current[name]}" for name in tools)
        attempts = [
            f"Attempt {n} ({p}/{t} training cases passed):\n"
            + "\n".join(f"- {name}: {c[name]}" for name in tools)
            for n, (c, p, t) in enumerate(history, 1)
        ]
        passed = train_total - len(score.failures)
        return prompts.OPTIMIZE_TOOLS_PROMPT.format(
            score=f"{passed} of {train_total} passed",
            failures="\n".join(lines) or prompts.OPTIMIZER_NO_FAILURES,
            descriptions=descriptions,
            history="\n\n".join(attempts) or prompts.OPTIMIZER_NO_HISTORY,
            tools=", ".join(tools),
        ), tools

    def proposal(
        self, data: dict, allowed: list[str] | None, current: dict[str, str]
    ) -> tuple[dict | None, str]:
        given = data.get("descriptions")
        if not isinstance(given, dict) or not given:
            return None, "`descriptions` must map at least one tool name to its new description"
        for name, text in given.items():
            if name not in (allowed or []):
                return (
                    None,
                    f"{name!r} is not one of the tools to rewrite ({', '.join(allowed or [])})",
                )
            if not isinstance(text, str) or not text.strip():
                return None, f"the description of {name!r} is empty"
            if len(text) > C.MAX_TOOL_DESCRIPTION_CHARS:
                return (
                    None,
                    f"the description of {name!r} is longer than {C.MAX_TOOL_DESCRIPTION_CHARS} characters",
                )
        return dict(current, **{name: text.strip() for name, text in given.items()}), ""

    def best_file_text(self, best: dict[str, str]) -> str:
        changed = {
            name: {"description": text}
            for name, text in best.items()
            if text != self.tools[name].description
        }
        return json_text(changed) + "\n"


def _candidate_hash(candidate: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(candidate, sort_keys=True).encode()).hexdigest()[:16]


class _Proposer:
    """The optimizer model behind the forced `propose` tool. An invalid proposal is sent back
    once with the reason; a second invalid one is dropped."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model_id = settings.descriptions.optimizer_model

    async def ask(
        self, task: Any, prompt: str, allowed: list[str] | None, current: dict[str, str]
    ) -> tuple[dict | None, list[str], float, list[dict]]:
        """(candidate or None, the reasons proposals were refused, cost, the requests sent)."""
        model = model_client(
            self.settings.run_plan.cache,
            base_url=self.settings.api.base_url,
            max_retries=self.settings.api.max_retries,
            timeout=self.settings.api.request_timeout,
        )
        messages: list[dict] = [{"role": "user", "content": prompt}]
        refused: list[str] = []
        spent = 0.0
        try:
            for _ in range(2):
                request = ModelRequest(
                    self.model_id,
                    prompts.OPTIMIZER_SYSTEM_PROMPT,
                    list(messages),
                    [_propose_tool(allowed)],
                    C.OPTIMIZER_MAX_TOKENS,
                    tool_choice=_PROPOSE_TOOL_CHOICE,
                )
                reply = await model.complete(request)
                spent += cost_usd(reply.usage, self.model_id)
                call = next(
                    (
                        b
                        for b in reply.content
                        if b.get("type") == "tool_use" and b.get("name") == "propose"
                    ),
                    None,
                )
                if call is None:
                    candidate, reason = None, "there was no `propose` call"
                else:
                    data = call.get("input") if isinstance(call.get("input"), dict) else {}
                    candidate, reason = task.proposal(data, allowed, current)
                if candidate is not None:
                    return candidate, refused, spent, messages
                refused.append(reason)
                messages.append({"role": "assistant", "content": reply.content})
                feedback = prompts.OPTIMIZER_INVALID.format(reason=reason)
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": call.get("id", ""),
                                "content": feedback,
                                "is_error": True,
                            }
                        ]
                        if call is not None
                        else feedback,
                    }
                )
        except FatalApiError:
            raise
        except Exception as exc:
            if not is_api_error(exc):
                raise
            refused.append(f"the optimizer call failed: {api_error_message(exc)}")
        finally:
            await model.close()
        return None, refused, spent, messages


def _estimate_proposal(task: Any, settings: Settings) -> CostEstimate:
    """One proposal call at its largest: every train item a failure, every earlier attempt shown."""
    text = (
        prompts.OPTIMIZER_SYSTEM_PROMPT
        + prompts.OPTIMIZE_SKILL_PROMPT
        + prompts.OPTIMIZE_TOOLS_PROMPT
    )
    text += " ".join(i.key for i in task.items) * 2
    if task.kind == "skill":
        text += cap_text(task.skill.body, C.OPTIMIZER_BODY_CHARS)
        text += task.skill.description * (settings.descriptions.optimize_rounds + 1)
    else:
        text += " ".join(c.prompt for c in task.cases) + " ".join(task.original().values()) * (
            settings.descriptions.optimize_rounds + 1
        )
    prompt = estimated_tokens(text)
    model = settings.descriptions.optimizer_model
    typical = cost_usd(
        Usage(input_tokens=prompt, output_tokens=C.ESTIMATED_OPTIMIZER_OUTPUT_TOKENS), model
    )
    most = cost_usd(Usage(input_tokens=prompt * 2, output_tokens=C.OPTIMIZER_MAX_TOKENS), model)
    return CostEstimate(1, model, 1, 2, typical, most, f"prompt: about {prompt:,} tokens")


class _OptimizeJournal:
    """One JSON line per event of the loop (each run of a candidate as it finishes, each
    proposal, each candidate scored to the end), flushed at once and redacted like every output:
    --resume (after Ctrl-C, SIGTERM or kill -9) replays it, so nothing finished is asked or run
    again."""

    def __init__(self, settings: Settings, fingerprint: str) -> None:
        self.path = journal_path(settings.outputs.output) if settings.outputs.output else None
        self.fingerprint = fingerprint
        self.proposals: dict[int, dict] = {}
        self.scored: dict[str, list] = {}
        self.runs: dict[str, list] = {}  # candidate hash -> its runs finished so far
        kept: list[str] = []
        if (
            self.path
            and (settings.run_plan.resume or settings.run_plan.retry_errors)
            and self.path.exists()
        ):
            events = [event for event in json_lines(self.path) if isinstance(event, dict)]
            if events and events[0].get("fingerprint") != fingerprint:
                raise InputError(
                    f"{self.path} belongs to another optimization (other inputs or options)",
                    hint="rerun with the same options, or delete it to start over",
                )
            for event in events:
                try:
                    if event.get("event") == "proposal":
                        self.proposals[int(event["round"])] = event
                    elif event.get("event") == "scored":
                        self.scored[event["candidate_hash"]] = [
                            RUN_RESULT.validate_python(r) for r in event["results"]
                        ]
                    elif event.get("event") == "run":
                        self.runs.setdefault(event["candidate_hash"], []).append(
                            RUN_RESULT.validate_python(event["result"])
                        )
                except (KeyError, TypeError, ValueError):
                    continue  # a line from another version: that step happens again
                kept.append(json_text(event, indent=None))
        self._kept = kept or [
            json_text({"event": "start", "fingerprint": fingerprint}, indent=None)
        ]
        self._handle: Any = None

    def append(self, event: dict) -> None:
        if self.path is None:
            return
        if self._handle is None:
            self._handle = open_output_file(self.path, self._kept)
        try:
            self._handle.write(json_text(Redactor.for_run().data(event), indent=None) + "\n")
            self._handle.flush()
        except OSError as exc:  # a full disk: the lines before this one keep the loop resumable
            raise OutputError(
                f"{output_error(self.path, exc)}; make room and rerun with --resume"
            ) from None

    def record_run(self, candidate: dict[str, str], runner: Any) -> Callable[[Any], None]:
        """What the pipeline calls as each run of this candidate finishes: its journal line."""
        key = _candidate_hash(candidate)

        def record(run: Any) -> None:
            self.append(
                {
                    "event": "run",
                    "candidate_hash": key,
                    "result": dump_record(runner.to_result(run)),
                }
            )

        return record

    def close(self, remove: bool) -> None:
        if self._handle is not None:
            self._handle.close()
        if remove and self.path is not None:
            self.path.unlink(missing_ok=True)


def _estimate_optimization(task: Any, settings: Settings) -> CostEstimate:
    """The whole loop at its worst: every round proposed (each sent back once) and scored."""
    per = run_async(task.estimate())
    proposal = _estimate_proposal(task, settings)
    candidates, rounds = (
        settings.descriptions.optimize_rounds + 1,
        settings.descriptions.optimize_rounds,
    )
    detail = (
        f"{candidates} candidate(s) (the original and {rounds} round(s)) × {per.runs} run(s) on {per.model}; "
        f"{rounds} to {2 * rounds} proposal call(s) on {proposal.model} ({proposal.detail}) · {per.detail}"
    )
    return CostEstimate(
        per.runs * candidates,
        f"{per.model} + {proposal.model}",
        per.calls_expected * candidates + rounds * proposal.calls_expected,
        per.calls_max * candidates + rounds * proposal.calls_max,
        per.cost_expected * candidates + rounds * proposal.cost_expected,
        per.cost_max * candidates + rounds * proposal.cost_max,
        detail,
    )


class OptimizeLoop:
    """The rounds: the original scored first, then at most --optimize-rounds proposals, each
    scored like the original; stops early when train all passes or at --max-cost."""

    def __init__(
        self, task: Any, settings: Settings, console: Console, journal: _OptimizeJournal
    ) -> None:
        self.task, self.settings, self.console, self.journal = task, settings, console, journal
        self.proposer = _Proposer(settings)
        self.spent = 0.0
        self.rounds: list[OptimizationRoundRecord] = []
        self.scores: dict[int, tuple[dict[str, str], CandidateScore]] = {}
        self.stopped = ""

    def out_of_money(self) -> bool:
        return (
            self.settings.run_plan.max_cost is not None
            and self.spent >= self.settings.run_plan.max_cost
        )

    def score(self, round_no: int, candidate: dict[str, str]) -> CandidateScore | None:
        """The candidate's runs through the pipeline, scored: those the journal holds are
        replayed (a candidate scored to the end, or the runs of one cut short), the rest run,
        each journaled as it finishes."""
        runner = self.task.runner(candidate)
        key = _candidate_hash(candidate)
        kept = self.journal.scored.get(key)
        if kept is not None:
            return self.task.scored(runner, _replayed_outcome(runner, kept), True)
        if self.out_of_money():
            return None
        earlier = self.journal.runs.get(key, [])
        budget = (
            None
            if self.settings.run_plan.max_cost is None
            else self.settings.run_plan.max_cost - self.spent
        )
        self.console.print(
            f"round {round_no}: {sum(1 for _ in runner.jobs())} run(s) of the "
            f"{'original' if round_no == 0 else 'candidate'}",
            highlight=False,
        )
        outcome = run_pipeline(  # its own journal, never -o's: no outputs, no --resume of -o
            runner,
            replace(self.settings.run_plan, resume=False, retry_errors=False, max_cost=budget),
            Outputs(),
            self.console,
            on_record=self.journal.record_run(candidate, runner),
            earlier=earlier,
            base_url=self.settings.api.base_url,
        )
        result = self.task.scored(
            runner, outcome, not outcome.interrupted and not outcome.not_started
        )
        reused = {runner.result_key(r) for r in earlier}
        self.spent += sum(  # what this invocation paid: the journaled runs were paid before
            runner.cost(r)
            for r in outcome.records
            if runner.result_key(runner.to_result(r)) not in reused
        )
        if result.complete:
            self.journal.append(
                {
                    "event": "scored",
                    "round": round_no,
                    "candidate_hash": _candidate_hash(candidate),
                    "candidate": candidate,
                    "results": [dump_record(runner.to_result(r)) for r in outcome.records],
                }
            )
        if outcome.interrupted:
            self.stopped = "interrupted"
        return result

    def scored_round(
        self,
        round_no: int,
        candidate: dict[str, str],
        original: dict[str, str],
        result: CandidateScore | None,
        proposer_cost: float = 0.0,
        refused: Sequence[str] = (),
    ) -> OptimizationRoundRecord:
        items = self.task.items
        shown = (
            candidate
            if round_no == 0
            else {n: d for n, d in candidate.items() if d != original.get(n)}
        )
        record = OptimizationRoundRecord(
            round=round_no,
            status="incomplete",
            descriptions=shown,
            proposer_cost_usd=round(proposer_cost, 6),
            refused=list(refused),
        )
        if result is not None:
            (tp, tt), (sp, st) = result.counts(items, "train"), result.counts(items, "test")
            record.train_passed, record.train_total, record.test_passed, record.test_total = (
                tp,
                tt,
                sp,
                st,
            )
            record.train_score, record.test_score = _score_rate(tp, tt), _score_rate(sp, st)
            record.cost_usd = round(result.cost, 6)
            record.status = "scored" if result.complete else "incomplete"
        self.rounds.append(record)
        self.say(record)
        return record

    def say(self, r: OptimizationRoundRecord) -> None:
        if r.status == "dropped":
            self.console.print(
                f"round {r.round}: proposal dropped ({terminal_text('; '.join(r.refused))})",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        elif r.status == "scored":
            test = f"{r.test_passed}/{r.test_total}" if r.test_total else "n/a"
            self.console.print(
                f"round {r.round}: train {r.train_passed}/{r.train_total} · test {test} · "
                f"${r.cost_usd + r.proposer_cost_usd:.4f}",
                highlight=False,
                markup=False,
            )

    def run(self, original: dict[str, str]) -> None:
        try:
            self.rounds_loop(original)
        except KeyboardInterrupt:
            self.stopped = "interrupted"
        if self.stopped == "interrupted":
            self.console.print(
                "\n[yellow]interrupted[/yellow]"
                + ("; rerun with --resume to go on" if self.journal.path else ""),
                highlight=False,
            )
        elif self.stopped == "max-cost":
            self.console.print(
                f"[yellow]stopped at --max-cost ${self.settings.run_plan.max_cost:g}[/yellow]"
                + ("; rerun with --resume to go on" if self.journal.path else ""),
                highlight=False,
            )

    def rounds_loop(self, original: dict[str, str]) -> None:
        items = self.task.items
        result = self.score(0, original)
        self.scored_round(0, original, original, result)
        if result is None or not result.complete:
            self.stopped = self.stopped or "max-cost"
            return
        self.scores[0] = (original, result)
        current, current_score = original, result
        attempts = [(original, *result.counts(items, "train"))]
        for round_no in range(1, self.settings.descriptions.optimize_rounds + 1):
            passed, total = current_score.counts(items, "train")
            if passed == total:
                self.stopped = "train all passing"
                return
            if self.out_of_money():
                self.stopped = "max-cost"
                return
            event = self.journal.proposals.get(round_no)
            if event is None:
                prompt, allowed = self.task.request(current, current_score, attempts, total)
                candidate, refused, cost, _ = run_async(
                    self.proposer.ask(self.task, prompt, allowed, current)
                )
                self.spent += cost
                event = {
                    "event": "proposal",
                    "round": round_no,
                    "candidate": candidate,
                    "refused": refused,
                    "cost": round(cost, 6),
                }
                self.journal.append(event)
            candidate = event["candidate"]
            if candidate is None:
                self.rounds.append(
                    OptimizationRoundRecord(
                        round=round_no,
                        status="dropped",
                        proposer_cost_usd=event["cost"],
                        refused=event["refused"],
                    )
                )
                self.say(self.rounds[-1])
                continue
            result = self.score(round_no, candidate)
            self.scored_round(
                round_no, candidate, original, result, event["cost"], event["refused"]
            )
            if result is None or not result.complete:
                self.stopped = self.stopped or "max-cost"
                return
            self.scores[round_no] = (candidate, result)
            attempts.append((candidate, *result.counts(items, "train")))
            current, current_score = candidate, result
        passed, total = current_score.counts(items, "train")
        self.stopped = "train all passing" if passed == total else "rounds"

    def record(self, original: dict[str, str]) -> tuple[OptimizationRecord, dict[str, str]]:
        """The loop as a record, and the best candidate: by test score, then train score, then
        the shorter (then the earlier round: the original wins a full tie)."""
        by_round = {r.round: r for r in self.rounds if r.status == "scored"}

        def rank(round_no: int) -> tuple:
            r, candidate = by_round[round_no], self.scores[round_no][0]
            train = r.train_score or 0.0
            test = r.test_score if r.test_total else train
            return test, train, -sum(len(d) for d in candidate.values()), -round_no

        best_round = max(self.scores, key=rank)
        best = self.scores[best_round][0]
        descriptions = self.settings.descriptions
        record = OptimizationRecord(
            target=self.task.kind,
            subject=self.task.subject,
            optimizer_model=descriptions.optimizer_model,
            holdout=descriptions.holdout,
            seed=self.settings.crowd.seed,
            runs=self.settings.run_plan.runs or C.DEFAULT_OPTIMIZE_RUNS,
            rounds_requested=descriptions.optimize_rounds,
            split=[
                SplitRecord(item=i.key, stratum=i.stratum, split=i.split) for i in self.task.items
            ],
            original=original,
            rounds=self.rounds,
            best_round=best_round,
            improved=best_round != 0,
            best={n: d for n, d in best.items() if d != original.get(n)},
            stopped=self.stopped,
            cost_usd=round(sum(r.cost_usd + r.proposer_cost_usd for r in self.rounds), 6),
        )
        return record, best


def optimize_mode(settings: Settings, console: Console) -> int:
    """--optimize: score the current description(s) on a stratified train/test split, ask the
    optimizer model for new ones from the train failures, score each the same way, keep the best
    by test score; the report, the JSON and a ready file say what was found."""
    if bool(settings.inputs.skill) == bool(settings.inputs.csv) or (
        settings.inputs.skill and not settings.inputs.trigger
    ):
        raise InputError(
            "--optimize needs --skill S with --trigger EVALS, or --csv SUITE",
            hint="e.g. --optimize --skill examples/skills/warehouse-sql --trigger "
            "examples/triggers/warehouse-sql-trigger.md",
        )
    if settings.run_plan.auto_runs:
        raise UsageProblem(
            "--runs auto does not apply to --optimize runs: every candidate is scored on the "
            "same number of runs (give --runs N)"
        )
    if len(settings.claude_code.claude_bins) > 1:
        raise UsageProblem(
            "--optimize runs one Claude Code version: give --claude-bin once (a version matrix "
            "is a --skill run)"
        )
    runs = settings.run_plan.runs or C.DEFAULT_OPTIMIZE_RUNS
    settings = replace(settings, run_plan=replace(settings.run_plan, runs=runs))
    task: Any = (
        _SkillDescriptionTask(settings) if settings.inputs.skill else _ToolDescriptionTask(settings)
    )
    items = stratified_split(task.items, settings.descriptions.holdout, settings.crowd.seed)
    if settings.run_plan.dry_run:
        print_estimate(console, _estimate_optimization(task, settings))
        return 0
    # a leftover journal without --resume (or --resume without -o): one line
    continues_earlier_run(settings.run_plan, settings.outputs.output)
    try:
        task.prepare()
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted[/yellow] before the first run: nothing was spent")
        return interrupted_exit_code()
    original = task.original()
    fingerprint = hashlib.sha256(
        json.dumps(
            [
                task.kind,
                original,
                [(i.key, i.stratum, i.split) for i in items],
                settings.run_plan.runs,
                settings.api.model,
                settings.trigger_runs.trigger_model,
                settings.run_plan.threshold,
                settings.trigger_runs.trigger_threshold,
                *(
                    [[s.fingerprint for s in task.crowd.steps]]
                    if getattr(task, "crowd", None)
                    else []
                ),
            ]
        ).encode()
    ).hexdigest()[:16]
    journal = _OptimizeJournal(settings, fingerprint)
    loop = OptimizeLoop(task, settings, console, journal)
    loop.run(original)
    if 0 not in loop.scores:
        journal.close(remove=False)
        console.print(
            "[yellow]the original was not scored to the end[/yellow]: nothing to compare"
            + ("; rerun with --resume" if journal.path else ""),
            highlight=False,
        )
        return interrupted_exit_code() if loop.stopped == "interrupted" else 1
    record, best = loop.record(original)
    best_file = optimized_file_path(settings)
    if record.improved and best_file:
        write_text_atomic(best_file, task.best_file_text(best))
        record.best_file = str(best_file)
    results = task.results(loop.scores[record.best_round][1], settings)
    results.metadata.evaluation = "optimize"
    if task.kind == "tools":
        results.metadata.tool_overrides = {
            n: {"description": d} for n, d in record.best.items()
        } or None
    results.sections["optimization"] = record
    write_outputs(results, settings.outputs, console)
    journal.close(remove=loop.stopped not in ("max-cost", "interrupted"))
    print_optimization(console, record)
    return interrupted_exit_code() if loop.stopped == "interrupted" else 0
