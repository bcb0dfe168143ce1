"""Untrusted regular expressions matched in linear time (RE2), or in a worker process with a time
limit when RE2 cannot take them.

May import: errors, stopping, sinks, files, run_types, redaction."""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import test_constants as C

from . import PROGRAMS
from .errors import EvalError
from .stopping import STOPPING

__all__ = [
    "BadPattern",
    "PATTERN_WORKER",
    "PATTERN_WORKERS",
    "PatternSkipped",
    "PatternTooSlow",
    "pattern_problem",
    "re2_compiled",
    "untrusted_count",
    "untrusted_search",
]


# Regular expressions we did not write (a server's schema `pattern`, a suite's `regex` answer or
# /forbidden/ pattern) meet text we did not write either (Claude's arguments and answers). Python's
# `re` backtracks: `^([a-z ]+)+$` on 41 characters runs for hours, in C code that holds the GIL, so
# no other thread, no signal handler and no other run gets a turn. These patterns are matched by
# RE2 (google-re2), in time linear in the text, outside the GIL. The few constructs RE2 lacks
# (backreferences, lookaround, atomic groups, possessive quantifiers, \Z) go to Python's `re` in a
# worker process, killed when one text takes longer than C.PATTERN_TIME_LIMIT_MS: PatternTooSlow,
# which the checks report as skipped. RE2's syntax is Go's: \d, \w, \s and \b are ASCII.
class PatternSkipped(EvalError):
    """A pattern check that could not be made; the check reports it ("... check skipped: ...")."""


class PatternTooSlow(PatternSkipped):
    def __init__(self, limit_ms: int) -> None:
        super().__init__(f"pattern took longer than {limit_ms} ms")


class BadPattern(EvalError):
    """A pattern neither RE2 nor Python's `re` compiles."""


_SURROGATES = re.compile("[\ud800-\udfff]")


@functools.lru_cache(maxsize=1024)
def re2_compiled(
    pattern: str, ignore_case: bool, multiline: bool, dotall: bool = False
) -> Any | None:
    """`pattern` compiled by RE2, or None when RE2 cannot take it (or is not installed)."""
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.log_errors = False  # a pattern it cannot take is ours to handle, not a line on stderr
    options.case_sensitive = not ignore_case
    try:
        inline = ("m" if multiline else "") + ("s" if dotall else "")
        return re2.compile((f"(?{inline})" if inline else "") + pattern, options)
    except (re2.error, UnicodeError):
        return None


# Python's `re`, in a process of its own (programs/pattern_worker.py): it reads [pattern, flags,
# text] as a JSON line and answers true, false or the compile error. It dies with the evaluator,
# as every child does. Isolated (-I) and without `site` (-S): it starts in a few milliseconds.
PATTERN_WORKER = PROGRAMS / "pattern_worker.py"


