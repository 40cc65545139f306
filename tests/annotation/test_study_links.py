"""Study links for recruiting platforms (annotation/study/, docs/CROWD.md): the platform
rules, the participant services, the entry link and the study session, the researcher's
study page and the completion page."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from annotation.models import (
    Campaign,
    CampaignStatus,
    Participant,
    ParticipantState,
    ProjectMembership,
    ProjectRole,
    Screening,
    ScreeningPhase,
)
from annotation.study import platforms, services
from annotation.study.middleware import SESSION_PARTICIPANT
from tests.annotation.test_annotate_views import build_campaign, build_dataset

PID = "5f1a2b3c4d5e6f708192a3b4"
PROLIFIC = {"PROLIFIC_PID": PID, "STUDY_ID": "study1", "SESSION_ID": "sess1"}


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """The entry counters live in the shared cache: every test starts with none."""
    cache.delete("study-entry:addr:127.0.0.1")
    yield
    cache.delete("study-entry:addr:127.0.0.1")


@pytest.fixture
def campaign(project, tmp_path) -> Campaign:
    dataset = build_dataset(project, tmp_path, texts=["First answer", "Second answer"])
    return build_campaign(project, dataset, overlap=1)


@pytest.fixture
def link(campaign, researcher):
    return services.study_link_create(campaign=campaign, platform="prolific", created_by=researcher)


def entry_url(link, **params) -> str:
    url = reverse("annotation:study-entry", args=[link.token])
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{url}?{query}" if query else url


def enter(link, params) -> Participant:
    """A visit of the browser that started (it holds the study cookie): a known worker id
    resumes; a new one is admitted."""
    known = Participant.objects.filter(
        campaign_id=link.campaign_id, platform=link.platform
    ).values_list("pk", flat=True)
    admission = services.participant_enter(link=link, params=params, proven_ids=frozenset(known))
    return admission.participant


def work_done(participant: Participant) -> int:
    """Submit every task the campaign has for the participant (the study's work)."""
    from annotation.services.assignments import (
        ScoreInput,
        assignment_claim_next,
        human_score_submit,
        task_skills,
    )

    n = 0
    while a := assignment_claim_next(campaign=participant.campaign, annotator=participant.user):
        scores = [ScoreInput(s.skill_id, 4) for s in task_skills(assignment=a)]
        human_score_submit(assignment_id=a.pk, annotator=participant.user, scores=scores)
        n += 1
    return n


# --- the platform rules (pure) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "params", "worker"),
    [
        ("prolific", PROLIFIC, PID),
        ("mturk", {"workerId": "A1B2C3", "assignmentId": "X9", "hitId": "H1"}, "A1B2C3"),
        ("sona", {"id": "12345"}, "12345"),
        ("generic", {"worker": "lab_member-7"}, "lab_member-7"),
    ],
)
def test_each_platform_reads_its_own_worker_parameter(platform, params, worker):
    assert platforms.entry_parse(platform, params).worker_id == worker


@pytest.mark.parametrize(
    "value",
    ["", "{{%PROLIFIC_PID%}}", "a b", "x" * 101, "<script>", "id;drop", "ｐｉｄ"],
)
def test_a_worker_id_outside_the_pattern_is_refused(value):
    with pytest.raises(platforms.BadEntry):
        platforms.entry_parse("prolific", {"PROLIFIC_PID": value})


def test_an_mturk_visit_needs_an_assignment():
    with pytest.raises(platforms.BadEntry, match="assignment"):
        platforms.entry_parse("mturk", {"workerId": "A1"})


@pytest.mark.parametrize(
    "url",
    [
        "http://example.org/done",  # http off this machine
        "javascript:alert(1)",
        "https://user:pw@example.org/done",
        "https://example.org@evil.org/done",
        "https://example.org/{other}",
        "https://exa mple.org/",
        "https:///nohost",
        "ftp://example.org/",
        "https://example.org/" + "a" * 500,
        "https://example.org\\@evil.org/",
        "//example.org/done",
    ],
)
def test_a_hostile_completion_url_is_refused(url):
    with pytest.raises(platforms.BadEntry):
        platforms.completion_url_check(url)


