"""The mode × option walk for calibrate (people's labels against the judge) and render's
--label-sheet; and calibrate's own numbers: kappa computed by hand equals the tool's, a grader
below the floor is flagged in a later run's markdown and HTML, every bad label line is named.

The table, the lab and the registry of observers are in mode_lab.py; test_mode_options.py checks
that the observers cover exactly the table. One judged results file (10 runs, the judge passes 6)
is made once per lab and read by every test here."""

from __future__ import annotations

import contextlib
import json
import math
import re

import pytest
from conftest import CLAUDE, TEST_API_KEY
from mode_lab import (
    JUDGED_RUNS,
    OBSERVERS,
    Lab,
    calibrated,
    flagged_run,
    judge_verdicts,
    judged_results,
    lab_plugin,
    observed_in,
    observes,
    page_data,
    plugin_model,
    write,
)

import test_constants as C
from claude_tool_evaluator.scoring.calibration import JudgedVerdict
from claude_tool_evaluator.writers.calibration import label_sample

FLAG_TITLE = "Judge graders below their calibration floor"


def _sheet_data(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="sheet-data">(.*?)</script>', page, re.S)
    assert found, "the sheet carries its data"
    return json.loads(found.group(1))


def _section(page: dict, key: str) -> dict:
    return next(s["data"] for s in page["sections"] if s["key"] == key)


# ============================================================================ kappa by hand
def test_kappa_computed_by_hand_equals_the_tool(lab: Lab):
    run, folder = calibrated(lab, "-o", "calibration.json")
    assert run.code == 1, run.output  # below the default floor: the run fails
    grader = json.loads((folder / "calibration.json").read_text())["calibration"]["graders"][0]
    # The labels make this table (person, judge) over n = 10 runs:
    #   both pass 5, person pass & judge fail 1, person fail & judge pass 1, both fail 3.
    n, both_pass, pass_fail, fail_pass, both_fail = 10, 5, 1, 1, 3
    assert (grader["n"], grader["pass_pass"], grader["pass_fail"]) == (n, both_pass, pass_fail)
    assert (grader["fail_pass"], grader["fail_fail"]) == (fail_pass, both_fail)
    p_o = (5 + 3) / 10  # 0.8
    person_pass, judge_pass = 6 / 10, 6 / 10
    p_e = 0.6 * 0.6 + 0.4 * 0.4  # 0.52
    kappa = (0.8 - 0.52) / (1 - 0.52)  # 0.28 / 0.48 = 0.58333...
    assert (p_o, p_e) == (0.8, pytest.approx(0.52)) and person_pass == judge_pass
    assert grader["agreement"] == pytest.approx(p_o)
    assert grader["expected"] == pytest.approx(p_e)
    assert grader["kappa"] == pytest.approx(7 / 12, abs=1e-6) == pytest.approx(kappa, abs=1e-6)
    # Its large-sample variance (Fleiss, Cohen & Everitt 1969), from the proportions
    # p11 = .5, p12 = .1, p21 = .1, p22 = .3, rows and columns .6 / .4, 1 - kappa = 5/12:
    diagonal = 0.5 * (1 - (0.6 + 0.6) * 5 / 12) ** 2 + 0.3 * (1 - (0.4 + 0.4) * 5 / 12) ** 2
    off = (5 / 12) ** 2 * (0.1 * (0.6 + 0.4) ** 2 + 0.1 * (0.4 + 0.6) ** 2)
    chance = (7 / 12 - 0.52 * 5 / 12) ** 2
    variance = (diagonal + off - chance) / (10 * (1 - 0.52) ** 2)  # 0.0688...
    assert variance == pytest.approx(0.068842, abs=1e-5)
    half = 1.959964 * math.sqrt(variance)  # 0.514
    low, high = grader["interval"]
    assert low == pytest.approx(7 / 12 - half, abs=1e-5) and high == 1.0  # 1.098 is cut to 1
    assert grader["below_floor"] is True and grader["min_kappa"] == C.DEFAULT_MIN_KAPPA


# ============================================================================ the flag in later reports
def test_a_grader_below_the_floor_is_flagged_in_later_reports_until_recalibrated(lab: Lab):
    _, folder = calibrated(lab)
    kept = json.loads((folder / C.CALIBRATION_FILE).read_text())
    assert kept["format"] == C.CALIBRATION_FORMAT
    assert [(g["grader"], g["below_floor"], len(g["cases"])) for g in kept["graders"]] == [
        ("judge", True, JUDGED_RUNS)
    ]
    later = flagged_run(lab, folder, "--report", folder / "later.md", "--html", folder / "l.html")
    assert later.code == 0, later.output
    report = (folder / "later.md").read_text()
    assert (
        FLAG_TITLE in report
        and "| judge | judged-01, " in report
        and "| 0.58 (0.07 to 1.00) |" in report
    )
    flags = _section(page_data(folder / "l.html"), "judge_flags")
    assert flags["title"] == FLAG_TITLE and flags["tables"][0]["rows"][0][0] == "judge"
    assert "below its calibration floor: judge kappa 0.58 (0.07 to 1.00)" in later.output
    # calibrated again at a floor it clears: later runs no longer flag it
    with contextlib.chdir(folder):
        again = lab.run("calibrate", "labels.csv", judged_results(lab), "--min-kappa", "0.5")
    assert again.code == 0, again.output
    clean = flagged_run(lab, folder, "--report", folder / "clean.md")
    assert FLAG_TITLE not in (folder / "clean.md").read_text()
    assert clean.code == 0


@pytest.mark.skipif(CLAUDE is None, reason="the Claude Code CLI is not installed")
def test_a_plugin_llm_grader_below_the_floor_is_flagged_in_the_plugin_reports(lab: Lab):
    """05-judged (an llm grader, `warm`) once in each arm through Claude Code; a person fails the
    run with the plugin the judge passed: kappa 0 (the judge passed both). The same -o resumed
    (no run is made again) writes reports that flag `warm`."""
    folder = lab.fresh("plugin").parent
    line = ["plugin", lab_plugin(lab), "--case", "05-judged", "--runs", "1", "-o", "p.json"]
    with contextlib.chdir(folder):
        first = lab.run(*line, model=plugin_model)
        assert first.code == 0, first.output
        results = json.loads((folder / "p.json").read_text())["results"]
        assert sorted((r["case"], r["arm"], r["run"]) for r in results) == [
            ("05-judged", "with", 1),
            ("05-judged", "without", 1),
        ]
        write(
            folder / "labels.csv",
            "run,grader,verdict\n05-judged/with/1,warm,fail\n05-judged/without/1,warm,pass\n",
        )
        sheet = lab.run("render", "p.json", "--label-sheet", "sheet.html")
        assert sheet.code == 0, sheet.output
        items = _sheet_data((folder / "sheet.html").read_text())["items"]
        assert {(i["run"], i["grader"], i["scope"]) for i in items} == {
            ("05-judged/with/1", "warm", "greeter"),
            ("05-judged/without/1", "warm", "greeter"),
        }
        assert all(i["criterion"] == "The card greets Alex warmly." for i in items)
        calibration = lab.run("calibrate", "labels.csv", "p.json", "--json")
        assert calibration.code == 1, calibration.output
        grader = calibration.document()["calibration"]["graders"][0]
        assert (grader["scope"], grader["grader"], grader["kappa"]) == ("greeter", "warm", 0.0)
        again = lab.run(*line, "--resume", "--report", "p.md", "--html", "p.html")
        assert again.code == 0, again.output
    assert again.requests == [], "resumed: nothing ran again"
    assert FLAG_TITLE in (folder / "p.md").read_text()
    assert "plugin greeter: warm" in (folder / "p.md").read_text()
    flags = _section(page_data(folder / "p.html"), "judge_flags")
    assert flags["tables"][0]["rows"][0][:2] == ["plugin greeter: warm", "05-judged"]


# ============================================================================ bad label lines
def test_every_bad_label_line_is_one_line_naming_file_and_line(lab: Lab):
    runs = sorted(judge_verdicts(judged_results(lab)))
    folder = lab.fresh("bad").parent
    labels = write(
        folder / "labels.csv",
        "run,grader,verdict,note\n"
        f"{runs[0]},judge,pass,fine\n"  # line 2: good
        f"{runs[1]},judge,maybe,\n"  # line 3: neither pass nor fail
        ",judge,pass,\n"  # line 4: no run
        f"{runs[0]},judge,fail,\n"  # line 5: labelled again
        f"{runs[2]},judge,pass,a,b\n",  # line 6: more cells than columns
    )
    run = lab.run("calibrate", labels, judged_results(lab))
    lines = run.stderr.strip().splitlines()
    assert run.code == 2 and len(lines) == 4, run.stderr
    for number, what in ((3, "neither pass nor fail"), (4, "no run"), (5, "labelled again")):
        assert any(f"labels.csv:{number}: " in line and what in line for line in lines), lines
    assert any("labels.csv:6: more cells than columns" in line for line in lines), lines
    assert "Traceback" not in run.output and not (folder / C.CALIBRATION_FILE).exists()
    unknown = write(
        folder / "unknown.jsonl",
        '{"run": "nope/1/m", "grader": "judge", "verdict": "fail"}\n{bad\n',
    )
    run = lab.run("calibrate", unknown, judged_results(lab))
    assert run.code == 2
    assert "unknown.jsonl:2: " in run.stderr and "one JSON object a line" in run.stderr


# ============================================================================ the label sheet
def test_the_label_sheet_escapes_and_redacts_what_a_transcript_says(lab: Lab):
    document = json.loads(judged_results(lab).read_text())
    hostile = f"</script><img src=x onerror=alert(1)> key {TEST_API_KEY}"
    for result in document["results"]:
        result["agent_reasoning"] = hostile
        result["conversation_history"][-1]["content"] = hostile
    source = write(lab.fresh("hostile.json"), json.dumps(document))
    sheet = lab.fresh("sheet.html")
    assert lab.run("render", source, "--label-sheet", sheet).code == 0
    page = sheet.read_text()
    assert page.count("</script>") == 2, "only the page's own two script elements end"
    assert "<img" not in page and TEST_API_KEY not in page
    items = _sheet_data(page)["items"]
    assert items and all("onerror" in item["answer"] for item in items), "shown as text"
    assert "innerHTML" not in page


def test_the_label_sheet_samples_each_stratum_the_same_way():
    """Up to C.LABEL_SHEET_PER_STRATUM runs of each (case, grader, judge verdict), seeded."""
    verdicts = [
        JudgedVerdict(f"{case}/{i}/m", case, "judge", i % 2 == 0)
        for case in ("a", "b")
        for i in range(10)
    ]
    chosen = label_sample(verdicts)
    assert len(chosen) == 4 * C.LABEL_SHEET_PER_STRATUM
    assert (
        chosen == label_sample(list(reversed(verdicts)))
        or len({(v.case, v.passed) for v in chosen}) == 4
    )
    assert label_sample(verdicts) == chosen, "the same results give the same sheet"
    assert [(v.case, v.passed) for v in chosen[:3]] == [("a", True)] * 3


# ============================================================================ the observers
@observes("calibrate", "calibrate")
def _(lab, mode):
    hand, folder = calibrated(lab, "--json")
    agreeing = write(
        folder / "agreeing.jsonl",
        "".join(
            json.dumps({"run": run, "grader": "judge", "verdict": "pass" if passed else "fail"})
            + "\n"
            for run, passed in judge_verdicts(judged_results(lab)).items()
        ),
    )
    full = lab.run("calibrate", agreeing, judged_results(lab), "--json")
    assert full.code == 0 and hand.code == 1
    assert full.document()["calibration"]["graders"][0]["kappa"] == 1.0
    assert hand.document()["calibration"]["graders"][0]["kappa"] < C.DEFAULT_MIN_KAPPA


@observes("judged_results", "calibrate")
def _(lab, mode):
    _, folder = calibrated(lab)
    without = lab.run("calibrate", folder / "labels.csv")
    assert without.code == 2 and without.stderr.count("\n") == 1
    assert "needs the results file" in without.stderr
    with_it = lab.run("--calibrate", folder / "labels.csv", "--judged-results", judged_results(lab))
    assert with_it.code == 1 and "Judge calibration" in with_it.stdout


@observes("min_kappa", "calibrate")
def _(lab, mode):
    default, folder = calibrated(lab, "--report", "default.md")
    lower, lower_folder = calibrated(lab, "--min-kappa", "0.5", "--report", "lower.md")
    assert default.code == 1 and lower.code == 0
    assert "BELOW 0.6" in (folder / "default.md").read_text()
    assert "BELOW" not in (lower_folder / "lower.md").read_text()
    kept = json.loads((lower_folder / C.CALIBRATION_FILE).read_text())["graders"][0]
    assert (kept["min_kappa"], kept["below_floor"]) == (0.5, False)


@observes("output", "calibrate")
def _(lab, mode):
    _, folder = calibrated(lab, "-o", "calibration.json")
    document = json.loads((folder / "calibration.json").read_text())
    assert document["metadata"]["evaluation"] == "calibrate"
    assert document["calibration"]["graders"][0]["n"] == JUDGED_RUNS
    _, bare = calibrated(lab)
    assert sorted(p.name for p in bare.iterdir()) == sorted([C.CALIBRATION_FILE, "labels.csv"])


@observes("report", "calibrate")
def _(lab, mode):
    _, folder = calibrated(lab, "--report", "calibration.md")
    report = (folder / "calibration.md").read_text()
    assert (
        "## Judge calibration" in report
        and "| judge | 10 | 80% | 0.58 (0.07 to 1.00) | 5 | 1 | 1 | 3 | BELOW 0.6 |" in report
    )
    assert "Fleiss, Cohen and Everitt 1969" in report


@observes("html", "calibrate")
def _(lab, mode):
    _, folder = calibrated(lab, "--html", "calibration.html")
    block = _section(page_data(folder / "calibration.html"), "calibration")
    assert block["title"] == "Judge calibration"
    assert block["tables"][0]["rows"][0][:3] == ["judge", "10", "80%"]


@observes("json_out", "calibrate")
def _(lab, mode):
    quiet, _ = calibrated(lab)
    loud, _ = calibrated(lab, "--json")
    assert not quiet.stdout.lstrip().startswith("{")
    assert loud.document()["calibration"]["overall"]["n"] == JUDGED_RUNS


@observes("label_sheet", "render")
def _(lab, mode):
    sheet = lab.fresh("label-sheet.html")
    plain = lab.run("render", judged_results(lab), "-o", lab.fresh("again.json"))
    with_sheet = lab.run("render", judged_results(lab), "--label-sheet", sheet)
    assert plain.code == with_sheet.code == 0 and sheet.exists()
    items = _sheet_data(sheet.read_text())["items"]
    # stratified by case, grader and judge verdict (here: one run each, all of them)
    assert sorted(i["case"] for i in items) == [f"judged-{i:02d}" for i in range(1, 11)]
    assert sorted(i["judge"] for i in items) == ["fail"] * 4 + ["pass"] * 6
    assert all(i["criterion"] == "" and i["grader"] == "judge" for i in items)
    # what the sheet downloads (JSON lines of run, grader, verdict) is what calibrate reads
    download = write(
        sheet.with_name("labels.jsonl"),
        "".join(
            json.dumps({"run": i["run"], "grader": i["grader"], "verdict": i["judge"]}) + "\n"
            for i in items
        ),
    )
    read = lab.run("calibrate", download, judged_results(lab), "--json")
    assert read.code == 0, read.output
    assert read.document()["calibration"]["graders"][0]["n"] == JUDGED_RUNS
    assert read.document()["calibration"]["unlabelled"] == 0


@pytest.mark.parametrize("mode, option", observed_in(__name__))
def test_an_accepted_option_has_an_effect(lab: Lab, mode: str, option: str):
    OBSERVERS[option][mode](lab, mode)
