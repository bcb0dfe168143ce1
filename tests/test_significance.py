"""Is the change real? compare's statistics and plan's run counts, against figures computed by hand
here: Fisher's exact test from the hypergeometric distribution, Newcombe's interval from two Wilson
intervals written out, Holm's step-down, and the textbook sample size for two proportions."""

from __future__ import annotations

import json
from math import comb, sqrt
from pathlib import Path
from statistics import NormalDist

import pytest
from conftest import invoke

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


def wilson_by_hand(s: int, n: int, z: float = Z95) -> tuple[float, float]:
    p = s / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * sqrt(p * (1 - p) / n + z**2 / (4 * n * n)) / (1 + z**2 / n)
    return centre - half, centre + half


def newcombe_by_hand(s1: int, n1: int, s2: int, n2: int, z: float = Z95) -> tuple[float, float]:
    """New − old: d − √((p2 − l2)² + (u1 − p1)²), d + √((u2 − p2)² + (p1 − l1)²)."""
    p1, p2 = s1 / n1, s2 / n2
    (l1, u1), (l2, u2) = wilson_by_hand(s1, n1, z), wilson_by_hand(s2, n2, z)
    d = p2 - p1
    low, high = d - sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2), d + sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return max(-1.0, low), min(1.0, high)


def textbook_runs(p1: float, p2: float, z: float = Z95) -> int:
    """n = (z_{1-α/2}·√(2·p̄·q̄) + z_{1-β}·√(p1·q1 + p2·q2))² / (p1 − p2)², rounded up."""
    mean = (p1 + p2) / 2
    top = z * sqrt(2 * mean * (1 - mean)) + Z80 * sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    exact = top**2 / (p1 - p2) ** 2
    return int(exact) + (exact > int(exact))


def z_of(level: float) -> float:
    """The two-sided normal quantile of a significance level (1.96 for 0.05)."""
    return NormalDist().inv_cdf(1 - level / 2)


def fewest_flip_runs(level: float) -> int:
    """The fewest runs a side at which n/n against 0/n is significant: 2 / C(2n, n) < level."""
    return next(n for n in range(1, 100) if 2 / comb(2 * n, n) < level)


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
    return invoke("compare", *args)


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
    # one story: the interval and the runs at the level Holm tests each case at: the smallest p
    # at alpha / 3 (98.3 %), the two p's of 1 (tied: the first rank of the tie) at alpha / 2
    assert cases["drops"]["statistics"]["level"] == pytest.approx(0.05 / 3)
    assert cases["drops"]["statistics"]["family"] == 3
    low, high = newcombe_by_hand(10, 10, 2, 10, z_of(0.05 / 3))
    assert cases["drops"]["statistics"]["interval"] == [round(low, 4), round(high, 4)]
    assert cases["drops"]["statistics"]["difference"] == -0.8
    assert cases["flips"]["change"] == "noise" and cases["flips"]["old_passed"] is True
    assert cases["flips"]["new_passed"] is False and flip_p == pytest.approx(1.0)
    # 100 % -> 80 % at the flip's Holm level (alpha / 2): the textbook size, at least the exact
    # test's fewest, and more than the 5 runs a side already made
    assert cases["flips"]["statistics"]["level"] == pytest.approx(0.025)
    flip_runs = max(textbook_runs(1.0, 0.8, z_of(0.025)), fewest_flip_runs(0.025), 6)
    assert cases["flips"]["statistics"]["runs_to_decide"] == flip_runs
    assert f"about {flip_runs} runs per side" in cases["flips"]["note"]
    flip_low, flip_high = newcombe_by_hand(5, 5, 4, 5, z_of(0.025))
    assert cases["flips"]["statistics"]["interval"] == [round(flip_low, 4), round(flip_high, 4)]
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
    drop_shown = f"-80.0 pts (98.3% {low * 100:+.1f}…{high * 100:+.1f}), p {3 * drop_p:.3g}"
    assert f"regression drops {drop_shown} (Holm over 3 cases)" in flat
    assert (
        f"within noise flips -20.0 pts (97.5% {flip_low * 100:+.1f}…{flip_high * 100:+.1f}), "
        "p 1 (Holm over 3 cases)" in flat
    )
    # the runs are at the same level: said once, beside them
    assert f"about {flip_runs} runs per side (at 97.5%, Holm over 3 cases)" in flat
    assert "cost per run: $0.0110 → $0.0210: $+0.0100 (95% $+" in flat
    markdown = report.read_text()
    assert f"| `drops` | regression | 10/10 | 2/10 | {drop_shown} (Holm over 3 cases) |" in markdown
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