def test_a_completion_url_fills_its_placeholders_encoded():
    url = platforms.completion_url_check("https://lab.example.org/done?c={code}&w={worker}")
    assert platforms.completion_url_fill(url, code="A B&C", worker_id="w1") == (
        "https://lab.example.org/done?c=A%20B%26C&w=w1"
    )
    assert platforms.completion_url_check("http://127.0.0.1:8123/back?c={code}")


@pytest.mark.parametrize(
    ("submit_to", "expected"),
    [
        ("https://www.mturk.com", "https://www.mturk.com/mturk/externalSubmit"),
        (
            "https://workersandbox.mturk.com/",
            "https://workersandbox.mturk.com/mturk/externalSubmit",
        ),
        ("https://www.mturk.com.evil.org", ""),
        ("http://www.mturk.com", ""),
        ("https://evil.org/?https://www.mturk.com", ""),
        ("", ""),
    ],
)
def test_turk_submit_to_must_be_an_mturk_origin_exactly(submit_to, expected):
    assert platforms.mturk_submit_url(submit_to) == expected


# --- services ----------------------------------------------------------------------------------


def test_a_new_worker_gets_a_password_less_annotator_account(link, campaign):
    # when
    participant = enter(link, PROLIFIC)
    # then
    user = participant.user
    assert not user.has_usable_password()
    assert PID not in user.username
    assert campaign.annotators.filter(pk=user.pk).exists()
    membership = ProjectMembership.objects.get(project=campaign.project, user=user)
    assert membership.role == ProjectRole.ANNOTATOR
    assert (participant.worker_id, participant.study_id, participant.session_id) == (
        PID,
        "study1",
        "sess1",
    )
    assert participant.state == ParticipantState.WORKING  # no consent text


def test_the_same_worker_resumes_the_same_account(link):
    first = enter(link, PROLIFIC)
    again = enter(link, {**PROLIFIC, "SESSION_ID": "sess2"})
    assert again.pk == first.pk and again.user_id == first.user_id
    assert again.session_id == "sess2"
    assert Participant.objects.count() == 1


def test_one_worker_id_never_maps_to_two_accounts(link, campaign):
    enter(link, PROLIFIC)
    second_link = services.study_link_create(campaign=campaign, platform="prolific")
    again = enter(second_link, PROLIFIC)
    assert Participant.objects.filter(worker_id=PID).count() == 1
    assert again.link_id == link.pk


def test_a_consent_text_starts_workers_on_the_consent_page(link, campaign):
    services.study_settings_update(
        campaign=campaign, consent_text="You agree.", completion_code="C1", screenout_code=""
    )
    link.refresh_from_db()
    participant = enter(link, PROLIFIC)
    assert participant.state == ParticipantState.CONSENT
    participant = services.participant_consent(participant=participant, agree=True)
    assert participant.state == ParticipantState.WORKING and participant.consented_at


def test_a_closed_link_takes_no_new_worker_but_lets_one_back(link):
    enter(link, PROLIFIC)
    services.study_link_set_open(link=link, is_open=False)
    with pytest.raises(services.StudyError) as exc:
        enter(link, {"PROLIFIC_PID": "other"})
    assert (exc.value.code, exc.value.status) == ("closed", 410)
    assert enter(link, PROLIFIC).worker_id == PID


def test_a_draft_campaign_takes_nobody(link, campaign):
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.FINISHED)
    link.refresh_from_db()
    with pytest.raises(services.StudyError, match="closed"):
        enter(link, PROLIFIC)


def test_max_participants_refuses_new_workers_only(campaign):
    link = services.study_link_create(campaign=campaign, platform="generic", max_participants=1)
    enter(link, {"worker": "w1"})
    with pytest.raises(services.StudyError) as exc:
        enter(link, {"worker": "w2"})
    assert exc.value.code == "full"
    assert enter(link, {"worker": "w1"})
    assert Participant.objects.count() == 1


