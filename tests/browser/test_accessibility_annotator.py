"""Every page an annotator or study participant sees meets WCAG 2.2 AA in a real Chromium
(docs/ACCESSIBILITY.md).

One walk goes through a study (entry link refused, consent, instructions, training with its
gold feedback, the qualification test, a task, a break, all done, My tasks, the finish page,
the completion code), a participant screened out by the test, a returning participant on
another browser (the resume code page, with its error), the sign-in page, and an annotator's
pairwise campaign. In every state (before scoring, a skill answered, an error shown...) axe's
WCAG 2.2 A/AA rules run at 390 px and at 1440 px, and the page's URL name is recorded: the walk
fails when a name of `ANNOTATOR_PAGES` was never checked, so a new annotator page cannot be
missed. The htmx targets (submit, skip) count by the answers they swapped in.

Beyond axe, on the scoring and pair cards, through Chromium's accessibility tree (CDP
`Accessibility.getFullAXTree`) and computed styles: every score radio is named by its skill,
level and rubric anchor (pair radios by question and choice); the current skill, "saved" and
errors are spoken by live regions; every element reached with Tab shows its focus; a chosen
score is marked by more than its colour; the card reflows at 200 % zoom and at 320 px without
sideways scrolling; nothing moves under reduced motion; no scroll box traps the keyboard.

FLASKWEB_TEST_SHOTS=<dir> keeps a screenshot of every state at both widths.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.core.cache import cache
from django.urls import resolve

from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.languages.services import campaign_translation_set
from annotation.models import CampaignMode, Participant, UploadSource
from annotation.pace.services import campaign_pace_update
from annotation.services.assignments import (
    ScoreInput,
    assignment_next,
    human_score_submit,
    task_skills,
)
from annotation.study import services as study
from tests.annotation.test_annotate_views import SKILLS, build_campaign
from tests.annotation.test_screening import make_screening_campaign
from tests.browser.axe import axe_violations
from tests.browser.conftest import login
from tests.browser.layout import LAPTOP, PHONE, overflow, shoot
from tests.browser.pages_annotator import ANNOTATOR_PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

VIEWPORTS = (PHONE, LAPTOP)
SHOTS = Path(os.environ["FLASKWEB_TEST_SHOTS"]) if os.environ.get("FLASKWEB_TEST_SHOTS") else None
PID, PID_OUT = "5f1a2b3c4d5e6f708192a3b4", "6a0b1c2d3e4f5a6b7c8d9e0f"
# The screening campaign's known scores (tests/annotation/test_screening.py): these pass.
PASSING = {"Factuality": "2", "Comprehension": "4", "Readability": "3"}
LONG = "\n\n".join(f"Paragraph {n}: " + "a fairly long sentence. " * 12 for n in range(8))


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.delete("study-entry:addr:127.0.0.1")


def url_name(url: str) -> str:
    return resolve(urlparse(url).path).view_name


class Audit:
    """Runs axe on the page as it is now at each viewport and keeps, per URL name, the states
    checked; failures are collected so that one run lists every violation of the walk."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}
        self.failures: list[str] = []

    def check(self, page, state: str, *, via: str | None = None) -> None:
        names = {url_name(page.url)} | ({via} if via else set())
        for name in names:
            self.seen.setdefault(name, []).append(state)
        size = page.viewport_size
        for viewport in VIEWPORTS:
            page.set_viewport_size(viewport)
            for v in axe_violations(page):
                targets = "; ".join(json.dumps(n["target"]) for n in v["nodes"][:4])
                where = f"{state} @{viewport['width']}"
                self.failures.append(f"{where}: {v['id']} [{v['impact']}] {v['help']}: {targets}")
            shoot(page, SHOTS, re.sub(r"\W+", "-", state))
        page.set_viewport_size(size)


def posted(page, click) -> str:
    """Click something that posts the card's form through htmx; the URL name posted to, once
    the answer is swapped in."""
    # the card on the page now: the answer replaces it (outerHTML), and until then it is still
    # ready, so waiting for "a ready card" alone could return with the old one, whose rows are
    # then detached under the next step
    before = page.query_selector("[data-annotate-card]")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        click()
    page.wait_for_function(
        """old => {
            const card = document.querySelector('[data-annotate-card][data-ready]');
            return card && card !== old;
        }""",
        arg=before,
    )
    return url_name(answer.value.url)


# --- the accessibility tree ---------------------------------------------------------------------


def ax_tree(page) -> list[dict]:
    cdp = page.context.new_cdp_session(page)
    try:
        return cdp.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        cdp.detach()


