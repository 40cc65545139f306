"""The local OpenAI-compatible judge server, driven over real HTTP with urllib (no database)."""

from __future__ import annotations

import ast
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from devtools.openai_server import (
    FAULT_KINDS,
    FLASK_SKILLS,
    NA,
    FakeOpenAIServer,
    admin_configure,
    admin_reset,
    admin_stats,
    count_tokens,
    detect_skills,
    expected_scores,
    prompt_tokens_of,
    render_answer,
)

REPO = Path(__file__).resolve().parents[2]
SKILLS = ["Logical Correctness", "Readability", "Factuality"]
PROMPT = (
    "Skills: Logical Correctness, Readability, Factuality\n"
    "[Instruction]\nWhat is 2 + 2?\n\n[Assistant's Response]\n4, obviously.\n"
)


def call(url, payload=None, *, headers=None, method=None, timeout=10.0, raw=None):
    """(status, headers, parsed JSON body) of one request; HTTP errors are answers too."""
    data = raw if raw is not None else (None if payload is None else json.dumps(payload).encode())
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers, json.load(error)


def chat(server, content=PROMPT, *, headers=None, timeout=10.0, **fields):
    payload = {"model": "judge-1", "messages": [{"role": "user", "content": content}], **fields}
    return call(f"{server.url}/chat/completions", payload, headers=headers, timeout=timeout)


def content_of(body, index=0):
    return body["choices"][index]["message"]["content"]


