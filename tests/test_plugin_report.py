"""The plugin's effect as `claude plugin eval` 2.1.332 reports it: its aggregates (`score`,
`scoreWithout`, `delta`, `overallScore`, `meanDelta`), its HTML report's headline ("Plugin effect:
↑ +33.3 pts vs baseline — improved 2 · flat 2 · regressed 0 of 4 cases."), suite and baseline
scores, computed by hand; then our reports of the same runs side by side with Claude Code's."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from claude_tool_evaluator.results_schema.plugin import (
    ArmDeltaRecord,
    PluginCaseRecord,
    PluginEffectRecord,
    PluginRecord,
)
from claude_tool_evaluator.scoring.plugin_graders import (
    CaseEffect,
    SuiteEffect,
    case_effect,
    claude_percent,
    effect_points,
    js_fixed,
    plugin_title,
    suite_effect,
)
from claude_tool_evaluator.writers.plugin import plugin_junit, plugin_markdown


def test_numbers_are_shown_as_claude_code_shows_them():
    # JavaScript's toFixed rounds the exact binary value half away from zero
    assert js_fixed(0.125, 2) == "0.13" and js_fixed(-0.125, 2) == "-0.13"
    assert js_fixed(1 / 3, 2) == "0.33" and js_fixed(12.5, 1) == "12.5"
    # Math.round(share * 1000) / 10, whole numbers without a decimal, never 100% under 1
    assert claude_percent(5 / 6) == "83.3%" and claude_percent(0.5) == "50%"
    assert claude_percent(0.625) == "62.5%" and claude_percent(1) == "100%"
    assert claude_percent(0.9996) == "99.9%" and claude_percent(0) == "0%"
    assert effect_points(1 / 3) == "↑ +33.3 pts"
    assert effect_points(0.0) == "· 0.0 pts"
    assert effect_points(-0.125) == "↓ -12.5 pts"
    assert plugin_title("greeter", "1.0.0") == "greeter v1.0.0"
    assert plugin_title("greeter", None) == "greeter"
    assert plugin_title("greeter", "1.0 <b>") == "greeter"


def test_the_fixture_s_runs_give_claude_code_s_figures():
    """tests/plugins/greeter against the scripted server, 2 runs per arm (as `claude plugin eval
    --json` reported them): 01-greet 1,1 vs 0,0; 02-capital and 03-welcome-command 1,1 vs 1,1;
    04-yaml-case 1/3,1/3 vs 0,0. Case scores are the means of run scores, the delta their
    difference; the suite score the mean of case scores (1+1+1+1/3)/4 = 0.8333, the baseline
    (0+1+1+0)/4 = 0.5, the mean delta (1+0+0+1/3)/4 = 0.3333; improved: delta > 0 (01, 04),
    flat: exactly 0 (02, 03)."""
    third = 1 / 3
    cases = [
        case_effect("01-greet", [1, 1], [0, 0]),
        case_effect("02-capital", [1, 1], [1, 1]),
        case_effect("03-welcome-command", [1, 1], [1, 1]),
        case_effect("04-yaml-case", [third, third], [0, 0]),
    ]
    assert all(isinstance(c, CaseEffect) for c in cases)
    assert cases[0].delta == 1 and cases[1].delta == 0
    assert cases[3].score == pytest.approx(third) and cases[3].pass_rate == 0
    assert cases[3].delta == pytest.approx(third) and cases[3].score_without == 0
    suite = suite_effect(cases)
    assert isinstance(suite, SuiteEffect)
    assert (suite.cases_total, suite.cases_passed) == (4, 3)
    assert suite.overall_score == pytest.approx(5 / 6)
    assert suite.overall_pass_rate == 0.75
    assert suite.mean_delta == pytest.approx(third) and suite.baseline_score == 0.5
    assert (suite.improved, suite.flat, suite.regressed) == (2, 2, 0)
    assert suite.headline() == (
        "Plugin effect: ↑ +33.3 pts vs baseline — improved 2 · flat 2 · regressed 0 of 4 cases."
    )


def test_the_issue_s_figures_twelve_and_a_half_points():
    """Case scores with 1, 1, 0.5, 0 and without 0.5, 1, 0.5, 0: suite 62.5 %, baseline 50 %,
    deltas 0.5, 0, 0, 0, mean 0.125: improved 1, flat 3."""
    cases = [
        case_effect("a", [1, 1], [1, 0]),
        case_effect("b", [1], [1]),
        case_effect("c", [1, 0], [0.5, 0.5]),
        case_effect("d", [0, 0], [0, 0]),
    ]
    suite = suite_effect(cases)
    assert claude_percent(suite.overall_score) == "62.5%"
    assert claude_percent(suite.baseline_score or 0) == "50%"
    assert suite.headline() == (
        "Plugin effect: ↑ +12.5 pts vs baseline — improved 1 · flat 3 · regressed 0 of 4 cases."
    )


def test_a_case_with_an_errored_run_has_no_delta_and_a_single_arm_none():
    """Claude Code leaves a case's delta (and its baseline score) out when a run was not fully
    graded; the counts are over the cases with a delta ("of 2 cases"); a case that ran one arm has
    neither; without any delta there is no headline."""
    errored = case_effect("e", [1, 1], [0, 0], errored=True)
    assert errored.delta is None and errored.score_without is None
    assert errored.pass_rate_without == 0
    single = case_effect("s", [0.5], None)
    assert single.delta is None and single.pass_rate_without is None
    worse = case_effect("w", [0, 0], [1, 0])
    assert worse.delta == -0.5
    suite = suite_effect([errored, single, worse, case_effect("f", [1], [1])])
    assert suite.mean_delta == -0.25 and suite.baseline_score == 0.75
    assert (suite.improved, suite.flat, suite.regressed) == (0, 1, 1)
    assert suite.headline() == (
        "Plugin effect: ↓ -25.0 pts vs baseline — improved 0 · flat 1 · regressed 1 of 2 cases."
    )
    assert suite_effect([single]).headline() == ""
    assert suite_effect([]).overall_score == 0


# ---- side by side: our reports and claude plugin eval's on the same scripted runs
def their_headline(page: str) -> str:
    """The verdict line of claude plugin eval's HTML report, as text."""
    found = re.search(r'<p class="verdict">(.*?)</p>', page, re.S)
    assert found, "no verdict line in claude plugin eval's report"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def their_tiles(page: str) -> dict[str, str]:
    """claude plugin eval's report tiles: label -> value."""
    tiles = re.findall(
        r'<span class="label">(.*?)</span><span class="value[^"]*">(.*?)</span>', page, re.S
    )
    return {
        html.unescape(re.sub(r"<[^>]+>", "", k)): html.unescape(re.sub(r"<[^>]+>", "", v))
        for k, v in tiles
    }


