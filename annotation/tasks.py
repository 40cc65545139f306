"""Celery tasks of the annotation app: thin adapters that load a row and call one service.

Every task retries infrastructure errors (the database or the broker lost) the one way of
flaskweb.infra: in the task, connections closed, jittered backoff, from what is written."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from flaskweb.infra import BEAT_RETRY_SECONDS, reconnecting
from flaskweb.jobs import claim_token

logger = logging.getLogger(__name__)


@shared_task(soft_time_limit=3300, time_limit=3500)
def dataset_import_task(upload_id: int) -> None:
    """Run import `upload_id`. Idempotent: the job is claimed pending -> running by a
    conditional update, so a redelivered message finds it claimed and returns. Retries
    infrastructure errors (flaskweb.infra) for up to FLASKWEB_INFRA_RETRY_SECONDS: the
    import is one transaction, so each attempt starts it over, under this task's claim
    (the upload stays claimed by it, not left running for the stale check). Any other
    failure is recorded on the job row and re-run by a new upload. Routed to the `imports`
    queue."""
    from annotation.datasets.services import dataset_import

    claim = claim_token()
    upload = reconnecting(
        lambda: dataset_import(upload_id=upload_id, claim=claim), what=f"import {upload_id}"
    )
    if upload is None:
        logger.info("upload %s is missing or already claimed; nothing to do", upload_id)


@shared_task
def uploads_health_check_task() -> int:
    """Fail imports stuck in `running` longer than FLASKWEB_IMPORT_STALE_SECONDS (their
    worker died). Idempotent; run by beat every 5 minutes; retries infrastructure errors
    for BEAT_RETRY_SECONDS (flaskweb.infra)."""
    from annotation.datasets.services import uploads_fail_stale

    return reconnecting(
        lambda: uploads_fail_stale(older_than_seconds=settings.FLASKWEB_IMPORT_STALE_SECONDS),
        what="uploads health check",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task
def assignments_expire_task() -> int:
    """Expire leases past their time and free their slots. Idempotent (conditional
    updates); run by beat every minute; retries infrastructure errors for
    BEAT_RETRY_SECONDS (flaskweb.infra)."""
    from annotation.services.assignments import assignments_expire_stale

    return reconnecting(
        lambda: assignments_expire_stale(limit=10_000),
        what="lease expiry",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task(soft_time_limit=240, time_limit=300)
def adaptive_overlap_task() -> int:
    """Adaptive overlap (docs/REVIEW.md): for every active campaign with it on, raise by one
    the overlap of complete responses whose scores disagree, within the campaign's limits.
    Idempotent (a raised task is no longer complete, so a second run raises nothing more);
    enqueues nothing; retries infrastructure errors for BEAT_RETRY_SECONDS (flaskweb.infra),
    and beat runs it again in two minutes. Returns how many tasks were raised."""
    from annotation.review.services import adaptive_overlap_sweep

    return reconnecting(
        lambda: sum(len(run.raised) for run in adaptive_overlap_sweep()),
        what="adaptive overlap",
        seconds=BEAT_RETRY_SECONDS,
    )


@shared_task(soft_time_limit=3300, time_limit=3500)
def campaign_texts_render_task(campaign_id: int) -> int:
    """Render and store the texts a campaign's cards show, ahead of its annotators
    (annotation/services/rendered_texts.py). Idempotent (each text is stored once, keyed by
    its digest), so a redelivered message re-reads and renders nothing new; retries
    infrastructure errors (flaskweb.infra)."""
    from annotation.services.rendered_texts import campaign_texts_render

    return reconnecting(
        lambda: campaign_texts_render(campaign_id=campaign_id),
        what=f"campaign {campaign_id} texts",
    )
