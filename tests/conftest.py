"""Shared fixtures: personas with logged-in clients, projects, and the real-data path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.test import Client

from annotation.models import ProjectRole
from annotation.services.projects import membership_set, project_create

REPO = Path(__file__).resolve().parent.parent
SHARED_FLASK = REPO.parent / "shared" / "data" / "flask"


def pytest_collection_modifyitems(config, items):
    """The long tests (marked `slow` or `browser`) shared out to the start of every xdist
    worker's first share of the list, so that all workers start on them at once and none is
    left to run alone at the end (worksteal hands worker i the i-th of N equal consecutive
    shares, and an idle worker takes the second half of the longest queue, from its end).
    The same order in every worker, as xdist requires: it depends on the collection only."""
    items[:] = _long_first_in_every_share(items, _xdist_workers())


def _xdist_workers() -> int:
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


def _is_long(item) -> bool:
    return bool(item.get_closest_marker("slow") or item.get_closest_marker("browser"))


def _long_first_in_every_share(items: list, workers: int) -> list:
    """Items reordered into `workers` consecutive shares of worksteal's sizes, each opening
    with its part of the long items: runs of one module's long items go, longest run
    first, to the share holding the fewest; the short items follow in their own order."""
    long_runs: list[list] = []
    short: list = []
    for item in items:
        if not _is_long(item):
            short.append(item)
        elif long_runs and getattr(long_runs[-1][-1], "module", None) is getattr(item, "module", 0):
            long_runs[-1].append(item)
        else:
            long_runs.append([item])
    shares: list[list] = [[] for _ in range(workers)]
    for run in sorted(long_runs, key=len, reverse=True):
        min(shares, key=len).extend(run)
    ordered, left, taken = [], len(items), 0
    for i, share in enumerate(shares):
        size = left // (workers - i)  # what worksteal sends worker i
        fill = short[taken : taken + max(0, size - len(share))]
        taken += len(fill)
        ordered += share + fill
        left -= len(share) + len(fill)
    return ordered + short[taken:]


@pytest.fixture
def flask_data() -> Path:
    """The real FLASK release next to the repository; tests using it skip without it."""
    if not (SHARED_FLASK / "flask_evaluation.jsonl").is_file():
        pytest.skip("../shared/data/flask is not present")
    return SHARED_FLASK


@pytest.fixture(scope="session")
def _cloned_test_db(request, django_db_modify_db_settings, django_db_blocker) -> bool:
    """On PostgreSQL, this process's test database copied from a migrated template (made once
    for all the workers) instead of migrated again: tests/db_template.py."""
    from tests.db_template import clone_from_template

    with django_db_blocker.unblock():
        return clone_from_template(
            create_db=bool(request.config.getvalue("create_db")),
            reuse_db=bool(request.config.getvalue("reuse_db")),
        )


@pytest.fixture(scope="session")
def django_db_keepdb(request, _cloned_test_db) -> bool:
    """A copied database is kept as a reused one is: pytest-django neither makes it again
    nor drops it at the end (a run with --create-db copies the template over it, one
    without reuses it)."""
    return _cloned_test_db or bool(request.config.getvalue("reuse_db"))


@pytest.fixture(scope="session")
def django_db_createdb(request, _cloned_test_db) -> bool:
    return False if _cloned_test_db else bool(request.config.getvalue("create_db"))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database, with the built-in catalogue its migrations seed (a database kept
    from an earlier run may have lost it to a transactional test's flush). On PostgreSQL a
    transactional test is then cleaned up by `_FreshRows` rather than Django's flush."""
    from django.db import connection

    with django_db_blocker.unblock():
        _ensure_catalogue()
        fresh = _FreshRows.install(connection) if connection.vendor == "postgresql" else None
    yield
    if fresh is not None:
        fresh.uninstall()


