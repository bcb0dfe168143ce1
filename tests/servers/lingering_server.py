"""A stdio MCP server that does not exit when its stdin closes: it lingers a second, then exits
on its own, unless its process group is terminated first. It writes which happened to the file
named by its first argument ("exited on its own" or "terminated"), for --stop-grace's tests.
Run over stdio: `python lingering_server.py MARKER`."""

import os
import signal
import sys
import time

from mcp.server.mcpserver import MCPServer

MARKER = sys.argv[1]
mcp = MCPServer("lingering", log_level="WARNING")


@mcp.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


def ended(how: str) -> None:
    with open(MARKER, "w") as handle:
        handle.write(how)


def terminated(signum: int, frame: object) -> None:
    ended("terminated")
    os._exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, terminated)
    mcp.run()  # returns when stdin closes
    time.sleep(1.0)
    ended("exited on its own")