def test_our_reports_show_claude_code_s_plugin_effect(greeter_side_by_side):
    runs = greeter_side_by_side
    theirs, ours = runs.theirs, runs.ours
    page = runs.read("cc.html")
    headline = their_headline(page)
    tiles = their_tiles(page)
    # claude plugin eval's own figures, and ours computed from its JSON with the same functions
    assert headline == (
        "Plugin effect: ↑ +33.3 pts vs baseline — improved 2 · flat 2 · regressed 0 of 4 cases."
    )
    assert tiles["Suite score · with plugin"] == "83.3%" and tiles["Baseline score"] == "50%"
    again = suite_effect(
        [
            case_effect(
                c["name"],
                [r["score"] for r in c["arms"]["with"]],
                [r["score"] for r in c["arms"]["without"]],
            )
            for c in theirs["cases"]
        ]
    )
    assert again.headline() == headline
    assert again.mean_delta == pytest.approx(theirs["aggregates"]["meanDelta"])
    assert again.overall_score == pytest.approx(theirs["aggregates"]["overallScore"])
    # ours, on the same runs: the effect, each case's aggregates, the plugin's name and version
    effect = ours["plugin"]["effects"][0]
    assert effect["headline"] == headline and effect["title"] == "greeter v1.0.0"
    assert ours["plugin"]["version"] == theirs["suite"]["plugins"][0]["version"] == "1.0.0"
    for case, their_case in zip(ours["plugin"]["cases"], theirs["cases"], strict=True):
        assert case["name"] == their_case["name"]
        for field, theirs_field in (
            ("score", "score"),
            ("score_without", "scoreWithout"),
            ("delta", "delta"),
            ("pass_rate", "passRate"),
        ):
            assert case[field] == pytest.approx(their_case["aggregates"][theirs_field]), field
    # the arm without the plugin is a labelled baseline: never counted among the cases, never a
    # failure (claude plugin eval: 3 of 4 cases at the threshold)
    assert theirs["aggregates"]["casesPassed"] == 3
    report = runs.read("ours.md")
    assert "Plugin evaluation: 3/4 cases passed; the baseline 2/4, which never fails" in report
    assert "| Passed | 3/4 (75%; baseline apart) |" in report
    assert "| 01-greet &#91;without&#93; | baseline (not passed) |" in report
    failures = report[report.index("### Failures") : report.index("### All cases")]
    assert "[without]" not in failures and "04-yaml-case" in failures
    figures = (
        "suite score 83.3% with the plugin · baseline 50% without it · 3 of 4 cases ≥ 100% "
        "threshold · perfect runs 75%"
    )
    for name in ("ours.md", "comment.md", "summary.md"):
        text = runs.read(name)
        assert "Plugin greeter v1.0.0: with vs without" in text, name
        assert f"**greeter v1.0.0 — {headline}**" in text, name
        assert figures in text, name
        assert "| case | with greeter (passed/runs) | baseline (without) (passed/runs) |" in text
        assert "| 01-greet | 2/2 | 0/2 | 1.00 | 0.00 | ↑ +100.0 pts |" in text, name
        assert "| 02-capital | 2/2 | 2/2 | 1.00 | 1.00 | · 0.0 pts |" in text, name
    assert f"greeter v1.0.0 — {headline}" in runs.ours_stdout
    assert figures in runs.ours_stdout
    assert (
        "01-greet: with 2/2, without 0/2: within noise: delta +1.00 [+0.07, +1.00], p = 0.3333; "
        "about 4 runs per arm would decide it; score 1.00 with, 0.00 baseline (without): "
        "Δ ↑ +100.0 pts"
    ) in runs.ours_stdout
    junit = runs.read("ours.xml")
    assert html.escape(f"plugin effect: greeter v1.0.0 — {headline}", quote=True) in junit
    assert "<title>Plugin greeter v1.0.0" not in runs.read("ours.html")  # the script titles it
    assert headline in runs.read("ours.html")  # in the page's data (the browser test draws it)


