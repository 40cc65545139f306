"""One call of an LLM judge, with the response cache, the rate limit shared by every worker
(Redis) and retries. Its outcome goes to a `record` callback, so single-response and
pairwise judging record it their own way.

Every call is accounted for: the effective request (no API key), raw output, tokens,
latency and attempts reach `record`; a call that fails for good is recorded with its error.
Identical requests (same messages, model, parameters, sample index) are answered from
LLMCacheEntry, so re-runs and resumed runs cost nothing."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings

from judging import prompts
from judging.llm import outbound
from judging.llm.clients import ChatRequest, JudgeError, OpenAICompatibleClient
from judging.llm.ratelimit import RateLimiter, key_fingerprint
from judging.models import JudgeConfig, LLMCacheEntry, Provider
from judging.services.providers import provider_api_key, provider_usable_problem
from judging.services.templates import json_digest

#: Exponential backoff with full jitter for retryable errors without Retry-After.
BACKOFF_BASE_SECONDS = 2.0
BACKOFF_CAP_SECONDS = 120.0

#: record(body, key, **outcome): where the outcome of one call goes.
Record = Callable[..., None]

#: The outcome fields of a call that was not made (or made no progress): record them with
#: an `error`, or with `content` for an answer from the cache.
NO_CALL: dict[str, Any] = {
    "content": "",
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "latency_ms": None,
    "attempts": 0,
}


class RetryLater(Exception):
    """The call should be tried again after `countdown` seconds (the task re-queues).
    `counts`: whether this used up an attempt (a failed call) or not (waiting for quota)."""

    def __init__(self, countdown: float, reason: str, *, counts: bool = True) -> None:
        super().__init__(reason)
        self.countdown = countdown
        self.counts = counts


def llm_call(
    *, judge: JudgeConfig, messages: list[dict], sample: int, attempt: int, record: Record
) -> None:
    """One judge call with the cache, the shared rate limit and retries; its outcome goes to
    `record(body, key, content=..., prompt_tokens=..., completion_tokens=..., latency_ms=...,
    attempts=..., [from_cache=...], [error=...])`. Raises RetryLater to be called again.

    Order matters: the provider must be usable and its key present *before* the cache is
    read, so a judge without a working credential never receives anyone's paid answer."""
    params = {
        "temperature": judge.temperature,
        "max_tokens": judge.max_tokens,
        **judge.extra_params,
    }
    if judge.samples > 1:
        params.setdefault("seed", sample)
    request = ChatRequest(
        base_url=judge.base_url,
        model=judge.model,
        messages=messages,
        params=params,
        timeout=judge.timeout_seconds,
    )
    provider = judge.provider
    problem = provider_usable_problem(provider, judge.project_id)
    # a missing provider always has a problem; the None checks only tell the type checker
    if (
        provider is not None
        and not problem
        and not outbound.within(provider.base_urls, judge.base_url)
    ):
        problem = f"{judge.base_url} is not a base URL of provider {provider.name} any more"
    if problem or provider is None:
        record(request.body(), "", **NO_CALL, error=problem)
        return
    try:
        api_key = provider_api_key(provider)
    except JudgeError as exc:
        record(request.body(), "", **NO_CALL, error=str(exc))
        return
    key = _cache_key(provider, api_key, judge.project_id, request, sample)
    cached = LLMCacheEntry.objects.filter(key=key).first()
    if cached is not None:
        record(request.body(), key, **{**NO_CALL, "content": cached.content}, from_cache=True)
        return
    limiter = _limiter(judge, api_key)
    rpm, tpm = _limits(judge)
    estimated = prompts.estimate_tokens(messages) + judge.max_tokens
    if tpm:
        # a single call larger than the whole minute's budget would wait forever
        estimated = min(estimated, tpm)
    if limiter is not None:
        wait = limiter.try_acquire(tokens=estimated)
        if wait > 0:
            # Shared quota exhausted: come back when it refills; not a failed attempt.
            raise RetryLater(wait + random.uniform(0, 0.5), "rate limit", counts=False)
    try:
        result = _http(local=provider.is_local).chat(
            ChatRequest(**{**request.__dict__, "api_key": api_key})
        )
    except JudgeError as exc:
        if limiter is not None and exc.status == 429 and exc.retry_after:
            limiter.penalize(exc.retry_after)  # every worker sharing this key waits
        if exc.retryable and attempt < judge.max_attempts:
            countdown = exc.retry_after if exc.retry_after is not None else _backoff(attempt)
            raise RetryLater(countdown, str(exc)) from None
        record(
            request.body(),
            key,
            **{**NO_CALL, "latency_ms": exc.latency_ms, "attempts": attempt},
            error=str(exc),
        )
        return
    if limiter is not None:
        limiter.adjust(result.prompt_tokens + result.completion_tokens - estimated)
    LLMCacheEntry.objects.get_or_create(
        key=key,
        defaults={
            "provider": provider,
            "project_id": None if provider.shared_cache else judge.project_id,
            "model": judge.model,
            "content": result.content,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
        },
    )
    record(
        request.body(),
        key,
        content=result.content,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_ms=result.latency_ms,
        attempts=attempt,
    )


def _cache_key(
    provider: Provider, api_key: str, project_id: int, request: ChatRequest, sample: int
) -> str:
    """The cache entry an identical request may be answered from: the same provider,
    credential (its fingerprint, never the key) and project, unless a site admin lets the
    provider share its cache between projects."""
    scope = "shared" if provider.shared_cache else f"project:{project_id}"
    return json_digest(
        [
            f"provider:{provider.pk}",
            key_fingerprint(api_key, 32),
            scope,
            request.base_url,
            request.body(),
            sample,
        ]
    )


def _limits(judge: JudgeConfig) -> tuple[int | None, int | None]:
    """Requests and tokens per minute: the provider's (the account's, shared by every
    judge of every project on it) where a site admin set them, else the judge's own."""
    provider = judge.provider
    rpm = (provider.requests_per_minute if provider else None) or judge.requests_per_minute
    tpm = (provider.tokens_per_minute if provider else None) or judge.tokens_per_minute
    return rpm, tpm


def _limiter(judge: JudgeConfig, api_key: str) -> RateLimiter | None:
    """The rate limit shared by every worker using this provider and key (Redis), or None
    when there are no limits or there is no Redis (the embedded single worker)."""
    rpm, tpm = _limits(judge)
    if not (rpm or tpm) or not settings.REDIS_URL:
        return None
    return RateLimiter.for_api_key(
        _redis(settings.REDIS_URL), f"provider-{judge.provider_id}", api_key, rpm=rpm, tpm=tpm
    )


_redis_clients: dict[str, redis.Redis] = {}


def _redis(url: str) -> redis.Redis:
    """One redis-py client (a thread-safe connection pool) per process and URL: a client per
    call opened a new connection for every judgment."""
    client = _redis_clients.get(url)
    if client is None:
        client = _redis_clients[url] = redis.Redis.from_url(url)
    return client


def _backoff(attempt: int) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))


_clients: dict[bool, OpenAICompatibleClient] = {}


def _http(*, local: bool) -> OpenAICompatibleClient:
    """One pooled client per process for public providers (connects to public addresses
    only) and one for providers a site admin marked as local."""
    client = _clients.get(local)
    if client is None:
        client = _clients[local] = OpenAICompatibleClient(guarded=not local)
    return client
