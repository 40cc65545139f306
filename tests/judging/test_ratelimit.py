"""The Redis-shared rate limiter, against a real Redis (TEST_RATELIMIT_REDIS_URL, default
database 13 of the local server). Every test works under its own key prefix and deletes it.

Timing assertions are bounds, not exact values: a grant happens at some server time between
the client sending the call and reading the answer, so "at most burst + rate x span" holds
strictly for any span measured around the calls, however slow the machine is.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
import uuid

import pytest
import redis

from judging.llm.ratelimit import (
    SCRIPT_SHA,
    LimiterState,
    RateLimiter,
    RateLimitTimeout,
    key_fingerprint,
    limiter_name,
)

REDIS_URL = os.environ.get("TEST_RATELIMIT_REDIS_URL", "redis://127.0.0.1:6379/13")


@pytest.fixture
def prefix():
    prefix = f"test-ratelimit:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def client():
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"these tests need a real Redis at {REDIS_URL}: {exc}")
    yield client
    client.close()


@pytest.fixture
def make(client, prefix):
    def make(name="judge:test:abc", **kwargs):
        return RateLimiter(client, name, prefix=prefix, **kwargs)

    return make


def assert_within_bound(grants, capacity, rate, cost=1.0):
    """Sound check over every window: the grants known to have happened inside
    [send_i, recv_j] cost at most capacity + rate x (recv_j - send_i).

    The stamps must come from the clock the limiter itself runs on (the Redis server's
    TIME, see `_server_now`): the host's monotonic clock and the server's wall clock can
    drift or step apart by milliseconds, which once made a correct limiter fail here
    (10 grants in 2.994 s of host time, 3.0 s or more of server time)."""
    grants = sorted(grants)
    for i, (start, _) in enumerate(grants):
        for _, end in grants[i:]:
            if end < start:
                continue
            inside = sum(1 for s, e in grants if s >= start and e <= end)
            bound = capacity + rate * (end - start)
            assert inside * cost <= bound + 1e-6 + cost * 0.01, (inside, end - start, bound)


def _server_now(client) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1_000_000


def _hammer(limiter, client, tokens, deadline, grants):
    """Take grants until the (host) deadline; stamp each with the server's clock read on
    the same connection just before and just after, so the grant's own server time lies
    between the two stamps."""
    while (now := time.monotonic()) < deadline:
        sent = _server_now(client)
        wait = limiter.try_acquire(tokens)
        if wait == 0:
            grants.append((sent, _server_now(client)))
        else:
            time.sleep(min(wait, deadline - now, 0.15) * random.uniform(0.3, 1.0))


# -- concurrency -------------------------------------------------------------------------------


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_eight_threads_with_own_connections_never_exceed_the_request_rate(prefix):
    rpm, burst, seconds = 120, 4, 3.0  # 2 requests/s after a burst of 4
    grants: list[tuple[float, float]] = []
    clients = [redis.Redis.from_url(REDIS_URL) for _ in range(8)]
    limiters = [RateLimiter(c, "judge:conc", rpm=rpm, burst=burst, prefix=prefix) for c in clients]
    server_started = _server_now(clients[0])
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(target=_hammer, args=(lim, c, 1, deadline, grants))
        for lim, c in zip(limiters, clients, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    span = _server_now(clients[0]) - server_started
    for c in clients:
        c.close()

    assert len(grants) <= burst + rpm / 60 * span + 1e-6
    assert_within_bound(grants, burst, rpm / 60)
    # and the budget is actually used, not starved (very generous: half of it)
    assert len(grants) >= (burst + rpm / 60 * seconds) / 2


def _process_worker(url, name, prefix, tpm, tokens, deadline, queue):
    client = redis.Redis.from_url(url)
    limiter = RateLimiter(client, name, rpm=6000, tpm=tpm, prefix=prefix)
    grants: list[tuple[float, float]] = []
    _hammer(limiter, client, tokens, deadline, grants)
    client.close()
    queue.put(grants)


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_four_processes_share_the_token_limit_when_it_binds(prefix, make, client):
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:
        pytest.skip("needs the fork start method")
    tpm, tokens, seconds = 600, 50, 2.5  # 12 calls' worth at once, then 1 call per 5 s
    queue = ctx.Queue()
    server_started = _server_now(client)
    deadline = time.monotonic() + seconds
    procs = [
        ctx.Process(
            target=_process_worker,
            args=(REDIS_URL, "judge:procs", prefix, tpm, tokens, deadline, queue),
        )
        for _ in range(4)
    ]
    for proc in procs:
        proc.start()
    grants = []
    for _ in procs:
        grants.extend(queue.get(timeout=30))
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    span = _server_now(client) - server_started

    # every process stamps with the one server clock, so their stamps compare
    assert len(grants) * tokens <= tpm + tpm / 60 * span + 1e-6
    assert_within_bound(grants, tpm, tpm / 60, cost=tokens)
    assert len(grants) >= tpm // tokens  # the whole bucket was there to take
    state = make("judge:procs", rpm=6000, tpm=tpm).state()
    assert state.tokens is not None and state.tokens < tokens + tpm / 60 * 2


# -- both buckets at once ----------------------------------------------------------------------


def test_when_either_bucket_is_short_nothing_is_taken_and_the_wait_covers_both(make):
    limiter = make(rpm=60, tpm=600, burst=1)  # 1 request/s, 10 tokens/s
    assert limiter.try_acquire(590) == 0.0
    before = limiter.state()
    assert before.requests == pytest.approx(0, abs=0.5)
    assert before.tokens == pytest.approx(10, abs=5)

    wait = limiter.try_acquire(40)  # requests: ~1 s away, tokens: ~3 s away -> ~3 s
    assert 2.0 <= wait <= 3.01
    assert 0.0 < limiter.try_acquire(5) <= 1.01  # tokens suffice, the request does not

    after = limiter.state()  # only refill since: nothing was taken
    assert after.requests >= before.requests
    assert after.tokens >= before.tokens
    assert after.tokens == pytest.approx(before.tokens, abs=5)


def test_a_large_token_estimate_waits_for_the_token_bucket(make):
    limiter = make(rpm=10_000, tpm=600)  # 10 tokens/s
    assert [limiter.try_acquire(100) for _ in range(6)] == [0.0] * 6
    wait = limiter.try_acquire(100)
    assert 9.0 <= wait <= 10.01


def test_a_request_larger_than_the_token_capacity_is_refused_up_front(make):
    limiter = make(tpm=1000)
    with pytest.raises(ValueError, match="never fit"):
        limiter.try_acquire(1001)
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ValueError):
            limiter.acquire(bad)
    assert limiter.try_acquire(1000) == 0.0


# -- penalties (429 Retry-After) ---------------------------------------------------------------


def test_penalize_makes_every_worker_wait(make, prefix):
    limiter = make(rpm=6000, tpm=1_000_000)
    other_client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    other = RateLimiter(other_client, limiter.name, rpm=6000, tpm=1_000_000, prefix=prefix)
    assert other.try_acquire(10) == 0.0

    limiter.penalize(1.0)
    wait = other.try_acquire(10)
    assert 0.8 <= wait <= 1.001
    assert other.state().penalty == pytest.approx(1.0, abs=0.2)

    waited = other.acquire(10, timeout=10)
    assert waited >= 0.75
    assert other.try_acquire(10) == 0.0  # over: granted again
    other_client.close()


def test_a_shorter_penalty_never_cuts_a_longer_one(make):
    limiter = make(rpm=60)
    limiter.penalize(30)
    limiter.penalize(1)
    assert 29 <= limiter.try_acquire() <= 30.001
    assert limiter.state().penalty >= 29


def test_penalize_applies_even_without_configured_limits(make):
    limiter = make()
    assert limiter.try_acquire(10**9) == 0.0
    limiter.penalize(5)
    assert 4 <= limiter.try_acquire() <= 5.001


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_acquire_gives_up_at_once_when_the_wait_is_past_its_timeout(make):
    limiter = make(rpm=60)
    limiter.penalize(30)
    started = time.monotonic()
    with pytest.raises(RateLimitTimeout) as info:
        limiter.acquire(timeout=0.5)
    assert time.monotonic() - started < 0.4  # no pointless sleeping
    assert info.value.wait >= 29
    assert isinstance(info.value, TimeoutError)
    assert "judge:test:abc" in str(info.value)


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_acquire_sleeps_until_granted(make):
    limiter = make(rpm=120, burst=1)  # one request per 0.5 s
    assert limiter.acquire() < 0.1
    started = time.monotonic()
    limiter.acquire(timeout=5)
    assert 0.4 <= time.monotonic() - started < 2.0


# -- refund / adjust ---------------------------------------------------------------------------


def test_refund_and_adjust_correct_the_token_bucket_and_debt_delays(make):
    limiter = make(tpm=600)  # 10 tokens/s
    assert limiter.try_acquire(500) == 0.0
    assert limiter.state().tokens == pytest.approx(100, abs=5)

    limiter.refund(300)
    assert limiter.state().tokens == pytest.approx(400, abs=5)

    limiter.adjust(1000)  # used 1000 more than estimated: a debt
    assert limiter.state().tokens == pytest.approx(-600, abs=5)
    assert 59 <= limiter.try_acquire(1) <= 60.2

    limiter.adjust(-5000)  # used far less: back, but never past capacity
    assert limiter.state().tokens == 600
    assert limiter.try_acquire(600) == 0.0


def test_refund_can_return_a_request(make):
    limiter = make(rpm=60, burst=2)
    assert limiter.try_acquire() == 0.0
    assert limiter.try_acquire() == 0.0
    assert limiter.try_acquire() > 0.5
    limiter.refund(requests=1)  # e.g. the call never reached the provider
    assert limiter.try_acquire() == 0.0
    with pytest.raises(ValueError):
        limiter.refund(-1)


# -- keys, TTL, unlimited ----------------------------------------------------------------------


def test_the_key_gets_a_ttl_and_an_idle_bucket_expires(make, client):
    limiter = make(rpm=600, tpm=6000)  # refills in 0.1 s
    assert limiter.try_acquire(10) == 0.0
    assert 0 < client.pttl(limiter.key) <= 1200
    for _ in range(40):
        if not client.exists(limiter.key):
            break
        time.sleep(0.1)
    assert not client.exists(limiter.key)
    assert limiter.state() == LimiterState(requests=600, tokens=6000, penalty=0)


def test_the_ttl_outlives_a_penalty_and_a_debt(make, client):
    limiter = make(rpm=60, tpm=600)
    limiter.penalize(30)
    assert 29_000 <= client.pttl(limiter.key) <= 31_100
    limiter.adjust(1200)  # -600 tokens: 1200 short of full at 10/s, ~120 s
    assert 115_000 <= client.pttl(limiter.key) <= 121_100


def test_unlimited_dimensions(make, client):
    unlimited = make("judge:none")
    assert all(unlimited.try_acquire(10**9) == 0.0 for _ in range(300))
    assert unlimited.state() == LimiterState(requests=None, tokens=None, penalty=0)

    zero_is_unlimited = make("judge:zero", rpm=0, tpm=0)
    assert zero_is_unlimited.rpm is None and zero_is_unlimited.tpm is None

    requests_only = make("judge:rpm", rpm=60, burst=3)
    assert [requests_only.try_acquire(10**9) for _ in range(3)] == [0.0] * 3
    assert requests_only.try_acquire(1) > 0.5
    assert requests_only.state().tokens is None
    requests_only.adjust(10**6)  # no token limit: nothing to correct
    assert b"t" not in client.hgetall(requests_only.key)

    tokens_only = make("judge:tpm", tpm=600)
    assert all(tokens_only.try_acquire(1) == 0.0 for _ in range(300))
    assert tokens_only.state().requests is None
    assert tokens_only.state().tokens == pytest.approx(300, abs=10)


def test_configuration_is_validated(client):
    with pytest.raises(ValueError):
        RateLimiter(client, "x", rpm=-1)
    with pytest.raises(ValueError):
        RateLimiter(client, "x", tpm="100")
    with pytest.raises(ValueError, match="burst"):
        RateLimiter(client, "x", tpm=100, burst=5)
    with pytest.raises(ValueError):
        RateLimiter(client, "x", rpm=60, burst=0.5)
    with pytest.raises(ValueError):
        RateLimiter(client, "", rpm=60)
    with pytest.raises(ValueError):
        RateLimiter(client, "x", rpm=60).penalize(-1)


def test_a_redis_url_works_in_place_of_a_client(prefix):
    limiter = RateLimiter(REDIS_URL, "judge:url", rpm=60, prefix=prefix)
    assert limiter.try_acquire() == 0.0
    assert limiter.state().requests == pytest.approx(59, abs=0.5)
    limiter.redis.close()


# -- the script cache --------------------------------------------------------------------------


def test_falls_back_to_eval_on_noscript_and_recovers(make, client, monkeypatch):
    limiter = make(rpm=60)
    limiter._sha = "0" * 40  # as if the server had lost the script (restart, SCRIPT FLUSH)
    evals = []
    real_eval = client.eval
    monkeypatch.setattr(client, "eval", lambda *a: evals.append(a) or real_eval(*a))

    assert limiter.try_acquire() == 0.0
    assert len(evals) == 1  # EVALSHA failed with NOSCRIPT, EVAL answered
    assert limiter._sha == SCRIPT_SHA
    assert client.script_exists(SCRIPT_SHA) == [True]

    assert limiter.try_acquire() == 0.0
    assert len(evals) == 1  # cached again: back to EVALSHA


# -- naming ------------------------------------------------------------------------------------


def test_key_fingerprint_names_a_key_without_revealing_it(make, client, prefix):
    secret = "sk-proj-THISISASECRETKEY1234567890"
    fingerprint = key_fingerprint(secret)
    assert len(fingerprint) == 12 and int(fingerprint, 16) >= 0
    assert fingerprint == key_fingerprint(secret)
    assert fingerprint != key_fingerprint(secret + "x")
    assert limiter_name("openai", secret) == f"judge:openai:{fingerprint}"

    limiter = RateLimiter.for_api_key(client, "openai", secret, rpm=60, tpm=1000, prefix=prefix)
    limiter.try_acquire(10)
    limiter.penalize(1)
    assert limiter.key == f"{prefix}judge:openai:{fingerprint}"
    stored = repr(client.hgetall(limiter.key)) + limiter.key + repr(limiter)
    assert secret not in stored and "SECRET" not in stored
