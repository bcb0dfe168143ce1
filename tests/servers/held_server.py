"""A stdio MCP server that holds its answer to `initialize` until it is released: until the file
named by its first argument exists, or (with `--after SECONDS`) that long. Meanwhile the client's
initialize request waits unread in the pipe (only when Claude Code started it), so the server is "still connecting" for exactly as
long as a test decides, never for as long as the machine happens to take. Its one tool:
`held_ping`."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def started_by_claude_code() -> bool:
    """Only Claude Code's start is held: the evaluator lists the server's tools first, through
    a start of its own. Claude Code's program (`claude`, `claude.exe`) is among the nearest
    ancestors (it may start the server through a shell)."""
    pid = os.getppid()
    for _ in range(3):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            status = Path(f"/proc/{pid}/status").read_text()
        except (OSError, UnicodeDecodeError):
            return False
        if Path(argv0).name in ("claude", "claude.exe"):
            return True
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return False


release = Path(sys.argv[1])
after = float(sys.argv[sys.argv.index("--after") + 1]) if "--after" in sys.argv else None
start = time.monotonic()
while (
    started_by_claude_code()
    and not release.exists()
    and (after is None or time.monotonic() - start < after)
):
    time.sleep(0.05)

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("held", log_level="WARNING")


@server.tool()
def held_ping() -> str:
    """Answers pong (a server that was held at start-up)."""
    return "pong"


server.run()
