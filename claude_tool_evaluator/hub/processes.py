"""Child processes die with the evaluator: a parent-death signal, process groups, a subreaper
and a marker that finds descendants; in-process server objects and the decoy tool server.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub.tools."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import prompts
import test_constants as C

from .. import PROGRAMS, __version__
from ..errors import InputError, ServerError
from ..run_types import ServerSpec

__all__ = [
    "DecoyToolServer",
    "RUN_MARKER",
    "die_with_parent",
    "dying_with_parent",
    "end_descendants",
    "fastmcp_hint",
    "kill_process_group",
    "load_server_object",
    "run_marker",
]

# Every process the evaluator starts (stdio MCP servers, `claude` runs) leads a process group of
# its own, which the evaluator kills on its way out (Ctrl-C, SIGTERM, SIGHUP, errors included);
# and it asks the kernel for SIGKILL the moment the evaluator dies, however it dies (`kill -9`
# too): Linux's PR_SET_PDEATHSIG, set in the child between fork and exec. A child whose parent
# is already gone by then stops at once.
_PR_SET_PDEATHSIG = 1


# The `mcp` SDK starts stdio servers itself and takes no preexec hook: a server starts through
# a trampoline (programs/die_with_parent.py), which makes the same request and then execs the
# server (same pid, same process group, the server's own command line in `ps`).
_DIE_WITH_PARENT_EXEC = PROGRAMS / "die_with_parent.py"


@functools.lru_cache(maxsize=1)
def _linux_prctl() -> Callable[..., int] | None:
    """prctl(2) where there is one (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def kill_process_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def die_with_parent() -> Callable[[], None] | None:
    """A preexec hook: the child is SIGKILLed when this process dies."""
    prctl, parent, kill = _linux_prctl(), os.getpid(), int(signal.SIGKILL)
    if prctl is None:
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # this process died before the request took effect
            os._exit(1)

    return hook


def dying_with_parent(
    command: str, args: Sequence[str], env: dict[str, str] | None, cwd: str | Path | None
) -> tuple[str, list[str]]:
    """The command line that starts `command args` so that it dies with this process. Unchanged
    where prctl is missing, or when the command is not found (the SDK then says so itself)."""
    if _linux_prctl() is None:
        return command, list(args)
    if os.sep in command:
        target = Path(cwd or ".") / command
        found = target.is_file() and os.access(target, os.X_OK)
    else:
        found = (
            shutil.which(command, path=(env or {}).get("PATH", os.environ.get("PATH"))) is not None
        )
    if not found:
        return command, list(args)
    return sys.executable, [
        "-I",
        "-S",
        str(_DIE_WITH_PARENT_EXEC),
        str(os.getpid()),
        command,
        *args,
    ]


# Processes that leave their group (`setsid`, a double fork, `nohup ... &` from a Bash call) escape
# the group kill. The evaluator makes itself their subreaper (Linux's PR_SET_CHILD_SUBREAPER: an
# orphan re-parents to it, not to pid 1), and each run gives its processes a marker in their
# environment, so after a run every process it started is found by either and ended.
_PR_SET_CHILD_SUBREAPER = 36


RUN_MARKER = "EVAL_RUN_ID"


@functools.lru_cache(maxsize=1)
def _become_subreaper() -> bool:
    prctl = _linux_prctl()
    return prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def run_marker() -> str:
    """A new run's marker value (its processes get RUN_MARKER=value in their environment)."""
    import uuid

    _become_subreaper()
    return uuid.uuid4().hex


def _process_status(pid: int) -> tuple[int, str, int, int] | None:
    """(parent pid, state, process group, session) of a live process or zombie, from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), fields[0].decode(), int(fields[2]), int(fields[3])
    except (OSError, IndexError, ValueError):
        return None


def _carries_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:
        return False


def end_descendants(leader: int, marker: str) -> list[int]:
    """After the process group of `leader` (a run's `claude` or `verify` command) was killed:
    every process still in its session, or carrying its marker, or re-parented to us from it, is
    killed (SIGKILL) and reaped; asked again until none is left (a killed process's own children
    re-parent to us in turn). Returns their pids."""
    if not os.path.isdir("/proc"):
        return []
    me, mark, ended = os.getpid(), f"{RUN_MARKER}={marker}".encode(), []
    for _ in range(C.END_DESCENDANTS_ROUNDS):
        killed = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in (me, leader):
                continue
            pid, status = int(name), _process_status(int(name))
            if status is None:
                continue
            parent, state, group, session = status
            if not (leader in (group, session) or _carries_marker(pid, mark)):
                continue
            if state != "Z":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed = True
            if parent == me:  # ours to reap, or it stays a zombie
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            if pid not in ended:
                ended.append(pid)
        if not killed:
            break
        time.sleep(0.02)
    return ended


# The import every tutorial of mcp 1.x shows; mcp 2.x (which this project pins) renamed it.
_FASTMCP_IMPORT = "mcp.server.fastmcp"


def fastmcp_hint(failure: str) -> str:
    """A hint for a server that failed on the FastMCP rename, else nothing."""
    if _FASTMCP_IMPORT not in failure:
        return ""
    return (
        " (hint: mcp 2.x renamed FastMCP: `from mcp.server.mcpserver import MCPServer`; "
        "examples/plugins/warehouse-tools/server.py is a minimal server in that style)"
    )


def load_server_object(spec: ServerSpec) -> Any:
    """Imports an in-process MCP server: `path.py[:attr]` or `package.module[:attr]`."""
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

    try:
        if spec.module.endswith(".py") or "/" in spec.module:
            path = Path(spec.module).resolve()
            sys.path.insert(0, str(path.parent))  # the server's own sibling imports must resolve
            module_spec = importlib.util.spec_from_file_location(
                f"_evaluated_server_{path.stem}", path
            )
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"{path} is not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(spec.module)
    except Exception as exc:
        raise ServerError(
            f"server '{spec.name}': importing {spec.module} failed: {exc.__class__.__name__}: "
            f"{exc}{fastmcp_hint(str(exc))}"
        ) from None
    if spec.attr:
        if not hasattr(module, spec.attr):
            raise InputError(f"--server-module {spec.module}: no attribute {spec.attr!r}")
        return getattr(module, spec.attr)
    candidates = [
        value for value in vars(module).values() if isinstance(value, (MCPServer, Server))
    ]
    if not candidates:
        raise InputError(
            f"--server-module {spec.module}: no MCPServer or Server object found",
            hint="name it as path.py:attr",
        )
    return candidates[0]


class DecoyToolServer:
    """lookalike:N decoy tools, served in-process (an MCP lowlevel Server the hub connects to like
    any --server-module): Claude sees them as real tools; a call gets a neutral error and is
    noted here, and nothing else runs."""

    def __init__(self, decoys: Sequence[Any], name: str = "decoys") -> None:
        import mcp.types as types
        from mcp.server.lowlevel import Server

        self.calls: list[str] = []
        self.tools = [
            types.Tool(
                name=d.name,
                description=d.description,
                input_schema=dict(d.input_schema or {"type": "object"}),
                annotations=types.ToolAnnotations(read_only_hint=True),
            )
            for d in decoys
        ]

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=self.tools)

        async def call_tool(ctx: Any, params: Any) -> Any:
            self.calls.append(params.name)
            return types.CallToolResult(
                content=[types.TextContent(text=prompts.DECOY_TOOL_RESULT)], is_error=True
            )

        self.server = Server(
            name, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool
        )

    def spec(self, name: str) -> ServerSpec:
        return ServerSpec(name=name, kind="module", module="(decoy tools)", instance=self.server)
