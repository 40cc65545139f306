"""A run's tail does not wait on hung calls (judging.llm.engine): a call running far past its
provider's recent latency is cut and tried again at once (the engine cuts rather than
hedges: docs/JUDGING.md "Hung calls"), the last attempt keeps the judge's whole timeout,
older batches' calls and retries go out first, and a burst of 429s pauses the shared
limiter once, not once per refused call. Against the project's local OpenAI-compatible
server over real HTTP, with its hang injection (a "timeout" fault holds the request for
`hang_seconds` without answering)."""

from __future__ import annotations

import time
import uuid

import pytest

from devtools.openai_server import FakeOpenAIServer
from judging.llm import activity
from judging.llm.engine import INITIAL_WINDOW, Engine, LimitSpec
from judging.llm.ratelimit import LocalRateLimiter
from judging.models import Judgment, JudgmentStatus, RunStatus
from judging.services import judge_batch, judge_run_create
from tests.annotation.test_assignments import make_dataset
from tests.judging.test_engine import calls, drain
from tests.judging.test_runs import llm_judge, response_ids, running


@pytest.fixture
def engine():
    # cuts after 0.3 s (3 x p95 of a 0.05 s server is less) once 5 answers were measured
    engine = Engine(
        max_in_flight=64, backoff_base=0.01, backoff_cap=0.05, cut_floor=0.3, cut_samples=5
    )
    yield engine
    engine.close()


def test_a_call_hung_far_past_the_providers_latency_is_cut_and_tried_again_at_once(engine):
    # given a provider answering in 0.05 s whose first request hangs for 30 s, and calls
    # with a timeout of 20 s and 3 attempts
    provider = f"test-cut:{uuid.uuid4().hex}"
    spec = LimitSpec(name=provider, rpm=None, tpm=None)
    with FakeOpenAIServer(
        style="json", latency=0.05, fail_first=1, fail_first_kind="timeout", hang_seconds=30
    ) as srv:
        started = time.monotonic()
        # when 10 calls go out together (the hung one before any latency was measured)
        outcomes = drain(engine.submit(calls(srv, 10, timeout=20, max_attempts=3), limit=spec))
        elapsed = time.monotonic() - started
        assert srv.stats()["requests"] == 11
    # then the hung call was cut once the others had answered, and answered on its retry,
    # long before its timeout (let alone the hang) was over
    assert all(o.result is not None for o in outcomes) and len(outcomes) == 10
    assert sorted(o.attempts for o in outcomes) == [1] * 9 + [2]
    assert engine.stats["cut"] == 1 and elapsed < 10
    (seen,) = activity.provider_activity([provider])
    assert seen.cut_total == 1 and seen.errors_total == 1 and seen.retries_total == 1


def test_the_last_attempt_is_never_cut(engine):
    provider = f"test-cut:{uuid.uuid4().hex}"
    spec = LimitSpec(name=provider, rpm=None, tpm=None)
    with FakeOpenAIServer(style="json", latency=0.05, hang_seconds=30) as srv:
        assert len(drain(engine.submit(calls(srv, 6), limit=spec))) == 6  # latency known
        # when a call with one attempt hangs
        srv.configure(fail_first=1, fail_first_kind="timeout")
        (outcome,) = drain(engine.submit(calls(srv, 1, timeout=1.0), limit=spec))
    # then it had its whole timeout (1 s, past the 0.3 s cut) and failed by it
    assert outcome.error is not None and outcome.error.code == "timeout"
    assert outcome.error.latency_ms >= 900 and engine.stats["cut"] == 0


