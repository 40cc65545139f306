"""Pair tasks claimed and submitted by many annotators at once, on real PostgreSQL: the
exactly-K guarantees of tests/annotation/test_claim_concurrency.py for pairwise campaigns
(threads with their own connections, released together behind a barrier)."""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest
from django.db.models import Count, Exists, F, OuterRef, Q

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    HumanPreference,
    HumanScore,
    Task,
    TaskKind,
)
from annotation.services.assignments import (
    AssignmentError,
    assignment_claim_next,
    assignment_next,
    assignment_skip,
    assignments_expire_stale,
)
from annotation.services.preferences import (
    PreferenceInput,
    human_preference_submit,
    pair_questions,
)
from flaskweb.db import is_postgres
from tests.annotation.test_annotate_api import make_dataset
from tests.annotation.test_claim_concurrency import run_together

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not is_postgres(), reason="row locks and real concurrency: PostgreSQL"),
]

MODELS = ("m-one", "m-two", "m-three")
QUESTIONS = 3 + 1  # three item skills and the overall question (pair_ask "both")


@pytest.fixture
def crowd(django_user_model):
    def make(n: int, prefix: str = "a"):
        return [
            django_user_model.objects.create_user(f"{prefix}{i:02d}", password="x")
            for i in range(n)
        ]

    return make


def make_pairwise(project, tmp_path, people, *, items, overlap, **options) -> Campaign:
    dataset = make_dataset(project, tmp_path, items=items, models=MODELS)
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Pair race",
        overlap=overlap,
        annotators=people,
        mode=CampaignMode.PAIRWISE,
        pair_choices=["a", "b", "tie", "both_bad"],
        **options,
    )
    campaign_activate(campaign=campaign)
    return Campaign.objects.get(pk=campaign.pk)


def answers_for(assignment) -> list[PreferenceInput]:
    task = Task.objects.select_related("response").get(pk=assignment.task_id)
    campaign = Campaign.objects.get(pk=task.campaign_id)
    questions = pair_questions(campaign=campaign, item_id=task.response.item_id)
    asked = [s.skill_id for s in questions.skills] + ([None] if questions.overall else [])
    return [PreferenceInput(skill_id, random.choice(questions.choices)) for skill_id in asked]


def assert_pair_invariants(campaign, accepted: list[int]) -> None:
    normal = Q(kind=AssignmentKind.NORMAL, task__kind=TaskKind.NORMAL)
    real = {
        row["task_id"]: row
        for row in Assignment.objects.filter(normal, campaign=campaign)
        .values("task_id")
        .annotate(
            active=Count("pk", filter=Q(status=AssignmentStatus.ACTIVE)),
            submitted=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
        )
    }
    tasks = list(Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL))
    assert tasks and all(t.response_b_id is not None for t in tasks)
    for task in tasks:
        counts = real.get(task.pk, {"active": 0, "submitted": 0})
        assert task.assigned <= task.overlap and task.submitted <= task.overlap, task
        assert task.assigned == counts["active"] + counts["submitted"], (task, counts)
        assert task.submitted == counts["submitted"], (task, counts)
    pairs = Counter(
        Assignment.objects.filter(normal, campaign=campaign).values_list("task_id", "annotator_id")
    )
    assert max(pairs.values(), default=1) == 1  # nobody got the same pair twice
    assert len(accepted) == len(set(accepted)), "a submission was reported twice"
    per_assignment = dict(
        HumanPreference.objects.filter(campaign=campaign)
        .values("assignment_id")
        .annotate(n=Count("pk"))
        .values_list("assignment_id", "n")
    )
    assert per_assignment == dict.fromkeys(accepted, QUESTIONS)
    submitted = set(
        Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.SUBMITTED).values_list(
            "pk", flat=True
        )
    )
    assert submitted == set(accepted)
    assert not HumanScore.objects.filter(campaign=campaign).exists()
    # a complete pair has exactly K preferences per question
    complete = {(t.response_id, t.response_b_id) for t in tasks if t.submitted == t.overlap}
    per_question = Counter(
        (a, b, skill)
        for a, b, skill in HumanPreference.objects.filter(campaign=campaign).values_list(
            "response_a_id", "response_b_id", "skill_id"
        )
        if (a, b) in complete
    )
    assert len(per_question) == len(complete) * QUESTIONS
    assert set(per_question.values()) <= {campaign.overlap}


def _work_left_for(campaign, person) -> bool:
    had = Assignment.objects.filter(
        task=OuterRef("pk"), annotator=person, kind=AssignmentKind.NORMAL
    )
    return (
        Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL, submitted__lt=F("overlap"))
        .filter(~Exists(had))
        .exists()
    )


def compare_until_done(campaign, person, accepted: list[int], *, skip_every: int = 0) -> int:
    done = 0
    deadline = time.monotonic() + 45
    while True:
        assignment = assignment_next(campaign=campaign, annotator=person)
        if assignment is None:
            if not _work_left_for(campaign, person):
                return done
            assert time.monotonic() < deadline, "work is left but no claim succeeds"
            time.sleep(0.02)
            continue
        done += 1
        if skip_every and done % skip_every == 0:
            assignment_skip(assignment_id=assignment.pk, annotator=person, reason="unclear")
            continue
        result = human_preference_submit(
            assignment_id=assignment.pk, annotator=person, preferences=answers_for(assignment)
        )
        assert result.created
        accepted.append(assignment.pk)


