"""Writers: every report format (the results JSON, markdown, JUnit, CSV, HTML, the pull-request
comment, --json on stdout) as one row of WRITERS: its option, the function that writes a run's
results and the one that writes a comparison, each named by the room that holds it and loaded
when it writes. The formats themselves are this package's modules; writers.sections shows each
section of a results document in them.

May import: everything above the writers (the rows name the writers' own rooms, not import them)."""

from __future__ import annotations

import click

from ..option_types import option
from ..options import RUNNING, TASKS, WRITERS, Writer, register_writer, writer_named
from ..rooms import RoomFunction

__all__ = [
    "WRITERS",
    "Writer",
    "register_writer",
    "writer_named",
]

register_writer(
    Writer(
        option(
            RUNNING,
            "-o",
            "--output",
            type=click.Path(),
            help="Write the results JSON here (a journal beside it as runs finish); import and "
            "export: the folder they write into (generate: its drafts' file or folder).",
        ),
        RoomFunction("writers.formats", "write_results_json"),
        compare=RoomFunction("writers.formats", "write_comparison_json"),
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--report",
            type=click.Path(),
            metavar="FILE.md",
            help="Write a markdown report (suite, skill Trigger Analysis, comparison).",
        ),
        RoomFunction("writers.formats", "write_markdown_report"),
        compare=RoomFunction("writers.formats", "write_comparison_markdown"),
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--junit",
            type=click.Path(),
            metavar="FILE.xml",
            help="Write JUnit XML for CI: a testcase per case, test or trigger query.",
        ),
        RoomFunction("writers.formats", "write_junit"),
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--csv-out",
            type=click.Path(),
            metavar="FILE.csv",
            help="Write one CSV row per run.",
        ),
        RoomFunction("writers.formats", "write_results_csv"),
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--html",
            type=click.Path(),
            metavar="FILE.html",
            help="Write one self-contained HTML report (opens offline): overview, charts, every "
            "case's transcripts, review notes.",
        ),
        RoomFunction("writers.html", "write_html_report"),
        compare=RoomFunction("writers.formats", "write_comparison_html"),
    )
)


register_writer(
    Writer(
        option(
            TASKS,
            "--benchmark-json",
            type=click.Path(),
            metavar="FILE.json",
            help="Write the task benchmark in skill-creator's benchmark.json shape (its viewer "
            "reads it).",
        ),
        RoomFunction("writers.formats", "write_skill_creator_benchmark"),
        modes=frozenset({"skills"}),
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--pr-comment",
            type=click.Path(),
            metavar="FILE.md",
            help="Write a pull-request comment: the verdict and the failing cases with where they "
            "are written; for compare, significant regressions first with their statistics.",
        ),
        RoomFunction("writers.github", "write_pr_comment"),
        compare=RoomFunction("writers.github", "write_comparison_comment"),
        shared_by_suites=True,  # one comment: every suite adds its section (GithubStep)
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--json",
            name="json_out",
            is_flag=True,
            help="Print the results JSON to stdout (the summary goes to stderr).",
        ),
        RoomFunction("writers.formats", "print_results_json"),
        compare=RoomFunction("writers.formats", "print_comparison_json"),
    )
)


register_writer(
    Writer(
        option(
            RUNNING,
            "--label-sheet",
            type=click.Path(),
            metavar="FILE.html",
            help="render: write one self-contained HTML page to label a stratified sample of the "
            "results file's judged runs (transcript, answer, criterion, pass/fail); its download "
            "is what calibrate reads.",
        ),
        RoomFunction("writers.calibration", "write_label_sheet"),
        modes=frozenset(),  # no run writes it: render does, from a results file
    )
)
