"""The annotator's pages on a phone (390 x 844, and 360 wide) and a laptop (1440 x 900) in
Chromium: nothing scrolls sideways, score buttons are finger-sized, the response and the
first skill's buttons come early on a phone, and keyboard-only scoring works and times every
skill. Screenshots go to the test's tmp dir (shots/)."""

from __future__ import annotations

import pytest

from annotation.campaigns.services import campaign_set_status, gold_task_set
from annotation.models import Assignment, AssignmentStatus, CampaignStatus, HumanScore, Response
from annotation.pace.services import campaign_pace_update
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.browser.conftest import login
from tests.browser.layout import (
    LAPTOP,
    PHONE,
    SMALL_PHONE,
    check_pages,
    fits,
    shoot,
    small_targets,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# A long answer and long unbroken words: what pushes a narrow page sideways if anything can.
LONG = (
    "\n\n".join(
        f"Paragraph {n}: " + "a fairly long sentence of the answer. " * 12 for n in range(20)
    )
    + "\n\nhttps://example.org/"
    + "a-very-long-path-segment-" * 8
)
# On a 844 px phone the first score button must start within 1.25 screens from the top: past
# the page's header, the progress line, the instruction box (at most 16 % of the screen) and
# the response box (at most 34 %), i.e. after at most a quarter screen of scrolling, never
# after the rubric (the issue measured 1,647 px, 1.95 screens, with the rubric in between).
FIRST_BUTTON_SCREENS = 1.25


@pytest.fixture
def campaign(live_server, annotator, project, tmp_path):
    dataset = build_dataset(project, tmp_path, texts=[LONG, "The second answer.", "The third."])
    campaign = build_campaign(
        project,
        dataset,
        annotators=[annotator],
        name="A campaign with a rather long name that has to wrap on a phone screen",
        instructions="Score **each** skill from 1 to 5; use N/A only when a skill does not apply.",
    )
    campaign_pace_update(
        campaign=campaign, break_every=2, break_minutes=5, hourly_wage=None, wage_currency="USD"
    )
    return campaign


def first_button_and_response(page) -> dict:
    return page.evaluate(
        "() => { const b = document.querySelector('.score-btn').getBoundingClientRect();"
        " const r = document.querySelector('.response-box').getBoundingClientRect();"
        " return {button: b.top + scrollY, response: r.top + scrollY,"
        " page: document.documentElement.scrollHeight}; }"
    )


def test_annotator_pages_fit_phones_and_laptops(page, live_server, annotator, campaign, tmp_path):
    shots = tmp_path / "shots"
    # the log-in page, signed out
    check_pages(page, {"login": f"{live_server.url}/login/"}, shots=shots)
    # signed in: My tasks and the scoring page
    page.set_viewport_size(LAPTOP)
    login(page, live_server, "alice", "pw-alice")
    scoring = f"{live_server.url}/campaigns/{campaign.pk}/annotate/"
    check_pages(page, {"my-tasks": f"{live_server.url}/tasks/", "scoring": scoring}, shots=shots)
    for viewport in (PHONE, LAPTOP):
        page.set_viewport_size(viewport)
        page.goto(scoring)
        page.wait_for_selector("[data-skill-row]:focus")
        # every score button is a finger-sized target
        assert page.locator(".score-btn").count() == 18
        assert small_targets(page, ".score-btn") == []
        # each skill shows one rubric level, the full rubric is one tap away
        assert page.locator("details[data-rubric][open]").count() == 0
        page.hover(".score-btn >> nth=2")
        assert page.inner_text("[data-anchor-now] >> nth=0").startswith("3")
        spots = first_button_and_response(page)
        if viewport is PHONE:
            assert spots["response"] < PHONE["height"], spots
            assert spots["button"] < FIRST_BUTTON_SCREENS * PHONE["height"], spots
        else:
            assert spots["button"] < LAPTOP["height"], spots  # a laptop needs no scrolling
        page.click("details[data-rubric] summary >> nth=0")
        assert page.locator("details[data-rubric][open] .anchors li").count() == 5
        shoot(page, shots, "scoring-rubric-open")
        assert fits(page)
    # My tasks on a phone: the Start / Continue button and Log out are on screen
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/tasks/")
    for selector in ("#campaign-list .button", "form.logout button"):
        box = page.locator(selector).first.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (selector, box)


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_keyboard_only_scoring_times_every_skill(
    page, live_server, annotator, campaign, viewport, tmp_path
):
    # given the scoring page at this size, focused on the first skill
    page.set_viewport_size(viewport)
    login(page, live_server, "alice", "pw-alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")
    first = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    action = page.get_attribute("[data-annotate-form]", "hx-post")
    # when each skill is scored by a key, quickly (the focus moves on at every key, within
    # one 250 ms tick of the clock), F shows the full rubric, and Enter submits
    page.keyboard.press("f")
    assert page.locator("details[data-rubric][open]").count() == 1
    for key in ("4", "2", "5"):
        page.wait_for_timeout(60)
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-annotate-form]');"
        " return f && f.getAttribute('hx-post') !== prev }",
        arg=action,
    )
    # then every skill's time is the focused time on its row, never 0 or missing
    times = list(HumanScore.objects.filter(assignment=first).values_list("time_ms", flat=True))
    assert len(times) == 3 and all(t is not None and t > 0 for t in times), times
    assert page.inner_text("[data-progress]").startswith("1 of 3 done")
    assert "Break suggested after 1 more task" in page.inner_text("[data-progress]")
    # and after the second task a break card, left with Enter (its Continue is focused)
    action = page.get_attribute("[data-annotate-form]", "hx-post")
    for key in ("3", "3", "3"):
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_selector(".break-card")
    shoot(page, tmp_path / "shots", "break")
    assert fits(page)
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-skill-row]:focus")
    assert page.get_attribute("[data-annotate-form]", "hx-post") != action


