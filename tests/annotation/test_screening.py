"""Screening: training, then a qualification test, before any real task (annotation/screening/).

Runs on PostgreSQL and, in the suite's sqlite group (scripts/test_suite.py), on SQLite too (the
claim gate is in both hot-path backends)."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.annotate.selectors import (
    NO_TASK_MESSAGES,
    campaign_list_for_annotator,
    gold_feedback_for_assignment,
    no_task_reason,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    HumanScore,
    ProjectRole,
    QualificationRule,
    Response,
    Screening,
    ScreeningPhase,
    Task,
    TaskKind,
)
from annotation.screening.selectors import screening_progress
from annotation.screening.services import (
    qualification_decide,
    score_agrees,
    screening_advance,
    screening_settings_update,
)
from annotation.screening.setup import screening_task_set
from annotation.selectors import human_score_export_rows, human_score_rows
from annotation.services.assignments import (
    AssignmentError,
    ScoreInput,
    assignment_claim_next,
    assignment_skip,
    assignments_expire_stale,
    human_score_submit,
    task_skills,
)
from annotation.services.projects import membership_set
from tests.annotation import test_annotate_views as annotate_view_tests
from tests.annotation.test_annotate_views import HX, build_campaign, build_dataset, score_post
from tests.clients import token_client

pytestmark = pytest.mark.django_db

BASE = "/api/v1/annotation"
EXPLANATION = "The response names the wrong **year**, so factuality is low."
# q0, q1: training; q2, q3: qualification; q4, q5: real tasks
TRAINING = ("q0", "q1")
QUALIFICATION = ("q2", "q3")
# known scores of every screening task: Factuality 2, Comprehension 4
KNOWN = {"Factuality": 2, "Comprehension": 4}


def _response(campaign: Campaign, item: str) -> Response:
    return Response.objects.get(item__dataset=campaign.dataset, item__external_id=item)


def _skill_ids(campaign: Campaign) -> dict[str, int]:
    task = Task.objects.filter(campaign=campaign).first()
    assert task is not None
    assignment = Assignment(task=task, campaign=campaign)
    return {s.name: s.skill_id for s in task_skills(assignment=assignment)}


def make_screening_campaign(
    project,
    tmp_path,
    annotators,
    *,
    rule=QualificationRule.EXACT,
    pass_mark=0.8,
    qualification=QUALIFICATION,
    known=None,
    **options,
) -> Campaign:
    dataset = build_dataset(project, tmp_path, texts=[f"text {i}" for i in range(6)], name="Scr")
    campaign = build_campaign(project, dataset, annotators=annotators, **options)
    screening_settings_update(campaign=campaign, screening=True, pass_mark=pass_mark, rule=rule)
    campaign.refresh_from_db()
    ids = _skill_ids(campaign)
    scores = {ids[name]: value for name, value in (known or KNOWN).items()}
    for item in TRAINING:
        screening_task_set(
            campaign=campaign,
            response=_response(campaign, item),
            scores=scores,
            kind=TaskKind.TRAINING,
            explanation=EXPLANATION,
        )
    for item in qualification:
        screening_task_set(
            campaign=campaign,
            response=_response(campaign, item),
            scores=scores,
            kind=TaskKind.QUALIFICATION,
            explanation="never shown",
        )
    return campaign


@pytest.fixture
def bob(django_user_model, project):
    user = django_user_model.objects.create_user("bob", password="pw-bob")
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    return user


@pytest.fixture
def campaign(project, tmp_path, annotator, bob):
    return make_screening_campaign(project, tmp_path, [annotator, bob])


def _item(assignment: Assignment) -> str:
    return Task.objects.get(pk=assignment.task_id).response.item.external_id


def answer(assignment: Assignment, annotator, **given) -> None:
    """Submit every asked skill: the named ones as given (None = N/A), the rest 3."""
    human_score_submit(
        assignment_id=assignment.pk,
        annotator=annotator,
        scores=[
            ScoreInput(s.skill_id, given.get(s.name, 3)) for s in task_skills(assignment=assignment)
        ],
    )


def run_through(campaign, annotator, **given) -> list[str]:
    """Claim and answer until a real task comes (returned last) or nothing: the items."""
    seen = []
    for _ in range(10):
        assignment = assignment_claim_next(campaign=campaign, annotator=annotator)
        if assignment is None:
            return seen
        seen.append(_item(assignment))
        kind = Task.objects.get(pk=assignment.task_id).kind
        if kind == TaskKind.NORMAL:
            return seen
        answer(assignment, annotator, **given)
    raise AssertionError(seen)


def _phase(campaign, user) -> str:
    return Screening.objects.get(campaign=campaign, annotator=user).phase


# --- the rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "known", "rule", "agrees"),
    [
        (3, 3, QualificationRule.EXACT, True),
        (4, 3, QualificationRule.EXACT, False),
        (4, 3, QualificationRule.WITHIN_ONE, True),
        (5, 3, QualificationRule.WITHIN_ONE, False),
        (None, None, QualificationRule.EXACT, True),
        (None, 1, QualificationRule.WITHIN_ONE, False),
        (1, None, QualificationRule.WITHIN_ONE, False),
    ],
)
def test_a_score_agrees_by_the_rule_and_na_only_with_na(given, known, rule, agrees):
    assert score_agrees(given=given, known=known, rule=rule) is agrees


def test_passing_needs_every_skill_at_the_mark_and_the_score_is_the_lowest_share():
    per_skill = {"1": {"agreed": 4, "total": 5}, "2": {"agreed": 5, "total": 5}}
    assert qualification_decide(per_skill=per_skill, pass_mark=0.8).passed  # 4/5 == 0.8
    decision = qualification_decide(per_skill=per_skill, pass_mark=0.81)
    assert not decision.passed and decision.score == pytest.approx(0.8)


# --- the claim gate -----------------------------------------------------------------------------


def test_training_then_qualification_in_task_order_then_real_tasks(campaign, annotator):
    # when alice claims and answers with the known scores
    seen = run_through(campaign, annotator, **KNOWN)
    # then she got every training task, then every qualification task, then a real one
    assert seen[:4] == [*TRAINING, *QUALIFICATION]
    assert seen[4] in ("q4", "q5")
    screening = Screening.objects.get(campaign=campaign, annotator=annotator)
    assert screening.phase == ScreeningPhase.PASSED
    assert screening.score == 1.0 and screening.decided_at is not None
    ids = _skill_ids(campaign)
    assert screening.per_skill == {
        str(ids["Factuality"]): {"agreed": 2, "total": 2},
        str(ids["Comprehension"]): {"agreed": 2, "total": 2},
    }


def test_the_phase_moves_on_after_each_phase(campaign, annotator):
    first = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert _phase(campaign, annotator) == ScreeningPhase.TRAINING
    answer(first, annotator)
    assert _phase(campaign, annotator) == ScreeningPhase.TRAINING
    answer(assignment_claim_next(campaign=campaign, annotator=annotator), annotator)
    # the last training answer moves her to the test before she claims again
    assert _phase(campaign, annotator) == ScreeningPhase.QUALIFICATION


def test_a_failed_annotator_gets_no_real_task_and_is_told_why(campaign, annotator):
    # when alice answers off by one on every known score, under the exact rule
    seen = run_through(campaign, annotator, Factuality=3, Comprehension=5)
    # then she is screened out after the test, and gets nothing more
    assert seen == [*TRAINING, *QUALIFICATION]
    screening = Screening.objects.get(campaign=campaign, annotator=annotator)
    assert screening.phase == ScreeningPhase.FAILED and screening.score == 0.0
    assert assignment_claim_next(campaign=campaign, annotator=annotator) is None
    assert no_task_reason(campaign=campaign, user=annotator) == "screened_out"
    normal = Assignment.objects.filter(annotator=annotator, task__kind=TaskKind.NORMAL)
    assert not normal.exists()


def test_the_same_answers_pass_within_one(project, tmp_path, annotator):
    campaign = make_screening_campaign(
        project, tmp_path, [annotator], rule=QualificationRule.WITHIN_ONE
    )
    seen = run_through(campaign, annotator, Factuality=3, Comprehension=5)
    assert seen[-1] in ("q4", "q5")
    assert _phase(campaign, annotator) == ScreeningPhase.PASSED


def test_the_pass_mark_is_per_skill(project, tmp_path, annotator, bob):
    # given a pass mark of 50 % per skill
    campaign = make_screening_campaign(project, tmp_path, [annotator, bob], pass_mark=0.5)
    # alice: Factuality right on one of two tasks, Comprehension always right -> 50 %: passes
    _answer_test(campaign, annotator, [{"Factuality": 2}, {"Factuality": 1}], train=True)
    # bob: Comprehension right on none -> 0 % on that skill: fails despite Factuality
    _answer_test(campaign, bob, [{"Comprehension": 1}, {"Comprehension": 1}], train=True)
    alice = Screening.objects.get(campaign=campaign, annotator=annotator)
    assert alice.phase == ScreeningPhase.PASSED and alice.score == 0.5
    assert _phase(campaign, bob) == ScreeningPhase.FAILED


def _answer_test(campaign, user, answers: list[dict], *, train: bool = False) -> None:
    if train:
        for _ in TRAINING:
            answer(assignment_claim_next(campaign=campaign, annotator=user), user, **KNOWN)
    for given in answers:
        assignment = assignment_claim_next(campaign=campaign, annotator=user)
        assert Task.objects.get(pk=assignment.task_id).kind == TaskKind.QUALIFICATION
        answer(assignment, user, **{**KNOWN, **given})


def test_na_agrees_only_with_na(project, tmp_path, annotator, bob):
    known = {"Factuality": None, "Comprehension": 4}
    campaign = make_screening_campaign(
        project, tmp_path, [annotator, bob], rule=QualificationRule.WITHIN_ONE, known=known
    )
    run_through(campaign, annotator, Factuality=None, Comprehension=4)
    run_through(campaign, bob, Factuality=1, Comprehension=4)
    assert _phase(campaign, annotator) == ScreeningPhase.PASSED
    assert _phase(campaign, bob) == ScreeningPhase.FAILED


def test_without_qualification_tasks_training_alone_passes(project, tmp_path, annotator):
    campaign = make_screening_campaign(project, tmp_path, [annotator], qualification=())
    seen = run_through(campaign, annotator, Factuality=1)
    assert seen[:2] == list(TRAINING) and seen[2] in (*QUALIFICATION, "q4", "q5")
    assert _phase(campaign, annotator) == ScreeningPhase.PASSED


def test_a_skipped_qualification_task_counts_as_not_agreeing(campaign, annotator):
    _answer_test(campaign, annotator, [KNOWN], train=True)
    last = assignment_claim_next(campaign=campaign, annotator=annotator)
    assignment_skip(assignment_id=last.pk, annotator=annotator, reason="too hard")
    screening = Screening.objects.get(campaign=campaign, annotator=annotator)
    assert screening.phase == ScreeningPhase.FAILED and screening.score == 0.5


def test_an_expired_screening_lease_is_offered_again(campaign, annotator):
    first = assignment_claim_next(campaign=campaign, annotator=annotator)
    with time_machine.travel(timezone.now() + timedelta(seconds=campaign.lease_seconds + 5)):
        again = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert again.pk == first.pk and _item(again) == TRAINING[0]
    assert Assignment.objects.get(pk=first.pk).status == AssignmentStatus.ACTIVE


def test_a_campaign_without_screening_serves_real_tasks_straight_away(campaign, annotator):
    screening_settings_update(
        campaign=campaign, screening=False, pass_mark=0.8, rule=QualificationRule.EXACT
    )
    first = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert Task.objects.get(pk=first.task_id).kind == TaskKind.NORMAL
    assert not Screening.objects.exists()


def test_screening_work_never_counts_as_data_nor_toward_the_quota(project, tmp_path, annotator):
    # given a quota of one real task
    campaign = make_screening_campaign(project, tmp_path, [annotator], quota_per_annotator=1)
    # when alice does four screening tasks
    seen = run_through(campaign, annotator, **KNOWN)
    # then she still gets her one real task, and nothing of the screening is data
    assert seen[-1] in ("q4", "q5")
    assert Assignment.objects.filter(campaign=campaign).accepted().count() == 0
    assert HumanScore.objects.filter(campaign=campaign).accepted().count() == 0
    assert human_score_rows(project=project) == []
    assert list(human_score_export_rows(project=project)) == []
    assert not Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL, submitted__gt=0)


def test_the_decision_is_idempotent(campaign, annotator):
    run_through(campaign, annotator, **KNOWN)
    decided = Screening.objects.get(campaign=campaign, annotator=annotator)
    again = screening_advance(campaign_id=campaign.pk, annotator_id=annotator.pk)
    assert again.decided_at == decided.decided_at and again.phase == decided.phase


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_advances_decide_once(project, tmp_path, annotator):
    # given alice has answered every screening task, but no decision was recorded yet
    campaign = make_screening_campaign(project, tmp_path, [annotator])
    run_through(campaign, annotator, **KNOWN)
    Screening.objects.filter(campaign=campaign).update(
        phase=ScreeningPhase.QUALIFICATION, decided_at=None, score=None, per_skill={}
    )
    # when four requests advance her screening at once
    barrier = threading.Barrier(4)
    decided = []

    def advance():
        try:
            barrier.wait()
            s = screening_advance(campaign_id=campaign.pk, annotator_id=annotator.pk)
            decided.append((s.phase, s.decided_at))
        finally:
            connection.close()

    threads = [threading.Thread(target=advance) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # then one of them decided, and every one saw that same decision
    assert len(decided) == 4
    assert len(set(decided)) == 1 and decided[0][0] == ScreeningPhase.PASSED


# --- the annotator's pages ----------------------------------------------------------------------


def test_training_answers_show_the_known_scores_and_explanation(
    campaign, annotator, annotator_client
):
    page = annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    assert b"Training 1 of 2" in page.content
    assignment = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    response = annotator_client.post(
        reverse("annotation:annotate-submit", args=[assignment.pk]),
        score_post(assignment, "2"),
        headers=HX,
    )
    body = response.content.decode()
    assert response.status_code == 200 and "Expected" in body
    assert "wrong <strong>year</strong>" in body  # the explanation, rendered


def test_training_feedback_lists_the_skills_in_the_order_the_form_asked_them(
    project, tmp_path, annotator, annotator_client, monkeypatch
):
    # given items that rank their skills against the catalogue's order (Factuality,
    # Comprehension, Readability), each with a known score
    monkeypatch.setattr(
        annotate_view_tests, "SKILLS", ["Readability", "Comprehension", "Factuality"]
    )
    campaign = make_screening_campaign(
        project,
        tmp_path,
        [annotator],
        known={"Factuality": 2, "Comprehension": 4, "Readability": 3},
    )
    annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    assignment = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    asked = [s.name for s in task_skills(assignment=assignment)]
    assert asked == ["Readability", "Comprehension", "Factuality"]
    # when the training task is answered
    response = annotator_client.post(
        reverse("annotation:annotate-submit", args=[assignment.pk]),
        score_post(assignment, "2"),
        headers=HX,
    )
    # then the feedback table lists them as the form did, and so does the API's feedback
    table = response.content.decode().split("data-gold-feedback", 1)[1].split("</table>")[0]
    shown = re.findall(r"<tr class=\"(?:agrees|differs)\"><td>([^<]+)</td>", table)
    assert shown == asked
    feedback = gold_feedback_for_assignment(assignment=assignment)
    assert feedback is not None and [r.skill_name for r in feedback.rows] == asked


def test_qualification_answers_show_no_feedback(campaign, annotator, annotator_client):
    for _ in TRAINING:
        answer(assignment_claim_next(campaign=campaign, annotator=annotator), annotator)
    page = annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    assert b"Qualification 1 of 2" in page.content
    assignment = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    response = annotator_client.post(
        reverse("annotation:annotate-submit", args=[assignment.pk]),
        score_post(assignment, "2"),
        headers=HX,
    )
    body = response.content.decode()
    assert "Expected" not in body and "never shown" not in body
    assert b"Qualification 2 of 2" in response.content


def test_the_api_explains_training_answers_and_nothing_else(campaign, annotator):
    api = token_client(annotator)

    def submit_next() -> dict:
        task = api.post(f"{BASE}/campaigns/{campaign.pk}/next/").json()
        scores = [{"skill_id": s["skill_id"], "score": 2} for s in task["skills"]]
        url = f"{BASE}/assignments/{task['assignment_id']}/submit/"
        response = api.post(url, {"scores": scores}, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    trained = submit_next()
    assert trained["feedback"]["explanations"] == [EXPLANATION]
    expected = {s["skill"]: (s["expected"], s["agrees"]) for s in trained["feedback"]["skills"]}
    assert expected == {"Factuality": ("2", True), "Comprehension": ("4", False)}
    submit_next()  # the second training task
    assert "feedback" not in submit_next()  # a qualification task


def test_the_screened_out_reason_reaches_the_page_and_the_api(
    campaign, annotator, annotator_client
):
    run_through(campaign, annotator, Factuality=5, Comprehension=1)
    page = annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    assert NO_TASK_MESSAGES["screened_out"] in page.content.decode()
    api = token_client(annotator).post(f"{BASE}/campaigns/{campaign.pk}/next/")
    assert api.status_code == 204 and api["No-Task-Reason"] == "screened_out"


def test_my_tasks_offers_no_start_to_a_screened_out_annotator(
    campaign, annotator, annotator_client
):
    run_through(campaign, annotator, Factuality=5, Comprehension=1)
    (row,) = campaign_list_for_annotator(user=annotator)
    assert row.screened_out and not row.can_start and row.available == 0
    page = annotator_client.get(reverse("annotation:my-campaigns")).content.decode()
    assert "thank you for taking the test" in page
    assert reverse("annotation:annotate", args=[campaign.pk]) not in page


def test_the_progress_label_is_none_without_screening(campaign, annotator):
    assert screening_progress(campaign=campaign, user=annotator) is None  # not started
    assignment_claim_next(campaign=campaign, annotator=annotator)
    assert screening_progress(campaign=campaign, user=annotator) == {
        "phase": "training",
        "label": "Training",
        "position": 1,
        "total": 2,
    }
    campaign.screening = False
    assert screening_progress(campaign=campaign, user=annotator) is None


# --- late submissions (issue 16, point 7) -------------------------------------------------------


def test_a_late_submission_says_the_slot_was_taken_not_that_the_task_was_completed(
    project, tmp_path, annotator, bob, django_user_model
):
    # given a plain campaign with K = 1, and alice's lease on a task lapsed
    dataset = build_dataset(project, tmp_path, texts=["only"], name="One")
    campaign = build_campaign(project, dataset, annotators=[annotator, bob], overlap=1)
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    with time_machine.travel(timezone.now() + timedelta(seconds=campaign.lease_seconds + 5)):
        # when the lease is swept, bob takes the freed slot (not submitted yet), alice is late
        assignments_expire_stale(campaign_id=campaign.pk)
        theirs = assignment_claim_next(campaign=campaign, annotator=bob)
        assert theirs.task_id == mine.task_id
        with pytest.raises(AssignmentError) as late:
            answer(mine, annotator)
    # then she is told the slot was taken, not that others completed the task
    assert late.value.code == "lease_lost"
    assert "completed" not in str(late.value) and "another annotator" in str(late.value)
    # and once bob submits, a late one is told the task is complete
    answer(theirs, bob)
    with pytest.raises(AssignmentError) as done:
        answer(mine, annotator)
    assert "completed" in str(done.value)


# --- the researcher's page and API --------------------------------------------------------------


def _url(name: str, campaign: Campaign) -> str:
    return reverse(f"annotation:{name}", args=[campaign.pk])


def test_the_campaign_page_links_the_screening_summary(researcher_client, campaign):
    page = researcher_client.get(_url("campaign-detail", campaign))
    body = page.content.decode()
    assert 'id="screening-summary"' in body and _url("screening", campaign) in body
    assert "2 training tasks, then 2 qualification tasks" in body


def test_researchers_set_screening_and_see_results(researcher_client, campaign, annotator):
    run_through(campaign, annotator, Factuality=3, Comprehension=5)
    page = researcher_client.get(_url("screening", campaign))
    body = page.content.decode()
    assert page.status_code == 200 and 'data-user="alice"' in body
    assert 'data-phase="failed"' in body and "Factuality: 0/2" in body
    # when the rule is relaxed to within 1 (htmx): the settings section comes back
    response = researcher_client.post(
        _url("screening-settings", campaign),
        {"screening": "on", "pass_percent": "60", "rule": "within1"},
        headers=HX,
    )
    assert response.status_code == 200 and b"<html" not in response.content
    assert b"Screening settings saved" in response.content
    campaign.refresh_from_db()
    assert campaign.qualification_pass_mark == 0.6 and campaign.qualification_rule == "within1"
    # decided annotators keep their decision
    assert _phase(campaign, annotator) == ScreeningPhase.FAILED


def test_settings_errors_are_answered_200_and_change_nothing(researcher_client, campaign):
    response = researcher_client.post(
        _url("screening-settings", campaign), {"pass_percent": "150", "rule": "exact"}
    )
    assert response.status_code == 200 and b"<html" in response.content
    campaign.refresh_from_db()
    assert campaign.screening and campaign.qualification_pass_mark == 0.8


def test_screening_tasks_are_added_and_removed(researcher_client, campaign):
    ids = _skill_ids(campaign)
    response = researcher_client.post(
        _url("screening-task-set", campaign),
        {
            "item": "q4",
            "model_name": "secret-model-7b",
            "kind": "qualification",
            f"skill_{ids['Factuality']}": "na",
            "explanation": "no facts",
        },
        headers=HX,
    )
    assert response.status_code == 200 and b'id="screening-tasks"' in response.content
    task = Task.objects.get(campaign=campaign, response=_response(campaign, "q4"))
    assert task.kind == TaskKind.QUALIFICATION
    assert task.gold_scores.get().is_na
    # a response already used for training cannot also be a qualification task
    clash = researcher_client.post(
        _url("screening-task-set", campaign),
        {
            "item": "q0",
            "model_name": "secret-model-7b",
            "kind": "qualification",
            f"skill_{ids['Factuality']}": "2",
        },
        headers=HX,
    )
    assert b"already a training task" in clash.content
    # an unserved task is removed; a served one is kept with its answers
    researcher_client.post(_url("screening-task-remove", campaign), {"task": task.pk})
    assert not Task.objects.filter(pk=task.pk).exists()


def test_a_response_already_scored_for_real_cannot_become_a_screening_task(
    campaign, annotator, bob
):
    # given bob finished screening and holds a real task
    run_through(campaign, bob, **KNOWN)
    real = Assignment.objects.get(annotator=bob, status=AssignmentStatus.ACTIVE)
    response = Task.objects.get(pk=real.task_id).response
    # then its response cannot be used for training (annotators would see its answer)
    with pytest.raises(ValidationError, match="already being scored as a real task"):
        screening_task_set(campaign=campaign, response=response, scores={}, kind=TaskKind.TRAINING)


def test_a_served_screening_task_is_kept(researcher_client, campaign, annotator):
    served = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = researcher_client.post(
        _url("screening-task-remove", campaign), {"task": served.task_id}, headers=HX
    )
    assert b"already given to annotators" in response.content
    assert Task.objects.filter(pk=served.task_id).exists()


def test_the_results_download_as_csv_without_formulas(
    researcher_client, project, tmp_path, django_user_model
):
    sly = django_user_model.objects.create_user("=cmd", password="pw")
    membership_set(project=project, user=sly, role=ProjectRole.ANNOTATOR)
    campaign = make_screening_campaign(project, tmp_path, [sly])
    run_through(campaign, sly, **KNOWN)
    response = researcher_client.get(_url("screening-results-csv", campaign))
    assert response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("campaign_id,annotator,phase,score")
    assert len(lines) == 3 and all(",'=cmd,passed,1.0," in line for line in lines[1:])


def test_the_api_reads_and_changes_settings_and_lists_results(researcher, campaign, annotator):
    run_through(campaign, annotator, **KNOWN)
    api = token_client(researcher)
    got = api.get(f"{BASE}/campaigns/{campaign.pk}/screening/").json()
    assert got["screening"] is True and got["qualification_tasks"] == 2
    assert got["annotators"]["passed"] == 1
    assert [t["kind"] for t in got["tasks"]] == ["training"] * 2 + ["qualification"] * 2
    changed = api.patch(
        f"{BASE}/campaigns/{campaign.pk}/screening/", {"pass_mark": 0.5}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["pass_mark"] == 0.5
    bad = api.patch(f"{BASE}/campaigns/{campaign.pk}/screening/", {"rule": "x"}, format="json")
    assert bad.status_code == 400
    results = api.get(f"{BASE}/campaigns/{campaign.pk}/screening/results/").json()["results"]
    assert results[0]["annotator"] == "alice" and results[0]["phase"] == "passed"
    assert {s["agreement"] for s in results[0]["skills"]} == {1.0}


def test_annotators_may_not_manage_screening(annotator_client, outsider_client, campaign):
    assert annotator_client.get(_url("screening", campaign)).status_code == 403
    assert outsider_client.get(_url("screening", campaign)).status_code == 404
    assert outsider_client.post(_url("screening-settings", campaign), {}).status_code == 404


def test_the_screening_forms_refuse_get(researcher_client, campaign):
    for name in ("screening-settings", "screening-task-set", "screening-task-remove"):
        assert researcher_client.get(_url(name, campaign)).status_code == 405


@pytest.mark.postgres_only
def test_a_passed_annotator_claims_with_three_statements(campaign, annotator):
    # given alice passed (her first real task submitted, so the next claim is a fresh one)
    run_through(campaign, annotator, **KNOWN)
    real = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    answer(real, annotator)
    # when she claims again
    with CaptureQueriesContext(connection) as ctx:
        assert assignment_claim_next(campaign=campaign, annotator=annotator) is not None
    # then: the claim state, her screening row, the claim decided (no savepoints counted)
    sql = [q["sql"] for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(sql) == 3, sql


def test_htmx_refreshes_only_the_results_table(researcher_client, campaign):
    response = researcher_client.get(_url("screening", campaign), headers=HX)
    assert b'id="screening-results"' in response.content
    assert b"<html" not in response.content and b"screening-settings" not in response.content


def test_the_screening_page_costs_a_fixed_number_of_queries(
    researcher_client, campaign, annotator, bob, django_user_model, project
):
    def page_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert researcher_client.get(_url("screening", campaign)).status_code == 200
        return len(ctx.captured_queries)

    run_through(campaign, annotator, **KNOWN)
    small = page_queries()
    # when more annotators are screened, in every phase
    run_through(campaign, bob, Factuality=5)
    for name in ("carol", "dave"):
        user = django_user_model.objects.create_user(name, password="pw")
        membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
        campaign.annotators.add(user)
        assignment_claim_next(campaign=campaign, annotator=user)
    # then the page reads as much as before
    assert page_queries() == small


def test_screened_out_annotators_are_not_counted_as_able_to_take_more(campaign, annotator, bob):
    # re-annotation and adaptive overlap raise a task only for people who could take it
    from annotation.services.reannotation import _eligible_counts

    run_through(campaign, bob, Factuality=5, Comprehension=1)
    assert _phase(campaign, bob) == ScreeningPhase.FAILED
    task = Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL).order_by("pk").first()
    # Alice has not started: she may still pass and take it; Bob never will
    assert _eligible_counts(campaign, [task])[task.pk] == 1
