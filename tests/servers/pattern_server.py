"""A test MCP server whose tool schemas hold patterns that backtrack without end under Python's
`re`, a shape common in real e-mail and URL patterns: nested quantifiers over the same letters.
Forty-one characters that almost match (`aaa...a!`) keep `re` busy for hours.

- `save_name`: `^([a-z ]+)+$`, which RE2 matches in linear time;
- `save_code`: the same behind a lookahead, which RE2 cannot take (Python's `re`, time-limited);
- `save_codes`: forty optional arguments, each with its own such pattern: forty calls, each
  giving one of them, take forty time limits to check (a check that blocks as long as a test
  needs; a pattern that overran once is not tried again, another one is).

Built on the low-level server so that nothing here validates the arguments itself: every call
answers "saved". Run over stdio: `python pattern_server.py`.
"""

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

NESTED = "^([a-z ]+)+$"
LOOKAHEAD = "^(?=[a-z])([a-z ]+)+$"


def text_schema(properties: dict[str, str], required: bool = True) -> dict:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "pattern": p} for name, p in properties.items()},
        "required": list(properties) if required else [],
    }


TOOLS = [
    types.Tool(
        name="save_name",
        description="Saves a name: lower-case letters and spaces.",
        input_schema=text_schema({"name": NESTED}),
    ),
    types.Tool(
        name="save_code",
        description="Saves a code: lower-case letters and spaces, starting with a letter.",
        input_schema=text_schema({"code": LOOKAHEAD}),
    ),
    types.Tool(
        name="save_codes",
        description="Saves any of forty codes.",
        input_schema=text_schema(
            {f"code{i}": f"^(?=[a-z]{{1,{i + 1}}})([a-z ]+)+$" for i in range(40)}, required=False
        ),
    ),
]


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="saved")])


server = Server("patterns", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
