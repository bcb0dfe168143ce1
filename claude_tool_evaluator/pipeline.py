"""The durable pipeline around every runner: jobs, the journal, --resume and --retry-errors,
shards, concurrency, Ctrl-C and SIGTERM, -i auto's rounds, the cost cap.

May import: the rooms above it (up to dry_run)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import hashlib
import json
import os
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console

import test_constants as C

from .batches import RunNotStarted
from .cache import is_recording
from .errors import FatalApiError, InputError, OutputError
from .files import (
    batch_ledger_path,
    journal_path,
    line_at,
    lock_path,
    open_output_file,
    output_error,
    results_lines_path,
)
from .results_schema.document import (
    RUN_RESULT,
    PluginRunResult,
    ToolRunResult,
    dump_record,
    earlier_results,
    merged_piece_runs,
    read_results_document,
)
from .scoring.statistics import auto_decided
from .session import check_model_endpoint
from .sinks import escape_markup, json_text, terminal_text
from .stopping import run_async

__all__ = [
    "Job",
    "PipelineOutcome",
    "ResultJournal",
    "Runner",
    "continues_earlier_run",
    "drive_jobs",
    "in_shard",
    "jobs_to_run",
    "made_elsewhere",
    "output_lock",
    "pipeline_jobs",
    "results_line",
    "run_pipeline",
]

if TYPE_CHECKING:
    from .dry_run import CostEstimate
    from .redaction import Redactor
    from .results_schema.document import ResultsDocument, RunResult
    from .settings import Merging, Outputs, RunPlan


@dataclass(frozen=True)
class Job:
    """One run to do: `key` names it in the journal (it includes a hash of everything that makes
    an earlier result reusable), `payload` is what the runner needs."""

    key: tuple
    payload: Any
    # What names the run whatever its definition: which --shard runs it (a stable hash of it).
    # Case (or query) name, iteration and model; the key when not given.
    identity: tuple = ()
    ordinal: int = 0  # its place among this invocation's jobs (the pipeline numbers them)
    # -i auto: the case (with its model) the run is one run of, and which run of it it is
    case: tuple = ()
    iteration: int = 0


class Runner(Protocol):
    """An engine behind the pipeline: tool use (Anthropic API + MCP servers) or `claude -p`.
    The pipeline gives every runner the same journal, resume, Ctrl-C, cost cap, redaction and
    progress; a runner only knows how to do one job and how to write and read its record. Records
    stay as they were (grading reads them); what leaves the process is redacted on its way out.
    `jobs()` is a generator: a suite's jobs are made as they are reached, never held."""

    redactor: Redactor

    def jobs(self) -> Iterable[Job]: ...
    def session(self) -> Any: ...  # async context: servers, model, write guard
    async def run(self, job: Job) -> Any: ...
    def cost(self, record: Any) -> float: ...
    def to_result(self, record: Any) -> RunResult: ...
    def result_key(self, result: RunResult) -> tuple: ...
    def from_result(self, job: Job, result: RunResult, scored: bool = False) -> Any: ...
    def under_way(
        self,
    ) -> list[tuple[tuple, Any]]: ...  # (key, partial record) of runs cut by Ctrl-C
    async def estimate(self, jobs: Sequence[Job]) -> CostEstimate: ...


def results_line(result: RunResult) -> str:
    """A run's journal and spool line: json_text, not pydantic's JSON (a lone surrogate in a
    model's answer is written escaped)."""
    return json_text(dump_record(result), indent=None)


