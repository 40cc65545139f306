"""Where judge calls may go (judging.llm.outbound, judging.llm.clients): public addresses only
unless a site admin marks the provider as local, checked when the socket opens; no
redirect to another origin; error bodies read and stored up to 2 KB. Driven through real
HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpcore
import pytest

from devtools.openai_server import FakeOpenAIServer, admin_stats
from judging.llm import outbound
from judging.llm.clients import (
    MAX_ERROR_BODY_BYTES,
    ChatRequest,
    JudgeError,
    OpenAICompatibleClient,
)
from judging.models import JudgeRun, Judgment, JudgmentStatus, Provider, RunStatus
from judging.services import judge_response, judge_run_create, provider_problems
from tests.annotation.test_assignments import make_dataset
from tests.judging.test_runs import llm_judge, response_ids, running


class Recorder(BaseHTTPRequestHandler):
    """Answers as the test says (`server.reply(handler)`), and records every request."""

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.seen.append((self.path, dict(self.headers)))
        self.server.reply(self)

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    servers = []

    def make(reply):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        server.seen, server.reply = [], reply
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=2, models=("m1", "m2"))


def chat(url, *, local=True, key="sk-test"):
    client = OpenAICompatibleClient(guarded=not local)
    try:
        return client.chat(
            ChatRequest(base_url=url, model="m", messages=[], api_key=key, timeout=5)
        )
    finally:
        client.close()


# --- addresses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("172.16.5.4", "private"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "not a public"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("fec0::1", "site-local"),
    ],
)
def test_addresses_that_are_not_public_are_refused_with_the_reason(address, why):
    assert why in outbound.address_problem(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address):
    assert outbound.address_problem(address) == ""


@pytest.mark.parametrize(
    ("address", "why"),
    [
        # 6to4 (2002::/16): the IPv4 address is bits 16-47
        ("2002:7f00:1::", "a 6to4 address of 127.0.0.1, a loopback address"),
        ("2002:a9fe:a9fe::", "a 6to4 address of 169.254.169.254, a cloud metadata address"),
        ("2002:a00:1::", "a 6to4 address of 10.0.0.1, a private address"),
        ("2002:6440:1::", "a 6to4 address of 100.64.0.1, not a public address"),
        ("2002:6464:64c8::", "a 6to4 address of 100.100.100.200, a cloud metadata address"),
        # Teredo (2001::/32): the client is the bitwise NOT of the last 32 bits
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "a Teredo address of 127.0.0.1, a loopback address",
        ),
        # NAT64, well-known (64:ff9b::/96) and local-use (64:ff9b:1::/48) prefixes
        ("64:ff9b::7f00:1", "a NAT64 address of 127.0.0.1, a loopback address"),
        ("64:ff9b::a9fe:a9fe", "a NAT64 address of 169.254.169.254, a cloud metadata address"),
        ("64:ff9b::c0a8:10", "a NAT64 address of 192.168.0.16, a private address"),
        (
            "64:ff9b:1::a9fe:a9fe",
            "a local-use NAT64 address of 169.254.169.254, a cloud metadata address",
        ),
        # IPv4-mapped and IPv4-compatible
        ("::ffff:10.1.2.3", "an IPv4-mapped address of 10.1.2.3, a private address"),
        ("::127.0.0.1", "an IPv4-compatible address of 127.0.0.1, a loopback address"),
    ],
)
def test_an_ipv6_address_carrying_a_refused_ipv4_address_is_refused_as_that_address(address, why):
    # was: 2002:7f00:1:: and 2002:a9fe:a9fe:: passed as public IPv6 addresses
    assert outbound.address_problem(address).endswith(f" is {why}")


def test_an_ipv6_address_carrying_a_public_ipv4_address_is_judged_by_its_form():
    # 6to4, IPv4-mapped and well-known NAT64 (an IPv6-only network with DNS64 reaches a
    # public API so) go where the IPv4 address is: public
    for address in ("2002:808:808::", "::ffff:8.8.8.8", "64:ff9b::808:808"):
        assert outbound.address_problem(address) == "", address
    # Teredo tunnels, deprecated IPv4-compatible addresses and a local translator are not
    # public, whatever IPv4 address they carry
    for address in (
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
        "::8.8.8.8",
        "64:ff9b:1::808:808",
    ):
        assert outbound.address_problem(address).endswith("(of 8.8.8.8), not a public address")


def test_a_name_that_resolves_to_a_6to4_address_of_the_metadata_service_is_refused_at_connect_time(
    monkeypatch,
):
    monkeypatch.setattr(outbound, "_resolve", lambda host, port: ["2002:a9fe:a9fe::"])
    with pytest.raises(outbound.AddressRefused, match="169.254.169.254, a cloud metadata"):
        outbound.GuardedBackend().connect_tcp("wrapped.example", 80, timeout=1)


def test_the_guarded_client_does_not_connect_to_loopback(http_server):
    # given a server on 127.0.0.1 that would answer
    server, url = http_server(lambda h: h.send_response(200))
    # when a client for providers that are not local calls it, by address and by name
    for target in (url, url.replace("127.0.0.1", "localhost")):
        with pytest.raises(JudgeError) as caught:
            chat(target + "/v1", local=False)
        # then the connection was never made, for good (no retry)
        assert caught.value.code == "address_refused" and not caught.value.retryable
        assert "loopback" in str(caught.value) and "marks as local" in str(caught.value)
    assert server.seen == []


def test_the_guard_sits_in_httpx_where_the_transport_puts_it():
    transport = outbound.GuardedTransport()
    assert isinstance(transport._pool._network_backend, outbound.GuardedBackend)
    with pytest.raises(outbound.AddressRefused):
        transport._pool._network_backend.connect_tcp("127.0.0.1", 9, timeout=1)


def test_a_name_that_resolves_to_loopback_now_is_refused_at_connect_time(monkeypatch):
    # DNS rebinding: the name was public when the provider was saved, loopback now
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])
    monkeypatch.setattr(outbound, "_resolve", lambda host, port: next(answers))
    assert outbound.host_problem("rebind.example") == ""
    with pytest.raises(outbound.AddressRefused, match="127.0.0.1"):
        outbound.GuardedBackend().connect_tcp("rebind.example", 80, timeout=1)


def test_a_non_local_provider_on_a_private_address_cannot_be_declared():
    errors = provider_problems(
        base_urls=["http://127.0.0.1:8000/v1"],
        api_key_env="",
        api_key_file="",
        is_local=False,
        prices={},
    )
    assert "loopback" in errors["base_urls"] and "mark the provider as local" in errors["base_urls"]
    assert not provider_problems(
        base_urls=["http://127.0.0.1:8000/v1"],
        api_key_env="",
        api_key_file="",
        is_local=True,
        prices={},
    )


def test_a_provider_at_a_6to4_address_of_loopback_is_treated_as_loopback():
    url = "http://[2002:7f00:1::]:8000/v1"
    settings = {"base_urls": [url], "api_key_env": "", "api_key_file": "", "prices": {}}
    # not local: refused like http://127.0.0.1:8000/v1, with the address it stands for
    problem = provider_problems(**settings, is_local=False)["base_urls"]
    assert "127.0.0.1, a loopback address" in problem and "mark the provider as local" in problem
    # local: allowed like http://127.0.0.1:8000/v1 (the admin's decision)
    assert not provider_problems(**settings, is_local=True)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://host/v1", "http:// or https://"),
        ("https://user:pw@host/v1", "no user name or password"),
        ("https://host/v1?x=1", "no query"),
        ("https:///v1", "no host"),
    ],
)
def test_provider_urls_are_plain_origins(url, problem):
    assert problem in outbound.url_problem(url)


# --- redirects and error bodies --------------------------------------------------------------


def _redirect_to(location, status=302):
    def reply(handler):
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return reply


def test_a_redirect_to_another_host_is_refused_and_the_key_never_goes_there(http_server):
    # given an attacker's server and a provider that redirects to it (307 keeps the body)
    attacker, attacker_url = http_server(lambda h: h.send_response(200))
    _, url = http_server(_redirect_to(attacker_url.replace("127.0.0.1", "localhost") + "/x", 307))
    # when
    with pytest.raises(JudgeError) as caught:
        chat(url + "/v1")
    # then
    assert caught.value.code == "redirect" and not caught.value.retryable
    assert "redirected the call" in str(caught.value)
    assert attacker.seen == []


def test_a_same_origin_307_is_followed_but_a_302_is_not(http_server):
    def reply(handler):
        if handler.path == "/v1/chat/completions":
            return _redirect_to("/v2/chat/completions", 307)(handler)
        body = json.dumps(
            {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server, url = http_server(reply)
    assert chat(url + "/v1").content == "ok"
    assert [path for path, _ in server.seen] == ["/v1/chat/completions", "/v2/chat/completions"]
    _, other = http_server(_redirect_to("/v2/chat/completions", 302))
    with pytest.raises(JudgeError, match="302"):
        chat(other + "/v1")


def test_an_error_body_is_read_and_stored_truncated(http_server):
    # given a provider answering 500 with 1 MB of text
    def reply(handler):
        body = b"<html>" + b"x" * 1_000_000
        handler.send_response(500)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    _, url = http_server(reply)
    # when / then
    with pytest.raises(JudgeError) as caught:
        chat(url + "/v1")
    assert caught.value.status == 500 and len(str(caught.value)) <= MAX_ERROR_BODY_BYTES
    assert str(caught.value).startswith("HTTP 500: <html>xxx")


# --- through a run --------------------------------------------------------------------------


def test_a_run_on_a_provider_not_marked_local_never_reaches_a_loopback_server(project, dataset):
    with FakeOpenAIServer(style="json") as server:
        # given a provider saved when its name pointed elsewhere (not local)
        judge = llm_judge(project, server)
        Provider.objects.filter(pk=judge.provider_id).update(is_local=False)
        run = running(judge_run_create(judge=judge, dataset=dataset))
        # when
        judge_response(run_id=run.pk, response_id=response_ids(run)[0])
        # then
        judgment = Judgment.objects.get(run=run)
        assert judgment.status == JudgmentStatus.FAILED and "loopback" in judgment.error
        assert admin_stats(server.base_url)["requests"] == 0


def test_a_base_url_the_provider_no_longer_declares_gets_no_call(project, dataset):
    with FakeOpenAIServer(style="json") as server:
        judge = llm_judge(project, server)
        run = running(judge_run_create(judge=judge, dataset=dataset))
        Provider.objects.filter(pk=judge.provider_id).update(base_urls=["http://127.0.0.1:9/v1"])
        judge_response(run_id=run.pk, response_id=response_ids(run)[0])
        judgment = Judgment.objects.get(run=run)
        assert "is not a base URL of provider" in judgment.error
        assert admin_stats(server.base_url)["requests"] == 0
        assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_connect_errors_other_than_the_guard_stay_retryable():
    with pytest.raises(JudgeError) as caught:
        chat("http://127.0.0.1:9/v1")
    assert caught.value.retryable and caught.value.code == "connection"
    assert issubclass(outbound.AddressRefused, httpcore.ConnectError)
