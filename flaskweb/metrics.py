"""Prometheus metrics on /metrics (docs/OPERATIONS.md lists every one, with alerts).

Two kinds:

- **Counted per request** by MetricsMiddleware: requests by view name (the URL pattern's
  name, never the path: a label value per path would grow without bound), method and status
  class; responses by exact status (503s are the requests that lost the database or Redis);
  latency by view; and the annotation hot path's submissions and claims, read off the
  submit and next views' statuses. A few microseconds per request (bench/metrics_bench.py).
  With several gunicorn processes the counts go through PROMETHEUS_MULTIPROC_DIR
  (flaskweb/metrics_dir.py) and any process's scrape adds them up.
- **Read at scrape time** by AppCollector: Celery queue depths, judge runs and their
  progress, judge calls per provider, report snapshot lag, import and export jobs. A few
  indexed queries, a Redis pipeline and a directory listing, each bounded by a short
  timeout; a source that does not answer is reported as `flaskweb_up{component=...} 0`
  and its figures left out, so a scrape never fails because the database or Redis is down.

Access: `Authorization: Bearer <FLASKWEB_METRICS_TOKEN>` (compared in constant time), or a
signed-in site admin. Anyone else gets 404, as for a page that does not exist, when no token
is configured, and 401 when one is (Prometheus then says the token is wrong). A scrape with
the bearer token is answered by MetricsMiddleware before the session, host and HTTPS checks,
like the health probes: Prometheus scrapes each web process on its own address.
"""

from __future__ import annotations

import atexit
import functools
import hmac
import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Min, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from analytics.models import (
    IN_FLIGHT,
    ExportJob,
    PreferenceImportJob,
    ReportSnapshot,
    ScoreImportJob,
    SnapshotStatus,
)
from annotation.access import is_site_admin
from annotation.models import DatasetUpload
from flaskweb import health, metrics_dir
from flaskweb.jobs import JobStatus
from judging import selectors as judging_selectors
from judging.models import JudgeOutputImportJob, JudgeRun, Provider, RunStatus

logger = logging.getLogger("flaskweb.metrics")

METRICS_PATH = "/metrics"
# no `_created` series beside each counter: multiprocess mode has none, and they double the
# series Prometheus stores for nothing it needs
disable_created_metrics()

# --- counted per request ------------------------------------------------------------------------