class ResultJournal:
    """One JSON line per finished run, flushed at once: `kill -9` loses nothing that had finished."""

    def __init__(self, path: Path, kept: Iterable[RunResult]) -> None:
        self.path = path
        self._kept = kept  # an earlier run's results it reuses, written when the file is made
        self._handle: Any = None

    def open(self) -> None:
        """The file exists from the first run this invocation records: a run that stops before
        (a server that does not start, a bad key) leaves no journal that refuses the next run,
        and the earlier journal a --resume read stays as it was."""
        if self._handle is None:
            # a fresh journal that still holds what the rerun reuses, written like every output
            lines = (result.model_dump_json(by_alias=True) for result in self._kept)
            self._handle = open_output_file(self.path, lines)

    def append(self, result: RunResult | str) -> None:
        """One run: its record, or its results_line."""
        # A flushed line is in the kernel's hands and survives `kill -9` of this process; an
        # fsync per line would stall every run on the disk.
        self.open()
        line = result if isinstance(result, str) else results_line(result)
        try:
            self._handle.write(line + "\n")
            self._handle.flush()
        except (
            OSError
        ) as exc:  # a full disk: the lines before this one still make the run resumable
            raise OutputError(
                f"{output_error(self.path, exc)}; the runs finished before are in it: make room "
                "and rerun with --resume"
            ) from None

    def close(self, remove: bool) -> None:
        if self._handle is not None and not self._handle.closed:
            with contextlib.suppress(OSError):  # a full disk: what was flushed stays
                os.fsync(self._handle.fileno())
                self._handle.close()
            if not self._handle.closed:
                with contextlib.suppress(OSError):
                    self._handle.close()
        if remove:
            self.path.unlink(missing_ok=True)


class _RunSpool:
    """Every run of this invocation (reused, new, or cut short by Ctrl-C) as its results line in
    a temporary file, found again by its job's place: the scorers and writers read the runs back
    in job order, so none is held in memory while the suite runs (8 bytes a run: where its line
    is). The file goes with the process, however it ends."""

    def __init__(self, jobs: int) -> None:
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.offsets = array("q", [-1]) * jobs
        self.count = 0

    def put(self, ordinal: int, line: str) -> None:
        self.file.seek(0, os.SEEK_END)
        if self.offsets[ordinal] < 0:
            self.count += 1
        self.offsets[ordinal] = self.file.tell()
        self.file.write(line.encode("utf-8", "surrogatepass") + b"\n")

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(job place, line) of every run, in job order."""
        self.file.flush()
        fd = self.file.fileno()
        for ordinal, offset in enumerate(self.offsets):
            if offset >= 0:
                yield ordinal, line_at(fd, offset)


class _RunStream:
    """A pipeline's records in job order, read back from its spool each time it is iterated: a
    list's place for scorers that walk the runs once or twice (len, iteration)."""

    def __init__(self, runner: Runner, jobs: Callable[[], Iterable[Job]], spool: _RunSpool) -> None:
        self.runner, self.jobs, self.spool = runner, jobs, spool

    def __iter__(self) -> Iterator[Any]:
        lines = self.spool.lines()
        found = next(lines, None)
        for ordinal, job in enumerate(self.jobs()):
            if found is None:
                return
            if found[0] == ordinal:
                yield self.runner.from_result(job, RUN_RESULT.validate_json(found[1]), True)
                found = next(lines, None)

    def __len__(self) -> int:
        return self.spool.count

    def results(self) -> Iterator[RunResult]:
        """Every run's results record, as the journal wrote it (verdicts included)."""
        return (RUN_RESULT.validate_json(line) for _, line in self.spool.lines())