def test_many_annotators_at_once_fill_every_pair_exactly_k_times(project, tmp_path, crowd):
    # given 20 items x 3 pairs = 60 pair tasks, K = 3, and 24 annotators, some skipping
    people = crowd(24)
    campaign = make_pairwise(project, tmp_path, people, items=20, overlap=3)
    assert Task.objects.filter(campaign=campaign).count() == 60
    accepted: list[int] = []
    # when they all compare at once until nothing is left
    run_together(
        [
            lambda p=p, i=i: compare_until_done(
                campaign, p, accepted, skip_every=4 if i % 3 == 0 else 0
            )
            for i, p in enumerate(people)
        ]
    )
    # then every pair was completed exactly K times, nothing lost or doubled
    assert_pair_invariants(campaign, accepted)
    assert set(Task.objects.filter(campaign=campaign).values_list("submitted", flat=True)) == {3}
    assert len(accepted) == 60 * 3
    assert HumanPreference.objects.count() == 60 * 3 * QUESTIONS


def test_a_sampled_pair_design_is_also_filled_exactly_k_times(project, tmp_path, crowd):
    people = crowd(10, prefix="s")
    campaign = make_pairwise(
        project, tmp_path, people, items=20, overlap=2, pair_design="sampled", pair_budget=25
    )
    accepted: list[int] = []
    run_together([lambda p=p: compare_until_done(campaign, p, accepted) for p in people])
    assert_pair_invariants(campaign, accepted)
    assert len(accepted) == 25 * 2


def test_the_same_pair_submitted_twice_at_once_is_recorded_once(project, tmp_path, crowd):
    people = crowd(10, prefix="d")
    campaign = make_pairwise(project, tmp_path, people, items=5, overlap=3)
    leases = [assignment_claim_next(campaign=campaign, annotator=p) for p in people]

    def submit(assignment, person, answers):
        return human_preference_submit(
            assignment_id=assignment.pk, annotator=person, preferences=answers
        ).created

    answers = {a.pk: answers_for(a) for a in leases}
    jobs = [
        lambda a=a, p=p: submit(a, p, answers[a.pk]) for a, p in zip(leases, people, strict=True)
    ]
    created = run_together(jobs + jobs)
    per_lease: Counter = Counter()
    for lease, was_created in zip(leases + leases, created, strict=True):
        per_lease[lease.pk] += was_created
    assert set(per_lease.values()) == {1}
    assert_pair_invariants(campaign, [a.pk for a in leases])


def test_lease_expiry_racing_late_pair_submissions_keeps_the_counts(project, tmp_path, crowd):
    # given 12 annotators holding every slot (6 pairs, K = 2) on leases that just lapsed
    late_people = crowd(12, prefix="late")
    fresh_people = crowd(12, prefix="fresh")
    campaign = make_pairwise(
        project,
        tmp_path,
        late_people + fresh_people,
        items=2,
        overlap=2,
    )
    leases = {p.pk: assignment_claim_next(campaign=campaign, annotator=p) for p in late_people}
    assert Task.objects.filter(campaign=campaign, assigned=2).count() == 6
    Assignment.objects.filter(pk__in=[a.pk for a in leases.values()]).update(
        expires_at=campaign.created_at
    )
    answers = {pk: answers_for(lease) for pk, lease in leases.items()}
    accepted: list[int] = []
    lost: list[int] = []

    def late_submit(person, delay):
        lease = leases[person.pk]
        time.sleep(delay)
        try:
            result = human_preference_submit(
                assignment_id=lease.pk, annotator=person, preferences=answers[person.pk]
            )
        except AssignmentError as exc:
            assert exc.code == "lease_lost", exc
            lost.append(lease.pk)
            return
        assert result.created and result.late
        accepted.append(lease.pk)

    def expire_repeatedly():
        return sum(assignments_expire_stale(campaign_id=campaign.pk) for _ in range(5))

    run_together(
        [
            lambda p=p, i=i: late_submit(p, random.uniform(0, 0.05) + 0.15 * (i % 4))
            for i, p in enumerate(late_people)
        ]
        + [expire_repeatedly, expire_repeatedly]
        + [lambda p=p: compare_until_done(campaign, p, accepted) for p in fresh_people]
    )
    late_ids = {a.pk for a in leases.values()}
    assert not set(accepted) & set(lost)
    assert (set(accepted) & late_ids) | set(lost) == late_ids
    statuses = dict(Assignment.objects.filter(pk__in=late_ids).values_list("pk", "status"))
    assert all(statuses[pk] == AssignmentStatus.EXPIRED for pk in lost)
    assert_pair_invariants(campaign, accepted)
    assert set(Task.objects.filter(campaign=campaign).values_list("submitted", flat=True)) == {2}
