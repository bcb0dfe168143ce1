#!/usr/bin/env python3
"""Run the standard evaluation suites and print one summary.

    python run_tests.py                          # examples/test_queries.csv
    python run_tests.py suites/*.csv             # your own suites (files or globs)
    python run_tests.py suites/*.csv -- -i 3 --server "python my_server.py"

Each suite runs through `evaluator.py --csv`, writing its results to `--results-dir`
(default `results/`). Exit code: 0 when every suite passed, 1 when any case failed, 2 on bad
input (the first such error stops the run: it would fail the same way for every suite).
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SUITES = [str(HERE / "examples" / "test_queries.csv")]


def suite_files(patterns: list[str]) -> list[Path]:
    files: list[Path] = []
    for pattern in patterns or DEFAULT_SUITES:
        matches = sorted(glob.glob(pattern)) or ([pattern] if Path(pattern).exists() else [])
        if not matches:
            print(f"error: no suite matches {pattern!r} (give CSV files or globs)", file=sys.stderr)
            sys.exit(2)  # bad input, as the docstring promises
        files += [Path(m) for m in matches]
    return files


def run_suite(path: Path, results_dir: Path, extra: list[str]) -> tuple[int, dict | None]:
    output = results_dir / f"{path.stem}.json"
    command = [
        sys.executable,
        str(HERE / "evaluator.py"),
        "--csv",
        str(path),
        "-o",
        str(output),
        "--report",
        str(results_dir / f"{path.stem}.md"),
        *extra,
    ]
    code = subprocess.call(command)
    document = json.loads(output.read_text()) if code in (0, 1) and output.exists() else None
    return code, document


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "suites", nargs="*", help="CSV suite files or globs (default: the example suite)"
    )
    parser.add_argument("--results-dir", default="results", help="where results and reports go")
    args = parser.parse_args(argv)
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    rows, worst = [], 0
    for path in suite_files(args.suites):
        code, document = run_suite(path, results_dir, extra)
        if code == 2:
            return 2
        worst = max(worst, code)
        summary = (document or {}).get("summary") or {}
        rows.append((path.name, code, summary))
    print("\nSuite summary")
    for name, code, summary in rows:
        status = "PASS" if code == 0 else "FAIL"
        print(
            f"  {status}  {name}: {summary.get('passed', 0)}/{summary.get('cases', 0)} cases passed, "
            f"cost ${summary.get('cost_usd', 0):.4f}"
        )
    passed = sum(code == 0 for _, code, _ in rows)
    print(f"{passed} passed, {len(rows) - passed} failed")
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
