"""An annotator scores tasks in a real Chromium with the keyboard alone; the next task
arrives by htmx without a page reload; hostile responses render inert."""

from __future__ import annotations

import pytest

from annotation.models import Assignment, AssignmentStatus, HumanScore
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = "Hello <script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))"
LONG = "\n\n".join(
    f"Paragraph {n}: " + "a fairly long sentence of the answer. " * 12 for n in range(30)
)


@pytest.fixture
def campaign(live_server, annotator, project, tmp_path):
    texts = [LONG, "The second answer.", "The third answer."]
    dataset = build_dataset(project, tmp_path, texts=texts)
    return build_campaign(
        project,
        dataset,
        annotators=[annotator],
        instructions="Score **each** skill from 1 to 5; use N/A only when a skill does not apply.",
    )


def open_scoring(page, live_server, campaign):
    login(page, live_server, "alice", "pw-alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")


def focused_row(page) -> str | None:
    return page.evaluate("document.activeElement.closest('[data-skill-row]')?.dataset.skillId")


def row_ids(page) -> list[str]:
    return page.eval_on_selector_all("[data-skill-row]", "rows => rows.map(r => r.dataset.skillId)")


def card_action(page) -> str:
    return page.get_attribute("[data-annotate-form]", "hx-post")


def wait_for_next_card(page, previous: str) -> None:
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-annotate-form]');"
        " return f && f.getAttribute('hx-post') !== prev"
        " && document.activeElement.matches('[data-skill-row]') }",  # focused once settled
        arg=previous,
    )


def test_an_annotator_scores_with_the_keyboard_only(page, live_server, annotator, campaign):
    # given the scoring page, focused on the first skill
    open_scoring(page, live_server, campaign)
    page.evaluate("window.__marker = 1")
    first = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    rows = row_ids(page)
    assert len(rows) == 3 and focused_row(page) == rows[0]
    page.screenshot(path="/tmp/annotate.png")
    page.wait_for_timeout(1200)  # reading the first skill's anchors
    # when: 4 on the first row, back up with the arrow and change it to 5
    page.keyboard.press("4")
    assert focused_row(page) == rows[1]
    page.keyboard.press("ArrowUp")
    page.keyboard.press("5")
    # Tab and Shift+Tab move between rows as the arrows do
    page.keyboard.press("Shift+Tab")
    assert focused_row(page) == rows[0]
    page.keyboard.press("Tab")
    assert focused_row(page) == rows[1]
    page.keyboard.press("n")  # N/A on the second row
    page.keyboard.press("3")  # the third row; focus goes to Submit
    page.keyboard.press("ArrowUp")  # back on the last row: Enter is ours there, not the button's
    action = card_action(page)
    page.keyboard.press("Enter")
    # then the next task arrives without a page reload
    wait_for_next_card(page, action)
    assert page.evaluate("window.__marker") == 1
    assert focused_row(page) == row_ids(page)[0]
    assert "Saved." in page.inner_text("#task-card")
    scores = {s.skill_id: s for s in HumanScore.objects.filter(assignment=first)}
    assert [(scores[int(r)].score, scores[int(r)].is_na) for r in rows] == [
        (5, False),
        (None, True),
        (3, False),
    ]
    first.refresh_from_db()
    assert first.status == AssignmentStatus.SUBMITTED
    # and the time on task was measured: the 1.2 s spent on the first row count for it
    assert first.active_ms >= 1000
    assert scores[int(rows[0])].time_ms >= 900
    assert all(s.time_ms is not None for s in scores.values())


def test_the_n_a_path_and_submit_from_the_button(page, live_server, annotator, campaign):
    open_scoring(page, live_server, campaign)
    page.evaluate("window.__marker = 1")
    first = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    action = card_action(page)
    # when every row is N/A; the focus then sits on Submit, where Enter is the button's own
    for _ in range(3):
        page.keyboard.press("n")
    assert page.evaluate("document.activeElement.matches('[data-submit]')")
    page.keyboard.press("Enter")
    # then
    wait_for_next_card(page, action)
    assert page.evaluate("window.__marker") == 1
    rows = HumanScore.objects.filter(assignment=first)
    assert rows.count() == 3 and all(r.is_na and r.score is None for r in rows)


