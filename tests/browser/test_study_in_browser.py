"""Workers come through study links in a real Chromium: a Prolific-style link end to end
(link → consent → instructions → training → qualification → tasks → completion code →
redirect to the completion URL) and an MTurk-style one whose external-question form posts
to a local server standing in for MTurk."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from django.core.cache import cache

from annotation.models import Participant, ParticipantState, Screening, ScreeningPhase
from annotation.study import services
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.annotation.test_screening import make_screening_campaign
from tests.browser.layout import check_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PID = "5f1a2b3c4d5e6f708192a3b4"
#: Where the walk's screenshots go to be looked at (FLASKWEB_TEST_SHOTS; else a temp dir).
SHOTS = Path(os.environ["FLASKWEB_TEST_SHOTS"]) if os.environ.get("FLASKWEB_TEST_SHOTS") else None
KNOWN = {"Factuality": "2", "Comprehension": "4", "Readability": "3"}


@pytest.fixture
def recorder():
    """A local HTTP server that records every request (method, path, form fields)."""
    seen: list[tuple[str, str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def _record(self, body: str) -> None:
            seen.append((self.command, self.path, parse_qs(body)))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"recorded")

        def do_GET(self):
            self._record("")

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            self._record(self.rfile.read(length).decode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.seen = seen  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.delete("study-entry:addr:127.0.0.1")


def score_task(page) -> None:
    """Score every row of the card as KNOWN says and submit; wait for what comes next."""
    action = page.get_attribute("[data-annotate-form]", "hx-post")
    for row in page.query_selector_all("[data-skill-row]"):
        value = KNOWN[row.get_attribute("data-skill-name")]
        row.query_selector(f"input[value='{value}']").check(force=True)
    page.click("[data-submit]")
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-annotate-form]');"
        " return document.querySelector('.feedback [data-next-task]')"
        " || !f || f.getAttribute('hx-post') !== prev }",
        arg=action,
    )


def test_a_prolific_worker_goes_from_the_link_to_the_completion_url(
    page, live_server, project, tmp_path, recorder
):
    """The whole Prolific path; the worker's pages fit 360 and 390 px phones and a laptop
    without scrolling sideways."""
    # given a screening campaign with consent, instructions, codes and a Prolific link
    # whose completion URL is the local recorder
    campaign = make_screening_campaign(project, tmp_path, [], quota_per_annotator=1)
    services.study_settings_update(
        campaign=campaign,
        consent_text="I agree that my **scores** are kept for research.",
        completion_code="CODE-42",
        screenout_code="OUT-1",
    )
    port = recorder.server_address[1]
    link = services.study_link_create(
        campaign=campaign,
        platform="prolific",
        completion_url=f"http://127.0.0.1:{port}/back?cc={{code}}",
    )
    query = f"PROLIFIC_PID={PID}&STUDY_ID=st1&SESSION_ID=se1"
    # when the worker opens the link: the consent page
    page.goto(f"{live_server.url}/study/{link.token}/?{query}")
    assert "my scores are kept" in page.inner_text("[data-study-consent]")
    check_pages(page, {"study consent": page.url}, shots=SHOTS or tmp_path / "shots")
    page.click("button[value=agree]")
    # the instructions, then the tasks
    page.wait_for_selector("[data-study-instructions]")
    page.click("text=Start")
    page.wait_for_selector("[data-annotate-form]")
    assert page.is_visible("[data-study-bar]")
    # before the work is done there is no finish action: the bar says what is left
    assert not page.query_selector("[data-study-finish-button]")
    assert "Finish the training" in page.inner_text("[data-study-status]")
    assert page.is_visible("[data-study-stop]")
    phases = []
    for _ in range(6):  # 2 training (with feedback), 2 qualification, 1 real task
        phase = page.query_selector("[data-screening-phase]")
        phases.append(phase.get_attribute("data-screening-phase") if phase else "real")
        score_task(page)
        if page.query_selector(".feedback [data-next-task]"):
            page.click(".feedback [data-next-task]")
            page.wait_for_selector(".feedback", state="detached")
        if not page.query_selector("[data-annotate-form]"):
            break
    assert phases == ["training", "training", "qualification", "qualification", "real"]
    # the quota is met: finishing is the main action of the "All done" card, focused
    page.wait_for_selector("[data-study-finish-due]")
    focused = page.evaluate("document.activeElement.hasAttribute('data-study-finish-button')")
    assert focused
    # and the bar above, drawn with the page, was brought up to date with the card
    assert page.is_visible("#study-bar [data-study-finish-button]")
    assert not page.query_selector("#study-bar [data-study-stop]")
    # the worker finishes
    site = live_server.url
    study_pages = {
        "study instructions": f"{site}/study/instructions/",
        "study finish": f"{site}/study/finish/",
        "study my tasks": f"{site}/tasks/",
        "study annotate": f"{site}/campaigns/{campaign.pk}/annotate/",  # last: it has the bar
    }
    check_pages(page, study_pages, shots=SHOTS or tmp_path / "shots")
    page.click("[data-study-finish-button]")
    page.wait_for_selector("[data-completion-code]")
    assert page.inner_text("[data-completion-code]") == "CODE-42"
    # and is sent to the completion URL (study_submit.js, after five seconds)
    page.wait_for_url(f"http://127.0.0.1:{port}/back?cc=CODE-42", timeout=15_000)
    assert ("GET", "/back?cc=CODE-42", {}) in recorder.seen  # once, by study_submit.js
    participant = Participant.objects.get()
    assert participant.state == ParticipantState.COMPLETED
    assert participant.consented_at is not None
    assert Screening.objects.get(annotator=participant.user).phase == ScreeningPhase.PASSED


def test_an_mturk_worker_submits_the_external_question_form(
    page, live_server, project, tmp_path, recorder, settings
):
    # given an MTurk link; the recorder stands in for MTurk's submit host
    origin = f"http://127.0.0.1:{recorder.server_address[1]}"
    settings.FLASKWEB_MTURK_SUBMIT_HOSTS = [origin]
    dataset = build_dataset(project, tmp_path, texts=["An answer."])
    campaign = build_campaign(project, dataset, overlap=1, instructions="")
    services.study_settings_update(
        campaign=campaign, consent_text="", completion_code="MT-7", screenout_code=""
    )
    link = services.study_link_create(campaign=campaign, platform="mturk")
    query = f"workerId=A1B2C3D4&assignmentId=ASG9&hitId=HIT3&turkSubmitTo={origin}"
    # when the worker opens the link (no consent, no instructions: straight to a task)
    page.goto(f"{live_server.url}/study/{link.token}/?{query}")
    page.wait_for_selector("[data-annotate-form]")
    score_task(page)
    page.click("[data-study-finish-button]")
    # then the completion page shows the code and posts the form to "MTurk" by itself
    page.wait_for_selector("[data-completion-code]")
    assert page.inner_text("[data-completion-code]") == "MT-7"
    page.wait_for_url(f"{origin}/mturk/externalSubmit", timeout=15_000)
    posts = [seen for seen in recorder.seen if seen[0] == "POST"]
    assert len(posts) == 1
    _, path, fields = posts[0]
    assert path == "/mturk/externalSubmit"
    assert fields == {"assignmentId": ["ASG9"], "completion_code": ["MT-7"]}
    assert Participant.objects.get().state == ParticipantState.COMPLETED


def test_the_study_works_without_javascript(chromium, live_server, project, tmp_path):
    """A participant whose browser runs no script: link, a task scored with plain form
    posts, the finish page, the code; a second browser is asked for the resume code."""
    dataset = build_dataset(project, tmp_path, texts=["Only answer."])
    campaign = build_campaign(project, dataset, overlap=1, instructions="")
    services.study_settings_update(
        campaign=campaign, consent_text="Agree?", completion_code="NOJS-1", screenout_code=""
    )
    link = services.study_link_create(campaign=campaign, platform="generic")
    context = chromium.new_context(
        java_script_enabled=False, viewport={"width": 390, "height": 844}
    )
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/study/{link.token}/?worker=nojs-7")
        page.click("button[value=agree]")
        page.wait_for_selector("[data-annotate-form]")
        # no finish action yet; the finish page says what is left
        assert not page.query_selector("[data-study-finish-button]")
        resume_code = page.inner_text("[data-resume-code]")
        for row in page.query_selector_all("[data-skill-row]"):
            row.query_selector("input[value='3']").check(force=True)
        page.click("[data-submit]")
        page.wait_for_selector("[data-study-finish-button]")
        page.click("[data-study-finish-due] [data-study-finish-button]")
        page.wait_for_selector("[data-completion-code]")
        assert page.inner_text("[data-completion-code]") == "NOJS-1"
    finally:
        context.close()
    # another browser with the same id: asked for the code, which lets it in
    other = chromium.new_context(java_script_enabled=False)
    page = other.new_page()
    try:
        cache.delete("study-entry:addr:127.0.0.1")
        page.goto(f"{live_server.url}/study/{link.token}/?worker=nojs-7")
        page.wait_for_selector("[data-study-continue]")
        page.fill("input[name=code]", "WRONG")
        page.click("[data-study-continue] button[type=submit]")
        page.wait_for_selector("[role=alert]")
        page.fill("input[name=code]", resume_code.lower())
        page.click("[data-study-continue] button[type=submit]")
        page.wait_for_selector("[data-completion-code]")  # finished: straight to the code
    finally:
        other.close()
    assert Participant.objects.get().state == ParticipantState.COMPLETED
