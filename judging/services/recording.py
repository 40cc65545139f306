"""Recording the outcome of a judge call: the judgment with its scores (or its error, or its
unparsed raw output, never coerced into a score) and the run's counters, in one
transaction. Idempotent by construction: a judgment is keyed by (run, response, sample
index), so a redelivered or duplicated task finds its judgment and records nothing; the
counters move only in the transaction that inserts the judgment."""

from __future__ import annotations

import logging
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from judging import prompts
from judging.models import JudgeRun, JudgeScore, Judgment, JudgmentStatus
from judging.services.estimates import tokens_cost
from judging.services.prompting import JudgedResponse

logger = logging.getLogger(__name__)


def judgment_record(
    run: JudgeRun,
    target: JudgedResponse,
    sample: int,
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
    """Insert the judgment and its scores, and move the run's counters, in one transaction.
    A judgment that already exists (a duplicate task got there first) changes nothing."""
    if error:
        status, parsed = JudgmentStatus.FAILED, None
    else:
        parsed = prompts.parse_judgment(content, target.skill_names)
        status = {
            "ok": JudgmentStatus.OK,
            "partial": JudgmentStatus.PARTIAL,
        }.get(parsed.status, JudgmentStatus.PARSE_FAILED)
    response = target.response
    by_name = {s.name: s for s in target.skills}
    cost = Decimal(0) if from_cache else tokens_cost(run.judge, prompt_tokens, completion_tokens)
    try:
        with transaction.atomic():
            judgment = Judgment.objects.create(
                run=run,
                response=response,
                sample_index=sample,
                status=status,
                request=body,
                raw_output=content,
                parse_method=getattr(parsed, "method", "") or "",
                error=error or (getattr(parsed, "error", "") or ""),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=latency_ms,
                attempts=attempts,
                from_cache=from_cache,
                cache_key=key,
                prompt_template=run.judge.prompt_template,
            )
            if parsed is not None:
                JudgeScore.objects.bulk_create(
                    JudgeScore(
                        judgment=judgment,
                        run=run,
                        response=response,
                        skill_id=by_name[name].skill_id,
                        rubric_id=by_name[name].rubric_id,
                        score=value,
                        is_na=value is None,
                        feedback=(parsed.feedback or {}).get(name, ""),
                    )
                    for name, value in parsed.scores.items()
                    if name in by_name
                )
            run_counters_add(run, status, from_cache, prompt_tokens, completion_tokens, cost)
    except IntegrityError:
        logger.info("judgment (%s, %s, %s) exists already", run.pk, response.pk, sample)


def run_counters_add(
    run: JudgeRun,
    status: str,
    from_cache: bool,
    prompt_tokens: int,
    completion_tokens: int,
    cost: Decimal,
) -> None:
    """Move the run's counters, in the transaction that inserts the judgment."""
    JudgeRun.objects.filter(pk=run.pk).update(
        done=F("done") + (1 if status in (JudgmentStatus.OK, JudgmentStatus.PARTIAL) else 0),
        failed=F("failed") + (1 if status == JudgmentStatus.FAILED else 0),
        parse_failed=F("parse_failed") + (1 if status == JudgmentStatus.PARSE_FAILED else 0),
        cached=F("cached") + (1 if from_cache else 0),
        prompt_tokens=F("prompt_tokens") + prompt_tokens,
        completion_tokens=F("completion_tokens") + completion_tokens,
        cost=F("cost") + cost,
        updated_at=timezone.now(),
    )
