"""The legacy HTTP+SSE transport, through the mcp SDK's SSE client, against a real public server:
@modelcontextprotocol/server-everything (a devDependency, `npm install`) started in its SSE mode
on 127.0.0.1. A suite runs end to end over `"type": "sse"` in an mcpServers config and over
`--server-url URL --transport sse`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, free_port, wait_for_port
from fake_anthropic import reply, text, tool_use

EVERYTHING = (
    ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
LOOPBACK = ROOT / "tests" / "servers" / "loopback.cjs"  # node -r: listen on 127.0.0.1 only


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the TCP sockets listening on `port` (Linux /proc/net/tcp*)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


# The tests that talk to the one server-everything run on one worker, so it starts once
# (`--dist loadgroup`).
EVERYTHING_SSE = pytest.mark.xdist_group("everything-sse")


@pytest.fixture(scope="module")
def everything_sse(tmp_path_factory):
    """server-everything in SSE mode (`node dist/index.js sse`, port from $PORT), on loopback; its
    environment is minimal, since it has a tool that prints it."""
    node = shutil.which("node")
    if not EVERYTHING.exists() or node is None:
        message = "server-everything is not installed: run `npm install` at the repository root"
        if os.environ.get("CI"):
            raise RuntimeError(message)
        pytest.skip(message)
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PORT": str(port),
        "HOME": str(tmp_path_factory.mktemp("home")),
    }
    process = subprocess.Popen(
        [node, "-r", str(LOOPBACK), str(EVERYTHING), "sse"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for_port(port, process)
    except RuntimeError:
        process.kill()
        raise
    try:
        yield f"http://127.0.0.1:{port}/sse", port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        process.stderr.close()


SCRIPTS = {
    "Echo the words hello over sse": tool_use("echo", {"message": "hello over sse"}),
    "What is 2 plus 3?": tool_use("get-sum", {"a": 2, "b": 3}),
}


def everything_model(body: dict) -> dict:
    """Calls the tool the prompt asks for, then repeats what the server answered."""
    last = body["messages"][-1]["content"]
    if isinstance(last, list):
        result = next(b for b in last if b.get("type") == "tool_result")
        content = result["content"]
        answer = (
            content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)
        )
        return reply(text(f"The server said: {answer}"))
    return reply(SCRIPTS[last])


SUITE = (
    "test_name,user_prompt,expected_tools,expected_args,args_match\n"
    'echo,Echo the words hello over sse,echo,"{""echo"": {""message"": ""hello over sse""}}",exact\n'
    'sum,What is 2 plus 3?,get-sum,"{""get-sum"": {""a"": 2, ""b"": 3}}",exact\n'
)


@EVERYTHING_SSE
def test_server_everything_listens_on_loopback_only(everything_sse):
    _, port = everything_sse
    addresses = listening_addresses(port)
    if not addresses:
        pytest.skip("no /proc/net/tcp here")
    assert addresses <= {"0100007F", "0000000000000000FFFF00000100007F"}, addresses


@EVERYTHING_SSE
def test_a_suite_runs_over_sse_from_an_mcp_config(cli, api, tmp_path, everything_sse):
    url, _ = everything_sse
    api.responder = everything_model
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"type": "sse", "url": url}}}))
    suite = tmp_path / "everything.csv"
    suite.write_text(SUITE)
    code, out, err = cli("--csv", suite, "--mcp-config", config, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["passed"] is True and document["summary"]["passed"] == 2
    calls = {r["test_name"]: r["tool_calls"] for r in document["results"]}
    assert [(c["name"], c["server"], c["is_error"], c["output"]) for c in calls["echo"]] == [
        ("echo", "everything", False, "Echo: hello over sse")
    ]
    assert [(c["name"], c["output"]) for c in calls["sum"]] == [
        ("get-sum", "The sum of 2 and 3 is 5.")
    ]
    answers = {r["test_name"]: r["agent_reasoning"] for r in document["results"]}
    assert answers == {
        "echo": "The server said: Echo: hello over sse",
        "sum": "The server said: The sum of 2 and 3 is 5.",
    }
    offered = {t["name"] for t in api.message_requests[0]["tools"]}
    assert {"echo", "get-sum"} <= offered


@EVERYTHING_SSE
def test_server_url_with_transport_sse(cli, api, everything_sse):
    url, _ = everything_sse
    api.responder = everything_model
    code, out, err = cli(
        "-q", "What is 2 plus 3?", "--server-url", url, "--transport", "sse", "--json"
    )
    assert code == 0, err
    [result] = json.loads(out)["results"]
    assert [(c["server"], c["output"]) for c in result["tool_calls"]] == [
        ("127_0_0_1", "The sum of 2 and 3 is 5.")
    ]


@EVERYTHING_SSE
def test_an_sse_endpoint_over_streamable_http_fails_with_one_line(cli, api, everything_sse):
    url, _ = everything_sse
    code, out, err = cli("-q", "What is 2 plus 3?", "--server-url", url)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: MCP server '127_0_0_1' ({url}) ") and api.message_requests == []


def test_transport_needs_a_server_url(cli, api):
    code, out, err = cli("-q", "hi", "--transport", "sse")
    assert (
        code == 2
        and err
        == "error: --transport applies to --server-url (e.g. --server-url "
        "http://127.0.0.1:3001/sse --transport sse)\n"
    )


@pytest.mark.parametrize("url", ["ftp://example.com/sse", "localhost:3001/sse", "http://"])
def test_a_server_url_must_be_http(cli, api, url):
    code, out, err = cli("-q", "hi", "--server-url", url, "--transport", "sse")
    assert code == 2 and err.count("\n") == 1 and "is not an http:// or https:// URL" in err


def test_an_sse_config_entry_needs_a_url(cli, api, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {\n  "legacy": {"type": "sse"}\n}}')
    code, out, err = cli("-q", "hi", "--mcp-config", config)
    assert code == 2 and err == (
        f"error: {config}:2: server 'legacy': sse server needs a \"url\" starting with "
        "http:// or https://\n"
    )
