"""The one rule of which human scores count as data (annotation.models): submitted, normal
assignments of normal tasks. Its three forms (queryset method, Q with a path, predicate on
plain values) agree, and the public selectors read it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    CampaignRubric,
    HumanScore,
    Task,
    TaskKind,
    accepted_assignment_q,
    assignment_is_accepted,
)
from annotation.selectors import human_score_rows, human_scores_accepted
from tests.annotation.test_annotate_views import build_campaign, build_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(project, tmp_path, annotator):
    """One assignment of each kind that must not count, and one that must, each scored."""
    dataset = build_dataset(project, tmp_path, texts=["a", "b", "c", "d"], name="Rule")
    campaign = build_campaign(project, dataset, annotators=[annotator], overlap=1)
    t0, t1, t2, t3 = Task.objects.filter(campaign=campaign).order_by("pk")
    Task.objects.filter(pk=t1.pk).update(kind=TaskKind.GOLD)
    lease = timezone.now() + timedelta(minutes=5)
    made = {}
    for name, task, kind, status in [
        ("accepted", t0, AssignmentKind.NORMAL, AssignmentStatus.SUBMITTED),
        ("gold", t1, AssignmentKind.NORMAL, AssignmentStatus.SUBMITTED),
        ("expired", t2, AssignmentKind.NORMAL, AssignmentStatus.EXPIRED),
        ("repeat", t0, AssignmentKind.REPEAT, AssignmentStatus.SUBMITTED),
        ("active", t3, AssignmentKind.NORMAL, AssignmentStatus.ACTIVE),
    ]:
        made[name] = Assignment.objects.create(
            task=task,
            campaign=campaign,
            annotator=annotator,
            kind=kind,
            status=status,
            expires_at=lease,
        )
    pin = CampaignRubric.objects.filter(campaign=campaign).first()
    for assignment in made.values():
        HumanScore.objects.create(
            assignment=assignment,
            campaign=campaign,
            response_id=assignment.task.response_id,
            annotator=annotator,
            skill_id=pin.skill_id,
            rubric_id=pin.rubric_id,
            score=4,
        )
    return made


def test_only_a_submitted_normal_assignment_of_a_normal_task_counts(rows, annotator):
    accepted = {rows["accepted"].pk}
    # the queryset method
    assert set(Assignment.objects.accepted().values_list("pk", flat=True)) == accepted
    assert set(HumanScore.objects.accepted().values_list("assignment_id", flat=True)) == accepted
    # the Q with a path, as a Count filter from the user
    counted = (
        get_user_model()
        .objects.filter(pk=annotator.pk)
        .annotate(n=Count("assignments", filter=accepted_assignment_q(path="assignments__")))
        .get()
        .n
    )
    assert counted == 1
    # the predicate on plain values
    values = Assignment.objects.values_list("pk", "status", "kind", "task__kind")
    assert {
        pk
        for pk, status, kind, task_kind in values
        if assignment_is_accepted(status=status, kind=kind, task_kind=task_kind)
    } == accepted


def test_the_public_selectors_read_the_rule(rows, project):
    assert list(human_scores_accepted(project=project).values_list("assignment_id", flat=True)) == [
        rows["accepted"].pk
    ]
    assert len(human_score_rows(project=project)) == 1
