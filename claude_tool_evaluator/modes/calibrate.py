"""calibrate LABELS RESULTS: people's verdicts on judged runs against the judge's, per grader
(agreement, Cohen's kappa with its interval, the confusion table), kept in the calibration file
so that later runs flag a grader below its floor (loaders.labels.flagged_graders).

May import: the rooms above the modes, the modes above it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

import test_constants as C

from ..errors import InputError, InputProblems
from ..files import write_json_atomic
from ..finished_run import Results, summary_record
from ..loaders.labels import Label, load_labels, read_calibration_file
from ..pipeline import PipelineOutcome
from ..results_schema.document import CaseResult, read_results_document
from ..results_schema.sections import CalibrationRecord, GraderAgreementRecord
from ..scoring.calibration import JudgedVerdict, agreement, judged_verdicts
from ..scoring.statistics import RunTotals, case_counts
from ..writers.calibration import grader_name
from ..writers.formats import write_outputs
from ..writers.terminal import print_summary
from .common import exit_code, run_metadata

__all__ = [
    "calibrate_mode",
]

if TYPE_CHECKING:
    from ..settings import Calibration, Settings


_KAPPA_METHOD = (
    "kappa ± 1.96 × its large-sample standard error (Fleiss, Cohen and Everitt 1969), cut to "
    "-1..1; undefined (and flagged) when people and the judge each gave one verdict only"
)


def _labelled_pairs(
    labels: Sequence[Label], verdicts: Sequence[JudgedVerdict], labels_path: str, results: str
) -> list[tuple[Label, JudgedVerdict]]:
    """Each label with the judge verdict it is about; a label naming none is its line's error."""
    by_key = {v.key: v for v in verdicts}
    pairs, problems = [], []
    for label in labels:
        verdict = by_key.get((label.run, label.grader))
        if verdict is None:
            problems.append(
                InputError(
                    f"run {label.run!r} grader {label.grader!r} has no judge verdict in {results}",
                    labels_path,
                    label.line,
                    "label the runs of this results file (render RESULTS --label-sheet FILE "
                    "lists them)",
                )
            )
            continue
        pairs.append((label, verdict))
    if problems:
        raise problems[0] if len(problems) == 1 else InputProblems(problems)
    return pairs


def _grader_record(
    pairs: Sequence[tuple[Label, JudgedVerdict]],
    scope: str,
    grader: str,
    calibration: Calibration,
    when: str,
) -> GraderAgreementRecord:
    found = agreement((label.passed, verdict.passed) for label, verdict in pairs)
    return GraderAgreementRecord(
        scope=scope,
        grader=grader,
        cases=sorted({verdict.case for _, verdict in pairs}),
        n=found.n,
        pass_pass=found.pass_pass,
        pass_fail=found.pass_fail,
        fail_pass=found.fail_pass,
        fail_fail=found.fail_fail,
        agreement=round(found.observed, 6),
        expected=round(found.expected, 6),
        kappa=None if found.kappa is None else round(found.kappa, 6),
        interval=None
        if found.interval is None
        else (round(found.interval[0], 6), round(found.interval[1], 6)),
        min_kappa=calibration.min_kappa,
        below_floor=found.kappa is None or found.kappa < calibration.min_kappa - 1e-12,
        labels=str(calibration.calibrate or ""),
        calibrated_at=when,
    )


def _calibration_record(
    pairs: Sequence[tuple[Label, JudgedVerdict]], unlabelled: int, calibration: Calibration
) -> CalibrationRecord:
    when = datetime.now(UTC).isoformat(timespec="seconds")
    groups: dict[tuple[str, str], list[tuple[Label, JudgedVerdict]]] = {}
    for label, verdict in pairs:
        groups.setdefault((verdict.scope, verdict.grader), []).append((label, verdict))
    graders = [
        _grader_record(members, *key, calibration, when) for key, members in sorted(groups.items())
    ]
    overall = _grader_record(pairs, "", "(every grader)", calibration, when)
    return CalibrationRecord(
        labels=str(calibration.calibrate),
        results=str(calibration.judged_results),
        min_kappa=calibration.min_kappa,
        method=_KAPPA_METHOD,
        graders=graders,
        overall=overall,
        unlabelled=unlabelled,
        calibration_file=C.CALIBRATION_FILE,
    )


def _keep(graders: Sequence[GraderAgreementRecord]) -> None:
    """The calibration file: each grader's latest calibration, the others' kept as they were."""
    path = Path(C.CALIBRATION_FILE)
    fresh = {(g.scope, g.grader) for g in graders}
    kept = [g for g in read_calibration_file(path) if (g.scope, g.grader) not in fresh]
    write_json_atomic(
        path,
        {
            "format": C.CALIBRATION_FORMAT,
            "graders": [g.model_dump(mode="json") for g in [*kept, *graders]],
        },
    )


def _grader_case(record: GraderAgreementRecord) -> CaseResult:
    """A grader as a case of the reports: it passes when its kappa is at the floor or above."""
    return CaseResult(
        name=grader_name(record),
        kind="case",
        group="calibration",
        passed=not record.below_floor,
        runs=record.n,
        passes=record.pass_pass + record.fail_fail,
        pass_rate=record.agreement,
        interval=None,
        reasons={f"kappa below {record.min_kappa:g}": 1} if record.below_floor else {},
    )


def calibrate_mode(settings: Settings, console: Console) -> int:
    """calibrate LABELS RESULTS: every label checked against the results file's judge verdicts
    (a label naming none is its line's error), then agreement per grader; the calibration is
    kept in C.CALIBRATION_FILE; a grader below --min-kappa fails the run (exit 1). No model is
    called: nothing here costs money."""
    calibration = settings.calibration
    if not calibration.judged_results:
        raise InputError(
            "calibrate needs the results file the labels are about",
            hint="python evaluator.py calibrate LABELS RESULTS.json",
        )
    document = read_results_document(calibration.judged_results)
    labels = load_labels(str(calibration.calibrate))
    verdicts = judged_verdicts(document.results, document.section("plugin"))
    if not verdicts:
        raise InputError(
            "no judge verdicts in it: nothing to calibrate",
            calibration.judged_results,
            hint="calibrate a run whose cases have an llm or baseline grader, or a judge rubric",
        )
    pairs = _labelled_pairs(
        labels, verdicts, str(calibration.calibrate), str(calibration.judged_results)
    )
    record = _calibration_record(pairs, len(verdicts) - len(pairs), calibration)
    _keep(record.graders)
    cases = [_grader_case(g) for g in record.graders]
    outcome = PipelineOutcome([], [])
    summary = summary_record(case_counts(cases), RunTotals(), 1.0, outcome)
    results = Results(
        run_metadata("calibrate", settings, 0, outcome, input_type="labels"),
        all(c.passed for c in cases),
        summary,
        cases,
        lambda: (),
        0,
        {"calibration": record},
        "calibration",
    )
    write_outputs(results, settings.outputs, console)
    below = sum(g.below_floor for g in record.graders)
    print_summary(
        console,
        results,
        f"{below} of {len(record.graders)} judge grader(s) below kappa {calibration.min_kappa:g}"
        if below
        else f"every judge grader at kappa {calibration.min_kappa:g} or above",
        runs_table=False,
    )
    return exit_code(results, outcome)