def test_bad_parameters_change_nothing(link):
    with pytest.raises(services.StudyError) as exc:
        enter(link, {"PROLIFIC_PID": "{{%PROLIFIC_PID%}}"})
    assert (exc.value.code, exc.value.status) == ("bad_params", 400)
    assert not Participant.objects.exists()


def test_a_hostile_completion_url_is_refused_when_creating_a_link(campaign):
    with pytest.raises(ValidationError):
        services.study_link_create(
            campaign=campaign, platform="generic", completion_url="http://evil.org/{code}"
        )


def test_finishing_gives_the_completion_code_and_prolifics_url(link, campaign):
    services.study_settings_update(
        campaign=campaign, consent_text="", completion_code="C0DE", screenout_code="OUT"
    )
    participant = enter(link, PROLIFIC)
    work_done(participant)
    participant = services.participant_finish(participant=participant)
    done = services.participant_completion(participant=participant, link=link)
    assert participant.state == ParticipantState.COMPLETED
    assert done.code == "C0DE"
    assert done.redirect_url == "https://app.prolific.com/submissions/complete?cc=C0DE"


def test_a_failed_qualification_finishes_screened_out_with_its_code(link, campaign):
    services.study_settings_update(
        campaign=campaign, consent_text="", completion_code="C0DE", screenout_code="OUT"
    )
    participant = enter(link, PROLIFIC)
    Screening.objects.create(
        campaign=campaign, annotator=participant.user, phase=ScreeningPhase.FAILED
    )
    participant = services.participant_finish(participant=participant)
    assert participant.state == ParticipantState.SCREENED_OUT
    assert services.participant_completion(participant=participant, link=link).code == "OUT"


def test_an_mturk_completion_posts_only_to_mturk(campaign):
    link = services.study_link_create(campaign=campaign, platform="mturk")
    params = {"workerId": "W1", "assignmentId": "A1", "turkSubmitTo": "https://evil.org"}
    participant = enter(link, params)
    work_done(participant)
    participant = services.participant_finish(participant=participant)
    hostile = services.participant_completion(participant=participant, link=link)
    assert hostile.submit_url == "" and hostile.assignment_id == ""
    params["turkSubmitTo"] = "https://workersandbox.mturk.com"
    participant = enter(link, params)
    done = services.participant_completion(participant=participant, link=link)
    assert done.submit_url == "https://workersandbox.mturk.com/mturk/externalSubmit"
    assert done.assignment_id == "A1"


# --- the entry link and the study session ---------------------------------------------------------


def test_the_link_signs_the_worker_in_and_sends_them_to_their_tasks(link, campaign):
    client = Client()
    response = client.get(entry_url(link, **PROLIFIC))
    assert response.status_code == 302
    assert response["Location"] == reverse("annotation:study-resume")
    response = client.get(response["Location"])
    assert response["Location"] == reverse("annotation:study-instructions")
    page = client.get(response["Location"])
    assert b"Read the <strong>whole</strong> response" in page.content
    response = client.get(reverse("annotation:study-resume"))
    assert response["Location"] == reverse("annotation:annotate", args=[campaign.pk])
    assert client.session[SESSION_PARTICIPANT] == Participant.objects.get().pk


@pytest.mark.parametrize(("query", "status"), [("", 400), ("PROLIFIC_PID=a%20b", 400)])
def test_bad_link_parameters_get_a_clear_400_page(link, query, status):
    response = Client().get(reverse("annotation:study-entry", args=[link.token]) + "?" + query)
    assert response.status_code == status
    assert b"PROLIFIC_PID" in response.content
    assert not Participant.objects.exists()


