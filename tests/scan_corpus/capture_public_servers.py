"""Writes public_servers.json: the tool listings (`tools/list`, as the MCP SDK's client reads
them) and what else they show a model (`others`: instructions, resources with their text,
resource templates, prompts, as the evaluator's hub lists them) of the public MCP servers this project runs in its tests and README: mcp-server-time (a
Python package), and @modelcontextprotocol/server-everything and server-memory (npm
devDependencies, `npm install` at the repository root). The scan corpus test reads the file, so
it needs neither the network nor node; run this again to refresh it:
`python tests/scan_corpus/capture_public_servers.py`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters, stdio_client

from claude_tool_evaluator.hub.calls import listed_beyond_tools

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SERVERS = {
    "mcp_server_time": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
    "server_everything": [str(ROOT / "node_modules" / ".bin" / "mcp-server-everything")],
    "server_memory": [str(ROOT / "node_modules" / ".bin" / "mcp-server-memory")],
}


async def listing(command: list[str]) -> dict:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(stdio_client(params)) as client:
        tools = (await client.list_tools()).tools
        others = await listed_beyond_tools(client)
    return {
        "tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools],
        "others": others,
    }


async def main() -> None:
    listings = {name: await listing(command) for name, command in SERVERS.items()}
    text = json.dumps(listings, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    (HERE / "public_servers.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
