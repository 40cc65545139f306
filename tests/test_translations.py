"""The interface's translations (docs/LANGUAGES.md): the Spanish and Arabic catalogues are
complete, compiled, consistent in their placeholders and current with the code, and the
annotator pages rendered in Spanish show no English sentence left behind."""

from __future__ import annotations

import gettext
import os
import re
import shutil
import uuid
from collections import Counter
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Campaign, CampaignMode
from annotation.study import services as study
from tests.annotation.test_annotate_api import MODELS, make_dataset
from tests.annotation.test_annotate_views import build_campaign, build_dataset, score_post

LOCALE = Path(settings.BASE_DIR) / "locale"
LANGUAGES = ("es", "ar")
#: What makemessages leaves out: what is not the project's own interface (docs/LANGUAGES.md
#: gives the same command).
IGNORE = [
    ".venv",
    "node_modules",
    "clients",
    "tests",
    "bench",
    "devtools",
    "docs",
    "scripts",
    "var",
    "static",
    "*.egg-info",
]
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|\{\w+\}")


def _po(language: str) -> polib.POFile:
    return polib.pofile(str(LOCALE / language / "LC_MESSAGES" / "django.po"))


def _label(entry: polib.POEntry) -> str:
    return f"{entry.msgctxt}|{entry.msgid}" if entry.msgctxt else entry.msgid


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_entry_is_translated_and_none_is_fuzzy(language):
    po = _po(language)
    assert len(po) > 200
    assert not po.metadata_is_fuzzy and po.metadata["Language"] == language
    untranslated = [_label(e) for e in po.untranslated_entries()]
    fuzzy = [_label(e) for e in po.fuzzy_entries()]
    obsolete = [_label(e) for e in po.obsolete_entries()]
    assert untranslated == [] and fuzzy == [] and obsolete == []
    # every plural form filled (Arabic has six)
    forms = int(re.search(r"nplurals=(\d+)", po.metadata["Plural-Forms"]).group(1))
    for entry in po:
        if entry.msgid_plural:
            assert len(entry.msgstr_plural) == forms, _label(entry)
            assert all(s.strip() for s in entry.msgstr_plural.values()), _label(entry)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_mo_file_is_the_compiled_po_file(language):
    with open(LOCALE / language / "LC_MESSAGES" / "django.mo", "rb") as f:
        catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
    expected: dict = {}
    for entry in _po(language).translated_entries():
        key = f"{entry.msgctxt}\x04{entry.msgid}" if entry.msgctxt else entry.msgid
        if entry.msgid_plural:
            for i, text in entry.msgstr_plural.items():
                expected[(key, int(i))] = text
        else:
            expected[key] = entry.msgstr
    compiled = {k: v for k, v in catalog.items() if k != ""}
    stale = sorted(str(k) for k in expected if compiled.get(k) != expected[k])
    extra = sorted(str(k) for k in compiled if k not in expected)
    assert stale == [] and extra == [], "run manage.py compilemessages (docs/LANGUAGES.md)"


@pytest.mark.parametrize("language", LANGUAGES)
def test_placeholders_are_the_same_in_every_translation(language):
    wrong = []
    for entry in _po(language):
        source = Counter(PLACEHOLDER.findall(entry.msgid))
        if entry.msgid_plural:
            source = source | Counter(PLACEHOLDER.findall(entry.msgid_plural))
            texts = list(entry.msgstr_plural.values())
        else:
            texts = [entry.msgstr]
        for text in texts:
            if set(PLACEHOLDER.findall(text)) != set(source):
                wrong.append((_label(entry), text))
    assert wrong == []


def test_the_catalogue_holds_every_message_of_the_code(monkeypatch):
    """makemessages, run into a copy of locale/, finds no msgid the committed .po lacks.

    makemessages writes each source file's messages into the first locale path whose parent
    directory holds the file, and puts any directory named locale/ it walks past first: so
    the copy sits beside locale/ in the checkout and locale/ is not walked. Otherwise every
    message goes to the real catalogue (rewritten by the test) and the copy is left as it
    was, so that the test could not fail."""
    if shutil.which("xgettext") is None:
        pytest.skip("xgettext (GNU gettext) is not installed")
    copy = Path(settings.BASE_DIR) / f".locale-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(LOCALE, copy)
    committed = (LOCALE / "es" / "LC_MESSAGES" / "django.po").read_bytes()
    monkeypatch.chdir(settings.BASE_DIR)
    try:
        with override_settings(LOCALE_PATHS=[copy]):
            call_command(
                "makemessages",
                locale=["es"],
                ignore_patterns=[*IGNORE, copy.name, "locale"],
                no_obsolete=True,
                verbosity=0,
            )
        found = polib.pofile(str(copy / "es" / "LC_MESSAGES" / "django.po"))
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert (LOCALE / "es" / "LC_MESSAGES" / "django.po").read_bytes() == committed
    # the copy is the catalogue makemessages rewrote (its header dated now, not at commit)
    assert found.metadata["POT-Creation-Date"] != _po("es").metadata["POT-Creation-Date"]
    known = {(e.msgctxt, e.msgid) for e in _po("es")}
    missing = sorted(_label(e) for e in found if (e.msgctxt, e.msgid) not in known)
    assert missing == [], "run manage.py makemessages and translate (docs/LANGUAGES.md)"


