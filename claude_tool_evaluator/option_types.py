"""The option values' click types and checks: finite numbers, a count of runs or `auto`
(AutoRuns), --answer-match and --shard, each checked when the command line is parsed. OPTIONS
(options.py) names them in its rows.

May import: the rooms below the options (answers and the foundations)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import click

import test_constants as C

from .answers import answer_match_problem, normalize_answer_match

__all__ = [
    "Option",
    "option",
    "POSITIVE_FLOAT",
    "POSITIVE_INT",
    "AutoRuns",
    "FiniteFloat",
    "RunCount",
    "answer_match_option",
    "shard_option",
]


class FiniteFloat(click.FloatRange):
    """click's FloatRange, but a number: nan (every comparison with it is false, so it passes any
    range: --max-cost nan was no limit at all) and infinities are refused."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        # click types FloatRange's base twice, with two input types
        number = click.types.FloatParamType.convert(self, value, param, ctx)  # type: ignore[arg-type]
        if not abs(number) < float("inf"):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


POSITIVE_INT = click.IntRange(min=1)


POSITIVE_FLOAT = FiniteFloat(min=0, min_open=True)


@dataclass(frozen=True)
class AutoRuns:
    """-i auto / --runs auto[:MIN-MAX]: rounds until each case is decided, between MIN and MAX."""

    least: int = C.AUTO_MIN_RUNS
    most: int = C.AUTO_MAX_RUNS


class RunCount(click.ParamType):
    """-i / --runs: a whole number of runs, or `auto` (`auto:MIN-MAX`): rounds that stop each case
    once its interval clears the threshold (AutoRuns)."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (int, AutoRuns)) and not isinstance(value, bool):
            return value if isinstance(value, AutoRuns) or value >= 1 else self.fail("at least 1")
        text = str(value).strip().lower()
        if text.isdigit() and int(text) >= 1:
            return int(text)
        match = re.fullmatch(r"auto(?::(\d+)-(\d+))?", text)
        if not match:
            self.fail(
                f"{value!r} is not a number of runs (1 or more) nor auto[:MIN-MAX]", param, ctx
            )
        least, most = (
            (int(match.group(1)), int(match.group(2)))
            if match.group(1)
            else (C.AUTO_MIN_RUNS, C.AUTO_MAX_RUNS)
        )
        if not 1 <= least <= most:
            self.fail(f"{value!r}: auto:MIN-MAX needs 1 <= MIN <= MAX", param, ctx)
        return AutoRuns(least, most)


def answer_match_option(
    context: click.Context | None, parameter: click.Parameter | None, value: str | None
) -> str | None:
    """--answer-match, checked when parsed (an expected answer comes later, from each pair)."""
    if value is None:
        return None
    problem = answer_match_problem(value, "0")
    if problem and "expected answer" not in problem:
        raise click.BadParameter(problem.removeprefix("answer_match "))
    return normalize_answer_match(value)


def shard_option(
    context: click.Context | None, parameter: click.Parameter | None, value: str | None
) -> tuple[int, int] | None:
    """--shard K/N: whole numbers, 1 <= K <= N."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise click.BadParameter(f"{value!r} is not K/N with 1 <= K <= N (e.g. 2/4)")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class Option:
    """One option: the Settings field (and project-file key) it fills, its flags, its help group,
    its help, and click's settings for it (type, default, multiple, is_flag, metavar, callback)."""

    name: str
    flags: tuple[str, ...]
    group: str
    help: str
    kwargs: dict[str, Any] = field(default_factory=dict)  # click.Option's other arguments
    writer: bool = False  # a writer's option: its value goes to Settings.outputs
    path: bool = False  # its values are paths (checked against the outputs; made absolute)

    @property
    def flag(self) -> str:
        """How messages name it: its first flag, as the help lists it (-q, --csv-out)."""
        return self.flags[0]

    def click_parameter(self) -> click.Option:
        return click.Option([*self.flags, self.name], help=self.help, **self.kwargs)


def option(
    group: str, *flags: str, help: str, name: str = "", path: bool = False, **click_settings: Any
) -> Option:
    """A row of OPTIONS; its name is its long flag's (`--csv-out` -> csv_out) unless given; a
    click.Path option holds paths."""
    long = next(f for f in flags if f.startswith("--"))
    holds_paths = path or isinstance(click_settings.get("type"), click.Path)
    return Option(
        name or long[2:].replace("-", "_"), flags, group, help, click_settings, path=holds_paths
    )
