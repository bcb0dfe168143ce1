"""Sums the per-test CPU log (`TEST_CPU_LOG=FILE python -m pytest ...`, tests/conftest.py) by test
file: `python tests/cpu_table.py FILE [FILE ...]` prints, heaviest first, each file's tests, CPU
seconds (the tests' processes and the children they reaped), CPU per test, and the processes its
tests started (claude, evaluator, server, other), then the total and its lower bound in wall time
on two cores."""

from __future__ import annotations

import json
import sys
from collections import defaultdict

KINDS = ("claude", "evaluator", "server", "other")


def main(paths: list[str]) -> None:
    files: dict[str, dict] = defaultdict(
        lambda: {"tests": 0, "cpu": 0.0, **dict.fromkeys(KINDS, 0)}
    )
    for path in paths:
        with open(path, encoding="utf-8") as log:
            for line in log:
                test = json.loads(line)
                row = files[test["test"].split("::")[0]]
                row["tests"] += 1
                row["cpu"] += test["cpu"]
                for kind, count in test["started"].items():
                    row[kind] += count
    print(f"| file | tests | CPU s | CPU s/test | {' | '.join(KINDS)} |")
    print("|---|---:|---:|---:|" + "---:|" * len(KINDS))
    for name, row in sorted(files.items(), key=lambda item: -item[1]["cpu"]):
        counts = " | ".join(str(row[kind]) for kind in KINDS)
        per_test = row["cpu"] / row["tests"]
        print(f"| {name} | {row['tests']} | {row['cpu']:.1f} | {per_test:.2f} | {counts} |")
    total = sum(row["cpu"] for row in files.values())
    tests = sum(row["tests"] for row in files.values())
    print(f"\n{tests} tests, {total:.0f} CPU s: at least {total / 2 / 60:.1f} min on two cores")


if __name__ == "__main__":
    main(sys.argv[1:])
