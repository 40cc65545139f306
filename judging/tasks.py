"""Celery tasks of the judging app (queue `judging`): thin adapters over judging.services.

Each task imports its service inside its body: the services import this module at their top
(to enqueue after commit), so importing them here at module level would be a cycle.

Every task retries infrastructure errors (the database or the broker lost) the one way of
flaskweb.infra: in the task, connections closed, jittered backoff capped at a few seconds,
for up to FLASKWEB_INFRA_RETRY_SECONDS, from what is written. The batches also keep the
answers they have paid for while the database is away and write them when it is back
(judging/services/batches.py), and hand the rest of their range to the next worker in a
warm shutdown."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from flaskweb.infra import BEAT_RETRY_SECONDS, reconnecting
from flaskweb.jobs import claim_token
from judging.models import JudgeRun, MetadataRun

logger = logging.getLogger(__name__)


#: Soft and hard time limits of a dispatch task: a page is enqueued in well under a second,
#: the rest is waiting for a lost database or broker (flaskweb.infra).
DISPATCH_LIMITS = {
    "soft_time_limit": settings.FLASKWEB_INFRA_RETRY_SECONDS + 120,
    "time_limit": settings.FLASKWEB_INFRA_RETRY_SECONDS + 150,
}
#: Those of a batch: its launch time, calls finishing, and waits for the database.
BATCH_LIMITS = {
    "soft_time_limit": settings.FLASKWEB_JUDGE_TASK_SECONDS + 900,
    "time_limit": settings.FLASKWEB_JUDGE_TASK_SECONDS + 960,
}


@shared_task(acks_late=True, reject_on_worker_lost=True, **DISPATCH_LIMITS)
def judge_run_dispatch_task(run_id: int, after_id: int, missing_only: bool = False) -> None:
    """Enqueue judge_batch_task for the next page of run `run_id`'s responses after response
    `after_id`, then re-enqueue itself with the new cursor. Idempotent: enqueuing a response
    twice is harmless (judgments are unique per run, response and sample), so it acks late:
    if its worker dies mid-page the message comes back instead of the rest of the run being
    lost. Retries infrastructure errors (flaskweb.infra): the page again, then the follow-up
    message until the broker takes it."""
    from judging.services import judge_run_dispatch

    try:
        cursor = reconnecting(
            lambda: judge_run_dispatch(run_id=run_id, after_id=after_id, missing_only=missing_only),
            what=f"dispatch of judge run {run_id}",
        )
    except JudgeRun.DoesNotExist:
        logger.info("judge run %s is gone", run_id)
        return
    if cursor is not None:
        reconnecting(
            lambda: judge_run_dispatch_task.delay(run_id, cursor, missing_only),
            what=f"dispatch of judge run {run_id}",
        )


@shared_task(acks_late=True, reject_on_worker_lost=True, **BATCH_LIMITS)
def judge_batch_task(run_id: int, after_id: int, last_id: int) -> None:
    """Make the missing judgments of run `run_id`'s responses with ids in (after_id,
    last_id], many calls in flight on this process's judging engine (retries, Retry-After
    and the shared rate limit inside). Idempotent (missing judgments only), so it acks late
    and is delivered again if its worker dies. Enqueues a follow-up judge_batch_task with
    the part of its range it had not started when its FLASKWEB_JUDGE_TASK_SECONDS were up
    or its worker began a warm shutdown. A call's own failure is recorded on its judgment
    once its attempts are used, not retried here. Infrastructure errors (flaskweb.infra)
    are: answers that came back while the database was away are kept and written when it
    is back (the batch's recording loop), and an error anywhere else runs the batch again
    from what is written (its plan is the missing judgments)."""
    from judging.services import judge_batch_range

    try:
        rest = reconnecting(
            lambda: judge_batch_range(run_id=run_id, after_id=after_id, last_id=last_id),
            what=f"judge batch ({after_id}, {last_id}] of run {run_id}",
        )
    except JudgeRun.DoesNotExist:
        logger.info("judge run %s is gone", run_id)
        return
    if rest is not None:
        reconnecting(
            lambda: judge_batch_task.delay(run_id, rest, last_id),
            what=f"follow-up of judge batch ({after_id}, {last_id}] of run {run_id}",
        )


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=1200, time_limit=1260)
def judge_response_task(run_id: int, response_id: int, attempt: int = 1) -> None:
    """A message of the previous release (one task per response), still queued after an
    upgrade: judged as the batch (response_id - 1, response_id]. Idempotent."""
    judge_batch_task(run_id, response_id - 1, response_id)


@shared_task
def judge_runs_redispatch_task() -> list[int]:
    """Enqueue again the missing judgments of running judge runs, and the missing proposals
    of running metadata runs, without progress for FLASKWEB_JUDGE_REDISPATCH_SECONDS (a
    killed worker's unacknowledged messages). Idempotent (judgments and proposals are
    unique; each run is claimed by a conditional update); beat, every minute; retries
    infrastructure errors for BEAT_RETRY_SECONDS (flaskweb.infra). Returns the judge run
    ids, then the metadata run ids."""
    from judging.services import judge_runs_redispatch_stalled
    from judging.services.metadata import metadata_runs_redispatch_stalled

    seconds = settings.FLASKWEB_JUDGE_REDISPATCH_SECONDS
    return reconnecting(
        lambda: (
            judge_runs_redispatch_stalled(older_than_seconds=seconds)
            + metadata_runs_redispatch_stalled(older_than_seconds=seconds)
        ),
        what="stall sweep",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task
def judge_runs_health_check_task() -> int:
    """Fail judge and metadata runs with no progress for FLASKWEB_JUDGE_STALE_SECONDS.
    Idempotent; beat; retries infrastructure errors for BEAT_RETRY_SECONDS
    (flaskweb.infra)."""
    from judging.services import judge_runs_fail_stale
    from judging.services.metadata import metadata_runs_fail_stale

    stale = settings.FLASKWEB_JUDGE_STALE_SECONDS
    return reconnecting(
        lambda: (
            judge_runs_fail_stale(older_than_seconds=stale)
            + metadata_runs_fail_stale(older_than_seconds=stale)
        ),
        what="judge runs health check",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task(soft_time_limit=3300, time_limit=3500)
def judge_output_import_task(job_id: int) -> None:
    """Run judge output import job `job_id` from its stored files. Idempotent: the job is
    claimed pending -> running by a conditional update, so a redelivered message finds it
    claimed and returns. Enqueues nothing. Retries infrastructure errors (flaskweb.infra)
    for up to FLASKWEB_INFRA_RETRY_SECONDS: the import is one transaction, so each attempt
    starts it over under this task's claim. Any other failure is recorded on the job row
    (with the error; nothing written). Routed to the `imports` queue, not to the judging
    queue of LLM calls."""
    from judging.output_imports.jobs import judge_output_import_job_run

    claim = claim_token()
    job = reconnecting(
        lambda: judge_output_import_job_run(job_id=job_id, claim=claim),
        what=f"judge output import {job_id}",
    )
    if job is None:
        logger.info("judge output import %s is missing or already claimed", job_id)


@shared_task
def judge_output_import_jobs_health_check_task() -> int:
    """Fail judge output imports stuck in `running` longer than
    FLASKWEB_IMPORT_STALE_SECONDS (their worker died). Idempotent; beat, every 5 minutes;
    retries infrastructure errors for BEAT_RETRY_SECONDS (flaskweb.infra)."""
    from judging.output_imports.jobs import judge_output_import_jobs_fail_stale

    return reconnecting(
        lambda: judge_output_import_jobs_fail_stale(
            older_than_seconds=settings.FLASKWEB_IMPORT_STALE_SECONDS
        ),
        what="judge output imports health check",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task(acks_late=True, reject_on_worker_lost=True, **DISPATCH_LIMITS)
def metadata_run_dispatch_task(run_id: int, after_id: int) -> None:
    """Enqueue metadata_batch_task for the next page of metadata run `run_id`'s items after
    item `after_id`, then re-enqueue itself with the new cursor. Idempotent (a batch asks
    only about items without the run's proposal), so it acks late. Retries infrastructure
    errors (flaskweb.infra): the page again, then the follow-up message until the broker
    takes it."""
    from judging.services.metadata import metadata_run_dispatch

    try:
        cursor = reconnecting(
            lambda: metadata_run_dispatch(run_id=run_id, after_id=after_id),
            what=f"dispatch of metadata run {run_id}",
        )
    except MetadataRun.DoesNotExist:
        logger.info("metadata run %s is gone", run_id)
        return
    if cursor is not None:
        reconnecting(
            lambda: metadata_run_dispatch_task.delay(run_id, cursor),
            what=f"dispatch of metadata run {run_id}",
        )


@shared_task(acks_late=True, reject_on_worker_lost=True, **BATCH_LIMITS)
def metadata_batch_task(run_id: int, after_id: int, last_id: int) -> None:
    """Ask the judge about the items of metadata run `run_id` with ids in (after_id,
    last_id] that lack its proposal (cache, shared rate limit, retries with backoff inside
    the judging engine). Idempotent, so it acks late. Enqueues a follow-up with the part of
    its range it had not started when its FLASKWEB_JUDGE_TASK_SECONDS were up or its worker
    began a warm shutdown. A call's own failure is recorded on the item's proposal, not
    retried here. Infrastructure errors (flaskweb.infra) are: answers that came back while
    the database was away are kept and written when it is back, and an error anywhere else
    runs the batch again from what is written (it asks only about items without a
    proposal)."""
    from judging.services.metadata import metadata_batch_range

    try:
        rest = reconnecting(
            lambda: metadata_batch_range(run_id=run_id, after_id=after_id, last_id=last_id),
            what=f"metadata batch ({after_id}, {last_id}] of run {run_id}",
        )
    except MetadataRun.DoesNotExist:
        logger.info("metadata run %s is gone", run_id)
        return
    if rest is not None:
        reconnecting(
            lambda: metadata_batch_task.delay(run_id, rest, last_id),
            what=f"follow-up of metadata batch ({after_id}, {last_id}] of run {run_id}",
        )
