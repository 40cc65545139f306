"""Judge runs go on through a lost database and through a worker's warm shutdown, on the
production path: real `celery worker -Q judging -P threads -c 8` subprocesses (the fixtures
of tests/judging/test_worker_recovery.py: a broker key prefix of their own, batches of 5
responses, a judge paced at 600 requests a minute, so a run of 40 responses lasts about
4 s), the local OpenAI-compatible server over HTTP (it counts the calls it answers).

- The database goes away mid-run: every connection of the worker is terminated with
  `pg_terminate_backend` (what a PostgreSQL restart does to them: "terminating connection
  due to administrator command") and new ones are refused for 1.5 s. The batches keep the
  answers that come back meanwhile and write them when it is back (flaskweb/infra.py;
  judging/services/batches.py): the run finishes within seconds, every response judged
  once, and no call is made twice.
- SIGTERM (a deploy) mid-run: the worker starts no more calls, lets the calls on the wire
  come back, writes them, hands the rest of each batch to a follow-up message, and exits
  within seconds; the next worker finishes the run, and no call is made twice.
"""

from __future__ import annotations

import signal
import time

import psycopg
import pytest
from django.db import connection

from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeRun, JudgmentStatus, RunStatus
from judging.services import judge_run_create, judge_run_start
from tests.conftest import wait_for
from tests.judging.test_runs import llm_judge
from tests.judging.test_worker_recovery import (  # noqa: F401 (broker, dataset, workers: fixtures)
    CONCURRENCY,
    RESPONSES,
    RPM,
    assert_recorded_exactly_once,
    broker,
    dataset,
    judgments,
    status,
    worker_logs,
    workers,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

#: How long the database refuses connections in the outage test (seconds).
OUTAGE = 1.5


def _admin():
    """A connection to the server's `postgres` database (autocommit), for the outage: a
    database's connections cannot be refused from inside it."""
    db = connection.settings_dict
    return psycopg.connect(
        f"postgresql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres",
        autocommit=True,
    )


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_run_whose_database_goes_away_mid_run_finishes_with_every_judgment_and_no_call_twice(
    workers,  # noqa: F811
    project,
    dataset,  # noqa: F811
):
    # given a run in progress on one worker (its 8 batches at once, 10 calls a second)
    with FakeOpenAIServer(style="json", latency=0.5) as srv, _admin() as admin:
        judge = llm_judge(project, srv, requests_per_minute=RPM)
        run = judge_run_create(judge=judge, dataset=dataset)
        workers.start()
        assert judge_run_start(run=run)
        wait_for(
            lambda: judgments(run) >= CONCURRENCY and srv.stats()["in_flight"] > 0,
            timeout=30,
            interval=0.01,
        )
        # when the database goes away: every connection of the worker is terminated and
        # new ones are refused for a while, with calls on the wire
        name = connection.settings_dict["NAME"]
        ours = _backend_pid()  # this process's own connection is kept
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        try:
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> %s",
                [name, ours],
            ).fetchone()[0]
            at_cut = judgments(run)
            time.sleep(OUTAGE)
            during = srv.stats()["completions"]
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        back = time.monotonic()
        # then the run finishes within seconds of the database coming back
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=30)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        finished_after = time.monotonic() - back
        stats = srv.stats()
    assert cut >= 1 and at_cut < RESPONSES
    # the provider was not idle while the database was away, and its answers were kept
    assert during > at_cut
    # every response judged exactly once, and each from its own call: none made twice
    assert assert_recorded_exactly_once(run, dataset) == {JudgmentStatus.OK: RESPONSES}
    assert stats["completions"] == RESPONSES, stats
    assert JudgeRun.objects.get(pk=run.pk).cached == 0
    print(f"database away {OUTAGE} s at judgment {at_cut}; done {finished_after:.1f} s after")


def test_a_warm_shutdown_mid_run_hands_the_rest_to_the_next_worker_and_loses_nothing(
    workers,  # noqa: F811
    broker,  # noqa: F811
    project,
    dataset,  # noqa: F811
):
    # given a run in progress on one worker (its 8 batches at once, 10 calls a second)
    with FakeOpenAIServer(style="json", latency=0.5) as srv:
        judge = llm_judge(project, srv, requests_per_minute=RPM)
        run = judge_run_create(judge=judge, dataset=dataset)
        first = workers.start()
        assert judge_run_start(run=run)
        wait_for(
            lambda: judgments(run) >= CONCURRENCY // 2 and srv.stats()["in_flight"] > 0,
            timeout=30,
            interval=0.01,
        )
        # when the worker is told to stop (SIGTERM: Celery's warm shutdown)
        first.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        try:
            first.wait(timeout=30)
        except Exception:
            pytest.fail(f"the worker did not stop\n{worker_logs(workers)}")
        stopped_in = time.monotonic() - stopping
        # then it stopped within seconds, leaving the run running with the rest queued, and
        # every answer that came back written
        assert first.returncode == 0, worker_logs(workers)
        at_stop = judgments(run)
        assert 0 < at_stop < RESPONSES, at_stop
        assert status(run) == RunStatus.RUNNING
        assert srv.stats()["in_flight"] == 0
        assert srv.stats()["completions"] == at_stop
        assert broker.queued() > 0
        # and the next worker finishes the run
        workers.start()
        try:
            wait_for(lambda: status(run) == RunStatus.DONE, timeout=45)
        except AssertionError:
            pytest.fail(f"run not done: {judgments(run)} judgments\n{worker_logs(workers)}")
        stats = srv.stats()
    # every response judged exactly once, and each from its own call: none made twice
    assert assert_recorded_exactly_once(run, dataset) == {JudgmentStatus.OK: RESPONSES}
    assert stats["completions"] == RESPONSES, stats
    print(f"warm shutdown at judgment {at_stop} took {stopped_in:.1f} s")
