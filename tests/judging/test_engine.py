"""The judging engine (judging.llm.engine) against the project's local OpenAI-compatible
server over real HTTP on 127.0.0.1: many calls in flight per process, pacing by the rate
limiter (in this process or shared through Redis), the window that backs off on 429s,
per-request timeouts that cost a slot and not a thread, retries after Retry-After, the
batch's budget credit, and stop. No database: the engine never touches it.

No assertion here is a speed target (those are in bench/judge_bench.py): they are counts
(how many calls were on the wire at once, how many were refused) and lower bounds of time
that pacing must take whatever the machine's speed."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
import uuid

import pytest

from devtools.openai_server import FakeOpenAIServer
from judging.llm.clients import AsyncOpenAICompatibleClient, ChatRequest, JudgeError
from judging.llm.engine import Batch, Call, Engine, LimitSpec, Outcome
from judging.llm.ratelimit import LocalRateLimiter

REDIS_URL = os.environ.get("TEST_RATELIMIT_REDIS_URL", "redis://127.0.0.1:6379/13")
PROMPT = [{"role": "user", "content": "Score the response.\nSkills: Conciseness, Readability"}]


@pytest.fixture
def engine():
    engine = Engine(max_in_flight=256, backoff_base=0.01, backoff_cap=0.05)
    yield engine
    engine.close()


def calls(server, n: int, *, timeout: float = 10.0, max_attempts: int = 1, cost: float = 0.0):
    return [
        Call(
            key=i,
            request=ChatRequest(
                base_url=server.url, model="fake", messages=PROMPT, timeout=timeout
            ),
            tokens=50,
            max_attempts=max_attempts,
            cost=cost,
            local=True,
        )
        for i in range(n)
    ]


def in_a_thread(fn):
    """fn() on a thread of its own: asyncio.run refuses a thread with a running loop, and
    the browser tests' session leaves one on the main thread."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result(timeout=60)


def drain(batch: Batch, timeout: float = 60) -> list[Outcome]:
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + timeout
    while not batch.finished():
        assert time.monotonic() < deadline, f"batch not finished: {len(outcomes)} outcomes"
        outcomes += batch.take(timeout=0.05)
    return outcomes


@pytest.mark.slow
def test_one_process_keeps_hundreds_of_calls_on_the_wire(engine):
    # given a provider answering in 1 s and a declared limit far above what is asked (a
    # provider without one starts with 32 calls and doubles them each latency: see
    # tests/judging/test_hedging_cut.py)
    spec = LimitSpec(name=f"test-engine:{uuid.uuid4().hex}", rpm=60_000, tpm=None, burst=1000)
    with FakeOpenAIServer(style="json", latency=1.0) as srv:
        # when one batch of 200 calls is handed to the engine
        outcomes = drain(engine.submit(calls(srv, 200), limit=spec))
        stats = srv.stats()
    # then they were all on the wire together (not one per thread or process), and all ok
    assert len(outcomes) == 200 and all(o.result is not None for o in outcomes)
    assert {o.key for o in outcomes} == set(range(200))
    assert stats["max_concurrent"] >= 150 and engine.peak_on_wire >= 150


