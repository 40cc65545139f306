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
3. for a provider with no declared limits only, its **window**: INITIAL_WINDOW calls at
   first, one more per answer (it doubles each latency) until the provider answers 429;
   then it halves (at most once per measured latency) and grows back by one per window of
   successes (additive increase, multiplicative decrease), so a provider whose limits
   nobody declared settles where it stops refusing; a 429 also pauses the window for its
   Retry-After (once per burst), since refusals come back at once and the waiting calls
   would otherwise run into them one after another. Where limits are declared, the limiter
   paces and a 429 penalises it instead: a window would also count hung calls against the
   rate, and let a few 429s starve a paced run,
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

**Hung calls are cut.** A call still unanswered after `max(CUT_FLOOR_SECONDS, CUT_FACTOR x
the provider's recent p95 latency)` (5 s, or 3 x p95 when that is longer; once CUT_SAMPLES
answers were measured) is cancelled, counted as a timed-out attempt (`code="cut"`) and
tried again at once, through the credit, the limiter and the window like any call; a call
on its last attempt is never cut (it gets the judge's whole timeout), so a provider that is
merely slower than its recent past still answers. Cutting rather than hedging (a second
request alongside the slow one, the first answer taken): under a rate limit a hedge takes
the grant of a fresh call and pays twice, for an answer the retry gets as soon; and a call
that far past the provider's p95 is hung far more often than it is about to answer.

What the calls do is recorded in judging.llm.activity (memory; written once a second), so
the run pages and the metrics see calls in flight, 429s, retries and the learned window.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
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

from judging.llm import activity
from judging.llm.clients import AsyncOpenAICompatibleClient, ChatRequest, ChatResult, JudgeError
from judging.llm.ratelimit import AsyncRateLimiter, LocalRateLimiter, RateLimiter, provider_of

logger = logging.getLogger(__name__)

__all__ = ["Batch", "Call", "Engine", "LimitSpec", "Outcome", "backoff"]

#: Connections per httpx pool; the engine keeps max_in_flight / POOL_SHARD pools per kind.
POOL_SHARD = 32
#: A provider with no declared limit starts with this many calls in flight and doubles them
#: each latency (slow start) until its first 429: a provider that takes 10 calls at once
#: meets 32, not FLASKWEB_JUDGE_MAX_IN_FLIGHT (512), before it first refuses. One that
#: refuses nothing reaches 512 in four latencies.
INITIAL_WINDOW = 32
#: A call is cut once it runs past max(CUT_FLOOR_SECONDS, CUT_FACTOR x the provider's p95
#: latency over its last LATENCY_SAMPLES answers), when at least CUT_SAMPLES were measured.
#: 3 x p95: a provider's own tail rarely reaches it (a legitimately long answer is in the
#: p95 already); the 5 s floor keeps fast providers' jitter (and the event loop's own
#: delays under hundreds of calls in flight, up to about 2 s measured) from cutting calls.
CUT_FACTOR = 3.0
CUT_FLOOR_SECONDS = 5.0
CUT_SAMPLES = 20
LATENCY_SAMPLES = 200
#: How often the calls on the wire are checked against their cut (seconds). A call's cut is
#: re-evaluated as answers come in, so the first calls of a run (made before any latency
#: was measured) are cut too once the provider's p95 is known.
CUT_CHECK_EVERY = 0.25


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
    #: USD per prompt token and per completion token: what an answer cost, for the activity
    #: figures (None: not known to the engine; the run's own accounting is the caller's)
    prices: tuple[float, float] | None = None


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


def backoff(retry: int, base: float, cap: float) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**retry)], where
    `retry` counts the retries before this one (0 for the first: up to `base`)."""
    return random.uniform(0, min(cap, base * 2**retry))


async def _sleep_unless(event: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds`, or less if `event` is set first; whether it was set."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout=max(0.0, seconds))
    except TimeoutError:
        return False
    return True


#: A call's place in the queues of the pacer and the window: its batch's number (older
#: batches first), then its own arrival.
Priority = tuple[int, int]


class _Turns:
    """One holder at a time; the others wait in order of priority (a heap of futures:
    nothing polls). The turn is handed straight to the next waiter on release."""

    def __init__(self) -> None:
        self._busy = False
        self._heap: list[tuple[Priority, asyncio.Future[None]]] = []

    async def take(self, priority: Priority, stopping: asyncio.Event) -> bool:
        """Take the turn, unless the batch stops first (a stopped batch's calls leave the
        queue at once instead of waiting for the calls ahead of them to be served)."""
        if not self._busy:
            self._busy = True
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (priority, turn))
        stop = asyncio.ensure_future(stopping.wait())
        either: set[asyncio.Future[Any]] = {turn, stop}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the call is abandoned: give up the turn too
            if turn.done() and not turn.cancelled():
                self.release()
            else:
                turn.cancel()
            raise
        finally:
            stop.cancel()
        if turn.done() and not turn.cancelled():
            if stopping.is_set():
                self.release()
                return False
            return True
        turn.cancel()
        return False

    def release(self) -> None:
        while self._heap:
            _, turn = heapq.heappop(self._heap)
            if not turn.done():
                turn.set_result(None)
                return  # handed over: still busy
        self._busy = False


class _Pacer:
    """One waiter per limiter and process polls the limiter; the others queue behind it,
    the calls of older batches (their retries too) first: a batch ends as soon as it can
    and its worker thread takes the next one while the later batches' calls go out, instead
    of every batch in the process waiting for the slowest retries of all of them at once."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self.turns = _Turns()
        self.penalized_at = -math.inf  # when this process last penalised the limiter

    async def penalize(self, seconds: float, sent_at: float) -> None:
        """A 429 on a call sent at `sent_at` (monotonic): every worker waits `seconds`, unless
        the call went out before this process's last penalty began. Such a 429 is an echo:
        it answers a call sent before we slowed down, and says nothing new (as TCP answers
        one loss per round trip, and the window cuts once per latency); extending the pause
        for each echo would pause a paced run most of the time and waste the bucket's refill
        (measured: the pacer at 76 % of the limit with 4 % of calls refused at random)."""
        if sent_at < self.penalized_at:
            return
        self.penalized_at = time.monotonic()
        await _quietly(self.limiter.penalize(seconds))

    async def acquire(self, tokens: int, stopping: asyncio.Event, priority: Priority) -> bool:
        if not await self.turns.take(priority, stopping):
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
            self.turns.release()