def _value(node: dict, key: str) -> str:
    return str((node.get(key) or {}).get("value") or "")


def _prop(node: dict, name: str) -> str:
    for p in node.get("properties", []):
        if p["name"] == name:
            return str(p["value"].get("value") or "")
    return ""


def ax_names(page, role: str) -> list[str]:
    return [
        " ".join(_value(n, "name").split())
        for n in ax_tree(page)
        if not n.get("ignored") and _value(n, "role") == role
    ]


def spoken_live(page, text: str) -> str:
    """How politely `text` is announced: the `live` value of the region it is in ("polite",
    "assertive"), or "" when it is on the page but in no live region, or "absent"."""
    nodes = ax_tree(page)
    by_id = {n["nodeId"]: n for n in nodes}
    found = "absent"
    for node in nodes:
        if node.get("ignored") or _value(node, "role") != "StaticText":
            continue
        if text not in " ".join(_value(node, "name").split()):
            continue
        found = ""
        walk: dict | None = node
        while walk is not None:
            live = _prop(walk, "live")
            if live in ("polite", "assertive"):
                return live
            walk = by_id.get(walk.get("parentId", ""))
    return found


# --- beyond axe: the scoring and pair cards -------------------------------------------------------

_FOCUS_RING_JS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  // a radio drawn as a button is hidden: its drawn button shows the focus
  const shown = el.matches('.score-btn input, .pair-btn input') ? el.nextElementSibling : el;
  const s = getComputedStyle(shown);
  return {what: el.tagName.toLowerCase() + (el.className ? '.' + el.className : '')
            + ' ' + (el.getAttribute('aria-label') || el.textContent || '').trim().slice(0, 30),
          outline: s.outlineStyle, width: parseFloat(s.outlineWidth) || 0,
          color: s.outlineColor, shadow: s.boxShadow};
}"""


def _luminance(rgb: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def focus_rings(page, presses: int = 40) -> list[str]:
    """Tab through the page from its top; what got the focus without a visible indicator (an
    outline of at least 2 px and 3:1 against the page, Chromium's own ring, or a shadow)."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); }")
    page.evaluate("() => window.scrollTo(0, 0)")
    bad, seen = [], []
    page_bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    for _ in range(presses):
        page.keyboard.press("Tab")
        ring = page.evaluate(_FOCUS_RING_JS)
        if ring is None or ring["what"] in seen:
            break
        seen.append(ring["what"])
        if ring["outline"] == "auto":
            continue
        drawn = ring["outline"] != "none" and ring["width"] >= 2
        if drawn and contrast(ring["color"], page_bg) >= 3:
            continue
        if ring["shadow"] != "none":
            continue
        bad.append(f"{ring['what']}: {ring['outline']} {ring['width']}px {ring['color']}")
    assert len(seen) >= 5, seen  # the walk reached the card, not only the top bar
    return bad


_MOTION_JS = """() => {
  const long = (v) => v.split(',').some((d) => parseFloat(d) * (d.includes('ms') ? 1 : 1000) > 10);
  const moving = [];
  for (const el of [document.documentElement, ...document.querySelectorAll('body, body *')]) {
    for (const pseudo of [null, '::before', '::after']) {
      const s = getComputedStyle(el, pseudo);
      if ((s.transitionProperty !== 'none' && long(s.transitionDuration))
          || (s.animationName !== 'none' && long(s.animationDuration)))
        moving.push(el.tagName.toLowerCase() + '.' + el.className + (pseudo || ''));
    }
  }
  const smooth = getComputedStyle(document.documentElement).scrollBehavior;
  return {moving: moving.slice(0, 5), smooth, htmx: htmx.config.scrollBehavior};
}"""


def still_under_reduced_motion(page) -> None:
    page.emulate_media(reduced_motion="reduce")
    found = page.evaluate(_MOTION_JS)
    page.emulate_media(reduced_motion="no-preference")
    assert not found["moving"], found
    assert found["smooth"] != "smooth" and found["htmx"] != "smooth", found


def no_trap_in_scroll_boxes(page) -> None:
    """From each text box that scrolls, Tab leaves forward and Shift+Tab backward."""
    boxes = page.locator("[data-scroll-box]:visible")
    assert boxes.count() >= 2
    inside = "(el) => el.contains(document.activeElement)"
    for i in range(boxes.count()):
        box = boxes.nth(i)
        for key in ("Tab", "Shift+Tab"):
            box.focus()
            page.keyboard.press(key)
            assert not box.evaluate(inside), f"{key} stayed in scroll box {i}"
            assert page.evaluate("() => document.activeElement !== document.body"), key


def reflows(page, submit: str) -> None:
    """At 200 % zoom of a 1280 x 900 window (640 x 450 CSS px) and at 320 px (WCAG 1.4.10):
    no sideways scrolling, and Submit can be scrolled to and is not covered."""
    size = page.viewport_size
    for viewport in ({"width": 640, "height": 450}, {"width": 320, "height": 640}):
        page.set_viewport_size(viewport)
        found = overflow(page)
        assert found["scrollWidth"] <= found["innerWidth"], (viewport, found)
        page.locator(submit).scroll_into_view_if_needed()
        hit = page.eval_on_selector(
            submit,
            "b => { const r = b.getBoundingClientRect();"
            " const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);"
            " return r.bottom <= innerHeight && r.right <= innerWidth && b.contains(at); }",
        )
        assert hit, f"{submit} not reachable at {viewport}"
    page.set_viewport_size(size)


def marked_beyond_colour(page, chosen: str, other: str) -> None:
    """A chosen answer's button differs from an unchosen one by more than colour: a mark."""
    mark = "s => getComputedStyle(s, '::after').content"
    assert "✓" in page.eval_on_selector(chosen, mark)
    assert page.eval_on_selector(other, mark) in ("none", "normal")


def check_scoring_card(page) -> None:
    """The pointwise card before anything is answered, then with its first skill scored."""
    rows = page.eval_on_selector_all(
        "[data-skill-row]",
        "rows => rows.map(r => ({skill: r.dataset.skillName,"
        " anchors: [...r.querySelectorAll('.anchors li span')].map(s => s.textContent.trim())}))",
    )
    assert rows and all(len(r["anchors"]) == 5 for r in rows), rows
    expected = []
    for r in rows:
        expected += [f"{r['skill']}: {n} — {a}" for n, a in enumerate(r["anchors"], 1)]
        expected.append(f"{r['skill']}: N/A — this skill does not apply to the response")
    assert sorted(ax_names(page, "radio")) == sorted(expected)
    # focus is visible everywhere Tab goes; no scroll box keeps it; nothing moves
    assert not focus_rings(page), focus_rings(page)
    no_trap_in_scroll_boxes(page)
    still_under_reduced_motion(page)
    reflows(page, "[data-submit]")
    # the first skill scored with the keyboard: the focus moves on and the skill is spoken
    page.set_viewport_size(LAPTOP)
    page.locator("[data-skill-row]").first.focus()
    page.keyboard.press(PASSING[rows[0]["skill"]])
    page.wait_for_function("() => document.activeElement.matches('[data-skill-row]')")
    second = f"Skill 2 of {len(rows)}: {rows[1]['skill']}"
    assert spoken_live(page, second) == "polite", second
    marked_beyond_colour(
        page,
        "[data-skill-row] .score-btn input:checked + span",
        "[data-skill-row] .score-btn input:not(:checked) + span",
    )
    # Enter with skills left unscored says which, politely
    page.keyboard.press("Enter")
    assert spoken_live(page, "has no score yet") == "polite"


def check_pair_card(page) -> None:
    questions = page.eval_on_selector_all(
        "[data-pair-row]",
        "rows => rows.map(r => ({name: r.dataset.name, choices: [...r.querySelectorAll("
        "'.pair-buttons input')].map(i => i.closest('label').querySelector('span')"
        ".firstChild.textContent.trim())}))",
    )
    names = ax_names(page, "radio")
    for q in questions:
        for choice in q["choices"]:
            assert f"{q['name']}: {choice}" in names, (q, names)
        assert f"{q['name']}: slightly better" in names, (q, names)
        assert f"{q['name']}: much better" in names, (q, names)
    assert not focus_rings(page), focus_rings(page)
    no_trap_in_scroll_boxes(page)
    still_under_reduced_motion(page)
    reflows(page, "[data-submit]")


# --- the walk -----------------------------------------------------------------------------------


def pair_dataset(project, tmp_path):
    rows = [
        {
            "id": f"p{i}",
            "instruction": f"Question **{i}**",
            "skills": SKILLS,
            "responses": [
                {"model": "m1", "text": LONG if i == 0 else f"First answer {i}."},
                {"model": "m2", "text": f"Second answer {i}."},
            ],
        }
        for i in range(2)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = dataset_upload_create(
        project=project,
        dataset_name="Pairs",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    return dataset_import(upload_id=job.pk).dataset


def score(page, values: dict[str, str] | None = None) -> str:
    """Score every skill of the card (the known scores unless given) and submit; the URL name
    the answer came from."""
    for row in page.query_selector_all("[data-skill-row]"):
        value = (values or PASSING)[row.get_attribute("data-skill-name")]
        row.query_selector(f"input[value='{value}']").check(force=True)
    return posted(page, lambda: page.click("[data-submit]"))


def submit_unguarded(page, form: str) -> str:
    """Submit the card with skills left unanswered, past the page's own check, as a page
    without JavaScript (or a race) does: the server's error on the card."""
    page.eval_on_selector(form, "(f, attr) => f.removeAttribute(attr)", form.strip("[]"))
    return posted(page, lambda: page.click("[data-submit]"))


def fail_screening(campaign, worker_id: str) -> None:
    """The participant answers the training and the test far from the known scores."""
    user = Participant.objects.get(campaign=campaign, worker_id=worker_id).user
    for _ in range(4):
        assignment = assignment_next(campaign=campaign, annotator=user)
        assert assignment is not None
        human_score_submit(
            assignment_id=assignment.pk,
            annotator=user,
            scores=[ScoreInput(s.skill_id, 5) for s in task_skills(assignment=assignment)],
        )


def test_every_annotator_page_in_every_state_meets_wcag_22_aa(
    chromium, page, live_server, project, annotator, tmp_path
):
    # given a study of a screening campaign (training with feedback, a qualification test)
    # with consent, instructions, codes and a break after every task, and a pairwise campaign
    campaign = make_screening_campaign(
        project,
        tmp_path,
        [],
        quota_per_annotator=1,
        instructions="Score **each** skill from 1 to 5. See [the guide](https://example.org/).",
    )
    campaign_pace_update(
        campaign=campaign, break_every=1, break_minutes=5, hourly_wage=None, wage_currency="USD"
    )
    study.study_settings_update(
        campaign=campaign,
        consent_text="Your **scores** are kept for research.\n\n- You may stop at any time.",
        completion_code="CODE-42",
        screenout_code="OUT-1",
    )
    # offered in Spanish too: the header's language picker is on every study page
    campaign_translation_set(
        campaign=campaign, language="es", instructions="Puntúa **cada** habilidad de 1 a 5."
    )
    link = study.study_link_create(campaign=campaign, platform="prolific")
    pairs = build_campaign(
        project,
        pair_dataset(project, tmp_path),
        annotators=[annotator],
        name="Which is better",
        mode=CampaignMode.PAIRWISE,
        overlap=1,
        pair_choices=["a", "b", "tie", "both_bad"],
        pair_strength=True,
        pair_rationale=True,
    )
    site, audit = live_server.url, Audit()
    entry = f"{site}/study/{link.token}/"

    # when a participant opens the link without their id, then with it
    page.goto(f"{entry}?STUDY_ID=st1")
    page.wait_for_selector("[data-study-message]")
    audit.check(page, "entry link refused")
    page.goto(f"{entry}?PROLIFIC_PID={PID}&STUDY_ID=st1&SESSION_ID=se1")
    page.wait_for_selector("[data-study-consent]")
    assert page.locator("[data-language-picker] select").count() == 1
    audit.check(page, "consent, with the language picker")
    page.click("button[value=agree]")
    page.wait_for_selector("[data-study-instructions]")
    audit.check(page, "instructions")
    page.goto(f"{site}/study/finish/")
    page.wait_for_selector("[data-study-finish]")
    audit.check(page, "finish before the work is done")
    # training: before scoring, beyond-axe checks, a skill answered, the server's error,
    # the gold feedback
    page.goto(f"{site}/campaigns/{campaign.pk}/annotate/")
    page.wait_for_selector("[data-skill-row]:focus")
    audit.check(page, "training task before scoring")
    check_scoring_card(page)
    audit.check(page, "one skill answered, the rest asked for")
    via = submit_unguarded(page, "[data-annotate-form]")
    page.wait_for_selector(".form-error")
    assert spoken_live(page, page.inner_text(".form-error")) == "assertive"
    audit.check(page, "submitted incomplete: the error", via=via)
    via = score(page)
    page.wait_for_selector(".feedback [data-next-task]")
    assert "✓" in page.inner_text("[data-gold-feedback]")  # not by colour alone
    audit.check(page, "gold feedback", via=via)
    page.click(".feedback [data-next-task]")
    page.wait_for_selector("[data-skill-row]:focus")
    score(page)
    page.click(".feedback [data-next-task]")
    # the qualification test; a skip without a reason is refused on the card
    page.wait_for_selector("[data-screening-phase=qualification]")
    audit.check(page, "qualification task")
    page.click(".skip-box summary")
    via = posted(page, lambda: page.click(".skip-box button[value=skip]"))
    page.wait_for_selector(".skip-box .form-error")
    audit.check(page, "skip refused: the error", via=via)
    score(page)
    page.wait_for_selector("[data-screening-phase=qualification]")
    score(page)
    # the real task, a break, all done
    page.wait_for_selector("[data-skill-row]:focus")
    audit.check(page, "real task")
    via = score(page)
    page.wait_for_selector(".break-card")
    audit.check(page, "break", via=via)
    page.click(".break-card [data-next-task]")
    page.wait_for_selector("[data-study-finish-due]")
    audit.check(page, "all done")
    page.goto(f"{site}/tasks/")
    audit.check(page, "My tasks (study)")
    page.goto(f"{site}/study/finish/")
    page.wait_for_selector("[data-study-finish] [data-study-finish-button]")
    audit.check(page, "finish due")
    page.click("[data-study-finish] [data-study-finish-button]")
    page.wait_for_selector("[data-completion-code]")
    audit.check(page, "completion code")

    # a second participant fails the test and is screened out
    other = chromium.new_context()
    try:
        out = other.new_page()
        out.goto(f"{entry}?PROLIFIC_PID={PID_OUT}")
        out.click("button[value=agree]")
        out.wait_for_selector("[data-study-instructions]")
        fail_screening(campaign, PID_OUT)
        out.goto(f"{site}/campaigns/{campaign.pk}/annotate/")
        out.wait_for_selector(".all-done")
        audit.check(out, "screened out: all done")
        out.goto(f"{site}/study/finish/")
        out.click("[data-study-leave] summary")
        out.click("[data-study-leave] button[value=leave]")
        out.wait_for_selector("[data-completion-code]")
        audit.check(out, "screened out: code")
    finally:
        other.close()

    # a fresh browser: the study session is gone; the sign-in page; the first participant
    # comes back on it and is asked for the resume code
    fresh = chromium.new_context()
    try:
        anon = fresh.new_page()
        anon.goto(f"{site}/study/")
        anon.wait_for_selector("[data-study-message]")
        audit.check(anon, "study session ended")
        anon.goto(f"{entry}?PROLIFIC_PID={PID}&STUDY_ID=st1&SESSION_ID=se1")
        anon.wait_for_selector("[data-study-continue]")
        audit.check(anon, "resume code")
        anon.fill("input[name=code]", "WRONG-CODE")
        anon.click("[data-study-continue] button[type=submit]")
        anon.wait_for_selector("#resume-error")
        audit.check(anon, "resume code refused")
        anon.goto(f"{site}/login/")
        audit.check(anon, "sign in")
        anon.fill("input[name=username]", "alice")
        anon.fill("input[name=password]", "not her password")
        anon.click("button[type=submit]")
        anon.wait_for_selector("form .errorlist, form [role=alert]")
        audit.check(anon, "sign in refused")
        # an annotator: My tasks, then pairs before and after answering, and the error
        login(anon, live_server, "alice", "pw-alice")
        anon.goto(f"{site}/tasks/")
        audit.check(anon, "My tasks")
        anon.goto(f"{site}/campaigns/{pairs.pk}/annotate/")
        anon.wait_for_selector("[data-pair-row]:focus")
        audit.check(anon, "pair before answering")
        check_pair_card(anon)
        anon.locator("[data-pair-row]").first.focus()
        anon.keyboard.press("a")
        anon.keyboard.press("2")
        marked_beyond_colour(
            anon,
            "[data-pair-row] .pair-buttons input:checked + span",
            "[data-pair-row] .pair-buttons input:not(:checked) + span",
        )
        audit.check(anon, "pair one question answered")
        via = submit_unguarded(anon, "[data-pair-form]")
        anon.wait_for_selector(".form-error")
        audit.check(anon, "pair submitted incomplete: the error", via=via)
        for i in range(anon.locator("[data-pair-row]").count()):
            anon.locator("[data-pair-row]").nth(i).focus()
            anon.keyboard.press("b")
            anon.keyboard.press("1")
        via = posted(anon, lambda: anon.keyboard.press("Enter"))
        anon.wait_for_selector(".notice")
        assert spoken_live(anon, "Saved.") == "polite"
        audit.check(anon, "pair answered: the next card", via=via)
    finally:
        fresh.close()

    # then no state of any page had a serious or critical violation, and every annotator
    # page was checked
    assert not audit.failures, "\n".join(audit.failures)
    assert set(ANNOTATOR_PAGES) <= set(audit.seen), sorted(set(ANNOTATOR_PAGES) - set(audit.seen))
    assert set(audit.seen) <= set(ANNOTATOR_PAGES), sorted(set(audit.seen) - set(ANNOTATOR_PAGES))
