"""--batch: the Message Batches API behind the same model interface, with a ledger that resumes
a batch after Ctrl-C and a cost cap that holds.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import test_constants as C

from .errors import FatalApiError, is_api_error
from .files import json_lines, write_text_atomic
from .run_types import Usage, cost_usd, price_for
from .session import (
    AnthropicModel,
    ModelReply,
    api_error_message,
    block_to_dict,
    connection_failure,
    endpoint_unreachable,
    shown_api_url,
)
from .sinks import json_text

__all__ = [
    "BatchLedger",
    "BatchRun",
    "BatchedModel",
    "RunNotStarted",
]

if TYPE_CHECKING:
    from .session import ModelRequest


class _BatchRequestFailed(Exception):
    """A request of a Message Batch that came back errored, expired or canceled: its run's error."""


class _CostCapReached(Exception):
    """--batch: sending this request in the next round could pass --max-cost, so it is not sent."""


class RunNotStarted(Exception):
    """A run the pipeline counts as not started: no result, nothing journalled, --resume does it
    (--batch stops a conversation whose next request would pass --max-cost)."""


@dataclass
class BatchRun:
    """The run a model request belongs to and how many requests it has made: with the request's
    parameters this names a request the same way in every invocation (its custom_id)."""

    key: str
    calls: int = 0
    capped: bool = False  # a request of it was not sent: --max-cost


_BATCH_RUN: contextvars.ContextVar[BatchRun | None] = contextvars.ContextVar(
    "batch_run", default=None
)


def _batch_params(request: ModelRequest) -> dict:
    """A request's Messages API parameters as a batch entry carries them (no SDK-only keys)."""
    params = AnthropicModel.request_params(request)
    params.update(params.pop("extra_body", None) or {})
    return params


def _batch_identity(run: BatchRun | None, index: int, params: dict) -> str:
    """What names a batch request: its run, its place in that run and its parameters."""
    return json.dumps([run.key if run else None, index, params], sort_keys=True, default=str)


def _batch_custom_id(identity: str) -> str:
    """A request's identity as an id the API takes (^[a-zA-Z0-9_-]{1,64}$): a resumed run that
    replays the same conversation asks for the same ids."""
    return "r" + hashlib.sha256(identity.encode()).hexdigest()[:48]


def _batch_request_name(run: BatchRun | None, index: int, params: dict) -> tuple[str, int]:
    """A request's custom_id, and about the bytes it adds to a batch's body. (Its identity is as
    long as the request: it is not kept while the request waits for its batch.)"""
    identity = _batch_identity(run, index, params)
    return _batch_custom_id(identity), len(identity)


class _BatchBody:
    """A Message Batch's body, encoded one request at a time as it is sent (and once before, for
    its length): never whole in memory. The SDK would copy every request's parameters and encode
    them all at once, and for a round of 1,000 conversations that was the run's memory peak. It
    reads again from the start if the SDK retries the request."""

    def __init__(self, queued: Sequence[_QueuedRequest]) -> None:
        self.queued = queued
        self.length = sum(len(part) for part in self.parts())

    def parts(self) -> Iterator[bytes]:
        yield b'{"requests": ['
        for index, q in enumerate(self.queued):
            entry = {"custom_id": q.custom_id, "params": q.params}
            yield (b", " if index else b"") + json_text(entry, indent=None).encode()
        yield b"]}"

    async def chunks(self) -> Any:
        for part in self.parts():
            yield part

    def __aiter__(self) -> Any:
        return self.chunks()


def _worst_case_cost(params: dict) -> float:
    """The most one batch request can cost (--max-cost): a generous token count of everything it
    sends, all priced as cache writes, and every output token it allows."""
    price, _ = price_for(params["model"])
    prompt = len(json.dumps({k: v for k, v in params.items() if k != "max_tokens"})) // 3 + 1
    return (
        (
            prompt * max(price["input"], price["cache_write"])
            + params["max_tokens"] * price["output"]
        )
        / 1_000_000
        * C.BATCH_PRICE_FACTOR
    )


def _batch_failure(result: Any, batch_id: str) -> str:
    """Why a batch request has no answer, from its result entry."""
    kind = getattr(result, "type", None)
    if kind == "errored":
        error = getattr(getattr(result, "error", None), "error", None)
        return (
            f"the request errored in batch {batch_id}: {getattr(error, 'type', 'error')}: "
            f"{getattr(error, 'message', '') or 'no message'}"
        )
    if kind == "expired":
        return f"the request expired in batch {batch_id} before it was processed (a batch has 24 hours)"
    if kind == "canceled":
        return f"the request was canceled in batch {batch_id}"
    return f"batch {batch_id} returned no result for the request"


