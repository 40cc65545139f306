"""Celery tasks of the analytics app: thin adapters that call one service.

Each task imports its service inside its body: the services import this module at the top
to enqueue their task on commit, so a top-level import here would be a cycle (STYLE.md,
point 8).

Every task retries infrastructure errors (the database or the broker lost) the one way of
flaskweb.infra: in the task, connections closed, jittered backoff, from what is written; a
job it claimed stays claimed by it in between (flaskweb.jobs.claim_token)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from flaskweb.infra import BEAT_RETRY_SECONDS, reconnecting
from flaskweb.jobs import claim_token

logger = logging.getLogger(__name__)

#: A running export older than this lost its worker (the hard time limit is 3,500 s).
EXPORT_STALE_SECONDS = 2 * 3600


@shared_task(soft_time_limit=3300, time_limit=3500)
def export_run_task(job_id: int) -> None:
    """Write export `job_id` to its file. Idempotent: the job is claimed pending -> running
    by a conditional update, so a redelivered message finds it claimed and returns. Enqueues
    nothing. Retries infrastructure errors (flaskweb.infra) for up to
    FLASKWEB_INFRA_RETRY_SECONDS, writing the file again under this task's claim; any other
    failure is recorded on the job row (with the error) and asked for again by a new job.
    Routed to the `imports` queue, off the default queue where the per-minute lease expiry
    runs."""
    from analytics.exports.services import export_job_run

    claim = claim_token()
    if (
        reconnecting(lambda: export_job_run(job_id=job_id, claim=claim), what=f"export {job_id}")
        is None
    ):
        logger.info("export %s is missing or already claimed; nothing to do", job_id)


@shared_task
def export_jobs_health_check_task() -> int:
    """Fail exports stuck in `running` for longer than EXPORT_STALE_SECONDS (their worker
    died) and delete the files of exports older than FLASKWEB_EXPORT_RETENTION_DAYS.
    Idempotent (conditional updates); run by beat every 10 minutes; retries infrastructure
    errors for BEAT_RETRY_SECONDS (flaskweb.infra)."""
    from analytics.exports.services import export_files_expire, export_jobs_fail_stale

    def sweep() -> int:
        failed = export_jobs_fail_stale(older_than_seconds=EXPORT_STALE_SECONDS)
        days = settings.FLASKWEB_EXPORT_RETENTION_DAYS
        return failed + export_files_expire(older_than_days=days)

    return reconnecting(sweep, what="exports health check", seconds=BEAT_RETRY_SECONDS)


@shared_task(soft_time_limit=3300, time_limit=3500)
def score_import_task(job_id: int) -> None:
    """Run score import job `job_id` from its stored files. Idempotent: the job is claimed
    pending -> running by a conditional update, so a redelivered message finds it claimed
    and returns. Enqueues nothing. Retries infrastructure errors (flaskweb.infra) for up to
    FLASKWEB_INFRA_RETRY_SECONDS: the import is one transaction, so each attempt starts it
    over under this task's claim. Any other failure is recorded on the job row (with the
    error; nothing written) and asked for again by a new upload. Routed to the `imports`
    queue."""
    from analytics.imports.jobs import score_import_job_run

    claim = claim_token()
    job = reconnecting(
        lambda: score_import_job_run(job_id=job_id, claim=claim), what=f"score import {job_id}"
    )
    if job is None:
        logger.info("score import job %s is missing or already claimed; nothing to do", job_id)


@shared_task(soft_time_limit=3300, time_limit=3500)
def preference_import_task(job_id: int) -> None:
    """Run preference import job `job_id` from its stored file. Idempotent: the job is
    claimed pending -> running by a conditional update, so a redelivered message finds it
    claimed and returns (and the same bytes imported again write nothing). Enqueues
    nothing. Retries infrastructure errors (flaskweb.infra) for up to
    FLASKWEB_INFRA_RETRY_SECONDS: the import is one transaction, so each attempt starts it
    over under this task's claim. Any other failure is recorded on the job row (with the
    error; nothing written) and asked for again by a new upload. Routed to the `imports`
    queue."""
    from analytics.imports.jobs import preference_import_job_run

    claim = claim_token()
    job = reconnecting(
        lambda: preference_import_job_run(job_id=job_id, claim=claim),
        what=f"preference import {job_id}",
    )
    if job is None:
        logger.info("preference import job %s is missing or already claimed", job_id)


@shared_task
def import_jobs_health_check_task() -> int:
    """Fail score and preference import jobs stuck in `running` longer than
    FLASKWEB_IMPORT_STALE_SECONDS (their worker died). Idempotent (conditional updates); run
    by beat every 5 minutes; retries infrastructure errors for BEAT_RETRY_SECONDS
    (flaskweb.infra)."""
    from analytics.imports.jobs import import_jobs_fail_stale

    return reconnecting(
        lambda: import_jobs_fail_stale(older_than_seconds=settings.FLASKWEB_IMPORT_STALE_SECONDS),
        what="imports health check",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task(soft_time_limit=1700, time_limit=1800)
def report_snapshot_compute_task(snapshot_id: int) -> None:
    """Compute report snapshot `snapshot_id` (analytics/report/snapshots.py). Idempotent: the
    snapshot is claimed pending -> running by a conditional update, so a redelivered message
    finds it claimed and returns. Enqueues nothing. Retries infrastructure errors
    (flaskweb.infra) for up to FLASKWEB_INFRA_RETRY_SECONDS, computing it again from the
    start under this task's claim; any other failure is recorded on the row and a refresh
    asks again. Routed to the `analytics` queue: a long report never waits behind imports,
    nor they behind it."""
    from analytics.report.snapshots import report_snapshot_compute

    claim = claim_token()
    snapshot = reconnecting(
        lambda: report_snapshot_compute(snapshot_id=snapshot_id, claim=claim),
        what=f"report snapshot {snapshot_id}",
    )
    if snapshot is None:
        logger.info("report snapshot %s is missing or already claimed", snapshot_id)


@shared_task
def report_snapshots_refresh_task() -> int:
    """Fail snapshots whose worker died, delete filtered ones older than
    FLASKWEB_REPORT_KEEP_DAYS, enqueue the first default snapshot of each project whose
    data has arrived and has none, mark snapshots stale whose scores changed, and enqueue a
    refresh of stale default snapshots (rate limited per project and tick). Idempotent
    (conditional updates; one snapshot in flight per key: a second enqueue finds the
    pending one); run by beat every minute; retries infrastructure errors for
    BEAT_RETRY_SECONDS (flaskweb.infra)."""
    from analytics.report.snapshots import (
        report_snapshots_expire,
        report_snapshots_fail_stale,
        report_snapshots_refresh_stale,
        report_snapshots_request_first,
    )

    def refresh() -> int:
        report_snapshots_fail_stale(older_than_seconds=settings.FLASKWEB_REPORT_STALE_SECONDS)
        report_snapshots_expire(older_than_days=settings.FLASKWEB_REPORT_KEEP_DAYS)
        first = report_snapshots_request_first()
        return len(first) + len(report_snapshots_refresh_stale())

    return reconnecting(refresh, what="report snapshots refresh", seconds=BEAT_RETRY_SECONDS)


@shared_task(soft_time_limit=600, time_limit=660)
def trust_calibrated_copy_task(snapshot_id: int, judge: str, run_id: int, user_id: int) -> None:
    """Make the calibrated copy of judge run `run_id` under the isotonic maps of `judge` in
    report snapshot `snapshot_id` (docs/JUDGE_TRUST.md "Calibration"). Idempotent: the same
    maps find the copy made before and write nothing; other maps replace its scores (one
    copy per source run, serialized on the calibrated judge's row). Enqueues nothing.
    Retries infrastructure errors (flaskweb.infra) for up to FLASKWEB_INFRA_RETRY_SECONDS
    (the copy is idempotent); a refusal (no maps, a run that cannot be calibrated) is
    logged, not retried."""
    from analytics.report.trust import calibrated_copy_make
    from judging.services.calibrated import CalibrationRefused

    try:
        copy = reconnecting(
            lambda: calibrated_copy_make(
                snapshot_id=snapshot_id, judge=judge, run_id=run_id, user_id=user_id
            ),
            what=f"calibrated copy of run {run_id}",
        )
        if copy is None:
            logger.info("calibrated copy of run %s: snapshot or run gone", run_id)
    except CalibrationRefused as exc:
        logger.warning("calibrated copy of run %s refused: %s", run_id, exc)
