"""`manage.py backup` and `manage.py restore` (flaskweb/backup.py, docs/SERVING.md "Backups
and restores") on real services: the embedded default served by gunicorn on SQLite, and the
PostgreSQL test database, each backed up while annotators submit, restored into a fresh
install and verified against the manifest; damaged archives change nothing."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from psycopg.conninfo import make_conninfo

from annotation.models import HumanScore
from annotation.services.assignments import assignment_next, human_score_submit
from flaskweb import backup
from flaskweb.backup import (
    BackupError,
    Database,
    _manifest_digest,
    backup_create,
    backup_restore,
    database_summary,
    pg_tool,
)
from tests.annotation.test_claim_concurrency import make_campaign, scores_for
from tests.conftest import REPO, wait_for

# --- the embedded default: gunicorn on SQLite ---------------------------------------------------

SETUP = """
import json, pathlib
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client
from rest_framework.authtoken.models import Token
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import ProjectRole, UploadSource
from annotation.services.projects import membership_set, project_create
User = get_user_model()
project = project_create(slug="kept", name="Kept")
people = [User.objects.create_user(f"a{i}", password="pw-annotator") for i in range(4)]
for person in people:
    membership_set(project=project, user=person, role=ProjectRole.ANNOTATOR)
admin = User.objects.create_superuser("siteadmin", "admin@example.org", "pw-siteadmin")
rows = [
    {"id": f"i{i}", "instruction": f"Question {i}", "reference": f"Reference {i}",
     "skills": ["Factuality", "Comprehension", "Readability"], "domains": ["History"],
     "difficulty": 2, "responses": [{"model": m, "text": f"Answer {i}"} for m in ("m1", "m2")]}
    for i in range(60)
]
path = pathlib.Path("{var}") / "items.jsonl"
path.write_text("".join(json.dumps(r) + "\\n" for r in rows))
upload = dataset_upload_create(project=project, dataset_name="D", source=UploadSource.CLI,
                               files=[(FileSpec(path.name), str(path))])
dataset = dataset_import(upload_id=upload.pk).dataset
campaign = campaign_create(project=project, dataset=dataset, name="C", overlap=4,
                           annotators=people, lease_seconds=600)
campaign_activate(campaign=campaign)
default_storage.save("exports/kept.csv", ContentFile(b"response,skill,score\\n"))
client = Client()
client.force_login(admin)
print(json.dumps({"campaign": campaign.pk, "session": client.cookies["sessionid"].value,
                  "tokens": [Token.objects.create(user=p).key for p in people]}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _embedded_env(var: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
    }
    env.update(FLASKWEB_VAR_DIR=str(var), DJANGO_DEBUG="true", GUNICORN_ACCESS_LOG="")
    return env


def _gunicorn(var: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "flaskweb.wsgi:application"]
        + ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "8"],
        cwd=REPO,
        env=_embedded_env(var),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.poll() is None, server.communicate()[1][-2000:]
        try:
            return urllib.request.urlopen(f"{base}/login/", timeout=2).status == 200
        except OSError:
            return False

    wait_for(up, timeout=60, interval=0.2)
    return server, base


def _call(base: str, path: str, *, token: str = "", body: dict | None = None, cookie: str = ""):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    if cookie:
        headers["Cookie"] = cookie
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()[:500]


def _annotate(base: str, campaign: int, token: str, stop: threading.Event, log: list) -> None:
    """One annotator over HTTP: claim, then submit with next=true until told to stop; each
    submission is logged as (sent, answered, status)."""
    status, task = _call(
        base, f"/api/v1/annotation/campaigns/{campaign}/next/", token=token, body={}
    )
    while task and not stop.is_set():
        scores = [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]
        sent = time.monotonic()
        status, answer = _call(
            base,
            f"/api/v1/annotation/assignments/{task['assignment_id']}/submit/",
            token=token,
            body={"scores": scores, "next": True},
        )
        log.append((sent, time.monotonic(), status))
        task = answer["next"] if status == 201 else None


@pytest.mark.slow
def test_a_sqlite_backup_taken_while_annotators_submit_restores_into_a_fresh_install(tmp_path):
    # given an embedded install on SQLite with a campaign, served by gunicorn
    var = tmp_path / "var"
    var.mkdir()
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SETUP.replace("{var}", str(var))],
        cwd=REPO,
        env=_embedded_env(var),
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    setup = json.loads(made.stdout.strip().splitlines()[-1])
    server, base = _gunicorn(var)
    stop, log, errors = threading.Event(), [], []
    try:
        writers = [
            threading.Thread(target=_annotate, args=(base, setup["campaign"], token, stop, log))
            for token in setup["tokens"]
        ]
        for writer in writers:
            writer.start()
        wait_for(lambda: len(log) >= 20, timeout=30)

        # when a backup is taken while four annotators keep submitting
        started = time.monotonic()
        acked_before = sum(1 for _, answered, status in log if status == 201)
        result = backup_create(
            database=Database("sqlite", sqlite_path=var / "flaskweb.sqlite3"),
            media_root=var / "media",
            secret_key_path=var / "secret_key",
            output=tmp_path / "backups" / "kept.tar",
        )
        finished = time.monotonic()
        wait_for(lambda: sum(1 for s, _, _ in log if s > finished) >= 5, timeout=30)
        stop.set()
        for writer in writers:
            writer.join(30)
        errors = [entry for entry in log if entry[2] != 201]
    finally:
        stop.set()
        server.terminate()
        server.wait(30)

    # then nobody was refused, submissions were in flight during the backup, and the
    # snapshot holds every acknowledged submission before it and none after the last
    assert not errors, errors[:5]
    assert any(sent < finished and answered > started for sent, answered, _ in log)
    manifest = result.manifest
    human = manifest["scores"]["human_scores"]["rows"]
    sent_before_end = sum(1 for sent, _, _ in log if sent < finished)
    assert 3 * acked_before <= human <= 3 * sent_before_end < 3 * len(log)
    assert manifest["database"]["vendor"] == "sqlite" and manifest["secret_key"] is True
    assert manifest["media"]["files"] == 1  # an export file
    assert (tmp_path / "backups" / "kept.tar").stat().st_mode & 0o777 == 0o600

    # when it is restored into a fresh var directory
    fresh = tmp_path / "fresh"
    restored = backup_restore(
        archive=tmp_path / "backups" / "kept.tar",
        database=Database("sqlite", sqlite_path=fresh / "flaskweb.sqlite3"),
        media_root=fresh / "media",
        secret_key_path=fresh / "secret_key",
    )

    # then it verifies: every table's count and the scores checksum match the manifest
    assert restored.differences == []
    assert restored.summary.scores == manifest["scores"]
    assert restored.pending_migrations == []
    assert (fresh / "secret_key").read_text() == (var / "secret_key").read_text()
    assert (fresh / "media" / "exports" / "kept.csv").read_bytes() == b"response,skill,score\n"
    # and the restored app serves the data to the session signed in before the backup
    server, base = _gunicorn(fresh)
    try:
        status, page = _call(
            base,
            f"/api/v1/annotation/campaigns/{setup['campaign']}/assignments/"
            "?status=submitted&limit=1",
            cookie=f"sessionid={setup['session']}",
        )
    finally:
        server.terminate()
        server.wait(30)
    assert status == 200, page
    assert page["count"] * 3 == human

    # and a SQLite backup is refused by a PostgreSQL install, which is left alone
    with pytest.raises(BackupError, match="holds a SQLite database and this install uses"):
        backup_restore(
            archive=tmp_path / "backups" / "kept.tar",
            database=Database("postgresql", pg={"dbname": "never-touched"}),
            media_root=tmp_path / "never" / "media",
            secret_key_path=None,
        )
    assert not (tmp_path / "never").exists()


