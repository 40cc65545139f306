"""Screening tasks as researchers set and list them: the campaign feature's gold-task service with
screening's kinds, the tolerance of the campaign's agreement rule, and no response used for
two kinds of known-score task. Kept apart from annotation/screening/services.py, which the
claim imports: the annotator's path never reaches the campaign feature."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.campaigns.selectors import GoldTaskRow, campaign_gold_task_list
from annotation.campaigns.services import gold_task_set
from annotation.models import Campaign, Response, Task, TaskKind
from annotation.screening.services import SCREENING_KINDS, rule_tolerance
from annotation.selectors import campaign_known_task_check


@transaction.atomic
def screening_task_set(
    *,
    campaign: Campaign,
    response: Response,
    scores: dict[int, int | None],
    kind: str,
    explanation: str = "",
) -> Task:
    """Make `response` a training or qualification task with known scores per skill id
    (None = N/A) and an explanation (shown after each training answer). A response is one
    kind of known-score task at a time: a qualification item seen in training, or as gold,
    would give its answer away."""
    if kind not in SCREENING_KINDS:
        raise ValidationError("a screening task is a training or a qualification task")
    clash = (
        Task.objects.filter(campaign=campaign, response=response)
        .exclude(kind__in=[kind, TaskKind.NORMAL])
        .values_list("kind", flat=True)
        .first()
    )
    if clash is not None:
        raise ValidationError(f"this response is already a {clash} task of the campaign")
    # Its real task, once given to someone, stays: training on it would show the answer.
    if (
        Task.objects.filter(campaign=campaign, response=response, kind=TaskKind.NORMAL)
        .exclude(assigned=0, submitted=0)
        .exists()
    ):
        raise ValidationError(
            "this response is already being scored as a real task; choose another one"
        )
    return gold_task_set(
        campaign=campaign,
        response=response,
        scores=scores,
        kind=kind,
        tolerance=rule_tolerance(campaign.qualification_rule),
        explanation=explanation,
    )


def screening_task_list(*, campaign: Campaign) -> list[GoldTaskRow]:
    """The campaign's training and qualification tasks, in the order annotators get them
    (task id), with their known scores, explanation and use, and the known scores' skills
    the task does not ask (`unasked`: compared with nothing, so left out of feedback and
    the decision)."""
    rows = campaign_gold_task_list(campaign=campaign, kinds=SCREENING_KINDS)
    checked = {
        t.task_id: t
        for t in campaign_known_task_check(
            campaign=campaign, item_ids={row.item_id for row in rows}
        )
    }
    for row in rows:
        found = checked.get(row.task_id)
        if found is not None:
            row.unasked = list(found.unasked)
            row.compares = len(found.known) > len(found.unasked)
    return rows
