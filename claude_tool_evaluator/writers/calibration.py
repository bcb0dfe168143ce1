"""The judge against people in the reports: calibrate's agreement per grader (markdown, terminal,
HTML), the flag a later run's reports show on a judge grader calibrated below its floor, and the
label sheet (`render RESULTS --label-sheet FILE`): one self-contained page to label a stratified
sample of judged runs, whose download `calibrate` reads.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

import test_constants as C

from ..files import write_text_atomic
from ..redaction import Redactor
from ..scoring.calibration import JudgedVerdict, judged_verdicts
from ..sinks import cap_text, escape_markup, markdown_cell
from .html import html_block, html_json

__all__ = [
    "calibration_markdown",
    "flags_markdown",
    "grader_name",
    "html_calibration",
    "html_flags",
    "label_sample",
    "print_calibration",
    "print_flags",
    "write_label_sheet",
]

if TYPE_CHECKING:
    from ..finished_run import Results
    from ..results_schema.sections import CalibrationRecord, GraderAgreementRecord


def grader_name(record: GraderAgreementRecord) -> str:
    """`plugin greeter: friendly`, `judge` (the tool-use judge), `(every grader)`."""
    return (f"plugin {record.scope}: " if record.scope else "") + record.grader


def _kappa_text(record: GraderAgreementRecord) -> str:
    if record.kappa is None:
        return "undefined (one verdict only)"
    low, high = record.interval or (record.kappa, record.kappa)
    return f"{record.kappa:.2f} ({low:.2f} to {high:.2f})"


def _flag_text(record: GraderAgreementRecord) -> str:
    return f"BELOW {record.min_kappa:g}" if record.below_floor else "ok"


_HEADERS = [
    "Grader",
    "n",
    "Agreement",
    "Kappa (95% interval)",
    "Both pass",
    "Person pass, judge fail",
    "Person fail, judge pass",
    "Both fail",
    "Flag",
]


def _rows(record: CalibrationRecord) -> list[list[str]]:
    every = [*record.graders, *([record.overall] if record.overall else [])]
    return [
        [
            grader_name(g),
            str(g.n),
            f"{g.agreement:.0%}",
            _kappa_text(g),
            str(g.pass_pass),
            str(g.pass_fail),
            str(g.fail_pass),
            str(g.fail_fail),
            _flag_text(g) if g is not record.overall else "-",
        ]
        for g in every
    ]


def _notes(record: CalibrationRecord) -> list[str]:
    below = [g for g in record.graders if g.below_floor]
    notes = [
        f"{len(record.graders)} judge grader(s) labelled in {record.labels} against "
        f"{record.results}; floor kappa {record.min_kappa:g}: "
        + (f"{len(below)} below it" if below else "none below it"),
        f"Interval: {record.method}",
    ]
    if record.unlabelled:
        notes.append(f"{record.unlabelled} judge verdict(s) in the results file have no label")
    if record.calibration_file:
        notes.append(
            f"Kept in {record.calibration_file}: later runs in this folder flag the graders "
            "below the floor until they are calibrated again"
        )
    return notes


def calibration_markdown(record: CalibrationRecord) -> list[str]:
    lines = ["## Judge calibration", ""]
    lines += [f"- {markdown_cell(n, None)}" for n in _notes(record)] + [""]
    lines += ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
    lines += ["| " + " | ".join(markdown_cell(c, 200) for c in row) + " |" for row in _rows(record)]
    return lines + [""]


def print_calibration(console: Console, record: CalibrationRecord) -> None:
    table = Table(title="Judge calibration")
    for header in _HEADERS:
        table.add_column(header, overflow="fold")
    for row in _rows(record):
        flag = escape_markup(row[-1])
        table.add_row(
            *(escape_markup(c) for c in row[:-1]),
            f"[red]{flag}[/red]" if row[-1].startswith("BELOW") else flag,
        )
    console.print(table)
    for note in _notes(record):
        console.print(escape_markup(note), highlight=False, soft_wrap=True)


def html_calibration(record: CalibrationRecord) -> dict:
    return html_block("Judge calibration", [("", _HEADERS, _rows(record))], _notes(record))


# ---------------------------------------------------------------------------- the flag in later runs
_FLAG_HEADERS = [
    "Judge grader",
    "Cases labelled",
    "Kappa (95% interval)",
    "n",
    "Floor",
    "Calibrated",
]


def _flag_rows(records: Sequence[GraderAgreementRecord]) -> list[list[str]]:
    return [
        [
            grader_name(r),
            ", ".join(r.cases) or "-",
            _kappa_text(r),
            str(r.n),
            f"{r.min_kappa:g}",
            f"{r.calibrated_at or '-'} ({r.labels or '-'})",
        ]
        for r in records
    ]


_FLAG_NOTE = (
    "These judge graders agreed with people's labels below the floor when last calibrated: "
    "their verdicts in this run are not to be trusted until they are calibrated again "
    "(python evaluator.py calibrate LABELS RESULTS)."
)


def flags_markdown(records: list[GraderAgreementRecord]) -> list[str]:
    lines = ["## ⚠ Judge graders below their calibration floor", "", _FLAG_NOTE, ""]
    lines += ["| " + " | ".join(_FLAG_HEADERS) + " |", "|" + "---|" * len(_FLAG_HEADERS)]
    lines += [
        "| " + " | ".join(markdown_cell(c, 200) for c in row) + " |" for row in _flag_rows(records)
    ]
    return lines + [""]


def print_flags(console: Console, records: list[GraderAgreementRecord]) -> None:
    for row in _flag_rows(records):
        console.print(
            f"[red]judge grader below its calibration floor[/red]: {escape_markup(row[0])} "
            f"kappa {escape_markup(row[2])} (floor {row[4]}, n {row[3]})",
            highlight=False,
            soft_wrap=True,
        )


def html_flags(records: list[GraderAgreementRecord]) -> dict:
    return html_block(
        "Judge graders below their calibration floor",
        [("", _FLAG_HEADERS, _flag_rows(records))],
        [_FLAG_NOTE],
    )


# ---------------------------------------------------------------------------- the label sheet
def label_sample(verdicts: Sequence[JudgedVerdict]) -> list[JudgedVerdict]:
    """A stratified sample: up to C.LABEL_SHEET_PER_STRATUM runs of each (case, grader, judge
    verdict), drawn with a fixed seed (the same file gives the same sheet), strata in order."""
    strata: dict[tuple[str, str, bool], list[JudgedVerdict]] = {}
    for verdict in verdicts:
        strata.setdefault((verdict.case, verdict.grader, verdict.passed), []).append(verdict)
    chooser = random.Random(C.LABEL_SHEET_SEED)
    chosen = []
    for key in sorted(strata, key=lambda k: (k[0], k[1], not k[2])):
        members = strata[key]
        take = min(len(members), C.LABEL_SHEET_PER_STRATUM)
        chosen += sorted(chooser.sample(members, take), key=lambda v: v.run)
    return chosen


_SHEET_SCRIPT = Path(__file__).with_name("label_sheet.js").read_text(encoding="utf-8")


_SHEET_PAGE = Path(__file__).with_name("label_sheet.html").read_text(encoding="utf-8")


# The sheet's policy: its own script only (by hash), inline styles, no request anywhere; the
# download is a blob the page makes itself.
_SHEET_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src '{script_hash}'; "
    "base-uri 'none'; form-action 'none'"
)


def _render_label_sheet(verdicts: Sequence[JudgedVerdict], source: str) -> str:
    """The page: every untrusted text redacted, put in as JSON the script reads (html_json: no
    text can end the script element) and shown with textContent only."""
    import base64
    import hashlib

    redactor = Redactor.for_run()
    items = [
        {
            "run": v.run,
            "grader": v.grader,
            "case": v.case,
            "scope": v.scope,
            "judge": "pass" if v.passed else "fail",
            "prompt": v.prompt,
            "answer": v.answer,
            "criterion": v.criterion,
            "explanation": v.explanation,
            "transcript": cap_text(v.transcript, C.LABEL_SHEET_TRANSCRIPT_CHARS),
        }
        for v in verdicts
    ]
    data = redactor.data({"source": source, "items": items})
    digest = hashlib.sha256(_SHEET_SCRIPT.encode("utf-8")).digest()
    page = _SHEET_PAGE.replace(
        "__CSP__",
        _SHEET_CSP.format(script_hash="sha256-" + base64.b64encode(digest).decode("ascii")),
    )
    before, _, after = page.partition("__DATA__")  # the data last: none of it is a placeholder
    return before + html_json(data) + after.replace("__SCRIPT__", _SHEET_SCRIPT)


def write_label_sheet(path: str, results: Results) -> None:
    """--label-sheet FILE (render): the sheet for a stratified sample of the file's judged runs."""
    verdicts = judged_verdicts(results.results(), results.sections.get("plugin"))
    write_text_atomic(path, _render_label_sheet(label_sample(verdicts), results.suite_name))
