"""HTTP client for OpenAI-compatible chat APIs (OpenAI, vLLM, Ollama, llama.cpp server).

Pure module (no Django). One call = one HTTP request: retries, rate limits and caching are
the caller's job (judging services and tasks), so every attempt can be counted and every
failure classified:

- `JudgeError(retryable=True)`: 429 (with the server's Retry-After), 408, 409, 5xx,
  timeouts, connection errors, and a 200 whose body is not the chat-completion JSON;
- `JudgeError(retryable=False)`: 400, 401, 403, 404, 422 and content-filter refusals —
  retrying cannot help, so they are recorded, not retried.

The API key is passed per request and never appears in errors, logs or `request_body`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx

PERMANENT_STATUSES = {400, 401, 403, 404, 405, 413, 422}
RETRYABLE_STATUSES = {408, 409, 425, 429}


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


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from LLM APIs; fall back to our backoff


def _error_detail(response: httpx.Response) -> tuple[str, str]:
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        return response.text[:300], ""
    if isinstance(error, dict):
        return str(error.get("message", ""))[:300], str(
            error.get("code") or error.get("type") or ""
        )
    return str(error)[:300], ""


class OpenAICompatibleClient:
    """Thread-safe; reuse one per process (it pools connections)."""

    def __init__(self, *, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(transport=transport, follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def chat(self, request: ChatRequest) -> ChatResult:
        url = request.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if request.api_key:
            headers["Authorization"] = f"Bearer {request.api_key}"
        started = time.monotonic()
        try:
            response = self._http.post(
                url, json=request.body(), headers=headers, timeout=request.timeout
            )
        except httpx.TimeoutException:
            raise JudgeError(
                f"no answer within {request.timeout:g} s",
                retryable=True,
                code="timeout",
                latency_ms=_ms(started),
            ) from None
        except httpx.HTTPError as exc:
            raise JudgeError(
                f"connection failed: {type(exc).__name__}",
                retryable=True,
                code="connection",
                latency_ms=_ms(started),
            ) from None
        latency = _ms(started)
        if response.status_code != 200:
            message, code = _error_detail(response)
            status = response.status_code
            permanent = status in PERMANENT_STATUSES or "content_filter" in code
            retryable = not permanent and (status in RETRYABLE_STATUSES or status >= 500)
            raise JudgeError(
                f"HTTP {status}: {message}".strip(),
                retryable=retryable,
                status=status,
                code=code or f"http_{status}",
                retry_after=_retry_after(response) if status in (429, 503) else None,
                latency_ms=latency,
            )
        try:
            data = response.json()
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            finish_reason = choice.get("finish_reason") or ""
            usage = data.get("usage") or {}
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
            content=content,
            finish_reason=finish_reason,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_ms=latency,
            raw=data,
        )


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