#: 5 ms .. 10 s: the annotation hot path answers in milliseconds, a dashboard in tenths, and
#: a request past gunicorn's 30 s timeout never answers at all.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: any other method is counted as "other": a label value per made-up method would be unbounded
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: a request answered before its URL was resolved (a 404 for no route, an HTTPS redirect,
#: a body refused by its size, a host not allowed)
UNRESOLVED = "unresolved"
STATIC = "static"
_STATIC_PREFIX = settings.STATIC_URL or "/static/"

REQUESTS = Counter(
    "flaskweb_http_requests",
    "Requests answered, by view (URL name), method and status class.",
    ["view", "method", "status"],
)
RESPONSES = Counter(
    "flaskweb_http_responses",
    "Responses by exact status code (503: the database or Redis was briefly gone).",
    ["code"],
)
LATENCY = Histogram(
    "flaskweb_http_request_duration_seconds",
    "Time from the request entering the app to its response, by view (URL name).",
    ["view"],
    buckets=LATENCY_BUCKETS,
)
SUBMISSIONS = Counter(
    "flaskweb_annotation_submissions",
    "Annotation submissions: via=api counts new ones (201; a repeated submit answers 200 and "
    "is not counted), via=page the scoring page's submits answered (200, also when the page "
    "redraws the card with a reason).",
    ["via"],
)
CLAIMS = Counter(
    "flaskweb_annotation_claims",
    "Claims of the next task through the API: outcome=task (200) or no_task (204).",
    ["outcome"],
)

#: (view, status) -> the annotation counter that request also counts in
_ANNOTATION_COUNTERS: dict[tuple[str, int], Any] = {
    ("annotation-api:api-assignment-submit", 201): SUBMISSIONS.labels("api"),
    ("annotation:annotate-submit", 200): SUBMISSIONS.labels("page"),
    ("annotation-api:api-assignment-next", 200): CLAIMS.labels("task"),
    ("annotation-api:api-assignment-next", 204): CLAIMS.labels("no_task"),
}

# Invariant: a request adds to plain numbers of its process under one lock (about a
# microsecond: bench/metrics_bench.py), and `metrics_flush` moves them into the metric
# values once per FLUSH_EVERY seconds in a thread of the process, before this process answers
# a scrape, and at its exit. Writing each request to the values (the mmap files in
# multiprocess mode: four locked writes) cost 15-18 µs a request on the busy 2-core machine;
# a flush writes each (view, method, status) once, however many requests it had. A process
# killed outright (a gunicorn timeout) loses its last second of counts.
FLUSH_EVERY = 1.0
_N_BUCKETS = len(LATENCY_BUCKETS) + 1  # and +Inf
#: (view, method, status) -> [requests, seconds, requests per latency bucket...]
_pending: dict[tuple[str, str, int], list[float]] = {}
_pending_lock = threading.Lock()
_flusher_running = [False]
#: (view, method, status) -> the label children it counts in, looked up once
_children: dict[tuple[str, str, int], tuple[Any, Any, Any, Any]] = {}
_record_failed: list[bool] = [False]


def request_record(view: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request (the middleware's whole cost, besides the clock)."""
    key = (view, method, status)
    bucket = 2 + bisect_left(LATENCY_BUCKETS, seconds)  # the first bound >= seconds
    with _pending_lock:
        counts = _pending.get(key)
        if counts is None:
            counts = _pending[key] = [0] * (2 + _N_BUCKETS)
        counts[0] += 1
        counts[1] += seconds
        counts[bucket] += 1
    if not _flusher_running[0]:
        _flusher_start()


def _flusher_start() -> None:
    """The flushing thread of this process."""
    with _pending_lock:
        if _flusher_running[0]:
            return
        _flusher_running[0] = True
    threading.Thread(target=_flush_forever, name="metrics-flush", daemon=True).start()


def _forked() -> None:
    # a thread does not survive a fork: the child starts its own at its first request, and
    # counts nothing its parent had pending (nor a lock another thread held)
    global _pending, _pending_lock
    _pending = {}
    _pending_lock = threading.Lock()
    _flusher_running[0] = False


os.register_at_fork(after_in_child=_forked)


def _flush_forever() -> None:
    while True:
        time.sleep(FLUSH_EVERY)
        try:
            metrics_flush()
        except Exception:
            if not _record_failed[0]:
                _record_failed[0] = True
                logger.exception("request metrics could not be recorded (said once)")


def _children_of(key: tuple[str, str, int]) -> tuple[Any, Any, Any, Any]:
    found = _children.get(key)
    if found is None:
        view, method, status = key
        code = str(status) if 100 <= status <= 599 else "other"
        found = _children[key] = (
            REQUESTS.labels(view, method, f"{code[0]}xx" if code != "other" else code),
            RESPONSES.labels(code),
            LATENCY.labels(view),
            _ANNOTATION_COUNTERS.get((view, status)),
        )
    return found


def metrics_flush() -> None:
    """Move this process's pending counts into the metric values."""
    global _pending
    with _pending_lock:
        batch, _pending = _pending, {}
    for key, counts in batch.items():
        requests, responses, latency, annotation = _children_of(key)
        n = counts[0]
        requests.inc(n)
        responses.inc(n)
        if annotation is not None:
            annotation.inc(n)
        # a histogram takes one observation at a time; its values take sums (the
        # prometheus-client version is pinned, and the endpoint's tests read the buckets)
        latency._sum.inc(counts[1])
        for index, hits in enumerate(counts[2:]):
            if hits:
                latency._buckets[index].inc(hits)


atexit.register(metrics_flush)  # a worker replaced after max_requests keeps its last second


class MetricsMiddleware:
    """Counts every request below it (second in MIDDLEWARE, after the health probes), and
    answers a scrape that carries the bearer token itself."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            request.path_info == METRICS_PATH
            and request.method in ("GET", "HEAD")
            and _bearer(request) is not None
        ):
            return metrics(request)
        started = time.perf_counter()
        response = self.get_response(request)
        seconds = time.perf_counter() - started
        try:
            match = request.resolver_match
            if match is not None:
                view = match.view_name
            elif request.path_info.startswith(_STATIC_PREFIX):
                view = STATIC  # served by WhiteNoise before any URL is resolved
            else:
                view = UNRESOLVED
            method = request.method if request.method in METHODS else "other"
            request_record(view, method or "other", response.status_code, seconds)
        except Exception:  # a metric never costs a request its answer
            if not _record_failed[0]:
                _record_failed[0] = True
                logger.exception("request metrics could not be recorded (said once)")
        return response


# --- the endpoint -------------------------------------------------------------------------------


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, value = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def metrics_allowed(request: HttpRequest) -> bool | None:
    """True for the configured bearer token or a signed-in site admin; False when a token is
    configured and was not given (401); None when there is nothing to give (404)."""
    token = settings.FLASKWEB_METRICS_TOKEN
    given = _bearer(request)
    if token and given is not None and hmac.compare_digest(given.encode(), token.encode()):
        return True
    user = getattr(request, "user", None)  # absent when the middleware answers a scrape
    if user is not None and is_site_admin(user):
        return True
    return False if token else None


@require_safe
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """The metrics for the bearer token or a site admin; 401 or 404 otherwise (module doc)."""
    allowed = metrics_allowed(request)
    if allowed is None:
        raise Http404("no such page")
    if not allowed:
        response = HttpResponse("a bearer token is needed\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)


class _LockedMultiProcessCollector(MultiProcessCollector):
    """The multiprocess files, read under the directory's shared lock (metrics_dir)."""

    def collect(self):
        with metrics_dir.collect_lock(self._path):
            return list(super().collect())


class _ThisProcess:
    """The default registry (this process's counters, CPU, memory) for a one-process server."""

    def collect(self):
        return REGISTRY.collect()


def metrics_text() -> bytes:
    """The exposition text: the request counters (this process's, or every process's from
    the multiprocess directory) and what AppCollector reads now."""
    metrics_flush()
    registry = CollectorRegistry(auto_describe=False)
    path = metrics_dir.configured()
    if path and os.path.isdir(path):
        registry.register(_LockedMultiProcessCollector(registry=None, path=path))
    else:
        registry.register(_ThisProcess())  # type: ignore[arg-type]
    registry.register(AppCollector())  # type: ignore[arg-type]
    return generate_latest(registry)


# --- read at scrape time ------------------------------------------------------------------------

#: the import and export job rows, by the kind label they are reported under
JOB_MODELS: dict[str, Any] = {
    "dataset_import": DatasetUpload,
    "score_import": ScoreImportJob,
    "preference_import": PreferenceImportJob,
    "judge_output_import": JudgeOutputImportJob,
    "export": ExportJob,
}
#: how far back failed jobs are counted
FAILED_WINDOW = timedelta(hours=1)


def celery_queues() -> list[str]:
    """Every queue the app sends tasks to: the default one and the routes' (settings)."""
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    return sorted({settings.CELERY_TASK_DEFAULT_QUEUE} | routed)


def queue_depths() -> dict[str, int]:
    """Messages waiting per Celery queue. Redis: LLEN of each queue's keys (kombu keeps one
    list per priority step, each behind the transport's global key prefix), one pipelined
    round trip with a short timeout. File system: the queue's message files in the broker's
    folder. Raises when the broker cannot be read."""
    url: str = settings.CELERY_BROKER_URL
    options: dict[str, Any] = dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    queues = celery_queues()
    if url.startswith("filesystem://"):
        suffixes = {f"{queue}.msg": queue for queue in queues}
        counts = dict.fromkeys(queues, 0)
        for name in os.listdir(options["data_folder_in"]):
            queue = suffixes.get(name.partition(".")[2])
            if queue is not None:
                counts[queue] += 1
        return counts
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"queue depth is read from Redis or the file system, not {url[:12]}…")
    prefix = str(options.get("global_keyprefix", ""))
    sep = str(options.get("sep", "\x06\x16"))
    steps = list(options.get("priority_steps", [0, 3, 6, 9]))
    pipe = health.redis_client(url).pipeline(transaction=False)
    for queue in queues:
        for step in steps:
            pipe.llen(f"{prefix}{queue}{sep}{step}" if step else f"{prefix}{queue}")
    sizes = pipe.execute()
    return {
        queue: int(sum(sizes[i * len(steps) : (i + 1) * len(steps)]))
        for i, queue in enumerate(queues)
    }


def _seconds_since(moment) -> float:
    return max(0.0, (timezone.now() - moment).total_seconds()) if moment else 0.0


class AppCollector:
    """What the app's tables, the broker and the judging workers' activity say now."""

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        up = GaugeMetricFamily(
            "flaskweb_up",
            "1 when the component answered this scrape, else 0 (its figures are left out).",
            labels=["component"],
        )
        families: list[Metric] = []
        for component, read in self._sources():
            if component is None:  # not configured here
                continue
            try:
                families.extend(read())
                up.add_metric([component], 1)
                _said_down.discard(component)
            except Exception as exc:
                up.add_metric([component], 0)
                _say_down(component, exc)
        yield up
        yield from families
        took = GaugeMetricFamily(
            "flaskweb_metrics_collect_seconds",
            "Seconds this scrape took to read the tables, the broker and the judge activity.",
        )
        took.add_metric([], time.perf_counter() - started)
        yield took

    def _sources(self) -> Iterable[tuple[str | None, Callable[[], list[Metric]]]]:
        database_ok = health.database_check() is None
        yield "database", (self._database if database_ok else _unreachable("database"))
        yield ("redis" if settings.REDIS_URL else None), _redis_ping
        yield "broker", self._queues
        yield "judge_activity", functools.partial(self._judge_activity, database_ok)

    def _queues(self) -> list[Metric]:
        depth = GaugeMetricFamily(
            "flaskweb_celery_queue_messages",
            "Messages waiting in each Celery queue (not yet taken by a worker).",
            labels=["queue"],
        )
        for queue, size in queue_depths().items():
            depth.add_metric([queue], size)
        return [depth]

    def _judge_activity(self, database_ok: bool) -> list[Metric]:
        names = provider_names(refresh=database_ok)
        return provider_metrics(judging_selectors.provider_activity(), names)

    def _database(self) -> list[Metric]:
        try:
            with transaction.atomic():
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:  # bounded, like the readiness check
                        cursor.execute(
                            "SET LOCAL statement_timeout = %s", [f"{health.READY_TIMEOUT}s"]
                        )
                return [*_judge_runs(), *_snapshots(), *_jobs()]
        except Exception:
            connection.close_if_unusable_or_obsolete()
            raise


def _unreachable(component: str) -> Callable[[], list[Metric]]:
    def read() -> list[Metric]:
        raise ConnectionError(f"{component} did not answer within {health.READY_TIMEOUT} s")

    return read


def _redis_ping() -> list[Metric]:
    failed = health.redis_check()
    if failed:
        raise ConnectionError(failed)
    return []


_said_down: set[str] = set()


def _say_down(component: str, exc: BaseException) -> None:
    """One warning when a component stops answering the scrapes, not one per scrape."""
    if component not in _said_down:
        _said_down.add(component)
        logger.warning("metrics: %s did not answer: %s: %s", component, type(exc).__name__, exc)


def _judge_runs() -> list[Metric]:
    live = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED)
    running = Q(status=RunStatus.RUNNING)
    row = JudgeRun.objects.filter(status__in=live).aggregate(
        n_pending=Count("pk", filter=Q(status=RunStatus.PENDING)),
        n_running=Count("pk", filter=running),
        n_paused=Count("pk", filter=Q(status=RunStatus.PAUSED)),
        to_make=Sum("total", filter=running),
        ok=Sum("done", filter=running),
        call_failed=Sum("failed", filter=running),
        unparsed=Sum("parse_failed", filter=running),
        last_progress=Min("updated_at", filter=running),
    )
    runs = GaugeMetricFamily(
        "flaskweb_judge_runs", "Judge runs not finished, by status.", labels=["status"]
    )
    for status in ("pending", "running", "paused"):
        runs.add_metric([status], row[f"n_{status}"])
    judgments = GaugeMetricFamily(
        "flaskweb_judge_runs_running_judgments",
        "Judgments of the running judge runs: to_make in all, recorded (parsed or not), failed "
        "(calls that failed for good). Progress is recorded / to_make.",
        labels=["state"],
    )
    failed = row["call_failed"] or 0
    judgments.add_metric(["to_make"], row["to_make"] or 0)
    judgments.add_metric(["recorded"], (row["ok"] or 0) + (row["unparsed"] or 0) + failed)
    judgments.add_metric(["failed"], failed)
    idle = GaugeMetricFamily(
        "flaskweb_judge_runs_idle_seconds",
        "Longest time a running judge run has recorded no judgment (0 with none running).",
    )
    idle.add_metric([], _seconds_since(row["last_progress"]))
    return [runs, judgments, idle]


def _snapshots() -> list[Metric]:
    in_flight = Q(status__in=IN_FLIGHT)
    stale_default = Q(status=SnapshotStatus.DONE, is_default=True, stale=True)
    row = ReportSnapshot.objects.filter(in_flight | stale_default).aggregate(
        n_pending=Count("pk", filter=Q(status=SnapshotStatus.PENDING)),
        n_running=Count("pk", filter=Q(status=SnapshotStatus.RUNNING)),
        n_stale=Count("pk", filter=stale_default),
        oldest_stale=Min("finished_at", filter=stale_default),
        oldest_asked=Min("created_at", filter=in_flight),
    )
    lag = GaugeMetricFamily(
        "flaskweb_report_snapshot_stale_seconds",
        "Age of the oldest default report that new data made out of date (0 when every "
        "project's report is current): beat recomputes it within minutes.",
    )
    lag.add_metric([], _seconds_since(row["oldest_stale"]))
    stale = GaugeMetricFamily(
        "flaskweb_report_snapshots_stale", "Projects whose default report is out of date."
    )
    stale.add_metric([], row["n_stale"])
    computing = GaugeMetricFamily(
        "flaskweb_report_snapshots_in_flight",
        "Report snapshots waiting for or taken by the analytics worker, by status.",
        labels=["status"],
    )
    computing.add_metric(["pending"], row["n_pending"])
    computing.add_metric(["running"], row["n_running"])
    waiting = GaugeMetricFamily(
        "flaskweb_report_snapshot_wait_seconds",
        "How long the oldest report snapshot asked for has waited to be done (0 with none).",
    )
    waiting.add_metric([], _seconds_since(row["oldest_asked"]))
    return [lag, stale, computing, waiting]


def _jobs() -> list[Metric]:
    since = timezone.now() - FAILED_WINDOW
    jobs = GaugeMetricFamily(
        "flaskweb_jobs",
        "Import and export jobs pending or running, by kind.",
        labels=["kind", "status"],
    )
    failed = GaugeMetricFamily(
        "flaskweb_jobs_failed_last_hour",
        "Import and export jobs that failed in the last hour, by kind.",
        labels=["kind"],
    )
    pending, running = JobStatus.PENDING.value, JobStatus.RUNNING.value
    for kind, model in JOB_MODELS.items():
        recent_failure = Q(status=JobStatus.FAILED, finished_at__gte=since)
        row = model.objects.filter(Q(status__in=(pending, running)) | recent_failure).aggregate(
            n_pending=Count("pk", filter=Q(status=pending)),
            n_running=Count("pk", filter=Q(status=running)),
            n_failed=Count("pk", filter=recent_failure),
        )
        jobs.add_metric([kind, "pending"], row["n_pending"])
        jobs.add_metric([kind, "running"], row["n_running"])
        failed.add_metric([kind], row["n_failed"])
    return [jobs, failed]


#: provider id -> name, for the labels; kept from the last scrape that could read the table,
#: so a database outage does not rename the series
_provider_names: dict[str, str] = {}


def provider_names(*, refresh: bool) -> dict[str, str]:
    if refresh:
        try:
            _provider_names.update(
                (str(pk), name) for pk, name in Provider.objects.values_list("pk", "name")
            )
        except Exception:  # the ids stand in until the table can be read
            connection.close_if_unusable_or_obsolete()
    return _provider_names


def provider_metrics(
    activity: Iterable[judging_selectors.ProviderActivity], names: dict[str, str]
) -> list[Metric]:
    """The judging workers' calls per provider (judging.selectors.provider_activity: every
    worker process's figures, merged from the cache's store), labelled by provider name."""
    gauges = {
        "in_flight": GaugeMetricFamily(
            "flaskweb_judge_calls_in_flight",
            "Judge calls on the wire now, over every judging worker process.",
            labels=["provider"],
        ),
        "processes": GaugeMetricFamily(
            "flaskweb_judge_worker_processes",
            "Live judging worker processes calling the provider.",
            labels=["provider"],
        ),
    }
    counters = {
        "calls_total": (
            "flaskweb_judge_calls",
            "Judge calls that reached the provider (retries included).",
        ),
        "throttled_total": (
            "flaskweb_judge_throttled",
            "Judge calls the provider refused with 429.",
        ),
        "retries_total": ("flaskweb_judge_retries", "Judge calls that were tried again."),
        "errors_total": (
            "flaskweb_judge_errors",
            "Judge calls that failed other than by a 429 (timeouts and cut calls included).",
        ),
        "timeouts_total": ("flaskweb_judge_timeouts", "Judge calls that timed out."),
        "cost_usd_total": ("flaskweb_judge_cost_usd", "What the judge calls cost, in US dollars."),
    }
    totals = {
        field: CounterMetricFamily(name, text, labels=["provider"])
        for field, (name, text) in counters.items()
    }
    latency = GaugeMetricFamily(
        "flaskweb_judge_call_latency_seconds",
        "Latency of the provider's recent judge calls, at the 50th and 95th percentile.",
        labels=["provider", "quantile"],
    )
    window = GaugeMetricFamily(
        "flaskweb_judge_window",
        "The concurrency window learned for a provider with no declared limit, once it "
        "refused a call.",
        labels=["provider"],
    )
    for row in activity:
        provider = names.get(str(row.provider_id), str(row.provider_id))
        for field, family in gauges.items():
            family.add_metric([provider], getattr(row, field))
        for field, counter in totals.items():
            counter.add_metric([provider], getattr(row, field))
        for quantile, value in (("0.5", row.latency_p50_s), ("0.95", row.latency_p95_s)):
            if value is not None:
                latency.add_metric([provider, quantile], value)
        if row.window is not None:
            window.add_metric([provider], row.window)
    return [*gauges.values(), *totals.values(), latency, window]
