"""Campaign page reads: progress, ETA, throughput and quality control on campaigns built
with the real workflow services (claim, submit, skip), compared with numbers worked out
by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection

from annotation.campaigns import selectors as cs
from annotation.campaigns.services import campaign_activate, campaign_create, gold_task_set
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    AssignmentKind,
    Campaign,
    ProjectRole,
    Response,
    Skill,
    TaskKind,
    UploadSource,
    UploadStatus,
)
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    assignment_skip,
    human_score_submit,
    task_skills,
)
from annotation.services.projects import membership_set

SKILLS = ["Factuality", "Comprehension", "Readability"]
T0 = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)


# --- helpers shared with test_campaign_views.py ---------------------------------------------------


def make_dataset(project, tmp_path, *, items=3, models=("m1", "m2"), name="D"):
    """A dataset of `items` items × `models` responses, each item on SKILLS, via the import."""
    lines = []
    for i in range(items):
        row = {
            "id": f"i{i}",
            "instruction": f"Question {i}",
            "skills": SKILLS,
            "domains": ["History" if i % 2 == 0 else "Math"],
            "difficulty": 2,
            "responses": [{"model": m, "text": f"{m} says {i}"} for m in models],
        }
        lines.append(json.dumps(row))
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    upload = dataset_upload_create(
        project=project,
        dataset_name=name,
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


def make_annotator(django_user_model, project, username):
    user = django_user_model.objects.create_user(username, password="pw-" + username)
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    return user


def skill_ids():
    return {s.name: s.pk for s in Skill.objects.filter(name__in=SKILLS, project__isnull=True)}


def submit(campaign, user, values=None, *, default=4, active_ms=None):
    """Claim the next task and submit it; `values` maps skill name -> score (None = N/A)."""
    a = assignment_claim_next(campaign=campaign, annotator=user)
    assert a is not None, f"nothing to claim for {user}"
    values = values or {}
    scores = [
        ScoreInput(s.skill_id, values.get(s.name, default)) for s in task_skills(assignment=a)
    ]
    human_score_submit(assignment_id=a.pk, annotator=user, scores=scores, active_ms=active_ms)
    return a


def claim_as(campaign, user, kind):
    """Claim so the workflow serves `kind` next ("normal", "gold" or "repeat").

    The claim serves gold every round(1/gold_rate)-th task and a repeat every
    round(1/repeat_rate)-th (counting the annotator's assignments); setting the rate to
    1/(served+1) makes exactly this claim that turn.
    """
    served = campaign.assignments.filter(annotator=user).count()
    rate = 1 / (served + 1) if served else 0.0
    Campaign.objects.filter(pk=campaign.pk).update(
        gold_rate=rate if kind == "gold" else 0.0,
        repeat_rate=rate if kind == "repeat" else 0.0,
    )
    a = assignment_claim_next(campaign=campaign, annotator=user)
    assert a is not None
    return a


def submit_claimed(a, user, values, default=4):
    scores = [
        ScoreInput(s.skill_id, values.get(s.name, default)) for s in task_skills(assignment=a)
    ]
    human_score_submit(assignment_id=a.pk, annotator=user, scores=scores)


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def people(project, annotator, django_user_model):
    return {"alice": annotator, "bob": make_annotator(django_user_model, project, "bob")}


@pytest.fixture
def campaign(project, tmp_path, people):
    dataset = make_dataset(project, tmp_path)
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=2, annotators=people.values()
    )
    assert campaign_activate(campaign=campaign) == 6
    return campaign


# --- progress ---------------------------------------------------------------------------------


def test_progress_per_skill_and_overall_and_the_eta_follow_the_submissions(campaign, people):
    alice, bob = people["alice"], people["bob"]
    # given 2 submissions two hours ago and 3 in the last hour (6 tasks × K=2 = 12 slots)
    with time_machine.travel(T0 - timedelta(hours=2), tick=False):
        submit(campaign, alice, active_ms=1000)
        submit(campaign, alice, active_ms=8000)
    with time_machine.travel(T0 - timedelta(minutes=30), tick=False):
        submit(campaign, alice, active_ms=3000)
        submit(campaign, bob, active_ms=2000)
        submit(campaign, bob, active_ms=5000)
        skipped = assignment_claim_next(campaign=campaign, annotator=alice)
        assignment_skip(assignment_id=skipped.pk, annotator=alice, reason="too long")
        held = assignment_claim_next(campaign=campaign, annotator=bob)
    # when
    pins = cs.campaign_rubric_pins(campaign=campaign)
    skills = cs.campaign_skill_progress(campaign=campaign, pins=pins)
    overall = cs.campaign_progress(campaign=campaign, now=T0)
    people_rows = {a.username: a for a in cs.campaign_annotator_progress(campaign=campaign, now=T0)}
    leases = cs.campaign_lease_list(campaign=campaign, now=T0)
    # then every skill has 5 of 12 scores
    assert sorted(s.name for s in skills) == sorted(SKILLS)
    assert {(s.collected, s.needed) for s in skills} == {(5, 12)}
    # overall 5/12 = 42 %, 3 slots in the last hour, 7 open: ETA 7/3 h = 8400 s
    assert (overall.slots_done, overall.slots_needed, overall.percent) == (5, 12, 42)
    assert overall.recent_per_hour == 3
    assert overall.eta_seconds == pytest.approx(8400)
    assert overall.eta_at == T0 + timedelta(seconds=8400)
    # alice: 3 done, 1 in the last hour, median of 1000/8000/3000 = 3000, 1 skip
    a = people_rows["alice"]
    assert (a.done, a.per_hour, a.median_active_ms, a.skips, a.flags) == (3, 1, 3000, 1, 0)
    # bob: 2 done, both recent, median of 2000 and 5000 interpolated = 3500, holds a lease
    b = people_rows["bob"]
    assert (b.done, b.per_hour, b.median_active_ms, b.open_leases) == (2, 2, 3500, 1)
    assert [(lease.username, lease.task_id) for lease in leases] == [("bob", held.task_id)]


def test_the_median_falls_back_to_python_where_there_is_no_percentile_cont(
    campaign, people, monkeypatch
):
    for ms in (1000, 8000, 3000, 4000):
        submit(campaign, people["alice"], active_ms=ms)
    in_sql = cs.campaign_annotator_progress(campaign=campaign, now=T0)
    monkeypatch.setattr(connection, "vendor", "sqlite")
    in_python = cs.campaign_annotator_progress(campaign=campaign, now=T0)
    assert in_sql == in_python
    assert in_sql[0].median_active_ms == 3500


def test_a_campaign_with_no_recent_submissions_has_no_eta_and_a_complete_one_is_done(
    campaign, people
):
    with time_machine.travel(T0 - timedelta(hours=3), tick=False):
        submit(campaign, people["alice"])
    assert cs.campaign_progress(campaign=campaign, now=T0).eta_seconds is None
    with time_machine.travel(T0 - timedelta(minutes=5), tick=False):
        for _ in range(5):
            submit(campaign, people["alice"])
        for _ in range(6):
            submit(campaign, people["bob"])
    done = cs.campaign_progress(campaign=campaign, now=T0)
    assert (done.percent, done.slots_open, done.eta_seconds) == (100, 0, 0.0)
    assert done.tasks_complete == done.tasks == 6


def test_fixed_skill_campaigns_need_every_fixed_skill_on_every_task(project, tmp_path, people):
    dataset = make_dataset(project, tmp_path, items=2, models=("m1",))
    fixed = list(Skill.objects.filter(name__in=["Conciseness", "Harmlessness"]))
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="F",
        overlap=3,
        skill_mode="fixed",
        fixed_skills=fixed,
        annotators=people.values(),
    )
    campaign_activate(campaign=campaign)
    submit(campaign, people["alice"])
    pins = cs.campaign_rubric_pins(campaign=campaign)
    progress = cs.campaign_skill_progress(campaign=campaign, pins=pins)
    assert {(p.name, p.collected, p.needed) for p in progress} == {
        ("Conciseness", 1, 6),
        ("Harmlessness", 1, 6),
    }


def test_the_project_list_carries_each_campaigns_slot_progress(campaign, people, project):
    submit(campaign, people["alice"])
    [row] = cs.campaign_list_for_project(project=project)
    assert (row.name, row.tasks, row.slots_done, row.slots_needed, row.percent) == (
        "C",
        6,
        1,
        12,
        8,
    )


# --- quality control --------------------------------------------------------------------------


@pytest.fixture
def qc_campaign(project, tmp_path, people):
    """5 items × 2 models, K=2; three m1 responses become one gold and two attention tasks
    (and so stop being normal tasks), leaving 7 normal tasks."""
    dataset = make_dataset(project, tmp_path, items=5)
    campaign = campaign_create(
        project=project, dataset=dataset, name="QC", overlap=2, annotators=people.values()
    )
    campaign_activate(campaign=campaign)
    ids = skill_ids()

    def response(external_id):
        return Response.objects.get(
            item__dataset=dataset, item__external_id=external_id, model_name="m1"
        )

    gold_task_set(
        campaign=campaign,
        response=response("i0"),
        scores={ids["Factuality"]: 4, ids["Comprehension"]: None},
        tolerance=1,
    )
    gold_task_set(
        campaign=campaign,
        response=response("i1"),
        scores={ids["Readability"]: 1},
        kind=TaskKind.ATTENTION,
    )
    gold_task_set(
        campaign=campaign,
        response=response("i2"),
        scores={ids["Factuality"]: 5, ids["Readability"]: 5},
        kind=TaskKind.ATTENTION,
    )
    return campaign


def test_gold_accuracy_attention_checks_and_test_retest_match_a_hand_count(qc_campaign, people):
    alice, bob = people["alice"], people["bob"]
    campaign = qc_campaign
    # given alice's first normal task, then five more (a repeat needs five in between)
    first = claim_as(campaign, alice, "normal")
    submit_claimed(first, alice, {"Factuality": 3, "Comprehension": 4, "Readability": None})
    for _ in range(5):
        submit_claimed(claim_as(campaign, alice, "normal"), alice, {})
    # alice on gold G1 (F=4 ±1, C=N/A): F 5 within 1, C N/A matches, R has no known score
    g1 = claim_as(campaign, alice, "gold")
    submit_claimed(g1, alice, {"Factuality": 5, "Comprehension": None, "Readability": 2})
    # attention A1 (R=1): passed
    submit_claimed(claim_as(campaign, alice, "gold"), alice, {"Readability": 1})
    # attention A2 (F=5, R=5): F right, R wrong, so failed
    submit_claimed(claim_as(campaign, alice, "gold"), alice, {"Factuality": 5, "Readability": 4})
    # the hidden repeat of her first task: F same, C 4 -> 2, R N/A again
    repeat = claim_as(campaign, alice, "repeat")
    assert repeat.kind == AssignmentKind.REPEAT and repeat.task_id == first.task_id
    submit_claimed(repeat, alice, {"Factuality": 3, "Comprehension": 2, "Readability": None})
    # bob: G1 wrong twice (F 2 is 2 away; C 3 where N/A is known), A1 N/A where 1 is known
    submit_claimed(claim_as(campaign, bob, "normal"), bob, {})
    submit_claimed(claim_as(campaign, bob, "gold"), bob, {"Factuality": 2, "Comprehension": 3})
    submit_claimed(claim_as(campaign, bob, "gold"), bob, {"Readability": None})
    # bob flags a broken response
    flagged = claim_as(campaign, bob, "normal")
    assignment_skip(assignment_id=flagged.pk, annotator=bob, reason="text is cut off", flag=True)
    # when
    quality = {q.username: q for q in cs.campaign_quality(campaign=campaign)}
    flags = cs.campaign_flagged_list(campaign=campaign)
    # then alice: gold 2/2 + 1/1 + 1/2 = 4/5; attention 1 passed, 1 failed
    a = quality["alice"]
    assert (a.gold_correct, a.gold_scores, a.gold_accuracy) == (4, 5, 0.8)
    assert (a.attention_passed, a.attention_failed) == (1, 1)
    # test-retest: 3 pairs, 2 exact (F, and N/A = N/A), MAD over F and C = (0 + 2) / 2
    assert (a.retest_pairs, a.retest_exact, a.retest_mad) == (3, 2, 1.0)
    assert a.retest_agreement == pytest.approx(2 / 3)
    # bob: 0 of 3, attention 0 passed 1 failed, no repeats
    b = quality["bob"]
    assert (b.gold_correct, b.gold_scores, b.gold_accuracy) == (0, 3, 0.0)
    assert (b.attention_passed, b.attention_failed) == (0, 1)
    assert (b.retest_pairs, b.retest_agreement, b.retest_mad) == (0, None, None)
    # and the flagged item with its reason
    assert [(f.username, f.task_id, f.reason) for f in flags] == [
        ("bob", flagged.task_id, "text is cut off")
    ]
    # gold and repeats never fill slots: 6 + 1 normal submissions
    assert cs.campaign_progress(campaign=campaign, now=T0).slots_done == 7


def test_the_gold_task_list_shows_known_scores_and_how_often_each_was_served(qc_campaign, people):
    submit_claimed(claim_as(qc_campaign, people["alice"], "normal"), people["alice"], {})
    submit_claimed(claim_as(qc_campaign, people["alice"], "gold"), people["alice"], {})
    rows = cs.campaign_gold_task_list(campaign=qc_campaign)
    assert [(r.kind, r.external_id, r.served, r.submitted) for r in rows] == [
        ("gold", "i0", 1, 1),
        ("attention", "i1", 0, 0),
        ("attention", "i2", 0, 0),
    ]
    assert rows[0].known == [("Factuality", "4"), ("Comprehension", "N/A")] or rows[0].known == [
        ("Comprehension", "N/A"),
        ("Factuality", "4"),
    ]
    assert rows[0].tolerance == 1