class _Window:
    """A provider's concurrency window: slow start (from `initial`, one more per answer, so
    it doubles each latency) until its first 429, then AIMD (halved on a 429 at most once per
    latency, one more per window of answers). Waiters queue in order of priority on futures
    (older batches first): nothing polls."""

    def __init__(self, cap: int, initial: int = INITIAL_WINDOW) -> None:
        self.cap = cap
        self.size = float(min(cap, initial))
        self.slow_start = True
        self.not_before = 0.0  # monotonic: nothing enters before (a 429's Retry-After)
        self.penalized_at = -math.inf
        self.in_flight = 0
        self.latency = 1.0  # EWMA of successful calls' latency, seconds
        self._cut_at = 0.0
        self._waiters: list[tuple[Priority, asyncio.Future[None]]] = []

    def _room(self) -> bool:
        return self.in_flight < max(1, int(self.size))

    def penalize(self, seconds: float, sent_at: float) -> None:
        """A 429 with Retry-After `seconds` on a call sent at `sent_at`: nothing enters until
        then (a 429 comes back at once, so without a pause the waiting calls would run into
        the refusal one after another as fast as they are answered), once per burst (a 429
        answering a call sent before the last pause began is an echo: see _Pacer.penalize)."""
        if sent_at < self.penalized_at:
            return
        self.penalized_at = now = time.monotonic()
        self.not_before = max(self.not_before, now + seconds)

    async def _paused(self, stopping: asyncio.Event) -> bool:
        """Wait out a 429's pause; True if the batch stopped (meanwhile or before)."""
        while (left := self.not_before - time.monotonic()) > 0:
            if await _sleep_unless(stopping, left):
                return True
        return stopping.is_set()

    def _queued(self) -> bool:
        while self._waiters and self._waiters[0][1].done():
            heapq.heappop(self._waiters)  # gone (its batch stopped)
        return bool(self._waiters)

    async def enter(self, stopping: asyncio.Event, priority: Priority = (0, 0)) -> bool:
        """Take a place in the window (after a 429's pause), unless the batch stops first."""
        woken = False
        while True:
            if await self._paused(stopping):
                if woken:
                    self.wake(1)  # pass the turn on
                return False
            if self._room() and (woken or not self._queued()):
                break
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiters, (priority, waiter))
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()
            woken = True
        self.in_flight += 1
        return True

    def wake(self, n: int) -> None:
        while n > 0 and self._waiters:
            _, waiter = heapq.heappop(self._waiters)
            if not waiter.done():
                waiter.set_result(None)
                n -= 1

    def leave(self, *, latency: float | None, throttled: bool) -> None:
        self.in_flight -= 1
        now = time.monotonic()
        if throttled:
            self.slow_start = False
            if now - self._cut_at > self.latency:
                self.size = max(1.0, min(self.size, self.in_flight + 1) / 2)
                self._cut_at = now
                logger.info("provider throttled: window %d", int(self.size))
        elif latency is not None:
            self.latency = 0.8 * self.latency + 0.2 * latency
            if self.size < self.cap:
                grow = 1 if self.slow_start else 1 / self.size
                self.size = min(self.cap, self.size + grow)
        self.wake(max(1, int(self.size) - self.in_flight))


