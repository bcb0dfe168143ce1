"""The MCP hub: every connection to an MCP server (the `mcp` SDK only, never hand-written
JSON-RPC), the child processes behind them, how a call is answered, the adversarial proxy and
the pins.

May import: the foundations, results_schema, answers, loaders."""

__all__: list[str] = []
