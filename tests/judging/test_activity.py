"""What judge calls are doing, as any process sees it (judging.llm.activity): the engine's
calls against the project's local OpenAI-compatible server over real HTTP, counted per
provider and per run in the test's Redis (the cache's, under this worker's key prefix) or in
the embedded default's file-based cache; in flight back to 0 when the calls end, and never
held up by a process that died; a run's pace and ETA from its last minute."""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
import time_machine
from django.test import override_settings
from django.utils import timezone

from devtools.openai_server import FakeOpenAIServer
from judging.llm import activity
from judging.llm.engine import Engine, LimitSpec
from tests.conftest import wait_for
from tests.judging.test_engine import calls, drain


@pytest.fixture
def engine():
    engine = Engine(max_in_flight=64, backoff_base=0.01, backoff_cap=0.05)
    yield engine
    engine.close()


def a_provider() -> str:
    """A provider id no other test of this process uses (the counts are per process)."""
    return str(random.randrange(10**9, 10**10))


@pytest.mark.slow  # the 429s' Retry-After: 1 s
def test_a_providers_calls_429s_and_retries_are_counted_and_in_flight_returns_to_0(engine):
    # given a provider with no declared limit that refuses the first 2 calls (429)
    provider = a_provider()
    run = activity.run_key("judge", int(provider))
    spec = LimitSpec(name=f"judge:provider-{provider}:0123456789ab", rpm=None, tpm=None)
    with FakeOpenAIServer(
        style="json", latency=0.2, fail_first=2, fail_first_kind="http_429"
    ) as srv:
        # when 6 calls of a run go out
        batch = engine.submit(calls(srv, 6, max_attempts=3), limit=spec, run=run)
        # then while they are on the wire any process sees them in flight
        wait_for(lambda: activity.provider_activity([provider])[0].in_flight > 0, timeout=5)
        assert len(drain(batch)) == 6
        requests = srv.stats()["requests"]
    (seen,) = activity.provider_activity([provider])
    # and once they ended: none in flight, each attempt counted, the 429s and their retries
    assert seen.in_flight == 0 and seen.calls_total == requests == 8
    assert (seen.throttled_total, seen.retries_total, seen.errors_total) == (2, 2, 0)
    assert (seen.throttled_last_minute, seen.retries_last_minute) == (2, 2)
    assert seen.calls_last_minute == 8 and seen.latency_p50_s >= 0.2
    # the window it learned from the 429s (no declared limit) is shown
    assert seen.window is not None and seen.window < engine.max_in_flight
    mine = activity.run_activity(run)
    assert (mine.in_flight, mine.throttled_last_minute, mine.retries_last_minute) == (0, 2, 2)
    assert mine.judgments_last_minute == 6 and mine.calls_last_minute == 8
    # another run of the same provider counts nothing of these
    assert activity.run_activity(activity.run_key("judge", 1)).calls_last_minute == 0


def _a_call_then_death(provider: str) -> None:
    activity.record_call_start(provider)
    activity.flush()
    os._exit(0)  # killed with its call on the wire: no end is ever recorded


def test_the_calls_of_a_process_that_died_leave_in_flight_but_stay_counted(monkeypatch):
    # given a live process (this one) and a dead one, each with a call on the wire
    monkeypatch.setattr(activity, "FLUSH_EVERY", 0.1)
    monkeypatch.setattr(activity, "STALE_AFTER", 0.5)
    provider = a_provider()
    child = multiprocessing.get_context("fork").Process(target=_a_call_then_death, args=(provider,))
    child.start()
    child.join(10)
    activity.record_call_start(provider)
    try:
        assert activity.provider_activity([provider])[0].in_flight == 2
        # when more than STALE_AFTER passes: the live process rewrote its snapshot, the
        # dead one could not
        time.sleep(0.8)
        (seen,) = activity.provider_activity([provider])
        # then only the live process's call is in flight; both calls were made
        assert seen.in_flight == 1 and seen.calls_total == 2 and seen.processes == 1
    finally:
        activity.record_call_end(provider, outcome="ok", latency_s=0.1, cost_usd=0.002)
    (seen,) = activity.provider_activity([provider])
    assert seen.in_flight == 0 and seen.cost_usd_total == pytest.approx(0.002)


