"""A test MCP server that lists the tools of one scan corpus listing (tests/scan_corpus/NAME.json:
name, description, inputSchema and annotations, byte for byte), so `scan` meets the poisoned
definitions as a real server sends them. Every tool answers "done". Run over stdio:
`python scan_corpus_server.py poisoned` (or `clean`)."""

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations

CORPUS = Path(__file__).resolve().parent.parent / "scan_corpus"


def done(**arguments: object) -> str:
    return "done"


def listed(definition: dict) -> Tool:
    """The SDK's tool for a definition, its input schema the definition's own (not one the SDK
    derives from a signature)."""
    tool = Tool.from_function(
        done,
        name=definition["name"],
        description=definition["description"],
        annotations=ToolAnnotations.model_validate(definition.get("annotations") or {}),
    )
    return tool.model_copy(update={"parameters": definition["inputSchema"]})


def server(listing: str) -> MCPServer:
    definitions = json.loads((CORPUS / f"{listing}.json").read_text(encoding="utf-8"))["tools"]
    return MCPServer(
        f"scan-corpus-{listing}", log_level="WARNING", tools=[listed(d) for d in definitions]
    )


if __name__ == "__main__":
    server(sys.argv[1] if len(sys.argv) > 1 else "poisoned").run()