@dataclass
class PipelineOutcome:
    """Every run of a suite in job order (reused from an earlier run, new, or cut short by
    Ctrl-C), and how the run ended. `records` is a RunStream (read back from disk) after a run,
    a list when a caller builds it (an optimizer candidate scored before). The journal stays
    until the final file is written."""

    records: Any  # Iterable of the runner's records, in job order, with len()
    keys: list[tuple] = field(default_factory=list)  # a list outcome's job keys
    interrupted: bool = False
    reused: int = 0
    not_started: int = 0
    wall_time_s: float = 0.0
    journal: ResultJournal | None = None
    summary_only: bool = False
    suite_hash: str = ""  # every job of the suite (all shards): what --merge checks pieces against
    under_way: dict[tuple, Job] = field(default_factory=dict)  # started, not finished (Ctrl-C)
    stopped_early: str = ""  # -x: the failing run that stopped it
    runs_taken: dict[tuple, int] = field(default_factory=dict)  # -i auto: case -> runs it took

    def results(self, to_result: Callable[[Any], RunResult]) -> Iterator[RunResult]:
        """Every run's results record in job order: the spooled lines after a run, else each
        record through `to_result`."""
        if isinstance(self.records, _RunStream):
            return self.records.results()
        return (to_result(record) for record in self.records)

    def finish(self) -> None:
        """The final file is written: the journal has served its purpose (unless interrupted)."""
        if not self.journal:
            return
        if not (
            self.interrupted or self.not_started
        ):  # every run is done: no batch is needed again
            output = self.journal.path.with_name(
                self.journal.path.name.removesuffix(".journal.jsonl")
            )
            batch_ledger_path(output).unlink(missing_ok=True)
        if self.summary_only and not self.interrupted:
            self.journal.open()  # the runs' lines, even when every one was kept from an earlier run
            self.journal.close(remove=False)
            output = self.journal.path.with_name(
                self.journal.path.name.removesuffix(".journal.jsonl")
            )
            os.replace(self.journal.path, results_lines_path(output))
            return
        self.journal.close(remove=not self.interrupted)


@contextlib.contextmanager
def output_lock(output: str | Path) -> Iterator[None]:
    """Held while a run writes -o and its journal: a second run into the same file, or a --resume
    of this one, started while it is alive is refused with one line instead of doing (and paying
    for) the same runs twice. flock(2) is released by the kernel however the holder dies; the
    lock file is removed on the way out (a `kill -9` leaves it, unlocked and harmless)."""
    import fcntl

    path, fd = lock_path(output), None
    for _ in range(10):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError:
            break  # no lock where the output cannot be written: the output checks say why
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            raise InputError(
                f"{output} is being written by another run that is still alive"
                + (f" (pid {holder})" if holder.isdigit() else ""),
                hint=f"wait for it to end, or stop it and add --resume; {path} is its lock",
            ) from None
        try:  # the run that held it may have removed the file between our open and our lock
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                break
        except OSError:
            pass
        os.close(fd)
        fd = None
    if fd is not None:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    try:
        yield
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(
                    path
                )  # while still holding it: a waiter then sees a removed file and retries
            os.close(fd)


def continues_earlier_run(plan: RunPlan, output: str | None) -> bool:
    """Whether this invocation picks up the earlier run whose output is -o (`output`); a
    leftover journal is never overwritten."""
    again = plan.resume or plan.retry_errors
    if not output:
        if again:
            raise InputError(
                "--resume and --retry-errors need -o FILE: the output of the run to continue"
            )
        return False
    journal = journal_path(output)
    if not again and journal.exists():
        raise InputError(
            f"{journal} holds the results of an unfinished run",
            hint="add --resume to continue it, or delete that file to start over",
        )
    ledger = batch_ledger_path(output)
    if not again and ledger.exists():
        raise InputError(
            f"{ledger} lists the Message Batches of an unfinished --batch run",
            hint="add --batch --resume to take their answers, or delete that file to start over",
        )
    return again


def _earlier_runs(
    runner: Runner, plan: RunPlan, output: str | None, earlier: Sequence[RunResult] | None = None
) -> dict[tuple, RunResult]:
    """The earlier results by job key: those of -o's final file and journal with --resume /
    --retry-errors, or `earlier` when given (the optimizer keeps its own journal); none otherwise."""
    if earlier is None and (not continues_earlier_run(plan, output) or output is None):
        return {}
    found = earlier if earlier is not None else earlier_results(output or "")
    return {runner.result_key(r): r for r in found}


def _reusable(job: Job, earlier: dict[tuple, RunResult], retry_errors: bool) -> RunResult | None:
    """An earlier result counts when its key (with the hash of its definition) matches, and with
    --retry-errors only when it did not end in an error."""
    result = earlier.get(job.key)
    if result is None or (retry_errors and result.error):
        return None
    return result


