"""--cache for Claude Code: the local caching proxy `claude` reaches the model through, which
answers a request it has seen from the response cache and forwards (and keeps) the others.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine; claude_code.runs,
claude_code.skills, claude_code.stream, claude_code.binary."""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any

import test_constants as C

from ..run_types import Usage, cost_usd
from .runs import RUN_FOLDER_PREFIX

__all__ = [
    "CachingProxy",
    "claude_request_key",
]

if TYPE_CHECKING:
    from ..cache import ResponseCache


# ---------------------------------------------------------------------------- --cache for Claude Code: a local caching proxy
# `claude` reaches the model through ANTHROPIC_BASE_URL: with --cache it is this proxy on
# 127.0.0.1, at a path naming the run's sample (`/sample/3`), so -i N still draws N answers. A
# POST /v1/messages is answered from the cache when the same request was seen (Claude Code's
# streaming answer is replayed as the SSE stream it was), else forwarded to the real API and kept.
# What differs between two runs of one query is left out of the key: the request's `metadata`
# (a session id) and the run's temporary folder (mkdtemp's 8 random characters in its paths; Claude
# Code writes its `_` as `-` where it names a project folder after the path). So is the date Claude
# Code writes into every request ("Today's date is 2026-11-26.", "The current month is November
# 2026"): with it, a cache filled one day missed every request the next (a nightly CI run's).
_RUN_FOLDER_NAME = re.compile(RUN_FOLDER_PREFIX + r"[a-z0-9_-]{8}")
_CLAUDE_CODE_DATES = (
    (re.compile(r"(Today's date is )\d{4}-\d{2}-\d{2}"), r"\1DATE"),
    (re.compile(r"(The current month is )[A-Z][a-z]+ \d{4}"), r"\1MONTH"),
)
_PROXY_DROPPED_HEADERS = frozenset(
    {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
)


def claude_request_key(path: str, body: bytes, beta: str) -> tuple[Any, str] | None:
    """What names a Claude Code request in the cache (None: not cacheable), and its sample."""
    match = re.fullmatch(r"/sample/(\d+)(/v1/messages)(?:\?.*)?", path)
    if not match:
        return None
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    request.pop("metadata", None)
    normalized = _RUN_FOLDER_NAME.sub(
        RUN_FOLDER_PREFIX + "RUN", json.dumps(request, sort_keys=True)
    )
    for date, placeholder in _CLAUDE_CODE_DATES:
        normalized = date.sub(placeholder, normalized)
    return {"path": match.group(2), "beta": beta, "request": normalized}, match.group(1)


def _stream_usage(body: bytes, content_type: str) -> tuple[Usage, str]:
    """The usage and model of a kept answer (JSON, or an SSE stream's message_start and
    message_delta events): what a hit saved."""
    if "json" in content_type:
        try:
            message = json.loads(body)
            return Usage.from_api(message.get("usage") or {}), str(message.get("model", ""))
        except (ValueError, AttributeError):
            return Usage(), ""
    usage, model = Usage(), ""
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        if event.get("type") == "message_start":
            message = event.get("message") or {}
            usage, model = Usage.from_api(message.get("usage") or {}), str(message.get("model", ""))
        elif event.get("type") == "message_delta" and isinstance(event.get("usage"), dict):
            usage.output_tokens = int(event["usage"].get("output_tokens") or usage.output_tokens)
    return usage, model


class CachingProxy:
    """The local proxy `claude` talks to under --cache (see above); started and stopped by the
    skill runner's session."""

    def __init__(self, cache: ResponseCache, upstream: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        # httpx2: the HTTP client the anthropic and mcp SDKs themselves use (declared beside them)
        import httpx2

        self.cache, self.upstream = cache, upstream.rstrip("/")
        self.client = httpx2.Client(timeout=C.DEFAULT_REQUEST_TIMEOUT)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Without TCP_NODELAY each answer's body (written after its headers) waits for
            # claude's delayed ACK: 40 ms added to every cached or forwarded answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                proxy.handle(self)

            def do_GET(self) -> None:
                proxy.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CachingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()

    def handle(self, handler: Any) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        named = claude_request_key(handler.path, body, handler.headers.get("anthropic-beta", ""))
        key = self.cache.key(named[0], named[1]) if named and handler.command == "POST" else None
        found = self.cache.get(key) if key else None
        if found is not None:
            data = found["body"].encode("utf-8")
            usage, model = _stream_usage(data, found["content_type"])
            self.cache.counted(True, cost_usd(usage, model))
            self.reply(handler, 200, found["content_type"], data)
            return
        path = re.sub(r"^/sample/\d+", "", handler.path)
        headers = {
            k: v for k, v in handler.headers.items() if k.lower() not in _PROXY_DROPPED_HEADERS
        }
        try:
            answer = self.client.request(
                handler.command, self.upstream + path, headers=headers, content=body
            )
        except Exception as exc:  # the API unreachable: claude sees a 502 and reports it
            self.reply(
                handler,
                502,
                "application/json",
                json.dumps(
                    {
                        "type": "error",
                        "error": {"type": "api_error", "message": f"--cache proxy: {exc}"},
                    }
                ).encode(),
            )
            return
        content_type = answer.headers.get("content-type", "application/json")
        if key and answer.status_code == 200:
            self.cache.counted(False)
            self.cache.put(
                key,
                {"content_type": content_type, "body": answer.content.decode("utf-8", "replace")},
            )
        self.reply(handler, answer.status_code, content_type, answer.content)

    @staticmethod
    def reply(handler: Any, status: int, content_type: str, data: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