@pytest.mark.parametrize(
    ("platform", "query"),
    [
        ("prolific", "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"),
        ("sona", "id=%25SURVEY_CODE%25"),
    ],
)
def test_a_link_with_its_placeholders_unreplaced_shows_a_preview(campaign, platform, query):
    # what docs/CROWD.md tells researchers they will see when they try their link
    link = services.study_link_create(campaign=campaign, platform=platform)
    url = reverse("annotation:study-entry", args=[link.token]) + "?" + query
    response = Client().get(url)
    assert response.status_code == 200
    assert b"A preview of this study link" in response.content
    assert b"No account was made" in response.content
    assert not Participant.objects.exists()


def test_a_closed_link_shows_a_polite_410(link):
    services.study_link_set_open(link=link, is_open=False)
    response = Client().get(entry_url(link, **PROLIFIC))
    assert response.status_code == 410
    assert b"This study is closed" in response.content


def test_an_unknown_token_is_404(db):
    response = Client().get(reverse("annotation:study-entry", args=["no-such-token"]))
    assert response.status_code == 404


def test_a_browser_signed_in_as_someone_else_is_refused(link, annotator_client):
    response = annotator_client.get(entry_url(link, **PROLIFIC))
    assert response.status_code == 409
    assert b"Sign out and start the study" in response.content
    assert not Participant.objects.exists()


def test_a_participant_opening_another_workers_link_is_refused(link):
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    response = client.get(entry_url(link, PROLIFIC_PID="someone_else"))
    assert response.status_code == 409
    assert Participant.objects.count() == 1
    # the same worker's link resumes
    assert client.get(entry_url(link, **PROLIFIC)).status_code == 302


def test_link_use_is_rate_limited_per_address(link, settings):
    settings.FLASKWEB_STUDY_ENTRIES_PER_ADDRESS = 3
    client = Client()
    statuses = [client.get(entry_url(link, worker="")).status_code for _ in range(4)]
    assert statuses == [400, 400, 400, 429]
    assert b"Please wait a minute" in client.get(entry_url(link, **PROLIFIC)).content
    assert not Participant.objects.exists()


def test_link_use_is_rate_limited_per_link(link, settings):
    settings.FLASKWEB_STUDY_ENTRIES_PER_LINK = 2
    cache.delete(f"study-entry:link:{link.pk}")
    statuses = []
    for i in range(3):
        cache.delete("study-entry:addr:127.0.0.1")
        statuses.append(Client().get(entry_url(link, PROLIFIC_PID=f"w{i}")).status_code)
    assert statuses == [302, 302, 429]
    assert Participant.objects.count() == 2
    cache.delete(f"study-entry:link:{link.pk}")