# --- the annotator pages in Spanish ------------------------------------------------------------

#: per page, English sentences of its own text that must be gone under `es`, and one Spanish
#: sentence that must be there
SCORING = (
    [
        "Submit and next",
        "Response to score",
        "Full rubric",
        "Keyboard shortcuts",
        "Skip this task or flag a broken item",
        "Time spent",
        "Campaign instructions",
        "Point at or focus a score",
        "Log out",
        "My tasks",
    ],
    "Enviar y siguiente",
)
PAIR = (
    [
        "Response A",
        "Response B",
        "How much better?",
        "A is better",
        "Both bad",
        "Which is better:",
        "Submit and next",
        "All things considered",
    ],
    "Respuesta A",
)
MY_TASKS = (
    ["My tasks", "Available now", "Scoring works with the keyboard alone", "Log out"],
    "Mis tareas",
)
LOGIN = (["Log in", "Username", "Password"], "Iniciar sesión")


def _assert_spanish(response, sentinels):
    english, spanish = sentinels
    assert response.status_code == 200, response.status_code
    text = response.content.decode()
    left = [phrase for phrase in english if phrase in text]
    assert left == [] and spanish in text
    assert '<html lang="es" dir="ltr">' in text


@pytest.mark.django_db
def test_the_scoring_pages_render_in_spanish(project, tmp_path, annotator, annotator_client):
    dataset = build_dataset(project, tmp_path, texts=["Answer one", "Answer two"])
    campaign = build_campaign(project, dataset, annotators=[annotator], language="es")
    client = annotator_client
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "es"
    _assert_spanish(client.get(reverse("annotation:my-campaigns")), MY_TASKS)
    page = client.get(reverse("annotation:annotate", args=[campaign.pk]))
    _assert_spanish(page, SCORING)
    found = re.search(rb'hx-post="/assignments/(\d+)/submit/"', page.content)
    assert found
    from annotation.models import Assignment

    assignment = Assignment.objects.get(pk=int(found.group(1)))
    after = client.post(
        reverse("annotation:annotate-submit", args=[assignment.pk]), score_post(assignment)
    )
    assert "Guardado." in after.content.decode() and "Saved." not in after.content.decode()
    assert "hechas" in after.content.decode()  # the progress line


@pytest.mark.django_db
def test_the_pair_card_renders_in_spanish_and_arabic(
    project, tmp_path, annotator, annotator_client
):
    dataset = make_dataset(project, tmp_path, items=2, models=MODELS)
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Pairs",
        overlap=1,
        annotators=[annotator],
        mode=CampaignMode.PAIRWISE,
        pair_choices=["a", "b", "tie", "both_bad"],
        pair_strength=True,
        pair_rationale=True,
        language="es",
    )
    campaign_activate(campaign=campaign)
    url = reverse("annotation:annotate", args=[campaign.pk])
    _assert_spanish(annotator_client.get(url), PAIR)
    _set_language(campaign, "ar")
    text = annotator_client.get(url).content.decode()
    assert '<html lang="ar" dir="rtl">' in text
    assert "الإجابة A" in text and "Response A" not in text


def _set_language(campaign: Campaign, language: str) -> None:
    campaign.refresh_from_db()
    campaign.language = language
    campaign.save()


@pytest.mark.django_db
def test_the_study_pages_render_in_spanish(project, tmp_path, researcher):
    dataset = build_dataset(project, tmp_path, texts=["Answer one", "Answer two"])
    campaign = build_campaign(project, dataset, overlap=1, language="es")
    study.study_settings_update(
        campaign=campaign, consent_text="Consent body.", completion_code="C0DE", screenout_code=""
    )
    link = study.study_link_create(campaign=campaign, platform="prolific", created_by=researcher)
    client = Client(HTTP_ACCEPT_LANGUAGE="es")
    entry = reverse("annotation:study-entry", args=[link.token])
    query = "?PROLIFIC_PID=5f1a2b3c4d5e6f708192a3b4&STUDY_ID=s1&SESSION_ID=x1"
    client.get(entry + query, follow=True)
    consent = client.get(reverse("annotation:study-consent"))
    _assert_spanish(consent, (["Before you start", "I agree", "I do not agree"], "Acepto"))
    client.post(reverse("annotation:study-consent"), {"answer": "agree"})
    instructions = client.get(reverse("annotation:study-instructions"))
    _assert_spanish(
        instructions, (["The instructions stay one click away", ": instructions"], "Instrucciones")
    )
    finish = client.get(reverse("annotation:study-finish"))
    _assert_spanish(
        finish,
        (
            [
                "The study is not finished yet",
                "Stop without finishing",
                "Back to the tasks",
                "Leave the study without a code",
                "Resume code",
                "this study asks for",
            ],
            "El estudio aún no ha terminado",
        ),
    )
    refused = Client(HTTP_ACCEPT_LANGUAGE="es").get(entry)
    assert refused.status_code == 400
    assert "Este enlace no se puede usar" in refused.content.decode()


@pytest.mark.django_db
def test_the_login_page_renders_in_spanish():
    _assert_spanish(Client(HTTP_ACCEPT_LANGUAGE="es").get(reverse("login")), LOGIN)
