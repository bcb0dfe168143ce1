"""Python's `re` in a process of its own, for the patterns RE2 cannot take (patterns.py starts it
as `python -I -S pattern_worker.py PARENT_PID`; package data, never imported by the package). It
says `ready`, then reads [pattern, flags, text] (or [pattern, flags, text, "count"]) as a JSON
line and answers true or false (or how many matches: a number) or the compile error, one line each; it dies with the evaluator, as every child does."""

import json
import os
import re
import sys

# -I puts no script folder on sys.path: the helper beside this file is found here (appended, so
# nothing of this folder shadows the standard library)
sys.path.append(os.path.dirname(os.path.abspath(__file__)))

from die_with_parent import die_with_parent  # noqa: E402

KEPT_PATTERNS = 256


def answer(compiled: dict, pattern: str, flags: int, text: str, count: bool) -> bool | int | str:
    """Whether the pattern is found in the text (or how many times), or why it does not compile."""
    try:
        if (pattern, flags) not in compiled:
            if len(compiled) > KEPT_PATTERNS:
                compiled.clear()
            compiled[pattern, flags] = re.compile(pattern, flags)
        if count:
            return sum(1 for _ in compiled[pattern, flags].finditer(text))
        return compiled[pattern, flags].search(text) is not None
    except Exception as exc:
        return str(exc) or type(exc).__name__


def serve() -> None:
    compiled: dict = {}
    print("ready", flush=True)
    for line in sys.stdin:
        pattern, flags, text, *op = json.loads(line)
        print(json.dumps(answer(compiled, pattern, flags, text, op == ["count"])), flush=True)


if __name__ == "__main__":
    die_with_parent(int(sys.argv[1]))
    serve()
