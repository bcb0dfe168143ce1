"""The model session: one conversation with Claude through AsyncAnthropic (the only room that
touches `anthropic`, loaded when a run starts), retries and rate limits, the endpoint checks,
and the model client answered from --cache (the folder itself is cache.py).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, cache."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import test_constants as C

from .cache import CACHE_SAMPLE, ResponseCache, ShippedRecording
from .errors import FatalApiError
from .run_types import Usage, cost_usd
from .sinks import cap_text
from .stopping import STOPPED_AT_END

__all__ = [
    "AdaptiveLimiter",
    "AnthropicModel",
    "CachedModel",
    "ModelClient",
    "ModelReply",
    "ModelRequest",
    "api_error_message",
    "api_key_from_env",
    "block_to_dict",
    "check_model_endpoint",
    "connection_failure",
    "endpoint_unreachable",
    "model_api_url",
    "model_client",
    "shown_api_url",
]


@dataclass
class ModelRequest:
    model: str
    system: str
    messages: list[dict]
    tools: list[dict]
    max_tokens: int
    temperature: float | None = None
    tool_choice: dict | None = (
        None  # e.g. {"type": "tool", "name": "grade"}: the judge must answer by that tool
    )


@dataclass
class ModelReply:
    content: list[dict]  # content blocks as plain dicts, ready to send back
    stop_reason: str | None
    usage: Usage
    model: str


class ModelClient(Protocol):
    """The engine's model seam: the Anthropic API in production, a scripted model in unit tests."""

    async def complete(
        self, request: ModelRequest, on_text: Callable[[str], None] | None = None
    ) -> ModelReply: ...


def block_to_dict(block: Any) -> dict:
    """An API content block as the dict to send back in the next request."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    dumped = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    dumped.pop("parsed_output", None)
    return dumped


def api_key_from_env() -> str | None:
    return os.environ.get("ANTHROPIC_API_KEY") or None


class AdaptiveLimiter:
    """A concurrency cap on model calls that halves when the API answers 429 and grows back one
    step per run of successes: a burst of rate limits slows the suite instead of failing it."""

    GROW_AFTER = 8  # successes in a row before one more call may run at once

    def __init__(self, limit: int) -> None:
        self.ceiling = max(1, limit)
        self.limit = self.ceiling
        self.in_flight = 0
        self.paused_until = 0.0
        self._successes = 0
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._changed:
            while True:
                wait = self.paused_until - time.monotonic()
                if wait <= 0 and self.in_flight < self.limit:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), wait if wait > 0 else None)
                except TimeoutError:
                    pass
            self.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    async def rate_limited_for(self, seconds: float) -> None:
        async with self._changed:
            self.limit = max(1, self.limit // 2)
            self._successes = 0
            self.paused_until = max(self.paused_until, time.monotonic() + min(seconds, 60.0))
            self._changed.notify_all()

    async def succeeded(self) -> None:
        if self.limit >= self.ceiling:
            return
        async with self._changed:
            self._successes += 1
            if self._successes >= self.GROW_AFTER:
                self.limit, self._successes = min(self.ceiling, self.limit + 1), 0
                self._changed.notify_all()


def _retry_after_seconds(headers: Any) -> float:
    """The pause a rate-limited answer asks for: `retry-after-ms`, `retry-after`, or the
    `anthropic-ratelimit-*-reset` time; one second when it names none."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name)) * scale)
        except (TypeError, ValueError):
            pass
    for name in ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset"):
        value = headers.get(name)
        if value:
            try:
                reset = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return max(0.0, (reset - datetime.now(UTC)).total_seconds())
            except ValueError:
                pass
    return 1.0


_SPEND_LIMIT = re.compile(r"spend|credit|billing|quota|usage limit", re.IGNORECASE)


