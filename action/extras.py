"""The action's install step: which extras of the evaluator this run needs, printed for
`pip install -e "PATH[EXTRAS]"` (nothing: none). Run before the evaluator is installed, on the
standard library alone.

    python action/extras.py EXTRAS ARGS PROJECT

EXTRAS is the `extras` input: `auto` installs `benchmarks` when the arguments, or the project
file that runs (PROJECT, a `--config` in ARGS, or with neither ARGS nor PROJECT an evaluator.yaml
here), name a benchmark whose packages the extra holds: BFCL (`import bfcl`, the bfcl.csv and
bfcl_server.py it writes), τ²-bench (`import tau2`, its tau2_DOMAIN files and servers) or
AgentDojo (redteam's `--vectors agentdojo`); `none` installs none; anything else names extras of
pyproject.toml (`benchmarks`, or several: `benchmarks,test`). An unknown name is an `::error` and
exit 2 before anything is installed. ARGS that do not split are left to the evaluate step, which
says why."""

from __future__ import annotations

import re
import shlex
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

# what the benchmarks extra is for, as the arguments or a project file name it
BENCHMARK = re.compile(r"\b(bfcl|tau2|agentdojo)", re.IGNORECASE)


def workflow_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub documents: no input ends the line."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def project_file(words: list[str], project: str) -> str:
    """The project file the evaluate step runs, as it picks it; "" when it runs none."""
    if project:
        return project
    for index, word in enumerate(words):
        if word == "--config" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--config="):
            return word.split("=", 1)[1]
    return "evaluator.yaml" if not words else ""


def needs_benchmarks(args: str, project: str) -> bool:
    try:
        words = shlex.split(args)
    except ValueError:
        return False
    if BENCHMARK.search(" ".join(words)):
        return True
    path = project_file(words, project)
    try:
        text = Path(path).read_text(encoding="utf-8") if path else ""
    except (OSError, UnicodeDecodeError):
        return False  # the evaluate step says what is wrong with it
    return bool(BENCHMARK.search(text))


def main(extras: str, args: str, project: str) -> int:
    project_table = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    known = sorted(project_table.get("optional-dependencies", {}))
    asked = extras.strip()
    if asked == "auto":
        print("benchmarks" if needs_benchmarks(args, project) else "")
        return 0
    if asked in ("none", ""):
        print("")
        return 0
    names = [name for name in re.split(r"[\s,]+", asked) if name]
    unknown = [name for name in names if name not in known]
    if unknown:
        message = (
            f"extras is auto, none or extras of claude-tool-evaluator ({', '.join(known)}), "
            f"not {', '.join(unknown)}"
        )
        print(f"::error title=extras::{workflow_data(message)}", file=sys.stderr)
        return 2
    print(",".join(dict.fromkeys(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
