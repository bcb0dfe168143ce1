"""The evaluator's own errors: InputError (one line naming file and line, exit 2), ServerError,
FatalApiError, OutputError, UsageProblem; and the notes said only when a run goes ahead.

May import: nothing of the package (the first room)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = [
    "EvalError",
    "FatalApiError",
    "InputError",
    "InputProblems",
    "OutputError",
    "ServerError",
    "UsageProblem",
    "is_api_error",
    "note_if_the_run_goes_ahead",
    "say_kept_notes",
    "notes_of_a_run_that_went_ahead",
]


_NOTES: list[str] = []  # what this invocation would say on stderr once its run has gone ahead


def note_if_the_run_goes_ahead(line: str) -> None:
    """A note (the bundled example server stands in for an unnamed one; an older Node.js than
    Claude Code declares) said once the invocation's run went ahead, never before its one-line
    error: an invocation refused for bad input says that line and nothing else."""
    if line not in _NOTES:
        _NOTES.append(line)


def notes_of_a_run_that_went_ahead(went_ahead: bool) -> list[str]:
    """The notes kept so far, forgotten: to say when `went_ahead`, else none."""
    kept = list(_NOTES)
    _NOTES.clear()
    return kept if went_ahead else []


def say_kept_notes() -> None:
    """The notes kept so far, said now (on stderr): the run has gone ahead (its servers are
    connected), so a suite written for another server then fails with the note above its error."""
    for line in notes_of_a_run_that_went_ahead(True):
        print(line, file=sys.stderr, flush=True)


class EvalError(Exception):
    """Root of the evaluator's own errors."""


_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


class InputError(EvalError):
    """Bad input from the user: reported as one line naming file and line, exit code 2."""

    def __init__(
        self,
        message: str,
        path: str | Path | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message, self.path, self.line, self.hint = message, path, line, hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = (
            f"{self.path}:{self.line}: "
            if self.path and self.line
            else f"{self.path}: "
            if self.path
            else ""
        )
        text = f"{where}{self.message}" + (f" ({self.hint})" if self.hint else "")
        # One line, whatever the input quoted: line breaks and control characters are escaped.
        return _CONTROL_CHARS.sub(
            lambda m: m.group().encode("unicode_escape").decode("ascii"), text
        )


class ServerError(EvalError):
    """An MCP server failed to start or died; names the server and quotes its stderr tail."""


class FatalApiError(EvalError):
    """A model API answer that is wrong for every case (a bad key): stops the whole run."""


class OutputError(EvalError):
    """An output could not be written (a full disk, a folder gone read-only): one line, exit 2;
    the journal, if any, keeps what finished for --resume."""


class InputProblems(InputError):
    """Several problems in one input file, each its own line, all reported at once."""

    def __init__(self, problems: list[InputError]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def is_api_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("anthropic")


class UsageProblem(InputError):
    """An option given to a mode that does not take it."""