# --- PostgreSQL -----------------------------------------------------------------------------------


@pytest.fixture
def scratch_database():
    """An empty PostgreSQL database of its own, dropped after the test."""
    source = Database.from_settings(connection.settings_dict)
    name = f"flaskweb_restore_{uuid.uuid4().hex[:12]}"
    admin = psycopg.connect(make_conninfo(**{**source.pg, "dbname": "postgres"}), autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield Database("postgresql", pg={**source.pg, "dbname": name})
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _submit_until(campaign, person, stop: threading.Event, log: list, errors: list) -> None:
    try:
        while not stop.is_set():
            assignment = assignment_next(campaign=campaign, annotator=person)
            if assignment is None:
                return
            sent = time.monotonic()
            human_score_submit(
                assignment_id=assignment.pk, annotator=person, scores=scores_for(assignment)
            )
            log.append((sent, time.monotonic()))
    except Exception as exc:  # reported by the test
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.slow
@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_postgres_backup_under_concurrent_writes_restores_into_a_fresh_database(
    project, tmp_path, django_user_model, scratch_database
):
    # given a campaign on the test database, and four annotators submitting in threads
    people = [django_user_model.objects.create_user(f"w{i}", password="x") for i in range(4)]
    campaign = make_campaign(project, tmp_path, people, items=60, overlap=4)
    stop, log, errors = threading.Event(), [], []
    writers = [
        threading.Thread(target=_submit_until, args=(campaign, p, stop, log, errors))
        for p in people
    ]
    for writer in writers:
        writer.start()
    try:
        wait_for(lambda: len(log) >= 20, timeout=30)
        # when pg_dump takes the backup while they go on
        started = time.monotonic()
        acked_before = len(log)
        result = backup_create(
            database=Database.from_settings(connection.settings_dict),
            media_root=tmp_path / "media",
            secret_key_path=None,
            output=tmp_path / "pg.tar",
        )
        finished = time.monotonic()
        wait_for(lambda: sum(1 for s, _ in log if s > finished) >= 5, timeout=30)
    finally:
        stop.set()
        for writer in writers:
            writer.join(30)

    # then the writers went on meanwhile, and the snapshot is one moment of their writes:
    # every submission acknowledged before it began, none sent after it ended
    assert not errors, errors
    manifest = result.manifest
    human = manifest["scores"]["human_scores"]["rows"]
    assert any(sent < finished and answered > started for sent, answered in log)
    sent_before_end = sum(1 for sent, _ in log if sent < finished)
    assert 3 * acked_before <= human <= 3 * sent_before_end < HumanScore.objects.count()
    assert manifest["database"]["vendor"] == "postgresql" and manifest["secret_key"] is False
    assert manifest["counts"]["annotation_humanscore"] == human

    # when it is restored into a fresh database
    restored = backup_restore(
        archive=tmp_path / "pg.tar",
        database=scratch_database,
        media_root=tmp_path / "restored-media",
        secret_key_path=None,
    )

    # then the restored database matches the manifest, table by table, score by score
    assert restored.differences == []
    assert database_summary(scratch_database).scores == manifest["scores"]
    assert sorted(p.name for p in (tmp_path / "restored-media").rglob("*") if p.is_file()) == [
        f.name for f in (tmp_path / "media").rglob("*") if f.is_file()
    ]


def _rewritten(archive: Path, out: Path, member: str, change) -> Path:
    """`archive` with `member`'s bytes changed and a manifest that agrees with them: an
    archive that passes every check of its own but holds a broken dump."""
    with tarfile.open(archive) as tar:
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    manifest = json.loads(contents.pop("manifest.json"))
    contents[member] = change(contents[member])
    manifest["members"][member] = {
        "bytes": len(contents[member]),
        "sha256": hashlib.sha256(contents[member]).hexdigest(),
    }
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    contents["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(out, "w") as tar:
        for name, data in contents.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


@pytest.mark.slow
@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_damaged_archives_and_refused_restores_change_nothing(
    project, tmp_path, django_user_model, scratch_database
):
    # given a backup made by the command, restored once into the scratch database
    people = [django_user_model.objects.create_user(f"d{i}", password="x") for i in range(2)]
    campaign = make_campaign(project, tmp_path, people, items=4, overlap=2)
    for person in people:
        assignment = assignment_next(campaign=campaign, annotator=person)
        human_score_submit(
            assignment_id=assignment.pk, annotator=person, scores=scores_for(assignment)
        )
    good = tmp_path / "good.tar"
    out = io.StringIO()
    call_command("backup", "--output", str(good), "--verify", stdout=out)
    assert "with pg_dump" in out.getvalue() and "Checked the archive" in out.getvalue()
    media = tmp_path / "restored-media"
    first = backup_restore(
        archive=good, database=scratch_database, media_root=media, secret_key_path=None
    )
    assert first.differences == []
    manifest = first.manifest

    def unchanged() -> bool:
        return backup.summary_differences(manifest, database_summary(scratch_database)) == []

    # when restores are tried with a truncated archive, a flipped byte, and a dump that
    # breaks half-way (its manifest rewritten to match), each with --force
    data = good.read_bytes()
    (tmp_path / "truncated.tar").write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[2048] ^= 0xFF
    (tmp_path / "flipped.tar").write_bytes(bytes(flipped))
    half_dump = _rewritten(
        good, tmp_path / "half.tar", "database.pgdump", lambda b: b[: len(b) * 3 // 4]
    )
    attempts = {
        "truncated.tar": "truncated or damaged",
        "flipped.tar": "do not match its manifest",
        "half.tar": "pg_restore failed",
    }
    for name, message in attempts.items():
        with pytest.raises(BackupError, match=message) as refused:
            backup_restore(
                archive=tmp_path / name if name != "half.tar" else half_dump,
                database=scratch_database,
                media_root=media,
                secret_key_path=None,
                force=True,
            )
        # then each says why and that nothing changed, and nothing did
        assert "Nothing was changed" in str(refused.value)
        assert unchanged(), name

    # and the command's --check says the same of a damaged archive
    with pytest.raises(Exception, match="truncated or damaged"):
        call_command("restore", "--check", str(tmp_path / "truncated.tar"))

    # when the good archive is restored again without --force
    with pytest.raises(BackupError) as refused:
        backup_restore(
            archive=good, database=scratch_database, media_root=media, secret_key_path=None
        )
    # then it is refused, naming what --force would drop
    assert "is not empty" in str(refused.value)
    assert "annotation_humanscore" in str(refused.value) and "6 human scores" in str(refused.value)
    assert unchanged()
    # and with --force it replaces them and verifies
    forced = backup_restore(
        archive=good, database=scratch_database, media_root=media, secret_key_path=None, force=True
    )
    assert forced.differences == []


def test_a_missing_or_too_old_pg_dump_is_named_with_what_to_install(monkeypatch, tmp_path):
    # given no PostgreSQL client programs anywhere
    monkeypatch.setattr(backup, "PG_BIN_DIRS", str(tmp_path / "none" / "*"))
    monkeypatch.setenv("PATH", str(tmp_path))
    # then
    with pytest.raises(BackupError, match=r"pg_dump is not installed.*apt install"):
        pg_tool("pg_dump")
    # given the machine's own pg_dump, and a server newer than it
    monkeypatch.undo()
    if not shutil.which("pg_dump"):
        pytest.skip("no pg_dump on this machine")
    # then
    with pytest.raises(BackupError, match=r"older than the server \(PostgreSQL 99\)"):
        pg_tool("pg_dump", at_least=99, why="the server")
