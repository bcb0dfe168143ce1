"""A test MCP server with two tools Claude can confuse: both look a document up by its number,
and their descriptions do not say which documents. Every call is counted in the file named by
$CONFUSABLE_CALLS (when set), so a test can see the server really ran it. Run over stdio:
`python confusable_server.py`."""

import json
import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("confusable", log_level="WARNING")


def record(tool: str, number: str) -> None:
    path = os.environ.get("CONFUSABLE_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": tool, "number": number}) + "\n")


@mcp.tool()
def lookup_invoice(number: str) -> str:
    """Looks a document up by its number."""
    record("lookup_invoice", number)
    return f"invoice {number}: 120.00 EUR, due 2026-12-01"


@mcp.tool()
def lookup_receipt(number: str) -> str:
    """Looks a document up by its number."""
    record("lookup_receipt", number)
    return f"receipt {number}: paid 45.50 EUR by card"


if __name__ == "__main__":
    mcp.run()
