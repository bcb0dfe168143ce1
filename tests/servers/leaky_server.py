"""A stdio MCP server that echoes its environment back the way real servers do, JSON-escaped
(like server-everything's get-env), URL-encoded, base64-encoded (also wrapped over lines, as
`base64` and `openssl base64` print it) and hex-encoded, its own command line (as the reference
Postgres server quotes its connection string in errors), and one that writes garbage to stdout
at start (`--junk-at-start`): what the redactor and the stdout-noise warning must handle. Run
over stdio: `python leaky_server.py [ARGS...]`."""

import base64
import json
import os
import sys
import urllib.parse

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("leaky", log_level="WARNING")


@mcp.tool()
def env_json(name: str) -> str:
    """The variable as a JSON object, the way server-everything's get-env shows the environment."""
    return json.dumps({name: os.environ.get(name, "")}, indent=2)


@mcp.tool()
def env_url(name: str) -> str:
    """The variable inside a URL query string."""
    return "https://example.invalid/callback?token=" + urllib.parse.quote(
        os.environ.get(name, ""), safe=""
    )


@mcp.tool()
def env_base64(name: str) -> str:
    """The variable base64-encoded, alone and inside a longer encoded text."""
    value = os.environ.get(name, "").encode()
    return (
        base64.b64encode(value).decode()
        + " "
        + base64.b64encode(b'{"auth": "' + value + b'"}').decode()
    )


@mcp.tool()
def env_wrapped(name: str, width: int = 76) -> str:
    """The variable in a line, base64-encoded and wrapped at `width` columns (`base64`: 76,
    `openssl base64`: 64)."""
    value = f"export {name}={os.environ.get(name, '')}\n".encode()
    encoded = base64.b64encode(value).decode()
    return "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))


@mcp.tool()
def env_hex(name: str) -> str:
    """The variable hex-encoded, inside a longer hex dump and wrapped at 60 columns (`xxd -p`)."""
    encoded = (b"value: " + os.environ.get(name, "").encode() + b"\n").hex()
    return "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60))


@mcp.tool()
def argv() -> str:
    """The server's own command line, as a server quoting its connection string in an error."""
    return "could not connect with: " + " ".join(sys.argv[1:])


@mcp.tool()
def junk_stdout(lines: int = 5) -> str:
    """Writes lines that are not JSON-RPC to stdout (the transport) before answering."""
    for i in range(lines):
        sys.stdout.write(f"this is not json {i}\n")
    sys.stdout.flush()
    return "answered after junk"


if __name__ == "__main__":
    if "--junk-at-start" in sys.argv:
        for i in range(15):
            print(f"starting up, step {i}", flush=True)
    mcp.run()
