"""Celery tasks of the annotation app: thin adapters that load a row and call one service."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

logger = logging.getLogger(__name__)


@shared_task(soft_time_limit=3300, time_limit=3500)
def dataset_import_task(upload_id: int) -> None:
    """Run import `upload_id`. Idempotent: the job is claimed pending -> running by a
    conditional update, so a redelivered message finds it claimed and returns. Not
    retried: a failed import is recorded on the job row and re-run by a new upload.
    Routed to the `imports` queue."""
    from annotation.datasets.services import dataset_import

    if dataset_import(upload_id=upload_id) is None:
        logger.info("upload %s is missing or already claimed; nothing to do", upload_id)


@shared_task
def uploads_health_check_task() -> int:
    """Fail imports stuck in `running` longer than FLASKWEB_IMPORT_STALE_SECONDS (their
    worker died). Idempotent; run by beat every 5 minutes."""
    from annotation.datasets.services import uploads_fail_stale

    return uploads_fail_stale(older_than_seconds=settings.FLASKWEB_IMPORT_STALE_SECONDS)


@shared_task
def assignments_expire_task() -> int:
    """Expire leases past their time and free their slots. Idempotent (conditional
    updates); run by beat every minute."""
    from annotation.services.assignments import assignments_expire_stale

    return assignments_expire_stale(limit=10_000)


@shared_task(soft_time_limit=240, time_limit=300)
def adaptive_overlap_task() -> int:
    """Adaptive overlap (docs/REVIEW.md): for every active campaign with it on, raise by one
    the overlap of complete responses whose scores disagree, within the campaign's limits.
    Idempotent (a raised task is no longer complete, so a second run raises nothing more);
    enqueues nothing; not retried (beat runs it again in two minutes). Returns how many
    tasks were raised."""
    from annotation.review.services import adaptive_overlap_sweep

    return sum(len(run.raised) for run in adaptive_overlap_sweep())