def test_the_feedback_and_idle_cards_fit_a_phone(page, live_server, annotator, project, tmp_path):
    # given a campaign serving a gold task second, with feedback, and a paused one
    dataset = build_dataset(project, tmp_path, texts=["One.", "Two.", LONG], name="Gold set")
    campaign = build_campaign(
        project, dataset, annotators=[annotator], gold_rate=0.5, gold_feedback=True
    )
    response = Response.objects.filter(item__dataset=dataset).order_by("pk").last()
    gold_task_set(
        campaign=campaign,
        response=response,
        scores={i.skill_id: 5 for i in response.item.item_skills.all()},
        explanation="The answer is complete and exact: " + "a long-explanation-word" * 6,
    )
    paused = build_campaign(project, dataset, annotators=[annotator], name="Paused one")
    campaign_set_status(campaign=paused, status=CampaignStatus.PAUSED)
    page.set_viewport_size(PHONE)
    login(page, live_server, "alice", "pw-alice")
    # when the first task and the gold one are scored on the phone
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    for _ in range(2):
        page.wait_for_selector("[data-skill-row]:focus")
        action = page.get_attribute("[data-annotate-form]", "hx-post")
        for key in ("4", "4", "4"):
            page.keyboard.press(key)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "prev => document.querySelector('.feedback') || document.querySelector("
            "'[data-annotate-form]')?.getAttribute('hx-post') !== prev",
            arg=action,
        )
    # then the feedback card fits at 390 and 360 px
    page.wait_for_selector(".feedback")
    for viewport in (PHONE, SMALL_PHONE):
        page.set_viewport_size(viewport)
        shoot(page, tmp_path / "shots", "feedback")
        assert fits(page)
    # and so does the card of a campaign with nothing to do now
    check_pages(
        page,
        {"idle": f"{live_server.url}/campaigns/{paused.pk}/annotate/"},
        viewports=(PHONE, SMALL_PHONE),
        shots=tmp_path / "shots",
        ready=".all-done",
    )
