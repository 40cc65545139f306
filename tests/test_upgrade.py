"""Upgrading from the previous release: its own databases, migrated by this code, keep their data.

tests/fixtures/upgrade/ holds a SQLite database and a PostgreSQL dump that the previous
release made with its own code (scripts/make_upgrade_fixture <git-ref>: the demo plus every
kind of row its users make) and a manifest of the release. Each is loaded into a fresh
database and this code's `migrate` runs on it in a subprocess. Then: every table that was
there keeps its rows (unless DOCUMENTED_ROW_CHANGES says why not); the human and judge
scores, preferences, adjudications and accounts read the same (a digest of each); every
migration of this code is applied and a second `migrate` has nothing to do;
`makemigrations --check` finds nothing; the demo admin signs in with its password, a
session of the old release is still signed in, and the key pages and the report JSON answer
200 on the migrated data.

docs/SERVING.md "Upgrading to a new release" says what this guarantees an operator;
tests/README.md "Upgrades and migrations" how the fixture is made and kept.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db.migrations.loader import MigrationLoader

from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "upgrade"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
APPS = ("annotation", "judging", "analytics")

#: Tables whose row count a migration of this round changes on purpose: table -> the
#: migration and why. A table missing from here must keep every row.
DOCUMENTED_ROW_CHANGES: dict[str, str] = {}
#: Tables that may only grow: Django's bookkeeping (the new migrations, models and their
#: permissions).
GROWS = ("django_migrations", "django_content_type", "auth_permission")

#: The values people and judges gave, and the accounts' credentials, read before and after.
SCORES = {
    "annotation_humanscore": "id, assignment_id, response_id, annotator_id, skill_id, score, "
    "is_na, rationale",
    "annotation_humanpreference": "id, assignment_id, response_a_id, response_b_id, skill_id, "
    "choice, strength",
    "annotation_adjudicatedscore": "id, campaign_id, response_id, skill_id, score, is_na",
    "judging_judgescore": "id, judgment_id, run_id, response_id, skill_id, score, is_na, raw_value",
    "judging_pairjudgment": "id, run_id, response_id, anchor_id, status, verdicts",
    "analytics_importedscore": "id, response_id, skill_id, rater, rater_kind, value, is_na",
    "analytics_importedpreference": "id, response_a_id, response_b_id, skill_id, rater, choice",
    # a sign-in may rehash its password when Django's hasher changes: the one signed in is
    # left out
    "auth_user": "id, username, is_active, is_staff, is_superuser, "
    "CASE WHEN username = 'admin' THEN '' ELSE password END",
}

#: What the subprocess does, with this code on the release's database: migrate (as
#: `manage.py migrate` does), migrate again, look for model changes without a migration,
#: then use the app as its users would. Prints one JSON line for the test to check.
UPGRADE = r"""
import json, sys
from io import StringIO

import django

django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment
from django.urls import reverse

facts = json.loads(sys.argv[1])
pages = facts["pages"]
out = {}
for step in ("migrate", "migrate_again"):
    log = StringIO()
    call_command("migrate", "--no-input", stdout=log)
    out[step] = log.getvalue()
print("UPGRADE-MIGRATED", flush=True)
sys.stdin.readline()  # the test has read the migrated tables; the pages below write to them

changes = StringIO()
try:
    call_command("makemigrations", "--check", "--dry-run", stdout=changes, stderr=changes)
    out["makemigrations"] = ""
except SystemExit:
    out["makemigrations"] = changes.getvalue() or "changes"

setup_test_environment()
out["logins"] = {}
for username, password in facts["logins"]:
    admin = Client()
    answer = admin.post(reverse("login"), {"username": username, "password": password})
    out["logins"][username] = answer.status_code
annotator = Client()
annotator.force_login(get_user_model().objects.get(username="annotator1"))

kept = Client()
kept.cookies["sessionid"] = pages["session"]["cookie"]
answer = kept.get(reverse("annotation:home"))
out["kept_session"] = [answer.status_code, pages["session"]["username"] in answer.text]

