"""The types a run is made of (dataclasses every later room passes around): Usage and its cost, ToolCall,
TestCase, Verdict, Transcript, RunSettings, ServerSpec, SkillInfo, SkillTest, trigger results.

May import: the rooms above it (errors, stopping, sinks, files)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import prompts
import test_constants as C

__all__ = [
    "Distractor",
    "HARNESS_MARK",
    "HistoryEntry",
    "PriorMessage",
    "RoutingRule",
    "RunSettings",
    "ServerSpec",
    "SkillInfo",
    "SkillTest",
    "TestCase",
    "ToolCall",
    "Transcript",
    "TriggerQueryResult",
    "TriggerScore",
    "USAGE_FIELDS",
    "Usage",
    "VERSION_MARK",
    "Verdict",
    "case_hash",
    "cli_model_id",
    "cost_usd",
    "estimated_tokens",
    "names_agent",
    "price_for",
]

USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _astuple_usage(usage: Usage) -> tuple[int, ...]:
    return tuple(getattr(usage, k) for k in USAGE_FIELDS)


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(_astuple_usage(self), _astuple_usage(other))))

    @property
    def total(self) -> int:
        return sum(_astuple_usage(self))

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        get = (
            (lambda k: usage.get(k))
            if isinstance(usage, dict)
            else (lambda k: getattr(usage, k, None))
        )
        return cls(*(int(get(k) or 0) for k in USAGE_FIELDS))


def price_for(model: str) -> tuple[dict[str, float], bool]:
    """Per-million-token prices for a model id (longest matching prefix); False when guessed."""
    matches = [prefix for prefix in C.PRICES if model.startswith(prefix)]
    if not matches:
        return C.FALLBACK_PRICE, False
    return C.PRICES[max(matches, key=len)], True


def cost_usd(usage: Usage, model: str) -> float:
    price, _ = price_for(model)
    return (
        usage.input_tokens * price["input"]
        + usage.output_tokens * price["output"]
        + usage.cache_creation_input_tokens * price["cache_write"]
        + usage.cache_read_input_tokens * price["cache_read"]
    ) / 1_000_000


@dataclass(slots=True)
class ToolCall:
    """One tool call Claude made, and what the server answered."""

    name: str
    input: dict
    output: str = ""
    is_error: bool = False
    duration_ms: float = 0.0
    server: str | None = None
    turn: int = 0
    id: str = ""
    # Who answered it (--tool-policy, --mock-tools, --replay): "live" (the server), "mock", "replay"
    # or "policy" (withheld: Claude got a stand-in); `executed` is whether the server ran it.
    source: str = "live"
    executed: bool = True


@dataclass(slots=True)
class HistoryEntry:
    """One entry of seed 002's `conversation_history`."""

    role: str  # user | assistant | tool
    content: str
    has_tools: bool = False
    simulated: bool = False


@dataclass(slots=True)
class PriorMessage:
    """A message of a conversation that happened before the evaluation starts (`-c FILE`)."""

    role: str  # user | assistant
    content: str
    line: int = 0


@dataclass(slots=True)
class TestCase:
    """One thing to evaluate: a prompt (with optional prior history) and what should happen."""

    name: str
    prompt: str
    description: str = ""
    history: list[PriorMessage] = field(default_factory=list)
    expected_tools: list[str] = field(default_factory=list)
    forbidden_tools: list[str] = field(default_factory=list)
    expected_args: dict[str, Any] = field(default_factory=dict)  # tool -> {arg: value} or a list
    args_match: str = "partial"
    order: str = "any"
    max_tool_calls: int | None = None
    min_tool_calls: int | None = None
    expect_no_tools: bool = False
    tags: list[str] = field(default_factory=list)
    simulated_user: str | None = None
    source: str = ""  # file the case came from
    line: int = 0
    rubric: str = ""  # what an LLM judge grades the run against
    verify: str = ""  # a command that checks the server's state after each run
    args_ignore: list[str] = field(
        default_factory=list
    )  # argument keys (globs) left out of expected_args
    expected_answer: str | None = (
        None  # the answer Claude should give (QA pairs, CSV, markdown tests)
    )
    answer_match: str = "exact"  # how it is compared: a key of ANSWER_MATCHERS
    # CSV `tools`: the servers' tools Claude is shown in this case ("NAME" or "NAME=TOOL": the
    # servers' TOOL under the name NAME); empty: every tool of the servers
    tools: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Verdict:
    """Whether one run of one case passed, and every reason it did not."""

    passed: bool
    reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Transcript:
    """The single record of one run of one case: what was sent, what came back, timings, usage."""

    case: TestCase
    iteration: int
    model: str
    final_text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    model_calls: int = 0
    user_interventions: int = 0
    ended_by: str = "completion"  # completion | user_end | needs_input | max_turns | error
    stop_reason: str | None = None
    truncated: bool = False
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0
    error: str | None = None
    simulated_user_usage: Usage = field(default_factory=Usage)  # the model playing the user
    simulated_user_model: str = ""
    # Grading that needs I/O, done by the runner after the conversation and read by TOOL_CHECKS:
    # "judge": {passed, score, evidence} | {error}; "verify": {passed, reason} | {error}.
    grades: dict[str, dict] = field(default_factory=dict)
    judge_usage: Usage = field(default_factory=Usage)  # the judge's calls for this run
    judge_model: str = ""
    batch_api: bool = (
        False  # --batch: its model calls (the judge's too) went through Message Batches
    )
    # Its verdict, once scored (or kept from an earlier invocation): the journal line, the progress
    # bar and the reports share it, and it goes when the transcript does (no cache keeps a verdict
    # per run).
    verdict: Verdict | None = None
    # --harness: how the run was made ("api": our loop; "claude-code ...": the real `claude -p`),
    # and what Claude Code's room did in it (deferred tools, searches, waits, built-ins called)
    harness: str = "api"
    claude_code: dict = field(default_factory=dict)

    @property
    def cost_usd(self) -> float:
        factor = C.BATCH_PRICE_FACTOR if self.batch_api else 1.0
        return (
            cost_usd(self.usage, self.model)
            + (cost_usd(self.judge_usage, self.judge_model) if self.judge_model else 0.0)
        ) * factor + (
            cost_usd(self.simulated_user_usage, self.simulated_user_model)
            if self.simulated_user_model
            else 0.0
        )

    @property
    def tools_called(self) -> list[str]:
        return [call.name for call in self.tool_calls]


