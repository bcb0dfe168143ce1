"""The crowded room: decoys, the crowd's steps, and the runners that put the skill or the tools
among them.

May import: the rooms above the runners, the runners above it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import prompts
import test_constants as C

from ..claude_code import run_claude_query
from ..dry_run import CostEstimate
from ..errors import EvalError, FatalApiError, InputError, is_api_error
from ..files import write_text_atomic
from ..hub.calls import McpHub
from ..hub.processes import DecoyToolServer
from ..hub.stdio import explain_exception, serving
from ..hub.tools import ToolOutcome, tool_result_text
from ..loaders.distractors import (
    CrowdStep,
    DecoysFile,
    DecoySkill,
    DecoyTool,
    SkillCrowd,
    decoy_skills_problem,
    decoy_tools_problem,
    load_decoys_file,
    load_distractor_skills,
    parse_distractor_source,
    parse_steps,
    seeded_order,
)
from ..loaders.servers import load_mcp_config
from ..pipeline import Job
from ..redaction import Redactor
from ..results_schema.sections import CrowdingRecord, DistractorRecord
from ..run_types import Distractor, Usage, cli_model_id, cost_usd, estimated_tokens
from ..scoring.crowd import consolidation_hints, tool_crowd_point, tool_thieves
from ..session import AnthropicModel, ModelRequest, api_error_message
from ..sinks import json_text, one_line, terminal_text
from .skills import SkillRunner, estimate_claude_runs
from .tool_use import count_prefix_tokens, estimate_tool_runs

__all__ = [
    "CrowdedSkillRunner",
    "ToolCrowd",
    "combined_cost",
    "print_decoy_estimate",
    "print_step_costs",
    "skill_crowd_for",
]

if TYPE_CHECKING:
    from ..hub.tools import ToolSpec
    from ..loaders.distractors import DistractorSource
    from ..results_schema.document import ClaudeRun
    from ..run_types import ServerSpec, SkillInfo, TestCase, Transcript
    from ..settings import Crowd, ModelApi, RunPlan, Servers
    from .skills import SkillSuitePlan
    from .tool_use import ToolUseRunner


# --distractors (skills) and --distractor-tools (tools): what sits beside the skill or the tools
# under test, added step by step in a seeded order. lookalike:N decoys are written by the model
# through the forced `write_decoys` tool, one call per set, and kept in --distractors-file.
_DECOYS_TOOL_CHOICE = {"type": "tool", "name": "write_decoys"}


def _decoys_tool(kind: str) -> dict:
    """The decoy writer answers through this tool only: a list of {name, description} (tools:
    and `like`, the real tool whose arguments the decoy takes)."""
    item: dict[str, Any] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
        "required": ["name", "description"],
    }
    if kind == "tools":
        item["properties"]["like"] = {"type": "string"}
    return {
        "name": "write_decoys",
        "description": "Record the decoys. Call it exactly once, with the whole set.",
        "input_schema": {
            "type": "object",
            "properties": {"decoys": {"type": "array", "items": item}},
            "required": ["decoys"],
        },
    }


def _decoy_prompt(kind: str, subject: Any, count: int, seed: int) -> str:
    """The decoy writer's request: the skill (SkillInfo) or the tools (ToolSpecs) imitated."""
    if kind == "skills":
        return prompts.DECOY_SKILLS_PROMPT.format(
            name=subject.name,
            description=subject.description,
            count=count,
            seed=seed,
            limit=C.MAX_SKILL_DESCRIPTION_CHARS,
        )
    tools = "\n".join(f"- {t.name}: {one_line(t.description, 400)}" for t in subject)
    return prompts.DECOY_TOOLS_PROMPT.format(tools=tools, count=count, seed=seed)


