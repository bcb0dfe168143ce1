"""People's verdicts on graded runs (calibrate LABELS): a CSV (`run,grader,verdict,note`) or JSON
lines (`{"run", "grader", "verdict", "note"}`, what the label sheet downloads), every line
checked; and the calibration file (each judge grader's latest agreement with people) that later
runs read to flag a grader below its floor.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import test_constants as C

from ..errors import InputError, InputProblems
from ..files import check_json_depth, parse_json_text, read_text_file
from ..results_schema.sections import GraderAgreementRecord

__all__ = [
    "Label",
    "flagged_graders",
    "load_labels",
    "read_calibration_file",
]


_LABEL_COLUMNS = ("run", "grader", "verdict", "note")  # the CSV's header; note may be left out


_VERDICTS = {"pass": True, "passed": True, "fail": False, "failed": False}


_HINT = 'each line needs run, grader and verdict ("pass" or "fail"); note is optional'


@dataclass(frozen=True)
class Label:
    """One person's verdict on one judge grader's verdict of one run, and where it is written."""

    run: str
    grader: str
    passed: bool
    note: str = ""
    line: int = 0


def _verdict(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return _VERDICTS.get(str(value).strip().lower()) if isinstance(value, str) else None


def _label(fields: dict[str, Any], path: Path, line: int) -> Label:
    """A label from one line's fields, or the line's one problem."""
    unknown = sorted(str(k) for k in fields if k not in _LABEL_COLUMNS)
    if unknown:
        raise InputError(
            f"unknown field {unknown[0]!r}",
            path,
            line,
            f"the fields are {', '.join(_LABEL_COLUMNS)}",
        )
    for name in ("run", "grader"):
        value = fields.get(name)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"no {name}", path, line, _HINT)
    passed = _verdict(fields.get("verdict"))
    if passed is None:
        raise InputError(
            f"verdict {fields.get('verdict')!r} is neither pass nor fail", path, line, _HINT
        )
    note = fields.get("note")
    if note is not None and not isinstance(note, str):
        raise InputError("note is not text", path, line, "write the note as a string")
    return Label(fields["run"].strip(), fields["grader"].strip(), passed, note or "", line)


def _json_lines(text: str, path: Path) -> list[tuple[int, dict[str, Any] | InputError]]:
    found: list[tuple[int, dict[str, Any] | InputError]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = parse_json_text(line, path)
            check_json_depth(value, "label", path, number)
        except InputError as exc:
            found.append((number, InputError(exc.message, path, number, "one JSON object a line")))
            continue
        if not isinstance(value, dict):
            found.append((number, InputError("not a JSON object", path, number, _HINT)))
            continue
        found.append((number, value))
    return found


def _csv_rows(text: str, path: Path) -> list[tuple[int, dict[str, Any] | InputError]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        return []
    except csv.Error as exc:
        raise InputError(f"not a CSV file: {exc}", path, 1, _HINT) from None
    missing = [c for c in _LABEL_COLUMNS[:3] if c not in header]
    if missing:
        raise InputError(
            f"the header has no {missing[0]!r} column",
            path,
            1,
            f"the first line names the columns: {','.join(_LABEL_COLUMNS)}",
        )
    found: list[tuple[int, dict[str, Any] | InputError]] = []
    try:
        for row in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) > len(header):
                found.append((number, InputError("more cells than columns", path, number, _HINT)))
                continue
            found.append((number, {h: v for h, v in zip(header, row) if h}))
    except csv.Error as exc:
        raise InputError(f"not a CSV file: {exc}", path, reader.line_num, _HINT) from None
    return found


def load_labels(path: str | Path) -> list[Label]:
    """Every label of a labels file; each bad line is one line of the error (file:line, what is
    wrong, what to do), all reported at once; a run and grader labelled twice is an error too."""
    path = Path(path)
    text = read_text_file(path, "labels file")
    first = text.lstrip()[:1]
    rows = _json_lines(text, path) if first in ("{", "[") else _csv_rows(text, path)
    labels: list[Label] = []
    problems: list[InputError] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in rows:
        if isinstance(row, InputError):
            problems.append(row)
            continue
        try:
            label = _label(row, path, number)
        except InputError as exc:
            problems.append(exc)
            continue
        key = (label.run, label.grader)
        if key in seen:
            problems.append(
                InputError(
                    f"run {label.run!r} grader {label.grader!r} is labelled again (first on line "
                    f"{seen[key]})",
                    path,
                    number,
                    "keep one label per run and grader",
                )
            )
            continue
        seen[key] = number
        labels.append(label)
    if problems:
        raise problems[0] if len(problems) == 1 else InputProblems(problems)
    if not labels:
        raise InputError("no labels", path, None, _HINT)
    return labels


def read_calibration_file(path: str | Path) -> list[GraderAgreementRecord]:
    """The graders a calibration file holds (none when there is no file); a file that is not
    one is an error naming it."""
    from pydantic import ValidationError

    path = Path(path)
    if not path.is_file():
        return []
    value = parse_json_text(read_text_file(path, "calibration file"), path)
    if not isinstance(value, dict) or value.get("format") != C.CALIBRATION_FORMAT:
        raise InputError(
            f"not a calibration file of this version (no format {C.CALIBRATION_FORMAT!r})",
            path,
            1,
            "delete it and run calibrate again",
        )
    try:
        return [GraderAgreementRecord.model_validate(g) for g in value.get("graders") or []]
    except ValidationError as exc:
        raise InputError(
            f"calibration file has a bad grader: {json.dumps(exc.errors()[0]['loc'])}",
            path,
            1,
            "delete it and run calibrate again",
        ) from None


def flagged_graders(
    graders: Iterable[tuple[str, str]], folder: Path | None = None
) -> list[GraderAgreementRecord]:
    """The judge graders of a run, (plugin or "", grader name), that the calibration file in the
    folder (the current one) holds below their floor: the run's reports flag them. Read after
    the runs were paid for, a file that is not a calibration file flags nothing here (calibrate
    itself says what is wrong with it)."""
    try:
        kept = read_calibration_file((folder or Path()) / C.CALIBRATION_FILE)
    except InputError:
        return []
    below = {(g.scope, g.grader): g for g in kept if g.below_floor}
    return [below[key] for key in dict.fromkeys(graders) if key in below]