def test_a_study_session_reaches_only_its_own_study(link, campaign, project, tmp_path):
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    other = build_campaign(
        project, build_dataset(project, tmp_path, texts=["x"], name="Other"), name="Other"
    )
    own = reverse("annotation:annotate", args=[campaign.pk])
    assert client.get(own).status_code == 200
    for url in (
        reverse("annotation:annotate", args=[other.pk]),
        reverse("annotation:home"),
        reverse("annotation:catalogue"),
        reverse("account-token"),
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"] == reverse("annotation:study-resume")
    assert client.post(reverse("account-token"), {"action": "create"}).status_code == 403
    api = reverse("annotation-api:api-annotator-campaign-list")
    assert client.get(api).status_code == 302
    page = client.get(reverse("annotation:my-campaigns"))
    assert page.status_code == 200
    # the top bar offers no site navigation, account name or token to a study session
    top = page.content.decode().split("</header>")[0]
    assert reverse("annotation:catalogue") not in top and reverse("account-token") not in top
    assert Participant.objects.get().user.username not in top


def test_consent_agree_then_finish_shows_the_code_and_redirects(link, campaign):
    services.study_settings_update(
        campaign=campaign,
        consent_text="Do you **agree**?",
        completion_code="C0DE",
        screenout_code="",
    )
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    page = client.get(reverse("annotation:study-consent"))
    assert b"<strong>agree</strong>" in page.content
    # the tasks wait until the worker agrees
    assert client.get(reverse("annotation:study-resume"))["Location"] == reverse(
        "annotation:study-consent"
    )
    client.post(reverse("annotation:study-consent"), {"answer": "agree"})
    assert Participant.objects.get().consented_at is not None
    # the finish action appears only once the work is done, as the main action
    bar = client.get(reverse("annotation:annotate", args=[campaign.pk]))
    assert b"Finish and get my completion code" not in bar.content
    assert b"data-study-stop" in bar.content
    work_done(Participant.objects.get())
    page = client.get(reverse("annotation:annotate", args=[campaign.pk])).content.decode()
    assert "Finish and get my completion code" in page
    assert re.search(r"<button[^>]*data-next-task[^>]*data-study-finish-button", page)
    response = client.post(reverse("annotation:study-finish"))
    assert response["Location"] == reverse("annotation:study-finish")
    page = client.get(reverse("annotation:study-finish"))
    content = page.content.decode()
    assert "C0DE" in content
    # followed after a few seconds by study_submit.js, which the worker can stop (no meta
    # refresh: nobody can stop one, WCAG 2.2.1)
    assert "data-auto-follow" in content and "data-auto-stop" in content
    assert 'http-equiv="refresh"' not in content
    assert "https://app.prolific.com/submissions/complete?cc=C0DE" in content


def test_declining_ends_the_study_without_a_code(link, campaign):
    services.study_settings_update(
        campaign=campaign, consent_text="Agree?", completion_code="C0DE", screenout_code=""
    )
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    client.post(reverse("annotation:study-consent"), {"answer": "decline"})
    participant = Participant.objects.get()
    assert participant.state == ParticipantState.DECLINED
    assert not campaign.annotators.filter(pk=participant.user_id).exists()
    page = client.get(reverse("annotation:study-resume"))
    assert page.status_code == 200 and b"C0DE" not in page.content
    assert client.get(reverse("annotation:study-finish"))["Location"] == reverse(
        "annotation:study-resume"
    )


def test_the_mturk_completion_page_allows_its_form_target_only(campaign, settings):
    settings.FLASKWEB_MTURK_SUBMIT_HOSTS = ["http://127.0.0.1:9999"]
    link = services.study_link_create(campaign=campaign, platform="mturk")
    client = Client()
    params = {
        "workerId": "W1",
        "assignmentId": "A1",
        "hitId": "H",
        "turkSubmitTo": "http://127.0.0.1:9999",
    }
    assert client.get(entry_url(link, **params)).status_code == 302
    work_done(Participant.objects.get())
    client.post(reverse("annotation:study-finish"))
    page = client.get(reverse("annotation:study-finish"))
    assert 'action="http://127.0.0.1:9999/mturk/externalSubmit"' in page.content.decode()
    assert "form-action 'self' http://127.0.0.1:9999" in page["Content-Security-Policy"]


def test_an_mturk_preview_makes_no_account_and_may_be_framed_by_mturk(campaign):
    link = services.study_link_create(campaign=campaign, platform="mturk")
    response = Client().get(entry_url(link, assignmentId=platforms.MTURK_PREVIEW, hitId="H"))
    assert response.status_code == 200 and b"preview" in response.content
    assert "frame-ancestors https://www.mturk.com" in response["Content-Security-Policy"]
    assert "X-Frame-Options" not in response
    assert not Participant.objects.exists()


def test_an_accepted_mturk_hit_in_its_frame_opens_the_study_in_a_tab(campaign):
    link = services.study_link_create(campaign=campaign, platform="mturk")
    params = {"workerId": "W1", "assignmentId": "A1", "hitId": "H"}
    response = Client().get(entry_url(link, **params), headers={"Sec-Fetch-Dest": "iframe"})
    assert response.status_code == 200
    assert b'target="_blank"' in response.content and b"Start the study" in response.content
    assert "frame-ancestors https://www.mturk.com" in response["Content-Security-Policy"]
    assert not Participant.objects.exists()
    # the same link in a tab of its own signs the worker in; other pages are never framed
    response = Client().get(entry_url(link, **params))
    assert response.status_code == 302 and Participant.objects.count() == 1
    assert response["X-Frame-Options"] == "DENY"


def test_a_deactivated_participant_is_kept_out(link):
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    participant = Participant.objects.get()
    participant.user.is_active = False
    participant.user.save()
    assert client.get(entry_url(link, **PROLIFIC)).status_code == 403
    assert SESSION_PARTICIPANT not in client.session


def test_the_annotator_bar_shows_for_participants_only(link, campaign, annotator_client):
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    for url in (
        reverse("annotation:annotate", args=[campaign.pk]),
        reverse("annotation:my-campaigns"),
    ):
        assert b"data-study-bar" in client.get(url).content, url
    assert b"data-study-bar" not in annotator_client.get(reverse("annotation:my-campaigns")).content


# --- the researcher's study page ----------------------------------------------------------


def test_researchers_create_a_link_and_see_its_url_with_prolifics_placeholders(
    campaign, researcher_client
):
    url = reverse("annotation:campaign-study-link-create", args=[campaign.pk])
    response = researcher_client.post(url, {"platform": "prolific", "completion_url": ""})
    assert response.status_code == 302
    page = researcher_client.get(reverse("annotation:campaign-study", args=[campaign.pk]))
    content = page.content.decode()
    token = campaign.study_links.get().token
    assert f"/study/{token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&amp;STUDY_ID=" in content


def test_a_hostile_completion_url_is_a_form_error(campaign, researcher_client):
    url = reverse("annotation:campaign-study-link-create", args=[campaign.pk])
    response = researcher_client.post(
        url, {"platform": "generic", "completion_url": "https://u:p@evil.org/"}
    )
    assert response.status_code == 200
    assert b"user name or password" in response.content
    assert not campaign.study_links.exists()


def test_researchers_see_platform_ids_and_close_a_link(link, campaign, researcher_client):
    Client().get(entry_url(link, **PROLIFIC))
    page = researcher_client.get(reverse("annotation:campaign-study", args=[campaign.pk]))
    assert PID.encode() in page.content
    url = reverse("annotation:campaign-study-link-status", args=[campaign.pk, link.pk])
    assert researcher_client.post(url, {"is_open": "0"}).status_code == 302
    link.refresh_from_db()
    assert not link.is_open
    detail = researcher_client.get(reverse("annotation:campaign-detail", args=[campaign.pk]))
    assert b"0 of 1 link open" in detail.content


def test_study_settings_are_saved_and_checked(campaign, researcher_client):
    url = reverse("annotation:campaign-study", args=[campaign.pk])
    response = researcher_client.post(
        url, {"consent_text": "Agree?", "completion_code": "C1", "screenout_code": "S" * 101}
    )
    assert response.status_code == 200
    response = researcher_client.post(
        url, {"consent_text": "Agree?", "completion_code": " C1 ", "screenout_code": ""}
    )
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.consent_text, campaign.completion_code) == ("Agree?", "C1")


