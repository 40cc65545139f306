"""Claims, submissions, skips and lease expiry racing each other on real PostgreSQL.

Each test starts its threads together behind a barrier; every thread has its own database
connection (Django's are per thread) and closes it when done. The data is committed
(transaction=True), so the threads see it. After the race, `assert_invariants` checks what
annotation/locks.py promises:
- no normal task with assigned > K or submitted > K;
- the counters equal the real counts (assigned = active + submitted normal assignments,
  submitted = submitted ones);
- no (task, annotator) pair twice;
- every accepted submission has exactly one score per asked skill, and nothing else does;
- every completed task has exactly K scores per skill.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.db.models import Count, Exists, F, OuterRef, Q

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    HumanScore,
    Task,
    TaskKind,
)
from annotation.services.assignments import (
    AssignmentError,
    ScoreInput,
    assignment_claim_next,
    assignment_next,
    assignment_skip,
    assignments_expire_stale,
    human_score_submit,
    task_skills,
)
from tests.annotation.test_annotate_api import make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

SKILL_COUNT = 3  # every item of make_dataset asks three skills


def run_together(jobs: list[Callable[[], object]], *, timeout: float = 60) -> list[object]:
    """Run each job in its own thread, all released at once; return their results in order.
    An exception in any thread fails the test."""
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(index: int, job: Callable[[], object]) -> None:
        try:
            barrier.wait()
            results[index] = job()
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]
    return results


def scores_for(assignment) -> list[ScoreInput]:
    return [
        ScoreInput(s.skill_id, random.randint(1, 5)) for s in task_skills(assignment=assignment)
    ]


def make_campaign(project, tmp_path, people, *, items, overlap, lease_seconds=900):
    dataset = make_dataset(project, tmp_path, items=items)
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Race",
        overlap=overlap,
        annotators=people,
        lease_seconds=lease_seconds,
    )
    campaign_activate(campaign=campaign)
    return campaign


@pytest.fixture
def crowd(django_user_model):
    def make(n: int, prefix: str = "a"):
        return [
            django_user_model.objects.create_user(f"{prefix}{i:02d}", password="x")
            for i in range(n)
        ]

    return make


def assert_invariants(campaign, accepted: list[int]) -> None:
    """`accepted`: ids of the assignments whose submit call reported a new submission."""
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
    for task in tasks:
        counts = real.get(task.pk, {"active": 0, "submitted": 0})
        assert task.assigned <= task.overlap and task.submitted <= task.overlap, task
        assert task.assigned == counts["active"] + counts["submitted"], (task, counts)
        assert task.submitted == counts["submitted"], (task, counts)
    # nobody got the same response twice
    pairs = Counter(
        Assignment.objects.filter(normal, campaign=campaign).values_list("task_id", "annotator_id")
    )
    assert max(pairs.values(), default=1) == 1
    # accepted submissions have their scores, and only they do
    assert len(accepted) == len(set(accepted)), "a submission was reported twice"
    per_assignment = dict(
        HumanScore.objects.filter(campaign=campaign)
        .values("assignment_id")
        .annotate(n=Count("pk"))
        .values_list("assignment_id", "n")
    )
    assert per_assignment == dict.fromkeys(accepted, SKILL_COUNT)
    submitted = set(
        Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.SUBMITTED).values_list(
            "pk", flat=True
        )
    )
    assert submitted == set(accepted)
    # a complete task has exactly K scores per skill
    complete = {t.response_id for t in tasks if t.submitted == t.overlap}
    per_skill = (
        HumanScore.objects.filter(campaign=campaign, response_id__in=complete)
        .filter(assignment__kind=AssignmentKind.NORMAL)
        .values("response_id", "skill_id")
        .annotate(n=Count("pk"))
    )
    assert len(per_skill) == len(complete) * SKILL_COUNT
    assert {row["n"] for row in per_skill} <= {campaign.overlap}


def annotate_until_done(campaign, person, accepted: list[int], *, skip_every: int = 0) -> int:
    """An annotator's loop: next, then submit (or skip every n-th), until no task that this
    annotator has not had is still short of K. An empty claim while such a task exists is
    transient (its row is locked by another claim or submit, or its slot is held by a lease
    that may yet be skipped): wait a moment and ask again, as a person would."""
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
        result = human_score_submit(
            assignment_id=assignment.pk, annotator=person, scores=scores_for(assignment)
        )
        assert result.created
        accepted.append(assignment.pk)


def _work_left_for(campaign, person) -> bool:
    had = Assignment.objects.filter(
        task=OuterRef("pk"), annotator=person, kind=AssignmentKind.NORMAL
    )
    return (
        Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL, submitted__lt=F("overlap"))
        .filter(~Exists(had))
        .exists()
    )


def test_many_annotators_at_once_fill_every_task_exactly_k_times(project, tmp_path, crowd):
    # given 60 responses, K = 3 and 24 annotators, a few of whom skip now and then
    people = crowd(24)
    campaign = make_campaign(project, tmp_path, people, items=30, overlap=3)
    accepted: list[int] = []
    # when they all work at once until nothing is left
    run_together(
        [
            lambda p=p, i=i: annotate_until_done(
                campaign, p, accepted, skip_every=5 if i % 3 == 0 else 0
            )
            for i, p in enumerate(people)
        ]
    )
    # then every task was completed exactly K times, with nothing lost or doubled
    assert_invariants(campaign, accepted)
    assert set(Task.objects.filter(campaign=campaign).values_list("submitted", flat=True)) == {3}
    assert len(accepted) == 60 * 3
    assert HumanScore.objects.count() == 60 * 3 * SKILL_COUNT


def test_the_same_assignment_submitted_twice_at_once_is_recorded_once(project, tmp_path, crowd):
    # given 10 annotators with one lease each
    people = crowd(10)
    campaign = make_campaign(project, tmp_path, people, items=10, overlap=3)
    leases = [assignment_claim_next(campaign=campaign, annotator=p) for p in people]

    def submit(assignment, person):
        return human_score_submit(
            assignment_id=assignment.pk, annotator=person, scores=scores_for(assignment)
        ).created

    # when each lease is submitted from two threads at the same moment
    jobs = [lambda a=a, p=p: submit(a, p) for a, p in zip(leases, people, strict=True)]
    created = run_together(jobs + jobs)
    # then exactly one of each pair created the scores
    per_lease = Counter()
    for lease, was_created in zip(leases + leases, created, strict=True):
        per_lease[lease.pk] += was_created
    assert set(per_lease.values()) == {1}
    assert_invariants(campaign, [a.pk for a in leases])


def test_lease_expiry_racing_late_submissions_keeps_the_counts(project, tmp_path, crowd):
    # given 12 annotators hold leases that have just lapsed (K = 2, 12 responses: all slots)
    late_people = crowd(12, prefix="late")
    fresh_people = crowd(12, prefix="fresh")
    campaign = make_campaign(project, tmp_path, late_people + fresh_people, items=6, overlap=2)
    leases = {p.pk: assignment_claim_next(campaign=campaign, annotator=p) for p in late_people}
    assert Task.objects.filter(campaign=campaign, assigned=2).count() == 6
    Assignment.objects.filter(pk__in=[a.pk for a in leases.values()]).update(
        expires_at=campaign.created_at
    )
    accepted: list[int] = []
    lost: list[int] = []

    def late_submit(person, delay):
        lease = leases[person.pk]
        # Spread over the sweep and the fresh claims: before expiry, after expiry with the
        # slot still free, or after someone else took it (fresh claims start ~0.2 s in).
        time.sleep(delay)
        try:
            result = human_score_submit(
                assignment_id=lease.pk, annotator=person, scores=scores_for(lease)
            )
        except AssignmentError as exc:
            assert exc.code == "lease_lost", exc
            lost.append(lease.pk)
            return
        assert result.created and result.late
        accepted.append(lease.pk)

    def expire_repeatedly():
        return sum(assignments_expire_stale(campaign_id=campaign.pk) for _ in range(5))

    # when the late submissions, two expiry sweeps and 12 fresh annotators all run at once
    run_together(
        [
            lambda p=p, i=i: late_submit(p, random.uniform(0, 0.05) + 0.15 * (i % 4))
            for i, p in enumerate(late_people)
        ]
        + [expire_repeatedly, expire_repeatedly]
        + [lambda p=p: annotate_until_done(campaign, p, accepted) for p in fresh_people]
    )
    # then each late submission was either accepted or refused, never both or lost
    late_ids = {a.pk for a in leases.values()}
    assert not set(accepted) & set(lost)
    assert (set(accepted) & late_ids) | set(lost) == late_ids
    statuses = dict(Assignment.objects.filter(pk__in=late_ids).values_list("pk", "status"))
    assert all(statuses[pk] == AssignmentStatus.EXPIRED for pk in lost)
    assert_invariants(campaign, accepted)
    # and the fresh annotators finished whatever the late ones could not keep
    assert set(Task.objects.filter(campaign=campaign).values_list("submitted", flat=True)) == {2}


def test_one_annotator_claiming_from_several_tabs_at_once_gets_one_lease(project, tmp_path, crowd):
    # given one annotator with 8 tabs open
    (person,) = crowd(1, prefix="tabs")
    campaign = make_campaign(project, tmp_path, [person], items=4, overlap=1)
    # when every tab asks for a task at the same instant
    results = run_together([lambda: assignment_claim_next(campaign=campaign, annotator=person)] * 8)
    # then they all resume the same lease: one slot taken, no error
    assert len({a.pk for a in results}) == 1
    assert Assignment.objects.filter(campaign=campaign, annotator=person).count() == 1
    assert sum(Task.objects.filter(campaign=campaign).values_list("assigned", flat=True)) == 1


class RowLocker:
    """Another session holding row locks in an open transaction, as a claim or a submit in
    flight holds its task row for the length of its statement. `commit_once_someone_waits`
    ends the transaction as soon as another session waits for one of those rows (or after
    `patience` seconds, when nobody did) and tells which it was."""

    def __init__(self, sql: str, params: list[Any]) -> None:
        self.conn = connection.get_new_connection(connection.get_connection_params())
        self.cursor = self.conn.cursor()
        self.cursor.execute(sql, params)  # not autocommit: the transaction stays open

    def commit_once_someone_waits(self, patience: float = 2.0) -> bool:
        # pg_locks is read live (pg_stat_activity would be a snapshot cached per transaction)
        blocking_me = (
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND %s = ANY(pg_blocking_pids(pid))"
        )
        deadline = time.monotonic() + patience
        waited = False
        while not waited and time.monotonic() < deadline:
            self.cursor.execute(blocking_me, [self.conn.info.backend_pid])
            waited = self.cursor.fetchone()[0] > 0
            time.sleep(0.005)
        self.conn.commit()
        self.conn.close()
        return waited


def _lock_tasks(campaign, statement: str) -> RowLocker:
    return RowLocker(statement.format(table=Task._meta.db_table), [campaign.pk])


def test_a_claim_waits_for_open_tasks_that_other_requests_hold_locked(project, tmp_path, crowd):
    # given an annotator whose open tasks (two, K = 1) are all locked at this instant by
    # other requests, as claims and submits in flight hold their task rows
    (person,) = crowd(1, prefix="patient")
    campaign = make_campaign(project, tmp_path, [person], items=1, overlap=1)
    assert Task.objects.filter(campaign=campaign).count() == 2
    locker = _lock_tasks(campaign, "SELECT id FROM {table} WHERE campaign_id = %s FOR UPDATE")
    # when the annotator claims, the locks going once the claim waits for them
    claimed, waited = run_together(
        [
            lambda: assignment_claim_next(campaign=campaign, annotator=person),
            locker.commit_once_someone_waits,
        ]
    )
    # then the claim waited and got a task: skipping locked rows may not end in "no task"
    assert claimed is not None, "a claim answered no task while both tasks were open"
    assert waited
    assert_invariants(campaign, [])


def test_a_claim_that_waited_for_locked_tasks_respects_what_their_holders_wrote(
    project, tmp_path, crowd
):
    # given the open tasks are locked by requests that fill their last slots
    (person,) = crowd(1, prefix="late")
    campaign = make_campaign(project, tmp_path, [person], items=1, overlap=1)
    locker = _lock_tasks(campaign, "UPDATE {table} SET assigned = overlap WHERE campaign_id = %s")
    # when the annotator claims meanwhile
    claimed, _ = run_together(
        [
            lambda: assignment_claim_next(campaign=campaign, annotator=person),
            locker.commit_once_someone_waits,
        ]
    )
    # then there is no task for them, and no slot was taken beyond K
    assert claimed is None
    assert not Assignment.objects.filter(campaign=campaign).exists()
    assert set(Task.objects.filter(campaign=campaign).values_list("assigned", flat=True)) == {1}


def test_with_k_equal_to_the_crowd_nobody_is_told_no_task_before_doing_every_task(
    project, tmp_path, crowd
):
    # given 8 annotators and K = 8: every task stays open to each annotator until they had it
    people = crowd(8, prefix="all")
    campaign = make_campaign(project, tmp_path, people, items=6, overlap=8)
    tasks = Task.objects.filter(campaign=campaign).count()
    accepted: list[int] = []

    def annotate_until_told_no_task(person) -> int:
        done = 0
        while (lease := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            result = human_score_submit(
                assignment_id=lease.pk, annotator=person, scores=scores_for(lease)
            )
            assert result.created
            accepted.append(lease.pk)
            done += 1
        return done

    # when they all work at once until a claim answers "no task"
    done = run_together([lambda p=p: annotate_until_told_no_task(p) for p in people])
    # then nobody was told so before they had done every task
    assert done == [tasks] * len(people)
    assert_invariants(campaign, accepted)