as_admin = [
    reverse("annotation:home"),
    reverse("annotation:project-detail", args=["demo"]),
    reverse("annotation:dataset-detail", args=[pages["dataset"]]),
    reverse("annotation:campaign-detail", args=[pages["campaign"]]),
    reverse("annotation:campaign-study", args=[pages["study"]]),
    reverse("annotation:screening", args=[pages["study"]]),
    reverse("annotation:review-queue", args=[pages["campaign"]]),
    reverse("annotation:metadata-verify-page", args=[pages["dataset"]]),
    reverse("annotation:member-list", args=["demo"]),
    reverse("judging:judge-list", args=["demo"]),
    reverse("judging:run-detail", args=[pages["judge_run"]]),
    reverse("judging:run-detail", args=[pages["pair_run"]]),
    reverse("judging:metadata-run-detail", args=[pages["metadata_run"]]),
    reverse("analytics:dashboard", args=["demo"]),
    reverse("analytics:preferences", args=["demo"]),
    reverse("analytics:trust", args=["demo"]),
    reverse("analytics:disagreements", args=["demo"]),
    reverse("analytics:exports", args=["demo"]),
    reverse("analytics:metadata-agreement", args=[pages["dataset"]]),
]
out["pages"] = {url: admin.get(url).status_code for url in as_admin}
for url in (
    reverse("annotation:my-campaigns"),
    reverse("annotation:annotate", args=[pages["campaign"]]),
):
    out["pages"][url] = annotator.get(url).status_code

report = admin.get("/api/v1/projects/demo/analytics/report")
ok = report.status_code == 200
out["report"] = [report.status_code, sorted(report.json()) if ok else report.text[:500]]
print("UPGRADE-CHECK " + json.dumps(out))
"""
#: Signs in through the login page after the upgrade (a password check costs most of a
#: second); every other account's password hash is checked unchanged with the scores.
SIGN_IN = "admin"  # as in SCORES["auth_user"]


# --- reading a database of either kind ------------------------------------------------------


def _sqlite_read(path: Path):
    def read(sql: str) -> list[tuple]:
        with sqlite3.connect(path) as db:
            return db.execute(sql).fetchall()

    return read


def _postgres_read(url: str):
    def read(sql: str) -> list[tuple]:
        with psycopg.connect(url, autocommit=True) as db:
            return db.execute(sql).fetchall()

    return read


def _tables(read, kind: str) -> list[str]:
    if kind == "sqlite":
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    else:
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    return sorted(name for (name,) in read(sql))


def _counts(read, kind: str) -> dict[str, int]:
    return {t: read(f'SELECT COUNT(*) FROM "{t}"')[0][0] for t in _tables(read, kind)}


def _digest(read) -> dict[str, str]:
    """A sha256 per table of the SCORES columns, row by row in id order (booleans as 0/1)."""
    digests = {}
    for table, columns in SCORES.items():
        h = hashlib.sha256()
        for row in read(f"SELECT {columns} FROM {table} ORDER BY id"):
            values = [int(v) if isinstance(v, bool) else v for v in row]
            h.update(json.dumps(values, sort_keys=True, default=str).encode())
        digests[table] = h.hexdigest()
    return digests


# --- the databases --------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "REDIS_", "CELERY_", "DJANGO_", "FLASKWEB_VAR"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        DJANGO_DEBUG="true",
        DJANGO_ALLOWED_HOSTS="testserver,localhost,127.0.0.1",
        # the fixture's sessions are signed with the key it was made with
        DJANGO_SECRET_KEY=MANIFEST["secret_key"],
        **extra,
    )
    return env


def pg_dump_sql() -> bytes:
    """The fixture's dump for psql, without pg_dump's \\restrict lines (a guard against
    hostile dumps that older psql programs do not know; this one is ours)."""
    with gzip.open(FIXTURES / MANIFEST["files"]["postgresql"]) as src:
        lines = src.read().splitlines(keepends=True)
    return b"".join(x for x in lines if not x.startswith((b"\\restrict ", b"\\unrestrict ")))


def _server() -> dict:
    db = settings.DATABASES["default"]
    return {
        "host": db.get("HOST") or "127.0.0.1",
        "port": db.get("PORT") or 5432,
        "user": db.get("USER") or "root",
        "password": db.get("PASSWORD") or "",
    }


def _pg_url(name: str) -> str:
    s = _server()
    auth = s["user"] + (f":{s['password']}" if s["password"] else "")
    return f"postgres://{auth}@{s['host']}:{s['port']}/{name}"


@pytest.fixture
def sqlite_release(tmp_path):
    """The release's SQLite database in a var directory of its own (the embedded default)."""
    var = tmp_path / "var"
    var.mkdir()
    with gzip.open(FIXTURES / MANIFEST["files"]["sqlite"]) as src:
        (var / "flaskweb.sqlite3").write_bytes(src.read())
    env = _env(FLASKWEB_VAR_DIR=str(var), DJANGO_MEDIA_ROOT=str(tmp_path / "media"))
    return _sqlite_read(var / "flaskweb.sqlite3"), env


