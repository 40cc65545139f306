"""HTTP client for OpenAI-compatible chat APIs (OpenAI, vLLM, Ollama, llama.cpp server).

Pure module (no Django). One call = one HTTP request: retries, rate limits and caching are
the caller's job (judging services and tasks), so every attempt can be counted and every
failure classified:

- `JudgeError(retryable=True)`: 429 (with the server's Retry-After), 408, 409, 5xx,
  timeouts, connection errors, and a 200 whose body is not the chat-completion JSON;
- `JudgeError(retryable=False)`: 400, 401, 403, 404, 422 and content-filter refusals —
  retrying cannot help, so they are recorded, not retried.

The API key is passed per request and never appears in errors, logs or `request_body`.
Where a call may go is judging.llm.outbound's business: the default client connects only to
public addresses (`guarded=True`), reads no proxy settings from the environment, follows
no redirect to another origin, and reads at most `MAX_ERROR_BODY_BYTES` of an error answer
(stored in the error text, never echoed whole) and `MAX_RESPONSE_BYTES` of a success.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from judging.llm.outbound import GuardedAsyncTransport, GuardedTransport, same_origin

PERMANENT_STATUSES = {400, 401, 403, 404, 405, 413, 422}
RETRYABLE_STATUSES = {408, 409, 425, 429}
#: An error answer's body is read up to this (and its text kept up to ERROR_TEXT_CHARS):
#: enough for any provider's JSON error, never a hostile server's gigabyte.
MAX_ERROR_BODY_BYTES = 2048
ERROR_TEXT_CHARS = 300
#: A chat completion larger than this is refused (a judge's answer is a few KB).
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Same-origin 307/308 redirects are followed (the body is re-sent to the same provider);
#: any other redirect is refused.
MAX_REDIRECTS = 3
#: Connecting to a provider takes at most this long (or the call's whole timeout, if shorter).
CONNECT_TIMEOUT_SECONDS = 10.0


class JudgeError(Exception):
    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        code: str = "",
        retry_after: float | None = None,
        latency_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.latency_ms = latency_ms


@dataclass(frozen=True)
class ChatRequest:
    base_url: str  # e.g. http://127.0.0.1:8089/v1
    model: str
    messages: list[dict[str, str]]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, seed, ...
    api_key: str = ""
    timeout: float = 60.0

    def body(self) -> dict[str, Any]:
        """The JSON body exactly as sent (stored with every judgment for reproducibility)."""
        return {"model": self.model, "messages": self.messages, **self.params}


@dataclass(frozen=True)
class ChatResult:
    content: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    raw: dict[str, Any]


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from LLM APIs; fall back to our backoff


def _clean(text: str) -> str:
    # PostgreSQL text cannot hold NUL; a server's answer is stored, so it must not fail to be.
    return text.replace("\x00", "\ufffd")


def _error_detail(body: bytes) -> tuple[str, str]:
    text = _clean(body.decode("utf-8", errors="replace"))
    try:
        error = json.loads(text).get("error") or {}
    except (ValueError, AttributeError):
        return text[:ERROR_TEXT_CHARS], ""
    if isinstance(error, dict):
        return str(error.get("message", ""))[:ERROR_TEXT_CHARS], str(
            error.get("code") or error.get("type") or ""
        )[:80]
    return str(error)[:ERROR_TEXT_CHARS], ""


def _read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the body, and whether there was more."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


class OpenAICompatibleClient:
    """Thread-safe; reuse one per process (it pools connections). `guarded=False` lets
    calls reach loopback and private addresses: only for providers a site admin marked as
    local (judging.llm.outbound)."""

    def __init__(
        self, *, transport: httpx.BaseTransport | None = None, guarded: bool = True
    ) -> None:
        if transport is None:
            transport = GuardedTransport() if guarded else httpx.HTTPTransport(trust_env=False)
        self._http = httpx.Client(transport=transport, follow_redirects=False, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def chat(self, request: ChatRequest) -> ChatResult:
        url, headers, body = _prepared(request)
        started = time.monotonic()
        try:
            for _ in range(MAX_REDIRECTS + 1):
                with self._http.stream(
                    "POST",
                    url,
                    content=body,
                    headers=headers,
                    timeout=call_timeout(request.timeout),
                ) as response:
                    if response.is_redirect:
                        url = _redirect_target(url, response, started)
                        continue
                    limit = (
                        MAX_RESPONSE_BYTES if response.status_code == 200 else MAX_ERROR_BODY_BYTES
                    )
                    content, truncated = _read(response, limit)
                    break
            else:
                raise _too_many_redirects(started)
        except httpx.TimeoutException:
            raise _timeout_error(request, started) from None
        except httpx.HTTPError as exc:
            raise _connection_error(exc, started) from None
        return _result(response.status_code, response.headers, content, truncated, started)


def _result(
    status: int, headers: httpx.Headers, content: bytes, truncated: bool, started: float
) -> ChatResult:
    """The chat completion in an answer already read, or the JudgeError it stands for (the
    one classification of statuses and bodies, for the sync and the async client)."""
    latency = _ms(started)
    if status != 200:
        message, code = _error_detail(content)
        permanent = status in PERMANENT_STATUSES or "content_filter" in code
        retryable = not permanent and (status in RETRYABLE_STATUSES or status >= 500)
        raise JudgeError(
            f"HTTP {status}: {message}".strip(),
            retryable=retryable,
            status=status,
            code=code or f"http_{status}",
            retry_after=_retry_after(headers) if status in (429, 503) else None,
            latency_ms=latency,
        )
    if truncated:
        raise JudgeError(
            f"the answer is larger than {MAX_RESPONSE_BYTES:,} bytes",
            retryable=False,
            status=200,
            code="too_large",
            latency_ms=latency,
        )
    try:
        data = json.loads(content)
        choice = data["choices"][0]
        answer = _clean(choice["message"].get("content") or "")
        finish_reason = str(choice.get("finish_reason") or "")[:40]
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise JudgeError(
            "the server answered 200 with a body that is not a chat completion",
            retryable=True,
            status=200,
            code="bad_body",
            latency_ms=latency,
        ) from None
    if finish_reason == "content_filter":
        raise JudgeError(
            "the provider's content filter refused to answer",
            retryable=False,
            status=200,
            code="content_filter",
            latency_ms=latency,
        )
    return ChatResult(
        content=answer,
        finish_reason=finish_reason,
        prompt_tokens=max(0, prompt_tokens),
        completion_tokens=max(0, completion_tokens),
        latency_ms=latency,
        raw=data,
    )


def _timeout_error(request: ChatRequest, started: float) -> JudgeError:
    return JudgeError(
        f"no answer within {request.timeout:g} s",
        retryable=True,
        code="timeout",
        latency_ms=_ms(started),
    )


def _connection_error(exc: Exception, started: float) -> JudgeError:
    reason = str(exc) if "refused to connect" in str(exc) else type(exc).__name__
    return JudgeError(
        f"connection failed: {reason}",
        retryable="refused to connect" not in reason,
        code="address_refused" if "refused to connect" in reason else "connection",
        latency_ms=_ms(started),
    )


def _too_many_redirects(started: float) -> JudgeError:
    return JudgeError(
        f"more than {MAX_REDIRECTS} redirects",
        retryable=False,
        code="redirect",
        latency_ms=_ms(started),
    )


def _redirect_target(url: str, response: httpx.Response, started: float) -> str:
    """The next URL of a redirect judge calls may follow, or a permanent JudgeError:
    only 307/308 (which re-send the POST as it was) to the same origin."""
    target = str(response.url.join(response.headers.get("location", "")))
    if response.status_code not in (307, 308) or not same_origin(url, target):
        raise JudgeError(
            f"HTTP {response.status_code}: the provider redirected the call to "
            f"{target[:200]}; judge calls follow no redirect to another host or method",
            retryable=False,
            status=response.status_code,
            code="redirect",
            latency_ms=_ms(started),
        )
    return target


def _prepared(request: ChatRequest) -> tuple[str, dict[str, str], bytes]:
    url = request.base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if request.api_key:
        headers["Authorization"] = f"Bearer {request.api_key}"
    return url, headers, json.dumps(request.body(), ensure_ascii=False).encode()


def call_timeout(total: float) -> httpx.Timeout:
    """Per-request timeouts: connecting takes at most CONNECT_TIMEOUT_SECONDS (or the
    total, if shorter), no read or write waits longer than the total; the async client also
    bounds the whole call (redirects and a slow trickle of bytes included) by the total."""
    return httpx.Timeout(total, connect=min(CONNECT_TIMEOUT_SECONDS, total), pool=None)


class AsyncOpenAICompatibleClient:
    """The asyncio twin of OpenAICompatibleClient (the same checks, limits and errors), for
    the judging engine: one per event loop, many calls in flight on its connection pool.
    `max_connections`: the pool's size (the engine admits no more calls than this); a hung
    call holds one connection, never a thread or a process. Every call is bounded in total
    by its request's timeout, whatever the server trickles."""

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        guarded: bool = True,
        max_connections: int = 512,
    ) -> None:
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        if transport is None:
            transport = (
                GuardedAsyncTransport(limits=limits)
                if guarded
                else httpx.AsyncHTTPTransport(trust_env=False, limits=limits)
            )
        self._http = httpx.AsyncClient(
            transport=transport, follow_redirects=False, trust_env=False, limits=limits
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat(self, request: ChatRequest) -> ChatResult:
        url, headers, body = _prepared(request)
        started = time.monotonic()
        try:
            async with asyncio.timeout(request.timeout):
                for _ in range(MAX_REDIRECTS + 1):
                    async with self._http.stream(
                        "POST",
                        url,
                        content=body,
                        headers=headers,
                        timeout=call_timeout(request.timeout),
                    ) as response:
                        if response.is_redirect:
                            url = _redirect_target(url, response, started)
                            continue
                        limit = (
                            MAX_RESPONSE_BYTES
                            if response.status_code == 200
                            else MAX_ERROR_BODY_BYTES
                        )
                        content, truncated = await _aread(response, limit)
                        break
                else:
                    raise _too_many_redirects(started)
        except (TimeoutError, httpx.TimeoutException):
            raise _timeout_error(request, started) from None
        except httpx.HTTPError as exc:
            raise _connection_error(exc, started) from None
        return _result(response.status_code, response.headers, content, truncated, started)


async def _aread(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the body, and whether there was more."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