def _parsed_decoys(kind: str, data: dict, count: int, tools: dict[str, ToolSpec]) -> list[Any]:
    """The `write_decoys` call's decoys (the first `count`), or ValueError saying why not."""
    given = data.get("decoys")
    if not isinstance(given, list) or not all(isinstance(d, dict) for d in given):
        raise ValueError("`decoys` must be a list of objects")
    if len(given) < count:
        raise ValueError(f"{len(given)} decoys were written, {count} were asked for")
    decoys: list[Any] = []
    for item in given[:count]:
        name, description = item.get("name"), item.get("description")
        if not isinstance(name, str) or not isinstance(description, str):
            raise ValueError("every decoy needs a `name` and a `description` (text)")
        if kind == "skills":
            decoys.append(DecoySkill(name=name.strip(), description=description.strip()))
        else:
            like = str(item.get("like") or "")
            schema = tools[like].input_schema if like in tools else {"type": "object"}
            decoys.append(
                DecoyTool(
                    name=name.strip(),
                    description=description.strip(),
                    like=like,
                    input_schema=schema,
                )
            )
    return decoys


async def _write_decoys(
    kind: str, prompt: str, count: int, taken: Iterable[str], api: ModelApi, tools: Any = None
) -> tuple[list[Any], float]:
    """One set of decoys from the model, through the forced `write_decoys` tool: one call (an
    unusable set is sent back once with the reason). Returns the decoys and what the calls cost;
    a set that is still unusable is one line (EvalError)."""
    model = AnthropicModel(**api.client_options())
    messages: list[dict] = [{"role": "user", "content": prompt}]
    spent, reason = 0.0, ""
    taken = set(taken)
    try:
        for _ in range(2):
            reply = await model.complete(
                ModelRequest(
                    C.DEFAULT_DECOY_MODEL,
                    prompts.DECOY_SYSTEM_PROMPT,
                    list(messages),
                    [_decoys_tool(kind)],
                    C.DECOY_MAX_TOKENS,
                    tool_choice=_DECOYS_TOOL_CHOICE,
                )
            )
            spent += cost_usd(reply.usage, C.DEFAULT_DECOY_MODEL)
            call: dict = next(
                (b for b in reply.content if b.get("type") == "tool_use"),
                {"input": {}, "id": ""},
            )
            given: dict = call["input"] if isinstance(call.get("input"), dict) else {}
            try:
                decoys = _parsed_decoys(kind, given, count, tools or {})
                problem = (
                    decoy_skills_problem(decoys, taken)
                    if kind == "skills"
                    else decoy_tools_problem(decoys, taken)
                )
            except ValueError as exc:
                problem = str(exc)
            if problem is None:
                return decoys, spent
            reason = problem
            messages += [
                {"role": "assistant", "content": reply.content},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call.get("id", ""),
                            "content": prompts.DECOYS_INVALID.format(reason=problem),
                            "is_error": True,
                        }
                    ],
                },
            ]
    except FatalApiError:
        raise
    except Exception as exc:
        if not is_api_error(exc):
            raise
        raise EvalError(f"writing the decoys failed: {api_error_message(exc)}") from None
    finally:
        await model.close()
    raise EvalError(f"writing the decoys failed: the model's set was unusable twice ({reason})")


def _estimate_decoys(count: int) -> CostEstimate:
    """--dry-run: one `write_decoys` call for a set of `count` decoys."""
    prompt = estimated_tokens([prompts.DECOY_SYSTEM_PROMPT, prompts.DECOY_TOOLS_PROMPT])
    typical = Usage(input_tokens=prompt, output_tokens=count * C.ESTIMATED_DECOY_TOKENS)
    most = Usage(input_tokens=prompt * 2, output_tokens=2 * count * C.ESTIMATED_DECOY_TOKENS)
    model = C.DEFAULT_DECOY_MODEL
    return CostEstimate(
        1, model, 1, 2, cost_usd(typical, model), cost_usd(most, model), f"{count} decoys"
    )