@pytest.fixture
def postgres_release(tmp_path):
    """The release's dump loaded into a scratch PostgreSQL database, dropped afterwards."""
    if shutil.which("psql") is None:
        pytest.fail("psql is needed to load the PostgreSQL fixture (postgresql-client)")
    name = f"flaskweb_upgrade_{uuid.uuid4().hex[:10]}"
    admin = _pg_url("postgres")
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _pg_url(name)
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"],
            input=pg_dump_sql(),
            check=True,
            capture_output=True,
        )
        env = _env(
            DATABASE_URL=url,
            FLASKWEB_VAR_DIR=str(tmp_path / "var"),
            DJANGO_MEDIA_ROOT=str(tmp_path / "media"),
        )
        yield _postgres_read(url), env
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _upgrade_and_check(read, kind: str, env: dict, tmp_path: Path) -> None:
    # given the previous release's database as it made it
    assert sorted(map(list, read("SELECT app, name FROM django_migrations"))) == sorted(
        MANIFEST["migrations"]
    )
    counts_before, scores_before = _counts(read, kind), _digest(read)
    assert counts_before["annotation_humanscore"] > 200 and counts_before["judging_judgescore"]

    # when this code migrates it, in a process of its own, as `manage.py migrate` does
    logins = [login for login in MANIFEST["logins"] if login[0] == SIGN_IN]
    facts = {"logins": logins, "pages": MANIFEST["pages"][kind]}
    with open(tmp_path / "stderr", "w+") as stderr:
        upgrade = subprocess.Popen(
            [sys.executable, "-c", UPGRADE, json.dumps(facts)],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            migrated = upgrade.stdout.readline()
            if not migrated.startswith("UPGRADE-MIGRATED"):
                upgrade.wait(timeout=60)
                stderr.seek(0)
                pytest.fail(f"migrate failed:\n{migrated}{upgrade.stdout.read()}{stderr.read()}")

            # then every row is still there, and every score and account reads the same
            counts_after, scores_after = _counts(read, kind), _digest(read)
            stdout, _ = upgrade.communicate("go\n", timeout=300)
        finally:
            if upgrade.poll() is None:
                upgrade.kill()
        stderr.seek(0)
        assert upgrade.returncode == 0, stdout[-3000:] + stderr.read()[-5000:]
    changed = {
        table: (before, counts_after.get(table))
        for table, before in counts_before.items()
        if table not in DOCUMENTED_ROW_CHANGES
        and not (table in GROWS and counts_after.get(table, -1) >= before)
        and counts_after.get(table) != before
    }
    assert changed == {}, f"rows lost or added by the migrations (before, after): {changed}"
    assert scores_after == scores_before
    applied = {tuple(row) for row in read("SELECT app, name FROM django_migrations")}
    on_disk = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    assert sorted(m for m in on_disk if m[0] in APPS and m not in applied) == []
    line = next(x for x in stdout.splitlines() if x.startswith("UPGRADE-CHECK "))
    result = json.loads(line.removeprefix("UPGRADE-CHECK "))
    assert "No migrations to apply" in result["migrate_again"], result["migrate_again"]
    assert result["makemigrations"] == "", result["makemigrations"]

    # and the app works on it: sign-ins, a session of the release, the pages, the report
    assert result["logins"] == {name: 302 for name, _ in logins}
    assert result["kept_session"] == [200, True]
    assert {url: code for url, code in result["pages"].items() if code != 200} == {}
    status, keys = result["report"]
    assert status == 200, keys
    assert {"agreement", "correlation", "preferences", "snapshot"} <= set(keys), keys


@pytest.mark.slow
def test_the_previous_releases_sqlite_database_upgrades_with_every_row(sqlite_release, tmp_path):
    read, env = sqlite_release
    _upgrade_and_check(read, "sqlite", env, tmp_path)


@pytest.mark.slow
@pytest.mark.postgres_only
def test_the_previous_releases_postgresql_database_upgrades_with_every_row(
    postgres_release, tmp_path
):
    read, env = postgres_release
    _upgrade_and_check(read, "postgresql", env, tmp_path)


# --- the fixture is the previous release's --------------------------------------------------


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


def _dump_migrations() -> list[list[str]]:
    """The django_migrations rows of the PostgreSQL dump (its COPY block)."""
    rows, inside = [], False
    with gzip.open(FIXTURES / MANIFEST["files"]["postgresql"], "rt") as dump:
        for line in dump:
            if line.startswith("COPY public.django_migrations "):
                inside = True
            elif inside and line.startswith("\\."):
                break
            elif inside:
                _, app, name, _ = line.rstrip("\n").split("\t")
                rows.append([app, name])
    return sorted(rows)


def test_the_fixture_holds_the_migrations_of_the_release_it_names(tmp_path):
    """Both databases hold exactly the migrations the manifest's release shipped, every one
    of them is still in the code unchanged (a shipped migration is never edited: databases
    ran it as it was), and the release is an ancestor of this code. A fixture made from
    the wrong ref, or left behind by a newer release's tag, fails here."""
    recorded = sorted(MANIFEST["migrations"])
    with gzip.open(FIXTURES / MANIFEST["files"]["sqlite"]) as src:
        (tmp_path / "db.sqlite3").write_bytes(src.read())
    in_sqlite = sorted(
        map(list, _sqlite_read(tmp_path / "db.sqlite3")("SELECT app, name FROM django_migrations"))
    )
    remake = f"make the fixture again: scripts/make_upgrade_fixture {MANIFEST['ref']}"
    assert in_sqlite == recorded, f"the SQLite fixture is not the manifest's; {remake}"
    assert _dump_migrations() == recorded, f"the PostgreSQL dump is not the manifest's; {remake}"

    # every migration the release applied is still in the code (none renamed or removed)
    on_disk = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    assert [m for m in map(tuple, recorded) if m not in on_disk] == []
    ours = [tuple(m) for m in recorded if m[0] in APPS]

    if (
        not shutil.which("git")
        or _git("cat-file", "-e", f"{MANIFEST['commit']}^{{commit}}").returncode
    ):
        pytest.skip("no git history here to compare the release with")
    commit = MANIFEST["commit"]
    assert _git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, (
        f"the fixture's release {commit[:10]} is not an ancestor of this code"
    )
    shipped = _git("ls-tree", "-r", "--name-only", commit, "--", *(f"{a}/migrations" for a in APPS))
    files = [f for f in shipped.stdout.split() if f.endswith(".py") and "/__init__" not in f]
    assert sorted(tuple(f.removesuffix(".py").split("/migrations/")) for f in files) == sorted(
        ours
    ), f"the fixture does not hold the migrations {commit[:10]} shipped; {remake}"
    edited = _git("diff", "--name-only", commit, "--", *files).stdout.split()
    assert edited == [], f"migrations shipped in {commit[:10]} were edited since: {edited}"
    # a release tagged after the fixture's (v*) must bring its own fixture
    tags = _git("tag", "--merged", "HEAD", "--list", "v*", "--sort=-creatordate").stdout.split()
    newer = [t for t in tags if _git("merge-base", "--is-ancestor", commit, t).returncode == 0]
    head = _git("rev-parse", "HEAD").stdout.strip()
    newer = [
        t
        for t in newer
        if _git("rev-parse", f"{t}^{{commit}}").stdout.strip() not in (commit, head)
    ]
    assert newer == [], (
        f"release {newer[0]} is out: make its fixture (scripts/make_upgrade_fixture {newer[0]})"
    )
