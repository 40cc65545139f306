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
