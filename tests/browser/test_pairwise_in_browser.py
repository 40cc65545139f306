"""A pairwise campaign in a real Chromium, from creation to scoring to the preference
analytics: a researcher creates and activates it on the campaign pages, then an annotator
compares pairs with the keyboard alone, on a laptop (1440 x 900, responses side by side) and
on a phone (390 x 844 and 360, stacked); nothing scrolls sideways, every choice is a
finger-sized target, model names never reach the page, hostile text stays inert; the
researcher's preference page then shows the labels given."""

from __future__ import annotations

import json

import pytest

from analytics.report import snapshots
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    HumanPreference,
    Task,
    UploadSource,
)
from tests.analytics.snapshot_worker import compute_pending
from tests.browser.conftest import login
from tests.browser.layout import LAPTOP, PHONE, SMALL_PHONE, fits, overflow, shoot, small_targets
from tests.browser.test_analytics_dashboard import no_worker  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODELS = ("secret-model-alpha", "secret-model-beta")
HOSTILE = "Hello <script>alert(1)</script> <img src=x onerror=alert(1)>"
LONG = (
    "\n\n".join(
        f"Paragraph {n}: " + "a fairly long sentence of the answer. " * 10 for n in range(12)
    )
    + "\n\nhttps://example.org/"
    + "a-very-long-path-segment-" * 8
)


@pytest.fixture
def dataset(project, tmp_path):
    rows = [
        {
            "id": f"q{i}",
            "instruction": f"Question **number {i}**",
            "skills": ["Factuality", "Comprehension", "Readability"],
            "responses": [
                {"model": MODELS[0], "text": LONG if i == 0 else f"First answer {i}. {HOSTILE}"},
                {"model": MODELS[1], "text": f"Second answer {i}."},
            ],
        }
        for i in range(3)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    upload = dataset_upload_create(
        project=project,
        dataset_name="Pair set",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    return dataset_import(upload_id=upload.pk).dataset


def create_in_the_browser(page, live_server, project, annotator) -> Campaign:
    page.set_viewport_size(LAPTOP)
    login(page, live_server, "rita", "pw-rita")
    page.goto(f"{live_server.url}/projects/{project.slug}/campaigns/new/")
    page.fill("input[name=name]", "Which answer is better")
    page.check("input[name=mode][value=pairwise]")
    page.click("#pair-settings summary")
    page.select_option("select[name=pair_design]", "all_pairs")
    page.check("input[name=pair_choices][value=both_bad]")
    page.check("input[name=pair_strength]")
    page.fill("input[name=overlap]", "1")
    page.check(f"input[name=annotators][value='{annotator.pk}']")
    page.click("#campaign-form button[type=submit]")
    page.wait_for_selector("text=created as a draft")
    campaign = Campaign.objects.get(name="Which answer is better")
    assert (campaign.mode, campaign.pair_choices) == ("pairwise", ["a", "b", "tie", "both_bad"])
    page.click("form[action$='/activate/'] button")
    page.wait_for_load_state()
    campaign.refresh_from_db()
    assert campaign.status == "active"
    assert Task.objects.filter(campaign=campaign).count() == 3
    return campaign


def layout(page) -> dict:
    return page.evaluate(
        "() => { const [l, r] = [...document.querySelectorAll('.pair-responses .card')]"
        ".map(e => e.getBoundingClientRect());"
        " return {lx: l.left, ly: l.top, lb: l.bottom, rx: r.left, ry: r.top}; }"
    )


def answer_with_keys(page, keys: list[str]) -> None:
    action = page.get_attribute("[data-pair-form]", "hx-post")
    for key in keys:
        page.wait_for_timeout(60)  # a little focused time on every row
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-pair-form]');"
        " return !f || f.getAttribute('hx-post') !== prev }",
        arg=action,
    )