class _DecoyKeeper:
    """--distractors-file: the decoy sets kept so far, read once; a set it holds (same subject,
    same --seed, at least N decoys) costs nothing, any other is written by the model and kept."""

    def __init__(self, crowd: Crowd, api: ModelApi, dry_run: bool, console: Console) -> None:
        self.seed, self.api, self.dry_run, self.console = str(crowd.seed), api, dry_run, console
        self.path = Path(crowd.distractors_file) if crowd.distractors_file else None
        self.file = load_decoys_file(self.path) if self.path else DecoysFile(format=C.DECOYS_FORMAT)
        self.cost = 0.0
        self.written = 0  # model calls made for sets the file did not hold
        self.missing: list[int] = []  # --dry-run: the sizes of the sets a run would write

    def kept(self, kind: str, subject: str) -> list[Any] | None:
        sets = (self.file.skills if kind == "skills" else self.file.tools).get(subject, {})
        return sets.get(self.seed)

    def decoys(
        self,
        kind: str,
        subject: str,
        count: int,
        prompt: str,
        taken: Iterable[str],
        tools: Any = None,
    ) -> list[Any]:
        """`count` decoys imitating `subject`: kept, or written now (placeholders on --dry-run)."""
        kept = self.kept(kind, subject)
        if kept is not None and len(kept) >= count:
            return list(kept[:count])
        if self.dry_run:
            self.missing.append(count)
            filler = "x" * (C.ESTIMATED_DECOY_TOKENS * 4)
            if kind == "skills":
                return [DecoySkill(name=f"decoy-{i}", description=filler) for i in range(count)]
            return [DecoyTool(name=f"decoy_{i}", description=filler) for i in range(count)]
        decoys, spent = asyncio.run(_write_decoys(kind, prompt, count, taken, self.api, tools))
        self.cost += spent
        self.written += 1
        self.console.print(
            f"decoys: {count} written by {C.DEFAULT_DECOY_MODEL} for {terminal_text(subject)} "
            f"(${spent:.4f})" + (f", kept in {terminal_text(self.path)}" if self.path else ""),
            highlight=False,
            markup=False,
        )
        sets = self.file.skills if kind == "skills" else self.file.tools
        sets.setdefault(subject, {})[self.seed] = decoys
        if self.path is not None:
            write_text_atomic(
                self.path, json_text(self.file.model_dump(mode="json", by_alias=True)) + "\n"
            )
        return decoys

    def estimate(self) -> CostEstimate | None:
        if not self.missing:
            return None
        parts = [_estimate_decoys(n) for n in self.missing]
        return CostEstimate(
            len(parts),
            C.DEFAULT_DECOY_MODEL,
            len(parts),
            2 * len(parts),
            sum(p.cost_expected for p in parts),
            sum(p.cost_max for p in parts),
            f"{sum(self.missing)} decoys to write",
        )


def _sources_of(values: Sequence[str], flag: str, tools: bool = False) -> list[DistractorSource]:
    sources = [parse_distractor_source(v, flag, tools) for v in values]
    if sum(s.kind == "lookalike" for s in sources) > 1:
        raise InputError(f"{flag}: give lookalike:N once", hint="e.g. lookalike:20")
    return sources


def skill_crowd_for(
    crowd: Crowd,
    skills: Sequence[SkillInfo],
    console: Console,
    api: ModelApi,
    dry_run: bool,
    whole: bool = False,
) -> SkillCrowd | None:
    """The crowd of --distractors (None without): folders and `installed` read, lookalike:N decoys
    kept or written (one call per skill under test, on `api`; placeholders on a dry run), the
    seeded order, and the steps (`whole`: one step with every distractor, whatever
    --distractor-steps says). The crowd's options were checked together first (the modes')."""
    if not crowd.distractors:
        return None
    sources = _sources_of(crowd.distractors, "--distractors")
    names = [s.name for s in skills]
    found, skipped = load_distractor_skills(sources, names)
    if any(s.kind == "installed" for s in sources) and not any(
        d.source == "installed" for d in found
    ):
        console.print(
            "note: --distractors installed: no skill in ~/.claude/skills nor in your plugins",
            highlight=False,
            markup=False,
        )
    keeper = _DecoyKeeper(crowd, api, dry_run, console)
    for source in (s for s in sources if s.kind == "lookalike"):
        for skill in skills:  # a set per skill under test; a name another set took is left out
            decoys = keeper.decoys(
                "skills",
                skill.name,
                source.count,
                _decoy_prompt("skills", skill, source.count, crowd.seed),
                names,
            )
            taken = {*names, *(d.name for d in found)}
            found += [
                Distractor(d.name, d.description, "lookalike")
                for d in decoys
                if d.name not in taken
            ]
    by_name = {d.name: d for d in found}
    ordered = [by_name[name] for name in seeded_order(list(by_name), crowd.seed)]
    steps = (None if whole else parse_steps(crowd.distractor_steps, "--distractor-steps")) or (
        len(ordered),
    )
    if max(steps) > len(ordered):
        raise InputError(
            f"--distractor-steps asks for {max(steps)} distractors; the sources give {len(ordered)}",
            hint="add sources, or lower the steps"
            + (f" ({len(skipped)} candidates were left out)" if skipped else ""),
        )

    def fingerprint(count: int) -> str:
        parts = [(d.name, d.description, d.source, str(d.folder)) for d in ordered[:count]]
        return hashlib.sha256(json.dumps([count, parts]).encode()).hexdigest()[:16]

    return SkillCrowd(
        [s.text for s in sources],
        crowd.seed,
        ordered,
        [CrowdStep(n, tuple(ordered[:n]), fingerprint(n)) for n in steps],
        skipped,
        crowd.distractors_file,
        keeper.cost,
        named=len(steps) > 1,
        keeper=keeper,
    )