def assert_openai_error(body, code):
    error = body["error"]
    assert set(error) >= {"message", "type", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert error["code"] == code


@pytest.fixture
def server():
    with FakeOpenAIServer(style="json") as running:
        yield running


# -- answers ---------------------------------------------------------------------------------


def test_chat_completion_has_the_openai_schema(server):
    status, headers, body = chat(server, temperature=0, max_tokens=500, seed=1)
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert body["model"] == "judge-1"
    assert isinstance(body["created"], int) and abs(body["created"] - time.time()) < 60
    [choice] = body["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    messages = [{"role": "user", "content": PROMPT}]
    assert usage["prompt_tokens"] == prompt_tokens_of(messages)
    assert usage["completion_tokens"] == count_tokens(content_of(body))


def test_token_count_heuristic():
    assert count_tokens("") == 0
    assert count_tokens("a bb ccc dddd") == 4
    assert count_tokens("abcde  fghijklmn") == 2 + 3
    assert prompt_tokens_of([{"role": "user", "content": "abcd"}]) == 3 + 4 + 1


def test_models_endpoint(server):
    status, _, body = call(f"{server.url}/models")
    assert status == 200 and body["object"] == "list"
    assert [model["id"] for model in body["data"]] == ["fake-flask-judge"]
    with FakeOpenAIServer(models=["judge-a", "judge-b"]) as strict:
        _, _, body = call(f"{strict.url}/models")
        assert [model["id"] for model in body["data"]] == ["judge-a", "judge-b"]
        status, _, body = chat(strict)  # model "judge-1" is not served
        assert status == 404
        assert_openai_error(body, "model_not_found")


def test_scores_are_deterministic_and_predicted(server):
    answers = [json.loads(content_of(chat(server)[2])) for _ in range(3)]
    assert answers[0] == answers[1] == answers[2]
    expected = expected_scores(PROMPT, SKILLS)
    assert answers[0]["scores"] == expected
    assert expected == expected_scores(PROMPT)  # skills detected from the prompt
    assert list(answers[0]["feedback"]) == SKILLS
    assert all(score in range(1, 6) for score in expected.values())
    other = json.loads(content_of(chat(server, PROMPT + "Another response.")[2]))
    assert other["scores"] == expected_scores(PROMPT + "Another response.", SKILLS)


def test_expected_scores_helper():
    prompts = [f"{PROMPT}\nvariant {i}" for i in range(200)]
    base = [expected_scores(p, SKILLS) for p in prompts]
    values = Counter(score for scores in base for score in scores.values())
    assert set(values) == {1, 2, 3, 4, 5}
    assert base == [expected_scores(p, SKILLS) for p in prompts]
    # temperature 0: seed and sample index change nothing
    assert all(
        expected_scores(p, SKILLS, seed=9, index=3) == b for p, b in zip(prompts, base, strict=True)
    )
    # temperature > 0: within +-1 of the base, a function of (seed, index), and sometimes off
    moved = 0
    for prompt, scores in zip(prompts, base, strict=True):
        for seed in (1, 2):
            sampled = expected_scores(prompt, SKILLS, seed, temperature=0.7)
            assert sampled == expected_scores(prompt, SKILLS, seed, temperature=0.7)
            assert all(abs(sampled[s] - scores[s]) <= 1 for s in SKILLS)
            assert all(1 <= v <= 5 for v in sampled.values())
            moved += sampled != scores
    assert moved > 50


def test_sampling_with_temperature_seed_and_n(server):
    _, _, body = chat(server, temperature=1.0, seed=7, n=3)
    assert [choice["index"] for choice in body["choices"]] == [0, 1, 2]
    for index in range(3):
        scores = json.loads(content_of(body, index))["scores"]
        assert scores == expected_scores(PROMPT, SKILLS, 7, temperature=1.0, index=index)
    _, _, cold = chat(server, temperature=0, seed=7, n=2)
    assert content_of(cold, 0) == content_of(cold, 1)


def test_na_rate(server):
    server.configure(na_rate=0.5)
    prompts = [f"{PROMPT}\n#{i}" for i in range(40)]
    seen = Counter()
    for prompt in prompts[:10]:
        scores = json.loads(content_of(chat(server, prompt)[2]))["scores"]
        assert scores == expected_scores(prompt, SKILLS, na_rate=0.5)
    for prompt in prompts:
        seen.update(v == NA for v in expected_scores(prompt, SKILLS, na_rate=0.5).values())
    assert 30 < seen[True] < 90
    assert NA not in expected_scores(PROMPT, SKILLS, na_rate=0.0).values()


# -- skill detection -------------------------------------------------------------------------


OWN = ["Logical Correctness", "Readability", "My Own Skill"]


@pytest.mark.parametrize(
    ("prompt", "skills"),
    [
        ("Skills: Logical Correctness, readability, My Own Skill\nrest", OWN),
        ('Skills: ["Logical Correctness", "Readability", "My Own Skill"]', OWN),
        ('{"skills": ["logical correctness", "Readability", "My Own Skill"], "id": 3}', OWN),
        ('Skills: [\n  "Logical Correctness",\n  "Readability",\n  "My Own Skill"\n]', OWN),
        ("Skill: Logical Correctness\nScore 1: bad\nSkill: Readability\nSkill: My Own Skill", OWN),
        ("Skills:\n- Logical Correctness: rubric\n- Readability - rubric\n- My Own Skill\n", OWN),
        ("**Skills:** Logical Correctness; Readability; My Own Skill.", OWN),
        # an explicit line first: a `Skills:` line in the item's text below changes nothing
        ("Skills: Logical Correctness, Readability, My Own Skill\n[Item]\nSkills: Java", OWN),
        # the FLASK paper's template: rubric headers, then the item (whose lines are ignored)
        (
            "Rate these categories:\n\nLogical Correctness: Is the answer right?\nScore 1: no\n"
            "\nReadability: Is it clear?\nScore 1: no\n[Instruction]\nWrite a CV.\n"
            "\n[Assistant's Response]\nSkills: Python, Java\nCompleteness matters.\n",
            ["Logical Correctness", "Readability"],
        ),
        # no anchor line: FLASK names in Title Case anywhere; lower case does not count
        (
            "Judge the Factuality and then the Harmlessness; conciseness is irrelevant.",
            ["Factuality", "Harmlessness"],
        ),
        ("Nothing to rate here.", []),
    ],
)
def test_detect_skills(prompt, skills):
    assert detect_skills(prompt) == skills


def test_skills_line_in_the_system_message(server):
    messages = [
        {"role": "system", "content": "You are a judge.\nSkills: Metacognition, Comprehension"},
        {"role": "user", "content": [{"type": "text", "text": "The item. Factuality aside."}]},
    ]
    _, _, body = call(f"{server.url}/chat/completions", {"model": "m", "messages": messages})
    scores = json.loads(content_of(body))["scores"]
    assert scores == expected_scores(
        "The item. Factuality aside.", ["Metacognition", "Comprehension"]
    )


def test_no_skills_found(server):
    _, _, body = chat(server, "Nothing to rate.")
    assert json.loads(content_of(body)) == {"feedback": {}, "scores": {}}


# -- output styles ---------------------------------------------------------------------------


def parse_answer(style, text):
    if style == "json":
        return json.loads(text)["scores"]
    if style == "python_dict":
        return ast.literal_eval(text[text.rindex("{") :])
    tail = text.split("Scores:\n", 1)[1]
    return {
        name: (value if value == NA else int(value))
        for name, value in (line.rsplit(": ", 1) for line in tail.splitlines())
    }


@pytest.mark.parametrize("style", ["json", "python_dict", "lines"])
def test_output_styles(style):
    expected = expected_scores(PROMPT, SKILLS, na_rate=0.3)
    with FakeOpenAIServer(style=style, na_rate=0.3) as server:
        text = content_of(chat(server)[2])
    assert parse_answer(style, text) == expected
    if style == "json":
        assert list(json.loads(text)["feedback"]) == SKILLS
    if style == "python_dict":  # feedback for every skill, then the dict
        assert text.endswith(repr(expected))
        assert all(text.index(f"{s}: The response") < text.rindex("{") for s in SKILLS)
    if style == "lines":
        assert all(text.index(f"- {s}: The response") < text.index("Scores:") for s in SKILLS)
        assert re.search(r"^Logical Correctness: ([1-5]|N/A)$", text, re.MULTILINE)
    assert render_answer(expected, style) == text


def test_style_overrides(server):
    server.configure(style="lines")
    _, _, body = chat(server, response_format={"type": "json_object"})
    assert json.loads(content_of(body))["scores"] == expected_scores(PROMPT, SKILLS)
    _, _, body = chat(server, headers={"X-Style": "python_dict"})
    assert content_of(body).endswith(repr(expected_scores(PROMPT, SKILLS)))


def test_max_tokens_cuts_the_answer(server):
    _, _, full = chat(server)
    _, _, body = chat(server, max_tokens=10)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] <= 10
    assert content_of(full).startswith(content_of(body))


# -- validation and auth ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"{not json", "invalid_json"),
        ([1, 2], "invalid_type"),
        ({"messages": [{"role": "user", "content": "x"}]}, "missing_required_parameter"),
        ({"model": "m"}, "missing_required_parameter"),
        ({"model": "m", "messages": []}, "invalid_value"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "invalid_value"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "invalid_type"),
        ({"model": 3, "messages": [{"role": "user", "content": "x"}]}, "invalid_type"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3}, None),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 0}, None),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}, None),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}, None),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "xml"},
            },
            "invalid_value",
        ),
    ],
)
def test_bad_requests_get_400(server, payload, code):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, _, body = call(f"{server.url}/chat/completions", raw=raw)
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    if code is None:
        code = "unsupported_value" if payload.get("stream") else "invalid_value"
    assert_openai_error(body, code)


