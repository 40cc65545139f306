"""Judge runs survive their workers, on the production path: the run's batches go through
Redis to real `celery worker -Q judging -P threads -c 8` subprocesses (the documented shape),
whose judging engine calls the local OpenAI-compatible server over HTTP, many calls at a
time, and writes to the test database. Batches of 5 responses and a judge limited to 600
requests a minute make a run of 40 responses last about 4 s, so it can be hit mid-run.

- a worker SIGKILLed mid-run: its unacknowledged (late-ack) messages are delivered again
  after the broker's visibility timeout, and a new worker finishes the run with exactly one
  judgment per (response, sample) and counters equal to the rows;
- a worker killed while it fans the run out: the dispatch message comes back too;
- messages lost altogether (Redis lost its data): the health check fails the run and
  resuming it finishes it, calling the judge only for what was missing;
- cancel: queued tasks do nothing, only the calls in flight are still recorded;
- 30 % injected faults (5xx, hangs past the judge's timeout, truncated, garbage, wrong
  JSON, 429 with Retry-After): every response ends judged, parse_failed or failed.

Isolation: another test session (a CI clone, pytest-xdist, conftest's
`celery_worker_process`) may run workers on the same Redis database and the same `judging`
queue, which would take these tests' messages and purge them. So every test gets its own
kombu key prefix (transport option `global_keyprefix`): this process publishes under it and
its workers (the real `celery worker`, started through `app.worker_main` to set the prefix)
consume under it. The visibility timeout is shortened for the workers through
CELERY_BROKER_VISIBILITY_TIMEOUT (3 s instead of 1 h); it matters only to consumers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis
from django.db import connection
from django.db.models import Sum

from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus
from judging.services import (
    judge_run_create,
    judge_run_set_status,
    judge_run_start,
    judge_runs_fail_stale,
    judge_runs_redispatch_stalled,
)
from tests.annotation.test_assignments import SKILLS, make_dataset
from tests.conftest import REPO, wait_for
from tests.judging.test_runs import llm_judge

pytestmark = pytest.mark.slow

QUEUE = "judging"
PREFIX_ENV = "FLASKWEB_TEST_BROKER_PREFIX"
#: `celery worker` with the app's broker transport options plus this test's key prefix
WORKER = (
    "import os, sys\n"
    "from flaskweb.celery import app\n"
    "app.conf.broker_transport_options = {\n"
    f"    **app.conf.broker_transport_options, 'global_keyprefix': os.environ[{PREFIX_ENV!r}]\n"
    "}\n"
    "app.worker_main(['worker', *sys.argv[1:]])\n"
)
CONCURRENCY = 8
VISIBILITY_TIMEOUT = 3  # seconds, for the workers of these tests
RESPONSES = 40  # 10 items x 4 models
BATCH = 5  # responses per judge_batch_task in these tests' workers
RPM = 600  # the judges' limit: 10 calls a second


class Workers:
    """Celery worker subprocesses on the test database and the private Redis database."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, *, visibility_timeout: int = VISIBILITY_TIMEOUT) -> subprocess.Popen:
        """Start one worker and wait until it consumes (it logs "ready.")."""
        n = len(self.procs)
        log_path = self.log_dir / f"worker-{n}.log"
        env = {**self.env, "CELERY_BROKER_VISIBILITY_TIMEOUT": str(visibility_timeout)}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WORKER,
                    "-Q",
                    QUEUE,
                    "-n",
                    f"recovery{n}@%h",
                    "-P",
                    "threads",
                    "-c",
                    str(CONCURRENCY),
                    "--without-heartbeat",
                    "--without-mingle",
                    "--without-gossip",
                    "--loglevel",
                    "INFO",
                ],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        wait_for(lambda: proc.poll() is not None or b" ready." in log_path.read_bytes(), timeout=60)
        assert proc.poll() is None, f"worker {n} exited at start:\n{self.log(n)}"
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL: no warm shutdown, no acknowledgements, no requeue by the worker."""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def log(self, n: int) -> str:
        return (self.log_dir / f"worker-{n}.log").read_text(errors="replace")[-4000:]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class Broker:
    """This test's corner of the Redis broker: every kombu key starts with `prefix`."""

    client: redis.Redis
    prefix: str

    def purge(self) -> None:
        """Drop every message of this test: queued, delivered and not acknowledged, all."""
        keys = list(self.client.scan_iter(match=f"{self.prefix}*"))
        if keys:
            self.client.delete(*keys)

    def queued(self) -> int:
        """Messages waiting in the judging queue or delivered and not yet acknowledged."""
        waiting = sum(
            self.client.llen(k) for k in self.client.scan_iter(match=f"{self.prefix}{QUEUE}*")
        )
        return waiting + self.client.hlen(f"{self.prefix}unacked")


