"""A rate limiter shared through Redis by every worker that calls the same LLM API key.

Pure module (no Django). Judge calls go out from many Celery workers on many machines; the
provider limits each API key to R requests and T tokens per minute, so the workers must
share one budget. Each limiter is one Redis hash holding two token buckets (requests and
tokens) plus a "not before" time set after a 429. One Lua script checks and updates both
buckets atomically, timed by the Redis server's clock (TIME), so the workers' own clocks
do not matter. Algorithm, keys and configuration: docs/RATE_LIMITS.md.

    limiter = RateLimiter.for_api_key(redis_url, "openai", api_key, rpm=500, tpm=200_000)
    limiter.acquire(tokens=estimate, timeout=120)   # sleeps until the call may go out
    try:
        result = client.chat(request)
    except JudgeError as exc:
        if exc.status == 429:
            limiter.penalize(exc.retry_after or 1.0)  # every worker on this key waits
        raise
    limiter.adjust(result.prompt_tokens + result.completion_tokens - estimate)

The API key itself is never stored, logged or put into a key: `key_fingerprint` names it.
"""

from __future__ import annotations

import hashlib
import math
import operator
import random
import time
from dataclasses import dataclass
from typing import Any

import redis as redis_lib
import redis.asyncio as redis_async
from redis.exceptions import NoScriptError

__all__ = [
    "AsyncRateLimiter",
    "LocalRateLimiter",
    "DEFAULT_PREFIX",
    "LimiterState",
    "RateLimitTimeout",
    "RateLimiter",
    "key_fingerprint",
    "limiter_name",
    "provider_of",
]

DEFAULT_PREFIX = "ratelimit:"

# KEYS[1]: the limiter's hash. Fields: r = request level, t = token level (both may be
# negative = debt), ts = server time (µs) the levels were computed at, pu = penalty: no
# request is granted before this server time (µs). A missing key or field = a full bucket.
#
# ARGV: op, cap_r, rate_r, cap_t, rate_t, a, b. A capacity of 0 = that dimension unlimited;
# rates are per second. Ops:
#   "acquire": take a requests and b tokens if both buckets (and the penalty) allow it,
#              else take nothing. Returns wait_ms = 0 when granted, > 0 = ms until it
#              would be granted, -1 = never (more than a bucket's capacity).
#   "adjust":  add a requests and b tokens to the levels (refunds > 0, debts < 0), capped
#              at capacity but not floored: a level may go negative.
#   "penalize": move the penalty time to at least now + a µs (never earlier).
#   "state":   read only.
# Every op returns {wait_ms, request level, token level, penalty ms left}; levels are
# strings ("" = unlimited) because Redis truncates Lua numbers to integers.
# Writes set a TTL of the time until both buckets are full again and the penalty is over,
# plus a second: an expired key reads as full buckets and no penalty, so nothing is lost.
SCRIPT = """
local key = KEYS[1]
local op = ARGV[1]
local cap_r = tonumber(ARGV[2])
local rate_r = tonumber(ARGV[3])
local cap_t = tonumber(ARGV[4])
local rate_t = tonumber(ARGV[5])
local a = tonumber(ARGV[6])
local b = tonumber(ARGV[7])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local h = redis.call('HMGET', key, 'r', 't', 'ts', 'pu')
local ts = tonumber(h[3]) or now
local elapsed = math.max(0, now - ts) / 1000000
local pu = tonumber(h[4]) or 0

local function level(stored, cap, rate)
  if cap <= 0 then return 0 end
  local v = tonumber(stored)
  if v == nil then return cap end
  return math.min(cap, v + elapsed * rate)
end

local r = level(h[1], cap_r, rate_r)
local t = level(h[2], cap_t, rate_t)

local function fmt(x) return string.format('%.17g', x) end

local function reply(wait_ms)
  local rs, tks = '', ''
  if cap_r > 0 then rs = fmt(r) end
  if cap_t > 0 then tks = fmt(t) end
  return {wait_ms, rs, tks, math.max(0, math.ceil((pu - now) / 1000))}
end

local function save()
  local ttl_us = math.max(0, pu - now)
  local fields = {'ts', string.format('%.0f', now)}
  if cap_r > 0 then
    table.insert(fields, 'r'); table.insert(fields, fmt(r))
    ttl_us = math.max(ttl_us, (cap_r - r) / rate_r * 1000000)
  end
  if cap_t > 0 then
    table.insert(fields, 't'); table.insert(fields, fmt(t))
    ttl_us = math.max(ttl_us, (cap_t - t) / rate_t * 1000000)
  end
  if pu > now then
    table.insert(fields, 'pu'); table.insert(fields, string.format('%.0f', pu))
  end
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIRE', key, math.ceil(ttl_us / 1000) + 1000)
end

if op == 'acquire' then
  if (cap_r > 0 and a > cap_r) or (cap_t > 0 and b > cap_t) then return reply(-1) end
  local wait = math.max(0, pu - now)
  if cap_r > 0 and r < a then wait = math.max(wait, (a - r) / rate_r * 1000000) end
  if cap_t > 0 and t < b then wait = math.max(wait, (b - t) / rate_t * 1000000) end
  if wait > 0 then return reply(math.max(1, math.ceil(wait / 1000))) end
  if cap_r > 0 then r = r - a end
  if cap_t > 0 then t = t - b end
  save()
  return reply(0)
elseif op == 'adjust' then
  if cap_r > 0 then r = math.min(cap_r, r + a) end
  if cap_t > 0 then t = math.min(cap_t, t + b) end
  save()
  return reply(0)
elseif op == 'penalize' then
  pu = math.max(pu, now + a)
  save()
  return reply(0)
elseif op == 'state' then
  return reply(0)
end
return redis.error_reply('ratelimit: unknown op ' .. tostring(op))
"""

SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()


class RateLimitTimeout(TimeoutError):
    """`acquire` could not be granted within its timeout. `wait` = the last known wait (s)."""

    def __init__(self, name: str, timeout: float, wait: float) -> None:
        super().__init__(
            f"rate limit {name!r}: not granted within {timeout:g} s (next slot in {wait:.3g} s)"
        )
        self.name = name
        self.timeout = timeout
        self.wait = wait


@dataclass(frozen=True)
class LimiterState:
    """A snapshot: current levels (None = unlimited; negative = debt), penalty seconds left."""

    requests: float | None
    tokens: float | None
    penalty: float


def key_fingerprint(api_key: str | None, length: int = 12) -> str:
    """A short, stable, non-reversible name for an API key (sha256 hex prefix).

    Use it wherever a key must be told apart (limiter names, logs, metrics); never the key.
    """
    return hashlib.sha256((api_key or "").encode()).hexdigest()[:length]


def limiter_name(provider: str, api_key: str | None) -> str:
    """The conventional limiter name for judge calls: ``judge:{provider}:{fingerprint}``."""
    return f"judge:{provider}:{key_fingerprint(api_key)}"


def provider_of(name: str) -> str:
    """The provider a judge limiter's name stands for: "12" for ``judge:provider-12:<fp>``
    (judging.services.calls.limit_spec's names), else the name itself."""
    parts = name.split(":")
    if len(parts) == 3 and parts[0] == "judge" and parts[1].startswith("provider-"):
        ident = parts[1].removeprefix("provider-")
        if ident.isdigit():
            return ident
    return name


