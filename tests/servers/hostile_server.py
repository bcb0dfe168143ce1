"""A test MCP server whose words are hostile (tests/hostile/): its tool output, and what it
writes to stderr when it starts and when its crash tool kills it, hold Rich markup, ANSI and OSC
escape sequences, control characters, U+FFFE, <script>, pipes, backticks and line breaks.
Run over stdio: `python hostile_server.py` (`--exit-at-start`: write the stderr, exit 3)."""

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

CORPUS = Path(__file__).resolve().parent.parent / "hostile"
STDERR = (CORPUS / "server_stderr.txt").read_text(encoding="utf-8")

mcp = MCPServer("hostile", log_level="WARNING")


@mcp.tool()
def hostile_output() -> str:
    """Answers with the hostile corpus's tool output."""
    return (CORPUS / "tool_output.txt").read_text(encoding="utf-8")


@mcp.tool()
def hostile_crash() -> str:
    """Writes the hostile stderr, then kills the server in the middle of the call."""
    sys.stderr.write(STDERR)
    sys.stderr.flush()
    os._exit(1)


if __name__ == "__main__":
    sys.stderr.write(STDERR + "\n")
    sys.stderr.flush()
    if "--exit-at-start" in sys.argv:
        sys.exit(3)
    mcp.run()
