"""A minimal MCP server in the style of the `mcp` SDK this project pins (2.x): `MCPServer` from
`mcp.server.mcpserver` (1.x called it FastMCP), one read-only tool, stdio by default. Copy it to
start your own server; the warehouse-tools plugin ships it (its .mcp.json starts it)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

mcp = MCPServer("warehouse", log_level="WARNING")

CONNECTIONS = {"snowflake_prod": "snowflake (default)", "bigquery_staging": "bigquery"}


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def get_existing_connections() -> str:
    """List the warehouse connections the user has already configured, and which is the default."""
    return "\n".join(f"- {name}: {kind}" for name, kind in CONNECTIONS.items())


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def describe_connection(name: str) -> str:
    """Describe one configured warehouse connection by its name (see get_existing_connections)."""
    return CONNECTIONS.get(name, f"no connection named {name!r}")


if __name__ == "__main__":
    mcp.run()  # stdio; mcp.run(transport="streamable-http", port=8765) serves HTTP at /mcp