# ---------------------------------------------------------------------------- one story: 16 cases, one broken
BROKEN = "breaks"
SUITE_OF_16 = [(f"case{i:02d}", 5, 5) for i in range(15)]
FAMILY_LEVEL = 0.05 / 16  # the broken case has the smallest p: Holm tests it at alpha / 16


def broken_suite(tmp_path: Path) -> tuple[str, str]:
    """16 cases at -i 5; one goes 5/5 -> 0/5, the other 15 pass every run in both files."""
    old = write(tmp_path / "old.json", document([*SUITE_OF_16, (BROKEN, 5, 5)]))
    new = write(tmp_path / "new.json", document([*SUITE_OF_16, (BROKEN, 0, 5)]))
    return old, new


def page_data(page: Path) -> dict:
    import re

    found = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', page.read_text(), re.S
    )
    assert found
    return json.loads(found.group(1))


def terminal(stdout: str) -> str:
    """What compare printed of the comparison, flattened: the lines after the `wrote FILE` ones."""
    return " ".join(" ".join(x for x in stdout.splitlines() if not x.startswith("wrote ")).split())


def the_story(tmp_path: Path) -> tuple[float, tuple[float, float], int]:
    """What every writer must say of the broken case, computed here: Fisher's p = 2 / C(10, 5)
    times 16 (Holm), Newcombe's interval at 1 − alpha/16, the runs that decide at alpha/16."""
    p = 16 * 2 / comb(10, 5)
    interval = newcombe_by_hand(5, 5, 0, 5, z_of(FAMILY_LEVEL))
    runs = max(textbook_runs(1.0, 0.0, z_of(FAMILY_LEVEL)), fewest_flip_runs(FAMILY_LEVEL))
    return p, interval, runs


