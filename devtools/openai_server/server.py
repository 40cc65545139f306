"""The fake server itself: request parsing, OpenAI-style replies and errors, latency,
rate limits and fault injection (FakeOpenAIServer), and the threaded HTTP plumbing that
can be stopped cleanly."""

from __future__ import annotations

import dataclasses
import hmac
import json
import math
import random
import socket
import socketserver
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from devtools.openai_server.answers import (
    STYLES,
    count_tokens,
    detect_skills_in_messages,
    expected_metadata,
    expected_pair_choices,
    expected_scores,
    garbage_reply,
    is_metadata_prompt,
    prompt_text_of,
    prompt_tokens_of,
    render_answer,
    render_metadata_answer,
    render_pair_answer,
    truncate_tokens,
    wrong_json_reply,
)
from devtools.openai_server.config import (
    FAULT_KINDS,
    ServerConfig,
    number_setting,
    updated_config,
)
from judging.prompts.pairwise import FIRST_MARK, SECOND_MARK

HOST = "127.0.0.1"
DEFAULT_MODEL = "fake-flask-judge"
MAX_BODY_BYTES = 16 * 1024 * 1024
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


# --------------------------------------------------------------------------------------------
# Requests and replies
# --------------------------------------------------------------------------------------------


class ApiError(Exception):
    """An OpenAI-style error answer."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None,
        *,
        param: str | None = None,
        type: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.param, self.type, self.headers = param, type, dict(headers or {})

    def reply(self) -> _Reply:
        body = {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }
        return _Reply(self.status, body, self.headers)


class RequestHeaders(Protocol):
    """What the routes read of a request's headers: a plain mapping in tests, the handler's
    `http.client.HTTPMessage` when served."""

    def get(self, name: str, /) -> str | None: ...


@dataclasses.dataclass
class _Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    fault: str | None = None
    rate_limited: bool = False
    usage: Mapping[str, int] | None = None


@dataclasses.dataclass
class _ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    temperature: float
    n: int
    seed: int | None
    max_tokens: int | None
    json_mode: bool


def _parse_chat(payload: Any) -> _ChatRequest:
    if not isinstance(payload, dict):
        raise ApiError(400, "The request body must be a JSON object.", "invalid_type")
    model = payload.get("model")
    if model is None:
        raise ApiError(
            400, "You must provide a model parameter.", "missing_required_parameter", param="model"
        )
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model must be a non-empty string.", "invalid_type", param="model")
    messages = payload.get("messages")
    if messages is None:
        raise ApiError(
            400,
            "Missing required parameter: 'messages'.",
            "missing_required_parameter",
            param="messages",
        )
    if not isinstance(messages, list) or not messages:
        raise ApiError(
            400, "messages must be a non-empty array.", "invalid_value", param="messages"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ApiError(
                400, f"messages[{i}] must be an object.", "invalid_type", param=f"messages[{i}]"
            )
        if message.get("role") not in _ROLES:
            raise ApiError(
                400,
                f"Invalid value for 'messages[{i}].role'.",
                "invalid_value",
                param=f"messages[{i}].role",
            )
        content = message.get("content")
        if not (
            isinstance(content, str | list)
            or (content is None and message["role"] in ("assistant", "tool", "function"))
        ):
            raise ApiError(
                400,
                f"Invalid type for 'messages[{i}].content'.",
                "invalid_type",
                param=f"messages[{i}].content",
            )

    def number(name: str, default: float, low: float, high: float) -> float:
        value = payload.get(name)
        if value is None:
            return default
        try:
            return number_setting(value, name, low, high)
        except ValueError as exc:
            raise ApiError(400, f"Invalid '{name}': {exc}.", "invalid_value", param=name)

    def integer(name: str, low: int, high: int | None = None) -> int | None:
        value = payload.get(name)
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < low
            or (high is not None and value > high)
        ):
            bounds = f"between {low} and {high}" if high is not None else f">= {low}"
            raise ApiError(
                400, f"Invalid '{name}': must be an integer {bounds}.", "invalid_value", param=name
            )
        return value

    temperature = number("temperature", 0.0, 0.0, 2.0)
    number("top_p", 1.0, 0.0, 1.0)
    n = integer("n", 1, 128) or 1
    seed = integer("seed", -(2**63))
    max_tokens = integer("max_completion_tokens", 1) or integer("max_tokens", 1)
    if payload.get("stream"):
        raise ApiError(
            400,
            "Streaming is not supported by this server; send stream=false.",
            "unsupported_value",
            param="stream",
        )
    response_format = payload.get("response_format")
    json_mode = False
    if response_format is not None:
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind not in ("text", "json_object", "json_schema"):
            raise ApiError(
                400, "Invalid 'response_format.type'.", "invalid_value", param="response_format"
            )
        json_mode = kind != "text"
    return _ChatRequest(model, messages, temperature, n, seed, max_tokens, json_mode)


def _error(status: int, message: str, code: str | None, **kwargs: Any) -> _Reply:
    return ApiError(status, message, code, **kwargs).reply()


def _new_stats() -> dict[str, Any]:
    return {
        "requests": 0,
        "completions": 0,
        "rate_limited": 0,
        "by_status": {},
        "by_fault": {},
        "by_path": {},
        "in_flight": 0,
        "max_concurrent": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "started": time.time(),
    }


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class FakeOpenAIServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers like a FLASK judge.

    `start()` binds (port 0 = a free port) and serves from background threads; `url` is the
    base URL for clients (`http://127.0.0.1:PORT/v1`); `stop()` shuts down and joins every
    thread. Also a context manager. `configure()`, `stats()` and `reset()` (or the HTTP
    endpoints under `/_admin/`) change and observe it at run time.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        style: str = "python_dict",
        latency: float | tuple[float, float] = 0.0,
        rpm: int | None = None,
        tpm: int | None = None,
        rate_window: float = 60.0,
        faults: Mapping[str, float] | None = None,
        fault_rate: float | None = None,
        fault_kinds: Sequence[str] | None = None,
        fault_seed: int = 0,
        fail_first: int = 0,
        fail_first_kind: str = "http_503",
        hang_seconds: float = 30.0,
        na_rate: float = 0.0,
        position_bias: float = 0.0,
        content_scores: bool = False,
        length_bias: float = 0.0,
        self_preference: str = "",
        bandwagon: float = 0.0,
        distraction: float = 0.0,
        metadata_truth: Mapping[str, Mapping[str, Any]] | None = None,
        metadata_wrong_rate: float = 0.0,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
        log_requests: bool = False,
    ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("port must be an integer between 0 and 65535")
        updates: dict[str, Any] = {
            "style": style,
            "latency": latency,
            "rpm": rpm,
            "tpm": tpm,
            "rate_window": rate_window,
            "faults": faults or {},
            "fault_seed": fault_seed,
            "fail_first": fail_first,
            "fail_first_kind": fail_first_kind,
            "hang_seconds": hang_seconds,
            "na_rate": na_rate,
            "position_bias": position_bias,
            "content_scores": content_scores,
            "length_bias": length_bias,
            "self_preference": self_preference,
            "bandwagon": bandwagon,
            "distraction": distraction,
            "metadata_truth": metadata_truth or {},
            "metadata_wrong_rate": metadata_wrong_rate,
            "api_key": api_key,
            "models": list(models) if models is not None else None,
        }
        if fault_rate is not None or fault_kinds is not None:
            if faults:
                raise ValueError("give either faults or fault_rate/fault_kinds")
            del updates["faults"]
            updates["fault_rate"] = fault_rate
            updates["fault_kinds"] = list(fault_kinds) if fault_kinds is not None else None
        self._config = updated_config(ServerConfig(), updates)
        self._port = port
        self.log_requests = log_requests
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._reset_locked(stats=True)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("the server is already started")
        self._stopping.clear()
        httpd = _HTTPServer((HOST, self._port), _Handler, self)
        self._httpd = httpd
        self._port = httpd.server_address[1]
        self._serve_thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-openai-serve-{self._port}",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: wakes sleeping/hanging requests, closes every connection, joins all
        threads. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout)
        httpd.join_handlers(timeout)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None and not self._port:
            raise RuntimeError("the server is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, without `/v1` (the admin endpoints live here)."""
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI base URL: `http://127.0.0.1:PORT/v1`."""
        return f"{self.base_url}/v1"

    # -- configuration and stats -------------------------------------------------------------

    @property
    def config(self) -> ServerConfig:
        return self._config

    def configure(self, **updates: Any) -> dict[str, Any]:
        """Change settings at run time (same names as the constructor); returns the config.

        A new `fault_seed` reseeds the fault and latency draws; a new `fail_first` makes the
        next that-many requests fail."""
        with self._lock:
            self._config = updated_config(self._config, updates)
            if "fault_seed" in updates:
                self._seed_locked()
            if "fail_first" in updates:
                self._fail_remaining = self._config.fail_first
            return self._config.as_dict()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            stats = json.loads(json.dumps(self._stats))
            stats["fail_first_remaining"] = self._fail_remaining
            stats["uptime"] = round(time.time() - stats.pop("started"), 3)
            return stats

    def reset(self) -> None:
        """Zero the stats, forget the rate-limit windows, reseed the draws, re-arm fail_first."""
        with self._lock:
            self._reset_locked(stats=True)

    def _seed_locked(self) -> None:
        self._fault_rng = random.Random(f"faults:{self._config.fault_seed}")
        self._latency_rng = random.Random(f"latency:{self._config.fault_seed}")

    def _reset_locked(self, stats: bool) -> None:
        self._seed_locked()
        self._fail_remaining = self._config.fail_first
        self._request_times: deque[float] = deque()
        self._token_events: deque[tuple[float, int]] = deque()
        if stats:
            in_flight = getattr(self, "_stats", {}).get("in_flight", 0)
            self._stats = _new_stats()
            self._stats["in_flight"] = in_flight

    # -- bookkeeping called by the handler ---------------------------------------------------

    def _enter(self, path: str) -> None:
        with self._lock:
            stats = self._stats
            stats["requests"] += 1
            stats["by_path"][path] = stats["by_path"].get(path, 0) + 1
            stats["in_flight"] += 1
            stats["max_concurrent"] = max(stats["max_concurrent"], stats["in_flight"])

    def _leave(self) -> None:
        with self._lock:
            self._stats["in_flight"] -= 1

    def _record(self, reply: _Reply, status: str | None = None) -> None:
        with self._lock:
            stats = self._stats
            key = status or ("dropped" if reply.drop else str(reply.status))
            stats["by_status"][key] = stats["by_status"].get(key, 0) + 1
            if reply.fault:
                stats["by_fault"][reply.fault] = stats["by_fault"].get(reply.fault, 0) + 1
            if reply.rate_limited:
                stats["rate_limited"] += 1
            if reply.usage and reply.status == 200 and status is None:
                stats["completions"] += 1
                for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
                    stats[name] += reply.usage[name]

    # -- routing -----------------------------------------------------------------------------

    def _handle(self, method: str, path: str, headers: RequestHeaders, body: bytes) -> _Reply:
        try:
            if path == "/health":
                return self._only(method, "GET") or _Reply(200, {"status": "ok"})
            if path == "/v1/models" or path.startswith("/v1/models/"):
                return self._only(method, "GET") or self._check_auth(headers) or self._models(path)
            if path == "/v1/chat/completions":
                return (
                    self._only(method, "POST")
                    or self._check_auth(headers)
                    or self._chat(headers, body)
                )
            return _error(404, f"Invalid URL ({method} {path})", "unknown_url")
        except ApiError as exc:
            return exc.reply()
        except Exception:
            traceback.print_exc()
            return _error(
                500, "Internal error of the fake server.", "fake_server_bug", type="server_error"
            )

    @staticmethod
    def _only(method: str, allowed: str) -> _Reply | None:
        if method == allowed:
            return None
        return _error(
            405,
            f"Method {method} not allowed here; use {allowed}.",
            "method_not_allowed",
            headers={"Allow": allowed},
        )

    def _check_auth(self, headers: RequestHeaders) -> _Reply | None:
        key = self._config.api_key
        if key is None:
            return None
        given = headers.get("Authorization") or ""
        scheme, _, token = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode()):
            return None
        message = "You didn't provide an API key." if not given else "Incorrect API key provided."
        return _error(401, message, "invalid_api_key")

    def _model_names(self) -> tuple[str, ...]:
        return self._config.models or (DEFAULT_MODEL,)

    def _models(self, path: str) -> _Reply:
        def card(name: str) -> dict[str, Any]:
            return {"id": name, "object": "model", "created": 0, "owned_by": "flaskweb-fake"}

        if path == "/v1/models":
            return _Reply(200, {"object": "list", "data": [card(m) for m in self._model_names()]})
        name = path[len("/v1/models/") :]
        if self._config.models is None or name in self._config.models:
            return _Reply(200, card(name))
        return _error(404, f"The model '{name}' does not exist.", "model_not_found", param="model")

    def _admin(self, method: str, path: str, body: bytes) -> _Reply:
        if path == "/_admin/stats":
            return self._only(method, "GET") or _Reply(200, self.stats())
        if path == "/_admin/reset":
            if reply := self._only(method, "POST"):
                return reply
            self.reset()
            return _Reply(200, {"reset": True})
        if path == "/_admin/config":
            if method == "GET":
                return _Reply(200, self._config.as_dict())
            if reply := self._only(method, "POST"):
                return reply
            try:
                updates = json.loads(body or b"{}")
                if not isinstance(updates, dict):
                    raise ValueError("the body must be a JSON object")
                return _Reply(200, self.configure(**updates))
            except ValueError as exc:
                return _error(400, str(exc), "invalid_config")
        return _error(404, f"Invalid URL ({method} {path})", "unknown_url")

    # -- chat completions --------------------------------------------------------------------

    def _chat(self, headers: RequestHeaders, body: bytes) -> _Reply:
        cfg = self._config
        try:
            payload = json.loads(body)
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.", "invalid_json")
        request = _parse_chat(payload)
        if cfg.models is not None and request.model not in cfg.models:
            return _error(
                404,
                f"The model '{request.model}' does not exist.",
                "model_not_found",
                param="model",
            )
        forced = (headers.get("X-Fault") or "").strip() or None
        if forced is not None and forced != "none" and forced not in FAULT_KINDS:
            return _error(
                400,
                f"Unknown X-Fault {forced!r}; known: none, " + ", ".join(FAULT_KINDS),
                "invalid_fault",
            )
        style = (headers.get("X-Style") or "").strip() or cfg.style
        if style not in STYLES:
            return _error(400, f"Unknown X-Style {style!r}.", "invalid_style")
        if request.json_mode:
            style = "json"

        prompt_text = prompt_text_of(request.messages)
        skills = detect_skills_in_messages(request.messages)
        prompt_tokens = prompt_tokens_of(request.messages)
        samples: list[tuple[Mapping[str, Any], str]] = []
        pairwise = FIRST_MARK in prompt_text and SECOND_MARK in prompt_text
        metadata_prompt = is_metadata_prompt(prompt_text)
        for index in range(request.n):
            if metadata_prompt:
                proposal = expected_metadata(
                    prompt_text, truth=cfg.metadata_truth, wrong_rate=cfg.metadata_wrong_rate
                )
                samples.append((proposal, render_metadata_answer(proposal, style)))
                continue
            if pairwise:
                verdicts = expected_pair_choices(
                    prompt_text,
                    skills,
                    cfg.position_bias,
                    content_scores=cfg.content_scores,
                    bandwagon=cfg.bandwagon,
                    distraction=cfg.distraction,
                )
                samples.append((verdicts, render_pair_answer(verdicts, style)))
                continue
            scores: Mapping[str, int | str] = expected_scores(
                prompt_text,
                skills,
                request.seed,
                temperature=request.temperature,
                index=index,
                na_rate=cfg.na_rate,
                content_scores=cfg.content_scores,
                length_bias=cfg.length_bias,
                self_preference=cfg.self_preference,
            )
            samples.append((scores, render_answer(scores, style)))
        planned = prompt_tokens + sum(count_tokens(text) for _, text in samples)

        with self._lock:
            limited = self._rate_limit_locked(cfg, planned)
            if limited is not None:
                return limited
            if forced is not None:
                fault = None if forced == "none" else forced
            elif self._fail_remaining > 0:
                self._fail_remaining -= 1
                fault = cfg.fail_first_kind
            else:
                fault = self._draw_fault_locked(cfg)
            delay = self._draw_latency_locked(cfg)
            rate_headers = self._rate_headers(cfg)

        if fault == "timeout":
            return _Reply(0, drop=True, delay=cfg.hang_seconds, fault=fault)
        if fault == "disconnect":
            return _Reply(0, drop=True, delay=delay, fault=fault)
        if fault in ("http_500", "http_503", "http_429", "content_filter", "bad_request"):
            reply = _FAULT_ERRORS[fault]().reply()
            reply.headers.update(rate_headers)
            reply.headers["X-Fake-Fault"] = fault
            reply.delay, reply.fault = delay, fault
            return reply

        key = f"{prompt_text}\x1f{request.seed}"
        choices: list[dict[str, Any]] = []
        completion_tokens = 0
        for index, (scores, text) in enumerate(samples):
            finish = "stop"
            if fault == "garbage":
                text = garbage_reply(f"{key}\x1f{index}")
            elif fault == "wrong_json":
                text = wrong_json_reply(scores, key)
            elif fault == "empty":
                text = ""
            elif fault == "truncated":
                text, finish = text[: len(text) // 2], "length"
            if request.max_tokens is not None and count_tokens(text) > request.max_tokens:
                text, finish = truncate_tokens(text, request.max_tokens), "length"
            completion_tokens += count_tokens(text)
            message = {"role": "assistant", "content": text, "refusal": None}
            choices.append(
                {"index": index, "message": message, "logprobs": None, "finish_reason": finish}
            )
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        body_out = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "system_fingerprint": "fp_fakeflask",
            "choices": choices,
            "usage": usage,
        }
        headers_out = dict(rate_headers)
        if fault:
            headers_out["X-Fake-Fault"] = fault
        return _Reply(200, body_out, headers_out, delay=delay, fault=fault, usage=usage)

    def _rate_limit_locked(self, cfg: ServerConfig, tokens: int) -> _Reply | None:
        now = time.monotonic()
        horizon = now - cfg.rate_window
        while self._request_times and self._request_times[0] <= horizon:
            self._request_times.popleft()
        while self._token_events and self._token_events[0][0] <= horizon:
            self._token_events.popleft()
        kind: str | None = None
        retry = 0.0  # always set below when `kind` is
        if cfg.rpm is not None and len(self._request_times) >= cfg.rpm:
            kind, limit, used = "requests", cfg.rpm, len(self._request_times)
            oldest = self._request_times[len(self._request_times) - cfg.rpm]
            retry = oldest + cfg.rate_window - now
        elif cfg.tpm is not None:
            used = sum(t for _, t in self._token_events)
            if used + tokens > cfg.tpm:
                kind, limit = "tokens", cfg.tpm
                retry, freed = cfg.rate_window, 0
                for when, spent in self._token_events:
                    freed += spent
                    if used - freed + tokens <= cfg.tpm:
                        retry = when + cfg.rate_window - now
                        break
        if kind is not None:
            seconds = max(1, math.ceil(retry))
            unit = "RPM" if kind == "requests" else "TPM"
            message = (
                f"Rate limit reached on {kind} per minute ({unit}): Limit {limit}, "
                f"Used {used}, Requested {1 if kind == 'requests' else tokens}. "
                f"Please try again in {seconds}s."
            )
            reply = _error(
                429,
                message,
                "rate_limit_exceeded",
                type=kind,
                headers={"Retry-After": str(seconds)},
            )
            reply.headers.update(self._rate_headers(cfg))
            reply.rate_limited = True
            return reply
        self._request_times.append(now)
        self._token_events.append((now, tokens))
        return None

    def _rate_headers(self, cfg: ServerConfig) -> dict[str, str]:
        headers = {}
        if cfg.rpm is not None:
            headers["x-ratelimit-limit-requests"] = str(cfg.rpm)
            remaining = max(0, cfg.rpm - len(self._request_times))
            headers["x-ratelimit-remaining-requests"] = str(remaining)
        if cfg.tpm is not None:
            headers["x-ratelimit-limit-tokens"] = str(cfg.tpm)
            used = sum(t for _, t in self._token_events)
            headers["x-ratelimit-remaining-tokens"] = str(max(0, cfg.tpm - used))
        return headers

    def _draw_fault_locked(self, cfg: ServerConfig) -> str | None:
        if not cfg.faults:
            return None
        draw = self._fault_rng.random()
        for kind in FAULT_KINDS:
            rate = cfg.faults.get(kind, 0.0)
            if draw < rate:
                return kind
            draw -= rate
        return None

    def _draw_latency_locked(self, cfg: ServerConfig) -> float:
        if isinstance(cfg.latency, tuple):
            return self._latency_rng.uniform(*cfg.latency)
        return cfg.latency


_FAULT_ERRORS = {
    "http_500": lambda: ApiError(
        500,
        "The server had an error while processing your request.",
        "internal_error",
        type="server_error",
    ),
    "http_503": lambda: ApiError(
        503,
        "The server is overloaded or not ready yet.",
        "overloaded",
        type="server_error",
        headers={"Retry-After": "1"},
    ),
    "http_429": lambda: ApiError(
        429,
        "Rate limit reached on requests. Please try again in 1s.",
        "rate_limit_exceeded",
        type="requests",
        headers={"Retry-After": "1"},
    ),
    "content_filter": lambda: ApiError(
        400,
        "The response was filtered due to the prompt triggering the content management policy.",
        "content_filter",
        param="prompt",
    ),
    "bad_request": lambda: ApiError(400, "Invalid request (injected fault).", "bad_request"),
}


# --------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks its handler threads and connections so `stop()` can
    close and join them all."""

    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, app: FakeOpenAIServer) -> None:
        self.app = app
        self._track_lock = threading.Lock()
        self._handler_threads: set[threading.Thread] = set()
        self._connections: set[socket.socket] = set()
        self._closing = False
        super().__init__(address, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would look up the host's FQDN (a DNS query); not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]

    def process_request(  # type: ignore[override]  # TCP: a socket, never UDP's (bytes, socket)
        self, request: socket.socket, client_address: Any
    ) -> None:
        with self._track_lock:
            if self._closing:
                self.shutdown_request(request)
                return
            thread = threading.Thread(
                target=self._work,
                args=(request, client_address),
                name=f"fake-openai-handler-{self.server_address[1]}",
                daemon=True,
            )
            self._handler_threads.add(thread)
            self._connections.add(request)
        thread.start()

    def _work(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._track_lock:
                self._connections.discard(request)
                self._handler_threads.discard(threading.current_thread())
            self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return  # the client went away
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._track_lock:
            self._closing = True
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def join_handlers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._track_lock:
            threads = list(self._handler_threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _BadBody(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    sys_version = ""
    timeout = 120  # an idle keep-alive connection is closed after this many seconds
    server: _HTTPServer

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.app.log_requests:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size_line = self.rfile.readline(1024)
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise _BadBody(400, "Malformed chunked body.")
                total += size
                if total > MAX_BODY_BYTES:
                    raise _BadBody(413, "Request body too large.")
                if size == 0:
                    while self.rfile.readline(1024).strip():
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise _BadBody(400, "Invalid Content-Length.")
        if length < 0:
            raise _BadBody(400, "Invalid Content-Length.")
        if length > MAX_BODY_BYTES:
            raise _BadBody(413, "Request body too large.")
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        app = self.server.app
        path = urlsplit(self.path).path
        if len(path) > 1:
            path = path.rstrip("/")
        try:
            body = self._read_body()
        except _BadBody as exc:
            self.close_connection = True
            self._write(_error(exc.status, str(exc), "invalid_body"))
            return
        if path.startswith("/_admin/"):
            self._write(app._admin(method, path, body))
            return
        app._enter(path)
        try:
            reply = app._handle(method, path, self.headers, body)
            if reply.drop:
                app._record(reply)
                if reply.delay:
                    app._stopping.wait(reply.delay)
                self.close_connection = True
                return
            if reply.delay and app._stopping.wait(reply.delay):
                app._record(reply, status="aborted")
                self.close_connection = True
                return
            app._record(reply)
        finally:
            app._leave()
        self._write(reply)

    def _write(self, reply: _Reply) -> None:
        data = json.dumps(reply.body).encode("utf-8")
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (ConnectionError, TimeoutError):
            self.close_connection = True
