"""Nothing untrusted can hang a run, and the first signal always ends it (issue 28).

A stop signal's handler runs in the main thread, between bytecodes: a loop stuck in a call that
does not come back never runs it. The first SIGINT, SIGTERM or SIGHUP cancels the run; a second
signal, or a run that has not ended STOP_GRACE_SECONDS later, exits the process at once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from conftest import ROOT


def finish(process: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# ============================================================================ stopping when the loop is stuck
STUCK_LOOP = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import evaluator as E
    E.C.STOP_GRACE_SECONDS = float(sys.argv[3])

    async def stuck():
        E.create_output_file(sys.argv[2])  # an output half written
        print("stuck", flush=True)
        while True:
            time.sleep(0.1)  # the loop's thread never comes back to the loop

    with E.stop_signals_like_ctrl_c():
        E.run_async(stuck())
    """
)


def stuck_loop(tmp_path: Path, grace: float) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", STUCK_LOOP, str(ROOT), str(tmp_path / "out.json"), str(grace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout.readline() == "stuck\n", process.communicate()
    return process


def test_a_second_signal_exits_at_once(tmp_path):
    process = stuck_loop(tmp_path, grace=600)
    try:
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert process.poll() is None, "the first signal waits for the run to end"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=5)
    finally:
        finish(process, 0)
    assert process.returncode == 130  # the first signal names the exit code
    assert "stopped at once: a second signal" in stderr
    assert list(tmp_path.iterdir()) == [], "the output half written is removed"


def test_a_run_that_does_not_end_after_the_first_signal_is_ended_at_its_deadline(tmp_path):
    process = stuck_loop(tmp_path, grace=1)
    try:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    finally:
        finish(process, 0)
    assert process.returncode == 143
    assert "stopped at once: the run did not end within 1 s of the signal" in stderr
    assert list(tmp_path.iterdir()) == []