def in_shard(job: Job, shard: tuple[int, int] | None) -> bool:
    """--shard K/N: a stable hash of the run's identity (case name, iteration, model), so shards
    balance, are disjoint, together make the suite, and a run always lands in the same shard."""
    if shard is None:
        return True
    index, count = shard
    digest = hashlib.sha256(
        json.dumps(list(job.identity or job.key), default=str).encode()
    ).digest()
    return int.from_bytes(digest[:8], "big") % count == index - 1


def _suite_hash(runner: Runner) -> str:
    """Every run of the whole suite, by key (names, iterations, models and definition hashes):
    sha256 of the JSON list of every job's key, made as the jobs go by."""
    digest = hashlib.sha256(b"[")
    for index, job in enumerate(runner.jobs()):
        digest.update(((", " if index else "") + json.dumps(list(job.key), default=str)).encode())
    digest.update(b"]")
    return digest.hexdigest()[:16]


def made_elsewhere(runner: Runner, job: Job) -> Any:
    """A run the runner gives instead of running it, when it offers `reused(job)` (the plugin
    runner: the arm without the plugin, made earlier under the same key), else None. Such a run
    is spooled and journaled like a fresh one, costs nothing, and no --dry-run prices it."""
    reused = getattr(runner, "reused", None)
    return reused(job) if reused is not None else None


@dataclass
class _JobSurvey:
    """One pass over a suite's jobs before anything runs: the suite's hash (all shards), and how
    many runs are this invocation's (its shard), of them how many an earlier run gave and how
    many the runner gives from elsewhere (made_elsewhere)."""

    suite_hash: str
    jobs: int
    kept: int
    reused: int = 0


def _survey_jobs(runner: Runner, plan: RunPlan, earlier: dict[tuple, RunResult]) -> _JobSurvey:
    digest, jobs, kept, reused = hashlib.sha256(b"["), 0, 0, 0
    for index, job in enumerate(runner.jobs()):
        digest.update(((", " if index else "") + json.dumps(list(job.key), default=str)).encode())
        if in_shard(job, plan.shard):
            jobs += 1
            if earlier and _reusable(job, earlier, plan.retry_errors) is not None:
                kept += 1
            elif made_elsewhere(runner, job) is not None:
                reused += 1
    digest.update(b"]")
    return _JobSurvey(digest.hexdigest()[:16], jobs, kept, reused)


def _replay_pipeline(runner: Runner, merging: Merging) -> PipelineOutcome:
    """--merge: the pieces' runs in the suite's job order, rebuilt as an unsharded run would hold
    them (the scorers and writers then do what they do after a run), each with the verdict its
    piece gave it. A run of the suite in no piece, or a piece's run that is no run of the suite,
    means the suite is not the one the pieces ran: one line."""
    found = {runner.result_key(result): result for result in merging.merged_runs}
    spool = _RunSpool(len(found))
    jobs, missing = 0, 0

    def numbered() -> Iterator[Job]:
        ordinal = 0
        for job in runner.jobs():
            if job.key in found:
                yield replace(job, ordinal=ordinal)
                ordinal += 1

    outcome = PipelineOutcome(_RunStream(runner, numbered, spool), suite_hash=_suite_hash(runner))
    for piece in merging.merged_pieces:
        outcome.not_started += piece.summary.not_started
        outcome.interrupted = outcome.interrupted or piece.metadata.interrupted
        outcome.wall_time_s = max(outcome.wall_time_s, piece.metadata.suite_wall_time_s)
    for job in runner.jobs():
        jobs += 1
        result = found.get(job.key)
        if result is None:
            missing += 1
            continue
        spool.put(spool.count, results_line(result))
    foreign = len(found) - spool.count
    if foreign or (missing and not (outcome.interrupted or outcome.not_started)):
        what = (
            f"{foreign} run(s) of the pieces are no run of it"
            if foreign
            else f"{missing} of its {jobs} run(s) are in no piece"
        )
        raise InputError(
            f"--merge: the suite here is not the one the pieces ran ({what})",
            hint="merge in a checkout of the commit the shards ran, with every shard's file",
        )
    outcome.reused = spool.count
    return outcome


