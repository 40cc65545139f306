"""A study in Arabic, right to left, in a real Chromium whose locale is Arabic (so its
Accept-Language is too): the page says `dir="rtl"`, the score scale reads 1 → 5 from right
to left, the pair card puts Response A on the reading-start side (the right), nothing
scrolls sideways on a phone or a laptop; and the same pair card in Spanish reads left to
right again. Screenshots go to FLASKWEB_TEST_SHOTS when it is set (docs/LANGUAGES.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.cache import cache

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Campaign, CampaignMode
from annotation.study import services
from tests.annotation.test_annotate_api import MODELS, make_dataset
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.browser.layout import LAPTOP, PHONE, check_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = Path(os.environ["FLASKWEB_TEST_SHOTS"]) if os.environ.get("FLASKWEB_TEST_SHOTS") else None


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.delete("study-entry:addr:127.0.0.1")


@pytest.fixture
def arabic(chromium):
    context = chromium.new_context(locale="ar", viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def _study(campaign: Campaign, *, consent: str = "") -> str:
    services.study_settings_update(
        campaign=campaign, consent_text=consent, completion_code="RTL-1", screenout_code=""
    )
    link = services.study_link_create(campaign=campaign, platform="prolific")
    return f"/study/{link.token}/?PROLIFIC_PID=5f1a2b3c4d5e6f708192a3b4&STUDY_ID=s&SESSION_ID=x"


def _direction(page) -> tuple[str, str]:
    lang, direction = page.evaluate("[document.documentElement.lang, document.documentElement.dir]")
    return lang, direction


def _xs(page, selector: str) -> list[float]:
    return page.eval_on_selector_all(
        selector, "els => els.map(e => e.getBoundingClientRect().left)"
    )


def test_an_arabic_study_reads_right_to_left(arabic, live_server, project, tmp_path):
    page = arabic
    # a pointwise study whose language is Arabic, with a consent page
    dataset = build_dataset(project, tmp_path, texts=["First answer", "Second answer"])
    campaign = build_campaign(project, dataset, overlap=1, language="ar")
    page.goto(live_server.url + _study(campaign, consent="You agree to **this**."))
    page.wait_for_selector("[data-study-consent]")
    assert _direction(page) == ("ar", "rtl")
    assert "قبل أن تبدأ" in page.inner_text("h1")
    consent = page.url
    page.click("button[value=agree]")
    page.wait_for_selector("[data-study-instructions]")
    instructions = page.url
    page.click("[data-study-instructions] a.button")
    page.wait_for_selector("[data-annotate-form]")
    assert _direction(page) == ("ar", "rtl")
    assert "إرسال والتالي" in page.inner_text("[data-submit]")
    # the scale reads 1 -> 5 in the reading direction: right to left
    row = "[data-skill-row]:first-of-type .score-btn:not(.na) span"
    xs = _xs(page, row)
    assert len(xs) == 5 and xs == sorted(xs, reverse=True), xs
    # the focused level is announced in Arabic (annotate.js reads the page's words)
    page.focus("[data-skill-row]:first-of-type input[value=na]")
    assert "لا ينطبق" in page.inner_text("[data-skill-row]:first-of-type [data-anchor-now]")
    check_pages(
        page,
        {"rtl consent": consent, "rtl instructions": instructions, "rtl scoring": page.url},
        viewports=(PHONE, LAPTOP),
        shots=SHOTS,
        ready="main",
    )


def test_an_arabic_pair_card_puts_response_a_on_the_right(arabic, live_server, project, tmp_path):
    page = arabic
    dataset = make_dataset(project, tmp_path, items=2, models=MODELS)
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="أزواج",
        overlap=1,
        mode=CampaignMode.PAIRWISE,
        pair_choices=["a", "b", "tie", "both_bad"],
        pair_strength=True,
        language="ar",
    )
    campaign_activate(campaign=campaign)
    page.goto(live_server.url + _study(campaign))
    page.wait_for_selector("[data-pair-form]")
    assert _direction(page) == ("ar", "rtl")
    assert "الإجابة A" in page.text_content("[data-side=left] h2")
    a, b = _xs(page, "[data-side=left]")[0], _xs(page, "[data-side=right]")[0]
    assert a > b  # A, first in reading order, is on the right
    # the choices follow the reading order too: "A is better" is the rightmost
    choices = _xs(page, "[data-pair-row]:first-of-type .pair-buttons .pair-btn span")
    assert choices == sorted(choices, reverse=True)
    check_pages(page, {"rtl pair": page.url}, viewports=(PHONE, LAPTOP), shots=SHOTS)
    # the same card in Spanish reads left to right again
    campaign.refresh_from_db()
    campaign.language = "es"
    campaign.save()
    page.set_viewport_size(LAPTOP)
    page.goto(page.url)
    page.wait_for_selector("[data-pair-form]")
    assert _direction(page) == ("es", "ltr")
    assert "Respuesta A" in page.text_content("[data-side=left] h2")
    assert _xs(page, "[data-side=left]")[0] < _xs(page, "[data-side=right]")[0]
    if SHOTS is not None:
        page.screenshot(path=str(SHOTS / "es-pair-1440.png"), full_page=True)