def test_enter_with_an_empty_row_does_not_submit(page, live_server, annotator, campaign):
    open_scoring(page, live_server, campaign)
    rows = row_ids(page)
    action = card_action(page)
    # when the first row is scored and Enter pressed on the second, empty one
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    # then nothing is sent; the first empty row is focused and the page says why
    assert focused_row(page) == rows[1]
    assert "has no score yet" in page.inner_text("[data-annotate-status]")
    # and a click on Submit is held back the same way
    page.click("[data-submit]")
    page.wait_for_timeout(300)
    assert focused_row(page) == rows[1]
    assert card_action(page) == action
    assert not HumanScore.objects.exists()


def test_typing_a_rationale_does_not_score(page, live_server, annotator, campaign):
    open_scoring(page, live_server, campaign)
    rows = row_ids(page)
    # when R opens the rationale and the annotator types digits and an "n"
    page.keyboard.press("r")
    assert page.evaluate("document.activeElement.matches('textarea[data-rationale]')")
    page.keyboard.type("4 is not enough, 2 at most")
    page.keyboard.press("Escape")
    # then the row is focused again and still has no score
    assert focused_row(page) == rows[0]
    assert page.eval_on_selector_all("input[type=radio]:checked", "els => els.length") == 0
    page.keyboard.press("2")
    assert page.is_checked(f"input[name='score-{rows[0]}'][value='2']")
    assert page.input_value(f"textarea[name='rationale-{rows[0]}']") == "4 is not enough, 2 at most"


def test_a_hostile_response_renders_inert(page, live_server, annotator, project, tmp_path):
    dataset = build_dataset(project, tmp_path, texts=[HOSTILE], name="Hostile")
    campaign = build_campaign(project, dataset, annotators=[annotator])
    open_scoring(page, live_server, campaign)
    page.wait_for_timeout(300)  # time for an onerror handler to fire, if one survived
    box = "[data-response]"
    assert "<script>alert(1)</script>" in page.inner_text(box)  # shown as text
    assert page.eval_on_selector_all(f"{box} script", "els => els.length") == 0
    assert page.eval_on_selector_all(f"{box} img", "els => els.length") == 0
    assert page.eval_on_selector_all(f"{box} [onerror]", "els => els.length") == 0
    assert page.eval_on_selector_all("a[href^='javascript']", "els => els.length") == 0
    assert page.dialogs == []


def test_a_long_response_scrolls_inside_its_box(page, live_server, annotator, campaign):
    open_scoring(page, live_server, campaign)
    sizes = page.eval_on_selector(
        "[data-response]", "el => [el.scrollHeight, el.clientHeight, innerHeight]"
    )
    scroll_height, client_height, viewport = sizes
    assert scroll_height > client_height and client_height < viewport


def test_flagging_a_broken_item_needs_no_scores(page, live_server, annotator, campaign):
    open_scoring(page, live_server, campaign)
    page.evaluate("window.__marker = 1")
    first = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    action = card_action(page)
    # when the annotator opens the skip box, gives a reason and flags (no row scored)
    page.click("text=Skip this task or flag a broken item")
    page.fill("[data-skip-reason]", "the response stops mid-sentence")
    page.click("text=Flag as broken and skip")
    # then the next task arrives in place and the item is flagged
    wait_for_next_card(page, action)
    assert page.evaluate("window.__marker") == 1
    assert "flagged" in page.inner_text("#task-card")
    first.refresh_from_db()
    assert (first.status, first.flagged) == (AssignmentStatus.SKIPPED, True)
    assert first.flag_reason == "the response stops mid-sentence"
