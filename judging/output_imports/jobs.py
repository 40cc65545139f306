"""Imports of judge outputs as background jobs (JudgeOutputImportJob): the API stores the
uploads and creates a pending job; judging.tasks.judge_output_import_task runs it from the
stored files on the `imports` queue. The import itself is judging.output_imports.services (the
command calls it in process). Docs: docs/JUDGE_OUTPUT_IMPORTS.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import IO

from django.db import transaction

from annotation.models import Dataset, Project
from flaskweb.jobs import (
    Progress,
    files_store,
    job_execute,
    jobs_fail_stale,
    progress_get,
)
from judging.models import JudgeOutputImportJob
from judging.output_imports.services import JudgeOutputImportRejected, judge_outputs_import
from judging.tasks import judge_output_import_task


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
    transaction.on_commit(lambda: judge_output_import_task.delay(job.pk))
    return job


def judge_output_import_job_run(
    *, job_id: int, claim: datetime | None = None
) -> JudgeOutputImportJob | None:
    """Run job `job_id` to its end state (flaskweb.jobs.job_execute): the outcome, with
    every problem or the error, is on the job row. Returns the JudgeOutputImportJob row, or
    None when it is gone or another worker claimed it."""

    def run(
        job: JudgeOutputImportJob, streams: list[tuple[str, IO[bytes]]], progress: Progress
    ) -> dict:
        result = judge_outputs_import(
            project=job.project,
            dataset=job.dataset,
            files=streams,
            fmt=job.options.get("format", ""),
            judge_name=job.options.get("judge", ""),
            model=job.options.get("model", ""),
            created_by=job.created_by,
            progress=progress,
        )
        return {"result": result.as_dict()}

    return job_execute(
        JudgeOutputImportJob,
        job_id,
        label="judge output import",
        progress_key=progress_key(job_id),
        rejected=JudgeOutputImportRejected,
        run=run,
        claim=claim,
    )


def judge_output_import_jobs_fail_stale(*, older_than_seconds: int) -> int:
    return jobs_fail_stale(JudgeOutputImportJob, older_than_seconds=older_than_seconds)