def _limit(value: float | None, what: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a number or None, not {value!r}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0 (0 or None = unlimited), not {value!r}")
    return float(value)


def _reply(reply: Any) -> tuple[int, float | None, float | None, float]:
    wait_ms, requests, tokens, penalty_ms = reply
    return int(wait_ms), _num(requests), _num(tokens), int(penalty_ms) / 1000.0


def _num(value: Any) -> float | None:
    if value in (b"", ""):
        return None
    return float(value)


class RateLimiter:
    """One shared budget of `rpm` requests and `tpm` tokens per minute, stored in Redis.

    `redis`: a redis-py client (shared connection pool; thread-safe) or a redis:// URL.
    `name`: the budget's identity; every worker using the same name (and Redis database and
    `prefix`) shares it, e.g. `limiter_name(provider, api_key)`. All of them should pass the
    same limits: each call is evaluated with the caller's limits against the shared levels.
    `rpm` / `tpm`: None or 0 = that dimension unlimited. Buckets hold `burst` requests
    (default: rpm, i.e. one minute's worth) and `tpm` tokens, and refill at rpm/60 and
    tpm/60 per second. A lower `burst` spreads requests out instead of allowing a whole
    minute's worth back to back.
    `jitter`: up to this many seconds added to each sleep in `acquire`, so waiting workers
    do not all wake at once.
    """

    def __init__(
        self,
        redis: redis_lib.Redis | str,
        name: str,
        rpm: float | None = None,
        tpm: float | None = None,
        burst: float | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        jitter: float = 0.05,
    ) -> None:
        if not name:
            raise ValueError("a rate limiter needs a name")
        self.redis = redis_lib.Redis.from_url(redis) if isinstance(redis, str) else redis
        self.name = name
        self.key = f"{prefix}{name}"
        self.rpm = _limit(rpm, "rpm") or None
        self.tpm = _limit(tpm, "tpm") or None
        if burst is not None:
            if self.rpm is None:
                raise ValueError("burst needs an rpm limit (it is the request bucket's size)")
            if _limit(burst, "burst") < 1:
                raise ValueError(f"burst must be >= 1 request, not {burst!r}")
        self.burst = float(burst) if burst is not None else self.rpm
        self.jitter = max(0.0, float(jitter))
        self._sha = SCRIPT_SHA

    @classmethod
    def for_api_key(
        cls,
        redis: redis_lib.Redis | str,
        provider: str,
        api_key: str | None,
        rpm: float | None = None,
        tpm: float | None = None,
        burst: float | None = None,
        **kwargs: Any,
    ) -> RateLimiter:
        """The limiter for one provider's API key, named `limiter_name(provider, api_key)`."""
        return cls(redis, limiter_name(provider, api_key), rpm, tpm, burst, **kwargs)

    def __repr__(self) -> str:
        return f"<RateLimiter {self.name!r} rpm={self.rpm} tpm={self.tpm} burst={self.burst}>"

    # -- the script ------------------------------------------------------------------------

    def _args(self, op: str, a: float, b: float) -> tuple[str, ...]:
        return (
            op,
            repr(self.burst or 0.0),
            repr((self.rpm or 0.0) / 60.0),
            repr(self.tpm or 0.0),
            repr((self.tpm or 0.0) / 60.0),
            repr(float(a)),
            repr(float(b)),
        )

    def _call(
        self, op: str, a: float = 0, b: float = 0
    ) -> tuple[int, float | None, float | None, float]:
        args = self._args(op, a, b)
        try:
            reply = self.redis.evalsha(self._sha, 1, self.key, *args)
        except NoScriptError:
            # Not cached on this server (restart, failover, SCRIPT FLUSH): EVAL sends the
            # source, which also caches it, so the next EVALSHA succeeds again.
            reply = self.redis.eval(SCRIPT, 1, self.key, *args)
            self._sha = SCRIPT_SHA
        return _reply(reply)

    def _check_tokens(self, tokens: int) -> int:
        try:
            count = -1 if isinstance(tokens, bool) else operator.index(tokens)  # int-like only
        except TypeError:
            count = -1
        if count < 0:
            raise ValueError(f"tokens must be an int >= 0, not {tokens!r}")
        tokens = count
        if self.tpm is not None and tokens > self.tpm:
            raise ValueError(
                f"{tokens} tokens can never fit in rate limit {self.name!r} (tpm={self.tpm:g});"
                " cap the estimate at the limit"
            )
        return tokens

    # -- public API ------------------------------------------------------------------------

    def try_acquire(self, tokens: int = 1) -> float:
        """Take 1 request and `tokens` tokens if both are available now, else take nothing.

        Returns 0.0 when granted, else the seconds until it would be (a lower bound: other
        workers may take the budget first).
        """
        tokens = self._check_tokens(tokens)
        wait_ms = self._call("acquire", 1, tokens)[0]
        if wait_ms < 0:  # a limit smaller than the request, set by this or another caller
            raise ValueError(f"request cannot fit in rate limit {self.name!r}")
        return wait_ms / 1000.0

    def acquire(self, tokens: int = 1, timeout: float | None = None) -> float:
        """Block until 1 request and `tokens` tokens are granted; return the seconds waited.

        Raises `RateLimitTimeout` as soon as the wait needed goes past `timeout` seconds
        (None = wait as long as it takes; 0 = do not wait at all).
        """
        tokens = self._check_tokens(tokens)
        started = time.monotonic()
        while True:
            wait = self.try_acquire(tokens)
            waited = time.monotonic() - started
            if wait <= 0:
                return waited
            if timeout is not None and waited + wait > timeout:
                raise RateLimitTimeout(self.name, timeout, wait)
            delay = wait + random.uniform(0, self.jitter)
            if timeout is not None:
                delay = min(delay, max(0.0, timeout - waited))
            time.sleep(delay)

    def penalize(self, seconds: float) -> None:
        """Grant nothing to anyone on this limiter for the next `seconds` (server time).

        Call it when the provider answers 429: pass its Retry-After. It only ever moves the
        not-before time later, so concurrent penalties keep the longest.
        """
        seconds = float(seconds)
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"penalty must be a finite number of seconds >= 0, not {seconds!r}")
        if seconds > 0:
            self._call("penalize", seconds * 1_000_000)

    def refund(self, tokens: int = 0, requests: int = 0) -> None:
        """Give back tokens (and requests) taken but not used, e.g. the call never reached
        the provider, or used fewer tokens than estimated. Never fills past capacity."""
        if tokens < 0 or requests < 0:
            raise ValueError("refund amounts must be >= 0; use adjust() to add usage")
        if (tokens and self.tpm) or (requests and self.rpm):
            self._call("adjust", requests, tokens)

    def adjust(self, delta_tokens: int) -> None:
        """Correct the token bucket once the real usage is known:
        `adjust(actual_tokens - estimated_tokens)`. More than estimated takes the difference
        (the level may go negative: a debt that delays later calls); less gives it back."""
        if delta_tokens and self.tpm:
            self._call("adjust", 0, -delta_tokens)

    def state(self) -> LimiterState:
        """The current levels and penalty, without changing anything."""
        _, requests, tokens, penalty = self._call("state")
        return LimiterState(requests=requests, tokens=tokens, penalty=penalty)

    def reset(self) -> None:
        """Forget all usage and penalties: full buckets for every worker."""
        self.redis.delete(self.key)


