"""A stdio MCP server whose tools change state the way server-memory's do, but say so the way
many servers do: not at all. `create_entities` and `delete_entities` carry no annotations (the
MCP specification then counts a tool as destructive), `read_graph` is annotated read-only, and
`wipe` is annotated both read-only and destructive. The state is the JSON file named by
$STATE_FILE. Run over stdio: `python state_server.py`."""

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

mcp = MCPServer("state", log_level="WARNING")


def load() -> list[str]:
    path = Path(os.environ["STATE_FILE"])
    return json.loads(path.read_text()) if path.exists() else []


def save(names: list[str]) -> None:
    Path(os.environ["STATE_FILE"]).write_text(json.dumps(names))


@mcp.tool()
def create_entities(names: list[str]) -> str:
    """Adds entities to the knowledge graph."""
    save(load() + names)
    return f"created {len(names)}"


@mcp.tool()
def delete_entities(names: list[str]) -> str:
    """Removes entities from the knowledge graph."""
    save([n for n in load() if n not in names])
    return f"deleted {len(names)}"


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_graph() -> str:
    """The whole knowledge graph."""
    return json.dumps(load())


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=True))
def wipe() -> str:
    """Empties the knowledge graph."""
    save([])
    return "wiped"


if __name__ == "__main__":
    mcp.run()