def pipeline_jobs(runner: Runner, shard: tuple[int, int] | None) -> Iterator[Job]:
    """The jobs this invocation is about, numbered: the runner's, less those of other shards."""
    chosen = (job for job in runner.jobs() if in_shard(job, shard))
    return (replace(job, ordinal=ordinal) for ordinal, job in enumerate(chosen))


def jobs_to_run(runner: Runner, plan: RunPlan, output: str | None) -> list[Job]:
    """What a run would still do (--dry-run): this shard's jobs less those an earlier run (-o's,
    with --resume) gave and those the runner gives from elsewhere."""
    earlier = _earlier_runs(runner, plan, output)
    return [
        job
        for job in pipeline_jobs(runner, plan.shard)
        if not _reusable(job, earlier, plan.retry_errors) and made_elsewhere(runner, job) is None
    ]


def _verdict_passed(verdict: Any) -> bool | None:
    """A run's verdict as a mode's scorer gives it (a Verdict, a bool, or None: none)."""
    return verdict if isinstance(verdict, bool) or verdict is None else bool(verdict.passed)


class _AutoRounds:
    """-i auto / --runs auto: every run up to the cap is a job from the start (their keys, the
    journal, --resume and --max-cost are as for -i N), but the pipeline releases them in rounds:
    the first round runs every case's first `least` runs, each later round one more run of every
    case not yet decided (auto_decided). The jobs are read on the first round (inside the
    runner's session); runs kept from an earlier run are told as `finished` and count as done."""

    def __init__(self, jobs: Iterable[Job], least: int, threshold: float) -> None:
        self.jobs, self.least, self.threshold = jobs, least, threshold
        self.by_case: dict[tuple, list[Job]] = {}
        self.tally: dict[tuple, list[int]] = {}
        self.done: set[tuple] = set()
        self.decided: dict[tuple, int] = {}  # case -> the runs it took
        self.read = False

    def kept(self, job: Job, passed: bool | None) -> None:
        """A run an earlier run gave (never among `jobs`): one of its case's, done."""
        self.by_case.setdefault(job.case, []).append(job)
        self.finished(job, passed)

    def finished(self, job: Job, passed: bool | None) -> None:
        self.done.add(job.key)
        tally = self.tally.setdefault(job.case, [0, 0])
        tally[0] += bool(passed)
        tally[1] += 1

    def next_round(self) -> list[Job]:
        if not self.read:
            self.read = True
            for job in self.jobs:
                self.by_case.setdefault(job.case, []).append(job)
            for case_jobs in self.by_case.values():
                case_jobs.sort(key=lambda j: j.iteration)
        released = []
        for case, jobs in self.by_case.items():
            if case in self.decided:
                continue
            passes, runs = self.tally.get(case, [0, 0])
            cap = len(jobs)
            if runs >= self.least and auto_decided(passes, runs, cap, self.threshold):
                self.decided[case] = runs
                continue
            left = [job for job in jobs if job.key not in self.done]
            if not left:
                self.decided[case] = runs
                continue
            released += left[: max(1, self.least - runs)]
        return released


def _runner_concurrency(runner: Runner, concurrency: int | None) -> int:
    return getattr(runner, "concurrency", None) or concurrency or C.DEFAULT_CONCURRENCY


