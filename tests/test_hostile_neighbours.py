"""Hostile neighbours: what another local process cannot do to a run.

- The in-process MCP servers served to Claude Code over loopback (hub/served.py: the harness's
  red-team proxies, shadow servers) take the run's bearer token: a local process without it
  gets 401 for `initialize`, `tools/list` and `tools/call`, its calls never reach the server
  (nothing is added to what the run records), a foreign Origin or Host is refused, and a client
  with the headers the run's --mcp-config gives Claude Code lists and calls the tools."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from claude_tool_evaluator.hub.served import served_over_http
from claude_tool_evaluator.run_types import ServerSpec

JSON_RPC = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "neighbour", "version": "1"},
    },
}


def recording_server(calls: list[dict]) -> Any:
    """An mcp low-level server with one tool, `lookup`, that records each call it runs."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tool = types.Tool(
        name="lookup", description="Looks a word up.", input_schema={"type": "object"}
    )

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> Any:
        calls.append(dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text="found")])

    return Server("records", on_list_tools=list_tools, on_call_tool=call_tool)


def post(url: str, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers={**JSON_RPC, **headers}, timeout=10)


async def neighbour_and_run(calls: list[dict]) -> dict[str, Any]:
    spec = ServerSpec(
        name="records", kind="module", module="(test)", instance=recording_server(calls)
    )
    seen: dict[str, Any] = {}
    async with served_over_http([spec]) as [served]:
        url, headers = served.url, dict(served.headers)
        seen["headers"] = headers

        def neighbour() -> None:
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "lookup", "arguments": {"word": "from a neighbour"}},
            }
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
            seen["without"] = [post(url, body).status_code for body in (INITIALIZE, listing, call)]
            seen["wrong"] = [
                post(url, body, authorization="Bearer not-the-token").status_code
                for body in (INITIALIZE, listing, call)
            ]
            seen["origin"] = post(url, INITIALIZE, origin="http://localhost:3000", **headers)
            seen["host"] = post(url, INITIALIZE, host="localhost:80", **headers)

        await asyncio.to_thread(neighbour)
        seen["calls_after_neighbour"] = list(calls)
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with httpx.AsyncClient(headers=headers) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    seen["tools"] = [t.name for t in (await session.list_tools()).tools]
                    await session.call_tool("lookup", {"word": "from the run"})
    return seen


def test_a_local_process_without_the_runs_token_gets_401_and_touches_nothing():
    calls: list[dict] = []
    seen = asyncio.run(neighbour_and_run(calls))
    token = seen["headers"]["Authorization"].removeprefix("Bearer ")
    assert len(token) >= 40  # a secret of this block's (32 random bytes)
    assert seen["without"] == [401, 401, 401] and seen["wrong"] == [401, 401, 401]
    assert seen["calls_after_neighbour"] == []  # no neighbour's call reached the server
    assert seen["origin"].status_code == 403  # Claude Code sends no Origin; a browser page does
    assert seen["host"].status_code == 421  # only this server's own address and port
    assert seen["tools"] == ["lookup"] and calls == [{"word": "from the run"}]
