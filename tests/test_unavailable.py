"""A lost database or Redis answers 503 with Retry-After, never 500, and the next request
works again (flaskweb/unavailable.py, docs/SERVING.md "When the database or Redis goes away").

The connections are lost for real: a request waits on a row lock held by the test, and the
test terminates its backend with pg_terminate_backend, as a PostgreSQL restart does; or the
request's thread connects to a port where nothing listens, as while PostgreSQL or Redis is
down. The requests run in one worker thread of their own, so the request after the failure
uses the same thread's connection handling as the failed one.
"""

from __future__ import annotations

import logging
import socket
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.db import OperationalError, connection
from django.test import Client

from annotation.models import Assignment, AssignmentStatus, HumanScore
from annotation.services.assignments import assignment_next
from flaskweb.unavailable import server_error, unavailable_cause
from tests.annotation.test_annotate_views import (
    HX,
    build_campaign,
    build_dataset,
    card_assignment_id,
    score_post,
)
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres_only


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raw_connection() -> psycopg.Connection:
    """A connection of the test's own, outside Django: it holds locks and ends backends."""
    s = connection.settings_dict
    return psycopg.connect(
        dbname=s["NAME"],
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        host=s["HOST"] or None,
        port=s["PORT"] or None,
        autocommit=True,
    )


@pytest.fixture
def worker():
    """One thread for the requests, whose database connection is closed at the end."""
    pool = ThreadPoolExecutor(max_workers=1)
    yield pool
    pool.submit(lambda: connection.close()).result()
    pool.shutdown()


def _campaign(project, annotator, tmp_path):
    dataset = build_dataset(project, tmp_path, texts=["one answer", "another answer"])
    return build_campaign(project, dataset, annotators=[annotator])


@pytest.fixture
def campaign(transactional_db, project, annotator, tmp_path):
    return _campaign(project, annotator, tmp_path)


def _client(worker, user) -> Client:
    client = Client(raise_request_exception=False)
    worker.submit(client.force_login, user).result()
    return client


def _terminate_the_backend_waiting_on_a_lock(raw: psycopg.Connection) -> None:
    """End the backend of this database that waits for a lock (the request's), as a
    PostgreSQL restart ends every backend."""

    def waiting() -> int | None:
        # the caller holds the lock in a transaction, where pg_stat_activity is a snapshot
        # taken at its first read: a backend that connects later would never be seen
        raw.execute("SELECT pg_stat_clear_snapshot()")
        row = raw.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()
        return row[0] if row else None

    raw.execute("SELECT pg_terminate_backend(%s)", [wait_for(waiting, timeout=10)])


def test_the_backend_waiting_on_a_lock_is_found_when_it_connects_after_the_first_look(db):
    # given the test's transaction holding a lock, and a connection that comes later and
    # waits for it (a request's backend is often not there yet when the test first looks)
    raw = _raw_connection()
    with ThreadPoolExecutor(1) as pool, raw.transaction():  # (the lock goes before the wait)
        raw.execute("SELECT pg_advisory_xact_lock(424242)")

        def wait_for_the_lock():
            import time

            time.sleep(0.5)
            with _raw_connection() as late:
                late.execute("SELECT pg_advisory_lock(424242)")

        late = pool.submit(wait_for_the_lock)
        # when the test ends the backend that waits
        _terminate_the_backend_waiting_on_a_lock(raw)
        # then the late one is found and terminated (a snapshot of pg_stat_activity taken
        # at the first look would never show it: the wait timed out instead)
        with pytest.raises(psycopg.OperationalError):
            late.result(timeout=20)
    raw.close()


def _skip_cut_off(worker, client, lease: Assignment, *, api: bool):
    """The request runs in the worker thread; returns its future."""
    if api:
        url, headers = f"/api/v1/annotation/assignments/{lease.pk}/skip/", {}
    else:
        url, headers = f"/assignments/{lease.pk}/skip/", HX
    return worker.submit(client.post, url, {"reason": "the response is cut off"}, headers=headers)


def test_a_request_whose_connection_is_terminated_answers_503_and_the_next_one_works(
    worker, campaign, annotator, caplog
):
    client = _client(worker, annotator)
    caplog.set_level(logging.WARNING)
    for api in (False, True):
        # given a skip that will wait for its assignment's row lock, held by the test
        lease = assignment_next(campaign=campaign, annotator=annotator)
        assert lease is not None
        raw = _raw_connection()
        with raw.transaction():
            raw.execute("SELECT id FROM annotation_assignment WHERE id = %s FOR UPDATE", [lease.pk])
            # when its backend is terminated while it waits
            sent = _skip_cut_off(worker, client, lease, api=api)
            _terminate_the_backend_waiting_on_a_lock(raw)
            response = sent.result(timeout=20)
        raw.close()
        # then 503 with Retry-After: the page or the API's error; one warning, no traceback
        assert response.status_code == 503, api
        assert response["Retry-After"] == "3"
        if api:
            assert response.json()["code"] == "service_unavailable"
        else:
            assert b"Back in a moment" in response.content
            assert b"http-equiv" not in response.content  # a POST is not sent again by itself
        warnings = [r for r in caplog.records if r.name == "flaskweb.unavailable"]
        assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
        assert "terminating connection" in warnings[0].getMessage()
        assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
        caplog.clear()
        assert Assignment.objects.get(pk=lease.pk).status == AssignmentStatus.ACTIVE
        # and the same request sent again on the same thread reconnects and is done
        assert _skip_cut_off(worker, client, lease, api=api).result(timeout=20).status_code == 200
        assert Assignment.objects.get(pk=lease.pk).status == AssignmentStatus.SKIPPED