def _api_traffic_middleware(limiter: AdaptiveLimiter) -> Callable:
    """SDK middleware, run once per HTTP attempt inside the SDK's own retry loop: it holds a slot
    of the adaptive limiter, feeds it what 429s say, and stops a spend-limit 429 from being
    retried (no retry can fix it, for any case)."""

    async def middleware(request: Any, call_next: Callable) -> Any:
        async with limiter:
            response = await call_next(request)
        if response.status_code == 429:
            body = (await response.http_response.aread()).decode("utf-8", "replace")
            if _SPEND_LIMIT.search(body):
                raise FatalApiError(
                    f"the Anthropic API refused on a spend or usage limit (429): "
                    f"{cap_text(body, 300)}"
                )
            await limiter.rate_limited_for(_retry_after_seconds(response.headers))
        elif response.status_code < 400:
            remaining = response.headers.get("anthropic-ratelimit-requests-remaining")
            if remaining == "0":
                await limiter.rate_limited_for(_retry_after_seconds(response.headers))
            else:
                await limiter.succeeded()
        return response

    return middleware


_DEFAULT_API_URL = "https://api.anthropic.com"  # the SDK's own default when no base URL is given


def model_api_url(base_url: str | None) -> str:
    """The URL the SDK will call, in the SDK's order: the explicit one, $ANTHROPIC_BASE_URL, the
    public API (an empty value counts as unset, as `AnthropicModel` passes it)."""
    return base_url or os.environ.get("ANTHROPIC_BASE_URL") or _DEFAULT_API_URL


def _api_host_port(url: str) -> tuple[str, int] | None:
    """Host and TCP port of an API URL (the port defaults from the scheme); None when malformed,
    which is the SDK's to report."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is not a number or out of range
        return None
    return (parts.hostname, port) if parts.hostname else None


def shown_api_url(url: str) -> str:
    """scheme://host:port/path only: userinfo, query and fragment can hold secrets, so they never
    reach a message."""
    from urllib.parse import urlsplit

    target = _api_host_port(url)
    if target is None:
        return "(malformed URL)"
    host, port = target
    host = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
    parts = urlsplit(url)
    return f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}"


def _behind_proxy(url: str) -> bool:
    """Whether the SDK (httpx trusts the proxy environment) sends this URL through a proxy: then
    the API host need not resolve or answer from here, and dialling it proves nothing."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


def endpoint_unreachable(url: str, reason: str) -> FatalApiError:
    # Through a proxy, the failure is the proxy's: point there rather than at the base URL.
    hint = (
        "the proxy settings (HTTPS_PROXY, HTTP_PROXY)"
        if _behind_proxy(url)
        else "--base-url or ANTHROPIC_BASE_URL"
    )
    return FatalApiError(
        f"cannot reach the model API at {shown_api_url(url)}: {reason} (check {hint})"
    )


def _lookup_failure(exc: BaseException) -> str:
    """The reason to show for a failed host name lookup (`socket.gaierror`)."""
    import socket

    not_found = {
        getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name)
    }
    if getattr(exc, "errno", None) in not_found:
        return "host name not found"
    return f"host name lookup failed ({getattr(exc, 'strerror', None) or exc})"


def _all_refused(addresses: list, timeout: float) -> bool:
    """Whether every resolved address refuses a TCP connection. One that accepts, or one that is
    merely slow or otherwise failing, lets the run go on: the SDK's retries handle those."""
    import socket

    for family, kind, proto, _name, address in addresses:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(timeout)
                sock.connect(address)
            return False
        except ConnectionRefusedError:
            continue
        except OSError:
            return False
    return bool(addresses)


_ENDPOINTS_ANSWERING: set[tuple[str, int]] = set()  # (host, port) checked in this invocation
STOPPED_AT_END.append(_ENDPOINTS_ANSWERING.clear)  # the next invocation checks again