class AsyncRateLimiter:
    """The same shared budget as RateLimiter (the same Redis key, script and semantics), for
    the asyncio judging engine: `redis` is a redis.asyncio client of the engine's loop.
    Waiting is the caller's business (the engine paces one waiter per limiter at a time)."""

    def __init__(self, redis: redis_async.Redis, limiter: RateLimiter) -> None:
        self.redis = redis
        self.limiter = limiter  # the settings and arguments; its own client is not used
        self.name = limiter.name

    async def _call(self, op: str, a: float = 0, b: float = 0) -> int:
        args = self.limiter._args(op, a, b)
        try:
            reply = await self.redis.evalsha(SCRIPT_SHA, 1, self.limiter.key, *args)
        except NoScriptError:
            reply = await self.redis.eval(SCRIPT, 1, self.limiter.key, *args)
        return _reply(reply)[0]

    async def try_acquire(self, tokens: int = 1) -> float:
        wait_ms = await self._call("acquire", 1, self.limiter._check_tokens(tokens))
        if wait_ms < 0:
            raise ValueError(f"request cannot fit in rate limit {self.name!r}")
        return wait_ms / 1000.0

    async def penalize(self, seconds: float) -> None:
        if seconds > 0:
            await self._call("penalize", float(seconds) * 1_000_000)

    async def adjust(self, delta_tokens: int) -> None:
        if delta_tokens and self.limiter.tpm:
            await self._call("adjust", 0, -delta_tokens)

    async def refund(self, tokens: int = 0, requests: int = 0) -> None:
        if (tokens and self.limiter.tpm) or (requests and self.limiter.rpm):
            await self._call("adjust", requests, tokens)


class LocalRateLimiter:
    """The same two buckets and penalty as the Redis script, kept in this process: the
    limit of a deployment with no Redis (the embedded default runs one worker process, so
    one process-wide budget is the whole budget). Async methods, the interface of
    AsyncRateLimiter; the state is only touched on the engine's event loop."""

    def __init__(
        self,
        name: str,
        rpm: float | None = None,
        tpm: float | None = None,
        burst: float | None = None,
        *,
        clock: Any = time.monotonic,
    ) -> None:
        self.name = name
        self.rpm = _limit(rpm, "rpm") or None
        self.tpm = _limit(tpm, "tpm") or None
        self.burst = float(burst) if burst is not None else self.rpm
        self._clock = clock
        self._requests = self.burst or 0.0
        self._tokens = self.tpm or 0.0
        self._at = clock()
        self._penalty_until = 0.0

    def _refill(self) -> float:
        now = self._clock()
        elapsed = max(0.0, now - self._at)
        self._at = now
        if self.rpm and self.burst:
            self._requests = min(self.burst, self._requests + elapsed * self.rpm / 60.0)
        if self.tpm:
            self._tokens = min(self.tpm, self._tokens + elapsed * self.tpm / 60.0)
        return now

    async def try_acquire(self, tokens: int = 1) -> float:
        if (self.rpm and self.burst and self.burst < 1) or (self.tpm and tokens > self.tpm):
            raise ValueError(f"request cannot fit in rate limit {self.name!r}")
        now = self._refill()
        wait = max(0.0, self._penalty_until - now)
        if self.rpm and self._requests < 1:
            wait = max(wait, (1 - self._requests) / (self.rpm / 60.0))
        if self.tpm and self._tokens < tokens:
            wait = max(wait, (tokens - self._tokens) / (self.tpm / 60.0))
        if wait > 0:
            return max(wait, 0.001)
        if self.rpm:
            self._requests -= 1
        if self.tpm:
            self._tokens -= tokens
        return 0.0

    async def penalize(self, seconds: float) -> None:
        self._penalty_until = max(self._penalty_until, self._clock() + max(0.0, seconds))

    async def adjust(self, delta_tokens: int) -> None:
        if delta_tokens and self.tpm:
            self._refill()
            self._tokens = min(self.tpm, self._tokens - delta_tokens)

    async def refund(self, tokens: int = 0, requests: int = 0) -> None:
        self._refill()
        if self.tpm:
            self._tokens = min(self.tpm, self._tokens + tokens)
        if self.rpm and self.burst:
            self._requests = min(self.burst, self._requests + requests)
