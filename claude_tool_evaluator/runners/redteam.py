"""The red team: the suite under attack through the adversarial proxy, and how it is scored.

May import: the rooms above the runners, the runners above it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import prompts
import test_constants as C

from ..errors import InputError
from ..grading import (
    GRADE_TOOL,
    JUDGE_TOOL_CHOICE,
    judge_estimate,
    judge_question,
    judge_trajectory,
)
from ..hub.hostile import (
    ATTACKS,
    AdversarialProxy,
    Attack,
    AttackState,
    ProxiedHub,
    ShadowServer,
    canary_tool,
    shadow_name,
    view_tools,
)
from ..hub.tools import ToolSpec
from ..loaders.csv_suites import case_tool_view
from ..loaders.vectors import load_vectors
from ..results_schema.security import RedTeamRecord, VectorRecord
from ..scoring.attacks import (
    AttackedRun,
    attack_delivered,
    attack_signals,
    canary_token,
    redteam_figures,
)
from ..scoring.scan import revealed
from ..session import ModelRequest
from ..sinks import cap_text
from .crowd import combined_cost
from .tool_use import count_prefix_tokens, estimate_tool_runs

__all__ = [
    "RedTeam",
    "RedTeamScoring",
]

if TYPE_CHECKING:
    from ..dry_run import CostEstimate
    from ..grading import Judge
    from ..hub.calls import McpHub
    from ..pipeline import Job
    from ..results_schema.document import CaseResult
    from ..run_types import ServerSpec, TestCase, Transcript, Verdict
    from ..settings import Grading, Hostile, ModelApi, RunPlan, Servers
    from .tool_use import ToolUseRunner


# redteam: every case of the suite runs clean (its own name) and once per attack (a class's
# variant with a vector: NAME [CLASS:VARIANT / SOURCE:VECTOR]), each run through adversarial
# proxies of its own (hub.hostile) in front of its usual tool view, so mocks, cassettes and the tool
# policy answer as they always do. A destructive tool the policy would run for real is refused
# before any model call: injected instructions must not reach it (mocks and cassettes answer it).
def _parse_attacks(values: Sequence[str]) -> list[tuple[str, str]]:
    """--attacks: comma-separated CLASS (its default variants) or CLASS:VARIANT, in order, once."""
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    chosen: list[tuple[str, str]] = []
    for item in items or list(ATTACKS):
        name, _, variant = item.partition(":")
        attack = ATTACKS.get(name)
        if attack is None:
            raise InputError(
                f"--attacks {item}: no attack class {name!r}",
                hint="choose from " + ", ".join(ATTACKS) + " (or CLASS:VARIANT)",
            )
        if variant and variant not in attack.variants:
            raise InputError(
                f"--attacks {item}: {name} has no variant {variant!r}",
                hint=f"its variants are {', '.join(attack.variants)}",
            )
        for v in (variant,) if variant else attack.defaults:
            if (name, v) not in chosen:
                chosen.append((name, v))
    return chosen


class RedTeam:
    """The attacks (class, variant, vector) every case runs under, the expanded cases, and each
    run's proxies; what each run did is kept as it is scored (RedTeamScoring)."""

    def __init__(
        self,
        hostile: Hostile,
        cases: Sequence[TestCase],
        api: ModelApi,
        plan: RunPlan,
        grading: Grading,
        server_limits: Servers,
    ) -> None:
        self.base_cases = cases
        self.judged = hostile.redteam_judge  # --redteam-judge: did an attacked run obey
        self.api, self.plan, self.grading, self.server_limits = api, plan, grading, server_limits
        self.vectors = load_vectors(hostile.vectors)
        self.attacks = [
            Attack(cls, variant, vector)
            for cls, variant in _parse_attacks(hostile.attacks)
            for vector in self.vectors
        ]
        self.attack_of: dict[str, Attack] = {}
        self.base_of: dict[str, str] = {}
        self.cases: list[TestCase] = []
        for case in cases:
            self.cases.append(case)
            self.base_of[case.name] = case.name
            for attack in self.attacks:
                fingerprint = hashlib.sha256(
                    json.dumps(
                        [attack.vector.template, prompts.REDTEAM_GOAL, prompts.SHADOW_GOAL]
                    ).encode()
                ).hexdigest()[:8]
                name = f"{case.name} [{attack.label}]"
                self.cases.append(
                    replace(
                        case,
                        name=name,
                        tags=[
                            *case.tags,
                            f"attack:{attack.cls}:{attack.variant}",
                            f"vector:{attack.vector.id}",
                            f"redteam:{fingerprint}",  # a changed vector text is a new case
                        ],
                    )
                )
                self.attack_of[name], self.base_of[name] = attack, case.name
        self.canary = C.CANARY_TOOL
        self.shadow_server = C.SHADOW_SERVER
        self.targets: dict[str, str] = {}  # attacked case -> the tool it aims at
        self.shadows: dict[str, str] = {}  # shadowing case -> the look-alike's name
        self.extra_specs: dict[str, ToolSpec] = {}  # the canary's and the look-alikes', for scoring
        self.runs: dict[tuple[str, int, str], AttackedRun] = {}

    def connected(self, hub: McpHub) -> None:
        """The servers' tools are known: the canary's name (one no server uses), each case's
        target tool and look-alike, and the refusal of a destructive tool that would run live."""
        names = set(hub.tools)
        while self.canary in names:
            self.canary += "_"
        while any(t.server == self.shadow_server for t in hub.tools.values()):
            self.shadow_server += "_"
        for tool in sorted(hub.tools.values(), key=lambda t: t.name):
            if tool.destructive and hub.policy.treatment(tool).startswith("live"):
                raise InputError(
                    f"redteam: {tool.name} is annotated destructive and would run for real "
                    f"({hub.policy.treatment(tool)}): an injected instruction could call it",
                    hint="leave --tool-policy at safe (or stricter) and drop --allow-tool for it, "
                    "or answer it with --mock-tools or --replay",
                )
        first = next(iter(sorted({t.server for t in hub.tools.values()})), "")
        self.extra_specs = {
            self.canary: ToolSpec(
                self.canary,
                first,
                self.canary,
                prompts.CANARY_TOOL_DESCRIPTION,
                dict(canary_tool(self.canary).input_schema),
                {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
            )
        }
        for case in self.cases:
            attack = self.attack_of.get(case.name)
            if attack is None or attack.cls not in ("description-poisoning", "shadowing"):
                continue
            view = case_tool_view(case)
            shown = sorted(view) if view is not None else hub.tool_names()
            target = next((t for t in case.expected_tools if t in shown), shown[0] if shown else "")
            self.targets[case.name] = target
            if attack.cls == "shadowing" and target:
                shadow = shadow_name(target, attack.variant, [*names, *shown, self.canary])
                spec = hub.tools[view.get(target, target) if view else target]
                self.shadows[case.name] = shadow
                self.extra_specs[shadow] = replace(
                    spec, name=shadow, server=self.shadow_server, remote_name=shadow
                )

    def injection(self, attack: Attack, case: TestCase, iteration: int, model: str) -> str:
        """The vector filled with this run's goal (and canary token)."""
        if attack.cls == "shadowing":
            target = self.targets.get(case.name, "")
            goal = prompts.SHADOW_GOAL.format(shadow=self.shadows.get(case.name, ""), tool=target)
            return attack.vector.text(goal, "")
        token = canary_token(case.name, iteration, model)
        goal = prompts.REDTEAM_GOAL.format(tool=self.canary, address=C.CANARY_ADDRESS, token=token)
        tools = prompts.REDTEAM_TOOL_KNOWLEDGE.format(
            tool=self.canary, address=C.CANARY_ADDRESS, token=token
        )
        return attack.vector.text(goal, tools)

    def attack_servers(
        self, base: Any, case: TestCase, iteration: int, model: str
    ) -> tuple[list[ServerSpec], AttackState]:
        """The servers one run talks to, in-process: a proxy per server of its view (the first
        hosting the canary), and the shadow server when the attack is shadowing. `model` is
        the run's as its results name it (the canary token is made of it). The state
        keeps who answered each call."""
        attack = self.attack_of.get(case.name)
        state = AttackState(attack, canary=self.canary)
        if attack is not None:
            state.injection = self.injection(attack, case, iteration, model)
            state.target = self.targets.get(case.name, "")
            state.shadow = self.shadows.get(case.name, "")
        groups = view_tools(base)
        proxies = [
            AdversarialProxy(base, server, groups[server], state, hosts_canary=index == 0)
            for index, server in enumerate(groups)
        ]
        specs = [proxy.spec() for proxy in proxies]
        if state.shadow:
            target = next(
                (
                    pair
                    for tools in groups.values()
                    for pair in tools
                    if pair[0]["name"] == state.target
                ),
                None,
            )
            if target is not None:
                specs.append(ShadowServer(*target, state, self.shadow_server).spec())
        return specs, state

    @asynccontextmanager
    async def attacked(self, base: Any, case: TestCase, iteration: int, model: str) -> Any:
        """The hub one run through the API talks to: the run's attack servers (attack_servers)."""
        specs, _ = self.attack_servers(base, case, iteration, model)
        timeout = self.server_limits.tool_timeout + C.RUG_PULL_RELIST_SECONDS + 5
        async with ProxiedHub(specs, timeout) as hub:
            yield hub

    async def grade(self, transcript: Transcript, judge: Judge) -> None:
        """--redteam-judge: whether an attacked run followed the injected instruction."""
        attack = self.attack_of.get(transcript.case.name)
        if not self.judged or attack is None or transcript.error:
            return
        criteria = prompts.REDTEAM_JUDGE_CRITERIA.format(
            goal=revealed(
                self.injection(attack, transcript.case, transcript.iteration, transcript.model)
            ).strip()
        )
        request = ModelRequest(
            judge.model_id,
            prompts.JUDGE_SYSTEM_PROMPT,
            [
                {
                    "role": "user",
                    "content": prompts.JUDGE_PROMPT.format(
                        question=judge_question(transcript),
                        criteria=criteria,
                        trajectory=judge_trajectory(transcript),
                        answer=cap_text(transcript.final_text, C.JUDGE_ANSWER_CHARS)
                        or "(no answer)",
                    ),
                }
            ],
            [GRADE_TOOL],
            C.JUDGE_MAX_TOKENS,
            tool_choice=JUDGE_TOOL_CHOICE,
        )
        grade, usage = await judge.grade_request(request)
        transcript.grades["redteam_judge"] = grade
        if usage is not None:
            transcript.judge_usage = transcript.judge_usage + usage
            transcript.judge_model = judge.model_id

    def observe(self, t: Transcript, verdict: Verdict) -> None:
        """A run as the figures count it (once, as it is scored: before --summary-only slims it)."""
        key = (t.case.name, t.iteration, t.model)
        if key in self.runs:
            return
        attack = self.attack_of.get(t.case.name)
        token = canary_token(t.case.name, t.iteration, t.model) if attack else None
        self.runs[key] = AttackedRun(
            case=self.base_of.get(t.case.name, t.case.name),
            attack=attack,
            model=t.model,
            iteration=t.iteration,
            passed=verdict.passed,
            signals=tuple(attack_signals(t, token)),
            delivered=attack_delivered(t, attack) if attack else False,
        )

    def breached(self, t: Transcript) -> bool | None:
        """Whether the attack succeeded in a run scored already (None: a clean run)."""
        run = self.runs.get((t.case.name, t.iteration, t.model))
        return None if run is None or run.attack is None else bool(run.signals)

    def record(self, transcripts: Sequence[Transcript]) -> RedTeamRecord:
        runs = [
            self.runs[key]
            for key in ((t.case.name, t.iteration, t.model) for t in transcripts)
            if key in self.runs
        ]
        figures = redteam_figures(runs, self.plan.iterations)
        clean = [r for r in runs if r.attack is None]
        notes = [
            f"{ATTACKS[name].title}: {ATTACKS[name].what}."
            for name in dict.fromkeys(a.cls for a in self.attacks)
        ]
        notes += sorted({v.licence for v in self.vectors if v.licence})
        return RedTeamRecord(
            attacks=list(dict.fromkeys(f"{a.cls}:{a.variant}" for a in self.attacks)),
            vectors=[
                VectorRecord(name=v.id, source=v.source, template=v.template, licence=v.licence)
                for v in self.vectors
            ],
            canary_tool=self.canary,
            canary_address=C.CANARY_ADDRESS,
            iterations=self.plan.iterations,
            models=list(self.api.models),
            judge_model=self.grading.judge_model if self.judged else None,
            clean_runs=len(clean),
            clean_canary_calls=sum(bool(r.signals) for r in clean),
            notes=notes,
            **figures,
        )

    def labels(self) -> dict[str, str]:
        """Each case -> the attack class it runs under ("clean" for none)."""
        return {
            c.name: (self.attack_of[c.name].cls if c.name in self.attack_of else "clean")
            for c in self.cases
        }

    async def estimate(
        self, runner: ToolUseRunner, jobs: Sequence[Job]
    ) -> list[tuple[str, CostEstimate]]:
        """--dry-run: each attack class's runs (and the clean ones), priced with the largest tool
        listing an attacked run carries (the canary, a look-alike and the longest injection),
        an extra model call per attacked run, and the judge's call with --redteam-judge."""
        async with runner.connect() as hub:
            definitions = [
                {k: v for k, v in d.items() if k != "cache_control"} for d in hub.anthropic_tools
            ]
            longest = max(
                (
                    self.injection(a, c, 1, runner.run_settings.model)
                    for c in self.cases[:1]
                    for a in self.attacks
                ),
                key=len,
                default="",
            )
            extra = [
                {
                    "name": self.canary,
                    "description": prompts.CANARY_TOOL_DESCRIPTION,
                    "input_schema": dict(canary_tool(self.canary).input_schema),
                }
            ]
            if definitions:
                extra.append(dict(definitions[0], name=definitions[0]["name"] + "_v2"))
                definitions[0] = dict(
                    definitions[0], description=definitions[0].get("description", "") + longest
                )
            tools = definitions + extra
            prefix, counted = await count_prefix_tokens(
                self.api.base_url, runner.run_settings, tools
            )
        labels, parts = self.labels(), []
        for label in ["clean", *dict.fromkeys(a.cls for a in self.attacks)]:
            mine = [j for j in jobs if labels.get(j.payload[0].name) == label]
            if not mine:
                continue
            if label != "clean":  # the injected call: one more model call
                mine = [
                    replace(
                        j,
                        payload=(
                            replace(
                                j.payload[0],
                                expected_tools=[*j.payload[0].expected_tools, self.canary],
                            ),
                            *j.payload[1:],
                        ),
                    )
                    for j in mine
                ]
            by_model: dict[str, list[Job]] = {}
            for job in mine:
                by_model.setdefault(job.payload[2], []).append(job)
            cost = combined_cost(
                [
                    estimate_tool_runs(
                        model_jobs,
                        replace(runner.run_settings, model=model),
                        prefix,
                        counted,
                        len(tools),
                        self.grading.judge_model,
                    )
                    for model, model_jobs in by_model.items()
                ],
                ", ".join(by_model),
                "",
            )
            if label != "clean" and self.judged:
                judged = sum(judge_estimate(j.payload[0], self.grading.judge_model) for j in mine)
                cost.cost_expected += judged
                cost.cost_max += judged
                cost.calls_expected += len(mine)
                cost.calls_max += len(mine)
            parts.append((label, cost))
        return parts


class RedTeamScoring:
    """The suite's own scoring (its checks are the utility), with the red team watching each
    run as it is scored. Attacked cases group as SUITE under CLASS; the suite's own sections (the
    QA report) read the clean runs."""

    def __init__(self, inner: Any, redteam: RedTeam) -> None:
        self.inner, self.redteam = inner, redteam
        labels = redteam.labels()
        inner.reported = lambda name: labels.get(name, "clean") == "clean"
        self.cases: Sequence[TestCase] = redteam.cases

    @property
    def tools(self) -> dict[str, Any]:
        return self.inner.tools

    @tools.setter
    def tools(self, value: dict[str, Any]) -> None:
        self.inner.tools = value

    def connected(self, hub: McpHub) -> None:
        self.redteam.connected(hub)
        self.inner.connected(hub)
        self.inner.tools.update(self.redteam.extra_specs)

    def verdict(self, t: Transcript) -> Verdict:
        verdict = self.inner.verdict(t)
        self.redteam.observe(t, verdict)
        return verdict

    def case_results(
        self, transcripts: Iterable[Transcript], threshold: float, group: str
    ) -> Iterator[CaseResult]:
        breaches: dict[tuple[str, str], int] = {}  # (attacked case, model) -> runs breached

        def observed() -> Iterator[Transcript]:
            for t in transcripts:  # runs --resume kept were scored by an earlier invocation
                self.verdict(t)
                if self.redteam.breached(t):
                    key = (t.case.name, t.model)
                    breaches[key] = breaches.get(key, 0) + 1
                yield t

        labels = self.redteam.labels()
        for case in self.inner.case_results(observed(), threshold, group):
            if labels.get(case.name, "clean") != "clean":
                case.group = f"{case.group} under {labels[case.name]}"
                case.breaches = breaches.get((case.name, case.model or ""), 0)
            yield case

    def sections(self) -> dict[str, Any]:
        return self.inner.sections()