def check_model_endpoint(base_url: str | None, timeout: float = 5.0) -> None:
    """Raise FatalApiError, naming the URL, when the model API's host name does not resolve or its
    port refuses connections: every case would fail the same way, each after the SDK's retries
    with backoff. Blocking (a few socket calls); run it once, before the first model call (an
    endpoint that answered is not checked again in the same invocation)."""
    import socket

    url = model_api_url(base_url)
    target = _api_host_port(url)
    if target is None or target in _ENDPOINTS_ANSWERING or _behind_proxy(url):
        return
    try:
        addresses = socket.getaddrinfo(target[0], target[1], type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise endpoint_unreachable(url, _lookup_failure(exc)) from None
    except (OSError, UnicodeError):  # e.g. a host name IDNA cannot encode: the SDK reports it
        return
    if _all_refused(addresses, timeout):
        raise endpoint_unreachable(url, "connection refused")
    _ENDPOINTS_ANSWERING.add(target)


def _wrapped_error(exc: BaseException) -> BaseException | None:
    """The error one step down a chain: the explicit cause, an error passed as the argument, else
    the implicit context unless suppressed (an unrelated error being handled stays out)."""
    if exc.__cause__ is not None:
        return exc.__cause__
    if exc.args and isinstance(exc.args[0], BaseException):
        return exc.args[0]
    return None if exc.__suppress_context__ else exc.__context__


def connection_failure(exc: BaseException) -> str | None:
    """The dead-endpoint reason behind an SDK `APIConnectionError`, else None (a timeout, a reset).
    The SDK raises it `from` httpx's ConnectError, which holds the socket error as `__cause__`,
    `__context__` or (httpcore's, raised `from None`) its argument; with several addresses anyio
    groups one error per address."""
    import socket

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror):
            return _lookup_failure(current)
        if isinstance(current, BaseExceptionGroup):  # dead only if every address failed alike
            reasons = {connection_failure(member) for member in current.exceptions}
            return reasons.pop() if len(reasons) == 1 else None
        current = _wrapped_error(current)
    return None


def api_error_message(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message = (
        body.get("error", {}).get("message")
        if isinstance(body, dict) and isinstance(body.get("error"), dict)
        else None
    )
    text = message or str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}" + (f" ({status})" if status else "") + f": {text}"


_RETRYABLE_STREAM_ERRORS = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")


