"""BFCL's functions as MCP tools, written by `evaluator.py import bfcl`: every tool of
bfcl_functions.json beside this file (BFCL's own conversion of its function documents for
Claude). BFCL scores the calls Claude makes, never their results: every call gets one line."""

import json
from pathlib import Path

import mcp_types as types
from mcp.server.lowlevel import Server

DEFINITIONS = json.loads(Path(__file__).with_name("bfcl_functions.json").read_text("utf-8"))
TOOLS = [types.Tool(**definition) for definition in DEFINITIONS]


async def list_tools(context, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(context, params):
    text = "Recorded. (BFCL scores the call itself; there is no result.)"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("bfcl", on_list_tools=list_tools, on_call_tool=call_tool)
