"""Servers the evaluator runs in-process (the red team's proxies, its shadow server), served to
another process (a `claude -p` run) over streamable HTTP on loopback, by the `mcp` SDK's own
server transport, for as long as a block lasts.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..run_types import ServerSpec

__all__ = [
    "served_over_http",
]

_LOOPBACK = "127.0.0.1"
_STARTUP_SECONDS = 10.0
_STOP_SECONDS = 5  # a client gone or not, a stream still open is closed after this


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


@asynccontextmanager
async def served_over_http(specs: Sequence[ServerSpec]) -> AsyncIterator[list[ServerSpec]]:
    """Each in-process server (`spec.instance`, an `mcp` low-level Server) at
    http://127.0.0.1:PORT/mcp while the block lasts; yields `http` specs of the same names.
    A server that does not start in time is an OSError (the caller's run fails with it)."""
    servers: list[Any] = []
    tasks: list[asyncio.Task] = []
    reachable: list[ServerSpec] = []
    try:
        for spec in specs:
            listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listening.bind((_LOOPBACK, 0))
            port = listening.getsockname()[1]
            server = _quiet_server(spec.instance.streamable_http_app(host=_LOOPBACK))
            servers.append(server)
            tasks.append(asyncio.create_task(server.serve(sockets=[listening])))
            for _ in range(int(_STARTUP_SECONDS / 0.01)):
                if server.started or tasks[-1].done():
                    break
                await asyncio.sleep(0.01)
            if not server.started:
                raise OSError(f"the in-process server {spec.name} did not start serving")
            reachable.append(
                ServerSpec(name=spec.name, kind="http", url=f"http://{_LOOPBACK}:{port}/mcp")
            )
        yield reachable
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
