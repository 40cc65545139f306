"""Screening in a real Chromium at a phone's size: training with the expected scores and
explanation after each answer, the qualification test without feedback, then a polite end
for an annotator who fails; no page of it scrolls sideways."""

from __future__ import annotations

import pytest

from annotation.models import Screening, ScreeningPhase
from tests.annotation.test_screening import make_screening_campaign
from tests.browser.conftest import login
from tests.browser.layout import PHONE, check_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def score_card(page, digit: str) -> None:
    """Score every skill of the card with the keyboard, then submit (Enter on Submit)."""
    page.wait_for_selector("[data-skill-row]:focus")
    for _ in range(page.locator("[data-skill-row]").count()):
        page.keyboard.press(digit)
    page.keyboard.press("Enter")


def test_a_failing_annotator_trains_takes_the_test_and_is_screened_out(
    page, live_server, annotator, project, tmp_path
):
    # given a screening campaign (2 training, 2 qualification tasks; known scores 2 and 4)
    campaign = make_screening_campaign(project, tmp_path, [annotator])
    page.set_viewport_size(PHONE)
    login(page, live_server, "alice", "pw-alice")
    url = f"{live_server.url}/campaigns/{campaign.pk}/annotate/"
    page.goto(url)
    # when she trains: the phase is shown, and each answer is followed by the explanation
    for n in (1, 2):
        assert f"Training {n} of 2" in page.inner_text("[data-screening-phase]")
        score_card(page, "5")
        page.wait_for_selector(".feedback")
        card = page.inner_text("#task-card")
        assert "Expected" in card and "wrong year" in card
        page.click("[data-next-task]")
    # then the test gives no feedback between its tasks
    for n in (1, 2):
        page.wait_for_selector(f"[data-screening-phase]:has-text('Qualification {n} of 2')")
        score_card(page, "5")
    # and, far from the known scores, she is thanked and given nothing more
    page.wait_for_selector(".all-done")
    assert "did not reach the agreement" in page.inner_text("#task-card")
    assert page.locator(".feedback").count() == 0
    assert Screening.objects.get(annotator=annotator).phase == ScreeningPhase.FAILED
    check_pages(page, {"screened out": url}, ready="#task-card")


def test_the_screening_pages_fit_a_phone(
    page, live_server, annotator, researcher, project, tmp_path
):
    campaign = make_screening_campaign(project, tmp_path, [annotator])
    login(page, live_server, "alice", "pw-alice")
    check_pages(
        page,
        {"training": f"{live_server.url}/campaigns/{campaign.pk}/annotate/"},
        ready="[data-screening-phase]",
    )
    page.context.clear_cookies()
    login(page, live_server, "rita", "pw-rita")
    check_pages(
        page,
        {
            "screening page": f"{live_server.url}/campaigns/{campaign.pk}/screening/",
            "campaign page": f"{live_server.url}/campaigns/{campaign.pk}/",
        },
        ready="main",
    )
