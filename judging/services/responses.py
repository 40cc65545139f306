"""Judging responses one at a time (tests, tools) and the offline baselines' judgments.
The work itself is judging.services.batches: one response is a batch of one."""

from __future__ import annotations

import json
import logging

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Response
from judging.baselines import BASELINES
from judging.models import JudgeRun, JudgeScore, Judgment, JudgmentStatus
from judging.services.prompting import JudgedResponse

logger = logging.getLogger(__name__)


def judge_response(*, run_id: int, response_id: int) -> None:
    """Make the missing judgments (samples, or both orders of its pair) of one response in
    one run, as a batch of one, waiting for it to complete."""
    from judging.services.batches import judge_batch

    judge_batch(run_id=run_id, response_ids=[response_id])


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
