"""Health endpoints for load balancers, docker compose and orchestrators (docs/OPERATIONS.md).

- `/healthz`: the process is alive and answers. Touches nothing else: 200 `ok`, always fast.
- `/readyz`: the process can serve: the database answers a fresh connection within
  READY_TIMEOUT seconds, Redis answers a PING where it is configured (the embedded default
  has none: "not configured"), and every migration of the code is applied. 200 with the
  checks as JSON; 503 with Retry-After and the check that failed.

Both are answered by ProbeMiddleware, first in MIDDLEWARE, before anything else runs: a
load balancer probes plain HTTP on the server's own address, so the probes take no session,
set no cookie, are not redirected to HTTPS, need no CSRF token and no host name from
DJANGO_ALLOWED_HOSTS, and are counted by no rate limit or request metric. Their URL patterns
(flaskweb/urls.py) name them for `reverse` and the access matrix.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from typing import Any

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.migrations.loader import MigrationLoader
from django.db.utils import load_backend
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

logger = logging.getLogger("flaskweb.health")

#: Seconds a readiness check (and a scrape's database and Redis reads) waits for an answer.
READY_TIMEOUT = 2
NOT_CONFIGURED = "not configured"


# --- the checks ---------------------------------------------------------------------------------


def database_check() -> str | None:
    """None when the database answers `SELECT 1`, else what went wrong. PostgreSQL is asked
    on a new connection with a connect and statement timeout, so a database that does not
    answer (a host gone from the network) costs READY_TIMEOUT seconds, not the TCP timeout,
    and a server that refuses new connections (max_connections) is seen; the connection is
    closed at once. SQLite is a file: this thread's own connection."""
    try:
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return None
        db = copy.deepcopy(connections[DEFAULT_DB_ALIAS].settings_dict)
        options = db.setdefault("OPTIONS", {})
        options["connect_timeout"] = READY_TIMEOUT
        timeout = f"-c statement_timeout={READY_TIMEOUT * 1000}"
        options["options"] = (
            f"{options['options']} {timeout}" if options.get("options") else timeout
        )
        fresh = load_backend(db["ENGINE"]).DatabaseWrapper(db, "readiness")
        try:
            with fresh.cursor() as cursor:
                cursor.execute("SELECT 1")
        finally:
            fresh.close()
        return None
    except Exception as exc:  # any failure means "not ready"; the log says which
        return _failed("database", exc)


@functools.cache
def _migrations_in_code() -> tuple[tuple[tuple[str, str], tuple[tuple[str, str], ...]], ...]:
    """Every migration of the code as (app, name) with what it replaces (a squashed one is
    applied when it is recorded itself or all it replaces are). Read from disk once per
    process: the code does not change under a running process."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    return tuple(
        (key, tuple(tuple(r) for r in graph.nodes[key].replaces)) for key in sorted(graph.nodes)
    )


def migrations_unapplied() -> list[str]:
    """The code's migrations the database has not recorded, as "app.name" (one query on this
    thread's connection). Raises when the database cannot be read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations")
        applied = {(app, name) for app, name in cursor.fetchall()}
    return [
        f"{app}.{name}"
        for (app, name), replaces in _migrations_in_code()
        if (app, name) not in applied and not (replaces and set(replaces) <= applied)
    ]


_redis_clients: dict[str, redis.Redis] = {}
_redis_lock = threading.Lock()


def redis_client(url: str) -> redis.Redis:
    """A client of `url` that gives up after READY_TIMEOUT seconds, one per URL and process
    (its pool reconnects after a Redis restart)."""
    with _redis_lock:
        client = _redis_clients.get(url)
        if client is None:
            client = _redis_clients[url] = redis.Redis.from_url(
                url, socket_connect_timeout=READY_TIMEOUT, socket_timeout=READY_TIMEOUT
            )
        return client


def redis_check() -> str | None:
    """None when Redis (the cache and, by default, the broker: REDIS_URL) answers PING;
    NOT_CONFIGURED without REDIS_URL; else what went wrong."""
    if not settings.REDIS_URL:
        return NOT_CONFIGURED
    try:
        redis_client(settings.REDIS_URL).ping()
        return None
    except Exception as exc:
        return _failed("redis", exc)


def _failed(check: str, exc: BaseException) -> str:
    logger.debug("readiness: %s failed: %s: %s", check, type(exc).__name__, exc)
    return f"unreachable ({type(exc).__name__})"


def readiness() -> tuple[bool, dict[str, str]]:
    """(ready, {check: "ok" | what failed}). Migrations are checked only once the database
    answered, on this thread's own connection (the one that serves requests)."""
    checks: dict[str, str] = {}
    database = database_check()
    checks["database"] = database or "ok"
    if database is None:
        try:
            missing = migrations_unapplied()
        except Exception as exc:
            checks["migrations"] = _failed("migrations", exc)
            connection.close_if_unusable_or_obsolete()  # the next request opens a fresh one
        else:
            shown = ", ".join(missing[:5]) + (
                f" and {len(missing) - 5} more" if missing[5:] else ""
            )
            checks["migrations"] = f"unapplied: {shown}" if missing else "ok"
    else:
        checks["migrations"] = "not checked (no database)"
    redis_state = redis_check()
    checks["redis"] = redis_state or "ok"
    ready = all(value in ("ok", NOT_CONFIGURED) for value in checks.values())
    return ready, checks


# --- the views ----------------------------------------------------------------------------------

_last_ready: list[bool] = [True]  # this process's last answer, to log changes only


@require_safe
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain; charset=utf-8")


@require_safe
@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    ready, checks = readiness()
    if ready != _last_ready[0]:
        # one line when the answer changes, not one per probe (probes come every few seconds)
        _last_ready[0] = ready
        if ready:
            logger.warning("readiness: ready again")
        else:
            failed = {name: value for name, value in checks.items() if value != "ok"}
            logger.warning("readiness: not ready: %s", failed)
    body: dict[str, Any] = {"status": "ready" if ready else "not ready", "checks": checks}
    response = JsonResponse(body, status=200 if ready else 503)
    if not ready:
        response["Retry-After"] = str(getattr(settings, "FLASKWEB_RETRY_AFTER_SECONDS", 3))
        # said once above; Django's request log would add a line for every probe
        response._has_been_logged = True  # type: ignore[attr-defined]
    return response


PROBES = {"/healthz": healthz, "/readyz": readyz}


class ProbeMiddleware:
    """Answers GET and HEAD of /healthz and /readyz before any other middleware runs (first
    in MIDDLEWARE): no session, cookie, HTTPS redirect, host check, rate limit or request
    metric."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is not None and request.method in ("GET", "HEAD"):
            return probe(request)
        return self.get_response(request)  # any other method meets CSRF, then 405
