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


def post_worker_init(worker):
    """The application is loaded: load its URLs too, then take every object alive now out
    of the garbage collector's passes (`gc.freeze`).

    A worker starts with about 170,000 objects (Django's apps and models, the URL patterns,
    DRF, the project's modules) that live as long as it does, and each full collection
    scanned them all again: about 80 ms of CPU during which no other thread of the worker
    runs (bench/README.md, "Fourth pass"). Objects made later are collected as before;
    only reference cycles among the start-up objects are never freed, and those live as
    long as the worker anyway."""
    import gc

    try:
        from django.urls import get_resolver

        get_resolver().reverse_dict  # noqa: B018 (imports the URL modules and indexes them)
    except Exception:  # a broken URL module answers its error on the first request, as before
        worker.log.exception("the URLs could not be loaded ahead")
    gc.collect()
    gc.freeze()


def on_exit(server):
    if _own_metrics_dir():
        import shutil

        shutil.rmtree(os.environ.get("PROMETHEUS_MULTIPROC_DIR", ""), ignore_errors=True)


# The health probes (/healthz, /readyz) come every few seconds from each load balancer or
# compose: their successful answers are left out of the access log, failures stay in it.
#
# The line itself is gunicorn's, for any access_log_format, but its fields are read only when
# the format asks for them. gunicorn's Logger.atoms copies every request header, response
# header and WSGI environ entry into a dict, and its SafeAtoms copies that again, escaping
# each value, for the nine fields of the default format: about 5 % of a web worker's CPU on
# the annotation API (bench/README.md, "Third pass").
# Kept in this file, not in the flaskweb package: the master reads it, and a package imported
# there would be inherited by the workers a reload starts (the old release's code).
from gunicorn.glogging import Logger, SafeAtoms  # noqa: E402

_PROBES = frozenset({"/healthz", "/readyz"})


class _LazyAtoms(SafeAtoms):
    """What SafeAtoms(Logger.atoms(...)) answers, key by key, computing only the keys the
    format reads: the request's headers ({name}i), the response's ({name}o) and the WSGI
    environ ({key}e) are looked up when asked for, '"' escaped as SafeAtoms does."""

    def __init__(self, logger, resp, req, wsgi_env, request_time):
        dict.__init__(self, _=None)  # never empty: logging takes an empty mapping as no args
        self._args = (logger, resp, req, wsgi_env, request_time)
        self._atoms = None

    def _value(self, key):
        logger, resp, req, wsgi_env, request_time = self._args
        if key.startswith("{"):
            name, kind = key[1:-2], key[-1:]
            if key[-2:-1] != "}" or kind not in "ioe":
                return "-"
            if kind == "e":
                pairs = wsgi_env.items()
            elif kind == "o":
                pairs = resp.headers.items() if hasattr(resp.headers, "items") else resp.headers
            else:
                pairs = getattr(req, "headers", req)
                pairs = pairs.items() if hasattr(pairs, "items") else pairs
            found = "-"
            for k, v in pairs:  # the last of a repeated name wins, as in atoms()
                if k.lower() == name:
                    found = v
            return found
        if self._atoms is None:
            self._atoms = _base_atoms(logger, resp, wsgi_env, request_time)
        return self._atoms.get(key, "-")

    def __getitem__(self, k):
        key = k.lower() if k.startswith("{") else k
        value = self._value(key)
        return value.replace('"', '\\"') if isinstance(value, str) else value


def _base_atoms(logger, resp, wsgi_env, request_time):
    """Logger.atoms without the headers and the WSGI environ (gunicorn 27's fields)."""
    status = resp.status
    if isinstance(status, str):
        status = status.split(None, 1)[0]
    sent = getattr(resp, "sent", None)
    seconds, micro = request_time.seconds, request_time.microseconds
    return {
        "h": wsgi_env.get("REMOTE_ADDR", "-"),
        "l": "-",
        "u": logger._get_user(wsgi_env) or "-",
        "t": logger.now(),
        "r": f"{wsgi_env['REQUEST_METHOD']} {wsgi_env['RAW_URI']} {wsgi_env['SERVER_PROTOCOL']}",
        "s": status,
        "m": wsgi_env.get("REQUEST_METHOD"),
        "U": wsgi_env.get("PATH_INFO"),
        "q": wsgi_env.get("QUERY_STRING"),
        "H": wsgi_env.get("SERVER_PROTOCOL"),
        "b": sent is not None and str(sent) or "-",
        "B": sent,
        "f": wsgi_env.get("HTTP_REFERER", "-"),
        "a": wsgi_env.get("HTTP_USER_AGENT", "-"),
        "T": seconds,
        "D": seconds * 1000000 + micro,
        "M": seconds * 1000 + int(micro / 1000),
        "L": f"{seconds}.{micro:06d}",
        "p": f"<{os.getpid()}>",
    }


class ProbeQuietLogger(Logger):
    def access(self, resp, req, wsgi_environ, request_time):
        if not self.access_log_enabled:
            return
        if wsgi_environ.get("PATH_INFO") in _PROBES and str(resp.status).startswith("2"):
            return
        try:
            atoms = _LazyAtoms(self, resp, req, wsgi_environ, request_time)
            self.access_log.info(self.cfg.access_log_format, atoms)
        except Exception:
            import traceback

            self.error(traceback.format_exc())


logger_class = ProbeQuietLogger