def test_annotators_never_see_the_study_page(campaign, annotator_client, outsider_client):
    url = reverse("annotation:campaign-study", args=[campaign.pk])
    assert annotator_client.get(url).status_code == 403
    assert outsider_client.get(url).status_code == 404


def test_worker_ids_stay_out_of_what_other_annotators_see(link, campaign, annotator_client):
    Client().get(entry_url(link, **PROLIFIC))
    for url in (
        reverse("annotation:my-campaigns"),
        reverse("annotation:annotate", args=[campaign.pk]),
    ):
        content = annotator_client.get(url).content.decode()
        assert PID not in content
        assert not re.search(r"p\d+-[0-9a-f]{16}", content)


# --- exports --------------------------------------------------------------------------------


def test_the_long_export_carries_participants_platform_ids_last(link, campaign, annotator):
    # given: a participant and an ordinary annotator each scored a response
    from analytics.exports.services import LONG_COLUMNS, ScoreExport, export_options_clean
    from annotation.services.assignments import (
        ScoreInput,
        assignment_claim_next,
        human_score_submit,
        task_skills,
    )

    participant = enter(link, PROLIFIC)
    campaign.annotators.add(annotator)
    for user in (participant.user, annotator):
        assignment = assignment_claim_next(campaign=campaign, annotator=user)
        scores = [ScoreInput(s.skill_id, 4) for s in task_skills(assignment=assignment)]
        human_score_submit(assignment_id=assignment.pk, annotator=user, scores=scores)
    # when
    options = export_options_clean(project=campaign.project, kind="long", fmt="csv", filters={})
    text = "".join(ScoreExport(options).chunks())
    # then
    rows = list(csv.reader(io.StringIO(text)))
    at = rows[0].index("platform")
    assert rows[0][at : at + 2] == ["platform", "worker_id"]
    assert at > LONG_COLUMNS.index("rubric_label")  # after the older columns
    by_rater = {row[5]: row[at : at + 2] for row in rows[1:]}
    assert by_rater[participant.user.username] == ["prolific", PID]
    assert by_rater[annotator.username] == ["", ""]