def test_batches_from_many_threads_share_one_engine(engine):
    import threading

    # each call waits 1.5 s at the server: long enough that the five threads' 100 calls all
    # start while the first are still out, even on a loaded host (0.3 s saw 36 at once)
    with FakeOpenAIServer(style="json", latency=1.5) as srv:
        results: list[int] = []

        def worker() -> None:
            results.append(len(drain(engine.submit(calls(srv, 20), limit=None))))

        threads = [threading.Thread(target=worker) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == [20] * 5 and srv.stats()["completions"] == 100
        assert srv.stats()["max_concurrent"] >= 50


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
@pytest.mark.parametrize("shared", [False, True], ids=["in-process", "redis"])
def test_a_rate_limit_paces_the_calls_so_the_provider_never_refuses(engine, shared):
    # given a provider that refuses more than 6 calls in any second (room for arrivals that
    # a busy machine bunches up), and a judge limited to 2 a second (a bucket of 2 requests)
    spec = LimitSpec(
        name=f"test-engine:{uuid.uuid4().hex}",
        rpm=120,
        tpm=None,
        burst=2,
        redis_url=REDIS_URL if shared else None,
    )
    with FakeOpenAIServer(style="json", latency=0.05, rpm=6, rate_window=1.0) as srv:
        started = time.monotonic()
        outcomes = drain(engine.submit(calls(srv, 7), limit=spec))
        elapsed = time.monotonic() - started
        stats = srv.stats()
    # then 2 leave at once, then one every 0.5 s: 2.5 s at least, nothing refused
    assert elapsed >= 2.4
    assert stats["rate_limited"] == 0 and len(outcomes) == 7
    assert all(o.result is not None and o.attempts == 1 for o in outcomes)


@pytest.mark.slow
def test_a_provider_that_refuses_shrinks_the_window_and_every_call_still_ends_ok(engine):
    # given a provider with an unknown limit (5 calls in any second) and no limit on our side
    with FakeOpenAIServer(style="json", latency=0.05, rpm=5, rate_window=1.0) as srv:
        outcomes = drain(engine.submit(calls(srv, 20, max_attempts=50), limit=None))
        stats = srv.stats()
    # then the 429s were honoured (Retry-After) and narrowed the window; all calls ended ok
    assert stats["rate_limited"] > 0 and engine.stats["throttled"] == stats["rate_limited"]
    assert all(o.result is not None for o in outcomes) and len(outcomes) == 20
    (window,) = engine._windows.values()
    assert window.size < engine.max_in_flight


@pytest.mark.slow
def test_with_declared_limits_a_429_penalises_the_limiter_and_no_window_is_kept(engine):
    # given a judge limit far above what the provider really takes (5 calls in any second)
    spec = LimitSpec(name=f"test-engine:{uuid.uuid4().hex}", rpm=6000, tpm=None, burst=100)
    with FakeOpenAIServer(style="json", latency=0.05, rpm=5, rate_window=1.0) as srv:
        outcomes = drain(engine.submit(calls(srv, 15, max_attempts=50), limit=spec))
        stats = srv.stats()
    # then the refusals paused the limiter (Retry-After) and every call ended ok, with no
    # window: hung or slow calls never count against a paced provider's rate
    assert stats["rate_limited"] > 0 and all(o.result is not None for o in outcomes)
    assert engine._windows == {}


def test_a_hung_call_costs_its_timeout_and_a_slot_not_the_batch(engine):
    # given a provider that hangs on half of the calls for 30 s
    with FakeOpenAIServer(
        style="json", latency=0.05, faults={"timeout": 0.5}, fault_seed=3, hang_seconds=30
    ) as srv:
        started = time.monotonic()
        outcomes = drain(engine.submit(calls(srv, 40, timeout=0.5), limit=None), timeout=20)
        elapsed = time.monotonic() - started
    # then every call ends: answered, or failed with a timeout after its 0.5 s
    assert len(outcomes) == 40
    hung = [o for o in outcomes if o.error is not None]
    assert hung and all(o.error.code == "timeout" for o in hung)
    assert all(400 <= o.error.latency_ms < 5000 for o in hung)
    assert elapsed < 15  # nowhere near the 30 s hang: bounded by the call's timeout


def test_retryable_errors_are_retried_inside_the_engine(engine):
    with FakeOpenAIServer(style="json", fail_first=3, fail_first_kind="http_500") as srv:
        outcomes = drain(engine.submit(calls(srv, 1, max_attempts=5), limit=None))
        assert srv.stats()["requests"] == 4
    (outcome,) = outcomes
    assert outcome.result is not None and outcome.attempts == 4


def test_a_permanent_error_is_not_retried(engine):
    with FakeOpenAIServer(style="json", faults={"bad_request": 1.0}) as srv:
        (outcome,) = drain(engine.submit(calls(srv, 1, max_attempts=5), limit=None))
        assert srv.stats()["requests"] == 1
    assert outcome.error is not None and outcome.error.status == 400 and outcome.attempts == 1


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_stop_ends_a_batch_within_its_grace_and_names_what_did_not_finish(engine):
    # given a batch of slow calls, paced so that most have not left yet
    spec = LimitSpec(name=f"test-engine:{uuid.uuid4().hex}", rpm=600, tpm=None, burst=5)
    with FakeOpenAIServer(style="json", latency=3.0) as srv:
        batch = engine.submit(calls(srv, 50), limit=spec)
        time.sleep(0.5)
        # when it is stopped with a grace shorter than a call
        stopped = time.monotonic()
        batch.stop(grace=0.2)
        outcomes = drain(batch, timeout=10)
        # then it is over at once: nothing launched after, the calls on the wire abandoned
        assert time.monotonic() - stopped < 2.0
        requests = srv.stats()["requests"]
        time.sleep(0.5)
        assert srv.stats()["requests"] == requests
    assert outcomes == [] and sorted(batch.unfinished) == list(range(50))
    assert 5 <= requests < 50


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_a_stopped_batch_leaves_the_limiters_queue_at_once(engine):
    # given two batches sharing a limiter of one call a second; the first queued ahead
    spec = LimitSpec(name=f"test-engine:{uuid.uuid4().hex}", rpm=60, tpm=None, burst=1)
    with FakeOpenAIServer(style="json", latency=0.05) as srv:
        ahead = engine.submit(calls(srv, 10), limit=spec)
        time.sleep(0.2)
        behind = engine.submit(calls(srv, 5), limit=spec)
        time.sleep(0.2)
        # when the second stops (as at its deadline: calls on the wire may finish)
        stopped = time.monotonic()
        behind.stop(grace=None)
        # then it is over without waiting for the first batch's calls to be granted
        assert drain(behind, timeout=10) == []
        assert time.monotonic() - stopped < 2.0
        assert sorted(behind.unfinished) == list(range(5))
        ahead.stop()
        drain(ahead)


def test_the_budget_credit_holds_back_calls_until_the_caller_has_written(engine):
    # given a batch with credit for one call's estimate and a half (each costs 0.6)
    with FakeOpenAIServer(style="json", latency=0.05) as srv:
        batch = engine.submit(calls(srv, 3, cost=0.6), limit=None, credit=0.9)
        first = batch.take(timeout=5)
        # then only the first call went: the second waits for the written cost
        time.sleep(0.3)
        assert len(first) == 1 and srv.stats()["requests"] == 1
        # when the caller has written it and 0.3 are left, one more goes (credit left > 0)
        batch.update_credit(0.3, released=first[0].cost)
        second = batch.take(timeout=5)
        assert len(second) == 1
        # and when the budget is gone, nothing more goes; the caller stops the batch
        batch.update_credit(-0.3, released=second[0].cost)
        time.sleep(0.3)
        assert srv.stats()["requests"] == 2
        batch.stop()
        assert drain(batch) == [] and batch.unfinished == [2]


def _call_in_child(url: str, queue) -> None:
    engine = Engine.for_process(max_in_flight=4)
    server = type("S", (), {"url": url})
    batch = engine.submit(calls(server, 2), limit=None)
    queue.put((os.getpid(), engine._pid, len(drain(batch))))


def test_a_forked_worker_process_gets_its_own_engine():
    # given the engine of this process, in use
    parent = Engine.for_process(max_in_flight=4)
    with FakeOpenAIServer(style="json") as srv:
        assert len(drain(parent.submit(calls(srv, 1), limit=None))) == 1
        # when a child is forked (a prefork pool's child), its engine is a new one
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_call_in_child, args=(srv.url, queue))
        child.start()
        pid, engine_pid, done = queue.get(timeout=30)
        child.join(10)
    assert pid == engine_pid != os.getpid() and done == 2
    parent.close()


