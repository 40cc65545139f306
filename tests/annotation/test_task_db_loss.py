"""Background tasks that lose their database connection retry and finish (flaskweb/infra.py).

The connection is really lost: a statement trigger makes the backend that runs the first
matching statement terminate itself (`pg_terminate_backend(pg_backend_pid())`, what a
PostgreSQL restart or an administrator does to every session: FATAL 57P01), once. The task
is called the way a worker calls it, in this process, on committed data."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import DatabaseError, IntegrityError, OperationalError, connection
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from annotation import tasks
from annotation.datasets.services import FileSpec, dataset_upload_create
from annotation.models import DatasetUpload, Item, Response, UploadSource, UploadStatus
from flaskweb.infra import Unavailable, is_infra_error, reconnecting
from flaskweb.jobs import JobStatus, claim_token, job_claim
from tests.annotation.test_assignments import SKILLS

# --- the rule -------------------------------------------------------------------------------


def _wrapped(driver_error: BaseException) -> OperationalError:
    """A driver error as Django raises it: its own class, `from` the driver's."""
    try:
        try:
            raise driver_error
        except Exception as exc:
            raise OperationalError(str(exc)) from exc
    except OperationalError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(
            psycopg.errors.AdminShutdown("terminating connection due to administrator command")
        ),
        _wrapped(psycopg.OperationalError("the connection is closed")),
        _wrapped(psycopg.OperationalError("connection failed: Connection refused")),
        _wrapped(psycopg.errors.CannotConnectNow("the database system is starting up")),
        _wrapped(psycopg.errors.SerializationFailure("could not serialize access")),
        _wrapped(psycopg.errors.DeadlockDetected("deadlock detected")),
        _wrapped(sqlite3.OperationalError("database is locked")),
        psycopg.OperationalError("consuming input failed: server closed the connection"),
        RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
        KombuOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
    ],
    ids=lambda e: type(e.__cause__ or e).__name__,
)
def test_a_lost_database_or_broker_is_an_infrastructure_error(error):
    assert is_infra_error(error)


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(psycopg.errors.QueryCanceled("canceling statement due to statement timeout")),
        _wrapped(psycopg.errors.DiskFull("could not extend file")),
        _wrapped(sqlite3.OperationalError("no such table: annotation_item")),
        IntegrityError("duplicate key value violates unique constraint"),
        DatabaseError("value too long for type character varying(10)"),
        ValueError("a bug"),
        Unavailable("away for more than 300 s"),
    ],
    ids=lambda e: type(e.__cause__ or e).__name__,
)
def test_an_error_of_the_work_itself_is_not(error):
    assert not is_infra_error(error)


def test_reconnecting_runs_again_after_infrastructure_errors_only(settings):
    settings.FLASKWEB_INFRA_BACKOFF_CAP_SECONDS = 0.01
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RedisConnectionError("Connection refused")
        return "done"

    assert reconnecting(flaky, what="test") == "done" and len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        reconnecting(broken, what="test")
    assert len(calls) == 4  # not run again


def test_reconnecting_gives_up_after_its_window(settings):
    settings.FLASKWEB_INFRA_BACKOFF_CAP_SECONDS = 0.01

    def away() -> None:
        raise RedisConnectionError("Connection refused")

    with pytest.raises(Unavailable) as raised:
        reconnecting(away, what="test", seconds=0.05)
    assert isinstance(raised.value.__cause__, RedisConnectionError)
    assert not is_infra_error(raised.value)  # an outer loop does not wait all over again


# --- a real lost connection ---------------------------------------------------------------------


@contextlib.contextmanager
def connection_lost_once(table: str, event: str = "INSERT", *, when: str = "") -> Iterator[str]:
    """The first `event` statement on `table` from now on (with `when`: the first row it
    changes for which `when` holds) terminates the backend that runs it, once (a sequence
    counts across the rolled-back transactions); later ones go through. Yields the
    sequence's name (statements_seen)."""
    name = f"lost_once_{uuid.uuid4().hex[:8]}"
    each = f"FOR EACH ROW WHEN ({when})" if when else "FOR EACH STATEMENT"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SEQUENCE {name}")
        cursor.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF nextval('{name}') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); "
            "END IF; RETURN NEW; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER {name} BEFORE {event} ON {table} {each} EXECUTE FUNCTION {name}()"
        )
    try:
        yield name
    finally:
        connection.close()  # the test's connection may be the one that was lost
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")
            cursor.execute(f"DROP SEQUENCE IF EXISTS {name}")


def statements_seen(sequence: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {sequence}")
        return cursor.fetchone()[0]


def _upload(project, tmp_path, items: int = 3) -> DatasetUpload:
    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"i{i}",
                    "instruction": f"Question {i}",
                    "skills": SKILLS,
                    "domains": ["History"],
                    "difficulty": 2,
                    "responses": [{"model": m, "text": f"{m} says {i}"} for m in ("m1", "m2")],
                }
            )
            + "\n"
            for i in range(items)
        )
    )
    return dataset_upload_create(
        project=project,
        dataset_name="D",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )


@pytest.mark.slow  # a transactional test: its teardown empties every table
@pytest.mark.postgres_only
def test_an_import_that_loses_its_connection_twice_starts_over_and_succeeds_once(
    transactional_db, project, tmp_path
):
    # given a pending upload, and the database connection lost twice: by the claim's own
    # UPDATE (pending -> running: was it committed?), then, on the next attempt, at the
    # import's first insert of items (inside its transaction, the upload claimed)
    upload = _upload(project, tmp_path)
    with (
        connection_lost_once("annotation_datasetupload", event="UPDATE") as claim_lost,
        connection_lost_once("annotation_item") as insert_lost,
    ):
        # when the worker runs the task
        tasks.dataset_import_task(upload.pk)
        # then both were met, and the third attempt went through
        assert statements_seen(claim_lost) >= 2
        assert statements_seen(insert_lost) == 2
    # with the import made once, as if nothing had happened
    upload = DatasetUpload.objects.get(pk=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, (upload.status, upload.error)
    assert upload.error == "" and upload.finished_at is not None
    assert (upload.items_created, upload.responses_created) == (3, 6)
    assert Item.objects.filter(dataset__project=project).count() == 3
    assert Response.objects.filter(item__dataset__project=project).count() == 6


def test_a_job_running_under_a_claim_is_claimed_again_by_that_claim_only(project, tmp_path):
    upload = _upload(project, tmp_path, items=1)
    mine = claim_token()
    assert job_claim(DatasetUpload, upload.pk, claim=mine) is not None
    # another worker (a redelivered message: its own claim, or none) does not get it
    assert job_claim(DatasetUpload, upload.pk) is None
    assert job_claim(DatasetUpload, upload.pk, claim=claim_token()) is None
    # the task that claimed it, retrying after a lost connection, does
    again = job_claim(DatasetUpload, upload.pk, claim=mine)
    assert again is not None and again.status == JobStatus.RUNNING and again.started_at == mine
    # and never once it is finished
    DatasetUpload.objects.filter(pk=upload.pk).update(
        status=JobStatus.FAILED, finished_at=timezone.now()
    )
    assert job_claim(DatasetUpload, upload.pk, claim=mine) is None