class _PatternWorkers:
    """Worker processes running PATTERN_WORKER, one search at a time each. A worker that overruns
    the time limit is killed (the next search starts another), and its pattern is not tried again
    in this process on a text as long or longer: a suite of a hundred calls to one tool waits for
    it once, not a hundred times."""

    KEPT_IDLE = 2

    def __init__(self) -> None:
        self.idle: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.too_slow: dict[tuple[str, int], int] = {}  # pattern -> the shortest text it overran

    def search(self, pattern: str, flags: int, text: str, limit_ms: int) -> bool:
        return bool(self.answer([pattern, flags, text], limit_ms))

    def count(self, pattern: str, flags: int, text: str, limit_ms: int) -> int:
        """How many (non-overlapping) matches of `pattern` the text holds."""
        return int(self.answer([pattern, flags, text, "count"], limit_ms))

    def answer(self, asked: list, limit_ms: int) -> Any:
        """The worker's answer to [pattern, flags, text, op?], within `limit_ms`."""
        if STOPPING.is_set():
            raise PatternSkipped("the run was stopped")
        pattern, flags, text = asked[:3]
        if len(text) >= self.too_slow.get((pattern, flags), len(text) + 1):
            raise PatternTooSlow(limit_ms)
        request = (json.dumps(asked) + "\n").encode("ascii")
        worker = self.idle_worker()
        try:
            worker = worker or self.start()
            answer = self.ask(worker, request, limit_ms / 1000)
        except BaseException:
            if worker is not None:
                self.kill(worker)
            raise
        if answer is None:
            self.kill(worker)
            with self.lock:
                shortest = self.too_slow.get((pattern, flags), len(text))
                self.too_slow[pattern, flags] = min(shortest, len(text))
            raise PatternTooSlow(limit_ms)
        with self.lock:
            keep = len(self.idle) < self.KEPT_IDLE
            if keep:
                self.idle.append(worker)
        if not keep:
            self.kill(worker)
        found = json.loads(answer)
        if isinstance(found, str):
            raise BadPattern(found)
        return found

    def idle_worker(self) -> subprocess.Popen | None:
        """A live idle worker, if any. One started from a thread that has ended since is gone:
        the kernel's parent-death signal follows the thread that started it (an executor's
        thread, a grader run with asyncio.to_thread)."""
        while True:
            with self.lock:
                worker = self.idle.pop() if self.idle else None
            if worker is None or worker.poll() is None:
                return worker
            self.kill(worker)

    def start(self) -> subprocess.Popen:
        worker = subprocess.Popen(
            [sys.executable, "-I", "-S", str(PATTERN_WORKER), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            start_new_session=True,  # Ctrl-C at the terminal is the evaluator's to handle
        )
        if self.read_line(worker, C.PATTERN_WORKER_START_SECONDS) != b"ready":
            self.kill(worker)
            raise PatternSkipped("the pattern checker did not start")
        return worker

    def ask(self, worker: subprocess.Popen, request: bytes, seconds: float) -> bytes | None:
        """The worker's answer, or None after `seconds`."""
        assert worker.stdin is not None  # started with pipes
        view = memoryview(request)
        try:
            while view:  # an idle worker reads all of it
                view = view[os.write(worker.stdin.fileno(), view) :]
        except BrokenPipeError:
            raise PatternSkipped("the pattern checker stopped") from None
        answer = self.read_line(worker, seconds)
        if answer == b"":
            raise PatternSkipped("the pattern checker stopped")
        return answer

    @staticmethod
    def read_line(worker: subprocess.Popen, seconds: float) -> bytes | None:
        """The worker's next line (b"" when it died), or None after `seconds`. A run that is
        stopping does not wait (see STOPPING)."""
        assert worker.stdout is not None  # started with pipes
        fd, data = worker.stdout.fileno(), b""
        deadline = time.monotonic() + seconds
        while not data.endswith(b"\n"):
            if STOPPING.is_set():
                raise PatternSkipped("the run was stopped")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if select.select([fd], [], [], min(left, 0.05))[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b""
                data += chunk
        return data.strip()

    @staticmethod
    def kill(worker: subprocess.Popen) -> None:
        with contextlib.suppress(OSError):
            worker.kill()
        worker.wait()
        for pipe in (worker.stdin, worker.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            self.kill(worker)


PATTERN_WORKERS = _PatternWorkers()
_Read = TypeVar("_Read")


atexit.register(PATTERN_WORKERS.close)


def _python_flags(ignore_case: bool, multiline: bool, dotall: bool) -> int:
    flags = (re.IGNORECASE if ignore_case else 0) | (re.MULTILINE if multiline else 0)
    return int(flags | (re.DOTALL if dotall else 0))


def _on_utf8(text: str, read: Callable[[str], _Read]) -> _Read:
    """`read(text)` with RE2, which reads UTF-8: a lone surrogate (no UTF-8) becomes U+FFFD."""
    try:
        return read(text)
    except UnicodeError:
        return read(_SURROGATES.sub("\ufffd", text))


def untrusted_search(
    pattern: str,
    text: str,
    ignore_case: bool = False,
    multiline: bool = False,
    limit_ms: int = C.PATTERN_TIME_LIMIT_MS,
    dotall: bool = False,
) -> bool:
    """Whether `pattern` is found in `text` (re.search), never taking longer than `limit_ms`:
    RE2 when it can take the pattern, else Python's `re` in a worker process (see above).
    PatternSkipped when the check could not be made, BadPattern when it is no pattern at all."""
    compiled = re2_compiled(pattern, ignore_case, multiline, dotall)
    if compiled is not None:
        return _on_utf8(text, lambda utf8: compiled.search(utf8) is not None)
    flags = _python_flags(ignore_case, multiline, dotall)
    return PATTERN_WORKERS.search(pattern, flags, text, limit_ms)


def untrusted_count(
    pattern: str,
    text: str,
    ignore_case: bool = False,
    multiline: bool = False,
    limit_ms: int = C.PATTERN_TIME_LIMIT_MS,
    dotall: bool = False,
) -> int:
    """How many non-overlapping matches of `pattern` `text` holds (re.finditer), bounded as
    untrusted_search is."""
    compiled = re2_compiled(pattern, ignore_case, multiline, dotall)
    if compiled is not None:
        return _on_utf8(text, lambda utf8: sum(1 for _ in compiled.finditer(utf8)))
    flags = _python_flags(ignore_case, multiline, dotall)
    return PATTERN_WORKERS.count(pattern, flags, text, limit_ms)


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is no regular expression (neither RE2 nor Python's `re` compiles it), or
    None. Compiling never backtracks: only matching does."""
    if re2_compiled(pattern, False, False) is not None:
        return None
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        return str(exc) or type(exc).__name__
    return None
