"""Claude Code's room, added up over a suite's runs (--harness claude-code): each expected tool's
discovery through the tool search, each server's readiness at the first request, the built-ins
that took calls, and, when the suite also ran through the API, each case both ways with the
difference's interval and p-value.

May import: the rooms above scoring, the scoring modules below it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ..results_schema.sections import (
    ClaudeCodeRecord,
    HarnessCaseRecord,
    ServerReadinessRecord,
    ToolDiscoveryRecord,
)
from ..run_types import HARNESS_MARK
from .statistics import fisher_p_value, newcombe_interval

__all__ = [
    "HarnessTally",
    "harness_note",
    "harness_reason",
    "split_model",
]

if TYPE_CHECKING:
    from ..results_schema.document import CaseResult
    from ..run_types import Transcript


def split_model(label: str) -> tuple[str, str]:
    """A case's model label -> (the model, the harness): `m via claude-code` -> (m, claude-code)."""
    model, _, harness = label.partition(HARNESS_MARK)
    return model, harness or "api"


def harness_reason(case: CaseResult) -> str:
    """Why a case failed as the side-by-side says it: what Claude Code's room did (an "expected
    tool ..." reason of check_claude_code) first, then the most frequent."""
    if not case.reasons:
        return ""
    return max(case.reasons, key=lambda r: (r.startswith("expected tool "), case.reasons[r]))


def harness_note(api_rate: float, claude_rate: float, api_reason: str, claude_reason: str) -> str:
    """A case's two verdicts in a sentence ("" when they agree)."""
    if claude_rate < api_rate:
        return f"passes through the API, fails in Claude Code: {claude_reason}".rstrip(": ")
    if claude_rate > api_rate:
        return f"passes in Claude Code, fails through the API: {api_reason}".rstrip(": ")
    return ""


class HarnessTally:
    """Fed each run as it passes (`observed`) and each case as it is scored (`add_case`); `record`
    is the section (None: no run went through Claude Code)."""

    def __init__(self) -> None:
        self.tools: dict[tuple[str, str], ToolDiscoveryRecord] = {}
        self.servers: dict[tuple[str, str], ServerReadinessRecord] = {}
        self.builtins: Counter[str] = Counter()
        self.claude_runs = 0
        # (case, model) -> harness -> (passes, runs, the most frequent failure reason)
        self.verdicts: dict[tuple[str, str], dict[str, tuple[int, int, str]]] = {}

    def observed(self, transcripts: Iterable[Transcript]) -> Iterator[Transcript]:
        for t in transcripts:
            if t.claude_code:
                self.add_run(t)
            yield t

    def add_run(self, t: Transcript) -> None:
        facts, self.claude_runs = t.claude_code, self.claude_runs + 1
        called = set(t.tools_called)
        for tool in t.case.expected_tools:
            row = self.tools.setdefault(
                (tool, t.harness), ToolDiscoveryRecord(tool=tool, harness=t.harness)
            )
            row.runs += 1
            row.called_runs += tool in called
            if facts.get("deferred"):
                row.deferred_runs += 1
                row.loaded_runs += tool in (facts.get("loaded") or [])
            row.discovery_rate = row.loaded_runs / row.deferred_runs if row.deferred_runs else None
        for server, status in (facts.get("servers") or {}).items():
            ready = self.servers.setdefault(
                (server, t.harness), ServerReadinessRecord(server=server, harness=t.harness)
            )
            ready.runs += 1
            if status.get("status_at_start") != "connected":
                ready.not_ready_runs += 1
                ready.waited_runs += bool(status.get("waited"))
            after = status.get("connected_after_ms")
            if after is not None:
                ready.connected_after_ms = max(ready.connected_after_ms or 0.0, float(after))
        if any(tool not in called for tool in t.case.expected_tools):  # a built-in took the call
            self.builtins.update(dict.fromkeys(facts.get("builtins") or [], 1))

    def add_case(self, case: CaseResult) -> None:
        model, harness = split_model(case.model or "")
        reason = harness_reason(case)
        self.verdicts.setdefault((case.name, model), {})[harness] = (case.passes, case.runs, reason)

    def side_by_side(self) -> list[HarnessCaseRecord]:
        rows = []
        for (name, model), ways in self.verdicts.items():
            if "api" not in ways:
                continue
            api_passes, api_runs, api_reason = ways["api"]
            for harness, (passes, runs, reason) in ways.items():
                if harness == "api" or not runs or not api_runs:
                    continue
                difference = passes / runs - api_passes / api_runs
                note = harness_note(api_passes / api_runs, passes / runs, api_reason, reason)
                rows.append(
                    HarnessCaseRecord(
                        case=name,
                        model=model,
                        harness=harness,
                        api_passes=api_passes,
                        api_runs=api_runs,
                        passes=passes,
                        runs=runs,
                        difference=round(difference, 4),
                        interval=newcombe_interval(api_passes, api_runs, passes, runs),
                        p_value=round(fisher_p_value(api_passes, api_runs, passes, runs), 4),
                        note=note,
                    )
                )
        return rows

    def record(self) -> ClaudeCodeRecord | None:
        if not self.claude_runs:
            return None
        servers = [self.servers[k] for k in sorted(self.servers)]
        return ClaudeCodeRecord(
            tools=[self.tools[k] for k in sorted(self.tools)],
            servers=servers,
            builtins=dict(self.builtins.most_common()),
            cases=self.side_by_side(),
            late_servers=sorted({s.server for s in servers if s.not_ready_runs}),
        )