def test_a_case_that_breaks_completely_is_a_suspected_regression_everywhere(cli, tmp_path):
    """The finding of issue 36: 5/5 -> 0/5 in a 16-case suite was "within noise", exit 0, under
    a ✅, its interval at 95 % beside a p Holm-corrected over 16 cases, and "about 4 runs per
    side would decide" after 5 a side were run."""
    old, new = broken_suite(tmp_path)
    p, (low, high), runs = the_story(tmp_path)
    assert 0.05 < p < 0.2 and runs > 5  # not significant over 16 cases; 5 a side did not decide
    report, page, comment = tmp_path / "diff.md", tmp_path / "diff.html", tmp_path / "pr.md"
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    summary.write_text("")
    outputs.write_text("")
    github = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)}
    shown = cli(
        "compare", old, new, "--report", report, "--html", page, "--pr-comment", comment, env=github
    )
    # a suspected regression fails the comparison (exit 1) unless --significant-only
    assert shown.exit_code == 1, shown.output
    stats = f"-100.0 pts (99.7% {low * 100:+.1f}…{high * 100:+.1f}), p {p:.3g} (Holm over 16 cases)"
    decide = f"about {runs} runs per side (at 99.7%, Holm over 16 cases) would decide"

    # JSON: the kind, and the p, interval and runs all at alpha / 16
    [step] = json.loads(compare(old, new, "--json").stdout)["comparisons"]
    [case] = [c for c in step["cases"] if c["name"] == BROKEN]
    assert case["change"] == "suspected" and step["failed"] is True
    assert step["cases"][0]["name"] == BROKEN  # shown first
    statistics = case["statistics"]
    assert statistics["adjusted_p"] == round(p, 6) and not statistics["significant"]
    assert statistics["level"] == pytest.approx(FAMILY_LEVEL) and statistics["family"] == 16
    assert statistics["interval"] == [round(low, 4), round(high, 4)]
    assert statistics["runs_to_decide"] == runs

    # the terminal (after the lines that say which files were written)
    flat = terminal(shown.stdout)
    headline = flat.split(" passed ")[0]
    assert "✅" not in flat and headline.startswith("❌ ")
    assert "0 regression(s), 1 suspected regression(s), 0 fix(es), 0 within noise" in headline
    assert f"suspected regression {BROKEN} {stats}" in flat and decide in flat
    assert "within noise" not in flat.split(" passed ", 1)[1]

    # the markdown report
    markdown = report.read_text()
    assert "✅" not in markdown and markdown.startswith("## ❌ Comparison: 0 regression(s), 1 ")
    assert f"| `{BROKEN}` | suspected regression | 5/5 | 0/5 | {stats} |" in markdown
    assert decide in markdown

    # the HTML page: its data, and the page as a browser draws it
    data = page_data(page)
    [drawn] = data["comparisons"]
    assert data["passed"] is False and drawn["failed"] is True and drawn["verdict"] == "failed"
    assert drawn["changes"][0]["shown"] == "suspected regression"
    assert drawn["changes"][0]["statistics"] == stats and decide in drawn["changes"][0]["reasons"]

    # the pull-request comment and the step summary
    body = comment.read_text()
    assert "✅" not in body
    assert body.startswith(
        "### ❌ Against the baseline: 0 regression(s), 1 suspected regression(s)"
    )
    lines = body.splitlines()
    at = lines.index("#### Suspected regressions (every run passed before, every run fails now)")
    row = lines[at + 4]
    assert row.startswith(f"| `{BROKEN}` | 5/5 | 0/5 | -100.0 pts | {low * 100:+.1f}…")
    assert f"| 99.7% | {p:.3g} |" in row and "Holm over 16 cases" in row
    step_summary = summary.read_text()
    assert "✅" not in step_summary and step_summary.startswith("## ❌ Comparison")
    said = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
    assert said["passed"] == "false" and said["suspected_regressions"] == "1"
    assert said["regressions"] == "0"


