"""Stop signals: the first SIGINT, SIGTERM or SIGHUP cancels the run under way and keeps what
finished; a second ends the process. run_async runs a coroutine with that behaviour.

May import: errors."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

import test_constants as C

__all__ = [
    "EXIT_INTERRUPTED",
    "FORGOTTEN_AT_START",
    "STOPPED_AT_END",
    "STOPPING",
    "STOP_SIGNALS",
    "interrupted_exit_code",
    "pending_outputs",
    "run_async",
    "stop_signals_like_ctrl_c",
    "stopped_by",
]

if TYPE_CHECKING:
    import asyncio

# SIGINT (Ctrl-C), SIGTERM and SIGHUP stop an invocation alike. The first cancels the run under way
# (the task run_async runs): the runs in flight end as interrupted, what finished is kept, and every
# writer writes it; outside a run it is a KeyboardInterrupt. Work that waits on untrusted input (a
# pattern check in a worker process) sees STOPPING and gives up at once. A run that has not ended
# C.STOP_GRACE_SECONDS after the signal, or a second signal, ends the process at once: the journal,
# flushed line by line, keeps what finished for --resume. The exit code names the signal (130, 143,
# 129). Handlers run in the main thread only, and only between bytecodes: nothing that can run
# long in C code holding the GIL (Python's `re` on an untrusted pattern) may run in this process.
EXIT_INTERRUPTED = 130  # what a shell reports for a process stopped by Ctrl-C


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


STOPPING = threading.Event()  # set by the first stop signal of the invocation


stopped_by: list[int] = []  # the signal that stopped this invocation, when one did


_running_runs: list[asyncio.Task] = []  # the task run_async runs, while it runs


# What an invocation leaves in this process, undone at its start (what an earlier one learned:
# its secrets, what it told its GitHub Actions step) and at its end (the servers it started, the
# endpoints known to answer). Each room that holds such state adds its undoing here when it
# loads, so the command line undoes what loaded and loads nothing to undo it.
FORGOTTEN_AT_START: list[Callable[[], Any]] = []
STOPPED_AT_END: list[Callable[[], Any]] = []


_stop_deadlines: list[threading.Timer] = []  # set by the first signal, cancelled when the run ends


pending_outputs: set[str] = set()  # temporary files of outputs being written


def interrupted_exit_code() -> int:
    return 128 + stopped_by[0] if stopped_by else EXIT_INTERRUPTED


def _exit_at_once(why: str) -> None:
    """Ends the process now, from any thread: an output half written is removed, the journal keeps
    every run that finished, children die with this process (see dying_with_parent)."""
    for path in list(pending_outputs):
        with contextlib.suppress(OSError):
            os.unlink(path)
    with contextlib.suppress(OSError):
        os.write(2, f"\nstopped at once: {why}\n".encode())
    os._exit(interrupted_exit_code())


def _stop_like_ctrl_c(signum: int, frame: Any) -> None:
    """The handler of every stop signal (see above)."""
    if stopped_by:
        _exit_at_once("a second signal")
    stopped_by.append(signum)
    STOPPING.set()
    run = _running_runs[-1] if _running_runs else None
    if run is None or run.done():
        raise KeyboardInterrupt
    run.cancel()
    run.get_loop().call_soon_threadsafe(lambda: None)  # wakes a select() with a long timeout
    deadline = threading.Timer(
        C.STOP_GRACE_SECONDS,
        _exit_at_once,
        [f"the run did not end within {C.STOP_GRACE_SECONDS:g} s of the signal"],
    )
    deadline.daemon = True
    _stop_deadlines.append(deadline)
    deadline.start()


@contextlib.contextmanager
def stop_signals_like_ctrl_c() -> Iterator[None]:
    """For one invocation, in the main thread (the only one a handler can be set from); a signal
    the caller set to be ignored (nohup, Ctrl-C of a background job) stays ignored."""
    stopped_by.clear()
    STOPPING.clear()
    installed = {}
    for signum in STOP_SIGNALS:
        default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        with contextlib.suppress(ValueError):  # not the main thread
            if signal.getsignal(signum) is default:
                installed[signum] = signal.signal(signum, _stop_like_ctrl_c)
    try:
        yield
    finally:
        for signum, previous in installed.items():
            signal.signal(signum, previous)
        STOPPING.clear()


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """What asyncio.run does once its coroutine is done: the tasks left are cancelled and awaited,
    async generators closed, and the loop's threads awaited, except when the invocation is
    stopping: then a thread still busy (the SDK importing itself on a loaded machine) is left to
    the process's exit (exit_stopped), which does not wait for it either."""
    import asyncio  # loaded by the first run, not at the start (the help loads none)

    try:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        if not STOPPING.is_set():
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def run_async(main: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run, stopped by the stop signals: the first cancels `main`, which ends here as a
    KeyboardInterrupt (as Ctrl-C under asyncio.run). The deadline the signal set holds until the
    loop has closed."""
    import asyncio

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(main)
    _running_runs.append(task)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if STOPPING.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        _running_runs.remove(task)
        try:
            _close_loop(loop)
        finally:
            while _stop_deadlines:
                _stop_deadlines.pop().cancel()
