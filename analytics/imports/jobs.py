"""Score imports as background jobs (ScoreImportJob): the page and the API store the
uploads and create a pending job; analytics.tasks.score_import_task runs it from the stored
files on the `imports` queue. The import itself is analytics.imports.services (the command
calls it in process). Docs: docs/IMPORT_FORMATS.md, "Long-format scores (analytics)"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from django.db import transaction

from analytics.imports.services import ScoreImportRejected, scores_import
from analytics.models import ScoreImportJob
from analytics.tasks import score_import_task
from annotation.models import Project
from flaskweb.jobs import (
    Progress,
    files_store,
    job_execute,
    jobs_fail_stale,
    progress_get,
)


def progress_key(job_id: int) -> str:
    return f"score-import-progress:{job_id}"


def score_import_progress_get(job_id: int) -> dict:
    return progress_get(progress_key(job_id))


@transaction.atomic
def score_import_job_create(
    *,
    project: Project | None,
    project_slug: str,
    files: Sequence,
    dataset_name: str,
    scales: Sequence[str] = (),
    judge_scale_raw: bool = False,
    create_project: bool = False,
    created_by=None,
) -> ScoreImportJob:
    """Store the uploaded files and create the pending job; the import is enqueued on
    commit. Nothing is read from the files here. `project` is None when a site admin asks
    for the project to be created (`create_project`): the job then makes it, and the job
    row is attached to it when it succeeds."""
    stored = files_store(files, folder="score-imports")
    job = ScoreImportJob.objects.create(
        project=project,
        options={
            "project": project_slug,
            "dataset": dataset_name,
            "scales": list(scales),
            "judge_scale": "raw" if judge_scale_raw else "skill",
            "create_project": create_project,
        },
        files=stored,
        bytes_total=sum(f["bytes"] for f in stored),
        created_by=created_by,
    )
    transaction.on_commit(lambda: score_import_task.delay(job.pk))
    return job


def score_import_job_run(*, job_id: int) -> ScoreImportJob | None:
    """Run job `job_id` to its end state (flaskweb.jobs.job_execute): the outcome, with
    every problem or the error, is on the job row. Returns the ScoreImportJob row, or None when
    it is gone or another worker claimed it."""

    def run(job: ScoreImportJob, streams: list[tuple[str, IO[bytes]]], progress: Progress) -> dict:
        options = job.options
        result = scores_import(
            project_slug=options["project"],
            files=streams,
            dataset_name=options.get("dataset"),
            scales=options.get("scales", []),
            judge_scale_raw=options.get("judge_scale") == "raw",
            create_project=options.get("create_project", False),
            created_by=job.created_by,
            progress=progress,
        )
        return {
            "batch": result.batch,
            "project": result.batch.project,
            "result": {
                "already_imported": result.already_imported,
                "project_created": result.project_created,
                "dataset_created": result.dataset_created,
                "skills_created": result.skills_created,
            },
        }

    return job_execute(
        ScoreImportJob,
        job_id,
        label="score import job",
        progress_key=progress_key(job_id),
        rejected=ScoreImportRejected,
        run=run,
    )


def score_import_jobs_fail_stale(*, older_than_seconds: int) -> int:
    return jobs_fail_stale(ScoreImportJob, older_than_seconds=older_than_seconds)
