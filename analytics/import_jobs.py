"""Score imports as background jobs (ScoreImportJob): the page and the API store the
uploads and create a pending job; analytics.tasks.score_import_task runs it from the stored
files on the `imports` queue. The import itself is analytics.imports (the command calls it
in process). Docs: docs/IMPORT_FORMATS.md, "Long-format scores (analytics)"."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction

from analytics.imports import ScoreImportRejected, scores_import
from analytics.models import ScoreImportJob
from annotation.models import Project
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

logger = logging.getLogger(__name__)


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
    from analytics.tasks import score_import_task

    transaction.on_commit(lambda: score_import_task.delay(job.pk))
    return job


def score_import_job_run(*, job_id: int) -> ScoreImportJob | None:
    """Claim job `job_id` (pending -> running) and run it to its end state. None when it is
    gone or another worker claimed it. Never raises for bad input: the outcome, with every
    problem or the error, is on the job row. The stored files are deleted when it ends."""
    job = job_claim(ScoreImportJob, job_id)
    if job is None:
        return None
    options = job.options
    streams = []
    fields: dict = {}
    status = JobStatus.FAILED
    try:
        streams = [(f["name"], file_open(f)) for f in job.files]
        result = scores_import(
            project_slug=options["project"],
            files=streams,
            dataset_name=options.get("dataset"),
            scales=options.get("scales", []),
            judge_scale_raw=options.get("judge_scale") == "raw",
            create_project=options.get("create_project", False),
            created_by=job.created_by,
            progress=Progress(progress_key(job.pk), job.bytes_total),
        )
    except ScoreImportRejected as exc:
        status = JobStatus.REJECTED
        fields = {"problems": problems_as_dicts(exc.problems), "problem_count": exc.count}
    except Exception as exc:  # a crash: the import's transaction rolled back; record why
        logger.exception("score import job %s failed", job.pk)
        fields = {"error": f"{type(exc).__name__}: {exc}"[:5000]}
    else:
        status = JobStatus.SUCCEEDED
        fields = {
            "batch": result.batch,
            "project": result.batch.project,
            "result": {
                "already_imported": result.already_imported,
                "project_created": result.project_created,
                "dataset_created": result.dataset_created,
                "skills_created": result.skills_created,
            },
        }
    finally:
        for _, stream in streams:
            stream.close()
    if not job_finish(ScoreImportJob, job.pk, status, **fields):
        logger.warning("score import job %s was finished elsewhere", job.pk)
    files_delete(job.files)
    Progress(progress_key(job.pk), 1).set("done", force=True)
    job.refresh_from_db()
    return job


def score_import_jobs_fail_stale(*, older_than_seconds: int) -> int:
    return jobs_fail_stale(ScoreImportJob, older_than_seconds=older_than_seconds)
