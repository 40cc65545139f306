"""PostgreSQL test databases cloned from one migrated template instead of migrated each.

Every pytest-xdist worker needs a database of its own, and each ran all the migrations:
7 s of CPU per worker on an idle machine, three workers at once at the start of the suite
(15-24 s each, beside the checks), and the `alone` group once more. Here the first worker
to get the lock migrates one template database; every worker then copies it
(`CREATE DATABASE … TEMPLATE …`, a fraction of a second) and pytest-django keeps the copy
as it would keep a reused database (its own migrate then finds nothing to apply).

The template is named after a digest of what decides its content: the migrations of every
installed app, the project's own code (a data migration imports it: the built-in catalogue)
and Django's version. `--create-db` builds it again, once per run (the run's id is kept as
the database's comment), so CI never copies a template an earlier run left behind. Old
templates are dropped when a new one is built. Without `--create-db` a worker's existing
database is reused as it is (pyproject.toml's addopts hold `--reuse-db`); only a missing one
is copied. SQLite (the `sqlite` group) is left to pytest-django.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: the project's own code, which migrations may import (annotation/catalogue_text.py)
PROJECT_PACKAGES = ("annotation", "judging", "analytics", "flaskweb")
LOCK = "flaskweb-test-template"
#: one id for all the workers of one run (xdist sets it in every worker); one per process
#: otherwise
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


def inputs() -> list[Path]:
    """The files the migrated database depends on: every installed app's migrations and the
    project's code."""
    from django.apps import apps

    files: set[Path] = set()
    for config in apps.get_app_configs():
        files.update(Path(config.path, "migrations").glob("*.py"))
    for package in PROJECT_PACKAGES:
        files.update((REPO / package).rglob("*.py"))
    return sorted(files)


def digest(files: list[Path] | None = None) -> str:
    """Those files and Django's version, hashed: the template's name."""
    import django

    hashed = hashlib.sha256(django.__version__.encode())
    for path in inputs() if files is None else files:
        # named without the checkout's or the venv's folder: two checkouts of the same code
        # share one template
        name = f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
        hashed.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hashed.hexdigest()[:12]


def clone_from_template(*, create_db: bool, reuse_db: bool) -> bool:
    """Give this process's test database a fresh copy of the migrated template; False when
    pytest-django should make it as usual (not PostgreSQL, or a database to reuse)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return False
    name = connection.creation._get_test_db_name()  # with the worker's suffix, if any
    base = name.removesuffix(f"_{os.environ.get('PYTEST_XDIST_WORKER', '')}")
    template = f"{base[:40]}_tpl_{digest()}"
    quote = connection.ops.quote_name
    with connection._nodb_cursor() as cursor:
        if reuse_db and not create_db and _exists(cursor, name):
            return False  # --reuse-db keeps what is there
        cursor.execute("SELECT pg_advisory_lock(hashtext(%s))", [LOCK])
        try:
            if not _exists(cursor, template) or (create_db and _comment(cursor, template) != RUN):
                _build(cursor, template, base)
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
            cursor.execute(f"CREATE DATABASE {quote(name)} TEMPLATE {quote(template)}")
        finally:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [LOCK])
    return True


def _build(cursor, template: str, base: str) -> None:
    """Migrate a new database and put it in place as the template (old ones dropped)."""
    from django.contrib.contenttypes.models import ContentType
    from django.core.management import call_command
    from django.db import connection

    quote = connection.ops.quote_name
    building = f"{template}_new"
    cursor.execute(f"DROP DATABASE IF EXISTS {quote(building)}")
    cursor.execute(f"CREATE DATABASE {quote(building)}")
    real = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = building
    try:
        call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)
    finally:
        connection.close()  # no session may stay on a template that is copied
        connection.settings_dict["NAME"] = real
        ContentType.objects.clear_cache()  # read from the template: the copies hold the same
    cursor.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s",
        [f"{base[:40]}\\_tpl\\_%", building],
    )
    for (old,) in cursor.fetchall():
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(old)}")
    cursor.execute(f"ALTER DATABASE {quote(building)} RENAME TO {quote(template)}")
    cursor.execute(f"COMMENT ON DATABASE {quote(template)} IS %s", [RUN])


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    return cursor.fetchone() is not None


def _comment(cursor, name: str) -> str | None:
    cursor.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        [name],
    )
    row = cursor.fetchone()
    return row[0] if row else None