def test_a_runs_pace_and_eta_come_from_its_last_minute_and_need_enough_data():
    provider = a_provider()
    run = activity.run_key("judge", int(provider))
    now = timezone.now()

    def judged(n: int) -> None:
        for _ in range(n):
            activity.record_call_start(provider, run=run)
            activity.record_call_end(provider, outcome="ok", latency_s=1.0, cost_usd=None, run=run)
            activity.record_outcome(provider, run=run)

    # given 2 judgments: too few for a pace
    with time_machine.travel(now - timedelta(seconds=30), tick=False):
        judged(2)
    with time_machine.travel(now, tick=False):
        pace = activity.run_pace(run=run, provider_id=provider, remaining=24, rpm=600)
        assert pace.judgments_per_minute is None and pace.eta_text == "—"
        # when 4 more came 20 s later: 6 in the 30 s since the run's first call
        with time_machine.travel(now - timedelta(seconds=10), tick=False):
            judged(4)
        pace = activity.run_pace(run=run, provider_id=provider, remaining=24, rpm=600)
    # then 12 a minute, and the 24 left take 2 minutes
    assert pace.judgments_per_minute == pytest.approx(12)
    assert pace.eta_seconds == pytest.approx(120) and pace.eta_text == "2 min"
    assert pace.rpm == 600 and not pace.waiting_for_provider


def test_a_run_whose_calls_are_refused_is_said_to_wait_for_its_provider():
    provider = a_provider()
    run = activity.run_key("metadata", int(provider))
    for _ in range(3):
        activity.record_call_start(provider, run=run)
        activity.record_call_end(
            provider, outcome="throttled", latency_s=None, cost_usd=None, run=run
        )
        activity.record_retry(provider, run=run)
    pace = activity.run_pace(run=run, provider_id=provider, remaining=10)
    assert pace.waiting_for_provider and pace.run.throttled_last_minute == 3
    assert pace.provider.throttled_last_minute == 3 and pace.eta_seconds is None


def test_the_embedded_defaults_file_cache_is_shared_the_same_way(tmp_path):
    # given the embedded default's cache (files, no Redis)
    cache = {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache"}
    with override_settings(CACHES={"default": {**cache, "LOCATION": str(tmp_path)}}):
        provider = a_provider()
        activity.record_call_start(provider)
        activity.record_call_end(provider, outcome="timeout", latency_s=None, cost_usd=None)
        activity.record_call_start(provider)
        # then a reader sees the same figures, written as cache files
        (seen,) = activity.provider_activity([provider])
        assert (seen.in_flight, seen.calls_total, seen.errors_total) == (1, 2, 1)
        assert seen.timeouts_total == 1 and list(tmp_path.iterdir())
        activity.record_call_end(provider, outcome="ok", latency_s=0.5, cost_usd=None)
        assert activity.provider_activity([provider])[0].in_flight == 0


def test_a_reader_waits_for_the_write_the_writer_thread_has_in_hand():
    # given a call in flight, written to the store
    provider = a_provider()
    activity.record_call_start(provider)
    assert activity.provider_activity([provider])[0].in_flight == 1
    # and a store whose writes from the writer thread are slow (a busy Redis, a slow disk)
    real_store = activity._store
    writing = threading.Event()

    class SlowStore:
        def __init__(self, store):
            self.store = store

        def write(self, token, snapshot):
            if threading.current_thread().name == "judging-activity":
                writing.set()
                time.sleep(0.5)
            self.store.write(token, snapshot)

        def read(self):
            return self.store.read()

    with mock.patch.object(activity, "_store", lambda: SlowStore(real_store())):
        # when the call ends, the writer thread wakes and takes its snapshot ...
        activity.record_call_end(provider, outcome="ok", latency_s=0.1, cost_usd=None)
        assert writing.wait(5)
        # ... and a reader asks while that write is on its way
        seen = activity.provider_activity([provider])[0]
    # then the reader sees the call ended, not the store as it was before that write
    assert seen.in_flight == 0 and seen.calls_total == 1
