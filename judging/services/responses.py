"""Judging one response in one run: the unit of work of judge_response_task. Its missing
judgments are made (each sample of an LLM judge or a baseline, or both orders of a pair),
then the run is finished if that was the last one."""

from __future__ import annotations

import json
import logging

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Response
from annotation.selectors import response_for_judging
from judging import prompts
from judging.baselines import BASELINES
from judging.models import JudgeKind, JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus
from judging.services.calls import NO_CALL, llm_call
from judging.services.pairwise import pair_judge
from judging.services.prompting import JudgedResponse, judged_response_read, response_messages
from judging.services.recording import judgment_record
from judging.services.runs import (
    judge_run_finish_if_complete,
    judge_run_pause_if_over_budget,
    run_judge,
)

logger = logging.getLogger(__name__)


def judge_response(*, run_id: int, response_id: int, attempt: int = 1) -> None:
    """Make the missing judgments (samples) of one response in one run.

    Raises RetryLater for a retryable failure while attempts remain; records a `failed`
    judgment once they are used up, or at once for a permanent error.
    """
    run = JudgeRun.objects.select_related(
        "judge__prompt_template", "judge__provider", "campaign"
    ).get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return
    run.judge = run_judge(run)  # every read of run.judge below sees the snapshot
    response = response_for_judging(response_id=response_id)
    if run.pairwise_against:
        pair_judge(run=run, response=response, attempt=attempt)
        judge_run_finish_if_complete(run_id=run.pk)
        return
    done = set(
        Judgment.objects.filter(run=run, response=response).values_list("sample_index", flat=True)
    )
    target: JudgedResponse | None = None  # read once, when a sample is missing
    for sample in range(run.judge.samples):
        if sample in done:
            continue
        if judge_run_pause_if_over_budget(run=run):
            return
        if target is None:
            target = judged_response_read(response=response, campaign=run.campaign)
        if run.judge.kind == JudgeKind.BASELINE:
            _baseline_judge(run, target, sample)
        else:
            _llm_judge(run, target, sample, attempt)
    judge_run_finish_if_complete(run_id=run.pk)


def _llm_judge(run: JudgeRun, target: JudgedResponse, sample: int, attempt: int) -> None:
    def record(body, key, **outcome) -> None:
        judgment_record(run, target, sample, body, key, **outcome)

    try:
        messages = response_messages(judge=run.judge, target=target)
    except prompts.PromptError as exc:
        # e.g. a reference template on an item without a reference answer: recorded, so
        # the run still completes and the reason is on the judgment.
        record({}, "", **NO_CALL, error=f"prompt: {exc}")
        return
    llm_call(judge=run.judge, messages=messages, sample=sample, attempt=attempt, record=record)


def _baseline_judge(run: JudgeRun, target: JudgedResponse, sample: int) -> None:
    """An offline baseline's scores for one sample: computed here, no call, no cost."""
    judge = BASELINES[run.judge.baseline]
    response: Response = target.response
    skills = target.skills
    item = response.item
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
