"""What judge calls are doing now, as any process sees it: calls in flight, calls, 429s,
retries and errors in the last minute and in total, cost, recent latency and the learned
window, per provider; and per run, its calls in flight, 429s, retries and judgments in the
last minute, from which its pace and ETA follow (`run_pace`).

The judging engine records every call here (`record_call_start`, `record_call_end`,
`record_retry`, `record_outcome`, `record_window`) in memory: a few dict updates under a
lock, no I/O on its event loop. A daemon thread per process writes the process's
**snapshot** once a second (FLUSH_EVERY), and only while something changed or calls are in
flight, to the Django cache's store: one HSET in Redis (the cache's Redis, where the rate
limiter lives too), or one key of the file-based cache of the embedded default. Readers
(the run pages, the run API, the metrics endpoint) merge the snapshots of every process:
one HGETALL. So the web process sees what the workers do, a call costs no round trip, and a
worker process one a second at most.

Invariants:
- **In flight never leaks.** A snapshot carries its time; one older than STALE_AFTER counts
  for no call in flight (a live process with calls in flight rewrites its snapshot every
  second), so the calls of a worker that died (SIGKILL, out of memory, a lost machine)
  leave the figures within STALE_AFTER.
- **Totals only grow** while the processes live: each process counts from its start, a
  restarted one starts a new snapshot, and a dead process's snapshot keeps its totals for
  KEEP_DEAD (a week) before readers forget it (a counter reset, as a restarted process's
  own counters would make).
- **The last minute** is counted in BUCKET-second buckets by wall time: the current one and
  the eleven before it, so 55-60 s.

Keys (through the cache's key function, so its prefix applies): `judging-activity` (a hash
of process token -> JSON snapshot) in Redis; `judging-activity:<token>` and the registry
`judging-activity:processes` in another cache.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

__all__ = [
    "ActivityUnavailable",
    "ProviderActivity",
    "RunActivity",
    "RunPace",
    "current_run",
    "flush",
    "provider_activity",
    "record_call_end",
    "record_call_start",
    "record_outcome",
    "record_retry",
    "record_window",
    "run_activity",
    "run_key",
    "run_pace",
    "run_scope",
]

#: How often a process writes its snapshot (seconds).
FLUSH_EVERY = 1.0
#: A snapshot older than this counts for no call in flight (its process is gone or stuck).
STALE_AFTER = 15.0
#: A dead process's snapshot (its totals) is forgotten after this long.
KEEP_DEAD = 7 * 24 * 3600.0
#: The last minute is counted in buckets of this many seconds (the current one and 11 more).
BUCKET = 5
BUCKETS = 12
#: The latencies a process keeps per provider for the percentiles.
LATENCIES = 100
#: A run's pace needs this much: judgments, and seconds of data.
PACE_MIN_JUDGMENTS = 5
PACE_MIN_SECONDS = 10.0

OUTCOMES = ("ok", "throttled", "error", "timeout", "cut", "hedged", "cancelled")
#: bucket fields, in order
_B_CALLS, _B_THROTTLED, _B_RETRIES, _B_ERRORS, _B_DONE = range(5)

HASH_KEY = "judging-activity"
REGISTRY_KEY = "judging-activity:processes"


# --- what readers get ---------------------------------------------------------------------------


class ActivityUnavailable(Exception):
    """The store of the figures does not answer (Redis away, the cache's files unreadable)."""


@dataclass(frozen=True)
class ProviderActivity:
    """A provider's calls, summed over every live worker process. `calls_*` count attempts
    that reached the wire (retries included); `throttled_*` the 429s among them; `errors_*`
    the other failed attempts (timeouts and cut calls included); `retries_*` the attempts
    that were retried. `window`: the learned concurrency window (summed over the processes)
    of a provider with no declared limit, once it has refused a call; None otherwise."""

    provider_id: str
    in_flight: int
    calls_last_minute: int
    throttled_last_minute: int
    retries_last_minute: int
    errors_last_minute: int
    calls_total: int
    throttled_total: int
    retries_total: int
    errors_total: int
    timeouts_total: int
    cut_total: int
    cost_usd_total: float
    latency_p50_s: float | None
    latency_p95_s: float | None
    window: float | None
    processes: int  # live worker processes calling it


@dataclass(frozen=True)
class RunActivity:
    """A run's calls in the last minute (see ProviderActivity), and `judgments`: the calls
    that ended for good (an answer, or the last attempt's error). `seconds`: how much time
    the last-minute figures cover (less than a minute for a run that started recently)."""

    run: str
    in_flight: int
    calls_last_minute: int
    throttled_last_minute: int
    retries_last_minute: int
    errors_last_minute: int
    judgments_last_minute: int
    judgments_last_10s: int
    seconds: float


@dataclass(frozen=True)
class RunPace:
    """What a running run's page says about its pace: its calls in flight, its provider's
    (all runs), the provider's declared limit or learned window, 429s and retries in the
    last minute, judgments per minute and the ETA (None until there are enough data), and
    whether it is waiting for a provider that refuses calls."""

    run: RunActivity
    provider: ProviderActivity
    rpm: int | None
    tpm: int | None
    judgments_per_minute: float | None
    eta_seconds: float | None
    waiting_for_provider: bool

    @property
    def eta_text(self) -> str:
        return duration_text(self.eta_seconds)


def duration_text(seconds: float | None) -> str:
    """ "—", "40 s", "3 min 10 s", "2 h 5 min"."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes} min {rest} s" if rest and minutes < 10 else f"{minutes} min"
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min"


# --- run identity -------------------------------------------------------------------------------

_current_run: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "judging_activity_run", default=None
)

#: The tasks whose first argument is a run: the run a batch submitted from them belongs to,
#: when the caller does not name it (Engine.submit's `run`).
RUN_TASKS = {
    "judging.tasks.judge_batch_task": "judge",
    "judging.tasks.judge_response_task": "judge",
    "judging.tasks.metadata_batch_task": "metadata",
}


def run_key(kind: str, run_id: int) -> str:
    """The name a run's activity is kept under: "judge:12", "metadata:3"."""
    return f"{kind}:{run_id}"


@contextlib.contextmanager
def run_scope(run: str | None) -> Iterator[None]:
    """Calls submitted to the engine inside this block belong to `run` (a run_key)."""
    token = _current_run.set(run)
    try:
        yield
    finally:
        _current_run.reset(token)


def current_run() -> str | None:
    """The run of calls submitted now: the run_scope's, else the Celery judging task's this
    thread runs (its run_id argument), else None."""
    run = _current_run.get()
    if run is not None:
        return run
    try:
        from celery import current_task
    except ImportError:  # pragma: no cover - Celery is a dependency
        return None
    task = current_task
    if not task:
        return None
    kind = RUN_TASKS.get(getattr(task, "name", "") or "")
    request = getattr(task, "request", None)
    if kind is None or request is None:
        return None
    run_id = (request.kwargs or {}).get("run_id")
    if run_id is None and request.args:
        run_id = request.args[0]
    return run_key(kind, int(run_id)) if isinstance(run_id, int) else None


# --- this process's counts ----------------------------------------------------------------------


def _bucket(now: float) -> int:
    return int(now // BUCKET)


class _Counts:
    """One provider's or run's counts in this process."""

    __slots__ = ("buckets", "first", "in_flight", "latencies", "provider", "totals", "window")

    def __init__(self) -> None:
        self.in_flight = 0
        self.totals = {
            "calls": 0,
            "throttled": 0,
            "retries": 0,
            "errors": 0,
            "timeouts": 0,
            "cut": 0,
            "cost": 0.0,
        }
        self.buckets: dict[int, list[int]] = {}
        self.latencies: deque[int] = deque(maxlen=LATENCIES)
        self.window: float | None = None
        self.first = time.time()
        self.provider = ""

    def add(self, field: int, now: float) -> None:
        b = _bucket(now)
        row = self.buckets.get(b)
        if row is None:
            row = self.buckets[b] = [0, 0, 0, 0, 0]
            for old in [k for k in self.buckets if k <= b - BUCKETS]:
                del self.buckets[old]
        row[field] += 1

    def idle(self, now: float) -> bool:
        return self.in_flight == 0 and all(b <= _bucket(now) - BUCKETS for b in self.buckets)


class _Recorder:
    """This process's counts, and the thread that writes them."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.token = f"{socket.gethostname()}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self.lock = threading.Lock()
        self.providers: dict[str, _Counts] = {}
        self.runs: dict[str, _Counts] = {}
        self.dirty = False
        self.wrote_in_flight = False
        self._thread: threading.Thread | None = None
        # one flush at a time, its snapshot and its write together: a reader's flush waits
        # for a write the writer thread has in hand instead of reading the store before it
        # lands, and an older snapshot never lands after a newer one (which, written last
        # with a call still in flight, would have shown it in flight until it went stale)
        self.flushing = threading.Lock()
        self._wake = threading.Event()
        self._warned_at = 0.0

    # called on the engine's loop: memory only

    def provider(self, provider_id: str) -> _Counts:
        counts = self.providers.get(provider_id)
        if counts is None:
            counts = self.providers[provider_id] = _Counts()
            self._start()
        return counts

    def run(self, run: str, provider_id: str) -> _Counts:
        counts = self.runs.get(run)
        if counts is None:
            counts = self.runs[run] = _Counts()
        counts.provider = provider_id
        return counts

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="judging-activity", daemon=True)
            self._thread.start()

    # the writer

    def _loop(self) -> None:
        while True:
            self._wake.wait(FLUSH_EVERY)
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:  # the store is away: the counts wait in memory
                if time.monotonic() - self._warned_at > 60:
                    self._warned_at = time.monotonic()
                    logger.warning("judging activity not written: %s", exc)

    def snapshot(self, now: float) -> dict[str, Any] | None:
        """What to write now (None: nothing changed and nothing is in flight)."""
        with self.lock:
            in_flight = any(c.in_flight for c in self.providers.values())
            if not (self.dirty or in_flight or self.wrote_in_flight):
                return None
            self.dirty = False
            self.wrote_in_flight = in_flight
            for run, counts in list(self.runs.items()):
                if counts.idle(now):
                    del self.runs[run]
            return {
                "t": now,
                "p": {
                    pid: {
                        "in": c.in_flight,
                        "tot": dict(c.totals),
                        "b": {str(b): list(row) for b, row in c.buckets.items()},
                        "lat": list(c.latencies),
                        "win": c.window,
                    }
                    for pid, c in self.providers.items()
                },
                "r": {
                    run: {
                        "in": c.in_flight,
                        "b": {str(b): list(row) for b, row in c.buckets.items()},
                        "first": c.first,
                        "p": c.provider,
                    }
                    for run, c in self.runs.items()
                },
            }

    def flush(self) -> None:
        with self.flushing:
            snapshot = self.snapshot(time.time())
            if snapshot is None:
                return
            try:
                _store().write(self.token, snapshot)
            except Exception:
                with self.lock:
                    self.dirty = True  # written whole by the next flush that goes through
                raise


_recorder: _Recorder | None = None
_recorder_lock = threading.Lock()


def _this_process() -> _Recorder:
    global _recorder
    recorder = _recorder
    if recorder is None or recorder.pid != os.getpid():  # a forked child counts anew
        with _recorder_lock:
            if _recorder is None or _recorder.pid != os.getpid():
                _recorder = _Recorder()
            recorder = _recorder
    return recorder


def _key(provider_id: int | str) -> str:
    return str(provider_id)


def record_call_start(provider_id: int | str, *, run: str | None = None) -> None:
    """A call to the provider went on the wire."""
    recorder = _this_process()
    now = time.time()
    with recorder.lock:
        provider = recorder.provider(_key(provider_id))
        provider.in_flight += 1
        provider.totals["calls"] += 1
        provider.add(_B_CALLS, now)
        if run is not None:
            counts = recorder.run(run, _key(provider_id))
            counts.in_flight += 1
            counts.add(_B_CALLS, now)
        recorder.dirty = True


def record_call_end(
    provider_id: int | str,
    *,
    outcome: str,
    latency_s: float | None,
    cost_usd: float | None,
    run: str | None = None,
) -> None:
    """A call came off the wire: `outcome` ok, throttled (429), error, timeout (the call's own
    timeout), cut (cut by the engine, far past the provider's recent latency), hedged, or
    cancelled (abandoned when its batch stopped: counted as no error); `latency_s` of an
    answer; `cost_usd` what it cost, when known."""
    recorder = _this_process()
    now = time.time()
    with recorder.lock:
        provider = recorder.provider(_key(provider_id))
        provider.in_flight = max(0, provider.in_flight - 1)
        counts = recorder.runs.get(run) if run is not None else None
        if counts is not None:
            counts.in_flight = max(0, counts.in_flight - 1)
        if outcome == "ok":
            if latency_s is not None:
                provider.latencies.append(int(latency_s * 1000))
        elif outcome == "cancelled":  # abandoned by a stopped batch: no answer, no error
            pass
        elif outcome == "throttled":
            provider.totals["throttled"] += 1
            provider.add(_B_THROTTLED, now)
            if counts is not None:
                counts.add(_B_THROTTLED, now)
        else:
            provider.totals["errors"] += 1
            if outcome in ("timeout", "cut"):
                provider.totals["timeouts" if outcome == "timeout" else "cut"] += 1
            provider.add(_B_ERRORS, now)
            if counts is not None:
                counts.add(_B_ERRORS, now)
        if cost_usd:
            provider.totals["cost"] += float(cost_usd)
        recorder.dirty = True
    if provider.in_flight == 0:
        recorder._wake.set()  # the last call ended: say so now, not in a second


def record_retry(provider_id: int | str, *, run: str | None = None) -> None:
    """A failed attempt will be tried again."""
    recorder = _this_process()
    now = time.time()
    with recorder.lock:
        provider = recorder.provider(_key(provider_id))
        provider.totals["retries"] += 1
        provider.add(_B_RETRIES, now)
        if run is not None:
            recorder.run(run, _key(provider_id)).add(_B_RETRIES, now)
        recorder.dirty = True


def record_outcome(provider_id: int | str, *, run: str | None = None) -> None:
    """A call ended for good (answered, or failed on its last attempt): a judgment."""
    if run is None:
        return
    recorder = _this_process()
    with recorder.lock:
        recorder.run(run, _key(provider_id)).add(_B_DONE, time.time())
        recorder.dirty = True


def record_window(provider_id: int | str, size: float | None) -> None:
    """The concurrency window this process learned for a provider with no declared limit
    (None: it has none)."""
    recorder = _this_process()
    with recorder.lock:
        provider = recorder.provider(_key(provider_id))
        if provider.window != size:
            provider.window = size
            recorder.dirty = True


def flush() -> None:
    """Write this process's counts now (readers in this process call it first)."""
    recorder = _recorder
    if recorder is not None and recorder.pid == os.getpid():
        recorder.flush()


# --- the store ----------------------------------------------------------------------------------


class _RedisStore:
    """Snapshots in one hash of the cache's Redis."""

    def __init__(self, client: Any, key: str) -> None:
        self.client = client
        self.key = key

    def write(self, token: str, snapshot: dict[str, Any]) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.key, token, json.dumps(snapshot, separators=(",", ":")))
        pipe.expire(self.key, int(KEEP_DEAD))
        pipe.execute()

    def read(self) -> list[dict[str, Any]]:
        now = time.time()
        snapshots, forgotten = [], []
        for token, raw in self.client.hgetall(self.key).items():
            snapshot = json.loads(raw)
            if now - snapshot.get("t", 0) > KEEP_DEAD:
                forgotten.append(token)
            else:
                snapshots.append(snapshot)
        if forgotten:
            self.client.hdel(self.key, *forgotten)
        return snapshots


class _CacheStore:
    """Snapshots as keys of a cache without hashes (the embedded default's files), with a
    registry of the processes' tokens (a lost update of the registry is repaired by the
    process's next write)."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def write(self, token: str, snapshot: dict[str, Any]) -> None:
        self.cache.set(f"{HASH_KEY}:{token}", snapshot, timeout=KEEP_DEAD)
        registry = self.cache.get(REGISTRY_KEY) or {}
        if token not in registry:
            registry[token] = snapshot["t"]
            self.cache.set(REGISTRY_KEY, registry, timeout=KEEP_DEAD)

    def read(self) -> list[dict[str, Any]]:
        registry = self.cache.get(REGISTRY_KEY) or {}
        found = self.cache.get_many([f"{HASH_KEY}:{token}" for token in registry])
        gone = [t for t in registry if f"{HASH_KEY}:{t}" not in found]
        if gone:
            for token in gone:
                registry.pop(token, None)
            self.cache.set(REGISTRY_KEY, registry, timeout=KEEP_DEAD)
        return list(found.values())


def _store() -> _RedisStore | _CacheStore:
    """The Django cache's store: its Redis (hashes and pipelines) or the cache itself."""
    cache = caches["default"]
    if isinstance(cache, RedisCache):
        # the cache's own client (its connection pool); keys through its key function
        client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
        return _RedisStore(client, cache.make_key(HASH_KEY))
    return _CacheStore(cache)


def _snapshots() -> list[dict[str, Any]]:
    try:
        flush()
        return _store().read()
    except (RedisError, OSError) as exc:
        raise ActivityUnavailable(f"the judge activity store does not answer: {exc}") from exc


# --- readers ------------------------------------------------------------------------------------


def _last_minute(buckets: Iterable[dict[str, list[int]]], now: float) -> list[int]:
    """Sums of the buckets of the last minute, by field."""
    since = _bucket(now) - BUCKETS
    sums = [0, 0, 0, 0, 0]
    for rows in buckets:
        for b, row in rows.items():
            if int(b) > since:
                for i, value in enumerate(row):
                    sums[i] += value
    return sums


def _percentile(values: list[int], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] / 1000.0


def provider_activity(
    provider_ids: Iterable[int | str] | None = None,
) -> list[ProviderActivity]:
    """The activity of these providers (None: every provider any process has called), in
    the order asked (else by id). A provider nobody called has zeros. Raises
    ActivityUnavailable when the store does not answer."""
    now = time.time()
    snapshots = _snapshots()
    if provider_ids is None:
        ids = sorted({pid for s in snapshots for pid in s.get("p", {})}, key=_sort_key)
    else:
        ids = [_key(pid) for pid in provider_ids]
    return _providers_from(snapshots, ids, now)


def _providers_from(snapshots: list[dict[str, Any]], ids: list[str], now: float) -> list:
    out = []
    for pid in ids:
        rows = [(s, s["p"][pid]) for s in snapshots if pid in s.get("p", {})]
        live = [(s, p) for s, p in rows if now - s["t"] <= STALE_AFTER]
        totals = {k: sum(p["tot"].get(k, 0) for _, p in rows) for k in _Counts().totals}
        minute = _last_minute((p["b"] for _, p in rows), now)
        latencies = [ms for _, p in rows for ms in p.get("lat", ())]
        windows = [p["win"] for _, p in live if p.get("win") is not None]
        out.append(
            ProviderActivity(
                provider_id=pid,
                in_flight=sum(p["in"] for _, p in live),
                calls_last_minute=minute[_B_CALLS],
                throttled_last_minute=minute[_B_THROTTLED],
                retries_last_minute=minute[_B_RETRIES],
                errors_last_minute=minute[_B_ERRORS],
                calls_total=int(totals["calls"]),
                throttled_total=int(totals["throttled"]),
                retries_total=int(totals["retries"]),
                errors_total=int(totals["errors"]),
                timeouts_total=int(totals["timeouts"]),
                cut_total=int(totals["cut"]),
                cost_usd_total=float(totals["cost"]),
                latency_p50_s=_percentile(latencies, 0.5),
                latency_p95_s=_percentile(latencies, 0.95),
                window=sum(windows) if windows else None,
                processes=len(live),
            )
        )
    return out


def _sort_key(pid: str) -> tuple[int, str]:
    return (0, f"{int(pid):012d}") if pid.isdigit() else (1, pid)


def run_activity(run: str) -> RunActivity:
    """The activity of run `run` (a run_key) in the last minute, over every process. Raises
    ActivityUnavailable when the store does not answer."""
    now = time.time()
    rows = [(s, s["r"][run]) for s in _snapshots() if run in s.get("r", {})]
    return _run_activity(run, rows, now)


def _run_activity(run: str, rows: list, now: float) -> RunActivity:
    minute = _last_minute((r["b"] for _, r in rows), now)
    recent = _bucket(now) - 2  # the current bucket and the one before: 5-10 s
    last_10s = sum(row[_B_DONE] for _, r in rows for b, row in r["b"].items() if int(b) > recent)
    covered = BUCKET * (BUCKETS - 1) + (now - _bucket(now) * BUCKET)
    first = min((r.get("first", now) for _, r in rows), default=now)
    return RunActivity(
        run=run,
        in_flight=sum(r["in"] for s, r in rows if now - s["t"] <= STALE_AFTER),
        calls_last_minute=minute[_B_CALLS],
        throttled_last_minute=minute[_B_THROTTLED],
        retries_last_minute=minute[_B_RETRIES],
        errors_last_minute=minute[_B_ERRORS],
        judgments_last_minute=minute[_B_DONE],
        judgments_last_10s=last_10s,
        seconds=max(0.0, min(covered, now - first)),
    )


def run_pace(
    *,
    run: str,
    provider_id: int | str | None,
    remaining: int,
    rpm: int | None = None,
    tpm: int | None = None,
) -> RunPace:
    """A running run's pace (one read of the store): `remaining` judgments to make, at the
    rate of the last minute's judgments (None until PACE_MIN_JUDGMENTS over
    PACE_MIN_SECONDS); waiting for the provider when its calls were refused (429) in the
    last minute and no more judgments came than refusals, or none for 5-10 s. Raises
    ActivityUnavailable when the store does not answer."""
    now = time.time()
    snapshots = _snapshots()
    rows = [(s, s["r"][run]) for s in snapshots if run in s.get("r", {})]
    activity = _run_activity(run, rows, now)
    pid = _key(provider_id) if provider_id is not None else ""
    (provider,) = _providers_from(snapshots, [pid], now)
    rate = None
    if (
        activity.judgments_last_minute >= PACE_MIN_JUDGMENTS
        and activity.seconds >= PACE_MIN_SECONDS
    ):
        rate = activity.judgments_last_minute / activity.seconds * 60
    eta = remaining / rate * 60 if rate else None
    throttled = activity.throttled_last_minute
    waiting = throttled > 0 and (
        activity.judgments_last_10s == 0 or throttled >= activity.judgments_last_minute
    )
    return RunPace(
        run=activity,
        provider=provider,
        rpm=rpm,
        tpm=tpm,
        judgments_per_minute=rate,
        eta_seconds=eta if remaining else 0.0 if rate else None,
        waiting_for_provider=waiting,
    )
