"""What a background task does when it loses its database or its broker (leaf module: imports
no app; every app's tasks use it, so they all follow one rule).

A PostgreSQL restart or failover, a Redis restart, a connection cut by the server or the
network: the task's next query or publish raises, though nothing is wrong with the work
itself, and the service is back within seconds. These are *infrastructure errors*
(`is_infra_error`):

- Django's `OperationalError` / `InterfaceError` and psycopg's, when they say the
  connection is gone: no SQLSTATE (the connection is closed, refused or reset), class 08
  (connection exception), 57P01-57P03 (administrator or crash shutdown, server starting),
  53300 (too many connections), and 40001 / 40P01 (serialization failure, deadlock: the
  transaction was rolled back and may simply run again). Other SQLSTATEs of those classes
  (a statement timeout, a full disk, a lock timeout) are not retried: running the same thing
  again would fail the same way;
- SQLite's "database is locked" and "disk I/O error" (the embedded default);
- Redis `ConnectionError` / `TimeoutError` (the cache, the rate limiter) and kombu's
  `OperationalError` (a publish to an unreachable broker).

The rule for each (`reconnecting`, or `Outage` for a loop that must not start over): close
this thread's database connections (Django would otherwise keep using the dead one: it
reconnects only between requests and tasks), wait a jittered backoff (full jitter, 0.1 s
doubling, capped at FLASKWEB_INFRA_BACKOFF_CAP_SECONDS, 2 s, so work resumes within about
that of the service coming back), and go on from what is written: every task's work is
idempotent (a claim token, unique keys, missing-only plans). After
FLASKWEB_INFRA_RETRY_SECONDS (300) of failures in a row it gives up with `Unavailable`:
the task fails, and the sweeps (stalled judge runs, stale jobs) are the last line.

Why an in-task loop rather than Celery's `self.retry(countdown=...)`: a retry is a new
message, so it needs the broker, which may be the thing that is away; it would leave the
process, losing what only the process holds (a judge batch's answers already paid for, a
job's claim); and it goes to the back of the queue. Waiting in the task needs nothing but
time, keeps an acks-late message unacknowledged (a worker that dies meanwhile still has it
delivered again), and resumes within the backoff cap.

Warm shutdown (`celery worker` receiving SIGTERM: a deploy or a restart) sets the flag that
`shutting_down()` reads, from Celery's `worker_shutting_down` signal in the worker's main
process: a judge or metadata batch then starts no more calls, lets the calls on the wire
finish (FLASKWEB_JUDGE_SHUTDOWN_GRACE_SECONDS, 20), writes them and hands the rest of its
range to a follow-up message for the next worker. In a prefork child the flag is not set
(the signal fires in the parent); the judging worker runs threads.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from celery.signals import worker_shutting_down
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: SQLSTATEs of a lost or refused connection, or of a transaction the server rolled back that
#: may run again: retried. Any other SQLSTATE is an error of the work, not of the way to it.
TRANSIENT_SQLSTATES = ("57P01", "57P02", "57P03", "53300", "40001", "40P01")
#: SQLite (the embedded default): a writer holding the lock past the busy timeout, the disk.
TRANSIENT_SQLITE = ("database is locked", "database table is locked", "disk i/o error")


#: How long a periodic task (beat) waits for the database: not much longer than its tick,
#: as beat runs it again then.
BEAT_RETRY_SECONDS = 45.0


class Unavailable(Exception):
    """The database or the broker stayed away longer than FLASKWEB_INFRA_RETRY_SECONDS; the
    last infrastructure error is its cause. Not itself retried."""


def is_infra_error(exc: BaseException) -> bool:
    """Whether `exc` (or the error it wraps) says the database or the broker is unreachable,
    not that the work is wrong. Django wraps the driver's error (`raise ... from`), so the
    driver's error, when there is one, decides."""
    seen: set[int] = set()
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, Unavailable):
            return False
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    for error in chain:
        if isinstance(error, RedisConnectionError | RedisTimeoutError | KombuOperationalError):
            return True
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            state = error.sqlstate
            return state is None or state.startswith("08") or state in TRANSIENT_SQLSTATES
        if isinstance(error, psycopg.Error | sqlite3.Error):
            if isinstance(error, sqlite3.OperationalError):
                message = str(error).lower()
                return any(text in message for text in TRANSIENT_SQLITE)
            return False
    return any(isinstance(error, OperationalError | InterfaceError) for error in chain)