@dataclass
class RunSettings:
    """Everything the conversation engine needs besides the case itself."""

    model: str = C.DEFAULT_MODEL
    system_prompt: str = prompts.CLAUDE_CODE_SYSTEM_PROMPT
    max_tokens: int = C.DEFAULT_MAX_TOKENS
    temperature: float | None = C.DEFAULT_TEMPERATURE
    max_turns: int = C.DEFAULT_MAX_TURNS
    concurrency: int = C.DEFAULT_CONCURRENCY
    stream: bool = False


@dataclass
class ServerSpec:
    """How to reach one MCP server: `stdio` (command), `http` or `sse` (url) or `module` (in-process)."""

    name: str
    kind: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    module: str = ""
    attr: str | None = None
    secrets: dict[str, str] = field(default_factory=dict)  # ${VAR} references: name -> value
    instance: Any = None  # `module`: a server object the evaluator made itself (the decoy tools)


@dataclass
class SkillInfo:
    """One Agent Skill: its SKILL.md, validated frontmatter and body; or a subagent under test
    (`kind` agent): a project's `agents/NAME.md`, or a plugin's agent (`plugin`: the plugin folder,
    loaded with --plugin-dir; its name `PLUGIN:NAME`, as Claude Code lists it)."""

    name: str
    description: str
    path: Path  # the SKILL.md, or the agent's NAME.md
    body: str = ""
    frontmatter: dict = field(default_factory=dict)
    description_override: bool = (
        False  # --skill-description: installed with `description`, not SKILL.md's
    )
    kind: str = "skill"  # skill | agent
    plugin: Path | None = None  # a plugin's agent: the plugin folder

    @property
    def folder(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class Distractor:
    """A skill installed beside the ones under test in trigger runs (--distractors): from a folder
    of skills, the user's own (`installed`: copied into each run's temporary HOME) or a decoy the
    model wrote (`lookalike:N`: no folder; its SKILL.md is written from name and description)."""

    name: str
    description: str
    source: str  # folder | installed | lookalike
    folder: Path | None = None

    @property
    def in_home(self) -> bool:
        """Installed as a user skill (~/.claude/skills of the run's HOME), not a project skill."""
        return self.source == "installed"


def names_agent(name: str, agent: str) -> bool:
    """Whether `name` (as a trigger file writes it) names the delegated agent: `plugin:agent`
    exactly, or a bare `agent` for a project's agent or any plugin's agent of that name."""
    return name == agent or (":" not in name and agent.split(":")[-1] == name)


@dataclass(frozen=True)
class RoutingRule:
    """A trigger query's routing assertions (`must_fire`, `must_not_fire`, `max_skills`): which
    skills must, and must not, fire on it, and how many may fire at once (0: none at all)."""

    must_fire: tuple[str, ...] = ()
    must_not_fire: tuple[str, ...] = ()
    max_skills: int | None = None

    def problems(self, fired: Sequence[str], delegated: Sequence[str] = ()) -> list[str]:
        """Why one run's fired skills and delegated agents break the rule (nothing when they keep
        it). An agent is named `plugin:agent`, or `agent` alone; max_skills counts skills only."""

        def went(name: str) -> bool:
            return name in fired or any(names_agent(name, agent) for agent in delegated)

        found = [f"must_fire: {name} did not fire" for name in self.must_fire if not went(name)]
        found += [f"must_not_fire: {name} fired" for name in self.must_not_fire if went(name)]
        if self.max_skills is not None and len(fired) > self.max_skills:
            skills = "skill" if len(fired) == 1 else "skills"
            found.append(
                f"max_skills {self.max_skills}: {len(fired)} {skills} fired ({', '.join(fired)})"
            )
        return found


@dataclass
class SkillTest:
    """One markdown test definition (skillmark's format) or a skill-creator eval set."""

    name: str
    type: str  # knowledge | task | security | trigger
    source: str = ""
    line: int = 1
    prompt: str = ""
    concepts: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    forbidden_patterns: list[str] = field(default_factory=list)
    expected_refusal: list[str] = field(default_factory=list)
    positive_triggers: list[str] = field(default_factory=list)
    negative_triggers: list[str] = field(default_factory=list)
    timeout: float = C.DEFAULT_TEST_TIMEOUT
    category: str | None = None
    severity: str | None = None
    runs: int | None = None
    skill: str | None = None  # the skill a trigger test is about (several --skill)
    simulated_user: str | None = None  # a goal: a simulated user answers Claude (tool-use runs)
    rubric: str = ""  # `# Rubric`: an LLM judge grades each run against it (tool-use runs)
    verify: str = ""  # `verify:` in the frontmatter: a state-check command after each run
    expected_answer: str | None = None  # `# Expected Answer`, compared as `answer_match:` says
    answer_match: str = "exact"
    # skill-creator's task evals (evals/evals.json): graded by the judge, one verdict per expectation
    eval_id: int | str | None = None  # set for every eval of an evals.json
    expected_output: str = ""
    expectations: list[str] = field(default_factory=list)
    files: list[Path] = field(
        default_factory=list
    )  # copied into the run's project before it starts
    # trigger tests: each query's routing assertions (frontmatter keys, or an eval entry's own)
    routing: dict[str, RoutingRule] = field(default_factory=dict)
    query_lines: dict[str, int] = field(default_factory=dict)  # each trigger query's line

    @property
    def is_task(self) -> bool:
        """A task runs per configuration (with_skill, and the baselines) and may use --allow-tools."""
        return self.type == "task"


@dataclass
class TriggerQueryResult:
    """One query's verdict for one skill, over all its runs."""

    query: str
    skill: str
    expected: str  # activate | ignore
    runs: int = 0  # runs that counted (errored runs excluded)
    activations: int = 0
    errors: int = 0
    activation_rate: float = 0.0
    actual: str = "ignored"  # activated | ignored | error
    correct: bool = False
    tool_count: float = 0.0  # mean tools used per counted run
    fired: dict[str, int] = field(default_factory=dict)  # skill name -> runs it fired in
    routing: bool = False  # a positive of another skill, counted as a negative here
    source: str = ""
    rule: RoutingRule | None = None  # its routing assertions (must_fire, must_not_fire, max_skills)
    routing_failures: dict[str, int] = field(default_factory=dict)  # broken assertion -> runs
    right_runs: int = 0  # counted runs that did what the query expects (routing kept too)
    hooks: dict[str, int] = field(default_factory=dict)  # `HOOK effect` -> runs it happened in


@dataclass
class TriggerScore:
    """Seed 001's trigger metrics for one skill, plus precision/recall/F1 and errored runs."""

    skill: str
    trigger_rate: float = 0.0  # % positive queries activated
    false_positive_rate: float = 0.0  # % negative queries activated
    trigger_score: float = 0.0  # trigger_rate x (1 - false_positive_rate / 100)
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    positives: int = 0
    positives_activated: int = 0
    negatives: int = 0
    negatives_activated: int = 0
    errored_queries: int = 0  # queries with no counted run at all
    errored_runs: int = 0
    total_runs: int = 0
    threshold: float = C.DEFAULT_TRIGGER_THRESHOLD
    query_results: list[TriggerQueryResult] = field(default_factory=list)


def estimated_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def case_hash(case: TestCase) -> str:
    """A hash of the test definition: an edited case is a new case, and reruns on --resume."""
    definition = {
        k: v
        for k, v in asdict(case).items()
        if k not in ("source", "line", "description") and (v or k != "tools")
    }  # a case without a tool selection keeps the hash it had before there were selections
    return hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]


HARNESS_MARK = " via "  # --harness claude-code: a run's model reported as `MODEL via claude-code`
VERSION_MARK = " @ "  # several --claude-bin: a model on one Claude Code version, `haiku @ 2.1.197`


def cli_model_id(model: str) -> str:
    """Claude Code's aliases (`haiku`, `sonnet`, `opus`) as model ids, for prices; a version
    matrix's `haiku @ 2.1.197` is its model's."""
    model = model.split(VERSION_MARK)[0]
    return C.CLAUDE_CODE_ALIASES.get(model, model)