@pytest.fixture(autouse=True)
def _builtin_catalogue(request):
    """Tests with a database see the built-in catalogue, even after a transactional test
    (whose flush, on SQLite, empties every table, the migration-seeded catalogue included;
    on PostgreSQL `_FreshRows` gives the catalogue back): it is put back, committed, as soon
    as such a test's flush has run (pytest_runtest_teardown below).
    Put back inside each later test's own transaction instead, it would be made again for
    every test, a few hundred queries each."""
    names = set(request.fixturenames)
    if {"transactional_db", "live_server", "celery_worker_process"} & names:
        request.getfixturevalue("transactional_db")
    elif "db" in names or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("db")
    else:
        return
    if _is_transactional(request.node):
        request.node.stash[_FLUSHED_BY] = request.getfixturevalue("django_db_blocker")
    _ensure_catalogue()


_FLUSHED_BY = pytest.StashKey[object]()


def _is_transactional(item) -> bool:
    if {"transactional_db", "live_server", "celery_worker_process"} & set(item.fixturenames):
        return True
    marker = item.get_closest_marker("django_db")
    return bool(marker and (marker.kwargs.get("transaction") or marker.args[:1] == (True,)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield  # the test's fixtures are torn down: a transactional test's flush has run
    blocker = item.stash.get(_FLUSHED_BY, None)
    if blocker is not None and nextitem is not None:
        with blocker.unblock():
            _ensure_catalogue()
    return result


@pytest.fixture(autouse=True)
def _media_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def project(db):
    return project_create(slug="demo-project", name="Demo project")


def _user(django_user_model, username, **extra):
    return django_user_model.objects.create_user(
        username=username, password="pw-" + username, email=f"{username}@example.org", **extra
    )


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_user(db, django_user_model):
    return _user(django_user_model, "admin", is_staff=True, is_superuser=True)


@pytest.fixture
def admin_client(admin_user):
    return _client(admin_user)


@pytest.fixture
def researcher(db, django_user_model, project):
    user = _user(django_user_model, "rita")
    membership_set(project=project, user=user, role=ProjectRole.RESEARCHER)
    return user


@pytest.fixture
def researcher_client(researcher):
    return _client(researcher)


@pytest.fixture
def annotator(db, django_user_model, project):
    user = _user(django_user_model, "alice")
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    return user


@pytest.fixture
def annotator_client(annotator):
    return _client(annotator)


@pytest.fixture
def outsider(db, django_user_model):
    return _user(django_user_model, "charlie")


@pytest.fixture
def outsider_client(outsider):
    return _client(outsider)


# --- a real Celery worker process on the real Redis broker -------------------------------------


@pytest.fixture
def celery_worker_process(transactional_db, settings):
    """Start `celery worker` as a separate process on the test database and Redis.

    Tests using it must use committed data (transactional_db), as the worker is another
    process with its own connection.
    """
    import os
    import subprocess
    import sys

    from django.db import connection

    from flaskweb.celery import app

    _ensure_catalogue()
    with app.connection_for_write() as conn:  # no leftovers from an earlier run
        for queue in ("default", "imports", "judging", "analytics"):
            if _queue_exists(conn, queue):
                conn.default_channel.queue_purge(queue)
    db = connection.settings_dict
    env = os.environ.copy()
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings_test",
        DATABASE_URL=(
            f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        ),
        DJANGO_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        # the same cache keys as this process, so progress written there is read here
        FLASKWEB_CACHE_PREFIX=settings.CACHES["default"].get("KEY_PREFIX", ""),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "flaskweb",
            "worker",
            "-Q",
            "default,imports,judging,analytics",
            "-P",
            "solo",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "--loglevel",
            "WARNING",
        ],
        cwd=REPO,
        env=env,
    )
    yield proc
    # (a worker that died at start fails the test's wait for its work, then this says why)
    assert proc.poll() is None, f"the worker process exited (status {proc.returncode})"
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


