"""Is the change real? compare's statistics and plan's run counts, against figures computed by hand
here: Fisher's exact test from the hypergeometric distribution, Newcombe's interval from two Wilson
intervals written out, Holm's step-down, and the textbook sample size for two proportions."""

from __future__ import annotations

import json
from math import comb, sqrt
from pathlib import Path

import pytest
from click.testing import CliRunner

import evaluator
import test_constants as C
from claude_tool_evaluator.scoring.statistics import (
    bootstrap_difference,
    detectable_change,
    fisher_p_value,
    holm_adjusted,
    newcombe_interval,
    runs_to_detect,
)

C = C
Z95, Z80 = 1.959963984540054, 0.8416212335729143  # the normal quantiles of 0.975 and 0.8


# ---------------------------------------------------------------------------- by hand
def fisher_by_hand(a: int, n1: int, c: int, n2: int) -> float:
    """Two-sided: the sum of the hypergeometric probabilities of every table with the same
    margins that is at most as likely as the one observed."""
    successes, total = a + c, n1 + n2

    def probability(k: int) -> float:
        return comb(n1, k) * comb(n2, successes - k) / comb(total, successes)

    observed = probability(a)
    tables = range(max(0, successes - n2), min(successes, n1) + 1)
    return sum(probability(k) for k in tables if probability(k) <= observed * (1 + 1e-7))


def wilson_by_hand(s: int, n: int) -> tuple[float, float]:
    p = s / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return centre - half, centre + half


def newcombe_by_hand(s1: int, n1: int, s2: int, n2: int) -> tuple[float, float]:
    """New − old: d − √((p2 − l2)² + (u1 − p1)²), d + √((u2 − p2)² + (p1 − l1)²)."""
    p1, p2 = s1 / n1, s2 / n2
    (l1, u1), (l2, u2) = wilson_by_hand(s1, n1), wilson_by_hand(s2, n2)
    d = p2 - p1
    return d - sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2), d + sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)


def textbook_runs(p1: float, p2: float) -> int:
    """n = (z_{1-α/2}·√(2·p̄·q̄) + z_{1-β}·√(p1·q1 + p2·q2))² / (p1 − p2)², rounded up."""
    mean = (p1 + p2) / 2
    top = Z95 * sqrt(2 * mean * (1 - mean)) + Z80 * sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    exact = top**2 / (p1 - p2) ** 2
    return int(exact) + (exact > int(exact))


# ---------------------------------------------------------------------------- the functions
@pytest.mark.parametrize(
    "counts", [(10, 10, 2, 10), (5, 5, 4, 5), (8, 10, 6, 10), (0, 4, 4, 4), (7, 12, 3, 9)]
)
def test_the_exact_test_and_the_interval_equal_the_hand_computation(counts):
    assert fisher_p_value(*counts) == pytest.approx(fisher_by_hand(*counts), rel=1e-9)
    low, high = newcombe_interval(*counts)
    by_hand = newcombe_by_hand(*counts)
    assert (low, high) == pytest.approx(by_hand, abs=1e-9)


def test_known_p_values():
    # 10/10 -> 2/10: 12 successes of 20; the tables as extreme: 10|2 and 2|10 (and none beyond)
    assert fisher_p_value(10, 10, 2, 10) == pytest.approx(
        2 * comb(10, 10) * comb(10, 2) / comb(20, 12), rel=1e-9
    )
    assert fisher_p_value(5, 5, 4, 5) == pytest.approx(1.0)  # a flip that is noise
    assert fisher_p_value(6, 6, 0, 6) == pytest.approx(2 / comb(12, 6))