def test_a_pairwise_campaign_from_creation_to_keyboard_only_scoring(
    chromium,
    page,
    live_server,
    project,
    researcher,
    annotator,
    dataset,
    tmp_path,
    no_worker,  # noqa: F811
):
    shots = tmp_path / "shots"
    campaign = create_in_the_browser(page, live_server, project, annotator)

    context = chromium.new_context(viewport=LAPTOP)
    alice = context.new_page()
    alice.set_default_timeout(20_000)
    dialogs: list[str] = []
    alice.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        login(alice, live_server, "alice", "pw-alice")
        scoring = f"{live_server.url}/campaigns/{campaign.pk}/annotate/"
        seen: set[int] = set()
        for viewport, keys in (
            # a (left), 2 much; tie; both bad; b (right), 1 slightly
            (LAPTOP, ["a", "2", "t", "x", "b", "1"]),
            # j/k and arrows move; the last row answered first, then the rest from the top
            (
                PHONE,
                [
                    "k",
                    "j",
                    "ArrowDown",
                    "ArrowDown",
                    "t",
                    "ArrowUp",
                    "ArrowUp",
                    "ArrowUp",
                    "b",
                    "2",
                    "a",
                    "1",
                    "x",
                ],
            ),
        ):
            alice.set_viewport_size(viewport)
            alice.goto(scoring)
            alice.wait_for_selector("[data-pair-row]:focus")
            html = alice.content()
            assert not any(name in html for name in MODELS)
            lease = Assignment.objects.select_related("task").get(
                annotator=annotator, status=AssignmentStatus.ACTIVE
            )
            seen.add(lease.pk)
            spots = layout(alice)
            if viewport is LAPTOP:
                assert abs(spots["ly"] - spots["ry"]) < 1 and spots["rx"] > spots["lx"], spots
            else:
                assert spots["ry"] >= spots["lb"] and abs(spots["rx"] - spots["lx"]) < 1, spots
            assert small_targets(alice, ".pair-btn span") == []
            assert small_targets(alice, "[data-submit]") == []
            shoot(alice, shots, "pair-card")
            assert fits(alice), overflow(alice)
            answer_with_keys(alice, keys)
            prefs = {
                (p.skill.name if p.skill else "Overall"): p
                for p in HumanPreference.objects.filter(assignment=lease).select_related("skill")
            }
            left, right = ("b", "a") if lease.task.b_left else ("a", "b")
            if viewport is LAPTOP:
                expected = {
                    "Factuality": (left, 2),
                    "Comprehension": ("tie", None),
                    "Readability": ("both_bad", None),
                    "Overall": (right, 1),
                }
            else:
                expected = {
                    "Factuality": (right, 2),
                    "Comprehension": (left, 1),
                    "Readability": ("both_bad", None),
                    "Overall": ("tie", None),
                }
            assert {k: (p.choice, p.strength) for k, p in prefs.items()} == expected
            assert all(p.time_ms and p.time_ms > 0 for p in prefs.values()), prefs
            assert Assignment.objects.get(pk=lease.pk).active_ms > 0
        # the third pair at 360 px: it fits too; an incomplete Enter asks for the rest
        alice.set_viewport_size(SMALL_PHONE)
        alice.wait_for_selector("[data-pair-row]:focus")
        assert fits(alice), overflow(alice)
        assert alice.locator("img[src=x]").count() == 0 and "<script>" in alice.inner_text(
            ".pair-responses"
        )
        alice.keyboard.press("a")
        alice.keyboard.press("Enter")
        assert "Please answer every question first" in alice.inner_text("[data-annotate-status]")
        assert len(seen) == 2 and not dialogs
    finally:
        context.close()

    # ... to the preference analytics: the researcher's report reads the two pairs answered
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    (done,) = compute_pending()
    assert done.status == "done", done.error
    page.set_viewport_size(LAPTOP)
    page.goto(f"{live_server.url}/projects/{project.slug}/analytics/preferences/")
    page.wait_for_selector("#preference-matrix")
    assert page.locator("#pref-skill-name").inner_text() == "Overall"
    counts = page.locator("#pref-counts").inner_text()
    # Overall: one side preferred on the first pair, a tie on the second, by one rater
    assert counts.startswith("2 labels by 1 rater on 2 pairs of 2 items"), counts
    assert "A/B preferred 1, tie 1, both bad 0" in counts, counts
    headers = page.eval_on_selector_all(
        "#preference-matrix tbody th", "ths => ths.map(t => t.getAttribute('title'))"
    )
    assert sorted(headers) == sorted(MODELS)
    # two labels are far below Bradley-Terry's minimum: no strengths chart, the reason instead
    assert page.locator(".strengths-chart circle.dot").count() == 0
    assert "too few: n = 2 (at least 20 labels)" in page.inner_text("main")
    assert fits(page), overflow(page)