def combined_cost(parts: Sequence[CostEstimate], model: str, detail: str) -> CostEstimate:
    return CostEstimate(
        sum(p.runs for p in parts),
        model,
        sum(p.calls_expected for p in parts),
        sum(p.calls_max for p in parts),
        sum(p.cost_expected for p in parts),
        sum(p.cost_max for p in parts),
        detail,
    )


class CrowdedSkillRunner(SkillRunner):
    """A skill suite whose trigger queries run at every step of a crowd: the step's distractors
    installed beside the skills in each run's project (or HOME), the step part of each run's key;
    knowledge, task and security tests run as they always do."""

    def __init__(
        self,
        plan: SkillSuitePlan,
        crowd: SkillCrowd,
        ignore: Sequence[Path] = (),
        redactor: Redactor | None = None,
    ) -> None:
        super().__init__(plan, ignore, redactor)
        self.crowd = crowd
        self.step_fingerprints = {
            step.count: hashlib.sha256((self.fingerprint + step.fingerprint).encode()).hexdigest()[
                :16
            ]
            for step in crowd.steps
        }
        self.step_costs: list[tuple[int, CostEstimate]] = []

    def jobs(self) -> list[Job]:
        crowded = []
        for step in self.crowd.steps:
            key = self.step_fingerprints[step.count]
            for query, runs, timeout in self.plan.trigger_jobs():
                for model in self.plan.trigger_models:
                    settings = replace(
                        self.plan.trigger_settings, timeout=timeout, **self.plan.variant(model)
                    )
                    crowded += [
                        Job(
                            ("trigger", query, i, key, model),
                            ("trigger", query, settings, i, step),
                            ("trigger", query, i, model, step.count),
                        )
                        for i in range(1, runs + 1)
                    ]
        return crowded + [job for job in super().jobs() if job.key[0] != "trigger"]

    async def run(self, job: Job) -> ClaudeRun:
        label, query, settings, run, *more = job.payload
        if not more or not isinstance(more[0], CrowdStep):
            return await super().run(job)
        step = more[0]
        record = await run_claude_query(
            query,
            self.plan.skills,
            self.through_cache(settings, run),
            run,
            distractors=step.installed,
        )
        record.test, record.model, record.distractors = (
            label,
            settings.label or settings.model,
            step.count,
        )
        return record

    def result_fingerprint(self, record: ClaudeRun) -> str:
        if record.test == "trigger" and record.distractors in self.step_fingerprints:
            return self.step_fingerprints[record.distractors]
        return super().result_fingerprint(record)

    async def estimate(self, jobs: Sequence[Job]) -> CostEstimate:
        """The other tests as ever, and each step's trigger runs priced with its distractors'
        listing in every call (Claude Code lists each skill by name and description)."""
        steps = [j for j in jobs if len(j.payload) > 4 and isinstance(j.payload[4], CrowdStep)]
        others = [
            j for j in jobs if not (len(j.payload) > 4 and isinstance(j.payload[4], CrowdStep))
        ]
        parts = [await super().estimate(others)] if others else []
        self.step_costs = []
        for step in self.crowd.steps:
            mine = [j for j in steps if j.payload[4] is step]
            if not mine:
                continue
            cost = estimate_claude_runs(mine)
            listing = estimated_tokens([[d.name, d.description] for d in step.installed])
            for job in mine:
                model = cli_model_id(job.payload[2].model)
                calls = min(C.TYPICAL_CLAUDE_RUN_CALLS, job.payload[2].max_turns)
                read = cost_usd(Usage(cache_read_input_tokens=listing), model)
                cost.cost_expected += calls * read
                cost.cost_max += job.payload[2].max_turns * read
            self.step_costs.append((step.count, cost))
            parts.append(cost)
        detail = (parts[-1].detail if parts else "") + " · with the distractors' listing"
        return combined_cost(parts, ", ".join(self.plan.trigger_models), detail)


