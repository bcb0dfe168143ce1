"""A test MCP server with the awkward tools real servers have: slow, failing, huge, and one
that shares a name with the example server's tool. Run over stdio: `python misc_server.py`."""

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("misc", log_level="WARNING")


@mcp.tool()
async def slow(seconds: float = 30.0) -> str:
    """Waits the given number of seconds, then answers."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@mcp.tool()
def fail(message: str = "it broke") -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@mcp.tool()
def huge(size: int = 1_000_000) -> str:
    """Returns `size` characters."""
    return "x" * size


@mcp.tool()
def echo(text: str) -> str:
    """Echoes its input."""
    return text


@mcp.tool()
def echo_env(name: str) -> str:
    """Returns the value of one environment variable of the server process."""
    return os.environ.get(name, "<unset>")


@mcp.tool()
def crash(message: str = "segfault (simulated)") -> str:
    """Kills the server process in the middle of the call."""
    print(f"misc server crashing: {message}", file=sys.stderr, flush=True)
    os._exit(1)


@mcp.tool()
def junk_stdout(lines: int = 5) -> str:
    """Writes lines that are not JSON-RPC to stdout (the transport) before answering."""
    for i in range(lines):
        sys.stdout.write(f"this is not json {i}\n")
    sys.stdout.flush()
    return "answered after junk"


@mcp.tool()
def about_profiles() -> str:
    """A tool whose name collides with the example server's."""
    return "misc about_profiles"


if __name__ == "__main__":
    if "--exit-at-start" in sys.argv:
        print("misc server: refusing to start (--exit-at-start)", file=sys.stderr)
        sys.exit(3)
    mcp.run()
