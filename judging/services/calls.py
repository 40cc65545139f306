"""What one judge call is: the request (the run's judge settings and the sample's seed), where
it may go (the provider, its key, its base URL), the cache entry that may answer it and the
rate limit it counts against. The calls themselves are made by the judging engine
(judging.llm.engine), many at a time; judging.services.batches drives it.

Identical requests (same messages, model, parameters, sample index, provider, credential and
project) are answered from LLMCacheEntry, so re-runs and resumed runs cost nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from judging import prompts
from judging.llm import outbound
from judging.llm.clients import ChatRequest, JudgeError
from judging.llm.engine import LimitSpec
from judging.llm.ratelimit import key_fingerprint, limiter_name
from judging.models import JudgeConfig, Provider
from judging.services.providers import provider_api_key, provider_usable_problem
from judging.services.templates import json_digest

#: The outcome fields of a call that was not made (or made no progress): record them with
#: an `error`, or with `content` for an answer from the cache.
NO_CALL: dict[str, Any] = {
    "content": "",
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "latency_ms": None,
    "attempts": 0,
}


@dataclass(frozen=True)
class Access:
    """Where a judge's calls go: its provider and the key read from the workers'
    environment (never stored)."""

    provider: Provider
    api_key: str


def judge_access(judge: JudgeConfig) -> Access | str:
    """The judge's provider and key, or why it may not be called now. Checked before the
    cache is read, so a judge without a working credential never receives anyone's paid
    answer."""
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
        return problem or "no provider"
    try:
        return Access(provider=provider, api_key=provider_api_key(provider))
    except JudgeError as exc:
        return str(exc)


def chat_request(judge: JudgeConfig, messages: list[dict], sample: int) -> ChatRequest:
    """The request of one sample (no key: what is stored with the judgment). k samples of
    the same prompt differ by their seed."""
    params = {
        "temperature": judge.temperature,
        "max_tokens": judge.max_tokens,
        **judge.extra_params,
    }
    if judge.samples > 1:
        params.setdefault("seed", sample)
    return ChatRequest(
        base_url=judge.base_url,
        model=judge.model,
        messages=messages,
        params=params,
        timeout=judge.timeout_seconds,
    )


def estimated_tokens(judge: JudgeConfig, messages: list[dict]) -> int:
    """What the token bucket is charged before a call (corrected once the usage is known):
    the prompt's estimate plus the answer's cap, never more than a minute's budget (a call
    larger than that would wait forever)."""
    estimated = prompts.estimate_tokens(messages) + judge.max_tokens
    _, tpm = judge_limits(judge)
    return min(estimated, tpm) if tpm else estimated


def cache_key(access: Access, project_id: int, request: ChatRequest, sample: int) -> str:
    """The cache entry an identical request may be answered from: the same provider,
    credential (its fingerprint, never the key) and project, unless a site admin lets the
    provider share its cache between projects."""
    provider = access.provider
    scope = "shared" if provider.shared_cache else f"project:{project_id}"
    return json_digest(
        [
            f"provider:{provider.pk}",
            key_fingerprint(access.api_key, 32),
            scope,
            request.base_url,
            request.body(),
            sample,
        ]
    )


def judge_limits(judge: JudgeConfig) -> tuple[int | None, int | None]:
    """Requests and tokens per minute: the provider's (the account's, shared by every
    judge of every project on it) where a site admin set them, else the judge's own."""
    provider = judge.provider
    rpm = (provider.requests_per_minute if provider else None) or judge.requests_per_minute
    tpm = (provider.tokens_per_minute if provider else None) or judge.tokens_per_minute
    return rpm, tpm


def limit_spec(judge: JudgeConfig, access: Access) -> LimitSpec:
    """The rate limit shared by every worker calling this provider with this key: through
    Redis when there is one, else kept by the one worker process (the embedded default).
    Its bucket holds FLASKWEB_JUDGE_BURST_SECONDS of requests, so calls leave at the
    provider's pace instead of a minute's worth at once (providers enforce their per-minute
    limits over shorter periods too)."""
    rpm, tpm = judge_limits(judge)
    burst = max(1.0, rpm / 60 * settings.FLASKWEB_JUDGE_BURST_SECONDS) if rpm else None
    return LimitSpec(
        name=limiter_name(f"provider-{judge.provider_id}", access.api_key),
        rpm=rpm,
        tpm=tpm,
        burst=burst,
        redis_url=settings.REDIS_URL or None,
    )