def print_decoy_estimate(console: Console, keeper: _DecoyKeeper | None) -> None:
    """--dry-run of lookalike:N: the decoy sets the file does not hold yet, and their price."""
    estimate = keeper.estimate() if keeper else None
    if estimate is not None:
        console.print(
            f"  decoys: {estimate.detail}, {estimate.calls_expected} call(s) on {estimate.model}: "
            f"about ${estimate.cost_expected:.4f} (at most ${estimate.cost_max:.4f})",
            highlight=False,
            markup=False,
        )


def print_step_costs(
    console: Console, steps: Sequence[tuple[int, CostEstimate]], unit: str
) -> None:
    """--dry-run of a crowd: what each step costs."""
    for count, cost in steps:
        console.print(
            f"  step {count} {unit}: {cost.runs} run(s), about ${cost.cost_expected:.4f} (at most "
            f"${cost.cost_max:.4f})",
            highlight=False,
            markup=False,
        )


class _CrowdedHub:
    """What one conversation of a tool crowd's step sees: the servers' own tools and the step's
    distractor tools. A call to a distractor never reaches a real server: a decoy's is answered
    by its in-process server (a neutral error), a --distractor-tools server's by the evaluator."""

    def __init__(self, hub: McpHub, offered: set[str], crowd: ToolCrowd) -> None:
        self.hub, self.offered, self.crowd = hub, offered, crowd
        definitions = [
            {k: v for k, v in d.items() if k != "cache_control"}
            for d in hub.anthropic_tools
            if d["name"] in offered
        ]
        if definitions:
            definitions[-1] = dict(definitions[-1], cache_control={"type": "ephemeral"})
        self.anthropic_tools = definitions
        self.tools = {name: hub.tools[name] for name in offered if name in hub.tools}

    def tool_names(self) -> list[str]:
        return sorted(self.tools)

    async def call_tool(self, name: str, arguments: Any) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None or tool.server not in self.crowd.distractor_servers:
            if tool is None and name in self.hub.tools:  # a distractor of another step
                return ToolOutcome(
                    f"Unknown tool: {name}. Available tools: {', '.join(self.tool_names())}",
                    True,
                    None,
                    0.0,
                    executed=False,
                )
            return await self.hub.call_tool(name, arguments)
        start = time.perf_counter()
        text, executed = prompts.DECOY_TOOL_RESULT, False
        connection = self.hub.connections.get(tool.server)
        if tool.server == self.crowd.decoy_server_name and connection and connection.client:
            try:
                result = await asyncio.wait_for(
                    serving(
                        connection,
                        connection.client.call_tool(
                            tool.remote_name, arguments if isinstance(arguments, dict) else {}
                        ),
                    ),
                    C.DECOY_TOOL_TIMEOUT,
                )
                text, executed = tool_result_text(result, self.hub.max_result_chars), True
            except Exception as exc:
                text = f"Tool call {explain_exception(exc)}"
        return ToolOutcome(
            text,
            True,
            tool.server,
            round((time.perf_counter() - start) * 1000, 2),
            source="decoy",
            executed=executed,
        )


