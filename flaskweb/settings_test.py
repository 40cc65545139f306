"""Test settings: the real settings, pointed at real PostgreSQL and Redis.

The suite runs against PostgreSQL (TEST_DATABASE_URL, default: the local server with trust
auth) and Redis (TEST_REDIS_URL), because skip-locked claims, COPY imports and the broker
behave differently on SQLite and in memory. Tests about the embedded default start their own
subprocess on SQLite.
"""

import os
from pathlib import Path

os.environ.setdefault("DJANGO_DEBUG", "true")
os.environ.setdefault(
    "DATABASE_URL", os.environ.get("TEST_DATABASE_URL", "postgres://root@127.0.0.1:5432/flaskweb")
)
os.environ.setdefault("REDIS_URL", os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/14"))
# Retries without Retry-After wait milliseconds, not seconds (worker subprocesses inherit it).
os.environ.setdefault("FLASKWEB_JUDGE_BACKOFF_BASE_SECONDS", "0.02")
# Cache and broker keys (queues included) carry a per-run prefix, so two test runs on one
# machine never read each other's counters or consume each other's messages. Worker
# subprocesses inherit it through os.environ. Parallel test processes (pytest -n) inherit
# the controller's default prefix too, so each adds its own worker id to it (a prefix a
# test sets for its own subprocesses is left as it is).
_xdist = os.environ.get("PYTEST_XDIST_WORKER", "")
for _name, _sep in (("FLASKWEB_CACHE_PREFIX", ""), ("FLASKWEB_TEST_BROKER_PREFIX", ":")):
    _prefix = os.environ.setdefault(_name, f"flaskweb-test-{os.getpid()}{_sep}")
    _inherited = _prefix.startswith("flaskweb-test-") and f"-{_xdist}" not in _prefix
    if _xdist and _inherited:
        os.environ[_name] = f"{_prefix.rstrip(':')}-{_xdist}{_sep}"

from flaskweb.settings import *  # noqa: E402,F403
from flaskweb.settings import BASE_DIR  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MEDIA_ROOT = Path(os.environ.get("DJANGO_MEDIA_ROOT", str(BASE_DIR / "var" / "test-media")))
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
    "global_keyprefix": os.environ["FLASKWEB_TEST_BROKER_PREFIX"],
}
