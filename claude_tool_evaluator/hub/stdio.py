"""MCP connections: stdio servers started early and stopped at once, streamable HTTP and SSE, a
server's stdout noise told apart from ours, and the ServerConnection every call goes through.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, the hub rooms above it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import click

import test_constants as C

from ..errors import InputError, ServerError
from ..sinks import tail, terminal_text
from ..stopping import STOPPED_AT_END
from .processes import dying_with_parent, fastmcp_hint, kill_process_group, load_server_object

__all__ = [
    "ServerConnection",
    "ServersStdout",
    "explain_exception",
    "list_all_tools",
    "serving",
    "start_stdio_servers",
]

if TYPE_CHECKING:
    from ..run_types import ServerSpec


# The server connection whose task (and the tasks and worker threads it starts) is running: its
# stdout noise and, for an in-process server, its prints are told apart from ours by it.
_SERVING: contextvars.ContextVar[ServerConnection | None] = contextvars.ContextVar(
    "serving", default=None
)


_STDOUT_NOISE_TOLD: dict[int, ServerSpec] = {}  # id -> spec of the servers already warned about


class ServersStdout:
    """sys.stdout while in-process servers run: what their code prints (on import, in their
    tasks and worker threads) goes to stderr, so --json stdout stays one JSON document; every
    other write goes where it went."""

    def __init__(self, stdout: Any) -> None:
        self.stdout, self.users = stdout, 0

    def target(self) -> Any:
        connection = _SERVING.get()
        return (
            sys.stderr
            if connection is not None and connection.spec.kind == "module"
            else self.stdout
        )

    def write(self, text: str) -> int:
        return self.target().write(text)

    def flush(self) -> None:
        self.target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stdout, name)


async def serving(connection: ServerConnection, call: Any) -> Any:
    """Awaits a call to a server in a context that names it (wait_for runs this in a task of its
    own, so the caller's context is untouched): the SDK runs an in-process server's handlers in
    the context of the request's sender, so its prints are told apart by this."""
    _SERVING.set(connection)
    return await call


@contextlib.contextmanager
def _servers_stdout_to_stderr() -> Any:
    proxy = sys.stdout if isinstance(sys.stdout, ServersStdout) else ServersStdout(sys.stdout)
    sys.stdout = proxy
    proxy.users += 1
    try:
        yield
    finally:
        proxy.users -= 1
        if not proxy.users and sys.stdout is proxy:
            sys.stdout = proxy.stdout


def _tell_stdout_noise() -> None:
    """A server (the one SERVING names) wrote a stdout line that is no MCP message: one warning,
    the first time."""
    connection = _SERVING.get()
    if connection is not None and id(connection.spec) not in _STDOUT_NOISE_TOLD:
        _STDOUT_NOISE_TOLD[id(connection.spec)] = connection.spec
        click.echo(
            f"warning: MCP server '{terminal_text(connection.spec.name)}' writes lines to stdout that are "
            "not MCP messages; they are ignored (a server should log to stderr)",
            err=True,
        )


class _StdoutNoiseFilter(logging.Filter):
    """The SDK logs a traceback for every stdout line of a server that is not an MCP message
    (164 lines for 15 of them): one warning line per server instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith("Failed to parse JSONRPC message"):
            return True
        _tell_stdout_noise()
        return False


@functools.cache
def _filter_stdout_noise() -> None:
    logging.getLogger("mcp.client.stdio").addFilter(_StdoutNoiseFilter())


def _http_transport(url: str, headers: dict[str, str]) -> Any:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if not headers:
        return streamable_http_client(url)

    @asynccontextmanager
    async def transport():  # the client owns its HTTP connection pool, so it must close it
        async with create_mcp_http_client(headers=headers) as http_client:
            async with streamable_http_client(url, http_client=http_client) as streams:
                yield streams

    return transport()


def _sse_transport(url: str, headers: dict[str, str]) -> Any:
    """The legacy HTTP+SSE transport (`"type": "sse"`, `--transport sse`), through the SDK's client."""
    from mcp.client.sse import sse_client

    return sse_client(url, headers=headers or None)


def explain_exception(exc: BaseException | None) -> str:
    """A readable reason from an exception, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "failed"
    if isinstance(exc, FileNotFoundError):
        return f"could not start: command not found ({exc.filename or exc})"
    text = str(exc) or exc.__class__.__name__
    return (
        f"failed: {exc.__class__.__name__}: {text}"
        if text != exc.__class__.__name__
        else f"failed: {text}"
    )


# ---------------------------------------------------------------------------- stdio servers: started early, stopped at once
# What a stdio server inherits of this environment besides its own `env`: what the SDK's stdio
# client passes (mcp.client.stdio.get_default_environment), so a server sees the same either way.
_STDIO_INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def _stdio_environment(extra: Mapping[str, str]) -> dict[str, str]:
    inherited = {
        key: value
        for key in _STDIO_INHERITED_ENV
        if (value := os.environ.get(key)) is not None and not value.startswith("()")
    }
    return {**inherited, **extra}


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a member we may not signal (or an unreaped zombie): not proof it is gone
    return True


def _stdio_message(line: bytes) -> Any:
    """One stdout line of a server as the MCP session takes it: a message, or the error of a line
    that is none (the session skips it; the user is told once)."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        _tell_stdout_noise()
        return exc


# Stdio servers started before the hub asked for them, by what starts them (command, arguments,
# environment, folder): the first connection to such a server takes its process. Every one this
# invocation started, for its end.
_EARLY_SERVERS: dict[tuple, _StdioServer] = {}


_STDIO_SERVERS: list[_StdioServer] = []


class _StdioServer:
    """A stdio MCP server's process, started by the evaluator rather than by the SDK, so it can
    start as soon as the command line is read (start_stdio_servers: its start-up then overlaps
    the suite's loading and the SDK imports) and stop in milliseconds: stdin closed, `grace`
    (--stop-grace) to exit on its own, then its process group terminated (SIGTERM, then SIGKILL
    for what is left after C.SERVER_TERM_WAIT). It leads a process group of its own and dies with
    the evaluator (dying_with_parent). The MCP session talks to it through `transport()`, as it
    would through the SDK's stdio client."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.grace = C.DEFAULT_STOP_GRACE
        self.stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.process: subprocess.Popen | None = None
        self.failure: BaseException | None = None  # why it did not start: raised on connect
        self.reading: asyncio.ReadTransport | None = None  # the loop's reader of its stdout
        command, args = dying_with_parent(spec.command, spec.args, spec.env, spec.cwd)
        try:
            self.process = subprocess.Popen(
                [command, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.stderr,
                env=_stdio_environment(spec.env),
                cwd=spec.cwd,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            self.failure = exc
        _STDIO_SERVERS.append(self)

    @asynccontextmanager
    async def transport(self) -> Any:
        """(read stream, write stream) of MCP messages over the process's pipes."""
        import anyio

        if self.process is None or self.process.stdin is None or self.process.stdout is None:
            raise self.failure or ServerError(f"MCP server '{self.spec.name}' did not start")
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        self.reading, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self.process.stdout
        )
        pipe, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, self.process.stdin
        )
        stdin = asyncio.StreamWriter(pipe, protocol, None, loop)
        incoming_sender, incoming = anyio.create_memory_object_stream[Any](0)
        outgoing, outgoing_receiver = anyio.create_memory_object_stream[Any](0)

        async def read_stdout() -> None:
            rest = b""
            async with incoming_sender:
                while chunk := await reader.read(1 << 16):
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()
                    for line in lines:
                        if line.strip():
                            await incoming_sender.send(_stdio_message(line))

        async def write_stdin() -> None:
            try:
                async with outgoing_receiver:
                    async for message in outgoing_receiver:
                        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        stdin.write(text.encode() + b"\n")
                        await stdin.drain()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await incoming_sender.aclose()  # the server is gone: the session sees the end

        tasks = [asyncio.ensure_future(read_stdout()), asyncio.ensure_future(write_stdin())]
        try:
            yield incoming, outgoing
        finally:
            for task in tasks:
                task.cancel()
            pipe.close()  # the server's stdin ends: its cue to exit
            await self.stop()  # cut short (Ctrl-C), the invocation's end kills what is left
            await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        """`grace` to exit on its own after stdin closed, then the group goes (all of it, also
        when the leader exited and left children behind)."""
        process = self.process
        if process is None:
            return
        deadline = time.monotonic() + self.grace
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        for signum, wait in ((signal.SIGTERM, C.SERVER_TERM_WAIT), (signal.SIGKILL, 1.0)):
            process.poll()  # a leader that exited is reaped: it no longer keeps the group alive
            if not _group_alive(process.pid):
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signum)
            deadline = time.monotonic() + wait
            while _group_alive(process.pid) and time.monotonic() < deadline:
                process.poll()
                await asyncio.sleep(0.005)
        if self.reading is not None:
            # the loop stops watching stdout before its file closes: a watched descriptor that
            # closed under the loop ("Fatal read error on pipe transport", EBADF, a traceback on
            # stderr) or was reused would be read
            self.reading.close()
        self.close_pipes()

    def close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout) if self.process else ():
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()

    def kill(self) -> None:
        """The group goes at once (the invocation ends: nothing of it may outlive it)."""
        if self.process is not None:
            if self.process.poll() is None or _group_alive(self.process.pid):
                kill_process_group(self.process.pid)
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self.process.wait(timeout=1.0)
            self.close_pipes()
        self.stderr.close()


