"""Crowd studies safe to pay for (docs/CROWD.md): the completion code only after the
study's required work, leaving early without it, and a participant bound to the browser
that started (another browser needs the resume code; an unproven visit changes nothing)."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from annotation.models import (
    Campaign,
    CampaignStatus,
    Participant,
    ParticipantState,
    Screening,
    ScreeningPhase,
)
from annotation.study import selectors as ss
from annotation.study import services
from annotation.study.middleware import SESSION_PARTICIPANT, SESSION_RESUME_CODE
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.annotation.test_study_links import PROLIFIC, entry_url, work_done

FINISH = "annotation:study-finish"


@pytest.fixture(autouse=True)
def _fresh_throttle():
    keys = ["study-entry:addr:127.0.0.1", "study-resume:addr:127.0.0.1"]
    cache.delete_many(keys)
    yield
    cache.delete_many(keys)


@pytest.fixture
def campaign(project, tmp_path) -> Campaign:
    dataset = build_dataset(project, tmp_path, texts=["First answer", "Second answer", "Third"])
    campaign = build_campaign(project, dataset, overlap=1)
    services.study_settings_update(
        campaign=campaign, consent_text="", completion_code="PAID-C0DE", screenout_code=""
    )
    return campaign


@pytest.fixture
def link(campaign, researcher):
    return services.study_link_create(campaign=campaign, platform="prolific", created_by=researcher)


def started(link, **params) -> tuple[Client, Participant]:
    client = Client()
    assert client.get(entry_url(link, **(params or PROLIFIC))).status_code == 302
    return client, Participant.objects.get(worker_id=(params or PROLIFIC).get("PROLIFIC_PID", ""))


# --- the completion code only after the work --------------------------------------------------


def test_finishing_at_once_is_refused_and_shows_no_code(link):
    # given a participant who just arrived: no task done
    client, participant = started(link)
    # when they press Finish
    response = client.post(reverse(FINISH), {"action": "finish"})
    # then they are told what is left, and nothing changed
    assert response.status_code == 409
    content = response.content.decode()
    assert "PAID-C0DE" not in content
    assert "There are still tasks for you" in content
    participant.refresh_from_db()
    assert participant.state == ParticipantState.WORKING and participant.finished_at is None
    assert "PAID-C0DE" not in client.get(reverse(FINISH)).content.decode()


def test_finishing_at_once_without_the_page_changes_nothing_either(link):
    participant = services.participant_enter(link=link, params=PROLIFIC).participant
    with pytest.raises(services.StudyError) as exc:
        services.participant_finish(participant=participant)
    assert (exc.value.code, exc.value.status) == ("not_due", 409)
    assert Participant.objects.get().state == ParticipantState.WORKING


def test_leaving_early_ends_the_study_without_any_code(link):
    # given a participant who did one of three tasks
    client, participant = started(link)
    from annotation.services.assignments import (
        ScoreInput,
        assignment_claim_next,
        human_score_submit,
        task_skills,
    )

    a = assignment_claim_next(campaign=participant.campaign, annotator=participant.user)
    scores = [ScoreInput(s.skill_id, 3) for s in task_skills(assignment=a)]
    human_score_submit(assignment_id=a.pk, annotator=participant.user, scores=scores)
    # when they leave
    response = client.post(reverse(FINISH), {"action": "leave"})
    assert response.status_code == 302
    page = client.get(reverse(FINISH)).content.decode()
    # then: no code, no redirect to the platform's completion page, a "return" page
    participant.refresh_from_db()
    assert (participant.state, participant.end_reason) == (ParticipantState.LEFT, "left")
    assert "PAID-C0DE" not in page and "http-equiv" not in page
    assert "return the study" in page
    # and the tasks are closed to them
    annotate = reverse("annotation:annotate", args=[participant.campaign_id])
    assert client.get(annotate).status_code == 302


def test_the_quota_met_is_the_work_done(link, campaign):
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=1)
    client, participant = started(link)
    assert not ss.participant_work_status(participant=participant).due
    from annotation.services.assignments import (
        ScoreInput,
        assignment_claim_next,
        human_score_submit,
        task_skills,
    )

    a = assignment_claim_next(campaign=campaign, annotator=participant.user)
    scores = [ScoreInput(s.skill_id, 3) for s in task_skills(assignment=a)]
    human_score_submit(assignment_id=a.pk, annotator=participant.user, scores=scores)
    status = ss.participant_work_status(participant=participant)
    assert (status.due, status.reason, status.done) == (True, "quota", 1)
    # the annotate page's "All done" card makes finishing the focused main action
    page = client.get(reverse("annotation:annotate", args=[campaign.pk])).content.decode()
    card = page.split('id="task-card"')[1]
    assert re.search(r"<button[^>]*data-next-task[^>]*>Finish and get my completion code", card)
    assert "Back to my tasks" not in card
    client.post(reverse(FINISH), {"action": "finish"})
    participant.refresh_from_db()
    assert (participant.state, participant.end_reason) == (ParticipantState.COMPLETED, "quota")
    assert "PAID-C0DE" in client.get(reverse(FINISH)).content.decode()


def test_no_task_left_is_the_work_done_but_only_after_some_work(link, campaign):
    # given two participants: one does every task, the other then finds none left
    _, first = started(link)
    assert work_done(first) == 3
    client, second = started(link, PROLIFIC_PID="second")
    status = ss.participant_work_status(participant=second)
    assert (status.due, status.reason) == (False, "nothing")
    assert client.post(reverse(FINISH)).status_code == 409
    services.participant_finish(participant=first)
    first.refresh_from_db()
    assert (first.state, first.end_reason) == (ParticipantState.COMPLETED, "no_task")


def test_a_paused_campaign_is_not_the_work_done(link, campaign):
    _, participant = started(link)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.PAUSED)
    assert ss.participant_work_status(participant=participant).reason == "paused"


def test_screening_must_be_passed_before_the_code(link, campaign):
    Campaign.objects.filter(pk=campaign.pk).update(screening=True, quota_per_annotator=1)
    client, participant = started(link)
    status = ss.participant_work_status(participant=participant)
    assert (status.due, status.reason) == (False, "screening")
    Screening.objects.create(
        campaign=campaign, annotator=participant.user, phase=ScreeningPhase.QUALIFICATION
    )
    assert ss.participant_work_status(participant=participant).reason == "screening"
    assert client.post(reverse(FINISH)).status_code == 409


def test_screened_out_without_a_screen_out_code_gets_no_code_at_all(link, campaign):
    # the completion code never stands in for a missing screen-out code
    client, participant = started(link)
    Screening.objects.create(
        campaign=campaign, annotator=participant.user, phase=ScreeningPhase.FAILED
    )
    client.post(reverse(FINISH))
    participant.refresh_from_db()
    assert participant.state == ParticipantState.SCREENED_OUT
    page = client.get(reverse(FINISH)).content.decode()
    assert "PAID-C0DE" not in page and "return the study" in page
    assert "http-equiv" not in page  # no redirect to Prolific's completion page


def test_the_bar_shows_where_the_participant_stands_and_the_resume_code(link, campaign):
    client, participant = started(link)
    page = client.get(reverse("annotation:annotate", args=[campaign.pk])).content.decode()
    bar = page.split("data-study-bar")[1].split("</div>")[0]
    assert "Finish and get my completion code" not in bar
    assert "Stop the study" in bar and "There are still tasks for you" in bar
    code = client.session[SESSION_RESUME_CODE]
    assert re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}", code)
    assert code in bar


# --- bound to the browser that started -------------------------------------------------------

MTURK_VICTIM = {
    "workerId": "A1VICTIM",
    "assignmentId": "ASSIGN1",
    "hitId": "HIT1",
    "turkSubmitTo": "https://www.mturk.com",
}


def test_a_second_browser_with_a_victims_worker_id_takes_nothing_over(campaign):
    # given an MTurk worker who started in their browser
    link = services.study_link_create(campaign=campaign, platform="mturk")
    victim = Client()
    assert victim.get(entry_url(link, **MTURK_VICTIM)).status_code == 302
    # when another browser opens the link with the victim's worker id and its own assignment
    attacker = Client()
    hostile = {
        **MTURK_VICTIM,
        "assignmentId": "ATTACKER",
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }
    response = attacker.get(entry_url(link, **hostile))
    # then it is asked for the resume code, is signed in as nobody, and nothing changed
    assert response.status_code == 302
    assert response["Location"] == reverse("annotation:study-continue")
    assert SESSION_PARTICIPANT not in attacker.session
    assert "_auth_user_id" not in attacker.session
    page = attacker.get(response["Location"])
    assert page.status_code == 200 and b"resume code" in page.content
    participant = Participant.objects.get()
    assert (participant.session_id, participant.submit_to) == ("ASSIGN1", "https://www.mturk.com")
    annotate = reverse("annotation:annotate", args=[campaign.pk])
    assert attacker.get(annotate).status_code == 302  # to the sign-in page
    # a wrong code changes nothing either
    wrong = attacker.post(reverse("annotation:study-continue"), {"code": "AAAA-BBBB-CCCC"})
    assert wrong.status_code == 400 and SESSION_PARTICIPANT not in attacker.session
    participant.refresh_from_db()
    assert participant.session_id == "ASSIGN1"
    # and the victim's own browser goes on as before
    assert victim.get(annotate).status_code == 200


def test_the_resume_code_continues_on_another_device(link):
    # given a participant who started on a laptop and noted their resume code
    laptop, participant = started(link, PROLIFIC_PID="p1", STUDY_ID="s1", SESSION_ID="old")
    code = laptop.session[SESSION_RESUME_CODE]
    # when they open the link on their phone and give the code (lower case, spaces)
    phone = Client()
    response = phone.get(entry_url(link, PROLIFIC_PID="p1", STUDY_ID="s1", SESSION_ID="new"))
    assert response["Location"] == reverse("annotation:study-continue")
    typed = code.lower().replace("-", " ")
    response = phone.post(reverse("annotation:study-continue"), {"code": typed})
    # then the phone is signed in as them, and the proven visit's ids are kept
    assert response.status_code == 302
    assert phone.session[SESSION_PARTICIPANT] == participant.pk
    assert phone.session[SESSION_RESUME_CODE] == code
    participant.refresh_from_db()
    assert participant.session_id == "new"
    # the phone is bound now: it comes back without the code
    phone.session.flush()
    assert phone.get(entry_url(link, PROLIFIC_PID="p1"))["Location"] == reverse(
        "annotation:study-resume"
    )


def test_the_browser_that_started_comes_back_without_a_code(link, settings):
    # given a participant whose session ended (signed out, expired) but whose browser keeps
    # the study cookie
    client, participant = started(link)
    del client.cookies[settings.SESSION_COOKIE_NAME]  # the session is gone, the cookie kept
    # when they open the link again
    response = client.get(entry_url(link, **PROLIFIC))
    # then they are back, without a code
    assert response["Location"] == reverse("annotation:study-resume")
    assert client.session[SESSION_PARTICIPANT] == participant.pk


def test_a_forged_study_cookie_proves_nothing(link, settings):
    _, participant = started(link)
    other = Client()
    other.cookies["flaskweb_study"] = f'{{"{participant.pk}":""}}'  # unsigned
    response = other.get(entry_url(link, **PROLIFIC))
    assert response["Location"] == reverse("annotation:study-continue")


def test_resume_codes_are_throttled(link, settings):
    settings.FLASKWEB_STUDY_RESUME_ATTEMPTS = 3
    laptop, participant = started(link)
    code = laptop.session[SESSION_RESUME_CODE]
    cache.delete(f"study-resume:participant:{participant.pk}")
    phone = Client()
    phone.get(entry_url(link, **PROLIFIC))
    statuses = [
        phone.post(reverse("annotation:study-continue"), {"code": "WRONG"}).status_code
        for _ in range(3)
    ]
    # past the limit even the right code waits
    statuses.append(phone.post(reverse("annotation:study-continue"), {"code": code}).status_code)
    assert statuses == [400, 400, 400, 429]
    assert SESSION_PARTICIPANT not in phone.session
    cache.delete(f"study-resume:participant:{participant.pk}")


def test_participants_from_before_resume_codes_resume_but_keep_their_ids(link):
    # given a participant admitted before resume codes existed
    _, participant = started(link)
    Participant.objects.filter(pk=participant.pk).update(resume_code_hash="")
    # when a browser without the cookie opens the link with other session ids
    other = Client()
    response = other.get(entry_url(link, **{**PROLIFIC, "SESSION_ID": "other"}))
    # then it resumes (as before), but the saved ids stay
    assert response["Location"] == reverse("annotation:study-resume")
    participant.refresh_from_db()
    assert participant.session_id == "sess1"
