"""The annotator's language (annotation/languages/, docs/LANGUAGES.md): which language a page
is in, a campaign's texts per language with their fallback, the picker, the language recorded
with every submission, the staff page and API with their audit, and the submit path's query
count."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.languages import services
from annotation.languages.selectors import (
    browser_language,
    campaign_texts,
    language_choose,
    languages_cache_clear,
)
from annotation.models import Assignment, AssignmentStatus, CampaignTextChange, CampaignTranslation
from annotation.services.assignments import (
    AssignmentError,
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from tests.annotation.test_annotate_api import api
from tests.annotation.test_annotate_views import (  # noqa: F401  (fixtures)
    HX,
    annotate_url,
    build_campaign,
    build_dataset,
    campaign,
    current,
    dataset,
    score_post,
    submit_url,
)

ES_ANCHORS = [f"nivel {n} en español" for n in range(1, 6)]
OFFERED = ("en", "es")


# --- the order of the rules (no database) ------------------------------------------------------


def test_a_picked_language_wins_when_the_campaign_offers_it():
    assert language_choose(picked="es", fixed="en", offered=OFFERED, accept="ar") == "es"


def test_a_picked_language_the_campaign_does_not_offer_is_ignored():
    assert language_choose(picked="ar", fixed="", offered=OFFERED, accept="es") == "es"


def test_the_study_language_wins_over_the_browser():
    assert language_choose(picked="", fixed="en", offered=OFFERED, accept="es") == "en"


def test_the_browser_chooses_among_the_offered_languages_only():
    assert language_choose(picked="", fixed="", offered=OFFERED, accept="ar, es-MX;q=0.8") == "es"
    assert browser_language("fr, ar;q=0.5", OFFERED) == ""


def test_without_any_rule_the_site_default_is_used():
    assert language_choose(picked="", fixed="", offered=OFFERED, accept="fr") == "en"
    assert language_choose(picked="", fixed="", offered=OFFERED, accept="") == "en"


# --- texts, fallback and validation -------------------------------------------------------------


@pytest.fixture
def spanish(campaign):  # noqa: F811
    """The campaign's instructions and Factuality anchors in Spanish (no consent text)."""
    services.campaign_translation_set(
        campaign=campaign,
        language="es",
        instructions="Lee la respuesta **entera** primero.",
        anchors={"factuality": ES_ANCHORS},
    )
    campaign.refresh_from_db()
    return campaign


@pytest.mark.django_db
def test_each_text_falls_back_to_the_campaigns_own(spanish):
    spanish.consent_text, spanish.completion_message = "I agree to take part.", "Thanks!"
    texts = campaign_texts(campaign=spanish, language="es")
    assert texts.instructions == "Lee la respuesta **entera** primero."
    assert texts.consent_text == "I agree to take part."  # not translated: the own text
    assert texts.completion_message == "Thanks!"
    assert list(texts.anchors.values()) == [ES_ANCHORS]  # only the translated skill
    english = campaign_texts(campaign=spanish, language="ar")  # no Arabic texts at all
    assert english.instructions == spanish.instructions and english.anchors == {}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"language": "fr"}, "language", "unknown language 'fr'"),
        ({"anchors": {"factuality": ES_ANCHORS[:4]}}, "anchors", "exactly 5 anchors"),
        ({"anchors": {"factuality": [*ES_ANCHORS[:4], " "]}}, "anchors", "level 5 is empty"),
        ({"anchors": {"coherence-x": ES_ANCHORS}}, "anchors", "not a skill of this campaign"),
    ],
)
def test_a_translation_is_refused_with_a_specific_reason(campaign, changes, field, says):  # noqa: F811
    arguments = {"campaign": campaign, "language": "es", **changes}
    with pytest.raises(ValidationError) as refused:
        services.campaign_translation_set(**arguments)
    assert says in " ".join(refused.value.message_dict[field])
    assert not CampaignTranslation.objects.filter(campaign=campaign).exists()


@pytest.mark.django_db
def test_a_live_campaigns_texts_can_be_corrected_and_every_change_is_recorded(spanish, researcher):
    before = spanish.updated_at
    services.campaign_translation_set(campaign=spanish, language="es", instructions="Corregido.")
    assert services.campaign_translation_delete(campaign=spanish, language="es")
    changes = list(CampaignTextChange.objects.filter(campaign=spanish).order_by("id"))
    assert [(c.language, c.action) for c in changes] == [
        ("es", "set"),
        ("es", "set"),
        ("es", "removed"),
    ]
    assert changes[1].before["instructions"].startswith("Lee") and changes[1].after == {
        "consent_text": "",
        "instructions": "Corregido.",
        "completion_message": "",
        "anchors": {},
    }
    spanish.refresh_from_db()
    assert spanish.updated_at > before  # the pages' cache of its languages moves on