def test_unknown_paths_and_methods(server):
    status, _, body = call(f"{server.url}/completions", {"model": "m"})
    assert status == 404
    assert_openai_error(body, "unknown_url")
    status, headers, body = call(f"{server.url}/chat/completions")
    assert status == 405 and headers["Allow"] == "POST"
    assert call(f"{server.base_url}/health")[0] == 200


def test_api_key():
    with FakeOpenAIServer(api_key="sk-test") as server:
        status, _, body = chat(server)
        assert status == 401
        assert_openai_error(body, "invalid_api_key")
        status, _, body = chat(server, headers={"Authorization": "Bearer sk-wrong"})
        assert status == 401
        assert call(f"{server.url}/models")[0] == 401
        assert chat(server, headers={"Authorization": "Bearer sk-test"})[0] == 200
        assert call(f"{server.url}/models", headers={"Authorization": "Bearer sk-test"})[0] == 200
        assert server.stats()["by_status"] == {"401": 3, "200": 2}


# -- faults ----------------------------------------------------------------------------------


def test_http_error_faults_via_header(server):
    cases = {
        "http_500": (500, "internal_error", "server_error"),
        "http_503": (503, "overloaded", "server_error"),
        "http_429": (429, "rate_limit_exceeded", "requests"),
        "content_filter": (400, "content_filter", "invalid_request_error"),
        "bad_request": (400, "bad_request", "invalid_request_error"),
    }
    for kind, (status, code, type_) in cases.items():
        got, headers, body = chat(server, headers={"X-Fault": kind})
        assert got == status, kind
        assert_openai_error(body, code)
        assert body["error"]["type"] == type_
        assert headers["X-Fake-Fault"] == kind
        if status in (429, 503):
            assert headers["Retry-After"] == "1"
    assert server.stats()["by_fault"] == dict.fromkeys(cases, 1)


