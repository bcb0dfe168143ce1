"""GitHub Actions: annotations, the step summary, the step's outputs and the pull-request comment.

May import: the rooms above the writers, the writers above it."""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import test_constants as C

from ..errors import OutputError
from ..files import write_text_atomic
from ..finished_run import MODE_TITLES, case_label, gates, is_matrix, models_text
from ..options import WRITERS
from ..redaction import Redactor
from ..scoring.statistics import wilson_interval
from ..sinks import markdown_cell, on_github_actions, one_line, workflow_command, workspace_path
from ..stopping import FORGOTTEN_AT_START
from .comparison import (
    VERDICT_ICONS,
    change_counts,
    confidence_label,
    holm_text,
    pass_line,
    render_comparison,
)
from .markdown import percent, render_markdown

__all__ = [
    "append_step_summary",
    "github_pull_request",
    "output_entry",
    "workflow_run_url",
    "GITHUB_SINKS",
    "comment_failures",
    "write_comparison_comment",
    "write_pr_comment",
]

if TYPE_CHECKING:
    from ..finished_run import Results
    from ..results_schema.document import CaseResult
    from ..settings import Outputs
    from .comparison import CaseChange, Comparison


_HEX_SHA = re.compile(r"[0-9a-f]{7,64}")


@dataclass(frozen=True)
class _PullRequest:
    number: int
    head_sha: str = ""  # the commit evaluated ("" when the event does not say)


class _GithubStep:
    """What this invocation has told its step so far: a project file's suites run one after
    another in one process, and add up to one step's annotations (GitHub shows the first
    C.GITHUB_ANNOTATIONS), outputs (a name's last value wins, so each is written again with the
    totals) and pull-request comment (one body, a section a suite)."""

    annotations = 0
    passed: list[bool] = []
    counts: dict[str, float] = {}
    files: dict[str, list[str]] = {}  # writer name -> the paths it wrote
    comments: dict[str, list[str]] = {}  # --pr-comment path -> the sections written to it
    pull_requests: dict[str, _PullRequest | None] = {}  # $GITHUB_EVENT_PATH -> what it says

    @classmethod
    def forget(cls) -> None:
        cls.annotations, cls.passed, cls.counts, cls.files, cls.comments = 0, [], {}, {}, {}
        cls.pull_requests = {}


# nor what an earlier one told its GitHub Actions step
FORGOTTEN_AT_START.append(_GithubStep.forget)


def _read_pull_request(path: str) -> _PullRequest | None:
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    pull = event.get("pull_request") if isinstance(event, dict) else None
    if not isinstance(pull, dict):
        return None
    number, head = pull.get("number"), pull.get("head")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        return None
    sha = head.get("sha") if isinstance(head, dict) else None
    return _PullRequest(number, sha if isinstance(sha, str) and _HEX_SHA.fullmatch(sha) else "")


def github_pull_request() -> _PullRequest | None:
    """The pull request the workflow runs for, read from the event GitHub describes in
    $GITHUB_EVENT_PATH (pull_request and pull_request_target events); None for any other event,
    outside GitHub Actions, or when the file says nothing usable. Read once an invocation (a
    comment links every case it lists)."""
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not on_github_actions() or not path:
        return None
    if path not in _GithubStep.pull_requests:
        _GithubStep.pull_requests[path] = _read_pull_request(path)
    return _GithubStep.pull_requests[path]


def workflow_run_url() -> str:
    """The workflow run's page (its artifacts hold the reports), from what GitHub sets; "" when
    any part is missing or not the shape GitHub gives it."""
    server, repository, run = (
        os.environ.get(name, "")
        for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    if (
        re.fullmatch(r"https://[A-Za-z0-9.-]+(:\d+)?", server)
        and re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository)
        and run.isdigit()
    ):
        return f"{server}/{repository}/actions/runs/{run}"
    return ""


def _runs_text(count: int, runs: int) -> str:
    return f" ({count}/{runs} runs)" if runs > 1 else ""


