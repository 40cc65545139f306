"""Analytics imports as background jobs: long-format scores (ScoreImportJob) and preference
labels (PreferenceImportJob). The page and the API store the uploads and create a pending
job; analytics.tasks.score_import_task / preference_import_task run it from the stored files
on the `imports` queue, through flaskweb.jobs.job_execute (claim, run, record the outcome,
delete the files). The imports themselves are analytics.imports.services and
analytics.imports.preferences (the commands call them in process). Docs:
docs/IMPORT_FORMATS.md, "Long-format scores (analytics)" and "Preference labels"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO, Any

from django.db import transaction

from analytics.imports.preferences import PreferenceImportRejected, preferences_import
from analytics.imports.services import ScoreImportRejected, scores_import
from analytics.models import PreferenceImportJob, ScoreImportJob
from analytics.tasks import preference_import_task, score_import_task
from annotation.models import Project
from flaskweb.jobs import (
    ImportJob,
    Progress,
    files_store,
    job_execute,
    jobs_fail_stale,
    progress_get,
)

#: The kind of each job model: its progress key's prefix and its folder of stored uploads.
KINDS: dict[type[ImportJob], str] = {ScoreImportJob: "score", PreferenceImportJob: "preference"}


#: How far a preference import is when it enters each phase (its progress bar).
_PHASE_SHARE = {"reading": 0.0, "checking": 0.5, "writing": 0.9}


def progress_key(job_id: int, kind: str) -> str:
    return f"{kind}-import-progress:{job_id}"


def import_job_progress(job: ImportJob) -> dict:
    """{"phase", "done", "total"} of a job of either kind (empty phase before a worker
    reports)."""
    return {
        "phase": "",
        "done": 0,
        "total": 1,
        **progress_get(progress_key(job.pk, KINDS[type(job)])),
    }


def _import_job_create(
    model: type[ImportJob],
    *,
    files: Sequence,
    options: dict[str, Any],
    enqueue: Callable[[int], Any],
    **fields: Any,
) -> Any:
    """Store the uploaded files and create the pending job of `model`; `enqueue(job id)`
    runs on commit. Nothing is read from the files here."""
    stored = files_store(files, folder=f"{KINDS[model]}-imports")
    job = model._default_manager.create(
        options=options, files=stored, bytes_total=sum(f["bytes"] for f in stored), **fields
    )
    transaction.on_commit(lambda: enqueue(job.pk))
    return job


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
    return _import_job_create(
        ScoreImportJob,
        files=files,
        options={
            "project": project_slug,
            "dataset": dataset_name,
            "scales": list(scales),
            "judge_scale": "raw" if judge_scale_raw else "skill",
            "create_project": create_project,
        },
        enqueue=score_import_task.delay,
        project=project,
        created_by=created_by,
    )


@transaction.atomic
def preference_import_job_create(
    *, project: Project, file, dataset_name: str = "", fmt: str = "", created_by=None
) -> PreferenceImportJob:
    """Store the uploaded file of preference labels and create the pending job; the import
    is enqueued on commit. Nothing is read from the file here."""
    return _import_job_create(
        PreferenceImportJob,
        files=[file],
        options={"project": project.slug, "dataset": dataset_name, "format": fmt},
        enqueue=preference_import_task.delay,
        project=project,
        created_by=created_by,
    )


def score_import_job_run(*, job_id: int, claim: datetime | None = None) -> ScoreImportJob | None:
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
        progress_key=progress_key(job_id, KINDS[ScoreImportJob]),
        rejected=ScoreImportRejected,
        run=run,
        claim=claim,
    )


def preference_import_job_run(
    *, job_id: int, claim: datetime | None = None
) -> PreferenceImportJob | None:
    """Run preference import job `job_id` to its end state (flaskweb.jobs.job_execute):
    succeeded with its PreferenceImport (`result.already_imported` when these bytes were
    imported into the project before), rejected with every problem (nothing written) or
    failed with the error. None when it is gone or another worker claimed it."""

    def run(
        job: PreferenceImportJob, streams: list[tuple[str, IO[bytes]]], progress: Progress
    ) -> dict:
        (name, stream), *_ = streams
        options = job.options

        def say(phase: str) -> None:
            # the file is read at once, then checked and written: a share per phase
            progress.done = int(progress.total * _PHASE_SHARE.get(phase, 0.0))
            progress.set(phase, force=True)

        result = preferences_import(
            project=job.project,
            data=stream,
            name=name,
            fmt=options.get("format", ""),
            dataset=options.get("dataset", ""),
            created_by=job.created_by,
            progress=say,
        )
        return {
            "batch": result.batch,
            "result": {"already_imported": result.already_imported, **result.summary},
        }

    return job_execute(
        PreferenceImportJob,
        job_id,
        label="preference import job",
        progress_key=progress_key(job_id, KINDS[PreferenceImportJob]),
        rejected=PreferenceImportRejected,
        run=run,
        claim=claim,
    )


def import_jobs_fail_stale(*, older_than_seconds: int) -> int:
    """Fail score and preference import jobs stuck in running (their worker died). Returns
    how many."""
    return sum(jobs_fail_stale(model, older_than_seconds=older_than_seconds) for model in KINDS)
