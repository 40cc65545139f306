"""503 instead of 500 when the database or Redis is briefly gone (docs/SERVING.md, "When the
database or Redis goes away").

A request that loses its database connection (a PostgreSQL restart, a failover, SQLite's
write lock held past its timeout) or Redis (the cache, the broker) did nothing wrong: the same
request a few seconds later succeeds. It gets 503 with Retry-After, a short page (or the
API's JSON error), and one warning line in the log instead of an error with a traceback; the
annotate and review pages retry it by themselves (static/js/submit_retry.js).

Two hooks see these errors, because Django converts an exception to a response at every
middleware: `server_error` (the root URLconf's handler500) for everything outside DRF, views
and middleware alike (the session and the user are loaded from the database by middleware),
and `flaskweb.api_errors.api_exception_handler` for DRF views (the same JSON body). Any other
exception stays a 500. Both close a connection that no longer answers, so the next request
on this thread opens a fresh one (Django would close it at the end of the request too;
CONN_HEALTH_CHECKS makes the next request check a persistent one before use). Django calls
handler500 only with DEBUG off: with DEBUG on (`make demo`) a page shows Django's debug page
instead, while the API still answers 503.
"""

from __future__ import annotations

import logging
import sys
from typing import TypeVar

import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.template import loader
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger("flaskweb.unavailable")
R = TypeVar("R", bound=HttpResponseBase)

#: What a lost database or Redis raises. Django's own classes wrap psycopg's and sqlite3's;
#: psycopg's are there for a raw connection used outside Django's wrapper. OperationalError
#: also covers a serialization failure, a deadlock and a lock or statement timeout: all of
#: them succeed when tried again. kombu's is the broker refusing a task message.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    RedisConnectionError,
    RedisTimeoutError,
    BrokerError,
)

#: The API's 503 body (docs/API.md, "Errors").
API_BODY = {
    "detail": "the service is briefly unavailable (its database or cache did not answer); "
    "try again after Retry-After seconds",
    "code": "service_unavailable",
}


def retry_after() -> int:
    """Seconds a client should wait before trying again (FLASKWEB_RETRY_AFTER_SECONDS)."""
    return max(1, int(settings.FLASKWEB_RETRY_AFTER_SECONDS))


def unavailable_cause(exc: BaseException | None) -> BaseException | None:
    """The database or Redis error behind `exc` (itself, or what it was raised from or
    while handling), or None when `exc` is some other failure."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, UNAVAILABLE_ERRORS):
            return exc
        if exc.__cause__ is not None:
            exc = exc.__cause__
        else:  # what it was raised while handling, unless raised "from None"
            exc = None if exc.__suppress_context__ else exc.__context__
        seen += 1
    return None


def _what(cause: BaseException) -> str:
    if isinstance(cause, (RedisConnectionError, RedisTimeoutError)):
        return "redis"
    if isinstance(cause, BrokerError):
        return "broker"
    return "database"


def unavailable_note(request: HttpRequest | None, cause: BaseException) -> None:
    """Say it once, quietly: one warning line per refused request and no traceback (a
    restart makes hundreds). Then close this thread's database connections that no longer
    answer, so that nothing later in this request (a middleware saving the session) and no
    later request uses one."""
    text = (str(cause).strip().splitlines() or [""])[0][:200]
    logger.warning(
        "503 %s %s: %s unavailable (%s: %s)",
        getattr(request, "method", "?"),
        getattr(request, "path", "?"),
        _what(cause),
        type(cause).__name__,
        text,
    )
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.is_usable():
            conn.close()


def unavailable_headers(response: R) -> R:
    """A 503's headers: Retry-After, never cached, and marked as logged: Django's request
    log would add an error line with the traceback for every 5xx, and unavailable_note has
    said what happened."""
    response["Retry-After"] = str(retry_after())
    response["Cache-Control"] = "no-store"
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def unavailable_response(request: HttpRequest, cause: BaseException) -> HttpResponseBase:
    """503 with Retry-After: the API's JSON error under /api/, the short page elsewhere
    (rendered without the request: its context processors would read the database)."""
    unavailable_note(request, cause)
    if request.path.startswith("/api/"):
        return unavailable_headers(JsonResponse(API_BODY, status=503))
    context = {
        "retry_after": retry_after(),
        # a GET reloads itself; a form's POST is the browser's to send again
        "reload": request.method in ("GET", "HEAD"),
    }
    try:
        body = loader.get_template("503.html").render(context)
    except Exception:  # the page must not fail in its turn: plain text will do
        body = f"The service is briefly unavailable. Try again in {retry_after()} seconds."
    return unavailable_headers(HttpResponse(body, status=503))


def server_error(request: HttpRequest) -> HttpResponseBase:
    """handler500: 503 for a lost database or Redis (unavailable_response), else the
    usual 500: the API's JSON error under /api/, Django's page elsewhere. Django calls it
    with the exception being handled in sys.exc_info(), only when DEBUG is off."""
    cause = unavailable_cause(sys.exc_info()[1])
    if cause is not None:
        return unavailable_response(request, cause)
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": "the server failed to answer this request", "code": "server_error"},
            status=500,
        )
    return defaults.server_error(request)
