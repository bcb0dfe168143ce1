"""A stdio MCP server that shows the variables it is given in every shape issue 37 found leaking:
behind 0-5 bytes of prefix, after other text on the same line, base64 (standard and URL-safe)
starting mid-line and wrapped at 64 and 76 columns, and percent-encoded (every byte, in upper and
lower hex, or only some bytes). `encoded(name)` answers with them; run with `--die-printing NAME
...` it prints them to stderr and exits before its handshake, as a server failing to start
quotes its configuration. Run over stdio: `python encoding_server.py [--die-printing NAME ...]`."""

import base64
import os
import sys

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("encoding", log_level="WARNING")


def wrapped(lead: str, stream: str, width: int) -> str:
    """`stream` after `lead` on the first line, broken at `width` columns (the first line too,
    its lead counted: the stream starts mid-line), as `base64` and `openssl base64` print it."""
    text = lead + stream
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def percent(raw: bytes, every: int = 1, hex_format: str = "%{:02X}") -> str:
    """Every `every`th byte percent-encoded, the others as they are."""
    return "".join(hex_format.format(b) if i % every == 0 else chr(b) for i, b in enumerate(raw))


def shapes(value: str) -> list[str]:
    raw = value.encode()
    found = []
    for prefix in (b"p" * n for n in range(6)):
        found.append(prefix.decode() + value)
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            stream = encode(prefix + raw).decode()
            found += [f"token: {stream} (end)", f"key={stream.rstrip('=')}"]
            found += [wrapped("blob: ", stream, width) for width in (64, 76)]
    found += [
        percent(raw),
        percent(raw, hex_format="%{:02x}"),
        percent(raw, every=2),
        "q=" + percent(raw, every=3, hex_format="%{:02x}") + "&x=1",
    ]
    return found


@mcp.tool()
def encoded(name: str) -> str:
    """The variable in every shape above, a paragraph each."""
    return "\n\n".join(shapes(os.environ.get(name, "")))


if __name__ == "__main__":
    if "--die-printing" in sys.argv:
        for name in sys.argv[sys.argv.index("--die-printing") + 1 :]:
            sys.stderr.write("\n\n".join(shapes(os.environ.get(name, ""))) + "\n")
        sys.exit(3)
    mcp.run()
