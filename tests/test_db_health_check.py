"""The PostgreSQL health check at the start of a request (flaskweb/postgresql/base.py): no
round trip while the connection is quiet, and a connection the server ended is replaced
before the request uses it, as Django's `SELECT 1` check does (PostgreSQL restarts:
tests/test_unavailable.py, tests/test_faults_e2e.py).

The requests' connections are a worker thread's own, in autocommit as in production (the
test's transaction would make every check fall back to `SELECT 1`).
"""

from __future__ import annotations

import select
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.db import close_old_connections, connection, connections

from flaskweb.postgresql.base import DatabaseWrapper
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def worker():
    pool = ThreadPoolExecutor(max_workers=1)
    yield pool
    pool.submit(lambda: connection.close()).result()
    pool.shutdown()


@pytest.fixture
def asked(monkeypatch):
    """The `SELECT 1` checks run (Django's is_usable), by backend pid."""
    calls: list[int] = []
    original = DatabaseWrapper.is_usable

    def is_usable(self):
        calls.append(self.connection.info.backend_pid)
        return original(self)

    monkeypatch.setattr(DatabaseWrapper, "is_usable", is_usable)
    return calls


def request_statement() -> int:
    """What a request does: connections looked at (request_started), one statement on this
    thread's connection; returns its backend pid."""
    close_old_connections()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_engine_is_this_backend(db):
    assert isinstance(connections["default"], DatabaseWrapper)
    assert connection.health_check_enabled


def test_a_quiet_connection_is_not_asked_select_1(db, worker, asked):
    first = worker.submit(request_statement).result()
    for _ in range(3):
        assert worker.submit(request_statement).result() == first
    assert asked == []


def test_a_connection_the_server_ended_is_replaced_before_the_request_uses_it(db, worker, asked):
    # given a connection the server ends between two requests, as a restart does
    first = worker.submit(request_statement).result()
    s = connection.settings_dict
    with psycopg.connect(
        dbname=s["NAME"], user=s["USER"] or None, host=s["HOST"] or None,
        port=s["PORT"] or None, autocommit=True,
    ) as raw:  # fmt: skip
        raw.execute("SELECT pg_terminate_backend(%s)", [first])

    def ended() -> bool:
        sock = worker.submit(lambda: connection.connection.pgconn.socket).result()
        return bool(select.select([sock], [], [], 0)[0])

    wait_for(ended, timeout=10)
    # when the next request runs, then the check saw it and the request ran on a new session
    second = worker.submit(request_statement).result()
    assert second != first
    assert asked == [first]
