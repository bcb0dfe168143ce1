"""An in-process MCP server (`--server-module`) that prints to stdout when imported and in its
tools, synchronous and asynchronous: none of it may reach `--json` stdout."""

from mcp.server.mcpserver import MCPServer

print("printing_server: imported")

mcp = MCPServer("printing", log_level="WARNING")


@mcp.tool()
def shout(text: str) -> str:
    """Prints its input, then returns it (a synchronous tool: runs in a worker thread)."""
    print(f"printing_server: shout {text}")
    return text


@mcp.tool()
async def ashout(text: str) -> str:
    """Prints its input, then returns it (an asynchronous tool)."""
    print(f"printing_server: ashout {text}")
    return text