# ------ annotations
def _case_annotation(case: CaseResult, matrix: bool) -> str:
    """A failing case as an `::error` on its line: how many runs passed, and why the others
    failed (the first C.ANNOTATION_REASONS reasons)."""
    verdict = "every run errored" if case.error else f"passed {case.passes}/{case.runs} runs"
    reasons = [
        one_line(reason, C.PR_COMMENT_REASON_CHARS) + _runs_text(n, case.runs)
        for reason, n in list(case.reasons.items())[: C.ANNOTATION_REASONS]
    ]
    return workflow_command(
        "error",
        "\n".join([verdict, *reasons]),
        file=workspace_path(case.source) if case.source else "",
        line=case.line,
        title=case_label(case, matrix),
    )


def _regression_annotation(change: CaseChange, failing: bool = True) -> str:
    """A significant (or suspected) regression as an `::error` on the case's line (a suspected
    one let through by --significant-only: a `::warning`): its runs before and now, the
    difference with its interval and Holm-adjusted p-value, and why it fails now."""
    case = change.new
    assert case is not None
    old, new = change_counts(change)
    statistics = f"; {change.rate.shown()}" if change.rate else ""
    why = one_line(change.reasons, C.PR_COMMENT_REASON_CHARS)
    kind = change.shown_change
    return workflow_command(
        "error" if failing else "warning",
        f"{kind}: passed {old} runs in the baseline, {new} now{statistics}"
        + (f"\n{why}" if why else ""),
        file=workspace_path(case.source) if case.source else "",
        line=case.line,
        title=f"{kind}: {change.name}",
    )


def _first_of(items: Iterable[Any], keep: int) -> tuple[list[Any], int]:
    """The first `keep` items of a stream and how many it held: all a bounded sink (GitHub's
    annotations, a comment's table) needs of a 100,000-case suite's failures."""
    kept: list[Any] = []
    total = 0
    for item in items:
        total += 1
        if len(kept) < keep:
            kept.append(item)
    return kept, total


def _print_annotations(lines: Sequence[str], total: int, what: str, console: Console) -> None:
    """The annotations GitHub shows (C.GITHUB_ANNOTATIONS a step, this invocation's earlier
    suites counted; `lines` are the first of `total`), then one warning for the rest, on the
    console's stream (stdout; stderr under --json), redacted."""
    room = max(0, C.GITHUB_ANNOTATIONS - _GithubStep.annotations)
    shown = list(lines[:room])
    _GithubStep.annotations += len(shown)
    if total > len(shown):
        shown.append(
            workflow_command(
                "warning",
                f"{total - len(shown)} more {what} not annotated (GitHub shows "
                f"{C.GITHUB_ANNOTATIONS} a step): the job summary lists them all",
            )
        )
    redactor = Redactor.for_run()
    for line in shown:
        console.file.write(redactor.text(line) + "\n")
    console.file.flush()


def _annotate_results(results: Results, outputs: Outputs, console: Console) -> None:
    """Every case that fails the suite (a baseline configuration does not), on its line."""
    failing, total = _first_of(
        (c for c in results.cases if not c.passed and gates(c)), C.GITHUB_ANNOTATIONS
    )
    annotations = [_case_annotation(c, results.matrix) for c in failing]
    _print_annotations(annotations, total, "failing case(s)", console)


def _annotate_comparisons(
    comparisons: Sequence[Comparison], outputs: Outputs, console: Console
) -> None:
    annotations = [
        _regression_annotation(ch, kind == "regression" or not c.significant_only)
        for c in comparisons
        for kind in ("regression", "suspected")
        for ch in c.of(kind)
        if ch.new is not None
    ]
    _print_annotations(annotations, len(annotations), "regression(s)", console)