def test_an_older_batchs_retry_goes_out_before_a_newer_batchs_calls(engine):
    # given a limit of 10 calls a second (one at a time), and a first batch of 2 calls whose
    # first is refused once (500, retried after a backoff of at most 0.01 s)
    spec = LimitSpec(name=f"test-order:{uuid.uuid4().hex}", rpm=600, tpm=None, burst=1)
    with FakeOpenAIServer(
        style="json", latency=0.02, fail_first=1, fail_first_kind="http_500"
    ) as srv:
        older = engine.submit(calls(srv, 2, max_attempts=3), limit=spec)
        time.sleep(0.02)
        newer = engine.submit(calls(srv, 6), limit=spec)
        finished: dict[str, float] = {}
        while len(finished) < 2:
            for name, batch in (("older", older), ("newer", newer)):
                batch.take(timeout=0.01)
                if batch.finished() and name not in finished:
                    finished[name] = time.monotonic()
    # then the older batch's retry went ahead of the 6 queued calls of the newer one: it
    # finished first (in call order it would have waited for all 6 of them)
    assert finished["older"] < finished["newer"]


def test_a_burst_of_429s_pauses_the_shared_limiter_once(engine, monkeypatch):
    penalties: list[float] = []
    original = LocalRateLimiter.penalize

    async def penalize(self, seconds: float) -> None:
        penalties.append(seconds)
        await original(self, seconds)

    monkeypatch.setattr(LocalRateLimiter, "penalize", penalize)
    # given a declared limit far above what the provider takes, which refuses 3 calls
    # sent together (429, Retry-After 1)
    spec = LimitSpec(name=f"test-429:{uuid.uuid4().hex}", rpm=6000, tpm=None, burst=100)
    with FakeOpenAIServer(
        style="json", latency=0.05, fail_first=3, fail_first_kind="http_429"
    ) as srv:
        outcomes = drain(engine.submit(calls(srv, 4, max_attempts=3), limit=spec))
    # then every worker paused once (the other two 429s answered calls sent before it):
    # each refused call still waited its Retry-After and was answered on its retry
    assert penalties == [1.0]
    assert sorted(o.attempts for o in outcomes) == [1, 2, 2, 2]


@pytest.mark.slow
def test_a_run_finishes_long_before_its_hung_call_would_have(
    project, tmp_path, engine, monkeypatch
):
    # given this process's engine cutting after 0.3 s, and a judge (20 s timeout, 3 attempts)
    # whose provider hangs 30 s on the run's first call
    monkeypatch.setattr(Engine, "_instance", engine)
    dataset = make_dataset(project, tmp_path, items=3, models=("m1", "m2"))
    with FakeOpenAIServer(
        style="python_dict", latency=0.05, fail_first=1, fail_first_kind="timeout", hang_seconds=30
    ) as srv:
        judge = llm_judge(project, srv, timeout_seconds=20, max_attempts=3)
        run = running(judge_run_create(judge=judge, dataset=dataset))
        started = time.monotonic()
        # when its batch runs
        judge_batch(run_id=run.pk, response_ids=response_ids(run))
        elapsed = time.monotonic() - started
    # then the run is done, every judgment made, the hung one on its second attempt
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and elapsed < 10
    rows = Judgment.objects.filter(run=run)
    assert rows.count() == 6 and not rows.exclude(status=JudgmentStatus.OK).exists()
    assert sorted(rows.values_list("attempts", flat=True)) == [1] * 5 + [2]


@pytest.mark.slow
def test_a_provider_with_no_declared_limit_starts_slowly_and_a_429_pauses_its_calls(engine):
    # given a provider with no declared limit that takes 20 calls a second (0.3 s each) and
    # answers the rest with 429 and the seconds until it has room again
    spec = LimitSpec(name=f"test-window:{uuid.uuid4().hex}", rpm=None, tpm=None)
    with FakeOpenAIServer(style="json", latency=0.3, rpm=20, rate_window=1.0) as srv:
        # when 60 calls are handed to the engine at once
        outcomes = drain(engine.submit(calls(srv, 60, max_attempts=20), limit=spec))
        refused = srv.stats()["rate_limited"]
    # then no more than the initial window went out at once (it used to be all 60), and a
    # 429 paused the calls for its Retry-After instead of letting each waiting call run into
    # the next refusal (60 refusals, one per call, before)
    assert all(o.result is not None for o in outcomes) and len(outcomes) == 60
    assert engine.peak_on_wire <= INITIAL_WINDOW
    assert refused < 40
