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
os.environ.setdefault("FLASKWEB_CACHE_PREFIX", f"flaskweb-test-{os.getpid()}")
# Broker keys (queues included) carry a per-run prefix, so two test runs on one machine
# never consume each other's messages. Worker subprocesses inherit it through os.environ.
os.environ.setdefault("FLASKWEB_TEST_BROKER_PREFIX", f"flaskweb-test-{os.getpid()}:")

from flaskweb.settings import *  # noqa: E402,F403
from flaskweb.settings import BASE_DIR  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MEDIA_ROOT = Path(os.environ.get("DJANGO_MEDIA_ROOT", str(BASE_DIR / "var" / "test-media")))
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_TRANSPORT_OPTIONS = {
    **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
    "global_keyprefix": os.environ["FLASKWEB_TEST_BROKER_PREFIX"],
}
