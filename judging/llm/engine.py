"""The judging engine: many judge calls in flight per worker process, on one asyncio loop.

Pure module (no Django). A judge call spends nearly all of its life waiting for the provider
(one to twenty seconds for a long FLASK review), so a worker that holds a thread or a process
per call makes `workers / latency` calls per second whatever the provider allows. Here every
worker process runs one event loop in a daemon thread (started on first use, again after a
fork) with one pooled `AsyncOpenAICompatibleClient` per kind of provider; Celery task threads
hand it batches of calls (`Engine.submit`) and read the outcomes back from a thread-safe
queue (`Batch.take`), writing them to the database in batches themselves. The loop never
touches the database.

How many calls are in flight: each call passes, in order,
1. the batch's **credit** (its run's budget left, less the estimated cost of its calls in
   flight or not yet written; none without a budget),
2. the **rate limiter** of its provider and key (requests and tokens per minute, shared
   through Redis by every worker, or kept in this process without Redis), paced by one
   waiter per limiter and process, so waiting calls cost no Redis round trips,
3. for a provider with no declared limits only, its **window**: no limit until the
   provider answers 429; then it halves (at most once per measured latency) and grows back
   by one per window of successes (additive increase, multiplicative decrease), so a
   provider whose limits nobody declared settles where it stops refusing. Where limits are
   declared, the limiter paces and a 429 penalises it instead: a window would also count
   hung calls against the rate, and let a few 429s starve a paced run,
4. the process's **slots** (`max_in_flight`, also the connection pool's size).
With a rate limit R, calls leave at R and each stays one latency L on the wire, so the
engine keeps R x L in flight (Little's law), whatever L is, up to the slots. Without one,
all the batches' calls go (up to the window and the slots).

Retryable errors are retried inside the engine after the server's Retry-After or a jittered
exponential backoff, up to the call's `max_attempts`; a 429 also penalises the limiter (every
worker on that key waits) and shrinks the window. Every call is bounded by its request's
timeout (connect, read and total), so a hung connection holds one slot, never a thread.
`Batch.stop` ends a batch within seconds: nothing more is launched, waits and retries end at
once, calls on the wire get `grace` seconds; what did not finish is `Batch.unfinished`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis.asyncio as redis_async
from redis.exceptions import RedisError

from judging.llm.clients import AsyncOpenAICompatibleClient, ChatRequest, ChatResult, JudgeError
from judging.llm.ratelimit import AsyncRateLimiter, LocalRateLimiter, RateLimiter

logger = logging.getLogger(__name__)

__all__ = ["Batch", "Call", "Engine", "LimitSpec", "Outcome", "backoff"]

#: Connections per httpx pool; the engine keeps max_in_flight / POOL_SHARD pools per kind.
POOL_SHARD = 32


@dataclass(frozen=True)
class Call:
    """One judge call. `key` is the caller's name for it (returned with its outcome);
    `tokens` the estimate the token bucket is charged before the call (corrected after);
    `cost` the estimated cost charged against the batch's credit while it is in flight."""

    key: Hashable
    request: ChatRequest  # with the API key
    tokens: int = 1
    max_attempts: int = 1
    cost: float = 0.0
    local: bool = False  # a provider a site admin marked local: the unguarded client


@dataclass(frozen=True)
class Outcome:
    """How a call ended: `result` (an answer) or `error` (the last attempt's error)."""

    key: Hashable
    result: ChatResult | None
    error: JudgeError | None
    attempts: int
    cost: float = 0.0  # the estimate reserved for it, released when the caller writes it


@dataclass(frozen=True)
class LimitSpec:
    """A provider's shared limits: the limiter `name` (provider and key fingerprint), its
    requests and tokens per minute, burst, and the Redis that shares it (None: this process
    alone keeps it)."""

    name: str
    rpm: int | None
    tpm: int | None
    burst: float | None = None
    redis_url: str | None = None


class Limiter(Protocol):
    async def try_acquire(self, tokens: int = 1) -> float: ...
    async def penalize(self, seconds: float) -> None: ...
    async def adjust(self, delta_tokens: int) -> None: ...


def backoff(attempt: int, base: float, cap: float) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(cap, base * 2**attempt))