# ------ the pull-request comment (--pr-comment) and the step summary
def _source_link(case: CaseResult) -> str:
    """Where a case is written, as a markdown cell: a link to its line at the commit evaluated
    when GitHub says which, else `path:line`."""
    if not case.source:
        return ""
    path = workspace_path(case.source)
    shown = markdown_cell(f"{path}:{case.line}" if case.line else path, None, code=True)
    pull, run = github_pull_request(), workflow_run_url()
    if not (pull and pull.head_sha and run and not path.startswith("/")):
        return shown
    import urllib.parse

    repository = run.rsplit("/actions/runs/", 1)[0]
    anchor = f"#L{case.line}" if case.line else ""
    return f"[{shown}]({repository}/blob/{pull.head_sha}/{urllib.parse.quote(path)}{anchor})"


def _comment_reasons(case: CaseResult) -> str:
    reasons = [
        markdown_cell(reason, C.PR_COMMENT_REASON_CHARS) + _runs_text(n, case.runs)
        for reason, n in case.reasons.items()
    ]
    return "<br>".join(reasons) or ("every run errored" if case.error else "")


def _more_line(shown: int, total: int) -> list[str]:
    return ["", f"…and {total - shown} more: the report lists them all"] if total > shown else []


def comment_failures(
    cases: Iterable[CaseResult], title: str, matrix: bool | None = None
) -> list[str]:
    """A table of the first C.PR_COMMENT_CASES cases, and how many more there are."""
    shown, total = _first_of(cases, C.PR_COMMENT_CASES)
    if not shown:
        return []
    matrix = is_matrix(shown) if matrix is None else matrix
    lines = [f"#### {title}", "", "| Case | Passed runs | Why | Where |", "|---|---|---|---|"]
    lines += [
        f"| {markdown_cell(case_label(c, matrix), code=True)} | {c.passes}/{c.runs} | "
        f"{_comment_reasons(c)} | {_source_link(c)} |"
        for c in shown
    ]
    return lines + _more_line(len(shown), total) + [""]


def _comment_footer() -> list[str]:
    """Which commit was evaluated, and the run whose artifacts hold the reports."""
    pull, run = github_pull_request(), workflow_run_url()
    parts = [f"commit {pull.head_sha}"] if pull and pull.head_sha else []
    if run:
        parts.append(f"[workflow run]({run}): its artifacts hold the HTML report and the results")
    return ["", "<sub>" + " · ".join(parts) + "</sub>"] if parts else []


def _results_comment(results: Results) -> list[str]:
    """A run as a pull-request comment: the verdict, pass rate, cost and model, what the sections
    give a comment (Section.comment: a plugin's with/without table), then every case that fails
    the suite with why and where it is written."""
    s, meta = results.summary, results.metadata
    low, high = wilson_interval(s.passed, s.cases)
    failing = (c for c in results.cases if not c.passed and gates(c))
    files = {workspace_path(f) for f in {c.source for c in results.cases if c.source}}
    suite = f" of {markdown_cell(files.pop(), code=True)}" if len(files) == 1 else ""
    rate = (
        f"Pass rate {percent(s.pass_rate)} (95% {percent(low)}–{percent(high)}) · {s.runs} runs · "
        if s.runs
        else ""
    )
    sections = [
        line
        for place in ("first", "before_cases", "after_cases")
        for section, value in results.shown(place)
        if section.comment is not None
        for line in section.comment(value)
    ]
    return [
        f"### {'✅' if results.passed else '❌'} {MODE_TITLES.get(meta.evaluation, 'Evaluation')}"
        f"{suite}: {markdown_cell(results.headline_count, None)}",
        "",
        f"{rate}cost ${s.cost_usd:.4f} · {markdown_cell(models_text(meta), None, code=True)}",
        "",
        *sections,
        *comment_failures(failing, "Failing cases", results.matrix),
    ]


def _change_row(change: CaseChange) -> str:
    old, new = change_counts(change)
    rate = change.rate
    difference = interval = level = p = ""
    if rate is not None:
        low, high = rate.interval
        difference = f"{rate.difference * 100:+.1f} pts"
        interval = f"{low * 100:+.1f}…{high * 100:+.1f}"
        level = confidence_label(rate.tested_at)
        p = f"{rate.p_value if rate.adjusted_p is None else rate.adjusted_p:.3g}"
    return (
        f"| {markdown_cell(change.name, code=True)} | {old} | {new} | {difference} | {interval} | "
        f"{level} | {p} | {markdown_cell(change.note, C.PR_COMMENT_REASON_CHARS)} |"
    )


