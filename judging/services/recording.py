"""Recording the outcome of a judge call: the judgment with its scores (or its error, or its
unparsed raw output, never coerced into a score) and the run's counters, in one
transaction. Idempotent by construction: a judgment is keyed by (run, response, sample
index), so a redelivered or duplicated task finds its judgment and records nothing; the
counters move only in the transaction that inserts the judgment."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Response
from judging import prompts
from judging.baselines import BASELINES
from judging.models import JudgeRun, JudgeScore, Judgment, JudgmentStatus
from judging.services.estimates import tokens_cost
from judging.services.prompting import JudgedResponse

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    """One outcome to record: the judgment of `sample` of `target`, asked with `body`
    (cache key `key`), and what came back (`outcome`: content, tokens, latency, attempts,
    from_cache, error, as judgment_record takes them)."""

    target: JudgedResponse
    sample: int
    body: dict
    key: str
    outcome: dict


def judgment_record(
    run: JudgeRun,
    target: JudgedResponse,
    sample: int,
    body: dict,
    key: str,
    **outcome,
) -> None:
    """Insert the judgment and its scores, and move the run's counters, in one transaction.
    A judgment that already exists (a duplicate task got there first) changes nothing."""
    judgment, scores, status, cost = _rows(run, Recorded(target, sample, body, key, outcome))
    try:
        with transaction.atomic():
            judgment.save(force_insert=True)
            for score in scores:
                score.judgment = judgment
            JudgeScore.objects.bulk_create(scores)
            run_counters_add(
                run,
                status,
                outcome.get("from_cache", False),
                judgment.prompt_tokens,
                judgment.completion_tokens,
                cost,
            )
    except IntegrityError:
        logger.info("judgment (%s, %s, %s) exists already", run.pk, target.response.pk, sample)


def judgments_record_many(run: JudgeRun, recorded: list[Recorded]) -> int:
    """judgment_record for many outcomes in one transaction and four statements (the
    judgments already there are skipped; the counters move once, by what was inserted).
    A concurrent duplicate (another task inserting one of them meanwhile) rolls the batch
    back and records them one by one instead. A batch written again after a lost database
    connection (judging.services.batches) finds what an unconfirmed commit wrote and skips
    it, so nothing is counted twice. Returns how many were inserted."""
    if not recorded:
        return 0
    try:
        with transaction.atomic():
            present = set(
                Judgment.objects.filter(
                    run=run, response_id__in={r.target.response.pk for r in recorded}
                ).values_list("response_id", "sample_index")
            )
            fresh, seen = [], set(present)
            for item in recorded:
                slot = (item.target.response.pk, item.sample)
                if slot not in seen:
                    seen.add(slot)
                    fresh.append(_rows(run, item))
            if not fresh:
                return 0
            judgments = Judgment.objects.bulk_create([row[0] for row in fresh])
            scores = []
            for judgment, (_, rows, _, _) in zip(judgments, fresh, strict=True):
                for score in rows:
                    score.judgment = judgment
                    scores.append(score)
            JudgeScore.objects.bulk_create(scores)
            _counters_add_many(run, fresh)
            return len(fresh)
    except IntegrityError:
        logger.info("run %s: a judgment of this batch exists already; one by one", run.pk)
        for item in recorded:
            judgment_record(run, item.target, item.sample, item.body, item.key, **item.outcome)
        return 0


def _rows(run: JudgeRun, item: Recorded) -> tuple[Judgment, list[JudgeScore], str, Decimal]:
    """The judgment (unsaved) and its scores for one outcome, its status and cost."""
    outcome = item.outcome
    target = item.target
    error = outcome.get("error", "")
    content = outcome["content"]
    from_cache = outcome.get("from_cache", False)
    if error:
        status, parsed = JudgmentStatus.FAILED, None
    else:
        parsed = prompts.parse_judgment(content, target.skill_names)
        status = {
            "ok": JudgmentStatus.OK,
            "partial": JudgmentStatus.PARTIAL,
        }.get(parsed.status, JudgmentStatus.PARSE_FAILED)
    response = target.response
    prompt_tokens, completion_tokens = outcome["prompt_tokens"], outcome["completion_tokens"]
    cost = Decimal(0) if from_cache else tokens_cost(run.judge, prompt_tokens, completion_tokens)
    judgment = Judgment(
        run=run,
        response=response,
        sample_index=item.sample,
        status=status,
        request=item.body,
        raw_output=content,
        parse_method=getattr(parsed, "method", "") or "",
        error=error or (getattr(parsed, "error", "") or ""),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_ms=outcome["latency_ms"],
        attempts=outcome["attempts"],
        from_cache=from_cache,
        cache_key=item.key,
        prompt_template=run.judge.prompt_template,
    )
    scores = []
    if parsed is not None:
        by_name = {s.name: s for s in target.skills}
        scores = [
            JudgeScore(
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
        ]
    return judgment, scores, status, cost


def _counters_add_many(run: JudgeRun, fresh: list[tuple[Judgment, list, str, Decimal]]) -> None:
    ok = (JudgmentStatus.OK, JudgmentStatus.PARTIAL)
    JudgeRun.objects.filter(pk=run.pk).update(
        done=F("done") + sum(1 for row in fresh if row[2] in ok),
        failed=F("failed") + sum(1 for row in fresh if row[2] == JudgmentStatus.FAILED),
        parse_failed=F("parse_failed")
        + sum(1 for row in fresh if row[2] == JudgmentStatus.PARSE_FAILED),
        cached=F("cached") + sum(1 for row in fresh if row[0].from_cache),
        prompt_tokens=F("prompt_tokens") + sum(row[0].prompt_tokens for row in fresh),
        completion_tokens=F("completion_tokens") + sum(row[0].completion_tokens for row in fresh),
        cost=F("cost") + sum((row[3] for row in fresh), Decimal(0)),
        updated_at=timezone.now(),
    )


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


def baseline_judge(run: JudgeRun, target: JudgedResponse, sample: int) -> None:
    """An offline baseline's scores for one sample: computed here, no call, no cost."""
    judge = BASELINES[run.judge.baseline]
    response: Response = target.response
    skills = target.skills
    item = response.item
    result = judge.score(
        instruction=item.instruction,
        response=response.text,
        reference=item.reference_answer,
        skills=[s.name for s in skills],
    )
    body = {"baseline": run.judge.baseline}
    try:
        with transaction.atomic():
            judgment = Judgment.objects.create(
                run=run,
                response=response,
                sample_index=sample,
                status=JudgmentStatus.OK,
                request=body,
                raw_output=json.dumps(result.raw),
                parse_method="baseline",
                error=result.note if all(v is None for v in result.scores.values()) else "",
            )
            JudgeScore.objects.bulk_create(
                JudgeScore(
                    judgment=judgment,
                    run=run,
                    response=response,
                    skill_id=s.skill_id,
                    rubric_id=s.rubric_id,
                    score=result.scores.get(s.name),
                    is_na=result.scores.get(s.name) is None,
                    raw_value=result.raw.get(s.name),
                    feedback=result.note,
                )
                for s in skills
            )
            JudgeRun.objects.filter(pk=run.pk).update(done=F("done") + 1, updated_at=timezone.now())
    except IntegrityError:
        logger.info("baseline judgment (%s, %s) exists already", run.pk, response.pk)
