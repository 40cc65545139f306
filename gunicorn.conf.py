"""The one web-server recipe: gunicorn reads this file from the working directory, so
`gunicorn flaskweb.wsgi:application` (README), the image's CMD, docker-compose.yml's `web`
and bench/annotate_load.py all serve with the same shape. Each setting can be changed per
deployment through the environment variable named beside it (.env.example).

Why this shape (bench/README.md, "Web server recipe": 32 annotators on 10,000 tasks, the
shapes alternated in one series): the annotator loop is short requests that wait on
PostgreSQL about as long as they compute, so a second thread per process overlaps those
waits where a sync worker idles. Medians: gthread 3 x 2 156 submissions/s, p99 215 ms;
sync x 4 134/s, p99 421 ms; gthread 3 x 4 163/s, p99 281 ms (more threads queue requests
inside a busy process: the same throughput, a longer tail). Workers are one per core plus
one, so one process can wait on I/O while the others keep the cores busy.
"""

from __future__ import annotations

import multiprocessing
import os


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"{name}={value!r} is not a whole number") from None


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
worker_class = "gthread"
workers = _int("WEB_CONCURRENCY", multiprocessing.cpu_count() + 1)
threads = _int("GUNICORN_THREADS", 2)
# a request that has not answered in 30 s is stuck (every page and API call is short; long
# work runs in Celery), so the worker is recycled instead of holding its slots forever
timeout = _int("GUNICORN_TIMEOUT", 30)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
# browsers and the annotators' htmx requests reuse connections between quick submits
keepalive = _int("GUNICORN_KEEPALIVE", 5)
# request line and headers are bounded here; bodies by FLASKWEB_MAX_* in Django
# (flaskweb/request_limits.py), which answers 413 before reading them
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
# a slow leak in one worker cannot grow without bound: each is replaced after this many
# requests (jittered so they do not all restart together); 0 turns it off
max_requests = _int("GUNICORN_MAX_REQUESTS", 10000)
max_requests_jitter = max_requests // 10
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None

# --- metrics of several processes (docs/OPERATIONS.md "Several web processes") ---------------
# Each worker writes its request counters to a file of its own in PROMETHEUS_MULTIPROC_DIR
# and a scrape adds them up (flaskweb/metrics_dir.py). Unset, this master makes a private
# directory and removes it at exit (a USR2 upgrade's new master, started with the original
# environment, makes its own). Set (`manage.py serve`: var/prometheus; compose), what an
# earlier run left there is deleted when the master starts, unless it is a USR2 upgrade's new
# master (the old workers still count there). A worker that exits is folded into an archive
# file, so its counts stay and the files do not pile up as workers are replaced.
_METRICS_DIR_OWNER = "FLASKWEB_METRICS_DIR_OWNER"
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    import tempfile

    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(
        prefix=f"flaskweb-metrics-{os.getpid()}-"
    )
    os.environ[_METRICS_DIR_OWNER] = str(os.getpid())


def _own_metrics_dir() -> bool:
    return os.environ.get(_METRICS_DIR_OWNER) == str(os.getpid())


def on_starting(server):
    from flaskweb import metrics_dir

    path = metrics_dir.directory_usable()
    if path and not _own_metrics_dir() and "GUNICORN_PID" not in os.environ:
        metrics_dir.wipe(path)
    metrics_dir.remove_orphans()  # private directories of masters that were killed


def child_exit(server, worker):
    from flaskweb import metrics_dir

    try:
        metrics_dir.archive_process(worker.pid)
    except Exception:  # a metrics file must never stop the master replacing a worker
        server.log.exception("metrics of worker %s could not be archived", worker.pid)


def on_exit(server):
    if _own_metrics_dir():
        import shutil

        shutil.rmtree(os.environ.get("PROMETHEUS_MULTIPROC_DIR", ""), ignore_errors=True)


# The health probes (/healthz, /readyz) come every few seconds from each load balancer or
# compose: their successful answers are left out of the access log, failures stay in it.
from gunicorn.glogging import Logger  # noqa: E402

_PROBES = frozenset({"/healthz", "/readyz"})


class ProbeQuietLogger(Logger):
    def access(self, resp, req, wsgi_environ, request_time):
        if wsgi_environ.get("PATH_INFO") in _PROBES and str(resp.status).startswith("2"):
            return
        super().access(resp, req, wsgi_environ, request_time)


logger_class = ProbeQuietLogger