class ToolCrowd:
    """--distractor-tools: the servers of mcpServers files and lookalike:N decoy tools offered
    beside the servers' own, step by step (--tool-steps) in a seeded order. The suite's cases run
    once per step (named NAME (+K tools) when there are several steps)."""

    decoy_server_name = "decoys"

    def __init__(
        self,
        crowd: Crowd,
        cases: Sequence[TestCase],
        servers: list[ServerSpec],
        console: Console,
        api: ModelApi,
        plan: RunPlan,
        server_limits: Servers,
    ) -> None:
        self.base_cases, self.seed, self.decoys_file = cases, crowd.seed, crowd.distractors_file
        self.models, self.server_limits = api.models, server_limits
        self.sources = _sources_of(crowd.distractor_tools, "--distractor-tools", tools=True)
        taken = {s.name for s in servers}
        self.config_specs: list[ServerSpec] = []
        for source in self.sources:
            if source.kind == "servers" and source.path is not None:
                for spec in load_mcp_config(source.path):
                    while spec.name in taken or spec.name == self.decoy_server_name:
                        spec.name += "_distractor"
                    taken.add(spec.name)
                    self.config_specs.append(spec)
        Redactor.learn(self.config_specs)
        self.distractor_servers = {s.name for s in self.config_specs}
        self.keeper = _DecoyKeeper(crowd, api, plan.dry_run, console)
        self.decoy_server: DecoyToolServer | None = None
        self.steps: list[int] = list(parse_steps(crowd.tool_steps, "--tool-steps") or ())
        self.order: list[str] = []  # every distractor tool, in the seeded order
        self.real_tools: list[str] = []
        self.descriptions: dict[str, str] = {}
        self.source_of: dict[str, str] = {}  # distractor tool -> lookalike, or its server
        self.cases: list[TestCase] = []
        self.step_of: dict[str, tuple[int, str]] = {}  # expanded case name -> (step, its case)
        self.tokens: dict[int, int] = {}
        self.total = 0  # distractor tools the sources give
        self.skipped: list[str] = []
        lookalike = any(source.kind == "lookalike" for source in self.sources)
        if lookalike and (plan.resume or plan.retry_errors) and not crowd.distractors_file:
            raise InputError(
                "--resume of a run with lookalike:N decoy tools needs the decoys it ran with",
                hint="give the --distractors-file the first run wrote (add it to both runs)",
            )

    def prepare(self, servers: list[ServerSpec]) -> list[ServerSpec]:
        """Lists the real servers' tools and the distractor servers' (a distractor server offering
        a tool named like one under test is left out: it is most likely the same server), keeps
        or writes the decoys, and returns every server a crowded run connects to: the real ones,
        the distractors' and the in-process decoys."""

        async def listing(specs: list[ServerSpec]) -> dict[str, ToolSpec]:
            if not specs:
                return {}
            async with McpHub(
                specs, self.server_limits.tool_timeout, self.server_limits.max_result_chars
            ) as hub:
                return {t.remote_name: t for t in hub.tools.values()}

        real = asyncio.run(listing(servers))
        kept = []
        for spec in self.config_specs:
            offered = asyncio.run(listing([spec]))
            clash = sorted(set(offered) & set(real))
            if clash:
                self.skipped.append(f"server {spec.name}: offers {clash[0]}, a tool under test")
                continue
            kept.append(spec)
            self.total += len(offered)
        self.config_specs = kept
        self.distractor_servers = {s.name for s in kept}
        lookalike = next((s for s in self.sources if s.kind == "lookalike"), None)
        if lookalike is not None:
            subject = ", ".join(sorted({t.server for t in real.values()})) or "tools"
            decoys = self.keeper.decoys(
                "tools",
                subject,
                lookalike.count,
                _decoy_prompt("tools", list(real.values()), lookalike.count, self.seed),
                list(real),
                real,
            )
            self.decoy_server = DecoyToolServer(decoys, self.decoy_server_name)
            self.distractor_servers.add(self.decoy_server_name)
            self.total += len(decoys)
        extra = [self.decoy_server.spec(self.decoy_server_name)] if self.decoy_server else []
        return [*servers, *self.config_specs, *extra]

    def expand(self, total: int) -> list[TestCase]:
        """The cases once per step (the steps known once the distractors are counted)."""
        if not self.steps:
            self.steps = [total]
        if max(self.steps) > total:
            raise InputError(
                f"--tool-steps asks for {max(self.steps)} distractor tools; the sources give {total}",
                hint="add sources (lookalike:N), or lower the steps",
            )
        named = len(self.steps) > 1
        self.cases, self.step_of = [], {}
        for step in self.steps:
            for case in self.base_cases:
                name = f"{case.name} (+{step} tools)" if named else case.name
                self.cases.append(replace(case, name=name))
                self.step_of[name] = (step, case.name)
        return self.cases

    def connected(self, hub: McpHub) -> None:
        distractors = sorted(n for n, t in hub.tools.items() if t.server in self.distractor_servers)
        self.real_tools = sorted(n for n in hub.tools if n not in distractors)
        self.order = seeded_order(distractors, self.seed)
        self.descriptions = {n: t.description for n, t in hub.tools.items()}
        self.source_of = {
            n: "lookalike" if hub.tools[n].server == self.decoy_server_name else hub.tools[n].server
            for n in distractors
        }
        for step in self.steps:
            view = self.view(hub, step)
            self.tokens[step] = (
                estimated_tokens(view.anthropic_tools) if view.anthropic_tools else 0
            )

    def view(self, hub: McpHub, step: int) -> _CrowdedHub:
        return _CrowdedHub(hub, {*self.real_tools, *self.order[:step]}, self)

    def hub_for(self, hub: McpHub, case: TestCase) -> _CrowdedHub:
        step = self.step_of.get(case.name, (0, case.name))[0]
        return self.view(hub, step)

    async def estimate(
        self, runner: ToolUseRunner, jobs: Sequence[Job]
    ) -> list[tuple[int, CostEstimate]]:
        """--dry-run: each step's runs, priced with that step's tool definitions."""
        found = []
        async with runner.connect() as hub:
            for step in self.steps:
                mine = [j for j in jobs if self.step_of.get(j.payload[0].name, (None,))[0] == step]
                tools = self.view(hub, step).anthropic_tools
                prefix, counted = await count_prefix_tokens(
                    runner.api.base_url, runner.run_settings, tools
                )
                by_model: dict[str, list[Job]] = {}
                for job in mine:
                    by_model.setdefault(job.payload[2], []).append(job)
                found.append(
                    (
                        step,
                        combined_cost(
                            [
                                estimate_tool_runs(
                                    model_jobs,
                                    replace(runner.run_settings, model=model),
                                    prefix,
                                    counted,
                                    len(tools),
                                    runner.grading.judge_model,
                                )
                                for model, model_jobs in by_model.items()
                            ],
                            ", ".join(by_model),
                            "",
                        ),
                    )
                )
        return found

    def record(self, transcripts: Sequence[Transcript]) -> CrowdingRecord:
        points, thieves = [], []
        totals: dict[tuple[str, str, int], int] = {}
        crowd = set(self.order)
        # each model as its runs name it: through Claude Code, `MODEL via claude-code ...`
        present = list(dict.fromkeys(t.model for t in transcripts))
        models = [m for m in self.models if m in present] + [
            m for m in present if m not in self.models
        ]
        for step in self.steps:
            for model in models:
                mine = [
                    t
                    for t in transcripts
                    if t.model == model and self.step_of.get(t.case.name, (None,))[0] == step
                ]
                if not mine:
                    continue
                points.append(
                    tool_crowd_point(
                        step, model, mine, len(self.real_tools) + step, self.tokens.get(step, 0)
                    )
                )
                thieves += tool_thieves(
                    step, model, mine, lambda t: self.step_of[t.case.name][1], crowd
                )
                for t in mine:
                    for tool in t.case.expected_tools:
                        key = (tool, model, step)
                        totals[key] = totals.get(key, 0) + 1
        return CrowdingRecord(
            kind="tools",
            steps=self.steps,
            seed=self.seed,
            sources=[s.text for s in self.sources],
            distractors=[
                DistractorRecord(
                    name=name,
                    source=self.source_of.get(name, ""),
                    description=self.descriptions.get(name, ""),
                )
                for name in self.order
            ],
            points=points,
            thieves=thieves,
            hints=consolidation_hints("tool", thieves, totals, self.descriptions),
            decoys_file=self.decoys_file,
            decoy_cost_usd=round(self.keeper.cost, 6),
            skipped=self.skipped,
        )