def _set_transport_options(app, options: dict) -> None:
    """Change this process's broker transport options. kombu pools connections per URL and
    options, so the app's pools are dropped (not closed) and made again on the next send."""
    app.conf.broker_transport_options = options
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def broker(transactional_db, settings):
    """This process publishes under a key prefix of its own, removed at the end."""
    from flaskweb.celery import app

    options = dict(app.conf.broker_transport_options)
    prefix = f"recovery-{os.getpid()}-{uuid.uuid4().hex[:8]}:"
    _set_transport_options(app, {**options, "global_keyprefix": prefix})
    state = Broker(redis.Redis.from_url(app.conf.broker_url), prefix)
    yield state
    _set_transport_options(app, options)
    state.purge()
    state.client.close()


@pytest.fixture
def workers(broker, settings, tmp_path):
    from flaskweb.celery import app

    db = connection.settings_dict
    env = os.environ.copy()
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings_test",
        DATABASE_URL=(
            f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        ),
        REDIS_URL=settings.REDIS_URL,
        CELERY_BROKER_URL=app.conf.broker_url,
        **{PREFIX_ENV: broker.prefix},
        DJANGO_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        FLASKWEB_CACHE_PREFIX=settings.CACHES["default"].get("KEY_PREFIX", ""),
        FLASKWEB_JUDGE_BATCH_SIZE=str(BATCH),
    )
    pool = Workers(env, tmp_path)
    yield pool
    pool.stop_all()


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=10, models=("m1", "m2", "m3", "m4"))


# --- helpers ----------------------------------------------------------------------------------


def judgments(run) -> int:
    return Judgment.objects.filter(run_id=run.pk).count()


def status(run) -> str:
    return JudgeRun.objects.values_list("status", flat=True).get(pk=run.pk)


def _waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:  # autocommit: a fresh statistics snapshot each time
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def assert_recorded_exactly_once(run, dataset) -> Counter:
    """One judgment per response (1 sample), no more; the run's counters are the rows'."""
    rows = Judgment.objects.filter(run_id=run.pk)
    response_ids = set(dataset.items.values_list("responses__pk", flat=True))
    assert len(response_ids) == RESPONSES
    assert rows.count() == RESPONSES
    assert set(rows.values_list("response_id", flat=True)) == response_ids
    assert rows.values("response_id", "sample_index").distinct().count() == RESPONSES
    by_status = Counter(rows.values_list("status", flat=True))
    run = JudgeRun.objects.get(pk=run.pk)
    assert run.done == by_status[JudgmentStatus.OK] + by_status[JudgmentStatus.PARTIAL]
    assert run.failed == by_status[JudgmentStatus.FAILED]
    assert run.parse_failed == by_status[JudgmentStatus.PARSE_FAILED]
    assert run.cached == rows.filter(from_cache=True).count()
    tokens = rows.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert (run.prompt_tokens, run.completion_tokens) == (tokens["p"], tokens["c"])
    # scores: the item's skills, once each, for every parsed judgment
    ok = rows.filter(status=JudgmentStatus.OK)
    assert JudgeScore.objects.filter(judgment__in=ok).count() == ok.count() * len(SKILLS)
    assert not JudgeScore.objects.filter(run_id=run.pk).exclude(judgment__run_id=run.pk).exists()
    return by_status


def worker_logs(workers):
    """On failure, the workers' logs are the first thing to read."""
    return "\n".join(f"--- worker {n}\n{workers.log(n)}" for n in range(len(workers.procs)))


# --- tests ------------------------------------------------------------------------------------