def test_the_readme_s_excerpt_is_what_the_report_says(greeter_side_by_side):
    """Every line of the README's plugin report excerpt is a line of the report on the fixture."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("**The plugin report.**")
    block = re.search(r"```markdown\n(.*?)```", readme[start:], re.S)
    assert block, "no markdown excerpt after **The plugin report.**"
    report = greeter_side_by_side.read("ours.md").splitlines()
    excerpt = [line for line in block.group(1).splitlines() if line]
    assert len(excerpt) >= 7
    for line in excerpt:
        assert line.replace("[", "&#91;").replace("]", "&#93;") in report, line


def test_without_a_baseline_arm_or_with_an_errored_run_the_reports_say_so():
    """--ablation none: no verdict line, Claude Code's "absolute scores only"; a case whose run
    errored has no Δ (—), and the suite's effect is its other cases'; a results file written
    before the plugin's effect was recorded still renders (its name, no verdict line)."""
    alone = PluginRecord(
        name="greeter",
        version="1.0.0",
        path="p",
        eval_dir="p/evals",
        ablation="none",
        cases=[PluginCaseRecord(name="a", score=0.5, pass_rate=0.5)],
        deltas=[ArmDeltaRecord(name="a", case="a", with_passed=1, with_runs=2, score_with=0.5)],
        effects=[
            PluginEffectRecord(
                title="greeter v1.0.0", cases_total=1, overall_score=0.5, overall_pass_rate=0.5
            )
        ],
    )
    text = "\n".join(plugin_markdown(alone))
    assert "**greeter v1.0.0 — no baseline arm was run: absolute scores only.**" in text
    assert "suite score 50% with the plugin · 0 of 1 cases ≥ 100% threshold" in text
    assert "| a | 1/2 | — | 0.50 | — | — |" in text
    errored = alone.model_copy(
        update={
            "ablation": "with-without",
            "cases": [PluginCaseRecord(name="a", score=1.0, pass_rate=1.0, pass_rate_without=0)],
            "deltas": [
                ArmDeltaRecord(
                    name="a", case="a", with_passed=2, with_runs=2, without_runs=2, score_with=1
                )
            ],
        }
    )
    assert "| a | 2/2 | 0/2 | 1.00 | 0.00 | — |" in "\n".join(plugin_markdown(errored))
    old = PluginRecord(name="greeter", path="p", eval_dir="p/evals", ablation="with-without")
    assert plugin_markdown(old)[0] == "## Plugin greeter: with vs without"
    assert plugin_junit(old) == []
    (effect,) = plugin_junit(alone)
    assert effect[1].name.startswith("plugin effect: greeter v1.0.0 — no baseline arm")