@dataclass(eq=False)
class _OnWire:
    """A call on the wire that may be cut: its chat, when it started, its provider's
    latency; `cut` is set (the seconds it was allowed) when the watchdog cuts it."""

    chat: asyncio.Future[ChatResult]
    started: float
    latency: _Latency
    timeout: float = math.inf
    cut: float | None = None


class _Latency:
    """A provider's recent answers' latency (this process): the p95 that decides when a call
    is cut."""

    def __init__(self, min_samples: int = CUT_SAMPLES) -> None:
        self.samples: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.min_samples = min_samples
        self._p95: float | None = None
        self._fresh = 0

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)
        self._fresh += 1
        if self._fresh >= 10:  # sorting 200 floats per answer is waste: every 10th
            self._p95 = None

    def p95(self) -> float | None:
        if len(self.samples) < self.min_samples:
            return None
        if self._p95 is None:
            ordered = sorted(self.samples)
            self._p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            self._fresh = 0
        return self._p95


@dataclass
class Batch:
    """A batch of calls handed to the engine. Read outcomes with `take` from the thread
    that submitted it; `stop`, `update_credit` and `take` are safe from any thread."""

    calls: list[Call]
    limit: LimitSpec | None
    credit: float | None  # None: no budget
    run: str | None = None  # its run, for the activity figures (activity.run_key)
    seq: int = 0  # its place among the engine's batches: older ones' calls go first
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
        cut_floor: float = CUT_FLOOR_SECONDS,
        cut_factor: float = CUT_FACTOR,
        cut_samples: int = CUT_SAMPLES,
    ) -> None:
        self.max_in_flight = max(1, int(max_in_flight))
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.cut_floor = cut_floor
        self.cut_factor = cut_factor
        self.cut_samples = cut_samples
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
        self._latencies: dict[str, _Latency] = {}
        self._batch_numbers = itertools.count()
        self._wires: set[_OnWire] = set()
        self._watchdog: asyncio.TimerHandle | None = None
        self._arrivals = itertools.count()
        self._redis: dict[str, redis_async.Redis] = {}
        self.stats: dict[str, int] = {
            "calls": 0,
            "retries": 0,
            "throttled": 0,
            "on_wire": 0,
            "cut": 0,
        }
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
        self,
        calls: Iterable[Call],
        *,
        limit: LimitSpec | None,
        credit: float | None = None,
        run: str | None = None,
    ) -> Batch:
        """Hand `calls` to the loop. `run` (activity.run_key) names the run they belong to in
        the activity figures; by default the run of activity.run_scope or of the judging
        task this thread runs."""
        batch = Batch(
            calls=list(calls),
            limit=limit,
            credit=credit,
            run=run if run is not None else activity.current_run(),
            seq=next(self._batch_numbers),
            _engine=self,
        )
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

    def _latency(self, call: Call, batch: Batch) -> _Latency:
        name = batch.limit.name if batch.limit else call.request.base_url
        latency = self._latencies.get(name)
        if latency is None:
            latency = self._latencies[name] = _Latency(self.cut_samples)
        return latency

    def _cut_after(self, latency: _Latency) -> float | None:
        """How long a call to this provider may run before it is cut (None: until its own
        timeout; nothing was measured yet)."""
        p95 = latency.p95()
        return None if p95 is None else max(self.cut_floor, self.cut_factor * p95)

    async def _chat(
        self, client: AsyncOpenAICompatibleClient, request: ChatRequest, latency: _Latency | None
    ) -> ChatResult:
        """The call; cut (a retryable JudgeError with code "cut") by the watchdog once it
        runs past its provider's cut (`latency`; None: never cut)."""
        if latency is None:
            return await client.chat(request)
        wire = _OnWire(asyncio.ensure_future(client.chat(request)), time.monotonic(), latency)
        wire.timeout = request.timeout
        self._wires.add(wire)
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().call_later(CUT_CHECK_EVERY, self._watch)
        try:
            return await wire.chat
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if wire.cut is None or (task is not None and task.cancelling()):
                raise  # the batch abandoned it (Batch.stop), not the watchdog
            raise JudgeError(
                f"no answer after {wire.cut:.1f} s, far past the provider's recent latency:"
                " cut and tried again",
                retryable=True,
                code="cut",
                latency_ms=int((time.monotonic() - wire.started) * 1000),
            ) from None
        finally:
            self._wires.discard(wire)

    def _watch(self) -> None:
        """Cut the calls on the wire that run past their provider's cut (on the loop, every
        CUT_CHECK_EVERY while any call may be cut)."""
        now = time.monotonic()
        for wire in self._wires:
            if wire.cut is not None or wire.chat.done():
                continue
            cut = self._cut_after(wire.latency)
            if cut is not None and cut < wire.timeout and now - wire.started > cut:
                wire.cut = cut
                wire.chat.cancel()
        loop = asyncio.get_running_loop()
        self._watchdog = loop.call_later(CUT_CHECK_EVERY, self._watch) if self._wires else None

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
        latency = self._latency(call, batch)
        provider = _provider(call, batch)
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
                        turn = (batch.seq, next(self._arrivals))
                        if not await pacer.acquire(call.tokens, stopping, turn):
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
                turn = (batch.seq, next(self._arrivals))
                if window is not None and not await window.enter(stopping, turn):
                    batch._release(call.cost)
                    batch.unfinished.append(call.key)
                    return
                attempt += 1
                error: JudgeError | None = None
                result: ChatResult | None = None
                sent_at = time.monotonic()
                # the last attempt is never cut: it gets the judge's whole timeout
                cuttable = latency if attempt < call.max_attempts else None
                try:
                    async with self._slots:
                        self._on_wire(batch, +1)
                        activity.record_call_start(provider, run=batch.run)
                        client = self._client(call.local)
                        self._load[client] += 1
                        try:
                            result = await self._chat(client, call.request, cuttable)
                        except JudgeError as exc:
                            error = exc
                        finally:
                            self._load[client] -= 1
                            self._on_wire(batch, -1)
                            _record_end(provider, batch.run, call, result, error)
                finally:
                    throttled = error is not None and error.status == 429
                    if window is not None:
                        window.leave(
                            latency=result.latency_ms / 1000 if result is not None else None,
                            throttled=throttled,
                        )
                        if not window.slow_start:  # learned from a 429: shown
                            activity.record_window(provider, window.size)
                if result is not None:
                    latency.add(result.latency_ms / 1000)
                    if pacer is not None and call.tokens:
                        used = result.prompt_tokens + result.completion_tokens
                        await _quietly(pacer.limiter.adjust(used - call.tokens))
                    batch.outcomes.put(Outcome(call.key, result, None, attempt, call.cost))
                    activity.record_outcome(provider, run=batch.run)
                    return
                assert error is not None
                if throttled:
                    self.stats["throttled"] += 1
                    if pacer is not None:
                        await pacer.penalize(error.retry_after or 1.0, sent_at)
                    elif window is not None:
                        window.penalize(error.retry_after or 1.0, sent_at)
                if not error.retryable or attempt >= call.max_attempts:
                    batch.outcomes.put(Outcome(call.key, None, error, attempt, call.cost))
                    activity.record_outcome(provider, run=batch.run)
                    return
                self.stats["retries"] += 1
                activity.record_retry(provider, run=batch.run)
                batch._release(call.cost)
                admitted = False
                if error.code == "cut":
                    self.stats["cut"] += 1
                    # hung, not refused: the provider is not asking us to slow down
                    wait = 0.0
                elif error.retry_after is not None:
                    wait = error.retry_after
                else:
                    # the first retry waits up to the base: the slowest chain of retries
                    # is what a batch (and the run's last minute) waits for
                    wait = backoff(attempt - 1, self.backoff_base, self.backoff_cap)
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
            activity.record_outcome(provider, run=batch.run)

    def _on_wire(self, batch: Batch, delta: int) -> None:
        batch.on_wire += delta
        self.stats["on_wire"] += delta
        if delta > 0:
            self.stats["calls"] += 1
            self.peak_on_wire = max(self.peak_on_wire, self.stats["on_wire"])