def test_one_worker_of_the_documented_shape_keeps_its_batches_calls_on_the_wire(
    workers, project, dataset
):
    # given a provider answering in 1 s, no limit, one worker (8 threads)
    with FakeOpenAIServer(style="json", latency=1.0) as srv:
        run = judge_run_create(judge=llm_judge(project, srv), dataset=dataset)
        workers.start()
        # when the run goes
        assert judge_run_start(run=run)
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=45)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        stats = srv.stats()
    # then its 8 batches' calls were on the wire together, not one per thread
    assert stats["max_concurrent"] >= 3 * CONCURRENCY, stats["max_concurrent"]
    assert assert_recorded_exactly_once(run, dataset) == {JudgmentStatus.OK: RESPONSES}


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(workers, project, dataset):
    # given a run in progress on one worker (its 8 batches at once, 10 calls a second)
    with FakeOpenAIServer(style="json", latency=0.5) as srv:
        judge = llm_judge(project, srv, requests_per_minute=RPM)
        run = judge_run_create(judge=judge, dataset=dataset)
        first = workers.start()
        assert judge_run_start(run=run)
        wait_for(
            lambda: judgments(run) >= CONCURRENCY and srv.stats()["in_flight"] > 0,
            timeout=30,
            interval=0.01,
        )
        # when the worker is SIGKILLed with calls in flight. Its 8 threads hold all 8
        # batches, so it is not between fetching a message and recording it as
        # unacknowledged (kombu's Redis transport does that in two round trips: a worker
        # killed in between loses that message, late ack or not). Such a lost message is
        # recovered like any other: pause + resume, or the health check's fail + resume
        # (test_a_run_whose_messages_were_lost_is_failed_then_resumed).
        workers.kill(first)
        at_kill = judgments(run)
        assert 0 < at_kill < RESPONSES
        assert status(run) == RunStatus.RUNNING
        # its unacknowledged messages become visible again after the visibility timeout;
        # a worker that starts after that restores them at once
        time.sleep(VISIBILITY_TIMEOUT + 0.5)
        workers.start()
        # then the run completes, every response judged exactly once
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=45)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        by_status = assert_recorded_exactly_once(run, dataset)
        assert by_status == {JudgmentStatus.OK: RESPONSES}
        # a call cut short by the kill is made again (or answered from the cache)
        assert srv.stats()["completions"] + JudgeRun.objects.get(pk=run.pk).cached >= RESPONSES


def test_a_run_whose_worker_was_killed_finishes_by_the_sweep_not_the_broker_hour(
    workers, project, dataset
):
    # given workers with the production visibility timeout (an hour: the killed worker's
    # unacknowledged messages would not come back before that)
    with FakeOpenAIServer(style="json", latency=0.5) as srv:
        judge = llm_judge(project, srv, requests_per_minute=RPM)
        run = judge_run_create(judge=judge, dataset=dataset)
        first = workers.start(visibility_timeout=3600)
        assert judge_run_start(run=run)
        wait_for(
            lambda: judgments(run) >= CONCURRENCY and srv.stats()["in_flight"] > 0,
            timeout=30,
            interval=0.01,
        )
        # when the whole worker is SIGKILLed mid-run and another one starts
        workers.kill(first)
        workers.start(visibility_timeout=3600)
        # which has nothing to judge: the killed worker held every batch, and its messages
        # sit unacknowledged; the beat's sweep finds the run without progress (here: 2 s)
        swept = []
        wait_for(
            lambda: swept.extend(judge_runs_redispatch_stalled(older_than_seconds=2)) or swept,
            timeout=45,
        )
        assert swept == [run.pk] and status(run) == RunStatus.RUNNING
        assert judgments(run) < RESPONSES
        # then the run finishes within seconds, every response judged exactly once
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=45)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        assert assert_recorded_exactly_once(run, dataset) == {JudgmentStatus.OK: RESPONSES}
        assert JudgeRun.objects.get(pk=run.pk).redispatches == 1


def test_a_worker_killed_while_dispatching_the_run_loses_nothing(workers, project, dataset):
    # given the fan-out blocked inside its first batch (the responses table is locked)
    with FakeOpenAIServer(style="json", latency=0.05) as srv:
        run = judge_run_create(judge=llm_judge(project, srv), dataset=dataset)
        db = connection.settings_dict
        lock = psycopg.connect(
            f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
            f"/{db['NAME']}"
        )
        try:
            lock.execute("LOCK TABLE annotation_response IN ACCESS EXCLUSIVE MODE")
            first = workers.start()
            assert judge_run_start(run=run)
            wait_for(lambda: _waiting_for_a_lock() > 0, timeout=30)
            # when the worker is killed in the middle of the dispatch task
            workers.kill(first)
        finally:
            lock.rollback()
            lock.close()
        assert judgments(run) == 0
        time.sleep(VISIBILITY_TIMEOUT + 0.5)
        workers.start()
        # then the dispatch message is delivered again and the run completes
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=30)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        assert_recorded_exactly_once(run, dataset)
        assert srv.stats()["completions"] == RESPONSES


