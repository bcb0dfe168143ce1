"""Fail fast on a dead endpoint: a refused connection or an unresolvable host stops the run
with one line naming the URL (exit 2), instead of one identical connection error per case,
each after the SDK's retries with backoff."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, TEST_API_KEY

from claude_tool_evaluator.errors import FatalApiError
from claude_tool_evaluator.session import (
    AnthropicModel,
    ModelRequest,
    check_model_endpoint,
    connection_failure,
)

REQUEST = ModelRequest("claude-sonnet-5-5", "sys", [{"role": "user", "content": "hi"}], [], 50)


def closed_port() -> int:
    """A port nothing listens on: bound to get a free one, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_closed_port_is_fatal_and_names_the_url():
    port = closed_port()
    with pytest.raises(FatalApiError) as caught:
        check_model_endpoint(f"http://127.0.0.1:{port}")
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}" in message and "connection refused" in message
    assert "\n" not in message


def test_unresolvable_host_is_fatal_and_names_the_url():
    with pytest.raises(FatalApiError) as caught:
        check_model_endpoint("http://no-such-host.invalid:80")
    message = str(caught.value)
    assert "http://no-such-host.invalid:80" in message and "host name" in message


def test_listening_server_passes(api):
    check_model_endpoint(api.url)
    check_model_endpoint(None)  # the `api` fixture sets ANTHROPIC_BASE_URL: the SDK's fallback


def test_env_base_url_is_used_when_none_is_given(monkeypatch):
    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(FatalApiError, match=f"127.0.0.1:{port}"):
        check_model_endpoint(None)


def test_message_keeps_secrets_out():
    port = closed_port()
    with pytest.raises(FatalApiError) as caught:
        check_model_endpoint(f"http://user:secret@127.0.0.1:{port}/v1?key=hidden#frag")
    message = str(caught.value)
    assert f"http://127.0.0.1:{port}/v1" in message
    assert "secret" not in message and "user" not in message and "hidden" not in message


def test_timeout_is_not_fatal():
    """A port whose accept queue is full drops new connections (they time out): slow networks
    are the SDK's job, not a reason to stop the run."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            check_model_endpoint(f"http://127.0.0.1:{port}", timeout=0.3)
        finally:
            for filler in fillers:
                filler.close()


def test_connection_failure_reads_the_sdk_cause_chain():
    import anthropic
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    for cause, reason in (
        (ConnectionRefusedError(111, "refused"), "connection refused"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "host name not found"),
    ):
        try:
            try:
                try:
                    raise OSError("All connection attempts failed") from cause
                except OSError as exc:
                    raise httpx2.ConnectError(str(exc)) from exc
            except httpx2.ConnectError as exc:
                raise anthropic.APIConnectionError(request=request) from exc
        except anthropic.APIConnectionError as exc:
            assert connection_failure(exc) == reason
    assert connection_failure(anthropic.APITimeoutError(request=request)) is None


def test_model_on_closed_port_fails_fast():
    port = closed_port()
    model = AnthropicModel(api_key=TEST_API_KEY, base_url=f"http://127.0.0.1:{port}")

    async def call():
        try:
            await model.complete(REQUEST)
        finally:
            await model.close()

    started = time.monotonic()
    with pytest.raises(FatalApiError, match=f"127.0.0.1:{port}.*connection refused"):
        asyncio.run(call())
    assert time.monotonic() - started < 10


def test_refusal_through_a_proxy_is_fatal_on_the_first_call(monkeypatch):
    """Through a proxy the up-front check cannot dial the API host; a refused first call (here the
    proxy refuses) still stops the run, from the SDK error's cause chain."""
    port = closed_port()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    model = AnthropicModel(
        api_key=TEST_API_KEY, base_url="http://api.example.invalid", max_retries=0
    )

    async def call():
        try:
            await model.complete(REQUEST)
        finally:
            await model.close()

    with pytest.raises(FatalApiError, match="api.example.invalid:80: connection refused.*proxy"):
        asyncio.run(call())


def test_model_that_answered_keeps_connection_errors_per_case(api):
    """Once a call succeeded, a later refusal is one case's error, not a fatal one."""
    import anthropic

    model = AnthropicModel(base_url=api.url, max_retries=0)

    async def calls():
        try:
            await model.complete(REQUEST)
            # The same model object, its client now aimed at a dead port (the SDK's own copy API).
            model.client = model.client.with_options(base_url=f"http://127.0.0.1:{closed_port()}")
            with pytest.raises(anthropic.APIConnectionError):
                await model.complete(REQUEST)
        finally:
            await model.close()

    asyncio.run(calls())


def test_cli_on_closed_port_exits_2_with_one_line():
    port = closed_port()
    env = {**os.environ, "ANTHROPIC_API_KEY": TEST_API_KEY}
    env.pop("ANTHROPIC_BASE_URL", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "evaluator.py", "-q", "hi", "--base-url", f"http://127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error:") and f"127.0.0.1:{port}" in lines[0], (
        done.stderr
    )
    assert time.monotonic() - started < 60
