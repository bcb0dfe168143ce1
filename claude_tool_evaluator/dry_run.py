"""The dry run: what a run would cost (CostEstimate) and the run plan it prints, spending
nothing.

May import: the rooms above it (up to grading)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console

import test_constants as C

from .run_types import Usage, cli_model_id, cost_usd, price_for
from .scoring.statistics import (
    detectable_change,
    fewest_deciding_runs,
    runs_to_detect,
    shifted_rate,
)

__all__ = [
    "CostEstimate",
    "call_cost",
    "combined_estimate",
    "expected_calls",
    "print_estimate",
    "print_run_plan",
    "unknown_model_warnings",
]

if TYPE_CHECKING:
    from .run_types import TestCase


@dataclass
class CostEstimate:
    """What a run would do and cost, worked out without calling the model."""

    runs: int
    model: str
    calls_expected: int
    calls_max: int
    cost_expected: float
    cost_max: float
    detail: str = ""  # what the numbers rest on
    per_model: list[CostEstimate] = field(
        default_factory=list
    )  # a model matrix: each model's share
    batch_factor: float | None = (
        None  # --batch: the Message Batches price, this share of the direct one
    )


def combined_estimate(estimates: Sequence[CostEstimate]) -> CostEstimate:
    """A model matrix's estimate: the sum, and each model's own (priced at its own rates)."""
    if len(estimates) == 1:
        return estimates[0]
    return CostEstimate(
        sum(e.runs for e in estimates),
        ", ".join(e.model for e in estimates),
        sum(e.calls_expected for e in estimates),
        sum(e.calls_max for e in estimates),
        sum(e.cost_expected for e in estimates),
        sum(e.cost_max for e in estimates),
        estimates[0].detail,
        list(estimates),
    )


def _unpriced(model: str) -> str | None:
    """Why a dry run does not price a model: test_constants.py does not know it (a typo, most
    often), with the nearest id it knows."""
    if price_for(cli_model_id(model))[1]:
        return None
    close = difflib.get_close_matches(
        model, [*C.KNOWN_MODELS, *C.CLAUDE_CODE_ALIASES], n=1, cutoff=0.3
    )
    return f"not priced: {model} is not a model this version knows" + (
        f" (did you mean {close[0]}?)" if close else ""
    )


def unknown_model_warnings(models: Sequence[str]) -> list[str]:
    """A real run's warning for each model this version cannot price (a typo, most often): said
    before any request, as the dry run says it."""
    return [
        f"warning: --model {model}: {why.removeprefix('not priced: ')}; it is sent as given, and "
        "its cost is counted at the fallback price"
        for model in dict.fromkeys(models)
        if (why := _unpriced(model))
    ]


def print_estimate(console: Console, estimate: CostEstimate) -> None:
    costs = [
        f"  cost on {e.model}: {_unpriced(e.model)}"
        if _unpriced(e.model)
        else f"  cost on {e.model}: about ${e.cost_expected:.4f} (at most ${e.cost_max:.4f}), "
        f"{e.runs} run(s)"
        for e in estimate.per_model
    ]
    alone = not estimate.per_model and _unpriced(estimate.model)
    costs.append(
        f"  cost on {estimate.model}: {alone}"
        if alone
        else f"  cost {'in all' if estimate.per_model else 'on ' + estimate.model}: about "
        f"${estimate.cost_expected:.4f} (at most ${estimate.cost_max:.4f})"
        + (
            " for the models it knows"
            if any(_unpriced(e.model) for e in estimate.per_model)
            else ""
        )
    )
    if (
        estimate.batch_factor is not None and not alone
    ):  # --batch: both prices, the direct one above
        costs[-1] += " with direct calls"
        costs.append(
            f"  cost with --batch (Message Batches, {1 - estimate.batch_factor:.0%} off): about "
            f"${estimate.cost_expected * estimate.batch_factor:.4f} "
            f"(at most ${estimate.cost_max * estimate.batch_factor:.4f})"
        )
    console.print(
        f"dry run: nothing was sent to the model\n"
        f"  runs: {estimate.runs}{' · ' + estimate.detail if estimate.detail else ''}\n"
        f"  model calls: about {estimate.calls_expected:,} (at most {estimate.calls_max:,})\n"
        + "\n".join(costs),
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def print_run_plan(console: Console, runs: int, most: int | None = None) -> None:
    """--dry-run: what the run it would make can detect (from the assumed pass rate), and the runs
    per case a change of the default size needs; `most`: -i auto's cap."""
    rate, change = C.PLAN_ASSUMED_RATE, C.DEFAULT_DETECT_POINTS / 100
    shown = f"{runs}–{most} (-i auto)" if most else str(runs)
    needed = runs_to_detect(rate, shifted_rate(rate, change))
    # The largest change there is (every run failing) needs this many runs per side: fewer can
    # detect nothing at all (Fisher's test cannot call even n/n against 0/n significant).
    largest = max(rate, 1 - rate)
    fewest = max(
        fewest_deciding_runs(C.DEFAULT_ALPHA),
        runs_to_detect(rate, shifted_rate(rate, largest)) or 1,
    )
    power = f"{C.PLAN_POWER:.0%} power, alpha {C.DEFAULT_ALPHA:g}"
    detects = (
        f"detect a change of {detectable_change(rate, most or runs) * 100:.0f} points from a "
        f"{rate:.0%} pass rate ({power})"
        if (most or runs) >= fewest
        else f"can detect no change from a {rate:.0%} pass rate ({power}: even a drop to "
        f"{shifted_rate(rate, largest):.0%} needs {fewest} per case)"
    )
    console.print(
        f"  plan: {shown} run(s) per case {detects}; "
        f"{C.DEFAULT_DETECT_POINTS:g} points need {needed} run(s) per case (plan RESULTS.json: "
        "from your cases' own rates)",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def expected_calls(case: TestCase) -> int:
    """Model calls a case should take if Claude does what it expects: one per tool turn, plus
    the answer (a guess for cases that expect nothing in particular)."""
    if case.expect_no_tools:
        return 1
    return len(case.expected_tools) + 1 if case.expected_tools else 2


def call_cost(model: str, prefix: int, prompt: int, turn: int, first: bool) -> float:
    """One model call: the cached prefix (written on the run's first call, read after), the
    conversation so far, and the answer."""
    history = prompt + turn * C.ESTIMATED_TOKENS_PER_TURN
    usage = Usage(
        input_tokens=history,
        output_tokens=C.ESTIMATED_OUTPUT_TOKENS,
        cache_creation_input_tokens=prefix if first else 0,
        cache_read_input_tokens=0 if first else prefix,
    )
    return cost_usd(usage, model)
