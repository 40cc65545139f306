"""Pairwise judging of one challenger response: both orders of its pair with the anchor
model's response to the same item, each its own idempotent PairJudgment (verdicts stored
as challenger/anchor, so the two orders can be compared)."""

from __future__ import annotations

import logging
from decimal import Decimal

from django.db import IntegrityError, transaction

from annotation.models import Response
from annotation.selectors import anchor_response_for
from judging import prompts
from judging.models import JudgeRun, JudgmentStatus, PairJudgment
from judging.prompts import pairwise
from judging.services.calls import NO_CALL, llm_call
from judging.services.estimates import tokens_cost
from judging.services.prompting import JudgedResponse, judged_response_read, pair_messages
from judging.services.recording import run_counters_add
from judging.services.runs import judge_run_pause_if_over_budget

logger = logging.getLogger(__name__)


def pair_judge(*, run: JudgeRun, response: Response, attempt: int) -> None:
    """Both orders of one pair (challenger `response` against the anchor model's response
    to its item) that are not recorded yet; stops (pausing the run) when its budget is used."""
    anchor = anchor_response_for(response=response, anchor_model=run.pairwise_against)
    if anchor is None:
        return
    done = set(
        PairJudgment.objects.filter(run=run, response=response).values_list("order", flat=True)
    )
    target = judged_response_read(response=response, campaign=run.campaign)
    for order in (0, 1):
        if order in done:
            continue
        if judge_run_pause_if_over_budget(run=run):
            return

        def record(body, key, *, order=order, **outcome) -> None:
            pair_judgment_record(run, target, anchor, order, body, key, **outcome)

        try:
            messages = pair_messages(judge=run.judge, target=target, anchor=anchor, order=order)
        except prompts.PromptError as exc:
            record({}, "", **NO_CALL, error=f"prompt: {exc}")
            continue
        llm_call(judge=run.judge, messages=messages, sample=order, attempt=attempt, record=record)


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
