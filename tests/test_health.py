"""The health probes (/healthz, /readyz: docs/OPERATIONS.md): what a load balancer and docker
compose ask, over plain HTTP, on the server's own address."""

from __future__ import annotations

import socket

import pytest
from django.db import connection

from flaskweb import health

#: what a load balancer sends: the server's own address, no cookie, plain HTTP
PROBE = {"HTTP_HOST": "10.11.12.13:8000"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture
def production(settings):
    """HTTPS redirect on and a host list the probe's address is not in."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["study.example.org"]


def test_healthz_answers_ok_without_the_database_a_cookie_or_a_redirect(client, production):
    # no database access is allowed in this test: the probe must not need one
    response = client.get("/healthz", **PROBE)
    assert response.status_code == 200
    assert response.content == b"ok\n"
    assert not response.cookies
    assert "no-cache" in response["Cache-Control"]
    assert client.head("/healthz", **PROBE).status_code == 200
    assert client.post("/healthz", HTTP_HOST="study.example.org").status_code == 405


@pytest.mark.django_db
def test_readyz_is_200_with_each_check_when_everything_answers(client, production):
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "redis": "ok"},
    }
    assert not response.cookies
    assert "Retry-After" not in response


@pytest.mark.django_db
def test_readyz_says_redis_is_not_configured_on_the_embedded_default(client, settings):
    settings.REDIS_URL = None
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 200
    assert response.json()["checks"]["redis"] == "not configured"


@pytest.mark.django_db
def test_readyz_is_503_naming_a_migration_the_database_has_not_applied(client, settings):
    # given: the database forgot its latest annotation migration (rolled back after the test)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE id = (SELECT id FROM django_migrations"
            " WHERE app = 'annotation' ORDER BY name DESC LIMIT 1) RETURNING name"
        )
        (name,) = cursor.fetchone()
    # when
    response = client.get("/readyz", **PROBE)
    # then
    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.FLASKWEB_RETRY_AFTER_SECONDS)
    body = response.json()
    assert body["status"] == "not ready"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["migrations"] == f"unapplied: annotation.{name}"


@pytest.mark.django_db
def test_readyz_is_503_when_the_database_does_not_answer(client, monkeypatch):
    # the readiness check opens a connection of its own, here to a port nobody listens on
    monkeypatch.setitem(connection.settings_dict, "PORT", str(_closed_port()))
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    checks = response.json()["checks"]
    assert checks["database"].startswith("unreachable")
    assert checks["migrations"] == "not checked (no database)"
    assert checks["redis"] == "ok"


@pytest.mark.django_db
def test_readyz_is_503_when_redis_does_not_answer(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    response = client.get("/readyz", **PROBE)
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"].startswith("unreachable")
    assert checks["database"] == "ok"


@pytest.mark.django_db
def test_a_failing_probe_is_logged_once_when_it_changes_not_per_probe(client, settings, caplog):
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    health._last_ready[0] = True
    with caplog.at_level("WARNING", logger="flaskweb.health"):
        for _ in range(3):
            assert client.get("/readyz", **PROBE).status_code == 503
    assert [r.getMessage() for r in caplog.records if r.name == "flaskweb.health"] == [
        "readiness: not ready: {'redis': 'unreachable (ConnectionError)'}"
    ]
    assert not [r for r in caplog.records if r.name == "django.request"]
    health._last_ready[0] = True
