"""A reviewer in Chromium: from the home page to the campaign's review queue, adjudicates a
response with the keyboard alone (the next one arrives by htmx), and the long export and
the adjudicated report show the settled score beside the raw ones."""

from __future__ import annotations

import csv
import io

import pytest

from analytics.exports.services import ScoreExport, export_options_clean
from analytics.report.selectors import project_report
from annotation.models import AdjudicatedScore
from tests.annotation.test_review import people, reviewer, rid, scored  # noqa: F401
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_reviewer_adjudicates_by_keyboard(page, live_server, scored, reviewer):  # noqa: F811
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    # given the reviewer on the home page
    login(page, live_server, "rex", "pw-rex")
    # when: home -> the project's review page -> the campaign's queue -> the first entry
    page.click("text=Review")
    page.click(f"a[href='/campaigns/{scored.pk}/review/']")
    assert page.locator("[data-queue-entry]").count() == 3
    page.focus("[data-review-start]")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-skill-row]:focus")
    first = page.url
    assert first.endswith(f"/review/{rid('m1', 'i0')}/")  # the widest disagreement first
    labels = page.eval_on_selector_all(
        ".given tbody td:first-child", "cells => cells.map(c => c.textContent.trim())"
    )
    assert labels and all(label.startswith("Annotator ") for label in labels)
    # three skills: 4, N/A, then R opens the note, typed, Esc back, 2; Enter saves
    page.keyboard.press("4")
    page.keyboard.press("n")
    page.keyboard.press("r")
    page.keyboard.type("looked again")
    page.keyboard.press("Escape")
    page.keyboard.press("2")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    # then the next response's card arrives in place, its address pushed
    page.wait_for_function("prev => location.href !== prev", arg=first)
    page.wait_for_selector("[data-skill-row]:focus")
    assert "Saved 3 adjudicated scores" in page.inner_text("#review-card")
    settled = {
        (a.skill.name, a.score, a.is_na, a.note)
        for a in AdjudicatedScore.objects.filter(response_id=rid("m1", "i0")).select_related(
            "skill"
        )
    }
    assert settled == {
        ("Factuality", 4, False, ""),
        ("Comprehension", None, True, ""),
        ("Readability", 2, False, "looked again"),
    }
    assert errors == []
    # and the export and the adjudicated report show it beside the raw scores
    options = export_options_clean(
        project=scored.project, kind="long", fmt="csv", filters={"skill": ["Factuality"]}
    )
    rows = list(csv.DictReader(io.StringIO("".join(ScoreExport(options).chunks()))))
    mine = [r for r in rows if r["item"] == "i0" and r["system"] == "m1"]
    assert sorted(r["score"] for r in mine) == ["1", "3", "5"]
    assert {r["adjudicated_score"] for r in mine} == {"4"}
    report = project_report(
        project=scored.project, resamples=0, with_breakdowns=False, human_scores="adjudicated"
    )
    assert report["human_scores"] == "adjudicated" and report["adjudicated_pairs"] == 3
