"""Imports of judge outputs as background jobs (JudgeOutputImportJob): the API stores the
uploads and creates a pending job; judging.tasks.judge_output_import_task runs it from the
stored files on the `imports` queue. The import itself is judging.output_imports (the
command calls it in process). Docs: docs/JUDGE_OUTPUT_IMPORTS.md."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction

from annotation.models import Dataset, Project
from flaskweb.jobs import (
    JobStatus,
    Progress,
    file_open,
    files_delete,
    files_store,
    job_claim,
    job_finish,
    jobs_fail_stale,
    problems_as_dicts,
    progress_get,
)
from judging.models import JudgeOutputImportJob
from judging.output_imports import JudgeOutputImportRejected, judge_outputs_import

logger = logging.getLogger(__name__)


def progress_key(job_id: int) -> str:
    return f"judge-output-import-progress:{job_id}"


def output_import_progress_get(job_id: int) -> dict:
    return progress_get(progress_key(job_id))


@transaction.atomic
def judge_output_import_job_create(
    *,
    project: Project,
    dataset: Dataset,
    files: Sequence,
    fmt: str = "",
    judge_name: str = "",
    model: str = "",
    created_by=None,
) -> JudgeOutputImportJob:
    """Store the uploaded files and create the pending job; the import is enqueued on
    commit. Nothing is read from the files here."""
    if dataset.project_id != project.pk:
        raise ValueError("the dataset belongs to another project")
    stored = files_store(files, folder="judge-output-imports")
    job = JudgeOutputImportJob.objects.create(
        project=project,
        dataset=dataset,
        options={"format": fmt, "judge": judge_name, "model": model},
        files=stored,
        bytes_total=sum(f["bytes"] for f in stored),
        created_by=created_by,
    )
    from judging.tasks import judge_output_import_task

    transaction.on_commit(lambda: judge_output_import_task.delay(job.pk))
    return job


def judge_output_import_job_run(*, job_id: int) -> JudgeOutputImportJob | None:
    """Claim job `job_id` (pending -> running) and run it to its end state. None when it is
    gone or another worker claimed it. Never raises for bad input: the outcome, with every
    problem or the error, is on the job row. The stored files are deleted when it ends."""
    job = job_claim(JudgeOutputImportJob, job_id)
    if job is None:
        return None
    streams = []
    fields: dict = {}
    status = JobStatus.FAILED
    try:
        streams = [(f["name"], file_open(f)) for f in job.files]
        result = judge_outputs_import(
            project=job.project,
            dataset=job.dataset,
            files=streams,
            fmt=job.options.get("format", ""),
            judge_name=job.options.get("judge", ""),
            model=job.options.get("model", ""),
            created_by=job.created_by,
            progress=Progress(progress_key(job.pk), job.bytes_total),
        )
    except JudgeOutputImportRejected as exc:
        status = JobStatus.REJECTED
        fields = {"problems": problems_as_dicts(exc.problems), "problem_count": exc.count}
    except Exception as exc:  # a crash: the import's transaction rolled back; record why
        logger.exception("judge output import %s failed", job.pk)
        fields = {"error": f"{type(exc).__name__}: {exc}"[:5000]}
    else:
        status = JobStatus.SUCCEEDED
        fields = {"result": result.as_dict()}
    finally:
        for _, stream in streams:
            stream.close()
    if not job_finish(JudgeOutputImportJob, job.pk, status, **fields):
        logger.warning("judge output import %s was finished elsewhere", job.pk)
    files_delete(job.files)
    Progress(progress_key(job.pk), 1).set("done", force=True)
    job.refresh_from_db()
    return job


def judge_output_import_jobs_fail_stale(*, older_than_seconds: int) -> int:
    return jobs_fail_stale(JudgeOutputImportJob, older_than_seconds=older_than_seconds)