def test_content_faults_via_header(server):
    expected = expected_scores(PROMPT, SKILLS)
    normal = content_of(chat(server)[2])

    _, _, body = chat(server, headers={"X-Fault": "truncated"})
    text = content_of(body)
    assert body["choices"][0]["finish_reason"] == "length"
    assert 0 < len(text) < len(normal) and normal.startswith(text)
    with pytest.raises(ValueError):
        json.loads(text)

    _, _, body = chat(server, headers={"X-Fault": "garbage"})
    text = content_of(body)
    assert text and "{" not in text
    with pytest.raises(ValueError):
        json.loads(text)

    _, _, body = chat(server, headers={"X-Fault": "empty"})
    assert content_of(body) == "" and body["usage"]["completion_tokens"] == 0

    variants = set()
    for i in range(12):
        _, _, body = chat(server, f"{PROMPT}{i}", headers={"X-Fault": "wrong_json"})
        text = content_of(body)
        assert text.startswith('{"feedback": {')
        try:
            parsed = json.loads(text)
        except ValueError:
            variants.add("malformed")
        else:
            assert "scores" not in parsed
            variants.add("missing_scores")
    assert variants == {"malformed", "missing_scores"}

    _, _, body = chat(server, headers={"X-Fault": "none"})
    assert json.loads(content_of(body))["scores"] == expected
    status, _, body = chat(server, headers={"X-Fault": "meteor"})
    assert status == 400
    assert_openai_error(body, "invalid_fault")


def test_timeout_fault_hangs_past_the_client_timeout():
    with FakeOpenAIServer(hang_seconds=20) as server:
        started = time.monotonic()
        with pytest.raises((TimeoutError, socket.timeout)):
            chat(server, headers={"X-Fault": "timeout"}, timeout=0.3)
        assert time.monotonic() - started < 3
        assert server.stats()["by_status"] == {"dropped": 1}
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 3  # stop() wakes the hanging handler


def test_timeout_fault_closes_without_an_answer():
    with (
        FakeOpenAIServer(hang_seconds=0.2) as server,
        pytest.raises(http.client.RemoteDisconnected),
    ):
        chat(server, headers={"X-Fault": "timeout"}, timeout=5)


def test_disconnect_fault(server):
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        chat(server, headers={"X-Fault": "disconnect"})
    assert chat(server)[0] == 200  # the server carries on


def fault_sequence(server, count):
    kinds = []
    for i in range(count):
        status, headers, _ = chat(server, f"{PROMPT}{i}")
        kinds.append(headers.get("X-Fake-Fault"))
        assert (status == 200) == (kinds[-1] in (None, "garbage", "empty"))
    return kinds


def test_fault_rates_are_seeded_and_statistical():
    kinds = ["http_500", "garbage", "empty", "bad_request"]
    with FakeOpenAIServer(fault_rate=0.4, fault_kinds=kinds, fault_seed=11) as server:
        first = fault_sequence(server, 300)
        stats = server.stats()
    counts = Counter(first)
    assert 90 <= sum(counts[k] for k in kinds) <= 150  # 120 expected
    assert all(15 <= counts[k] <= 50 for k in kinds)  # 30 each expected
    assert stats["by_fault"] == {k: counts[k] for k in kinds}
    with FakeOpenAIServer(faults=dict.fromkeys(kinds, 0.1), fault_seed=11) as again:
        assert fault_sequence(again, 60) == first[:60]  # same seed, same faults
        again.configure(fault_seed=12)
        assert fault_sequence(again, 60) != first[:60]