_COMMENT_CHANGES = (
    ("regression", "Regressions"),
    ("suspected", "Suspected regressions (every run passed before, every run fails now)"),
    ("removed", "Removed (a case that is gone never counts as a pass)"),
    ("fixed", "Fixes"),
    ("noise", "Within noise (not significant)"),
    ("added", "Added"),
)


def _comparison_comment(c: Comparison) -> list[str]:
    """A comparison with the baseline as a pull-request comment: regressions first, each with its
    difference, interval and Holm-adjusted p-value (the interval at the level Holm tests it at);
    then the suspected regressions (every run passed before, every run fails now), what is gone,
    the fixes, the changes within noise (with the runs a side that would decide them), the new
    cases, and the cases that fail now as they did before."""
    holm = holm_text(c.family)
    suspicion = c.suspicion()
    lines = [
        f"### {c.icon} Against the baseline: {c.counts()}",
        "",
        f"{markdown_cell(c.old_path, None, code=True)} → {markdown_cell(c.new_path, None, code=True)}: "
        f"a change counts when {c.method()}. Passed {pass_line(c.old)} → "
        f"{pass_line(c.new)} · cost ${c.old.summary.cost_usd:.4f} → ${c.new.summary.cost_usd:.4f}",
        "",
        *(
            [f"**{VERDICT_ICONS['warning']} {markdown_cell(suspicion, None)}**", ""]
            if suspicion
            else []
        ),
    ]
    header = (
        "| Case | Baseline | Now | Difference | Interval | Confidence | "
        f"p{f' ({holm})' if holm else ''} | Note |"
    )
    for kind, title in _COMMENT_CHANGES:
        changes = c.of(kind)
        if changes:
            lines += [f"#### {title}", "", header, "|---|---|---|---|---|---|---|---|"]
            lines += [_change_row(ch) for ch in changes[: C.PR_COMMENT_CASES]]
            lines += _more_line(min(len(changes), C.PR_COMMENT_CASES), len(changes)) + [""]
    still = [
        ch.new
        for ch in c.changes
        if ch.change == "unchanged" and ch.new is not None and not ch.new.passed and gates(ch.new)
    ]
    return lines + comment_failures(still, "Failing, as in the baseline")


def _comment_text(lines: list[str], path: str) -> str:
    """The comment's markdown, redacted: the sections this invocation wrote to `path` before (a
    project's earlier suites), these, then the footer."""
    sections = _GithubStep.comments.setdefault(os.path.abspath(path), [])
    sections.append("\n".join(lines).strip())
    body = "\n\n".join(sections) + "\n" + "\n".join(_comment_footer())
    return Redactor.for_run().text(body.strip() + "\n")


def write_pr_comment(path: str, results: Results) -> None:
    write_text_atomic(path, _comment_text(_results_comment(results), path))


def write_comparison_comment(path: str, comparisons: Sequence[Comparison]) -> None:
    sections = [line for c in comparisons for line in _comparison_comment(c)]
    write_text_atomic(path, _comment_text(sections, path))


def append_step_summary(markdown: str) -> None:
    """When GITHUB_STEP_SUMMARY names a file (GitHub Actions sets it), the markdown summary is
    appended to it: the job's summary page shows the report. Every mode that writes results."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(Redactor.for_run().text(markdown.rstrip("\n")) + "\n\n")
    except OSError as exc:
        raise OutputError(
            f"cannot append to $GITHUB_STEP_SUMMARY ({path}): {exc.strerror or exc}"
        ) from None


def _summarize_results(results: Results, outputs: Outputs, console: Console) -> None:
    """The markdown report on the job's summary page; one over GitHub's size limit gives way
    to the pull-request comment's summary (the report files keep everything)."""
    markdown = render_markdown(results)
    size = len(markdown.encode("utf-8"))
    if size > C.STEP_SUMMARY_BYTES:
        markdown = "\n".join(
            _results_comment(results)
            + [
                f"(The full report is {size:,} bytes, over GitHub's step summary limit: see the "
                "--report or --html file.)"
            ]
        )
    append_step_summary(markdown)


