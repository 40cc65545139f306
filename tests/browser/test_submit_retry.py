"""A submit that gets no answer is sent again by the page itself, in a real Chromium
(static/js/submit_retry.js): the annotator's answers stay on the page, a live region says what
is happening, the same answers are recorded once, and the keyboard goes on working.

The scoring card loses its database connection for real: its submit waits on the
assignment's row lock, held by the test, and the test terminates that backend as a PostgreSQL
restart would, so the server answers 503. The pair card loses the network instead: Playwright
aborts its first submit (interception on the browser side only).
"""

from __future__ import annotations

import pytest

from annotation.models import Assignment, AssignmentStatus, HumanPreference, HumanScore
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.annotation.test_pairwise_submit import make
from tests.browser.test_annotate_keyboard import card_action, open_scoring, wait_for_next_card
from tests.test_unavailable import _raw_connection, _terminate_the_backend_waiting_on_a_lock

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STATUS = "[data-retry-status]"


def status_text(page) -> str:
    return page.text_content(STATUS) or ""


def checked(page, form: str) -> list[str]:
    return page.eval_on_selector_all(
        f"{form} input[type=radio]:checked", "inputs => inputs.map(i => i.name + '=' + i.value)"
    )


def test_submits_that_got_no_answer_are_sent_again_and_saved_once(
    page, live_server, project, annotator, settings, tmp_path
):
    # (one test for both cards: a browser test's set-up and tear-down cost seconds)
    settings.FLASKWEB_RETRY_AFTER_SECONDS = 1  # the page waits what the server says
    a_scoring_submit_that_lost_its_database_connection(
        page, live_server, project, annotator, tmp_path
    )
    a_pair_submit_that_lost_the_network(page, live_server, project, annotator, tmp_path)


def a_scoring_submit_that_lost_its_database_connection(
    page, live_server, project, annotator, tmp_path
):
    dataset = build_dataset(project, tmp_path, texts=["The first answer.", "The second answer."])
    campaign = build_campaign(project, dataset, annotators=[annotator])
    open_scoring(page, live_server, campaign)
    first = Assignment.objects.get(
        campaign=campaign, annotator=annotator, status=AssignmentStatus.ACTIVE
    )
    previous = card_action(page)
    # given three scores entered with the keyboard, and the assignment's row locked
    for key in ("4", "n", "2"):
        page.keyboard.press(key)
    entered = checked(page, "[data-annotate-form]")
    assert len(entered) == 3
    raw = _raw_connection()
    with raw.transaction():
        raw.execute("SELECT id FROM annotation_assignment WHERE id = %s FOR UPDATE", [first.pk])
        # when the submit's database connection is terminated while it waits: a 503
        page.keyboard.press("Enter")
        _terminate_the_backend_waiting_on_a_lock(raw)
        page.wait_for_function(
            "s => document.querySelector(s).textContent.includes('Connection lost')", arg=STATUS
        )
        # then the page says so, keeps the answers, and holds a key that would change one
        assert status_text(page).startswith("Connection lost — trying again in 1 s…")
        assert checked(page, "[data-annotate-form]") == entered
        page.keyboard.press("ArrowUp")
        page.keyboard.press("5")
        assert checked(page, "[data-annotate-form]") == entered
        assert not HumanScore.objects.filter(assignment=first).exists()
    raw.close()
    # and, the database back, it sends the same answers again by itself: saved once
    wait_for_next_card(page, previous)
    page.wait_for_function("s => document.querySelector(s).textContent === 'Saved.'", arg=STATUS)
    saved = HumanScore.objects.filter(assignment=first)
    assert saved.count() == 3
    assert {(s.score, s.is_na) for s in saved} == {(4, False), (None, True), (2, False)}
    first.refresh_from_db()
    assert first.status == AssignmentStatus.SUBMITTED
    # the keyboard works on the next card
    page.keyboard.press("3")
    assert len(checked(page, "[data-annotate-form]")) == 1


def a_pair_submit_that_lost_the_network(page, live_server, project, annotator, tmp_path):
    # given a pair card answered with the keyboard, and a network that drops the first submit
    campaign = make(project, tmp_path, [annotator], items=2, overlap=1)
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-pair-row]:focus")
    first = Assignment.objects.get(
        campaign=campaign, annotator=annotator, status=AssignmentStatus.ACTIVE
    )
    rows = page.locator("[data-pair-row]").count()
    for _ in range(rows):
        page.keyboard.press("b")
    entered = checked(page, "[data-pair-form]")
    dropped = []

    def drop_once(route):
        if not dropped:
            dropped.append(route.request.post_data)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/assignments/*/submit/", drop_once)
    previous = page.get_attribute("[data-pair-form]", "hx-post")
    # when it is submitted and the connection drops
    page.keyboard.press("Enter")
    page.wait_for_function(
        "s => document.querySelector(s).textContent.includes('Connection lost')", arg=STATUS
    )
    assert "trying again in 3 s" in status_text(page)  # no answer, no Retry-After: 3 s
    assert checked(page, "[data-pair-form]") == entered
    # then Enter sends the same answers again at once, and they are recorded once
    page.keyboard.press("Enter")
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-pair-form]');"
        " return !f || f.getAttribute('hx-post') !== prev }",
        arg=previous,
    )
    page.wait_for_function("s => document.querySelector(s).textContent === 'Saved.'", arg=STATUS)
    assert len(dropped) == 1
    prefs = HumanPreference.objects.filter(assignment=first)
    assert prefs.count() == rows and len({p.choice for p in prefs}) == 1  # B each time