async def _sleep_unless(event: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds`, or less if `event` is set first; whether it was set."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout=max(0.0, seconds))
    except TimeoutError:
        return False
    return True


class _Pacer:
    """One waiter per limiter and process polls the limiter; the others queue behind it."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self.lock = asyncio.Lock()

    async def acquire(self, tokens: int, stopping: asyncio.Event) -> bool:
        if not await self._lock(stopping):
            return False
        try:
            while not stopping.is_set():
                wait = await self.limiter.try_acquire(tokens)
                if wait <= 0:
                    return True
                if await _sleep_unless(stopping, wait + random.uniform(0, 0.02)):
                    break
            return False
        finally:
            self.lock.release()

    async def _lock(self, stopping: asyncio.Event) -> bool:
        """Take the turn, unless the batch stops first (a stopped batch's calls leave the
        queue at once instead of waiting for the calls ahead of them to be granted)."""
        if not self.lock.locked():
            await self.lock.acquire()
            return True
        turn = asyncio.ensure_future(self.lock.acquire())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({turn, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the call is abandoned: give up the turn too
            if turn.done() and not turn.cancelled():
                self.lock.release()
            else:
                turn.cancel()
            raise
        finally:
            stop.cancel()
        if turn.done() and not turn.cancelled():
            if stopping.is_set():
                self.lock.release()
                return False
            return True
        turn.cancel()
        try:
            await turn
        except asyncio.CancelledError:
            return False
        self.lock.release()  # granted just before the cancel took effect
        return False


class _Window:
    """A provider's concurrency window (AIMD on 429s, with a latency-long cooldown). Waiters
    queue in order on futures: nothing polls."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.size = float(cap)
        self.in_flight = 0
        self.latency = 1.0  # EWMA of successful calls' latency, seconds
        self._cut_at = 0.0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _room(self) -> bool:
        return self.in_flight < max(1, int(self.size))

    async def enter(self, stopping: asyncio.Event) -> bool:
        while not self._room() or self._waiters:
            if stopping.is_set():
                return False
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()
            if self._room():
                break
        if stopping.is_set():
            self.wake(1)  # pass the turn on
            return False
        self.in_flight += 1
        return True

    def wake(self, n: int) -> None:
        while n > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    def leave(self, *, latency: float | None, throttled: bool) -> None:
        self.in_flight -= 1
        now = time.monotonic()
        if throttled:
            if now - self._cut_at > self.latency:
                self.size = max(1.0, min(self.size, self.in_flight + 1) / 2)
                self._cut_at = now
                logger.info("provider throttled: window %d", int(self.size))
        elif latency is not None:
            self.latency = 0.8 * self.latency + 0.2 * latency
            if self.size < self.cap:
                self.size = min(self.cap, self.size + 1 / self.size)
        self.wake(max(1, int(self.size) - self.in_flight))


@dataclass
class Batch:
    """A batch of calls handed to the engine. Read outcomes with `take` from the thread
    that submitted it; `stop`, `update_credit` and `take` are safe from any thread."""

    calls: list[Call]
    limit: LimitSpec | None
    credit: float | None  # None: no budget
    outcomes: queue.SimpleQueue[Outcome] = field(default_factory=queue.SimpleQueue)
    done: threading.Event = field(default_factory=threading.Event)
    unfinished: list[Hashable] = field(default_factory=list)
    # loop-side state
    _engine: Engine | None = None
    _stopping: asyncio.Event | None = None
    _credit_changed: asyncio.Event | None = None
    _reserved: float = 0.0
    _tasks: list[asyncio.Task] = field(default_factory=list)
    on_wire: int = 0

    def take(self, timeout: float, max_items: int = 500) -> list[Outcome]:
        """The outcomes ready now (waiting up to `timeout` for the first one)."""
        out: list[Outcome] = []
        try:
            out.append(self.outcomes.get(timeout=timeout))
        except queue.Empty:
            return out
        while len(out) < max_items:
            try:
                out.append(self.outcomes.get_nowait())
            except queue.Empty:
                break
        return out

    def finished(self) -> bool:
        return self.done.is_set() and self.outcomes.empty()

    def stop(self, grace: float | None = 0.0) -> None:
        """Launch nothing more; end waits and retry sleeps now; calls on the wire get
        `grace` seconds (None: until their own timeout) before they are abandoned."""
        engine = self._engine
        if engine is not None and not self.done.is_set():
            engine._loop_call(self._stop, grace)

    def update_credit(self, credit: float | None, released: float = 0.0) -> None:
        """The budget left (`credit`, from the database) once outcomes whose reserved cost
        adds up to `released` are written."""
        engine = self._engine
        if engine is not None and not self.done.is_set():
            engine._loop_call(self._set_credit, credit, released)

    # -- on the loop ---------------------------------------------------------------------

    def _stop(self, grace: float | None) -> None:
        assert self._stopping is not None
        if self._stopping.is_set():
            return
        self._stopping.set()
        assert self._engine is not None
        for window in self._engine._windows.values():
            window.wake(len(window._waiters))  # its waiters see the stop
        if grace is not None:
            asyncio.get_running_loop().call_later(grace, self._abandon)

    def _abandon(self) -> None:
        for task in self._tasks:
            task.cancel()

    def _set_credit(self, credit: float | None, released: float) -> None:
        self.credit = credit
        self._reserved = max(0.0, self._reserved - released)
        assert self._credit_changed is not None
        self._credit_changed.set()

    async def _admit(self, cost: float) -> bool:
        """Reserve `cost` against the credit (waiting for the caller to write and refresh
        it); False when the batch stops first. The first call of a batch with credit left
        always goes (as "cost < budget" did before each call)."""
        assert self._stopping is not None and self._credit_changed is not None
        while not self._stopping.is_set():
            if self.credit is None:
                return True
            if self.credit > 0 and (self._reserved <= 0 or self._reserved + cost <= self.credit):
                self._reserved += cost
                return True
            self._credit_changed.clear()
            await _sleep_unless(self._credit_changed, 1.0)
        return False

    def _release(self, cost: float) -> None:
        self._reserved = max(0.0, self._reserved - cost)
        assert self._credit_changed is not None
        self._credit_changed.set()


class Engine:
    """One per worker process (`Engine.for_process`). Thread-safe `submit`."""

    _instance: Engine | None = None
    _instance_lock = threading.Lock()

    def __init__(
        self,
        *,
        max_in_flight: int = 512,
        backoff_base: float = 2.0,
        backoff_cap: float = 120.0,
    ) -> None:
        self.max_in_flight = max(1, int(max_in_flight))
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="judging-engine", daemon=True
        )
        self._thread.start()
        # loop-side state, created on the loop
        self._slots: asyncio.Semaphore | None = None
        self._clients: dict[bool, list[AsyncOpenAICompatibleClient]] = {}
        self._load: dict[AsyncOpenAICompatibleClient, int] = {}
        self._pacers: dict[tuple, _Pacer] = {}
        self._windows: dict[str, _Window] = {}
        self._redis: dict[str, redis_async.Redis] = {}
        self.stats: dict[str, int] = {"calls": 0, "retries": 0, "throttled": 0, "on_wire": 0}
        self.peak_on_wire = 0

    @classmethod
    def for_process(cls, **settings: Any) -> Engine:
        """This process's engine (a new one in a forked child: a loop thread does not
        survive fork). `settings` apply when it is made."""
        with cls._instance_lock:
            engine = cls._instance
            if engine is None or engine._pid != os.getpid() or not engine._thread.is_alive():
                engine = cls._instance = cls(**settings)
            return engine

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection pools and stop the loop thread (tests, shutdown)."""

        async def shutdown() -> None:
            for pools in self._clients.values():
                for client in pools:
                    await client.aclose()
            for redis_client in self._redis.values():
                await redis_client.aclose()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        with Engine._instance_lock:
            if Engine._instance is self:
                Engine._instance = None

    def _loop_call(self, fn: Any, *args: Any) -> None:
        self._loop.call_soon_threadsafe(fn, *args)

    def submit(
        self, calls: Iterable[Call], *, limit: LimitSpec | None, credit: float | None = None
    ) -> Batch:
        batch = Batch(calls=list(calls), limit=limit, credit=credit, _engine=self)
        # The batch's events exist before anything is scheduled: a stop() or an
        # update_credit() made right away may run on the loop before _run's first step
        # (run_coroutine_threadsafe only schedules the task). An asyncio.Event binds to the
        # loop when first awaited, not when made, so making it here is safe.
        batch._stopping = asyncio.Event()
        batch._credit_changed = asyncio.Event()
        asyncio.run_coroutine_threadsafe(self._run(batch), self._loop)
        return batch

    # -- on the loop -----------------------------------------------------------------------

    async def _run(self, batch: Batch) -> None:
        assert batch._stopping is not None and batch._credit_changed is not None
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        try:
            pacer = self._pacer(batch.limit) if batch.limit else None
            batch._tasks = [
                asyncio.create_task(self._one(batch, call, pacer)) for call in batch.calls
            ]
            await asyncio.gather(*batch._tasks, return_exceptions=True)
        finally:
            batch.done.set()

    def _pacer(self, spec: LimitSpec) -> _Pacer | None:
        if not (spec.rpm or spec.tpm):
            return None
        key = (spec.name, spec.rpm, spec.tpm, spec.burst, spec.redis_url)
        pacer = self._pacers.get(key)
        if pacer is None:
            limiter: Limiter
            if spec.redis_url:
                client = self._redis.get(spec.redis_url)
                if client is None:
                    client = self._redis[spec.redis_url] = redis_async.Redis.from_url(
                        spec.redis_url
                    )
                settings = RateLimiter(spec.redis_url, spec.name, spec.rpm, spec.tpm, spec.burst)
                limiter = AsyncRateLimiter(client, settings)
            else:
                limiter = LocalRateLimiter(spec.name, spec.rpm, spec.tpm, spec.burst)
            pacer = self._pacers[key] = _Pacer(limiter)
        return pacer

    def _window(self, call: Call, batch: Batch) -> _Window:
        name = batch.limit.name if batch.limit else call.request.base_url
        window = self._windows.get(name)
        if window is None:
            window = self._windows[name] = _Window(self.max_in_flight)
        return window

    def _client(self, local: bool) -> AsyncOpenAICompatibleClient:
        """The least busy of the connection pools for this kind of provider. httpcore's pool
        scans its connections and queued requests on every request and response, so one pool
        of 512 connections spent 10-20 ms of CPU per call at 300-500 in flight (measured);
        pools of POOL_SHARD connections keep it near 1.5 ms."""
        pools = self._clients.get(local)
        if pools is None:
            shards = max(1, -(-self.max_in_flight // POOL_SHARD))
            pools = self._clients[local] = [
                AsyncOpenAICompatibleClient(guarded=not local, max_connections=POOL_SHARD)
                for _ in range(shards)
            ]
            self._load.update((pool, 0) for pool in pools)
        return min(pools, key=self._load.__getitem__)

    async def _one(self, batch: Batch, call: Call, pacer: _Pacer | None) -> None:
        stopping = batch._stopping
        assert stopping is not None and self._slots is not None
        window = self._window(call, batch) if pacer is None else None
        attempt = 0
        admitted = False
        try:
            while True:
                if not await batch._admit(call.cost):
                    batch.unfinished.append(call.key)
                    return
                admitted = True
                if pacer is not None:
                    try:
                        if not await pacer.acquire(call.tokens, stopping):
                            batch._release(call.cost)
                            batch.unfinished.append(call.key)
                            return
                    except (RedisError, OSError) as exc:
                        logger.warning("rate limiter %s unavailable: %s", pacer, exc)
                        batch._release(call.cost)
                        admitted = False
                        if await _sleep_unless(stopping, 1.0):
                            batch.unfinished.append(call.key)
                            return
                        continue
                if window is not None and not await window.enter(stopping):
                    batch._release(call.cost)
                    batch.unfinished.append(call.key)
                    return
                attempt += 1
                error: JudgeError | None = None
                result: ChatResult | None = None
                try:
                    async with self._slots:
                        self._on_wire(batch, +1)
                        client = self._client(call.local)
                        self._load[client] += 1
                        try:
                            result = await client.chat(call.request)
                        except JudgeError as exc:
                            error = exc
                        finally:
                            self._load[client] -= 1
                            self._on_wire(batch, -1)
                finally:
                    throttled = error is not None and error.status == 429
                    if window is not None:
                        window.leave(
                            latency=result.latency_ms / 1000 if result is not None else None,
                            throttled=throttled,
                        )
                if result is not None:
                    if pacer is not None and call.tokens:
                        used = result.prompt_tokens + result.completion_tokens
                        await _quietly(pacer.limiter.adjust(used - call.tokens))
                    batch.outcomes.put(Outcome(call.key, result, None, attempt, call.cost))
                    return
                assert error is not None
                if throttled:
                    self.stats["throttled"] += 1
                    if pacer is not None:
                        await _quietly(pacer.limiter.penalize(error.retry_after or 1.0))
                if not error.retryable or attempt >= call.max_attempts:
                    batch.outcomes.put(Outcome(call.key, None, error, attempt, call.cost))
                    return
                self.stats["retries"] += 1
                batch._release(call.cost)
                admitted = False
                wait = (
                    error.retry_after
                    if error.retry_after is not None
                    else backoff(attempt, self.backoff_base, self.backoff_cap)
                )
                if await _sleep_unless(stopping, wait):
                    batch.unfinished.append(call.key)
                    return
        except asyncio.CancelledError:
            # abandoned by stop(grace): its answer, if any, is not recorded; the caller
            # leaves it to a later task (judgments are made only where they are missing)
            if admitted:
                batch._release(call.cost)
            batch.unfinished.append(call.key)
        except Exception as exc:  # a bug must not lose the call: record it as failed
            logger.exception("judging engine: call %r failed unexpectedly", call.key)
            error = JudgeError(f"engine: {type(exc).__name__}: {exc}"[:300], retryable=False)
            batch.outcomes.put(Outcome(call.key, None, error, max(1, attempt), call.cost))

    def _on_wire(self, batch: Batch, delta: int) -> None:
        batch.on_wire += delta
        self.stats["on_wire"] += delta
        if delta > 0:
            self.stats["calls"] += 1
            self.peak_on_wire = max(self.peak_on_wire, self.stats["on_wire"])


async def _quietly(awaitable: Any) -> None:
    """A limiter update that may fail (Redis away) without failing the call it follows."""
    try:
        await awaitable
    except (RedisError, OSError) as exc:
        logger.warning("rate limiter update failed: %s", exc)