class _FreshRows:
    """Puts a PostgreSQL test database back as migrate left it after a transactional test,
    in place of Django's flush (TransactionTestCase._fixture_teardown).

    The flush truncates every table (75, with 370 indexes, each given new files) and then
    makes the content types, the permissions and, in this conftest, the built-in catalogue
    again: 1-2.5 s per transactional test on a busy machine, and there are about a hundred.
    Here, in one transaction that first locks every table against writers (as TRUNCATE
    does: a request still in flight is waited for), one query finds the tables that hold
    rows; those migrate left empty are emptied with DELETE (every foreign key is deferred,
    so in any order); those it filled (content types, permissions, the catalogue) are left
    alone when their rows are exactly the ones kept at the start of the session, and are
    otherwise emptied and given those rows back, with their ids. Sequences go on, as after
    the flush (reset_sequences=False)."""

    #: What migrate fills; any other table holding rows when the session starts is a leftover
    #: of an earlier run on a kept database, which Django's flush empties first.
    MIGRATED = frozenset(
        {
            "django_content_type",
            "auth_permission",
            "annotation_domain",
            "annotation_skill",
            "annotation_rubric",
        }
    )

    #: The one in force in this session (None on SQLite).
    installed: _FreshRows | None = None

    def __init__(self, connection) -> None:
        self.alias = connection.alias
        self.tables = {
            name: connection.ops.quote_name(name)
            for name in connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
        }
        with connection.cursor() as cursor:
            if set(self._holding_rows(cursor)) - self.MIGRATED:
                from django.core.management import call_command

                call_command("flush", verbosity=0, interactive=False, database=self.alias)
                _ensure_catalogue()
            self.kept = {t: self._rows(cursor, t) for t in self._holding_rows(cursor)}
            self.digests = {t: self._digest(cursor, t) for t in self.kept}

    @classmethod
    def install(cls, connection) -> _FreshRows:
        from django.test import TransactionTestCase

        fresh = cls(connection)
        flush = fresh.flush = TransactionTestCase._fixture_teardown

        def _fixture_teardown(test_case) -> None:
            if (
                test_case.available_apps is None
                and not test_case.serialized_rollback
                and test_case._databases_names(include_mirrors=False) == [fresh.alias]
            ):
                fresh.restore()
            else:
                flush(test_case)

        TransactionTestCase._fixture_teardown = _fixture_teardown
        cls.installed = fresh
        return fresh

    def uninstall(self) -> None:
        from django.test import TransactionTestCase

        TransactionTestCase._fixture_teardown = self.flush
        type(self).installed = None

    def restore(self) -> None:
        from django.contrib.contenttypes.models import ContentType
        from django.db import connections, transaction

        with transaction.atomic(using=self.alias), connections[self.alias].cursor() as cursor:
            # as TRUNCATE would, wait for the writers still at work (a request the test's
            # page left in flight) and hold off new ones until this is committed
            cursor.execute(
                f"LOCK TABLE {', '.join(self.tables.values())} IN SHARE ROW EXCLUSIVE MODE"
            )
            holding = self._holding_rows(cursor)
            changed = [
                t
                for t in self.kept
                if t not in holding or self._digest(cursor, t) != self.digests[t]
            ]
            for table in [t for t in holding if t not in self.kept] + changed:
                cursor.execute(f"DELETE FROM {self.tables[table]}")
            for table in changed:
                quoted = self.tables[table]
                rows = f"json_populate_recordset(NULL::{quoted}, %s)"
                cursor.execute(f"INSERT INTO {quoted} SELECT * FROM {rows}", [self.kept[table]])
        if "django_content_type" in changed:
            ContentType.objects.clear_cache()

    def _holding_rows(self, cursor) -> list[str]:
        cursor.execute(
            " UNION ALL ".join(
                f"SELECT %s WHERE EXISTS (SELECT 1 FROM {quoted})"
                for quoted in self.tables.values()
            ),
            list(self.tables),
        )
        return [row[0] for row in cursor.fetchall()]

    def _rows(self, cursor, table: str) -> str:
        cursor.execute(f"SELECT json_agg(t)::text FROM {self.tables[table]} AS t")
        return cursor.fetchone()[0]

    def _digest(self, cursor, table: str) -> str:
        cursor.execute(
            f"SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {self.tables[table]} AS t"
        )
        return cursor.fetchone()[0]


def _ensure_catalogue() -> None:
    """transactional_db truncates every table after a test, the built-in catalogue seeded by
    a data migration included; put it back for the tests that come after."""
    from annotation.catalogue.services import catalogue_sync_builtins
    from annotation.models import Skill

    if not Skill.objects.filter(project__isnull=True).exists():
        catalogue_sync_builtins()


def _queue_exists(conn, queue: str) -> bool:
    try:
        conn.default_channel.queue_declare(queue=queue, passive=True)
        return True
    except Exception:
        return False


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.1):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
