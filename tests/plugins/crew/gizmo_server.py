"""The crew plugin's MCP server (tests): one tool, served over stdio with the mcp SDK. The test
that copies the plugin writes its .mcp.json, naming this Python."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("gizmos")


@server.tool()
def tally_gizmo_inventory(sprocket: int = 0) -> str:
    """Tallies the gizmo inventory of a sprocket warehouse."""
    return f"sprocket {sprocket}: 7 gizmos"


if __name__ == "__main__":
    server.run()