def _stdio_key(spec: ServerSpec) -> tuple:
    return spec.command, tuple(spec.args), tuple(sorted(spec.env.items())), spec.cwd


def start_stdio_servers(specs: Iterable[ServerSpec]) -> None:
    """Starts the stdio servers now (POSIX: where the evaluator starts them itself)."""
    if os.name != "posix":
        return
    for spec in specs:
        if spec.kind == "stdio" and _stdio_key(spec) not in _EARLY_SERVERS:
            _EARLY_SERVERS[_stdio_key(spec)] = _StdioServer(spec)


def _stdio_server(spec: ServerSpec) -> _StdioServer:
    """The server's process: the one started early, else one started now."""
    return _EARLY_SERVERS.pop(_stdio_key(spec), None) or _StdioServer(spec)


def _stop_stdio_servers() -> None:
    """The end of an invocation: servers no connection took, or whose stop was cut short, go at
    once (their process groups killed)."""
    _EARLY_SERVERS.clear()
    while _STDIO_SERVERS:
        _STDIO_SERVERS.pop().kill()


# whatever ended the invocation, no server outlives it
STOPPED_AT_END.append(_stop_stdio_servers)


class ServerConnection:
    """One live MCP client session. It runs in a task of its own so the SDK's task groups and
    cancel scopes stay in the task that opened them, whichever task calls tools."""

    def __init__(
        self, spec: ServerSpec, connect_timeout: float, stop_grace: float = C.DEFAULT_STOP_GRACE
    ) -> None:
        self.spec = spec
        self.connect_timeout = connect_timeout
        self.client: Any = None
        self.stdio: _StdioServer | None = None  # a stdio server's process (POSIX)
        if spec.kind == "stdio" and os.name == "posix":
            self.stdio = _stdio_server(spec)
            self.stdio.grace = stop_grace
            self._stderr = self.stdio.stderr
        else:
            self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task | None = None

    def stderr_tail(self) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            return tail(self._stderr.read())
        except (OSError, ValueError):
            return ""

    def _client(self) -> Any:
        from mcp import Client, StdioServerParameters, stdio_client

        spec = self.spec
        if self.stdio is not None:
            return Client(self.stdio.transport(), read_timeout_seconds=None)
        if spec.kind == "stdio":
            command, args = dying_with_parent(spec.command, spec.args, spec.env, spec.cwd)
            params = StdioServerParameters(
                command=command, args=args, env=spec.env or None, cwd=spec.cwd
            )
            return Client(stdio_client(params, errlog=self._stderr), read_timeout_seconds=None)
        if spec.kind == "http":
            return Client(_http_transport(spec.url, spec.headers))
        if spec.kind == "sse":
            return Client(_sse_transport(spec.url, spec.headers))
        return Client(spec.instance if spec.instance is not None else load_server_object(spec))

    async def _serve(self) -> None:
        _SERVING.set(self)  # this task's context, inherited by every task and thread it starts
        _filter_stdout_noise()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.spec.kind == "module":
                    stack.enter_context(_servers_stdout_to_stderr())
                client = await stack.enter_async_context(self._client())
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # the opener re-raises it as a ServerError
            self._error = exc
            self._ready.set()
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self.client = None

    async def open(self) -> None:
        self._task = asyncio.create_task(self._serve(), name=f"mcp-{self.spec.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), self.connect_timeout)
        except TimeoutError:
            message = self.describe_failure(
                f"did not finish its MCP handshake within {self.connect_timeout:g}s"
            )
            await self.close(grace=0)  # nothing to wind down gracefully: the time promised is up
            raise ServerError(message) from None
        except asyncio.CancelledError:  # stopped mid-handshake: nothing to wind down either
            await asyncio.shield(self.close(grace=0))
            raise
        if isinstance(self._error, (InputError, ServerError)):  # already says what went wrong
            error, self._error = self._error, None
            await self.close()
            raise error
        if self._error is not None or self.client is None:
            await asyncio.sleep(0.05)  # let a dying process finish writing its stderr
            message = self.describe_failure(explain_exception(self._error))
            await self.close()
            raise ServerError(message)

    def describe_failure(self, what: str) -> str:
        spec = self.spec
        target = {
            "stdio": " ".join([spec.command, *spec.args]),
            "http": spec.url,
            "sse": spec.url,
            "module": spec.module,
        }[spec.kind]
        message = f"MCP server '{spec.name}' ({target}) {what}" + fastmcp_hint(self.stderr_tail())
        stderr = self.stderr_tail()
        return message + (f"; its stderr ends with: {stderr}" if stderr else "")

    async def close(self, grace: float = 10) -> None:
        self._stop.set()
        if self._task:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            except (TimeoutError, Exception):
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._stderr.close()


async def list_all_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(1000):  # a server that keeps handing out cursors must not loop us forever
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
