"""A test MCP server (the SDK's lowlevel Server, over stdio) that writes every tools/call it
receives, whatever the tool's name, as a JSON line to the file named by $RECORDED_CALLS: a test
sees what reached the real server, and what never did (a red team's canary). Its one tool,
`lookup_order`, answers a JSON object. Run: `python recording_server.py`."""

import json
import os

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="lookup_order",
    description="Looks an order up by its number.",
    input_schema={
        "type": "object",
        "properties": {"number": {"type": "string"}},
        "required": ["number"],
    },
    annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False),
)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):
    path = os.environ.get("RECORDED_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": params.name, "arguments": params.arguments}) + "\n")
    if params.name != TOOL.name:
        return types.CallToolResult(
            content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True
        )
    number = (params.arguments or {}).get("number", "")
    answer = {"number": number, "status": "shipped", "total": "42.00 EUR"}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(answer))])


server = Server("recording", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