def _summarize_comparisons(
    comparisons: Sequence[Comparison], outputs: Outputs, console: Console
) -> None:
    append_step_summary("\n".join(render_comparison(c) for c in comparisons))


# ------ the step's outputs
def output_entry(name: str, value: str) -> str:
    """One $GITHUB_OUTPUT entry: `name=value`, or a delimited block for a value of many lines
    (GitHub's multiline syntax, with a delimiter the value does not hold)."""
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    delimiter = f"EOF_{secrets.token_hex(16)}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def _set_step_outputs(outputs: Outputs, passed: bool, counts: Mapping[str, float]) -> None:
    """Adds this run (or comparison) to the step's outputs and writes them all again: `passed`
    (every one so far), the counts (summed), the path of every file each writer wrote (one a
    line, under the writer's name, and all of them under `files`), `pull_request`."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return
    _GithubStep.passed.append(passed)
    for name, count in counts.items():
        _GithubStep.counts[name] = _GithubStep.counts.get(name, 0) + count
    for writer in WRITERS:
        written = outputs.writers.get(writer.name)
        paths = _GithubStep.files.setdefault(writer.name, [])
        if writer.takes_path and written and os.path.abspath(written) not in paths:
            paths.append(os.path.abspath(written))
    values = {"passed": str(all(_GithubStep.passed)).lower()}
    values.update({name: str(round(v, 6)) for name, v in _GithubStep.counts.items()})
    values.update({name: "\n".join(paths) for name, paths in _GithubStep.files.items() if paths})
    values["files"] = "\n".join(p for paths in _GithubStep.files.values() for p in paths)
    pull = github_pull_request()
    values["pull_request"] = str(pull.number) if pull else ""
    redactor = Redactor.for_run()
    text = "".join(output_entry(name, redactor.text(value)) for name, value in values.items())
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise OutputError(
            f"cannot append to $GITHUB_OUTPUT ({path}): {exc.strerror or exc}"
        ) from None


def _results_outputs(results: Results, outputs: Outputs, console: Console) -> None:
    s = results.summary
    counts = {"cases": s.cases, "failed": s.failed, "cost_usd": s.cost_usd}
    _set_step_outputs(outputs, results.passed, counts)


def _comparison_outputs(
    comparisons: Sequence[Comparison], outputs: Outputs, console: Console
) -> None:
    counts = {
        name: sum(len(c.of(kind)) for c in comparisons)
        for name, kind in (
            ("regressions", "regression"),
            ("suspected_regressions", "suspected"),
            ("fixes", "fixed"),
            ("within_noise", "noise"),
            ("removed", "removed"),
            ("added", "added"),
        )
    }
    _set_step_outputs(outputs, not any(c.failed for c in comparisons), counts)


@dataclass(frozen=True)
class _GithubSink:
    """One thing GitHub Actions reads from a step: whether this step has it (what GitHub sets
    says), what a run's results give it, and what a comparison's give it."""

    name: str
    active: Callable[[], bool]
    results: Callable[[Results, Outputs, Console], None]
    comparisons: Callable[[Sequence[Comparison], Outputs, Console], None]


def _names_a_file(variable: str) -> Callable[[], bool]:
    return lambda: bool(os.environ.get(variable))


GITHUB_SINKS = [
    _GithubSink("annotations", on_github_actions, _annotate_results, _annotate_comparisons),
    _GithubSink(
        "step summary",
        _names_a_file("GITHUB_STEP_SUMMARY"),
        _summarize_results,
        _summarize_comparisons,
    ),
    _GithubSink("outputs", _names_a_file("GITHUB_OUTPUT"), _results_outputs, _comparison_outputs),
]
