"""Pairwise judging: a challenger response against the anchor model's response to the same
item, in both orders, each its own idempotent PairJudgment (verdicts stored as
challenger/anchor, so the two orders can be compared). The calls are made by
judging.services.batches like any other judgment; this records their outcome."""

from __future__ import annotations

import logging
from decimal import Decimal

from django.db import IntegrityError, transaction

from annotation.models import Response
from judging.models import JudgeRun, JudgmentStatus, PairJudgment
from judging.prompts import pairwise
from judging.services.estimates import tokens_cost
from judging.services.prompting import JudgedResponse
from judging.services.recording import run_counters_add

logger = logging.getLogger(__name__)


def pair_judgment_record(
    run: JudgeRun,
    target: JudgedResponse,
    anchor: Response,
    order: int,
    body: dict,
    key: str,
    *,
    content: str,
    prompt_tokens: int,
    completion_tokens: int,
    latency_ms: int | None,
    attempts: int,
    from_cache: bool = False,
    error: str = "",
) -> None:
    """Insert one order's PairJudgment and move the run's counters, in one transaction; an
    order already recorded (a duplicate task got there first) changes nothing."""
    response = target.response
    if error:
        status, verdicts, method, problem = JudgmentStatus.FAILED, {}, "", error
    else:
        reading = pairwise.parse_pair(content, target.skill_names)
        status = {"ok": JudgmentStatus.OK, "partial": JudgmentStatus.PARTIAL}.get(
            reading.status, JudgmentStatus.PARSE_FAILED
        )
        verdicts = pairwise.to_verdicts(reading.choices, order)
        method, problem = reading.method, reading.error
    cost = Decimal(0) if from_cache else tokens_cost(run.judge, prompt_tokens, completion_tokens)
    try:
        with transaction.atomic():
            PairJudgment.objects.create(
                run=run,
                response=response,
                anchor=anchor,
                order=order,
                status=status,
                verdicts=verdicts,
                request=body,
                raw_output=content,
                parse_method=method,
                error=problem,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=latency_ms,
                attempts=attempts,
                from_cache=from_cache,
                cache_key=key,
            )
            run_counters_add(run, status, from_cache, prompt_tokens, completion_tokens, cost)
    except IntegrityError:
        logger.info("pair judgment (%s, %s, %s) exists already", run.pk, response.pk, order)