def test_a_database_that_refuses_connections_is_503_even_in_the_middleware(
    worker, campaign, annotator, caplog
):
    # given the request thread's database address where nothing listens (a stopped server):
    # the session and the user are read by middleware, before any view runs
    client = _client(worker, annotator)
    address = connection.settings_dict

    def down():
        connection.close()
        connection.settings_dict = {**address, "PORT": str(_closed_port())}

    def up():
        connection.close()
        connection.settings_dict = address

    caplog.set_level(logging.WARNING)
    for url in ("/tasks/", "/api/v1/annotation/campaigns/"):
        worker.submit(down).result()
        # when a page or the API is asked for
        response = worker.submit(client.get, url).result(timeout=20)
        # then 503 with Retry-After; a page loads again by itself after it
        assert response.status_code == 503 and response["Retry-After"] == "3", url
        if url == "/tasks/":
            assert b"loads again by itself in 3 seconds" in response.content
            assert b'<meta http-equiv="refresh" content="3">' in response.content
        else:
            assert response.json() == {
                "detail": "the service is briefly unavailable (its database or cache did not "
                "answer); try again after Retry-After seconds",
                "code": "service_unavailable",
            }
        assert "Connection refused" in caplog.records[-1].getMessage()
        assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
        # and once the database is back, the next request is answered
        worker.submit(up).result()
        assert worker.submit(client.get, url).result(timeout=20).status_code == 200


def test_a_lost_redis_is_503_where_the_request_needs_it(db, settings, caplog):
    # given the cache (sign-in throttling counts failures there) on a port where nothing listens
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0",
        }
    }
    caplog.set_level(logging.WARNING)
    # when someone signs in
    response = Client(raise_request_exception=False).post(
        "/login/", {"username": "alice", "password": "wrong"}
    )
    # then 503, said once as a warning
    assert response.status_code == 503 and response["Retry-After"] == "3"
    assert [r.getMessage()[:32] for r in caplog.records if r.name == "flaskweb.unavailable"] == [
        "503 POST /login/: redis unavaila"
    ]


def test_any_other_failure_stays_a_500(rf):
    for path, content_type in [("/tasks/", "text/html"), ("/api/v1/x/", "application/json")]:
        try:
            raise RuntimeError("a bug")
        except RuntimeError:
            response = server_error(rf.get(path))
        assert response.status_code == 500, path
        assert "Retry-After" not in response
        assert response["Content-Type"].startswith(content_type)


def test_an_error_raised_from_a_lost_connection_is_found_behind_it():
    lost = OperationalError("server closed the connection unexpectedly")
    try:
        try:
            raise lost
        except OperationalError as exc:
            raise RuntimeError("could not load the session") from exc
    except RuntimeError as exc:
        assert unavailable_cause(exc) is lost
    try:
        try:
            raise lost
        except OperationalError:
            raise RuntimeError("a decision of its own") from None
    except RuntimeError as exc:
        assert unavailable_cause(exc) is None


# --- a submit sent again is answered as the first was -------------------------------------------


def test_a_submit_sent_again_after_its_answer_was_lost_answers_as_the_first(
    project, annotator, annotator_client, tmp_path
):
    campaign = _campaign(project, annotator, tmp_path)
    lease = assignment_next(campaign=campaign, annotator=annotator)
    assert lease is not None
    # given a submission that was recorded (and the next task claimed) but whose answer the
    # page never got
    data = score_post(lease, "4")
    first = annotator_client.post(f"/assignments/{lease.pk}/submit/", data, headers=HX)
    assert first.status_code == 200
    # when the page sends it again, the same scores
    again = annotator_client.post(f"/assignments/{lease.pk}/submit/", data, headers=HX)
    # then a success with the same next step, and the scores were recorded once
    assert again.status_code == 200
    assert b"Saved." in first.content and b"Saved." in again.content
    assert card_assignment_id(again) == card_assignment_id(first) != lease.pk
    scores = HumanScore.objects.filter(assignment=lease)
    assert scores.count() == 3 and {s.score for s in scores} == {4}
    assert Assignment.objects.filter(annotator=annotator).count() == 2
    # and a different answer sent after it changes nothing
    annotator_client.post(f"/assignments/{lease.pk}/submit/", score_post(lease, "2"), headers=HX)
    assert {s.score for s in HumanScore.objects.filter(assignment=lease)} == {4}
