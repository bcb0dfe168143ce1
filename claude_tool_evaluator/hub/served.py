"""Servers the evaluator runs in-process (the red team's proxies, its shadow server), served to
another process (a `claude -p` run) over streamable HTTP on loopback, by the `mcp` SDK's own
server transport, for as long as a block lasts. Loopback is every local process's: each block
makes a secret of its own, which the run's Claude Code sends as a bearer token (the `headers`
of its --mcp-config entry); a request without it is answered 401 before the SDK reads it, so no
other process lists the tools, calls a live server through them or adds to the run's records.
The Host must be this server's own address and port, and an Origin (which Claude Code does not
send: a browser does) is refused.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..run_types import ServerSpec

__all__ = [
    "remote_entry",
    "served_over_http",
]

_LOOPBACK = "127.0.0.1"
_STARTUP_SECONDS = 10.0
_STOP_SECONDS = 5  # a client gone or not, a stream still open is closed after this


def _bearer_only(app: Any, token: str) -> Any:
    """`app` behind the run's bearer token: an HTTP request without `Authorization: Bearer
    TOKEN` gets 401 (compared in constant time); lifespan events pass."""
    wanted = f"Bearer {token}".encode("ascii")

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, wanted):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def _served_app(instance: Any, port: int, token: str) -> Any:
    """The server's streamable HTTP app: its own Host only, no Origin, the run's token."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{_LOOPBACK}:{port}"],
        allowed_origins=[],  # Claude Code sends none; a page in a browser does
    )
    app = instance.streamable_http_app(host=_LOOPBACK, transport_security=security)
    return _bearer_only(app, token)


def _quiet_server(app: Any) -> Any:
    """A uvicorn server for one app that leaves the evaluator's signal handlers alone (Ctrl-C
    stays the evaluator's: it stops the run, and the block's exit stops the server)."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer(
        uvicorn.Config(
            app,
            log_level="error",
            lifespan="on",
            access_log=False,
            timeout_graceful_shutdown=_STOP_SECONDS,
        )
    )


def remote_entry(spec: ServerSpec) -> dict[str, Any]:
    """An http or sse server as an entry of Claude Code's --mcp-config, its headers with it (a
    server served here refuses a request without the block's bearer token)."""
    entry: dict[str, Any] = {"type": spec.kind, "url": spec.url}
    if spec.headers:
        entry["headers"] = dict(spec.headers)
    return entry


@asynccontextmanager
async def served_over_http(specs: Sequence[ServerSpec]) -> AsyncIterator[list[ServerSpec]]:
    """Each in-process server (`spec.instance`, an `mcp` low-level Server) at
    http://127.0.0.1:PORT/mcp while the block lasts; yields `http` specs of the same names,
    each with the block's bearer token in its headers (see the module's docstring). A server
    that does not start in time is an OSError (the caller's run fails with it)."""
    token = secrets.token_urlsafe(32)
    servers: list[Any] = []
    tasks: list[asyncio.Task] = []
    reachable: list[ServerSpec] = []
    try:
        for spec in specs:
            listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listening.bind((_LOOPBACK, 0))
            port = listening.getsockname()[1]
            server = _quiet_server(_served_app(spec.instance, port, token))
            servers.append(server)
            tasks.append(asyncio.create_task(server.serve(sockets=[listening])))
            for _ in range(int(_STARTUP_SECONDS / 0.01)):
                if server.started or tasks[-1].done():
                    break
                await asyncio.sleep(0.01)
            if not server.started:
                raise OSError(f"the in-process server {spec.name} did not start serving")
            reachable.append(
                ServerSpec(
                    name=spec.name,
                    kind="http",
                    url=f"http://{_LOOPBACK}:{port}/mcp",
                    headers={"Authorization": f"Bearer {token}"},
                )
            )
        yield reachable
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