def _provider(call: Call, batch: Batch) -> str:
    """The provider a call goes to, as the activity figures name it: the provider's id from
    its limiter's name (judging.services.calls.limit_spec), else the limiter's name, else
    the base URL."""
    if batch.limit is not None:
        return provider_of(batch.limit.name)
    return call.request.base_url


def _record_end(
    provider: str,
    run: str | None,
    call: Call,
    result: ChatResult | None,
    error: JudgeError | None,
) -> None:
    if result is not None:
        cost = None
        if call.prices is not None:
            prompt_price, completion_price = call.prices
            cost = prompt_price * result.prompt_tokens + completion_price * result.completion_tokens
        activity.record_call_end(
            provider, outcome="ok", latency_s=result.latency_ms / 1000, cost_usd=cost, run=run
        )
        return
    if error is None:  # abandoned on the wire (Batch.stop): no answer, nothing known
        outcome = "cancelled"
    elif error.status == 429:
        outcome = "throttled"
    elif error.code in ("timeout", "cut"):
        outcome = error.code
    else:
        outcome = "error"
    latency = error.latency_ms / 1000 if error is not None and error.latency_ms else None
    activity.record_call_end(provider, outcome=outcome, latency_s=latency, cost_usd=None, run=run)


async def _quietly(awaitable: Any) -> None:
    """A limiter update that may fail (Redis away) without failing the call it follows."""
    try:
        await awaitable
    except (RedisError, OSError) as exc:
        logger.warning("rate limiter update failed: %s", exc)