async def drive_jobs(
    runner: Runner,
    jobs: Iterable[Job],
    plan: RunPlan,
    finished_one: Callable[[Job, Any], None],
    outcome: PipelineOutcome,
    count: int | None = None,
    rounds: _AutoRounds | None = None,
    on_start: Callable[[], None] | None = None,
) -> None:
    """`concurrency` workers take the next job as they finish (a fixed pool over a generator: a
    10,000-case suite is neither 10,000 pending tasks nor 10,000 jobs in a list). No new job
    starts once --max-cost is spent, after a fatal API error, or after -x's first failing run.
    `count`: how many jobs there are, when `jobs` cannot say (no more workers than jobs). A
    finished run is scored, redacted and journaled (`finished_one`) in a finisher thread before
    its worker goes on (kill -9 loses no run that finished; -x knows its verdict before the
    worker starts another): that work reads untrusted text (a server's patterns), and on the
    loop it would stall the other runs and the stop signals. A finisher per worker (up to
    C.MAX_FINISHER_THREADS): a check that blocks holds up its own worker only. With -i auto
    (`rounds`) the jobs are released round by round inside the one session. `on_start`: told
    once the session is open (servers connected, the suite checked against their tools), before
    the first run: where a progress bar starts, so a suite refused there shows none."""
    stopping = asyncio.Event()
    spent = [0.0]

    async def worker(pending: Iterator[Job]) -> None:
        for job in pending:
            if stopping.is_set():
                return
            if outcome.stopped_early or (plan.max_cost is not None and spent[0] >= plan.max_cost):
                outcome.not_started += 1
                continue
            outcome.under_way[job.key] = job
            try:
                record = await runner.run(job)
            except FatalApiError:
                stopping.set()
                raise
            except RunNotStarted:  # --batch stopped it before a round that could pass --max-cost
                del outcome.under_way[job.key]
                outcome.not_started += 1
                continue
            del outcome.under_way[job.key]
            spent[0] += runner.cost(record)
            finishing = asyncio.get_running_loop().run_in_executor(
                finisher, finished_one, job, record
            )
            # shielded: a run that finished is finished (journaled) even when Ctrl-C comes
            # while it waits for the finisher (whose failure is then the writers' to report)
            finishing.add_done_callback(lambda done: done.cancelled() or done.exception())
            await asyncio.shield(finishing)

    async def work_through(batch: Iterable[Job]) -> None:
        pending = iter(batch)  # shared by the workers; the event loop is single-threaded
        known = len(batch) if isinstance(batch, Sequence) else count
        workers = [asyncio.ensure_future(worker(pending)) for _ in range(workers_for(known))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise

    def workers_for(known: int | None) -> int:
        most = _runner_concurrency(runner, plan.concurrency)
        return max(1, min(most, known if known is not None else most))

    async with runner.session():
        if on_start:
            on_start()
        started = (
            time.perf_counter()
        )  # the suite's wall time: first run started -> last one finished
        listed = len(jobs) if isinstance(jobs, Sequence) and rounds is None else None
        width = workers_for(count if listed is None else listed)  # -i auto: every round's count
        finisher = concurrent.futures.ThreadPoolExecutor(
            min(width, C.MAX_FINISHER_THREADS), thread_name_prefix="finish-run"
        )
        try:
            batch = jobs if rounds is None else rounds.next_round()
            while batch:
                await work_through(batch)
                if rounds is None or stopping.is_set() or outcome.stopped_early:
                    break
                batch = rounds.next_round()
        finally:
            finisher.shutdown(wait=True)  # a run being finished is journaled before the loop ends
            outcome.wall_time_s += time.perf_counter() - started


def _say_how_it_ended(console: Console, outcome: PipelineOutcome, max_cost: float | None) -> None:
    resumable = "; rerun with --resume to do the rest" if outcome.journal else ""
    if outcome.interrupted:
        console.print(
            f"\n[yellow]interrupted[/yellow]: keeping {len(outcome.records)} run(s) gathered so far"
            f"{resumable}",
            soft_wrap=True,
            highlight=False,
        )
    if outcome.stopped_early:
        console.print(
            f"[yellow]stopped at the first failing run (-x)[/yellow]: "
            f"{escape_markup(outcome.stopped_early)}; {outcome.not_started} run(s) not started"
            + ("; rerun with --resume to do them" if outcome.journal else ""),
            highlight=False,
            soft_wrap=True,
        )
    elif outcome.not_started:
        console.print(
            f"[yellow]stopped at --max-cost ${max_cost or 0:g}[/yellow]: {outcome.not_started} run(s) "
            f"not started" + ("; rerun with --resume to do them" if outcome.journal else ""),
            highlight=False,
            soft_wrap=True,
        )


def _auto_threshold(runner: Runner, threshold: float) -> float:
    """The pass rate -i auto decides against: the runner's own (a plugin's arms: one half; skill
    runs: the trigger threshold, at which a query or test counts as passing), else --threshold."""
    own = getattr(runner, "auto_threshold", None)
    return float(own) if own is not None else threshold


def _failing_case_names(document: ResultsDocument) -> set[str]:
    """The cases of a results file that failed or errored, by name (and label, in a matrix)."""
    return {
        name
        for case in document.cases
        if not case.passed or case.error
        for name in (case.name, f"{case.name} ({case.model})", case.prompt)
    }


def _result_names(result: RunResult) -> set[str]:
    """The names a run's case goes by in a results file's cases."""
    if isinstance(result, ToolRunResult):
        return {result.test_name, f"{result.test_name} ({result.model})"}
    if isinstance(result, PluginRunResult):
        return {f"{result.case} [{result.arm}]", f"{result.case} [{result.arm}] ({result.label})"}
    names = {result.test, result.query}
    if result.configuration:
        names.add(f"{result.test} [{result.configuration}]")
    return names


def _passing_runs_of(path: str) -> list[RunResult]:
    """--rerun-failed: the runs of a results file's passing cases (kept as they are), so only the
    cases that failed or errored there run again, and the document is whole again."""
    document = read_results_document(path)
    runs = merged_piece_runs(path, document)
    failing = _failing_case_names(document)
    if not failing:
        raise InputError(
            "no case failed or errored in this results file: nothing to rerun",
            path,
            1,
        )
    return [r for r in runs if not (_result_names(r) & failing) and not getattr(r, "error", None)]


def run_pipeline(
    runner: Runner,
    plan: RunPlan,
    outputs: Outputs,
    console: Console,
    on_record: Callable[[Any], None] | None = None,
    on_count: Callable[[int], None] | None = None,
    on_start: Callable[[], None] | None = None,
    earlier: Sequence[RunResult] | None = None,
    verdict: Callable[[Any], Any] | None = None,
    merging: Merging | None = None,
    base_url: str | None = None,
) -> PipelineOutcome:
    """Runs what is left to run (all of it, or what --resume / --retry-errors leave, or what
    `earlier` results do not hold, or --rerun-failed's passing cases), journaling each record as
    it finishes; Ctrl-C keeps everything finished so far, and the runs under way. With --shard
    only this shard's runs; with --merge the pieces' runs are replayed, nothing runs. Nothing is
    held per run: each goes to the journal and to the run spool the scorers and writers read
    back (see RunStream); the jobs are made as the workers reach them. `verdict` (a run's
    verdict) lets -x stop at the first failing run and -i auto decide its rounds. `merging`: the
    pieces of --merge; `base_url`: the model's endpoint, checked before the first run."""
    if merging is not None and merging.merge:
        return _replay_pipeline(runner, merging)
    output = outputs.output
    if plan.rerun_failed and earlier is None:
        earlier = _passing_runs_of(plan.rerun_failed)
    kept_results = _earlier_runs(runner, plan, output, earlier)
    survey = _survey_jobs(runner, plan, kept_results)
    if on_count:
        on_count(survey.jobs)
    if plan.rerun_failed:
        console.print(
            f"--rerun-failed: {survey.kept} run(s) of passing cases kept from "
            f"{terminal_text(plan.rerun_failed)}, {survey.jobs - survey.kept} to run",
            highlight=False,
            markup=False,
        )
    elif survey.kept:
        console.print(
            f"resuming: {survey.kept} run(s) kept from the earlier run, "
            f"{survey.jobs - survey.kept} to run"
        )
    if survey.jobs > survey.kept + survey.reused and not is_recording(plan.cache):  # else none
        check_model_endpoint(base_url)  # a dead URL is one line, before any case burns retries
    kept = (
        (
            result
            for job in pipeline_jobs(runner, plan.shard)
            if (result := _reusable(job, kept_results, plan.retry_errors))
        )
        if survey.kept and not plan.rerun_failed  # --rerun-failed: the file is theirs
        else ()
    )
    journal = ResultJournal(journal_path(output), kept) if output else None
    spool = _RunSpool(survey.jobs)
    judged = verdict if verdict is not None and (plan.fail_fast or plan.auto_runs) else None

    def passed(record: Any) -> bool | None:
        return _verdict_passed(judged(record)) if judged is not None else None

    def todo() -> Iterator[Job]:
        """This invocation's jobs as the workers take them (inside the runner's session): a run
        an earlier run gave is spooled again, scored against the tools the servers have now."""
        for job in pipeline_jobs(runner, plan.shard):
            result = _reusable(job, kept_results, plan.retry_errors) if kept_results else None
            if result is not None:
                record = runner.from_result(job, result)
                spool.put(job.ordinal, results_line(runner.to_result(record)))
                if rounds is not None:
                    rounds.kept(job, passed(record))
                continue
            record = made_elsewhere(runner, job) if survey.reused else None
            if record is not None:
                result = runner.to_result(record)
                with keeping:  # journaled as a run that finished (--resume keeps it)
                    if journal:
                        journal.append(results_line(runner.redactor.deep(result)))
                    spool.put(job.ordinal, results_line(result))
                if rounds is not None:
                    rounds.kept(job, passed(record))
                continue
            yield job

    rounds = (
        _AutoRounds(todo(), plan.auto_runs[0], _auto_threshold(runner, plan.threshold))
        if plan.auto_runs and judged is not None
        else None
    )
    keeping = threading.Lock()  # finishers run side by side; the files take a run at a time

    def finished_one(job: Job, record: Any) -> None:
        result = runner.to_result(record)  # scored on the run as it was
        line = results_line(result)
        redacted = results_line(runner.redactor.deep(result)) if journal else ""
        verdict_of_run = passed(record)
        with keeping:  # the spool: a private temporary file; the journal: redacted
            if journal:
                journal.append(redacted)
            spool.put(job.ordinal, line)
            if on_record:
                on_record(record)
            if rounds is not None:
                rounds.finished(job, verdict_of_run)
            if plan.fail_fast and verdict_of_run is False and not outcome.stopped_early:
                outcome.stopped_early = " ".join(str(part) for part in job.identity[:2])

    outcome = PipelineOutcome(
        _RunStream(runner, lambda: pipeline_jobs(runner, plan.shard), spool),
        reused=survey.kept,
        journal=journal,
        summary_only=outputs.summary_only,
        suite_hash=survey.suite_hash,
    )
    # What exists now (the SDKs' modules and types, the suite's fixed data) lives until the end:
    # the cyclic collector leaves it alone, instead of walking half a million objects in a pause
    # of 0.2-0.5 s in the middle of the runs.
    gc.freeze()
    to_run = survey.jobs - survey.kept - survey.reused
    try:
        jobs = todo() if rounds is None else ()  # -i auto: the rounds read them
        run_async(drive_jobs(runner, jobs, plan, finished_one, outcome, to_run, rounds, on_start))
    except KeyboardInterrupt:
        outcome.interrupted = True
    except BaseException:
        if journal:
            journal.close(remove=False)  # whatever stopped the run, --resume can pick up from here
        raise
    if rounds is not None:
        outcome.runs_taken = dict(rounds.decided)
    if outcome.interrupted:
        for key, record in runner.under_way():
            job = outcome.under_way.get(key)
            if job is not None:
                spool.put(job.ordinal, results_line(runner.to_result(record)))
    _say_how_it_ended(console, outcome, plan.max_cost)
    return outcome
