"""A stdio MCP server that shows the variables it is given in every shape issues 37 and 38 found
leaking. Issue 37: behind 0-5 bytes of prefix, after other text on the same line, base64
(standard and URL-safe) starting mid-line and wrapped at 64 and 76 columns, and percent-encoded
(every byte, in upper and lower hex, or only some bytes). Issue 38: split in two adjacent fields
(JSON values, list items, concatenated strings), hex with separators (`73 6b 2d`, `73:6b`,
`0x73 0x6b`, `\\x73\\x6b`, a dump wrapped over lines), `\\uXXXX` escapes (of every character or
some), HTML entities (decimal, hex, named), reversed, and base32 (at every byte alignment, with
and without padding, lower case, wrapped). `encoded(name, form)` answers with one form (FORMS) or
all of them; `half(name, part)` with the first or second half of a variable (its `note` argument
is there for the caller to put something in: the other half of a key, say); run with
`--die-printing NAME ...` it prints every form to stderr and exits before its handshake, as a
server failing to start quotes its configuration (`--form FORM`: that form only). Run over stdio:
`python encoding_server.py [--die-printing NAME ... [--form FORM]]`."""

import base64
import json
import os
import sys

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("encoding", log_level="WARNING")

PREFIXES = [b"p" * n for n in range(6)]  # the value behind 0-5 bytes of something else


def wrapped(lead: str, stream: str, width: int) -> str:
    """`stream` after `lead` on the first line, broken at `width` columns (the first line too,
    its lead counted: the stream starts mid-line), as `base64` and `openssl base64` print it."""
    text = lead + stream
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def percent(raw: bytes, every: int = 1, hex_format: str = "%{:02X}") -> str:
    """Every `every`th byte percent-encoded, the others as they are."""
    return "".join(hex_format.format(b) if i % every == 0 else chr(b) for i, b in enumerate(raw))


def base64_shapes(value: str) -> list[str]:
    raw = value.encode()
    found = []
    for prefix in PREFIXES:
        found.append(prefix.decode() + value)
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            stream = encode(prefix + raw).decode()
            found += [f"token: {stream} (end)", f"key={stream.rstrip('=')}"]
            found += [wrapped("blob: ", stream, width) for width in (64, 76)]
    return found


def percent_shapes(value: str) -> list[str]:
    raw = value.encode()
    return [
        percent(raw),
        percent(raw, hex_format="%{:02x}"),
        percent(raw, every=2),
        "q=" + percent(raw, every=3, hex_format="%{:02x}") + "&x=1",
    ]


def split_shapes(value: str) -> list[str]:
    """The value cut in two at a third, the half and two thirds, each part in a field of its own."""
    found = []
    for cut in (len(value) // 3, len(value) // 2, len(value) * 2 // 3):
        first, second = value[:cut], value[cut:]
        found += [
            json.dumps({"first": first, "second": second}),
            json.dumps([first, second]),
            f"{first!r} + {second!r}",
            f"part 1: {first}\tpart 2: {second}",
            f"a={first}&b={second}",
        ]
    return found


def hex_shapes(value: str) -> list[str]:
    raw = value.encode()
    pairs = [f"{b:02x}" for b in raw]
    return [
        " ".join(pairs),
        " ".join(pairs).upper(),
        ":".join(pairs),
        " ".join("0x" + p for p in pairs),
        ",".join("0x" + p for p in pairs),
        ", ".join("0x" + p.upper() for p in pairs),
        "".join("\\x" + p for p in pairs),
        "bytes: " + " ".join(f"{b:02x}" for b in b"ppp" + raw),
        # a dump: 16 bytes a line
        "\n".join(" ".join(pairs[i : i + 16]) for i in range(0, len(pairs), 16)),
    ]


def unicode_shapes(value: str) -> list[str]:
    def escaped(every: int, hex_format: str = "\\u{:04x}") -> str:
        return "".join(
            hex_format.format(ord(c)) if i % every == 0 else c for i, c in enumerate(value)
        )

    return [
        escaped(1),
        escaped(1, "\\u{:04X}"),
        escaped(2),
        "s=" + escaped(3) + ";",
        json.dumps(escaped(1))[1:-1],  # escaped twice: `\\u0073`
    ]


def html_shapes(value: str) -> list[str]:
    def entities(every: int, entity: str) -> str:
        return "".join(entity.format(ord(c)) if i % every == 0 else c for i, c in enumerate(value))

    named = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
    return [
        entities(1, "&#{};"),
        entities(1, "&#x{:x};"),
        entities(1, "&#X{:X};"),
        entities(2, "&#{};"),
        "<td>" + entities(3, "&#x{:02x};") + "</td>",
        "<p>" + "".join(named.get(c, c) for c in value) + "</p>",
    ]


def reversed_shapes(value: str) -> list[str]:
    return [value[::-1], f"backwards: {value[::-1]} (end)"]


def base32_shapes(value: str) -> list[str]:
    raw = value.encode()
    found = []
    for prefix in PREFIXES[:5]:  # base32 takes 5 bytes at a time
        stream = base64.b32encode(prefix + raw).decode()
        found += [f"b32: {stream} (end)", stream.rstrip("="), stream.lower()]
        found += [wrapped("b32: ", stream, width) for width in (64, 76)]
    return found


# issue 38's forms first: a failing server's error quotes the end of its stderr, issue 37's forms
FORMS = {
    "split": split_shapes,
    "hex": hex_shapes,
    "unicode": unicode_shapes,
    "html": html_shapes,
    "reversed": reversed_shapes,
    "base32": base32_shapes,
    "base64": base64_shapes,
    "percent": percent_shapes,
}


def shapes(value: str, form: str = "") -> list[str]:
    return [shown for name, make in FORMS.items() if form in ("", name) for shown in make(value)]


@mcp.tool()
def encoded(name: str, form: str = "") -> str:
    """The variable in one form of FORMS (every form when none is named), a paragraph each."""
    return "\n\n".join(shapes(os.environ.get(name, ""), form))


@mcp.tool()
def half(name: str, part: int, note: str = "") -> str:
    """The first (part 1) or second (part 2) half of the variable, alone."""
    value = os.environ.get(name, "")
    return value[: len(value) // 2] if part == 1 else value[len(value) // 2 :]


def option(name: str) -> list[str]:
    """The words after `name` on the command line, up to the next option."""
    if name not in sys.argv:
        return []
    words = sys.argv[sys.argv.index(name) + 1 :]
    return words[: next((i for i, w in enumerate(words) if w.startswith("--")), len(words))]


if __name__ == "__main__":
    if "--die-printing" in sys.argv:
        form = "".join(option("--form"))
        for name in option("--die-printing"):
            sys.stderr.write("\n\n".join(shapes(os.environ.get(name, ""), form)) + "\n")
        sys.exit(3)
    mcp.run()