def test_the_async_client_refuses_loopback_unless_the_provider_is_local():
    async def call(guarded: bool) -> str:
        client = AsyncOpenAICompatibleClient(guarded=guarded, max_connections=2)
        try:
            result = await client.chat(ChatRequest(base_url=srv.url, model="m", messages=PROMPT))
            return result.finish_reason
        except JudgeError as exc:
            return exc.code
        finally:
            await client.aclose()

    with FakeOpenAIServer(style="json") as srv:
        assert in_a_thread(lambda: asyncio.run(call(True))) == "address_refused"
        assert in_a_thread(lambda: asyncio.run(call(False))) == "stop"
        assert srv.stats()["requests"] == 1


def test_the_in_process_limiter_keeps_the_shared_limiters_rules():
    now = [0.0]
    limiter = LocalRateLimiter("x", rpm=60, tpm=1000, burst=2, clock=lambda: now[0])

    def acquire(tokens: int = 10) -> float:
        return in_a_thread(lambda: asyncio.run(limiter.try_acquire(tokens)))

    def run(coroutine) -> None:
        in_a_thread(lambda: asyncio.run(coroutine))

    # a burst of 2, then one a second
    assert acquire() == 0 and acquire() == 0
    assert acquire() == pytest.approx(1.0)
    now[0] = 1.0
    assert acquire() == 0
    # tokens: a call larger than what is left waits for the refill (1000 a minute)
    now[0] = 10.0
    assert acquire(tokens=900) == 0
    assert acquire(tokens=200) == pytest.approx((200 - 100) / (1000 / 60))  # 100 left
    # usage above the estimate is a debt that delays the next calls
    run(limiter.adjust(500))  # 100 - 500 = -400 tokens
    now[0] = 20.0
    assert acquire(tokens=1) == pytest.approx((1 + 400 - 10 * 1000 / 60) / (1000 / 60))
    # a penalty (a 429's Retry-After) holds every call, whatever the buckets hold
    now[0] = 200.0
    run(limiter.penalize(5.0))
    assert acquire(tokens=1) == pytest.approx(5.0)
    with pytest.raises(ValueError):
        acquire(tokens=1001)


def test_a_batch_stopped_before_the_loop_starts_it_ends_with_every_call_unfinished(engine):
    """stop() (and update_credit()) right after submit() may reach the loop before the
    batch's first step: the loop is kept busy here so that they always do. The stop must
    take (it raised on the loop and the batch ran on, unstopped)."""
    with FakeOpenAIServer(style="json", latency=0.05) as srv:
        engine._loop_call(time.sleep, 0.3)  # the loop is busy: nothing below runs yet
        batch = engine.submit(calls(srv, 5, cost=0.01), limit=None, credit=1.0)
        batch.update_credit(1.0)
        batch.stop(grace=None)
        outcomes = drain(batch, timeout=10)
    assert outcomes == []
    assert sorted(batch.unfinished) == [0, 1, 2, 3, 4]