def test_a_run_whose_messages_were_lost_is_failed_then_resumed(workers, broker, project, dataset):
    # given a run half done when its worker died and Redis lost every message
    with FakeOpenAIServer(style="json", latency=0.5) as srv:
        judge = llm_judge(project, srv, requests_per_minute=RPM)
        run = judge_run_create(judge=judge, dataset=dataset)
        first = workers.start()
        assert judge_run_start(run=run)
        wait_for(lambda: judgments(run) >= CONCURRENCY, timeout=30, interval=0.01)
        workers.kill(first)
        broker.purge()
        wait_for(lambda: srv.stats()["in_flight"] == 0, timeout=10)  # the killed calls end
        before = judgments(run)
        calls_before = srv.stats()["completions"]
        # when the health check gives up on it and someone resumes it
        assert judge_runs_fail_stale(older_than_seconds=0) == 1
        assert status(run) == RunStatus.FAILED
        workers.start()
        assert judge_run_start(run=run)
        # then it completes, calling the judge only for the responses without a judgment
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=30)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        assert_recorded_exactly_once(run, dataset)
        cached = JudgeRun.objects.get(pk=run.pk).cached  # killed calls that wrote the cache
        assert srv.stats()["completions"] - calls_before == RESPONSES - before - cached


def test_cancel_stops_the_queued_tasks_and_records_only_the_calls_in_flight(
    workers, broker, project, dataset
):
    # given a run in progress (its batches on the engine, 10 calls a second)
    with FakeOpenAIServer(style="json", latency=0.5) as srv:
        judge = llm_judge(project, srv, requests_per_minute=RPM)
        run = judge_run_create(judge=judge, dataset=dataset)
        workers.start()
        assert judge_run_start(run=run)
        wait_for(lambda: judgments(run) >= CONCURRENCY, timeout=30, interval=0.01)
        # when it is cancelled
        assert judge_run_set_status(run=run, status=RunStatus.CANCELLED)
        cancelled_at = time.monotonic()
        # then within seconds no call leaves any more: each batch reads the run every
        # second and stops launching; its calls on the wire end (0.5 s) and are recorded
        wait_for(lambda: broker.queued() == 0, timeout=30)
        wait_for(lambda: srv.stats()["in_flight"] == 0, timeout=10)
        time.sleep(max(0.0, cancelled_at + 2.5 - time.monotonic()))
        requests = srv.stats()["requests"]
        time.sleep(1.5)
        assert srv.stats()["requests"] == requests  # nothing launched 2.5 s after the cancel
        after = judgments(run)
        assert after < RESPONSES
        assert srv.stats()["completions"] == after  # every answer that came back is recorded
    run = JudgeRun.objects.get(pk=run.pk)
    assert run.status == RunStatus.CANCELLED and run.finished_at is not None
    assert run.done == after and run.failed == run.parse_failed == 0


def test_a_run_with_30_percent_faults_records_every_response_once(workers, project, dataset):
    # given a server failing 30 % of the calls in six ways (5 % each)
    kinds = ["http_500", "timeout", "truncated", "garbage", "wrong_json", "http_429"]
    with FakeOpenAIServer(
        style="json",
        latency=0.2,
        fault_rate=0.3,
        fault_kinds=kinds,
        fault_seed=11,
        hang_seconds=2.0,
    ) as srv:
        # a short timeout (hangs fail after 0.5 s), 3 attempts, and a shared Redis limiter
        # that every 429 pauses for its Retry-After
        judge = llm_judge(
            project, srv, timeout_seconds=0.5, max_attempts=3, requests_per_minute=6000
        )
        run = judge_run_create(judge=judge, dataset=dataset)
        # retries wait up to 8 s before their next attempt: keep the usual visibility
        # timeout, or waiting messages would be delivered twice
        workers.start(visibility_timeout=3600)
        # when
        assert judge_run_start(run=run)
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=50)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        stats = srv.stats()
    # then every response is recorded once: judged, unparseable or failed
    by_status = assert_recorded_exactly_once(run, dataset)
    assert sum(by_status.values()) == RESPONSES
    assert set(stats["by_fault"]) >= {"http_500", "http_429", "garbage"}, stats["by_fault"]
    assert stats["requests"] > RESPONSES  # retries happened
    assert Judgment.objects.filter(run_id=run.pk, attempts__gte=2).exists()  # retried, then ok
    failed = Judgment.objects.filter(run_id=run.pk, status=JudgmentStatus.FAILED)
    # every injected error is retryable: a failure has used all its attempts
    assert all(j.attempts == 3 and j.error for j in failed)
    unparsed = Judgment.objects.filter(run_id=run.pk, status=JudgmentStatus.PARSE_FAILED)
    assert all(j.raw_output or j.error for j in unparsed)
    assert not JudgeScore.objects.filter(judgment__in=unparsed).exists()