def test_holm_steps_down_and_stays_monotone():
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1: 0.03, 0.06, 0.04 -> kept non-decreasing: 0.06
    assert holm_adjusted([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjusted([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm_adjusted([0.6, 0.7]) == pytest.approx([min(1, 2 * 0.6), 1.0])


@pytest.mark.parametrize("p1, p2", [(0.9, 0.8), (1.0, 0.9), (0.5, 0.3), (0.2, 0.35)])
def test_plan_figures_are_the_textbook_sample_size(p1, p2):
    assert runs_to_detect(p1, p2) == textbook_runs(p1, p2)
    assert runs_to_detect(0.7, 0.7) is None


def test_the_detectable_change_is_the_inverse_of_the_sample_size():
    change = detectable_change(0.9, 50)
    assert runs_to_detect(0.9, 0.9 - change) <= 50 < runs_to_detect(0.9, 0.9 - change + 0.01)


def test_bootstrap_intervals_are_seeded_and_hold_the_difference():
    old, new = [0.010, 0.012, 0.011, 0.013], [0.020, 0.022, 0.021, 0.019]
    first = bootstrap_difference(old, new)
    assert first == bootstrap_difference(old, new)
    low, high = first
    assert low <= sum(new) / 4 - sum(old) / 4 <= high and low > 0
    assert bootstrap_difference([1.0], new) is None


# ---------------------------------------------------------------------------- compare on known counts
def document(cases: list[tuple[str, int, int]], runs: list[tuple[float, float]] = ()) -> dict:
    """A results document: (name, passes, runs) per case at threshold 1; (cost, latency) per run."""
    return {
        "schema_version": C.SCHEMA_VERSION,
        "metadata": {
            "total_results": len(runs),
            "generated_at": "2026-01-01T00:00:00+00:00",
            "mode": "batch",
            "evaluation": "csv",
            "model": C.DEFAULT_MODEL,
        },
        "passed": all(p == n for _, p, n in cases),
        "summary": {
            "cases": len(cases),
            "passed": sum(p == n for _, p, n in cases),
            "failed": sum(p != n for _, p, n in cases),
        },
        "cases": [
            {
                "name": name,
                "kind": "case",
                "passed": passes == total,
                "runs": total,
                "passes": passes,
                "pass_rate": passes / total,
                "reasons": {} if passes == total else {"missing expected tool t": total - passes},
            }
            for name, passes, total in cases
        ],
        "results": [
            {
                "kind": "tool_run",
                "iteration": i + 1,
                "test_name": "x",
                "query": "q",
                "case_hash": "h",
                "cost_usd": cost,
                "latency_ms": latency,
            }
            for i, (cost, latency) in enumerate(runs)
        ],
    }


def write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def compare(*args: str):
    return CliRunner().invoke(evaluator.main, ["compare", *args])


def test_a_flip_is_noise_and_a_drop_is_a_regression(tmp_path):
    old = write(
        tmp_path / "old.json",
        document(
            [("flips", 5, 5), ("drops", 10, 10), ("same", 3, 3)],
            [(0.01, 100.0), (0.012, 120.0), (0.011, 110.0)],
        ),
    )
    new = write(
        tmp_path / "new.json",
        document(
            [("flips", 4, 5), ("drops", 2, 10), ("same", 3, 3)],
            [(0.02, 200.0), (0.022, 220.0), (0.021, 210.0)],
        ),
    )
    result = compare(old, new, "--json")
    assert result.exit_code == 1, result.output
    [step] = json.loads(result.stdout)["comparisons"]
    cases = {c["name"]: c for c in step["cases"]}
    drop_p = fisher_by_hand(10, 10, 2, 10)
    flip_p = fisher_by_hand(5, 5, 4, 5)
    # Holm over three cases: the drop's p is the smallest (x3), the others 1
    assert cases["drops"]["change"] == "regression"
    assert cases["drops"]["statistics"]["p_value"] == round(drop_p, 6)
    assert cases["drops"]["statistics"]["adjusted_p"] == round(3 * drop_p, 6)
    low, high = newcombe_by_hand(10, 10, 2, 10)
    assert cases["drops"]["statistics"]["interval"] == [round(low, 4), round(high, 4)]
    assert cases["drops"]["statistics"]["difference"] == -0.8
    assert cases["flips"]["change"] == "noise" and cases["flips"]["old_passed"] is True
    assert cases["flips"]["new_passed"] is False and flip_p == pytest.approx(1.0)
    # 100 % -> 80 %: the textbook size, at least the exact test's 4
    assert cases["flips"]["statistics"]["runs_to_decide"] == textbook_runs(1.0, 0.8)
    assert f"about {textbook_runs(1.0, 0.8)} runs per side" in cases["flips"]["note"]
    assert cases["same"]["change"] == "unchanged"
    [runs_passed] = step["rates"]
    assert (runs_passed["old"], runs_passed["new"]) == ([18, 18], [9, 18])
    cost, latency = step["means"]
    assert cost["old"] == pytest.approx(0.011) and cost["new"] == pytest.approx(0.021)
    assert cost["interval"][0] > 0 and latency["interval"][0] > 0

    # The terminal, the markdown and the HTML page say the same
    report, page = tmp_path / "diff.md", tmp_path / "diff.html"
    shown = compare(old, new, "--report", str(report), "--html", str(page))
    flat = " ".join(shown.stdout.split())
    assert "1 regression(s), 0 fix(es), 1 within noise, 0 removed, 0 added" in flat
    assert f"regression drops -80.0 pts (95% {low * 100:+.1f}…{high * 100:+.1f}), p" in flat
    assert "within noise flips -20.0 pts" in flat
    assert "cost per run: $0.0110 → $0.0210: $+0.0100 (95% $+" in flat
    markdown = report.read_text()
    assert f"| `drops` | regression | 10/10 | 2/10 | -80.0 pts (95% {low * 100:+.1f}" in markdown
    assert "| `flips` | within noise | 5/5 | 4/5 |" in markdown
    assert "| latency per run | | | 110 ms → 210 ms: +100 ms (95% +" in markdown
    html = page.read_text()
    assert "within noise" in html and f"{low * 100:+.1f}…{high * 100:+.1f}" in html


def test_alpha_decides_what_counts(tmp_path):
    # 6/6 -> 2/6: p = 0.0606 by hand: noise at 0.05, a regression at 0.1
    p = fisher_by_hand(6, 6, 2, 6)
    assert 0.05 < p < 0.1
    old = write(tmp_path / "old.json", document([("c", 6, 6)]))
    new = write(tmp_path / "new.json", document([("c", 2, 6)]))
    strict = json.loads(compare(old, new, "--json").stdout)["comparisons"][0]["cases"][0]
    lenient = compare(old, new, "--json", "--alpha", "0.1")
    assert strict["change"] == "noise" and lenient.exit_code == 1
    assert json.loads(lenient.stdout)["comparisons"][0]["cases"][0]["change"] == "regression"


# ---------------------------------------------------------------------------- plan
def test_plan_from_a_results_file_and_from_an_assumed_rate(tmp_path):
    results = write(tmp_path / "r.json", document([("sure", 10, 10), ("shaky", 7, 10)]))
    done = CliRunner().invoke(evaluator.main, ["plan", results, "--detect", "20"])
    assert done.exit_code == 0, done.output
    flat = " ".join(done.stdout.split())
    sure, shaky = textbook_runs(1.0, 0.8), textbook_runs(0.7, 0.5)
    assert "sure │ 100% │ 10 │" in flat and f"│ {sure} │" in flat
    assert "shaky │ 70% │ 10 │" in flat and f"│ {shaky} │" in flat
    assert f"plan: -i {max(sure, shaky)} (--runs {max(sure, shaky)} for skills)" in flat
    assumed = CliRunner().invoke(evaluator.main, ["plan", "--rate", "0.5", "--detect", "10"])
    assert f"│ {textbook_runs(0.5, 0.4)}" in assumed.stdout and "-i 388 " in assumed.stdout
    both = CliRunner().invoke(evaluator.main, ["plan", results, "--rate", "0.5"])
    assert both.exit_code == 2 and both.stderr.count("\n") == 1 and "--rate" in both.stderr


def test_a_dry_run_says_what_its_runs_detect(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    suite = tmp_path / "s.csv"
    suite.write_text("test_name,user_prompt,expected_tools\na,hello,\n")
    server = str(Path(evaluator.__file__).parent / "examples" / "profiles_server.py")
    done = CliRunner().invoke(
        evaluator.main, ["--csv", str(suite), "--server-module", server, "-i", "7", "--dry-run"]
    )
    assert done.exit_code == 0, done.output
    change = detectable_change(C.PLAN_ASSUMED_RATE, 7)
    assert textbook_runs(0.9, 0.9 - change) <= 7
    flat = " ".join(done.output.split())
    assert (
        f"plan: 7 run(s) per case detect a change of {change * 100:.0f} points from a 90%" in flat
    )
    assert f"10 points need {textbook_runs(0.9, 0.8)} run(s) per case" in flat