def backoff(attempt: int) -> float:
    """Full jitter: uniform in [0, min(cap, 0.1 s x 2**attempt)]."""
    cap = settings.FLASKWEB_INFRA_BACKOFF_CAP_SECONDS
    return random.uniform(0, min(cap, 0.1 * 2**attempt))


def connections_reset() -> None:
    """Close this thread's database connections, so the next query opens a new one. A
    connection inside a caller's transaction is left alone (closing it would lose the
    transaction; the caller's own exit closes it)."""
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            continue
        with contextlib.suppress(Exception):
            conn.close()


class Outage:
    """Infrastructure errors in a row, for a loop that goes on between attempts (a judge
    batch keeps taking answers while it waits to write them): `attempt(fn)` runs `fn` when
    the backoff allows and tells whether it got through; underneath, `failed(exc)` after an
    infrastructure error (resets the connections; raises Unavailable past the window),
    `ready()` once the backoff is over, `recovered()` after a success."""

    def __init__(self, what: str, *, seconds: float | None = None) -> None:
        self.what = what
        self.seconds = settings.FLASKWEB_INFRA_RETRY_SECONDS if seconds is None else seconds
        self.since: float | None = None
        self.attempts = 0
        self.next_at = 0.0

    def attempt(self, fn: Callable[[], object]) -> bool:
        """`fn()` if an attempt is due: True when it ran through, False when it met an
        infrastructure error (recorded; Unavailable past the window) or the backoff since
        the last one is not over (not run). Any other error is raised."""
        if not self.ready():
            return False
        try:
            fn()
        except Exception as exc:
            if not is_infra_error(exc):
                raise
            self.failed(exc)
            return False
        self.recovered()
        return True

    @property
    def ongoing(self) -> bool:
        return self.since is not None

    def ready(self) -> bool:
        return time.monotonic() >= self.next_at

    def wait(self) -> None:
        """Sleep until the next attempt is due."""
        time.sleep(max(0.0, self.next_at - time.monotonic()))

    def failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        connections_reset()
        if self.since is None:
            self.since = now
            logger.warning("%s: %s; retrying", self.what, _short(exc))
        elif now - self.since >= self.seconds:
            raise Unavailable(
                f"{self.what}: the database or the broker was away for more than "
                f"{self.seconds:.0f} s ({_short(exc)})"
            ) from exc
        self.attempts += 1
        self.next_at = now + backoff(self.attempts)

    def recovered(self) -> None:
        if self.since is not None:
            logger.warning(
                "%s: back after %.1f s and %d attempts",
                self.what,
                time.monotonic() - self.since,
                self.attempts,
            )
        self.since = None
        self.attempts = 0
        self.next_at = 0.0


def reconnecting(fn: Callable[[], T], *, what: str, seconds: float | None = None) -> T:
    """`fn()`, called again after every infrastructure error (connections reset, jittered
    backoff) until it returns or raises anything else; Unavailable after `seconds`
    (FLASKWEB_INFRA_RETRY_SECONDS) of failures. `fn` must be safe to run again from the
    start: it resumes from what is written."""
    outage = Outage(what, seconds=seconds)
    while True:
        try:
            result = fn()
        except Exception as exc:
            if not is_infra_error(exc):
                raise
            outage.failed(exc)
            outage.wait()
            continue
        outage.recovered()
        return result


def _short(exc: BaseException) -> str:
    """The error's class and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


# --- warm shutdown ------------------------------------------------------------------------------

_shutting_down = threading.Event()


def shutting_down() -> bool:
    """Whether this worker process is in a warm (or cold) shutdown."""
    return _shutting_down.is_set()


def _on_worker_shutting_down(**_: Any) -> None:
    _shutting_down.set()


worker_shutting_down.connect(_on_worker_shutting_down, weak=False)