# --- pages: which language, the picker ---------------------------------------------------------


@pytest.mark.django_db
def test_the_annotate_page_follows_the_browser_among_the_campaigns_languages(
    annotator_client, spanish
):
    page = annotator_client.get(annotate_url(spanish), headers={"Accept-Language": "es"})
    assert page["Content-Language"] == "es"
    assert "Accept-Language" in page["Vary"]
    body = page.content.decode()
    assert '<html lang="es"' in body and "Lee la respuesta" in body
    assert ES_ANCHORS[2] in body  # the translated rubric anchors on the card
    arabic = annotator_client.get(annotate_url(spanish), headers={"Accept-Language": "ar"})
    assert arabic["Content-Language"] == "en"  # not offered: the campaign's own language


@pytest.mark.django_db
def test_the_study_language_is_used_whatever_the_browser(annotator_client, spanish):
    services.campaign_language_set(campaign=spanish, language="en", completion_message="")
    page = annotator_client.get(annotate_url(spanish), headers={"Accept-Language": "es"})
    assert page["Content-Language"] == "en" and "Lee la respuesta" not in page.content.decode()


@pytest.mark.django_db
def test_staff_pages_stay_in_the_site_language(researcher_client, spanish):
    url = reverse("annotation:campaign-detail", args=[spanish.pk])
    page = researcher_client.get(url, headers={"Accept-Language": "es"})
    assert page.status_code == 200 and page["Content-Language"] == "en"


@pytest.mark.django_db
def test_the_picker_sets_an_offered_language_and_refuses_another(annotator_client, spanish):
    pick = reverse("annotation:language-pick")
    here = annotate_url(spanish)
    page = annotator_client.get(here, headers={"Accept-Language": "en"})
    assert b"data-language-picker" in page.content  # two languages offered: the picker
    refused = annotator_client.post(pick, {"language": "ar", "campaign": spanish.pk, "next": here})
    assert refused.status_code == 400
    assert annotator_client.get(here)["Content-Language"] == "en"
    done = annotator_client.post(pick, {"language": "es", "campaign": spanish.pk, "next": here})
    assert done.status_code == 302 and done["Location"] == here
    page = annotator_client.get(here, headers={"Accept-Language": "en"})  # the pick wins
    assert page["Content-Language"] == "es"
    away = annotator_client.post(pick, {"language": "es", "next": "https://elsewhere.example/"})
    assert away["Location"] == reverse("annotation:my-campaigns")  # never off the site


@pytest.mark.django_db
def test_a_campaign_with_one_language_shows_no_picker(annotator_client, campaign):  # noqa: F811
    assert b"data-language-picker" not in annotator_client.get(annotate_url(campaign)).content


# --- the language recorded with each submission ------------------------------------------------


@pytest.mark.django_db
def test_a_page_submission_records_the_language_of_the_page(annotator_client, annotator, spanish):
    annotator_client.get(annotate_url(spanish), headers={"Accept-Language": "es"})
    task = current(spanish, annotator)
    answer = annotator_client.post(
        submit_url(task), score_post(task), headers={**HX, "Accept-Language": "es"}
    )
    assert answer.status_code == 200
    task.refresh_from_db()
    assert (task.status, task.language) == (AssignmentStatus.SUBMITTED, "es")


@pytest.mark.django_db
def test_an_api_submission_records_the_language_it_names_or_none(annotator, campaign):  # noqa: F811
    client = api(annotator)
    base = "/api/v1/annotation"
    recorded = []
    for extra in ({"language": "ar"}, {}):
        task = client.post(f"{base}/campaigns/{campaign.pk}/next/").json()
        scores = [{"skill_id": s["skill_id"], "score": 4} for s in task["skills"]]
        url = f"{base}/assignments/{task['assignment_id']}/submit/"
        if extra:  # a language not of the site is refused first
            bad = client.post(url, {"scores": scores, "language": "fr"}, format="json")
            assert bad.status_code == 400 and "language" in bad.json()["fields"]
        assert client.post(url, {"scores": scores, **extra}, format="json").status_code == 201
        recorded.append(Assignment.objects.get(pk=task["assignment_id"]).language)
    assert recorded == ["ar", ""]


@pytest.mark.django_db
def test_the_submit_service_refuses_an_unknown_language(annotator, campaign):  # noqa: F811
    lease = assignment_claim_next(campaign=campaign, annotator=annotator)
    scores = [ScoreInput(s.skill_id, 4) for s in task_skills(assignment=lease)]
    with pytest.raises(AssignmentError, match="unknown language"):
        human_score_submit(assignment_id=lease.pk, annotator=annotator, scores=scores, language="x")


