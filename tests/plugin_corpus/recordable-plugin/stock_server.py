"""The larder's real stock server: a stdio MCP server in the standard library alone (one JSON-RPC
message a line). Its `count` tool answers `LARDER-42 units for: QUERY`; `audit` is listed and
never called in the suite. With STOCK_MARKER set it first writes that file (where a confined
server cannot reach, the file never appears)."""

import json
import os
import sys

if os.environ.get("STOCK_MARKER"):
    try:
        with open(os.environ["STOCK_MARKER"], "w") as marker:
            marker.write("started")
    except OSError:
        pass

TOOLS = [
    {
        "name": "count",
        "description": "How many units of an item the larder holds",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
    {
        "name": "audit",
        "description": "Every shelf of the larder, counted",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def answer(request: dict) -> dict:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stock", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        query = (params.get("arguments") or {}).get("query", "")
        text = f"LARDER-42 units for: {query}"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