def test_the_study_page_reads_a_fixed_number_of_queries(
    link, campaign, researcher_client, django_assert_max_num_queries
):
    url = reverse("annotation:campaign-study", args=[campaign.pk])
    researcher_client.get(url)  # warm the session and the site's caches
    with django_assert_max_num_queries(12) as few:
        researcher_client.get(url)
    for i in range(5):
        enter(link, {"PROLIFIC_PID": f"w{i}"})
    with django_assert_max_num_queries(len(few.captured_queries)):
        page = researcher_client.get(url)
    assert page.content.count(b"<code>w") == 5


@pytest.mark.django_db(transaction=True)
def test_two_first_visits_of_one_worker_at_once_make_one_account(project, tmp_path, researcher):
    # given a link, and two requests of the same new worker racing (two connections)
    import threading

    from django.db import connection

    dataset = build_dataset(project, tmp_path, texts=["An answer"])
    campaign = build_campaign(project, dataset, overlap=1)
    link = services.study_link_create(campaign=campaign, platform="generic")
    results: list = []
    barrier = threading.Barrier(2)

    def visit():
        try:
            barrier.wait()
            admitted = services.participant_enter(link=link, params={"worker": "same"})
            results.append(admitted.participant.pk)
        except services.StudyError as exc:
            results.append(exc.code)
        finally:
            connection.close()

    # when
    threads = [threading.Thread(target=visit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then one made the account; the other, a second browser, must give the resume code
    assert sorted(results, key=str) == sorted(
        [Participant.objects.get().pk, "resume_needed"], key=str
    ), results
    assert Participant.objects.filter(worker_id="same").count() == 1


def test_signing_out_from_the_refusal_page_starts_the_study(link, annotator_client):
    # given the refusal page of a browser signed in as an annotator
    url = entry_url(link, **PROLIFIC)
    page = annotator_client.get(url).content.decode()
    assert f'name="next" value="{url.replace("&", "&amp;")}"' in page
    # when its button signs out (a POST to logout with next)
    response = annotator_client.post(reverse("logout"), {"next": url})
    # then the link is opened again, and starts the study
    assert response.status_code == 302 and response["Location"] == url
    assert annotator_client.get(url)["Location"] == reverse("annotation:study-resume")
    assert Participant.objects.get().worker_id == PID


def test_the_api_lists_participants_with_their_platform_ids(link, campaign, researcher):
    from tests.clients import token_client

    enter(link, PROLIFIC)
    w2 = enter(link, {"PROLIFIC_PID": "w2"})
    work_done(w2)
    services.participant_finish(participant=w2)
    client = token_client(researcher)
    url = f"/api/v1/annotation/campaigns/{campaign.pk}/participants/"
    body = client.get(url).json()
    assert body["count"] == 2
    assert {r["worker_id"]: r["state"] for r in body["results"]} == {
        PID: "working",
        "w2": "completed",
    }
    first = next(r for r in body["results"] if r["worker_id"] == PID)
    assert (first["platform"], first["study_id"], first["session_id"]) == (
        "prolific",
        "study1",
        "sess1",
    )
    assert first["tasks_done"] == 0 and first["link_id"] == link.pk
    completed = client.get(url, {"state": "completed"}).json()["results"]
    assert [r["worker_id"] for r in completed] == ["w2"]
    assert client.get(url, {"state": "nonsense"}).status_code == 400


def test_the_tasks_open_only_between_consent_and_finish(link, campaign):
    services.study_settings_update(
        campaign=campaign, consent_text="Agree?", completion_code="C0DE", screenout_code=""
    )
    client = Client()
    client.get(entry_url(link, **PROLIFIC))
    annotate = reverse("annotation:annotate", args=[campaign.pk])
    # before consent: sent to the consent page (through the current step)
    assert client.get(annotate)["Location"] == reverse("annotation:study-resume")
    client.post(reverse("annotation:study-consent"), {"answer": "agree"})
    assert client.get(annotate).status_code == 200
    # after finishing: no more tasks, back to the code
    work_done(Participant.objects.get())
    client.post(reverse("annotation:study-finish"))
    assert client.get(annotate)["Location"] == reverse("annotation:study-resume")
    assert client.get(reverse("annotation:study-resume"))["Location"] == reverse(
        "annotation:study-finish"
    )
    # coming back through the link does not reopen them
    client.get(entry_url(link, **PROLIFIC))
    assert client.get(annotate).status_code == 302


def test_a_spanish_browser_gets_the_studys_spanish_consent_and_completion_message(link, campaign):
    from annotation.languages import services as languages

    services.study_settings_update(
        campaign=campaign,
        consent_text="Do you **agree**?",
        completion_code="C0DE",
        screenout_code="",
    )
    languages.campaign_language_set(
        campaign=campaign, language="", completion_message="Thank you, well done."
    )
    languages.campaign_translation_set(
        campaign=campaign,
        language="es",
        consent_text="¿Estás **de acuerdo**?",
        completion_message="Gracias, buen trabajo.",
    )
    client = Client(HTTP_ACCEPT_LANGUAGE="es-ES,es;q=0.9")
    client.get(entry_url(link, **PROLIFIC))
    page = client.get(reverse("annotation:study-consent")).content.decode()
    assert "<strong>de acuerdo</strong>" in page and "agree</strong>" not in page
    assert 'lang="es"' in page and "Acepto" in page  # the page's own words too
    client.post(reverse("annotation:study-consent"), {"answer": "agree"})
    work_done(Participant.objects.get())
    client.post(reverse("annotation:study-finish"))
    page = client.get(reverse("annotation:study-finish")).content.decode()
    assert "Gracias, buen trabajo." in page and "Thank you, well done." not in page
    assert "C0DE" in page
    # an English browser gets the campaign's own texts
    english = Client(HTTP_ACCEPT_LANGUAGE="en")
    english.get(
        entry_url(link, PROLIFIC_PID="6f1a2b3c4d5e6f708192a3b4", STUDY_ID="s", SESSION_ID="t")
    )
    assert b"<strong>agree</strong>" in english.get(reverse("annotation:study-consent")).content


def test_a_refused_link_says_why_in_the_browsers_language(link):
    response = Client(HTTP_ACCEPT_LANGUAGE="es").get(
        reverse("annotation:study-entry", args=[link.token]) + "?PROLIFIC_PID=a%20b"
    )
    assert response.status_code == 400
    content = response.content.decode()
    assert "El parámetro «PROLIFIC_PID» no es un identificador válido" in content
    assert "is not a valid id" not in content