def test_a_suspected_regression_can_be_let_through_but_never_under_a_tick(tmp_path):
    """--significant-only: exit 0 on a suspected regression, which still leads every report,
    under ⚠️ (the HTML page: a warning badge)."""
    old, new = broken_suite(tmp_path)
    report, page, comment = tmp_path / "diff.md", tmp_path / "diff.html", tmp_path / "pr.md"
    shown = compare(
        old, new, "--significant-only", "--report", str(report), "--html", str(page),
        "--pr-comment", str(comment),
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    flat = terminal(shown.stdout)
    assert "✅" not in flat and flat.startswith("⚠️ ")
    assert f"suspected regression {BROKEN} -100.0 pts (99.7% " in flat
    markdown = report.read_text()
    assert markdown.startswith("## ⚠️ Comparison: 0 regression(s), 1 suspected regression(s)")
    assert comment.read_text().startswith("### ⚠️ Against the baseline: 0 regression(s), 1 ")
    data = page_data(page)
    assert data["passed"] is True and data["comparisons"][0]["verdict"] == "warning"
    [step] = json.loads(compare(old, new, "--significant-only", "--json").stdout)["comparisons"]
    assert step["failed"] is False and step["cases"][0]["change"] == "suspected"
    # a significant regression still fails: 10/10 -> 0/10 over 16 cases is p 16 x 2/C(20,10)
    worse = write(tmp_path / "worse.json", document([*SUITE_OF_16, (BROKEN, 0, 10)]))
    before = write(tmp_path / "before.json", document([*SUITE_OF_16, (BROKEN, 10, 10)]))
    assert compare(before, worse, "--significant-only").exit_code == 1


def test_the_html_page_heads_a_suspected_regression_with_no_pass(tmp_path):
    """The page as a browser draws it: the header badge and the comparison's badge."""
    from test_html_report import dump_dom, parse_dom

    old, new = broken_suite(tmp_path)
    for extra, badge in (((), "FAILED"), (("--significant-only",), "SUSPECTED REGRESSION")):
        page = tmp_path / f"diff{len(extra)}.html"
        assert compare(old, new, "--html", str(page), *extra).stdout
        text = " ".join(parse_dom(dump_dom(page, tmp_path)).text.split())
        assert text.startswith(f"Comparison report {badge} Comparison model "), text[:200]
        assert "PASSED" not in text and "no regression" not in text
        assert "suspected regression" in text and "Holm over 16 cases" in text


def test_runs_to_decide_are_never_the_runs_already_made():
    """Within noise, "about N runs per side would decide" names more runs than either side made:
    N a side would have decided it."""
    from claude_tool_evaluator.writers.comparison import RateChange

    for old, runs_made, new in ((5, 5, 0), (5, 5, 1), (10, 10, 6), (3, 3, 0), (1, 1, 0)):
        for family in (1, 4, 16):
            rate = RateChange("c", old, runs_made, new, runs_made, 0.05)
            rate.adjusted_p, rate.family = min(1.0, family * rate.p_value), family
            rate.level = 0.05 / family
            if not rate.significant:
                assert rate.runs_to_decide > runs_made, (old, new, family)
                assert rate.runs_to_decide >= fewest_flip_runs(rate.level)


# ---------------------------------------------------------------------------- plan
def test_plan_from_a_results_file_and_from_an_assumed_rate(cli, tmp_path):
    results = write(tmp_path / "r.json", document([("sure", 10, 10), ("shaky", 7, 10)]))
    done = cli("plan", results, "--detect", "20")
    assert done.exit_code == 0, done.output
    flat = " ".join(done.stdout.split())
    sure, shaky = textbook_runs(1.0, 0.8), textbook_runs(0.7, 0.5)
    assert "sure │ 100% │ 10 │" in flat and f"│ {sure} │" in flat
    assert "shaky │ 70% │ 10 │" in flat and f"│ {shaky} │" in flat
    assert f"plan: -i {max(sure, shaky)} (--runs {max(sure, shaky)} for skills)" in flat
    assumed = cli("plan", "--rate", "0.5", "--detect", "10")
    assert f"│ {textbook_runs(0.5, 0.4)}" in assumed.stdout and "-i 388 " in assumed.stdout
    both = cli("plan", results, "--rate", "0.5")
    assert both.exit_code == 2 and both.stderr.count("\n") == 1 and "--rate" in both.stderr


def test_a_dry_run_says_what_its_runs_detect(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    suite = tmp_path / "s.csv"
    suite.write_text("test_name,user_prompt,expected_tools\na,hello,\n")
    server = str(Path(evaluator.__file__).parent / "examples" / "profiles_server.py")
    done = cli("--csv", str(suite), "--server-module", server, "-i", "7", "--dry-run")
    assert done.exit_code == 0, done.output
    change = detectable_change(C.PLAN_ASSUMED_RATE, 7)
    assert textbook_runs(0.9, 0.9 - change) <= 7
    flat = " ".join(done.output.split())
    assert (
        f"plan: 7 run(s) per case detect a change of {change * 100:.0f} points from a 90%" in flat
    )
    assert f"10 points need {textbook_runs(0.9, 0.8)} run(s) per case" in flat


def test_scipy_stats_is_preloaded_in_the_background_and_gives_the_same_p():
    """A plugin run's Fisher p needs scipy.stats at its end: preload_scipy_stats imports it in a
    daemon thread at the start (a fresh interpreter, where nothing imported it yet), and the p
    read afterwards is the one computed by hand."""
    import subprocess
    import sys

    code = (
        "import sys, threading\n"
        "from claude_tool_evaluator.scoring.statistics import fisher_p_value, preload_scipy_stats\n"
        "assert 'scipy.stats' not in sys.modules\n"
        "preload_scipy_stats()\n"
        "[t.join() for t in threading.enumerate() if t.name == 'preload-scipy-stats']\n"
        "assert 'scipy.stats' in sys.modules\n"
        "print(fisher_p_value(0, 3, 3, 3))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(evaluator.__file__).parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(fisher_by_hand(0, 3, 3, 3))
