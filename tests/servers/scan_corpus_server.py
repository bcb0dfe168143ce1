"""A test MCP server that lists one scan corpus listing (tests/scan_corpus/NAME.json) byte for
byte: its tools (name, title, description, inputSchema, outputSchema, annotations, _meta), and,
when the listing has them, its resources (`resources/read` answers a resource's `text`), resource
templates, prompts and the server's instructions; so `scan` meets the poisoned definitions as a
real server sends them. Every tool answers "done". Run over stdio:
`python scan_corpus_server.py poisoned` (or `clean`, `bypasses`)."""

import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import TextResource
from mcp.server.mcpserver.tools import Tool
from mcp_types import Prompt as ListedPrompt
from mcp_types import Resource as ListedResource
from mcp_types import ResourceTemplate as ListedResourceTemplate
from mcp_types import Tool as ListedTool
from mcp_types import ToolAnnotations

CORPUS = Path(__file__).resolve().parent.parent / "scan_corpus"


def done(**arguments: object) -> str:
    return "done"


def callable_tool(definition: dict) -> Tool:
    """The SDK's tool for a definition (what a call runs), its input schema the definition's."""
    tool = Tool.from_function(
        done,
        name=definition["name"],
        description=definition["description"],
        annotations=ToolAnnotations.model_validate(definition.get("annotations") or {}),
    )
    return tool.model_copy(update={"parameters": definition["inputSchema"]})


class CorpusServer(MCPServer):
    """Lists the corpus's definitions as they are written (the SDK would rebuild a tool's output
    schema and drop a prompt argument's fields)."""

    def __init__(self, listing_name: str) -> None:
        listing = json.loads((CORPUS / f"{listing_name}.json").read_text(encoding="utf-8"))
        super().__init__(
            f"scan-corpus-{listing_name}",
            instructions=listing.get("instructions"),
            log_level="WARNING",
            tools=[callable_tool(d) for d in listing["tools"]],
        )
        self.listing = listing
        for resource in listing.get("resources", []):
            self.add_resource(
                TextResource(
                    uri=resource["uri"],
                    name=resource["name"],
                    description=resource.get("description"),
                    mime_type=resource.get("mimeType", "text/plain"),
                    text=resource["text"],
                )
            )

    def _listed(self, key: str, kind: Any, *leave_out: str) -> list[Any]:
        return [
            kind.model_validate({k: v for k, v in item.items() if k not in leave_out})
            for item in self.listing.get(key, [])
        ]

    async def list_tools(self) -> list[ListedTool]:  # type: ignore[override]
        return self._listed("tools", ListedTool)

    async def list_resources(self) -> list[ListedResource]:  # type: ignore[override]
        return self._listed("resources", ListedResource, "text")

    async def list_resource_templates(self) -> list[ListedResourceTemplate]:  # type: ignore[override]
        return self._listed("resourceTemplates", ListedResourceTemplate)

    async def list_prompts(self) -> list[ListedPrompt]:  # type: ignore[override]
        return self._listed("prompts", ListedPrompt)


def server(listing: str) -> MCPServer:
    return CorpusServer(listing)


if __name__ == "__main__":
    server(sys.argv[1] if len(sys.argv) > 1 else "poisoned").run()