class BatchLedger:
    """-o FILE.batches.jsonl: every Message Batch of the run with the custom_ids it carries,
    rewritten atomically as soon as a batch exists. --resume takes the answers of a batch that
    was already paid for (still processing or ended) instead of sending its requests again; the
    pipeline removes the file once every run is done."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: list[dict] = self.read(path) if path and path.exists() else []
        self.earlier = {cid: entry["batch"] for entry in self.entries for cid in entry["requests"]}

    def read(self, path: Path) -> list[dict]:
        return [
            entry
            for entry in json_lines(path)
            if isinstance(entry, dict)
            and isinstance(entry.get("batch"), str)
            and isinstance(entry.get("requests"), list)
        ]

    def add(self, batch_id: str, custom_ids: list[str]) -> None:
        self.entries.append(
            {
                "batch": batch_id,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "requests": custom_ids,
            }
        )
        if self.path:
            write_text_atomic(
                self.path, "".join(json_text(entry, indent=None) + "\n" for entry in self.entries)
            )

    def requests_in(self, batch_id: str) -> int:
        return sum(len(e["requests"]) for e in self.entries if e["batch"] == batch_id)


@dataclass
class _QueuedRequest:
    custom_id: str
    params: dict
    answer: asyncio.Future
    run: BatchRun | None
    size: int = 0  # about the bytes it adds to a batch's body
    reserved: float = 0.0  # its worst-case cost, held against --max-cost while it is in a batch


class BatchedModel:
    """--batch: the engine's model seam over the Message Batches API (half price, asynchronous).
    `complete` queues the request and waits for its answer; a collector sends what is queued as
    one batch once every live conversation waits for Claude (or no new request came for
    BATCH_SETTLE_SECONDS), polls it with backoff, and answers each request from the batch's
    results. Tool calls run locally between rounds, exactly as with direct calls. Each batch goes
    into the ledger as soon as it exists; a resumed run that asks the same requests again gets
    the earlier batch's answers. Errored, expired or canceled requests are their run's error."""

    def __init__(
        self,
        direct: AnthropicModel,
        ledger: BatchLedger,
        max_cost: float | None = None,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.direct, self.client, self.ledger = direct, direct.client, ledger
        self.max_cost, self.say = max_cost, say
        self.live = 0  # conversations under way
        self.waiting = 0  # requests in a batch (this run's or an earlier one's)
        self.reading = 0  # batches whose results are being read: the next round waits for them
        self.queue: list[_QueuedRequest] = []
        self.spent = 0.0  # what this invocation's batches cost (batch price)
        self.committed = 0.0  # worst case of the requests in batches not yet ended
        self.batches = 0  # batches this invocation created
        self.reused = 0  # answers taken from an earlier run's batches
        self.in_flight: set[str] = set()
        self.last_queued = 0.0
        self._wake = asyncio.Event()
        self._collector: asyncio.Task | None = None
        self._sending: set[asyncio.Task] = set()
        self._earlier: dict[str, asyncio.Future] = {}

    @contextlib.contextmanager
    def conversation(self, key: tuple) -> Iterator[BatchRun]:
        """Around one run (its conversation and its judge): its requests are named after it, and
        the collector knows how many conversations a round waits for."""
        run = BatchRun(json.dumps(key, default=str))
        token = _BATCH_RUN.set(run)
        self.live += 1
        try:
            yield run
        finally:
            self.live -= 1
            _BATCH_RUN.reset(token)
            self._wake.set()

    async def complete(
        self, request: ModelRequest, on_text: Callable[[str], None] | None = None
    ) -> ModelReply:
        params = _batch_params(request)
        run = _BATCH_RUN.get()
        index = run.calls if run else 0
        if run:
            run.calls += 1
        custom_id, size = _batch_request_name(run, index, params)
        earlier = self.ledger.earlier.get(custom_id)
        if earlier:
            result = await self.earlier_result(earlier, custom_id)
            if getattr(result, "type", None) == "succeeded":
                self.reused += 1
                return self.reply_of(result.message)
        answer = asyncio.get_running_loop().create_future()
        self.queue.append(_QueuedRequest(custom_id, params, answer, run, size))
        self.last_queued = time.monotonic()
        if self._collector is None or self._collector.done():
            self._collector = asyncio.ensure_future(self.collect())
        self._wake.set()
        return await answer

    @staticmethod
    def reply_of(message: Any) -> ModelReply:
        return ModelReply(
            [block_to_dict(b) for b in message.content],
            message.stop_reason,
            Usage.from_api(message.usage),
            message.model,
        )

    # -- rounds
    async def collect(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.queue and (len(self.queue) + self.waiting < self.live or self.reading):
                # the settle time counts from the last request queued or result read
                idle = time.monotonic() - self.last_queued
                if idle >= C.BATCH_SETTLE_SECONDS and not self.reading:
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(
                        self._wake.wait(), max(0.05, C.BATCH_SETTLE_SECONDS - idle)
                    )
                self._wake.clear()
            taken, size = 0, 0
            for q in self.queue[
                : C.BATCH_MAX_REQUESTS
            ]:  # one batch holds so many requests, so many bytes
                if taken and size + q.size > C.BATCH_MAX_BYTES:
                    break
                taken, size = taken + 1, size + q.size
            round_ = [q for q in self.queue[:taken] if not q.answer.done()]
            del self.queue[:taken]
            if self.queue:
                self._wake.set()  # more than one batch holds: the rest goes next
            round_ = self.within_budget(round_)
            if round_:
                self.waiting += len(round_)
                task = asyncio.ensure_future(self.send(round_))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    def within_budget(self, round_: list[_QueuedRequest]) -> list[_QueuedRequest]:
        """--max-cost: a request goes out only if, at its worst, it still fits what is left after
        what was spent and what the batches under way may cost; the others end their runs."""
        if self.max_cost is None:
            return round_
        left, sent, stopped = self.max_cost - self.spent - self.committed, [], 0
        for q in round_:
            q.reserved = _worst_case_cost(q.params)
            if q.reserved <= left:
                left -= q.reserved
                sent.append(q)
                continue
            stopped += 1
            if q.run:
                q.run.capped = True
            q.answer.set_exception(
                _CostCapReached(f"not sent: it could pass --max-cost ${self.max_cost:g}")
            )
        if stopped:
            self.say(
                f"--max-cost ${self.max_cost:g}: {stopped} request(s) of this round not sent "
                f"(spent ${self.spent:.4f}, at most ${self.committed:.4f} more under way)"
            )
        return sent

    async def send(self, queued: list[_QueuedRequest]) -> None:
        """One round as one batch; each request's answer goes to its conversation as its result
        is read, and the next round forms as they come back."""
        pending = {q.custom_id: q for q in queued}  # not answered yet
        self.committed += sum(q.reserved for q in queued)
        batch_id, failure = "", None
        try:
            await self.direct._check_endpoint_once()
            body = _BatchBody(queued)
            batch = await self.api(
                self.client.post(
                    "/v1/messages/batches",
                    content=body,
                    cast_to=self.direct._anthropic.types.messages.MessageBatch,
                    options={
                        "headers": {
                            "content-type": "application/json",
                            "content-length": str(body.length),
                        }
                    },
                ),
                creating=True,
            )
            batch_id = batch.id
            self.ledger.add(batch.id, [q.custom_id for q in queued])
            self.batches += 1
            self.in_flight.add(batch.id)
            await self.results_of(
                batch.id,
                len(queued),
                f"batch {self.batches}",
                C.BATCH_POLL_FIRST_SECONDS,
                lambda custom_id, result: self.answer(
                    pending.pop(custom_id, None), result, batch_id
                ),
            )
            self.in_flight.discard(batch.id)
        except asyncio.CancelledError:
            for q in pending.values():
                q.answer.cancel()
            raise
        except Exception as exc:
            failure = exc
        finally:
            for q in pending.values():  # no result came back for these, or the batch failed
                self.committed -= q.reserved
                self.waiting -= 1
            self._wake.set()
        for q in pending.values():
            if failure is None:
                self.settle(q, None, batch_id)
            elif not q.answer.done():
                q.answer.set_exception(failure)

    def answer(self, q: _QueuedRequest | None, result: Any, batch_id: str) -> None:
        """A request's result, read from its batch: it no longer waits, nor holds its worst case
        against --max-cost (what it cost is spent now)."""
        if q is None:
            return
        self.committed -= q.reserved
        self.waiting -= 1
        self.settle(q, result, batch_id)
        self._wake.set()

    def settle(self, q: _QueuedRequest | None, result: Any, batch_id: str) -> None:
        if q is None or q.answer.done():
            return
        if getattr(result, "type", None) == "succeeded":
            reply = self.reply_of(result.message)
            self.spent += cost_usd(reply.usage, reply.model) * C.BATCH_PRICE_FACTOR
            q.answer.set_result(reply)
        else:
            q.answer.set_exception(_BatchRequestFailed(_batch_failure(result, batch_id)))

    async def results_of(
        self,
        batch_id: str,
        total: int,
        label: str,
        first_wait: float = 0.0,
        each: Callable[[str, Any], None] | None = None,
    ) -> dict[str, Any]:
        """Polls a batch with backoff until it has ended, then reads its results (JSONL): into a
        dict by custom_id, or, with `each`, handed on one by one as they are read (a round's
        conversations go on as their answers come, and no round's results are held whole)."""
        delay, started = first_wait, time.monotonic()
        while True:
            if delay:
                await asyncio.sleep(delay)
            batch = await self.api(self.client.messages.batches.retrieve(batch_id))
            counts = batch.request_counts
            if batch.processing_status == "ended":
                self.say(
                    f"{label} ({batch_id}): ended after {time.monotonic() - started:.0f}s: "
                    f"{counts.succeeded:,} succeeded, {counts.errored:,} errored, {counts.expired:,} expired, "
                    f"{counts.canceled:,} canceled"
                )
                break
            self.say(
                f"{label} ({batch_id}): {batch.processing_status}, {counts.processing:,} of {total:,} "
                f"request(s) processing · {time.monotonic() - started:.0f}s"
            )
            delay = min(
                max(delay, C.BATCH_POLL_FIRST_SECONDS) * C.BATCH_POLL_GROWTH,
                C.BATCH_POLL_MAX_SECONDS,
            )
        results: dict[str, Any] = {}
        self.reading += each is not None
        try:
            async for item in await self.api(self.client.messages.batches.results(batch_id)):
                if each is not None:
                    each(item.custom_id, item.result)
                else:
                    results[item.custom_id] = item.result
        finally:
            self.reading -= each is not None
            self.last_queued = time.monotonic()
            self._wake.set()
        return results

    async def earlier_result(self, batch_id: str, custom_id: str) -> Any:
        """The result of `custom_id` in a batch an earlier run of this output created: that batch
        is polled (if still processing) and read once, however many requests it answers."""
        if batch_id not in self._earlier:
            self._earlier[batch_id] = asyncio.ensure_future(self.reattach(batch_id))
        self.waiting += 1
        try:
            results = await asyncio.shield(self._earlier[batch_id])
        finally:
            self.waiting -= 1
            self._wake.set()
        return results.pop(custom_id, None)

    async def reattach(self, batch_id: str) -> dict[str, Any]:
        self.say(
            f"reattaching to {batch_id} of the earlier run ({self.ledger.requests_in(batch_id):,} request(s))"
        )
        try:
            return await self.results_of(
                batch_id, self.ledger.requests_in(batch_id), "earlier batch"
            )
        except FatalApiError:
            raise
        except Exception as exc:
            self.say(
                f"cannot read {batch_id} ({api_error_message(exc) if is_api_error(exc) else exc}): "
                "its requests are sent again"
            )
            return {}

    async def api(self, call: Any, creating: bool = False) -> Any:
        """An SDK call of the Batches API; a rejected key, or no batch endpoint at all, stops the run."""
        anthropic = self.direct._anthropic
        try:
            return await call
        except anthropic.AuthenticationError as exc:
            raise FatalApiError(
                f"the Anthropic API rejected the API key (401): {api_error_message(exc)}; "
                "check ANTHROPIC_API_KEY"
            ) from None
        except anthropic.NotFoundError as exc:
            if not creating:
                raise
            raise FatalApiError(
                f"the model API at {shown_api_url(str(self.client.base_url))} has no Message Batches "
                f"endpoint: {api_error_message(exc)}; run without --batch"
            ) from None
        except anthropic.APIConnectionError as exc:
            reason = connection_failure(exc)
            if reason:
                raise endpoint_unreachable(str(self.client.base_url), reason) from None
            raise

    async def close(self) -> None:
        tasks = [
            t for t in (self._collector, *self._sending, *self._earlier.values()) if t is not None
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.reused:
            self.say(
                f"{self.reused:,} answer(s) taken from the earlier run's batches, not paid for again"
            )
        if self.in_flight:
            self.say(
                f"{len(self.in_flight)} batch(es) still processing at the API ({', '.join(sorted(self.in_flight))})"
                + (
                    ": rerun with --resume to take their answers without paying again"
                    if self.ledger.path
                    else " (without -o, nothing keeps them for a rerun)"
                )
            )
        await self.direct.close()
