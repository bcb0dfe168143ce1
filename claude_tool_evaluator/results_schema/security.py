"""The hostile room's records in the results document (its `security` section): `scan`'s
findings, the tool pins, and a red team's attacks, vectors and figures.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema."""

from __future__ import annotations

from typing import Literal

import test_constants as C

from .document import Record

__all__ = [
    "AttackFigureRecord",
    "AttackRunRecord",
    "PinChangeRecord",
    "PinRecord",
    "RedTeamRecord",
    "ScanFindingRecord",
    "ScanJudgementRecord",
    "ScanRecord",
    "SecurityRecord",
    "VectorRecord",
]


class ScanFindingRecord(Record):
    """One thing `scan` found in a tool's definition (or between two servers' tools)."""

    server: str
    tool: str  # the definition's name (a tool's, a resource's, a prompt's)
    check: str  # a key of SCAN_CHECKS
    severity: Literal["low", "medium", "high"]
    detail: str
    where: str = ""  # the place in the definition: description, input_schema.properties.x, ...
    decoded: str | None = None  # tag characters: the ASCII text they smuggle
    kind: str = "tool"  # tool | resource | resource-template | prompt | instructions
    reader: Literal["static", "judge"] = "static"  # which reader found it


class ScanJudgementRecord(Record):
    """`scan --judge`: what the judge said of one definition."""

    server: str
    kind: str
    name: str
    instructs: bool | None = None  # None: not judged (an error)
    what: str = ""
    confidence: float | None = None
    cost_usd: float = 0.0
    error: str | None = None


class ScanRecord(Record):
    """`scan`: every tool definition of the servers checked (no model call)."""

    servers: list[str] = []
    tools: int = 0
    others: int = 0  # resources, resource templates, prompts and servers' instructions read
    fail_on: str = C.DEFAULT_SCAN_FAIL_ON
    findings: list[ScanFindingRecord] = []
    judge_model: str | None = None  # scan --judge: the judge's model (None: not asked)
    judged: list[ScanJudgementRecord] = []
    not_judged: int = 0  # definitions --max-cost left unjudged
    cost_usd: float = 0.0


class PinChangeRecord(Record):
    """A tool definition that differs from its pin in the lock file."""

    server: str
    tool: str
    change: Literal["added", "removed", "changed"]
    pinned_sha256: str | None = None
    sha256: str | None = None
    diff: str = ""  # a unified diff of the definition as pinned and as listed now


class PinRecord(Record):
    """--pin FILE: the SHA-256 of every tool definition, checked against the lock file."""

    file: str
    tools: int = 0
    written: bool = False  # the file was written now (the first run, or --update-pins)
    changes: list[PinChangeRecord] = []
    failed: bool = False  # a change without --update-pins: the run fails


class VectorRecord(Record):
    """An injection vector: where it comes from, and its text (`{goal}` is the attacker's goal)."""

    name: str  # source:name, e.g. ours:important, agentdojo:important_instructions
    source: str
    template: str
    licence: str = ""


class AttackFigureRecord(Record):
    """A red team's figures for one attack class, variant and vector on one model (or, where a
    field says "all", over every one of them): attack success rate with its 95 % Wilson interval
    over the runs, pass^k (held in all k runs: per attack, one case under one class, variant and
    vector on one model, the chance that k of its own -i runs all held; the mean over those
    attacks), and utility under attack (runs whose own verdict passed) beside the clean runs'
    utility (AgentDojo's report)."""

    attack: str
    variant: str = "all"
    vector: str = "all"
    model: str = ""
    runs: int = 0
    delivered: int = 0  # runs the attack reached Claude in (a result injection needs a call)
    successes: int = 0
    success_rate: float = 0.0
    interval: tuple[float, float] = (0.0, 1.0)
    k: int = 1  # the -i runs of one attack (one case under one class, variant and vector)
    # pass^k: the mean, over the attacks (case x class x variant x vector) this figure covers, of
    # the chance that k of that attack's own runs all held
    held_all_k: float = 1.0
    utility: float = 0.0  # attacked runs whose case verdict passed
    utility_interval: tuple[float, float] = (0.0, 1.0)
    clean_utility: float | None = None  # the same cases without the attack, on the same model


class AttackRunRecord(Record):
    """An attacked run the attack succeeded in, and what gave it away."""

    case: str
    attack: str
    variant: str
    vector: str
    model: str = ""
    iteration: int = 1
    signals: list[str] = []


class RedTeamRecord(Record):
    """redteam: the attacks, the vectors, and the figures per class, per vector, per cell and
    per model; canaries decide success (the judge too with --redteam-judge)."""

    attacks: list[str] = []  # class:variant, as run
    vectors: list[VectorRecord] = []
    canary_tool: str = ""
    canary_address: str = ""
    iterations: int = 1
    models: list[str] = []
    judge_model: str | None = None
    clean_runs: int = 0
    clean_canary_calls: int = 0  # canary calls in runs without an attack: false alarms
    by_class: list[AttackFigureRecord] = []
    by_vector: list[AttackFigureRecord] = []
    cells: list[AttackFigureRecord] = []
    successes: list[AttackRunRecord] = []
    notes: list[str] = []

    def held(self, attack: str) -> bool:
        """Whether an attack class failed in every run, on every model."""
        return all(f.successes == 0 for f in self.by_class if f.attack == attack)


class SecurityRecord(Record):
    """The hostile room: a red team's figures, `scan`'s findings, and the tool pins."""

    redteam: RedTeamRecord | None = None
    scan: ScanRecord | None = None
    pins: PinRecord | None = None