@pytest.mark.django_db
def test_choosing_the_language_adds_no_query_to_a_page_submission(
    annotator_client, annotator, project, tmp_path
):
    counted_set = build_dataset(project, tmp_path, texts=["a", "b", "c"], name="Counted")
    campaign = build_campaign(project, counted_set, annotators=[annotator], name="Counted")  # noqa: F811

    def submit_queries(**headers) -> int:
        annotator_client.get(annotate_url(campaign), headers=headers)  # the card (warm caches)
        task = current(campaign, annotator)
        with CaptureQueriesContext(connection) as counted:
            annotator_client.post(submit_url(task), score_post(task), headers={**HX, **headers})
        return len(counted)

    plain = submit_queries()  # one language, nothing to choose
    services.campaign_translation_set(
        campaign=campaign, language="es", anchors={"factuality": ES_ANCHORS}
    )
    languages_cache_clear()
    spanish = submit_queries(**{"Accept-Language": "es"})
    assert spanish == plain


# --- the staff page and the API -----------------------------------------------------------------


@pytest.mark.django_db
def test_the_languages_page_saves_a_translation_and_says_what_is_wrong(researcher_client, campaign):  # noqa: F811
    url = reverse("annotation:campaign-translation", args=[campaign.pk, "es"])
    assert researcher_client.get(url).status_code == 200
    data = {"instructions": "Hola", **{f"anchor__factuality__{n}": f"n{n}" for n in range(1, 5)}}
    wrong = researcher_client.post(url, data)
    assert wrong.status_code == 200 and "level 5 is empty" in wrong.content.decode()
    data["anchor__factuality__5"] = "n5"
    assert researcher_client.post(url, data).status_code == 302
    saved = CampaignTranslation.objects.get(campaign=campaign, language="es")
    assert saved.anchors == {"factuality": ["n1", "n2", "n3", "n4", "n5"]}
    page = researcher_client.get(reverse("annotation:campaign-languages", args=[campaign.pk]))
    assert b'data-translation="es"' in page.content and b"data-text-change" in page.content


@pytest.mark.django_db
def test_the_translations_api_puts_gets_and_deletes_a_language(researcher, campaign):  # noqa: F811
    client = api(researcher)
    url = f"/api/v1/annotation/campaigns/{campaign.pk}/translations/es/"
    body = {"consent_text": "Acepto.", "anchors": {"factuality": ES_ANCHORS}}
    put = client.put(url, body, format="json")
    assert put.status_code == 200 and put.json()["anchors"] == {"factuality": ES_ANCHORS}
    assert client.get(url).json()["consent_text"] == "Acepto."
    listed = client.get(f"/api/v1/annotation/campaigns/{campaign.pk}/translations/").json()
    assert [t["language"] for t in listed] == ["es"]
    bad = client.put(url, {"anchors": {"factuality": ["solo uno"]}}, format="json")
    assert bad.status_code == 400 and "exactly 5 anchors" in str(bad.json())
    unknown = client.put(url.replace("/es/", "/fr/"), body, format="json")
    assert unknown.status_code == 400 and "unknown language" in str(unknown.json())
    assert client.delete(url).status_code == 204 and client.get(url).status_code == 404
    detail = client.patch(
        f"/api/v1/annotation/campaigns/{campaign.pk}/",
        {"language": "es", "completion_message": "¡Gracias!"},
        format="json",
    )
    assert detail.status_code == 200
    assert (detail.json()["language"], detail.json()["completion_message"]) == ("es", "¡Gracias!")
    own = CampaignTextChange.objects.filter(campaign=campaign, language="").get()
    assert own.after == {"language": "es", "completion_message": "¡Gracias!"}


@pytest.mark.django_db
def test_a_change_made_with_an_api_token_is_recorded_with_its_user(researcher, campaign):  # noqa: F811
    """The token signs in inside the view, after the middleware: the record takes the user
    signed in when it is written (it had no one)."""
    client = api(researcher)
    url = f"/api/v1/annotation/campaigns/{campaign.pk}/translations/es/"
    put = client.put(url, {"consent_text": "Acepto.", "anchors": {}}, format="json")
    assert put.status_code == 200, put.content
    assert client.delete(url).status_code == 204
    changes = CampaignTextChange.objects.filter(campaign=campaign, language="es").order_by("id")
    assert [(c.action, c.changed_by_id, c.context) for c in changes] == [
        ("set", researcher.pk, f"PUT {url}"),
        ("removed", researcher.pk, f"DELETE {url}"),
    ]