class AnthropicModel:
    """Claude through `anthropic.AsyncAnthropic`; the only place that touches the SDK."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = C.DEFAULT_MAX_RETRIES,
        timeout: float = C.DEFAULT_REQUEST_TIMEOUT,
        stream: bool = False,
        concurrency: int = C.MAX_MODEL_CONCURRENCY,
    ) -> None:
        import anthropic

        self._anthropic = anthropic
        self.limiter = AdaptiveLimiter(concurrency)
        self.max_retries = max_retries
        # One client for the whole run: one connection pool, and the SDK's retries on every call.
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key or api_key_from_env(),
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=max_retries,
            timeout=timeout,
            middleware=[_api_traffic_middleware(self.limiter)],
        )
        self.stream = stream
        self._endpoint_check: asyncio.Future | None = None  # the one dead-endpoint check, shared
        self._answered = False  # a call has succeeded: later connection errors are per case

    @staticmethod
    def request_params(request: ModelRequest) -> dict:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:  # --prompt NONE sends none (BFCL's protocol)
            params["system"] = [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ]
        if request.tools:
            params["tools"] = request.tools
        if request.tool_choice:
            params["tool_choice"] = request.tool_choice
        if request.temperature is not None:
            # The 2.x SDK no longer types sampling parameters (newer models fix them); the API
            # still takes `temperature` for models that accept it.
            params["extra_body"] = {"temperature": request.temperature}
        return params

    async def complete(
        self, request: ModelRequest, on_text: Callable[[str], None] | None = None
    ) -> ModelReply:
        params = self.request_params(request)
        await self._check_endpoint_once()
        try:
            if self.stream or on_text:
                message = await self._stream_with_retries(params, on_text)
            else:
                message = await self.client.messages.create(**params)
        except self._anthropic.AuthenticationError as exc:
            raise FatalApiError(
                f"the Anthropic API rejected the API key (401): {api_error_message(exc)}; "
                "check ANTHROPIC_API_KEY"
            ) from None
        except self._anthropic.APIConnectionError as exc:
            # Refused or unresolvable before any answer: the endpoint is dead for every case
            # (the check passed, e.g. through a proxy, or the server died just after it).
            reason = None if self._answered else connection_failure(exc)
            if reason:
                raise endpoint_unreachable(str(self.client.base_url), reason) from None
            raise
        self._answered = True
        return ModelReply(
            [block_to_dict(b) for b in message.content],
            message.stop_reason,
            Usage.from_api(message.usage),
            message.model,
        )

    async def _check_endpoint_once(self) -> None:
        """A dead endpoint fails the first call at once instead of after the SDK's retries with
        backoff. Concurrent first calls share one check (in a thread: it blocks on sockets);
        `shield` keeps one cancelled case from cancelling it for the others. (The pipeline checks
        before its runs start: then there is nothing to wait for here.)"""
        if self._endpoint_check is None:
            self._endpoint_check = asyncio.ensure_future(
                asyncio.sleep(0)
                if _api_host_port(str(self.client.base_url)) in _ENDPOINTS_ANSWERING
                else asyncio.to_thread(check_model_endpoint, str(self.client.base_url))
            )
        await asyncio.shield(self._endpoint_check)

    async def _stream_with_retries(
        self, params: dict, on_text: Callable[[str], None] | None
    ) -> Any:
        """A stream that fails after HTTP 200 (an `overloaded_error` event mid-answer) is outside
        the SDK's retries; it is retried here, and the failed attempt's partial text is dropped."""
        for attempt in range(self.max_retries + 1):
            try:
                async with self.client.messages.stream(**params) as stream:
                    if on_text:
                        async for chunk in stream.text_stream:
                            on_text(chunk)
                    return await stream.get_final_message()
            except self._anthropic.APIStatusError as exc:
                in_stream = exc.status_code == 200
                kind = exc.body.get("error", {}).get("type") if isinstance(exc.body, dict) else None
                if (
                    not in_stream
                    or kind not in _RETRYABLE_STREAM_ERRORS
                    or attempt == self.max_retries
                ):
                    raise
                await asyncio.sleep(min(8.0, 0.5 * 2**attempt))
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.client.close()


# ---------------------------------------------------------------------------- --cache: a model response once per exact request
class CachedModel:
    """A model client answered from --cache when it has the exact request (and sample), else by
    the model, whose answer is kept."""

    def __init__(self, inner: Any, cache: ResponseCache) -> None:
        self.inner, self.cache = inner, cache

    def __getattr__(self, name: str) -> Any:  # client, limiter: the model's own
        return getattr(self.inner, name)

    async def complete(
        self, request: ModelRequest, on_text: Callable[[str], None] | None = None
    ) -> ModelReply:
        key = self.cache.key(AnthropicModel.request_params(request), CACHE_SAMPLE.get())
        found = self.cache.get(key)
        if found is None and isinstance(self.cache, ShippedRecording):
            self.cache.counted(False)
            raise self.cache.missing()
        if found is not None:
            reply = ModelReply(
                found["content"], found["stop_reason"], Usage(**found["usage"]), found["model"]
            )
            self.cache.counted(True, cost_usd(reply.usage, reply.model))
            if on_text:
                on_text(
                    "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
                )
            return reply
        reply = await self.inner.complete(request, on_text)
        self.cache.counted(False)
        self.cache.put(
            key,
            {
                "content": reply.content,
                "stop_reason": reply.stop_reason,
                "usage": asdict(reply.usage),
                "model": reply.model,
            },
        )
        return reply

    async def close(self) -> None:
        await self.inner.close()


def model_client(cache: str | None, **settings: Any) -> AnthropicModel | CachedModel:
    """The Anthropic client a run talks to: through --cache when it names a folder."""
    model = AnthropicModel(**settings)
    return CachedModel(model, ResponseCache.open(cache)) if cache else model
