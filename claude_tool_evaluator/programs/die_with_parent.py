"""Dying with the evaluator, for a program it starts (package data: run by path, never imported
by the package). Run as `python -I -S die_with_parent.py PARENT_PID COMMAND [ARG...]` it is the
trampoline for a child the evaluator cannot give a preexec hook (the `mcp` SDK starts stdio
servers itself): it makes the request, then execs the command (same pid, same process group,
the command's own line in `ps`). pattern_worker.py imports `die_with_parent` from it.

Linux's PR_SET_PDEATHSIG asks the kernel for SIGKILL the moment the parent dies, however it dies
(`kill -9` too); a child whose parent is already gone by then stops at once. Elsewhere (no
prctl) only that last check is made."""

import os
import sys

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def die_with_parent(parent: int) -> None:
    """This process gets SIGKILL when `parent` dies; it exits at once when it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def exec_command(argv: list[str]) -> None:
    """The command, in this process. Python ignores SIGPIPE and SIGXFSZ; the command must not
    inherit that."""
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"cannot run {argv[0]}: {exc.strerror}\n")
        os._exit(127)


if __name__ == "__main__":
    die_with_parent(int(sys.argv[1]))
    exec_command(sys.argv[2:])
