"""End to end on the production path: web upload -> Redis broker -> a separate Celery worker
process -> PostgreSQL, with progress read back through the Redis cache."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.datasets.services import upload_progress_get
from annotation.models import DatasetUpload, Item, Response, UploadStatus
from tests.conftest import wait_for

pytestmark = pytest.mark.slow


def _rows(n: int) -> bytes:
    lines = []
    for i in range(n):
        lines.append(
            f'{{"id": "e{i}", "instruction": "Question {i}?", "reference": "Answer {i}", '
            f'"skills": ["Factuality", "Comprehension", "Readability"], "domains": ["History"], '
            f'"difficulty": {i % 5 + 1}, "responses": [{{"model": "m1", "text": "r{i}"}}, '
            f'{{"model": "m2", "text": "s{i}"}}]}}'
        )
    return ("\n".join(lines) + "\n").encode()


def test_a_web_upload_is_imported_by_a_separate_worker(
    celery_worker_process, admin_client, project
):
    # when
    response = admin_client.post(
        reverse("annotation:upload-create", args=[project.slug]),
        {"dataset": "Worker set", "files": [SimpleUploadedFile("rows.jsonl", _rows(500))]},
    )
    assert response.status_code == 302
    upload = DatasetUpload.objects.get()
    # then
    finished = wait_for(
        lambda: (
            DatasetUpload.objects.filter(pk=upload.pk)
            .exclude(status__in=[UploadStatus.PENDING, UploadStatus.RUNNING])
            .first()
        )
    )
    assert finished.status == UploadStatus.SUCCEEDED, finished.error
    assert (finished.items_created, finished.responses_created) == (500, 1000)
    assert Item.objects.filter(dataset__name="Worker set").count() == 500
    assert Response.objects.filter(item__dataset__name="Worker set").count() == 1000
    # (the worker writes the progress's last phase just after the upload's row commits)
    assert wait_for(lambda: upload_progress_get(upload.pk)["phase"] == "done", timeout=10)
    page = admin_client.get(
        reverse("annotation:upload-detail", args=[upload.pk]), headers={"HX-Request": "true"}
    )
    assert page.status_code == 286


def test_a_redelivered_import_message_is_a_no_op(celery_worker_process, admin_client, project):
    from annotation.tasks import dataset_import_task

    admin_client.post(
        reverse("annotation:upload-create", args=[project.slug]),
        {"dataset": "Twice", "files": [SimpleUploadedFile("rows.jsonl", _rows(20))]},
    )
    upload = DatasetUpload.objects.get()
    wait_for(lambda: DatasetUpload.objects.get(pk=upload.pk).is_finished)
    assert DatasetUpload.objects.get(pk=upload.pk).status == UploadStatus.SUCCEEDED, (
        DatasetUpload.objects.get(pk=upload.pk).error
    )
    finished_at = DatasetUpload.objects.get(pk=upload.pk).finished_at
    # when the same message arrives again
    dataset_import_task.delay(upload.pk)
    dataset_import_task(upload.pk)  # and once more in-process
    # then nothing changes
    again = DatasetUpload.objects.get(pk=upload.pk)
    assert again.finished_at == finished_at and again.items_created == 20
    assert Item.objects.count() == 20
