"""Report snapshots, score imports and exports survive a lost database connection: the task
retries (flaskweb/infra.py), re-claims its own job and finishes it once. The connection is
really lost (tests/annotation/test_task_db_loss.py, `connection_lost_once`: the backend that
runs the first matching statement terminates itself, as a PostgreSQL restart terminates
every session)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from analytics import tasks
from analytics.exports.services import export_job_create
from analytics.imports.jobs import score_import_job_create
from analytics.models import (
    ExportJob,
    ExportStatus,
    ImportedScore,
    ReportSnapshot,
    ScoreImportJob,
    SnapshotPart,
    SnapshotStatus,
)
from analytics.report.snapshots import snapshot_params, snapshot_request
from flaskweb.jobs import JobStatus
from tests.annotation.test_task_db_loss import connection_lost_once, statements_seen

# a transactional test (the lost connection is this process's own): its teardown empties
# every table, which takes seconds
pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

SCORES = b"item,system,rater,rater_kind,skill,score\n" + b"".join(
    f"q{i},model-{m},ann-{r},human,Factuality,{1 + (i + r) % 5}\n".encode()
    for i in range(4)
    for m in "ab"
    for r in range(3)
)


def test_an_import_a_snapshot_and_an_export_that_lose_their_connection_finish_once(
    transactional_db, project, monkeypatch
):
    monkeypatch.setattr(tasks.score_import_task, "delay", lambda pk: None)
    monkeypatch.setattr(tasks.report_snapshot_compute_task, "delay", lambda pk: None)
    rows = len(SCORES.splitlines()) - 1
    # given a pending score import, and the connection lost by its insert of the scores
    # (inside the import's one transaction, the job claimed)
    job = score_import_job_create(
        project=project,
        project_slug=project.slug,
        files=[SimpleUploadedFile("scores.csv", SCORES)],
        dataset_name="D",
    )
    with connection_lost_once("analytics_importedscore") as lost:
        # when the worker runs it
        tasks.score_import_task(job.pk)
        assert statements_seen(lost) == 2  # lost once, then written
    # then it started over and succeeded, its scores written once, its files deleted
    job = ScoreImportJob.objects.get(pk=job.pk)
    assert job.status == JobStatus.SUCCEEDED, (job.status, job.error)
    assert job.result["already_imported"] is False
    assert ImportedScore.objects.count() == rows
    assert not any(job.files[0]["stored"] in str(p) for p in _media_files())

    # given a pending snapshot, and the connection lost when its parts are written (the
    # snapshot claimed and computed; done in the same transaction)
    snapshot, created = snapshot_request(project=project, params=snapshot_params(resamples=0))
    assert created
    with connection_lost_once("analytics_snapshotpart") as lost:
        tasks.report_snapshot_compute_task(snapshot.pk)
        assert statements_seen(lost) == 2
    # then it is done, once: claimed again by its own task, not failed nor left running
    snapshot = ReportSnapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.DONE, (snapshot.status, snapshot.error)
    assert snapshot.error == "" and snapshot.watermark["human"] == rows
    assert SnapshotPart.objects.filter(snapshot=snapshot, name="report").count() == 1

    # given an export whose connection is lost when it records its file (the file written)
    export = export_job_create(project=project, kind="long", enqueue=False)
    with connection_lost_once("analytics_exportjob", "UPDATE", when="NEW.status = 'done'") as lost:
        tasks.export_run_task(export.pk)
        assert statements_seen(lost) == 2
    # then the outcome is recorded by its retry, with the one file
    export = ExportJob.objects.get(pk=export.pk)
    assert export.status == ExportStatus.DONE, (export.status, export.error)
    assert export.rows == rows
    with export.file.open("rb") as f:
        assert f.read().count(b"\n") == rows + 1
    assert [p.name for p in _media_files() if "exports" in str(p)] == [
        export.file.name.rsplit("/", 1)[-1]
    ]


def _media_files():
    from django.conf import settings

    return [p for p in settings.MEDIA_ROOT.rglob("*") if p.is_file()]