def test_fail_first(server):
    server.configure(fail_first=3, fail_first_kind="http_500")
    statuses = [chat(server)[0] for _ in range(5)]
    assert statuses == [500, 500, 500, 200, 200]
    server.reset()  # re-arms the first failures
    assert chat(server)[0] == 500
    assert chat(server, headers={"X-Fault": "none"})[0] == 200  # a forced choice wins
    assert server.stats()["fail_first_remaining"] == 2


# -- rate limits, latency, concurrency -------------------------------------------------------


def run_threads(count, target):
    results = [None] * count
    barrier = threading.Barrier(count)

    def work(i):
        barrier.wait()
        results[i] = target(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_rpm_limit_gives_429_with_retry_after():
    with FakeOpenAIServer(rpm=5, latency=0.05) as server:
        results = run_threads(12, lambda i: chat(server))
        statuses = Counter(status for status, _, _ in results)
        assert statuses == {200: 5, 429: 7}
        for status, headers, body in results:
            if status == 429:
                assert 1 <= int(headers["Retry-After"]) <= 60
                assert_openai_error(body, "rate_limit_exceeded")
                assert body["error"]["type"] == "requests"
            assert headers["x-ratelimit-limit-requests"] == "5"
        assert server.stats()["rate_limited"] == 7


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_rate_window_expires():
    with FakeOpenAIServer(rpm=2, rate_window=0.5) as server:
        assert [chat(server)[0] for _ in range(3)] == [200, 200, 429]
        time.sleep(0.6)
        assert chat(server)[0] == 200


def test_tpm_limit():
    with FakeOpenAIServer() as probe:
        chat_tokens = chat(probe)[2]["usage"]["total_tokens"]
    with FakeOpenAIServer(tpm=chat_tokens * 2 + 1) as server:
        results = [chat(server) for _ in range(3)]
        assert [status for status, _, _ in results] == [200, 200, 429]
        _, headers, body = results[2]
        assert body["error"]["type"] == "tokens"
        assert 1 <= int(headers["Retry-After"]) <= 60
        assert server.stats()["total_tokens"] == 2 * chat_tokens


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_latency_fixed_and_range():
    with FakeOpenAIServer(latency=0.3) as server:
        started = time.monotonic()
        assert chat(server)[0] == 200
        assert 0.3 <= time.monotonic() - started < 1.5
        server.configure(latency=[0.1, 0.2])
        for _ in range(3):
            started = time.monotonic()
            chat(server)
            assert 0.1 <= time.monotonic() - started < 1.2
        server.configure(latency=2.0)  # invalid requests are answered at once
        started = time.monotonic()
        status, _, _ = call(f"{server.url}/chat/completions", {"model": "m"})
        assert status == 400 and time.monotonic() - started < 1.0


@pytest.mark.alone  # timing-sensitive: run with the machine to itself
def test_concurrent_requests_are_served_in_parallel():
    with FakeOpenAIServer(latency=0.2) as server:
        started = time.monotonic()
        results = run_threads(20, lambda i: chat(server, f"{PROMPT}{i}"))
        elapsed = time.monotonic() - started
        assert [status for status, _, _ in results] == [200] * 20
        assert elapsed < 2.0  # 20 x 0.2 s = 4 s one after the other
        stats = server.stats()
        assert stats["max_concurrent"] >= 5
        assert stats["completions"] == 20 and stats["in_flight"] == 0


# -- admin endpoints, helpers, lifecycle, CLI ------------------------------------------------


def test_admin_config_and_stats_over_http(server):
    status, _, config = call(f"{server.base_url}/_admin/config")
    assert status == 200 and config["style"] == "json"
    status, _, config = call(
        f"{server.base_url}/_admin/config",
        {"style": "lines", "fault_rate": 0.5, "fault_kinds": ["http_500", "empty"]},
    )
    assert status == 200
    assert config["style"] == "lines"
    assert config["faults"] == {"http_500": 0.25, "empty": 0.25}
    status, _, body = call(f"{server.base_url}/_admin/config", {"colour": "red"})
    assert status == 400
    assert_openai_error(body, "invalid_config")
    status, _, body = call(f"{server.base_url}/_admin/config", {"style": "yaml"})
    assert status == 400
    call(f"{server.base_url}/_admin/config", {"faults": {}})

    text = content_of(chat(server)[2])
    assert text.startswith("Feedback:")
    chat(server, headers={"X-Fault": "http_503"})
    status, _, stats = call(f"{server.base_url}/_admin/stats")
    assert status == 200
    assert stats["requests"] == 2 and stats["completions"] == 1
    assert stats["by_status"] == {"200": 1, "503": 1}
    assert stats["by_fault"] == {"http_503": 1}
    assert stats["by_path"] == {"/v1/chat/completions": 2}
    assert stats["total_tokens"] == stats["prompt_tokens"] + stats["completion_tokens"] > 0
    assert call(f"{server.base_url}/_admin/reset", {})[0] == 200
    assert server.stats()["requests"] == 0


def test_admin_helpers(server):
    config = admin_configure(server.url, latency=0.01, rpm=100)
    assert config["latency"] == 0.01 and config["rpm"] == 100
    chat(server)
    assert admin_stats(server.url)["completions"] == 1
    admin_reset(server.base_url)
    assert admin_stats(server.base_url)["requests"] == 0
    with pytest.raises(ValueError):
        admin_stats("http://example.com/v1")


def test_constructor_validation():
    with pytest.raises(ValueError):
        FakeOpenAIServer(style="yaml")
    with pytest.raises(ValueError):
        FakeOpenAIServer(faults={"meteor": 0.1})
    with pytest.raises(ValueError):
        FakeOpenAIServer(faults={"http_500": 0.7, "empty": 0.7})
    with pytest.raises(ValueError):
        FakeOpenAIServer(latency=(0.5, 0.1))
    assert set(FAULT_KINDS) >= {"http_500", "timeout", "wrong_json", "content_filter"}
    assert len(FLASK_SKILLS) == 12


def test_binds_loopback_and_stops_cleanly():
    before = set(threading.enumerate())
    server = FakeOpenAIServer(latency=5).start()
    assert server.url == f"http://127.0.0.1:{server.port}/v1"
    # a keep-alive connection left open and a request sleeping in its latency
    idle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    idle.request("GET", "/health")
    assert idle.getresponse().read()
    outcome = []

    def sleep_in_latency():
        try:
            outcome.append(chat(server)[0])
        except (OSError, http.client.HTTPException) as error:
            outcome.append(type(error).__name__)

    sleeper = threading.Thread(target=sleep_in_latency)
    sleeper.start()
    time.sleep(0.2)
    assert server.stats()["in_flight"] == 1
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    sleeper.join(5)
    assert outcome == ["RemoteDisconnected"]  # abandoned, not answered
    idle.close()
    # this server's threads (named with its port): another test's server in this process may
    # still be answering a call its client gave up on
    mine = (f"fake-openai-handler-{server.port}", f"fake-openai-serve-{server.port}")
    leaked = [t for t in set(threading.enumerate()) - before if t.name.startswith(mine)]
    assert leaked == []
    with pytest.raises(ConnectionError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1)
    server.stop()  # idempotent


def test_command_line():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = ["--port", "0", "--latency", "0.01", "--rpm", "600", "--fault-rate", "0", "--style"]
    process = subprocess.Popen(
        [sys.executable, "-m", "devtools.openai_server", *args, "json"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
        payload = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
        status, _, body = call(f"{url}/chat/completions", payload)
        assert status == 200
        assert json.loads(content_of(body))["scores"] == expected_scores(PROMPT, SKILLS)
        assert admin_stats(url)["completions"] == 1
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0
    assert json.loads(stderr.strip().splitlines()[-1])["completions"] == 1
