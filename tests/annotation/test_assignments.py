"""The annotator workflow services: claim, submit, skip, expire, edit (on PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    HumanScore,
    HumanScoreRevision,
    Task,
    UploadSource,
    UploadStatus,
)
from annotation.services import assignments
from annotation.services.assignments import (
    AssignmentError,
    ScoreInput,
    assignment_claim_next,
    assignment_next,
    assignment_skip,
    assignments_expire_stale,
    human_score_edit,
    human_score_submit,
    task_skills,
)

SKILLS = ["Factuality", "Comprehension", "Readability"]


def make_dataset(project, tmp_path, items=3, models=("m1", "m2")):
    lines = []
    for i in range(items):
        responses = ", ".join(f'{{"model": "{m}", "text": "{m} says {i}"}}' for m in models)
        lines.append(
            f'{{"id": "i{i}", "instruction": "Question {i}", "skills": {SKILLS!r}, '
            f'"domains": ["History"], "difficulty": 2, "responses": [{responses}]}}'.replace(
                "'", '"'
            )
        )
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    upload = dataset_upload_create(
        project=project,
        dataset_name="D",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


@pytest.fixture
def campaign(project, tmp_path, annotator, django_user_model):
    dataset = make_dataset(project, tmp_path)
    bob = django_user_model.objects.create_user("bob", password="pw-bob")
    carol = django_user_model.objects.create_user("carol", password="pw-carol")
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="C",
        overlap=2,
        annotators=[annotator, bob, carol],
        lease_seconds=60,
    )
    assert campaign_activate(campaign=campaign) == 6
    return campaign


def full_scores(assignment, value=4):
    return [ScoreInput(s.skill_id, value) for s in task_skills(assignment=assignment)]


def users(django_user_model):
    return {u.username: u for u in django_user_model.objects.all()}


def test_activation_creates_one_task_per_response_and_pins_rubrics(campaign):
    assert Task.objects.filter(campaign=campaign).count() == 6
    assert campaign.rubrics.count() == 3
    assert campaign_activate(campaign=campaign) == 0  # idempotent


def test_a_claim_resumes_the_open_lease(campaign, annotator):
    first = assignment_claim_next(campaign=campaign, annotator=annotator)
    again = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert first.pk == again.pk
    assert Task.objects.get(pk=first.task_id).assigned == 1


def test_a_lapsed_lease_not_yet_swept_is_expired_by_the_next_claim(campaign, annotator):
    # given alice's lease lapsed and no sweep has run since (claim called directly)
    first = assignment_claim_next(campaign=campaign, annotator=annotator)
    with time_machine.travel(timezone.now() + timedelta(seconds=120)):
        # when she asks again
        second = assignment_claim_next(campaign=campaign, annotator=annotator)
    # then the old lease is expired with its slot freed, and she holds one new lease
    old = Assignment.objects.get(pk=first.pk)
    assert old.status == AssignmentStatus.EXPIRED
    assert Task.objects.get(pk=first.task_id).assigned == 0
    assert second.pk != first.pk and second.task_id != first.task_id
    active = Assignment.objects.filter(annotator=annotator, status=AssignmentStatus.ACTIVE)
    assert list(active.values_list("pk", flat=True)) == [second.pk]


def test_the_database_refuses_a_second_active_lease(campaign, annotator):
    # the invariant behind "several tabs share one lease" is a constraint, not only code
    first = assignment_claim_next(campaign=campaign, annotator=annotator)
    other = Task.objects.filter(campaign=campaign).exclude(pk=first.task_id).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(
            task=other, campaign=campaign, annotator=annotator, expires_at=first.expires_at
        )


@pytest.mark.postgres_only
def test_a_lease_lost_between_the_read_and_the_write_of_a_submit_records_nothing(
    campaign, annotator, monkeypatch
):
    # given the one-statement submit has read a live lease, and then another tab skips it
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    real = assignments.fetch_one
    calls = []

    def read_then_skip(sql, params=()):
        row = real(sql, params)
        if not calls:
            calls.append(sql)
            assignment_skip(assignment_id=a.pk, annotator=annotator, reason="other tab")
        return row

    monkeypatch.setattr(assignments, "fetch_one", read_then_skip)
    # when the submit goes on, then it is refused as skipped and nothing is written
    with pytest.raises(AssignmentError) as err:
        human_score_submit(assignment_id=a.pk, annotator=annotator, scores=full_scores(a))
    assert err.value.code == "skipped"
    assert not HumanScore.objects.exists()
    task = Task.objects.get(pk=a.task_id)
    assert (task.assigned, task.submitted) == (0, 0)


def test_partially_covered_tasks_are_finished_first(campaign, annotator, django_user_model):
    bob = users(django_user_model)["bob"]
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    b = assignment_claim_next(campaign=campaign, annotator=bob)
    assert a.task_id == b.task_id


def test_submit_records_scores_with_the_pinned_rubric_and_is_idempotent(campaign, annotator):
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    scores = full_scores(a)
    scores[1] = ScoreInput(scores[1].skill_id, None, "not applicable here", 1500)
    first = human_score_submit(assignment_id=a.pk, annotator=annotator, scores=scores)
    second = human_score_submit(assignment_id=a.pk, annotator=annotator, scores=scores)
    assert first.created and not second.created
    rows = HumanScore.objects.filter(assignment=a).order_by("skill__order")
    assert rows.count() == 3
    assert sum(r.is_na for r in rows) == 1
    pins = dict(campaign.rubrics.values_list("skill_id", "rubric_id"))
    assert all(r.rubric_id == pins[r.skill_id] for r in rows)
    task = Task.objects.get(pk=a.task_id)
    assert (task.assigned, task.submitted) == (1, 1)


def test_a_read_taken_before_the_assignment_changed_is_read_again(campaign, annotator):
    # the scoring page hands the submission the assignment as it read it; when the
    # assignment is skipped (another tab) before the write, the gated write does nothing
    # and the next round reads it again
    from annotation.annotate.selectors import assignment_read_for_annotator
    from annotation.services.assignments import submit_read_of_assignment

    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    read = assignment_read_for_annotator(user=annotator, assignment_id=a.pk)
    first_read = submit_read_of_assignment(
        read.assignment, annotator, item_id=read.item_id, item_skills=read.item_skills
    )
    assignment_skip(assignment_id=a.pk, annotator=annotator, reason="other tab")
    with pytest.raises(AssignmentError) as err:
        human_score_submit(
            assignment_id=a.pk, annotator=annotator, scores=full_scores(a), first_read=first_read
        )
    assert err.value.code == "skipped" and not HumanScore.objects.exists()
    # and a read taken just now is the submission's own read
    b = assignment_claim_next(campaign=campaign, annotator=annotator)
    read = assignment_read_for_annotator(user=annotator, assignment_id=b.pk)
    result = human_score_submit(
        assignment_id=b.pk,
        annotator=annotator,
        scores=full_scores(b),
        first_read=submit_read_of_assignment(
            read.assignment, annotator, item_id=read.item_id, item_skills=read.item_skills
        ),
    )
    assert result.created and HumanScore.objects.filter(assignment=b).count() == 3


def test_an_incomplete_or_invalid_submission_changes_nothing(campaign, annotator):
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    scores = full_scores(a)
    with pytest.raises(AssignmentError, match="please score"):
        human_score_submit(assignment_id=a.pk, annotator=annotator, scores=scores[:2])
    with pytest.raises(AssignmentError, match="1 to 5"):
        bad = [ScoreInput(s.skill_id, 7) for s in task_skills(assignment=a)]
        human_score_submit(assignment_id=a.pk, annotator=annotator, scores=bad)
    assert not HumanScore.objects.exists()
    assert Assignment.objects.get(pk=a.pk).status == AssignmentStatus.ACTIVE


def test_another_annotators_assignment_is_not_found(campaign, annotator, django_user_model):
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    with pytest.raises(AssignmentError) as err:
        human_score_submit(
            assignment_id=a.pk,
            annotator=users(django_user_model)["bob"],
            scores=full_scores(a),
        )
    assert err.value.code == "not_found"


def test_expired_leases_free_their_slot_and_late_submissions_follow_the_rules(
    campaign, annotator, django_user_model
):
    u = users(django_user_model)
    # given alice's lease on a task lapses
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    with time_machine.travel(timezone.now() + timedelta(seconds=120)):
        assert assignments_expire_stale(campaign_id=campaign.pk) == 1
        assert Task.objects.get(pk=a.task_id).assigned == 0
        # then a late submission is accepted while the task still has a free slot
        late = human_score_submit(assignment_id=a.pk, annotator=annotator, scores=full_scores(a))
        assert late.created and late.late
        assert Task.objects.get(pk=a.task_id).submitted == 1
        # and bob's lapsed lease on a task that others then complete is refused
        b = assignment_claim_next(campaign=campaign, annotator=u["bob"])
    with time_machine.travel(timezone.now() + timedelta(seconds=400)):
        assignments_expire_stale(campaign_id=campaign.pk)
        c1 = assignment_next(campaign=campaign, annotator=u["carol"])
        assert c1.task_id == b.task_id
        human_score_submit(assignment_id=c1.pk, annotator=u["carol"], scores=full_scores(c1))
        c2 = assignment_next(campaign=campaign, annotator=annotator)
        if c2.task_id == b.task_id:
            human_score_submit(assignment_id=c2.pk, annotator=annotator, scores=full_scores(c2))
            with pytest.raises(AssignmentError) as err:
                human_score_submit(assignment_id=b.pk, annotator=u["bob"], scores=full_scores(b))
            assert err.value.code == "lease_lost"
    for task in Task.objects.all():
        assert task.submitted <= task.overlap


def test_skip_frees_the_slot_and_the_task_is_not_offered_again(campaign, annotator):
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    with pytest.raises(AssignmentError, match="why"):
        assignment_skip(assignment_id=a.pk, annotator=annotator, reason=" ")
    assignment_skip(assignment_id=a.pk, annotator=annotator, reason="broken text", flag=True)
    assert Task.objects.get(pk=a.task_id).assigned == 0
    nxt = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert nxt.task_id != a.task_id


def test_each_task_gets_exactly_k_annotators_and_nobody_twice(campaign, django_user_model):
    people = list(users(django_user_model).values())
    seen = set()
    for _ in range(10):
        for person in people:
            a = assignment_claim_next(campaign=campaign, annotator=person)
            if a is None:
                continue
            assert (a.task_id, person.pk) not in seen
            seen.add((a.task_id, person.pk))
            human_score_submit(assignment_id=a.pk, annotator=person, scores=full_scores(a))
    assert all(t.submitted == 2 for t in Task.objects.filter(campaign=campaign))
    assert HumanScore.objects.count() == 6 * 2 * 3


def test_a_quota_stops_claims(campaign, annotator):
    type(campaign).objects.filter(pk=campaign.pk).update(quota_per_annotator=1)
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    human_score_submit(assignment_id=a.pk, annotator=annotator, scores=full_scores(a))
    assert assignment_claim_next(campaign=campaign, annotator=annotator) is None


def test_outsiders_get_nothing(campaign, outsider):
    assert assignment_claim_next(campaign=campaign, annotator=outsider) is None


def test_score_edits_keep_the_history(campaign, annotator):
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    human_score_submit(assignment_id=a.pk, annotator=annotator, scores=full_scores(a, 4))
    row = HumanScore.objects.filter(assignment=a).first()
    human_score_edit(score_id=row.pk, editor=annotator, score=2, rationale="second look")
    revision = HumanScoreRevision.objects.get(score=row)
    assert revision.before["score"] == 4 and revision.after["score"] == 2
    assert HumanScore.objects.get(pk=row.pk).score == 2
