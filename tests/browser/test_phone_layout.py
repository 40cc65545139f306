"""What an annotator and a study participant tap and read on a phone (360 and 390 px wide),
in Chromium: every control is a finger-sized target (44 x 44 px) on every page they see, the
instruction and response boxes say when more text is below and take the keyboard focus, code
blocks keep their lines and indentation and scroll sideways inside themselves, and the scoring
page still opens on the response and the first skill's buttons. Screenshots go to the test's
tmp dir (shots/)."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache

from annotation.campaigns.services import campaign_set_status
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import CampaignMode, CampaignStatus, UploadSource
from annotation.pace.services import campaign_pace_update
from annotation.study import services as study
from tests.annotation.test_annotate_views import SKILLS, build_campaign
from tests.annotation.test_screening import make_screening_campaign
from tests.browser.conftest import login
from tests.browser.layout import MIN_TARGET, PHONE, SMALL_PHONE, fits, shoot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONES = (SMALL_PHONE, PHONE)
LONG = "\n\n".join(
    f"Paragraph {n}: " + "a fairly long sentence of the answer. " * 12 for n in range(12)
)
# A code block as an LLM writes one: indented lines and one line of 200 characters.
CODE_LINE = '        value = "' + "x" * 182 + '"'
CODE = f"```python\ndef answer():\n    if True:\n{CODE_LINE}\n    return value\n```"
assert len(CODE_LINE) == 200
# The screening campaign's known scores (tests/annotation/test_screening.py): they pass.
PASSING = {"Factuality": "2", "Comprehension": "4", "Readability": "3"}

# Every control a finger taps on the page, with its box (CSS px). A radio drawn as a button
# (the score and pair buttons) is tapped on its label, so the label is measured instead of
# the visually hidden input. Skill rows and scroll boxes take the focus too, but they are
# regions to read, not targets. A text link inside a sentence of prose is exempt, as WCAG
# 2.5.8 exempts inline targets ("the size of the target is constrained by the line-height
# of non-target text"): a link in a paragraph or list item that holds other words.
_TARGETS_JS = """() => {
  const SELECTOR = 'a[href], button, input:not([type=hidden]), select, textarea, summary,'
    + ' [role=button], label.score-btn, label.pair-btn';
  const found = [];
  for (const el of document.querySelectorAll(SELECTOR)) {
    if (el.matches('input') && el.closest('label.score-btn, label.pair-btn')) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: false})) continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const text = (el.textContent || el.value || el.name || '').trim().replace(/\\s+/g, ' ');
    if (el.matches('a:not(.button)')) {
      const block = el.closest('p, li, dd, blockquote');
      if (block && /\\p{L}{2,}/u.test(block.textContent.replace(el.textContent, ''))) continue;
    }
    found.push({tag: el.tagName.toLowerCase(), cls: el.className, text: text.slice(0, 40),
                width: Math.round(r.width * 10) / 10, height: Math.round(r.height * 10) / 10});
  }
  return found;
}"""


def targets(page) -> list[dict]:
    return page.evaluate(_TARGETS_JS)


def upload(project, tmp_path, rows: list[dict], name: str):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"skills": SKILLS, **r}) + "\n" for r in rows))
    job = dataset_upload_create(
        project=project,
        dataset_name=name,
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    return dataset_import(upload_id=job.pk).dataset


class Targets:
    """Measures the page as it is now at both phone widths, and keeps what is too small."""

    def __init__(self, page, shots):
        self.page, self.shots = page, shots
        self.bad: dict[str, list[str]] = {}
        self.counts: dict[str, int] = {}

    def check(self, name: str) -> None:
        for viewport in PHONES:
            self.page.set_viewport_size(viewport)
            key = f"{name} @{viewport['width']}"
            found = targets(self.page)
            self.counts[key] = len(found)
            small = [t for t in found if min(t["width"], t["height"]) < MIN_TARGET]
            if small:
                self.bad[key] = [
                    f"{t['tag']}.{t['cls']} {t['text']!r} {t['width']}x{t['height']}" for t in small
                ]
            shoot(self.page, self.shots, name.replace(" ", "-"))
            assert fits(self.page), key


def score_task(page) -> None:
    """Score every skill as the known scores say (which passes the test), submit, and wait
    for the card that comes next."""
    action = page.get_attribute("[data-annotate-form]", "hx-post")
    for row in page.query_selector_all("[data-skill-row]"):
        value = PASSING[row.get_attribute("data-skill-name")]
        row.query_selector(f"input[value='{value}']").check(force=True)
    page.click("[data-submit]")
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-annotate-form]');"
        " return !f || f.getAttribute('hx-post') !== prev }",
        arg=action,
    )


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.delete("study-entry:addr:127.0.0.1")


def test_every_control_a_participant_taps_is_finger_sized(page, live_server, project, tmp_path):
    # given a study link of a screening campaign with a consent text (a list and a link in
    # its prose) and instructions
    campaign = make_screening_campaign(
        project,
        tmp_path,
        [],
        quota_per_annotator=1,
        instructions="Score **each** skill from 1 to 5. See [the guide](https://example.org/).",
    )
    study.study_settings_update(
        campaign=campaign,
        consent_text=(
            "Your **scores** are kept for research.\n\n- You may stop at any time.\n"
            "- Questions: write to [the team](mailto:team@example.org)."
        ),
        completion_code="CODE-42",
        screenout_code="",
    )
    link = study.study_link_create(campaign=campaign, platform="prolific")
    measure = Targets(page, tmp_path / "shots")
    page.set_viewport_size(PHONE)
    # when the participant goes through consent, instructions, training (a task and its
    # feedback), My tasks and the finish page before the work is done, the qualification
    # test, the real task, the finish page once it is done and the completion code: each
    # measured at 360 and 390 px
    page.goto(f"{live_server.url}/study/{link.token}/?PROLIFIC_PID=5f1a2b3c4d5e6f708192a3b4")
    page.wait_for_selector("[data-study-consent]")
    measure.check("consent")
    page.click("button[value=agree]")
    page.wait_for_selector("[data-study-instructions]")
    measure.check("instructions")
    page.click("text=Start")
    page.wait_for_selector("[data-skill-row]:focus")
    measure.check("training task")
    score_task(page)
    measure.check("training feedback")
    page.goto(f"{live_server.url}/tasks/")
    measure.check("study my tasks")
    page.goto(f"{live_server.url}/study/finish/")
    page.wait_for_selector("[data-study-finish]")
    measure.check("study finish early")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    for _ in range(4):  # the second training task, the test, the real task
        if page.query_selector(".feedback [data-next-task]"):
            page.click(".feedback [data-next-task]")
        page.wait_for_selector("[data-skill-row]:focus")
        score_task(page)
    page.wait_for_selector("[data-study-finish-button]")
    measure.check("study work done")
    page.goto(f"{live_server.url}/study/finish/")
    page.wait_for_selector("[data-study-finish] [data-study-finish-button]")
    measure.check("study finish due")
    page.click("[data-study-finish] [data-study-finish-button]")
    page.wait_for_selector("[data-completion-code]")
    measure.check("study completion")
    # then every visible control on them is at least 44 x 44 px
    assert min(measure.counts.values()) > 0, measure.counts
    assert not measure.bad, json.dumps(measure.bad, indent=1)


def test_every_control_an_annotator_taps_is_finger_sized(
    page, live_server, project, annotator, tmp_path
):
    # given a pointwise campaign with a break after every task, a pairwise one and a paused one
    dataset = upload(
        project,
        tmp_path,
        [
            {
                "id": f"q{i}",
                "instruction": "Question",
                "reference": "A reference",
                "responses": [{"model": "m1", "text": LONG}, {"model": "m2", "text": "Short."}],
            }
            for i in range(3)
        ],
        name="Targets",
    )
    scoring = build_campaign(
        project, dataset, annotators=[annotator], name="Scoring", instructions="Read it all."
    )
    campaign_pace_update(
        campaign=scoring, break_every=1, break_minutes=5, hourly_wage=None, wage_currency="USD"
    )
    pairs = build_campaign(
        project,
        dataset,
        annotators=[annotator],
        name="Pairs",
        mode=CampaignMode.PAIRWISE,
        pair_choices=["a", "b", "tie", "both_bad"],
        pair_strength=True,
        pair_rationale=True,
    )
    paused = build_campaign(project, dataset, annotators=[annotator], name="Paused")
    campaign_set_status(campaign=paused, status=CampaignStatus.PAUSED)
    measure = Targets(page, tmp_path / "shots")
    page.set_viewport_size(PHONE)
    login(page, live_server, "alice", "pw-alice")
    # when she visits My tasks, scores a task (then a break card), a pair and a paused campaign
    page.goto(f"{live_server.url}/tasks/")
    measure.check("my tasks")
    page.goto(f"{live_server.url}/campaigns/{scoring.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")
    page.click("details.reference summary")
    measure.check("scoring")
    for row in page.query_selector_all("[data-skill-row]"):
        row.query_selector("input[value='4']").check(force=True)
    page.click("[data-submit]")
    page.wait_for_selector(".break-card")
    measure.check("break")
    page.goto(f"{live_server.url}/campaigns/{pairs.pk}/annotate/")
    page.wait_for_selector("[data-pair-row]:focus")
    measure.check("pair")
    page.goto(f"{live_server.url}/campaigns/{paused.pk}/annotate/")
    page.wait_for_selector(".all-done")
    measure.check("idle")
    # then every visible control is at least 44 x 44 px
    assert min(measure.counts.values()) > 0, measure.counts
    assert not measure.bad, json.dumps(measure.bad, indent=1)


def test_the_scoring_page_still_opens_on_the_response_and_the_first_scores(
    page, live_server, project, annotator, tmp_path
):
    # given a long response and instructions, on a 390 x 844 phone
    dataset = upload(
        project,
        tmp_path,
        [
            {
                "id": "q0",
                "instruction": LONG,
                "reference": LONG,
                "responses": [{"model": "m1", "text": LONG}],
            }
        ],
        name="First screen",
    )
    campaign = build_campaign(project, dataset, annotators=[annotator], instructions=LONG)
    page.set_viewport_size(PHONE)
    login(page, live_server, "alice", "pw-alice")
    # when the scoring page loads (it scrolls itself to the task)
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")
    spots = page.evaluate(
        "() => { const r = document.querySelector('.response-box').getBoundingClientRect();"
        " const b = document.querySelector('.score-btn').getBoundingClientRect();"
        " return {response: r.top, responseBottom: r.bottom, button: b.top,"
        " buttonBottom: b.bottom, height: innerHeight}; }"
    )
    shoot(page, tmp_path / "shots", "first-screen")
    # then the response box starts on the first screen and the first skill's buttons are
    # whole on it
    assert 0 <= spots["response"] < spots["height"], spots
    assert spots["button"] >= 0 and spots["buttonBottom"] <= spots["height"], spots


def box_state(page, selector: str) -> dict:
    return page.eval_on_selector(
        selector,
        "el => ({more: el.classList.contains('more-below'),"
        " hint: getComputedStyle(el, '::after').content,"
        " scrolls: el.scrollHeight > el.clientHeight, overflowY: getComputedStyle(el).overflowY,"
        " tabindex: el.getAttribute('tabindex'), role: el.getAttribute('role'),"
        " label: el.getAttribute('aria-label')})",
    )


@pytest.mark.parametrize("viewport", PHONES, ids=["360", "390"])
def test_a_scroll_box_says_more_is_below_and_takes_the_focus(
    page, live_server, project, annotator, tmp_path, viewport
):
    # given a short instruction and a response longer than its box
    dataset = upload(
        project,
        tmp_path,
        [
            {
                "id": "q0",
                "instruction": "A short question.",
                "responses": [{"model": "m1", "text": LONG}],
            }
        ],
        name="Hint",
    )
    campaign = build_campaign(project, dataset, annotators=[annotator])
    page.set_viewport_size(viewport)
    login(page, live_server, "alice", "pw-alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")
    response, instruction = "[data-response]", ".task-text .scroll-short"
    # then the response box shows the hint, the short instruction does not
    page.wait_for_selector(f"{response}.more-below")
    state = box_state(page, response)
    assert state["scrolls"] and state["hint"] not in ("none", "normal"), state
    assert not box_state(page, instruction)["more"]
    page.eval_on_selector(response, "el => el.scrollIntoView({block: 'center'})")
    shoot(page, tmp_path / "shots", "more-below")
    # when the box is scrolled to its end the hint goes, and comes back higher up
    page.eval_on_selector(response, "el => { el.scrollTop = el.scrollHeight; }")
    page.wait_for_selector(f"{response}:not(.more-below)")
    assert box_state(page, response)["hint"] in ("none", "normal")
    shoot(page, tmp_path / "shots", "at-the-bottom")
    page.eval_on_selector(response, "el => { el.scrollTop = 0; }")
    page.wait_for_selector(f"{response}.more-below")
    # and Tab reaches both boxes, named for a screen reader, after the breadcrumb
    page.focus("p.crumbs a")
    reached = []
    for _ in range(8):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("() => document.activeElement.getAttribute('aria-label')"))
    assert "Instruction" in reached and "Response to score" in reached, reached
    assert page.get_by_role("region", name="Response to score").count() == 1
    assert page.get_by_role("region", name="Instruction").count() == 1
    # and the focused box scrolls with the keyboard
    page.focus(response)
    page.keyboard.press("PageDown")
    page.wait_for_function("s => document.querySelector(s).scrollTop > 0", arg=response)


def test_without_javascript_a_scroll_box_still_scrolls(
    chromium, live_server, project, annotator, tmp_path
):
    # given the scoring page with scripts off
    dataset = upload(
        project,
        tmp_path,
        [{"id": "q0", "instruction": "A question.", "responses": [{"model": "m1", "text": LONG}]}],
        name="No script",
    )
    campaign = build_campaign(project, dataset, annotators=[annotator])
    context = chromium.new_context(viewport=PHONE, java_script_enabled=False)
    page = context.new_page()
    try:
        login(page, live_server, "alice", "pw-alice")
        page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
        # then the response box scrolls inside itself, takes the focus, and shows no hint
        state = box_state(page, "[data-response]")
        assert state["scrolls"] and state["overflowY"] == "auto", state
        assert (state["tabindex"], state["role"], state["label"]) == (
            "0",
            "region",
            "Response to score",
        )
        assert not state["more"] and state["hint"] in ("none", "normal"), state
    finally:
        context.close()


# Per code block: the document fits the window, the block scrolls sideways, the 200-character
# line is one line box (not wrapped), and the indented lines start 4 and 8 characters in.
_CODE_JS = """pre => {
  const code = pre.querySelector('code') || pre;
  const node = [...code.childNodes].find(n => n.nodeType === Node.TEXT_NODE);
  const src = node.textContent;
  const range = (start, end) => { const r = document.createRange();
    r.setStart(node, start); r.setEnd(node, end); return r; };
  const left = i => range(i, i + 1).getClientRects()[0].left;
  const def = src.indexOf('def'), ret = src.indexOf('return'), val = src.indexOf('value =');
  const end = src.indexOf('\\n', val);
  const char = range(def, def + 1).getBoundingClientRect().width;
  return {
    doc: document.documentElement.scrollWidth, window: innerWidth,
    scrollWidth: pre.scrollWidth, clientWidth: pre.clientWidth,
    longLines: range(val, end).getClientRects().length,
    indentReturn: (left(ret) - left(def)) / char, indentValue: (left(val) - left(def)) / char,
  };
}"""


def test_code_blocks_keep_their_lines_and_scroll_inside_themselves(
    page, live_server, project, annotator, tmp_path
):
    # given an instruction, a reference and a response each holding a code block with a
    # 200-character line, on a 360 px phone
    dataset = upload(
        project,
        tmp_path,
        [
            {
                "id": "q0",
                "instruction": f"Fix this:\n\n{CODE}",
                "reference": f"Like this:\n\n{CODE}",
                "responses": [{"model": "m1", "text": f"Here it is:\n\n{CODE}\n\nDone."}],
            }
        ],
        name="Code",
    )
    campaign = build_campaign(project, dataset, annotators=[annotator])
    page.set_viewport_size(SMALL_PHONE)
    login(page, live_server, "alice", "pw-alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")
    page.click("details.reference summary")
    page.eval_on_selector("[data-response] pre", "el => el.scrollIntoView({block: 'center'})")
    shoot(page, tmp_path / "shots", "code")
    # then each block keeps its lines whole and indented and scrolls sideways by itself
    blocks = page.eval_on_selector_all(".task-text pre", f"els => els.map({_CODE_JS})")
    assert len(blocks) == 3
    for block in blocks:
        assert block["doc"] <= block["window"], block
        assert block["scrollWidth"] > block["clientWidth"], block
        assert block["longLines"] == 1, block
        assert round(block["indentReturn"]) == 4 and round(block["indentValue"]) == 8, block
