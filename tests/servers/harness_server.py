"""A test MCP server (the SDK's lowlevel Server, over stdio) for suites through Claude Code:
`python harness_server.py [--log FILE] [--delay SECONDS]`. It sleeps --delay seconds before it
answers anything (a server that takes seconds to start: Claude Code's first request goes out
before it has connected), and writes every tools/call it receives as a JSON line to --log (what
reached the real server, and what never did). Its tools: convert_currency and moon_phase
(read-only), delete_report (annotated destructive)."""

import argparse
import json
import time

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False)
DESTRUCTIVE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
TOOLS = [
    types.Tool(
        name="convert_currency",
        description="Converts an amount of money between currencies at the exchange rate.",
        input_schema={"type": "object", "properties": {"amount": {"type": "number"}}},
        annotations=READ_ONLY,
    ),
    types.Tool(
        name="moon_phase",
        description="Tells the phase of the moon on a calendar date.",
        input_schema={"type": "object", "properties": {"date": {"type": "string"}}},
        annotations=READ_ONLY,
    ),
    types.Tool(
        name="delete_report",
        description="Deletes a saved sales report permanently.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        annotations=DESTRUCTIVE,
    ),
]
ANSWERS = {
    "convert_currency": "20 EUR is 3,400 JPY",
    "moon_phase": "waxing gibbous",
    "delete_report": "deleted",
}
ARGS = argparse.Namespace(log=None, delay=0.0)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    if ARGS.log:
        with open(ARGS.log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": params.name, "arguments": params.arguments}) + "\n")
    if params.name not in ANSWERS:
        return types.CallToolResult(
            content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True
        )
    return types.CallToolResult(content=[types.TextContent(text=ANSWERS[params.name])])


server = Server("harness", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    parser.add_argument("--delay", type=float, default=0.0)
    ARGS = parser.parse_args()
    time.sleep(ARGS.delay)  # before initialize is even read: a slow start
    anyio.run(main)
