"""A researcher in Chromium verifies a metadata run on the demo dataset (made against the
local OpenAI-compatible server) with the keyboard alone: accept with y, edit with e (the
focus on the editor's heading, so no key changes a field by accident; domains ticked, ranked
skills, difficulty key), reject with r, move back with the arrow key; the next card arrives
by htmx, the item's metadata changes as decided, the instruction shows as text, and the page
fits a 390 px phone."""

from __future__ import annotations

import pytest

from annotation.metadata.selectors import item_metadata
from annotation.models import Item, MetadataProposal, MetadataVerification
from devtools.openai_server import FakeOpenAIServer
from judging.models import MetadataRun, RunStatus
from judging.services.metadata import metadata_batch_range, metadata_run_create
from tests.browser.conftest import login
from tests.browser.layout import PHONE, overflow
from tests.judging.test_metadata_runs import demo_dataset, llm_judge

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAYLOAD = '<img src=x onerror="alert(1)"> <script>alert(2)</script> **not bold**'


@pytest.fixture
def proposed(project, researcher):
    """The demo dataset, its first item's instruction a markup payload, and a finished
    metadata run over it (the server's own choice for every item)."""
    dataset = demo_dataset(project)
    first = dataset.items.order_by("pk").first()
    Item.objects.filter(pk=first.pk).update(instruction=PAYLOAD)
    with FakeOpenAIServer(style="json") as server:
        run = metadata_run_create(judge=llm_judge(project, server), dataset=dataset)
        MetadataRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
        last = dataset.items.order_by("-pk").first().pk
        metadata_batch_range(run_id=run.pk, after_id=0, last_id=last)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.done == 16
    return dataset, run


def fresh(item) -> dict:
    return item_metadata(item=Item.objects.get(pk=item.pk))


def edit_values(page) -> dict:
    """The editor's values: the ranked skills, the ticked domains, the difficulty level."""
    return page.evaluate(
        """() => ({
            ...Object.fromEntries([...document.querySelectorAll('[data-edit] select')]
                .map(s => [s.name, s.value])),
            domains: [...document.querySelectorAll('[data-edit] input[name=domains]:checked')]
                .map(c => c.value),
            difficulty: (document.querySelector('[data-edit] input[name=difficulty]:checked')
                || {}).value,
        })"""
    )


def tab_to(page, selector: str) -> None:
    """Press Tab until the focus is on an element matching `selector`."""
    for _ in range(40):
        if page.evaluate("(sel) => document.activeElement.matches(sel)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def test_a_researcher_verifies_proposals_with_the_keyboard(page, live_server, proposed):
    dataset, run = proposed
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    items = list(dataset.items.order_by("pk"))
    proposals = {p.item_id: p for p in MetadataProposal.objects.filter(origin=f"run:{run.pk}")}
    login(page, live_server, "rita", "pw-rita")
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/metadata/")
    # the first item: its instruction is shown as text, never as markup
    card = page.locator("[data-metadata-card]")
    assert PAYLOAD in page.inner_text("[data-instruction]")
    assert page.locator("[data-instruction] img, [data-instruction] script").count() == 0
    # when y accepts it
    page.keyboard.press("y")
    page.wait_for_selector("[data-notice]")
    assert "accepted" in page.inner_text("[data-notice]")
    accepted = proposals[items[0].pk]
    assert fresh(items[0]) == {
        "domains": sorted(accepted.domains),
        "skills": accepted.skills,
        "difficulty": accepted.difficulty,
    }
    # the second item: e edits. The focus is on the editor's heading, so an arrow key pressed
    # at once changes nothing; Tab reaches the domain checkboxes (Space ticks one more), the
    # ranked skills (an arrow key moves the third), and 2 sets the level even on a select
    assert items[1].external_id in card.locator("h2").inner_text()
    page.keyboard.press("e")
    page.wait_for_selector("[data-edit-heading]:focus")
    before = edit_values(page)
    page.keyboard.press("ArrowDown")
    assert edit_values(page) == before
    tab_to(page, "input[name=domains]:not(:checked)")
    page.keyboard.press("Space")
    tab_to(page, "select[name=skill_3]")
    chosen = edit_values(page)
    for _ in range(6):  # past the first two skills' choices
        if chosen["skill_3"] not in (chosen["skill_1"], chosen["skill_2"], before["skill_3"]):
            break
        page.keyboard.press("ArrowDown")
        chosen = edit_values(page)
    page.keyboard.press("2")  # the level, not a choice of the focused select
    assert edit_values(page) == {**chosen, "difficulty": "2"}
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => (document.querySelector('[data-notice]') || {}).textContent?.includes('edited')"
    )
    edited = fresh(items[1])
    assert edited["domains"] == sorted(chosen["domains"]) and len(chosen["domains"]) == 2
    assert len(before["domains"]) == 1 and set(before["domains"]) < set(chosen["domains"])
    assert edited["skills"] == [chosen["skill_1"], chosen["skill_2"], chosen["skill_3"]]
    assert edited["difficulty"] == 2
    # the third item: r rejects it; the item keeps its own metadata
    kept = fresh(items[2])
    page.keyboard.press("r")
    page.wait_for_function(
        "() => (document.querySelector('[data-notice]') || {}).textContent?.includes('rejected')"
    )
    assert fresh(items[2]) == kept
    verdicts = dict(MetadataVerification.objects.values_list("item_id", "verdict"))
    assert verdicts == {items[0].pk: "accepted", items[1].pk: "edited", items[2].pk: "rejected"}
    assert all(v.verified_by.username == "rita" for v in MetadataVerification.objects.all())
    # ArrowLeft goes back to the rejected item, shown as verified
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector("[data-verified]")
    assert items[2].external_id in card.locator("h2").inner_text()
    # the page fits a phone
    page.set_viewport_size(PHONE)
    page.keyboard.press("e")
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    assert errors == [] and page.dialogs == []
    # the dataset page shows the run's agreement with what was verified
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/")
    table = page.locator(f"table[data-origin='run:{run.pk}']")
    table.wait_for()
    assert table.locator("tr[data-group=overall] td").first.inner_text() == "3"


def test_a_key_pressed_as_the_next_card_arrives_reaches_the_wired_form(page, live_server, proposed):
    """A fast keyboard user: the verdict for the next card is given right after the card is
    swapped in (the next task of the event loop). The new form must already be wired to
    htmx, so the verdict goes by htmx and the page is not reloaded by a native submit."""
    dataset, _ = proposed
    items = list(dataset.items.order_by("pk"))
    login(page, live_server, "rita", "pw-rita")
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/metadata/")
    page.wait_for_selector("[data-verify-form]")
    page.evaluate(
        """() => {
            window.samePage = true;
            document.body.addEventListener("htmx:afterSwap", () => setTimeout(() =>
                document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "r", bubbles: true}))
            , 0), {once: true});
        }"""
    )
    page.keyboard.press("y")
    page.wait_for_function(
        "() => (document.querySelector('[data-notice]') || {}).textContent?.includes('rejected')"
    )
    assert page.evaluate("() => window.samePage === true")
    verdicts = dict(MetadataVerification.objects.values_list("item_id", "verdict"))
    assert verdicts == {items[0].pk: "accepted", items[1].pk: "rejected"}
